/*
 * test_no_random.c: without a working getrandom, no release route draws
 * noise from anything else, answers with an output, or charges.
 *
 * The server runs with no_random.so preloaded (NO_RANDOM_SHIM, from
 * meson): its getrandom fails with EIO while the switch file exists.  Every
 * route that releases noise (direct mechanisms, hosted-table queries, PATE
 * label queries and the PATE smooth-sensitivity release) must then answer
 * 503 problem+json and leave the budget, the charge count and the ledger as
 * they were.  With the switch file gone the same request is released and
 * charged, which shows that the 503 came from the missing randomness.  A
 * training job that starts without randomness fails before it reads the
 * data, and its reservation is released.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

static dpg_server srv;
static dpg_shim_env shim;

static void setup(void)
{
	static const dpg_shim_switch off = {"DPGATE_TEST_NO_RANDOM", "off"};

	dpg_shim_server_start(&srv, &shim, "norandom", NO_RANDOM_SHIM, &off, 1);
}

static void teardown(void)
{
	dpg_shim_server_stop(&srv, &shim);
}

TestSuite(no_random, .init = setup, .fini = teardown, .timeout = 300);

static void randomness(bool on)
{
	dpg_switch_file(shim.file[0], !on);
}

static dpg_budget budget_of(const char *id)
{
	return dpg_budget_of(&srv, id);
}

static void make_ds(const char *id, const char *neighbor)
{
	char body[256];

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":100,\"delta\":1e-3},\"accountant\":\"rdp\","
		 "\"neighbor\":\"%s\"}",
		 id, neighbor);
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key, body, 201);
}

static const char *const table_csv = "age,income\n34,51234.5\n29,48000\n51,99999.25\n45,61000\n";

struct release {
	const char *dataset;
	const char *path;    /* after /v1/datasets/{dataset}, or after the PATE session's path */
	const char *body;
	bool pate;
};

static const struct release releases[] = {
	{"m", "/mechanisms/laplace", "{\"value\":12.5,\"sensitivity\":1,\"epsilon\":0.5}", false},
	{"m", "/mechanisms/gaussian",
	 "{\"value\":3.5,\"sensitivity\":1,\"epsilon\":0.5,\"delta\":1e-6}", false},
	{"m", "/mechanisms/discrete_laplace",
	 "{\"values\":[40,50],\"sensitivity\":2,\"scale\":8}", false},
	{"m", "/mechanisms/exponential", "{\"scores\":[1,5,2],\"sensitivity\":1,\"epsilon\":0.5}", false},
	{"m", "/mechanisms/report_noisy_max",
	 "{\"scores\":[1,5,2],\"sensitivity\":1,\"noise\":\"laplace\",\"epsilon\":0.5}", false},
	{"m", "/mechanisms/randomized_response",
	 "{\"value\":2,\"num_buckets\":4,\"epsilon\":0.5}", false},
	{"m", "/mechanisms/label_em", "{\"labels\":[0,1,1,0,1,0,0,1],\"epsilon\":1}", false},
	{"t", "/queries", "{\"query\":\"count\",\"epsilon\":0.5}", false},
	{"t", "/queries",
	 "{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":0.5}", false},
	{"t", "/queries",
	 "{\"query\":\"quantile\",\"column\":\"age\",\"q\":0.5,\"lo\":0,\"hi\":100,\"epsilon\":0.5}", false},
	{"t", "/queries", "{\"queries\":[{\"votes\":[60,30,10]}]}", true},
	{"t", "/release", "{\"beta\":0.01,\"sigma\":20,\"order\":10,\"delta\":1e-6}", true},
};

static dpg_resp post_release(const struct release *rel, const char *sid)
{
	char path[384];

	snprintf(path, sizeof(path), "/v1/datasets/%s%s%s%s", rel->dataset,
		 rel->pate ? "/pate/sessions/" : "", rel->pate ? sid : "", rel->path);
	return dpg_call(&srv, "POST", path, srv.admin_key, rel->body);
}

Test(no_random, every_release_route_answers_503_and_charges_nothing)
{
	char sid[128];
	dpg_resp r;

	make_ds("m", "replace");
	make_ds("t", "add_remove");
	dpg_upload_csv(&srv, "t", table_csv, strlen(table_csv));
	/* A PATE session with one answered query, so that its release has
	 * something to release. */
	r = dpg_call(&srv, "POST", "/v1/datasets/t/pate/sessions", srv.admin_key,
		     "{\"aggregator\":\"gnmax\",\"num_teachers\":100,\"num_classes\":3,\"sigma2\":40}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(sid, sizeof(sid), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	r = post_release(&releases[10], sid);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);

	for (size_t i = 0; i < sizeof(releases) / sizeof(releases[0]); i++) {
		const struct release *rel = &releases[i];
		dpg_budget before = budget_of(rel->dataset), after;

		randomness(false);
		r = post_release(rel, sid);
		cr_assert_eq(r.status, 503, "%s %s without randomness: %ld %s", rel->path, rel->body,
			     r.status, r.body);
		cr_assert_str_eq(r.content_type, "application/problem+json", "%s", rel->path);
		cr_assert_eq(json_integer_value(json_object_get(r.json, "status")), 503, "%s", r.body);
		cr_assert_eq(r.retry_after, 1, "%s: a 503 says when to retry", rel->path);
		cr_assert_null(json_object_get(r.json, "output"), "%s", r.body);
		dpg_resp_free(&r);
		after = budget_of(rel->dataset);
		cr_assert_eq(after.charges, before.charges, "%s: charged", rel->path);
		cr_assert_eq(after.ledger_rows, before.ledger_rows, "%s: ledger row", rel->path);
		cr_assert_eq(after.spent_eps, before.spent_eps, "%s: epsilon moved", rel->path);
		cr_assert_eq(after.spent_delta, before.spent_delta, "%s: delta moved", rel->path);

		randomness(true);
		r = post_release(rel, sid);
		cr_assert_eq(r.status, 201, "%s %s with randomness: %ld %s", rel->path, rel->body,
			     r.status, r.body);
		dpg_resp_free(&r);
		after = budget_of(rel->dataset);
		cr_assert_eq(after.charges, before.charges + 1, "%s: not charged once", rel->path);
	}
}

/* The job `id` once it has ended (asserts that it does within 60 s). */
static json_t *job_when_ended(const char *id)
{
	static const char *const ended[] = {"succeeded", "failed", "cancelled", NULL};

	return dpg_job_wait(&srv, id, ended, 60);
}

/* Ledger entries of dataset `ds` of one kind ("reserve", "commit", ...). */
static int ledger_kind(const char *ds, const char *kind)
{
	char path[256];
	dpg_resp r;
	size_t i;
	json_t *e;
	int n = 0;

	snprintf(path, sizeof(path), "/v1/datasets/%s/ledger?limit=1000", ds);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	json_array_foreach(json_object_get(r.json, "entries"), i, e)
		n += strcmp(json_string_value(json_object_get(e, "kind")), kind) == 0;
	dpg_resp_free(&r);
	return n;
}

static double budget_number(const char *ds, const char *part)
{
	char path[256];
	dpg_resp r;
	double x;

	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", ds);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	x = dpg_num(json_object_get(r.json, part), "epsilon");
	dpg_resp_free(&r);
	return x;
}

static void submit(const char *body, char *id, size_t size)
{
	dpg_resp r = dpg_call(&srv, "POST", "/v1/datasets/j/jobs", srv.admin_key, body);

	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(id, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
}

static const char *job_state(const char *id, char *buf, size_t size)
{
	char path[128];

	cr_assert_lt(snprintf(path, sizeof(path), "/v1/jobs/%s", id), (int)sizeof(path));
	return dpg_get_string(&srv, path, "state", buf, size);
}

/*
 * Without randomness a job cannot be submitted (its ids are random: 503,
 * nothing reserved).  A job submitted with randomness that starts without it
 * fails before it reads the data, and its reservation is released.  To hold
 * it queued until then, two long jobs keep both workers busy; they are
 * cancelled while running, so theirs are committed.
 */
Test(no_random, a_job_without_randomness_is_refused_or_fails_and_releases)
{
	static const char job[] =
		"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\",\"classes\":2,"
		"\"epochs\":1,\"lot_size\":10,\"noise_multiplier\":1.0,\"clip_norm\":1,"
		"\"learning_rate\":0.1}}";
	static const char long_job[] =
		"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\",\"classes\":2,"
		"\"epochs\":10000,\"lot_size\":1,\"noise_multiplier\":50,\"clip_norm\":1,"
		"\"learning_rate\":0.1}}";
	char csv[8192], id[64], longs[2][64], st[32], path[128];
	size_t n = 0;
	const char *error;
	json_t *j;
	dpg_resp r;

	n += (size_t)snprintf(csv + n, sizeof(csv) - n, "x1,x2,y\n");
	for (int i = 0; i < 400; i++)
		n += (size_t)snprintf(csv + n, sizeof(csv) - n, "%d,%d,%d\n", i % 7, i % 5, i % 2);
	make_ds("j", "add_remove");
	dpg_upload_csv(&srv, "j", csv, n);

	randomness(false);
	dpg_expect_status(&srv, "POST", "/v1/datasets/j/jobs", srv.admin_key, job, 503);
	cr_assert_eq(budget_number("j", "reserved"), 0.0);
	cr_assert_eq(ledger_kind("j", "reserve"), 0);

	randomness(true);
	for (int i = 0; i < 2; i++)
		submit(long_job, longs[i], sizeof(longs[i]));
	/* A step taken, not only "running": a worker writes that before it
	 * opens its random source. */
	for (int i = 0; i < 2; i++)
		dpg_job_wait_steps(&srv, longs[i], 1, 30);
	submit(job, id, sizeof(id));
	randomness(false);
	cr_assert_str_eq(job_state(id, st, sizeof(st)), "queued");
	for (int i = 0; i < 2; i++) {
		cr_assert_lt(snprintf(path, sizeof(path), "/v1/jobs/%s", longs[i]), (int)sizeof(path));
		r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
		cr_assert(r.status == 200 || r.status == 202, "%ld %s", r.status, r.body);
		dpg_resp_free(&r);
	}
	j = job_when_ended(id);
	error = json_string_value(json_object_get(j, "error"));
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "failed");
	cr_assert(error && strstr(error, "randomness"), "error: %s", error ? error : "(none)");
	json_decref(j);
	for (int i = 0; i < 2; i++)
		json_decref(job_when_ended(longs[i]));
	/* Three reservations: the long jobs' committed, the failed job's released. */
	cr_assert_eq(budget_number("j", "reserved"), 0.0);
	cr_assert_gt(budget_number("j", "spent"), 0.0);
	cr_assert_eq(ledger_kind("j", "reserve"), 3);
	cr_assert_eq(ledger_kind("j", "commit"), 2);
	cr_assert_eq(ledger_kind("j", "release"), 1);
}

static size_t array_size_at(const char *path, const char *member)
{
	dpg_resp r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	size_t n;

	cr_assert_eq(r.status, 200, "%s", r.body);
	n = json_array_size(json_object_get(r.json, member));
	dpg_resp_free(&r);
	return n;
}

/* Everything else that draws a random id (reservations, PATE sessions,
 * API keys, uploads) answers 503 and writes nothing without randomness;
 * with randomness back the same request succeeds.  The upload comes last:
 * until then the dataset has no data. */
Test(no_random, random_ids_answer_503_and_write_nothing)
{
	static const struct {
		const char *method, *path, *body, *content_type;
		long ok;
	} cases[] = {
		{"POST", "/v1/datasets/d/reservations",
		 "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0}}", NULL, 201},
		{"POST", "/v1/datasets/d/pate/sessions",
		 "{\"aggregator\":\"gnmax\",\"num_teachers\":100,\"num_classes\":3,\"sigma2\":40}", NULL,
		 201},
		{"POST", "/v1/keys", "{\"role\":\"viewer\"}", NULL, 201},
		{"PUT", "/v1/datasets/d/data", "a,b\n1,2\n3,4\n", "Content-Type: text/csv", 200},
	};

	make_ds("d", "add_remove");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *headers[] = {cases[i].content_type, NULL};
		size_t keys = array_size_at("/v1/keys", "keys");
		size_t ledger = array_size_at("/v1/datasets/d/ledger", "entries");
		double reserved = budget_number("d", "reserved");
		dpg_resp r;

		randomness(false);
		cr_assert_eq(dpg_http(&srv, cases[i].method, cases[i].path, srv.admin_key,
				      cases[i].body, strlen(cases[i].body),
				      cases[i].content_type ? headers : NULL, &r), 0);
		cr_assert_eq(r.status, 503, "%s %s: %ld %s", cases[i].method, cases[i].path, r.status,
			     r.body);
		cr_assert_str_eq(r.content_type, "application/problem+json");
		cr_assert_eq(r.retry_after, 1, "%s: a 503 says when to retry", cases[i].path);
		dpg_resp_free(&r);
		cr_assert_eq(array_size_at("/v1/keys", "keys"), keys, "%s", cases[i].path);
		cr_assert_eq(array_size_at("/v1/datasets/d/ledger", "entries"), ledger, "%s",
			     cases[i].path);
		cr_assert_eq(budget_number("d", "reserved"), reserved, "%s", cases[i].path);
		r = dpg_call(&srv, "GET", "/v1/datasets/d/data", srv.admin_key, NULL);
		cr_assert_eq(r.status, 404, "%s: data stored: %s", cases[i].path, r.body);
		dpg_resp_free(&r);

		randomness(true);
		cr_assert_eq(dpg_http(&srv, cases[i].method, cases[i].path, srv.admin_key,
				      cases[i].body, strlen(cases[i].body),
				      cases[i].content_type ? headers : NULL, &r), 0);
		cr_assert_eq(r.status, cases[i].ok, "%s %s: %ld %s", cases[i].method, cases[i].path,
			     r.status, r.body);
		dpg_resp_free(&r);
	}
}

/* `dpgate keys create` without randomness exits 1, prints no key and
 * writes none; with randomness back it creates one. */
Test(no_random, keys_create_cli_refuses_without_randomness)
{
	const char *create[] = {dpg_bin(), "keys", "create", "--db", srv.db, "--role", "viewer", NULL};
	const char *list[] = {dpg_bin(), "keys", "list", "--db", srv.db, NULL};
	char before[8192], after[8192], out[4096];

	cr_assert_eq(dpg_run(before, sizeof(before), list), 0);
	randomness(false);
	for (const char *const *e = shim.env; *e; e++)
		putenv((char *)*e);
	cr_assert_eq(dpg_run(out, sizeof(out), create), 1, "stdout: %s", out);
	cr_assert_null(strstr(out, "dpg_"), "a key was printed: %s", out);
	randomness(true);
	cr_assert_eq(dpg_run(after, sizeof(after), list), 0);
	cr_assert_str_eq(after, before);
	cr_assert_eq(dpg_run(out, sizeof(out), create), 0, "stdout: %s", out);
	cr_assert_not_null(strstr(out, "dpg_"), "%s", out);
}
