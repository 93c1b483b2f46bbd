/*
 * test_routes.c: srv_route_match, the router behind every request.
 *
 * Contract (http.h and DESIGN.md): a known path with a served method gives
 * the route's index and its {params} in order; a path no route has is -1
 * (404); a known path with another method is -2 (405).  A trailing slash
 * or an empty segment matches nothing.  Methods are case sensitive
 * (RFC 9110).  Expected routes are named by method and pattern, not by
 * index, so the table may be reordered freely.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "api.h"
#include "http.h"

enum { NO_PATH = -1, NO_METHOD = -2, MATCH = 0 };

struct route_case {
	const char *method;
	const char *path;
	int expect;               /* MATCH, NO_PATH or NO_METHOD */
	const char *pattern;      /* with MATCH: the route's pattern */
	const char *params[SRV_MAX_PATH_PARAMS];
};

/* The router runs over the application's table, as serve hands it over. */
static const srv_route_table *table(void)
{
	static srv_route_table t;

	t.routes = srv_routes;
	t.n = srv_routes_count;
	return &t;
}

static const struct route_case cases[] = {
	{"GET", "/healthz", MATCH, "/healthz", {NULL}},
	{"GET", "/metrics", MATCH, "/metrics", {NULL}},
	{"GET", "/v1/openapi.yaml", MATCH, "/v1/openapi.yaml", {NULL}},
	{"POST", "/v1/accountant/epsilon", MATCH, "/v1/accountant/epsilon", {NULL}},
	{"POST", "/v1/pate/smooth-sensitivity", MATCH, "/v1/pate/smooth-sensitivity", {NULL}},
	{"GET", "/v1/datasets", MATCH, "/v1/datasets", {NULL}},
	{"POST", "/v1/datasets", MATCH, "/v1/datasets", {NULL}},
	{"GET", "/v1/datasets/adult", MATCH, "/v1/datasets/{id}", {"adult"}},
	{"PATCH", "/v1/datasets/adult", MATCH, "/v1/datasets/{id}", {"adult"}},
	{"DELETE", "/v1/datasets/adult", MATCH, "/v1/datasets/{id}", {"adult"}},
	{"GET", "/v1/datasets/a.b-c_d/budget", MATCH, "/v1/datasets/{id}/budget", {"a.b-c_d"}},
	{"GET", "/v1/datasets/adult/ledger", MATCH, "/v1/datasets/{id}/ledger", {"adult"}},
	{"POST", "/v1/datasets/adult/charges", MATCH, "/v1/datasets/{id}/charges", {"adult"}},
	{"GET", "/v1/datasets/adult/reservations", MATCH, "/v1/datasets/{id}/reservations", {"adult"}},
	{"POST", "/v1/datasets/adult/reservations", MATCH, "/v1/datasets/{id}/reservations", {"adult"}},
	{"POST", "/v1/datasets/adult/reservations/rsv_0123/commit", MATCH,
	 "/v1/datasets/{id}/reservations/{rid}/commit", {"adult", "rsv_0123"}},
	{"POST", "/v1/datasets/adult/reservations/rsv_0123/release", MATCH,
	 "/v1/datasets/{id}/reservations/{rid}/release", {"adult", "rsv_0123"}},
	{"POST", "/v1/datasets/adult/dry-run", MATCH, "/v1/datasets/{id}/dry-run", {"adult"}},
	{"GET", "/v1/keys", MATCH, "/v1/keys", {NULL}},
	{"POST", "/v1/keys", MATCH, "/v1/keys", {NULL}},
	{"DELETE", "/v1/keys/0123456789abcdef", MATCH, "/v1/keys/{id}", {"0123456789abcdef"}},
	/* A literal segment is not a parameter: "budget" as a dataset id
	 * still reaches the dataset route. */
	{"GET", "/v1/datasets/budget", MATCH, "/v1/datasets/{id}", {"budget"}},
	/* The dashboard's page and its files. */
	{"GET", "/", MATCH, "/", {NULL}},
	{"GET", "/assets/dashboard.js", MATCH, "/assets/{name}", {"dashboard.js"}},

	/* 405: the path exists with other methods. */
	{"PUT", "/v1/datasets", NO_METHOD, NULL, {NULL}},
	{"DELETE", "/v1/datasets", NO_METHOD, NULL, {NULL}},
	{"POST", "/healthz", NO_METHOD, NULL, {NULL}},
	{"GET", "/v1/accountant/epsilon", NO_METHOD, NULL, {NULL}},
	{"POST", "/v1/datasets/adult", NO_METHOD, NULL, {NULL}},
	{"PUT", "/v1/datasets/adult", NO_METHOD, NULL, {NULL}},
	{"GET", "/v1/datasets/adult/charges", NO_METHOD, NULL, {NULL}},
	{"DELETE", "/v1/datasets/adult/charges", NO_METHOD, NULL, {NULL}},
	{"GET", "/v1/datasets/adult/reservations/r1/commit", NO_METHOD, NULL, {NULL}},
	{"GET", "/v1/datasets/adult/dry-run", NO_METHOD, NULL, {NULL}},
	{"GET", "/v1/keys/0123456789abcdef", NO_METHOD, NULL, {NULL}},
	{"get", "/healthz", NO_METHOD, NULL, {NULL}},

	/* 404: no route has this path. */
	{"GET", "", NO_PATH, NULL, {NULL}},
	{"GET", "healthz", NO_PATH, NULL, {NULL}},
	{"GET", "/nope", NO_PATH, NULL, {NULL}},
	{"GET", "/healthz/", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/datasets/", NO_PATH, NULL, {NULL}},
	{"GET", "//v1/datasets", NO_PATH, NULL, {NULL}},
	{"GET", "/v1//datasets", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/datasets//budget", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/datasets/adult/budget/", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/datasets/adult/nope", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/datasets/adult/budget/extra", NO_PATH, NULL, {NULL}},
	{"POST", "/v1/datasets/adult/reservations/r1", NO_PATH, NULL, {NULL}},
	{"POST", "/v1/datasets/adult/reservations/r1/cancel", NO_PATH, NULL, {NULL}},
	{"GET", "/V1/datasets", NO_PATH, NULL, {NULL}},
	{"GET", "/v2/datasets", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/accountant", NO_PATH, NULL, {NULL}},
	{"GET", "/v1/openapi.yml", NO_PATH, NULL, {NULL}},
	{"GET", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t", NO_PATH, NULL, {NULL}},
};

static int route_index(const char *method, const char *pattern)
{
	for (size_t r = 0; r < srv_routes_count; r++)
		if (strcmp(srv_routes[r].method, method) == 0 && strcmp(srv_routes[r].pattern, pattern) == 0)
			return (int)r;
	return -100;
}

Test(routes, table_of_cases)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct route_case *c = &cases[i];
		char scratch[DPG_MAX_URL_BYTES + 1];
		const char *params[SRV_MAX_PATH_PARAMS] = {"x", "x", "x"};
		int got = srv_route_match(table(), c->method, c->path, scratch, sizeof(scratch), params);

		if (c->expect != MATCH) {
			cr_expect_eq(got, c->expect, "%s '%s': got %d, want %d", c->method, c->path, got,
				     c->expect);
			continue;
		}
		int want = route_index(c->method, c->pattern);

		cr_assert_geq(want, 0, "case %zu names no route %s %s", i, c->method, c->pattern);
		cr_expect_eq(got, want, "%s '%s': got route %d, want %d (%s)", c->method, c->path, got,
			     want, c->pattern);
		if (got != want)
			continue;
		for (int k = 0; k < SRV_MAX_PATH_PARAMS; k++) {
			if (c->params[k])
				cr_expect(params[k] && strcmp(params[k], c->params[k]) == 0,
					  "%s '%s': param %d is '%s', want '%s'", c->method, c->path, k,
					  params[k] ? params[k] : "(null)", c->params[k]);
			else
				cr_expect_null(params[k], "%s '%s': param %d should be unset", c->method,
					       c->path, k);
		}
	}
}

/* Every route of the table matches itself, with a value for each {param}. */
Test(routes, every_route_matches_its_own_pattern)
{
	for (size_t r = 0; r < srv_routes_count; r++) {
		char path[512], scratch[DPG_MAX_URL_BYTES + 1];
		const char *params[SRV_MAX_PATH_PARAMS] = {NULL};
		const char *p = srv_routes[r].pattern;
		size_t n = 0;
		int nparams = 0, got;

		/* Replace each {name} by p0, p1, ... */
		while (*p && n + 8 < sizeof(path)) {
			if (*p == '{') {
				n += (size_t)snprintf(path + n, sizeof(path) - n, "p%d", nparams++);
				p = strchr(p, '}');
				cr_assert_not_null(p, "unclosed { in %s", srv_routes[r].pattern);
				p++;
			} else {
				path[n++] = *p++;
			}
		}
		path[n] = '\0';
		cr_assert_leq(nparams, SRV_MAX_PATH_PARAMS);
		got = srv_route_match(table(), srv_routes[r].method, path, scratch, sizeof(scratch), params);
		cr_expect_eq(got, (int)r, "%s %s (as %s) matched %d", srv_routes[r].method,
			     srv_routes[r].pattern, path, got);
		for (int k = 0; k < nparams; k++) {
			char want[8];

			snprintf(want, sizeof(want), "p%d", k);
			cr_expect(params[k] && strcmp(params[k], want) == 0, "%s: param %d", path, k);
		}
	}
}

/* Each (method, pattern) appears once: a duplicate would shadow a handler. */
Test(routes, no_duplicate_routes)
{
	for (size_t i = 0; i < srv_routes_count; i++)
		for (size_t j = i + 1; j < srv_routes_count; j++)
			cr_expect(strcmp(srv_routes[i].method, srv_routes[j].method) != 0 ||
					  strcmp(srv_routes[i].pattern, srv_routes[j].pattern) != 0,
				  "%s %s appears twice", srv_routes[i].method, srv_routes[i].pattern);
}

/* A path that does not fit the caller's scratch buffer matches nothing
 * (and is not written past the buffer). */
Test(routes, path_longer_than_scratch_is_not_found)
{
	char scratch[16];
	const char *params[SRV_MAX_PATH_PARAMS] = {NULL};

	memset(scratch, 'Z', sizeof(scratch));
	cr_expect_eq(srv_route_match(table(), "GET", "/v1/datasets/abcdefghijkl", scratch, 8, params), NO_PATH);
	cr_expect_eq(scratch[8], 'Z', "srv_route_match wrote past scratch_size");
}
