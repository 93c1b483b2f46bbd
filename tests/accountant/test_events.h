/*
 * test_events.h: the leaf events the accountant's tests build most, with
 * their parameters set directly (the library's constructors cover the
 * Gaussian and the composites).
 */
#ifndef TEST_EVENTS_H
#define TEST_EVENTS_H

#include <stdint.h>

#include "acct.h"

/* Laplace of noise multiplier b (scale over sensitivity). */
static inline acct_event *test_laplace(double b)
{
	acct_event *e = acct_event_new(ACCT_EV_LAPLACE);

	e->u.laplace.noise_multiplier = b;
	return e;
}

/* k-ary randomized response with noise parameter p. */
static inline acct_event *test_rand_response(double p, int64_t k)
{
	acct_event *e = acct_event_new(ACCT_EV_RANDOMIZED_RESPONSE);

	e->u.randomized_response.noise_parameter = p;
	e->u.randomized_response.num_buckets = k;
	return e;
}

#endif
