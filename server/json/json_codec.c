/*
 * srv_json.c: checked JSON readers and the privacy-event codec.
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
	if (isfinite(x) && x >= lo && x <= hi && !((flags & SRV_LO_OPEN) && x == lo) &&
	    !((flags & SRV_HI_OPEN) && x == hi)) {
		*ret = x;
		return 1;
	}
	/* The range text only for the error (printf is costly per request). */
	format_bound(range, sizeof(range), lo, hi, flags);
	if (!isfinite(x))
		return bad(err, where, key, "must be a finite number", range);
	return bad(err, where, key, "must be a number", range);
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

struct out_buf {
	char *s;
	size_t len, cap;
	bool failed;
};

static void out_put(struct out_buf *b, const char *text, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *ns;

		while (cap < b->len + n + 1)
			cap *= 2;
		ns = realloc(b->s, cap);
		if (!ns) {
			b->failed = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, text, n);
	b->len += n;
	b->s[b->len] = '\0';
}

/* The shortest form that reads back as the same double (srv_fmt.h). */
static void out_real(struct out_buf *b, double x)
{
	char buf[SRV_FMT_REAL_MAX];

	out_put(b, buf, srv_fmt_real(buf, x));
}

/*
 * A JSON string: '"', '\\' and control characters escaped, everything else
 * (valid UTF-8, which jansson guarantees for its strings) copied as is.
 */
static void out_string(struct out_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;

	out_put(b, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		out_put(b, s + start, i - start);
		start = i + 1;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			out_put(b, esc, 2);
		} else {
			esc[0] = '\\';
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			out_put(b, esc, 6);
		}
	}
	out_put(b, s + start, len - start);
	out_put(b, "\"", 1);
}

static void out_value(struct out_buf *b, const json_t *j)
{
	char buf[32];

	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		const char *key;
		json_t *v;
		bool first = true;

		out_put(b, "{", 1);
		json_object_foreach((json_t *)j, key, v) {
			if (!first)
				out_put(b, ",", 1);
			first = false;
			out_string(b, key, strlen(key));
			out_put(b, ":", 1);
			out_value(b, v);
		}
		out_put(b, "}", 1);
		break;
	}
	case JSON_ARRAY:
		out_put(b, "[", 1);
		for (size_t i = 0; i < json_array_size(j); i++) {
			if (i)
				out_put(b, ",", 1);
			out_value(b, json_array_get(j, i));
		}
		out_put(b, "]", 1);
		break;
	case JSON_STRING:
		out_string(b, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		out_put(b, buf, srv_fmt_int64(buf, (int64_t)json_integer_value(j)));
		break;
	case JSON_REAL:
		out_real(b, json_real_value(j));
		break;
	case JSON_TRUE: out_put(b, "true", 4); break;
	case JSON_FALSE: out_put(b, "false", 5); break;
	case JSON_NULL: out_put(b, "null", 4); break;
	}
}

char *srv_json_dump(const json_t *j)
{
	struct out_buf b = {0};

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

#define POS_REAL (SRV_REQUIRED | SRV_LO_OPEN)

static int parse_child(const json_t *j, const char *where, const char *key, unsigned depth,
		       struct parse_state *ps, acct_event **ret)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	json_t *c = json_object_get(j, key);

	srv_json_pointer(ptr, sizeof(ptr), where, key);
	if (!c)
		return acct_error_set(ps->err, ACCT_EINVAL, ptr, "'%s' is required", key);
	return parse_node(c, ptr, depth + 1, ps, ret);
}

static int parse_node(const json_t *j, const char *where, unsigned depth, struct parse_state *ps,
		      acct_event **ret)
{
	static const char *const k_nm[] = {"type", "noise_multiplier", NULL};
	static const char *const k_dg[] = {"type", "sigma", "sensitivity", NULL};
	static const char *const k_dl[] = {"type", "noise_parameter", "sensitivity", NULL};
	static const char *const k_rr[] = {"type", "noise_parameter", "num_buckets", NULL};
	static const char *const k_eps[] = {"type", "epsilon", NULL};
	static const char *const k_ed[] = {"type", "epsilon", "delta", NULL};
	static const char *const k_rho[] = {"type", "rho", NULL};
	static const char *const k_ps[] = {"type", "sampling_probability", "event", NULL};
	static const char *const k_swor[] = {"type", "source_dataset_size", "sample_size", "event", NULL};
	static const char *const k_sc[] = {"type", "count", "event", NULL};
	static const char *const k_c[] = {"type", "events", NULL};
	static const char *const k_sig[] = {"type", "sigma", NULL};
	static const char *const k_gnss[] = {"type", "beta", "sigma", NULL};
	acct_error *err = ps->err;
	acct_event *ev = NULL;
	const char *tname = NULL;
	acct_event_type type;
	const char *const *keys;
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int64_t i64 = 0;
	int rc;

	if (depth > DPG_MAX_EVENT_DEPTH)
		return acct_error_set(err, ACCT_EINVAL, where, "events nest deeper than %d levels",
				      DPG_MAX_EVENT_DEPTH);
	if (++ps->nodes > DPG_MAX_EVENT_NODES)
		return acct_error_set(err, ACCT_EINVAL, where, "an event may hold at most %d nodes",
				      DPG_MAX_EVENT_NODES);
	if (!json_is_object(j))
		return acct_error_set(err, ACCT_EINVAL, where, "an event must be a JSON object");
	rc = srv_json_string(j, where, "type", SRV_REQUIRED, 64, &tname, err);
	if (rc < 0)
		return rc;
	if (acct_event_type_from_name(tname, &type) < 0) {
		srv_json_pointer(ptr, sizeof(ptr), where, "type");
		return acct_error_set(err, ACCT_EINVAL, ptr, "unknown event type '%s'", tname);
	}
	ev = acct_event_new(type);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");

	switch (type) {
	case ACCT_EV_GAUSSIAN:
		keys = k_nm;
		rc = srv_json_real(j, where, "noise_multiplier", POS_REAL, 0, HUGE_VAL,
				   &ev->u.gaussian.noise_multiplier, err);
		break;
	case ACCT_EV_LAPLACE:
		keys = k_nm;
		rc = srv_json_real(j, where, "noise_multiplier", POS_REAL, 0, HUGE_VAL,
				   &ev->u.laplace.noise_multiplier, err);
		break;
	case ACCT_EV_DISCRETE_GAUSSIAN:
		keys = k_dg;
		rc = srv_json_real(j, where, "sigma", POS_REAL, 0, HUGE_VAL,
				   &ev->u.discrete_gaussian.sigma, err);
		if (rc >= 0)
			rc = srv_json_int(j, where, "sensitivity", SRV_REQUIRED, 1,
					  DPG_MAX_EVENT_SENSITIVITY, &i64, err);
		ev->u.discrete_gaussian.sensitivity = (double)i64;
		break;
	case ACCT_EV_DISCRETE_LAPLACE:
		keys = k_dl;
		rc = srv_json_real(j, where, "noise_parameter", POS_REAL, 0, HUGE_VAL,
				   &ev->u.discrete_laplace.noise_parameter, err);
		if (rc >= 0)
			rc = srv_json_int(j, where, "sensitivity", SRV_REQUIRED, 1,
					  DPG_MAX_EVENT_SENSITIVITY, &i64, err);
		ev->u.discrete_laplace.sensitivity = (double)i64;
		break;
	case ACCT_EV_RANDOMIZED_RESPONSE:
		keys = k_rr;
		rc = srv_json_real(j, where, "noise_parameter", POS_REAL, 0, 1,
				   &ev->u.randomized_response.noise_parameter, err);
		if (rc >= 0)
			rc = srv_json_int(j, where, "num_buckets", SRV_REQUIRED, 2, DPG_MAX_NUM_BUCKETS,
					  &ev->u.randomized_response.num_buckets, err);
		break;
	case ACCT_EV_EXPONENTIAL_MECHANISM:
		keys = k_eps;
		rc = srv_json_real(j, where, "epsilon", POS_REAL, 0, HUGE_VAL,
				   &ev->u.exponential_mechanism.epsilon, err);
		break;
	case ACCT_EV_PERMUTE_AND_FLIP:
		keys = k_eps;
		rc = srv_json_real(j, where, "epsilon", POS_REAL, 0, HUGE_VAL,
				   &ev->u.permute_and_flip.epsilon, err);
		break;
	case ACCT_EV_EPSILON_DELTA:
		keys = k_ed;
		rc = srv_json_real(j, where, "epsilon", SRV_REQUIRED, 0, HUGE_VAL,
				   &ev->u.epsilon_delta.epsilon, err);
		if (rc >= 0)
			rc = srv_json_real(j, where, "delta", SRV_REQUIRED, 0, 1,
					   &ev->u.epsilon_delta.delta, err);
		break;
	case ACCT_EV_ZCDP:
		keys = k_rho;
		rc = srv_json_real(j, where, "rho", SRV_REQUIRED, 0, HUGE_VAL, &ev->u.zcdp.rho, err);
		break;
	case ACCT_EV_POISSON_SAMPLED:
		keys = k_ps;
		rc = srv_json_real(j, where, "sampling_probability", POS_REAL, 0, 1,
				   &ev->u.poisson_sampled.sampling_probability, err);
		if (rc >= 0)
			rc = parse_child(j, where, "event", depth, ps, &ev->u.poisson_sampled.event);
		break;
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
		keys = k_swor;
		rc = srv_json_int(j, where, "source_dataset_size", SRV_REQUIRED, 1, DPG_MAX_DATASET_SIZE,
				  &ev->u.sampled_without_replacement.source_dataset_size, err);
		if (rc >= 0)
			rc = srv_json_int(j, where, "sample_size", SRV_REQUIRED, 1,
					  ev->u.sampled_without_replacement.source_dataset_size,
					  &ev->u.sampled_without_replacement.sample_size, err);
		if (rc >= 0)
			rc = parse_child(j, where, "event", depth, ps,
					 &ev->u.sampled_without_replacement.event);
		break;
	case ACCT_EV_SELF_COMPOSED:
		keys = k_sc;
		rc = srv_json_int(j, where, "count", SRV_REQUIRED, 1, DPG_MAX_COMPOSITION_COUNT,
				  &ev->u.self_composed.count, err);
		if (rc >= 0)
			rc = parse_child(j, where, "event", depth, ps, &ev->u.self_composed.event);
		break;
	case ACCT_EV_COMPOSED: {
		json_t *arr = json_object_get(j, "events");
		size_t n;

		keys = k_c;
		srv_json_pointer(ptr, sizeof(ptr), where, "events");
		if (!json_is_array(arr)) {
			rc = acct_error_set(err, ACCT_EINVAL, ptr, "'events' must be an array of events");
			break;
		}
		n = json_array_size(arr);
		if (n > DPG_MAX_EVENT_NODES) {
			rc = acct_error_set(err, ACCT_EINVAL, ptr, "too many events");
			break;
		}
		ev->u.composed.events = n ? calloc(n, sizeof(acct_event *)) : NULL;
		if (n && !ev->u.composed.events) {
			rc = acct_error_set(err, ACCT_ENOMEM, ptr, "out of memory");
			break;
		}
		rc = 0;
		for (size_t i = 0; i < n && rc >= 0; i++) {
			char item[ACCT_ERROR_WHERE_BYTES + 24];

			snprintf(item, sizeof(item), "%.*s/%zu", ACCT_ERROR_WHERE_BYTES - 1, ptr, i);
			rc = parse_node(json_array_get(arr, i), item, depth + 1, ps,
					&ev->u.composed.events[i]);
			if (rc >= 0)
				ev->u.composed.n = i + 1;
		}
		break;
	}
	case ACCT_EV_GNMAX:
		keys = k_sig;
		rc = srv_json_real(j, where, "sigma", POS_REAL, 0, HUGE_VAL, &ev->u.gnmax.sigma, err);
		break;
	case ACCT_EV_PATE_THRESHOLD:
		keys = k_sig;
		rc = srv_json_real(j, where, "sigma", POS_REAL, 0, HUGE_VAL,
				   &ev->u.pate_threshold.sigma, err);
		break;
	case ACCT_EV_PATE_GNSS:
		keys = k_gnss;
		rc = srv_json_real(j, where, "beta", SRV_REQUIRED | SRV_HI_OPEN, 0, 0.5,
				   &ev->u.pate_gnss.beta, err);
		if (rc >= 0)
			rc = srv_json_real(j, where, "sigma", POS_REAL, 0, HUGE_VAL,
					   &ev->u.pate_gnss.sigma, err);
		break;
	default:
		keys = k_nm;
		rc = acct_error_set(err, ACCT_EINTERNAL, where, "unhandled event type");
		break;
	}
	if (rc >= 0)
		rc = srv_json_only_keys(j, where, keys, err);
	if (rc < 0) {
		acct_event_free(ev);
		return rc;
	}
	*ret = ev;
	return 0;
}

int srv_event_parse(const json_t *json, const char *where, acct_event **ret_event,
		    acct_error *err)
{
	struct parse_state ps = {.nodes = 0, .err = err};

	return parse_node(json, where ? where : "", 0, &ps, ret_event);
}

json_t *srv_event_to_json(const acct_event *ev)
{
	json_t *j;
	int bad_set = 0;

	if (!ev)
		return NULL;
	j = json_pack("{s:s}", "type", acct_event_type_name(ev->type));
	if (!j)
		return NULL;
#define SETR(k, v) (bad_set |= json_object_set_new(j, (k), json_real(v)))
#define SETI(k, v) (bad_set |= json_object_set_new(j, (k), json_integer((json_int_t)(v))))
#define SETE(k, e) (bad_set |= json_object_set_new(j, (k), srv_event_to_json(e)))
	switch (ev->type) {
	case ACCT_EV_GAUSSIAN: SETR("noise_multiplier", ev->u.gaussian.noise_multiplier); break;
	case ACCT_EV_LAPLACE: SETR("noise_multiplier", ev->u.laplace.noise_multiplier); break;
	case ACCT_EV_DISCRETE_GAUSSIAN:
		SETR("sigma", ev->u.discrete_gaussian.sigma);
		SETI("sensitivity", ev->u.discrete_gaussian.sensitivity);
		break;
	case ACCT_EV_DISCRETE_LAPLACE:
		SETR("noise_parameter", ev->u.discrete_laplace.noise_parameter);
		SETI("sensitivity", ev->u.discrete_laplace.sensitivity);
		break;
	case ACCT_EV_RANDOMIZED_RESPONSE:
		SETR("noise_parameter", ev->u.randomized_response.noise_parameter);
		SETI("num_buckets", ev->u.randomized_response.num_buckets);
		break;
	case ACCT_EV_EXPONENTIAL_MECHANISM: SETR("epsilon", ev->u.exponential_mechanism.epsilon); break;
	case ACCT_EV_PERMUTE_AND_FLIP: SETR("epsilon", ev->u.permute_and_flip.epsilon); break;
	case ACCT_EV_EPSILON_DELTA:
		SETR("epsilon", ev->u.epsilon_delta.epsilon);
		SETR("delta", ev->u.epsilon_delta.delta);
		break;
	case ACCT_EV_ZCDP: SETR("rho", ev->u.zcdp.rho); break;
	case ACCT_EV_POISSON_SAMPLED:
		SETR("sampling_probability", ev->u.poisson_sampled.sampling_probability);
		SETE("event", ev->u.poisson_sampled.event);
		break;
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
		SETI("source_dataset_size", ev->u.sampled_without_replacement.source_dataset_size);
		SETI("sample_size", ev->u.sampled_without_replacement.sample_size);
		SETE("event", ev->u.sampled_without_replacement.event);
		break;
	case ACCT_EV_SELF_COMPOSED:
		SETI("count", ev->u.self_composed.count);
		SETE("event", ev->u.self_composed.event);
		break;
	case ACCT_EV_COMPOSED: {
		json_t *arr = json_array();

		for (size_t i = 0; arr && i < ev->u.composed.n; i++)
			bad_set |= json_array_append_new(arr, srv_event_to_json(ev->u.composed.events[i]));
		bad_set |= json_object_set_new(j, "events", arr);
		break;
	}
	case ACCT_EV_GNMAX: SETR("sigma", ev->u.gnmax.sigma); break;
	case ACCT_EV_PATE_THRESHOLD: SETR("sigma", ev->u.pate_threshold.sigma); break;
	case ACCT_EV_PATE_GNSS:
		SETR("beta", ev->u.pate_gnss.beta);
		SETR("sigma", ev->u.pate_gnss.sigma);
		break;
	default: bad_set = 1; break;
	}
#undef SETR
#undef SETI
#undef SETE
	if (bad_set) {
		json_decref(j);
		return NULL;
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
