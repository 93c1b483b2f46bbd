/*
 * test_rdp_work.c: pricing a subsampled Gaussian under rdp is bounded in
 * work.  Its RDP is +infinity above order 1e5 (an upper bound on any Renyi
 * divergence, so the curve stays sound); a request whose work at its
 * orders passes DPG_MAX_RDP_WORK is refused with ACCT_EUNSUPPORTED, at
 * "/orders" when one sampled event alone is too costly, at "/event" when
 * the composition is, before the work is done or as soon as it passes the
 * limit.  Before the bound, each of these took seconds to hours and was
 * answered.  The work units are counted as docs/accountants.md states: an
 * integer order alpha <= 1e5 costs alpha.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "acct.h"

/* The worst admitted request finishes well within this much CPU time
 * (about 0.25 s on an idle machine; docs/accountants.md). */
#define ADMITTED_SECONDS 1.0

/* The process's CPU time, not the wall clock: the limits bound work,
 * and a machine loaded by other builds stretches the wall clock alone. */
static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static acct_event *sampled(double q, double sigma)
{
	return acct_event_poisson_sampled(q, acct_event_gaussian(sigma));
}

/* The composition of n sampled Gaussians, all distinct (q0 + i * dq). */
static acct_event *distinct_sampled(size_t n, double q0, double dq, double sigma)
{
	acct_event **evs = calloc(n, sizeof(*evs)), *ev;

	cr_assert_not_null(evs);
	for (size_t i = 0; i < n; i++)
		evs[i] = sampled(q0 + (double)i * dq, sigma);
	ev = acct_event_composed(evs, n);
	free(evs);
	cr_assert_not_null(ev);
	return ev;
}

/* n consecutive integer orders, the highest `top`. */
static void orders_below(double *o, size_t n, double top)
{
	for (size_t i = 0; i < n; i++)
		o[i] = top - (double)i;
}

Test(rdp_work, sampled_gaussian_is_unbounded_above_order_1e5)
{
	static const double orders[] = {1e5, 100001, 250000.5, 1e6};
	acct_event *ev = sampled(0.01, 1.0);
	double r[4];
	acct_error err;
	double t0 = now();

	acct_error_init(&err);
	cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, orders, 4, r, NULL, &err), 0, "%s", err.text);
	cr_assert(isfinite(r[0]) && r[0] > 0.0, "rdp(1e5) = %g", r[0]);
	for (size_t i = 1; i < 4; i++)
		cr_assert(isinf(r[i]) && r[i] > 0.0, "rdp(%g) = %g", orders[i], r[i]);
	/* Only order 1e5 was summed: milliseconds, where the sum to order 1e6
	 * took about 40 ms per order. */
	cr_assert_lt(now() - t0, ADMITTED_SECONDS);
	acct_event_free(ev);
}

Test(rdp_work, orders_too_costly_for_one_sampled_gaussian_are_refused)
{
	double o[DPG_MAX_ORDERS], r[DPG_MAX_ORDERS];
	acct_event *ev = sampled(0.01, 1.0);
	acct_error err;
	double t0 = now();

	/* 256 orders just below 1e5: 2.56e7 units for the one leaf. */
	orders_below(o, DPG_MAX_ORDERS, 1e5);
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, o, DPG_MAX_ORDERS, r, NULL, &err),
		     ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/orders", "%s", err.text);
	cr_assert_lt(now() - t0, 0.1, "refused before the work, not after");
	acct_event_free(ev);
}

/*
 * The limit, by count: 256 consecutive orders up to N cost 256 N - 32640
 * units, at most 5e6 for N = 19658 and more for N = 19659.  The admitted
 * one finishes well under a second.
 */
Test(rdp_work, the_limit_admits_its_worst_case_quickly)
{
	double o[DPG_MAX_ORDERS], r[DPG_MAX_ORDERS];
	acct_event *ev = sampled(0.01, 1.0);
	acct_error err;
	double t0;

	cr_assert_eq(DPG_MAX_RDP_WORK, 5e6, "the orders below are chosen for this limit");
	orders_below(o, DPG_MAX_ORDERS, 19659);
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, o, DPG_MAX_ORDERS, r, NULL, &err),
		     ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/orders", "%s", err.text);
	orders_below(o, DPG_MAX_ORDERS, 19658);
	acct_error_init(&err);
	t0 = now();
	cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, o, DPG_MAX_ORDERS, r, NULL, &err), 0, "%s",
		     err.text);
	cr_assert_lt(now() - t0, ADMITTED_SECONDS);
	for (size_t i = 0; i < DPG_MAX_ORDERS; i++)
		cr_assert(isfinite(r[i]) && r[i] > 0.0);
	acct_event_free(ev);
}

/* 1000 distinct sampled Gaussians at the default orders: each is cheap,
 * together they pass the limit, which is counted before pricing. */
Test(rdp_work, too_many_distinct_sampled_gaussians_are_refused_at_event)
{
	size_t n;
	const double *o = acct_rdp_default_orders(&n);
	acct_event *ev = distinct_sampled(1000, 0.01, 1e-7, 0.7);
	double *r = calloc(n, sizeof(double));
	acct_options opt = {.accountant = ACCT_RDP, .neighbor = ACCT_ADD_REMOVE};
	acct_result res;
	acct_error err;
	double t0 = now();

	acct_error_init(&err);
	cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, o, n, r, NULL, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/event", "%s", err.text);
	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(ev, 1e-5, &opt, &res, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/event", "%s", err.text);
	acct_error_init(&err);
	cr_assert_eq(acct_delta(ev, 1.0, &opt, &res, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/event", "%s", err.text);
	cr_assert_lt(now() - t0, 0.1, "refused before the work, not after");
	free(r);
	acct_event_free(ev);
}

/*
 * The fractional series' length depends on the event (at q = 0.5 and a
 * large noise multiplier it runs to its 1e5 terms at low orders); what
 * cannot be counted before is counted as it runs, and the pricing stops at
 * the limit.  20 of them at the default orders took about 5 s before.
 */
Test(rdp_work, a_long_fractional_series_stops_at_the_limit)
{
	size_t n;
	const double *o = acct_rdp_default_orders(&n);
	acct_event *ev = distinct_sampled(20, 0.5, 1e-9, 1e4);
	double *r = calloc(n, sizeof(double));
	acct_error err;
	double t0 = now();

	acct_error_init(&err);
	cr_assert_eq(acct_rdp(ev, ACCT_ADD_REMOVE, o, n, r, NULL, &err), ACCT_EUNSUPPORTED);
	cr_assert_eq(strncmp(err.where, "/event", 6), 0, "%s: %s", err.where, err.text);
	cr_assert_lt(now() - t0, ADMITTED_SECONDS);
	free(r);
	acct_event_free(ev);
}

/* Sampling without replacement counts the same way. */
Test(rdp_work, sampling_without_replacement_is_bounded_too)
{
	double o[DPG_MAX_ORDERS], r[DPG_MAX_ORDERS];
	acct_event *ev = acct_event_new(ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT);
	acct_error err;
	double t0 = now();

	cr_assert_not_null(ev);
	ev->u.sampled_without_replacement.sample_size = 1000;
	ev->u.sampled_without_replacement.source_dataset_size = 100000;
	ev->u.sampled_without_replacement.event = acct_event_gaussian(1.0);
	orders_below(o, DPG_MAX_ORDERS, 1e5);
	acct_error_init(&err);
	cr_assert_eq(acct_rdp(ev, ACCT_REPLACE, o, DPG_MAX_ORDERS, r, NULL, &err),
		     ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/orders", "%s", err.text);
	cr_assert_lt(now() - t0, 0.1, "refused before the work, not after");
	acct_event_free(ev);
}

/* A dataset's filter orders: 32 fractional orders near 1e5 cost about
 * 4e5 units each for every sampled Gaussian priced there; the defaults
 * cost little. */
Test(rdp_work, filter_orders_are_checked)
{
	double o[DPG_MAX_FILTER_ORDERS];
	unsigned n;
	const double *d = acct_filter_default_orders(&n);
	acct_error err;

	for (size_t i = 0; i < DPG_MAX_FILTER_ORDERS; i++)
		o[i] = 99968.5 + (double)i;
	acct_error_init(&err);
	cr_assert_eq(acct_rdp_orders_check(o, DPG_MAX_FILTER_ORDERS, "/filter_orders", &err),
		     ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/filter_orders");
	acct_error_init(&err);
	cr_assert_eq(acct_rdp_orders_check(d, n, "/filter_orders", &err), 0, "%s", err.text);
}

/*
 * A calibration prices its event once per step of its search: one work
 * budget, DPG_MAX_RDP_CALIBRATION_WORK, covers them all, as
 * DPG_MAX_PLD_WORK does for pld.  Each pricing of these 12 sampled
 * Gaussians (noise multiplier to solve for in the first) is within
 * DPG_MAX_RDP_WORK; the search's are not.  A DP-SGD run's calibration, at
 * q = 0.5 where the fractional series are long, still fits.
 */
Test(rdp_work, a_calibration_shares_one_budget)
{
	size_t n = 12;
	acct_event *ev = distinct_sampled(n, 0.01, 1e-7, 0.7);
	acct_event *node = ev->u.composed.events[0]->u.poisson_sampled.event;
	acct_options opt = {.accountant = ACCT_RDP, .neighbor = ACCT_ADD_REMOVE};
	acct_result res;
	acct_error err;
	double v = NAN, e = NAN, t0;

	acct_error_init(&err);
	cr_assert_eq(acct_epsilon(ev, 1e-5, &opt, &res, &err), 0, "%s", err.text);
	acct_error_init(&err);
	t0 = now();
	cr_assert_eq(acct_calibrate(ev, node, "noise_multiplier", 1.0, 1e-5, &opt, &v, &e, &err),
		     ACCT_EUNSUPPORTED, "calibrated to %g (epsilon %g)", v, e);
	cr_assert_eq(strncmp(err.where, "/event", 6), 0, "%s: %s", err.where, err.text);
	cr_assert_lt(now() - t0, 5.0 * ADMITTED_SECONDS);
	acct_event_free(ev);

	ev = acct_event_self_composed(1000, sampled(0.5, 1.0));
	cr_assert_not_null(ev);
	node = ev->u.self_composed.event->u.poisson_sampled.event;
	acct_error_init(&err);
	cr_assert_eq(acct_calibrate(ev, node, "noise_multiplier", 0.5, 1e-5, &opt, &v, &e, &err),
		     0, "%s: %s", err.where, err.text);
	cr_assert(e <= 0.5 && e > 0.5 - 1e-6, "reached epsilon %.17g", e);
	acct_event_free(ev);
}
