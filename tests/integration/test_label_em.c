/*
 * test_label_em.c: the label_em trainer through the API (docs/label_em.md):
 * a label-private dataset, a job that reads its labels once through the
 * label exponential mechanism, the charge, the model and its metrics on
 * public rows, the dry run's guidance, and every refusal before anything
 * is reserved.
 *
 * Every expected value is computed here.  The main job runs at epsilon =
 * 40, where each label is kept with probability p = 1 / (1 + e^-20): all
 * 2000 are released unchanged except with probability at most
 * 2000 (1 - p) < 5e-6.  With the unhinged loss l(z) = 1 - z, no centring,
 * weight decay lambda and full-batch descent, the model converges to the
 * closed form of docs/label_em.md, f(x) = (2 / lambda)(a . x + c) with
 * a = mean(s_i x_i) and c = mean(s_i), s_i = 2 y_i - 1; the contraction is
 * 1 - eta lambda per step, 0.9^300 < 1e-13 here.  The test computes a and c
 * from its own rows and checks the released weights, the predictions, the
 * test accuracy, AUC and balanced error against them.
 *
 * The accuracy threshold.  The toy problem is x = (u, v), both uniform on
 * [-1, 1], y = [u > 0].  On fresh data the closed form errs with
 * probability at most sqrt(a_2^2 / 3 + c^2) / (2 a_1) (docs/label_em.md).
 * By Hoeffding's inequality over the 2000 training rows, |a_2| <= 0.1 and
 * |c| <= 0.1 each fail with probability <= 2 e^-10, and a_1 = mean|u_i| >=
 * 0.45 with probability >= 1 - e^-10; then the error is at most
 * sqrt(0.01 / 3 + 0.01) / 0.9 < 0.129.  Over 1000 test rows the measured
 * accuracy is within 0.07 of the population's except with probability
 * 2 e^-9.8.  So test_accuracy >= 1 - 0.129 - 0.07 > 0.80 except with
 * probability below 1e-3, whatever the seed of the rows.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "jobs_common.h"
#include "test_math.h"

#define N_TRAIN 2000
#define N_TEST 1000
#define WEIGHT_DECAY 1.0

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(label_em, .init = setup, .fini = teardown, .timeout = 300);

/* The toy rows: u, v uniform on [-1, 1] at 6 decimals (as the CSV holds
 * them, so the server reads the same doubles), y = [u > 0]. */
struct toy {
	double u[N_TRAIN], v[N_TRAIN];
	int y[N_TRAIN];
	size_t n;
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double uniform_6(uint64_t *s)
{
	int64_t k = (int64_t)(splitmix(s) % 2000001) - 1000000;

	return (double)k / 1e6;
}

static void make_toy(struct toy *t, size_t n, uint64_t seed)
{
	t->n = n;
	for (size_t i = 0; i < n; i++) {
		do
			t->u[i] = uniform_6(&seed);
		while (t->u[i] == 0.0);
		t->v[i] = uniform_6(&seed);
		t->y[i] = t->u[i] > 0;
	}
}

/* The rows as CSV; the test table's columns in another order (matched by
 * name). */
static char *toy_csv(const struct toy *t, bool shuffled)
{
	size_t size = 64 + t->n * 40, len = 0;
	char *csv = malloc(size);

	cr_assert_not_null(csv);
	len += (size_t)snprintf(csv, size, shuffled ? "y,v,u\n" : "u,v,y\n");
	for (size_t i = 0; i < t->n; i++)
		len += (size_t)(shuffled ?
			snprintf(csv + len, size - len, "%d,%.6f,%.6f\n", t->y[i], t->v[i], t->u[i]) :
			snprintf(csv + len, size - len, "%.6f,%.6f,%d\n", t->u[i], t->v[i], t->y[i]));
	return csv;
}

static void upload_toy(const char *id, const struct toy *t, bool shuffled)
{
	char *csv = toy_csv(t, shuffled);

	cr_assert_eq(dpg_upload_csv(&srv, id, csv, strlen(csv)), (long)t->n);
	free(csv);
}

static void make_label_dataset(const char *id, double epsilon)
{
	char body[256];
	dpg_resp r;

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":%g,\"delta\":0},\"accountant\":\"basic\","
		 "\"privacy_unit\":\"label\"}",
		 id, epsilon);
	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key, body);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_assert_in_spec(&srv, "POST", "/v1/datasets", "201", "application/json", r.body);
	dpg_resp_free(&r);
}

/* The training table on "lab" (label-private, budget 25) and the public
 * test table "lab_test"; the rows into *train and *test. */
static void lab_tables(struct toy *train, struct toy *test)
{
	make_toy(train, N_TRAIN, 11);
	make_toy(test, N_TEST, 12);
	make_label_dataset("lab", 25);
	upload_toy("lab", train, false);
	jobs_common_make_public(&srv, "lab_test");
	upload_toy("lab_test", test, true);
}

/* POSTs a label_em job request on `id` with `params` (an object's members,
 * no braces), dry or not; returns the answer. */
static dpg_resp submit(const char *id, const char *params, bool dry_run)
{
	char path[128], body[1024];

	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", id);
	snprintf(body, sizeof(body), "{\"trainer\":\"label_em\",\"dry_run\":%s,\"params\":{%s}}",
		 dry_run ? "true" : "false", params);
	return dpg_call(&srv, "POST", path, srv.admin_key, body);
}

/* ---- the closed form ------------------------------------------------------- */

/* a = mean(s x), c = mean(s) over the training rows (no centring). */
struct closed_form {
	double a[2], c;
};

static struct closed_form unhinged_minimiser(const struct toy *t)
{
	struct closed_form cf = {{0, 0}, 0};

	for (size_t i = 0; i < t->n; i++) {
		double s = t->y[i] ? 1.0 : -1.0;

		cf.a[0] += s * t->u[i] / (double)t->n;
		cf.a[1] += s * t->v[i] / (double)t->n;
		cf.c += s / (double)t->n;
	}
	return cf;
}

/* The margin logit_1 - logit_0 of the minimiser at weight decay lambda. */
static double margin(const struct closed_form *cf, double u, double v)
{
	return 2.0 / WEIGHT_DECAY * (cf->a[0] * u + cf->a[1] * v + cf->c);
}

/* Accuracy, AUC (pairs, ties half) and balanced error of the minimiser on
 * the test rows, counted directly. */
static void closed_form_metrics(const struct closed_form *cf, const struct toy *t, double *acc,
				double *auc, double *ber)
{
	size_t right = 0, n1 = 0, err[2] = {0, 0}, cnt[2] = {0, 0};
	double pairs = 0, wins = 0;

	for (size_t i = 0; i < t->n; i++) {
		int pred = margin(cf, t->u[i], t->v[i]) > 0;

		right += pred == t->y[i];
		cnt[t->y[i]]++;
		err[t->y[i]] += pred != t->y[i];
		n1 += t->y[i];
	}
	for (size_t i = 0; i < t->n; i++)
		for (size_t j = 0; t->y[i] && j < t->n; j++) {
			double mi = margin(cf, t->u[i], t->v[i]), mj = margin(cf, t->u[j], t->v[j]);

			if (t->y[j])
				continue;
			pairs += 1;
			wins += mi > mj ? 1.0 : mi == mj ? 0.5 : 0.0;
		}
	cr_assert(n1 > 0 && n1 < t->n);
	*acc = (double)right / (double)t->n;
	*auc = wins / pairs;
	*ber = 0.5 * ((double)err[0] / (double)cnt[0] + (double)err[1] / (double)cnt[1]);
}

/* ---- the dataset ----------------------------------------------------------- */

/* Asserts that `method path body` is answered `status` naming `field`. */
static void expect_problem(const char *method, const char *path, const char *body,
			   long status, const char *field)
{
	dpg_resp r = dpg_call(&srv, method, path, srv.admin_key, body);

	cr_assert_eq(r.status, status, "%s %s: %ld %s", method, path, r.status, r.body);
	cr_assert_str_eq(r.content_type, "application/problem+json");
	if (field)
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), field, "%s",
				 r.body);
	dpg_resp_free(&r);
}

Test(label_em, a_label_private_dataset_is_fixed_and_never_public)
{
	dpg_resp r;

	make_label_dataset("lab", 5);
	r = dpg_call(&srv, "GET", "/v1/datasets/lab", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "privacy_unit")), "label");
	/* Label neighbours differ in one row's label: the replace relation. */
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "neighbor")), "replace");
	dpg_assert_in_spec(&srv, "GET", "/v1/datasets/{id}", "200", "application/json", r.body);
	dpg_resp_free(&r);
	expect_problem("PATCH", "/v1/datasets/lab", "{\"privacy_unit\":\"record\"}", 400,
		       "/privacy_unit");
	r = dpg_call(&srv, "GET", "/v1/datasets", srv.admin_key, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(r.json, "datasets"), 0), "privacy_unit")),
			 "label");
	dpg_resp_free(&r);
	expect_problem("POST", "/v1/datasets",
		       "{\"id\":\"ar\",\"budget\":{\"epsilon\":1,\"delta\":0},"
		       "\"neighbor\":\"add_remove\",\"privacy_unit\":\"label\"}",
		       400, "/neighbor");
	expect_problem("POST", "/v1/datasets",
		       "{\"id\":\"pub\",\"public\":true,\"privacy_unit\":\"label\"}", 400,
		       "/privacy_unit");
	dpg_expect_status(&srv, "GET", "/v1/datasets/ar", srv.admin_key, NULL, 404);
	dpg_expect_status(&srv, "GET", "/v1/datasets/pub", srv.admin_key, NULL, 404);
}

/* ---- the job end to end ---------------------------------------------------- */

#define MAIN_PARAMS                                                                             \
	"\"epsilon\":40,\"label\":\"y\",\"classes\":2,\"loss\":\"unhinged\",\"center\":false,"  \
	"\"weight_decay\":1,\"learning_rate\":0.1,\"momentum\":0,\"batch_size\":2000,"          \
	"\"epochs\":300,\"gradient_clip\":0,\"test_data\":\"lab_test\""

/* Runs the main job on lab_tables' rows; returns the finished job. */
static json_t *run_main_job(char *job_id, size_t size)
{
	dpg_resp r = submit("lab", MAIN_PARAMS, false);
	json_t *job;

	cr_assert_eq(r.status, 202, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "trainer")), "label_em");
	cr_assert_not_null(json_object_get(r.json, "neighbouring"), "%s", r.body);
	snprintf(job_id, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_succeeded(&srv, job_id, 240);
	return job;
}

/*
 * The charge is the mechanism's event: binary randomized response keeping
 * each label with p = e^{eps/2} / (1 + e^{eps/2}), whose pure epsilon is
 * log(p / (1 - p)) = eps / 2, reserved at submission and committed once.
 * p is a double: the event prices the p that ran, eps / 2 to within
 * 2^-53 / (p (1 - p)) < 1e-7 at eps = 40.
 */
static void check_charge(const json_t *job, double eps)
{
	double p = 1.0 / (1.0 + exp(-eps / 2.0)), tol = 0x1p-52 / (p * (1.0 - p)) + 1e-12;
	const json_t *ev = json_object_get(job, "event");
	json_t *rows = dpg_list_all(&srv, "/v1/datasets/lab/ledger?limit=100", 4), *e;
	size_t i, reserves = 0, commits = 0;

	cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "randomized_response");
	cr_assert_eq(json_integer_value(json_object_get(ev, "num_buckets")), 2);
	cr_assert_float_eq(dpg_num(ev, "noise_parameter"), 2.0 * (1.0 - p),
			   1e-6 * 2.0 * (1.0 - p));
	json_array_foreach(rows, i, e) {
		const char *kind = json_string_value(json_object_get(e, "kind"));

		if (!strcmp(kind, "create"))
			continue;
		cr_assert(!strcmp(kind, "reserve") || !strcmp(kind, "commit"), "%s", kind);
		cr_assert(fabs(dpg_num(e, "epsilon") - eps / 2.0) <= tol, "%.17g", dpg_num(e, "epsilon"));
		reserves += !strcmp(kind, "reserve");
		commits += !strcmp(kind, "commit");
	}
	cr_assert_eq(reserves, 1);
	cr_assert_eq(commits, 1);
	json_decref(rows);
	cr_assert(fabs(dpg_budget_of(&srv, "lab").spent_eps - eps / 2.0) <= tol);
	cr_assert(fabs(dpg_num(json_object_get(job, "result"), "charged_epsilon") - eps / 2.0) <= tol);
	cr_assert_float_eq(dpg_num(json_object_get(job, "result"), "keep_probability"), p, 1e-15);
}

/* The released weights: logit_1 - logit_0 = (2 / lambda)(a . x + c). */
static void check_model(const char *job_id, const struct closed_form *cf)
{
	char path[128];
	dpg_resp r;
	const json_t *layer, *W, *b;

	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_assert_in_spec(&srv, "GET", "/v1/jobs/{id}/model", "200", "application/json", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "layers")), 1);
	layer = json_array_get(json_object_get(r.json, "layers"), 0);
	W = json_object_get(json_object_get(layer, "weight"), "values");
	b = json_object_get(json_object_get(layer, "bias"), "values");
	for (size_t j = 0; j < 2; j++)
		cr_assert_float_eq(json_real_value(json_array_get(W, 2 + j)) -
					   json_real_value(json_array_get(W, j)),
				   2.0 / WEIGHT_DECAY * cf->a[j], 1e-9);
	cr_assert_float_eq(json_real_value(json_array_get(b, 1)) - json_real_value(json_array_get(b, 0)),
			   2.0 / WEIGHT_DECAY * cf->c, 1e-9);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(r.json, "features"), 0)), "u");
	dpg_resp_free(&r);
}

/* Predictions on test rows: the class of the margin's sign and the
 * softmax score 1 / (1 + e^-margin). */
static void check_predict(const char *job_id, const struct closed_form *cf, const struct toy *t)
{
	char path[128], body[4096];
	size_t len = 0;
	dpg_resp r;

	len += (size_t)snprintf(body, sizeof(body), "{\"rows\":[");
	for (size_t i = 0; i < 50; i++)
		len += (size_t)snprintf(body + len, sizeof(body) - len, "%s[%.6f,%.6f]", i ? "," : "",
					t->u[i], t->v[i]);
	snprintf(body + len, sizeof(body) - len, "]}");
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_assert_in_spec(&srv, "POST", "/v1/jobs/{id}/predict", "200", "application/json", r.body);
	for (size_t i = 0; i < 50; i++) {
		double m = margin(cf, t->u[i], t->v[i]);
		const json_t *s = json_array_get(json_object_get(r.json, "scores"), i);

		cr_assert_eq(json_integer_value(json_array_get(json_object_get(r.json, "classes"), i)),
			     m > 0 ? 1 : 0);
		cr_assert_float_eq(json_real_value(json_array_get(s, 1)), 1.0 / (1.0 + exp(-m)), 1e-9);
	}
	dpg_resp_free(&r);
}

Test(label_em, a_job_end_to_end_matches_the_closed_form, .timeout = 300)
{
	static struct toy train, test;
	char job_id[64];
	json_t *job, *result, *progress;
	struct closed_form cf;
	double acc, auc, ber;

	lab_tables(&train, &test);
	job = run_main_job(job_id, sizeof(job_id));
	check_charge(job, 40.0);
	cf = unhinged_minimiser(&train);
	closed_form_metrics(&cf, &test, &acc, &auc, &ber);
	result = json_object_get(job, "result");
	cr_assert_float_eq(dpg_num(result, "test_accuracy"), acc, 1e-12);
	cr_assert_float_eq(dpg_num(result, "test_auc"), auc, 1e-12);
	cr_assert_float_eq(dpg_num(result, "test_balanced_error"), ber, 1e-12);
	cr_assert_eq(json_integer_value(json_object_get(result, "test_rows")), N_TEST);
	/* The threshold derived in the header. */
	cr_assert_gt(dpg_num(result, "test_accuracy"), 0.80);
	cr_assert_eq(dpg_num(result, "epsilon"), 40.0);
	/* Nothing computed on the private rows, in the result or the progress. */
	progress = json_object_get(job, "progress");
	cr_assert_null(json_object_get(progress, "loss"));
	cr_assert_float_eq(dpg_num(progress, "accuracy"), acc, 1e-12);
	cr_assert_null(json_object_get(result, "train_accuracy"));
	cr_assert_null(json_object_get(result, "train_loss"));
	cr_assert_null(json_object_get(result, "loss"));
	check_model(job_id, &cf);
	check_predict(job_id, &cf, &test);
	json_decref(job);
}

/* ---- the dry run ----------------------------------------------------------- */

Test(label_em, the_dry_run_gives_the_guidance_and_charges_nothing)
{
	static struct toy train, test;
	double eps = 0.1, p = 1.0 / (1.0 + exp(-eps / 2.0));
	const json_t *g;
	dpg_resp r;

	lab_tables(&train, &test);
	r = submit("lab", "\"epsilon\":0.1,\"label\":\"y\",\"classes\":2", true);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "fits")));
	dpg_assert_in_spec(&srv, "POST", "/v1/datasets/{id}/jobs", "200", "application/json", r.body);
	g = json_object_get(r.json, "guidance");
	cr_assert_eq(json_integer_value(json_object_get(g, "n")), N_TRAIN, "%s", r.body);
	cr_assert_float_eq(dpg_num(g, "keep_probability"), p, 1e-15);
	cr_assert_float_eq(dpg_num(g, "expected_correct_fraction"), p, 1e-15);
	/* About 0.87 here: a figure a user can act on. */
	cr_assert_float_eq(dpg_num(g, "success_probability"), test_binomial_upper_half(N_TRAIN, p),
			   1e-10);
	cr_assert(fabs(dpg_num(r.json, "needed.epsilon") - eps / 2.0) <= 1e-12);
	dpg_resp_free(&r);
	/* No ledger entry: nothing reserved, no job. */
	cr_assert_eq(dpg_budget_of(&srv, "lab").ledger_rows, 0);
	cr_assert_eq(dpg_budget_of(&srv, "lab").spent_eps, 0.0);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/lab/jobs", "jobs"), 0);
	/* The guidance and the event carry n: on an upload that kept the
	 * count private the dry run is a 422, the same on N and N - 1 rows. */
	{
		static struct toy fewer;
		char *first = NULL;

		make_toy(&fewer, N_TRAIN - 1, 11); /* train's rows but its last */
		for (size_t less = 0; less < 2; less++) {
			char *csv = toy_csv(less ? &fewer : &train, false);

			cr_assert_eq(dpg_upload_csv_private_count(&srv, "lab", csv, strlen(csv)),
				     (long)(N_TRAIN - less));
			free(csv);
			r = submit("lab", "\"epsilon\":0.1,\"label\":\"y\",\"classes\":2", true);
			dpg_expect_same_refusal(&r, 422, "/data", &first);
		}
		free(first);
	}
}

/* ---- refusals -------------------------------------------------------------- */

/* Asserts `status` naming `field` for a job with `params` on `id`, and that
 * nothing was reserved, charged or queued there. */
static void expect_refused(const char *id, const char *params, long status, const char *field)
{
	char path[128], body[1024];
	dpg_budget before = dpg_budget_of(&srv, id), after;

	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", id);
	snprintf(body, sizeof(body), "{\"trainer\":\"label_em\",\"params\":{%s}}", params);
	expect_problem("POST", path, body, status, field);
	after = dpg_budget_of(&srv, id);
	cr_assert_eq(after.ledger_rows, before.ledger_rows);
	cr_assert_eq(after.spent_eps, before.spent_eps);
	cr_assert_eq(dpg_count_listed(&srv, path, "jobs"), 0);
}

Test(label_em, a_record_level_dataset_is_refused_and_nothing_written)
{
	static struct toy train;
	dpg_resp r;

	make_toy(&train, N_TRAIN, 11);
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key,
			  "{\"id\":\"rec\",\"budget\":{\"epsilon\":25,\"delta\":0},"
			  "\"accountant\":\"basic\",\"neighbor\":\"replace\"}",
			  201);
	upload_toy("rec", &train, false);
	expect_refused("rec", "\"epsilon\":2,\"label\":\"y\",\"classes\":2", 422, "/trainer");
	/* The detail says why; a dry run is refused alike. */
	r = submit("rec", "\"epsilon\":2,\"label\":\"y\",\"classes\":2", true);
	cr_assert_eq(r.status, 422, "%s", r.body);
	cr_assert_not_null(strstr(json_string_value(json_object_get(r.json, "detail")),
				  "features without noise"),
			   "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_budget_of(&srv, "rec").ledger_rows, 0);
}

/* A dataset whose unit said "label" before label privacy existed: written
 * here as an older dpgate left it (label_private 0), it stays record-level. */
Test(label_em, older_label_text_is_record_level)
{
	static struct toy train;
	sqlite3 *h = NULL;
	dpg_resp r;

	dpg_skip_on_pg("writes to the SQLite file behind the server");
	cr_assert_eq(sqlite3_open(srv.db, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	cr_assert_eq(sqlite3_exec(h,
				  "BEGIN;"
				  "INSERT INTO datasets (id, name, privacy_unit, neighbor, accountant,"
				  " budget_epsilon, budget_delta, created_at, updated_at) VALUES"
				  " ('old', 'old', 'label', 'replace', 'basic', 25, 0, 't', 't');"
				  "INSERT INTO ledger (dataset_id, kind, epsilon, delta, actor, created_at,"
				  " spent, reserved, open_reservations, charges) VALUES"
				  " ('old', 'create', 25, 0, 'k', 't', '[0.0,0.0]', '[0.0,0.0]', 0, 0);"
				  "COMMIT;",
				  NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(h));
	sqlite3_close(h);
	make_toy(&train, N_TRAIN, 11);
	upload_toy("old", &train, false);
	expect_refused("old", "\"epsilon\":2,\"label\":\"y\",\"classes\":2", 422, "/trainer");
	r = submit("old", "\"epsilon\":2,\"label\":\"y\",\"classes\":2", true);
	cr_assert_not_null(strstr(json_string_value(json_object_get(r.json, "detail")), "predates"),
			   "%s", r.body);
	dpg_resp_free(&r);
}

Test(label_em, bad_params_classes_and_budget_are_refused_before_anything_is_reserved)
{
	static struct toy train, test;
	static const char three_classes[] = "\"epsilon\":2,\"label\":\"y\",\"classes\":3";

	lab_tables(&train, &test);
	/* More than two classes: the mechanism is binary (documented). */
	expect_refused("lab", three_classes, 422, "/params/classes");
	expect_refused("lab", "\"label\":\"y\",\"classes\":2", 400, "/params/epsilon");
	expect_refused("lab", "\"epsilon\":2,\"label\":\"y\",\"classes\":2,\"loss\":\"cubic\"", 400,
		       "/params/loss");
	expect_refused("lab", "\"epsilon\":2,\"label\":\"y\",\"classes\":2,\"b\":1", 400,
		       "/params/b");
	expect_refused("lab", "\"epsilon\":2,\"label\":\"y\",\"classes\":2,\"hidden\":8", 400,
		       "/params/hidden");
	expect_refused("lab", "\"epsilon\":2,\"label\":\"y\",\"classes\":2,\"lot_size\":8", 400,
		       "/params/lot_size");
	expect_refused("lab", "\"epsilon\":2,\"label\":\"nope\",\"classes\":2", 400,
		       "/params/label");
	expect_refused("lab", "\"epsilon\":2,\"label\":\"y\",\"classes\":2,\"test_data\":\"lab\"",
		       422, "/params/test_data");
	/* The budget is 25 and charges eps / 2: eps = 60 needs 30. */
	expect_refused("lab", "\"epsilon\":60,\"label\":\"y\",\"classes\":2", 409, NULL);
}

/* An MLP at a moderate epsilon: the charge is eps / 2 and the released
 * model has its hidden layer; the metrics are on the public rows. */
static const char mlp_job[] =
	"{\"trainer\":\"label_em\",\"params\":{\"epsilon\":2,\"label\":\"y\",\"classes\":2,"
	"\"model\":\"mlp\",\"hidden\":8,\"epochs\":5,\"test_data\":\"lab_test\"}}";

Test(label_em, an_mlp_job_charges_half_its_epsilon, .timeout = 300)
{
	static struct toy train, test;
	char job_id[64], path[128];
	json_t *job;
	dpg_resp r;

	lab_tables(&train, &test);
	dpg_start_job(&srv, "lab", mlp_job, job_id, sizeof(job_id));
	job = dpg_job_succeeded(&srv, job_id, 240);
	check_charge(job, 2.0);
	for (const char *const *k = (const char *const[]){"test_accuracy", "test_auc",
							  "test_balanced_error", NULL};
	     *k; k++)
		cr_assert(dpg_num(json_object_get(job, "result"), *k) >= 0.0 &&
				  dpg_num(json_object_get(job, "result"), *k) <= 1.0,
			  "%s", *k);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "layers")), 2);
	dpg_resp_free(&r);
	json_decref(job);
}
