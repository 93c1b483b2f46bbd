/*
 * test_status.c: the store's outcome codes follow acct_error's convention.
 *
 * 0 is success, every failure is negative (so `rc < 0` means "failed" for
 * every caller), SRV_REPLAYED is the only positive value, and no failure
 * shares its value with an accountant code that travels through the same
 * int (a listing callback's ACCT_E* comes back unchanged).
 */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "acct.h"
#include "store.h"
#include "store_fixture.h"

static const int failures[] = {
	SRV_DB_ERROR, SRV_NO_RANDOM, SRV_COMMIT_FAILED, SRV_NOT_FOUND,
	SRV_CONFLICT, SRV_IDEM_MISMATCH, SRV_PLAN_REFUSED, SRV_FORBIDDEN, SRV_DB_MOVED,
	SRV_NOT_DPGATE,
};

static const int acct_codes[] = {
	ACCT_EINVAL, ACCT_EUNSUPPORTED, ACCT_ENUMERIC, ACCT_ENOMEM, ACCT_EEXCEEDED, ACCT_EINTERNAL,
};

#define N_FAILURES (sizeof(failures) / sizeof(failures[0]))
#define N_ACCT (sizeof(acct_codes) / sizeof(acct_codes[0]))

Test(srv_status, success_is_zero_or_replayed_and_every_failure_is_negative)
{
	cr_assert_eq(SRV_OK, 0);
	cr_assert_gt(SRV_REPLAYED, 0, "a replay is a success variant");
	for (size_t i = 0; i < N_FAILURES; i++)
		cr_assert_lt(failures[i], 0, "failure %zu is %d", i, failures[i]);
}

Test(srv_status, failures_are_distinct_and_apart_from_the_accountant_codes)
{
	for (size_t i = 0; i < N_FAILURES; i++) {
		for (size_t j = i + 1; j < N_FAILURES; j++)
			cr_assert_neq(failures[i], failures[j]);
		for (size_t k = 0; k < N_ACCT; k++)
			cr_assert_neq(failures[i], acct_codes[k], "%d is also an ACCT_E code",
				      failures[i]);
	}
}

/* What the store returns, not only what the header declares: each refusal
 * of a real store is one of the negative codes, so `< 0` catches it. */
Test(srv_status, a_real_store_answers_refusals_with_negative_codes)
{
	struct store_fixture fx;
	srv_dataset ds;
	srv_db *db;

	db = store_fixture_start(&fx, "d", 1.0);
	cr_assert_eq(srv_store_dataset_get(db, "absent", &ds), SRV_NOT_FOUND);
	cr_assert_lt(srv_store_dataset_get(db, "absent", &ds), 0);
	cr_assert_eq(srv_store_dataset_get(db, "d", &ds), SRV_OK);
	/* The same id again: it exists already. */
	cr_assert_lt(srv_store_dataset_create(db, &ds, "test"), 0);
	cr_assert_eq(srv_store_dataset_create(db, &ds, "test"), SRV_CONFLICT);
	cr_assert_eq(srv_store_dataset_archive(db, "d", "test", &ds), SRV_OK);
	cr_assert_eq(srv_store_dataset_update(db, "d", "new name", NAN, NAN, "test", &ds),
		     SRV_CONFLICT);
	cr_assert_lt(srv_keys_revoke(db, "0123456789abcdef", "test"), 0);
	store_fixture_end(&fx, db);
}
