/*
 * bench_pg_loop.c: see bench_pg_loop.h.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench_common.h"
#include "bench_pg_loop.h"

#define LOOP_TABLE "bench_commit_loop"
#define LOOP_INSERT "INSERT INTO " LOOP_TABLE " (v) VALUES ('charge 0.001')"
#define LOOP_MAX_CLIENTS 256

typedef struct loop_client {
	const char *url;
	pthread_barrier_t *barrier;
	const double *start; /* written by the main thread before the barrier */
	double duration_s, warmup_s;
	PGconn *conn;
	int ready;
	uint64_t measured, committed, failed;
	bench_lat lat;
	char err[256];
} loop_client;

/* Connects and prepares; the thread then waits at the barrier either way,
 * so that the main thread never waits for a client that gave up. */
static int client_prepare(loop_client *lc)
{
	PGresult *res;
	int ok;

	lc->conn = PQconnectdb(lc->url);
	if (PQstatus(lc->conn) != CONNECTION_OK) {
		snprintf(lc->err, sizeof(lc->err), "connect: %s", PQerrorMessage(lc->conn));
		return -1;
	}
	/* The server's default, stated: a commit returns once its WAL is
	 * flushed to disk (and to a synchronous standby, where one is named). */
	res = PQexec(lc->conn, "SET synchronous_commit = on");
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	res = ok ? PQprepare(lc->conn, "ins", LOOP_INSERT, 0, NULL) : NULL;
	ok = ok && PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	if (!ok)
		snprintf(lc->err, sizeof(lc->err), "prepare: %s", PQerrorMessage(lc->conn));
	return ok ? 0 : -1;
}

static void *client_run(void *arg)
{
	loop_client *lc = arg;
	double window_start, deadline;

	lc->ready = client_prepare(lc) == 0;
	pthread_barrier_wait(lc->barrier);
	window_start = *lc->start + lc->warmup_s;
	deadline = *lc->start + lc->duration_s;
	while (lc->ready) {
		double t0 = bench_now_s(), t1;
		PGresult *res;

		if (t0 >= deadline)
			break;
		res = PQexecPrepared(lc->conn, "ins", 0, NULL, NULL, NULL, 0);
		t1 = bench_now_s();
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			lc->failed++;
			PQclear(res);
			continue;
		}
		PQclear(res);
		lc->committed++;
		if (t0 >= window_start && t1 <= deadline) {
			lc->measured++;
			bench_lat_push(&lc->lat, (t1 - t0) * 1e6);
		}
	}
	PQfinish(lc->conn);
	lc->conn = NULL;
	return NULL;
}

/* Folds the clients' counts and latencies into RET; -1 when one failed. */
static int fold(loop_client *lcs, unsigned n, double counted_s, bench_pg_loop_result *ret,
		char *err, size_t cap)
{
	size_t total = 0, k = 0;
	double *all;

	memset(ret, 0, sizeof(*ret));
	ret->clients = n;
	for (unsigned i = 0; i < n; i++) {
		if (!lcs[i].ready) {
			snprintf(err, cap, "client %u: %s", i, lcs[i].err);
			return -1;
		}
		ret->measured += lcs[i].measured;
		ret->committed += lcs[i].committed;
		ret->failed += lcs[i].failed;
		total += lcs[i].lat.n;
	}
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		memcpy(all + k, lcs[i].lat.v, lcs[i].lat.n * sizeof(*all));
		k += lcs[i].lat.n;
	}
	bench_sort(all, total);
	ret->rate = (double)ret->measured / counted_s;
	ret->p50_us = bench_quantile(all, total, 0.50);
	ret->p99_us = bench_quantile(all, total, 0.99);
	free(all);
	return 0;
}

int bench_pg_loop_run(const char *url, unsigned clients, double duration_s, double warmup_s,
		      bench_pg_loop_result *ret, char *err, size_t cap)
{
	loop_client *lcs = NULL;
	pthread_t *tids = NULL;
	pthread_barrier_t barrier;
	double start = 0;
	unsigned started = 0;
	int rc = -1;

	if (clients == 0 || clients > LOOP_MAX_CLIENTS || !(duration_s > warmup_s)) {
		snprintf(err, cap, "bad loop shape");
		return -1;
	}
	lcs = calloc(clients, sizeof(*lcs));
	tids = calloc(clients, sizeof(*tids));
	if (!lcs || !tids) {
		snprintf(err, cap, "out of memory");
		goto out;
	}
	pthread_barrier_init(&barrier, NULL, clients + 1);
	for (unsigned i = 0; i < clients; i++) {
		lcs[i] = (loop_client){ .url = url, .barrier = &barrier, .start = &start,
					.duration_s = duration_s, .warmup_s = warmup_s };
		if (pthread_create(&tids[i], NULL, client_run, &lcs[i]) != 0) {
			snprintf(err, cap, "cannot start client thread %u", i);
			/* The barrier counts every client: give up for good. */
			abort();
		}
		started++;
	}
	start = bench_now_s();
	pthread_barrier_wait(&barrier);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&barrier);
	rc = fold(lcs, clients, duration_s - warmup_s, ret, err, cap);
out:
	for (unsigned i = 0; lcs && i < clients; i++)
		bench_lat_free(&lcs[i].lat);
	free(lcs);
	free(tids);
	return rc;
}

/* Runs one statement on a fresh connection; with RET_VALUE, the first
 * value of its first row as a number. */
static int one_statement(const char *url, const char *sql, int64_t *ret_value, char *err,
			 size_t cap)
{
	PGconn *conn = PQconnectdb(url);
	PGresult *res = NULL;
	ExecStatusType st;
	int rc = -1;

	if (PQstatus(conn) != CONNECTION_OK) {
		snprintf(err, cap, "connect: %s", PQerrorMessage(conn));
		goto out;
	}
	res = PQexec(conn, sql);
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		snprintf(err, cap, "%s: %s", sql, PQresultErrorMessage(res));
		goto out;
	}
	if (ret_value) {
		if (st != PGRES_TUPLES_OK || PQntuples(res) != 1) {
			snprintf(err, cap, "%s: no row", sql);
			goto out;
		}
		*ret_value = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	}
	rc = 0;
out:
	PQclear(res);
	PQfinish(conn);
	return rc;
}

int bench_pg_loop_setup(const char *url, char *err, size_t cap)
{
	return one_statement(url,
			     "CREATE TABLE IF NOT EXISTS " LOOP_TABLE
			     " (id bigserial PRIMARY KEY, v text NOT NULL)",
			     NULL, err, cap);
}

int bench_pg_loop_rows(const char *url, int64_t *ret_rows, char *err, size_t cap)
{
	return one_statement(url, "SELECT count(*) FROM " LOOP_TABLE, ret_rows, err, cap);
}

int bench_pg_count(const char *url, const char *sql, int64_t *ret, char *err, size_t cap)
{
	return one_statement(url, sql, ret, err, cap);
}
