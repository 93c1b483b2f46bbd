/*
 * store_fixture.h: a store on a fresh temporary database, for the store
 * layer's tests.  One fixture, so that each test file opens, fills and
 * removes its database the same way.
 */
#ifndef TEST_STORE_FIXTURE_H
#define TEST_STORE_FIXTURE_H

#include "store.h"

struct store_fixture {
	char dir[64], path[128];
	srv_store *st;
};

/* Opens a pool of `pool_size` connections on a new database in a fresh
 * directory under /tmp; fails the running test when it cannot. */
void store_fixture_open(struct store_fixture *fx, unsigned pool_size);

/* Closes the store and removes its directory. */
void store_fixture_close(struct store_fixture *fx);

/* Creates dataset `id` (basic accountant, add/remove neighbours, budget
 * (eps, 1e-5), nothing spent); fails the running test when it cannot. */
void store_fixture_dataset(srv_db *db, const char *id, double eps);

/* sodium_init, store_fixture_open with a pool of 20, a connection of it
 * and dataset `id` with budget eps on it: the start of most store tests.
 * Returns the connection. */
srv_db *store_fixture_start(struct store_fixture *fx, const char *id, double eps);

/* Gives db back to the pool (unless NULL), then store_fixture_close. */
void store_fixture_end(struct store_fixture *fx, srv_db *db);

#endif
