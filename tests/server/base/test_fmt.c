/*
 * test_fmt.c: srv_fmt's printf-free number and time text against glibc.
 *
 * The reference for reals is the loop the server used before: the shortest
 * of snprintf %.15g/%.16g/%.17g that strtod reads back, with ".0" appended
 * to an integer-looking text.  srv_fmt_real must print exactly those bytes
 * for every double; it is checked on special values, on decimals with few
 * digits at every exponent the fast path covers (where it must take over),
 * on random bit patterns and on sums like the ledger's running totals.
 */
#include <criterion/criterion.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "base.h"

static void reference_real(char buf[64], double x)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, 64, "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	if (!strpbrk(buf, ".eEn"))
		strcat(buf, ".0");
}

static void check_real(double x)
{
	char want[64], got[SRV_FMT_REAL_MAX + 8];
	size_t n;

	memset(got, 'X', sizeof(got));
	reference_real(want, x);
	n = srv_fmt_real(got, x);
	cr_assert_lt(n, SRV_FMT_REAL_MAX, "%a: length %zu", x, n);
	cr_assert_eq(got[n], '\0', "%a: not terminated at its length", x);
	cr_assert_str_eq(got, want, "%a (%.17g): got %s, want %s", x, x, got, want);
}

/* xorshift64*: a reproducible stream of bit patterns (not for privacy). */
static uint64_t next_u64(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

Test(fmt_real, special_values)
{
	static const double xs[] = {0.0, 1.0, -1.0, 0.1, 0.001, 1e-5, 1e-05, 0.5, 2.5, 1e15,
				    1e16, 1e17, 1e21, 1e22, 1e23, 123456789012345.0,
				    1234567890123456.0, 12345678901234567.0, 9007199254740993.0,
				    0.30000000000000004, 1.0 / 3.0, 2.0 / 3.0, M_PI, M_E,
				    DBL_MAX, DBL_MIN, DBL_EPSILON, 4.9406564584124654e-324,
				    1e-7, 1e-8, 1e-22, 1e-23, 1e-300, 1e300, 99999999999999.9,
				    999999999999999.0, 9999999999999998.0, 0.0001, 0.00001,
				    123e-20, 5e-324, 1.7976931348623157e308};

	for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
		check_real(xs[i]);
		check_real(-xs[i]);
	}
	check_real(-0.0);
	check_real(NAN);
	check_real(INFINITY);
	check_real(-INFINITY);
}

Test(fmt_real, few_digit_decimals_at_every_scale)
{
	char text[64];
	uint64_t s = 0x9e3779b97f4a7c15ULL;

	/* m * 10^e for m of 1..17 digits and e across and past the fast
	 * path's range: the reference reads the same text back. */
	for (int digits = 1; digits <= 17; digits++)
		for (int e = -40; e <= 40; e++)
			for (int rep = 0; rep < 8; rep++) {
				uint64_t lo = 1, m;

				for (int i = 1; i < digits; i++)
					lo *= 10;
				m = lo + next_u64(&s) % (lo * 9);
				snprintf(text, sizeof(text), "%" PRIu64 "e%d", m, e);
				check_real(strtod(text, NULL));
			}
}

Test(fmt_real, random_bit_patterns)
{
	uint64_t s = 88172645463325252ULL;

	for (int i = 0; i < 300000; i++) {
		uint64_t bits = next_u64(&s);
		double x;

		memcpy(&x, &bits, sizeof(x));
		check_real(x);
	}
}

Test(fmt_real, running_sums_and_ratios)
{
	double sum = 0.0;
	uint64_t s = 42;

	for (int i = 0; i < 100000; i++) {
		sum += 0.001;
		check_real(sum);
		check_real((double)(next_u64(&s) % 1000000) / (double)(1 + next_u64(&s) % 1000));
	}
}

Test(fmt_int64, matches_printf)
{
	static const int64_t vs[] = {0, 1, -1, 9, 10, -10, 99, 100, 1234567890, INT64_MAX,
				     INT64_MIN, INT64_MIN + 1, -9223372036854775807LL};
	uint64_t s = 7;
	char want[32], got[24];

	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
		snprintf(want, sizeof(want), "%" PRId64, vs[i]);
		cr_assert_eq(srv_fmt_int64(got, vs[i]), strlen(want));
		cr_assert_str_eq(got, want);
	}
	for (int i = 0; i < 100000; i++) {
		int64_t v = (int64_t)next_u64(&s) >> (next_u64(&s) % 63);

		snprintf(want, sizeof(want), "%" PRId64, v);
		cr_assert_eq(srv_fmt_int64(got, v), strlen(want));
		cr_assert_str_eq(got, want);
	}
}

Test(fmt_timestamp, matches_strftime)
{
	static const int64_t ts[] = {0, 1, 59, 951782400 /* 2000-02-29 */, 1700000000,
				     4102444799 /* 2099-12-31T23:59:59 */, 253402300799};
	uint64_t s = 3;

	for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]) + 2000; i++) {
		int64_t t = i < sizeof(ts) / sizeof(ts[0]) ? ts[i]
							    : (int64_t)(next_u64(&s) % 253402300800ULL);
		long ms = (long)(next_u64(&s) % 1000);
		time_t tt = (time_t)t;
		struct tm tm;
		char date[32], want[40], got[32];

		gmtime_r(&tt, &tm);
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(want, sizeof(want), "%s.%03ldZ", date, ms);
		srv_fmt_timestamp(got, t, ms);
		cr_assert_str_eq(got, want);
	}
}

Test(fmt_real, sixteen_and_seventeen_digits_exactly)
{
	uint64_t s = 0x2545f4914f6cdd1dULL;

	/* Every binade of the 128-bit path, [2^-16, 2^52): random mantissas,
	 * the powers of two (whose gap below is half the gap above) and their
	 * neighbours, and doubles next to powers of ten (where rounding to 16
	 * or 17 digits carries into a new digit). */
	for (int e = -16; e < 52; e++) {
		double p2 = ldexp(1.0, e);

		check_real(p2);
		check_real(nextafter(p2, 0.0));
		check_real(nextafter(p2, INFINITY));
		for (int i = 0; i < 4000; i++) {
			uint64_t mant = (1ULL << 52) | (next_u64(&s) >> 12);

			check_real(ldexp((double)mant, e - 52));
		}
	}
	for (int e = -4; e <= 15; e++) {
		double p10 = pow(10.0, e);

		for (int j = 0; j < 40; j++) {
			check_real(p10);
			p10 = nextafter(p10, 0.0);
		}
	}
}

/* ---- the charge answer's budget, written as text ------------------------ */

#include "json.h"

/* A dataset of the given ledger with `n` events of `event_json` spent and
 * `r` reserved, its totals summed as the store sums them. */
static srv_dataset dataset_after(acct_ledger_kind kind, double eps_b, double delta_b,
				 const char *event_json, int n, int r)
{
	srv_dataset ds;
	acct_filter f;
	acct_event *ev = NULL;
	acct_cost c;
	json_t *j = json_loads(event_json, 0, NULL);

	memset(&ds, 0, sizeof(ds));
	strcpy(ds.id, "d");
	ds.accountant = kind;
	ds.neighbor = ACCT_ADD_REMOVE;
	ds.budget_epsilon = eps_b;
	ds.budget_delta = delta_b;
	cr_assert_eq(acct_filter_init(&f, kind, ACCT_ADD_REMOVE, eps_b, delta_b, NULL), 0);
	acct_filter_zero(&f, &ds.spent);
	acct_filter_zero(&f, &ds.reserved);
	cr_assert(j);
	cr_assert_eq(srv_event_parse(j, "/event", &ev, NULL), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 1e-9, &c, NULL), 0);
	for (int i = 0; i < n; i++)
		acct_cost_add_up(&ds.spent, &c);
	for (int i = 0; i < r; i++)
		acct_cost_add_up(&ds.reserved, &c);
	ds.charges = n;
	ds.open_reservations = r;
	acct_event_free(ev);
	json_decref(j);
	return ds;
}

Test(budget_text, same_bytes_as_the_json_tree)
{
	static const struct {
		acct_ledger_kind kind;
		const char *event;
	} cases[] = {
		{ACCT_LEDGER_BASIC, "{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}"},
		{ACCT_LEDGER_BASIC, "{\"type\":\"epsilon_delta\",\"epsilon\":0.1,\"delta\":1e-7}"},
		{ACCT_LEDGER_BASIC, "{\"type\":\"laplace\",\"noise_multiplier\":3}"},
		{ACCT_LEDGER_RDP, "{\"type\":\"gaussian\",\"noise_multiplier\":4}"},
		{ACCT_LEDGER_RDP, "{\"type\":\"laplace\",\"noise_multiplier\":10}"},
		{ACCT_LEDGER_ZCDP, "{\"type\":\"gaussian\",\"noise_multiplier\":7}"},
	};
	static const int counts[][2] = {{0, 0}, {1, 0}, {3, 1}, {17, 2}, {250, 0}, {999, 7}};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			srv_dataset ds = dataset_after(cases[i].kind, 1e6, 1e-5, cases[i].event,
						       counts[k][0], counts[k][1]);
			json_t *tree = srv_dataset_budget_json(&ds);
			char *want = srv_json_dump(tree), got[1024];
			size_t n = srv_dataset_budget_text(&ds, got, sizeof(got));

			cr_assert(want);
			cr_assert_eq(n, strlen(want), "%s x%d", cases[i].event, counts[k][0]);
			cr_assert_str_eq(got, want);
			/* Too small a buffer is refused, not cut. */
			cr_assert_eq(srv_dataset_budget_text(&ds, got, n), 0);
			free(want);
			json_decref(tree);
		}
}

/*
 * Stored compositions: subnormal coordinates (a Gaussian with a noise
 * multiplier near 1e154 costs about 1e-308 at every order) read back
 * exactly, and text below every double reads as the smallest double, never
 * as 0: a stored cost is never read as less than it is.
 */
Test(cost_text, subnormals_read_back_and_nothing_reads_lower)
{
	acct_cost c = {.n = 4}, back;
	char *text;

	c.v[0] = DBL_TRUE_MIN;
	c.v[1] = ldexp(0.75, -1022) * 1.5625; /* subnormal, not a power of two */
	c.v[2] = DBL_MIN;
	c.v[3] = INFINITY;
	text = srv_cost_to_text(&c);
	cr_assert_not_null(text);
	cr_assert_eq(srv_cost_from_text(text, &back), 0, "%s", text);
	cr_assert_eq(back.n, 4);
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(memcmp(&back.v[i], &c.v[i], sizeof(double)), 0, "%s [%u]", text, i);
	free(text);
	cr_assert_eq(srv_cost_from_text("[1e-400,0.0]", &back), 0);
	cr_assert_eq(back.v[0], DBL_TRUE_MIN);
	cr_assert_eq(back.v[1], 0.0);
	cr_assert_eq(srv_cost_from_text("[-1e-3]", &back), -1);
	cr_assert_eq(srv_cost_from_text("[0.5,x]", &back), -1);
	cr_assert_eq(srv_cost_from_text("[nan]", &back), -1);
}
