/*
 * bench_common.c: the clock and the medians of bench_common.h.
 */
#include <math.h>
#include <stdlib.h>
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
