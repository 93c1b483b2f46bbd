/*
 * test_public.c: public datasets: no budget and no ledger, rows readable
 * back, every charging route refused, the flag fixed for life, and a
 * scoped key's reach.
 */
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
