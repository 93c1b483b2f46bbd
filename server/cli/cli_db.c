/*
 * cli/cli_db.c: how a command reaches its database, with the messages every
 * command gives when it cannot.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int cli_db_open(const char *cmd, const char *db_path, unsigned pool, srv_store **ret)
{
	srv_error err;

	srv_error_init(&err);
	if (srv_store_open(db_path, pool, ret, &err) < 0) {
		fprintf(stderr, "dpgate %s: %s\n", cmd, err.text);
		/* Someone else's file named by --db is bad input (the manual's
		 * exit status 2), as verify and backup refuse it. */
		return err.code == SRV_NOT_DPGATE ? 2 : 1;
	}
	return 0;
}

bool cli_db_exists(const char *cmd, const char *db_path)
{
	struct stat st;

	/* A PostgreSQL database is there or not when it is connected to. */
	if (srv_store_is_shared(db_path))
		return true;
	if (stat(srv_store_file(db_path), &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "dpgate %s: no database at %s\n", cmd, db_path);
		return false;
	}
	if (st.st_size == 0) {
		fprintf(stderr, "dpgate %s: %s is empty, not a dpgate database\n", cmd, db_path);
		return false;
	}
	return true;
}

/* Whether a dpgate server holds the file at path: serve keeps an exclusive
 * flock on it, which a shared one cannot join.  flock is apart from the
 * fcntl locks SQLite takes, so the probe disturbs neither. */
static bool served(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool held;

	if (fd < 0)
		return false;
	held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

void cli_db_close(const char *db_path, srv_store *st)
{
	if (st && !srv_store_is_shared(db_path) && served(srv_store_file(db_path)))
		srv_store_close_beside_server(st);
	else
		srv_store_close(st);
}

bool cli_db_not_migrated_under_a_server(const char *cmd, const char *db_path)
{
	srv_store *st = NULL;
	srv_error err;

	if (srv_store_is_shared(db_path) || !served(srv_store_file(db_path)))
		return true;
	/* A read-only open refuses any schema but this binary's, and writes
	 * nothing. */
	srv_error_init(&err);
	if (srv_store_open_read_only(db_path, false, &st, &err) == 0) {
		srv_store_close(st);
		return true;
	}
	fprintf(stderr,
		"dpgate %s: a dpgate server is running on %s, whose schema is not this "
		"dpgate's (version %ld); stop the server first: opening the database here "
		"would migrate it under the server\n",
		cmd, db_path, srv_store_known_schema_version());
	return false;
}
