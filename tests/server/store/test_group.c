/*
 * test_group.c: the store's group commit (srv_store_spend).
 *
 * A batch of spends shares one transaction and one COMMIT; each spend runs
 * in a savepoint and sees the ones before it.  The tests build batches of
 * known content (srv__spend_batch_for_tests) and check each outcome and
 * what is left in the ledger, then run many threads against one budget.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "api.h"
#include "http.h"
#include "json.h"
#include "store_fixture.h"
#include "store_internal.h"
#include "store_sqlite.h"

/* One pure-epsilon charge with its event, cost and answer builder. */
struct charge {
	acct_event ev;
	char ev_text[128];
	acct_cost cost;
	srv_spend sp;
	uint8_t hash[32];
	bool fail_body;
};

static char *answer(void *arg, int64_t seq, const char *rid, const srv_dataset *ds)
{
	struct charge *c = arg;
	json_t *o;
	char *text;

	(void)rid;
	if (c->fail_body)
		return NULL;
	o = json_pack("{s:I, s:f}", "id", (json_int_t)seq, "spent", ds->spent.v[0]);
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

static void make_charge(struct charge *c, const char *dataset, double eps, const char *key)
{
	memset(c, 0, sizeof(*c));
	c->ev.type = ACCT_EV_EPSILON_DELTA;
	c->ev.u.epsilon_delta.epsilon = eps;
	c->cost.n = 2;
	c->cost.v[0] = eps;
	c->sp.kind = SRV_SPEND_CHARGE;
	c->sp.dataset_id = dataset;
	/* The store records the event's text as given. */
	snprintf(c->ev_text, sizeof(c->ev_text), "{\"type\":\"epsilon_delta\",\"epsilon\":%.17g}",
		 eps);
	c->sp.event_text = c->ev_text;
	c->sp.cost = &c->cost;
	c->sp.actor = "tester";
	c->sp.idempotency_key = key;
	crypto_hash_sha256(c->hash, (const unsigned char *)&eps, sizeof(eps));
	c->sp.request_hash = c->hash;
	c->sp.text_fn = answer;
	c->sp.body_arg = c;
}

static long long count_rows(srv_db *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	long long n;

	cr_assert_eq(sqlite3_prepare_v2(srv__sqlite_handle(srv__db_conn(db)), sql, -1, &s, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
	n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

Test(group_commit, each_spend_of_a_batch_keeps_or_drops_its_own_writes)
{
	struct store_fixture fx;
	struct charge c[7];
	const srv_spend *sps[7];
	int statuses[7], rcs[7];
	char *bodies[7];
	srv_dataset dss[7], ds;
	json_t *report = NULL;
	srv_db *db;

	db = store_fixture_start(&fx, "g", 1.0);
	make_charge(&c[0], "g", 0.3, "k1");    /* A: charged */
	make_charge(&c[1], "g", 0.3, "k1");    /* B: A's retry, replayed in the same transaction */
	make_charge(&c[2], "g", 0.3, NULL);    /* C: charged (0.6) */
	make_charge(&c[3], "g", 0.5, NULL);    /* D: 1.1 > 1: refused, 409 */
	make_charge(&c[4], "nope", 0.1, NULL); /* E: no such dataset */
	make_charge(&c[5], "g", 0.05, NULL);   /* F: its answer fails: rolled back alone */
	c[5].fail_body = true;
	make_charge(&c[6], "g", 0.25, NULL);   /* G: charged (0.85) */
	for (int i = 0; i < 7; i++)
		sps[i] = &c[i].sp;

	cr_assert_eq(srv__spend_batch_for_tests(db, sps, 7, statuses, bodies, dss, rcs), 0);

	cr_assert_eq(rcs[0], SRV_OK);
	cr_assert_eq(statuses[0], 201);
	cr_assert_eq(rcs[1], SRV_REPLAYED);
	cr_assert_str_eq(bodies[1], bodies[0], "a retry gets the stored bytes");
	cr_assert_eq(rcs[2], SRV_OK);
	cr_assert_eq(rcs[3], SRV_CONFLICT);
	cr_assert_float_eq(dss[3].spent.v[0], 0.6, 1e-12, "the 409 sees A and C");
	cr_assert_eq(rcs[4], SRV_NOT_FOUND);
	cr_assert_eq(rcs[5], SRV_DB_ERROR);
	cr_assert_null(bodies[5]);
	cr_assert_eq(rcs[6], SRV_OK);
	cr_assert_float_eq(dss[6].spent.v[0], 0.85, 1e-12);

	/* What committed: A, C and G, nothing of F. */
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE dataset_id = 'g' AND kind = 'charge'"), 3);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE epsilon = 0.05"), 0);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM idempotency WHERE key = 'k1'"), 1);
	cr_assert_eq(srv_store_dataset_get(db, "g", &ds), SRV_OK);
	cr_assert_eq(ds.charges, 3);
	cr_assert_float_eq(ds.spent.v[0], 0.85, 1e-12);
	cr_assert_eq(srv_verify_json(db, &report), SRV_OK, "stored totals equal the rows");
	json_decref(report);
	for (int i = 0; i < 7; i++)
		free(bodies[i]);
	store_fixture_end(&fx, db);
}

Test(group_commit, a_batch_of_refusals_commits_nothing)
{
	struct store_fixture fx;
	struct charge c[2];
	const srv_spend *sps[2] = {&c[0].sp, &c[1].sp};
	int statuses[2], rcs[2];
	char *bodies[2];
	srv_dataset dss[2];
	srv_db *db;

	db = store_fixture_start(&fx, "g", 1.0);
	make_charge(&c[0], "nope", 0.1, NULL);
	make_charge(&c[1], "g", 0.1, NULL);
	c[1].fail_body = true;
	cr_assert_eq(srv__spend_batch_for_tests(db, sps, 2, statuses, bodies, dss, rcs), 0);
	cr_assert_eq(rcs[0], SRV_NOT_FOUND);
	cr_assert_eq(rcs[1], SRV_DB_ERROR);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE kind = 'charge'"), 0);
	cr_assert(sqlite3_get_autocommit(srv__sqlite_handle(srv__db_conn(db))), "no transaction left open");
	store_fixture_end(&fx, db);
}

/* A commit hook that turns every COMMIT into a ROLLBACK (SQLite then
 * answers the COMMIT with SQLITE_CONSTRAINT_COMMITHOOK): a COMMIT that
 * fails as a full disk or an I/O error would. */
static int refuse_commit(void *arg)
{
	(void)arg;
	return 1;
}

/*
 * When a batch's COMMIT fails, nothing of it was stored, so no answer of it
 * may go out: not the charge's, and not that of its retry in the same batch
 * (B), which read the charge's answer from the uncommitted transaction.  Had
 * B's bytes gone out, B's next retry would find no stored answer and make a
 * new charge with a new answer: two answers, each a noisy output for a
 * mechanism, for one charge.  A replay of an answer committed before (C)
 * fails with the batch too; its retry reads it back.
 */
Test(group_commit, a_failed_commit_gives_out_no_answer_of_its_batch_not_even_a_replay)
{
	struct store_fixture fx;
	struct charge first, c[3];
	const srv_spend *sps[3] = {&c[0].sp, &c[1].sp, &c[2].sp}, *one[1] = {&first.sp};
	int statuses[3], rcs[3];
	char *bodies[3], *durable;
	srv_dataset dss[3];
	srv_db *db;

	db = store_fixture_start(&fx, "g", 1.0);
	make_charge(&first, "g", 0.125, "k0");
	cr_assert_eq(srv__spend_batch_for_tests(db, one, 1, statuses, bodies, dss, rcs), 0);
	cr_assert_eq(rcs[0], SRV_OK);
	durable = bodies[0];

	make_charge(&c[0], "g", 0.25, "k1"); /* A: a charge */
	make_charge(&c[1], "g", 0.25, "k1"); /* B: A's retry, in the same batch */
	make_charge(&c[2], "g", 0.125, "k0"); /* C: a retry of the committed charge */
	sqlite3_commit_hook(srv__sqlite_handle(srv__db_conn(db)), refuse_commit, NULL);
	cr_assert_eq(srv__spend_batch_for_tests(db, sps, 3, statuses, bodies, dss, rcs), 0);
	sqlite3_commit_hook(srv__sqlite_handle(srv__db_conn(db)), NULL, NULL);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(rcs[i], SRV_COMMIT_FAILED, "spend %d: rc %d", i, rcs[i]);
		cr_assert_null(bodies[i], "spend %d's answer is not handed out", i);
	}
	cr_assert(sqlite3_get_autocommit(srv__sqlite_handle(srv__db_conn(db))), "no transaction left open");
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE kind = 'charge'"), 1);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM idempotency WHERE key = 'k1'"), 0);

	/* The retries, now that COMMIT works: B charges (the first answer under
	 * k1 that anyone sees), C gets the stored bytes. */
	cr_assert_eq(srv__spend_batch_for_tests(db, sps + 1, 2, statuses, bodies, dss, rcs), 0);
	cr_assert_eq(rcs[0], SRV_OK);
	cr_assert_eq(rcs[1], SRV_REPLAYED);
	cr_assert_str_eq(bodies[1], durable);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE kind = 'charge'"), 2);
	free(bodies[0]);
	free(bodies[1]);
	free(durable);
	store_fixture_end(&fx, db);
}

/* ---- many threads, one budget ------------------------------------------- */

#define THREADS 16
#define PER_THREAD 12
#define ADMITTED 100

struct worker {
	srv_store *st;
	int ok, refused, other;
};

static void *spend_many(void *arg)
{
	struct worker *w = arg;
	srv_db *db = srv_store_acquire(w->st);

	for (int i = 0; i < PER_THREAD; i++) {
		struct charge c;
		srv_dataset ds;
		char *body = NULL;
		int status = 0, rc;

		make_charge(&c, "g", 1.0, NULL);
		rc = srv_store_spend(db, &c.sp, &status, &body, &ds);
		if (rc == SRV_OK)
			w->ok++;
		else if (rc == SRV_CONFLICT)
			w->refused++;
		else
			w->other++;
		free(body);
	}
	srv_store_release(w->st, db);
	return NULL;
}

Test(group_commit, concurrent_spends_admit_exactly_the_budget)
{
	struct store_fixture fx;
	struct worker w[THREADS];
	pthread_t t[THREADS];
	int ok = 0, refused = 0, other = 0;
	uint64_t batches, spends;
	json_t *report = NULL;
	srv_dataset ds;
	srv_db *db;

	db = store_fixture_start(&fx, "g", (double)ADMITTED);
	srv_store_release(fx.st, db);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){fx.st, 0, 0, 0};
		cr_assert_eq(pthread_create(&t[i], NULL, spend_many, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		ok += w[i].ok;
		refused += w[i].refused;
		other += w[i].other;
	}
	cr_assert_eq(ok, ADMITTED);
	cr_assert_eq(refused, THREADS * PER_THREAD - ADMITTED);
	cr_assert_eq(other, 0);
	srv_store_group_stats(fx.st, &batches, &spends);
	cr_assert_eq(spends, (uint64_t)(THREADS * PER_THREAD), "every spend ran in a batch");
	cr_assert(batches >= 1 && batches <= spends);
	cr_log_info("%d spends in %llu commits", THREADS * PER_THREAD, (unsigned long long)batches);
	db = srv_store_acquire(fx.st);
	cr_assert_eq(srv_store_dataset_get(db, "g", &ds), SRV_OK);
	cr_assert_eq(ds.charges, ADMITTED);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE kind = 'charge'"), ADMITTED);
	cr_assert_eq(srv_verify_json(db, &report), SRV_OK);
	json_decref(report);
	store_fixture_end(&fx, db);
}

/* Every column a read of the row gives equals what the spend handed back. */
static void assert_same_row(const srv_dataset *a, const srv_dataset *b)
{
	cr_assert_str_eq(a->id, b->id);
	cr_assert_eq(a->budget_epsilon, b->budget_epsilon);
	cr_assert_eq(a->budget_delta, b->budget_delta);
	cr_assert_eq(a->spent.n, b->spent.n);
	cr_assert_eq(a->reserved.n, b->reserved.n);
	for (unsigned i = 0; i < a->spent.n; i++)
		cr_assert_eq(a->spent.v[i], b->spent.v[i]);
	for (unsigned i = 0; i < a->reserved.n; i++)
		cr_assert_eq(a->reserved.v[i], b->reserved.v[i]);
	cr_assert_eq(a->open_reservations, b->open_reservations);
	cr_assert_eq(a->charges, b->charges);
	cr_assert_eq(a->archived, b->archived);
	cr_assert_str_eq(a->updated_at, b->updated_at);
}

/* Another SQLite connection's write, as another process would make it. */
static void run_sql(sqlite3 *h, const char *sql)
{
	cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
}

/* Another writer changes what the dataset has spent: the totals its last
 * ledger row carries (schema/006). */
static void set_spent_elsewhere(sqlite3 *h, const char *dataset, const char *spent)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
		 "UPDATE ledger SET spent = '%s' WHERE seq ="
		 " (SELECT max(seq) FROM ledger WHERE dataset_id = '%s')",
		 spent, dataset);
	run_sql(h, sql);
	cr_assert_eq(sqlite3_changes(h), 1, "%s has no ledger row", dataset);
}

static int charge_one(srv_db *db, const char *dataset, double eps, srv_dataset *ret_ds)
{
	struct charge c;
	char *body = NULL;
	int status = 0, rc;

	make_charge(&c, dataset, eps, NULL);
	rc = srv_store_spend(db, &c.sp, &status, &body, ret_ds);
	free(body);
	return rc;
}

/* SQLITE_STMTJRNL_SPILL's default: the buffer a statement journal starts
 * with, allocated whole on the journal's first write. */
#define STATEMENT_JOURNAL_BUFFER (64 * 1024)

/*
 * A charge runs no statement that needs a temporary table or a statement
 * journal.  An INSERT with RETURNING needs both under SQLite (it runs
 * RETURNING as a trigger that fills a temporary table), and each run
 * allocates and frees buffers of tens of KiB for them, which glibc may hand
 * back to the kernel and fault in again on the next charge: some 15 % more
 * CPU per charge.  So no single allocation of SQLite's during a warm charge
 * reaches the statement journal's buffer; the largest is read from SQLite's
 * own statistics (on in this process: only serve turns them off).  The
 * answer's id is still the new ledger row's seq.
 */
Test(group_commit, a_charge_keeps_no_statement_journal)
{
	struct store_fixture fx;
	struct charge c;
	srv_dataset ds;
	sqlite3_int64 now, highest;
	char *body = NULL;
	int status = 0;
	json_t *answer_json;
	srv_db *db;

	db = store_fixture_start(&fx, "j", 10.0);
	for (int i = 0; i < 2; i++) /* statements prepared, pages cached */
		cr_assert_eq(charge_one(db, "j", 1.0, &ds), SRV_OK);
	cr_assert_eq(sqlite3_status64(SQLITE_STATUS_MALLOC_SIZE, &now, &highest, 1), SQLITE_OK);
	make_charge(&c, "j", 1.0, NULL);
	cr_assert_eq(srv_store_spend(db, &c.sp, &status, &body, &ds), SRV_OK);
	cr_assert_eq(sqlite3_status64(SQLITE_STATUS_MALLOC_SIZE, &now, &highest, 0), SQLITE_OK);
	cr_assert_gt(highest, 0, "SQLite's memory statistics are on");
	cr_assert_lt(highest, STATEMENT_JOURNAL_BUFFER,
		     "a charge allocated %lld bytes at once", (long long)highest);
	answer_json = json_loads(body, 0, NULL);
	cr_assert_not_null(answer_json);
	cr_assert_eq(json_integer_value(json_object_get(answer_json, "id")),
		     count_rows(db, "SELECT max(seq) FROM ledger"));
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE dataset_id = 'j'"), 4,
		     "the creation row and three charges");
	json_decref(answer_json);
	free(body);
	store_fixture_end(&fx, db);
}

/*
 * The writer connection keeps the dataset rows its single spends
 * committed and uses them while nothing else wrote the file.  Each change
 * below comes from elsewhere (another connection of the store, another
 * SQLite connection as another process would have) and each must decide
 * the next spend: a remembered row would admit every one of them.
 */
Test(group_commit, a_remembered_dataset_row_sees_every_other_writer)
{
	struct store_fixture fx;
	srv_dataset ds, fresh;
	srv_db *db;
	sqlite3 *other;

	db = store_fixture_start(&fx, "m", 10.0);
	store_fixture_dataset(db, "n", 10.0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(charge_one(db, "m", 1.0, &ds), SRV_OK);
		cr_assert_eq(srv_store_dataset_get(db, "m", &fresh), SRV_OK);
		assert_same_row(&ds, &fresh);
	}
	cr_assert_eq(ds.spent.v[0], 3.0);

	/* A lower budget through another connection of the store. */
	cr_assert_eq(srv_store_dataset_update(db, "m", NULL, 3.5, NAN, "admin", &fresh), SRV_OK);
	cr_assert_eq(charge_one(db, "m", 1.0, &ds), SRV_CONFLICT);
	cr_assert_eq(ds.budget_epsilon, 3.5);
	cr_assert_eq(charge_one(db, "m", 0.5, &ds), SRV_OK);
	cr_assert_eq(srv_store_dataset_get(db, "m", &fresh), SRV_OK);
	assert_same_row(&ds, &fresh);

	/* Another process spends nearly all of it. */
	cr_assert_eq(sqlite3_open(fx.path, &other), SQLITE_OK);
	run_sql(other, "UPDATE datasets SET budget_epsilon = 3.5 WHERE id = 'm'");
	set_spent_elsewhere(other, "m", "[3.25,0.0]");
	cr_assert_eq(charge_one(db, "m", 0.5, &ds), SRV_CONFLICT);
	cr_assert_eq(ds.spent.v[0], 3.25);
	cr_assert_eq(charge_one(db, "m", 0.25, &ds), SRV_OK);
	cr_assert_eq(ds.spent.v[0], 3.5);

	/* A spend on another dataset in between, then back. */
	cr_assert_eq(charge_one(db, "n", 1.0, &ds), SRV_OK);
	cr_assert_eq(charge_one(db, "m", 0.25, &ds), SRV_CONFLICT);

	/* Two remembered rows; another process changes the one not charged
	 * next, and the charge after that must see it. */
	store_fixture_dataset(db, "p", 10.0);
	store_fixture_dataset(db, "q", 10.0);
	cr_assert_eq(charge_one(db, "p", 1.0, &ds), SRV_OK);
	cr_assert_eq(charge_one(db, "q", 1.0, &ds), SRV_OK);
	cr_assert_eq(charge_one(db, "p", 1.0, &ds), SRV_OK);
	set_spent_elsewhere(other, "q", "[9.5,0.0]");
	cr_assert_eq(charge_one(db, "p", 1.0, &ds), SRV_OK);
	cr_assert_eq(srv_store_dataset_get(db, "p", &fresh), SRV_OK);
	assert_same_row(&ds, &fresh);
	cr_assert_eq(charge_one(db, "q", 1.0, &ds), SRV_CONFLICT);
	cr_assert_eq(ds.spent.v[0], 9.5);

	/* More datasets than the cache holds: every row handed back is the
	 * stored one, and a change elsewhere still decides the next spend. */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 300; i++) {
			char id[16];

			snprintf(id, sizeof(id), "d%d", i);
			if (round == 0)
				store_fixture_dataset(db, id, 10.0);
			cr_assert_eq(charge_one(db, id, 1.0, &ds), SRV_OK);
			cr_assert_eq(srv_store_dataset_get(db, id, &fresh), SRV_OK);
			assert_same_row(&ds, &fresh);
			cr_assert_eq(ds.charges, round + 1);
		}
	}
	set_spent_elsewhere(other, "d299", "[9.5,0.0]");
	cr_assert_eq(charge_one(db, "d298", 1.0, &ds), SRV_OK);
	cr_assert_eq(charge_one(db, "d299", 1.0, &ds), SRV_CONFLICT);

	/* Archived elsewhere: refused, with the archived row. */
	run_sql(other, "UPDATE datasets SET budget_epsilon = 100 WHERE id = 'm'");
	cr_assert_eq(charge_one(db, "m", 1.0, &ds), SRV_OK);
	cr_assert_eq(srv_store_dataset_archive(db, "m", "admin", &fresh), SRV_OK);
	cr_assert_eq(charge_one(db, "m", 1.0, &ds), SRV_CONFLICT);
	cr_assert(ds.archived);
	sqlite3_close(other);
	store_fixture_end(&fx, db);
}

static char *keep_reservation_id(void *arg, int64_t seq, const char *rid, const srv_dataset *ds)
{
	(void)seq;
	(void)ds;
	snprintf(arg, 64, "%s", rid ? rid : "");
	return strdup("{}");
}

/*
 * A job charged what ran, within its reservation, ends so also after an
 * admin lowered the budget below it (1 to 0.2) while it ran: the
 * charge spends nothing beyond the reservation.  (Before, the end's fit
 * check failed, the end was rolled back and the job stayed running with
 * its reservation open, later committed whole.)  A charge over the
 * reservation is still refused, and nothing of that end is written.
 */
/* The version of dataset `id`'s data link, as a submission reads it
 * (malloc'ed). */
static char *link_version(srv_db *db, const char *id)
{
	srv_data_link link;
	char *version = NULL;

	cr_assert_eq(srv__data_link_get_version(db, id, &link, &version), SRV_OK);
	free(link.columns);
	return version;
}

/* Links builtin data of 10 rows to dataset `id`; its version into
 * *ret_version (the caller frees it). */
static void link_data(srv_db *db, const char *id, char **ret_version)
{
	char *old = NULL;

	cr_assert_eq(srv__data_link_builtin(db, id, "fashion-mnist", "/nowhere", 10, "tester",
					    &old),
		     SRV_OK);
	free(old);
	*ret_version = link_version(db, id);
}

/* Reserves `eps` of dataset `id` and inserts queued job `job_id` under that
 * reservation, pinned to data link version `version`. */
static void queue_job(srv_db *db, const char *id, const char *job_id, double eps,
		      const char *version)
{
	struct charge res;
	char rid[64] = "", *body = NULL;
	int status = 0;
	srv_dataset ds;
	srv_job_new job = {.id = job_id, .dataset_id = id, .params_text = "{}",
			   .event_text = res.ev_text, .n_train = 10, .reservation_id = rid,
			   .actor = "tester", .data_link = version};

	make_charge(&res, id, eps, NULL);
	res.sp.kind = SRV_SPEND_RESERVE;
	res.sp.ttl_seconds = 3600;
	res.sp.text_fn = keep_reservation_id;
	res.sp.body_arg = rid;
	cr_assert_eq(srv_store_spend(db, &res.sp, &status, &body, &ds), SRV_OK);
	free(body);
	cr_assert_neq(rid[0], '\0');
	cr_assert_eq(srv__job_insert(db, &job), SRV_OK);
}

Test(group, a_job_ends_charged_within_its_reservation_after_the_budget_is_lowered)
{
	struct store_fixture fx;
	srv_db *db = store_fixture_start(&fx, "j", 1.0);
	char id[SRV_JOB_ID_BYTES], *version = NULL;
	srv_dataset ds;
	acct_cost over = {.n = 2, .v = {0.9}}, ran = {.n = 2, .v = {0.3}};
	srv_job_charge too_much = {"{\"type\":\"epsilon_delta\",\"epsilon\":0.9}", &over, "ran"};
	srv_job_charge within = {"{\"type\":\"epsilon_delta\",\"epsilon\":0.3}", &ran, "ran"};

	link_data(db, "j", &version);
	queue_job(db, "j", "job_1", 0.8, version);
	cr_assert_eq(srv__job_claim(db, "job_1", "me", 1, INT64_MAX / 2, "1", id), SRV_OK);
	free(version);
	cr_assert_eq(srv_store_dataset_update(db, "j", NULL, 0.2, NAN, "admin", &ds), SRV_OK);
	cr_assert_eq(srv__job_finish_charged(db, "job_1", "running", "succeeded", false, &too_much,
					     "{}", NULL, NULL, "job", NULL),
		     SRV_CONFLICT);
	cr_assert_eq(srv_store_dataset_get(db, "j", &ds), SRV_OK);
	cr_assert_eq(ds.reserved.v[0], 0.8);
	cr_assert_eq(srv__job_finish_charged(db, "job_1", "running", "succeeded", false, &within,
					     "{}", NULL, NULL, "job", NULL),
		     SRV_OK);
	cr_assert_eq(srv_store_dataset_get(db, "j", &ds), SRV_OK);
	cr_assert_eq(ds.spent.v[0], 0.3);
	cr_assert_eq(ds.reserved.v[0], 0.0);
	store_fixture_end(&fx, db);
}

/*
 * A job starts only on the data link version its submission checked: one
 * pinned to a version the link no longer has (the link written again
 * between the submission's checks and its insert, or while it queued)
 * is cancelled by the claim, its reservation released, with the fixed
 * error; one with no version (queued before versions were recorded) too.
 * A link cannot be written while a job of its dataset runs.
 */
Test(group, a_job_starts_only_on_the_link_version_it_was_checked_against)
{
	struct store_fixture fx;
	srv_db *db = store_fixture_start(&fx, "j", 1.0);
	char id[SRV_JOB_ID_BYTES], *v1 = NULL, *v2 = NULL, *old = NULL;
	srv_job_row j;
	srv_dataset ds;

	link_data(db, "j", &v1);
	cr_assert_eq(srv_store_table_record(db, "j", "/nowhere/t1.csv", 3, "[]", 9, true, true,
					    "tester", NULL, &old),
		     SRV_OK);
	free(old);
	old = NULL;
	v2 = link_version(db, "j");
	cr_assert_str_neq(v1, v2);
	queue_job(db, "j", "job_stale", 0.5, v1);
	queue_job(db, "j", "job_none", 0.5, NULL);
	cr_assert_eq(srv__job_claim(db, "job_stale", "me", 1, INT64_MAX / 2, "1", id),
		     SRV_CONFLICT);
	cr_assert_str_eq(id, "job_stale");
	cr_assert_eq(srv__job_claim(db, "job_none", "me", 1, INT64_MAX / 2, "1", id), SRV_CONFLICT);
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(srv__job_load(db, k ? "job_none" : "job_stale", &j), SRV_OK);
		cr_assert_str_eq(j.state, "cancelled");
		cr_assert_str_eq(j.error, "the dataset's data was replaced before the job started; "
					  "nothing was read, and the reservation was released");
		srv__job_row_clear(&j);
	}
	cr_assert_eq(srv_store_dataset_get(db, "j", &ds), SRV_OK);
	cr_assert_eq(ds.reserved.v[0], 0.0);
	cr_assert_eq(ds.spent.v[0], 0.0);

	queue_job(db, "j", "job_current", 0.5, v2);
	cr_assert_eq(srv__job_claim(db, "job_current", "me", 1, INT64_MAX / 2, "1", id), SRV_OK);
	cr_assert_eq(srv__data_link_builtin(db, "j", "fashion-mnist", "/nowhere", 10, "tester",
					    &old),
		     SRV_CONFLICT);
	cr_assert_eq(srv_store_table_record(db, "j", "/nowhere/t2.csv", 3, "[]", 9, true, true,
					    "tester", NULL, &old),
		     SRV_CONFLICT);
	cr_assert_null(old);
	free(v1);
	v1 = link_version(db, "j");
	cr_assert_str_eq(v1, v2);
	free(v1);
	free(v2);
	store_fixture_end(&fx, db);
}

/*
 * Which job a claim took is read back by the claim's owner and number,
 * also when two workers of one server (one owner) claimed in the same
 * millisecond; a claim that took none, another owner's claim of the same
 * number, and a job that has ended since answer SRV_NOT_FOUND.  An end
 * written again with the end time of a first try that was committed
 * answers SRV_OK and closes nothing twice; with another end time it is a
 * conflict.
 */
Test(group, a_claim_and_an_end_are_known_again_by_what_they_wrote)
{
	static const char finished_at[] = "2026-01-02T03:04:05.006Z";
	struct store_fixture fx;
	srv_db *db = store_fixture_start(&fx, "j", 1.0);
	char id[SRV_JOB_ID_BYTES], *version = NULL;
	srv_dataset ds;
	srv_job_row j;

	link_data(db, "j", &version);
	queue_job(db, "j", "job_a", 0.25, version);
	queue_job(db, "j", "job_b", 0.5, version);
	free(version);
	cr_assert_eq(srv__job_claim(db, "job_a", "me", 7, INT64_MAX / 2, "1", id), SRV_OK);
	cr_assert_eq(srv__job_claim(db, "job_b", "me", 8, INT64_MAX / 2, "1", id), SRV_OK);
	cr_assert_eq(srv__job_claim_took(db, "me", 7, id), SRV_OK);
	cr_assert_str_eq(id, "job_a");
	cr_assert_eq(srv__job_claim_took(db, "me", 8, id), SRV_OK);
	cr_assert_str_eq(id, "job_b");
	cr_assert_eq(srv__job_claim_took(db, "me", 9, id), SRV_NOT_FOUND);
	cr_assert_eq(srv__job_claim_took(db, "another", 7, id), SRV_NOT_FOUND);

	/* The second try is one after a COMMIT reported failed though written. */
	for (int attempt = 0; attempt < 2; attempt++) {
		int rc = srv__job_finish_charged(db, "job_a", "running", "succeeded", false, NULL,
						 "{}", NULL, NULL, "job", finished_at);

		cr_assert_eq(rc, SRV_OK, "attempt %d", attempt);
	}
	cr_assert_eq(srv__job_finish_charged(db, "job_a", "running", "succeeded", false, NULL,
					     "{}", NULL, NULL, "job", "2026-01-02T03:04:05.007Z"),
		     SRV_CONFLICT);
	cr_assert_eq(srv__job_finish_charged(db, "job_a", "running", "failed", false, NULL, NULL,
					     "x", NULL, "job", finished_at),
		     SRV_CONFLICT);
	cr_assert_eq(srv__job_load(db, "job_a", &j), SRV_OK);
	cr_assert_str_eq(j.state, "succeeded");
	cr_assert_str_eq(j.finished_at, finished_at);
	srv__job_row_clear(&j);
	cr_assert_eq(srv__job_claim_took(db, "me", 7, id), SRV_NOT_FOUND);
	/* job_a's reservation committed once; job_b's still open. */
	cr_assert_eq(srv_store_dataset_get(db, "j", &ds), SRV_OK);
	cr_assert_eq(ds.spent.v[0], 0.25);
	cr_assert_eq(ds.reserved.v[0], 0.5);
	store_fixture_end(&fx, db);
}

/*
 * The store's file renamed, then replaced by a new file at its path, then
 * put back: while the path names another file or none, a spend is refused
 * before its transaction begins (nothing of it is written to the file the
 * store holds), and once the file is back spends go through again.
 */
Test(group_commit, a_spend_is_refused_while_the_file_is_not_at_its_path)
{
	struct store_fixture fx;
	srv_dataset ds;
	char moved[160];
	FILE *other;
	srv_db *db;

	db = store_fixture_start(&fx, "f", 10.0);
	cr_assert_eq(charge_one(db, "f", 1.0, &ds), SRV_OK);
	cr_assert_eq(srv_store_file_check(fx.st), SRV_OK);
	snprintf(moved, sizeof(moved), "%s.moved", fx.path);
	cr_assert_eq(rename(fx.path, moved), 0);
	cr_assert_eq(srv_store_file_check(fx.st), SRV_DB_MOVED);
	cr_assert_eq(charge_one(db, "f", 1.0, &ds), SRV_DB_MOVED);
	other = fopen(fx.path, "wx");
	cr_assert_not_null(other);
	fclose(other);
	cr_assert_eq(charge_one(db, "f", 1.0, &ds), SRV_DB_MOVED);
	cr_assert_eq(rename(moved, fx.path), 0);
	cr_assert_eq(srv_store_file_check(fx.st), SRV_OK);
	cr_assert_eq(charge_one(db, "f", 1.0, &ds), SRV_OK);
	cr_assert_eq(ds.charges, 2);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM ledger WHERE dataset_id = 'f'"
				    " AND kind = 'charge'"), 2);
	store_fixture_end(&fx, db);
}

/*
 * A running job's progress and a cancel request are single statements
 * outside any write transaction; while the store's file is renamed away
 * neither is written to the file the store holds (the rename keeps it the
 * same file, so a write made then would show once it is back).
 */
Test(group_commit, job_progress_and_cancel_write_nothing_while_the_file_is_away)
{
	struct store_fixture fx;
	srv_db *db = store_fixture_start(&fx, "w", 1.0);
	char id[SRV_JOB_ID_BYTES], moved[160], *version = NULL;

	link_data(db, "w", &version);
	queue_job(db, "w", "job_w", 0.5, version);
	free(version);
	cr_assert_eq(srv__job_claim(db, "job_w", "me", 1, INT64_MAX / 2, "1", id), SRV_OK);
	srv__job_save_progress(db, "job_w", "{\"step\":1}");
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM jobs WHERE id = 'job_w'"
				    " AND progress = '{\"step\":1}'"), 1);
	snprintf(moved, sizeof(moved), "%s.moved", fx.path);
	cr_assert_eq(rename(fx.path, moved), 0);
	srv__job_save_progress(db, "job_w", "{\"step\":2}");
	cr_assert_eq(srv__job_request_cancel(db, "job_w"), SRV_DB_MOVED);
	cr_assert_eq(rename(moved, fx.path), 0);
	cr_assert_eq(srv_store_file_check(fx.st), SRV_OK);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM jobs WHERE id = 'job_w'"
				    " AND progress = '{\"step\":1}' AND cancel_requested = 0"), 1);
	/* Back at its path, both are written again. */
	srv__job_save_progress(db, "job_w", "{\"step\":3}");
	cr_assert_eq(srv__job_request_cancel(db, "job_w"), SRV_OK);
	cr_assert_eq(count_rows(db, "SELECT count(*) FROM jobs WHERE id = 'job_w'"
				    " AND progress = '{\"step\":3}' AND cancel_requested = 1"), 1);
	store_fixture_end(&fx, db);
}
