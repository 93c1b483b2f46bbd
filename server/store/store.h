/*
 * store.h: dpgate's storage, the only layer that knows SQL.
 *
 * Datasets, their ledgers and reservations, API keys, training jobs and
 * data links, PATE sessions and hosted tables live here behind C types:
 * callers see no SQLite type (srv_db and srv_store are opaque), and a
 * second backend would implement this header.  Every outcome is an
 * srv_status code.  The store is one static library (server/store/); it
 * depends on base/ and the accountant, never on http/, api/ or jobs/.
 */
#ifndef DPGATE_SRV_STORE_H
#define DPGATE_SRV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "acct.h"
#include "base.h"
#include "mech.h"

/* ------------------------------------------------------------------------ */
/* Connections, datasets, spends, ledgers (store_db.c)                        */
/* ------------------------------------------------------------------------ */

/* Process-wide setup, once, before any database is opened (main). */
void srv_store_init_process(void);

/* One database connection with its prepared statements; used by one thread
 * at a time, handed out by the pool. */
typedef struct srv_db srv_db;

/* A pool of connections to one database (an SQLite file in WAL mode, or a
 * PostgreSQL database). */
typedef struct srv_store srv_store;

/*
 * What a --db target names.  "postgresql://..." or "postgres://..." (libpq's
 * URL) is a PostgreSQL database that several dpgate servers may share; a
 * path, or "sqlite:PATH", is an SQLite file that one server owns.  Every
 * function below that takes a `path` takes either.
 */
bool srv_store_is_shared(const char *target);

/* The target as messages and logs may show it: a URL's password left out,
 * the sqlite: prefix dropped. */
void srv_store_target_name(const char *target, char *buf, size_t size);

/* The SQLite file a target names (the target without "sqlite:"); NULL for
 * a PostgreSQL URL. */
const char *srv_store_file(const char *target);

/* Whether other servers may write the store's database at the same time
 * (srv_store_is_shared of the target it was opened on). */
bool srv_store_shared(const srv_store *store);

/*
 * Other servers' commits, on a shared (PostgreSQL) database.  Every write
 * transaction that changes a dataset tells the database so (NOTIFY with
 * the dataset's id, delivered only when it commits); a listener keeps one
 * connection of its own that LISTENs, and a thread that calls
 * fn(arg, dataset_id) for each such commit, from any server including
 * this one.  When its connection is lost it connects again by itself
 * (waiting longer after each failure, up to DPG_PG_LISTEN_BACKOFF_MAX_MS),
 * and after every connect it calls fn(arg, NULL): changes made meanwhile
 * were not heard, so everything may have changed.  fn runs on the
 * listener's thread and must not block.
 */
typedef void (*srv_change_fn)(void *arg, const char *dataset_id);
typedef struct srv_store_listener srv_store_listener;

/*
 * Starts a listener on the database `target` names.  For an SQLite target
 * (one server, whose own commits are all there are) nothing is started:
 * SRV_OK with *ret NULL.  The first connection is made by the thread, so
 * a database that is down when this is called is listened to once it is
 * up.  SRV_OK, or SRV_DB_ERROR with a message in err (out of memory, no
 * thread).
 */
int srv_store_listen_start(const char *target, srv_change_fn fn, void *arg,
			   srv_store_listener **ret, srv_error *err);

/* Stops the listener's thread (at once, even while it waits to connect
 * again), closes its connection and frees it; NULL is a no-op. */
void srv_store_listen_stop(srv_store_listener *l);

/*
 * Opens (creating if needed) the database at `path` (a PostgreSQL database
 * must exist; its tables are created), sets WAL mode and
 * synchronous=FULL, applies the embedded migrations idempotently, and makes a
 * pool of `pool_size` connections.  An absent or empty file is initialised;
 * a file with tables but no schema_migrations (someone else's database), or
 * with a schema version above the highest of the embedded migrations, is
 * refused before anything is written.  Returns 0, or -1 with a message in
 * err, whose code is SRV_NOT_DPGATE when the target is not a dpgate
 * database (a file that is not SQLite, or someone else's tables) and
 * SRV_DB_ERROR for every other failure.
 */
int srv_store_open(const char *path, unsigned pool_size, srv_store **ret_store,
		   srv_error *err);

/*
 * Opens an existing dpgate database for reading only (SQLITE_OPEN_READONLY,
 * query_only): one connection, no migrations, no checkpoint at close, so the
 * database file is never written.  It may be held open by a running server
 * (WAL readers share its -wal and -shm files; on a WAL database that no one
 * has open, SQLite itself creates those two side files, as for any reader).
 * Refuses, with a message in err and -1, a file that is missing, not
 * SQLite, without dpgate's schema (empty or foreign), or at another schema
 * version than this binary's.  Returns 0 with the store in *ret_store; close
 * it with srv_store_close.  Writes through it fail.  With `unwritable` (a
 * command that only reads: verify, backup), a WAL file that cannot be read
 * because its side files cannot be created (read-only media) and that has
 * no -wal holding commits is opened as immutable instead (store_sqlite.h).
 */
int srv_store_open_read_only(const char *path, bool unwritable, srv_store **ret_store,
			     srv_error *err);

/*
 * Writes zeros past the end of the WAL file, under the write lock, until it
 * holds a checkpoint interval of frames, and syncs them: commits then
 * overwrite blocks the file already has instead of growing it (see the
 * comment in store_db.c).  For serve at start.  Returns 0 (also when the
 * file was that long already), or -1 with a message in err and the file
 * as it was.
 */
int srv_store_preallocate_wal(srv_store *store, srv_error *err);

/* Stops the file watcher (srv_store_file_watch_start), checkpoints the WAL
 * and closes every connection.  Accepts NULL. */
void srv_store_close(srv_store *store);

/*
 * As srv_store_close, for a command that closes a store while a running
 * server holds the same database: its checkpoint copies what it can into
 * the database but neither empties nor shortens the WAL, which the server
 * wrote out to its working size and keeps so (srv_store_preallocate_wal).
 * Accepts NULL.
 */
void srv_store_close_beside_server(srv_store *store);

/* Takes a connection from the pool, waiting while all are in use. */
srv_db *srv_store_acquire(srv_store *store);
void srv_store_release(srv_store *store, srv_db *db);

/* The schema version recorded by the migrations. */
int srv_store_schema_version(srv_db *db);

/* The highest schema version this binary's embedded migrations reach. */
long srv_store_known_schema_version(void);

typedef struct srv_dataset {
	char id[DPG_MAX_ID_BYTES + 1];
	char name[DPG_MAX_NAME_BYTES + 1];
	char privacy_unit[DPG_MAX_ID_BYTES + 1];
	acct_neighbor neighbor;
	acct_ledger_kind accountant;
	double budget_epsilon;
	double budget_delta;
	/* rdp: the filter orders chosen at creation; n_filter_orders = 0 means
	 * the default ones (acct_filter_default_orders). */
	unsigned n_filter_orders;
	double filter_orders[DPG_MAX_FILTER_ORDERS];
	acct_cost spent;
	acct_cost reserved;
	int64_t open_reservations;
	int64_t charges;
	bool archived;
	/* Public rows (schema/010): no budget, no ledger, never charged; the
	 * budget fields hold the store's placeholder. */
	bool is_public;
	/* Label DP (schema/011): privacy_unit "label", features public,
	 * neighbours differ in one label (replace); fixed at creation.  Only a
	 * dataset created with that meaning has it, never older text. */
	bool label_private;
	char created_at[32];
	char updated_at[32];
} srv_dataset;

/*
 * Outcome codes of store operations, in the convention of acct_error: 0 is
 * success and every failure is negative.  SRV_REPLAYED is the one positive
 * value: a success too (the stored answer goes out as it was), told apart
 * because the caller must not redo the work a first answer did.  The
 * failures sit below -100, clear of the accountant's ACCT_E* codes (-1 to
 * -6), which pass through some store calls unchanged (a listing's callback
 * may stop it with one).  Test a result with `== SRV_OK` or `!= SRV_OK`, or
 * `< 0` for "failed" where SRV_REPLAYED counts as success.
 */
enum srv_status {
	SRV_OK = 0,
	SRV_REPLAYED = 1,         /* an idempotent request answered from storage */
	SRV_DB_ERROR = -100,      /* 503: nothing was written */
	SRV_NO_RANDOM = -101,     /* 503: getrandom failed; nothing was written */
	SRV_COMMIT_FAILED = -102, /* 503: COMMIT failed (storage): not applied, but its
				   * write may still be found after a crash */
	SRV_NOT_FOUND = -103,     /* 404 */
	SRV_CONFLICT = -104,      /* 409: exists already, or archived, or over budget */
	SRV_IDEM_MISMATCH = -105, /* same Idempotency-Key, different request: 422 */
	SRV_PLAN_REFUSED = -106,  /* the spend's plan_fn refused (its own error says why) */
	SRV_FORBIDDEN = -107,     /* 403: another key's to change; nothing was written */
	SRV_DB_MOVED = -108,      /* 503: the SQLite file is no longer at its path
				   * (srv_store_file_check); nothing was written */
	SRV_NOT_DPGATE = -109,    /* opening: the target is not a dpgate database (not
				   * SQLite, or tables but no schema_migrations);
				   * refused before anything was written */
};

/*
 * Whether the SQLite file the store has open, its WAL and the WAL's index
 * (-shm) are still the files their paths name.  A file deleted, moved or
 * replaced under a running server stays open and writable, but what is
 * written to it is not what the next start on that path reads: a charge
 * written there is lost, and its budget counted by no one; with the index
 * lost, another process's commits and the server's overwrite each other.
 * So every write transaction checks this first (one stat(2), and the side
 * files' at most once a second) and is refused with SRV_DB_MOVED while a
 * path names another file or none; it goes through again once the files
 * are back at their paths.  A write's check, or the watcher's
 * (srv_store_file_watch_start), that finds the WAL lost and the database
 * file in place copies the WAL the server still holds into the database
 * file (a checkpoint, through a connection of the pool, while no write is
 * let in; one at a time), which keeps what it held past a crash; with only
 * the index lost, the WAL at its path keeps it, and the store's close
 * leaves the WAL whole.  srv_store_file_check itself only checks, so that
 * it never waits behind a reader (for /healthz).
 * The first refusal after the path was last right is logged as one JSON
 * line on stderr, and so is the first check that finds the file back; a
 * copy of a lost WAL is logged once it is made (or once it failed).
 * SRV_OK for a PostgreSQL or read-only store, which have no file to lose.
 */
int srv_store_file_check(srv_store *st);

/*
 * Starts a thread that checks the files once a second, so that a
 * loss is seen, and a lost WAL copied into the database file, within about
 * a second even while no request comes (for serve).  srv_store_close stops
 * and joins it.  0 (also for a store with no file to watch: PostgreSQL,
 * read-only), or -1 with a message in err.
 */
int srv_store_file_watch_start(srv_store *st, srv_error *err);

/* Reads one dataset.  Returns SRV_OK, SRV_NOT_FOUND or SRV_DB_ERROR. */
int srv_store_dataset_get(srv_db *db, const char *id, srv_dataset *ret);

/*
 * A filter to price a spend on dataset `id` with before the write lock: its
 * ledger kind, neighbouring relation and orders are the dataset's (fixed at
 * creation), its budget may be an older one, so it serves pricing only;
 * admission builds its filter from the row read under the lock.  Remembered
 * per store after the first read; *ret_archived is true only when the row
 * just read says so (archived datasets are not remembered).  Returns SRV_OK,
 * SRV_NOT_FOUND or SRV_DB_ERROR.
 */
int srv_store_dataset_pricing(srv_db *db, const char *id, acct_filter *ret, bool *ret_archived);

/* Lists datasets ordered by id; `visible` filters (NULL = all).  Calls `each`
 * for each row; returns SRV_OK or SRV_DB_ERROR. */
int srv_store_dataset_list(srv_db *db, bool (*visible)(void *arg, const char *id),
			   void (*each)(void *arg, const srv_dataset *ds), void *arg);

/* Creates a dataset with zero compositions, and its 'create' ledger row
 * (initial budget, actor) in the same transaction.  SRV_CONFLICT if the id
 * exists.  A public one (ds->is_public) gets the placeholder budget
 * (srv_store_public_budget) and no ledger row. */
int srv_store_dataset_create(srv_db *db, const srv_dataset *ds, const char *actor);

/*
 * Updates name and/or budget (NULL / NAN = unchanged).  A budget change is a
 * ledger row of kind 'budget' naming the actor.  SRV_NOT_FOUND, SRV_CONFLICT
 * (archived) or SRV_OK, with the updated row in *ret.
 */
int srv_store_dataset_update(srv_db *db, const char *id, const char *name,
			     double budget_epsilon, double budget_delta, const char *actor,
			     srv_dataset *ret);

/* Sets ds's budget fields to the placeholder a public dataset stores: a
 * basic ledger whose budget admits no charge. */
void srv_store_public_budget(srv_dataset *ds);

/* Archives a dataset (keeps its ledger; refuses new charges). */
int srv_store_dataset_archive(srv_db *db, const char *id, const char *actor, srv_dataset *ret);

/* What a spending request asks the store to do. */
typedef enum srv_spend_kind {
	SRV_SPEND_CHARGE,
	SRV_SPEND_RESERVE,
} srv_spend_kind;

/*
 * Writes the answer of a successful spend inside the transaction, so that
 * it can be stored for idempotent replay: `charge_id` is the ledger row,
 * `reservation_id` the new reservation (or NULL), `ds` the dataset after
 * the write.  Returns the answer's bytes (malloc'ed), or NULL when out of
 * memory or a number is not finite: the transaction is then rolled back.
 */
typedef char *(*srv_spend_text_fn)(void *arg, int64_t charge_id, const char *reservation_id,
				   const srv_dataset *ds);

/*
 * Optional planner, called inside the transaction with the dataset's filter
 * and its committed composition (spent + reserved, expired reservations
 * already committed).  It decides what to charge, for requests whose charge
 * depends on what fits (a PATE batch answers the queries that fit, in order):
 * it writes the cost and the event (its JSON text) to record (both owned
 * by `arg`, valid until srv_store_spend returns) and returns 0 to charge
 * them, 1 when nothing fits (the request gets SRV_CONFLICT), or a negative value when it refuses
 * the request (SRV_PLAN_REFUSED; the planner keeps its own error in `arg`).
 */
typedef int (*srv_spend_plan_fn)(void *arg, const acct_filter *f, const acct_cost *committed,
				 const acct_cost **ret_cost, const char **ret_event_text);

/*
 * Optional hook run inside the transaction after the ledger row is written
 * and before the answer is built, to write rows that must commit together
 * with the charge (a job, a PATE session's state).  Returns 0 or a negative
 * value, which rolls everything back (SRV_DB_ERROR).
 */
typedef int (*srv_spend_txn_fn)(void *arg, srv_db *db, const srv_dataset *ds, int64_t charge_id,
				const char *reservation_id);

typedef struct srv_spend {
	srv_spend_kind kind;
	const char *dataset_id;
	const char *event_text;       /* the event's canonical JSON, as the ledger stores it */
	const acct_cost *cost;        /* priced by the caller with the dataset's filter */
	srv_spend_plan_fn plan_fn;    /* optional: replaces event and cost */
	srv_spend_txn_fn txn_fn;      /* optional */
	/* Optional: a named lock (srv__lock_named) its transaction takes
	 * before any dataset's row, e.g. the shared job queue's bound; every
	 * spend that names one names the same, SRV_JOB_QUEUE_LOCK. */
	const char *lock_first;
	const char *note;             /* may be NULL */
	const char *actor;            /* key id */
	const char *idempotency_key;  /* may be NULL */
	const uint8_t *request_hash;  /* 32 bytes, required with a key */
	int64_t ttl_seconds;          /* reservations */
	srv_spend_text_fn text_fn;
	void *body_arg;               /* passed to text_fn, plan_fn and txn_fn */
	int success_status;           /* HTTP status of the answer; 0 = 201 */
} srv_spend;

/*
 * Admits and writes a charge or reservation in one IMMEDIATE transaction:
 * replays a stored answer for a known Idempotency-Key (SRV_REPLAYED, or
 * SRV_IDEM_MISMATCH when the request differs), commits expired reservations,
 * checks spent + reserved + cost against the filter, writes the ledger row,
 * the running totals and the stored answer, and commits with
 * synchronous=FULL.  Only after this returns SRV_OK may the answer (and any
 * output in it) be revealed.  Spends that arrive together share one
 * transaction and one COMMIT (group commit, on the store's writer
 * connection; `db` only names the store), each in its own savepoint, by
 * dataset and in arrival order within one, so each is admitted exactly as
 * if it ran alone after the ones before it; callbacks get the writer
 * connection as their `db`.
 *
 * On success *ret_status is the HTTP status and *ret_body (caller frees) the
 * exact bytes to send.  SRV_CONFLICT means over budget, archived or public: *ret_ds
 * holds the dataset for the 409 body.  SRV_NO_RANDOM when a reservation's id
 * could not be drawn.  SRV_NOT_FOUND, SRV_DB_ERROR otherwise.
 */
int srv_store_spend(srv_db *db, const srv_spend *sp, int *ret_status, char **ret_body,
		    srv_dataset *ret_ds);

/* Group-commit counters: write transactions run for spends (those that
 * committed and those rolled back because nothing in them was kept), and
 * spends in them. */
void srv_store_group_stats(srv_store *st, uint64_t *ret_batches, uint64_t *ret_spends);

/* COMMITs that failed since the store was opened (srv__commit logs each). */
uint64_t srv_store_commit_failures(srv_store *st);

/* How many write transactions the calling thread has committed, a spend's
 * group commit counted for the spend's own thread (not the batch's
 * leader): a request that leaves the count as it was changed nothing. */
unsigned long srv_store_thread_commits(void);

/*
 * Looks an Idempotency-Key up before anything else is checked, so a retry
 * gets its stored answer even when the dataset has changed since (archived,
 * budget spent): SRV_REPLAYED with the bytes, SRV_IDEM_MISMATCH, SRV_OK when
 * the key is new (or sp has none), SRV_DB_ERROR.
 */
int srv_store_replay(srv_db *db, const srv_spend *sp, int *ret_status, char **ret_body);

/* Closes an open reservation: commit moves its cost to spent, release
 * returns it.  SRV_NOT_FOUND, SRV_CONFLICT (not open, *ret_state says what it
 * is; or held by a training job, *ret_job names it), SRV_FORBIDDEN (made by
 * another key than `actor`, unless `any_holder`) or SRV_OK with the dataset
 * after the change.  A job's reservation is the job's to close: it is
 * committed when the job ends once a worker has started it (whatever the
 * outcome), and released only when the job is cancelled while queued;
 * closing it here would let a job that read the data go unpaid.  Another
 * key's reservation is not the caller's to close: releasing it would
 * return budget its holder may have used outside dpgate already. */
int srv_store_reservation_close(srv_db *db, const char *dataset_id, const char *rid,
				bool commit, const char *actor, bool any_holder,
				srv_dataset *ret_ds, char ret_state[16], char ret_job[64]);

/* One reservation as stored; text members are borrowed (valid during the
 * callback), NULL for SQL NULL; expires_at in seconds since the epoch. */
typedef struct srv_reservation_row {
	int64_t ledger_seq; /* its "reserve" ledger row: the listing's cursor */
	const char *id, *event, *state, *actor, *note, *created_at, *closed_at, *closed_by;
	double epsilon;
	int64_t expires_at;
} srv_reservation_row;

/* A lister's callback: 0, or negative to stop (the listing then fails). */
typedef int (*srv_reservation_row_fn)(void *arg, const srv_reservation_row *r);

/* Calls `each` with at most `limit` reservations of a dataset whose
 * ledger_seq is past `after`, oldest first; *ret_next is the last one's
 * ledger_seq when more follow, else -1.  SRV_OK or SRV_DB_ERROR. */
int srv_store_reservation_list(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			       srv_reservation_row_fn each, void *arg, int64_t *ret_next);

/* One ledger row as stored; text members are borrowed (valid during the
 * callback), NULL for SQL NULL.  previous_* is the budget a 'budget' row
 * replaced, when recorded. */
typedef struct srv_ledger_row {
	int64_t seq;
	const char *kind, *event, *reservation_id, *note, *actor, *created_at, *idempotency_key;
	bool has_epsilon, has_delta, has_previous;
	double epsilon, delta, previous_epsilon, previous_delta;
} srv_ledger_row;

typedef int (*srv_ledger_row_fn)(void *arg, const srv_ledger_row *r);

/* Calls `each` with the ledger rows with seq > after, at most `limit`
 * (the 'create' row is the audit list's, not the ledger's).  *ret_next is
 * the last seq listed when more follow, else -1.  SRV_OK or SRV_DB_ERROR
 * (also when `each` stopped the listing). */
int srv_store_ledger_list(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			  srv_ledger_row_fn each, void *arg, int64_t *ret_next);

/* The same for a dataset's administrative ledger rows (create, budget,
 * archive). */
int srv_store_dataset_audit(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			    srv_ledger_row_fn each, void *arg, int64_t *ret_next);

/* What srv_store_verify found for one dataset.  first_row_* are ledger
 * seqs, -1 when none; largest_* only when budget_known (the initial budget
 * was recorded). */
typedef struct srv_verify_dataset {
	char id[DPG_MAX_ID_BYTES + 1];
	int64_t rows, rows_with_totals, admissions_before_a_known_budget;
	int64_t first_row_with_wrong_totals, first_row_over_budget;
	bool totals_match, within_budget, admissions_within_budget, budget_history_matches;
	bool budget_known, ok;
	double spent_epsilon, stored_spent_epsilon, largest_epsilon, largest_delta;
} srv_verify_dataset;

typedef void (*srv_verify_fn)(void *arg, const srv_verify_dataset *v);

/*
 * Recomputes every dataset's spent and reserved totals from its ledger rows
 * (in ledger order, with the same upward rounding) and compares them with
 * the stored totals, and replays its budget history (the 'create' row, then
 * each 'budget' row): every admission (charge, reserve) must fit the budget
 * in force at its row, and the last budget must be the dataset's.  Calls
 * `each` with each dataset's findings; returns SRV_OK when all agree and no
 * admission was over its budget, SRV_CONFLICT otherwise, SRV_DB_ERROR when
 * the rows cannot be read.
 */
int srv_store_verify(srv_db *db, srv_verify_fn each, void *arg);

/*
 * Writes a consistent copy of the dpgate database at db_path (a path, or
 * sqlite:PATH as every --db takes) into the empty file at out_path with
 * SQLite's VACUUM INTO, through a read-only connection: one read
 * transaction, so the copy holds every transaction committed before it
 * began and none after, while a running server goes on committing.  A file without dpgate's schema (no tables, or someone
 * else's) is refused before anything is written; a dpgate schema of any
 * version is copied, from read-only media too (srv_store_open_read_only's
 * `unwritable`); *ret_version gets the copy's schema version and
 * *ret_current whether it is this binary's.  The copy is not synced here.
 * 0, or -1 with a message in err.
 */
int srv_store_backup(const char *db_path, const char *out_path, int64_t *ret_version,
		     bool *ret_current, srv_error *err);

/* The tables `dpgate migrate` copies (store_migrate.c). */
#define SRV_MIGRATE_TABLES 10

/* What srv_store_migrate copied: each table's name and rows, and how many
 * datasets' ledgers verified as the source's. */
typedef struct srv_migrate_report {
	int64_t schema_version;
	const char *tables[SRV_MIGRATE_TABLES];
	int64_t rows[SRV_MIGRATE_TABLES];
	int64_t datasets;
} srv_migrate_report;

/*
 * Copies the dpgate SQLite database `from` (at this binary's schema
 * version, read on one read-only snapshot) whole into the PostgreSQL
 * database `to`, which must be empty (no objects, or dpgate's tables at
 * this version without a row; it is migrated by srv_store_open), in one
 * transaction, identity sequences set past the copied values.  Before the
 * COMMIT the copy's ledgers are verified (srv_store_verify) and each
 * dataset's findings and each table's row count compared with the
 * source's.  Hosted-table and model files are not copied: their rows keep
 * naming the files in the data directory.  Returns SRV_OK (committed),
 * SRV_DB_ERROR (refused before anything was copied) or SRV_CONFLICT (the
 * copy failed or did not verify: rolled back), with a message in err.
 */
int srv_store_migrate(const char *from, const char *to, srv_migrate_report *rep,
		      srv_error *err);

/* fsyncs a directory, so that a file created or renamed in it is durable;
 * 0 or -1 (errno set). */
int srv_fsync_dir(const char *dir);

/* JSON helpers for compositions stored as text. */
char *srv_cost_to_text(const acct_cost *c);
int srv_cost_from_text(const char *text, acct_cost *ret);

/* The dataset's filter, from its stored budget. */
int srv_dataset_filter(const srv_dataset *ds, acct_filter *ret, acct_error *err);

/*
 * The store's latency histograms of spend transactions that committed:
 * *ret_txn from BEGIN IMMEDIATE to the durable COMMIT's return (the time
 * the write lock is held), *ret_commit the COMMIT alone (the WAL write and
 * its fsync).  The pointers stay valid until srv_store_close; the counts
 * are read with atomic loads.
 */
void srv_store_spend_timings(srv_store *st, const srv_histogram **ret_txn,
			     const srv_histogram **ret_commit);

/*
 * A dataset's epsilon figures as its filter reports them, for the budget
 * summary, /metrics and dry-runs alike: spent; committed = spent + reserved
 * (+ `extra`, a release being considered; may be NULL); remaining = budget -
 * committed, 0 when that composition is not within the filter.  Returns 0,
 * or -1 when the dataset's filter cannot be built.
 */
typedef struct srv_epsilons {
	double spent;
	double committed;
	double remaining;
	bool within;
} srv_epsilons;

int srv_dataset_epsilons(const srv_dataset *ds, const acct_cost *extra, srv_epsilons *ret);

/* ------------------------------------------------------------------------ */
/* API keys (store_keys.c)                                                    */
/* ------------------------------------------------------------------------ */

typedef enum srv_role {
	SRV_ROLE_NONE = 0,
	SRV_ROLE_VIEWER = 1,
	SRV_ROLE_ANALYST = 2,
	SRV_ROLE_ADMIN = 3,
} srv_role;

const char *srv_role_name(srv_role role);
int srv_role_from_name(const char *name, srv_role *ret);

#define SRV_KEY_ID_BYTES 8            /* public part, hex in the key */
#define SRV_KEY_SECRET_BYTES 32       /* 256 random bits */
#define SRV_KEY_TEXT_BYTES 96
/* An actor as audit rows name it: a key id, or "cli:" and a login name
 * (LOGIN_NAME_MAX is 256 on Linux). */
#define SRV_ACTOR_BYTES (4 + 256 + 1)

/*
 * Creates a key: 256 random bits from getrandom, stored as a SHA-256 hash,
 * and its key_events row naming `actor` (who made it), in one transaction.
 * Writes the full key text (shown once) into key_text and its id into
 * key_id.  `scope_text` is the JSON array of dataset ids as stored (NULL:
 * "[]").
 * Returns SRV_OK, SRV_NO_RANDOM (getrandom failed), SRV_DB_ERROR or
 * SRV_COMMIT_FAILED (key_text and key_id are then not written).
 */
int srv_keys_create(srv_db *db, srv_role role, const char *scope_text, const char *note,
		    const char *actor, char key_text[SRV_KEY_TEXT_BYTES],
		    char key_id[2 * SRV_KEY_ID_BYTES + 1]);

/* A key row (never its hash); text members borrowed, NULL for SQL NULL;
 * datasets is the scope's JSON array text. */
typedef struct srv_key_row {
	const char *id, *role, *datasets, *note, *created_at, *revoked_at;
} srv_key_row;

typedef int (*srv_key_row_fn)(void *arg, const srv_key_row *r);

/* Calls `each` with every key, oldest first.  SRV_OK or SRV_DB_ERROR. */
int srv_keys_list(srv_db *db, srv_key_row_fn each, void *arg);

/* Revokes a key, with a key_events row naming `actor`, in one transaction
 * (a key revoked already is left as it was).  SRV_NOT_FOUND, SRV_OK or
 * SRV_DB_ERROR. */
int srv_keys_revoke(srv_db *db, const char *key_id, const char *actor);

/* Revokes a key unless it is the last live admin key (SRV_CONFLICT), the
 * count and the revocation in one write transaction. */
int srv_keys_revoke_keeping_an_admin(srv_db *db, const char *key_id, const char *actor);

/* A key_events row (a creation or revocation, who and when); text members
 * borrowed. */
typedef struct srv_key_event_row {
	int64_t seq;
	const char *key_id, *action, *role, *datasets, *actor, *created_at;
	bool synthesized;
} srv_key_event_row;

typedef int (*srv_key_event_fn)(void *arg, const srv_key_event_row *r);

/* Calls `each` with the key_events rows with seq > after, at most `limit`;
 * *ret_next as srv_store_ledger_list's.  SRV_OK or SRV_DB_ERROR. */
int srv_keys_audit(srv_db *db, int64_t after, int64_t limit, srv_key_event_fn each, void *arg,
		   int64_t *ret_next);

/* Counts unrevoked keys of a role. */
int srv_keys_count(srv_db *db, srv_role role, int64_t *ret);

/* SHA-256("dpgate-key-v1" || id || secret), what a key row stores. */
void srv_keys_hash(const char *id_hex, const char *secret_hex, uint8_t out[32]);

/*
 * Looks up the unrevoked key `id_hex` and compares its stored hash with
 * `hash` in constant time.  SRV_OK with its role and its scope (the stored
 * JSON array text, malloc'ed: caller frees) when both match; SRV_NOT_FOUND
 * for an unknown, revoked or mismatching key (alike); SRV_DB_ERROR.
 */
int srv_keys_lookup(srv_db *db, const char *id_hex, const uint8_t hash[32], srv_role *ret_role,
		    char **ret_scope);

/* The stamp file "<db_path>-keys" that `dpgate keys revoke` rewrites after
 * its commit so that running servers flush their key caches. */
void srv_keys_stamp_path(const char *db_path, char *buf, size_t size);
int srv_keys_touch_stamp(const char *db_path);

/* ------------------------------------------------------------------------ */
/* Training jobs and data links (store_jobs.c)                                */
/* ------------------------------------------------------------------------ */

#define SRV_JOB_ID_BYTES 48

/* One row of the jobs table.  The JSON members are the stored texts
 * (malloc'ed; NULL when the column is NULL); srv__job_row_clear frees
 * them. */
typedef struct srv_job_row {
	char id[48];
	char dataset_id[DPG_MAX_ID_BYTES + 1];
	char trainer[16];
	char state[16];
	char reservation_id[64];
	int64_t n_train;
	char *params;
	char *event;
	char *progress;
	char *result;
	char *error;
	char *model_path;
	char created_at[32], started_at[32], finished_at[32];
	char actor[SRV_ACTOR_BYTES]; /* the key that submitted it */
} srv_job_row;

/* A new job row, written in the transaction that reserves its budget. */
typedef struct srv_job_new {
	const char *id;
	const char *dataset_id;
	const char *trainer;          /* NULL: "dpsgd" */
	const char *params_text;
	const char *event_text;
	int64_t n_train;
	const char *reservation_id;
	const char *actor;
	const char *note;
	/* The version of the data link the submission's checks read
	 * (srv__data_link_get_version), or NULL: the job starts only while
	 * the link still has it (srv__job_claim). */
	const char *data_link;
} srv_job_new;

/* What GET .../data shows of a dataset's data link. */
typedef struct srv_data_link {
	char kind[16];
	char builtin[64];       /* empty when the link names no builtin */
	int64_t rows;
	int64_t bytes;
	char *columns;          /* the stored schema's JSON text, or NULL; caller frees */
	char created_at[32];
	bool rows_public;
	bool schema_declared;
} srv_data_link;

/* ---- the jobs' SQL (store_jobs.c): SRV_OK or a negative SRV_ code ---- */

void srv__job_row_clear(srv_job_row *j);
/* Loads job `id` into `j` (cleared first); SRV_NOT_FOUND when there is none.
 * On SRV_OK the caller clears `j`. */
int srv__job_load(srv_db *db, const char *id, srv_job_row *j);
/* Inserts a queued job inside the caller's write transaction. */
int srv__job_insert(srv_db *db, const srv_job_new *job);
/* The lock a submission on a shared database holds (srv_spend.lock_first)
 * while it counts the queued jobs and inserts its own, so that servers'
 * submissions are bounded one after the other. */
#define SRV_JOB_QUEUE_LOCK "job queue"
/* How many jobs are queued, of every server: SRV_OK or SRV_DB_ERROR. */
int srv__job_count_queued(srv_db *db, int64_t *ret_n);
/*
 * Claims a queued job for `owner` in one transaction: `want_id`, or with
 * NULL the oldest queued job no other transaction is claiming (on
 * PostgreSQL SELECT ... FOR UPDATE SKIP LOCKED), moved to running with
 * its lease until `lease_until` (Unix seconds) and `claim_seq`, a number
 * `owner` gives to no other claim (srv__job_claim_took).  SRV_OK with its
 * id in ret_id; SRV_CONFLICT with its id when its dataset was archived (it
 * stays queued, to be cancelled), or when its data link no longer has the
 * version its submission checked (the job is then cancelled here, its
 * reservation released, before this returns); SRV_NOT_FOUND when there
 * is none.  A failure (SRV_DB_ERROR) may come from a COMMIT that was
 * written all the same: srv__job_claim_took tells.
 */
int srv__job_claim(srv_db *db, const char *want_id, const char *owner, int64_t claim_seq,
		   int64_t lease_until, const char *now, char ret_id[SRV_JOB_ID_BYTES]);
/*
 * The job that claim `claim_seq` of `owner` (srv__job_claim) marked
 * running, when that claim was committed and the job still runs: SRV_OK
 * with its id in ret_id.  SRV_NOT_FOUND when the claim took no job (or
 * the job has ended since), SRV_DB_ERROR when it cannot be read.
 */
int srv__job_claim_took(srv_db *db, const char *owner, int64_t claim_seq,
			char ret_id[SRV_JOB_ID_BYTES]);
/* Extends to `lease_until` the lease of each of the n running jobs `ids`
 * that `owner` holds: the jobs its workers run, not every running row that
 * names it (one its workers no longer hold then expires and is swept). */
int srv__job_renew_leases(srv_db *db, const char *owner, const char (*ids)[SRV_JOB_ID_BYTES],
			  unsigned n, int64_t lease_until);
/* Up to `max` ids of running jobs whose lease ended before `now_s`
 * (or that have none), oldest first. */
int srv__job_ids_lease_expired(srv_db *db, int64_t now_s, char (*ids)[SRV_JOB_ID_BYTES],
			       unsigned max, unsigned *ret_n);
/*
 * Records that a user asked to cancel running job `job_id`, so that the
 * server running it stops it even when the request reached another server;
 * SRV_NOT_FOUND when the job is not running, SRV_DB_MOVED (nothing
 * written) while the store's file is not at its path.
 */
int srv__job_request_cancel(srv_db *db, const char *job_id);
/* Up to `max` ids of `owner`'s running jobs whose cancel was requested. */
int srv__job_ids_cancel_requested(srv_db *db, const char *owner, char (*ids)[SRV_JOB_ID_BYTES],
				  unsigned max, unsigned *ret_n);
/*
 * The restart rule for one job whose lease expired: failed with `error`,
 * its reservation committed in full, in one transaction that checks the
 * state and the lease again where it writes, so that of several servers
 * sweeping at once one does it (SRV_CONFLICT for the others, and when the
 * owner renewed the lease meanwhile).
 */
int srv__job_fail_expired(srv_db *db, const char *job_id, int64_t now_s, const char *error,
			  const char *actor);
/* Stores the progress text of a running job (best effort: nothing while
 * the store's file is not at its path). */
void srv__job_save_progress(srv_db *db, const char *id, const char *progress_text);
/*
 * Ends a job in one transaction: closes its reservation (commit, or release
 * when `release` — only for jobs that never started) and records the final
 * state, result, error and model.  `from_state` guards the transition
 * (SRV_CONFLICT when the job is in another state).
 */
int srv__job_finish(srv_db *db, const char *job_id, const char *from_state, const char *state,
		    bool release, const char *result, const char *error, const char *model_path,
		    const char *actor);
/* What a job ran, charged in place of its worst-case reservation: an
 * event's JSON text (NULL: nothing ran), its cost on the dataset's filter
 * (at most the reservation's in every coordinate) and the ledger note. */
typedef struct srv_job_charge {
	const char *event;
	const acct_cost *cost;
	const char *note;
} srv_job_charge;
/*
 * As srv__job_finish, for a job that started and whose reservation was its
 * worst case: the reservation is released and `charge` written as one
 * charge row in the same transaction (SRV_CONFLICT, nothing written, if it
 * does not fit).  A reservation the expiry rule committed stays committed
 * and nothing more is charged.  NULL charge is srv__job_finish.
 *
 * `finished_at` (NULL: the time of the write) is the end time written, the
 * same on every try of one end: a job found already in `state` with that
 * finished_at was ended by an earlier try whose COMMIT was reported failed
 * although it was written, and SRV_OK is answered with nothing written
 * again (its reservation is not closed twice).
 */
int srv__job_finish_charged(srv_db *db, const char *job_id, const char *from_state,
			    const char *state, bool release, const srv_job_charge *charge,
			    const char *result, const char *error, const char *model_path,
			    const char *actor, const char *finished_at);
/* Up to `max` ids of jobs in `state` ("running" or "queued"), queued ones
 * oldest first, into `ids`; SRV_DB_ERROR when they cannot be read. */
int srv__job_ids_in_state(srv_db *db, const char *state, char (*ids)[SRV_JOB_ID_BYTES],
			  unsigned max, unsigned *ret_n);
/* SQLite's text for the connection's last error, for a start-up message. */
const char *srv__job_db_error(srv_db *db);
/* What a job listing shows of each job; a negative return stops it. */
typedef int (*srv_job_listed_fn)(void *arg, const char *id, const char *state,
				 const char *created_at);
/* Calls `each` with each job of a dataset, newest first (by created_at,
 * then id), at most `limit`, from the newest or (non-NULL `after`) from
 * just after job `after`; *ret_more tells whether more follow.  SRV_OK, or
 * SRV_DB_ERROR (also when `each` stopped the listing). */
int srv__job_each_of_dataset(srv_db *db, const char *dataset_id, const char *after,
			     int64_t limit, srv_job_listed_fn each, void *arg, bool *ret_more);

/* The kind ("builtin", "table" or "" when nothing is linked) and builtin
 * name of a data link; SRV_DB_ERROR when it cannot be read. */
int srv__data_link_kind(srv_db *db, const char *dataset_id, char kind[16], char builtin[64]);
/* The linked data's row count and, for a hosted table, its column schema
 * (its JSON text, malloc'ed, or NULL); SRV_NOT_FOUND when nothing is
 * linked. */
int srv__data_link_rows(srv_db *db, const char *dataset_id, int64_t *ret, char **ret_columns);
/* Reads a data link; SRV_NOT_FOUND when there is none.  On SRV_OK the
 * caller frees ret->columns. */
int srv__data_link_get(srv_db *db, const char *dataset_id, srv_data_link *ret);
/*
 * As srv__data_link_get, with the link's version read in the same
 * statement into *ret_version (malloc'ed; the caller frees it): the time
 * it was written and the table it names (a name no other upload uses) or
 * the builtin's directory.  Every write of a link gives it a new version.
 */
int srv__data_link_get_version(srv_db *db, const char *dataset_id, srv_data_link *ret,
			       char **ret_version);
/* Links builtin data in one transaction; a hosted table file it replaces
 * goes to *ret_old_table for the caller to drop after the commit.
 * SRV_CONFLICT, nothing changed, while a job of the dataset runs
 * (srv__data_link_hold). */
int srv__data_link_builtin(srv_db *db, const char *dataset_id, const char *builtin,
			   const char *dir, int64_t rows, const char *actor, char **ret_old_table);

/* ------------------------------------------------------------------------ */
/* PATE aggregation sessions (store_pate.c)                                   */
/* ------------------------------------------------------------------------ */

#define SRV_PATE_SESSION_ID_BYTES 64

/* A session's row: its normalised configuration as stored (JSON text,
 * malloc'ed; srv_pate_row_clear frees it) and its running counts. */
typedef struct srv_pate_row {
	char id[SRV_PATE_SESSION_ID_BYTES];
	char dataset_id[DPG_MAX_ID_BYTES + 1];
	char *config;
	int64_t queries, checks, teacher_answers, student_answers, abstained, releases;
	char created_at[32], updated_at[32];
	char actor[SRV_ACTOR_BYTES]; /* the key that opened it */
} srv_pate_row;

/* What one batch adds to a session's counts. */
typedef struct srv_pate_counts {
	int64_t queries, checks, teacher_answers, student_answers, abstained;
} srv_pate_counts;

void srv_pate_row_clear(srv_pate_row *r);

/* Reads session `sid` of dataset `dataset_id`.  SRV_OK, SRV_NOT_FOUND or
 * SRV_DB_ERROR. */
int srv_store_pate_get(srv_db *db, const char *dataset_id, const char *sid, srv_pate_row *ret);

/* Inserts a new session (id, dataset_id, config and created_at of `row`,
 * which is also its updated_at) with its data-dependent RDP `dd_rdp` (JSON
 * array text).  SRV_OK or SRV_DB_ERROR. */
int srv_store_pate_create(srv_db *db, const srv_pate_row *row, const char *dd_rdp,
			  const char *actor);

/* Calls `each` with the rows of a dataset's sessions, oldest first (by
 * created_at, then id), at most `limit`, from the first or (non-NULL
 * `after`) from just after session `after`; *ret_more tells whether more
 * follow.  A negative return of `each` stops the listing (SRV_DB_ERROR).
 * SRV_OK or SRV_DB_ERROR. */
int srv_store_pate_list(srv_db *db, const char *dataset_id, const char *after, int64_t limit,
			int (*each)(void *arg, const srv_pate_row *row), void *arg,
			bool *ret_more);

/* Inside a spend's transaction (srv_spend_txn_fn): the session's private
 * data-dependent RDP as stored (malloc'ed), the batch's counts and the new
 * RDP written, one answered vote histogram (m counts) stored, a release
 * counted.  Each SRV_OK or SRV_DB_ERROR. */
int srv_store_pate_dd_get(srv_db *db, const char *sid, char **ret);
int srv_store_pate_add_batch(srv_db *db, const char *sid, const srv_pate_counts *add,
			     const char *dd_rdp, const char *now);
int srv_store_pate_add_answer(srv_db *db, const char *sid, int64_t charge_seq,
			      const int32_t *votes, size_t m);
int srv_store_pate_add_release(srv_db *db, const char *sid, const char *now);

/* A read snapshot: reads between srv_store_read_begin (SRV_OK or
 * SRV_DB_ERROR) and srv_store_read_end see one state of the database. */
int srv_store_read_begin(srv_db *db);
void srv_store_read_end(srv_db *db);

/* Inside a read snapshot: the session's checks and teacher answers
 * (SRV_OK, SRV_NOT_FOUND, SRV_DB_ERROR), and each stored vote histogram in
 * order, as the blob stored (NULL when empty) and its size in bytes; a
 * negative return of `each` stops the scan and is returned.  SRV_OK or
 * SRV_DB_ERROR otherwise. */
int srv_store_pate_counters(srv_db *db, const char *sid, int64_t *ret_checks,
			    int64_t *ret_answers);
int srv_store_pate_each_answer(srv_db *db, const char *sid,
			       int (*each)(void *arg, const int32_t *votes, size_t bytes), void *arg);

/* ------------------------------------------------------------------------ */
/* Links to hosted tables (store_tables.c)                                    */
/* ------------------------------------------------------------------------ */

/* The file and the schema (as stored, or NULL) a dataset's hosted-table
 * link names, read in one statement so that they describe the same upload;
 * both malloc'ed (caller frees, also on failure); with ret_declared, whether
 * the upload declared the schema's kinds.  SRV_OK, SRV_NOT_FOUND when no
 * table is hosted, SRV_DB_ERROR. */
int srv_store_table_link_get(srv_db *db, const char *dataset_id, char **ret_path,
			     char **ret_columns, bool *ret_declared);

/* A hosted table's bytes as uploaded, for a shared database to hold. */
struct srv_table_blob {
	const void *bytes;
	size_t len;
};

/*
 * Records an uploaded table as the dataset's link, in one write
 * transaction that also reads the file the link named before (*ret_old,
 * malloc'd, NULL when none), so that concurrent uploads each learn exactly
 * the file their own commit replaced.  With blob NULL the table is already
 * durable at `path`; otherwise (a shared database: srv_db_shared) the
 * bytes are written in the same transaction under the name `path`, so
 * that no server sees the link without them.  SRV_OK, SRV_DB_ERROR,
 * SRV_COMMIT_FAILED, or SRV_CONFLICT, nothing changed, while a job of the
 * dataset runs (it may not have read its table yet).
 */
int srv_store_table_record(srv_db *db, const char *dataset_id, const char *path, int64_t rows,
			   const char *columns, int64_t bytes, bool rows_public, bool schema_declared,
			   const char *actor, const struct srv_table_blob *blob, char **ret_old);

/* The bytes of the dataset's table stored under the name `path` (a link's,
 * on a shared database) into *ret (malloc'd, NUL-terminated) and *ret_len:
 * SRV_OK, SRV_NOT_FOUND when the dataset holds no blob of that name (the
 * link was replaced since it was read), SRV_DB_ERROR. */
int srv_store_table_blob_get(srv_db *db, const char *dataset_id, const char *path, char **ret,
			      size_t *ret_len);

/* On a shared database, a finished job's model: its bytes stored under
 * the name `path` ("db:models/<job>.dpgm", the job's model_path), written
 * before the finish transaction names it.  SRV_OK or SRV_DB_ERROR. */
int srv_store_model_blob_put(srv_db *db, const char *job_id, const char *path,
			     const void *bytes, size_t len);

/* The model stored under the name `path` into *ret (malloc'd) and
 * *ret_len: SRV_OK, SRV_NOT_FOUND, SRV_DB_ERROR. */
int srv_store_model_blob_get(srv_db *db, const char *path, uint8_t **ret, size_t *ret_len);

/* Whether db's store is shared with other servers (srv_store_shared):
 * there, hosted tables live in the database, not in a data directory. */
bool srv_db_shared(const srv_db *db);

/* Whether some link names the table file `name` (a file name under the
 * data directory's tables/).  SRV_OK or SRV_DB_ERROR. */
int srv_store_table_file_linked(srv_db *db, const char *name, bool *ret);

/* ------------------------------------------------------------------------ */
/* Hosted tables kept parsed between queries (store_table_cache.c)            */
/* ------------------------------------------------------------------------ */

/*
 * Parsing a hosted table's CSV is most of what a query on it costs (about
 * 0.2 s at 10^6 rows, for a count that then takes a millisecond).  The
 * cache keeps parsed tables, keyed by what makes the parse a function of
 * the key alone:
 *   - the file's path: every upload writes a file under a name no other
 *     upload uses, and a file is never written again after its upload
 *     (srv_data_put_csv), so a path names one content for its lifetime;
 *   - the file's identity and state from stat(2) (device, inode, size,
 *     modification time): a file changed or replaced behind dpgate's back
 *     is not served from an old parse;
 *   - the schema text it is parsed with (dataset_data.columns).
 * On a shared database the path is a blob's name in the database
 * ("db:tables/...", srv_store_table_blob_get), new for every upload and
 * never written again, and the stat state all zero: the name alone fixes
 * the bytes, on every server.
 * The database stays the source of truth: a reader first reads the link
 * (path and schema), then asks the cache, so a replaced or removed table is
 * never served (its path is no longer linked).  An upload adds the parse it
 * made under the key its link will have, so the first query after it reads
 * no file either.
 *
 * Tables are shared read-only between requests through counted
 * references.  The cache holds at most max_bytes of tables that no request
 * uses, dropping the least recently used first; tables in use are never
 * freed under their users.  One mutex guards it; parsing happens outside
 * it.
 *
 * A reader that misses (srv_table_cache_get) either becomes the key's one
 * parser, or waits for the parser of the same key and shares its table:
 * concurrent misses on one table read and parse it once.  At most
 * DPG_TABLE_PARSES parses run at once, whatever the tables and the
 * threads (HTTP requests and jobs alike), so the memory parses take is
 * bounded by that many files and their parses, not by the threads.
 */
typedef struct srv_table_cache srv_table_cache;

/* One use of a cached (or uncached) table; see srv_table_ref_table. */
typedef struct srv_table_ref srv_table_ref;

/* A new empty cache that keeps at most max_bytes of unused tables (0:
 * keeps none; every table is freed at its last release).  NULL when out of
 * memory. */
srv_table_cache *srv_table_cache_new(size_t max_bytes);

/* Frees the cache and its tables.  Every reference must have been
 * released and every claim ended.  Accepts NULL. */
void srv_table_cache_free(srv_table_cache *c);

#ifdef DPG_TESTING
/*
 * The cached table for file `path` with stat(2) state *st, parsed with
 * `schema` (text), as a new reference (srv_table_cache_release), or NULL
 * when there is none.  Counts a hit or a miss.  Never waits, and claims
 * nothing: the server's readers use srv_table_cache_get; this lookup is
 * the tests' view of what the cache keeps.
 */
srv_table_ref *srv_table_cache_find(srv_table_cache *c, const char *path, const struct stat *st,
				    const char *schema);
#endif

/* The right, and the duty, to parse one key (srv_table_cache_get). */
typedef struct srv_table_claim srv_table_claim;

/*
 * The cached table for the key (file `path` in stat(2) state *st, parsed
 * with `schema`), as a new reference, where concurrent misses
 * on one key share one read and parse:
 *   - a kept parse: a new reference (a hit);
 *   - a parse of the key under way (another caller's claim): waits until
 *     it ends, then a reference to its table (a wait), or, when it failed,
 *     looks again: the first waiter to do so parses next;
 *   - neither: NULL with *ret_claim set (a miss), once one of the
 *     DPG_TABLE_PARSES parse slots is free.  The caller reads and parses,
 *     then ends the claim with srv_table_cache_claim_done or, on any
 *     failure, srv_table_cache_claim_drop; until then, callers missing the
 *     same key wait for it.  It must not ask the cache for another table
 *     meanwhile (the slots could all be held by callers waiting so).
 * NULL with *ret_claim NULL when out of memory.  With c == NULL, always a
 * claim, which waits for nothing.  The waits are on condition variables,
 * with the cache's lock released; the caller must hold no lock and no
 * transaction (other requests could need them to end a parse).
 */
srv_table_ref *srv_table_cache_get(srv_table_cache *c, const char *path, const struct stat *st,
				   const char *schema, srv_table_claim **ret_claim);

/*
 * Ends a claim with its table t (ownership passes to the cache), parsed
 * from the file read in state *st (the read's own, which may be newer than
 * the one claimed), and returns a reference to it.  Every caller that
 * waited for the claim gets the same table, also when it is not kept (too
 * large for the bound, the path forgotten meanwhile, or the same key kept
 * already): then it is freed at its last release.  Kept parses of the
 * path in another state are dropped, as srv_table_cache_add does.  Never
 * fails.
 */
srv_table_ref *srv_table_cache_claim_done(srv_table_cache *c, srv_table_claim *claim,
					  const struct stat *st, mech_table *t);

/* Ends a claim without a table (the read or the parse failed): nothing is
 * kept, no error is remembered, and the callers waiting for it look again.
 * c must be the claim's cache.  Accepts claim == NULL. */
void srv_table_cache_claim_drop(srv_table_cache *c, srv_table_claim *claim);

/*
 * Takes one of the DPG_TABLE_PARSES parse slots, waiting until one is
 * free, for a parse that no key names yet (an upload's body, whose file
 * and state exist only once it is written), so that uploads too share the
 * bound on parses at once; srv_table_cache_slot_give frees it.  Counted in
 * the stats as a claim.  The caller must ask the cache for no table while
 * it holds the slot, and hold no lock and no transaction (as
 * srv_table_cache_get).  With c == NULL, waits for nothing.
 */
void srv_table_cache_slot_take(srv_table_cache *c);
void srv_table_cache_slot_give(srv_table_cache *c);

/*
 * Adds table t (ownership passes to the cache, also on failure) as the
 * parse of `path` in state *st with `schema`, and returns a reference to
 * it; when another request added the same key meanwhile, t is freed and
 * the reference is to that one.  Kept parses of `path` in another state
 * are dropped (the file has moved on).  A table larger than the cache's
 * bound is not kept, only referenced (freed at its last release).  With c == NULL,
 * the reference is to t alone.  NULL only when out of memory (t freed).
 */
srv_table_ref *srv_table_cache_add(srv_table_cache *c, const char *path, const struct stat *st,
				   const char *schema, mech_table *t);

/* The table a reference holds; valid until the reference is released. */
const mech_table *srv_table_ref_table(const srv_table_ref *r);

/* Ends a use.  c must be the cache the reference came from (NULL for one
 * made with c == NULL).  Accepts r == NULL. */
void srv_table_cache_release(srv_table_cache *c, srv_table_ref *r);

/* Drops every table parsed from `path` (a file that an upload replaced):
 * unused ones are freed now, used ones at their last release. */
void srv_table_cache_forget(srv_table_cache *c, const char *path);

/* What the cache holds and has done, for /metrics and tests. */
typedef struct srv_table_cache_stats {
	size_t tables;      /* tables kept (used or not) */
	size_t bytes;       /* their size */
	unsigned parsing;   /* slots held: parses under way or about to start */
	/* Lookups served from a kept parse (hits), that claimed the parse
	 * (misses), that waited for another caller's parse of the key (waits);
	 * kept parses dropped for the bound (evictions); claims that waited
	 * for a free parse slot (slot_waits). */
	unsigned long long hits, misses, evictions, waits, slot_waits;
} srv_table_cache_stats;

void srv_table_cache_get_stats(srv_table_cache *c, srv_table_cache_stats *ret);

/* ------------------------------------------------------------------------ */
/* Random identifiers (store_db.c)                                            */
/* ------------------------------------------------------------------------ */

/*
 * Fills buf with n bytes from getrandom(2).  Returns SRV_OK, or
 * SRV_NO_RANDOM when the kernel refuses (libsodium's randombytes would
 * abort the process instead).
 */
int srv_random_bytes(void *buf, size_t n);

/* The number of hex digits srv_random_id appends to its prefix. */
#define SRV_RANDOM_ID_HEX 24

/* prefix + SRV_RANDOM_ID_HEX random lowercase hex digits.  Returns SRV_OK
 * or SRV_NO_RANDOM (buf is then the empty string). */
int srv_random_id(const char *prefix, char *buf, size_t size);

#endif
