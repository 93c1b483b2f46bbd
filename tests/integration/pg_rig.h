/*
 * pg_rig.h: what the tests of several servers on one PostgreSQL share: a
 * throwaway cluster (tests/pg/pg_cluster.h) with one fresh database.
 */
#ifndef PG_RIG_H
#define PG_RIG_H

#include <stddef.h>

#include "pg_cluster.h"

/* Starts a throwaway cluster (*ret, for pgc_cluster_free) and creates an
 * empty database on it, whose URL goes into url (size bytes); fails the
 * test when either cannot be done. */
void dpg_pg_cluster_database(struct pgc_cluster **ret, char *url, size_t size);

#endif
