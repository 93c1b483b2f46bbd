/*
 * http_watch.c: the wake-up hub of long-polls (GET ...?wait=S with
 * If-None-Match).  A long-poll whose resource has not changed is
 * suspended (libmicrohttpd suspend/resume): it holds its connection but no
 * worker thread and no database connection, and is resumed, to read again,
 * by a signal for its dataset or job, by its deadline (then 304), or every
 * DPG_LONG_POLL_RECHECK_S as a safety net (a reservation that expires
 * changes a budget without any commit).
 *
 * No wake-up is missed: a waiter is armed before it reads, and a signal
 * (sent after the commit returned) marks every armed waiter it concerns;
 * one that is marked when it comes to suspend reads again instead.  A
 * signal before the arm precedes the read, which then sees the commit.
 * Wake-ups may be spurious (a signal for every dataset when the route
 * names none): the waiter reads again and, unchanged, suspends again.
 *
 * One mutex orders arm, suspend, signal and resume: a connection is
 * resumed only while suspended, never twice.  libmicrohttpd calls none of
 * dpgate's callbacks holding its own locks, so taking them under this one
 * (in MHD_suspend_connection and MHD_resume_connection) cannot deadlock.
 * On a shared (PostgreSQL) database, commits through other servers come
 * from the store's listener (srv_store_listen_start), which signals this
 * hub as a local commit does (srv_watch_store_changed); see store_pg.c.
 * Rejected: polling the database from the waiting thread (holds a thread
 * and a connection per waiter), SQLite's commit hook (runs before the
 * commit is durable, inside the writer).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "http_watch.h"

struct srv_watch {
	pthread_mutex_t lock;
	pthread_cond_t tick;      /* CLOCK_MONOTONIC: the timer's sleep */
	pthread_t timer;
	bool timer_started, stop, closed;
	srv_list waiters;
	unsigned max_waiters;
	atomic_uint armed;        /* read without the lock by signal's fast path */
};

/* The waiter whose link is l (its first member); NULL for NULL. */
static srv_waiter *waiter_of(srv_link *l)
{
	return (srv_waiter *)l;
}

static struct timespec now_plus(unsigned seconds)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += seconds;
	return t;
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Resumes a suspended waiter (lock held); it stays armed. */
static void resume(srv_waiter *wt)
{
	wt->suspended = false;
	MHD_resume_connection(wt->conn);
	wt->conn = NULL;
}

/* The timer: resumes waiters at their deadline or recheck time. */
static void *timer_main(void *arg)
{
	srv_watch *w = arg;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		struct timespec now, next = now_plus(DPG_LONG_POLL_RECHECK_S);

		clock_gettime(CLOCK_MONOTONIC, &now);
		for (srv_waiter *wt = waiter_of(w->waiters.head); wt; wt = waiter_of(wt->link.next)) {
			if (!wt->suspended)
				continue;
			if (!before(&now, &wt->deadline) || !before(&now, &wt->recheck)) {
				resume(wt);
				continue;
			}
			if (before(&wt->deadline, &next))
				next = wt->deadline;
			if (before(&wt->recheck, &next))
				next = wt->recheck;
		}
		pthread_cond_timedwait(&w->tick, &w->lock, &next);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

srv_watch *srv_watch_new(unsigned max_waiters)
{
	srv_watch *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;

	if (!w)
		return NULL;
	w->max_waiters = max_waiters;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->tick, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->timer, NULL, timer_main, w) != 0) {
		srv_watch_free(w);
		return NULL;
	}
	w->timer_started = true;
	return w;
}

void srv_watch_free(srv_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->tick);
	pthread_mutex_unlock(&w->lock);
	if (w->timer_started)
		pthread_join(w->timer, NULL);
	pthread_cond_destroy(&w->tick);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

int srv_watch_arm(srv_watch *w, srv_waiter *wt, srv_revalidate kind, const char *id,
		  unsigned wait_s)
{
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	if (w->closed) {
		rc = -2;
		goto out;
	}
	wt->signalled = false;
	if (wt->armed)
		goto out;
	if (atomic_load(&w->armed) >= w->max_waiters) {
		rc = -1;
		goto out;
	}
	wt->kind = kind;
	srv_strcopy(wt->id, sizeof(wt->id), id ? id : "");
	wt->deadline = now_plus(wait_s);
	srv_list_push_front(&w->waiters, &wt->link);
	wt->armed = true;
	atomic_fetch_add(&w->armed, 1);
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

bool srv_watch_expired(srv_watch *w, const srv_waiter *wt)
{
	struct timespec now;
	bool expired;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&w->lock);
	expired = !before(&now, &wt->deadline);
	pthread_mutex_unlock(&w->lock);
	return expired;
}

int srv_watch_suspend(srv_watch *w, srv_waiter *wt, void *conn)
{
	int rc = -1;

	pthread_mutex_lock(&w->lock);
	if (wt->armed && !wt->signalled && !w->closed) {
		wt->conn = conn;
		wt->suspended = true;
		wt->recheck = now_plus(DPG_LONG_POLL_RECHECK_S);
		MHD_suspend_connection(conn);
		/* The timer may sleep past this waiter's deadline. */
		pthread_cond_signal(&w->tick);
		rc = 0;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void srv_watch_disarm(srv_watch *w, srv_waiter *wt)
{
	if (!w || !wt)
		return;
	pthread_mutex_lock(&w->lock);
	if (wt->armed) {
		srv_list_unlink(&w->waiters, &wt->link);
		wt->armed = false;
		atomic_fetch_sub(&w->armed, 1);
	}
	pthread_mutex_unlock(&w->lock);
}

void srv_watch_close(srv_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->closed = true;
	for (srv_waiter *wt = waiter_of(w->waiters.head); wt; wt = waiter_of(wt->link.next))
		if (wt->suspended)
			resume(wt);
	pthread_mutex_unlock(&w->lock);
}

/* Whether a signal for (dataset_id, job_id) concerns the waiter; both NULL
 * concerns every waiter. */
static bool concerns(const srv_waiter *wt, const char *dataset_id, const char *job_id)
{
	if (!dataset_id && !job_id)
		return true;
	switch (wt->kind) {
	case SRV_TAG_DATASETS: return dataset_id != NULL;
	case SRV_TAG_DATASET: return dataset_id && strcmp(wt->id, dataset_id) == 0;
	case SRV_TAG_JOB: return job_id && strcmp(wt->id, job_id) == 0;
	default: return true;
	}
}

void srv_watch_signal(srv_watch *w, const char *dataset_id, const char *job_id)
{
	/* Nothing armed: no lock.  An arm after this load reads after the
	 * commit that preceded the signal (see the file's comment). */
	if (!w || atomic_load(&w->armed) == 0)
		return;
	pthread_mutex_lock(&w->lock);
	for (srv_waiter *wt = waiter_of(w->waiters.head); wt; wt = waiter_of(wt->link.next)) {
		if (!concerns(wt, dataset_id, job_id))
			continue;
		if (wt->suspended)
			resume(wt);
		else
			wt->signalled = true;
	}
	pthread_mutex_unlock(&w->lock);
}

unsigned srv_watch_count(srv_watch *w)
{
	return w ? atomic_load(&w->armed) : 0;
}

void srv_watch_store_changed(void *watch, const char *dataset_id)
{
	srv_watch_signal(watch, dataset_id, NULL);
}
