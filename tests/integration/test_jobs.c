/*
 * test_jobs.c: DP-SGD training jobs through HTTP on Fashion-MNIST: the
 * event is fixed before data is read, a job over budget is refused, a
 * finished job's budget and model, cancellation, the restart rule, a
 * job's end written once the database file is back after a move, and a
 * start or end whose COMMIT was written but reported failed.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "dpg_limits.h"
#include "harness.h"
#include "jobs_common.h"

static dpg_server srv;

static void setup(void)
{
	dpg_resp r;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "fm", 50.0, 1e-5, "rdp");
	r = dpg_call(&srv, "PUT", "/v1/datasets/fm/data", srv.admin_key,
		     "{\"builtin\":\"fashion-mnist\"}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "rows"), 60000);
	dpg_resp_free(&r);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(jobs, .init = setup, .fini = teardown, .timeout = 600);

/* The states a job ends in. */
static const char *const job_ended[] = {"cancelled", "failed", "succeeded", NULL};

static json_t *wait_for_state(const char *id, const char *const *states, double seconds)
{
	return dpg_job_wait(&srv, id, states, seconds);
}

static double stateless_rdp_epsilon(const json_t *event)
{
	char *ev = json_dumps(event, JSON_COMPACT);
	char body[4096];
	double eps;
	dpg_resp r;

	snprintf(body, sizeof(body), "{\"event\":%s,\"delta\":1e-5,\"accountant\":\"rdp\"}", ev);
	free(ev);
	r = dpg_call(&srv, "POST", "/v1/accountant/epsilon", NULL, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	eps = dpg_num(r.json, "epsilon");
	dpg_resp_free(&r);
	return eps;
}

Test(jobs, event_is_fixed_from_params_and_the_job_runs)
{
	const char *done[] = {"succeeded", "failed", NULL};
	char body[1024], path[128], id[64];
	json_t *ev, *job;
	dpg_resp r;
	double needed;

	/* Dry run: an epoch of N = 6000, L = 600, one epoch: T = 10 steps, each
	 * sampling from all 60000 rows at q = 600 / 60000. */
	snprintf(body, sizeof(body), "%.*s,\"dry_run\":true}", (int)strlen(dpg_fm_small_job) - 1,
		 dpg_fm_small_job);
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "fits")));
	ev = json_object_get(r.json, "event");
	cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "self_composed");
	cr_assert_eq(json_integer_value(json_object_get(ev, "count")), 10);
	ev = json_object_get(ev, "event");
	cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "poisson_sampled");
	cr_assert_eq(json_number_value(json_object_get(ev, "sampling_probability")), 600.0 / 60000.0);
	cr_assert_eq(json_number_value(json_object_get(json_object_get(ev, "event"), "noise_multiplier")), 1.1);
	needed = dpg_num(r.json, "needed.epsilon");
	dpg_resp_free(&r);
	/* Nothing was reserved by the dry run. */
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 0);
	dpg_resp_free(&r);

	r = dpg_submit_job(&srv, "fm", dpg_fm_small_job, id, sizeof(id));
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "state")), "queued");
	cr_assert_eq(dpg_num(r.json, "reservation.epsilon"), needed);
	dpg_resp_free(&r);

	job = wait_for_state(id, done, 120);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s",
			 json_string_value(json_object_get(job, "error")));
	/* Ten classes: a trained model beats chance by far even with noise. */
	cr_assert_gt(dpg_num(job, "result.test_accuracy"), 0.4);
	cr_assert_eq(dpg_num(job, "progress.step"), 10);
	/* The epsilon it reports is the accountant's for its event. */
	cr_assert(fabs(dpg_num(job, "result.epsilon") -
		       stateless_rdp_epsilon(json_object_get(job, "event"))) < 1e-12);
	json_decref(job);

	/* The reservation was committed in full: spent = the priced cost. */
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 0);
	cr_assert(fabs(dpg_num(r.json, "spent.epsilon") - needed) <= 1e-12 * needed);
	dpg_resp_free(&r);

	/* The model: a logreg on 784 inputs and 10 classes is the version 2
	 * header (40 bytes), two u32 widths, one u32 layer activation, 784 x 10
	 * weights and 10 biases as f64. */
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.content_type, "application/octet-stream");
	cr_assert_eq(r.len, 40 + 2 * 4 + 4 + 784 * 10 * 8 + 10 * 8);
	cr_assert_eq(memcmp(r.body, "DPGMDL01", 8), 0);
	dpg_resp_free(&r);
}

Test(jobs, over_budget_is_refused_before_anything_runs)
{
	dpg_resp r;

	dpg_make_dataset(&srv, "tiny", 0.1, 1e-5, "rdp");
	r = dpg_call(&srv, "PUT", "/v1/datasets/tiny/data", srv.admin_key,
		     "{\"builtin\":\"fashion-mnist\"}");
	dpg_resp_free(&r);
	r = dpg_call(&srv, "POST", "/v1/datasets/tiny/jobs", srv.admin_key, dpg_fm_small_job);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert_gt(dpg_num(r.json, "cost.epsilon"), 0.1);
	dpg_resp_free(&r);
	/* Without params (the defaults): priced and refused the same way. */
	dpg_expect_status(&srv, "POST", "/v1/datasets/tiny/jobs", srv.admin_key,
			  "{\"trainer\":\"dpsgd\"}", 409);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/tiny/jobs", "jobs"), 0);
	r = dpg_call(&srv, "GET", "/v1/datasets/tiny/ledger", srv.admin_key, NULL);
	cr_assert_eq(json_array_size(json_object_get(r.json, "entries")), 0);
	dpg_resp_free(&r);
}

/*
 * A retried submission is answered from storage before the body is checked
 * again, so it gets the same bytes even after the dataset changed under it
 * (here its data: the retry's params no longer fit the new table).
 */
/* Submits dpg_fm_small_job to `again` under one Idempotency-Key; asserts 202. */
static dpg_resp submit_keyed(void)
{
	const char *key[] = {"Idempotency-Key: fm-retry-1", NULL};
	dpg_resp r;

	cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/again/jobs", srv.admin_key, dpg_fm_small_job,
			      strlen(dpg_fm_small_job), key, &r), 0);
	cr_assert_eq(r.status, 202, "%s", r.body);
	return r;
}

Test(jobs, a_retry_gets_the_stored_answer_after_the_data_changed)
{
	const char *csv_hdr[] = {"Content-Type: text/csv", NULL};
	const char *csv = "x,y\n1,a\n2,b\n3,a\n4,b\n";
	char first[4096], path[128];
	dpg_resp r;

	dpg_make_dataset(&srv, "again", 50.0, 1e-5, "rdp");
	dpg_expect_status(&srv, "PUT", "/v1/datasets/again/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	r = submit_keyed();
	cr_assert_lt(r.len, sizeof(first));
	memcpy(first, r.body, r.len);
	first[r.len] = '\0';
	snprintf(path, sizeof(path), "/v1/jobs/%s", json_string_value(json_object_get(r.json, "id")));
	cr_assert_str_eq(r.location, path);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	dpg_resp_free(&r);
	json_decref(wait_for_state(path + strlen("/v1/jobs/"), job_ended, 120));
	/* Four rows and no label column: the same body is now a bad request. */
	cr_assert_eq(dpg_http(&srv, "PUT",
			      "/v1/datasets/again/data?columns=x:numeric,y:categorical"
			      "&row_count=public",
			      srv.admin_key, csv, strlen(csv), csv_hdr, &r),
		     0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "POST", "/v1/datasets/again/jobs", srv.admin_key, dpg_fm_small_job, 400);
	/* The retry: the stored 202, byte for byte, located at the job it
	 * names, and no second reservation. */
	r = submit_keyed();
	cr_assert_eq(r.len, strlen(first));
	cr_assert_eq(memcmp(r.body, first, r.len), 0, "%s", r.body);
	cr_assert_str_eq(r.location, path);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/again/jobs", "jobs"), 1);
}

Test(jobs, bad_params_name_the_field)
{
	dpg_resp r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key,
			      "{\"trainer\":\"dpsgd\",\"params\":{\"lot_size\":0}}");

	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/params/lot_size");
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key,
			  "{\"trainer\":\"dpsgd\",\"params\":{\"lot_size\":70000}}", 400);
	/* Far past the limit, the message still states the real range: lot
	 * sizes up to 10^6 (DPG_MAX_LOT_SIZE), not the parser's integer type. */
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key,
		     "{\"trainer\":\"dpsgd\",\"params\":{\"lot_size\":1000000000000}}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/params/lot_size");
	cr_assert_not_null(strstr(json_string_value(json_object_get(r.json, "detail")), "1000000]"),
			   "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key,
		     "{\"trainer\":\"sgd\"}");
	cr_assert_eq(r.status, 400);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/trainer");
	dpg_resp_free(&r);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/fm/ledger", "entries"), 0);
}

/*
 * A job of weeks is refused at the door: an mlp 784-4096-3000-10 (15.5
 * million parameters) in lots of all 60 000 rows for 10 000 epochs is
 * within the step, epoch and parameter limits but about 9.3e15 units of
 * work (docs/training.md), a fortnight of one core; it was accepted (202)
 * and its steps of two minutes each delayed a cancel by as much.  Refused
 * at /params/epochs naming the bound, as a dry run and for real, nothing
 * reserved.
 */
Test(jobs, a_job_of_weeks_is_refused_at_the_door)
{
	static const char *const bodies[] = {
		"{\"trainer\":\"dpsgd\",\"dry_run\":true,\"params\":{\"model\":\"mlp\","
		"\"hidden\":[4096,3000],\"epochs\":10000,\"lot_size\":60000}}",
		"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\","
		"\"hidden\":[4096,3000],\"epochs\":10000,\"lot_size\":60000}}",
	};

	for (size_t i = 0; i < 2; i++) {
		dpg_resp r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key,
				      bodies[i]);

		cr_assert_eq(r.status, 400, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
				 "/params/epochs");
		cr_assert_not_null(strstr(json_string_value(json_object_get(r.json, "detail")),
					  "1e+14"), "%s", r.body);
		dpg_resp_free(&r);
	}
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/fm/jobs", "jobs"), 0);
}

/* Submits three long jobs on fm (two workers: the third waits in the
 * queue), writes their ids and reservation ids, and waits until the first
 * two run. */
static void submit_three_long_jobs(char ids[3][64], char rids[3][64])
{
	const char *running[] = {"running", NULL};

	for (int i = 0; i < 3; i++) {
		dpg_resp r = dpg_submit_job(&srv, "fm", dpg_fm_long_job, ids[i], 64);

		snprintf(rids[i], 64, "%s",
			 json_string_value(json_object_get(json_object_get(r.json, "reservation"), "id")));
		dpg_resp_free(&r);
	}
	json_decref(wait_for_state(ids[0], running, 60));
	json_decref(wait_for_state(ids[1], running, 60));
}

/* DELETE /v1/jobs/{id}; expects `status` (200 queued, 202 running). */
static void cancel_job(const char *id, long status)
{
	char path[128];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, status, "%s: %s", id, r.body);
	dpg_resp_free(&r);
}

/*
 * A job cancelled while queued frees its place at once: with both workers
 * busy, DPG_MAX_QUEUED_JOBS jobs submitted and cancelled leave nothing
 * queued, and the next is accepted.  (The queue counted their entries
 * until a worker took them, answering 503 "full" while nothing was queued
 * for as long as the running jobs took.)
 */
Test(jobs, a_job_cancelled_while_queued_frees_its_place)
{
	const char *running[] = {"running", NULL};
	char busy[2][64], id[64];

	for (int i = 0; i < 2; i++) {
		dpg_start_job(&srv, "fm", dpg_fm_long_job, busy[i], sizeof(busy[i]));
		json_decref(wait_for_state(busy[i], running, 60));
	}
	for (int i = 0; i < DPG_MAX_QUEUED_JOBS; i++) {
		dpg_start_job(&srv, "fm", dpg_fm_small_job, id, sizeof(id));
		cancel_job(id, 200);
	}
	dpg_start_job(&srv, "fm", dpg_fm_small_job, id, sizeof(id));
	cancel_job(id, 200);
	for (int i = 0; i < 2; i++)
		cancel_job(busy[i], 202);
}

/* fm's ledger holds `commits` commit rows and `releases` release rows. */
static void expect_closes(int commits, int releases)
{
	dpg_resp r = dpg_call(&srv, "GET", "/v1/datasets/fm/ledger", srv.admin_key, NULL);
	int got_commits = 0, got_releases = 0;
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(r.json, "entries"), i, e) {
		const char *k = json_string_value(json_object_get(e, "kind"));

		got_commits += strcmp(k, "commit") == 0;
		got_releases += strcmp(k, "release") == 0;
	}
	dpg_resp_free(&r);
	cr_assert_eq(got_commits, commits, "commit rows");
	cr_assert_eq(got_releases, releases, "release rows");
}

/* Cancels running job `id` (202) and waits for it to end; returns it. */
static json_t *stop_running_job(const char *id)
{
	cancel_job(id, 202);
	return wait_for_state(id, job_ended, 60);
}

Test(jobs, cancel_queued_releases_running_commits)
{
	char ids[3][64], rids[3][64], path[128];
	dpg_resp r;
	json_t *j;

	submit_three_long_jobs(ids, rids);
	snprintf(path, sizeof(path), "/v1/jobs/%s", ids[2]);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "state")), "cancelled");
	dpg_resp_free(&r);
	for (int i = 0; i < 2; i++) {
		j = stop_running_job(ids[i]);
		cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled");
		json_decref(j);
	}
	/* Ledger: three reservations; the queued one released, the two that
	 * ran committed in full. */
	expect_closes(2, 1);
	/* The job cancelled while queued kept no model, and says so; an ended
	 * job cannot be cancelled. */
	snprintf(path, sizeof(path), "/v1/jobs/%s", ids[2]);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert(json_is_false(json_object_get(json_object_get(r.json, "result"), "model_available")),
		  "%s", r.body);
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", ids[2]);
	dpg_expect_status(&srv, "GET", path, srv.admin_key, NULL, 409);
	snprintf(path, sizeof(path), "/v1/jobs/%s", ids[0]);
	dpg_expect_status(&srv, "DELETE", path, srv.admin_key, NULL, 409);
}

/* Job `id` has ended in `state` with a model of the steps it saw: the
 * result says so, and the model is served, of dpg_fm_long_job's shape (an MLP
 * 784 -> 256 -> 10: header, three u32 widths, weights and biases). */
static void assert_partial_model(const char *id, const char *state, int64_t min_steps)
{
	char path[128];
	json_t *job, *result;
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	job = r.json;
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), state, "%s", r.body);
	result = json_object_get(job, "result");
	cr_assert(json_is_true(json_object_get(result, "model_available")), "%s", r.body);
	cr_assert_geq(dpg_num(result, "steps_done"), (double)min_steps, "%s", r.body);
	cr_assert_lt(dpg_num(result, "steps_done"), dpg_num(result, "steps_total"), "%s", r.body);
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.content_type, "application/octet-stream");
	cr_assert_eq(r.len, 40 + 3 * 4 + 2 * 4 + 784 * 256 * 8 + 256 * 8 + 256 * 10 * 8 + 10 * 8);
	cr_assert_eq(memcmp(r.body, "DPGMDL01", 8), 0);
	dpg_resp_free(&r);
}

/*
 * A job stopped while it trains is charged in full, so the model of the
 * steps it saw is as private as that charge says: it is delivered, with
 * those steps, whether a user cancelled the job or the server's stop
 * failed it.
 */
Test(jobs, a_stopped_job_delivers_the_model_it_trained)
{
	const char *running[] = {"running", NULL}, *ended[] = {"cancelled", "failed", NULL};
	char id[64];

	dpg_start_job(&srv, "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(wait_for_state(id, running, 60));
	dpg_job_wait_steps(&srv, id, 2, 60);
	cancel_job(id, 202);
	json_decref(wait_for_state(id, ended, 60));
	assert_partial_model(id, "cancelled", 2);

	dpg_start_job(&srv, "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(wait_for_state(id, running, 60));
	dpg_job_wait_steps(&srv, id, 2, 60);
	/* A graceful stop cancels the running job, which ends failed. */
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	dpg_server_restart(&srv);
	assert_partial_model(id, "failed", 2);
}

/* Listing the jobs of a dataset that does not exist is 404, as every other
 * dataset route answers (it was 200 with an empty list). */
Test(jobs, the_job_list_of_a_missing_dataset_is_404)
{
	dpg_resp r = dpg_call(&srv, "GET", "/v1/datasets/nosuch/jobs", srv.admin_key, NULL);

	cr_assert_eq(r.status, 404, "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/v1/datasets/fm/jobs", srv.admin_key, NULL, 200);
}

/*
 * A dataset's jobs are listed a page at a time, newest first: five jobs
 * through pages of two come each once, in the order of created_at (newest
 * first), then id, and in the order of the one default page, whose `next`
 * is null.  A bad `limit`, or an `after` that is no job of the dataset
 * (fm's included), is a 400 naming it.
 */
Test(jobs, jobs_are_listed_a_page_at_a_time)
{
	enum { N = 5 };
	json_t *made = json_object(), *first, *all;
	char id[64], other[64], path[160];
	size_t i;
	dpg_resp r;

	cr_assert_not_null(made);
	dpg_make_dataset(&srv, "pages", 1e3, 1e-5, "rdp");
	dpg_expect_status(&srv, "PUT", "/v1/datasets/pages/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	for (i = 0; i < N; i++) {
		dpg_start_job(&srv, "pages", dpg_fm_small_job, id, sizeof(id));
		cr_assert_eq(json_object_set_new(made, id, json_true()), 0);
		snprintf(path, sizeof(path), "/v1/jobs/%s", id);
		r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL); /* no need to train */
		dpg_resp_free(&r);
	}
	dpg_start_job(&srv, "fm", dpg_fm_small_job, other, sizeof(other));
	snprintf(path, sizeof(path), "/v1/jobs/%s", other);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	dpg_resp_free(&r);

	r = dpg_call(&srv, "GET", "/v1/datasets/pages/jobs", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_null(json_object_get(r.json, "next")), "%s", r.body);
	first = json_incref(json_object_get(r.json, "jobs"));
	dpg_resp_free(&r);
	cr_assert_eq(json_array_size(first), N);

	all = dpg_list_all_of(&srv, "/v1/datasets/pages/jobs?limit=2", "jobs", N);
	cr_assert_eq(json_array_size(all), N);
	dpg_expect_listed_once(all, made, first, true);

	dpg_expect_bad_query(&srv, "/v1/datasets/pages/jobs?limit=0", "limit");
	dpg_expect_bad_query(&srv, "/v1/datasets/pages/jobs?limit=1001", "limit");
	dpg_expect_bad_query(&srv, "/v1/datasets/pages/jobs?after=job_nosuch", "after");
	snprintf(path, sizeof(path), "/v1/datasets/pages/jobs?after=%s", other);
	dpg_expect_bad_query(&srv, path, "after");
	json_decref(first);
	json_decref(all);
	json_decref(made);
}

/*
 * The expiry rule holds for a job's reservation too: a job cancelled while
 * queued releases its reservation, unless the reservation's TTL has passed,
 * and then it is committed (the rule does not ask what the work did).  The
 * TTL is moved into the past in the database; the cancel's write
 * transaction sweeps it first.
 */
Test(jobs, a_queued_job_cancelled_after_its_reservation_expired_commits_it)
{
	char ids[3][64], rids[3][64], sql[256];
	sqlite3 *h = NULL;

	dpg_skip_on_pg("writes to the SQLite file behind the server");
	submit_three_long_jobs(ids, rids);
	snprintf(sql, sizeof(sql), "UPDATE reservations SET expires_at = 1 WHERE id = '%s'", rids[2]);
	cr_assert_eq(sqlite3_open(srv.db, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
	cr_assert_eq(sqlite3_changes(h), 1);
	sqlite3_close(h);
	cancel_job(ids[2], 200);
	expect_closes(1, 0); /* the expired reservation is committed */
	for (int i = 0; i < 2; i++)
		json_decref(stop_running_job(ids[i]));
	expect_closes(3, 0);
}

/*
 * Archiving a dataset stops the work that has not started: a job still
 * queued when its dataset is archived never runs (it would read the data of
 * a dataset that refuses all new work); it ends cancelled, its reservation
 * released.  Jobs already running keep going and commit in full.
 */
Test(jobs, a_queued_job_of_an_archived_dataset_never_starts)
{
	const char *left_queue[] = {"running", "cancelled", "failed", "succeeded", NULL};
	char ids[3][64], rids[3][64];
	dpg_resp r;
	json_t *j;

	submit_three_long_jobs(ids, rids);
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/fm", srv.admin_key, NULL, 200);
	/* Free both workers; the queued job is taken next. */
	for (int i = 0; i < 2; i++)
		cancel_job(ids[i], 202);
	j = wait_for_state(ids[2], left_queue, 60);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled", "%s",
			 json_dumps(j, JSON_COMPACT));
	cr_assert(strstr(json_string_value(json_object_get(j, "error")), "archived"));
	json_decref(j);
	for (int i = 0; i < 2; i++)
		json_decref(wait_for_state(ids[i], job_ended, 60));
	expect_closes(2, 1);
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "reserved.epsilon"), 0.0, "%s", r.body);
	cr_assert_gt(dpg_num(r.json, "spent.epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);
}

/* POSTs /reservations/{rid}/{what} on fm; expects the 409 naming the job. */
static void expect_held_by(const char *rid, const char *what, const char *job)
{
	char path[256];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/fm/reservations/%s/%s", rid, what);
	r = dpg_call(&srv, "POST", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 409, "%s %s: %ld %s", what, rid, r.status, r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "job")), job, "%s", r.body);
	dpg_resp_free(&r);
}

/*
 * A job's reservation is the job's: neither the release nor the commit
 * route closes it, whether the job is queued, running or ended (releasing a
 * running job's reservation returned its cost while the job trained and
 * succeeded).  The budget keeps it reserved, then spent.
 */
Test(jobs, a_jobs_reservation_is_closed_only_by_the_job)
{
	char ids[3][64], rids[3][64], path[128];
	double reserved;
	dpg_resp r;

	submit_three_long_jobs(ids, rids);
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	reserved = dpg_num(json_object_get(r.json, "reserved"), "epsilon");
	cr_assert_gt(reserved, 0, "%s", r.body);
	dpg_resp_free(&r);

	for (int i = 0; i < 3; i++) { /* running, running, queued */
		expect_held_by(rids[i], "release", ids[i]);
		expect_held_by(rids[i], "commit", ids[i]);
	}
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(json_object_get(r.json, "reserved"), "epsilon"), reserved, "%s", r.body);
	cr_assert_eq(dpg_num(json_object_get(r.json, "spent"), "epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);

	/* The jobs close them: cancelled while queued releases, stopped while
	 * running commits; afterwards the routes still refuse. */
	for (int i = 2; i >= 0; i--) {
		snprintf(path, sizeof(path), "/v1/jobs/%s", ids[i]);
		r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
		cr_assert(r.status == 200 || r.status == 202, "%ld %s", r.status, r.body);
		dpg_resp_free(&r);
		json_decref(wait_for_state(ids[i], job_ended, 60));
	}
	expect_held_by(rids[0], "release", ids[0]);
	expect_held_by(rids[2], "commit", ids[2]);
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(json_object_get(r.json, "reserved"), "epsilon"), 0.0, "%s", r.body);
	cr_assert_gt(dpg_num(json_object_get(r.json, "spent"), "epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);
	expect_closes(2, 1);
}

Test(jobs, a_job_running_at_a_crash_fails_and_commits)
{
	const char *running[] = {"running", NULL};
	char id[64], path[128];
	dpg_resp r;
	json_t *j;

	dpg_skip_on_pg("the restart rule of a shared database needs job leases");
	dpg_start_job(&srv, "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(wait_for_state(id, running, 60));
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	dpg_server_restart(&srv);
	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "state")), "failed");
	cr_assert(strstr(json_string_value(json_object_get(r.json, "error")), "interrupted"));
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 0);
	cr_assert_gt(dpg_num(r.json, "spent.epsilon"), 0.0);
	dpg_resp_free(&r);
	(void)j;
}

/*
 * A hosted CSV table trains too: iris (UCI, tests/data/iris.csv) uploaded
 * with a header row; the label is the "species" column (integers 0..2), the
 * four measurements the features.  No public split: no test accuracy.
 */
/* Waits for the job to succeed; returns its model's size in bytes. */
static size_t succeeded_model_bytes(const char *id)
{
	const char *done[] = {"succeeded", "failed", NULL};
	json_t *j = wait_for_state(id, done, 120);
	char path[128];
	dpg_resp r;
	size_t n;

	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
			 json_string_value(json_object_get(j, "error")));
	/* Its progress is the last step's. */
	cr_assert_eq(dpg_num(j, "progress.step"), dpg_num(j, "result.steps_done"));
	json_decref(j);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	n = r.len;
	dpg_resp_free(&r);
	return n;
}

/* A job submission on `dataset` that must be refused with 400 at `field`. */
static void expect_refused(const char *dataset, const char *body, const char *field)
{
	char path[128];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", dataset);
	r = dpg_call(&srv, "POST", path, srv.admin_key, body);
	jobs_common_expect_refusal(&r, 400, field, body);
}

/* The dataset's one job has ended: one charge (its commit), nothing open. */
static void expect_one_charge_none_open(const char *dataset)
{
	char path[128];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", dataset);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), 1, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 0, "%s", r.body);
	dpg_resp_free(&r);
}

Test(jobs, a_hosted_table_trains)
{
	char id[64];
	dpg_resp r;
	json_t *ev;

	dpg_make_dataset(&srv, "iris", 20.0, 1e-5, "rdp");
	dpg_upload_iris(&srv, "iris", "sepal_length,sepal_width,petal_length,petal_width,species");

	r = dpg_submit_job(&srv, "iris",
			   "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"species\","
			   "\"classes\":3,\"epochs\":20,\"lot_size\":30,\"noise_multiplier\":1.0,"
			   "\"clip_norm\":1,\"learning_rate\":0.5}}",
			   id, sizeof(id));
	/* q = 30 / 150 and T = 20 * 150 / 30 = 100 steps. */
	ev = json_object_get(r.json, "event");
	cr_assert_eq(json_integer_value(json_object_get(ev, "count")), 100);
	cr_assert_eq(json_number_value(json_object_get(json_object_get(ev, "event"), "sampling_probability")), 0.2);
	/* q = L/N takes N as public, though the upload did not declare it:
	 * the answer, the job and its ledger row say so. */
	cr_assert_eq(dpg_num(r.json, "public_row_count"), 150, "%s", r.body);
	dpg_resp_free(&r);
	/* Four inputs, three classes: header, two widths, one activation, 4 x 3
	 * weights, 3 biases. */
	cr_assert_eq(succeeded_model_bytes(id), 40 + 2 * 4 + 4 + 4 * 3 * 8 + 3 * 8);
	{
		char path[128];

		snprintf(path, sizeof(path), "/v1/jobs/%s", id);
		r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
		cr_assert_eq(dpg_num(r.json, "public_row_count"), 150, "%s", r.body);
		dpg_resp_free(&r);
		r = dpg_call(&srv, "GET", "/v1/datasets/iris/ledger", srv.admin_key, NULL);
		cr_assert(strstr(r.body, "treats the row count as public"), "%s", r.body);
		dpg_resp_free(&r);
	}
	/* A label naming no column is refused from the schema, before any
	 * reservation. */
	expect_refused("iris", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\","
		       "\"label\":\"colour\",\"classes\":3,\"epochs\":1,\"lot_size\":30}}",
		       "/params/label");
	expect_one_charge_none_open("iris");
}

/* Uploads a table of `rows` rows to dataset `id`: two features and a city,
 * Lyon or Paris by row parity, except that row 7's city is `odd`. */
static void put_cities(const char *id, int rows, const char *odd)
{
	char csv[2048];
	size_t n = 0;

	n += (size_t)snprintf(csv + n, sizeof(csv) - n, "a,b,city\n");
	for (int i = 0; i < rows; i++)
		n += (size_t)snprintf(csv + n, sizeof(csv) - n, "%d,%d,%s\n", i % 7, i % 5,
				      i == 7 ? odd : i % 2 ? "Paris" : "Lyon");
	dpg_upload_csv(&srv, id, csv, n);
}

/* Makes dataset `id` with a 40-row cities table (put_cities). */
static void upload_cities(const char *id, const char *odd)
{
	dpg_make_dataset(&srv, id, 20.0, 1e-5, "rdp");
	put_cities(id, 40, odd);
}

/* A small job on a cities table, with `classes` when not NULL (the text is
 * in a static buffer). */
static const char *cities_job(const char *classes)
{
	static char body[512];

	snprintf(body, sizeof(body),
		 "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"city\"%s%s,"
		 "\"epochs\":2,\"lot_size\":10,\"noise_multiplier\":1.0,\"clip_norm\":1}}",
		 classes ? ",\"classes\":" : "", classes ? classes : "");
	return body;
}

/*
 * The label's classes are declared by the job, never read from the rows:
 * two tables one row apart (a third city) train models of the same shape,
 * and the odd row is sampled with a zero gradient instead of adding a class
 * (it made the model one class wider, whatever the noise).  Without
 * declared classes a hosted table's job is refused before any reservation.
 */
/*
 * A dpsgd job's event publishes the row count (q = lot_size / N), so it runs
 * only where the upload declared the count public: on 40 and on 41 rows
 * kept private, its dry run is the same 422 at /data, reserving nothing;
 * declared public, it prices the job and shows the count.
 */
Test(jobs, a_dpsgd_job_needs_a_public_row_count)
{
	static const char *const job =
		"{\"trainer\":\"dpsgd\",\"dry_run\":true,\"params\":{\"model\":\"logreg\","
		"\"label\":\"y\",\"classes\":2,\"epochs\":1,\"lot_size\":10}}";
	char *first = NULL;
	dpg_resp r;

	dpg_make_dataset(&srv, "counted", 20.0, 1e-5, "rdp");
	for (size_t n = 40; n <= 42; n++) {
		char *csv = jobs_common_two_class_csv(n, 5, "a,b,noise,y");

		cr_assert_eq(n < 42 ? dpg_upload_csv_private_count(&srv, "counted", csv, strlen(csv)) :
				      dpg_upload_csv(&srv, "counted", csv, strlen(csv)),
			     (long)n);
		free(csv);
		r = dpg_call(&srv, "POST", "/v1/datasets/counted/jobs", srv.admin_key, job);
		if (n < 42) {
			dpg_expect_same_refusal(&r, 422, "/data", &first);
			continue;
		}
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_eq(dpg_num(r.json, "public_row_count"), 42, "%s", r.body);
		dpg_resp_free(&r);
	}
	free(first);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
}

Test(jobs, label_classes_are_declared_not_read)
{
	static const struct {
		const char *classes, *field;
	} bad[] = {
		{NULL, "/params/classes"},
		{"2", "/params/classes"},                       /* integer for a categorical label */
		{"[\"Lyon\"]", "/params/classes"},               /* fewer than two */
		{"[\"Lyon\",\"Lyon\"]", "/params/classes/1"},    /* twice */
		{"[\"Lyon\",3]", "/params/classes/1"},
	};
	long long bytes[2];

	upload_cities("ta", "Lyon");
	upload_cities("tb", "Brest");
	for (int k = 0; k < 2; k++) {
		char id[64];

		dpg_start_job(&srv, k ? "tb" : "ta", cities_job("[\"Lyon\",\"Paris\"]"), id,
			      sizeof(id));
		bytes[k] = (long long)succeeded_model_bytes(id);
	}
	/* Two inputs, two classes: header, two widths, one activation, 2 x 2
	 * weights, 2 biases. */
	cr_assert_eq(bytes[0], 40 + 2 * 4 + 4 + 2 * 2 * 8 + 2 * 8);
	cr_assert_eq(bytes[1], bytes[0]);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused("tb", cities_job(bad[i].classes), bad[i].field);
	expect_one_charge_none_open("tb");
	/* Fashion-MNIST has its classes. */
	expect_refused("fm", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\","
		       "\"classes\":10,\"epochs\":1,\"lot_size\":600}}", "/params/classes");
}

/*
 * A job that could only fail is refused before anything is reserved: the
 * data's shape is public (Fashion-MNIST's 784 pixels and 10 classes, a
 * hosted table's column schema and declared classes), so PCA wider than the
 * features, a model past DPG_MAX_MODEL_PARAMS, or a label column named for
 * builtin data are known at submission.  (Before, each was accepted with
 * 202, reserved, and the job failed with its reservation committed.)
 */
Test(jobs, jobs_that_could_only_fail_are_refused_before_reserving)
{
	dpg_budget before, after;

	upload_cities("shape", "Lyon");
	before = dpg_budget_of(&srv, "fm");
	expect_refused("fm", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"epochs\":1,"
		       "\"lot_size\":600,\"pca_components\":785}}", "/params/pca_components");
	/* 784 x 4096 + 4096 x 4096 + 4096 x 10 weights and biases > 2^24. */
	expect_refused("fm", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\",\"hidden\":[4096,4096],"
		       "\"epochs\":1,\"lot_size\":600}}", "/params/hidden");
	expect_refused("fm", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"x\","
		       "\"epochs\":1,\"lot_size\":600}}", "/params/label");
	after = dpg_budget_of(&srv, "fm");
	cr_assert_eq(after.ledger_rows, before.ledger_rows);
	/* The cities table has two numeric features, a and b. */
	expect_refused("shape", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"city\","
		       "\"classes\":[\"Lyon\",\"Paris\"],\"epochs\":1,\"lot_size\":10,"
		       "\"pca_components\":3}}", "/params/pca_components");
	after = dpg_budget_of(&srv, "shape");
	cr_assert_eq(after.ledger_rows, 0);
	cr_assert_eq(after.charges, 0);
}

/*
 * A job whose event has no finite epsilon (a DP-PCA release at noise
 * multiplier 5e-324): its dry run answers 422 at /params, as the dry run of
 * such an event does (JSON has no infinity; it used to answer 500), and
 * the job itself 409 with nothing reserved.
 */
Test(jobs, an_unbounded_job_is_refused_by_its_dry_run_and_its_submission)
{
	static const char fmt[] =
		"{\"trainer\":\"dpsgd\",%s\"params\":{\"model\":\"logreg\",\"epochs\":1,"
		"\"lot_size\":600,\"pca_components\":10,\"pca_noise_multiplier\":5e-324}}";
	char body[512];
	dpg_budget before = dpg_budget_of(&srv, "fm"), after;
	dpg_resp r;

	snprintf(body, sizeof(body), fmt, "\"dry_run\":true,");
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key, body);
	jobs_common_expect_refusal(&r, 422, "/params", body);
	snprintf(body, sizeof(body), fmt, "");
	r = dpg_call(&srv, "POST", "/v1/datasets/fm/jobs", srv.admin_key, body);
	cr_assert_eq(r.status, 409, "%s", r.body);
	dpg_resp_free(&r);
	after = dpg_budget_of(&srv, "fm");
	cr_assert_eq(after.ledger_rows, before.ledger_rows);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
}

/*
 * A basic ledger prices a job's event (Poisson-sampled Gaussians, which have
 * no pure-DP price) at the delta share the request names in "ledger_delta",
 * as a mechanism's release does; without one the job is refused (422,
 * /ledger_delta) before anything is reserved.  (Before, no field could name
 * it: every job on a basic ledger was refused.)  The reservation costs
 * (eps, ledger_delta) with eps the tighter of the rdp and pld answers for the
 * same event at that delta (docs/concepts.md, "Ledger accountants and filters"; zcdp cannot price
 * sampled events).
 */
Test(jobs, a_basic_ledger_prices_a_job_at_its_ledger_delta)
{
	const char *ended[] = {"succeeded", "failed", "cancelled", NULL};
	char body[512], id[64];
	double want = INFINITY;
	const char *detail;
	dpg_resp r;
	json_t *ev;

	dpg_make_dataset(&srv, "fb", 50.0, 1e-5, "basic");
	dpg_expect_status(&srv, "PUT", "/v1/datasets/fb/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	r = dpg_call(&srv, "POST", "/v1/datasets/fb/jobs", srv.admin_key, dpg_fm_small_job);
	/* The detail names the field this route takes, not the accountant's
	 * "delta" (a job naming "delta" is refused as an unknown field). */
	detail = json_string_value(json_object_get(r.json, "detail"));
	cr_assert(detail && strstr(detail, "\"ledger_delta\"") && !strstr(detail, "\"delta\""),
		  "%s", r.body);
	jobs_common_expect_refusal(&r, 422, "/ledger_delta", dpg_fm_small_job);
	cr_assert_eq(dpg_budget_of(&srv, "fb").ledger_rows, 0);

	snprintf(body, sizeof(body), "%.*s,\"ledger_delta\":1e-6}", (int)strlen(dpg_fm_small_job) - 1,
		 dpg_fm_small_job);
	r = dpg_submit_job(&srv, "fb", body, id, sizeof(id));
	ev = json_deep_copy(json_object_get(r.json, "event"));
	dpg_resp_free(&r);
	for (int a = 0; a < 2; a++) {
		char *evs = json_dumps(ev, JSON_COMPACT), q[4096];

		snprintf(q, sizeof(q), "{\"event\":%s,\"delta\":1e-6,\"accountant\":\"%s\"}", evs,
			 a ? "pld" : "rdp");
		free(evs);
		r = dpg_call(&srv, "POST", "/v1/accountant/epsilon", NULL, q);
		cr_assert_eq(r.status, 200, "%s", r.body);
		want = fmin(want, dpg_num(r.json, "epsilon"));
		dpg_resp_free(&r);
	}
	json_decref(ev);
	r = dpg_call(&srv, "GET", "/v1/datasets/fb/ledger", srv.admin_key, NULL);
	cr_assert_eq(json_array_size(json_object_get(r.json, "entries")), 1, "%s", r.body);
	{
		json_t *e = json_array_get(json_object_get(r.json, "entries"), 0);

		cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "reserve");
		cr_assert_float_eq(dpg_num(e, "epsilon"), want, 1e-12 * want, "%s", r.body);
		cr_assert_eq(dpg_num(e, "delta"), 1e-6, "%s", r.body);
	}
	dpg_resp_free(&r);
	json_decref(dpg_job_wait(&srv, id, ended, 120));
}

struct submitter {
	const char *body;
	atomic_int *next, *accepted, *full;
	int total;
	char (*ids)[64];
};

static void *submit_run(void *arg)
{
	struct submitter *s = arg;

	while (atomic_fetch_add(s->next, 1) < s->total) {
		dpg_resp r;

		cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/qq/jobs", srv.admin_key, s->body,
				      strlen(s->body), NULL, &r), 0);
		if (r.status == 202) {
			int k = atomic_fetch_add(s->accepted, 1);

			if (k < 128)
				snprintf(s->ids[k], 64, "%s",
					 json_string_value(json_object_get(r.json, "id")));
		} else {
			cr_assert_eq(r.status, 503, "%ld %s", r.status, r.body);
			cr_assert_eq(r.retry_after, 1);
			atomic_fetch_add(s->full, 1);
		}
		dpg_resp_free(&r);
	}
	return NULL;
}

/*
 * The queue's limit holds under concurrent submissions, and every job
 * accepted with 202 runs.  With both workers busy, 16 clients submit 120
 * jobs: exactly DPG_MAX_QUEUED_JOBS (64) are accepted and the rest get 503
 * with Retry-After, nothing reserved for them; once the workers are free,
 * all 64 succeed and nothing stays reserved.  (Before, the limit was checked
 * before the reservation and the job queued after it: 65-68 were accepted,
 * and those past 64 stayed queued, reserved, until a restart.)
 */
Test(jobs, the_queue_limit_holds_under_concurrent_submissions)
{
	static char accepted_ids[128][64];
	atomic_int next = 0, accepted = 0, full = 0;
	char ids[3][64], rids[3][64], path[128];
	struct submitter sub;
	pthread_t t[16];
	dpg_resp r;

	upload_cities("qq", "Lyon");
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/qq", srv.admin_key,
			  "{\"budget\":{\"epsilon\":1e6,\"delta\":1e-5}}", 200);
	submit_three_long_jobs(ids, rids);
	/* The third long job holds one place in the queue. */
	sub = (struct submitter){cities_job("[\"Lyon\",\"Paris\"]"), &next, &accepted, &full, 120,
				 accepted_ids};
	for (int i = 0; i < 16; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, submit_run, &sub), 0);
	for (int i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(atomic_load(&accepted), 63, "%d accepted, %d refused", atomic_load(&accepted),
		     atomic_load(&full));
	cr_assert_eq(atomic_load(&full), 120 - 63);
	r = dpg_call(&srv, "GET", "/v1/datasets/qq/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 63, "%s", r.body);
	dpg_resp_free(&r);
	for (int i = 0; i < 3; i++) {
		cr_assert_lt(snprintf(path, sizeof(path), "/v1/jobs/%s", ids[i]), (int)sizeof(path));
		r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
		dpg_resp_free(&r);
	}
	for (int i = 0; i < 63; i++)
		json_decref(dpg_job_succeeded(&srv, accepted_ids[i], 300));
	r = dpg_call(&srv, "GET", "/v1/datasets/qq/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "charges"), 63, "%s", r.body);
	dpg_resp_free(&r);
}

/* Uploads `n` 8 x 8 images (columns p0..p63, then label): label i % 2,
 * class 0 brighter on the left half, class 1 on the right, with a ripple
 * that varies by row. */
static void upload_images(const char *id, int n)
{
	size_t size = (size_t)n * 64 * 8 + 1024, len = 0;
	char *csv = malloc(size);

	cr_assert_not_null(csv);
	for (int j = 0; j < 64; j++)
		len += (size_t)snprintf(csv + len, size - len, "p%d,", j);
	len += (size_t)snprintf(csv + len, size - len, "label\n");
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < 64; j++) {
			int left = j % 8 < 4;
			double v = (left == (i % 2 == 0) ? 0.8 : 0.2) + 0.05 * ((i * 7 + j) % 5);

			len += (size_t)snprintf(csv + len, size - len, "%.3f,", v);
		}
		len += (size_t)snprintf(csv + len, size - len, "%d\n", i % 2);
	}
	dpg_make_dataset(&srv, id, 20.0, 1e-5, "rdp");
	dpg_upload_csv(&srv, id, csv, len);
	free(csv);
}

/*
 * A scatter job's model takes raw rows.  For an image of one constant
 * value every wavelet channel is zero (the wavelets have zero mean and the
 * reflect padding keeps the image constant) and the low-pass channel is
 * constant, so with 9 groups its features are known in closed form:
 * group 0 (channels 0-8) is a on channel 0 and b on channels 1-8, with
 * mean 1/9 and variance 8/81 of the values {1 x 49, 0 x 392} (the low-pass
 * level cancels), a = (8/9) / sqrt(8/81 + 1e-5), b = -(1/9) / sqrt(8/81 +
 * 1e-5); every other group is 0.  The JSON model's weights on those
 * features give the scores predict must answer for that raw row.
 */
Test(jobs, a_scatter_job_predicts_raw_rows)
{
	const double sd = sqrt(8.0 / 81.0 + 1e-5), a = (8.0 / 9.0) / sd, b = -(1.0 / 9.0) / sd;
	char id[64], path[128], body[1024];
	size_t len = 0, nf = 81 * 2 * 2;
	dpg_resp r, mj;
	const json_t *ft, *layer, *W, *bias, *scores;
	double z[2], mx, sum;

	upload_images("img", 40);
	dpg_start_job(&srv, "img",
		      "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"label\","
		      "\"classes\":2,\"epochs\":5,\"lot_size\":10,\"noise_multiplier\":1.0,"
		      "\"clip_norm\":1,\"learning_rate\":0.5,\"features\":\"scatter\","
		      "\"scatter_groups\":9}}",
		      id, sizeof(id));
	/* Version 3: the v2 header, two widths, one code, the six-word
	 * transform block, then 2 x 324 weights and 2 biases. */
	cr_assert_eq(succeeded_model_bytes(id), 40 + 2 * 4 + 4 + 24 + (2 * nf + 2) * 8);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", id);
	mj = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(mj.status, 200, "%s", mj.body);
	dpg_assert_in_spec(&srv, "GET", "/v1/jobs/{id}/model", "200", "application/json", mj.body);
	ft = json_object_get(mj.json, "feature_transform");
	cr_assert_str_eq(json_string_value(json_object_get(ft, "name")), "scatter_groupnorm");
	cr_assert_eq(dpg_num(ft, "rows"), 8);
	cr_assert_eq(dpg_num(ft, "groups"), 9);
	cr_assert_eq(dpg_num(mj.json, "input_dim"), 64);
	layer = json_array_get(json_object_get(mj.json, "layers"), 0);
	W = json_object_get(json_object_get(layer, "weight"), "values");
	bias = json_object_get(json_object_get(layer, "bias"), "values");
	cr_assert_eq(json_array_size(W), 2 * nf);
	for (int k = 0; k < 2; k++) {
		z[k] = json_real_value(json_array_get(bias, (size_t)k));
		/* channel c, position s is feature c * 4 + s */
		for (size_t f = 0; f < 9 * 4; f++)
			z[k] += json_real_value(json_array_get(W, (size_t)k * nf + f)) * (f < 4 ? a : b);
	}
	mx = fmax(z[0], z[1]);
	sum = exp(z[0] - mx) + exp(z[1] - mx);
	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"rows\":[[");
	for (int j = 0; j < 64; j++)
		len += (size_t)snprintf(body + len, sizeof(body) - len, "%s0.5", j ? "," : "");
	snprintf(body + len, sizeof(body) - len, "]]}");
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, body);
	cr_assert_eq(r.status, 200, "%s", r.body);
	scores = json_array_get(json_object_get(r.json, "scores"), 0);
	for (int k = 0; k < 2; k++)
		cr_assert_float_eq(json_real_value(json_array_get(scores, (size_t)k)),
				   exp(z[k] - mx) / sum, 1e-4, "class %d: %s", k, r.body);
	dpg_resp_free(&r);
	dpg_resp_free(&mj);
	/* Refused before any reservation: an explicit "pca" without
	 * components, and scatter features of rows that are not images. */
	expect_refused("img", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\","
		       "\"label\":\"label\",\"classes\":2,\"epochs\":1,\"lot_size\":10,"
		       "\"features\":\"pca\"}}", "/params/pca_components");
	upload_cities("notimg", "Lyon");
	expect_refused("notimg", "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\","
		       "\"label\":\"city\",\"classes\":[\"Lyon\",\"Paris\"],\"epochs\":1,"
		       "\"lot_size\":10,\"features\":\"scatter\"}}", "/params/features");
	expect_one_charge_none_open("img");
}

/* A predict body of `rows` rows of two inputs (the caller frees it). */
static char *two_input_rows(size_t rows)
{
	char *body = malloc(16 + rows * 6);
	size_t n = 0;

	cr_assert_not_null(body);
	n += (size_t)sprintf(body, "{\"rows\":[");
	for (size_t i = 0; i < rows; i++)
		n += (size_t)sprintf(body + n, "%s[1,2]", i ? "," : "");
	sprintf(body + n, "]}");
	return body;
}

/* A table "name" of 40 rows of two inputs a, b and a label y of 3 values. */
static void upload_two_inputs(const char *name)
{
	char csv[1024];
	size_t n = (size_t)snprintf(csv, sizeof(csv), "a,b,y\n");

	dpg_make_dataset(&srv, name, 20.0, 1e-5, "rdp");
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(csv + n, sizeof(csv) - n, "%d,%d,%d\n", i % 7, i % 5, i % 3);
	dpg_upload_csv(&srv, name, csv, n);
}

/* POSTs `rows` rows of two inputs to job id's predict; the answer. */
static dpg_resp predict_two_input_rows(const char *id, size_t rows)
{
	char path[128], *body = two_input_rows(rows);
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, body);
	free(body);
	return r;
}

/* Job id's predict refuses most + 1 rows (422 at /rows, naming `most`)
 * and answers most rows with `most` entries in `key`: that answer. */
static dpg_resp expect_most_rows(const char *id, size_t most, const char *key)
{
	char want[64];
	dpg_resp r = predict_two_input_rows(id, most + 1);

	snprintf(want, sizeof(want), "at most %zu rows", most);
	cr_assert_eq(r.status, 422, "%.300s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/rows");
	cr_assert(strstr(r.body, want), "%s", r.body);
	dpg_resp_free(&r);
	r = predict_two_input_rows(id, most);
	cr_assert_eq(r.status, 200, "%.300s", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, key)), most);
	return r;
}

/*
 * Answers built whole as JSON are bounded by DPG_MAX_JSON_NUMBERS = 2^20
 * numbers: a model of 1000 classes predicts at most 1048 rows a request
 * (1048 x 1000 scores), and a model of 2 x 1100 + 1100 + 1100 x 1000 +
 * 1000 = 1 104 300 parameters comes in the binary format only.  (Before,
 * 10^4 rows of 1000 classes took 0.7 GB, and a 16M-parameter model as
 * JSON 1.1 GB.)  The rows are scored with a logistic model, 3000
 * multiply-adds a row, far within the predict work bound.
 */
Test(jobs, answers_built_as_json_are_bounded)
{
	char id[64], path[128];
	dpg_resp r;

	upload_two_inputs("wide");
	dpg_start_job(&srv, "wide",
		      "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\","
		      "\"classes\":1000,\"epochs\":1,\"lot_size\":10,\"noise_multiplier\":1.0,"
		      "\"clip_norm\":1}}",
		      id, sizeof(id));
	/* Header, two widths, one activation, the parameters. */
	cr_assert_eq(succeeded_model_bytes(id), 40 + 2 * 4 + 4 + 3000 * 8);
	r = expect_most_rows(id, 1048, "scores");
	cr_assert_eq(json_array_size(json_array_get(json_object_get(r.json, "scores"), 0)), 1000);
	dpg_resp_free(&r);
	dpg_start_job(&srv, "wide",
		      "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\",\"hidden\":[1100],"
		      "\"label\":\"y\",\"classes\":1000,\"epochs\":1,\"lot_size\":10,"
		      "\"noise_multiplier\":1.0,\"clip_norm\":1}}",
		      id, sizeof(id));
	/* Header, three widths, two activations, the parameters. */
	cr_assert_eq(succeeded_model_bytes(id), 40 + 3 * 4 + 2 * 4 + 1104300 * 8);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 422, "%.300s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "format");
	cr_assert(strstr(r.body, "has 1104300"), "%s", r.body);
	dpg_resp_free(&r);
}

/*
 * Scoring runs on an HTTP thread, so a predict request is bounded by its
 * rows times the model's multiply-adds a row, DPG_MAX_PREDICT_WORK = 2^27
 * = 134 217 728: a model of 2 inputs, hidden [2048, 1024] and 2 classes
 * has 2 x 2048 + 2048 + 2048 x 1024 + 1024 + 1024 x 2 + 2 = 2 106 370
 * weights, so 63 rows (63.7) a request.  (Before, rows alone were bounded:
 * 10^4 rows of a 16M-weight model held a thread for 110 s.)
 */
Test(jobs, predict_work_is_bounded_by_rows_times_model_size)
{
	char id[64], path[128];
	const char *csv_hdr[] = {"Content-Type: text/csv", NULL};
	char csv[64 * 4 + 8];
	size_t n = (size_t)snprintf(csv, sizeof(csv), "a,b\n");
	dpg_resp r;

	upload_two_inputs("deep");
	dpg_start_job(&srv, "deep",
		      "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\","
		      "\"hidden\":[2048,1024],\"label\":\"y\",\"classes\":2,\"epochs\":1,"
		      "\"lot_size\":10,\"noise_multiplier\":1.0,\"clip_norm\":1}}",
		      id, sizeof(id));
	/* Header, four widths, three activations, the parameters. */
	cr_assert_eq(succeeded_model_bytes(id), 40 + 4 * 4 + 3 * 4 + 2106370 * 8);
	r = expect_most_rows(id, 63, "classes");
	dpg_resp_free(&r);
	/* The same bound on a CSV body, at its field. */
	for (int i = 0; i < 64; i++)
		n += (size_t)snprintf(csv + n, sizeof(csv) - n, "1,2\n");
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", id);
	cr_assert_eq(dpg_http(&srv, "POST", path, srv.admin_key, csv, n, csv_hdr, &r), 0);
	cr_assert_eq(r.status, 422, "%.300s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/csv");
	dpg_resp_free(&r);
}

/* The error of a job whose data was replaced while it queued. */
#define REPLACED_ERROR                                                                    \
	"the dataset's data was replaced before the job started; nothing was read, and the " \
	"reservation was released"

/* A table of `rows` rows: a and b numeric, except that with `text_b` b
 * holds words (a kind only inference finds), and y a 0/1 label
 * (malloc'ed). */
static char *ab_table(int rows, bool text_b)
{
	size_t size = 32 + (size_t)rows * 32, n = 0;
	char *csv = malloc(size);

	cr_assert(csv);
	n += (size_t)snprintf(csv + n, size - n, "a,b,y\n");
	for (int i = 0; i < rows; i++)
		n += (size_t)snprintf(csv + n, size - n, text_b ? "%d,w%d,%d\n" : "%d,%d,%d\n",
				      i % 7, i % 5, i % 2);
	return csv;
}

/* PUTs ab_table(rows, text_b) to dataset `id`: with ?columns= declaring
 * every column numeric, or (declare false) without it; the row count
 * public or private.  Expects 200. */
static void put_ab(const char *id, int rows, bool text_b, bool declare, bool count_public)
{
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	char *csv = ab_table(rows, text_b), path[256];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/data?%srow_count=%s", id,
		 declare ? "columns=a:numeric,b:numeric,y:numeric&" : "",
		 count_public ? "public" : "private");
	cr_assert_eq(dpg_http(&srv, "PUT", path, srv.admin_key, csv, strlen(csv), hdr, &r), 0);
	cr_assert_eq(r.status, 200, "%s: %s", path, r.body);
	cr_assert_eq(dpg_num(r.json, "rows"), rows, "%s", r.body);
	dpg_resp_free(&r);
	free(csv);
}

/* A logistic regression on ab_table's y, from a and b. */
static const char *ab_job =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\",\"classes\":2,"
	"\"epochs\":1,\"lot_size\":20,\"noise_multiplier\":1.0,\"clip_norm\":1}}";

/* Submits two long jobs on fm into ids and waits until both run: the
 * next job submitted waits in the queue. */
static void occupy_both_workers(char ids[2][64])
{
	const char *running[] = {"running", NULL};

	for (int i = 0; i < 2; i++) {
		dpg_resp r = dpg_submit_job(&srv, "fm", dpg_fm_long_job, ids[i], 64);

		dpg_resp_free(&r);
	}
	for (int i = 0; i < 2; i++)
		json_decref(wait_for_state(ids[i], running, 60));
}

/*
 * A job runs only on the upload its submission was checked against.  The
 * table (200 rows, kinds declared, row count public) is replaced while
 * the job waits in the queue by one the checks would have refused: 199
 * or 200 rows with the count kept private (a dpsgd job's q = L/N takes
 * it as public), or kinds inferred from the rows (a job's features would
 * tell them).  Each time the job ends cancelled with one fixed error,
 * whatever the new rows, without a model or features, and its
 * reservation is released: the dataset spends nothing.  (Before, it ran
 * on the new table: failed on 199 rows, succeeded on 200, and its result
 * named the inferred kinds' features.)
 */
/* What replaces the table: put_ab's arguments. */
struct replacement {
	int rows;
	bool text_b, declare, count_public;
};

/* Submits ab_job on a new dataset `id` of 200 rows while both workers are
 * busy, replaces its table `by` one, and expects the job cancelled. */
static void expect_replaced_job_cancelled(const char *id, const struct replacement *by)
{
	char ids[2][64], queued[64], path[128];
	const char *err;
	dpg_resp r;
	json_t *j;

	dpg_make_dataset(&srv, id, 20.0, 1e-5, "rdp");
	put_ab(id, 200, false, true, true);
	occupy_both_workers(ids);
	r = dpg_submit_job(&srv, id, ab_job, queued, sizeof(queued));
	cr_assert_gt(dpg_num(r.json, "reservation.epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);
	put_ab(id, by->rows, by->text_b, by->declare, by->count_public);
	for (int i = 0; i < 2; i++)
		cancel_job(ids[i], 202);
	j = wait_for_state(queued, job_ended, 120);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled", "%s",
			 json_dumps(j, JSON_COMPACT));
	err = json_string_value(json_object_get(j, "error"));
	cr_assert(err && strcmp(err, REPLACED_ERROR) == 0, "%s", json_dumps(j, JSON_COMPACT));
	cr_assert_null(json_object_get(json_object_get(j, "result"), "features"));
	cr_assert_null(json_object_get(j, "started_at"));
	json_decref(j);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", queued);
	dpg_expect_status(&srv, "GET", path, srv.admin_key, NULL, 409);
	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "reserved.epsilon"), 0.0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "reserved.open"), 0, "%s", r.body);
	dpg_resp_free(&r);
	for (int i = 0; i < 2; i++)
		json_decref(wait_for_state(ids[i], job_ended, 60));
}

Test(jobs, a_queued_job_is_cancelled_when_its_table_becomes_199_private_rows)
{
	expect_replaced_job_cancelled("t199", &(struct replacement){199, false, true, false});
}

Test(jobs, a_queued_job_is_cancelled_when_its_table_becomes_200_private_rows)
{
	expect_replaced_job_cancelled("t200", &(struct replacement){200, false, true, false});
}

Test(jobs, a_queued_job_is_cancelled_when_its_table_has_inferred_kinds)
{
	expect_replaced_job_cancelled("tinf", &(struct replacement){200, true, false, true});
}

/*
 * A running job may not have read its data yet (a worker marks it running,
 * then reads the link and the table), so the data cannot change under it:
 * an upload and a builtin link are refused (409) while a job of the
 * dataset runs, and nothing changes; once it has ended they are taken.
 */
Test(jobs, the_data_of_a_running_job_does_not_change)
{
	const char *running[] = {"running", NULL};
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	char id[64], *csv = ab_table(50, false), *before;
	dpg_resp r;

	r = dpg_call(&srv, "GET", "/v1/datasets/fm/data", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	before = strdup(r.body);
	dpg_resp_free(&r);
	dpg_start_job(&srv, "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(wait_for_state(id, running, 60));
	dpg_expect_status(&srv, "PUT", "/v1/datasets/fm/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 409);
	cr_assert_eq(dpg_http(&srv, "PUT", "/v1/datasets/fm/data?row_count=public", srv.admin_key,
			      csv, strlen(csv), hdr, &r), 0);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert(strstr(r.body, "running"), "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/fm/data", srv.admin_key, NULL);
	cr_assert_str_eq(r.body, before);
	dpg_resp_free(&r);
	json_decref(stop_running_job(id));
	cr_assert_eq(dpg_http(&srv, "PUT", "/v1/datasets/fm/data?row_count=public", srv.admin_key,
			      csv, strlen(csv), hdr, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "PUT", "/v1/datasets/fm/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	free(before);
	free(csv);
}

/*
 * A job whose end the database refuses for a while ends once it takes
 * writes again, on the same server: the database file is moved away (every
 * write is then refused, srv_store_file_check) while two jobs run and a
 * third queues; the first is cancelled, and its worker cannot write its
 * end.  Once the file is back, without a restart, the cancelled job ends
 * cancelled, its reservation committed in full as the 202 promised, and
 * the queued job runs and succeeds: neither is left running or queued
 * for ever by a worker that gave up on a write.
 */
Test(jobs, a_job_whose_end_was_refused_ends_once_the_database_is_back)
{
	const char *running[] = {"running", NULL};
	char ids[3][64], moved[400];
	json_t *j;

	dpg_skip_on_pg("moves the SQLite file (a PostgreSQL database has none)");
	dpg_start_job(&srv, "fm", dpg_fm_long_job, ids[0], sizeof(ids[0]));
	dpg_start_job(&srv, "fm", dpg_fm_long_job, ids[1], sizeof(ids[1]));
	json_decref(wait_for_state(ids[0], running, 60));
	json_decref(wait_for_state(ids[1], running, 60));
	dpg_start_job(&srv, "fm", dpg_fm_small_job, ids[2], sizeof(ids[2]));

	snprintf(moved, sizeof(moved), "%s/moved.db", srv.dir);
	dpg_move_database(&srv, "", moved);
	cancel_job(ids[0], 202);
	/* Long enough for the cancelled job's worker to stop training, try its
	 * end and (before the fix) give up on it and on the queued job. */
	sleep(3);
	dpg_move_database(&srv, moved, "");

	j = wait_for_state(ids[0], job_ended, 30);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled");
	json_decref(j);
	json_decref(dpg_job_succeeded(&srv, ids[2], 120));
	j = stop_running_job(ids[1]);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled");
	json_decref(j);
	/* Three reservations, each committed in full by its job's end: none
	 * left open for the expiry rule. */
	expect_closes(3, 0);
}

/* ---- a COMMIT written but reported failed ------------------------------- */

/* The server's environment for the tests below: one test hook's variable. */
static char lose_var[400];
static const char *lose_env[] = {lose_var, NULL};

/*
 * Restarts the server with the test hook `var` (srv__commit_lost_for_tests)
 * naming a file in its dir, whose path goes into `path`, and makes the
 * file: the next COMMIT the hook guards is written, then reported failed.
 */
static void restart_losing_commit(const char *var, char *path, size_t size)
{
	FILE *f;

	snprintf(path, size, "%s/lose-commit", srv.dir);
	snprintf(lose_var, sizeof(lose_var), "%s=%s", var, path);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.env = lose_env;
	dpg_server_restart(&srv);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fclose(f);
}

/*
 * A job whose claim (the write that marks it running) was committed while
 * its COMMIT was reported failed (an I/O error after SQLite wrote the WAL
 * frame; on PostgreSQL, the connection lost after the server committed)
 * runs and ends once: the worker asks which job its claim took before it
 * claims again.  (Before, the second claim found the job no longer queued
 * and the worker dropped it, leaving it running with no worker and its
 * reservation open until a restart, or on PostgreSQL until the sweep of
 * its lease failed it.)
 */
Test(jobs, a_job_whose_start_was_written_but_reported_failed_runs_once)
{
	char lose[400], id[64];
	json_t *j;

	restart_losing_commit("DPGATE_TEST_LOSE_CLAIM_COMMIT", lose, sizeof(lose));
	dpg_start_job(&srv, "fm", dpg_fm_small_job, id, sizeof(id));
	j = wait_for_state(id, job_ended, 120);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
			 json_string_value(json_object_get(j, "error")));
	json_decref(j);
	cr_assert_neq(access(lose, F_OK), 0, "no claim was reported failed: log %s", srv.log);
	/* Its reservation, committed by its one end. */
	expect_closes(1, 0);
}

/*
 * A job's end (its state and its reservation's commit, in one transaction)
 * committed while its COMMIT was reported failed is written again by the
 * worker, and that try finds the end it wrote: the job ends succeeded, its
 * reservation committed once, and the log says the end was recorded, with
 * no error.  (Before, the try found the job no longer running and the end
 * was logged as one that could not be recorded.)
 */
Test(jobs, a_job_whose_end_was_written_but_reported_failed_ends_once)
{
	char lose[400], id[64], recorded[160], not_recorded[160];

	restart_losing_commit("DPGATE_TEST_LOSE_END_COMMIT", lose, sizeof(lose));
	dpg_start_job(&srv, "fm", dpg_fm_small_job, id, sizeof(id));
	json_decref(dpg_job_succeeded(&srv, id, 120));
	cr_assert_neq(access(lose, F_OK), 0, "no end was reported failed: log %s", srv.log);
	/* The job shows its end from the first try on; the worker's next try
	 * comes after its wait, and logs one of these. */
	snprintf(recorded, sizeof(recorded), "recorded the end of job %s", id);
	snprintf(not_recorded, sizeof(not_recorded), "cannot record the end of job %s", id);
	for (int i = 0; i < 600; i++) {
		if (dpg_log_lines_equal(&srv, recorded) + dpg_log_lines_equal(&srv, not_recorded))
			break;
		usleep(100000);
	}
	cr_assert_eq(dpg_log_lines_equal(&srv, not_recorded), 0, "log %s", srv.log);
	cr_assert_eq(dpg_log_lines_equal(&srv, recorded), 1, "log %s", srv.log);
	expect_closes(1, 0);
}

/* Writes len bytes of data to a new file at path. */
/* Three headerless rows of 784 inputs (a fashion-mnist model's): with
 * `short_third` the third row lacks its last field; else the second row's
 * fifth field is the word "x".  Malloc'ed. */
static char *headerless_rows(bool short_third)
{
	size_t size = 3 * 784 * 4 + 8, n = 0;
	char *csv = malloc(size);

	cr_assert_not_null(csv);
	for (int row = 1; row <= 3; row++) {
		int fields = short_third && row == 3 ? 783 : 784;

		for (int j = 1; j <= fields; j++)
			n += (size_t)snprintf(csv + n, size - n, "%s%s", j > 1 ? "," : "",
					      !short_third && row == 2 && j == 5 ? "x" : "0");
		n += (size_t)snprintf(csv + n, size - n, "\n");
	}
	return csv;
}

/*
 * A bad row of a headerless CSV is named by its own line, by the predict
 * route (text/csv) and by `dpgate predict` alike: a short third row at
 * line 3, a word at line 2, column 5.  (Before, the header put before such
 * a table made every line one too high, and a word was "the header has no
 * numeric column 'c5'", a name the user never wrote.)
 */
Test(jobs, predict_names_the_line_and_cell_of_a_headerless_row)
{
	static const struct { bool short_third; const char *field, *detail; } bad[] = {
		{true, "/csv/line/3", "line 3: 783 fields"},
		{false, "/csv/line/2/5", "line 2, column 5: "},
	};
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	const char *done[] = {"succeeded", "failed", NULL};
	char id[64], path[128], model[400], csv_path[400], err[4096];
	const char *argv[] = {"/bin/sh", "-c", "exec \"$@\" 2>&1 >/dev/null", "sh", dpg_bin(),
			      "predict", "--model", model, csv_path, NULL};
	dpg_resp r;
	json_t *job;

	dpg_start_job(&srv, "fm", dpg_fm_small_job, id, sizeof(id));
	job = wait_for_state(id, done, 120);
	cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
	json_decref(job);
	snprintf(model, sizeof(model), "%s/fm.dpgm", srv.dir);
	dpg_save_model(&srv, id, model);
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", id);
	snprintf(csv_path, sizeof(csv_path), "%s/rows.csv", srv.dir);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		char *csv = headerless_rows(bad[k].short_third);
		const char *detail;

		cr_assert_eq(dpg_http(&srv, "POST", path, srv.admin_key, csv, strlen(csv), hdr, &r),
			     0);
		cr_assert_eq(r.status, 400, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), bad[k].field,
				 "%s", r.body);
		detail = json_string_value(json_object_get(r.json, "detail"));
		cr_assert(detail && !strncmp(detail, bad[k].detail, strlen(bad[k].detail)), "%s",
			  r.body);
		dpg_resp_free(&r);
		dpg_write_file(csv_path, csv, strlen(csv));
		cr_assert_eq(dpg_run(err, sizeof(err), argv), 2, "%s", err);
		cr_assert(strstr(err, bad[k].detail) && strstr(err, bad[k].field), "%s", err);
		free(csv);
	}
}
