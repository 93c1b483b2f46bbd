/*
 * test_awake.c: the idle-priority spinners that keep the CPUs awake while a
 * request is served alone (server/srv_awake.c).
 *
 * What they must do: spin only while a request holds them and it is the
 * only one in flight, stop when it ends, when a second request starts or
 * at the time limit, and run at SCHED_IDLE only.  The server's in-flight
 * count is a plain counter here.  Waits for a spinner poll with a long
 * deadline: a SCHED_IDLE thread on a loaded machine runs late, but it runs.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <time.h>

#include "srv_awake.h"

#define WAIT_S 20.0 /* for a spinner to be scheduled, also on a loaded machine */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Waits until at least `want` spinners spin (or, with want 0, none does);
 * false at the deadline. */
static bool wait_spinning(srv_awake *a, unsigned want)
{
	double end = now_s() + WAIT_S;

	while (now_s() < end) {
		unsigned n = srv_awake_read_stats(a).spinning;

		if (want ? n >= want : n == 0)
			return true;
		sleep_ms(1);
	}
	return false;
}

/* This process's threads whose policy is SCHED_IDLE. */
static unsigned idle_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)) != NULL) {
		int tid = atoi(e->d_name);

		if (tid > 0 && sched_getscheduler(tid) == SCHED_IDLE)
			n++;
	}
	closedir(d);
	return n;
}

Test(awake, the_spinners_are_idle_priority_one_per_cpu)
{
	atomic_int in_flight = 0;
	cpu_set_t allowed;
	srv_awake *a = srv_awake_start(&in_flight, SRV_AWAKE_MAX_SPIN_US);
	unsigned cpus;
	double end = now_s() + WAIT_S;

	cr_assert_not_null(a);
	cr_assert_eq(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	cpus = (unsigned)CPU_COUNT(&allowed);
	cr_expect_eq(srv_awake_read_stats(a).threads,
		     cpus < SRV_AWAKE_MAX_THREADS ? cpus : SRV_AWAKE_MAX_THREADS);
	/* Each makes itself SCHED_IDLE as it starts. */
	while (idle_threads() < srv_awake_read_stats(a).threads && now_s() < end)
		sleep_ms(1);
	cr_expect_eq(idle_threads(), srv_awake_read_stats(a).threads);
	srv_awake_stop(a);
	cr_expect_eq(idle_threads(), 0);
}

Test(awake, a_lone_request_spins_them_until_it_ends)
{
	atomic_int in_flight = 1;
	srv_awake *a = srv_awake_start(&in_flight, 60 * 1000 * 1000); /* no time limit here */
	srv_awake_stats s;

	cr_assert_not_null(a);
	sleep_ms(20);
	cr_expect_eq(srv_awake_read_stats(a).spins, 0, "spun with no request");
	cr_assert(srv_awake_enter(a));
	cr_assert(wait_spinning(a, 1), "no spinner ran for a lone request");
	srv_awake_end(a, true);
	cr_assert(wait_spinning(a, 0), "spinners still spin after the request left");
	s = srv_awake_read_stats(a);
	cr_expect_eq(s.requests, 1);
	cr_expect_geq(s.spins, 1);
	cr_expect_eq(s.time_limit, 0);
	/* Asleep between requests: no new round without a request. */
	sleep_ms(20);
	cr_expect_eq(srv_awake_read_stats(a).spins, s.spins);
	srv_awake_stop(a);
}

Test(awake, a_request_with_company_does_not_ask)
{
	atomic_int in_flight = 2;
	srv_awake *a = srv_awake_start(&in_flight, 60 * 1000 * 1000);

	cr_assert_not_null(a);
	cr_expect_not(srv_awake_enter(a));
	sleep_ms(20);
	cr_expect_eq(srv_awake_read_stats(a).requests, 0);
	cr_expect_eq(srv_awake_read_stats(a).spins, 0);
	cr_expect_not(srv_awake_enter(NULL), "no spinners, no ask");
	srv_awake_stop(a);
}

/* A request that ended beside another makes the next lone one not ask;
 * that one ends alone, so the one after it asks again. */
Test(awake, a_lone_request_after_a_busy_moment_does_not_ask)
{
	atomic_int in_flight = 2;
	srv_awake *a = srv_awake_start(&in_flight, 60 * 1000 * 1000);

	cr_assert_not_null(a);
	cr_expect_not(srv_awake_enter(a));
	srv_awake_end(a, false); /* ends with the other still in flight */
	atomic_store(&in_flight, 1);
	cr_expect_not(srv_awake_enter(a), "asked right after a busy moment");
	srv_awake_end(a, false);
	cr_expect(srv_awake_enter(a), "a lone request after a lone one did not ask");
	srv_awake_end(a, true);
	cr_expect_eq(srv_awake_read_stats(a).requests, 1);
	srv_awake_stop(a);
}

/* A second request in flight stops the round at once, though the first
 * still holds the spinners; it does not start again when the second ends. */
Test(awake, a_second_request_stops_the_spin)
{
	atomic_int in_flight = 1;
	srv_awake *a = srv_awake_start(&in_flight, 60 * 1000 * 1000);
	uint64_t spins;

	cr_assert_not_null(a);
	cr_assert(srv_awake_enter(a));
	/* All of them, so that none is still to start its round later. */
	cr_assert(wait_spinning(a, srv_awake_read_stats(a).threads));
	atomic_store(&in_flight, 2);
	cr_assert(wait_spinning(a, 0), "spinners spin beside a second request");
	spins = srv_awake_read_stats(a).spins;
	atomic_store(&in_flight, 1);
	sleep_ms(20);
	cr_expect_eq(srv_awake_read_stats(a).spinning, 0);
	cr_expect_eq(srv_awake_read_stats(a).spins, spins);
	srv_awake_end(a, true);
	srv_awake_stop(a);
}

/* A request that outlasts max_spin_us keeps the CPUs awake that long only. */
Test(awake, a_long_request_spins_them_to_the_time_limit_only)
{
	atomic_int in_flight = 1;
	srv_awake *a = srv_awake_start(&in_flight, 1000);
	double end = now_s() + WAIT_S;
	srv_awake_stats s;

	cr_assert_not_null(a);
	cr_assert(srv_awake_enter(a));
	/* Every spinner's round ends at the limit (none is still to start). */
	while (srv_awake_read_stats(a).time_limit < srv_awake_read_stats(a).threads && now_s() < end)
		sleep_ms(1);
	cr_assert(wait_spinning(a, 0), "spinners spin past the time limit");
	s = srv_awake_read_stats(a);
	cr_expect_eq(s.time_limit, s.threads);
	cr_expect_eq(s.spins, s.threads);
	sleep_ms(20);
	cr_expect_eq(srv_awake_read_stats(a).spinning, 0, "a spinner came back for the same request");
	srv_awake_end(a, true);
	/* A new request gets a new round. */
	cr_assert(srv_awake_enter(a));
	end = now_s() + WAIT_S;
	while (srv_awake_read_stats(a).spins <= s.spins && now_s() < end)
		sleep_ms(1);
	cr_expect_gt(srv_awake_read_stats(a).spins, s.spins);
	srv_awake_end(a, true);
	srv_awake_stop(a);
}

/* Requests in a row, each entering as the last ends: every one counted,
 * and the spinners end asleep. */
Test(awake, requests_in_a_row_each_ask_and_all_end)
{
	atomic_int in_flight = 1;
	srv_awake *a = srv_awake_start(&in_flight, SRV_AWAKE_MAX_SPIN_US);

	cr_assert_not_null(a);
	for (int i = 0; i < 2000; i++) {
		cr_assert(srv_awake_enter(a));
		srv_awake_end(a, true);
	}
	cr_expect_eq(srv_awake_read_stats(a).requests, 2000);
	cr_expect(wait_spinning(a, 0));
	srv_awake_stop(a);
}

/* Normal-priority work that keeps one CPU busy until *stop. */
struct burner {
	int cpu;
	atomic_bool *stop;
};

static void *burn(void *arg)
{
	struct burner *b = arg;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(b->cpu, &one);
	pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	while (!atomic_load_explicit(b->stop, memory_order_relaxed))
		;
	return NULL;
}

/* A request never waits for a spinner.  With its CPU busy with normal
 * work, a SCHED_IDLE spinner runs seldom and may be preempted anywhere; a
 * request that had to wait for something a spinner holds (a mutex they
 * shared once did) slept until the spinner ran again: 450-650 ms here.
 * Requests entering and ending one after another meanwhile must never
 * sleep: the thread's voluntary context switches (getrusage) stay what
 * they were.  (Not the wall time: on a loaded machine the scheduler may
 * preempt this thread for long, which is no wait of the code's making.)
 * The test keeps to two CPUs: this thread on one, a busy thread on the
 * other, where a spinner holding something would be preempted; a machine
 * with more CPUs keeps the rest free for tests running beside it. */
Test(awake, a_request_never_waits_for_a_spinner_on_busy_cpus, .timeout = 120)
{
	atomic_int in_flight = 1;
	atomic_bool stop = false;
	struct burner burner;
	pthread_t tid;
	struct rusage before, after;
	cpu_set_t allowed, two, mine;
	srv_awake *a;
	long rounds = 0;
	double end;
	int cpu[2], found = 0;

	cr_assert_eq(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
		if (CPU_ISSET(c, &allowed))
			cpu[found++] = c;
	cr_assert_eq(found, 2, "the test needs two CPUs");
	CPU_ZERO(&two);
	CPU_SET(cpu[0], &two);
	CPU_SET(cpu[1], &two);
	cr_assert_eq(sched_setaffinity(0, sizeof(two), &two), 0);
	a = srv_awake_start(&in_flight, SRV_AWAKE_MAX_SPIN_US); /* a spinner on each */
	cr_assert_not_null(a);
	burner = (struct burner){cpu[1], &stop};
	cr_assert_eq(pthread_create(&tid, NULL, burn, &burner), 0);
	CPU_ZERO(&mine);
	CPU_SET(cpu[0], &mine);
	cr_assert_eq(sched_setaffinity(0, sizeof(mine), &mine), 0);
	end = now_s() + 2.0;
	cr_assert_eq(getrusage(RUSAGE_THREAD, &before), 0);
	while (now_s() < end) {
		bool asked = srv_awake_enter(a);

		srv_awake_end(a, asked);
		rounds += asked;
	}
	cr_assert_eq(getrusage(RUSAGE_THREAD, &after), 0);
	atomic_store(&stop, true);
	pthread_join(tid, NULL);
	cr_expect_gt(rounds, 0);
	cr_expect_eq(after.ru_nvcsw, before.ru_nvcsw, "requests slept %ld times (over %ld requests)",
		     after.ru_nvcsw - before.ru_nvcsw, rounds);
	srv_awake_stop(a);
}
