/*
 * acct_renyi_filter.c: the rdp and zcdp ledger filters, and the basic
 * ledger's pricing of events that are not (epsilon, delta) pairs.
 *
 * rdp: a union of single-order RDP filters (Feldman, Zrnic, "Individual
 * privacy accounting via a Renyi filter", NeurIPS 2021, Thm. 3.1 for one
 * order).  For each filter order alpha the budget B_alpha is the RDP that
 * the improved conversion (Canonne, Kamath, Steinke 2020, Prop. 12) maps to
 * exactly (eps_B, delta_B / |orders|).  A composition is admitted while at
 * least one order stays within its B_alpha; each single-order filter that
 * holds guarantees (eps_B, delta_B/|orders|)-DP, and a union bound over the
 * orders pays for choosing the order after the fact, so the ledger is
 * (eps_B, delta_B)-DP.
 *
 * The default filter orders (20 of them, each costs a share of delta):
 *   1.5 1.75 2 2.5 3 4 5 6 8 10 12 14 16 20 24 32 48 64 128 256
 * They cover the optima of the Gaussian-type curves for budgets between
 * roughly eps = 0.1 and eps = 50 at delta between 1e-12 and 1e-3.  A
 * dataset may name its own (acct_filter_init_orders): a user who knows the
 * regime keeps fewer orders and so a larger delta share at each; with one
 * order there is nothing to choose afterwards and nothing to split.
 *
 * zcdp: admit while sum rho <= rho_B, rho_B the largest rho whose tight
 * conversion gives (eps_B, delta_B).  zCDP bounds every order at once, so
 * fixing the order at the end is free (Bun, Steinke 2016; the filter is the
 * RDP filter above applied to the whole curve alpha -> alpha rho).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "acct.h"
#include "acct_internal.h"

static const double filter_orders[] = {
	1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 32, 48, 64, 128, 256,
};
#define N_FILTER_ORDERS (sizeof(filter_orders) / sizeof(filter_orders[0]))
_Static_assert(DPG_MAX_FILTER_ORDERS <= ACCT_FILTER_MAX_ORDERS, "a filter holds its orders");
_Static_assert(N_FILTER_ORDERS <= DPG_MAX_FILTER_ORDERS, "the default orders are allowed");

const double *acct_filter_default_orders(unsigned *ret_n)
{
	*ret_n = N_FILTER_ORDERS;
	return filter_orders;
}

int acct__filter_init_renyi(acct_filter *f, acct_error *err)
{
	if (!(f->delta_budget > 0.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/budget/delta",
				      "the %s ledger needs a budget delta > 0 (use basic for pure "
				      "epsilon-DP budgets)", acct_ledger_kind_name(f->kind));
	/* The conversions take log(delta / n): a subnormal delta underflows
	 * to 0 there, and the spent epsilon would be +infinity. */
	if (f->delta_budget < DPG_MIN_LEDGER_DELTA)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/budget/delta",
				      "the %s ledger needs a budget delta of at least %g",
				      acct_ledger_kind_name(f->kind), DPG_MIN_LEDGER_DELTA);
	if (f->kind == ACCT_LEDGER_ZCDP) {
		f->bound[0] = acct_zcdp_rho_budget(f->epsilon_budget, f->delta_budget);
		if (!(f->bound[0] > 0.0))
			return acct_error_set(err, ACCT_EUNSUPPORTED, "/budget",
					      "this budget allows no zCDP spending");
		return 0;
	}
	/* Orders named by acct_filter_init_orders, else the default ones. */
	if (f->n_orders == 0) {
		f->n_orders = N_FILTER_ORDERS;
		memcpy(f->orders, filter_orders, sizeof(filter_orders));
	}
	{
		double dshare = f->delta_budget / (double)f->n_orders;

		for (unsigned i = 0; i < f->n_orders; i++) {
			double a = f->orders[i];
			/* eps_B = B + log1p(-1/a) - (log dshare + log a)/(a - 1) */
			double l1 = log(dshare), l2 = log(a);
			double t1 = log1p(-1.0 / a), t2 = (l1 + l2) / (a - 1.0);
			double b = f->epsilon_budget - t1 + t2;
			/*
			 * Lower the bound past the rounding error, so that the exact
			 * conversion of the bound (with the exact delta_B / n) never
			 * exceeds eps_B.  b comes from ten roundings (delta_B / n, 1/a,
			 * log1p, the two logs, their sum, a - 1, the quotient, two
			 * sums), each off by at most one ulp (glibc's log and log1p
			 * err below one ulp); 1/a's error reaches log1p(-1/a)
			 * amplified at most threefold (a >= 1.5).  Every rounded value
			 * is at most M = eps_B + |t1| + (|l1| + l2) / (a - 1) in size
			 * (after the division for the logs' terms), and one ulp of
			 * it at most DBL_EPSILON M, so |b - exact| < 13 DBL_EPSILON M.
			 */
			b -= 16.0 * DBL_EPSILON *
			     (f->epsilon_budget + fabs(t1) + (fabs(l1) + l2) / (a - 1.0));
			/* Below 1.5 (a dataset's own orders) 1/a's error is
			 * amplified a/(a - 1) > 3 times: at most DBL_EPSILON/2 /
			 * (a - 1) in t1, covered twice over. */
			if (a < 1.5)
				b -= DBL_EPSILON / (a - 1.0);
			f->bound[i] = b > 0.0 ? nextafter(b, 0.0) : 0.0;
		}
	}
	return 0;
}

int acct__filter_price_renyi(const acct_filter *f, const acct_event *ev, acct_cost *ret_cost,
			     acct_error *err)
{
	acct_cost c;
	int rc = acct_event_validate(ev, f->neighbor, err);

	if (rc < 0)
		return rc;
	memset(&c, 0, sizeof(c));
	if (f->kind == ACCT_LEDGER_ZCDP) {
		c.n = 1;
		rc = acct_zcdp_rho(ev, f->neighbor, &c.v[0], err);
		if (rc < 0)
			return rc;
	} else {
		c.n = f->n_orders;
		/* A dataset's orders were checked when it was made: what is
		 * too costly here is the event. */
		rc = acct__rdp_work_check(ev, f->orders, f->n_orders, "/event", err);
		if (rc >= 0)
			rc = acct__rdp_at(ev, f->neighbor, f->orders, f->n_orders, c.v, NULL,
					  "/event", NULL, err);
		if (rc < 0)
			return rc;
	}
	*ret_cost = c;
	return 0;
}

bool acct__filter_within_renyi(const acct_filter *f, const acct_cost *total)
{
	if (f->kind == ACCT_LEDGER_ZCDP)
		return total->v[0] <= f->bound[0];
	for (unsigned i = 0; i < f->n_orders; i++)
		if (total->v[i] <= f->bound[i])
			return true;
	return false;
}

double acct__filter_epsilon_renyi(const acct_filter *f, const acct_cost *total)
{
	double best = INFINITY;

	if (f->kind == ACCT_LEDGER_ZCDP)
		return acct_zcdp_to_epsilon(total->v[0], f->delta_budget, false);
	for (unsigned i = 0; i < f->n_orders; i++) {
		double e = acct__rdp_order_epsilon(f->orders[i], total->v[i],
						   f->delta_budget / (double)f->n_orders);

		if (e < best)
			best = e;
	}
	return fmax(best, 0.0);
}

/*
 * A basic ledger charges (eps, delta_share) where eps is, for a lone
 * gaussian or discrete_gaussian, its exact curve (acct_exact.c), and
 * otherwise the smallest epsilon that rdp, zcdp or pld certify at
 * delta_share: each is an upper bound, so the minimum is one too, rounded
 * up.  Refused when no
 * delta share is named or none of them can price the event.
 */
int acct__basic_price_fallback(const acct_filter *f, const acct_event *ev, double delta_share,
			       double *ret_eps, double *ret_delta, acct_error *err)
{
	static const acct_accountant tried[] = {ACCT_RDP, ACCT_ZCDP, ACCT_PLD};
	double best = INFINITY;
	acct_error first;
	int rc = acct_event_validate(ev, f->neighbor, err);

	if (rc < 0)
		return rc;
	if (!(delta_share > 0.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "a basic ledger prices a '%s' event only at a delta share: "
				      "name one in \"delta\"", acct_event_type_name(ev->type));
	if (!(delta_share < 1.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "a basic ledger prices a '%s' event at a delta share below 1 "
				      "(\"delta\" is %g)", acct_event_type_name(ev->type), delta_share);
	acct_error_init(&first);
	if (acct__exact_leaf(ev)) {
		acct_result r;
		acct_error e;

		/* The exact curve is the tightest bound there is: no other
		 * accountant can go below it (pld would even compute it again
		 * for a discrete Gaussian), so it is the answer when it has one. */
		acct_error_init(&e);
		if (acct__exact_epsilon(ev, delta_share, &r, &e) == 0 && isfinite(r.epsilon)) {
			best = r.epsilon;
			goto priced;
		}
		acct_error_set(&first, e.code, e.where, "%s", e.text);
	}
	for (size_t i = 0; i < sizeof(tried) / sizeof(tried[0]); i++) {
		acct_options o;
		acct_result r;
		acct_error e;

		memset(&o, 0, sizeof(o));
		o.accountant = tried[i];
		o.neighbor = f->neighbor;
		acct_error_init(&e);
		if (acct_epsilon(ev, delta_share, &o, &r, &e) < 0) {
			if (e.code == ACCT_EINVAL)
				return acct_error_set(err, e.code, e.where, "%s", e.text);
			acct_error_set(&first, e.code, e.where, "%s", e.text);
			continue;
		}
		best = fmin(best, r.epsilon);
	}
	if (!isfinite(best))
		return acct_error_set(err, ACCT_EUNSUPPORTED, first.where,
				      "no accountant can price this event for a basic ledger: %s",
				      first.text);
priced:
	*ret_eps = nextafter(best, INFINITY);
	*ret_delta = delta_share;
	return 0;
}
