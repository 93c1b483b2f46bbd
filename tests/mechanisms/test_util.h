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

#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>

#include "mech.h"

#define TEST_P_MIN 1e-4

/* A uniform double in [0, 1) from the 53 high bits of a 64-bit linear
 * congruential stream: fixed inputs for tests (never noise). */
static inline double test_lcg_unit(uint64_t *s)
{
	*s = *s * 6364136223846793005u + 1442695040888963407u;
	return (double)(*s >> 11) * 0x1p-53;
}

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

/* A location and a scale: the context of the CDFs below. */
struct test_loc_scale {
	double loc, scale;
};

/* CDF of the Laplace distribution with density exp(-|x - loc| / scale) /
 * (2 scale); ctx is a struct test_loc_scale. */
static inline double test_cdf_laplace(double x, const void *ctx)
{
	const struct test_loc_scale *ls = ctx;
	double z = (x - ls->loc) / ls->scale;

	return z < 0 ? 0.5 * exp(z) : 1 - 0.5 * exp(-z);
}

/* CDF of the normal distribution N(loc, scale^2); ctx as above. */
static inline double test_cdf_gauss(double x, const void *ctx)
{
	const struct test_loc_scale *ls = ctx;

	return gsl_cdf_gaussian_P(x - ls->loc, ls->scale);
}

/* The mass of prob[0..2w] that lies outside [-w, w] (1 - their sum) goes
 * half to each end cell, as a histogram that counts draws beyond w in the
 * end cells sees it (test_int_cell). */
static inline void test_fold_tails(double *prob, int w)
{
	double inside = 0.0;

	for (int i = 0; i < 2 * w + 1; i++)
		inside += prob[i];
	prob[0] += (1.0 - inside) / 2;
	prob[2 * w] += (1.0 - inside) / 2;
}

/* Exact pmf of the discrete Laplace of scale t, P(z) = (1 - q)/(1 + q)
 * q^|z| with q = e^(-1/t) (CKS 2020, Definition 2), on [-w, w] (cell 0 =
 * -w), tails folded. */
static inline void test_dlap_pmf(double t, int w, double *prob)
{
	double q = exp(-1.0 / t), c = (1.0 - q) / (1.0 + q);

	for (int z = -w; z <= w; z++)
		prob[z + w] = c * exp(-fabs((double)z) / t);
	test_fold_tails(prob, w);
}

/* Exact pmf of the discrete Gaussian, P(z) proportional to
 * exp(-z^2 / (2 sigma^2)) (CKS 2020, Definition 1), on [-w, w], tails
 * folded; the normaliser sums far enough out that what it leaves is below
 * a double's resolution. */
static inline void test_dgauss_pmf(double sigma, int w, double *prob)
{
	double norm = 0.0;
	int wide = w + (int)(40 * sigma) + 40;

	for (int z = -wide; z <= wide; z++)
		norm += exp(-(double)z * z / (2 * sigma * sigma));
	for (int z = -w; z <= w; z++)
		prob[z + w] = exp(-(double)z * z / (2 * sigma * sigma)) / norm;
	test_fold_tails(prob, w);
}

/* The histogram cell of an integer draw z on [-w, w]: the end cells take
 * the tails. */
static inline int test_int_cell(int64_t z, int w)
{
	return (int)(z < -w ? -w : z > w ? w : z) + w;
}

/*
 * The sample x[0..n) (sorted in place) fits the law cdf with parameters
 * `right` (KS p above TEST_P_MIN), and the same sample tells each of the
 * `n_wrong` laws in `wrong` apart (p below it): the test and its power.
 */
static inline void test_expect_ks_fit(double *x, size_t n,
				      double (*cdf)(double, const void *),
				      const struct test_loc_scale *right,
				      const struct test_loc_scale *wrong, size_t n_wrong)
{
	cr_assert_gt(test_ks_p(x, n, cdf, right), TEST_P_MIN, "loc %g scale %g", right->loc,
		     right->scale);
	for (size_t i = 0; i < n_wrong; i++)
		cr_assert_lt(test_ks_p(x, n, cdf, &wrong[i]), TEST_P_MIN, "loc %g scale %g",
			     wrong[i].loc, wrong[i].scale);
}

/*
 * n draws of `draw` from the stream test_rng(tag) are finite, above `lower`
 * and fit the law cdf(., ctx) (KS p above TEST_P_MIN); the same draws with
 * their excess over `lower` multiplied by `stretch` are told apart from it
 * (p below): the test and its power.
 */
static inline void test_expect_sampler_fit(uint8_t tag, int (*draw)(mech_rng *, double *),
					   size_t n, double lower,
					   double (*cdf)(double, const void *), const void *ctx,
					   double stretch)
{
	double *x = malloc(n * sizeof(double));
	mech_rng *r = test_rng(tag);

	cr_assert_not_null(x);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(draw(r, &x[i]), 0);
		cr_assert(x[i] > lower && isfinite(x[i]), "draw %zu: %g", i, x[i]);
	}
	cr_assert_gt(test_ks_p(x, n, cdf, ctx), TEST_P_MIN);
	for (size_t i = 0; i < n; i++)
		x[i] = lower + stretch * (x[i] - lower);
	cr_assert_lt(test_ks_p(x, n, cdf, ctx), TEST_P_MIN, "stretched by %g", stretch);
	free(x);
	mech_rng_free(r);
}

#endif
