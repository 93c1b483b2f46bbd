/*
 * srv_acct.c: not yet available in this build; every route answers 422.
 */
#include "srv_stateless.h"

int srv_acct_epsilon(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

int srv_acct_delta(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

int srv_acct_calibrate(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

int srv_acct_rdp(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

int srv_acct_compare(const json_t *body, json_t **ret_answer, acct_error *err)
{
	(void)body;
	(void)ret_answer;
	return acct_error_set(err, ACCT_EUNSUPPORTED, "", "this route is not available in this build");
}

