/*
 * test_public.c: public datasets: no budget and no ledger, rows readable
 * back, every charging route refused, the flag fixed for life, and a
 * scoped key's reach.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

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

/*
 * A two-class table of n rows, "a,b,noise,y": y = 1 when a + b > 0, drawn
 * from a fixed LCG so that the test is the same on every run.  With
 * `shuffled`, the columns come in another order ("y,noise,b,a"), which a
 * job must match by name.
 */
static char *two_class_csv(size_t n, unsigned seed, bool shuffled)
{
	size_t size = 64 + n * 64, len = 0;
	char *csv = malloc(size);
	uint64_t s = seed;

	cr_assert_not_null(csv);
	len += (size_t)snprintf(csv + len, size - len, "%s\n", shuffled ? "y,noise,b,a" : "a,b,noise,y");
	for (size_t i = 0; i < n; i++) {
		double v[3];

		for (int k = 0; k < 3; k++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			v[k] = (double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
		}
		int y = v[0] + v[1] > 0;

		if (shuffled)
			len += (size_t)snprintf(csv + len, size - len, "%d,%.6f,%.6f,%.6f\n", y, v[2],
						v[1], v[0]);
		else
			len += (size_t)snprintf(csv + len, size - len, "%.6f,%.6f,%.6f,%d\n", v[0], v[1],
						v[2], y);
	}
	return csv;
}

static void upload_two_class(const char *id, size_t n, unsigned seed, bool shuffled)
{
	char *csv = two_class_csv(n, seed, shuffled);

	cr_assert_eq(dpg_upload_csv(&srv, id, csv, strlen(csv)), (long)n);
	free(csv);
}

/* A small DP-SGD job on dataset "priv" with `extra` params appended. */
static dpg_resp submit_dpsgd(const char *extra)
{
	char body[1024];

	snprintf(body, sizeof(body),
		 "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\","
		 "\"classes\":2,\"epochs\":3,\"lot_size\":50,\"noise_multiplier\":1,"
		 "\"clip_norm\":1,\"learning_rate\":0.5%s}}",
		 extra);
	return dpg_call(&srv, "POST", "/v1/datasets/priv/jobs", srv.admin_key, body);
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
	/* Nothing was reserved for any of them. */
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
}

Test(public, a_job_reports_metrics_on_test_data_only)
{
	const char *done[] = {"succeeded", "failed", "cancelled", NULL};
	char job_id[64];
	dpg_resp r;
	json_t *job, *result;

	dpg_make_dataset(&srv, "priv", 10.0, 1e-5, "rdp");
	upload_two_class("priv", 400, 1, false);
	make_public("test");
	/* The test table holds the columns in another order: matched by name. */
	upload_two_class("test", 300, 7, true);
	r = submit_dpsgd(",\"test_data\":\"test\"");
	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(job_id, sizeof(job_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_wait(&srv, job_id, done, 120);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
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
