/*
 * cli/cli_db.c: how a command reaches its database, with the messages every
 * command gives when it cannot.
 */
#include <stdio.h>
#include <sys/stat.h>

#include "cli.h"

int cli_db_open(const char *db_path, unsigned pool, srv_store **ret)
{
	srv_error err;

	srv_error_init(&err);
	if (srv_store_open(db_path, pool, ret, &err) < 0) {
		fprintf(stderr, "dpgate: %s\n", err.text);
		return -1;
	}
	return 0;
}

bool cli_db_exists(const char *cmd, const char *db_path)
{
	struct stat st;

	/* A PostgreSQL database is there or not when it is connected to. */
	if (srv_store_is_shared(db_path))
		return true;
	if (stat(srv_store_file(db_path), &st) == 0 && S_ISREG(st.st_mode))
		return true;
	fprintf(stderr, "dpgate %s: no database at %s\n", cmd, db_path);
	return false;
}
