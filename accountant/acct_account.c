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

/* What acct_epsilon and acct_delta ask an accountant for. */
enum answer {
	EPSILON_AT_DELTA,
	DELTA_AT_EPSILON,
};

/* The accountant `opt` names, asked for `want` at x (a delta or an
 * epsilon), once the event is validated. */
static int answer_by(const acct_event *ev, enum answer want, double x, const acct_options *opt,
		     acct_result *r, acct_error *err)
{
	bool eps = want == EPSILON_AT_DELTA;
	acct_neighbor nb = opt->neighbor;
	const double *o;
	size_t n;
	int rc;

	acct_gsl_quiet();
	rc = acct_event_validate(ev, nb, err);
	if (rc < 0)
		return rc;
	switch (opt->accountant) {
	case ACCT_BASIC:
		return eps ? acct__basic_epsilon(ev, x, r, err) : acct__basic_delta(ev, x, r, err);
	case ACCT_STRONG:
		if (eps)
			return acct__strong_epsilon(ev, x, r, err);
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/accountant",
				      "the strong composition theorem answers epsilon for a delta, "
				      "not delta for an epsilon");
	case ACCT_MOMENTS:
		return eps ? acct__moments_epsilon(ev, nb, x, r, err)
			   : acct__moments_delta(ev, nb, x, r, err);
	case ACCT_RDP:
		orders_of(opt, &o, &n);
		return eps ? acct__rdp_epsilon(ev, nb, o, n, x, opt->rdp_work, r, err)
			   : acct__rdp_delta(ev, nb, o, n, x, opt->rdp_work, r, err);
	case ACCT_ZCDP:
		return eps ? acct__zcdp_epsilon(ev, nb, x, opt->zcdp_bun_steinke, r, err)
			   : acct__zcdp_delta(ev, nb, x, opt->zcdp_bun_steinke, r, err);
	case ACCT_PLD:
		return eps ? acct__pld_epsilon(ev, nb, pld_interval(opt), opt->pld_work, x, r, err)
			   : acct__pld_delta(ev, nb, pld_interval(opt), opt->pld_work, x, r, err);
	default:
		return acct_error_set(err, ACCT_EINVAL, "/accountant", "unknown accountant");
	}
}

int acct_epsilon(const acct_event *ev, double delta, const acct_options *opt,
		 acct_result *ret, acct_error *err)
{
	acct_result r = {.epsilon = NAN, .delta = delta, .order = NAN};
	int rc;

	if (!(delta >= 0.0 && delta < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/delta", "'delta' must be in [0, 1)");
	rc = answer_by(ev, EPSILON_AT_DELTA, delta, opt, &r, err);
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
	int rc;

	if (!(isfinite(epsilon) && epsilon >= 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "'epsilon' must be a finite number >= 0");
	rc = answer_by(ev, DELTA_AT_EPSILON, epsilon, opt, &r, err);
	if (rc < 0)
		return rc;
	*ret = r;
	return 0;
}
