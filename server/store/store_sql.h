/*
 * store_sql.h: the statement interface the store files are written
 * against, and the operations a database driver supplies for it.
 *
 * Why a seam of our own rather than a generic database library: the store
 * needs little (prepared statements with ?N placeholders, typed binds and
 * columns, one write transaction at a time, savepoints) and a few things
 * no such library names the same way on every engine (taking the write
 * lock, what a data version is, which error is worth a retry).  Each of
 * those is one operation here, and a driver (store_sqlite.c) supplies it;
 * the SQL itself is written once, in the dialect both engines accept.
 *
 * A statement is prepared on one connection and used by one thread at a
 * time, like the connection.  Text and blobs bound to a statement are not
 * copied: they must stay as they are until the statement is reset or
 * finalized.  A column's text or blob is valid until the next step, reset
 * or finalize of its statement.
 */
#ifndef DPGATE_SRV_STORE_SQL_H
#define DPGATE_SRV_STORE_SQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

struct srv_embedded_file;

/*
 * What a step and the other operations answer.  The failure classes are
 * what a caller can act on: BUSY (the lock was not had in time, or the
 * engine chose this transaction to fail so that another may go on: worth
 * a retry), CONSTRAINT (a row with that key exists already),
 * UNAVAILABLE (the connection to the database is lost), ERROR (anything
 * else).
 */
enum srv__sql_rc {
	SRV__SQL_DONE = 0,
	SRV__SQL_ROW = 1,
	SRV__SQL_BUSY = -1,
	SRV__SQL_CONSTRAINT = -2,
	SRV__SQL_UNAVAILABLE = -3,
	SRV__SQL_ERROR = -4,
};

/* Statements a connection keeps prepared for its lifetime (srv__sql_cached). */
#define SRV__SQL_CACHED_STMTS 64

typedef struct srv__conn srv__conn;
typedef struct srv__stmt srv__stmt;

/* The operations of one database engine; every member is set but those
 * whose comment says they may be NULL. */
struct srv__sql_driver {
	const char *name;
	/* A statement of `sql`; `keep` says it will be reused many times (the
	 * engine may plan it once for all).  NULL when it cannot be prepared. */
	srv__stmt *(*prepare)(srv__conn *c, const char *sql, bool keep);
	void (*finalize)(srv__stmt *s);
	/* Ready to run again, with no parameter bound. */
	void (*reset)(srv__stmt *s);
	void (*bind_int64)(srv__stmt *s, int i, int64_t v);
	void (*bind_double)(srv__stmt *s, int i, double v);
	void (*bind_text)(srv__stmt *s, int i, const char *v);
	void (*bind_blob)(srv__stmt *s, int i, const void *v, size_t n);
	/* SRV__SQL_ROW, SRV__SQL_DONE or a failure class. */
	int (*step)(srv__stmt *s);
	bool (*column_is_null)(srv__stmt *s, int col);
	int64_t (*column_int64)(srv__stmt *s, int col);
	double (*column_double)(srv__stmt *s, int col);
	/* NULL for SQL NULL. */
	const char *(*column_text)(srv__stmt *s, int col);
	const void *(*column_blob)(srv__stmt *s, int col);
	size_t (*column_bytes)(srv__stmt *s, int col);
	/* Rows changed by the last INSERT, UPDATE or DELETE run to its end. */
	int64_t (*changes)(srv__conn *c);
	/* Runs SQL text without parameters (one or more statements). */
	int (*exec)(srv__conn *c, const char *sql);
	/* Runs one statement without parameters whose only outcome is success
	 * or failure (a SAVEPOINT).  An engine may instead send it with the
	 * next statement, as it may the BEGIN of begin_write and begin_read
	 * and the locks of lock_dataset and lock_named: its failure is then
	 * the answer of that statement, or of commit. */
	int (*run_later)(srv__conn *c, const char *sql);
	/* Starts the write transaction: under SQLite BEGIN IMMEDIATE, which
	 * holds the database's one write lock until COMMIT or ROLLBACK. */
	int (*begin_write)(srv__conn *c);
	/* Starts a read-only transaction: one snapshot for what follows. */
	int (*begin_read)(srv__conn *c);
	int (*commit)(srv__conn *c);
	int (*rollback)(srv__conn *c);
	bool (*in_transaction)(srv__conn *c);
	/* Inside the write transaction, before a dataset's totals are read:
	 * makes sure no other writer changes them until COMMIT.  A no-op
	 * where begin_write took a lock on the whole database.  Where other
	 * servers share the database, it also tells them, at COMMIT (and not
	 * if the transaction rolls back), that the dataset changed: every
	 * write of a dataset takes this lock (srv_store_listen_start). */
	int (*lock_dataset)(srv__conn *c, const char *dataset_id);
	/* What a SELECT of a queue's next row ends with, inside the write
	 * transaction, so that two connections never take one row and neither
	 * waits for the other: under PostgreSQL " FOR UPDATE SKIP LOCKED";
	 * "" where begin_write took a lock on the whole database. */
	const char *skip_locked;
	/* The FROM clause's tail that joins each dataset d to its last ledger
	 * row l (none: every column of l NULL), in the form this engine's
	 * planner turns into one descent of ledger_by_dataset per dataset
	 * whatever it believes the ledger's size to be (store_db.c,
	 * DATASET_COLUMNS). */
	const char *last_ledger_row;
	/* The same for a set of rows that no single row stands for (the
	 * admin keys, counted before one is revoked), named by `what`. */
	int (*lock_named)(srv__conn *c, const char *what);
	/* A number that changes whenever anything but this connection's own
	 * COMMITs changed the database since it was last read (read inside
	 * the write transaction); false when the engine has none, and then
	 * nothing read before may be assumed current. */
	bool (*data_version)(srv__conn *c, unsigned *ret);
	/* The key of the row c's last INSERT added, read right after that
	 * INSERT ran to its end, where the table's INTEGER PRIMARY KEY is
	 * the engine's own row key (SQLite's rowid).  May be NULL: then an
	 * INSERT reads its key through RETURNING.  Why not RETURNING on
	 * every engine: SQLite runs it as a trigger that fills a temporary
	 * table, with a statement journal for the trigger, and allocates and
	 * frees buffers of tens of KiB for them on each run (glibc may give
	 * those pages back to the kernel and fault them in again): a charge
	 * cost some 15 % more CPU than with a plain INSERT. */
	int64_t (*last_insert_key)(srv__conn *c);
	/* Resets every statement of c still stepping; how many were. */
	int (*reset_open)(srv__conn *c);
	/* Whether the database has a schema_migrations table, and how many
	 * objects (tables, indexes, triggers, ...) it has; 0 or -1. */
	int (*schema_objects)(srv__conn *c, int64_t *ret_has_migrations, int64_t *ret_objects);
	/* Called with true before the migrations' transaction and with false
	 * after it: under SQLite, foreign keys are off meanwhile, so that a
	 * migration may rebuild a table that others reference.  0 or -1. */
	int (*migrate_around)(srv__conn *c, bool before);
	/* First thing inside the migrations' write transaction: what makes
	 * servers that start at once migrate one after the other.  A no-op
	 * where begin_write took a lock on the whole database. */
	int (*migrate_lock)(srv__conn *c);
	/* Last thing before the migrations' COMMIT: 0, or -1 with what the
	 * migrations left wrong in err. */
	int (*migrate_check)(srv__conn *c, srv_error *err);
	/* At a clean close of the store's last writer, and when the file
	 * wal_path names is lost: copies into the database what the engine
	 * keeps beside it while it runs, and with `give_back` gives that space
	 * back; without, leaves it as it is (another process uses it).  0 when
	 * every frame was copied, -1 otherwise (why: errmsg). */
	int (*checkpoint)(srv__conn *c, bool give_back);
	/* The file beside the database that commits go to first, as the
	 * engine names it (SQLite's WAL).  May be NULL: there is none. */
	const char *(*wal_path)(srv__conn *c);
	/* Where wal_path is not NULL: c's close neither copies the WAL into
	 * the database nor removes it, so that the next open reads all of it
	 * again (its index, the -shm file beside it, is lost). */
	void (*keep_wal)(srv__conn *c);
	/* Before a connection is handed out: one whose link to the database
	 * was lost is made again (0), or still cannot be (-1). */
	int (*revive)(srv__conn *c);
	/* The engine's numbered migrations (embedded "NNN_name.sql" files;
	 * other files in the list are skipped), in the order they apply. */
	const struct srv_embedded_file *migrations;
	const size_t *migration_count;
	/* The engine's message and code for the last failure on c. */
	const char *(*errmsg)(srv__conn *c);
	int (*errcode)(srv__conn *c);
	void (*close)(srv__conn *c);
};

/* What every driver's connection and statement start with. */
struct srv__conn {
	const struct srv__sql_driver *drv;
	const char *cached_sql[SRV__SQL_CACHED_STMTS];
	srv__stmt *cached[SRV__SQL_CACHED_STMTS];
};

struct srv__stmt {
	const struct srv__sql_driver *drv;
};

/*
 * A statement kept for the connection's lifetime, keyed by the address of
 * its SQL (pass a string literal or static array), reset and with no
 * parameter bound.  The caller resets it after use and never finalizes it.
 * NULL when it cannot be prepared or the cache is full.
 */
srv__stmt *srv__sql_cached(srv__conn *c, const char *sql);

/* Finalizes c's cached statements and closes c; accepts NULL. */
void srv__sql_close(srv__conn *c);

/* Runs a cached statement of transaction control (BEGIN, SAVEPOINT, ...)
 * once: SRV__SQL_DONE or a failure class. */
int srv__sql_step_once(srv__conn *c, const char *sql);

static inline srv__stmt *srv__sql_prepare(srv__conn *c, const char *sql)
{
	return c->drv->prepare(c, sql, false);
}

/* Finalizes a statement of srv__sql_prepare; accepts NULL. */
static inline void srv__sql_finalize(srv__stmt *s)
{
	if (s)
		s->drv->finalize(s);
}

static inline void srv__sql_reset(srv__stmt *s)
{
	s->drv->reset(s);
}

static inline void srv__sql_bind_int64(srv__stmt *s, int i, int64_t v)
{
	s->drv->bind_int64(s, i, v);
}

static inline void srv__sql_bind_double(srv__stmt *s, int i, double v)
{
	s->drv->bind_double(s, i, v);
}

/* Binds text, or leaves the parameter NULL when v is NULL. */
static inline void srv__sql_bind_text(srv__stmt *s, int i, const char *v)
{
	if (v)
		s->drv->bind_text(s, i, v);
}

static inline void srv__sql_bind_blob(srv__stmt *s, int i, const void *v, size_t n)
{
	s->drv->bind_blob(s, i, v, n);
}

static inline int srv__sql_step(srv__stmt *s)
{
	return s->drv->step(s);
}

static inline bool srv__sql_is_null(srv__stmt *s, int col)
{
	return s->drv->column_is_null(s, col);
}

static inline int64_t srv__sql_int64(srv__stmt *s, int col)
{
	return s->drv->column_int64(s, col);
}

static inline double srv__sql_double(srv__stmt *s, int col)
{
	return s->drv->column_double(s, col);
}

static inline const char *srv__sql_text(srv__stmt *s, int col)
{
	return s->drv->column_text(s, col);
}

static inline const void *srv__sql_blob(srv__stmt *s, int col)
{
	return s->drv->column_blob(s, col);
}

static inline size_t srv__sql_bytes(srv__stmt *s, int col)
{
	return s->drv->column_bytes(s, col);
}

static inline int64_t srv__sql_changes(srv__conn *c)
{
	return c->drv->changes(c);
}

static inline int srv__sql_exec(srv__conn *c, const char *sql)
{
	return c->drv->exec(c, sql);
}

#endif
