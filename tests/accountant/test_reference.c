/*
 * test_reference.c: every accounting, delta and calibration case of the
 * reference vectors (tests/data/reference/, copies of ../shared/reference/,
 * computed by Google's dp_accounting), pushed through the route handlers
 * exactly as ../shared/tools/refcheck sends them over HTTP, with its
 * tolerances.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "api.h"
#include "test_data.h"

/* One call of a stateless route handler, as refcheck's request makes it. */
struct route_call {
	int rc;
	acct_error err;
	json_t *ans; /* the answer when rc is 0; the caller frees it */
};

/* Answers `body` (freed here) with `handler`. */
static void route_call(struct route_call *r,
		       int (*handler)(const json_t *body, json_t **ret_answer, acct_error *err),
		       json_t *body)
{
	acct_error_init(&r->err);
	r->ans = NULL;
	r->rc = handler(body, &r->ans, &r->err);
	json_decref(body);
}

/* The answer's figure `key`, NaN when the call failed. */
static double route_num(const struct route_call *r, const char *key)
{
	return r->rc == 0 ? json_number_value(json_object_get(r->ans, key)) : NAN;
}

static double rel_tol(const char *acct)
{
	if (strcmp(acct, "rdp") == 0 || strcmp(acct, "zcdp") == 0)
		return 1e-4;
	if (strcmp(acct, "moments") == 0)
		return 1e-3;
	if (strcmp(acct, "pld") == 0)
		return 1e-2;
	return 1e-9; /* basic, strong, zcdp_classic: closed forms */
}

/* How many (case, accountant) pairs were checked and how many failed. */
struct tally {
	size_t failed, total;
};

static void accounting_epsilon_case(const char *id, json_t *c, void *ctx)
{
	struct tally *t = ctx;
	const char *acct;
	json_t *want;

	json_object_foreach(json_object_get(c, "epsilon"), acct, want) {
		json_t *body = json_pack("{s:O,s:O,s:O,s:s}", "event", json_object_get(c, "event"),
					 "delta", json_object_get(c, "delta"), "neighbor",
					 json_object_get(c, "neighbor"), "accountant",
					 strcmp(acct, "zcdp_classic") == 0 ? "zcdp" : acct);
		struct route_call r;
		double w = json_number_value(want), got;

		if (strcmp(acct, "zcdp_classic") == 0)
			json_object_set_new(body, "conversion", json_string("bun_steinke"));
		route_call(&r, srv_acct_epsilon, body);
		got = route_num(&r, "epsilon");
		t->total++;
		if (r.rc != 0 || !(fabs(got - w) <= rel_tol(acct) * fabs(w))) {
			t->failed++;
			cr_log_error("%s/%s: got %.10g (rc %d %s %s), want %.10g", id, acct, got, r.rc,
				     r.err.where, r.err.text, w);
		}
		json_decref(r.ans);
	}
}

Test(reference, accounting_epsilon)
{
	struct tally t = {0, 0};

	test_each_reference_case("accounting", accounting_epsilon_case, &t);
	cr_expect_eq(t.failed, 0, "%zu of %zu accounting cases failed", t.failed, t.total);
}

static void delta_case(const char *id, json_t *c, void *ctx)
{
	json_t *body = json_pack("{s:O,s:O,s:O,s:s}", "event", json_object_get(c, "event"), "epsilon",
				 json_object_get(c, "epsilon"), "neighbor",
				 json_object_get(c, "neighbor"), "accountant", "rdp");
	double w = json_number_value(json_object_get(json_object_get(c, "delta"), "rdp")), got;
	struct route_call r;

	(void)ctx;
	route_call(&r, srv_acct_delta, body);
	got = route_num(&r, "delta");
	cr_expect(r.rc == 0 && (got == w || (got > 0 && w > 0 && fabs(log(got) - log(w)) < 1e-3)),
		  "%s: delta %.10g (rc %d %s), want %.10g", id, got, r.rc, r.err.text, w);
	json_decref(r.ans);
}

Test(reference, delta)
{
	test_each_reference_case("delta", delta_case, NULL);
}

static void calibration_case(const char *id, json_t *c, void *ctx)
{
	json_t *body = json_pack("{s:O,s:O,s:O,s:O}", "template", json_object_get(c, "template"),
				 "epsilon", json_object_get(c, "epsilon"), "delta",
				 json_object_get(c, "delta"), "accountant",
				 json_object_get(c, "accountant"));
	double w = json_number_value(json_object_get(c, "noise_multiplier"));
	double target = json_number_value(json_object_get(c, "epsilon"));
	struct route_call r;
	double s, e;

	(void)ctx;
	route_call(&r, srv_acct_calibrate, body);
	s = route_num(&r, "noise_multiplier");
	e = route_num(&r, "epsilon");
	cr_expect(r.rc == 0 && fabs(s - w) <= 1e-3 * w && e <= target * (1 + 1e-9),
		  "%s: noise_multiplier %.10g epsilon %.10g (rc %d %s %s), want %.10g", id, s, e, r.rc,
		  r.err.where, r.err.text, w);
	json_decref(r.ans);
}

Test(reference, calibration)
{
	test_each_reference_case("calibration", calibration_case, NULL);
}
