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
#include "http.h"
#include "store.h"
#include "trn.h"

typedef int (*srv_json_fn)(const json_t *body, json_t **ret_answer, acct_error *err);

/* server/api/api_acct.c: /v1/accountant/{epsilon,delta,calibrate,rdp,compare} */
int srv_acct_epsilon(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_delta(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_calibrate(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_rdp(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_acct_compare(const json_t *body, json_t **ret_answer, acct_error *err);

/* server/api/api_pate.c: /v1/pate/{cost,smooth-sensitivity} */
int srv_pate_cost(const json_t *body, json_t **ret_answer, acct_error *err);
int srv_pate_smooth_sensitivity(const json_t *body, json_t **ret_answer, acct_error *err);

/* server/api/api_labelem.c: /v1/label-em/guidance */
int srv_label_em_guidance(const json_t *body, json_t **ret_answer, acct_error *err);

/*
 * server/cli/cli_check.c: `dpgate check POLICY [--json]`.  Returns the process
 * exit status: 0 every plan fits, 1 one does not, 2 bad policy or usage.
 */
int srv_check_main(int argc, char **argv);

/* The route table the server answers (api_routes.c), for serve's srv_ctx
 * and `dpgate routes`. */
extern const srv_route srv_routes[];
extern const size_t srv_routes_count;
/* The GET routes whose answers revalidate (ETag, 304, long-poll). */
extern const srv_route_cache srv_route_caching[];
extern const size_t srv_route_caching_count;
extern const srv_route_query srv_route_queries[];
extern const size_t srv_route_queries_count;

/* ---- hosted tables, for serve and the job pool (api_mech_routes.c) ---- */

/*
 * Reads the dataset's hosted table back (with its recorded schema) for a
 * trainer, reading the link again if an upload replaced the file meanwhile
 * (a few times); the parse comes from `cache` when it holds it (may be
 * NULL).  A table file is read under data_dir/tables, by the name the link
 * gives it (api_mech_routes.c).  Returns 0 and a reference to the table
 * (srv_table_cache_release with the same cache; the table is shared and
 * read-only), ACCT_EUNSUPPORTED when no table is hosted, or
 * ACCT_EINTERNAL when it cannot be read (or was replaced under every try).  The error text never
 * quotes the table's contents.
 */
int srv_data_load_table(srv_table_cache *cache, srv_db *db, const char *data_dir,
			const char *dataset_id, srv_table_ref **ret, acct_error *err);

/*
 * Removes the files in <data_dir>/tables that no dataset_data row names:
 * orphans of a crash between an upload's commit and its removal of the
 * replaced file, or of an upload that never committed.  Only names an
 * upload makes with a random suffix are considered (<id>.<hex>.csv and the
 * older <id>.csv.tmp.<hex>), and only files older than ten minutes (an
 * upload of another process may be in flight).  Meant for start-up, before
 * requests are served.  Returns SRV_OK and the count removed in
 * *ret_removed (may be NULL), or SRV_DB_ERROR when the directory or the
 * database cannot be read (files may have been removed).
 */
int srv_data_sweep_tables(srv_db *db, const char *data_dir, unsigned *ret_removed);

/* ---- a released model's predictions (api_predict.c), for the predict
 * route and `dpgate predict` ---- */

/* The class (first argmax) and softmax scores (n x classes) of n rows of
 * the model's inputs (row-major).  0, or ACCT_EINVAL / ACCT_ENOMEM, or
 * ACCT_EUNSUPPORTED (422) for a row whose scores are not all finite
 * numbers (finite inputs so large that the model's sums overflow), at
 * "WHERE/i" (i from 0) when `where` is "/rows", else at `where` with the
 * row's number (from 1) in the text. */
int srv_predict(const trn_model *m, const double *x, size_t n, const char *where, uint32_t *pred,
		double *scores, acct_error *err);

/* Rows from {"rows": [[...], ...]}: each of d finite numbers, 1 to
 * DPG_MAX_PREDICT_ROWS of them (more: ACCT_EUNSUPPORTED, 422).  *ret_x is
 * malloc'ed, row-major. */
int srv_predict_json_rows(const json_t *body, size_t d, double **ret_x, size_t *ret_n,
			  acct_error *err);

/*
 * Rows from CSV text (RFC 4180).  With `features` (the model's d input
 * names) the header must hold each as a numeric column, matched by name
 * (other columns are ignored).  Without, the table has d numeric columns,
 * the inputs in order, and a first line of numbers only is a row (there
 * is no header).  1 to DPG_MAX_PREDICT_ROWS rows, as the JSON rows.  A
 * row or a feature's cell that does not parse is ACCT_EINVAL at its line
 * of `text` ("/csv/line/N", "/csv/line/N/COLUMN"; a headerless table's
 * COLUMN is the column's number).
 */
int srv_predict_csv_rows(const char *text, size_t len, const json_t *features, size_t d,
			 double **ret_x, size_t *ret_n, acct_error *err);

/* Appends {"classes": [...], "scores": [[...], ...]} (and "labels": the
 * label of each score column, with `labels`) to b as JSON text: a class is
 * its label from `labels` (borrowed) or, without, its index.  b->failed
 * tells an allocation that failed. */
void srv_predict_answer(struct srv_buf *b, const uint32_t *pred, const double *scores, size_t n,
			size_t k, const json_t *labels);

/* The labels of a job's k classes: a categorical label's declared names
 * (a new reference), or NULL when a class is its index (a numeric label's
 * class v is the value v; Fashion-MNIST's classes are 0..9). */
json_t *srv_job_class_labels(const json_t *params, uint32_t k);

/* ---- the store's listings as JSON (api_lists.c) ---- */

/* Every key (never a secret) as the JSON array GET /v1/keys and `dpgate
 * keys list` show.  SRV_OK or SRV_DB_ERROR. */
int srv_keys_json(srv_db *db, json_t **ret);

/* srv_store_verify's findings as `dpgate verify`'s JSON report: {"ok",
 * "datasets": [...]}.  SRV_OK when all agree, SRV_CONFLICT when not (the
 * report says where), SRV_DB_ERROR (no report). */
int srv_verify_json(srv_db *db, json_t **ret_report);

#endif
