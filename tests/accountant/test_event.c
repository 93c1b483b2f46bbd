/*
 * test_event.c: the event-type table of acct_event.c, row by row: every
 * type has a name that maps back to it, a validator that checks its own
 * fields, and wrappers whose child is freed and copied with them.  The
 * expected field at fault is read off the rules in DESIGN.md (a zeroed
 * event breaks the first rule of its type), not off the code.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "acct.h"

Test(event_table, every_type_name_maps_back_to_its_type)
{
	for (unsigned t = 0; t < ACCT_EV__COUNT; t++) {
		const char *name = acct_event_type_name((acct_event_type)t);
		acct_event_type back = ACCT_EV__COUNT;

		cr_assert_not_null(name, "type %u has no name", t);
		cr_assert_eq(acct_event_type_from_name(name, &back), 0, "%s", name);
		cr_assert_eq(back, (acct_event_type)t, "%s", name);
		for (unsigned u = 0; u < t; u++)
			cr_assert_str_neq(name, acct_event_type_name((acct_event_type)u));
	}
	cr_assert_null(acct_event_type_name(ACCT_EV__COUNT));
	cr_assert_lt(acct_event_type_from_name("no_such_event", &(acct_event_type){0}), 0);
	cr_assert_lt(acct_event_type_from_name(NULL, &(acct_event_type){0}), 0);
}

/* The field a zeroed event of each type gets wrong first, or NULL when
 * zero is allowed for every field it has (delta and rho may be 0, an empty
 * composition is nothing). */
static const struct {
	acct_event_type type;
	const char *where;
} zeroed[] = {
	{ACCT_EV_GAUSSIAN, "/event/noise_multiplier"},
	{ACCT_EV_LAPLACE, "/event/noise_multiplier"},
	{ACCT_EV_DISCRETE_GAUSSIAN, "/event/sigma"},
	{ACCT_EV_DISCRETE_LAPLACE, "/event/noise_parameter"},
	{ACCT_EV_RANDOMIZED_RESPONSE, "/event/noise_parameter"},
	{ACCT_EV_EXPONENTIAL_MECHANISM, "/event/epsilon"},
	{ACCT_EV_PERMUTE_AND_FLIP, "/event/epsilon"},
	{ACCT_EV_EPSILON_DELTA, NULL},
	{ACCT_EV_ZCDP, NULL},
	{ACCT_EV_POISSON_SAMPLED, "/event/sampling_probability"},
	{ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT, "/event/source_dataset_size"},
	{ACCT_EV_SELF_COMPOSED, "/event/count"},
	{ACCT_EV_COMPOSED, NULL},
	{ACCT_EV_GNMAX, "/event/sigma"},
	{ACCT_EV_PATE_THRESHOLD, "/event/sigma"},
	{ACCT_EV_PATE_GNSS, "/event/sigma"},
};

Test(event_table, every_type_is_validated_by_its_own_rules)
{
	cr_assert_eq(sizeof(zeroed) / sizeof(zeroed[0]), ACCT_EV__COUNT);
	for (size_t i = 0; i < sizeof(zeroed) / sizeof(zeroed[0]); i++) {
		acct_event *ev = acct_event_new(zeroed[i].type);
		acct_error err;
		int rc;

		cr_assert_not_null(ev);
		acct_error_init(&err);
		rc = acct_event_validate(ev, ACCT_REPLACE, &err);
		if (zeroed[i].where) {
			cr_assert_eq(rc, ACCT_EINVAL, "%s: %d", acct_event_type_name(zeroed[i].type), rc);
			cr_assert_str_eq(err.where, zeroed[i].where, "%s",
					 acct_event_type_name(zeroed[i].type));
		} else {
			cr_assert_eq(rc, 0, "%s: %s", acct_event_type_name(zeroed[i].type), err.text);
		}
		acct_event_free(ev);
	}
}

Test(event_table, an_unknown_type_is_refused_at_its_type)
{
	acct_event *ev = acct_event_new(ACCT_EV__COUNT);
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_event_validate(ev, ACCT_ADD_REMOVE, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/event/type");
	acct_event_free(ev);
}

Test(event_table, wrappers_copy_their_child_deeply)
{
	acct_event *g = acct_event_new(ACCT_EV_GAUSSIAN);
	acct_event *ev, *copy;
	acct_error err;

	g->u.gaussian.noise_multiplier = 1.5;
	ev = acct_event_self_composed(10, acct_event_poisson_sampled(0.25, g));
	cr_assert_not_null(ev);
	copy = acct_event_copy(ev);
	cr_assert_not_null(copy);
	cr_assert_neq(copy->u.self_composed.event, ev->u.self_composed.event);
	cr_assert_neq(copy->u.self_composed.event->u.poisson_sampled.event, g);
	cr_assert_eq(copy->u.self_composed.event->u.poisson_sampled.event->u.gaussian.noise_multiplier,
		     1.5);
	acct_event_free(ev);
	/* The copy stands alone once the original is gone. */
	acct_error_init(&err);
	cr_assert_eq(acct_event_validate(copy, ACCT_ADD_REMOVE, &err), 0, "%s", err.text);
	acct_event_free(copy);
}

/* A pointer too long for acct_error.where is shortened to an ancestor that
 * ends at a '/' boundary, never cut inside a key.  The expected pointers
 * are built here from the prefix alone. */
Test(event_table, long_pointers_shorten_to_an_ancestor)
{
	char prefix[160], expect[160];
	acct_event *g = acct_event_new(ACCT_EV_GAUSSIAN);
	acct_error err;

	cr_assert_not_null(g);
	g->u.gaussian.noise_multiplier = -1.0;
	/* The prefix fits, the field below it does not: the prefix is kept. */
	snprintf(prefix, sizeof(prefix), "/%0100d/%020d", 0, 0);
	cr_assert_lt(strlen(prefix) + strlen("/noise_multiplier"), 200);
	cr_assert_geq(strlen(prefix) + strlen("/noise_multiplier"), ACCT_ERROR_WHERE_BYTES);
	acct_error_init(&err);
	cr_assert_eq(acct_event_validate_at(g, ACCT_ADD_REMOVE, prefix, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, prefix);
	/* The prefix itself is too long: its first key is what fits. */
	snprintf(prefix, sizeof(prefix), "/%0100d/%040d", 0, 0);
	snprintf(expect, sizeof(expect), "/%0100d", 0);
	cr_assert_geq(strlen(prefix), ACCT_ERROR_WHERE_BYTES);
	acct_error_init(&err);
	cr_assert_eq(acct_event_validate_at(g, ACCT_ADD_REMOVE, prefix, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, expect);
	acct_event_free(g);
}

/*
 * Out-of-range values of the real fields, set in C (where no parser stands
 * in front of the validator), each refused at its field with the rule of
 * DESIGN.md's event table as text: noise scales and a mechanism's epsilon
 * finite and > 0, an (epsilon, delta) pair's epsilon and a rho finite and
 * >= 0, delta in [0, 1), a discrete sensitivity an integer >= 1.
 */
static const struct {
	acct_event_type type;
	double a, b; /* the type's first and second real fields */
	const char *where, *text;
} bad_reals[] = {
	{ACCT_EV_ZCDP, -1.0, 0, "/event/rho", "'rho' must be a finite number >= 0"},
	{ACCT_EV_ZCDP, INFINITY, 0, "/event/rho", "'rho' must be a finite number >= 0"},
	{ACCT_EV_EPSILON_DELTA, NAN, 0, "/event/epsilon", "'epsilon' must be a finite number >= 0"},
	{ACCT_EV_EPSILON_DELTA, -0.5, 0, "/event/epsilon", "'epsilon' must be a finite number >= 0"},
	{ACCT_EV_EPSILON_DELTA, 1.0, 1.0, "/event/delta", "'delta' must be in [0, 1)"},
	{ACCT_EV_EXPONENTIAL_MECHANISM, 0.0, 0, "/event/epsilon",
	 "'epsilon' must be a finite number > 0"},
	{ACCT_EV_PERMUTE_AND_FLIP, INFINITY, 0, "/event/epsilon",
	 "'epsilon' must be a finite number > 0"},
	{ACCT_EV_PATE_THRESHOLD, NAN, 0, "/event/sigma", "'sigma' must be a finite number > 0"},
	{ACCT_EV_GAUSSIAN, -2.0, 0, "/event/noise_multiplier",
	 "'noise_multiplier' must be a finite number > 0"},
	{ACCT_EV_DISCRETE_GAUSSIAN, 1.0, 0.5, "/event/sensitivity",
	 "'sensitivity' must be an integer >= 1"},
	{ACCT_EV_DISCRETE_LAPLACE, 1.0, 2.5, "/event/sensitivity",
	 "'sensitivity' must be an integer >= 1"},
};

/* An event of `type` whose first two real fields are a and b. */
static acct_event *with_reals(acct_event_type type, double a, double b)
{
	acct_event *ev = acct_event_new(type);

	cr_assert_not_null(ev);
	switch (type) {
	case ACCT_EV_ZCDP: ev->u.zcdp.rho = a; break;
	case ACCT_EV_EPSILON_DELTA:
		ev->u.epsilon_delta.epsilon = a;
		ev->u.epsilon_delta.delta = b;
		break;
	case ACCT_EV_EXPONENTIAL_MECHANISM: ev->u.exponential_mechanism.epsilon = a; break;
	case ACCT_EV_PERMUTE_AND_FLIP: ev->u.permute_and_flip.epsilon = a; break;
	case ACCT_EV_PATE_THRESHOLD: ev->u.pate_threshold.sigma = a; break;
	case ACCT_EV_GAUSSIAN: ev->u.gaussian.noise_multiplier = a; break;
	case ACCT_EV_DISCRETE_GAUSSIAN:
		ev->u.discrete_gaussian.sigma = a;
		ev->u.discrete_gaussian.sensitivity = b;
		break;
	case ACCT_EV_DISCRETE_LAPLACE:
		ev->u.discrete_laplace.noise_parameter = a;
		ev->u.discrete_laplace.sensitivity = b;
		break;
	default: cr_assert_fail("no setter for %s", acct_event_type_name(type));
	}
	return ev;
}

Test(event_table, out_of_range_reals_are_refused_with_their_rule)
{
	for (size_t i = 0; i < sizeof(bad_reals) / sizeof(bad_reals[0]); i++) {
		acct_event *ev = with_reals(bad_reals[i].type, bad_reals[i].a, bad_reals[i].b);
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_event_validate(ev, ACCT_ADD_REMOVE, &err), ACCT_EINVAL, "row %zu",
			     i);
		cr_assert_str_eq(err.where, bad_reals[i].where, "row %zu", i);
		cr_assert_str_eq(err.text, bad_reals[i].text, "row %zu", i);
		acct_event_free(ev);
	}
}

/* acct_event_composed holds the events it is given, in order, and is
 * priced as their composition: basic composition sums epsilon and delta
 * (Dwork, Roth 2014, Thm. 3.16), so 0.25 + 0.5 and 1e-6 + 2e-6. */
Test(event_table, composed_holds_its_parts_in_order)
{
	acct_event *a = acct_event_epsilon_delta(0.25, 1e-6);
	acct_event *b = acct_event_epsilon_delta(0.5, 2e-6);
	acct_event *ev = acct_event_composed((acct_event *[]){a, b}, 2);
	acct_options opt = {.accountant = ACCT_BASIC, .neighbor = ACCT_ADD_REMOVE};
	acct_result r;
	acct_error err;

	acct_error_init(&err);
	cr_assert_not_null(ev);
	cr_assert_eq(ev->type, ACCT_EV_COMPOSED);
	cr_assert_eq(ev->u.composed.n, 2);
	cr_assert_eq(ev->u.composed.events[0], a);
	cr_assert_eq(ev->u.composed.events[1], b);
	cr_assert_eq(acct_event_validate(ev, ACCT_ADD_REMOVE, &err), 0, "%s", err.text);
	cr_assert_eq(acct_epsilon(ev, 1e-5, &opt, &r, &err), 0, "%s", err.text);
	cr_assert_float_eq(r.epsilon, 0.75, 1e-15);
	cr_assert_float_eq(r.delta, 3e-6, 1e-20);
	acct_event_free(ev);
}

/* The constructors nest: acct_event_gaussian makes the leaf, and a wrapper
 * given no leaf (a constructor that ran out of memory) is no event, never
 * a tree with a missing child. */
Test(event_table, constructors_nest_and_a_missing_leaf_fails_the_whole)
{
	acct_event *g = acct_event_gaussian(2.5);
	acct_event *ev = acct_event_self_composed(3, acct_event_poisson_sampled(0.1, g));
	acct_error err;

	acct_error_init(&err);
	cr_assert_not_null(ev);
	cr_assert_eq(ev->u.self_composed.event->u.poisson_sampled.event, g);
	cr_assert_eq(g->type, ACCT_EV_GAUSSIAN);
	cr_assert_eq(g->u.gaussian.noise_multiplier, 2.5);
	cr_assert_eq(acct_event_validate(ev, ACCT_ADD_REMOVE, &err), 0, "%s", err.text);
	acct_event_free(ev);
	cr_assert_null(acct_event_poisson_sampled(0.1, NULL));
	cr_assert_null(acct_event_self_composed(3, NULL));
	cr_assert_null(acct_event_self_composed(3, acct_event_poisson_sampled(0.1, NULL)));
}
