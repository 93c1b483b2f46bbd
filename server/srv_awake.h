/*
 * srv_awake.h: keeps idle CPUs from halting while a request is served alone.
 *
 * On a virtual machine whose idle vCPUs halt, waking a halted vCPU costs
 * tens of microseconds, and one client's request pays it more than once:
 * the fsync's completion interrupt lands on a halted CPU and wakes the
 * committing thread across CPUs, and the answer wakes a client whose CPU
 * halted while it waited.  While exactly one request is in flight, and the
 * one before it was alone too, one idle-priority thread per CPU
 * (SCHED_IDLE: any other runnable task preempts it at once) spins, so those
 * wake-ups find running CPUs.  It spends only CPU time that would otherwise
 * be idle, at most SRV_AWAKE_MAX_SPIN_US per request, and none while two or
 * more requests are in flight (the CPUs are busy then, and spinners would
 * only add to the scheduler's work).  Idle priority holds within the
 * process's cgroup: against other cgroups under the cpu controller the
 * spinners count at the cgroup's weight (README: serve --busy-poll-us 0),
 * and a cgroup CPU quota counts their time like any other: serve does not
 * start them under a quota below its CPUs (srv_cgroup.h).
 */
#ifndef SRV_AWAKE_H
#define SRV_AWAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The longest one request keeps the CPUs awake: a request slower than this
 * (a long computation, a checkpoint, a slow disk) is one whose wake-up
 * costs no longer matter. */
#define SRV_AWAKE_MAX_SPIN_US 2000

/* At most this many spinning threads, one per CPU the process may run on. */
#define SRV_AWAKE_MAX_THREADS 16

typedef struct srv_awake srv_awake;

/* Starts the spinners, asleep until a request asks; requests_in_flight is
 * the server's count of requests in flight.  NULL when no spinner could be
 * started (out of memory, no thread). */
srv_awake *srv_awake_start(const atomic_int *requests_in_flight, unsigned max_spin_us);

/* Stops and joins the spinners and frees a; NULL is a no-op.  Call it only
 * when no request can be between its enter and its end. */
void srv_awake_stop(srv_awake *a);

/* At a request's start, after it was counted in flight: whether it asked
 * the spinners to run: only when it is the one request in flight and the
 * last request to end was alone when it ended; never for a NULL a. */
bool srv_awake_enter(srv_awake *a);

/* At every request's end, before it stops being counted in flight, with
 * what its enter returned. */
void srv_awake_end(srv_awake *a, bool held);

typedef struct srv_awake_stats {
	uint64_t requests;   /* requests that asked the spinners to run */
	uint64_t spins;      /* rounds spun, one per spinner and request */
	uint64_t time_limit; /* of those, rounds ended by max_spin_us */
	unsigned threads;    /* spinners that run at idle priority */
	unsigned spinning;   /* spinners spinning now */
} srv_awake_stats;

/* Zeros for a NULL a. */
srv_awake_stats srv_awake_read_stats(srv_awake *a);

#endif
