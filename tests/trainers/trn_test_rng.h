/*
 * trn_test_rng.h: the seeded streams and single draws the trainer tests
 * share.  Each test file keys its streams with its own two-byte prefix, so
 * that its draws are its own; a failed draw fails the running test.
 */
#ifndef TRN_TEST_RNG_H
#define TRN_TEST_RNG_H

#include <stdint.h>

#include "mech.h"

/* A stream seeded by {prefix[0], prefix[1], tag, 0, ...}. */
mech_rng *trn_test_seeded(const uint8_t prefix[2], uint8_t tag);

/* One uniform draw in [0, 1), one standard normal, one integer below n. */
double trn_test_uniform(mech_rng *rng);
double trn_test_normal(mech_rng *rng);
uint64_t trn_test_below(mech_rng *rng, uint64_t n);

#endif
