/*
 * jobs_progress.c: a running job's progress and how it was stopped, the
 * leaf every trainer's run in server/jobs/ calls (so that the runs and the
 * worker do not call each other in a loop).
 */
#include <stdlib.h>
#include <string.h>

#include "jobs_pool.h"
#include "json.h"
#include "store.h"

void srv_jobs__save_progress(srv_jobs *jobs, const char *id, json_t *o)
{
	char *text = o ? srv_json_dump(o) : NULL;
	srv_db *db;

	if (text) {
		db = srv_store_acquire(jobs->ctx->store);
		srv__job_save_progress(db, id, text);
		srv_store_release(jobs->ctx->store, db);
		/* Every trainer's saved progress (a phase's start, an epoch)
		 * wakes the long-polls on its job. */
		srv_watch_signal(jobs->ctx->watch, NULL, id);
	}
	free(text);
	json_decref(o);
}

bool srv_jobs__phase_progress(srv_jobs__run *run, void *live, const void *p, size_t size,
			      const char *phase)
{
	pthread_mutex_lock(&run->slot->lock);
	memcpy(live, p, size);
	run->slot->has_progress = true;
	pthread_mutex_unlock(&run->slot->lock);
	if (run->phase == phase)
		return false;
	run->phase = phase;
	return true;
}

bool srv_jobs__cancelled_by_user(job_slot *slot)
{
	pthread_mutex_lock(&slot->lock);
	bool by_user = slot->cancel_by_user;
	pthread_mutex_unlock(&slot->lock);
	return by_user;
}
