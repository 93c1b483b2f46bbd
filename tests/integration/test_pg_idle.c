/*
 * test_pg_idle.c: a server that froze inside a write transaction does not
 * stop the others.  Two dpgate servers, A and B, on one PostgreSQL database
 * (a throwaway cluster, tests/pg/pg_cluster.h).
 *
 * Clients keep charging dataset d through A, so that A's writer is nearly
 * always inside a transaction that holds d's row.  A is stopped (SIGSTOP)
 * at such a moment: pg_stat_activity shows a session of the database idle
 * in transaction, and d's row is locked (FOR UPDATE NOWAIT fails); a stop
 * that caught A between transactions is undone and tried again.  Then:
 *
 *   - a charge on d through B is admitted (201) once PostgreSQL has ended
 *     A's session, within its idle-in-transaction timeout (10 s) plus
 *     slack, well before the 30 s lock timeout after which it would be a
 *     503;
 *   - a charge on another dataset through B, sent while that one waits,
 *     waits behind it in B's writer and is admitted with it; one sent
 *     after them is admitted at once;
 *   - once A continues, the request of its ended transaction answers 503
 *     and nothing else but 201s come back; A charges again; d's charges
 *     are the 201s the test counted, and `dpgate verify` passes.
 *
 * And a primary that stops answering (a relay that forwards nothing) gets a
 * 503 from a charge and from /healthz within a few of the store's silent
 * periods, not a request held for as long as it is silent.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "pg_rig.h"

#define LOADERS 4
#define STOP_ATTEMPTS 40
/* The store's idle-in-transaction timeout (store_pg.c), and what a
 * loaded machine may add to it; the lock timeout B's charge must beat. */
#define IDLE_TIMEOUT_S 10.0
#define SLACK_S 8.0
#define LOCK_TIMEOUT_S 30.0
#define CHARGE "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"

/* The clients charging d through A. */
struct load {
	const dpg_server *a;
	atomic_bool stop;
	atomic_int ok, unavailable, other;
};

static void *loader_run(void *arg)
{
	struct load *l = arg;

	while (!atomic_load(&l->stop)) {
		dpg_resp r;

		if (dpg_http(l->a, "POST", "/v1/datasets/d/charges", l->a->admin_key, CHARGE,
			     strlen(CHARGE), NULL, &r) < 0) {
			atomic_fetch_add(&l->other, 1);
			continue;
		}
		if (r.status == 201)
			atomic_fetch_add(&l->ok, 1);
		else if (r.status == 503)
			atomic_fetch_add(&l->unavailable, 1);
		else
			atomic_fetch_add(&l->other, 1);
		dpg_resp_free(&r);
	}
	return NULL;
}

/* Whether a session of the database sits idle in a transaction that holds
 * d's row. */
static bool row_held_idle(const char *url)
{
	char out[4096];

	if (dpg_pg_psql(url, "SELECT 1 FROM datasets WHERE id = 'd' FOR UPDATE NOWAIT", out,
			sizeof(out)) == 0)
		return false;
	cr_assert_eq(dpg_pg_psql(url,
				 "SELECT count(*) FROM pg_stat_activity WHERE datname ="
				 " current_database() AND state = 'idle in transaction'",
				 out, sizeof(out)),
		     0, "%s", out);
	return atoll(out) > 0;
}

/* Stops A while it holds d's row idle in a transaction; fails the test
 * when no attempt catches it so. */
static void stop_holding(dpg_server *a, const char *url)
{
	for (int i = 0; i < STOP_ATTEMPTS; i++) {
		usleep(50000 + 20000 * (useconds_t)(i % 5));
		cr_assert_eq(kill(a->pid, SIGSTOP), 0);
		/* PostgreSQL finishes the statement it runs, then waits. */
		usleep(300000);
		if (row_held_idle(url)) {
			usleep(200000);
			if (row_held_idle(url))
				return;
		}
		cr_assert_eq(kill(a->pid, SIGCONT), 0);
	}
	cr_assert_fail("A was never stopped holding d's row");
}

/* A charge on dataset `id` through s: its status, and its time in *ret_s. */
static long timed_charge(const dpg_server *s, const char *id, double *ret_s)
{
	char path[64];
	double t0 = dpg_now_s();
	dpg_resp r;
	long status;

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	cr_assert_eq(dpg_http(s, "POST", path, s->admin_key, CHARGE, strlen(CHARGE), NULL, &r), 0);
	*ret_s = dpg_now_s() - t0;
	status = r.status;
	dpg_resp_free(&r);
	return status;
}

struct side_charge {
	const dpg_server *s;
	long status;
	double seconds;
};

static void *side_run(void *arg)
{
	struct side_charge *c = arg;

	c->status = timed_charge(c->s, "d", &c->seconds);
	return NULL;
}

/* Waits until a session of the database waits for a lock. */
static void wait_lock_waiter(const char *url)
{
	char out[4096];
	double deadline = dpg_now_s() + 10;

	for (;;) {
		cr_assert_eq(dpg_pg_psql(url,
					 "SELECT count(*) FROM pg_stat_activity WHERE datname ="
					 " current_database() AND wait_event_type = 'Lock'",
					 out, sizeof(out)),
			     0, "%s", out);
		if (atoll(out) > 0)
			return;
		cr_assert_lt(dpg_now_s(), deadline, "B's charge on d never waited for the row");
		usleep(50000);
	}
}

static struct dpg_pg_pair p;

/* A test that failed with A stopped lets it go, so that it ends with the
 * test process (the harness's parent-death SIGTERM waits while it is
 * stopped). */
static void continue_a(void)
{
	if (p.a.pid > 0)
		kill(p.a.pid, SIGCONT);
}

TestSuite(pg_idle, .timeout = 300, .fini = continue_a);

Test(pg_idle, a_server_frozen_in_a_transaction_does_not_stop_the_others)
{
	static struct load l;
	const char *argv[] = {dpg_bin(), "verify", "--db", p.url, NULL};
	static const char *const slow_headers[] = {"--header-timeout", "60", NULL};
	pthread_t th[LOADERS], side;
	struct side_charge held = {0};
	double waited, quick;
	long status;
	char out[16384];

	if (!dpg_pg_store_built())
		cr_skip_test("this dpgate has no PostgreSQL store");
	memset(&p, 0, sizeof(p));
	dpg_pg_database(&p.cluster, p.url, sizeof(p.url));
	dpg_server_start_on(&p.a, p.url);
	/* B's charge on e may reach the HTTP thread that waits in B's charge
	 * on d: it is read when that one is answered, not cut off at 5 s. */
	dpg_server_start_on_with(&p.b, p.url, NULL, slow_headers);
	dpg_make_dataset(&p.a, "d", 1e6, 0, "basic");
	dpg_make_dataset(&p.a, "e", 1e6, 0, "basic");
	l.a = &p.a;
	for (int i = 0; i < LOADERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, loader_run, &l), 0);
	stop_holding(&p.a, p.url);

	/* The charge on e goes out while the one on d waits for the row: it
	 * waits behind it in B's writer. */
	held.s = &p.b;
	cr_assert_eq(pthread_create(&side, NULL, side_run, &held), 0);
	wait_lock_waiter(p.url);
	status = timed_charge(&p.b, "e", &waited);
	pthread_join(side, NULL);
	cr_log_info("B's charge on d: %ld after %.1f s; on e: %ld after %.1f s", held.status,
		    held.seconds, status, waited);
	cr_assert_eq(held.status, 201, "B's charge on d answered %ld after %.1f s", held.status,
		     held.seconds);
	cr_assert_leq(held.seconds, IDLE_TIMEOUT_S + SLACK_S, "B's charge on d took %.1f s",
		      held.seconds);
	cr_assert_lt(held.seconds, LOCK_TIMEOUT_S);
	cr_assert_eq(status, 201, "B's charge on e answered %ld", status);
	cr_assert_leq(waited, IDLE_TIMEOUT_S + SLACK_S, "B's charge on e took %.1f s", waited);
	cr_assert_eq(timed_charge(&p.b, "e", &quick), 201);
	cr_assert_leq(quick, 3.0, "a charge on e through B took %.1f s", quick);

	cr_assert_eq(kill(p.a.pid, SIGCONT), 0);
	usleep(1000000);
	atomic_store(&l.stop, true);
	for (int i = 0; i < LOADERS; i++)
		pthread_join(th[i], NULL);
	cr_log_info("through A: %d admitted, %d unavailable", atomic_load(&l.ok),
		    atomic_load(&l.unavailable));
	cr_assert_geq(atomic_load(&l.unavailable), 1, "A's ended transaction was answered");
	cr_assert_eq(atomic_load(&l.other), 0, "A answered something else than 201 or 503");
	cr_assert_eq(timed_charge(&p.a, "d", &quick), 201, "A does not charge again");
	cr_assert_eq(dpg_budget_of(&p.b, "d").charges, atomic_load(&l.ok) + 2,
		     "d's charges are not the 201s");
	cr_assert_eq(dpg_budget_of(&p.b, "e").charges, 2);
	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "dpgate verify: %s", out);
	dpg_pg_pair_free(&p);
}

/*
 * A primary that stops answering: a TCP relay between the server and the
 * cluster that, frozen, forwards nothing either way while the kernel still
 * accepts and acknowledges (a primary hung on its disk looks so).  Thawed,
 * it first closes every connection made before (the hung primary was
 * restarted), so that nothing sent during the freeze runs late.
 */
#define RELAY_PAIRS 64

struct relay {
	int listen_fd, port;
	char host[64];
	pthread_t thread;
	atomic_bool frozen, thaw, stop;
	int fd[RELAY_PAIRS][2]; /* the server's side, the cluster's; -1: closed */
};

static void relay_close(struct relay *r, int i)
{
	close(r->fd[i][0]);
	close(r->fd[i][1]);
	r->fd[i][0] = r->fd[i][1] = -1;
}

static void relay_accept(struct relay *r)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
	int c = accept(r->listen_fd, NULL, NULL), u;

	if (c < 0)
		return;
	u = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, r->host, &to.sin_addr);
	for (int i = 0; i < RELAY_PAIRS; i++) {
		if (r->fd[i][0] < 0 && u >= 0 && connect(u, (struct sockaddr *)&to, sizeof(to)) == 0) {
			r->fd[i][0] = c;
			r->fd[i][1] = u;
			return;
		}
	}
	close(c);
	if (u >= 0)
		close(u);
}

/* Moves what waits on one side of pair i to the other; false at its end. */
static bool relay_move(struct relay *r, int i, int from)
{
	char buf[65536];
	ssize_t n = read(r->fd[i][from], buf, sizeof(buf));

	for (ssize_t off = 0; n > 0 && off < n;) {
		ssize_t w = write(r->fd[i][1 - from], buf + off, (size_t)(n - off));

		if (w <= 0)
			return false;
		off += w;
	}
	return n > 0;
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;

	while (!atomic_load(&r->stop)) {
		struct pollfd pf[1 + 2 * RELAY_PAIRS];
		bool frozen = atomic_load(&r->frozen);
		int n = 1;

		if (atomic_exchange(&r->thaw, false)) {
			for (int i = 0; i < RELAY_PAIRS; i++)
				if (r->fd[i][0] >= 0)
					relay_close(r, i);
			atomic_store(&r->frozen, false);
			continue;
		}
		pf[0] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
		for (int i = 0; i < RELAY_PAIRS; i++)
			for (int side = 0; side < 2; side++)
				pf[n++] = (struct pollfd){.fd = frozen ? -1 : r->fd[i][side],
							 .events = POLLIN};
		if (poll(pf, (nfds_t)n, 20) <= 0)
			continue;
		if (pf[0].revents & POLLIN)
			relay_accept(r);
		for (int i = 0; i < RELAY_PAIRS; i++)
			for (int side = 0; side < 2; side++)
				if (pf[1 + 2 * i + side].revents && r->fd[i][0] >= 0 &&
				    !relay_move(r, i, side))
					relay_close(r, i);
	}
	for (int i = 0; i < RELAY_PAIRS; i++)
		if (r->fd[i][0] >= 0)
			relay_close(r, i);
	close(r->listen_fd);
	return NULL;
}

/* Starts r in front of the cluster at `url` (postgresql://user@HOST:PORT/db)
 * and writes the URL through it into via. */
static void relay_start(struct relay *r, const char *url, char *via, size_t size)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	const char *at = strchr(url, '@'), *colon, *slash;

	cr_assert_not_null(at, "%s", url);
	colon = strchr(at, ':');
	slash = colon ? strchr(colon, '/') : NULL;
	cr_assert(colon && slash && (size_t)(colon - at - 1) < sizeof(r->host), "%s", url);
	snprintf(r->host, sizeof(r->host), "%.*s", (int)(colon - at - 1), at + 1);
	r->port = atoi(colon + 1);
	memset(r->fd, -1, sizeof(r->fd));
	r->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(bind(r->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(r->listen_fd, 16), 0);
	cr_assert_eq(getsockname(r->listen_fd, (struct sockaddr *)&a, &len), 0);
	snprintf(via, size, "%.*s@127.0.0.1:%d%s", (int)(at - url), url, ntohs(a.sin_port),
		 slash);
	cr_assert_eq(pthread_create(&r->thread, NULL, relay_run, r), 0);
}

/* How long the server may wait for an answer in this test (the store's
 * DPG_PG_SILENT_S shortened through its test hook). */
#define SILENT_MS 3000

/*
 * With the primary answering nothing, a charge and /healthz answer 503
 * once the store gives its connection up (a few silent periods at most:
 * the request's statement, then a retry on another connection), where
 * they waited for as long as the primary was silent; once it answers
 * again the pool reconnects by itself and charges go through, and the
 * ledger holds exactly the answered charges.
 */
Test(pg_idle, a_primary_that_stops_answering_gets_503_not_a_hang)
{
	static const char *const env[] = {"DPGATE_TEST_PG_SILENT_MS=3000", NULL};
	static struct relay rl;
	struct pgc_cluster *cluster = NULL;
	char url[PGC_URL_MAX], via[PGC_URL_MAX + 16];
	const dpg_http_opts opts = {.timeout_s = 50};
	double took, t0;
	long status = 0;
	dpg_server s;
	dpg_resp r;
	int admitted = 0;

	if (!dpg_pg_store_built())
		cr_skip_test("this dpgate has no PostgreSQL store");
	memset(&rl, 0, sizeof(rl));
	dpg_pg_database(&cluster, url, sizeof(url));
	relay_start(&rl, url, via, sizeof(via));
	dpg_server_start_on_with(&s, via, env, NULL);
	dpg_make_dataset(&s, "d", 1e6, 0, "basic");
	cr_assert_eq(timed_charge(&s, "d", &took), 201);
	admitted++;

	atomic_store(&rl.frozen, true);
	t0 = dpg_now_s();
	cr_assert_eq(dpg_http_opt(&s, &opts, "POST", "/v1/datasets/d/charges", s.admin_key, CHARGE,
				  strlen(CHARGE), NULL, &r), 0, "the charge had no answer in 50 s");
	took = dpg_now_s() - t0;
	cr_log_info("the charge answered %ld after %.1f s", r.status, took);
	cr_assert_eq(r.status, 503, "%s", r.body);
	cr_assert_str_eq(r.content_type, "application/problem+json");
	dpg_resp_free(&r);
	cr_assert_leq(took, 4.0 * SILENT_MS / 1000.0 + SLACK_S, "the charge took %.1f s", took);
	t0 = dpg_now_s();
	cr_assert_eq(dpg_http_opt(&s, &opts, "GET", "/healthz", NULL, NULL, 0, NULL, &r), 0,
		     "/healthz had no answer in 50 s");
	took = dpg_now_s() - t0;
	cr_log_info("/healthz answered %ld after %.1f s", r.status, took);
	cr_assert_eq(r.status, 503, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_leq(took, 4.0 * SILENT_MS / 1000.0 + SLACK_S, "/healthz took %.1f s", took);

	atomic_store(&rl.thaw, true);
	for (int i = 0; i < 60 && status != 201; i++) {
		status = timed_charge(&s, "d", &took);
		if (status != 201)
			usleep(500000);
	}
	cr_assert_eq(status, 201, "no charge went through after the primary came back");
	admitted++;
	cr_assert_eq(dpg_budget_of(&s, "d").charges, admitted);
	dpg_server_destroy(&s);
	atomic_store(&rl.stop, true);
	pthread_join(rl.thread, NULL);
	pgc_cluster_free(cluster);
}
