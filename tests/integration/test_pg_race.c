/*
 * test_pg_race.c: admission stays exact with several servers on one
 * ledger.  Three dpgate servers on one PostgreSQL database (a throwaway
 * cluster, tests/pg/pg_cluster.h); 64 clients, client i sending through
 * server i % 3, all started at once on a barrier.
 *
 *   - charges on a dataset whose budget admits exactly K of them (epsilon
 *     0.125 each, budget 0.125 K: every sum is exact in binary): exactly K
 *     answers are 201, every other one a 409 that says what remains, the
 *     budget counts K charges and `dpgate verify` passes;
 *   - the same with reservations: exactly K are opened;
 *   - one Idempotency-Key sent by every client to the three servers at
 *     once: one charge is made, and every answer is the same 201 body
 *     byte for byte;
 *   - one Idempotency-Key on two datasets at once, through two servers
 *     whose INSERTs of the answer a psql session's lock holds until both
 *     wait: one 201, one 422 naming Idempotency-Key, one charge;
 *   - charges on several datasets at once, each client going round them
 *     from its own start: each server's group commit then holds datasets
 *     in every order, and no batch may deadlock with another server's
 *     (every charge is admitted; none is a 503).
 *
 * Expected counts are the test's own (K, the number of clients and
 * attempts), never figures the servers printed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "pg_rig.h"

#define SERVERS 3
#define CLIENTS 64
#define PER_CLIENT 3
#define K 40 /* what the budget admits: fewer than CLIENTS * PER_CLIENT */
#define EIGHTH "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"

struct rig {
	struct pgc_cluster *cluster;
	char url[PGC_URL_MAX];
	dpg_server srv[SERVERS];
};

static void rig_start(struct rig *r)
{
	memset(r, 0, sizeof(*r));
	dpg_pg_database(&r->cluster, r->url, sizeof(r->url));
	for (int i = 0; i < SERVERS; i++)
		dpg_server_start_on(&r->srv[i], r->url);
}

static void rig_verify(struct rig *r)
{
	const char *argv[] = {dpg_bin(), "verify", "--db", r->url, NULL};
	char out[16384];

	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "dpgate verify: %s", out);
}

static void rig_free(struct rig *r)
{
	for (int i = 0; i < SERVERS; i++)
		dpg_server_destroy(&r->srv[i]);
	pgc_cluster_free(r->cluster);
}

/* What every client sends, and what came back. */
struct race {
	struct rig *rig;
	const char *const *paths; /* client c's request i goes to paths[(c + i) % npaths] */
	int npaths, attempts;
	const char *header; /* an extra header line, or NULL */
	pthread_barrier_t start;
	atomic_int ok, refused, other;
	dpg_resp first_ok;  /* the first 201, kept to compare bodies with */
	atomic_int differing;
	pthread_mutex_t lock;
};

struct client {
	struct race *race;
	int index;
};

/* Counts one answer; a 201 is compared with the first 201 kept. */
static void count_answer(struct race *rc, dpg_resp *r)
{
	if (r->status == 201) {
		atomic_fetch_add(&rc->ok, 1);
		pthread_mutex_lock(&rc->lock);
		if (!rc->first_ok.body) {
			rc->first_ok = *r;
			r->body = NULL;
			r->json = NULL;
		} else if (rc->first_ok.len != r->len ||
			   memcmp(rc->first_ok.body, r->body, r->len) != 0) {
			atomic_fetch_add(&rc->differing, 1);
		}
		pthread_mutex_unlock(&rc->lock);
	} else if (r->status == 409 && r->json && json_object_get(r->json, "remaining")) {
		atomic_fetch_add(&rc->refused, 1);
	} else {
		atomic_fetch_add(&rc->other, 1);
	}
	dpg_resp_free(r);
}

static void *client_run(void *arg)
{
	struct client *c = arg;
	struct race *rc = c->race;
	dpg_server *s = &rc->rig->srv[c->index % SERVERS];
	const char *hdr[] = {rc->header, NULL};

	pthread_barrier_wait(&rc->start);
	for (int i = 0; i < rc->attempts; i++) {
		const char *path = rc->paths[(c->index + i) % rc->npaths];
		dpg_resp r;

		if (dpg_http(s, "POST", path, s->admin_key, EIGHTH, strlen(EIGHTH),
			     rc->header ? hdr : NULL, &r) < 0) {
			atomic_fetch_add(&rc->other, 1);
			continue;
		}
		count_answer(rc, &r);
	}
	return NULL;
}

/* Runs CLIENTS clients at once, `attempts` requests each, going round
 * paths; the counts are in rc. */
static void race_run_paths(struct rig *r, struct race *rc, const char *const *paths, int npaths,
			   int attempts, const char *header)
{
	pthread_t th[CLIENTS];
	struct client cl[CLIENTS];

	memset(rc, 0, sizeof(*rc));
	rc->rig = r;
	rc->paths = paths;
	rc->npaths = npaths;
	rc->attempts = attempts;
	rc->header = header;
	pthread_mutex_init(&rc->lock, NULL);
	pthread_barrier_init(&rc->start, NULL, CLIENTS);
	for (int i = 0; i < CLIENTS; i++) {
		cl[i] = (struct client){rc, i};
		cr_assert_eq(pthread_create(&th[i], NULL, client_run, &cl[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&rc->start);
	pthread_mutex_destroy(&rc->lock);
}

/* PER_CLIENT requests of each of CLIENTS clients at once against path. */
static void race_run(struct rig *r, struct race *rc, const char *path, const char *header)
{
	const char *paths[] = {path};

	race_run_paths(r, rc, paths, 1, PER_CLIENT, header);
}

/* The dataset's budget as each server reads it: all must agree. */
static void expect_budget_everywhere(struct rig *r, const char *id, long charges,
				     double reserved_eps)
{
	char path[96];

	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", id);
	for (int i = 0; i < SERVERS; i++) {
		dpg_resp b = dpg_call(&r->srv[i], "GET", path, r->srv[i].admin_key, NULL);

		cr_assert_eq(b.status, 200, "%s", b.body);
		cr_assert_eq(dpg_num(b.json, "charges"), (double)charges, "server %d: %s", i, b.body);
		cr_assert_eq(dpg_num(b.json, "reserved.epsilon"), reserved_eps, "server %d: %s", i,
			     b.body);
		cr_assert_eq(dpg_num(b.json, "remaining.epsilon"), 0.0, "server %d: %s", i, b.body);
		dpg_resp_free(&b);
	}
}

/*
 * Dataset `id` with a budget of exactly K spends, made through server
 * `maker`; every client spends on `route` ("charges" or "reservations");
 * exactly K win, and every server then reads `charges` charges and
 * `reserved_eps` reserved.  Ends with dpgate verify.
 */
static void exactly_k(const char *id, int maker, const char *route, long charges,
		      double reserved_eps)
{
	static struct rig r;
	static struct race rc;
	char path[96];

	rig_start(&r);
	dpg_make_dataset(&r.srv[maker], id, 0.125 * K, 0, "basic");
	snprintf(path, sizeof(path), "/v1/datasets/%s/%s", id, route);
	race_run(&r, &rc, path, NULL);
	cr_assert_eq(atomic_load(&rc.other), 0, "answers other than 201 and 409");
	cr_assert_eq(atomic_load(&rc.ok), K);
	cr_assert_eq(atomic_load(&rc.refused), CLIENTS * PER_CLIENT - K);
	expect_budget_everywhere(&r, id, charges, reserved_eps);
	cr_assert_eq(dpg_budget_of(&r.srv[(maker + 1) % SERVERS], id).ledger_rows, (size_t)K);
	dpg_resp_free(&rc.first_ok);
	rig_verify(&r);
	rig_free(&r);
}

Test(pg_race, exactly_k_charges_win_across_three_servers, .timeout = 600)
{
	exactly_k("race", 0, "charges", K, 0.0);
}

Test(pg_race, exactly_k_reservations_open_across_three_servers, .timeout = 600)
{
	exactly_k("hold", 1, "reservations", 0, 0.125 * K);
}

Test(pg_race, one_idempotency_key_through_three_servers_charges_once, .timeout = 600)
{
	static struct rig r;
	static struct race rc;
	dpg_budget b;

	rig_start(&r);
	/* One admin key in every request: an answer is kept per key and
	 * Idempotency-Key, and every server must find the same one. */
	for (int i = 1; i < SERVERS; i++)
		memcpy(r.srv[i].admin_key, r.srv[0].admin_key, sizeof(r.srv[0].admin_key));
	dpg_make_dataset(&r.srv[0], "once", 10.0, 0, "basic");
	race_run(&r, &rc, "/v1/datasets/once/charges", "Idempotency-Key: pg-race-1");
	cr_assert_eq(atomic_load(&rc.other), 0, "answers other than 201");
	cr_assert_eq(atomic_load(&rc.ok), CLIENTS * PER_CLIENT, "every retry answers 201");
	cr_assert_eq(atomic_load(&rc.differing), 0, "every answer is the first, byte for byte");
	b = dpg_budget_of(&r.srv[1], "once");
	cr_assert_eq(b.charges, 1, "one charge for one key");
	cr_assert_eq(b.spent_eps, 0.125);
	dpg_resp_free(&rc.first_ok);
	rig_verify(&r);
	rig_free(&r);
}

/*
 * PostgreSQL locks a dataset's row in each spend of a batch, so two
 * servers whose batches took two datasets in opposite orders would each
 * wait for the other until PostgreSQL broke the cycle by failing one
 * batch (a 503 for every spend in it).  Budgets are ample: every charge
 * must be admitted, and each dataset counts exactly the charges sent to it.
 */
#define ROUND_DATASETS 4
#define ROUND_ATTEMPTS 8

Test(pg_race, charges_on_several_datasets_at_once_never_deadlock, .timeout = 600)
{
	static struct rig r;
	static struct race rc;
	static char path[ROUND_DATASETS][64];
	const char *paths[ROUND_DATASETS];
	long sent[ROUND_DATASETS] = {0};

	rig_start(&r);
	for (int d = 0; d < ROUND_DATASETS; d++) {
		char id[16];

		snprintf(id, sizeof(id), "round%d", d);
		dpg_make_dataset(&r.srv[d % SERVERS], id, 1e6, 0, "basic");
		snprintf(path[d], sizeof(path[d]), "/v1/datasets/%s/charges", id);
		paths[d] = path[d];
	}
	for (int c = 0; c < CLIENTS; c++)
		for (int i = 0; i < ROUND_ATTEMPTS; i++)
			sent[(c + i) % ROUND_DATASETS]++;
	race_run_paths(&r, &rc, paths, ROUND_DATASETS, ROUND_ATTEMPTS, NULL);
	cr_assert_eq(atomic_load(&rc.other), 0, "answers other than 201 (a 503: a deadlock)");
	cr_assert_eq(atomic_load(&rc.ok), CLIENTS * ROUND_ATTEMPTS);
	for (int d = 0; d < ROUND_DATASETS; d++) {
		char id[16];

		snprintf(id, sizeof(id), "round%d", d);
		cr_assert_eq(dpg_budget_of(&r.srv[(d + 1) % SERVERS], id).charges, sent[d], "%s", id);
	}
	dpg_resp_free(&rc.first_ok);
	rig_verify(&r);
	rig_free(&r);
}

/* One keyed charge of an eighth through server s on dataset `id`. */
struct keyed_charge {
	dpg_server *srv;
	const char *id;
	dpg_resp resp;
};

static void *keyed_charge_run(void *arg)
{
	struct keyed_charge *k = arg;
	const char *hdr[] = {"Idempotency-Key: pg-race-two-datasets", NULL};
	char path[96];

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", k->id);
	if (dpg_http(k->srv, "POST", path, k->srv->admin_key, EIGHTH, strlen(EIGHTH), hdr,
		     &k->resp) < 0)
		k->resp.status = -1;
	return NULL;
}

/* A count that one query on the database at url answers. */
static int count_of(const char *url, const char *sql)
{
	char out[64];

	cr_assert_eq(dpg_pg_psql(url, sql, out, sizeof(out)), 0, "%s: %s", sql, out);
	return atoi(out);
}

/* How many sessions wait for a lock in an INSERT into idempotency. */
static int waiting_idempotency_inserts(const char *url)
{
	return count_of(url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
			     " AND query LIKE 'INSERT INTO idempotency%'");
}

/* Whether a session holds the SHARE lock on idempotency. */
static bool idempotency_held(const char *url)
{
	return count_of(url, "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid ="
			     " l.relation WHERE c.relname = 'idempotency' AND l.mode ="
			     " 'ShareLock' AND l.granted") == 1;
}

/*
 * One Idempotency-Key on two datasets at once, through two servers: each
 * finds no stored answer under its own dataset's lock and charges, and the
 * second to store its answer meets the first's under the same key.  That
 * request is for another dataset, so the answer is the 422 a retry gets
 * (Idempotency-Key used with a different request), with its charge undone;
 * it had been a 503 saying the ledger was busy.  A psql session holding a
 * SHARE lock on the table stops both INSERTs until both are waiting.
 */
Test(pg_race, one_key_on_two_datasets_at_once_is_a_422_for_one, .timeout = 600)
{
	static struct rig r;
	struct keyed_charge k[2];
	pthread_t t[2];
	double deadline;
	dpg_budget ba, bb;
	FILE *held;
	int ok = 0, mismatch = 0;

	rig_start(&r);
	memcpy(r.srv[1].admin_key, r.srv[0].admin_key, sizeof(r.srv[0].admin_key));
	dpg_make_dataset(&r.srv[0], "ka", 10.0, 0, "basic");
	dpg_make_dataset(&r.srv[0], "kb", 10.0, 0, "basic");
	held = dpg_pg_session_open(r.url);
	dpg_pg_session_send(held, "BEGIN;");
	dpg_pg_session_send(held, "LOCK TABLE idempotency IN SHARE MODE;");
	deadline = dpg_now_s() + 20;
	while (!idempotency_held(r.url)) {
		cr_assert_lt(dpg_now_s(), deadline, "psql never took the lock");
		usleep(20000);
	}
	for (int i = 0; i < 2; i++) {
		k[i] = (struct keyed_charge){&r.srv[i], i ? "kb" : "ka", {0}};
		cr_assert_eq(pthread_create(&t[i], NULL, keyed_charge_run, &k[i]), 0);
	}
	/* Well inside the servers' 30 s lock timeout. */
	deadline = dpg_now_s() + 20;
	while (waiting_idempotency_inserts(r.url) < 2) {
		cr_assert_lt(dpg_now_s(), deadline, "the two INSERTs never both waited");
		usleep(20000);
	}
	dpg_pg_session_send(held, "COMMIT;");
	cr_assert_eq(pclose(held), 0);
	for (int i = 0; i < 2; i++) {
		const dpg_resp *resp = &k[i].resp;

		cr_assert_eq(pthread_join(t[i], NULL), 0);
		ok += resp->status == 201;
		if (resp->status == 422) {
			const char *field = json_string_value(json_object_get(resp->json, "field"));

			cr_assert_str_eq(field ? field : "", "Idempotency-Key", "%s", resp->body);
			mismatch++;
		}
		cr_assert(resp->status == 201 || resp->status == 422, "%s: %ld %s", k[i].id,
			  resp->status, resp->body);
		dpg_resp_free(&k[i].resp);
	}
	cr_assert_eq(ok, 1);
	cr_assert_eq(mismatch, 1);
	ba = dpg_budget_of(&r.srv[0], "ka");
	bb = dpg_budget_of(&r.srv[0], "kb");
	cr_assert_eq(ba.charges + bb.charges, 1, "%ld + %ld charges", ba.charges, bb.charges);
	cr_assert_eq(ba.spent_eps + bb.spent_eps, 0.125);
	rig_verify(&r);
	rig_free(&r);
}
