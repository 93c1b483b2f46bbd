/*
 * acct_core.c: error records, UTF-8 checks and the names of error codes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "acct.h"

void acct_error_init(acct_error *err)
{
	if (!err)
		return;
	err->code = ACCT_OK;
	err->where[0] = '\0';
	err->text[0] = '\0';
}

int acct_error_set(acct_error *err, int code, const char *where, const char *fmt, ...)
{
	va_list ap;

	if (!err || err->code != ACCT_OK)
		return code;
	err->code = code;
	snprintf(err->where, sizeof(err->where), "%s", where ? where : "");
	va_start(ap, fmt);
	vsnprintf(err->text, sizeof(err->text), fmt, ap);
	va_end(ap);
	acct_utf8_scrub(err->where);
	acct_utf8_scrub(err->text);
	return code;
}

/* Length of the valid UTF-8 sequence starting at s (n > 0 bytes there), or
 * 0 when none starts there. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xc2) /* a continuation byte, or the lead of an overlong pair */
		return 0;
	if (s[0] < 0xe0) {
		len = 2;
		cp = s[0] & 0x1fu;
	} else if (s[0] < 0xf0) {
		len = 3;
		cp = s[0] & 0x0fu;
	} else if (s[0] < 0xf5) {
		len = 4;
		cp = s[0] & 0x07u;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3fu);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool acct_utf8_valid(const char *s, size_t n, size_t *ret_bad)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t len = utf8_sequence(u + i, n - i);

		if (len == 0) {
			if (ret_bad)
				*ret_bad = i;
			return false;
		}
		i += len;
	}
	return true;
}

void acct_utf8_scrub(char *s)
{
	unsigned char *u = (unsigned char *)s;
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		size_t len = utf8_sequence(u + i, n - i);

		if (len == 0) {
			u[i++] = '?';
			continue;
		}
		i += len;
	}
}

const char *acct_code_name(int code)
{
	switch (code) {
	case ACCT_OK: return "ok";
	case ACCT_EINVAL: return "invalid";
	case ACCT_EUNSUPPORTED: return "unsupported";
	case ACCT_ENUMERIC: return "numeric";
	case ACCT_ENOMEM: return "nomem";
	case ACCT_EEXCEEDED: return "exceeded";
	default: return "internal";
	}
}
