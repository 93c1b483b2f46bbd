/*
 * acct_filter.c: the ledger filters that gate adaptively chosen releases.
 *
 * basic: Rogers, Roth, Ullman, Vadhan, "Privacy odometers and filters:
 * pay-as-you-go composition" (NeurIPS 2016), the basic composition filter
 * (see also Whitehouse, Ramdas, Rogers, Wu 2023, "Fully adaptive
 * composition in differential privacy"): an adaptively chosen sequence of
 * (eps_i, delta_i)-DP releases,
 * stopped as soon as the next one would push sum eps_i past eps_B or sum
 * delta_i past delta_B, is (eps_B, delta_B)-DP.  Sums are kept rounded
 * toward +infinity so the stored total never understates the exact one.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "acct.h"
#include "acct_internal.h"

void acct_filter_zero(const acct_filter *f, acct_cost *ret_cost)
{
	memset(ret_cost, 0, sizeof(*ret_cost));
	switch (f->kind) {
	case ACCT_LEDGER_BASIC: ret_cost->n = 2; break;
	case ACCT_LEDGER_ZCDP: ret_cost->n = 1; break;
	case ACCT_LEDGER_RDP: ret_cost->n = f->n_orders; break;
	}
}

int acct_filter_init(acct_filter *f, acct_ledger_kind kind, acct_neighbor neighbor,
		     double epsilon_budget, double delta_budget, acct_error *err)
{
	acct_filter tmp;

	if (!(isfinite(epsilon_budget) && epsilon_budget > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/budget/epsilon",
				      "budget epsilon must be a finite number > 0");
	if (!(isfinite(delta_budget) && delta_budget >= 0.0 && delta_budget < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/budget/delta",
				      "budget delta must be in [0, 1)");
	memset(&tmp, 0, sizeof(tmp));
	tmp.kind = kind;
	tmp.neighbor = neighbor;
	tmp.epsilon_budget = epsilon_budget;
	tmp.delta_budget = delta_budget;
	switch (kind) {
	case ACCT_LEDGER_BASIC:
		break;
	case ACCT_LEDGER_RDP:
	case ACCT_LEDGER_ZCDP: {
		int rc = acct__filter_init_renyi(&tmp, err);

		if (rc < 0)
			return rc;
		break;
	}
	default:
		return acct_error_set(err, ACCT_EINVAL, "/accountant", "unknown ledger accountant");
	}
	*f = tmp;
	return 0;
}

int acct_filter_init_orders(acct_filter *f, acct_ledger_kind kind, acct_neighbor neighbor,
			    double epsilon_budget, double delta_budget, const double *orders,
			    unsigned n, acct_error *err)
{
	acct_filter tmp;
	int rc = acct_filter_init(&tmp, kind, neighbor, epsilon_budget, delta_budget, err);

	if (rc < 0)
		return rc;
	if (n == 0) {
		*f = tmp;
		return 0;
	}
	if (kind != ACCT_LEDGER_RDP)
		return acct_error_set(err, ACCT_EINVAL, "/filter_orders",
				      "only an rdp ledger has filter orders");
	if (n > DPG_MAX_FILTER_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/filter_orders",
				      "at most %d filter orders", DPG_MAX_FILTER_ORDERS);
	for (unsigned i = 0; i < n; i++) {
		char where[32];

		snprintf(where, sizeof(where), "/filter_orders/%u", i);
		if (!(isfinite(orders[i]) && orders[i] > DPG_MIN_FILTER_ORDER &&
		      orders[i] <= DPG_MAX_RDP_ORDER))
			return acct_error_set(err, ACCT_EINVAL, where,
					      "a filter order must be a number above %g and at most %g",
					      DPG_MIN_FILTER_ORDER, DPG_MAX_RDP_ORDER);
		if (i > 0 && !(orders[i] > orders[i - 1]))
			return acct_error_set(err, ACCT_EINVAL, where,
					      "filter orders must be increasing, without repeats");
	}
	memcpy(tmp.orders, orders, n * sizeof(orders[0]));
	tmp.n_orders = n;
	rc = acct__filter_init_renyi(&tmp, err);
	if (rc < 0)
		return rc;
	*f = tmp;
	return 0;
}

/*
 * Prices an event as an (epsilon, delta) pair for the basic filter when the
 * pair follows from the event's definition alone (pure-DP mechanisms and
 * explicit pairs), composed by basic composition with upward rounding.
 */
static int basic_price(const acct_event *ev, double *ret_eps, double *ret_delta,
		       acct_error *err)
{
	double e = 0.0, d = 0.0;

	switch (ev->type) {
	case ACCT_EV_EPSILON_DELTA:
		e = ev->u.epsilon_delta.epsilon;
		d = ev->u.epsilon_delta.delta;
		break;
	case ACCT_EV_LAPLACE:
	case ACCT_EV_EXPONENTIAL_MECHANISM:
	case ACCT_EV_PERMUTE_AND_FLIP:
	case ACCT_EV_DISCRETE_LAPLACE:
	case ACCT_EV_RANDOMIZED_RESPONSE:
		e = acct_pure_epsilon_up(ev);
		break;
	case ACCT_EV_SELF_COMPOSED: {
		double ie, id;
		int rc = basic_price(ev->u.self_composed.event, &ie, &id, err);

		if (rc < 0)
			return rc;
		e = acct_mul_up((double)ev->u.self_composed.count, ie);
		d = acct_mul_up((double)ev->u.self_composed.count, id);
		break;
	}
	case ACCT_EV_COMPOSED:
		for (size_t i = 0; i < ev->u.composed.n; i++) {
			double ie, id;
			int rc = basic_price(ev->u.composed.events[i], &ie, &id, err);

			if (rc < 0)
				return rc;
			e = acct_add_up(e, ie);
			d = acct_add_up(d, id);
		}
		break;
	default:
		return ACCT_EUNSUPPORTED;
	}
	if (!(isfinite(e) && e >= 0.0 && isfinite(d) && d >= 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/event", "event prices to a non-finite cost");
	*ret_eps = e;
	*ret_delta = d;
	return 0;
}

int acct_filter_price(const acct_filter *f, const acct_event *ev, double delta_share,
		      acct_cost *ret_cost, acct_error *err)
{
	acct_cost c;

	if (!ev)
		return acct_error_set(err, ACCT_EINVAL, "/event", "missing event");
	acct_filter_zero(f, &c);
	switch (f->kind) {
	case ACCT_LEDGER_BASIC: {
		acct_error local;
		int rc;

		acct_error_init(&local);
		/* Relation rules first (randomized response is replace-only). */
		rc = acct_event_validate(ev, f->neighbor, &local);
		if (rc == 0)
			rc = basic_price(ev, &c.v[0], &c.v[1], &local);
		if (rc == ACCT_EUNSUPPORTED && local.code == ACCT_OK)
			rc = acct__basic_price_fallback(f, ev, delta_share, &c.v[0], &c.v[1], &local);
		if (rc < 0) {
			acct_error_set(err, rc, local.where, "%s", local.text[0] ? local.text :
				       "the basic ledger cannot price this event");
			return rc;
		}
		break;
	}
	case ACCT_LEDGER_RDP:
	case ACCT_LEDGER_ZCDP: {
		int rc = acct__filter_price_renyi(f, ev, &c, err);

		if (rc < 0)
			return rc;
		break;
	}
	}
	*ret_cost = c;
	return 0;
}

bool acct_filter_within(const acct_filter *f, const acct_cost *total)
{
	switch (f->kind) {
	case ACCT_LEDGER_BASIC:
		return total->v[0] <= f->epsilon_budget && total->v[1] <= f->delta_budget;
	case ACCT_LEDGER_RDP:
	case ACCT_LEDGER_ZCDP:
		return acct__filter_within_renyi(f, total);
	}
	return false;
}

bool acct_filter_admits_some(const acct_filter *f)
{
	if (f->kind != ACCT_LEDGER_RDP)
		return true;
	for (unsigned i = 0; i < f->n_orders; i++)
		if (f->bound[i] > 0.0)
			return true;
	return false;
}

double acct_filter_epsilon(const acct_filter *f, const acct_cost *total)
{
	switch (f->kind) {
	case ACCT_LEDGER_BASIC:
		return total->v[0];
	case ACCT_LEDGER_RDP:
	case ACCT_LEDGER_ZCDP:
		return acct__filter_epsilon_renyi(f, total);
	}
	return INFINITY;
}

double acct_filter_delta(const acct_filter *f, const acct_cost *total)
{
	if (f->kind == ACCT_LEDGER_BASIC)
		return total->v[1];
	for (unsigned i = 0; i < total->n; i++)
		if (total->v[i] > 0.0)
			return f->delta_budget;
	return 0.0;
}
