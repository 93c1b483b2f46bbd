/*
 * store_tables.c: the links of datasets to their hosted tables
 * (dataset_data rows of kind 'table') and, on a shared database, the
 * tables' bytes (table_blobs, schema/pg/013_table_blobs.sql).  The files
 * themselves, their parse and their schema's meaning are the routes'
 * (api_mech_routes.c); this file only reads and writes which table a
 * dataset's link names, and the blob it names on a shared database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpg_limits.h"
#include "store.h"
#include "store_internal.h"

int srv_store_table_link_get(srv_db *db, const char *dataset_id, char **ret_path,
			     char **ret_columns, bool *ret_declared)
{
	srv__stmt *s = srv__prepare(db,
				       "SELECT kind = 'table' AND path IS NOT NULL, path, columns,"
				       " schema_declared FROM dataset_data WHERE dataset_id = ?1",
				       dataset_id);
	int rc = srv__first_row(s);

	*ret_path = NULL;
	*ret_columns = NULL;
	if (rc == SRV_OK && srv__sql_int64(s, 0) == 0)
		rc = SRV_NOT_FOUND;
	if (rc != SRV_OK)
		goto out;
	*ret_path = strdup(srv__sql_text(s, 1));
	if (!srv__sql_is_null(s, 2))
		*ret_columns = strdup(srv__sql_text(s, 2));
	if (ret_declared)
		*ret_declared = srv__sql_int64(s, 3) != 0;
	rc = SRV_OK;
out:
	srv__sql_finalize(s);
	return rc;
}

/* Writes the table's bytes under its link's name, replacing the
 * dataset's blob of an earlier upload; inside the write transaction. */
static int blob_put_in_txn(srv_db *db, const char *dataset_id, const char *path,
			   const struct srv_table_blob *blob)
{
	srv__stmt *s = srv__prepare(db,
				       "INSERT INTO table_blobs (dataset_id, path, csv) VALUES (?1, ?2, ?3)"
				       " ON CONFLICT (dataset_id) DO UPDATE SET path = ?2, csv = ?3",
				       dataset_id);

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 2, path);
	srv__sql_bind_blob(s, 3, blob->bytes, blob->len);
	return srv__run(s);
}

/*
 * Records the uploaded table (already durable at `path`, or in `blob`) in
 * dataset_data, in one write transaction that also reads the file the link
 * named before (*ret_old, malloc'd, NULL when none), so that concurrent
 * uploads each learn exactly the file their own commit replaced.
 */
int srv_store_table_record(srv_db *db, const char *dataset_id, const char *path, int64_t rows,
			   const char *columns, int64_t bytes, bool rows_public, bool schema_declared,
			   const char *actor, const struct srv_table_blob *blob, char **ret_old)
{
	srv__stmt *s = NULL;
	char now[32], *old = NULL;
	int rc = SRV_DB_ERROR;

	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	rc = srv__data_link_hold(db, dataset_id);
	if (rc == SRV_OK)
		rc = srv__table_file_in_txn(db, dataset_id, &old);
	if (rc == SRV_OK && blob)
		rc = blob_put_in_txn(db, dataset_id, path, blob);
	if (rc != SRV_OK)
		goto out;
	rc = SRV_DB_ERROR;
	s = srv__prepare(db,
			 "INSERT INTO dataset_data (dataset_id, kind, builtin, path, rows, columns,"
			 " bytes, actor, created_at, rows_public, schema_declared)"
			 " VALUES (?1, 'table', NULL, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
			 " ON CONFLICT (dataset_id) DO UPDATE SET kind = 'table', builtin = NULL,"
			 " path = ?2, rows = ?3, columns = ?4, bytes = ?5, actor = ?6,"
			 " created_at = ?7, rows_public = ?8, schema_declared = ?9",
			 dataset_id);
	if (!s)
		goto out;
	srv__sql_bind_text(s, 2, path);
	srv__sql_bind_int64(s, 3, rows);
	srv__sql_bind_text(s, 4, columns);
	srv__sql_bind_int64(s, 5, bytes);
	srv__sql_bind_text(s, 6, actor);
	srv__sql_bind_text(s, 7, now);
	srv__sql_bind_int64(s, 8, rows_public);
	srv__sql_bind_int64(s, 9, schema_declared);
	if (srv__sql_step(s) != SRV__SQL_DONE)
		goto out;
	rc = srv__commit(db);
out:
	srv__sql_finalize(s);
	if (rc != SRV_OK) {
		srv__rollback(db);
		free(old);
	} else {
		*ret_old = old;
	}
	return rc;
}

int srv_store_table_blob_get(srv_db *db, const char *dataset_id, const char *path, char **ret,
			      size_t *ret_len)
{
	srv__stmt *s = srv__prepare_text2(
		db, "SELECT csv FROM table_blobs WHERE dataset_id = ?1 AND path = ?2", dataset_id, path);
	char *buf = NULL;
	size_t n = 0;
	int rc;

	rc = srv__first_row(s);
	if (rc != SRV_OK)
		goto out;
	/* Never more than an upload may hold: the same bound as a file. */
	n = srv__sql_bytes(s, 0);
	buf = n <= DPG_MAX_CSV_BYTES ? malloc(n + 1) : NULL;
	if (!buf) {
		rc = SRV_DB_ERROR;
		goto out;
	}
	if (n)
		memcpy(buf, srv__sql_blob(s, 0), n);
	buf[n] = '\0';
	*ret = buf;
	*ret_len = n;
out:
	srv__sql_finalize(s);
	return rc;
}

int srv__data_link_hold(srv_db *db, const char *dataset_id)
{
	char name[DPG_MAX_ID_BYTES + 16];
	srv__stmt *s;
	int rc;

	srv__data_link_lock_name(dataset_id, name);
	if (srv__lock_named(db, name) != SRV_OK)
		return SRV_DB_ERROR;
	s = srv__prepare(db, "SELECT 1 FROM jobs WHERE dataset_id = ?1 AND state = 'running'"
			     " LIMIT 1", dataset_id);
	rc = srv__first_row(s);
	srv__sql_finalize(s);
	if (rc == SRV_OK)
		return SRV_CONFLICT;
	return rc == SRV_NOT_FOUND ? SRV_OK : SRV_DB_ERROR;
}

int srv__table_file_in_txn(srv_db *db, const char *dataset_id, char **ret)
{
	srv__stmt *s = srv__prepare(db,
				       "SELECT path FROM dataset_data WHERE dataset_id = ?1"
				       " AND kind = 'table' AND path IS NOT NULL",
				       dataset_id);
	char *path = NULL;
	int rc = srv__first_row(s);

	if (rc == SRV_OK) {
		path = strdup(srv__sql_text(s, 0));
		if (!path)
			rc = SRV_DB_ERROR;
	}
	if (rc == SRV_DB_ERROR)
		goto out;
	*ret = path;
	rc = SRV_OK;
out:
	srv__sql_finalize(s);
	return rc;
}

int srv_store_table_file_linked(srv_db *db, const char *name, bool *ret)
{
	/* Some link names this file, whatever directory the link spelled (the
	 * data directory may have been given another way). */
	srv__stmt *s = srv__cached_stmt(db, "SELECT EXISTS (SELECT 1 FROM dataset_data WHERE"
					   " path IS NOT NULL AND (path = CAST(?1 AS TEXT) OR"
					   " substr(path, length(path) - length(CAST(?1 AS TEXT)))"
					   " = '/' || CAST(?1 AS TEXT)))");
	int rc = SRV_DB_ERROR;

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 1, name);
	if (srv__sql_step(s) == SRV__SQL_ROW) {
		*ret = srv__sql_int64(s, 0) != 0;
		rc = SRV_OK;
	}
	srv__sql_reset(s);
	return rc;
}
