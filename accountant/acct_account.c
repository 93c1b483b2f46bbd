/*
 * acct_account.c: the epsilon/delta front door, which validates an event
 * and dispatches it to the accountant the options name.
 */
#include <math.h>
#include <stddef.h>

#include "acct.h"
#include "acct_internal.h"

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
			rc = acct__basic_epsilon(ev, delta, &r, err);
		break;
	case ACCT_STRONG:
		rc = acct__strong_epsilon(ev, delta, &r, err);
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

		rc = acct__zcdp_rho(ev, opt->neighbor, &rho, err);
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
	case ACCT_BASIC:
		if (acct__exact_leaf(ev))
			rc = acct__exact_delta(ev, epsilon, &r, err);
		else
			rc = acct__basic_delta(ev, epsilon, &r, err);
		break;
	case ACCT_MOMENTS:
		rc = acct__moments_delta(ev, opt->neighbor, epsilon, &r, err);
		break;
	case ACCT_RDP:
		orders_of(opt, &o, &n);
		rc = acct__rdp_delta(ev, opt->neighbor, o, n, epsilon, &r, err);
		break;
	case ACCT_ZCDP: {
		double rho = 0.0;

		rc = acct__zcdp_rho(ev, opt->neighbor, &rho, err);
		if (rc < 0)
			break;
		if (opt->zcdp_bun_steinke) {
			double t = epsilon > rho ? (epsilon - rho) / 2.0 : 0.0;

			/* Inverting rho + 2 sqrt(rho ln 1/delta) = eps. */
			r.delta = rho > 0.0 ? fmin(exp(-t * t / rho), 1.0) : 0.0;
		} else {
			r.delta = acct__zcdp_to_delta(rho, epsilon);
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
