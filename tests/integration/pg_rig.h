/*
 * pg_rig.h: what the tests of several dpgate servers on one PostgreSQL
 * share (test_pg_race.c, test_pg_failover.c, test_pg_tables.c,
 * test_pg_watch.c, test_pg_models.c, test_pg_jobs.c).
 */
#ifndef DPG_TEST_PG_RIG_H
#define DPG_TEST_PG_RIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "harness.h"
#include "pg_cluster.h"

/* Makes a throwaway cluster (*ret_cluster, freed by pgc_cluster_free) with
 * one empty database, whose URL is copied into url (cap bytes); fails the
 * test when either cannot be made. */
void dpg_pg_database(struct pgc_cluster **ret_cluster, char *url, size_t cap);

/* One statement through psql on the database at url; its unaligned output
 * (trailing newline removed) in out.  Returns psql's exit status. */
int dpg_pg_psql(const char *url, const char *sql, char *out, size_t size);

/* A psql session on the database at url that keeps its transaction open
 * between statements: dpg_pg_session_send sends it one, and pclose ends
 * it (and its transaction, if still open). */
FILE *dpg_pg_session_open(const char *url);
void dpg_pg_session_send(FILE *f, const char *sql);

/* Whether the dpgate under test has a PostgreSQL store: its serve --help
 * names postgresql:// URLs.  Before the store lands, the tests skip and
 * say why rather than fail on the first `keys create`. */
bool dpg_pg_store_built(void);

/* Two servers, A and B, each with a data directory of its own, on one
 * throwaway database. */
struct dpg_pg_pair {
	struct pgc_cluster *cluster;
	char url[PGC_URL_MAX];
	dpg_server a, b;
};

/* Zeroes *p, makes its database (dpg_pg_database) and starts A and B on
 * it; fails the test when any of them cannot be had. */
void dpg_pg_pair_start(struct dpg_pg_pair *p);

/* Stops A and B and removes their data directories and the cluster. */
void dpg_pg_pair_free(struct dpg_pg_pair *p);

#endif
