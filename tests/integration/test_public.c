/*
 * test_public.c: public datasets: no budget and no ledger, rows readable
 * back, every charging route refused, the flag fixed for life, and a
 * scoped key's reach.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "jobs_common.h"

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(public, .init = setup, .fini = teardown, .timeout = 300);

static const char *aux_csv = "x1,x2,y\n0.25,1,0\n-0.5,2,1\n1.5,-3,1\n";

static void make_public(const char *id)
{
	char body[256];
	dpg_resp r;

	snprintf(body, sizeof(body), "{\"id\":\"%s\",\"name\":\"aux rows\",\"public\":true}", id);
	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key, body);
	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "public")), "%s", r.body);
	cr_assert_null(json_object_get(r.json, "budget"), "%s", r.body);
	dpg_assert_in_spec(&srv, "POST", "/v1/datasets", "201", "application/json", r.body);
	dpg_resp_free(&r);
}

Test(public, created_listed_and_read_back)
{
	dpg_resp r;
	json_t *list;
	size_t i;
	bool seen_public = false, seen_private = false;

	make_public("aux");
	dpg_make_dataset(&srv, "priv", 1.0, 1e-5, "rdp");
	cr_assert_eq(dpg_upload_csv(&srv, "aux", aux_csv, strlen(aux_csv)), 3);

	r = dpg_call(&srv, "GET", "/v1/datasets/aux", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "public")));
	cr_assert_null(json_object_get(r.json, "budget_summary"));
	dpg_resp_free(&r);

	r = dpg_call(&srv, "GET", "/v1/datasets", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	dpg_assert_in_spec(&srv, "GET", "/v1/datasets", "200", "application/json", r.body);
	list = json_object_get(r.json, "datasets");
	json_t *d;
	json_array_foreach(list, i, d) {
		const char *id = json_string_value(json_object_get(d, "id"));

		if (strcmp(id, "aux") == 0)
			seen_public = json_is_true(json_object_get(d, "public"));
		if (strcmp(id, "priv") == 0)
			seen_private = json_is_false(json_object_get(d, "public"));
	}
	cr_assert(seen_public && seen_private, "%s", r.body);
	dpg_resp_free(&r);

	/* The table comes back byte for byte. */
	r = dpg_call(&srv, "GET", "/v1/datasets/aux/data?format=csv", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(strncmp(r.content_type, "text/csv", 8), 0, "%s", r.content_type);
	cr_assert_eq(r.len, strlen(aux_csv));
	cr_assert_eq(memcmp(r.body, aux_csv, r.len), 0);
	dpg_resp_free(&r);

	/* A public table's size and shape are public: a viewer sees them. */
	char viewer[160];

	dpg_make_key(&srv, "viewer", NULL, viewer, sizeof(viewer));
	r = dpg_call(&srv, "GET", "/v1/datasets/aux/data", viewer, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "rows"), 3);
	cr_assert(json_is_array(json_object_get(r.json, "columns")), "%s", r.body);
	dpg_resp_free(&r);

	/* A private table is never read back, even by an admin. */
	cr_assert_eq(dpg_upload_csv(&srv, "priv", aux_csv, strlen(aux_csv)), 3);
	dpg_expect_status(&srv, "GET", "/v1/datasets/priv/data?format=csv", srv.admin_key, NULL,
			  403);
	dpg_expect_status(&srv, "GET", "/v1/datasets/aux/data?format=xml", srv.admin_key, NULL,
			  400);
}

/* Asserts a 409 titled "Public dataset" for method path body. */
static void expect_public_refusal(const char *method, const char *path, const char *body)
{
	dpg_resp r = dpg_call(&srv, method, path, srv.admin_key, body);

	cr_assert_eq(r.status, 409, "%s %s: %ld %s", method, path, r.status, r.body);
	cr_assert_str_eq(r.content_type, "application/problem+json");
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "title")), "Public dataset",
			 "%s", r.body);
	dpg_resp_free(&r);
}

Test(public, every_charging_route_refuses_and_nothing_is_written)
{
	char out[4096];
	const char *verify[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	dpg_resp r;

	make_public("aux");
	cr_assert_eq(dpg_upload_csv(&srv, "aux", aux_csv, strlen(aux_csv)), 3);
	expect_public_refusal("POST", "/v1/datasets/aux/charges",
			      "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}");
	/* A free event would fit any budget: the store refuses it for being
	 * public, not for its price. */
	expect_public_refusal("POST", "/v1/datasets/aux/charges",
			      "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0,\"delta\":0}}");
	expect_public_refusal("POST", "/v1/datasets/aux/reservations",
			      "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}");
	expect_public_refusal("POST", "/v1/datasets/aux/dry-run",
			      "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}");
	expect_public_refusal("POST", "/v1/datasets/aux/mechanisms/laplace",
			      "{\"value\":1,\"sensitivity\":1,\"epsilon\":0.1}");
	expect_public_refusal("POST", "/v1/datasets/aux/queries",
			      "{\"query\":\"sum\",\"column\":\"x1\",\"lo\":0,\"hi\":1,\"epsilon\":1}");
	expect_public_refusal("POST", "/v1/datasets/aux/pate/sessions",
			      "{\"aggregator\":\"gnmax\",\"num_teachers\":5,\"num_classes\":3,"
			      "\"sigma2\":1}");
	expect_public_refusal("POST", "/v1/datasets/aux/jobs",
			      "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\","
			      "\"epochs\":1,\"lot_size\":2,\"noise_multiplier\":1,\"clip_norm\":1,"
			      "\"learning_rate\":0.1}}");
	expect_public_refusal("GET", "/v1/datasets/aux/budget", NULL);

	/* No ledger: the ledger and the audit trail are empty, and nothing
	 * was written for it. */
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/aux/ledger", "entries"), 0);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/aux/audit", "entries"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM ledger WHERE dataset_id = 'aux'"),
		     0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	/* No budget gauges either. */
	r = dpg_call(&srv, "GET", "/metrics", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_null(strstr(r.body, "dataset=\"aux\""), "%s", r.body);
	dpg_resp_free(&r);
	/* Archiving writes no ledger row either, and verify finds all well. */
	r = dpg_call(&srv, "DELETE", "/v1/datasets/aux", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM ledger"), 0);
	cr_assert_eq(dpg_run(out, sizeof(out), verify), 0, "%s", out);
}

Test(public, the_flag_is_fixed_and_a_public_body_names_no_ledger)
{
	dpg_resp r;

	make_public("aux");
	dpg_make_dataset(&srv, "priv", 1.0, 1e-5, "rdp");
	r = dpg_call(&srv, "PATCH", "/v1/datasets/aux", srv.admin_key, "{\"public\":false}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/public", "%s",
			 r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "PATCH", "/v1/datasets/priv", srv.admin_key, "{\"public\":true}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "PATCH", "/v1/datasets/aux", srv.admin_key,
		     "{\"budget\":{\"epsilon\":1,\"delta\":0}}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	dpg_resp_free(&r);
	/* A name may change; the flag stays. */
	r = dpg_call(&srv, "PATCH", "/v1/datasets/aux", srv.admin_key, "{\"name\":\"renamed\"}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "public")), "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/priv", srv.admin_key, NULL);
	cr_assert(json_is_false(json_object_get(r.json, "public")), "%s", r.body);
	dpg_resp_free(&r);
	/* A public body that describes a ledger is refused, naming the field. */
	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key,
		     "{\"id\":\"p2\",\"public\":true,\"budget\":{\"epsilon\":1,\"delta\":0}}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/budget");
	dpg_resp_free(&r);
	/* Without "public" the budget is still required. */
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key, "{\"id\":\"p3\"}", 400);
}

Test(public, a_scoped_key_must_name_the_public_dataset)
{
	char only_priv[160], both[160];
	dpg_resp r;

	make_public("aux");
	dpg_make_dataset(&srv, "priv", 1.0, 1e-5, "rdp");
	cr_assert_eq(dpg_upload_csv(&srv, "aux", aux_csv, strlen(aux_csv)), 3);
	dpg_make_key(&srv, "analyst", "priv", only_priv, sizeof(only_priv));
	dpg_make_key(&srv, "analyst", "priv,aux", both, sizeof(both));
	r = dpg_call(&srv, "GET", "/v1/datasets/aux/data?format=csv", only_priv, NULL);
	cr_assert(r.status == 403 || r.status == 404, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/aux/data?format=csv", both, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
}

/* The table of two_class_rows as CSV, "a,b,noise,y"; with `shuffled`,
 * the columns in another order ("y,noise,b,a"), which a job must match
 * by name. */
static char *two_class_csv(size_t n, unsigned seed, bool shuffled)
{
	return jobs_common_two_class_csv(n, seed, shuffled ? "y,noise,b,a" : "a,b,noise,y");
}

static void upload_two_class(const char *id, size_t n, unsigned seed, bool shuffled)
{
	char *csv = two_class_csv(n, seed, shuffled);

	cr_assert_eq(dpg_upload_csv(&srv, id, csv, strlen(csv)), (long)n);
	free(csv);
}

/* The params of a small DP-SGD job on dataset "priv". */
#define DPSGD_PARAMS                                                                  \
	"\"model\":\"logreg\",\"label\":\"y\",\"classes\":2,\"epochs\":3,\"lot_size\":50," \
	"\"noise_multiplier\":1,\"clip_norm\":1,\"learning_rate\":0.5"

/* The small DP-SGD job with `extra` params appended. */
static dpg_resp submit_dpsgd(const char *extra)
{
	char body[1024];

	snprintf(body, sizeof(body), "{\"trainer\":\"dpsgd\",\"params\":{" DPSGD_PARAMS "%s}}", extra);
	return dpg_call(&srv, "POST", "/v1/datasets/priv/jobs", srv.admin_key, body);
}

/* The small DP-SGD job with `extra` params, run to its success; the job
 * (the caller decrefs). */
static json_t *run_dpsgd(const char *extra, char *job_id, size_t size)
{
	char params[1024];

	snprintf(params, sizeof(params), DPSGD_PARAMS "%s", extra);
	return jobs_common_run(&srv, "priv", "dpsgd", params, job_id, size, 120);
}

static void expect_test_data_refused(const char *test, const char *why)
{
	char extra[128];
	dpg_resp r;

	snprintf(extra, sizeof(extra), ",\"test_data\":\"%s\"", test);
	r = submit_dpsgd(extra);
	cr_assert_eq(r.status, 422, "%s: %ld %s", why, r.status, r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/params/test_data",
			 "%s: %s", why, r.body);
	dpg_resp_free(&r);
}

Test(public, test_data_is_checked_before_anything_is_reserved)
{
	static const char nolabel[] = "a,b,noise\n0.1,0.2,0.3\n";
	static const char textcol[] = "a,b,noise,y\n0.1,x,0.3,1\n";

	dpg_make_dataset(&srv, "priv", 10.0, 1e-5, "rdp");
	upload_two_class("priv", 400, 1, false);
	dpg_make_dataset(&srv, "other_private", 10.0, 1e-5, "rdp");
	upload_two_class("other_private", 50, 2, false);
	make_public("empty");
	make_public("no_label");
	cr_assert_eq(dpg_upload_csv(&srv, "no_label", nolabel, strlen(nolabel)), 1);
	make_public("text_feature");
	cr_assert_eq(dpg_upload_csv(&srv, "text_feature", textcol, strlen(textcol)), 1);
	expect_test_data_refused("missing", "no such dataset");
	expect_test_data_refused("other_private", "a private dataset");
	expect_test_data_refused("empty", "no table");
	expect_test_data_refused("no_label", "no label column");
	expect_test_data_refused("text_feature", "a feature not numeric");
	/* A key scoped to the private dataset only does not reach a public
	 * one: named by its job, it is answered as one that does not exist. */
	{
		char analyst[160];
		dpg_resp r;

		make_public("test");
		upload_two_class("test", 20, 7, true);
		dpg_make_key(&srv, "analyst", "priv", analyst, sizeof(analyst));
		r = dpg_call(&srv, "POST", "/v1/datasets/priv/jobs", analyst,
			     "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\","
			     "\"classes\":2,\"epochs\":1,\"lot_size\":50,\"noise_multiplier\":1,"
			     "\"clip_norm\":1,\"learning_rate\":0.5,\"test_data\":\"test\"}}");
		cr_assert_eq(r.status, 422, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
				 "/params/test_data");
		dpg_resp_free(&r);
	}
	/* Nothing was reserved for any of them. */
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
}

Test(public, a_job_reports_metrics_on_test_data_only)
{
	char job_id[64];
	json_t *job, *result;

	dpg_make_dataset(&srv, "priv", 10.0, 1e-5, "rdp");
	upload_two_class("priv", 400, 1, false);
	make_public("test");
	/* The test table holds the columns in another order: matched by name. */
	upload_two_class("test", 300, 7, true);
	job = run_dpsgd(",\"test_data\":\"test\"", job_id, sizeof(job_id));
	result = json_object_get(job, "result");
	cr_assert_eq(json_integer_value(json_object_get(result, "test_rows")), 300);
	for (const char *const *k = (const char *const[]){"test_accuracy", "test_auc",
							  "test_balanced_error", NULL};
	     *k; k++) {
		double v = dpg_num(result, *k);

		cr_assert(v >= 0.0 && v <= 1.0, "%s = %g", *k, v);
	}
	/* The labels follow a linear rule: even a noisy logreg beats chance. */
	cr_assert_gt(dpg_num(result, "test_accuracy"), 0.6);
	/* Balanced error and accuracy are tied on balanced classes only;
	 * both are reported from the same predictions. */
	cr_assert(json_is_array(json_object_get(result, "features")));
	cr_assert_eq(json_array_size(json_object_get(result, "features")), 3);
	/* Nothing computed on the private rows. */
	cr_assert_null(json_object_get(result, "train_accuracy"));
	cr_assert_null(json_object_get(result, "train_loss"));
	json_decref(job);
}

/*
 * A public test row whose label is none of the job's classes (7, 0.5) is
 * not scored: the job succeeds and test_rows counts the others.  Such
 * rows used to fail the job after it had trained, its reservation spent.
 */
Test(public, test_rows_of_no_class_are_not_scored)
{
	static const char extra[] = "0.1,0.2,0.3,7\n0.2,0.1,0.5,0.5\n";
	char *csv = jobs_common_two_class_csv(300, 7, "a,b,noise,y"), *all, job_id[64];
	json_t *job;

	all = malloc(strlen(csv) + sizeof(extra));
	cr_assert_not_null(all);
	memcpy(all, csv, strlen(csv));
	memcpy(all + strlen(csv), extra, sizeof(extra));
	dpg_make_dataset(&srv, "priv", 10.0, 1e-5, "rdp");
	upload_two_class("priv", 400, 1, false);
	make_public("test");
	cr_assert_eq(dpg_upload_csv(&srv, "test", all, strlen(all)), 302);
	job = run_dpsgd(",\"test_data\":\"test\"", job_id, sizeof(job_id));
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(job, "result"), "test_rows")),
		     300);
	json_decref(job);
	free(all);
	free(csv);
}

/* ---- using a released model ------------------------------------------------ */

#define TEST_ROWS 300
#define TEST_SEED 7

/* Trains the small job on "priv" with test_data "test"; returns its id. */
static void trained_job(char *job_id, size_t size)
{
	dpg_make_dataset(&srv, "priv", 10.0, 1e-5, "rdp");
	upload_two_class("priv", 400, 1, false);
	make_public("test");
	upload_two_class("test", TEST_ROWS, TEST_SEED, true);
	json_decref(run_dpsgd(",\"test_data\":\"test\"", job_id, size));
}

/* {"rows": [...]} of the test table's rows, features in the model's order. */
static char *rows_body(const double (*v)[3], size_t n)
{
	size_t size = 32 + n * 40, len = 0;
	char *body = malloc(size);

	cr_assert_not_null(body);
	len += (size_t)snprintf(body + len, size - len, "{\"rows\":[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(body + len, size - len, "%s[%.6f,%.6f,%.6f]", i ? "," : "",
					v[i][0], v[i][1], v[i][2]);
	snprintf(body + len, size - len, "]}");
	return body;
}

static dpg_resp post_as(const char *path, const char *key, const char *ct, const char *body)
{
	char header[64];
	const char *headers[] = {header, NULL};
	dpg_resp r;

	snprintf(header, sizeof(header), "Content-Type: %s", ct);
	cr_assert_eq(dpg_http(&srv, "POST", path, key, body, strlen(body), headers, &r), 0);
	return r;
}

/* The JSON model, scored here on each of the TEST_ROWS rows v, gives
 * the class and the two scores the predict answer carries. */
static void json_model_agrees(const json_t *model, const double (*v)[3], const json_t *answer)
{
	const json_t *classes = json_object_get(answer, "classes");
	double s[64];

	for (size_t i = 0; i < TEST_ROWS; i++) {
		size_t c = dpg_json_model_scores(model, v[i], s);
		json_t *row = json_array_get(json_object_get(answer, "scores"), i);

		cr_assert_eq((json_int_t)c, json_integer_value(json_array_get(classes, i)));
		for (size_t k = 0; k < 2; k++)
			cr_assert_float_eq(s[k], json_real_value(json_array_get(row, k)), 1e-12,
					   "%.17g vs %.17g", s[k],
					   json_real_value(json_array_get(row, k)));
	}
}

Test(public, predict_json_csv_and_the_json_model_agree, .timeout = 300)
{
	char job_id[64], path[128], *body, *csv;
	double (*v)[3] = malloc(sizeof(*v) * TEST_ROWS);
	int *y = malloc(sizeof(int) * TEST_ROWS);
	dpg_resp pj, pc, mj, job;
	size_t right = 0;

	trained_job(job_id, sizeof(job_id));
	dpg_two_class_rows(TEST_ROWS, TEST_SEED, v, y);
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	body = rows_body((const double (*)[3])v, TEST_ROWS);
	pj = post_as(path, srv.admin_key, "application/json", body);
	cr_assert_eq(pj.status, 200, "%s", pj.body);
	dpg_assert_in_spec(&srv, "POST", "/v1/jobs/{id}/predict", "200", "application/json", pj.body);
	/* The same rows as the test table's CSV, columns in another order. */
	csv = two_class_csv(TEST_ROWS, TEST_SEED, true);
	pc = post_as(path, srv.admin_key, "text/csv", csv);
	cr_assert_eq(pc.status, 200, "%s", pc.body);
	cr_assert(json_equal(pj.json, pc.json), "JSON and CSV answers differ");

	/* test_accuracy is the accuracy of these predictions on the labels. */
	for (size_t i = 0; i < TEST_ROWS; i++)
		right += json_integer_value(json_array_get(json_object_get(pj.json, "classes"), i)) ==
			 y[i];
	snprintf(path, sizeof(path), "/v1/jobs/%s", job_id);
	job = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_float_eq(dpg_num(json_object_get(job.json, "result"), "test_accuracy"),
			   (double)right / TEST_ROWS, 1e-12);

	/* The JSON model's weights give the same classes and scores. */
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	mj = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(mj.status, 200, "%s", mj.body);
	dpg_assert_in_spec(&srv, "GET", "/v1/jobs/{id}/model", "200", "application/json", mj.body);
	cr_assert(json_equal(json_object_get(json_object_get(mj.json, "job"), "event"),
			     json_object_get(job.json, "event")));
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(mj.json, "features"), 2)),
			 "noise");
	json_model_agrees(mj.json, (const double (*)[3])v, pj.json);
	dpg_resp_free(&pj);
	dpg_resp_free(&pc);
	dpg_resp_free(&mj);
	dpg_resp_free(&job);
	free(body);
	free(csv);
	free(v);
	free(y);
}

Test(public, predict_refuses_bad_rows_and_charges_nothing, .timeout = 300)
{
	static const struct {
		const char *why, *content_type, *body;
		long status;
		const char *field; /* the problem's "field", when it must name one */
	} bad[] = {
		{"two features of three", "application/json", "{\"rows\":[[1,2]]}", 400, "/rows/0"},
		{"a string feature", "application/json", "{\"rows\":[[1,\"x\",2]]}", 400, NULL},
		{"no rows", "application/json", "{\"rows\":[]}", 400, NULL},
		{"a CSV without a feature column", "text/csv", "a,b\n1,2\n", 400, NULL},
		/* A word in a feature column: its line and column (before, "the
		 * header has no numeric column 'b'"). */
		{"a word in a feature column", "text/csv", "noise,b,a\n1,2,3\n\n4,x,6\n", 400,
		 "/csv/line/4/b"},
		{"a content type not read", "text/plain", "1,2,3\n", 415, NULL},
	};
	char job_id[64], path[128], other[160], *big;
	dpg_budget before, after;
	dpg_resp r;
	size_t len = 0, size = 16 + 10001 * 12;

	trained_job(job_id, sizeof(job_id));
	before = dpg_budget_of(&srv, "priv");
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		r = post_as(path, srv.admin_key, bad[k].content_type, bad[k].body);
		cr_assert_eq(r.status, bad[k].status, "%s: %s", bad[k].why, r.body);
		if (bad[k].field)
			cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
					 bad[k].field, "%s", bad[k].why);
		dpg_resp_free(&r);
	}
	/* Past the rows limit. */
	big = malloc(size);
	cr_assert_not_null(big);
	len += (size_t)snprintf(big + len, size - len, "{\"rows\":[");
	for (int i = 0; i < 10001; i++)
		len += (size_t)snprintf(big + len, size - len, "%s[1,2,3]", i ? "," : "");
	snprintf(big + len, size - len, "]}");
	r = post_as(path, srv.admin_key, "application/json", big);
	cr_assert_eq(r.status, 422, "%s", r.body);
	dpg_resp_free(&r);
	free(big);
	/* A key that does not reach the job's dataset. */
	dpg_make_dataset(&srv, "elsewhere", 1.0, 1e-5, "rdp");
	dpg_make_key(&srv, "viewer", "elsewhere", other, sizeof(other));
	r = post_as(path, other, "application/json", "{\"rows\":[[1,2,3]]}");
	cr_assert_eq(r.status, 403, "%s", r.body);
	dpg_resp_free(&r);
	/* Predictions charge nothing. */
	r = post_as(path, srv.admin_key, "application/json", "{\"rows\":[[1,2,3]]}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	after = dpg_budget_of(&srv, "priv");
	cr_assert_eq(after.charges, before.charges);
	cr_assert_eq(after.ledger_rows, before.ledger_rows);
	cr_assert_eq(after.spent_eps, before.spent_eps);
}

Test(public, predict_before_the_job_ends_is_refused, .timeout = 300)
{
	char path[128], job_id[64];
	dpg_resp r;

	dpg_make_dataset(&srv, "priv", 1000.0, 1e-5, "rdp");
	upload_two_class("priv", 400, 1, false);
	r = dpg_call(&srv, "POST", "/v1/datasets/priv/jobs", srv.admin_key,
		     "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\",\"hidden\":256,"
		     "\"label\":\"y\",\"classes\":2,\"epochs\":5000,\"lot_size\":50,"
		     "\"noise_multiplier\":20,\"clip_norm\":1,\"learning_rate\":0.1}}");
	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(job_id, sizeof(job_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	r = post_as(path, srv.admin_key, "application/json", "{\"rows\":[[1,2,3]]}");
	cr_assert_eq(r.status, 409, "%s", r.body);
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	dpg_expect_status(&srv, "GET", path, srv.admin_key, NULL, 409);
	/* Cancelled while queued (200) or while it runs (202). */
	snprintf(path, sizeof(path), "/v1/jobs/%s", job_id);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	cr_assert(r.status == 200 || r.status == 202, "%s", r.body);
	dpg_resp_free(&r);
}

/* ---- the ensemble trainer ---------------------------------------------------- */

#define ENS_PARTIES 10
#define ENS_ROWS 1000

/* The private party table: two_class_rows with a party column "site",
 * row i at site i mod ENS_PARTIES, then two rows at site 99, no declared
 * party, and `more` rows of site 0 after them; *ret_len its length. */
static char *party_csv(size_t more, size_t *ret_len)
{
	size_t size = 64 + (ENS_ROWS + 2 + more) * 64, len = 0;
	char *csv = malloc(size);
	double (*v)[3] = malloc(sizeof(*v) * ENS_ROWS);
	int *y = malloc(sizeof(int) * ENS_ROWS);

	cr_assert(csv && v && y);
	dpg_two_class_rows(ENS_ROWS, 3, v, y);
	len += (size_t)snprintf(csv + len, size - len, "site,a,b,noise,y\n");
	for (size_t i = 0; i < ENS_ROWS; i++)
		len += (size_t)snprintf(csv + len, size - len, "%zu,%.6f,%.6f,%.6f,%d\n",
					i % ENS_PARTIES, v[i][0], v[i][1], v[i][2], y[i]);
	len += (size_t)snprintf(csv + len, size - len, "99,5,5,5,0\n99,-5,-5,5,1\n");
	for (size_t i = 0; i < more; i++)
		len += (size_t)snprintf(csv + len, size - len, "0,1,1,0,%zu\n", i % 2);
	free(v);
	free(y);
	*ret_len = len;
	return csv;
}

static void upload_party_table(const char *id)
{
	size_t len;
	char *csv = party_csv(0, &len);

	cr_assert_eq(dpg_upload_csv(&srv, id, csv, len), ENS_ROWS + 2);
	free(csv);
}

/* Public "aux" (unlabelled: no y column) and "test" (labelled, its columns
 * in another order). */
static void upload_aux_and_test(void)
{
	size_t size = 64 + 400 * 48, len = 0;
	char *csv = malloc(size);
	double (*v)[3] = malloc(sizeof(*v) * 400);
	int *y = malloc(sizeof(int) * 400);

	cr_assert(csv && v && y);
	dpg_two_class_rows(400, 11, v, y);
	len += (size_t)snprintf(csv + len, size - len, "noise,a,b\n");
	for (size_t i = 0; i < 400; i++)
		len += (size_t)snprintf(csv + len, size - len, "%.6f,%.6f,%.6f\n", v[i][2], v[i][0],
					v[i][1]);
	make_public("aux");
	cr_assert_eq(dpg_upload_csv(&srv, "aux", csv, len), 400);
	make_public("test");
	upload_two_class("test", TEST_ROWS, TEST_SEED, true);
	free(csv);
	free(v);
	free(y);
}

/* The ensemble params, with `over` ("key":value pairs, each one of the
 * keys below) in place of the defaults it names. */
static void ens_params(char *buf, size_t size, const char *over)
{
	static const char *const defaults[][2] = {
		{"party_column", "\"site\""},
		{"parties", "10"},
		{"local_model", "[\"logreg\",\"gaussian_nb\",\"decision_tree\"]"},
		{"auxiliary_data", "\"aux\""},
	};
	size_t len = (size_t)snprintf(buf, size, "\"label\":\"y\",\"classes\":2,\"lambda\":0.05,"
					       "\"algorithm\":\"soft_label\",\"epsilon\":1%s", over);
	char key[48];

	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		snprintf(key, sizeof(key), "\"%s\":", defaults[i][0]);
		if (!strstr(over, key))
			len += (size_t)snprintf(buf + len, size - len, ",%s%s", key, defaults[i][1]);
	}
}

static dpg_resp submit_ensemble(const char *dataset, const char *extra, bool dry_run)
{
	char body[2048], path[128], params[1024];

	ens_params(params, sizeof(params), extra);
	snprintf(body, sizeof(body), "{\"trainer\":\"ensemble\",%s\"params\":{%s}}",
		 dry_run ? "\"dry_run\":true," : "", params);
	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", dataset);
	return dpg_call(&srv, "POST", path, srv.admin_key, body);
}

/*
 * `dpgate predict` on the downloaded binary model gives the classes the
 * predict route gave (`answer`), for the test rows as a CSV headed by the
 * feature names and as plain rows; a bad row exits 2.
 */
static void cli_predict_agrees(const char *job_id, const double (*v)[3], const json_t *answer)
{
	static char out[1 << 17];
	char model[400], named[400], plain[400];
	const char *argv_named[] = {dpg_bin(), "predict", "--model", model, named, NULL};
	const char *argv_plain[] = {dpg_bin(), "predict", "--model", model, plain, NULL};
	size_t size = 32 + TEST_ROWS * 40, len = 0, plain_off;
	char *csv = malloc(size), *line;
	size_t i = 0;

	cr_assert_not_null(csv);
	snprintf(model, sizeof(model), "%s/model.dpgm", srv.dir);
	dpg_save_model(&srv, job_id, model);
	len += (size_t)snprintf(csv, size, "a,b,noise\n");
	plain_off = len;
	for (size_t k = 0; k < TEST_ROWS; k++)
		len += (size_t)snprintf(csv + len, size - len, "%.6f,%.6f,%.6f\n", v[k][0], v[k][1],
					v[k][2]);
	snprintf(named, sizeof(named), "%s/named.csv", srv.dir);
	dpg_write_file(named, csv, len);
	snprintf(plain, sizeof(plain), "%s/plain.csv", srv.dir);
	dpg_write_file(plain, csv + plain_off, len - plain_off);
	for (int pass = 0; pass < 2; pass++) {
		cr_assert_eq(dpg_run(out, sizeof(out), pass ? argv_plain : argv_named), 0);
		line = strtok(out, "\n");
		cr_assert_str_eq(line, "class,score_0,score_1");
		for (i = 0; (line = strtok(NULL, "\n")) != NULL; i++)
			cr_assert_eq(strtol(line, NULL, 10),
				     json_integer_value(json_array_get(json_object_get(answer, "classes"), i)),
				     "row %zu", i);
		cr_assert_eq(i, TEST_ROWS);
	}
	dpg_write_file(plain, "0.1,0.2\n", 8);
	cr_assert_eq(dpg_run(out, sizeof(out), argv_plain), 2);
	free(csv);
}

/*
 * Checks a finished job's predictions on the test rows: the JSON and CSV
 * answers agree, their accuracy is the result's test_accuracy, the JSON
 * model's weights reproduce the scores (computed here), and `dpgate
 * predict` on the binary model gives the same classes.
 */
static void check_predictions(const char *job_id, const json_t *result)
{
	char path[128], *body, *csv;
	double (*v)[3] = malloc(sizeof(*v) * TEST_ROWS);
	int *y = malloc(sizeof(int) * TEST_ROWS);
	dpg_resp pj, pc, mj;
	size_t right = 0;

	cr_assert(v && y);
	dpg_two_class_rows(TEST_ROWS, TEST_SEED, v, y);
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	body = rows_body((const double (*)[3])v, TEST_ROWS);
	pj = post_as(path, srv.admin_key, "application/json", body);
	cr_assert_eq(pj.status, 200, "%s", pj.body);
	csv = two_class_csv(TEST_ROWS, TEST_SEED, true);
	pc = post_as(path, srv.admin_key, "text/csv", csv);
	cr_assert_eq(pc.status, 200, "%s", pc.body);
	cr_assert(json_equal(pj.json, pc.json));
	for (size_t i = 0; i < TEST_ROWS; i++)
		right += json_integer_value(json_array_get(json_object_get(pj.json, "classes"), i)) ==
			 y[i];
	cr_assert_float_eq(dpg_num(result, "test_accuracy"), (double)right / TEST_ROWS, 1e-12);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	mj = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(mj.status, 200, "%s", mj.body);
	json_model_agrees(mj.json, (const double (*)[3])v, pj.json);
	cli_predict_agrees(job_id, (const double (*)[3])v, pj.json);
	dpg_resp_free(&pj);
	dpg_resp_free(&pc);
	dpg_resp_free(&mj);
	free(body);
	free(csv);
	free(v);
	free(y);
}

Test(public, an_ensemble_job_end_to_end, .timeout = 300)
{
	char job_id[64];
	json_t *job, *result;
	dpg_resp r;

	dpg_make_dataset(&srv, "parties", 5.0, 0.0, "basic");
	upload_party_table("parties");
	upload_aux_and_test();
	/* A dry run first: the event is priced from the params alone. */
	r = submit_ensemble("parties", ",\"test_data\":\"test\"", true);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "fits")));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r.json, "event"), "type")),
			 "epsilon_delta");
	cr_assert_eq(dpg_num(r.json, "needed.epsilon"), 1.0);
	cr_assert_not_null(json_object_get(r.json, "neighbouring"));
	cr_assert_null(json_object_get(r.json, "public_row_count"), "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_budget_of(&srv, "parties").spent_eps, 0.0);

	r = submit_ensemble("parties", ",\"test_data\":\"test\"", false);
	cr_assert_eq(r.status, 202, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "trainer")), "ensemble");
	snprintf(job_id, sizeof(job_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_succeeded(&srv, job_id, 240);
	/* Progress says the phase and the parties trained, nothing more. */
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(job, "progress"), "parties")),
		     ENS_PARTIES);
	cr_assert_null(json_object_get(json_object_get(job, "progress"), "loss"));
	/* The charge is the requested epsilon: reserved, then committed. */
	cr_assert_eq(dpg_budget_of(&srv, "parties").spent_eps, 1.0);
	{
		json_t *rows = dpg_list_all(&srv, "/v1/datasets/parties/ledger?limit=100", 4), *e;
		size_t i, commits = 0;

		json_array_foreach(rows, i, e) {
			const char *kind = json_string_value(json_object_get(e, "kind"));

			cr_assert(!strcmp(kind, "reserve") || !strcmp(kind, "commit"), "%s", kind);
			cr_assert_eq(dpg_num(e, "epsilon"), 1.0);
			commits += !strcmp(kind, "commit");
		}
		cr_assert_eq(commits, 1);
		json_decref(rows);
	}
	result = json_object_get(job, "result");
	for (const char *const *k = (const char *const[]){"test_accuracy", "test_auc",
							  "test_balanced_error", NULL};
	     *k; k++)
		cr_assert(dpg_num(result, *k) >= 0.0 && dpg_num(result, *k) <= 1.0, "%s", *k);
	/* The party column is not a feature. */
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(result, "features"), 0)),
			 "a");
	cr_assert_eq(json_array_size(json_object_get(result, "features")), 3);
	check_predictions(job_id, result);
	json_decref(job);
}

static void expect_ensemble_refused(const char *dataset, const char *extra, long status,
				    const char *field)
{
	dpg_resp r = submit_ensemble(dataset, extra, false);

	jobs_common_expect_refusal(&r, status, field, extra);
}

/* An epsilon whose noise rate beta rounds to 0: its release could not be
 * drawn, so the job is refused (it used to fail after training). */
static void tiny_epsilon_refused(void)
{
	char params[1024], body[1200];
	const char *at;
	dpg_resp r;

	ens_params(params, sizeof(params), "");
	at = strstr(params, "\"epsilon\":1");
	cr_assert_not_null(at);
	snprintf(body, sizeof(body), "{\"trainer\":\"ensemble\",\"params\":{%.*s\"epsilon\":5e-324%s}}",
		 (int)(at - params), params, at + strlen("\"epsilon\":1"));
	r = dpg_call(&srv, "POST", "/v1/datasets/parties/jobs", srv.admin_key, body);
	jobs_common_expect_refusal(&r, 400, "/params/epsilon", body);
}

/*
 * The knn work bound (auxiliary rows x private rows x features) is checked
 * at the most rows a table holds (10^7) when the private table's row count
 * is private, at the count itself when the upload declared it public: a
 * refusal at the count told it for free (an analyst moving the auxiliary
 * table's size could search for it).  4000 auxiliary rows of 3 features
 * pass at 1002 or 1003 rows, not at 10^7: the dry runs on both private
 * sizes give the same 400, and the public count fits.
 */
Test(public, an_ensemble_knn_bound_does_not_read_a_private_row_count, .timeout = 120)
{
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	size_t size = 32 + 4000 * 16, len, alen = 0;
	char *aux = malloc(size), *csv, *first = NULL;
	dpg_resp r;

	cr_assert_not_null(aux);
	dpg_make_dataset(&srv, "parties", 5.0, 0.0, "basic");
	alen += (size_t)snprintf(aux, size, "noise,a,b\n");
	for (int i = 0; i < 4000; i++)
		alen += (size_t)snprintf(aux + alen, size - alen, "%d,%d,%d\n", i % 7, i % 11, i % 13);
	make_public("aux4k");
	cr_assert_eq(dpg_upload_csv(&srv, "aux4k", aux, alen), 4000);
	free(aux);
	for (size_t more = 0; more < 3; more++) {
		csv = party_csv(more % 2, &len);
		cr_assert_eq(dpg_http(&srv, "PUT",
				      more < 2 ? "/v1/datasets/parties/data?columns=*:numeric" :
						 "/v1/datasets/parties/data?columns=*:numeric"
						 "&row_count=public",
				      srv.admin_key, csv, len, hdr, &r),
			     0);
		cr_assert_eq(r.status, 200, "%s", r.body);
		dpg_resp_free(&r);
		free(csv);
		r = submit_ensemble("parties", ",\"auxiliary_data\":\"aux4k\",\"local_model\":\"knn\"",
				    true);
		if (more < 2) {
			cr_assert_not_null(strstr(r.body, "10000000 private rows"), "%s", r.body);
			dpg_expect_same_refusal(&r, 400, "/params/local_model", &first);
			continue;
		}
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert(json_is_true(json_object_get(r.json, "fits")), "%s", r.body);
		dpg_resp_free(&r);
	}
	free(first);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
}

Test(public, an_ensemble_job_is_checked_before_anything_is_reserved, .timeout = 120)
{
	dpg_resp r;

	dpg_make_dataset(&srv, "parties", 5.0, 0.0, "basic");
	upload_party_table("parties");
	upload_aux_and_test();
	dpg_make_dataset(&srv, "private_aux", 5.0, 0.0, "basic");
	upload_two_class("private_aux", 50, 4, false);
	expect_ensemble_refused("parties", ",\"auxiliary_data\":\"private_aux\"", 422,
				"/params/auxiliary_data");
	expect_ensemble_refused("parties", ",\"auxiliary_data\":\"nowhere\"", 422,
				"/params/auxiliary_data");
	expect_ensemble_refused("parties", ",\"test_data\":\"private_aux\"", 422, "/params/test_data");
	expect_ensemble_refused("parties", ",\"party_column\":\"city\"", 400, "/params/party_column");
	expect_ensemble_refused("parties", ",\"parties\":[\"x\",\"y\"]", 400, "/params/parties");
	expect_ensemble_refused("parties", ",\"local_model\":\"forest\"", 400,
				"/params/local_model");
	/* Under replace-one-row neighbours a row may change parties. */
	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key,
		     "{\"id\":\"swap\",\"budget\":{\"epsilon\":5,\"delta\":0},\"accountant\":\"basic\","
		     "\"neighbor\":\"replace\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	upload_party_table("swap");
	expect_ensemble_refused("swap", "", 422, "/trainer");
	tiny_epsilon_refused();
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
}
