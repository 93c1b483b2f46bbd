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

static json_t *load(const char *name)
{
	char path[1024];
	const char *dir = getenv("DPGATE_TEST_DATA");
	json_error_t e;
	json_t *j;

	snprintf(path, sizeof(path), "%s/reference/%s", dir ? dir : TEST_DATA_DIR, name);
	j = json_load_file(path, 0, &e);
	cr_assert_not_null(j, "cannot read %s: %s", path, e.text);
	return j;
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

Test(reference, accounting_epsilon)
{
	json_t *cases = load("accounting.json");
	size_t i, failed = 0, total = 0;
	json_t *c;

	json_array_foreach(cases, i, c) {
		const char *acct;
		json_t *want;

		json_object_foreach(json_object_get(c, "epsilon"), acct, want) {
			json_t *body = json_pack("{s:O,s:O,s:O,s:s}", "event", json_object_get(c, "event"),
						 "delta", json_object_get(c, "delta"), "neighbor",
						 json_object_get(c, "neighbor"), "accountant",
						 strcmp(acct, "zcdp_classic") == 0 ? "zcdp" : acct);
			json_t *ans = NULL;
			acct_error err;
			double w = json_number_value(want), got = NAN;
			int rc;

			if (strcmp(acct, "zcdp_classic") == 0)
				json_object_set_new(body, "conversion", json_string("bun_steinke"));
			acct_error_init(&err);
			rc = srv_acct_epsilon(body, &ans, &err);
			if (rc == 0)
				got = json_number_value(json_object_get(ans, "epsilon"));
			total++;
			if (rc != 0 || !(fabs(got - w) <= rel_tol(acct) * fabs(w))) {
				failed++;
				cr_log_error("%s/%s: got %.10g (rc %d %s %s), want %.10g",
					     json_string_value(json_object_get(c, "id")), acct, got, rc,
					     err.where, err.text, w);
			}
			json_decref(ans);
			json_decref(body);
		}
	}
	cr_expect_eq(failed, 0, "%zu of %zu accounting cases failed", failed, total);
	json_decref(cases);
}

Test(reference, delta)
{
	json_t *cases = load("delta.json");
	size_t i;
	json_t *c;

	json_array_foreach(cases, i, c) {
		json_t *body = json_pack("{s:O,s:O,s:O,s:s}", "event", json_object_get(c, "event"),
					 "epsilon", json_object_get(c, "epsilon"), "neighbor",
					 json_object_get(c, "neighbor"), "accountant", "rdp");
		json_t *ans = NULL;
		acct_error err;
		double w = json_number_value(json_object_get(json_object_get(c, "delta"), "rdp"));
		double got = NAN;
		int rc;

		acct_error_init(&err);
		rc = srv_acct_delta(body, &ans, &err);
		if (rc == 0)
			got = json_number_value(json_object_get(ans, "delta"));
		cr_expect(rc == 0 && (got == w || (got > 0 && w > 0 && fabs(log(got) - log(w)) < 1e-3)),
			  "%s: delta %.10g (rc %d %s), want %.10g",
			  json_string_value(json_object_get(c, "id")), got, rc, err.text, w);
		json_decref(ans);
		json_decref(body);
	}
	json_decref(cases);
}

Test(reference, calibration)
{
	json_t *cases = load("calibration.json");
	size_t i;
	json_t *c;

	json_array_foreach(cases, i, c) {
		json_t *body = json_pack("{s:O,s:O,s:O,s:O}", "template", json_object_get(c, "template"),
					 "epsilon", json_object_get(c, "epsilon"), "delta",
					 json_object_get(c, "delta"), "accountant",
					 json_object_get(c, "accountant"));
		json_t *ans = NULL;
		acct_error err;
		double w = json_number_value(json_object_get(c, "noise_multiplier"));
		double target = json_number_value(json_object_get(c, "epsilon"));
		double s = NAN, e = NAN;
		int rc;

		acct_error_init(&err);
		rc = srv_acct_calibrate(body, &ans, &err);
		if (rc == 0) {
			s = json_number_value(json_object_get(ans, "noise_multiplier"));
			e = json_number_value(json_object_get(ans, "epsilon"));
		}
		cr_expect(rc == 0 && fabs(s - w) <= 1e-3 * w && e <= target * (1 + 1e-9),
			  "%s: noise_multiplier %.10g epsilon %.10g (rc %d %s %s), want %.10g",
			  json_string_value(json_object_get(c, "id")), s, e, rc, err.where, err.text, w);
		json_decref(ans);
		json_decref(body);
	}
	json_decref(cases);
}
