/*
 * bench_server.c: durable charges per second and admission latency of the
 * real dpgate binary, printed next to this machine's ceilings measured in
 * the same run.
 *
 *   bench_server [--dpgate PATH] [--duration S] [--rounds N] [--threads N]
 *                [--dir DIR] [--samples N] [--max-rows N] [--keep]
 *
 * What one run measures:
 *   setup: start dpgate (the real binary, `dpgate serve --listen 127.0.0.1:0
 *      --quiet`, port read from its log) on a temporary database with an
 *      admin key from `dpgate keys create`; create the datasets; drive every
 *      SQLite writer past its WAL's first wrap (see WARM_COMMITS);
 *   then, in each of --rounds rounds, every throughput cell in turn (so that
 *   a burst of load from elsewhere hits ceilings and dpgate alike; the table
 *   shows the median of the rounds):
 *   1. ceiling 1: a bare SQLite commit loop (one small INSERT per
 *      transaction, WAL, synchronous=FULL, dpgate's open flags; SQLite's
 *      default page size and checkpoint interval, where dpgate tunes both)
 *      on a file in the same directory as dpgate's database, with 1 writer
 *      and with 8 writers on separate connections; and, to split dpgate's
 *      gap between SQL and HTTP, dpgate's own charge transaction (read the
 *      dataset and its totals, append the ledger row that carries the new
 *      totals) on dpgate's schema and settings (page size, checkpoint
 *      interval) with 1 writer;
 *   2. ceiling 2: a bare libmicrohttpd server started with dpgate's flags
 *      (internal polling thread pool, poll, N threads, same limits)
 *      answering a fixed small body to the very request dpgate gets, driven
 *      by the same load generator, with 1, 8 and 64 concurrent clients;
 *   3. dpgate: durable charges per second on one dataset and spread over
 *      100 datasets with 1, 8 and 64 clients, with p50/p99 latency and the
 *      server's CPU time per charge; then the figures the performance goals
 *      are stated in ("goals"): dpgate's CPU time per one-client charge,
 *      and charges per second with 1, 8 and 64 clients over the bare
 *      commit loop with 1 writer;
 *   4. admission latency at 10, 10^4 and 10^6 ledger rows: each ledger is
 *      prefilled with SQLite while the server is stopped (rows copied from a
 *      charge the server wrote, each carrying the running totals the server
 *      would have written),
 *      then single charges and dry-runs are timed, interleaved across sizes;
 *   paired: the one-client ratios to the bare commit loop once more, in
 *      short slices of the bare loop, dpgate on one dataset and dpgate over
 *      100 datasets that take turns (the order rotates), so that all three
 *      see the same disk and neighbours; each ratio is of the summed counts
 *      and also the median of the per-turn ratios; dpgate's /metrics, read
 *      before and after the dpgate slices, split one charge's mean time into
 *      its spend transaction (and that transaction's COMMIT) and the rest;
 *   5. the first RESTART_CHARGES charges after a restart, in --rounds
 *      pairs: a restart as served (serve writes the WAL out to its working
 *      size at start), then a restart with the WAL cut to 0 bytes after the
 *      start (the file before serve wrote it out, which each commit grows);
 *      the ratio is of the summed times;
 *   6. correctness: `dpgate verify` must exit 0 after the prefill and after
 *      the runs, and the number of 201 answers must equal the ledger's charge
 *      rows minus the rows the benchmark inserted itself.
 *
 * The load generator: one thread per client, each with its own HTTP/1.1
 * keep-alive connection (raw sockets, TCP_NODELAY), one request at a time.
 * A cell runs for a fixed time; the first WARMUP_S seconds are not counted
 * in the rate or the latency figures (they are in the 201 totals).
 *
 * Output: a plain-text table on stdout, then one line of JSON starting with
 * {"bench":"server" that holds every figure.  Exit status 0 when every
 * check passed, 1 when a check failed, 2 on bad usage or setup failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>
#include <libpq-fe.h>
#include <sqlite3.h>

/* The ledger's round-upward addition, so that the totals written here equal
 * what `dpgate verify` recomputes from the rows, bit for bit. */
#include "acct.h"
#include "bench_common.h"
#include "bench_pg_loop.h"
#include "pg_cluster.h"

#ifndef BENCH_DEFAULT_DPGATE
#define BENCH_DEFAULT_DPGATE "./build/server/dpgate"
#endif

#define DEFAULT_DURATION_S 3.0
#define WARMUP_S 0.25
#define DEFAULT_SERVER_THREADS 8     /* dpgate serve's default --threads */
#define MAX_CLIENTS 64
#define SPREAD_DATASETS 100
#define DEFAULT_SAMPLES 200          /* timed charges per ledger size */
#define DEFAULT_ROUNDS 3
#define PAIRED_SLICES 8              /* paired turns of bare, one, 100 */
#define PAIRED_SLICE_S 1.0
#define WARM_COMMITS 2000            /* > frames to the first checkpoint: 1000 at
				      * one per bare commit, 4000 at three per
				      * dpgate charge */
#define MAX_ROUNDS 15
#define ADMISSION_WARMUP 10          /* untimed charges before them */
#define RESTART_CHARGES 1000         /* timed charges right after a restart */
#define DEFAULT_MAX_ROWS 1000000
#define SQLITE_WRITERS_MANY 8
#define BUSY_TIMEOUT_MS 30000        /* as server/store/store_db.c */
#define RESP_BUF_BYTES 65536
#define START_TIMEOUT_S 30.0
#define STOP_TIMEOUT_S 30.0
#define CMD_OUT_BYTES (1 << 20)
#define CHARGE_BODY "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}}"
#define DRY_RUN_BODY CHARGE_BODY

static const unsigned client_counts[] = {1, 8, 64};
#define N_CLIENT_COUNTS (sizeof(client_counts) / sizeof(client_counts[0]))
static const long ledger_sizes[] = {10, 10000, 1000000};
#define N_LEDGER_SIZES (sizeof(ledger_sizes) / sizeof(ledger_sizes[0]))

/* ---- small helpers ------------------------------------------------------- */

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void load_average(double ret[3])
{
	FILE *f = fopen("/proc/loadavg", "r");

	ret[0] = ret[1] = ret[2] = NAN;
	if (!f)
		return;
	if (fscanf(f, "%lf %lf %lf", &ret[0], &ret[1], &ret[2]) != 3)
		ret[0] = ret[1] = ret[2] = NAN;
	fclose(f);
}

/* The machine's CPU time counters from /proc/stat's first line, in ticks:
 * ret[0] all (user through steal), ret[1] steal; NANs when unreadable. */
static void host_cpu_ticks(double ret[2])
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");

	ret[0] = ret[1] = NAN;
	if (!f)
		return;
	/* cpu user nice system idle iowait irq softirq steal (guest time is
	 * already inside user and nice) */
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) == 8) {
		ret[0] = 0;
		for (int i = 0; i < 8; i++)
			ret[0] += (double)v[i];
		ret[1] = (double)v[7];
	}
	fclose(f);
}

/* The share of the machine's CPU time the hypervisor gave to others
 * (steal) between two host_cpu_ticks readings, in percent, or NAN. */
static double steal_percent(const double before[2], const double after[2])
{
	double all = after[0] - before[0];

	return all > 0 ? 100.0 * (after[1] - before[1]) / all : NAN;
}

/* CPU seconds (user + system) a process has used so far, or NAN. */
static double process_cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long utime, stime;
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return NAN;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the parenthesised command name: state is field 3,
	 * utime field 14, stime field 15. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
			 &stime) != 2)
		return NAN;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* Parses "[x,y]" (the basic ledger's cost text) into two doubles. */
static int parse_pair(const char *text, double ret[2])
{
	char *end;

	if (!text || text[0] != '[')
		return -1;
	ret[0] = strtod(text + 1, &end);
	if (*end != ',')
		return -1;
	ret[1] = strtod(end + 1, &end);
	return *end == ']' ? 0 : -1;
}

/* ---- a minimal HTTP/1.1 keep-alive client --------------------------------- */

typedef struct hconn {
	int fd;
	uint16_t port;
	size_t have;
	char buf[RESP_BUF_BYTES];
} hconn;

static void hconn_close(hconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->have = 0;
}

static int hconn_open(hconn *c, uint16_t port)
{
	struct sockaddr_in a;
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c->port = port;
	c->have = 0;
	if (c->fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		hconn_close(c);
		return -1;
	}
	return 0;
}

static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Finds a header's value in [hdr, end); returns a pointer to it or NULL. */
static const char *find_header(const char *hdr, const char *end, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = hdr; p && p < end;) {
		const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);

		if (!eol)
			break;
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;

			while (*v == ' ' || *v == '\t')
				v++;
			return v;
		}
		p = eol + 2;
	}
	return NULL;
}

/*
 * Sends one request and reads one response on a keep-alive connection,
 * opening it first if needed.  Returns the HTTP status, or -1 when the
 * exchange failed (the connection is then closed).  When body_out is given,
 * the response body (truncated to body_cap - 1 bytes) is copied there.
 */
static int hconn_roundtrip(hconn *c, const char *req, size_t len, char *body_out, size_t body_cap)
{
	const char *hdr_end = NULL, *v;
	size_t hdr_len = 0, total;
	long content_length;
	bool close_after;
	int status;

	if (c->fd < 0 && hconn_open(c, c->port) < 0)
		return -1;
	if (send_all(c->fd, req, len) < 0)
		goto fail;
	for (;;) {
		ssize_t r;

		if (c->have > 0) {
			hdr_end = memmem(c->buf, c->have, "\r\n\r\n", 4);
			if (hdr_end) {
				hdr_len = (size_t)(hdr_end - c->buf) + 4;
				break;
			}
		}
		if (c->have == sizeof(c->buf))
			goto fail;
		r = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto fail;
		c->have += (size_t)r;
	}
	if (c->have < 12 || strncmp(c->buf, "HTTP/1.", 7) != 0)
		goto fail;
	status = atoi(c->buf + 9); /* "HTTP/1.1 NNN": fixed layout, 3 digits */
	v = find_header(c->buf, c->buf + hdr_len, "Content-Length");
	if (!v)
		goto fail;
	content_length = strtol(v, NULL, 10);
	if (content_length < 0 || (size_t)content_length > sizeof(c->buf) - hdr_len)
		goto fail;
	v = find_header(c->buf, c->buf + hdr_len, "Connection");
	close_after = v && strncasecmp(v, "close", 5) == 0;
	total = hdr_len + (size_t)content_length;
	while (c->have < total) {
		ssize_t r = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto fail;
		c->have += (size_t)r;
	}
	if (body_out && body_cap > 0) {
		size_t n = (size_t)content_length < body_cap - 1 ? (size_t)content_length : body_cap - 1;

		memcpy(body_out, c->buf + hdr_len, n);
		body_out[n] = '\0';
	}
	memmove(c->buf, c->buf + total, c->have - total);
	c->have -= total;
	if (close_after)
		hconn_close(c);
	return status;
fail:
	hconn_close(c);
	return -1;
}

/* Builds a complete request; the caller frees it. */
static char *build_request(const char *method, const char *path, const char *key, const char *body,
			   size_t *ret_len)
{
	char *s = NULL;
	int n;

	if (body)
		n = asprintf(&s,
			     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			     method, path, key ? "Authorization: Bearer " : "", key ? key : "",
			     key ? "\r\n" : "", strlen(body), body);
	else
		n = asprintf(&s, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s\r\n", method, path,
			     key ? "Authorization: Bearer " : "", key ? key : "", key ? "\r\n" : "");
	if (n < 0)
		return NULL;
	*ret_len = (size_t)n;
	return s;
}

/* One request on a fresh connection; returns the status or -1. */
static int http_once(uint16_t port, const char *method, const char *path, const char *key,
		     const char *body, char *body_out, size_t body_cap)
{
	hconn *c = malloc(sizeof(*c));
	size_t len;
	char *req = build_request(method, path, key, body, &len);
	int status = -1;

	if (c && req) {
		c->fd = -1;
		c->port = port;
		c->have = 0;
		status = hconn_roundtrip(c, req, len, body_out, body_cap);
		hconn_close(c);
	}
	free(req);
	free(c);
	return status;
}

/* dpgate's spend-timing histograms from /metrics: the _sum (seconds) and
 * _count of dpgate_spend_transaction_duration_seconds (ret[0], ret[1]) and
 * of dpgate_spend_commit_duration_seconds (ret[2], ret[3]); 0 or -1. */
static int scrape_spend_timings(uint16_t port, double ret[4])
{
	static const char *const names[4] = {
		"dpgate_spend_transaction_duration_seconds_sum ",
		"dpgate_spend_transaction_duration_seconds_count ",
		"dpgate_spend_commit_duration_seconds_sum ",
		"dpgate_spend_commit_duration_seconds_count ",
	};
	size_t cap = 1u << 20;
	char *text = malloc(cap);
	int found = 0;

	if (!text || http_once(port, "GET", "/metrics", NULL, NULL, text, cap) != 200) {
		free(text);
		return -1;
	}
	for (int k = 0; k < 4; k++) {
		for (const char *line = text; line && *line; line = strchr(line, '\n')) {
			line += *line == '\n';
			if (!strncmp(line, names[k], strlen(names[k]))) {
				ret[k] = strtod(line + strlen(names[k]), NULL);
				found++;
				break;
			}
		}
	}
	free(text);
	return found == 4 ? 0 : -1;
}

/* ---- the load generator -------------------------------------------------- */

typedef struct load_spec {
	uint16_t port;
	unsigned clients;
	double duration_s;
	const char *const *reqs; /* requests used round robin across clients */
	const size_t *lens;
	unsigned n_reqs;
	int expect_status;
	/* When n_ports > 0, client i talks to ports[i % n_ports] instead of
	 * port: clients spread over several servers on one database. */
	const uint16_t *ports;
	unsigned n_ports;
} load_spec;

typedef struct load_result {
	unsigned clients;
	double rate;         /* expected-status answers per second in the window */
	double p50_us, p99_us;
	uint64_t measured;   /* expected-status answers in the window */
	uint64_t expected;   /* expected-status answers in the whole cell */
	uint64_t other;      /* answers with another status, whole cell */
	uint64_t failed;     /* exchanges that failed (connection errors) */
	double server_cpu_us; /* server CPU per counted answer, when known */
} load_result;

typedef struct load_client {
	const load_spec *spec;
	unsigned index;
	pthread_barrier_t *barrier;
	const double *start; /* written by the main thread before the barrier */
	uint64_t measured, expected, other, failed;
	bench_lat lat;
	hconn conn;
} load_client;

static void *load_client_run(void *arg)
{
	load_client *lc = arg;
	const load_spec *sp = lc->spec;
	uint16_t port = sp->n_ports ? sp->ports[lc->index % sp->n_ports] : sp->port;
	double window_start, deadline;
	uint64_t i = 0;

	lc->conn.fd = -1;
	lc->conn.port = port;
	hconn_open(&lc->conn, port); /* a failure is retried by the first request */
	pthread_barrier_wait(lc->barrier);
	window_start = *lc->start + WARMUP_S;
	deadline = *lc->start + sp->duration_s;
	for (;;) {
		unsigned k = (unsigned)((lc->index + i * sp->clients) % sp->n_reqs);
		double t0 = bench_now_s(), t1;
		int status;

		if (t0 >= deadline)
			break;
		status = hconn_roundtrip(&lc->conn, sp->reqs[k], sp->lens[k], NULL, 0);
		t1 = bench_now_s();
		i++;
		if (status < 0) {
			lc->failed++;
			sleep_s(0.001);
			continue;
		}
		if (status != sp->expect_status) {
			lc->other++;
			continue;
		}
		lc->expected++;
		if (t0 >= window_start && t1 <= deadline) {
			lc->measured++;
			bench_lat_push(&lc->lat, (t1 - t0) * 1e6);
		}
	}
	hconn_close(&lc->conn);
	return NULL;
}

/*
 * Runs one cell: spec->clients threads for spec->duration_s seconds.
 * server_pid, when positive, is sampled for CPU time.  Returns 0, or -1
 * when the threads could not be started.
 */
static int load_run(const load_spec *spec, pid_t server_pid, load_result *ret)
{
	load_client *lcs = calloc(spec->clients, sizeof(*lcs));
	pthread_t *tids = calloc(spec->clients, sizeof(*tids));
	pthread_barrier_t barrier;
	double start = 0, cpu0 = NAN, cpu1, window;
	bench_lat all = {0};
	load_result r;
	unsigned started = 0;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	r.clients = spec->clients;
	if (!lcs || !tids)
		goto out;
	pthread_barrier_init(&barrier, NULL, spec->clients + 1);
	for (unsigned i = 0; i < spec->clients; i++) {
		lcs[i].spec = spec;
		lcs[i].index = i;
		lcs[i].barrier = &barrier;
		lcs[i].start = &start;
		if (pthread_create(&tids[i], NULL, load_client_run, &lcs[i]) != 0) {
			fprintf(stderr, "bench_server: cannot start client thread %u\n", i);
			exit(2); /* the barrier would wait forever */
		}
		started++;
	}
	if (server_pid > 0)
		cpu0 = process_cpu_s(server_pid);
	start = bench_now_s();
	pthread_barrier_wait(&barrier);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	cpu1 = server_pid > 0 ? process_cpu_s(server_pid) : NAN;
	pthread_barrier_destroy(&barrier);
	for (unsigned i = 0; i < started; i++) {
		r.measured += lcs[i].measured;
		r.expected += lcs[i].expected;
		r.other += lcs[i].other;
		r.failed += lcs[i].failed;
		for (size_t j = 0; j < lcs[i].lat.n; j++)
			bench_lat_push(&all, lcs[i].lat.v[j]);
		bench_lat_free(&lcs[i].lat);
	}
	window = spec->duration_s - WARMUP_S;
	r.rate = (double)r.measured / window;
	bench_sort(all.v, all.n);
	r.p50_us = bench_quantile(all.v, all.n, 0.50);
	r.p99_us = bench_quantile(all.v, all.n, 0.99);
	/* CPU over the whole cell, divided by every answer of the cell. */
	r.server_cpu_us = (r.expected + r.other) > 0 ?
				  (cpu1 - cpu0) * 1e6 / (double)(r.expected + r.other) : NAN;
	*ret = r;
	rc = 0;
out:
	bench_lat_free(&all);
	free(lcs);
	free(tids);
	return rc;
}

/* ---- ceiling 1: the bare SQLite commit loop ------------------------------- */

/*
 * Two shapes of transaction:
 *   SQL_BARE    one small INSERT per transaction (the ceiling the issue names);
 *   SQL_CHARGE  what srv_store_spend does for a charge without an
 *               Idempotency-Key, on dpgate's own schema: read the dataset row
 *               and its totals (its last ledger row), append the ledger row
 *               that carries the new totals.  It shows how much of dpgate's
 *               gap to the bare loop is SQL rather than HTTP.
 */
typedef enum sql_shape { SQL_BARE, SQL_CHARGE } sql_shape;

typedef struct sql_writer {
	const char *path;
	sql_shape shape;
	pthread_barrier_t *barrier;
	const double *start;
	double duration_s;
	uint64_t max_commits; /* when nonzero: stop after this many, untimed */
	uint64_t measured, errors;
	bench_lat lat;
} sql_writer;

static sqlite3 *sql_open(const char *path)
{
	sqlite3 *h = NULL;

	/* The open flags of server/store/store_db.c's db_open, WAL and
	 * synchronous=FULL; page size and wal_autocheckpoint stay SQLite's
	 * defaults (a bare loop), where dpgate sets 1024 and 4000. */
	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		sqlite3_close_v2(h);
		return NULL;
	}
	sqlite3_busy_timeout(h, BUSY_TIMEOUT_MS);
	/* SQLite deletes a WAL when its last connection closes, and every
	 * ceiling cell opens and closes its own connections: kept, the WAL
	 * stays at its full size between cells, so each cell starts in the
	 * steady state (overwriting in place) that the warm-up reached, as a
	 * long-running server does, not on a new file that grows. */
	{
		int persist = 1;

		sqlite3_file_control(h, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	}
	if (sqlite3_exec(h, "PRAGMA journal_mode = WAL", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(h, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK) {
		sqlite3_close_v2(h);
		return NULL;
	}
	return h;
}

/* A connection for the charge shape: as sql_open, with what server/
 * store_db.c's db_open sets beyond it (the page size, 1024, is the file's:
 * dpgate made it), so that the txn ceiling runs dpgate's transaction as
 * dpgate runs it. */
static sqlite3 *sql_open_as_dpgate(const char *path)
{
	sqlite3 *h = sql_open(path);

	if (h && (sqlite3_exec(h, "PRAGMA mmap_size = 0", NULL, NULL, NULL) != SQLITE_OK ||
		  sqlite3_exec(h, "PRAGMA wal_autocheckpoint = 4000", NULL, NULL, NULL) != SQLITE_OK)) {
		sqlite3_close_v2(h);
		return NULL;
	}
	return h;
}

static void now_text(char buf[32])
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	/* 24 bytes up to year 9999; past that the bench has no valid time. */
	if (snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000) >= 32) {
		fprintf(stderr, "bench_server: the clock is past year 9999\n");
		exit(2);
	}
}

/* One charge-shaped transaction body (after BEGIN IMMEDIATE); 0 or -1. */
static int sql_charge_body(sqlite3_stmt *get, sqlite3_stmt *ins)
{
	double spent[2] = {0, 0};
	char now[32], spent_text[64];
	int64_t charges = 0;
	int rc = -1;

	now_text(now);
	if (sqlite3_step(get) != SQLITE_ROW)
		goto out;
	/* No ledger row yet: the totals are zero. */
	if (sqlite3_column_type(get, 14) != SQLITE_NULL) {
		if (parse_pair((const char *)sqlite3_column_text(get, 7), spent) < 0)
			goto out;
		charges = sqlite3_column_int64(get, 10);
	}
	spent[0] = acct_add_up(spent[0], 0.001);
	snprintf(spent_text, sizeof(spent_text), "[%.17g,%.17g]", spent[0], spent[1]);
	sqlite3_bind_text(ins, 11, now, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(ins, 12, spent_text, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(ins, 15, charges + 1);
	if (sqlite3_step(ins) != SQLITE_DONE)
		goto out;
	rc = 0;
out:
	sqlite3_reset(get);
	sqlite3_reset(ins);
	return rc;
}

/* The statements of server/store/store_db.c's charge (ST_DATASET_GET,
 * ST_LEDGER_INSERT) on dataset 'txn'; 0 or -1. */
static int sql_prepare_charge(sqlite3 *h, sqlite3_stmt **ret_get, sqlite3_stmt **ret_ins)
{
	if (sqlite3_prepare_v2(h,
			       "SELECT d.id, d.name, d.privacy_unit, d.neighbor, d.accountant,"
			       " d.budget_epsilon, d.budget_delta, l.spent, l.reserved,"
			       " l.open_reservations, l.charges, d.archived, d.created_at,"
			       " CASE WHEN l.created_at > d.updated_at THEN l.created_at"
			       " ELSE d.updated_at END, l.seq"
			       " FROM datasets d LEFT JOIN ledger l ON l.seq ="
			       " (SELECT seq FROM ledger WHERE dataset_id = d.id ORDER BY seq DESC LIMIT 1)"
			       " WHERE d.id = 'txn'",
			       -1, ret_get, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(h,
			       "INSERT INTO ledger (dataset_id, kind, event, cost, epsilon, delta,"
			       " reservation_id, note, actor, idempotency_key, created_at, spent,"
			       " reserved, open_reservations, charges)"
			       " VALUES ('txn', 'charge',"
			       " '{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}',"
			       " '[0.001,0]', 0.001, 0, NULL, NULL, '0123456789abcdef', NULL, ?11, ?12,"
			       " '[0,0]', 0, ?15)",
			       -1, ret_ins, NULL) != SQLITE_OK)
		return -1;
	return 0;
}

static void *sql_writer_run(void *arg)
{
	sql_writer *w = arg;
	sqlite3 *h = w->shape == SQL_CHARGE ? sql_open_as_dpgate(w->path) : sql_open(w->path);
	sqlite3_stmt *begin = NULL, *ins = NULL, *commit = NULL, *get = NULL;
	double window_start, deadline;

	if (!h || sqlite3_prepare_v2(h, "BEGIN IMMEDIATE", -1, &begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(h, "COMMIT", -1, &commit, NULL) != SQLITE_OK)
		w->errors++;
	if (h && w->shape == SQL_BARE &&
	    sqlite3_prepare_v2(h, "INSERT INTO t (v) VALUES ('charge 0.001')", -1, &ins, NULL) !=
		    SQLITE_OK)
		w->errors++;
	if (h && w->shape == SQL_CHARGE && sql_prepare_charge(h, &get, &ins) < 0)
		w->errors++;
	pthread_barrier_wait(w->barrier);
	window_start = *w->start + WARMUP_S;
	deadline = *w->start + w->duration_s;
	for (uint64_t done = 0; w->errors == 0; done++) {
		double t0 = bench_now_s(), t1;
		int body;

		if (w->max_commits ? done >= w->max_commits : t0 >= deadline)
			break;
		if (sqlite3_step(begin) != SQLITE_DONE) {
			sqlite3_reset(begin);
			w->errors++;
			break;
		}
		sqlite3_reset(begin);
		if (w->shape == SQL_BARE) {
			body = sqlite3_step(ins) == SQLITE_DONE ? 0 : -1;
			sqlite3_reset(ins);
		} else {
			body = sql_charge_body(get, ins);
		}
		if (body < 0 || sqlite3_step(commit) != SQLITE_DONE) {
			w->errors++;
			sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
		}
		sqlite3_reset(commit);
		t1 = bench_now_s();
		if (t0 >= window_start && t1 <= deadline) {
			w->measured++;
			bench_lat_push(&w->lat, (t1 - t0) * 1e6);
		}
	}
	sqlite3_finalize(begin);
	sqlite3_finalize(ins);
	sqlite3_finalize(commit);
	sqlite3_finalize(get);
	sqlite3_close_v2(h);
	return NULL;
}

/*
 * Commits per second of `writers` connections on path.  SQL_BARE creates
 * its one table if needed; SQL_CHARGE expects a file that already holds
 * dpgate's schema and adds (once) the dataset 'txn'.  With max_commits, each
 * writer stops after that many commits instead (a warm-up).
 */
static int sql_ceiling(const char *path, sql_shape shape, unsigned writers, double duration_s,
		       uint64_t max_commits, load_result *ret)
{
	sql_writer w[SQLITE_WRITERS_MANY];
	pthread_t tids[SQLITE_WRITERS_MANY];
	pthread_barrier_t barrier;
	double start = 0;
	bench_lat all = {0};
	load_result r;
	sqlite3 *h;
	char now[32], sql[512];
	uint64_t errors = 0;

	if (writers > SQLITE_WRITERS_MANY)
		return -1;
	now_text(now);
	snprintf(sql, sizeof(sql),
		 "INSERT OR IGNORE INTO datasets (id, name, privacy_unit, neighbor, accountant,"
		 " budget_epsilon, budget_delta, created_at, updated_at)"
		 " VALUES ('txn', 'txn', 'record', 'add_remove', 'basic', 1e6, 1e-5, '%s', '%s')",
		 now, now);
	h = sql_open(path);
	if (!h || sqlite3_exec(h,
			       shape == SQL_BARE ?
				       "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)" :
				       sql,
			       NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_server: cannot prepare %s: %s\n", path,
			h ? sqlite3_errmsg(h) : "out of memory");
		sqlite3_close_v2(h);
		return -1;
	}
	memset(&r, 0, sizeof(r));
	memset(w, 0, sizeof(w));
	pthread_barrier_init(&barrier, NULL, writers + 1);
	for (unsigned i = 0; i < writers; i++) {
		w[i].path = path;
		w[i].shape = shape;
		w[i].barrier = &barrier;
		w[i].start = &start;
		w[i].duration_s = duration_s;
		w[i].max_commits = max_commits;
		if (pthread_create(&tids[i], NULL, sql_writer_run, &w[i]) != 0) {
			fprintf(stderr, "bench_server: cannot start writer thread\n");
			exit(2);
		}
	}
	start = bench_now_s();
	pthread_barrier_wait(&barrier);
	for (unsigned i = 0; i < writers; i++) {
		pthread_join(tids[i], NULL);
		r.measured += w[i].measured;
		errors += w[i].errors;
		for (size_t j = 0; j < w[i].lat.n; j++)
			bench_lat_push(&all, w[i].lat.v[j]);
		bench_lat_free(&w[i].lat);
	}
	pthread_barrier_destroy(&barrier);
	sqlite3_close_v2(h);
	r.clients = writers;
	r.rate = (double)r.measured / (duration_s - WARMUP_S);
	r.failed = errors;
	bench_sort(all.v, all.n);
	r.p50_us = bench_quantile(all.v, all.n, 0.50);
	r.p99_us = bench_quantile(all.v, all.n, 0.99);
	r.server_cpu_us = NAN;
	bench_lat_free(&all);
	*ret = r;
	if (errors)
		fprintf(stderr, "bench_server: %llu SQLite errors on %s\n",
			(unsigned long long)errors, path);
	return errors ? -1 : 0;
}

/* ---- ceiling 2: a bare libmicrohttpd server ------------------------------- */

/* About the size of dpgate's answer to a charge. */
static const char fixed_body[] =
	"{\"id\":1,\"budget\":{\"budget\":{\"epsilon\":1000000.0,\"delta\":1.0000000000000001e-05},"
	"\"spent\":{\"epsilon\":0.001,\"delta\":0.0},\"reserved\":{\"epsilon\":0.0,\"open\":0},"
	"\"remaining\":{\"epsilon\":999999.999,\"delta\":0.0},\"charges\":1,\"accountant\":\"basic\"}}";

/* The bare server's handler: the fixed body to every request. */
static enum MHD_Result fixed_handler(void *cls, struct MHD_Connection *conn, const char *url,
				     const char *method, const char *version,
				     const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	static const char seen = 1; /* a constant: only its address is used */
	struct MHD_Response *r;
	enum MHD_Result ok;

	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)upload_data;
	if (!*con_cls) {
		*con_cls = (void *)&seen;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	/* One response per request, as dpgate does. */
	r = MHD_create_response_from_buffer(sizeof(fixed_body) - 1, (void *)fixed_body,
					    MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	ok = MHD_queue_response(conn, 201, r);
	MHD_destroy_response(r);
	return ok;
}

/* Starts the fixed-body server with server/http/http_serve.c's flags; NULL on
 * failure. */
static struct MHD_Daemon *bare_http_start(unsigned threads, uint16_t *ret_port)
{
	struct sockaddr_in addr;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = 0;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
				     MHD_USE_ERROR_LOG,
			     0, NULL, NULL, fixed_handler, NULL,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
			     MHD_OPTION_THREAD_POOL_SIZE, threads,
			     MHD_OPTION_CONNECTION_TIMEOUT, 30u,
			     MHD_OPTION_CONNECTION_LIMIT, 1024u,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024), /* as dpgate */
			     MHD_OPTION_END);
	if (!d)
		return NULL;
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || info->port == 0) {
		MHD_stop_daemon(d);
		return NULL;
	}
	*ret_port = info->port;
	return d;
}

/* ---- the dpgate process -------------------------------------------------- */

typedef struct dpgate {
	const char *bin;
	char db[PATH_MAX];
	char data_dir[PATH_MAX];
	char log[PATH_MAX];
	unsigned threads;
	pid_t pid;
	uint16_t port;
} dpgate;

/*
 * Runs argv to completion with stdout captured into out (NUL-terminated,
 * truncated to cap - 1) and stderr appended to log_path.  Returns the exit
 * status, or -1 when it could not run or was killed.
 */
static int run_cmd(char *const argv[], const char *log_path, char *out, size_t cap)
{
	int pipefd[2], status;
	size_t n = 0;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	if (pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(pipefd[1], 1);
		if (fd >= 0)
			dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		char sink[4096];
		ssize_t r;

		if (out && n + 1 < cap)
			r = read(pipefd[0], out + n, cap - 1 - n);
		else
			r = read(pipefd[0], sink, sizeof(sink));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (out && n + 1 < cap)
			n += (size_t)r;
	}
	if (out && cap > 0)
		out[n] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Starts `dpgate serve` on 127.0.0.1:0 and learns its port from the log. */
static int dpgate_start(dpgate *g)
{
	char threads[16];
	struct stat st;
	off_t from = 0;
	double deadline;
	pid_t pid;

	snprintf(threads, sizeof(threads), "%u", g->threads);
	if (stat(g->log, &st) == 0)
		from = st.st_size;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(g->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		char *const argv[] = {(char *)g->bin, "serve", "--db", g->db, "--listen", "127.0.0.1:0",
				      "--data-dir", g->data_dir, "--threads", threads, "--quiet", NULL};

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(g->bin, argv);
		_exit(127);
	}
	g->pid = pid;
	g->port = 0;
	deadline = bench_now_s() + START_TIMEOUT_S;
	while (bench_now_s() < deadline) {
		char buf[8192];
		const char *p;
		ssize_t n = 0;
		int fd, status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "bench_server: dpgate exited at start; see %s\n", g->log);
			g->pid = -1;
			return -1;
		}
		fd = open(g->log, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = pread(fd, buf, sizeof(buf) - 1, from);
			close(fd);
		}
		buf[n > 0 ? n : 0] = '\0';
		p = strstr(buf, "\"url\":\"http://127.0.0.1:");
		if (p) {
			long port = strtol(p + strlen("\"url\":\"http://127.0.0.1:"), NULL, 10);

			if (port > 0 && port < 65536) {
				g->port = (uint16_t)port;
				break;
			}
		}
		sleep_s(0.02);
	}
	if (g->port == 0 || http_once(g->port, "GET", "/healthz", NULL, NULL, NULL, 0) != 200) {
		fprintf(stderr, "bench_server: dpgate did not come up; see %s\n", g->log);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		g->pid = -1;
		return -1;
	}
	return 0;
}

/* SIGTERM (graceful: the server closes the database cleanly), then wait. */
static int dpgate_stop(dpgate *g)
{
	double deadline = bench_now_s() + STOP_TIMEOUT_S;
	int status;

	if (g->pid <= 0)
		return 0;
	kill(g->pid, SIGTERM);
	while (bench_now_s() < deadline) {
		pid_t w = waitpid(g->pid, &status, WNOHANG);

		if (w == g->pid) {
			g->pid = -1;
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		}
		sleep_s(0.02);
	}
	fprintf(stderr, "bench_server: dpgate did not stop in %.0f s; killing it\n", STOP_TIMEOUT_S);
	kill(g->pid, SIGKILL);
	waitpid(g->pid, NULL, 0);
	g->pid = -1;
	return -1;
}

/* Stops the server, saying so when it did not stop cleanly. */
static void dpgate_stop_noting(dpgate *g)
{
	if (dpgate_stop(g) < 0)
		fprintf(stderr, "bench_server: dpgate did not stop cleanly; see %s\n", g->log);
}

static int dpgate_verify(const dpgate *g)
{
	char *const argv[] = {(char *)g->bin, "verify", "--db", (char *)g->db, NULL};

	return run_cmd(argv, g->log, NULL, 0);
}

/* Creates an admin key; writes it (the last line of stdout) to ret_key. */
static int dpgate_admin_key(const dpgate *g, char *ret_key, size_t cap)
{
	char *const argv[] = {(char *)g->bin, "keys", "create", "--db", (char *)g->db, "--role",
			      "admin", "--note", "bench_server", NULL};
	char out[4096];
	char *last, *end;

	if (run_cmd(argv, g->log, out, sizeof(out)) != 0)
		return -1;
	end = out + strlen(out);
	while (end > out && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		*--end = '\0';
	last = strrchr(out, '\n');
	last = last ? last + 1 : out;
	if (*last == '\0' || strlen(last) >= cap)
		return -1;
	snprintf(ret_key, cap, "%s", last);
	return 0;
}

static int create_dataset(uint16_t port, const char *key, const char *id)
{
	char body[256], answer[1024];
	int status;

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":1e6,\"delta\":1e-5},\"accountant\":\"basic\"}",
		 id);
	status = http_once(port, "POST", "/v1/datasets", key, body, answer, sizeof(answer));
	if (status != 201) {
		fprintf(stderr, "bench_server: creating dataset %s: status %d: %s\n", id, status, answer);
		return -1;
	}
	return 0;
}

/* ---- ledger prefill (server stopped) ------------------------------------- */

/* The row a prefill copies and the totals the copies carry on from. */
typedef struct prefill_template {
	int64_t seq;         /* the dataset's newest charge row */
	int64_t have;        /* its charge rows */
	double cost[2], spent[2];
	int64_t charges;
} prefill_template;

/*
 * The newest charge row of dataset `id` and the number of its charge
 * rows.  The statement is left in *s when a step fails, so that the
 * connection's message still names what failed; the caller finalizes it.
 */
static int prefill_find_template(sqlite3 *h, const char *id, sqlite3_stmt **s,
				 prefill_template *t)
{
	if (sqlite3_prepare_v2(h,
			       "SELECT max(seq), count(*) FROM ledger WHERE dataset_id = ?1"
			       " AND kind = 'charge'",
			       -1, s, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(*s, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(*s) != SQLITE_ROW || sqlite3_column_type(*s, 0) == SQLITE_NULL)
		return -1;
	t->seq = sqlite3_column_int64(*s, 0);
	t->have = sqlite3_column_int64(*s, 1);
	sqlite3_finalize(*s);
	*s = NULL;
	return 0;
}

/* The template's cost and the dataset's totals, which it carries; as
 * prefill_find_template for *s. */
static int prefill_read_totals(sqlite3 *h, const char *id, sqlite3_stmt **s,
			       prefill_template *t)
{
	/* The template must be the dataset's last row: its totals are the
	 * dataset's, and the copies follow it. */
	if (sqlite3_prepare_v2(h,
			       "SELECT cost, spent, charges FROM ledger WHERE seq = ?1 AND seq ="
			       " (SELECT max(seq) FROM ledger WHERE dataset_id = ?2)"
			       " AND open_reservations = 0",
			       -1, s, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(*s, 1, t->seq);
	sqlite3_bind_text(*s, 2, id, -1, SQLITE_STATIC);
	if (sqlite3_step(*s) != SQLITE_ROW ||
	    parse_pair((const char *)sqlite3_column_text(*s, 0), t->cost) < 0 ||
	    parse_pair((const char *)sqlite3_column_text(*s, 1), t->spent) < 0)
		return -1;
	t->charges = sqlite3_column_int64(*s, 2);
	sqlite3_finalize(*s);
	*s = NULL;
	return 0;
}

/* Appends `add` copies of the template, each with the running totals; as
 * prefill_find_template for *s. */
static int prefill_insert_copies(sqlite3 *h, sqlite3_stmt **s, prefill_template *t, long add)
{
	char spent_text[128];

	if (sqlite3_prepare_v2(h,
			       "INSERT INTO ledger (dataset_id, kind, event, cost, epsilon, delta,"
			       " reservation_id, note, actor, idempotency_key, created_at, spent,"
			       " reserved, open_reservations, charges)"
			       " SELECT dataset_id, kind, event, cost, epsilon, delta, NULL,"
			       " 'bench prefill', actor, NULL, created_at, ?2, reserved, 0, ?3"
			       " FROM ledger WHERE seq = ?1",
			       -1, s, NULL) != SQLITE_OK)
		return -1;
	/* New rows follow every existing row of the dataset, so adding their
	 * costs to the totals in order is the verifier's replay. */
	for (long i = 0; i < add; i++) {
		t->spent[0] = acct_add_up(t->spent[0], t->cost[0]);
		t->spent[1] = acct_add_up(t->spent[1], t->cost[1]);
		snprintf(spent_text, sizeof(spent_text), "[%.17g,%.17g]", t->spent[0], t->spent[1]);
		sqlite3_bind_int64(*s, 1, t->seq);
		sqlite3_bind_text(*s, 2, spent_text, -1, SQLITE_STATIC);
		sqlite3_bind_int64(*s, 3, t->charges + i + 1);
		if (sqlite3_step(*s) != SQLITE_DONE || sqlite3_changes(h) != 1)
			return -1;
		sqlite3_reset(*s);
	}
	sqlite3_finalize(*s);
	*s = NULL;
	return 0;
}

/*
 * Brings dataset `id`'s ledger to `rows` charge rows in one transaction, by
 * copying its newest row (a charge written by the server), each copy
 * carrying the running totals (spent, charges) exactly as the server would
 * have written them.  Returns the number of rows inserted, or -1.
 */
static long prefill_ledger(const char *db_path, const char *id, long rows)
{
	sqlite3 *h = sql_open(db_path);
	sqlite3_stmt *s = NULL;
	prefill_template t;
	long add = -1;

	if (!h)
		return -1;
	if (sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    prefill_find_template(h, id, &s, &t) < 0)
		goto out;
	if (rows > t.have && (prefill_read_totals(h, id, &s, &t) < 0 ||
			      prefill_insert_copies(h, &s, &t, rows - t.have) < 0))
		goto out;
	add = rows > t.have ? rows - t.have : 0;
	if (sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		add = -1;
out:
	if (add < 0)
		fprintf(stderr, "bench_server: prefill of %s failed: %s\n", id, sqlite3_errmsg(h));
	sqlite3_finalize(s);
	sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_wal_checkpoint_v2(h, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	sqlite3_close_v2(h);
	return add;
}

/* Counts ledger rows of kind 'charge' and the sum over datasets of the
 * charges counter their last ledger row carries. */
static int count_charges(const char *db_path, int64_t *ret_rows, int64_t *ret_stored)
{
	sqlite3 *h = sql_open(db_path);
	sqlite3_stmt *s = NULL;
	int rc = -1;

	if (!h)
		return -1;
	if (sqlite3_prepare_v2(h,
			       "SELECT (SELECT count(*) FROM ledger WHERE kind = 'charge'),"
			       " (SELECT total((SELECT charges FROM ledger WHERE dataset_id = d.id"
			       " ORDER BY seq DESC LIMIT 1)) FROM datasets d)",
			       -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW) {
		*ret_rows = sqlite3_column_int64(s, 0);
		*ret_stored = (int64_t)sqlite3_column_double(s, 1);
		rc = 0;
	}
	sqlite3_finalize(s);
	sqlite3_close_v2(h);
	return rc;
}

/* ---- admission latency --------------------------------------------------- */

typedef struct admission {
	long rows;           /* ledger rows before the timed charges */
	double charge_p50_us, charge_p99_us, charge_mean_us;
	double dry_p50_us, dry_p99_us;
	uint64_t ok;         /* 201 answers (warm-up included) */
	uint64_t bad;        /* other answers */
} admission;

/*
 * Times single requests on one keep-alive connection, interleaved across
 * the ledger sizes (dry-runs of every size, then charges of every size,
 * sample after sample), so that every size sees the same disk and load.
 * Fills a[i] for the datasets "rows<a[i].rows>".  Returns 0 or -1.
 */
static int measure_admission(uint16_t port, const char *key, unsigned n_sizes, unsigned samples,
			     admission *a)
{
	char *charge[N_LEDGER_SIZES] = {0}, *dry[N_LEDGER_SIZES] = {0};
	size_t charge_len[N_LEDGER_SIZES], dry_len[N_LEDGER_SIZES];
	double *lat_charge = calloc((size_t)n_sizes * samples, sizeof(double));
	double *lat_dry = calloc((size_t)n_sizes * samples, sizeof(double));
	hconn *c = malloc(sizeof(*c));
	int rc = -1;

	if (!lat_charge || !lat_dry || !c)
		goto out;
	for (unsigned i = 0; i < n_sizes; i++) {
		char path[128];

		snprintf(path, sizeof(path), "/v1/datasets/rows%ld/charges", a[i].rows);
		charge[i] = build_request("POST", path, key, CHARGE_BODY, &charge_len[i]);
		snprintf(path, sizeof(path), "/v1/datasets/rows%ld/dry-run", a[i].rows);
		dry[i] = build_request("POST", path, key, DRY_RUN_BODY, &dry_len[i]);
		if (!charge[i] || !dry[i])
			goto out;
		a[i].ok = a[i].bad = 0;
	}
	c->fd = -1;
	c->port = port;
	c->have = 0;
	for (unsigned k = 0; k < ADMISSION_WARMUP + samples; k++) {
		for (int pass = 0; pass < 2; pass++) {
			for (unsigned i = 0; i < n_sizes; i++) {
				double t0 = bench_now_s(), t1;
				int status = pass == 0 ?
						     hconn_roundtrip(c, dry[i], dry_len[i], NULL, 0) :
						     hconn_roundtrip(c, charge[i], charge_len[i], NULL, 0);

				t1 = bench_now_s();
				if (pass == 1 && status == 201)
					a[i].ok++;
				else if (status != (pass == 0 ? 200 : 201))
					a[i].bad++;
				if (k >= ADMISSION_WARMUP)
					(pass == 0 ? lat_dry : lat_charge)[(size_t)i * samples + k -
									   ADMISSION_WARMUP] =
						(t1 - t0) * 1e6;
			}
		}
	}
	hconn_close(c);
	for (unsigned i = 0; i < n_sizes; i++) {
		double *lc = lat_charge + (size_t)i * samples, *ld = lat_dry + (size_t)i * samples;
		double sum = 0;

		for (unsigned j = 0; j < samples; j++)
			sum += lc[j];
		a[i].charge_mean_us = sum / samples;
		bench_sort(lc, samples);
		bench_sort(ld, samples);
		a[i].charge_p50_us = bench_quantile(lc, samples, 0.5);
		a[i].charge_p99_us = bench_quantile(lc, samples, 0.99);
		a[i].dry_p50_us = bench_quantile(ld, samples, 0.5);
		a[i].dry_p99_us = bench_quantile(ld, samples, 0.99);
	}
	rc = 0;
out:
	for (unsigned i = 0; i < n_sizes; i++) {
		free(charge[i]);
		free(dry[i]);
	}
	free(c);
	free(lat_charge);
	free(lat_dry);
	return rc;
}

/*
 * Sends n charges one after another (untimed), adding the 201 answers to
 * *ok and the others to *bad.
 */
static void warm_charges(uint16_t port, const char *req, size_t len, unsigned n, uint64_t *ok,
			 uint64_t *bad)
{
	hconn *c = malloc(sizeof(*c));

	if (!c) {
		(*bad)++;
		return;
	}
	c->fd = -1;
	c->port = port;
	c->have = 0;
	for (unsigned i = 0; i < n; i++) {
		if (hconn_roundtrip(c, req, len, NULL, 0) == 201)
			(*ok)++;
		else
			(*bad)++;
	}
	hconn_close(c);
	free(c);
}

/*
 * The first RESTART_CHARGES charges after a restart, timed on one keep-alive
 * connection.  A clean stop checkpoints and deletes the WAL, and serve
 * writes it out again at start; with cut_wal the file is cut to 0 bytes
 * right after the start, as it was before serve wrote it out, so that the
 * commits grow it.  Cutting it is safe only because nothing has been
 * written since the start: the WAL holds no frame, and SQLite writes its
 * header and frames at offsets it computes, not at the file's end.
 * Returns the charges per second, or a negative number on failure.
 */
static double first_charges_after_restart(dpgate *g, const char *req, size_t len, bool cut_wal,
					  uint64_t *ok, uint64_t *bad)
{
	char wal[PATH_MAX + 8];
	uint64_t ok0 = *ok;
	double t0;

	dpgate_stop_noting(g);
	if (dpgate_start(g) < 0)
		return -1;
	snprintf(wal, sizeof(wal), "%s-wal", g->db);
	if (cut_wal && truncate(wal, 0) < 0) {
		fprintf(stderr, "bench_server: cannot cut %s: %s\n", wal, strerror(errno));
		return -1;
	}
	t0 = bench_now_s();
	warm_charges(g->port, req, len, RESTART_CHARGES, ok, bad);
	if (*ok - ok0 != RESTART_CHARGES)
		return -1;
	return RESTART_CHARGES / (bench_now_s() - t0);
}

/* ---- the run ------------------------------------------------------------- */

typedef struct options {
	const char *dpgate;
	const char *dir;
	double duration_s;
	unsigned threads;
	unsigned samples;
	unsigned rounds;
	long max_rows;
	bool keep;
	bool pg;
} options;

static const char usage[] =
	"usage: bench_server [--dpgate PATH] [--duration S] [--rounds N] [--threads N]\n"
	"                    [--dir DIR] [--samples N] [--max-rows N] [--keep]\n"
	"\n"
	"  --dpgate PATH  the dpgate binary (default: $DPGATE_BIN, else the one built\n"
	"                 in this tree: " BENCH_DEFAULT_DPGATE ")\n"
	"  --duration S   seconds per throughput cell, first 0.25 s not counted (default 3)\n"
	"  --rounds N     rounds over every throughput cell; the table shows the median\n"
	"                 of the rounds (default 3); as many restart pairs\n"
	"  --threads N    HTTP worker threads for dpgate and the bare server (default 8)\n"
	"  --dir DIR      where the temporary databases go (default $TMPDIR or /tmp);\n"
	"                 the SQLite ceilings run in the same directory\n"
	"  --samples N    timed charges per ledger size (default 200)\n"
	"  --max-rows N   largest ledger size measured (default 1000000)\n"
	"  --keep         keep the temporary directory\n"
	"  --pg           PostgreSQL mode: the bare SQLite and libpq commit loops, dpgate\n"
	"                 on SQLite, on PostgreSQL behind one server and behind three,\n"
	"                 with 1, 8 and 64 clients, on a throwaway cluster (tests/pg/)\n";

/* A whole decimal number in [lo, hi] from text, or -1. */
static int parse_whole(const char *text, long lo, long hi, long *ret)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < lo || v > hi)
		return -1;
	*ret = v;
	return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
	static const struct option opts[] = {
		{"dpgate", required_argument, NULL, 'b'},
		{"duration", required_argument, NULL, 'd'},
		{"rounds", required_argument, NULL, 'R'},
		{"threads", required_argument, NULL, 't'},
		{"dir", required_argument, NULL, 'D'},
		{"samples", required_argument, NULL, 's'},
		{"max-rows", required_argument, NULL, 'r'},
		{"keep", no_argument, NULL, 'k'},
		{"pg", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->dpgate = getenv("DPGATE_BIN") ? getenv("DPGATE_BIN") : BENCH_DEFAULT_DPGATE;
	o->dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	o->duration_s = DEFAULT_DURATION_S;
	o->threads = DEFAULT_SERVER_THREADS;
	o->samples = DEFAULT_SAMPLES;
	o->rounds = DEFAULT_ROUNDS;
	o->max_rows = DEFAULT_MAX_ROWS;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		long v;

		errno = 0;
		switch (c) {
		case 'b': o->dpgate = optarg; break;
		case 'D': o->dir = optarg; break;
		case 'k': o->keep = true; break;
		case 'P': o->pg = true; break;
		case 'd':
			o->duration_s = strtod(optarg, &end);
			if (*end || !(o->duration_s >= 2 * WARMUP_S && o->duration_s <= 60))
				goto bad;
			break;
		case 'R':
			if (parse_whole(optarg, 1, MAX_ROUNDS, &v) < 0)
				goto bad;
			o->rounds = (unsigned)v;
			break;
		case 't':
			if (parse_whole(optarg, 1, 64, &v) < 0)
				goto bad;
			o->threads = (unsigned)v;
			break;
		case 's':
			if (parse_whole(optarg, 10, 100000, &v) < 0)
				goto bad;
			o->samples = (unsigned)v;
			break;
		case 'r':
			if (parse_whole(optarg, 10, 100000000, &o->max_rows) < 0)
				goto bad;
			break;
		case 'h': fputs(usage, stdout); exit(0);
		default: goto bad;
		}
	}
	if (optind != argc)
		goto bad;
	return 0;
bad:
	fputs(usage, stderr);
	return -1;
}

/* The throughput cells, measured once per round in this order. */
enum cell {
	C_SQL_1, C_SQL_8, C_TXN_1,
	C_HTTP_1, C_HTTP_8, C_HTTP_64,
	C_ONE_1, C_ONE_8, C_ONE_64,
	C_SPREAD_1, C_SPREAD_8, C_SPREAD_64,
	C__COUNT
};

static const char *const cell_names[C__COUNT] = {
	[C_SQL_1] = "sqlite_commit_1", [C_SQL_8] = "sqlite_commit_8",
	[C_TXN_1] = "sqlite_charge_txn_1",
	[C_HTTP_1] = "http_1", [C_HTTP_8] = "http_8", [C_HTTP_64] = "http_64",
	[C_ONE_1] = "dpgate_one_1", [C_ONE_8] = "dpgate_one_8", [C_ONE_64] = "dpgate_one_64",
	[C_SPREAD_1] = "dpgate_100_1", [C_SPREAD_8] = "dpgate_100_8",
	[C_SPREAD_64] = "dpgate_100_64",
};

/* Folds one cell's rounds: medians of the per-round figures, sums of
 * counts.  Round i's figures of the cell are first[i * stride]. */
static load_result fold_column(const load_result *first, size_t stride, unsigned n)
{
	double rate[MAX_ROUNDS], p50[MAX_ROUNDS], p99[MAX_ROUNDS], cpu[MAX_ROUNDS];
	load_result r;

	memset(&r, 0, sizeof(r));
	for (unsigned i = 0; i < n; i++) {
		const load_result *x = &first[i * stride];

		rate[i] = x->rate;
		p50[i] = x->p50_us;
		p99[i] = x->p99_us;
		cpu[i] = x->server_cpu_us;
		r.clients = x->clients;
		r.measured += x->measured;
		r.expected += x->expected;
		r.other += x->other;
		r.failed += x->failed;
	}
	r.rate = bench_median(rate, n);
	r.p50_us = bench_median(p50, n);
	r.p99_us = bench_median(p99, n);
	r.server_cpu_us = isnan(cpu[0]) ? NAN : bench_median(cpu, n);
	return r;
}

static load_result fold_rounds(load_result rounds[][C__COUNT], unsigned n, enum cell c)
{
	return fold_column(&rounds[0][c], C__COUNT, n);
}

static json_t *cell_json(const load_result *r, const load_result rounds[][C__COUNT], unsigned n,
			 enum cell c)
{
	json_t *per_round = json_array();
	json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:I, s:I, s:I}", "clients", (int)r->clients,
			      "rate", r->rate, "p50_us", isnan(r->p50_us) ? -1.0 : r->p50_us,
			      "p99_us", isnan(r->p99_us) ? -1.0 : r->p99_us, "measured",
			      (json_int_t)r->measured, "other_status", (json_int_t)r->other,
			      "failed", (json_int_t)r->failed);

	for (unsigned i = 0; i < n; i++)
		json_array_append_new(per_round, json_real(rounds[i][c].rate));
	json_object_set_new(o, "rate_per_round", per_round);
	if (!isnan(r->server_cpu_us))
		json_object_set_new(o, "server_cpu_us", json_real(r->server_cpu_us));
	return o;
}

static void print_cell(const char *what, const load_result *r, const char *ratio)
{
	char cpu[32] = "-";

	if (!isnan(r->server_cpu_us))
		snprintf(cpu, sizeof(cpu), "%.0f", r->server_cpu_us);
	printf("  %-22s %7u %9.0f %9.0f %9.0f %7s %6llu  %s\n", what, r->clients, r->rate,
	       r->p50_us, r->p99_us, cpu, (unsigned long long)(r->other + r->failed), ratio);
}

/* The figures the performance goals are stated in: dpgate's CPU time per
 * charge with one client, and charges per second with 1, 8 and 64 clients
 * over the bare commit loop of the same rounds. */
static void print_goals(const load_result res[C__COUNT])
{
	printf("  goals: CPU per one-client charge %.0f us (one dataset), %.0f us (100 datasets);\n"
	       "         charges/s over the bare commit loop, one dataset / 100 datasets:",
	       res[C_ONE_1].server_cpu_us, res[C_SPREAD_1].server_cpu_us);
	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++)
		printf("%s %u client%s %.2f / %.2f", i ? "," : "", client_counts[i],
		       client_counts[i] == 1 ? "" : "s", res[C_ONE_1 + i].rate / res[C_SQL_1].rate,
		       res[C_SPREAD_1 + i].rate / res[C_SQL_1].rate);
	printf("\n");
}

/* The same figures for the JSON line. */
static json_t *goals_json(const load_result res[C__COUNT])
{
	json_t *one = json_object(), *spread = json_object();

	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++) {
		char clients[16];

		snprintf(clients, sizeof(clients), "%u", client_counts[i]);
		json_object_set_new(one, clients,
				    json_real(res[C_ONE_1 + i].rate / res[C_SQL_1].rate));
		json_object_set_new(spread, clients,
				    json_real(res[C_SPREAD_1 + i].rate / res[C_SQL_1].rate));
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "cpu_us_one_client",
			 isnan(res[C_ONE_1].server_cpu_us) ? json_null()
							   : json_real(res[C_ONE_1].server_cpu_us),
			 "cpu_us_one_client_100_datasets",
			 isnan(res[C_SPREAD_1].server_cpu_us) ? json_null()
							      : json_real(res[C_SPREAD_1].server_cpu_us),
			 "ratio_commit_1", one, "ratio_commit_1_100_datasets", spread);
}

static void print_header(const char *title)
{
	printf("\n%s\n", title);
	printf("  %-22s %7s %9s %9s %9s %7s %6s  %s\n", "", "clients", "per_s", "p50_us",
	       "p99_us", "cpu_us", "errors", "ratios");
}

/* Prints the machine-readable line. */
static void print_json_line(const json_t *report)
{
	char *line = json_dumps(report, JSON_COMPACT | JSON_REAL_PRECISION(6));

	if (line)
		printf("%s\n", line);
	free(line);
}

/* How both modes' tables open: the legend, then the section `title`
 * with the bare SQLite commit loop's cells for 1 and 8 writers. */
static void print_commit_ceiling(const char *legend, const char *title, const load_result *one,
				 const load_result *eight)
{
	fputs(legend, stdout);
	print_header(title);
	print_cell("1 INSERT/txn, writers", one, "");
	print_cell("1 INSERT/txn, writers", eight, "");
}

/* ---- PostgreSQL mode (--pg) ----------------------------------------------- */

/*
 * One run, so that every figure sees the same disk and neighbours: the
 * bare SQLite commit loop and dpgate on SQLite (as in the default mode),
 * the bare libpq commit loop on a throwaway PostgreSQL cluster
 * (tests/pg/pg_cluster.h; fsync and synchronous_commit on, the server's
 * defaults otherwise), dpgate on a database of that cluster behind one
 * server, and the same database behind PG_SERVERS servers with the
 * clients spread over them (client i on server i % PG_SERVERS, so one
 * client is on one server).  Each cell with 1, 8 and 64 clients, one
 * dataset, every round in the same order; the table shows medians.
 */
#define PG_SERVERS 3

enum pg_cell {
	P_SQL_1, P_SQL_8,
	P_LITE_1, P_LITE_8, P_LITE_64,
	P_LOOP_1, P_LOOP_8, P_LOOP_64,
	P_ONE_1, P_ONE_8, P_ONE_64,
	P_THREE_1, P_THREE_8, P_THREE_64,
	P__COUNT
};

static const char *const pg_cell_names[P__COUNT] = {
	[P_SQL_1] = "sqlite_commit_1", [P_SQL_8] = "sqlite_commit_8",
	[P_LITE_1] = "dpgate_sqlite_1", [P_LITE_8] = "dpgate_sqlite_8",
	[P_LITE_64] = "dpgate_sqlite_64",
	[P_LOOP_1] = "libpq_commit_1", [P_LOOP_8] = "libpq_commit_8",
	[P_LOOP_64] = "libpq_commit_64",
	[P_ONE_1] = "dpgate_pg_1server_1", [P_ONE_8] = "dpgate_pg_1server_8",
	[P_ONE_64] = "dpgate_pg_1server_64",
	[P_THREE_1] = "dpgate_pg_3servers_1", [P_THREE_8] = "dpgate_pg_3servers_8",
	[P_THREE_64] = "dpgate_pg_3servers_64",
};

typedef struct pg_run {
	const options *o;
	char tmpl[PATH_MAX];
	char sql_path[PATH_MAX + 32];
	struct pgc_cluster *cluster;
	char loop_url[PGC_URL_MAX];
	dpgate lite;
	dpgate pg[PG_SERVERS];
	uint16_t pg_ports[PG_SERVERS];
	bool pg_served;        /* this dpgate serves --db postgresql:// */
	char *lite_req, *pg_req;
	size_t lite_len, pg_len;
	load_result (*rounds)[P__COUNT];
	load_result res[P__COUNT];
	uint64_t lite_201, pg_201, loop_commits;
	bool clean;
} pg_run;

/* A server's database, data directory and log; -1 when a path is cut. */
static int pg_dpgate_paths(dpgate *g, const pg_run *run, const char *db, const char *name)
{
	g->bin = run->o->dpgate;
	g->threads = run->o->threads;
	g->pid = -1;
	if ((size_t)snprintf(g->db, sizeof(g->db), "%s", db) >= sizeof(g->db) ||
	    (size_t)snprintf(g->data_dir, sizeof(g->data_dir), "%s/data-%s", run->tmpl, name) >=
		    sizeof(g->data_dir) ||
	    (size_t)snprintf(g->log, sizeof(g->log), "%s/dpgate-%s.log", run->tmpl, name) >=
		    sizeof(g->log)) {
		fprintf(stderr, "bench_server: the path %s is too long\n", run->tmpl);
		return -1;
	}
	mkdir(g->data_dir, 0700);
	return 0;
}

/* An admin key (keys create migrates a new database), the server G
 * started, dataset 'one' and its charge request; then warm-up charges,
 * untimed. */
static int pg_prepare_server(dpgate *g, char **ret_req, size_t *ret_len, uint64_t *ok,
			     bool *clean)
{
	char key[256];
	uint64_t bad = 0;

	if (dpgate_admin_key(g, key, sizeof(key)) < 0 || dpgate_start(g) < 0 ||
	    create_dataset(g->port, key, "one") < 0)
		return -1;
	*ret_req = build_request("POST", "/v1/datasets/one/charges", key, CHARGE_BODY, ret_len);
	if (!*ret_req)
		return -1;
	warm_charges(g->port, *ret_req, *ret_len, WARM_COMMITS, ok, &bad);
	*clean &= bad == 0;
	return 0;
}

/* dpgate on SQLite and the SQLite ceiling, warmed past the WAL's first
 * wrap as in the default mode. */
static int pg_setup_sqlite(pg_run *run)
{
	char db[PATH_MAX + 32];
	load_result warm;

	snprintf(run->sql_path, sizeof(run->sql_path), "%s/ceiling.db", run->tmpl);
	snprintf(db, sizeof(db), "%s/dpgate.db", run->tmpl);
	if (pg_dpgate_paths(&run->lite, run, db, "sqlite") < 0)
		return -1;
	if (sql_ceiling(run->sql_path, SQL_BARE, 1, run->o->duration_s, WARM_COMMITS, &warm) < 0) {
		fprintf(stderr, "bench_server: the SQLite ceiling failed\n");
		return -1;
	}
	return pg_prepare_server(&run->lite, &run->lite_req, &run->lite_len, &run->lite_201,
				 &run->clean);
}

/* The cluster, the bare loop's database, and PG_SERVERS dpgate servers
 * on one more database; a dpgate that refuses the URL leaves pg_served
 * false and the run goes on without those cells. */
static int pg_setup_cluster(pg_run *run)
{
	struct pgc_error err = {0};
	char url[PGC_URL_MAX], msg[512];
	bench_pg_loop_result warm;

	if (pgc_cluster_new(NULL, 0, &run->cluster, &err) != PGC_OK ||
	    pgc_new_database(run->cluster, run->loop_url, sizeof(run->loop_url), &err) != PGC_OK ||
	    pgc_new_database(run->cluster, url, sizeof(url), &err) != PGC_OK) {
		fprintf(stderr, "bench_server: PostgreSQL cluster: %s\n", err.text);
		return -1;
	}
	/* A fresh cluster creates its WAL segments as the WAL grows, where a
	 * running one recycles them: the loop runs past that, untimed, as the
	 * SQLite writers run past their WAL's first wrap. */
	if (bench_pg_loop_setup(run->loop_url, msg, sizeof(msg)) < 0 ||
	    bench_pg_loop_run(run->loop_url, SQLITE_WRITERS_MANY, run->o->duration_s, WARMUP_S,
			      &warm, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "bench_server: the libpq loop: %s\n", msg);
		return -1;
	}
	run->loop_commits += warm.committed;
	for (unsigned i = 0; i < PG_SERVERS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "pg%u", i + 1);
		if (pg_dpgate_paths(&run->pg[i], run, url, name) < 0)
			return -1;
	}
	if (pg_prepare_server(&run->pg[0], &run->pg_req, &run->pg_len, &run->pg_201,
			      &run->clean) < 0) {
		printf("  dpgate did not serve --db %s (see %s): no dpgate-on-PostgreSQL cells\n",
		       url, run->pg[0].log);
		if (run->pg[0].pid > 0)
			dpgate_stop(&run->pg[0]);
		return 0;
	}
	run->pg_ports[0] = run->pg[0].port;
	for (unsigned i = 1; i < PG_SERVERS; i++) {
		if (dpgate_start(&run->pg[i]) < 0)
			return -1;
		run->pg_ports[i] = run->pg[i].port;
	}
	run->pg_served = true;
	return 0;
}

static void pg_loop_cell(const bench_pg_loop_result *l, load_result *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->clients = l->clients;
	ret->rate = l->rate;
	ret->p50_us = l->p50_us;
	ret->p99_us = l->p99_us;
	ret->measured = l->measured;
	ret->expected = l->committed;
	ret->failed = l->failed;
	ret->server_cpu_us = NAN;
}

/* One round of every cell, in the order of enum pg_cell. */
static int pg_round(pg_run *run, load_result *x)
{
	const double d = run->o->duration_s;
	char msg[512];

	if (sql_ceiling(run->sql_path, SQL_BARE, 1, d, 0, &x[P_SQL_1]) < 0 ||
	    sql_ceiling(run->sql_path, SQL_BARE, SQLITE_WRITERS_MANY, d, 0, &x[P_SQL_8]) < 0)
		return -1;
	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++) {
		unsigned n = client_counts[i];
		load_spec lite = {run->lite.port, n, d, (const char *const *)&run->lite_req,
				  &run->lite_len, 1, 201, NULL, 0};
		bench_pg_loop_result l;

		if (load_run(&lite, run->lite.pid, &x[P_LITE_1 + i]) < 0)
			return -1;
		if (bench_pg_loop_run(run->loop_url, n, d, WARMUP_S, &l, msg, sizeof(msg)) < 0) {
			fprintf(stderr, "bench_server: libpq loop: %s\n", msg);
			return -1;
		}
		pg_loop_cell(&l, &x[P_LOOP_1 + i]);
		if (run->pg_served) {
			load_spec one = {run->pg_ports[0], n, d, (const char *const *)&run->pg_req,
					 &run->pg_len, 1, 201, NULL, 0};
			load_spec three = one;

			three.ports = run->pg_ports;
			three.n_ports = PG_SERVERS;
			if (load_run(&one, run->pg[0].pid, &x[P_ONE_1 + i]) < 0 ||
			    load_run(&three, -1, &x[P_THREE_1 + i]) < 0)
				return -1;
		}
	}
	return 0;
}

static void pg_print(const pg_run *run)
{
	const load_result *r = run->res;

	print_commit_ceiling("\nper_s: median over rounds of commits (charges) per second; p50/p99:"
			     " median over rounds of each\nround's latency quantiles; cpu_us: dpgate"
			     " CPU per answer (one server); errors: all rounds\n",
			     "SQLite: bare commit loop (WAL, synchronous=FULL) and dpgate on SQLite",
			     &r[P_SQL_1], &r[P_SQL_8]);
	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++) {
		char ratio[64];

		snprintf(ratio, sizeof(ratio), "%.2f x sqlite commit1",
			 r[P_LITE_1 + i].rate / r[P_SQL_1].rate);
		print_cell("dpgate, sqlite", &r[P_LITE_1 + i], ratio);
	}
	print_header("PostgreSQL: bare libpq commit loop (1 INSERT/txn, synchronous_commit on)");
	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++)
		print_cell("libpq, clients", &r[P_LOOP_1 + i], "");
	if (!run->pg_served) {
		printf("  dpgate on PostgreSQL: not measured (this dpgate has no PostgreSQL store)\n");
		return;
	}
	print_header("dpgate on PostgreSQL: durable charges, one dataset");
	for (unsigned i = 0; i < 2 * N_CLIENT_COUNTS; i++) {
		unsigned c = P_ONE_1 + i, loop = P_LOOP_1 + i % N_CLIENT_COUNTS;
		char ratio[96];

		snprintf(ratio, sizeof(ratio), "%.2f x libpq same clients  %.2f x dpgate-sqlite",
			 r[c].rate / r[loop].rate,
			 r[c].rate / r[P_LITE_1 + i % N_CLIENT_COUNTS].rate);
		print_cell(i < N_CLIENT_COUNTS ? "1 server" : "3 servers", &r[c], ratio);
	}
}

/* After every server stopped: dpgate verify on both ledgers, and every
 * 201 and every counted commit is a row. */
static int pg_check(pg_run *run, json_t *report)
{
	int64_t lite_rows = -1, lite_stored = -1, pg_rows = -1, loop_rows = -1;
	int lite_verify = dpgate_verify(&run->lite), pg_verify = -1;
	char msg[512];
	bool ok;

	count_charges(run->lite.db, &lite_rows, &lite_stored);
	if (bench_pg_loop_rows(run->loop_url, &loop_rows, msg, sizeof(msg)) < 0)
		fprintf(stderr, "bench_server: %s\n", msg);
	ok = lite_verify == 0 && lite_rows == (int64_t)run->lite_201 && lite_stored == lite_rows &&
	     loop_rows == (int64_t)run->loop_commits && run->clean;
	if (run->pg_served) {
		pg_verify = dpgate_verify(&run->pg[0]);
		if (bench_pg_count(run->pg[0].db, "SELECT count(*) FROM ledger WHERE kind = 'charge'",
				   &pg_rows, msg, sizeof(msg)) < 0)
			fprintf(stderr, "bench_server: %s\n", msg);
		ok = ok && pg_verify == 0 && pg_rows == (int64_t)run->pg_201;
	}
	printf("\ncorrectness\n"
	       "  dpgate on SQLite: verify exit %d; 201 answers %llu, ledger charge rows %lld\n"
	       "  libpq loop: commits counted %llu, rows %lld\n",
	       lite_verify, (unsigned long long)run->lite_201, (long long)lite_rows,
	       (unsigned long long)run->loop_commits, (long long)loop_rows);
	if (run->pg_served)
		printf("  dpgate on PostgreSQL: verify exit %d; 201 answers %llu, ledger charge rows"
		       " %lld\n", pg_verify, (unsigned long long)run->pg_201, (long long)pg_rows);
	printf("  %s\n", ok ? "all match" : "MISMATCH or errors");
	json_object_set_new(report, "correctness",
			    json_pack("{s:i, s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:b, s:b}",
				      "sqlite_verify_exit", lite_verify, "sqlite_201",
				      (json_int_t)run->lite_201, "sqlite_charge_rows",
				      (json_int_t)lite_rows, "libpq_commits",
				      (json_int_t)run->loop_commits, "libpq_rows",
				      (json_int_t)loop_rows, "pg_verify_exit", pg_verify, "pg_201",
				      (json_int_t)run->pg_201, "pg_charge_rows", (json_int_t)pg_rows,
				      "dpgate_pg_measured", run->pg_served, "ok", ok));
	return ok ? 0 : -1;
}

/* Folds the rounds, adds the answers and commits up, prints the table. */
static json_t *pg_fold(pg_run *run)
{
	json_t *report = json_pack("{s:s, s:s, s:i, s:f, s:i, s:i}", "bench", "server",
				   "mode", "postgresql", "rounds", (int)run->o->rounds,
				   "duration_s", run->o->duration_s, "server_threads",
				   (int)run->o->threads, "libpq", PQlibVersion());

	for (unsigned c = 0; c < P__COUNT; c++) {
		load_result *r = &run->res[c];

		if (c >= P_ONE_1 && !run->pg_served)
			break;
		*r = fold_column(&run->rounds[0][c], P__COUNT, run->o->rounds);
		run->clean &= r->other == 0 && r->failed == 0;
		if (c >= P_LITE_1 && c <= P_LITE_64)
			run->lite_201 += r->expected;
		else if (c >= P_LOOP_1 && c <= P_LOOP_64)
			run->loop_commits += r->expected;
		else if (c >= P_ONE_1)
			run->pg_201 += r->expected;
		json_object_set_new(report, pg_cell_names[c],
				    json_pack("{s:i, s:f, s:f, s:f, s:I, s:I, s:I}", "clients",
					      (int)r->clients, "rate", r->rate, "p50_us", r->p50_us,
					      "p99_us", r->p99_us, "measured",
					      (json_int_t)r->measured, "other_status",
					      (json_int_t)r->other, "failed", (json_int_t)r->failed));
	}
	pg_print(run);
	return report;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Removes the run's directory: its SQLite files, data directories, logs. */
static void remove_tree(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void pg_run_free(pg_run *run)
{
	if (run->lite.pid > 0)
		dpgate_stop(&run->lite);
	for (unsigned i = 0; i < PG_SERVERS; i++)
		if (run->pg[i].pid > 0)
			dpgate_stop(&run->pg[i]);
	pgc_cluster_free(run->cluster);
	free(run->lite_req);
	free(run->pg_req);
	free(run->rounds);
}

/* The --pg run; its exit status as main's. */
static int pg_mode(const options *o)
{
	pg_run run = {.o = o, .clean = true};
	json_t *report = NULL;
	double load0[3], load1[3], ticks0[2], ticks1[2], t_begin = bench_now_s();
	int exit_code = 2;

	snprintf(run.tmpl, sizeof(run.tmpl), "%s/dpgate-bench-pg-XXXXXX", o->dir);
	run.rounds = calloc(o->rounds, sizeof(*run.rounds));
	if (!run.rounds || !mkdtemp(run.tmpl)) {
		fprintf(stderr, "bench_server: cannot create a directory in %s\n", o->dir);
		goto out;
	}
	run.lite.pid = -1;
	for (unsigned i = 0; i < PG_SERVERS; i++)
		run.pg[i].pid = -1;
	load_average(load0);
	host_cpu_ticks(ticks0);
	printf("bench_server --pg: dpgate %s, directory %s\n", o->dpgate, run.tmpl);
	printf("  cores %ld, load average at start %.2f %.2f %.2f\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load0[0], load0[1], load0[2]);
	if (pg_setup_sqlite(&run) < 0 || pg_setup_cluster(&run) < 0)
		goto out;
	printf("  PostgreSQL cluster %s (port %d), libpq %d; %u rounds x %.2f s per cell,"
	       " %u server threads, %d dpgate servers\n", pgc_dir(run.cluster),
	       pgc_port(run.cluster), PQlibVersion(), o->rounds, o->duration_s, o->threads,
	       PG_SERVERS);
	fflush(stdout);
	for (unsigned r = 0; r < o->rounds; r++) {
		if (pg_round(&run, run.rounds[r]) < 0)
			goto out;
		printf("  round %u:", r + 1);
		for (unsigned c = 0; c < P__COUNT; c++)
			if (c < P_ONE_1 || run.pg_served)
				printf(" %s=%.0f", pg_cell_names[c], run.rounds[r][c].rate);
		printf("\n");
		fflush(stdout);
	}
	report = pg_fold(&run);
	if (dpgate_stop(&run.lite) < 0)
		run.clean = false;
	for (unsigned i = 0; i < PG_SERVERS; i++)
		if (run.pg[i].pid > 0 && dpgate_stop(&run.pg[i]) < 0)
			run.clean = false;
	exit_code = pg_check(&run, report) == 0 ? 0 : 1;
	load_average(load1);
	host_cpu_ticks(ticks1);
	printf("\nload average at end %.2f %.2f %.2f, host CPU steal over the run %.1f%%;"
	       " run took %.0f s\n", load1[0], load1[1], load1[2], steal_percent(ticks0, ticks1),
	       bench_now_s() - t_begin);
	json_object_set_new(report, "load_start", json_pack("[f,f,f]", load0[0], load0[1], load0[2]));
	json_object_set_new(report, "load_end", json_pack("[f,f,f]", load1[0], load1[1], load1[2]));
	print_json_line(report);
out:
	json_decref(report);
	pg_run_free(&run);
	if (exit_code == 0 && !o->keep)
		remove_tree(run.tmpl);
	else
		fprintf(stderr, "bench_server: kept %s (logs and the SQLite files)\n", run.tmpl);
	return exit_code;
}

/* ---- the default mode: dpgate on SQLite next to the ceilings ------------ */

/* The paired turns (step "paired" of the header comment). */
typedef struct lite_paired {
	double ticks0[2], ticks1[2];     /* host CPU ticks around all the turns */
	double steal[PAIRED_SLICES];     /* host CPU steal in each turn */
	double commit, dpgate, spread;   /* counted answers, summed over the turns */
	double ratios[PAIRED_SLICES], spread_ratios[PAIRED_SLICES];
	double bare_rates[PAIRED_SLICES], dpgate_rates[PAIRED_SLICES],
		spread_rates[PAIRED_SLICES];
	double ratio, median, spread_ratio, spread_median;
	double split_txn_us, split_commit_us; /* from dpgate's /metrics */
} lite_paired;

/* One run of the default mode: its server, files, requests and figures. */
typedef struct lite_run {
	const options *o;
	dpgate g;
	char tmpl[PATH_MAX], sql_path[PATH_MAX + 32], txn_path[PATH_MAX + 32], key[256];
	long cores;
	double load0[3], load1[3], ticks0[2], ticks1[2], t_begin;
	struct MHD_Daemon *bare;
	uint16_t bare_port;
	char *one_req, *bare_req, *spread_reqs[SPREAD_DATASETS];
	size_t one_len, bare_len, spread_lens[SPREAD_DATASETS];
	unsigned n_sizes;                   /* ledger sizes up to --max-rows */
	load_result (*rounds)[C__COUNT];
	load_result res[C__COUNT];          /* the medians of the rounds */
	lite_paired paired;
	admission adm[N_LEDGER_SIZES];
	double restart_kept[MAX_ROUNDS], restart_cut[MAX_ROUNDS], restart_ratio;
	uint64_t ok_total;                  /* 201 answers, every step */
	int64_t prefilled, ledger_charges, stored_charges;
	int verify_rc, verify_prefill_rc;
	bool counts_match, all_clean;
} lite_run;

/* Seconds of each kind of slice counted in the paired turns. */
#define PAIRED_COUNTED_S (PAIRED_SLICES * (PAIRED_SLICE_S - WARMUP_S))

/* The server's binary, the run's directory and every path in it; -1
 * (having said why) when the binary is missing or a path is cut. */
static int lite_make_dir(lite_run *run)
{
	dpgate *g = &run->g;

	g->bin = run->o->dpgate;
	g->threads = run->o->threads;
	g->pid = -1;
	if (access(g->bin, X_OK) != 0) {
		fprintf(stderr, "bench_server: %s is not executable (--dpgate PATH or DPGATE_BIN)\n",
			g->bin);
		return -1;
	}
	snprintf(run->tmpl, sizeof(run->tmpl), "%s/dpgate-bench-XXXXXX", run->o->dir);
	if (!mkdtemp(run->tmpl)) {
		fprintf(stderr, "bench_server: cannot create a directory in %s: %s\n", run->o->dir,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* The files in the run's directory; every path must fit whole, or it
 * would name another file.  -1 when one is cut. */
static int lite_name_files(lite_run *run)
{
	dpgate *g = &run->g;
	const char *tmpl = run->tmpl;

	if ((size_t)snprintf(run->sql_path, sizeof(run->sql_path), "%s/ceiling.db", tmpl) >=
		    sizeof(run->sql_path) ||
	    (size_t)snprintf(run->txn_path, sizeof(run->txn_path), "%s/ceiling-charge.db", tmpl) >=
		    sizeof(g->db) ||
	    (size_t)snprintf(g->db, sizeof(g->db), "%s/dpgate.db", tmpl) >= sizeof(g->db) ||
	    (size_t)snprintf(g->data_dir, sizeof(g->data_dir), "%s/data", tmpl) >=
		    sizeof(g->data_dir) ||
	    (size_t)snprintf(g->log, sizeof(g->log), "%s/dpgate.log", tmpl) >= sizeof(g->log)) {
		fprintf(stderr, "bench_server: the path %s is too long\n", tmpl);
		return -1;
	}
	mkdir(g->data_dir, 0700);
	return 0;
}

static void lite_print_start(lite_run *run)
{
	const options *o = run->o;

	run->cores = sysconf(_SC_NPROCESSORS_ONLN);
	load_average(run->load0);
	host_cpu_ticks(run->ticks0);
	printf("bench_server: dpgate %s\n", run->g.bin);
	printf("  directory %s (SQLite ceilings and dpgate database on the same filesystem)\n",
	       run->tmpl);
	printf("  cores %ld, load average at start %.2f %.2f %.2f\n", run->cores, run->load0[0],
	       run->load0[1], run->load0[2]);
	printf("  %u rounds x %.2f s per throughput cell (first %.2f s of a cell not counted),"
	       " %u server threads, SQLite %s, libmicrohttpd %s\n",
	       o->rounds, o->duration_s, WARMUP_S, o->threads, sqlite3_libversion(),
	       MHD_get_version());
	fflush(stdout);
}

/* Datasets 'one', s000 to s099 (with their charge requests) and one per
 * ledger size up to --max-rows. */
static int lite_create_datasets(lite_run *run)
{
	uint16_t port = run->g.port;
	char id[64], path[128];

	if (create_dataset(port, run->key, "one") < 0)
		return -1;
	for (unsigned i = 0; i < SPREAD_DATASETS; i++) {
		snprintf(id, sizeof(id), "s%03u", i);
		snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
		if (create_dataset(port, run->key, id) < 0)
			return -1;
		run->spread_reqs[i] = build_request("POST", path, run->key, CHARGE_BODY,
						    &run->spread_lens[i]);
		if (!run->spread_reqs[i])
			return -1;
	}
	for (unsigned i = 0; i < N_LEDGER_SIZES; i++) {
		if (ledger_sizes[i] > run->o->max_rows)
			break;
		snprintf(id, sizeof(id), "rows%ld", ledger_sizes[i]);
		if (create_dataset(port, run->key, id) < 0)
			return -1;
		run->n_sizes++;
	}
	return 0;
}

/* The charge-shaped ceiling's schema, the bare server, dpgate with its
 * admin key and datasets, and the requests both get. */
static int lite_setup(lite_run *run)
{
	/* The charge-shaped ceiling's file gets dpgate's schema from dpgate
	 * itself (keys create migrates a new file). */
	dpgate schema_only = run->g;
	char scratch_key[256];

	memcpy(schema_only.db, run->txn_path, sizeof(schema_only.db));
	if (dpgate_admin_key(&schema_only, scratch_key, sizeof(scratch_key)) < 0) {
		fprintf(stderr, "bench_server: `dpgate keys create` failed; see %s\n", run->g.log);
		return -1;
	}
	run->bare = bare_http_start(run->o->threads, &run->bare_port);
	if (!run->bare) {
		fprintf(stderr, "bench_server: cannot start the bare libmicrohttpd server\n");
		return -1;
	}
	/* The bare server gets the very request dpgate gets (its key is not checked). */
	run->bare_req = build_request("POST", "/v1/datasets/one/charges",
				      "dpg_0000000000000000_0000000000000000000000000000000000000000000000000000000000000000",
				      CHARGE_BODY, &run->bare_len);
	if (dpgate_admin_key(&run->g, run->key, sizeof(run->key)) < 0) {
		fprintf(stderr, "bench_server: `dpgate keys create` failed; see %s\n", run->g.log);
		return -1;
	}
	if (dpgate_start(&run->g) < 0 || lite_create_datasets(run) < 0)
		return -1;
	run->one_req = build_request("POST", "/v1/datasets/one/charges", run->key, CHARGE_BODY,
				     &run->one_len);
	return run->bare_req && run->one_req ? 0 : -1;
}

/*
 * Steady state first.  SQLite's WAL file grows until the first
 * checkpoint (wal_autocheckpoint: 1000 frames by default, 4000 in
 * dpgate) and is overwritten in place after that; an fdatasync that
 * extends a file must also write its new size (the inode, or the
 * filesystem journal) and costs more than one that does not.  A
 * long-running server lives in the second state, so every writer (the
 * two SQLite ceilings and dpgate) is driven past it, untimed, before
 * anything is measured.
 */
static int lite_warm(lite_run *run)
{
	load_result warm;
	uint64_t bad = 0;

	const double d = run->o->duration_s;

	if (sql_ceiling(run->sql_path, SQL_BARE, 1, d, WARM_COMMITS, &warm) < 0 ||
	    sql_ceiling(run->txn_path, SQL_CHARGE, 1, d, WARM_COMMITS, &warm) < 0) {
		fprintf(stderr, "bench_server: a SQLite ceiling failed\n");
		return -1;
	}
	warm_charges(run->g.port, run->one_req, run->one_len, WARM_COMMITS, &run->ok_total, &bad);
	run->all_clean &= bad == 0;
	return 0;
}

/* One round of every throughput cell, in the order of enum cell. */
static int lite_round(lite_run *run, load_result *x)
{
	const double d = run->o->duration_s;
	const dpgate *g = &run->g;

	if (sql_ceiling(run->sql_path, SQL_BARE, 1, d, 0, &x[C_SQL_1]) < 0 ||
	    sql_ceiling(run->sql_path, SQL_BARE, SQLITE_WRITERS_MANY, d, 0, &x[C_SQL_8]) < 0 ||
	    sql_ceiling(run->txn_path, SQL_CHARGE, 1, d, 0, &x[C_TXN_1]) < 0) {
		fprintf(stderr, "bench_server: a SQLite ceiling failed\n");
		return -1;
	}
	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++) {
		load_spec http = {run->bare_port, client_counts[i], d,
				  (const char *const *)&run->bare_req, &run->bare_len, 1, 201,
				  NULL, 0};
		load_spec one = {g->port, client_counts[i], d, (const char *const *)&run->one_req,
				 &run->one_len, 1, 201, NULL, 0};
		load_spec spread = {g->port, client_counts[i], d,
				    (const char *const *)run->spread_reqs, run->spread_lens,
				    SPREAD_DATASETS, 201, NULL, 0};

		if (load_run(&http, -1, &x[C_HTTP_1 + i]) < 0 ||
		    load_run(&one, g->pid, &x[C_ONE_1 + i]) < 0 ||
		    load_run(&spread, g->pid, &x[C_SPREAD_1 + i]) < 0)
			return -1;
	}
	return 0;
}

/* 1-3. the throughput cells, round after round, so that a burst of load
 * from elsewhere on the machine hits ceilings and dpgate alike; then
 * their medians, and dpgate's answers added up. */
static int lite_throughput(lite_run *run)
{
	for (unsigned r = 0; r < run->o->rounds; r++) {
		load_result *x = run->rounds[r];

		if (lite_round(run, x) < 0)
			return -1;
		printf("  round %u:", r + 1);
		for (unsigned c = 0; c < C__COUNT; c++)
			printf(" %s=%.0f", cell_names[c], x[c].rate);
		printf("\n");
		fflush(stdout);
	}
	for (unsigned c = 0; c < C__COUNT; c++)
		run->res[c] = fold_rounds(run->rounds, run->o->rounds, c);
	for (unsigned c = C_ONE_1; c <= C_SPREAD_64; c++) {
		run->ok_total += run->res[c].expected;
		run->all_clean &= run->res[c].other == 0 && run->res[c].failed == 0;
	}
	return 0;
}

static void lite_print_throughput(const lite_run *run)
{
	const load_result *res = run->res;
	char ratio[96];

	print_commit_ceiling("\nper_s: median over rounds of answers (commits) per second; p50/p99:"
			     " median over rounds of each\nround's latency quantiles; cpu_us: dpgate"
			     " CPU time (user+sys) per answer; errors: non-201\nanswers and failed"
			     " exchanges, all rounds\n",
			     "ceiling 1: bare SQLite commits (WAL, synchronous=FULL), same filesystem",
			     &res[C_SQL_1], &res[C_SQL_8]);
	snprintf(ratio, sizeof(ratio), "%.2f x commit1", res[C_TXN_1].rate / res[C_SQL_1].rate);
	print_cell("dpgate's charge txn", &res[C_TXN_1], ratio);
	print_header("ceiling 2: bare libmicrohttpd (dpgate's flags), fixed 201 body, same request");
	for (unsigned i = 0; i < N_CLIENT_COUNTS; i++)
		print_cell("fixed body, clients", &res[C_HTTP_1 + i], "");
	print_header("dpgate: durable charges, POST /v1/datasets/{id}/charges -> 201");
	for (unsigned i = 0; i < 2 * N_CLIENT_COUNTS; i++) {
		unsigned c = C_ONE_1 + i, h = C_HTTP_1 + i % N_CLIENT_COUNTS;

		snprintf(ratio, sizeof(ratio), "%.2f x commit1  %.2f x txn1  %.3f x http",
			 res[c].rate / res[C_SQL_1].rate, res[c].rate / res[C_TXN_1].rate,
			 res[c].rate / res[h].rate);
		print_cell(i < N_CLIENT_COUNTS ? "one dataset" : "100 datasets", &res[c], ratio);
	}
	print_goals(res);
	fflush(stdout);
}

/* One paired turn k: a slice of the bare loop, of dpgate on one dataset
 * and of dpgate over 100 datasets, in an order that rotates with k. */
static int lite_paired_turn(lite_run *run, unsigned k)
{
	lite_paired *p = &run->paired;
	load_spec one = {run->g.port, 1, PAIRED_SLICE_S, (const char *const *)&run->one_req,
			 &run->one_len, 1, 201, NULL, 0};
	load_spec spread = {run->g.port, 1, PAIRED_SLICE_S, (const char *const *)run->spread_reqs,
			    run->spread_lens, SPREAD_DATASETS, 201, NULL, 0};
	load_result a, b, c;
	double pair_ticks0[2], pair_ticks1[2];

	host_cpu_ticks(pair_ticks0);
	for (unsigned step = 0; step < 3; step++) {
		unsigned which = (k + step) % 3;

		if (which == 0) {
			if (sql_ceiling(run->sql_path, SQL_BARE, 1, PAIRED_SLICE_S, 0, &a) < 0)
				return -1;
		} else if (load_run(which == 1 ? &one : &spread, run->g.pid,
				    which == 1 ? &b : &c) < 0) {
			return -1;
		}
	}
	host_cpu_ticks(pair_ticks1);
	p->steal[k] = steal_percent(pair_ticks0, pair_ticks1);
	run->ok_total += b.expected + c.expected;
	run->all_clean &= b.other == 0 && b.failed == 0 && c.other == 0 && c.failed == 0;
	p->commit += (double)a.measured;
	p->dpgate += (double)b.measured;
	p->spread += (double)c.measured;
	p->ratios[k] = b.rate / a.rate;
	p->spread_ratios[k] = c.rate / a.rate;
	p->bare_rates[k] = a.rate;
	p->dpgate_rates[k] = b.rate;
	p->spread_rates[k] = c.rate;
	return 0;
}

/* dpgate's spend timings (see scrape_spend_timings); -1, having said so,
 * when /metrics has none. */
static int lite_spend_timings(const lite_run *run, double ret[4])
{
	if (scrape_spend_timings(run->g.port, ret) < 0) {
		fprintf(stderr, "bench_server: no spend timings in dpgate's /metrics\n");
		return -1;
	}
	return 0;
}

/*
 * One client's ratios to the bare commit loop once more, paired: the
 * table's cells are measured up to half a minute apart, when this host's
 * commit rate can move by a third.  Short slices of the bare loop, of
 * dpgate on one dataset and of dpgate over 100 datasets take turns (the
 * order rotates every turn), so all three see the same disk and the same
 * neighbours within about three seconds; each ratio is of the summed
 * counts.
 */
static int lite_paired_turns(lite_run *run)
{
	lite_paired *p = &run->paired;
	double before[4], after[4], txns, commits;

	if (lite_spend_timings(run, before) < 0)
		return -1;
	host_cpu_ticks(p->ticks0);
	for (unsigned k = 0; k < PAIRED_SLICES; k++)
		if (lite_paired_turn(run, k) < 0)
			return -1;
	host_cpu_ticks(p->ticks1);
	if (lite_spend_timings(run, after) < 0)
		return -1;
	/* Where the time of one dpgate charge goes, in means over the dpgate
	 * slices (one dataset and 100; their warm-up included): the spend
	 * transaction and its COMMIT from dpgate's own histograms, the rest
	 * (HTTP both ways, parsing, pricing, the answer) is the answer period
	 * less the transaction. */
	txns = after[1] - before[1];
	commits = after[3] - before[3];
	p->split_txn_us = txns > 0 ? 1e6 * (after[0] - before[0]) / txns : NAN;
	p->split_commit_us = commits > 0 ? 1e6 * (after[2] - before[2]) / commits : NAN;
	p->ratio = p->dpgate / p->commit;
	p->median = bench_median(p->ratios, PAIRED_SLICES);
	p->spread_ratio = p->spread / p->commit;
	p->spread_median = bench_median(p->spread_ratios, PAIRED_SLICES);
	return 0;
}

static void lite_print_paired(const lite_paired *p)
{
	double dpgate_period = 1e6 * 2 * PAIRED_COUNTED_S / (p->dpgate + p->spread);
	double bare_period = 1e6 * PAIRED_COUNTED_S / p->commit;

	printf("\none client, paired (%d turns of %.1f s slices of each, %.2f s of each counted):\n"
	       "  bare commit loop, 1 writer %.0f/s\n"
	       "  dpgate one dataset, 1 client %.0f/s: ratio %.2f (median of turn ratios %.2f)\n"
	       "  dpgate 100 datasets, 1 client %.0f/s: ratio %.2f (median of turn ratios %.2f)\n",
	       PAIRED_SLICES, PAIRED_SLICE_S, PAIRED_SLICE_S - WARMUP_S,
	       p->commit / PAIRED_COUNTED_S, p->dpgate / PAIRED_COUNTED_S, p->ratio, p->median,
	       p->spread / PAIRED_COUNTED_S, p->spread_ratio, p->spread_median);
	printf("  turns (bare/s, one dataset/s, 100 datasets/s):");
	for (unsigned k = 0; k < PAIRED_SLICES; k++)
		printf(" %.0f/%.0f/%.0f", p->bare_rates[k], p->dpgate_rates[k], p->spread_rates[k]);
	/* Steal is CPU time the hypervisor gave to other guests.  The bare loop
	 * is one thread that mostly waits on fsync; a dpgate charge needs the
	 * client and a server worker to run in turn, so stolen time slows it
	 * more, and a low ratio in a turn with high steal says more about the
	 * host than about dpgate. */
	printf("\n  host CPU steal during the slices: %.1f%%; per turn:",
	       steal_percent(p->ticks0, p->ticks1));
	for (unsigned k = 0; k < PAIRED_SLICES; k++)
		printf(" %.0f%%", p->steal[k]);
	printf("\n");
	printf("  one dpgate charge, means (dpgate's /metrics): %.0f us per answer = spend transaction"
	       " %.0f us (of it COMMIT, WAL write + fsync, %.0f us) + %.0f us the rest (HTTP both"
	       " ways, parsing, pricing, answer);\n"
	       "  one bare commit loop transaction %.0f us\n",
	       dpgate_period, p->split_txn_us, p->split_commit_us, dpgate_period - p->split_txn_us,
	       bare_period);
	fflush(stdout);
}

/* One server-written charge per ledger size, then, with the server
 * stopped, each ledger prefilled to its size and dpgate verify. */
static int lite_prefill(lite_run *run)
{
	char id[64], path[128], answer[1024];

	for (unsigned i = 0; i < run->n_sizes; i++) {
		int status;

		snprintf(path, sizeof(path), "/v1/datasets/rows%ld/charges", ledger_sizes[i]);
		status = http_once(run->g.port, "POST", path, run->key, CHARGE_BODY, answer,
				   sizeof(answer));
		if (status != 201) {
			fprintf(stderr, "bench_server: first charge on %s: %d %s\n", path, status, answer);
			return -1;
		}
		run->ok_total++;
	}
	dpgate_stop_noting(&run->g);
	printf("\nadmission latency (1 client, keep-alive; per size %u timed dry-runs and charges"
	       " after %u untimed,\ninterleaved across sizes; ledgers prefilled with the server"
	       " stopped; ledger_rows = rows before timing)\n",
	       run->o->samples, ADMISSION_WARMUP);
	fflush(stdout);
	for (unsigned i = 0; i < run->n_sizes; i++) {
		double t0 = bench_now_s();
		long added;

		snprintf(id, sizeof(id), "rows%ld", ledger_sizes[i]);
		added = prefill_ledger(run->g.db, id, ledger_sizes[i]);
		if (added < 0)
			return -1;
		run->prefilled += added;
		printf("  prefilled %-12s +%ld rows in %.1f s\n", id, added, bench_now_s() - t0);
	}
	run->verify_prefill_rc = dpgate_verify(&run->g);
	printf("  dpgate verify after prefill: exit %d\n", run->verify_prefill_rc);
	return 0;
}

/* 4. admission latency: the ledgers prefilled, the server started and
 * warmed again, then the timed dry-runs and charges. */
static int lite_admission(lite_run *run)
{
	admission *adm = run->adm;
	uint64_t bad = 0;

	if (lite_prefill(run) < 0 || dpgate_start(&run->g) < 0)
		return -1;
	/* The clean stop deleted the WAL; serve wrote it out again at start,
	 * and these charges take it past its first checkpoint and warm the
	 * caches, as before the throughput cells. */
	warm_charges(run->g.port, run->one_req, run->one_len, WARM_COMMITS, &run->ok_total, &bad);
	run->all_clean &= bad == 0;
	printf("  %-12s %11s %11s %11s %11s %11s\n", "ledger_rows", "charge_p50", "charge_p99",
	       "charge_mean", "dryrun_p50", "dryrun_p99");
	for (unsigned i = 0; i < run->n_sizes; i++)
		adm[i].rows = ledger_sizes[i];
	if (measure_admission(run->g.port, run->key, run->n_sizes, run->o->samples, adm) < 0)
		return -1;
	for (unsigned i = 0; i < run->n_sizes; i++) {
		run->ok_total += adm[i].ok;
		run->all_clean &= adm[i].bad == 0;
		printf("  %-12ld %9.0fus %9.0fus %9.0fus %9.0fus %9.0fus\n", adm[i].rows,
		       adm[i].charge_p50_us, adm[i].charge_p99_us, adm[i].charge_mean_us,
		       adm[i].dry_p50_us, adm[i].dry_p99_us);
		fflush(stdout);
	}
	return 0;
}

/* 5. the first charges after a restart, WAL written out or cut, in
 * --rounds pairs; then the server stopped. */
static int lite_restarts(lite_run *run)
{
	double sum_kept = 0, sum_cut = 0, kept[MAX_ROUNDS], cut[MAX_ROUNDS];
	unsigned rounds = run->o->rounds;
	uint64_t bad = 0;

	printf("\nfirst %u charges after a restart (1 client, one dataset; %u rounds, each a restart"
	       " as served,\nthen a restart with the WAL cut to 0 bytes after the start: the file"
	       " before serve wrote it out)\n",
	       RESTART_CHARGES, rounds);
	for (unsigned r = 0; r < rounds; r++) {
		double *kept_r = &run->restart_kept[r], *cut_r = &run->restart_cut[r];

		*kept_r = first_charges_after_restart(&run->g, run->one_req, run->one_len, false,
						      &run->ok_total, &bad);
		*cut_r = *kept_r < 0 ? -1
				     : first_charges_after_restart(&run->g, run->one_req,
								   run->one_len, true,
								   &run->ok_total, &bad);
		if (*kept_r < 0 || *cut_r < 0) {
			fprintf(stderr, "bench_server: the restart cell failed; see %s\n",
				run->g.log);
			return -1;
		}
		sum_kept += RESTART_CHARGES / *kept_r;
		sum_cut += RESTART_CHARGES / *cut_r;
		printf("  round %u: written out %.0f/s, cut %.0f/s\n", r + 1, *kept_r, *cut_r);
	}
	run->all_clean &= bad == 0;
	run->restart_ratio = sum_cut / sum_kept;
	/* copies: bench_median sorts */
	memcpy(kept, run->restart_kept, rounds * sizeof(double));
	memcpy(cut, run->restart_cut, rounds * sizeof(double));
	printf("  medians: written out %.0f/s, cut %.0f/s; written out over cut, on the"
	       " summed times: %.2f x\n",
	       bench_median(kept, rounds), bench_median(cut, rounds), run->restart_ratio);
	fflush(stdout);
	dpgate_stop_noting(&run->g);
	return 0;
}

/* 6. correctness, after the server stopped: dpgate verify, and every 201
 * answer is a ledger row. */
static void lite_check(lite_run *run)
{
	const dpgate *g = &run->g;

	run->verify_rc = dpgate_verify(g);
	if (count_charges(g->db, &run->ledger_charges, &run->stored_charges) < 0)
		fprintf(stderr, "bench_server: cannot count the ledger's charges\n");
	run->counts_match = run->ledger_charges >= 0 &&
			    (uint64_t)(run->ledger_charges - run->prefilled) == run->ok_total &&
			    run->stored_charges == run->ledger_charges;
	printf("\ncorrectness\n");
	printf("  dpgate verify --db %s: exit %d (%s)\n", g->db, run->verify_rc,
	       run->verify_rc == 0 ? "stored totals equal the recomputation" : "FAILED");
	printf("  201 answers %llu + prefilled rows %lld = %lld; ledger charge rows %lld;"
	       " charges counted by the datasets' last rows %lld: %s\n",
	       (unsigned long long)run->ok_total, (long long)run->prefilled,
	       (long long)((int64_t)run->ok_total + run->prefilled), (long long)run->ledger_charges,
	       (long long)run->stored_charges, run->counts_match ? "match" : "MISMATCH");
	if (!run->all_clean)
		printf("  note: some requests failed or got an unexpected status (errors column)\n");
}

/* The load and the host's steal at the end of the run. */
static void lite_print_end(lite_run *run)
{
	load_average(run->load1);
	host_cpu_ticks(run->ticks1);
	printf("\ncores %ld, load average at end %.2f %.2f %.2f, host CPU steal over the run %.1f%%;"
	       " run took %.0f s\n",
	       run->cores, run->load1[0], run->load1[1], run->load1[2],
	       steal_percent(run->ticks0, run->ticks1), bench_now_s() - run->t_begin);
}

/* The throughput cells for the JSON line, dpgate's with their ratios. */
static void lite_cells_json(const lite_run *run, json_t *report)
{
	const load_result *res = run->res;

	for (unsigned c = 0; c < C__COUNT; c++) {
		json_t *cj = cell_json(&res[c], (const load_result(*)[C__COUNT])run->rounds,
				       run->o->rounds, c);

		if (c >= C_ONE_1) {
			unsigned h = C_HTTP_1 + (c - C_ONE_1) % N_CLIENT_COUNTS;

			json_object_set_new(cj, "ratio_commit_1", json_real(res[c].rate / res[C_SQL_1].rate));
			json_object_set_new(cj, "ratio_charge_txn_1",
					    json_real(res[c].rate / res[C_TXN_1].rate));
			json_object_set_new(cj, "ratio_http", json_real(res[c].rate / res[h].rate));
		}
		json_object_set_new(report, cell_names[c], cj);
	}
}

/* The admission latencies and the restarts for the JSON line. */
static void lite_admission_json(const lite_run *run, json_t *report)
{
	json_t *arr = json_array(), *kept = json_array(), *cut = json_array();

	for (unsigned i = 0; i < run->n_sizes; i++) {
		const admission *a = &run->adm[i];

		json_array_append_new(arr, json_pack("{s:I, s:f, s:f, s:f, s:f, s:f}", "ledger_rows",
						     (json_int_t)a->rows, "charge_p50_us",
						     a->charge_p50_us, "charge_p99_us",
						     a->charge_p99_us, "charge_mean_us",
						     a->charge_mean_us, "dry_run_p50_us",
						     a->dry_p50_us, "dry_run_p99_us",
						     a->dry_p99_us));
	}
	json_object_set_new(report, "admission", arr);
	for (unsigned r = 0; r < run->o->rounds; r++) {
		json_array_append_new(kept, json_real(run->restart_kept[r]));
		json_array_append_new(cut, json_real(run->restart_cut[r]));
	}
	json_object_set_new(report, "restart",
			    json_pack("{s:i, s:o, s:o, s:f}", "charges", RESTART_CHARGES,
				      "written_out_per_s", kept, "cut_per_s", cut,
				      "ratio", run->restart_ratio));
}

/* A percentage for the JSON line: json_real refuses NaN, so an
 * unreadable /proc/stat reads null. */
static json_t *json_pct(double pct)
{
	return isnan(pct) ? json_null() : json_real(pct);
}

/* The host's steal, the paired turns and one charge's split for the
 * JSON line. */
static void lite_paired_json(const lite_run *run, json_t *report)
{
	const lite_paired *p = &run->paired;
	json_t *steal = json_object(), *pairs = json_array();

	for (unsigned k = 0; k < PAIRED_SLICES; k++)
		json_array_append_new(pairs, json_pct(p->steal[k]));
	json_object_set_new(steal, "run", json_pct(steal_percent(run->ticks0, run->ticks1)));
	json_object_set_new(steal, "paired", json_pct(steal_percent(p->ticks0, p->ticks1)));
	json_object_set_new(steal, "per_pair", pairs);
	json_object_set_new(report, "host_steal_pct", steal);
	json_object_set_new(report, "paired_one_client",
			    json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
				      "ratio", p->ratio,
				      "median_slice_ratio", p->median,
				      "ratio_100_datasets", p->spread_ratio,
				      "median_slice_ratio_100_datasets", p->spread_median,
				      "commit_per_s", p->commit / PAIRED_COUNTED_S,
				      "dpgate_per_s", p->dpgate / PAIRED_COUNTED_S,
				      "dpgate_100_datasets_per_s", p->spread / PAIRED_COUNTED_S));
	json_object_set_new(report, "one_charge_split_us",
			    json_pack("{s:f, s:f, s:f, s:f}", "answer_period",
				      1e6 * 2 * PAIRED_COUNTED_S / (p->dpgate + p->spread),
				      "spend_transaction", p->split_txn_us, "commit",
				      p->split_commit_us, "bare_transaction",
				      1e6 * PAIRED_COUNTED_S / p->commit));
}

/* The machine-readable line: every figure of the run. */
static void lite_report(const lite_run *run)
{
	const options *o = run->o;
	json_t *report = json_pack("{s:s, s:i, s:[f,f,f], s:[f,f,f], s:i, s:f, s:i, s:s, s:s}",
				   "bench", "server", "cores", (int)run->cores, "load_start",
				   run->load0[0], run->load0[1], run->load0[2], "load_end",
				   run->load1[0], run->load1[1], run->load1[2], "rounds",
				   (int)o->rounds, "duration_s", o->duration_s, "server_threads",
				   (int)o->threads, "sqlite", sqlite3_libversion(), "libmicrohttpd",
				   MHD_get_version());

	lite_cells_json(run, report);
	json_object_set_new(report, "goals", goals_json(run->res));
	lite_admission_json(run, report);
	lite_paired_json(run, report);
	json_object_set_new(report, "correctness",
			    json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:b, s:b}", "verify_exit",
				      run->verify_rc, "verify_after_prefill_exit",
				      run->verify_prefill_rc, "answers_201",
				      (json_int_t)run->ok_total, "prefilled_rows",
				      (json_int_t)run->prefilled, "ledger_charge_rows",
				      (json_int_t)run->ledger_charges, "stored_charges",
				      (json_int_t)run->stored_charges, "counts_match",
				      run->counts_match, "no_errors", run->all_clean));
	print_json_line(report);
	json_decref(report);
}

/* Stops what still runs, frees the requests, and removes the run's
 * files unless --keep or a failure asks to keep them. */
static void lite_run_free(lite_run *run, int exit_code)
{
	static const char *const files[] = {
		"ceiling.db", "ceiling.db-wal", "ceiling.db-shm",
		"ceiling-charge.db", "ceiling-charge.db-wal", "ceiling-charge.db-shm",
		"dpgate.db", "dpgate.db-wal", "dpgate.db-shm", "dpgate.db-serve.lock",
		"dpgate.log", "data/.serve.lock"};
	char side[PATH_MAX + 32];

	if (run->g.pid > 0)
		dpgate_stop(&run->g);
	if (run->bare)
		MHD_stop_daemon(run->bare);
	free(run->rounds);
	free(run->one_req);
	free(run->bare_req);
	for (unsigned i = 0; i < SPREAD_DATASETS; i++)
		free(run->spread_reqs[i]);
	if (run->o->keep || exit_code != 0) {
		fprintf(stderr, "bench_server: kept %s\n", run->tmpl);
		return;
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(side, sizeof(side), "%s/%s", run->tmpl, files[i]);
		unlink(side);
	}
	rmdir(run->g.data_dir);
	if (rmdir(run->tmpl) < 0)
		fprintf(stderr, "bench_server: left %s (not empty)\n", run->tmpl);
}

/* The default run (steps 1 to 6 of the header comment); its exit status
 * as main's. */
static int lite_mode(const options *o)
{
	lite_run run = {
		.o = o, .t_begin = bench_now_s(), .all_clean = true, .verify_rc = -1,
		.ledger_charges = -1, .stored_charges = -1, .restart_ratio = NAN,
		.paired = {.split_txn_us = NAN, .split_commit_us = NAN},
	};
	int exit_code = 2;

	if (lite_make_dir(&run) < 0)
		return 2;
	run.rounds = calloc(o->rounds, sizeof(*run.rounds));
	if (!run.rounds || lite_name_files(&run) < 0)
		goto out;
	lite_print_start(&run);
	if (lite_setup(&run) < 0 || lite_warm(&run) < 0 || lite_throughput(&run) < 0)
		goto out;
	lite_print_throughput(&run);
	MHD_stop_daemon(run.bare);
	run.bare = NULL;
	if (lite_paired_turns(&run) < 0)
		goto out;
	lite_print_paired(&run.paired);
	if (lite_admission(&run) < 0 || lite_restarts(&run) < 0)
		goto out;
	lite_check(&run);
	lite_print_end(&run);
	lite_report(&run);
	exit_code = run.verify_rc == 0 && run.verify_prefill_rc == 0 && run.counts_match &&
		    run.all_clean ? 0 : 1;
out:
	lite_run_free(&run, exit_code);
	return exit_code;
}

int main(int argc, char **argv)
{
	options o;

	if (parse_options(argc, argv, &o) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	return o.pg ? pg_mode(&o) : lite_mode(&o);
}
