/*
 * srv_awake.c: idle-priority spinners that keep the CPUs awake while a
 * request is served alone (see srv_awake.h).
 *
 * Each spinner is pinned to one CPU and makes itself SCHED_IDLE before it
 * does anything else (one that cannot quits), so it never competes with
 * normal work: a thread that becomes runnable on its CPU (the committer
 * woken by the fsync's completion, a client woken by its answer, a
 * training job) preempts it at once.  Between requests the spinners sleep
 * on a futex.
 *
 * No request thread ever waits for a spinner: a request publishes its
 * generation with atomics and wakes the futex, and nothing a spinner holds
 * can block it.  (A mutex shared with the spinners would: a SCHED_IDLE
 * thread preempted while holding it, on a CPU kept busy by normal work,
 * may not run again for a long time, and a request waiting for that mutex
 * would wait as long.  With a mutex here, a server under a loaded machine
 * stopped answering for over 100 ms.)
 *
 * A request asks for the spinners only when it is the one request in flight
 * and the request that ended last was alone too when it ended: under a
 * steady load of several clients the count drops to one now and then, and
 * each such moment would otherwise wake the spinners for nothing.
 *
 * A round of spinning starts when a request enters with no other held, and
 * ends when no request holds the spinners any more, when a second request
 * is in flight, when a newer request took over (its round starts afresh),
 * at the time limit, or at stop.
 */
#define _GNU_SOURCE
#include "srv_awake.h"
#include "srv.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct srv_awake {
	const atomic_int *requests;  /* the server's requests in flight */
	double max_spin_s;
	atomic_int held;             /* requests between a true enter and their end */
	atomic_bool last_alone;      /* the last request to end was the one in flight */
	/* The futex word: bumped by each enter with none held, and by stop.
	 * 32 bits, as the futex call reads it. */
	_Atomic uint32_t generation;
	atomic_bool stopping;
	pthread_t threads[SRV_AWAKE_MAX_THREADS];
	unsigned nthreads;           /* started */
	atomic_uint refused;         /* of those, quit: SCHED_IDLE refused */
	atomic_uint spinning;
	atomic_uint_fast64_t asked, spins, time_limit;
};

/* Sleeps while the generation is still seen (a wake or a changed value
 * returns at once; so may a signal: the caller looks again). */
static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* One round: spins while generation gen's request is served alone. */
static void spin_round(srv_awake *a, uint32_t gen)
{
	struct timespec start;
	bool timed_out = false;

	clock_gettime(CLOCK_MONOTONIC, &start);

	atomic_fetch_add(&a->spinning, 1);
	atomic_fetch_add(&a->spins, 1);
	while (atomic_load_explicit(&a->held, memory_order_relaxed) > 0 &&
	       atomic_load_explicit(a->requests, memory_order_relaxed) <= 1 &&
	       atomic_load_explicit(&a->generation, memory_order_relaxed) == gen &&
	       !atomic_load_explicit(&a->stopping, memory_order_relaxed)) {
		if (srv_seconds_since(&start) >= a->max_spin_s) {
			timed_out = true;
			break;
		}
		cpu_relax();
	}
	if (timed_out)
		atomic_fetch_add(&a->time_limit, 1);
	atomic_fetch_sub(&a->spinning, 1);
}

static void *spinner_main(void *arg)
{
	srv_awake *a = arg;
	struct sched_param param = {0};
	uint32_t seen = 0; /* generations start at 1: a request held already is spun for */

	/* glibc's thread attributes take no SCHED_IDLE, so the thread sets it
	 * itself, first; one that cannot never spins. */
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0) {
		atomic_fetch_add(&a->refused, 1);
		return NULL;
	}
	for (;;) {
		uint32_t gen = atomic_load(&a->generation);

		/* Stop and enter both store first (stopping, held) and bump the
		 * generation after, so nothing is missed: either the generation
		 * just loaded is the bumped one, and then the store before it is
		 * seen below, or the futex finds the generation changed, or the
		 * wake comes after the sleep began. */
		if (atomic_load(&a->stopping))
			break;
		if (gen != seen && atomic_load(&a->held) > 0) {
			seen = gen;
			spin_round(a, gen);
		} else {
			seen = gen;
			futex_wait(&a->generation, gen);
		}
	}
	return NULL;
}

/* Starts a spinner pinned to cpu; false when the system refuses. */
static bool start_spinner(srv_awake *a, int cpu)
{
	pthread_attr_t attr;
	cpu_set_t one;
	bool ok;

	if (pthread_attr_init(&attr) != 0)
		return false;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ok = pthread_attr_setaffinity_np(&attr, sizeof(one), &one) == 0 &&
	     pthread_create(&a->threads[a->nthreads], &attr, spinner_main, a) == 0;
	pthread_attr_destroy(&attr);
	if (ok)
		a->nthreads++;
	return ok;
}

srv_awake *srv_awake_start(const atomic_int *requests_in_flight, unsigned max_spin_us)
{
	srv_awake *a = calloc(1, sizeof(*a));
	cpu_set_t allowed;

	if (!a)
		return NULL;
	a->requests = requests_in_flight;
	atomic_init(&a->last_alone, true);
	a->max_spin_s = (double)max_spin_us * 1e-6;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
		for (int cpu = 0; cpu < CPU_SETSIZE && a->nthreads < SRV_AWAKE_MAX_THREADS; cpu++)
			if (CPU_ISSET(cpu, &allowed) && !start_spinner(a, cpu))
				break;
	}
	if (a->nthreads == 0) {
		srv_awake_stop(a);
		return NULL;
	}
	return a;
}

void srv_awake_stop(srv_awake *a)
{
	if (!a)
		return;
	atomic_store(&a->stopping, true);
	atomic_fetch_add(&a->generation, 1);
	futex_wake_all(&a->generation);
	for (unsigned i = 0; i < a->nthreads; i++)
		pthread_join(a->threads[i], NULL);
	free(a);
}

bool srv_awake_enter(srv_awake *a)
{
	if (!a || atomic_load(a->requests) > 1 || !atomic_load(&a->last_alone))
		return false;
	atomic_fetch_add(&a->asked, 1);
	if (atomic_fetch_add(&a->held, 1) == 0) {
		atomic_fetch_add(&a->generation, 1);
		futex_wake_all(&a->generation);
	}
	return true;
}

void srv_awake_end(srv_awake *a, bool held)
{
	if (!a)
		return;
	atomic_store(&a->last_alone, atomic_load(a->requests) <= 1);
	if (held)
		atomic_fetch_sub(&a->held, 1);
}

srv_awake_stats srv_awake_read_stats(srv_awake *a)
{
	srv_awake_stats s = {0};

	if (!a)
		return s;
	/* time_limit first: each round it counts is already in spins. */
	s.time_limit = atomic_load(&a->time_limit);
	s.spins = atomic_load(&a->spins);
	s.requests = atomic_load(&a->asked);
	s.threads = a->nthreads - atomic_load(&a->refused);
	s.spinning = atomic_load(&a->spinning);
	return s;
}
