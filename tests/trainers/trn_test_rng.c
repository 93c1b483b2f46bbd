/*
 * trn_test_rng.c: seeded streams and draws for the trainer tests
 * (trn_test_rng.h).
 */
#include <criterion/criterion.h>

#include "trn_test_rng.h"

mech_rng *trn_test_seeded(const uint8_t prefix[2], uint8_t tag)
{
	uint8_t seed[32] = {prefix[0], prefix[1], tag};

	return mech_rng_new_seeded(seed);
}

double trn_test_uniform(mech_rng *rng)
{
	double u;

	cr_assert_eq(mech_rng_uniform(rng, &u), 0);
	return u;
}

double trn_test_normal(mech_rng *rng)
{
	double z;

	cr_assert_eq(mech_rng_normal_fill(rng, &z, 1), 0);
	return z;
}

uint64_t trn_test_below(mech_rng *rng, uint64_t n)
{
	uint64_t v;

	cr_assert_eq(mech_rng_uint_below(rng, n, &v), 0);
	return v;
}
