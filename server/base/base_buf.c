/*
 * base_buf.c: a growable, NUL-terminated text buffer for output built in
 * pieces (a JSON dump, the /metrics exposition, a request body).  A failed
 * growth is remembered rather than returned at each call, so a writer
 * appends freely and checks `failed` once at the end.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

/* Makes room for `n` more bytes and a NUL, doubling the capacity from
 * 256 bytes.  False (and b->failed set) when out of memory. */
static bool buf_reserve(srv_buf *b, size_t n)
{
	size_t cap;
	char *ns;

	if (b->failed)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap *= 2;
	ns = realloc(b->s, cap);
	if (!ns) {
		b->failed = true;
		return false;
	}
	b->s = ns;
	b->cap = cap;
	return true;
}

bool srv_buf_put(srv_buf *b, const char *text, size_t n)
{
	if (!buf_reserve(b, n))
		return false;
	memcpy(b->s + b->len, text, n);
	b->len += n;
	b->s[b->len] = '\0';
	return true;
}

void srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!buf_reserve(b, 0))
		return;
	/* Straight into the free room; only text that does not fit is
	 * formatted a second time, after the buffer grew. */
	va_start(ap, fmt);
	n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (!buf_reserve(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}
