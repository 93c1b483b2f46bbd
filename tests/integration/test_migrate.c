/*
 * test_migrate.c: a database left by an older dpgate is brought up to date
 * by the real binary, with every row and every reference kept.
 *
 * The old database is built here from the project's own schema files
 * 001..004 (as dpgate applied them, recorded in schema_migrations), with
 * rows in every table that 005 rebuilds and rows elsewhere that point at
 * them: a job holding a reservation, PATE answers holding ledger rows.
 * `dpgate verify`, which is read-only, refuses the old version and leaves
 * the file alone; `dpgate backup` copies it as it is (the backup to take
 * before an upgrade) without replaying it; `dpgate keys list` (which opens
 * and migrates the store)
 * must then exit 0, the database must be at the newest version with the
 * same rows, no dangling reference, and the same values accepted and
 * refused as before, each dataset's totals on its last ledger row (006),
 * and verify must now pass.  A database whose dataset row counts charges
 * that no ledger row records is refused by 006 and left as it was.  008
 * gives every dataset a synthesized 'create' row (its budget when no budget
 * row says it changed, else unknown) carrying its totals, and every key
 * synthesized key_events rows.  011 leaves every older dataset record-level,
 * one whose free-text unit already said "label" included.
 */
#include <criterion/criterion.h>
#include <jansson.h>

#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const char *const old_migrations[] = {
	"001_init.sql", "002_jobs.sql", "003_ledger_rowid.sql", "004_pate.sql", "005_plain_checks.sql",
	NULL,
};

/* The newest schema version: the highest schema/NNN_*.sql. */
#define NEWEST_VERSION 18

/* A dataset row as schemas 1 to 5 held it, its running totals included;
 * the VALUES follow. */
#define OLD_DATASET_INSERT                                                                 \
	"INSERT INTO datasets (id, name, privacy_unit, neighbor, accountant, budget_epsilon," \
	" budget_delta, spent, reserved, open_reservations, charges, archived, created_at,"  \
	" updated_at) VALUES "

static void exec_ok(sqlite3 *h, const char *sql)
{
	char *msg = NULL;

	cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql,
		     msg ? msg : "");
}

static long long count(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *s = NULL;
	long long n;

	cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW, "%s", sql);
	n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

/* An old database in a fresh directory under /tmp, and the two commands
 * the tests run on it: `dpgate keys list`, which opens it and so migrates
 * it, and `dpgate verify`. */
struct old_db {
	char dir[32];
	char path[PATH_MAX];
	const char *migrate[6];
	const char *verify[5];
};

static void old_db_make(struct old_db *d)
{
	snprintf(d->dir, sizeof(d->dir), "/tmp/dpgate-migrate-XXXXXX");
	cr_assert(mkdtemp(d->dir));
	snprintf(d->path, sizeof(d->path), "%s/dpgate.db", d->dir);
	d->migrate[0] = d->verify[0] = dpg_bin();
	d->migrate[1] = "keys";
	d->migrate[2] = "list";
	d->migrate[3] = d->verify[2] = "--db";
	d->migrate[4] = d->verify[3] = d->path;
	d->migrate[5] = d->verify[4] = NULL;
	d->verify[1] = "verify";
}

/* Migrates d (keys list) and verifies it, both exiting 0; out receives
 * verify's report. */
static void old_db_migrate(const struct old_db *d, char *out, size_t size)
{
	cr_assert_eq(dpg_run(out, size, d->migrate), 0, "keys list (migrating): %s", out);
	cr_assert_eq(dpg_run(out, size, d->verify), 0, "verify after migration: %s", out);
}

/* Removes what old_db_make made. */
static void old_db_remove(const struct old_db *d)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	cr_assert_eq(system(cmd), 0);
}

/* A database as dpgate left it at schema `version` (4 or 5), with no rows;
 * the caller inserts them and commits.  Returns the open handle. */
static sqlite3 *make_old_schema(const char *path, int version)
{
	const char *root = getenv("DPGATE_SOURCE_ROOT");
	sqlite3 *h = NULL;
	char file[PATH_MAX];

	cr_assert(root, "DPGATE_SOURCE_ROOT is not set (run through meson test)");
	cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
	exec_ok(h, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; BEGIN;"
		   "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
		   " name TEXT NOT NULL, applied_at TEXT NOT NULL)");
	for (int i = 0; i < version && old_migrations[i]; i++) {
		char *sql, record[160];

		snprintf(file, sizeof(file), "%s/schema/%s", root, old_migrations[i]);
		sql = dpg_read_file(file, NULL);
		exec_ok(h, sql);
		free(sql);
		snprintf(record, sizeof(record),
			 "INSERT INTO schema_migrations VALUES (%d, '%s', '2026-01-01T00:00:00.000Z')",
			 i + 1, old_migrations[i]);
		exec_ok(h, record);
	}
	return h;
}

/* A database at schema version 5 holding `rows` (SQL that ends with
 * COMMIT), closed. */
static void make_v5_database(const char *path, const char *rows)
{
	sqlite3 *h = make_old_schema(path, 5);

	exec_ok(h, rows);
	sqlite3_close(h);
}

/* A database at schema version 4 with rows that reference the ledger and
 * the reservations, and a dataset with no ledger row. */
static void make_v4_database(const char *path)
{
	sqlite3 *h = make_old_schema(path, 4);

	exec_ok(h,
		OLD_DATASET_INSERT "('d1', 'd1', 'row', 'add_remove', 'basic', 10, 1e-5,"
		" '[0.5,0]', '[1,0]', 1, 2, 0, 't', 't'),"
		" ('d2', 'd2', 'row', 'add_remove', 'basic', 1, 1e-5, '[0,0]', '[0,0]', 0, 0, 0,"
		" 't', 't');"
		"INSERT INTO ledger (seq, dataset_id, kind, event, cost, epsilon, delta, actor,"
		" created_at) VALUES"
		" (1, 'd1', 'charge', '{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}',"
		"  '[0.25,0]', 0.25, 0, 'k', 't'),"
		" (2, 'd1', 'charge', '{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}',"
		"  '[0.25,0]', 0.25, 0, 'k', 't'),"
		" (3, 'd1', 'reserve', '{\"type\":\"epsilon_delta\",\"epsilon\":1,\"delta\":0}',"
		"  '[1,0]', 1, 0, 'k', 't');"
		"UPDATE ledger SET reservation_id = 'rsv_1' WHERE seq = 3;"
		"INSERT INTO reservations VALUES ('rsv_1', 'd1',"
		" '{\"type\":\"epsilon_delta\",\"epsilon\":1,\"delta\":0}', '[1,0]', 1, 'open', 'k',"
		" NULL, 't', 4102444800, NULL, NULL);"
		"INSERT INTO jobs (id, dataset_id, trainer, params, event, n_train, reservation_id,"
		" state, actor, created_at) VALUES ('job_1', 'd1', 'dpsgd', '{}', '{}', 10, 'rsv_1',"
		" 'queued', 'k', 't');"
		"INSERT INTO pate_sessions (id, dataset_id, config, dd_rdp, actor, created_at,"
		" updated_at) VALUES ('pate_1', 'd1', '{}', '[]', 'k', 't', 't');"
		"INSERT INTO pate_answers (id, session_id, charge_seq, votes) VALUES"
		" (1, 'pate_1', 1, x'00'), (2, 'pate_1', 2, x'01');"
		"INSERT INTO dataset_data (dataset_id, kind, builtin, path, rows, actor, created_at)"
		" VALUES ('d1', 'builtin', 'fashion-mnist', '/usr/share', 60000, 'k', 't'),"
		" ('d2', 'table', NULL, '/nowhere/d2.csv', 5, 'k', 't');"
		"COMMIT;");
	cr_assert_eq(count(h, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	sqlite3_close(h);
}

/* `dpgate backup` of the version 4 file: exit 0, the copy at version 4 with
 * the same rows, reported as not replayed; the source still at version 4. */
static void backup_keeps_version_4(const char *path, const char *dir)
{
	char copy[PATH_MAX], out[8192];
	const char *backup[] = {dpg_bin(), "backup", "--db", path, "--to", copy, NULL};
	json_t *report;
	sqlite3 *h = NULL;

	snprintf(copy, sizeof(copy), "%s/before-upgrade.db", dir);
	cr_assert_eq(dpg_run(out, sizeof(out), backup), 0, "backup of version 4: %s", out);
	report = json_loads(out, 0, NULL);
	cr_assert(report, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(report, "schema_version")), 4);
	cr_assert(json_is_null(json_object_get(report, "verify")), "%s", out);
	cr_assert(json_is_string(json_object_get(report, "note")), "%s", out);
	json_decref(report);
	cr_assert_eq(sqlite3_open(copy, &h), SQLITE_OK);
	cr_assert_eq(count(h, "SELECT max(version) FROM schema_migrations"), 4);
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger"), 3);
	cr_assert_eq(count(h, "SELECT count(*) FROM pate_answers"), 2);
	sqlite3_close(h);
	cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
	cr_assert_eq(count(h, "SELECT max(version) FROM schema_migrations"), 4);
	sqlite3_close(h);
}

Test(migrate, version_4_database_is_rebuilt_with_every_row_and_reference)
{
	struct old_db db;
	char out[8192];
	sqlite3 *h = NULL;
	char *msg = NULL;
	long long applied;

	old_db_make(&db);
	make_v4_database(db.path);

	cr_assert_eq(dpg_run(out, sizeof(out), db.verify), 2, "verify before migration: %s", out);
	backup_keeps_version_4(db.path, db.dir);
	old_db_migrate(&db, out, sizeof(out));

	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	exec_ok(h, "PRAGMA foreign_keys = ON");
	cr_assert_eq(count(h, "SELECT max(version) FROM schema_migrations"), NEWEST_VERSION);
	applied = count(h, "SELECT count(*) FROM schema_migrations");
	/* The three rows, and 008's synthesized creation rows of d1 and d2. */
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger"), 5);
	/* 006: the last row of d1 carries d1's totals, the earlier ones none;
	 * the dataset rows no longer hold totals. */
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger WHERE seq = 3 AND spent = '[0.5,0]'"
			      " AND reserved = '[1,0]' AND open_reservations = 1 AND charges = 2"),
		     1);
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger WHERE seq < 3 AND spent IS NULL"
			      " AND reserved IS NULL AND open_reservations IS NULL"
			      " AND charges IS NULL"),
		     2);
	cr_assert_eq(count(h, "SELECT count(*) FROM pragma_table_info('datasets') WHERE name IN"
			      " ('spent', 'reserved', 'open_reservations', 'charges')"),
		     0);
	cr_assert_eq(count(h, "SELECT count(*) FROM datasets"), 2);
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger WHERE seq = 3 AND kind = 'reserve'"
			      " AND reservation_id = 'rsv_1'"),
		     1);
	cr_assert_eq(count(h, "SELECT count(*) FROM reservations WHERE state = 'open'"), 1);
	cr_assert_eq(count(h, "SELECT count(*) FROM jobs WHERE reservation_id = 'rsv_1'"), 1);
	cr_assert_eq(count(h, "SELECT count(*) FROM pate_answers"), 2);
	/* 007: a builtin's row count and schema are public; an older upload
	 * declared neither. */
	cr_assert_eq(count(h, "SELECT count(*) FROM dataset_data WHERE dataset_id = 'd1'"
			      " AND rows_public = 1 AND schema_declared = 1"),
		     1);
	cr_assert_eq(count(h, "SELECT count(*) FROM dataset_data WHERE dataset_id = 'd2'"
			      " AND rows_public = 0 AND schema_declared = 0"),
		     1);
	cr_assert_eq(count(h, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	cr_assert_eq(count(h, "SELECT count(*) FROM sqlite_master WHERE name IN"
			      " ('ledger_by_dataset', 'reservations_open')"),
		     2);
	/* The plain checks accept and refuse what the lists did (the row
	 * accepted is taken back: it carries no totals). */
	exec_ok(h, "SAVEPOINT accepted; INSERT INTO ledger (dataset_id, kind, actor, created_at)"
		   " VALUES ('d1', 'budget', 'k', 't'); ROLLBACK TO accepted; RELEASE accepted");
	cr_assert_neq(sqlite3_exec(h, "INSERT INTO ledger (dataset_id, kind, actor, created_at)"
				      " VALUES ('d1', 'refund', 'k', 't')",
				   NULL, NULL, &msg),
		      SQLITE_OK);
	sqlite3_free(msg);
	msg = NULL;
	cr_assert_neq(sqlite3_exec(h, "UPDATE reservations SET state = 'gone'", NULL, NULL, &msg),
		      SQLITE_OK);
	sqlite3_free(msg);
	/* References still bind: a PATE answer cannot name a missing row. */
	cr_assert_neq(sqlite3_exec(h, "INSERT INTO pate_answers VALUES (3, 'pate_1', 99, x'00')",
				   NULL, NULL, NULL),
		      SQLITE_OK);
	sqlite3_close(h);

	/* Opening again applies nothing more. */
	cr_assert_eq(dpg_run(out, sizeof(out), db.migrate), 0, "second keys list: %s", out);
	cr_assert_eq(dpg_run(out, sizeof(out), db.verify), 0, "second verify: %s", out);
	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	cr_assert_eq(count(h, "SELECT count(*) FROM schema_migrations"), applied);
	sqlite3_close(h);

	old_db_remove(&db);
}

/* What verify reports of one dataset, as {"rows", "totals_match", ...}. */
static json_t *verify_entry(json_t *report, const char *id)
{
	json_t *all = json_object_get(report, "datasets"), *d;
	size_t i;

	json_array_foreach(all, i, d)
		if (strcmp(json_string_value(json_object_get(d, "id")), id) == 0)
			return d;
	cr_assert_fail("verify reports no dataset %s", id);
	return NULL;
}

Test(migrate, version_5_totals_move_to_the_ledger_and_read_back_the_same)
{
	struct old_db db;
	char out[8192];
	json_t *report, *d;
	sqlite3 *h;

	old_db_make(&db);
	/* d1: two charges and a budget row after them; d2: nothing yet. */
	make_v5_database(db.path,
		OLD_DATASET_INSERT "('d1', 'd1', 'row', 'add_remove', 'basic', 4, 1e-5,"
		" '[0.75,1e-06]', '[0,0]', 0, 2, 0, 't0', 't2'),"
		" ('d2', 'd2', 'row', 'add_remove', 'basic', 1, 1e-5, '[0,0]', '[0,0]', 0, 0, 0,"
		" 't0', 't0');"
		"INSERT INTO ledger (dataset_id, kind, event, cost, epsilon, delta, note, actor,"
		" created_at) VALUES"
		" ('d1', 'charge', '{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0}',"
		"  '[0.5,0]', 0.5, 0, NULL, 'k', 't1'),"
		" ('d1', 'charge', '{\"type\":\"epsilon_delta\",\"epsilon\":0.25,"
		"  \"delta\":1e-06}', '[0.25,1e-06]', 0.25, 1e-06, NULL, 'k', 't1'),"
		" ('d1', 'budget', NULL, NULL, 4, 1e-5, 'raised', 'admin', 't2');"
		"INSERT INTO api_keys (id, hash, role, datasets, created_at, revoked_at) VALUES"
		" ('k1', x'00', 'admin', '[]', 't0', NULL),"
		" ('k2', x'01', 'analyst', '[\"d1\"]', 't1', 't3');"
		"COMMIT;");

	old_db_migrate(&db, out, sizeof(out));
	report = json_loads(out, 0, NULL);
	cr_assert(report, "%s", out);
	/* d1's stored totals are its replay: 0.5 + 0.25 spent, read from the
	 * budget row that ends its ledger. */
	d = verify_entry(report, "d1");
	cr_assert_eq(json_integer_value(json_object_get(d, "rows")), 4);
	cr_assert_eq(json_integer_value(json_object_get(d, "rows_with_totals")), 2);
	cr_assert(json_is_true(json_object_get(d, "totals_match")), "%s", out);
	cr_assert_eq(json_real_value(json_object_get(d, "stored_spent_epsilon")), 0.75);
	/* d1's budget changed before any budget was recorded: its two charges
	 * precede every known budget. */
	cr_assert_eq(json_integer_value(json_object_get(d, "admissions_before_a_known_budget")), 2,
		     "%s", out);
	d = verify_entry(report, "d2");
	cr_assert_eq(json_integer_value(json_object_get(d, "rows")), 1);
	cr_assert(json_is_true(json_object_get(d, "totals_match")), "%s", out);
	cr_assert(json_is_true(json_object_get(d, "budget_history_matches")), "%s", out);
	cr_assert_eq(json_real_value(json_object_get(d, "stored_spent_epsilon")), 0.0);
	json_decref(report);

	/* 008: one synthesized creation row each, after the dataset's rows and
	 * carrying its totals; the budget only where no budget row changed it. */
	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger WHERE kind = 'create'"
			      " AND note = 'synthesized' AND actor = 'migration'"),
		     2);
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger WHERE kind = 'create' AND dataset_id = 'd1'"
			      " AND seq = 4 AND epsilon IS NULL AND delta IS NULL AND created_at = 't0'"
			      " AND spent = (SELECT spent FROM ledger WHERE seq = 3) AND charges = 2"),
		     1);
	cr_assert_eq(count(h, "SELECT count(*) FROM ledger WHERE kind = 'create' AND dataset_id = 'd2'"
			      " AND epsilon = 1 AND delta = 1e-5 AND spent = '[0.0,0.0]'"
			      " AND reserved = '[0.0,0.0]' AND open_reservations = 0 AND charges = 0"),
		     1);
	cr_assert_eq(count(h, "SELECT count(*) FROM datasets WHERE filter_orders IS NULL"), 2);
	/* Keys: a creation each, and k2's revocation, in time order. */
	cr_assert_eq(count(h, "SELECT count(*) FROM key_events WHERE synthesized = 1"
			      " AND actor = 'unknown'"),
		     3);
	cr_assert_eq(count(h, "SELECT group_concat(key_id || ':' || action, ',') = "
			      "'k1:create,k2:create,k2:revoke' FROM"
			      " (SELECT key_id, action FROM key_events ORDER BY seq)"),
		     1);
	sqlite3_close(h);

	/* Totals on an earlier row are checked against the replay up to it:
	 * right ones pass, wrong ones fail verify, and the report names the
	 * row. */
	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	exec_ok(h, "UPDATE ledger SET spent = '[0.5,0]', reserved = '[0,0]', open_reservations = 0,"
		   " charges = 1 WHERE seq = 1");
	sqlite3_close(h);
	cr_assert_eq(dpg_run(out, sizeof(out), db.verify), 0, "verify of right totals: %s", out);
	report = json_loads(out, 0, NULL);
	cr_assert(report, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(verify_entry(report, "d1"),
							 "rows_with_totals")),
		     3);
	json_decref(report);
	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	exec_ok(h, "UPDATE ledger SET spent = '[0.4,0]' WHERE seq = 1");
	sqlite3_close(h);
	cr_assert_eq(dpg_run(out, sizeof(out), db.verify), 1, "verify of a row with wrong totals: %s",
		     out);
	report = json_loads(out, 0, NULL);
	cr_assert(report, "%s", out);
	d = verify_entry(report, "d1");
	cr_assert(json_is_false(json_object_get(d, "totals_match")), "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(d, "first_row_with_wrong_totals")), 1, "%s",
		     out);
	json_decref(report);

	old_db_remove(&db);
}

/* Asserts that `sql` is refused by the database's checks or triggers. */
static void refused(sqlite3 *h, const char *sql)
{
	char *msg = NULL;

	cr_assert_neq(sqlite3_exec(h, sql, NULL, NULL, &msg), SQLITE_OK, "accepted: %s", sql);
	sqlite3_free(msg);
}

/* A dataset row of schema 11 with label_private set; the VALUES follow. */
#define LABEL_DATASET_INSERT                                                              \
	"INSERT INTO datasets (id, name, privacy_unit, neighbor, accountant, budget_epsilon," \
	" budget_delta, archived, created_at, updated_at, public, label_private) VALUES "

Test(migrate, version_5_label_text_stays_record_level)
{
	struct old_db db;
	char out[8192];
	sqlite3 *h;

	old_db_make(&db);
	/* Before 011 the unit was a description nothing read: "label" then
	 * promised nothing about the features. */
	make_v5_database(db.path,
		OLD_DATASET_INSERT "('d1', 'd1', 'label', 'replace', 'basic', 4, 1e-5,"
		" '[0,0]', '[0,0]', 0, 0, 0, 't0', 't0'),"
		" ('d2', 'd2', 'record', 'add_remove', 'basic', 1, 1e-5, '[0,0]', '[0,0]', 0, 0, 0,"
		" 't0', 't0');"
		"COMMIT;");
	old_db_migrate(&db, out, sizeof(out));

	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	cr_assert_eq(count(h, "SELECT max(version) FROM schema_migrations"), NEWEST_VERSION);
	cr_assert_eq(count(h, "SELECT count(*) FROM datasets WHERE label_private = 0"), 2);
	cr_assert_eq(count(h, "SELECT count(*) FROM datasets WHERE id = 'd1'"
			      " AND privacy_unit = 'label'"),
		     1);
	/* The flag is never set afterwards, nor the unit or relation changed. */
	refused(h, "UPDATE datasets SET label_private = 1 WHERE id = 'd1'");
	refused(h, "UPDATE datasets SET privacy_unit = 'user' WHERE id = 'd2'");
	refused(h, "UPDATE datasets SET neighbor = 'replace' WHERE id = 'd2'");
	exec_ok(h, "UPDATE datasets SET name = 'renamed' WHERE id = 'd2'");
	/* Only a private, replace dataset whose unit is "label" carries it. */
	refused(h, LABEL_DATASET_INSERT "('n1', 'n1', 'label', 'add_remove', 'basic', 1, 0, 0,"
		   " 't', 't', 0, 1)");
	refused(h, LABEL_DATASET_INSERT "('n2', 'n2', 'label', 'replace', 'basic', 1, 0, 0,"
		   " 't', 't', 1, 1)");
	refused(h, LABEL_DATASET_INSERT "('n3', 'n3', 'record', 'replace', 'basic', 1, 0, 0,"
		   " 't', 't', 0, 1)");
	refused(h, LABEL_DATASET_INSERT "('n4', 'n4', 'label', 'replace', 'basic', 1, 0, 0,"
		   " 't', 't', 0, 2)");
	exec_ok(h, "SAVEPOINT ok;" LABEL_DATASET_INSERT "('n5', 'n5', 'label', 'replace', 'basic',"
		   " 1, 0, 0, 't', 't', 0, 1); ROLLBACK TO ok; RELEASE ok");
	sqlite3_close(h);

	old_db_remove(&db);
}

Test(migrate, totals_without_ledger_rows_are_refused_and_the_file_kept)
{
	struct old_db db;
	char out[8192];
	sqlite3 *h;

	old_db_make(&db);
	make_v5_database(db.path,
		OLD_DATASET_INSERT "('d1', 'd1', 'row', 'add_remove', 'basic', 4, 1e-5,"
		" '[0.5,0]', '[0,0]', 0, 1, 0, 't', 't');"
		"COMMIT;");

	cr_assert_neq(dpg_run(out, sizeof(out), db.migrate), 0, "keys list migrated it: %s", out);
	cr_assert_eq(sqlite3_open(db.path, &h), SQLITE_OK);
	cr_assert_eq(count(h, "SELECT max(version) FROM schema_migrations"), 5);
	cr_assert_eq(count(h, "SELECT charges FROM datasets WHERE id = 'd1'"), 1);
	sqlite3_close(h);

	old_db_remove(&db);
}
