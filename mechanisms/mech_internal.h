/*
 * mech_internal.h: names shared inside mechanisms/ only.
 */
#ifndef MECH_INTERNAL_H
#define MECH_INTERNAL_H

#include "mech.h"

/* Like mech_rng_uint_below for a 128-bit bound. */
int mech__rng_u128_below(mech_rng *rng, unsigned __int128 bound, unsigned __int128 *ret);

/* Bernoulli(exp(-num/den)) with 128-bit num and den (CKS Algorithm 1). */
int mech__bernoulli_exp128(mech_rng *rng, unsigned __int128 num, unsigned __int128 den,
			   bool *ret);

#endif
