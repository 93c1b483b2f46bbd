/*
 * store_pate.c: PATE aggregation sessions (pate_sessions) and the answered
 * vote histograms a smooth-sensitivity release reads (pate_answers).  What
 * the rows mean (configurations, the data-dependent RDP) is the routes'
 * (api_pate_session.c); this file stores and returns them as text, numbers
 * and blobs.
 */
#include <stdlib.h>
#include <string.h>


#include "store.h"
#include "store_internal.h"

void srv_pate_row_clear(srv_pate_row *r)
{
	if (!r)
		return;
	free(r->config);
	memset(r, 0, sizeof(*r));
}

static void copy_column(char *dst, size_t size, srv__stmt *st, int col)
{
	srv_strcopy(dst, size, srv__sql_text(st, col));
}

#define PATE_ROW_COLUMNS                                                  \
	"id, dataset_id, config, queries, checks, teacher_answers,"        \
	" student_answers, abstained, releases, created_at, updated_at, actor"

/* The session row st stands on (PATE_ROW_COLUMNS) into ret, cleared
 * first; SRV_OK or SRV_DB_ERROR (out of memory). */
static int read_row(srv__stmt *st, srv_pate_row *ret)
{
	memset(ret, 0, sizeof(*ret));
	copy_column(ret->id, sizeof(ret->id), st, 0);
	copy_column(ret->dataset_id, sizeof(ret->dataset_id), st, 1);
	ret->config = strdup(srv__sql_text(st, 2));
	if (!ret->config)
		return SRV_DB_ERROR;
	ret->queries = srv__sql_int64(st, 3);
	ret->checks = srv__sql_int64(st, 4);
	ret->teacher_answers = srv__sql_int64(st, 5);
	ret->student_answers = srv__sql_int64(st, 6);
	ret->abstained = srv__sql_int64(st, 7);
	ret->releases = srv__sql_int64(st, 8);
	copy_column(ret->created_at, sizeof(ret->created_at), st, 9);
	copy_column(ret->updated_at, sizeof(ret->updated_at), st, 10);
	copy_column(ret->actor, sizeof(ret->actor), st, 11);
	return SRV_OK;
}

int srv_store_pate_get(srv_db *db, const char *dataset_id, const char *sid, srv_pate_row *ret)
{
	srv__stmt *st = srv__prepare_text2(db,
					   "SELECT " PATE_ROW_COLUMNS
					   " FROM pate_sessions WHERE id = ?1 AND dataset_id = ?2",
					   sid, dataset_id);
	int rc = srv__first_row(st);

	memset(ret, 0, sizeof(*ret));
	if (rc == SRV_OK)
		rc = read_row(st, ret);
	srv__sql_finalize(st);
	return rc;
}

int srv_store_pate_create(srv_db *db, const srv_pate_row *row, const char *dd_rdp,
			  const char *actor)
{
	srv__stmt *st = srv__prepare(db,
					"INSERT INTO pate_sessions (id, dataset_id, config, dd_rdp, actor,"
					" created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
					row->id);

	if (st) {
		srv__sql_bind_text(st, 2, row->dataset_id);
		srv__sql_bind_text(st, 3, row->config);
		srv__sql_bind_text(st, 4, dd_rdp);
		srv__sql_bind_text(st, 5, actor);
		srv__sql_bind_text(st, 6, row->created_at);
	}
	return srv__run(st);
}

/* A dataset's sessions in (created_at, id) order, the order of
 * pate_sessions_by_dataset, from the first or from just after a session. */
#define PATE_PAGE_SQL(from)                                                           \
	"SELECT " PATE_ROW_COLUMNS " FROM pate_sessions WHERE dataset_id = ?1" from \
	" ORDER BY created_at, id LIMIT ?2"

struct session_lister {
	int (*each)(void *arg, const srv_pate_row *row);
	void *arg;
};

static int session_listed(srv__stmt *st, void *arg)
{
	struct session_lister *sl = arg;
	srv_pate_row row;
	int rc = read_row(st, &row) == SRV_OK ? sl->each(sl->arg, &row) : -1;

	srv_pate_row_clear(&row);
	return rc;
}

int srv_store_pate_list(srv_db *db, const char *dataset_id, const char *after, int64_t limit,
			int (*each)(void *arg, const srv_pate_row *row), void *arg,
			bool *ret_more)
{
	struct session_lister sl = {each, arg};

	return srv__db_page_after(
		db,
		after ? PATE_PAGE_SQL(" AND (created_at, id) > (SELECT created_at, id"
				      " FROM pate_sessions WHERE id = ?3 AND dataset_id = ?1)")
		      : PATE_PAGE_SQL(""),
		dataset_id, after, limit, session_listed, &sl, ret_more);
}

int srv_store_pate_dd_get(srv_db *db, const char *sid, char **ret)
{
	srv__stmt *st = srv__prepare(db, "SELECT dd_rdp FROM pate_sessions WHERE id = ?1", sid);
	int rc = SRV_DB_ERROR;

	*ret = NULL;
	if (srv__first_row(st) == SRV_OK) {
		*ret = strdup(srv__sql_text(st, 0));
		if (*ret)
			rc = SRV_OK;
	}
	srv__sql_finalize(st);
	return rc;
}

int srv_store_pate_add_batch(srv_db *db, const char *sid, const srv_pate_counts *add,
			     const char *dd_rdp, const char *now)
{
	srv__stmt *st = srv__prepare(db,
					"UPDATE pate_sessions SET queries = queries + ?2,"
					" checks = checks + ?3, teacher_answers = teacher_answers + ?4,"
					" student_answers = student_answers + ?5,"
					" abstained = abstained + ?6, dd_rdp = ?7, updated_at = ?8"
					" WHERE id = ?1",
					sid);
	int rc = SRV_DB_ERROR;

	if (!st)
		return SRV_DB_ERROR;
	srv__sql_bind_int64(st, 2, add->queries);
	srv__sql_bind_int64(st, 3, add->checks);
	srv__sql_bind_int64(st, 4, add->teacher_answers);
	srv__sql_bind_int64(st, 5, add->student_answers);
	srv__sql_bind_int64(st, 6, add->abstained);
	srv__sql_bind_text(st, 7, dd_rdp);
	srv__sql_bind_text(st, 8, now);
	if (srv__sql_step(st) == SRV__SQL_DONE && srv__sql_changes(srv__db_conn(db)) == 1)
		rc = SRV_OK;
	srv__sql_finalize(st);
	return rc;
}

int srv_store_pate_add_answer(srv_db *db, const char *sid, int64_t charge_seq,
			      const int32_t *votes, size_t m)
{
	srv__stmt *st = srv__cached_stmt(db, "INSERT INTO pate_answers (session_id, charge_seq,"
					    " votes) VALUES (?1, ?2, ?3)");
	int rc = SRV_DB_ERROR;

	if (!st)
		return SRV_DB_ERROR;
	srv__sql_bind_text(st, 1, sid);
	srv__sql_bind_int64(st, 2, charge_seq);
	srv__sql_bind_blob(st, 3, votes, (int)(m * sizeof(*votes)));
	if (srv__sql_step(st) == SRV__SQL_DONE)
		rc = SRV_OK;
	srv__sql_reset(st);
	return rc;
}

int srv_store_pate_add_release(srv_db *db, const char *sid, const char *now)
{
	return srv__run(srv__prepare_text2(db,
					   "UPDATE pate_sessions SET releases = releases + 1,"
					   " updated_at = ?2 WHERE id = ?1",
					   sid, now));
}

int srv_store_pate_counters(srv_db *db, const char *sid, int64_t *ret_checks,
			    int64_t *ret_answers)
{
	srv__stmt *st = srv__prepare(
		db, "SELECT checks, teacher_answers FROM pate_sessions WHERE id = ?1", sid);
	int rc = srv__first_row(st);

	if (rc == SRV_OK) {
		*ret_checks = srv__sql_int64(st, 0);
		*ret_answers = srv__sql_int64(st, 1);
	}
	srv__sql_finalize(st);
	return rc;
}

static int answer_row(srv__stmt *st, void *arg)
{
	struct srv__lister *w = arg;

	return w->each.votes(w->arg, srv__sql_blob(st, 0), (size_t)srv__sql_bytes(st, 0));
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
	return srv__db_begin_read(db) == 0 ? SRV_OK : SRV_DB_ERROR;
}

void srv_store_read_end(srv_db *db)
{
	srv__db_end_read(db);
}
