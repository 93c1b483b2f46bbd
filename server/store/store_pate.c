/*
 * store_pate.c: PATE aggregation sessions (pate_sessions) and the answered
 * vote histograms a smooth-sensitivity release reads (pate_answers).  What
 * the rows mean (configurations, the data-dependent RDP) is the routes'
 * (api_pate_session.c); this file stores and returns them as text, numbers
 * and blobs.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"
#include "store_internal.h"

void srv_pate_row_clear(srv_pate_row *r)
{
	if (!r)
		return;
	free(r->config);
	memset(r, 0, sizeof(*r));
}

static void copy_column(char *dst, size_t size, sqlite3_stmt *st, int col)
{
	srv_strcopy(dst, size, (const char *)sqlite3_column_text(st, col));
}

int srv_store_pate_get(srv_db *db, const char *dataset_id, const char *sid, srv_pate_row *ret)
{
	sqlite3_stmt *st;
	int rc;

	memset(ret, 0, sizeof(*ret));
	st = srv__prepare(db,
			  "SELECT id, dataset_id, config, queries, checks, teacher_answers,"
			  " student_answers, abstained, releases, created_at, updated_at"
			  " FROM pate_sessions WHERE id = ?1 AND dataset_id = ?2",
			  sid);
	if (st)
		sqlite3_bind_text(st, 2, dataset_id, -1, SQLITE_STATIC);
	rc = srv__first_row(st);
	if (rc != SRV_OK)
		goto out;
	rc = SRV_DB_ERROR;
	copy_column(ret->id, sizeof(ret->id), st, 0);
	copy_column(ret->dataset_id, sizeof(ret->dataset_id), st, 1);
	ret->config = strdup((const char *)sqlite3_column_text(st, 2));
	if (!ret->config)
		goto out;
	ret->queries = sqlite3_column_int64(st, 3);
	ret->checks = sqlite3_column_int64(st, 4);
	ret->teacher_answers = sqlite3_column_int64(st, 5);
	ret->student_answers = sqlite3_column_int64(st, 6);
	ret->abstained = sqlite3_column_int64(st, 7);
	ret->releases = sqlite3_column_int64(st, 8);
	copy_column(ret->created_at, sizeof(ret->created_at), st, 9);
	copy_column(ret->updated_at, sizeof(ret->updated_at), st, 10);
	rc = SRV_OK;
out:
	sqlite3_finalize(st);
	return rc;
}

int srv_store_pate_create(srv_db *db, const srv_pate_row *row, const char *dd_rdp,
			  const char *actor)
{
	sqlite3_stmt *st = srv__prepare(db,
					"INSERT INTO pate_sessions (id, dataset_id, config, dd_rdp, actor,"
					" created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
					row->id);

	if (st) {
		sqlite3_bind_text(st, 2, row->dataset_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, row->config, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, dd_rdp, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, actor, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, row->created_at, -1, SQLITE_STATIC);
	}
	return srv__run(st);
}

static int id_row(sqlite3_stmt *st, void *arg)
{
	struct srv__lister *w = arg;
	const char *sid = (const char *)sqlite3_column_text(st, 0);

	return w->each.id(w->arg, sid) < 0 ? SRV_DB_ERROR : 0;
}

int srv_store_pate_ids(srv_db *db, const char *dataset_id, int64_t limit,
		       int (*each)(void *arg, const char *sid), void *arg)
{
	struct srv__lister w = {.each.id = each, .arg = arg};
	sqlite3_stmt *st = srv__prepare(db,
					"SELECT id FROM pate_sessions WHERE dataset_id = ?1"
					" ORDER BY created_at, id LIMIT ?2",
					dataset_id);

	if (st)
		sqlite3_bind_int64(st, 2, limit);
	return srv__each_row(st, id_row, &w);
}

int srv_store_pate_dd_get(srv_db *db, const char *sid, char **ret)
{
	sqlite3_stmt *st = srv__prepare(db, "SELECT dd_rdp FROM pate_sessions WHERE id = ?1", sid);
	int rc = SRV_DB_ERROR;

	*ret = NULL;
	if (srv__first_row(st) == SRV_OK) {
		*ret = strdup((const char *)sqlite3_column_text(st, 0));
		if (*ret)
			rc = SRV_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

int srv_store_pate_add_batch(srv_db *db, const char *sid, const srv_pate_counts *add,
			     const char *dd_rdp, const char *now)
{
	sqlite3 *h = srv__db_handle(db);
	sqlite3_stmt *st = srv__prepare(db,
					"UPDATE pate_sessions SET queries = queries + ?2,"
					" checks = checks + ?3, teacher_answers = teacher_answers + ?4,"
					" student_answers = student_answers + ?5,"
					" abstained = abstained + ?6, dd_rdp = ?7, updated_at = ?8"
					" WHERE id = ?1",
					sid);
	int rc = SRV_DB_ERROR;

	if (!st)
		return SRV_DB_ERROR;
	sqlite3_bind_int64(st, 2, add->queries);
	sqlite3_bind_int64(st, 3, add->checks);
	sqlite3_bind_int64(st, 4, add->teacher_answers);
	sqlite3_bind_int64(st, 5, add->student_answers);
	sqlite3_bind_int64(st, 6, add->abstained);
	sqlite3_bind_text(st, 7, dd_rdp, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, now, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(h) == 1)
		rc = SRV_OK;
	sqlite3_finalize(st);
	return rc;
}

int srv_store_pate_add_answer(srv_db *db, const char *sid, int64_t charge_seq,
			      const int32_t *votes, size_t m)
{
	sqlite3_stmt *st = srv__cached_stmt(db, "INSERT INTO pate_answers (session_id, charge_seq,"
					    " votes) VALUES (?1, ?2, ?3)");
	int rc = SRV_DB_ERROR;

	if (!st)
		return SRV_DB_ERROR;
	sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, charge_seq);
	sqlite3_bind_blob(st, 3, votes, (int)(m * sizeof(*votes)), SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_DONE)
		rc = SRV_OK;
	sqlite3_reset(st);
	return rc;
}

int srv_store_pate_add_release(srv_db *db, const char *sid, const char *now)
{
	sqlite3_stmt *st = srv__prepare(db,
					"UPDATE pate_sessions SET releases = releases + 1,"
					" updated_at = ?2 WHERE id = ?1",
					sid);

	if (st)
		sqlite3_bind_text(st, 2, now, -1, SQLITE_STATIC);
	return srv__run(st);
}

int srv_store_pate_counters(srv_db *db, const char *sid, int64_t *ret_checks,
			    int64_t *ret_answers)
{
	sqlite3_stmt *st = srv__prepare(
		db, "SELECT checks, teacher_answers FROM pate_sessions WHERE id = ?1", sid);
	int rc = srv__first_row(st);

	if (rc == SRV_OK) {
		*ret_checks = sqlite3_column_int64(st, 0);
		*ret_answers = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	return rc;
}

static int answer_row(sqlite3_stmt *st, void *arg)
{
	struct srv__lister *w = arg;

	return w->each.votes(w->arg, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
}

int srv_store_pate_each_answer(srv_db *db, const char *sid,
			       int (*each)(void *arg, const int32_t *votes, size_t bytes), void *arg)
{
	struct srv__lister w = {.each.votes = each, .arg = arg};

	return srv__each_row(srv__prepare(db,
					  "SELECT votes FROM pate_answers WHERE session_id = ?1"
					  " ORDER BY id",
					  sid),
			     answer_row, &w);
}

int srv_store_read_begin(srv_db *db)
{
	return sqlite3_exec(srv__db_handle(db), "BEGIN", NULL, NULL, NULL) == SQLITE_OK ?
		       SRV_OK :
		       SRV_DB_ERROR;
}

void srv_store_read_end(srv_db *db)
{
	sqlite3_exec(srv__db_handle(db), "COMMIT", NULL, NULL, NULL);
}
