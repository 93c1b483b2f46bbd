/*
 * mech_normal.c: bulk standard normal noise by the ziggurat method.
 *
 * DP-SGD adds one Gaussian per parameter per step; Box-Muller
 * (mech_rng_normal_fill) costs a log, a sqrt, a sin/cos and 17 stream bytes
 * per pair, about 45 ns a value, which was a fifth of a private step.  The
 * ziggurat of Marsaglia and Tsang (J. Stat. Software 5(8), 2000) takes one
 * 64-bit word of the ChaCha20 stream and one multiply for about 99% of the
 * values; the rest go through an exact rejection step (the wedge test) or
 * Marsaglia's exact tail algorithm.  The 256-layer tables are computed at
 * build time by gen_ziggurat.py from the closed forms it states.
 *
 * Word layout: bits 0-7 pick the layer, bit 8 the sign, bits 12-63 a
 * uniform U = (m + 1/2) 2^-52 on (0, 1), symmetric about 1/2 and never 0 or
 * 1, so the output is exactly symmetric about 0.
 */
#include <math.h>
#include <string.h>

#include <sodium.h>

#include "mech.h"
#include "mech_internal.h"
#include "mech_ziggurat_tables.h"

/* Words drawn from the stream in one call: 2 KiB on the stack. */
#define NORMAL_BATCH_WORDS 256u

/* The value of a word if it lands in the rectangular core of its layer
 * (x < x_{i+1}, under the density whatever the height), else NaN. */
static inline double zig_fast(uint64_t w)
{
	unsigned i = (unsigned)(w & 0xFFu);
	double u = ((double)(w >> 12) + 0.5) * 0x1p-52;
	double x = u * mech_zig_x[i];

	if (!(x < mech_zig_x[i + 1]))
		return NAN;
	return (w >> 8) & 1u ? -x : x;
}

/* The tail beyond R (Marsaglia 1964, the algorithm in Marsaglia and Tsang
 * 2000, section 2): with E1, E2 ~ Exp(1), x = E1 / R is accepted when
 * 2 E2 > x^2, and then R + x has the normal density restricted to (R, inf).
 * Exp(1) comes from mech__exp1 (full relative precision up to about 745),
 * so x stays below sqrt(2 * 745), and |z| below R + 38.6, about 42.2. */
int mech__normal_tail(mech_rng *rng, double *ret)
{
	double e1, e2, x;

	do {
		if (mech__exp1(rng, &e1) < 0 || mech__exp1(rng, &e2) < 0)
			return ACCT_EINTERNAL;
		x = e1 / MECH_ZIG_R;
	} while (!(2.0 * e2 > x * x));
	*ret = MECH_ZIG_R + x;
	return 0;
}

/* A word that missed the core: the wedge test of its layer (a uniform
 * height between f(x_i) and f(x_{i+1}), accepted under f), or the tail for
 * the base layer; on rejection a fresh word from the stream starts over. */
static int zig_slow(mech_rng *rng, uint64_t w, double *ret)
{
	for (;;) {
		unsigned i = (unsigned)(w & 0xFFu);
		double u = ((double)(w >> 12) + 0.5) * 0x1p-52;
		double x = u * mech_zig_x[i], v, z;

		if (x < mech_zig_x[i + 1]) {
			z = x;
		} else if (i == 0) {
			if (mech__normal_tail(rng, &z) < 0)
				return ACCT_EINTERNAL;
		} else {
			if (mech_rng_uniform(rng, &v) < 0)
				return ACCT_EINTERNAL;
			z = mech_zig_f[i] + v * (mech_zig_f[i + 1] - mech_zig_f[i]) <
					    exp(-0.5 * x * x)
				    ? x
				    : NAN;
		}
		if (!isnan(z)) {
			*ret = (w >> 8) & 1u ? -z : z;
			return 0;
		}
		if (mech_rng_bytes(rng, &w, sizeof(w)) < 0)
			return ACCT_EINTERNAL;
	}
}

/* Stream order, fixed so a seeded stream gives fixed output: per batch of
 * up to NORMAL_BATCH_WORDS values, one word per value, then the extra draws
 * of the words that missed their core, in output order. */
int mech_rng_normal_fill_fast(mech_rng *rng, double *out, size_t n)
{
	uint64_t w[NORMAL_BATCH_WORDS];
	int rc = 0;

	for (size_t done = 0; done < n;) {
		size_t b = n - done < NORMAL_BATCH_WORDS ? n - done : NORMAL_BATCH_WORDS;

		rc = mech_rng_bytes(rng, w, b * sizeof(w[0]));
		if (rc < 0)
			goto out;
		for (size_t k = 0; k < b; k++)
			out[done + k] = zig_fast(w[k]);
		for (size_t k = 0; k < b; k++) {
			if (isnan(out[done + k]) && (rc = zig_slow(rng, w[k], &out[done + k])) < 0)
				goto out;
		}
		done += b;
	}
out:
	sodium_memzero(w, sizeof(w));
	return rc < 0 ? ACCT_EINTERNAL : 0;
}
