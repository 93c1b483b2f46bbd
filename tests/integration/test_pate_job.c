/*
 * test_pate_job.c: the `pate` trainer as a job through the API: teachers on
 * a hosted private table, queries on public student rows, the student, its
 * predictions; the ledger's reservation (the worst case) and the charge of
 * what ran, checked against the data-independent RDP computed here from
 * its closed forms; refusals before anything is reserved.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

TestSuite(pate_job, .init = setup, .fini = teardown, .timeout = 300);

#define PRIV_ROWS 2000
#define STUDENT_ROWS 300
#define TEST_ROWS 200
#define QUERIES 100
#define TEACHERS 20
/* The job's noise and release (integers and a short binary fraction, so
 * the sampler uses them exactly: mech_discrete_gaussian_sigma). */
#define SIGMA1 10.0   /* as submit's defaults say */
#define SIGMA2 5.0
#define BETA 0.03
#define RELEASE_SIGMA 10.0
#define ORDER 8.0
#define DELTA 1e-5

/* Uploads dpg_two_class_rows(n, seed) to dataset id as "a,b,noise,y" (with `labelled`)
 * or "noise,b,a" (without: a job must match columns by name), the row
 * count private (a public dataset's is public whatever the upload says). */
static void upload(const char *id, size_t n, unsigned seed, bool labelled)
{
	char *csv = jobs_common_two_class_csv(n, seed, labelled ? "a,b,noise,y" : "noise,b,a");

	cr_assert_eq(dpg_upload_csv_private_count(&srv, id, csv, strlen(csv)), (long)n);
	free(csv);
}

/* A private rdp dataset with one filter order, ORDER: its spent epsilon is
 * then the conversion at that order alone. */
static void make_private(const char *id, double epsilon)
{
	char body[256];

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":%g,\"delta\":%g},\"accountant\":\"rdp\","
		 "\"filter_orders\":[%g]}",
		 id, epsilon, DELTA, ORDER);
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key, body, 201);
}

/* The private table `priv` (budget epsilon) and the public student and
 * test tables every run reads. */
static void setup_tables(const char *priv, double epsilon)
{
	make_private(priv, epsilon);
	upload(priv, PRIV_ROWS, 7, true);
	jobs_common_make_public(&srv, "stud");
	upload("stud", STUDENT_ROWS, 11, true);
	jobs_common_make_public(&srv, "test");
	upload("test", TEST_ROWS, 13, true);
}

/* The job's params, with `over` (",\"key\":value" pairs) in place of the
 * defaults it names, and `top` ("\"key\":value," pairs) beside them. */
static dpg_resp submit_with(const char *dataset, const char *top, const char *over)
{
	static const char *const defaults[][2] = {
		{"teachers", "20"},
		{"threshold", "15"},
		{"sigma1", "10"},
		{"sigma2", "5"},
		{"release_beta", "0.03"},
		{"release_sigma", "10"},
		{"release_order", "8"},
		{"queries", "100"},
		{"student_data", "\"stud\""},
		{"test_data", "\"test\""},
		{"aggregator", "\"confident_gnmax\""},
		{"teacher_model", "{\"model\":\"logreg\",\"epochs\":20,\"lot_size\":16,"
				  "\"learning_rate\":0.5}"},
		{"student_model", "{\"model\":\"logreg\",\"epochs\":60,\"lot_size\":16,"
				  "\"learning_rate\":0.5}"},
	};
	char body[2048], path[128], key[48];
	size_t len = (size_t)snprintf(body, sizeof(body),
				      "{%s\"trainer\":\"pate\",\"params\":{\"label\":\"y\","
				      "\"classes\":2%s",
				      top, over);

	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		snprintf(key, sizeof(key), "\"%s\":", defaults[i][0]);
		if (!strstr(over, key))
			len += (size_t)snprintf(body + len, sizeof(body) - len, ",%s%s", key,
						defaults[i][1]);
	}
	snprintf(body + len, sizeof(body) - len, "}}");
	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", dataset);
	return dpg_call(&srv, "POST", path, srv.admin_key, body);
}

static dpg_resp submit(const char *dataset, const char *over)
{
	return submit_with(dataset, "", over);
}

/*
 * The ledger's epsilon of `checks` threshold checks, `answers` GNMax answers
 * and one GNSS release on the one-order filter, from the closed forms: RDP
 * at lambda of pate_threshold(s1) lambda / (2 s1^2), of gnmax(s2)
 * lambda / s2^2, of the GNSS release (PATE 2018, Theorem 23, at beta + 2^-22
 * as priced) lambda e^{2b} / s^2 + (b lambda - ln(1 - 2 lambda b) / 2) /
 * (lambda - 1); then the conversion of Canonne, Kamath, Steinke 2020,
 * Prop. 12: eps = rdp + log1p(-1/lambda) - (log delta + log lambda) /
 * (lambda - 1).
 */
static double expected_epsilon(double checks, double answers)
{
	double l = ORDER, b = BETA + 0x1p-22;
	double rdp = checks * l / (2 * SIGMA1 * SIGMA1) + answers * l / (SIGMA2 * SIGMA2) +
		     l * exp(2 * b) / (RELEASE_SIGMA * RELEASE_SIGMA) +
		     (b * l - log(1 - 2 * l * b) / 2) / (l - 1);

	return rdp + log1p(-1 / l) - (log(DELTA) + log(l)) / (l - 1);
}

/* Asserts that the ledger of "priv" is: the reserve of the worst case, its
 * release, and the charge of what ran (checks, answers), in that order. */
static void check_ledger(double checks, double answers)
{
	json_t *all = dpg_list_all(&srv, "/v1/datasets/priv/ledger?limit=100", 4), *e;
	const char *kinds[] = {"reserve", "release", "charge"};
	double eps[] = {expected_epsilon(QUERIES, QUERIES), expected_epsilon(QUERIES, QUERIES),
			expected_epsilon(checks, answers)};
	size_t i, k = 0;

	json_array_foreach(all, i, e) {
		const char *kind = json_string_value(json_object_get(e, "kind"));

		if (strcmp(kind, "create") == 0)
			continue;
		cr_assert(k < 3, "an extra ledger row: %s", kind);
		cr_assert_str_eq(kind, kinds[k]);
		cr_assert_float_eq(dpg_num(e, "epsilon"), eps[k], 1e-9 * eps[k], "%s: %.17g vs %.17g",
				   kind, dpg_num(e, "epsilon"), eps[k]);
		k++;
	}
	cr_assert_eq(k, 3);
	cr_assert_float_eq(dpg_budget_of(&srv, "priv").spent_eps, eps[2], 1e-9 * eps[2]);
	json_decref(all);
}

/* POSTs the test rows to predict: its accuracy is the result's. */
static void check_predict(const char *job_id, const json_t *result)
{
	size_t size = 32 + TEST_ROWS * 40, len = 0, right = 0;
	char *body = malloc(size), path[128];
	double (*v)[3] = malloc(sizeof(*v) * TEST_ROWS);
	int *y = malloc(sizeof(int) * TEST_ROWS);
	const json_t *classes;
	dpg_resp r;

	cr_assert(body && v && y);
	dpg_two_class_rows(TEST_ROWS, 13, v, y);
	len += (size_t)snprintf(body, size, "{\"rows\":[");
	for (size_t i = 0; i < TEST_ROWS; i++)
		len += (size_t)snprintf(body + len, size - len, "%s[%.6f,%.6f,%.6f]", i ? "," : "",
					v[i][0], v[i][1], v[i][2]);
	snprintf(body + len, size - len, "]}");
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	classes = json_object_get(r.json, "classes");
	cr_assert_eq(json_array_size(classes), TEST_ROWS);
	for (size_t i = 0; i < TEST_ROWS; i++)
		right += json_integer_value(json_array_get(classes, i)) == y[i];
	cr_assert_float_eq(dpg_num(result, "test_accuracy"), (double)right / TEST_ROWS, 1e-12);
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(json_integer_value(json_object_get(r.json, "input_dim")), 3, "%s", r.body);
	dpg_resp_free(&r);
	free(body);
	free(v);
	free(y);
}

Test(pate_job, teachers_queries_student_and_predict)
{
	char job_id[64];
	json_t *job, *result, *progress;
	dpg_resp r;
	double checks, answers;

	setup_tables("priv", 50);
	r = submit("priv", "");
	cr_assert_eq(r.status, 202, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "trainer")), "pate");
	dpg_assert_in_spec(&srv, "POST", "/v1/datasets/{id}/jobs", "202", "application/json", r.body);
	/* The pate event does not take the row count as public. */
	cr_assert_null(json_object_get(r.json, "public_row_count"), "%s", r.body);
	cr_assert_null(json_object_get(r.json, "neighbouring"), "%s", r.body);
	cr_assert_float_eq(dpg_num(r.json, "reservation.epsilon"), expected_epsilon(QUERIES, QUERIES),
			   1e-9 * expected_epsilon(QUERIES, QUERIES));
	snprintf(job_id, sizeof(job_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_succeeded(&srv, job_id, 240);
	{
		char path[96];
		dpg_resp g;

		snprintf(path, sizeof(path), "/v1/jobs/%s", job_id);
		g = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
		cr_assert_eq(g.status, 200);
		dpg_assert_in_spec(&srv, "GET", "/v1/jobs/{id}", "200", "application/json", g.body);
		dpg_resp_free(&g);
	}
	result = json_object_get(job, "result");
	progress = json_object_get(job, "progress");
	/* Progress: public counts only. */
	cr_assert_eq(dpg_num(progress, "teachers_trained"), TEACHERS);
	cr_assert_eq(dpg_num(progress, "queries_asked"), QUERIES);
	cr_assert_null(json_object_get(progress, "loss"));
	checks = dpg_num(result, "checks");
	answers = dpg_num(result, "queries_answered");
	cr_assert_eq(checks, QUERIES);
	cr_assert(answers >= 1 && answers <= QUERIES, "%g", answers);
	cr_assert_eq(dpg_num(result, "abstained"), QUERIES - answers);
	cr_assert_float_eq(dpg_num(result, "epsilon_charged"), expected_epsilon(checks, answers),
			   1e-9 * expected_epsilon(checks, answers));
	cr_assert(isfinite(dpg_num(result, "epsilon_data_dependent")), "%s",
		  json_dumps(result, 0));
	/* Teachers of a linear rule and a clear margin: the labels are right. */
	cr_assert(dpg_num(result, "label_accuracy") >= 0.9, "%g", dpg_num(result, "label_accuracy"));
	cr_assert(dpg_num(result, "test_accuracy") >= 0.85, "%g", dpg_num(result, "test_accuracy"));
	cr_assert_null(json_object_get(result, "teacher_accuracy"));
	check_ledger(checks, answers);
	check_predict(job_id, result);
	json_decref(job);
}

Test(pate_job, a_budget_below_the_worst_case_is_refused_before_anything_is_written)
{
	dpg_resp r;

	setup_tables("small", 5);
	r = submit("small", "");
	cr_assert_eq(r.status, 409, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM ledger WHERE kind <> 'create'"),
		     0);
	cr_assert_eq(dpg_budget_of(&srv, "small").spent_eps, 0.0);
}

static void expect_refused(const char *over, long status, const char *field)
{
	dpg_resp r = submit("priv", over);

	jobs_common_expect_refusal(&r, status, field, over);
}

Test(pate_job, bad_params_are_refused_naming_the_field)
{
	dpg_resp r;

	setup_tables("priv", 50);
	make_private("privstud", 5);
	upload("privstud", 50, 3, false);
	expect_refused(",\"teachers\":0", 400, "/params/teachers");
	expect_refused(",\"aggregator\":\"lnmax\"", 400, "/params/aggregator");
	expect_refused(",\"sigma2\":-1", 400, "/params/sigma2");
	expect_refused(",\"teacher_model\":{\"model\":\"forest\"}", 400,
		       "/params/teacher_model/model");
	expect_refused(",\"student_model\":{\"epochs\":0}", 400, "/params/student_model/epochs");
	expect_refused(",\"release_beta\":0.0625", 400, "/params/release_beta");
	expect_refused(",\"colour\":1", 400, "/params/colour");
	expect_refused(",\"queries\":301", 400, "/params/queries");
	/* Well formed, but not what the data or the ledger allow: 422. */
	expect_refused(",\"student_data\":\"privstud\"", 422, "/params/student_data");
	expect_refused(",\"student_data\":\"nowhere\"", 422, "/params/student_data");
	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key,
		     "{\"id\":\"flat\",\"budget\":{\"epsilon\":50,\"delta\":1e-5},"
		     "\"accountant\":\"basic\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	upload("flat", PRIV_ROWS, 7, true);
	r = submit("flat", "");
	cr_assert_eq(r.status, 422, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/trainer", "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
}

/*
 * A hosted table's row count is private unless its upload declared it: a
 * pate job neither shows it nor refuses because of it.  Its dry run answers
 * the same bytes on 15 and on 16 private rows, with more teachers (20) than
 * rows, and the job runs there: a teacher without rows abstains.  Both
 * once told the count for free (the dry run showed it; more teachers than
 * rows was a 400).
 */
Test(pate_job, a_private_row_count_is_neither_shown_nor_refused, .timeout = 300)
{
	char *first, job_id[64];
	json_t *job;
	dpg_resp r;

	setup_tables("priv", 50);
	upload("priv", 15, 7, true);
	r = submit_with("priv", "\"dry_run\":true,", "");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_null(json_object_get(r.json, "n_train"), "%s", r.body);
	cr_assert_null(json_object_get(r.json, "public_row_count"), "%s", r.body);
	first = strdup(r.body);
	dpg_resp_free(&r);
	upload("priv", 16, 7, true);
	r = submit_with("priv", "\"dry_run\":true,", "");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, first);
	dpg_resp_free(&r);
	free(first);
	r = submit("priv", "");
	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(job_id, sizeof(job_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_succeeded(&srv, job_id, 240);
	cr_assert_eq(dpg_num(json_object_get(job, "progress"), "teachers_trained"), TEACHERS);
	json_decref(job);
}

/* Submits a job of one teacher on all of priv's rows with lots of 1 for
 * `epochs` epochs (minutes of training), waits until it runs (or has
 * already ended) and writes its id. */
static void start_one_long_teacher(int epochs, char *job_id, size_t size)
{
	static const char *const started[] = {"running", "cancelled", "failed", "succeeded", NULL};
	char over[256];
	dpg_resp r;

	snprintf(over, sizeof(over),
		 ",\"teachers\":1,\"threshold\":1,\"teacher_model\":{\"model\":\"logreg\","
		 "\"epochs\":%d,\"lot_size\":1,\"learning_rate\":0.5}",
		 epochs);
	r = submit("priv", over);
	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(job_id, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	json_decref(dpg_job_wait(&srv, job_id, started, 60));
}

/* Cancels running job `id` (202) and returns it once it has ended, failing
 * the test unless it ends within `seconds`. */
static json_t *cancel_running(const char *id, double seconds)
{
	static const char *const ended[] = {"cancelled", "failed", "succeeded", NULL};
	char path[96];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 202, "%s", r.body);
	dpg_resp_free(&r);
	return dpg_job_wait(&srv, id, ended, seconds);
}

/*
 * A cancel reaches a teacher while it trains: one teacher of 10^7 steps
 * (2000 rows, 5000 epochs of lots of 1, within the step limit; about a
 * minute and a half) is stopped within a few seconds of the DELETE, the
 * teacher not counted as trained.  Teachers once trained without the
 * cancel flag, which was read between teachers only.
 */
Test(pate_job, a_cancel_stops_a_teacher_while_it_trains, .timeout = 120)
{
	char job_id[64];
	json_t *job;

	setup_tables("priv", 50);
	start_one_long_teacher(5000, job_id, sizeof(job_id));
	job = cancel_running(job_id, 10);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "cancelled");
	cr_assert(json_is_null(json_object_get(job, "error")) || !json_object_get(job, "error"));
	/* No teacher finished: progress shows none trained (or nothing). */
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(job, "progress"),
							"teachers_trained")),
		     0);
	json_decref(job);
}

/*
 * One teacher on 1234 private rows, lots of 1 for 10^4 epochs: 1.234 10^7
 * steps uncapped, past the limit of 10^7.  The job does not fail: the
 * teacher trains, capped at the limit (minutes), until the cancel, and
 * neither the job's error nor anything else it shows tells a step count.
 * It once failed at once with "the job would take 12340000 steps", the
 * private row count times the public epochs.
 */
Test(pate_job, a_teacher_past_the_step_limit_trains_without_telling_its_steps, .timeout = 120)
{
	char job_id[64], path[96], *text;
	json_t *job;

	setup_tables("priv", 50);
	upload("priv", 1234, 7, true);
	start_one_long_teacher(10000, job_id, sizeof(job_id));
	/* The step check ran before the first step: had it refused, the job
	 * would have failed by now. */
	usleep(1500000);
	snprintf(path, sizeof(path), "/v1/jobs/%s", job_id);
	job = dpg_get_json(&srv, srv.admin_key, path);
	text = json_dumps(job, JSON_COMPACT);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "running", "%s", text);
	free(text);
	json_decref(job);
	job = cancel_running(job_id, 10);
	text = json_dumps(job, JSON_COMPACT);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "cancelled", "%s", text);
	cr_assert(!json_object_get(job, "error") || json_is_null(json_object_get(job, "error")),
		  "%s", text);
	cr_assert_null(strstr(text, "steps"), "%s", text);
	free(text);
	/* What the job computed shows no count (its ids may hold any digits). */
	text = json_dumps(json_object_get(job, "result"), JSON_COMPACT);
	cr_assert_null(strstr(text, "1234"), "%s", text);
	free(text);
	text = json_dumps(json_object_get(job, "progress"), JSON_COMPACT);
	cr_assert_null(strstr(text, "1234"), "%s", text);
	free(text);
	json_decref(job);
}

/* On Fashion-MNIST the student rows are the test split's first 9000
 * images and the last 1000 its evaluation rows: no student_data. */
Test(pate_job, on_fashion_mnist_the_test_split_is_the_student_pool, .timeout = 300)
{
	const char *params =
		"\"teachers\":10,\"queries\":50,\"threshold\":8,\"sigma1\":4,\"sigma2\":3,"
		"\"teacher_model\":{\"model\":\"logreg\",\"epochs\":1,\"lot_size\":64,"
		"\"learning_rate\":0.1},"
		"\"student_model\":{\"model\":\"logreg\",\"epochs\":30,\"lot_size\":16,"
		"\"learning_rate\":0.1}";
	char body[1024], job_id[64];
	json_t *job, *result;
	dpg_resp r;

	make_private("fm", 100);
	r = dpg_call(&srv, "PUT", "/v1/datasets/fm/data", srv.admin_key,
		     "{\"builtin\":\"fashion-mnist\"}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	jobs_common_make_public(&srv, "stud");
	upload("stud", STUDENT_ROWS, 11, true);
	snprintf(body, sizeof(body), "{\"trainer\":\"pate\",\"params\":{%s,\"student_data\":\"stud\"}}",
		 params);
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key, body);
	jobs_common_expect_refusal(&r, 422, "/params/student_data", "student_data on a builtin table");
	snprintf(body, sizeof(body), "{\"trainer\":\"pate\",\"params\":{%s}}", params);
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key, body);
	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(job_id, sizeof(job_id), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_succeeded(&srv, job_id, 280);
	result = json_object_get(job, "result");
	cr_assert_eq(dpg_num(result, "queries_asked"), 50);
	cr_assert_eq(dpg_num(result, "test_rows"), 1000);
	/* Ten classes: chance is 0.1. */
	cr_assert_geq(dpg_num(result, "label_accuracy"), 0.5, "%s", json_dumps(result, 0));
	cr_assert_geq(dpg_num(result, "test_accuracy"), 0.3, "%s", json_dumps(result, 0));
	json_decref(job);
}
