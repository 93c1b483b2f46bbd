/*
 * srv_mech_routes.c: budget-charged mechanism releases, queries on hosted
 * tables, and CSV uploads (see srv_mech_routes.h for the rule every release
 * follows).
 *
 * The JSON bodies and the sampling are srv_mech.c's and mechanisms/'s; this
 * file adds the dataset, the ledger and the files.  Hosted tables are parsed
 * from their stored CSV on every query (no cache: a table is at most
 * DPG_MAX_CSV_BYTES, and a query is priced in epsilon, not in milliseconds).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "srv.h"
#include "srv_json.h"
#include "srv_mech.h"
#include "srv_mech_routes.h"
#include "srv_store_internal.h"

/* Keys of a release body that belong to the route, not to the mechanism. */
static const char *const route_keys[] = {"note", "ledger_delta", NULL};

/* ---- answers ---------------------------------------------------------------- */

/* ---- one release ------------------------------------------------------------ */

/* What a release request carries besides the mechanism's own fields. */
struct release {
	srv_dataset ds;
	json_t *inner;          /* the body without route_keys (new reference) */
	const char *note;       /* borrowed from req->body, or a default */
	double delta_share;     /* basic ledgers: delta share for non-(eps, delta) events */
	srv_spend sp;           /* actor and Idempotency-Key; the rest at the end */
	uint8_t hash[crypto_hash_sha256_BYTES];
	char default_note[96];
};

/*
 * The first half of every release: the Idempotency-Key replay (before any
 * other check, so a retry gets its answer even after the dataset changed),
 * the route's own body fields, and the dataset.  Returns true to go on;
 * false when *res already holds the answer.
 */
static bool release_begin(srv_request *req, srv_response *res, struct release *r)
{
	acct_error err;
	int rc;

	srv_spend_from_request(&r->sp, req, r->hash);
	if (srv_spend_replayed(req, res, &r->sp, srv_reply_raw_json))
		return false;
	acct_error_init(&err);
	r->note = r->default_note;
	r->delta_share = 0.0;
	rc = srv_json_string(req->body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, &r->note, &err);
	if (rc >= 0)
		rc = srv_json_real(req->body, "", "ledger_delta", SRV_NULLABLE | SRV_LO_OPEN | SRV_HI_OPEN,
				   0, 1, &r->delta_share, &err);
	/* Without an explicit share, a body calibrated at (epsilon, delta) is
	 * priced at that delta (the mechanism's own field, checked by it). */
	if (rc == 0 && json_is_number(json_object_get(req->body, "delta")))
		rc = srv_json_real(req->body, "", "delta", SRV_LO_OPEN | SRV_HI_OPEN, 0, 1,
				   &r->delta_share, &err) < 0 ? -1 : 0;
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return false;
	}
	r->inner = json_copy(req->body);
	if (!r->inner) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		return false;
	}
	for (const char *const *k = route_keys; *k; k++)
		json_object_del(r->inner, *k);
	rc = srv_store_dataset_get(req->db, req->params[0], &r->ds);
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset");
		goto fail;
	}
	if (r->ds.archived) {
		srv_reply_over_budget(res, &r->ds, NULL);
		goto fail;
	}
	return true;
fail:
	json_decref(r->inner);
	r->inner = NULL;
	return false;
}

mech_rng *srv_release_rng(srv_response *res)
{
	mech_rng *sys = mech_rng_new_system(), *rng = sys ? mech_rng_new_stream(sys) : NULL;
	bool weak = !rng || mech_rng_is_deterministic(sys) || mech_rng_is_deterministic(rng);

	mech_rng_free(sys);
	if (weak) {
		mech_rng_free(rng);
		srv_problem(res, 503, NULL, "no secure randomness is available; nothing was charged",
			    NULL, NULL);
		return NULL;
	}
	return rng;
}

struct release_body_arg {
	const json_t *answer;   /* {"output":…} (+ "query", "mechanism") */
	const acct_event *event;
	const acct_cost *cost;
};

/* The stored and sent answer: built inside the charge's transaction. */
static json_t *release_body(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	struct release_body_arg *a = arg;
	acct_filter f;
	double eps = NAN;
	json_t *o = json_deep_copy(a->answer);

	(void)rid;
	if (!o)
		return NULL;
	if (srv_dataset_filter(ds, &f, NULL) == 0)
		eps = acct_filter_epsilon(&f, a->cost);
	if (json_object_set_new(o, "event", srv_event_to_json(a->event)) < 0 ||
	    json_object_set_new(o, "charge_id", json_integer((json_int_t)charge_id)) < 0 ||
	    json_object_set_new(o, "cost", json_pack("{s:f}", "epsilon", eps)) < 0 ||
	    json_object_set_new(o, "budget", srv_dataset_budget_json(ds)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * The second half: validates and prices `ev` with the dataset's filter,
 * then admits and writes the charge with `answer` in one transaction, and
 * sends the answer only when that committed.  Takes ownership of nothing.
 */
static void release_finish(srv_request *req, srv_response *res, struct release *r,
			   const json_t *answer, const acct_event *ev)
{
	struct release_body_arg arg;
	acct_filter f;
	acct_cost cost;
	acct_error err;
	srv_spend *sp = &r->sp;
	char *body = NULL;
	int status = 0, rc;

	acct_error_init(&err);
	rc = acct_event_validate_at(ev, r->ds.neighbor, "/event", &err);
	if (rc >= 0)
		rc = srv_dataset_filter(&r->ds, &f, &err);
	if (rc >= 0)
		rc = acct_filter_price(&f, ev, r->delta_share, &cost, &err);
	if (rc < 0) {
		if (err.code == ACCT_EUNSUPPORTED && r->ds.accountant == ACCT_LEDGER_BASIC &&
		    !strcmp(err.where, "/delta"))
			snprintf(err.where, sizeof(err.where), "/ledger_delta");
		srv_problem_from_error(res, &err);
		return;
	}
	arg.answer = answer;
	arg.event = ev;
	arg.cost = &cost;
	sp->kind = SRV_SPEND_CHARGE;
	sp->dataset_id = r->ds.id;
	sp->event = ev;
	sp->cost = &cost;
	sp->note = r->note;
	sp->body_fn = release_body;
	sp->body_arg = &arg;
	rc = srv_store_spend(req->db, sp, &status, &body, &r->ds);
	if (rc == SRV_OK || rc == SRV_REPLAYED)
		srv_reply_raw_json(res, status, body);
	else if (rc == SRV_CONFLICT)
		srv_reply_over_budget(res, &r->ds, &cost);
	else
		srv_reply_store_error(res, rc, "no such dataset");
}

/* ---- POST /v1/datasets/{id}/mechanisms/{name} -------------------------------- */

static bool known_mechanism(const char *name)
{
	for (const char *const *n = srv_mech_names(); *n; n++)
		if (!strcmp(*n, name))
			return true;
	return false;
}

int srv_h_mech_release(srv_request *req, srv_response *res)
{
	const char *name = req->params[1];
	struct release r;
	mech_rng *rng = NULL;
	acct_event *ev = NULL;
	acct_error err;
	json_t *output = NULL, *answer = NULL;

	memset(&r, 0, sizeof(r));
	if (!known_mechanism(name)) {
		srv_problem(res, 404, NULL, "no such mechanism", NULL,
			    json_pack("{s:s}", "mechanism", name));
		return 0;
	}
	snprintf(r.default_note, sizeof(r.default_note), "mechanism %s", name);
	if (!release_begin(req, res, &r))
		return 0;
	rng = srv_release_rng(res);
	if (!rng)
		goto out;
	acct_error_init(&err);
	if (srv_mech_release(name, r.inner, rng, &output, &ev, &err) < 0) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	answer = json_pack("{s:s, s:O}", "mechanism", name, "output", output);
	if (!answer) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		goto out;
	}
	release_finish(req, res, &r, answer, ev);
out:
	json_decref(answer);
	json_decref(output);
	acct_event_free(ev);
	mech_rng_free(rng);
	json_decref(r.inner);
	return 0;
}

/* ---- hosted tables: schema text, files, loading --------------------------------- */

static const char *kind_name(mech_col_kind k)
{
	return k == MECH_COL_NUMERIC ? "numeric" : "categorical";
}

/* The columns of a parsed table as [{"name":…, "kind":…}, …]. */
static json_t *columns_json(const mech_table *t)
{
	json_t *arr = json_array();

	for (size_t j = 0; arr && j < mech_table_columns(t); j++)
		if (json_array_append_new(arr, json_pack("{s:s, s:s}", "name",
							 mech_table_column_name(t, j), "kind",
							 kind_name(mech_table_column_kind(t, j)))) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	return arr;
}

/* A declared schema: owns its names. */
struct decl {
	mech_column_decl *cols;
	char *text;             /* the names point into this copy */
	size_t n;
};

static void decl_clear(struct decl *d)
{
	free(d->cols);
	free(d->text);
	memset(d, 0, sizeof(*d));
}

static int kind_from_name(const char *s, mech_col_kind *ret)
{
	if (!strcmp(s, "numeric"))
		*ret = MECH_COL_NUMERIC;
	else if (!strcmp(s, "categorical"))
		*ret = MECH_COL_CATEGORICAL;
	else
		return -1;
	return 0;
}

/*
 * Parses "name:kind,name:kind" (kind numeric | categorical) from the
 * `columns` query parameter.  Names hold no ',' or ':'.  Errors name the
 * query parameter "columns".
 */
static int decl_from_query(const char *text, struct decl *ret, acct_error *err)
{
	struct decl d;
	char *save = NULL, *item;
	size_t cap = 1;

	memset(&d, 0, sizeof(d));
	if (!acct_utf8_valid(text, strlen(text), NULL))
		return acct_error_set(err, ACCT_EINVAL, "columns", "'columns' is not valid UTF-8");
	for (const char *p = text; *p; p++)
		cap += *p == ',';
	if (cap > DPG_MAX_CSV_COLUMNS)
		return acct_error_set(err, ACCT_EINVAL, "columns", "more than %d declared columns",
				      DPG_MAX_CSV_COLUMNS);
	d.text = strdup(text);
	d.cols = calloc(cap, sizeof(*d.cols));
	if (!d.text || !d.cols) {
		decl_clear(&d);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	for (item = strtok_r(d.text, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':');

		if (!colon || colon == item || strlen(item) - 1 > DPG_MAX_CSV_FIELD_BYTES ||
		    kind_from_name(colon + 1, &d.cols[d.n].kind) < 0) {
			decl_clear(&d);
			return acct_error_set(err, ACCT_EINVAL, "columns",
					      "'columns' must be name:numeric or name:categorical, "
					      "comma-separated");
		}
		*colon = '\0';
		for (size_t j = 0; j < d.n; j++)
			if (!strcmp(d.cols[j].name, item)) {
				acct_error_set(err, ACCT_EINVAL, "columns",
					       "column '%.64s' is declared twice", item);
				decl_clear(&d);
				return ACCT_EINVAL;
			}
		d.cols[d.n++].name = item;
	}
	if (d.n == 0) {
		decl_clear(&d);
		return acct_error_set(err, ACCT_EINVAL, "columns", "'columns' declares no column");
	}
	*ret = d;
	return 0;
}

/* The schema recorded at upload, as the declaration to parse the stored file
 * with (so a re-parse types every column as it was typed at upload). */
static int decl_from_json(const json_t *cols, struct decl *ret)
{
	struct decl d;
	size_t i, bytes = 0;
	json_t *c;
	char *p;

	memset(&d, 0, sizeof(d));
	if (!json_is_array(cols) || json_array_size(cols) == 0)
		return -1;
	json_array_foreach(cols, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));

		if (!name)
			return -1;
		bytes += strlen(name) + 1;
	}
	d.text = malloc(bytes);
	d.cols = calloc(json_array_size(cols), sizeof(*d.cols));
	if (!d.text || !d.cols) {
		decl_clear(&d);
		return -1;
	}
	p = d.text;
	json_array_foreach(cols, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *kind = json_string_value(json_object_get(c, "kind"));
		size_t n = strlen(name) + 1;

		if (!kind || kind_from_name(kind, &d.cols[i].kind) < 0) {
			decl_clear(&d);
			return -1;
		}
		memcpy(p, name, n);
		d.cols[i].name = p;
		p += n;
	}
	d.n = json_array_size(cols);
	*ret = d;
	return 0;
}

/* Writes all of buf to fd; 0 or -1. */
static int write_all(int fd, const char *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

/* fsyncs a directory so a rename in it is durable. */
static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Reads a whole file of at most DPG_MAX_CSV_BYTES; caller frees *ret. */
static int read_table_file(const char *path, char **ret, size_t *ret_len)
{
	struct stat st;
	char *buf = NULL;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > DPG_MAX_CSV_BYTES)
		goto fail;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto fail;
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		off += (size_t)n;
	}
	close(fd);
	buf[off] = '\0';
	*ret = buf;
	*ret_len = off;
	return 0;
fail:
	free(buf);
	close(fd);
	return -1;
}

/*
 * Checks a query's column against the schema recorded at upload, before the
 * file is read, so a query that names no such column (or one of the wrong
 * kind) costs no parse.  srv_mech_table_query checks everything again.
 */
static int precheck_column(const json_t *cols, const json_t *body, acct_error *err)
{
	const char *query = json_string_value(json_object_get(body, "query"));
	const char *column = json_string_value(json_object_get(body, "column"));
	const char *want = NULL;
	size_t i;
	json_t *c;

	if (!query || !column)
		return 0;
	if (!strcmp(query, "histogram"))
		want = "categorical";
	else if (!strcmp(query, "sum") || !strcmp(query, "mean") || !strcmp(query, "quantile"))
		want = "numeric";
	json_array_foreach(cols, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *kind = json_string_value(json_object_get(c, "kind"));

		if (name && !strcmp(name, column)) {
			if (want && kind && strcmp(kind, want) != 0)
				return acct_error_set(err, ACCT_EINVAL, "/column",
						      "column '%.64s' is %s; '%s' needs a %s column",
						      column, kind, query, want);
			return 0;
		}
	}
	return acct_error_set(err, ACCT_EINVAL, "/column", "the table has no column '%.64s'", column);
}

int srv_data_load_table(srv_db *db, const char *dataset_id, mech_table **ret, acct_error *err)
{
	sqlite3_stmt *s = NULL;
	char kind[16] = "", path[4200] = "";
	json_t *cols = NULL;
	struct decl d;
	char *text = NULL;
	size_t len = 0;
	int rc;

	memset(&d, 0, sizeof(d));
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT kind, coalesce(path, ''), columns FROM dataset_data"
			       " WHERE dataset_id = ?1",
			       -1, &s, NULL) != SQLITE_OK)
		return acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the data link");
	sqlite3_bind_text(s, 1, dataset_id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		snprintf(kind, sizeof(kind), "%s", (const char *)sqlite3_column_text(s, 0));
		snprintf(path, sizeof(path), "%s", (const char *)sqlite3_column_text(s, 1));
		cols = json_loads((const char *)sqlite3_column_text(s, 2), 0, NULL);
	}
	sqlite3_finalize(s);
	if (strcmp(kind, "table") != 0)
		rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/data", "no table is hosted for this dataset");
	else if (decl_from_json(cols, &d) < 0 || read_table_file(path, &text, &len) < 0 ||
		 mech_table_parse_csv(text, len, d.cols, d.n, ret, NULL) < 0)
		rc = acct_error_set(err, ACCT_EINTERNAL, "/data",
				    "the hosted table cannot be read back (upload it again)");
	else
		rc = 0;
	json_decref(cols);
	decl_clear(&d);
	free(text);
	return rc;
}

/*
 * Loads the dataset's hosted table for the query `body`.  Answers the
 * request and returns -1 when there is none (404), the query names a column
 * the table lacks (400), or the table cannot be read (500/503).
 */
static int load_table(srv_request *req, srv_response *res, const srv_dataset *ds,
		      const json_t *body, mech_table **ret)
{
	sqlite3_stmt *s = NULL;
	char kind[16] = "", path[4200] = "";
	json_t *cols = NULL;
	struct decl d;
	char *text = NULL;
	size_t len = 0;
	acct_error err;
	int rc = -1;

	memset(&d, 0, sizeof(d));
	if (sqlite3_prepare_v2(srv__db_handle(req->db),
			       "SELECT kind, coalesce(path, ''), columns FROM dataset_data"
			       " WHERE dataset_id = ?1",
			       -1, &s, NULL) != SQLITE_OK) {
		srv_problem(res, 503, NULL, "cannot read the data link; nothing was charged", NULL, NULL);
		return -1;
	}
	sqlite3_bind_text(s, 1, ds->id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		snprintf(kind, sizeof(kind), "%s", (const char *)sqlite3_column_text(s, 0));
		snprintf(path, sizeof(path), "%s", (const char *)sqlite3_column_text(s, 1));
		cols = json_loads((const char *)sqlite3_column_text(s, 2), 0, NULL);
	}
	sqlite3_finalize(s);
	if (strcmp(kind, "table") != 0) {
		srv_problem(res, 404, NULL,
			    "no table is hosted for this dataset (PUT /v1/datasets/{id}/data with text/csv)",
			    NULL, NULL);
		goto out;
	}
	acct_error_init(&err);
	if (precheck_column(cols, body, &err) < 0) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	if (decl_from_json(cols, &d) < 0 || read_table_file(path, &text, &len) < 0 ||
	    mech_table_parse_csv(text, len, d.cols, d.n, ret, &err) < 0) {
		srv_problem(res, 500, NULL,
			    "the hosted table cannot be read back; nothing was charged (upload it again)",
			    NULL, NULL);
		goto out;
	}
	rc = 0;
out:
	json_decref(cols);
	decl_clear(&d);
	free(text);
	return rc;
}

/* ---- POST /v1/datasets/{id}/queries ------------------------------------------- */

int srv_h_table_query(srv_request *req, srv_response *res)
{
	struct release r;
	mech_table *t = NULL;
	mech_rng *rng = NULL;
	acct_event *ev = NULL;
	acct_error err;
	json_t *answer = NULL;
	const char *query = json_string_value(json_object_get(req->body, "query"));

	memset(&r, 0, sizeof(r));
	snprintf(r.default_note, sizeof(r.default_note), "query %.32s",
		 query ? query : "?");
	if (!release_begin(req, res, &r))
		return 0;
	if (load_table(req, res, &r.ds, r.inner, &t) < 0)
		goto out;
	rng = srv_release_rng(res);
	if (!rng)
		goto out;
	acct_error_init(&err);
	if (srv_mech_table_query(t, r.ds.neighbor, r.inner, rng, &answer, &ev, &err) < 0) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	release_finish(req, res, &r, answer, ev);
out:
	json_decref(answer);
	acct_event_free(ev);
	mech_rng_free(rng);
	mech_table_free(t);
	json_decref(r.inner);
	return 0;
}

/* ---- PUT /v1/datasets/{id}/data, text/csv ---------------------------------------- */

/* Records the table in dataset_data and moves the temp file into place, in
 * one write transaction so concurrent uploads cannot interleave. */
static int record_table(srv_db *db, const srv_dataset *ds, const char *tmp, const char *path,
			const char *dir, int64_t rows, const char *columns, int64_t bytes,
			const char *actor)
{
	sqlite3_stmt *s = NULL;
	char now[32];
	int rc = SRV_DB_ERROR;

	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "INSERT INTO dataset_data (dataset_id, kind, builtin, path, rows, columns,"
			       " bytes, actor, created_at) VALUES (?1, 'table', NULL, ?2, ?3, ?4, ?5, ?6, ?7)"
			       " ON CONFLICT (dataset_id) DO UPDATE SET kind = 'table', builtin = NULL,"
			       " path = ?2, rows = ?3, columns = ?4, bytes = ?5, actor = ?6,"
			       " created_at = ?7",
			       -1, &s, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(s, 1, ds->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, rows);
	sqlite3_bind_text(s, 4, columns, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, bytes);
	sqlite3_bind_text(s, 6, actor, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, now, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_DONE)
		goto out;
	if (rename(tmp, path) < 0 || fsync_dir(dir) < 0)
		goto out;
	rc = srv__commit(db);
out:
	sqlite3_finalize(s);
	if (rc != SRV_OK)
		srv__rollback(db);
	return rc;
}

int srv_data_put_csv(srv_request *req, srv_response *res, const srv_dataset *ds)
{
	const char *declared = req->query(req->conn, "columns");
	char dir[4200], path[4400], tmp[4500], suffix[48];
	struct decl d;
	mech_table *t = NULL;
	acct_error err;
	json_t *cols = NULL;
	char *cols_text = NULL;
	int fd = -1;
	bool tmp_made = false;

	memset(&d, 0, sizeof(d));
	acct_error_init(&err);
	if (declared && decl_from_query(declared, &d, &err) < 0) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	if (mech_table_parse_csv(req->raw_body, req->raw_len, d.cols, d.n, &t, &err) < 0) {
		/* A declared column the header lacks is the query parameter's fault. */
		if (!strncmp(err.where, "/schema", 7))
			snprintf(err.where, sizeof(err.where), "columns");
		srv_problem_from_error(res, &err);
		goto out;
	}
	cols = columns_json(t);
	cols_text = cols ? srv_json_dump(cols) : NULL;
	if (!cols_text) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s/tables", req->ctx->data_dir);
	snprintf(path, sizeof(path), "%s/%s.csv", dir, ds->id);
	if (srv__random_id(".tmp.", suffix, sizeof(suffix)) != SRV_OK) {
		srv_reply_store_error(res, SRV_NO_RANDOM, NULL);
		goto out;
	}
	snprintf(tmp, sizeof(tmp), "%s%s", path, suffix);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		goto io_error;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		goto io_error;
	tmp_made = true;
	if (write_all(fd, req->raw_body, req->raw_len) < 0 || fsync(fd) < 0)
		goto io_error;
	close(fd);
	fd = -1;
	if (record_table(req->db, ds, tmp, path, dir, (int64_t)mech_table_rows(t), cols_text,
			 (int64_t)req->raw_len, req->who->key_id) != SRV_OK)
		goto io_error;
	tmp_made = false;
	srv_json_reply(res, 200, json_pack("{s:s, s:s, s:I, s:O, s:I}", "dataset", ds->id, "kind",
					   "table", "rows", (json_int_t)mech_table_rows(t), "columns",
					   cols, "bytes", (json_int_t)req->raw_len));
	goto out;
io_error:
	srv_problem(res, 503, NULL, "cannot store the table; nothing was changed", NULL, NULL);
out:
	if (fd >= 0)
		close(fd);
	if (tmp_made)
		unlink(tmp);
	free(cols_text);
	json_decref(cols);
	mech_table_free(t);
	decl_clear(&d);
	return 0;
}
