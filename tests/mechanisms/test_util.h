/*
 * test_util.h: goodness-of-fit helpers for the mechanisms tests.
 *
 * Expected distributions come from closed forms written in the tests; the
 * p-values from GSL's chi-squared and Kolmogorov distributions.  Seeds are
 * fixed, so every test is deterministic; the thresholds (p > 1e-4) are loose
 * enough for a correct sampler and the sample sizes large enough that a wrong
 * scale or a shifted mean drives p far below them (the *_power tests check
 * exactly that on the same samples).
 */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "mech.h"

#define TEST_P_MIN 1e-4

static inline mech_rng *test_rng(uint8_t tag)
{
	uint8_t seed[32];

	memset(seed, 0x5a, sizeof(seed));
	seed[0] = tag;
	return mech_rng_new_seeded(seed);
}

/*
 * Pearson chi-squared p-value of observed counts against expected
 * probabilities prob[0..k) for n draws.  Cells with expected count below 5
 * are pooled into their neighbour (in index order), so tails are handled.
 */
static inline double test_chi2_p(const uint64_t *obs, const double *prob, size_t k, uint64_t n)
{
	double stat = 0.0, eacc = 0.0, oacc = 0.0;
	int cells = 0;

	for (size_t i = 0; i < k; i++) {
		eacc += prob[i] * (double)n;
		oacc += (double)obs[i];
		if (eacc >= 5.0 || i == k - 1) {
			if (eacc > 0.0) {
				stat += (oacc - eacc) * (oacc - eacc) / eacc;
				cells++;
			} else if (oacc > 0.0) {
				return 0.0;
			}
			eacc = oacc = 0.0;
		}
	}
	if (cells < 2)
		return 1.0;
	return gsl_cdf_chisq_Q(stat, cells - 1);
}

static int test_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Kolmogorov distribution survival function (asymptotic series). */
static inline double test_kolmogorov_q(double lambda)
{
	double s = 0.0;

	if (lambda < 0.2)
		return 1.0;
	for (int j = 1; j <= 100; j++)
		s += 2.0 * ((j & 1) ? 1.0 : -1.0) * exp(-2.0 * j * j * lambda * lambda);
	return s < 0 ? 0 : (s > 1 ? 1 : s);
}

/* One-sample KS p-value of x[0..n) (sorted in place) against cdf. */
static inline double test_ks_p(double *x, size_t n, double (*cdf)(double, const void *), const void *ctx)
{
	double d = 0.0, sn = sqrt((double)n);

	qsort(x, n, sizeof(double), test_cmp_double);
	for (size_t i = 0; i < n; i++) {
		double f = cdf(x[i], ctx);
		double lo = f - (double)i / (double)n, hi = (double)(i + 1) / (double)n - f;

		if (lo > d)
			d = lo;
		if (hi > d)
			d = hi;
	}
	return test_kolmogorov_q((sn + 0.12 + 0.11 / sn) * d);
}

#endif
