/*
 * http_watch.h: the long-polls suspended until what they read changes (see
 * http_watch.c for how a wake-up cannot be missed).  Private to http/; the
 * one call other layers make, srv_watch_signal, is in http.h.
 */
#ifndef SRV_WATCH_H
#define SRV_WATCH_H

#include <stdbool.h>
#include <time.h>

#include "http.h"

/* One long-poll, inside its request's state; the hub links it while it is
 * armed.  Its fields are the hub's, under the hub's lock. */
typedef struct srv_waiter {
	srv_link link;                  /* first: in the hub's list while armed */
	srv_revalidate kind;            /* what it waits for */
	char id[DPG_MAX_ID_BYTES + 1];  /* the dataset or job; "" for the list */
	struct timespec deadline;       /* its 304, CLOCK_MONOTONIC */
	struct timespec recheck;        /* its next read while nothing woke it */
	void *conn;                     /* the suspended MHD_Connection */
	bool armed, suspended, signalled;
} srv_waiter;

/*
 * Arms a long-poll before it reads its resource, so that a commit from
 * then on marks it (srv_watch_suspend then refuses to suspend it).  The
 * first call links it with its kind, id and deadline (now + wait_s); a
 * call for an armed waiter (after a resume) only clears its mark.
 * Returns 0, -1 when max_waiters are armed, -2 when the hub is closed.
 */
int srv_watch_arm(srv_watch *w, srv_waiter *wt, srv_revalidate kind, const char *id,
		  unsigned wait_s);

/* Whether the armed waiter's deadline has passed. */
bool srv_watch_expired(srv_watch *w, const srv_waiter *wt);

/*
 * Suspends the armed waiter's connection `conn` (an MHD_Connection, from
 * inside its access handler) until a signal, its deadline or the recheck.
 * Returns 0 when suspended; -1, nothing done, when a signal came since
 * srv_watch_arm (read again) or the hub is closed.
 */
int srv_watch_suspend(srv_watch *w, srv_waiter *wt, void *conn);

/* Unlinks an armed waiter (its answer is going out); a no-op otherwise. */
void srv_watch_disarm(srv_watch *w, srv_waiter *wt);

/* Resumes every suspended waiter and arms no more (shutdown). */
void srv_watch_close(srv_watch *w);

#endif
