/*
 * mech_rng.c: the CSPRNG behind every release.
 *
 * system: getrandom(2) with flags 0 blocks until the kernel pool is seeded
 * and never returns short for requests of up to 256 bytes; larger requests
 * are looped.  stream and seeded: libsodium's ChaCha20 (IETF, 96-bit nonce)
 * keystream, re-keyed never; the counter gives 256 GiB per key, far beyond a
 * job's needs, and we refuse to go past it.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <sodium.h>

#include "mech.h"
#include "mech_internal.h"

enum rng_kind { RNG_SYSTEM, RNG_STREAM, RNG_SEEDED };

#define RNG_BLOCK_BYTES 64u
#define RNG_BUFFER_BLOCKS 64u
#define RNG_MAX_BLOCKS 0xFFFFFFFFu

struct mech_rng {
	enum rng_kind kind;
	uint8_t key[crypto_stream_chacha20_ietf_KEYBYTES];
	uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES];
	uint32_t next_block;
	uint8_t buf[RNG_BLOCK_BYTES * RNG_BUFFER_BLOCKS];
	size_t buf_pos;
	size_t buf_len;
};

int mech_system_bytes(void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n > 0) {
		size_t want = n > 256 ? 256 : n;
		ssize_t got = getrandom(p, want, 0);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return ACCT_EINTERNAL;
		}
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

static mech_rng *rng_alloc(enum rng_kind kind)
{
	mech_rng *rng;

	/* Until sodium_init() has run, libsodium uses its portable ChaCha20,
	 * a quarter the speed of the SIMD one it selects at init; the call is
	 * idempotent and thread-safe, so every rng makes sure of it instead of
	 * relying on each program's main (the benches and tests had not). */
	if (sodium_init() < 0)
		return NULL;
	rng = calloc(1, sizeof(*rng));

	if (rng)
		rng->kind = kind;
	return rng;
}

mech_rng *mech_rng_new_system(void)
{
	return rng_alloc(RNG_SYSTEM);
}

mech_rng *mech_rng_new_stream(mech_rng *key_source)
{
	mech_rng *rng;

	if (!key_source)
		return NULL;
	rng = rng_alloc(key_source->kind == RNG_SEEDED ? RNG_SEEDED : RNG_STREAM);
	if (!rng)
		return NULL;
	if (mech_rng_bytes(key_source, rng->key, sizeof(rng->key)) < 0) {
		mech_rng_free(rng);
		return NULL;
	}
	return rng;
}

#ifdef DPG_TESTING
mech_rng *mech_rng_new_seeded(const uint8_t seed[32])
{
	mech_rng *rng = rng_alloc(RNG_SEEDED);

	if (rng)
		memcpy(rng->key, seed, sizeof(rng->key));
	return rng;
}
#endif

bool mech_rng_is_deterministic(const mech_rng *rng)
{
	return rng && rng->kind == RNG_SEEDED;
}

void mech_rng_free(mech_rng *rng)
{
	if (!rng)
		return;
	sodium_memzero(rng, sizeof(*rng));
	free(rng);
}

static int stream_refill(mech_rng *rng)
{
	if (rng->next_block > RNG_MAX_BLOCKS - RNG_BUFFER_BLOCKS)
		return ACCT_EINTERNAL;
	memset(rng->buf, 0, sizeof(rng->buf));
	crypto_stream_chacha20_ietf_xor_ic(rng->buf, rng->buf, sizeof(rng->buf), rng->nonce,
					   rng->next_block, rng->key);
	rng->next_block += RNG_BUFFER_BLOCKS;
	rng->buf_pos = 0;
	rng->buf_len = sizeof(rng->buf);
	return 0;
}

int mech_rng_bytes(mech_rng *rng, void *buf, size_t n)
{
	uint8_t *p = buf;

	if (!rng)
		return ACCT_EINTERNAL;
	if (rng->kind == RNG_SYSTEM)
		return mech_system_bytes(buf, n);
	while (n > 0) {
		size_t take;

		if (rng->buf_pos == rng->buf_len && stream_refill(rng) < 0)
			return ACCT_EINTERNAL;
		take = rng->buf_len - rng->buf_pos;
		if (take > n)
			take = n;
		memcpy(p, rng->buf + rng->buf_pos, take);
		/* Consumed keystream is erased so a later memory read reveals nothing. */
		sodium_memzero(rng->buf + rng->buf_pos, take);
		rng->buf_pos += take;
		p += take;
		n -= take;
	}
	return 0;
}

int mech_rng_uniform(mech_rng *rng, double *ret)
{
	uint64_t x;

	if (mech_rng_bytes(rng, &x, sizeof(x)) < 0)
		return ACCT_EINTERNAL;
	*ret = (double)(x >> 11) * 0x1p-53;
	return 0;
}

/* A uniform double in (0, 1/2] with every bit of precision: the exponent is
 * geometric (one per leading zero bit of a random stream), the mantissa 52
 * fresh bits, so it is the continuous uniform rounded to a double (down
 * to 2^-1074, where it stops). */
static int half_uniform(mech_rng *rng, double *ret)
{
	uint64_t w, m;
	int e = -2; /* the value is in [2^e, 2^(e+1)) */

	for (;;) {
		if (mech_rng_bytes(rng, &w, sizeof(w)) < 0)
			return ACCT_EINTERNAL;
		if (w)
			break;
		e -= 64;
		if (e < -1074) {
			*ret = DBL_TRUE_MIN;
			return 0;
		}
	}
	e -= __builtin_clzll(w);
	if (mech_rng_bytes(rng, &m, sizeof(m)) < 0)
		return ACCT_EINTERNAL;
	*ret = ldexp((double)((m >> 12) | (UINT64_C(1) << 52)), e - 52);
	if (*ret == 0)
		*ret = DBL_TRUE_MIN;
	return 0;
}

int mech__exp1(mech_rng *rng, double *ret)
{
	uint8_t bit;
	double v;

	if (mech_rng_bytes(rng, &bit, 1) < 0 || half_uniform(rng, &v) < 0)
		return ACCT_EINTERNAL;
	*ret = bit & 1 ? -log(v) : -log1p(-v);
	return 0;
}

int mech_rng_normal_fill(mech_rng *rng, double *out, size_t n)
{
	size_t i = 0;

	while (i < n) {
		double e, u2, r;

		/* Box-Muller with the squared radius 2E, E ~ Exp(1) to full
		 * relative precision (mech__exp1): from a 53-bit uniform the radius
		 * stopped at sqrt(106 ln 2), about 8.57, an unpriced cut of the
		 * tail; now it reaches about 38, past e^-745 of mass. */
		if (mech__exp1(rng, &e) < 0 || mech_rng_uniform(rng, &u2) < 0)
			return ACCT_EINTERNAL;
		r = sqrt(2.0 * e);
		out[i++] = r * cos(2.0 * M_PI * u2);
		if (i < n)
			out[i++] = r * sin(2.0 * M_PI * u2);
	}
	return 0;
}

/*
 * A uniform draw from [0, bound) out of words of `bytes` bytes (8 or 16),
 * by rejection: the 2^(8 bytes) mod bound smallest words are drawn again,
 * since keeping them would favour small results.  A 16-byte span is 2^128,
 * which wraps to 0 in 128 bits; (0 - bound) % bound is then still right.
 * The word is w[0] + 2^64 w[1] of its 64-bit halves: on a little-endian
 * host, the value its bytes have when read as one integer.
 */
static int draw_below(mech_rng *rng, unsigned __int128 bound, size_t bytes,
		      unsigned __int128 *ret)
{
	unsigned __int128 span = bytes == 16 ? 0 : (unsigned __int128)1 << (8 * bytes);
	unsigned __int128 threshold, x;
	uint64_t w[2];

	if (bound == 0)
		return ACCT_EINVAL;
	threshold = (span - bound) % bound;
	do {
		w[0] = w[1] = 0;
		if (mech_rng_bytes(rng, w, bytes) < 0)
			return ACCT_EINTERNAL;
		x = (unsigned __int128)w[1] << 64 | w[0];
	} while (x < threshold);
	*ret = x % bound;
	return 0;
}

int mech_rng_uint_below(mech_rng *rng, uint64_t bound, uint64_t *ret)
{
	unsigned __int128 x;
	int rc = draw_below(rng, bound, sizeof(uint64_t), &x);

	if (rc == 0)
		*ret = (uint64_t)x;
	return rc;
}

int mech__rng_u128_below(mech_rng *rng, unsigned __int128 bound, unsigned __int128 *ret)
{
	return draw_below(rng, bound, sizeof(unsigned __int128), ret);
}

int mech_rng_bernoulli(mech_rng *rng, double p, bool *ret)
{
	uint64_t mant, word = 0;
	int exp2, zeros, avail = 0;

	if (!(p >= 0.0 && p <= 1.0))
		return ACCT_EINVAL;
	if (p == 0.0 || p == 1.0) {
		*ret = p == 1.0;
		return 0;
	}
	/* p = f 2^exp2 with f in [1/2, 1): its expansion is -exp2 zeros, then
	 * the 53 bits of mant = f 2^53, then zeros.  U < p is decided at the
	 * first bit where a uniform U differs from p; U = p has probability 0. */
	mant = (uint64_t)ldexp(frexp(p, &exp2), 53);
	zeros = -exp2;
	for (int i = 0; i < zeros + 53; i++) {
		int ubit, pbit;

		if (avail == 0) {
			if (mech_rng_bytes(rng, &word, sizeof(word)) < 0)
				return ACCT_EINTERNAL;
			avail = 64;
		}
		ubit = (int)(word & 1u);
		word >>= 1;
		avail--;
		pbit = i < zeros ? 0 : (int)((mant >> (52 - (i - zeros))) & 1u);
		if (ubit != pbit) {
			*ret = ubit < pbit;
			return 0;
		}
	}
	*ret = false;
	return 0;
}
