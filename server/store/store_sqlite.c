/*
 * store_sqlite.c: the SQLite driver of the store's statement interface
 * (store_sql.h), and what only SQLite has: opening and configuring a
 * database file, its WAL, its copy by VACUUM INTO.  With store_sqlite.h,
 * the only place of the store that includes sqlite3.h.
 *
 * Durability: WAL mode with synchronous=FULL, so a COMMIT that returned has
 * been fsync'ed to the WAL and survives kill -9 and power loss of the OS.
 * The write transaction is BEGIN IMMEDIATE: it takes the database's one
 * write lock, so a dataset's totals read inside it cannot change under the
 * reader, and lock_dataset has nothing left to do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "srv_embedded.h"
#include "store_sqlite.h"

#define BUSY_TIMEOUT_MS 30000
#define PAGE_SIZE_TEXT "1024"
/* PRAGMA wal_autocheckpoint: frames in the WAL after which a commit checkpoints. */
#define WAL_AUTOCHECKPOINT_FRAMES 4000
/* Frames the WAL is written out to past the checkpoint mark: a group commit's. */
#define WAL_PREALLOC_EXTRA_FRAMES 512
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x) /* a macro's value as a string literal */

struct sqlite_conn {
	struct srv__conn base;
	sqlite3 *h;
};

struct sqlite_stmt {
	struct srv__stmt base;
	sqlite3_stmt *s;
	struct sqlite_conn *c;
};

static const struct srv__sql_driver sqlite_driver;

static sqlite3 *handle(srv__conn *c)
{
	return ((struct sqlite_conn *)c)->h;
}

static sqlite3_stmt *raw(srv__stmt *s)
{
	return ((struct sqlite_stmt *)s)->s;
}

sqlite3 *srv__sqlite_handle(srv__conn *c)
{
	return c && c->drv == &sqlite_driver ? handle(c) : NULL;
}

bool srv__sqlite_not_a_database(srv__conn *c)
{
	sqlite3 *h = srv__sqlite_handle(c);

	return h && (sqlite3_errcode(h) & 0xff) == SQLITE_NOTADB;
}

int srv__sqlite_file_header(const char *path)
{
	static const char header[16] = "SQLite format 3"; /* and its NUL */
	char got[sizeof(header)];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, got, sizeof(got));
	close(fd);
	if (n < 0)
		return -1;
	return n == (ssize_t)sizeof(got) && memcmp(got, header, sizeof(got)) == 0;
}

/* An SQLite result code as a failure class of store_sql.h.  Only a
 * duplicate key is CONSTRAINT: a CHECK or foreign key refusing a row is a
 * fault of the writer, not a row that exists already. */
static int rc_class(int rc)
{
	switch (rc) {
	case SQLITE_ROW: return SRV__SQL_ROW;
	case SQLITE_OK:
	case SQLITE_DONE: return SRV__SQL_DONE;
	case SQLITE_CONSTRAINT_PRIMARYKEY:
	case SQLITE_CONSTRAINT_UNIQUE: return SRV__SQL_CONSTRAINT;
	default: break;
	}
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED: return SRV__SQL_BUSY;
	default: return SRV__SQL_ERROR;
	}
}

static srv__stmt *sq_prepare(srv__conn *c, const char *sql, bool keep)
{
	struct sqlite_stmt *st = malloc(sizeof(*st));

	if (!st)
		return NULL;
	st->base.drv = &sqlite_driver;
	st->c = (struct sqlite_conn *)c;
	st->s = NULL;
	if (sqlite3_prepare_v3(handle(c), sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0, &st->s,
			       NULL) != SQLITE_OK || !st->s) {
		sqlite3_finalize(st->s);
		free(st);
		return NULL;
	}
	return &st->base;
}

static void sq_finalize(srv__stmt *s)
{
	sqlite3_finalize(raw(s));
	free(s);
}

static void sq_reset(srv__stmt *s)
{
	sqlite3_reset(raw(s));
	sqlite3_clear_bindings(raw(s));
}

static void sq_bind_int64(srv__stmt *s, int i, int64_t v)
{
	sqlite3_bind_int64(raw(s), i, v);
}

static void sq_bind_double(srv__stmt *s, int i, double v)
{
	sqlite3_bind_double(raw(s), i, v);
}

static void sq_bind_text(srv__stmt *s, int i, const char *v)
{
	sqlite3_bind_text(raw(s), i, v, -1, SQLITE_STATIC);
}

static void sq_bind_blob(srv__stmt *s, int i, const void *v, size_t n)
{
	sqlite3_bind_blob64(raw(s), i, v, n, SQLITE_STATIC);
}

static int sq_step(srv__stmt *s)
{
	return rc_class(sqlite3_step(raw(s)));
}

static bool sq_is_null(srv__stmt *s, int col)
{
	return sqlite3_column_type(raw(s), col) == SQLITE_NULL;
}

static int64_t sq_int64(srv__stmt *s, int col)
{
	return sqlite3_column_int64(raw(s), col);
}

static double sq_double(srv__stmt *s, int col)
{
	return sqlite3_column_double(raw(s), col);
}

static const char *sq_text(srv__stmt *s, int col)
{
	return (const char *)sqlite3_column_text(raw(s), col);
}

static const void *sq_blob(srv__stmt *s, int col)
{
	return sqlite3_column_blob(raw(s), col);
}

static size_t sq_bytes(srv__stmt *s, int col)
{
	return (size_t)sqlite3_column_bytes(raw(s), col);
}

static int64_t sq_changes(srv__conn *c)
{
	return sqlite3_changes64(handle(c));
}

static int sq_exec(srv__conn *c, const char *sql)
{
	return rc_class(sqlite3_exec(handle(c), sql, NULL, NULL, NULL));
}

/* Transaction control, each a statement kept prepared (srv__sql_step_once). */
static const char sql_begin[] = "BEGIN IMMEDIATE";
static const char sql_begin_read[] = "BEGIN";
static const char sql_commit[] = "COMMIT";
static const char sql_rollback[] = "ROLLBACK";

/* The busy handler waits up to BUSY_TIMEOUT_MS for the write lock. */
static int sq_begin_write(srv__conn *c)
{
	return srv__sql_step_once(c, sql_begin);
}

static int sq_begin_read(srv__conn *c)
{
	return srv__sql_step_once(c, sql_begin_read);
}

static int sq_commit(srv__conn *c)
{
	return srv__sql_step_once(c, sql_commit);
}

static int sq_rollback(srv__conn *c)
{
	return srv__sql_step_once(c, sql_rollback);
}

static bool sq_in_transaction(srv__conn *c)
{
	return !sqlite3_get_autocommit(handle(c));
}

static int sq_lock_dataset(srv__conn *c, const char *dataset_id)
{
	(void)c;
	(void)dataset_id;
	return SRV__SQL_DONE; /* BEGIN IMMEDIATE holds the database's write lock */
}

static int sq_lock_named(srv__conn *c, const char *what)
{
	(void)c;
	(void)what;
	return SRV__SQL_DONE; /* as sq_lock_dataset */
}

/*
 * SQLITE_FCNTL_DATA_VERSION: SQLite changes it at every commit of this
 * connection's own and, when a read transaction starts, whenever any other
 * connection or process changed the file since (pager_reset and
 * CommitPhaseTwo in pager.c).
 */
static bool sq_data_version(srv__conn *c, unsigned *ret)
{
	return sqlite3_file_control(handle(c), "main", SQLITE_FCNTL_DATA_VERSION, ret) == SQLITE_OK;
}

static int64_t sq_last_insert_key(srv__conn *c)
{
	return sqlite3_last_insert_rowid(handle(c));
}

/*
 * A statement left mid-result keeps a read transaction open, and a write on
 * that connection would then fail at once with SQLITE_BUSY_SNAPSHOT instead
 * of waiting.  Each is a bug in its caller, reported once.
 */
static int sq_reset_open(srv__conn *c)
{
	sqlite3 *h = handle(c);
	int n = 0;

	for (sqlite3_stmt *s = sqlite3_next_stmt(h, NULL); s; s = sqlite3_next_stmt(h, s)) {
		if (sqlite3_stmt_busy(s)) {
			if (n == 0)
				fprintf(stderr, "{\"level\":\"warn\",\"msg\":\"statement left open\",\"sql\":\"%.80s\"}\n",
					sqlite3_sql(s));
			sqlite3_reset(s);
			n++;
		}
	}
	return n;
}

static const char *sq_errmsg(srv__conn *c)
{
	return sqlite3_errmsg(handle(c));
}

static int sq_errcode(srv__conn *c)
{
	return sqlite3_extended_errcode(handle(c));
}

static void sq_close(srv__conn *c)
{
	sqlite3_close_v2(handle(c));
	free(c);
}


/* The first column of a one-row integer query, or -1 when it fails. */
static int64_t query_int(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static int exec_sql(sqlite3 *h, const char *sql)
{
	return sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/*
 * The WAL's working size in bytes: its 32-byte header, then frames (a 24-byte
 * header and one page each) for one checkpoint interval and a group commit
 * past it.  serve writes the file out to this size at start, and every
 * connection keeps it to this size (PRAGMA journal_size_limit) once it has
 * outgrown it; see srv__sqlite_preallocate_wal.
 */
static int64_t wal_working_bytes(int64_t page_size)
{
	return 32 + (int64_t)(WAL_AUTOCHECKPOINT_FRAMES + WAL_PREALLOC_EXTRA_FRAMES) * (page_size + 24);
}

/* The settings of a connection that writes (see the file's comment). */
static int configure_writer(sqlite3 *h, const char *path, srv_error *err)
{
	char limit_sql[64];
	int64_t page_size;

	/* Set before anything else so a new database gets it (no-op after):
	 * each charge writes two small rows (the ledger row, carrying the
	 * running totals, and its index entry), and smaller pages mean fewer
	 * bytes fsync'ed per commit. */
	if (exec_sql(h, "PRAGMA page_size = " PAGE_SIZE_TEXT) < 0 ||
	    exec_sql(h, "PRAGMA journal_mode = WAL") < 0 ||
	    exec_sql(h, "PRAGMA synchronous = FULL") < 0 ||
	    /* No memory-mapped reads: with a mapping, SQLite looks every page
	     * up in the WAL index on every fetch, even a cached one, and the
	     * running-totals page has a long chain there (one frame per
	     * charge since the last checkpoint).  The page cache serves them. */
	    exec_sql(h, "PRAGMA mmap_size = 0") < 0 ||
	    /* Checkpoint inside a commit every 4000 frames rather than 1000:
	     * the running-totals and index pages a checkpoint copies are the
	     * same few pages, so rarer checkpoints copy far fewer per charge. */
	    exec_sql(h, "PRAGMA wal_autocheckpoint = " TEXT_OF(WAL_AUTOCHECKPOINT_FRAMES)) < 0 ||
	    exec_sql(h, "PRAGMA foreign_keys = ON") < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot configure %s: %s", path, sqlite3_errmsg(h));
		return -1;
	}
	/* A reader that holds a snapshot for long (a backup, a big ledger page)
	 * keeps checkpoints from finishing, and the WAL grows past its working
	 * size meanwhile.  With this limit, the first commit after SQLite starts
	 * the WAL over from its first frame cuts the file back to the working
	 * size (never below the frames that commit wrote), so what serve wrote
	 * out at start is kept and the excess is given back. */
	page_size = query_int(h, "PRAGMA page_size");
	if (page_size <= 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot read the page size of %s: %s", path,
			      sqlite3_errmsg(h));
		return -1;
	}
	snprintf(limit_sql, sizeof(limit_sql), "PRAGMA journal_size_limit = %lld",
		 (long long)wal_working_bytes(page_size));
	if (exec_sql(h, limit_sql) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot configure %s: %s", path, sqlite3_errmsg(h));
		return -1;
	}
	return 0;
}

/* srv__sqlite_open of the file at path, handed to SQLite as `name` (the
 * path, or a file: URI when uri is set); messages name path. */
static srv__conn *sqlite_open_named(const char *path, const char *name, bool uri,
				    enum srv__sqlite_mode mode, srv_error *err)
{
	struct sqlite_conn *c = calloc(1, sizeof(*c));
	int flags = SQLITE_OPEN_NOMUTEX | (uri ? SQLITE_OPEN_URI : 0);

	if (!c) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return NULL;
	}
	c->base.drv = &sqlite_driver;
	if (mode == SRV__SQLITE_WRITE) {
		/* A new database is created 0600 (its -wal and -shm files take
		 * its mode): it holds the ledger and the key hashes, as a backup
		 * does. */
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		if (fd >= 0)
			close(fd);
		flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	} else {
		flags |= SQLITE_OPEN_READONLY; /* a missing file stays missing */
	}
	if (sqlite3_open_v2(name, &c->h, flags, NULL) != SQLITE_OK) {
		srv_error_set(err, SRV_DB_ERROR, "cannot open %s: %s", path,
			      c->h ? sqlite3_errmsg(c->h) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(c->h, BUSY_TIMEOUT_MS);
	if (mode == SRV__SQLITE_INSPECT)
		return &c->base;
	sqlite3_extended_result_codes(c->h, 1);
	if (mode == SRV__SQLITE_WRITE) {
		if (configure_writer(c->h, path, err) < 0)
			goto fail;
	} else if (exec_sql(c->h, "PRAGMA query_only = ON") < 0 ||
		   exec_sql(c->h, "PRAGMA mmap_size = 0") < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot configure %s: %s", path, sqlite3_errmsg(c->h));
		goto fail;
	}
	return &c->base;
fail:
	sqlite3_close_v2(c->h);
	free(c);
	return NULL;
}

srv__conn *srv__sqlite_open(const char *path, enum srv__sqlite_mode mode, srv_error *err)
{
	return sqlite_open_named(path, path, false, mode, err);
}

/* "file:" and path, every byte but unreserved ones and '/' percent-encoded
 * (so that '%', '?' and '#' stay part of the name), then "?immutable=1";
 * malloc'd, or NULL when out of memory. */
static char *immutable_uri(const char *path)
{
	static const char hex[] = "0123456789ABCDEF", tail[] = "?immutable=1";
	char *uri = malloc(5 + 3 * strlen(path) + sizeof(tail));
	size_t n = 5;

	if (!uri)
		return NULL;
	memcpy(uri, "file:", 5);
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr("-._~/", *p)) {
			uri[n++] = (char)*p;
			continue;
		}
		uri[n++] = '%';
		uri[n++] = hex[*p >> 4];
		uri[n++] = hex[*p & 15];
	}
	memcpy(uri + n, tail, sizeof(tail));
	return uri;
}

/*
 * Whether a read-only connection to path failed its first read for want of
 * the side files it would create (no -shm, and a directory or medium it
 * cannot write), with no write-ahead log that holds commits: then the main
 * file is the whole database and nothing writes it, which is what
 * immutable=1 promises SQLite.  A -wal with content is another matter
 * (commits not yet in the file): reading without it would drop them.
 */
static bool needs_immutable(sqlite3 *h, const char *path)
{
	char wal[4200];
	struct stat st;
	int code;

	if (query_int(h, "SELECT count(*) FROM sqlite_master") >= 0)
		return false;
	code = sqlite3_errcode(h) & 0xff;
	if (code != SQLITE_CANTOPEN && code != SQLITE_READONLY)
		return false;
	if ((size_t)snprintf(wal, sizeof(wal), "%s-wal", path) >= sizeof(wal))
		return false;
	return stat(wal, &st) < 0 ? errno == ENOENT : st.st_size == 0;
}

srv__conn *srv__sqlite_open_unwritable(const char *path, enum srv__sqlite_mode mode,
				       srv_error *err)
{
	srv__conn *c = sqlite_open_named(path, path, false, mode, err);
	char *uri;

	if (!c || mode == SRV__SQLITE_WRITE || !needs_immutable(handle(c), path))
		return c;
	srv__sql_close(c);
	uri = immutable_uri(path);
	if (!uri) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return NULL;
	}
	c = sqlite_open_named(path, uri, true, mode, err);
	free(uri);
	return c;
}

static int sq_schema_objects(srv__conn *c, int64_t *ret_has_migrations, int64_t *ret_objects)
{
	sqlite3 *h = handle(c);

	*ret_has_migrations = query_int(h, "SELECT count(*) FROM sqlite_master"
					   " WHERE type = 'table' AND name = 'schema_migrations'");
	*ret_objects = query_int(h, "SELECT count(*) FROM sqlite_master");
	return *ret_has_migrations < 0 || *ret_objects < 0 ? -1 : 0;
}

/* SQLite's documented procedure for a migration that rebuilds a table
 * others reference (create, copy, drop, rename) needs foreign keys off. */
static int sq_migrate_around(srv__conn *c, bool before)
{
	return exec_sql(handle(c), before ? "PRAGMA foreign_keys = OFF" : "PRAGMA foreign_keys = ON");
}

static int sq_migrate_lock(srv__conn *c)
{
	(void)c;
	return 0; /* BEGIN IMMEDIATE holds the database's write lock */
}

/* With foreign keys off, PRAGMA foreign_key_check must find nothing. */
static int sq_migrate_check(srv__conn *c, srv_error *err)
{
	sqlite3_stmt *check = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(handle(c), "PRAGMA foreign_key_check", -1, &check, NULL) != SQLITE_OK) {
		srv_error_set(err, SRV_DB_ERROR, "migration failed: %s", sqlite3_errmsg(handle(c)));
		goto out;
	}
	if (sqlite3_step(check) == SQLITE_ROW) {
		srv_error_set(err, SRV_DB_ERROR, "migration failed: a row of %s has no parent in %s",
			      (const char *)sqlite3_column_text(check, 0),
			      (const char *)sqlite3_column_text(check, 2));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(check);
	return rc;
}

static int sq_checkpoint(srv__conn *c, bool give_back)
{
	int mode = give_back ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE;
	int frames = 0, copied = 0;

	/* TRUNCATE empties the WAL file when it could copy every frame;
	 * PASSIVE copies what no reader still needs and leaves the file as it
	 * is, at the size another process wrote it out to. */
	if (sqlite3_wal_checkpoint_v2(handle(c), NULL, mode, &frames, &copied) != SQLITE_OK)
		return -1;
	return copied == frames ? 0 : -1;
}

/* Where SQLite itself puts the WAL: beside the file it resolved the
 * database's path to, which a symbolic link makes another folder. */
static const char *sq_wal_path(srv__conn *c)
{
	return sqlite3_filename_wal(sqlite3_db_filename(handle(c), "main"));
}

static void sq_keep_wal(srv__conn *c)
{
	sqlite3_db_config(handle(c), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
}

static int sq_revive(srv__conn *c)
{
	(void)c;
	return 0; /* a file does not go away */
}

static const struct srv__sql_driver sqlite_driver = {
	.name = "sqlite",
	.prepare = sq_prepare,
	.finalize = sq_finalize,
	.reset = sq_reset,
	.bind_int64 = sq_bind_int64,
	.bind_double = sq_bind_double,
	.bind_text = sq_bind_text,
	.bind_blob = sq_bind_blob,
	.step = sq_step,
	.column_is_null = sq_is_null,
	.column_int64 = sq_int64,
	.column_double = sq_double,
	.column_text = sq_text,
	.column_blob = sq_blob,
	.column_bytes = sq_bytes,
	.changes = sq_changes,
	.exec = sq_exec,
	.run_later = srv__sql_step_once,
	.begin_write = sq_begin_write,
	.begin_read = sq_begin_read,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.in_transaction = sq_in_transaction,
	.lock_dataset = sq_lock_dataset,
	.skip_locked = "",
	/* A correlated subquery: SQLite runs it per dataset as one seek down
	 * ledger_by_dataset, then one rowid lookup. */
	.last_ledger_row = " LEFT JOIN ledger l ON l.seq ="
			   " (SELECT seq FROM ledger WHERE dataset_id = d.id ORDER BY seq DESC LIMIT 1)",
	.lock_named = sq_lock_named,
	.data_version = sq_data_version,
	.last_insert_key = sq_last_insert_key,
	.reset_open = sq_reset_open,
	.schema_objects = sq_schema_objects,
	.migrate_around = sq_migrate_around,
	.migrate_lock = sq_migrate_lock,
	.migrate_check = sq_migrate_check,
	.checkpoint = sq_checkpoint,
	.wal_path = sq_wal_path,
	.keep_wal = sq_keep_wal,
	.revive = sq_revive,
	.migrations = srv_embedded,
	.migration_count = &srv_embedded_count,
	.errmsg = sq_errmsg,
	.errcode = sq_errcode,
	.close = sq_close,
};

/*
 * Why the WAL file is written out to its working size at start: with
 * synchronous=FULL every commit ends in fdatasync of the WAL.  While the WAL
 * file still grows (a new database, and after every restart, since a clean
 * close checkpoints and deletes it), each commit also changes the file's
 * size and allocates blocks, so that fdatasync must commit the file system's
 * journal as well: on this project's VM a commit loop on a growing WAL ran at
 * 0.6-0.8 of the same loop on a WAL written out beforehand.  The WAL stops
 * growing once a checkpoint lets the next writer start again from its first
 * frame, after about wal_autocheckpoint frames.
 *
 * Why zeros past the end cannot be mistaken for data: SQLite reads a WAL
 * frame as valid only when its header carries the salts of the WAL header
 * and a checksum chained from the frames before it; a run of zeros fails
 * both, and a WAL whose own header is zeros (no magic number) is read as
 * empty.  Why no other connection's frames are overwritten: the zeros go
 * only past the file's end, found and written while this connection holds
 * the write lock (BEGIN IMMEDIATE), which any connection appending frames
 * or starting the WAL over must hold.  The writes go through SQLite's own
 * file handle for the WAL (SQLITE_FCNTL_JOURNAL_POINTER), so no second
 * descriptor is opened and closed on the file.  The size written out to is
 * the connection's journal_size_limit, the working size the open set.
 */
int srv__sqlite_preallocate_wal(srv__conn *c, srv_error *err)
{
	static const unsigned char zeros[64 * 1024];
	sqlite3 *h = handle(c);
	sqlite3_file *wal = NULL;
	sqlite3_int64 size = 0, target, at;
	int rc;

	target = query_int(h, "PRAGMA journal_size_limit");
	if (target <= 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot read the WAL's working size: %s",
			      sqlite3_errmsg(h));
		return -1;
	}
	if (sq_begin_write(c) != SRV__SQL_DONE) {
		srv_error_set(err, SRV_DB_ERROR, "cannot take the write lock: %s", sqlite3_errmsg(h));
		return -1;
	}
	rc = sqlite3_file_control(h, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
	if (rc != SQLITE_OK || !wal || !wal->pMethods ||
	    wal->pMethods->xFileSize(wal, &size) != SQLITE_OK) {
		srv_error_set(err, SRV_DB_ERROR, "cannot reach the WAL file");
		goto fail;
	}
	for (at = size; at < target;) {
		int n = target - at < (sqlite3_int64)sizeof(zeros) ? (int)(target - at) : (int)sizeof(zeros);

		if (wal->pMethods->xWrite(wal, zeros, n, at) != SQLITE_OK) {
			srv_error_set(err, SRV_DB_ERROR, "cannot write the WAL file at byte %lld",
				      (long long)at);
			goto undo;
		}
		at += n;
	}
	if (at > size && wal->pMethods->xSync(wal, SQLITE_SYNC_FULL | SQLITE_SYNC_DATAONLY) != SQLITE_OK) {
		srv_error_set(err, SRV_DB_ERROR, "cannot sync the WAL file");
		goto undo;
	}
	sq_rollback(c);
	return 0;
undo:
	/* Past `size` nothing is SQLite's: give the space back. */
	wal->pMethods->xTruncate(wal, size);
fail:
	sq_rollback(c);
	return -1;
}

int srv__sqlite_vacuum_into(srv__conn *c, const char *db_path, const char *out_path,
			    srv_error *err)
{
	sqlite3 *h = handle(c);
	sqlite3_stmt *s = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(h, "VACUUM INTO ?1", -1, &s, NULL) != SQLITE_OK) {
		srv_error_set(err, SRV_DB_ERROR, "cannot start the copy: %s", sqlite3_errmsg(h));
		goto out;
	}
	sqlite3_bind_text(s, 1, out_path, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_DONE) {
		srv_error_set(err, SRV_DB_ERROR, "cannot copy %s: %s", db_path, sqlite3_errmsg(h));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(s);
	return rc;
}

void srv__sqlite_init_process(void)
{
	/* SQLite's allocation statistics take a global mutex on every
	 * allocation; nothing here reads them (sqlite3_memory_used and the soft
	 * heap limit are unused).  Off, a one-client charge ran 2-5% faster.
	 * Must precede SQLite's initialisation. */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
