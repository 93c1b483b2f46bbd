/*
 * srv_jobs.c: training jobs and dataset data links (see srv_jobs.h for the
 * budget rule).
 *
 * A job's life: the handler parses its parameters, builds its event from
 * them and the linked table's row count (no data read), prices it with the
 * dataset's filter and reserves it; the job row is written in the same
 * transaction as the reservation.  After COMMIT the id is queued in memory.
 * A worker marks it running, keys a ChaCha20 stream from getrandom, loads
 * the data, runs the trainer with the stream, writes the model file, then
 * commits the reservation and records the outcome in one transaction.  When
 * getrandom fails the job fails before it loads anything, and the
 * reservation is released.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "mech.h"
#include "srv_jobs.h"
#include "srv_mech_routes.h"
#include "srv_json.h"
#include "srv_store_internal.h"
#include "trn.h"

#define JOB_ID_PREFIX "job_"
#define PROGRESS_SAVE_INTERVAL_S 2.0

/* ---- DP-SGD parameters from JSON ------------------------------------------- */

static int parse_enum(const json_t *params, const char *key, int (*from)(const char *, void *),
		      void *ret, const char *allowed, acct_error *err)
{
	const char *s = NULL;
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int rc = srv_json_string(params, "/params", key, 0, 32, &s, err);

	if (rc <= 0)
		return rc;
	if (from(s, ret) < 0) {
		srv_json_pointer(ptr, sizeof(ptr), "/params", key);
		return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' must be one of %s", key, allowed);
	}
	return 1;
}

static int model_from(const char *s, void *r) { return trn_model_kind_from_name(s, r); }
static int act_from(const char *s, void *r) { return trn_activation_from_name(s, r); }
static int clip_from(const char *s, void *r) { return trn_clipping_from_name(s, r); }

static int parse_u32(const json_t *params, const char *key, int64_t lo, int64_t hi, uint32_t *ret,
		     acct_error *err)
{
	int64_t v;
	int rc = srv_json_int(params, "/params", key, 0, lo, hi, &v, err);

	if (rc == 1)
		*ret = (uint32_t)v;
	return rc;
}

static int parse_real(const json_t *params, const char *key, unsigned flags, double lo, double hi,
		      double *ret, acct_error *err)
{
	return srv_json_real(params, "/params", key, flags, lo, hi, ret, err);
}

/*
 * Fills DP-SGD parameters from the job's "params" object over the defaults
 * (trn_dpsgd_params_default), then checks them with
 * trn_dpsgd_params_validate.  Unknown keys are refused.
 */
static int parse_dpsgd_params(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	static const char *const keys[] = {
		"model", "hidden", "activation", "epochs", "lot_size", "noise_multiplier",
		"clip_norm", "clipping", "learning_rate", "learning_rate_final",
		"learning_rate_decay_epochs", "momentum", "pca_components",
		"pca_noise_multiplier", "max_train_examples", "label", "classes", NULL,
	};
	json_t *hidden;
	int rc;

	trn_dpsgd_params_default(p);
	if (!params)
		params = json_object();
	else
		json_incref((json_t *)params);
	if (!json_is_object(params)) {
		json_decref((json_t *)params);
		return acct_error_set(err, ACCT_EINVAL, "/params", "'params' must be an object");
	}
	rc = srv_json_only_keys(params, "/params", keys, err);
	if (rc >= 0)
		rc = parse_enum(params, "model", model_from, &p->model, "\"logreg\", \"mlp\"", err);
	if (rc >= 0)
		rc = parse_enum(params, "activation", act_from, &p->activation, "\"relu\", \"tanh\"", err);
	if (rc >= 0)
		rc = parse_enum(params, "clipping", clip_from, &p->clipping, "\"global\", \"per_layer\"", err);
	if (rc >= 0)
		rc = parse_u32(params, "epochs", 1, 100000, &p->epochs, err);
	if (rc >= 0)
		rc = parse_u32(params, "lot_size", 1, UINT32_MAX, &p->lot_size, err);
	if (rc >= 0)
		rc = parse_real(params, "noise_multiplier", SRV_LO_OPEN, 0, 1e6, &p->noise_multiplier, err);
	if (rc >= 0)
		rc = parse_real(params, "clip_norm", SRV_LO_OPEN, 0, 1e6, &p->clip_norm, err);
	if (rc >= 0) {
		double lr = NAN;

		rc = parse_real(params, "learning_rate", SRV_LO_OPEN, 0, 1e3, &lr, err);
		if (rc == 1) {
			p->learning_rate = lr;
			p->learning_rate_final = lr; /* constant unless told otherwise */
		}
	}
	if (rc >= 0)
		rc = parse_real(params, "learning_rate_final", SRV_LO_OPEN, 0, 1e3,
				&p->learning_rate_final, err);
	if (rc >= 0)
		rc = parse_u32(params, "learning_rate_decay_epochs", 0, 100000,
			       &p->learning_rate_decay_epochs, err);
	if (rc >= 0)
		rc = parse_real(params, "momentum", SRV_HI_OPEN, 0, 1, &p->momentum, err);
	if (rc >= 0)
		rc = parse_u32(params, "pca_components", 0, DPG_MAX_FEATURES, &p->pca_components, err);
	if (rc >= 0)
		rc = parse_real(params, "pca_noise_multiplier", SRV_LO_OPEN, 0, 1e6,
				&p->pca_noise_multiplier, err);
	if (rc >= 0) {
		int64_t v = 0;

		rc = srv_json_int(params, "/params", "max_train_examples", 0, 0, DPG_MAX_TRAIN_EXAMPLES,
				  &v, err);
		if (rc == 1)
			p->max_train_examples = (uint64_t)v;
	}
	hidden = json_object_get(params, "hidden");
	if (rc >= 0 && hidden) {
		if (json_is_array(hidden)) {
			size_t n = json_array_size(hidden);

			if (n < 1 || n > DPG_MAX_HIDDEN_LAYERS) {
				rc = acct_error_set(err, ACCT_EINVAL, "/params/hidden",
						    "'hidden' lists 1 to %d layer widths", DPG_MAX_HIDDEN_LAYERS);
			} else {
				p->n_hidden = (uint32_t)n;
				for (size_t i = 0; i < n && rc >= 0; i++) {
					json_t *w = json_array_get(hidden, i);

					if (!json_is_integer(w) || json_integer_value(w) < 1 ||
					    json_integer_value(w) > DPG_MAX_HIDDEN_UNITS)
						rc = acct_error_set(err, ACCT_EINVAL, "/params/hidden",
								    "hidden widths are integers in [1, %d]",
								    DPG_MAX_HIDDEN_UNITS);
					else
						p->hidden[i] = (uint32_t)json_integer_value(w);
				}
			}
		} else {
			uint32_t w = 0;

			rc = parse_u32(params, "hidden", 1, DPG_MAX_HIDDEN_UNITS, &w, err);
			if (rc == 1) {
				p->n_hidden = 1;
				p->hidden[0] = w;
			}
		}
	}
	if (rc >= 0) {
		const char *label = NULL;

		/* Read by load_data for hosted tables; checked here for its type. */
		rc = srv_json_string(params, "/params", "label", 0, DPG_MAX_NAME_BYTES, &label, err);
	}
	if (rc >= 0 && p->model == TRN_MODEL_LOGREG)
		p->n_hidden = 0;
	json_decref((json_t *)params);
	if (rc < 0)
		return rc;
	return trn_dpsgd_params_validate(p, err);
}

/* ---- the job store ------------------------------------------------------- */

typedef struct job_row {
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
} job_row;

static void job_row_clear(job_row *j)
{
	json_decref(j->params);
	json_decref(j->event);
	json_decref(j->progress);
	json_decref(j->result);
	free(j->error);
	free(j->model_path);
	memset(j, 0, sizeof(*j));
}

static const char *col_text(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	return t ? (const char *)t : "";
}

static json_t *col_json(sqlite3_stmt *s, int i)
{
	return sqlite3_column_type(s, i) == SQLITE_NULL ? NULL :
								 json_loads(col_text(s, i), 0, NULL);
}

static int job_load(srv_db *db, const char *id, job_row *j)
{
	sqlite3_stmt *s = NULL;
	int rc = SRV_DB_ERROR;

	memset(j, 0, sizeof(*j));
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT id, dataset_id, trainer, state, reservation_id, n_train, params,"
			       " event, progress, result, error, model_path, created_at,"
			       " coalesce(started_at, ''), coalesce(finished_at, '')"
			       " FROM jobs WHERE id = ?1",
			       -1, &s, NULL) != SQLITE_OK)
		return SRV_DB_ERROR;
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	switch (sqlite3_step(s)) {
	case SQLITE_ROW:
		snprintf(j->id, sizeof(j->id), "%s", col_text(s, 0));
		snprintf(j->dataset_id, sizeof(j->dataset_id), "%s", col_text(s, 1));
		snprintf(j->trainer, sizeof(j->trainer), "%s", col_text(s, 2));
		snprintf(j->state, sizeof(j->state), "%s", col_text(s, 3));
		snprintf(j->reservation_id, sizeof(j->reservation_id), "%s", col_text(s, 4));
		j->n_train = sqlite3_column_int64(s, 5);
		j->params = col_json(s, 6);
		j->event = col_json(s, 7);
		j->progress = col_json(s, 8);
		j->result = col_json(s, 9);
		if (sqlite3_column_type(s, 10) != SQLITE_NULL)
			j->error = strdup(col_text(s, 10));
		if (sqlite3_column_type(s, 11) != SQLITE_NULL)
			j->model_path = strdup(col_text(s, 11));
		snprintf(j->created_at, sizeof(j->created_at), "%s", col_text(s, 12));
		snprintf(j->started_at, sizeof(j->started_at), "%s", col_text(s, 13));
		snprintf(j->finished_at, sizeof(j->finished_at), "%s", col_text(s, 14));
		rc = SRV_OK;
		break;
	case SQLITE_DONE:
		rc = SRV_NOT_FOUND;
		break;
	default:
		break;
	}
	sqlite3_finalize(s);
	return rc;
}

/* Runs one statement with text parameters (NULL binds NULL). */
static int exec_text(srv_db *db, const char *sql, int n, const char *const *args)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (sqlite3_prepare_v2(srv__db_handle(db), sql, -1, &s, NULL) != SQLITE_OK)
		return SRV_DB_ERROR;
	for (int i = 0; i < n; i++)
		if (args[i])
			sqlite3_bind_text(s, i + 1, args[i], -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return SRV_DB_ERROR;
	return sqlite3_changes(srv__db_handle(db)) > 0 ? SRV_OK : SRV_NOT_FOUND;
}

/*
 * Ends a job in one transaction: closes its reservation (commit, or release
 * when `release` — only for jobs that never started) and records the final
 * state, result, error and model.  `from_state` guards the transition.
 */
static int job_finish(srv_db *db, const char *job_id, const char *from_state, const char *state,
		      bool release, const char *result, const char *error, const char *model_path,
		      const char *actor)
{
	job_row j;
	srv_dataset ds;
	char now[32];
	int rc;

	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	rc = job_load(db, job_id, &j);
	if (rc != SRV_OK)
		goto out;
	if (strcmp(j.state, from_state) != 0) {
		rc = SRV_CONFLICT;
		goto out;
	}
	rc = srv_store_dataset_get(db, j.dataset_id, &ds);
	if (rc != SRV_OK)
		goto out;
	/* The expiry rule first, as for any close: a reservation past its TTL
	 * is committed, also that of a job cancelled while queued. */
	{
		int swept = 0;

		rc = srv__sweep_expired(db, &ds, now, &swept);
		if (rc != SRV_OK)
			goto out;
	}
	rc = srv__close_reservation_locked(db, &ds, j.reservation_id, !release, actor, now, NULL);
	/* An expired reservation was committed by the sweep already: fine. */
	if (rc == SRV_CONFLICT)
		rc = SRV_OK;
	if (rc == SRV_OK) {
		const char *args[] = {job_id, state, result, error, model_path, now};

		rc = exec_text(db,
			       "UPDATE jobs SET state = ?2, result = ?3, error = ?4, model_path = ?5,"
			       " finished_at = ?6 WHERE id = ?1",
			       6, args);
	}
	if (rc == SRV_OK)
		rc = srv__commit(db);
out:
	srv__rollback(db);
	job_row_clear(&j);
	return rc;
}

/* ---- the worker pool ------------------------------------------------------ */

typedef struct job_slot {
	pthread_mutex_t lock;
	char id[48];               /* empty when idle */
	atomic_bool cancel;
	bool cancel_by_user;
	trn_progress progress;
	bool has_progress;
} job_slot;

struct srv_jobs {
	srv_ctx *ctx;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	char queue[DPG_MAX_QUEUED_JOBS][48];
	unsigned head, count;
	unsigned claimed;   /* places held by submissions between check and enqueue */
	bool stopping;
	unsigned n_workers;
	pthread_t threads[DPG_MAX_JOB_WORKERS];
	job_slot slots[DPG_MAX_JOB_WORKERS];
};

struct worker_arg {
	srv_jobs *jobs;
	unsigned index;
};

/* Queues a job id; false when the queue is full. */
static bool enqueue(srv_jobs *jobs, const char *id)
{
	bool ok = false;

	pthread_mutex_lock(&jobs->lock);
	/* An id too long for a queue entry is refused, not queued cut. */
	if (jobs->count < DPG_MAX_QUEUED_JOBS &&
	    (size_t)snprintf(jobs->queue[(jobs->head + jobs->count) % DPG_MAX_QUEUED_JOBS],
			     sizeof(jobs->queue[0]), "%s", id) < sizeof(jobs->queue[0])) {
		jobs->count++;
		ok = true;
		pthread_cond_signal(&jobs->wake);
	}
	pthread_mutex_unlock(&jobs->lock);
	return ok;
}

/*
 * Claims a place in the queue for a submission about to reserve its budget;
 * false when queued jobs and claims fill it.  The claim ends with
 * enqueue_claimed (the reservation committed) or queue_unclaim (it did
 * not), so the queue never holds more than DPG_MAX_QUEUED_JOBS and no
 * accepted job waits for a restart to run.
 */
static bool queue_claim(srv_jobs *jobs)
{
	bool ok;

	pthread_mutex_lock(&jobs->lock);
	ok = jobs->count + jobs->claimed < DPG_MAX_QUEUED_JOBS;
	if (ok)
		jobs->claimed++;
	pthread_mutex_unlock(&jobs->lock);
	return ok;
}

static void queue_unclaim(srv_jobs *jobs)
{
	pthread_mutex_lock(&jobs->lock);
	jobs->claimed--;
	pthread_mutex_unlock(&jobs->lock);
}

static void enqueue_claimed(srv_jobs *jobs, const char *id)
{
	pthread_mutex_lock(&jobs->lock);
	jobs->claimed--;
	snprintf(jobs->queue[(jobs->head + jobs->count) % DPG_MAX_QUEUED_JOBS], 48, "%s", id);
	jobs->count++;
	pthread_cond_signal(&jobs->wake);
	pthread_mutex_unlock(&jobs->lock);
}

static json_t *progress_json(const trn_progress *p)
{
	json_t *o = json_pack("{s:i, s:i, s:I, s:I, s:f}", "epoch", (int)p->epoch, "epochs",
			      (int)p->epochs, "step", (json_int_t)p->step, "steps_total",
			      (json_int_t)p->steps_total, "learning_rate", p->learning_rate);

	if (o && isfinite(p->loss))
		json_object_set_new(o, "loss", json_real(p->loss));
	if (o && isfinite(p->accuracy))
		json_object_set_new(o, "accuracy", json_real(p->accuracy));
	return o;
}

struct run_state {
	srv_jobs *jobs;
	job_slot *slot;
	double last_save;
};

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void save_progress(srv_jobs *jobs, const char *id, const trn_progress *p)
{
	json_t *o = progress_json(p);
	char *text = o ? srv_json_dump(o) : NULL;
	srv_db *db;

	if (text) {
		const char *args[] = {id, text};

		db = srv_store_acquire(jobs->ctx->store);
		exec_text(db, "UPDATE jobs SET progress = ?2 WHERE id = ?1 AND state = 'running'", 2,
			  args);
		srv_store_release(jobs->ctx->store, db);
	}
	free(text);
	json_decref(o);
}

static int on_progress(const trn_progress *p, void *user)
{
	struct run_state *rs = user;
	double t = now_seconds();

	pthread_mutex_lock(&rs->slot->lock);
	rs->slot->progress = *p;
	rs->slot->has_progress = true;
	pthread_mutex_unlock(&rs->slot->lock);
	if (p->evaluated || t - rs->last_save >= PROGRESS_SAVE_INTERVAL_S) {
		save_progress(rs->jobs, rs->slot->id, p);
		rs->last_save = t;
	}
	return 0;
}

/* Writes the model file atomically (temp file, fsync, rename). */
static int write_model(const char *dir, const char *id, const uint8_t *buf, size_t len,
		       char *path, size_t path_size)
{
	char tmp[4200];
	int fd;
	size_t off = 0;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -1;
	/* A path too long is an error: a cut one would name another file. */
	if ((size_t)snprintf(path, path_size, "%s/%s.dpgm", dir, id) >= path_size ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			return -1;
		}
		off += (size_t)w;
	}
	if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* A declared class name and its index, sorted by name for bsearch. */
struct class_name {
	const char *name;
	uint32_t index;
};

static int cmp_class_names(const void *a, const void *b)
{
	return strcmp(((const struct class_name *)a)->name, ((const struct class_name *)b)->name);
}

/*
 * A training table from a hosted CSV: the label is the column the job's
 * params name ("label"; default the last column), the features every other
 * numeric column, as uploaded (categorical feature columns are skipped).
 * The classes are the params' declared ones (check_label): a numeric label
 * v is class v when v is an integer in 0 .. K-1, a categorical one is the
 * index of its name in the declared list; any other row gets TRN_NO_CLASS
 * (sampled, zero gradient).  So nothing here depends on the rows beyond
 * what the job's event was priced for, and nothing fails on them.
 */
static int table_to_dataset(const mech_table *t, const json_t *params, trn_dataset **ret,
			    acct_error *err)
{
	const char *label = json_string_value(json_object_get(params, "label"));
	const json_t *declared = json_object_get(params, "classes");
	size_t cols = mech_table_columns(t), rows = mech_table_rows(t), lj = cols, d = 0;
	double *x = NULL;
	int64_t *y = NULL;
	uint32_t classes = 0;
	int rc = ACCT_ENOMEM;

	for (size_t j = 0; j < cols; j++)
		if (label ? strcmp(mech_table_column_name(t, j), label) == 0 : j == cols - 1)
			lj = j;
	if (lj == cols)
		return acct_error_set(err, ACCT_EINVAL, "/params/label",
				      "the hosted table has no column '%.64s'", label);
	for (size_t j = 0; j < cols; j++)
		if (j != lj && mech_table_numeric_values(t, j))
			d++;
	if (d == 0 || rows == 0)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the hosted table has no numeric feature column besides the label");
	/* Never refused here: check_label refused the job at submission. */
	if (mech_table_numeric_values(t, lj) ?
		    !(json_is_integer(declared) && json_integer_value(declared) >= 2) :
		    json_array_size(declared) < 2)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "the label's classes are not declared");
	x = malloc(sizeof(double) * rows * d);
	y = malloc(sizeof(int64_t) * rows);
	if (!x || !y)
		goto out;
	for (size_t j = 0, k = 0; j < cols; j++) {
		const double *v = mech_table_numeric_values(t, j);

		if (j == lj || !v)
			continue;
		for (size_t i = 0; i < rows; i++)
			x[i * d + k] = v[i];
		k++;
	}
	if (mech_table_numeric_values(t, lj)) {
		const double *v = mech_table_numeric_values(t, lj);

		classes = (uint32_t)json_integer_value(declared);
		for (size_t i = 0; i < rows; i++)
			y[i] = v[i] >= 0 && v[i] < (double)classes && v[i] == floor(v[i]) ?
				       (int64_t)v[i] :
				       (int64_t)TRN_NO_CLASS;
	} else {
		size_t k = mech_table_category_count(t, lj), m = json_array_size(declared);
		struct class_name *byname = calloc(m ? m : 1, sizeof(*byname));
		int64_t *of = calloc(k ? k : 1, sizeof(int64_t));

		if (!byname || !of) {
			free(byname);
			free(of);
			goto out;
		}
		for (size_t c = 0; c < m; c++) {
			byname[c].name = json_string_value(json_array_get(declared, c));
			byname[c].index = (uint32_t)c;
		}
		qsort(byname, m, sizeof(*byname), cmp_class_names);
		for (size_t c = 0; c < k; c++) {
			struct class_name key = {mech_table_category_name(t, lj, c), 0};
			const struct class_name *hit =
				bsearch(&key, byname, m, sizeof(*byname), cmp_class_names);

			of[c] = hit ? (int64_t)hit->index : (int64_t)TRN_NO_CLASS;
		}
		for (size_t i = 0; i < rows; i++)
			y[i] = of[mech_table_category_of(t, lj, i)];
		classes = (uint32_t)m;
		free(byname);
		free(of);
	}
	rc = trn_dataset_from_table(x, y, rows, d, classes, "/data", ret, err);
out:
	free(x);
	free(y);
	return rc;
}

/* Loads the training table (and a public evaluation table where there is
 * one) that the dataset links; a hosted table through `tables`. */
static int load_data(srv_table_cache *tables, srv_db *db, const char *dataset_id,
		     const json_t *params, trn_dataset **ret_train, trn_dataset **ret_eval,
		     acct_error *err)
{
	sqlite3_stmt *s = NULL;
	char kind[16] = "", builtin[64] = "";
	int rc;

	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT kind, coalesce(builtin, '') FROM dataset_data WHERE dataset_id = ?1",
			       -1, &s, NULL) != SQLITE_OK)
		return acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the data link");
	sqlite3_bind_text(s, 1, dataset_id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		snprintf(kind, sizeof(kind), "%s", col_text(s, 0));
		snprintf(builtin, sizeof(builtin), "%s", col_text(s, 1));
	}
	sqlite3_finalize(s);
	if (strcmp(kind, "builtin") == 0 && strcmp(builtin, "fashion-mnist") == 0) {
		rc = trn_fashion_mnist_load(NULL, true, ret_train, err);
		if (rc < 0)
			return rc;
		/* The test split is public: progress and accuracy come from it. */
		rc = trn_fashion_mnist_load(NULL, false, ret_eval, err);
		if (rc < 0) {
			trn_dataset_free(*ret_train);
			*ret_train = NULL;
		}
		return rc;
	}
	if (strcmp(kind, "table") == 0) {
		srv_table_ref *t = NULL;

		rc = srv_data_load_table(tables, db, dataset_id, &t, err);
		if (rc < 0)
			return rc;
		/* A hosted table has no public split: no progress accuracy. */
		rc = table_to_dataset(srv_table_ref_table(t), params, ret_train, err);
		srv_table_cache_release(tables, t);
		*ret_eval = NULL;
		return rc;
	}
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/data",
			      "the dataset's data cannot be trained on by this trainer");
}

static void run_job(srv_jobs *jobs, job_slot *slot)
{
	srv_ctx *ctx = jobs->ctx;
	srv_db *db;
	job_row j;
	trn_dpsgd_params p;
	trn_dataset *train = NULL, *eval = NULL;
	trn_dpsgd_result *result = NULL;
	mech_rng *sys = NULL, *stream = NULL;
	struct run_state rs = {.jobs = jobs, .slot = slot, .last_save = 0};
	acct_error err;
	uint8_t *model = NULL;
	size_t model_len = 0;
	char model_path[4200] = "", models_dir[4200];
	char *result_text = NULL;
	json_t *res = NULL;
	const char *final_state = "failed";
	int rc;

	acct_error_init(&err);
	db = srv_store_acquire(ctx->store);
	rc = job_load(db, slot->id, &j);
	if (rc == SRV_OK) {
		const char *args[] = {slot->id, NULL};
		char now[32];

		srv_now_text(now);
		args[1] = now;
		/* A job whose dataset was archived while it queued does not
		 * start: the archive's ledger row came first, so the job would
		 * read the data of a dataset that refuses all new work. */
		rc = exec_text(db,
			       "UPDATE jobs SET state = 'running', started_at = ?2"
			       " WHERE id = ?1 AND state = 'queued' AND NOT EXISTS"
			       " (SELECT 1 FROM datasets d WHERE d.id = jobs.dataset_id AND d.archived)",
			       2, args);
		if (rc == SRV_NOT_FOUND && strcmp(j.state, "queued") == 0) {
			int fin = job_finish(db, slot->id, "queued", "cancelled", true, NULL,
					     "the dataset was archived before the job started; nothing "
					     "was read, and the reservation was released",
					     NULL, "job");

			/* SRV_CONFLICT: a user cancelled it meanwhile. */
			if (fin != SRV_OK && fin != SRV_CONFLICT)
				fprintf(stderr,
					"{\"level\":\"error\",\"msg\":\"cannot cancel job %s of an "
					"archived dataset\"}\n",
					slot->id);
		}
	}
	srv_store_release(ctx->store, db);
	if (rc != SRV_OK) {
		if (rc == SRV_OK || rc == SRV_NOT_FOUND)
			job_row_clear(&j);
		return; /* cancelled while queued, its dataset archived, or gone */
	}
	/* The random source comes first: without one the job fails before it
	 * reads anything, so its reservation goes back to the budget.  Whether
	 * getrandom works says nothing about the data. */
	sys = mech_rng_new_system();
	stream = sys ? mech_rng_new_stream(sys) : NULL;
	if (!stream) {
		db = srv_store_acquire(ctx->store);
		if (job_finish(db, slot->id, "running", "failed", true, NULL,
			       "no secure randomness is available; nothing was read, and the "
			       "reservation was released",
			       NULL, "job") != SRV_OK)
			fprintf(stderr,
				"{\"level\":\"error\",\"msg\":\"cannot record the end of job %s\"}\n",
				slot->id);
		srv_store_release(ctx->store, db);
		goto out;
	}
	/* From here on the job has touched, or may touch, data. */
	rc = parse_dpsgd_params(j.params, &p, &err);
	if (rc >= 0) {
		db = srv_store_acquire(ctx->store);
		rc = load_data(ctx->tables, db, j.dataset_id, j.params, &train, &eval, &err);
		srv_store_release(ctx->store, db);
	}
	if (rc >= 0 && (int64_t)train->n != j.n_train)
		rc = acct_error_set(&err, ACCT_EINVAL, "/data",
				    "the linked data changed since the job was priced");
	if (rc >= 0)
		rc = trn_dpsgd_run(&p, train, eval, stream, on_progress, &rs, &slot->cancel, &result,
				   &err);
	/* The last step's progress, which the save interval may have skipped. */
	if (slot->has_progress)
		save_progress(jobs, slot->id, &slot->progress);
	if (rc >= 0 && result) {
		if (trn_model_serialize(result->model, &model, &model_len, &err) == 0) {
			if ((size_t)snprintf(models_dir, sizeof(models_dir), "%s/models",
					     ctx->data_dir) >= sizeof(models_dir) ||
			    write_model(models_dir, slot->id, model, model_len, model_path,
					sizeof(model_path)) < 0)
				model_path[0] = '\0';
		}
		res = json_pack("{s:I, s:I, s:I, s:f, s:b}", "steps_done",
				(json_int_t)result->steps_done, "steps_total",
				(json_int_t)result->steps_total, "examples_used",
				(json_int_t)result->examples_used, "train_seconds",
				result->train_seconds, "model_available", model_path[0] != '\0');
		if (res && isfinite(result->test_accuracy))
			json_object_set_new(res, "test_accuracy", json_real(result->test_accuracy));
		if (res && isfinite(result->test_loss))
			json_object_set_new(res, "test_loss", json_real(result->test_loss));
		if (res)
			json_object_set_new(res, "model_bytes", json_integer((json_int_t)model_len));
		result_text = res ? srv_json_dump(res) : NULL;
		final_state = rc == TRN_CANCELLED ? (slot->cancel_by_user ? "cancelled" : "failed") :
						    "succeeded";
	}
	db = srv_store_acquire(ctx->store);
	{
		const char *error = NULL;
		char msg[ACCT_ERROR_TEXT_BYTES + sizeof(" at ") + ACCT_ERROR_WHERE_BYTES];

		if (rc < 0) {
			snprintf(msg, sizeof(msg), "%s%s%s", err.text, err.where[0] ? " at " : "", err.where);
			error = msg;
		} else if (strcmp(final_state, "failed") == 0) {
			error = "the server stopped while the job ran";
		}
		/* Commits the reservation in full: the job has touched data. */
		if (job_finish(db, slot->id, "running", final_state, false, result_text, error,
			       model_path[0] ? model_path : NULL, "job") != SRV_OK)
			fprintf(stderr, "{\"level\":\"error\",\"msg\":\"cannot record the end of job %s\"}\n",
				slot->id);
	}
	srv_store_release(ctx->store, db);
out:
	json_decref(res);
	free(result_text);
	free(model);
	trn_dpsgd_result_free(result);
	trn_dataset_free(train);
	trn_dataset_free(eval);
	mech_rng_free(stream);
	mech_rng_free(sys);
	job_row_clear(&j);
}

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	srv_jobs *jobs = wa->jobs;
	job_slot *slot = &jobs->slots[wa->index];

	free(wa);
	for (;;) {
		pthread_mutex_lock(&jobs->lock);
		while (!jobs->stopping && jobs->count == 0)
			pthread_cond_wait(&jobs->wake, &jobs->lock);
		if (jobs->stopping) {
			pthread_mutex_unlock(&jobs->lock);
			break;
		}
		pthread_mutex_lock(&slot->lock);
		memcpy(slot->id, jobs->queue[jobs->head], sizeof(slot->id));
		atomic_store(&slot->cancel, false);
		slot->cancel_by_user = false;
		slot->has_progress = false;
		pthread_mutex_unlock(&slot->lock);
		jobs->head = (jobs->head + 1) % DPG_MAX_QUEUED_JOBS;
		jobs->count--;
		pthread_mutex_unlock(&jobs->lock);

		run_job(jobs, slot);

		pthread_mutex_lock(&slot->lock);
		slot->id[0] = '\0';
		pthread_mutex_unlock(&slot->lock);
	}
	return NULL;
}

int srv_jobs_start(srv_ctx *ctx, unsigned workers, srv_jobs **ret, char *errbuf,
		   size_t errbuf_size)
{
	srv_jobs *jobs = calloc(1, sizeof(*jobs));
	srv_db *db;
	sqlite3_stmt *s = NULL;
	char ids[DPG_MAX_QUEUED_JOBS][48];
	unsigned n_running = 0, n_queued = 0;
	char running[64][48];

	if (!jobs || workers == 0 || workers > DPG_MAX_JOB_WORKERS) {
		snprintf(errbuf, errbuf_size, "bad worker count");
		free(jobs);
		return -1;
	}
	jobs->ctx = ctx;
	pthread_mutex_init(&jobs->lock, NULL);
	pthread_cond_init(&jobs->wake, NULL);
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++)
		pthread_mutex_init(&jobs->slots[i].lock, NULL);

	/* The start-up rule: running jobs failed (reservation committed),
	 * queued jobs queued again, oldest first.  A running job that cannot
	 * be failed stops the start (its reservation would stay open, and the
	 * rows would come back in the next pass for ever). */
	db = srv_store_acquire(ctx->store);
	for (;;) {
		int rc = SRV_OK;

		n_running = 0;
		if (sqlite3_prepare_v2(srv__db_handle(db),
				       "SELECT id FROM jobs WHERE state = 'running' LIMIT 64", -1, &s,
				       NULL) != SQLITE_OK) {
			snprintf(errbuf, errbuf_size, "cannot read the jobs that were running: %s",
				 sqlite3_errmsg(srv__db_handle(db)));
			rc = SRV_DB_ERROR;
		}
		while (rc == SRV_OK && n_running < 64 && sqlite3_step(s) == SQLITE_ROW)
			snprintf(running[n_running++], 48, "%s", col_text(s, 0));
		sqlite3_finalize(s);
		for (unsigned i = 0; i < n_running && rc == SRV_OK; i++) {
			rc = job_finish(db, running[i], "running", "failed", false, NULL,
					"interrupted: the server stopped while the job ran; its reservation is committed in full",
					NULL, "restart");
			if (rc != SRV_OK)
				snprintf(errbuf, errbuf_size,
					 "cannot mark interrupted job %s failed and commit its reservation",
					 running[i]);
		}
		if (rc != SRV_OK) {
			srv_store_release(ctx->store, db);
			srv_jobs_stop(jobs);
			return -1;
		}
		if (n_running < 64)
			break;
	}
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, id", -1,
			       &s, NULL) == SQLITE_OK) {
		while (n_queued < DPG_MAX_QUEUED_JOBS && sqlite3_step(s) == SQLITE_ROW)
			snprintf(ids[n_queued++], 48, "%s", col_text(s, 0));
		sqlite3_finalize(s);
	}
	srv_store_release(ctx->store, db);
	for (unsigned i = 0; i < n_queued; i++)
		enqueue(jobs, ids[i]);

	for (unsigned i = 0; i < workers; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));

		if (!wa)
			break;
		wa->jobs = jobs;
		wa->index = i;
		if (pthread_create(&jobs->threads[i], NULL, worker_main, wa) != 0) {
			free(wa);
			break;
		}
		jobs->n_workers++;
	}
	if (jobs->n_workers == 0) {
		snprintf(errbuf, errbuf_size, "cannot start job workers");
		srv_jobs_stop(jobs);
		return -1;
	}
	*ret = jobs;
	return 0;
}

void srv_jobs_stop(srv_jobs *jobs)
{
	if (!jobs)
		return;
	pthread_mutex_lock(&jobs->lock);
	jobs->stopping = true;
	pthread_cond_broadcast(&jobs->wake);
	pthread_mutex_unlock(&jobs->lock);
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++)
		atomic_store(&jobs->slots[i].cancel, true);
	for (unsigned i = 0; i < jobs->n_workers; i++)
		pthread_join(jobs->threads[i], NULL);
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++)
		pthread_mutex_destroy(&jobs->slots[i].lock);
	pthread_mutex_destroy(&jobs->lock);
	pthread_cond_destroy(&jobs->wake);
	free(jobs);
}

/* ---- data links ----------------------------------------------------------- */

/* Reads the number of items from an IDX file's header (gzip or plain). */
static int idx_count(const char *path, int64_t *ret)
{
	gzFile f = gzopen(path, "rb");
	unsigned char h[8];
	int n;

	if (!f)
		return -1;
	n = gzread(f, h, sizeof(h));
	gzclose(f);
	if (n != (int)sizeof(h) || h[0] != 0 || h[1] != 0 || h[2] != 0x08)
		return -1;
	*ret = ((int64_t)h[4] << 24) | ((int64_t)h[5] << 16) | ((int64_t)h[6] << 8) | h[7];
	return 0;
}

int srv_h_data_put(srv_request *req, srv_response *res)
{
	static const char *const keys[] = {"builtin", NULL};
	srv_dataset ds;
	acct_error err;
	json_t *body = NULL;
	const char *builtin = NULL;
	char path[512], now[32], rows_text[32];
	int64_t rows = 0;
	int rc;

	acct_error_init(&err);
	rc = srv_store_dataset_get(req->db, req->params[0], &ds);
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset");
		return 0;
	}
	/* As PATCH: an archived dataset does not change.  (Archiving between
	 * this read and the write below links data nothing can query.) */
	if (ds.archived) {
		srv_problem(res, 409, NULL, "the dataset is archived; its data cannot change", NULL,
			    NULL);
		return 0;
	}
	if (req->content_type && srv_media_type_is(req->content_type, "text/csv"))
		return srv_data_put_csv(req, res, &ds);
	/* Any other type than the JSON ones the JSON routes take is 415. */
	if (!srv_json_content_type(req->content_type)) {
		srv_problem(res, 415, NULL,
			    "the body must be text/csv (a table) or application/json (a builtin link)",
			    NULL, NULL);
		return 0;
	}
	body = srv_parse_body(req->raw_body, req->raw_len, &err);
	if (body && srv_json_only_keys(body, "", keys, &err) >= 0 &&
	    srv_json_string(body, "", "builtin", SRV_REQUIRED, 64, &builtin, &err) >= 0 &&
	    strcmp(builtin, "fashion-mnist") != 0)
		acct_error_set(&err, ACCT_EINVAL, "/builtin", "the only builtin data set is \"fashion-mnist\"");
	if (err.code != ACCT_OK) {
		json_decref(body);
		srv_problem_from_error(res, &err);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", TRN_FASHION_MNIST_DIR);
	if (idx_count(path, &rows) < 0) {
		json_decref(body);
		srv_problem(res, 422, NULL,
			    "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)",
			    "/builtin", NULL);
		return 0;
	}
	srv_now_text(now);
	snprintf(rows_text, sizeof(rows_text), "%lld", (long long)rows);
	{
		const char *args[] = {ds.id, builtin, TRN_FASHION_MNIST_DIR, rows_text,
				      req->who->key_id, now};
		char *old_table = NULL;

		/* A hosted table this link replaces is removed after the commit
		 * (srv_data_put_csv's order). */
		if (srv__begin_write(req->db) < 0 ||
		    srv__table_file_in_txn(req->db, ds.id, &old_table) != SRV_OK ||
		    exec_text(req->db,
			      "INSERT INTO dataset_data (dataset_id, kind, builtin, path, rows, actor,"
			      " created_at, rows_public, schema_declared)"
			      " VALUES (?1, 'builtin', ?2, ?3, CAST(?4 AS INTEGER), ?5, ?6, 1, 1)"
			      " ON CONFLICT (dataset_id) DO UPDATE SET kind = 'builtin',"
			      " builtin = ?2, path = ?3, rows = CAST(?4 AS INTEGER), actor = ?5,"
			      " created_at = ?6, rows_public = 1, schema_declared = 1",
			      6, args) != SRV_OK ||
		    srv__commit(req->db) < 0) {
			srv__rollback(req->db);
			free(old_table);
			json_decref(body);
			srv_problem(res, 503, NULL, "cannot record the data link", NULL, NULL);
			return 0;
		}
		srv__table_file_drop(req->ctx->tables, old_table, ds.id);
		free(old_table);
	}
	srv_json_reply(res, 200, json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "dataset", ds.id, "kind",
					   "builtin", "builtin", builtin, "rows", (json_int_t)rows,
					   "row_count", "public", "schema", "declared"));
	json_decref(body);
	return 0;
}

int srv_h_data_get(srv_request *req, srv_response *res)
{
	sqlite3_stmt *s = NULL;
	json_t *o = NULL;
	bool admin = req->who && req->who->role == SRV_ROLE_ADMIN;

	if (sqlite3_prepare_v2(srv__db_handle(req->db),
			       "SELECT kind, builtin, rows, columns, bytes, created_at, rows_public,"
			       " schema_declared FROM dataset_data WHERE dataset_id = ?1",
			       -1, &s, NULL) != SQLITE_OK) {
		srv_problem(res, 503, NULL, "cannot read the data link", NULL, NULL);
		return 0;
	}
	sqlite3_bind_text(s, 1, req->params[0], -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		bool rows_public = sqlite3_column_int(s, 6) != 0;
		bool declared = sqlite3_column_int(s, 7) != 0;

		/* Under add/remove neighbours the row count is a function of the
		 * private rows, and so are kinds inferred from the values: either
		 * is shown to a reader other than an admin (who uploads the data)
		 * only when the upload declared it. */
		o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "dataset", req->params[0], "kind",
			      col_text(s, 0), "row_count", rows_public ? "public" : "private",
			      "schema", declared ? "declared" : "inferred", "created_at",
			      col_text(s, 5));
		if (o && (rows_public || admin))
			json_object_set_new(o, "rows", json_integer(sqlite3_column_int64(s, 2)));
		if (o && (declared || admin))
			json_object_set_new(o, "columns", col_json(s, 3));
		/* The file's size depends on the values (their digits): an admin
		 * sees it; a viewer or analyst does not. */
		if (o && admin)
			json_object_set_new(o, "bytes", json_integer(sqlite3_column_int64(s, 4)));
		if (o && sqlite3_column_type(s, 1) != SQLITE_NULL)
			json_object_set_new(o, "builtin", json_string(col_text(s, 1)));
	}
	sqlite3_finalize(s);
	if (!o) {
		srv_problem(res, 404, NULL, "no data is linked to this dataset", NULL, NULL);
		return 0;
	}
	srv_json_reply(res, 200, o);
	return 0;
}

/* ---- job routes ---------------------------------------------------------- */

struct submit_arg {
	const char *job_id;
	const char *dataset_id;
	const char *params_text;
	const char *event_text;
	const acct_event *event;
	const acct_cost *cost;
	int64_t n_train;
	const char *actor;
	const char *note;
};

static int submit_txn(void *arg, srv_db *db, const srv_dataset *ds, int64_t charge_id,
		      const char *rid)
{
	struct submit_arg *a = arg;
	char now[32], n_text[32];
	const char *args[] = {a->job_id, a->dataset_id, a->params_text, a->event_text, n_text, rid,
			      a->actor, a->note, now};

	(void)ds;
	(void)charge_id;
	srv_now_text(now);
	snprintf(n_text, sizeof(n_text), "%lld", (long long)a->n_train);
	return exec_text(db,
			 "INSERT INTO jobs (id, dataset_id, trainer, params, event, n_train,"
			 " reservation_id, state, actor, note, created_at)"
			 " VALUES (?1, ?2, 'dpsgd', ?3, ?4, CAST(?5 AS INTEGER), ?6, 'queued', ?7, ?8, ?9)",
			 9, args) == SRV_OK ? 0 : -1;
}

static json_t *submit_body(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	struct submit_arg *a = arg;
	acct_filter f;
	double eps = NAN;

	(void)charge_id;
	if (srv_dataset_filter(ds, &f, NULL) == 0)
		eps = acct_filter_epsilon(&f, a->cost);
	return json_pack("{s:s, s:s, s:s, s:o, s:I, s:{s:s, s:f}, s:o}", "id", a->job_id, "state",
			 "queued", "trainer", "dpsgd", "event", srv_event_to_json(a->event),
			 "public_row_count", (json_int_t)a->n_train, "reservation", "id", rid,
			 "epsilon", eps, "budget", srv_dataset_budget_json(ds));
}

/* The linked data's row count and, for a hosted table, its column schema
 * (a new reference, or NULL). */
static int data_rows(srv_db *db, const char *dataset_id, int64_t *ret, json_t **ret_columns)
{
	sqlite3_stmt *s = NULL;
	int rc = SRV_NOT_FOUND;

	*ret_columns = NULL;
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT rows, kind, columns FROM dataset_data WHERE dataset_id = ?1", -1,
			       &s, NULL) != SQLITE_OK)
		return SRV_DB_ERROR;
	sqlite3_bind_text(s, 1, dataset_id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		*ret = sqlite3_column_int64(s, 0);
		if (strcmp(col_text(s, 1), "table") == 0)
			*ret_columns = col_json(s, 2);
		rc = SRV_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/*
 * Checks the job's label and classes against a hosted table's schema
 * (metadata, so before any data is read).  The label must name a column
 * (default: the last).  The classes must be declared: an integer K for a
 * numeric label (classes 0 .. K-1), or the list of category names for a
 * categorical one.  Taken from the data, their number and order would be
 * released by the model's shape whatever noise the training adds (one row
 * with a new category changed it), so they are public parameters; a row
 * whose label is none of them is sampled with a zero gradient
 * (TRN_NO_CLASS).  Fashion-MNIST has its ten classes and takes none.
 */
static int check_label(const json_t *params, const json_t *columns, size_t *ret_features,
		       uint32_t *ret_classes, acct_error *err)
{
	const char *label = json_string_value(json_object_get(params, "label"));
	const json_t *classes = json_object_get(params, "classes"), *col = NULL, *c;
	size_t i, n = json_array_size(columns), features = 0;

	if (!columns) {
		if (classes)
			return acct_error_set(err, ACCT_EINVAL, "/params/classes",
					      "classes are declared for a hosted table's label only");
		if (label)
			return acct_error_set(err, ACCT_EINVAL, "/params/label",
					      "a label column is named for a hosted table only");
		*ret_features = TRN_FASHION_MNIST_FEATURES;
		*ret_classes = TRN_FASHION_MNIST_CLASSES;
		return 0;
	}
	json_array_foreach(columns, i, c)
		if (label ? json_is_string(json_object_get(c, "name")) &&
				    strcmp(json_string_value(json_object_get(c, "name")), label) == 0 :
			    i + 1 == n)
			col = c;
	if (!col)
		return acct_error_set(err, ACCT_EINVAL, "/params/label",
				      "the hosted table has no column '%.64s'", label ? label : "");
	/* The features: every numeric column but the label (table_to_dataset). */
	json_array_foreach(columns, i, c)
		if (c != col && json_is_string(json_object_get(c, "kind")) &&
		    strcmp(json_string_value(json_object_get(c, "kind")), "numeric") == 0)
			features++;
	*ret_features = features;
	if (!classes)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "a hosted table's label classes must be declared: an integer K "
				      "for a numeric label (0 .. K-1), or the list of category names");
	if (strcmp(json_string_value(json_object_get(col, "kind")), "numeric") == 0) {
		if (!json_is_integer(classes) || json_integer_value(classes) < 2 ||
		    json_integer_value(classes) > DPG_MAX_CLASSES)
			return acct_error_set(err, ACCT_EINVAL, "/params/classes",
					      "a numeric label's classes are an integer K in [2, %d]",
					      DPG_MAX_CLASSES);
		*ret_classes = (uint32_t)json_integer_value(classes);
		return 0;
	}
	if (!json_is_array(classes) || json_array_size(classes) < 2 ||
	    json_array_size(classes) > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "a categorical label's classes are a list of 2 to %d names",
				      DPG_MAX_CLASSES);
	json_array_foreach(classes, i, c) {
		char where[ACCT_ERROR_WHERE_BYTES];

		snprintf(where, sizeof(where), "/params/classes/%zu", i);
		if (!json_is_string(c) || json_string_length(c) < 1 ||
		    json_string_length(c) > DPG_MAX_CSV_FIELD_BYTES ||
		    strlen(json_string_value(c)) != json_string_length(c))
			return acct_error_set(err, ACCT_EINVAL, where,
					      "a class is a category name of 1 to %d bytes",
					      DPG_MAX_CSV_FIELD_BYTES);
		for (size_t k = 0; k < i; k++)
			if (strcmp(json_string_value(json_array_get(classes, k)),
				   json_string_value(c)) == 0)
				return acct_error_set(err, ACCT_EINVAL, where, "appears twice");
	}
	*ret_classes = (uint32_t)json_array_size(classes);
	return 0;
}

int srv_h_job_submit(srv_request *req, srv_response *res)
{
	static const char *const keys[] = {"trainer", "params", "dry_run", "note", "ledger_delta",
					   NULL};
	srv_dataset ds;
	trn_dpsgd_params p;
	acct_error err;
	acct_event *ev = NULL;
	acct_filter f;
	acct_cost cost;
	const char *trainer = NULL, *note = NULL;
	bool dry_run = false;
	char job_id[48];
	char *params_text = NULL, *event_text = NULL, *body = NULL;
	json_t *params_json = NULL, *ev_json = NULL, *columns = NULL;
	int64_t n_train = 0;
	size_t features = 0;
	uint32_t classes = 0;
	double ledger_delta = 0.0;
	bool claimed = false;
	srv_spend sp;
	uint8_t hash[32];
	int status = 0, rc;

	srv_spend_from_request(&sp, req, hash);
	if (srv_spend_replayed(req, res, &sp, srv_reply_raw_json))
		return 0;
	acct_error_init(&err);
	rc = srv_json_only_keys(req->body, "", keys, &err);
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "trainer", SRV_REQUIRED, 32, &trainer, &err);
	if (rc >= 0 && strcmp(trainer, "dpsgd") != 0)
		rc = acct_error_set(&err, ACCT_EINVAL, "/trainer",
				    "'trainer' must be \"dpsgd\" (the only trainer in this build)");
	if (rc >= 0)
		rc = srv_json_bool(req->body, "", "dry_run", 0, &dry_run, &err);
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, &note, &err);
	if (rc >= 0)
		rc = srv_json_real(req->body, "", "ledger_delta",
				   SRV_NULLABLE | SRV_LO_OPEN | SRV_HI_OPEN, 0, 1, &ledger_delta, &err);
	if (rc >= 0)
		rc = parse_dpsgd_params(json_object_get(req->body, "params"), &p, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	rc = srv_store_dataset_get(req->db, req->params[0], &ds);
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset");
		return 0;
	}
	rc = data_rows(req->db, ds.id, &n_train, &columns);
	if (rc != SRV_OK) {
		srv_problem(res, 409, NULL,
			    "no data is linked to this dataset (PUT /v1/datasets/{id}/data first)",
			    NULL, NULL);
		return 0;
	}
	rc = check_label(json_object_get(req->body, "params"), columns, &features, &classes, &err);
	json_decref(columns);
	/* A job that could only fail (PCA wider than the data, a model past
	 * its bounds) is refused here, before anything is reserved for it. */
	if (rc >= 0)
		rc = trn_dpsgd_check_shape(&p, features, classes, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	/* The event, from parameters and the row count alone: no data read.
	 * Its sampling probability q = lot_size / N takes the row count N as
	 * public, as the moments accountant does (Abadi et al. 2016, section
	 * 3.1), whatever the upload declared: the event (N = lot_size / q) and
	 * the answers say so in "public_row_count" and the ledger note. */
	rc = trn_dpsgd_event(&p, (uint64_t)n_train, &ev, &err);
	if (rc >= 0)
		rc = acct_event_validate_at(ev, ds.neighbor, "/params", &err);
	if (rc >= 0)
		rc = srv_dataset_filter(&ds, &f, &err);
	if (rc >= 0)
		rc = acct_filter_price(&f, ev, ledger_delta, &cost, &err);
	if (rc < 0) {
		/* A basic ledger prices the job's event at the delta share the
		 * request names in "ledger_delta" (as a mechanism's does). */
		if (err.code == ACCT_EUNSUPPORTED && !strcmp(err.where, "/delta"))
			snprintf(err.where, sizeof(err.where), "/ledger_delta");
		srv_problem_from_error(res, &err);
		goto out;
	}
	if (dry_run) {
		srv_epsilons after;
		bool fits = srv_dataset_epsilons(&ds, &cost, &after) == 0 && !ds.archived && after.within;

		json_t *answer = json_pack("{s:b, s:o, s:{s:f}, s:I, s:I, s:o}", "fits", fits,
					   "event", srv_event_to_json(ev), "needed", "epsilon",
					   acct_filter_epsilon(&f, &cost), "n_train",
					   (json_int_t)n_train, "public_row_count",
					   (json_int_t)n_train, "budget", srv_dataset_budget_json(&ds));

		/* Beside the charge, the event's own epsilon (what the rdp
		 * filter's delta split adds). */
		if (answer &&
		    srv_dataset_explain_cost(&ds, ev, json_object_get(answer, "needed")) < 0) {
			json_decref(answer);
			answer = NULL;
		}
		srv_json_reply(res, 200, answer);
		goto out;
	}
	/* A place in the queue is claimed before the reservation, so every
	 * 202 names a job that a worker will run. */
	if (!queue_claim(req->ctx->jobs)) {
		srv_problem(res, 503, NULL, "the job queue is full; try again later", NULL, NULL);
		goto out;
	}
	claimed = true;
	params_json = json_object_get(req->body, "params");
	params_text = params_json ? srv_json_dump(params_json) : strdup("{}");
	ev_json = srv_event_to_json(ev);
	event_text = ev_json ? srv_json_dump(ev_json) : NULL;
	if (!params_text || !event_text) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		goto out;
	}
	if ((rc = srv__random_id(JOB_ID_PREFIX, job_id, sizeof(job_id))) != SRV_OK) {
		srv_reply_store_error(res, rc, NULL);
		goto out;
	}
	{
		struct submit_arg a = {job_id, ds.id, params_text, event_text, ev, &cost, n_train,
				       req->who->key_id, note};

		sp.kind = SRV_SPEND_RESERVE;
		sp.dataset_id = ds.id;
		sp.event = ev;
		sp.cost = &cost;
		sp.note = note ? note : "training job (treats the row count as public: q = L/N)";
		sp.ttl_seconds = 30LL * 24 * 3600;
		sp.txn_fn = submit_txn;
		sp.body_fn = submit_body;
		sp.body_arg = &a;
		sp.success_status = 202;
		rc = srv_store_spend(req->db, &sp, &status, &body, &ds);
	}
	if (rc == SRV_OK) {
		enqueue_claimed(req->ctx->jobs, job_id);
		claimed = false;
	}
	if (rc == SRV_OK || rc == SRV_REPLAYED) {
		res->status = status;
		res->content_type = "application/json";
		res->body = body;
		res->len = strlen(body);
		body = NULL;
		snprintf(res->location, sizeof(res->location), "/v1/jobs/%s", job_id);
	} else if (rc == SRV_CONFLICT) {
		srv_reply_over_budget(res, &ds, &cost);
	} else if (rc == SRV_IDEM_MISMATCH) {
		srv_problem(res, 422, NULL, "this Idempotency-Key was used with a different request",
			    "Idempotency-Key", NULL);
	} else {
		srv_problem(res, 503, NULL, "the ledger is busy or unavailable; nothing was reserved",
			    NULL, NULL);
	}
out:
	if (claimed)
		queue_unclaim(req->ctx->jobs);
	acct_event_free(ev);
	json_decref(ev_json);
	free(params_text);
	free(event_text);
	free(body);
	return 0;
}

/* The epsilon the first `steps` steps cost under `accountant` at `delta`;
 * NAN when it cannot be priced. */
static double steps_epsilon(const trn_dpsgd_params *p, int64_t n_train, int64_t steps,
			    acct_accountant accountant, acct_neighbor nb, double delta)
{
	acct_event *ev = NULL;
	acct_options opt;
	acct_result r;
	double eps = NAN;

	if (trn_dpsgd_event_for_steps(p, (uint64_t)n_train, steps, &ev, NULL) < 0)
		return NAN;
	if (!ev)
		return 0.0;
	memset(&opt, 0, sizeof(opt));
	opt.accountant = accountant;
	opt.neighbor = nb;
	if (acct_epsilon(ev, delta, &opt, &r, NULL) == 0)
		eps = r.epsilon;
	acct_event_free(ev);
	return eps;
}

static json_t *job_json(srv_request *req, job_row *j)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:O, s:O, s:s, s:s}", "id", j->id, "dataset",
			      j->dataset_id, "trainer", j->trainer, "state", j->state, "params",
			      j->params ? j->params : json_null(), "event",
			      j->event ? j->event : json_null(), "reservation_id", j->reservation_id,
			      "created_at", j->created_at);
	json_t *progress = j->progress ? json_incref(j->progress) : NULL;
	srv_jobs *jobs = req->ctx->jobs;
	int64_t steps = -1;

	if (!o)
		return NULL;
	/* The N of the event's q = lot_size / N (srv_h_job_submit). */
	json_object_set_new(o, "public_row_count", json_integer(j->n_train));
	if (j->started_at[0])
		json_object_set_new(o, "started_at", json_string(j->started_at));
	if (j->finished_at[0])
		json_object_set_new(o, "finished_at", json_string(j->finished_at));
	/* A running job's freshest progress is in its worker's slot. */
	for (unsigned i = 0; jobs && i < jobs->n_workers; i++) {
		job_slot *s = &jobs->slots[i];

		pthread_mutex_lock(&s->lock);
		if (strcmp(s->id, j->id) == 0 && s->has_progress) {
			json_decref(progress);
			progress = progress_json(&s->progress);
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (json_is_object(progress))
		steps = (int64_t)json_integer_value(json_object_get(progress, "step"));
	if (j->result && json_integer_value(json_object_get(j->result, "steps_done")) > 0)
		steps = json_integer_value(json_object_get(j->result, "steps_done"));
	if (!progress)
		progress = json_object();
	/* Epsilon so far, from the steps done and the job's own parameters. */
	if (steps >= 0 && json_is_object(progress)) {
		trn_dpsgd_params p;
		srv_dataset ds;
		acct_filter f;

		if (parse_dpsgd_params(j->params, &p, NULL) == 0 &&
		    srv_store_dataset_get(req->db, j->dataset_id, &ds) == SRV_OK) {
			double delta = ds.budget_delta > 0 ? ds.budget_delta : 1e-5;
			double m = steps_epsilon(&p, j->n_train, steps, ACCT_MOMENTS, ds.neighbor, delta);
			double r = steps_epsilon(&p, j->n_train, steps, ACCT_RDP, ds.neighbor, delta);
			json_t *e = json_pack("{s:f}", "delta", delta);
			acct_event *ev = NULL;

			json_object_set_new(e, "moments", isfinite(m) ? json_real(m) : json_null());
			json_object_set_new(e, "rdp", isfinite(r) ? json_real(r) : json_null());
			if (srv_dataset_filter(&ds, &f, NULL) == 0 &&
			    trn_dpsgd_event_for_steps(&p, (uint64_t)j->n_train, steps, &ev, NULL) == 0) {
				acct_cost c;

				if (!ev)
					json_object_set_new(e, "ledger", json_real(0.0));
				else if (acct_filter_price(&f, ev, 0.0, &c, NULL) == 0)
					json_object_set_new(e, "ledger", json_real(acct_filter_epsilon(&f, &c)));
				json_object_set_new(e, "ledger_accountant",
						    json_string(acct_ledger_kind_name(ds.accountant)));
			}
			acct_event_free(ev);
			json_object_set_new(progress, "epsilon", e);
		}
	}
	json_object_set_new(o, "progress", progress);
	/* An ended job that kept no result (it failed before training, was
	 * cancelled while queued, or was running when the server died) says
	 * so, as a kept result does. */
	if (!j->result && (!strcmp(j->state, "succeeded") || !strcmp(j->state, "failed") ||
			   !strcmp(j->state, "cancelled")))
		json_object_set_new(o, "result", json_pack("{s:b}", "model_available", false));
	if (j->result) {
		json_t *result = json_deep_copy(j->result);
		json_t *eps = json_object_get(progress, "epsilon");

		/* A finished classifier's result states its epsilon (rdp). */
		if (eps && json_is_real(json_object_get(eps, "rdp")))
			json_object_set(result, "epsilon", json_object_get(eps, "rdp"));
		if (eps)
			json_object_set(result, "epsilon_by_accountant", eps);
		json_object_set_new(o, "result", result);
	}
	if (j->error)
		json_object_set_new(o, "error", json_string(j->error));
	return o;
}

/* Loads {id} as a job visible to the caller, or answers. */
static bool load_visible_job(srv_request *req, srv_response *res, job_row *j)
{
	int rc = job_load(req->db, req->params[0], j);

	if (rc != SRV_OK) {
		srv_problem(res, rc == SRV_NOT_FOUND ? 404 : 503, NULL, "no such job", NULL, NULL);
		return false;
	}
	if (!srv_principal_sees(req->who, j->dataset_id)) {
		srv_problem(res, 403, NULL, "this key is not scoped to the job's dataset", NULL, NULL);
		job_row_clear(j);
		return false;
	}
	return true;
}

int srv_h_job_get(srv_request *req, srv_response *res)
{
	job_row j;

	if (!load_visible_job(req, res, &j))
		return 0;
	srv_json_reply(res, 200, job_json(req, &j));
	job_row_clear(&j);
	return 0;
}

int srv_h_job_list(srv_request *req, srv_response *res)
{
	sqlite3_stmt *s = NULL;
	json_t *arr;
	srv_dataset ds;
	int rc = srv_store_dataset_get(req->db, req->params[0], &ds);

	/* As every other dataset route: no such dataset is 404. */
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset");
		return 0;
	}
	arr = json_array();
	if (sqlite3_prepare_v2(srv__db_handle(req->db),
			       "SELECT id FROM jobs WHERE dataset_id = ?1 ORDER BY created_at DESC, id"
			       " LIMIT 1000",
			       -1, &s, NULL) != SQLITE_OK) {
		json_decref(arr);
		srv_problem(res, 503, NULL, "cannot list jobs", NULL, NULL);
		return 0;
	}
	sqlite3_bind_text(s, 1, req->params[0], -1, SQLITE_STATIC);
	while (sqlite3_step(s) == SQLITE_ROW) {
		job_row j;

		if (job_load(req->db, col_text(s, 0), &j) == SRV_OK) {
			json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "id", j.id, "state", j.state,
							     "created_at", j.created_at));
			job_row_clear(&j);
		}
	}
	sqlite3_finalize(s);
	srv_json_reply(res, 200, json_pack("{s:o}", "jobs", arr));
	return 0;
}

int srv_h_job_cancel(srv_request *req, srv_response *res)
{
	job_row j;
	srv_jobs *jobs = req->ctx->jobs;
	int rc;

	if (!load_visible_job(req, res, &j))
		return 0;
	if (req->who->role < SRV_ROLE_ANALYST) {
		job_row_clear(&j);
		srv_problem(res, 403, NULL, "viewers cannot cancel jobs", NULL, NULL);
		return 0;
	}
	if (strcmp(j.state, "queued") == 0) {
		/* Never started: no data touched, the reservation is returned. */
		rc = job_finish(req->db, j.id, "queued", "cancelled", true, NULL, NULL, NULL,
				req->who->key_id);
		if (rc == SRV_OK) {
			job_row_clear(&j);
			job_load(req->db, req->params[0], &j);
			srv_json_reply(res, 200, job_json(req, &j));
			job_row_clear(&j);
			return 0;
		}
		job_row_clear(&j);
		if (rc != SRV_CONFLICT) {
			srv_problem(res, 503, NULL, "cannot cancel the job now", NULL, NULL);
			return 0;
		}
		job_load(req->db, req->params[0], &j); /* it started meanwhile */
	}
	if (strcmp(j.state, "running") == 0) {
		for (unsigned i = 0; jobs && i < jobs->n_workers; i++) {
			job_slot *s = &jobs->slots[i];

			pthread_mutex_lock(&s->lock);
			if (strcmp(s->id, j.id) == 0) {
				s->cancel_by_user = true;
				atomic_store(&s->cancel, true);
			}
			pthread_mutex_unlock(&s->lock);
		}
		srv_json_reply(res, 202, json_pack("{s:s, s:s, s:s}", "id", j.id, "state", "running",
						   "detail", "cancellation requested; the reservation is committed in full when the job stops"));
		job_row_clear(&j);
		return 0;
	}
	srv_problem(res, 409, NULL, "the job has already ended", NULL,
		    json_pack("{s:s}", "state", j.state));
	job_row_clear(&j);
	return 0;
}

int srv_h_job_model(srv_request *req, srv_response *res)
{
	job_row j;
	FILE *f = NULL;
	long size;

	if (!load_visible_job(req, res, &j))
		return 0;
	/* A cancelled or failed job's model is delivered too: it saw no more
	 * steps than the event its reservation committed in full covers
	 * (result.steps_done says how many). */
	if (!j.model_path) {
		srv_problem(res, 409, NULL,
			    "the job kept no model (it has not ended, or it ended before training "
			    "or while the server was down)",
			    NULL, json_pack("{s:s}", "state", j.state));
		goto out;
	}
	f = fopen(j.model_path, "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		srv_problem(res, 500, NULL, "the model file is missing", NULL, NULL);
		goto out;
	}
	res->body = malloc((size_t)size + 1);
	if (!res->body || fread(res->body, 1, (size_t)size, f) != (size_t)size) {
		free(res->body);
		res->body = NULL;
		srv_problem(res, 500, NULL, "cannot read the model file", NULL, NULL);
		goto out;
	}
	res->len = (size_t)size;
	res->status = 200;
	res->content_type = "application/octet-stream";
out:
	if (f)
		fclose(f);
	job_row_clear(&j);
	return 0;
}
