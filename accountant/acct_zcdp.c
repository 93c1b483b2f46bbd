/*
 * acct_zcdp.c: the zCDP accountant (Bun, Steinke 2016): the rho of an
 * event, and its conversion to and from (epsilon, delta).
 */
#include <math.h>
#include <stdio.h>

#include "acct.h"
#include "acct_internal.h"
#include "acct_numeric.h"

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

int acct__zcdp_rho(const acct_event *ev, acct_neighbor neighbor, double *ret_rho,
		   acct_error *err)
{
	double rho = 0.0;
	int rc = rho_walk(ev, neighbor, 1.0, "/event", &rho, err);

	if (rc < 0)
		return rc;
	*ret_rho = rho;
	return 0;
}

int acct_zcdp_rho(const acct_event *ev, acct_neighbor neighbor, double *ret_rho,
		  acct_error *err)
{
	double rho = 0.0;
	int rc = acct_event_validate(ev, neighbor, err);

	if (rc < 0)
		return rc;
	rc = acct__zcdp_rho(ev, neighbor, &rho, err);
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

double acct__zcdp_to_delta(double rho, double eps)
{
	double ld;

	if (rho <= 0.0)
		return 0.0;
	ld = fmin(0.5 * acct__log1mexp(-rho), minimise_over_orders(zcdp_order_log_delta, rho, eps));
	return fmin(exp(ld), 1.0);
}

int acct__zcdp_epsilon(const acct_event *ev, acct_neighbor nb, double delta, bool bun_steinke,
		       acct_result *ret, acct_error *err)
{
	double rho = 0.0, eps;
	int rc = acct__zcdp_rho(ev, nb, &rho, err);

	if (rc < 0)
		return rc;
	eps = acct_zcdp_to_epsilon(rho, delta, bun_steinke);
	if (!isfinite(eps))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "rho = %.6g converts to no finite epsilon at delta = %g",
				      rho, delta);
	ret->epsilon = eps;
	return 0;
}

/* delta at `eps` of a rho-zCDP release, tight or by inverting
 * rho + 2 sqrt(rho ln 1/delta) = eps (Bun, Steinke 2016, Prop. 1.3). */
static double zcdp_delta_of(double rho, double eps, bool bun_steinke)
{
	double t = eps > rho ? (eps - rho) / 2.0 : 0.0;

	if (!bun_steinke)
		return acct__zcdp_to_delta(rho, eps);
	return rho > 0.0 ? fmin(exp(-t * t / rho), 1.0) : 0.0;
}

int acct__zcdp_delta(const acct_event *ev, acct_neighbor nb, double epsilon, bool bun_steinke,
		     acct_result *ret, acct_error *err)
{
	double rho = 0.0;
	int rc = acct__zcdp_rho(ev, nb, &rho, err);

	if (rc == 0)
		ret->delta = zcdp_delta_of(rho, epsilon, bun_steinke);
	return rc;
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
