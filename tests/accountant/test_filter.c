/*
 * test_filter.c: upward-rounded sums and the basic ledger filter.
 */
#include <float.h>
#include <math.h>

#include <criterion/criterion.h>

#include "acct.h"

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

Test(basic_filter, admits_exactly_the_budget)
{
	acct_filter f;
	acct_cost spent, c;
	acct_error err;
	acct_event *ev = acct_event_epsilon_delta(0.125, 1e-7);
	int admitted = 0;

	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1.0, 1e-5, &err), 0);
	acct_filter_zero(&f, &spent);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0);
	for (int i = 0; i < 20; i++) {
		acct_cost next = spent;

		acct_cost_add_up(&next, &c);
		if (!acct_filter_within(&f, &next))
			continue;
		spent = next;
		admitted++;
	}
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

Test(basic_filter, laplace_is_pure_epsilon)
{
	acct_filter f;
	acct_cost c;
	acct_error err;
	acct_event *ev = acct_event_new(ACCT_EV_LAPLACE);

	ev->u.laplace.noise_multiplier = 4.0;
	acct_error_init(&err);
	cr_assert_eq(acct_filter_init(&f, ACCT_LEDGER_BASIC, ACCT_ADD_REMOVE, 1.0, 0.0, &err), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0);
	cr_assert_eq(c.v[0], 0.25);
	cr_assert_eq(c.v[1], 0.0);
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
