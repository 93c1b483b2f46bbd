/*
 * jobs_queue.c: the pool's bounded queue of job ids, the claims submissions
 * hold on its places, and what the route handlers read or signal in the
 * workers' slots (live progress, cancellation) and the trainers' runs
 * write there.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "jobs_pool.h"

bool srv_jobs__enqueue(srv_jobs *jobs, const char *id)
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

bool srv_jobs_claim(srv_jobs *jobs)
{
	bool ok;

	pthread_mutex_lock(&jobs->lock);
	/* On a shared database the entries here only wake this server's
	 * workers: a job submitted here may run on any server, and its entry
	 * stays until a worker here takes it, so they bound nothing.  The
	 * submission counts the database's queue instead (api_jobs_routes.c). */
	ok = jobs->shared || jobs->count + jobs->claimed < DPG_MAX_QUEUED_JOBS;
	if (ok)
		jobs->claimed++;
	pthread_mutex_unlock(&jobs->lock);
	return ok;
}

void srv_jobs_unclaim(srv_jobs *jobs)
{
	pthread_mutex_lock(&jobs->lock);
	jobs->claimed--;
	pthread_mutex_unlock(&jobs->lock);
}

void srv_jobs_enqueue_claimed(srv_jobs *jobs, const char *id)
{
	pthread_mutex_lock(&jobs->lock);
	jobs->claimed--;
	/* The id was made by the submission route: 28 characters, which an
	 * entry holds.  Only a shared database's queue can be full here (its
	 * places were not claimed); its entries are wake-ups, each making a
	 * worker claim the database's oldest queued job, and idle workers look
	 * there every DPG_JOB_POLL_S anyway, so a full one needs no more. */
	if (jobs->count < DPG_MAX_QUEUED_JOBS) {
		snprintf(jobs->queue[(jobs->head + jobs->count) % DPG_MAX_QUEUED_JOBS],
			 sizeof(jobs->queue[0]), "%s", id);
		jobs->count++;
	}
	pthread_cond_signal(&jobs->wake);
	pthread_mutex_unlock(&jobs->lock);
}

void srv_jobs_forget(srv_jobs *jobs, const char *id)
{
	unsigned kept = 0;

	if (!jobs)
		return;
	pthread_mutex_lock(&jobs->lock);
	/* The entries after it move up one place, in order. */
	for (unsigned i = 0; i < jobs->count; i++) {
		char *from = jobs->queue[(jobs->head + i) % DPG_MAX_QUEUED_JOBS];

		if (strcmp(from, id) == 0)
			continue;
		if (kept != i)
			memcpy(jobs->queue[(jobs->head + kept) % DPG_MAX_QUEUED_JOBS], from,
			       sizeof(jobs->queue[0]));
		kept++;
	}
	jobs->count = kept;
	pthread_mutex_unlock(&jobs->lock);
}

json_t *srv_jobs__progress_json(const trn_progress *p)
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

bool srv_jobs__take(srv_jobs *jobs, job_slot *slot)
{
	struct timespec until;
	bool timed_out = false;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += DPG_JOB_POLL_S;
	pthread_mutex_lock(&jobs->lock);
	while (!jobs->stopping && jobs->count == 0 && !timed_out) {
		if (!jobs->shared)
			pthread_cond_wait(&jobs->wake, &jobs->lock);
		else
			timed_out = pthread_cond_timedwait(&jobs->wake, &jobs->lock, &until) != 0;
	}
	if (jobs->stopping) {
		pthread_mutex_unlock(&jobs->lock);
		return false;
	}
	pthread_mutex_lock(&slot->lock);
	if (jobs->count == 0)
		slot->id[0] = '\0'; /* timed out: a job queued elsewhere, maybe */
	else
		memcpy(slot->id, jobs->queue[jobs->head], sizeof(slot->id));
	atomic_store(&slot->cancel, false);
	slot->cancel_by_user = false;
	slot->has_progress = false;
	slot->ensemble = false;
	slot->slmc = false;
	slot->pate = false;
	pthread_mutex_unlock(&slot->lock);
	if (jobs->count > 0) {
		jobs->head = (jobs->head + 1) % DPG_MAX_QUEUED_JOBS;
		jobs->count--;
	}
	pthread_mutex_unlock(&jobs->lock);
	return true;
}

void srv_jobs__note_progress(srv_jobs *jobs, job_slot *slot, const trn_progress *p,
			     double *last_save, double *last_signal)
{
	struct timespec ts;
	double t;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
	pthread_mutex_lock(&slot->lock);
	slot->progress = *p;
	slot->has_progress = true;
	pthread_mutex_unlock(&slot->lock);
	if (p->evaluated || t - *last_signal >= PROGRESS_SIGNAL_INTERVAL_S) {
		srv_watch_signal(jobs->ctx->watch, NULL, slot->id);
		*last_signal = t;
	}
	if (p->evaluated || t - *last_save >= PROGRESS_SAVE_INTERVAL_S) {
		srv_jobs__save_progress(jobs, slot->id, srv_jobs__progress_json(p));
		*last_save = t;
	}
}

json_t *srv_jobs_live_progress(srv_jobs *jobs, const char *id)
{
	json_t *progress = NULL;

	for (unsigned i = 0; jobs && i < jobs->n_workers; i++) {
		job_slot *s = &jobs->slots[i];

		pthread_mutex_lock(&s->lock);
		if (strcmp(s->id, id) == 0 && s->has_progress) {
			json_decref(progress);
			progress = s->pate     ? srv_jobs__pate_progress_json(&s->pate_progress) :
				   s->ensemble ? srv_jobs__ensemble_progress_json(&s->ens) :
				   s->slmc     ? srv_jobs__slmc_progress_json(&s->slmc_progress) :
						 srv_jobs__progress_json(&s->progress);
		}
		pthread_mutex_unlock(&s->lock);
	}
	return progress;
}

void srv_jobs_cancel_running(srv_jobs *jobs, const char *id)
{
	for (unsigned i = 0; jobs && i < jobs->n_workers; i++) {
		job_slot *s = &jobs->slots[i];

		pthread_mutex_lock(&s->lock);
		if (strcmp(s->id, id) == 0) {
			s->cancel_by_user = true;
			atomic_store(&s->cancel, true);
		}
		pthread_mutex_unlock(&s->lock);
	}
}
