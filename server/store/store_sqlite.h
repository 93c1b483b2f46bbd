/*
 * store_sqlite.h: the SQLite driver of store_sql.h, and the operations only
 * an SQLite database file has (its WAL, its copy, its foreign-key pragmas),
 * for the store files and the store's tests.
 */
#ifndef DPGATE_SRV_STORE_SQLITE_H
#define DPGATE_SRV_STORE_SQLITE_H

#include "store.h"
#include "store_sql.h"

enum srv__sqlite_mode {
	SRV__SQLITE_WRITE,     /* created 0600 when missing, WAL, synchronous=FULL */
	SRV__SQLITE_READ_ONLY, /* an existing file, query_only */
	SRV__SQLITE_INSPECT,   /* an existing file, read-only, nothing configured */
};

/* Opens the database file at path; NULL with a message in err. */
srv__conn *srv__sqlite_open(const char *path, enum srv__sqlite_mode mode, srv_error *err);

/*
 * srv__sqlite_open in a read-only mode for a command that only reads (verify,
 * backup): when the file cannot be read because SQLite cannot create its
 * -shm beside it (a WAL database on read-only media, or in a directory this
 * user cannot write) and no -wal holding commits is there, opens it again
 * as immutable (a file: URI with immutable=1: no locks, no side files).
 * Never for a server or a writer: an immutable connection does not see
 * another process's writes.  NULL with a message in err.
 */
srv__conn *srv__sqlite_open_unwritable(const char *path, enum srv__sqlite_mode mode,
				       srv_error *err);

/* Whether c's last failure was SQLite's "file is not a database" (the
 * file's first bytes are not an SQLite header); false when c is not
 * SQLite's. */
bool srv__sqlite_not_a_database(srv__conn *c);

/* Whether the file at path begins with SQLite's header (the 16 bytes
 * "SQLite format 3" and a NUL that open every database file SQLite has
 * written to): 1, 0 when it does not (shorter files included), -1 when
 * it cannot be read. */
int srv__sqlite_file_header(const char *path);

/* The SQLite handle under c, for tests; NULL when c is not SQLite's. */
struct sqlite3 *srv__sqlite_handle(srv__conn *c);

/* Writes the WAL out to its working size (see store_sqlite.c); 0 or -1. */
int srv__sqlite_preallocate_wal(srv__conn *c, srv_error *err);

/* VACUUM INTO out_path: a consistent copy of the database c reads; 0 or -1. */
int srv__sqlite_vacuum_into(srv__conn *c, const char *db_path, const char *out_path,
			    srv_error *err);

/* Process-wide SQLite settings, before SQLite's first use. */
void srv__sqlite_init_process(void);

#endif
