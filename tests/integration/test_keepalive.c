/*
 * test_keepalive.c: requests on one kept-alive connection, and the idle
 * server's poll for a connection's next request (serve --busy-poll-us,
 * server/srv_http.c, await_next_request).
 *
 * The poll must change nothing a client sees: every request on the
 * connection is answered as without it, pipelined ones included, and a
 * client that closes is let go.  Its rules are checked through
 * /metrics' dpgate_busy_polls_total{outcome}: a quick client is polled for,
 * a slow one at most once until it is quick again, and 0 turns it off.
 * The same flag keeps the CPUs awake while a request is served alone
 * (srv_awake.h), counted in dpgate_awake_requests_total.
 *
 * Each test talks to the server over its own raw socket, so that the
 * connection stays open between requests (libcurl's handles in the harness
 * open one per request).  /metrics is read on that same connection: no
 * other connection's poll can then end between two readings.
 */
#define _GNU_SOURCE /* strcasestr */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define CHARGE_BODY "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.01,\"delta\":0}}"

typedef struct conn {
	int fd;
	char buf[1 << 16];
	size_t have;  /* bytes in buf not yet consumed */
} conn;

typedef struct polls {
	double request, closed, busy, timeout;
} polls;

static void conn_open(conn *c, const dpg_server *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
	struct timeval tv = {.tv_sec = 30};

	c->have = 0;
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(c->fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
}

/* Writes all of `data`; false when the connection is gone (no SIGPIPE). */
static bool conn_try_send_all(const conn *c, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t k = send(c->fd, data, len, MSG_NOSIGNAL);

		if (k <= 0)
			return false;
		data += k;
		len -= (size_t)k;
	}
	return true;
}

static void conn_send_all(const conn *c, const char *data, size_t len)
{
	cr_assert(conn_try_send_all(c, data, len), "send: %s", strerror(errno));
}

/* Formats one request (a body of NULL: none) into req; returns its length. */
static size_t request_text(char *req, size_t size, const char *method, const char *path,
			   const char *key, const char *body)
{
	int n;

	n = snprintf(req, size, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, path);
	if (key)
		n += snprintf(req + n, size - (size_t)n, "Authorization: Bearer %s\r\n", key);
	if (body)
		n += snprintf(req + n, size - (size_t)n,
			      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			      strlen(body), body);
	else
		n += snprintf(req + n, size - (size_t)n, "\r\n");
	return (size_t)n;
}

/* Writes one request (a body of NULL: none). */
static void conn_send(const conn *c, const char *method, const char *path, const char *key,
		      const char *body)
{
	char req[2048];
	size_t n = request_text(req, sizeof(req), method, path, key, body);

	cr_assert_lt(n, sizeof(req));
	conn_send_all(c, req, n);
}

/* Reads one whole answer (framed by Content-Length); returns its status and
 * copies its body into `body` (NUL-terminated, cut to `size`), or returns -1
 * and says why in `why`. */
static int conn_try_read(conn *c, char *body, size_t size, char *why, size_t why_size)
{
	for (;;) {
		char *end, *cl;
		size_t head, len, whole;
		int status;
		ssize_t k;

		c->buf[c->have] = '\0';
		end = strstr(c->buf, "\r\n\r\n");
		if (end) {
			head = (size_t)(end + 4 - c->buf);
			cl = strcasestr(c->buf, "\r\nContent-Length:");
			if (!cl || cl > end) {
				snprintf(why, why_size, "an answer without Content-Length: %.300s",
					 c->buf);
				return -1;
			}
			len = strtoul(cl + 17, NULL, 10);
			whole = head + len;
			if (whole >= sizeof(c->buf)) {
				snprintf(why, why_size, "an answer of %zu bytes", whole);
				return -1;
			}
			if (c->have >= whole) {
				if (sscanf(c->buf, "HTTP/1.1 %d", &status) != 1) {
					snprintf(why, why_size, "no status line: %.200s", c->buf);
					return -1;
				}
				if (body) {
					size_t n = len < size - 1 ? len : size - 1;

					memcpy(body, c->buf + head, n);
					body[n] = '\0';
				}
				memmove(c->buf, c->buf + whole, c->have - whole);
				c->have -= whole;
				return status;
			}
		}
		k = read(c->fd, c->buf + c->have, sizeof(c->buf) - 1 - c->have);
		if (k <= 0) {
			snprintf(why, why_size, "the server closed or timed out (%s) after %.200s",
				 k < 0 ? strerror(errno) : "end of stream", c->buf);
			return -1;
		}
		c->have += (size_t)k;
	}
}

static int conn_read(conn *c, char *body, size_t size)
{
	char why[512];
	int status = conn_try_read(c, body, size, why, sizeof(why));

	cr_assert_geq(status, 0, "%s", why);
	return status;
}

static int conn_call(conn *c, const char *method, const char *path, const char *key,
		     const char *body)
{
	conn_send(c, method, path, key, body);
	return conn_read(c, NULL, 0);
}

static double metric_line(const char *text, const char *name)
{
	const char *p = strstr(text, name);

	cr_assert_not_null(p, "no %s in /metrics", name);
	return strtod(p + strlen(name), NULL);
}

/* /metrics, read on the connection itself (valid until the next call). */
static const char *conn_metrics(conn *c)
{
	static char body[1 << 16];

	conn_send(c, "GET", "/metrics", NULL, NULL);
	cr_assert_eq(conn_read(c, body, sizeof(body)), 200);
	return body;
}

/* /metrics' poll counters, read on the connection itself. */
static polls conn_polls(conn *c)
{
	const char *body = conn_metrics(c);
	polls p;

	p.request = metric_line(body, "dpgate_busy_polls_total{outcome=\"request\"} ");
	p.closed = metric_line(body, "dpgate_busy_polls_total{outcome=\"closed\"} ");
	p.busy = metric_line(body, "dpgate_busy_polls_total{outcome=\"busy\"} ");
	p.timeout = metric_line(body, "dpgate_busy_polls_total{outcome=\"timeout\"} ");
	return p;
}

/* n charges of 0.01 on dataset ds, one after another on c, each 201. */
static void charge_on(conn *c, const dpg_server *srv, const char *ds, int n)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", ds);
	for (int i = 0; i < n; i++)
		cr_assert_eq(conn_call(c, "POST", path, srv->admin_key, CHARGE_BODY), 201,
			     "charge %d", i);
}

/* Dataset ds holds exactly n of those charges, on its ledger and in its
 * totals. */
static void expect_charged(const dpg_server *srv, const char *ds, int n)
{
	dpg_budget b = dpg_budget_of(srv, ds);

	cr_expect_eq(b.charges, n);
	cr_expect_eq(b.ledger_rows, n);
	cr_expect_float_eq(b.spent_eps, 0.01 * n, 1e-9);
}

typedef struct awake {
	double requests, spins, threads;
} awake;

/* /metrics' awake counters, read on the connection itself. */
static awake conn_awake(conn *c)
{
	const char *body = conn_metrics(c);
	awake a;

	/* At a line's start: the HELP lines name them too. */
	a.requests = metric_line(body, "\ndpgate_awake_requests_total ");
	a.spins = metric_line(body, "\ndpgate_awake_spins_total{ended=\"before_limit\"} ") +
		  metric_line(body, "\ndpgate_awake_spins_total{ended=\"time_limit\"} ");
	a.threads = metric_line(body, "\ndpgate_awake_threads ");
	return a;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Starts a server with --threads `threads` and --busy-poll-us `busy`, then
 * lets the server's polls of the harness's own connections (one per
 * request, closed at once) end before the test counts. */
static void start(dpg_server *srv, unsigned threads, const char *busy)
{
	dpg_server_start_with(srv, NULL, threads, busy);
	sleep_ms(100);
}

/* A client sending one request after another is polled for, and every
 * answer is what it would be without the poll: 30 health checks and 20
 * charges, all counted on the ledger. */
Test(keepalive, a_quick_client_is_polled_for_and_answered_in_full, .timeout = 300)
{
	dpg_server srv;
	conn c;
	polls before, after;

	start(&srv, 2, "10000");
	dpg_make_dataset(&srv, "k", 10.0, 0, "basic");
	sleep_ms(100); /* that request's connection, too */
	conn_open(&c, &srv);
	before = conn_polls(&c);
	for (int i = 0; i < 30; i++)
		cr_assert_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200, "check %d", i);
	charge_on(&c, &srv, "k", 20);
	after = conn_polls(&c);
	/* 50 answers, each followed at once by the next request: the
	 * connection is polled for after nearly every one (10 ms is far
	 * longer than the client's turn, also under a sanitizer). */
	cr_expect_geq(after.request - before.request, 25, "polls that met a request: %.0f",
		      after.request - before.request);
	close(c.fd);
	expect_charged(&srv, "k", 20);
	dpg_server_destroy(&srv);
}

/* A client that pauses longer than the poll costs one poll, which times
 * out; it is not polled for again until its gaps are short again.  The
 * poll is the longest allowed, 10 ms, against pauses of 100 ms.
 *
 * Once quick again, the client is polled for again.  A poll can still time
 * out when the machine is busy and the client's turn takes longer than
 * 10 ms (a build beside the test did that), and each timeout doubles the
 * completions skipped: two at the start skip 4 and then 8 of 20 requests.
 * So the quick client sends until 10 polls have met its requests, at most
 * QUICK_MAX health checks (and a /metrics read after every 10): those run
 * out only after 7 timeouts in a row, 4 + 8 + ... + 512 completions
 * skipped.  A client the server no longer polls for fails; a quick one on
 * a busy machine passes. */
#define QUICK_MAX 520
Test(keepalive, a_slow_client_is_polled_for_at_most_once, .timeout = 300)
{
	dpg_server srv;
	conn c;
	polls first, slow, quick;

	start(&srv, 2, "10000");
	conn_open(&c, &srv);
	cr_assert_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200);
	sleep_ms(100); /* the poll after the first answer times out */
	first = conn_polls(&c);
	cr_expect_geq(first.timeout, 1);
	for (int i = 0; i < 5; i++) {
		sleep_ms(100);
		cr_assert_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200);
	}
	sleep_ms(100);
	slow = conn_polls(&c);
	cr_expect_eq(slow.request + slow.timeout, first.request + first.timeout,
		     "a slow client was polled for: %.0f more polls",
		     slow.request + slow.timeout - first.request - first.timeout);
	quick = slow;
	for (int i = 0; i < QUICK_MAX && quick.request - slow.request < 10; i += 10) {
		for (int j = 0; j < 10; j++)
			cr_assert_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200);
		quick = conn_polls(&c);
	}
	cr_expect_geq(quick.request - slow.request, 10,
		      "a quick client again: %.0f polls met a request, %.0f timed out, %.0f "
		      "ended busy, in %d requests",
		      quick.request - slow.request, quick.timeout - slow.timeout,
		      quick.busy - slow.busy, QUICK_MAX);
	close(c.fd);
	dpg_server_destroy(&srv);
}

/* --busy-poll-us 0: no poll at all, for this connection or the harness's,
 * and no thread that keeps the CPUs awake. */
Test(keepalive, busy_poll_0_never_polls, .timeout = 300)
{
	dpg_server srv;
	conn c;
	polls p;

	start(&srv, 2, "0");
	conn_open(&c, &srv);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200);
	p = conn_polls(&c);
	cr_expect_eq(p.request + p.closed + p.busy + p.timeout, 0);
	{
		awake aw = conn_awake(&c);

		cr_expect_eq(aw.threads, 0);
		cr_expect_eq(aw.requests + aw.spins, 0);
	}
	close(c.fd);
	dpg_server_destroy(&srv);
}

/* Whether the server's log says that a cgroup CPU quota below its CPUs
 * kept the CPUs from being kept awake (server/srv_cgroup.h). */
static bool quota_kept_them_off(const dpg_server *srv)
{
	char text[8192];
	bool said = false;
	FILE *f = fopen(srv->log, "r");

	cr_assert_not_null(f);
	while (fgets(text, sizeof(text), f))
		if (strstr(text, "\"msg\":\"CPUs not kept awake\"") &&
		    strstr(text, "\"reason\":\"a cgroup CPU quota below the CPUs\""))
			said = true;
	fclose(f);
	return said;
}

/* With the poll on, each request served alone asks the idle-priority
 * threads to keep the CPUs awake (srv_awake.h), and what it answers is
 * unchanged: 20 charges one after another, all on the ledger.  Where the
 * tests run under a cgroup CPU quota below the CPUs, the server has no
 * such threads (srv_cgroup.h), and that is checked instead. */
Test(keepalive, a_lone_request_keeps_the_cpus_awake, .timeout = 300)
{
	dpg_server srv;
	conn c;
	awake before, after;

	start(&srv, 2, "200");
	dpg_make_dataset(&srv, "w", 10.0, 0, "basic");
	sleep_ms(100);
	conn_open(&c, &srv);
	before = conn_awake(&c);
	charge_on(&c, &srv, "w", 20);
	after = conn_awake(&c);
	if (quota_kept_them_off(&srv)) {
		/* This machine holds the tests to a CPU quota below its CPUs:
		 * no thread, and no request asks (srv_awake_enter of NULL). */
		cr_expect_eq(after.threads, 0);
		cr_expect_eq(after.requests, 0);
	} else {
		cr_expect_geq(before.threads, 1, "no awake thread with the poll on");
		/* The 20 charges and this second /metrics read, each alone (the
		 * first counted itself before it was read). */
		cr_expect_eq(after.requests - before.requests, 21, "requests that asked: %.0f",
			     after.requests - before.requests);
	}
	close(c.fd);
	expect_charged(&srv, "w", 20);
	dpg_server_destroy(&srv);
}

/* A cgroup with the cpu controller that this test made, with the test
 * process in it (and so the servers it starts). */
typedef struct test_cgroup {
	char dir[256];    /* the group made for the test */
	char origin[600]; /* cgroup.procs of the group the process came from */
	bool v2;
} test_cgroup;

/* Writes printf text to a file in one write (as cgroup files want it);
 * 0, or -1 with errno. */
static int write_text(const char *path, const char *fmt, ...)
{
	char text[128];
	va_list ap;
	int fd, n, saved;
	ssize_t w;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	w = write(fd, text, (size_t)n);
	saved = errno;
	close(fd);
	errno = saved;
	return w == n ? 0 : -1;
}

/* The process's group in /proc/self/cgroup: v2's "0::PATH", or the v1
 * line whose controllers include cpu. */
static void own_group(bool v2, char *ret, size_t size)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];

	snprintf(ret, size, "/");
	while (f && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		char ctrl[256];

		if (!b)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(ctrl, sizeof(ctrl), ",%.*s,", (int)(b - a - 1), a + 1);
		if (v2 ? strncmp(line, "0::", 3) == 0 : strstr(ctrl, ",cpu,") != NULL) {
			snprintf(ret, size, "%s", b + 1);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* Makes a group beside the hierarchy's root for this process and moves the
 * process into it; false, with why, where the machine has no cpu hierarchy
 * that this process may change (not root, a read-only cgroup file system,
 * the controller not enabled).  Tried in order: cgroup v1's cpu mount,
 * then cgroup v2 with cpu in the root's cgroup.subtree_control. */
static bool test_cgroup_enter(test_cgroup *g, char *why, size_t why_size)
{
	static const char *const mounts[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct",
					     "/sys/fs/cgroup"};
	char path[600], self[512];

	snprintf(why, why_size, "no cgroup file system with the cpu controller");
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		bool v2 = i == 2;

		if (v2) {
			FILE *sc;
			char line[256] = "";

			snprintf(path, sizeof(path), "%s/cgroup.subtree_control", mounts[i]);
			sc = fopen(path, "r");
			if (!sc)
				continue;
			if (!fgets(line, sizeof(line), sc))
				line[0] = '\0';
			fclose(sc);
			if (!strstr(line, "cpu ") && !strstr(line, "cpu\n"))
				continue;
		} else {
			snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", mounts[i]);
			if (access(path, R_OK) != 0)
				continue;
		}
		own_group(v2, self, sizeof(self));
		snprintf(g->origin, sizeof(g->origin), "%s%s/cgroup.procs", mounts[i],
			 strcmp(self, "/") == 0 ? "" : self);
		snprintf(g->dir, sizeof(g->dir), "%s/dpgate-test-%d", mounts[i], (int)getpid());
		g->v2 = v2;
		if (mkdir(g->dir, 0755) != 0) {
			snprintf(why, why_size, "cannot make %s: %s", g->dir, strerror(errno));
			g->dir[0] = '\0';
			return false;
		}
		snprintf(path, sizeof(path), "%s/cgroup.procs", g->dir);
		if (write_text(path, "%d\n", (int)getpid()) != 0) {
			snprintf(why, why_size, "cannot move into %s: %s", g->dir, strerror(errno));
			rmdir(g->dir);
			g->dir[0] = '\0';
			return false;
		}
		return true;
	}
	return false;
}

/* Sets the group's quota to `cpus` CPUs (period 100 ms). */
static void test_cgroup_quota(const test_cgroup *g, double cpus)
{
	char path[300];
	long quota = (long)(cpus * 100000.0);

	if (g->v2) {
		snprintf(path, sizeof(path), "%s/cpu.max", g->dir);
		cr_assert_eq(write_text(path, "%ld 100000\n", quota), 0, "%s", strerror(errno));
	} else {
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", g->dir);
		cr_assert_eq(write_text(path, "100000\n"), 0, "%s", strerror(errno));
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", g->dir);
		cr_assert_eq(write_text(path, "%ld\n", quota), 0, "%s", strerror(errno));
	}
}

/* The test's group, for its .fini, which runs also after a failed
 * assertion ends the test early. */
static test_cgroup quota_group;

/* Moves the process back where it came from and removes the group, if the
 * test made one.  A server still in it (a failed assertion skipped its
 * dpg_server_destroy) is one this test started: it is killed first. */
static void test_cgroup_leave(void)
{
	test_cgroup *g = &quota_group;
	char procs[300];

	if (g->dir[0] == '\0')
		return;
	cr_expect_eq(write_text(g->origin, "%d\n", (int)getpid()), 0, "%s: %s", g->origin,
		     strerror(errno));
	cr_assert_lt(snprintf(procs, sizeof(procs), "%s/cgroup.procs", g->dir), (int)sizeof(procs));
	for (int i = 0; i < 100 && rmdir(g->dir) != 0 && errno == EBUSY; i++) {
		FILE *f = fopen(procs, "r");
		int pid;

		while (f && fscanf(f, "%d", &pid) == 1)
			if (pid != getpid())
				kill(pid, SIGKILL);
		if (f)
			fclose(f);
		sleep_ms(20);
	}
	cr_expect_eq(access(g->dir, F_OK), -1, "%s is left", g->dir);
	g->dir[0] = '\0';
}

/* The server's /metrics count of awake threads and whether its log says
 * that a quota kept them off. */
static double awake_threads_of(dpg_server *srv, bool *quota_logged)
{
	conn c;
	awake a;

	conn_open(&c, srv);
	a = conn_awake(&c);
	close(c.fd);
	*quota_logged = quota_kept_them_off(srv);
	return a.threads;
}

/* Under a cgroup CPU quota below its CPUs, serve keeps no CPU awake
 * (server/srv_cgroup.h: the spinning would spend the quota) and says so;
 * with a quota of all its CPUs it does.  Needs a cpu cgroup it may make
 * (as root on this machine's kind); the quota files' layouts are tested
 * without one in tests/server/test_cgroup.c. */
Test(keepalive, a_cpu_quota_below_the_cpus_keeps_no_cpu_awake, .timeout = 300,
     .fini = test_cgroup_leave)
{
	test_cgroup *g = &quota_group;
	dpg_server srv;
	cpu_set_t allowed;
	char why[600];
	double cpus;
	bool logged;

	cr_assert_eq(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	cpus = CPU_COUNT(&allowed);
	if (!test_cgroup_enter(g, why, sizeof(why)))
		cr_skip_test("%s", why);
	test_cgroup_quota(g, cpus - 0.25);
	start(&srv, 2, NULL);
	cr_expect_eq(awake_threads_of(&srv, &logged), 0, "awake threads under %.2f CPUs of %.0f",
		     cpus - 0.25, cpus);
	cr_expect(logged, "no log line says why");
	dpg_server_destroy(&srv);

	test_cgroup_quota(g, cpus);
	start(&srv, 2, NULL);
	cr_expect_eq(awake_threads_of(&srv, &logged), cpus < 16 ? cpus : 16,
		     "awake threads under a quota of all %.0f CPUs", cpus);
	cr_expect_not(logged);
	dpg_server_destroy(&srv);
}

/* Requests sent in one write are all answered, in order: the second is
 * already in libmicrohttpd's buffer, where the poll's peek cannot see it,
 * and waits out the poll at most. */
Test(keepalive, pipelined_requests_are_all_answered_in_order, .timeout = 300)
{
	static const char three[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
				    "GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n"
				    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	dpg_server srv;
	conn c;

	start(&srv, 1, "10000");
	conn_open(&c, &srv);
	conn_send_all(&c, three, sizeof(three) - 1);
	cr_expect_eq(conn_read(&c, NULL, 0), 200);
	cr_expect_eq(conn_read(&c, NULL, 0), 404);
	cr_expect_eq(conn_read(&c, NULL, 0), 200);
	/* and the connection still serves */
	cr_expect_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200);
	close(c.fd);
	dpg_server_destroy(&srv);
}

/* Twelve requests in one write: after each answer the next request is
 * already in libmicrohttpd's buffer, not on the socket, so every poll times
 * out, but the gaps are short.  The backoff (after the k-th timed-out poll
 * in a row, skip 2^k completions) lets three of the eleven polls happen. */
Test(keepalive, polls_that_time_out_back_off, .timeout = 300)
{
	char twelve[12 * 40];
	size_t n = 0;
	dpg_server srv;
	conn c;
	polls before, after;

	start(&srv, 1, "2000");
	for (int i = 0; i < 12; i++)
		n += (size_t)snprintf(twelve + n, sizeof(twelve) - n,
				      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
	conn_open(&c, &srv);
	before = conn_polls(&c);
	sleep_ms(50); /* the poll after /metrics times out; the backoff starts */
	cr_assert_eq(conn_call(&c, "GET", "/healthz", NULL, NULL), 200);
	conn_send_all(&c, twelve, n);
	for (int i = 0; i < 12; i++)
		cr_assert_eq(conn_read(&c, NULL, 0), 200, "answer %d", i);
	after = conn_polls(&c);
	cr_expect_leq(after.timeout - before.timeout, 5, "%.0f polls timed out",
		      after.timeout - before.timeout);
	cr_expect_geq(after.timeout - before.timeout, 2, "%.0f polls timed out",
		      after.timeout - before.timeout);
	close(c.fd);
	dpg_server_destroy(&srv);
}

/* A client that closes after its answer ends the poll at once; the worker,
 * the only one, goes on serving others.
 *
 * The poll lasts 10 ms.  A test thread descheduled for longer than that
 * between two of its steps (a loaded machine, a neighbour stealing the CPU)
 * lets a poll time out, rightly, and such an attempt says nothing either
 * way.  So each attempt is timed from before its first request was sent to
 * the close: every poll in it starts after the first and ends at an event
 * before the close, so when that span is under 9 ms none can have timed out,
 * and the close must have ended the last.  Only such attempts are judged; up
 * to 20 are made, each on new connections. */
#define CLOSE_ATTEMPTS 20
#define CLOSE_SPAN_S 0.009

Test(keepalive, a_client_that_closes_is_let_go, .timeout = 300)
{
	dpg_server srv;
	int judged = 0;

	start(&srv, 1, "10000");
	for (int attempt = 0; attempt < CLOSE_ATTEMPTS && !judged; attempt++) {
		conn a, b;
		polls before, after;
		double t0, span;

		conn_open(&a, &srv);
		t0 = dpg_now_s();
		before = conn_polls(&a);
		cr_assert_eq(conn_call(&a, "GET", "/healthz", NULL, NULL), 200);
		close(a.fd);
		span = dpg_now_s() - t0;
		/* one worker: b is accepted once a's poll has ended */
		conn_open(&b, &srv);
		after = conn_polls(&b);
		if (span < CLOSE_SPAN_S) {
			judged = 1;
			cr_expect_geq(after.closed - before.closed, 1,
				      "closed %.0f timeout %.0f (attempt %d, %.1f ms)",
				      after.closed - before.closed, after.timeout - before.timeout,
				      attempt, 1e3 * span);
			cr_expect_eq(after.timeout, before.timeout, "attempt %d, %.1f ms", attempt,
				     1e3 * span);
		}
		cr_expect_eq(conn_call(&b, "GET", "/healthz", NULL, NULL), 200);
		close(b.fd);
		sleep_ms(20); /* b's own poll ends before the next attempt reads */
	}
	cr_expect(judged, "no attempt of %d closed within %.0f ms of its first request",
		  CLOSE_ATTEMPTS, 1e3 * CLOSE_SPAN_S);
	dpg_server_destroy(&srv);
}

/* Two connections on the one worker: the poll is only for a worker's only
 * connection, so an answer on one never waits on a poll for the other. */
Test(keepalive, a_worker_with_two_connections_does_not_poll, .timeout = 300)
{
	dpg_server srv;
	conn a, b;
	polls before, after;

	start(&srv, 1, "10000");
	conn_open(&a, &srv);
	conn_open(&b, &srv);
	/* both are accepted (and so owned by the one worker) once each has
	 * been answered */
	cr_assert_eq(conn_call(&b, "GET", "/healthz", NULL, NULL), 200);
	before = conn_polls(&a);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(conn_call(&a, "GET", "/healthz", NULL, NULL), 200);
		cr_assert_eq(conn_call(&b, "GET", "/healthz", NULL, NULL), 200);
	}
	after = conn_polls(&a);
	cr_expect_eq(after.request + after.timeout + after.closed + after.busy,
		     before.request + before.timeout + before.closed + before.busy);
	close(a.fd);
	close(b.fd);
	dpg_server_destroy(&srv);
}

/* One client of the shutdown test: charges on its own connection, one after
 * another, until the server closes it. */
typedef struct loader {
	conn c;
	const char *req;
	size_t req_len;
	long answered;    /* charges answered 201 */
	int unexpected;   /* the first status other than 201 and 503, or 0 */
	char why[512];    /* how the connection ended */
} loader;

static void *load(void *arg)
{
	loader *l = arg;

	for (;;) {
		int status;

		if (!conn_try_send_all(&l->c, l->req, l->req_len)) {
			snprintf(l->why, sizeof(l->why), "send: %s", strerror(errno));
			break;
		}
		status = conn_try_read(&l->c, NULL, 0, l->why, sizeof(l->why));
		if (status < 0)
			break;
		if (status == 201)
			l->answered++;
		else if (status != 503 && !l->unexpected)
			l->unexpected = status;
	}
	return NULL;
}

#define LOAD_CLIENTS 4
#define LOAD_ROUNDS 8

/* SIGTERM while clients keep their connections busy: the server stops with
 * status 0 every time, and every charge it answered is on the ledger (at
 * most one more per client, the one in flight when its connection ended).
 * A server whose libmicrohttpd (0.9.75) ran its workers on epoll aborted
 * here now and then ("Failed to remove listen FD from epoll set"): a worker
 * that woke during the quiesce removed the listening socket first.  The
 * server runs with slow_listen_removal.so preloaded, which makes that
 * happen every time in such a server.  The rounds vary the moment of the
 * signal and alternate --threads 2 and 1 (a pool, and its one thread). */
Test(keepalive, sigterm_under_keepalive_load_stops_cleanly, .timeout = 600)
{
	char req[2048], out[8192];
	dpg_preload shim;
	const char *env[] = {shim.preload, shim.asan, NULL};
	const char *verify[] = {dpg_bin(), "verify", "--db", NULL, NULL};
	dpg_server srv;
	long answered = 0;
	size_t req_len;

	dpg_preload_init(&shim, SLOW_LISTEN_REMOVAL_SHIM);
	dpg_server_start_with(&srv, env, 2, NULL);
	sleep_ms(100);
	dpg_make_dataset(&srv, "k", 1000.0, 0, "basic");
	req_len = request_text(req, sizeof(req), "POST", "/v1/datasets/k/charges", srv.admin_key,
			       CHARGE_BODY);
	cr_assert_lt(req_len, sizeof(req));
	for (int round = 0; round < LOAD_ROUNDS; round++) {
		loader l[LOAD_CLIENTS];
		pthread_t t[LOAD_CLIENTS];
		int status;

		if (round > 0) {
			/* odd rounds: libmicrohttpd's one thread, no pool */
			srv.threads = round % 2 ? 1 : 2;
			dpg_server_restart(&srv);
		}
		for (int i = 0; i < LOAD_CLIENTS; i++) {
			memset(&l[i], 0, sizeof(l[i]));
			l[i].req = req;
			l[i].req_len = req_len;
			conn_open(&l[i].c, &srv);
			cr_assert_eq(pthread_create(&t[i], NULL, load, &l[i]), 0);
		}
		sleep_ms(100 + 23 * round);
		status = dpg_server_signal(&srv, SIGTERM);
		for (int i = 0; i < LOAD_CLIENTS; i++) {
			pthread_join(t[i], NULL);
			close(l[i].c.fd);
		}
		cr_assert_eq(status, 0,
			     "round %d (--threads %u): dpgate exited with status %d after SIGTERM; see %s",
			     round, srv.threads, status, srv.log);
		for (int i = 0; i < LOAD_CLIENTS; i++) {
			cr_expect_eq(l[i].unexpected, 0, "round %d client %d: status %d", round, i,
				     l[i].unexpected);
			cr_expect(l[i].answered > 0, "round %d client %d was never answered: %s",
				  round, i, l[i].why);
			answered += l[i].answered;
		}
	}
	verify[3] = srv.db;
	cr_assert_eq(dpg_run(out, sizeof(out), verify), 0, "%s", out);
	cr_assert(strstr(out, "\"totals_match\": true"), "%s", out);
	dpg_server_restart(&srv);
	{
		dpg_budget b = dpg_budget_of(&srv, "k");

		cr_expect_geq(b.charges, answered, "%ld charges on the ledger, %ld answered",
			      b.charges, answered);
		cr_expect_leq(b.charges, answered + LOAD_CLIENTS * LOAD_ROUNDS,
			      "%ld charges on the ledger, %ld answered", b.charges, answered);
		cr_expect_float_eq(b.spent_eps, 0.01 * (double)b.charges, 1e-6);
	}
	dpg_server_destroy(&srv);
}
