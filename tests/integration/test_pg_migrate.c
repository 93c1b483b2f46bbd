/*
 * test_pg_migrate.c: `dpgate migrate` copies an SQLite database whole into
 * an empty PostgreSQL database (a throwaway cluster, tests/pg/pg_cluster.h).
 *
 * The source is built through the API of a server on an SQLite file:
 * datasets of each accountant, charges, a reservation left open and one
 * committed, an idempotent charge, a second key, a finished job and a PATE
 * session with an answer.  After the copy, a server on the PostgreSQL
 * database answers every budget, ledger, reservation list, job and session
 * as the source's server did, accepts the source's admin key, replays the
 * idempotent answer byte for byte and charges on (the ledger's sequence
 * goes on past the copied rows); `dpgate verify` passes on the copy.
 *
 * Refusals change nothing: a target that holds data, a URL no server
 * answers, a file that is not a URL's place, a missing file and a source
 * at a schema version this dpgate does not know each exit 2, leave the
 * source's bytes as they were, and leave an empty target without a table.
 *
 * Every expected value is the test's own (what it created) or read from
 * the source's server before the copy, never from the migrate report.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "harness.h"
#include "jobs_common.h"
#include "pg_cluster.h"

#define CHARGE "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0}}"
#define IDEM "Idempotency-Key: migrate-1"
#define DATASETS 5 /* b, r, z, fm, p */

static const char *const ids[DATASETS] = {"b", "r", "z", "fm", "p"};

struct rig {
	struct pgc_cluster *cluster;
	char target[PGC_URL_MAX], spare[PGC_URL_MAX];
	char dir[64], file[128];
	dpg_server src, copy;
	char idem_body[4096], job[128], session[128];
	json_t *seen; /* each path's answer on the source's server */
};

/* The answers compared after the copy, keyed by path. */
static void remember(struct rig *r)
{
	char path[256];

	r->seen = json_object();
	for (int i = 0; i < DATASETS; i++) {
		static const char *const what[] = {"budget", "ledger", "reservations", "audit"};

		for (size_t k = 0; k < sizeof(what) / sizeof(what[0]); k++) {
			snprintf(path, sizeof(path), "/v1/datasets/%s/%s", ids[i], what[k]);
			json_object_set_new(r->seen, path, dpg_get_json(&r->src, r->src.admin_key, path));
		}
	}
	snprintf(path, sizeof(path), "/v1/jobs/%s", r->job);
	json_object_set_new(r->seen, path, dpg_get_json(&r->src, r->src.admin_key, path));
	snprintf(path, sizeof(path), "/v1/datasets/p/pate/sessions/%s", r->session);
	json_object_set_new(r->seen, path, dpg_get_json(&r->src, r->src.admin_key, path));
	json_object_set_new(r->seen, "/v1/datasets/fm/data",
			    dpg_get_json(&r->src, r->src.admin_key, "/v1/datasets/fm/data"));
	json_object_set_new(r->seen, "/v1/keys", dpg_get_json(&r->src, r->src.admin_key, "/v1/keys"));
}

/* A charge under IDEM on b; its answer kept to compare the replay with. */
static void idempotent_charge(struct rig *r)
{
	const char *hdr[] = {IDEM, NULL};
	dpg_resp a;

	cr_assert_eq(dpg_http(&r->src, "POST", "/v1/datasets/b/charges", r->src.admin_key, CHARGE,
			      strlen(CHARGE), hdr, &a), 0);
	cr_assert_eq(a.status, 201, "%s", a.body);
	cr_assert_lt(a.len, sizeof(r->idem_body));
	memcpy(r->idem_body, a.body, a.len + 1);
	dpg_resp_free(&a);
}

static void populate(struct rig *r)
{
	static const char *const accountants[] = {"basic", "rdp", "zcdp", "rdp", "rdp"};
	char path[256], key[160];
	dpg_resp a;

	for (int i = 0; i < DATASETS; i++) {
		dpg_make_dataset(&r->src, ids[i], 50.0, 1e-5, accountants[i]);
		snprintf(path, sizeof(path), "/v1/datasets/%s/charges", ids[i]);
		dpg_expect_status(&r->src, "POST", path, r->src.admin_key, CHARGE, 201);
	}
	idempotent_charge(r);
	dpg_expect_status(&r->src, "POST", "/v1/datasets/r/reservations", r->src.admin_key,
			  CHARGE, 201);
	a = dpg_call(&r->src, "POST", "/v1/datasets/z/reservations", r->src.admin_key, CHARGE);
	cr_assert_eq(a.status, 201, "%s", a.body);
	snprintf(path, sizeof(path), "/v1/datasets/z/reservations/%s/commit",
		 json_string_value(json_object_get(a.json, "id")));
	dpg_resp_free(&a);
	dpg_expect_status(&r->src, "POST", path, r->src.admin_key, NULL, 200);
	dpg_make_key(&r->src, "analyst", "b", key, sizeof(key));
	dpg_expect_status(&r->src, "PUT", "/v1/datasets/fm/data", r->src.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	json_decref(jobs_common_run(&r->src, "fm", "dpsgd",
				    "\"model\":\"logreg\",\"epochs\":1,\"lot_size\":600,"
				    "\"noise_multiplier\":1.1,\"clip_norm\":1,\"learning_rate\":0.5,"
				    "\"max_train_examples\":6000",
				    r->job, sizeof(r->job), 300));
	a = dpg_call(&r->src, "POST", "/v1/datasets/p/pate/sessions", r->src.admin_key,
		     "{\"aggregator\":\"gnmax\",\"num_teachers\":100,\"num_classes\":4,"
		     "\"sigma2\":8}");
	cr_assert_eq(a.status, 201, "%s", a.body);
	snprintf(r->session, sizeof(r->session), "%s",
		 json_string_value(json_object_get(a.json, "id")));
	dpg_resp_free(&a);
	snprintf(path, sizeof(path), "/v1/datasets/p/pate/sessions/%s/queries", r->session);
	dpg_expect_status(&r->src, "POST", path, r->src.admin_key,
			  "{\"queries\":[{\"votes\":[0,0,100,0]}]}", 201);
}

static void rig_start(struct rig *r)
{
	struct pgc_error err = {0};

	memset(r, 0, sizeof(*r));
	cr_assert_eq(pgc_cluster_new(NULL, 0, &r->cluster, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_new_database(r->cluster, r->target, sizeof(r->target), &err), PGC_OK,
		     "%s", err.text);
	cr_assert_eq(pgc_new_database(r->cluster, r->spare, sizeof(r->spare), &err), PGC_OK,
		     "%s", err.text);
	snprintf(r->dir, sizeof(r->dir), "/tmp/dpgate-migrate-XXXXXX");
	cr_assert_not_null(mkdtemp(r->dir));
	snprintf(r->file, sizeof(r->file), "%s/source.db", r->dir);
	dpg_server_start_on(&r->src, r->file);
	populate(r);
	remember(r);
	/* A stopped server leaves the file as it stays: its bytes are
	 * compared after each run of migrate. */
	dpg_server_signal(&r->src, SIGTERM);
}

static int migrate(const char *from, const char *to, char *out, size_t size)
{
	const char *argv[] = {dpg_bin(), "migrate", "--from", from, "--to", to, NULL};

	return dpg_run(out, size, argv);
}

/* Runs `dpgate verify` on db and returns its exit status. */
static int verify(const char *db)
{
	const char *argv[] = {dpg_bin(), "verify", "--db", db, NULL};
	char out[16384];

	return dpg_run(out, sizeof(out), argv);
}

static void rig_free(struct rig *r)
{
	char cmd[160];

	json_decref(r->seen);
	if (r->copy.pid)
		dpg_server_destroy(&r->copy);
	dpg_server_destroy(&r->src);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
	cr_expect_eq(system(cmd), 0);
	pgc_cluster_free(r->cluster);
}

/* Every answer remembered from the source's server, from the copy's; the
 * key list holds the copy's own admin key besides the source's keys. */
static void same_answers(struct rig *r)
{
	const char *path;
	json_t *before;

	json_object_foreach(r->seen, path, before) {
		json_t *now = dpg_get_json(&r->copy, r->src.admin_key, path);

		if (strcmp(path, "/v1/keys") != 0) {
			cr_expect(json_equal(before, now), "%s differs after the copy", path);
		} else {
			size_t i;
			json_t *k;

			json_array_foreach(json_object_get(before, "keys"), i, k)
				cr_expect(json_array_size(json_object_get(now, "keys")) > i &&
						  json_equal(k, json_array_get(json_object_get(now, "keys"), i)),
					  "key %zu differs after the copy", i);
		}
		json_decref(now);
	}
}

/* The idempotent charge answered again byte for byte; a new charge goes
 * on past the copied ledger rows. */
static void replays_and_charges_on(struct rig *r)
{
	const char *hdr[] = {IDEM, NULL};
	json_t *ledger = json_object_get(json_object_get(r->seen, "/v1/datasets/b/ledger"),
					 "entries");
	json_int_t last = 0;
	size_t i;
	json_t *e;
	dpg_resp a;

	cr_assert_eq(dpg_http(&r->copy, "POST", "/v1/datasets/b/charges", r->src.admin_key, CHARGE,
			      strlen(CHARGE), hdr, &a), 0);
	cr_assert_eq(a.status, 201, "%s", a.body);
	cr_expect_str_eq(a.body, r->idem_body, "the replay differs from the first answer");
	dpg_resp_free(&a);
	json_array_foreach(ledger, i, e)
		if (json_integer_value(json_object_get(e, "seq")) > last)
			last = json_integer_value(json_object_get(e, "seq"));
	cr_assert_gt(last, 0);
	a = dpg_call(&r->copy, "POST", "/v1/datasets/b/charges", r->src.admin_key, CHARGE);
	cr_assert_eq(a.status, 201, "a charge on the copy: %s", a.body);
	cr_expect_gt(dpg_num(a.json, "id"), (double)last);
	dpg_resp_free(&a);
}

Test(pg_migrate, copies_whole_and_refuses_what_it_must, .timeout = 900)
{
	struct rig r;
	char out[16384];
	size_t len, len_after;
	char *bytes, *after;
	json_t *report;

	rig_start(&r);
	bytes = dpg_read_file(r.file, &len);
	cr_assert_eq(migrate(r.file, r.target, out, sizeof(out)), 0, "%s", out);
	report = json_loads(out, 0, NULL);
	cr_assert_not_null(report, "%s", out);
	cr_expect_eq(json_integer_value(json_object_get(report, "datasets_verified")), DATASETS);
	json_decref(report);
	after = dpg_read_file(r.file, &len_after);
	cr_expect(len == len_after && memcmp(bytes, after, len) == 0, "migrate wrote its source");
	free(after);
	cr_assert_eq(verify(r.target), 0, "dpgate verify fails on the copy");
	dpg_server_start_on(&r.copy, r.target);
	same_answers(&r);
	replays_and_charges_on(&r);
	free(bytes);
	rig_free(&r);
}

/* A copy of the source whose recorded schema version is one this dpgate
 * does not know. */
static void future_copy(const struct rig *r, char *path, size_t size)
{
	sqlite3 *db;
	size_t len;
	char *bytes = dpg_read_file(r->file, &len);
	FILE *f;

	snprintf(path, size, "%s/future.db", r->dir);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(bytes, 1, len, f), len);
	fclose(f);
	free(bytes);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "INSERT INTO schema_migrations VALUES (999, '999_future.sql', "
				      "'2030-01-01T00:00:00Z')", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* Each refusal exits 2 and leaves the source's bytes and the spare
 * database as they were (without a table, which verify reports as "not a
 * dpgate database", exit 2); a target that holds data keeps it. */
Test(pg_migrate, refusals_change_nothing, .timeout = 900)
{
	struct rig r;
	char out[16384], future[128], missing[128], not_url[128];
	size_t len, len_after;
	char *bytes, *after;

	rig_start(&r);
	snprintf(missing, sizeof(missing), "%s/missing.db", r.dir);
	snprintf(not_url, sizeof(not_url), "%s/target.db", r.dir);
	future_copy(&r, future, sizeof(future));
	cr_assert_eq(migrate(r.file, r.target, out, sizeof(out)), 0, "%s", out);
	bytes = dpg_read_file(r.file, &len);
	/* A target that holds data, even the same data. */
	cr_expect_eq(migrate(r.file, r.target, out, sizeof(out)), 2);
	/* A URL no server answers, and a file where a URL belongs. */
	cr_expect_eq(migrate(r.file, "postgresql://dpgate@127.0.0.1:1/none", out, sizeof(out)), 2);
	cr_expect_eq(migrate(r.file, not_url, out, sizeof(out)), 2);
	cr_expect_eq(access(not_url, F_OK), -1, "migrate created %s", not_url);
	/* A missing source, and one at an unknown schema version. */
	cr_expect_eq(migrate(missing, r.spare, out, sizeof(out)), 2);
	cr_expect_eq(access(missing, F_OK), -1, "migrate created %s", missing);
	cr_expect_eq(migrate(future, r.spare, out, sizeof(out)), 2);
	after = dpg_read_file(r.file, &len_after);
	cr_expect(len == len_after && memcmp(bytes, after, len) == 0, "a refusal wrote the source");
	free(after);
	free(bytes);
	cr_expect_eq(verify(r.spare), 2, "a refusal wrote the spare database");
	/* The target that held data holds the same, and still verifies. */
	cr_expect_eq(verify(r.target), 0);
	dpg_server_start_on(&r.copy, r.target);
	same_answers(&r);
	rig_free(&r);
}
