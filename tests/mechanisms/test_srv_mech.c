/*
 * test_srv_mech.c: request bodies of POST /v1/datasets/{id}/mechanisms/{name}
 * at the JSON level: good bodies give an output of the right shape and the
 * event that prices it; bad bodies name the field and draw no noise.
 */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "api_mech.h"
#include "test_util.h"

static int release(const char *name, const char *body_text, json_t **out, acct_event **ev,
		   acct_error *err, mech_rng *r)
{
	json_t *body = json_loads(body_text, 0, NULL);
	int rc;

	cr_assert(body, "bad test JSON %s", body_text);
	acct_error_init(err);
	rc = srv_mech_release(name, body, r, out, ev, err);
	json_decref(body);
	return rc;
}

Test(srv_mech, good_bodies)
{
	static const struct {
		const char *name, *body;
		json_type out_type;
		acct_event_type ev_type;
		double cost; /* epsilon or rho implied by the event; 0 = skip */
	} cases[] = {
		{"laplace", "{\"value\":12.5,\"sensitivity\":1,\"epsilon\":0.5}", JSON_REAL,
		 ACCT_EV_DISCRETE_LAPLACE, 0.5},
		{"laplace", "{\"values\":[1,2,3],\"sensitivity\":2,\"noise_multiplier\":4}", JSON_ARRAY,
		 ACCT_EV_EPSILON_DELTA, 0.25},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"scale\":10}", JSON_REAL,
		 ACCT_EV_DISCRETE_LAPLACE, 0.1},
		{"gaussian", "{\"value\":3,\"sensitivity\":1,\"epsilon\":1,\"delta\":1e-5}", JSON_REAL,
		 ACCT_EV_DISCRETE_GAUSSIAN, 0},
		{"gaussian", "{\"values\":[3,4],\"sensitivity\":1,\"sigma\":2}", JSON_ARRAY,
		 ACCT_EV_ZCDP, 0.125},
		{"discrete_laplace", "{\"value\":3,\"sensitivity\":1,\"epsilon\":0.5}", JSON_INTEGER,
		 ACCT_EV_DISCRETE_LAPLACE, 0.5},
		{"discrete_gaussian", "{\"values\":[3,-9],\"sensitivity\":1,\"noise_multiplier\":2}",
		 JSON_ARRAY, ACCT_EV_ZCDP, 0.125},
		{"exponential", "{\"scores\":[1,5,2],\"sensitivity\":1,\"epsilon\":1}", JSON_INTEGER,
		 ACCT_EV_EXPONENTIAL_MECHANISM, 1},
		{"exponential", "{\"scores\":[1,5,2],\"sensitivity\":1,\"epsilon\":1,\"monotone\":true}",
		 JSON_INTEGER, ACCT_EV_EXPONENTIAL_MECHANISM, 1},
		{"permute_and_flip", "{\"scores\":[1,5,2],\"sensitivity\":1,\"epsilon\":1}",
		 JSON_INTEGER, ACCT_EV_PERMUTE_AND_FLIP, 1},
		{"report_noisy_max", "{\"scores\":[1,5],\"sensitivity\":1,\"epsilon\":1,\"noise\":\"laplace\"}",
		 JSON_INTEGER, ACCT_EV_EPSILON_DELTA, 1},
		{"report_noisy_max", "{\"scores\":[1,5],\"sensitivity\":1,\"epsilon\":1,\"noise\":\"gumbel\"}",
		 JSON_INTEGER, ACCT_EV_EXPONENTIAL_MECHANISM, 1},
		{"report_noisy_max", "{\"scores\":[1,5],\"sensitivity\":1,\"sigma\":2,\"noise\":\"gaussian\"}",
		 JSON_INTEGER, ACCT_EV_ZCDP, 0.25},
		{"randomized_response", "{\"value\":2,\"num_buckets\":5,\"epsilon\":1}", JSON_INTEGER,
		 ACCT_EV_RANDOMIZED_RESPONSE, 1},
		{"label_em", "{\"labels\":[0,1,1,0,1],\"epsilon\":2}", JSON_ARRAY,
		 ACCT_EV_RANDOMIZED_RESPONSE, 2},
	};
	mech_rng *r = test_rng(50);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *out = NULL;
		acct_event *ev = NULL;
		acct_error err;
		double cost = 0;

		cr_assert_eq(release(cases[i].name, cases[i].body, &out, &ev, &err, r), 0,
			     "%s %s: %s %s", cases[i].name, cases[i].body, err.where, err.text);
		cr_assert_eq(json_typeof(out), cases[i].out_type, "%s", cases[i].body);
		cr_assert_eq(ev->type, cases[i].ev_type, "%s", cases[i].body);
		switch (ev->type) {
		case ACCT_EV_DISCRETE_LAPLACE:
			cost = ev->u.discrete_laplace.noise_parameter * ev->u.discrete_laplace.sensitivity;
			break;
		case ACCT_EV_EPSILON_DELTA:
			cost = ev->u.epsilon_delta.epsilon;
			break;
		case ACCT_EV_ZCDP:
			cost = ev->u.zcdp.rho;
			break;
		case ACCT_EV_EXPONENTIAL_MECHANISM:
			cost = ev->u.exponential_mechanism.epsilon;
			break;
		case ACCT_EV_PERMUTE_AND_FLIP:
			cost = ev->u.permute_and_flip.epsilon;
			break;
		case ACCT_EV_RANDOMIZED_RESPONSE: {
			double p = ev->u.randomized_response.noise_parameter;

			/* The loss of the p used: the requested epsilon up to the
			 * rounding of p (label_em prices the p it keeps labels with). */
			cost = log(1 + ev->u.randomized_response.num_buckets * (1 - p) / p);
			cr_assert_leq(cost, cases[i].cost * (1 + 1e-12), "%s", cases[i].body);
			cost = cases[i].cost;
			break;
		}
		default:
			break;
		}
		if (cases[i].cost > 0)
			cr_assert(cost >= cases[i].cost * (1 - 1e-12) && cost < cases[i].cost * (1 + 1e-4),
				  "%s: cost %.17g want %g", cases[i].body, cost, cases[i].cost);
		if (json_is_array(out) && strstr(cases[i].body, "values"))
			cr_assert_eq(json_array_size(out), 2 + (cases[i].body[11] == '1'));
		json_decref(out);
		acct_event_free(ev);
	}
	mech_rng_free(r);
}

/*
 * A real release asked for at an epsilon costs that epsilon: its event,
 * priced at the body's delta (pld for the Gaussian, the pure epsilon of a
 * Laplace event by basic), is within 2% of it, or the release is refused at
 * /epsilon (where the noise scale spans so many grid units that D rounds
 * up to a whole one, or a vector's extra units outweigh D's).  Before, a
 * Gaussian at 1e-7 and delta 1e-9 was released and cost 5.4e-6, and a
 * Laplace at 1e-13 cost 1.6e-12.  Counts what was released and refused.
 */
static void costs_what_was_asked(const char *name, const char *values, double delta, int kmax,
				 acct_accountant accountant, int *ret_released, int *ret_refused)
{
	acct_options o = {.accountant = accountant, .neighbor = ACCT_ADD_REMOVE};
	mech_rng *r = test_rng(51);

	for (int k = 1; k <= kmax; k++) {
		double eps = pow(10.0, -k);
		char body[160], delta_text[32] = "";
		json_t *out = NULL;
		acct_event *ev = NULL;
		acct_result res;
		acct_error err;

		if (delta > 0)
			snprintf(delta_text, sizeof(delta_text), ",\"delta\":%g", delta);
		/* 0.3 is no multiple of a power of two: its image is never whole. */
		snprintf(body, sizeof(body), "{%s,\"sensitivity\":0.3,\"epsilon\":%g%s}", values,
			 eps, delta_text);
		if (release(name, body, &out, &ev, &err, r) < 0) {
			cr_assert_str_eq(err.where, "/epsilon", "%s: %s", body, err.text);
			(*ret_refused)++;
			continue;
		}
		acct_error_init(&err);
		cr_assert_eq(acct_epsilon(ev, delta, &o, &res, &err), 0, "%s", err.text);
		cr_assert_leq(res.epsilon, 1.02 * eps, "%s: costs %g", body, res.epsilon);
		(*ret_released)++;
		json_decref(out);
		acct_event_free(ev);
	}
	mech_rng_free(r);
}

Test(srv_mech, a_real_release_at_an_epsilon_costs_that_epsilon)
{
	int released = 0, refused = 0;

	costs_what_was_asked("gaussian", "\"value\":3", 1e-5, 7, ACCT_PLD, &released, &refused);
	costs_what_was_asked("gaussian", "\"value\":3", 1e-9, 7, ACCT_PLD, &released, &refused);
	cr_assert(released >= 3 && refused >= 3, "gaussian: %d released, %d refused", released,
		  refused);
	released = refused = 0;
	costs_what_was_asked("laplace", "\"value\":3", 0, 14, ACCT_BASIC, &released, &refused);
	cr_assert(released >= 3 && refused >= 3, "laplace: %d released, %d refused", released,
		  refused);
	/* Three values add two units to D's image. */
	released = refused = 0;
	costs_what_was_asked("laplace", "\"values\":[1,2,3]", 0, 14, ACCT_BASIC, &released,
			     &refused);
	cr_assert(released >= 3 && refused >= 3, "laplace vector: %d released, %d refused",
		  released, refused);
	/* Report-noisy-max's Laplace noise sits on the same grid. */
	released = refused = 0;
	costs_what_was_asked("report_noisy_max", "\"scores\":[1,2,3],\"noise\":\"laplace\"", 0,
			     14, ACCT_BASIC, &released, &refused);
	cr_assert(released >= 3 && refused >= 3, "report_noisy_max: %d released, %d refused",
		  released, refused);
}

Test(srv_mech, bad_bodies_name_the_field_and_draw_nothing)
{
	static const struct {
		const char *name, *body, *where;
	} cases[] = {
		{"laplace", "{\"sensitivity\":1,\"epsilon\":0.5}", "/value"},
		{"laplace", "{\"value\":\"x\",\"sensitivity\":1,\"epsilon\":0.5}", "/value"},
		{"laplace", "{\"values\":[1,\"x\"],\"sensitivity\":1,\"epsilon\":0.5}", "/values/1"},
		{"laplace", "{\"values\":[],\"sensitivity\":1,\"epsilon\":0.5}", "/values"},
		{"laplace", "{\"value\":1,\"values\":[1],\"sensitivity\":1,\"epsilon\":0.5}", "/value"},
		{"laplace", "{\"value\":1,\"sensitivity\":0,\"epsilon\":0.5}", "/sensitivity"},
		{"laplace", "{\"value\":1,\"sensitivity\":-1,\"epsilon\":0.5}", "/sensitivity"},
		{"laplace", "{\"value\":1,\"epsilon\":0.5}", "/sensitivity"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":0}", "/epsilon"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":-3}", "/epsilon"},
		{"laplace", "{\"value\":1,\"sensitivity\":1}", "/epsilon"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"scale\":2}", "/scale"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"delta\":1e-5}", "/delta"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"color\":2}", "/color"},
		/* A noise scale derived from 'epsilon' or 'noise_multiplier' and
		 * refused is blamed on the field sent, not on /scale or /sigma. */
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1e9}", "/epsilon"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1e-320}", "/epsilon"},
		{"laplace", "{\"value\":1,\"sensitivity\":1e300,\"noise_multiplier\":1e10}",
		 "/noise_multiplier"},
		{"laplace", "{\"value\":1,\"sensitivity\":1,\"scale\":1e-300}", "/scale"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1e300,\"noise_multiplier\":1e300}",
		 "/noise_multiplier"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1e-300,\"noise_multiplier\":1e-300}",
		 "/noise_multiplier"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1e308,\"epsilon\":1e-10,\"delta\":1e-7}",
		 "/epsilon"},
		{"discrete_laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1e-300}", "/epsilon"},
		/* sigma / D = 4e8 at this delta: D is under one grid unit. */
		{"gaussian", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1e-7,\"delta\":1e-9}",
		 "/epsilon"},
		{"gaussian", "{\"values\":[1,2],\"sensitivity\":1,\"epsilon\":1e-6,\"delta\":1e-9}",
		 "/epsilon"},
		{"discrete_gaussian",
		 "{\"value\":1,\"sensitivity\":1,\"epsilon\":1e-300,\"delta\":1e-7}", "/epsilon"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1}", "/delta"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1,\"epsilon\":1,\"delta\":1}", "/delta"},
		{"gaussian", "{\"value\":1,\"sensitivity\":1,\"sigma\":1,\"delta\":0.1}", "/delta"},
		{"discrete_laplace", "{\"value\":1.5,\"sensitivity\":1,\"epsilon\":1}", "/value"},
		{"discrete_laplace", "{\"value\":1,\"sensitivity\":1.5,\"epsilon\":1}", "/sensitivity"},
		{"exponential", "{\"scores\":[],\"sensitivity\":1,\"epsilon\":1}", "/scores"},
		{"exponential", "{\"sensitivity\":1,\"epsilon\":1}", "/scores"},
		{"exponential", "{\"scores\":[1,null],\"sensitivity\":1,\"epsilon\":1}", "/scores/1"},
		{"exponential", "{\"scores\":[1,2],\"sensitivity\":1,\"epsilon\":1,\"monotone\":1}",
		 "/monotone"},
		{"permute_and_flip", "{\"scores\":[1,2],\"sensitivity\":1,\"epsilon\":1,\"monotone\":true}",
		 "/monotone"},
		{"report_noisy_max", "{\"scores\":[1,2],\"sensitivity\":1,\"epsilon\":1}", "/noise"},
		{"report_noisy_max", "{\"scores\":[1,2],\"sensitivity\":1,\"epsilon\":1,\"noise\":\"cauchy\"}",
		 "/noise"},
		{"report_noisy_max", "{\"scores\":[1,2],\"sensitivity\":1,\"epsilon\":1,\"noise\":\"gaussian\"}",
		 "/epsilon"},
		{"randomized_response", "{\"value\":5,\"num_buckets\":5,\"epsilon\":1}", "/value"},
		{"randomized_response", "{\"value\":0,\"num_buckets\":1,\"epsilon\":1}", "/num_buckets"},
		{"label_em", "{\"labels\":[0,2],\"epsilon\":1}", "/labels/1"},
		{"label_em", "{\"labels\":[],\"epsilon\":1}", "/labels"},
		{"nonesuch", "{}", "/name"},
	};
	uint8_t seed[32] = {7}, a[32], b[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mech_rng *r = mech_rng_new_seeded(seed), *fresh = mech_rng_new_seeded(seed);
		json_t *out = NULL;
		acct_event *ev = NULL;
		acct_error err;

		cr_assert_eq(release(cases[i].name, cases[i].body, &out, &ev, &err, r), ACCT_EINVAL,
			     "%s %s", cases[i].name, cases[i].body);
		cr_assert_str_eq(err.where, cases[i].where, "%s %s: %s", cases[i].name, cases[i].body,
				 err.text);
		cr_assert_null(out);
		cr_assert_null(ev);
		/* No randomness was consumed: validation precedes sampling. */
		mech_rng_bytes(r, a, sizeof(a));
		mech_rng_bytes(fresh, b, sizeof(b));
		cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "%s drew noise before failing", cases[i].body);
		mech_rng_free(r);
		mech_rng_free(fresh);
	}
}

Test(srv_mech, vector_over_the_limit)
{
	json_t *vals = json_array(), *body, *out = NULL;
	acct_event *ev = NULL;
	acct_error err;
	mech_rng *r = test_rng(51);

	for (int i = 0; i <= DPG_MAX_VECTOR_LEN; i++)
		json_array_append_new(vals, json_real(1.0));
	body = json_pack("{s:o,s:f,s:f}", "values", vals, "sensitivity", 1.0, "epsilon", 1.0);
	acct_error_init(&err);
	cr_assert_eq(srv_mech_release("laplace", body, r, &out, &ev, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/values");
	json_decref(body);
	mech_rng_free(r);
}

Test(srv_mech, names_are_listed)
{
	const char *const *names = srv_mech_names();
	int n = 0;

	for (; names[n]; n++)
		;
	cr_assert_eq(n, 9);
	cr_assert_str_eq(names[0], "laplace");
}

Test(srv_mech, table_queries)
{
	const char *csv = "age,city\n30,Paris\n40,Lyon\n50,Paris\n";
	static const struct {
		const char *body, *mechanism;
		json_type out_type;
	} good[] = {
		{"{\"query\":\"count\",\"epsilon\":1}", "discrete_laplace", JSON_INTEGER},
		{"{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":1}", "laplace", JSON_REAL},
		{"{\"query\":\"mean\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":1}",
		 "laplace_sum_over_discrete_laplace_count", JSON_REAL},
		{"{\"query\":\"histogram\",\"column\":\"city\",\"categories\":[\"Paris\",\"Rome\"],\"epsilon\":1}",
		 "discrete_laplace", JSON_OBJECT},
		{"{\"query\":\"quantile\",\"column\":\"age\",\"q\":0.5,\"lo\":0,\"hi\":100,\"epsilon\":1}",
		 "exponential", JSON_REAL},
	};
	static const struct {
		const char *body, *where;
	} bad[] = {
		{"{\"query\":\"median\",\"epsilon\":1}", "/query"},
		{"{\"epsilon\":1}", "/query"},
		{"{\"query\":\"count\"}", "/epsilon"},
		{"{\"query\":\"sum\",\"column\":\"height\",\"lo\":0,\"hi\":1,\"epsilon\":1}", "/column"},
		{"{\"query\":\"sum\",\"column\":\"city\",\"lo\":0,\"hi\":1,\"epsilon\":1}", "/column"},
		{"{\"query\":\"sum\",\"column\":\"age\",\"hi\":1,\"epsilon\":1}", "/lo"},
		{"{\"query\":\"sum\",\"column\":\"age\",\"lo\":2,\"hi\":1,\"epsilon\":1}", "/hi"},
		{"{\"query\":\"histogram\",\"column\":\"city\",\"categories\":[3],\"epsilon\":1}", "/categories/0"},
		{"{\"query\":\"histogram\",\"column\":\"city\",\"epsilon\":1}", "/categories"},
		{"{\"query\":\"quantile\",\"column\":\"age\",\"lo\":0,\"hi\":1,\"epsilon\":1}", "/q"},
		{"{\"query\":\"count\",\"epsilon\":1,\"rows\":3}", "/rows"},
	};
	mech_table *t = NULL;
	acct_error err;
	mech_rng *r = test_rng(52);

	acct_error_init(&err);
	cr_assert_eq(mech_table_parse_csv(csv, strlen(csv), NULL, 0, &t, &err), 0);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		json_t *body = json_loads(good[i].body, 0, NULL), *out = NULL;
		acct_event *ev = NULL;

		acct_error_init(&err);
		cr_assert_eq(srv_mech_table_query(t, ACCT_ADD_REMOVE, body, r, &out, &ev, &err), 0,
			     "%s: %s %s", good[i].body, err.where, err.text);
		cr_assert_str_eq(json_string_value(json_object_get(out, "mechanism")), good[i].mechanism);
		cr_assert_eq(json_typeof(json_object_get(out, "output")), good[i].out_type, "%s",
			     good[i].body);
		cr_assert_not_null(ev);
		json_decref(out);
		json_decref(body);
		acct_event_free(ev);
	}
	/* Under replace a mean divides by the exact row count, noised nowhere:
	 * one sum event at the whole epsilon, and named so. */
	{
		json_t *body = json_loads(good[2].body, 0, NULL), *out = NULL;
		acct_event *ev = NULL;

		cr_assert_eq(srv_mech_table_query(t, ACCT_REPLACE, body, r, &out, &ev, &err), 0);
		cr_assert_str_eq(json_string_value(json_object_get(out, "mechanism")),
				 "laplace_sum_over_exact_count");
		cr_assert_eq(ev->type, ACCT_EV_DISCRETE_LAPLACE, "no composed count");
		json_decref(out);
		json_decref(body);
		acct_event_free(ev);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *body = json_loads(bad[i].body, 0, NULL), *out = NULL;
		acct_event *ev = NULL;

		acct_error_init(&err);
		cr_assert_eq(srv_mech_table_query(t, ACCT_ADD_REMOVE, body, r, &out, &ev, &err),
			     ACCT_EINVAL, "%s", bad[i].body);
		cr_assert_str_eq(err.where, bad[i].where, "%s: %s", bad[i].body, err.text);
		cr_assert_null(out);
		cr_assert_null(ev);
		json_decref(body);
	}
	mech_table_free(t);
	mech_rng_free(r);
}
