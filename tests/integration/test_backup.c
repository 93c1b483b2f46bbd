/*
 * test_backup.c: `dpgate backup --db FILE --to OUT` copies a live ledger
 * consistently, and its copy restores.
 *
 * Under load (one client charging without pause), the copy must hold every
 * charge answered before the backup started, and at most the one charge in
 * flight beyond those answered when it ended; its stored totals must equal
 * its rows (`dpgate verify` on it exits 0); it must be mode 0600; and a
 * server started on it after the restore docs/operations.md describes must
 * report the copy's figures and go on charging.  The refusals leave nothing behind:
 * an existing OUT is never replaced, a missing directory, a file that is
 * not a dpgate database, and usage errors all exit 2 with no partial copy.
 *
 * A server's directory (database and data directory) moved to another path
 * serves its hosted tables and models from there; copied beside an original
 * whose files differ, the copy's server reads, and on a replacing upload
 * removes, only its own files.
 *
 * A WAL database cleanly stopped and put in a directory the commands cannot
 * write (read-only media): verify reads it and backup copies it, creating
 * nothing beside it.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(backup, .init = setup, .fini = teardown, .timeout = 300);

static const char charge_body[] = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,"
				  "\"delta\":0}}";

struct charger {
	atomic_bool stop;
	atomic_long acked;
	atomic_long other;
};

static void *charge_loop(void *arg)
{
	struct charger *c = arg;

	while (!atomic_load(&c->stop)) {
		dpg_resp r;

		if (dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_body,
			     strlen(charge_body), NULL, &r) == 0 &&
		    r.status == 201)
			atomic_fetch_add(&c->acked, 1);
		else
			atomic_fetch_add(&c->other, 1);
		dpg_resp_free(&r);
	}
	return NULL;
}

/* How many names in dir hold ".partial-" (a copy left behind). */
static int partial_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert(d, "cannot open %s", dir);
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".partial-") != NULL;
	closedir(d);
	return n;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

Test(backup, a_copy_under_load_holds_every_answered_charge_and_restores)
{
	char copy[400], out[16384], path[400];
	const char *backup[] = {dpg_bin(), "backup", "--db", srv.db, "--to", copy, NULL};
	const char *verify[] = {dpg_bin(), "verify", "--db", copy, NULL};
	struct charger c = {0};
	long before, after;
	long long rows, stored;
	pthread_t th;
	struct stat st;
	json_t *report;
	dpg_budget b;
	int rc;

	dpg_skip_on_pg("backup copies an SQLite file (pg_dump copies PostgreSQL)");
	snprintf(copy, sizeof(copy), "%s/copy.db", srv.dir);
	dpg_make_dataset(&srv, "d", 1e6, 1e-5, "basic");
	cr_assert_eq(pthread_create(&th, NULL, charge_loop, &c), 0);
	for (int i = 0; i < 6000 && atomic_load(&c.acked) < 50 && atomic_load(&c.other) == 0; i++)
		sleep_ms(5);
	if (atomic_load(&c.acked) < 50) {
		atomic_store(&c.stop, true);
		pthread_join(th, NULL);
		cr_assert_fail("the load did not start (%ld other answers)", atomic_load(&c.other));
	}
	before = atomic_load(&c.acked);
	rc = dpg_run(out, sizeof(out), backup);
	after = atomic_load(&c.acked);
	atomic_store(&c.stop, true);
	pthread_join(th, NULL);
	cr_assert_eq(rc, 0, "backup: %s", out);
	cr_assert_eq(atomic_load(&c.other), 0, "every charge was answered 201");

	/* The report names the copy and says its ledger replays. */
	report = json_loads(out, 0, NULL);
	cr_assert(report, "backup printed no JSON: %s", out);
	cr_assert_str_eq(json_string_value(json_object_get(report, "backup")), copy);
	cr_assert(json_is_true(json_object_get(json_object_get(report, "verify"), "ok")), "%s", out);
	json_decref(report);

	/* Every charge answered before the backup began, and at most the one
	 * in flight beyond those answered when it ended. */
	rows = dpg_count_rows(copy, "SELECT count(*) FROM ledger WHERE dataset_id = 'd'"
				" AND kind = 'charge'");
	stored = dpg_count_rows(copy, "SELECT charges FROM ledger WHERE dataset_id = 'd'"
				  " ORDER BY seq DESC LIMIT 1");
	cr_assert_geq(rows, before, "copy holds %lld charges, %ld were answered before", rows,
		      before);
	cr_assert_leq(rows, after + 1, "copy holds %lld charges, %ld answered after", rows, after);
	cr_assert_eq(stored, rows, "the copy's running total counts its rows");
	cr_assert_eq(dpg_run(out, sizeof(out), verify), 0, "verify on the copy: %s", out);
	cr_assert_eq(stat(copy, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
	cr_assert_eq(partial_files(srv.dir), 0);

	/* Restore as docs/operations.md says: stop the server, move the database and
	 * its side files away, put the copy in its place, start again. */
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s%s", srv.db, i == 0 ? "-wal" : "-shm");
		cr_assert(unlink(path) == 0 || errno == ENOENT, "%s", path);
	}
	cr_assert_eq(rename(copy, srv.db), 0);
	dpg_server_restart(&srv);
	b = dpg_budget_of(&srv, "d");
	cr_assert_eq(b.charges, rows);
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_body, 201);
	cr_assert_eq(dpg_budget_of(&srv, "d").charges, rows + 1);
}

/* Writes text to path (creating it). */
static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "cannot create %s", path);
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 4096);

	cr_assert(f && buf);
	cr_assert(fread(buf, 1, 4095, f) < 4095);
	fclose(f);
	return buf;
}

Test(backup, refusals_write_nothing)
{
	char out[16384], exists[400], missing[400], text[400], empty[400], foreign[400], to[400];
	const char *onto_existing[] = {dpg_bin(), "backup", "--db", srv.db, "--to", exists, NULL};
	const char *into_missing[] = {dpg_bin(), "backup", "--db", srv.db, "--to", missing, NULL};
	const char *from_text[] = {dpg_bin(), "backup", "--db", text, "--to", to, NULL};
	const char *from_empty[] = {dpg_bin(), "backup", "--db", empty, "--to", to, NULL};
	const char *from_foreign[] = {dpg_bin(), "backup", "--db", foreign, "--to", to, NULL};
	const char *no_to[] = {dpg_bin(), "backup", "--db", srv.db, NULL};
	const char *stray[] = {dpg_bin(), "backup", "--db", srv.db, "--to", to, "extra", NULL};
	const char *onto_dir[] = {dpg_bin(), "backup", "--db", srv.db, "--to", srv.dir, NULL};
	sqlite3 *h = NULL;
	char *kept;

	snprintf(exists, sizeof(exists), "%s/exists.db", srv.dir);
	snprintf(missing, sizeof(missing), "%s/no/such/dir/copy.db", srv.dir);
	snprintf(text, sizeof(text), "%s/notes.txt", srv.dir);
	snprintf(empty, sizeof(empty), "%s/empty.db", srv.dir);
	snprintf(foreign, sizeof(foreign), "%s/foreign.db", srv.dir);
	snprintf(to, sizeof(to), "%s/to.db", srv.dir);
	write_file(exists, "keep me\n");
	write_file(text, "not a database\n");
	write_file(empty, "");
	cr_assert_eq(sqlite3_open(foreign, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(h, "CREATE TABLE t (x)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);

	cr_assert_eq(dpg_run(out, sizeof(out), onto_existing), 2);
	kept = read_file(exists);
	cr_assert_str_eq(kept, "keep me\n");
	free(kept);
	cr_assert_eq(dpg_run(out, sizeof(out), into_missing), 2);
	cr_assert_eq(dpg_run(out, sizeof(out), from_text), 2);
	cr_assert_eq(dpg_run(out, sizeof(out), from_empty), 2);
	cr_assert_eq(dpg_run(out, sizeof(out), from_foreign), 2);
	cr_assert_eq(dpg_run(out, sizeof(out), no_to), 2);
	cr_assert_eq(dpg_run(out, sizeof(out), stray), 2);
	cr_assert_eq(dpg_run(out, sizeof(out), onto_dir), 2);
	cr_assert_eq(access(to, F_OK), -1, "no copy was named");
	cr_assert_eq(partial_files(srv.dir), 0, "no partial copy was left");
	/* The source files are as they were: the empty file is still empty. */
	{
		struct stat st;

		cr_assert_eq(stat(empty, &st), 0);
		cr_assert_eq(st.st_size, 0);
	}
}

/* --db takes sqlite:FILE as verify and keys do. */
Test(backup, takes_the_sqlite_prefix)
{
	char db[400], copy[400], out[16384];
	const char *backup[] = {dpg_bin(), "backup", "--db", db, "--to", copy, NULL};
	const char *verify[] = {dpg_bin(), "verify", "--db", copy, NULL};

	dpg_skip_on_pg("backup copies an SQLite file (pg_dump copies PostgreSQL)");
	snprintf(db, sizeof(db), "sqlite:%s", srv.db);
	snprintf(copy, sizeof(copy), "%s/copy.db", srv.dir);
	dpg_make_dataset(&srv, "d", 1.0, 1e-5, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_body, 201);
	cr_assert_eq(dpg_run(out, sizeof(out), backup), 0, "backup: %s", out);
	cr_assert_eq(dpg_run(out, sizeof(out), verify), 0, "verify on the copy: %s", out);
	cr_assert_eq(dpg_count_rows(copy, "SELECT count(*) FROM ledger WHERE dataset_id = 'd'"
					  " AND kind = 'charge'"), 1);
	cr_assert_eq(partial_files(srv.dir), 0);
}

/* ---- a data directory copied or moved to another path ---------------------- */

#define IRIS_HEADER "sepal_length,sepal_width,petal_length,petal_width,species"

static const char aux_csv[] = "x1,x2,y\n0.25,1,0\n-0.5,2,1\n1.5,-3,1\n";

static const char count_body[] = "{\"query\":\"count\",\"epsilon\":0.01}";

/* What a server's directory holds before it moves: a private hosted table
 * ("adult"), a public one ("aux") and a finished job's model. */
struct moved {
	char job[96];
	char *model;
	size_t model_len;
};

static void fill_for_move(struct moved *m)
{
	static const char job[] = "{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\","
				  "\"label\":\"species\",\"classes\":3,\"epochs\":1,\"lot_size\":10,"
				  "\"noise_multiplier\":1.0}}";
	char path[160];
	dpg_resp r;

	dpg_skip_on_pg("a moved data directory is an SQLite deployment's");
	dpg_make_dataset(&srv, "adult", 50.0, 1e-5, "rdp");
	dpg_upload_iris(&srv, "adult", IRIS_HEADER);
	dpg_expect_status(&srv, "POST", "/v1/datasets", srv.admin_key,
			  "{\"id\":\"aux\",\"name\":\"aux rows\",\"public\":true}", 201);
	cr_assert_eq(dpg_upload_csv(&srv, "aux", aux_csv, strlen(aux_csv)), 3);
	dpg_start_job(&srv, "adult", job, m->job, sizeof(m->job));
	json_decref(dpg_job_succeeded(&srv, m->job, 120));
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", m->job);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	m->model = malloc(r.len);
	cr_assert(m->model);
	memcpy(m->model, r.body, r.len);
	m->model_len = r.len;
	dpg_resp_free(&r);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
}

/* Points srv at the copy of its directory at dir: the database and the data
 * directory inside it, as the harness lays them out. */
static void server_moved_to(const char *dir)
{
	cr_assert_lt(strlen(dir), sizeof(srv.dir));
	snprintf(srv.dir, sizeof(srv.dir), "%s", dir);
	snprintf(srv.db, sizeof(srv.db), "%s/test.db", dir);
	snprintf(srv.log, sizeof(srv.log), "%s/server.log", dir);
}

/* The moved server answers from its own files: a count query on the
 * private table (201), the public table byte for byte, the job's model as
 * it was trained. */
static void expect_own_files(const struct moved *m)
{
	char path[160];
	dpg_resp r;

	r = dpg_call(&srv, "POST", "/v1/datasets/adult/queries", srv.admin_key, count_body);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/aux/data?format=csv", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(r.len == strlen(aux_csv) && memcmp(r.body, aux_csv, r.len) == 0, "%s", r.body);
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", m->job);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(r.len == m->model_len && memcmp(r.body, m->model, r.len) == 0,
		  "the model served is not the one trained");
	dpg_resp_free(&r);
}

Test(backup, a_moved_data_directory_serves_its_tables_and_models)
{
	struct moved m = {0};
	char to[300];

	fill_for_move(&m);
	snprintf(to, sizeof(to), "%s-moved", srv.dir);
	cr_assert_eq(rename(srv.dir, to), 0, "%s", strerror(errno));
	server_moved_to(to);
	dpg_server_restart(&srv);
	expect_own_files(&m);
	free(m.model);
}

/* Overwrites every regular file in dir with text; returns how many. */
static int overwrite_files(const char *dir, const char *text)
{
	char path[700];
	struct dirent *e;
	DIR *d = opendir(dir);
	int n = 0;

	cr_assert(d, "cannot open %s", dir);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		write_file(path, text);
		n++;
	}
	closedir(d);
	return n;
}

/* Whether every file in dir holds text, and there are n of them. */
static bool files_hold(const char *dir, const char *text, int n)
{
	char path[700];
	struct dirent *e;
	DIR *d = opendir(dir);
	int seen = 0;
	bool same = true;

	cr_assert(d, "cannot open %s", dir);
	while ((e = readdir(d)) != NULL) {
		char *kept;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		kept = read_file(path);
		same = same && strcmp(kept, text) == 0;
		free(kept);
		seen++;
	}
	closedir(d);
	return same && seen == n;
}

Test(backup, a_copy_beside_its_original_reads_only_its_own_files)
{
	static const char other[] = "other,columns\nzz,yy\n";
	struct moved m = {0};
	char to[300], cmd[700], old_tables[400], old_models[400];
	int tables, models;

	fill_for_move(&m);
	snprintf(to, sizeof(to), "%s-copy", srv.dir);
	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", srv.dir, to);
	cr_assert_eq(system(cmd), 0);
	/* The original stays, its files now another deployment's. */
	snprintf(old_tables, sizeof(old_tables), "%s/data/tables", srv.dir);
	snprintf(old_models, sizeof(old_models), "%s/data/models", srv.dir);
	tables = overwrite_files(old_tables, other);
	models = overwrite_files(old_models, other);
	cr_assert_eq(tables, 2);
	cr_assert_eq(models, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", srv.dir);
	server_moved_to(to);
	dpg_server_restart(&srv);
	expect_own_files(&m);
	/* A replaced table's old file is removed from this directory only. */
	dpg_upload_iris(&srv, "adult", IRIS_HEADER);
	cr_assert(files_hold(old_tables, other, tables), "the original's tables were touched");
	cr_assert(files_hold(old_models, other, models), "the original's models were touched");
	free(m.model);
	/* The original directory goes with the test. */
	cr_assert_eq(system(cmd), 0);
}

/* ---- a database on read-only media ------------------------------------------ */

/* The user the read-only commands run as when the test runs as root, whom a
 * directory's mode does not stop: nobody. */
#define UNPRIVILEGED_ID 65534

/* Exit status of a child that could not become UNPRIVILEGED_ID or could not
 * run dpgate as that user (a build directory it cannot reach). */
#define CANNOT_DROP 126

/* In the child of dpg_run_with: as root, become UNPRIVILEGED_ID, whom the
 * mode of a directory binds; CANNOT_DROP when that fails. */
static void become_unprivileged(void)
{
	if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(UNPRIVILEGED_ID) < 0 ||
			       setuid(UNPRIVILEGED_ID) < 0))
		_exit(CANNOT_DROP);
}

/* dpg_run as a user the mode of a directory binds.  CANNOT_DROP when the
 * child cannot become one, or run dpgate as it. */
static int run_unprivileged(char *out, size_t out_size, const char *const *argv)
{
	int rc = dpg_run_with(out, out_size, argv, become_unprivileged);

	return rc == 127 ? CANNOT_DROP : rc;
}

/* Copies the file at from to `to` with mode; fails the test when it cannot. */
static void copy_file(const char *from, const char *to, mode_t mode)
{
	size_t len = 0;
	char *bytes = dpg_read_file(from, &len);
	FILE *f = fopen(to, "wb");

	cr_assert(f, "cannot create %s", to);
	cr_assert_eq(fwrite(bytes, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(to, mode), 0);
	free(bytes);
}

Test(backup, verify_and_backup_read_a_wal_database_on_read_only_media)
{
	char top[64] = "/tmp/dpgate-ro-XXXXXX", ro[200], db[260], outdir[200], copy[260];
	char out[16384], side[280], cmd[400];
	const char *verify[] = {dpg_bin(), "verify", "--db", db, NULL};
	const char *backup[] = {dpg_bin(), "backup", "--db", db, "--to", copy, NULL};
	const char *verify_copy[] = {dpg_bin(), "verify", "--db", copy, NULL};
	int rc_verify, rc_backup, rc_copy, sides = 0;
	long long charges;
	json_t *report;

	dpg_skip_on_pg("read-only media hold an SQLite file");
	dpg_make_dataset(&srv, "d", 1.0, 1e-5, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, charge_body, 201);
	/* A clean stop checkpoints the WAL into the file: the file alone is
	 * the database, as on a medium written after its server stopped. */
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_not_null(mkdtemp(top));
	cr_assert_eq(chmod(top, 0755), 0);
	/* A name a URI must escape ('%', '?', '#', a space). */
	snprintf(ro, sizeof(ro), "%s/media %%3F?#x", top);
	snprintf(db, sizeof(db), "%s/dpgate.db", ro);
	snprintf(outdir, sizeof(outdir), "%s/out", top);
	snprintf(copy, sizeof(copy), "%s/copy.db", outdir);
	cr_assert_eq(mkdir(ro, 0755), 0);
	cr_assert_eq(mkdir(outdir, 0777), 0);
	cr_assert_eq(chmod(outdir, 0777), 0);
	copy_file(srv.db, db, 0444);
	cr_assert_eq(chmod(ro, 0555), 0);

	/* Run first and asserted after the directory is writable again, so
	 * that a failure leaves nothing behind that its owner cannot remove. */
	rc_verify = run_unprivileged(out, sizeof(out), verify);
	report = json_loads(out, 0, NULL);
	rc_backup = run_unprivileged(out, sizeof(out), backup);
	rc_copy = rc_backup == 0 ? dpg_run(out, sizeof(out), verify_copy) : -1;
	charges = rc_backup == 0 ? dpg_count_rows(copy, "SELECT count(*) FROM ledger WHERE"
							" dataset_id = 'd' AND kind = 'charge'") : -1;
	/* Nothing was written beside the database. */
	for (int i = 0; i < 2; i++) {
		snprintf(side, sizeof(side), "%s%s", db, i == 0 ? "-wal" : "-shm");
		sides += access(side, F_OK) == 0;
	}
	cr_assert_eq(chmod(ro, 0755), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	cr_assert_eq(system(cmd), 0);

	if (rc_verify == CANNOT_DROP)
		cr_skip_test("cannot run %s as user %d, whom a read-only directory binds (run the "
			     "test as a user other than root, or build where that user can reach)",
			     dpg_bin(), UNPRIVILEGED_ID);
	cr_assert_eq(rc_verify, 0, "verify exited %d", rc_verify);
	cr_assert(json_is_true(json_object_get(report, "ok")), "verify's report");
	json_decref(report);
	cr_assert_eq(rc_backup, 0, "backup exited %d", rc_backup);
	cr_assert_eq(rc_copy, 0, "verify on the copy exited %d", rc_copy);
	cr_assert_eq(charges, 1);
	cr_assert_eq(sides, 0, "side files were made beside the database");
}
