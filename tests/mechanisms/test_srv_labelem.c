/*
 * test_srv_labelem.c: POST /v1/label-em/guidance at the JSON level, with the
 * same bodies and tolerances as ../shared/tools/refcheck, and its errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "api.h"
#include "test_data.h"

static int close_to(const json_t *a, double b, double rel, double abs_tol)
{
	double x;

	if (!json_is_number(a))
		return 0;
	x = json_number_value(a);
	return isfinite(x) && fabs(x - b) <= fmax(abs_tol, rel * fabs(b));
}

Test(srv_labelem, refcheck_cases_pass)
{
	json_t *ref = test_load_reference("label_em"), *c;
	size_t i;

	json_array_foreach(ref, i, c) {
		json_t *ks = json_array(), *body, *ans = NULL, *v;
		const char *key;
		acct_error err;

		json_object_foreach(json_object_get(c, "log_pmf"), key, v)
			json_array_append_new(ks, json_integer(atoll(key)));
		body = json_pack("{s:O,s:O,s:O,s:o}", "n", json_object_get(c, "n"), "epsilon",
				 json_object_get(c, "epsilon"), "sensitivity",
				 json_object_get(c, "sensitivity"), "ks", ks);
		acct_error_init(&err);
		cr_assert_eq(srv_label_em_guidance(body, &ans, &err), 0, "%s", err.text);
		cr_assert(close_to(json_object_get(ans, "success_probability"),
				   json_number_value(json_object_get(c, "success_probability")), 1e-9,
				   1e-12));
		cr_assert(close_to(json_object_get(ans, "keep_probability"),
				   json_number_value(json_object_get(c, "keep_probability")), 1e-12, 0));
		/* What a release costs per label: the log odds of keeping it,
		 * from the reference's keep probability (epsilon / 2 at D = 1). */
		{
			double p = json_number_value(json_object_get(c, "keep_probability"));

			cr_assert(close_to(json_object_get(ans, "charged_epsilon"), log(p / (1 - p)),
					   1e-9, 0), "%s", json_string_value(json_object_get(c, "id")));
		}
		json_object_foreach(json_object_get(c, "log_pmf"), key, v)
			cr_assert(close_to(json_object_get(json_object_get(ans, "log_pmf"), key),
					   json_number_value(v), 1e-9, 1e-6), "k %s", key);
		json_decref(ans);
		json_decref(body);
	}
	json_decref(ref);
}

Test(srv_labelem, inverse_answers_epsilon)
{
	/* labelem-001: n = 10, epsilon 0.5 -> success 0.7637240366474727. */
	json_t *body = json_pack("{s:i,s:f}", "n", 10, "target_success_probability",
				 0.7637240366474727);
	json_t *ans = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(srv_label_em_guidance(body, &ans, &err), 0, "%s", err.text);
	cr_assert(close_to(json_object_get(ans, "epsilon"), 0.5, 1e-6, 0));
	cr_assert_geq(json_number_value(json_object_get(ans, "success_probability")),
		      0.7637240366474727);
	json_decref(ans);
	json_decref(body);
}

Test(srv_labelem, bad_inputs_name_the_field)
{
	static const struct {
		const char *body;
		const char *where;
	} cases[] = {
		{"{\"epsilon\":1}", "/n"},
		{"{\"n\":0,\"epsilon\":1}", "/n"},
		{"{\"n\":10,\"epsilon\":0}", "/epsilon"},
		{"{\"n\":10,\"epsilon\":-1}", "/epsilon"},
		{"{\"n\":10,\"epsilon\":\"x\"}", "/epsilon"},
		{"{\"n\":10}", "/epsilon"},
		{"{\"n\":10,\"epsilon\":1,\"sensitivity\":0}", "/sensitivity"},
		/* One label per unit: the Hamming score's sensitivity is 1. */
		{"{\"n\":10,\"epsilon\":1,\"sensitivity\":2}", "/sensitivity"},
		{"{\"n\":10,\"epsilon\":1,\"sensitivity\":0.5}", "/sensitivity"},
		{"{\"n\":10,\"target_success_probability\":0.9,\"sensitivity\":3}",
		 "/sensitivity"},
		{"{\"n\":10,\"epsilon\":1,\"ks\":[3,11]}", "/ks/1"},
		{"{\"n\":10,\"epsilon\":1,\"ks\":[1.5]}", "/ks/0"},
		{"{\"n\":10,\"epsilon\":1,\"ks\":5}", "/ks"},
		{"{\"n\":10,\"epsilon\":1,\"bogus\":5}", "/bogus"},
		{"{\"n\":10,\"epsilon\":1,\"target_success_probability\":0.9}",
		 "/target_success_probability"},
		{"{\"n\":10,\"target_success_probability\":1}", "/target_success_probability"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *body = json_loads(cases[i].body, 0, NULL), *ans = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(srv_label_em_guidance(body, &ans, &err), ACCT_EINVAL, "%s", cases[i].body);
		cr_assert_str_eq(err.where, cases[i].where, "%s", cases[i].body);
		cr_assert_null(ans);
		json_decref(body);
	}
}

/*
 * Where epsilon / (2 sensitivity) overflows, or is so large that log Pr[q =
 * k] is below -DBL_MAX, the figures are those of p = 1: success 1,
 * log Pr[q = n] = 0, and every other k null (-infinity).  Both bodies
 * answered 500 "out of memory": 0 * -inf made log Pr[q = n] NaN, and
 * jansson refuses a non-finite real.
 */
Test(srv_labelem, overflowing_epsilon_writes_null_log_pmf)
{
	static const char *const bodies[] = {
		"{\"n\":10,\"epsilon\":1.7e308,\"ks\":[0,5,10]}",
		"{\"n\":10,\"epsilon\":1e308,\"sensitivity\":1,\"ks\":[0,5,10]}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		json_t *body = json_loads(bodies[i], 0, NULL), *ans = NULL, *pmf;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(srv_label_em_guidance(body, &ans, &err), 0, "%s: %s", bodies[i], err.text);
		cr_assert_eq(json_number_value(json_object_get(ans, "keep_probability")), 1.0);
		cr_assert_eq(json_number_value(json_object_get(ans, "success_probability")), 1.0);
		pmf = json_object_get(ans, "log_pmf");
		cr_assert(json_is_null(json_object_get(pmf, "0")), "%s", bodies[i]);
		cr_assert(json_is_null(json_object_get(pmf, "5")), "%s", bodies[i]);
		cr_assert_eq(json_number_value(json_object_get(pmf, "10")), 0.0, "%s", bodies[i]);
		json_decref(ans);
		json_decref(body);
	}
}
