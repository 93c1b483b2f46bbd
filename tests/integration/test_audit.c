/*
 * test_audit.c: the audit trail, and `dpgate verify` replaying it.
 *
 * A dataset's creation, each budget change (with the budget before and
 * after) and its archiving are ledger rows naming the admin key that did
 * them, listed by GET /v1/datasets/{id}/audit; key creations and
 * revocations, over HTTP and through `dpgate keys`, are listed by GET
 * /v1/audit/keys.  Both are admin only and paginated like the ledger.
 *
 * `dpgate verify` replays each dataset's budgets from those rows and checks
 * every admission against the budget in force at its row.  The forgeries
 * below are written with SQLite directly, as an auditor (or an intruder
 * with the file) would: each carries totals that agree with the replay, so
 * only the budget history can tell them apart.
 */
#include <criterion/criterion.h>
#include <jansson.h>

#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

TestSuite(audit, .init = setup, .fini = teardown, .timeout = 300);

static const char half[] = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0}}";

/* Runs SQL on the database file, with the server stopped. */
static void forge(const char *sql)
{
	sqlite3 *h = NULL;
	char *msg = NULL;

	dpg_skip_on_pg("writes to the SQLite file behind the server");
	cr_assert_eq(sqlite3_open(srv.db, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql,
		     msg ? msg : "");
	sqlite3_close(h);
}

/* Runs `dpgate verify` on the server's database: its exit status, and its
 * report's entry for dataset `id` in *ret (caller decrefs the report). */
static int verify(const char *id, json_t **ret_report, json_t **ret_entry)
{
	static char out[1 << 16];
	const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	int rc = dpg_run(out, sizeof(out), argv);
	json_t *report = json_loads(out, 0, NULL), *d;
	size_t i;

	cr_assert(report, "verify printed no JSON (exit %d): %s", rc, out);
	*ret_entry = NULL;
	json_array_foreach(json_object_get(report, "datasets"), i, d)
		if (strcmp(json_string_value(json_object_get(d, "id")), id) == 0)
			*ret_entry = d;
	cr_assert(*ret_entry, "verify reports no dataset %s: %s", id, out);
	*ret_report = report;
	return rc;
}

/*
 * A charge admitted past a lowered budget, the budget raised again after it:
 * the totals agree and the end state is within the budget, so only the
 * budget in force at the forged row shows it.
 */
Test(audit, verify_finds_an_admission_past_the_budget_of_its_moment)
{
	json_t *report, *d;
	long long forged;

	dpg_make_dataset(&srv, "v", 1.0, 0, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/v/charges", srv.admin_key, half, 201);
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/v", srv.admin_key,
			  "{\"budget\":{\"epsilon\":0.5}}", 200);
	/* The gate refuses what the forger will write. */
	dpg_expect_status(&srv, "POST", "/v1/datasets/v/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}", 409);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(verify("v", &report, &d), 0, "an honest history");
	json_decref(report);

	/* 0.5 + 0.25 spent on a budget of 0.5, the row's totals right. */
	forge("INSERT INTO ledger (dataset_id, kind, event, cost, epsilon, delta, actor, created_at,"
	      " spent, reserved, open_reservations, charges) VALUES ('v', 'charge',"
	      " '{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}', '[0.25,0.0]', 0.25, 0,"
	      " 'forger', '2026-01-01T00:00:00.000Z', '[0.75,0.0]', '[0.0,0.0]', 0, 2)");
	forged = dpg_count_rows(srv.db, "SELECT max(seq) FROM ledger");
	dpg_server_restart(&srv);
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/v", srv.admin_key,
			  "{\"budget\":{\"epsilon\":1}}", 200);
	cr_assert_eq(dpg_budget_of(&srv, "v").spent_eps, 0.75);

	cr_assert_eq(verify("v", &report, &d), 1, "the forged admission");
	cr_assert(json_is_true(json_object_get(d, "totals_match")));
	cr_assert(json_is_true(json_object_get(d, "within_budget")));
	cr_assert(json_is_false(json_object_get(d, "admissions_within_budget")));
	cr_assert_eq(json_integer_value(json_object_get(d, "first_row_over_budget")), forged);
	cr_assert(json_is_false(json_object_get(report, "ok")));
	json_decref(report);
}

/* A budget written into the dataset row without its ledger row is not one
 * the history explains; lowering below what is spent, through the API, is. */
Test(audit, verify_replays_the_budget_history_to_the_dataset_row)
{
	json_t *report, *d;

	dpg_make_dataset(&srv, "h", 1.0, 0, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/h/charges", srv.admin_key, half, 201);
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/h", srv.admin_key,
			  "{\"budget\":{\"epsilon\":0.25}}", 200);
	cr_assert_eq(verify("h", &report, &d), 0);
	cr_assert(json_is_false(json_object_get(d, "within_budget")));
	cr_assert(json_is_true(json_object_get(d, "admissions_within_budget")));
	cr_assert(json_is_true(json_object_get(d, "budget_history_matches")));
	json_decref(report);

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	forge("UPDATE datasets SET budget_epsilon = 5 WHERE id = 'h'");
	cr_assert_eq(verify("h", &report, &d), 1, "a budget no ledger row set");
	cr_assert(json_is_false(json_object_get(d, "budget_history_matches")));
	json_decref(report);
	dpg_server_restart(&srv);
}

/*
 * Creation, raise, lower and archive are audit rows with their actor and
 * budgets; the largest budget the dataset ever had is the largest of them,
 * and verify reports it.  The ledger's own listing is unchanged.
 */
Test(audit, dataset_history_names_who_set_each_budget)
{
	char admin_id[64], analyst[160], viewer[160];
	json_t *entries, *e, *report, *d;
	dpg_resp r;

	dpg_key_id(srv.admin_key, admin_id, sizeof(admin_id));
	dpg_make_dataset(&srv, "a", 2.0, 1e-5, "rdp");
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/a", srv.admin_key,
			  "{\"budget\":{\"epsilon\":3}}", 200);
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/a", srv.admin_key,
			  "{\"budget\":{\"epsilon\":1,\"delta\":1e-6}}", 200);
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/a", srv.admin_key, NULL, 200);

	r = dpg_call(&srv, "GET", "/v1/datasets/a/audit", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	entries = json_object_get(r.json, "entries");
	cr_assert_eq(json_array_size(entries), 4, "%s", r.body);
	cr_assert(json_is_null(json_object_get(r.json, "next")));
	e = json_array_get(entries, 0);
	cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "create");
	cr_assert_eq(dpg_num(e, "budget.epsilon"), 2.0);
	cr_assert_eq(dpg_num(e, "budget.delta"), 1e-5);
	cr_assert_str_eq(json_string_value(json_object_get(e, "actor")), admin_id);
	cr_assert(json_is_false(json_object_get(e, "synthesized")));
	e = json_array_get(entries, 1);
	cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "budget");
	cr_assert_eq(dpg_num(e, "previous_budget.epsilon"), 2.0);
	cr_assert_eq(dpg_num(e, "budget.epsilon"), 3.0);
	cr_assert_str_eq(json_string_value(json_object_get(e, "note")), "raised");
	cr_assert_str_eq(json_string_value(json_object_get(e, "actor")), admin_id);
	e = json_array_get(entries, 2);
	cr_assert_eq(dpg_num(e, "previous_budget.epsilon"), 3.0);
	cr_assert_eq(dpg_num(e, "previous_budget.delta"), 1e-5);
	cr_assert_eq(dpg_num(e, "budget.epsilon"), 1.0);
	cr_assert_eq(dpg_num(e, "budget.delta"), 1e-6);
	cr_assert_str_eq(json_string_value(json_object_get(e, "note")), "lowered");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(entries, 3), "kind")),
			 "archive");
	dpg_resp_free(&r);

	/* Paginated as the ledger. */
	r = dpg_call(&srv, "GET", "/v1/datasets/a/audit?limit=3", srv.admin_key, NULL);
	cr_assert_eq(json_array_size(json_object_get(r.json, "entries")), 3, "%s", r.body);
	cr_assert(json_is_integer(json_object_get(r.json, "next")), "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/a/audit?limit=0", srv.admin_key, NULL);
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "limit");
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/v1/datasets/nope/audit", srv.admin_key, NULL, 404);

	/* The ledger lists what it listed before: the two budget rows and the
	 * archive row, no creation row, so its sums and counts are unchanged. */
	r = dpg_call(&srv, "GET", "/v1/datasets/a/ledger", srv.admin_key, NULL);
	cr_assert_eq(json_array_size(json_object_get(r.json, "entries")), 3, "%s", r.body);
	cr_assert_eq(dpg_num(json_array_get(json_object_get(r.json, "entries"), 0),
			     "previous_budget.epsilon"),
		     2.0, "%s", r.body);
	dpg_resp_free(&r);

	/* Admins only. */
	dpg_make_key(&srv, "analyst", "a", analyst, sizeof(analyst));
	dpg_make_key(&srv, "viewer", NULL, viewer, sizeof(viewer));
	dpg_expect_status(&srv, "GET", "/v1/datasets/a/audit", analyst, NULL, 403);
	dpg_expect_status(&srv, "GET", "/v1/datasets/a/audit", viewer, NULL, 403);
	dpg_expect_status(&srv, "GET", "/v1/datasets/a/audit", NULL, NULL, 401);

	/* The largest budget ever, from the database alone. */
	cr_assert_eq(verify("a", &report, &d), 0);
	cr_assert_eq(dpg_num(d, "largest_budget.epsilon"), 3.0);
	cr_assert_eq(dpg_num(d, "largest_budget.delta"), 1e-5);
	json_decref(report);
}

/* The key_events rows of key `id`, in order, as "action:actor" joined by
 * commas, read through GET /v1/audit/keys one row per page. */
static void key_history(const char *id, char *buf, size_t size)
{
	char path[128];
	long long after = 0;

	buf[0] = '\0';
	for (int pages = 0; pages < 100; pages++) {
		json_t *e, *next;
		dpg_resp r;

		snprintf(path, sizeof(path), "/v1/audit/keys?limit=1&after=%lld", after);
		r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
		cr_assert_eq(r.status, 200, "%s", r.body);
		e = json_array_get(json_object_get(r.json, "entries"), 0);
		if (e && strcmp(json_string_value(json_object_get(e, "key_id")), id) == 0) {
			size_t n = strlen(buf);

			cr_assert(json_is_false(json_object_get(e, "synthesized")));
			cr_assert(json_is_string(json_object_get(e, "created_at")));
			snprintf(buf + n, size - n, "%s%s:%s", n ? "," : "",
				 json_string_value(json_object_get(e, "action")),
				 json_string_value(json_object_get(e, "actor")));
		}
		next = json_object_get(r.json, "next");
		if (json_is_null(next)) {
			cr_assert_leq(json_array_size(json_object_get(r.json, "entries")), 1);
			dpg_resp_free(&r);
			return;
		}
		after = json_integer_value(next);
		dpg_resp_free(&r);
	}
	cr_assert_fail("GET /v1/audit/keys did not end");
}

Test(audit, key_creation_and_revocation_name_who_did_them)
{
	char admin_id[64], cli[160], cli_id[64], http_id[64], want[256], got[1024];
	struct passwd *pw = getpwuid(geteuid());
	dpg_resp r;

	cr_assert(pw && pw->pw_name, "this test's user has no passwd entry");
	dpg_key_id(srv.admin_key, admin_id, sizeof(admin_id));
	/* Through the CLI: created by cli:<login>, revoked over HTTP. */
	dpg_make_key(&srv, "viewer", NULL, cli, sizeof(cli));
	dpg_key_id(cli, cli_id, sizeof(cli_id));
	snprintf(want, sizeof(want), "/v1/keys/%s", cli_id);
	dpg_expect_status(&srv, "DELETE", want, srv.admin_key, NULL, 200);
	/* A second revocation changes nothing and records nothing. */
	dpg_expect_status(&srv, "DELETE", want, srv.admin_key, NULL, 200);
	key_history(cli_id, got, sizeof(got));
	snprintf(want, sizeof(want), "create:cli:%s,revoke:%s", pw->pw_name, admin_id);
	cr_assert_str_eq(got, want);

	/* Over HTTP: created by the admin key, revoked by the CLI. */
	r = dpg_call(&srv, "POST", "/v1/keys", srv.admin_key, "{\"role\":\"analyst\",\"datasets\":[\"x\"]}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(http_id, sizeof(http_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	dpg_revoke_key_cli(srv.db, http_id);
	key_history(http_id, got, sizeof(got));
	snprintf(want, sizeof(want), "create:%s,revoke:cli:%s", admin_id, pw->pw_name);
	cr_assert_str_eq(got, want);
	r = dpg_call(&srv, "GET", "/v1/audit/keys", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	{
		json_t *e, *last = NULL;
		size_t i;

		json_array_foreach(json_object_get(r.json, "entries"), i, e)
			if (strcmp(json_string_value(json_object_get(e, "key_id")), http_id) == 0)
				last = e;
		cr_assert(last, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(last, "role")), "analyst");
		cr_assert_str_eq(json_string_value(json_array_get(json_object_get(last, "datasets"), 0)),
				 "x");
	}
	dpg_resp_free(&r);

	/* Admins only; bad paging names its parameter. */
	dpg_expect_status(&srv, "GET", "/v1/audit/keys", cli, NULL, 401);
	dpg_make_key(&srv, "viewer", NULL, cli, sizeof(cli));
	dpg_expect_status(&srv, "GET", "/v1/audit/keys", cli, NULL, 403);
	r = dpg_call(&srv, "GET", "/v1/audit/keys?after=-1", srv.admin_key, NULL);
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "after");
	dpg_resp_free(&r);
}
