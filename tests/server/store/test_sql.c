/*
 * test_sql.c: the statement interface (store_sql.h) as a driver must keep
 * it: values come back as they were bound, bit for bit; ?N may appear
 * twice; a reset clears what was bound; a duplicate key is CONSTRAINT and
 * a CHECK that refuses a row is not; changes counts rows; a rolled-back
 * transaction or savepoint leaves nothing; RETURNING gives the row's key;
 * the per-connection cache keys by the SQL's address.  Each expected value
 * is the one the test bound or wrote itself.
 */
#include <criterion/criterion.h>

#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_internal.h"
#include "store_sqlite.h"

struct sql_fixture {
	char dir[64], path[128];
	srv__conn *c;
};

static const char scratch_schema[] =
	"CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB,"
	" n INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0));";

static srv__conn *open_scratch(struct sql_fixture *fx)
{
	srv_error err;

	srv_error_init(&err);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/dpg-sql-XXXXXX");
	cr_assert_not_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/t.db", fx->dir);
	fx->c = srv__sqlite_open(fx->path, SRV__SQLITE_WRITE, &err);
	cr_assert_not_null(fx->c, "%s", err.text);
	cr_assert_eq(srv__sql_exec(fx->c, scratch_schema), SRV__SQL_DONE);
	return fx->c;
}

static void close_scratch(struct sql_fixture *fx)
{
	char path[160];

	srv__sql_close(fx->c);
	unlink(fx->path);
	snprintf(path, sizeof(path), "%s-wal", fx->path);
	unlink(path);
	snprintf(path, sizeof(path), "%s-shm", fx->path);
	unlink(path);
	rmdir(fx->dir);
}

/* Runs a statement without parameters to its end; its outcome. */
static int run(srv__conn *c, const char *sql)
{
	srv__stmt *s = srv__sql_prepare(c, sql);
	int rc;

	cr_assert_not_null(s, "prepare %s", sql);
	rc = srv__sql_step(s);
	srv__sql_finalize(s);
	return rc;
}

static int64_t count_rows(srv__conn *c)
{
	srv__stmt *s = srv__sql_prepare(c, "SELECT count(*) FROM t");
	int64_t n;

	cr_assert_eq(srv__sql_step(s), SRV__SQL_ROW);
	n = srv__sql_int64(s, 0);
	srv__sql_finalize(s);
	return n;
}

Test(sql, values_come_back_bit_for_bit)
{
	static const int64_t ints[] = {0, 1, -1, INT64_MAX, INT64_MIN, 1LL << 53};
	/* No -0.0: SQLite keeps an integral REAL as an integer, and the store
	 * never stores one (costs are kept as text). */
	static const double reals[] = {0.1, 1.0 / 3.0, DBL_TRUE_MIN, DBL_MAX, -2.5, 1e-300};
	static const char text[] = "naïve ε = 0.5; 'quoted' \"too\"";
	static const unsigned char blob[] = {0, 1, 0, 255, 'x', 0};
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);

	for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
		srv__stmt *s = srv__sql_prepare(c, "INSERT INTO t (id, i, r, s, b) VALUES"
						   " (?1, ?2, ?3, ?4, ?5)");
		srv__stmt *q;
		double r;

		srv__sql_bind_int64(s, 1, (int64_t)k + 1);
		srv__sql_bind_int64(s, 2, ints[k]);
		srv__sql_bind_double(s, 3, reals[k]);
		srv__sql_bind_text(s, 4, text);
		srv__sql_bind_blob(s, 5, blob, sizeof(blob));
		cr_assert_eq(srv__sql_step(s), SRV__SQL_DONE);
		srv__sql_finalize(s);
		q = srv__sql_prepare(c, "SELECT i, r, s, b, id FROM t WHERE id = ?1");
		srv__sql_bind_int64(q, 1, (int64_t)k + 1);
		cr_assert_eq(srv__sql_step(q), SRV__SQL_ROW);
		cr_assert_eq(srv__sql_int64(q, 0), ints[k], "row %zu", k);
		r = srv__sql_double(q, 1);
		cr_assert(memcmp(&r, &reals[k], sizeof(r)) == 0, "row %zu: %a, not %a", k, r,
			  reals[k]);
		cr_assert_str_eq(srv__sql_text(q, 2), text);
		cr_assert_eq(srv__sql_bytes(q, 3), sizeof(blob));
		cr_assert(memcmp(srv__sql_blob(q, 3), blob, sizeof(blob)) == 0);
		cr_assert_eq(srv__sql_step(q), SRV__SQL_DONE);
		srv__sql_finalize(q);
	}
	close_scratch(&fx);
}

Test(sql, null_reads_as_null_and_a_placeholder_may_repeat)
{
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);
	srv__stmt *s = srv__sql_prepare(c, "INSERT INTO t (id, i, s) VALUES (?1, ?1 * 10, ?2)");

	srv__sql_bind_int64(s, 1, 7);
	srv__sql_bind_text(s, 2, NULL); /* left NULL */
	cr_assert_eq(srv__sql_step(s), SRV__SQL_DONE);
	srv__sql_finalize(s);
	s = srv__sql_prepare(c, "SELECT i, s, r FROM t WHERE id = 7");
	cr_assert_eq(srv__sql_step(s), SRV__SQL_ROW);
	cr_assert_eq(srv__sql_int64(s, 0), 70);
	cr_assert(srv__sql_is_null(s, 1));
	cr_assert_null(srv__sql_text(s, 1));
	cr_assert(srv__sql_is_null(s, 2));
	cr_assert(!srv__sql_is_null(s, 0));
	srv__sql_finalize(s);
	close_scratch(&fx);
}

Test(sql, failure_classes)
{
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);

	cr_assert_eq(run(c, "INSERT INTO t (id) VALUES (1)"), SRV__SQL_DONE);
	cr_assert_eq(run(c, "INSERT INTO t (id) VALUES (1)"), SRV__SQL_CONSTRAINT,
		     "a duplicate key");
	cr_assert_eq(run(c, "INSERT INTO t (id, n) VALUES (2, -1)"), SRV__SQL_ERROR,
		     "a CHECK refusing the row is no duplicate");
	cr_assert_eq(run(c, "INSERT INTO t (id, n) VALUES (3, NULL)"), SRV__SQL_ERROR,
		     "nor is a NOT NULL");
	cr_assert_null(srv__sql_prepare(c, "SELECT nothing FROM nowhere"));
	cr_assert_eq(count_rows(c), 1);
	close_scratch(&fx);
}

Test(sql, changes_and_returning)
{
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);
	srv__stmt *s;

	cr_assert_eq(run(c, "INSERT INTO t (id, i) VALUES (1, 1), (2, 1), (3, 2)"), SRV__SQL_DONE);
	cr_assert_eq(srv__sql_changes(c), 3);
	cr_assert_eq(run(c, "UPDATE t SET s = 'x' WHERE i = 1"), SRV__SQL_DONE);
	cr_assert_eq(srv__sql_changes(c), 2);
	cr_assert_eq(run(c, "UPDATE t SET s = 'x' WHERE i = 9"), SRV__SQL_DONE);
	cr_assert_eq(srv__sql_changes(c), 0);
	s = srv__sql_prepare(c, "INSERT INTO t (i) VALUES (5) RETURNING id");
	cr_assert_eq(srv__sql_step(s), SRV__SQL_ROW);
	cr_assert_eq(srv__sql_int64(s, 0), 4, "the next key after 3");
	srv__sql_finalize(s);
	close_scratch(&fx);
}

Test(sql, rollback_and_savepoints_leave_nothing)
{
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);

	cr_assert(!c->drv->in_transaction(c));
	cr_assert_eq(c->drv->begin_write(c), SRV__SQL_DONE);
	cr_assert(c->drv->in_transaction(c));
	cr_assert_eq(c->drv->lock_dataset(c, "d1"), SRV__SQL_DONE);
	cr_assert_eq(run(c, "INSERT INTO t (id) VALUES (1)"), SRV__SQL_DONE);
	cr_assert_eq(c->drv->rollback(c), SRV__SQL_DONE);
	cr_assert(!c->drv->in_transaction(c));
	cr_assert_eq(count_rows(c), 0);

	cr_assert_eq(c->drv->begin_write(c), SRV__SQL_DONE);
	cr_assert_eq(run(c, "INSERT INTO t (id) VALUES (1)"), SRV__SQL_DONE);
	cr_assert_eq(srv__sql_step_once(c, "SAVEPOINT spend"), SRV__SQL_DONE);
	cr_assert_eq(run(c, "INSERT INTO t (id) VALUES (2)"), SRV__SQL_DONE);
	cr_assert_eq(srv__sql_step_once(c, "ROLLBACK TO spend"), SRV__SQL_DONE);
	cr_assert_eq(srv__sql_step_once(c, "RELEASE spend"), SRV__SQL_DONE);
	cr_assert_eq(c->drv->commit(c), SRV__SQL_DONE);
	cr_assert_eq(count_rows(c), 1, "the row before the savepoint, alone");
	close_scratch(&fx);
}

Test(sql, cache_keys_by_address_and_reset_clears_bindings)
{
	static const char sql_a[] = "SELECT ?1";
	static const char sql_b[] = "SELECT ?1";
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);
	srv__stmt *a = srv__sql_cached(c, sql_a);

	cr_assert_not_null(a);
	cr_assert_eq(srv__sql_cached(c, sql_a), a, "the same SQL address, the same statement");
	cr_assert_neq(srv__sql_cached(c, sql_b), a, "equal text at another address is another");
	a = srv__sql_cached(c, sql_a);
	srv__sql_bind_int64(a, 1, 42);
	cr_assert_eq(srv__sql_step(a), SRV__SQL_ROW);
	cr_assert_eq(srv__sql_int64(a, 0), 42);
	srv__sql_reset(a);
	a = srv__sql_cached(c, sql_a);
	cr_assert_eq(srv__sql_step(a), SRV__SQL_ROW);
	cr_assert(srv__sql_is_null(a, 0), "a reset statement has nothing bound");
	srv__sql_reset(a);
	close_scratch(&fx);
}

Test(sql, data_version_moves_on_another_connections_commit)
{
	struct sql_fixture fx;
	srv__conn *c = open_scratch(&fx);
	srv_error err;
	srv__conn *other;
	unsigned before, mine, after;

	srv_error_init(&err);
	other = srv__sqlite_open(fx.path, SRV__SQLITE_WRITE, &err);
	cr_assert_not_null(other, "%s", err.text);
	/* As spend_batch reads it: right after its own COMMIT, then again in
	 * its next write transaction. */
	cr_assert_eq(c->drv->begin_write(c), SRV__SQL_DONE);
	cr_assert_eq(run(c, "INSERT INTO t (id) VALUES (9)"), SRV__SQL_DONE);
	cr_assert_eq(c->drv->commit(c), SRV__SQL_DONE);
	cr_assert(c->drv->data_version(c, &before));
	cr_assert_eq(c->drv->begin_write(c), SRV__SQL_DONE);
	cr_assert(c->drv->data_version(c, &mine));
	cr_assert_eq(c->drv->commit(c), SRV__SQL_DONE);
	cr_assert_eq(mine, before);
	cr_assert_eq(run(other, "INSERT INTO t (id) VALUES (1)"), SRV__SQL_DONE);
	cr_assert_eq(c->drv->begin_write(c), SRV__SQL_DONE);
	cr_assert(c->drv->data_version(c, &after));
	cr_assert_eq(c->drv->rollback(c), SRV__SQL_DONE);
	cr_assert_neq(after, before, "another connection's commit changes it");
	srv__sql_close(other);
	close_scratch(&fx);
}
