/*
 * store_db.c: the store: connections, migrations, datasets, the ledger,
 * reservations and idempotent answers, written against the statement
 * interface of store_sql.h (the SQLite driver: store_sqlite.c).
 *
 * Durability: an answer goes out only after the COMMIT that holds it
 * returned, and the driver makes a returned COMMIT durable (SQLite: WAL
 * with synchronous=FULL).  Every write that can spend budget is one write
 * transaction that locks its dataset (srv__lock_dataset) before it reads
 * the running totals, so two concurrent requests can never both be
 * admitted on the same remaining budget.  A failure anywhere rolls back
 * and reports SRV_DB_ERROR; the caller then reveals nothing.
 */
#include <pthread.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include <sodium.h>

#include "mech.h"
#include "store.h"
#include "srv_embedded.h"
#include "store_internal.h"
#include "store_pg.h"
#include "store_sqlite.h"
#include "base.h"

#define RESERVATION_ID_BYTES 12
_Static_assert(2 * RESERVATION_ID_BYTES == SRV_RANDOM_ID_HEX, "srv_random_id's length");

enum stmt_id {
	ST_DATASET_GET,
	ST_LEDGER_INSERT,
	ST_LEDGER_INSERT_RETURNING,
	ST_IDEM_GET,
	ST_IDEM_PUT,
	ST_RES_INSERT,
	ST_RES_GET,
	ST_RES_CLOSE,
	ST_RES_EXPIRED,
	ST_RES_HOLDER,
	ST__COUNT
};

/*
 * A dataset as the API shows it: its row, and the running totals that its
 * last ledger row carries (schema/006_ledger_totals.sql); no row, no
 * totals (all NULL: zero).  Its updated_at is the later of the row's own
 * and that ledger row's.  The driver joins the last row as l
 * (last_ledger_row, store_sql.h): one descent of ledger_by_dataset,
 * whatever the ledger's size.  Columns in row_to_dataset's order.
 */
#define DATASET_COLUMNS \
	"SELECT d.id, d.name, d.privacy_unit, d.neighbor, d.accountant, d.budget_epsilon," \
	" d.budget_delta, l.spent, l.reserved, l.open_reservations, l.charges, d.archived," \
	" d.created_at, CASE WHEN l.created_at > d.updated_at THEN l.created_at" \
	" ELSE d.updated_at END, l.seq, d.filter_orders, d.public, d.label_private" \
	" FROM datasets d"
#define DATASET_SQL_BYTES 1024

#define LEDGER_INSERT \
	"INSERT INTO ledger (dataset_id, kind, event, cost, epsilon, delta, reservation_id," \
	" note, actor, idempotency_key, created_at, spent, reserved, open_reservations," \
	" charges)" \
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"

static const char *const stmt_sql[ST__COUNT] = {
	[ST_DATASET_GET] = " WHERE d.id = ?1", /* after dataset_sql's head */
	/* The second where the driver has no last_insert_key (store_sql.h). */
	[ST_LEDGER_INSERT] = LEDGER_INSERT,
	[ST_LEDGER_INSERT_RETURNING] = LEDGER_INSERT " RETURNING seq",
	[ST_IDEM_GET] =
		"SELECT request_hash, status, body FROM idempotency WHERE actor = ?1 AND key = ?2",
	[ST_IDEM_PUT] =
		"INSERT INTO idempotency (actor, key, request_hash, status, body, created_at)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_RES_INSERT] =
		"INSERT INTO reservations (id, dataset_id, event, cost, epsilon, state, actor, note,"
		" created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, 'open', ?6, ?7, ?8, ?9)",
	[ST_RES_GET] =
		"SELECT event, cost, state FROM reservations WHERE id = ?1 AND dataset_id = ?2",
	[ST_RES_CLOSE] =
		"UPDATE reservations SET state = ?2, closed_at = ?3, closed_by = ?4 WHERE id = ?1",
	[ST_RES_EXPIRED] =
		"SELECT id FROM reservations WHERE dataset_id = ?1 AND state = 'open'"
		" AND expires_at <= ?2 ORDER BY expires_at, id",
	[ST_RES_HOLDER] =
		"SELECT coalesce((SELECT j.id FROM jobs j WHERE j.dataset_id = ?1"
		" AND j.reservation_id = ?2), ''), state, actor"
		" FROM reservations WHERE dataset_id = ?1 AND id = ?2",
};

struct srv_db {
	srv__conn *c;
	srv__stmt *stmt[ST__COUNT];
	srv_db *next_free;
	srv_store *store;
	struct row_cache *rows; /* made by the first spend batch on this connection */
};

/*
 * Dataset rows that single spends on one connection committed, exactly as
 * the database holds them, and the connection's data version read right
 * after the last of those COMMITs; spend_batch says when they may be used.
 * A row lives in one of ROW_CACHE_WAYS slots from a hash of its id; when
 * they are all taken the first is replaced (a miss only costs a read).
 */
#define ROW_CACHE_SLOTS 256
#define ROW_CACHE_WAYS 4

struct row_cache {
	bool valid;
	unsigned version;
	bool used[ROW_CACHE_SLOTS];
	srv_dataset row[ROW_CACHE_SLOTS];
};

/*
 * The pricing inputs of datasets (srv_store_dataset_pricing): a dataset's
 * ledger kind, neighbouring relation and orders are fixed when it is made,
 * and a spend prices its event with them before it takes the write lock.
 * Remembering them saves that read, which costs more than the rest of the
 * pricing: the writer's commits have emptied the reading connection's page
 * cache.  One slot per hash of the id; a collision replaces (a miss only
 * costs the read).  Archiving a dataset removes it and bumps `generation`,
 * and a read is remembered only if no removal came between it and the put.
 * On a shared database another server may archive it unseen: the pricing
 * stays right (those inputs never change), and the spend's transaction
 * reads the row again under its lock and refuses an archived dataset.
 */
#define PRICING_SLOTS 512

struct pricing_slot {
	bool used;
	char id[DPG_MAX_ID_BYTES + 1];
	acct_filter filter;
};

struct pricing_cache {
	pthread_mutex_t lock;
	uint64_t generation;
	struct pricing_slot slot[PRICING_SLOTS];
};

struct spend_slot;

struct srv_store {
	pthread_mutex_t lock;
	pthread_cond_t available;
	srv_db *free_list;
	srv_db **all;
	unsigned count;
	/* Group commit of spends (srv_store_spend): waiting requests, and
	 * whether one of them is running a batch. */
	pthread_mutex_t group_lock;
	pthread_cond_t group_done;
	struct spend_slot *queue_head, **queue_tail;
	bool leading;
	srv_db *writer; /* the leader's connection: one, so its page cache stays warm */
	uint64_t batches, batched; /* under group_lock */
	srv_histogram spend_txn, spend_commit; /* spend transactions that committed */
	atomic_uint_fast64_t commit_failures; /* COMMITs that failed, on any connection */
	bool read_only; /* srv_store_open_read_only: no writer, no checkpoint at close */
	bool shared;    /* other servers write the database too (PostgreSQL) */
	struct pricing_cache *pricing;
	/* The SQLite file the pool has open, its WAL and the WAL's index
	 * (-shm), for srv_store_file_check: the paths (NULL: nothing to
	 * watch) and the identities they named then; whether the last check
	 * found any path elsewhere. */
	struct watched_file {
		char *path;
		dev_t dev;
		ino_t ino;
	} file, wal, shm;
	atomic_bool file_lost;
	/* The second (CLOCK_MONOTONIC_COARSE) of the side files' last check
	 * and whether it found both at their paths (sides_still_named). */
	atomic_llong sides_checked_s;
	atomic_bool sides_named;
	/* The outcome of the last copy of a lost WAL logged since the files'
	 * state last changed: 0 none, 1 copied, -1 failed (copy_lost_wal). */
	atomic_int wal_copy_logged;
	/* Whether a check is copying a lost WAL: another check meanwhile
	 * leaves it to that one (file_check). */
	atomic_bool copying;
	/* The thread that checks the files once a second, requests or none
	 * (srv_store_file_watch_start); `watching` is its starter's and the
	 * close's, watch_stop is under watch_lock. */
	pthread_t watcher;
	pthread_mutex_t watch_lock;
	pthread_cond_t watch_wake; /* on CLOCK_MONOTONIC */
	bool watching, watch_stop;
};

/* Whether w's path still names the file it named when watched (see
 * watch_file); true when nothing is watched. */
static bool still_named(const struct watched_file *w)
{
	struct stat sb;

	return !w->path || (stat(w->path, &sb) == 0 && sb.st_dev == w->dev && sb.st_ino == w->ino);
}

/* ---- compositions as text ------------------------------------------------ */

char *srv_cost_to_text(const acct_cost *c)
{
	size_t cap = 2 + (size_t)c->n * SRV_FMT_REAL_MAX + 1;
	char *s = malloc(cap);
	size_t n = 0;

	if (!s)
		return NULL;
	s[n++] = '[';
	for (unsigned i = 0; i < c->n; i++) {
		if (i)
			s[n++] = ',';
		n += srv_fmt_real(s + n, c->v[i]);
	}
	s[n++] = ']';
	s[n] = '\0';
	return s;
}

int srv_cost_from_text(const char *text, acct_cost *ret)
{
	acct_cost c;
	const char *p = text;
	char *end;

	memset(&c, 0, sizeof(c));
	if (!p || *p++ != '[')
		return -1;
	while (*p && *p != ']') {
		double v;

		if (c.n == ACCT_FILTER_MAX_ORDERS)
			return -1;
		/* +inf is a real coordinate: an RDP order at which some event has
		 * no bound (e.g. pate_gnss beyond 1/(2 beta)) is exhausted.  An
		 * underflow (ERANGE, finite) is a subnormal, read back exactly as
		 * srv_cost_to_text wrote it; text below every double would read
		 * as 0, so it reads as the smallest one instead: a cost is never
		 * read as less than it is. */
		errno = 0;
		v = strtod(p, &end);
		if (end == p || isnan(v) || v < 0)
			return -1;
		if (errno == ERANGE && v == 0.0)
			v = DBL_TRUE_MIN;
		c.v[c.n++] = v;
		p = end;
		if (*p == ',')
			p++;
	}
	if (*p != ']')
		return -1;
	*ret = c;
	return 0;
}

/* ---- connections --------------------------------------------------------- */

/* DATASET_COLUMNS, the driver's join of the last ledger row, then tail, in
 * buf; NULL if it does not fit. */
static const char *dataset_sql(const srv_db *db, const char *tail, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s%s%s", DATASET_COLUMNS, db->c->drv->last_ledger_row, tail);

	return n > 0 && (size_t)n < size ? buf : NULL;
}

static srv__stmt *stmt(srv_db *db, enum stmt_id id)
{
	srv__stmt *s = db->stmt[id];

	if (!s) {
		char buf[DATASET_SQL_BYTES];
		const char *sql = id == ST_DATASET_GET ?
					  dataset_sql(db, stmt_sql[id], buf, sizeof(buf)) : stmt_sql[id];

		s = sql ? db->c->drv->prepare(db->c, sql, true) : NULL;
		if (!s)
			return NULL;
		db->stmt[id] = s;
	}
	srv__sql_reset(s);
	return s;
}

srv__stmt *srv__cached_stmt(srv_db *db, const char *sql)
{
	return srv__sql_cached(db->c, sql);
}

static void db_close(srv_db *db)
{
	if (!db)
		return;
	free(db->rows);
	for (int i = 0; i < ST__COUNT; i++)
		srv__sql_finalize(db->stmt[i]);
	srv__sql_close(db->c);
	free(db);
}

/* A store connection on the driver connection c (taken over, closed on
 * failure); NULL with a message in err. */
static srv_db *db_wrap(srv__conn *c, srv_error *err)
{
	srv_db *db;

	if (!c)
		return NULL;
	db = calloc(1, sizeof(*db));
	if (!db) {
		srv__sql_close(c);
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return NULL;
	}
	db->c = c;
	return db;
}

/* The file an SQLite target names: a path, or sqlite:PATH. */
static const char *sqlite_path(const char *target)
{
	return strncmp(target, "sqlite:", 7) == 0 ? target + 7 : target;
}

bool srv_store_is_shared(const char *target)
{
	return srv__pg_is_url(target);
}

bool srv_store_shared(const srv_store *st)
{
	return st->shared;
}

bool srv_db_shared(const srv_db *db)
{
	return db->store->shared;
}

const char *srv_store_file(const char *target)
{
	return srv__pg_is_url(target) ? NULL : sqlite_path(target);
}

void srv_store_target_name(const char *target, char *buf, size_t size)
{
	const char *scheme = srv__pg_is_url(target) ? strstr(target, "://") : NULL;
	const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
	const char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
	const char *colon = scheme ? strchr(scheme + 3, ':') : NULL;

	if (at && (!slash || at < slash) && colon && colon < at)
		snprintf(buf, size, "%.*s%s", (int)(colon - target), target, at);
	else
		snprintf(buf, size, "%s", sqlite_path(target));
}

/* A write connection to the database a --db target names. */
static srv_db *db_open(const char *target, srv_error *err)
{
	if (srv__pg_is_url(target))
		return db_wrap(srv__pg_open(target, false, err), err);
	return db_wrap(srv__sqlite_open(sqlite_path(target), SRV__SQLITE_WRITE, err), err);
}

/* The first column of a one-row integer query, or -1 when it fails. */
static int64_t query_int(srv__conn *c, const char *sql)
{
	srv__stmt *s = srv__sql_prepare(c, sql);
	int64_t v = -1;

	if (s && srv__sql_step(s) == SRV__SQL_ROW)
		v = srv__sql_int64(s, 0);
	srv__sql_finalize(s);
	return v;
}

static int file_check(srv_store *st, srv_db *db, bool copy);

int srv__write_allowed(srv_db *db)
{
	/* Before anything is written: a write to a file no path names any
	 * more is lost at the next start (srv_store_file_check). */
	return db->store ? file_check(db->store, db, true) : SRV_OK;
}

/*
 * A waiting lock is the driver's to bound (SQLite's busy handler waits up
 * to 30 s for the write lock); a lock still held after that is reported
 * (503), never waited on again.
 */
int srv__begin_write(srv_db *db)
{
	int rc = srv__write_allowed(db);

	if (rc != SRV_OK)
		return rc;
	return db->c->drv->begin_write(db->c) == SRV__SQL_DONE ? 0 : SRV_DB_ERROR;
}

/* Copies an engine's message into a JSON string's body: quotes,
 * backslashes and control characters become spaces. */
static void log_text(char *dst, size_t size, const char *src)
{
	size_t n = 0;

	for (; src && *src && n + 1 < size; src++)
		dst[n++] = (*src == '"' || *src == '\\' || (unsigned char)*src < 0x20) ? ' ' : *src;
	dst[n] = '\0';
}

/* Write transactions this thread committed (srv_store_thread_commits). */
static _Thread_local unsigned long thread_commits;

unsigned long srv_store_thread_commits(void)
{
	return thread_commits;
}

/*
 * A COMMIT that fails (a write or fsync error, a full disk) is logged: the
 * operator must know the storage is failing.  Its transaction is rolled
 * back and no answer may go out, but it is not certain that nothing of it
 * stays: the WAL frames written before the failure may be complete on disk
 * and, if the server stops before its next commit overwrites them, be
 * found again as a committed transaction when the database is next opened
 * (SQLite's WAL recovery takes every frame whose salts and checksum chain
 * hold).  Such a write counts a spend whose answer never went out, which
 * over-counts the budget and never under-counts it.
 *
 * commit_write is srv__commit without counting it for the thread: a group
 * commit's leader commits the others' spends, which each count for their
 * own thread.
 */
static int commit_write(srv_db *db)
{
	char detail[160];

	if (db->c->drv->commit(db->c) == SRV__SQL_DONE)
		return 0;
	log_text(detail, sizeof(detail), db->c->drv->errmsg(db->c));
	fprintf(stderr, "{\"level\":\"error\",\"msg\":\"commit failed\",\"detail\":\"%s\",\"code\":%d}\n",
		detail, db->c->drv->errcode(db->c));
	if (db->store)
		atomic_fetch_add(&db->store->commit_failures, 1);
	db->c->drv->rollback(db->c);
	return SRV_COMMIT_FAILED;
}

int srv__commit(srv_db *db)
{
	int rc = commit_write(db);

	if (rc == 0)
		thread_commits++;
	return rc;
}

#ifdef DPG_TESTING
bool srv__commit_lost_for_tests(srv_db *db, const char *var)
{
	const char *path = getenv(var);

	/* Of several threads, the one whose unlink removes the file loses its
	 * answer: once per file made. */
	if (!path || unlink(path) != 0)
		return false;
	fprintf(stderr,
		"{\"level\":\"error\",\"msg\":\"commit failed\",\"detail\":\"test hook %s: "
		"the COMMIT was written, its answer is reported lost\",\"code\":0}\n",
		var);
	if (db->store)
		atomic_fetch_add(&db->store->commit_failures, 1);
	return true;
}
#endif

void srv__rollback(srv_db *db)
{
	if (db->c->drv->in_transaction(db->c))
		db->c->drv->rollback(db->c);
}

int srv__lock_dataset(srv_db *db, const char *dataset_id)
{
	return db->c->drv->lock_dataset(db->c, dataset_id) == SRV__SQL_DONE ? SRV_OK : SRV_DB_ERROR;
}

int srv__lock_named(srv_db *db, const char *what)
{
	return db->c->drv->lock_named(db->c, what) == SRV__SQL_DONE ? SRV_OK : SRV_DB_ERROR;
}

/* The name of the lock an upload, a claim and an archive take on a
 * dataset's link. */
void srv__data_link_lock_name(const char *dataset_id, char name[DPG_MAX_ID_BYTES + 16])
{
	snprintf(name, DPG_MAX_ID_BYTES + 16, "data link %s", dataset_id);
}

int srv__db_begin_read(srv_db *db)
{
	return db->c->drv->begin_read(db->c) == SRV__SQL_DONE ? 0 : -1;
}

void srv__db_end_read(srv_db *db)
{
	if (db->c->drv->in_transaction(db->c))
		db->c->drv->commit(db->c);
}

const char *srv__db_errmsg(srv_db *db)
{
	return db->c->drv->errmsg(db->c);
}

srv__conn *srv__db_conn(srv_db *db)
{
	return db->c;
}

/* The version a migration file's name starts with ("005_x.sql" is 5), or 0
 * when the embedded file is not a migration. */
static long migration_version(const struct srv_embedded_file *f)
{
	size_t len = strlen(f->name);
	long version;

	if (len < 5 || strcmp(f->name + len - 4, ".sql") != 0)
		return 0;
	version = strtol(f->name, NULL, 10);
	return version > 0 ? version : 0;
}

/* The highest version among n embedded files. */
static long highest_version(const struct srv_embedded_file *files, size_t n)
{
	long known = 0;

	for (size_t i = 0; i < n; i++) {
		long v = migration_version(&files[i]);

		if (v > known)
			known = v;
	}
	return known;
}

long srv_store_known_schema_version(void)
{
	return highest_version(srv_embedded, srv_embedded_count);
}

/* What a database holds, as far as dpgate's schema goes. */
enum schema_state {
	SCHEMA_EMPTY,   /* no tables at all (a new or zero-byte file) */
	SCHEMA_FOREIGN, /* tables, but no schema_migrations: someone else's */
	SCHEMA_OLDER,   /* dpgate's, with migrations left to apply */
	SCHEMA_CURRENT, /* dpgate's, at this binary's version */
	SCHEMA_NEWER,   /* dpgate's, from a newer binary */
};

/*
 * Reads which of enum schema_state the database on c is in; *ret_version
 * gets the highest recorded migration (0 when there is none).  Returns 0,
 * or -1 with a message in err when the engine cannot read it (not a
 * database, locked past the busy timeout).
 */
static int schema_inspect(srv__conn *c, const char *path, enum schema_state *ret_state,
			  int64_t *ret_version, srv_error *err)
{
	int64_t has_migrations, objects, version = 0;
	long known = srv_store_known_schema_version();

	if (highest_version(c->drv->migrations, *c->drv->migration_count) != known) {
		srv_error_set(err, SRV_DB_ERROR, "this dpgate's %s migrations are not at version %ld",
			      c->drv->name, known);
		return -1;
	}
	if (c->drv->schema_objects(c, &has_migrations, &objects) < 0) {
		if (srv__sqlite_not_a_database(c))
			srv_error_set(err, SRV_NOT_DPGATE,
				      "%s is not a dpgate database (not an SQLite database: %s); "
				      "refusing to use it", path, c->drv->errmsg(c));
		else
			srv_error_set(err, SRV_DB_ERROR, "cannot read %s: %s", path,
				      c->drv->errmsg(c));
		return -1;
	}
	if (has_migrations > 0) {
		version = query_int(c, "SELECT coalesce(max(version), 0) FROM schema_migrations");
		if (version < 0) {
			srv_error_set(err, SRV_DB_ERROR, "cannot read %s: %s", path, c->drv->errmsg(c));
			return -1;
		}
	}
	*ret_version = version;
	if (has_migrations == 0)
		*ret_state = objects == 0 ? SCHEMA_EMPTY : SCHEMA_FOREIGN;
	else if (version > known)
		*ret_state = SCHEMA_NEWER;
	else
		*ret_state = version == known ? SCHEMA_CURRENT : SCHEMA_OLDER;
	return 0;
}

/* The message for a database this binary must not use (foreign or newer). */
static void schema_refusal(enum schema_state state, const char *path, int64_t version,
			   srv_error *err)
{
	if (state == SCHEMA_FOREIGN)
		srv_error_set(err, SRV_NOT_DPGATE,
			 "%s is not a dpgate database (it has tables but no schema_migrations); "
			 "refusing to use it",
			 path);
	else
		srv_error_set(err, SRV_DB_ERROR,
			 "%s has schema version %lld, newer than this dpgate knows (%ld); "
			 "refusing to use it (run the newer dpgate)",
			 path, (long long)version, srv_store_known_schema_version());
}

/* Applies embedded migration f unless it is recorded already; 0 or -1. */
static int migrate_one(srv__conn *c, const struct srv_embedded_file *f, long version,
		       const char *now)
{
	srv__stmt *s = srv__sql_prepare(c, "SELECT 1 FROM schema_migrations WHERE version = ?1");
	int step;

	if (!s)
		return -1;
	srv__sql_bind_int64(s, 1, version);
	step = srv__sql_step(s);
	srv__sql_finalize(s);
	if (step == SRV__SQL_ROW)
		return 0;
	if (step != SRV__SQL_DONE || srv__sql_exec(c, f->data) != SRV__SQL_DONE)
		return -1;
	s = srv__sql_prepare(c, "INSERT INTO schema_migrations VALUES (?1, ?2, ?3)");
	if (!s)
		return -1;
	srv__sql_bind_int64(s, 1, version);
	srv__sql_bind_text(s, 2, f->name);
	srv__sql_bind_text(s, 3, now);
	step = srv__sql_step(s);
	srv__sql_finalize(s);
	return step == SRV__SQL_DONE ? 0 : -1;
}

/* migrate's transaction; err gets what went wrong.  A foreign database or
 * one from a newer dpgate is refused before anything is written. */
static int migrate_locked(srv_db *db, const char *path, srv_error *err)
{
	srv__conn *c = db->c;
	char now[32];
	enum schema_state state;
	int64_t recorded;

	if (srv__begin_write(db) < 0 || c->drv->migrate_lock(c) < 0)
		goto fail;
	if (schema_inspect(c, path, &state, &recorded, err) < 0)
		goto out;
	if (state == SCHEMA_FOREIGN || state == SCHEMA_NEWER) {
		schema_refusal(state, path, recorded, err);
		goto out;
	}
	if (srv__sql_exec(c, "CREATE TABLE IF NOT EXISTS schema_migrations ("
			     " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
			     " applied_at TEXT NOT NULL)") != SRV__SQL_DONE)
		goto fail;
	srv_now_text(now);
	for (size_t i = 0; i < *c->drv->migration_count; i++) {
		const struct srv_embedded_file *f = &c->drv->migrations[i];
		long version = migration_version(f);

		if (version != 0 && migrate_one(c, f, version, now) < 0)
			goto fail;
	}
	if (c->drv->migrate_check(c, err) < 0)
		goto out;
	if (srv__commit(db) < 0)
		goto fail;
	return 0;
fail:
	srv_error_set(err, SRV_DB_ERROR, "migration failed: %s", c->drv->errmsg(c));
out:
	srv__rollback(db);
	return -1;
}

/* Applies the embedded migrations not yet recorded, in one transaction,
 * with what the driver needs around it (migrate_around). */
static int migrate(srv_db *db, const char *path, srv_error *err)
{
	int rc;

	if (db->c->drv->migrate_around(db->c, true) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "migration failed: %s", srv__db_errmsg(db));
		return -1;
	}
	rc = migrate_locked(db, path, err);
	if (db->c->drv->migrate_around(db->c, false) < 0 && rc == 0) {
		srv_error_set(err, SRV_DB_ERROR, "migration failed: %s", srv__db_errmsg(db));
		rc = -1;
	}
	return rc;
}

int srv_store_schema_version(srv_db *db)
{
	int64_t v = query_int(db->c, "SELECT max(version) FROM schema_migrations");

	return v > 0 ? (int)v : 0;
}

/* A store with its locks made and room for `pool_size` connections, none
 * open yet; NULL when out of memory.  srv_store_close ends it. */
static srv_store *store_alloc(unsigned pool_size)
{
	srv_store *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->all = calloc(pool_size, sizeof(srv_db *));
	st->pricing = calloc(1, sizeof(*st->pricing));
	if (!st->all || !st->pricing) {
		free(st->all);
		free(st->pricing);
		free(st);
		return NULL;
	}
	pthread_mutex_init(&st->pricing->lock, NULL);
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->available, NULL);
	pthread_mutex_init(&st->group_lock, NULL);
	pthread_cond_init(&st->group_done, NULL);
	st->queue_tail = &st->queue_head;
	atomic_init(&st->sides_checked_s, -1); /* no second yet: the first check stats */
	return st;
}

/*
 * Opens path read-only and as it is (a missing file stays missing, nothing
 * is configured) and reads its schema state; `unwritable` as for
 * srv_store_open_read_only.  Returns the connection, or NULL with a message
 * in err.
 */
static srv__conn *inspect_file(const char *path, bool unwritable, enum schema_state *ret_state,
			       int64_t *ret_version, srv_error *err)
{
	srv__conn *c = unwritable ? srv__sqlite_open_unwritable(path, SRV__SQLITE_INSPECT, err) :
				    srv__sqlite_open(path, SRV__SQLITE_INSPECT, err);

	if (c && schema_inspect(c, path, ret_state, ret_version, err) < 0) {
		srv__sql_close(c);
		return NULL;
	}
	return c;
}

/*
 * Looks at an existing non-empty file before any connection configures it:
 * PRAGMA journal_mode = WAL alone rewrites the header of a rollback-journal
 * database, so someone else's SQLite file must be refused on a read-only
 * connection first.  So must a file that is not SQLite's at all: SQLite
 * reads a one-byte file (`echo > FILE`) as an empty database and would
 * write dpgate's schema over it, where every file SQLite itself wrote
 * begins with its header.  Returns 0 (absent, empty, or dpgate's at this
 * or an older version) or -1 with a message in err.  migrate_locked
 * checks again under the write lock.
 */
static int precheck_existing(const char *path, srv_error *err)
{
	struct stat st;
	srv__conn *c;
	enum schema_state state;
	int64_t version;
	int rc = -1;

	if (stat(path, &st) < 0 || (S_ISREG(st.st_mode) && st.st_size == 0))
		return 0; /* opening it to write reports the rest */
	if (S_ISREG(st.st_mode) && srv__sqlite_file_header(path) == 0) {
		srv_error_set(err, SRV_NOT_DPGATE,
			      "%s is not a dpgate database (not an SQLite database: it does not "
			      "begin with SQLite's header); refusing to use it", path);
		return -1;
	}
	c = inspect_file(path, false, &state, &version, err);
	if (!c)
		return -1;
	if (state == SCHEMA_FOREIGN || state == SCHEMA_NEWER) {
		schema_refusal(state, path, version, err);
		goto out;
	}
	rc = 0;
out:
	srv__sql_close(c);
	return rc;
}

/*
 * Remembers which file `path` names now that the pool has it open, for
 * srv_store_file_check.  Why the path's identity alone tells: while a
 * file is open its inode cannot be freed, so no other file on its device
 * can take its number; a path that still stats to this device and inode
 * therefore names the very file the pool writes, and a file deleted (link
 * count 0), moved or replaced leaves the path naming nothing or another
 * inode.  0, or -1 with a message in err.
 */
static int watch_file(struct watched_file *w, const char *path, srv_error *err)
{
	struct stat sb;

	if (stat(path, &sb) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot stat %s: %s", path, strerror(errno));
		return -1;
	}
	w->path = strdup(path);
	if (!w->path) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return -1;
	}
	w->dev = sb.st_dev;
	w->ino = sb.st_ino;
	return 0;
}

/*
 * The database file, its WAL and the WAL's index: the last two exist from the
 * pool's first transaction (the migration's) until its last connection
 * closes, and SQLite neither renames nor replaces them meanwhile.  The
 * index is the WAL's name with -shm for -wal: SQLite's unix VFS names both
 * from the database's resolved path.
 */
static int watch_files(srv_store *st, const char *path, srv_error *err)
{
	srv__conn *c = st->writer->c;
	const char *wal = c->drv->wal_path ? c->drv->wal_path(c) : NULL;
	size_t n = wal ? strlen(wal) : 0;
	char shm[PATH_MAX];

	if (watch_file(&st->file, path, err) < 0)
		return -1;
	if (!wal)
		return 0;
	if (n < 4 || n >= sizeof(shm) || strcmp(wal + n - 4, "-wal") != 0) {
		srv_error_set(err, SRV_DB_ERROR, "unexpected WAL name %s", wal);
		return -1;
	}
	memcpy(shm, wal, n - 4);
	memcpy(shm + n - 4, "-shm", 5);
	if (watch_file(&st->wal, wal, err) < 0)
		return -1;
	return watch_file(&st->shm, shm, err);
}

/* Whether the WAL's index is lost while the WAL is not: the server's view
 * of the WAL is then its own, and another process's is another. */
static bool index_lost(const srv_store *st)
{
	return !still_named(&st->shm) && still_named(&st->wal);
}

static void log_file_lost(const srv_store *st, bool here)
{
	char path[512];
	bool wal = !here && still_named(&st->file) && !still_named(&st->wal);
	bool shm = !here && still_named(&st->file) && !wal;

	log_text(path, sizeof(path), wal ? st->wal.path : shm ? st->shm.path : st->file.path);
	if (here)
		fprintf(stderr, "{\"level\":\"info\",\"msg\":\"database file back at its path; "
				"writes resume\",\"path\":\"%s\"}\n", path);
	else if (shm)
		fprintf(stderr, "{\"level\":\"error\",\"msg\":\"database -shm file (the WAL's "
				"index) deleted, moved or replaced; another process on the database "
				"would not see this server's writes, nor it theirs: writes are refused "
				"until it is back at its path or the server restarts\",\"path\":\"%s\"}\n",
			path);
	else if (wal)
		fprintf(stderr, "{\"level\":\"error\",\"msg\":\"database WAL file deleted, moved "
				"or replaced; writes are refused until it is back at its path or "
				"the server restarts\",\"path\":\"%s\"}\n", path);
	else
		fprintf(stderr, "{\"level\":\"error\",\"msg\":\"database file deleted, moved or "
				"replaced; writes refused until it is back at its path\",\"path\":\"%s\"}\n",
			path);
}

/*
 * Whether the WAL's and its index's paths still name them, stat'ed at most
 * once a second.  A stat of the WAL's path before every write transaction
 * made the COMMIT that follows slower (bench_server, one client, both with
 * the database file's stat: 107-111 us against 148-174 us for the WAL
 * write and fsync), for a reason not found; a stat a second brought it
 * back.  What a WAL lost within that second holds is not lost with it:
 * every check that finds the loss copies the WAL the server still holds
 * into the database file (copy_lost_wal), and the store's watcher checks
 * once a second even while no request comes (srv_store_file_watch_start),
 * so only a crash within about a second of the loss, before that copy,
 * loses writes.  Likewise only that second's writes may meet another
 * process's on a WAL whose index was lost.
 */
static bool sides_still_named(srv_store *st)
{
	struct timespec now;
	bool named;

	if (!st->wal.path)
		return true;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	/* Only side files found in place are taken on trust for the second:
	 * one found lost is looked for again at every check, so that writes
	 * resume as soon as it is back. */
	if (atomic_load(&st->sides_checked_s) == (long long)now.tv_sec &&
	    atomic_load(&st->sides_named))
		return true;
	named = still_named(&st->wal) && still_named(&st->shm);
	atomic_store(&st->sides_named, named);
	atomic_store(&st->sides_checked_s, (long long)now.tv_sec);
	return named;
}

/*
 * A WAL that no path names while the database file's path still names the
 * file: the commits in it not yet copied into the database file are then
 * only in the WAL this server holds open, which the next start on the path
 * does not read, so a crash or a kill would lose them (a clean stop copies
 * them at the close).  Copies them now through db, a connection the caller
 * holds with no transaction open.  No write is let in meanwhile: the check
 * that found the loss refuses every write transaction while it lasts, and
 * the truncating checkpoint waits for one begun before it to end (SQLite's
 * busy handler).  A commit whose check came just before the loss was seen
 * may still reach the WAL after this copy; the next check copies it.  The
 * outcome is logged when it is not the one last logged since the loss.
 */
static void copy_lost_wal(srv_store *st, srv_db *db)
{
	char path[512], detail[160];
	int outcome = db->c->drv->checkpoint(db->c, true) == 0 ? 1 : -1;

	if (atomic_exchange(&st->wal_copy_logged, outcome) == outcome)
		return;
	log_text(path, sizeof(path), st->wal.path);
	if (outcome > 0) {
		fprintf(stderr, "{\"level\":\"info\",\"msg\":\"lost database WAL copied into the "
				"database file: its commits survive a crash\",\"path\":\"%s\"}\n",
			path);
		return;
	}
	log_text(detail, sizeof(detail), db->c->drv->errmsg(db->c));
	fprintf(stderr, "{\"level\":\"error\",\"msg\":\"cannot copy the lost database WAL into "
			"the database file; a crash would lose its commits (a clean stop copies "
			"them); tried again at each check\",\"detail\":\"%s\",\"path\":\"%s\"}\n",
		detail, path);
}

/* srv_store_file_check for a caller that holds db, or none (NULL): a
 * connection is then taken from the pool when a lost WAL is to be copied.
 * copy: whether this check copies a lost WAL, which can wait on readers
 * for the busy timeout; one check copies at a time, and a check that
 * finds another copying leaves it to that one. */
static int file_check(srv_store *st, srv_db *db, bool copy)
{
	bool here = still_named(&st->file) && sides_still_named(st);
	srv_db *taken = NULL;

	/* One line when a path stops naming its file, one when it names it
	 * again (moved back): not one per refused request. */
	if (atomic_exchange(&st->file_lost, !here) != !here) {
		atomic_store(&st->wal_copy_logged, 0);
		log_file_lost(st, here);
	}
	if (here)
		return SRV_OK;
	if (copy && still_named(&st->file) && !still_named(&st->wal) &&
	    !atomic_exchange(&st->copying, true)) {
		if (!db)
			db = taken = srv_store_acquire(st);
		copy_lost_wal(st, db);
		srv_store_release(st, taken);
		atomic_store(&st->copying, false);
	}
	return SRV_DB_MOVED;
}

int srv_store_file_check(srv_store *st)
{
	return file_check(st, NULL, false);
}

/* Seconds between the watcher's checks. */
#define FILE_WATCH_PERIOD_S 1

/* The watcher: srv_store_file_check every FILE_WATCH_PERIOD_S, in a timed
 * wait that srv_store_close's signal ends at once. */
static void *file_watch_main(void *arg)
{
	srv_store *st = arg;

	pthread_mutex_lock(&st->watch_lock);
	while (!st->watch_stop) {
		struct timespec next;

		clock_gettime(CLOCK_MONOTONIC, &next);
		next.tv_sec += FILE_WATCH_PERIOD_S;
		while (!st->watch_stop &&
		       pthread_cond_timedwait(&st->watch_wake, &st->watch_lock, &next) == 0)
			;
		if (st->watch_stop)
			break;
		pthread_mutex_unlock(&st->watch_lock);
		file_check(st, NULL, true);
		pthread_mutex_lock(&st->watch_lock);
	}
	pthread_mutex_unlock(&st->watch_lock);
	return NULL;
}

int srv_store_file_watch_start(srv_store *st, srv_error *err)
{
	pthread_condattr_t attr;
	bool cond_made = false;

	if (!st->wal.path || st->watching)
		return 0; /* no file of ours to lose, or watched already */
	if (pthread_condattr_init(&attr) == 0) {
		cond_made = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
			    pthread_cond_init(&st->watch_wake, &attr) == 0;
		pthread_condattr_destroy(&attr);
	}
	if (!cond_made) {
		srv_error_set(err, SRV_DB_ERROR, "cannot make the file watcher's condition");
		return -1;
	}
	pthread_mutex_init(&st->watch_lock, NULL);
	st->watch_stop = false;
	if (pthread_create(&st->watcher, NULL, file_watch_main, st) != 0) {
		pthread_cond_destroy(&st->watch_wake);
		pthread_mutex_destroy(&st->watch_lock);
		srv_error_set(err, SRV_DB_ERROR, "cannot start the file watcher's thread");
		return -1;
	}
	st->watching = true;
	return 0;
}

/* Stops and joins the watcher, if it runs. */
static void file_watch_stop(srv_store *st)
{
	if (!st->watching)
		return;
	pthread_mutex_lock(&st->watch_lock);
	st->watch_stop = true;
	pthread_cond_signal(&st->watch_wake);
	pthread_mutex_unlock(&st->watch_lock);
	pthread_join(st->watcher, NULL);
	pthread_cond_destroy(&st->watch_wake);
	pthread_mutex_destroy(&st->watch_lock);
	st->watching = false;
}

int srv_store_open(const char *path, unsigned pool_size, srv_store **ret_store, srv_error *err)
{
	srv_store *st;
	char name[256];

	srv_store_target_name(path, name, sizeof(name));
	if (!srv__pg_is_url(path) && precheck_existing(sqlite_path(path), err) < 0)
		return -1;
	st = pool_size ? store_alloc(pool_size) : NULL;
	if (!st) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return -1;
	}
	st->shared = srv__pg_is_url(path);
	for (unsigned i = 0; i < pool_size; i++) {
		srv_db *db = db_open(path, err);

		if (!db)
			goto fail;
		if (i == 0 && migrate(db, name, err) < 0) {
			db_close(db);
			goto fail;
		}
		db->store = st;
		st->all[st->count++] = db;
		db->next_free = st->free_list;
		st->free_list = db;
	}
	st->writer = db_open(path, err);
	if (!st->writer)
		goto fail;
	st->writer->store = st;
	if (!st->shared && watch_files(st, sqlite_path(path), err) < 0)
		goto fail;
	*ret_store = st;
	return 0;
fail:
	srv_store_close(st);
	return -1;
}

/* Whether a read-only store may read a database in `state`: 0, or -1 with
 * the reason in err. */
static int read_only_state(enum schema_state state, const char *path, int64_t version,
			   srv_error *err)
{
	switch (state) {
	case SCHEMA_CURRENT:
		return 0;
	case SCHEMA_EMPTY:
		srv_error_set(err, SRV_NOT_DPGATE, "%s is not a dpgate database (it has no tables)",
			      path);
		return -1;
	case SCHEMA_OLDER:
		srv_error_set(err, SRV_DB_ERROR,
			 "%s has schema version %lld, older than this dpgate's %ld; start `dpgate "
			 "serve` on it (or run `dpgate keys list`) once to migrate it",
			 path, (long long)version, srv_store_known_schema_version());
		return -1;
	case SCHEMA_FOREIGN:
	case SCHEMA_NEWER:
		break;
	}
	schema_refusal(state, path, version, err);
	return -1;
}

int srv_store_open_read_only(const char *path, bool unwritable, srv_store **ret_store,
			     srv_error *err)
{
	srv_store *st = store_alloc(1);
	srv_db *db = NULL;
	enum schema_state state;
	int64_t version;
	char name[256];

	if (!st) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return -1;
	}
	st->read_only = true;
	srv_store_target_name(path, name, sizeof(name));
	db = db_wrap(srv__pg_is_url(path) ? srv__pg_open(path, true, err) :
		     unwritable ? srv__sqlite_open_unwritable(sqlite_path(path), SRV__SQLITE_READ_ONLY,
							      err) :
				  srv__sqlite_open(sqlite_path(path), SRV__SQLITE_READ_ONLY, err),
		     err);
	if (!db)
		goto fail;
	db->store = st;
	st->all[st->count++] = db;
	st->free_list = db;
	if (schema_inspect(db->c, name, &state, &version, err) < 0 ||
	    read_only_state(state, name, version, err) < 0)
		goto fail;
	*ret_store = st;
	return 0;
fail:
	srv_store_close(st);
	return -1;
}

/* srv_store_close and srv_store_close_beside_server: `give_back` is the
 * checkpoint's (srv__sql_driver.checkpoint). */
static void store_close(srv_store *st, bool give_back)
{
	bool keep_wal;

	if (!st)
		return;
	/* First: it may take a connection to copy a lost WAL. */
	file_watch_stop(st);
	keep_wal = st->wal.path && index_lost(st);
	/* A checkpoint through an index no path names would copy only the
	 * frames this server knows of and then empty the WAL, losing any that
	 * another process added through its own index: the WAL is left whole
	 * instead, and the next open reads every frame of it again. */
	if (st->count > 0 && !st->read_only && !keep_wal)
		st->all[0]->c->drv->checkpoint(st->all[0]->c, give_back);
	for (unsigned i = 0; keep_wal && i < st->count; i++)
		st->all[i]->c->drv->keep_wal(st->all[i]->c);
	if (keep_wal && st->writer)
		st->writer->c->drv->keep_wal(st->writer->c);
	for (unsigned i = 0; i < st->count; i++)
		db_close(st->all[i]);
	if (st->writer)
		db_close(st->writer);
	free(st->all);
	free(st->file.path);
	free(st->wal.path);
	free(st->shm.path);
	pthread_mutex_destroy(&st->pricing->lock);
	free(st->pricing);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->group_lock);
	pthread_cond_destroy(&st->group_done);
	pthread_cond_destroy(&st->available);
	free(st);
}

void srv_store_close(srv_store *st)
{
	store_close(st, true);
}

void srv_store_close_beside_server(srv_store *st)
{
	store_close(st, false);
}

/* Why and how: srv__sqlite_preallocate_wal (store_sqlite.c). */
int srv_store_preallocate_wal(srv_store *st, srv_error *err)
{
	if (st->read_only || !st->writer) {
		srv_error_set(err, SRV_DB_ERROR, "the store is read-only");
		return -1;
	}
	if (!srv__sqlite_handle(st->writer->c))
		return 0; /* no WAL of ours: the server's */
	return srv__sqlite_preallocate_wal(st->writer->c, err);
}

srv_db *srv_store_acquire(srv_store *st)
{
	srv_db *db;

	pthread_mutex_lock(&st->lock);
	while (!st->free_list)
		pthread_cond_wait(&st->available, &st->lock);
	db = st->free_list;
	st->free_list = db->next_free;
	pthread_mutex_unlock(&st->lock);
	/* A connection that lost its database is made again here; if it still
	 * cannot be, its requests fail (503) until it can. */
	db->c->drv->revive(db->c);
	return db;
}

/* Resets every statement still stepping on the connection (see the
 * driver's reset_open); how many were left busy. */
static int reset_busy_statements(srv_db *db)
{
	return db->c->drv->reset_open(db->c);
}

void srv_store_release(srv_store *st, srv_db *db)
{
	if (!db)
		return;
	reset_busy_statements(db);
	srv__rollback(db);
	pthread_mutex_lock(&st->lock);
	db->next_free = st->free_list;
	st->free_list = db;
	pthread_cond_signal(&st->available);
	pthread_mutex_unlock(&st->lock);
}

/* ---- datasets ------------------------------------------------------------ */

/* Copies a column's text, cut to size. */
static void copy_text(char *dst, size_t size, const char *src)
{
	srv_strcopy(dst, size, src);
}

/* Reads a dataset's filter orders (a JSON array of numbers, as
 * orders_to_text writes it) into ds; -1 when the text is not one. */
static int orders_from_text(const char *text, srv_dataset *ds)
{
	acct_cost c;

	if (srv_cost_from_text(text, &c) < 0 || c.n == 0 || c.n > DPG_MAX_FILTER_ORDERS)
		return -1;
	memcpy(ds->filter_orders, c.v, c.n * sizeof(c.v[0]));
	ds->n_filter_orders = c.n;
	return 0;
}

/* A dataset's own filter orders as text, or NULL (none: the default ones,
 * or out of memory when ds has some; the caller tells them apart). */
static char *orders_to_text(const srv_dataset *ds)
{
	acct_cost c;

	if (ds->n_filter_orders == 0)
		return NULL;
	memset(&c, 0, sizeof(c));
	memcpy(c.v, ds->filter_orders, ds->n_filter_orders * sizeof(c.v[0]));
	c.n = ds->n_filter_orders;
	return srv_cost_to_text(&c);
}

/* Fills *ds from a row of DATASET_SELECT; SRV_DB_ERROR when the dataset's
 * last ledger row carries no totals (a database this dpgate did not write). */
static int row_to_dataset(srv__stmt *s, srv_dataset *ds)
{
	memset(ds, 0, sizeof(*ds));
	copy_text(ds->id, sizeof(ds->id), srv__sql_text(s, 0));
	copy_text(ds->name, sizeof(ds->name), srv__sql_text(s, 1));
	copy_text(ds->privacy_unit, sizeof(ds->privacy_unit), srv__sql_text(s, 2));
	ds->neighbor = strcmp(srv__sql_text(s, 3), "replace") == 0 ?
			       ACCT_REPLACE : ACCT_ADD_REMOVE;
	if (acct_ledger_kind_from_name(srv__sql_text(s, 4), &ds->accountant) < 0)
		return SRV_DB_ERROR;
	ds->budget_epsilon = srv__sql_double(s, 5);
	ds->budget_delta = srv__sql_double(s, 6);
	if (!srv__sql_is_null(s, 15) &&
	    orders_from_text(srv__sql_text(s, 15), ds) < 0)
		return SRV_DB_ERROR;
	if (srv__sql_is_null(s, 14)) {
		acct_filter f;

		/* No ledger row: nothing spent or reserved, in the dataset's
		 * coordinates. */
		if (srv_dataset_filter(ds, &f, NULL) < 0)
			return SRV_DB_ERROR;
		acct_filter_zero(&f, &ds->spent);
		ds->reserved = ds->spent;
	} else if (srv_cost_from_text(srv__sql_text(s, 7), &ds->spent) < 0 ||
		   srv_cost_from_text(srv__sql_text(s, 8), &ds->reserved) < 0 ||
		   srv__sql_is_null(s, 9) || srv__sql_is_null(s, 10)) {
		return SRV_DB_ERROR;
	}
	ds->open_reservations = srv__sql_int64(s, 9);
	ds->charges = srv__sql_int64(s, 10);
	ds->archived = srv__sql_int64(s, 11) != 0;
	ds->is_public = srv__sql_int64(s, 16) != 0;
	ds->label_private = srv__sql_int64(s, 17) != 0;
	copy_text(ds->created_at, sizeof(ds->created_at), srv__sql_text(s, 12));
	copy_text(ds->updated_at, sizeof(ds->updated_at), srv__sql_text(s, 13));
	return SRV_OK;
}

int srv_store_dataset_get(srv_db *db, const char *id, srv_dataset *ret)
{
	srv__stmt *s = stmt(db, ST_DATASET_GET);
	int rc;

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 1, id);
	rc = srv__sql_step(s);
	if (rc == SRV__SQL_DONE)
		rc = SRV_NOT_FOUND;
	else if (rc == SRV__SQL_ROW)
		rc = row_to_dataset(s, ret);
	else
		rc = SRV_DB_ERROR;
	srv__sql_reset(s);
	return rc;
}

/* FNV-1a of an id: where the dataset caches keep its row. */
static uint32_t id_hash(const char *id)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

static unsigned pricing_slot_of(const char *id)
{
	return id_hash(id) % PRICING_SLOTS;
}

int srv_store_dataset_pricing(srv_db *db, const char *id, acct_filter *ret, bool *ret_archived)
{
	struct pricing_cache *pc = db->store ? db->store->pricing : NULL;
	struct pricing_slot *sl = pc ? &pc->slot[pricing_slot_of(id)] : NULL;
	uint64_t generation = 0;
	srv_dataset ds;
	int rc;

	*ret_archived = false;
	if (pc) {
		bool hit;

		pthread_mutex_lock(&pc->lock);
		hit = sl->used && strcmp(sl->id, id) == 0;
		if (hit)
			*ret = sl->filter;
		generation = pc->generation;
		pthread_mutex_unlock(&pc->lock);
		if (hit)
			return SRV_OK;
	}
	rc = srv_store_dataset_get(db, id, &ds);
	if (rc != SRV_OK)
		return rc;
	if (srv_dataset_filter(&ds, ret, NULL) < 0)
		return SRV_DB_ERROR;
	*ret_archived = ds.archived;
	if (pc && !ds.archived) {
		pthread_mutex_lock(&pc->lock);
		if (pc->generation == generation) {
			sl->used = true;
			srv_strcopy(sl->id, sizeof(sl->id), ds.id);
			sl->filter = *ret;
		}
		pthread_mutex_unlock(&pc->lock);
	}
	return SRV_OK;
}

/* Forgets the pricing inputs of a dataset that is being archived. */
static void pricing_forget(srv_db *db, const char *id)
{
	struct pricing_cache *pc = db->store ? db->store->pricing : NULL;
	struct pricing_slot *sl;

	if (!pc)
		return;
	sl = &pc->slot[pricing_slot_of(id)];
	pthread_mutex_lock(&pc->lock);
	if (sl->used && strcmp(sl->id, id) == 0)
		sl->used = false;
	pc->generation++;
	pthread_mutex_unlock(&pc->lock);
}

struct dataset_walk {
	bool (*visible)(void *arg, const char *id);
	void (*each)(void *arg, const srv_dataset *ds);
	void *arg;
};

static int dataset_row(srv__stmt *s, void *arg)
{
	struct dataset_walk *w = arg;
	srv_dataset ds;

	if (w->visible && !w->visible(w->arg, srv__sql_text(s, 0)))
		return 0;
	if (row_to_dataset(s, &ds) != SRV_OK)
		return SRV_DB_ERROR;
	w->each(w->arg, &ds);
	return 0;
}

int srv_store_dataset_list(srv_db *db, bool (*visible)(void *arg, const char *id),
			   void (*each)(void *arg, const srv_dataset *ds), void *arg)
{
	struct dataset_walk w = {visible, each, arg};
	char buf[DATASET_SQL_BYTES];
	const char *sql = dataset_sql(db, " ORDER BY d.id", buf, sizeof(buf));

	return srv__each_row(sql ? srv__prepare(db, sql, NULL) : NULL, dataset_row, &w);
}

void srv_store_public_budget(srv_dataset *ds)
{
	ds->accountant = ACCT_LEDGER_BASIC;
	ds->neighbor = ACCT_ADD_REMOVE;
	ds->budget_epsilon = DBL_MIN;
	ds->budget_delta = 0.0;
	ds->n_filter_orders = 0;
}

int srv_store_dataset_create(srv_db *db, const srv_dataset *ds, const char *actor)
{
	srv__stmt *s = NULL;
	char now[32];
	srv_dataset row = *ds;
	char *orders = NULL;
	acct_filter f;
	int rc = SRV_DB_ERROR;

	if (row.is_public)
		srv_store_public_budget(&row);
	orders = orders_to_text(&row);
	if (srv_dataset_filter(&row, &f, NULL) < 0 || (row.n_filter_orders > 0 && !orders))
		goto out;
	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		goto out;
	s = srv__prepare(db,
			 "INSERT INTO datasets (id, name, privacy_unit, neighbor, accountant,"
			 " budget_epsilon, budget_delta, created_at, updated_at, filter_orders,"
			 " public, label_private)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11)",
			 NULL);
	if (!s)
		goto out;
	srv__sql_bind_text(s, 1, row.id);
	srv__sql_bind_text(s, 2, row.name);
	srv__sql_bind_text(s, 3, row.privacy_unit);
	srv__sql_bind_text(s, 4, row.neighbor == ACCT_REPLACE ? "replace" : "add_remove");
	srv__sql_bind_text(s, 5, acct_ledger_kind_name(row.accountant));
	srv__sql_bind_double(s, 6, row.budget_epsilon);
	srv__sql_bind_double(s, 7, row.budget_delta);
	srv__sql_bind_text(s, 8, now);
	if (orders)
		srv__sql_bind_text(s, 9, orders);
	srv__sql_bind_int64(s, 10, row.is_public ? 1 : 0);
	srv__sql_bind_int64(s, 11, row.label_private ? 1 : 0);
	rc = srv__sql_step(s);
	if (rc == SRV__SQL_CONSTRAINT) {
		rc = SRV_CONFLICT;
		goto out;
	}
	if (rc != SRV__SQL_DONE) {
		rc = SRV_DB_ERROR;
		goto out;
	}
	rc = SRV_DB_ERROR;
	/* Nothing waits on the new row; the lock is for what the driver does
	 * with it besides (store_sql.h: other servers hear of the commit). */
	if (srv__lock_dataset(db, row.id) != SRV_OK)
		goto out;
	/* A public dataset has no ledger, not even its creation row. */
	if (row.is_public)
		goto commit;
	/* The creation row: the initial budget and who set it, with zero
	 * totals in the dataset's coordinates. */
	acct_filter_zero(&f, &row.spent);
	row.reserved = row.spent;
	row.open_reservations = 0;
	row.charges = 0;
	srv_strcopy(row.updated_at, sizeof(row.updated_at), now);
	if (srv__ledger_insert(db, &row, "create", NULL, NULL, ds->budget_epsilon, ds->budget_delta,
			       NULL, NULL, actor, NULL, now) < 0)
		goto out;
commit:
	rc = srv__commit(db);
out:
	srv__sql_finalize(s);
	srv__rollback(db);
	free(orders);
	return rc;
}

/* Appends one ledger row carrying ds's totals; returns its seq or -1. */
int64_t srv__ledger_insert(srv_db *db, srv_dataset *ds, const char *kind, const char *event,
			   const char *cost, double eps, double delta, const char *rid,
			   const char *note, const char *actor, const char *idem_key,
			   const char *now)
{
	int64_t (*last_key)(srv__conn *c) = db->c->drv->last_insert_key;
	srv__stmt *s = stmt(db, last_key ? ST_LEDGER_INSERT : ST_LEDGER_INSERT_RETURNING);
	char *spent = srv_cost_to_text(&ds->spent);
	char *reserved = srv_cost_to_text(&ds->reserved);
	acct_cost spent_read, reserved_read;
	int64_t seq = -1;
	int rc;

	if (!s || !spent || !reserved)
		goto out;
	srv__sql_bind_text(s, 1, ds->id);
	srv__sql_bind_text(s, 2, kind);
	if (event)
		srv__sql_bind_text(s, 3, event);
	if (cost)
		srv__sql_bind_text(s, 4, cost);
	if (isfinite(eps))
		srv__sql_bind_double(s, 5, eps);
	if (isfinite(delta))
		srv__sql_bind_double(s, 6, delta);
	if (rid)
		srv__sql_bind_text(s, 7, rid);
	if (note)
		srv__sql_bind_text(s, 8, note);
	srv__sql_bind_text(s, 9, actor);
	if (idem_key)
		srv__sql_bind_text(s, 10, idem_key);
	srv__sql_bind_text(s, 11, now);
	srv__sql_bind_text(s, 12, spent);
	srv__sql_bind_text(s, 13, reserved);
	srv__sql_bind_int64(s, 14, ds->open_reservations);
	srv__sql_bind_int64(s, 15, ds->charges);
	rc = srv__sql_step(s);
	if (last_key && rc == SRV__SQL_DONE)
		seq = last_key(db->c); /* seq is the ledger's INTEGER PRIMARY KEY */
	else if (!last_key && rc == SRV__SQL_ROW)
		seq = srv__sql_int64(s, 0);
	srv__sql_reset(s);
	/* *ds as a read now gives it: the totals parsed from the very text
	 * stored (not assumed to round-trip), and updated_at the later of what
	 * it was and now.  (A read takes the later of the dataset row's and
	 * this entry's; the two differ only if the clock stepped back since the
	 * dataset's previous entry, and then only in updated_at.) */
	if (seq >= 0 && (srv_cost_from_text(spent, &spent_read) < 0 ||
			 srv_cost_from_text(reserved, &reserved_read) < 0))
		seq = -1;
	if (seq >= 0) {
		ds->spent = spent_read;
		ds->reserved = reserved_read;
		if (strcmp(now, ds->updated_at) > 0)
			srv_strcopy(ds->updated_at, sizeof(ds->updated_at), now);
	}
out:
	free(spent);
	free(reserved);
	return seq;
}

/* The filter's epsilon of one cost alone, for display in ledger rows. */
static double cost_epsilon(const srv_dataset *ds, const acct_cost *c)
{
	acct_filter f;

	if (srv_dataset_filter(ds, &f, NULL) < 0)
		return NAN;
	return acct_filter_epsilon(&f, c);
}

/*
 * Closes one open reservation inside the caller's transaction, moving its
 * cost to spent (commit) or returning it (release), and writes the ledger row.
 */
int srv__close_reservation_locked(srv_db *db, srv_dataset *ds, const char *rid, bool do_commit,
				    const char *actor, const char *now, char ret_state[16])
{
	srv__stmt *s = stmt(db, ST_RES_GET);
	acct_cost cost;
	char *event = NULL, *cost_text = NULL;
	int rc = SRV_DB_ERROR;

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 1, rid);
	srv__sql_bind_text(s, 2, ds->id);
	rc = srv__sql_step(s);
	if (rc == SRV__SQL_DONE) {
		srv__sql_reset(s);
		return SRV_NOT_FOUND;
	}
	if (rc != SRV__SQL_ROW) {
		srv__sql_reset(s);
		return SRV_DB_ERROR;
	}
	if (ret_state)
		copy_text(ret_state, 16, srv__sql_text(s, 2));
	if (strcmp(srv__sql_text(s, 2), "open") != 0) {
		srv__sql_reset(s);
		return SRV_CONFLICT;
	}
	event = strdup(srv__sql_text(s, 0));
	cost_text = strdup(srv__sql_text(s, 1));
	srv__sql_reset(s);
	rc = SRV_DB_ERROR;
	if (!event || !cost_text || srv_cost_from_text(cost_text, &cost) < 0)
		goto out;
	if (do_commit) {
		acct_cost_add_up(&ds->spent, &cost);
		ds->charges++;
	}
	acct_cost_sub_up(&ds->reserved, &cost);
	ds->open_reservations--;
	if (ds->open_reservations <= 0) {
		/* No reservation is open: the reserved total is exactly zero. */
		ds->open_reservations = 0;
		for (unsigned i = 0; i < ds->reserved.n; i++)
			ds->reserved.v[i] = 0.0;
	}
	if (srv__ledger_insert(db, ds, do_commit ? "commit" : "release", event, cost_text,
			       cost_epsilon(ds, &cost), NAN, rid, NULL, actor, NULL, now) < 0)
		goto out;
	s = stmt(db, ST_RES_CLOSE);
	if (!s)
		goto out;
	srv__sql_bind_text(s, 1, rid);
	srv__sql_bind_text(s, 2, do_commit ? "committed" : "released");
	srv__sql_bind_text(s, 3, now);
	srv__sql_bind_text(s, 4, actor);
	rc = srv__sql_step(s) == SRV__SQL_DONE ? SRV_OK : SRV_DB_ERROR;
	srv__sql_reset(s);
	if (ret_state && rc == SRV_OK)
		snprintf(ret_state, 16, "%s", do_commit ? "committed" : "released");
out:
	free(event);
	free(cost_text);
	return rc;
}

/*
 * Commits every open reservation of the dataset whose expiry has passed
 * (the documented rule: work that may have touched data is paid for in
 * full).  Runs inside the caller's transaction.
 */
int srv__sweep_expired(srv_db *db, srv_dataset *ds, const char *now, int *ret_closed)
{
	srv__stmt *s;
	char ids[16][64];
	int n = 0, closed = 0, rc;

	if (ret_closed)
		*ret_closed = 0;
	if (ds->open_reservations == 0)
		return SRV_OK;
	for (;;) {
		s = stmt(db, ST_RES_EXPIRED);
		if (!s)
			return SRV_DB_ERROR;
		srv__sql_bind_text(s, 1, ds->id);
		srv__sql_bind_int64(s, 2, (int64_t)time(NULL));
		n = 0;
		while (n < 16 && (rc = srv__sql_step(s)) == SRV__SQL_ROW)
			copy_text(ids[n++], sizeof(ids[0]), srv__sql_text(s, 0));
		srv__sql_reset(s);
		if (n == 0)
			break;
		for (int i = 0; i < n; i++)
			if (srv__close_reservation_locked(db, ds, ids[i], true, "expiry", now, NULL) != SRV_OK)
				return SRV_DB_ERROR;
		closed += n;
	}
	if (ret_closed)
		*ret_closed = closed;
	return SRV_OK;
}

int srv_dataset_filter(const srv_dataset *ds, acct_filter *ret, acct_error *err)
{
	return acct_filter_init_orders(ret, ds->accountant, ds->neighbor, ds->budget_epsilon,
				       ds->budget_delta, ds->filter_orders, ds->n_filter_orders,
				       err);
}

/* The prepared statement `id` of the idempotency table with ?1 and ?2
 * bound to sp's actor and key (an answer is kept per actor and key);
 * NULL when it cannot be had. */
static srv__stmt *idem_stmt(srv_db *db, enum stmt_id id, const srv_spend *sp)
{
	srv__stmt *s = stmt(db, id);

	if (s) {
		srv__sql_bind_text(s, 1, sp->actor);
		srv__sql_bind_text(s, 2, sp->idempotency_key);
	}
	return s;
}

static int idem_lookup(srv_db *db, const srv_spend *sp, int *ret_status, char **ret_body)
{
	srv__stmt *s = idem_stmt(db, ST_IDEM_GET, sp);
	int rc;

	if (!s)
		return SRV_DB_ERROR;
	rc = srv__sql_step(s);
	if (rc == SRV__SQL_DONE) {
		rc = SRV_OK;
	} else if (rc == SRV__SQL_ROW) {
		const void *hash = srv__sql_blob(s, 0);
		int hlen = srv__sql_bytes(s, 0);

		if (hlen != crypto_hash_sha256_BYTES || !hash ||
		    sodium_memcmp(hash, sp->request_hash, crypto_hash_sha256_BYTES) != 0) {
			rc = SRV_IDEM_MISMATCH;
		} else {
			int len = srv__sql_bytes(s, 2);
			char *body = malloc((size_t)len + 1);

			if (!body) {
				rc = SRV_DB_ERROR;
			} else {
				memcpy(body, srv__sql_blob(s, 2), (size_t)len);
				body[len] = '\0';
				*ret_status = srv__sql_int64(s, 1);
				*ret_body = body;
				rc = SRV_REPLAYED;
			}
		}
	} else {
		rc = SRV_DB_ERROR;
	}
	srv__sql_reset(s);
	return rc;
}

/*
 * Stores a spend's answer under its Idempotency-Key.  SRV_IDEM_MISMATCH
 * when another transaction committed an answer under the same actor and
 * key after idem_lookup found none (the engine's unique key refuses this
 * one): only a spend of another dataset can, since spends of one dataset
 * run one after the other under its lock and the second finds the first's
 * answer, so that answer is for another request, as idem_lookup would now
 * say.  Several servers on one PostgreSQL database meet this; the spend's
 * writes are then undone with it.
 */
static int idem_store(srv_db *db, const srv_spend *sp, int status, const char *body,
		      const char *now)
{
	srv__stmt *s = idem_stmt(db, ST_IDEM_PUT, sp);
	int rc;

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_blob(s, 3, sp->request_hash, crypto_hash_sha256_BYTES);
	srv__sql_bind_int64(s, 4, status);
	srv__sql_bind_blob(s, 5, body, (int)strlen(body));
	srv__sql_bind_text(s, 6, now);
	rc = srv__sql_step(s);
	srv__sql_reset(s);
	if (rc == SRV__SQL_CONSTRAINT)
		return SRV_IDEM_MISMATCH;
	return rc == SRV__SQL_DONE ? SRV_OK : SRV_DB_ERROR;
}

int srv_random_bytes(void *buf, size_t n)
{
	return mech_system_bytes(buf, n) == 0 ? SRV_OK : SRV_NO_RANDOM;
}

int srv_random_id(const char *prefix, char *buf, size_t size)
{
	uint8_t raw[RESERVATION_ID_BYTES];
	char hex[2 * RESERVATION_ID_BYTES + 1];

	if (size > 0)
		buf[0] = '\0';
	if (srv_random_bytes(raw, sizeof(raw)) != SRV_OK)
		return SRV_NO_RANDOM;
	sodium_bin2hex(hex, sizeof(hex), raw, sizeof(raw));
	snprintf(buf, size, "%s%s", prefix, hex);
	return SRV_OK;
}

int srv_store_replay(srv_db *db, const srv_spend *sp, int *ret_status, char **ret_body)
{
	if (!sp->idempotency_key)
		return SRV_OK;
	return idem_lookup(db, sp, ret_status, ret_body);
}

/*
 * A reservation's expires_at: the first whole second at or after `ttl`
 * seconds from now.  The sweep closes it once time(NULL) >= expires_at, so
 * it is never closed before its TTL has passed (truncating now to its
 * second instead could close a 1-second reservation a millisecond after it
 * was made), and at most a second after.
 */
static int64_t expiry_second(int64_t ttl)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec + ttl + (ts.tv_nsec > 0 ? 1 : 0);
}

/* What one spend inside its transaction has read and decided so far. */
struct spend_work {
	srv_dataset ds;          /* its dataset's row, with this spend's writes */
	acct_filter f;           /* ds's filter */
	const acct_cost *cost;   /* what it charges or reserves */
	const char *event;       /* what it records: the event's JSON text */
	char now[32];
	char rid[64];            /* the reservation's id; empty for a charge */
};

/*
 * Whether w's spend fits its dataset on top of what is spent and reserved:
 * sets w->f, w->cost and w->event, and *ret_fits.  A plan_fn picks the cost
 * against the filter and those totals; its refusal is SRV_PLAN_REFUSED.
 */
static int spend_fits(const srv_spend *sp, struct spend_work *w, bool *ret_fits)
{
	acct_cost total;
	bool fits = true;

	if (srv_dataset_filter(&w->ds, &w->f, NULL) < 0)
		return SRV_DB_ERROR;
	total = w->ds.spent;
	acct_cost_add_up(&total, &w->ds.reserved);
	if (sp->plan_fn) {
		int planned = sp->plan_fn(sp->body_arg, &w->f,
					  &total, &w->cost, &w->event);

		if (planned < 0)
			return SRV_PLAN_REFUSED;
		fits = planned == 0;
	} else {
		w->cost = sp->cost;
		w->event = sp->event_text;
	}
	if (fits) {
		acct_cost_add_up(&total, w->cost);
		fits = acct_filter_within(&w->f, &total);
	}
	*ret_fits = fits;
	return SRV_OK;
}

/*
 * Inserts w's spend as an open reservation under a fresh id (w->rid) and
 * adds its cost to the row's reserved total.
 */
static int spend_reserve(srv_db *db, const srv_spend *sp, struct spend_work *w,
			 const char *event_text, const char *cost_text)
{
	srv__stmt *s = stmt(db, ST_RES_INSERT);
	int64_t ttl = sp->ttl_seconds;

	if (srv_random_id("rsv_", w->rid, sizeof(w->rid)) != SRV_OK)
		return SRV_NO_RANDOM;
	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 1, w->rid);
	srv__sql_bind_text(s, 2, w->ds.id);
	srv__sql_bind_text(s, 3, event_text);
	srv__sql_bind_text(s, 4, cost_text);
	srv__sql_bind_double(s, 5, acct_filter_epsilon(&w->f, w->cost));
	srv__sql_bind_text(s, 6, sp->actor);
	if (sp->note)
		srv__sql_bind_text(s, 7, sp->note);
	srv__sql_bind_text(s, 8, w->now);
	srv__sql_bind_int64(s, 9, expiry_second(ttl));
	if (srv__sql_step(s) != SRV__SQL_DONE) {
		srv__sql_reset(s);
		return SRV_DB_ERROR;
	}
	srv__sql_reset(s);
	acct_cost_add_up(&w->ds.reserved, w->cost);
	w->ds.open_reservations++;
	return SRV_OK;
}

/*
 * Writes w's admitted spend: its reservation (for a reserve) or its charge
 * to the row's totals, then its ledger row, then whatever its txn_fn
 * writes.  *ret_seq is the ledger row's seq.
 */
static int spend_write(srv_db *db, const srv_spend *sp, struct spend_work *w, int64_t *ret_seq)
{
	const char *event_text = w->event;
	char *cost_text = NULL;
	const char *rid;
	int64_t seq;
	int rc = SRV_DB_ERROR;

	cost_text = srv_cost_to_text(w->cost);
	if (!event_text || !cost_text)
		goto out;
	w->rid[0] = '\0';
	if (sp->kind == SRV_SPEND_RESERVE) {
		rc = spend_reserve(db, sp, w, event_text, cost_text);
		if (rc != SRV_OK)
			goto out;
		rc = SRV_DB_ERROR;
	} else {
		acct_cost_add_up(&w->ds.spent, w->cost);
		w->ds.charges++;
	}
	rid = w->rid[0] ? w->rid : NULL;
	seq = srv__ledger_insert(db, &w->ds, sp->kind == SRV_SPEND_RESERVE ? "reserve" : "charge",
				 event_text, cost_text, acct_filter_epsilon(&w->f, w->cost),
				 w->ds.accountant == ACCT_LEDGER_BASIC ? w->cost->v[1] : NAN,
				 rid, sp->note, sp->actor, sp->idempotency_key, w->now);
	if (seq < 0)
		goto out;
	if (sp->txn_fn && sp->txn_fn(sp->body_arg, db, &w->ds, seq, rid) < 0)
		goto out;
	*ret_seq = seq;
	rc = SRV_OK;
out:
	free(cost_text);
	return rc;
}

/* The answer to a written spend, as text; NULL when it could not be made. */
static char *spend_answer(const srv_spend *sp, int64_t seq, const char *rid, const srv_dataset *ds)
{
	return sp->text_fn(sp->body_arg, seq, rid, ds);
}

/*
 * One spend inside the caller's write transaction: everything of
 * srv_store_spend but BEGIN and COMMIT.  *ret_keep says whether its writes
 * are to be committed: true for SRV_OK and for an over-budget SRV_CONFLICT
 * that found expired reservations (the sweep committed them: they stay
 * committed), false for every other outcome, whose writes (if any) the
 * caller rolls back.
 */
static int spend_in_txn(srv_db *db, const srv_spend *sp, const srv_dataset *cached,
			int *ret_status, char **ret_body, srv_dataset *ret_ds, bool *ret_keep)
{
	struct spend_work w;
	char *body = NULL;
	bool fits;
	int64_t seq;
	int swept = 0, rc;

	w.cost = NULL;
	w.event = NULL;
	*ret_keep = false;
	srv_now_text(w.now);
	/* Before the stored answer and the totals are read: another writer
	 * that holds them commits first, and this spend then reads what it
	 * wrote. */
	rc = srv__lock_dataset(db, sp->dataset_id);
	if (rc != SRV_OK)
		goto out;
	if (sp->idempotency_key) {
		rc = idem_lookup(db, sp, ret_status, ret_body);
		if (rc != SRV_OK)
			goto out;
	}
	if (cached && strcmp(cached->id, sp->dataset_id) == 0) {
		w.ds = *cached;
	} else {
		rc = srv_store_dataset_get(db, sp->dataset_id, &w.ds);
		if (rc != SRV_OK)
			goto out;
	}
	/* A public dataset has nothing to charge: refused before any write. */
	if (w.ds.archived || w.ds.is_public) {
		*ret_ds = w.ds;
		rc = SRV_CONFLICT;
		goto out;
	}
	rc = srv__sweep_expired(db, &w.ds, w.now, &swept);
	if (rc != SRV_OK)
		goto out;
	rc = spend_fits(sp, &w, &fits);
	if (rc != SRV_OK)
		goto out;
	if (!fits) {
		/* Expired reservations committed by the sweep stay committed (its
		 * ledger rows carry the totals).  Without any, the refusal changed
		 * nothing: nothing is written, and no fsync is paid for it. */
		*ret_ds = w.ds;
		*ret_keep = swept > 0;
		rc = SRV_CONFLICT;
		goto out;
	}
	rc = spend_write(db, sp, &w, &seq);
	if (rc != SRV_OK)
		goto out;
	rc = SRV_DB_ERROR;
	body = spend_answer(sp, seq, w.rid[0] ? w.rid : NULL, &w.ds);
	if (!body)
		goto out;
	if (sp->idempotency_key) {
		rc = idem_store(db, sp, sp->success_status ? sp->success_status : 201, body, w.now);
		if (rc != SRV_OK)
			goto out;
	}
	*ret_status = sp->success_status ? sp->success_status : 201;
	*ret_body = body;
	body = NULL;
	*ret_ds = w.ds;
	*ret_keep = true;
	rc = SRV_OK;
out:
	free(body);
	return rc;
}

/* ---- group commit -------------------------------------------------------- */

/* One waiting srv_store_spend call. */
struct spend_slot {
	const srv_spend *sp;
	int *ret_status;
	char **ret_body;
	srv_dataset *ret_ds;
	int rc;
	bool keep;
	bool done;
	struct spend_slot *next;
};

#define GROUP_MAX_BATCH 64

static const char sql_savepoint[] = "SAVEPOINT spend";
static const char sql_release[] = "RELEASE spend";
static const char sql_rollback_to[] = "ROLLBACK TO spend";

/* The connection's data version (store_sql.h); false when unknown. */
static bool data_version(srv_db *db, unsigned *ret)
{
	return db->c->drv->data_version(db->c, ret);
}

static unsigned row_slot(const char *id)
{
	return id_hash(id) % ROW_CACHE_SLOTS;
}

static void row_cache_clear(struct row_cache *rc)
{
	rc->valid = false;
	memset(rc->used, 0, sizeof(rc->used));
}

static const srv_dataset *row_cache_find(const struct row_cache *rc, const char *id)
{
	unsigned first = row_slot(id);

	for (unsigned k = 0; k < ROW_CACHE_WAYS; k++) {
		unsigned i = (first + k) % ROW_CACHE_SLOTS;

		if (rc->used[i] && strcmp(rc->row[i].id, id) == 0)
			return &rc->row[i];
	}
	return NULL;
}

/* Stores a row in its own slot, else a free one, else the first. */
static void row_cache_put(struct row_cache *rc, const srv_dataset *ds)
{
	const srv_dataset *own = row_cache_find(rc, ds->id);
	unsigned first = row_slot(ds->id), pick = own ? (unsigned)(own - rc->row) : first;

	for (unsigned k = 0; k < ROW_CACHE_WAYS && !own; k++) {
		unsigned i = (first + k) % ROW_CACHE_SLOTS;

		if (!rc->used[i]) {
			pick = i;
			break;
		}
	}
	rc->row[pick] = *ds;
	rc->used[pick] = true;
}

/*
 * Tells a rolled-back batch's spends what became of them.  A refusal stands
 * (nothing of it was to commit; a spend that never ran is SRV_DB_ERROR
 * already); what was to commit is lost, as far as anyone is told:
 * commit_rc, SRV_COMMIT_FAILED when its COMMIT failed.  A replay stands
 * only when the batch had nothing to commit: otherwise it may have read the
 * stored answer of an earlier spend of this batch under the same key, which
 * was never committed (a later retry then gets a new answer, a second noisy
 * output for one charge), so it fails too, and its retry reads what is
 * durable.
 */
static void spend_batch_lost(struct spend_slot *batch, bool any_kept, int commit_rc)
{
	for (struct spend_slot *s = batch; s; s = s->next) {
		bool replay = s->rc == SRV_REPLAYED;

		if (!s->keep && !(replay && any_kept))
			continue;
		if (s->rc == SRV_OK || replay) {
			free(*s->ret_body);
			*s->ret_body = NULL;
		}
		s->rc = commit_rc;
	}
}

/*
 * Runs a batch of spends in one write transaction and one COMMIT, in list
 * order (by_dataset's), each seeing the ones before it (so admission is
 * sequential, as if each had its own transaction).  With more than one,
 * each runs inside a savepoint so that one whose writes are not kept is
 * undone alone.  The SAVEPOINT may go out with the spend's first
 * statement (run_later): if
 * it failed, that statement fails, and so does the ROLLBACK TO that
 * follows (no savepoint of the name is left: the one before was
 * released), which ends the batch.  RELEASE and ROLLBACK TO run at once:
 * the savepoints share one name, so a failed RELEASE seen only later could
 * be followed by a ROLLBACK TO that undoes a spend already counted as
 * kept, and its answer would go out without its charge.  When
 * the COMMIT fails no answer of the batch is given out: every spend that
 * would have been kept becomes SRV_DB_ERROR.
 *
 * A single spend takes its dataset row from the connection's row cache
 * instead of reading it when the connection's data version is still the
 * one read right after the last COMMIT that filled the cache.  Why those
 * rows are the stored ones: the driver's data version changes at every
 * commit of the connection's own and, read inside the write transaction,
 * whenever any other connection or process changed the database since
 * (SQLite: SQLITE_FCNTL_DATA_VERSION; pager_reset and CommitPhaseTwo in
 * pager.c; an engine without one never fills the cache).  BEGIN IMMEDIATE
 * has started that read transaction and holds the write lock, so an
 * unchanged version means the file was written by nothing but
 * this connection's own COMMITs since the cache was last valid, and each
 * of those (the cache stays valid across no other) was a single spend
 * without a txn_fn (which could write anything): of what a dataset read
 * returns, it changed only its own dataset's totals, through the ledger rows
 * it appended (srv__ledger_insert), which leave the row it hands back equal
 * to what a read returns, and that row replaced the cached one.
 * Anything else, a batch, a refusal, a replay, a spend with a txn_fn, a
 * failed COMMIT, a write by anyone else, empties the cache.
 */
static void spend_batch(srv_db *db, struct spend_slot *batch)
{
	bool single = batch->next == NULL, any_kept = false, broken = false;
	bool plain = single && !batch->sp->txn_fn;
	int commit_rc = SRV_DB_ERROR; /* until a COMMIT is tried */
	int begun;
	const srv_dataset *cached = NULL;
	struct row_cache *rows;
	struct timespec began, committing;
	unsigned version;

	if (!db->rows)
		db->rows = calloc(1, sizeof(*db->rows)); /* none: every spend reads its row */
	rows = db->rows;
	clock_gettime(CLOCK_MONOTONIC, &began);
	if ((begun = srv__begin_write(db)) < 0) {
		if (rows)
			row_cache_clear(rows);
		for (struct spend_slot *s = batch; s; s = s->next)
			s->rc = begun;
		return;
	}
	if (rows) {
		if (!rows->valid || !data_version(db, &version) || version != rows->version)
			row_cache_clear(rows);
		if (rows->valid && plain)
			cached = row_cache_find(rows, batch->sp->dataset_id);
		rows->valid = false; /* until this batch's COMMIT is accounted for */
	}
	/* A named lock comes before every dataset's row in every batch (one
	 * global order, as by_dataset's), so no two servers' batches can each
	 * hold what the other waits for. */
	for (struct spend_slot *s = batch; s && !broken; s = s->next)
		if (s->sp->lock_first && srv__lock_named(db, s->sp->lock_first) != SRV_OK)
			broken = true;
	for (struct spend_slot *s = batch; s; s = s->next) {
		s->keep = false;
		if (broken || (!single && db->c->drv->run_later(db->c, sql_savepoint) != SRV__SQL_DONE)) {
			broken = true;
			s->rc = SRV_DB_ERROR;
			continue;
		}
		s->rc = spend_in_txn(db, s->sp, cached, s->ret_status, s->ret_body, s->ret_ds,
				     &s->keep);
		if (!single && ((!s->keep && srv__sql_step_once(db->c, sql_rollback_to) != SRV__SQL_DONE) ||
				srv__sql_step_once(db->c, sql_release) != SRV__SQL_DONE))
			broken = true;
		any_kept |= s->keep;
	}
	if (!broken && any_kept) {
		clock_gettime(CLOCK_MONOTONIC, &committing);
		commit_rc = commit_write(db);
	}
	if (!broken && any_kept && commit_rc == 0) { /* durable: answers may go out */
		if (db->store) {
			struct timespec done;

			clock_gettime(CLOCK_MONOTONIC, &done);
			srv_histogram_observe(&db->store->spend_commit, srv_seconds_between(&committing, &done));
			srv_histogram_observe(&db->store->spend_txn, srv_seconds_between(&began, &done));
		}
		if (rows && plain && batch->rc == SRV_OK && data_version(db, &version)) {
			row_cache_put(rows, batch->ret_ds);
			rows->version = version;
			rows->valid = true;
		} else if (rows) {
			row_cache_clear(rows);
		}
		return;
	}
	if (rows)
		row_cache_clear(rows);
	srv__rollback(db); /* nothing kept, or the transaction failed */
	spend_batch_lost(batch, any_kept, commit_rc);
}

/*
 * The batch in the order its spends will lock their datasets: by dataset
 * id, and in arrival order within one dataset (a stable insertion sort;
 * a batch is at most GROUP_MAX_BATCH).  Spends of different datasets touch
 * different budgets, so any order of them admits the same; but on a
 * shared database each spend locks its dataset's row until the COMMIT,
 * and two servers whose batches took two datasets in opposite orders
 * would each wait for the other until the database failed one of them.
 * With every batch taking its rows in one global order no such cycle can
 * form (the other writers of a dataset row, job claims and dataset
 * updates, lock one row each).
 */
static struct spend_slot *by_dataset(struct spend_slot *batch)
{
	struct spend_slot *sorted = NULL, *next;

	for (struct spend_slot *s = batch; s; s = next) {
		struct spend_slot **at = &sorted;

		next = s->next;
		while (*at && strcmp((*at)->sp->dataset_id, s->sp->dataset_id) <= 0)
			at = &(*at)->next;
		s->next = *at;
		*at = s;
	}
	return sorted;
}

/*
 * Group commit.  A caller queues its spend; if no batch is running it leads:
 * it takes the queue (its own spend and whatever else waits), runs it as one
 * transaction on the store's writer connection (the same one for every
 * batch, whoever leads, so its page cache and statements stay warm), marks
 * every spend done and wakes the others.  A caller that finds a batch
 * running waits, and the next batch takes it.  With one client every batch
 * is that client's spend alone; with many, spends that arrive during one
 * batch's fsync share the next one.  An answer is handed back only after
 * the COMMIT that holds it returned.
 */
int srv_store_spend(srv_db *db, const srv_spend *sp, int *ret_status, char **ret_body,
		    srv_dataset *ret_ds)
{
	srv_store *st = db->store;
	struct spend_slot me = {sp, ret_status, ret_body, ret_ds, SRV_DB_ERROR, false, false, NULL};

	pthread_mutex_lock(&st->group_lock);
	*st->queue_tail = &me;
	st->queue_tail = &me.next;
	while (!me.done) {
		struct spend_slot *batch, *last, *next;
		unsigned n = 1;

		if (st->leading) {
			pthread_cond_wait(&st->group_done, &st->group_lock);
			continue;
		}
		batch = last = st->queue_head;
		while (last->next && n < GROUP_MAX_BATCH) {
			last = last->next;
			n++;
		}
		st->queue_head = last->next;
		if (!st->queue_head)
			st->queue_tail = &st->queue_head;
		last->next = NULL;
		st->leading = true;
		st->batches++;
		st->batched += n;
		pthread_mutex_unlock(&st->group_lock);

		batch = by_dataset(batch);
		st->writer->c->drv->revive(st->writer->c);
		spend_batch(st->writer, batch);
		reset_busy_statements(st->writer);

		pthread_mutex_lock(&st->group_lock);
		st->leading = false;
		for (struct spend_slot *s = batch; s; s = next) {
			next = s->next; /* s may be gone once done is seen */
			s->done = true;
		}
		pthread_cond_broadcast(&st->group_done);
	}
	pthread_mutex_unlock(&st->group_lock);
	/* Kept and still SRV_OK or SRV_CONFLICT: its batch's COMMIT held
	 * (spend_batch_lost replaces the code of a kept spend otherwise). */
	if (me.keep && (me.rc == SRV_OK || me.rc == SRV_CONFLICT))
		thread_commits++;
	return me.rc;
}

void srv_store_group_stats(srv_store *st, uint64_t *ret_batches, uint64_t *ret_spends)
{
	pthread_mutex_lock(&st->group_lock);
	*ret_batches = st->batches;
	*ret_spends = st->batched;
	pthread_mutex_unlock(&st->group_lock);
}

uint64_t srv_store_commit_failures(srv_store *st)
{
	return atomic_load(&st->commit_failures);
}

void srv_store_spend_timings(srv_store *st, const srv_histogram **ret_txn,
			     const srv_histogram **ret_commit)
{
	*ret_txn = &st->spend_txn;
	*ret_commit = &st->spend_commit;
}

#ifdef DPG_TESTING
int srv__spend_batch_for_tests(srv_db *db, const srv_spend *const *sps, size_t n, int *statuses,
			       char **bodies, srv_dataset *dss, int *rcs)
{
	struct spend_slot slots[GROUP_MAX_BATCH];

	if (n == 0 || n > GROUP_MAX_BATCH)
		return -1;
	for (size_t i = 0; i < n; i++) {
		slots[i] = (struct spend_slot){sps[i], &statuses[i], &bodies[i], &dss[i],
					       SRV_DB_ERROR, false, false,
					       i + 1 < n ? &slots[i + 1] : NULL};
		bodies[i] = NULL;
	}
	spend_batch(db, slots);
	for (size_t i = 0; i < n; i++)
		rcs[i] = slots[i].rc;
	return 0;
}
#endif

/* Who holds reservation rid of the dataset: the training job that owns it
 * (ret_job, empty when none) and the key that made it (ret_actor), with its
 * state.  SRV_OK, SRV_NOT_FOUND or SRV_DB_ERROR. */
static int reservation_holder(srv_db *db, const char *dataset_id, const char *rid,
			      char ret_job[64], char ret_state[16],
			      char ret_actor[SRV_ACTOR_BYTES])
{
	srv__stmt *s = stmt(db, ST_RES_HOLDER);
	int rc = SRV_DB_ERROR, step;

	ret_job[0] = '\0';
	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 1, dataset_id);
	srv__sql_bind_text(s, 2, rid);
	step = srv__sql_step(s);
	if (step == SRV__SQL_ROW) {
		copy_text(ret_job, 64, srv__sql_text(s, 0));
		copy_text(ret_state, 16, srv__sql_text(s, 1));
		copy_text(ret_actor, SRV_ACTOR_BYTES, srv__sql_text(s, 2));
		rc = SRV_OK;
	} else if (step == SRV__SQL_DONE) {
		rc = SRV_NOT_FOUND;
	}
	srv__sql_reset(s);
	return rc;
}

/* The write transaction, the named lock `lock_first` (NULL: none) before
 * the dataset's row as every path that takes both does, then dataset id
 * into *ds as it stands under its lock.  SRV_OK, or the failure (a
 * transaction may be left open: the caller's srv__rollback ends it). */
static int begin_with_dataset(srv_db *db, const char *id, const char *lock_first,
			      srv_dataset *ds)
{
	int rc = srv__begin_write(db);

	if (rc == SRV_DB_MOVED)
		return rc;
	if (rc < 0 || (lock_first && srv__lock_named(db, lock_first) != SRV_OK) ||
	    srv__lock_dataset(db, id) != SRV_OK)
		return SRV_DB_ERROR;
	return srv_store_dataset_get(db, id, ds);
}

int srv_store_reservation_close(srv_db *db, const char *dataset_id, const char *rid, bool do_commit,
				const char *actor, bool any_holder, srv_dataset *ret_ds,
				char ret_state[16], char ret_job[64])
{
	srv_dataset ds;
	char now[32], holder[SRV_ACTOR_BYTES];
	int swept = 0, rc;

	srv_now_text(now);
	rc = begin_with_dataset(db, dataset_id, NULL, &ds);
	if (rc != SRV_OK)
		goto out;
	/* Expired ones are committed first, so releasing an expired
	 * reservation reports that it was committed. */
	rc = srv__sweep_expired(db, &ds, now, &swept);
	if (rc != SRV_OK)
		goto out;
	/* In the same transaction as the close: a job and its reservation are
	 * written together when it is submitted. */
	rc = reservation_holder(db, dataset_id, rid, ret_job, ret_state, holder);
	if (rc == SRV_OK && ret_job[0])
		rc = SRV_CONFLICT;
	else if (rc == SRV_OK && !any_holder && strcmp(holder, actor) != 0)
		rc = SRV_FORBIDDEN;
	else if (rc == SRV_OK)
		rc = srv__close_reservation_locked(db, &ds, rid, do_commit, actor, now, ret_state);
	if (rc == SRV_CONFLICT || rc == SRV_FORBIDDEN) {
		/* What the sweep committed stays committed; without it the
		 * refusal changed nothing and writes nothing. */
		if (swept > 0) {
			int committed = srv__commit(db);

			if (committed != SRV_OK)
				rc = committed;
		}
		goto out;
	}
	if (rc != SRV_OK)
		goto out;
	rc = srv__commit(db);
	if (rc != SRV_OK)
		goto out;
	*ret_ds = ds;
out:
	srv__rollback(db);
	return rc;
}

static int reservation_row(srv__stmt *s, void *arg)
{
	struct srv__lister *w = arg;
	srv_reservation_row r = {
		.ledger_seq = srv__sql_int64(s, 0),
		.id = srv__sql_text(s, 1),
		.event = srv__sql_text(s, 2),
		.epsilon = srv__sql_double(s, 3),
		.state = srv__sql_text(s, 4),
		.actor = srv__sql_text(s, 5),
		.note = srv__sql_text(s, 6),
		.created_at = srv__sql_text(s, 7),
		.expires_at = srv__sql_int64(s, 8),
		.closed_at = srv__sql_text(s, 9),
		.closed_by = srv__sql_text(s, 10),
	};

	return w->each.reservation(w->arg, &r) < 0 ? SRV_DB_ERROR : 0;
}

int srv_store_reservation_list(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			       srv_reservation_row_fn each, void *arg, int64_t *ret_next)
{
	struct srv__lister w = {.each.reservation = each, .arg = arg};

	/* Every reservation has one "reserve" row, written in the transaction
	 * that created it; kind = 'reserve' is the condition of the partial
	 * index ledger_reserve_rows (schema/016), so that a page costs its
	 * own rows, not the dataset's charges. */
	return srv__db_page(db,
			    "SELECT l.seq, r.id, r.event, r.epsilon, r.state, r.actor, r.note,"
			    " r.created_at, r.expires_at, r.closed_at, r.closed_by"
			    " FROM ledger l JOIN reservations r ON r.id = l.reservation_id"
			    " WHERE l.dataset_id = ?1 AND l.seq > ?2 AND l.kind = 'reserve'"
			    " ORDER BY l.seq LIMIT ?3",
			    dataset_id, after, limit, reservation_row, &w, ret_next);
}

/*
 * Puts a new budget in force on ds inside the caller's write transaction (a
 * part that is not finite keeps its current value) and appends its "budget"
 * ledger row, which records the budget it replaced.
 */
static int budget_change(srv_db *db, srv_dataset *ds, double budget_epsilon, double budget_delta,
			 const char *actor, const char *now)
{
	double previous_epsilon = ds->budget_epsilon, previous_delta = ds->budget_delta;
	srv__stmt *p;
	acct_filter f;
	int64_t seq;
	bool lowered;

	if (!isfinite(budget_epsilon))
		budget_epsilon = ds->budget_epsilon;
	if (!isfinite(budget_delta))
		budget_delta = ds->budget_delta;
	/* A change that lowers either part is "lowered", even when it raises
	 * the other: what is spent may now exceed the budget, and `dpgate
	 * verify` accepts that only after a "lowered" row. */
	lowered = budget_epsilon < ds->budget_epsilon || budget_delta < ds->budget_delta;
	ds->budget_epsilon = budget_epsilon;
	ds->budget_delta = budget_delta;
	if (srv_dataset_filter(ds, &f, NULL) < 0)
		return SRV_DB_ERROR;
	seq = srv__ledger_insert(db, ds, "budget", NULL, NULL, budget_epsilon, budget_delta, NULL,
				 lowered ? "lowered" : "raised", actor, NULL, now);
	if (seq < 0)
		return SRV_DB_ERROR;
	/* The budget it replaced, so that the ledger alone gives the budget in
	 * force at every row (schema/008). */
	p = srv__prepare(db, "UPDATE ledger SET previous_epsilon = ?2, previous_delta = ?3 WHERE seq = ?1",
			 NULL);
	if (p) {
		srv__sql_bind_int64(p, 1, seq);
		srv__sql_bind_double(p, 2, previous_epsilon);
		srv__sql_bind_double(p, 3, previous_delta);
	}
	return srv__run(p);
}

int srv_store_dataset_update(srv_db *db, const char *id, const char *name, double budget_epsilon,
			     double budget_delta, const char *actor, srv_dataset *ret)
{
	srv_dataset ds;
	srv__stmt *s;
	char now[32];
	bool budget_changed;
	int rc;

	srv_now_text(now);
	rc = begin_with_dataset(db, id, NULL, &ds);
	if (rc != SRV_OK)
		goto out;
	budget_changed = (isfinite(budget_epsilon) && budget_epsilon != ds.budget_epsilon) ||
			 (isfinite(budget_delta) && budget_delta != ds.budget_delta);
	if (ds.archived || (ds.is_public && budget_changed)) {
		rc = SRV_CONFLICT;
		goto out;
	}
	rc = SRV_DB_ERROR;
	if (srv__sweep_expired(db, &ds, now, NULL) != SRV_OK)
		goto out;
	if (name)
		snprintf(ds.name, sizeof(ds.name), "%s", name);
	if (budget_changed &&
	    budget_change(db, &ds, budget_epsilon, budget_delta, actor, now) != SRV_OK)
		goto out;
	s = srv__prepare(db,
			 "UPDATE datasets SET name = ?2, budget_epsilon = ?3, budget_delta = ?4,"
			 " updated_at = ?5 WHERE id = ?1",
			 ds.id);
	if (s) {
		srv__sql_bind_text(s, 2, ds.name);
		srv__sql_bind_double(s, 3, ds.budget_epsilon);
		srv__sql_bind_double(s, 4, ds.budget_delta);
		srv__sql_bind_text(s, 5, now);
	}
	if (srv__run(s) != SRV_OK)
		goto out;
	rc = srv__commit(db);
	if (rc != SRV_OK)
		goto out;
	snprintf(ds.updated_at, sizeof(ds.updated_at), "%s", now);
	*ret = ds;
out:
	srv__rollback(db);
	return rc;
}

int srv_store_dataset_archive(srv_db *db, const char *id, const char *actor, srv_dataset *ret)
{
	srv_dataset ds;
	srv__stmt *s;
	char now[32], link_lock[DPG_MAX_ID_BYTES + 16];
	int rc;

	srv_now_text(now);
	/* The lock a claim holds from before it reads `archived` to its
	 * COMMIT (srv__job_claim): a claim that read the dataset as live
	 * starts its job before this archive commits, and one that comes
	 * after reads it archived and cancels its job, never the job started
	 * after the archive answered. */
	srv__data_link_lock_name(id, link_lock);
	rc = begin_with_dataset(db, id, link_lock, &ds);
	if (rc != SRV_OK)
		goto out;
	rc = SRV_DB_ERROR;
	/* Expired reservations are committed before the dataset freezes. */
	if (srv__sweep_expired(db, &ds, now, NULL) != SRV_OK)
		goto out;
	if (!ds.archived) {
		if (!ds.is_public &&
		    srv__ledger_insert(db, &ds, "archive", NULL, NULL, NAN, NAN, NULL, NULL, actor,
				       NULL, now) < 0)
			goto out;
		s = srv__prepare(db, "UPDATE datasets SET archived = 1, updated_at = ?2 WHERE id = ?1",
				 ds.id);
		if (s)
			srv__sql_bind_text(s, 2, now);
		if (srv__run(s) != SRV_OK)
			goto out;
		ds.archived = true;
		snprintf(ds.updated_at, sizeof(ds.updated_at), "%s", now);
	}
	rc = srv__commit(db);
	if (rc != SRV_OK)
		goto out;
	pricing_forget(db, ds.id);
	*ret = ds;
out:
	srv__rollback(db);
	return rc;
}

/* The columns of a ledger row as the list routes show it, in
 * srv_ledger_row's order. */
#define LEDGER_ROW_COLUMNS \
	"seq, kind, event, epsilon, delta, reservation_id, note, actor, created_at," \
	" idempotency_key, previous_epsilon, previous_delta"

static const char *column_text_or_null(srv__stmt *s, int col)
{
	return srv__sql_is_null(s, col) ? NULL :
							   srv__sql_text(s, col);
}

/* One statement row of LEDGER_ROW_COLUMNS to the lister's callback. */
static int ledger_page_row(srv__stmt *s, void *arg)
{
	struct srv__lister *lp = arg;
	srv_ledger_row r = {
		.seq = srv__sql_int64(s, 0),
		.kind = srv__sql_text(s, 1),
		.event = column_text_or_null(s, 2),
		.has_epsilon = !srv__sql_is_null(s, 3),
		.epsilon = srv__sql_double(s, 3),
		.has_delta = !srv__sql_is_null(s, 4),
		.delta = srv__sql_double(s, 4),
		.reservation_id = column_text_or_null(s, 5),
		.note = column_text_or_null(s, 6),
		.actor = srv__sql_text(s, 7),
		.created_at = srv__sql_text(s, 8),
		.idempotency_key = column_text_or_null(s, 9),
		.has_previous = !srv__sql_is_null(s, 10),
		.previous_epsilon = srv__sql_double(s, 10),
		.previous_delta = srv__sql_double(s, 11),
	};

	return lp->each.ledger(lp->arg, &r);
}

/* Steps s (prepared with limit + 1 rows at most, or NULL) and hands its
 * first `limit` rows to `row`, then finalizes it; *ret_more tells whether
 * a row followed them, *ret_last (when not NULL) gets the last listed
 * row's first column.  SRV_OK or SRV_DB_ERROR. */
static int page_walk(srv__stmt *s, int64_t limit, int (*row)(srv__stmt *s, void *arg),
		     void *row_arg, bool *ret_more, int64_t *ret_last)
{
	int64_t n = 0;
	int rc = SRV__SQL_ERROR;

	*ret_more = false;
	while (s && (rc = srv__sql_step(s)) == SRV__SQL_ROW) {
		if (n++ == limit) {
			*ret_more = true;
			break;
		}
		if (row(s, row_arg) < 0) {
			rc = SRV__SQL_ERROR;
			break;
		}
		if (ret_last)
			*ret_last = srv__sql_int64(s, 0);
	}
	srv__sql_finalize(s);
	return rc == SRV__SQL_DONE || rc == SRV__SQL_ROW ? SRV_OK : SRV_DB_ERROR;
}

int srv__db_page(srv_db *db, const char *sql, const char *text_param, int64_t after,
		 int64_t limit, int (*row)(srv__stmt *s, void *arg), void *row_arg,
		 int64_t *ret_next)
{
	srv__stmt *s = srv__prepare(db, sql, text_param);
	int64_t last = -1;
	bool more;
	int rc;

	if (s) {
		srv__sql_bind_int64(s, 2, after);
		srv__sql_bind_int64(s, 3, limit + 1);
	}
	rc = page_walk(s, limit, row, row_arg, &more, &last);
	*ret_next = rc == SRV_OK && more ? last : -1;
	return rc;
}

int srv__db_page_after(srv_db *db, const char *sql, const char *text_param, const char *after,
		       int64_t limit, int (*row)(srv__stmt *s, void *arg), void *row_arg,
		       bool *ret_more)
{
	srv__stmt *s = srv__prepare_int2(db, sql, text_param, limit + 1);

	if (s && after)
		srv__sql_bind_text(s, 3, after);
	return page_walk(s, limit, row, row_arg, ret_more, NULL);
}

/* One page, in seq order, of the rows of dataset_id's ledger that
 * `which` (an SQL condition) selects, to `each` (see srv__db_page). */
#define LEDGER_PAGE_SQL(which)                                                         \
	"SELECT " LEDGER_ROW_COLUMNS " FROM ledger WHERE dataset_id = ?1 AND seq > ?2" \
	" AND (" which ") ORDER BY seq LIMIT ?3"

static int ledger_page(srv_db *db, const char *sql, const char *dataset_id, int64_t after,
		       int64_t limit, srv_ledger_row_fn each, void *arg, int64_t *ret_next)
{
	struct srv__lister lp = {.each.ledger = each, .arg = arg};

	return srv__db_page(db, sql, dataset_id, after, limit, ledger_page_row, &lp, ret_next);
}

int srv_store_ledger_list(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			  srv_ledger_row_fn each, void *arg, int64_t *ret_next)
{
	return ledger_page(db, LEDGER_PAGE_SQL("kind <> 'create'"), dataset_id, after, limit, each,
			   arg, ret_next);
}

int srv_store_dataset_audit(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			    srv_ledger_row_fn each, void *arg, int64_t *ret_next)
{
	/* The condition of the partial index ledger_admin_rows (schema/008),
	 * so that a page costs its own rows, not the dataset's charges. */
	return ledger_page(db,
			   LEDGER_PAGE_SQL("kind = 'create' OR kind = 'budget' OR kind = 'archive'"),
			   dataset_id, after, limit, each, arg, ret_next);
}

/* Whether two compositions are the same doubles, bit for bit. */
static bool same_cost(const acct_cost *a, const acct_cost *b)
{
	return a->n == b->n && memcmp(a->v, b->v, sizeof(double) * a->n) == 0;
}

/*
 * The budget a dataset was created with, from its 'create' row: *ret_known
 * is false when the row leaves it unknown (synthesized by schema/008 for a
 * dataset whose budget had changed before).  *ret_rows gets how many
 * 'create' rows there are (one, unless the ledger was tampered with).
 */
struct initial_budget {
	double *eps, *delta;
	bool *known;
	int64_t rows;
};

static int initial_budget_row(srv__stmt *s, void *arg)
{
	struct initial_budget *ib = arg;

	if (ib->rows++ == 0 && !srv__sql_is_null(s, 0) &&
	    !srv__sql_is_null(s, 1)) {
		*ib->eps = srv__sql_double(s, 0);
		*ib->delta = srv__sql_double(s, 1);
		*ib->known = true;
	}
	return 0;
}

static int initial_budget(srv_db *db, const char *id, double *ret_eps, double *ret_delta,
			  bool *ret_known, int64_t *ret_rows)
{
	struct initial_budget ib = {ret_eps, ret_delta, ret_known, 0};
	int rc;

	*ret_known = false;
	/* The partial index's condition (schema/008), so that the row is found
	 * without walking the dataset's charges. */
	rc = srv__each_row(srv__prepare(db,
					"SELECT epsilon, delta FROM ledger WHERE dataset_id = ?1"
					" AND (kind = 'create' OR kind = 'budget' OR kind = 'archive')"
					" AND kind = 'create' ORDER BY seq",
					id),
			   initial_budget_row, &ib);
	*ret_rows = ib.rows;
	return rc;
}

/* What replaying one dataset's budget history found. */
struct budget_replay {
	srv_dataset in_force;   /* the dataset with the budget of the current row */
	acct_filter filter;     /* in_force's filter */
	bool known;             /* false until a recorded budget is met */
	bool history_ok;        /* each budget row's previous budget is the one in force */
	int64_t unchecked;      /* admissions before any known budget */
	int64_t first_over;     /* first admission past its budget, or -1 */
	double largest_epsilon, largest_delta;
};

/* Puts budget (eps, delta) in force from here on. */
static int replay_budget(struct budget_replay *br, double eps, double delta)
{
	br->in_force.budget_epsilon = eps;
	br->in_force.budget_delta = delta;
	br->known = true;
	br->largest_epsilon = fmax(br->largest_epsilon, eps);
	br->largest_delta = fmax(br->largest_delta, delta);
	return srv_dataset_filter(&br->in_force, &br->filter, NULL) < 0 ? SRV_DB_ERROR : SRV_OK;
}

/* The totals replaying one dataset's ledger rebuilds, row by row. */
struct ledger_replay {
	acct_filter f;             /* the dataset's filter */
	acct_cost spent, reserved;
	int64_t open, charges;
	int64_t rows, checked;     /* rows read; rows that carry totals */
	int64_t first_bad;         /* first row carrying other totals, or -1 */
	bool lowered;              /* some budget row lowered the budget */
};

/* Replays a "budget" row of the ledger statement s into br. */
static int replay_budget_row(struct budget_replay *br, srv__stmt *s, bool *lowered)
{
	const char *note = srv__sql_text(s, 2);

	*lowered |= note && strcmp(note, "lowered") == 0;
	if (br->known && !srv__sql_is_null(s, 10) &&
	    (srv__sql_double(s, 10) != br->in_force.budget_epsilon ||
	     srv__sql_double(s, 11) != br->in_force.budget_delta))
		br->history_ok = false;
	return replay_budget(br, srv__sql_double(s, 8), srv__sql_double(s, 9));
}

/*
 * Replays a row of kind `kind` (an admission, "charge" or "reserve", or the
 * close of a reservation) with cost c into lr, and checks an admission as
 * the gate made it against the budget br holds in force; seq is the row's.
 */
static void replay_spend(struct ledger_replay *lr, struct budget_replay *br, const char *kind,
			 const acct_cost *c, int64_t seq)
{
	if (strcmp(kind, "charge") == 0 || strcmp(kind, "reserve") == 0) {
		/* The gate's own sum, in its order. */
		acct_cost total = lr->spent;

		acct_cost_add_up(&total, &lr->reserved);
		acct_cost_add_up(&total, c);
		if (!br->known)
			br->unchecked++;
		else if (br->first_over < 0 && !acct_filter_within(&br->filter, &total))
			br->first_over = seq;
	}
	if (strcmp(kind, "charge") == 0) {
		acct_cost_add_up(&lr->spent, c);
		lr->charges++;
	} else if (strcmp(kind, "reserve") == 0) {
		acct_cost_add_up(&lr->reserved, c);
		lr->open++;
	} else {
		if (strcmp(kind, "commit") == 0) {
			acct_cost_add_up(&lr->spent, c);
			lr->charges++;
		}
		acct_cost_sub_up(&lr->reserved, c);
		if (--lr->open <= 0) {
			lr->open = 0;
			acct_filter_zero(&lr->f, &lr->reserved);
		}
	}
}

/* Whether the totals the ledger statement s's row carries are lr's. */
static bool row_totals_match(srv__stmt *s, const struct ledger_replay *lr)
{
	acct_cost carried_spent, carried_reserved;

	return srv_cost_from_text(srv__sql_text(s, 4), &carried_spent) >= 0 &&
	       srv_cost_from_text(srv__sql_text(s, 5), &carried_reserved) >= 0 &&
	       same_cost(&carried_spent, &lr->spent) && same_cost(&carried_reserved, &lr->reserved) &&
	       srv__sql_int64(s, 6) == lr->open && srv__sql_int64(s, 7) == lr->charges;
}

/*
 * Replays the ledger of dataset id, in order, into lr (which starts from
 * zero totals) and br, and checks each row's carried totals against lr.
 */
struct replay {
	struct ledger_replay *lr;
	struct budget_replay *br;
};

/* Replays one row of the ledger statement s; SRV_DB_ERROR when it does
 * not parse. */
static int replay_row(srv__stmt *s, void *arg)
{
	struct ledger_replay *lr = ((struct replay *)arg)->lr;
	struct budget_replay *br = ((struct replay *)arg)->br;
	const char *kind = srv__sql_text(s, 0);
	acct_cost c;

	lr->rows++;
	if (strcmp(kind, "budget") == 0) {
		if (replay_budget_row(br, s, &lr->lowered) != SRV_OK)
			return SRV_DB_ERROR;
	} else if (strcmp(kind, "archive") != 0 && strcmp(kind, "create") != 0) {
		if (srv_cost_from_text(srv__sql_text(s, 1), &c) < 0)
			return SRV_DB_ERROR;
		replay_spend(lr, br, kind, &c, srv__sql_int64(s, 3));
	}
	if (srv__sql_is_null(s, 4))
		return 0;
	lr->checked++;
	if (lr->first_bad < 0 && !row_totals_match(s, lr))
		lr->first_bad = srv__sql_int64(s, 3);
	return 0;
}

static int replay_ledger(srv_db *db, const char *id, struct ledger_replay *lr,
			 struct budget_replay *br)
{
	struct replay r = {lr, br};

	return srv__each_row(srv__prepare(db,
					  "SELECT kind, cost, note, seq, spent, reserved,"
					  " open_reservations, charges, epsilon, delta,"
					  " previous_epsilon, previous_delta"
					  " FROM ledger WHERE dataset_id = ?1 ORDER BY seq",
					  id),
			     replay_row, &r);
}

/*
 * Replays one dataset's ledger into fresh totals (see srv_store_verify), and
 * checks the totals each row carries (schema/006: every row written since;
 * before it, only each dataset's last) against the replay up to that row.
 * Replays its budget history beside them (schema/008) and checks each
 * admission as the gate made it (spend_in_txn): spent plus reserved before
 * the row, plus the row's cost, within the budget in force at that row.
 */
static int verify_dataset(srv_db *db, const srv_dataset *ds, srv_verify_dataset *v)
{
	struct budget_replay br = {.in_force = *ds, .history_ok = true, .first_over = -1};
	struct ledger_replay lr = {.first_bad = -1};
	int64_t creations = 0;
	bool ok, budget_matches;
	double eps0 = NAN, delta0 = NAN;
	acct_cost total;

	memset(v, 0, sizeof(*v));
	if (srv_dataset_filter(ds, &lr.f, NULL) < 0 ||
	    initial_budget(db, ds->id, &eps0, &delta0, &br.known, &creations) != SRV_OK ||
	    (br.known && replay_budget(&br, eps0, delta0) != SRV_OK))
		return SRV_DB_ERROR;
	acct_filter_zero(&lr.f, &lr.spent);
	acct_filter_zero(&lr.f, &lr.reserved);
	if (replay_ledger(db, ds->id, &lr, &br) != SRV_OK)
		return SRV_DB_ERROR;
	total = lr.spent;
	acct_cost_add_up(&total, &lr.reserved);
	ok = lr.first_bad < 0 && same_cost(&lr.spent, &ds->spent) &&
	     same_cost(&lr.reserved, &ds->reserved) && lr.open == ds->open_reservations &&
	     lr.charges == ds->charges;
	/* The replayed budget must be the one the dataset holds: a budget
	 * changed without its ledger row is not one the history explains. */
	budget_matches = !br.known || (br.in_force.budget_epsilon == ds->budget_epsilon &&
				       br.in_force.budget_delta == ds->budget_delta);
	srv_strcopy(v->id, sizeof(v->id), ds->id);
	v->rows = lr.rows;
	v->rows_with_totals = lr.checked;
	v->totals_match = ok;
	v->within_budget = acct_filter_within(&lr.f, &total);
	v->spent_epsilon = acct_filter_epsilon(&lr.f, &lr.spent);
	v->stored_spent_epsilon = acct_filter_epsilon(&lr.f, &ds->spent);
	v->admissions_within_budget = br.first_over < 0;
	v->budget_history_matches = br.history_ok && budget_matches && creations == 1;
	v->admissions_before_a_known_budget = br.unchecked;
	v->first_row_with_wrong_totals = lr.first_bad;
	v->first_row_over_budget = br.first_over;
	/* Recorded budgets only: with an unknown initial budget, at least. */
	v->budget_known = br.known;
	v->largest_epsilon = br.largest_epsilon;
	v->largest_delta = br.largest_delta;
	if (br.first_over >= 0 || !br.history_ok || !budget_matches || creations != 1)
		ok = false;
	/* Admissions no recorded budget covers: only the end state can be
	 * checked, and a lowered budget explains an excess there. */
	if (br.unchecked > 0 && !acct_filter_within(&lr.f, &total) && !lr.lowered)
		ok = false;
	/* A public dataset's history is right when it has none. */
	if (ds->is_public) {
		v->budget_history_matches = creations == 0;
		ok = lr.rows == 0 && creations == 0;
	}
	v->ok = ok;
	return SRV_OK;
}

struct verify_arg {
	srv_db *db;
	srv_verify_fn each;
	void *arg;
	bool all_ok;
	bool failed;
};

static void verify_each(void *arg, const srv_dataset *ds)
{
	struct verify_arg *va = arg;
	srv_verify_dataset v;

	if (verify_dataset(va->db, ds, &v) != SRV_OK) {
		va->failed = true;
		va->all_ok = false;
		return;
	}
	va->each(va->arg, &v);
	if (!v.ok)
		va->all_ok = false;
}

int srv__verify_in_txn(srv_db *db, srv_verify_fn each, void *arg)
{
	struct verify_arg va = {.db = db, .each = each, .arg = arg, .all_ok = true};
	int rc = srv_store_dataset_list(db, NULL, verify_each, &va);

	if (rc != SRV_OK || va.failed)
		return SRV_DB_ERROR;
	return va.all_ok ? SRV_OK : SRV_CONFLICT;
}

int srv_store_verify(srv_db *db, srv_verify_fn each, void *arg)
{
	int rc;

	/* A read transaction gives one consistent snapshot of rows and totals. */
	srv__db_begin_read(db);
	rc = srv__verify_in_txn(db, each, arg);
	srv__db_end_read(db);
	return rc;
}

int srv_store_backup(const char *db_path, const char *out_path, int64_t *ret_version,
		     bool *ret_current, srv_error *err)
{
	srv__conn *c = NULL;
	const char *path = sqlite_path(db_path);
	enum schema_state state;
	int64_t version;
	int rc = -1;

	if (srv__pg_is_url(db_path)) {
		srv_error_set(err, SRV_DB_ERROR,
			      "backup copies an SQLite file; a PostgreSQL database is copied by "
			      "pg_dump (pg_dump --format=custom --file=FILE URL), or by the "
			      "cluster's own base backups and WAL archive");
		return -1;
	}
	/* Read-only, so the source is never written, and without query_only,
	 * which would refuse the write VACUUM INTO makes to the copy. */
	c = inspect_file(path, true, &state, &version, err);
	if (!c)
		goto out;
	if (state == SCHEMA_EMPTY) {
		srv_error_set(err, SRV_NOT_DPGATE, "%s is not a dpgate database (it has no tables)",
			 path);
		goto out;
	}
	if (state == SCHEMA_FOREIGN) {
		schema_refusal(state, path, version, err);
		goto out;
	}
	if (srv__sqlite_vacuum_into(c, path, out_path, err) < 0)
		goto out;
	srv__sql_close(c);
	/* What the copy holds (a migration may have run between the look at
	 * the source and the copy's snapshot). */
	c = inspect_file(out_path, false, &state, &version, err);
	if (!c)
		goto out;
	*ret_version = version;
	*ret_current = state == SCHEMA_CURRENT;
	rc = 0;
out:
	srv__sql_close(c);
	return rc;
}

/* ---- JSON views of a dataset --------------------------------------------- */

int srv_dataset_epsilons(const srv_dataset *ds, const acct_cost *extra, srv_epsilons *ret)
{
	acct_filter f;
	acct_cost total = ds->spent;

	if (srv_dataset_filter(ds, &f, NULL) < 0)
		return -1;
	acct_cost_add_up(&total, &ds->reserved);
	if (extra)
		acct_cost_add_up(&total, extra);
	ret->spent = acct_filter_epsilon(&f, &ds->spent);
	ret->committed = acct_filter_epsilon(&f, &total);
	ret->within = acct_filter_within(&f, &total);
	ret->remaining = ds->budget_epsilon - ret->committed;
	if (!(ret->remaining > 0.0) || !ret->within)
		ret->remaining = 0.0;
	return 0;
}

/* ---- keys table access used by http_auth.c -------------------------------- */

void srv_store_init_process(void)
{
	srv__sqlite_init_process();
}

srv__stmt *srv__prepare(srv_db *db, const char *sql, const char *text1)
{
	srv__stmt *s = srv__sql_prepare(db->c, sql);

	if (s && text1)
		srv__sql_bind_text(s, 1, text1);
	return s;
}

srv__stmt *srv__prepare_text2(srv_db *db, const char *sql, const char *text1, const char *text2)
{
	srv__stmt *s = srv__prepare(db, sql, text1);

	if (s)
		srv__sql_bind_text(s, 2, text2);
	return s;
}

srv__stmt *srv__prepare_int2(srv_db *db, const char *sql, const char *text1, int64_t int2)
{
	srv__stmt *s = srv__prepare(db, sql, text1);

	if (s)
		srv__sql_bind_int64(s, 2, int2);
	return s;
}

int srv__run(srv__stmt *s)
{
	int rc = s && srv__sql_step(s) == SRV__SQL_DONE ? SRV_OK : SRV_DB_ERROR;

	srv__sql_finalize(s);
	return rc;
}

int srv__first_row(srv__stmt *s)
{
	switch (s ? srv__sql_step(s) : SRV__SQL_ERROR) {
	case SRV__SQL_ROW: return SRV_OK;
	case SRV__SQL_DONE: return SRV_NOT_FOUND;
	default: return SRV_DB_ERROR;
	}
}

int srv__each_row(srv__stmt *s, int (*row)(srv__stmt *s, void *arg), void *arg)
{
	int rc = SRV_DB_ERROR, step = SRV__SQL_ERROR;

	while (s && (step = srv__sql_step(s)) == SRV__SQL_ROW) {
		rc = row(s, arg);
		if (rc < 0)
			goto out;
	}
	rc = step == SRV__SQL_DONE ? SRV_OK : SRV_DB_ERROR;
out:
	srv__sql_finalize(s);
	return rc;
}
