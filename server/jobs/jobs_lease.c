/*
 * jobs_lease.c: job leases on a shared database.
 *
 * Several servers share one PostgreSQL database and one queue of jobs.  A
 * running job names the server that claimed it (its instance id) and holds
 * a lease that this server's lease thread renews every
 * DPG_JOB_LEASE_RENEW_S.  A server that dies stops renewing; once the lease
 * has run out, the next sweep of any server applies the restart rule to
 * the job (failed, reservation committed in full), in a transaction that
 * checks the lease again where it writes, so that it happens once however
 * many servers sweep at the same moment.  The same thread stops this
 * server's jobs whose cancel was asked through another server (the job
 * row's cancel_requested).  On SQLite the one server owns
 * every job and its start-up rule alone applies: no thread runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "jobs_pool.h"
#include "store.h"

/* Expired jobs handled per sweep; the next sweep takes the rest. */
#define LEASE_SWEEP_BATCH 64

int64_t srv_jobs__lease_until(void)
{
	return (int64_t)time(NULL) + DPG_JOB_LEASE_S;
}

/* host:pid:random, so that a restarted server (same host, maybe the same
 * pid) never renews the leases of jobs its previous run left. */
static void name_owner(srv_jobs *jobs)
{
	char host[64] = "";
	unsigned char r[8] = {0};
	char hex[sizeof(r) * 2 + 1];

	if (gethostname(host, sizeof(host) - 1) != 0)
		snprintf(host, sizeof(host), "unknown");
	/* Not a secret: only tells instances apart, so a short read is
	 * harmless (the pid and host still do). */
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r[0] = (unsigned char)time(NULL);
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	snprintf(jobs->owner, sizeof(jobs->owner), "%s:%ld:%s", host, (long)getpid(), hex);
}

static void log_lease(const char *what, const char *id)
{
	fprintf(stderr, "{\"level\":\"error\",\"msg\":\"%s%s\"}\n", what, id);
}

/* The restart rule for every job whose lease ran out.  SRV_CONFLICT from
 * a job means another server's sweep failed it first, or its owner renewed
 * the lease after it was read: nothing to do. */
static void sweep_expired(srv_jobs *jobs, srv_db *db)
{
	char ids[LEASE_SWEEP_BATCH][SRV_JOB_ID_BYTES];
	unsigned n = 0;
	int64_t now = (int64_t)time(NULL);

	if (srv__job_ids_lease_expired(db, now, ids, LEASE_SWEEP_BATCH, &n) != SRV_OK)
		return;
	for (unsigned i = 0; i < n; i++) {
		int rc = srv__job_fail_expired(db, ids[i], now, SRV_JOBS_INTERRUPTED, "restart");

		if (rc == SRV_OK)
			srv_watch_signal(jobs->ctx->watch, NULL, ids[i]);
		else if (rc != SRV_CONFLICT)
			log_lease("cannot fail job whose lease expired: ", ids[i]);
	}
}

/* Stops this server's jobs whose cancel a user asked for, through any
 * server (srv__job_request_cancel); the worker's stop path then ends them
 * as cancelled, their reservation committed in full. */
static void cancel_requested(srv_jobs *jobs, srv_db *db)
{
	char ids[LEASE_SWEEP_BATCH][SRV_JOB_ID_BYTES];
	unsigned n = 0;

	if (srv__job_ids_cancel_requested(db, jobs->owner, ids, LEASE_SWEEP_BATCH, &n) != SRV_OK) {
		log_lease("cannot read the cancels asked of this server's jobs", "");
		return;
	}
	for (unsigned i = 0; i < n; i++)
		srv_jobs_cancel_running(jobs, ids[i]);
}

/* The ids of the jobs this server's workers hold now, into ids; how many. */
static unsigned held_ids(srv_jobs *jobs, char (*ids)[SRV_JOB_ID_BYTES])
{
	unsigned n = 0;

	/* Every slot, not n_workers: the thread starts before the workers. */
	for (unsigned i = 0; i < DPG_MAX_JOB_WORKERS; i++) {
		job_slot *s = &jobs->slots[i];

		pthread_mutex_lock(&s->lock);
		if (s->id[0])
			snprintf(ids[n++], SRV_JOB_ID_BYTES, "%s", s->id);
		pthread_mutex_unlock(&s->lock);
	}
	return n;
}

/* Renews the leases of the jobs this server's workers hold, and no other:
 * a running row of this owner that no worker holds (its start or end
 * could not be written) runs out of lease and is swept like a dead
 * server's. */
static void renew_held(srv_jobs *jobs, srv_db *db)
{
	char ids[DPG_MAX_JOB_WORKERS][SRV_JOB_ID_BYTES];
	unsigned n = held_ids(jobs, ids);

	if (srv__job_renew_leases(db, jobs->owner, (const char (*)[SRV_JOB_ID_BYTES])ids, n,
				  srv_jobs__lease_until()) != SRV_OK)
		log_lease("cannot renew the leases of this server's jobs", "");
}

static void *lease_main(void *arg)
{
	srv_jobs *jobs = arg;
	struct timespec until;

	pthread_mutex_lock(&jobs->lock);
	while (!jobs->stopping) {
		srv_db *db;

		pthread_mutex_unlock(&jobs->lock);
		db = srv_store_acquire(jobs->ctx->store);
		renew_held(jobs, db);
		cancel_requested(jobs, db);
		sweep_expired(jobs, db);
		srv_store_release(jobs->ctx->store, db);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += DPG_JOB_LEASE_RENEW_S;
		pthread_mutex_lock(&jobs->lock);
		while (!jobs->stopping &&
		       pthread_cond_timedwait(&jobs->lease_wake, &jobs->lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&jobs->lock);
	return NULL;
}

int srv_jobs__lease_start(srv_jobs *jobs)
{
	name_owner(jobs);
	pthread_cond_init(&jobs->lease_wake, NULL);
	jobs->shared = srv_store_shared(jobs->ctx->store);
	if (!jobs->shared)
		return 0;
	if (pthread_create(&jobs->lease_thread, NULL, lease_main, jobs) != 0)
		return -1;
	jobs->lease_started = true;
	return 0;
}

void srv_jobs__lease_stop(srv_jobs *jobs)
{
	pthread_mutex_lock(&jobs->lock);
	pthread_cond_broadcast(&jobs->lease_wake);
	pthread_mutex_unlock(&jobs->lock);
	if (jobs->lease_started)
		pthread_join(jobs->lease_thread, NULL);
	jobs->lease_started = false;
}
