/*
 * json_codec.c: checked JSON readers and the privacy-event codec.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpg_limits.h"
#include "json.h"
#include "base.h"

void srv_json_pointer(char *buf, size_t size, const char *where, const char *key)
{
	size_t n = (size_t)snprintf(buf, size, "%s/", where ? where : "");

	/* RFC 6901: '~' becomes "~0" and '/' becomes "~1". */
	for (const char *k = key; *k && n + 3 < size; k++) {
		if (*k == '~') {
			buf[n++] = '~';
			buf[n++] = '0';
		} else if (*k == '/') {
			buf[n++] = '~';
			buf[n++] = '1';
		} else {
			buf[n++] = *k;
		}
	}
	if (n < size)
		buf[n] = '\0';
}

struct scan_frame {
	bool object;
	long index;    /* arrays: the element's */
	char key[64];  /* objects: the member's (cut to size) */
	bool have_key; /* objects: a key came, its value not yet */
};

/* The pointer of the member or element about to start in frames[0..depth). */
static void scan_pointer(const struct scan_frame *frames, int depth, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int d = 0; d < depth; d++) {
		char prefix[ACCT_ERROR_WHERE_BYTES];

		srv_strcopy(prefix, sizeof(prefix), buf);
		if (frames[d].object)
			srv_json_pointer(buf, size, prefix, frames[d].key);
		else
			snprintf(buf, size, "%s/%ld", prefix, frames[d].index);
	}
}

/* Decodes the JSON string whose opening quote is data[i] into out (cut to
 * size, \u escapes outside ASCII as '?'); returns the index past its end. */
static size_t scan_string(const char *data, size_t len, size_t i, char *out, size_t size)
{
	size_t n = 0;

	for (i++; i < len && data[i] != '"'; i++) {
		char c = data[i];

		if (c == '\\' && i + 1 < len) {
			c = data[++i];
			switch (c) {
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				unsigned v = 0;
				size_t k;

				for (k = 1; k <= 4 && i + k < len && isxdigit((unsigned char)data[i + k]); k++)
					v = v * 16 + (unsigned)(isdigit((unsigned char)data[i + k]) ?
						data[i + k] - '0' : (tolower((unsigned char)data[i + k]) - 'a' + 10));
				i += k - 1;
				c = v > 0 && v < 0x80 ? (char)v : '?';
				break;
			}
			default: break; /* '"', '\\', '/' stand for themselves */
			}
		}
		if (n + 1 < size)
			out[n++] = c;
	}
	if (size)
		out[n] = '\0';
	return i + 1;
}

void srv_json_pointer_at(const char *data, size_t len, size_t pos, char *buf, size_t size)
{
	struct scan_frame frames[DPG_MAX_JSON_DEPTH + 1];
	int depth = 0;
	size_t i = 0;

	if (size == 0)
		return;
	buf[0] = '\0';
	if (pos > len)
		pos = len;
	while (i < pos) {
		char c = data[i];
		struct scan_frame *top = depth ? &frames[depth - 1] : NULL;
		bool is_key = top && top->object && !top->have_key;

		if (c == '{' || c == '[') {
			if (depth == DPG_MAX_JSON_DEPTH + 1)
				return;
			if (top && top->object)
				top->have_key = false; /* this container is the member's value */
			frames[depth++] = (struct scan_frame){.object = c == '{'};
			i++;
		} else if (c == '}' || c == ']') {
			if (depth > 0)
				depth--;
			i++;
		} else if (c == ',') {
			if (top && !top->object)
				top->index++;
			i++;
		} else if (c == '"' && is_key) {
			i = scan_string(data, len, i, top->key, sizeof(top->key));
			top->have_key = true;
		} else if (c == '"') {
			char skip[1];

			scan_pointer(frames, depth, buf, size);
			if (top && top->object)
				top->have_key = false;
			i = scan_string(data, len, i, skip, 0);
		} else if (c == ':' || isspace((unsigned char)c)) {
			i++;
		} else { /* a number or a literal */
			scan_pointer(frames, depth, buf, size);
			if (top && top->object)
				top->have_key = false;
			while (i < len && !strchr(",]}", data[i]) && !isspace((unsigned char)data[i]))
				i++;
		}
	}
}

/* Records "'key' <what><detail>" as a bad-input error at where/key. */
static int bad(acct_error *err, const char *where, const char *key, const char *what,
	       const char *detail)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	srv_json_pointer(ptr, sizeof(ptr), where, key);
	return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' %s%s", key, what, detail ? detail : "");
}

/* Shared front half of the readers: 1 = present, 0 = absent, <0 = error. */
static int lookup(const json_t *obj, const char *where, const char *key, unsigned flags,
		  json_t **ret, acct_error *err)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;

	if (v && json_is_null(v) && (flags & SRV_NULLABLE))
		v = NULL;
	if (!v) {
		if (flags & SRV_REQUIRED)
			return bad(err, where, key, "is required", NULL);
		return 0;
	}
	*ret = v;
	return 1;
}

static void format_bound(char *buf, size_t size, double lo, double hi, unsigned flags)
{
	snprintf(buf, size, " in %c%.17g, %.17g%c", (flags & SRV_LO_OPEN) ? '(' : '[', lo, hi,
		 (flags & SRV_HI_OPEN) ? ')' : ']');
}

/* Whether x lies in [lo, hi], with either end open as `flags` say. */
static bool real_in_range(double x, double lo, double hi, unsigned flags)
{
	return isfinite(x) && x >= lo && x <= hi && !((flags & SRV_LO_OPEN) && x == lo) &&
	       !((flags & SRV_HI_OPEN) && x == hi);
}

int srv_json_real(const json_t *obj, const char *where, const char *key, unsigned flags,
		  double lo, double hi, double *ret, acct_error *err)
{
	json_t *v = NULL;
	double x;
	char range[96];
	int rc = lookup(obj, where, key, flags, &v, err);

	if (rc <= 0)
		return rc;
	if (!json_is_number(v))
		return bad(err, where, key, "must be a number", NULL);
	x = json_number_value(v);
	if (real_in_range(x, lo, hi, flags)) {
		/* -0 reads as 0 (x + 0.0 is +0 for either zero): an answer that
		 * echoes a value must not say -0.0. */
		*ret = x + 0.0;
		return 1;
	}
	/* The range text only for the error (printf is costly per request). */
	format_bound(range, sizeof(range), lo, hi, flags);
	if (!isfinite(x))
		return bad(err, where, key, "must be a finite number", range);
	return bad(err, where, key, "must be a number", range);
}

int srv_json_array_real(const json_t *arr, const char *where, size_t i, unsigned flags,
			double lo, double hi, bool integer, double *ret, acct_error *err)
{
	const json_t *v = json_array_get(arr, i);
	char ptr[ACCT_ERROR_WHERE_BYTES], range[96];
	double x;

	snprintf(ptr, sizeof(ptr), "%s/%zu", where, i);
	if (!json_is_number(v))
		return acct_error_set(err, ACCT_EINVAL, ptr, "element %zu must be a number", i);
	x = json_number_value(v);
	if (!real_in_range(x, lo, hi, flags)) {
		format_bound(range, sizeof(range), lo, hi, flags);
		return acct_error_set(err, ACCT_EINVAL, ptr, "element %zu must be %s%s", i,
				      integer ? "an integer" : "a number", range);
	}
	if (integer && x != floor(x))
		return acct_error_set(err, ACCT_EINVAL, ptr, "element %zu must be an integer", i);
	*ret = x;
	return 0;
}

int srv_json_int(const json_t *obj, const char *where, const char *key, unsigned flags,
		 int64_t lo, int64_t hi, int64_t *ret, acct_error *err)
{
	json_t *v = NULL;
	int64_t x;
	char range[96];
	int rc = lookup(obj, where, key, flags, &v, err);

	if (rc <= 0)
		return rc;
	if (json_is_integer(v)) {
		x = (int64_t)json_integer_value(v);
	} else if (json_is_real(v)) {
		double d = json_real_value(v);

		/* 2^63 is the first double beyond int64. */
		if (!isfinite(d) || d != floor(d) || d < -9223372036854775808.0 ||
		    d >= 9223372036854775808.0)
			goto bad_int;
		x = (int64_t)d;
	} else {
		goto bad_int;
	}
	if (x >= lo && x <= hi) {
		*ret = x;
		return 1;
	}
bad_int:
	snprintf(range, sizeof(range), " in [%lld, %lld]", (long long)lo, (long long)hi);
	return bad(err, where, key, "must be an integer", range);
}

int srv_json_string(const json_t *obj, const char *where, const char *key, unsigned flags,
		    size_t max_bytes, const char **ret, acct_error *err)
{
	json_t *v = NULL;
	char lim[64];
	int rc = lookup(obj, where, key, flags, &v, err);

	if (rc <= 0)
		return rc;
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max_bytes) {
		snprintf(lim, sizeof(lim), " of 1 to %zu bytes", max_bytes);
		return bad(err, where, key, "must be a string", lim);
	}
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad(err, where, key, "must not contain NUL characters", NULL);
	*ret = json_string_value(v);
	return 1;
}

int srv_json_bool(const json_t *obj, const char *where, const char *key, unsigned flags,
		  bool *ret, acct_error *err)
{
	json_t *v = NULL;
	int rc = lookup(obj, where, key, flags, &v, err);

	if (rc <= 0)
		return rc;
	if (!json_is_boolean(v))
		return bad(err, where, key, "must be true or false", NULL);
	*ret = json_is_true(v);
	return 1;
}

int srv_json_only_keys(const json_t *obj, const char *where, const char *const *allowed,
		       acct_error *err)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v) {
		bool ok = false;

		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				ok = true;
		if (!ok)
			return bad(err, where, key, "is not a known field", NULL);
	}
	return 0;
}

int srv_json_neighbor(const json_t *obj, const char *where, const char *key,
		      acct_neighbor *ret, acct_error *err)
{
	const char *s = NULL;
	int rc = srv_json_string(obj, where, key, SRV_NULLABLE, 32, &s, err);

	if (rc < 0)
		return rc;
	if (rc == 0 || strcmp(s, "add_remove") == 0) {
		*ret = ACCT_ADD_REMOVE;
		return 0;
	}
	if (strcmp(s, "replace") == 0) {
		*ret = ACCT_REPLACE;
		return 0;
	}
	return bad(err, where, key, "must be \"add_remove\" or \"replace\"", NULL);
}

/* ---- output ------------------------------------------------------------ */

int srv_json_filter_orders(const json_t *obj, const char *where, acct_ledger_kind kind,
			   double *orders, unsigned *ret_n, acct_error *err)
{
	json_t *arr = json_object_get(obj, "filter_orders");
	size_t n = json_array_size(arr);
	double got[DPG_MAX_FILTER_ORDERS];
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (!arr) {
		*ret_n = 0;
		return 0;
	}
	srv_json_pointer(ptr, sizeof(ptr), where, "filter_orders");
	if (!json_is_array(arr) || n < 1 || n > DPG_MAX_FILTER_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, ptr,
				      "'filter_orders' must be an array of 1 to %d numbers",
				      DPG_MAX_FILTER_ORDERS);
	if (kind != ACCT_LEDGER_RDP)
		return acct_error_set(err, ACCT_EINVAL, ptr, "only an rdp ledger has filter orders");
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(arr, i);
		char at[ACCT_ERROR_WHERE_BYTES + 24];

		snprintf(at, sizeof(at), "%s/%zu", ptr, i);
		if (!json_is_number(x))
			return acct_error_set(err, ACCT_EINVAL, at, "a filter order must be a number");
		got[i] = json_number_value(x);
	}
	memcpy(orders, got, n * sizeof(got[0]));
	*ret_n = (unsigned)n;
	return 0;
}

/* The shortest form that reads back as the same double (srv_fmt.h). */
static void out_real(srv_buf *b, double x)
{
	char buf[SRV_FMT_REAL_MAX];

	srv_buf_put(b, buf, srv_fmt_real(buf, x));
}

/*
 * A JSON string: '"', '\\' and control characters escaped, everything else
 * (valid UTF-8, which jansson guarantees for its strings) copied as is.
 */
static void out_string(srv_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;

	srv_buf_put(b, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		srv_buf_put(b, s + start, i - start);
		start = i + 1;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			srv_buf_put(b, esc, 2);
		} else {
			esc[0] = '\\';
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			srv_buf_put(b, esc, 6);
		}
	}
	srv_buf_put(b, s + start, len - start);
	srv_buf_put(b, "\"", 1);
}

static void out_value(srv_buf *b, const json_t *j)
{
	char buf[32];

	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		const char *key;
		json_t *v;
		bool first = true;

		srv_buf_put(b, "{", 1);
		json_object_foreach((json_t *)j, key, v) {
			if (!first)
				srv_buf_put(b, ",", 1);
			first = false;
			out_string(b, key, strlen(key));
			srv_buf_put(b, ":", 1);
			out_value(b, v);
		}
		srv_buf_put(b, "}", 1);
		break;
	}
	case JSON_ARRAY:
		srv_buf_put(b, "[", 1);
		for (size_t i = 0; i < json_array_size(j); i++) {
			if (i)
				srv_buf_put(b, ",", 1);
			out_value(b, json_array_get(j, i));
		}
		srv_buf_put(b, "]", 1);
		break;
	case JSON_STRING:
		out_string(b, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		srv_buf_put(b, buf, srv_fmt_int64(buf, (int64_t)json_integer_value(j)));
		break;
	case JSON_REAL:
		out_real(b, json_real_value(j));
		break;
	case JSON_TRUE: srv_buf_put(b, "true", 4); break;
	case JSON_FALSE: srv_buf_put(b, "false", 5); break;
	case JSON_NULL: srv_buf_put(b, "null", 4); break;
	}
}

int srv_json_hand_over(json_t *ans, bool failed, json_t **ret_answer, acct_error *err)
{
	if (failed) {
		json_decref(ans);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	*ret_answer = ans;
	return 0;
}

void srv_json_dump_append(srv_buf *b, const json_t *j)
{
	out_value(b, j);
}

char *srv_json_dump(const json_t *j)
{
	srv_buf b = {0};

	if (!j)
		return NULL;
	out_value(&b, j);
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* ---- events ------------------------------------------------------------ */

struct parse_state {
	unsigned nodes;
	acct_error *err;
};

static int parse_node(const json_t *j, const char *where, unsigned depth, struct parse_state *ps,
		      acct_event **ret);

/* The field of parameter `p` in `ev`, whose type the parameter is of, to
 * write and to read. */
static void *param_field(acct_event *ev, const acct_event_param *p)
{
	return (char *)ev + p->offset;
}

static const void *param_value(const acct_event *ev, const acct_event_param *p)
{
	return (const char *)ev + p->offset;
}

/* Parameter `p`'s sub-event, at where/<name>. */
static int parse_child(const json_t *j, const char *where, const acct_event_param *p,
		       unsigned depth, struct parse_state *ps, acct_event *ev)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	json_t *c = json_object_get(j, p->name);

	srv_json_pointer(ptr, sizeof(ptr), where, p->name);
	if (!c)
		return acct_error_set(ps->err, ACCT_EINVAL, ptr, "'%s' is required", p->name);
	return parse_node(c, ptr, depth + 1, ps, param_field(ev, p));
}

/* Parameter `p`'s list of sub-events, at where/<name>/<index>. */
static int parse_children(const json_t *j, const char *where, const acct_event_param *p,
			  unsigned depth, struct parse_state *ps, acct_event *ev)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	json_t *arr = json_object_get(j, p->name);
	acct_event **list;
	size_t *count = (size_t *)((char *)ev + p->count_offset);
	size_t n;
	int rc = 0;

	srv_json_pointer(ptr, sizeof(ptr), where, p->name);
	if (!json_is_array(arr))
		return acct_error_set(ps->err, ACCT_EINVAL, ptr, "'%s' must be an array of events",
				      p->name);
	n = json_array_size(arr);
	if (n > (size_t)p->max)
		return acct_error_set(ps->err, ACCT_EINVAL, ptr, "too many events");
	list = n ? calloc(n, sizeof(acct_event *)) : NULL;
	if (n && !list)
		return acct_error_set(ps->err, ACCT_ENOMEM, ptr, "out of memory");
	*(acct_event ***)param_field(ev, p) = list;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		char item[ACCT_ERROR_WHERE_BYTES + 24];

		snprintf(item, sizeof(item), "%.*s/%zu", ACCT_ERROR_WHERE_BYTES - 1, ptr, i);
		rc = parse_node(json_array_get(arr, i), item, depth + 1, ps, &list[i]);
		if (rc >= 0)
			*count = i + 1;
	}
	return rc;
}

/* The srv_json_real flags of a required real parameter. */
static unsigned real_flags(const acct_event_param *p)
{
	return SRV_REQUIRED | ((p->flags & ACCT_PARAM_LO_OPEN) ? SRV_LO_OPEN : 0) |
	       ((p->flags & ACCT_PARAM_HI_OPEN) ? SRV_HI_OPEN : 0);
}

/*
 * Reads parameter i of the event `ev` (of a type with parameters
 * params[0..]) from its JSON `j` at `where`; < 0 on error.
 */
static int parse_param(const json_t *j, const char *where, const acct_event_param *params,
		       size_t i, unsigned depth, struct parse_state *ps, acct_event *ev)
{
	const acct_event_param *p = &params[i];
	int64_t hi = p->max, i64 = 0;
	int rc;

	if ((p->flags & ACCT_PARAM_MAX_PREV) && i > 0)
		hi = *(const int64_t *)param_value(ev, &params[i - 1]);
	switch (p->kind) {
	case ACCT_PARAM_REAL:
		return srv_json_real(j, where, p->name, real_flags(p), p->lo, p->hi,
				     param_field(ev, p), ps->err);
	case ACCT_PARAM_INT:
		return srv_json_int(j, where, p->name, SRV_REQUIRED, p->min, hi,
				    param_field(ev, p), ps->err);
	case ACCT_PARAM_INT_REAL:
		rc = srv_json_int(j, where, p->name, SRV_REQUIRED, p->min, hi, &i64, ps->err);
		if (rc > 0)
			*(double *)param_field(ev, p) = (double)i64;
		return rc;
	case ACCT_PARAM_EVENT:
		return parse_child(j, where, p, depth, ps, ev);
	case ACCT_PARAM_EVENTS:
		return parse_children(j, where, p, depth, ps, ev);
	}
	return acct_error_set(ps->err, ACCT_EINTERNAL, where, "unhandled parameter kind");
}

/* 0 when every member of the event `j` is "type" or one of its n params. */
static int only_params(const json_t *j, const char *where, const acct_event_param *params,
		       size_t n, acct_error *err)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)j, key, v) {
		bool ok = strcmp(key, "type") == 0;

		for (size_t i = 0; i < n && !ok; i++)
			ok = strcmp(params[i].name, key) == 0;
		if (!ok)
			return bad(err, where, key, "is not a known field", NULL);
	}
	return 0;
}

/* The event type named by the "type" member of the object `j`. */
static int parse_type(const json_t *j, const char *where, acct_event_type *ret_type,
		      acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	const char *tname = NULL;
	int rc = srv_json_string(j, where, "type", SRV_REQUIRED, 64, &tname, err);

	if (rc < 0)
		return rc;
	if (acct_event_type_from_name(tname, ret_type) < 0) {
		srv_json_pointer(ptr, sizeof(ptr), where, "type");
		return acct_error_set(err, ACCT_EINVAL, ptr, "unknown event type '%s'", tname);
	}
	return 0;
}

/*
 * One event node and, through its parameters, the tree under it: the
 * members are read in the order of the type's parameters
 * (acct_event_params), so the first bad one is the one reported.
 */
static int parse_node(const json_t *j, const char *where, unsigned depth, struct parse_state *ps,
		      acct_event **ret)
{
	acct_error *err = ps->err;
	const acct_event_param *params;
	acct_event *ev = NULL;
	acct_event_type type;
	size_t n = 0;
	int rc;

	if (depth > DPG_MAX_EVENT_DEPTH)
		return acct_error_set(err, ACCT_EINVAL, where, "events nest deeper than %d levels",
				      DPG_MAX_EVENT_DEPTH);
	if (++ps->nodes > DPG_MAX_EVENT_NODES)
		return acct_error_set(err, ACCT_EINVAL, where, "an event may hold at most %d nodes",
				      DPG_MAX_EVENT_NODES);
	if (!json_is_object(j))
		return acct_error_set(err, ACCT_EINVAL, where, "an event must be a JSON object");
	rc = parse_type(j, where, &type, err);
	if (rc < 0)
		return rc;
	params = acct_event_params(type, &n);
	ev = acct_event_new(type);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");
	for (size_t i = 0; i < n && rc >= 0; i++)
		rc = parse_param(j, where, params, i, depth, ps, ev);
	if (rc >= 0)
		rc = only_params(j, where, params, n, err);
	if (rc < 0)
		goto out;
	*ret = ev;
	ev = NULL;
out:
	acct_event_free(ev);
	return rc < 0 ? rc : 0;
}

int srv_event_parse(const json_t *json, const char *where, acct_event **ret_event,
		    acct_error *err)
{
	struct parse_state ps = {.nodes = 0, .err = err};

	return parse_node(json, where ? where : "", 0, &ps, ret_event);
}

json_t *srv_json_array_of(size_t n, json_t *(*item)(const void *v, size_t i), const void *v)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++) {
		/* A NULL item (out of memory) makes the append fail. */
		if (json_array_append_new(arr, item(v, i)) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *real_at(const void *v, size_t i)
{
	return json_real(((const double *)v)[i]);
}

static json_t *int_at(const void *v, size_t i)
{
	return json_integer(((const int64_t *)v)[i]);
}

static json_t *event_at(const void *v, size_t i)
{
	return srv_event_to_json(((acct_event *const *)v)[i]);
}

json_t *srv_json_real_array(const double *v, size_t n)
{
	return srv_json_array_of(n, real_at, v);
}

json_t *srv_json_int_array(const int64_t *v, size_t n)
{
	return srv_json_array_of(n, int_at, v);
}

/* The JSON array of the sub-events of parameter `p` (ACCT_PARAM_EVENTS). */
static json_t *children_to_json(const acct_event *ev, const acct_event_param *p)
{
	acct_event *const *list = *(acct_event *const *const *)param_value(ev, p);
	size_t n = *(const size_t *)((const char *)ev + p->count_offset);

	return srv_json_array_of(n, event_at, list);
}

/* The JSON of parameter `p` of `ev`; NULL when out of memory. */
static json_t *param_to_json(const acct_event *ev, const acct_event_param *p)
{
	const void *field = param_value(ev, p);

	switch (p->kind) {
	case ACCT_PARAM_REAL:
		return json_real(*(const double *)field);
	case ACCT_PARAM_INT:
		return json_integer((json_int_t)*(const int64_t *)field);
	case ACCT_PARAM_INT_REAL:
		return json_integer((json_int_t)*(const double *)field);
	case ACCT_PARAM_EVENT:
		return srv_event_to_json(*(acct_event *const *)field);
	case ACCT_PARAM_EVENTS:
		return children_to_json(ev, p);
	}
	return NULL;
}

json_t *srv_event_to_json(const acct_event *ev)
{
	const acct_event_param *params;
	json_t *j;
	size_t n = 0;

	if (!ev)
		return NULL;
	params = acct_event_params(ev->type, &n);
	if (!params)
		return NULL;
	j = json_pack("{s:s}", "type", acct_event_type_name(ev->type));
	if (!j)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (json_object_set_new(j, params[i].name, param_to_json(ev, &params[i])) < 0) {
			json_decref(j);
			return NULL;
		}
	}
	return j;
}

bool srv_id_ok(const char *s)
{
	size_t n = strlen(s);

	/* "." and "..": clients and proxies resolve such path segments away,
	 * so no path would reach what they name. */
	if (n == 0 || n > DPG_MAX_ID_BYTES || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}
