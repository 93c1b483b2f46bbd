/*
 * jobs.h: the training-job queue and worker pool.  Job ids wait in a
 * bounded in-memory queue (DPG_MAX_QUEUED_JOBS); each worker thread takes
 * one, runs it to its end and records the outcome in the store.  The job
 * rows, not this queue, are the durable state: the start-up rule in
 * srv_jobs.h rebuilds the queue from them.
 */
#ifndef SRV_JOBS_JOBS_H
#define SRV_JOBS_JOBS_H

#include "srv.h"

typedef struct srv_jobs srv_jobs;

/*
 * Applies the start-up rule (srv_jobs.h) and starts `workers` worker
 * threads.  Returns 0, or -1 with a message in errbuf.
 */
int srv_jobs_start(srv_ctx *ctx, unsigned workers, srv_jobs **ret, char *errbuf,
		   size_t errbuf_size);

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

/* The freshest progress of job `id` if a worker runs it (a new object),
 * else NULL.  Accepts a NULL pool. */
json_t *srv_jobs_live_progress(srv_jobs *jobs, const char *id);

/* Asks the worker running job `id`, if any, to stop it as cancelled by its
 * user.  Accepts a NULL pool. */
void srv_jobs_cancel_running(srv_jobs *jobs, const char *id);

#endif
