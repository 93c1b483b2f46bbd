/*
 * jobs_pool.h: the pool's state, shared by the files of server/jobs/ only
 * (jobs_queue.c moves ids in and out of it, jobs_worker.c runs them).
 */
#ifndef SRV_JOBS_POOL_H
#define SRV_JOBS_POOL_H

#include <pthread.h>
#include "jobs.h"
#include "trn.h"

#define PROGRESS_SAVE_INTERVAL_S 2.0

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
	srv_jobs_table_fn load_table;
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

/* Queues a job id; false when the queue is full. */
bool srv_jobs__enqueue(srv_jobs *jobs, const char *id);

/* Waits for a queued id and moves it into `slot`; false when the pool
 * stops. */
bool srv_jobs__take(srv_jobs *jobs, job_slot *slot);

/* A progress report as the job row stores it and GET /v1/jobs/{id} shows. */
json_t *srv_jobs__progress_json(const trn_progress *p);

/* Loads the training table (and a public evaluation table where there is
 * one) that the dataset links; a hosted table through `tables`. */
int srv_jobs__load_data(srv_jobs_table_fn load_table, srv_table_cache *tables, srv_db *db, const char *dataset_id,
			const json_t *params, trn_dataset **ret_train, trn_dataset **ret_eval,
			acct_error *err);

#endif
