/*
 * mech_sample.c: exact samplers in integer arithmetic.
 *
 * Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
 * Privacy", NeurIPS 2020 (CKS below): Algorithm 1 (Bernoulli(exp(-gamma)) for
 * rational gamma), Algorithm 2 (discrete Laplace), Algorithm 3 (discrete
 * Gaussian).  Every probability is a ratio of integers and every Bernoulli
 * trial is decided by an unbiased uniform integer from the CSPRNG, so the
 * output distributions are exactly the stated ones; no floating point touches
 * a sample.  Intermediate products use unsigned 128-bit integers with
 * explicit overflow checks.
 */
#include <math.h>

#include "mech.h"
#include "mech_internal.h"

typedef unsigned __int128 u128;

/* Bernoulli(num/den) for 0 <= num <= den. */
static int bernoulli_ratio(mech_rng *rng, u128 num, u128 den, bool *ret)
{
	u128 u;
	int rc = mech__rng_u128_below(rng, den, &u);

	if (rc < 0)
		return rc;
	*ret = u < num;
	return 0;
}

/* CKS Algorithm 1, first part: Bernoulli(exp(-num/den)) for num <= den.
 * Pr[K odd] where K counts successes of Bernoulli(gamma/k), k = 1, 2, ... is
 * sum_k (-gamma)^k / k! = exp(-gamma).  Bernoulli(gamma/k) is drawn as
 * Bernoulli(1/k) AND Bernoulli(gamma), independent, so no product of den and
 * k can overflow. */
static int bernoulli_exp_le1(mech_rng *rng, u128 num, u128 den, bool *ret)
{
	uint64_t k = 1;

	for (;;) {
		uint64_t u;
		bool a;
		int rc = mech_rng_uint_below(rng, k, &u);

		if (rc < 0)
			return rc;
		if (u == 0) {
			rc = bernoulli_ratio(rng, num, den, &a);
			if (rc < 0)
				return rc;
		} else {
			a = false;
		}
		if (!a)
			break;
		if (k == UINT64_MAX)
			return ACCT_EINTERNAL; /* 2^64 successes: unreachable */
		k++;
	}
	*ret = (k & 1u) == 1u;
	return 0;
}

int mech__bernoulli_exp128(mech_rng *rng, u128 num, u128 den, bool *ret)
{
	u128 whole, rest;
	bool b;
	int rc;

	if (den == 0)
		return ACCT_EINVAL;
	/* CKS Algorithm 1, second part: exp(-gamma) = exp(-1)^floor(gamma) *
	 * exp(-(gamma - floor(gamma))); stop at the first failure. */
	whole = num / den;
	rest = num % den;
	for (u128 i = 0; i < whole; i++) {
		rc = bernoulli_exp_le1(rng, 1, 1, &b);
		if (rc < 0)
			return rc;
		if (!b) {
			*ret = false;
			return 0;
		}
	}
	rc = bernoulli_exp_le1(rng, rest, den, &b);
	if (rc < 0)
		return rc;
	*ret = b;
	return 0;
}

int mech_sample_bernoulli_exp(mech_rng *rng, uint64_t num, uint64_t den, bool *ret)
{
	if (den == 0)
		return ACCT_EINVAL;
	return mech__bernoulli_exp128(rng, num, den, ret);
}

int mech_sample_discrete_laplace(mech_rng *rng, uint64_t scale_num, uint64_t scale_den,
				 int64_t *ret)
{
	const u128 t = scale_num, s = scale_den;
	int rc;

	if (scale_num == 0 || scale_den == 0 || scale_num > INT64_MAX || scale_den > INT64_MAX)
		return ACCT_EINVAL;
	/* CKS Algorithm 2 with s = scale_den, t = scale_num: the output Z has
	 * Pr[Z = z] proportional to exp(-|z| s / t). */
	for (;;) {
		uint64_t u, v = 0;
		u128 x, y;
		bool d, b;

		rc = mech_rng_uint_below(rng, scale_num, &u);
		if (rc < 0)
			return rc;
		rc = mech__bernoulli_exp128(rng, u, t, &d);
		if (rc < 0)
			return rc;
		if (!d)
			continue;
		for (;;) {
			bool a;

			rc = bernoulli_exp_le1(rng, 1, 1, &a);
			if (rc < 0)
				return rc;
			if (!a)
				break;
			v++;
		}
		/* t < 2^63 and v < 2^64: the product fits in 128 bits. */
		x = (u128)u + t * (u128)v;
		y = x / s;
		rc = mech_rng_bernoulli(rng, 0.5, &b);
		if (rc < 0)
			return rc;
		if (b && y == 0)
			continue;
		if (y > (u128)INT64_MAX)
			return ACCT_ENUMERIC; /* |Z| >= 2^63: probability < exp(-2^63 s/t) */
		*ret = b ? -(int64_t)y : (int64_t)y;
		return 0;
	}
}

int mech_discrete_laplace_scale(double scale, uint64_t *ret_num, uint64_t *ret_den)
{
	int e;
	double m;

	if (!(scale >= DPG_MECH_DLAP_MIN_SCALE && scale <= DPG_MECH_DLAP_MAX_SCALE))
		return ACCT_EINVAL;
	/* scale = m 2^e with m in [1/2, 1).  Keep 40 significant bits, rounding
	 * up (more noise is always safe); the result is num / 2^f exactly. */
	m = frexp(scale, &e);
	if (e >= 40) {
		*ret_num = (uint64_t)ceil(scale);
		*ret_den = 1;
		return 0;
	}
	*ret_num = (uint64_t)ceil(ldexp(m, 40));
	*ret_den = UINT64_C(1) << (40 - e);
	/* Reduce: an even numerator over a power of two halves exactly. */
	while (*ret_den > 1 && (*ret_num & 1u) == 0) {
		*ret_num >>= 1;
		*ret_den >>= 1;
	}
	return 0;
}

/* sigma as S / 2^f exactly: at most 24 significant bits, f <= 20, rounded
 * up.  Returns -1 when sigma is out of range. */
static int gaussian_dyadic(double sigma, uint64_t *ret_s, int *ret_f)
{
	int e, f;
	double s;

	if (!(sigma >= DPG_MECH_DGAUSS_MIN_SIGMA && sigma <= DPG_MECH_DGAUSS_MAX_SIGMA))
		return -1;
	frexp(sigma, &e); /* sigma < 2^e */
	f = 24 - e;
	if (f > 20)
		f = 20;
	s = ceil(ldexp(sigma, f));
	*ret_s = (uint64_t)s;
	*ret_f = f;
	return 0;
}

double mech_discrete_gaussian_sigma(double sigma)
{
	uint64_t s;
	int f;

	if (gaussian_dyadic(sigma, &s, &f) < 0)
		return NAN;
	return ldexp((double)s, -f);
}

int mech_sample_discrete_gaussian(mech_rng *rng, double sigma, int64_t *ret)
{
	uint64_t s, t;
	u128 s2, tt, den, cap;
	int f, rc;

	if (gaussian_dyadic(sigma, &s, &f) < 0)
		return ACCT_EINVAL;
	/* sigma = s / 2^f, sigma^2 = s^2 / 2^{2f}, t = floor(sigma) + 1. */
	t = (s >> f) + 1;
	s2 = (u128)s * s;
	tt = (u128)t * t;
	/* gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2)
	 *       = (|Y| t 2^{2f} - s^2)^2 / (2 s^2 t^2 2^{2f}).
	 * With s < 2^24, f <= 20 and sigma <= 2^20 the denominator is below
	 * 2^100 and |Y| t 2^{2f} below 2^57 for |Y| <= cap. */
	den = 2 * s2 * tt << (2 * f);
	cap = 64 * (u128)t + 64;
	for (;;) {
		int64_t y;
		u128 ay, a, num;
		bool c;

		rc = mech_sample_discrete_laplace(rng, t, 1, &y);
		if (rc < 0)
			return rc;
		/* y > INT64_MIN: the discrete Laplace sampler never returns it. */
		ay = (u128)(y < 0 ? -y : y);
		/* Beyond cap = 64 (floor(sigma) + 1) + 64 the acceptance
		 * probability is below exp(-1900); rejecting there moves the
		 * output distribution by less than exp(-1900) in total variation
		 * and keeps every product inside 128 bits. */
		if (ay > cap)
			continue;
		a = ay * t << (2 * f);
		a = a >= s2 ? a - s2 : s2 - a;
		num = a * a;
		rc = mech__bernoulli_exp128(rng, num, den, &c);
		if (rc < 0)
			return rc;
		if (c) {
			*ret = y;
			return 0;
		}
	}
}
