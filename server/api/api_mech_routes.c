/*
 * api_mech_routes.c: budget-charged mechanism releases, queries on hosted
 * tables, and CSV uploads (see api_mech_routes.h for the rule every release
 * follows).
 *
 * The JSON bodies and the sampling are api_mech.c's and mechanisms/'s; this
 * file adds the dataset, the ledger and the files.  A hosted table is
 * parsed from its stored CSV and kept in srv_table_cache, keyed by what
 * was stored, so a replaced table is never answered from the old parse.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "api_internal.h"
#include "json.h"
#include "api_mech.h"
#include "api_mech_routes.h"
#include "store.h"

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
	if (!srv__dataset_or_reply(req, res, &r->ds))
		goto fail;
	if (r->ds.archived || r->ds.is_public) {
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

/* release_body's answer as the store keeps it (srv_spend_text_fn). */
static char *release_text(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	return srv_json_text(release_body(arg, charge_id, rid, ds));
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
	int rc;

	acct_error_init(&err);
	rc = acct_event_validate_at(ev, r->ds.neighbor, "/event", &err);
	if (rc >= 0)
		rc = srv_dataset_filter(&r->ds, &f, &err);
	if (rc >= 0)
		rc = acct_filter_price(&f, ev, r->delta_share, &cost, &err);
	if (rc < 0) {
		if (r->ds.accountant == ACCT_LEDGER_BASIC)
			srv__name_ledger_delta(&err);
		srv_problem_from_error(res, &err);
		return;
	}
	arg.answer = answer;
	arg.event = ev;
	arg.cost = &cost;
	sp->kind = SRV_SPEND_CHARGE;
	sp->dataset_id = r->ds.id;
	sp->event_text = srv_event_text(ev);
	sp->cost = &cost;
	sp->note = r->note;
	sp->text_fn = release_text;
	sp->body_arg = &arg;
	if (sp->event_text)
		srv_spend_and_reply(req, res, sp, &r->ds,
				    &(srv_spend_replies){.cost = &cost, .what = "no such dataset"});
	else
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
	free((char *)sp->event_text);
	sp->event_text = NULL;
}

/* What a release draws with the CSPRNG stream `rng`: its answer and the
 * event that prices it (both the caller's to free, whatever the return),
 * or a negative code with err filled. */
typedef int (*release_draw_fn)(const void *arg, const struct release *r, mech_rng *rng,
			       json_t **ret_answer, acct_event **ret_event, acct_error *err);

/*
 * Between release_begin and the end of a release: draws with a fresh
 * stream (503 when there is no secure randomness), then charges and sends
 * the answer through release_finish.  Answers the request in every case;
 * r stays the caller's.
 */
static void release_run(srv_request *req, srv_response *res, struct release *r,
			release_draw_fn draw, const void *arg)
{
	mech_rng *rng = srv_release_rng(res);
	json_t *answer = NULL;
	acct_event *ev = NULL;
	acct_error err;

	if (!rng)
		return;
	acct_error_init(&err);
	if (draw(arg, r, rng, &answer, &ev, &err) < 0)
		srv_problem_from_error(res, &err);
	else
		release_finish(req, res, r, answer, ev);
	json_decref(answer);
	acct_event_free(ev);
	mech_rng_free(rng);
}

/* ---- POST /v1/datasets/{id}/mechanisms/{name} -------------------------------- */

static bool known_mechanism(const char *name)
{
	for (const char *const *n = srv_mech_names(); *n; n++)
		if (!strcmp(*n, name))
			return true;
	return false;
}

/* The named mechanism's draw: {"mechanism": name, "output": ...}. */
static int mechanism_draw(const void *arg, const struct release *r, mech_rng *rng,
			  json_t **ret_answer, acct_event **ret_event, acct_error *err)
{
	const char *name = arg;
	json_t *output = NULL;
	int rc = srv_mech_release(name, r->inner, rng, &output, ret_event, err);

	if (rc < 0)
		return rc;
	*ret_answer = json_pack("{s:s, s:O}", "mechanism", name, "output", output);
	json_decref(output);
	return *ret_answer ? 0 : acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
}

int srv_h_mech_release(srv_request *req, srv_response *res)
{
	const char *name = req->params[1];
	struct release r;

	memset(&r, 0, sizeof(r));
	if (!known_mechanism(name)) {
		srv_problem(res, 404, NULL, "no such mechanism", NULL,
			    json_pack("{s:s}", "mechanism", name));
		return 0;
	}
	snprintf(r.default_note, sizeof(r.default_note), "mechanism %s", name);
	if (!release_begin(req, res, &r))
		return 0;
	release_run(req, res, &r, mechanism_draw, name);
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

int srv_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/*
 * Checks a query's column against the schema recorded at upload, before the
 * file is read, so a query that names no such column (or one of the wrong
 * kind) costs no parse.  srv_mech_table_query checks everything again.
 * Kinds the upload inferred from the rows are private (GET .../data shows
 * them to admins only): a refusal of a kind would tell it, uncharged, and
 * a success too (the ledger shows the charge).  A query that needs a kind
 * therefore needs it declared, whatever the kind is.
 */
static int precheck_column(const json_t *cols, bool declared, const json_t *body,
			   acct_error *err)
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
			if (want && !declared)
				return acct_error_set(err, ACCT_EUNSUPPORTED, "/column",
						      "a %s query needs its column's kind declared "
						      "at upload (PUT .../data?columns=%.64s:%s,...): "
						      "kinds inferred from the rows are private",
						      query, column, want);
			if (want && kind && strcmp(kind, want) != 0)
				return acct_error_set(err, ACCT_EINVAL, "/column",
						      "column '%.64s' is %s; '%s' needs a %s column",
						      column, kind, query, want);
			return 0;
		}
	}
	return acct_error_set(err, ACCT_EINVAL, "/column", "the table has no column '%.64s'", column);
}

/*
 * Reads a whole file of at most DPG_MAX_CSV_BYTES; caller frees *ret;
 * *ret_st is the state of the file read (fstat of the descriptor read).
 * Returns 0, -ENOENT when there is no such file (a concurrent upload may
 * have replaced and removed it), or -EIO for any other failure.  A file
 * that is open is read whole even if it is unlinked meanwhile.
 */
static int read_table_file(const char *path, char **ret, size_t *ret_len, struct stat *ret_st)
{
	struct stat st;
	char *buf = NULL;
	size_t off = 0;
	int rc = -EIO;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > DPG_MAX_CSV_BYTES)
		goto out;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto out;
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		off += (size_t)n;
	}
	buf[off] = '\0';
	*ret = buf;
	*ret_len = off;
	*ret_st = st;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

/*
 * Table files.  Every upload writes <data-dir>/tables/<id>.<24 hex>.csv, a
 * name no other upload uses, and the dataset_data row names it; the file a
 * row named before is removed only after the row names the new one.  So a
 * reader that holds a path from the row finds that table or no file at all
 * (and then reads the row again), never another table's bytes under the
 * old schema.  Databases from before this layout name tables/<id>.csv,
 * which keeps working until the next upload replaces it.
 *
 * On a shared database (PostgreSQL, srv_db_shared) no server's data
 * directory is another's: the bytes go into the database with the link
 * (table_blobs, in the same transaction), under a name of the same form
 * prefixed with DB_TABLE_PREFIX, and any server reads them from there.
 * The name is new for every upload and its bytes are never rewritten, so
 * it is the table's version: the parse cache, keyed by it, never serves a
 * replaced table, on this server or another.
 */
#define DB_TABLE_PREFIX "db:"

/* Whether a link's path names a blob in the database, not a file. */
static bool table_in_db(const char *path)
{
	return !strncmp(path, DB_TABLE_PREFIX, sizeof(DB_TABLE_PREFIX) - 1);
}

/* The cache key's state for a link's path: stat(2) of a file; for a blob,
 * whose name alone fixes its bytes, all zero.  0, or -1 (no such file). */
static int table_state(const char *path, struct stat *ret)
{
	if (!table_in_db(path))
		return stat(path, ret);
	memset(ret, 0, sizeof(*ret));
	return 0;
}

/*
 * Where this server reads the table a link's path names: a blob's name as
 * it is; a file by its name under this server's own <data_dir>/tables,
 * whatever directory the link spelled (links made before hold the data
 * directory's path as it was then, and the directory may have been copied
 * or restored elsewhere since: the start-up sweep matches files by name
 * too).  A new string, or NULL when out of memory or when the name cannot
 * be a file there.
 */
static char *table_local_path(const char *data_dir, const char *path)
{
	char local[4400];

	if (table_in_db(path))
		return strdup(path);
	if (srv_path_in_dir(local, sizeof(local), data_dir, "tables", path) < 0)
		return NULL;
	return strdup(local);
}

/* Reads the table at `path` (a link's path made local by table_local_path),
 * as read_table_file (0, -ENOENT when it is gone, -EIO), from its file or
 * from the database. */
static int read_linked_table(srv_db *db, const char *dataset_id, const char *path, char **ret,
			     size_t *ret_len, struct stat *ret_st)
{
	int rc;

	if (!table_in_db(path))
		return read_table_file(path, ret, ret_len, ret_st);
	rc = srv_store_table_blob_get(db, dataset_id, path, ret, ret_len);
	if (rc != SRV_OK)
		return rc == SRV_NOT_FOUND ? -ENOENT : -EIO;
	return table_state(path, ret_st);
}

int srv__table_read_linked(srv_db *db, const char *data_dir, const char *dataset_id,
			   const char *path, char **ret, size_t *ret_len)
{
	struct stat st;
	char *local = table_local_path(data_dir, path);
	int rc = local ? read_linked_table(db, dataset_id, local, ret, ret_len, &st) : -EIO;

	free(local);
	return rc;
}

/* How often a reader reads the link again after its file vanished. */
#define TABLE_READ_TRIES 4

/* An unreferenced table file younger than this is left by the start-up
 * sweep: it may be an upload still in flight in another process that
 * shares the data directory. */
#define TABLE_ORPHAN_MIN_AGE_S 600

/* Whether s[0..n) is n lowercase hex digits. */
static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/*
 * Whether `name` is a file name an upload makes under a random suffix:
 * "<dataset>.<hex>.csv" (a table), or "<dataset>.csv.tmp.<hex>" (the temp
 * file of the layout before it).  With dataset_id != NULL, the dataset
 * part must be that id; "<dataset_id>.csv", the older layout's table, then
 * counts too.
 */
static bool table_file_name(const char *name, const char *dataset_id)
{
	static const char tmp_mark[] = ".csv.tmp.", csv[] = ".csv";
	size_t n = strlen(name), h = SRV_RANDOM_ID_HEX, id_len;

	if (n > h + sizeof(tmp_mark) - 1 && is_hex(name + n - h, h) &&
	    !memcmp(name + n - h - (sizeof(tmp_mark) - 1), tmp_mark, sizeof(tmp_mark) - 1))
		id_len = n - h - (sizeof(tmp_mark) - 1);
	else if (n > h + sizeof(csv) && !strcmp(name + n - (sizeof(csv) - 1), csv) &&
		 is_hex(name + n - (sizeof(csv) - 1) - h, h) && name[n - (sizeof(csv) - 1) - h - 1] == '.')
		id_len = n - (sizeof(csv) - 1) - h - 1;
	else if (dataset_id && n == strlen(dataset_id) + sizeof(csv) - 1 &&
		 !strcmp(name + n - (sizeof(csv) - 1), csv))
		id_len = n - (sizeof(csv) - 1);
	else
		return false;
	if (id_len == 0 || id_len > DPG_MAX_ID_BYTES)
		return false;
	return !dataset_id || (strlen(dataset_id) == id_len && !memcmp(name, dataset_id, id_len));
}

/* Removes a table file that a committed upload no longer names (`path`, as
 * the link held it), if it is one dpgate wrote for this dataset (anything
 * else is left alone), and drops its parse from `cache`.  The file is
 * looked for in this server's data directory only (table_local_path). */
static void drop_replaced_table_file(srv_table_cache *cache, const char *data_dir,
				     const char *path, const char *dataset_id, const char *new_path)
{
	const char *slash;
	char *local;

	if (!path || (new_path && !strcmp(path, new_path)))
		return;
	local = table_local_path(data_dir, path);
	if (!local || (new_path && !strcmp(local, new_path)))
		goto out;
	srv_table_cache_forget(cache, local);
	/* A blob went with its link's transaction; there is no file. */
	if (table_in_db(local))
		goto out;
	slash = strrchr(local, '/');
	if (table_file_name(slash ? slash + 1 : local, dataset_id))
		unlink(local);
out:
	free(local);
}

/* A dataset's hosted-table link: the file and its recorded schema (parsed
 * and as stored). */
struct table_link {
	char *path;
	json_t *columns;
	char *columns_text;
	bool declared;
};

static void table_link_clear(struct table_link *l)
{
	free(l->path);
	json_decref(l->columns);
	free(l->columns_text);
	memset(l, 0, sizeof(*l));
}

/* How reading the hosted table can end. */
enum table_read {
	TABLE_READ_OK = 0,
	TABLE_READ_NONE = -1,      /* no table is hosted */
	TABLE_READ_BAD_QUERY = -2, /* the query names a column the schema lacks (err) */
	TABLE_READ_REPLACED = -3,  /* replaced under every try */
	TABLE_READ_DB = -4,        /* the link cannot be read */
	TABLE_READ_BROKEN = -5,    /* the file it names is missing or does not parse */
};

/* Reads path and schema together (srv_store_table_link_get), so they
 * describe the same upload; the path is made local (table_local_path). */
static int table_link_get(srv_db *db, const char *data_dir, const char *dataset_id,
			  struct table_link *ret)
{
	struct table_link l = {NULL, NULL, NULL, false};
	char *stored = NULL;
	int rc;

	rc = srv_store_table_link_get(db, dataset_id, &stored, &l.columns_text, &l.declared);
	if (rc != SRV_OK)
		return rc == SRV_NOT_FOUND ? TABLE_READ_NONE : TABLE_READ_DB;
	l.path = stored ? table_local_path(data_dir, stored) : NULL;
	free(stored);
	l.columns = l.columns_text ? json_loads(l.columns_text, 0, NULL) : NULL;
	if (!l.path || !l.columns) {
		table_link_clear(&l);
		return TABLE_READ_BROKEN;
	}
	*ret = l;
	return TABLE_READ_OK;
}

/* What table_get_or_read found: a kept (or shared) parse, or the bytes to
 * parse and the claim to end with their parse. */
struct table_fetch {
	srv_table_ref *ref;
	srv_table_claim *claim;
	char *text;
	size_t len;
	struct stat st;
};

/*
 * The parse of the table `link` names, from `cache` (srv_table_cache_get:
 * kept, or another reader's that this one waited for), in ret->ref; or,
 * when this reader is to parse it, its bytes read into ret->text and
 * ret->len, in state ret->st, with the key's claim in ret->claim (the
 * caller ends it).  Every read is made under a claim, so it counts against
 * the parses allowed at once.  The cache may make the caller wait (for
 * another reader's parse, or for a parse slot); it holds no transaction
 * then, the link having been read in a statement of its own.  0, or as
 * read_table_file (-ENOENT: the file is gone; -EIO, also when out of
 * memory), no claim held.
 */
static int table_get_or_read(srv_table_cache *cache, srv_db *db, const char *dataset_id,
			     const struct table_link *link, struct table_fetch *ret)
{
	struct table_fetch f = {NULL, NULL, NULL, 0, {0}};
	struct stat st;
	int rc;

	/* No file to claim: an upload never makes a linked path again. */
	if (table_state(link->path, &st) < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	f.ref = srv_table_cache_get(cache, link->path, &st, link->columns_text, &f.claim);
	if (!f.ref && !f.claim)
		return -EIO;
	if (f.claim) {
		rc = read_linked_table(db, dataset_id, link->path, &f.text, &f.len, &f.st);
		if (rc < 0) {
			srv_table_cache_claim_drop(cache, f.claim);
			return rc;
		}
	}
	*ret = f;
	return 0;
}

/*
 * Loads the dataset's hosted table, parsed with the schema recorded with
 * it: from `cache` when it holds the parse of the file the link names in
 * its present state (or another reader is parsing it: then that parse),
 * else read (from the file, or the database's blob) and parsed, and added
 * to `cache`.  With
 * query_body != NULL, first checks the query's column against that schema
 * (TABLE_READ_BAD_QUERY, err set).  When the file the link names is gone,
 * reads the link again: a new path means an upload replaced the table
 * meanwhile (retried up to TABLE_READ_TRIES times, then
 * TABLE_READ_REPLACED); the same path means the file is lost
 * (TABLE_READ_BROKEN).  Returns TABLE_READ_OK and a reference in *ret
 * (srv_table_cache_release with the same cache), or an enum table_read
 * code.
 */
static int hosted_table_read(srv_table_cache *cache, srv_db *db, const char *data_dir,
			     const char *dataset_id, const json_t *query_body, srv_table_ref **ret,
			     acct_error *err)
{
	struct table_link link = {NULL, NULL, NULL, false};
	struct table_fetch f = {NULL, NULL, NULL, 0, {0}};
	struct decl d;
	mech_table *t = NULL;
	char *seen = NULL;
	int rc, tries = 0;

	memset(&d, 0, sizeof(d));
	for (;;) {
		rc = table_link_get(db, data_dir, dataset_id, &link);
		if (rc < 0)
			goto out;
		if (query_body && precheck_column(link.columns, link.declared, query_body, err) < 0) {
			rc = TABLE_READ_BAD_QUERY;
			goto out;
		}
		rc = table_get_or_read(cache, db, dataset_id, &link, &f);
		if (rc == 0)
			break;
		if (rc != -ENOENT || (seen && !strcmp(seen, link.path))) {
			rc = TABLE_READ_BROKEN;
			goto out;
		}
		if (++tries == TABLE_READ_TRIES) {
			rc = TABLE_READ_REPLACED;
			goto out;
		}
		free(seen);
		seen = link.path;
		link.path = NULL;
		table_link_clear(&link);
	}
	rc = TABLE_READ_OK;
	if (f.ref)
		goto out;
	if (decl_from_json(link.columns, &d) < 0 ||
	    mech_table_parse_csv(f.text, f.len, d.cols, d.n, &t, NULL) < 0) {
		rc = TABLE_READ_BROKEN;
		goto out;
	}
	/* Freed before the claim ends, so that the parse that takes its slot
	 * next does not find them still held. */
	free(f.text);
	f.text = NULL;
	f.ref = srv_table_cache_claim_done(cache, f.claim, &f.st, t);
	f.claim = NULL;
out:
	/* A failed read or parse ends its claim: the readers waiting for it
	 * look again, and the first of them reads the file itself. */
	srv_table_cache_claim_drop(cache, f.claim);
	if (rc == TABLE_READ_OK)
		*ret = f.ref;
	table_link_clear(&link);
	decl_clear(&d);
	free(f.text);
	free(seen);
	return rc;
}

int srv_data_load_table(srv_table_cache *cache, srv_db *db, const char *data_dir,
			const char *dataset_id, srv_table_ref **ret, acct_error *err)
{
	switch (hosted_table_read(cache, db, data_dir, dataset_id, NULL, ret, err)) {
	case TABLE_READ_OK:
		return 0;
	case TABLE_READ_NONE:
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/data",
				      "no table is hosted for this dataset");
	case TABLE_READ_REPLACED:
		return acct_error_set(err, ACCT_EINTERNAL, "/data",
				      "the hosted table was being replaced while it was read");
	case TABLE_READ_DB:
		return acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the data link");
	default:
		return acct_error_set(err, ACCT_EINTERNAL, "/data",
				      "the hosted table cannot be read back (upload it again)");
	}
}

/*
 * Loads the dataset's hosted table for the query `body`.  Answers the
 * request and returns -1 when there is none (404), the query names a column
 * the table lacks (400), the table was replaced under every read or the
 * link cannot be read (503), or the file is lost (500); nothing is charged.
 */
static int load_table(srv_request *req, srv_response *res, const srv_dataset *ds,
		      const json_t *body, srv_table_ref **ret)
{
	acct_error err;

	acct_error_init(&err);
	switch (hosted_table_read(req->ctx->tables, req->db, req->ctx->data_dir, ds->id, body, ret,
				  &err)) {
	case TABLE_READ_OK:
		return 0;
	case TABLE_READ_NONE:
		srv_problem(res, 404, NULL,
			    "no table is hosted for this dataset (PUT /v1/datasets/{id}/data with text/csv)",
			    NULL, NULL);
		break;
	case TABLE_READ_BAD_QUERY:
		srv_problem_from_error(res, &err);
		break;
	case TABLE_READ_REPLACED:
		srv_problem(res, 503, NULL,
			    "the hosted table is being replaced; try again; nothing was charged",
			    NULL, NULL);
		break;
	case TABLE_READ_DB:
		srv_problem(res, 503, NULL, "cannot read the data link; nothing was charged", NULL, NULL);
		break;
	default:
		srv_problem(res, 500, NULL,
			    "the hosted table cannot be read back; nothing was charged (upload it again)",
			    NULL, NULL);
		break;
	}
	return -1;
}

/* ---- POST /v1/datasets/{id}/queries ------------------------------------------- */

/* The query's draw on the hosted table `arg` (a srv_table_ref). */
static int table_query_draw(const void *arg, const struct release *r, mech_rng *rng,
			    json_t **ret_answer, acct_event **ret_event, acct_error *err)
{
	const srv_table_ref *t = arg;

	return srv_mech_table_query(srv_table_ref_table(t), r->ds.neighbor, r->inner, rng,
				    ret_answer, ret_event, err);
}

int srv_h_table_query(srv_request *req, srv_response *res)
{
	struct release r;
	srv_table_ref *t = NULL;
	const char *query = json_string_value(json_object_get(req->body, "query"));

	memset(&r, 0, sizeof(r));
	snprintf(r.default_note, sizeof(r.default_note), "query %.32s",
		 query ? query : "?");
	if (!release_begin(req, res, &r))
		return 0;
	if (load_table(req, res, &r.ds, r.inner, &t) == 0)
		release_run(req, res, &r, table_query_draw, t);
	srv_table_cache_release(req->ctx->tables, t);
	json_decref(r.inner);
	return 0;
}

/* ---- PUT /v1/datasets/{id}/data, text/csv ---------------------------------------- */

void srv__table_file_drop(srv_table_cache *cache, const char *data_dir, const char *path,
			  const char *dataset_id)
{
	drop_replaced_table_file(cache, data_dir, path, dataset_id, NULL);
}

/*
 * Reads the `row_count` query parameter: "public" (the row count is not
 * private, e.g. fixed by the study design, and every reader may see it) or
 * "private", the default.  Anything else is an error naming "row_count".
 */
static int row_count_from_query(const char *text, bool *ret_public, acct_error *err)
{
	if (!text || !strcmp(text, "private"))
		*ret_public = false;
	else if (!strcmp(text, "public"))
		*ret_public = true;
	else
		return acct_error_set(err, ACCT_EINVAL, "row_count",
				      "'row_count' must be \"public\" or \"private\"");
	return 0;
}

/* What a CSV upload's steps share: the declared columns (NULL when
 * inferred), the parsed table and its column list, owned by the caller. */
struct csv_upload {
	const char *declared;
	bool rows_public;
	struct decl d;
	mech_table *t;
	json_t *cols;
	char *cols_text;
};

/* Reads the query parameters and parses the body into up; on failure
 * writes the problem into res and returns -1. */
static int csv_upload_parse(srv_request *req, srv_response *res, struct csv_upload *up)
{
	acct_error err;
	int rc;

	acct_error_init(&err);
	if (row_count_from_query(req->query(req->conn, "row_count"), &up->rows_public, &err) < 0 ||
	    (up->declared && decl_from_query(up->declared, &up->d, &err) < 0)) {
		srv_problem_from_error(res, &err);
		return -1;
	}
	/* Within the cache's bound on parses at once, as a query's read is:
	 * the body is buffered already, but its parse more than doubles it. */
	srv_table_cache_slot_take(req->ctx->tables);
	rc = mech_table_parse_csv(req->raw_body, req->raw_len, up->d.cols, up->d.n, &up->t, &err);
	srv_table_cache_slot_give(req->ctx->tables);
	if (rc < 0) {
		/* A declared column the header lacks is the query parameter's fault. */
		if (!strncmp(err.where, "/schema", 7))
			snprintf(err.where, sizeof(err.where), "columns");
		srv_problem_from_error(res, &err);
		return -1;
	}
	up->cols = columns_json(up->t);
	up->cols_text = up->cols ? srv_json_dump(up->cols) : NULL;
	if (!up->cols_text) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		return -1;
	}
	return 0;
}

/* Creates path (a new name) in dir, writes the body into it and makes the
 * file and its directory entry durable; *st receives the file's state.
 * *ret_made turns true once the file exists, for the caller to remove on
 * failure.  Returns 0, or -1 on an I/O error with no descriptor left open. */
static int write_table_file(const char *dir, const char *path, const char *body, size_t len,
			    struct stat *st, bool *ret_made)
{
	int fd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	*ret_made = true;
	if (write_all(fd, body, len) < 0 || fsync(fd) < 0 || fstat(fd, st) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return srv_fsync_dir(dir) < 0 ? -1 : 0;
}

/*
 * Puts an upload's bytes where its link will find them, under the new
 * name `name` ("<dataset>.<hex>.csv"); path (size bytes) gets what the
 * link will record and st the cache key's state.  On a shared database
 * that is a blob: *ret_blob is set for the link's transaction to write.
 * Otherwise a durable file under the data directory (write_table_file;
 * *ret_made as there).  0, or -1 on an I/O error.
 */
static int table_bytes_place(srv_request *req, const char *name, char *path, size_t size,
			     struct stat *st, struct srv_table_blob *ret_blob, bool *ret_made)
{
	char dir[4200];

	if (srv_db_shared(req->db)) {
		snprintf(path, size, "%stables/%s", DB_TABLE_PREFIX, name);
		ret_blob->bytes = req->raw_body;
		ret_blob->len = req->raw_len;
		return table_state(path, st);
	}
	snprintf(dir, sizeof(dir), "%s/tables", req->ctx->data_dir);
	snprintf(path, size, "%s/%s", dir, name);
	return write_table_file(dir, path, req->raw_body, req->raw_len, st, ret_made);
}

void srv__reply_data_in_use(srv_response *res)
{
	srv_problem(res, 409, NULL,
		    "a job of this dataset is running and may not have read its data yet: the "
		    "data cannot change under it; wait for the job to end or cancel it, then "
		    "upload again (nothing was changed)",
		    NULL, NULL);
}

int srv_data_put_csv(srv_request *req, srv_response *res, const srv_dataset *ds)
{
	struct csv_upload up;
	struct srv_table_blob blob = {NULL, 0};
	char name[DPG_MAX_ID_BYTES + 64], path[4400], suffix[48];
	char *old = NULL;
	struct stat st;
	json_int_t rows;
	int rc;
	bool file_made = false;

	memset(&up, 0, sizeof(up));
	up.declared = req->query(req->conn, "columns");
	if (csv_upload_parse(req, res, &up) < 0)
		goto out;
	/* A public table's rows are readable: its size and shape are too. */
	if (ds->is_public)
		up.rows_public = true;
	/* A name of its own (see "Table files" above): written and made
	 * durable before any row names it, so a crash before the commit leaves
	 * an unreferenced file (removed at the next start) and the old link
	 * intact, and one after it the new link with its own file. */
	if (srv_random_id(".", suffix, sizeof(suffix)) != SRV_OK) {
		srv_reply_store_error(res, SRV_NO_RANDOM, NULL);
		goto out;
	}
	snprintf(name, sizeof(name), "%s%s.csv", ds->id, suffix);
	if (table_bytes_place(req, name, path, sizeof(path), &st, &blob, &file_made) < 0)
		goto io_error;
	rows = (json_int_t)mech_table_rows(up.t);
	/*
	 * Keeps this parse for the queries that follow, under the key a read of
	 * the new link will look up: the path, the file's state as written
	 * (st), and the schema text about to be recorded.  It is the table that
	 * read would parse: the file holds exactly these bytes, and the schema
	 * names every header column with the kind this parse gave it (declared,
	 * or inferred as the reader then declares it).  Added before the link
	 * exists, so an upload that replaces this one right after its commit
	 * finds it to forget; the cache takes t, also when it cannot keep it.
	 */
	srv_table_cache_release(req->ctx->tables,
				srv_table_cache_add(req->ctx->tables, path, &st, up.cols_text, up.t));
	up.t = NULL;
	rc = srv_store_table_record(req->db, ds->id, path, (int64_t)rows, up.cols_text, (int64_t)req->raw_len,
			  up.rows_public, up.declared != NULL || ds->is_public, req->who->key_id,
			  blob.bytes ? &blob : NULL, &old);
	if (rc != SRV_OK) {
		srv_table_cache_forget(req->ctx->tables, path);
		/* A failed COMMIT's link may still be found at the next start
		 * (srv__commit): the file stays for it, and that start's sweep
		 * removes it if the link is not there. */
		if (rc == SRV_COMMIT_FAILED)
			file_made = false;
		if (rc != SRV_CONFLICT)
			goto io_error;
		srv__reply_data_in_use(res);
		goto out;
	}
	file_made = false;
	/* Readers that still hold the old path find no file and read the link
	 * again; readers that opened it read it whole. */
	drop_replaced_table_file(req->ctx->tables, req->ctx->data_dir, old, ds->id, path);
	srv_json_reply(res, 200, json_pack("{s:s, s:s, s:I, s:O, s:I, s:s, s:s}", "dataset", ds->id,
					   "kind", "table", "rows", rows, "columns", up.cols, "bytes",
					   (json_int_t)req->raw_len, "row_count",
					   up.rows_public ? "public" : "private", "schema",
					   up.declared || ds->is_public ? "declared" : "inferred"));
	goto out;
io_error:
	srv_problem(res, 503, NULL, "cannot store the table; nothing was changed", NULL, NULL);
out:
	if (file_made)
		unlink(path);
	free(old);
	free(up.cols_text);
	json_decref(up.cols);
	mech_table_free(up.t);
	decl_clear(&up.d);
	return 0;
}

int srv_data_sweep_tables(srv_db *db, const char *data_dir, unsigned *ret_removed)
{
	char dir[4200];
	DIR *dp = NULL;
	struct dirent *e;
	unsigned removed = 0;
	time_t now = time(NULL);
	int rc = SRV_DB_ERROR;

	snprintf(dir, sizeof(dir), "%s/tables", data_dir);
	dp = opendir(dir);
	if (!dp) {
		rc = errno == ENOENT ? SRV_OK : SRV_DB_ERROR;
		goto out;
	}
	while ((e = readdir(dp)) != NULL) {
		struct stat st;
		bool linked;

		if (!table_file_name(e->d_name, NULL))
			continue;
		if (fstatat(dirfd(dp), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_mtime > now - TABLE_ORPHAN_MIN_AGE_S)
			continue;
		if (srv_store_table_file_linked(db, e->d_name, &linked) != SRV_OK)
			goto out;
		if (!linked && unlinkat(dirfd(dp), e->d_name, 0) == 0)
			removed++;
	}
	if (ret_removed)
		*ret_removed = removed;
	rc = SRV_OK;
out:
	if (dp)
		closedir(dp);
	return rc;
}
