/*
 * test_event_spec.c: the event descriptor (acct_event_params) against the
 * published contract, openapi/openapi.yaml's PrivacyEvent.  Every type of
 * the table is a discriminator value of PrivacyEvent, its schema one of
 * PrivacyEvent's oneOf, and every value is a type of the table; each
 * type's schema requires exactly "type" and the
 * parameters of its row, in the row's order, refuses other members, and
 * gives each parameter the kind and bounds the row gives it.  So a type
 * added to the table without its schema, or a bound changed on one side
 * only, fails here.
 *
 * The spec is read with a line scanner that knows the layout of
 * openapi.yaml's schemas (two-space indents; a property either in block
 * style or as one flow mapping), not YAML in general: a layout it cannot
 * read fails the test rather than passing it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "acct.h"

#define SPEC_MAX_LINES 8192
#define SPEC_LINE_BYTES 512
#define PROP_MAX_KEYS 16

struct spec {
	char (*line)[SPEC_LINE_BYTES];
	size_t n;
};

/* What a property of an event schema says: its keys and values, nested
 * ones (items: {$ref}) flattened. */
struct prop {
	size_t n;
	char key[PROP_MAX_KEYS][64];
	char val[PROP_MAX_KEYS][128];
};

static struct spec spec_load(void)
{
	struct spec s = {.line = calloc(SPEC_MAX_LINES, SPEC_LINE_BYTES)};
	FILE *f = fopen(OPENAPI_PATH, "r");

	cr_assert_not_null(f, "cannot open %s", OPENAPI_PATH);
	cr_assert_not_null(s.line);
	while (s.n < SPEC_MAX_LINES && fgets(s.line[s.n], SPEC_LINE_BYTES, f)) {
		s.line[s.n][strcspn(s.line[s.n], "\n")] = '\0';
		s.n++;
	}
	cr_assert_lt(s.n, SPEC_MAX_LINES, "openapi.yaml outgrew the scanner");
	fclose(f);
	return s;
}

static size_t indent_of(const char *l)
{
	return strspn(l, " ");
}

static bool blank(const char *l)
{
	return l[indent_of(l)] == '\0' || l[indent_of(l)] == '#';
}

/* The line "<indent spaces><key>:" (anything after the colon) at or after
 * `from` and before `to`, or to when there is none. */
static size_t find_key(const struct spec *s, size_t from, size_t to, size_t indent,
		       const char *key)
{
	size_t kl = strlen(key);

	for (size_t i = from; i < to; i++) {
		const char *l = s->line[i];

		if (indent_of(l) == indent && strncmp(l + indent, key, kl) == 0 &&
		    l[indent + kl] == ':')
			return i;
	}
	return to;
}

/* The end of the block that opens at line `at`: the next non-blank line
 * indented no deeper than it. */
static size_t block_end(const struct spec *s, size_t at)
{
	size_t i = at + 1;

	while (i < s->n && (blank(s->line[i]) || indent_of(s->line[i]) > indent_of(s->line[at])))
		i++;
	return i;
}

/* The PrivacyEvent discriminator's schema name for event type `name`, into
 * `out`; false when the mapping has no such entry. */
static bool mapping_of(const struct spec *s, const char *name, char *out, size_t size)
{
	size_t pe = find_key(s, 0, s->n, 4, "PrivacyEvent");
	size_t end = block_end(s, pe), map = find_key(s, pe, end, 8, "mapping");
	const char *hash;

	cr_assert_lt(map, end, "PrivacyEvent has no discriminator mapping");
	for (size_t i = map + 1; i < block_end(s, map); i++) {
		const char *l = s->line[i] + indent_of(s->line[i]);

		if (strncmp(l, name, strlen(name)) == 0 && l[strlen(name)] == ':' &&
		    (hash = strstr(l, "#/components/schemas/")) != NULL) {
			snprintf(out, size, "%.*s", (int)strcspn(hash + 21, "'\""), hash + 21);
			return true;
		}
	}
	return false;
}

/* Whether PrivacyEvent's oneOf lists the schema `schema`. */
static bool in_one_of(const struct spec *s, const char *schema)
{
	size_t pe = find_key(s, 0, s->n, 4, "PrivacyEvent");
	size_t end = block_end(s, pe), one_of = find_key(s, pe, end, 6, "oneOf");
	char want[192];

	snprintf(want, sizeof(want), "- $ref: '#/components/schemas/%s'", schema);
	for (size_t i = one_of + 1; i < end && i < block_end(s, one_of); i++)
		if (strcmp(s->line[i] + indent_of(s->line[i]), want) == 0)
			return true;
	return false;
}

/* Adds "key: value" (value trimmed of quotes and spaces) to `p`. */
static void prop_add(struct prop *p, const char *kv)
{
	const char *colon = strchr(kv, ':');
	const char *v;

	cr_assert_not_null(colon, "unreadable property line '%s'", kv);
	cr_assert_lt(p->n, PROP_MAX_KEYS);
	v = colon + 1 + strspn(colon + 1, " '\"");
	snprintf(p->key[p->n], sizeof(p->key[0]), "%.*s", (int)(colon - kv), kv);
	snprintf(p->val[p->n], sizeof(p->val[0]), "%.*s", (int)strcspn(v, "'\"}"), v);
	p->n++;
}

/* Property `name` of the schema block [from, to) at indent 8. */
static bool prop_read(const struct spec *s, size_t from, size_t to, const char *name,
		      struct prop *p)
{
	size_t at = find_key(s, from, to, 8, name);
	const char *rest, *flow;

	memset(p, 0, sizeof(*p));
	if (at == to)
		return false;
	rest = s->line[at] + 8 + strlen(name) + 1;
	flow = strchr(rest, '{');
	if (flow) { /* name: {k: v, k: v} */
		char buf[SPEC_LINE_BYTES];

		snprintf(buf, sizeof(buf), "%s", flow + 1);
		for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
			prop_add(p, tok + strspn(tok, " "));
		return true;
	}
	for (size_t i = at + 1; i < block_end(s, at); i++) {
		const char *l = s->line[i] + indent_of(s->line[i]);

		if (!blank(s->line[i]) && l[strlen(l) - 1] != ':')
			prop_add(p, l);
	}
	return true;
}

/* The value of `key` in `p`, or NULL. */
static const char *prop_get(const struct prop *p, const char *key)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->key[i], key) == 0)
			return p->val[i];
	return NULL;
}

/* Whether `p` states bound `key` as the number x (absent when x is NAN). */
static void assert_bound(const struct prop *p, const char *key, double x, const char *where)
{
	const char *v = prop_get(p, key);

	if (isnan(x)) {
		cr_assert_null(v, "%s: the spec has %s %s, the descriptor none", where, key, v);
		return;
	}
	cr_assert_not_null(v, "%s: the spec lacks %s %.17g", where, key, x);
	cr_assert_eq(strtod(v, NULL), x, "%s: %s is %s in the spec, %.17g in the descriptor",
		     where, key, v, x);
}

/* A real parameter: a number whose bounds are the row's. */
static void check_real(const struct prop *p, const acct_event_param *d, const char *where)
{
	const char *ref = prop_get(p, "$ref");
	bool lo_open = d->flags & ACCT_PARAM_LO_OPEN, hi_open = d->flags & ACCT_PARAM_HI_OPEN;

	if (ref) { /* PositiveReal: a number > 0, no upper bound */
		cr_assert_str_eq(ref, "#/components/schemas/PositiveReal", "%s", where);
		cr_assert(lo_open && d->lo == 0 && isinf(d->hi), "%s is not > 0 alone", where);
		return;
	}
	cr_assert_str_eq(prop_get(p, "type") ? prop_get(p, "type") : "", "number", "%s", where);
	assert_bound(p, lo_open ? "exclusiveMinimum" : "minimum", d->lo, where);
	assert_bound(p, lo_open ? "minimum" : "exclusiveMinimum", NAN, where);
	assert_bound(p, hi_open ? "exclusiveMaximum" : "maximum", isinf(d->hi) ? NAN : d->hi,
		     where);
	assert_bound(p, hi_open ? "maximum" : "exclusiveMaximum", NAN, where);
}

/* One parameter of the descriptor against its property in the spec. */
static void check_param(const struct prop *p, const acct_event_param *d, const char *where)
{
	const char *type = prop_get(p, "type") ? prop_get(p, "type") : "";

	switch (d->kind) {
	case ACCT_PARAM_REAL:
		check_real(p, d, where);
		break;
	case ACCT_PARAM_INT:
	case ACCT_PARAM_INT_REAL:
		cr_assert_str_eq(type, "integer", "%s", where);
		assert_bound(p, "minimum", (double)d->min, where);
		assert_bound(p, "maximum",
			     (d->flags & ACCT_PARAM_MAX_PREV) ? NAN : (double)d->max, where);
		break;
	case ACCT_PARAM_EVENT:
		cr_assert_str_eq(prop_get(p, "$ref") ? prop_get(p, "$ref") : "",
				 "#/components/schemas/PrivacyEvent", "%s", where);
		break;
	case ACCT_PARAM_EVENTS:
		cr_assert_str_eq(type, "array", "%s", where);
		cr_assert_str_eq(prop_get(p, "$ref") ? prop_get(p, "$ref") : "",
				 "#/components/schemas/PrivacyEvent", "%s", where);
		assert_bound(p, "maxItems", (double)d->max, where);
		break;
	}
}

/* The schema's `required: [a, b]` list, joined by single spaces. */
static void required_of(const struct spec *s, size_t from, size_t to, char *out, size_t size)
{
	size_t at = find_key(s, from, to, 6, "required");
	char buf[SPEC_LINE_BYTES];
	const char *l;

	cr_assert_lt(at, to, "a schema without 'required' at line %zu", from + 1);
	l = strchr(s->line[at], '[');
	cr_assert_not_null(l, "'required' is not a flow list at line %zu", at + 1);
	snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(l + 1, "]"), l + 1);
	out[0] = '\0';
	for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,"))
		snprintf(out + strlen(out), size - strlen(out), "%s%s", out[0] ? " " : "", tok);
}

/* Whether the schema [from, to) says `additionalProperties: false`. */
static bool closed(const struct spec *s, size_t from, size_t to)
{
	size_t at = find_key(s, from, to, 6, "additionalProperties");

	return at < to && strstr(s->line[at], ": false") != NULL;
}

Test(event_spec, every_type_and_parameter_is_in_openapi)
{
	struct spec s = spec_load();

	for (unsigned t = 0; t < ACCT_EV__COUNT; t++) {
		const char *name = acct_event_type_name((acct_event_type)t);
		size_t n = 0, at, end;
		const acct_event_param *params = acct_event_params((acct_event_type)t, &n);
		char schema[128], want[512], got[512], constant[160];
		struct prop p;

		cr_assert_not_null(params, "%s has no parameters", name);
		cr_assert(mapping_of(&s, name, schema, sizeof(schema)),
			  "event type '%s' is not in PrivacyEvent's discriminator mapping", name);
		cr_assert(in_one_of(&s, schema), "PrivacyEvent's oneOf lacks %s", schema);
		at = find_key(&s, 0, s.n, 4, schema);
		cr_assert_lt(at, s.n, "no schema %s for '%s'", schema, name);
		end = block_end(&s, at);
		snprintf(want, sizeof(want), "type");
		for (size_t i = 0; i < n; i++)
			snprintf(want + strlen(want), sizeof(want) - strlen(want), " %s",
				 params[i].name);
		required_of(&s, at, end, got, sizeof(got));
		cr_assert_str_eq(got, want, "%s requires [%s], the descriptor has [%s]", schema, got,
				 want);
		cr_assert(closed(&s, at, end), "%s does not refuse unknown members", schema);
		cr_assert(prop_read(&s, at, end, "type", &p), "%s: no 'type' property", schema);
		snprintf(constant, sizeof(constant), "%s",
			 prop_get(&p, "const") ? prop_get(&p, "const") : "");
		cr_assert_str_eq(constant, name, "%s: type const is '%s'", schema, constant);
		for (size_t i = 0; i < n; i++) {
			char where[256];

			snprintf(where, sizeof(where), "%s.%s", name, params[i].name);
			cr_assert(prop_read(&s, at, end, params[i].name, &p),
				  "%s is not a property of %s", where, schema);
			check_param(&p, &params[i], where);
		}
	}
	free(s.line);
}

Test(event_spec, every_type_in_openapi_is_in_the_descriptor)
{
	struct spec s = spec_load();
	size_t pe = find_key(&s, 0, s.n, 4, "PrivacyEvent");
	size_t end = block_end(&s, pe), map = find_key(&s, pe, end, 8, "mapping");
	unsigned seen = 0;

	cr_assert_lt(map, end);
	for (size_t i = map + 1; i < block_end(&s, map); i++) {
		const char *l = s.line[i] + indent_of(s.line[i]);
		char name[64];
		acct_event_type type;

		if (blank(s.line[i]))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(l, ":"), l);
		cr_assert_eq(acct_event_type_from_name(name, &type), 0,
			     "openapi.yaml maps '%s', which no descriptor row names", name);
		seen++;
	}
	cr_assert_eq(seen, ACCT_EV__COUNT, "the mapping has %u types, the table %d", seen,
		     ACCT_EV__COUNT);
	free(s.line);
}
