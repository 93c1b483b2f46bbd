/*
 * test_accountants.c: closed forms derived here, edge cases, filters,
 * route handlers and `dpgate check`.  Every expected value is derived in
 * the test (a formula or an independent quadrature written here), or taken
 * from a paper; none was printed by the code under test.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <jansson.h>

#include "acct.h"
#include "acct_internal.h"
#include "json.h"
#include "api.h"
#include "test_admit.h"
#include "test_events.h"
#include "test_gauss.h"
#include "test_math.h"

/* obj[a][b], or NULL. */
static json_t *pget(const json_t *obj, const char *a, const char *b)
{
	return json_object_get(json_object_get(obj, a), b);
}

static acct_event *gauss(double s)
{
	acct_event *e = acct_event_new(ACCT_EV_GAUSSIAN);

	e->u.gaussian.noise_multiplier = s;
	return e;
}

static acct_options opts(acct_accountant a, acct_neighbor nb)
{
	acct_options o;

	memset(&o, 0, sizeof(o));
	o.accountant = a;
	o.neighbor = nb;
	return o;
}

/* Rényi divergence of two densities by a plain midpoint rule on [lo, hi]. */
static double renyi_quad(double (*p)(double, double), double (*q)(double, double), double par,
			 double alpha, double lo, double hi, long steps)
{
	double s = 0.0, dx = (hi - lo) / (double)steps;

	for (long i = 0; i < steps; i++) {
		double x = lo + (i + 0.5) * dx;

		s += exp(alpha * log(p(x, par)) + (1.0 - alpha) * log(q(x, par))) * dx;
	}
	return log(s) / (alpha - 1.0);
}

static double lap0(double x, double b) { return exp(-fabs(x) / b) / (2.0 * b); }
static double lap1(double x, double b) { return exp(-fabs(x - 1.0) / b) / (2.0 * b); }

/* Gaussian: D_a(N(0,s^2) || N(1,s^2)) = a / (2 s^2) (Mironov 2017, Prop. 7). */
Test(rdp, gaussian_closed_form)
{
	double orders[] = {1.5, 2, 10, 1024}, r[4];
	acct_event *e = gauss(3.0);
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_rdp(e, ACCT_ADD_REMOVE, orders, 4, r, NULL, &err), 0);
	for (int i = 0; i < 4; i++)
		cr_expect_float_eq(r[i], orders[i] / 18.0, 1e-14 * orders[i]);
	acct_event_free(e);
}

/*
 * The PATE smooth-sensitivity release: Papernot et al. 2018, Theorem 23,
 * RDP(lambda) = lambda e^{2 beta} / sigma^2 + (beta lambda - ln(1 - 2 lambda
 * beta) / 2) / (lambda - 1) for 1 < lambda < 1 / (2 beta), written out here;
 * no bound (infinite) at orders from 1 / (2 beta) on.
 */
/*
 * At a huge noise multiplier the conversions keep their bound: a Gaussian
 * of sigma 1e8 has RDP 1/(2 sigma^2) = 5e-17 at order 1, below double's
 * 2^-53, where ln(1 - e^-r) computed as log1p(-exp(-r)) was -infinity and
 * delta came out 0.  Exact delta at epsilon 0 is the total variation
 * 2 Phi(1/(2 sigma)) - 1 = erf(1/(2 sqrt 2 sigma)); rdp and zcdp must not
 * answer below it.
 */
Test(rdp, delta_at_huge_noise_stays_above_exact)
{
	static const acct_accountant acc[] = {ACCT_RDP, ACCT_ZCDP};
	const double sigma = 1e8, exact = erf(1.0 / (2.0 * M_SQRT2 * sigma));

	for (size_t i = 0; i < sizeof(acc) / sizeof(acc[0]); i++) {
		acct_event *e = acct_event_gaussian(sigma);
		acct_options o = opts(acc[i], ACCT_ADD_REMOVE);
		acct_result r = {0};
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_delta(e, 0.0, &o, &r, &err), 0, "%s", err.text);
		cr_expect_geq(r.delta, exact, "accountant %d: delta %.6g below exact %.6g",
			      (int)acc[i], r.delta, exact);
		acct_event_free(e);
	}
}

/*
 * Sampling without replacement (Wang, Balle, Kasiviswanathan 2019, Thm 9)
 * of a Gaussian of multiplier sigma: the order-2 term is
 * log(4 (e^{1/sigma^2} - 1)), so for large sigma every order's RDP is
 * proportional to 1/sigma^2: log(1 + 4 gamma^2 C(alpha, 2) (e^{1/sigma^2}
 * - 1)) / (alpha - 1), 2 gamma^2 alpha / sigma^2 to first order, gamma =
 * m/n.  Computed as log1p(-exp(-1/sigma^2)) it fell
 * to 0 at sigma 1e9, and 10 % low at 9e7.
 */
Test(rdp, sampled_without_replacement_gaussian_scales_as_one_over_sigma_squared)
{
	static const double sigmas[] = {1e6, 9e7, 1e9}, orders[] = {2.0, 3.0};
	double ref[2] = {0};

	for (size_t i = 0; i < sizeof(sigmas) / sizeof(sigmas[0]); i++) {
		acct_event *w = acct_event_new(ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT);
		double rdp[2];
		acct_error err;

		w->u.sampled_without_replacement.source_dataset_size = 1000;
		w->u.sampled_without_replacement.sample_size = 100;
		w->u.sampled_without_replacement.event = acct_event_gaussian(sigmas[i]);
		acct_error_init(&err);
		cr_assert_eq(acct_rdp(w, ACCT_REPLACE, orders, 2, rdp, NULL, &err), 0, "%s",
			     err.text);
		for (int k = 0; k < 2; k++) {
			/* 2 (1/10)^2 alpha, times 1/sigma^2. */
			double first = 0.02 * orders[k];
			double scaled = rdp[k] * sigmas[i] * sigmas[i];

			if (i == 0)
				ref[k] = scaled;
			cr_expect(fabs(scaled / ref[k] - 1.0) < 1e-3,
				  "sigma %g order %g: rdp %.6g, sigma^2 rdp %.6g against %.6g",
				  sigmas[i], orders[k], rdp[k], scaled, ref[k]);
			cr_expect(fabs(ref[k] / first - 1.0) < 1e-3, "order %g: %.6g against %.6g",
				  orders[k], ref[k], first);
		}
		acct_event_free(w);
	}
}

Test(rdp, pate_gnss_is_theorem_23)
{
	const double beta = 0.02, sigma = 15;
	double orders[] = {1.5, 2, 10, 24.9, 25, 64}, r[6];
	acct_event *e = acct_event_new(ACCT_EV_PATE_GNSS);
	acct_options o = opts(ACCT_ZCDP, ACCT_ADD_REMOVE);
	acct_result res;
	acct_error err;

	e->u.pate_gnss.beta = beta;
	e->u.pate_gnss.sigma = sigma;
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(e, ACCT_ADD_REMOVE, orders, 6, r, NULL, &err), 0, "%s", err.text);
	for (int i = 0; i < 4; i++) {
		double l = orders[i];
		double want = l * exp(2 * beta) / (sigma * sigma) +
			      (beta * l - log(1 - 2 * l * beta) / 2) / (l - 1);

		cr_expect(fabs(r[i] - want) <= 1e-12 * want, "order %g: %.15g vs %.15g", l, r[i], want);
	}
	cr_expect(isinf(r[4]) && isinf(r[5]));
	/* Only RDP prices it. */
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(e, 1e-5, &o, &res, &err), ACCT_EUNSUPPORTED);
	acct_event_free(e);
}

/* Laplace and permute-and-flip against a quadrature written here. */
Test(rdp, laplace_matches_quadrature)
{
	double orders[] = {1.5, 2, 5.5, 20}, r[4];
	acct_event *e = test_laplace(2.0);
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_rdp(e, ACCT_ADD_REMOVE, orders, 4, r, NULL, &err), 0);
	for (int i = 0; i < 4; i++) {
		double want = renyi_quad(lap1, lap0, 2.0, orders[i], -80, 80, 400000);

		cr_expect(fabs(r[i] - want) < 1e-6 * want + 1e-9, "order %g: %.12g vs %.12g",
			  orders[i], r[i], want);
	}
	/* As the order grows the bound tends to the pure epsilon 1/b. */
	acct_event_free(e);
}

/* k-ary randomized response (replace) against a direct sum over buckets. */
Test(rdp, randomized_response_direct_sum)
{
	double p = 0.3, orders[] = {2, 7.5}, r[2];
	int k = 5;
	acct_event *e = test_rand_response(p, k);
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_rdp(e, ACCT_REPLACE, orders, 2, r, NULL, &err), 0);
	for (int i = 0; i < 2; i++) {
		double a = orders[i], s = 0.0;

		for (int x = 0; x < k; x++) {
			double P = (x == 0 ? 1 - p : 0) + p / k, Q = (x == 1 ? 1 - p : 0) + p / k;

			s += pow(P, a) * pow(Q, 1 - a);
		}
		cr_expect_float_eq(r[i], log(s) / (a - 1), 1e-12);
	}
	/* Under add_remove randomized response is refused with a reason. */
	acct_error_init(&err);
	cr_expect_eq(acct_rdp(e, ACCT_ADD_REMOVE, orders, 2, r, NULL, &err), ACCT_EUNSUPPORTED);
	cr_expect(strstr(err.text, "replace") != NULL);
	acct_event_free(e);
}

/*
 * Permute-and-flip is proven eps-DP and nothing finer (McKenna, Sheldon
 * 2020, Thm 1), so rdp and pld price it as binary randomized response with
 * eps, which dominates every eps-DP pair (Kairouz, Oh, Viswanath 2015):
 * P = (e^eps, 1) / (1 + e^eps) against Q = P reversed.  Written out here:
 * its Rényi divergence, and its hockey-stick delta at eps' for pld.  The
 * price must also cover permute-and-flip's own pair of two candidates,
 * derived here: with scores a >= b and x = eps (a - b) / (2 D), the lower
 * one wins with probability e^-x / 2; neighbours move x by at most eps,
 * and x = 0 against x = eps gives (1/2, 1/2) against
 * (1 - e^-eps / 2, e^-eps / 2).
 */
static double two_point_renyi(const double P[2], const double Q[2], double a)
{
	return log(pow(P[0], a) * pow(Q[0], 1 - a) + pow(P[1], a) * pow(Q[1], 1 - a)) / (a - 1);
}

Test(rdp, permute_and_flip_is_priced_as_any_pure_dp_mechanism)
{
	double eps = 1.0, orders[] = {1.5, 2, 5, 20}, r[4];
	double P[2] = {exp(eps) / (1 + exp(eps)), 1 / (1 + exp(eps))}, Q[2] = {P[1], P[0]};
	double F0[2] = {0.5, 0.5}, F1[2] = {1 - exp(-eps) / 2, exp(-eps) / 2};
	double lap_delta = -expm1(-(eps - 0.5) / 2); /* Laplace, b = 1/eps, at eps' = 0.5 */
	double rr_delta = P[0] - exp(0.5) * Q[0];
	acct_event *e = acct_event_new(ACCT_EV_PERMUTE_AND_FLIP);
	acct_event *sampled;
	acct_options o = opts(ACCT_PLD, ACCT_ADD_REMOVE);
	acct_result res;
	acct_error err;

	e->u.permute_and_flip.epsilon = eps;
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(e, ACCT_ADD_REMOVE, orders, 4, r, NULL, &err), 0, "%s", err.text);
	for (int i = 0; i < 4; i++) {
		double a = orders[i];

		cr_expect_float_eq(r[i], two_point_renyi(P, Q, a), 1e-12, "order %g", a);
		cr_expect(r[i] >= two_point_renyi(F0, F1, a) && r[i] >= two_point_renyi(F1, F0, a));
	}
	cr_assert_eq(acct_delta(e, 0.5, &o, &res, &err), 0, "%s", err.text);
	cr_expect(res.delta >= rr_delta && res.delta <= rr_delta + 1e-3, "pld %.9g, exact %.9g",
		  res.delta, rr_delta);
	cr_expect(rr_delta > lap_delta + 0.05, "the pair is not Laplace's");
	/* Amplification by sampling is not priced for it: refused. */
	sampled = acct_event_poisson_sampled(0.01, e);
	acct_error_init(&err);
	cr_expect_eq(acct_delta(sampled, 0.5, &o, &res, &err), ACCT_EUNSUPPORTED);
	acct_event_free(sampled);
}

/* Discrete Laplace with sensitivity 3 against a direct sum over integers. */
Test(rdp, discrete_laplace_direct_sum)
{
	double t = 0.4, d = 3, orders[] = {2, 3.5, 30}, r[3];
	acct_event *e = acct_event_new(ACCT_EV_DISCRETE_LAPLACE);
	acct_error err;

	e->u.discrete_laplace.noise_parameter = t;
	e->u.discrete_laplace.sensitivity = d;
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(e, ACCT_ADD_REMOVE, orders, 3, r, NULL, &err), 0);
	for (int i = 0; i < 3; i++) {
		double a = orders[i], s = 0.0, c = tanh(t / 2); /* (1-e^-t)/(1+e^-t) */

		for (int x = -3000; x <= 3000; x++)
			s += c * exp(-t * (a * abs(x) + (1 - a) * abs(x - 3)));
		cr_expect(fabs(r[i] - log(s) / (a - 1)) < 1e-10, "order %g: %.12g vs %.12g", a, r[i],
			  log(s) / (a - 1));
	}
	acct_event_free(e);
}

/* Sampled Gaussian: numerical integration agrees with the closed form at
 * integer orders, including alpha = 1024, tiny q, tiny and huge sigma. */
Test(rdp, sampled_gaussian_integration_agrees_with_closed_form)
{
	struct { double q, s, a; } c[] = {
		{0.01, 4, 2}, {0.01, 4, 33}, {0.001, 7, 5}, {0.1, 1.1, 20}, {0.5, 0.3, 7},
		{0.01, 4, 1024}, {0.01, 50, 1024}, {1e-4, 1e4, 3}, {0.2, 0.1, 4}, {0.99, 2, 64},
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		double closed = acct_rdp_sampled_gaussian(c[i].q, c[i].s, c[i].a, false);
		double integ = acct_rdp_sampled_gaussian(c[i].q, c[i].s, c[i].a, true);

		cr_expect(isfinite(closed) && isfinite(integ));
		cr_expect(fabs(closed - integ) <= 1e-8 * closed + 1e-300,
			  "q=%g s=%g a=%g: closed %.15g integrated %.15g", c[i].q, c[i].s, c[i].a,
			  closed, integ);
	}
	/* q = 1 is the Gaussian itself. */
	cr_expect_float_eq(acct_rdp_sampled_gaussian(1.0, 2.0, 3.5, true), 3.5 / 8.0, 1e-15);
	/* Small q: RDP(2) = log(1 + q^2 (e^{1/s^2} - 1)) exactly (the binomial
	 * sum at order 2, written out by hand). */
	{
		double q = 1e-3, s = 5.0;
		double want = log1p(q * q * expm1(1.0 / (s * s)));

		cr_expect(fabs(acct_rdp_sampled_gaussian(q, s, 2.0, false) - want) < 1e-12 * want);
		cr_expect(fabs(acct_rdp_sampled_gaussian(q, s, 2.0, true) - want) < 1e-8 * want);
	}
}

/* Fractional order 3.9, q = 0.1, sigma = 4.606 (acc-015's optimum): the
 * value of log(E_{N(0,s^2)}[(1-q+q e^{(2z-1)/2s^2})^a])/(a-1) computed by
 * mpmath.quad at 30 digits, an implementation independent of this code. */
/*
 * At alpha = 3.9, q = 0.1, sigma = 4.606: the exact A_alpha (30-digit mpmath
 * quadrature of E_{N(0,s^2)}[(1 - q + q e^{(2z-1)/2s^2})^alpha], and the
 * signed series of Mironov et al. 2019, agree on 0.000948866729294242...),
 * and the series with |C(alpha, i)| (mpmath, 30 digits: 0.000949066372018481)
 * that dp_accounting uses.  The integration must find the first; the
 * accountant reports the larger, conservative one.
 */
Test(rdp, fractional_order_exact)
{
	double exact = 0.000948866729294242016739496943623;
	double abs_series = 0.000949066372018480826114913842779;
	double integ = acct_rdp_sampled_gaussian(0.1, 4.606, 3.9, true);
	double reported = acct_rdp_sampled_gaussian(0.1, 4.606, 3.9, false);

	cr_expect(fabs(integ - exact) < 1e-11 * exact, "%.17g", integ);
	cr_expect(fabs(reported - abs_series) < 1e-9 * abs_series, "%.17g", reported);
	cr_expect_geq(reported, integ);
}

/* count = 1 is the event itself; count = 1e7 of a Gaussian is one Gaussian
 * with sigma / sqrt(1e7) (RDP and zCDP are linear in the count). */
Test(edge, counts_one_and_ten_million)
{
	acct_options o = opts(ACCT_RDP, ACCT_ADD_REMOVE);
	acct_result a, b;
	acct_error err;
	acct_event *one = acct_event_self_composed(1, gauss(2.0)), *g = gauss(2.0);
	acct_event *many = acct_event_self_composed(10000000, gauss(2000.0));

	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(one, 1e-6, &o, &a, &err), 0);
	cr_assert_eq(acct_epsilon(g, 1e-6, &o, &b, &err), 0);
	cr_expect_eq(a.epsilon, b.epsilon);
	cr_assert_eq(acct_epsilon(many, 1e-6, &o, &a, &err), 0);
	{
		acct_event *eq = gauss(2000.0 / sqrt(1e7));

		cr_assert_eq(acct_epsilon(eq, 1e-6, &o, &b, &err), 0);
		cr_expect(fabs(a.epsilon - b.epsilon) < 1e-9 * b.epsilon);
		o.accountant = ACCT_ZCDP;
		cr_assert_eq(acct_epsilon(many, 1e-6, &o, &a, &err), 0);
		cr_assert_eq(acct_epsilon(eq, 1e-6, &o, &b, &err), 0);
		cr_expect(fabs(a.epsilon - b.epsilon) < 1e-9 * b.epsilon);
		acct_event_free(eq);
	}
	acct_event_free(one);
	acct_event_free(g);
	acct_event_free(many);
}

/* sigma tiny and huge: finite, ordered answers, no NaN. */
Test(edge, sigma_tiny_and_huge)
{
	acct_options o = opts(ACCT_RDP, ACCT_ADD_REMOVE);
	acct_result r;
	acct_error err;
	acct_event *tiny = acct_event_self_composed(100, acct_event_poisson_sampled(0.01, gauss(0.05)));
	acct_event *huge = acct_event_self_composed(100, acct_event_poisson_sampled(0.01, gauss(1e5)));

	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(tiny, 1e-5, &o, &r, &err), 0, "%s", err.text);
	cr_expect(isfinite(r.epsilon) && r.epsilon > 10.0);
	cr_assert_eq(acct_epsilon(huge, 1e-5, &o, &r, &err), 0, "%s", err.text);
	cr_expect(r.epsilon >= 0.0 && r.epsilon < 1e-3);
	o.accountant = ACCT_MOMENTS;
	cr_assert_eq(acct_epsilon(huge, 1e-5, &o, &r, &err), 0, "%s", err.text);
	/* Moments: log(1/delta)/32 is the floor at lambda = 32. */
	cr_expect(fabs(r.epsilon - log(1e5) / 32.0) < 1e-6);
	cr_assert_eq(acct_epsilon(tiny, 1e-5, &o, &r, &err), 0, "%s", err.text);
	cr_expect(isfinite(r.epsilon));
	acct_event_free(tiny);
	acct_event_free(huge);
}

/*
 * Noise multipliers so small that the sampled Gaussian's integral fails
 * (1e-8 at q = 0.01) are priced, not refused: by no less than a larger
 * multiplier at the same q (the divergence grows as sigma falls) and by no
 * more than the unsampled Gaussian (sampling never raises a divergence).
 */
Test(edge, sigma_below_what_integration_resolves)
{
	static const acct_accountant accountants[] = {ACCT_RDP, ACCT_MOMENTS};

	for (size_t i = 0; i < 2; i++) {
		acct_options o = opts(accountants[i], ACCT_ADD_REMOVE);
		acct_event *tiny = acct_event_self_composed(
			100, acct_event_poisson_sampled(0.01, gauss(1e-8)));
		acct_event *small = acct_event_self_composed(
			100, acct_event_poisson_sampled(0.01, gauss(1e-2)));
		acct_event *whole = acct_event_self_composed(100, gauss(1e-8));
		acct_result lo, mid, hi;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_epsilon(tiny, 1e-5, &o, &mid, &err), 0, "%zu: %s", i, err.text);
		cr_assert_eq(acct_epsilon(small, 1e-5, &o, &lo, &err), 0, "%zu: %s", i, err.text);
		cr_assert_eq(acct_epsilon(whole, 1e-5, &o, &hi, &err), 0, "%zu: %s", i, err.text);
		cr_assert(isfinite(mid.epsilon) && mid.epsilon >= lo.epsilon &&
				  mid.epsilon <= hi.epsilon,
			  "%zu: %g not in [%g, %g]", i, mid.epsilon, lo.epsilon, hi.epsilon);
		acct_event_free(tiny);
		acct_event_free(small);
		acct_event_free(whole);
	}
}

/* q = 1: Poisson sampling with probability one is the mechanism itself. */
Test(edge, q_one)
{
	acct_options o = opts(ACCT_RDP, ACCT_ADD_REMOVE);
	acct_result a, b;
	acct_error err;
	acct_event *s = acct_event_poisson_sampled(1.0, gauss(1.5)), *g = gauss(1.5);

	acct_error_init(&err);
	for (int acc = ACCT_MOMENTS; acc <= ACCT_PLD; acc++) {
		if (acc == ACCT_ZCDP)
			continue; /* a sampled event has no zCDP bound, even at q = 1 */
		o.accountant = (acct_accountant)acc;
		cr_assert_eq(acct_epsilon(s, 1e-5, &o, &a, &err), 0, "%s", err.text);
		cr_assert_eq(acct_epsilon(g, 1e-5, &o, &b, &err), 0, "%s", err.text);
		cr_expect(fabs(a.epsilon - b.epsilon) < 1e-9 * b.epsilon, "%s: %g vs %g",
			  acct_accountant_name(o.accountant), a.epsilon, b.epsilon);
	}
	acct_event_free(s);
	acct_event_free(g);
}

/* delta = 0: only pure-DP accountants answer. */
Test(edge, delta_zero)
{
	acct_options o = opts(ACCT_BASIC, ACCT_ADD_REMOVE);
	acct_result r;
	acct_error err;
	acct_event *l = acct_event_self_composed(4, test_laplace(8.0)), *g = gauss(1.0);

	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(l, 0.0, &o, &r, &err), 0);
	cr_expect_eq(r.epsilon, 0.5);
	o.accountant = ACCT_RDP;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(g, 0.0, &o, &r, &err), ACCT_EUNSUPPORTED);
	o.accountant = ACCT_ZCDP;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(g, 0.0, &o, &r, &err), ACCT_EUNSUPPORTED);
	o.accountant = ACCT_PLD;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(g, 0.0, &o, &r, &err), ACCT_EUNSUPPORTED);
	/* PLD puts truncated tails into delta, so it answers no delta = 0 ... */
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(l, 0.0, &o, &r, &err), ACCT_EUNSUPPORTED);
	/* ... but at delta = 1e-10 a pure Laplace composition costs its pure
	 * epsilon 4/8 (up to grid steps), less what delta buys: all four
	 * losses sit at +1/8 with probability 1/16, so delta(eps) >=
	 * (1 - e^(eps - 1/2)) / 16 and no sound eps lies below 1/2 +
	 * log(1 - 16 delta).  (At 1e-12 the bound on the FFT's rounding, 3e-11
	 * here, leaves no room: pld refuses.) */
	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(l, 1e-10, &o, &r, &err), 0, "%s", err.text);
	cr_expect(r.epsilon >= 0.5 + log1p(-16.0 * 1e-10) &&
		  r.epsilon <= 0.5 + 4 * ACCT_PLD_DEFAULT_INTERVAL, "%.17g", r.epsilon);
	acct_event_free(l);
	acct_event_free(g);
}

/* Events an accountant cannot price are refused with a reason and where. */
Test(edge, unpriceable_events)
{
	acct_result r;
	acct_error err;
	acct_options o = opts(ACCT_MOMENTS, ACCT_ADD_REMOVE);
	acct_event *l = acct_event_self_composed(3, test_laplace(1.0));
	acct_event *sg = acct_event_self_composed(3, acct_event_poisson_sampled(0.1, gauss(1.0)));
	acct_event *sl = acct_event_poisson_sampled(0.1, test_laplace(1.0));

	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(l, 1e-5, &o, &r, &err), ACCT_EUNSUPPORTED);
	cr_expect_str_eq(err.where, "/event/event");
	cr_expect(strstr(err.text, "moments") != NULL);
	o.accountant = ACCT_ZCDP;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(sg, 1e-5, &o, &r, &err), ACCT_EUNSUPPORTED);
	cr_expect_str_eq(err.where, "/event/event");
	o.accountant = ACCT_BASIC;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(sg, 1e-5, &o, &r, &err), ACCT_EUNSUPPORTED);
	o.accountant = ACCT_RDP;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(sl, 1e-5, &o, &r, &err), ACCT_EUNSUPPORTED);
	cr_expect_str_eq(err.where, "/event/event");
	/* ... while pld prices the sampled Laplace. */
	o.accountant = ACCT_PLD;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(sl, 1e-5, &o, &r, &err), 0, "%s", err.text);
	/* Poisson sampling under replace is refused by the relation rules. */
	o.neighbor = ACCT_REPLACE;
	o.accountant = ACCT_RDP;
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(sg, 1e-5, &o, &r, &err), ACCT_EUNSUPPORTED);
	cr_expect_str_eq(err.where, "/event/event");
	acct_event_free(l);
	acct_event_free(sg);
	acct_event_free(sl);
}

/* PLD is an upper bound, and tight: within 1% of the exact epsilon. */
Test(pld, gaussian_upper_bound_and_tight)
{
	double sig[] = {0.5, 1.0, 3.0, 20.0};
	acct_options o = opts(ACCT_PLD, ACCT_ADD_REMOVE);

	for (int i = 0; i < 4; i++) {
		acct_event *g = gauss(sig[i]);
		acct_result r;
		acct_error err;
		double exact = test_gauss_exact_eps(sig[i], 1e-6);

		acct_error_init(&err);
		cr_assert_eq(acct_epsilon(g, 1e-6, &o, &r, &err), 0, "%s", err.text);
		cr_expect(r.epsilon >= exact * (1 - 1e-12) && r.epsilon <= exact * 1.01,
			  "sigma %g: pld %.10g exact %.10g", sig[i], r.epsilon, exact);
		/* rdp and zcdp are upper bounds too. */
		o.accountant = ACCT_RDP;
		cr_assert_eq(acct_epsilon(g, 1e-6, &o, &r, &err), 0);
		cr_expect(r.epsilon >= exact);
		o.accountant = ACCT_PLD;
		acct_event_free(g);
	}
	/* Two Gaussians compose into one with 1/s^2 = sum 1/s_i^2 = 2. */
	{
		acct_event *two = acct_event_self_composed(2, gauss(1.0));
		acct_result r;
		acct_error err;
		double exact = test_gauss_exact_eps(1.0 / sqrt(2.0), 1e-6);

		acct_error_init(&err);
		cr_assert_eq(acct_epsilon(two, 1e-6, &o, &r, &err), 0);
		cr_expect(r.epsilon >= exact * (1 - 1e-12) && r.epsilon <= exact * 1.01,
			  "pld %.10g exact %.10g", r.epsilon, exact);
		acct_event_free(two);
	}
}

/*
 * Many compositions at a small delta: k Gaussians of multiplier s are one
 * Gaussian of multiplier s / sqrt(k) (Dong, Roth, Su 2019, Cor. 3.3), whose
 * exact epsilon test_gauss_exact_eps_l finds in long double.  The FFT's
 * rounding grows with k and is absolute, so in the far tail the composed
 * masses were below the true ones and pld answered less than the exact
 * epsilon (74.0172 for 74.0481 in the first row).  pld now either answers
 * an upper bound or, where its rounding bound leaves no room under delta,
 * refuses; at delta = 1e-8 it must still answer, within 1%.
 */
Test(pld, many_compositions_never_below_exact)
{
	static const struct {
		int64_t k;
		double sigma, delta;
		bool must_answer;
	} cases[] = {
		{5000, 10.0, 1e-12, false}, {1000, 5.0, 1e-10, false}, {5000, 10.0, 1e-10, false},
		{20000, 60.0, 1e-12, false}, {5000, 60.0, 1e-12, false}, {5000, 10.0, 1e-8, true},
		{1000, 5.0, 1e-8, true},
	};
	acct_options o = opts(ACCT_PLD, ACCT_ADD_REMOVE);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		acct_event *e = acct_event_self_composed(cases[i].k, gauss(cases[i].sigma));
		double exact = test_gauss_exact_eps_l(cases[i].sigma / sqrt((double)cases[i].k),
						      cases[i].delta);
		acct_result r = {0};
		acct_error err;
		int rc;

		acct_error_init(&err);
		rc = acct_epsilon(e, cases[i].delta, &o, &r, &err);
		if (rc == 0)
			cr_expect(r.epsilon >= exact, "case %zu: pld %.12g below exact %.12g", i,
				  r.epsilon, exact);
		else
			cr_expect(rc == ACCT_EUNSUPPORTED && !cases[i].must_answer,
				  "case %zu: rc %d %s", i, rc, err.text);
		if (cases[i].must_answer)
			cr_expect(rc == 0 && r.epsilon <= exact * 1.01,
				  "case %zu: pld %.12g exact %.12g", i, r.epsilon, exact);
		acct_event_free(e);
	}
}

/*
 * A discrete event's PLD holds its atoms and nothing else: built from the
 * closed-form curve's differences it held ~1000 rounding-junk masses in
 * between (up to 4e-13 each), and a sparse composition by FFT holds
 * rounding at every point of its window.  An atom on a grid point is one
 * point, one between two is split over both: epsilon_delta(eps, delta)
 * has losses +-eps on the grid at eps = 0.1, 0.3 and 1 (and +infinity);
 * randomized response has 0, on the grid, and +-l, between two points
 * each (1 + 2 + 2); k-fold compositions of a two-atom PLD on the grid
 * have k + 1 losses, two of them 4.
 */
Test(pld, discrete_base_has_only_its_atoms)
{
	acct_event *rr = test_rand_response(0.5, 4);
	acct_event *two[2] = {acct_event_epsilon_delta(0.1, 1e-7),
			      acct_event_epsilon_delta(0.3, 0)};
	struct {
		acct_event *ev;
		acct_neighbor nb;
		size_t points;
	} cases[] = {
		{acct_event_epsilon_delta(0.1, 1e-7), ACCT_ADD_REMOVE, 2},
		{acct_event_epsilon_delta(1.0, 0.0), ACCT_ADD_REMOVE, 2},
		{rr, ACCT_REPLACE, 5},
		{acct_event_self_composed(3, acct_event_epsilon_delta(0.1, 1e-7)), ACCT_ADD_REMOVE,
		 4},
		{acct_event_self_composed(10, acct_event_epsilon_delta(0.1, 1e-7)), ACCT_ADD_REMOVE,
		 11},
		{acct_event_composed(two, 2), ACCT_ADD_REMOVE, 4},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t got = 0;
		acct_error err;

		acct_error_init(&err);
		int rc = acct__pld_points(cases[i].ev, cases[i].nb, ACCT_PLD_DEFAULT_INTERVAL,
					  &got, &err);

		cr_expect_eq(rc, 0, "case %zu: %s", i, err.text);
		cr_expect_eq(got, cases[i].points, "case %zu: %zu points, want %zu", i, got,
			     cases[i].points);
		acct_event_free(cases[i].ev);
	}
}

/*
 * delta(eps) of k-fold (eps0, delta0)-DP, exactly (Kairouz, Oh, Viswanath
 * 2015): the dominating pair is +infinity with mass delta0, else loss +-eps0
 * with P-masses p = e^eps0 / (1 + e^eps0) and 1 - p; the k-fold loss is
 * (2i - k) eps0 with i ~ Bin(k, p).  Long double, binomials by lgamma.
 */
static long double kov_delta(int k, double eps0, double delta0, long double eps)
{
	long double lp = -log1pl(expl(-(long double)eps0)), lq = -log1pl(expl(eps0));
	long double fin = expl(k * log1pl(-(long double)delta0)), s = 0.0L;

	for (int i = 0; i <= k; i++) {
		long double l = (2.0L * i - k) * eps0;

		if (l > eps)
			s += expl(lgammal(k + 1.0L) - lgammal(i + 1.0L) - lgammal(k - i + 1.0L) +
				  i * lp + (k - i) * lq) * -expm1l(eps - l);
	}
	return 1.0L - fin + fin * s;
}

/* The smallest eps with kov_delta(eps) <= delta, by bisection. */
static double kov_epsilon(int k, double eps0, double delta0, double delta)
{
	long double lo = 0.0L, hi = k * eps0;

	for (int it = 0; it < 200; it++) {
		long double mid = 0.5L * (lo + hi);

		if (kov_delta(k, eps0, delta0, mid) <= delta)
			hi = mid;
		else
			lo = mid;
	}
	return (double)hi;
}

/*
 * Self-composed (eps0, delta0) events are answered and certified: at
 * 100 x (0.1, 1e-7) and delta = 1e-5 the mass at infinity leaves 5e-11
 * under delta, less than the FFT's rounding bound (1.4e-10), and pld
 * refused; composed directly it answers.  An atom between two grid points
 * is split over both, keeping its mass under P and under Q, so the answer
 * does not drift with k: within 0.5 % (and two grid steps) of exact at
 * 20 000 x 0.00323457, where rounding each loss up to the grid gave 3.05
 * against an exact 2.04.  The composed row takes the two-PLD convolution
 * path.
 */
Test(pld, self_composed_epsilon_delta_certified)
{
	static const struct {
		int k;
		double eps0, delta0, delta;
	} cases[] = {
		{100, 0.1, 1e-7, 1e-5},		{30, 0.5, 0.0, 1e-6},
		{1000, 0.05, 1e-9, 1e-5},	{20000, 0.00323457, 0.0, 1e-6},
		{2000, 0.0123457, 1e-12, 1e-6},
	};
	acct_options o = opts(ACCT_PLD, ACCT_ADD_REMOVE);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int k = cases[i].k;
		double e0 = cases[i].eps0, d0 = cases[i].delta0;
		double exact = kov_epsilon(k, e0, d0, cases[i].delta);
		double hi = exact * 1.005 + 2.0 * ACCT_PLD_DEFAULT_INTERVAL;
		acct_event *half[2] = {
			acct_event_self_composed(k / 2, acct_event_epsilon_delta(e0, d0)),
			acct_event_self_composed(k - k / 2, acct_event_epsilon_delta(e0, d0)),
		};
		acct_event *evs[2] = {
			acct_event_self_composed(k, acct_event_epsilon_delta(e0, d0)),
			acct_event_composed(half, 2),
		};

		for (int j = 0; j < 2; j++) {
			acct_result r = {0};
			acct_error err;

			acct_error_init(&err);
			cr_expect_eq(acct_epsilon(evs[j], cases[i].delta, &o, &r, &err), 0,
				     "case %zu/%d: %s", i, j, err.text);
			cr_expect(r.epsilon >= exact && r.epsilon <= hi,
				  "case %zu/%d: pld %.12g exact %.12g", i, j, r.epsilon, exact);
			acct_event_free(evs[j]);
		}
	}
}

/*
 * PLD stops at its work limit (DPG_MAX_PLD_WORK) instead of composing for
 * minutes: 100 distinct Gaussians widen the support with every convolution.
 * The basic ledger then prices the same event with rdp and zcdp.  Check of
 * that price: a composition of Gaussian mechanisms with noise multipliers
 * s_i is exactly one Gaussian mechanism with 1/s^2 = sum 1/s_i^2 (Dong,
 * Roth, Su 2019, Cor. 3.3), so no sound epsilon lies below that Gaussian's
 * exact one; and zCDP gives rho = sum 1/(2 s_i^2) with the conversion
 * eps <= rho + 2 sqrt(rho ln(1/delta)) (Bun, Steinke 2016, Prop. 1.3), which
 * the ledger's tighter conversion can only improve on.
 */
Test(pld, work_limit_and_basic_fallback)
{
	acct_event *ev = acct_event_new(ACCT_EV_COMPOSED);
	acct_options o = opts(ACCT_PLD, ACCT_ADD_REMOVE);
	double inv_var = 0.0, rho, delta = 1e-9, exact, upper;
	acct_filter f;
	acct_result r;
	acct_error err;
	acct_cost c;

	ev->u.composed.n = 100;
	ev->u.composed.events = calloc(100, sizeof(acct_event *));
	cr_assert_not_null(ev->u.composed.events);
	for (int i = 0; i < 100; i++) {
		double s = 1.0 + 0.01 * i;

		ev->u.composed.events[i] = gauss(s);
		inv_var += 1.0 / (s * s);
	}
	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(ev, delta, &o, &r, &err), ACCT_EUNSUPPORTED);
	cr_expect(strncmp(err.where, "/event", 6) == 0, "%s", err.where);
	cr_expect(strstr(err.text, "limit") != NULL, "%s", err.text);

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1e6, 1e-3, &err), 0);
	cr_assert_eq(acct_filter_price(&f, ev, delta, &c, &err), 0, "%s", err.text);
	exact = test_gauss_exact_eps(1.0 / sqrt(inv_var), delta);
	rho = 0.5 * inv_var;
	upper = rho + 2.0 * sqrt(rho * log(1.0 / delta));
	cr_expect_eq(c.v[1], delta);
	cr_expect(c.v[0] >= exact && c.v[0] <= upper, "priced %.10g, exact %.10g, zCDP bound %.10g",
		  c.v[0], exact, upper);
	acct_event_free(ev);
}

/*
 * A calibration shares one pld work budget across its search: calibrating
 * randomized response (4 buckets, replace) to epsilon 10^6 under pld needs
 * grids near the point limit at every step, and took 22 s (release build)
 * to fail; it now stops at DPG_MAX_PLD_WORK in total, with that reason.
 */
Test(calibrate, pld_search_shares_one_work_budget)
{
	acct_options o = opts(ACCT_PLD, ACCT_REPLACE);
	acct_event *rr = test_rand_response(0.5, 4);
	acct_error err;
	double v, e;

	acct_error_init(&err);
	cr_assert_eq(acct_calibrate(rr, rr, "noise_parameter", 1e6, 1e-5, &o, &v, &e, &err),
		     ACCT_EUNSUPPORTED, "%s", err.text);
	cr_expect(strstr(err.text, "grid operations (the limit)") != NULL, "%s", err.text);
	acct_event_free(rr);
}

/*
 * Calibrating randomized response (2 buckets, replace) to epsilon 1000:
 * its epsilon is ln(k / p) + ln(1 - p + p / k), about 745 at the least
 * double p = 5e-324, so every p the search can try meets the target and
 * there is no crossing to bracket.  The answer names the target.
 */
Test(calibrate, a_target_no_value_crosses_is_refused_at_epsilon)
{
	acct_options o = opts(ACCT_RDP, ACCT_REPLACE);
	acct_event *rr = test_rand_response(0.5, 2);
	acct_error err;
	double v, e;

	acct_error_init(&err);
	cr_assert_eq(acct_calibrate(rr, rr, "noise_parameter", 1000.0, 1e-5, &o, &v, &e, &err),
		     ACCT_EUNSUPPORTED, "%s", err.text);
	cr_assert_str_eq(err.where, "/epsilon", "%s", err.text);
	acct_event_free(rr);
}

/*
 * Randomized response with 10^9 buckets calibrated to epsilon 1 (zcdp,
 * delta 1e-300) wants p = 1 - 2.7e-11: a tolerance relative to p stopped at
 * the bracket [1 - 1e-10, 1] and answered its conservative end, p = 1, all
 * noise and epsilon 0.  The answer is now below 1 and meets the target
 * within 1e-3.
 */
Test(calibrate, a_noise_parameter_near_one_is_found_not_rounded_to_one)
{
	acct_options o = opts(ACCT_ZCDP, ACCT_REPLACE);
	acct_event *rr = test_rand_response(0.5, 1000000000);
	acct_error err;
	double v, e;

	acct_error_init(&err);
	cr_assert_eq(acct_calibrate(rr, rr, "noise_parameter", 1.0, 1e-300, &o, &v, &e, &err), 0,
		     "%s", err.text);
	cr_assert_lt(v, 1.0);
	cr_assert(e <= 1.0 && e > 0.999, "epsilon %.17g at p = %.17g", e, v);
	acct_event_free(rr);
}

/*
 * Near-noiseless pure-DP events, whose exact epsilon at any delta below
 * 1/2 is about their pure epsilon (discrete Laplace: t D; randomized
 * response: ln((1 - p + p / k) k / p)), here 2e306, infinity and about
 * 745: their RDP overflowed to inf - inf = NaN, which fmax(NaN, 0) made 0,
 * and rdp priced them at epsilon 0; basic summed to an infinite epsilon
 * and answered it.  Every accountant now answers an epsilon of at least
 * 1 (the truth is far above) or refuses to price them, and rdp's delta at
 * epsilon 1 is near 1, not 0.
 */
Test(rdp, near_noiseless_events_are_never_priced_near_zero)
{
	static const acct_accountant acc[] = {ACCT_BASIC, ACCT_STRONG, ACCT_RDP, ACCT_ZCDP, ACCT_PLD};
	static const struct {
		bool rr;
		double par, size; /* t and D, or p and k */
	} ev[] = {{false, 1e306, 2}, {false, DBL_MAX, 1e9}, {true, 5e-324, 2}, {true, 5e-324, 3}};

	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		acct_event *e = acct_event_new(ev[i].rr ? ACCT_EV_RANDOMIZED_RESPONSE :
							  ACCT_EV_DISCRETE_LAPLACE);
		acct_neighbor nb = ev[i].rr ? ACCT_REPLACE : ACCT_ADD_REMOVE;
		double orders[] = {1.5, 2, 32, 256}, r[4];
		acct_result res;
		acct_error err;

		if (ev[i].rr) {
			e->u.randomized_response.noise_parameter = ev[i].par;
			e->u.randomized_response.num_buckets = (int)ev[i].size;
		} else {
			e->u.discrete_laplace.noise_parameter = ev[i].par;
			e->u.discrete_laplace.sensitivity = ev[i].size;
		}
		acct_error_init(&err);
		cr_assert_eq(acct_rdp(e, nb, orders, 4, r, NULL, &err), 0, "%zu: %s", i, err.text);
		for (int j = 0; j < 4; j++)
			cr_assert_geq(r[j], 1.0, "event %zu, order %g: rdp %g", i, orders[j], r[j]);
		for (size_t a = 0; a < sizeof(acc) / sizeof(acc[0]); a++) {
			acct_options o = opts(acc[a], nb);

			acct_error_init(&err);
			if (acct_epsilon(e, 1e-5, &o, &res, &err) == 0)
				cr_assert(isfinite(res.epsilon) && res.epsilon >= 1.0,
					  "event %zu, accountant %zu: epsilon %g", i, a, res.epsilon);
		}
		{
			acct_options o = opts(ACCT_RDP, nb);

			acct_error_init(&err);
			if (acct_delta(e, 1.0, &o, &res, &err) == 0)
				cr_assert_gt(res.delta, 0.5, "event %zu: delta %g", i, res.delta);
		}
		acct_event_free(e);
	}
}

/*
 * Pure-DP events with a tiny loss eps: their RDP is about a eps^2 / 2 (the
 * Fisher information of a location family: Laplace, discrete Laplace,
 * binary randomized response and permute-and-flip's binary form all have
 * it, to first order in eps), and never above it (eps-DP implies
 * (eps^2 / 2)-zCDP, Bun and Steinke 2016, Prop. 3.3).  The closed forms
 * take that value as a difference of terms near 1, and for eps below
 * about 1e-8 the rounding of those terms was all that was left: 0, or for
 * Laplace a negative value that cancelled the RDP of what it was composed
 * with.  Checked: each value within [a eps^2 / 8, a eps^2 / 2 (1 + 1e-12)],
 * and a Gaussian composed with 4e36 tiny Laplaces costs at least what the
 * Gaussian alone does, at every order.
 */
Test(rdp, tiny_pure_dp_losses_keep_their_second_order_cost)
{
	static const double eps_of[] = {1e-4, 1e-6, 1e-8, 1e-12, 1e-18};
	double orders[] = {1.1, 2, 16, 256}, r[4], alone[4];
	acct_error err;

	for (size_t i = 0; i < sizeof(eps_of) / sizeof(eps_of[0]); i++) {
		double eps = eps_of[i];

		for (int kind = 0; kind < 4; kind++) {
			acct_event *e = acct_event_new(kind == 0 ? ACCT_EV_LAPLACE :
						       kind == 1 ? ACCT_EV_DISCRETE_LAPLACE :
						       kind == 2 ? ACCT_EV_RANDOMIZED_RESPONSE :
								   ACCT_EV_PERMUTE_AND_FLIP);
			acct_neighbor nb = kind == 2 ? ACCT_REPLACE : ACCT_ADD_REMOVE;

			if (kind == 0) {
				e->u.laplace.noise_multiplier = 1.0 / eps;
			} else if (kind == 1) {
				e->u.discrete_laplace.noise_parameter = eps;
				e->u.discrete_laplace.sensitivity = 1;
			} else if (kind == 2) {
				/* eps = ln(1 + 2 (1 - p) / p): 1 - p = p (e^eps - 1) / 2. */
				e->u.randomized_response.noise_parameter = 1.0 / (1.0 + expm1(eps) / 2.0);
				e->u.randomized_response.num_buckets = 2;
			} else {
				e->u.permute_and_flip.epsilon = eps;
			}
			/* Below eps 1e-16, p rounds to 1: no loss at all. */
			if (kind == 2 && e->u.randomized_response.noise_parameter == 1.0) {
				acct_event_free(e);
				continue;
			}
			acct_error_init(&err);
			cr_assert_eq(acct_rdp(e, nb, orders, 4, r, NULL, &err), 0, "%s", err.text);
			for (int j = 0; j < 4; j++) {
				double q = orders[j] * eps * eps / 2.0;

				/* Randomized response's eps is the event's only up to
				 * the rounding of p near 1: relative 1e-16 / eps. */
				double slack = kind == 2 ? 1.0 + 4.0 * DBL_EPSILON / eps : 1.0 + 1e-12;

				cr_assert(r[j] >= q / 4.0 && r[j] <= q * slack * slack,
					  "kind %d, eps %g, order %g: rdp %.17g, a eps^2 / 2 = %.17g",
					  kind, eps, orders[j], r[j], q);
			}
			acct_event_free(e);
		}
	}
	{
		acct_event *g = gauss(0.1), *parts[2];
		acct_event *tiny = acct_event_new(ACCT_EV_LAPLACE), *both;

		tiny->u.laplace.noise_multiplier = 1e18;
		for (int k = 0; k < 4; k++)
			tiny = acct_event_self_composed(100000000, tiny);
		tiny = acct_event_self_composed(41558, tiny);
		acct_error_init(&err);
		cr_assert_eq(acct_rdp(g, ACCT_ADD_REMOVE, orders, 4, alone, NULL, &err), 0);
		parts[0] = g;
		parts[1] = tiny;
		both = acct_event_composed(parts, 2);
		cr_assert_eq(acct_rdp(both, ACCT_ADD_REMOVE, orders, 4, r, NULL, &err), 0, "%s",
			     err.text);
		for (int j = 0; j < 4; j++)
			cr_assert_geq(r[j], alone[j], "order %g: %g with the Laplaces, %g without",
				      orders[j], r[j], alone[j]);
		acct_event_free(both);
	}
}

/*
 * A Gaussian on m of n rows sampled without replacement never costs more
 * than on all n (couple the samples by index: each pair is equal or
 * replace-neighbours, and Renyi divergence is jointly quasi-convex).  Wang
 * et al.'s bound alone gave m = 999 of 1000 at sigma 1 an RDP of 1.86 at
 * order 2, where all rows cost 2 / 2 = 1, and a larger epsilon.
 */
Test(rdp, sampling_without_replacement_never_costs_more_than_all_rows)
{
	static const int64_t m_of[] = {999, 990, 900, 500};
	acct_options o = opts(ACCT_RDP, ACCT_REPLACE);
	size_t n;
	const double *orders = acct_rdp_default_orders(&n);
	double *r = calloc(n, sizeof(double)), *all = calloc(n, sizeof(double));
	acct_result whole, part;
	acct_event *full = acct_event_new(ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT);
	acct_error err;

	cr_assert(r && all);
	full->u.sampled_without_replacement.source_dataset_size = 1000;
	full->u.sampled_without_replacement.sample_size = 1000;
	full->u.sampled_without_replacement.event = gauss(1.0);
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(full, ACCT_REPLACE, orders, n, all, NULL, &err), 0, "%s", err.text);
	cr_assert_eq(acct_epsilon(full, 1e-5, &o, &whole, &err), 0, "%s", err.text);
	for (size_t k = 0; k < sizeof(m_of) / sizeof(m_of[0]); k++) {
		acct_event *e = acct_event_copy(full);

		e->u.sampled_without_replacement.sample_size = m_of[k];
		acct_error_init(&err);
		cr_assert_eq(acct_rdp(e, ACCT_REPLACE, orders, n, r, NULL, &err), 0, "%s", err.text);
		for (size_t i = 0; i < n; i++)
			cr_assert_leq(r[i], all[i], "m = %lld, order %g: %g above all rows' %g",
				      (long long)m_of[k], orders[i], r[i], all[i]);
		cr_assert_eq(acct_epsilon(e, 1e-5, &o, &part, &err), 0, "%s", err.text);
		cr_assert_leq(part.epsilon, whole.epsilon, "m = %lld", (long long)m_of[k]);
		acct_event_free(e);
	}
	acct_event_free(full);
	free(r);
	free(all);
}

/* Moments accountant against Abadi et al.'s published figures. */
Test(moments, abadi_figures)
{
	acct_options o = opts(ACCT_MOMENTS, ACCT_ADD_REMOVE);
	acct_result r;
	acct_error err;
	acct_event *e100 = acct_event_self_composed(10000, acct_event_poisson_sampled(0.01, gauss(4)));
	acct_event *e400 = acct_event_self_composed(40000, acct_event_poisson_sampled(0.01, gauss(4)));

	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(e100, 1e-5, &o, &r, &err), 0);
	cr_expect(fabs(r.epsilon - 1.26) < 0.01, "100 epochs: %g", r.epsilon);
	cr_assert_eq(acct_epsilon(e400, 1e-5, &o, &r, &err), 0);
	cr_expect(r.epsilon >= 2.55 && r.epsilon <= 2.58, "400 epochs: %g", r.epsilon);
	acct_event_free(e100);
	acct_event_free(e400);
}

/* zCDP: Bun-Steinke's closed form, and the tight conversion is below it. */
Test(zcdp, conversions)
{
	double rho = 0.1, d = 1e-6;

	cr_expect_float_eq(acct_zcdp_to_epsilon(rho, d, true), rho + 2 * sqrt(rho * log(1 / d)), 1e-14);
	cr_expect(acct_zcdp_to_epsilon(rho, d, false) < acct_zcdp_to_epsilon(rho, d, true));
	/* rho_B converts to at most the budget, and a hair more does not. */
	{
		double rb = acct_zcdp_rho_budget(1.0, 1e-5);

		cr_expect(acct_zcdp_to_epsilon(rb, 1e-5, false) <= 1.0);
		cr_expect(acct_zcdp_to_epsilon(rb * (1 + 1e-9), 1e-5, false) > 1.0 - 1e-9);
	}
}

/* strong: the textbook formula with delta' = delta - k delta0. */
Test(strong, textbook_formula)
{
	acct_options o = opts(ACCT_STRONG, ACCT_ADD_REMOVE);
	acct_result r;
	acct_error err;
	acct_event *e = acct_event_self_composed(50, acct_event_epsilon_delta(0.2, 1e-8));
	double dp = 1e-5 - 50 * 1e-8;

	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(e, 1e-5, &o, &r, &err), 0);
	cr_expect_float_eq(r.epsilon, sqrt(2 * 50 * log(1 / dp)) * 0.2 + 50 * 0.2 * expm1(0.2), 1e-12);
	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(e, 5e-7, &o, &r, &err), ACCT_EUNSUPPORTED);
	acct_event_free(e);
	/* A tiny epsilon: its square underflows a double, and the answer was
	 * 0; the formula gives sqrt(2 k ln(1/delta)) eps0 (the drift term,
	 * k eps0^2, is below every double). */
	e = acct_event_self_composed(4, acct_event_epsilon_delta(1e-200, 0));
	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(e, 1e-5, &o, &r, &err), 0, "%s", err.text);
	cr_expect_float_eq(r.epsilon, sqrt(2 * 4 * log(1e5)) * 1e-200, 1e-12 * 1e-200);
	acct_event_free(e);
}

/*
 * basic sums round upward: six releases whose delta sum in double rounds
 * below the exact one.  Asked at that rounded sum, the composition is
 * refused (it spends more), and the delta reported is at or above the
 * exact sum (a long double holds six such doubles' sum exactly: their
 * exponents are within 4 of each other).
 */
Test(basic, delta_sums_never_round_down)
{
	acct_options o = opts(ACCT_BASIC, ACCT_ADD_REMOVE);
	unsigned seed = 7;
	int found = 0;

	for (int trial = 0; trial < 1000 && found < 5; trial++) {
		acct_event *leaves[6], *e;
		double d[6], rounded = 0;
		long double exact = 0;
		acct_result r;
		acct_error err;

		for (int i = 0; i < 6; i++) {
			d[i] = 1e-7 + 9e-7 * rand_r(&seed) / (double)RAND_MAX;
			rounded += d[i];
			exact += d[i];
		}
		if (!(exact > (long double)rounded))
			continue;
		found++;
		for (int i = 0; i < 6; i++)
			leaves[i] = acct_event_epsilon_delta(0.1, d[i]);
		e = acct_event_composed(leaves, 6);
		acct_error_init(&err);
		cr_expect_eq(acct_epsilon(e, rounded, &o, &r, &err), ACCT_EUNSUPPORTED,
			     "delta %.17g accepted, exact sum %.20Lg", rounded, exact);
		acct_error_init(&err);
		cr_assert_eq(acct_delta(e, 1.0, &o, &r, &err), 0, "%s", err.text);
		cr_expect((long double)r.delta >= exact, "delta %.17g below %.20Lg", r.delta, exact);
		acct_event_free(e);
	}
	cr_assert_eq(found, 5);
}

/* Calibration returns the conservative side. */
Test(calibrate, laplace_and_count)
{
	acct_options o = opts(ACCT_BASIC, ACCT_ADD_REMOVE);
	acct_error err;
	double v, e;
	acct_event *l = acct_event_self_composed(10, test_laplace(1.0));
	acct_event *c = acct_event_self_composed(1, acct_event_epsilon_delta(0.125, 0));

	acct_error_init(&err);
	/* 10 / b <= 0.5  <=>  b >= 20 */
	cr_assert_eq(acct_calibrate(l, l->u.self_composed.event, "noise_multiplier", 0.5, 0.0, &o, &v,
				    &e, &err), 0, "%s", err.text);
	cr_expect(v >= 20.0 && v < 20.0 * (1 + 1e-8), "b = %.15g", v);
	cr_expect(e <= 0.5);
	/* 0.125 k <= 1  <=>  k <= 8 */
	cr_assert_eq(acct_calibrate(c, c, "count", 1.0, 0.0, &o, &v, &e, &err), 0, "%s", err.text);
	cr_expect_eq(v, 8.0);
	acct_event_free(l);
	acct_event_free(c);
}

/* The RDP filter: never admits past the budget, its own epsilon agrees. */
Test(filters, rdp_union_filter)
{
	acct_filter f;
	acct_cost total, c;
	acct_error err;
	acct_event *ev = acct_event_self_composed(100, acct_event_poisson_sampled(0.01, gauss(1.0)));
	int admitted;

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_RDP, ACCT_ADD_REMOVE, 2.0, 1e-5, &err), 0);
	cr_expect_eq(f.n_orders, 20);
	acct_filter_zero(&f, &total);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0, "%s", err.text);
	admitted = test_admit_repeatedly(&f, &c, 1000, 2.0, &total);
	cr_expect(admitted > 0 && admitted < 1000);
	/* The admitted composition, priced by the rdp accountant at the filter's
	 * orders and delta share, is within the budget. */
	{
		acct_event *all = acct_event_self_composed(admitted, acct_event_copy(ev));
		acct_options o = opts(ACCT_RDP, ACCT_ADD_REMOVE);
		acct_result r;

		o.orders = f.orders;
		o.n_orders = f.n_orders;
		cr_assert_eq(acct_epsilon(all, 1e-5 / 20, &o, &r, &err), 0);
		cr_expect(r.epsilon <= 2.0 + 1e-9);
		acct_event_free(all);
	}
	/* delta = 0 budgets cannot use rdp. */
	acct_error_init(&err);
	cr_expect_eq(acct_filter_init(&f, ACCT_LEDGER_RDP, ACCT_ADD_REMOVE, 1.0, 0.0, &err),
		     ACCT_EUNSUPPORTED);
	acct_event_free(ev);
}

Test(filters, zcdp_and_basic_fallback)
{
	acct_filter f;
	acct_cost c;
	acct_error err;
	acct_event *g = gauss(2.0), *sg = acct_event_poisson_sampled(0.1, gauss(1.0));

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_ZCDP, ACCT_ADD_REMOVE, 1.0, 1e-6, &err), 0);
	cr_assert_eq(acct_filter_price(&f, g, 0.0, &c, &err), 0);
	cr_expect_float_eq(c.v[0], 1.0 / 8.0, 1e-15);
	cr_expect_eq(acct_filter_price(&f, sg, 0.0, &c, &err), ACCT_EUNSUPPORTED);
	/* basic ledger: the Gaussian is charged (eps, share) with eps at least
	 * the exact Gaussian epsilon and within 1% of it. */
	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 10.0, 1e-5, &err), 0);
	cr_assert_eq(acct_filter_price(&f, g, 1e-6, &c, &err), 0, "%s", err.text);
	cr_expect_eq(c.v[1], 1e-6);
	cr_expect(c.v[0] >= test_gauss_exact_eps(2.0, 1e-6) && c.v[0] <= 1.01 * test_gauss_exact_eps(2.0, 1e-6));
	acct_error_init(&err);
	cr_expect_eq(acct_filter_price(&f, g, 0.0, &c, &err), ACCT_EUNSUPPORTED);
	acct_event_free(g);
	acct_event_free(sg);
}

/* ---- route handlers -------------------------------------------------------- */

static json_t *call(srv_json_fn fn, const char *body, int *rc, acct_error *err)
{
	json_error_t je;
	json_t *b = json_loads(body, 0, &je), *ans = NULL;

	cr_assert_not_null(b, "bad test JSON: %s", je.text);
	acct_error_init(err);
	*rc = fn(b, &ans, err);
	json_decref(b);
	return ans;
}

/*
 * strong past every double: a Laplace release of scale 0.0014 is 714-DP,
 * and its drift eps (e^eps - 1) is about 10^313.  The answer is a refusal
 * naming the event, never a success with an infinite epsilon (printed as
 * null), and compare lists strong among the unsupported.
 */
Test(strong, overflow_is_refused)
{
	acct_options o = opts(ACCT_STRONG, ACCT_ADD_REMOVE);
	acct_result r = {0};
	acct_error err;
	acct_event *e = acct_event_epsilon_delta(714.0, 0.0);
	json_t *a;
	int rc;

	acct_error_init(&err);
	cr_expect_eq(acct_epsilon(e, 1e-5, &o, &r, &err), ACCT_EUNSUPPORTED, "epsilon %g",
		     r.epsilon);
	cr_expect_str_eq(err.where, "/event");
	acct_event_free(e);
	a = call(srv_acct_compare, "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":"
		 "0.0014},\"delta\":1e-5}", &rc, &err);
	cr_assert_eq(rc, 0, "%s", err.text);
	cr_expect_null(pget(a, "epsilon", "strong"));
	cr_expect(json_is_string(pget(a, "unsupported", "strong")));
	cr_expect(json_is_real(pget(a, "epsilon", "basic")));
	json_decref(a);
}

Test(routes, shapes_and_errors)
{
	acct_error err;
	int rc;
	json_t *a;

	a = call(srv_acct_epsilon, "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1},"
		 "\"delta\":1e-5,\"accountant\":\"rdp\"}", &rc, &err);
	cr_assert_eq(rc, 0);
	cr_expect(json_is_real(json_object_get(a, "epsilon")));
	cr_expect(json_is_real(json_object_get(a, "order")));
	cr_expect_str_eq(json_string_value(json_object_get(a, "accountant")), "rdp");
	json_decref(a);
	/* Bad field: 400 with the field's pointer. */
	a = call(srv_acct_epsilon, "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":-1},"
		 "\"delta\":1e-5}", &rc, &err);
	cr_expect_eq(rc, ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/event/noise_multiplier");
	/* Unpriceable: 422 with a reason. */
	a = call(srv_acct_epsilon, "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},"
		 "\"delta\":1e-5,\"accountant\":\"moments\"}", &rc, &err);
	cr_expect_eq(rc, ACCT_EUNSUPPORTED);
	cr_expect(err.text[0] != '\0');
	/* compare: every accountant either answers or says why not. */
	a = call(srv_acct_compare, "{\"event\":{\"type\":\"self_composed\",\"count\":10,\"event\":"
		 "{\"type\":\"laplace\",\"noise_multiplier\":4}},\"delta\":1e-6}", &rc, &err);
	cr_assert_eq(rc, 0, "%s", err.text);
	cr_expect_eq(json_object_size(json_object_get(a, "epsilon")) +
		     json_object_size(json_object_get(a, "unsupported")), ACCT__N_ACCOUNTANTS);
	cr_expect_float_eq(json_real_value(pget(a, "epsilon", "basic")), 2.5, 1e-12);
	cr_expect(json_is_string(pget(a, "unsupported", "moments")));
	json_decref(a);
	/* rdp route: the Gaussian's a/(2 s^2). */
	a = call(srv_acct_rdp, "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2},"
		 "\"orders\":[2,4]}", &rc, &err);
	cr_assert_eq(rc, 0);
	cr_expect_float_eq(json_real_value(json_array_get(json_object_get(a, "rdp"), 1)), 0.5, 1e-15);
	json_decref(a);
	/* calibrate a count. */
	a = call(srv_acct_calibrate, "{\"template\":{\"type\":\"self_composed\",\"count\":null,"
		 "\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4}},\"epsilon\":2,\"delta\":0,"
		 "\"accountant\":\"basic\"}", &rc, &err);
	cr_assert_eq(rc, 0, "%s %s", err.where, err.text);
	cr_expect_eq(json_integer_value(json_object_get(a, "count")), 8);
	json_decref(a);
	a = call(srv_acct_calibrate, "{\"template\":{\"type\":\"gaussian\",\"noise_multiplier\":null,"
		 "\"x\":null},\"epsilon\":2,\"delta\":0}", &rc, &err);
	cr_expect_eq(rc, ACCT_EINVAL);
}

/*
 * A null field the solver cannot take is refused as such, at its pointer:
 * the placeholder put there first (1) had failed the checks of the fields
 * beside it, and the message named a range that had nothing to do with
 * the request ("'sample_size' must be an integer in [1, 1]").
 */
Test(routes, calibrate_names_a_field_it_cannot_solve)
{
	static const struct {
		const char *body, *where;
	} cases[] = {
		{"{\"template\":{\"type\":\"randomized_response\",\"noise_parameter\":0.5,"
		 "\"num_buckets\":null},\"epsilon\":1,\"delta\":1e-5,\"neighbor\":\"replace\"}",
		 "/template/num_buckets"},
		{"{\"template\":{\"type\":\"sampled_without_replacement\",\"source_dataset_size\":"
		 "null,\"sample_size\":10,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1}},"
		 "\"epsilon\":1,\"delta\":1e-5,\"neighbor\":\"replace\"}",
		 "/template/source_dataset_size"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		acct_error err;
		int rc;
		json_t *a = call(srv_acct_calibrate, cases[i].body, &rc, &err);

		cr_expect_null(a);
		cr_expect_eq(rc, ACCT_EINVAL);
		cr_expect_str_eq(err.where, cases[i].where);
		cr_expect(strstr(err.text, "cannot be calibrated"), "%s", err.text);
	}
}

/*
 * A solved field named epsilon (the exponential mechanism's) is in "value"
 * and in the completed "event", and the answer's "epsilon" stays the
 * epsilon reached: it had overwritten the solved value, and a client that
 * put that number back into its event went over the target (at most
 * 1.0035 for a target of 1 under rdp).  The completed event, priced again,
 * is at most the target, and its epsilon is "value".
 */
Test(routes, calibrate_answers_a_field_named_epsilon_in_value)
{
	static const char *const bodies[] = {
		"{\"template\":{\"type\":\"exponential_mechanism\",\"epsilon\":null},"
		"\"epsilon\":1,\"delta\":1e-5,\"accountant\":\"rdp\"}",
		"{\"template\":{\"type\":\"permute_and_flip\",\"epsilon\":null},"
		"\"epsilon\":1,\"delta\":1e-5,\"accountant\":\"zcdp\"}",
		"{\"template\":{\"type\":\"self_composed\",\"count\":10,\"event\":{\"type\":"
		"\"epsilon_delta\",\"epsilon\":null,\"delta\":1e-7}},\"epsilon\":1,\"delta\":1e-5,"
		"\"accountant\":\"basic\"}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		json_t *a, *again, *body = json_loads(bodies[i], 0, NULL), *q;
		const json_t *ev;
		acct_error err;
		double value;
		char *text;
		int rc;

		acct_error_init(&err);
		a = call(srv_acct_calibrate, bodies[i], &rc, &err);
		cr_assert_eq(rc, 0, "%s: %s", bodies[i], err.text);
		value = json_real_value(json_object_get(a, "value"));
		ev = json_object_get(a, "event");
		cr_expect(value > 0 && value < 1, "%s: value %g", bodies[i], value);
		cr_expect_leq(json_real_value(json_object_get(a, "epsilon")), 1.0);
		/* The event is the template with the value where the null was. */
		if (i < 2)
			cr_expect_eq(json_real_value(json_object_get(ev, "epsilon")), value);
		else
			cr_expect_eq(json_real_value(json_object_get(json_object_get(ev, "event"),
								 "epsilon")),
				     value);
		q = json_pack("{s:O, s:f, s:O}", "event", ev, "delta", 1e-5, "accountant",
			      json_object_get(body, "accountant"));
		text = json_dumps(q, 0);
		cr_assert_not_null(text);
		again = call(srv_acct_epsilon, text, &rc, &err);
		free(text);
		cr_assert_eq(rc, 0, "%s", err.text);
		cr_expect_leq(json_real_value(json_object_get(again, "epsilon")), 1.0, "%s", bodies[i]);
		json_decref(again);
		json_decref(q);
		json_decref(body);
		json_decref(a);
	}
}

/*
 * The rdp and compare routes price under the body's "neighbor".
 * Randomized response is defined under replace only, at the divergence of
 * test_rr_renyi and, under basic composition, epsilon ln(1 + k (1 - p) / p) =
 * ln 13 for p = 1/4, k = 4 (Kairouz, Oh, Viswanath 2016); Poisson
 * sampling is accounted under add/remove only (Mironov, Talwar, Zhang
 * 2019).  Each route answers under the event's relation and refuses it
 * under the other.
 */
Test(routes, rdp_and_compare_take_the_bodys_relation)
{
	static const char rr[] = "{\"type\":\"randomized_response\",\"noise_parameter\":0.25,"
				 "\"num_buckets\":4}";
	static const char pois[] = "{\"type\":\"poisson_sampled\",\"sampling_probability\":0.5,"
				   "\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}";
	static const struct {
		const char *event, *neighbor;
		bool answered;
	} cases[] = {
		{rr, "replace", true},
		{rr, "add_remove", false},
		{pois, "add_remove", true},
		{pois, "replace", false},
	};
	char body[512];
	acct_error err;
	json_t *a;
	int rc;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(body, sizeof(body), "{\"event\":%s,\"orders\":[2,4],\"neighbor\":\"%s\"}",
			 cases[i].event, cases[i].neighbor);
		a = call(srv_acct_rdp, body, &rc, &err);
		cr_assert_eq(rc, cases[i].answered ? 0 : ACCT_EUNSUPPORTED, "rdp case %zu: %s", i,
			     err.text);
		if (rc == 0 && cases[i].event == rr)
			for (size_t k = 0; k < 2; k++) {
				double order = k ? 4.0 : 2.0, want = test_rr_renyi(0.25, 4.0, order);
				double got = json_real_value(json_array_get(json_object_get(a, "rdp"), k));

				cr_assert(fabs(got - want) <= 1e-12 * want, "order %g: %.17g, want %.17g",
					  order, got, want);
			}
		cr_assert(rc != 0 || json_array_size(json_object_get(a, "rdp")) == 2, "case %zu", i);
		json_decref(a);

		snprintf(body, sizeof(body), "{\"event\":%s,\"delta\":1e-5,\"neighbor\":\"%s\"}",
			 cases[i].event, cases[i].neighbor);
		a = call(srv_acct_compare, body, &rc, &err);
		cr_assert_eq(rc, cases[i].answered ? 0 : ACCT_EUNSUPPORTED, "compare case %zu: %s", i,
			     err.text);
		if (rc == 0) {
			const json_t *eps = json_object_get(a, "epsilon");

			cr_assert_str_eq(json_string_value(json_object_get(a, "neighbor")),
					 cases[i].neighbor);
			if (cases[i].event == rr)
				cr_assert(fabs(json_real_value(json_object_get(eps, "basic")) -
					       log(13.0)) <= 8 * DBL_EPSILON * log(13.0),
					  "basic: %g", json_real_value(json_object_get(eps, "basic")));
			else
				cr_assert(json_real_value(json_object_get(eps, "rdp")) > 0.0,
					  "a sampled Gaussian is priced by rdp");
		}
		json_decref(a);
	}
}

/* ---- dpgate check ------------------------------------------------------------ */

static int run_check(const char *policy, bool json)
{
	char path[] = "/tmp/dpgate-check-XXXXXX";
	int fd = mkstemp(path), rc;
	char *argv[] = {"check", path, json ? "--json" : NULL, NULL};
	FILE *f;

	cr_assert(fd >= 0);
	f = fdopen(fd, "w");
	fputs(policy, f);
	fclose(f);
	rc = srv_check_main(json ? 3 : 2, argv);
	unlink(path);
	return rc;
}

/* What the test's check wrote to its redirected stdout, NUL-terminated in
 * buf (size bytes); a report that is missing or empty fails the test. */
static void read_report(char *buf, size_t size)
{
	FILE *f;
	size_t n;

	fflush(stdout);
	f = cr_get_redirected_stdout();
	cr_assert(f);
	n = fread(buf, 1, size - 1, f);
	cr_assert(n > 0);
	buf[n] = '\0';
}

/*
 * A basic ledger prices a Gaussian composition at the least of rdp, zcdp
 * and pld.  5000 Gaussians of multiplier 10 at delta 1e-12 cost exactly
 * 74.0481 (one Gaussian of multiplier 10 / sqrt(5000), Balle and Wang's
 * curve in long double), so a budget of 74.03 cannot hold them; pld's
 * rounding had priced them at 74.0172 and the plan fitted.
 */
Test(check, pld_rounding_does_not_undercharge, .init = cr_redirect_stdout)
{
	double exact = test_gauss_exact_eps_l(10.0 / sqrt(5000.0), 1e-12);

	cr_assert(exact > 74.03, "exact %.12g", exact);
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"adult\",\"budget\":{\"epsilon\":74.03,"
			       "\"delta\":1e-11},\"accountant\":\"basic\",\"delta_share\":1e-12,"
			       "\"planned\":[{\"name\":\"g\",\"repeat\":1,\"event\":{\"type\":"
			       "\"self_composed\",\"count\":5000,\"event\":{\"type\":\"gaussian\","
			       "\"noise_multiplier\":10}}}]}]}", false), 1);
}

/*
 * The text report names the planned release that did not fit.  Closed form
 * under basic composition: Laplace with b = 4 costs 1/4, so "ok" (x4) spends
 * 1 of the budget 2 and "q" (x9) would cost 9/4 = 2.25 on its own; "later"
 * is never charged.
 */
Test(check, text_names_the_release_that_does_not_fit, .init = cr_redirect_stdout)
{
	char buf[4096] = "";

	cr_assert_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"accountant\":\"basic\","
			       "\"budget\":{\"epsilon\":2,\"delta\":0},\"planned\":["
			       "{\"name\":\"ok\",\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4},"
			       "\"repeat\":4},"
			       "{\"name\":\"q\",\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4},"
			       "\"repeat\":9},"
			       "{\"name\":\"later\",\"event\":{\"type\":\"laplace\",\"noise_multiplier\":"
			       "4}}]}]}",
			       false),
		     1);
	read_report(buf, sizeof(buf));
	cr_expect(strstr(buf, "EXCEEDS"), "%s", buf);
	cr_expect(strstr(buf, "  does not fit: /datasets/0/planned/1 \"q\" x9, epsilon 2.25 alone,"
			      " after spending 1 of 2; nothing after it is charged\n"),
		  "%s", buf);
	cr_expect_null(strstr(buf, "later"), "%s", buf);
}

/* A basic ledger with a Gaussian planned and no delta share: the plan
 * cannot run (1), and the refusal names the policy's own field,
 * /datasets/0/delta_share (it named a request's "delta"). */
Test(check, a_missing_delta_share_is_named_as_the_policy_field, .init = cr_redirect_stdout)
{
	char buf[4096] = "";

	cr_assert_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"accountant\":\"basic\","
			       "\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"planned\":[{\"name\":\"g\","
			       "\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}]}]}",
			       true),
		     1);
	read_report(buf, sizeof(buf));
	cr_expect(strstr(buf, "\"where\": \"/datasets/0/delta_share\""), "%s", buf);
	cr_expect(strstr(buf, "delta_share"), "%s", buf);
}

Test(check, exit_codes)
{
	/* 8 x Laplace(b=4) is exactly 2 under basic: fits a budget of 2. */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"accountant\":\"basic\","
			       "\"budget\":{\"epsilon\":2,\"delta\":0},\"planned\":[{\"name\":\"q\","
			       "\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4},\"repeat\":8}]}]}",
			       false), 0);
	/* ... and a ninth does not fit. */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"accountant\":\"basic\","
			       "\"budget\":{\"epsilon\":2,\"delta\":0},\"planned\":[{\"name\":\"q\","
			       "\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4},\"repeat\":9}]}]}",
			       true), 1);
	/* DP-SGD fits an rdp budget of 3 at 1e-5 (rdp gives about 1.04). */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"m\",\"budget\":{\"epsilon\":3,\"delta\":1e-5},"
			       "\"planned\":[{\"event\":{\"type\":\"self_composed\",\"count\":10000,"
			       "\"event\":{\"type\":\"poisson_sampled\",\"sampling_probability\":0.01,"
			       "\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":4}}}}]}]}", false), 0);
	/* A sampled Gaussian on a zcdp ledger cannot run: 1. */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"z\",\"accountant\":\"zcdp\",\"budget\":"
			       "{\"epsilon\":3,\"delta\":1e-5},\"planned\":[{\"event\":{\"type\":"
			       "\"poisson_sampled\",\"sampling_probability\":0.01,\"event\":{\"type\":"
			       "\"gaussian\",\"noise_multiplier\":4}}}]}]}", false), 1);
	/* Bad policies: 2. */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"budget\":{\"epsilon\":-1,\"delta\":0},"
			       "\"planned\":[]}]}", false), 2);
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"budget\":{\"epsilon\":1,\"delta\":1e-5},"
			       "\"planned\":[{\"event\":{\"type\":\"nope\"}}]}]}", false), 2);
	cr_expect_eq(run_check("not json", false), 2);
	/* The format's version is 1, when a policy names it. */
	cr_expect_eq(run_check("{\"version\":1,\"datasets\":[]}", false), 0);
	cr_expect_eq(run_check("{\"version\":\"x\",\"datasets\":[]}", false), 2);
	cr_expect_eq(run_check("{\"version\":2,\"datasets\":[]}", false), 2);
	/* Budgets the server refuses to create: epsilon above 10^6, and rdp
	 * filter orders at which the budget admits nothing. */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"budget\":{\"epsilon\":2e6,"
			       "\"delta\":1e-5},\"planned\":[]}]}", false), 2);
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a\",\"budget\":{\"epsilon\":0.01,"
			       "\"delta\":1e-10},\"filter_orders\":[1.02,1.05],\"planned\":[]}]}",
			       false), 2);
	/* An event nested as deep as events go, planned twice, is two charges
	 * of it (it was wrapped once more, past the depth, and refused). */
	{
		char policy[1024] = "{\"datasets\":[{\"id\":\"a\",\"accountant\":\"basic\","
				    "\"budget\":{\"epsilon\":2,\"delta\":0},\"planned\":[{\"repeat\":2,"
				    "\"event\":";
		size_t n = strlen(policy);

		for (int i = 1; i < DPG_MAX_EVENT_DEPTH; i++)
			n += (size_t)snprintf(policy + n, sizeof(policy) - n,
					      "{\"type\":\"self_composed\",\"count\":1,\"event\":");
		n += (size_t)snprintf(policy + n, sizeof(policy) - n,
				      "{\"type\":\"laplace\",\"noise_multiplier\":1}");
		for (int i = 1; i < DPG_MAX_EVENT_DEPTH; i++)
			n += (size_t)snprintf(policy + n, sizeof(policy) - n, "}");
		snprintf(policy + n, sizeof(policy) - n, "}]}]}");
		cr_expect_eq(run_check(policy, true), 0, "%s", policy);
	}
	/* One dataset listed twice: each entry alone fits (4 x Laplace(b=4) =
	 * 1 of 2), together they are exactly the budget plus one more: checked
	 * apart they both passed (exit 0); a bad policy now (2). */
	cr_expect_eq(run_check("{\"datasets\":["
			       "{\"id\":\"a\",\"accountant\":\"basic\",\"budget\":{\"epsilon\":2,\"delta\":0},"
			       "\"planned\":[{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4},\"repeat\":5}]},"
			       "{\"id\":\"a\",\"accountant\":\"basic\",\"budget\":{\"epsilon\":2,\"delta\":0},"
			       "\"planned\":[{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":4},\"repeat\":5}]}]}",
			       false), 2);
	/* An id the server would refuse. */
	cr_expect_eq(run_check("{\"datasets\":[{\"id\":\"a b/../x\",\"budget\":{\"epsilon\":1,"
			       "\"delta\":1e-5},\"planned\":[]}]}", false), 2);
}

/*
 * A policy prices each dataset's plan under that dataset's own relation.
 * Randomized response (p = 0.25, k = 4) is defined under replace only; its
 * basic price there is ln(1 + k (1 - p) / p) = ln 13 (Kairouz, Oh,
 * Viswanath 2016; docs/concepts.md), here twice.  Poisson sampling is
 * accounted under add/remove only, sampling without replacement under
 * replace only (Wang, Balle, Kasiviswanathan 2019).  Each dataset takes its
 * relation's events and refuses the other's, naming the planned event.
 */
Test(check, each_dataset_is_priced_under_its_own_relation, .init = cr_redirect_stdout)
{
	static const char rr[] = "{\"type\":\"randomized_response\",\"noise_parameter\":0.25,"
				 "\"num_buckets\":4}";
	static const char pois[] = "{\"type\":\"poisson_sampled\",\"sampling_probability\":0.5,"
				   "\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}";
	static const char wor[] = "{\"type\":\"sampled_without_replacement\","
				  "\"source_dataset_size\":10,\"sample_size\":5,\"event\":{\"type\":"
				  "\"gaussian\",\"noise_multiplier\":2}}";
	static const struct {
		const char *neighbor;
		bool fits;
		const char *where;
	} want[] = {
		{"replace", true, NULL},
		{"add_remove", true, NULL},
		{"replace", false, "/datasets/2/planned/2/event"},
		{"add_remove", false, "/datasets/3/planned/0/event"},
		{"add_remove", false, "/datasets/4/planned/0/event"},
	};
	char policy[4096], buf[16384] = "";
	const json_t *ds, *events;
	json_t *rep;
	double e0, rr_eps = log(13.0);

	snprintf(policy, sizeof(policy),
		 "{\"datasets\":["
		 "{\"id\":\"swap\",\"accountant\":\"basic\",\"neighbor\":\"replace\","
		 "\"budget\":{\"epsilon\":20,\"delta\":0},\"planned\":[{\"event\":%s,\"repeat\":2}]},"
		 "{\"id\":\"addrem\",\"budget\":{\"epsilon\":20,\"delta\":1e-5},"
		 "\"planned\":[{\"event\":%s}]},"
		 "{\"id\":\"swap_rdp\",\"neighbor\":\"replace\",\"budget\":{\"epsilon\":20,"
		 "\"delta\":1e-5},\"planned\":[{\"event\":%s},{\"event\":%s},{\"event\":%s}]},"
		 "{\"id\":\"addrem_rr\",\"accountant\":\"basic\",\"neighbor\":\"add_remove\","
		 "\"budget\":{\"epsilon\":20,\"delta\":0},\"planned\":[{\"event\":%s}]},"
		 "{\"id\":\"addrem_wor\",\"budget\":{\"epsilon\":20,\"delta\":1e-5},"
		 "\"planned\":[{\"event\":%s}]}]}",
		 rr, pois, wor, rr, pois, rr, wor);
	cr_assert_eq(run_check(policy, true), 1);
	read_report(buf, sizeof(buf));
	rep = json_loads(buf, 0, NULL);
	cr_assert_not_null(rep, "%s", buf);
	ds = json_object_get(rep, "datasets");
	cr_assert_eq(json_array_size(ds), 5, "%s", buf);
	for (size_t i = 0; i < 5; i++) {
		const json_t *d = json_array_get(ds, i);

		cr_expect_str_eq(json_string_value(json_object_get(d, "neighbor")), want[i].neighbor,
				 "dataset %zu", i);
		cr_expect_eq(json_is_true(json_object_get(d, "fits")), want[i].fits, "dataset %zu: %s",
			     i, buf);
		if (want[i].where)
			cr_expect_str_eq(json_string_value(json_object_get(json_object_get(d, "error"),
									   "where")),
					 want[i].where, "dataset %zu", i);
		else
			cr_expect_null(json_object_get(d, "error"), "dataset %zu: %s", i, buf);
	}
	/* The two responses on the basic ledger: 2 ln 13, as the report
	 * prints it (ten significant digits). */
	events = json_object_get(json_array_get(ds, 0), "events");
	e0 = json_number_value(json_object_get(json_array_get(events, 0), "epsilon"));
	cr_expect(fabs(e0 - 2 * rr_eps) <= 1e-9 * 2 * rr_eps, "2 x rr priced %.17g, want %.17g", e0,
		  2 * rr_eps);
	json_decref(rep);
}

/* ---- prices round upward ------------------------------------------------ */

static acct_event *zcdp_event(double rho)
{
	acct_event *e = acct_event_new(ACCT_EV_ZCDP);

	e->u.zcdp.rho = rho;
	return e;
}

static acct_event *composed_pair(acct_event *a, acct_event *b)
{
	acct_event *ev = acct_event_new(ACCT_EV_COMPOSED);

	ev->u.composed.events = calloc(2, sizeof(acct_event *));
	cr_assert_not_null(ev->u.composed.events);
	ev->u.composed.n = 2;
	ev->u.composed.events[0] = a;
	ev->u.composed.events[1] = b;
	return ev;
}

/* Knuth's TwoSum: the exact error of fl(a + b), written here for the test. */
static double sum_error(double a, double b)
{
	double s = a + b, bp = s - a, ap = s - bp;

	return (a - ap) + (b - bp);
}

/* Whether x >= a + b exactly: above fl(a + b), or equal to it with the
 * rounding not below the exact sum. */
static bool at_least_exact_sum(double x, double a, double b)
{
	double s = a + b;

	return x > s || (x == s && sum_error(a, b) <= 0.0);
}

/*
 * A composition of zCDP parts costs at least the exact sum of their rho
 * (Bun, Steinke 2016, Lemma 2.3), on the zCDP price and on the RDP curve
 * (alpha rho at every order; the orders here are powers of two, so that
 * scaling by them is exact).  Round-to-nearest sums fall below it for
 * about half of all pairs, e.g. 0.0109842 + 0.0114267.
 */
Test(rounding, composed_zcdp_parts_cost_at_least_their_exact_sum)
{
	static const double orders[] = {2.0, 4.0, 64.0};
	unsigned seed = 12345;
	int below_by_nearest = 0;

	for (int i = 0; i < 2000; i++) {
		double a = i == 0 ? 0.0109842 : (double)rand_r(&seed) / RAND_MAX * 0.05;
		double b = i == 0 ? 0.0114267 : (double)rand_r(&seed) / RAND_MAX * 0.05;
		acct_event *ev = composed_pair(zcdp_event(a), zcdp_event(b));
		double rho, rdp[3];
		acct_error err;

		acct_error_init(&err);
		if (i == 0)
			cr_assert_gt(sum_error(a, b), 0.0, "the first pair's nearest sum is below");
		below_by_nearest += sum_error(a, b) > 0.0;
		cr_assert_eq(acct_zcdp_rho(ev, ACCT_ADD_REMOVE, &rho, &err), 0, "%s", err.text);
		cr_assert(at_least_exact_sum(rho, a, b), "%.17g + %.17g priced %.17g", a, b, rho);
		cr_assert_leq(rho, nextafter(a + b, INFINITY));
		cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, orders, 3, rdp, NULL, &err), 0, "%s",
			     err.text);
		for (int k = 0; k < 3; k++)
			cr_assert(at_least_exact_sum(rdp[k] / orders[k], a, b),
				  "order %g: %.17g + %.17g priced %.17g", orders[k], a, b, rdp[k]);
		acct_event_free(ev);
	}
	cr_assert_gt(below_by_nearest, 500, "the sweep exercises sums that round down");
}

/*
 * The Gaussian's rho = 1 / (2 sigma^2) rounded upward: with sigma = k/64
 * (k < 2^20), sigma^2 and 2 sigma^2 are exact doubles, so
 * fma(rho, 2 sigma^2, -1) has the sign of rho - 1/(2 sigma^2).
 */
Test(rounding, gaussian_rho_is_at_least_one_over_two_sigma_squared)
{
	for (int k = 1; k <= 4000; k++) {
		double s = k / 64.0, two_s2 = 2.0 * s * s, rho;
		acct_event *ev = gauss(s);
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_zcdp_rho(ev, ACCT_ADD_REMOVE, &rho, &err), 0, "%s", err.text);
		cr_assert_geq(fma(rho, two_s2, -1.0), 0.0, "sigma %g: rho %.17g", s, rho);
		cr_assert_leq(rho, nextafter(1.0 / two_s2, INFINITY), "sigma %g", s);
		acct_event_free(ev);
	}
}

/*
 * The RDP filter admits while the spent RDP at some order alpha is at most
 * its bound B_alpha; at the end that order's conversion (Balle et al. 2020,
 * Thm. 21, as in the filter: eps = B + log1p(-1/a) - (log(delta/n) +
 * log a)/(a - 1), n orders sharing delta) must not exceed eps_B.  Checked
 * here in long double (11 more bits) with the exact delta_B / n, over a
 * sweep of budgets: the bound's own rounding must not push it past.
 */
Test(rounding, renyi_filter_bounds_convert_within_the_budget)
{
	static const double deltas[] = {1e-5, 1e-8, 1e-3, 3.3e-7, 0.5, 0.99};
	int bounds = 0;

	for (size_t d = 0; d < sizeof(deltas) / sizeof(deltas[0]); d++) {
		for (int k = 1; k <= 400; k++) {
			double eps = k * 0.0371 + (k % 7) / 3.0;
			acct_filter f;
			acct_error err;

			acct_error_init(&err);
			cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_RDP, ACCT_ADD_REMOVE, eps,
						      deltas[d], &err), 0, "%s", err.text);
			for (unsigned i = 0; i < f.n_orders; i++) {
				long double a = f.orders[i], dshare = (long double)deltas[d] / f.n_orders;
				long double conv = (long double)f.bound[i] + log1pl(-1.0L / a) -
						   (logl(dshare) + logl(a)) / (a - 1.0L);

				if (f.bound[i] == 0.0)
					continue;
				bounds++;
				cr_assert(conv <= (long double)eps,
					  "eps_B %.17g delta %g order %g: B %.17g converts to %.21Lg",
					  eps, deltas[d], f.orders[i], f.bound[i], conv);
			}
		}
	}
	cr_assert_gt(bounds, 10000);
}

/* zCDP's improved conversion at order a (Canonne, Kamath, Steinke 2020,
 * Prop. 12 as the filter takes it), in long double. */
static long double zcdp_conversion_at(long double rho, long double delta, long double a)
{
	return a * rho + log1pl(-1.0L / a) - (logl(delta) + logl(a)) / (a - 1.0L);
}

/*
 * rho_B must convert to at most eps_B: the smallest conversion over a fine
 * scan of orders (any order is a valid conversion), in long double, is at
 * most eps_B; and rho_B gives away little: twice 2^-40 of it more converts
 * above eps_B at every scanned order near the best.
 */
Test(rounding, zcdp_rho_budget_converts_within_the_budget)
{
	static const double deltas[] = {1e-5, 1e-8, 1e-3};

	for (size_t d = 0; d < sizeof(deltas) / sizeof(deltas[0]); d++) {
		for (int k = 1; k <= 60; k++) {
			double eps = k * 0.173;
			double rho = acct_zcdp_rho_budget(eps, deltas[d]);
			long double best = INFINITY, best_a = 0;

			long double lo, hi, step = 27.0L / 20000;

			cr_assert_gt(rho, 0.0);
			for (int i = 0; i <= 20000; i++) {
				long double t = -9.0L + step * i;
				long double v = zcdp_conversion_at(rho, deltas[d], 1.0L + expl(t));

				if (v < best) {
					best = v;
					best_a = t;
				}
			}
			/* Ternary search on t = log(a - 1) next to the best scanned
			 * order: the scan alone misses the minimum by ~1e-8. */
			lo = best_a - step;
			hi = best_a + step;
			for (int it = 0; it < 200; it++) {
				long double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;

				if (zcdp_conversion_at(rho, deltas[d], 1.0L + expl(m1)) <
				    zcdp_conversion_at(rho, deltas[d], 1.0L + expl(m2)))
					hi = m2;
				else
					lo = m1;
			}
			best_a = 1.0L + expl(0.5L * (lo + hi));
			best = fminl(best, zcdp_conversion_at(rho, deltas[d], best_a));
			cr_assert(best <= (long double)eps, "eps_B %g delta %g: rho_B %.17g converts to %.21Lg",
				  eps, deltas[d], rho, best);
			cr_assert(best > (long double)eps * (1.0L - 1e-9L),
				  "eps_B %g delta %g: rho_B %.17g converts to only %.21Lg (order %Lg)",
				  eps, deltas[d], rho, best, best_a);
		}
	}
}

/*
 * A Poisson-sampled generic zcdp event has no RDP bound here: its RDP
 * curve is the Gaussian's, but subsampling depends on more than that curve,
 * so it is not priced as the sampled Gaussian.  Refused (an unsupported
 * event, the field named); the sampled Gaussian of the same
 * curve (1/sigma^2 = 2 rho) is priced, by the closed form at order 2:
 * log(1 + q^2 (e^(1/sigma^2) - 1)) (Mironov, Talwar, Zhang 2019, Sec. 3.3).
 */
Test(rdp, a_sampled_zcdp_event_is_refused_and_the_sampled_gaussian_priced)
{
	const double order = 2.0, q = 0.1, rho = 0.5;
	acct_event *z = acct_event_new(ACCT_EV_POISSON_SAMPLED);
	acct_event *g = acct_event_new(ACCT_EV_POISSON_SAMPLED);
	acct_error err;
	double r;

	z->u.poisson_sampled.sampling_probability = q;
	z->u.poisson_sampled.event = acct_event_new(ACCT_EV_ZCDP);
	z->u.poisson_sampled.event->u.zcdp.rho = rho;
	g->u.poisson_sampled.sampling_probability = q;
	g->u.poisson_sampled.event = gauss(1.0); /* 1/sigma^2 = 1 = 2 rho */
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(z, ACCT_ADD_REMOVE, &order, 1, &r, NULL, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/event/event");
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(g, ACCT_ADD_REMOVE, &order, 1, &r, NULL, &err), 0, "%s", err.text);
	cr_assert_float_eq(r, log1p(q * q * expm1(1.0)), 1e-12);
	acct_event_free(z);
	acct_event_free(g);
}
