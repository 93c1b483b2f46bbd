/*
 * test_rng.c: the CSPRNG kinds.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "mech.h"

Test(rng, seeded_is_deterministic_and_flagged)
{
	uint8_t seed[32] = {1, 2, 3};
	uint8_t a[300], b[300];
	mech_rng *r1 = mech_rng_new_seeded(seed), *r2 = mech_rng_new_seeded(seed);

	cr_assert(mech_rng_is_deterministic(r1));
	cr_assert_eq(mech_rng_bytes(r1, a, sizeof(a)), 0);
	cr_assert_eq(mech_rng_bytes(r2, b, sizeof(b)), 0);
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
	mech_rng_free(r1);
	mech_rng_free(r2);
}

Test(rng, system_is_not_deterministic)
{
	uint8_t a[32], b[32];
	mech_rng *r = mech_rng_new_system();

	cr_assert(!mech_rng_is_deterministic(r));
	cr_assert_eq(mech_rng_bytes(r, a, sizeof(a)), 0);
	cr_assert_eq(mech_rng_bytes(r, b, sizeof(b)), 0);
	/* Two 256-bit draws collide with probability 2^-256. */
	cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
	mech_rng_free(r);
}
