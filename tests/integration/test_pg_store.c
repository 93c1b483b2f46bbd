/*
 * test_pg_store.c: one dpgate server on PostgreSQL (a throwaway cluster,
 * tests/pg/pg_cluster.h), and what its store's connections must survive.
 *
 *   - Admission reads one ledger row whatever the ledger's size.  The
 *     statements are prepared, and PostgreSQL keeps a prepared
 *     statement's generic plan, made while the ledger was small, until the
 *     table is next analyzed.  With autovacuum off on the ledger (so no
 *     analyze comes to the rescue), the ledger is grown to LEDGER_ROWS rows
 *     behind the server's back after its plans were made, and charges must
 *     then read none of those rows by a sequential scan: PostgreSQL's own
 *     count (pg_stat_user_tables.seq_tup_read) stays below one scan's
 *     worth.  A plan that hash-joins the ledger reads all of it per charge.
 *   - Pooled connections left idle across a restart of PostgreSQL answer
 *     nothing but 201 once it is back: the server finds them dead when it
 *     takes them from the pool and connects again, rather than letting a
 *     request's first statement fail with 503.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "pg_rig.h"

#define CHARGE "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}}"
#define LEDGER_ROWS 200000
/* Charges before the ledger grows: past the five custom plans after which
 * PostgreSQL may settle on a generic one. */
#define WARM_CHARGES 20
#define MEASURED_CHARGES 30
#define CLIENTS 8
#define CHARGES_PER_CLIENT 5
#define RESTART_TIMEOUT_S 30.0

TestSuite(pg_store, .timeout = 600);

static void charge_ok(const dpg_server *s, const char *dataset)
{
	char path[96];

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", dataset);
	dpg_expect_status(s, "POST", path, s->admin_key, CHARGE, 201);
}

/* A backend sends its statistics at most once a second, at the end of a
 * transaction: wait and charge d, twice over, so that every session the
 * server used for what came before has sent its counts. */
static void charges_flushed(const dpg_server *s)
{
	for (int i = 0; i < 2; i++) {
		sleep(2);
		charge_ok(s, "d");
	}
}

/* The ledger's sequential-scan tuple count, as the statistics hold it. */
static long long ledger_seq_tuples(const char *url)
{
	char out[64];

	cr_assert_eq(dpg_pg_psql(url, "SELECT seq_tup_read FROM pg_stat_user_tables"
				      " WHERE relname = 'ledger'", out, sizeof(out)), 0);
	return atoll(out);
}

Test(pg_store, admission_reads_one_ledger_row_at_any_size)
{
	static struct pgc_cluster *cluster;
	static char url[PGC_URL_MAX], sql[512], out[64];
	static dpg_server s;
	long long before, after;

	dpg_pg_database(&cluster, url, sizeof(url));
	dpg_server_start_on(&s, url);
	cr_assert_eq(dpg_pg_psql(url, "ALTER TABLE ledger SET (autovacuum_enabled = false)", out,
				 sizeof(out)), 0);
	dpg_make_dataset(&s, "d", 1e6, 0, "basic");
	dpg_make_dataset(&s, "bulk", 1e6, 0, "basic");
	for (int i = 0; i < WARM_CHARGES; i++) {
		charge_ok(&s, "d");
		charge_ok(&s, "bulk");
	}
	/* Copies of bulk's last charge: the ledger grows, d's rows do not. */
	snprintf(sql, sizeof(sql),
		 "INSERT INTO ledger (dataset_id, kind, event, cost, epsilon, delta, actor,"
		 " created_at, spent, reserved, open_reservations, charges)"
		 " SELECT dataset_id, kind, event, cost, epsilon, delta, actor, created_at, spent,"
		 " reserved, open_reservations, charges FROM ledger, generate_series(1, %d)"
		 " WHERE seq = (SELECT max(seq) FROM ledger WHERE dataset_id = 'bulk')",
		 LEDGER_ROWS);
	cr_assert_eq(dpg_pg_psql(url, sql, out, sizeof(out)), 0);
	charges_flushed(&s);
	before = ledger_seq_tuples(url);
	for (int i = 0; i < MEASURED_CHARGES; i++)
		charge_ok(&s, "d");
	cr_assert_eq(dpg_budget_of(&s, "d").charges, WARM_CHARGES + 2 + MEASURED_CHARGES);
	charges_flushed(&s);
	after = ledger_seq_tuples(url);
	cr_log_info("ledger rows read by sequential scans over %d charges: %lld", MEASURED_CHARGES,
		    after - before);
	cr_assert_lt(after - before, LEDGER_ROWS,
		     "%d charges read %lld ledger rows by sequential scans", MEASURED_CHARGES,
		     after - before);
	dpg_server_destroy(&s);
	pgc_cluster_free(cluster);
}

struct client {
	const dpg_server *s;
	int created, unavailable, other;
	long other_status;
};

static void *client_main(void *arg)
{
	struct client *c = arg;

	for (int i = 0; i < CHARGES_PER_CLIENT; i++) {
		dpg_resp r;

		if (dpg_http(c->s, "POST", "/v1/datasets/d/charges", c->s->admin_key, CHARGE,
			     strlen(CHARGE), NULL, &r) < 0) {
			c->other++;
			continue;
		}
		if (r.status == 201)
			c->created++;
		else if (r.status == 503)
			c->unavailable++;
		else {
			c->other++;
			c->other_status = r.status;
		}
		dpg_resp_free(&r);
	}
	return NULL;
}

/* CLIENTS clients charging at once, so that most pooled connections and
 * the writer are used; fills c. */
static void charge_at_once(const dpg_server *s, struct client c[CLIENTS])
{
	pthread_t t[CLIENTS];

	for (int i = 0; i < CLIENTS; i++) {
		c[i] = (struct client){.s = s};
		cr_assert_eq(pthread_create(&t[i], NULL, client_main, &c[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(t[i], NULL);
}

static void restart_and_charge(enum pgc_stop_mode mode)
{
	static struct pgc_cluster *cluster;
	static char url[PGC_URL_MAX];
	static dpg_server s;
	struct client c[CLIENTS];
	struct pgc_error err = {0};
	int created = 0;

	dpg_pg_database(&cluster, url, sizeof(url));
	dpg_server_start_on(&s, url);
	dpg_make_dataset(&s, "d", 1e6, 0, "basic");
	charge_at_once(&s, c);
	for (int i = 0; i < CLIENTS; i++)
		cr_assert_eq(c[i].created, CHARGES_PER_CLIENT, "client %d before the restart", i);
	cr_assert_eq(pgc_stop(cluster, mode, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_start(cluster, &err), PGC_OK, "%s", err.text);
	cr_assert(dpg_healthy_within(&s, RESTART_TIMEOUT_S), "no 200 from /healthz within %.0f s",
		  RESTART_TIMEOUT_S);
	charge_at_once(&s, c);
	for (int i = 0; i < CLIENTS; i++) {
		cr_expect_eq(c[i].unavailable, 0, "client %d: %d answers 503 after the restart", i,
			     c[i].unavailable);
		cr_expect_eq(c[i].other, 0, "client %d: %d other answers, the last %ld", i,
			     c[i].other, c[i].other_status);
		created += c[i].created;
	}
	cr_assert_eq(created, CLIENTS * CHARGES_PER_CLIENT);
	cr_assert_eq(dpg_budget_of(&s, "d").charges, 2 * CLIENTS * CHARGES_PER_CLIENT);
	dpg_server_destroy(&s);
	pgc_cluster_free(cluster);
}

Test(pg_store, idle_connections_survive_a_fast_restart)
{
	restart_and_charge(PGC_STOP_FAST);
}

Test(pg_store, idle_connections_survive_a_crash_and_restart)
{
	restart_and_charge(PGC_STOP_IMMEDIATE);
}
