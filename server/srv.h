/*
 * srv.h: the dpgate executable's internals: context, store, auth, HTTP.
 *
 * server/ is the only folder that does I/O.  One srv_ctx is made at start
 * and passed to every handler through libmicrohttpd's closure pointer; there
 * are no mutable globals.
 */
#ifndef SRV_H
#define SRV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>
#include <sqlite3.h>

#include "acct.h"
#include "base.h"

/* ------------------------------------------------------------------------ */
/* Store (srv_store.c)                                                       */
/* ------------------------------------------------------------------------ */

/* One SQLite connection with its prepared statements; used by one thread at
 * a time, handed out by the pool. */
typedef struct srv_db srv_db;

/* A pool of connections to one database file in WAL mode. */
typedef struct srv_store srv_store;

/*
 * Opens (creating if needed) the database at `path`, sets WAL mode and
 * synchronous=FULL, applies the embedded migrations idempotently, and makes a
 * pool of `pool_size` connections.  An absent or empty file is initialised;
 * a file with tables but no schema_migrations (someone else's database), or
 * with a schema version above the highest of the embedded migrations, is
 * refused before anything is written.  Returns 0, or -1 with a message in
 * errbuf.
 */
int srv_store_open(const char *path, unsigned pool_size, srv_store **ret_store,
		   char *errbuf, size_t errbuf_size);

/*
 * Opens an existing dpgate database for reading only (SQLITE_OPEN_READONLY,
 * query_only): one connection, no migrations, no checkpoint at close, so the
 * database file is never written.  It may be held open by a running server
 * (WAL readers share its -wal and -shm files; on a WAL database that no one
 * has open, SQLite itself creates those two side files, as for any reader).
 * Refuses, with a message in errbuf and -1, a file that is missing, not
 * SQLite, without dpgate's schema (empty or foreign), or at another schema
 * version than this binary's.  Returns 0 with the store in *ret_store; close
 * it with srv_store_close.  Writes through it fail.
 */
int srv_store_open_read_only(const char *path, srv_store **ret_store, char *errbuf,
			     size_t errbuf_size);

/*
 * Writes zeros past the end of the WAL file, under the write lock, until it
 * holds a checkpoint interval of frames, and syncs them: commits then
 * overwrite blocks the file already has instead of growing it (see the
 * comment in srv_store.c).  For serve at start.  Returns 0 (also when the
 * file was that long already), or -1 with a message in errbuf and the file
 * as it was.
 */
int srv_store_preallocate_wal(srv_store *store, char *errbuf, size_t errbuf_size);

/* Checkpoints the WAL and closes every connection.  Accepts NULL. */
void srv_store_close(srv_store *store);

/* Takes a connection from the pool, waiting while all are in use. */
srv_db *srv_store_acquire(srv_store *store);
void srv_store_release(srv_store *store, srv_db *db);

/* The raw connection, for the other store files of server/ (keys). */
sqlite3 *srv__db_handle(srv_db *db);

/* Makes one listed row's JSON object from a statement's current row (a new
 * reference, or NULL when out of memory). */
typedef json_t *(*srv_page_row_fn)(sqlite3_stmt *s, const void *arg);

/* One page of a keyset-paginated listing, for the store files of server/:
 * runs `sql`, binding ?1 to text_param (left unbound when NULL), ?2 to
 * `after` and ?3 to limit + 1, whose first column is the row's cursor.  The
 * first `limit` rows, each made by `row`, go to *ret_entries (the caller
 * owns it); *ret_next gets the last listed cursor when more rows follow,
 * else -1.  SRV_OK, or SRV_DB_ERROR with nothing written. */
int srv__db_page(srv_db *db, const char *sql, const char *text_param, int64_t after,
		 int64_t limit, srv_page_row_fn row, const void *row_arg, json_t **ret_entries,
		 int64_t *ret_next);

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
	char created_at[32];
	char updated_at[32];
} srv_dataset;

/* Outcome codes of store operations, beside ACCT_E* for bad input. */
enum srv_status {
	SRV_OK = 0,
	SRV_NOT_FOUND = 1,      /* 404 */
	SRV_CONFLICT = 2,       /* 409: exists already, or archived, or over budget */
	SRV_REPLAYED = 3,       /* an idempotent request answered from storage */
	SRV_IDEM_MISMATCH = 4,  /* same Idempotency-Key, different request: 422 */
	SRV_PLAN_REFUSED = 5,   /* the spend's plan_fn refused (its own error says why) */
	SRV_DB_ERROR = -100,    /* 503: nothing was written */
	SRV_NO_RANDOM = -101,   /* 503: getrandom failed; nothing was written */
	SRV_COMMIT_FAILED = -102, /* 503: COMMIT failed (storage): not applied, but its
				   * write may still be found after a crash */
};

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
 * exists. */
int srv_store_dataset_create(srv_db *db, const srv_dataset *ds, const char *actor);

/*
 * Updates name and/or budget (NULL / NAN = unchanged).  A budget change is a
 * ledger row of kind 'budget' naming the actor.  SRV_NOT_FOUND, SRV_CONFLICT
 * (archived) or SRV_OK, with the updated row in *ret.
 */
int srv_store_dataset_update(srv_db *db, const char *id, const char *name,
			     double budget_epsilon, double budget_delta, const char *actor,
			     srv_dataset *ret);

/* Archives a dataset (keeps its ledger; refuses new charges). */
int srv_store_dataset_archive(srv_db *db, const char *id, const char *actor, srv_dataset *ret);

/* What a spending request asks the store to do. */
typedef enum srv_spend_kind {
	SRV_SPEND_CHARGE,
	SRV_SPEND_RESERVE,
} srv_spend_kind;

/*
 * Builds the JSON answer of a successful spend inside the transaction, so it
 * can be stored for idempotent replay: `charge_id` is the ledger row,
 * `reservation_id` the new reservation (or NULL), `ds` the dataset after the
 * write.  Returns a new JSON object or NULL (out of memory: the transaction
 * is rolled back).
 */
typedef json_t *(*srv_spend_body_fn)(void *arg, int64_t charge_id, const char *reservation_id,
				     const srv_dataset *ds);

/*
 * The answer written directly as JSON text (malloc'ed; NULL when out of
 * memory or a number is not finite), for the hot path of direct charges.
 * A spend sets exactly one of body_fn and text_fn.
 */
typedef char *(*srv_spend_text_fn)(void *arg, int64_t charge_id, const char *reservation_id,
				   const srv_dataset *ds);

/*
 * Optional planner, called inside the transaction with the dataset's filter
 * and its committed composition (spent + reserved, expired reservations
 * already committed).  It decides what to charge, for requests whose charge
 * depends on what fits (a PATE batch answers the queries that fit, in order):
 * it writes the cost and the event to record (both owned by `arg`, valid
 * until srv_store_spend returns) and returns 0 to charge them, 1 when nothing
 * fits (the request gets SRV_CONFLICT), or a negative value when it refuses
 * the request (SRV_PLAN_REFUSED; the planner keeps its own error in `arg`).
 */
typedef int (*srv_spend_plan_fn)(void *arg, const acct_filter *f, const acct_cost *committed,
				 const acct_cost **ret_cost, const acct_event **ret_event);

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
	const acct_event *event;      /* canonical JSON is stored in the ledger */
	const acct_cost *cost;        /* priced by the caller with the dataset's filter */
	srv_spend_plan_fn plan_fn;    /* optional: replaces event and cost */
	srv_spend_txn_fn txn_fn;      /* optional */
	const char *note;             /* may be NULL */
	const char *actor;            /* key id */
	const char *idempotency_key;  /* may be NULL */
	const uint8_t *request_hash;  /* 32 bytes, required with a key */
	int64_t ttl_seconds;          /* reservations */
	srv_spend_body_fn body_fn;
	srv_spend_text_fn text_fn;    /* instead of body_fn */
	void *body_arg;               /* passed to body_fn, text_fn, plan_fn and txn_fn */
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
 * connection; `db` only names the store), each in its own savepoint and in
 * arrival order, so each is admitted exactly as if it ran alone after the
 * ones before it; callbacks get the writer connection as their `db`.
 *
 * On success *ret_status is the HTTP status and *ret_body (caller frees) the
 * exact bytes to send.  SRV_CONFLICT means over budget or archived: *ret_ds
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

/*
 * Looks an Idempotency-Key up before anything else is checked, so a retry
 * gets its stored answer even when the dataset has changed since (archived,
 * budget spent): SRV_REPLAYED with the bytes, SRV_IDEM_MISMATCH, SRV_OK when
 * the key is new (or sp has none), SRV_DB_ERROR.
 */
int srv_store_replay(srv_db *db, const srv_spend *sp, int *ret_status, char **ret_body);

/* Closes an open reservation: commit moves its cost to spent, release
 * returns it.  SRV_NOT_FOUND, SRV_CONFLICT (not open, *ret_state says what it
 * is; or held by a training job, *ret_job names it) or SRV_OK with the
 * dataset after the change.  A job's reservation is the job's to close: it
 * is committed when the job ends once a worker has started it (whatever
 * the outcome), and released only when the job is cancelled while queued;
 * closing it here would let a job that read the data go unpaid. */
int srv_store_reservation_close(srv_db *db, const char *dataset_id, const char *rid,
				bool commit, const char *actor, srv_dataset *ret_ds,
				char ret_state[16], char ret_job[64]);

/* Lists reservations of a dataset as JSON (caller owns). */
int srv_store_reservation_list(srv_db *db, const char *dataset_id, json_t **ret);

/* Lists ledger rows with seq > after, at most `limit`, as JSON objects
 * (the 'create' row is the audit list's, not the ledger's).  *ret_next is
 * the last seq listed when more follow, else -1. */
int srv_store_ledger_list(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			  json_t **ret_entries, int64_t *ret_next);

/* Lists a dataset's administrative ledger rows (create, budget, archive)
 * with seq > after, at most `limit`, as JSON objects; paging as
 * srv_store_ledger_list. */
int srv_store_dataset_audit(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			    json_t **ret_entries, int64_t *ret_next);

/*
 * Recomputes every dataset's spent and reserved totals from its ledger rows
 * (in ledger order, with the same upward rounding) and compares them with
 * the stored totals, and replays its budget history (the 'create' row, then
 * each 'budget' row): every admission (charge, reserve) must fit the budget
 * in force at its row, and the last budget must be the dataset's.  Writes a
 * JSON report; returns SRV_OK when all agree and no admission was over its
 * budget, SRV_CONFLICT otherwise.
 */
int srv_store_verify(srv_db *db, json_t **ret_report);

/*
 * Writes a consistent copy of the dpgate database at db_path into the empty
 * file at out_path with SQLite's VACUUM INTO, through a read-only
 * connection: one read transaction, so the copy holds every transaction
 * committed before it began and none after, while a running server goes on
 * committing.  A file without dpgate's schema (no tables, or someone
 * else's) is refused before anything is written; a dpgate schema of any
 * version is copied; *ret_version gets the copy's schema version and
 * *ret_current whether it is this binary's.  The copy is not synced here.
 * 0, or -1 with a message in errbuf.
 */
int srv_store_backup(const char *db_path, const char *out_path, int64_t *ret_version,
		     bool *ret_current, char *errbuf, size_t errbuf_size);

/* fsyncs a directory, so that a file created or renamed in it is durable;
 * 0 or -1 (errno set). */
int srv_fsync_dir(const char *dir);

/* JSON helpers for compositions stored as text. */
char *srv_cost_to_text(const acct_cost *c);
int srv_cost_from_text(const char *text, acct_cost *ret);

/* The dataset's filter, from its stored budget. */
int srv_dataset_filter(const srv_dataset *ds, acct_filter *ret, acct_error *err);

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

/* The budget summary of DESIGN.md for a dataset (new reference); an rdp
 * dataset's also says how its filter splits delta ("filter"). */
json_t *srv_dataset_budget_json(const srv_dataset *ds);

/*
 * Adds to `cost` (a JSON object that states what a charge of `ev` costs on
 * this dataset's ledger) what the ledger's filter adds to the event's own
 * price: on an rdp ledger "event_epsilon", the event's own RDP epsilon at the
 * budget's full delta (minimised over the RDP accountant's orders), beside
 * the filter's orders and delta share.  Nothing on other ledgers.  Returns
 * 0, or -1 when out of memory.
 */
int srv_dataset_explain_cost(const srv_dataset *ds, const acct_event *ev, json_t *cost);

/*
 * srv_dataset_budget_json's object as compact JSON text, byte for byte what
 * srv_json_dump prints of it, into buf; returns its length, or 0 when it
 * does not fit or a figure is not finite.
 */
size_t srv_dataset_budget_text(const srv_dataset *ds, char *buf, size_t size);
/* The dataset resource (new reference). */
json_t *srv_dataset_json(const srv_dataset *ds);

/* ------------------------------------------------------------------------ */
/* API keys (srv_auth.c)                                                     */
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

/* An authenticated caller. */
typedef struct srv_principal {
	char key_id[2 * SRV_KEY_ID_BYTES + 1];
	srv_role role;
	/* Array of dataset ids (analysts, scoped viewers); this request's own
	 * (the key cache keeps another copy, never shared between threads). */
	json_t *datasets;
} srv_principal;

/*
 * Checks what a new key would carry, the same for POST /v1/keys and `dpgate
 * keys create`: `datasets` (borrowed; NULL when absent) must be an array of
 * at most DPG_MAX_SCOPED_DATASETS distinct dataset ids (srv_id_ok), none for
 * an admin key, at least one for an analyst key; `note` (NULL when absent)
 * must be 1 to DPG_MAX_NOTE_BYTES bytes.  Returns 0, or ACCT_EINVAL with the
 * first problem in err (where: "/datasets" or "/note").
 */
int srv_keys_check(srv_role role, const json_t *datasets, const char *note, acct_error *err);

/*
 * Creates a key: 256 random bits from getrandom, stored as a SHA-256 hash,
 * and its key_events row naming `actor` (who made it), in one transaction.
 * Writes the full key text (shown once) into key_text and its id into
 * key_id.  `datasets` is a borrowed JSON array of ids (may be NULL).
 * Returns SRV_OK, SRV_NO_RANDOM (getrandom failed), SRV_DB_ERROR or
 * SRV_COMMIT_FAILED (key_text and key_id are then not written).
 */
int srv_keys_create(srv_db *db, srv_role role, const json_t *datasets, const char *note,
		    const char *actor, char key_text[SRV_KEY_TEXT_BYTES],
		    char key_id[2 * SRV_KEY_ID_BYTES + 1]);

/* Lists keys (never secrets) as a JSON array. */
int srv_keys_list(srv_db *db, json_t **ret);

/* Revokes a key, with a key_events row naming `actor`, in one transaction
 * (a key revoked already is left as it was).  SRV_NOT_FOUND, SRV_OK or
 * SRV_DB_ERROR. */
int srv_keys_revoke(srv_db *db, const char *key_id, const char *actor);

/* Revokes a key unless it is the last live admin key (SRV_CONFLICT), the
 * count and the revocation in one write transaction. */
int srv_keys_revoke_keeping_an_admin(srv_db *db, const char *key_id, const char *actor);

/* Lists key_events rows (creations and revocations, who and when) with seq
 * > after, at most `limit`, as JSON objects; *ret_next as
 * srv_store_ledger_list's.  The second argument is unused (the lister shape
 * of the dataset lists).  SRV_OK or SRV_DB_ERROR. */
int srv_keys_audit(srv_db *db, const char *unused, int64_t after, int64_t limit,
		   json_t **ret_entries, int64_t *ret_next);

/* Counts unrevoked keys of a role. */
int srv_keys_count(srv_db *db, srv_role role, int64_t *ret);

/* The server's cache of checked keys (see srv_auth.c). */
typedef struct srv_auth_cache srv_auth_cache;

srv_auth_cache *srv_auth_cache_new(const char *db_path);
void srv_auth_cache_free(srv_auth_cache *cache);
void srv_auth_cache_flush(srv_auth_cache *cache);

/* The stamp file "<db_path>-keys" that `dpgate keys revoke` rewrites after
 * its commit so that running servers flush their key caches. */
void srv_keys_stamp_path(const char *db_path, char *buf, size_t size);
int srv_keys_touch_stamp(const char *db_path);

/*
 * Checks an Authorization header value ("Bearer dpg_..."); on success fills
 * *ret (caller frees with srv_principal_clear) and returns 0.  The hash is
 * compared in constant time; unknown, malformed and revoked keys all fail
 * alike with -1.  `cache` may be NULL (no caching).
 */
int srv_auth_check(srv_db *db, srv_auth_cache *cache, const char *authorization,
		   srv_principal *ret);

/* Defined only by tests (weak, so NULL in dpgate): srv_auth_check calls it
 * between reading a key row and caching it, the one moment at which a
 * concurrent revocation must not be undone by the cache. */
void srv__auth_between_read_and_cache(void) __attribute__((weak));
void srv_principal_clear(srv_principal *p);

/* True when the principal may see dataset `id` (admins: all; scoped keys:
 * only listed ids; unscoped viewers: all). */
bool srv_principal_sees(const srv_principal *p, const char *id);

/* ------------------------------------------------------------------------ */
/* Metrics (srv_metrics.c)                                                   */
/* ------------------------------------------------------------------------ */

#define SRV_METRIC_STATUSES 20

typedef struct srv_route_metrics {
	atomic_uint_fast64_t by_status[SRV_METRIC_STATUSES];
	srv_histogram latency;
} srv_route_metrics;

/* Records one request on a route (index into the route table, or the
 * unmatched slot). */
void srv_metrics_record(srv_route_metrics *m, int status, double seconds);

/*
 * The store's latency histograms of spend transactions that committed:
 * *ret_txn from BEGIN IMMEDIATE to the durable COMMIT's return (the time
 * the write lock is held), *ret_commit the COMMIT alone (the WAL write and
 * its fsync).  The pointers stay valid until srv_store_close; the counts
 * are read with atomic loads.
 */
void srv_store_spend_timings(srv_store *st, const srv_histogram **ret_txn,
			     const srv_histogram **ret_commit);

/* ------------------------------------------------------------------------ */
/* HTTP (srv_http.c) and routes (srv_routes.c)                              */
/* ------------------------------------------------------------------------ */

typedef struct srv_ctx srv_ctx;

typedef enum srv_access {
	SRV_PUBLIC,      /* no key: stateless routes, health, metrics, spec */
	SRV_ANY_KEY,     /* any valid key; scope applied by the handler */
	SRV_READ,        /* viewer, analyst or admin, scoped to {id} */
	SRV_SPEND,       /* analyst scoped to {id}, or admin */
	SRV_ADMIN,       /* admin only */
} srv_access;

#define SRV_MAX_PATH_PARAMS 3

typedef struct srv_request {
	srv_ctx *ctx;
	const char *method;
	const char *path;
	const char *params[SRV_MAX_PATH_PARAMS]; /* {id}, {rid}, ... in order */
	const char *raw_body;
	size_t raw_len;
	json_t *body;                            /* parsed object on JSON routes */
	const char *content_type;
	const char *idempotency_key;
	const char *authorization;               /* the header, or NULL */
	const srv_principal *who;                /* NULL on public routes */
	srv_db *db;                              /* acquired for the request */
	const char *(*query)(void *conn, const char *key);
	void *conn;
} srv_request;

typedef struct srv_response {
	int status;
	char *body;                 /* malloc'd; NULL = empty */
	size_t len;
	const char *content_type;   /* static string */
	char location[256];
	char allow[64];             /* Allow header of a 405 */
	bool close;                 /* Connection: close (a request whose framing was refused) */
} srv_response;

typedef int (*srv_handler)(srv_request *req, srv_response *res);

typedef struct srv_route {
	const char *method;
	const char *pattern;        /* "/v1/datasets/{id}/charges" */
	srv_access access;
	bool json_body;             /* body parsed as JSON and required */
	srv_handler handler;
} srv_route;

extern const srv_route srv_routes[];
extern const size_t srv_routes_count;

/*
 * Matches a method and path against the table.  Returns the route index and
 * fills params (pointers into `scratch`, which must hold a copy of the path),
 * or -1 for no such path (404), -2 for a path with no such method (405).
 */
int srv_route_match(const char *method, const char *path, char *scratch, size_t scratch_size,
		    const char *params[SRV_MAX_PATH_PARAMS]);

/* The methods a path supports, comma-separated, for a 405's Allow header. */
void srv_route_allowed(const char *path, char *buf, size_t size);

struct srv_ctx {
	srv_store *store;
	srv_auth_cache *auth_cache;
	struct srv_table_cache *tables; /* parsed hosted tables (srv_table_cache.h) */
	struct srv_jobs *jobs;
	char db_path[4096];
	char data_dir[4096];
	srv_route_metrics *route_metrics;  /* srv_routes_count + 1 (unmatched) */
	atomic_int in_flight;
	atomic_bool stopping;
	bool access_log;
	/* Stateless computations (the public POST routes) running, and how many
	 * may run at once: one can take seconds (a PLD calibration), and the
	 * other HTTP threads stay free for the routes that spend budget. */
	atomic_uint public_busy;
	unsigned public_limit;
	/* Seconds a request's body may take to arrive, counted from its
	 * headers; a slower one is cut off (srv_http.c, on_request). */
	unsigned body_timeout_s;
	/* Seconds a request's header block may take from its first byte, and
	 * connections one client address may hold (srv_conns.h). */
	unsigned header_timeout_s;
	unsigned max_conns_per_ip;
	/* Connections waiting for a request (srv_conns.h); NULL until serving. */
	struct srv_conns *conns;
	/* /metrics shows every dataset's gauges to anyone (serve
	 * --public-metrics); otherwise only those a key may read. */
	bool public_metrics;
};

/* Fills a problem+json response (RFC 9457).  `field` may be NULL; `extra`
 * (stolen, may be NULL) is merged into the body. */
void srv_problem(srv_response *res, int status, const char *title, const char *detail,
		 const char *field, json_t *extra);

/* The 409 answer for a release that does not fit (or an archived dataset):
 * budget summary, remaining and the release's cost. `cost` may be NULL. */
void srv_reply_over_budget(srv_response *res, const srv_dataset *ds, const acct_cost *cost);

/* SHA-256 of method, path and body: what an Idempotency-Key is bound to. */
void srv_request_hash(const srv_request *req, uint8_t out[32]);

/*
 * Starts a spend from its request: zeroes *sp and sets what every spending
 * route takes from the request alike, the key that spends (the ledger's
 * actor) and, when the request has an Idempotency-Key, that key with the
 * request's hash, computed into `hash` (which must outlive *sp).
 */
void srv_spend_from_request(srv_spend *sp, const srv_request *req, uint8_t hash[32]);

/*
 * Answers a retry from storage, before anything else of the request is
 * checked, so that a replay is the same bytes even after the dataset changed.
 * True when *res holds the answer: the stored one (given to `reply`, which
 * takes the body) or the store's error.  False when there is nothing stored
 * for sp's Idempotency-Key, or it has none: go on.
 */
bool srv_spend_replayed(const srv_request *req, srv_response *res, const srv_spend *sp,
			void (*reply)(srv_response *res, int status, char *body));

/* 404 (`what`), 422 (Idempotency-Key reused) or 503 for a store outcome. */
void srv_reply_store_error(srv_response *res, int rc, const char *what);

/* Sends stored or prebuilt JSON bytes (takes ownership of body). */
void srv_reply_raw_json(srv_response *res, int status, char *body);


/* Whether a Content-Type value names the media type `type` (any case),
 * alone or followed by parameters: "text/csv; charset=utf-8" is text/csv,
 * "text/csvx" is not. */
bool srv_media_type_is(const char *ct, const char *type);

/* Whether a body of this Content-Type (NULL: none) is read as JSON: none,
 * application/json or curl's default form type. */
bool srv_json_content_type(const char *ct);

/* Maps an acct_error to 400/409/422/500 problem+json. */
void srv_problem_from_error(srv_response *res, const acct_error *err);

/* Sends a JSON value (stolen) with a status. */
void srv_json_reply(srv_response *res, int status, json_t *body);


/* Parses a request body: size, depth and UTF-8 bounded.  Returns the JSON
 * or NULL with `err` filled (ACCT_EINVAL). */
json_t *srv_parse_body(const char *data, size_t len, acct_error *err);

/*
 * GET /metrics: the process's metrics to anyone; the per-dataset gauges
 * (labelled archived="true" or "false") for the datasets the request's
 * key may read, or for every dataset under serve --public-metrics.  A key
 * is optional; an invalid one is 401.
 */
int srv_metrics_get(srv_request *req, srv_response *res);

/* Runs the HTTP server until SIGINT/SIGTERM; returns an exit status. */
int srv_http_serve(srv_ctx *ctx, const char *host, unsigned port, unsigned threads);

#endif
