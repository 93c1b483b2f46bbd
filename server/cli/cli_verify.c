/*
 * cli/cli_verify.c: `dpgate verify --db FILE`, the ledger replayed from its
 * rows on a read-only store; `dpgate backup` replays its copy the same way.
 */
#include <getopt.h>
#include <stdio.h>

#include "api.h"
#include "cli.h"

static const char usage_verify[] =
	"usage: dpgate verify --db FILE\n"
	"\n"
	"Recomputes every dataset's spent and reserved totals from its ledger rows and\n"
	"compares them with the stored running totals, and replays its budget history\n"
	"(creation, each raise and lower) to check every admission against the budget\n"
	"in force at its row. Prints a JSON report; exit 0 when all agree and no\n"
	"admission was over its budget, 1 otherwise, 2 on errors (among\n"
	"them: FILE is not a dpgate database, or its schema version is not this\n"
	"dpgate's). Read-only: it never writes FILE, and works while a server runs.\n";

int cli_verify_file(const char *cmd, const char *path, json_t **ret_report, bool *ret_agrees)
{
	srv_store *store = NULL;
	srv_error err;
	srv_db *db;
	int rc;

	srv_error_init(&err);
	if (srv_store_open_read_only(path, true, &store, &err) < 0) {
		fprintf(stderr, "dpgate %s: %s\n", cmd, err.text);
		return -1;
	}
	db = srv_store_acquire(store);
	rc = srv_verify_json(db, ret_report);
	srv_store_release(store, db);
	srv_store_close(store);
	if (rc == SRV_DB_ERROR) {
		fprintf(stderr, "dpgate %s: cannot read the ledger of %s\n", cmd, path);
		return -1;
	}
	*ret_agrees = rc == SRV_OK;
	return 0;
}

int cli_verify_main(int argc, char **argv)
{
	static const char *const names[] = {"db"};
	const char *db_path = NULL;
	const char **const values[] = {&db_path};
	json_t *report = NULL;
	bool agrees = false;
	int rc;

	rc = cli_args_strings(argc, argv, names, values, 1, usage_verify);
	if (rc >= 0)
		return rc;
	if (!cli_args_complete("verify", db_path != NULL, optind, argc, argv, usage_verify))
		return 2;
	/* Read-only: no migration, nothing created, no checkpoint. */
	if (!cli_db_exists("verify", db_path))
		return 2;
	if (cli_verify_file("verify", db_path, &report, &agrees) < 0)
		return 2;
	json_dumpf(report, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	printf("\n");
	json_decref(report);
	return agrees ? 0 : 1;
}
