/*
 * test_pg_jobs.c: training jobs of several dpgate servers on one
 * PostgreSQL database (a throwaway cluster, tests/pg/pg_cluster.h).
 *
 *   - jobs submitted through one server are each run once, by one of the
 *     servers, and each commits its reservation once;
 *   - a queued job whose row another transaction holds (a server in the
 *     middle of claiming it) is passed over: the next job runs meanwhile
 *     (the claim's FOR UPDATE SKIP LOCKED);
 *   - a job on a live server outlives its lease length (its server renews
 *     the lease); after kill -9 of that server, another fails it with the
 *     restart rule's reason and commits its reservation once, no sooner
 *     than the lease allows and within the lease plus a sweep period;
 *   - a sweep that read a lease as expired, and writes only after the
 *     owner renewed it, leaves the job running (the lease is checked again
 *     where the end is written);
 *   - a claim waits for an upload that holds the dataset's link, then
 *     reads its version and cancels the job checked against the old one.
 *   - an archive waits for a claim that read the dataset as live: the
 *     archive never answers while the job is queued and the job then
 *     starts.
 *   - a running row of a live server that none of its workers holds is
 *     swept once its lease runs out (only held jobs' leases are renewed).
 *
 * What a job's row holds is read with psql from the cluster, the ledger
 * through the API; expected counts come from what the test submitted.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dpg_limits.h"
#include "harness.h"
#include "pg_rig.h"

#define SERVERS 3
#define SMALL_JOBS 6
/* Slack over the lease for a loaded machine: a sweep's transaction, the
 * test's polling. */
#define SLACK_S 8.0

static const char *const running[] = {"running", NULL};
static const char *const ended[] = {"succeeded", "failed", "cancelled", NULL};

struct rig {
	struct pgc_cluster *cluster;
	char url[PGC_URL_MAX];
	dpg_server srv[SERVERS];
	int n;
};

/* n servers on a fresh database, and dataset fm on Fashion-MNIST. */
static void rig_start(struct rig *r, int n)
{
	dpg_resp resp;

	if (!dpg_pg_store_built())
		cr_skip_test("this dpgate has no PostgreSQL store");
	memset(r, 0, sizeof(*r));
	r->n = n;
	dpg_pg_database(&r->cluster, r->url, sizeof(r->url));
	for (int i = 0; i < n; i++)
		dpg_server_start_on(&r->srv[i], r->url);
	dpg_make_dataset(&r->srv[0], "fm", 50.0, 1e-5, "rdp");
	resp = dpg_call(&r->srv[0], "PUT", "/v1/datasets/fm/data", r->srv[0].admin_key,
			"{\"builtin\":\"fashion-mnist\"}");
	cr_assert_eq(resp.status, 200, "%s", resp.body);
	dpg_resp_free(&resp);
}

static void rig_free(struct rig *r)
{
	for (int i = 0; i < r->n; i++)
		dpg_server_destroy(&r->srv[i]);
	pgc_cluster_free(r->cluster);
}

static long long psql_num(const struct rig *r, const char *sql)
{
	char out[4096];

	cr_assert_eq(dpg_pg_psql(r->url, sql, out, sizeof(out)), 0, "%s: %s", sql, out);
	return atoll(out);
}

/* Waits until row `id` of jobs is locked by another transaction (NOWAIT
 * fails on it). */
static void wait_row_locked(const struct rig *r, const char *table, const char *id)
{
	char sql[256], out[4096];
	double deadline = dpg_now_s() + 30;

	snprintf(sql, sizeof(sql), "SELECT 1 FROM %s WHERE id = '%s' FOR UPDATE NOWAIT", table, id);
	while (dpg_pg_psql(r->url, sql, out, sizeof(out)) == 0) {
		cr_assert_lt(dpg_now_s(), deadline, "row %s of %s was never locked", id, table);
		usleep(50000);
	}
}

/* A psql session that holds, in an open transaction, the jobs whose ids
 * are LIKE `pattern`, once row `probe` is seen locked; pclose ends it. */
static FILE *hold_job_rows(const struct rig *r, const char *pattern, const char *probe)
{
	char sql[160];
	FILE *held = dpg_pg_session_open(r->url);

	snprintf(sql, sizeof(sql), "SELECT id FROM jobs WHERE id LIKE '%s' FOR UPDATE;", pattern);
	dpg_pg_session_send(held, "BEGIN;");
	dpg_pg_session_send(held, sql);
	wait_row_locked(r, "jobs", probe);
	return held;
}

/* Ledger rows of kind commit and release on fm, through the API. */
static void count_closes(const dpg_server *s, int *commits, int *releases)
{
	json_t *entries = dpg_list_all(s, "/v1/datasets/fm/ledger?limit=1000", 100), *e;
	size_t i;

	*commits = *releases = 0;
	json_array_foreach(entries, i, e) {
		const char *k = json_string_value(json_object_get(e, "kind"));

		*commits += strcmp(k, "commit") == 0;
		*releases += strcmp(k, "release") == 0;
	}
	json_decref(entries);
}

static json_t *get_job(const dpg_server *s, const char *id)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	return dpg_get_json(s, s->admin_key, path);
}

static bool job_in_state(const dpg_server *s, const char *id, const char *state)
{
	json_t *j = get_job(s, id);
	bool in = strcmp(json_string_value(json_object_get(j, "state")), state) == 0;

	json_decref(j);
	return in;
}

/* The index of the server whose process the job's owner names. */
static int owner_server(const struct rig *r, const char *id)
{
	char sql[160], out[4096];
	const char *pid_at;

	snprintf(sql, sizeof(sql), "SELECT owner FROM jobs WHERE id = '%s'", id);
	cr_assert_eq(dpg_pg_psql(r->url, sql, out, sizeof(out)), 0, "%s", out);
	pid_at = strchr(out, ':');
	cr_assert_not_null(pid_at, "owner %s", out);
	for (int i = 0; i < r->n; i++)
		if (atol(pid_at + 1) == (long)r->srv[i].pid)
			return i;
	cr_assert_fail("owner %s is none of the servers", out);
	return -1;
}

TestSuite(pg_jobs, .timeout = 600);

Test(pg_jobs, queued_jobs_are_each_run_once_by_one_server)
{
	static struct rig r;
	char ids[SMALL_JOBS][64];
	int commits, releases;

	rig_start(&r, SERVERS);
	for (int i = 0; i < SMALL_JOBS; i++)
		dpg_start_job(&r.srv[0], "fm", dpg_fm_small_job, ids[i], sizeof(ids[i]));
	for (int i = 0; i < SMALL_JOBS; i++)
		json_decref(dpg_job_succeeded(&r.srv[i % SERVERS], ids[i], 300));
	count_closes(&r.srv[1], &commits, &releases);
	cr_assert_eq(commits, SMALL_JOBS, "one commit per job");
	cr_assert_eq(releases, 0);
	cr_assert_eq(psql_num(&r, "SELECT count(*) FROM jobs WHERE owner IS NULL"), 0);
	cr_log_info("%lld servers ran the jobs",
		    psql_num(&r, "SELECT count(DISTINCT owner) FROM jobs"));
	rig_free(&r);
}

Test(pg_jobs, a_queued_job_another_claim_holds_is_passed_over)
{
	static struct rig r;
	char done[64], next[64], sql[1024];
	FILE *held;

	rig_start(&r, 1);
	dpg_start_job(&r.srv[0], "fm", dpg_fm_small_job, done, sizeof(done));
	json_decref(dpg_job_wait(&r.srv[0], done, ended, 300));
	/* With the server stopped, a queued job older than any other, whose
	 * row a session then holds as a claim in progress would. */
	cr_assert_eq(dpg_server_signal(&r.srv[0], SIGTERM), 0);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO jobs (id, dataset_id, trainer, params, event, n_train,"
		 " reservation_id, state, actor, created_at) SELECT 'job-held', dataset_id,"
		 " trainer, params, event, n_train, reservation_id, 'queued', actor,"
		 " '2000-01-01T00:00:00Z' FROM jobs WHERE id = '%s'",
		 done);
	cr_assert_eq(psql_num(&r, sql), 0);
	held = hold_job_rows(&r, "job-held", "job-held");
	dpg_server_restart(&r.srv[0]);
	/* Both workers look for queued jobs while the row is held. */
	dpg_start_job(&r.srv[0], "fm", dpg_fm_small_job, next, sizeof(next));
	json_decref(dpg_job_succeeded(&r.srv[0], next, 120));
	cr_assert(job_in_state(&r.srv[0], "job-held", "queued"));
	dpg_pg_session_send(held, "UPDATE jobs SET state = 'cancelled' WHERE id = 'job-held';");
	dpg_pg_session_send(held, "COMMIT;");
	cr_assert_eq(pclose(held), 0);
	rig_free(&r);
}

/* Waits until `n` advisory locks are in pg_locks with granted = `granted`. */
static void wait_advisory_locks(const struct rig *r, bool granted, long long n)
{
	char sql[160];
	double deadline = dpg_now_s() + 30;

	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND %sgranted",
		 granted ? "" : "NOT ");
	while (psql_num(r, sql) != n) {
		cr_assert_lt(dpg_now_s(), deadline, "%s never counted %lld", sql, n);
		usleep(50000);
	}
}

/*
 * A claim takes the lock an upload holds on the dataset's link before it
 * compares the job's data version (srv__data_link_hold): a session that
 * holds the lock and writes fm's link as an upload would makes the claim
 * wait, and once it commits the claim reads the new version and cancels
 * the job, its reservation released.  Without the lock the claim would
 * have read the old version and run the job on data it was not checked
 * against.
 */
Test(pg_jobs, a_claim_waits_for_an_upload_of_the_link_and_sees_it)
{
	static struct rig r;
	char id[64];
	int commits, releases;
	FILE *held;
	json_t *j;

	rig_start(&r, 1);
	held = dpg_pg_session_open(r.url);
	dpg_pg_session_send(held, "BEGIN;");
	dpg_pg_session_send(held, "UPDATE dataset_data SET created_at = created_at || '.'"
				  " WHERE dataset_id = 'fm';");
	dpg_pg_session_send(held, "SELECT pg_advisory_xact_lock(hashtext('data link fm'));");
	wait_advisory_locks(&r, true, 1);
	dpg_start_job(&r.srv[0], "fm", dpg_fm_small_job, id, sizeof(id));
	wait_advisory_locks(&r, false, 1); /* the claim waits */
	cr_assert(job_in_state(&r.srv[0], id, "queued"));
	dpg_pg_session_send(held, "COMMIT;");
	cr_assert_eq(pclose(held), 0);
	j = dpg_job_wait(&r.srv[0], id, ended, 120);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled", "%s",
			 json_dumps(j, JSON_COMPACT));
	cr_assert(strstr(json_string_value(json_object_get(j, "error")),
			 "replaced before the job started"),
		  "%s", json_dumps(j, JSON_COMPACT));
	json_decref(j);
	count_closes(&r.srv[0], &commits, &releases);
	cr_assert_eq(commits, 0);
	cr_assert_eq(releases, 1);
	rig_free(&r);
}

/* A trigger that holds every claim inside its UPDATE for `seconds`: after
 * the UPDATE's WHERE read the dataset as live, before the COMMIT. */
static void pause_claims(const struct rig *r, int seconds)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "CREATE FUNCTION pause_claim() RETURNS trigger LANGUAGE plpgsql AS"
		 " $$BEGIN PERFORM pg_sleep(%d); RETURN NEW; END$$;"
		 " CREATE TRIGGER pause_claim BEFORE UPDATE ON jobs FOR EACH ROW"
		 " WHEN (OLD.state = 'queued' AND NEW.state = 'running')"
		 " EXECUTE PROCEDURE pause_claim()",
		 seconds);
	cr_assert_eq(psql_num(r, sql), 0);
}

/* Waits until a session of the database sleeps in pause_claim. */
static void wait_claim_paused(const struct rig *r)
{
	double deadline = dpg_now_s() + 60;

	while (psql_num(r, "SELECT count(*) FROM pg_stat_activity"
			   " WHERE datname = current_database() AND wait_event = 'PgSleep'") != 1) {
		cr_assert_lt(dpg_now_s(), deadline, "no claim was ever seen paused");
		usleep(50000);
	}
}

/*
 * An archive takes the link lock a claim holds from before it reads
 * `archived` to its COMMIT: a claim paused after its UPDATE read fm as
 * live makes the archive wait, so the archive answers once the job is
 * running (the claim came first), or the job ends cancelled with its
 * reservation released (the archive came first).  Without the lock the
 * archive answered 200 while the job was queued, and the job then ran on
 * the archived dataset (docs/training.md, "Budget rule").
 */
Test(pg_jobs, an_archive_waits_for_a_claim_that_read_the_dataset_live)
{
	static struct rig r;
	char id[64], at_archive[16];
	int commits, releases;
	dpg_resp resp;
	json_t *j;
	const char *state;

	rig_start(&r, 1);
	pause_claims(&r, 5);
	dpg_start_job(&r.srv[0], "fm", dpg_fm_small_job, id, sizeof(id));
	wait_claim_paused(&r);
	resp = dpg_call(&r.srv[0], "DELETE", "/v1/datasets/fm", r.srv[0].admin_key, NULL);
	cr_assert_eq(resp.status, 200, "%s", resp.body);
	dpg_resp_free(&resp);
	j = get_job(&r.srv[0], id);
	snprintf(at_archive, sizeof(at_archive), "%s",
		 json_string_value(json_object_get(j, "state")));
	json_decref(j);
	j = dpg_job_wait(&r.srv[0], id, ended, 300);
	state = json_string_value(json_object_get(j, "state"));
	count_closes(&r.srv[0], &commits, &releases);
	if (strcmp(state, "cancelled") == 0) {
		cr_assert_eq(commits, 0);
		cr_assert_eq(releases, 1);
	} else {
		cr_assert_str_neq(at_archive, "queued",
				  "the archive answered 200 while job %s was queued, and the job"
				  " then ended %s",
				  id, state);
		cr_assert_eq(commits, 1);
	}
	json_decref(j);
	rig_free(&r);
}

/* Polls job `id` through server s while it stays running, for `seconds`. */
static void expect_running_for(const dpg_server *s, const char *id, double seconds)
{
	double until = dpg_now_s() + seconds;

	while (dpg_now_s() < until) {
		cr_assert(job_in_state(s, id, "running"), "job %s left running", id);
		usleep(500000);
	}
}

Test(pg_jobs, the_job_of_a_killed_server_is_failed_once_by_another)
{
	static struct rig r;
	char id[64];
	int owner, other, commits, releases;
	double killed, waited;
	json_t *j;

	rig_start(&r, SERVERS);
	dpg_start_job(&r.srv[1], "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(dpg_job_wait(&r.srv[0], id, running, 120));
	/* Longer than a lease: its server renews it, and no sweep fails it. */
	expect_running_for(&r.srv[2], id, DPG_JOB_LEASE_S + 2 * DPG_JOB_LEASE_RENEW_S);
	owner = owner_server(&r, id);
	other = (owner + 1) % SERVERS;
	cr_assert_eq(dpg_server_signal(&r.srv[owner], SIGKILL), 128 + SIGKILL);
	killed = dpg_now_s();
	j = dpg_job_wait(&r.srv[other], id, ended, DPG_JOB_LEASE_S + DPG_JOB_LEASE_RENEW_S + 60);
	waited = dpg_now_s() - killed;
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "failed");
	cr_assert_not_null(strstr(json_string_value(json_object_get(j, "error")), "interrupted"),
			   "%s", json_string_value(json_object_get(j, "error")));
	json_decref(j);
	/* The lease last renewed at most one renewal period before the kill
	 * had at least LEASE - RENEW left; the next sweep after it ran out is
	 * at most one period later. */
	cr_assert_geq(waited, DPG_JOB_LEASE_S - DPG_JOB_LEASE_RENEW_S - 1.0, "failed after %.1f s",
		      waited);
	cr_assert_leq(waited, DPG_JOB_LEASE_S + DPG_JOB_LEASE_RENEW_S + SLACK_S,
		      "failed after %.1f s", waited);
	/* Both survivors sweep; the reservation is committed once. */
	sleep(2 * DPG_JOB_LEASE_RENEW_S);
	count_closes(&r.srv[other], &commits, &releases);
	cr_assert_eq(commits, 1);
	cr_assert_eq(releases, 0);
	cr_log_info("failed %.1f s after the kill", waited);
	rig_free(&r);
}

Test(pg_jobs, a_lease_renewed_before_the_sweep_writes_keeps_the_job)
{
	static struct rig r;
	char id[64], sql[256];
	FILE *held;
	int commits, releases;

	rig_start(&r, SERVERS);
	dpg_start_job(&r.srv[0], "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(dpg_job_wait(&r.srv[0], id, running, 120));
	/* The lease reads as expired, while a session holds the job's row
	 * (the owner's renewal waits) and its dataset's (the sweeps wait
	 * after reading the lease, before they write). */
	snprintf(sql, sizeof(sql), "UPDATE jobs SET lease_until = 0 WHERE id = '%s'", id);
	held = dpg_pg_session_open(r.url);
	dpg_pg_session_send(held, "BEGIN;");
	dpg_pg_session_send(held, "SELECT 1 FROM datasets WHERE id = 'fm' FOR UPDATE;");
	wait_row_locked(&r, "datasets", "fm");
	cr_assert_eq(psql_num(&r, sql), 0);
	snprintf(sql, sizeof(sql), "SELECT 1 FROM jobs WHERE id = '%s' FOR UPDATE;", id);
	dpg_pg_session_send(held, sql);
	wait_row_locked(&r, "jobs", id);
	/* Every server has swept (and waits on the dataset) or renews (and
	 * waits on the job). */
	sleep(2 * DPG_JOB_LEASE_RENEW_S);
	snprintf(sql, sizeof(sql),
		 "UPDATE jobs SET lease_until = extract(epoch FROM now())::bigint + 600"
		 " WHERE id = '%s';",
		 id);
	dpg_pg_session_send(held, sql);
	dpg_pg_session_send(held, "COMMIT;");
	cr_assert_eq(pclose(held), 0);
	expect_running_for(&r.srv[1], id, 2 * DPG_JOB_LEASE_RENEW_S);
	count_closes(&r.srv[1], &commits, &releases);
	cr_assert_eq(commits, 0, "a sweep committed the reservation of a renewed lease");
	rig_free(&r);
}

#define IRIS_HEADER "sepal_length,sepal_width,petal_length,petal_width,species"
/* Five lots of logistic regression on iris: a job of moments. */
static const char iris_job[] =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"species\","
	"\"classes\":3,\"epochs\":1,\"lot_size\":30,\"noise_multiplier\":4,\"clip_norm\":1,"
	"\"learning_rate\":0.5}}";

/* POSTs iris_job through s and asserts the queue-full answer. */
static void expect_queue_full(const dpg_server *s)
{
	dpg_resp resp = dpg_call(s, "POST", "/v1/datasets/iris/jobs", s->admin_key, iris_job);

	cr_assert_eq(resp.status, 503, "%s", resp.body);
	cr_assert_not_null(strstr(resp.body, "the job queue is full"), "%s", resp.body);
	dpg_resp_free(&resp);
}

/*
 * The servers share one queue, the database's, and DPG_MAX_QUEUED_JOBS
 * bounds it.  A's two workers run long jobs while B's run what A accepts:
 * 64 jobs submitted through A and run by B leave nothing queued, so a
 * 65th is accepted through A (it was refused, "the job queue is full",
 * by A's count of its own wake-ups until its own workers came free).  Then
 * B's workers take long jobs too, and 64 queued rows fill the queue: a job
 * is refused through either server, B's own wake-ups being none.  No
 * worker is free while the rows are written (a free one could claim one
 * before the test locks them), and a session holds them, as claims in
 * progress would: a claim does not take a row out of the count.
 */
Test(pg_jobs, the_queue_bound_is_the_databases)
{
	enum { BATCH = 16 };
	static struct rig r;
	char busy[2][64], busy_b[2][64], ids[BATCH][64], id[64], sql[1024];
	FILE *held;

	rig_start(&r, 1);
	dpg_make_dataset(&r.srv[0], "iris", 1000.0, 1e-5, "rdp");
	dpg_upload_iris(&r.srv[0], "iris", IRIS_HEADER);
	for (int i = 0; i < 2; i++) {
		dpg_start_job(&r.srv[0], "fm", dpg_fm_long_job, busy[i], sizeof(busy[i]));
		json_decref(dpg_job_wait(&r.srv[0], busy[i], running, 120));
	}
	dpg_server_start_on(&r.srv[1], r.url);
	r.n = 2;
	for (int done = 0; done < DPG_MAX_QUEUED_JOBS; done += BATCH) {
		for (int i = 0; i < BATCH; i++)
			dpg_start_job(&r.srv[0], "iris", iris_job, ids[i], sizeof(ids[i]));
		for (int i = 0; i < BATCH; i++)
			json_decref(dpg_job_succeeded(&r.srv[1], ids[i], 300));
	}
	cr_assert_eq(psql_num(&r, "SELECT count(*) FROM jobs WHERE state = 'queued'"), 0);
	cr_assert_eq(psql_num(&r, "SELECT count(*) FROM jobs WHERE state = 'running'"), 2);
	dpg_start_job(&r.srv[0], "iris", iris_job, id, sizeof(id));
	json_decref(dpg_job_succeeded(&r.srv[1], id, 300));

	for (int i = 0; i < 2; i++) {
		dpg_start_job(&r.srv[1], "fm", dpg_fm_long_job, busy_b[i], sizeof(busy_b[i]));
		json_decref(dpg_job_wait(&r.srv[1], busy_b[i], running, 120));
	}
	cr_assert_eq(psql_num(&r, "SELECT count(*) FROM jobs WHERE state = 'running'"), 4);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO jobs (id, dataset_id, trainer, params, event, n_train,"
		 " reservation_id, state, actor, created_at) SELECT 'job-held-' || g, dataset_id,"
		 " trainer, params, event, n_train, reservation_id, 'queued', actor,"
		 " '2000-01-01T00:00:00Z' FROM jobs, generate_series(1, %d) g WHERE id = '%s'",
		 DPG_MAX_QUEUED_JOBS, id);
	cr_assert_eq(psql_num(&r, sql), 0);
	held = hold_job_rows(&r, "job-held-%", "job-held-1");
	expect_queue_full(&r.srv[1]);
	expect_queue_full(&r.srv[0]);
	cr_assert_eq(psql_num(&r, "SELECT count(*) FROM jobs WHERE state = 'queued'"),
		     DPG_MAX_QUEUED_JOBS, "a refused submission left a job");
	dpg_pg_session_send(held,
			    "UPDATE jobs SET state = 'cancelled' WHERE id LIKE 'job-held-%';");
	dpg_pg_session_send(held, "COMMIT;");
	cr_assert_eq(pclose(held), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(sql, sizeof(sql), "/v1/jobs/%s", busy_b[i]);
		dpg_expect_status(&r.srv[1], "DELETE", sql, r.srv[1].admin_key, NULL, 202);
		json_decref(dpg_job_wait(&r.srv[1], busy_b[i], ended, 120));
	}
	dpg_start_job(&r.srv[1], "iris", iris_job, id, sizeof(id));
	json_decref(dpg_job_succeeded(&r.srv[1], id, 300));
	rig_free(&r);
}

/*
 * A running row that names a live server but that none of its workers
 * holds (a worker that could not record the job's end or start would leave
 * one) runs out of lease and is swept like a dead server's: the lease
 * thread renews the jobs its workers hold, not every running row of its
 * owner.  The row is made with psql: a queued job (both workers busy)
 * marked running under the owner of a job that runs.  It is failed with
 * the restart rule's reason within a lease and a sweep period, while the
 * held jobs keep running; every reservation is committed once.
 */
Test(pg_jobs, a_running_row_no_worker_holds_is_swept_on_a_live_server)
{
	static struct rig r;
	char held[2][64], orphan[64], sql[512];
	int commits, releases;
	json_t *j;

	rig_start(&r, 1);
	for (int i = 0; i < 2; i++)
		dpg_start_job(&r.srv[0], "fm", dpg_fm_long_job, held[i], sizeof(held[i]));
	for (int i = 0; i < 2; i++)
		json_decref(dpg_job_wait(&r.srv[0], held[i], running, 120));
	dpg_start_job(&r.srv[0], "fm", dpg_fm_small_job, orphan, sizeof(orphan));
	snprintf(sql, sizeof(sql),
		 "UPDATE jobs SET state = 'running', started_at = created_at,"
		 " owner = (SELECT owner FROM jobs WHERE id = '%s'),"
		 " lease_until = extract(epoch FROM now())::bigint + %d"
		 " WHERE id = '%s' AND state = 'queued' RETURNING 1",
		 held[0], DPG_JOB_LEASE_S, orphan);
	cr_assert_eq(psql_num(&r, sql), 1, "the job left the queue before it was made an orphan");
	j = dpg_job_wait(&r.srv[0], orphan, ended,
			 DPG_JOB_LEASE_S + DPG_JOB_LEASE_RENEW_S + SLACK_S);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "failed");
	cr_assert_not_null(strstr(json_string_value(json_object_get(j, "error")), "interrupted"),
			   "%s", json_string_value(json_object_get(j, "error")));
	json_decref(j);
	for (int i = 0; i < 2; i++) {
		cr_assert(job_in_state(&r.srv[0], held[i], "running"), "held job %d", i);
		snprintf(sql, sizeof(sql), "/v1/jobs/%s", held[i]);
		dpg_expect_status(&r.srv[0], "DELETE", sql, r.srv[0].admin_key, NULL, 202);
		json_decref(dpg_job_wait(&r.srv[0], held[i], ended, 120));
	}
	count_closes(&r.srv[0], &commits, &releases);
	cr_assert_eq(commits, 3, "one commit per reservation");
	cr_assert_eq(releases, 0);
	rig_free(&r);
}
