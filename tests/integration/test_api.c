/*
 * test_api.c: datasets, charges, reservations, idempotency, dry-run, the
 * ledger and shutdown, through HTTP against the real binary.
 */
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dpg_limits.h"
#include "harness.h"
#include "test_math.h"

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 120);

static const char *charge_1_8 =
	"{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}";

/*
 * HEAD is answered wherever GET is: the same status and headers, the GET
 * body's length, no body; a route without GET is 405.
 */
Test(api, head_answers_like_get_without_a_body)
{
	dpg_resp get, head;

	dpg_make_dataset(&srv, "h", 1.0, 1e-5, "basic");
	get = dpg_call(&srv, "GET", "/v1/datasets/h/budget", srv.admin_key, NULL);
	head = dpg_call(&srv, "HEAD", "/v1/datasets/h/budget", srv.admin_key, NULL);
	cr_assert_eq(get.status, 200);
	cr_assert_eq(head.status, 200);
	cr_assert_eq(head.len, 0, "%s", head.body);
	cr_assert_eq(head.content_length, (long long)get.len);
	cr_assert_str_eq(head.content_type, get.content_type);
	dpg_resp_free(&get);
	dpg_resp_free(&head);
	/* Auth applies as to GET. */
	head = dpg_call(&srv, "HEAD", "/v1/datasets/h/budget", NULL, NULL);
	cr_assert_eq(head.status, 401);
	dpg_resp_free(&head);
	head = dpg_call(&srv, "HEAD", "/healthz", NULL, NULL);
	cr_assert_eq(head.status, 200);
	cr_assert_eq(head.len, 0);
	dpg_resp_free(&head);
	/* A POST-only route: 405. */
	head = dpg_call(&srv, "HEAD", "/v1/datasets/h/charges", srv.admin_key, NULL);
	cr_assert_eq(head.status, 405);
	dpg_resp_free(&head);
}

/*
 * /v1/accountant/rdp: the Gaussian's RDP is alpha / (2 sigma^2) (Mironov
 * 2017, Prop. 7); where that overflows, the answer says null (JSON has no
 * infinity) rather than a number or an error.
 */
Test(api, rdp_curve_writes_null_where_unbounded)
{
	dpg_resp r = dpg_call(&srv, "POST", "/v1/accountant/rdp", NULL,
			      "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2},\"orders\":[2,10]}");
	json_t *rdp;

	cr_assert_eq(r.status, 200, "%s", r.body);
	rdp = json_object_get(r.json, "rdp");
	cr_assert_float_eq(json_real_value(json_array_get(rdp, 0)), 2.0 / 8.0, 1e-12, "%s", r.body);
	cr_assert_float_eq(json_real_value(json_array_get(rdp, 1)), 10.0 / 8.0, 1e-12, "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "POST", "/v1/accountant/rdp", NULL,
		     "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1e-160},\"orders\":[2]}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	rdp = json_object_get(r.json, "rdp");
	cr_assert_eq(json_array_size(rdp), 1, "%s", r.body);
	cr_assert(json_is_null(json_array_get(rdp, 0)), "%s", r.body);
	dpg_resp_free(&r);
}

/*
 * /v1/accountant/compare answers epsilon under every accountant that can
 * price the event.  An (epsilon 1, delta 0.5) release at delta 1e-5 has
 * none: its own delta is above the one asked for, which no accountant gets
 * under (a PLD's mass at infinity is 0.5), and neither the moments
 * accountant nor zCDP bounds a release with delta > 0.  That is 422, as
 * /epsilon answers, naming the event; with delta 1e-6 basic prices it
 * (epsilon 1, the release's own), zCDP still cannot, and compare answers
 * 200.
 */
Test(api, compare_is_422_when_no_accountant_prices_the_event)
{
	static const char none[] = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":1,"
				   "\"delta\":0.5},\"delta\":1e-5}";
	static const char some[] = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":1,"
				   "\"delta\":1e-6},\"delta\":1e-5}";
	dpg_resp r = dpg_call(&srv, "POST", "/v1/accountant/compare", NULL, none);

	cr_assert_eq(r.status, 422, "%ld %s", r.status, r.body);
	cr_expect_str_eq(r.content_type, "application/problem+json");
	cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), "/event", "%s",
			 r.body);
	cr_expect(strstr(r.body, "no accountant"), "%s", r.body);
	dpg_assert_in_spec(&srv, "POST", "/v1/accountant/compare", "422",
			   "application/problem+json", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "POST", "/v1/accountant/compare", NULL, some);
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
	cr_expect_eq(json_real_value(json_object_get(json_object_get(r.json, "epsilon"), "basic")),
		     1.0, "%s", r.body);
	cr_expect(json_is_string(json_object_get(json_object_get(r.json, "unsupported"), "zcdp")),
		  "%s", r.body);
	dpg_assert_in_spec(&srv, "POST", "/v1/accountant/compare", "200", "application/json",
			   r.body);
	dpg_resp_free(&r);
}

Test(api, health_and_spec_are_public)
{
	dpg_resp r = dpg_call(&srv, "GET", "/healthz", NULL, NULL);

	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "status")), "ok");
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/openapi.yaml", NULL, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "openapi: 3.1") != NULL);
	dpg_resp_free(&r);
}

Test(api, dataset_lifecycle)
{
	dpg_resp r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key,
			      "{\"id\":\"adult\",\"name\":\"Adult census\",\"budget\":{\"epsilon\":3,\"delta\":1e-5},"
			      "\"accountant\":\"basic\",\"neighbor\":\"add_remove\",\"privacy_unit\":\"record\"}");

	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "name")), "Adult census");
	cr_assert_eq(dpg_num(r.json, "budget.epsilon"), 3.0);
	cr_assert_eq(dpg_num(r.json, "budget.delta"), 1e-5);
	dpg_resp_free(&r);

	/* The same id again is a conflict. */
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key,
			  "{\"id\":\"adult\",\"budget\":{\"epsilon\":1,\"delta\":0},\"accountant\":\"basic\"}",
			  409);

	r = dpg_call(&srv, "GET", "/v1/datasets", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(json_array_size(json_object_get(r.json, "datasets")), 1);
	dpg_resp_free(&r);

	/* Lowering the budget is recorded in the ledger too. */
	r = dpg_call(&srv, "PATCH", "/v1/datasets/adult", srv.admin_key,
		     "{\"budget\":{\"epsilon\":2}}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "budget.epsilon"), 2.0);
	cr_assert_eq(dpg_num(r.json, "budget.delta"), 1e-5);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/adult/ledger", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	{
		json_t *e = json_array_get(json_object_get(r.json, "entries"), 0);

		cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "budget");
		cr_assert_str_eq(json_string_value(json_object_get(e, "note")), "lowered");
	}
	dpg_resp_free(&r);

	/* Archive: the ledger stays, charges are refused. */
	r = dpg_call(&srv, "DELETE", "/v1/datasets/adult", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert(json_is_true(json_object_get(r.json, "archived")));
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "POST", "/v1/datasets/adult/charges", srv.admin_key,
			  charge_1_8, 409);
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets/adult/ledger", "entries"), 2);
	/* Archived datasets are hidden from the default listing. */
	cr_assert_eq(dpg_count_listed(&srv, "/v1/datasets", "datasets"), 0);
}

/* The server's peak resident memory (VmHWM) in bytes; 0 when unknown. */
static size_t server_peak_rss(const dpg_server *s)
{
	char path[64], line[128];
	unsigned long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)s->pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (size_t)kb * 1024;
}

/*
 * A long list takes memory near its length, not ten times it (a tree of
 * JSON values, about 6 KB a dataset, which the thread's allocator then
 * kept).  Sanitizers hold freed memory back for their own checks, so
 * their servers' peaks say nothing about the list.
 */
Test(api, a_long_dataset_list_takes_memory_near_its_length, .timeout = 600)
{
	enum { N = 3000 };
	size_t before, after;
	json_t *all;
	char id[32];
	dpg_resp r;

#ifdef __SANITIZE_ADDRESS__
	cr_skip_test("an address-sanitized server keeps freed memory in quarantine");
#endif
	if (dpg_time_scale() > 1.0)
		cr_skip_test("a sanitized server's memory is not the list's");
	for (int i = 0; i < N; i++) {
		snprintf(id, sizeof(id), "list%05d", i);
		dpg_make_dataset(&srv, id, 1.0, 1e-6, "rdp");
	}
	before = server_peak_rss(&srv);
	cr_assert_gt(before, 0, "no VmHWM for the server");
	r = dpg_call(&srv, "GET", "/v1/datasets", srv.admin_key, NULL);
	after = server_peak_rss(&srv);
	cr_assert_eq(r.status, 200);
	all = json_object_get(r.json, "datasets");
	cr_assert_eq(json_array_size(all), N);
	for (int i = 0; i < N; i += 997) {
		snprintf(id, sizeof(id), "list%05d", i);
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(all, i), "id")),
				 id);
		cr_assert_eq(dpg_num(json_array_get(all, i), "budget_summary.remaining.epsilon"),
			     1.0);
	}
	cr_assert_lt(after - before, 3 * r.len, "the list of %zu bytes took %zu bytes more",
		     r.len, after - before);
	dpg_resp_free(&r);
}

Test(api, charges_stop_exactly_at_the_budget)
{
	dpg_resp r;
	int ok = 0, refused = 0;

	dpg_make_dataset(&srv, "d", 1.0, 1e-5, "basic");
	for (int i = 0; i < 10; i++) {
		r = dpg_call(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_1_8);
		if (r.status == 201) {
			ok++;
			cr_assert_eq(dpg_num(r.json, "budget.spent.epsilon"), 0.125 * ok);
			cr_assert_eq(dpg_num(r.json, "budget.remaining.epsilon"), 1.0 - 0.125 * ok);
		} else {
			cr_assert_eq(r.status, 409, "%s", r.body);
			cr_assert_str_eq(r.content_type, "application/problem+json");
			cr_assert_eq(dpg_num(r.json, "remaining.epsilon"), 0.0);
			refused++;
		}
		dpg_resp_free(&r);
	}
	cr_assert_eq(ok, 8);
	cr_assert_eq(refused, 2);
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), 8);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 1.0);
	dpg_resp_free(&r);

	/* Raising the budget admits more, and is a ledger row. */
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/d", srv.admin_key,
			  "{\"budget\":{\"epsilon\":1.125}}", 200);
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_1_8, 201);
}

/*
 * A spend is priced before the write lock with its dataset's ledger kind,
 * which the server remembers per dataset after the first read.  A Gaussian
 * without a delta share is priced by an rdp ledger and refused (422, /delta)
 * by a basic one, so answers that follow the wrong dataset's kind would show.
 * Archiving forgets the dataset: the store then refuses the event as
 * archived (409) before any pricing, as on a first charge.
 */
Test(api, pricing_follows_each_dataset_and_archiving)
{
	static const char *gauss = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":4.0}}";
	dpg_resp r;

	dpg_make_dataset(&srv, "b", 10.0, 1e-5, "basic");
	dpg_make_dataset(&srv, "r", 10.0, 1e-5, "rdp");
	for (int round = 0; round < 3; round++) {
		r = dpg_call(&srv, "POST", "/v1/datasets/b/charges", srv.admin_key, gauss);
		cr_assert_eq(r.status, 422, "round %d: %s", round, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/delta");
		dpg_resp_free(&r);
		r = dpg_call(&srv, "POST", "/v1/datasets/r/charges", srv.admin_key, gauss);
		cr_assert_eq(r.status, 201, "round %d: %s", round, r.body);
		dpg_resp_free(&r);
		r = dpg_call(&srv, "POST", "/v1/datasets/b/charges", srv.admin_key, charge_1_8);
		cr_assert_eq(r.status, 201, "round %d: %s", round, r.body);
		dpg_resp_free(&r);
	}
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/b", srv.admin_key, NULL, 200);
	dpg_expect_status(&srv, "POST", "/v1/datasets/b/charges", srv.admin_key, gauss, 409);
	dpg_expect_status(&srv, "POST", "/v1/datasets/b/charges", srv.admin_key, charge_1_8, 409);
	r = dpg_call(&srv, "GET", "/v1/datasets/b/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), 3);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/r/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), 3);
	dpg_resp_free(&r);
}

Test(api, delta_is_a_budget_too)
{
	dpg_make_dataset(&srv, "d", 10.0, 1e-6, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.1,\"delta\":1e-6}}",
			  201);
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.1,\"delta\":1e-9}}",
			  409);
}

Test(api, idempotent_retry_replays_bytes_and_charges_once)
{
	const char *hdr[] = {"Idempotency-Key: job-42", NULL};
	dpg_resp a, b, c;

	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_1_8,
			      strlen(charge_1_8), hdr, &a), 0);
	cr_assert_eq(a.status, 201);
	cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_1_8,
			      strlen(charge_1_8), hdr, &b), 0);
	cr_assert_eq(b.status, 201);
	cr_assert_eq(a.len, b.len);
	cr_assert_eq(memcmp(a.body, b.body, a.len), 0, "replay differs:\n%s\n%s", a.body, b.body);
	/* The same key with another body is refused and changes nothing. */
	{
		const char *other = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}";

		cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, other,
				      strlen(other), hdr, &c), 0);
		cr_assert_eq(c.status, 422, "%s", c.body);
		dpg_resp_free(&c);
	}
	c = dpg_call(&srv, "GET", "/v1/datasets/d/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(c.json, "charges"), 1);
	cr_assert_eq(dpg_num(c.json, "spent.epsilon"), 0.125);
	dpg_resp_free(&a);
	dpg_resp_free(&b);
	dpg_resp_free(&c);
}

/*
 * A retry is answered from storage before the dataset is looked at, so the
 * stored answer comes back byte for byte after the dataset was archived
 * (charge, reservation and a mechanism release); a new key gets 409.
 */
Test(api, a_retry_after_archiving_gets_the_stored_answer)
{
	static const struct {
		const char *path, *body;
	} spends[] = {
		{"/v1/datasets/d/charges", "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"},
		{"/v1/datasets/d/reservations", "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"},
		{"/v1/datasets/d/mechanisms/laplace", "{\"value\":12.5,\"sensitivity\":1,\"epsilon\":0.5}"},
	};
	enum { N = sizeof(spends) / sizeof(spends[0]) };
	char key[N][64], new_key[N][64];
	const char *hdr[N][2], *fresh[N][2];
	dpg_resp first[N], again, r;

	/* An Idempotency-Key names one request: one per route here. */
	for (int i = 0; i < N; i++) {
		snprintf(key[i], sizeof(key[i]), "Idempotency-Key: before-archive-%d", i);
		snprintf(new_key[i], sizeof(new_key[i]), "Idempotency-Key: after-archive-%d", i);
		hdr[i][0] = key[i];
		fresh[i][0] = new_key[i];
		hdr[i][1] = fresh[i][1] = NULL;
	}

	dpg_make_dataset(&srv, "d", 10.0, 0, "basic");
	for (int i = 0; i < N; i++) {
		cr_assert_eq(dpg_http(&srv, "POST", spends[i].path, srv.admin_key, spends[i].body,
				      strlen(spends[i].body), hdr[i], &first[i]), 0);
		cr_assert_eq(first[i].status, 201, "%s: %s", spends[i].path, first[i].body);
	}
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/d", srv.admin_key, NULL, 200);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(dpg_http(&srv, "POST", spends[i].path, srv.admin_key, spends[i].body,
				      strlen(spends[i].body), hdr[i], &again), 0);
		cr_assert_eq(again.status, 201, "%s: %s", spends[i].path, again.body);
		cr_assert_eq(again.len, first[i].len, "%s", spends[i].path);
		cr_assert_eq(memcmp(again.body, first[i].body, again.len), 0, "%s:\n%s\n%s",
			     spends[i].path, first[i].body, again.body);
		dpg_resp_free(&again);
		cr_assert_eq(dpg_http(&srv, "POST", spends[i].path, srv.admin_key, spends[i].body,
				      strlen(spends[i].body), fresh[i], &again), 0);
		cr_assert_eq(again.status, 409, "%s: %s", spends[i].path, again.body);
		dpg_resp_free(&again);
		dpg_resp_free(&first[i]);
	}
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), 2);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.625);
	dpg_resp_free(&r);
}

Test(api, dry_run_changes_nothing)
{
	dpg_resp r;

	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	r = dpg_call(&srv, "POST", "/v1/datasets/d/dry-run", srv.admin_key,
		     "{\"event\":{\"type\":\"self_composed\",\"count\":3,\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4}}}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_true(json_object_get(r.json, "fits")));
	/* Three Laplace releases at b = 4 per unit sensitivity: 3/4. */
	cr_assert_eq(dpg_num(r.json, "cost.epsilon"), 0.75);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "POST", "/v1/datasets/d/dry-run", srv.admin_key,
		     "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":1.5,\"delta\":0}}");
	cr_assert(json_is_false(json_object_get(r.json, "fits")));
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), 0);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.0);
	dpg_resp_free(&r);
}

/* Releasing reservation `rid` of dataset `id` is refused (409) because it
 * was committed already. */
static void assert_release_finds_committed(const char *id, const char *rid)
{
	char path[160];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/reservations/%s/release", id, rid);
	r = dpg_call(&srv, "POST", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "state")), "committed");
	dpg_resp_free(&r);
}

/* Dataset `id`'s updated_at, into out. */
static void updated_at_of(const char *id, char *out, size_t size)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/datasets/%s", id);
	dpg_get_string(&srv, path, "updated_at", out, size);
}

Test(api, reservations_commit_release_and_expire)
{
	dpg_resp r;
	char path[256], rid[64], rid2[64], rid3[64];

	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	r = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key,
		     "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0},\"note\":\"job\"}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(rid, sizeof(rid), "%s", json_string_value(json_object_get(r.json, "id")));
	cr_assert_eq(dpg_num(r.json, "budget.reserved.epsilon"), 0.5);
	cr_assert_eq(dpg_num(r.json, "budget.remaining.epsilon"), 0.5);
	dpg_resp_free(&r);

	/* Reserved budget is not available to charges. */
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.75,\"delta\":0}}",
			  409);

	/* Release returns it. */
	snprintf(path, sizeof(path), "/v1/datasets/d/reservations/%s/release", rid);
	r = dpg_call(&srv, "POST", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "budget.remaining.epsilon"), 1.0);
	dpg_resp_free(&r);
	/* A closed reservation cannot be closed again. */
	dpg_expect_status(&srv, "POST", path, srv.admin_key, NULL, 409);

	/* Commit keeps the cost as spent. */
	r = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key,
		     "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}");
	snprintf(rid2, sizeof(rid2), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/datasets/d/reservations/%s/commit", rid2);
	r = dpg_call(&srv, "POST", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(dpg_num(r.json, "budget.spent.epsilon"), 0.25);
	cr_assert_eq(dpg_num(r.json, "budget.reserved.epsilon"), 0.0);
	dpg_resp_free(&r);

	/* An expired reservation is committed in full, never returned. */
	r = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key,
		     "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0},\"ttl_seconds\":1}");
	cr_assert_eq(r.status, 201);
	snprintf(rid3, sizeof(rid3), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	sleep(2);
	assert_release_finds_committed("d", rid3);
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.5);
	cr_assert_eq(dpg_num(r.json, "reserved.epsilon"), 0.0);
	dpg_resp_free(&r);
}

/* Sleeps until the wall clock's fraction of a second is at least `ns`
 * nanoseconds; returns that clock reading. */
static struct timespec wall_clock_at_fraction(long ns)
{
	struct timespec ts;

	for (;;) {
		clock_gettime(CLOCK_REALTIME, &ts);
		if (ts.tv_nsec >= ns)
			return ts;
		usleep((useconds_t)((ns - ts.tv_nsec) / 1000 + 1));
	}
}

/*
 * A reservation lives at least its whole TTL.  One made with ttl_seconds 1
 * in the last tenth of a wall-clock second is still open, and can be
 * released, just after that second ends: an expiry counted from the whole
 * second it was made in (time(NULL) + ttl) would have passed by then.
 * Attempts whose request itself crossed the second are not judged.
 */
Test(api, a_reservation_is_not_swept_before_its_ttl_has_passed)
{
	bool judged = false;

	dpg_make_dataset(&srv, "d", 100.0, 0, "basic");
	for (int attempt = 0; attempt < 10 && !judged; attempt++) {
		struct timespec made = wall_clock_at_fraction(900000000L), after;
		char rid[64], path[160];
		dpg_resp r;

		r = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key,
			     "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0},"
			     "\"ttl_seconds\":1}");
		cr_assert_eq(r.status, 201, "%s", r.body);
		snprintf(rid, sizeof(rid), "%s", json_string_value(json_object_get(r.json, "id")));
		dpg_resp_free(&r);
		clock_gettime(CLOCK_REALTIME, &after);
		if (after.tv_sec != made.tv_sec)
			continue;
		/* 30 ms into the next second: 0.13 s or less after it was made. */
		do {
			usleep(5000);
			clock_gettime(CLOCK_REALTIME, &after);
		} while (after.tv_sec == made.tv_sec || after.tv_nsec < 30000000L);
		if (after.tv_sec != made.tv_sec + 1)
			continue; /* descheduled for a second: not judged */
		snprintf(path, sizeof(path), "/v1/datasets/d/reservations/%s/release", rid);
		r = dpg_call(&srv, "POST", path, srv.admin_key, NULL);
		cr_assert_eq(r.status, 200, "released %.3f s after it was made, ttl 1 s: %s",
			     (double)(after.tv_sec - made.tv_sec) +
				     (double)(after.tv_nsec - made.tv_nsec) / 1e9,
			     r.body);
		dpg_resp_free(&r);
		judged = true;
	}
	cr_assert(judged, "no attempt was made and released within one wall-clock second");
}

Test(api, ledger_pages)
{
	json_t *entries;

	dpg_make_dataset(&srv, "d", 100.0, 0, "basic");
	for (int i = 0; i < 25; i++)
		dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
				  charge_1_8, 201);
	/* Pages of 10: three, the last holding 5. */
	entries = dpg_list_all(&srv, "/v1/datasets/d/ledger?limit=10", 10);
	cr_assert_eq(json_array_size(entries), 25);
	json_decref(entries);
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/ledger?limit=0", srv.admin_key, NULL, 400);
}

#define PAGED_RESERVATIONS 230

/*
 * Reservations, with charges between them and every third released and
 * every fifth committed, come back a page at a time: the default page holds
 * 100 and points past its last row; pages of 7 hold them all, in the order
 * they were made, each with the ledger_seq its reservation answered, and
 * that ledger row is the "reserve" row of that reservation.  A page out of
 * range is a 400 naming the parameter.
 */
Test(api, reservations_are_listed_a_page_at_a_time)
{
	static char ids[PAGED_RESERVATIONS][64];
	static long long seqs[PAGED_RESERVATIONS];
	static const char *const bad[] = {"limit=0", "limit=1001", "after=-1", "limit=x", "after=1.5"};
	const char *body = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}}";
	json_t *all, *ledger, *row;
	dpg_resp r;
	size_t i;

	dpg_make_dataset(&srv, "d", 100.0, 0, "basic");
	for (int k = 0; k < PAGED_RESERVATIONS; k++) {
		char path[160];

		r = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key, body);
		cr_assert_eq(r.status, 201, "%s", r.body);
		snprintf(ids[k], sizeof(ids[k]), "%s", json_string_value(json_object_get(r.json, "id")));
		seqs[k] = (long long)dpg_num(r.json, "ledger_seq");
		dpg_resp_free(&r);
		if (k % 3 == 0 || k % 5 == 0) {
			snprintf(path, sizeof(path), "/v1/datasets/d/reservations/%s/%s", ids[k],
				 k % 3 == 0 ? "release" : "commit");
			dpg_expect_status(&srv, "POST", path, srv.admin_key, NULL, 200);
		}
		if (k % 2 == 0)
			dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, body,
					  201);
	}

	r = dpg_call(&srv, "GET", "/v1/datasets/d/reservations", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "reservations")), 100);
	cr_assert_eq((long long)dpg_num(r.json, "next"), seqs[99]);
	dpg_resp_free(&r);

	all = dpg_list_all_of(&srv, "/v1/datasets/d/reservations?limit=7", "reservations", 100);
	cr_assert_eq(json_array_size(all), PAGED_RESERVATIONS);
	ledger = dpg_list_all(&srv, "/v1/datasets/d/ledger?limit=1000", 10);
	json_array_foreach(all, i, row) {
		const char *state = json_string_value(json_object_get(row, "state"));
		const char *want = i % 3 == 0 ? "released" : i % 5 == 0 ? "committed" : "open";
		long long seq = (long long)dpg_num(row, "ledger_seq");
		bool found = false;
		size_t j;
		json_t *e;

		cr_assert_str_eq(json_string_value(json_object_get(row, "id")), ids[i], "row %zu", i);
		cr_assert_eq(seq, seqs[i], "row %zu", i);
		cr_assert_str_eq(state, want, "row %zu", i);
		json_array_foreach(ledger, j, e) {
			if ((long long)dpg_num(e, "seq") != seq)
				continue;
			cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "reserve");
			cr_assert_str_eq(json_string_value(json_object_get(e, "reservation_id")),
					 ids[i]);
			found = true;
		}
		cr_assert(found, "ledger row %lld of reservation %zu is missing", seq, i);
	}
	json_decref(ledger);
	json_decref(all);

	/* Past the last one: an empty page, and no next. */
	{
		char path[160];

		snprintf(path, sizeof(path), "/v1/datasets/d/reservations?after=%lld",
			 seqs[PAGED_RESERVATIONS - 1]);
		r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_eq(json_array_size(json_object_get(r.json, "reservations")), 0);
		cr_assert(json_is_null(json_object_get(r.json, "next")), "%s", r.body);
		dpg_resp_free(&r);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[160], field[8];

		snprintf(path, sizeof(path), "/v1/datasets/d/reservations?%s", bad[i]);
		snprintf(field, sizeof(field), "%.*s", (int)strcspn(bad[i], "="), bad[i]);
		r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
		cr_assert_eq(r.status, 400, "%s: %s", bad[i], r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), field, "%s",
				 r.body);
		dpg_resp_free(&r);
	}
	dpg_expect_status(&srv, "GET", "/v1/datasets/nope/reservations?limit=0", srv.admin_key,
			  NULL, 404);
}

Test(api, metrics_report_requests_and_budgets)
{
	dpg_resp r;

	dpg_make_dataset(&srv, "gauge_ds", 2.0, 0, "basic");
	r = dpg_call(&srv, "POST", "/v1/datasets/gauge_ds/charges", srv.admin_key, charge_1_8);
	dpg_resp_free(&r);
	/* A request is counted when libmicrohttpd reports it complete, which
	 * can be just after the client has read the answer: poll briefly. */
	for (int i = 0; i < 100; i++) {
		r = dpg_call(&srv, "GET", "/metrics", srv.admin_key, NULL);
		if (strstr(r.body, "route=\"/v1/datasets/{id}/charges\",status=\"201\"} 1"))
			break;
		dpg_resp_free(&r);
		usleep(10000);
	}
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "dpgate_dataset_epsilon_spent{dataset=\"gauge_ds\",accountant=\"basic\",archived=\"false\"} 0.125"),
		  "%s", r.body);
	cr_assert(strstr(r.body, "dpgate_dataset_epsilon_remaining{dataset=\"gauge_ds\",accountant=\"basic\",archived=\"false\"} 1.875"));
	cr_assert(strstr(r.body, "dpgate_http_requests_total{method=\"POST\",route=\"/v1/datasets/{id}/charges\",status=\"201\"} 1"));
	cr_assert(strstr(r.body, "dpgate_http_request_duration_seconds_bucket"));
	dpg_resp_free(&r);
}

/*
 * Checks one histogram of a /metrics text: its _bucket lines whose labels
 * hold `labels` (the whole label set when it is "", i.e. none but le) come
 * in order of le, their counts never fall, the last is le="+Inf" and equals
 * _count, and _sum is 0 exactly when _count is.  Returns _count.
 */
static double histogram_count(const char *text, const char *name, const char *labels)
{
	char bucket[256], count_name[256], sum_name[256];
	double prev_le = -1, prev = 0, count = -1, sum = -1;
	int buckets = 0;
	bool inf = false;

	snprintf(bucket, sizeof(bucket), "%s_bucket{%s%s", name, labels, *labels ? "," : "");
	snprintf(count_name, sizeof(count_name), "%s_count%s%s%s ", name, *labels ? "{" : "", labels,
		 *labels ? "}" : "");
	snprintf(sum_name, sizeof(sum_name), "%s_sum%s%s%s ", name, *labels ? "{" : "", labels,
		 *labels ? "}" : "");
	for (const char *line = text; line && *line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, bucket, strlen(bucket)) && !strncmp(line + strlen(bucket), "le=\"", 4)) {
			const char *le = line + strlen(bucket) + 4, *close = strstr(le, "\"} ");
			double n;

			cr_assert_not_null(close, "%.80s", line);
			cr_assert(!inf, "%s: a bucket after +Inf", name);
			n = strtod(close + 3, NULL);
			cr_assert_geq(n, prev, "%s: cumulative counts fall at %.80s", name, line);
			if (!strncmp(le, "+Inf", 4)) {
				inf = true;
			} else {
				double bound = strtod(le, NULL);

				cr_assert_gt(bound, prev_le, "%s: bounds out of order", name);
				prev_le = bound;
			}
			prev = n;
			buckets++;
		} else if (!strncmp(line, count_name, strlen(count_name))) {
			count = strtod(line + strlen(count_name), NULL);
		} else if (!strncmp(line, sum_name, strlen(sum_name))) {
			sum = strtod(line + strlen(sum_name), NULL);
		}
	}
	cr_assert(inf && buckets > 1, "%s{%s}: no buckets ending at +Inf", name, labels);
	cr_assert_eq(count, prev, "%s{%s}: _count %g, +Inf bucket %g", name, labels, count, prev);
	cr_assert_geq(sum, 0, "%s{%s}: no _sum", name, labels);
	cr_assert_eq(sum > 0, count > 0, "%s{%s}: _sum %g with _count %g", name, labels, sum, count);
	return count;
}

/* Both spend-timing histograms, checked; *ret_commit_sum their COMMIT
 * time in all; returns how many spend transactions committed. */
static double committed_spends(double *ret_commit_sum, double *ret_txn_sum)
{
	dpg_resp r = dpg_call(&srv, "GET", "/metrics", NULL, NULL);
	double commits, txns;

	cr_assert_eq(r.status, 200);
	commits = histogram_count(r.body, "dpgate_spend_commit_duration_seconds", "");
	txns = histogram_count(r.body, "dpgate_spend_transaction_duration_seconds", "");
	cr_assert_eq(commits, txns);
	dpg_resp_free(&r);
	*ret_commit_sum = dpg_metric(&srv, "dpgate_spend_commit_duration_seconds_sum");
	*ret_txn_sum = dpg_metric(&srv, "dpgate_spend_transaction_duration_seconds_sum");
	return commits;
}

/*
 * A refused charge changes nothing, so it writes nothing: no fsync'ed
 * commit and no new updated_at; one that found an expired reservation
 * commits it, and that outlives a restart.  A refused close of a
 * reservation writes nothing either.  /metrics' spend histograms
 * count exactly the transactions that committed, each COMMIT inside its
 * transaction, while dpgate_spend_commits_total counts every transaction
 * run; the request histogram of the charges route counts every request.
 */
Test(api, a_refusal_writes_nothing_and_spend_timings_count_each_commit)
{
	const char *quarter = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}";
	double c0, c1, c2, commit_sum, txn_sum, t0, t1;
	char updated[64], after[64], rid[64];
	dpg_resp r;

	dpg_make_dataset(&srv, "t", 0.5, 0, "basic");
	c0 = committed_spends(&commit_sum, &txn_sum);
	t0 = dpg_metric(&srv, "dpgate_spend_commits_total");
	for (int i = 0; i < 2; i++)
		dpg_expect_status(&srv, "POST", "/v1/datasets/t/charges", srv.admin_key,
				  quarter, 201);
	updated_at_of("t", updated, sizeof(updated));
	c1 = committed_spends(&commit_sum, &txn_sum);
	cr_assert_eq(c1, c0 + 2);
	cr_assert_gt(commit_sum, 0);
	cr_assert_leq(commit_sum, txn_sum);
	usleep(20000); /* updated_at has milliseconds: a write now would show */
	for (int i = 0; i < 3; i++)
		dpg_expect_status(&srv, "POST", "/v1/datasets/t/charges", srv.admin_key,
				  quarter, 409);
	cr_assert_eq(committed_spends(&commit_sum, &txn_sum), c1, "a refusal committed");
	t1 = dpg_metric(&srv, "dpgate_spend_commits_total");
	cr_assert_eq(t1, t0 + 5, "every transaction run is counted");
	updated_at_of("t", after, sizeof(after));
	cr_assert_str_eq(after, updated);
	{
		dpg_budget b = dpg_budget_of(&srv, "t");

		cr_assert_eq(b.spent_eps, 0.5);
		cr_assert_eq(b.charges, 2);
	}
	/* Every request of the route is in its latency histogram (counted as
	 * libmicrohttpd reports it complete: poll briefly). */
	for (int i = 0;; i++) {
		r = dpg_call(&srv, "GET", "/metrics", NULL, NULL);
		if (histogram_count(r.body, "dpgate_http_request_duration_seconds",
				    "method=\"POST\",route=\"/v1/datasets/{id}/charges\"") == 5)
			break;
		dpg_resp_free(&r);
		cr_assert_lt(i, 100, "the charges route's histogram never reached 5");
		usleep(10000);
	}
	dpg_resp_free(&r);

	/* A refusal that finds an expired reservation commits the sweep. */
	dpg_make_dataset(&srv, "u", 0.5, 0, "basic");
	r = dpg_call(&srv, "POST", "/v1/datasets/u/reservations", srv.admin_key,
		     "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0},\"ttl_seconds\":1}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(rid, sizeof(rid), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "POST", "/v1/datasets/u/charges", srv.admin_key, quarter, 201);
	c2 = committed_spends(&commit_sum, &txn_sum);
	sleep(2);
	r = dpg_call(&srv, "POST", "/v1/datasets/u/charges", srv.admin_key, quarter);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "budget.reserved.epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(committed_spends(&commit_sum, &txn_sum), c2 + 1);
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	dpg_server_restart(&srv);
	r = dpg_call(&srv, "GET", "/v1/datasets/u/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.5, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "reserved.epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);
	/* Closing a reservation that is closed already is refused, and
	 * writes nothing either. */
	updated_at_of("u", updated, sizeof(updated));
	usleep(20000);
	assert_release_finds_committed("u", rid);
	updated_at_of("u", after, sizeof(after));
	cr_assert_str_eq(after, updated);
}

Test(api, sigterm_is_graceful_and_the_ledger_verifies)
{
	char out[8192];
	dpg_resp r;
	const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};

	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	r = dpg_call(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_1_8);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "%s", out);
	cr_assert(strstr(out, "\"totals_match\": true"));
	dpg_server_restart(&srv);
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.125);
	dpg_resp_free(&r);
}

/*
 * Asserts that dataset `id`'s last ledger row is of `kind` and carries the
 * totals the budget route answers (schema/006): spent and reserved epsilon
 * (in 1/1024ths: the test's costs are exact in binary), open reservations
 * and charges.
 */
static void assert_last_row_carries_the_budget(const char *id, const char *kind)
{
	char path[128], sql[640];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	snprintf(sql, sizeof(sql),
		 "SELECT kind = '%s' AND json_extract(spent, '$[0]') * 1024 = %.0f"
		 " AND json_extract(reserved, '$[0]') * 1024 = %.0f AND open_reservations = %.0f"
		 " AND charges = %.0f FROM ledger WHERE dataset_id = '%s' ORDER BY seq DESC LIMIT 1",
		 kind, 1024 * dpg_num(r.json, "spent.epsilon"),
		 1024 * dpg_num(r.json, "reserved.epsilon"), dpg_num(r.json, "reserved.open"),
		 dpg_num(r.json, "charges"), id);
	cr_assert_eq(dpg_count_rows(srv.db, sql), 1, "the last row is no %s row with %s", kind,
		     r.body);
	dpg_resp_free(&r);
}

/* POSTs body to dataset k's `what` (charges, reservations, …); asserts
 * `status` and returns the answer's "id" (a reservation's) in rid. */
static void post_to_k(const char *what, const char *body, int status, char *rid, size_t size)
{
	char path[160];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/k/%s", what);
	r = dpg_call(&srv, "POST", path, srv.admin_key, body);
	cr_assert_eq(r.status, status, "%s: %s", path, r.body);
	if (rid)
		snprintf(rid, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
}

/*
 * Every kind of ledger row (create, charge, reserve, commit, release, a
 * commit by the expiry sweep, budget, archive) carries the dataset's totals after
 * it, equal to what the budget route then answers; `dpgate verify` checks
 * each of them against its replay.
 */
Test(api, every_ledger_row_carries_the_totals_after_it)
{
	const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	const char *quarter = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}";
	char out[8192], rid[64], path[160];
	json_t *report, *datasets, *d, *k = NULL;
	size_t i;

	dpg_skip_on_pg("reads the totals with SQLite's json_extract");

	dpg_make_dataset(&srv, "k", 4.0, 0, "basic");
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM ledger WHERE dataset_id = 'k'"), 1);
	assert_last_row_carries_the_budget("k", "create");
	cr_assert_eq(dpg_budget_of(&srv, "k").spent_eps, 0.0);
	post_to_k("charges", quarter, 201, NULL, 0);
	assert_last_row_carries_the_budget("k", "charge");
	post_to_k("reservations", "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0}}",
		  201, rid, sizeof(rid));
	assert_last_row_carries_the_budget("k", "reserve");
	snprintf(path, sizeof(path), "reservations/%s/commit", rid);
	post_to_k(path, NULL, 200, NULL, 0);
	assert_last_row_carries_the_budget("k", "commit");
	post_to_k("reservations", quarter, 201, rid, sizeof(rid));
	assert_last_row_carries_the_budget("k", "reserve");
	snprintf(path, sizeof(path), "reservations/%s/release", rid);
	post_to_k(path, NULL, 200, NULL, 0);
	assert_last_row_carries_the_budget("k", "release");
	post_to_k("reservations",
		  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0},\"ttl_seconds\":1}",
		  201, NULL, 0);
	assert_last_row_carries_the_budget("k", "reserve");
	sleep(2);
	post_to_k("charges", quarter, 201, NULL, 0);
	assert_last_row_carries_the_budget("k", "charge");
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT kind = 'commit' AND actor = 'expiry'"
					    " AND open_reservations = 0 AND charges = 3"
					    " FROM ledger WHERE dataset_id = 'k'"
					    " ORDER BY seq DESC LIMIT 1 OFFSET 1"),
		     1, "the sweep's commit row");
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/k", srv.admin_key,
			  "{\"budget\":{\"epsilon\":5}}", 200);
	assert_last_row_carries_the_budget("k", "budget");
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/k", srv.admin_key, NULL, 200);
	assert_last_row_carries_the_budget("k", "archive");

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "%s", out);
	report = json_loads(out, 0, NULL);
	cr_assert(report, "%s", out);
	datasets = json_object_get(report, "datasets");
	json_array_foreach(datasets, i, d)
		if (strcmp(json_string_value(json_object_get(d, "id")), "k") == 0)
			k = d;
	cr_assert(k, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(k, "rows")), 11, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(k, "rows_with_totals")), 11, "%s", out);
	cr_assert(json_is_true(json_object_get(k, "totals_match")), "%s", out);
	json_decref(report);
	dpg_server_restart(&srv);
}

Test(api, cli_help_and_keys)
{
	char out[16384];
	const char *help[] = {dpg_bin(), "--help", NULL};
	const char *serve_help[] = {dpg_bin(), "serve", "--help", NULL};
	const char *list[] = {dpg_bin(), "keys", "list", "--db", srv.db, NULL};
	const char *bad[] = {dpg_bin(), "frobnicate", NULL};

	cr_assert_eq(dpg_run(out, sizeof(out), help), 0);
	cr_assert(strstr(out, "serve"));
	cr_assert_eq(dpg_run(out, sizeof(out), serve_help), 0);
	cr_assert(strstr(out, "--listen"));
	/* Every command `dpgate --help` lists answers --help on stdout, exit 0. */
	{
		static const char *const cmds[] = {"serve", "keys", "epsilon", "delta", "calibrate",
						   "compare", "rdp", "check", "verify", "backup",
						   "routes"};

		cr_assert_eq(dpg_run(out, sizeof(out), help), 0);
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
			const char *argv[] = {dpg_bin(), cmds[i], "--help", NULL};

			cr_assert(strstr(out, cmds[i]), "%s is not in dpgate --help", cmds[i]);
			cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "dpgate %s --help", cmds[i]);
			cr_assert(strstr(out, "usage: dpgate"), "dpgate %s --help: %s", cmds[i], out);
			cr_assert_eq(dpg_run(out, sizeof(out), help), 0);
		}
	}
	cr_assert_eq(dpg_run(out, sizeof(out), list), 0);
	cr_assert(strstr(out, "\"role\": \"admin\""));
	/* The list shows no secret. */
	cr_assert_null(strstr(out, srv.admin_key + 21));
	cr_assert_eq(dpg_run(out, sizeof(out), bad), 2);
	/* Commands on an existing ledger do not create one at a wrong path. */
	{
		char missing[400];
		const char *verify[] = {dpg_bin(), "verify", "--db", missing, NULL};
		const char *keys_list[] = {dpg_bin(), "keys", "list", "--db", missing, NULL};
		const char *keys_revoke[] = {dpg_bin(), "keys", "revoke", "--db", missing, "abc", NULL};
		const char *keys_bad[] = {dpg_bin(), "keys", "frob", "--db", missing, NULL};
		const char *const *cmds[] = {verify, keys_list, keys_revoke, keys_bad};

		snprintf(missing, sizeof(missing), "%s/typo.db", srv.dir);
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
			cr_assert_eq(dpg_run(out, sizeof(out), cmds[i]), 2, "%s %s", cmds[i][1], cmds[i][2]);
			cr_assert_neq(access(missing, F_OK), 0, "%s created %s", cmds[i][1], missing);
		}
	}
}

/*
 * Makes an rdp dataset, charges each body (201 each), and checks that the
 * dataset still reads and its ledger verifies; *ret_budget is its budget
 * summary afterwards.
 */
static void charge_and_verify(const char *id, const char *const *bodies, size_t n,
			      dpg_resp *ret_budget)
{
	const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	char path[128], out[8192];

	dpg_make_dataset(&srv, id, 10.0, 1e-5, "rdp");
	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	for (size_t i = 0; i < n; i++)
		dpg_expect_status(&srv, "POST", path, srv.admin_key, bodies[i], 201);
	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", id);
	*ret_budget = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(ret_budget->status, 200, "%s", ret_budget->body);
	cr_assert_eq(dpg_num(ret_budget->json, "charges"), (double)n);
	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "%s", out);
}

/*
 * An event with no RDP bound at some orders (pate_gnss beyond 1/(2 beta))
 * leaves infinite coordinates in an rdp ledger's running composition: the
 * dataset must stay readable and keep admitting at the other orders.
 */
Test(api, infinite_rdp_coordinates_are_stored)
{
	const char *gnss = "{\"event\":{\"type\":\"pate_gnss\",\"beta\":0.05,\"sigma\":20}}";
	const char *const bodies[] = {gnss, gnss};
	dpg_resp r;

	charge_and_verify("r", bodies, 2, &r);
	cr_assert_gt(dpg_num(r.json, "remaining.epsilon"), 0.0);
	dpg_resp_free(&r);
}

/*
 * The opposite end: a Gaussian with a noise multiplier of 8e153 costs about
 * 1e-308 at every order, subnormal doubles.  Before, the totals text then
 * failed to read back and the dataset answered 503 to everything after
 * that charge; it must be charged, stay readable and verify.
 */
Test(api, subnormal_rdp_coordinates_are_stored)
{
	const char *const bodies[] = {
		"{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":8e153}}",
		"{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1.0}}",
	};
	dpg_resp r;

	charge_and_verify("s", bodies, 2, &r);
	dpg_resp_free(&r);
}

/*
 * Keys are cached by the server after their first check; a revocation must
 * still take effect at once, through the API and through the CLI (another
 * process).
 */
/* A PLD calibration: about a second in a debug build, more under ASan. */
static const char *slow_calibration =
	"{\"template\":{\"type\":\"self_composed\",\"count\":1000,\"event\":{\"type\":"
	"\"poisson_sampled\",\"sampling_probability\":0.02,\"event\":{\"type\":\"gaussian\","
	"\"noise_multiplier\":null}}},\"epsilon\":3,\"delta\":1e-05,\"accountant\":\"pld\"}";

struct slow_call {
	const dpg_server *s;
	dpg_resp r;
	int rc;
	atomic_bool done;
};

static void *slow_call_run(void *arg)
{
	struct slow_call *sc = arg;

	for (;;) {
		sc->rc = dpg_http(sc->s, "POST", "/v1/accountant/calibrate", NULL, slow_calibration,
				  strlen(slow_calibration), NULL, &sc->r);
		if (sc->rc != 0 || sc->r.status != 503)
			break;
		dpg_resp_free(&sc->r); /* the other side held the one slot: again */
	}
	atomic_store(&sc->done, true);
	return NULL;
}

/*
 * With --threads 2, one stateless computation may run at a time: while a
 * slow one runs, another is refused at once with 503 and Retry-After (the
 * other HTTP thread stays free for the routes that spend budget), and a
 * charge is still answered.  Once it ends, the same request is answered.
 */
Test(api, stateless_computations_leave_threads_for_charges)
{
	static const char *eps_body =
		"{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2},\"delta\":1e-5}";
	struct slow_call sc = {.s = &srv};
	bool refused = false;
	pthread_t t;
	dpg_resp r;

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.threads = 2;
	dpg_server_restart(&srv);
	dpg_make_dataset(&srv, "busy", 10.0, 1e-5, "basic");

	cr_assert_eq(pthread_create(&t, NULL, slow_call_run, &sc), 0);
	/* Let its connection be accepted alone (a thread accepts every pending
	 * connection at once, and one accepted with it would wait behind it). */
	usleep(100000);
	while (!refused && !atomic_load(&sc.done)) {
		cr_assert_eq(dpg_http(&srv, "POST", "/v1/accountant/epsilon", NULL, eps_body,
				      strlen(eps_body), NULL, &r), 0);
		if (r.status == 503) {
			refused = true;
			cr_assert_eq(r.retry_after, 1);
			cr_assert_str_eq(r.content_type, "application/problem+json");
			cr_assert_not_null(r.json, "%s", r.body);
			cr_assert(strstr(r.body, "retry"), "%s", r.body);
			/* A charge goes through meanwhile. */
			dpg_resp_free(&r);
			r = dpg_call(&srv, "POST", "/v1/datasets/busy/charges", srv.admin_key,
				     charge_1_8);
			cr_assert_eq(r.status, 201, "%s", r.body);
		} else {
			cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
		}
		dpg_resp_free(&r);
	}
	cr_assert(refused, "the calibration ended before a second computation was tried");
	pthread_join(t, NULL);
	cr_assert_eq(sc.rc, 0);
	cr_assert_eq(sc.r.status, 200, "%s", sc.r.body);
	dpg_resp_free(&sc.r);
	r = dpg_call(&srv, "POST", "/v1/accountant/epsilon", NULL, eps_body);
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
}

/* A charge whose price takes long: a basic ledger prices 100 distinct
 * Gaussians at a delta share with rdp, zcdp and pld, and pld composes until
 * its work limit. */
struct slow_charge {
	const dpg_server *s;
	char *body;
	dpg_resp r;
	int rc;
	atomic_bool done;
};

static void *slow_charge_run(void *arg)
{
	struct slow_charge *sc = arg;

	sc->rc = dpg_http(sc->s, "POST", "/v1/datasets/slow/charges", sc->s->admin_key, sc->body,
			  strlen(sc->body), NULL, &sc->r);
	atomic_store(&sc->done, true);
	return NULL;
}

/*
 * Pricing runs before the write lock: while one charge's price is being
 * computed, charges on another dataset keep being answered.  (When the
 * price was computed inside the write transaction, every other charge
 * waited for it: a charge sent just after the slow one answered only when
 * the slow one did.)  Charges are sent one after another during the slow
 * request, and at least one must be answered in the middle of it.
 */
Test(api, a_slow_price_holds_no_lock)
{
	struct slow_charge sc = {.s = &srv};
	size_t cap = 64 + 100 * 64, len = 0;
	double t0, t1, done_at[4096];
	int n_done = 0, in_middle = 0;
	pthread_t t;
	dpg_budget b;

	dpg_make_dataset(&srv, "slow", 1e6, 1e-3, "basic");
	dpg_make_dataset(&srv, "other", 1e6, 1e-3, "basic");
	sc.body = malloc(cap);
	cr_assert_not_null(sc.body);
	len += (size_t)snprintf(sc.body + len, cap - len, "{\"event\":{\"type\":\"composed\",\"events\":[");
	for (int i = 0; i < 100; i++)
		len += (size_t)snprintf(sc.body + len, cap - len,
					"%s{\"type\":\"gaussian\",\"noise_multiplier\":%g}", i ? "," : "",
					1.0 + 0.01 * i);
	snprintf(sc.body + len, cap - len, "]},\"delta\":1e-9}");

	t0 = dpg_now_s();
	cr_assert_eq(pthread_create(&t, NULL, slow_charge_run, &sc), 0);
	/* Let its connection be accepted alone (a thread accepts every pending
	 * connection at once, and one accepted with it would wait behind it). */
	usleep(100000);
	while (!atomic_load(&sc.done) && n_done < 4096) {
		dpg_resp r = dpg_call(&srv, "POST", "/v1/datasets/other/charges", srv.admin_key,
				      charge_1_8);

		cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
		dpg_resp_free(&r);
		done_at[n_done++] = dpg_now_s();
	}
	pthread_join(t, NULL);
	t1 = dpg_now_s();
	cr_assert_eq(sc.rc, 0);
	cr_assert_eq(sc.r.status, 201, "%ld %s", sc.r.status, sc.r.body);
	cr_assert(t1 - t0 > 0.2, "the slow charge took only %.3f s: not slow enough to tell", t1 - t0);
	for (int i = 0; i < n_done; i++)
		if (done_at[i] > t0 + 0.25 * (t1 - t0) && done_at[i] < t0 + 0.75 * (t1 - t0))
			in_middle++;
	cr_assert(in_middle > 0,
		  "no charge on another dataset was answered while the slow one was priced "
		  "(%d answered in %.3f s)", n_done, t1 - t0);
	b = dpg_budget_of(&srv, "slow");
	cr_assert_eq(b.charges, 1);
	b = dpg_budget_of(&srv, "other");
	cr_assert_eq(b.charges, n_done);
	dpg_resp_free(&sc.r);
	free(sc.body);
}

Test(api, revocation_reaches_the_key_cache_at_once)
{
	char k1[160], k2[160], id[17], path[64];
	dpg_resp r;

	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	dpg_make_key(&srv, "viewer", NULL, k1, sizeof(k1));
	dpg_make_key(&srv, "viewer", NULL, k2, sizeof(k2));
	for (int i = 0; i < 2; i++)
		dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", i ? k2 : k1, NULL, 200);
	/* The CLI, while the server runs. */
	dpg_revoke_key_cli(srv.db, dpg_key_id(k1, id, sizeof(id)));
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", k1, NULL);
	cr_assert_eq(r.status, 401, "a key revoked by the CLI still works: %s", r.body);
	dpg_resp_free(&r);
	/* The API. */
	dpg_key_id(k2, id, sizeof(id));
	snprintf(path, sizeof(path), "/v1/keys/%s", id);
	dpg_expect_status(&srv, "DELETE", path, srv.admin_key, NULL, 200);
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", k2, NULL, 401);
	/* A wrong secret for a cached id is refused too. */
	snprintf(k1, sizeof(k1), "%s", srv.admin_key);
	k1[strlen(k1) - 1] = k1[strlen(k1) - 1] == 'a' ? 'b' : 'a';
	dpg_expect_status(&srv, "GET", "/v1/datasets", k1, NULL, 401);
}

/* The authentication scheme's name is case-insensitive (RFC 9110, 11.1):
 * "bearer" and "BEARER" work as "Bearer" does; another scheme does not. */
Test(api, the_bearer_scheme_is_matched_in_any_case)
{
	static const char *const schemes[] = {"bearer", "BEARER", "BeArEr", "Basic"};
	static const long want[] = {200, 200, 200, 401};

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		char hdr[256];
		const char *headers[] = {hdr, NULL};
		dpg_resp r;

		snprintf(hdr, sizeof(hdr), "Authorization: %s %s", schemes[i], srv.admin_key);
		cr_assert_eq(dpg_http(&srv, "GET", "/v1/datasets", NULL, NULL, 0, headers, &r), 0);
		cr_assert_eq(r.status, want[i], "%s: %ld %s", schemes[i], r.status, r.body);
		dpg_resp_free(&r);
	}
}

/*
 * The CLI reaches the server's key cache whatever path names the database:
 * `keys revoke --db` through a symlink wrote "<link>-keys", a stamp the
 * server (watching "<file>-keys") never looked at, and the revoked key kept
 * working until a restart.  The stamp now sits beside the resolved path.
 */
Test(api, a_revocation_through_a_symlinked_path_reaches_the_server)
{
	char k[160], id[17], link[400];
	dpg_resp r;

	dpg_skip_on_pg("a file's symlink; servers on a shared database keep no key cache");
	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	dpg_make_key(&srv, "viewer", NULL, k, sizeof(k));
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", k, NULL, 200);
	snprintf(link, sizeof(link), "%s/link.db", srv.dir);
	cr_assert_eq(symlink(srv.db, link), 0);
	dpg_revoke_key_cli(link, dpg_key_id(k, id, sizeof(id)));
	r = dpg_call(&srv, "GET", "/v1/datasets/d/budget", k, NULL);
	cr_assert_eq(r.status, 401, "a key revoked through a symlink still works: %s", r.body);
	dpg_resp_free(&r);
}

/*
 * Two `keys revoke` within one tick of the file system's clock rewrite the
 * stamp with the same mtime, inode and size: the second revocation must
 * still reach the server's key cache.  The test gives the stamp back the
 * first rewrite's mtime, as a coarse clock would have.
 */
Test(api, two_revocations_within_one_clock_tick_both_reach_the_server)
{
	char k[2][160], id[17], db[PATH_MAX], stamp[PATH_MAX + 8];
	struct timespec first[2];
	struct stat st;

	dpg_skip_on_pg("the stamp file; servers on a shared database keep no key cache");
	cr_assert(realpath(srv.db, db));
	snprintf(stamp, sizeof(stamp), "%s-keys", db);
	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	for (int i = 0; i < 2; i++) {
		dpg_make_key(&srv, "viewer", NULL, k[i], sizeof(k[i]));
		dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", k[i], NULL, 200);
	}
	dpg_revoke_key_cli(srv.db, dpg_key_id(k[0], id, sizeof(id)));
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", k[0], NULL, 401);
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", k[1], NULL, 200);
	cr_assert_eq(stat(stamp, &st), 0, "%s", stamp);
	first[0] = st.st_atim;
	first[1] = st.st_mtim;

	dpg_revoke_key_cli(srv.db, dpg_key_id(k[1], id, sizeof(id)));
	cr_assert_eq(utimensat(AT_FDCWD, stamp, first, 0), 0);
	cr_assert_eq(stat(stamp, &st), 0);
	cr_assert_eq(st.st_mtim.tv_nsec, first[1].tv_nsec);
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/budget", k[1], NULL, 401);
}

/*
 * Costs and budgets a JSON number cannot carry.  A dry-run of an event whose
 * epsilon under the ledger is infinite (a Gaussian with sigma 1e-160: RDP
 * alpha / (2 sigma^2) = inf at every order) is 422 at /event (it was 500:
 * the answer could not be built); a charge of it is 409.  An rdp or zcdp
 * budget delta below DPG_MIN_LEDGER_DELTA (1e-100) is refused: 5e-324 / 20
 * underflows to 0 in the conversion, and the budget summary became
 * unreadable (500) after such a PATCH.
 */
Test(api, unbounded_costs_and_subnormal_deltas_are_refused)
{
	static const char *huge = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1e-160}}";
	dpg_budget before, after;
	dpg_resp r;

	dpg_make_dataset(&srv, "r", 1.0, 1e-5, "rdp");
	dpg_make_dataset(&srv, "z", 1.0, 1e-5, "zcdp");
	dpg_expect_status(&srv, "POST", "/v1/datasets/r/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":10}}", 201);
	before = dpg_budget_of(&srv, "r");
	for (int i = 0; i < 2; i++) {
		r = dpg_call(&srv, "POST", i ? "/v1/datasets/z/dry-run" : "/v1/datasets/r/dry-run",
			     srv.admin_key, huge);
		cr_assert_eq(r.status, 422, "%ld %s", r.status, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/event");
		dpg_resp_free(&r);
	}
	r = dpg_call(&srv, "POST", "/v1/datasets/r/charges", srv.admin_key, huge);
	cr_assert_eq(r.status, 409, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
	for (int i = 0; i < 2; i++) {
		r = dpg_call(&srv, "PATCH", i ? "/v1/datasets/z" : "/v1/datasets/r", srv.admin_key,
			     "{\"budget\":{\"delta\":5e-324}}");
		cr_assert(r.status == 422 || r.status == 400, "%ld %s", r.status, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/budget/delta",
				 "%s", r.body);
		dpg_resp_free(&r);
	}
	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key,
		     "{\"id\":\"tiny\",\"budget\":{\"epsilon\":1,\"delta\":1e-200},\"accountant\":\"rdp\"}");
	cr_assert(r.status == 422 || r.status == 400, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/r/budget", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
	after = dpg_budget_of(&srv, "r");
	cr_assert_eq(after.ledger_rows, before.ledger_rows);
	cr_assert_eq(after.spent_eps, before.spent_eps);
}

/*
 * A PATCH that raises epsilon and lowers delta below what is spent is a
 * lowering: its ledger row reads "lowered", and `dpgate verify` accepts the
 * spent delta above the budget.  The row read "raised" (found by
 * test_fuzz: {"budget":{"epsilon":4,"delta":5e-324}}), and verify then
 * reported the database as over budget and exited 1.
 */
Test(api, a_budget_change_that_lowers_delta_is_lowered)
{
	const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	char out[8192];
	json_t *e;
	dpg_resp r;

	dpg_make_dataset(&srv, "mixed", 1.0, 1e-6, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/mixed/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":1e-7}}",
			  201);
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/mixed", srv.admin_key,
			  "{\"budget\":{\"epsilon\":4,\"delta\":5e-324}}", 200);
	r = dpg_call(&srv, "GET", "/v1/datasets/mixed/ledger", srv.admin_key, NULL);
	e = json_array_get(json_object_get(r.json, "entries"), 1);
	cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "budget", "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(e, "note")), "lowered", "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "%s", out);
	dpg_server_restart(&srv);
}

/* ---- an rdp dataset's filter orders ---------------------------------------- */

/* Mironov 2017, Prop. 6: the RDP at order a of Laplace noise whose pure
 * epsilon is eps, in the proposition's own form. */
static double laplace_rdp_mironov(double eps, double a)
{
	return log(a / (2.0 * a - 1.0) * exp((a - 1.0) * eps) +
		   (a - 1.0) / (2.0 * a - 1.0) * exp(-a * eps)) /
	       (a - 1.0);
}

/* The filter orders DESIGN.md and docs/concepts.md document as the default. */
static const double default_filter_orders[] = {
	1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 32, 48, 64, 128, 256,
};

/* The epsilon of the last ledger row of dataset id (a charge). */
static double last_charge_epsilon(const char *id)
{
	char path[128];
	dpg_resp r;
	json_t *entries;
	double eps;

	snprintf(path, sizeof(path), "/v1/datasets/%s/ledger?limit=1000", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	entries = json_object_get(r.json, "entries");
	cr_assert_gt(json_array_size(entries), 0, "%s", r.body);
	eps = dpg_num(json_array_get(entries, json_array_size(entries) - 1), "epsilon");
	dpg_resp_free(&r);
	return eps;
}

/*
 * With one filter order the filter keeps all of delta at that order: a
 * charge costs exactly the event's own RDP at the order converted at
 * delta_B.  The default filter still splits delta over its 20 orders, and
 * charges what it charged (Laplace epsilon 0.5 at delta 1e-5: 0.5285).
 */
Test(api, a_one_order_filter_charges_the_events_own_conversion)
{
	const double delta = 1e-5, a = 8.0, sigma = 2.0;
	const char *laplace = "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":2}}";
	double want, got, best = INFINITY;
	json_t *orders;
	dpg_resp r;

	r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key,
		     "{\"id\":\"one\",\"budget\":{\"epsilon\":10,\"delta\":1e-5},"
		     "\"accountant\":\"rdp\",\"filter_orders\":[8]}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	orders = json_object_get(r.json, "filter_orders");
	cr_assert_eq(json_array_size(orders), 1, "%s", r.body);
	cr_assert_eq(json_number_value(json_array_get(orders, 0)), 8.0);
	dpg_resp_free(&r);

	/* Gaussian noise multiplier sigma: RDP a / (2 sigma^2) (Mironov 2017,
	 * Prop. 7), here exactly 1. */
	r = dpg_call(&srv, "POST", "/v1/datasets/one/charges", srv.admin_key,
		     "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	want = test_rdp_to_epsilon(a, a / (2.0 * sigma * sigma), delta);
	cr_assert_float_eq(dpg_num(r.json, "budget.spent.epsilon"), want, 1e-12 * want, "%s want %.17g",
			   r.body, want);
	cr_assert_eq(dpg_num(r.json, "budget.filter.order_count"), 1.0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "budget.filter.delta_per_order"), delta, "%s", r.body);
	dpg_resp_free(&r);
	got = last_charge_epsilon("one");
	cr_assert_float_eq(got, want, 1e-12 * want, "ledger %.17g, want %.17g", got, want);

	/* Laplace on the one order: its own conversion, in the dry run too. */
	want = test_rdp_to_epsilon(a, laplace_rdp_mironov(0.5, a), delta);
	r = dpg_call(&srv, "POST", "/v1/datasets/one/dry-run", srv.admin_key, laplace);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_float_eq(dpg_num(r.json, "cost.epsilon"), want, 1e-12 * want, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "cost.filter_order_count"), 1.0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "cost.delta_per_order"), delta, "%s", r.body);
	dpg_resp_free(&r);
	/* A budget change keeps the dataset's orders. */
	r = dpg_call(&srv, "PATCH", "/v1/datasets/one", srv.admin_key, "{\"budget\":{\"epsilon\":12}}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "filter_orders")), 1, "%s", r.body);
	dpg_resp_free(&r);

	/* The default filter: the 20 documented orders, delta / 20 each, and
	 * the minimum over them of each order's conversion at that share. */
	dpg_make_dataset(&srv, "dflt", 10.0, delta, "rdp");
	r = dpg_call(&srv, "GET", "/v1/datasets/dflt", srv.admin_key, NULL);
	orders = json_object_get(r.json, "filter_orders");
	cr_assert_eq(json_array_size(orders), 20, "%s", r.body);
	for (size_t i = 0; i < 20; i++)
		cr_assert_eq(json_number_value(json_array_get(orders, i)), default_filter_orders[i]);
	cr_assert_eq(dpg_num(r.json, "budget_summary.filter.order_count"), 20.0, "%s", r.body);
	cr_assert_float_eq(dpg_num(r.json, "budget_summary.filter.delta_per_order"), delta / 20,
			   1e-25, "%s", r.body);
	dpg_resp_free(&r);
	for (size_t i = 0; i < 20; i++) {
		double o = default_filter_orders[i];

		best = fmin(best, test_rdp_to_epsilon(o, laplace_rdp_mironov(0.5, o), delta / 20));
	}
	r = dpg_call(&srv, "POST", "/v1/datasets/dflt/dry-run", srv.admin_key, laplace);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_float_eq(dpg_num(r.json, "cost.epsilon"), best, 1e-9 * best, "%s want %.17g",
			   r.body, best);
	/* The event's own epsilon at the full delta is below what the filter
	 * charges, and the answer says so. */
	cr_assert_lt(dpg_num(r.json, "cost.event_epsilon"), dpg_num(r.json, "cost.epsilon"), "%s",
		     r.body);
	cr_assert_gt(dpg_num(r.json, "cost.event_epsilon"), 0.0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "cost.filter_order_count"), 20.0, "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "POST", "/v1/datasets/dflt/charges", srv.admin_key, laplace, 201);
	got = last_charge_epsilon("dflt");
	cr_assert_float_eq(got, best, 1e-9 * best, "ledger %.17g, want %.17g", got, best);
	cr_assert_float_eq(got, 0.5285, 5e-5, "the figure the audit measured: %.17g", got);

	/* A training job's dry run states the same beside what it needs. */
	dpg_upload_iris(&srv, "dflt", "a,b,c,d,species");
	r = dpg_call(&srv, "POST", "/v1/datasets/dflt/jobs", srv.admin_key,
		     "{\"trainer\":\"dpsgd\",\"dry_run\":true,\"params\":{\"model\":\"logreg\","
		     "\"label\":\"species\",\"classes\":3,\"epochs\":2,\"lot_size\":10,"
		     "\"noise_multiplier\":1.0}}");
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_lt(dpg_num(r.json, "needed.event_epsilon"), dpg_num(r.json, "needed.epsilon"), "%s",
		     r.body);
	cr_assert_eq(dpg_num(r.json, "needed.filter_order_count"), 20.0, "%s", r.body);
	dpg_resp_free(&r);
}

/* The RDP accountant's epsilon of randomized response at delta: the least
 * conversion over dp_accounting's default orders (DESIGN.md). */
static double rr_rdp_epsilon(double p, double k, double delta)
{
	double o[TEST_RDP_DEFAULT_ORDERS], best = INFINITY;
	size_t n = test_rdp_default_orders(o);

	for (size_t i = 0; i < n; i++)
		best = fmin(best, test_rdp_to_epsilon(o[i], test_rr_renyi(p, k, o[i]), delta));
	return best;
}

/*
 * Charges, reservations and dry runs take the dataset's own relation.
 * Randomized response is defined under replace only (docs/concepts.md),
 * Poisson sampling is accounted under add/remove only and sampling without
 * replacement under replace only (Wang, Balle, Kasiviswanathan 2019): on
 * each dataset its relation's events are admitted, the other's refused
 * with 422 at /event and nothing spent.  A dry run on an rdp ledger states
 * the event's own epsilon under that relation (rr_rdp_epsilon), and the
 * dataset states its relation.
 */
Test(api, charges_reservations_and_dry_runs_take_the_datasets_relation)
{
	static const char rr[] = "{\"event\":{\"type\":\"randomized_response\","
				 "\"noise_parameter\":0.25,\"num_buckets\":4}}";
	static const char pois[] = "{\"event\":{\"type\":\"poisson_sampled\","
				   "\"sampling_probability\":0.5,\"event\":{\"type\":\"gaussian\","
				   "\"noise_multiplier\":2}}}";
	static const char wor[] = "{\"event\":{\"type\":\"sampled_without_replacement\","
				  "\"source_dataset_size\":10,\"sample_size\":5,\"event\":{\"type\":"
				  "\"gaussian\",\"noise_multiplier\":2}}}";
	static const struct {
		const char *ds, *body;
		bool admitted;
	} cases[] = {
		{"nb_swap", rr, true},	   {"nb_swap", wor, true},   {"nb_swap", pois, false},
		{"nb_addrem", pois, true}, {"nb_addrem", rr, false}, {"nb_addrem", wor, false},
	};
	static const char *const routes[] = {"dry-run", "reservations", "charges"};
	double delta = 1e-5, want = rr_rdp_epsilon(0.25, 4, delta);
	dpg_resp r;

	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key,
			  "{\"id\":\"nb_swap\",\"budget\":{\"epsilon\":50,\"delta\":1e-5},"
			  "\"accountant\":\"rdp\",\"neighbor\":\"replace\"}", 201);
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key,
			  "{\"id\":\"nb_addrem\",\"budget\":{\"epsilon\":50,\"delta\":1e-5},"
			  "\"accountant\":\"rdp\",\"neighbor\":\"add_remove\"}", 201);
	/* Each dataset states its relation. */
	for (size_t d = 0; d < 2; d++) {
		r = dpg_call(&srv, "GET", d ? "/v1/datasets/nb_addrem" : "/v1/datasets/nb_swap",
			     srv.admin_key, NULL);
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "neighbor")),
				 d ? "add_remove" : "replace", "%s", r.body);
		dpg_resp_free(&r);
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t k = 0; k < sizeof(routes) / sizeof(routes[0]); k++) {
			dpg_budget before = dpg_budget_of(&srv, cases[i].ds), after;
			char path[128];

			snprintf(path, sizeof(path), "/v1/datasets/%s/%s", cases[i].ds, routes[k]);
			r = dpg_call(&srv, "POST", path, srv.admin_key, cases[i].body);
			after = dpg_budget_of(&srv, cases[i].ds);
			if (!cases[i].admitted) {
				cr_assert_eq(r.status, 422, "case %zu %s: %s", i, routes[k], r.body);
				cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
						 "/event", "case %zu %s: %s", i, routes[k], r.body);
				cr_assert_eq(after.ledger_rows, before.ledger_rows, "case %zu", i);
				cr_assert_eq(after.spent_eps, before.spent_eps, "case %zu", i);
			} else if (k == 0) {
				cr_assert_eq(r.status, 200, "case %zu: %s", i, r.body);
				cr_assert_gt(dpg_num(r.json, "cost.event_epsilon"), 0.0, "case %zu: %s", i,
					     r.body);
			} else {
				cr_assert_eq(r.status, 201, "case %zu %s: %s", i, routes[k], r.body);
				cr_assert_eq(after.ledger_rows, before.ledger_rows + 1, "case %zu", i);
			}
			if (cases[i].admitted && k == 0 && cases[i].body == rr)
				cr_assert_float_eq(dpg_num(r.json, "cost.event_epsilon"), want,
						   1e-9 * want, "%s: want %.17g", r.body, want);
			dpg_resp_free(&r);
		}
	}
}

/*
 * DP-SGD's lots are Poisson-sampled, and Poisson sampling is accounted
 * under add/remove only (docs/concepts.md): on a replace dataset the job is
 * refused with 422 at its event (/params/event: the Poisson-sampled step
 * inside the steps' composition), the same job is admitted on an
 * add/remove dataset (a dry run), and nothing is reserved or queued.
 */
Test(api, a_dpsgd_job_is_refused_on_a_replace_dataset)
{
	static const char job[] = "{\"trainer\":\"dpsgd\",%s\"params\":{\"model\":\"logreg\","
				  "\"label\":\"species\",\"classes\":3,\"epochs\":1,\"lot_size\":10,"
				  "\"noise_multiplier\":1.0}}";
	char body[512];
	dpg_resp r;

	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key,
			  "{\"id\":\"sgd_swap\",\"budget\":{\"epsilon\":50,\"delta\":1e-5},"
			  "\"neighbor\":\"replace\"}", 201);
	dpg_make_dataset(&srv, "sgd_addrem", 50.0, 1e-5, "rdp");
	dpg_upload_iris(&srv, "sgd_swap", "a,b,c,d,species");
	dpg_upload_iris(&srv, "sgd_addrem", "a,b,c,d,species");
	snprintf(body, sizeof(body), job, "");
	r = dpg_call(&srv, "POST", "/v1/datasets/sgd_swap/jobs", srv.admin_key, body);
	cr_assert_eq(r.status, 422, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/params/event", "%s",
			 r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs"), 0);
	snprintf(body, sizeof(body), job, "\"dry_run\":true,");
	dpg_expect_status(&srv, "POST", "/v1/datasets/sgd_addrem/jobs", srv.admin_key, body, 200);
}

/* Bad filter orders are refused with the field at fault, creating nothing. */
Test(api, filter_orders_are_validated_and_create_nothing)
{
	static const struct {
		const char *orders, *accountant, *budget, *field;
	} cases[] = {
		{"[2,2]", "rdp", NULL, "/filter_orders/1"},
		{"[3,2]", "rdp", NULL, "/filter_orders/1"},
		{"[1]", "rdp", NULL, "/filter_orders/0"},
		{"[1.01]", "rdp", NULL, "/filter_orders/0"},
		{"[8,2e6]", "rdp", NULL, "/filter_orders/1"},
		{"[]", "rdp", NULL, "/filter_orders"},
		{"8", "rdp", NULL, "/filter_orders"},
		{"[8,\"x\"]", "rdp", NULL, "/filter_orders/1"},
		{"[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,"
		 "31,32,33,34]",
		 "rdp", NULL, "/filter_orders"},
		{"[8]", "basic", NULL, "/filter_orders"},
		{"[8]", "zcdp", NULL, "/filter_orders"},
		/* eps_B + log(1 - 1/a) + log(delta_B a)/(a - 1) < 0: nothing fits. */
		{"[1.02]", "rdp", "{\"epsilon\":0.01,\"delta\":1e-10}", "/filter_orders"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char body[512];
		dpg_resp r;

		snprintf(body, sizeof(body),
			 "{\"id\":\"f%zu\",\"budget\":%s,\"accountant\":\"%s\",\"filter_orders\":%s}", i,
			 cases[i].budget ? cases[i].budget : "{\"epsilon\":1,\"delta\":1e-5}",
			 cases[i].accountant, cases[i].orders);
		r = dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key, body);
		cr_assert_eq(r.status, 400, "%s: %ld %s", body, r.status, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), cases[i].field,
				 "%s: %s", body, r.body);
		dpg_resp_free(&r);
		snprintf(body, sizeof(body), "/v1/datasets/f%zu", i);
		dpg_expect_status(&srv, "GET", body, srv.admin_key, NULL, 404);
	}
}

/* ---- the work of an rdp pricing (DPG_MAX_RDP_WORK) ----------------------- */

/* A body {"event": the composition of n distinct Poisson-sampled Gaussians}
 * with `orders` (n_orders consecutive, the highest `top`) when n_orders > 0. */
static char *sampled_body(size_t n, double q, double sigma, size_t n_orders, double top)
{
	json_t *evs = json_array(), *body, *o;
	char *s;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(evs, json_pack("{s:s, s:f, s:{s:s, s:f}}", "type",
						     "poisson_sampled", "sampling_probability",
						     q + 1e-7 * (double)i, "event", "type", "gaussian",
						     "noise_multiplier", sigma));
	body = json_pack("{s:{s:s, s:o}}", "event", "type", "composed", "events", evs);
	if (n_orders) {
		o = json_array();
		for (size_t i = 0; i < n_orders; i++)
			json_array_append_new(o, json_real(top - (double)i));
		json_object_set_new(body, "orders", o);
	}
	s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	cr_assert_not_null(s);
	return s;
}

static double wall_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Expects r to be a 422 problem naming `field`; frees r. */
static void expect_422_at(dpg_resp *r, const char *field)
{
	cr_assert_eq(r->status, 422, "%s", r->body);
	cr_assert_str_eq(json_string_value(json_object_get(r->json, "field")), field, "%s",
			 r->body);
	dpg_resp_free(r);
}

/*
 * The keyless /v1/accountant/rdp: 256 orders just below 1e5 on one sampled
 * Gaussian took seconds (hours at 1365 of them, at orders near 1e6) and
 * held a public slot all along; now refused at /orders at once.  Orders
 * above 1e5 are +infinity (null), computed at no cost.
 */
Test(api, rdp_pricing_work_is_bounded_on_the_public_route)
{
	char *body = sampled_body(1, 0.01, 1.0, DPG_MAX_ORDERS, 1e5);
	double t0 = wall_now();
	dpg_resp r = dpg_call(&srv, "POST", "/v1/accountant/rdp", NULL, body);
	json_t *rdp;

	expect_422_at(&r, "/orders");
	free(body);
	body = sampled_body(1365, 0.01, 1.0, DPG_MAX_ORDERS, 1e6);
	r = dpg_call(&srv, "POST", "/v1/accountant/rdp", NULL, body);
	cr_assert_eq(r.status, 200, "%.300s", r.body);
	rdp = json_object_get(r.json, "rdp");
	cr_assert_eq(json_array_size(rdp), DPG_MAX_ORDERS);
	for (size_t i = 0; i < DPG_MAX_ORDERS; i++)
		cr_assert(json_is_null(json_array_get(rdp, i)), "%.300s", r.body);
	dpg_resp_free(&r);
	free(body);
	/* 1000 distinct ones at the default orders: the composition. */
	body = sampled_body(1000, 0.01, 0.7, 0, 0);
	r = dpg_call(&srv, "POST", "/v1/accountant/rdp", NULL, body);
	expect_422_at(&r, "/event");
	body = realloc(body, strlen(body) + 32);
	cr_assert_not_null(body);
	strcpy(strrchr(body, '}'), ",\"delta\":1e-5}");
	r = dpg_call(&srv, "POST", "/v1/accountant/epsilon", NULL, body);
	expect_422_at(&r, "/event");
	free(body);
	cr_assert_lt(wall_now() - t0, 5.0, "each answered at once, not after seconds");
}

/* POSTs an rdp dataset `id` (budget 10, 1e-5) with filter_orders `orders`,
 * which it releases: the answer. */
static dpg_resp post_rdp_dataset(const char *id, json_t *orders)
{
	char body[4096], *text = json_dumps(orders, JSON_COMPACT);

	json_decref(orders);
	snprintf(body, sizeof(body), "{\"id\":\"%s\",\"budget\":{\"epsilon\":10,\"delta\":1e-5},"
		 "\"accountant\":\"rdp\",\"filter_orders\":%s}", id, text);
	free(text);
	return dpg_call(&srv, "POST", "/v1/datasets", srv.admin_key, body);
}

/*
 * A dataset's filter orders: refused at creation when one sampled Gaussian
 * would be too costly there (nothing made); where one is not but the
 * event's composition is, its dry run and its charge are refused at
 * /event, nothing charged.
 */
Test(api, rdp_filter_orders_and_events_are_bounded_in_work)
{
	json_t *o = json_array();
	char *ev;
	dpg_resp r;

	for (int i = 0; i < DPG_MAX_FILTER_ORDERS; i++)
		json_array_append_new(o, json_real(99968.5 + i));
	r = post_rdp_dataset("hw", o);
	expect_422_at(&r, "/filter_orders");
	dpg_expect_status(&srv, "GET", "/v1/datasets/hw", srv.admin_key, NULL, 404);

	/* 32 integer orders below 1e5: 3.2e6 units a sampled Gaussian. */
	o = json_array();
	for (int i = DPG_MAX_FILTER_ORDERS - 1; i >= 0; i--)
		json_array_append_new(o, json_real(1e5 - i));
	r = post_rdp_dataset("hi", o);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	ev = sampled_body(2, 0.01, 1.0, 0, 0);
	r = dpg_call(&srv, "POST", "/v1/datasets/hi/dry-run", srv.admin_key, ev);
	expect_422_at(&r, "/event");
	r = dpg_call(&srv, "POST", "/v1/datasets/hi/charges", srv.admin_key, ev);
	expect_422_at(&r, "/event");
	free(ev);
	r = dpg_call(&srv, "GET", "/v1/datasets/hi/budget", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.0, "%s", r.body);
	dpg_resp_free(&r);

	/* The default filter orders: 1365 distinct ones took 6.3 s. */
	dpg_make_dataset(&srv, "dw", 10.0, 1e-5, "rdp");
	ev = sampled_body(1365, 0.01, 0.7, 0, 0);
	r = dpg_call(&srv, "POST", "/v1/datasets/dw/dry-run", srv.admin_key, ev);
	expect_422_at(&r, "/event");
	free(ev);
}
