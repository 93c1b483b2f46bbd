/*
 * acct_account.c: the epsilon/delta front door, which validates an event
 * and dispatches it to the accountant the options name.  Each accountant's
 * entry point answers every event it takes, special cases included, so the
 * dispatch is one switch by accountant.
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

/* The accountant `opt` names, asked for epsilon at `delta`. */
static int epsilon_by(const acct_event *ev, double delta, const acct_options *opt,
		      acct_result *r, acct_error *err)
{
	const double *o;
	size_t n;

	switch (opt->accountant) {
	case ACCT_BASIC:
		return acct__basic_epsilon(ev, delta, r, err);
	case ACCT_STRONG:
		return acct__strong_epsilon(ev, delta, r, err);
	case ACCT_MOMENTS:
		return acct__moments_epsilon(ev, opt->neighbor, delta, r, err);
	case ACCT_RDP:
		orders_of(opt, &o, &n);
		return acct__rdp_epsilon(ev, opt->neighbor, o, n, delta, r, err);
	case ACCT_ZCDP:
		return acct__zcdp_epsilon(ev, opt->neighbor, delta, opt->zcdp_bun_steinke, r, err);
	case ACCT_PLD:
		return acct__pld_epsilon(ev, opt->neighbor, pld_interval(opt), opt->pld_work, delta,
					 r, err);
	default:
		return acct_error_set(err, ACCT_EINVAL, "/accountant", "unknown accountant");
	}
}

int acct_epsilon(const acct_event *ev, double delta, const acct_options *opt,
		 acct_result *ret, acct_error *err)
{
	acct_result r = {.epsilon = NAN, .delta = delta, .order = NAN};
	int rc;

	acct_gsl_quiet();
	if (!(delta >= 0.0 && delta < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/delta", "'delta' must be in [0, 1)");
	rc = acct_event_validate(ev, opt->neighbor, err);
	if (rc < 0)
		return rc;
	rc = epsilon_by(ev, delta, opt, &r, err);
	if (rc < 0)
		return rc;
	if (isnan(r.epsilon))
		return acct_error_set(err, ACCT_ENUMERIC, "/event", "epsilon is not a number");
	*ret = r;
	return 0;
}

/* The accountant `opt` names, asked for delta at `epsilon`. */
static int delta_by(const acct_event *ev, double epsilon, const acct_options *opt,
		    acct_result *r, acct_error *err)
{
	const double *o;
	size_t n;

	switch (opt->accountant) {
	case ACCT_BASIC:
		return acct__basic_delta(ev, epsilon, r, err);
	case ACCT_STRONG:
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/accountant",
				      "the strong composition theorem answers epsilon for a delta, "
				      "not delta for an epsilon");
	case ACCT_MOMENTS:
		return acct__moments_delta(ev, opt->neighbor, epsilon, r, err);
	case ACCT_RDP:
		orders_of(opt, &o, &n);
		return acct__rdp_delta(ev, opt->neighbor, o, n, epsilon, r, err);
	case ACCT_ZCDP:
		return acct__zcdp_delta(ev, opt->neighbor, epsilon, opt->zcdp_bun_steinke, r, err);
	case ACCT_PLD:
		return acct__pld_delta(ev, opt->neighbor, pld_interval(opt), opt->pld_work, epsilon,
				       r, err);
	default:
		return acct_error_set(err, ACCT_EINVAL, "/accountant", "unknown accountant");
	}
}

int acct_delta(const acct_event *ev, double epsilon, const acct_options *opt,
	       acct_result *ret, acct_error *err)
{
	acct_result r = {.epsilon = epsilon, .delta = NAN, .order = NAN};
	int rc;

	acct_gsl_quiet();
	if (!(isfinite(epsilon) && epsilon >= 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "'epsilon' must be a finite number >= 0");
	rc = acct_event_validate(ev, opt->neighbor, err);
	if (rc < 0)
		return rc;
	rc = delta_by(ev, epsilon, opt, &r, err);
	if (rc < 0)
		return rc;
	*ret = r;
	return 0;
}
