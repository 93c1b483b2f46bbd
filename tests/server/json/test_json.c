/*
 * test_json.c: the privacy-event parser and codec (server/json/json_codec.c).
 *
 * Contract: DESIGN.md "Privacy events" (types and fields), the bounds of
 * include/dpg_limits.h, and json.h: a bad event is ACCT_EINVAL with
 * `where` the JSON pointer of the field at fault (RFC 6901 escaping), and
 * the out-parameter is written only on success; a good event round-trips
 * through srv_event_to_json to the same JSON.
 *
 * Event texts are written with single quotes for readability; sq() turns
 * them into JSON.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "json.h"

static json_t *sq(const char *text)
{
	char *s = strdup(text);
	json_t *j;
	json_error_t jerr;

	cr_assert_not_null(s);
	for (char *p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = json_loads(s, JSON_DECODE_ANY, &jerr);
	cr_assert_not_null(j, "test input is not JSON: %s (%s)", text, jerr.text);
	free(s);
	return j;
}

/* ---- bad events ------------------------------------------------------------ */

struct bad_case {
	const char *event;   /* parsed at "/event" */
	const char *where;   /* expected JSON pointer */
};

static const struct bad_case bad_cases[] = {
	/* not an event at all */
	{"[]", "/event"},
	{"'gaussian'", "/event"},
	{"null", "/event"},
	{"4", "/event"},
	/* type */
	{"{}", "/event/type"},
	{"{'noise_multiplier':1.0}", "/event/type"},
	{"{'type':'nope'}", "/event/type"},
	{"{'type':'Gaussian','noise_multiplier':1.0}", "/event/type"},
	{"{'type':''}", "/event/type"},
	{"{'type':7}", "/event/type"},
	{"{'type':null}", "/event/type"},
	/* gaussian / laplace: noise_multiplier > 0 */
	{"{'type':'gaussian'}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':0}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':0.0}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':-1.5}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':'4'}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':null}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':true}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':[1.0]}", "/event/noise_multiplier"},
	{"{'type':'gaussian','noise_multiplier':4.0,'sigma':1.0}", "/event/sigma"},
	{"{'type':'gaussian','noise_multiplier':4.0,'a/b~c':1}", "/event/a~1b~0c"},
	{"{'type':'laplace','noise_multiplier':0.0}", "/event/noise_multiplier"},
	{"{'type':'laplace','noise_multiplier':-2}", "/event/noise_multiplier"},
	/* discrete_gaussian: sigma > 0, integer sensitivity >= 1 */
	{"{'type':'discrete_gaussian','sensitivity':1}", "/event/sigma"},
	{"{'type':'discrete_gaussian','sigma':0.0,'sensitivity':1}", "/event/sigma"},
	{"{'type':'discrete_gaussian','sigma':2.0}", "/event/sensitivity"},
	{"{'type':'discrete_gaussian','sigma':2.0,'sensitivity':0}", "/event/sensitivity"},
	{"{'type':'discrete_gaussian','sigma':2.0,'sensitivity':1.5}", "/event/sensitivity"},
	{"{'type':'discrete_gaussian','sigma':2.0,'sensitivity':-3}", "/event/sensitivity"},
	{"{'type':'discrete_gaussian','sigma':2.0,'sensitivity':1,'noise_multiplier':1.0}",
	 "/event/noise_multiplier"},
	/* discrete_laplace */
	{"{'type':'discrete_laplace','sensitivity':1}", "/event/noise_parameter"},
	{"{'type':'discrete_laplace','noise_parameter':0,'sensitivity':1}", "/event/noise_parameter"},
	{"{'type':'discrete_laplace','noise_parameter':1.0,'sensitivity':0}", "/event/sensitivity"},
	/* randomized_response: noise_parameter in (0, 1], 2 <= num_buckets <= 1e9 */
	{"{'type':'randomized_response','noise_parameter':0.0,'num_buckets':2}", "/event/noise_parameter"},
	{"{'type':'randomized_response','noise_parameter':1.5,'num_buckets':2}", "/event/noise_parameter"},
	{"{'type':'randomized_response','noise_parameter':0.5,'num_buckets':1}", "/event/num_buckets"},
	{"{'type':'randomized_response','noise_parameter':0.5,'num_buckets':1000000001}",
	 "/event/num_buckets"},
	{"{'type':'randomized_response','noise_parameter':0.5,'num_buckets':2.5}", "/event/num_buckets"},
	{"{'type':'randomized_response','noise_parameter':0.5}", "/event/num_buckets"},
	/* exponential_mechanism / permute_and_flip: epsilon > 0 */
	{"{'type':'exponential_mechanism','epsilon':0.0}", "/event/epsilon"},
	{"{'type':'exponential_mechanism'}", "/event/epsilon"},
	{"{'type':'permute_and_flip','epsilon':-1.0}", "/event/epsilon"},
	{"{'type':'permute_and_flip','epsilon':1.0,'delta':0.0}", "/event/delta"},
	/* epsilon_delta: epsilon >= 0, delta in [0, 1] */
	{"{'type':'epsilon_delta','epsilon':1.0}", "/event/delta"},
	{"{'type':'epsilon_delta','delta':0.0}", "/event/epsilon"},
	{"{'type':'epsilon_delta','epsilon':-0.1,'delta':0.0}", "/event/epsilon"},
	{"{'type':'epsilon_delta','epsilon':1.0,'delta':-1e-9}", "/event/delta"},
	{"{'type':'epsilon_delta','epsilon':1.0,'delta':1.5}", "/event/delta"},
	/* zcdp: rho >= 0 */
	{"{'type':'zcdp'}", "/event/rho"},
	{"{'type':'zcdp','rho':-0.5}", "/event/rho"},
	/* poisson_sampled: q in (0, 1], an event */
	{"{'type':'poisson_sampled','sampling_probability':0.0,'event':{'type':'gaussian','noise_multiplier':1.0}}",
	 "/event/sampling_probability"},
	{"{'type':'poisson_sampled','sampling_probability':1.0000001,'event':{'type':'gaussian','noise_multiplier':1.0}}",
	 "/event/sampling_probability"},
	{"{'type':'poisson_sampled','event':{'type':'gaussian','noise_multiplier':1.0}}",
	 "/event/sampling_probability"},
	{"{'type':'poisson_sampled','sampling_probability':0.5}", "/event/event"},
	{"{'type':'poisson_sampled','sampling_probability':0.5,'event':7}", "/event/event"},
	{"{'type':'poisson_sampled','sampling_probability':0.5,'event':{'type':'gaussian'}}",
	 "/event/event/noise_multiplier"},
	{"{'type':'poisson_sampled','sampling_probability':0.5,'event':{'type':'nope'}}",
	 "/event/event/type"},
	/* sampled_without_replacement: 1 <= sample_size <= source_dataset_size <= 1e12 */
	{"{'type':'sampled_without_replacement','source_dataset_size':0,'sample_size':1,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/source_dataset_size"},
	{"{'type':'sampled_without_replacement','source_dataset_size':1000000000001,'sample_size':1,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/source_dataset_size"},
	{"{'type':'sampled_without_replacement','source_dataset_size':100,'sample_size':101,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/sample_size"},
	{"{'type':'sampled_without_replacement','source_dataset_size':100,'sample_size':0,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/sample_size"},
	{"{'type':'sampled_without_replacement','source_dataset_size':100,'sample_size':10}",
	 "/event/event"},
	/* self_composed: 1 <= count <= 1e8 */
	{"{'type':'self_composed','count':0,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/count"},
	{"{'type':'self_composed','count':100000001,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/count"},
	{"{'type':'self_composed','count':2.5,'event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/count"},
	{"{'type':'self_composed','count':'3','event':{'type':'laplace','noise_multiplier':1.0}}",
	 "/event/count"},
	{"{'type':'self_composed','event':{'type':'laplace','noise_multiplier':1.0}}", "/event/count"},
	{"{'type':'self_composed','count':3}", "/event/event"},
	/* composed: an array of events */
	{"{'type':'composed'}", "/event/events"},
	{"{'type':'composed','events':{}}", "/event/events"},
	{"{'type':'composed','events':{'type':'gnmax','sigma':1.0}}", "/event/events"},
	{"{'type':'composed','events':[1]}", "/event/events/0"},
	{"{'type':'composed','events':[{'type':'gnmax','sigma':1.0},{'type':'gnmax'}]}",
	 "/event/events/1/sigma"},
	{"{'type':'composed','events':[{'type':'gnmax','sigma':1.0},{'type':'laplace','noise_multiplier':1.0,'x':0}]}",
	 "/event/events/1/x"},
	/* gnmax / pate_threshold: sigma > 0 */
	{"{'type':'gnmax','sigma':0.0}", "/event/sigma"},
	{"{'type':'gnmax'}", "/event/sigma"},
	{"{'type':'pate_threshold','sigma':-1.0}", "/event/sigma"},
	{"{'type':'pate_threshold','sigma':1.0,'threshold':5.0}", "/event/threshold"},
	/* a fault deep inside points at the deep field */
	{"{'type':'self_composed','count':10,'event':{'type':'poisson_sampled','sampling_probability':0.1,"
	 "'event':{'type':'composed','events':[{'type':'gaussian','noise_multiplier':-1.0}]}}}",
	 "/event/event/event/events/0/noise_multiplier"},
};

static void expect_bad(json_t *j, const char *root, const char *want_where, const char *label)
{
	acct_event sentinel_storage;
	acct_event *const sentinel = &sentinel_storage;
	acct_event *ev = sentinel;
	acct_error err;
	int rc;

	acct_error_init(&err);
	rc = srv_event_parse(j, root, &ev, &err);
	cr_expect_eq(rc, ACCT_EINVAL, "%s: rc %d, want ACCT_EINVAL (%s)", label, rc, err.text);
	cr_expect_eq(err.code, ACCT_EINVAL, "%s: err.code %d", label, err.code);
	cr_expect_str_eq(err.where, want_where, "%s: where '%s', want '%s' (%s)", label, err.where,
			 want_where, err.text);
	cr_expect_str_not_empty(err.text, "%s: no message", label);
	cr_expect_eq(ev, sentinel, "%s: the out-parameter was written on failure", label);
}

Test(event_parse, bad_events_point_at_the_field)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		json_t *j = sq(bad_cases[i].event);

		expect_bad(j, "/event", bad_cases[i].where, bad_cases[i].event);
		json_decref(j);
	}
}

/* The root pointer is the caller's: "" names the body itself. */
Test(event_parse, root_pointer_is_the_callers)
{
	json_t *j = sq("{'type':'gaussian','noise_multiplier':-1.0}");

	expect_bad(j, "", "/noise_multiplier", "root ''");
	expect_bad(j, NULL, "/noise_multiplier", "root NULL");
	expect_bad(j, "/template", "/template/noise_multiplier", "root /template");
	json_decref(j);
}

/* Builds `wrappers` self_composed levels around a gaussian leaf. */
static json_t *nested(int wrappers)
{
	json_t *e = json_pack("{s:s, s:f}", "type", "gaussian", "noise_multiplier", 1.0);

	for (int i = 0; i < wrappers; i++)
		e = json_pack("{s:s, s:i, s:o}", "type", "self_composed", "count", 2, "event", e);
	cr_assert_not_null(e);
	return e;
}

/* Events may nest DPG_MAX_EVENT_DEPTH levels below the outermost event; the
 * first event deeper than that is the field at fault. */
Test(event_parse, nesting_limit)
{
	acct_event *ev = NULL;
	acct_error err;
	char where[ACCT_ERROR_WHERE_BYTES] = "/event";
	json_t *ok = nested(DPG_MAX_EVENT_DEPTH);
	json_t *deep = nested(DPG_MAX_EVENT_DEPTH + 1);

	acct_error_init(&err);
	cr_expect_eq(srv_event_parse(ok, "/event", &ev, &err), 0, "depth %d refused: %s at %s",
		     DPG_MAX_EVENT_DEPTH, err.text, err.where);
	acct_event_free(ev);
	for (int i = 0; i < DPG_MAX_EVENT_DEPTH + 1; i++)
		strcat(where, "/event");
	expect_bad(deep, "/event", where, "one level too deep");
	json_decref(ok);
	json_decref(deep);
}

static json_t *composed_of(size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_pack("{s:s, s:f}", "type", "gnmax", "sigma", 10.0));
	return json_pack("{s:s, s:o}", "type", "composed", "events", arr);
}

/* At most DPG_MAX_EVENT_NODES events in one tree, the outermost included. */
Test(event_parse, node_limit)
{
	acct_event *ev = NULL;
	acct_error err;
	json_t *ok = composed_of(DPG_MAX_EVENT_NODES - 1);
	json_t *over = composed_of(DPG_MAX_EVENT_NODES);
	json_t *way_over = composed_of(DPG_MAX_EVENT_NODES + 1);
	char where[64];

	acct_error_init(&err);
	cr_expect_eq(srv_event_parse(ok, "/event", &ev, &err), 0, "%d nodes refused: %s",
		     DPG_MAX_EVENT_NODES, err.text);
	acct_event_free(ev);
	/* The node past the limit is the last child. */
	snprintf(where, sizeof(where), "/event/events/%d", DPG_MAX_EVENT_NODES - 1);
	expect_bad(over, "/event", where, "one node too many");
	acct_error_init(&err);
	ev = NULL;
	cr_expect_eq(srv_event_parse(way_over, "/event", &ev, &err), ACCT_EINVAL);
	cr_expect_null(ev);
	cr_expect_eq(strncmp(err.where, "/event/events", 13), 0, "where '%s'", err.where);
	json_decref(ok);
	json_decref(over);
	json_decref(way_over);
}

/* ---- good events round-trip ------------------------------------------------- */

/* Reals are written with a decimal point and integers without, as the
 * canonical form does, so input and output compare equal as JSON. */
static const char *const good_events[] = {
	"{'type':'gaussian','noise_multiplier':4.0}",
	"{'type':'gaussian','noise_multiplier':1e-05}",
	"{'type':'laplace','noise_multiplier':2.0}",
	"{'type':'discrete_gaussian','sigma':3.5,'sensitivity':2}",
	"{'type':'discrete_gaussian','sigma':3.5,'sensitivity':2147483647}",
	"{'type':'discrete_laplace','noise_parameter':0.5,'sensitivity':1}",
	"{'type':'randomized_response','noise_parameter':0.25,'num_buckets':10}",
	"{'type':'randomized_response','noise_parameter':1.0,'num_buckets':2}",
	"{'type':'randomized_response','noise_parameter':0.5,'num_buckets':1000000000}",
	"{'type':'exponential_mechanism','epsilon':0.5}",
	"{'type':'permute_and_flip','epsilon':1.0}",
	"{'type':'epsilon_delta','epsilon':1.0,'delta':1e-05}",
	"{'type':'epsilon_delta','epsilon':0.0,'delta':0.0}",
	"{'type':'epsilon_delta','epsilon':0.1,'delta':1.0}",
	"{'type':'zcdp','rho':0.0}",
	"{'type':'zcdp','rho':0.125}",
	"{'type':'poisson_sampled','sampling_probability':1.0,'event':{'type':'gaussian','noise_multiplier':1.1}}",
	"{'type':'sampled_without_replacement','source_dataset_size':60000,'sample_size':256,"
	"'event':{'type':'laplace','noise_multiplier':1.0}}",
	"{'type':'sampled_without_replacement','source_dataset_size':1000000000000,'sample_size':1000000000000,"
	"'event':{'type':'laplace','noise_multiplier':1.0}}",
	"{'type':'self_composed','count':1,'event':{'type':'zcdp','rho':0.5}}",
	"{'type':'self_composed','count':100000000,'event':{'type':'gnmax','sigma':40.0}}",
	"{'type':'composed','events':[{'type':'gnmax','sigma':40.0},{'type':'pate_threshold','sigma':150.0}]}",
	"{'type':'composed','events':[{'type':'composed','events':[{'type':'laplace','noise_multiplier':3.0}]},"
	"{'type':'epsilon_delta','epsilon':0.3,'delta':1e-07}]}",
	"{'type':'gnmax','sigma':40.0}",
	"{'type':'pate_threshold','sigma':150.0}",
	/* DESIGN.md's example: DP-SGD, 100 epochs at q = 0.01 */
	"{'type':'self_composed','count':10000,'event':{'type':'poisson_sampled','sampling_probability':0.01,"
	"'event':{'type':'gaussian','noise_multiplier':4.0}}}",
};

Test(event_parse, good_events_round_trip)
{
	for (size_t i = 0; i < sizeof(good_events) / sizeof(good_events[0]); i++) {
		json_t *in = sq(good_events[i]), *out, *back;
		acct_event *ev = NULL;
		acct_error err;
		char *text;
		int rc;

		acct_error_init(&err);
		rc = srv_event_parse(in, "/event", &ev, &err);
		cr_expect_eq(rc, 0, "%s refused: %s at %s", good_events[i], err.text, err.where);
		if (rc != 0) {
			json_decref(in);
			continue;
		}
		cr_expect_eq(err.code, ACCT_OK);
		cr_assert_not_null(ev);
		out = srv_event_to_json(ev);
		cr_assert_not_null(out);
		text = srv_json_dump(out);
		cr_assert_not_null(text);
		cr_expect(json_equal(in, out), "%s came back as %s", good_events[i], text);
		/* The serialised text reads back as the same JSON. */
		back = json_loads(text, 0, NULL);
		cr_expect(json_equal(back, out), "%s does not read back", text);
		free(text);
		json_decref(back);
		json_decref(out);
		json_decref(in);
		acct_event_free(ev);
	}
}

/* Integer fields accept reals with an integral value (json.h) and come
 * back as integers in the canonical form. */
Test(event_parse, integral_reals_become_integers)
{
	json_t *in = sq("{'type':'self_composed','count':1e3,'event':{'type':'discrete_laplace',"
			"'noise_parameter':2.0,'sensitivity':3.0}}");
	json_t *want = sq("{'type':'self_composed','count':1000,'event':{'type':'discrete_laplace',"
			  "'noise_parameter':2.0,'sensitivity':3}}");
	acct_event *ev = NULL;
	acct_error err;
	json_t *out;

	acct_error_init(&err);
	cr_assert_eq(srv_event_parse(in, "/event", &ev, &err), 0, "%s at %s", err.text, err.where);
	cr_expect_eq(ev->u.self_composed.count, 1000);
	out = srv_event_to_json(ev);
	cr_expect(json_equal(out, want));
	cr_expect(json_is_integer(json_object_get(out, "count")));
	json_decref(out);
	json_decref(in);
	json_decref(want);
	acct_event_free(ev);
}

/* The parsed tree holds the values given. */
Test(event_parse, values_reach_the_tree)
{
	json_t *in = sq("{'type':'self_composed','count':10000,'event':{'type':'poisson_sampled',"
			"'sampling_probability':0.01,'event':{'type':'gaussian','noise_multiplier':4.0}}}");
	acct_event *ev = NULL;
	acct_error err;
	const acct_event *ps, *g;

	acct_error_init(&err);
	cr_assert_eq(srv_event_parse(in, "/event", &ev, &err), 0);
	cr_expect_eq(ev->type, ACCT_EV_SELF_COMPOSED);
	cr_expect_eq(ev->u.self_composed.count, 10000);
	ps = ev->u.self_composed.event;
	cr_assert_not_null(ps);
	cr_expect_eq(ps->type, ACCT_EV_POISSON_SAMPLED);
	cr_expect_eq(ps->u.poisson_sampled.sampling_probability, 0.01);
	g = ps->u.poisson_sampled.event;
	cr_assert_not_null(g);
	cr_expect_eq(g->type, ACCT_EV_GAUSSIAN);
	cr_expect_eq(g->u.gaussian.noise_multiplier, 4.0);
	json_decref(in);
	acct_event_free(ev);
}

/* ---- JSON output ------------------------------------------------------------ */

/* Reals print in the shortest form that reads back as the same double;
 * a real never prints as an integer. */
/*
 * The pointer of the value a parser stopped on: the last scalar that starts
 * before the position, through objects (keys decoded and RFC 6901 escaped)
 * and arrays (elements counted, containers included).
 */
Test(json_pointer_at, names_the_last_value_before_the_position)
{
	static const struct {
		const char *text, *stop_after, *want;
	} cases[] = {
		{"{\"a\":1,\"b\":99999999999999999999}", "999}", "/b"},
		{"{\"a\":{\"b\":[1,{\"c\":2},[3,4e999]]}}", "4e999", "/a/b/2/1"},
		{"{\"x\":[[],{},\"s\",true,null,-1e400]}", "-1e400", "/x/5"},
		{"{\"a/b\":{\"c~d\":1e999}}", "1e999", "/a~1b/c~0d"},
		{"{\"k\\\"q\\u0041\":1e999}", "1e999", "/k\"qA"},
		{"{\"s\":\"a,]}\\\"b\",\"n\":1e999}", "1e999", "/n"},
		{"1e999", "1e999", ""},
	};
	char buf[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *end = strstr(cases[i].text, cases[i].stop_after);
		size_t pos;

		cr_assert_not_null(end, "case %zu", i);
		pos = (size_t)(end - cases[i].text) + strlen(cases[i].stop_after);
		srv_json_pointer_at(cases[i].text, strlen(cases[i].text), pos, buf, sizeof(buf));
		cr_assert_str_eq(buf, cases[i].want, "case %zu: %s", i, cases[i].text);
	}
}

/*
 * An array element is read as a finite real in its range, lo excluded
 * under SRV_LO_OPEN and hi under SRV_HI_OPEN, a whole number when asked; a refusal names the
 * element's pointer and leaves *ret alone.
 */
Test(json_array_real, range_openness_and_integers)
{
	static const struct {
		size_t i;
		unsigned flags;
		bool integer;
		int want_rc;
		double want;
	} cases[] = {
		{0, 0, false, 0, 1.0},            /* lo itself, closed */
		{0, SRV_LO_OPEN, false, ACCT_EINVAL, 0}, /* lo itself, open */
		{1, SRV_LO_OPEN, false, 0, 2.5},
		{1, 0, true, ACCT_EINVAL, 0},      /* 2.5 is not whole */
		{2, 0, true, 0, 3.0},
		{2, SRV_HI_OPEN, true, ACCT_EINVAL, 0}, /* hi itself, open */
		{3, 0, false, ACCT_EINVAL, 0},     /* 4 > hi */
		{4, 0, false, ACCT_EINVAL, 0},     /* a string */
		{5, 0, false, ACCT_EINVAL, 0},     /* past the end */
	};
	json_t *arr = json_loads("[1, 2.5, 3, 4, \"2\"]", 0, NULL);
	char where[32];

	cr_assert_not_null(arr);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		acct_error err;
		double got = -7.0;
		int rc;

		acct_error_init(&err);
		rc = srv_json_array_real(arr, "/v", cases[k].i, cases[k].flags, 1.0, 3.0,
					 cases[k].integer, &got, &err);
		cr_assert_eq(rc, cases[k].want_rc, "case %zu: %d %s", k, rc, err.text);
		if (rc == 0) {
			cr_assert_eq(got, cases[k].want, "case %zu", k);
			continue;
		}
		snprintf(where, sizeof(where), "/v/%zu", cases[k].i);
		cr_assert_str_eq(err.where, where, "case %zu", k);
		cr_assert_eq(got, -7.0, "case %zu", k);
	}
	json_decref(arr);
}

/* A negative zero reads as zero: the answers that echo a value read by
 * srv_json_real (a delta, an epsilon) said -0.0. */
Test(json_real, negative_zero_reads_as_zero)
{
	json_t *o = json_loads("{\"delta\": -0.0}", 0, NULL);
	acct_error err;
	double got = 1.0;

	cr_assert_not_null(o);
	cr_assert(signbit(json_real_value(json_object_get(o, "delta"))), "jansson keeps -0");
	acct_error_init(&err);
	cr_assert_eq(srv_json_real(o, "", "delta", SRV_REQUIRED, 0.0, 1.0, &got, &err), 1, "%s",
		     err.text);
	cr_assert_eq(got, 0.0);
	cr_assert(!signbit(got), "read as -0");
	json_decref(o);
}

Test(json_dump, shortest_round_trip_reals)
{
	static const struct {
		double x;
		const char *text;
	} cases[] = {
		{0.1, "[0.1]"},
		{1e-05, "[1e-05]"},
		{3.0, "[3.0]"},
		{0.0, "[0.0]"},
		{-2.5, "[-2.5]"},
		{1e300, "[1e+300]"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *a = json_pack("[f]", cases[i].x);
		char *s = srv_json_dump(a);

		cr_assert_not_null(s);
		cr_expect_str_eq(s, cases[i].text);
		free(s);
		json_decref(a);
	}
	{
		double x = 0.1 + 0.2; /* needs 17 digits */
		json_t *a = json_pack("[f]", x);
		char *s = srv_json_dump(a);
		json_t *b = json_loads(s, 0, NULL);

		cr_expect_eq(json_real_value(json_array_get(b, 0)), x, "%s does not read back", s);
		free(s);
		json_decref(a);
		json_decref(b);
	}
}

/* Strings are escaped per RFC 8259: quote, backslash and control
 * characters; other UTF-8 is copied.  The output must read back equal. */
Test(json_dump, strings_are_escaped_and_read_back)
{
	json_t *j = json_object();
	json_t *back;
	char *text;

	json_object_set_new(j, "a\"b", json_string("x\\y\n\x01\xc3\xa9"));
	text = srv_json_dump(j);
	cr_assert_str_eq(text, "{\"a\\\"b\":\"x\\\\y\\u000a\\u0001\xc3\xa9\"}");
	back = json_loads(text, 0, NULL);
	cr_assert(json_equal(back, j));
	free(text);
	json_decref(back);
	json_decref(j);
}

/* A complete answer goes to the caller as it is; a partial one (failed) is
 * not handed over, is released (its reference count would otherwise stay
 * above zero, which the extra reference below observes), and reads as out
 * of memory. */
Test(json_hand_over, complete_answers_go_out_partial_ones_are_freed)
{
	json_t *ans = json_pack("{s:i}", "a", 1);
	json_t *got = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(srv_json_hand_over(ans, false, &got, &err), 0);
	cr_assert_eq(got, ans);
	cr_assert_eq(got->refcount, 1);
	json_decref(got);

	got = NULL;
	ans = json_pack("{s:i}", "a", 1);
	json_incref(ans);
	cr_assert_eq(srv_json_hand_over(ans, true, &got, &err), ACCT_ENOMEM);
	cr_assert_null(got);
	cr_assert_eq(ans->refcount, 1, "the partial answer was not released");
	cr_assert_str_eq(err.text, "out of memory");
	json_decref(ans);

	acct_error_init(&err);
	cr_assert_eq(srv_json_hand_over(NULL, true, &got, &err), ACCT_ENOMEM);
	cr_assert_null(got);
}
