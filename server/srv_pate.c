/*
 * srv_pate.c: not yet available in this build; every route answers 422.
 */
#include "srv_stateless.h"

int srv_pate_cost(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

int srv_pate_smooth_sensitivity(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

