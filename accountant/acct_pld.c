#include "acct.h"
#include "acct_internal.h"
int acct__pld_epsilon(const acct_event *ev, acct_neighbor nb, double interval, double delta,
		      acct_result *ret, acct_error *err)
{
	(void)ev; (void)nb; (void)interval; (void)delta; (void)ret;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/accountant", "pld: todo");
}
int acct__pld_delta(const acct_event *ev, acct_neighbor nb, double interval, double epsilon,
		    acct_result *ret, acct_error *err)
{
	(void)ev; (void)nb; (void)interval; (void)epsilon; (void)ret;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/accountant", "pld: todo");
}
