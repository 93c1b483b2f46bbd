/*
 * store_jobs.c: the SQL of training jobs and of dataset data links.
 * Everything that reads or writes the jobs and dataset_data tables is here;
 * nothing here builds a reply.  Stored JSON columns (params, event,
 * progress, result, a table's columns) are parsed back into jansson values,
 * which is all of jansson this file uses.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_internal.h"

void srv__job_row_clear(srv_job_row *j)
{
	free(j->params);
	free(j->event);
	free(j->progress);
	free(j->result);
	free(j->error);
	free(j->model_path);
	memset(j, 0, sizeof(*j));
}

static const char *col_text(srv__stmt *s, int i)
{
	const char *t = srv__sql_text(s, i);

	return t ? t : "";
}

/* A JSON column's text as stored (malloc'ed), or NULL for SQL NULL. */
static char *col_dup(srv__stmt *s, int i)
{
	return srv__sql_is_null(s, i) ? NULL : strdup(col_text(s, i));
}

int srv__job_load(srv_db *db, const char *id, srv_job_row *j)
{
	srv__stmt *s = srv__prepare(db,
				       "SELECT id, dataset_id, trainer, state, reservation_id, n_train,"
				       " params, event, progress, result, error, model_path, created_at,"
				       " coalesce(started_at, ''), coalesce(finished_at, ''), actor"
				       " FROM jobs WHERE id = ?1",
				       id);
	int rc;

	memset(j, 0, sizeof(*j));
	rc = srv__first_row(s);
	if (rc == SRV_OK) {
		snprintf(j->id, sizeof(j->id), "%s", col_text(s, 0));
		snprintf(j->dataset_id, sizeof(j->dataset_id), "%s", col_text(s, 1));
		snprintf(j->trainer, sizeof(j->trainer), "%s", col_text(s, 2));
		snprintf(j->state, sizeof(j->state), "%s", col_text(s, 3));
		snprintf(j->reservation_id, sizeof(j->reservation_id), "%s", col_text(s, 4));
		j->n_train = srv__sql_int64(s, 5);
		j->params = col_dup(s, 6);
		j->event = col_dup(s, 7);
		j->progress = col_dup(s, 8);
		j->result = col_dup(s, 9);
		if (!srv__sql_is_null(s, 10))
			j->error = strdup(col_text(s, 10));
		if (!srv__sql_is_null(s, 11))
			j->model_path = strdup(col_text(s, 11));
		snprintf(j->created_at, sizeof(j->created_at), "%s", col_text(s, 12));
		snprintf(j->started_at, sizeof(j->started_at), "%s", col_text(s, 13));
		snprintf(j->finished_at, sizeof(j->finished_at), "%s", col_text(s, 14));
		snprintf(j->actor, sizeof(j->actor), "%s", col_text(s, 15));
	}
	srv__sql_finalize(s);
	return rc;
}

/* Runs one statement with text parameters (NULL binds NULL). */
static int exec_text(srv_db *db, const char *sql, int n, const char *const *args)
{
	srv__stmt *s = srv__prepare(db, sql, NULL);

	for (int i = 0; s && i < n; i++)
		if (args[i])
			srv__sql_bind_text(s, i + 1, args[i]);
	if (srv__run(s) != SRV_OK)
		return SRV_DB_ERROR;
	return srv__sql_changes(srv__db_conn(db)) > 0 ? SRV_OK : SRV_NOT_FOUND;
}

/* Whether a <= b in every coordinate. */
static bool cost_at_most(const acct_cost *a, const acct_cost *b)
{
	for (unsigned i = 0; i < a->n; i++)
		if (!(a->v[i] <= (i < b->n ? b->v[i] : 0.0)))
			return false;
	return true;
}

/*
 * Charges what a job ran, in the caller's transaction, once its worst-case
 * reservation was released: one ledger row of kind charge.  `admitted` is
 * spent + reserved as they stood before the release.  The charge is taken
 * when the totals fit the budget, or when they are at most `admitted`: a
 * charge within its reservation spends nothing beyond what was admitted,
 * also after an admin lowered the budget while the job ran (the job then
 * ends, charged what ran, as a reservation committed then would).
 * SRV_CONFLICT otherwise, so that nothing is under-charged.
 */
static int charge_actual(srv_db *db, srv_dataset *ds, const srv_job_charge *c,
			 const acct_cost *admitted, const char *actor, const char *now)
{
	acct_filter f;
	acct_cost total;
	char *cost_text;
	int64_t seq;

	if (srv_dataset_filter(ds, &f, NULL) < 0)
		return SRV_DB_ERROR;
	total = ds->spent;
	acct_cost_add_up(&total, &ds->reserved);
	acct_cost_add_up(&total, c->cost);
	if (!acct_filter_within(&f, &total) && !cost_at_most(&total, admitted))
		return SRV_CONFLICT;
	cost_text = srv_cost_to_text(c->cost);
	if (!cost_text)
		return SRV_DB_ERROR;
	acct_cost_add_up(&ds->spent, c->cost);
	ds->charges++;
	seq = srv__ledger_insert(db, ds, "charge", c->event, cost_text, acct_filter_epsilon(&f, c->cost),
				 ds->accountant == ACCT_LEDGER_BASIC ? c->cost->v[1] : NAN, NULL,
				 c->note, actor, NULL, now);
	free(cost_text);
	return seq < 0 ? SRV_DB_ERROR : SRV_OK;
}

int srv__job_finish(srv_db *db, const char *job_id, const char *from_state, const char *state,
		    bool release, const char *result, const char *error, const char *model_path,
		    const char *actor)
{
	return srv__job_finish_charged(db, job_id, from_state, state, release, NULL, result, error,
				       model_path, actor, NULL);
}

/* The state, and with `lease_before` the lease, checked again where the
 * end is written: SRV_CONFLICT when the row moved meanwhile. */
static int write_end(srv_db *db, const char *job_id, const char *from_state, const char *state,
		     const char *result, const char *error, const char *model_path,
		     const char *now, const char *lease_before)
{
	const char *args[] = {job_id, state, result, error, model_path, now, from_state,
			      lease_before};
	int rc;

	/* On PostgreSQL another server's transaction may have moved the job
	 * (a cancel, a start, a sweep of its lease) before the caller locked
	 * its row (lock_job_row).  A job that left from_state, or whose lease
	 * its owner renewed, is not ended: everything the caller's
	 * transaction did is rolled back. */
	if (lease_before)
		rc = exec_text(db,
			       "UPDATE jobs SET state = ?2, result = ?3, error = ?4, model_path = ?5,"
			       " finished_at = ?6 WHERE id = ?1 AND state = ?7"
			       " AND coalesce(lease_until, 0) < CAST(?8 AS BIGINT)",
			       8, args);
	else
		rc = exec_text(db,
			       "UPDATE jobs SET state = ?2, result = ?3, error = ?4, model_path = ?5,"
			       " finished_at = ?6 WHERE id = ?1 AND state = ?7",
			       7, args);
	return rc == SRV_NOT_FOUND ? SRV_CONFLICT : rc;
}

/* Whether job j holds the end that finish_txn writes with `state` and
 * `finished_at`: an earlier try of the same end was committed. */
static bool ended_so(const srv_job_row *j, const char *state, const char *finished_at)
{
	return finished_at && strcmp(j->state, state) == 0 &&
	       strcmp(j->finished_at, finished_at) == 0;
}

/* On a shared database a model's bytes are stored before the end that
 * names them (srv_store_model_blob_put).  An end refused because the job
 * left its state meanwhile (another server's sweep of its lease failed
 * it) names them nowhere, and nothing else would ever remove them; those
 * a committed end named stay.  A failure leaves the bytes, as before. */
static void drop_unnamed_model(srv_db *db, const char *job_id)
{
	const char *args[] = {job_id};

	if (srv_db_shared(db))
		(void)exec_text(db,
				"DELETE FROM model_blobs WHERE job_id = ?1 AND NOT EXISTS"
				" (SELECT 1 FROM jobs WHERE id = ?1 AND model_path IS NOT NULL)",
				1, args);
}

/* Locks job id's row to the transaction's end (an UPDATE that changes
 * nothing: SQLite has no FOR UPDATE, and its write transaction holds the
 * whole file anyway).  SRV_OK, SRV_NOT_FOUND or SRV_DB_ERROR. */
static int lock_job_row(srv_db *db, const char *job_id)
{
	const char *args[] = {job_id};

	return exec_text(db, "UPDATE jobs SET state = state WHERE id = ?1", 1, args);
}

static int finish_txn(srv_db *db, const char *job_id, const char *from_state, const char *state,
		      bool release, const srv_job_charge *charge, const char *result,
		      const char *error, const char *model_path, const char *actor,
		      const char *finished_at, const char *lease_before)
{
	srv_job_row j = {0};
	srv_dataset ds;
	acct_cost admitted;
	char now[32];
	int rc;

	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	/* The job's row before its dataset's: a claim holds a queued job's
	 * row while it waits for the link lock (srv__job_claim), which an
	 * archive holds while it waits for the dataset's row; an end that
	 * held that row and waited for the job's would close the circle. */
	rc = lock_job_row(db, job_id);
	if (rc != SRV_DB_ERROR)
		rc = srv__job_load(db, job_id, &j);
	if (rc != SRV_OK)
		goto out;
	if (strcmp(j.state, from_state) != 0) {
		/* The COMMIT of an earlier try was written though reported
		 * failed: this end is done, its reservation closed once. */
		rc = ended_so(&j, state, finished_at) ? SRV_OK : SRV_CONFLICT;
		goto out;
	}
	rc = srv__lock_dataset(db, j.dataset_id);
	if (rc == SRV_OK)
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
	admitted = ds.spent;
	acct_cost_add_up(&admitted, &ds.reserved);
	rc = srv__close_reservation_locked(db, &ds, j.reservation_id, !release && !charge, actor,
					   now, NULL);
	/* An expired reservation was committed by the sweep already: fine,
	 * and nothing more is charged. */
	if (rc == SRV_CONFLICT)
		rc = SRV_OK;
	else if (rc == SRV_OK && charge && charge->event)
		rc = charge_actual(db, &ds, charge, &admitted, actor, now);
	if (rc == SRV_OK)
		rc = write_end(db, job_id, from_state, state, result, error, model_path,
			       finished_at ? finished_at : now, lease_before);
	if (rc == SRV_OK)
		rc = srv__commit(db);
#ifdef DPG_TESTING
	if (rc == SRV_OK && srv__commit_lost_for_tests(db, "DPGATE_TEST_LOSE_END_COMMIT"))
		rc = SRV_COMMIT_FAILED;
#endif
out:
	srv__rollback(db);
	srv__job_row_clear(&j);
	if (rc == SRV_CONFLICT && model_path)
		drop_unnamed_model(db, job_id);
	return rc;
}

int srv__job_finish_charged(srv_db *db, const char *job_id, const char *from_state,
			    const char *state, bool release, const srv_job_charge *charge,
			    const char *result, const char *error, const char *model_path,
			    const char *actor, const char *finished_at)
{
	return finish_txn(db, job_id, from_state, state, release, charge, result, error,
			  model_path, actor, finished_at, NULL);
}

int srv__job_fail_expired(srv_db *db, const char *job_id, int64_t now_s, const char *error,
			  const char *actor)
{
	char now_text[32];

	snprintf(now_text, sizeof(now_text), "%lld", (long long)now_s);
	/* Committed in full, as the start-up rule does: the job may have read
	 * data before its server stopped. */
	return finish_txn(db, job_id, "running", "failed", false, NULL, NULL, error, NULL, actor,
			  NULL, now_text);
}

int srv__job_insert(srv_db *db, const srv_job_new *job)
{
	char now[32], n_text[32];
	const char *args[] = {job->id, job->dataset_id, job->params_text, job->event_text,
			      n_text, job->reservation_id, job->actor, job->note, now,
			      job->trainer ? job->trainer : "dpsgd", job->data_link};

	srv_now_text(now);
	snprintf(n_text, sizeof(n_text), "%lld", (long long)job->n_train);
	/* The version is the one the checks read, not the link's now: a link
	 * replaced between the checks and this insert leaves the job pinned
	 * to the old version, and it never starts (srv__job_claim). */
	return exec_text(db,
			 "INSERT INTO jobs (id, dataset_id, trainer, params, event, n_train,"
			 " reservation_id, state, actor, note, created_at, data_link)"
			 " VALUES (?1, ?2, ?10, ?3, ?4, CAST(?5 AS INTEGER), ?6, 'queued', ?7, ?8,"
			 " ?9, ?11)",
			 11, args);
}

/* A data link's version (srv__data_link_get_version), over dataset_data's
 * columns. */
#define LINK_VERSION_SQL "created_at || ' ' || coalesce(path, '')"

int srv__job_count_queued(srv_db *db, int64_t *ret_n)
{
	srv__stmt *s = srv__prepare(db, "SELECT count(*) FROM jobs WHERE state = 'queued'", NULL);
	int rc = srv__first_row(s);

	if (rc == SRV_OK)
		*ret_n = srv__sql_int64(s, 0);
	srv__sql_finalize(s);
	return rc == SRV_OK ? SRV_OK : SRV_DB_ERROR;
}

/* The oldest queued job (or `want_id` when it is queued) into ret_id, its
 * row locked until the transaction ends; SRV_NOT_FOUND when there is none
 * that no other transaction holds. */
static int pick_queued(srv_db *db, const char *want_id, char ret_id[SRV_JOB_ID_BYTES],
		       char ret_dataset[DPG_MAX_ID_BYTES + 1])
{
	char sql[256];
	srv__stmt *s;
	int rc;

	/* SKIP LOCKED: a row another server is claiming is passed over, so two
	 * servers never take one job and neither waits for the other. */
	snprintf(sql, sizeof(sql),
		 "SELECT id, dataset_id FROM jobs WHERE state = 'queued'%s"
		 " ORDER BY created_at, id LIMIT 1%s",
		 want_id ? " AND id = ?1" : "", srv__db_conn(db)->drv->skip_locked);
	s = srv__prepare(db, sql, want_id);
	rc = srv__first_row(s);
	if (rc == SRV_OK) {
		snprintf(ret_id, SRV_JOB_ID_BYTES, "%s", col_text(s, 0));
		snprintf(ret_dataset, DPG_MAX_ID_BYTES + 1, "%s", col_text(s, 1));
	}
	srv__sql_finalize(s);
	return rc;
}

/* Whether dataset `id` is archived; false when it cannot be read (the
 * caller then takes the job's data link as the cause). */
static bool dataset_archived(srv_db *db, const char *id)
{
	srv__stmt *s = srv__prepare(db, "SELECT archived FROM datasets WHERE id = ?1", id);
	bool archived = srv__first_row(s) == SRV_OK && srv__sql_int64(s, 0) != 0;

	srv__sql_finalize(s);
	return archived;
}

/*
 * Ends a queued job whose data link no longer has the version its
 * submission checked: cancelled, its reservation released.  It read
 * nothing, and its error is fixed text: that the job ran or not depends
 * on the admin's upload alone, never on the rows of either table.
 */
static void cancel_replaced(srv_db *db, const char *job_id)
{
	srv__job_finish(db, job_id, "queued", "cancelled", true, NULL,
			"the dataset's data was replaced before the job started; nothing was "
			"read, and the reservation was released",
			NULL, "job");
}

int srv__job_claim(srv_db *db, const char *want_id, const char *owner, int64_t claim_seq,
		   int64_t lease_until, const char *now, char ret_id[SRV_JOB_ID_BYTES])
{
	char lease_text[32], seq_text[32], dataset[DPG_MAX_ID_BYTES + 1];
	char lock[DPG_MAX_ID_BYTES + 16];
	const char *args[] = {NULL, now, owner, lease_text, seq_text};
	bool replaced = false;
	int rc;

	ret_id[0] = '\0';
	snprintf(lease_text, sizeof(lease_text), "%lld", (long long)lease_until);
	snprintf(seq_text, sizeof(seq_text), "%lld", (long long)claim_seq);
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	rc = pick_queued(db, want_id, ret_id, dataset);
	if (rc != SRV_OK)
		goto out;
	args[0] = ret_id;
	/* An upload that holds the link (srv__data_link_hold) commits first,
	 * and the check below reads its version; one that comes after finds
	 * this job running and is refused.  So does an archive, which takes
	 * the lock too (srv_store_dataset_archive): the check reads it
	 * archived, or the archive commits after this job started. */
	srv__data_link_lock_name(dataset, lock);
	if (srv__lock_named(db, lock) != SRV_OK) {
		rc = SRV_DB_ERROR;
		goto out;
	}
	/* A job whose dataset was archived while it queued does not start:
	 * the archive's ledger row came first, so the job would read the data
	 * of a dataset that refuses all new work.  Nor does one whose data
	 * link was written again since its submission's checks read it: it
	 * would read a table nothing about the job was checked against (its
	 * kinds and row count may be private now; a dpsgd job's q = L/N took
	 * the old count as public).  A job from before versions were recorded
	 * has none, and does not start either. */
	rc = exec_text(db,
		       "UPDATE jobs SET state = 'running', started_at = ?2, owner = ?3,"
		       " lease_until = CAST(?4 AS BIGINT), claim_seq = CAST(?5 AS BIGINT)"
		       " WHERE id = ?1 AND state = 'queued'"
		       " AND NOT EXISTS (SELECT 1 FROM datasets d"
		       " WHERE d.id = jobs.dataset_id AND d.archived <> 0)"
		       " AND data_link = (SELECT " LINK_VERSION_SQL " FROM dataset_data"
		       " WHERE dataset_data.dataset_id = jobs.dataset_id)",
		       5, args);
	if (rc == SRV_NOT_FOUND) {
		rc = SRV_CONFLICT;
		replaced = !dataset_archived(db, dataset);
	}
	if ((rc == SRV_OK || rc == SRV_CONFLICT) && srv__commit(db) < 0)
		rc = SRV_DB_ERROR;
#ifdef DPG_TESTING
	else if (rc == SRV_OK && srv__commit_lost_for_tests(db, "DPGATE_TEST_LOSE_CLAIM_COMMIT"))
		rc = SRV_DB_ERROR;
#endif
out:
	srv__rollback(db);
	/* After the claim's commit, in the job's own end transaction: a user's
	 * cancel that came between wins (SRV_CONFLICT there), as it would
	 * against the caller's cancel of an archived dataset's job. */
	if (rc == SRV_CONFLICT && replaced)
		cancel_replaced(db, ret_id);
	return rc;
}

int srv__job_claim_took(srv_db *db, const char *owner, int64_t claim_seq,
			char ret_id[SRV_JOB_ID_BYTES])
{
	/* On the retry path only, and through jobs_by_state: the running jobs
	 * are few, and no index on claim_seq is needed. */
	srv__stmt *s = srv__prepare_int2(db,
					 "SELECT id FROM jobs WHERE owner = ?1 AND claim_seq = ?2"
					 " AND state = 'running'",
					 owner, claim_seq);
	int rc = srv__first_row(s);

	if (rc == SRV_OK)
		snprintf(ret_id, SRV_JOB_ID_BYTES, "%s", col_text(s, 0));
	srv__sql_finalize(s);
	return rc;
}

/* Up to `max` ids from s (NULL when it could not be prepared), whose ?2
 * is the limit (bound here) and whose first column is a job id; finalizes
 * s. */
static int read_ids(srv__stmt *s, char (*ids)[SRV_JOB_ID_BYTES], unsigned max, unsigned *ret_n)
{
	unsigned n = 0;

	*ret_n = 0;
	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_int64(s, 2, (int64_t)max);
	while (n < max && srv__sql_step(s) == SRV__SQL_ROW)
		snprintf(ids[n++], SRV_JOB_ID_BYTES, "%s", col_text(s, 0));
	srv__sql_finalize(s);
	*ret_n = n;
	return SRV_OK;
}

int srv__job_renew_leases(srv_db *db, const char *owner, const char (*ids)[SRV_JOB_ID_BYTES],
			  unsigned n, int64_t lease_until)
{
	char lease_text[32];
	const char *args[] = {NULL, owner, lease_text};
	int rc = SRV_OK;

	if (srv__write_allowed(db) != SRV_OK)
		return SRV_DB_ERROR;
	snprintf(lease_text, sizeof(lease_text), "%lld", (long long)lease_until);
	/* By id: a running row of this owner that no worker holds any more is
	 * left to expire, so that the sweep ends it. */
	for (unsigned i = 0; i < n && rc != SRV_DB_ERROR; i++) {
		args[0] = ids[i];
		rc = exec_text(db,
			       "UPDATE jobs SET lease_until = CAST(?3 AS BIGINT)"
			       " WHERE id = ?1 AND owner = ?2 AND state = 'running'",
			       3, args);
	}
	return rc == SRV_DB_ERROR ? rc : SRV_OK;
}

int srv__job_ids_lease_expired(srv_db *db, int64_t now_s, char (*ids)[SRV_JOB_ID_BYTES],
			       unsigned max, unsigned *ret_n)
{
	srv__stmt *s = srv__prepare(db,
				    "SELECT id FROM jobs WHERE state = 'running'"
				    " AND coalesce(lease_until, 0) < ?1 ORDER BY created_at, id LIMIT ?2",
				    NULL);

	if (s)
		srv__sql_bind_int64(s, 1, now_s);
	return read_ids(s, ids, max, ret_n);
}

int srv__job_request_cancel(srv_db *db, const char *job_id)
{
	const char *args[] = {job_id};
	int rc = srv__write_allowed(db);

	if (rc != SRV_OK)
		return rc;
	return exec_text(db,
			 "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND state = 'running'",
			 1, args);
}

int srv__job_ids_cancel_requested(srv_db *db, const char *owner, char (*ids)[SRV_JOB_ID_BYTES],
				  unsigned max, unsigned *ret_n)
{
	return read_ids(srv__prepare(db,
				     "SELECT id FROM jobs WHERE owner = ?1 AND state = 'running'"
				     " AND cancel_requested = 1 ORDER BY created_at, id LIMIT ?2",
				     owner),
			ids, max, ret_n);
}

void srv__job_save_progress(srv_db *db, const char *id, const char *progress_text)
{
	const char *args[] = {id, progress_text};

	if (srv__write_allowed(db) == SRV_OK)
		exec_text(db, "UPDATE jobs SET progress = ?2 WHERE id = ?1 AND state = 'running'",
			  2, args);
}

int srv__job_ids_in_state(srv_db *db, const char *state, char (*ids)[SRV_JOB_ID_BYTES],
			  unsigned max, unsigned *ret_n)
{
	return read_ids(srv__prepare(db,
				     "SELECT id FROM jobs WHERE state = ?1 ORDER BY created_at, id LIMIT ?2",
				     state),
			ids, max, ret_n);
}

const char *srv__job_db_error(srv_db *db)
{
	return srv__db_errmsg(db);
}

/* A dataset's jobs, newest first (created_at, then id, the order of
 * jobs_by_dataset), from the newest or from just after job ?3. */
#define JOBS_OF_DATASET_SQL(from)                                                   \
	"SELECT id, state, created_at FROM jobs WHERE dataset_id = ?1" from            \
	" ORDER BY created_at DESC, id LIMIT ?2"

struct job_lister {
	srv_job_listed_fn each;
	void *arg;
};

static int job_listed(srv__stmt *s, void *arg)
{
	struct job_lister *jl = arg;

	return jl->each(jl->arg, col_text(s, 0), col_text(s, 1), col_text(s, 2));
}

int srv__job_each_of_dataset(srv_db *db, const char *dataset_id, const char *after,
			     int64_t limit, srv_job_listed_fn each, void *arg, bool *ret_more)
{
	struct job_lister jl = {each, arg};

	return srv__db_page_after(
		db,
		after ? JOBS_OF_DATASET_SQL(" AND (created_at < (SELECT created_at FROM jobs WHERE id = ?3)"
					    " OR (created_at = (SELECT created_at FROM jobs WHERE id = ?3)"
					    " AND id > ?3))")
		      : JOBS_OF_DATASET_SQL(""),
		dataset_id, after, limit, job_listed, &jl, ret_more);
}

int srv__data_link_kind(srv_db *db, const char *dataset_id, char kind[16], char builtin[64])
{
	srv__stmt *s = srv__prepare(
		db, "SELECT kind, coalesce(builtin, '') FROM dataset_data WHERE dataset_id = ?1",
		dataset_id);

	kind[0] = builtin[0] = '\0';
	if (!s)
		return SRV_DB_ERROR;
	if (srv__sql_step(s) == SRV__SQL_ROW) {
		snprintf(kind, 16, "%s", col_text(s, 0));
		snprintf(builtin, 64, "%s", col_text(s, 1));
	}
	srv__sql_finalize(s);
	return SRV_OK;
}

int srv__data_link_rows(srv_db *db, const char *dataset_id, int64_t *ret, char **ret_columns)
{
	srv__stmt *s = srv__prepare(
		db, "SELECT rows, kind, columns FROM dataset_data WHERE dataset_id = ?1", dataset_id);
	int rc = SRV_NOT_FOUND;

	*ret_columns = NULL;
	if (!s)
		return SRV_DB_ERROR;
	if (srv__sql_step(s) == SRV__SQL_ROW) {
		*ret = srv__sql_int64(s, 0);
		if (strcmp(col_text(s, 1), "table") == 0)
			*ret_columns = col_dup(s, 2);
		rc = SRV_OK;
	}
	srv__sql_finalize(s);
	return rc;
}

/* srv__data_link_get's row, and with ret_version (may be NULL) the
 * link's version read in the same statement. */
static int link_read(srv_db *db, const char *dataset_id, srv_data_link *ret, char **ret_version)
{
	srv__stmt *s = srv__prepare(db,
				       "SELECT kind, builtin, rows, columns, bytes, created_at,"
				       " rows_public, schema_declared, " LINK_VERSION_SQL
				       " FROM dataset_data WHERE dataset_id = ?1",
				       dataset_id);
	int rc = SRV_NOT_FOUND;

	memset(ret, 0, sizeof(*ret));
	if (!s)
		return SRV_DB_ERROR;
	if (srv__sql_step(s) == SRV__SQL_ROW) {
		if (ret_version && !(*ret_version = strdup(col_text(s, 8)))) {
			srv__sql_finalize(s);
			return SRV_DB_ERROR;
		}
		snprintf(ret->kind, sizeof(ret->kind), "%s", col_text(s, 0));
		if (!srv__sql_is_null(s, 1))
			snprintf(ret->builtin, sizeof(ret->builtin), "%s", col_text(s, 1));
		ret->rows = srv__sql_int64(s, 2);
		ret->columns = col_dup(s, 3);
		ret->bytes = srv__sql_int64(s, 4);
		snprintf(ret->created_at, sizeof(ret->created_at), "%s", col_text(s, 5));
		ret->rows_public = srv__sql_int64(s, 6) != 0;
		ret->schema_declared = srv__sql_int64(s, 7) != 0;
		rc = SRV_OK;
	}
	srv__sql_finalize(s);
	return rc;
}

int srv__data_link_get(srv_db *db, const char *dataset_id, srv_data_link *ret)
{
	return link_read(db, dataset_id, ret, NULL);
}

int srv__data_link_get_version(srv_db *db, const char *dataset_id, srv_data_link *ret,
			       char **ret_version)
{
	return link_read(db, dataset_id, ret, ret_version);
}

int srv__data_link_builtin(srv_db *db, const char *dataset_id, const char *builtin,
			   const char *dir, int64_t rows, const char *actor, char **ret_old_table)
{
	char now[32], rows_text[32];
	const char *args[] = {dataset_id, builtin, dir, rows_text, actor, now};
	char *old_table = NULL;
	int rc = SRV_DB_ERROR;

	srv_now_text(now);
	snprintf(rows_text, sizeof(rows_text), "%lld", (long long)rows);
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	rc = srv__data_link_hold(db, dataset_id);
	if (rc != SRV_OK)
		goto out;
	rc = SRV_DB_ERROR;
	if (srv__table_file_in_txn(db, dataset_id, &old_table) != SRV_OK)
		goto out;
	if (exec_text(db,
		      "INSERT INTO dataset_data (dataset_id, kind, builtin, path, rows, actor,"
		      " created_at, rows_public, schema_declared)"
		      " VALUES (?1, 'builtin', ?2, ?3, CAST(?4 AS INTEGER), ?5, ?6, 1, 1)"
		      " ON CONFLICT (dataset_id) DO UPDATE SET kind = 'builtin',"
		      " builtin = ?2, path = ?3, rows = CAST(?4 AS INTEGER), actor = ?5,"
		      " created_at = ?6, rows_public = 1, schema_declared = 1",
		      6, args) != SRV_OK)
		goto out;
	if (srv__commit(db) < 0)
		goto out;
	*ret_old_table = old_table;
	old_table = NULL;
	rc = SRV_OK;
out:
	srv__rollback(db);
	free(old_table);
	return rc;
}
