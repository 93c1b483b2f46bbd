/*
 * http_reply.c: what every handler answers with: JSON bodies, RFC 9457
 * problems (from a status or from an acct_error), and the bounded reading
 * of a JSON request body.  Free of libmicrohttpd, so that the daemon
 * (http_serve.c) and /metrics (http_metrics.c) share it without a loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "json.h"

/* ---- JSON output ---------------------------------------------------------- */

void srv_json_reply(srv_response *res, int status, json_t *body)
{
	if (!body) {
		/* json_pack failed: a bug or out of memory, never an empty 200. */
		srv_problem(res, 500, NULL, "the answer could not be built", NULL, NULL);
		return;
	}
	res->status = status;
	res->content_type = "application/json";
	res->body = body ? srv_json_dump(body) : NULL;
	res->len = res->body ? strlen(res->body) : 0;
	json_decref(body);
	if (body && !res->body)
		srv_problem(res, 500, "Internal error", "out of memory", NULL, NULL);
}

static const char *status_title(int status)
{
	switch (status) {
	case 400: return "Bad request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not found";
	case 405: return "Method not allowed";
	case 409: return "Conflict";
	case 413: return "Payload too large";
	case 415: return "Unsupported media type";
	case 422: return "Unprocessable content";
	case 501: return "Not implemented";
	case 503: return "Service unavailable";
	default: return "Internal error";
	}
}

/* A copy of s that is valid UTF-8 (see acct_utf8_scrub); NULL for NULL or
 * out of memory. */
static char *utf8_copy(const char *s)
{
	char *c = s ? strdup(s) : NULL;

	if (c)
		acct_utf8_scrub(c);
	return c;
}

void srv_problem(srv_response *res, int status, const char *title, const char *detail,
		 const char *field, json_t *extra)
{
	char type[64];
	char *d = utf8_copy(detail ? detail : ""), *f = utf8_copy(field);
	json_t *p;

	snprintf(type, sizeof(type), "https://dpgate.dev/problems/%d", status);
	p = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", title ? title : status_title(status),
		      "status", status, "detail", d ? d : "");
	if (p && f)
		json_object_set_new(p, "field", json_string(f));
	if (p && extra)
		json_object_update(p, extra);
	json_decref(extra);
	free(d);
	free(f);
	free(res->body);
	res->status = status;
	res->content_type = "application/problem+json";
	res->body = p ? srv_json_dump(p) : NULL;
	json_decref(p);
	if (!res->body) {
		/* Out of memory: still a problem document, never an empty body. */
		size_t size = 128;

		res->body = malloc(size);
		if (res->body)
			snprintf(res->body, size,
				 "{\"type\":\"https://dpgate.dev/problems/%d\",\"title\":\"%s\","
				 "\"status\":%d}",
				 status, status_title(status), status);
	}
	res->len = res->body ? strlen(res->body) : 0;
}

void srv_problem_from_error(srv_response *res, const acct_error *err)
{
	int status;

	switch (err->code) {
	case ACCT_EINVAL: status = 400; break;
	case ACCT_EUNSUPPORTED: status = 422; break;
	case ACCT_EEXCEEDED: status = 409; break;
	case ACCT_ENUMERIC: status = 422; break;
	default: status = 500; break;
	}
	/* Bad input names its field; "" (the JSON pointer of the whole
	 * document) when the body as a whole is at fault (malformed, not an
	 * object, a duplicate key). */
	srv_problem(res, status, NULL, err->text[0] ? err->text : acct_code_name(err->code),
		    err->where[0] || err->code == ACCT_EINVAL ? err->where : NULL, NULL);
}

/* Rejects nesting deeper than DPG_MAX_JSON_DEPTH before jansson recurses. */
static bool depth_ok(const char *data, size_t len)
{
	bool in_string = false, escaped = false;
	int depth = 0;

	for (size_t i = 0; i < len; i++) {
		char c = data[i];

		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{') {
			if (++depth > DPG_MAX_JSON_DEPTH)
				return false;
		} else if (c == ']' || c == '}')
			depth--;
	}
	return true;
}

/* ---- request bodies ------------------------------------------------------- */

json_t *srv_parse_body(const char *data, size_t len, acct_error *err)
{
	json_error_t jerr;
	json_t *j;

	if (len == 0) {
		acct_error_set(err, ACCT_EINVAL, "", "a JSON object body is required");
		return NULL;
	}
	if (!depth_ok(data, len)) {
		acct_error_set(err, ACCT_EINVAL, "", "JSON nests deeper than %d levels",
			       DPG_MAX_JSON_DEPTH);
		return NULL;
	}
	j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j && json_error_code(&jerr) == json_error_numeric_overflow) {
		/* Well-formed but out of range: name the value (the text before
		 * it parsed, so its pointer is known). */
		char where[ACCT_ERROR_WHERE_BYTES];

		srv_json_pointer_at(data, len, jerr.position > 0 ? (size_t)jerr.position : 0, where,
				    sizeof(where));
		acct_error_set(err, ACCT_EINVAL, where, "number out of range at line %d column %d: %s",
			       jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	if (!j) {
		acct_error_set(err, ACCT_EINVAL, "", "malformed JSON at line %d column %d: %s",
			       jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		acct_error_set(err, ACCT_EINVAL, "", "the body must be a JSON object");
		return NULL;
	}
	return j;
}

bool srv_media_type_is(const char *ct, const char *type)
{
	size_t n = strlen(type);

	/* the type itself, then its end, parameters (;) or spaces before them */
	return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' ||
						  ct[n] == '\t');
}

/*
 * JSON routes accept application/json, no Content-Type at all, and curl's
 * default for -d (application/x-www-form-urlencoded), so that a bare
 * `curl -d '{...}'` works; the body is parsed as JSON in every case.
 */
bool srv_json_content_type(const char *ct)
{
	return !ct || srv_media_type_is(ct, "application/json") ||
	       srv_media_type_is(ct, "application/x-www-form-urlencoded");
}
