/*
 * store_migrate.c: `dpgate migrate`, an SQLite database copied whole into
 * an empty PostgreSQL database, and its ledgers verified before the copy
 * is committed.
 *
 * The source is read on a read-only connection inside one read
 * transaction, so the copy is one consistent snapshot even while a server
 * goes on writing the file.  The target is migrated by the normal path
 * (srv_store_open), then every table is copied in one PostgreSQL
 * transaction that first locks all of them and finds them empty: a
 * database that holds data is never merged into.  Before the COMMIT the
 * copy is verified the way `dpgate verify` does and its per-dataset
 * findings compared with the source's; any difference rolls it all back.
 *
 * Columns are read from the target's catalogue, so a migration that adds
 * a column needs nothing here; a new table must be added to copied[], and
 * until it is, migrate refuses (the table-count check below).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpg_limits.h"
#include "store.h"
#include "store_internal.h"
#include "store_pg.h"

/* Parents before the rows that reference them (foreign keys are checked
 * per statement).  schema_migrations is not copied: the target records
 * its own, at the same version. */
static const char *const copied[SRV_MIGRATE_TABLES] = {
	"datasets", "ledger",       "reservations", "idempotency",   "api_keys",
	"key_events", "dataset_data", "jobs",       "pate_sessions", "pate_answers",
};

/* Tables only a PostgreSQL database has (an SQLite ledger keeps hosted
 * tables and jobs' models as files): the target's must be empty, and
 * nothing is copied into them. */
static const char *const target_only[] = {"table_blobs", "model_blobs"};
#define TARGET_ONLY_TABLES (sizeof(target_only) / sizeof(target_only[0]))

enum col_kind { COL_INT, COL_REAL, COL_TEXT, COL_BLOB };

/* One table's copy: the statements and how each column is carried. */
struct table_copy {
	char select_sql[DPG_MIGRATE_SQL_BYTES];
	char insert_sql[DPG_MIGRATE_SQL_BYTES];
	char identity[DPG_MAX_ID_BYTES + 1]; /* the identity column, or "" */
	enum col_kind kinds[DPG_MIGRATE_MAX_COLUMNS];
	int n;
};

/* A one-row integer query with ?1 bound to text1 (may be NULL); -1 when
 * it fails. */
static int64_t query_count(srv_db *db, const char *sql, const char *text1)
{
	srv__stmt *s = srv__prepare(db, sql, text1);
	int64_t v = -1;

	if (srv__first_row(s) == SRV_OK) {
		v = srv__sql_int64(s, 0);
		srv__sql_finalize(s);
	}
	return v;
}

static enum col_kind kind_of(const char *pg_type)
{
	if (strcmp(pg_type, "bigint") == 0 || strcmp(pg_type, "integer") == 0)
		return COL_INT;
	if (strcmp(pg_type, "double precision") == 0)
		return COL_REAL;
	return strcmp(pg_type, "bytea") == 0 ? COL_BLOB : COL_TEXT;
}

/* Appends a column to both statements; false when they would not fit. */
static bool add_column(struct table_copy *tc, const char *name)
{
	size_t sl = strlen(tc->select_sql), il = strlen(tc->insert_sql);
	const char *sep = tc->n == 0 ? "" : ", ";

	return snprintf(tc->select_sql + sl, sizeof(tc->select_sql) - sl, "%s%s", sep, name) <
		       (int)(sizeof(tc->select_sql) - sl) &&
	       snprintf(tc->insert_sql + il, sizeof(tc->insert_sql) - il, "%s%s", sep, name) <
		       (int)(sizeof(tc->insert_sql) - il);
}

/* Builds table's copy statements from the target's columns, and checks
 * that the source has as many. */
static int table_plan(srv_db *src, srv_db *dst, const char *table, struct table_copy *tc,
		      srv_error *err)
{
	srv__stmt *s = srv__prepare(dst, "SELECT column_name, data_type, is_identity"
					 " FROM information_schema.columns"
					 " WHERE table_schema = current_schema() AND table_name = ?1"
					 " ORDER BY ordinal_position", table);
	int step, rc = -1;
	size_t len;

	memset(tc, 0, sizeof(*tc));
	snprintf(tc->select_sql, sizeof(tc->select_sql), "SELECT ");
	snprintf(tc->insert_sql, sizeof(tc->insert_sql), "INSERT INTO %s (", table);
	while (s && (step = srv__sql_step(s)) == SRV__SQL_ROW) {
		const char *name = srv__sql_text(s, 0);

		if (tc->n == DPG_MIGRATE_MAX_COLUMNS || !add_column(tc, name))
			goto out;
		tc->kinds[tc->n++] = kind_of(srv__sql_text(s, 1));
		if (strcmp(srv__sql_text(s, 2), "YES") == 0)
			snprintf(tc->identity, sizeof(tc->identity), "%s", name);
	}
	if (!s || step != SRV__SQL_DONE || tc->n == 0)
		goto out;
	/* The source's columns, by SQLite's table-valued pragma. */
	if (query_count(src, "SELECT count(*) FROM pragma_table_info(?1)", table) != tc->n)
		goto out;
	len = strlen(tc->select_sql);
	snprintf(tc->select_sql + len, sizeof(tc->select_sql) - len, " FROM %s", table);
	for (int i = 0; i < tc->n; i++) {
		len = strlen(tc->insert_sql);
		snprintf(tc->insert_sql + len, sizeof(tc->insert_sql) - len, "%s?%d",
			 i == 0 ? ") VALUES (" : ", ", i + 1);
	}
	len = strlen(tc->insert_sql);
	if (snprintf(tc->insert_sql + len, sizeof(tc->insert_sql) - len, ")") >= 1)
		rc = 0;
out:
	srv__sql_finalize(s);
	if (rc < 0)
		srv_error_set(err, SRV_DB_ERROR,
			      "table %s differs between the source and the target", table);
	return rc;
}

/* Binds column i of the source row to parameter i + 1 of the insert; a
 * NULL stays unbound, which is NULL. */
static void bind_column(srv__stmt *from, srv__stmt *to, const struct table_copy *tc, int i)
{
	if (srv__sql_is_null(from, i))
		return;
	switch (tc->kinds[i]) {
	case COL_INT:
		srv__sql_bind_int64(to, i + 1, srv__sql_int64(from, i));
		break;
	case COL_REAL:
		srv__sql_bind_double(to, i + 1, srv__sql_double(from, i));
		break;
	case COL_BLOB:
		srv__sql_bind_blob(to, i + 1, srv__sql_blob(from, i), srv__sql_bytes(from, i));
		break;
	case COL_TEXT:
		srv__sql_bind_text(to, i + 1, srv__sql_text(from, i));
		break;
	}
}

/* Copies every row of one table (its identity values as they are), then
 * sets its identity's sequence past the largest, so that the next row a
 * server writes gets a number never used.  Rows copied, or -1. */
static int64_t copy_table(srv_db *src, srv_db *dst, const char *table, srv_error *err)
{
	struct table_copy tc;
	srv__stmt *from = NULL, *to = NULL;
	char sql[DPG_MIGRATE_SQL_BYTES];
	int64_t rows = 0;
	int step;

	if (table_plan(src, dst, table, &tc, err) < 0)
		return -1;
	from = srv__prepare(src, tc.select_sql, NULL);
	to = srv__prepare(dst, tc.insert_sql, NULL);
	while (from && to && (step = srv__sql_step(from)) == SRV__SQL_ROW) {
		srv__sql_reset(to);
		for (int i = 0; i < tc.n; i++)
			bind_column(from, to, &tc, i);
		if (srv__sql_step(to) != SRV__SQL_DONE)
			goto fail;
		rows++;
	}
	if (!from || !to || step != SRV__SQL_DONE)
		goto fail;
	if (tc.identity[0]) {
		snprintf(sql, sizeof(sql),
			 "SELECT setval(pg_get_serial_sequence(?1, '%s'),"
			 " coalesce(max(%s), 0) + 1, false) FROM %s",
			 tc.identity, tc.identity, table);
		if (query_count(dst, sql, table) < 1)
			goto fail;
	}
	srv__sql_finalize(from);
	srv__sql_finalize(to);
	return rows;
fail:
	srv_error_set(err, SRV_DB_ERROR, "copying table %s failed: %s", table,
		      srv__db_errmsg(dst));
	srv__sql_finalize(from);
	srv__sql_finalize(to);
	return -1;
}

/* The rows of `table`, by a statement built from the fixed table list. */
static int64_t table_rows(srv_db *db, const char *table)
{
	char sql[DPG_MIGRATE_SQL_BYTES];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	return query_count(db, sql, NULL);
}

/*
 * Inside the target's write transaction: keeps every server off the
 * tables until COMMIT, then checks that each is empty and that the target
 * has no table the copy would leave out.  0, or -1 with the reason in err.
 */
static int target_take_empty(srv_db *dst, const char *name, srv_error *err)
{
	char sql[DPG_MIGRATE_SQL_BYTES] = "LOCK TABLE ";
	int64_t tables;

	for (size_t i = 0; i < SRV_MIGRATE_TABLES + TARGET_ONLY_TABLES; i++) {
		size_t len = strlen(sql);

		snprintf(sql + len, sizeof(sql) - len, "%s%s", i ? ", " : "",
			 i < SRV_MIGRATE_TABLES ? copied[i] : target_only[i - SRV_MIGRATE_TABLES]);
	}
	strncat(sql, " IN EXCLUSIVE MODE", sizeof(sql) - strlen(sql) - 1);
	if (srv__sql_exec(srv__db_conn(dst), sql) != SRV__SQL_DONE) {
		srv_error_set(err, SRV_DB_ERROR, "cannot lock the tables of %s: %s", name,
			      srv__db_errmsg(dst));
		return -1;
	}
	for (size_t i = 0; i < SRV_MIGRATE_TABLES + TARGET_ONLY_TABLES; i++) {
		const char *t = i < SRV_MIGRATE_TABLES ? copied[i] : target_only[i - SRV_MIGRATE_TABLES];

		if (table_rows(dst, t) != 0) {
			srv_error_set(err, SRV_CONFLICT,
				      "%s is not empty (table %s has rows); migrate copies into an "
				      "empty database only, never merges", name, t);
			return -1;
		}
	}
	tables = query_count(dst, "SELECT count(*) FROM pg_catalog.pg_tables"
				  " WHERE schemaname = current_schema() AND tablename <> ?1",
			     "schema_migrations");
	if (tables != SRV_MIGRATE_TABLES + (int64_t)TARGET_ONLY_TABLES) {
		srv_error_set(err, SRV_DB_ERROR,
			      "%s has %lld tables besides schema_migrations, dpgate has %d",
			      name, (long long)tables, (int)(SRV_MIGRATE_TABLES + TARGET_ONLY_TABLES));
		return -1;
	}
	return 0;
}

/* The source's tables besides schema_migrations must be the ones copied. */
static int source_tables_known(srv_db *src, const char *name, srv_error *err)
{
	int64_t tables = query_count(src, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
					  " AND name <> ?1 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
				     "schema_migrations");

	if (tables == SRV_MIGRATE_TABLES)
		return 0;
	srv_error_set(err, SRV_DB_ERROR, "%s has %lld tables besides schema_migrations, "
		      "migrate copies %d", name, (long long)tables, SRV_MIGRATE_TABLES);
	return -1;
}

/* Each dataset's verification on the source, then the copy's against it. */
struct verified {
	srv_verify_dataset *v;
	size_t n, cap, at;
	bool failed, differs;
};

static void collect(void *arg, const srv_verify_dataset *v)
{
	struct verified *vd = arg;

	if (vd->n == vd->cap) {
		size_t cap = vd->cap ? 2 * vd->cap : 16;
		srv_verify_dataset *grown = realloc(vd->v, cap * sizeof(*grown));

		if (!grown) {
			vd->failed = true;
			return;
		}
		vd->v = grown;
		vd->cap = cap;
	}
	vd->v[vd->n++] = *v;
}

/* The copy's finding for a dataset must be the source's, bit for bit:
 * the same rows replayed by the same code give the same doubles. */
static void compare(void *arg, const srv_verify_dataset *v)
{
	struct verified *vd = arg;
	const srv_verify_dataset *s = vd->at < vd->n ? &vd->v[vd->at] : NULL;

	vd->at++;
	if (!s || strcmp(s->id, v->id) != 0 || s->rows != v->rows ||
	    s->rows_with_totals != v->rows_with_totals || s->ok != v->ok ||
	    s->totals_match != v->totals_match || s->within_budget != v->within_budget ||
	    memcmp(&s->spent_epsilon, &v->spent_epsilon, sizeof(double)) != 0 ||
	    memcmp(&s->stored_spent_epsilon, &v->stored_spent_epsilon, sizeof(double)) != 0)
		vd->differs = true;
}

/* Verifies the uncommitted copy against the source: every table's row
 * count, then every dataset's ledger replay.  0, or -1 with err set. */
static int verify_copy(srv_db *src, srv_db *dst, srv_migrate_report *rep, srv_error *err)
{
	struct verified vd = {0};
	int src_rc, dst_rc, rc = -1;

	for (size_t i = 0; i < SRV_MIGRATE_TABLES; i++)
		if (table_rows(src, copied[i]) != table_rows(dst, copied[i])) {
			srv_error_set(err, SRV_CONFLICT, "table %s: the copy has other rows than "
				      "the source", copied[i]);
			return -1;
		}
	src_rc = srv__verify_in_txn(src, collect, &vd);
	dst_rc = vd.failed ? SRV_DB_ERROR : srv__verify_in_txn(dst, compare, &vd);
	if (src_rc == SRV_DB_ERROR || dst_rc == SRV_DB_ERROR || vd.failed)
		srv_error_set(err, SRV_CONFLICT, "cannot verify the copy: %s", srv__db_errmsg(dst));
	else if (vd.differs || vd.at != vd.n)
		srv_error_set(err, SRV_CONFLICT, "the copy's ledgers do not verify as the "
			      "source's do");
	else if (dst_rc != SRV_OK)
		srv_error_set(err, SRV_CONFLICT, "the copy's ledgers do not verify, nor do the "
			      "source's: run `dpgate verify` on the source");
	else
		rc = 0;
	rep->datasets = (int64_t)vd.n;
	free(vd.v);
	return rc;
}

/*
 * The copy itself, on a read snapshot of the source and in one write
 * transaction of the target.  SRV_OK (committed), SRV_DB_ERROR (refused
 * before a row was written) or SRV_CONFLICT (copied but not verified, or
 * failed on the way: rolled back), with err set.
 */
static int copy_all(srv_db *src, srv_db *dst, const char *from, const char *to,
		    srv_migrate_report *rep, srv_error *err)
{
	int rc = SRV_DB_ERROR;

	if (srv__db_begin_read(src) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot read %s: %s", from, srv__db_errmsg(src));
		return rc;
	}
	if (source_tables_known(src, from, err) < 0)
		goto out;
	if (srv__begin_write(dst) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot write %s: %s", to, srv__db_errmsg(dst));
		goto out;
	}
	if (target_take_empty(dst, to, err) < 0)
		goto out;
	rc = SRV_CONFLICT;
	for (size_t i = 0; i < SRV_MIGRATE_TABLES; i++) {
		rep->tables[i] = copied[i];
		rep->rows[i] = copy_table(src, dst, copied[i], err);
		if (rep->rows[i] < 0)
			goto out;
	}
	if (verify_copy(src, dst, rep, err) < 0)
		goto out;
	if (srv__commit(dst) != SRV_OK) {
		srv_error_set(err, SRV_CONFLICT, "the COMMIT of the copy failed: %s",
			      srv__db_errmsg(dst));
		goto out;
	}
	rc = SRV_OK;
out:
	srv__rollback(dst);
	srv__db_end_read(src);
	return rc;
}

/*
 * Before the target is migrated: it must be a PostgreSQL database that is
 * reachable and either has no objects at all or is dpgate's at this
 * binary's version (its tables are checked empty under the lock later).
 * Nothing is written.  0, or -1 with err set.
 */
static int target_precheck(const char *to, const char *name, srv_error *err)
{
	srv__conn *c = srv__pg_open(to, true, err);
	srv__stmt *s;
	int64_t has_migrations, objects, version = -1;
	int rc = -1;

	if (!c)
		return -1;
	if (c->drv->schema_objects(c, &has_migrations, &objects) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot read %s: %s", name, c->drv->errmsg(c));
		goto out;
	}
	if (objects == 0) {
		rc = 0;
		goto out;
	}
	s = has_migrations ? srv__sql_prepare(c, "SELECT max(version) FROM schema_migrations") :
			     NULL;
	if (s && srv__sql_step(s) == SRV__SQL_ROW && !srv__sql_is_null(s, 0))
		version = srv__sql_int64(s, 0);
	srv__sql_finalize(s);
	if (version == srv_store_known_schema_version())
		rc = 0;
	else
		srv_error_set(err, SRV_DB_ERROR,
			      "%s is not empty (it has tables%s); migrate copies into an empty "
			      "database only", name,
			      has_migrations ? " of another dpgate schema version" : "");
out:
	srv__sql_close(c);
	return rc;
}

int srv_store_migrate(const char *from, const char *to, srv_migrate_report *rep, srv_error *err)
{
	srv_store *src_store = NULL, *dst_store = NULL;
	srv_db *src, *dst;
	char name[256];
	int rc = SRV_DB_ERROR;

	memset(rep, 0, sizeof(*rep));
	srv_store_target_name(to, name, sizeof(name));
	if (srv_store_is_shared(from) || !srv_store_is_shared(to)) {
		srv_error_set(err, SRV_DB_ERROR, "migrate copies an SQLite file (--from) into a "
			      "PostgreSQL database (--to postgresql://...)");
		return rc;
	}
	/* The source at this version only: its reader never migrates it. */
	if (srv_store_open_read_only(from, false, &src_store, err) < 0)
		return rc;
	if (target_precheck(to, name, err) < 0 || srv_store_open(to, 1, &dst_store, err) < 0)
		goto out;
	rep->schema_version = srv_store_known_schema_version();
	src = srv_store_acquire(src_store);
	dst = srv_store_acquire(dst_store);
	rc = copy_all(src, dst, srv_store_file(from), name, rep, err);
	srv_store_release(dst_store, dst);
	srv_store_release(src_store, src);
out:
	srv_store_close(dst_store);
	srv_store_close(src_store);
	return rc;
}
