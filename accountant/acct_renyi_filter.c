/*
 * acct_renyi_filter.c: the rdp and zcdp ledger filters, and the basic
 * ledger's pricing of events that are not (epsilon, delta) pairs.
 *
 * Not yet available: these ledgers arrive with the accountants (issue 3).
 * Until then every entry point refuses with ACCT_EUNSUPPORTED, so no release
 * is ever priced approximately in silence.
 */
#include "acct.h"
#include "acct_internal.h"

int acct__filter_init_renyi(acct_filter *f, acct_error *err)
{
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/accountant",
			      "the %s ledger is not available in this build",
			      acct_ledger_kind_name(f->kind));
}

int acct__filter_price_renyi(const acct_filter *f, const acct_event *ev, acct_cost *ret_cost,
			     acct_error *err)
{
	(void)ev;
	(void)ret_cost;
	return acct__filter_init_renyi((acct_filter *)f, err);
}

bool acct__filter_within_renyi(const acct_filter *f, const acct_cost *total)
{
	(void)f;
	(void)total;
	return false;
}

double acct__filter_epsilon_renyi(const acct_filter *f, const acct_cost *total)
{
	(void)f;
	(void)total;
	return 0.0;
}

int acct__basic_price_fallback(const acct_filter *f, const acct_event *ev, double delta_share,
			       double *ret_eps, double *ret_delta, acct_error *err)
{
	(void)f;
	(void)delta_share;
	(void)ret_eps;
	(void)ret_delta;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/event/type",
			      "a basic ledger cannot price a '%s' event in this build",
			      acct_event_type_name(ev->type));
}
