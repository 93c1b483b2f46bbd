/*
 * bench_pate.c: timing of the PATE data-dependent analysis.
 *
 * Prints, for 250 and 5000 teachers, the time of one smooth-sensitivity
 * computation (local sensitivity at every distance, Algorithms 3-5, then the
 * discounted maximum), the same for the two-sided bound a release uses (its
 * grid once per release, then per query, with its S against the walk's),
 * a whole session release of many answers walking every distance (the
 * baseline) against one cut at its horizon (and the walk's cap) after a
 * first pass,
 * and the number of label queries whose cost (Proposition
 * 7 + Theorem 6 at 9 orders, with the threshold check) is computed per
 * second, in the library and through the /v1/pate/cost handler (JSON in and
 * out, no HTTP).  The baseline, measured in the same run, is the
 * data-independent cost lambda / sigma^2 at the same orders.
 *
 * usage: bench_pate [seconds per figure, default 0.5]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "acct.h"
#include "api.h"
#include "mech.h"
#include "bench_common.h"
#include "test_votes.h"

#define CLASSES 10

static const double orders[] = {1.5, 2, 3, 5, 8, 16, 32, 64, 128};
#define N_ORDERS (sizeof(orders) / sizeof(orders[0]))

struct query {
	double votes[CLASSES];
};

/* Label queries a cost figure cycles through. */
#define COST_QUERIES 1024

/* One call of a timed routine on its state; 0, or -1 to stop the timing. */
typedef int (*timed_fn)(void *state);

/*
 * Calls fn(state) until `budget` seconds pass (at least once), and gives
 * the number of calls and the seconds they took.  Returns 0, or -1 as soon
 * as a call fails.
 */
static int time_calls(double budget, timed_fn fn, void *state, uint64_t *ret_calls,
		      double *ret_s)
{
	double t0 = bench_now_s(), t;
	uint64_t calls = 0;

	do {
		if (fn(state) < 0)
			return -1;
		calls++;
	} while ((t = bench_now_s()) - t0 < budget);
	*ret_calls = calls;
	*ret_s = t - t0;
	return 0;
}

/* Calls per second of fn(state) over `budget` seconds, or -1. */
static int rate_of(double budget, timed_fn fn, void *state, uint64_t *ret_rate)
{
	uint64_t calls;
	double s;

	if (time_calls(budget, fn, state, &calls, &s) < 0)
		return -1;
	*ret_rate = (uint64_t)((double)calls / s);
	return 0;
}

/* What one smooth-sensitivity computation reads and writes. */
struct smooth_state {
	acct_pate_workspace *ws;
	const double *votes;
	size_t m;
	int64_t teachers;
	double sigma, order, beta;
	double *ls;  /* local sensitivity at every distance */
	double ss;   /* the last smooth sensitivity */
	acct_error err;
};

/* Local sensitivity at every distance (Algorithms 3-5), then the
 * discounted maximum. */
static int smooth_once(void *state)
{
	struct smooth_state *s = state;

	if (acct_pate_gnmax_local_sensitivity(s->ws, s->votes, s->m, s->teachers, s->sigma,
					      s->order, s->ls, &s->err) < 0) {
		fprintf(stderr, "local sensitivity: %s\n", s->err.text);
		return -1;
	}
	s->ss = acct_pate_smooth_sensitivity(s->beta, s->ls, (size_t)s->teachers);
	return 0;
}

/* One smooth-sensitivity computation on `votes` (m classes), timed.
 * Returns 0, or -1 (nothing written) on failure. */
static int time_smooth(double budget, const double *votes, size_t m, int64_t teachers, double sigma,
		       double order, double beta, double *ret_ms, double *ret_ss)
{
	struct smooth_state s = {
		.ws = acct_pate_workspace_new(m, teachers), .votes = votes, .m = m,
		.teachers = teachers, .sigma = sigma, .order = order, .beta = beta,
		.ls = malloc((size_t)teachers * sizeof(double)),
	};
	uint64_t calls;
	double secs;
	int rc = -1;

	acct_error_init(&s.err);
	if (!s.ws || !s.ls || time_calls(budget, smooth_once, &s, &calls, &secs) < 0)
		goto out;
	*ret_ms = 1e3 * secs / (double)calls;
	*ret_ss = s.ss;
	rc = 0;
out:
	acct_pate_workspace_free(s.ws);
	free(s.ls);
	return rc;
}

static int bench_smooth(double budget, int64_t teachers, double sigma, double conc, double order,
			double beta)
{
	double votes[CLASSES], ms, ss;
	uint64_t state = 1;

	test_vote_histogram(votes, CLASSES, teachers, conc, &state);
	if (time_smooth(budget, votes, CLASSES, teachers, sigma, order, beta, &ms, &ss) < 0)
		return 1;
	printf("smooth sensitivity  teachers %6lld  top share %.2f  sigma %5.0f  order %3.0f  beta %.4f: "
	       "%9.3f ms/call  (SS %.3g)\n",
	       (long long)teachers, conc, sigma, order, beta, ms, ss);
	return 0;
}

/* What one release-bound computation reads and writes. */
struct release_state {
	acct_pate_workspace *ws;
	const acct_pate_ls_bound *b;
	const double *votes;
	double beta;
	double *ls;  /* the bound at every distance */
	double ss;
	acct_error err;
};

/* What a release does per answered query: the two-sided bound at every
 * distance, then (here, per query) the discounted maximum. */
static int release_once(void *state)
{
	struct release_state *s = state;

	if (acct_pate_ls_bound_at(s->ws, s->b, s->votes, s->ls, &s->err) < 0) {
		fprintf(stderr, "release bound: %s\n", s->err.text);
		return -1;
	}
	s->ss = acct_pate_smooth_sensitivity(s->beta, s->ls, acct_pate_ls_bound_distances(s->b));
	return 0;
}

/*
 * The release's bound (acct_pate_ls_bound) on `votes` (m classes): the
 * grid's one-off cost per release, the cost per query, and its S and noise
 * against the walk's (the price of a bound that is smooth everywhere).
 * Prints after `label`.
 */
static int time_release(double budget, const char *label, const double *votes, size_t m,
			int64_t teachers, double sigma, double order, double beta)
{
	double walk_ms, walk_ss, secs, t0, floor;
	struct release_state s = {.votes = votes, .beta = beta};
	acct_pate_workspace *ws = acct_pate_workspace_new(m, teachers);
	acct_pate_ls_bound *b = NULL;
	uint64_t calls;
	int rc = 1;

	acct_error_init(&s.err);
	t0 = bench_now_s();
	if (!ws || acct_pate_ls_bound_new(ws, m, teachers, sigma, order, &b, &s.err) < 0) {
		fprintf(stderr, "release bound: %s\n", s.err.text);
		goto out;
	}
	secs = bench_now_s() - t0;
	s.b = b;
	s.ws = ws;
	s.ls = malloc(acct_pate_ls_bound_distances(b) * sizeof(double));
	if (!s.ls || time_calls(budget, release_once, &s, &calls, &t0) < 0 ||
	    time_smooth(budget, votes, m, teachers, sigma, order, beta, &walk_ms, &walk_ss) < 0)
		goto out;
	/* What reaches the noise: a one-answer release's scale is
	 * max(S, 2^-8 lambda / sigma^2) (mech_pate_release_draw's floor). */
	floor = 0x1p-8 * order / (sigma * sigma);
	printf("release bound       %s: %9.3f ms/query, grid %.3f ms  (S %.3g, walk %.3g, noise %.2fx "
	       "the walk's; walk %.3f ms)\n", label, 1e3 * t0 / (double)calls, 1e3 * secs, s.ss,
	       walk_ss, fmax(s.ss, floor) / fmax(walk_ss, floor), walk_ms);
	rc = 0;
out:
	acct_pate_ls_bound_free(b);
	acct_pate_workspace_free(ws);
	free(s.ls);
	return rc;
}

/* time_release on bench_smooth's histograms. */
static int bench_release(double budget, int64_t teachers, double sigma, double conc, double order,
			 double beta)
{
	double votes[CLASSES];
	uint64_t state = 1;
	char label[128];

	test_vote_histogram(votes, CLASSES, teachers, conc, &state);
	snprintf(label, sizeof(label), "teachers %6lld  top share %.2f  sigma %5.0f  order %3.0f  beta %.4f",
		 (long long)teachers, conc, sigma, order, beta);
	return time_release(budget, label, votes, CLASSES, teachers, sigma, order, beta);
}

/* One whole release of the `answers` histograms in v (CLASSES each), cut
 * at its horizon or not; its S in *ret_ss, its seconds returned (< 0 on
 * failure). */
static double session_release(const mech_pate_cfg *c, const double *v, int answers, double beta,
			      bool cut, double *ret_ss)
{
	mech_pate_release *r = NULL;
	mech_pate_release_figures f;
	double t0 = bench_now_s();
	acct_error err;
	int rc;

	acct_error_init(&err);
	rc = mech_pate_release_new(c, c->orders[0], &r, &err);
	for (int a = 0; rc == 0 && cut && a < answers; a++)
		rc = mech_pate_release_count(r, v + (size_t)a * CLASSES, &err);
	if (rc == 0 && cut)
		mech_pate_release_horizon(r, beta, DPG_MAX_PATE_RELEASE_WALK);
	for (int a = 0; rc == 0 && a < answers; a++)
		rc = mech_pate_release_add(r, v + (size_t)a * CLASSES, &err);
	if (rc == 0)
		mech_pate_release_figures_get(r, 0, beta, &f);
	mech_pate_release_free(r);
	if (rc < 0) {
		fprintf(stderr, "session release: %s\n", err.text);
		return -1;
	}
	*ret_ss = f.ss;
	return bench_now_s() - t0;
}

/* A session's release of `answers` answers, timed once each way.  The cut
 * one's S must be the whole one's, or above it where the walk's cap
 * (DPG_MAX_PATE_RELEASE_WALK answer-distances) is below the horizon and
 * the public tail stands for the rest (docs/pate.md). */
static int bench_session_release(int64_t teachers, double sigma, int answers, double beta)
{
	mech_pate_cfg c = {.agg = MECH_PATE_GNMAX, .num_teachers = teachers,
			   .num_classes = CLASSES, .sigma2 = sigma, .student_confidence = NAN,
			   .n_orders = 1, .orders = {14}};
	double *v = malloc(sizeof(double) * CLASSES * (size_t)answers), full, cut, s_full, s_cut;
	uint64_t state = 17;

	if (!v || mech_pate_cfg_resolve(&c, NULL) < 0) {
		free(v);
		return 1;
	}
	for (int a = 0; a < answers; a++)
		test_vote_histogram(v + (size_t)a * CLASSES, CLASSES, teachers,
				    0.1 + 0.9 * (double)(a % 10) / 10.0, &state);
	full = session_release(&c, v, answers, beta, false, &s_full);
	cut = session_release(&c, v, answers, beta, true, &s_cut);
	free(v);
	if (full < 0 || cut < 0 || !(s_cut >= s_full)) {
		fprintf(stderr, "session release: S %.17g cut, %.17g whole\n", s_cut, s_full);
		return 1;
	}
	printf("session release     %7lld teachers, sigma2 %6.0f, %4d answers, beta %6.3g: every "
	       "distance %8.3f s (baseline), cut %8.3f s (%.1fx); S %.6g cut, %s\n",
	       (long long)teachers, sigma, answers, beta, full, cut, full / cut, s_cut,
	       s_cut == s_full ? "the same whole" : "above the whole");
	if (s_cut != s_full)
		printf("                    S whole %.6g: the cut's is %.6f times it\n", s_full,
		       s_cut / s_full);
	return 0;
}

/*
 * The slowest shape admitted by /v1/pate/smooth-sensitivity: the most
 * distinct vote counts that DPG_MAX_VECTOR_LEN teachers can cast (classes
 * voted 0, 1, 2, ... times), so that each step of the walk sums many terms.
 */
static int bench_smooth_worst(double budget, double sigma)
{
	int64_t teachers = DPG_MAX_VECTOR_LEN, total = 0;
	size_t m = 0;
	double *votes = malloc((size_t)teachers * sizeof(*votes)), ms, ss;
	int rc = 1;

	if (!votes)
		return 1;
	while (total + (int64_t)m <= teachers) {
		votes[m] = (double)m;
		total += (int64_t)m++;
	}
	if (time_smooth(budget, votes, m, teachers, sigma, 8, 0.0329, &ms, &ss) == 0) {
		char label[128];

		printf("smooth sensitivity  teachers %6lld  %zu classes voted 0..%zu  sigma %5.0f: %9.3f ms/call"
		       "  (SS %.3g, worst case)\n", (long long)teachers, m, m - 1, sigma, ms, ss);
		snprintf(label, sizeof(label), "teachers %6lld  %zu classes voted 0..%zu  sigma %5.0f",
			 (long long)teachers, m, m - 1, sigma);
		rc = time_release(budget, label, votes, m, teachers, sigma, 8, 0.0329);
	}
	free(votes);
	return rc;
}

/* The label queries a cost figure walks through, round robin. */
struct cost_state {
	const struct query *q;
	json_t **bodies;    /* q as /v1/pate/cost bodies */
	int64_t teachers;
	double sigma;
	size_t k;           /* the next query */
	double rdp[N_ORDERS], rdp_t[N_ORDERS];
	double sink;        /* keeps the results live */
	acct_error err;
};

/* The baseline: the data-independent cost lambda / sigma^2. */
static int cost_data_independent(void *state)
{
	struct cost_state *s = state;

	acct_pate_gnmax_rdp_data_independent(s->sigma, orders, N_ORDERS, s->rdp, &s->err);
	s->sink += s->rdp[s->k++ % N_ORDERS];
	return 0;
}

/* One query's data-dependent cost in the library: Proposition 7 and
 * Theorem 6 for the answer, and the threshold check's. */
static int cost_library(void *state)
{
	struct cost_state *s = state;
	const double *v = s->q[s->k++ % COST_QUERIES].votes;
	double logq, logpr;

	if (acct_pate_gnmax_logq(v, CLASSES, s->sigma, &logq, &s->err) < 0 ||
	    acct_pate_gnmax_rdp(logq, s->sigma, orders, N_ORDERS, s->rdp, &s->err) < 0 ||
	    acct_pate_threshold_logpr(v, CLASSES, 0.6 * (double)s->teachers, 1.5 * s->sigma,
				      &logpr, &s->err) < 0 ||
	    acct_pate_threshold_rdp(logpr, 1.5 * s->sigma, orders, N_ORDERS, s->rdp_t,
				    &s->err) < 0) {
		fprintf(stderr, "cost: %s\n", s->err.text);
		return -1;
	}
	s->sink += s->rdp[4] + s->rdp_t[4];
	return 0;
}

/* The same cost through the /v1/pate/cost handler, JSON in and out. */
static int cost_route(void *state)
{
	struct cost_state *s = state;
	json_t *ans = NULL;

	if (srv_pate_cost(s->bodies[s->k++ % COST_QUERIES], &ans, &s->err) < 0) {
		fprintf(stderr, "route: %s\n", s->err.text);
		return -1;
	}
	json_decref(ans);
	return 0;
}

/* COST_QUERIES vote histograms from `teachers` teachers, the plurality's
 * share rising from 0.3 to 1, and their /v1/pate/cost bodies. */
static int cost_queries(struct query *q, json_t **bodies, int64_t teachers, double sigma)
{
	uint64_t state = 3;

	for (size_t i = 0; i < COST_QUERIES; i++) {
		json_t *v = json_array(), *o = json_array();

		test_vote_histogram(q[i].votes, CLASSES, teachers,
				    0.3 + 0.7 * (double)i / COST_QUERIES, &state);
		for (size_t c = 0; c < CLASSES; c++)
			json_array_append_new(v, json_integer((json_int_t)q[i].votes[c]));
		for (size_t c = 0; c < N_ORDERS; c++)
			json_array_append_new(o, json_real(orders[c]));
		bodies[i] = json_pack("{s:o, s:f, s:o, s:f, s:f}", "votes", v, "sigma", sigma,
				      "orders", o, "threshold", 0.6 * (double)teachers,
				      "threshold_sigma", 1.5 * sigma);
		if (!bodies[i])
			return -1;
	}
	return 0;
}

static int bench_cost(double budget, int64_t teachers, double sigma)
{
	struct query *q = malloc(COST_QUERIES * sizeof(*q));
	json_t **bodies = calloc(COST_QUERIES, sizeof(*bodies));
	struct cost_state s = {.q = q, .bodies = bodies, .teachers = teachers, .sigma = sigma};
	uint64_t base, lib, route;
	int rc = 1;

	acct_error_init(&s.err);
	if (!q || !bodies || cost_queries(q, bodies, teachers, sigma) < 0 ||
	    rate_of(budget, cost_data_independent, &s, &base) < 0 ||
	    rate_of(budget, cost_library, &s, &lib) < 0 ||
	    rate_of(budget, cost_route, &s, &route) < 0)
		goto out;
	printf("label query cost    teachers %5lld  sigma %5.0f  %zu orders + threshold: "
	       "%10.0f /s library, %9.0f /s through srv_pate_cost;  baseline data-independent %11.0f /s  (%.3g)\n",
	       (long long)teachers, sigma, N_ORDERS, (double)lib, (double)route, (double)base, s.sink > 0 ? 1.0 : 0.0);
	rc = 0;
out:
	for (size_t i = 0; bodies && i < COST_QUERIES; i++)
		json_decref(bodies[i]);
	free(bodies);
	free(q);
	return rc;
}

/*
 * Not a timing: the epsilon (delta = 1e-5, simple RDP conversion minimised
 * over orders) of `queries` GNMax answers from 250 teachers at sigma 40 when
 * the plurality holds a share in [lo, 1] of the votes, data-dependent
 * (Theorem 6) against data-independent (lambda / sigma^2).
 */
static int ensemble_epsilon(int queries, double lo)
{
	static const double ord[] = {2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 32, 50, 64, 100};
	enum { N = sizeof(ord) / sizeof(ord[0]) };
	double dep[N] = {0}, r[N], eps_dep = INFINITY, eps_ind = INFINITY;
	uint64_t state = 2018;
	acct_error err;

	acct_error_init(&err);
	for (int k = 0; k < queries; k++) {
		double votes[CLASSES], logq;

		test_vote_histogram(votes, CLASSES, 250, lo + (1 - lo) * (double)(k % 101) / 100, &state);
		if (acct_pate_gnmax_logq(votes, CLASSES, 40, &logq, &err) < 0 ||
		    acct_pate_gnmax_rdp(logq, 40, ord, N, r, &err) < 0)
			return 1;
		for (size_t i = 0; i < N; i++)
			dep[i] += r[i];
	}
	for (size_t i = 0; i < N; i++) {
		eps_dep = fmin(eps_dep, dep[i] + log(1e5) / (ord[i] - 1));
		eps_ind = fmin(eps_ind, queries * ord[i] / 1600.0 + log(1e5) / (ord[i] - 1));
	}
	printf("ensemble epsilon    %d answers, 250 teachers, sigma 40, top share in [%.2f, 1]: "
	       "data-dependent %.3f, data-independent %.3f (delta 1e-5)\n", queries, lo, eps_dep, eps_ind);
	return 0;
}

int main(int argc, char **argv)
{
	double budget = argc > 1 ? atof(argv[1]) : 0.5;
	int rc = 0;

	gsl_set_error_handler_off();
	if (!(budget > 0))
		budget = 0.5;
	rc |= ensemble_epsilon(2000, 0.5);
	rc |= ensemble_epsilon(2000, 0.8);
	rc |= ensemble_epsilon(2000, 0.95);
	rc |= bench_cost(budget, 250, 40);
	rc |= bench_cost(budget, 5000, 100);
	rc |= bench_smooth(budget, 250, 40, 0.6, 8, 0.0329);
	rc |= bench_smooth(budget, 250, 40, 1.0, 12, 0.0329);
	rc |= bench_smooth(budget, 250, 100, 0.9, 8, 0.0);
	rc |= bench_smooth(budget, 5000, 100, 0.6, 8, 0.0329);
	rc |= bench_smooth(budget, 5000, 100, 1.0, 8, 0.0329);
	rc |= bench_smooth(budget, 5000, 200, 0.3, 15, 0.0);
	rc |= bench_smooth(budget, 100000, 100, 1.0, 8, 0.0329);
	rc |= bench_release(budget, 250, 40, 0.6, 8, 0.0329);
	rc |= bench_release(budget, 250, 40, 1.0, 12, 0.0329);
	rc |= bench_release(budget, 250, 10, 0.6, 20, 0.99 / 40);
	rc |= bench_release(budget, 5000, 100, 0.6, 8, 0.0329);
	rc |= bench_release(budget, 100000, 100, 1.0, 8, 0.0329);
	rc |= bench_session_release(250, 40, 1000, 0.0329);
	rc |= bench_session_release(5000, 40, 1000, 0.0329);
	rc |= bench_session_release(100000, 100, 200, 0.0329);
	rc |= bench_session_release(100000, 1000, 200, 0.0329);
	/* A tiny beta: the horizon is every distance, and the cap binds. */
	rc |= bench_session_release(1000000, 40, 500, 1e-9);
	rc |= bench_smooth_worst(budget, 10);
	rc |= bench_smooth_worst(budget, 100);
	rc |= bench_smooth_worst(budget, 1000);
	rc |= bench_smooth_worst(budget, 1e4);
	rc |= bench_smooth_worst(budget, 1e5);
	rc |= bench_smooth_worst(budget, 1e8);
	return rc ? 1 : 0;
}
