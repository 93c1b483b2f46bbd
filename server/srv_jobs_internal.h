/*
 * srv_jobs_internal.h: what the files of the training-jobs feature share and
 * nothing else includes: the job row and its SQL (srv_store_jobs.c), the
 * DP-SGD parameters a job carries (srv_jobs_params.c), and the data link a
 * job trains on.  See srv_jobs.h for the budget rule they implement.
 */
#ifndef SRV_JOBS_INTERNAL_H
#define SRV_JOBS_INTERNAL_H

#include "srv.h"
#include "trn.h"

#define SRV_JOB_ID_BYTES 48

/* One row of the jobs table.  The JSON members are the stored texts parsed
 * back (NULL when the column is NULL); srv__job_row_clear frees them. */
typedef struct srv_job_row {
	char id[48];
	char dataset_id[DPG_MAX_ID_BYTES + 1];
	char trainer[16];
	char state[16];
	char reservation_id[64];
	int64_t n_train;
	json_t *params;
	json_t *event;
	json_t *progress;
	json_t *result;
	char *error;
	char *model_path;
	char created_at[32], started_at[32], finished_at[32];
} srv_job_row;

/* A new job row, written in the transaction that reserves its budget. */
typedef struct srv_job_new {
	const char *id;
	const char *dataset_id;
	const char *params_text;
	const char *event_text;
	int64_t n_train;
	const char *reservation_id;
	const char *actor;
	const char *note;
} srv_job_new;

/* What GET .../data shows of a dataset's data link. */
typedef struct srv_data_link {
	char kind[16];
	char builtin[64];       /* empty when the link names no builtin */
	int64_t rows;
	int64_t bytes;
	json_t *columns;        /* the stored schema, or NULL; caller frees */
	char created_at[32];
	bool rows_public;
	bool schema_declared;
} srv_data_link;

/* ---- the jobs' SQL (srv_store_jobs.c): SRV_OK or a negative SRV_ code ---- */

void srv__job_row_clear(srv_job_row *j);
/* Loads job `id` into `j` (cleared first); SRV_NOT_FOUND when there is none.
 * On SRV_OK the caller clears `j`. */
int srv__job_load(srv_db *db, const char *id, srv_job_row *j);
/* Inserts a queued job inside the caller's write transaction. */
int srv__job_insert(srv_db *db, const srv_job_new *job);
/* Moves a queued job to running unless its dataset was archived;
 * SRV_NOT_FOUND when it is not queued or its dataset is archived. */
int srv__job_mark_running(srv_db *db, const char *id, const char *now);
/* Stores the progress text of a running job (best effort). */
void srv__job_save_progress(srv_db *db, const char *id, const char *progress_text);
/*
 * Ends a job in one transaction: closes its reservation (commit, or release
 * when `release` — only for jobs that never started) and records the final
 * state, result, error and model.  `from_state` guards the transition
 * (SRV_CONFLICT when the job is in another state).
 */
int srv__job_finish(srv_db *db, const char *job_id, const char *from_state, const char *state,
		    bool release, const char *result, const char *error, const char *model_path,
		    const char *actor);
/* Up to `max` ids of jobs in `state` ("running" or "queued"), queued ones
 * oldest first, into `ids`; SRV_DB_ERROR when they cannot be read. */
int srv__job_ids_in_state(srv_db *db, const char *state, char (*ids)[SRV_JOB_ID_BYTES],
			  unsigned max, unsigned *ret_n);
/* SQLite's text for the connection's last error, for a start-up message. */
const char *srv__job_db_error(srv_db *db);
/* Calls `fn` with each job of a dataset, newest first, at most 1000. */
int srv__job_each_of_dataset(srv_db *db, const char *dataset_id,
			     void (*fn)(void *arg, const srv_job_row *j), void *arg);

/* The kind ("builtin", "table" or "" when nothing is linked) and builtin
 * name of a data link; SRV_DB_ERROR when it cannot be read. */
int srv__data_link_kind(srv_db *db, const char *dataset_id, char kind[16], char builtin[64]);
/* The linked data's row count and, for a hosted table, its column schema
 * (a new reference, or NULL); SRV_NOT_FOUND when nothing is linked. */
int srv__data_link_rows(srv_db *db, const char *dataset_id, int64_t *ret, json_t **ret_columns);
/* Reads a data link; SRV_NOT_FOUND when there is none.  On SRV_OK the
 * caller frees ret->columns. */
int srv__data_link_get(srv_db *db, const char *dataset_id, srv_data_link *ret);
/* Links builtin data in one transaction; a hosted table file it replaces
 * goes to *ret_old_table for the caller to drop after the commit. */
int srv__data_link_builtin(srv_db *db, const char *dataset_id, const char *builtin,
			   const char *dir, int64_t rows, const char *actor, char **ret_old_table);

/* ---- job parameters (srv_jobs_params.c) ---------------------------------- */

/*
 * Fills DP-SGD parameters from the job's "params" object over the defaults
 * (trn_dpsgd_params_default), then checks them with
 * trn_dpsgd_params_validate.  Unknown keys are refused.
 */
int srv__jobs_parse_params(const json_t *params, trn_dpsgd_params *p, acct_error *err);
/* Checks the job's label and classes against a hosted table's schema
 * (`columns`, NULL for a builtin link) and gives the feature and class
 * counts the model will have. */
int srv__jobs_check_label(const json_t *params, const json_t *columns, size_t *ret_features,
			  uint32_t *ret_classes, acct_error *err);

/* Reads dataset {id} (req->params[0]), or answers as every dataset route
 * does (404 when there is none); false when it answered. */
bool srv__dataset_or_reply(srv_request *req, srv_response *res, srv_dataset *ds);

#endif
