/*
 * test_filter.c: upward-rounded sums and the basic ledger filter.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "acct.h"
#include "test_admit.h"
#include "test_events.h"

static acct_cost cost2(double e, double d)
{
	acct_cost c = {.n = 2};

	c.v[0] = e;
	c.v[1] = d;
	return c;
}

Test(cost, add_up_never_rounds_down)
{
	/* 1 + 2^-60 is not representable; the upward sum is the next double. */
	acct_cost a = cost2(1.0, 0.0), b = cost2(ldexp(1.0, -60), 0.0);

	acct_cost_add_up(&a, &b);
	cr_assert_eq(a.v[0], nextafter(1.0, 2.0));
	/* An exact sum stays exact. */
	a = cost2(0.5, 0.0);
	b = cost2(0.25, 0.0);
	acct_cost_add_up(&a, &b);
	cr_assert_eq(a.v[0], 0.75);
}

Test(cost, sub_up_clamps_at_zero)
{
	acct_cost a = cost2(0.25, 1e-6), b = cost2(0.5, 1e-6);

	acct_cost_sub_up(&a, &b);
	cr_assert_eq(a.v[0], 0.0);
	cr_assert_eq(a.v[1], 0.0);
}

Test(cost, infinite_coordinates_stay_infinite)
{
	acct_cost a = cost2(INFINITY, 1.0), b = cost2(INFINITY, 0.5);

	acct_cost_sub_up(&a, &b);
	cr_assert(isinf(a.v[0]), "inf - inf must not become a finite amount");
	cr_assert_eq(a.v[1], 0.5);
	acct_cost_add_up(&a, &b);
	cr_assert(isinf(a.v[0]));
}

Test(basic_filter, admits_exactly_the_budget)
{
	acct_filter f;
	acct_cost spent, c;
	acct_error err;
	acct_event *ev = acct_event_epsilon_delta(0.125, 1e-7);
	int admitted;

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1.0, 1e-5, &err), 0);
	acct_filter_zero(&f, &spent);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0);
	admitted = test_admit_repeatedly(&f, &c, 20, 1.0, &spent);
	/* 8 x 0.125 = 1 exactly; the ninth would exceed epsilon. */
	cr_assert_eq(admitted, 8);
	cr_assert_eq(acct_filter_epsilon(&f, &spent), 1.0);
	acct_event_free(ev);
}

Test(basic_filter, delta_binds_too)
{
	acct_filter f;
	acct_cost c, total;
	acct_error err;
	acct_event *ev = acct_event_self_composed(11, acct_event_epsilon_delta(0.01, 1e-6));

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 10.0, 1e-5, &err), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0);
	/* 11 x 1e-6 > 1e-5 although 11 x 0.01 is far below epsilon. */
	acct_filter_zero(&f, &total);
	acct_cost_add_up(&total, &c);
	cr_assert(!acct_filter_within(&f, &total));
	cr_assert_geq(c.v[1], 11e-6);
	acct_event_free(ev);
}

/* A Gaussian on a basic ledger needs a delta share in (0, 1): none (0) and
 * 1 are refused at /delta, each saying which it was. */
Test(basic_filter, a_gaussian_needs_a_delta_share_below_one)
{
	acct_filter f;
	acct_cost c;
	acct_error err;
	acct_event *ev = acct_event_new(ACCT_EV_GAUSSIAN);

	ev->u.gaussian.noise_multiplier = 2.0;
	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 10.0, 1e-5, &err), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/delta");
	cr_assert(strstr(err.text, "name one"), "%s", err.text);
	acct_error_init(&err);
	cr_assert_eq(acct_filter_price(&f, ev, 1.0, &c, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/delta");
	cr_assert(strstr(err.text, "below 1 (\"delta\" is 1)"), "%s", err.text);
	acct_error_init(&err);
	cr_assert_eq(acct_filter_price(&f, ev, 1e-6, &c, &err), 0, "%s", err.text);
	acct_event_free(ev);
}

Test(basic_filter, laplace_is_pure_epsilon)
{
	acct_filter f;
	acct_cost c;
	acct_error err;
	acct_event *ev = test_laplace(4.0);

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1.0, 0.0, &err), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0);
	cr_assert_eq(c.v[0], 0.25);
	cr_assert_eq(c.v[1], 0.0);
	acct_event_free(ev);
}

/*
 * 1/b rounded upward for every scale b: e * b >= 1 exactly, which
 * fma(e, b, -1) decides (one rounding of the exact e * b - 1 keeps its
 * sign), and e is at most one ulp above 1/b.  fl(1/3) * 3 rounds to 1
 * although fl(1/3) < 1/3: b = 3 is among the scales.
 */
Test(basic_filter, laplace_epsilon_is_one_over_b_rounded_up)
{
	acct_filter f;
	acct_cost c;
	acct_error err;
	acct_event *ev = acct_event_new(ACCT_EV_LAPLACE);
	int below_before = 0;

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1e9, 0.0, &err), 0);
	for (int i = 0; i < 3000; i++) {
		double b = i == 0 ? 3.0 : 0.001 + (double)i * 0.0137;

		ev->u.laplace.noise_multiplier = b;
		cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0);
		cr_assert(fma(c.v[0], b, -1.0) >= 0.0, "b = %.17g: %.17g is below 1/b", b, c.v[0]);
		cr_assert(c.v[0] <= nextafter(1.0 / b, INFINITY), "b = %.17g: %.17g", b, c.v[0]);
		/* The rule this replaced: bump only when fl(e * b) != 1. */
		{
			double e = 1.0 / b;

			if (e * b == 1.0 && fma(e, b, -1.0) < 0.0)
				below_before++;
		}
	}
	cr_assert_gt(below_before, 0, "the sweep holds scales the old rule priced too low");
	acct_event_free(ev);
}

Test(basic_filter, rejects_bad_budgets)
{
	acct_filter f;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 0.0, 0.0, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/budget/epsilon");
	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1.0, 1.0, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/budget/delta");
	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, NAN, 0.0, &err), ACCT_EINVAL);
}

Test(events, copy_is_deep)
{
	acct_event *a = acct_event_self_composed(3, acct_event_poisson_sampled(0.5, acct_event_epsilon_delta(1, 0)));
	acct_event *b = acct_event_copy(a);

	cr_assert_neq(a->u.self_composed.event, b->u.self_composed.event);
	cr_assert_eq(b->u.self_composed.event->u.poisson_sampled.event->u.epsilon_delta.epsilon, 1.0);
	acct_event_free(a);
	acct_event_free(b);
}

/* ---- pure-epsilon leaves on the basic ledger ---- */

static double basic_cost(acct_neighbor nb, acct_event *ev, int *ret_rc)
{
	acct_filter f;
	acct_cost c;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, nb, 10.0, 0.0, &err), 0);
	*ret_rc = acct_filter_price(&f, ev, 0.0, &c, &err);
	acct_event_free(ev);
	if (*ret_rc == 0)
		cr_assert_eq(c.v[1], 0.0, "a pure-DP leaf charges no delta");
	return *ret_rc == 0 ? c.v[0] : NAN;
}

static acct_event *dlap(double a, double d)
{
	acct_event *ev = acct_event_new(ACCT_EV_DISCRETE_LAPLACE);

	ev->u.discrete_laplace.noise_parameter = a;
	ev->u.discrete_laplace.sensitivity = d;
	return ev;
}

Test(basic_filter, discrete_laplace_is_a_times_sensitivity)
{
	/* pmf proportional to exp(-a|x|): loss a(|x-D| - |x|) <= a D. */
	static const struct { double a, d; } cases[] = {{0.5, 2}, {0.1, 3}, {1.0 / 3.0, 7}, {2.5, 1}};
	int rc;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long double exact = (long double)cases[i].a * (long double)cases[i].d;
		double e = basic_cost(ACCT_ADD_REMOVE, dlap(cases[i].a, cases[i].d), &rc);

		cr_assert_eq(rc, 0, "case %zu", i);
		cr_assert((long double)e >= exact, "case %zu: %.17g below a*D", i, e);
		cr_assert((long double)e <= exact * (1.0L + 4 * DBL_EPSILON), "case %zu: %.17g", i, e);
	}
	/* An exact product stays exact. */
	cr_assert_eq(basic_cost(ACCT_REPLACE, dlap(0.5, 2), &rc), 1.0);
}

Test(basic_filter, randomized_response_is_log_of_the_ratio)
{
	/* (1 - p + p/k) / (p/k) = 1 + k (1 - p) / p. */
	static const struct { double p; int64_t k; } cases[] = {
		{0.5, 4}, {0.3, 10}, {0.9, 2}, {1e-3, 1000000}, {0.7, 3},
	};
	int rc;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long double p = cases[i].p, k = (long double)cases[i].k;
		long double exact = logl(1.0L + k * (1.0L - p) / p);
		double e =
			basic_cost(ACCT_REPLACE, test_rand_response(cases[i].p, cases[i].k), &rc);

		cr_assert_eq(rc, 0, "case %zu", i);
		cr_assert((long double)e >= exact, "case %zu: %.17g below the exact epsilon", i, e);
		cr_assert((long double)e <= exact * (1.0L + 16 * DBL_EPSILON), "case %zu: %.17g", i, e);
	}
	/* ln 5 for p = 1/2, k = 4 (the stateless basic accountant agrees). */
	cr_assert_float_eq(basic_cost(ACCT_REPLACE, test_rand_response(0.5, 4), &rc), log(5.0),
			   1e-15);
	/* p = 1: the output ignores the input. */
	cr_assert_eq(basic_cost(ACCT_REPLACE, test_rand_response(1.0, 4), &rc), 0.0);
}

Test(basic_filter, randomized_response_needs_replace)
{
	int rc;

	cr_assert(isnan(basic_cost(ACCT_ADD_REMOVE, test_rand_response(0.5, 4), &rc)));
	cr_assert_eq(rc, ACCT_EUNSUPPORTED);
}

Test(basic_filter, composed_pure_leaves_add_up)
{
	acct_event *ev = acct_event_new(ACCT_EV_COMPOSED);
	int rc;

	ev->u.composed.n = 2;
	ev->u.composed.events = calloc(2, sizeof(acct_event *));
	ev->u.composed.events[0] = dlap(0.25, 4);
	ev->u.composed.events[1] = dlap(0.5, 1);
	cr_assert_eq(basic_cost(ACCT_ADD_REMOVE, ev, &rc), 1.5);
}

/*
 * acct_event_validate on events built in C (trainers and mechanisms build
 * theirs without the JSON parser, so this is their only check): each bad
 * field is named by its JSON pointer under the prefix, a good event passes.
 */
static void expect_invalid(acct_event *ev, const char *where)
{
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_event_validate_at(ev, ACCT_ADD_REMOVE, "/e", &err), ACCT_EINVAL);
	cr_assert_eq(err.code, ACCT_EINVAL);
	cr_assert_str_eq(err.where, where);
	acct_event_free(ev);
}

Test(validate, bad_fields_are_named)
{
	acct_event *ev;
	acct_error err;

	ev = acct_event_new(ACCT_EV_GAUSSIAN);
	ev->u.gaussian.noise_multiplier = 0.0;
	expect_invalid(ev, "/e/noise_multiplier");
	ev = acct_event_new(ACCT_EV_LAPLACE);
	ev->u.laplace.noise_multiplier = INFINITY;
	expect_invalid(ev, "/e/noise_multiplier");
	ev = acct_event_new(ACCT_EV_DISCRETE_GAUSSIAN);
	ev->u.discrete_gaussian.sigma = NAN;
	ev->u.discrete_gaussian.sensitivity = 1.0;
	expect_invalid(ev, "/e/sigma");
	ev = acct_event_new(ACCT_EV_DISCRETE_GAUSSIAN);
	ev->u.discrete_gaussian.sigma = 2.0;
	ev->u.discrete_gaussian.sensitivity = 1.5;
	expect_invalid(ev, "/e/sensitivity");
	ev = acct_event_new(ACCT_EV_DISCRETE_LAPLACE);
	ev->u.discrete_laplace.noise_parameter = 1.0;
	ev->u.discrete_laplace.sensitivity = 0.0;
	expect_invalid(ev, "/e/sensitivity");
	ev = acct_event_new(ACCT_EV_GNMAX);
	ev->u.gnmax.sigma = -1.0;
	expect_invalid(acct_event_self_composed(3, ev), "/e/event/sigma");

	/* The same nodes with good values pass. */
	ev = acct_event_new(ACCT_EV_DISCRETE_LAPLACE);
	ev->u.discrete_laplace.noise_parameter = 1.0;
	ev->u.discrete_laplace.sensitivity = 2.0;
	ev = acct_event_poisson_sampled(0.01, acct_event_self_composed(3, ev));
	acct_error_init(&err);
	cr_assert_eq(acct_event_validate_at(ev, ACCT_ADD_REMOVE, "/e", &err), 0, "%s", err.text);
	acct_event_free(ev);
}

/*
 * Directed products and quotients against the exact value: a product of two
 * doubles has at most 106 significant bits and fits a binary128 exactly
 * (113 bits, exponents down to -16382), so the comparison is exact; for the
 * quotient, q >= a / b with b > 0 is q * b >= a, again an exact product.
 * The factors span the range where fma can no longer see the rounding
 * error (products below 2^-970), where the old code rounded a positive
 * product of 1e-300 and 1e-300 down to 0.
 */
Test(round, products_and_quotients_bound_the_exact_value)
{
#ifdef __SIZEOF_FLOAT128__
	unsigned long long state = 0x9e3779b97f4a7c15ull;
	size_t zero_up = 0;

	for (int i = 0; i < 200000; i++) {
		double a, b, up, down, q;

		state = state * 6364136223846793005ull + 1442695040888963407ull;
		a = ldexp(1.0 + (double)(state >> 11) * 0x1p-53, (int)((state >> 33) % 1200) - 1074);
		state = state * 6364136223846793005ull + 1442695040888963407ull;
		b = ldexp(1.0 + (double)(state >> 11) * 0x1p-53, 100 - (int)((state >> 33) % 700));
		if (state >> 63)
			a = -a;
		up = acct_mul_up(a, b);
		down = acct_mul_down(a, b);
		cr_assert((__float128)up >= (__float128)a * (__float128)b, "up %a * %a", a, b);
		cr_assert((__float128)down <= (__float128)a * (__float128)b, "down %a * %a", a, b);
		/* Never across zero from the exact value's side. */
		cr_assert(a > 0 ? down >= 0.0 : up <= 0.0, "sign %a * %a", a, b);
		/* At most one ulp beyond the nearest result, two in the tiny range. */
		cr_assert_leq(up, nextafter(nextafter(a * b, INFINITY), INFINITY));
		if (a > 0 && a * b == 0.0)
			zero_up += up > 0.0;
		q = acct_div_up(a, b);
		cr_assert((__float128)q * (__float128)b >= (__float128)a, "div %a / %a", a, b);
	}
	cr_assert_gt(zero_up, 1000, "only %zu positive products that underflow to 0", zero_up);
	cr_assert_gt(acct_mul_up(1e-300, 1e-300), 0.0);
	cr_assert_lt(acct_mul_down(-1e-300, 1e-300), 0.0);
	cr_assert_eq(acct_mul_down(1e-300, 1e-300), 0.0);
	cr_assert_gt(acct_inv_sq_up(1e-300), 0.0);
	cr_assert_eq(acct_mul_up(0.0, 1e-300), 0.0);
	cr_assert_gt(acct_div_up(1e-300, 1e300), 0.0);
	cr_assert_eq(acct_div_up(0.0, 3.0), 0.0);
#else
	cr_skip_test("no binary128 type to compute the exact products in");
#endif
}

/* The loop acct_cost_add_up_times stands for. */
static double add_up_loop(double t, double c, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		t = acct_add_up(t, c);
	return t;
}

/*
 * n charges in one call leave exactly what n calls of acct_cost_add_up
 * leave: random starts and costs across binades (and costs far below the
 * total's ulp, which still move it one ulp a charge), counts to 10^5.
 */
Test(cost, add_up_times_is_the_loop_it_replaces)
{
	unsigned seed = 12345;

	for (int trial = 0; trial < 400; trial++) {
		double t = trial % 7 == 0 ? 0.0 : ldexp(1.0 + rand_r(&seed) / (double)RAND_MAX,
							 rand_r(&seed) % 80 - 60);
		double c = ldexp(1.0 + rand_r(&seed) / (double)RAND_MAX, rand_r(&seed) % 120 - 100);
		int64_t n = trial % 5 == 0 ? rand_r(&seed) % 100000 : rand_r(&seed) % 300;
		acct_cost a = cost2(t, c / 3), b = cost2(c, c / 7);

		acct_cost_add_up_times(&a, &b, n);
		cr_assert_eq(a.v[0], add_up_loop(t, c, n), "t %a c %a n %lld: %a", t, c, (long long)n,
			     a.v[0]);
		cr_assert_eq(a.v[1], add_up_loop(c / 3, c / 7, n), "t %a c %a n %lld", c / 3, c / 7,
			     (long long)n);
	}
	/* 10^8 charges of 0.1: the count DPG_MAX_COMPOSITION_COUNT allows. */
	{
		acct_cost a = cost2(0.0, 0.0), b = cost2(0.1, 0.0);

		acct_cost_add_up_times(&a, &b, 100000000);
		cr_assert_eq(a.v[0], add_up_loop(0.0, 0.1, 100000000));
		cr_assert_geq(a.v[0], 1e7);
	}
}
