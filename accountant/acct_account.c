/*
 * acct_account.c: event validation, the basic, strong and zCDP accountants,
 * the epsilon/delta front door that dispatches to every accountant, and
 * calibration.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>

#include "acct.h"
#include "acct_internal.h"
#include "acct_numeric.h"

static const char *const accountant_names[ACCT__N_ACCOUNTANTS] = {
	[ACCT_BASIC] = "basic",
	[ACCT_STRONG] = "strong",
	[ACCT_MOMENTS] = "moments",
	[ACCT_RDP] = "rdp",
	[ACCT_ZCDP] = "zcdp",
	[ACCT_PLD] = "pld",
};

const char *acct_accountant_name(acct_accountant a)
{
	if ((unsigned)a >= ACCT__N_ACCOUNTANTS)
		return NULL;
	return accountant_names[a];
}

int acct_accountant_from_name(const char *name, acct_accountant *ret)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < ACCT__N_ACCOUNTANTS; i++) {
		if (strcmp(accountant_names[i], name) == 0) {
			*ret = (acct_accountant)i;
			return 0;
		}
	}
	return -1;
}

/* ---- validation --------------------------------------------------------- */

static bool pos_finite(double x)
{
	return isfinite(x) && x > 0.0;
}

/* 0 when x, the event's field `name`, is a finite number > 0; else the
 * error, at where/name. */
static int need_positive(double x, const char *where, const char *name, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (pos_finite(x))
		return 0;
	snprintf(ptr, sizeof(ptr), "%s/%s", where, name);
	return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' must be a finite number > 0", name);
}

/* The same for a sensitivity of a discrete mechanism: an integer >= 1. */
static int need_sensitivity(double x, const char *where, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (x >= 1.0 && x == floor(x))
		return 0;
	snprintf(ptr, sizeof(ptr), "%s/sensitivity", where);
	return acct_error_set(err, ACCT_EINVAL, ptr, "'sensitivity' must be an integer >= 1");
}

static int validate(const acct_event *ev, acct_neighbor nb, const char *where, unsigned depth,
		    acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

#define FIELD(name) (snprintf(ptr, sizeof(ptr), "%s/%s", where, name), ptr)
	if (!ev)
		return acct_error_set(err, ACCT_EINVAL, where, "missing event");
	if (depth > DPG_MAX_EVENT_DEPTH)
		return acct_error_set(err, ACCT_EINVAL, where, "events nest deeper than %d levels",
				      DPG_MAX_EVENT_DEPTH);
	switch (ev->type) {
	case ACCT_EV_GAUSSIAN:
		return need_positive(ev->u.gaussian.noise_multiplier, where, "noise_multiplier", err);
	case ACCT_EV_LAPLACE:
		return need_positive(ev->u.laplace.noise_multiplier, where, "noise_multiplier", err);
	case ACCT_EV_DISCRETE_GAUSSIAN: {
		int rc = need_positive(ev->u.discrete_gaussian.sigma, where, "sigma", err);

		return rc < 0 ? rc : need_sensitivity(ev->u.discrete_gaussian.sensitivity, where, err);
	}
	case ACCT_EV_DISCRETE_LAPLACE: {
		int rc = need_positive(ev->u.discrete_laplace.noise_parameter, where, "noise_parameter", err);

		return rc < 0 ? rc : need_sensitivity(ev->u.discrete_laplace.sensitivity, where, err);
	}
	case ACCT_EV_RANDOMIZED_RESPONSE:
		if (!(ev->u.randomized_response.noise_parameter > 0.0 &&
		      ev->u.randomized_response.noise_parameter <= 1.0))
			return acct_error_set(err, ACCT_EINVAL, FIELD("noise_parameter"),
					      "'noise_parameter' must be in (0, 1]");
		if (ev->u.randomized_response.num_buckets < 2 ||
		    ev->u.randomized_response.num_buckets > DPG_MAX_NUM_BUCKETS)
			return acct_error_set(err, ACCT_EINVAL, FIELD("num_buckets"),
					      "'num_buckets' must be in [2, %lld]",
					      (long long)DPG_MAX_NUM_BUCKETS);
		if (nb != ACCT_REPLACE)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "randomized response is defined under the replace "
					      "relation only (a respondent's answer has no "
					      "add/remove neighbour); set \"neighbor\":\"replace\"");
		return 0;
	case ACCT_EV_EXPONENTIAL_MECHANISM:
		return need_positive(ev->u.exponential_mechanism.epsilon, where, "epsilon", err);
	case ACCT_EV_PERMUTE_AND_FLIP:
		return need_positive(ev->u.permute_and_flip.epsilon, where, "epsilon", err);
	case ACCT_EV_EPSILON_DELTA:
		if (!(isfinite(ev->u.epsilon_delta.epsilon) && ev->u.epsilon_delta.epsilon >= 0.0))
			return acct_error_set(err, ACCT_EINVAL, FIELD("epsilon"),
					      "'epsilon' must be a finite number >= 0");
		if (!(ev->u.epsilon_delta.delta >= 0.0 && ev->u.epsilon_delta.delta < 1.0))
			return acct_error_set(err, ACCT_EINVAL, FIELD("delta"),
					      "'delta' must be in [0, 1)");
		return 0;
	case ACCT_EV_ZCDP:
		if (!(isfinite(ev->u.zcdp.rho) && ev->u.zcdp.rho >= 0.0))
			return acct_error_set(err, ACCT_EINVAL, FIELD("rho"),
					      "'rho' must be a finite number >= 0");
		return 0;
	case ACCT_EV_GNMAX:
		return need_positive(ev->u.gnmax.sigma, where, "sigma", err);
	case ACCT_EV_PATE_THRESHOLD:
		return need_positive(ev->u.pate_threshold.sigma, where, "sigma", err);
	case ACCT_EV_PATE_GNSS:
		if (!(ev->u.pate_gnss.beta >= 0.0 && ev->u.pate_gnss.beta < 0.5))
			return acct_error_set(err, ACCT_EINVAL, FIELD("beta"),
					      "'beta' must be in [0, 0.5)");
		return need_positive(ev->u.pate_gnss.sigma, where, "sigma", err);
	case ACCT_EV_POISSON_SAMPLED: {
		double q = ev->u.poisson_sampled.sampling_probability;

		if (!(q > 0.0 && q <= 1.0))
			return acct_error_set(err, ACCT_EINVAL, FIELD("sampling_probability"),
					      "'sampling_probability' must be in (0, 1]");
		if (nb != ACCT_ADD_REMOVE)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "Poisson sampling is accounted under the add_remove "
					      "relation only; under replace use "
					      "sampled_without_replacement");
		return validate(ev->u.poisson_sampled.event, nb, FIELD("event"), depth + 1, err);
	}
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT: {
		int64_t n = ev->u.sampled_without_replacement.source_dataset_size;
		int64_t m = ev->u.sampled_without_replacement.sample_size;

		if (n < 1 || n > DPG_MAX_DATASET_SIZE)
			return acct_error_set(err, ACCT_EINVAL, FIELD("source_dataset_size"),
					      "'source_dataset_size' must be in [1, %lld]",
					      (long long)DPG_MAX_DATASET_SIZE);
		if (m < 1 || m > n)
			return acct_error_set(err, ACCT_EINVAL, FIELD("sample_size"),
					      "'sample_size' must be in [1, source_dataset_size]");
		if (nb != ACCT_REPLACE)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "sampling without replacement is accounted under the "
					      "replace relation only (Wang, Balle, Kasiviswanathan "
					      "2019); under add_remove use poisson_sampled");
		return validate(ev->u.sampled_without_replacement.event, nb, FIELD("event"),
				depth + 1, err);
	}
	case ACCT_EV_SELF_COMPOSED:
		if (ev->u.self_composed.count < 1 ||
		    ev->u.self_composed.count > DPG_MAX_COMPOSITION_COUNT)
			return acct_error_set(err, ACCT_EINVAL, FIELD("count"),
					      "'count' must be in [1, %lld]",
					      (long long)DPG_MAX_COMPOSITION_COUNT);
		return validate(ev->u.self_composed.event, nb, FIELD("event"), depth + 1, err);
	case ACCT_EV_COMPOSED:
		if (ev->u.composed.n > DPG_MAX_EVENT_NODES)
			return acct_error_set(err, ACCT_EINVAL, FIELD("events"), "too many events");
		for (size_t i = 0; i < ev->u.composed.n; i++) {
			char item[ACCT_ERROR_WHERE_BYTES + 32];
			int rc;

			snprintf(item, sizeof(item), "%s/events/%zu", where, i);
			rc = validate(ev->u.composed.events[i], nb, item, depth + 1, err);
			if (rc < 0)
				return rc;
		}
		return 0;
	default:
		return acct_error_set(err, ACCT_EINVAL, FIELD("type"), "unknown event type");
	}
#undef FIELD
}

int acct_event_validate_at(const acct_event *ev, acct_neighbor neighbor, const char *prefix,
			   acct_error *err)
{
	if (neighbor != ACCT_ADD_REMOVE && neighbor != ACCT_REPLACE)
		return acct_error_set(err, ACCT_EINVAL, "/neighbor", "unknown neighbouring relation");
	return validate(ev, neighbor, prefix ? prefix : "/event", 0, err);
}

int acct_event_validate(const acct_event *ev, acct_neighbor neighbor, acct_error *err)
{
	return acct_event_validate_at(ev, neighbor, NULL, err);
}

/* ---- pure and (eps, delta) parts: basic and strong ----------------------- */

struct dp_sums {
	double eps, delta, eps_sq, eps_drift; /* sums over the releases */
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
		return dp_flatten(ev->u.self_composed.event, mult * (double)ev->u.self_composed.count,
				  ptr, acct, s, err);
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
	s->eps += mult * e;
	s->delta += mult * d;
	s->eps_sq += mult * e * e;
	s->eps_drift += mult * e * expm1(e);
	return 0;
}

/*
 * basic: sum of epsilon and of delta (Dwork, Roth 2014, Thm. 3.16).  The
 * answer is refused when the summed delta exceeds the delta asked for.
 */
static int basic_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err)
{
	struct dp_sums s = {0};
	int rc = dp_flatten(ev, 1.0, "/event", "basic", &s, err);

	if (rc < 0)
		return rc;
	if (s.delta > delta)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "basic composition spends delta %.6g, more than the %.6g "
				      "asked for", s.delta, delta);
	ret->epsilon = s.eps;
	ret->delta = s.delta;
	ret->order = NAN;
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
static int strong_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err)
{
	struct dp_sums s = {0};
	double dp;
	int rc = dp_flatten(ev, 1.0, "/event", "strong", &s, err);

	if (rc < 0)
		return rc;
	dp = delta - s.delta;
	if (!(dp > 0.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "strong composition needs delta above the releases' own "
				      "delta %.6g; %.6g leaves nothing for delta'", s.delta, delta);
	ret->epsilon = sqrt(2.0 * log(1.0 / dp) * s.eps_sq) + s.eps_drift;
	ret->delta = delta;
	ret->order = NAN;
	return 0;
}

/* ---- zCDP ------------------------------------------------------------------ */

static int rho_walk(const acct_event *ev, acct_neighbor nb, double scale, const char *where,
		    double *acc, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	double r;

	switch (ev->type) {
	case ACCT_EV_GAUSSIAN:
		r = acct_inv_sq_up(ev->u.gaussian.noise_multiplier) / 2.0;
		break;
	case ACCT_EV_DISCRETE_GAUSSIAN: {
		double t = acct_div_up(ev->u.discrete_gaussian.sensitivity,
				       ev->u.discrete_gaussian.sigma);

		r = acct_mul_up(t, t) / 2.0;
		break;
	}
	case ACCT_EV_ZCDP:
		r = ev->u.zcdp.rho;
		break;
	case ACCT_EV_GNMAX:
		r = acct_inv_sq_up(ev->u.gnmax.sigma);
		break;
	case ACCT_EV_PATE_THRESHOLD:
		r = acct_inv_sq_up(ev->u.pate_threshold.sigma) / 2.0;
		break;
	case ACCT_EV_EXPONENTIAL_MECHANISM: {
		double e = ev->u.exponential_mechanism.epsilon;

		r = acct_mul_up(e, e) / 8.0;
		break;
	}
	case ACCT_EV_SELF_COMPOSED:
		snprintf(ptr, sizeof(ptr), "%s/event", where);
		return rho_walk(ev->u.self_composed.event, nb,
				acct_mul_up(scale, (double)ev->u.self_composed.count), ptr, acc,
				err);
	case ACCT_EV_COMPOSED:
		for (size_t i = 0; i < ev->u.composed.n; i++) {
			int rc;

			snprintf(ptr, sizeof(ptr), "%s/events/%zu", where, i);
			rc = rho_walk(ev->u.composed.events[i], nb, scale, ptr, acc, err);
			if (rc < 0)
				return rc;
		}
		return 0;
	case ACCT_EV_POISSON_SAMPLED:
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "a subsampled event has no zCDP bound (privacy amplification "
				      "by sampling does not hold for zCDP); use rdp or pld");
	case ACCT_EV_EPSILON_DELTA:
		if (ev->u.epsilon_delta.delta > 0.0)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "an (epsilon, delta) event with delta > 0 has no zCDP "
					      "bound");
		/* fall through */
	default: {
		double e = acct_pure_epsilon_up(ev);

		if (e < 0.0)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "no zCDP bound for a '%s' event",
					      acct_event_type_name(ev->type));
		/* Bun, Steinke 2016, Prop. 1.4: eps-DP implies (eps^2/2)-zCDP. */
		r = acct_mul_up(e, e) / 2.0;
		break;
	}
	}
	/* Every step above rounds toward +infinity (halving is exact), so the
	 * price is never below the exact rho of the parts as given. */
	*acc = acct_add_up(*acc, acct_mul_up(scale, r));
	return 0;
}

int acct_zcdp_rho(const acct_event *ev, acct_neighbor neighbor, double *ret_rho,
		  acct_error *err)
{
	double rho = 0.0;
	int rc = acct_event_validate(ev, neighbor, err);

	if (rc < 0)
		return rc;
	rc = rho_walk(ev, neighbor, 1.0, "/event", &rho, err);
	if (rc < 0)
		return rc;
	*ret_rho = rho;
	return 0;
}

/* The improved conversion of the RDP curve alpha -> alpha rho at one order. */
static double zcdp_order_eps(double rho, double delta, double a)
{
	return a * rho + log1p(-1.0 / a) - (log(delta) + log(a)) / (a - 1.0);
}

/* Minimises g(log(alpha - 1)) by a log-spaced scan and golden-section
 * refinement; g is smooth with one interior minimum on (1, inf). */
static double minimise_over_orders(double (*g)(double, double, double), double rho, double x)
{
	double best = INFINITY, bt = 0.0, lo, hi;
	const double t0 = log(1e-4), t1 = log(1e8);
	const int steps = 240;
	const double phi = (sqrt(5.0) - 1.0) / 2.0;

	for (int i = 0; i <= steps; i++) {
		double t = t0 + (t1 - t0) * i / steps;
		double v = g(rho, x, 1.0 + exp(t));

		if (v < best) {
			best = v;
			bt = t;
		}
	}
	lo = bt - (t1 - t0) / steps;
	hi = bt + (t1 - t0) / steps;
	for (int it = 0; it < 100 && hi - lo > 1e-13; it++) {
		double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
		double va = g(rho, x, 1.0 + exp(a)), vb = g(rho, x, 1.0 + exp(b));

		if (va < vb)
			hi = b;
		else
			lo = a;
		best = fmin(best, fmin(va, vb));
	}
	return best;
}

double acct_zcdp_to_epsilon(double rho, double delta, bool bun_steinke)
{
	if (rho <= 0.0)
		return 0.0;
	if (!(delta > 0.0))
		return INFINITY;
	if (delta >= 1.0)
		return 0.0;
	if (bun_steinke)
		return rho + 2.0 * sqrt(rho * log(1.0 / delta));
	if (delta * delta + expm1(-rho) > 0.0)
		return 0.0;
	return fmax(minimise_over_orders(zcdp_order_eps, rho, delta), 0.0);
}

static double zcdp_order_log_delta(double rho, double eps, double a)
{
	return (a - 1.0) * (a * rho - eps + log1p(-1.0 / a)) - log(a);
}

static double zcdp_to_delta(double rho, double eps)
{
	double ld;

	if (rho <= 0.0)
		return 0.0;
	ld = fmin(0.5 * log1p(-exp(-rho)), minimise_over_orders(zcdp_order_log_delta, rho, eps));
	return fmin(exp(ld), 1.0);
}

double acct_zcdp_rho_budget(double epsilon, double delta)
{
	/*
	 * The conversion is computed in floating point: at the order the
	 * minimiser picks (any order gives a valid conversion), its value comes
	 * from some twenty roundings of terms that do not cancel there, so it
	 * is within a relative 2^-40 (about 1e-12, over a thousand times the
	 * rounding error) of the exact one.  rho_B is therefore sought against
	 * eps_B lowered by that much, and the exact conversion of rho_B stays
	 * at or below eps_B.  The budget loses 1e-12 of itself.
	 */
	double target = epsilon - ldexp(epsilon, -40);
	double lo = 0.0, hi = fmax(epsilon, 1e-300);

	if (!(epsilon > 0.0) || !(delta > 0.0))
		return 0.0;
	while (acct_zcdp_to_epsilon(hi, delta, false) <= target && hi < 1e300)
		hi *= 2.0;
	for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; i++) {
		double mid = 0.5 * (lo + hi);

		if (acct_zcdp_to_epsilon(mid, delta, false) <= target)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the front door ---------------------------------------------------------- */

static void orders_of(const acct_options *opt, const double **o, size_t *n)
{
	if (opt->orders && opt->n_orders) {
		*o = opt->orders;
		*n = opt->n_orders;
	} else {
		*o = acct_rdp_default_orders(n);
	}
}

static double pld_interval(const acct_options *opt)
{
	return opt->pld_interval > 0.0 ? opt->pld_interval : ACCT_PLD_DEFAULT_INTERVAL;
}

int acct_epsilon(const acct_event *ev, double delta, const acct_options *opt,
		 acct_result *ret, acct_error *err)
{
	acct_result r = {.epsilon = NAN, .delta = delta, .order = NAN};
	const double *o;
	size_t n;
	int rc;

	acct_gsl_quiet();
	if (!(delta >= 0.0 && delta < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/delta", "'delta' must be in [0, 1)");
	rc = acct_event_validate(ev, opt->neighbor, err);
	if (rc < 0)
		return rc;
	switch (opt->accountant) {
	case ACCT_BASIC:
		/* A lone Gaussian-type release is no (eps, delta) pair by
		 * definition; its exact curve gives the pair at this delta. */
		if (acct__exact_leaf(ev) && delta > 0.0)
			rc = acct__exact_epsilon(ev, delta, &r, err);
		else
			rc = basic_epsilon(ev, delta, &r, err);
		break;
	case ACCT_STRONG:
		rc = strong_epsilon(ev, delta, &r, err);
		break;
	case ACCT_MOMENTS:
		rc = acct__moments_epsilon(ev, opt->neighbor, delta, &r, err);
		break;
	case ACCT_RDP:
		orders_of(opt, &o, &n);
		if (delta == 0.0) {
			rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
					    "an RDP bound converts to no finite epsilon at delta = 0");
			break;
		}
		rc = acct__rdp_epsilon(ev, opt->neighbor, o, n, delta, &r, err);
		break;
	case ACCT_ZCDP: {
		double rho = 0.0;

		rc = rho_walk(ev, opt->neighbor, 1.0, "/event", &rho, err);
		if (rc < 0)
			break;
		r.epsilon = acct_zcdp_to_epsilon(rho, delta, opt->zcdp_bun_steinke);
		if (!isfinite(r.epsilon))
			rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
					    "rho = %.6g converts to no finite epsilon at delta = %g",
					    rho, delta);
		break;
	}
	case ACCT_PLD:
		/* pld has no grid for the discrete Gaussian; alone, its exact
		 * curve is the privacy loss distribution's own answer. */
		if (acct__exact_leaf(ev) &&
		    acct__exact_leaf(ev)->type == ACCT_EV_DISCRETE_GAUSSIAN && delta > 0.0)
			rc = acct__exact_epsilon(ev, delta, &r, err);
		else
			rc = acct__pld_epsilon(ev, opt->neighbor, pld_interval(opt), opt->pld_work,
					       delta, &r, err);
		break;
	default:
		rc = acct_error_set(err, ACCT_EINVAL, "/accountant", "unknown accountant");
		break;
	}
	if (rc < 0)
		return rc;
	if (isnan(r.epsilon))
		return acct_error_set(err, ACCT_ENUMERIC, "/event", "epsilon is not a number");
	*ret = r;
	return 0;
}

int acct_delta(const acct_event *ev, double epsilon, const acct_options *opt,
	       acct_result *ret, acct_error *err)
{
	acct_result r = {.epsilon = epsilon, .delta = NAN, .order = NAN};
	const double *o;
	size_t n;
	int rc;

	acct_gsl_quiet();
	if (!(isfinite(epsilon) && epsilon >= 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "'epsilon' must be a finite number >= 0");
	rc = acct_event_validate(ev, opt->neighbor, err);
	if (rc < 0)
		return rc;
	switch (opt->accountant) {
	case ACCT_BASIC: {
		struct dp_sums s = {0};

		if (acct__exact_leaf(ev)) {
			rc = acct__exact_delta(ev, epsilon, &r, err);
			break;
		}
		rc = dp_flatten(ev, 1.0, "/event", "basic", &s, err);
		if (rc < 0)
			break;
		if (s.eps > epsilon) {
			rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
					    "basic composition spends epsilon %.6g, more than %.6g",
					    s.eps, epsilon);
			break;
		}
		r.delta = s.delta;
		break;
	}
	case ACCT_MOMENTS:
		rc = acct__moments_delta(ev, opt->neighbor, epsilon, &r, err);
		break;
	case ACCT_RDP:
		orders_of(opt, &o, &n);
		rc = acct__rdp_delta(ev, opt->neighbor, o, n, epsilon, &r, err);
		break;
	case ACCT_ZCDP: {
		double rho = 0.0;

		rc = rho_walk(ev, opt->neighbor, 1.0, "/event", &rho, err);
		if (rc < 0)
			break;
		if (opt->zcdp_bun_steinke) {
			double t = epsilon > rho ? (epsilon - rho) / 2.0 : 0.0;

			/* Inverting rho + 2 sqrt(rho ln 1/delta) = eps. */
			r.delta = rho > 0.0 ? fmin(exp(-t * t / rho), 1.0) : 0.0;
		} else {
			r.delta = zcdp_to_delta(rho, epsilon);
		}
		break;
	}
	case ACCT_PLD:
		if (acct__exact_leaf(ev) &&
		    acct__exact_leaf(ev)->type == ACCT_EV_DISCRETE_GAUSSIAN)
			rc = acct__exact_delta(ev, epsilon, &r, err);
		else
			rc = acct__pld_delta(ev, opt->neighbor, pld_interval(opt), opt->pld_work,
					     epsilon, &r, err);
		break;
	case ACCT_STRONG:
		rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/accountant",
				    "the strong composition theorem answers epsilon for a delta, "
				    "not delta for an epsilon");
		break;
	default:
		rc = acct_error_set(err, ACCT_EINVAL, "/accountant", "unknown accountant");
		break;
	}
	if (rc < 0)
		return rc;
	*ret = r;
	return 0;
}

/* ---- calibration ------------------------------------------------------------- */

enum field_kind {
	FIELD_NOISE,    /* real, epsilon decreases as it grows, (0, inf) */
	FIELD_NOISE01,  /* real, epsilon decreases as it grows, (0, 1] */
	FIELD_LOSS,     /* real, epsilon increases as it grows, (0, inf) */
	FIELD_LOSS01,   /* real, epsilon increases as it grows, (0, 1] */
	FIELD_COUNT,    /* integer, epsilon increases as it grows, [1, hi] */
};

struct field_ref {
	enum field_kind kind;
	double *real;
	int64_t *integer;
	int64_t int_hi;
};

static int find_field(acct_event *node, const char *field, struct field_ref *f)
{
	memset(f, 0, sizeof(*f));
#define IS(t, name) (node->type == (t) && strcmp(field, name) == 0)
	if (IS(ACCT_EV_GAUSSIAN, "noise_multiplier")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.gaussian.noise_multiplier;
	} else if (IS(ACCT_EV_LAPLACE, "noise_multiplier")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.laplace.noise_multiplier;
	} else if (IS(ACCT_EV_DISCRETE_GAUSSIAN, "sigma")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.discrete_gaussian.sigma;
	} else if (IS(ACCT_EV_GNMAX, "sigma")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.gnmax.sigma;
	} else if (IS(ACCT_EV_PATE_THRESHOLD, "sigma")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.pate_threshold.sigma;
	} else if (IS(ACCT_EV_RANDOMIZED_RESPONSE, "noise_parameter")) {
		f->kind = FIELD_NOISE01;
		f->real = &node->u.randomized_response.noise_parameter;
	} else if (IS(ACCT_EV_DISCRETE_LAPLACE, "noise_parameter")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.discrete_laplace.noise_parameter;
	} else if (IS(ACCT_EV_EXPONENTIAL_MECHANISM, "epsilon")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.exponential_mechanism.epsilon;
	} else if (IS(ACCT_EV_PERMUTE_AND_FLIP, "epsilon")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.permute_and_flip.epsilon;
	} else if (IS(ACCT_EV_EPSILON_DELTA, "epsilon")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.epsilon_delta.epsilon;
	} else if (IS(ACCT_EV_ZCDP, "rho")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.zcdp.rho;
	} else if (IS(ACCT_EV_POISSON_SAMPLED, "sampling_probability")) {
		f->kind = FIELD_LOSS01;
		f->real = &node->u.poisson_sampled.sampling_probability;
	} else if (IS(ACCT_EV_SELF_COMPOSED, "count")) {
		f->kind = FIELD_COUNT;
		f->integer = &node->u.self_composed.count;
		f->int_hi = DPG_MAX_COMPOSITION_COUNT;
	} else if (IS(ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT, "sample_size")) {
		f->kind = FIELD_COUNT;
		f->integer = &node->u.sampled_without_replacement.sample_size;
		f->int_hi = node->u.sampled_without_replacement.source_dataset_size;
	} else {
		return -1;
	}
#undef IS
	return 0;
}

/* Values already evaluated, with their gaps: Brent's method and the
 * bracket check below ask for the same points again and again, and one
 * evaluation can cost a tenth of a second (a PLD convolution). */
#define CALIB_MEMO 64

struct calib {
	acct_event *root;
	struct field_ref f;
	double delta, target;
	const acct_options *opt;
	int rc;
	acct_error err;
	unsigned evals;
	double last_eps;
	double memo_v[CALIB_MEMO], memo_eps[CALIB_MEMO];
	unsigned memo_n, memo_next;
};

/* epsilon(v) - target; records the first failure and returns NAN. */
static double calib_gap(struct calib *c, double v)
{
	acct_result r;
	acct_error e;
	int rc;

	for (unsigned i = 0; i < c->memo_n; i++) {
		if (c->memo_v[i] == v) {
			c->last_eps = c->memo_eps[i];
			return c->last_eps - c->target;
		}
	}
	if (c->f.real)
		*c->f.real = v;
	else
		*c->f.integer = (int64_t)v;
	c->evals++;
	acct_error_init(&e);
	rc = acct_epsilon(c->root, c->delta, c->opt, &r, &e);
	if (rc == ACCT_EUNSUPPORTED && strcmp(e.where, "/delta") == 0) {
		r.epsilon = INFINITY; /* no finite epsilon at this value */
	} else if (rc < 0) {
		if (c->rc == 0) {
			c->rc = rc;
			c->err = e;
		}
		return NAN;
	}
	c->last_eps = r.epsilon;
	c->memo_v[c->memo_next] = v;
	c->memo_eps[c->memo_next] = r.epsilon;
	c->memo_next = (c->memo_next + 1) % CALIB_MEMO;
	if (c->memo_n < CALIB_MEMO)
		c->memo_n++;
	return r.epsilon - c->target;
}

/* The GSL function: the gap as a function of log(v) for unbounded fields,
 * of v for (0,1] fields; sign arranged so that it increases with epsilon. */
struct calib_fn {
	struct calib *c;
	bool log_scale;
};

static double calib_gsl(double x, void *vp)
{
	struct calib_fn *cf = vp;
	double g = calib_gap(cf->c, cf->log_scale ? exp(x) : x);

	if (isinf(g))
		g = g > 0 ? 1e300 : -1e300;
	return g;
}

int acct_calibrate(acct_event *root, acct_event *node, const char *field, double epsilon,
		   double delta, const acct_options *opt, double *ret_value, double *ret_epsilon,
		   acct_error *err)
{
	struct calib c;
	struct calib_fn cf;
	acct_options shared = *opt;
	double pld_work = 0.0;
	gsl_root_fsolver *s = NULL;
	gsl_function fn;
	double ok, bad, g, x_ok, x_bad;
	bool decreasing;
	int rc = 0, status;

	acct_gsl_quiet();
	memset(&c, 0, sizeof(c));
	if (!(isfinite(epsilon) && epsilon > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "'epsilon' must be a finite number > 0");
	if (find_field(node, field, &c.f) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/template",
				      "'%s' of a '%s' event cannot be calibrated", field,
				      acct_event_type_name(node->type));
	c.root = root;
	c.delta = delta;
	c.target = epsilon;
	/* One work budget for every pld evaluation of the search, so a
	 * calibration ends within DPG_MAX_PLD_WORK as one pricing does. */
	if (!shared.pld_work)
		shared.pld_work = &pld_work;
	c.opt = &shared;
	acct_error_init(&c.err);

	if (c.f.kind == FIELD_COUNT) {
		/* Largest integer meeting the target, by bisection (epsilon is
		 * nondecreasing in a count or a sample size). */
		int64_t lo = 1, hi = c.f.int_hi;

		g = calib_gap(&c, 1.0);
		if (c.rc < 0)
			goto fail;
		if (g > 0.0) {
			rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
					    "even '%s' = 1 exceeds epsilon %g", field, epsilon);
			goto out;
		}
		g = calib_gap(&c, (double)hi);
		if (c.rc < 0)
			goto fail;
		if (g <= 0.0) {
			lo = hi;
		} else {
			while (hi - lo > 1) {
				int64_t mid = lo + (hi - lo) / 2;

				g = calib_gap(&c, (double)mid);
				if (c.rc < 0)
					goto fail;
				if (g <= 0.0)
					lo = mid;
				else
					hi = mid;
			}
		}
		ok = (double)lo;
		goto done;
	}

	decreasing = c.f.kind == FIELD_NOISE || c.f.kind == FIELD_NOISE01;
	cf.c = &c;
	cf.log_scale = c.f.kind == FIELD_NOISE || c.f.kind == FIELD_LOSS;
	/* Bracket: `ok` meets the target, `bad` does not. */
	if (cf.log_scale) {
		double v = 1.0;
		bool have_ok = false, have_bad = false;

		ok = bad = v;
		for (int i = 0; i < 200 && !(have_ok && have_bad); i++) {
			g = calib_gap(&c, v);
			if (c.rc < 0)
				goto fail;
			if (g <= 0.0) {
				ok = v;
				have_ok = true;
			} else {
				bad = v;
				have_bad = true;
			}
			/* Move toward the side still missing. */
			if (!have_ok)
				v = decreasing ? v * 2.0 : v / 2.0;
			else if (!have_bad)
				v = decreasing ? v / 2.0 : v * 2.0;
			if (v < 1e-12 || v > 1e12)
				break;
		}
		if (!have_ok) {
			rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
					    "no value of '%s' in [1e-12, 1e12] meets epsilon %g",
					    field, epsilon);
			goto out;
		}
		if (!have_bad) {
			rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/template",
					    "every value of '%s' meets epsilon %g; the target does "
					    "not constrain it", field, epsilon);
			goto out;
		}
		x_ok = log(ok);
		x_bad = log(bad);
	} else {
		/* (0, 1] fields */
		g = calib_gap(&c, 1.0);
		if (c.rc < 0)
			goto fail;
		if (decreasing) {
			if (g > 0.0) {
				rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
						    "even '%s' = 1 exceeds epsilon %g", field, epsilon);
				goto out;
			}
			ok = 1.0;
			bad = 0.5;
			while ((g = calib_gap(&c, bad)) <= 0.0 && bad > 1e-300) {
				ok = bad;
				bad /= 2.0;
			}
		} else {
			if (g <= 0.0) {
				ok = 1.0;
				goto done;
			}
			bad = 1.0;
			ok = 0.5;
			while ((g = calib_gap(&c, ok)) > 0.0 && ok > 1e-300) {
				bad = ok;
				ok /= 2.0;
			}
		}
		if (c.rc < 0)
			goto fail;
		x_ok = ok;
		x_bad = bad;
	}

	/* Brent's method on the bracket (Brent 1973, ch. 4; GSL's brent). */
	fn.function = calib_gsl;
	fn.params = &cf;
	s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
	if (!s) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	status = gsl_root_fsolver_set(s, &fn, fmin(x_ok, x_bad), fmax(x_ok, x_bad));
	if (status != GSL_SUCCESS) {
		if (c.rc < 0)
			goto fail;
		rc = acct_error_set(err, ACCT_ENUMERIC, "", "calibration bracket failed");
		goto out;
	}
	for (int it = 0; it < 100; it++) {
		double lo, hi, glo;

		status = gsl_root_fsolver_iterate(s);
		if (c.rc < 0)
			goto fail;
		if (status != GSL_SUCCESS) {
			rc = acct_error_set(err, ACCT_ENUMERIC, "", "Brent's method failed");
			goto out;
		}
		lo = gsl_root_fsolver_x_lower(s);
		hi = gsl_root_fsolver_x_upper(s);
		/* Keep our own bracket: which end meets the target. */
		glo = calib_gsl(lo, &cf);
		if (c.rc < 0)
			goto fail;
		if (glo <= 0.0) {
			x_ok = lo;
			x_bad = hi;
		} else {
			x_ok = hi;
			x_bad = lo;
		}
		if (gsl_root_test_interval(lo, hi, 0.0, 1e-10) == GSL_SUCCESS)
			break;
	}
	/* The conservative end, checked. */
	g = calib_gsl(x_ok, &cf);
	if (c.rc < 0)
		goto fail;
	if (g > 0.0) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "", "calibration lost its bracket");
		goto out;
	}
	(void)x_bad;
	ok = cf.log_scale ? exp(x_ok) : x_ok;
	/* exp(log(v)) may round: make sure the value evaluated is returned. */
done:
	g = calib_gap(&c, ok);
	if (c.rc < 0)
		goto fail;
	if (g > 0.0) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "", "calibration result misses the target");
		goto out;
	}
	*ret_value = ok;
	*ret_epsilon = c.last_eps;
	rc = 0;
	goto out;
fail:
	rc = acct_error_set(err, c.rc, c.err.where, "%s", c.err.text);
out:
	if (s)
		gsl_root_fsolver_free(s);
	return rc;
}
