/*
 * bench_common.c: the option walk, the option number parser and the CSV
 * loader of the trainer benchmarks (bench_common.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

static bool is_flag(const char *key, const char *const *flags)
{
	for (size_t f = 0; flags && flags[f]; f++)
		if (strcmp(key, flags[f]) == 0)
			return true;
	return false;
}

int bench_options(int argc, char **argv, int first, const char *const *flags, bench_option_fn fn,
		  void *opts)
{
	for (int i = first; i < argc; i++) {
		const char *key = argv[i], *value = NULL;

		if (!is_flag(key, flags)) {
			if (i + 1 == argc)
				return -1;
			value = argv[++i];
		}
		if (fn(opts, key, value) < 0)
			return -1;
	}
	return 0;
}

int bench_number(const char *v, char sep, double lo, double hi, double *ret)
{
	char *end;
	double x;

	if (!v)
		return -1;
	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || (*end && *end != sep) || !isfinite(x) || x < lo || x > hi)
		return -1;
	*ret = x;
	return 0;
}

int bench_number_list(const char *v, double lo, double hi, double *out, size_t max,
		      size_t *ret_n)
{
	size_t n = 0;

	while (v && n < max) {
		if (bench_number(v, ',', lo, hi, &out[n]) != 0)
			return -1;
		n++;
		v = strchr(v, ',');
		v = v ? v + 1 : NULL;
	}
	if (v || n == 0)
		return -1;
	*ret_n = n;
	return 0;
}

trn_dataset *bench_rows(const trn_dataset *all, size_t start, size_t n)
{
	trn_dataset *ds = NULL;

	if (start >= all->n)
		return NULL;
	n = n < all->n - start ? n : all->n - start;
	if (trn_dataset_new(n, all->d, all->num_classes, &ds, NULL) != 0)
		return NULL;
	memcpy(ds->x, all->x + start * all->d, n * all->d * sizeof(double));
	memcpy(ds->y, all->y + start, n * sizeof(uint32_t));
	return ds;
}

/* One row of the CSV: its d features and its label. */
static int csv_row(const char *line, size_t d, double *x, int64_t *y)
{
	const char *s = line;
	char *end;

	for (size_t j = 0; j <= d; j++, s = end + 1) {
		double v = strtod(s, &end);

		if (end == s || !isfinite(v))
			return -1;
		if (j < d)
			x[j] = v;
		else
			*y = (int64_t)v;
	}
	return 0;
}

int bench_csv_read(const char *path, double **ret_x, int64_t **ret_y, size_t *ret_n,
		   size_t *ret_d)
{
	FILE *f = fopen(path, "r");
	char *line = malloc(BENCH_MAX_CSV_LINE);
	double *x = NULL;
	int64_t *y = NULL;
	size_t n = 0, cap = 0, d = 0;
	int rc = -1;

	if (!f || !line || !fgets(line, BENCH_MAX_CSV_LINE, f))
		goto out;
	for (char *c = line; *c; c++)
		d += *c == ',';
	while (fgets(line, BENCH_MAX_CSV_LINE, f)) {
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			double *nx = realloc(x, ncap * d * sizeof(double));
			int64_t *ny;

			if (!nx)
				goto out;
			x = nx;
			ny = realloc(y, ncap * sizeof(int64_t));
			if (!ny)
				goto out;
			y = ny;
			cap = ncap;
		}
		if (csv_row(line, d, x + n * d, y + n) < 0)
			goto out;
		n++;
	}
	*ret_x = x;
	*ret_y = y;
	*ret_n = n;
	*ret_d = d;
	x = NULL;
	y = NULL;
	rc = 0;
out:
	if (f)
		fclose(f);
	free(line);
	free(x);
	free(y);
	return rc;
}

int bench_csv_load(const char *path, trn_dataset **ret)
{
	double *x = NULL;
	int64_t *y = NULL, maxlab = 0;
	size_t n = 0, d = 0;
	int rc = bench_csv_read(path, &x, &y, &n, &d);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		maxlab = y[i] > maxlab ? y[i] : maxlab;
	if (trn_dataset_from_table(x, y, n, d, (uint32_t)maxlab + 1, "/data", ret, NULL) < 0)
		rc = -1;
	free(x);
	free(y);
	return rc;
}

void bench_standardise(const trn_dataset *ref, trn_dataset *target)
{
	size_t d = ref->d;

	for (size_t j = 0; j < d; j++) {
		double m = 0, v = 0, sd;

		for (size_t i = 0; i < ref->n; i++)
			m += ref->x[i * d + j] / (double)ref->n;
		for (size_t i = 0; i < ref->n; i++)
			v += (ref->x[i * d + j] - m) * (ref->x[i * d + j] - m) / (double)ref->n;
		sd = v > 0 ? sqrt(v) : 1.0;
		for (size_t i = 0; i < target->n; i++)
			target->x[i * d + j] = (target->x[i * d + j] - m) / sd;
	}
}

double bench_rdp_epsilon(acct_event *ev, double delta, double *ret_order)
{
	acct_options opt = {.accountant = ACCT_RDP, .neighbor = ACCT_ADD_REMOVE};
	acct_result r;
	double eps = NAN;

	if (ev && acct_epsilon(ev, delta, &opt, &r, NULL) == 0) {
		eps = r.epsilon;
		if (ret_order)
			*ret_order = r.order;
	}
	acct_event_free(ev);
	return eps;
}

int bench_project(trn_dataset **ds, const double *v, size_t k)
{
	trn_dataset *src = *ds, *out = NULL;

	if (trn_dataset_new(src->n, k, src->num_classes, &out, NULL) < 0)
		return -1;
	for (size_t i = 0; i < src->n; i++) {
		out->y[i] = src->y[i];
		for (size_t c = 0; c < k; c++) {
			double s = 0;

			for (size_t j = 0; j < src->d; j++)
				s += src->x[i * src->d + j] * v[j * k + c];
			out->x[i * k + c] = s;
		}
	}
	trn_dataset_free(src);
	*ds = out;
	return 0;
}
