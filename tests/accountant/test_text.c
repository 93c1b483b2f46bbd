/*
 * test_text.c: the UTF-8 checks, and error records that stay valid UTF-8
 * whatever they quote (the server sends them as JSON strings).
 */
#include <string.h>

#include <criterion/criterion.h>

#include "acct.h"

/* Byte strings with their length, since some hold NUL or stop mid-sequence. */
struct bytes {
	const char *s;
	size_t n;
	size_t bad; /* offset of the first byte that starts no valid sequence */
};

#define B(lit) lit, sizeof(lit) - 1

Test(utf8, valid_sequences_are_accepted)
{
	static const struct bytes ok[] = {
		{B(""), 0},
		{B("plain ascii, with\ttab"), 0},
		{B("\xc3\xa9"), 0},                     /* U+00E9, two bytes */
		{B("\xc2\x80"), 0},                     /* U+0080, the least two-byte value */
		{B("\xe2\x82\xac"), 0},                 /* U+20AC, three bytes */
		{B("\xe0\xa0\x80"), 0},                 /* U+0800, the least three-byte value */
		{B("\xed\x9f\xbf"), 0},                 /* U+D7FF, just below the surrogates */
		{B("\xee\x80\x80"), 0},                 /* U+E000, just above them */
		{B("\xf0\x9f\x98\x80"), 0},             /* U+1F600, four bytes */
		{B("\xf0\x90\x80\x80"), 0},             /* U+10000, the least four-byte value */
		{B("\xf4\x8f\xbf\xbf"), 0},             /* U+10FFFF, the greatest */
		{B("a\0b"), 0},                         /* U+0000 is a character */
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		size_t bad = 12345;

		cr_assert(acct_utf8_valid(ok[i].s, ok[i].n, &bad), "case %zu", i);
		cr_assert_eq(bad, 12345, "case %zu: the offset is written only on failure", i);
	}
}

Test(utf8, invalid_sequences_are_found_where_they_start)
{
	static const struct bytes bad[] = {
		{B("\x80"), 0},                  /* a continuation byte alone */
		{B("ab\xbf"), 2},
		{B("\xc0\x80"), 0},              /* overlong NUL */
		{B("\xc1\xbf"), 0},              /* overlong U+007F */
		{B("\xe0\x9f\xbf"), 0},          /* overlong U+07FF */
		{B("\xf0\x8f\xbf\xbf"), 0},      /* overlong U+FFFF */
		{B("x\xed\xa0\x80"), 1},         /* U+D800, a surrogate */
		{B("\xed\xbf\xbf"), 0},          /* U+DFFF */
		{B("\xf4\x90\x80\x80"), 0},      /* U+110000, past the last code point */
		{B("\xf5\x80\x80\x80"), 0},
		{B("\xff"), 0},
		{B("\xfe"), 0},
		{B("ok \xe2\x82"), 3},           /* cut short at the end */
		{B("\xe2\x82z"), 0},             /* cut short by an ASCII byte */
		{B("\xc3\xa9\xc3"), 2},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t at = 12345;

		cr_assert_not(acct_utf8_valid(bad[i].s, bad[i].n, &at), "case %zu", i);
		cr_assert_eq(at, bad[i].bad, "case %zu: %zu", i, at);
	}
}

Test(utf8, scrub_replaces_each_stray_byte_and_keeps_the_rest)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"plain", "plain"},
		{"caf\xc3\xa9", "caf\xc3\xa9"},
		{"a\xff" "b", "a?b"},
		{"x\xe2\x82", "x??"},
		{"\xed\xa0\x80!", "?" "?" "?!"}, /* "?" "?" keeps ??! from being a trigraph */
		{"\xc0\xaf\xe2\x82\xac", "??\xe2\x82\xac"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];

		strcpy(buf, cases[i].in);
		acct_utf8_scrub(buf);
		cr_assert_str_eq(buf, cases[i].out, "case %zu", i);
		cr_assert(acct_utf8_valid(buf, strlen(buf), NULL), "case %zu", i);
	}
}

Test(utf8, error_records_are_valid_utf8_even_when_quoting_bytes_or_cut_short)
{
	char name[3 * 200 + 1] = "";
	acct_error err;

	/* Quoting a client's stray bytes. */
	acct_error_init(&err);
	acct_error_set(&err, ACCT_EINVAL, "/csv/line/1/q\xff", "column 'q\xff' is odd");
	cr_assert_str_eq(err.where, "/csv/line/1/q?");
	cr_assert_str_eq(err.text, "column 'q?' is odd");

	/* A long name of three-byte characters: both buffers cut it, and an
	 * offset that is not a multiple of three leaves a partial character. */
	for (int i = 0; i < 200; i++)
		strcat(name, "\xe2\x82\xac");
	acct_error_init(&err);
	acct_error_set(&err, ACCT_EINVAL, name, "x%s", name);
	cr_assert_eq(strlen(err.where), ACCT_ERROR_WHERE_BYTES - 1);
	cr_assert_eq(strlen(err.text), ACCT_ERROR_TEXT_BYTES - 1);
	cr_assert(acct_utf8_valid(err.where, strlen(err.where), NULL));
	cr_assert(acct_utf8_valid(err.text, strlen(err.text), NULL));
	/* Only the cut character was replaced. */
	cr_assert_eq(memcmp(err.where, name, (ACCT_ERROR_WHERE_BYTES - 1) / 3 * 3), 0);
}
