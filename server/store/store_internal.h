/*
 * store_internal.h: transaction and ledger primitives shared by the
 * store files of server/ (store_db.c, store_jobs.c, ...).  Everything
 * here runs on one connection, inside or around one write transaction.
 */
#ifndef DPGATE_SRV_STORE_INTERNAL_H
#define DPGATE_SRV_STORE_INTERNAL_H

#include "store.h"
#include "store_sql.h"

/* The driver connection under db, for the other store files. */
srv__conn *srv__db_conn(srv_db *db);

/* The engine's message for the last failure on db's connection. */
const char *srv__db_errmsg(srv_db *db);

/* A read-only transaction: one snapshot for what follows; 0 or -1.
 * srv__db_end_read ends it (a no-op when none is open). */
int srv__db_begin_read(srv_db *db);
void srv__db_end_read(srv_db *db);

/* The steps every one-off statement of the store takes, once.  A
 * statement from srv__prepare is the caller's to finalize, except that
 * srv__run and srv__each_row finalize the one they are given; each of the
 * three accepts NULL (a failed prepare) and answers SRV_DB_ERROR. */

/* Prepares `sql` on db's connection and binds ?1 to text1 (left unbound
 * when NULL; the text must outlive the statement).  NULL when it
 * cannot be prepared. */
srv__stmt *srv__prepare(srv_db *db, const char *sql, const char *text1);

/* srv__prepare, with ?2 bound as well: to the text text2 (which must
 * outlive the statement), or to the integer int2. */
srv__stmt *srv__prepare_text2(srv_db *db, const char *sql, const char *text1, const char *text2);
srv__stmt *srv__prepare_int2(srv_db *db, const char *sql, const char *text1, int64_t int2);

/* Runs s to completion and finalizes it: SRV_OK or SRV_DB_ERROR. */
int srv__run(srv__stmt *s);

/* Steps s to its first row: SRV_OK (read it, then finalize s),
 * SRV_NOT_FOUND when there is none, SRV_DB_ERROR. */
int srv__first_row(srv__stmt *s);

/* A listing's callback and its argument, handed to the row function of
 * srv__each_row or srv__db_page: `each` holds the one callback that the
 * listing's row type takes. */
struct srv__lister {
	union {
		srv_reservation_row_fn reservation;
		srv_ledger_row_fn ledger;
		srv_key_row_fn key;
		srv_key_event_fn key_event;
		int (*votes)(void *arg, const int32_t *votes, size_t bytes);
	} each;
	void *arg;
};

/* Calls `row` with each row of s, then finalizes s.  A negative return of
 * `row` stops the walk and is returned; otherwise SRV_OK, or SRV_DB_ERROR
 * when stepping fails. */
int srv__each_row(srv__stmt *s, int (*row)(srv__stmt *s, void *arg), void *arg);

/* One page of a keyset-paginated listing, for the store files: runs
 * `sql`, binding ?1 to text_param (left unbound when NULL), ?2 to `after`
 * and ?3 to limit + 1, whose first column is the row's cursor.  The first
 * `limit` rows go to `row` (0, or negative to fail the listing); *ret_next
 * gets the last listed cursor when more rows follow, else -1.  SRV_OK or
 * SRV_DB_ERROR. */
int srv__db_page(srv_db *db, const char *sql, const char *text_param, int64_t after,
		 int64_t limit, int (*row)(srv__stmt *s, void *arg), void *row_arg,
		 int64_t *ret_next);
/* The same for a listing whose cursor is a row's text id: binds ?1 to
 * text_param, ?2 to limit + 1 and, when `after` is not NULL, ?3 to it;
 * *ret_more tells whether more rows follow the page. */
int srv__db_page_after(srv_db *db, const char *sql, const char *text_param, const char *after,
		       int64_t limit, int (*row)(srv__stmt *s, void *arg), void *row_arg,
		       bool *ret_more);


/*
 * A prepared statement kept for the connection's lifetime, keyed by the
 * address of its SQL (pass a string literal or static array), reset and with
 * bindings cleared.  The caller resets it after use and never finalizes it.
 * NULL when it cannot be prepared or the cache is full.
 */
srv__stmt *srv__cached_stmt(srv_db *db, const char *sql);

/* Starts the write transaction (SQLite: BEGIN IMMEDIATE, waiting on the
 * busy handler); 0, SRV_DB_MOVED (the store's file is gone from its path:
 * nothing begun, srv_store_file_check) or SRV_DB_ERROR. */
int srv__begin_write(srv_db *db);

/* For a write of one statement outside any transaction: SRV_OK when the
 * store's file is at its path, else SRV_DB_MOVED and nothing may be
 * written (the check srv__begin_write makes first). */
int srv__write_allowed(srv_db *db);

/* Inside the write transaction, before the dataset's totals are read:
 * keeps every other writer off them until COMMIT (the driver's
 * lock_dataset).  SRV_OK or SRV_DB_ERROR. */
int srv__lock_dataset(srv_db *db, const char *dataset_id);

/* As srv__lock_dataset, for rows no single row stands for, named by
 * `what` (e.g. "admin keys"). */
int srv__lock_named(srv_db *db, const char *what);

/* COMMIT (durable: synchronous=FULL under SQLite); when it fails, logs it,
 * rolls back and returns SRV_COMMIT_FAILED (see store_db.c on what may
 * stay). */
int srv__commit(srv_db *db);

/* ROLLBACK if a transaction is open; a no-op otherwise. */
void srv__rollback(srv_db *db);

/*
 * Appends one ledger row to ds's ledger, carrying ds's running totals and
 * counters as they stand after the row (the caller has applied the row to
 * *ds first); these become the dataset's totals (schema/006).  Leaves *ds
 * as a read of the dataset would return it (totals parsed back from the text
 * stored, updated_at the later of its own and now).  Returns the row's seq,
 * or -1 (nothing of *ds changed).
 */
int64_t srv__ledger_insert(srv_db *db, srv_dataset *ds, const char *kind, const char *event,
			   const char *cost, double eps, double delta, const char *rid,
			   const char *note, const char *actor, const char *idem_key,
			   const char *now);

/* Commits or releases an open reservation of `ds` (updating ds in memory
 * and the ledger); SRV_NOT_FOUND, SRV_CONFLICT when not open (ret_state
 * says what it is; may be NULL), SRV_OK or SRV_DB_ERROR. */
int srv__close_reservation_locked(srv_db *db, srv_dataset *ds, const char *rid, bool do_commit,
				  const char *actor, const char *now, char ret_state[16]);

/* Commits the dataset's expired open reservations (the expiry rule);
 * *ret_closed (may be NULL) is set to how many, on SRV_OK. */
int srv__sweep_expired(srv_db *db, srv_dataset *ds, const char *now, int *ret_closed);

/* srv_store_verify inside the caller's transaction, which it neither
 * begins nor ends (migrate verifies its copy before the COMMIT). */
int srv__verify_in_txn(srv_db *db, srv_verify_fn each, void *arg);

#ifdef DPG_TESTING
/*
 * Runs n spends as one group-commit batch (one transaction, a savepoint
 * each), as srv_store_spend does when requests arrive together; for tests
 * that need a batch of known content.  rcs[i] is spend i's outcome.
 */
int srv__spend_batch_for_tests(srv_db *db, const srv_spend *const *sps, size_t n, int *statuses,
			       char **bodies, srv_dataset *dss, int *rcs);

/*
 * Called after a COMMIT that succeeded: true, once, when the environment
 * variable `var` names a file that exists, which this removes.  The caller
 * then reports the commit failed, as when its answer is lost although it
 * was written (an I/O error after SQLite wrote the WAL frame, a PostgreSQL
 * connection lost after the server committed).  Logged and counted as
 * srv__commit counts a failure.  The variables: DPGATE_TEST_LOSE_CLAIM_COMMIT
 * (a job's claim, srv__job_claim) and DPGATE_TEST_LOSE_END_COMMIT (a job's
 * end, srv__job_finish_charged).
 */
bool srv__commit_lost_for_tests(srv_db *db, const char *var);
#endif

/*
 * Inside the caller's write transaction: the table file the dataset's link
 * names (malloc'd into *ret, NULL when it hosts no table).  Returns SRV_OK
 * or SRV_DB_ERROR.
 */
int srv__table_file_in_txn(srv_db *db, const char *dataset_id, char **ret);

/*
 * Inside the caller's write transaction, before a dataset's data link is
 * replaced: takes the lock that a job's claim takes before it checks the
 * link (srv__job_claim), so that the two are ordered, and refuses while a
 * job of the dataset runs.  A running job may not have read its data yet
 * (it reads after the claim commits), so the link must not change under
 * it.  SRV_OK, SRV_CONFLICT (a job runs) or SRV_DB_ERROR.
 */
int srv__data_link_hold(srv_db *db, const char *dataset_id);
/* The name of the lock an upload, a claim and an archive take on a
 * dataset's link (srv__data_link_hold, srv__job_claim,
 * srv_store_dataset_archive). */
void srv__data_link_lock_name(const char *dataset_id, char name[DPG_MAX_ID_BYTES + 16]);

#endif
