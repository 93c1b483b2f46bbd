/*
 * jobs.h: the training-job queue and worker pool.  Job ids wait in a
 * bounded in-memory queue (DPG_MAX_QUEUED_JOBS); each worker thread takes
 * one, runs it to its end and records the outcome in the store.  The job
 * rows, not this queue, are the durable state: the start-up rule in
 * api_jobs.h rebuilds the queue from them.
 */
#ifndef SRV_JOBS_JOBS_H
#define SRV_JOBS_JOBS_H

#include "http.h"
#include "trn.h"

typedef struct srv_jobs srv_jobs;

/*
 * Loads a dataset's hosted table, parsed with its recorded schema: the
 * routes' srv_data_load_table (api_mech_routes.h), handed to the pool at
 * start so that jobs/ does not depend on the layer that feeds it.  0, or a
 * negative ACCT_E* code with err filled.
 */
typedef int (*srv_jobs_table_fn)(srv_table_cache *cache, srv_db *db, const char *data_dir,
				 const char *dataset_id, srv_table_ref **ret, acct_error *err);

/*
 * Applies the start-up rule (api_jobs.h) and starts `workers` worker
 * threads, which read hosted tables with `load_table`.  Returns 0, or -1
 * with a message in err.
 */
int srv_jobs_start(srv_ctx *ctx, unsigned workers, srv_jobs_table_fn load_table, srv_jobs **ret,
		   srv_error *err);

/* Cancels running jobs (they end as failed, reservation committed), joins
 * the workers and frees the pool.  Queued jobs stay queued in the database.
 * Accepts NULL. */
void srv_jobs_stop(srv_jobs *jobs);

/*
 * Claims a place in the queue for a submission about to reserve its budget;
 * false when queued jobs and claims fill it.  The claim ends with
 * srv_jobs_enqueue_claimed (the reservation committed) or srv_jobs_unclaim
 * (it did not), so the queue never holds more than DPG_MAX_QUEUED_JOBS and
 * no accepted job waits for a restart to run.
 */
bool srv_jobs_claim(srv_jobs *jobs);
void srv_jobs_unclaim(srv_jobs *jobs);
void srv_jobs_enqueue_claimed(srv_jobs *jobs, const char *id);

/* Drops job `id`'s entry from the queue, if it has one: the job was
 * cancelled while queued, and its place is free at once (not when a busy
 * worker would have taken the entry and found nothing to run).  Accepts
 * a NULL pool. */
void srv_jobs_forget(srv_jobs *jobs, const char *id);

/* The freshest progress of job `id` if a worker runs it (a new object),
 * else NULL.  Accepts a NULL pool. */
json_t *srv_jobs_live_progress(srv_jobs *jobs, const char *id);

/* Asks the worker running job `id`, if any, to stop it as cancelled by its
 * user.  Accepts a NULL pool. */
void srv_jobs_cancel_running(srv_jobs *jobs, const char *id);
/* ---- job parameters (jobs_params.c) ---------------------------------- */

/*
 * Fills DP-SGD parameters from the job's "params" object over the defaults
 * (trn_dpsgd_params_default), then checks them with
 * trn_dpsgd_params_validate.  Unknown keys are refused.
 */
int srv__jobs_parse_params(const json_t *params, trn_dpsgd_params *p, acct_error *err);
/*
 * Fills an ensemble job's parameters from its "params" (over
 * trn_ensemble_params_default) and validates them: "party_column" and
 * "auxiliary_data" are required strings, "parties" an integer M or a list
 * of M names, "local_model" a kind or a list.  Unknown keys are refused.
 */
int srv__jobs_parse_ensemble(const json_t *params, trn_ensemble_params *p, acct_error *err);

/*
 * Fills an slmc job's parameters from its "params" (over
 * trn_slmc_params_default) and validates them with
 * trn_slmc_params_validate: "parties" is an integer M or, with a
 * "party_column", M names; "test_data" needs "label" (its label column) and
 * declared "classes".  Unknown keys are refused.  The caller sets
 * p->neighbor from the dataset.
 */
int srv__jobs_parse_slmc(const json_t *params, trn_slmc_params *p, acct_error *err);

/*
 * Fills a label_em job's parameters from its "params" (over
 * trn_label_em_params_default) and validates them: "epsilon" is required,
 * "label" and "test_data" strings, "hidden" only with "model": "mlp".
 * Unknown keys are refused.
 */
int srv__jobs_parse_label_em(const json_t *params, trn_label_em_params *p, acct_error *err);

/*
 * Fills a pate job's parameters from its "params" (over
 * trn_pate_params_default) and validates them: "student_data" is a
 * public dataset id (required on a hosted table, checked at submission);
 * "teacher_model" and "student_model" a kind
 * or an object of its SGD fields.  Unknown keys are refused.  The
 * parameters' `delta` is the dataset's, set by the caller.
 */
int srv__jobs_parse_pate(const json_t *params, trn_pate_params *p, acct_error *err);

/* True when `column` (a schema entry) is the job's "party_column", which
 * is never a feature. */
bool srv__jobs_is_party_column(const json_t *params, const json_t *column);

/* Checks the job's label and classes against a hosted table's schema
 * (`columns`, NULL for a builtin link) and gives the feature and class
 * counts the model will have. */
int srv__jobs_check_label(const json_t *params, const json_t *columns, size_t *ret_features,
			  uint32_t *ret_classes, acct_error *err);

/*
 * What a job reads of a hosted table's schema (`columns`, as stored):
 * {"features": [names], "label": name, "label_kind": "numeric" |
 * "categorical"}, the features every numeric column but the label, in
 * table order.  NULL when the label names no column (or out of memory).
 */
json_t *srv__jobs_table_schema(const json_t *params, const json_t *columns);

/*
 * What a clustering job (slmc) reads of a hosted table's schema: as
 * srv__jobs_table_schema, but the private table needs no label: the
 * features are every numeric column but the party column and the column
 * named by "label" (when the table has one), and "label" / "label_kind"
 * describe test_data's label column (its kind that of the declared
 * "classes": an integer for a numeric label).  NULL when out of memory.
 */
json_t *srv__jobs_clustering_schema(const json_t *params, const json_t *columns);

/*
 * Checks a public table a job names at `where` ("/params/test_data"):
 * dataset `id` exists and `who` (NULL: anyone) sees it, it is public, a
 * table of 1 to max_rows rows is linked, and it has every feature of
 * `schema` as a numeric column and, when `labelled`, the label column of
 * the same kind, matched by name.  0, or ACCT_EUNSUPPORTED (422) naming
 * `where`.
 */
int srv__jobs_check_public(srv_db *db, const srv_principal *who, const char *where,
			   const char *id, const json_t *schema, bool labelled, uint64_t max_rows,
			   acct_error *err);

/* JSON text as the store keeps it, parsed (a new reference); NULL for NULL
 * text or text that does not parse. */
json_t *srv_json_parse_text(const char *text);

/*
 * The checks of a pate job before anything is reserved (jobs_pate.c): an
 * rdp ledger; on a hosted table its public student_data (the features by
 * name, 1 to DPG_MAX_PATE_STUDENT_ROWS rows), on Fashion-MNIST none (the
 * test split's first TRN_PATE_FASHION_MNIST_POOL images); the trainer's
 * bounds on the shapes (trn_pate_check_shape).  p->delta is set to the
 * dataset's.
 */
int srv__jobs_check_pate(srv_db *db, const srv_principal *who, const srv_dataset *ds,
			 const json_t *params, const json_t *columns, size_t features,
			 uint32_t classes, trn_pate_params *p, acct_error *err);

#endif
