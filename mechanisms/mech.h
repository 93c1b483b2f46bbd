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

/*
 * Draws a uniform double in [0, 1): 53 random bits scaled by 2^-53, so every
 * multiple of 2^-53 in [0, 1) is equally likely.  Returns 0 and writes *ret,
 * or ACCT_EINTERNAL when the rng fails (nothing written).
 *
 * Not for releasing private scalars by inversion (Mironov 2012): releases use
 * the exact samplers below.
 */
int mech_rng_uniform(mech_rng *rng, double *ret);

/*
 * Fills out[0..n) with independent standard normal doubles (Box-Muller on
 * 53-bit uniforms, both outputs of each pair used).  Meant for bulk gradient
 * noise in training, where the noise is added to a large aggregate and the
 * output is not a single released scalar; releases of scalars go through
 * mech_gaussian_* (exact discrete sampler on a power-of-two grid).  Returns 0,
 * or ACCT_EINTERNAL when the rng fails (out is then unspecified).
 */
int mech_rng_normal_fill(mech_rng *rng, double *out, size_t n);

/*
 * Draws an integer uniform in [0, bound) without bias (rejection of the
 * 2^64 mod bound lowest draws).  Returns 0 and writes *ret, ACCT_EINVAL when
 * bound is 0, or ACCT_EINTERNAL when the rng fails.
 */
int mech_rng_uint_below(mech_rng *rng, uint64_t bound, uint64_t *ret);

/*
 * Draws true with probability exactly p (the double p, as a dyadic rational):
 * random bits are compared lazily with the binary expansion of p, two bits on
 * average.  Returns 0 and writes *ret, ACCT_EINVAL when p is not in [0, 1]
 * (or NaN), or ACCT_EINTERNAL when the rng fails.
 */
int mech_rng_bernoulli(mech_rng *rng, double p, bool *ret);

/* ==== end randomness ==== */

/* ==== Samplers and mechanisms (issue 4) ==== */

/* ---- Exact samplers (Canonne, Kamath, Steinke 2020) ---- */

/*
 * Draws Bernoulli(exp(-num/den)) exactly (CKS Algorithm 1), for any num and
 * den >= 1.  Expected cost: a few uniform integers.  Returns 0 and writes
 * *ret, ACCT_EINVAL when den is 0, or ACCT_EINTERNAL when the rng fails.
 */
int mech_sample_bernoulli_exp(mech_rng *rng, uint64_t num, uint64_t den, bool *ret);

/*
 * Draws Z from the discrete Laplace distribution of scale t = scale_num /
 * scale_den, Pr[Z = z] = (1 - e^{-1/t}) / (1 + e^{-1/t}) e^{-|z|/t}, exactly
 * (CKS Algorithm 2).  1 <= scale_num, scale_den < 2^63.  Returns 0 and
 * writes *ret, ACCT_EINVAL for bad parameters, ACCT_EINTERNAL when the rng
 * fails.
 */
int mech_sample_discrete_laplace(mech_rng *rng, uint64_t scale_num, uint64_t scale_den,
				 int64_t *ret);

/*
 * Writes the rational scale_num / scale_den >= scale that the mechanisms use
 * for a discrete Laplace of real scale `scale` (40 significant bits, rounded
 * up, a power-of-two denominator).  Returns 0, or ACCT_EINVAL when scale is
 * outside [DPG_MECH_DLAP_MIN_SCALE, DPG_MECH_DLAP_MAX_SCALE].
 */
int mech_discrete_laplace_scale(double scale, uint64_t *ret_num, uint64_t *ret_den);

/*
 * The sigma that mech_sample_discrete_gaussian really uses for `sigma`: sigma
 * rounded up to S / 2^f with S < 2^24 and f <= 20 (so that CKS's acceptance
 * test fits 128-bit integers).  NAN when sigma is outside
 * [DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA].  Events must name
 * this value, not the requested one.
 */
double mech_discrete_gaussian_sigma(double sigma);

/*
 * Draws Z from the discrete Gaussian N_Z(0, s^2), Pr[Z = z] proportional to
 * exp(-z^2 / (2 s^2)), s = mech_discrete_gaussian_sigma(sigma), by CKS
 * Algorithm 3 (discrete Laplace proposals of scale floor(s) + 1 accepted with
 * Bernoulli(exp(-(|y| - s^2/t)^2 / (2 s^2)))).  Proposals with |y| > 64 t + 64
 * are rejected outright: their acceptance probability is below e^-1900, so the
 * output differs from N_Z(0, s^2) by less than that in total variation.
 * Returns 0 and writes *ret, ACCT_EINVAL for sigma out of range,
 * ACCT_EINTERNAL when the rng fails.
 */
int mech_sample_discrete_gaussian(mech_rng *rng, double sigma, int64_t *ret);

/* ==== end samplers and mechanisms ==== */

#endif
