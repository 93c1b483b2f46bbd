/*
 * store_fixture.c: a store on a fresh temporary database (store_fixture.h).
 */
#include "store_fixture.h"

#include <criterion/criterion.h>
#include <sodium.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_fixture_open(struct store_fixture *fx, unsigned pool_size)
{
	srv_error err = {0};

	strcpy(fx->dir, "/tmp/dpgate-store-XXXXXX");
	cr_assert(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/g.db", fx->dir);
	cr_assert_eq(srv_store_open(fx->path, pool_size, &fx->st, &err), 0, "%s", err.text);
}

void store_fixture_close(struct store_fixture *fx)
{
	char cmd[160];

	srv_store_close(fx->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	cr_assert_eq(system(cmd), 0);
}

void store_fixture_dataset(srv_db *db, const char *id, double eps)
{
	srv_dataset ds;
	acct_filter f;

	memset(&ds, 0, sizeof(ds));
	strcpy(ds.id, id);
	strcpy(ds.name, id);
	strcpy(ds.privacy_unit, "row");
	ds.neighbor = ACCT_ADD_REMOVE;
	ds.accountant = ACCT_LEDGER_BASIC;
	ds.budget_epsilon = eps;
	ds.budget_delta = 1e-5;
	cr_assert_eq(acct_filter_init(&f, ds.accountant, ds.neighbor, eps, 1e-5, NULL), 0);
	acct_filter_zero(&f, &ds.spent);
	acct_filter_zero(&f, &ds.reserved);
	cr_assert_eq(srv_store_dataset_create(db, &ds, "test"), SRV_OK);
}

srv_db *store_fixture_start(struct store_fixture *fx, const char *id, double eps)
{
	srv_db *db;

	cr_assert(sodium_init() >= 0);
	store_fixture_open(fx, 20);
	db = srv_store_acquire(fx->st);
	store_fixture_dataset(db, id, eps);
	return db;
}

void store_fixture_end(struct store_fixture *fx, srv_db *db)
{
	if (db)
		srv_store_release(fx->st, db);
	store_fixture_close(fx);
}
