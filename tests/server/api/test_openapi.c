/*
 * test_openapi.c: openapi/openapi.yaml against the router.
 *
 * The spec is the source of truth for the API (DESIGN.md), so a route that
 * exists in srv_routes[] but not in the spec, or an operation in the spec
 * that the router does not serve, fails here; so does an operation whose
 * documented access level differs from the table's, and an embedded copy
 * that differs from the file.
 *
 * The spec is read with a small line-based parser rather than a YAML
 * library.  It relies on the layout rules stated at the top of the spec:
 *   - `paths:` is a key at column 0; the section ends at the next line that
 *     starts at column 0 (blank lines and comments aside);
 *   - each path is a key at exactly 2 spaces that starts with '/';
 *   - each operation is a method key (get, put, post, delete, patch, head,
 *     options, trace) at exactly 4 spaces; the only other keys allowed at
 *     4 spaces are the other Path Item fields (parameters, summary,
 *     description, servers, $ref), so a misspelt method fails loudly;
 *   - inside an operation, `operationId`, `x-dpgate-access` and
 *     `security` are keys at exactly 6 spaces;
 *   - indentation is spaces only.
 * YAML block scalars are indented deeper than their key, so text inside a
 * description can never sit at 2 or 4 spaces.  parser_self_check below
 * exercises these assumptions on a small document.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "api.h"
#include "http.h"
#include "srv_embedded.h"

#define MAX_OPS 256
#define MAX_TEXT 256

struct spec_op {
	char method[16];          /* upper case, as in srv_routes[] */
	char path[MAX_TEXT];
	char operation_id[MAX_TEXT];
	char access[32];          /* x-dpgate-access */
	bool security_none;       /* `security: []`, or `[{}, {bearer: []}]` (a key optional) */
	int line;
};

struct spec {
	struct spec_op ops[MAX_OPS];
	size_t n;
	char error[1024 + 128];  /* first layout error (whole line, number, why), or empty */
	bool saw_paths;
};

static char *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = '\0';
			*ret_len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

static char *read_spec_file(size_t *ret_len)
{
	const char *root = getenv("DPGATE_SOURCE_ROOT");
	char path[4096];
	char *text;

	cr_assert_not_null(root, "DPGATE_SOURCE_ROOT is not set (run through meson test)");
	snprintf(path, sizeof(path), "%s/openapi/openapi.yaml", root);
	text = read_file(path, ret_len);
	cr_assert_not_null(text, "cannot read %s", path);
	return text;
}

static size_t indent_of(const char *line)
{
	size_t n = 0;

	while (line[n] == ' ')
		n++;
	return n;
}

/* Copies the key of "key: value" / "key:" (without the colon) into buf;
 * false when the line is not a plain mapping key. */
static bool line_key(const char *s, char *buf, size_t size)
{
	const char *colon = strchr(s, ':');
	size_t n;

	if (!colon || (colon[1] != '\0' && colon[1] != ' '))
		return false;
	n = (size_t)(colon - s);
	if (n == 0 || n >= size)
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return true;
}

/* The value after "key: ", trailing spaces removed. */
static void line_value(const char *s, char *buf, size_t size)
{
	const char *colon = strchr(s, ':');
	size_t n;

	buf[0] = '\0';
	if (!colon)
		return;
	colon++;
	while (*colon == ' ')
		colon++;
	snprintf(buf, size, "%s", colon);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
}

static bool is_method(const char *key)
{
	static const char *const methods[] = {"get", "put", "post", "delete", "patch", "head",
					      "options", "trace", NULL};

	for (const char *const *m = methods; *m; m++)
		if (strcmp(*m, key) == 0)
			return true;
	return false;
}

static bool is_path_item_field(const char *key)
{
	static const char *const fields[] = {"parameters", "summary", "description", "servers",
					     "$ref", NULL};

	for (const char *const *f = fields; *f; f++)
		if (strcmp(*f, key) == 0)
			return true;
	return false;
}

static void spec_fail(struct spec *sp, int line, const char *what, const char *text)
{
	if (!sp->error[0])
		snprintf(sp->error, sizeof(sp->error), "line %d: %s: '%s'", line, what, text);
}

/* Parses the operations under `paths:` (see the file comment). */
static void parse_spec(const char *text, struct spec *sp)
{
	char path[MAX_TEXT] = "";
	struct spec_op *op = NULL;
	bool in_paths = false;
	int lineno = 0;

	memset(sp, 0, sizeof(*sp));
	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[1024], key[MAX_TEXT];
		size_t ind;

		lineno++;
		if (len >= sizeof(line)) {
			spec_fail(sp, lineno, "line too long for the parser", "");
			len = sizeof(line) - 1;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		p = eol ? eol + 1 : p + len;
		if (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if (strchr(line, '\t'))
			spec_fail(sp, lineno, "tab character (indent with spaces)", line);
		ind = indent_of(line);
		if (line[ind] == '\0' || line[ind] == '#')
			continue;
		if (ind == 0) {
			in_paths = strcmp(line, "paths:") == 0;
			sp->saw_paths |= in_paths;
			op = NULL;
			continue;
		}
		if (!in_paths)
			continue;
		if (ind == 2) {
			op = NULL;
			if (line[2] != '/' || !line_key(line + 2, path, sizeof(path))) {
				spec_fail(sp, lineno, "a key under paths: must be a path starting with '/'", line);
				path[0] = '\0';
			}
			continue;
		}
		if (ind == 4) {
			op = NULL;
			if (!line_key(line + 4, key, sizeof(key))) {
				spec_fail(sp, lineno, "not a key at 4 spaces", line);
				continue;
			}
			if (is_path_item_field(key))
				continue;
			if (!is_method(key)) {
				spec_fail(sp, lineno, "not an HTTP method (lower case) or Path Item field", key);
				continue;
			}
			if (!path[0] || sp->n == MAX_OPS) {
				spec_fail(sp, lineno, "operation outside a path, or too many", key);
				continue;
			}
			op = &sp->ops[sp->n++];
			for (size_t i = 0; key[i] && i + 1 < sizeof(op->method); i++)
				op->method[i] = (char)toupper((unsigned char)key[i]);
			snprintf(op->path, sizeof(op->path), "%s", path);
			op->line = lineno;
			continue;
		}
		if (ind == 6 && op && line_key(line + 6, key, sizeof(key))) {
			if (strcmp(key, "operationId") == 0)
				line_value(line + 6, op->operation_id, sizeof(op->operation_id));
			else if (strcmp(key, "x-dpgate-access") == 0)
				line_value(line + 6, op->access, sizeof(op->access));
			else if (strcmp(key, "security") == 0) {
				char v[32];

				line_value(line + 6, v, sizeof(v));
				/* No key, or a key optional (/metrics). */
				op->security_none = strcmp(v, "[]") == 0 ||
						    strcmp(v, "[{}, {bearer: []}]") == 0;
			}
		}
	}
}

static const char *access_name(srv_access a)
{
	switch (a) {
	case SRV_PUBLIC: return "public";
	case SRV_ANY_KEY: return "any-key";
	case SRV_READ: return "read";
	case SRV_SPEND: return "spend";
	case SRV_ADMIN: return "admin";
	}
	return "?";
}

static const struct spec_op *find_op(const struct spec *sp, const char *method, const char *path)
{
	for (size_t i = 0; i < sp->n; i++)
		if (strcmp(sp->ops[i].method, method) == 0 && strcmp(sp->ops[i].path, path) == 0)
			return &sp->ops[i];
	return NULL;
}

static void load_spec(struct spec *sp)
{
	size_t len = 0;
	char *text = read_spec_file(&len);

	parse_spec(text, sp);
	free(text);
	cr_assert(sp->saw_paths, "openapi.yaml has no top-level 'paths:'");
	cr_assert_str_empty(sp->error, "openapi.yaml breaks the parser's layout rules: %s", sp->error);
}

/* ---- the parser's own assumptions ----------------------------------------- */

Test(openapi, parser_self_check)
{
	static const char doc[] =
		"openapi: 3.1.0\n"
		"info:\n"
		"  description: |\n"
		"    paths:\n"
		"      /not-a-path:\n"
		"        get:\n"
		"paths:\n"
		"  # a comment\n"
		"  /a/{id}:\n"
		"    parameters:\n"
		"      - $ref: '#/components/parameters/X'\n"
		"    get:\n"
		"      operationId: getA\n"
		"      x-dpgate-access: read\n"
		"      description: |\n"
		"        post:\n"
		"          text that looks like a method but is inside a block scalar\n"
		"    delete:\n"
		"      operationId: delA\n"
		"      security: []\n"
		"\n"
		"  /b:\n"
		"    post:\n"
		"      x-dpgate-access: public\n"
		"components:\n"
		"  /c:\n"
		"    get:\n";
	struct spec sp;

	parse_spec(doc, &sp);
	cr_assert_str_empty(sp.error, "%s", sp.error);
	cr_assert_eq(sp.n, 3);
	cr_assert_str_eq(sp.ops[0].method, "GET");
	cr_assert_str_eq(sp.ops[0].path, "/a/{id}");
	cr_assert_str_eq(sp.ops[0].operation_id, "getA");
	cr_assert_str_eq(sp.ops[0].access, "read");
	cr_assert_not(sp.ops[0].security_none);
	cr_assert_str_eq(sp.ops[1].method, "DELETE");
	cr_assert_str_eq(sp.ops[1].operation_id, "delA");
	cr_assert(sp.ops[1].security_none);
	cr_assert_str_eq(sp.ops[2].method, "POST");
	cr_assert_str_eq(sp.ops[2].path, "/b");

	/* A misspelt method and a tab are layout errors. */
	parse_spec("paths:\n  /a:\n    Get:\n", &sp);
	cr_assert_str_not_empty(sp.error);
	parse_spec("paths:\n  /a:\n\tget:\n", &sp);
	cr_assert_str_not_empty(sp.error);
	parse_spec("paths:\n  a:\n    get:\n", &sp);
	cr_assert_str_not_empty(sp.error);
}

/* ---- spec against router --------------------------------------------------- */

Test(openapi, every_route_is_in_the_spec)
{
	struct spec sp;
	int missing = 0;

	load_spec(&sp);
	cr_assert_gt(srv_routes_count, 0);
	for (size_t r = 0; r < srv_routes_count; r++) {
		if (!find_op(&sp, srv_routes[r].method, srv_routes[r].pattern)) {
			cr_log_error("route %s %s is not in openapi/openapi.yaml", srv_routes[r].method,
				     srv_routes[r].pattern);
			missing++;
		}
	}
	cr_assert_eq(missing, 0, "%d route(s) of srv_routes[] missing from the spec", missing);
}

Test(openapi, every_spec_operation_is_a_route)
{
	struct spec sp;
	int extra = 0;

	load_spec(&sp);
	cr_assert_gt(sp.n, 0, "no operation found under paths:");
	for (size_t i = 0; i < sp.n; i++) {
		bool found = false;

		/* HEAD is served wherever GET is (http_serve.c, admit). */
		const char *method = strcmp(sp.ops[i].method, "HEAD") == 0 ? "GET" : sp.ops[i].method;

		for (size_t r = 0; r < srv_routes_count && !found; r++)
			found = strcmp(srv_routes[r].method, method) == 0 &&
				strcmp(srv_routes[r].pattern, sp.ops[i].path) == 0;
		if (!found) {
			cr_log_error("openapi.yaml line %d: %s %s is not a route of the server",
				     sp.ops[i].line, sp.ops[i].method, sp.ops[i].path);
			extra++;
		}
	}
	cr_assert_eq(extra, 0, "%d spec operation(s) the router does not serve", extra);
}

Test(openapi, operations_are_unique_and_named)
{
	struct spec sp;

	load_spec(&sp);
	for (size_t i = 0; i < sp.n; i++) {
		cr_expect_str_not_empty(sp.ops[i].operation_id, "line %d: %s %s has no operationId",
					sp.ops[i].line, sp.ops[i].method, sp.ops[i].path);
		for (size_t j = i + 1; j < sp.n; j++) {
			cr_expect(strcmp(sp.ops[i].method, sp.ops[j].method) != 0 ||
					  strcmp(sp.ops[i].path, sp.ops[j].path) != 0,
				  "%s %s appears twice (lines %d and %d)", sp.ops[i].method,
				  sp.ops[i].path, sp.ops[i].line, sp.ops[j].line);
			cr_expect(!sp.ops[i].operation_id[0] ||
					  strcmp(sp.ops[i].operation_id, sp.ops[j].operation_id) != 0,
				  "operationId %s is used twice", sp.ops[i].operation_id);
		}
	}
	{
		size_t gets = 0;

		for (size_t r = 0; r < srv_routes_count; r++)
			gets += strcmp(srv_routes[r].method, "GET") == 0;
		cr_expect_eq(sp.n, srv_routes_count + gets, "%zu operations for %zu routes, %zu of them GET",
			     sp.n, srv_routes_count, gets);
	}
}

/* The server answers HEAD wherever it answers GET, with GET's access
 * rules: the spec says so on every GET path, with the same access and
 * security. */
Test(openapi, every_get_route_has_its_head_operation)
{
	struct spec sp;

	load_spec(&sp);
	for (size_t r = 0; r < srv_routes_count; r++) {
		const struct spec_op *get, *head;

		if (strcmp(srv_routes[r].method, "GET") != 0)
			continue;
		get = find_op(&sp, "GET", srv_routes[r].pattern);
		head = find_op(&sp, "HEAD", srv_routes[r].pattern);
		cr_expect_not_null(head, "GET %s has no head operation in the spec", srv_routes[r].pattern);
		if (!get || !head)
			continue;
		cr_expect_str_eq(head->access, get->access, "HEAD %s", srv_routes[r].pattern);
		cr_expect_eq(head->security_none, get->security_none, "HEAD %s", srv_routes[r].pattern);
	}
}

Test(openapi, access_levels_match_the_table)
{
	struct spec sp;

	load_spec(&sp);
	for (size_t r = 0; r < srv_routes_count; r++) {
		const struct spec_op *op = find_op(&sp, srv_routes[r].method, srv_routes[r].pattern);
		const char *want = access_name(srv_routes[r].access);

		if (!op)
			continue; /* reported by every_route_is_in_the_spec */
		cr_expect_str_eq(op->access, want, "%s %s: x-dpgate-access is '%s', the router says '%s'",
				 op->method, op->path, op->access, want);
		/* Public operations opt out of the global bearer requirement
		 * (or make it optional); every other one keeps it. */
		cr_expect_eq(op->security_none, srv_routes[r].access == SRV_PUBLIC,
			     "%s %s: `security: []` (or a key optional) must be present exactly on public routes",
			     op->method, op->path);
	}
}

/* ---- the file itself and the embedded copy -------------------------------- */

Test(openapi, file_is_plain_openapi_3_1)
{
	size_t len = 0;
	char *text = read_spec_file(&len);

	cr_assert_gt(len, 0);
	cr_expect_eq(strncmp(text, "openapi: 3.1.0\n", 15), 0, "the first line must be 'openapi: 3.1.0'");
	cr_expect_eq(text[len - 1], '\n', "the file must end with a newline");
	cr_expect_null(strchr(text, '\t'), "tabs are not valid YAML indentation");
	cr_expect_eq(strlen(text), len, "NUL byte inside the spec");
	cr_expect_not_null(strstr(text, "\ncomponents:\n"), "no components section");
	cr_expect_not_null(strstr(text, "\nx-dpgate-policy:\n"),
			   "the schema of the dpgate check policy is missing");
	free(text);
}

Test(openapi, served_copy_is_the_file)
{
	const struct srv_embedded_file *emb = NULL;
	size_t len = 0;
	char *text = read_spec_file(&len);

	for (size_t i = 0; i < srv_embedded_count; i++)
		if (strcmp(srv_embedded[i].name, "openapi.yaml") == 0)
			emb = &srv_embedded[i];
	cr_assert_not_null(emb, "openapi.yaml is not embedded in the server");
	cr_assert_eq(emb->size, len, "embedded copy is %zu bytes, the file %zu", emb->size, len);
	cr_assert_eq(memcmp(emb->data, text, len), 0, "embedded copy differs from openapi/openapi.yaml");
	cr_assert_eq(emb->data[emb->size], '\0', "embedded copy is not NUL-terminated");
	free(text);
}
