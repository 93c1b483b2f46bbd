/*
 * test_auth.c: every route x every role x dataset scope.
 *
 * The expectations are the contract of DESIGN.md, written out here rather
 * than read from the server's route table: stateless routes need no key;
 * viewers read; analysts read and spend on the datasets their key lists;
 * /metrics takes a key or none, and a key given must be valid;
 * admins do everything; a missing, unknown or revoked key is 401, a valid
 * key with the wrong role or outside its scope is 403.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

/* OPT: public, but a key given must be valid (/metrics, whose dataset
 * gauges follow the key). */
enum access { PUB, OPT, ANY, READ, SPEND, ADMIN };

enum who { W_NONE, W_REVOKED, W_VIEWER, W_VIEWER_B, W_ANALYST_A, W_ANALYST_B, W_ADMIN, W__COUNT };

static const char *const who_names[W__COUNT] = {
	"no key", "revoked key", "viewer", "viewer scoped to b", "analyst of a", "analyst of b", "admin",
};

struct route_case {
	const char *method;
	const char *path;     /* "{rid}" and "{kid}" are filled per attempt */
	const char *body;
	enum access access;
	long success;
};

#define EVT "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}}"
#define JOB "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"epochs\":1,\"lot_size\":60,\"max_train_examples\":600}}"
#define JOB_DRY "{\"trainer\":\"dpsgd\",\"dry_run\":true,\"params\":{\"model\":\"logreg\",\"epochs\":1,\"lot_size\":60,\"max_train_examples\":600}}"
#define PATE_SESSION "{\"aggregator\":\"gnmax\",\"num_teachers\":10,\"num_classes\":3,\"sigma2\":5}"
/* For routes whose allowed outcome depends on timing (cancel a job that may
 * have started; a model that may not exist yet): any status but 401/403. */
#define ANY_OK (-1)

static const struct route_case routes[] = {
	{"GET", "/healthz", NULL, PUB, 200},
	{"GET", "/", NULL, PUB, 200},
	{"GET", "/assets/dashboard.js", NULL, PUB, 200},
	{"GET", "/metrics", NULL, OPT, 200},
	{"GET", "/v1/openapi.yaml", NULL, PUB, 200},
	{"POST", "/v1/accountant/epsilon", "{}", PUB, 0},
	{"POST", "/v1/accountant/delta", "{}", PUB, 0},
	{"POST", "/v1/accountant/calibrate", "{}", PUB, 0},
	{"POST", "/v1/accountant/rdp", "{}", PUB, 0},
	{"POST", "/v1/accountant/compare", "{}", PUB, 0},
	{"POST", "/v1/pate/cost", "{}", PUB, 0},
	{"POST", "/v1/pate/smooth-sensitivity", "{}", PUB, 0},
	{"POST", "/v1/label-em/guidance", "{}", PUB, 0},
	{"GET", "/v1/datasets", NULL, ANY, 200},
	{"POST", "/v1/datasets", "{\"id\":\"new{n}\",\"budget\":{\"epsilon\":1,\"delta\":0},\"accountant\":\"basic\"}", ADMIN, 201},
	{"GET", "/v1/datasets/a", NULL, READ, 200},
	{"PATCH", "/v1/datasets/a", "{\"name\":\"A\"}", ADMIN, 200},
	{"DELETE", "/v1/datasets/z{n}", NULL, ADMIN, 200},
	{"GET", "/v1/datasets/a/budget", NULL, READ, 200},
	{"GET", "/v1/datasets/a/ledger", NULL, READ, 200},
	{"GET", "/v1/datasets/a/audit", NULL, ADMIN, 200},
	{"POST", "/v1/datasets/a/charges", EVT, SPEND, 201},
	{"GET", "/v1/datasets/a/reservations", NULL, READ, 200},
	{"POST", "/v1/datasets/a/reservations", EVT, SPEND, 201},
	{"POST", "/v1/datasets/a/reservations/{rid}/commit", NULL, SPEND, 200},
	{"POST", "/v1/datasets/a/reservations/{rid}/release", NULL, SPEND, 200},
	{"POST", "/v1/datasets/a/dry-run", EVT, READ, 200},
	{"GET", "/v1/keys", NULL, ADMIN, 200},
	{"POST", "/v1/keys", "{\"role\":\"viewer\"}", ADMIN, 201},
	{"DELETE", "/v1/keys/{kid}", NULL, ADMIN, 200},
	{"GET", "/v1/audit/keys", NULL, ADMIN, 200},
	{"PUT", "/v1/datasets/a/data", "{\"builtin\":\"fashion-mnist\"}", ADMIN, 200},
	{"GET", "/v1/datasets/a/data", NULL, READ, 200},
	{"POST", "/v1/datasets/a/jobs", JOB_DRY, SPEND, 200},
	{"GET", "/v1/datasets/a/jobs", NULL, READ, 200},
	{"GET", "/v1/jobs/{jid}", NULL, READ, 200},
	{"DELETE", "/v1/jobs/{jid}", NULL, SPEND, ANY_OK},
	{"GET", "/v1/jobs/{jid}/model", NULL, READ, ANY_OK},
	{"POST", "/v1/jobs/{jid}/predict", "{\"rows\":[[1]]}", READ, ANY_OK},
	{"POST", "/v1/datasets/a/mechanisms/laplace", "{\"value\":1,\"sensitivity\":1,\"epsilon\":0.01}", SPEND, 201},
	{"POST", "/v1/datasets/a/queries", "{\"query\":\"count\",\"epsilon\":0.01}", SPEND, ANY_OK},
	{"POST", "/v1/datasets/a/pate/sessions", PATE_SESSION, SPEND, 201},
	{"GET", "/v1/datasets/a/pate/sessions", NULL, READ, 200},
	{"GET", "/v1/datasets/a/pate/sessions/{psid}", NULL, READ, 200},
	{"POST", "/v1/datasets/a/pate/sessions/{psid}/queries", "{\"queries\":[{\"votes\":[8,1,1]}]}", SPEND, 201},
	{"POST", "/v1/datasets/a/pate/sessions/{psid}/release", "{\"beta\":0.02,\"sigma\":8,\"order\":16,\"delta\":1e-6}", SPEND, ANY_OK},
};

/* The status the contract gives `w` on a route of class `a` about dataset a. */
static long expected(enum who w, enum access a, long success)
{
	if (a == PUB)
		return success == ANY_OK ? 0 : success;
	if (a == OPT)
		return w == W_REVOKED ? 401 : success;
	if (w == W_NONE || w == W_REVOKED)
		return 401;
	switch (a) {
	case ANY:
		return success == ANY_OK ? 0 : success;
	case READ:
		return (w == W_VIEWER || w == W_ANALYST_A || w == W_ADMIN) ? (success == ANY_OK ? 0 : success) : 403;
	case SPEND:
		return (w == W_ANALYST_A || w == W_ADMIN) ? (success == ANY_OK ? 0 : success) : 403;
	case ADMIN:
		return w == W_ADMIN ? success : 403;
	default:
		return 0;
	}
}

/* Does a concrete test path (with ids and {placeholders}) fit a route
 * pattern segment by segment ({x} in the pattern matches any segment)? */
static bool route_matches(const char *path, const char *pattern)
{
	while (*path && *pattern) {
		const char *ps = strchr(path + 1, '/'), *qs = strchr(pattern + 1, '/');
		size_t pl = ps ? (size_t)(ps - path) : strlen(path);
		size_t ql = qs ? (size_t)(qs - pattern) : strlen(pattern);

		if (!(pattern[1] == '{' || (pl == ql && strncmp(path, pattern, pl) == 0)))
			return false;
		path += pl;
		pattern += ql;
	}
	return *path == '\0' && *pattern == '\0';
}

static void subst(char *out, size_t size, const char *tmpl, const char *name, const char *value)
{
	const char *p = strstr(tmpl, name);

	if (!p) {
		snprintf(out, size, "%s", tmpl);
		return;
	}
	snprintf(out, size, "%.*s%s%s", (int)(p - tmpl), tmpl, value, p + strlen(name));
}

/* The objects a route's path may name, each made by one request of the
 * analyst of a whose answer's "id" fills its placeholder: the key that
 * made an object and admin keys may change it (a matrix row's SPEND), as
 * objects_are_changed_only_by_their_key_or_an_admin checks apart. */
static const struct {
	const char *placeholder, *path, *body;
	long status;
} made_ids[] = {
	{"{rid}", "/v1/datasets/a/reservations", EVT, 201},
	{"{jid}", "/v1/datasets/a/jobs", JOB, 202},
	{"{psid}", "/v1/datasets/a/pate/sessions", PATE_SESSION, 201},
};

/* Replaces the placeholders of path (size bytes) by the ids of new
 * objects: a reservation, a job, a PATE session (on dataset a, made with
 * `maker`) and a viewer key. */
static void fill_ids(const dpg_server *srv, const char *maker, char *path, size_t size)
{
	char tmp[256];

	for (size_t i = 0; i < sizeof(made_ids) / sizeof(made_ids[0]); i++) {
		dpg_resp res;

		if (!strstr(path, made_ids[i].placeholder))
			continue;
		res = dpg_call(srv, "POST", made_ids[i].path, maker, made_ids[i].body);
		cr_assert_eq(res.status, made_ids[i].status, "%s", res.body);
		snprintf(tmp, sizeof(tmp), "%s", path);
		subst(path, size, tmp, made_ids[i].placeholder,
		      json_string_value(json_object_get(res.json, "id")));
		dpg_resp_free(&res);
	}
	if (strstr(path, "{kid}")) {
		char k[160], kid[64];

		dpg_make_key(srv, "viewer", NULL, k, sizeof(k));
		snprintf(tmp, sizeof(tmp), "%s", path);
		subst(path, size, tmp, "{kid}", dpg_key_id(k, kid, sizeof(kid)));
	}
}

Test(auth, every_route_role_and_scope, .timeout = 300)
{
	dpg_server srv;
	char keys[W__COUNT][160];
	int counter = 0;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "a", 1000.0, 1e-5, "rdp");
	dpg_make_dataset(&srv, "b", 1000.0, 0, "basic");
	keys[W_NONE][0] = '\0';
	dpg_make_key(&srv, "analyst", "a", keys[W_REVOKED], sizeof(keys[0]));
	dpg_make_key(&srv, "viewer", NULL, keys[W_VIEWER], sizeof(keys[0]));
	dpg_make_key(&srv, "viewer", "b", keys[W_VIEWER_B], sizeof(keys[0]));
	dpg_make_key(&srv, "analyst", "a", keys[W_ANALYST_A], sizeof(keys[0]));
	dpg_make_key(&srv, "analyst", "b", keys[W_ANALYST_B], sizeof(keys[0]));
	snprintf(keys[W_ADMIN], sizeof(keys[0]), "%s", srv.admin_key);
	{
		char id[64];

		dpg_revoke_key_cli(srv.db, dpg_key_id(keys[W_REVOKED], id, sizeof(id)));
	}

	for (size_t r = 0; r < sizeof(routes) / sizeof(routes[0]); r++) {
		for (int w = 0; w < W__COUNT; w++) {
			const struct route_case *rc = &routes[r];
			char path[256], body[512], n[16];
			long want = expected((enum who)w, rc->access, rc->success);
			dpg_resp resp;

			snprintf(n, sizeof(n), "%d", counter++);
			subst(path, sizeof(path), rc->path, "{n}", n);
			subst(body, sizeof(body), rc->body ? rc->body : "", "{n}", n);
			if (strstr(path, "/z")) {
				char id[32];

				snprintf(id, sizeof(id), "z%s", n);
				dpg_make_dataset(&srv, id, 1.0, 0, "basic");
			}
			fill_ids(&srv, keys[W_ANALYST_A], path, sizeof(path));
			cr_assert_eq(dpg_http(&srv, rc->method, path, w == W_NONE ? NULL : keys[w],
					      rc->body ? body : NULL, rc->body ? strlen(body) : 0, NULL,
					      &resp), 0);
			if (want == 0) {
				/* Public computations, and allowed calls whose outcome
				 * depends on timing: never an auth error. */
				cr_expect(resp.status != 401 && resp.status != 403,
					  "%s %s as %s: %ld", rc->method, path, who_names[w], resp.status);
			} else {
				cr_expect_eq(resp.status, want, "%s %s as %s: %ld, want %ld: %s", rc->method,
					     path, who_names[w], resp.status, want, resp.body);
			}
			dpg_resp_free(&resp);
		}
	}

	/* The matrix covers every route the binary serves. */
	{
		char out[8192], *save = NULL;
		const char *argv[] = {dpg_bin(), "routes", NULL};

		cr_assert_eq(dpg_run(out, sizeof(out), argv), 0);
		for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char method[16], pattern[256];
			bool found = false;

			cr_assert_eq(sscanf(line, "%15s %255s", method, pattern), 2);
			for (size_t r = 0; r < sizeof(routes) / sizeof(routes[0]) && !found; r++)
				found = strcmp(routes[r].method, method) == 0 &&
					route_matches(routes[r].path, pattern);
			cr_expect(found, "route %s %s is not in the auth matrix", method, pattern);
		}
	}

	/* Listing is filtered by scope. */
	{
		dpg_resp l = dpg_call(&srv, "GET", "/v1/datasets", keys[W_ANALYST_B], NULL);
		json_t *arr = json_object_get(l.json, "datasets");

		cr_assert_eq(json_array_size(arr), 1);
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(arr, 0), "id")), "b");
		dpg_resp_free(&l);
	}
	dpg_server_destroy(&srv);
}

/*
 * Authorization is a singleton header: two of them, whichever comes first
 * and whether or not they agree, are refused with 400 naming the header,
 * on a spending route (nothing charged) as on a public one.
 */
Test(auth, two_authorization_headers_are_refused, .timeout = 120)
{
	static const char bogus[] = "Authorization: Bearer dpg_0000000000000000_"
				    "0000000000000000000000000000000000000000000000000000000000000000";
	char mine[256];
	dpg_server srv;
	dpg_budget before, after;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "a", 1.0, 0, "basic");
	snprintf(mine, sizeof(mine), "Authorization: Bearer %s", srv.admin_key);
	before = dpg_budget_of(&srv, "a");
	{
		const char *const orders[][3] = {{mine, bogus, NULL}, {bogus, mine, NULL},
						 {mine, mine, NULL}};

		for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
			const char *const paths[][2] = {{"POST", "/v1/datasets/a/charges"},
							{"GET", "/healthz"}};

			for (size_t p = 0; p < 2; p++) {
				bool post = strcmp(paths[p][0], "POST") == 0;
				dpg_resp r;

				cr_assert_eq(dpg_http(&srv, paths[p][0], paths[p][1], NULL,
						      post ? EVT : NULL, post ? strlen(EVT) : 0,
						      orders[i], &r), 0);
				cr_expect_eq(r.status, 400, "order %zu, %s: %ld %s", i, paths[p][1],
					     r.status, r.body);
				cr_expect_str_eq(r.content_type, "application/problem+json");
				cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")),
						 "Authorization", "%s", r.body);
				dpg_resp_free(&r);
			}
		}
	}
	after = dpg_budget_of(&srv, "a");
	cr_expect_eq(after.charges, before.charges);
	cr_expect_eq(after.ledger_rows, before.ledger_rows);
	cr_expect_eq(after.spent_eps, before.spent_eps);
	dpg_server_destroy(&srv);
}

/* Whether the /metrics text `body` has a sample line starting with
 * `sample` (the name and its labels). */
static bool has_sample(const char *body, const char *sample)
{
	size_t n = strlen(sample);

	for (const char *line = body; line && *line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (strncmp(line, sample, n) == 0 && line[n] == ' ')
			return true;
	}
	return false;
}

/* The gauges of datasets a (budget 1.5), b (2.5) and c (0.5, archived)
 * that `key` (NULL: none) gets on /metrics: bit 0 a, 1 b, 2 c.  Checks
 * each one shown carries its budget and its archived label. */
static unsigned metrics_datasets(const dpg_server *s, const char *key)
{
	static const char *const sample[3] = {
		"dpgate_dataset_epsilon_budget{dataset=\"a\",archived=\"false\"}",
		"dpgate_dataset_epsilon_budget{dataset=\"b\",archived=\"false\"}",
		"dpgate_dataset_epsilon_budget{dataset=\"c\",archived=\"true\"}",
	};
	static const char *const budget[3] = {" 1.5\n", " 2.5\n", " 0.5\n"};
	dpg_resp r = dpg_call(s, "GET", "/metrics", key, NULL);
	unsigned seen = 0;

	cr_assert_eq(r.status, 200, "%s", r.body);
	/* Process metrics are everyone's. */
	cr_expect(has_sample(r.body, "dpgate_spends_total"), "%s", r.body);
	for (int i = 0; i < 3; i++) {
		const char *p = strstr(r.body, sample[i]);

		if (!p)
			continue;
		seen |= 1u << i;
		cr_expect(strncmp(p + strlen(sample[i]), budget[i], strlen(budget[i])) == 0, "%.120s",
			  p);
	}
	/* No dataset's sample at all beyond those. */
	{
		unsigned lines = 0;

		for (const char *p = r.body; (p = strstr(p, "\ndpgate_dataset_")); p++)
			lines++;
		cr_expect_eq(lines, 4u * (unsigned)__builtin_popcount(seen), "%s", r.body);
	}
	dpg_resp_free(&r);
	return seen;
}

/*
 * /metrics' per-dataset gauges follow the key: none to anonymous callers,
 * a scoped key's own datasets, every one to an admin and to an unscoped
 * viewer (who may read them all); an invalid key is 401.  With serve
 * --public-metrics, anyone gets them all.  An archived dataset's gauges
 * say archived="true".
 */
Test(auth, metrics_show_datasets_only_to_keys_that_read_them, .timeout = 120)
{
	static const char *const public_args[] = {"--public-metrics", NULL};
	char analyst_a[160], viewer_b[160], viewer_all[160];
	dpg_server srv;
	dpg_resp r;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "a", 1.5, 0, "basic");
	dpg_make_dataset(&srv, "b", 2.5, 0, "basic");
	dpg_make_dataset(&srv, "c", 0.5, 0, "basic");
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/c", srv.admin_key, NULL, 200);
	dpg_make_key(&srv, "analyst", "a", analyst_a, sizeof(analyst_a));
	dpg_make_key(&srv, "viewer", "b", viewer_b, sizeof(viewer_b));
	dpg_make_key(&srv, "viewer", NULL, viewer_all, sizeof(viewer_all));

	cr_expect_eq(metrics_datasets(&srv, NULL), 0u);
	cr_expect_eq(metrics_datasets(&srv, analyst_a), 1u);
	cr_expect_eq(metrics_datasets(&srv, viewer_b), 2u);
	cr_expect_eq(metrics_datasets(&srv, viewer_all), 7u);
	cr_expect_eq(metrics_datasets(&srv, srv.admin_key), 7u);
	r = dpg_call(&srv, "GET", "/metrics", "dpg_0000000000000000_"
		     "0000000000000000000000000000000000000000000000000000000000000000", NULL);
	cr_expect_eq(r.status, 401, "%s", r.body);
	cr_expect_str_eq(r.content_type, "application/problem+json");
	dpg_resp_free(&r);

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.serve_args = public_args;
	dpg_server_restart(&srv);
	cr_expect_eq(metrics_datasets(&srv, NULL), 7u);
	cr_expect_eq(metrics_datasets(&srv, analyst_a), 7u);
	dpg_server_destroy(&srv);
}

/* The value of /metrics' sample `sample` for `key`, or -1 when it has none. */
static double metrics_sample(const dpg_server *s, const char *key, const char *sample)
{
	dpg_resp r = dpg_call(s, "GET", "/metrics", key, NULL);
	double v = -1.0;

	cr_assert_eq(r.status, 200, "%s", r.body);
	if (has_sample(r.body, sample)) {
		const char *p = strstr(r.body, sample);

		while (p && p != r.body && p[-1] != '\n')
			p = strstr(p + 1, sample);
		cr_assert_not_null(p);
		v = strtod(p + strlen(sample), NULL);
	}
	dpg_resp_free(&r);
	return v;
}

/*
 * The table cache's bytes grow by a fixed size a row (12 for a number and
 * a category), so their value would read off a private row count: it is
 * shown to an admin key (who may read the count), or to anyone under
 * --public-metrics, and to no other caller; the process counters stay
 * everyone's.
 */
Test(auth, metrics_show_the_table_cache_size_only_to_an_admin, .timeout = 120)
{
	static const char *const public_args[] = {"--public-metrics", NULL};
	static const char csv[] = "age,city\n34,Oslo\n51,Bergen\n29,Oslo\n";
	char viewer_all[160], analyst_t[160];
	dpg_server srv;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "t", 1.0, 1e-5, "rdp");
	dpg_upload_csv_private_count(&srv, "t", csv, strlen(csv));
	dpg_make_key(&srv, "viewer", NULL, viewer_all, sizeof(viewer_all));
	dpg_make_key(&srv, "analyst", "t", analyst_t, sizeof(analyst_t));
	cr_expect_gt(metrics_sample(&srv, srv.admin_key, "dpgate_table_cache_bytes"), 0.0);
	cr_expect_geq(metrics_sample(&srv, srv.admin_key, "dpgate_table_cache_evictions_total"),
		      0.0);
	cr_expect_geq(metrics_sample(&srv, NULL, "dpgate_table_cache_hits_total"), 0.0);
	for (int i = 0; i < 3; i++) {
		const char *key = i == 0 ? NULL : i == 1 ? viewer_all : analyst_t;

		cr_expect_eq(metrics_sample(&srv, key, "dpgate_table_cache_bytes"), -1.0,
			     "caller %d sees the cache's bytes", i);
		cr_expect_eq(metrics_sample(&srv, key, "dpgate_table_cache_evictions_total"), -1.0,
			     "caller %d sees the cache's evictions", i);
	}
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.serve_args = public_args;
	dpg_server_restart(&srv);
	cr_expect_geq(metrics_sample(&srv, NULL, "dpgate_table_cache_bytes"), 0.0);
	dpg_server_destroy(&srv);
}

/*
 * Revoking the last live admin key over HTTP is refused with 409, a problem
 * document of the spec's 409 for that route, and the key keeps working; with
 * a second admin key made, the same request revokes it.
 */
Test(auth, the_last_admin_key_is_kept_with_a_409_of_the_spec, .timeout = 120)
{
	char path[64], other[160];
	dpg_server srv;
	dpg_resp r;

	dpg_server_start(&srv);
	snprintf(path, sizeof(path), "/v1/keys/%.16s", srv.admin_key + 4);
	r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 409, "%ld %s", r.status, r.body);
	dpg_assert_in_spec(&srv, "DELETE", "/v1/keys/{id}", "409", "application/problem+json",
			   r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/v1/keys", srv.admin_key, NULL, 200);

	dpg_make_key(&srv, "admin", NULL, other, sizeof(other));
	r = dpg_call(&srv, "DELETE", path, other, NULL);
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/v1/keys", srv.admin_key, NULL, 401);
	dpg_server_destroy(&srv);
}

/* The dataset's budget answer and ledger, as JSON text: what a refused
 * request must leave as it was. */
static char *dataset_state(const dpg_server *srv)
{
	json_t *b = dpg_get_json(srv, srv->admin_key, "/v1/datasets/a/budget");
	json_t *l = dpg_get_json(srv, srv->admin_key, "/v1/datasets/a/ledger?limit=1000");
	json_t *both = json_pack("{s:o, s:o}", "budget", b, "ledger", l);
	char *text = json_dumps(both, JSON_SORT_KEYS);

	json_decref(both);
	cr_assert(text);
	return text;
}

/* `method path` as `key` answers `status`; with 403, a problem document
 * that names the rule, and nothing on the dataset changed. */
static void expect_change(const dpg_server *srv, const char *key, const char *method,
			  const char *path, const char *body, long status)
{
	char *before = dataset_state(srv), *after;
	dpg_resp r = dpg_call(srv, method, path, key, body);

	cr_expect_eq(r.status, status, "%s %s: %ld %s", method, path, r.status, r.body);
	if (status == 403) {
		cr_expect_str_eq(r.content_type, "application/problem+json");
		cr_expect(strstr(r.body, "another key"), "%s", r.body);
		after = dataset_state(srv);
		cr_expect_str_eq(after, before, "%s %s changed the dataset", method, path);
		free(after);
	}
	dpg_resp_free(&r);
	free(before);
}

/* Posts body to path as key; returns the new object's id. */
static void make_as(const dpg_server *srv, const char *key, const char *path, const char *body,
		    long status, char *id, size_t size)
{
	dpg_resp r = dpg_call(srv, "POST", path, key, body);

	cr_assert_eq(r.status, status, "%s: %s", path, r.body);
	snprintf(id, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
}

/*
 * A reservation, a job and a PATE session are changed only by the key that
 * made them, or an admin key: another analyst of the same dataset may read
 * them but gets 403 on commit, release, cancel, queries and release of the
 * session, and the dataset's budget and ledger stay as they were.
 * (Releasing another key's reservation would return budget its holder may
 * have spent already.)
 */
Test(auth, objects_are_changed_only_by_their_key_or_an_admin, .timeout = 180)
{
	char owner[160], other[160], rid[64], jid[64], sid[64], path[160];
	dpg_server srv;
	json_t *j;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "a", 1000.0, 1e-5, "rdp");
	dpg_expect_status(&srv, "PUT", "/v1/datasets/a/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	dpg_make_key(&srv, "analyst", "a", owner, sizeof(owner));
	dpg_make_key(&srv, "analyst", "a", other, sizeof(other));

	make_as(&srv, owner, "/v1/datasets/a/reservations", EVT, 201, rid, sizeof(rid));
	snprintf(path, sizeof(path), "/v1/datasets/a/reservations/%s/release", rid);
	expect_change(&srv, other, "POST", path, NULL, 403);
	snprintf(path, sizeof(path), "/v1/datasets/a/reservations/%s/commit", rid);
	expect_change(&srv, other, "POST", path, NULL, 403);
	j = dpg_get_json(&srv, other, "/v1/datasets/a/reservations");
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(j, "reservations"), 0), "state")),
			 "open");
	json_decref(j);
	expect_change(&srv, owner, "POST", path, NULL, 200);
	make_as(&srv, owner, "/v1/datasets/a/reservations", EVT, 201, rid, sizeof(rid));
	snprintf(path, sizeof(path), "/v1/datasets/a/reservations/%s/release", rid);
	expect_change(&srv, srv.admin_key, "POST", path, NULL, 200);

	make_as(&srv, owner, "/v1/datasets/a/pate/sessions", PATE_SESSION, 201, sid, sizeof(sid));
	snprintf(path, sizeof(path), "/v1/datasets/a/pate/sessions/%s/queries", sid);
	expect_change(&srv, other, "POST", path, "{\"queries\":[{\"votes\":[8,1,1]}]}", 403);
	expect_change(&srv, owner, "POST", path, "{\"queries\":[{\"votes\":[8,1,1]}]}", 201);
	expect_change(&srv, srv.admin_key, "POST", path, "{\"queries\":[{\"votes\":[8,1,1]}]}", 201);
	snprintf(path, sizeof(path), "/v1/datasets/a/pate/sessions/%s/release", sid);
	expect_change(&srv, other, "POST", path,
		      "{\"beta\":0.02,\"sigma\":8,\"order\":16,\"delta\":1e-6}", 403);
	expect_change(&srv, owner, "POST", path,
		      "{\"beta\":0.02,\"sigma\":8,\"order\":16,\"delta\":1e-6}", 201);
	snprintf(path, sizeof(path), "/v1/datasets/a/pate/sessions/%s", sid);
	j = dpg_get_json(&srv, other, path);
	cr_expect_eq(dpg_num(j, "counts.queries"), 2.0);
	json_decref(j);

	make_as(&srv, owner, "/v1/datasets/a/jobs", JOB, 202, jid, sizeof(jid));
	snprintf(path, sizeof(path), "/v1/jobs/%s", jid);
	expect_change(&srv, other, "DELETE", path, NULL, 403);
	j = dpg_get_json(&srv, other, path);
	cr_expect_str_neq(json_string_value(json_object_get(j, "state")), "cancelled");
	json_decref(j);
	{
		dpg_resp r = dpg_call(&srv, "DELETE", path, srv.admin_key, NULL);

		/* Queued (200), running (202) or ended already (409). */
		cr_expect(r.status == 200 || r.status == 202 || r.status == 409, "%ld %s", r.status,
			  r.body);
		dpg_resp_free(&r);
	}
	dpg_server_destroy(&srv);
}
