/*
 * test_exact.c: a lone Gaussian or discrete Gaussian is priced by its exact
 * privacy curve.  The expected deltas are computed here, independently of
 * accountant/: for the discrete Gaussian the hockey-stick divergence
 * sum_y max(0, P(y) - e^eps P(y - D)) summed term by term over the
 * integers (the privacy-loss tail itself, not Theorem 7's closed form);
 * for the Gaussian Balle and Wang's Phi formula (2018, Theorem 8).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "acct.h"
#include "api.h"
#include "test_gauss.h"

/* sum_y max(0, P(y) - e^eps P(y - D)), P = N_Z(0, s^2), over |y| <= K. */
static double dg_delta_direct(double s, double d, double eps)
{
	long k = (long)(d + 45.0 * s + 10.0);
	double z = 0.0, tot = 0.0, e = exp(eps);

	for (long y = -k; y <= k; y++)
		z += exp(-(double)y * (double)y / (2.0 * s * s));
	for (long y = -k; y <= k; y++) {
		double p = exp(-(double)y * (double)y / (2.0 * s * s));
		double q = exp(-((double)y - d) * ((double)y - d) / (2.0 * s * s));

		if (p - e * q > 0.0)
			tot += p - e * q;
	}
	return tot / z;
}


static acct_event *dgauss(double s, double d)
{
	acct_event *e = acct_event_new(ACCT_EV_DISCRETE_GAUSSIAN);

	cr_assert_not_null(e);
	e->u.discrete_gaussian.sigma = s;
	e->u.discrete_gaussian.sensitivity = d;
	return e;
}

/* Sensitivity 1 and larger, sigma on both sides of the switch from a
 * term-by-term sum to Euler-Maclaurin (1024): an upper bound, tight. */
Test(exact, discrete_gaussian_delta_is_the_loss_tail)
{
	struct { double s, d; } c[] = {
		{0.8, 1}, {3, 1}, {3, 4}, {10, 7}, {50, 30}, {200, 1}, {1500, 1}, {3000, 4000},
	};
	double eps[] = {0.0, 0.05, 0.5, 1.0, 2.5};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		for (size_t j = 0; j < sizeof(eps) / sizeof(eps[0]); j++) {
			double want = dg_delta_direct(c[i].s, c[i].d, eps[j]);
			double got = acct_discrete_gaussian_delta(c[i].s, c[i].d, eps[j]);

			if (want < 1e-250)
				continue;
			cr_expect(got >= want * (1.0 - 1e-12) && got <= want * (1.0 + 1e-9),
				  "sigma %g D %g eps %g: %.15g, direct sum %.15g", c[i].s, c[i].d,
				  eps[j], got, want);
		}
}

/* epsilon at delta: the direct sum holds at the answer and fails just below
 * it, through the epsilon routes of pld and basic alike. */
Test(exact, discrete_gaussian_epsilon_is_tight)
{
	struct { double s, d, delta; } c[] = {
		{3, 1, 1e-6}, {3, 1, 1e-5}, {3, 4, 1e-5}, {10, 7, 1e-8}, {0.8, 1, 1e-3},
	};
	acct_accountant accs[] = {ACCT_PLD, ACCT_BASIC};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		for (size_t k = 0; k < 2; k++) {
			acct_event *ev = dgauss(c[i].s, c[i].d);
			acct_options o;
			acct_result r;
			acct_error err;

			memset(&o, 0, sizeof(o));
			o.accountant = accs[k];
			acct_error_init(&err);
			cr_assert_eq(acct_epsilon(ev, c[i].delta, &o, &r, &err), 0, "%s", err.text);
			cr_expect_leq(dg_delta_direct(c[i].s, c[i].d, r.epsilon), c[i].delta);
			cr_expect_gt(dg_delta_direct(c[i].s, c[i].d, r.epsilon * (1.0 - 1e-8)),
				     c[i].delta, "sigma %g D %g: %.15g is not the smallest", c[i].s,
				     c[i].d, r.epsilon);
			cr_assert_eq(acct_delta(ev, r.epsilon, &o, &r, &err), 0, "%s", err.text);
			cr_expect(r.delta <= c[i].delta * (1 + 1e-9) && r.delta >= c[i].delta * 0.999);
			acct_event_free(ev);
		}
	/* A composition of one is the event itself; of two, pld still has no
	 * discrete Gaussian and says so. */
	{
		acct_event *one = acct_event_self_composed(1, dgauss(3, 1));
		acct_event *two = acct_event_self_composed(2, dgauss(3, 1));
		acct_options o;
		acct_result r;
		acct_error err;

		memset(&o, 0, sizeof(o));
		o.accountant = ACCT_PLD;
		acct_error_init(&err);
		cr_assert_eq(acct_epsilon(one, 1e-6, &o, &r, &err), 0, "%s", err.text);
		cr_expect_leq(dg_delta_direct(3, 1, r.epsilon), 1e-6);
		cr_expect_lt(r.epsilon, 1.46);
		cr_expect_eq(acct_epsilon(two, 1e-6, &o, &r, &err), ACCT_EUNSUPPORTED);
		cr_expect_str_eq(err.where, "/event/event");
		acct_event_free(one);
		acct_event_free(two);
	}
	/* The audit's figure: sigma 3 at delta 1e-6 is 1.455, not 1.558. */
	{
		acct_event *ev = dgauss(3, 1);
		acct_filter f;
		acct_cost cost;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 10, 1e-3, &err), 0);
		cr_assert_eq(acct_filter_price(&f, ev, 1e-6, &cost, &err), 0, "%s", err.text);
		cr_expect_leq(dg_delta_direct(3, 1, cost.v[0]), 1e-6);
		cr_expect(fabs(cost.v[0] - 1.455) < 5e-4, "%.10g", cost.v[0]);
		cr_expect_eq(cost.v[1], 1e-6);
		acct_event_free(ev);
	}
}

/*
 * A basic ledger charges the Gaussian at the analytic sigma for (1, 1e-5)
 * exactly 1 (to rounding), as a `gaussian` event and as the discrete
 * Gaussian on the 2^-18 grid that the gaussian mechanism releases (sigma
 * rounded up to a quarter grid unit, sensitivity 2^18).
 */
Test(exact, basic_ledger_charges_the_analytic_gaussian_its_epsilon)
{
	double s = test_gauss_analytic_sigma(1.0, 1e-5);
	acct_event *g = acct_event_new(ACCT_EV_GAUSSIAN);
	acct_event *dg = dgauss(ceil(ldexp(s, 18) * 4.0) / 4.0, 0x1p18);
	acct_filter f;
	acct_cost cost;
	acct_error err;

	cr_assert_not_null(g);
	g->u.gaussian.noise_multiplier = s;
	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 10, 1e-3, &err), 0);
	cr_assert_eq(acct_filter_price(&f, g, 1e-5, &cost, &err), 0, "%s", err.text);
	cr_expect(cost.v[0] >= 1.0 - 1e-12 && cost.v[0] <= 1.0 + 1e-9, "gaussian: %.15g", cost.v[0]);
	cr_expect_leq(test_gauss_delta(s, cost.v[0]), 1e-5);
	cr_assert_eq(acct_filter_price(&f, dg, 1e-5, &cost, &err), 0, "%s", err.text);
	cr_expect(fabs(cost.v[0] - 1.0) < 1e-6, "discrete on the grid: %.15g", cost.v[0]);
	/* Its delta against the continuous curve at the same ratio, whose gap
	 * to the discrete one is far below this tolerance at sigma ~ 1e6. */
	cr_expect(fabs(acct_discrete_gaussian_delta(dg->u.discrete_gaussian.sigma, 0x1p18, 1.0) -
		       test_gauss_delta(dg->u.discrete_gaussian.sigma / 0x1p18, 1.0)) < 1e-12);
	acct_event_free(g);
	acct_event_free(dg);
}

/* The Gaussian's delta is Theorem 8's, rounded up. */
Test(exact, gaussian_delta_is_the_phi_formula)
{
	double sig[] = {0.3, 1.0, 3.7, 20.0};
	double eps[] = {0.0, 0.1, 1.0, 4.0};

	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			double want = test_gauss_delta(sig[i], eps[j]);
			double got = acct_gaussian_delta(sig[i], eps[j]);

			if (want < 1e-200)
				continue;
			cr_expect(got >= want && got <= want * (1 + 1e-9) + 1e-300,
				  "s %g eps %g: %.15g vs %.15g", sig[i], eps[j], got, want);
		}
}

/* The stateless routes answer the same through their JSON: epsilon and
 * delta of a discrete Gaussian under pld and basic (both refused before). */
Test(exact, epsilon_and_delta_routes)
{
	static const char *const accs[] = {"pld", "basic"};

	for (int i = 0; i < 2; i++) {
		char body[256];
		json_error_t je;
		json_t *b, *ans = NULL;
		acct_error err;
		double eps;

		snprintf(body, sizeof(body),
			 "{\"event\":{\"type\":\"discrete_gaussian\",\"sigma\":3,\"sensitivity\":4},"
			 "\"delta\":1e-5,\"accountant\":\"%s\"}", accs[i]);
		b = json_loads(body, 0, &je);
		cr_assert_not_null(b, "%s", je.text);
		acct_error_init(&err);
		cr_assert_eq(srv_acct_epsilon(b, &ans, &err), 0, "%s: %s", accs[i], err.text);
		eps = json_number_value(json_object_get(ans, "epsilon"));
		cr_expect_leq(dg_delta_direct(3, 4, eps), 1e-5);
		cr_expect_gt(dg_delta_direct(3, 4, eps * (1 - 1e-8)), 1e-5);
		json_decref(ans);
		json_decref(b);

		snprintf(body, sizeof(body),
			 "{\"event\":{\"type\":\"discrete_gaussian\",\"sigma\":3,\"sensitivity\":4},"
			 "\"epsilon\":1.5,\"accountant\":\"%s\"}", accs[i]);
		b = json_loads(body, 0, &je);
		ans = NULL;
		acct_error_init(&err);
		cr_assert_eq(srv_acct_delta(b, &ans, &err), 0, "%s: %s", accs[i], err.text);
		cr_expect(fabs(json_number_value(json_object_get(ans, "delta")) -
			       dg_delta_direct(3, 4, 1.5)) <= 1e-9 * dg_delta_direct(3, 4, 1.5));
		json_decref(ans);
		json_decref(b);
	}
}
