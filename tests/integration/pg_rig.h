/*
 * pg_rig.h: what the tests of several dpgate servers on one PostgreSQL
 * share (test_pg_race.c, test_pg_failover.c, test_pg_watch.c).
 */
#ifndef DPG_TEST_PG_RIG_H
#define DPG_TEST_PG_RIG_H

#include <stddef.h>

#include "pg_cluster.h"

/* Makes a throwaway cluster (*ret_cluster, freed by pgc_cluster_free) with
 * one empty database, whose URL is copied into url (cap bytes); fails the
 * test when either cannot be made. */
void dpg_pg_database(struct pgc_cluster **ret_cluster, char *url, size_t cap);

/* One statement through psql on the database at url; its unaligned output
 * (trailing newline removed) in out.  Returns psql's exit status. */
int dpg_pg_psql(const char *url, const char *sql, char *out, size_t size);

#endif
