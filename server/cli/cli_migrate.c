/*
 * cli/cli_migrate.c: `dpgate migrate --from FILE --to postgresql://...`, an
 * SQLite database copied whole into an empty PostgreSQL database and
 * verified before it is committed (srv_store_migrate).
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

static const char usage_migrate[] =
	"usage: dpgate migrate --from FILE --to postgresql://...\n"
	"\n"
	"Copies the dpgate SQLite database FILE whole (datasets, ledgers with their\n"
	"sequence numbers, reservations, idempotent answers, keys, audit, jobs, data\n"
	"links, PATE sessions) into the empty PostgreSQL database the URL names, in\n"
	"one transaction. FILE is only read, on one snapshot (a server may keep\n"
	"running on it), and must be at this dpgate's schema version (start `dpgate\n"
	"serve` on an older file once first). The target must be empty: it is\n"
	"migrated to the same version, then copied into, never merged into. Before\n"
	"the COMMIT the copy's ledgers are replayed as `dpgate verify` does and each\n"
	"dataset's findings and each table's row count compared with FILE's. Table\n"
	"files and model files stay in the data directory: copy it to the new\n"
	"servers. Prints a JSON report; exit 0 when the copy is committed and\n"
	"verified, 1 when the copy failed or did not verify (nothing committed), 2\n"
	"on bad usage or a refused source or target (nothing written).\n";

/* The report of a committed copy, on stdout. */
static void print_report(const srv_migrate_report *rep, const char *from, const char *to)
{
	json_t *tables = json_object(), *report;
	char name[256];

	srv_store_target_name(to, name, sizeof(name));
	for (size_t i = 0; i < SRV_MIGRATE_TABLES; i++)
		json_object_set_new(tables, rep->tables[i], json_integer(rep->rows[i]));
	report = json_pack("{s:s, s:s, s:I, s:o, s:I, s:b}", "from", from, "to", name,
			   "schema_version", (json_int_t)rep->schema_version, "rows", tables,
			   "datasets_verified", (json_int_t)rep->datasets, "verified", 1);
	json_dumpf(report, stdout, JSON_INDENT(2));
	printf("\n");
	json_decref(report);
}

int cli_migrate_main(int argc, char **argv)
{
	static const char *const names[] = {"from", "to"};
	const char *from = NULL, *to = NULL;
	const char **const values[] = {&from, &to};
	srv_migrate_report rep;
	srv_error err;
	int rc;

	rc = cli_args_strings(argc, argv, names, values, 2, usage_migrate);
	if (rc >= 0)
		return rc;
	if (!cli_args_complete("migrate", from && to, optind, argc, argv, usage_migrate))
		return 2;
	if (srv_store_is_shared(from) || !cli_db_exists("migrate", from))
		return 2;
	srv_error_init(&err);
	rc = srv_store_migrate(from, to, &rep, &err);
	if (rc != SRV_OK) {
		fprintf(stderr, "dpgate migrate: %s%s\n", err.text,
			rc == SRV_CONFLICT ? "; nothing was committed" : "");
		return rc == SRV_CONFLICT ? 1 : 2;
	}
	print_report(&rep, srv_store_file(from), to);
	return 0;
}
