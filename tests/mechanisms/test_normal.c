/*
 * test_normal.c: mech_rng_normal_fill_fast, the ziggurat.
 *
 * The distribution is checked on 2 x 10^6 draws (KS, the first four
 * moments, and the frequencies beyond 3 and 4 sd and beyond the ziggurat's
 * R, where only the tail algorithm answers, each against the exact normal
 * tail with a binomial test); the seeded output against a recomputation of
 * the ziggurat from its closed forms done here, independently of the
 * generated tables.
 */
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>

#include "mech.h"
#include "mech_internal.h"
#include "test_util.h"

enum { NORMAL_N = 2000000, ZIG_LAYERS = 256, ZIG_BATCH = 256 };

/* Two-sided binomial p-value of k successes in n trials of probability p. */
static double binomial_two_sided_p(unsigned k, double p, unsigned n)
{
	double lo = gsl_cdf_binomial_P(k, p, n);
	double hi = k == 0 ? 1.0 : gsl_cdf_binomial_Q(k - 1, p, n);
	double two = 2.0 * (lo < hi ? lo : hi);

	return two > 1.0 ? 1.0 : two;
}

/* `count` of NORMAL_N draws beyond a point fits that tail's exact
 * probability p and refutes the heavier one (the check's power), each by
 * the two-sided binomial test at TEST_P_MIN. */
static void expect_tail_count(unsigned count, double p, double heavier)
{
	cr_assert_gt(binomial_two_sided_p(count, p, NORMAL_N), TEST_P_MIN, "%u vs p %g", count, p);
	cr_assert_lt(binomial_two_sided_p(count, heavier, NORMAL_N), TEST_P_MIN,
		     "%u does not refute p %g", count, heavier);
}

static double cdf_std_normal(double x, const void *ctx)
{
	const double *shift = ctx;

	return gsl_cdf_ugaussian_P(x - (shift ? *shift : 0.0));
}

/* The ziggurat's layer edges from Marsaglia and Tsang (2000), section 2,
 * in long double: f(x) = exp(-x^2/2), V = R f(R) + int_R^inf f, x_1 = R,
 * f(x_{i+1}) = f(x_i) + V / x_i, R such that the top layer has area V. */
static long double ref_f(long double x)
{
	return expl(-0.5L * x * x);
}

static long double ref_v(long double r)
{
	return r * ref_f(r) + sqrtl(M_PI / 2.0L) * erfcl(r / sqrtl(2.0L));
}

/* Fills x[0..256] for R; returns the top layer's area minus V, or +inf
 * when the layers pass the mode early (R too small). */
static long double ref_layers(long double r, long double *x)
{
	long double v = ref_v(r);

	x[0] = v / ref_f(r);
	x[1] = r;
	for (int i = 2; i < ZIG_LAYERS; i++) {
		long double y = ref_f(x[i - 1]) + v / x[i - 1];

		if (y >= 1.0L)
			return INFINITY;
		x[i] = sqrtl(-2.0L * logl(y));
	}
	x[ZIG_LAYERS] = 0.0L;
	return v - x[ZIG_LAYERS - 1] * (1.0L - ref_f(x[ZIG_LAYERS - 1]));
}

static long double ref_solve(long double *x)
{
	long double lo = 3.0L, hi = 4.0L;

	for (int it = 0; it < 200; it++) {
		long double mid = 0.5L * (lo + hi);

		if (ref_layers(mid, x) > 0)
			lo = mid;
		else
			hi = mid;
	}
	ref_layers(hi, x);
	return hi;
}

Test(normal, fast_fill_is_standard_normal)
{
	double *x = malloc(NORMAL_N * sizeof(double));
	double s1 = 0, s2 = 0, s3 = 0, s4 = 0, shift = 0.01, n = NORMAL_N;
	double r = 3.6541528853610088; /* Marsaglia and Tsang's R for 256 layers */
	unsigned beyond3 = 0, beyond4 = 0, beyond_r = 0;
	mech_rng *rng = test_rng(40);

	cr_assert_eq(mech_rng_normal_fill_fast(rng, x, NORMAL_N), 0);
	for (size_t i = 0; i < NORMAL_N; i++) {
		double z = x[i], a = fabs(z);

		cr_assert(isfinite(z));
		s1 += z;
		s2 += z * z;
		s3 += z * z * z;
		s4 += z * z * z * z;
		beyond3 += a > 3.0;
		beyond4 += a > 4.0;
		beyond_r += a > r;
	}
	/* Moments of N(0,1): 0, 1, 0, 3; their estimates have standard errors
	 * 1, sqrt 2, sqrt 15, sqrt 96 over sqrt n; 5 of them is p < 6e-7. */
	cr_assert_lt(fabs(s1 / n), 5.0 * sqrt(1.0 / n));
	cr_assert_lt(fabs(s2 / n - 1.0), 5.0 * sqrt(2.0 / n));
	cr_assert_lt(fabs(s3 / n), 5.0 * sqrt(15.0 / n));
	cr_assert_lt(fabs(s4 / n - 3.0), 5.0 * sqrt(96.0 / n));
	/* Tails against the exact 2 Q(t), and (power) tails 10%, 50% and 30%
	 * heavier rejected on the same counts. */
	expect_tail_count(beyond3, 2 * gsl_cdf_ugaussian_Q(3.0), 2.2 * gsl_cdf_ugaussian_Q(3.0));
	expect_tail_count(beyond4, 2 * gsl_cdf_ugaussian_Q(4.0), 3.0 * gsl_cdf_ugaussian_Q(4.0));
	expect_tail_count(beyond_r, 2 * gsl_cdf_ugaussian_Q(r), 2.6 * gsl_cdf_ugaussian_Q(r));
	cr_assert_gt(test_ks_p(x, NORMAL_N, cdf_std_normal, NULL), TEST_P_MIN);
	/* Power: a mean shift of 0.01 sd is detected on the same sample. */
	cr_assert_lt(test_ks_p(x, NORMAL_N, cdf_std_normal, &shift), TEST_P_MIN);
	free(x);
	mech_rng_free(rng);
}

/* The first batch of a seeded fill is one stream word per value: bits 0-7
 * the layer i, bit 8 the sign, bits 12-63 U = (m + 1/2) 2^-52; a value
 * with U x_i < x_{i+1} is U x_i.  Recomputed from the raw stream of an
 * identically seeded rng and the layers solved above. */
Test(normal, seeded_fill_matches_reference)
{
	long double xl[ZIG_LAYERS + 1];
	uint64_t w[ZIG_BATCH];
	double z[ZIG_BATCH];
	mech_rng *a = test_rng(41), *b = test_rng(41);
	long double r = ref_solve(xl);
	int checked = 0;

	/* The published R (Marsaglia and Tsang 2000, Figure 1). */
	cr_assert_lt(fabsl(r - 3.6541528853610088L), 1e-13L);
	cr_assert_eq(mech_rng_normal_fill_fast(a, z, ZIG_BATCH), 0);
	cr_assert_eq(mech_rng_bytes(b, w, sizeof(w)), 0);
	for (int k = 0; k < ZIG_BATCH; k++) {
		unsigned i = (unsigned)(w[k] & 0xFFu);
		long double u = ((long double)(w[k] >> 12) + 0.5L) * 0x1p-52L;
		long double v = u * xl[i];

		if (!(v < xl[i + 1]))
			continue;
		if ((w[k] >> 8) & 1u)
			v = -v;
		cr_assert_lt(fabsl((long double)z[k] - v), 1e-12L * (1.0L + fabsl(v)),
			     "value %d: %.17g, reference %.17Lg", k, z[k], v);
		checked++;
	}
	/* The cores hold about 99% of the mass: nearly every value is checked. */
	cr_assert_gt(checked, ZIG_BATCH * 95 / 100);
	mech_rng_free(a);
	mech_rng_free(b);
}

Test(normal, seeded_fill_is_deterministic)
{
	enum { N = 100003 };
	double *x = malloc(N * sizeof(double)), *y = malloc(N * sizeof(double));
	mech_rng *a = test_rng(42), *b = test_rng(42), *c = test_rng(43);

	cr_assert_eq(mech_rng_normal_fill_fast(a, x, N), 0);
	cr_assert_eq(mech_rng_normal_fill_fast(b, y, N), 0);
	cr_assert_eq(memcmp(x, y, N * sizeof(double)), 0);
	cr_assert_eq(mech_rng_normal_fill_fast(c, y, N), 0);
	cr_assert_neq(memcmp(x, y, N * sizeof(double)), 0);
	free(x);
	free(y);
	mech_rng_free(a);
	mech_rng_free(b);
	mech_rng_free(c);
}

Test(normal, fast_fill_bad_inputs)
{
	double z = 7.0;
	mech_rng *rng = test_rng(44);

	cr_assert_eq(mech_rng_normal_fill_fast(NULL, &z, 1), ACCT_EINTERNAL);
	/* n = 0 draws nothing and writes nothing. */
	cr_assert_eq(mech_rng_normal_fill_fast(rng, &z, 0), 0);
	cr_assert_eq(z, 7.0);
	mech_rng_free(rng);
}

/* P(Z <= t | Z > R) for the standard normal: 1 - Q(t) / Q(R). */
static double cdf_normal_tail(double t, const void *ctx)
{
	const double *r = ctx;

	return t <= r[0] ? 0.0 : 1.0 - gsl_cdf_ugaussian_Q(t) / gsl_cdf_ugaussian_Q(r[0]);
}

/* The tail algorithm alone, on enough draws to see its shape: the base
 * layer sends it only 1 draw in 3900. */
Test(normal, tail_is_the_conditioned_normal)
{
	const double r = 3.6541528853610088;

	/* Power: the excesses over R scaled by 0.97 are told apart. */
	test_expect_sampler_fit(45, mech__normal_tail, 200000, r, cdf_normal_tail, &r, 0.97);
}
