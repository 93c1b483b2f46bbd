/*
 * bench_common.c: the clock, the medians and the latency quantiles of
 * bench_common.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n)
{
	qsort(v, n, sizeof(double), cmp_double);
}

double bench_median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	bench_sort(v, n);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_quantile(const double *sorted, size_t n, double q)
{
	size_t i;

	if (n == 0)
		return NAN;
	i = (size_t)ceil(q * (double)n);
	if (i > 0)
		i--;
	if (i >= n)
		i = n - 1;
	return sorted[i];
}

int bench_lat_push(bench_lat *l, double us)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4096;
		double *v = realloc(l->v, cap * sizeof(double));

		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = us;
	return 0;
}

void bench_lat_free(bench_lat *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}
