/*
 * http_cache.c: what lets a client revalidate an answer rather than fetch
 * it again: the entity tag of a body, the If-None-Match comparison, and
 * the `wait` parameter of a long-poll.  Free of libmicrohttpd, so the unit
 * tests call it directly.
 *
 * The tag is a strong hash of the body (BLAKE2b, 128 bits): it changes
 * exactly when the bytes a client would receive change, whatever the cause
 * (a charge, a reservation, an archive, a rename, a job's step, a key's
 * scope that hides a dataset), with nothing to keep in step.  Its price is
 * building the body before a 304, which a GET does anyway to know whether
 * it changed.  A version counter bumped by every write would skip that
 * work, but every writer (each store statement, the job pool's in-memory
 * progress, each key's view of the list) would have to bump the right
 * counters, and one forgotten bump serves a stale answer for ever; the
 * bodies here are a few kilobytes, so the hash is the safer choice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "http.h"

#define TAG_HASH_BYTES 16

void srv_etag_of(const char *body, size_t len, char ret[SRV_ETAG_BYTES])
{
	unsigned char h[TAG_HASH_BYTES];
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	crypto_generichash(h, sizeof(h), (const unsigned char *)body, len, NULL, 0);
	ret[n++] = '"';
	for (size_t i = 0; i < sizeof(h); i++) {
		ret[n++] = hex[h[i] >> 4];
		ret[n++] = hex[h[i] & 15];
	}
	ret[n++] = '"';
	ret[n] = '\0';
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

bool srv_etag_matches(const char *if_none_match, const char *etag)
{
	size_t tag_len = strlen(etag);
	const char *p = if_none_match;

	if (!p)
		return false;
	/* RFC 9110 13.1.2: "*" or a list of entity tags, compared weakly
	 * (a W/ prefix ignored). */
	while (*p) {
		const char *start, *end;

		while (is_ows(*p) || *p == ',')
			p++;
		if (!*p)
			break;
		start = p;
		end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		p = end;
		while (end > start && is_ows(end[-1]))
			end--;
		if (end - start == 1 && *start == '*')
			return true;
		if (end - start > 2 && start[0] == 'W' && start[1] == '/')
			start += 2;
		if ((size_t)(end - start) == tag_len && memcmp(start, etag, tag_len) == 0)
			return true;
	}
	return false;
}

int srv_wait_parse(const char *text, unsigned *ret_seconds)
{
	unsigned v = 0;

	if (!text || !*text || strlen(text) > 2)
		return -1;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (v == 0 || v > DPG_MAX_LONG_POLL_S)
		return -1;
	*ret_seconds = v;
	return 0;
}
