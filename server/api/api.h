/*
 * api.h: the route handlers' layer (server/api/), as the rest of dpgate
 * sees it: the route table (srv_routes, declared in http.h) and the
 * stateless JSON routes, shared by HTTP and the CLI.  The handlers talk to
 * the store through store.h and to HTTP through http.h's request and
 * response structs; the files of api/ share api_internal.h.
 *
 *
 * Each handler takes the parsed request body (borrowed), and on success
 * returns 0 with a new JSON answer in *ret_answer (caller owns it).  On
 * failure it returns a negative ACCT_E* code with `err` filled: ACCT_EINVAL
 * becomes 400 with `err->where` as the field at fault, ACCT_EUNSUPPORTED 422.
 * Handlers are pure computations: no database, no logging, thread-safe.
 */
#ifndef DPGATE_SRV_API_H
#define DPGATE_SRV_API_H

#include <jansson.h>

#include "acct.h"

typedef int (*srv_json_fn)(const json_t *body, json_t **ret_answer, acct_error *err);

/* server/srv_acct.c: /v1/accountant/{epsilon,delta,calibrate,rdp,compare} */
int srv_acct_epsilon(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_delta(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_calibrate(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_rdp(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_compare(const json_t *body, json_t **ret_answer, acct_error *err);

/* server/srv_pate.c: /v1/pate/{cost,smooth-sensitivity} */
int srv_pate_cost(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_pate_smooth_sensitivity(const json_t *body, json_t **ret_answer, acct_error *err);

/* server/srv_labelem.c: /v1/label-em/guidance */
int srv_label_em_guidance(const json_t *body, json_t **ret_answer, acct_error *err);

/*
 * server/cli/check.c: `dpgate check POLICY [--json]`.  Returns the process
 * exit status: 0 every plan fits, 1 one does not, 2 bad policy or usage.
 */
int srv_check_main(int argc, char **argv);

#endif
