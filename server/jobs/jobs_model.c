/*
 * jobs_model.c: what a job keeps of its released model: the model file,
 * written atomically, and the model's figures on public test rows; and
 * the progress and result texts its row keeps, for every trainer's run.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trn_eval.h"
#include "jobs_pool.h"
#include "json.h"
#include "store.h"

/* Writes the model file atomically (temp file, fsync, rename). */
static int write_model(const char *dir, const char *id, const uint8_t *buf, size_t len,
		       char *path, size_t path_size)
{
	char tmp[4200];
	int fd;
	size_t off = 0;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -1;
	/* A path too long is an error: a cut one would name another file. */
	if ((size_t)snprintf(path, path_size, "%s/%s.dpgm", dir, id) >= path_size ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			return -1;
		}
		off += (size_t)w;
	}
	if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* On a shared database no other server reads this one's data directory:
 * the model's bytes go to model_blobs under "db:models/<job>.dpgm", before
 * the finish transaction names them (docs/operations.md). */
static int put_model_blob(srv_ctx *ctx, const char *id, const uint8_t *buf, size_t len,
			  char *path, size_t path_size)
{
	srv_db *db = srv_store_acquire(ctx->store);
	int rc = -1;

	if ((size_t)snprintf(path, path_size, "db:models/%s.dpgm", id) < path_size &&
	    srv_store_model_blob_put(db, id, path, buf, len) == SRV_OK)
		rc = 0;
	srv_store_release(ctx->store, db);
	return rc;
}

int srv_jobs__write_model(srv_ctx *ctx, const char *id, const trn_model *m, char *model_path,
			  size_t model_path_size, size_t *ret_len, acct_error *err)
{
	uint8_t *model = NULL;
	size_t model_len = 0;
	char models_dir[4200];

	model_path[0] = '\0';
	*ret_len = 0;
	if (trn_model_serialize(m, &model, &model_len, err) < 0)
		return -1;
	if (srv_store_shared(ctx->store)) {
		if (put_model_blob(ctx, id, model, model_len, model_path, model_path_size) < 0)
			model_path[0] = '\0';
	} else if ((size_t)snprintf(models_dir, sizeof(models_dir), "%s/models", ctx->data_dir) >=
			   sizeof(models_dir) ||
		   write_model(models_dir, id, model, model_len, model_path, model_path_size) < 0) {
		model_path[0] = '\0';
	}
	free(model);
	*ret_len = model_len;
	return model_path[0] ? 0 : -1;
}

bool srv_jobs__keep_model(srv_jobs__run *run, const trn_model *m, acct_error *err)
{
	return srv_jobs__write_model(run->jobs->ctx, run->slot->id, m, run->model_path,
				     sizeof(run->model_path), &run->model_len, err) == 0;
}

char *srv_jobs__result_text(json_t *res)
{
	char *text = res ? srv_json_dump(res) : NULL;

	json_decref(res);
	return text;
}

char *srv_jobs__result_with_metrics(json_t *res, const trn_model *m, const trn_dataset *test,
				    const json_t *schema)
{
	if (res && m && srv_jobs__test_metrics(res, m, test, schema) < 0) {
		json_decref(res);
		return NULL;
	}
	return srv_jobs__result_text(res);
}

json_t *srv_jobs__real_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

int srv_jobs__test_metrics(json_t *res, const trn_model *m, const trn_dataset *test,
			   const json_t *schema)
{
	trn_eval_metrics mt;
	acct_error err;

	acct_error_init(&err);
	if (schema && json_object_set(res, "features", json_object_get(schema, "features")) < 0)
		return -1;
	if (!test)
		return 0;
	if (trn_eval_model(m, test, &mt, &err) < 0)
		return -1;
	/* Public rows only: the released model scored on test_data. */
	if (json_object_set_new(res, "test_accuracy", srv_jobs__real_or_null(mt.accuracy)) < 0 ||
	    json_object_set_new(res, "test_rows", json_integer((json_int_t)mt.n)) < 0)
		return -1;
	if (test->num_classes == 2 &&
	    (json_object_set_new(res, "test_auc", srv_jobs__real_or_null(mt.auc)) < 0 ||
	     json_object_set_new(res, "test_balanced_error",
				 srv_jobs__real_or_null(mt.balanced_error)) < 0))
		return -1;
	return 0;
}
