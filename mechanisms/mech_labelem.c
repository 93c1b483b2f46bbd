/*
 * mech_labelem.c: the label exponential mechanism for binary labels scored
 * by Hamming agreement, and its guidance figures.
 *
 * Privacy unit: one label.  Neighbouring label vectors y, y' differ in one
 * position.  Output space: all labellings z of the n labels; utility u(z)
 * = number of positions where z agrees with the private labels.  D (the
 * `sensitivity` field) is the exponential mechanism's utility sensitivity,
 * max over z and neighbours |u_y(z) - u_y'(z)|, which for Hamming agreement
 * under one-label neighbours is exactly 1.  The exponential mechanism
 * (McSherry and Talwar 2007; Bi and Suppakitpaisarn 2022, Def. 4) releases
 * z with probability proportional to exp(epsilon u(z) / (2D)) and is
 * epsilon-DP for any utility of sensitivity D.
 *
 * What it costs here is less.  With x = epsilon / (2D), the normaliser
 * sum_z e^{x u(z)} = (1 + e^x)^n does not depend on y, so changing one label
 * changes the probability of every z by e^{+x} or e^{-x} exactly: the
 * release is x-DP, epsilon / (2D), and no better (a z that agrees at the
 * changed position attains it).  Grouping labellings by their score q,
 * there are C(n, q) of them, so Pr[q = k] is proportional to C(n, k) e^{k
 * x}: q is Binomial(n, p) with p = e^x / (1 + e^x), the "keep probability",
 * and given q the labelling is uniform among those with score q: each label
 * is kept with probability p on its own, binary randomized response with
 * loss log(p / (1 - p)) = x.  That is the event charged (mech_label_em): at
 * D = 1, epsilon / 2.
 *
 * Only D = 1 is accepted.  A unit that could change D > 1 labels (several
 * labels per person) would cost D x = epsilon / 2 for the group, while the
 * event prices one label, x: the ledger would record a D-th of the cost.
 * D < 1 misstates the score's sensitivity.  Both are refused at /sensitivity.
 *
 * We sample exactly that way: q as a sum of n exact Bernoulli(p) trials,
 * then the q agreeing positions by selection sampling (Knuth, TAOCP vol. 2,
 * 3.4.2, Algorithm S) with exact uniform integers.  Linear time, constant
 * memory beyond the output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"
#include "mech_internal.h"

/* The utility sensitivity of Hamming agreement when neighbours differ in
 * one label: the only D this mechanism prices correctly (see above). */
#define LABEL_EM_SCORE_SENSITIVITY 1.0

static int check_params(int64_t n, double epsilon, double sensitivity, acct_error *err)
{
	if (n < 1 || n > DPG_MAX_LABEL_EM_N)
		return acct_error_set(err, ACCT_EINVAL, "/n", "n must be in [1, %lld]",
				      (long long)DPG_MAX_LABEL_EM_N);
	if (!(isfinite(epsilon) && epsilon > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "epsilon must be finite and > 0");
	if (sensitivity != LABEL_EM_SCORE_SENSITIVITY)
		return acct_error_set(err, ACCT_EINVAL, "/sensitivity",
				      "sensitivity must be 1: the privacy unit is one label, which "
				      "changes the Hamming score by at most 1; a unit of several "
				      "labels is not supported (each release is charged as one "
				      "label)");
	return 0;
}

double mech_label_em_keep_probability(double epsilon, double sensitivity)
{
	double x = epsilon / (2.0 * sensitivity);

	/* The logistic function in the form that cannot overflow. */
	return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

/* log p and log(1 - p) for p = logistic(x), accurate for any x >= 0. */
static void log_keep(double x, double *ret_lp, double *ret_lq)
{
	double l = log1p(exp(-x));

	*ret_lp = -l;
	*ret_lq = -x - l;
}

/* log Pr[q = k].  A term whose count is zero is left out rather than
 * multiplied: where x overflows, lq is -infinity and 0 * lq would be NaN
 * (Pr[q = n] is then 1, log 0).  The result is -infinity where log Pr[q = k]
 * is below -DBL_MAX. */
static double log_pmf_at(int64_t n, int64_t k, double lp, double lq)
{
	double dn = (double)n, dk = (double)k;
	double l = acct_log_binomial(dn, dk);

	if (k > 0)
		l += dk * lp;
	if (k < n)
		l += (dn - dk) * lq;
	return l;
}

int mech_label_em_log_pmf(int64_t n, double epsilon, double sensitivity, int64_t k,
			  double *ret, acct_error *err)
{
	double lp, lq;
	int rc = check_params(n, epsilon, sensitivity, err);

	if (rc < 0)
		return rc;
	if (k < 0 || k > n)
		return acct_error_set(err, ACCT_EINVAL, "/ks", "k must be in [0, n]");
	log_keep(epsilon / (2.0 * sensitivity), &lp, &lq);
	*ret = log_pmf_at(n, k, lp, lq);
	return 0;
}

/* Pr[q >= ceil(n/2)] for q ~ Binomial(n, logistic(x)).  The terms are summed
 * relative to the largest one in the tail (the tail's first term or the
 * mode), walking outwards until a term falls below 2^-80 of it: every
 * omitted term is smaller still and they decay geometrically past the mode,
 * so the relative error is far below 1e-12. */
static double success_probability(int64_t n, double x)
{
	double lp, lq, top, sum = 0.0, p = mech_label_em_keep_probability(x, 0.5);
	int64_t m = (n + 1) / 2, mode = (int64_t)floor((double)(n + 1) * p), a;
	const double cut = -80.0 * M_LN2;

	log_keep(x, &lp, &lq);
	if (mode > n)
		mode = n;
	a = mode > m ? mode : m;
	top = log_pmf_at(n, a, lp, lq);
	for (int64_t k = a; k <= n; k++) {
		double d = log_pmf_at(n, k, lp, lq) - top;

		if (d < cut)
			break;
		sum += exp(d);
	}
	for (int64_t k = a - 1; k >= m; k--) {
		double d = log_pmf_at(n, k, lp, lq) - top;

		if (d < cut)
			break;
		sum += exp(d);
	}
	sum = exp(top) * sum;
	return sum > 1.0 ? 1.0 : sum;
}

int mech_label_em_success_probability(int64_t n, double epsilon, double sensitivity,
				      double *ret, acct_error *err)
{
	int rc = check_params(n, epsilon, sensitivity, err);

	if (rc < 0)
		return rc;
	*ret = success_probability(n, epsilon / (2.0 * sensitivity));
	return 0;
}

int mech_label_em_epsilon_for_success(int64_t n, double sensitivity, double target,
				      double *ret, acct_error *err)
{
	double lo = 0.0, hi = 1.0;
	int rc = check_params(n, 1.0, sensitivity, err);

	if (rc < 0)
		return rc;
	if (!(target > 0.0 && target < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/target_success_probability",
				      "target_success_probability must be in (0, 1)");
	/* Success is increasing in x = epsilon / (2 sensitivity): the binomial
	 * upper tail increases with p, and p with x.  At x = 0 it is
	 * Pr[Bin(n, 1/2) >= n/2] >= 1/2; a target at or below that is reached
	 * by every epsilon > 0, and the infimum 0 is returned. */
	if (success_probability(n, 0.0) >= target) {
		*ret = 0.0;
		return 0;
	}
	while (success_probability(n, hi) < target) {
		hi *= 2.0;
		if (hi > 1e6)
			return acct_error_set(err, ACCT_ENUMERIC, "/target_success_probability",
					      "target not reachable in double precision");
	}
	/* Bisection on x to a relative width of 2^-50: the answer is the upper
	 * end, where the target is known to be reached. */
	for (int i = 0; i < 200 && hi - lo > hi * 0x1p-50; i++) {
		double mid = 0.5 * (lo + hi);

		if (success_probability(n, mid) >= target)
			hi = mid;
		else
			lo = mid;
	}
	*ret = 2.0 * sensitivity * hi;
	return 0;
}

/*
 * What runs is, label by label, binary randomized response that keeps the
 * label with probability p (the double below, exactly), and one changed
 * label changes one of them: so the event is that randomized response,
 * priced from the p used (noise_parameter 2 (1 - p), exact for p in [1/2, 1]
 * by Sterbenz), whose epsilon is log(p / (1 - p)) = epsilon / 2 up to the
 * rounding of p, which it includes.  A p that rounds to 1 releases the
 * labels themselves, so it is refused.
 */
static int label_em_event(double epsilon, double sensitivity, double *ret_p,
			  acct_event **ret_event, acct_error *err)
{
	double p = mech_label_em_keep_probability(epsilon, sensitivity);
	int rc;

	if (!(p < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "epsilon / (2 sensitivity) is too large: every label would be kept");
	rc = mech__randomized_response_event(2.0 * (1.0 - p), 2, ret_event, err);
	if (rc == 0)
		*ret_p = p;
	return rc;
}

int mech_label_em_event(int64_t n, double epsilon, double sensitivity, acct_event **ret_event,
			acct_error *err)
{
	double p;
	int rc = check_params(n, epsilon, sensitivity, err);

	if (rc < 0)
		return rc;
	return label_em_event(epsilon, sensitivity, &p, ret_event, err);
}

int mech_label_em(mech_rng *key_rng, const uint8_t *labels, size_t n, double epsilon,
		  double sensitivity, uint8_t *ret_labels, acct_event **ret_event,
		  acct_error *err)
{
	acct_event *ev = NULL;
	mech_rng *rng = NULL;
	double p = 0.0;
	uint64_t q = 0, kept = 0;
	int rc = check_params((int64_t)n, epsilon, sensitivity, err);

	if (rc < 0)
		return rc;
	if (!labels || !ret_labels)
		return acct_error_set(err, ACCT_EINVAL, "/labels", "labels are missing");
	for (size_t i = 0; i < n; i++)
		if (labels[i] > 1)
			return acct_error_set(err, ACCT_EINVAL, "/labels", "label %zu is not 0 or 1", i);
	rc = label_em_event(epsilon, sensitivity, &p, &ev, err);
	if (rc < 0)
		return rc;
	/* 2n draws: a ChaCha20 stream keyed with 256 bits from the caller's rng
	 * (the bulk-noise path of DESIGN.md) instead of 2n kernel calls. */
	rng = mech_rng_new_stream(key_rng);
	if (!rng) {
		rc = ACCT_EINTERNAL;
		goto fail;
	}
	/* p is used as the double it is; Bernoulli trials with that exact p. */
	for (size_t i = 0; i < n; i++) {
		bool b;

		rc = mech_rng_bernoulli(rng, p, &b);
		if (rc < 0)
			goto fail;
		q += b;
	}
	/* A uniformly random set of q positions agrees with the labels. */
	for (size_t i = 0; i < n; i++) {
		uint64_t u;

		rc = mech_rng_uint_below(rng, n - i, &u);
		if (rc < 0)
			goto fail;
		if (u < q - kept) {
			ret_labels[i] = labels[i];
			kept++;
		} else {
			ret_labels[i] = (uint8_t)(1u - labels[i]);
		}
	}
	mech_rng_free(rng);
	*ret_event = ev;
	return 0;
fail:
	mech_rng_free(rng);
	acct_event_free(ev);
	return acct_error_set(err, rc, "", "random number generator failed");
}
