/*
 * test_pg_models.c: a finished job's model on a shared PostgreSQL
 * database (a throwaway cluster, tests/pg/pg_cluster.h), served by every
 * server, not only by the one that trained it.
 *
 *   - a job submitted through A, run by whichever server claims it, keeps
 *     its model in the database (model_blobs, under its db: model_path);
 *   - the model's bytes through either server are the blob's bytes, as
 *     psql reads them, and as many as the job's result states;
 *   - the JSON model and predict through A and through B answer the same;
 *   - a model whose job's end is refused (the job was failed meanwhile, as
 *     another server's sweep of its lease does) leaves no blob behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "pg_rig.h"

#define IRIS_HEADER "sepal_length,sepal_width,petal_length,petal_width,species"
/* 16 KiB of hex covers the 3 x 4 logistic model's bytes many times over. */
#define HEX_MAX 16384

/* Five lots of logistic regression on iris. */
static const char small_job[] =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"species\","
	"\"classes\":3,\"epochs\":1,\"lot_size\":30,\"noise_multiplier\":4,\"clip_norm\":1,"
	"\"learning_rate\":0.5}}";

/* The GET or POST answer of `path` through s, asserted 200. */
static dpg_resp ok_call(const dpg_server *s, const char *method, const char *path,
			const char *body)
{
	dpg_resp r = dpg_call(s, method, path, s->admin_key, body);

	cr_assert_eq(r.status, 200, "%s %s: %s", method, path, r.body);
	return r;
}

/* Whether the n bytes at buf are, in lower-case hex, the text hex. */
static bool bytes_are_hex(const char *buf, size_t n, const char *hex)
{
	char two[3];

	if (strlen(hex) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		snprintf(two, sizeof(two), "%02x", (unsigned char)buf[i]);
		if (memcmp(two, hex + 2 * i, 2) != 0)
			return false;
	}
	return true;
}

TestSuite(pg_models, .timeout = 600);

Test(pg_models, a_model_is_served_alike_by_every_server)
{
	static struct dpg_pg_pair r;
	static char hex[HEX_MAX];
	const dpg_server *srv[2];
	char id[96], path[192], sql[512];
	dpg_resp bin[2], model[2], pred[2];
	json_t *j;
	long long bytes;

	dpg_pg_pair_start(&r);
	srv[0] = &r.a;
	srv[1] = &r.b;
	dpg_make_dataset(&r.a, "iris", 10.0, 1e-5, "rdp");
	dpg_upload_iris(&r.a, "iris", IRIS_HEADER);
	dpg_start_job(&r.a, "iris", small_job, id, sizeof(id));
	j = dpg_job_succeeded(&r.b, id, 300);
	bytes = (long long)json_integer_value(
		json_object_get(json_object_get(j, "result"), "model_bytes"));
	json_decref(j);

	/* The row names the blob, and the blob is the model's bytes. */
	snprintf(sql, sizeof(sql),
		 "SELECT encode(b.model, 'hex') FROM jobs j JOIN model_blobs b ON b.job_id = j.id"
		 " AND b.path = j.model_path WHERE j.id = '%s' AND j.model_path = 'db:models/%s.dpgm'",
		 id, id);
	cr_assert_eq(dpg_pg_psql(r.url, sql, hex, sizeof(hex)), 0, "%s", hex);
	cr_assert_gt(bytes, 0);
	cr_assert_eq((long long)strlen(hex), 2 * bytes, "blob of job %s: '%.64s'", id, hex);

	snprintf(path, sizeof(path), "/v1/jobs/%s/model", id);
	for (int i = 0; i < 2; i++) {
		bin[i] = ok_call(srv[i], "GET", path, NULL);
		cr_assert(bytes_are_hex(bin[i].body, bin[i].len, hex), "server %d's bytes", i);
	}
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", id);
	for (int i = 0; i < 2; i++)
		model[i] = ok_call(srv[i], "GET", path, NULL);
	cr_assert(json_equal(model[0].json, model[1].json), "%s\n%s", model[0].body, model[1].body);
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", id);
	for (int i = 0; i < 2; i++)
		pred[i] = ok_call(srv[i], "POST", path,
				  "{\"rows\":[[5.1,3.5,1.4,0.2],[6.7,3.0,5.2,2.3]]}");
	cr_assert_eq(json_array_size(json_object_get(pred[0].json, "scores")), 2, "%s",
		     pred[0].body);
	cr_assert(json_equal(pred[0].json, pred[1].json), "%s\n%s", pred[0].body, pred[1].body);
	for (int i = 0; i < 2; i++) {
		dpg_resp_free(&bin[i]);
		dpg_resp_free(&model[i]);
		dpg_resp_free(&pred[i]);
	}
	dpg_pg_pair_free(&r);
}

/* The rows of model_blobs for job `id`, as psql counts them. */
static long long blobs_of(const char *url, const char *id)
{
	char sql[256], out[64];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM model_blobs WHERE job_id = '%s'", id);
	cr_assert_eq(dpg_pg_psql(url, sql, out, sizeof(out)), 0, "%s", out);
	return atoll(out);
}

/*
 * The blob is written before the end that names it; a job failed in
 * between (here by a trigger in the blob's own transaction, as another
 * server's sweep would once the owner missed its lease) refuses the end,
 * and the bytes no row names are deleted with it.  Without that they
 * stayed in model_blobs for ever.
 */
Test(pg_models, a_model_whose_end_is_refused_leaves_no_blob)
{
	static struct dpg_pg_pair r;
	char id[96], sql[512], out[256];
	double deadline;

	dpg_pg_pair_start(&r);
	dpg_make_dataset(&r.a, "iris", 10.0, 1e-5, "rdp");
	dpg_upload_iris(&r.a, "iris", IRIS_HEADER);
	cr_assert_eq(dpg_pg_psql(r.url,
				 "CREATE FUNCTION fail_job() RETURNS trigger LANGUAGE plpgsql AS"
				 " $$BEGIN UPDATE jobs SET state = 'failed', finished_at = '1',"
				 " error = 'failed by the test' WHERE id = NEW.job_id;"
				 " RETURN NEW; END$$;"
				 " CREATE TRIGGER fail_job BEFORE INSERT ON model_blobs"
				 " FOR EACH ROW EXECUTE PROCEDURE fail_job()",
				 out, sizeof(out)),
		     0, "%s", out);
	dpg_start_job(&r.a, "iris", small_job, id, sizeof(id));
	/* The owner, A or B, logs once its end was refused. */
	deadline = dpg_now_s() + 300;
	while (dpg_log_lines(&r.a, "cannot record the end of job", false) +
		       dpg_log_lines(&r.b, "cannot record the end of job", false) ==
	       0) {
		cr_assert_lt(dpg_now_s(), deadline, "no server refused the end of job %s", id);
		usleep(100000);
	}
	snprintf(sql, sizeof(sql),
		 "SELECT state || ' ' || coalesce(model_path, 'none') FROM jobs WHERE id = '%s'",
		 id);
	cr_assert_eq(dpg_pg_psql(r.url, sql, out, sizeof(out)), 0, "%s", out);
	cr_assert_str_eq(out, "failed none");
	cr_assert_eq(blobs_of(r.url, id), 0, "the refused end's model stayed in model_blobs");
	dpg_pg_pair_free(&r);
}
