/*
 * bench_pg_loop.h: the bare libpq commit loop, PostgreSQL's ceiling for
 * durable charges, as the bare SQLite commit loop is SQLite's.
 *
 * N clients, each on its own connection and thread, each committing one
 * small row per transaction (a prepared INSERT that is its own
 * transaction, so one round trip and one WAL flush per commit) with
 * synchronous_commit on: a commit is counted only after the server said
 * it is durable, as dpgate answers a charge only after its COMMIT.
 */
#ifndef BENCH_PG_LOOP_H
#define BENCH_PG_LOOP_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_pg_loop_result {
	unsigned clients;
	double rate;        /* commits per second in the counted window */
	double p50_us, p99_us; /* commit latency in the counted window */
	uint64_t measured;  /* commits in the counted window */
	uint64_t committed; /* commits in the whole cell, warm-up included */
	uint64_t failed;    /* statements that failed */
} bench_pg_loop_result;

/* Creates the loop's table in the database at URL; 0, or -1 with the
 * reason in ERR (CAP bytes). */
int bench_pg_loop_setup(const char *url, char *err, size_t cap);

/*
 * Runs CLIENTS clients for DURATION_S seconds against URL, the first
 * WARMUP_S not counted in the rate or the latencies.  0, or -1 with the
 * reason in ERR when a client could not connect or prepare.
 */
int bench_pg_loop_run(const char *url, unsigned clients, double duration_s, double warmup_s,
		      bench_pg_loop_result *ret, char *err, size_t cap);

/* The rows in the loop's table (every commit ever counted); 0 or -1. */
int bench_pg_loop_rows(const char *url, int64_t *ret_rows, char *err, size_t cap);

/* Runs SQL, a query of one row, on a fresh connection to URL and reads its
 * first value as a whole number (a count); 0, or -1 with the reason. */
int bench_pg_count(const char *url, const char *sql, int64_t *ret, char *err, size_t cap);

#endif
