/*
 * base_fmt.c: reals, integers and timestamps as text, without printf on the
 * common path; and where a file a stored path names is read.
 *
 * Shortest reals, for 15 digits or fewer.  A decimal m * 10^-k with
 * m < 2^53 and |k| <= 22 is read back by a correctly rounded strtod as
 * round(m / 10^k) (or round(m * 10^-k) for k < 0), and m and 10^|k| are
 * both exact doubles, so one IEEE division (multiplication) computes
 * exactly what strtod returns (Clinger's fast path).  That makes the "does
 * it read back" test exact without strtod.
 *
 * Which m to test: for a digit count of at most 15, m < 10^15, the computed
 * a * 10^k is within 10^15 * 2^-53 < 0.12 of the exact product, and an m
 * that reads back lies within ulp(a)/2 * 10^k < 0.12 of the exact product
 * too; so round(a * 10^k) is the only candidate.  Two different decimals of
 * at most 15 digits are more than ulp(a) apart, so at most one reads back;
 * scanning k upward from below the first significant digit finds it with
 * the fewest digits.
 *
 * When no decimal of at most 15 digits reads back, 16 or 17 digits are
 * worked out exactly in 128-bit integers (fmt_real_exact).  Outside that
 * one's range, and for NaN and infinities, the old printf loop runs; that
 * loop is also the reference the tests compare with.
 */
#include "base.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAST_MAX_DIGITS 15
#define EXACT_POW10_MAX 22

static const double pow10_exact[EXACT_POW10_MAX + 1] = {
	1e0,  1e1,  1e2,  1e3,	1e4,  1e5,  1e6,  1e7,	1e8,  1e9,  1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* The printf loop: shortest of %.15g, %.16g, %.17g that reads back. */
static size_t fmt_real_printf(char buf[SRV_FMT_REAL_MAX], double x)
{
	size_t n;

	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, SRV_FMT_REAL_MAX, "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	n = strlen(buf);
	if (!strpbrk(buf, ".eEn")) {
		memcpy(buf + n, ".0", 3);
		n += 2;
	}
	return n;
}

/* Does m * 10^-k read back as a (see the header comment)? */
static bool reads_back(uint64_t m, int k, double a)
{
	double dm = (double)m;

	return k >= 0 ? dm / pow10_exact[k] == a : dm * pow10_exact[-k] == a;
}

/* The decimal digits of m (m > 0) into digits; returns their count. */
static int digits_of(uint64_t m, char digits[24])
{
	char rev[24];
	int n = 0;

	while (m) {
		rev[n++] = (char)('0' + m % 10);
		m /= 10;
	}
	for (int i = 0; i < n; i++)
		digits[i] = rev[n - 1 - i];
	return n;
}

/*
 * Lays out digits (n of them, no trailing zeros) with decimal exponent e
 * (the first digit's place) as %.<prec>g does, then ".0" when the text
 * would read as an integer; returns the length.
 */
static size_t layout_g(char *out, int prec, bool negative, const char *digits, int n, int e)
{
	size_t len = 0;

	if (negative)
		out[len++] = '-';
	if (e < -4 || e >= prec) {
		int ae = e < 0 ? -e : e;

		out[len++] = digits[0];
		if (n > 1) {
			out[len++] = '.';
			memcpy(out + len, digits + 1, (size_t)n - 1);
			len += (size_t)n - 1;
		}
		out[len++] = 'e';
		out[len++] = e < 0 ? '-' : '+';
		if (ae >= 100)
			out[len++] = (char)('0' + ae / 100);
		out[len++] = (char)('0' + ae / 10 % 10);
		out[len++] = (char)('0' + ae % 10);
	} else if (e < 0) {
		out[len++] = '0';
		out[len++] = '.';
		for (int i = 0; i < -e - 1; i++)
			out[len++] = '0';
		memcpy(out + len, digits, (size_t)n);
		len += (size_t)n;
	} else {
		for (int i = 0; i <= e; i++)
			out[len++] = i < n ? digits[i] : '0';
		if (n > e + 1) {
			out[len++] = '.';
			memcpy(out + len, digits + e + 1, (size_t)(n - e - 1));
			len += (size_t)(n - e - 1);
		} else {
			out[len++] = '.';
			out[len++] = '0';
		}
	}
	out[len] = '\0';
	return len;
}

/*
 * 16 and 17 digits, exactly, for 2^-16 <= a < 2^52 (running sums of small
 * costs land here).  With a = M * 2^E (M of 53 bits, -68 <= E < 0) and a
 * scale 10^k (k <= 21), every quantity below fits in 128 bits:
 *   the digits: round-half-even(M * 10^k / 2^-E), as printf rounds;
 *   "reads back": m / 10^k lies in a's rounding interval
 *   [(4M - 2) 2^(E-2), (4M + 2) 2^(E-2)] (lower end (4M - 1) 2^(E-2) when
 *   M = 2^52, where the gap below a is half), ends included when M is even
 *   (ties go to the even mantissa); multiplied through by 10^k 2^(2-E).
 * Returns 0 when a is outside that range.
 */
typedef unsigned __int128 u128;

static const uint64_t pow10_u64[20] = {
	1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
	100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
	10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
	100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL,
};

static u128 pow10_u128(int k)
{
	return k < 20 ? (u128)pow10_u64[k] : (u128)pow10_u64[19] * pow10_u64[k - 19];
}

/* round-half-even(M * 10^k * 2^E) for E < 0. */
static uint64_t scaled_digits(uint64_t M, int E, int k)
{
	u128 t = (u128)M * pow10_u128(k);
	u128 q = t >> -E, r = t - (q << -E), half = (u128)1 << (-E - 1);

	if (r > half || (r == half && (q & 1)))
		q++;
	return (uint64_t)q;
}

static bool reads_back_exact(uint64_t m, int k, uint64_t M, int E)
{
	u128 lhs = (u128)m << (2 - E), p = pow10_u128(k);
	u128 up = ((u128)4 * M + 2) * p;
	u128 lo = ((u128)4 * M - (M == (1ULL << 52) ? 1 : 2)) * p;

	return (M & 1) == 0 ? lo <= lhs && lhs <= up : lo < lhs && lhs < up;
}

static size_t fmt_real_exact(char buf[SRV_FMT_REAL_MAX], double x, double a)
{
	int e2, e10, E;
	uint64_t M;

	if (!(a >= 0x1p-16 && a < 0x1p52))
		return 0;
	M = (uint64_t)ldexp(frexp(a, &e2), 53);
	E = e2 - 53;
	/* The exact decimal exponent: 10^16 <= round(a * 10^(16 - e10)) < 10^17
	 * (a carry to 10^17 is handled below, as printf does). */
	e10 = (int)floor(log10(a));
	for (int tries = 0; tries < 3; tries++) {
		u128 t = (u128)M * pow10_u128(16 - e10), q = t >> -E;

		if (q >= (u128)pow10_u64[17])
			e10++;
		else if (q < (u128)pow10_u64[16])
			e10--;
		else
			break;
	}
	for (int prec = 16; prec <= 17; prec++) {
		int k = prec - 1 - e10, e = e10, n;
		uint64_t m = scaled_digits(M, E, k);
		char digits[24];

		if (prec == 16 && !reads_back_exact(m, k, M, E))
			continue;
		if (m == pow10_u64[prec]) { /* rounded up to the next power of ten */
			m = 1;
			e++;
		}
		while (m % 10 == 0)
			m /= 10;
		n = digits_of(m, digits);
		return layout_g(buf, prec, signbit(x), digits, n, e);
	}
	return 0;
}

size_t srv_fmt_real(char buf[SRV_FMT_REAL_MAX], double x)
{
	size_t len;

	double a = fabs(x);
	int e_est, k_lo, k_hi;

	if (!isfinite(x))
		return fmt_real_printf(buf, x);
	if (a == 0.0) {
		const char *z = signbit(x) ? "-0.0" : "0.0";
		size_t n = strlen(z);

		memcpy(buf, z, n + 1);
		return n;
	}
	/* log10 may be off by one near a power of ten; the k range below
	 * covers either neighbour of the true first-digit place. */
	e_est = (int)floor(log10(a));
	/* Past +-22 the power of ten is not exact.  Starting at -22 still finds
	 * a large decimal (as m with trailing zeros, stripped below) while
	 * m < 10^15; a decimal that needs k > 22 goes to printf. */
	k_lo = -e_est - 1 < -EXACT_POW10_MAX ? -EXACT_POW10_MAX : -e_est - 1;
	k_hi = FAST_MAX_DIGITS - e_est > EXACT_POW10_MAX ? EXACT_POW10_MAX : FAST_MAX_DIGITS - e_est;
	for (int k = k_lo; k <= k_hi; k++) {
		double scaled = k >= 0 ? a * pow10_exact[k] : a / pow10_exact[-k];
		char digits[24];
		uint64_t m;
		int n, place = k;

		if (scaled >= 1e15 + 2.0)
			break;
		m = (uint64_t)nearbyint(scaled);
		if (m == 0 || !reads_back(m, k, a))
			continue;
		while (m % 10 == 0) {
			m /= 10;
			place--;
		}
		n = digits_of(m, digits);
		if (n > FAST_MAX_DIGITS)
			break;
		return layout_g(buf, FAST_MAX_DIGITS, signbit(x), digits, n, n - 1 - place);
	}
	len = fmt_real_exact(buf, x, a);
	return len ? len : fmt_real_printf(buf, x);
}

size_t srv_fmt_int64(char buf[24], int64_t v)
{
	/* Through the magnitude as unsigned, so INT64_MIN has no overflow. */
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char digits[24];
	size_t len = 0;
	int n;

	if (u == 0) {
		memcpy(buf, "0", 2);
		return 1;
	}
	if (v < 0)
		buf[len++] = '-';
	n = digits_of(u, digits);
	memcpy(buf + len, digits, (size_t)n);
	len += (size_t)n;
	buf[len] = '\0';
	return len;
}

void srv_strcopy(char *dst, size_t size, const char *src)
{
	size_t n;

	if (size == 0)
		return;
	n = src ? strnlen(src, size - 1) : 0;
	memcpy(dst, src ? src : "", n);
	dst[n] = '\0';
}

static void two(char *p, int v)
{
	p[0] = (char)('0' + v / 10 % 10);
	p[1] = (char)('0' + v % 10);
}

void srv_fmt_timestamp(char buf[32], int64_t unix_s, long millis)
{
	time_t t = (time_t)unix_s;
	struct tm tm;
	int year;

	if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999 ||
	    millis < 0 || millis > 999) {
		snprintf(buf, 32, "1970-01-01T00:00:00.000Z");
		return;
	}
	year = tm.tm_year + 1900;
	two(buf, year / 100);
	two(buf + 2, year % 100);
	buf[4] = '-';
	two(buf + 5, tm.tm_mon + 1);
	buf[7] = '-';
	two(buf + 8, tm.tm_mday);
	buf[10] = 'T';
	two(buf + 11, tm.tm_hour);
	buf[13] = ':';
	two(buf + 14, tm.tm_min);
	buf[16] = ':';
	two(buf + 17, tm.tm_sec);
	buf[19] = '.';
	buf[20] = (char)('0' + millis / 100);
	two(buf + 21, (int)(millis % 100));
	buf[23] = 'Z';
	buf[24] = '\0';
}

int srv_path_in_dir(char *out, size_t size, const char *dir, const char *sub, const char *stored)
{
	const char *slash = strrchr(stored, '/');
	const char *name = slash ? slash + 1 : stored;
	int n;

	if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
		return -1;
	n = snprintf(out, size, "%s/%s/%s", dir, sub, name);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}
