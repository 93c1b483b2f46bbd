/*
 * jobs_worker.c: the worker threads and the life of one job on them.
 *
 * A worker marks the job running, keys a ChaCha20 stream from getrandom,
 * loads the data, runs the trainer with the stream, writes the model file,
 * then commits the reservation and records the outcome in one transaction.
 * When getrandom fails the job fails before it loads anything, and the
 * reservation is released.  A start or end the database refuses is written
 * again until it is taken or the pool stops (jobs_retry.c): a worker that
 * gave up would leave the job queued or running for ever.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mech.h"
#include "jobs_pool.h"
#include "store.h"
#include "json.h"

static void save_progress(srv_jobs *jobs, const char *id, const trn_progress *p)
{
	srv_jobs__save_progress(jobs, id, srv_jobs__progress_json(p));
}

static int on_progress(const trn_progress *p, void *user)
{
	srv_jobs__run *run = user;

	srv_jobs__note_progress(run->jobs, run->slot, p, &run->last_save, &run->last_signal);
	return 0;
}

static void log_end_failed(const char *id)
{
	fprintf(stderr, "{\"level\":\"error\",\"msg\":\"cannot record the end of job %s\"}\n", id);
}

/* A job claimed while its dataset was archived: cancelled, its reservation
 * released (nothing was read). */
static void cancel_archived(srv_jobs *jobs, const char *id)
{
	int fin = srv_jobs__finish(jobs, id, "queued", "cancelled", true, NULL, NULL,
				   "the dataset was archived before the job started; nothing "
				   "was read, and the reservation was released",
				   NULL);

	/* SRV_CONFLICT: a user cancelled it meanwhile. */
	if (fin != SRV_OK && fin != SRV_CONFLICT)
		fprintf(stderr,
			"{\"level\":\"error\",\"msg\":\"cannot cancel job %s of an "
			"archived dataset\"}\n",
			id);
}

/* The claimed job's id in the slot; the cancel flags were the queued id's,
 * when another job was claimed in its place. */
static void slot_set_id(job_slot *slot, const char *id)
{
	pthread_mutex_lock(&slot->lock);
	if (strcmp(slot->id, id) != 0) {
		snprintf(slot->id, sizeof(slot->id), "%s", id);
		atomic_store(&slot->cancel, false);
		slot->cancel_by_user = false;
	}
	pthread_mutex_unlock(&slot->lock);
}

static void log_start_refused(const char *id)
{
	fprintf(stderr,
		"{\"level\":\"error\",\"msg\":\"cannot start job %s yet; trying again until "
		"the database takes it\"}\n",
		id[0] ? id : "(the oldest queued)");
}

/* Marks the slot's queued job running (on a shared database the oldest
 * queued job of any server), until the database takes the write or the
 * pool stops: the id left the in-memory queue, so a worker that gave up
 * would leave the job queued until a restart.  The worker keeps its
 * place meanwhile, so the jobs still start in the order they came.
 * A refused claim may have been written all the same (its COMMIT's
 * answer lost): the next try first asks whether that claim, by its
 * number, took a job, and runs it if so.  Claiming again instead would
 * find it running and leave it so with no worker, its reservation open,
 * until a restart or its lease ran out. */
static int claim_job(srv_jobs *jobs, job_slot *slot, char id[SRV_JOB_ID_BYTES])
{
	unsigned delay_ms = SRV_JOBS_RETRY_FIRST_MS;
	bool logged = false;
	int64_t seq = 0; /* the last claim's number; 0 before the first */
	char now[32];
	int rc;

	for (;;) {
		srv_db *db = srv_store_acquire(jobs->ctx->store);

		rc = seq ? srv__job_claim_took(db, jobs->owner, seq, id) : SRV_NOT_FOUND;
		if (rc == SRV_NOT_FOUND) {
			seq = atomic_fetch_add(&jobs->claims, 1) + 1;
			srv_now_text(now);
			rc = srv__job_claim(db, jobs->shared ? NULL : slot->id, jobs->owner, seq,
					    srv_jobs__lease_until(), now, id);
		}
		srv_store_release(jobs->ctx->store, db);
		if (!srv_jobs__write_refused(rc))
			return rc;
		if (!logged)
			log_start_refused(slot->id);
		logged = true;
		if (!srv_jobs__retry_wait(jobs, &delay_ms))
			return rc; /* still queued: the restart queues it again */
	}
}

/* Loads a job this worker marked running, until it can be read or the pool
 * stops (the restart rule then fails it, its reservation committed). */
static int load_claimed(srv_jobs *jobs, const char *id, srv_job_row *j)
{
	unsigned delay_ms = SRV_JOBS_RETRY_FIRST_MS;
	int rc;

	for (;;) {
		srv_db *db = srv_store_acquire(jobs->ctx->store);

		rc = srv__job_load(db, id, j);
		srv_store_release(jobs->ctx->store, db);
		if (!srv_jobs__write_refused(rc) || !srv_jobs__retry_wait(jobs, &delay_ms))
			return rc;
	}
}

/* Claims a job and marks it running under this server's lease: the slot's
 * queued id alone on SQLite; on a shared database the oldest queued job of
 * any server (the slot's id only woke the worker).  A job whose dataset
 * was archived while it queued is cancelled instead and its reservation
 * released.  SRV_OK when the job runs; `j` is then loaded and the caller
 * clears it. */
static int start_job(srv_ctx *ctx, srv_jobs *jobs, job_slot *slot, srv_job_row *j)
{
	char id[SRV_JOB_ID_BYTES];
	int rc;

	memset(j, 0, sizeof(*j));
	rc = claim_job(jobs, slot, id);
	if (rc == SRV_OK || rc == SRV_CONFLICT)
		slot_set_id(slot, id);
	if (rc == SRV_CONFLICT)
		cancel_archived(jobs, id);
	if (rc == SRV_OK)
		rc = load_claimed(jobs, id, j);
	/* Running, or cancelled and its reservation released. */
	if (id[0])
		srv_watch_signal(ctx->watch, rc == SRV_OK ? j->dataset_id : NULL,
				 rc == SRV_OK ? id : NULL);
	return rc;
}

/* Without secure randomness the job fails before it reads anything, so its
 * reservation goes back to the budget. */
static void fail_without_random(srv_jobs *jobs, const char *id)
{
	if (srv_jobs__finish(jobs, id, "running", "failed", true, NULL, NULL,
			     "no secure randomness is available; nothing was read, and the "
			     "reservation was released",
			     NULL) != SRV_OK)
		log_end_failed(id);
}

/* Reads the job's parameters, loads its data and trains.  p may point
 * into run->params, which the caller releases after the run. */
static int train_job(srv_jobs__run *run, struct job_data *jd, trn_dpsgd_result **result,
		     acct_error *err)
{
	trn_dpsgd_params p;
	int rc = srv__jobs_parse_params(run->params, &p, err);

	if (rc >= 0)
		rc = srv_jobs__load_job_data(run->jobs, run->j, run->params, jd, err);
	if (rc >= 0)
		rc = trn_dpsgd_run(&p, jd->train, jd->eval, run->stream, on_progress, run,
				   &run->slot->cancel, result, err);
	return rc;
}

/* Writes the trained model's file (run->model_path stays empty when it
 * cannot be kept) and returns the job's result text (NULL when out of
 * memory). */
static char *keep_result(srv_jobs__run *run, const trn_dpsgd_result *result,
			 const struct job_data *jd, acct_error *err)
{
	bool kept = srv_jobs__keep_model(run, result->model, err);
	json_t *res;

	res = json_pack("{s:I, s:I, s:I, s:f, s:b}", "steps_done",
			(json_int_t)result->steps_done, "steps_total",
			(json_int_t)result->steps_total, "examples_used",
			(json_int_t)result->examples_used, "train_seconds",
			result->train_seconds, "model_available", kept);
	if (res && isfinite(result->test_accuracy))
		json_object_set_new(res, "test_accuracy", json_real(result->test_accuracy));
	if (res && isfinite(result->test_loss))
		json_object_set_new(res, "test_loss", json_real(result->test_loss));
	if (res)
		json_object_set_new(res, "model_bytes", json_integer((json_int_t)run->model_len));
	return srv_jobs__result_with_metrics(res, result->model, jd->test, jd->schema);
}

/* Records the job's end and commits its reservation in full: the job has
 * touched data.  Until the database takes it (srv_jobs__finish): a worker
 * that went on would leave the job running for ever, its reservation open
 * and a cancel's promise ("committed in full when the job stops") unkept. */
static void end_job(srv_jobs *jobs, const char *id, const char *final_state,
		    const char *result_text, const char *error, const char *model_path)
{
	if (srv_jobs__finish(jobs, id, "running", final_state, false, NULL, result_text, error,
			     model_path[0] ? model_path : NULL) != SRV_OK)
		log_end_failed(id);
}

/* A trainer run with its own loading, progress and result (the file that
 * holds it); DP-SGD is train_job's. */
static srv_jobs__run_fn *other_run(const char *trainer)
{
	static const struct {
		const char *trainer;
		srv_jobs__run_fn *run;
	} runs[] = {
		{"ensemble", srv_jobs__run_ensemble},
		{"slmc", srv_jobs__run_slmc},
		{"label_em", srv_jobs__run_label_em},
	};

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
		if (strcmp(trainer, runs[i].trainer) == 0)
			return runs[i].run;
	return NULL;
}

/* A run's end state from a trainer's return (not an error): a cancel by a
 * request ends it cancelled, the shutdown's cancel failed. */
static const char *ended_state(job_slot *slot, int rc)
{
	if (rc != TRN_CANCELLED)
		return "succeeded";
	return srv_jobs__cancelled_by_user(slot) ? "cancelled" : "failed";
}

static void run_job(srv_jobs *jobs, job_slot *slot)
{
	srv_ctx *ctx = jobs->ctx;
	srv_job_row j;
	struct job_data jd = {0};
	trn_dpsgd_result *result = NULL;
	mech_rng *sys = NULL;
	srv_jobs__run run = {.jobs = jobs, .slot = slot, .j = &j};
	json_t *params = NULL;
	acct_error err;
	const char *final_state = "failed", *error = NULL;
	srv_jobs__run_fn *run_other;
	char msg[ACCT_ERROR_TEXT_BYTES + sizeof(" at ") + ACCT_ERROR_WHERE_BYTES];
	int rc;

	acct_error_init(&err);
	if (start_job(ctx, jobs, slot, &j) != SRV_OK)
		return; /* cancelled while queued, its dataset archived, or gone */
	/* The random source comes first: whether getrandom works says nothing
	 * about the data. */
	sys = mech_rng_new_system();
	run.stream = sys ? mech_rng_new_stream(sys) : NULL;
	if (!run.stream) {
		fail_without_random(jobs, slot->id);
		goto out;
	}
	/* From here on the job has touched, or may touch, data. */
	run.params = params = srv_json_parse_text(j.params);
	/* A pate job ends itself: it charges what ran in place of its
	 * reservation, in the transaction that ends it (jobs_pate.c). */
	if (strcmp(j.trainer, "pate") == 0) {
		srv_jobs__pate_job(&run);
		goto out;
	}
	run_other = other_run(j.trainer);
	if (run_other) {
		rc = run_other(&run, &err);
		if (rc >= 0)
			final_state = ended_state(slot, rc);
		goto ended;
	}
	rc = train_job(&run, &jd, &result, &err);
	/* The last step's progress, which the save interval may have skipped. */
	if (slot->has_progress)
		save_progress(jobs, slot->id, &slot->progress);
	if (rc >= 0 && result) {
		run.result = keep_result(&run, result, &jd, &err);
		final_state = ended_state(slot, rc);
	}
ended:
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "%s%s%s", err.text, err.where[0] ? " at " : "", err.where);
		error = msg;
	} else if (strcmp(final_state, "failed") == 0) {
		error = "the server stopped while the job ran";
	}
	end_job(jobs, slot->id, final_state, run.result, error, run.model_path);
out:
	/* Its end is committed, and with it its reservation. */
	srv_watch_signal(ctx->watch, j.dataset_id, slot->id);
	free(run.result);
	trn_dpsgd_result_free(result);
	srv_jobs__job_data_clear(&jd);
	json_decref(params);
	mech_rng_free(run.stream);
	mech_rng_free(sys);
	srv__job_row_clear(&j);
}

struct worker_arg {
	srv_jobs *jobs;
	unsigned index;
};

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	srv_jobs *jobs = wa->jobs;
	job_slot *slot = &jobs->slots[wa->index];

	free(wa);
	while (srv_jobs__take(jobs, slot)) {
		run_job(jobs, slot);

		pthread_mutex_lock(&slot->lock);
		slot->id[0] = '\0';
		pthread_mutex_unlock(&slot->lock);
	}
	return NULL;
}

/*
 * The start-up rule: running jobs failed (reservation committed), queued
 * jobs queued again, oldest first.  A running job that cannot be failed
 * stops the start (its reservation would stay open, and the rows would come
 * back in the next pass for ever).
 */
static int fail_interrupted(srv_db *db, srv_error *err)
{
	char running[64][48];
	unsigned n_running = 64;

	while (n_running == 64) {
		if (srv__job_ids_in_state(db, "running", running, 64, &n_running) != SRV_OK) {
			srv_error_set(err, SRV_DB_ERROR, "cannot read the jobs that were running: %s",
				 srv__job_db_error(db));
			return -1;
		}
		for (unsigned i = 0; i < n_running; i++) {
			if (srv__job_finish(db, running[i], "running", "failed", false, NULL,
					    SRV_JOBS_INTERRUPTED, NULL, "restart") != SRV_OK) {
				srv_error_set(err, SRV_DB_ERROR,
					 "cannot mark interrupted job %s failed and commit its reservation",
					 running[i]);
				return -1;
			}
		}
	}
	return 0;
}

static int requeue_at_start(srv_jobs *jobs, srv_error *err)
{
	srv_ctx *ctx = jobs->ctx;
	char ids[DPG_MAX_QUEUED_JOBS][48];
	unsigned n_queued = 0;
	srv_db *db = srv_store_acquire(ctx->store);
	/* On a shared database a running job may be another live server's:
	 * it is not failed here; the lease sweep (jobs_lease.c) fails it once
	 * its server has stopped renewing its lease. */
	int rc = srv_store_shared(ctx->store) ? 0 : fail_interrupted(db, err);

	if (rc == 0 && srv__job_ids_in_state(db, "queued", ids, DPG_MAX_QUEUED_JOBS, &n_queued) != SRV_OK)
		n_queued = 0;
	srv_store_release(ctx->store, db);
	for (unsigned i = 0; rc == 0 && i < n_queued; i++)
		srv_jobs__enqueue(jobs, ids[i]);
	return rc;
}

static void start_workers(srv_jobs *jobs, unsigned workers)
{
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
}

int srv_jobs_start(srv_ctx *ctx, unsigned workers, srv_jobs_table_fn load_table, srv_jobs **ret,
		   srv_error *err)
{
	srv_jobs *jobs = calloc(1, sizeof(*jobs));

	if (!jobs || workers == 0 || workers > DPG_MAX_JOB_WORKERS) {
		srv_error_set(err, SRV_DB_ERROR, "bad worker count");
		free(jobs);
		return -1;
	}
	jobs->ctx = ctx;
	jobs->load_table = load_table;
	pthread_mutex_init(&jobs->lock, NULL);
	pthread_cond_init(&jobs->wake, NULL);
	pthread_cond_init(&jobs->retry_wake, NULL);
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++)
		pthread_mutex_init(&jobs->slots[i].lock, NULL);
	if (srv_jobs__lease_start(jobs) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot start the job lease thread");
		srv_jobs_stop(jobs);
		return -1;
	}
	if (requeue_at_start(jobs, err) < 0) {
		srv_jobs_stop(jobs);
		return -1;
	}
	start_workers(jobs, workers);
	if (jobs->n_workers == 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot start job workers");
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
	pthread_cond_broadcast(&jobs->retry_wake);
	pthread_mutex_unlock(&jobs->lock);
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++)
		atomic_store(&jobs->slots[i].cancel, true);
	for (unsigned i = 0; i < jobs->n_workers; i++)
		pthread_join(jobs->threads[i], NULL);
	/* After the workers: their jobs' leases hold while the jobs end. */
	srv_jobs__lease_stop(jobs);
	pthread_cond_destroy(&jobs->lease_wake);
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++)
		pthread_mutex_destroy(&jobs->slots[i].lock);
	pthread_mutex_destroy(&jobs->lock);
	pthread_cond_destroy(&jobs->wake);
	pthread_cond_destroy(&jobs->retry_wake);
	free(jobs);
}

