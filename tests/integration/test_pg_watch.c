/*
 * test_pg_watch.c: long-polls and entity tags see changes made through
 * any server.  Two dpgate servers, A and B, on one PostgreSQL database (a
 * throwaway cluster, tests/pg/pg_cluster.h):
 *
 *   - a long-poll on A (If-None-Match with A's tag) returns 200 within a
 *     second of a charge through B, and its new tag (and body) are what B
 *     serves for the same resource; before the charge both servers serve
 *     the same tag;
 *   - a long-poll on A with no change still waits for its deadline (304);
 *   - after PostgreSQL restarts, a charge through B still wakes a poll on
 *     A (A's listener has connected again by itself).
 *
 * Without A's LISTEN thread only the hub's safety net (a read every
 * DPG_LONG_POLL_RECHECK_S, 10 s) would answer the poll, past the bound.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dpg_limits.h"
#include "harness.h"
#include "pg_rig.h"

#define CHARGE "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"
/* What "woken by the charge" means: the poll's answer within this long of
 * the charge's 201 (the recheck would take DPG_LONG_POLL_RECHECK_S). */
#define WAKE_BOUND_S 1.0
/* How long a poll that nothing wakes is given (below the recheck). */
#define IDLE_WAIT_S 2

/* The two servers, and dataset d made through A. */
static void rig_start(struct dpg_pg_pair *r)
{
	dpg_pg_pair_start(r);
	dpg_make_dataset(&r->a, "d", 100.0, 1e-5, "basic");
}

/* GET path on s: asserts 200 and a tag, copied into tag. */
static void tag_of(const dpg_server *s, const char *path, char *tag, size_t size)
{
	dpg_resp h;

	cr_assert_eq(dpg_http(s, "GET", path, s->admin_key, NULL, 0, NULL, &h), 0);
	cr_assert_eq(h.status, 200, "GET %s: %ld %s", path, h.status, h.body);
	cr_assert(h.etag[0], "GET %s: no ETag", path);
	snprintf(tag, size, "%s", h.etag);
	dpg_resp_free(&h);
}

/* One long-poll, sent on its own thread. */
struct poll_req {
	const dpg_server *s;
	char path[160];
	char inm[128];
	dpg_resp resp;
	int rc;
	double answered_at;
	pthread_t thread;
};

static void *poll_main(void *arg)
{
	struct poll_req *p = arg;
	const char *headers[] = {p->inm, NULL};

	p->rc = dpg_http(p->s, "GET", p->path, p->s->admin_key, NULL, 0, headers, &p->resp);
	p->answered_at = dpg_now_s();
	return NULL;
}

/* Starts a long-poll on `path` of s for `tag`, waiting up to wait_s, and
 * gives it time to be suspended. */
static void poll_start(struct poll_req *p, const dpg_server *s, const char *path,
		       const char *tag, unsigned wait_s)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	snprintf(p->path, sizeof(p->path), "%s?wait=%u", path, wait_s);
	snprintf(p->inm, sizeof(p->inm), "If-None-Match: %s", tag);
	cr_assert_eq(pthread_create(&p->thread, NULL, poll_main, p), 0);
	usleep(500000);
}

/* Charges dataset d through s; returns when its 201 arrived. */
static double charge_through(const dpg_server *s)
{
	dpg_expect_status(s, "POST", "/v1/datasets/d/charges", s->admin_key, CHARGE, 201);
	return dpg_now_s();
}

/*
 * A long-poll on A, a charge through B: the poll answers 200 within
 * WAKE_BOUND_S of the charge, with B's tag and body for the same path,
 * and the tag changed.
 */
static void check_wakes(struct dpg_pg_pair *r, const char *path)
{
	char before_a[96], before_b[96], after_b[96];
	struct poll_req p;
	dpg_resp hb;
	double charged_at;

	tag_of(&r->a, path, before_a, sizeof(before_a));
	tag_of(&r->b, path, before_b, sizeof(before_b));
	cr_assert_str_eq(before_a, before_b, "%s: the servers tag one state differently", path);
	poll_start(&p, &r->a, path, before_a, 30);
	charged_at = charge_through(&r->b);
	pthread_join(p.thread, NULL);
	cr_assert_eq(p.rc, 0, "%s: the long-poll got no answer", path);
	cr_assert_eq(p.resp.status, 200, "%s: long-poll answered %ld", path, p.resp.status);
	cr_assert_leq(p.answered_at - charged_at, WAKE_BOUND_S,
		      "%s: the long-poll on A answered %.2f s after the charge through B", path,
		      p.answered_at - charged_at);
	cr_assert_str_neq(p.resp.etag, before_a, "%s: the tag did not change", path);
	cr_assert_eq(dpg_http(&r->b, "GET", path, r->b.admin_key, NULL, 0, NULL, &hb), 0);
	snprintf(after_b, sizeof(after_b), "%s", hb.etag);
	cr_assert_str_eq(p.resp.etag, after_b, "%s: A's new tag is not B's", path);
	cr_assert_str_eq(p.resp.body, hb.body, "%s: A's body is not B's", path);
	dpg_resp_free(&hb);
	dpg_resp_free(&p.resp);
}

Test(pg_watch, a_charge_through_b_wakes_a_long_poll_on_a, .timeout = 300)
{
	static struct dpg_pg_pair r;
	static const char *const paths[] = {"/v1/datasets/d/budget", "/v1/datasets/d",
					    "/v1/datasets/d/ledger", "/v1/datasets", NULL};

	rig_start(&r);
	for (int i = 0; paths[i]; i++)
		check_wakes(&r, paths[i]);
	dpg_pg_pair_free(&r);
}

Test(pg_watch, a_dataset_created_through_b_wakes_a_poll_on_the_list_on_a, .timeout = 300)
{
	static struct dpg_pg_pair r;
	char before[96], after_b[96];
	struct poll_req p;
	double created_at;

	rig_start(&r);
	tag_of(&r.a, "/v1/datasets", before, sizeof(before));
	poll_start(&p, &r.a, "/v1/datasets", before, 30);
	dpg_make_dataset(&r.b, "e", 1.0, 1e-6, "basic");
	created_at = dpg_now_s();
	pthread_join(p.thread, NULL);
	cr_assert_eq(p.rc, 0);
	cr_assert_eq(p.resp.status, 200, "answered %ld", p.resp.status);
	cr_assert_leq(p.answered_at - created_at, WAKE_BOUND_S, "answered %.2f s after the create",
		      p.answered_at - created_at);
	tag_of(&r.b, "/v1/datasets", after_b, sizeof(after_b));
	cr_assert_str_eq(p.resp.etag, after_b, "A's new tag of the list is not B's");
	cr_assert(strstr(p.resp.body, "\"e\""), "the new dataset is not listed: %s", p.resp.body);
	dpg_resp_free(&p.resp);
	dpg_pg_pair_free(&r);
}

Test(pg_watch, a_long_poll_with_no_change_still_times_out, .timeout = 300)
{
	static struct dpg_pg_pair r;
	char tag[96];
	struct poll_req p;
	double sent_at;

	rig_start(&r);
	tag_of(&r.a, "/v1/datasets/d/budget", tag, sizeof(tag));
	sent_at = dpg_now_s();
	poll_start(&p, &r.a, "/v1/datasets/d/budget", tag, IDLE_WAIT_S);
	pthread_join(p.thread, NULL);
	cr_assert_eq(p.rc, 0);
	cr_assert_eq(p.resp.status, 304, "answered %ld before its deadline", p.resp.status);
	cr_assert_geq(p.answered_at - sent_at, IDLE_WAIT_S - 0.1, "304 after %.2f s of %d",
		      p.answered_at - sent_at, IDLE_WAIT_S);
	dpg_resp_free(&p.resp);
	dpg_pg_pair_free(&r);
}

/* Sends method path (body) to s until it answers `want`, for up to 60 s:
 * a pooled connection that PostgreSQL's restart cut answers 503 once,
 * when it is next used, and is made again (store_pg.c, revive). */
static void until_answered(const dpg_server *s, const char *method, const char *path,
			   const char *body, long want)
{
	double until = dpg_now_s() + 60.0;
	long status = 0;

	while (status != want && dpg_now_s() < until) {
		dpg_resp h;

		if (dpg_http(s, method, path, s->admin_key, body, body ? strlen(body) : 0, NULL,
			     &h) == 0)
			status = h.status;
		dpg_resp_free(&h);
		if (status != want)
			usleep(200000);
	}
	cr_assert_eq(status, want, "%s %s on port %d: %ld after the restart", method, path,
		     s->port, status);
}

Test(pg_watch, after_postgresql_restarts_a_charge_through_b_still_wakes_a, .timeout = 300)
{
	static struct dpg_pg_pair r;
	struct pgc_error err = {0};

	rig_start(&r);
	check_wakes(&r, "/v1/datasets/d/budget");
	cr_assert_eq(pgc_stop(r.cluster, PGC_STOP_FAST, &err), PGC_OK, "%s", err.text);
	/* Long enough for A's listener to lose its link and fail to connect
	 * again at least once. */
	usleep(1000000);
	cr_assert_eq(pgc_start(r.cluster, &err), PGC_OK, "%s", err.text);
	until_answered(&r.a, "GET", "/healthz", NULL, 200);
	until_answered(&r.b, "GET", "/healthz", NULL, 200);
	until_answered(&r.a, "GET", "/v1/datasets/d/budget", NULL, 200);
	until_answered(&r.b, "POST", "/v1/datasets/d/charges", CHARGE, 201);
	/* The listener tries again at most DPG_PG_LISTEN_BACKOFF_MAX_MS after
	 * its last failure. */
	usleep((DPG_PG_LISTEN_BACKOFF_MAX_MS + 1000) * 1000);
	check_wakes(&r, "/v1/datasets/d/budget");
	dpg_pg_pair_free(&r);
}
