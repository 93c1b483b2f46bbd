/*
 * mech.h: randomness, exact noise samplers and the mechanisms of dpgate.
 *
 * Pure: no I/O besides the kernel's getrandom, no logging.  Every mechanism
 * returns its output together with the privacy event that prices it.  Errors
 * are reported through acct_error (accountant/acct.h).
 */
#ifndef MECH_H
#define MECH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acct.h"

/* ==== Randomness ==== */

/*
 * A source of cryptographically secure random bytes.  Three kinds exist:
 *  - system: every byte straight from getrandom(2);
 *  - stream: a ChaCha20 keystream keyed with 256 bits from another rng, for
 *    bulk noise (training);
 *  - seeded: a ChaCha20 keystream keyed from a caller's seed, for tests
 *    only; mech_rng_is_deterministic() says so and the server refuses it.
 * A mech_rng is not thread-safe: one per thread or job.
 */
typedef struct mech_rng mech_rng;

mech_rng *mech_rng_new_system(void);
mech_rng *mech_rng_new_stream(mech_rng *key_source);
mech_rng *mech_rng_new_seeded(const uint8_t seed[32]);
bool mech_rng_is_deterministic(const mech_rng *rng);
void mech_rng_free(mech_rng *rng);

/* Fills buf with n random bytes.  Returns 0, or ACCT_EINTERNAL if the kernel
 * refuses (the caller must not release anything then). */
int mech_rng_bytes(mech_rng *rng, void *buf, size_t n);

/* ==== end randomness ==== */

/* ==== Samplers and mechanisms (issue 4) ==== */

/* ==== end samplers and mechanisms ==== */

#endif
