/*
 * store_models.c: on a shared database, finished jobs' models' bytes
 * (model_blobs, schema/pg/014_model_blobs.sql), so that any server can
 * serve a model another server trained.  The files on SQLite, the
 * serialized form and its parse are the jobs' and the routes'.
 */
#include <stdlib.h>
#include <string.h>

#include "dpg_limits.h"
#include "store.h"
#include "store_internal.h"

int srv_store_model_blob_put(srv_db *db, const char *job_id, const char *path,
			     const void *bytes, size_t len)
{
	srv__stmt *s = srv__prepare(db,
				       "INSERT INTO model_blobs (job_id, path, model) VALUES (?1, ?2, ?3)"
				       " ON CONFLICT (job_id) DO UPDATE SET path = ?2, model = ?3",
				       job_id);

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 2, path);
	srv__sql_bind_blob(s, 3, bytes, len);
	return srv__run(s);
}

int srv_store_model_blob_get(srv_db *db, const char *path, uint8_t **ret, size_t *ret_len)
{
	srv__stmt *s = srv__prepare(db, "SELECT model FROM model_blobs WHERE path = ?1", path);
	uint8_t *buf = NULL;
	size_t n = 0;
	int rc = srv__first_row(s);

	if (rc != SRV_OK)
		goto out;
	/* Never more than a trainer may release: the parameters' bound. */
	n = srv__sql_bytes(s, 0);
	buf = n > 0 && n <= (size_t)DPG_MAX_MODEL_BYTES ? malloc(n) : NULL;
	if (!buf) {
		rc = SRV_DB_ERROR;
		goto out;
	}
	memcpy(buf, srv__sql_blob(s, 0), n);
	*ret = buf;
	*ret_len = n;
out:
	srv__sql_finalize(s);
	return rc;
}
