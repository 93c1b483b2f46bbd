/*
 * acct_basic.c: the pure and (epsilon, delta) parts of accounting: the pure
 * epsilon of a leaf, and the basic and strong composition accountants.
 */
#include <math.h>
#include <stdio.h>

#include "acct.h"
#include "acct_internal.h"


/*
 * The pure epsilon of a leaf, rounded upward; of the two that need their
 * own formula:
 *  - discrete_laplace {noise_parameter a, sensitivity D}: noise with pmf
 *    proportional to exp(-a |x|), so the privacy loss a (|x - D| - |x|) is
 *    at most a D (dp_accounting's DiscreteLaplacePrivacyLoss; Canonne,
 *    Kamath, Steinke 2020, Sec. 2.2): epsilon = a D.
 *  - randomized_response {noise_parameter p, num_buckets k}: with
 *    probability p a uniform bucket, else the true one; under replace-one the
 *    largest likelihood ratio is (1 - p + p/k) / (p/k), so
 *    epsilon = ln(1 + k (1 - p) / p) (Warner 1965; Kairouz, Oh, Viswanath
 *    2016).  Validation (acct_event_validate) restricts it to `replace`.
 * 1 - p is made exact-or-up with Fast2Sum, k (1 - p) / p rounded up, and
 * the log1p result raised by two ulps to cover libm's error (< 1 ulp in
 * glibc), so the charge never understates epsilon.
 */
double acct_pure_epsilon_up(const acct_event *ev)
{
	switch (ev->type) {
	case ACCT_EV_LAPLACE:
		/* Laplace with scale b per unit of L1 sensitivity is (1/b)-DP. */
		return acct_div_up(1.0, ev->u.laplace.noise_multiplier);
	case ACCT_EV_EXPONENTIAL_MECHANISM:
		return ev->u.exponential_mechanism.epsilon;
	case ACCT_EV_PERMUTE_AND_FLIP:
		return ev->u.permute_and_flip.epsilon;
	case ACCT_EV_EPSILON_DELTA:
		return ev->u.epsilon_delta.delta == 0.0 ? ev->u.epsilon_delta.epsilon : -1.0;
	case ACCT_EV_DISCRETE_LAPLACE:
		return acct_mul_up(ev->u.discrete_laplace.noise_parameter,
				    ev->u.discrete_laplace.sensitivity);
	case ACCT_EV_RANDOMIZED_RESPONSE:
		break;
	default:
		return -1.0;
	}
	{
		double p = ev->u.randomized_response.noise_parameter;
		double k = (double)ev->u.randomized_response.num_buckets;
		double q = 1.0 - p, t, e;

		if ((-p) - (q - 1.0) > 0.0) /* Fast2Sum remainder of 1 + (-p) */
			q = nextafter(q, INFINITY);
		if (q == 0.0)
			return 0.0;
		t = acct_div_up(acct_mul_up(k, q), p);
		e = log1p(t);
		return nextafter(nextafter(e, INFINITY), INFINITY);
	}
}

/* ---- pure and (eps, delta) parts: basic and strong ----------------------- */

struct dp_sums {
	/* Sums over the releases, each term and each sum rounded upward: what
	 * basic composition spends must not come out below the exact sum. */
	double eps, delta;
	/* The delta sum rounded to nearest, as the reference implementations
	 * take it for strong composition's delta' (see acct__strong_epsilon). */
	double delta_nearest;
	/* Sums of eps^2 and eps (e^eps - 1), in long double: in double they
	 * underflowed to 0 for every eps below 1e-154, and strong composition
	 * then answered epsilon 0 for positive releases. */
	long double eps_sq, eps_drift;
};

/* Adds mult copies of every (eps, delta) leaf; ACCT_EUNSUPPORTED otherwise. */
static int dp_flatten(const acct_event *ev, double mult, const char *where, const char *acct,
		      struct dp_sums *s, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	double e, d = 0.0;

	switch (ev->type) {
	case ACCT_EV_SELF_COMPOSED:
		snprintf(ptr, sizeof(ptr), "%s/event", where);
		return dp_flatten(ev->u.self_composed.event,
				  acct_mul_up(mult, (double)ev->u.self_composed.count), ptr, acct, s,
				  err);
	case ACCT_EV_COMPOSED:
		for (size_t i = 0; i < ev->u.composed.n; i++) {
			int rc;

			snprintf(ptr, sizeof(ptr), "%s/events/%zu", where, i);
			rc = dp_flatten(ev->u.composed.events[i], mult, ptr, acct, s, err);
			if (rc < 0)
				return rc;
		}
		return 0;
	case ACCT_EV_EPSILON_DELTA:
		e = ev->u.epsilon_delta.epsilon;
		d = ev->u.epsilon_delta.delta;
		break;
	default:
		e = acct_pure_epsilon_up(ev);
		if (e < 0.0)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "%s composition needs (epsilon, delta) releases; a '%s' "
					      "event is not one by definition (use rdp, zcdp or pld)",
					      acct, acct_event_type_name(ev->type));
		break;
	}
	s->eps = acct_add_up(s->eps, acct_mul_up(mult, e));
	s->delta = acct_add_up(s->delta, acct_mul_up(mult, d));
	s->delta_nearest += mult * d;
	s->eps_sq += (long double)mult * e * e;
	s->eps_drift += (long double)mult * e * expm1l(e);
	return 0;
}

/*
 * basic: sum of epsilon and of delta (Dwork, Roth 2014, Thm. 3.16).  The
 * answer is refused when the summed delta exceeds the delta asked for.
 */
int acct__basic_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err)
{
	struct dp_sums s = {0};
	int rc;

	/* A lone Gaussian-type release is no (eps, delta) pair by definition;
	 * its exact curve gives the pair at this delta. */
	if (acct__exact_leaf(ev) && delta > 0.0)
		return acct__exact_epsilon(ev, delta, ret, err);
	rc = dp_flatten(ev, 1.0, "/event", "basic", &s, err);
	if (rc < 0)
		return rc;
	if (s.delta > delta)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "basic composition spends delta %.6g, more than the %.6g "
				      "asked for", s.delta, delta);
	if (!isfinite(s.eps))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				      "no finite epsilon under basic composition: the summed "
				      "epsilon overflows");
	*ret = (acct_result){.epsilon = s.eps, .delta = s.delta, .order = NAN};
	return 0;
}

/*
 * strong: the advanced composition theorem (Dwork, Rothblum, Vadhan 2010;
 * Dwork, Roth 2014, Thm. 3.20), in its form for heterogeneous releases
 * (Kairouz, Oh, Viswanath 2015, Thm. 3.5's corollary):
 *   eps = sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1),
 * (eps, sum delta_i + delta')-DP, which for k-fold (eps0, delta0) is the
 * textbook sqrt(2k ln(1/delta')) eps0 + k eps0 (e^eps0 - 1).
 * How delta' is chosen: all of the delta asked for that the releases do not
 * spend themselves, delta' = delta - sum delta_i.  (Any smaller delta' only
 * raises eps.)  Refused when nothing is left.
 */
int acct__strong_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err)
{
	struct dp_sums s = {0};
	double dp, eps;
	int rc = dp_flatten(ev, 1.0, "/event", "strong", &s, err);

	if (rc < 0)
		return rc;
	/* In floating point, as dp_accounting and the textbook computation do
	 * it (the reference vectors pin it).  Where delta is within rounding
	 * of the releases' own delta, delta' is nearly all rounding and eps
	 * follows it: 100 releases of (0.1, 1e-7) at delta 1e-5 give 10.832,
	 * where the exact delta' of the doubles (1.3e-21) gives 10.861.
	 * docs/accountants.md says so; strong prices no ledger. */
	dp = delta - s.delta_nearest;
	if (!(dp > 0.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "strong composition needs delta above the releases' own "
				      "delta %.6g; %.6g leaves nothing for delta'", s.delta, delta);
	eps = (double)(sqrtl(2.0L * logl(1.0L / dp) * s.eps_sq) + s.eps_drift);
	/* The drift sum_i eps_i (e^eps_i - 1) passes every double from
	 * eps_i ~ 700 on: no finite answer, said as such (a success carrying
	 * an infinite epsilon prints as null). */
	if (!isfinite(eps))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				      "no finite epsilon under strong composition: "
				      "sum eps_i (e^eps_i - 1) exceeds every double");
	*ret = (acct_result){.epsilon = eps, .delta = delta, .order = NAN};
	return 0;
}

/*
 * basic, the other way: the summed delta of the releases, refused when
 * their summed epsilon exceeds the epsilon asked for.
 */
int acct__basic_delta(const acct_event *ev, double epsilon, acct_result *ret, acct_error *err)
{
	struct dp_sums s = {0};
	int rc;

	/* A lone Gaussian-type release: its exact curve, as for epsilon. */
	if (acct__exact_leaf(ev))
		return acct__exact_delta(ev, epsilon, ret, err);
	rc = dp_flatten(ev, 1.0, "/event", "basic", &s, err);
	if (rc < 0)
		return rc;
	if (s.eps > epsilon)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
				      "basic composition spends epsilon %.6g, more than %.6g",
				      s.eps, epsilon);
	ret->delta = s.delta;
	return 0;
}
