/*
 * api_mech.c: request bodies of the mechanisms route (see api_mech.h).
 *
 * Parsing, range checks and the translation of privacy parameters into noise
 * scales live here; the sampling and the events are mechanisms/'s.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "api_mech.h"
#include "api_internal.h"

static const char *const mech_names[] = {
	"laplace", "gaussian", "discrete_laplace", "discrete_gaussian", "exponential",
	"permute_and_flip", "report_noisy_max", "randomized_response", "label_em", NULL,
};

const char *const *srv_mech_names(void)
{
	return mech_names;
}

/* A parsed value/values field. */
struct vec {
	size_t n;
	bool scalar;
	double *real;
	int64_t *integer;
};

static void vec_free(struct vec *v)
{
	free(v->real);
	free(v->integer);
}

/* Reads `key` (an array of 1..DPG_MAX_VECTOR_LEN numbers) or, when
 * scalar_key is given, that key as a single number.  Exactly one must be
 * present. */
static int read_vector(const json_t *body, const char *scalar_key, const char *key,
		       bool integers, struct vec *ret, acct_error *err)
{
	json_t *arr = json_object_get(body, key);
	json_t *one = scalar_key ? json_object_get(body, scalar_key) : NULL;
	char where[ACCT_ERROR_WHERE_BYTES];
	size_t n;
	int rc;

	memset(ret, 0, sizeof(*ret));
	if (arr && one)
		return acct_error_set(err, ACCT_EINVAL, "/value", "give '%s' or '%s', not both",
				      scalar_key, key);
	if (!arr && !one)
		return acct_error_set(err, ACCT_EINVAL, scalar_key ? "/value" : "/scores",
				      "'%s' is required", scalar_key ? scalar_key : key);
	if (arr && !json_is_array(arr)) {
		snprintf(where, sizeof(where), "/%s", key);
		return acct_error_set(err, ACCT_EINVAL, where, "'%s' must be an array", key);
	}
	n = one ? 1 : json_array_size(arr);
	if (n < 1 || n > DPG_MAX_VECTOR_LEN) {
		snprintf(where, sizeof(where), "/%s", key);
		return acct_error_set(err, ACCT_EINVAL, where, "'%s' must hold 1 to %d numbers", key,
				      DPG_MAX_VECTOR_LEN);
	}
	ret->n = n;
	ret->scalar = one != NULL;
	if (integers)
		ret->integer = malloc(n * sizeof(int64_t));
	else
		ret->real = malloc(n * sizeof(double));
	if (!ret->integer && !ret->real)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		/* Wrap each element so the checked readers name it. */
		json_t *holder = json_object();
		char idx[32];

		if (!holder) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto fail;
		}
		snprintf(idx, sizeof(idx), "%zu", i);
		json_object_set(holder, one ? scalar_key : idx, one ? one : json_array_get(arr, i));
		snprintf(where, sizeof(where), one ? "" : "/%s", key);
		if (integers)
			rc = srv_json_int(holder, where, one ? scalar_key : idx, SRV_REQUIRED,
					  -(INT64_C(1) << 62), INT64_C(1) << 62, &ret->integer[i], err);
		else
			rc = srv_json_real(holder, where, one ? scalar_key : idx, SRV_REQUIRED,
					   -HUGE_VAL, HUGE_VAL, &ret->real[i], err);
		json_decref(holder);
		if (rc < 0)
			goto fail;
	}
	return 0;
fail:
	vec_free(ret);
	memset(ret, 0, sizeof(*ret));
	return rc;
}

/* Exactly one of the listed keys may be present (absent ones skipped). */
static int only_one(const json_t *body, const char *const *keys, acct_error *err)
{
	const char *first = NULL;

	for (const char *const *k = keys; *k; k++) {
		json_t *v = json_object_get(body, *k);

		if (!v || json_is_null(v))
			continue;
		if (first) {
			char where[ACCT_ERROR_WHERE_BYTES];

			srv_json_pointer(where, sizeof(where), "", *k);
			return acct_error_set(err, ACCT_EINVAL, where,
					      "give only one of the noise parameters ('%s' and '%s')",
					      first, *k);
		}
		first = *k;
	}
	if (!first) {
		char where[ACCT_ERROR_WHERE_BYTES];

		srv_json_pointer(where, sizeof(where), "", keys[0]);
		return acct_error_set(err, ACCT_EINVAL, where, "'%s' (or another noise parameter) is required",
				      keys[0]);
	}
	return 0;
}

#define POS (SRV_LO_OPEN | SRV_NULLABLE)

/* Laplace scale from epsilon | noise_multiplier | scale. */
static int laplace_scale(const json_t *body, double sens, double *ret, acct_error *err)
{
	static const char *const keys[] = {"epsilon", "noise_multiplier", "scale", NULL};
	double x;
	int rc = only_one(body, keys, err);

	if (rc < 0)
		return rc;
	if ((rc = srv_json_real(body, "", "epsilon", POS, 0, HUGE_VAL, &x, err)) != 0) {
		if (rc > 0)
			*ret = acct_div_up(sens, x);
	} else if ((rc = srv_json_real(body, "", "noise_multiplier", POS, 0, HUGE_VAL, &x, err)) != 0) {
		if (rc > 0)
			*ret = acct_mul_up(x, sens);
	} else if ((rc = srv_json_real(body, "", "scale", POS, 0, HUGE_VAL, &x, err)) > 0) {
		*ret = x;
	}
	return rc < 0 ? rc : 0;
}

/* Gaussian sigma from epsilon+delta | noise_multiplier | sigma. */
static int gaussian_sigma(const json_t *body, double sens, double *ret, acct_error *err)
{
	static const char *const keys[] = {"epsilon", "noise_multiplier", "sigma", NULL};
	double x, delta = 0;
	int rc = only_one(body, keys, err), has_delta;

	if (rc < 0)
		return rc;
	has_delta = srv_json_real(body, "", "delta", SRV_NULLABLE | SRV_LO_OPEN | SRV_HI_OPEN, 0, 1,
				  &delta, err);
	if (has_delta < 0)
		return has_delta;
	if ((rc = srv_json_real(body, "", "epsilon", POS, 0, HUGE_VAL, &x, err)) != 0) {
		if (rc < 0)
			return rc;
		if (!has_delta)
			return acct_error_set(err, ACCT_EINVAL, "/delta",
					      "'delta' is required with 'epsilon'");
		return mech_gaussian_sigma_analytic(x, delta, sens, ret, err);
	}
	if (has_delta)
		return acct_error_set(err, ACCT_EINVAL, "/delta", "'delta' goes with 'epsilon' only");
	if ((rc = srv_json_real(body, "", "noise_multiplier", POS, 0, HUGE_VAL, &x, err)) != 0) {
		if (rc > 0)
			*ret = acct_mul_up(x, sens);
	} else if ((rc = srv_json_real(body, "", "sigma", POS, 0, HUGE_VAL, &x, err)) > 0) {
		*ret = x;
	}
	return rc < 0 ? rc : 0;
}

static json_t *real_output(const double *v, const struct vec *in)
{
	return in->scalar ? json_real(v[0]) : srv_json_real_array(v, in->n);
}

static json_t *int_output(const int64_t *v, const struct vec *in)
{
	return in->scalar ? json_integer(v[0]) : srv_json_int_array(v, in->n);
}

/*
 * Hands a release's output and event to the caller: *ret_output = output,
 * *ret_event = *ev, and *ev = NULL so that the caller's cleanup leaves it.
 * An output of NULL (out of memory) hands over nothing: ACCT_ENOMEM.
 */
static int hand_over(json_t *output, acct_event **ev, json_t **ret_output,
		     acct_event **ret_event, acct_error *err)
{
	if (!output)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	*ret_output = output;
	*ret_event = *ev;
	*ev = NULL;
	return 0;
}

static int check_keys(const json_t *body, const char *const *allowed, acct_error *err)
{
	if (!json_is_object(body))
		return acct_error_set(err, ACCT_EINVAL, "", "the body must be a JSON object");
	return srv_json_only_keys(body, "", allowed, err);
}

/*
 * A real release asked for at an epsilon must cost about that epsilon.
 * Its noise scale spans a fixed range of units of the noise grid (Laplace
 * 2^39..2^40, the Gaussian 2^19..2^20: the exact samplers' ranges), so a
 * sensitivity D far below the scale is a few units or under one and
 * rounds up (a vector's adds n - 1 units, or sqrt(n) for the Gaussian):
 * the event then prices a larger sensitivity than D, and a tiny epsilon
 * (a Gaussian's 1e-7 at delta 1e-9 cost 5.4e-6; a Laplace 1e-13 cost
 * 1.6e-12) would be charged many times over.  Refused (400) when the
 * grid's sensitivity exceeds D's image by more than 1%, before any noise
 * is drawn; with a scale, sigma or noise_multiplier the caller accepts the
 * event's price, whatever it is.
 */
static int grid_resolves(bool laplace, double sens, double scale, size_t n, acct_error *err)
{
	double units = ldexp(sens, laplace ? mech_laplace_grid_shift(scale) :
					     mech_gaussian_grid_shift(scale));
	double on_grid = laplace ? mech_laplace_grid_sensitivity(sens, scale, n) :
				   mech_gaussian_grid_sensitivity(sens, scale, n);

	if (on_grid <= units * MECH_GRID_MAX_OVERPRICE)
		return 0;
	return acct_error_set(err, ACCT_EINVAL, "/epsilon",
			      "the noise scale is %.3g times the sensitivity, too wide for the "
			      "noise grid to resolve it: the release would cost about %.3g times "
			      "the epsilon asked for; send '%s' or 'noise_multiplier' to accept "
			      "that price",
			      scale / sens, on_grid / units, laplace ? "scale" : "sigma");
}

static int additive(const char *name, const json_t *body, mech_rng *rng, json_t **ret_output,
		    acct_event **ret_event, acct_error *err)
{
	static const char *const keys[] = {"value", "values", "sensitivity", "epsilon", "delta",
					   "noise_multiplier", "scale", "sigma", NULL};
	bool discrete = !strncmp(name, "discrete_", 9);
	bool laplace = strstr(name, "laplace") != NULL;
	struct vec in;
	double sens = 0, param = 0;
	void *out = NULL;
	acct_event *ev = NULL;
	int rc = check_keys(body, keys, err);

	if (rc < 0)
		return rc;
	memset(&in, 0, sizeof(in));
	if (laplace && json_object_get(body, "sigma"))
		return acct_error_set(err, ACCT_EINVAL, "/sigma", "Laplace noise takes 'scale'");
	if (!laplace && json_object_get(body, "scale"))
		return acct_error_set(err, ACCT_EINVAL, "/scale", "Gaussian noise takes 'sigma'");
	if (laplace && json_object_get(body, "delta"))
		return acct_error_set(err, ACCT_EINVAL, "/delta", "Laplace noise is pure DP");
	rc = read_vector(body, "value", "values", discrete, &in, err);
	if (rc < 0)
		return rc;
	rc = srv_json_real(body, "", "sensitivity", SRV_REQUIRED | SRV_LO_OPEN, 0, HUGE_VAL, &sens,
			   err);
	if (rc < 0)
		goto out;
	if (discrete && laplace && (sens != floor(sens) || sens > 0x1p53)) {
		rc = acct_error_set(err, ACCT_EINVAL, "/sensitivity",
				    "'sensitivity' must be an integer for discrete Laplace");
		goto out;
	}
	rc = laplace ? laplace_scale(body, sens, &param, err) : gaussian_sigma(body, sens, &param, err);
	if (rc >= 0 && !discrete && json_object_get(body, "epsilon"))
		rc = grid_resolves(laplace, sens, param, in.n, err);
	if (rc < 0)
		goto out;
	out = malloc(in.n * (discrete ? sizeof(int64_t) : sizeof(double)));
	if (!out) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if (!discrete && laplace)
		rc = mech_laplace(rng, in.real, in.n, sens, param, out, &ev, err);
	else if (!discrete)
		rc = mech_gaussian(rng, in.real, in.n, sens, param, out, &ev, err);
	else if (laplace)
		rc = mech_discrete_laplace(rng, in.integer, in.n, (int64_t)sens, param, out, &ev, err);
	else
		rc = mech_discrete_gaussian(rng, in.integer, in.n, sens, param, out, &ev, err);
	if (rc < 0)
		goto out;
	rc = hand_over(discrete ? int_output(out, &in) : real_output(out, &in), &ev, ret_output,
		       ret_event, err);
out:
	if (rc < 0 && in.scalar && err && !strncmp(err->where, "/values/0", 9))
		snprintf(err->where, sizeof(err->where), "/value");
	acct_event_free(ev);
	free(out);
	vec_free(&in);
	return rc;
}

/* Reads report_noisy_max's 'noise' into *ret_kind, and refuses 'noise' on
 * the other selection mechanisms; leaves *ret_kind alone for them. */
static int selection_noise(const char *name, const json_t *body, mech_rnm_noise *ret_kind,
			   acct_error *err)
{
	const char *noise = NULL;
	int rc;

	if (!strcmp(name, "report_noisy_max")) {
		rc = srv_json_string(body, "", "noise", SRV_REQUIRED, 16, &noise, err);
		if (rc < 0)
			return rc;
		if (!strcmp(noise, "laplace"))
			*ret_kind = MECH_RNM_LAPLACE;
		else if (!strcmp(noise, "gumbel"))
			*ret_kind = MECH_RNM_GUMBEL;
		else if (!strcmp(noise, "gaussian"))
			*ret_kind = MECH_RNM_GAUSSIAN;
		else
			return acct_error_set(err, ACCT_EINVAL, "/noise",
					      "'noise' must be laplace, gumbel or gaussian");
	} else if (json_object_get(body, "noise")) {
		return acct_error_set(err, ACCT_EINVAL, "/noise", "'noise' is for report_noisy_max");
	}
	return 0;
}

/* Reads the selection's privacy parameter into *ret_param: sigma for
 * Gaussian noisy max over n scores of the given sensitivity, else epsilon;
 * refuses the parameters of the other family. */
static int selection_param(const json_t *body, mech_rnm_noise kind, bool monotone, size_t n,
			   double sens, double *ret_param, acct_error *err)
{
	if (kind == MECH_RNM_GAUSSIAN) {
		double l2 = n == 1 ? sens : sens * sqrt((double)n);

		if (json_object_get(body, "epsilon"))
			return acct_error_set(err, ACCT_EINVAL, "/epsilon",
					      "Gaussian noisy max takes 'sigma' or 'noise_multiplier'");
		if (monotone)
			return acct_error_set(err, ACCT_EINVAL, "/monotone",
					      "Gaussian noisy max has no monotone variant");
		return gaussian_sigma(body, l2, ret_param, err);
	}
	if (json_object_get(body, "sigma") || json_object_get(body, "noise_multiplier"))
		return acct_error_set(err, ACCT_EINVAL,
				      json_object_get(body, "sigma") ? "/sigma" : "/noise_multiplier",
				      "this mechanism takes 'epsilon'");
	return srv_json_real(body, "", "epsilon", SRV_REQUIRED | SRV_LO_OPEN, 0, HUGE_VAL,
			     ret_param, err);
}

static int selection(const char *name, const json_t *body, mech_rng *rng, json_t **ret_output,
		     acct_event **ret_event, acct_error *err)
{
	static const char *const keys[] = {"scores", "sensitivity", "epsilon", "monotone",
					   "noise", "sigma", "noise_multiplier", NULL};
	struct vec in;
	double sens = 0, param = 0;
	bool monotone = false;
	mech_rnm_noise kind = MECH_RNM_GUMBEL;
	acct_event *ev = NULL;
	size_t idx = 0;
	int rc = check_keys(body, keys, err);

	if (rc < 0)
		return rc;
	memset(&in, 0, sizeof(in));
	rc = read_vector(body, NULL, "scores", false, &in, err);
	if (rc < 0)
		return rc;
	if ((rc = srv_json_real(body, "", "sensitivity", SRV_REQUIRED | SRV_LO_OPEN, 0, HUGE_VAL,
				&sens, err)) < 0 ||
	    (rc = srv_json_bool(body, "", "monotone", SRV_NULLABLE, &monotone, err)) < 0)
		goto out;
	rc = selection_noise(name, body, &kind, err);
	if (rc < 0)
		goto out;
	if (!strcmp(name, "permute_and_flip") && monotone) {
		rc = acct_error_set(err, ACCT_EINVAL, "/monotone",
				    "permute_and_flip has no monotone variant here");
		goto out;
	}
	rc = selection_param(body, kind, monotone, in.n, sens, &param, err);
	if (rc < 0)
		goto out;
	if (!strcmp(name, "exponential"))
		rc = mech_exponential(rng, in.real, in.n, sens, param, monotone, &idx, &ev, err);
	else if (!strcmp(name, "permute_and_flip"))
		rc = mech_permute_and_flip(rng, in.real, in.n, sens, param, &idx, &ev, err);
	else
		rc = mech_report_noisy_max(rng, in.real, in.n, sens, kind, param, monotone, &idx, &ev,
					   err);
	if (rc < 0)
		goto out;
	rc = hand_over(json_integer((json_int_t)idx), &ev, ret_output, ret_event, err);
out:
	acct_event_free(ev);
	vec_free(&in);
	return rc;
}

static int randomized_response(const json_t *body, mech_rng *rng, json_t **ret_output,
			       acct_event **ret_event, acct_error *err)
{
	static const char *const keys[] = {"value", "num_buckets", "epsilon", NULL};
	int64_t k = 0, v = 0, out = 0;
	double eps = 0;
	acct_event *ev = NULL;
	int rc = check_keys(body, keys, err);

	if (rc < 0 ||
	    (rc = srv_json_int(body, "", "num_buckets", SRV_REQUIRED, 2, DPG_MAX_NUM_BUCKETS, &k, err)) < 0 ||
	    (rc = srv_json_int(body, "", "value", SRV_REQUIRED, 0, k - 1, &v, err)) < 0 ||
	    (rc = srv_json_real(body, "", "epsilon", SRV_REQUIRED | SRV_LO_OPEN, 0, HUGE_VAL, &eps,
				err)) < 0)
		return rc;
	rc = mech_randomized_response(rng, v, k, eps, &out, &ev, err);
	if (rc < 0)
		return rc;
	rc = hand_over(json_integer(out), &ev, ret_output, ret_event, err);
	acct_event_free(ev);
	return rc;
}

/* Label i of a 0/1 label array, as a JSON integer (srv_json_array_of). */
static json_t *label_at(const void *labels, size_t i)
{
	return json_integer(((const uint8_t *)labels)[i]);
}

static int label_em(const json_t *body, mech_rng *rng, json_t **ret_output,
		    acct_event **ret_event, acct_error *err)
{
	static const char *const keys[] = {"labels", "epsilon", "sensitivity", NULL};
	json_t *arr = json_object_get(body, "labels"), *json = NULL;
	uint8_t *in = NULL, *out = NULL;
	double eps = 0, sens = 1;
	acct_event *ev = NULL;
	size_t n;
	int rc = check_keys(body, keys, err);

	if (rc < 0)
		return rc;
	if (!json_is_array(arr) || json_array_size(arr) < 1 ||
	    json_array_size(arr) > (size_t)DPG_MAX_LABEL_EM_N)
		return acct_error_set(err, ACCT_EINVAL, "/labels",
				      "'labels' must be a non-empty array of 0/1");
	if ((rc = srv_json_real(body, "", "epsilon", SRV_REQUIRED | SRV_LO_OPEN, 0, HUGE_VAL, &eps,
				err)) < 0 ||
	    (rc = srv_json_real(body, "", "sensitivity", POS, 0, HUGE_VAL, &sens, err)) < 0)
		return rc;
	n = json_array_size(arr);
	in = malloc(n);
	out = malloc(n);
	if (!in || !out) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(arr, i);

		if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1)) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/labels/%zu", i);
			rc = acct_error_set(err, ACCT_EINVAL, where, "labels must be 0 or 1");
			goto out;
		}
		in[i] = (uint8_t)json_integer_value(v);
	}
	rc = mech_label_em(rng, in, n, eps, sens, out, &ev, err);
	if (rc < 0)
		goto out;
	json = srv_json_array_of(n, label_at, out);
	rc = hand_over(json, &ev, ret_output, ret_event, err);
out:
	acct_event_free(ev);
	free(in);
	free(out);
	return rc;
}

/*
 * The mechanisms check the noise scale they are given (at /scale or
 * /sigma), but a body may name it through 'epsilon' or 'noise_multiplier'
 * instead; a refusal of the derived scale then points at the field the
 * caller sent.  Passes rc through.
 */
static int blame_sent_noise_field(const json_t *body, int rc, acct_error *err)
{
	static const char *const derived_from[] = {"epsilon", "noise_multiplier", NULL};
	char text[sizeof(err->text)];
	const char *scale;

	if (rc >= 0 || !err || (strcmp(err->where, "/scale") && strcmp(err->where, "/sigma")))
		return rc;
	scale = err->where + 1;
	if (json_object_get(body, scale))
		return rc;
	for (size_t i = 0; derived_from[i]; i++) {
		if (!json_object_get(body, derived_from[i]))
			continue;
		/* Rewritten in place: acct_error_set keeps the first error. */
		snprintf(text, sizeof(text), "the %s derived from it %.200s", scale, err->text);
		snprintf(err->where, sizeof(err->where), "/%s", derived_from[i]);
		snprintf(err->text, sizeof(err->text), "%s", text);
		return rc;
	}
	return rc;
}

int srv_mech_release(const char *name, const json_t *body, mech_rng *rng, json_t **ret_output,
		     acct_event **ret_event, acct_error *err)
{
	if (!name)
		return acct_error_set(err, ACCT_EINVAL, "/name", "no mechanism named");
	if (!strcmp(name, "laplace") || !strcmp(name, "gaussian") ||
	    !strcmp(name, "discrete_laplace") || !strcmp(name, "discrete_gaussian"))
		return blame_sent_noise_field(body, additive(name, body, rng, ret_output, ret_event,
							     err), err);
	if (!strcmp(name, "exponential") || !strcmp(name, "permute_and_flip") ||
	    !strcmp(name, "report_noisy_max"))
		return blame_sent_noise_field(body, selection(name, body, rng, ret_output,
							      ret_event, err), err);
	if (!strcmp(name, "randomized_response"))
		return randomized_response(body, rng, ret_output, ret_event, err);
	if (!strcmp(name, "label_em"))
		return label_em(body, rng, ret_output, ret_event, err);
	return acct_error_set(err, ACCT_EINVAL, "/name", "unknown mechanism '%.64s'", name);
}

/* A table query's parameters as read from the body; cats and counts are
 * owned by the caller and hold ncat entries for a histogram, else NULL. */
struct table_query {
	const char *query, *column;
	double eps, lo, hi, q;
	const char **cats;
	int64_t *counts;
	size_t ncat;
};

/* Reads and checks the query's scalar fields into *tq. */
static int table_query_parse(const json_t *body, struct table_query *tq, acct_error *err)
{
	static const char *const keys[] = {"query", "column", "lo", "hi", "q", "categories",
					   "epsilon", NULL};
	const char *query = NULL;
	int rc = check_keys(body, keys, err);
	bool needs_bounds, needs_column;

	if (rc < 0)
		return rc;
	if ((rc = srv_json_string(body, "", "query", SRV_REQUIRED, 32, &query, err)) < 0)
		return rc;
	if (strcmp(query, "count") && strcmp(query, "sum") && strcmp(query, "mean") &&
	    strcmp(query, "histogram") && strcmp(query, "quantile"))
		return acct_error_set(err, ACCT_EINVAL, "/query",
				      "'query' must be count, sum, mean, histogram or quantile");
	tq->query = query;
	needs_column = strcmp(query, "count") != 0;
	needs_bounds = !strcmp(query, "sum") || !strcmp(query, "mean") || !strcmp(query, "quantile");
	if ((rc = srv_json_string(body, "", "column", needs_column ? SRV_REQUIRED : 0,
				  DPG_MAX_CSV_FIELD_BYTES, &tq->column, err)) < 0 ||
	    (rc = srv_json_real(body, "", "lo", needs_bounds ? SRV_REQUIRED : 0, -HUGE_VAL, HUGE_VAL,
				&tq->lo, err)) < 0 ||
	    (rc = srv_json_real(body, "", "hi", needs_bounds ? SRV_REQUIRED : 0, -HUGE_VAL, HUGE_VAL,
				&tq->hi, err)) < 0 ||
	    (rc = srv_json_real(body, "", "q", !strcmp(query, "quantile") ? SRV_REQUIRED : 0, 0, 1,
				&tq->q, err)) < 0 ||
	    (rc = srv_json_real(body, "", "epsilon", SRV_REQUIRED | SRV_LO_OPEN, 0, HUGE_VAL,
				&tq->eps, err)) < 0)
		return rc;
	return 0;
}

/* Reads a histogram's public categories into tq->cats and allocates
 * tq->counts beside them; on failure the caller still frees both. */
static int table_query_categories(const json_t *body, struct table_query *tq, acct_error *err)
{
	json_t *arr = json_object_get(body, "categories"), *v;
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) < 1 ||
	    json_array_size(arr) > DPG_MAX_HISTOGRAM_BINS)
		return acct_error_set(err, ACCT_EINVAL, "/categories",
				      "'categories' must be 1 to %d strings (the public bins)",
				      DPG_MAX_HISTOGRAM_BINS);
	tq->ncat = json_array_size(arr);
	tq->cats = calloc(tq->ncat, sizeof(*tq->cats));
	tq->counts = calloc(tq->ncat, sizeof(*tq->counts));
	if (!tq->cats || !tq->counts)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	json_array_foreach(arr, i, v) {
		if (!json_is_string(v)) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/categories/%zu", i);
			return acct_error_set(err, ACCT_EINVAL, where, "must be a string");
		}
		tq->cats[i] = json_string_value(v);
	}
	return 0;
}

/* Runs the query on t; on success *ret_out is its JSON output (NULL when
 * out of memory), *ret_mechanism names the mechanism and *ret_event is
 * the charge. */
static int table_query_run(const mech_table *t, acct_neighbor neighbor,
			   const struct table_query *tq, mech_rng *rng, const char **ret_mechanism,
			   json_t **ret_out, acct_event **ret_event, acct_error *err)
{
	const char *query = tq->query;
	int64_t count = 0;
	double d = 0;
	json_t *out = NULL;
	int rc;

	if (!strcmp(query, "count")) {
		*ret_mechanism = "discrete_laplace";
		rc = mech_table_count(rng, t, tq->eps, &count, ret_event, err);
		if (rc == 0)
			out = json_integer(count);
	} else if (!strcmp(query, "sum")) {
		rc = mech_table_sum(rng, t, tq->column, tq->lo, tq->hi, tq->eps, neighbor, &d,
				    ret_event, err);
		if (rc == 0)
			out = json_real(d);
	} else if (!strcmp(query, "mean")) {
		/* Under replace n is public and divides the noisy sum as it is. */
		*ret_mechanism = neighbor == ACCT_REPLACE ? "laplace_sum_over_exact_count" :
							    "laplace_sum_over_discrete_laplace_count";
		rc = mech_table_mean(rng, t, tq->column, tq->lo, tq->hi, tq->eps, neighbor, &d,
				     ret_event, err);
		if (rc == 0)
			out = json_real(d);
	} else if (!strcmp(query, "histogram")) {
		*ret_mechanism = "discrete_laplace";
		rc = mech_table_histogram(rng, t, tq->column, tq->cats, tq->ncat, tq->eps, neighbor,
					  tq->counts, ret_event, err);
		if (rc == 0) {
			out = json_object();
			for (size_t i = 0; out && i < tq->ncat; i++)
				if (json_object_set_new(out, tq->cats[i],
							json_integer(tq->counts[i])) < 0) {
					json_decref(out);
					out = NULL;
				}
		}
	} else {
		*ret_mechanism = "exponential";
		rc = mech_table_quantile(rng, t, tq->column, tq->q, tq->lo, tq->hi, tq->eps, &d,
					 ret_event, err);
		if (rc == 0)
			out = json_real(d);
	}
	*ret_out = out;
	return rc;
}

int srv_mech_table_query(const mech_table *t, acct_neighbor neighbor, const json_t *body,
			 mech_rng *rng, json_t **ret_output, acct_event **ret_event,
			 acct_error *err)
{
	struct table_query tq = { .q = 0.5 };
	const char *mechanism = "laplace";
	acct_event *ev = NULL;
	json_t *out = NULL, *ans = NULL;
	int rc = table_query_parse(body, &tq, err);

	if (rc < 0)
		return rc;
	if (!strcmp(tq.query, "histogram")) {
		rc = table_query_categories(body, &tq, err);
		if (rc < 0)
			goto out;
	}
	rc = table_query_run(t, neighbor, &tq, rng, &mechanism, &out, &ev, err);
	if (rc < 0)
		goto out;
	ans = json_pack("{s:s,s:s,s:o}", "query", tq.query, "mechanism", mechanism, "output", out);
	out = NULL;
	rc = hand_over(ans, &ev, ret_output, ret_event, err);
out:
	json_decref(out);
	acct_event_free(ev);
	free(tq.cats);
	free(tq.counts);
	return rc;
}
