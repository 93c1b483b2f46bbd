/*
 * test_mechanisms.c: budget-charged mechanism releases, CSV uploads and
 * hosted-table queries, through HTTP against the real binary.
 *
 * What is checked is the contract of DESIGN.md: an answer is
 * sent only with a durable charge (ledger row, budget moved by the priced
 * cost, the event in the answer is the one charged); an Idempotency-Key
 * replays the stored output and charges once; refused requests charge and
 * reveal nothing; no route serves raw rows.  Expected costs on the basic
 * ledger come from the closed forms (epsilon = a D for discrete Laplace,
 * ln(1 + k (1 - p) / p) for randomized response, epsilon for selection).
 * The noisy outputs' distributions are tested in tests/mechanisms.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <sqlite3.h>

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

TestSuite(mechanisms, .init = setup, .fini = teardown, .timeout = 300);

/* ---- helpers ------------------------------------------------------------- */

static void make_ds(const char *id, const char *accountant, const char *neighbor, double eps,
		    double delta)
{
	char body[512];

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":%.17g,\"delta\":%.17g},\"accountant\":\"%s\","
		 "\"neighbor\":\"%s\"}",
		 id, eps, delta, accountant, neighbor);
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key, body, 201);
}

static dpg_budget budget_of(const char *id)
{
	return dpg_budget_of(&srv, id);
}

static void assert_nothing_charged(const char *id, dpg_budget before, const char *what)
{
	dpg_budget after = budget_of(id);

	cr_assert_eq(after.charges, before.charges, "%s: charged", what);
	cr_assert_eq(after.ledger_rows, before.ledger_rows, "%s: ledger row written", what);
	cr_assert_eq(after.spent_eps, before.spent_eps, "%s: epsilon moved", what);
	cr_assert_eq(after.spent_delta, before.spent_delta, "%s: delta moved", what);
}

static dpg_resp post(const char *path, const char *key, const char *body, const char *idem)
{
	char hdr[256];
	const char *headers[] = {hdr, NULL};
	dpg_resp r;

	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", idem ? idem : "");
	cr_assert_eq(dpg_http(&srv, "POST", path, key, body, strlen(body), idem ? headers : NULL,
			      &r), 0, "POST %s: no answer", path);
	return r;
}

static dpg_resp mech(const char *ds, const char *name, const char *body, const char *idem)
{
	char path[256];

	snprintf(path, sizeof(path), "/v1/datasets/%s/mechanisms/%s", ds, name);
	return post(path, srv.admin_key, body, idem);
}

/* The ledger row `seq` of dataset `id` (new reference), or NULL. */
static json_t *ledger_row(const char *id, json_int_t seq)
{
	char path[256];
	json_t *row = NULL, *e;
	size_t i;
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/ledger?limit=1000", id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	json_array_foreach(json_object_get(r.json, "entries"), i, e) {
		if (json_integer_value(json_object_get(e, "seq")) == seq)
			row = json_incref(e);
	}
	dpg_resp_free(&r);
	return row;
}

/* The cost the dataset's filter gives `event` (POST /dry-run). */
static double dry_run_cost(const char *id, const json_t *event, double delta_share)
{
	char path[256];
	json_t *body = json_pack("{s:O}", "event", event);
	char *text;
	double c;
	dpg_resp r;

	if (delta_share > 0)
		json_object_set_new(body, "delta", json_real(delta_share));
	text = json_dumps(body, JSON_COMPACT);
	snprintf(path, sizeof(path), "/v1/datasets/%s/dry-run", id);
	r = post(path, srv.admin_key, text, NULL);
	cr_assert_eq(r.status, 200, "dry-run: %s", r.body);
	c = dpg_num(r.json, "cost.epsilon");
	dpg_resp_free(&r);
	free(text);
	json_decref(body);
	return c;
}

static double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	cr_assert(json_is_number(v), "no number at %s", key);
	return json_number_value(v);
}

static bool close_rel(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fmax(fabs(a), fabs(b));
}

/* ---- every mechanism on rdp and basic ledgers ------------------------------- */

enum shape { REAL, REALS, INT, INTS, INDEX, LABELS };

struct mech_case {
	const char *name;
	const char *body;
	enum shape shape;
	size_t n;               /* vector length / number of candidates */
	const char *event_type;
	double delta_share;     /* what a basic ledger is priced at (0: pure) */
};

static const struct mech_case cases[] = {
	{"laplace", "{\"value\":12.5,\"sensitivity\":1,\"epsilon\":0.5}", REAL, 1,
	 "discrete_laplace", 0},
	{"laplace", "{\"values\":[1,2,3,4],\"sensitivity\":2,\"scale\":8}", REALS, 4, "epsilon_delta",
	 0},
	{"gaussian", "{\"value\":3.5,\"sensitivity\":1,\"epsilon\":0.5,\"delta\":1e-6}", REAL, 1,
	 "discrete_gaussian", 1e-6},
	{"gaussian", "{\"values\":[1,2,3],\"sensitivity\":1,\"sigma\":10,\"ledger_delta\":1e-7}", REALS,
	 3, "zcdp", 1e-7},
	{"discrete_laplace", "{\"value\":40,\"sensitivity\":1,\"epsilon\":0.25}", INT, 1,
	 "discrete_laplace", 0},
	{"discrete_laplace", "{\"values\":[40,50],\"sensitivity\":2,\"scale\":8}", INTS, 2,
	 "epsilon_delta", 0},
	{"discrete_gaussian", "{\"value\":7,\"sensitivity\":1,\"sigma\":6,\"ledger_delta\":1e-6}", INT,
	 1, "discrete_gaussian", 1e-6},
	{"discrete_gaussian", "{\"values\":[7,8,9],\"sensitivity\":2,\"sigma\":9,\"ledger_delta\":1e-6}",
	 INTS, 3, "zcdp", 1e-6},
	{"exponential", "{\"scores\":[1,5,2],\"sensitivity\":1,\"epsilon\":0.5}", INDEX, 3,
	 "exponential_mechanism", 0},
	{"exponential", "{\"scores\":[1,5,2],\"sensitivity\":1,\"epsilon\":0.5,\"monotone\":true}",
	 INDEX, 3, "exponential_mechanism", 0},
	{"permute_and_flip", "{\"scores\":[1,5,2,0],\"sensitivity\":1,\"epsilon\":0.4}", INDEX, 4,
	 "permute_and_flip", 0},
	{"report_noisy_max", "{\"scores\":[1,5,2],\"sensitivity\":1,\"noise\":\"gumbel\",\"epsilon\":0.5}",
	 INDEX, 3, "exponential_mechanism", 0},
	{"report_noisy_max", "{\"scores\":[1,5,2],\"sensitivity\":1,\"noise\":\"laplace\",\"epsilon\":0.5}",
	 INDEX, 3, "epsilon_delta", 0},
	{"report_noisy_max",
	 "{\"scores\":[1,5,2],\"sensitivity\":1,\"noise\":\"gaussian\",\"sigma\":20,\"ledger_delta\":1e-6}",
	 INDEX, 3, "zcdp", 1e-6},
	{"randomized_response", "{\"value\":2,\"num_buckets\":4,\"epsilon\":0.5}", INT, 1,
	 "randomized_response", 0},
	{"label_em", "{\"labels\":[0,1,1,0,1,0,0,1],\"epsilon\":1}", LABELS, 8,
	 "randomized_response", 0},
};

static void check_shape(const struct mech_case *c, const json_t *out)
{
	json_t *v;
	size_t i;

	switch (c->shape) {
	case REAL:
		cr_assert(json_is_number(out) && isfinite(json_number_value(out)), "%s", c->body);
		break;
	case INT:
		cr_assert(json_is_integer(out), "%s", c->body);
		if (!strcmp(c->name, "randomized_response"))
			cr_assert(json_integer_value(out) >= 0 && json_integer_value(out) < 4);
		break;
	case INDEX:
		cr_assert(json_is_integer(out), "%s", c->body);
		cr_assert(json_integer_value(out) >= 0 && (size_t)json_integer_value(out) < c->n);
		break;
	case REALS:
	case INTS:
	case LABELS:
		cr_assert(json_is_array(out) && json_array_size(out) == c->n, "%s", c->body);
		json_array_foreach(out, i, v) {
			if (c->shape == REALS)
				cr_assert(json_is_number(v) && isfinite(json_number_value(v)));
			else
				cr_assert(json_is_integer(v));
			if (c->shape == LABELS)
				cr_assert(json_integer_value(v) == 0 || json_integer_value(v) == 1);
		}
		break;
	}
}

/* The basic ledger's closed-form price of a pure-DP event. */
static double closed_form_epsilon(const json_t *ev)
{
	const char *type = json_string_value(json_object_get(ev, "type"));

	if (!strcmp(type, "discrete_laplace"))
		return num(ev, "noise_parameter") * num(ev, "sensitivity");
	if (!strcmp(type, "randomized_response")) {
		double p = num(ev, "noise_parameter"), k = num(ev, "num_buckets");

		return log1p(k * (1.0 - p) / p);
	}
	if (!strcmp(type, "epsilon_delta"))
		return num(ev, "epsilon");
	return num(ev, "epsilon"); /* exponential_mechanism, permute_and_flip */
}

static void run_case(const struct mech_case *c, size_t i, const char *accountant)
{
	char id[64];
	dpg_budget before, after;
	json_t *ev, *row;
	json_int_t charge;
	double cost;
	dpg_resp r;

	/* A fresh dataset per case: the spent epsilon is then this release's. */
	snprintf(id, sizeof(id), "%s_%zu", accountant, i);
	make_ds(id, accountant, "replace", 50, 1e-5);
	before = budget_of(id);
	r = mech(id, c->name, c->body, NULL);
	cr_assert_eq(r.status, 201, "%s %s on %s: %ld %s", c->name, c->body, accountant, r.status,
		     r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "mechanism")), c->name);
	check_shape(c, json_object_get(r.json, "output"));
	ev = json_object_get(r.json, "event");
	cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), c->event_type, "%s: %s",
			 c->body, r.body);
	charge = json_integer_value(json_object_get(r.json, "charge_id"));
	cost = dpg_num(r.json, "cost.epsilon");
	cr_assert_gt(cost, 0.0);

	/* The ledger row is the charge, with the answer's event. */
	after = budget_of(id);
	cr_assert_eq(after.charges, before.charges + 1);
	cr_assert_eq(after.ledger_rows, before.ledger_rows + 1);
	row = ledger_row(id, charge);
	cr_assert_not_null(row, "no ledger row %lld", (long long)charge);
	cr_assert_str_eq(json_string_value(json_object_get(row, "kind")), "charge");
	cr_assert(json_equal(json_object_get(row, "event"), ev), "ledger event differs: %s", r.body);
	json_decref(row);

	/* The budget moved by exactly the cost, which is the filter's price of
	 * the event in the answer. */
	cr_assert_eq(after.spent_eps, cost, "%s: spent %.17g, cost %.17g", c->body, after.spent_eps,
		     cost);
	cr_assert_eq(dpg_num(r.json, "budget.spent.epsilon"), cost);
	cr_assert_eq(dry_run_cost(id, ev, c->delta_share), cost, "%s", c->body);
	if (!strcmp(accountant, "basic")) {
		cr_assert_eq(after.spent_delta, c->delta_share, "%s", c->body);
		if (c->delta_share == 0) {
			double exact = closed_form_epsilon(ev);

			/* Rounded up, by a few ulps at most. */
			cr_assert_geq(cost, exact * (1 - 4 * DBL_EPSILON), "%s", c->body);
			cr_assert(close_rel(cost, exact, 8 * DBL_EPSILON), "%s: %.17g vs %.17g",
				  c->body, cost, exact);
		}
	}
	dpg_resp_free(&r);
}

Test(mechanisms, every_mechanism_on_rdp_and_basic)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_case(&cases[i], i, "rdp");
		run_case(&cases[i], i, "basic");
	}
}

Test(mechanisms, requested_epsilon_is_what_basic_charges)
{
	/* epsilon given in the body: the charge is that epsilon up to the
	 * mechanisms' documented upward rounding (2^-38 absolute at most). */
	static const struct { const char *name, *body; double eps; } pure[] = {
		{"laplace", "{\"value\":1,\"sensitivity\":3,\"epsilon\":0.3}", 0.3},
		{"discrete_laplace", "{\"value\":1,\"sensitivity\":2,\"epsilon\":0.7}", 0.7},
		{"exponential", "{\"scores\":[0,1],\"sensitivity\":1,\"epsilon\":0.2}", 0.2},
		{"randomized_response", "{\"value\":0,\"num_buckets\":3,\"epsilon\":1.5}", 1.5},
	};

	make_ds("pure", "basic", "replace", 100, 0);
	for (size_t i = 0; i < sizeof(pure) / sizeof(pure[0]); i++) {
		dpg_resp r = mech("pure", pure[i].name, pure[i].body, NULL);

		cr_assert_eq(r.status, 201, "%s", r.body);
		cr_assert(fabs(dpg_num(r.json, "cost.epsilon") - pure[i].eps) <= 1e-9, "%s: %s",
			  pure[i].name, r.body);
		dpg_resp_free(&r);
	}
}

Test(mechanisms, zcdp_ledger_prices_every_event)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char id[64];
		dpg_resp r;

		snprintf(id, sizeof(id), "z_%zu", i);
		make_ds(id, "zcdp", "replace", 50, 1e-5);
		r = mech(id, cases[i].name, cases[i].body, NULL);
		cr_assert_eq(r.status, 201, "%s on zcdp: %s", cases[i].body, r.body);
		cr_assert_eq(budget_of(id).spent_eps, dpg_num(r.json, "cost.epsilon"));
		dpg_resp_free(&r);
	}
}

Test(mechanisms, randomized_response_needs_replace)
{
	dpg_budget before;
	dpg_resp r;

	make_ds("addrem", "rdp", "add_remove", 5, 1e-5);
	before = budget_of("addrem");
	r = mech("addrem", "randomized_response", "{\"value\":1,\"num_buckets\":4,\"epsilon\":1}", NULL);
	cr_assert_eq(r.status, 422, "%s", r.body);
	cr_assert_null(json_object_get(r.json, "output"));
	dpg_resp_free(&r);
	assert_nothing_charged("addrem", before, "rr on add_remove");
}

/* ---- idempotency -------------------------------------------------------------- */

Test(mechanisms, idempotency_key_replays_the_stored_output)
{
	const char *body = "{\"values\":[10,20,30],\"sensitivity\":1,\"epsilon\":0.5}";
	dpg_budget before, after;
	dpg_resp a, b, c;

	make_ds("idem", "basic", "add_remove", 10, 0);
	before = budget_of("idem");
	a = mech("idem", "laplace", body, "retry-1");
	cr_assert_eq(a.status, 201, "%s", a.body);
	b = mech("idem", "laplace", body, "retry-1");
	cr_assert_eq(b.status, 201, "%s", b.body);
	/* Byte for byte: the same noisy values, the same charge. */
	cr_assert_str_eq(a.body, b.body);
	after = budget_of("idem");
	cr_assert_eq(after.charges, before.charges + 1);
	cr_assert_eq(after.spent_eps, dpg_num(a.json, "cost.epsilon"));

	/* A different body with the same key is refused and charges nothing. */
	c = mech("idem", "laplace", "{\"values\":[10,20,31],\"sensitivity\":1,\"epsilon\":0.5}",
		 "retry-1");
	cr_assert_eq(c.status, 422, "%s", c.body);
	cr_assert_str_eq(json_string_value(json_object_get(c.json, "field")), "Idempotency-Key");
	cr_assert_null(json_object_get(c.json, "output"));
	assert_nothing_charged("idem", after, "idempotency mismatch");
	dpg_resp_free(&c);

	/* So is the same body on another mechanism's path. */
	c = mech("idem", "gaussian", body, "retry-1");
	cr_assert_eq(c.status, 422, "%s", c.body);
	dpg_resp_free(&c);

	/* A new key is a new release with fresh noise. */
	c = mech("idem", "laplace", body, "retry-2");
	cr_assert_eq(c.status, 201);
	cr_assert_eq(budget_of("idem").charges, after.charges + 1);
	dpg_resp_free(&a);
	dpg_resp_free(&b);
	dpg_resp_free(&c);
}

struct racer {
	const char *body;
	dpg_resp r;
};

static void *race_one(void *arg)
{
	struct racer *rc = arg;
	const char *headers[] = {"Idempotency-Key: same-key", NULL};

	if (dpg_http(&srv, "POST", "/v1/datasets/race/mechanisms/gaussian", srv.admin_key, rc->body,
		     strlen(rc->body), headers, &rc->r) < 0)
		rc->r.status = -1;
	return NULL;
}

Test(mechanisms, concurrent_retries_charge_once_and_agree)
{
	/* Eight clients send the same keyed request at once: each sampled its
	 * own noise, but exactly one charge is admitted and every answer is
	 * that charge's stored output. */
	const char *body = "{\"values\":[1,2,3,4,5,6,7,8],\"sensitivity\":1,\"sigma\":3}";
	struct racer rs[8];
	pthread_t th[8];

	make_ds("race", "rdp", "add_remove", 50, 1e-5);
	for (int i = 0; i < 8; i++) {
		rs[i].body = body;
		pthread_create(&th[i], NULL, race_one, &rs[i]);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(rs[i].r.status, 201, "client %d: %ld %s", i, rs[i].r.status, rs[i].r.body);
		cr_assert_str_eq(rs[i].r.body, rs[0].r.body, "client %d got a different output", i);
	}
	cr_assert_eq(budget_of("race").charges, 1);
	for (int i = 0; i < 8; i++)
		dpg_resp_free(&rs[i].r);
}

Test(mechanisms, replay_survives_an_exhausted_budget)
{
	const char *body = "{\"value\":1,\"sensitivity\":1,\"epsilon\":1}";
	dpg_resp a, b, c;

	make_ds("tight", "basic", "add_remove", 1, 0);
	a = mech("tight", "laplace", body, "k");
	cr_assert_eq(a.status, 201, "%s", a.body);
	c = mech("tight", "laplace", body, NULL);
	cr_assert_eq(c.status, 409, "%s", c.body);
	b = mech("tight", "laplace", body, "k");
	cr_assert_eq(b.status, 201);
	cr_assert_str_eq(a.body, b.body);
	dpg_resp_free(&a);
	dpg_resp_free(&b);
	dpg_resp_free(&c);
}

/* ---- refusals ------------------------------------------------------------------ */

Test(mechanisms, bad_inputs_charge_nothing)
{
	static char big[1200000];
	static const struct { const char *name, *body; long status; const char *field; } bad[] = {
		{"exponential", "{\"scores\":[],\"sensitivity\":1,\"epsilon\":1}", 400, "/scores"},
		{"exponential", "{\"scores\":[1,\"NaN\"],\"sensitivity\":1,\"epsilon\":1}", 400, "/scores/1"},
		{"exponential", "{\"scores\":[1,2],\"sensitivity\":1,\"epsilon\":1e999}", 400, NULL},
		{"permute_and_flip", "{\"scores\":[1,2],\"sensitivity\":0,\"epsilon\":1}", 400,
		 "/sensitivity"},
		{"laplace", "{\"value\":1,\"sensitivity\":0,\"epsilon\":1}", 400, "/sensitivity"},
		{"laplace", "{\"value\":1,\"sensitivity\":-1,\"epsilon\":1}", 400, "/sensitivity"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":0}", 400, "/epsilon"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":-0.5}", 400, "/epsilon"},
		{"laplace", "{\"value\":\"x\",\"sensitivity\":1,\"epsilon\":1}", 400, "/value"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"color\":1}", 400, "/color"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1}", 400, "/delta"},
		{"discrete_laplace", "{\"value\":1.5,\"sensitivity\":1,\"epsilon\":1}", 400, "/value"},
		{"randomized_response", "{\"value\":4,\"num_buckets\":4,\"epsilon\":1}", 400, "/value"},
		{"label_em", "{\"labels\":[0,2],\"epsilon\":1}", 400, "/labels/1"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"ledger_delta\":2}", 400,
		 "/ledger_delta"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"note\":7}", 400, "/note"},
		/* A Gaussian release on a basic ledger needs a delta share. */
		{"gaussian", "{\"value\":1,\"sensitivity\":1,\"sigma\":5}", 422, "/ledger_delta"},
		{"no_such_mechanism", "{\"value\":1}", 404, NULL},
	};
	dpg_budget before;
	size_t off = 0;
	dpg_resp r;

	make_ds("bad", "basic", "replace", 10, 1e-5);
	before = budget_of("bad");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = mech("bad", bad[i].name, bad[i].body, NULL);
		cr_assert_eq(r.status, bad[i].status, "%s %s: %ld %s", bad[i].name, bad[i].body,
			     r.status, r.body);
		if (bad[i].field)
			cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
					 bad[i].field, "%s: %s", bad[i].body, r.body);
		cr_assert_null(json_object_get(r.json, "output"), "%s", r.body);
		dpg_resp_free(&r);
	}
	/* One value more than DPG_MAX_VECTOR_LEN (100000). */
	off += (size_t)snprintf(big, sizeof(big), "{\"sensitivity\":1,\"epsilon\":1,\"values\":[0");
	for (int i = 1; i < 100001; i++)
		off += (size_t)snprintf(big + off, sizeof(big) - off, ",%d", i % 10);
	snprintf(big + off, sizeof(big) - off, "]}");
	r = mech("bad", "laplace", big, NULL);
	cr_assert_eq(r.status, 400, "%ld %.200s", r.status, r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/values");
	dpg_resp_free(&r);
	/* An unknown dataset. */
	r = mech("nope", "laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1}", NULL);
	cr_assert_eq(r.status, 404, "%s", r.body);
	dpg_resp_free(&r);
	assert_nothing_charged("bad", before, "bad inputs");
}

/*
 * A basic ledger's refusal of a release without a delta share names, in its
 * field and its detail, the share this route takes: "ledger_delta" (the
 * mechanism's own "delta" is its calibration, not the ledger's share).
 */
Test(mechanisms, a_basic_ledger_refusal_names_ledger_delta)
{
	const char *detail;
	dpg_resp r;

	make_ds("bd", "basic", "replace", 10, 1e-5);
	r = mech("bd", "gaussian", "{\"value\":1,\"sensitivity\":1,\"sigma\":5}", NULL);
	cr_assert_eq(r.status, 422, "%ld %s", r.status, r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/ledger_delta");
	detail = json_string_value(json_object_get(r.json, "detail"));
	cr_assert(detail && strstr(detail, "\"ledger_delta\"") && !strstr(detail, "\"delta\""),
		  "%s", r.body);
	dpg_resp_free(&r);
}

Test(mechanisms, over_budget_reveals_nothing)
{
	const char *body = "{\"value\":100,\"sensitivity\":1,\"epsilon\":0.75}";
	dpg_budget after_first;
	dpg_resp a, b;

	make_ds("small", "basic", "add_remove", 1, 0);
	a = mech("small", "discrete_laplace", body, NULL);
	cr_assert_eq(a.status, 201, "%s", a.body);
	after_first = budget_of("small");
	b = mech("small", "discrete_laplace", body, "never-admitted");
	cr_assert_eq(b.status, 409, "%s", b.body);
	cr_assert_null(json_object_get(b.json, "output"));
	cr_assert_null(json_object_get(b.json, "event"));
	cr_assert(fabs(dpg_num(b.json, "remaining.epsilon") - 0.25) < 1e-9, "%s", b.body);
	assert_nothing_charged("small", after_first, "over budget");
	dpg_resp_free(&b);
	/* The refused key was not stored: it is still refused, not replayed. */
	b = mech("small", "discrete_laplace", body, "never-admitted");
	cr_assert_eq(b.status, 409, "%s", b.body);
	dpg_resp_free(&a);
	dpg_resp_free(&b);
}

Test(mechanisms, analysts_scoped_viewers_refused)
{
	char analyst[160], viewer[160], path[128];
	dpg_resp r;

	make_ds("scoped", "rdp", "add_remove", 5, 1e-5);
	make_ds("other", "rdp", "add_remove", 5, 1e-5);
	dpg_make_key(&srv, "analyst", "scoped", analyst, sizeof(analyst));
	dpg_make_key(&srv, "viewer", NULL, viewer, sizeof(viewer));
	snprintf(path, sizeof(path), "/v1/datasets/scoped/mechanisms/laplace");
	r = post(path, analyst, "{\"value\":1,\"sensitivity\":1,\"epsilon\":0.1}", NULL);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	r = post(path, viewer, "{\"value\":1,\"sensitivity\":1,\"epsilon\":0.1}", NULL);
	cr_assert_eq(r.status, 403, "%s", r.body);
	dpg_resp_free(&r);
	r = post("/v1/datasets/other/mechanisms/laplace", analyst,
		 "{\"value\":1,\"sensitivity\":1,\"epsilon\":0.1}", NULL);
	cr_assert_eq(r.status, 403, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(budget_of("other").charges, 0);
}

/* ---- hosted tables ------------------------------------------------------------- */

/* Distinctive cell values that must never appear in any answer. */
static const char *const table_csv =
	"age,income,city\n"
	"34,51234.5,Xylopolis\n"
	"29,48000,Quokkaville\n"
	"51,99999.25,Xylopolis\n"
	"45,61000,Zanzibarra\n"
	"38,57321.75,Quokkaville\n";
static const char *const secrets[] = {"Zanzibarra", "51234.5", "99999.25", "57321.75", NULL};
/* table_csv's kinds, declared: a query that needs a column's kind needs it
 * declared (kinds inferred from the rows are private). */
#define TABLE_DECL "?columns=age:numeric,income:numeric,city:categorical"

static dpg_resp put_csv(const char *id, const char *query, const char *csv, size_t len,
			const char *key)
{
	const char *headers[] = {"Content-Type: text/csv", NULL};
	char path[512];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/data%s", id, query ? query : "");
	cr_assert_eq(dpg_http(&srv, "PUT", path, key, csv, len, headers, &r), 0, "PUT %s", path);
	return r;
}

static void assert_no_raw_rows(const dpg_resp *r)
{
	for (const char *const *s = secrets; *s; s++)
		cr_assert(!strstr(r->body, *s), "answer reveals a raw cell (%s): %s", *s, r->body);
}

/* The number of table files an upload of dataset `id` wrote that are in
 * <data-dir>/tables: <id>.<24 hex>.csv, or <id>.csv from older servers. */
static size_t table_files(const char *id)
{
	char path[600];
	struct dirent *e;
	size_t n = 0, idn = strlen(id);
	DIR *d;

	snprintf(path, sizeof(path), "%s/data/tables", srv.dir);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (strncmp(e->d_name, id, idn) != 0 || e->d_name[idn] != '.' ||
		    len < idn + 4 || strcmp(e->d_name + len - 4, ".csv") != 0)
			continue;
		n += len == idn + 4 || (len == idn + 1 + 24 + 4 &&
					strspn(e->d_name + idn + 1, "0123456789abcdef") == 24);
	}
	closedir(d);
	return n;
}

/* The table files one linked upload leaves in the data directory: one
 * on SQLite; none on a shared database, which holds the bytes itself. */
static size_t files_per_table(void)
{
	return dpg_test_pg() ? 0 : 1;
}

static bool table_file_exists(const char *id)
{
	return table_files(id) > 0;
}

static size_t temp_files(void)
{
	char path[600];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/data/tables", srv.dir);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(d);
	return n;
}

static dpg_resp query(const char *id, const char *body)
{
	char path[256];

	snprintf(path, sizeof(path), "/v1/datasets/%s/queries", id);
	return post(path, srv.admin_key, body, NULL);
}

Test(mechanisms, csv_upload_and_metadata)
{
	dpg_resp r;
	json_t *cols;

	make_ds("census", "basic", "add_remove", 10, 0);
	r = put_csv("census", NULL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "kind")), "table");
	cr_assert_eq(dpg_num(r.json, "rows"), 5);
	cr_assert_eq(dpg_num(r.json, "bytes"), (double)strlen(table_csv));
	cols = json_object_get(r.json, "columns");
	cr_assert_eq(json_array_size(cols), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 0), "name")), "age");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 0), "kind")), "numeric");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 2), "kind")),
			 "categorical");
	assert_no_raw_rows(&r);
	dpg_resp_free(&r);
	cr_assert_eq(table_files("census"), files_per_table());
	cr_assert_eq(temp_files(), 0);

	r = dpg_call(&srv, "GET", "/v1/datasets/census/data", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "rows"), 5);
	cr_assert_eq(json_array_size(json_object_get(r.json, "columns")), 3);
	cr_assert_eq(dpg_num(r.json, "bytes"), (double)strlen(table_csv));
	assert_no_raw_rows(&r);
	dpg_resp_free(&r);
	/* The file's size tells about the values (12 or 120 is a byte more),
	 * and an undeclared row count and inferred kinds about the rows: a
	 * viewer sees none of them (metadata_shows_what_was_declared). */
	{
		char viewer[160];

		dpg_make_key(&srv, "viewer", "census", viewer, sizeof(viewer));
		r = dpg_call(&srv, "GET", "/v1/datasets/census/data", viewer, NULL);
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_null(json_object_get(r.json, "rows"), "%s", r.body);
		cr_assert_null(json_object_get(r.json, "columns"), "%s", r.body);
		cr_assert_null(json_object_get(r.json, "bytes"), "%s", r.body);
		dpg_resp_free(&r);
	}
	/* Uploading is an admin's; nothing else serves the file. */
	{
		char analyst[160];

		dpg_make_key(&srv, "analyst", "census", analyst, sizeof(analyst));
		r = put_csv("census", NULL, table_csv, strlen(table_csv), analyst);
		cr_assert_eq(r.status, 403, "%s", r.body);
		dpg_resp_free(&r);
	}
	dpg_expect_status(&srv, "GET", "/v1/datasets/census/data/rows", srv.admin_key, NULL, 404);
	r = dpg_call(&srv, "GET", "/v1/datasets/census/queries", srv.admin_key, NULL);
	cr_assert(r.status == 405 || r.status == 404, "%ld", r.status);
	dpg_resp_free(&r);
}

Test(mechanisms, bad_csv_stores_nothing)
{
	static const struct { const char *query, *csv, *field_prefix; } bad[] = {
		{NULL, "a,b\n1,2\n3\n", "/csv/line/3"},                       /* ragged */
		{NULL, "a,b\n1,2\n3,4,5\n", "/csv/line/3"},                   /* ragged */
		{"?columns=a:numeric,b:categorical", "a,b\n1,x\nfoo,y\n", "/csv/line/3"},
		{"?columns=a:numeric", "a,b\n1,2\n", "/csv"},                 /* b undeclared */
		{"?columns=a:numeric,b:numeric,c:numeric", "a,b\n1,2\n", "columns"}, /* c missing */
		{"?columns=a:number", "a\n1\n", "columns"},
		{"?columns=a:numeric,a:numeric", "a\n1\n", "columns"},
		{NULL, "a,b\n\"1,2\n", "/csv/line/2"},                        /* open quote */
		{NULL, "a,b\n1,2\n3,4\"\n", "/csv/line/3"},                   /* stray quote */
		{NULL, "", "/csv"},
		{NULL, "a,b\n", "/csv"},                                      /* no rows */
		{NULL, "q\xff,b\n1,2\n", "/csv/line/1"},                       /* not UTF-8 */
		{NULL, "a,b\n1,\xe9t\xe9\n", "/csv/line/2"},                   /* Latin-1 cell */
		{"?columns=a%FF:numeric", "a\n1\n", "columns"},               /* not UTF-8 */
		{NULL, "a\n1\r2\n", "/csv/line/2"},                           /* a lone CR */
		{NULL, "a,b\n1,2\r3,4\n", "/csv/line/2"},
		{"?columns=a:numeric,b:numeric", "a,b\n1,2\r3,4\n", "/csv/line/2"},
		{NULL, "a,b\r1,2\r3,4\r", "/csv/line/1"},                      /* CR-only lines */
	};
	size_t cols = 1100, off = 0;
	char *wide = malloc(cols * 8 + 64);
	dpg_resp r;

	make_ds("messy", "basic", "add_remove", 10, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *field;

		r = put_csv("messy", bad[i].query, bad[i].csv, strlen(bad[i].csv), srv.admin_key);
		cr_assert_eq(r.status, 400, "case %zu: %ld %s", i, r.status, r.body);
		field = json_string_value(json_object_get(r.json, "field"));
		cr_assert(field && !strncmp(field, bad[i].field_prefix, strlen(bad[i].field_prefix)),
			  "case %zu: field %s, want %s...", i, field ? field : "(none)",
			  bad[i].field_prefix);
		dpg_resp_free(&r);
	}
	/* A duplicate name of 70 three-byte characters: the message quotes it
	 * cut to 64 bytes, mid-character, and is still sent as JSON. */
	{
		char dup[2 * 70 * 3 + 16] = "";

		for (int k = 0; k < 2 * 70; k++)
			strcat(dup, k == 70 ? ",\xe2\x82\xac" : "\xe2\x82\xac");
		strcat(dup, "\n1,2\n");
		r = put_csv("messy", NULL, dup, strlen(dup), srv.admin_key);
		cr_assert_eq(r.status, 400, "%ld %s", r.status, r.body);
		cr_assert_not_null(r.json, "not JSON: %s", r.body);
		cr_assert(strstr(r.body, "appears twice"), "%s", r.body);
		dpg_resp_free(&r);
	}
	/* Too many columns (DPG_MAX_CSV_COLUMNS is 1024). */
	for (size_t j = 0; j < cols; j++)
		off += (size_t)sprintf(wide + off, "%sc%zu", j ? "," : "", j);
	off += (size_t)sprintf(wide + off, "\n");
	for (size_t j = 0; j < cols; j++)
		off += (size_t)sprintf(wide + off, "%s1", j ? "," : "");
	r = put_csv("messy", NULL, wide, off, srv.admin_key);
	cr_assert_eq(r.status, 400, "%ld %.300s", r.status, r.body);
	dpg_resp_free(&r);
	free(wide);

	/* Nothing was stored by any of them. */
	dpg_expect_status(&srv, "GET", "/v1/datasets/messy/data", srv.admin_key, NULL, 404);
	cr_assert(!table_file_exists("messy"));
	cr_assert_eq(temp_files(), 0);

	/* A good table stays in place when a bad one is sent over it. */
	r = put_csv("messy", NULL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	r = put_csv("messy", NULL, "age\n1\n2,3\n", 10, srv.admin_key);
	cr_assert_eq(r.status, 400);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/messy/data", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "rows"), 5);
	dpg_resp_free(&r);
}

Test(mechanisms, archived_dataset_data_cannot_change)
{
	const char *json_hdr[] = {"Content-Type: application/json", NULL};
	dpg_resp r;

	make_ds("retired", "basic", "add_remove", 10, 0);
	r = put_csv("retired", NULL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/retired", srv.admin_key, NULL, 200);

	r = put_csv("retired", NULL, "a\n1\n", 4, srv.admin_key);
	cr_assert_eq(r.status, 409, "%ld %s", r.status, r.body);
	cr_assert(strstr(r.body, "archived"), "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_http(&srv, "PUT", "/v1/datasets/retired/data", srv.admin_key,
			      "{\"builtin\":\"fashion-mnist\"}", 26, json_hdr, &r), 0);
	cr_assert_eq(r.status, 409, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);

	/* Still the first table, still readable. */
	r = dpg_call(&srv, "GET", "/v1/datasets/retired/data", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "kind")), "table");
	cr_assert_eq(dpg_num(r.json, "rows"), 5);
	dpg_resp_free(&r);
}

Test(mechanisms, csv_over_the_size_limit_is_413)
{
	/* DPG_MAX_CSV_BYTES is 64 MiB: announced by Content-Length, refused
	 * before the body is read. */
	size_t len = (64u << 20) + 1;
	char *blob = malloc(len);
	dpg_resp r;
	int rc;

	cr_assert_not_null(blob);
	make_ds("huge", "basic", "add_remove", 10, 0);
	memset(blob, '1', len);
	blob[0] = 'a';
	blob[1] = '\n';
	rc = dpg_http(&srv, "PUT", "/v1/datasets/huge/data", srv.admin_key, blob, len,
		      (const char *const[]){"Content-Type: text/csv", NULL}, &r);
	free(blob);
	if (rc == 0) {
		cr_assert_eq(r.status, 413, "%ld %s", r.status, r.body);
		dpg_resp_free(&r);
	}
	/* (rc < 0: the server closed the connection after its 413, before
	 * curl finished sending; either way nothing is stored.) */
	dpg_expect_status(&srv, "GET", "/v1/datasets/huge/data", srv.admin_key, NULL, 404);
	cr_assert(!table_file_exists("huge"));
}

Test(mechanisms, every_hosted_query)
{
	static const struct {
		const char *body, *mechanism;
		double eps;
	} qs[] = {
		{"{\"query\":\"count\",\"epsilon\":0.5}", "discrete_laplace", 0.5},
		{"{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":0.5}", "laplace", 0.5},
		{"{\"query\":\"mean\",\"column\":\"income\",\"lo\":0,\"hi\":200000,\"epsilon\":1}",
		 "laplace_sum_over_discrete_laplace_count", 1},
		{"{\"query\":\"histogram\",\"column\":\"city\",\"categories\":[\"Xylopolis\",\"Quokkaville\",\"Elsewhere\"],\"epsilon\":0.5}",
		 "discrete_laplace", 0.5},
		{"{\"query\":\"quantile\",\"column\":\"age\",\"q\":0.5,\"lo\":0,\"hi\":100,\"epsilon\":0.5}",
		 "exponential", 0.5},
	};
	dpg_budget before, after;
	dpg_resp r;

	make_ds("hosted", "basic", "add_remove", 20, 0);
	r = put_csv("hosted", TABLE_DECL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		json_t *out, *row;
		double cost;

		before = budget_of("hosted");
		r = query("hosted", qs[i].body);
		cr_assert_eq(r.status, 201, "%s: %s", qs[i].body, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "mechanism")),
				 qs[i].mechanism, "%s", r.body);
		cr_assert(json_is_object(json_object_get(r.json, "event")));
		out = json_object_get(r.json, "output");
		if (i == 0)
			cr_assert(json_is_integer(out));
		if (i == 2)
			cr_assert(json_number_value(out) >= 0 && json_number_value(out) <= 200000);
		if (i == 3) {
			cr_assert_eq(json_object_size(out), 3);
			cr_assert(json_is_integer(json_object_get(out, "Elsewhere")));
		}
		if (i == 4)
			cr_assert(json_number_value(out) >= 0 && json_number_value(out) <= 100);
		assert_no_raw_rows(&r);
		cost = dpg_num(r.json, "cost.epsilon");
		/* Pure DP at the requested epsilon (up to the rounding up of
		 * scales and exponents; the quantile's scores' rounding,
		 * 2^-50 eps (10^7 + 1), is taken at the most rows a table
		 * holds, below 10^-8 eps); the budget moved by exactly that. */
		cr_assert(fabs(cost - qs[i].eps) <= (i == 4 ? 1e-8 : 1e-9) * qs[i].eps,
			  "%s: cost %.17g", qs[i].body, cost);
		after = budget_of("hosted");
		cr_assert_eq(after.charges, before.charges + 1);
		cr_assert(close_rel(after.spent_eps - before.spent_eps, cost, 1e-12), "%s", qs[i].body);
		cr_assert_eq(after.spent_delta, 0.0);
		row = ledger_row("hosted", json_integer_value(json_object_get(r.json, "charge_id")));
		cr_assert_not_null(row);
		cr_assert(json_equal(json_object_get(row, "event"), json_object_get(r.json, "event")));
		json_decref(row);
		dpg_resp_free(&r);
	}
}

/* The sensitivity of an exact sum's event, in the grid units it is stated
 * in (mech_noise's grid, g = 2^-shift), divided by the clamp's sensitivity
 * `s` is a whole power of two exactly; for s = 100 and s = 150 no other
 * candidate passes (150 / 100 is 3/2, not a power of two). */
static bool states_sensitivity(const json_t *ev, double s)
{
	double q = num(ev, "sensitivity") / s;

	return !strcmp(json_string_value(json_object_get(ev, "type")), "discrete_laplace") &&
	       q >= 1 && q == ldexp(1.0, ilogb(q));
}

/* Sample variance of a hosted histogram's noise: `n` releases of the two
 * Xylopolis and Quokkaville bins of table_csv (true counts 2 and 2). */
static double histogram_noise_variance(const char *id, int n)
{
	static const char *const body =
		"{\"query\":\"histogram\",\"column\":\"city\","
		"\"categories\":[\"Xylopolis\",\"Quokkaville\"],\"epsilon\":0.5}";
	double s = 0, ss = 0;

	for (int i = 0; i < n; i++) {
		dpg_resp r = query(id, body);
		json_t *out = json_object_get(r.json, "output");

		cr_assert_eq(r.status, 201, "%s", r.body);
		for (int k = 0; k < 2; k++) {
			double x = (double)json_integer_value(json_object_get(
					   out, k ? "Quokkaville" : "Xylopolis")) - 2.0;

			s += x;
			ss += x * x;
		}
		dpg_resp_free(&r);
	}
	return (ss - s * s / (2.0 * n)) / (2.0 * n - 1);
}

/*
 * A hosted query prices the dataset's own neighbour relation
 * (docs/mechanisms.md, hosted tables).  A clamped sum over [-50, 100] has
 * sensitivity max(|lo|, |hi|) = 100 under add/remove and hi - lo = 150
 * under replace.  A mean under add/remove adds a noisy count (sensitivity 1);
 * under replace the row count is public and only the sum is noised.  A
 * histogram bin moves by 1 under add/remove and two bins by 1 under replace,
 * so its discrete Laplace scale at epsilon 0.5 is t = 2 or t = 4, of variance
 * 2 e^(-1/t) / (1 - e^(-1/t))^2 = 7.84 or 31.8; 600 draws put the sample
 * variance within 10 % of either (its relative spread is sqrt(5 / 600)), so
 * the threshold between them, 15.8, is over 6 spreads from both.
 */
Test(mechanisms, hosted_queries_price_the_neighbour_relation)
{
	static const struct {
		const char *id, *neighbor;
		double sum_s;
		size_t mean_events;
		bool wide;
	} ds[] = {
		{"nb_addrem", "add_remove", 100, 2, false},
		{"nb_replace", "replace", 150, 1, true},
	};

	for (size_t d = 0; d < sizeof(ds) / sizeof(ds[0]); d++) {
		const json_t *ev;
		double var;
		dpg_resp r;

		make_ds(ds[d].id, "basic", ds[d].neighbor, 1000, 0);
		r = put_csv(ds[d].id, TABLE_DECL, table_csv, strlen(table_csv), srv.admin_key);
		cr_assert_eq(r.status, 200, "%s", r.body);
		dpg_resp_free(&r);

		r = query(ds[d].id, "{\"query\":\"sum\",\"column\":\"age\",\"lo\":-50,\"hi\":100,"
				    "\"epsilon\":0.5}");
		cr_assert_eq(r.status, 201, "%s", r.body);
		cr_assert(states_sensitivity(json_object_get(r.json, "event"), ds[d].sum_s),
			  "%s: sum %s", ds[d].neighbor, r.body);
		dpg_resp_free(&r);

		r = query(ds[d].id, "{\"query\":\"mean\",\"column\":\"age\",\"lo\":-50,\"hi\":100,"
				    "\"epsilon\":1}");
		cr_assert_eq(r.status, 201, "%s", r.body);
		ev = json_object_get(r.json, "event");
		if (ds[d].mean_events == 1) {
			cr_assert(states_sensitivity(ev, ds[d].sum_s), "%s: mean %s",
				  ds[d].neighbor, r.body);
		} else {
			const json_t *parts = json_object_get(ev, "events");

			cr_assert_eq(json_array_size(parts), 2, "%s", r.body);
			cr_assert(states_sensitivity(json_array_get(parts, 0), ds[d].sum_s), "%s",
				  r.body);
			cr_assert_eq(num(json_array_get(parts, 1), "sensitivity"), 1.0, "%s",
				     r.body);
		}
		dpg_resp_free(&r);

		var = histogram_noise_variance(ds[d].id, 300);
		cr_assert(ds[d].wide ? var > 15.8 : var < 15.8, "%s: histogram noise variance %g",
			  ds[d].neighbor, var);
	}
}

Test(mechanisms, bad_queries_charge_nothing)
{
	static const struct { const char *ds, *body; long status; const char *field; } bad[] = {
		{"qbad", "{\"query\":\"sum\",\"column\":\"height\",\"lo\":0,\"hi\":1,\"epsilon\":1}", 400,
		 "/column"},
		{"qbad", "{\"query\":\"sum\",\"column\":\"city\",\"lo\":0,\"hi\":1,\"epsilon\":1}", 400,
		 "/column"},
		{"qbad", "{\"query\":\"histogram\",\"column\":\"age\",\"categories\":[\"1\"],\"epsilon\":1}",
		 400, "/column"},
		{"qbad", "{\"query\":\"count\",\"epsilon\":0}", 400, "/epsilon"},
		{"qbad", "{\"query\":\"median\",\"epsilon\":1}", 400, "/query"},
		{"qbad", "{\"query\":\"quantile\",\"column\":\"age\",\"q\":1.5,\"lo\":0,\"hi\":1,\"epsilon\":1}",
		 400, "/q"},
		{"qbad", "{\"query\":\"histogram\",\"column\":\"city\",\"categories\":[],\"epsilon\":1}", 400,
		 "/categories"},
		{"qbad", "{\"query\":\"count\",\"epsilon\":1,\"rows\":true}", 400, "/rows"},
		{"qnone", "{\"query\":\"count\",\"epsilon\":1}", 404, NULL},
	};
	dpg_budget b1, b2;
	dpg_resp r;

	make_ds("qbad", "rdp", "add_remove", 10, 1e-5);
	make_ds("qnone", "rdp", "add_remove", 10, 1e-5);
	r = put_csv("qbad", TABLE_DECL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	b1 = budget_of("qbad");
	b2 = budget_of("qnone");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = query(bad[i].ds, bad[i].body);
		cr_assert_eq(r.status, bad[i].status, "%s: %ld %s", bad[i].body, r.status, r.body);
		if (bad[i].field)
			cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
					 bad[i].field, "%s: %s", bad[i].body, r.body);
		cr_assert_null(json_object_get(r.json, "output"));
		dpg_resp_free(&r);
	}
	assert_nothing_charged("qbad", b1, "bad queries");
	assert_nothing_charged("qnone", b2, "no table");
}

/*
 * Kinds an upload inferred from its rows are private: on neighbouring
 * tables, one whose column x holds only numbers and one where a single
 * row's x is text, every query that needs x's kind answers the same 422 at
 * /column, charging nothing, and a job the same 422 at /data, reserving
 * nothing; a count, which needs no kind, is answered on both.  (A 400 that
 * named the inferred kind, or a 201 on one table only, told the row.)
 */
Test(mechanisms, inferred_kinds_are_never_told)
{
	static const char *const tables[] = {"x,y\n1,a\n2,b\n3,a\n", "x,y\n1,a\n2,b\nthree,a\n"};
	static const char *const typed[] = {
		"{\"query\":\"sum\",\"column\":\"x\",\"lo\":0,\"hi\":5,\"epsilon\":1}",
		"{\"query\":\"mean\",\"column\":\"x\",\"lo\":0,\"hi\":5,\"epsilon\":1}",
		"{\"query\":\"quantile\",\"column\":\"x\",\"q\":0.5,\"lo\":0,\"hi\":5,\"epsilon\":1}",
		"{\"query\":\"histogram\",\"column\":\"x\",\"categories\":[\"1\"],\"epsilon\":1}",
	};
	static const char *const job =
		"{\"trainer\":\"dpsgd\",\"dry_run\":true,\"params\":{\"model\":\"logreg\","
		"\"label\":\"y\",\"classes\":[\"a\",\"b\"],\"epochs\":1,\"lot_size\":2}}";
	char *first[5] = {NULL};
	dpg_resp r;

	make_ds("inferred", "rdp", "add_remove", 10, 1e-5);
	for (size_t t = 0; t < 2; t++) {
		dpg_budget before;

		r = put_csv("inferred", NULL, tables[t], strlen(tables[t]), srv.admin_key);
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "schema")), "inferred");
		dpg_resp_free(&r);
		before = budget_of("inferred");
		for (size_t i = 0; i < 5; i++) {
			if (i < 4)
				r = query("inferred", typed[i]);
			else
				r = dpg_call(&srv, "POST", "/v1/datasets/inferred/jobs", srv.admin_key, job);
			dpg_expect_same_refusal(&r, 422, i < 4 ? "/column" : "/data", &first[i]);
		}
		assert_nothing_charged("inferred", before, "typed queries on inferred kinds");
		cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM reservations"), 0);
		r = query("inferred", "{\"query\":\"count\",\"epsilon\":1}");
		cr_assert_eq(r.status, 201, "%s", r.body);
		dpg_resp_free(&r);
	}
	for (size_t i = 0; i < 5; i++)
		free(first[i]);
}

/* The data link as `key` sees it (200 asserted). */
static dpg_resp data_link(const char *id, const char *key)
{
	char path[256];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/data", id);
	r = dpg_call(&srv, "GET", path, key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	return r;
}

/*
 * Under add/remove neighbours the row count and kinds inferred from the
 * values are functions of the private rows: readers other than admins see
 * each only when the upload declared it (row_count=public, columns=...).
 * The admin always sees both, marked as declared or not.  The expected row
 * count is counted from the text here.
 */
Test(mechanisms, metadata_shows_what_was_declared)
{
	static const struct {
		const char *query;
		bool rows_shown, columns_shown;
		const char *row_count, *schema;
	} uploads[] = {
		{NULL, false, false, "private", "inferred"},
		{"?row_count=private", false, false, "private", "inferred"},
		{"?row_count=public", true, false, "public", "inferred"},
		{"?columns=age:numeric,income:numeric,city:categorical", false, true, "private",
		 "declared"},
		{"?columns=age:numeric,income:numeric,city:categorical&row_count=public", true, true,
		 "public", "declared"},
	};
	char analyst[160], viewer[160];
	double rows = 0;

	for (const char *p = strchr(table_csv, '\n') + 1; *p; p++)
		rows += *p == '\n';
	make_ds("meta", "rdp", "add_remove", 10, 1e-5);
	dpg_make_key(&srv, "analyst", "meta", analyst, sizeof(analyst));
	dpg_make_key(&srv, "viewer", "meta", viewer, sizeof(viewer));
	for (size_t i = 0; i < sizeof(uploads) / sizeof(uploads[0]); i++) {
		const char *readers[] = {analyst, viewer};
		dpg_resp r = put_csv("meta", uploads[i].query, table_csv, strlen(table_csv),
				     srv.admin_key);

		cr_assert_eq(r.status, 200, "case %zu: %s", i, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "row_count")),
				 uploads[i].row_count, "case %zu", i);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "schema")),
				 uploads[i].schema, "case %zu", i);
		dpg_resp_free(&r);
		r = data_link("meta", srv.admin_key);
		cr_assert_eq(dpg_num(r.json, "rows"), rows, "case %zu: %s", i, r.body);
		cr_assert_eq(json_array_size(json_object_get(r.json, "columns")), 3, "case %zu", i);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "row_count")),
				 uploads[i].row_count, "case %zu", i);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "schema")),
				 uploads[i].schema, "case %zu", i);
		dpg_resp_free(&r);
		for (size_t k = 0; k < 2; k++) {
			r = data_link("meta", readers[k]);
			if (uploads[i].rows_shown)
				cr_assert_eq(dpg_num(r.json, "rows"), rows, "case %zu: %s", i, r.body);
			else
				cr_assert_null(json_object_get(r.json, "rows"), "case %zu: %s", i,
					       r.body);
			if (uploads[i].columns_shown)
				cr_assert_eq(json_array_size(json_object_get(r.json, "columns")), 3,
					     "case %zu: %s", i, r.body);
			else
				cr_assert_null(json_object_get(r.json, "columns"), "case %zu: %s", i,
					       r.body);
			cr_assert_str_eq(json_string_value(json_object_get(r.json, "row_count")),
					 uploads[i].row_count, "case %zu", i);
			cr_assert_null(json_object_get(r.json, "bytes"), "case %zu", i);
			dpg_resp_free(&r);
		}
	}
	/* A bad row_count is the parameter's fault, and stores nothing: the
	 * last upload's public declarations stand. */
	{
		dpg_resp r = put_csv("meta", "?row_count=yes", "a\n1\n", 4, srv.admin_key);

		cr_assert_eq(r.status, 400, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "row_count");
		dpg_resp_free(&r);
		r = data_link("meta", viewer);
		cr_assert_eq(dpg_num(r.json, "rows"), rows, "%s", r.body);
		dpg_resp_free(&r);
	}
}

/*
 * A value its declared kind does not allow is a 400 naming the line and
 * column, never a change of kind: an empty cell, `nan` or text in a
 * declared numeric column.  Undeclared, the same table is taken, its
 * column inferred categorical and marked so.
 */
Test(mechanisms, declared_kind_is_kept_or_refused)
{
	static const struct { const char *csv, *field; } bad[] = {
		{"age,city\n30,A\n,B\n", "/csv/line/3/age"},
		{"age,city\n30,A\n41,B\nnan,C\n", "/csv/line/4/age"},
		{"age,city\n30,A\nforty,B\n", "/csv/line/3/age"},
	};

	make_ds("kinds", "basic", "add_remove", 10, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dpg_resp r = put_csv("kinds", "?columns=age:numeric,city:categorical", bad[i].csv,
				     strlen(bad[i].csv), srv.admin_key);

		cr_assert_eq(r.status, 400, "case %zu: %s", i, r.body);
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), bad[i].field,
				 "case %zu", i);
		dpg_resp_free(&r);
		r = dpg_call(&srv, "GET", "/v1/datasets/kinds/data", srv.admin_key, NULL);
		cr_assert_eq(r.status, 404, "case %zu: %s", i, r.body);
		dpg_resp_free(&r);
	}
	{
		dpg_resp r = put_csv("kinds", NULL, bad[0].csv, strlen(bad[0].csv), srv.admin_key);

		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_str_eq(json_string_value(json_object_get(
					 json_array_get(json_object_get(r.json, "columns"), 0), "kind")),
				 "categorical");
		cr_assert_str_eq(json_string_value(json_object_get(r.json, "schema")), "inferred");
		dpg_resp_free(&r);
	}
}

Test(mechanisms, declared_schema_types_a_numeric_looking_column)
{
	/* zip looks numeric; declared categorical it takes histograms, and a
	 * re-read of the stored file keeps the declared types. */
	const char *csv = "zip,age\n10115,30\n10115,40\n80331,50\n";
	dpg_resp r;

	make_ds("zips", "basic", "add_remove", 10, 0);
	r = put_csv("zips", "?columns=zip:categorical,age:numeric", csv, strlen(csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(r.json, "columns"), 0), "kind")),
			 "categorical");
	dpg_resp_free(&r);
	r = query("zips",
		  "{\"query\":\"histogram\",\"column\":\"zip\",\"categories\":[\"10115\",\"80331\"],\"epsilon\":1}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	r = query("zips", "{\"query\":\"sum\",\"column\":\"zip\",\"lo\":0,\"hi\":1,\"epsilon\":1}");
	cr_assert_eq(r.status, 400, "%s", r.body);
	dpg_resp_free(&r);
}

Test(mechanisms, query_idempotency_and_over_budget)
{
	const char *body = "{\"query\":\"count\",\"epsilon\":0.6}";
	char path[128];
	dpg_budget b;
	dpg_resp a, c;

	make_ds("qidem", "basic", "add_remove", 1, 0);
	a = put_csv("qidem", TABLE_DECL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(a.status, 200);
	dpg_resp_free(&a);
	snprintf(path, sizeof(path), "/v1/datasets/qidem/queries");
	a = post(path, srv.admin_key, body, "q1");
	c = post(path, srv.admin_key, body, "q1");
	cr_assert_eq(a.status, 201, "%s", a.body);
	cr_assert_str_eq(a.body, c.body);
	dpg_resp_free(&c);
	b = budget_of("qidem");
	cr_assert_eq(b.charges, 1);
	c = post(path, srv.admin_key, body, NULL);
	cr_assert_eq(c.status, 409, "%s", c.body);
	cr_assert_null(json_object_get(c.json, "output"));
	assert_nothing_charged("qidem", b, "query over budget");
	dpg_resp_free(&a);
	dpg_resp_free(&c);
}

/* ---- hosted tables replaced while they are read ------------------------------- */

/* Two tables with different columns and row counts. */
#define TABLE_A_ROWS 2000
#define TABLE_B_ROWS 3000

static char *repeat_rows(const char *header, const char *row, int n, size_t *ret_len)
{
	size_t hl = strlen(header), rl = strlen(row);
	char *s = malloc(hl + rl * (size_t)n + 1);

	cr_assert_not_null(s);
	memcpy(s, header, hl);
	for (int i = 0; i < n; i++)
		memcpy(s + hl + rl * (size_t)i, row, rl);
	*ret_len = hl + rl * (size_t)n;
	s[*ret_len] = '\0';
	return s;
}

struct uploader {
	const char *id;
	const char *csv[2];
	size_t len[2];
	int stop;               /* read and written with __atomic */
	int uploads, failures;  /* failures: answers other than 200 */
	char last_failure[256];
};

static void *upload_loop(void *arg)
{
	struct uploader *u = arg;
	const char *headers[] = {"Content-Type: text/csv", NULL};
	char path[256];

	snprintf(path, sizeof(path), "/v1/datasets/%s/data?columns=*:numeric", u->id);
	while (!__atomic_load_n(&u->stop, __ATOMIC_ACQUIRE)) {
		int k = u->uploads % 2;
		dpg_resp r;

		if (dpg_http(&srv, "PUT", path, srv.admin_key, u->csv[k], u->len[k], headers, &r) < 0) {
			u->failures++;
			snprintf(u->last_failure, sizeof(u->last_failure), "transport failure");
			continue;
		}
		if (r.status != 200) {
			u->failures++;
			snprintf(u->last_failure, sizeof(u->last_failure), "%ld %.200s", r.status,
				 r.body);
		}
		dpg_resp_free(&r);
		u->uploads++;
	}
	return NULL;
}

/*
 * One client keeps replacing a table (a,b with 2000 rows, then x,y,z with
 * 3000, and so on) while another queries it.  Every query is answered from
 * one whole table: a count near 2000 or 3000, a sum of column a near 2000
 * or a 400 naming /column (the x,y,z table has no column a), or the
 * documented 503 for a table replaced under every read.  Never a 500 (the
 * server once read the new file under the old schema).  At the end only
 * the last upload's file is left.
 */
Test(mechanisms, queries_while_the_table_is_replaced)
{
	static const char *const bodies[] = {
		"{\"query\":\"count\",\"epsilon\":50}",
		"{\"query\":\"sum\",\"column\":\"a\",\"lo\":0,\"hi\":1,\"epsilon\":50}",
	};
	struct uploader u;
	pthread_t th;
	int answered = 0, retry_later = 0, seen_a = 0, seen_b = 0;
	char *a, *b;
	dpg_resp r;

	memset(&u, 0, sizeof(u));
	a = repeat_rows("a,b\n", "1,2\n", TABLE_A_ROWS, &u.len[0]);
	b = repeat_rows("x,y,z\n", "1,2,3\n", TABLE_B_ROWS, &u.len[1]);
	u.id = "swapped";
	u.csv[0] = a;
	u.csv[1] = b;
	make_ds("swapped", "basic", "add_remove", 1e6, 0);
	r = put_csv("swapped", "?columns=*:numeric", a, u.len[0], srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	pthread_create(&th, NULL, upload_loop, &u);
	for (int i = 0; i < 400 || u.uploads < 6; i++) {
		const char *body = bodies[i % 2];
		double out;

		r = query("swapped", body);
		if (r.status == 503 && strstr(r.body, "being replaced")) {
			retry_later++;
			dpg_resp_free(&r);
			continue;
		}
		if (i % 2 == 1 && r.status == 400) {
			const char *field = json_string_value(json_object_get(r.json, "field"));

			cr_assert(field && !strcmp(field, "/column"), "%s: %s", body, r.body);
			seen_b++;
			dpg_resp_free(&r);
			continue;
		}
		cr_assert_eq(r.status, 201, "query %d (%s) after %d uploads: %ld %s", i, body,
			     u.uploads, r.status, r.body);
		out = json_number_value(json_object_get(r.json, "output"));
		if (i % 2 == 0) {
			/* Discrete Laplace of scale 1/50: off by more than 20 with
			 * probability about e^-1000. */
			cr_assert(fabs(out - TABLE_A_ROWS) <= 20 || fabs(out - TABLE_B_ROWS) <= 20,
				  "count %g is neither table's", out);
			if (fabs(out - TABLE_A_ROWS) <= 20)
				seen_a++;
			else
				seen_b++;
		} else {
			cr_assert(fabs(out - TABLE_A_ROWS) <= 20, "sum %g is not table a's", out);
			seen_a++;
		}
		answered++;
		dpg_resp_free(&r);
		if (i > 20000)
			break;
	}
	__atomic_store_n(&u.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	cr_assert_eq(u.failures, 0, "%d uploads failed, the last: %s", u.failures, u.last_failure);
	cr_assert_geq(u.uploads, 6);
	cr_assert_gt(answered, 0);
	cr_log_info("%d uploads; %d answers (%d from a, %d from b), %d retry-later", u.uploads,
		    answered, seen_a, seen_b, retry_later);
	/* The replaced files are gone; the link names the one left. */
	cr_assert_eq(table_files("swapped"), files_per_table());
	r = query("swapped", bodies[0]);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	free(a);
	free(b);
}

/* Writes `text` to <data-dir>/tables/<name> and sets its times `age` seconds
 * back. */
static void place_table_file(const char *name, const char *text, long age)
{
	char path[700];
	struct timespec ts[2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/data/tables/%s", srv.dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age;
	ts[1] = ts[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0, "%s", path);
}

static bool table_file_present(const char *name)
{
	char path[700];
	struct stat st;

	snprintf(path, sizeof(path), "%s/data/tables/%s", srv.dir, name);
	return stat(path, &st) == 0;
}

/* The path dataset_data records for `id` (caller frees). */
static char *linked_path(const char *id)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	char *path = NULL;

	dpg_skip_on_pg("reads the SQLite file behind the server");
	cr_assert_eq(sqlite3_open(srv.db, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT path FROM dataset_data WHERE dataset_id = ?1", -1,
					&s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW)
		path = strdup((const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	sqlite3_close(db);
	cr_assert_not_null(path);
	return path;
}

/* Makes dataset `id`, hosts table_csv on it and stops the server (SIGTERM);
 * returns the path the link records (caller frees). */
static char *host_table_and_stop(const char *id)
{
	char *linked;
	dpg_resp r;

	make_ds(id, "basic", "add_remove", 100, 0);
	r = put_csv(id, TABLE_DECL, table_csv, strlen(table_csv), srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	linked = linked_path(id);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	return linked;
}

/* The count of serve's JSON log line about removed orphaned table files
 * (the last one in srv.log), or -1 when there is none. */
static long long removed_in_log(void)
{
	char line[4096];
	long long count = -1;
	FILE *f = fopen(srv.log, "r");

	cr_assert_not_null(f, "%s", srv.log);
	while (fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		const char *msg = json_string_value(json_object_get(j, "msg"));

		if (msg && strcmp(msg, "removed orphaned table files") == 0)
			count = json_integer_value(json_object_get(j, "count"));
		json_decref(j);
	}
	fclose(f);
	return count;
}

/*
 * The crash windows of an upload, laid out by hand while the server is
 * stopped: a file written but never committed (another table), a file the
 * link no longer names whose removal never ran (the crash between the
 * commit and the unlink), and an older server's temp file.  At the next
 * start they are removed; the linked file, a fresh unlinked file (an upload
 * possibly in flight), the older layout's <id>.csv and files dpgate never
 * writes stay.  Queries answer from the committed table throughout.
 */
Test(mechanisms, start_sweeps_orphaned_table_files)
{
	static const char *const orphans[] = {
		"crashed.0123456789abcdef01234567.csv",    /* never committed */
		"crashed.89abcdef0123456789abcdef.csv",    /* replaced, not removed */
		"crashed.csv.tmp.fedcba9876543210fedcba98", /* an older server's temp file */
		"gone.00112233445566778899aabb.csv",       /* a dataset that hosts no table */
	};
	static const char *const kept[] = {
		"crashed.ffffffffffffffffffffffff.csv",    /* fresh: maybe in flight */
		"crashed.csv",                             /* the older layout's name */
		"notes.txt",
		"crashed.0123.csv",                        /* not dpgate's pattern */
	};
	char *linked, *base;
	dpg_resp r;

	linked = host_table_and_stop("crashed");
	base = strrchr(linked, '/') + 1;
	for (size_t i = 0; i < sizeof(orphans) / sizeof(orphans[0]); i++)
		place_table_file(orphans[i], i == 1 ? table_csv : "x,y,z\n1,2,3\n", 3600);
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		place_table_file(kept[i], "x,y,z\n1,2,3\n", i == 0 ? 0 : 3600);
	{
		/* The linked file is old too, and stays. */
		char path[700];
		struct timespec ts[2] = {{0, 0}, {0, 0}};

		snprintf(path, sizeof(path), "%s/data/tables/%s", srv.dir, base);
		cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	dpg_server_restart(&srv);
	for (size_t i = 0; i < sizeof(orphans) / sizeof(orphans[0]); i++)
		cr_assert(!table_file_present(orphans[i]), "orphan %s was left", orphans[i]);
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		cr_assert(table_file_present(kept[i]), "%s was removed", kept[i]);
	cr_assert(table_file_present(base), "the linked file %s was removed", base);
	cr_assert_eq(removed_in_log(), 4, "the start's log line names the 4 removed files");
	/* The committed table, with its schema, answers. */
	r = query("crashed", "{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":50}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert(fabs(json_number_value(json_object_get(r.json, "output")) - 197) < 20, "%s",
		  r.body);
	dpg_resp_free(&r);
	free(linked);
}

/*
 * A database from before per-upload file names links tables/<id>.csv: it is
 * still read, and the next upload replaces it (the old file is removed once
 * the new link is committed).
 */
Test(mechanisms, older_table_layout_keeps_working)
{
	char *linked, old_path[700], legacy[700];
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	dpg_resp r;

	linked = host_table_and_stop("legacy");
	snprintf(old_path, sizeof(old_path), "%s", linked);
	snprintf(legacy, sizeof(legacy), "%.*slegacy.csv", (int)(strrchr(linked, '/') + 1 - linked),
		 linked);
	cr_assert_eq(rename(old_path, legacy), 0);
	cr_assert_eq(sqlite3_open(srv.db, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "UPDATE dataset_data SET path = ?1 WHERE dataset_id = 'legacy'",
					-1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, legacy, -1, SQLITE_STATIC);
	cr_assert_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	sqlite3_close(db);
	dpg_server_restart(&srv);

	r = query("legacy", "{\"query\":\"count\",\"epsilon\":50}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert(table_file_present("legacy.csv"));
	r = put_csv("legacy", "?columns=*:numeric", "x,y\n1,2\n3,4\n", 12, srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	cr_assert(!table_file_present("legacy.csv"), "the replaced legacy.csv is still there");
	cr_assert_eq(table_files("legacy"), 1);
	r = query("legacy", "{\"query\":\"sum\",\"column\":\"x\",\"lo\":0,\"hi\":10,\"epsilon\":50}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	cr_assert(fabs(json_number_value(json_object_get(r.json, "output")) - 4) < 2, "%s", r.body);
	dpg_resp_free(&r);
	free(linked);
}

/* ---- parsed tables kept between queries --------------------------------------- */

/* A count of dataset `id`'s table with epsilon 50: discrete Laplace of
 * scale 1/50, off by more than 20 with probability about e^-1000. */
static void assert_count_near(const char *id, double rows, const char *when)
{
	dpg_resp r = query(id, "{\"query\":\"count\",\"epsilon\":50}");
	double out;

	cr_assert_eq(r.status, 201, "%s: %s", when, r.body);
	out = json_number_value(json_object_get(r.json, "output"));
	cr_assert(fabs(out - rows) <= 20, "%s: count %g, the table has %g rows", when, out, rows);
	dpg_resp_free(&r);
}

/* A counter of /metrics with no labels. */
static double metric(const char *name)
{
	return dpg_metric(&srv, name);
}

/* Runs `queries` counts on `id` and checks how many read the file. */
static void assert_counts_parse(const char *id, double rows, int queries, double parses,
				const char *when)
{
	double hits = metric("dpgate_table_cache_hits_total");
	double misses = metric("dpgate_table_cache_misses_total");

	for (int i = 0; i < queries; i++)
		assert_count_near(id, rows, when);
	cr_assert_eq(metric("dpgate_table_cache_misses_total") - misses, parses,
		     "%s: %g reads of the file for %d queries", when,
		     metric("dpgate_table_cache_misses_total") - misses, queries);
	cr_assert_eq(metric("dpgate_table_cache_hits_total") - hits, queries - parses, "%s", when);
}

/* The queries of seeded_parse_answers_as_a_reread_does, and how each is
 * checked: its status when zip is numeric or categorical, and the true
 * value of its output (a number, or a histogram's bins by name). */
#define SEED_ROWS 600          /* zip 10115 on even rows, 80331 on odd */
/* Ages 2 * (i % 32) + 1: a cycle of 32 rows sums to 32^2 = 1024; 600 rows
 * are 18 cycles and the first 24 rows of one more (24^2 = 576). */
#define SEED_AGE_SUM (18.0 * 1024 + 576)
static const struct seed_query {
	const char *body;
	long status_numeric_zip, status_categorical_zip;
	double tol;                  /* |output - truth| at epsilon 50 */
} seed_queries[] = {
	{"{\"query\":\"count\",\"epsilon\":50}", 201, 201, 20},
	{"{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":50}", 201, 201,
	 100},
	{"{\"query\":\"sum\",\"column\":\"zip\",\"lo\":0,\"hi\":100000,\"epsilon\":50}", 201,
	 400, 1e5},
	{"{\"query\":\"histogram\",\"column\":\"zip\",\"categories\":[\"10115\",\"80331\"],"
	 "\"epsilon\":50}", 400, 201, 20},
	{"{\"query\":\"histogram\",\"column\":\"city\",\"categories\":[\"Xylopolis\",\"Quokkaville\"],"
	 "\"epsilon\":50}", 201, 201, 20},
};

/* The true answer of seed query i on the seeded table, compared with the
 * output: scale (hi - lo) / 50 Laplace or 1/50 discrete Laplace noise is
 * within tol with probability above 1 - 1e-15. */
static void assert_seed_output(size_t i, const json_t *out, const char *when)
{
	double truth_sum_zip = 300.0 * 10115 + 300.0 * 80331;

	switch (i) {
	case 0:
		cr_assert(fabs(json_number_value(out) - SEED_ROWS) <= seed_queries[i].tol, "%s", when);
		break;
	case 1:
		cr_assert(fabs(json_number_value(out) - SEED_AGE_SUM) <= seed_queries[i].tol,
			  "%s: age sum %g", when, json_number_value(out));
		break;
	case 2:
		/* zip values clamp to [0, 100000]; both are inside. */
		cr_assert(fabs(json_number_value(out) - truth_sum_zip) <= seed_queries[i].tol,
			  "%s: zip sum %g", when, json_number_value(out));
		break;
	case 3:
		cr_assert(fabs(json_number_value(json_object_get(out, "10115")) - 300) <= 20, "%s", when);
		cr_assert(fabs(json_number_value(json_object_get(out, "80331")) - 300) <= 20, "%s", when);
		break;
	default:
		cr_assert(fabs(json_number_value(json_object_get(out, "Xylopolis")) - 400) <= 20, "%s",
			  when);
		cr_assert(fabs(json_number_value(json_object_get(out, "Quokkaville")) - 200) <= 20,
			  "%s", when);
	}
}

/* Runs every seed query on `id` and checks status and output; returns how
 * many were answered 201. */
static int run_seed_queries(const char *id, bool zip_categorical, const char *when)
{
	int answered = 0;

	for (size_t i = 0; i < sizeof(seed_queries) / sizeof(seed_queries[0]); i++) {
		long want = zip_categorical ? seed_queries[i].status_categorical_zip
					    : seed_queries[i].status_numeric_zip;
		dpg_resp r = query(id, seed_queries[i].body);

		cr_assert_eq(r.status, want, "%s: %s: %ld %s", when, seed_queries[i].body, r.status,
			     r.body);
		if (r.status == 201) {
			assert_seed_output(i, json_object_get(r.json, "output"), when);
			answered++;
		}
		dpg_resp_free(&r);
	}
	return answered;
}

/*
 * An upload keeps the parse it made, and that parse answers every query as
 * a read of the stored file with the recorded schema does: with the kinds
 * declared by the wildcard (zip numeric) and by name (zip categorical), the same statuses
 * and outputs near the same true values, first from the upload's parse (no
 * read of the file), then from a fresh read (the file's modification time
 * moved, so the kept parse no longer matches it).
 */
Test(mechanisms, an_uploads_own_parse_answers_as_a_reread_does)
{
	static const struct {
		const char *id, *columns;
		bool zip_categorical;
	} uploads[] = {
		{"seed-wildcard", "?columns=city:categorical,*:numeric", false},
		{"seed-declared", "?columns=zip:categorical,age:numeric,city:categorical", true},
	};
	size_t len = 0;
	char *csv = malloc(64 + 32 * SEED_ROWS);

	cr_assert_not_null(csv);
	len = (size_t)sprintf(csv, "zip,age,city\n");
	for (int i = 0; i < SEED_ROWS; i++)
		len += (size_t)sprintf(csv + len, "%s,%d,%s\n", i % 2 ? "80331" : "10115",
				       2 * (i % 32) + 1, i % 3 ? "Xylopolis" : "Quokkaville");
	for (size_t u = 0; u < sizeof(uploads) / sizeof(uploads[0]); u++) {
		const char *id = uploads[u].id;
		struct timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
		double hits, misses;
		char *path;
		int answered;
		dpg_resp r;

		make_ds(id, "basic", "add_remove", 1e6, 0);
		r = put_csv(id, uploads[u].columns, csv, len, srv.admin_key);
		cr_assert_eq(r.status, 200, "%s: %s", id, r.body);
		dpg_resp_free(&r);

		hits = metric("dpgate_table_cache_hits_total");
		misses = metric("dpgate_table_cache_misses_total");
		answered = run_seed_queries(id, uploads[u].zip_categorical, "the upload's parse");
		cr_assert_eq(metric("dpgate_table_cache_misses_total"), misses,
			     "%s: a query read the file the upload had just parsed", id);
		cr_assert_eq(metric("dpgate_table_cache_hits_total") - hits, answered, "%s", id);

		/* Another modification time: the kept parse no longer matches
		 * the file, so the next query reads it with the recorded schema. */
		path = linked_path(id);
		times[1].tv_sec = time(NULL) - 3600;
		cr_assert_eq(utimensat(AT_FDCWD, path, times, 0), 0, "%s", path);
		hits = metric("dpgate_table_cache_hits_total");
		misses = metric("dpgate_table_cache_misses_total");
		answered = run_seed_queries(id, uploads[u].zip_categorical, "a read of the file");
		cr_assert_eq(metric("dpgate_table_cache_misses_total") - misses, 1, "%s", id);
		cr_assert_eq(metric("dpgate_table_cache_hits_total") - hits, answered - 1, "%s", id);
		free(path);
	}
	free(csv);
}

/*
 * Repeated queries are answered from the parse the server keeps (from the
 * upload on), and never from one that no longer describes the linked file:
 * after an upload replaces the table (a new file), after the linked file is
 * appended to behind the server's back (same path, another size), and after
 * it is removed (the documented 500, nothing charged).
 */
Test(mechanisms, kept_tables_follow_their_file)
{
	size_t la, lb;
	char *a = repeat_rows("a,b\n", "1,2\n", TABLE_A_ROWS, &la);
	char *b = repeat_rows("a,b\n", "1,2\n", TABLE_B_ROWS, &lb);
	char *path;
	dpg_budget before, after;
	dpg_resp r;
	FILE *f;

	make_ds("kept", "basic", "add_remove", 1e6, 0);
	r = put_csv("kept", NULL, a, la, srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	/* The upload keeps its own parse: no query reads the file. */
	assert_counts_parse("kept", TABLE_A_ROWS, 3, 0, "first table");
	r = put_csv("kept", NULL, b, lb, srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	assert_counts_parse("kept", TABLE_B_ROWS, 3, 0, "after the upload replaced it");

	path = linked_path("kept");
	f = fopen(path, "a");
	cr_assert_not_null(f, "%s", path);
	for (int i = 0; i < 500; i++)
		fputs("1,2\n", f);
	cr_assert_eq(fclose(f), 0);
	assert_counts_parse("kept", TABLE_B_ROWS + 500, 2, 1, "after rows were appended to the file");

	cr_assert_eq(unlink(path), 0);
	before = dpg_budget_of(&srv, "kept");
	r = query("kept", "{\"query\":\"count\",\"epsilon\":50}");
	cr_assert_eq(r.status, 500, "a removed file was still served: %s", r.body);
	cr_assert(strstr(r.body, "cannot be read back"), "%s", r.body);
	dpg_resp_free(&r);
	after = dpg_budget_of(&srv, "kept");
	cr_assert_eq(after.charges, before.charges);
	cr_assert_eq(after.spent_eps, before.spent_eps);
	free(path);
	free(a);
	free(b);
}

/* ---- concurrent queries share one parse ---------------------------------------- */

/* Rows of the table read at once: at 0.2 s per 10^6 rows its parse takes
 * long enough that every query arrives while it runs. */
#define SHARED_ROWS 400000
#define SHARED_CLIENTS 8

struct shared_query {
	pthread_barrier_t *start;
	dpg_resp r;
};

static void *shared_query_run(void *arg)
{
	struct shared_query *q = arg;
	const char *body = "{\"query\":\"count\",\"epsilon\":50}";

	pthread_barrier_wait(q->start);
	if (dpg_http(&srv, "POST", "/v1/datasets/shared/queries", srv.admin_key, body,
		     strlen(body), NULL, &q->r) < 0)
		q->r.status = -1;
	return NULL;
}

/*
 * Eight queries at once on a table of which no parse is kept (the server
 * restarted since its upload) all answer, and the file is read and parsed
 * once: one miss, the seven others waited for that parse (or found it
 * kept).  Each parsing it on its own held eight copies at once.
 */
Test(mechanisms, concurrent_queries_on_one_table_parse_it_once)
{
	struct shared_query q[SHARED_CLIENTS];
	pthread_t th[SHARED_CLIENTS];
	pthread_barrier_t start;
	double hits, misses;
	size_t len;
	char *csv = repeat_rows("a,b\n", "1,2\n", SHARED_ROWS, &len);
	dpg_resp r;

	make_ds("shared", "basic", "add_remove", 1e6, 0);
	r = put_csv("shared", NULL, csv, len, srv.admin_key);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	free(csv);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	dpg_server_restart(&srv);
	hits = metric("dpgate_table_cache_hits_total");
	misses = metric("dpgate_table_cache_misses_total");
	cr_assert_eq(pthread_barrier_init(&start, NULL, SHARED_CLIENTS), 0);
	for (int i = 0; i < SHARED_CLIENTS; i++) {
		q[i].start = &start;
		cr_assert_eq(pthread_create(&th[i], NULL, shared_query_run, &q[i]), 0);
	}
	for (int i = 0; i < SHARED_CLIENTS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < SHARED_CLIENTS; i++) {
		double out = json_number_value(json_object_get(q[i].r.json, "output"));

		cr_assert_eq(q[i].r.status, 201, "client %d: %ld %s", i, q[i].r.status,
			     q[i].r.body);
		/* Discrete Laplace of scale 1/50: off by 20 with probability e^-1000. */
		cr_assert(fabs(out - SHARED_ROWS) <= 20, "client %d: count %g", i, out);
		dpg_resp_free(&q[i].r);
	}
	cr_assert_eq(metric("dpgate_table_cache_misses_total") - misses, 1,
		     "%g reads of the file for %d queries at once",
		     metric("dpgate_table_cache_misses_total") - misses, SHARED_CLIENTS);
	/* The restarted server counted no wait before these queries. */
	cr_assert_eq(metric("dpgate_table_cache_hits_total") - hits +
			     metric("dpgate_table_cache_waits_total"),
		     SHARED_CLIENTS - 1);
}
