/*
 * test_samplers.c: the exact samplers against their closed-form
 * distributions (CKS 2020), with power checks on the same samples.
 */
#include <math.h>

#include <criterion/criterion.h>

#include "mech.h"
#include "test_util.h"

Test(samplers, bernoulli_exp_matches_exp_minus_gamma)
{
	static const uint64_t cases[][2] = {{0, 1}, {3, 10}, {1, 1}, {5, 2}, {7, 3}, {1, 1000}};
	enum { N = 200000 };
	mech_rng *r = test_rng(10);

	for (size_t j = 0; j < sizeof(cases) / sizeof(cases[0]); j++) {
		double p = exp(-(double)cases[j][0] / (double)cases[j][1]);
		double prob[2] = {1.0 - p, p};
		uint64_t obs[2] = {0};
		bool b;

		for (int i = 0; i < N; i++) {
			cr_assert_eq(mech_sample_bernoulli_exp(r, cases[j][0], cases[j][1], &b), 0);
			obs[b]++;
		}
		if (cases[j][0] == 0)
			cr_assert_eq(obs[0], 0u);
		else
			cr_assert_gt(test_chi2_p(obs, prob, 2, N), TEST_P_MIN, "gamma %lu/%lu",
				     (unsigned long)cases[j][0], (unsigned long)cases[j][1]);
	}
	cr_assert_eq(mech_sample_bernoulli_exp(r, 1, 0, &(bool){false}), ACCT_EINVAL);
	mech_rng_free(r);
}

Test(samplers, discrete_laplace_matches_pmf)
{
	static const uint64_t cases[][2] = {{1, 1}, {1, 2}, {37, 10}, {12, 1}, {1, 8}};
	enum { N = 200000, W = 60 };
	mech_rng *r = test_rng(11);

	for (size_t j = 0; j < sizeof(cases) / sizeof(cases[0]); j++) {
		double t = (double)cases[j][0] / (double)cases[j][1];
		double prob[2 * W + 1], wrong[2 * W + 1], sum = 0;
		uint64_t obs[2 * W + 1] = {0};

		test_dlap_pmf(t, W, prob);
		test_dlap_pmf(t * 1.05, W, wrong);
		for (int i = 0; i < N; i++) {
			int64_t z;

			cr_assert_eq(mech_sample_discrete_laplace(r, cases[j][0], cases[j][1], &z), 0);
			sum += (double)z;
			obs[test_int_cell(z, W)]++;
		}
		cr_assert_gt(test_chi2_p(obs, prob, 2 * W + 1, N), TEST_P_MIN, "scale %g", t);
		/* Mean 0: |mean| within 5 standard errors (variance 2q/(1-q)^2). */
		{
			double q = exp(-1.0 / t), sd = sqrt(2 * q) / (1 - q);

			cr_assert_lt(fabs(sum / N), 5 * sd / sqrt(N), "scale %g", t);
		}
		/* Power: a 5% larger scale is rejected (scales where the
		 * distribution is not almost a point mass). */
		if (t >= 1.0)
			cr_assert_lt(test_chi2_p(obs, wrong, 2 * W + 1, N), TEST_P_MIN, "scale %g", t);
	}
	mech_rng_free(r);
}

Test(samplers, discrete_laplace_rejects_bad_scale)
{
	mech_rng *r = test_rng(12);
	int64_t z;
	uint64_t num, den;

	cr_assert_eq(mech_sample_discrete_laplace(r, 0, 1, &z), ACCT_EINVAL);
	cr_assert_eq(mech_sample_discrete_laplace(r, 1, 0, &z), ACCT_EINVAL);
	cr_assert_eq(mech_discrete_laplace_scale(0.0, &num, &den), ACCT_EINVAL);
	cr_assert_eq(mech_discrete_laplace_scale(NAN, &num, &den), ACCT_EINVAL);
	cr_assert_eq(mech_discrete_laplace_scale(INFINITY, &num, &den), ACCT_EINVAL);
	cr_assert_eq(mech_discrete_laplace_scale(2.0, &num, &den), 0);
	cr_assert_eq(num, 2u);
	cr_assert_eq(den, 1u);
	cr_assert_eq(mech_discrete_laplace_scale(0.1, &num, &den), 0);
	/* Rounded up, by less than 2^-39 relative. */
	cr_assert_geq((double)num / (double)den, 0.1);
	cr_assert_lt((double)num / (double)den, 0.1 * (1 + 0x1p-39));
	mech_rng_free(r);
}

Test(samplers, discrete_gaussian_matches_pmf)
{
	static const double sigmas[] = {0.3, 1.0, 3.0, 10.3, 25.0};
	enum { N = 200000, W = 120 };
	mech_rng *r = test_rng(13);

	for (size_t j = 0; j < sizeof(sigmas) / sizeof(sigmas[0]); j++) {
		double s = sigmas[j], used = mech_discrete_gaussian_sigma(s);
		double prob[2 * W + 1], wrong[2 * W + 1], sum = 0;
		uint64_t obs[2 * W + 1] = {0};

		cr_assert_geq(used, s);
		cr_assert_lt(used, s * (1 + 0x1p-11));
		test_dgauss_pmf(s, W, prob);
		test_dgauss_pmf(s * 1.03, W, wrong);
		for (int i = 0; i < N; i++) {
			int64_t z;

			cr_assert_eq(mech_sample_discrete_gaussian(r, s, &z), 0);
			sum += (double)z;
			obs[test_int_cell(z, W)]++;
		}
		cr_assert_gt(test_chi2_p(obs, prob, 2 * W + 1, N), TEST_P_MIN, "sigma %g", s);
		cr_assert_lt(fabs(sum / N), 5 * s / sqrt(N) + 1e-3, "sigma %g", s);
		if (s >= 1.0)
			cr_assert_lt(test_chi2_p(obs, wrong, 2 * W + 1, N), TEST_P_MIN, "sigma %g", s);
	}
	mech_rng_free(r);
}

Test(samplers, discrete_gaussian_large_sigma_scale)
{
	/* Largest admitted sigma: the 128-bit arithmetic must hold; check the
	 * sample standard deviation. */
	enum { N = 20000 };
	double s = 0x1p20, ss = 0;
	mech_rng *r = test_rng(14);
	int64_t z;

	for (int i = 0; i < N; i++) {
		cr_assert_eq(mech_sample_discrete_gaussian(r, s, &z), 0);
		ss += (double)z * (double)z;
	}
	/* sd of the sample variance is about sqrt(2/N) relative: 1%. */
	cr_assert_lt(fabs(sqrt(ss / N) / s - 1.0), 0.04);
	cr_assert_eq(mech_sample_discrete_gaussian(r, 0x1p21, &z), ACCT_EINVAL);
	cr_assert_eq(mech_sample_discrete_gaussian(r, 0.0, &z), ACCT_EINVAL);
	cr_assert_eq(mech_sample_discrete_gaussian(r, NAN, &z), ACCT_EINVAL);
	mech_rng_free(r);
}
