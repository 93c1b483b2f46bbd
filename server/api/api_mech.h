/*
 * api_mech.h: JSON-level handling of POST /v1/datasets/{id}/mechanisms/{name}.
 *
 * Pure: no database, no logging.  The server calls srv_mech_release with the
 * parsed body; on success it durably charges *ret_event on the dataset and
 * only then reveals *ret_output (and stores it for Idempotency-Key replays).
 * On a failed charge it frees both without revealing anything.
 */
#ifndef SRV_MECH_H
#define SRV_MECH_H

#include <jansson.h>

#include "acct.h"
#include "mech.h"

/*
 * The supported mechanism names, NULL-terminated, for the router and the
 * OpenAPI document: "laplace", "gaussian", "discrete_laplace",
 * "discrete_gaussian", "exponential", "permute_and_flip",
 * "report_noisy_max", "randomized_response", "label_em".
 */
const char *const *srv_mech_names(void);

/*
 * Validates the body of mechanism `name`, builds the event that prices it
 * and samples the output with `rng` (which must not be deterministic in the
 * server).  Every field is checked before any noise is drawn; a bad field
 * gives ACCT_EINVAL with err->where its JSON pointer ("/values/3",
 * "/epsilon"), an unknown name ACCT_EINVAL with where "/name" (the router
 * should answer 404 for it).  On success *ret_output is a new JSON value
 * (number, array, or index) and *ret_event a new event tree; the caller owns
 * both.  On failure neither is written.
 *
 * Bodies (one noise parameter each; D = "sensitivity"):
 *   laplace            value|values, sensitivity (L1), epsilon | noise_multiplier | scale
 *   gaussian           value|values, sensitivity (L2), epsilon+delta | noise_multiplier | sigma
 *   discrete_laplace   value|values (integers), sensitivity (integer, L1), epsilon | noise_multiplier | scale
 *   discrete_gaussian  value|values (integers), sensitivity (L2), epsilon+delta | noise_multiplier | sigma
 *   exponential        scores, sensitivity, epsilon, monotone (default false)  -> index
 *   permute_and_flip   scores, sensitivity, epsilon                            -> index
 *   report_noisy_max   scores, sensitivity, noise ("laplace"|"gumbel"|"gaussian"),
 *                      epsilon (laplace, gumbel) | sigma | noise_multiplier (gaussian), monotone -> index
 *   randomized_response value (integer in [0, num_buckets)), num_buckets, epsilon
 *   label_em           labels (array of 0/1), epsilon, sensitivity (default 1) -> labels
 */
int srv_mech_release(const char *name, const json_t *body, mech_rng *rng, json_t **ret_output,
		     acct_event **ret_event, acct_error *err);

/*
 * A query on a hosted table (mechanisms/mech_table.c), from a JSON body:
 *   {"query":"count", "epsilon":e}
 *   {"query":"sum"|"mean", "column":c, "lo":a, "hi":b, "epsilon":e}
 *   {"query":"histogram", "column":c, "categories":["x","y",...], "epsilon":e}
 *   {"query":"quantile", "column":c, "q":0.5, "lo":a, "hi":b, "epsilon":e}
 * `neighbor` is the dataset's relation.  On success *ret_output is
 * {"query":…, "mechanism":…, "output":…} (the mechanism that produced the
 * number: "discrete_laplace", "laplace", "exponential", ...) and
 * *ret_event its event; the caller charges the event before revealing the
 * output, as for srv_mech_release.  Errors name the field (/query, /column,
 * /lo, /hi, /q, /epsilon, /categories/i).
 */
int srv_mech_table_query(const mech_table *t, acct_neighbor neighbor, const json_t *body,
			 mech_rng *rng, json_t **ret_output, acct_event **ret_event,
			 acct_error *err);

#endif
