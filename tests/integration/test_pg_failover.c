/*
 * test_pg_failover.c: three dpgate servers on one PostgreSQL database
 * (a throwaway cluster, tests/pg/pg_cluster.h) losing a part under load.
 *
 *   - kill -9 of one server while clients charge through all three: every
 *     acknowledged charge is in the ledger, the other two servers go on
 *     answering 201 throughout, and the ledger holds at most one unanswered
 *     charge per client of the killed server (its requests in flight);
 *   - PostgreSQL stopped at once (as a crash would) under load, then
 *     started again: while it is down, spends and /healthz answer 503 and
 *     nothing else; after it is back every client gets 201 again from the
 *     same servers, which reconnect by themselves; every acknowledged
 *     charge survived, and at most one unanswered one per client was
 *     counted.
 *
 * Both end with `dpgate verify` on the database.  The expected sets come
 * from the clients' own record of the 201 answers (each carries its ledger
 * row's id), never from the server's counters.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "pg_rig.h"

#define SERVERS 3
#define CLIENTS 12                 /* client i charges through server i % SERVERS */
#define MAX_ACKED 200000
#define LOAD_BEFORE_US 800000      /* load before the failure */
#define LOAD_DURING_US 1500000     /* load while the part is down */
#define RECOVERY_TIMEOUT_S 30.0    /* every client answered 201 again by then */
#define CHARGE_BODY "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}}"

enum phase { BEFORE, DOWN, AFTER };

struct client {
	dpg_server *srv;
	atomic_int *phase;
	atomic_bool *stop;
	long long *acked;          /* ledger ids of this client's 201s */
	int n_acked;
	int ok[3];                 /* 201s per phase */
	int unavailable[3];        /* 503s per phase */
	int lost[3];               /* transport failures per phase */
	int other;                 /* any other status */
	long other_status;         /* the last of those, and its phase */
	int other_phase;
};

static void *client_run(void *arg)
{
	struct client *c = arg;

	while (!atomic_load(c->stop)) {
		dpg_resp r;
		int rc = dpg_http(c->srv, "POST", "/v1/datasets/d/charges", c->srv->admin_key,
				  CHARGE_BODY, strlen(CHARGE_BODY), NULL, &r);
		int ph = atomic_load(c->phase);

		if (rc < 0) {
			c->lost[ph]++;
			usleep(2000);
			continue;
		}
		if (r.status == 201 && r.json && c->n_acked < MAX_ACKED / CLIENTS) {
			c->acked[c->n_acked++] = (long long)dpg_num(r.json, "id");
			c->ok[ph]++;
		} else if (r.status == 503) {
			c->unavailable[ph]++;
			usleep(2000);
		} else {
			c->other++;
			c->other_status = r.status;
			c->other_phase = ph;
		}
		dpg_resp_free(&r);
	}
	return NULL;
}

struct rig {
	struct pgc_cluster *cluster;
	char url[PGC_URL_MAX];
	dpg_server srv[SERVERS];
	struct client clients[CLIENTS];
	pthread_t threads[CLIENTS];
	atomic_int phase;
	atomic_bool stop;
	long long *acked;
};

static void rig_start(struct rig *r)
{
	if (!dpg_pg_store_built())
		cr_skip_test("this dpgate has no PostgreSQL store (serve --help names no"
			     " postgresql:// URL)");
	memset(r, 0, sizeof(*r));
	dpg_pg_database(&r->cluster, r->url, sizeof(r->url));
	for (int i = 0; i < SERVERS; i++)
		dpg_server_start_on(&r->srv[i], r->url);
	dpg_make_dataset(&r->srv[0], "d", 1e6, 0, "basic");
	r->acked = calloc(MAX_ACKED, sizeof(long long));
	cr_assert_not_null(r->acked);
	for (int i = 0; i < CLIENTS; i++) {
		struct client *c = &r->clients[i];

		c->srv = &r->srv[i % SERVERS];
		c->phase = &r->phase;
		c->stop = &r->stop;
		c->acked = r->acked + i * (MAX_ACKED / CLIENTS);
		cr_assert_eq(pthread_create(&r->threads[i], NULL, client_run, c), 0);
	}
}

static void rig_stop_load(struct rig *r)
{
	atomic_store(&r->stop, true);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(r->threads[i], NULL);
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/*
 * Every acknowledged id is in the ledger (read through server LIVE), the
 * ledger holds at most MAX_UNANSWERED more charges than were acknowledged,
 * and `dpgate verify` passes.
 */
static void check_ledger(struct rig *r, int live, int max_unanswered)
{
	json_t *entries = dpg_list_all(&r->srv[live], "/v1/datasets/d/ledger?limit=1000", 2000), *e;
	const char *argv[] = {dpg_bin(), "verify", "--db", r->url, NULL};
	long long *seqs = calloc(MAX_ACKED + 1000, sizeof(long long));
	int n_seqs = 0, n_acked = 0;
	char out[16384];
	size_t i;

	cr_assert_not_null(seqs);
	json_array_foreach(entries, i, e)
		if (strcmp(json_string_value(json_object_get(e, "kind")), "charge") == 0 &&
		    n_seqs < MAX_ACKED + 1000)
			seqs[n_seqs++] = json_integer_value(json_object_get(e, "seq"));
	json_decref(entries);
	qsort(seqs, (size_t)n_seqs, sizeof(long long), cmp_ll);
	for (int k = 0; k < CLIENTS; k++) {
		const struct client *c = &r->clients[k];

		for (int j = 0; j < c->n_acked; j++)
			cr_assert_not_null(bsearch(&c->acked[j], seqs, (size_t)n_seqs,
						   sizeof(long long), cmp_ll),
					   "acknowledged charge %lld is not in the ledger",
					   c->acked[j]);
		n_acked += c->n_acked;
	}
	cr_assert_gt(n_acked, 0, "no charge was acknowledged");
	cr_assert_geq(n_seqs, n_acked);
	cr_assert_leq(n_seqs - n_acked, max_unanswered,
		      "%d charges in the ledger, %d acknowledged", n_seqs, n_acked);
	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "dpgate verify: %s", out);
	cr_log_info("%d acknowledged, %d in the ledger", n_acked, n_seqs);
	free(seqs);
}

static void rig_free(struct rig *r)
{
	for (int i = 0; i < SERVERS; i++)
		dpg_server_destroy(&r->srv[i]);
	pgc_cluster_free(r->cluster);
	free(r->acked);
}

Test(pg_failover, kill9_of_one_server_loses_nothing, .timeout = 600)
{
	static struct rig r;

	rig_start(&r);
	usleep(LOAD_BEFORE_US);
	cr_assert_eq(dpg_server_signal(&r.srv[1], SIGKILL), 128 + SIGKILL);
	atomic_store(&r.phase, DOWN);
	usleep(LOAD_DURING_US);
	rig_stop_load(&r);
	for (int i = 0; i < CLIENTS; i++) {
		const struct client *c = &r.clients[i];

		cr_assert_eq(c->other, 0, "client %d: %d answers of another status, the last %ld in"
			     " phase %d", i, c->other, c->other_status, c->other_phase);
		cr_assert_gt(c->ok[BEFORE], 0, "client %d: no 201 before the kill", i);
		if (i % SERVERS == 1)
			continue;
		/* The survivors serve throughout: 201s after the kill, no 503,
		 * no broken exchange. */
		cr_assert_gt(c->ok[DOWN], 0, "client %d: no 201 after the kill", i);
		cr_assert_eq(c->unavailable[BEFORE] + c->unavailable[DOWN], 0, "client %d: 503", i);
		cr_assert_eq(c->lost[BEFORE] + c->lost[DOWN], 0, "client %d: lost exchanges", i);
	}
	/* A request of the killed server's clients in flight may have
	 * committed unanswered: one each at most. */
	check_ledger(&r, 0, CLIENTS / SERVERS);
	rig_free(&r);
}

/* Waits until every client has a 201 in the AFTER phase; false on timeout. */
static bool all_recovered(const struct rig *r)
{
	double deadline = dpg_now_s() + RECOVERY_TIMEOUT_S;

	while (dpg_now_s() < deadline) {
		int done = 0;

		for (int i = 0; i < CLIENTS; i++)
			done += r->clients[i].ok[AFTER] > 0;
		if (done == CLIENTS)
			return true;
		usleep(50000);
	}
	return false;
}

Test(pg_failover, postgresql_restart_answers_503_then_recovers, .timeout = 600)
{
	static struct rig r;
	struct pgc_error err = {0};
	dpg_resp h;
	bool recovered;

	rig_start(&r);
	usleep(LOAD_BEFORE_US);
	atomic_store(&r.phase, DOWN);
	cr_assert_eq(pgc_stop(r.cluster, PGC_STOP_IMMEDIATE, &err), PGC_OK, "%s", err.text);
	usleep(LOAD_DURING_US / 2);
	for (int i = 0; i < SERVERS; i++) {
		cr_assert_eq(dpg_http(&r.srv[i], "GET", "/healthz", NULL, NULL, 0, NULL, &h), 0);
		cr_expect_eq(h.status, 503, "server %d: /healthz %ld with the database down", i,
			     h.status);
		dpg_resp_free(&h);
	}
	usleep(LOAD_DURING_US / 2);
	atomic_store(&r.phase, AFTER);
	cr_assert_eq(pgc_start(r.cluster, &err), PGC_OK, "%s", err.text);
	recovered = all_recovered(&r);
	rig_stop_load(&r);
	for (int i = 0; i < CLIENTS; i++) {
		const struct client *c = &r.clients[i];

		cr_assert_eq(c->other, 0, "client %d: %d answers of another status, the last %ld in"
			     " phase %d", i, c->other, c->other_status, c->other_phase);
		cr_assert_eq(c->lost[BEFORE] + c->lost[DOWN] + c->lost[AFTER], 0,
			     "client %d: a server stopped answering", i);
		cr_assert_gt(c->ok[BEFORE], 0, "client %d: no 201 before the stop", i);
		cr_assert_gt(c->unavailable[DOWN], 0, "client %d: no 503 while it was down", i);
	}
	cr_assert(recovered, "a server did not answer 201 within %.0f s of the restart",
		  RECOVERY_TIMEOUT_S);
	for (int i = 0; i < SERVERS; i++)
		cr_assert_gt(r.srv[i].pid, 0, "server %d must still run", i);
	/* A commit that reached the disk as PostgreSQL stopped may have gone
	 * unanswered: one per client at most. */
	check_ledger(&r, 0, CLIENTS);
	rig_free(&r);
}
