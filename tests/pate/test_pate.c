/*
 * test_pate.c: the PATE data-dependent analysis (accountant/acct_pate.c) and
 * its stateless routes (server/api/api_pate.c).
 *
 * Expected values come from the reference vectors computed with the PATE
 * 2018 reference code (tests/data/reference/pate_*.json, tolerances as
 * ../shared/tools/refcheck uses them) or from closed forms derived here with
 * libm alone; never from this code's own output.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_sf_erf.h>
#include <jansson.h>

#include "acct.h"
#include "api.h"
#include "test_data.h"
#include "test_votes.h"

#define MAX_CLASSES 200

static void setup(void)
{
	gsl_set_error_handler_off();
}

TestSuite(pate, .init = setup);

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Copies a JSON array of numbers into v (capacity cap); returns its length. */
static size_t reals(const json_t *arr, double *v, size_t cap)
{
	size_t n = json_array_size(arr);

	cr_assert(json_is_array(arr) && n <= cap);
	for (size_t i = 0; i < n; i++)
		v[i] = json_number_value(json_array_get(arr, i));
	return n;
}

static double num(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	cr_assert(json_is_number(v), "missing number '%s'", key);
	return json_number_value(v);
}

/* refcheck's close(): |a - b| <= max(abs, rel |b|), a finite. */
static bool close_to(double a, double b, double rel, double abs_tol)
{
	return isfinite(a) && fabs(a - b) <= fmax(abs_tol, rel * fabs(b));
}

static void expect_close(const char *id, const char *what, double got, double want, double rel,
			 double abs_tol)
{
	cr_expect(close_to(got, want, rel, abs_tol), "%s %s: got %.17g, reference %.17g", id, what, got,
		  want);
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	cr_assert(j, "bad test JSON: %s", jerr.text);
	return j;
}

/* ------------------------------------------------------------------------ */
/* Reference vectors through the library                                     */
/* ------------------------------------------------------------------------ */

static void gnmax_reference_library_case(const char *id, json_t *c, void *ctx)
{
	double votes[MAX_CLASSES], orders[DPG_MAX_ORDERS], want[DPG_MAX_ORDERS], want_ind[DPG_MAX_ORDERS];
	double got[DPG_MAX_ORDERS], got_ind[DPG_MAX_ORDERS], logq;
	size_t m = reals(json_object_get(c, "votes"), votes, MAX_CLASSES);
	size_t n = reals(json_object_get(c, "orders"), orders, DPG_MAX_ORDERS);
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(reals(json_object_get(c, "rdp"), want, DPG_MAX_ORDERS), n);
	cr_assert_eq(reals(json_object_get(c, "rdp_data_independent"), want_ind, DPG_MAX_ORDERS), n);
	cr_assert_eq(acct_pate_gnmax_logq(votes, m, num(c, "sigma"), &logq, &err), 0, "%s: %s", id, err.text);
	expect_close(id, "logq", logq, num(c, "logq"), 1e-6, 1e-9);
	cr_assert_eq(acct_pate_gnmax_rdp(logq, num(c, "sigma"), orders, n, got, &err), 0, "%s: %s", id, err.text);
	cr_assert_eq(acct_pate_gnmax_rdp_data_independent(num(c, "sigma"), orders, n, got_ind, &err), 0);
	for (size_t i = 0; i < n; i++) {
		expect_close(id, "rdp", got[i], want[i], 1e-6, 1e-12);
		expect_close(id, "rdp_data_independent", got_ind[i], want_ind[i], 1e-9, 0);
	}
}

Test(pate, gnmax_reference_library)
{
	test_each_reference_case("pate_gnmax", gnmax_reference_library_case, NULL);
}

static void threshold_reference_library_case(const char *id, json_t *c, void *ctx)
{
	double votes[MAX_CLASSES], orders[DPG_MAX_ORDERS], want[DPG_MAX_ORDERS], got[DPG_MAX_ORDERS];
	double logpr;
	size_t m = reals(json_object_get(c, "votes"), votes, MAX_CLASSES);
	size_t n = reals(json_object_get(c, "orders"), orders, DPG_MAX_ORDERS);
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(reals(json_object_get(c, "rdp"), want, DPG_MAX_ORDERS), n);
	cr_assert_eq(acct_pate_threshold_logpr(votes, m, num(c, "threshold"), num(c, "sigma"), &logpr, &err),
		     0, "%s: %s", id, err.text);
	expect_close(id, "logpr_answered", logpr, num(c, "logpr_answered"), 1e-6, 1e-9);
	cr_assert_eq(acct_pate_threshold_rdp(logpr, num(c, "sigma"), orders, n, got, &err), 0, "%s: %s",
		     id, err.text);
	for (size_t i = 0; i < n; i++)
		expect_close(id, "rdp_threshold", got[i], want[i], 1e-6, 1e-12);
}

Test(pate, threshold_reference_library)
{
	test_each_reference_case("pate_threshold", threshold_reference_library_case, NULL);
}

static void smooth_sensitivity_reference_library_case(const char *id, json_t *c, void *ctx)
{
	acct_pate_workspace *ws = ctx;
	double votes[MAX_CLASSES], want_ls[10], rdp_release;
	size_t m = reals(json_object_get(c, "votes"), votes, MAX_CLASSES);
	int64_t teachers = (int64_t)num(c, "num_teachers");
	double *ls = calloc((size_t)teachers, sizeof(*ls));
	acct_error err;

	acct_error_init(&err);
	cr_assert(ls);
	cr_assert_eq(reals(json_object_get(c, "local_sensitivity_bounds_first10"), want_ls, 10), 10);
	cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, votes, m, teachers, num(c, "sigma"),
						       num(c, "order"), ls, &err),
		     0, "%s: %s", id, err.text);
	for (size_t d = 0; d < 10; d++)
		expect_close(id, "local_sensitivity", ls[d], want_ls[d], 1e-4, 1e-12);
	expect_close(id, "smooth_sensitivity",
		     acct_pate_smooth_sensitivity(num(c, "beta"), ls, (size_t)teachers),
		     num(c, "smooth_sensitivity"), 1e-4, 1e-12);
	cr_assert_eq(acct_pate_gnss_rdp(num(c, "beta"), num(c, "sigma"), num(c, "order"), &rdp_release, &err),
		     0, "%s: %s", id, err.text);
	expect_close(id, "rdp_of_release", rdp_release, num(c, "rdp_of_smooth_sensitivity_release"), 1e-6, 0);
	free(ls);
}

Test(pate, smooth_sensitivity_reference_library)
{
	acct_pate_workspace *ws = acct_pate_workspace_new(MAX_CLASSES, 5000);

	cr_assert(ws);
	test_each_reference_case("pate_smooth_sensitivity", smooth_sensitivity_reference_library_case, ws);
	acct_pate_workspace_free(ws);
}

/* ------------------------------------------------------------------------ */
/* Reference vectors through the stateless routes (refcheck's request)      */
/* ------------------------------------------------------------------------ */

static void expect_array_close(const char *id, const char *what, const json_t *got, const json_t *want,
			       size_t n, double rel, double abs_tol)
{
	cr_assert(json_is_array(got), "%s: '%s' is not an array", id, what);
	cr_expect(json_array_size(got) >= n, "%s: '%s' has %zu entries", id, what, json_array_size(got));
	for (size_t i = 0; i < n && i < json_array_size(got); i++)
		expect_close(id, what, json_number_value(json_array_get(got, i)),
			     json_number_value(json_array_get(want, i)), rel, abs_tol);
}

/*
 * Answers `body` (freed here) with srv_pate_cost as the route would, and
 * checks the answer's `scalar` against the case's and its array `array`
 * against the case's "rdp", entry by entry and in length.  Returns the
 * answer, for the checks of the caller, who frees it.
 */
static json_t *expect_cost_route(const char *id, const json_t *c, json_t *body, const char *scalar,
				 const char *array)
{
	json_t *ans = NULL;
	acct_error err;
	size_t n = json_array_size(json_object_get(c, "rdp"));

	acct_error_init(&err);
	cr_assert_eq(srv_pate_cost(body, &ans, &err), 0, "%s: %s at %s", id, err.text, err.where);
	json_decref(body);
	expect_close(id, scalar, num(ans, scalar), num(c, scalar), 1e-6, 1e-9);
	cr_expect_eq(json_array_size(json_object_get(ans, array)), n, "%s: %s length", id, array);
	expect_array_close(id, array, json_object_get(ans, array), json_object_get(c, "rdp"), n, 1e-6,
			   1e-12);
	return ans;
}

static void gnmax_reference_route_case(const char *id, json_t *c, void *ctx)
{
	json_t *body = json_pack("{s:O, s:O, s:O}", "votes", json_object_get(c, "votes"), "sigma",
				 json_object_get(c, "sigma"), "orders", json_object_get(c, "orders"));
	json_t *ans = expect_cost_route(id, c, body, "logq", "rdp");
	size_t n = json_array_size(json_object_get(c, "rdp"));

	expect_array_close(id, "rdp_data_independent", json_object_get(ans, "rdp_data_independent"),
			   json_object_get(c, "rdp_data_independent"), n, 1e-9, 0);
	cr_expect_null(json_object_get(ans, "logpr_answered"), "%s: no threshold was asked for", id);
	json_decref(ans);
}

Test(pate, gnmax_reference_route)
{
	test_each_reference_case("pate_gnmax", gnmax_reference_route_case, NULL);
}

static void threshold_reference_route_case(const char *id, json_t *c, void *ctx)
{
	json_t *body = json_pack("{s:O, s:f, s:O, s:O, s:O}", "votes", json_object_get(c, "votes"), "sigma",
				 1.0, "orders", json_object_get(c, "orders"), "threshold",
				 json_object_get(c, "threshold"), "threshold_sigma", json_object_get(c, "sigma"));

	json_decref(expect_cost_route(id, c, body, "logpr_answered", "rdp_threshold"));
}

Test(pate, threshold_reference_route)
{
	test_each_reference_case("pate_threshold", threshold_reference_route_case, NULL);
}

static void smooth_sensitivity_reference_route_case(const char *id, json_t *c, void *ctx)
{
	json_t *body = json_pack("{s:O, s:O, s:O, s:O, s:O}", "votes", json_object_get(c, "votes"),
				 "num_teachers", json_object_get(c, "num_teachers"), "sigma",
				 json_object_get(c, "sigma"), "order", json_object_get(c, "order"), "beta",
				 json_object_get(c, "beta"));
	json_t *ans = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(srv_pate_smooth_sensitivity(body, &ans, &err), 0, "%s: %s at %s", id, err.text,
		     err.where);
	expect_close(id, "smooth_sensitivity", num(ans, "smooth_sensitivity"), num(c, "smooth_sensitivity"),
		     1e-4, 1e-12);
	expect_close(id, "rdp_of_release", num(ans, "rdp_of_release"),
		     num(c, "rdp_of_smooth_sensitivity_release"), 1e-6, 0);
	cr_expect_eq(json_array_size(json_object_get(ans, "local_sensitivity")),
		     (size_t)num(c, "num_teachers"), "%s: one bound per distance", id);
	expect_array_close(id, "local_sensitivity", json_object_get(ans, "local_sensitivity"),
			   json_object_get(c, "local_sensitivity_bounds_first10"), 10, 1e-4, 1e-12);
	json_decref(ans);
	json_decref(body);
}

Test(pate, smooth_sensitivity_reference_route)
{
	test_each_reference_case("pate_smooth_sensitivity", smooth_sensitivity_reference_route_case, NULL);
}

/* ------------------------------------------------------------------------ */
/* Bad input: 400 with the field at fault                                    */
/* ------------------------------------------------------------------------ */

struct bad_case {
	const char *body;
	int code;
	const char *where;
};

static const struct bad_case bad_cost[] = {
	{"[1, 2]", ACCT_EINVAL, ""},
	{"{\"sigma\": 1, \"orders\": [2]}", ACCT_EINVAL, "/votes"},
	{"{\"votes\": [5], \"sigma\": 1, \"orders\": [2]}", ACCT_EINVAL, "/votes"},
	{"{\"votes\": \"5,3\", \"sigma\": 1, \"orders\": [2]}", ACCT_EINVAL, "/votes"},
	{"{\"votes\": [5, 3, 0, -1], \"sigma\": 1, \"orders\": [2]}", ACCT_EINVAL, "/votes/3"},
	{"{\"votes\": [5, 2.5], \"sigma\": 1, \"orders\": [2]}", ACCT_EINVAL, "/votes/1"},
	{"{\"votes\": [5, \"3\"], \"sigma\": 1, \"orders\": [2]}", ACCT_EINVAL, "/votes/1"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"num_teachers\": 7}", ACCT_EINVAL, "/votes"},
	{"{\"votes\": [5, 3], \"sigma\": 0, \"orders\": [2]}", ACCT_EINVAL, "/sigma"},
	{"{\"votes\": [5, 3], \"sigma\": -2, \"orders\": [2]}", ACCT_EINVAL, "/sigma"},
	{"{\"votes\": [5, 3], \"orders\": [2]}", ACCT_EINVAL, "/sigma"},
	{"{\"votes\": [5, 3], \"sigma\": 1}", ACCT_EINVAL, "/orders"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": []}", ACCT_EINVAL, "/orders"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2, 1]}", ACCT_EINVAL, "/orders/1"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [0.5]}", ACCT_EINVAL, "/orders/0"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"threshold\": 9, \"threshold_sigma\": 1}",
	 ACCT_EINVAL, "/threshold"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"threshold\": -1, \"threshold_sigma\": 1}",
	 ACCT_EINVAL, "/threshold"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"threshold\": 11, \"threshold_sigma\": 1,"
	 " \"num_teachers\": 10}", ACCT_EINVAL, "/threshold"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"threshold\": 5}", ACCT_EINVAL, "/threshold_sigma"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"threshold\": 5, \"threshold_sigma\": 0}",
	 ACCT_EINVAL, "/threshold_sigma"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"threshold_sigma\": 3}", ACCT_EINVAL, "/threshold"},
	{"{\"votes\": [5, 3], \"sigma\": 1, \"orders\": [2], \"extra\": 1}", ACCT_EINVAL, "/extra"},
};

static const struct bad_case bad_smooth[] = {
	{"{\"votes\": [5, 3], \"num_teachers\": 7, \"sigma\": 10, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/votes"},
	{"{\"votes\": [5, -3], \"num_teachers\": 10, \"sigma\": 10, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/votes/1"},
	{"{\"votes\": [5.5, 3], \"num_teachers\": 10, \"sigma\": 10, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/votes/0"},
	{"{\"votes\": [5, 3], \"num_teachers\": 0, \"sigma\": 10, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/num_teachers"},
	{"{\"votes\": [5, 3], \"num_teachers\": 2.5, \"sigma\": 10, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/num_teachers"},
	{"{\"votes\": [5, 3], \"sigma\": 10, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/num_teachers"},
	{"{\"votes\": [5, 3], \"num_teachers\": 10, \"sigma\": 0, \"order\": 8, \"beta\": 0.01}", ACCT_EINVAL, "/sigma"},
	{"{\"votes\": [5, 3], \"num_teachers\": 10, \"sigma\": 10, \"order\": 1, \"beta\": 0.01}", ACCT_EINVAL, "/order"},
	{"{\"votes\": [5, 3], \"num_teachers\": 10, \"sigma\": 10, \"order\": 8, \"beta\": -0.1}", ACCT_EINVAL, "/beta"},
	/* Theorem 23 needs order < 1 / (2 beta) = 5. */
	{"{\"votes\": [5, 3], \"num_teachers\": 10, \"sigma\": 10, \"order\": 8, \"beta\": 0.1}", ACCT_EINVAL, "/beta"},
	{"{\"votes\": [5, 3], \"num_teachers\": 10, \"sigma\": 10, \"order\": 8, \"beta\": 0.01, \"release_sigma\": 0}",
	 ACCT_EINVAL, "/release_sigma"},
	{"{\"votes\": [5, 3], \"num_teachers\": 1000000, \"sigma\": 10, \"order\": 8, \"beta\": 0.01}",
	 ACCT_EINVAL, "/num_teachers"},
};

static void run_bad(const struct bad_case *cases, size_t n, srv_json_fn fn)
{
	for (size_t i = 0; i < n; i++) {
		json_t *body = parse(cases[i].body), *ans = NULL;
		acct_error err;
		int rc;

		acct_error_init(&err);
		rc = fn(body, &ans, &err);
		cr_expect_eq(rc, cases[i].code, "case %zu %s: code %d (%s)", i, cases[i].body, rc, err.text);
		cr_expect_eq(err.code, cases[i].code, "case %zu: error record", i);
		cr_expect_str_eq(err.where, cases[i].where, "case %zu %s: where '%s' (%s)", i, cases[i].body,
				 err.where, err.text);
		cr_expect_null(ans, "case %zu: no answer on failure", i);
		json_decref(ans);
		json_decref(body);
	}
}

Test(pate, bad_cost_requests)
{
	run_bad(bad_cost, sizeof(bad_cost) / sizeof(bad_cost[0]), srv_pate_cost);
}

Test(pate, bad_smooth_sensitivity_requests)
{
	run_bad(bad_smooth, sizeof(bad_smooth) / sizeof(bad_smooth[0]), srv_pate_smooth_sensitivity);
}

Test(pate, bad_library_arguments)
{
	double votes[] = {5, 3}, orders[] = {2, 4}, out[2], x;
	acct_error err;

	acct_error_init(&err);
	cr_expect_eq(acct_pate_gnmax_logq(votes, 1, 1.0, &x, &err), ACCT_EINVAL);
	acct_error_init(&err);
	cr_expect_eq(acct_pate_gnmax_logq(votes, 2, -1.0, &x, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/sigma");
	acct_error_init(&err);
	cr_expect_eq(acct_pate_gnmax_rdp(0.5, 1.0, orders, 2, out, &err), ACCT_EINVAL);
	acct_error_init(&err);
	cr_expect_eq(acct_pate_gnmax_rdp(NAN, 1.0, orders, 2, out, &err), ACCT_EINVAL);
	acct_error_init(&err);
	orders[1] = 1.0;
	cr_expect_eq(acct_pate_gnmax_rdp(-3.0, 1.0, orders, 2, out, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/orders/1");
	acct_error_init(&err);
	cr_expect_eq(acct_pate_gnss_rdp(0.25, 1.0, 2.0, &x, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/beta");
	/* Out-parameters are untouched on failure. */
	x = 42;
	acct_error_init(&err);
	cr_expect_eq(acct_pate_threshold_logpr(votes, 2, NAN, 1.0, &x, &err), ACCT_EINVAL);
	cr_expect_eq(x, 42);
}

/* ------------------------------------------------------------------------ */
/* Closed forms and properties                                               */
/* ------------------------------------------------------------------------ */

/* A unanimous histogram: q <= (m - 1) Pr[N(0, 2 s^2) >= n] = (m - 1) erfc(n / 2s) / 2. */
Test(pate, unanimous_logq_closed_form)
{
	static const struct { size_t m; double n, sigma; } cases[] = {
		{10, 1000, 40}, {2, 100, 10}, {150, 250, 40}, {5, 300, 100},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		double votes[MAX_CLASSES] = {0}, logq, want;
		acct_error err;

		acct_error_init(&err);
		votes[cases[k].m / 2] = cases[k].n;
		want = log((double)(cases[k].m - 1) * 0.5 * erfc(cases[k].n / (2 * cases[k].sigma)));
		cr_assert_eq(acct_pate_gnmax_logq(votes, cases[k].m, cases[k].sigma, &logq, &err), 0);
		cr_expect(close_to(logq, fmin(want, log(1 - 1.0 / (double)cases[k].m)), 1e-12, 0),
			  "case %zu: %.17g vs %.17g", k, logq, want);
	}
}

/* A tie between two classes of m = 2: q <= Pr[N >= 0] = 1/2 = 1 - 1/m. */
Test(pate, tie_logq_is_capped)
{
	double votes[] = {7, 7}, logq;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_pate_gnmax_logq(votes, 2, 3.0, &logq, &err), 0);
	cr_expect(close_to(logq, log(0.5), 1e-15, 0));
}

/* Pr[max + N(0, s^2) >= T] = erfc((T - max) / (s sqrt 2)) / 2. */
Test(pate, threshold_logpr_closed_form)
{
	static const struct { double top, t, sigma; } cases[] = {
		{300, 250, 50}, {100, 250, 50}, {5, 5, 1}, {3004, 3500, 50},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		double votes[3] = {1, cases[k].top, 0}, logpr;
		double want = log(0.5 * erfc((cases[k].t - cases[k].top) / (cases[k].sigma * M_SQRT2)));
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_pate_threshold_logpr(votes, 3, cases[k].t, cases[k].sigma, &logpr, &err), 0);
		cr_expect(close_to(logpr, want, 1e-12, 0), "case %zu: %.17g vs %.17g", k, logpr, want);
	}
}

/* Theorem 23 at beta = 0 is the Gaussian's lambda / sigma^2. */
Test(pate, gnss_rdp_closed_form)
{
	double r;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_pate_gnss_rdp(0.0, 10.0, 5.0, &r, &err), 0);
	cr_expect(close_to(r, 0.05, 1e-15, 0));
	cr_assert_eq(acct_pate_gnss_rdp(0.01, 20.0, 8.0, &r, &err), 0);
	cr_expect(close_to(r, 8 * exp(0.02) / 400 + (0.08 - 0.5 * log(1 - 0.16)) / 7, 1e-14, 0));
}

Test(pate, smooth_sensitivity_is_discounted_max)
{
	double ls[] = {1, 3, 2, 0.5};

	cr_expect_eq(acct_pate_smooth_sensitivity(0.0, ls, 4), 3.0);
	cr_expect(close_to(acct_pate_smooth_sensitivity(1.0, ls, 4), fmax(1.0, 3 * exp(-1.0)), 1e-15, 0));
	cr_expect(close_to(acct_pate_smooth_sensitivity(0.1, ls, 4), 3 * exp(-0.1), 1e-15, 0));
}

Test(pate, data_dependent_never_above_data_independent)
{
	static const double orders[] = {1.25, 2, 3, 5, 8, 16, 32, 64, 128, 256};
	static const double sigmas[] = {5, 20, 40, 100, 200};
	static const double concs[] = {0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0};
	uint64_t state = 12345;
	size_t n = sizeof(orders) / sizeof(orders[0]);

	for (size_t a = 0; a < 5; a++) {
		for (size_t b = 0; b < 7; b++) {
			double votes[10], logq, logpr, dep[16], ind[16], tdep[16], tind[16];
			acct_error err;

			acct_error_init(&err);
			test_vote_histogram(votes, 10, 1000, concs[b], &state);
			cr_assert_eq(acct_pate_gnmax_logq(votes, 10, sigmas[a], &logq, &err), 0);
			cr_assert_eq(acct_pate_gnmax_rdp(logq, sigmas[a], orders, n, dep, &err), 0);
			cr_assert_eq(acct_pate_threshold_logpr(votes, 10, 600, sigmas[a], &logpr, &err), 0);
			cr_assert_eq(acct_pate_threshold_rdp(logpr, sigmas[a], orders, n, tdep, &err), 0);
			for (size_t i = 0; i < n; i++) {
				ind[i] = orders[i] / (sigmas[a] * sigmas[a]);
				tind[i] = orders[i] / (2 * sigmas[a] * sigmas[a]);
				cr_expect(dep[i] >= 0 && dep[i] <= ind[i], "sigma %g conc %g order %g: %g > %g",
					  sigmas[a], concs[b], orders[i], dep[i], ind[i]);
				cr_expect(tdep[i] >= 0 && tdep[i] <= tind[i], "threshold sigma %g conc %g order %g",
					  sigmas[a], concs[b], orders[i]);
			}
		}
	}
}

/* With 990 of 1000 teachers agreeing and sigma = 40, q < 1e-30 and the
 * data-dependent RDP at small orders is far below lambda / sigma^2. */
Test(pate, strong_consensus_is_nearly_free)
{
	double votes[10], logq, orders[] = {2, 8, 16}, dep[3];
	uint64_t state = 7;
	acct_error err;

	acct_error_init(&err);
	test_vote_histogram(votes, 10, 1000, 0.99, &state);
	cr_assert_eq(acct_pate_gnmax_logq(votes, 10, 40, &logq, &err), 0);
	cr_expect_lt(logq, log(1e-30));
	cr_assert_eq(acct_pate_gnmax_rdp(logq, 40, orders, 3, dep, &err), 0);
	for (size_t i = 0; i < 3; i++)
		cr_expect_lt(dep[i], 1e-6 * orders[i] / 1600, "order %g: %g", orders[i], dep[i]);
}

/*
 * Proposition 13's claim at distance 0, checked by brute force: for every
 * neighbour (one teacher moving its vote from class i to class j), the
 * released RDP moves by at most the local sensitivity bound.
 */
Test(pate, local_sensitivity_bounds_every_neighbour)
{
	static const struct { double conc, sigma, order; } cases[] = {
		{0.6, 100, 8}, {0.9, 40, 12}, {0.45, 20, 5}, {0.3, 10, 4},
	};
	acct_pate_workspace *ws = acct_pate_workspace_new(16, 250);
	uint64_t state = 99;

	cr_assert(ws);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		double votes[8], ls[250], logq, base, worst = 0;
		acct_error err;

		acct_error_init(&err);
		test_vote_histogram(votes, 8, 250, cases[k].conc, &state);
		cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, votes, 8, 250, cases[k].sigma, cases[k].order, ls,
							       &err), 0, "%s", err.text);
		cr_assert_eq(acct_pate_gnmax_logq(votes, 8, cases[k].sigma, &logq, &err), 0);
		cr_assert_eq(acct_pate_gnmax_rdp_ss(ws, logq, cases[k].sigma, cases[k].order, &base, &err), 0);
		for (size_t i = 0; i < 8; i++) {
			for (size_t j = 0; j < 8; j++) {
				double nb[8], r;

				if (i == j || votes[i] == 0)
					continue;
				memcpy(nb, votes, sizeof(nb));
				nb[i] -= 1;
				nb[j] += 1;
				cr_assert_eq(acct_pate_gnmax_logq(nb, 8, cases[k].sigma, &logq, &err), 0);
				cr_assert_eq(acct_pate_gnmax_rdp_ss(ws, logq, cases[k].sigma, cases[k].order, &r, &err), 0);
				worst = fmax(worst, fabs(r - base));
			}
		}
		cr_expect(worst <= ls[0] * (1 + 1e-9) + 1e-300, "case %zu: neighbours move %g, bound %g", k, worst,
			  ls[0]);
		for (size_t d = 0; d < 250; d++)
			cr_expect(isfinite(ls[d]) && ls[d] >= 0, "case %zu d %zu: %g", k, d, ls[d]);
	}
	acct_pate_workspace_free(ws);
}

/* The RDP the smooth-sensitivity analysis releases for one histogram. */
static double released_rdp(acct_pate_workspace *ws, const double *v, size_t m, double sigma,
			   double order)
{
	double logq, r;

	cr_assert_eq(acct_pate_gnmax_logq(v, m, sigma, &logq, NULL), 0);
	cr_assert_eq(acct_pate_gnmax_rdp_ss(ws, logq, sigma, order, &r, NULL), 0);
	return r;
}

enum { NB_MAX = 81 };

/* v's neighbours under the product's relation (a vote moved, given when
 * fewer than `teachers` voted, or withdrawn) into nb[k][0 .. m-1]; returns
 * how many. */
static size_t neighbours(const double *v, size_t m, int64_t teachers, double nb[][8])
{
	double total = 0;
	size_t n = 0;

	for (size_t i = 0; i < m; i++)
		total += v[i];
	for (size_t i = 0; i <= m; i++)
		for (size_t j = 0; j <= m; j++) {
			/* i == m: a vote given; j == m: a vote withdrawn. */
			if (i == j || (i < m && v[i] == 0) || (i == m && total >= (double)teachers))
				continue;
			memcpy(nb[n], v, m * sizeof(double));
			if (i < m)
				nb[n][i] -= 1;
			if (j < m)
				nb[n][j] += 1;
			n++;
		}
	return n;
}

/* The worst move of the released RDP from base over v's neighbours
 * (neighbours, m <= 8), and the largest distance-0 bound of those
 * neighbours, into *ret_next. */
static double worst_neighbour(acct_pate_workspace *ws, const double *v, size_t m, int64_t teachers,
			      double sigma, double order, double base, double *ls, double *ret_next)
{
	double nb[NB_MAX][8], worst = 0, next = 0;
	size_t n_nb = neighbours(v, m, teachers, nb);

	for (size_t i = 0; i < n_nb; i++) {
		worst = fmax(worst, fabs(released_rdp(ws, nb[i], m, sigma, order) - base));
		cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, nb[i], m, teachers, sigma, order, ls,
							       NULL), 0);
		next = fmax(next, ls[0]);
	}
	*ret_next = next;
	return worst;
}

/*
 * Proposition 13 on random neighbours of the relation the product uses (a
 * teacher's vote moved, given or withdrawn: docs/pate.md, "The
 * statistics' sensitivities"): on 60 random histograms (2 to 8 classes, up
 * to 120 teachers, up to half of them abstaining), the released RDP moves
 * by at most the distance-0 bound, and every neighbour's distance-0 bound
 * is within the histogram's distance-1 bound, which is what makes
 * max_d e^(-beta d) LS(d) a smooth upper bound (Nissim, Raskhodnikova and
 * Smith 2007, Definition 2.1).  The moves reach a good share of the bound.
 * Only sigma >= 20 with orders up to 14: with smaller sigma or higher
 * orders (sigma 10 at order 20, for one) the walk of Algorithms 4-5 goes
 * the wrong way and the second check fails (docs/pate.md, "The release's
 * smooth bound"); releases use the two-sided bound tested below.
 */
Test(pate, local_sensitivity_bounds_random_neighbours_with_abstentions)
{
	static const double sigmas[4] = {20, 40, 100, 200}, orders[4] = {3, 8, 14, 14};
	acct_pate_workspace *ws = acct_pate_workspace_new(16, 120);
	uint64_t state = 2024;
	double power = 0;

	cr_assert(ws);
	for (int trial = 0; trial < 60; trial++) {
		double v[8], ls[120], nls[120], base, worst, next;
		size_t m = 2 + (size_t)(state >> 40) % 7;
		int64_t teachers = 10 + (int64_t)((state >> 20) % 111);
		int64_t voted = teachers - (int64_t)((state >> 30) % (uint64_t)(teachers / 2 + 1));
		double sigma = sigmas[trial % 4], order = orders[(trial / 4) % 4];

		test_vote_histogram(v, m, voted, 0.3 + 0.7 * (double)((state >> 12) % 100) / 100.0,
				    &state);
		cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, v, m, teachers, sigma, order, ls,
							       NULL), 0);
		base = released_rdp(ws, v, m, sigma, order);
		worst = worst_neighbour(ws, v, m, teachers, sigma, order, base, nls, &next);
		cr_assert_leq(worst, ls[0] * (1 + 1e-9) + 1e-300,
			      "trial %d: a neighbour moves the RDP by %g, LS(0) is %g", trial, worst,
			      ls[0]);
		cr_assert_leq(next, ls[1] * (1 + 1e-9) + 1e-300,
			      "trial %d: a neighbour's LS(0) is %g, LS(1) is %g", trial, next, ls[1]);
		if (ls[0] > 0)
			power = fmax(power, worst / ls[0]);
	}
	cr_assert_gt(power, 0.5, "no neighbour came near the bound (%g)", power);
	acct_pate_workspace_free(ws);
}

/* ---- the release's two-sided bound ----------------------------------- */

/* The release's bound at every distance for histogram v, into A. */
static void release_bound(acct_pate_workspace *ws, const acct_pate_ls_bound *b, const double *v,
			  double *A)
{
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_pate_ls_bound_at(ws, b, v, A, &err), 0, "%s", err.text);
}

/* The walk's smooth sensitivity (Algorithms 4-5) at v. */
static double walk_smooth(acct_pate_workspace *ws, const double *v, size_t m, int64_t teachers,
			  double sigma, double order, double beta)
{
	double ls[250];

	cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, v, m, teachers, sigma, order, ls, NULL), 0);
	return acct_pate_smooth_sensitivity(beta, ls, (size_t)teachers);
}

/* z with ln((m - 1)/2 erfc(z)) = logq, by bisection on GSL's ln erfc
 * (independent of the library's Newton inverse). */
static double z_of_logq(double logq, size_t m)
{
	double lo = -10, hi = 1e5;

	/* 90 halvings: below 1e-22 of the bracket, far inside the 1e-9 checked. */
	for (int i = 0; i < 90; i++) {
		double mid = 0.5 * (lo + hi);

		if (log(0.5 * (double)(m - 1)) + gsl_sf_log_erfc(mid) > logq)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

/*
 * The release bound's lemma (docs/pate.md, "The release's smooth bound",
 * fact 2; Appendix B.4.1): one teacher moving, giving or withdrawing its
 * vote moves z = erfc^-1(2q/(m - 1)) by at most 1/sigma, for q of
 * Proposition 7 (capped at 1 - 1/m).  3000 random histograms, 2 to 8
 * classes, 1 to 60 teachers (up to half abstaining), top shares from 0
 * (ties, the top changing) to 1, sigma from 0.3 to 200, every neighbour.
 * Two classes reach the bound: q is then erfc of the one margin, which
 * moves by 2 votes.
 */
Test(pate, one_teacher_moves_z_by_at_most_one_over_sigma)
{
	static const double sigmas[6] = {0.3, 1, 3, 10, 40, 200};
	uint64_t state = 3;
	double worst = 0;

	for (int t = 0; t < 3000; t++) {
		size_t m = 2 + (size_t)(state >> 40) % 7, n_nb;
		int64_t teachers = 1 + (int64_t)((state >> 20) % 60);
		int64_t voted = teachers - (int64_t)((state >> 30) % (uint64_t)(teachers / 2 + 1));
		double sigma = sigmas[t % 6], v[8], nb[NB_MAX][8], logq, zx;

		test_vote_histogram(v, m, voted, (double)((state >> 12) % 1000) / 1000.0, &state);
		cr_assert_eq(acct_pate_gnmax_logq(v, m, sigma, &logq, NULL), 0);
		zx = z_of_logq(logq, m);
		n_nb = neighbours(v, m, teachers, nb);
		for (size_t i = 0; i < n_nb; i++) {
			double moved;

			cr_assert_eq(acct_pate_gnmax_logq(nb[i], m, sigma, &logq, NULL), 0);
			moved = sigma * fabs(z_of_logq(logq, m) - zx);
			cr_assert_leq(moved, 1 + 1e-9, "case %d: sigma |dz| = %.12f", t, moved);
			worst = fmax(worst, moved);
		}
	}
	cr_assert_gt(worst, 0.999, "no neighbour came near the bound (%g)", worst);
}

/*
 * The bound cut at n distances is the first n values of the whole one;
 * and past acct_pate_ls_bound_horizon no term e^(-beta d) S(d) of the
 * summed bounds of several histograms exceeds S(0), so the smooth
 * sensitivity over the horizon is the whole one's, bit for bit.  At
 * thousands of teachers the horizon is far below the distances, so the
 * cut is exercised.
 */
Test(pate, release_bound_horizon_keeps_the_smooth_sensitivity)
{
	static const struct {
		int64_t n;
		size_t m;
		double sigma, order;
	} set[] = {{4000, 10, 40, 14}, {3000, 4, 300, 8}, {1500, 3, 10, 20}, {2000, 6, 5, 14}};
	static const double betas[] = {0.0329, 0.1, 0.01, 0.001};
	uint64_t state = 91;
	size_t cut = 0;

	for (size_t k = 0; k < sizeof(set) / sizeof(set[0]); k++) {
		acct_pate_workspace *ws = acct_pate_workspace_new(set[k].m, set[k].n);
		acct_pate_ls_bound *b = NULL;
		size_t D, answers = 1 + (size_t)(state >> 20) % 8;
		double *one, *sum, v[10];

		cr_assert(ws);
		cr_assert_eq(acct_pate_ls_bound_new(ws, set[k].m, set[k].n, set[k].sigma, set[k].order,
						    &b, NULL), 0);
		D = acct_pate_ls_bound_distances(b);
		one = malloc(D * sizeof(*one));
		sum = calloc(D, sizeof(*sum));
		cr_assert(one && sum);
		for (size_t a = 0; a < answers; a++) {
			size_t n = 1 + (size_t)(state >> 24) % D;
			double *pre = malloc(n * sizeof(*pre));

			test_vote_histogram(v, set[k].m, set[k].n - (int64_t)((state >> 30) % 20),
					    0.2 + 0.8 * (double)((state >> 12) % 1000) / 1000.0, &state);
			cr_assert_eq(acct_pate_ls_bound_at(ws, b, v, one, NULL), 0);
			cr_assert_not_null(pre);
			cr_assert_eq(acct_pate_ls_bound_prefix(ws, b, v, pre, n, NULL), 0);
			cr_assert_eq(memcmp(pre, one, n * sizeof(*pre)), 0, "case %zu: a prefix of %zu differs",
				     k, n);
			free(pre);
			for (size_t d = 0; d < D; d++)
				sum[d] += one[d];
		}
		for (size_t i = 0; i < sizeof(betas) / sizeof(betas[0]); i++) {
			size_t h = acct_pate_ls_bound_horizon(b, betas[i], (double)answers, sum[0]);

			cr_assert(h >= 1 && h <= D);
			for (size_t d = h; d < D; d++)
				cr_assert_leq(sum[d] * exp(-betas[i] * (double)d), sum[0],
					      "case %zu beta %g: d %zu past the horizon %zu", k, betas[i], d, h);
			cr_assert_eq(acct_pate_smooth_sensitivity(betas[i], sum, h),
				     acct_pate_smooth_sensitivity(betas[i], sum, D));
			cut += h < D / 2;
		}
		cr_assert_eq(acct_pate_ls_bound_prefix(ws, b, v, one, 0, NULL), ACCT_EINVAL);
		cr_assert_eq(acct_pate_ls_bound_prefix(ws, b, v, one, D + 1, NULL), ACCT_EINVAL);
		cr_assert_eq(acct_pate_ls_bound_horizon(b, 0.0, (double)answers, sum[0]), D);
		cr_assert_eq(acct_pate_ls_bound_horizon(b, 0.0329, (double)answers, 0.0), D);
		acct_pate_ls_bound_free(b);
		acct_pate_workspace_free(ws);
		free(one);
		free(sum);
	}
	cr_assert_geq(cut, 8, "the horizon cut half the distances %zu times", cut);
}

/*
 * The release's bound A(d, x) on random neighbours, in settings where the
 * walk of Algorithms 4-5 is smooth (sigma 40 order 14, sigma 100 order 8)
 * and where it is not (sigma 5 order 14, sigma 10 orders 20 and 50, sigma
 * 20 order 50): 20 histograms each, 250 teachers, 2 to 8 classes, up to a
 * fifth abstaining, and every neighbour y.  The released RDP moves by at
 * most A(0, x); A(d, y) <= A(d + 1, x) at every distance (the last
 * distance holds the maximum for both), which is what makes max_d
 * e^(-beta d) A(d) beta-smooth (Nissim, Raskhodnikova and Smith 2007,
 * Definition 2.1); and so S(y) <= e^beta S(x).  The same check on the
 * walk's smooth sensitivity fails somewhere in these settings, and the
 * moves reach a good share of A(0).
 */
Test(pate, release_bound_is_smooth_where_the_walk_is_not)
{
	static const double set[6][2] = {{40, 14}, {100, 8}, {5, 14}, {10, 20}, {10, 50}, {20, 50}};
	acct_pate_workspace *ws = acct_pate_workspace_new(8, 250);
	uint64_t state = 77;
	double power = 0;
	int walk_fails = 0;

	cr_assert(ws);
	for (size_t k = 0; k < 6 * 20; k++) {
		double sigma = set[k / 20][0], order = set[k / 20][1], beta = fmin(0.0329, 0.99 / (2 * order));
		size_t m = 2 + (size_t)(state >> 40) % 7, n_nb, D;
		int64_t voted = 250 - (int64_t)((state >> 30) % 51);
		double v[8], nb[NB_MAX][8], *A, *B, fx, sx, swx;
		acct_pate_ls_bound *b = NULL;

		test_vote_histogram(v, m, voted, 0.2 + 0.8 * (double)((state >> 12) % 1000) / 1000.0, &state);
		cr_assert_eq(acct_pate_ls_bound_new(ws, m, 250, sigma, order, &b, NULL), 0);
		D = acct_pate_ls_bound_distances(b);
		A = malloc(D * sizeof(*A));
		B = malloc(D * sizeof(*B));
		cr_assert(A && B);
		release_bound(ws, b, v, A);
		fx = released_rdp(ws, v, m, sigma, order);
		sx = acct_pate_smooth_sensitivity(beta, A, D);
		swx = walk_smooth(ws, v, m, 250, sigma, order, beta);
		n_nb = neighbours(v, m, 250, nb);
		for (size_t i = 0; i < n_nb; i++) {
			double moved = fabs(released_rdp(ws, nb[i], m, sigma, order) - fx);

			cr_assert_leq(moved, A[0], "case %zu: a neighbour moves the RDP by %g, A(0) is %g", k,
				      moved, A[0]);
			if (A[0] > 0)
				power = fmax(power, moved / A[0]);
			release_bound(ws, b, nb[i], B);
			for (size_t d = 0; d < D; d++)
				cr_assert_leq(B[d], A[d + 1 < D ? d + 1 : d],
					      "case %zu d %zu: A(d, y) %g above A(d + 1, x)", k, d, B[d]);
			/* (up to rounding in e^(-beta d), which the release's beta slack covers) */
			cr_assert_leq(acct_pate_smooth_sensitivity(beta, B, D), exp(beta) * sx * (1 + 1e-12),
				      "case %zu: S(y) %.17g above e^beta S(x) %.17g", k,
				      acct_pate_smooth_sensitivity(beta, B, D), exp(beta) * sx);
			if (walk_smooth(ws, nb[i], m, 250, sigma, order, beta) > exp(beta) * swx * (1 + 1e-12))
				walk_fails++;
		}
		acct_pate_ls_bound_free(b);
		free(A);
		free(B);
	}
	cr_assert_gt(walk_fails, 0, "the walk was smooth everywhere: the check has no power");
	cr_assert_gt(power, 0.5, "no neighbour came near the bound (%g)", power);
	acct_pate_workspace_free(ws);
}

/* Every histogram of m classes with at most `teachers` votes, m counts
 * each, into h (cap rows); returns how many. */
static size_t all_histograms(size_t m, int64_t teachers, double (*h)[4], size_t cap)
{
	size_t n = 0;
	int64_t c[4] = {0};

	for (;;) {
		int64_t total = 0;

		for (size_t i = 0; i < m; i++)
			total += c[i];
		if (total <= teachers) {
			cr_assert_lt(n, cap);
			for (size_t i = 0; i < m; i++)
				h[n][i] = (double)c[i];
			n++;
		}
		size_t i = 0;
		while (i < m && ++c[i] > teachers)
			c[i++] = 0;
		if (i == m)
			return n;
	}
}

/*
 * The two walks are exact: every histogram of a small space (2 to 4
 * classes, 5 to 8 teachers, all abstentions), every neighbour pair, every
 * distance: A(d, y) <= A(d + 1, x), and A(0, x) covers the move of the
 * released RDP.  A walk that missed the most or the least q within some
 * distance fails here on the histogram next to the one it missed.  sigma
 * from 0.5 to 4 and orders 2 to 20, so that q runs from the plateau to far
 * below q0 within a few votes.
 */
Test(pate, release_bound_nests_on_every_neighbour_of_small_spaces)
{
	static const struct { size_t m; int64_t n; double sigma, order; } set[] = {
		{2, 8, 0.5, 8}, {2, 8, 1, 20}, {3, 6, 0.5, 2}, {3, 7, 1, 8},
		{3, 8, 2, 20}, {4, 5, 0.7, 8}, {4, 6, 1, 14}, {4, 6, 4, 2},
	};
	static double h[1000][4], nb[NB_MAX][8];
	acct_pate_workspace *ws = acct_pate_workspace_new(4, 8);
	size_t pairs = 0;

	cr_assert(ws);
	for (size_t k = 0; k < sizeof(set) / sizeof(set[0]); k++) {
		size_t m = set[k].m, nh = all_histograms(m, set[k].n, h, 1000), D;
		acct_pate_ls_bound *b = NULL;
		double A[16], B[16];

		cr_assert_eq(acct_pate_ls_bound_new(ws, m, set[k].n, set[k].sigma, set[k].order, &b, NULL), 0);
		D = acct_pate_ls_bound_distances(b);
		cr_assert_eq(D, (size_t)set[k].n + 1);
		for (size_t x = 0; x < nh; x++) {
			double v[8] = {0}, fx;
			size_t n_nb;

			memcpy(v, h[x], m * sizeof(double));
			release_bound(ws, b, v, A);
			fx = released_rdp(ws, v, m, set[k].sigma, set[k].order);
			n_nb = neighbours(v, m, set[k].n, nb);
			for (size_t i = 0; i < n_nb; i++, pairs++) {
				double moved = fabs(released_rdp(ws, nb[i], m, set[k].sigma, set[k].order) - fx);

				cr_assert_leq(moved, A[0], "set %zu: moved %g, A(0) %g", k, moved, A[0]);
				release_bound(ws, b, nb[i], B);
				for (size_t d = 0; d < D; d++)
					cr_assert_leq(B[d], A[d + 1 < D ? d + 1 : d],
						      "set %zu histogram %zu d %zu: A(d, y) %.17g above A(d + 1, x)",
						      k, x, d, B[d]);
			}
		}
		acct_pate_ls_bound_free(b);
	}
	cr_assert_gt(pairs, 5000);
	acct_pate_workspace_free(ws);
}

/*
 * POST /v1/pate/smooth-sensitivity reports the release's figure,
 * release_smooth_sensitivity, as the library computes it for that
 * histogram (here where the walk is not smooth, sigma 10 at order 20, and
 * where it is, sigma 40 at order 8).
 */
Test(pate, smooth_route_reports_the_release_bound)
{
	static const struct { double v[3]; double sigma, order, beta; } cases[] = {
		{{150, 60, 40}, 10, 20, 0.02}, {{200, 30, 20}, 40, 8, 0.0329},
	};
	acct_pate_workspace *ws = acct_pate_workspace_new(3, 250);

	cr_assert(ws);
	for (size_t k = 0; k < 2; k++) {
		char text[256];
		json_t *body, *ans = NULL;
		acct_pate_ls_bound *b = NULL;
		double A[251], want;
		acct_error err;

		snprintf(text, sizeof(text),
			 "{\"votes\": [%g, %g, %g], \"num_teachers\": 250, \"sigma\": %g, \"order\": %g,"
			 " \"beta\": %g}", cases[k].v[0], cases[k].v[1], cases[k].v[2], cases[k].sigma,
			 cases[k].order, cases[k].beta);
		body = parse(text);
		acct_error_init(&err);
		cr_assert_eq(srv_pate_smooth_sensitivity(body, &ans, &err), 0, "%s", err.text);
		cr_assert_eq(acct_pate_ls_bound_new(ws, 3, 250, cases[k].sigma, cases[k].order, &b, NULL), 0);
		release_bound(ws, b, cases[k].v, A);
		want = acct_pate_smooth_sensitivity(cases[k].beta, A, 251);
		cr_expect_gt(want, 0);
		cr_expect_eq(num(ans, "release_smooth_sensitivity"), want, "case %zu: %.17g, want %.17g", k,
			     num(ans, "release_smooth_sensitivity"), want);
		acct_pate_ls_bound_free(b);
		json_decref(ans);
		json_decref(body);
	}
	acct_pate_workspace_free(ws);
}

/*
 * Where even the unanimous histogram's q is at or above q0, every
 * histogram releases lambda / sigma^2: the released RDP is constant, its
 * local sensitivity 0 at every distance, and the bound is only its
 * rounding slack (1e-9 of lambda / sigma^2).  The walk still reports the
 * plateau LS(q1) > 0 there.  250 teachers, 10 classes, sigma 100: the
 * unanimous ln q is ln(4.5 erfc(1.25)) = -1.07, far above ln q0.
 */
Test(pate, release_bound_is_zero_where_the_release_is_constant)
{
	acct_pate_workspace *ws = acct_pate_workspace_new(10, 250);
	double v[10] = {250}, logq, logq0, A[4096], ls[250];
	acct_pate_ls_bound *b = NULL;
	double indep = 8 / (100.0 * 100.0);

	cr_assert(ws);
	cr_assert_eq(acct_pate_gnmax_logq(v, 10, 100, &logq, NULL), 0);
	cr_assert_float_eq(logq, log(4.5 * erfc(1.25)), 1e-12);
	cr_assert_eq(acct_pate_gnmax_logq0(ws, 100, 8, &logq0, NULL), 0);
	cr_assert_gt(logq, logq0);
	cr_assert_eq(acct_pate_ls_bound_new(ws, 10, 250, 100, 8, &b, NULL), 0);
	cr_assert_leq(acct_pate_ls_bound_distances(b), 4096);
	release_bound(ws, b, v, A);
	for (size_t d = 0; d < acct_pate_ls_bound_distances(b); d++)
		cr_assert_leq(A[d], 2e-9 * indep, "d %zu: %g", d, A[d]);
	cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, v, 10, 250, 100, 8, ls, NULL), 0);
	cr_assert_gt(ls[249], 1e-6 * indep);
	acct_pate_ls_bound_free(b);
	acct_pate_workspace_free(ws);
}

/*
 * Bad arguments to the bound: classes and teachers outside their limits,
 * sigma and order where Theorem 6 has no q0, more votes than teachers, a
 * negative or fractional vote.  Each is refused with the field at fault.
 */
Test(pate, release_bound_refuses_bad_arguments)
{
	acct_pate_workspace *ws = acct_pate_workspace_new(10, 250);
	acct_pate_ls_bound *b = NULL;
	double A[4096];
	acct_error err;

	cr_assert(ws);
	acct_error_init(&err);
	cr_expect_eq(acct_pate_ls_bound_new(ws, 1, 250, 40, 8, &b, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/num_classes");
	acct_error_init(&err);
	cr_expect_eq(acct_pate_ls_bound_new(ws, 10, 0, 40, 8, &b, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/num_teachers");
	acct_error_init(&err);
	cr_expect_lt(acct_pate_ls_bound_new(ws, 10, 250, 0, 8, &b, &err), 0);
	cr_expect_str_eq(err.where, "/sigma");
	acct_error_init(&err);
	cr_expect_lt(acct_pate_ls_bound_new(ws, 10, 250, 40, 1, &b, &err), 0);
	cr_expect_str_eq(err.where, "/order");
	cr_expect_null(b);
	acct_error_init(&err);
	cr_assert_eq(acct_pate_ls_bound_new(ws, 10, 250, 40, 8, &b, &err), 0, "%s", err.text);
	{
		double over[10] = {200, 51}, negative[10] = {5, -1}, half[10] = {5, 0.5};

		cr_expect_eq(acct_pate_ls_bound_at(ws, b, over, A, &err), ACCT_EINVAL);
		cr_expect_str_eq(err.where, "/votes");
		acct_error_init(&err);
		cr_expect_eq(acct_pate_ls_bound_at(ws, b, negative, A, &err), ACCT_EINVAL);
		cr_expect_str_eq(err.where, "/votes/1");
		acct_error_init(&err);
		cr_expect_eq(acct_pate_ls_bound_at(ws, b, half, A, &err), ACCT_EINVAL);
		cr_expect_str_eq(err.where, "/votes/1");
	}
	acct_pate_ls_bound_free(b);
	acct_pate_ls_bound_free(NULL);
	acct_pate_workspace_free(ws);
}

/*
 * Histograms at the edges: no votes at all (q is the cap 1 - 1/m and the
 * cost is the data-independent lambda / sigma^2), two classes, very large
 * and very small sigma, orders near 1 and very high.  Every one is answered
 * with finite, non-negative figures.
 */
Test(pate, edge_histograms_are_answered)
{
	static const char *const smooth_bodies[] = {
		"{\"votes\": [0, 0, 0], \"num_teachers\": 10, \"sigma\": 1, \"order\": 2, \"beta\": 0.1}",
		"{\"votes\": [1, 0], \"num_teachers\": 1, \"sigma\": 3, \"order\": 8, \"beta\": 0.01}",
		"{\"votes\": [100, 0], \"num_teachers\": 100, \"sigma\": 1e9, \"order\": 2, \"beta\": 0.1}",
		"{\"votes\": [100, 0], \"num_teachers\": 100, \"sigma\": 1e-6, \"order\": 1e6, \"beta\": 0}",
		"{\"votes\": [60, 40], \"num_teachers\": 100, \"sigma\": 1, \"order\": 1.0001, \"beta\": 0.1}",
		"{\"votes\": [30, 30, 40], \"num_teachers\": 120, \"sigma\": 5, \"order\": 4, \"beta\": 0.05,"
		" \"release_sigma\": 8}",
	};
	json_t *body = parse("{\"votes\": [0, 0, 0, 0], \"sigma\": 2, \"orders\": [1.5, 4],"
			     " \"threshold\": 0, \"threshold_sigma\": 3}");
	json_t *ans = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(srv_pate_cost(body, &ans, &err), 0, "%s", err.text);
	cr_expect(close_to(num(ans, "logq"), log(0.75), 1e-15, 0));
	cr_expect(close_to(json_number_value(json_array_get(json_object_get(ans, "rdp"), 1)), 1.0, 1e-15, 0));
	/* T = max votes: answered with probability exactly 1/2. */
	cr_expect(close_to(num(ans, "logpr_answered"), log(0.5), 1e-15, 0));
	json_decref(ans);
	json_decref(body);
	for (size_t k = 0; k < sizeof(smooth_bodies) / sizeof(smooth_bodies[0]); k++) {
		json_t *ls;
		size_t i;
		json_t *v;

		body = parse(smooth_bodies[k]);
		ans = NULL;
		acct_error_init(&err);
		cr_assert_eq(srv_pate_smooth_sensitivity(body, &ans, &err), 0, "case %zu: %s at %s", k, err.text,
			     err.where);
		ls = json_object_get(ans, "local_sensitivity");
		cr_expect_eq(json_array_size(ls), (size_t)json_integer_value(json_object_get(body, "num_teachers")));
		json_array_foreach(ls, i, v) {
			cr_expect(json_number_value(v) >= 0 && isfinite(json_number_value(v)), "case %zu d %zu", k, i);
			cr_expect(num(ans, "smooth_sensitivity") >= json_number_value(v) *
				  exp(-json_number_value(json_object_get(body, "beta")) * (double)i) * (1 - 1e-12));
		}
		cr_expect(num(ans, "rdp_of_release") > 0);
		cr_expect(num(ans, "release_smooth_sensitivity") >= 0 &&
			  isfinite(num(ans, "release_smooth_sensitivity")), "case %zu", k);
		json_decref(ans);
		json_decref(body);
	}
}

/*
 * A strongly agreeing ensemble (250 teachers, 10 classes, the plurality
 * holding 80-100% of the votes, sigma = 40 as in the paper's MNIST runs):
 * 2000 answers composed by RDP cost, at delta = 1e-5, a small fraction of
 * the epsilon of the data-independent lambda / sigma^2, and never more.
 */
Test(pate, consensus_ensemble_epsilon)
{
	static const double orders[] = {2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 32, 50, 64, 100};
	enum { N_ORD = sizeof(orders) / sizeof(orders[0]), QUERIES = 2000 };
	double dep[N_ORD] = {0}, ind[N_ORD], r[N_ORD], eps_dep = INFINITY, eps_ind = INFINITY;
	uint64_t state = 2018;
	acct_error err;

	acct_error_init(&err);
	for (int k = 0; k < QUERIES; k++) {
		double votes[10], logq;

		test_vote_histogram(votes, 10, 250, 0.8 + 0.2 * (double)(k % 101) / 100, &state);
		cr_assert_eq(acct_pate_gnmax_logq(votes, 10, 40, &logq, &err), 0);
		cr_assert_eq(acct_pate_gnmax_rdp(logq, 40, orders, N_ORD, r, &err), 0);
		for (size_t i = 0; i < N_ORD; i++)
			dep[i] += r[i];
	}
	for (size_t i = 0; i < N_ORD; i++) {
		ind[i] = QUERIES * orders[i] / 1600.0;
		eps_dep = fmin(eps_dep, dep[i] + log(1e5) / (orders[i] - 1));
		eps_ind = fmin(eps_ind, ind[i] + log(1e5) / (orders[i] - 1));
	}
	cr_expect(eps_dep < eps_ind / 4, "data-dependent eps %g vs data-independent %g", eps_dep, eps_ind);
}
