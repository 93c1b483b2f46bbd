/*
 * jobs_retry.c: writing a job's start or end again until the database
 * takes it, the leaf the worker and the pate job's end call.
 *
 * A worker that gives up on such a write loses the job: a claim refused
 * leaves it queued with its id out of the in-memory queue, so nothing
 * starts it again before a restart; an end refused leaves it running with
 * no worker, its reservation open, and on a shared database its lease
 * renewed as long as this server lives.  The refusals that pass (a file
 * moved away and back, a disk full, a lock held too long, a PostgreSQL
 * server restarting) are waited out instead, with a timed wait that
 * doubles from SRV_JOBS_RETRY_FIRST_MS to SRV_JOBS_RETRY_MAX_MS and ends
 * at once when the pool stops; the restart rule then ends what is left.
 * A refusal reported by a COMMIT may come from one that was written all
 * the same, so a try must recognise its own earlier write: the claim by
 * its number (srv__job_claim_took, in jobs_worker.c), the end by its end
 * time, the same on every try (srv_jobs__finish).
 */
#include <stdio.h>
#include <time.h>

#include "jobs_pool.h"
#include "store.h"

bool srv_jobs__retry_wait(srv_jobs *jobs, unsigned *delay_ms)
{
	unsigned ms = *delay_ms < SRV_JOBS_RETRY_MAX_MS ? *delay_ms : SRV_JOBS_RETRY_MAX_MS;
	struct timespec until;
	bool go_on;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&jobs->lock);
	while (!jobs->stopping &&
	       pthread_cond_timedwait(&jobs->retry_wake, &jobs->lock, &until) == 0)
		;
	go_on = !jobs->stopping;
	pthread_mutex_unlock(&jobs->lock);
	*delay_ms = ms * 2 < SRV_JOBS_RETRY_MAX_MS ? ms * 2 : SRV_JOBS_RETRY_MAX_MS;
	return go_on;
}

bool srv_jobs__write_refused(int rc)
{
	return rc == SRV_DB_ERROR || rc == SRV_DB_MOVED || rc == SRV_COMMIT_FAILED;
}

static void log_finish(const char *id, bool recorded)
{
	fprintf(stderr,
		recorded ? "{\"level\":\"info\",\"msg\":\"recorded the end of job %s\"}\n" :
			   "{\"level\":\"error\",\"msg\":\"cannot record the end of job %s yet;"
			   " trying again until the database takes it\"}\n",
		id);
}

int srv_jobs__finish(srv_jobs *jobs, const char *id, const char *from_state, const char *state,
		     bool release, const srv_job_charge *charge, const char *result,
		     const char *error, const char *model_path)
{
	unsigned delay_ms = SRV_JOBS_RETRY_FIRST_MS;
	bool refused = false;
	char finished_at[32];
	int rc;

	/* One end time for every try: a try that finds the job already ended
	 * with it knows that an earlier try was written although its COMMIT
	 * was reported failed, and answers SRV_OK rather than a conflict. */
	srv_now_text(finished_at);
	for (;;) {
		srv_db *db = srv_store_acquire(jobs->ctx->store);

		rc = srv__job_finish_charged(db, id, from_state, state, release, charge, result,
					     error, model_path, "job", finished_at);
		/* The connection goes back between tries: requests go on
		 * meanwhile, and a broken one is made again (srv_store_acquire). */
		srv_store_release(jobs->ctx->store, db);
		if (!srv_jobs__write_refused(rc))
			break;
		if (!refused)
			log_finish(id, false);
		refused = true;
		if (!srv_jobs__retry_wait(jobs, &delay_ms))
			break;
	}
	if (refused && rc == SRV_OK)
		log_finish(id, true);
	return rc;
}
