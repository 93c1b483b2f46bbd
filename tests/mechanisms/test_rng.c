/*
 * test_rng.c: the CSPRNG kinds.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "mech.h"
#include "mech_internal.h"

Test(rng, seeded_is_deterministic_and_flagged)
{
	uint8_t seed[32] = {1, 2, 3};
	uint8_t a[300], b[300];
	mech_rng *r1 = mech_rng_new_seeded(seed), *r2 = mech_rng_new_seeded(seed);

	cr_assert(mech_rng_is_deterministic(r1));
	cr_assert_eq(mech_rng_bytes(r1, a, sizeof(a)), 0);
	cr_assert_eq(mech_rng_bytes(r2, b, sizeof(b)), 0);
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
	mech_rng_free(r1);
	mech_rng_free(r2);
}

Test(rng, system_is_not_deterministic)
{
	uint8_t a[32], b[32];
	mech_rng *r = mech_rng_new_system();

	cr_assert(!mech_rng_is_deterministic(r));
	cr_assert_eq(mech_rng_bytes(r, a, sizeof(a)), 0);
	cr_assert_eq(mech_rng_bytes(r, b, sizeof(b)), 0);
	/* Two 256-bit draws collide with probability 2^-256. */
	cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
	mech_rng_free(r);
}

#include "test_util.h"

static double cdf_uniform(double x, const void *ctx)
{
	(void)ctx;
	return x < 0 ? 0 : (x > 1 ? 1 : x);
}

static double cdf_normal(double x, const void *ctx)
{
	const double *shift = ctx;

	return gsl_cdf_ugaussian_P(x - (shift ? *shift : 0.0));
}

Test(rng, uniform_is_uniform)
{
	enum { N = 200000 };
	double *x = malloc(N * sizeof(double));
	mech_rng *r = test_rng(1);

	for (size_t i = 0; i < N; i++) {
		cr_assert_eq(mech_rng_uniform(r, &x[i]), 0);
		cr_assert(x[i] >= 0.0 && x[i] < 1.0);
		/* 53 bits: every value is a multiple of 2^-53. */
		cr_assert_eq(ldexp(x[i], 53), floor(ldexp(x[i], 53)));
	}
	cr_assert_gt(test_ks_p(x, N, cdf_uniform, NULL), TEST_P_MIN);
	free(x);
	mech_rng_free(r);
}

Test(rng, normal_fill_is_standard_normal)
{
	enum { N = 200001 }; /* odd: the unpaired last value is exercised */
	double *x = malloc(N * sizeof(double));
	double shift = 0.02;
	mech_rng *r = test_rng(2);

	cr_assert_eq(mech_rng_normal_fill(r, x, N), 0);
	cr_assert_gt(test_ks_p(x, N, cdf_normal, NULL), TEST_P_MIN);
	/* Power: a mean shift of 0.02 sd is detected on the same sample. */
	cr_assert_lt(test_ks_p(x, N, cdf_normal, &shift), TEST_P_MIN);
	free(x);
	mech_rng_free(r);
}

static double cdf_exp1(double x, const void *ctx)
{
	(void)ctx;
	return x <= 0 ? 0.0 : -expm1(-x);
}

/* mech__exp1 is Exp(1) (the exponential race and the Box-Muller radius
 * rely on it); its precision at the ends is by construction. */
Test(rng, exp1_is_exponential)
{
	/* Power: the same sample stretched to mean 1.05 is told apart. */
	test_expect_sampler_fit(4, mech__exp1, 200000, 0.0, cdf_exp1, NULL, 1.05);
}

Test(rng, uint_below_is_uniform_and_unbiased)
{
	enum { N = 300000, K = 7 };
	uint64_t obs[K] = {0}, v;
	double prob[K];
	mech_rng *r = test_rng(3);

	for (int i = 0; i < K; i++)
		prob[i] = 1.0 / K;
	for (int i = 0; i < N; i++) {
		cr_assert_eq(mech_rng_uint_below(r, K, &v), 0);
		cr_assert_lt(v, (uint64_t)K);
		obs[v]++;
	}
	cr_assert_gt(test_chi2_p(obs, prob, K, N), TEST_P_MIN);
	cr_assert_eq(mech_rng_uint_below(r, 0, &v), ACCT_EINVAL);
	/* A bound just above 2^63 rejects almost half the draws; still works. */
	cr_assert_eq(mech_rng_uint_below(r, (UINT64_C(1) << 63) + 1, &v), 0);
	mech_rng_free(r);
}

Test(rng, bernoulli_matches_p)
{
	static const double ps[] = {0.3, 0.5, 1.0 / 3.0, 0.999, 1e-3};
	enum { N = 200000 };
	mech_rng *r = test_rng(4);

	for (size_t j = 0; j < sizeof(ps) / sizeof(ps[0]); j++) {
		uint64_t obs[2] = {0};
		double prob[2] = {1.0 - ps[j], ps[j]};
		bool b;

		for (int i = 0; i < N; i++) {
			cr_assert_eq(mech_rng_bernoulli(r, ps[j], &b), 0);
			obs[b]++;
		}
		cr_assert_gt(test_chi2_p(obs, prob, 2, N), TEST_P_MIN, "p = %g", ps[j]);
	}
	{
		bool b = true;

		cr_assert_eq(mech_rng_bernoulli(r, 0.0, &b), 0);
		cr_assert(!b);
		cr_assert_eq(mech_rng_bernoulli(r, 1.0, &b), 0);
		cr_assert(b);
		cr_assert_eq(mech_rng_bernoulli(r, NAN, &b), ACCT_EINVAL);
		cr_assert_eq(mech_rng_bernoulli(r, 1.5, &b), ACCT_EINVAL);
		cr_assert_eq(mech_rng_bernoulli(r, 1e-300, &b), 0);
		cr_assert(!b);
	}
	mech_rng_free(r);
}
