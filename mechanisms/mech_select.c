/*
 * mech_select.c: selection mechanisms (exponential mechanism,
 * permute-and-flip, report-noisy-max) and k-ary randomized response.
 *
 * With c = epsilon / (2 D) (epsilon / D for monotone scores) and u* = max u,
 * the exponential mechanism picks i with probability proportional to
 * exp(-gamma_i), gamma_i = c (u* - u_i).  We compute g_i = min(c (u* - u_i),
 * 1024) in double.  Privacy of what runs, common to both samplers below:
 *  - min(., 1024) is the exponential mechanism on the clamped utility
 *    max(u_i, u* - 1024 / c), which has the same sensitivity D (a maximum of
 *    D-sensitive functions) and the same monotonicity;
 *  - each exponent as used is within eta < 2^-40 of c times the clamped gap
 *    (below); in the ratio Pr[i | x] / Pr[i | x'] each exponent enters twice
 *    (the term and the normalisation), so the mechanism is
 *    (epsilon + 4 eta)-DP;
 *  - c itself is a double within relative 2^-53 of epsilon / (2 D).
 * The events therefore name epsilon_eff = epsilon (1 + 2^-50) + 2^-38.
 *
 * The exponential mechanism samples by an exponential race, in the same
 * work whatever the scores (a rejection sampler's number of rounds,
 * m / sum e^-g, told the data to whoever timed it): every candidate gets an
 * Exp(1) variate E_i, and the least key g_i + log E_i wins, which is i with
 * probability e^-g_i / sum_j e^-g_j (E_i e^g_i are independent exponentials
 * of rates e^-g_i).  E_i = -log U with U uniform on (0, 1) drawn with full
 * relative precision at both ends (a fair bit picks U = V or 1 - V, V
 * uniform on (0, 1/2] to every bit of the double), so log E_i is within
 * 2^-50 of the exact value coupled to it; with 1025 2^-52 for g_i and half
 * an ulp (2^-43) for the sum, every key is within eta < 2^-40 of the exact
 * race's, monotonically, and a race whose keys move by at most eta changes
 * each Pr[i] by a factor within e^(+-2 eta).  Permute-and-flip runs the
 * same way with keys g_i - E_i (see mech_permute_and_flip).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"
#include "mech_internal.h"

#define EXP_CLAMP 1024.0

static int check_scores(const double *scores, size_t n, size_t max_n, double sensitivity,
			double epsilon, acct_error *err)
{
	if (n < 1 || n > max_n)
		return acct_error_set(err, ACCT_EINVAL, "/scores", "need 1 to %zu scores", max_n);
	for (size_t i = 0; i < n; i++)
		if (!isfinite(scores[i])) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/scores/%zu", i);
			return acct_error_set(err, ACCT_EINVAL, where, "must be a finite number");
		}
	if (!(isfinite(sensitivity) && sensitivity > 0))
		return acct_error_set(err, ACCT_EINVAL, "/sensitivity", "must be finite and > 0");
	if (!(isfinite(epsilon) && epsilon > 0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "must be finite and > 0");
	/* The exponents are eps (u* - u_i) / (2 D): an infinite factor would
	 * make the argmax's 0 x inf = NaN, and every candidate equally likely. */
	if (!isfinite(epsilon / (2.0 * sensitivity)))
		return acct_error_set(err, ACCT_EINVAL, "/sensitivity",
				      "epsilon / (2 sensitivity) overflows; scale the scores and the "
				      "sensitivity up");
	/* And u* - u_i must be finite: an infinite gap became an exponent
	 * clamped to its cap whatever the factor (or NaN with a factor that
	 * underflowed to 0), so a score moved by D could swing the odds by
	 * e^1024 under a charge of eps.  The caller knows its scores: the
	 * refusal tells it nothing new. */
	{
		double lo = scores[0], hi = scores[0];

		for (size_t i = 1; i < n; i++) {
			lo = fmin(lo, scores[i]);
			hi = fmax(hi, scores[i]);
		}
		if (!isfinite(hi - lo))
			return acct_error_set(err, ACCT_EINVAL, "/scores",
					      "the largest score minus the smallest overflows; scale "
					      "the scores and the sensitivity down");
	}
	return 0;
}

double mech_exponential_epsilon_used(double epsilon)
{
	double e = epsilon * (1.0 + 0x1p-50) + 0x1p-38;

	return nextafter(e, INFINITY);
}

double mech__selection_c(double epsilon, double sensitivity, bool monotone)
{
	return monotone ? epsilon / sensitivity : epsilon / (2.0 * sensitivity);
}

double mech__selection_exponent(double c, double top, double score)
{
	double g = c * (top - score);

	return g <= EXP_CLAMP ? g : EXP_CLAMP;
}

/* How a race turns a candidate's exponent g and its Exp(1) variate E into
 * a key; the least key wins. */
enum race_key {
	RACE_EXPONENTIAL,   /* g + log E: the exponential mechanism */
	RACE_FLIP,          /* g - E: permute-and-flip (report-noisy-max, Exp noise) */
};

/*
 * One exponential per candidate, whatever the scores, and the index of the
 * least key (see the top of the file and mech_permute_and_flip); c is the
 * exponents' factor.  0, or the rng's error.
 */
static int race(mech_rng *rng, const double *scores, size_t n, double c, enum race_key kind,
		size_t *ret_index)
{
	double top = scores[0], best_key = INFINITY;
	size_t best = 0;

	for (size_t i = 1; i < n; i++)
		if (scores[i] > top)
			top = scores[i];
	for (size_t i = 0; i < n; i++) {
		double g = mech__selection_exponent(c, top, scores[i]), e, key;
		int rc = mech__exp1(rng, &e);

		if (rc < 0)
			return rc;
		key = kind == RACE_EXPONENTIAL ? g + log(e) : g - e;
		if (key < best_key) {
			best_key = key;
			best = i;
		}
	}
	*ret_index = best;
	return 0;
}

/*
 * A selection drawn by one race (kind): the scores checked, the event of
 * the mechanism (the exponential mechanism's for RACE_EXPONENTIAL,
 * permute-and-flip's for RACE_FLIP) with the epsilon it uses, and the
 * winner.  0, or the error with nothing returned.
 */
static int select_by_race(mech_rng *rng, const double *scores, size_t n, size_t max_n,
			  double sensitivity, double epsilon, bool monotone, enum race_key kind,
			  size_t *ret_index, acct_event **ret_event, acct_error *err)
{
	acct_event *ev = NULL;
	int rc = check_scores(scores, n, max_n, sensitivity, epsilon, err);

	if (rc < 0)
		return rc;
	ev = acct_event_new(kind == RACE_EXPONENTIAL ? ACCT_EV_EXPONENTIAL_MECHANISM :
						      ACCT_EV_PERMUTE_AND_FLIP);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (kind == RACE_EXPONENTIAL)
		ev->u.exponential_mechanism.epsilon = mech_exponential_epsilon_used(epsilon);
	else
		ev->u.permute_and_flip.epsilon = mech_exponential_epsilon_used(epsilon);
	rc = race(rng, scores, n, mech__selection_c(epsilon, sensitivity, monotone), kind, ret_index);
	if (rc < 0) {
		acct_event_free(ev);
		return acct_error_set(err, rc, "", "random number generator failed");
	}
	*ret_event = ev;
	return 0;
}

int mech_exponential(mech_rng *rng, const double *scores, size_t n, double sensitivity,
		     double epsilon, bool monotone, size_t *ret_index, acct_event **ret_event,
		     acct_error *err)
{
	return select_by_race(rng, scores, n, DPG_MAX_VECTOR_LEN, sensitivity, epsilon, monotone,
			      RACE_EXPONENTIAL, ret_index, ret_event, err);
}

int mech__exponential_over(mech_rng *rng, const double *scores, size_t n, size_t max_n,
			   double sensitivity, double epsilon, size_t *ret_index,
			   acct_event **ret_event, acct_error *err)
{
	return select_by_race(rng, scores, n, max_n, sensitivity, epsilon, false,
			      RACE_EXPONENTIAL, ret_index, ret_event, err);
}

/*
 * McKenna and Sheldon 2020's permute-and-flip (epsilon-DP, their Theorem 1)
 * is, in distribution, report-noisy-max with Exp(1) noise on c u_i (Ding,
 * Kifer, Saghafi, Wang, Zhang 2021): the least key g_i - E_i wins.  Drawn
 * that way, the work is one exponential per candidate whatever the scores.
 * Visiting candidates in a random order until one passes its coin, as
 * before, took a number of visits that depended on all the scores, and its
 * run time told them.  The keys are within eta < 2^-40 of the exact ones as
 * in the exponential race (top of the file: E_i to relative 2^-50, at most
 * 745, and g_i), and moving every key by at most eta changes each Pr[i] by
 * a factor within e^(+-2 eta), which the event's epsilon_eff covers.
 */
int mech_permute_and_flip(mech_rng *rng, const double *scores, size_t n, double sensitivity,
			  double epsilon, size_t *ret_index, acct_event **ret_event,
			  acct_error *err)
{
	return select_by_race(rng, scores, n, DPG_MAX_VECTOR_LEN, sensitivity, epsilon, false,
			      RACE_FLIP, ret_index, ret_event, err);
}

/*
 * Report-noisy-max with Laplace noise.  Dwork and Roth 2014, Claim 3.9:
 * noise Lap(2D/eps) (D/eps for monotone scores) makes the argmax eps-DP.
 * Run on the grid with discrete Laplace noise; the claim's threshold
 * argument holds for integer noise with ties broken to the lowest index,
 * since Pr[Z >= k + m] >= e^{-a m} Pr[Z >= k] for the discrete Laplace of
 * parameter a.  The integer score sensitivity is ceil(D / g); epsilon_eff
 * = (2 or 1) a ceil(D / g).
 */
static int rnm_laplace(mech_rng *rng, const double *scores, size_t n, double sensitivity,
		       double epsilon, bool monotone, size_t *ret_index, acct_event **ret_event,
		       acct_error *err)
{
	uint64_t num, den;
	int shift, rc;
	double dz, a, eps;
	__int128 best = 0;
	size_t arg = 0;
	acct_event *ev;

	rc = check_scores(scores, n, DPG_MAX_VECTOR_LEN, sensitivity, epsilon, err);
	if (rc < 0)
		return rc;
	if (mech__laplace_grid((monotone ? 1.0 : 2.0) * sensitivity / epsilon, &shift, &num,
			       &den) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "epsilon out of range");
	/* At an epsilon near 1e-10 or below, D's image on the grid is a few
	 * units and rounds up: refused, as the Laplace mechanism's release is. */
	rc = mech__grid_units(sensitivity, shift, &dz, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		double k = floor(ldexp(scores[i], shift));
		int64_t z;
		__int128 v;

		if (!(fabs(k) < 0x1p120)) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/scores/%zu", i);
			return acct_error_set(err, ACCT_EINVAL, where, "too large for the noise scale");
		}
		rc = mech_sample_discrete_laplace(rng, num, den, &z);
		if (rc < 0)
			return acct_error_set(err, rc, "", "noise sampling failed");
		v = (__int128)k + z;
		if (i == 0 || v > best) {
			best = v;
			arg = i;
		}
	}
	a = (double)den / (double)num;
	a = nextafter(a, INFINITY);
	eps = nextafter(a * dz * (monotone ? 1.0 : 2.0), INFINITY);
	ev = acct_event_epsilon_delta(eps, 0.0);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	*ret_index = arg;
	*ret_event = ev;
	return 0;
}

/* Report-noisy-max with Gaussian noise.  The argmax of a Gaussian release
 * of the whole score vector is post-processing of it: the event is that of
 * the vector release with L2 sensitivity D sqrt(n) (each score moves by at
 * most D). */
static int rnm_gaussian(mech_rng *rng, const double *scores, size_t n, double sensitivity,
			double noise_multiplier, size_t *ret_index, acct_event **ret_event,
			acct_error *err)
{
	double *noisy, l2;
	size_t arg = 0;
	int rc;

	if (n < 1 || n > DPG_MAX_VECTOR_LEN)
		return acct_error_set(err, ACCT_EINVAL, "/scores", "need 1 to %d scores",
				      DPG_MAX_VECTOR_LEN);
	if (!(isfinite(sensitivity) && sensitivity > 0))
		return acct_error_set(err, ACCT_EINVAL, "/sensitivity", "must be finite and > 0");
	noisy = malloc(n * sizeof(*noisy));
	if (!noisy)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	l2 = n == 1 ? sensitivity : nextafter(sensitivity * sqrt((double)n), INFINITY);
	rc = mech_gaussian(rng, scores, n, l2, noise_multiplier, noisy, ret_event, err);
	if (rc == 0) {
		for (size_t i = 1; i < n; i++)
			if (noisy[i] > noisy[arg])
				arg = i;
		*ret_index = arg;
	} else if (err && err->where[0] && !strncmp(err->where, "/values", 7)) {
		/* Name the field as the caller knows it. */
		char tmp[ACCT_ERROR_WHERE_BYTES];

		snprintf(tmp, sizeof(tmp), "/scores%s", err->where + 7);
		snprintf(err->where, sizeof(err->where), "%s", tmp);
	}
	free(noisy);
	return rc;
}

int mech_report_noisy_max(mech_rng *rng, const double *scores, size_t n, double sensitivity,
			  mech_rnm_noise noise, double param, bool monotone, size_t *ret_index,
			  acct_event **ret_event, acct_error *err)
{
	switch (noise) {
	case MECH_RNM_GUMBEL:
		/* argmax_i (u_i + Gumbel(2D/eps)) has exactly the exponential
		 * mechanism's distribution (the Gumbel-max trick: Yellott 1977;
		 * McSherry and Talwar 2007), so the EM is sampled exactly and
		 * only the index leaves; the event is the EM's. */
		return mech_exponential(rng, scores, n, sensitivity, param, monotone, ret_index,
					ret_event, err);
	case MECH_RNM_LAPLACE:
		return rnm_laplace(rng, scores, n, sensitivity, param, monotone, ret_index,
				   ret_event, err);
	case MECH_RNM_GAUSSIAN:
		return rnm_gaussian(rng, scores, n, sensitivity, param, ret_index, ret_event, err);
	}
	return acct_error_set(err, ACCT_EINVAL, "/noise", "unknown noise");
}

double mech_randomized_response_noise(double epsilon, int64_t k)
{
	/* dp_accounting's RandomizedResponseDpEvent: with probability p the
	 * answer is replaced by a uniform bucket (possibly the true one), so
	 * Pr[true]/Pr[other] = (1 - p + p/k) / (p/k) = 1 + k(1 - p)/p, which
	 * equals e^eps for p = k / (e^eps + k - 1).  Rounded up (more noise). */
	double p = (double)k / (exp(epsilon) + (double)k - 1.0);

	p = nextafter(p, INFINITY);
	return p > 1.0 ? 1.0 : p;
}

int mech__randomized_response_event(double p, int64_t k, acct_event **ret_event,
				    acct_error *err)
{
	acct_event *ev = acct_event_new(ACCT_EV_RANDOMIZED_RESPONSE);

	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	ev->u.randomized_response.noise_parameter = p;
	ev->u.randomized_response.num_buckets = k;
	*ret_event = ev;
	return 0;
}

int mech_randomized_response(mech_rng *rng, int64_t value, int64_t k, double epsilon,
			     int64_t *ret, acct_event **ret_event, acct_error *err)
{
	double p;
	bool replace;
	uint64_t u;
	int rc;

	if (k < 2 || k > DPG_MAX_NUM_BUCKETS)
		return acct_error_set(err, ACCT_EINVAL, "/num_buckets", "must be in [2, %lld]",
				      (long long)DPG_MAX_NUM_BUCKETS);
	if (value < 0 || value >= k)
		return acct_error_set(err, ACCT_EINVAL, "/value", "must be in [0, num_buckets)");
	if (!(isfinite(epsilon) && epsilon > 0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "must be finite and > 0");
	p = mech_randomized_response_noise(epsilon, k);
	/* Past about 709, e^eps is no double: p is then the smallest
	 * subnormal and the event's epsilon, ln(1 + k(1 - p)/p), infinite. */
	if (!isfinite(log1p((double)k * (1.0 - p) / p)))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "must be below %.2f (e^epsilon must be a finite double)",
				      log(DBL_MAX));
	/* The exact double p decides (mech_rng_bernoulli is exact), and the
	 * event names that same p. */
	rc = mech_rng_bernoulli(rng, p, &replace);
	if (rc == 0 && replace)
		rc = mech_rng_uint_below(rng, (uint64_t)k, &u);
	if (rc < 0)
		return acct_error_set(err, rc, "", "random number generator failed");
	rc = mech__randomized_response_event(p, k, ret_event, err);
	if (rc == 0)
		*ret = replace ? (int64_t)u : value;
	return rc;
}
