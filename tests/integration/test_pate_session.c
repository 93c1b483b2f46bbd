/*
 * test_pate_session.c: PATE aggregation sessions through HTTP.
 *
 *  - bad inputs: each refused with 400 naming the field, nothing charged;
 *  - a batch cut short by the budget: 409 with the answered labels, charged
 *    durably, replayed byte for byte for the same Idempotency-Key;
 *  - end to end: a synthetic ensemble of 250 teachers answers 2000 queries
 *    through Confident-GNMax; the answered fraction, the label accuracy
 *    against the known plurality, the data-independent epsilon and the
 *    released data-dependent epsilon are printed, and with strong consensus
 *    the released epsilon must be well below the data-independent one;
 *  - LNMax: each answer charged its pure epsilon 2 gamma;
 *  - listing: every session reached a page at a time, oldest first.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define TEACHERS 250
#define CLASSES 10

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(pate_session, .init = setup, .fini = teardown, .timeout = 600);

/* Creates a session; returns its id in sid. */
static void make_session(const char *dataset, const char *config, char *sid, size_t size)
{
	char path[256];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/pate/sessions", dataset);
	r = dpg_call(&srv, "POST", path, srv.admin_key, config);
	cr_assert_eq(r.status, 201, "create session: %ld %s", r.status, r.body);
	snprintf(sid, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
}

static int64_t charges_of(const char *dataset)
{
	char path[256];
	dpg_resp r;
	int64_t n;

	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", dataset);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	n = (int64_t)dpg_num(r.json, "charges");
	dpg_resp_free(&r);
	return n;
}

struct bad {
	const char *name;
	const char *suffix;  /* "" = session creation, "q" = queries */
	const char *body;
	const char *field;
};

#define CFG(x) "{\"aggregator\":\"confident_gnmax\",\"num_teachers\":5,\"num_classes\":3," x "}"
#define Q(x) "{\"queries\":[" x "]}"

static const struct bad bad_cases[] = {
	{"sigma zero", "", CFG("\"sigma1\":0,\"sigma2\":1,\"threshold\":3"), "/sigma1"},
	{"sigma negative", "", CFG("\"sigma1\":2,\"sigma2\":-1,\"threshold\":3"), "/sigma2"},
	{"threshold above teachers", "", CFG("\"sigma1\":2,\"sigma2\":1,\"threshold\":6"), "/threshold"},
	{"threshold negative", "", CFG("\"sigma1\":2,\"sigma2\":1,\"threshold\":-1"), "/threshold"},
	{"threshold missing", "", CFG("\"sigma1\":2,\"sigma2\":1"), "/threshold"},
	{"unknown aggregator", "", "{\"aggregator\":\"max\",\"num_teachers\":5,\"num_classes\":3}", "/aggregator"},
	{"one class", "", "{\"aggregator\":\"gnmax\",\"num_teachers\":5,\"num_classes\":1,\"sigma2\":1}", "/num_classes"},
	{"gnmax with a threshold", "", "{\"aggregator\":\"gnmax\",\"num_teachers\":5,\"num_classes\":3,\"sigma2\":1,\"threshold\":2}", "/threshold"},
	{"order at 1", "", "{\"aggregator\":\"gnmax\",\"num_teachers\":5,\"num_classes\":3,\"sigma2\":1,\"orders\":[2,1]}", "/orders/1"},
	{"histogram too short", "q", Q("{\"votes\":[1,2]}"), "/queries/0/votes"},
	{"histogram too long", "q", Q("{\"votes\":[1,1,1]},{\"votes\":[1,2,0,0]}"), "/queries/1/votes"},
	{"negative vote", "q", Q("{\"votes\":[1,-1,2]}"), "/queries/0/votes/1"},
	{"fractional vote", "q", Q("{\"votes\":[1,1.5,2]}"), "/queries/0/votes/1"},
	{"more votes than teachers", "q", Q("{\"votes\":[3,2,1]}"), "/queries/0/votes"},
	{"prediction out of range", "q", Q("{\"predictions\":[0,1,2,3,0]}"), "/queries/0/predictions/3"},
	{"too few predictions", "q", Q("{\"predictions\":[0,1,2,2]}"), "/queries/0/predictions"},
	{"votes and predictions", "q", Q("{\"votes\":[1,1,1],\"predictions\":[0,1,2,2,2]}"), "/queries/0"},
	{"probabilities on confident", "q", Q("{\"votes\":[1,1,1],\"student_probabilities\":[1,0,0]}"), "/queries/0/student_probabilities"},
	{"empty batch", "q", Q(""), "/queries"},
};

Test(pate_session, bad_inputs_charge_nothing)
{
	char sid[128], isid[128], path[256];
	dpg_resp r;

	dpg_make_dataset(&srv, "bad", 5, 1e-5, "rdp");
	make_session("bad", CFG("\"sigma1\":2,\"sigma2\":1,\"threshold\":3"), sid, sizeof(sid));
	make_session("bad", "{\"aggregator\":\"interactive_gnmax\",\"num_teachers\":5,\"num_classes\":3,"
		     "\"sigma1\":2,\"sigma2\":1,\"threshold\":3,\"student_confidence\":0.9}", isid, sizeof(isid));
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad *c = &bad_cases[i];
		const char *f;

		if (c->suffix[0])
			snprintf(path, sizeof(path), "/v1/datasets/bad/pate/sessions/%s/queries", sid);
		else
			snprintf(path, sizeof(path), "/v1/datasets/bad/pate/sessions");
		r = dpg_call(&srv, "POST", path, srv.admin_key, c->body);
		cr_expect_eq(r.status, 400, "%s: %ld %s", c->name, r.status, r.body);
		f = json_string_value(json_object_get(r.json, "field"));
		cr_expect(f && strcmp(f, c->field) == 0, "%s: field %s, expected %s (%s)", c->name,
			  f ? f : "(none)", c->field, r.body);
		dpg_resp_free(&r);
	}
	/* Interactive: probabilities that do not sum to 1, or are missing. */
	snprintf(path, sizeof(path), "/v1/datasets/bad/pate/sessions/%s/queries", isid);
	r = dpg_call(&srv, "POST", path, srv.admin_key,
		     Q("{\"votes\":[1,1,1],\"student_probabilities\":[0.5,0.2,0.2]}"));
	cr_expect_eq(r.status, 400, "%s", r.body);
	cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), "/queries/0/student_probabilities");
	dpg_resp_free(&r);
	r = dpg_call(&srv, "POST", path, srv.admin_key, Q("{\"votes\":[1,1,1]}"));
	cr_expect_eq(r.status, 400, "%s", r.body);
	dpg_resp_free(&r);
	/* A bad query late in a batch refuses the whole batch. */
	snprintf(path, sizeof(path), "/v1/datasets/bad/pate/sessions/%s/queries", sid);
	r = dpg_call(&srv, "POST", path, srv.admin_key, Q("{\"votes\":[5,0,0]},{\"votes\":[5,0,-1]}"));
	cr_expect_eq(r.status, 400, "%s", r.body);
	dpg_resp_free(&r);
	/* A beta below 1 / (2 order) = 1/28 but not below it less the
	 * release's slack 2^-22: refused at /beta, and the bound the message
	 * states is one that beta does not meet. */
	{
		const double beta = 1.0 / 28 - 0x1p-24;
		const char *detail;
		char body[160];

		snprintf(path, sizeof(path), "/v1/datasets/bad/pate/sessions/%s/release", sid);
		snprintf(body, sizeof(body), "{\"beta\":%.17g,\"sigma\":8,\"order\":14,\"delta\":1e-6}",
			 beta);
		r = dpg_call(&srv, "POST", path, srv.admin_key, body);
		cr_expect_eq(r.status, 400, "%s", r.body);
		cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), "/beta");
		detail = json_string_value(json_object_get(r.json, "detail"));
		cr_assert(detail && strstr(detail, "below "), "%s", r.body);
		cr_expect_geq(beta, strtod(strstr(detail, "below ") + 6, NULL), "%s", detail);
		dpg_resp_free(&r);
	}
	cr_assert_eq(charges_of("bad"), 0, "a refused request charged the ledger");
	r = dpg_call(&srv, "GET", "/v1/datasets/bad/pate/sessions", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(json_array_size(json_object_get(r.json, "sessions")), 2);
	dpg_resp_free(&r);
}

/*
 * LNMax at gamma 0.3 on a basic ledger: each answer is charged its pure
 * epsilon 2 gamma = 0.6 (one vote moved changes two counts by 1 each, so
 * the output law moves by at most e^(2 gamma); tests/pate/test_pate_units.c
 * computes that loss exactly on random neighbours and finds it above 1.5
 * gamma, so gamma alone would not cover it), with the sampler's scale at
 * least 1/gamma.  Three answers spend 1.8.
 */
Test(pate_session, lnmax_answers_are_charged_two_gamma_each)
{
	const double gamma = 0.3;
	char sid[128], path[256];
	dpg_budget b;
	dpg_resp r;

	dpg_make_dataset(&srv, "lap", 10, 1e-5, "basic");
	make_session("lap", "{\"aggregator\":\"lnmax\",\"num_teachers\":10,\"num_classes\":3,"
		     "\"gamma\":0.3}", sid, sizeof(sid));
	snprintf(path, sizeof(path), "/v1/datasets/lap/pate/sessions/%s/queries", sid);
	r = dpg_call(&srv, "POST", path, srv.admin_key,
		     Q("{\"votes\":[8,1,1]},{\"votes\":[2,5,3]},{\"votes\":[0,0,10]}"));
	cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "labels")), 3, "%s", r.body);
	cr_assert_float_eq(dpg_num(r.json, "event.event.epsilon"), 2 * gamma, 1e-15, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "event.event.delta"), 0.0, "%s", r.body);
	cr_assert_eq(dpg_num(r.json, "event.count"), 3, "%s", r.body);
	dpg_resp_free(&r);
	b = dpg_budget_of(&srv, "lap");
	cr_assert_float_eq(b.spent_eps, 3 * (2 * gamma), 1e-12, "spent %.17g", b.spent_eps);
	cr_assert_eq(b.spent_delta, 0.0);
	snprintf(path, sizeof(path), "/v1/datasets/lap/pate/sessions/%s", sid);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_float_eq(dpg_num(r.json, "noise_used.epsilon_per_answer"), 2 * gamma, 1e-15);
	cr_assert_geq(dpg_num(r.json, "noise_used.laplace_scale"), 1 / gamma);
	cr_assert_leq(dpg_num(r.json, "noise_used.laplace_scale"), (1 / gamma) * (1 + 1e-9));
	dpg_resp_free(&r);
}

/*
 * GNMax at sigma2 = 8 on an rdp ledger: each answer costs lambda / 64 of RDP.
 * A batch larger than the budget is cut short: 409 with the answered
 * labels, charged once, replayed byte for byte; the next batch gets a 409
 * with nothing answered and no charge.  A unanimous histogram far above
 * the noise is answered with its label.
 */
Test(pate_session, budget_runs_out_inside_a_batch)
{
	const char *idem[] = {"Idempotency-Key: batch-1", NULL};
	char sid[128], path[256], body[8192];
	size_t n = 0, answered;
	dpg_resp r, again;
	json_t *labels;

	dpg_make_dataset(&srv, "small", 1, 1e-5, "rdp");
	make_session("small", "{\"aggregator\":\"gnmax\",\"num_teachers\":100,\"num_classes\":4,\"sigma2\":8}",
		     sid, sizeof(sid));
	n += (size_t)snprintf(body + n, sizeof(body) - n, "{\"queries\":[");
	for (int i = 0; i < 200; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s{\"votes\":[0,0,100,0]}", i ? "," : "");
	snprintf(body + n, sizeof(body) - n, "]}");
	snprintf(path, sizeof(path), "/v1/datasets/small/pate/sessions/%s/queries", sid);
	cr_assert_eq(dpg_http(&srv, "POST", path, srv.admin_key, body, strlen(body), idem, &r), 0);
	cr_assert_eq(r.status, 409, "%ld %s", r.status, r.body);
	cr_assert(strstr(r.content_type, "problem+json"), "%s", r.content_type);
	answered = (size_t)dpg_num(r.json, "answered");
	labels = json_object_get(r.json, "labels");
	cr_assert_gt(answered, 0);
	cr_assert_lt(answered, 200);
	cr_assert_eq(json_array_size(labels), answered);
	for (size_t i = 0; i < answered; i++)
		cr_assert_eq(json_integer_value(json_array_get(labels, i)), 2, "label %zu", i);
	/* A problem document of the project's type, and exactly one of the
	 * spec's alternatives for this 409. */
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "type")),
			 "https://dpgate.dev/problems/409");
	dpg_assert_in_spec(&srv, "POST", "/v1/datasets/{id}/pate/sessions/{sid}/queries", "409",
			   "application/problem+json", r.body);
	cr_assert_eq(charges_of("small"), 1);
	/* The replay: same bytes, same status, no new charge. */
	cr_assert_eq(dpg_http(&srv, "POST", path, srv.admin_key, body, strlen(body), idem, &again), 0);
	cr_assert_eq(again.status, 409);
	cr_assert_str_eq(again.body, r.body);
	cr_assert_eq(charges_of("small"), 1);
	dpg_resp_free(&again);
	/* Nothing fits any more: 409, nothing answered, nothing charged. */
	again = dpg_call(&srv, "POST", path, srv.admin_key, "{\"queries\":[{\"votes\":[0,0,100,0]}]}");
	cr_assert_eq(again.status, 409, "%s", again.body);
	cr_assert_eq(dpg_num(again.json, "answered"), 0);
	dpg_assert_in_spec(&srv, "POST", "/v1/datasets/{id}/pate/sessions/{sid}/queries", "409",
			   "application/problem+json", again.body);
	cr_assert_eq(charges_of("small"), 1);
	dpg_resp_free(&again);
	/* The session counted what was answered. */
	snprintf(path, sizeof(path), "/v1/datasets/small/pate/sessions/%s", sid);
	again = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(dpg_num(again.json, "counts.teacher_answers"), (double)answered);
	cr_assert_null(json_object_get(again.json, "dd_rdp"));
	dpg_resp_free(&again);
	/* The release is priced (a pate_gnss event) but no longer fits: 409,
	 * nothing released. */
	snprintf(path, sizeof(path), "/v1/datasets/small/pate/sessions/%s/release", sid);
	again = dpg_call(&srv, "POST", path, srv.admin_key,
			 "{\"beta\":0.0329,\"sigma\":50,\"order\":10,\"delta\":1e-6}");
	cr_assert_eq(again.status, 409, "%s", again.body);
	cr_assert_null(json_object_get(again.json, "epsilon"));
	cr_assert_eq(charges_of("small"), 1);
	dpg_resp_free(&again);
	dpg_resp_free(&r);
}

/*
 * Nothing in a GNSS release may depend on the data but its value:
 *  - no sigma makes it fail on the data: a sigma too small for the sampler's
 *    grid (SS sigma < 2^-34) was refused with 400 at /sensitivity before
 *    any charge, and bisecting on sigma read the smooth sensitivity for
 *    free.  Tiny sigmas are now refused at /sigma whatever the votes, and
 *    the rest that cost more than the budget are 409, uncharged;
 *  - the output's grid is public: 2^(e - 20) for 2^8 B sigma in
 *    [2^(e-1), 2^e), B the data-independent RDP the answer reports.  It was
 *    chosen from SS sigma, and the output's last bits named it.
 */
Test(pate_session, no_release_depends_on_the_data_but_its_value)
{
	static const char *const votes[] = {"[60,30,10]", "[34,33,33]"};
	static const struct {
		double sigma;
		long status;
	} tries[] = {{1e-30, 400}, {1e-8, 400}, {1e-6, 409}, {1e-3, 409}};

	dpg_make_dataset(&srv, "ss", 1e6, 1e-5, "rdp");
	for (int v = 0; v < 2; v++) {
		char sid[128], path[256], body[160];
		int64_t charges = charges_of("ss");
		double bound, g, rdp;
		dpg_resp r;
		int e;

		make_session("ss", "{\"aggregator\":\"gnmax\",\"num_teachers\":100,"
			     "\"num_classes\":3,\"sigma2\":40}", sid, sizeof(sid));
		snprintf(path, sizeof(path), "/v1/datasets/ss/pate/sessions/%s/queries", sid);
		snprintf(body, sizeof(body), "{\"queries\":[{\"votes\":%s},{\"votes\":%s}]}",
			 votes[v], votes[v]);
		dpg_expect_status(&srv, "POST", path, srv.admin_key, body, 201);
		cr_assert_eq(charges_of("ss"), charges + 1);
		snprintf(path, sizeof(path), "/v1/datasets/ss/pate/sessions/%s/release", sid);
		for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
			snprintf(body, sizeof(body),
				 "{\"beta\":0.01,\"sigma\":%.17g,\"order\":10,\"delta\":1e-6}",
				 tries[i].sigma);
			r = dpg_call(&srv, "POST", path, srv.admin_key, body);
			cr_assert_eq(r.status, tries[i].status, "votes %s sigma %g: %ld %s", votes[v],
				     tries[i].sigma, r.status, r.body);
			if (r.status == 400)
				cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")),
						 "/sigma", "%s", r.body);
			dpg_resp_free(&r);
		}
		cr_assert_eq(charges_of("ss"), charges + 1);
		/* A sigma that fits: released, charged, on the public grid. */
		r = dpg_call(&srv, "POST", path, srv.admin_key,
			     "{\"beta\":0.01,\"sigma\":20,\"order\":10,\"delta\":1e-6}");
		cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
		bound = dpg_num(r.json, "rdp_data_independent");
		rdp = dpg_num(r.json, "rdp");
		frexp(256 * bound * 20, &e);
		g = ldexp(1.0, e - 20);
		cr_assert_eq(fmod(rdp, g), 0.0, "rdp %.17g is off the public grid %.17g", rdp, g);
		dpg_resp_free(&r);
		cr_assert_eq(charges_of("ss"), charges + 2);
	}
}

/* A small LCG: the synthetic ensemble's data (not privacy noise). */
static uint64_t lcg_state = 20180215;

static double unif(void)
{
	lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(lcg_state >> 11) * 0x1p-53;
}

/*
 * One query of a synthetic ensemble: a true class; each teacher votes it
 * with probability `acc`, otherwise a uniformly random other class.
 * Returns the plurality of the votes (first on ties) and fills votes.
 */
static int ensemble_query(double acc, int *pred, int votes[CLASSES])
{
	int y = (int)(unif() * CLASSES), best = 0;

	memset(votes, 0, CLASSES * sizeof(int));
	for (int t = 0; t < TEACHERS; t++) {
		int c = y;

		if (unif() >= acc)
			c = (y + 1 + (int)(unif() * (CLASSES - 1))) % CLASSES;
		pred[t] = c;
		votes[c]++;
	}
	for (int c = 1; c < CLASSES; c++)
		if (votes[c] > votes[best])
			best = c;
	return best;
}

Test(pate_session, synthetic_ensemble_end_to_end)
{
	enum { BATCHES = 20, PER_BATCH = 100 };
	const double delta = 1e-5, order = 16, beta = 0.02;
	char sid[128], path[256];
	int64_t requested = 0, labelled = 0, correct = 0;
	int64_t checks = 0, answers = 0;
	double eps_charged, eps_di, eps_dd, eps_di_order;
	int truth[PER_BATCH], pred[TEACHERS], votes[CLASSES];
	dpg_resp r;

	/* The default rdp ledger: checks, answers and the release (a pate_gnss
	 * event, Theorem 23's curve) compose in RDP. */
	dpg_make_dataset(&srv, "ens", 1e5, 1e-3, "rdp");
	make_session("ens", "{\"aggregator\":\"confident_gnmax\",\"num_teachers\":250,\"num_classes\":10,"
		     "\"sigma1\":150,\"sigma2\":40,\"threshold\":200,\"delta\":1e-10}", sid, sizeof(sid));
	snprintf(path, sizeof(path), "/v1/datasets/ens/pate/sessions/%s/queries", sid);
	for (int b = 0; b < BATCHES; b++) {
		json_t *qs = json_array(), *body;
		json_t *labels;
		char *text;

		for (int i = 0; i < PER_BATCH; i++) {
			/* 90% strong consensus, 10% hard queries. */
			double acc = unif() < 0.9 ? 0.99 : 0.35;
			json_t *arr = json_array();

			truth[i] = ensemble_query(acc, pred, votes);
			/* Half the batches send per-teacher predictions. */
			if (b % 2) {
				for (int t = 0; t < TEACHERS; t++)
					json_array_append_new(arr, json_integer(pred[t]));
				json_array_append_new(qs, json_pack("{s:o}", "predictions", arr));
			} else {
				for (int c = 0; c < CLASSES; c++)
					json_array_append_new(arr, json_integer(votes[c]));
				json_array_append_new(qs, json_pack("{s:o}", "votes", arr));
			}
		}
		body = json_pack("{s:o}", "queries", qs);
		text = json_dumps(body, JSON_COMPACT);
		r = dpg_call(&srv, "POST", path, srv.admin_key, text);
		cr_assert_eq(r.status, 201, "batch %d: %ld %.300s", b, r.status, r.body);
		labels = json_object_get(r.json, "labels");
		cr_assert_eq(json_array_size(labels), PER_BATCH);
		for (int i = 0; i < PER_BATCH; i++) {
			json_t *l = json_array_get(labels, i);

			requested++;
			if (json_is_integer(l)) {
				labelled++;
				correct += json_integer_value(l) == truth[i];
			}
		}
		checks += (int64_t)dpg_num(r.json, "checks");
		answers += (int64_t)dpg_num(r.json, "teacher_answers");
		dpg_resp_free(&r);
		json_decref(body);
		free(text);
	}
	cr_assert_eq(checks, requested);
	cr_assert_eq(answers, labelled);

	r = dpg_call(&srv, "GET", "/v1/datasets/ens/budget", srv.admin_key, NULL);
	eps_charged = dpg_num(r.json, "spent.epsilon");
	dpg_resp_free(&r);
	/* The ledger charged exactly the data-independent events: its spent
	 * epsilon is the RDP accountant's for them at the filter's 20 orders and
	 * delta share (docs/concepts.md: delta_B / 20). */
	{
		char body[768];
		double want;

		snprintf(body, sizeof(body),
			 "{\"event\":{\"type\":\"composed\",\"events\":["
			 "{\"type\":\"self_composed\",\"count\":%lld,\"event\":{\"type\":\"pate_threshold\",\"sigma\":150}},"
			 "{\"type\":\"self_composed\",\"count\":%lld,\"event\":{\"type\":\"gnmax\",\"sigma\":40}}]},"
			 "\"delta\":5e-05,\"accountant\":\"rdp\",\"orders\":[1.5,1.75,2,2.5,3,4,5,6,8,10,12,14,16,20,24,32,48,64,128,256]}",
			 (long long)checks, (long long)answers);
		r = dpg_call(&srv, "POST", "/v1/accountant/epsilon", NULL, body);
		cr_assert_eq(r.status, 200, "%s", r.body);
		want = dpg_num(r.json, "epsilon");
		dpg_resp_free(&r);
		cr_assert(fabs(eps_charged - want) <= 1e-9 * want, "ledger %.12g, accountant %.12g",
			  eps_charged, want);
	}

	/* The data-independent epsilon of the same mechanisms composed by RDP
	 * (what an rdp ledger charges), minimised over the default orders. */
	{
		char body[512];

		snprintf(body, sizeof(body),
			 "{\"event\":{\"type\":\"composed\",\"events\":["
			 "{\"type\":\"self_composed\",\"count\":%lld,\"event\":{\"type\":\"pate_threshold\",\"sigma\":150}},"
			 "{\"type\":\"self_composed\",\"count\":%lld,\"event\":{\"type\":\"gnmax\",\"sigma\":40}}]},"
			 "\"delta\":%g,\"accountant\":\"rdp\"}",
			 (long long)checks, (long long)answers, delta);
		r = dpg_call(&srv, "POST", "/v1/accountant/epsilon", NULL, body);
		cr_assert_eq(r.status, 200, "%s", r.body);
		eps_di = dpg_num(r.json, "epsilon");
		dpg_resp_free(&r);
	}

	/* The release of the data-dependent RDP (Theorem 23 needs beta <
	 * 1 / (2 order); a release noise of 8 times the smooth sensitivity). */
	{
		char body[256], rpath[256];

		snprintf(rpath, sizeof(rpath), "/v1/datasets/ens/pate/sessions/%s/release", sid);
		snprintf(body, sizeof(body), "{\"beta\":%g,\"sigma\":8,\"order\":%g,\"delta\":%g}", beta,
			 order, delta);
		r = dpg_call(&srv, "POST", rpath, srv.admin_key, body);
		cr_assert_eq(r.status, 201, "%s", r.body);
		eps_dd = dpg_num(r.json, "epsilon");
		eps_di_order = dpg_num(r.json, "epsilon_data_independent");
		cr_assert_eq(dpg_num(r.json, "answers_covered"), (double)answers);
		cr_assert_eq(dpg_num(r.json, "checks_covered"), (double)checks);
		printf("PATE e2e: %lld queries, answered %.3f, accuracy %.4f vs plurality; "
		       "charged (rdp ledger) eps %.3f; data-independent RDP eps %.3f (delta %g); "
		       "released data-dependent eps %.3f at order %g (rdp %.4f + release %.4f; "
		       "data-independent at that order %.3f)\n",
		       (long long)requested, (double)labelled / (double)requested,
		       (double)correct / (double)labelled, eps_charged, eps_di, delta, eps_dd, order,
		       dpg_num(r.json, "rdp"), dpg_num(r.json, "rdp_of_release"),
		       dpg_num(r.json, "epsilon_data_independent"));
		dpg_resp_free(&r);
	}
	/* Known truth of the ensemble: the strong-consensus queries dominate. */
	cr_assert_gt((double)labelled / (double)requested, 0.3);
	cr_assert_gt((double)correct / (double)labelled, 0.97);
	/*
	 * Compared at the release's order (both converted at delta there).  The
	 * released figure varies from run to run: the votes and the GNMax noise
	 * are drawn afresh, which moves the private data-dependent RDP, and the
	 * release adds noise of sd sigma * SS on top.  Over many runs it spread
	 * from 0.8 to 6.7 (once) against a data-independent figure of 12.8-13.0
	 * at order 16; an earlier bound of half the latter assumed only the
	 * release noise and failed on that draw.  The claim tested is the
	 * direction: the data-dependent analysis beats the data-independent one.
	 */
	cr_assert_lt(eps_dd, eps_di_order,
		     "data-dependent %g is not below data-independent %g at order %g", eps_dd,
		     eps_di_order, order);
}

/* Dataset `dataset` (budget 10^6, rdp) and a session of `config` on it:
 * the session's id in sid[128], its queries' path in path[256]. */
static void session_on_new_dataset(const char *dataset, const char *config, char sid[128],
				   char path[256])
{
	dpg_make_dataset(&srv, dataset, 1e6, 1e-5, "rdp");
	make_session(dataset, config, sid, 128);
	snprintf(path, 256, "/v1/datasets/%s/pate/sessions/%s/queries", dataset, sid);
}

/* A batch body of k copies of `query` in body (size cap), which must
 * hold it. */
static void repeated_queries(char *body, size_t cap, int k, const char *query)
{
	size_t n = (size_t)snprintf(body, cap, "{\"queries\":[");

	for (int i = 0; i < k && n < cap; i++)
		n += (size_t)snprintf(body + n, cap - n, "%s%s", i ? "," : "", query);
	cr_assert_lt(n + 2, cap, "a batch of %d queries does not fit in %zu bytes", k, cap);
	snprintf(body + n, cap - n, "]}");
}

/*
 * A batch's queries x classes is bounded before anything is allocated:
 * queries given as predictions take a few bytes each in the body but
 * num_classes vote counts each in the server.  With 100000 classes, 42
 * queries (4.2e6 > 2^22 cells) are refused with 400 at /queries and nothing
 * is charged; 41 are answered.  (Before, 10000 such queries made the server
 * allocate 8 GB per array.)
 */
Test(pate_session, a_batch_of_queries_times_classes_is_bounded)
{
	char sid[128], path[256], *body = malloc(65536);
	dpg_resp r;

	cr_assert_not_null(body);
	session_on_new_dataset("wide", "{\"aggregator\":\"gnmax\",\"num_teachers\":3,"
			       "\"num_classes\":100000,\"sigma2\":40}", sid, path);
	for (int k = 42; k >= 41; k--) {
		repeated_queries(body, 65536, k, "{\"predictions\":[7,7,99999]}");
		r = dpg_call(&srv, "POST", path, srv.admin_key, body);
		if (k == 42) {
			cr_assert_eq(r.status, 400, "%ld %s", r.status, r.body);
			cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "/queries");
			cr_assert(strstr(r.body, "41 queries"), "%s", r.body);
			cr_assert_eq(charges_of("wide"), 0);
		} else {
			cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
			cr_assert_eq(json_array_size(json_object_get(r.json, "labels")), 41, "%s", r.body);
			cr_assert_eq(charges_of("wide"), 1);
		}
		dpg_resp_free(&r);
	}
	free(body);
}

/*
 * A release at a tiny beta answers in seconds: 10^6 teachers, 500
 * answers of votes (990000, 1111 x 9), beta 1e-9, where the horizon is
 * every distance.  Uncapped it walked 5 * 10^8 distances and gave no
 * answer within the harness's 60 s (2 to 2.5 minutes at sigma2 10^5).
 * Capped it takes about 5 s here and 7 s in the sanitizer build; it is
 * charged once and its figure is finite.
 */
Test(pate_session, a_release_at_a_tiny_beta_answers_promptly)
{
	enum { ANSWERS = 500 };
	char sid[128], path[256], *body = malloc(65536);
	double t0, took;
	dpg_resp r;

	cr_assert_not_null(body);
	session_on_new_dataset("many", "{\"aggregator\":\"gnmax\",\"num_teachers\":1000000,"
			       "\"num_classes\":10,\"sigma2\":40,\"orders\":[14]}", sid, path);
	repeated_queries(body, 65536, ANSWERS,
			 "{\"votes\":[990000,1111,1111,1111,1111,1111,1111,1111,1111,1111]}");
	dpg_expect_status(&srv, "POST", path, srv.admin_key, body, 201);
	cr_assert_eq(charges_of("many"), 1);
	snprintf(path, sizeof(path), "/v1/datasets/many/pate/sessions/%s/release", sid);
	t0 = dpg_now_s();
	r = dpg_call(&srv, "POST", path, srv.admin_key,
		     "{\"beta\":1e-9,\"sigma\":20,\"order\":14,\"delta\":1e-6}");
	took = dpg_now_s() - t0;
	cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
	cr_assert(isfinite(dpg_num(r.json, "rdp")), "%s", r.body);
	dpg_resp_free(&r);
	cr_assert_eq(charges_of("many"), 2);
	cr_log_info("release at beta 1e-9 of 500 answers from 10^6 teachers: %.2f s", took);
	cr_assert_lt(took, 30.0 * dpg_time_scale(), "the release took %.1f s", took);
	free(body);
}

/*
 * A dataset's sessions are listed a page at a time, oldest first.  Of
 * 1003 sessions the default page holds the first 1000 and names the 1000th
 * as `next`; following `next` through pages of 7 reaches every session
 * made, the newest included, each once, in (created_at, id) order and in
 * the default page's order.  After the last there is an empty page.  A
 * bad `limit`, or an `after` that is no session of the dataset (another
 * dataset's included), is a 400 naming it; an unknown dataset is a 404.
 */
Test(pate_session, sessions_are_listed_a_page_at_a_time)
{
	enum { N = 1003 };
	json_t *made = json_object(), *all, *first;
	char sid[128], other[128], path[256];
	size_t i;
	dpg_resp r;

	cr_assert_not_null(made);
	dpg_make_dataset(&srv, "many", 1, 1e-5, "rdp");
	dpg_make_dataset(&srv, "other", 1, 1e-5, "rdp");
	make_session("other", CFG("\"sigma1\":2,\"sigma2\":1,\"threshold\":3"), other, sizeof(other));
	for (i = 0; i < N; i++) {
		make_session("many", CFG("\"sigma1\":2,\"sigma2\":1,\"threshold\":3"), sid, sizeof(sid));
		cr_assert_eq(json_object_set_new(made, sid, json_true()), 0);
	}

	r = dpg_call(&srv, "GET", "/v1/datasets/many/pate/sessions", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	first = json_incref(json_object_get(r.json, "sessions"));
	cr_assert_eq(json_array_size(first), 1000);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "next")),
			 json_string_value(json_object_get(json_array_get(first, 999), "id")), "%s",
			 r.body);
	dpg_resp_free(&r);

	all = dpg_list_all_of(&srv, "/v1/datasets/many/pate/sessions?limit=7", "sessions", N / 7 + 2);
	cr_assert_eq(json_array_size(all), N);
	dpg_expect_listed_once(all, made, first, false);

	snprintf(path, sizeof(path), "/v1/datasets/many/pate/sessions?after=%s",
		 json_string_value(json_object_get(json_array_get(all, N - 1), "id")));
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_eq(json_array_size(json_object_get(r.json, "sessions")), 0, "%s", r.body);
	cr_assert(json_is_null(json_object_get(r.json, "next")), "%s", r.body);
	dpg_resp_free(&r);

	dpg_expect_bad_query(&srv, "/v1/datasets/many/pate/sessions?limit=0", "limit");
	dpg_expect_bad_query(&srv, "/v1/datasets/many/pate/sessions?limit=1001", "limit");
	dpg_expect_bad_query(&srv, "/v1/datasets/many/pate/sessions?limit=x", "limit");
	dpg_expect_bad_query(&srv, "/v1/datasets/many/pate/sessions?after=pate_000000000000000000000000",
			     "after");
	dpg_expect_bad_query(&srv, "/v1/datasets/many/pate/sessions?after=", "after");
	snprintf(path, sizeof(path), "/v1/datasets/many/pate/sessions?after=%s", other);
	dpg_expect_bad_query(&srv, path, "after");
	dpg_expect_status(&srv, "GET", "/v1/datasets/none/pate/sessions?limit=0", srv.admin_key,
			  NULL, 404);
	json_decref(first);
	json_decref(all);
	json_decref(made);
}
