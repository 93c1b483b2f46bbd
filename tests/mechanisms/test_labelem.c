/*
 * test_labelem.c: label-EM guidance against the reference vectors
 * (tests/data/reference/label_em.json, computed with SciPy's binomial), and
 * the sampler against the closed-form Binomial(n, p) score distribution.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "mech.h"
#include "test_data.h"
#include "test_util.h"

static int close_to(double a, double b, double rel, double abs_tol)
{
	return isfinite(a) && fabs(a - b) <= fmax(abs_tol, rel * fabs(b));
}

Test(labelem, guidance_matches_reference)
{
	json_t *ref = test_load_reference("label_em"), *c;
	size_t i;

	cr_assert_gt(json_array_size(ref), 0);
	json_array_foreach(ref, i, c) {
		int64_t n = json_integer_value(json_object_get(c, "n"));
		double eps = json_number_value(json_object_get(c, "epsilon"));
		double sens = json_number_value(json_object_get(c, "sensitivity"));
		double want_keep = json_number_value(json_object_get(c, "keep_probability"));
		double want_succ = json_number_value(json_object_get(c, "success_probability"));
		double got;
		const char *key;
		json_t *v;
		acct_error err;

		acct_error_init(&err);
		cr_assert(close_to(mech_label_em_keep_probability(eps, sens), want_keep, 1e-12, 0));
		cr_assert_eq(mech_label_em_success_probability(n, eps, sens, &got, &err), 0);
		cr_assert(close_to(got, want_succ, 1e-9, 1e-12), "case %zu: success %.17g want %.17g",
			  i, got, want_succ);
		json_object_foreach(json_object_get(c, "log_pmf"), key, v) {
			cr_assert_eq(mech_label_em_log_pmf(n, eps, sens, atoll(key), &got, &err), 0);
			cr_assert(close_to(got, json_number_value(v), 1e-9, 1e-6),
				  "case %zu k %s: %.17g want %.17g", i, key, got, json_number_value(v));
		}
	}
	json_decref(ref);
}

Test(labelem, inverse_recovers_reference_epsilon)
{
	json_t *ref = test_load_reference("label_em"), *c;
	size_t i;

	json_array_foreach(ref, i, c) {
		int64_t n = json_integer_value(json_object_get(c, "n"));
		double eps = json_number_value(json_object_get(c, "epsilon"));
		double succ = json_number_value(json_object_get(c, "success_probability"));
		double got, s_at, s_below;
		acct_error err;

		if (succ >= 1.0 - 1e-6)
			continue; /* flat there: epsilon is not identifiable */
		acct_error_init(&err);
		cr_assert_eq(mech_label_em_epsilon_for_success(n, 1.0, succ, &got, &err), 0);
		cr_assert(close_to(got, eps, 1e-6, 0), "case %zu: %.17g want %g", i, got, eps);
		/* Smallest: reached at got, not reached slightly below. */
		cr_assert_eq(mech_label_em_success_probability(n, got, 1.0, &s_at, &err), 0);
		cr_assert_geq(s_at, succ);
		cr_assert_eq(mech_label_em_success_probability(n, got * (1 - 1e-9), 1.0, &s_below, &err), 0);
		cr_assert_lt(s_below, succ);
	}
	json_decref(ref);
}

Test(labelem, guidance_rejects_bad_input)
{
	acct_error err;
	double v;

	acct_error_init(&err);
	cr_assert_eq(mech_label_em_success_probability(0, 1, 1, &v, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/n");
	acct_error_init(&err);
	cr_assert_eq(mech_label_em_success_probability(10, -1, 1, &v, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/epsilon");
	acct_error_init(&err);
	cr_assert_eq(mech_label_em_success_probability(10, NAN, 1, &v, &err), ACCT_EINVAL);
	acct_error_init(&err);
	cr_assert_eq(mech_label_em_log_pmf(10, 1, 0, 3, &v, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/sensitivity");
	acct_error_init(&err);
	cr_assert_eq(mech_label_em_log_pmf(10, 1, 1, 11, &v, &err), ACCT_EINVAL);
	acct_error_init(&err);
	cr_assert_eq(mech_label_em_epsilon_for_success(10, 1, 1.0, &v, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/target_success_probability");
	/* A target below Pr[Bin(10, 1/2) >= 5] = 638/1024 needs no epsilon. */
	acct_error_init(&err);
	cr_assert_eq(mech_label_em_epsilon_for_success(10, 1, 0.6, &v, &err), 0);
	cr_assert_eq(v, 0.0);
}

Test(labelem, score_is_binomial_and_positions_uniform)
{
	enum { N = 12, T = 40000 };
	const double eps = 1.0;
	double p = exp(eps / 2) / (1 + exp(eps / 2)), prob[N + 1], pos_prob[2];
	uint64_t score_obs[N + 1] = {0}, pos_obs[N][2];
	uint8_t labels[N], out[N];
	mech_rng *r = test_rng(20);

	memset(pos_obs, 0, sizeof(pos_obs));
	for (int i = 0; i < N; i++)
		labels[i] = (uint8_t)(i % 3 == 0);
	/* Closed form: Pr[q = k] = C(n, k) p^k (1 - p)^(n - k). */
	for (int k = 0; k <= N; k++)
		prob[k] = exp(lgamma(N + 1) - lgamma(k + 1) - lgamma(N - k + 1)) * pow(p, k) *
			  pow(1 - p, N - k);
	pos_prob[0] = 1 - p;
	pos_prob[1] = p;
	for (int t = 0; t < T; t++) {
		acct_event *ev = NULL;
		acct_error err;
		int q = 0;

		acct_error_init(&err);
		cr_assert_eq(mech_label_em(r, labels, N, eps, 1.0, out, &ev, &err), 0);
		/* Binary randomized response keeping with probability p. */
		cr_assert_eq(ev->type, ACCT_EV_RANDOMIZED_RESPONSE);
		cr_assert_eq(ev->u.randomized_response.num_buckets, 2);
		cr_assert(fabs(ev->u.randomized_response.noise_parameter - 2 * (1 - p)) < 1e-15);
		acct_event_free(ev);
		for (int i = 0; i < N; i++) {
			q += out[i] == labels[i];
			pos_obs[i][out[i] == labels[i]]++;
		}
		score_obs[q]++;
	}
	cr_assert_gt(test_chi2_p(score_obs, prob, N + 1, T), TEST_P_MIN);
	/* By symmetry every position agrees with probability p. */
	for (int i = 0; i < N; i++)
		cr_assert_gt(test_chi2_p(pos_obs[i], pos_prob, 2, T), TEST_P_MIN, "position %d", i);
	mech_rng_free(r);
}

/*
 * What one release costs: the exponential mechanism with utility
 * sensitivity D = 1 keeps each label with p = e^(eps/2) / (1 + e^(eps/2)),
 * so changing one label changes the probability of every output by
 * e^(+-eps/2): the event must be worth log(p / (1 - p)) = eps / (2D) =
 * eps / 2 per label (not eps / D), and a basic ledger charges that.  A D
 * other than 1 is refused rather than charged as one label: a unit of D > 1
 * labels would cost D times that.  A keep probability that rounds to 1
 * would release the labels: refused.
 */
Test(labelem, charged_eps_over_2d_and_only_d_one)
{
	uint8_t labels[4] = {0, 1, 1, 0}, out[4];
	double bad_d[] = {0.25, 0.5, 2.0, 3.0, 1.0 + 0x1p-52, 1.0 - 0x1p-53};
	acct_event *ev = NULL;
	acct_error err;
	mech_rng *r = test_rng(22);
	double noise, odds;

	acct_error_init(&err);
	cr_assert_eq(mech_label_em(r, labels, 4, 1.0, 1.0, out, &ev, &err), 0, "%s", err.text);
	cr_assert_eq(ev->type, ACCT_EV_RANDOMIZED_RESPONSE);
	cr_assert_eq(ev->u.randomized_response.num_buckets, 2);
	noise = ev->u.randomized_response.noise_parameter;
	odds = log((1 - noise / 2) / (noise / 2));
	cr_assert(fabs(odds - 0.5) < 1e-12, "loss per label %.17g, want 0.5", odds);
	/* The pure epsilon a basic ledger charges (rounded up, never below). */
	cr_assert(acct_pure_epsilon_up(ev) >= 0.5 - 1e-15 && acct_pure_epsilon_up(ev) < 0.5 + 1e-12,
		  "%.17g", acct_pure_epsilon_up(ev));
	acct_event_free(ev);
	for (size_t i = 0; i < sizeof(bad_d) / sizeof(bad_d[0]); i++) {
		ev = NULL;
		acct_error_init(&err);
		cr_assert_eq(mech_label_em(r, labels, 4, 1.0, bad_d[i], out, &ev, &err), ACCT_EINVAL,
			     "D = %.17g", bad_d[i]);
		cr_assert_str_eq(err.where, "/sensitivity");
		cr_assert_null(ev);
		acct_error_init(&err);
		cr_assert_eq(mech_label_em_epsilon_for_success(10, bad_d[i], 0.9, &odds, &err),
			     ACCT_EINVAL);
		cr_assert_str_eq(err.where, "/sensitivity");
	}
	ev = NULL;
	acct_error_init(&err);
	cr_assert_eq(mech_label_em(r, labels, 4, 80.0, 1.0, out, &ev, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/epsilon");
	cr_assert_null(ev);
	mech_rng_free(r);
}

Test(labelem, rejects_non_binary_labels)
{
	uint8_t labels[3] = {0, 2, 1}, out[3];
	acct_event *ev = NULL;
	acct_error err;
	mech_rng *r = test_rng(21);

	acct_error_init(&err);
	cr_assert_eq(mech_label_em(r, labels, 3, 1.0, 1.0, out, &ev, &err), ACCT_EINVAL);
	cr_assert_null(ev);
	mech_rng_free(r);
}
