/*
 * test_storage.c: the disk fails under a running server, and comes back.
 *
 * The server runs with fail_storage.so preloaded (FAIL_STORAGE_SHIM, from
 * meson): while one switch file exists its fsync and fdatasync fail with
 * EIO, while the other exists its writes to the WAL fail with ENOSPC.
 * Either way every COMMIT fails, and then:
 *
 *   - a charge, a mechanism release, a reservation and a dataset update each
 *     answer 503 problem+json, with no output, and the server logs the
 *     failure as a JSON line;
 *   - reads go on, and show nothing of the failed writes;
 *   - with the switch gone, the same requests succeed on the same server:
 *     a failed COMMIT leaves no connection stuck;
 *   - after a clean stop, `dpgate verify` passes and the ledger holds the
 *     acknowledged charges only.
 *
 * A COMMIT whose fsync failed may still have written its WAL frames whole,
 * and a crash before the next commit overwrites them leaves them to be
 * found at the next start (srv__commit in server/store/store_db.c).  The last
 * test kills the server right after such a failure: the ledger then holds
 * the failed charge or not, and a retry with the same Idempotency-Key is
 * charged exactly once either way.
 *
 * A queued job whose start fails at COMMIT is started once the disk is
 * back, without a restart.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "harness.h"

static dpg_server srv;
static dpg_shim_env shim;
/* The switches' files, as the shim's variables name them. */
static const char *const sync_file = shim.file[0], *const write_file = shim.file[1];

static void setup(void)
{
	static const dpg_shim_switch switches[] = {{"DPGATE_TEST_FAIL_SYNC", "sync"},
						   {"DPGATE_TEST_FAIL_WAL_WRITE", "wal-write"}};

	dpg_shim_server_start(&srv, &shim, "storage", FAIL_STORAGE_SHIM, switches, 2);
}

static void teardown(void)
{
	dpg_shim_server_stop(&srv, &shim);
}

TestSuite(storage, .init = setup, .fini = teardown, .timeout = 300);

static const char charge_quarter[] =
	"{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}";
static const char charge_half[] = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0}}";
static const char laplace[] = "{\"value\":12.5,\"sensitivity\":1,\"epsilon\":0.5}";

/* POSTs `body` to `path` with an Idempotency-Key; returns the answer. */
static dpg_resp post_keyed(const char *path, const char *body, const char *idem)
{
	char hdr[128];
	const char *headers[] = {hdr, "Content-Type: application/json", NULL};
	dpg_resp r;

	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", idem);
	cr_assert_eq(dpg_http(&srv, "POST", path, srv.admin_key, body, strlen(body), headers, &r), 0);
	return r;
}

/* A 503 problem+json that says the database could not be written. */
static void assert_commit_failed(dpg_resp *r, const char *what)
{
	const char *detail = json_string_value(json_object_get(r->json, "detail"));

	cr_assert_eq(r->status, 503, "%s: %ld %s", what, r->status, r->body);
	cr_assert_str_eq(r->content_type, "application/problem+json", "%s", what);
	cr_assert_eq(r->retry_after, 1, "%s: Retry-After %lld", what, r->retry_after);
	cr_assert(detail && strstr(detail, "could not be written"), "%s: %s", what, r->body);
	cr_assert_null(json_object_get(r->json, "output"), "%s: %s", what, r->body);
	dpg_resp_free(r);
}

/* How many lines of the server's log report a failed COMMIT. */
static int commit_failures_logged(void)
{
	return dpg_log_lines(&srv, "commit failed", true);
}

/* Charge rows of dataset `id`, counted in the database file itself. */
static long long ledger_charges(const char *id)
{
	char sql[160];

	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM ledger WHERE dataset_id = '%s' AND kind = 'charge'", id);
	return dpg_count_rows(srv.db, sql);
}

static int verify_exit(void)
{
	char out[8192];
	const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};

	return dpg_run(out, sizeof(out), argv);
}

/*
 * Both ways the disk can fail at COMMIT, one after the other on the same
 * server, each on its own dataset.  Spent sums are exact in binary (0.25,
 * 0.5), so they are compared exactly.
 */
Test(storage, every_write_refused_while_the_disk_fails_and_the_server_goes_on_after)
{
	static const struct {
		const char *dataset;
		const char *file_of_switch;
	} kinds[] = {{"f-sync", sync_file}, {"f-write", write_file}};
	int logged = 0;

	dpg_skip_on_pg("fails the SQLite file's fsync (PostgreSQL's is the server's)");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const char *ds = kinds[k].dataset;
		char path[128], mech[128], res_path[128], ds_path[128], key[32], name[128];
		dpg_budget b;
		dpg_resp r;

		snprintf(path, sizeof(path), "/v1/datasets/%s/charges", ds);
		snprintf(mech, sizeof(mech), "/v1/datasets/%s/mechanisms/laplace", ds);
		snprintf(res_path, sizeof(res_path), "/v1/datasets/%s/reservations", ds);
		snprintf(ds_path, sizeof(ds_path), "/v1/datasets/%s", ds);
		snprintf(key, sizeof(key), "retry-%s", ds);
		dpg_make_dataset(&srv, ds, 10.0, 1e-5, "basic");
		dpg_expect_status(&srv, "POST", path, srv.admin_key, charge_half, 201);

		dpg_switch_file(kinds[k].file_of_switch, true);
		r = post_keyed(path, charge_quarter, key);
		assert_commit_failed(&r, "charge");
		r = dpg_call(&srv, "POST", mech, srv.admin_key, laplace);
		assert_commit_failed(&r, "laplace");
		r = dpg_call(&srv, "POST", res_path, srv.admin_key, charge_quarter);
		assert_commit_failed(&r, "reservation");
		r = dpg_call(&srv, "PATCH", ds_path, srv.admin_key, "{\"name\":\"renamed\"}");
		assert_commit_failed(&r, "update");
		logged += 4;
		cr_assert_eq(commit_failures_logged(), logged, "%s: log %s", ds, srv.log);
		cr_assert_eq(dpg_metric(&srv, "dpgate_commit_failures_total"), (double)logged);

		/* Reads go on and show none of it. */
		b = dpg_budget_of(&srv, ds);
		cr_assert_eq(b.charges, 1, "%s: %ld charges", ds, b.charges);
		cr_assert_eq(b.spent_eps, 0.5, "%s: spent %.17g", ds, b.spent_eps);
		cr_assert_str_eq(dpg_get_string(&srv, ds_path, "name", name, sizeof(name)), ds);
		dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);

		/* The disk is back: the same requests go through. */
		dpg_switch_file(kinds[k].file_of_switch, false);
		r = post_keyed(path, charge_quarter, key);
		cr_assert_eq(r.status, 201, "%s: retried charge: %s", ds, r.body);
		dpg_resp_free(&r);
		r = dpg_call(&srv, "POST", mech, srv.admin_key, laplace);
		cr_assert_eq(r.status, 201, "%s: laplace: %s", ds, r.body);
		cr_assert(json_is_number(json_object_get(r.json, "output")), "%s", r.body);
		dpg_resp_free(&r);
		r = dpg_call(&srv, "PATCH", ds_path, srv.admin_key, "{\"name\":\"renamed\"}");
		cr_assert_eq(r.status, 200, "%s: update: %s", ds, r.body);
		dpg_resp_free(&r);
		b = dpg_budget_of(&srv, ds);
		cr_assert_eq(b.charges, 3, "%s: %ld charges", ds, b.charges);
		cr_assert_eq(b.spent_eps, 0.5 + 0.25 + 0.5, "%s: spent %.17g", ds, b.spent_eps);
		cr_assert_eq(commit_failures_logged(), logged);
		cr_assert_eq(dpg_metric(&srv, "dpgate_commit_failures_total"), (double)logged);
	}

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(verify_exit(), 0);
	cr_assert_eq(ledger_charges("f-sync"), 3);
	cr_assert_eq(ledger_charges("f-write"), 3);
	dpg_server_restart(&srv);
}

/*
 * The server dies right after a COMMIT whose fsync failed.  Whether or not
 * that charge is found in the ledger at the next start, the stored totals
 * equal the rows, and the client's retry with the same Idempotency-Key
 * leaves exactly one charge for it.
 */
Test(storage, a_retry_after_a_failed_commit_and_a_crash_is_charged_once)
{
	const char *path = "/v1/datasets/c/charges";
	dpg_budget b;
	dpg_resp r;
	long found;

	dpg_skip_on_pg("fails the SQLite file's fsync (PostgreSQL's is the server's)");
	dpg_make_dataset(&srv, "c", 10.0, 1e-5, "basic");
	dpg_expect_status(&srv, "POST", path, srv.admin_key, charge_half, 201);

	dpg_switch_file(sync_file, true);
	r = post_keyed(path, charge_quarter, "once");
	assert_commit_failed(&r, "charge");
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	dpg_switch_file(sync_file, false);

	cr_assert_eq(verify_exit(), 0);
	dpg_server_restart(&srv);
	b = dpg_budget_of(&srv, "c");
	found = b.charges - 1;
	cr_assert(found == 0 || found == 1, "%ld charges", b.charges);
	cr_log_info("the failed charge was %s at the restart", found ? "found" : "not found");

	r = post_keyed(path, charge_quarter, "once");
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	b = dpg_budget_of(&srv, "c");
	cr_assert_eq(b.charges, 2, "%ld charges after the retry (found at restart: %ld)", b.charges,
		     found);
	cr_assert_eq(b.spent_eps, 0.75, "spent %.17g", b.spent_eps);
	cr_assert_eq(ledger_charges("c"), 2);
	cr_assert_eq(verify_exit(), 0);
}

/* ---- the database file deleted or moved under a running server ---------- */

/* A 503 problem+json that says the database file is gone from its path,
 * with no output. */
static void assert_file_gone(dpg_resp *r, const char *what)
{
	const char *detail = json_string_value(json_object_get(r->json, "detail"));

	cr_assert_eq(r->status, 503, "%s: %ld %s", what, r->status, r->body);
	cr_assert_str_eq(r->content_type, "application/problem+json", "%s", what);
	cr_assert(detail && strstr(detail, "deleted, moved or replaced"), "%s: %s", what, r->body);
	cr_assert_null(json_object_get(r->json, "output"), "%s: %s", what, r->body);
	dpg_resp_free(r);
}

static const char gone_line[] = "database file deleted, moved or replaced";
static const char wal_gone_line[] = "database WAL file deleted, moved or replaced";
static const char shm_gone_line[] = "database -shm file (the WAL's index) deleted";
static const char wal_copied_line[] = "lost database WAL copied into the database file";

/* Makes dataset `id` (budget 10), charges it 0.5 and opens a reservation of
 * 0.5, whose id goes into rid: what a server on an intact file answers
 * (201, and 200 on /healthz). */
static void spend_on_intact_file(const char *id, char *rid, size_t rid_size)
{
	char path[128];
	dpg_resp r;

	dpg_make_dataset(&srv, id, 10.0, 1e-5, "basic");
	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	dpg_expect_status(&srv, "POST", path, srv.admin_key, charge_half, 201);
	snprintf(path, sizeof(path), "/v1/datasets/%s/reservations", id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, charge_half);
	cr_assert_eq(r.status, 201, "reservation: %s", r.body);
	snprintf(rid, rid_size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);
}

/* Every spending request on dataset `id`, each answered 503 with nothing
 * charged, released or revealed; /healthz 503 too; one line `logged` in
 * the log; `charges` charges of 0.5 on the dataset, as before.  The charge
 * carries Idempotency-Key `idem`. */
static void expect_spends_refused_logging(const char *id, const char *rid, const char *idem,
					  const char *logged, long charges)
{
	char path[160];
	dpg_budget b;
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	r = post_keyed(path, charge_quarter, idem);
	assert_file_gone(&r, "charge");
	snprintf(path, sizeof(path), "/v1/datasets/%s/mechanisms/laplace", id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, laplace);
	assert_file_gone(&r, "laplace");
	snprintf(path, sizeof(path), "/v1/datasets/%s/reservations", id);
	r = dpg_call(&srv, "POST", path, srv.admin_key, charge_quarter);
	assert_file_gone(&r, "reservation");
	snprintf(path, sizeof(path), "/v1/datasets/%s/reservations/%s/release", id, rid);
	r = dpg_call(&srv, "POST", path, srv.admin_key, "{}");
	assert_file_gone(&r, "release");
	r = dpg_call(&srv, "GET", "/healthz", NULL, NULL);
	assert_file_gone(&r, "healthz");
	cr_assert_eq(dpg_log_lines(&srv, logged, false), 1, "log %s", srv.log);
	/* What the server still reads is the file it held: none of it there. */
	b = dpg_budget_of(&srv, id);
	cr_assert_eq(b.charges, charges, "%ld charges", b.charges);
	cr_assert_eq(b.spent_eps, 0.5 * (double)charges, "spent %.17g", b.spent_eps);
}

static void expect_every_spend_refused(const char *id, const char *rid, const char *idem)
{
	expect_spends_refused_logging(id, rid, idem, gone_line, 1);
}

/* The dataset as a server restarted on its database sees it: the one
 * charge made before, the reservation still open, `more` charges of 0.5
 * made since, and nothing of what was refused. */
static void expect_ledger_after_restart(const char *id, long more)
{
	char path[160];
	json_t *j;
	dpg_budget b;

	b = dpg_budget_of(&srv, id);
	cr_assert_eq(b.charges, 1 + more, "%ld charges", b.charges);
	cr_assert_eq(b.spent_eps, 0.5 * (double)(1 + more), "spent %.17g", b.spent_eps);
	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", id);
	j = dpg_get_json(&srv, srv.admin_key, path);
	cr_assert_eq(dpg_num(j, "reserved.open"), 1.0, "the reservation is no longer open");
	json_decref(j);
	cr_assert_eq(ledger_charges(id), 1 + more);
	cr_assert_eq(verify_exit(), 0);
}

/* A control: a server whose file stays where it is answers every spend and
 * /healthz, and logs nothing about its file. */
Test(storage, a_server_on_an_untouched_file_answers_201_and_200)
{
	char rid[96];

	dpg_skip_on_pg("watches the SQLite file (a PostgreSQL database has none)");
	spend_on_intact_file("intact", rid, sizeof(rid));
	for (int i = 0; i < 3; i++)
		dpg_expect_status(&srv, "POST", "/v1/datasets/intact/charges", srv.admin_key,
				  charge_half, 201);
	dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);
	cr_assert_eq(dpg_log_lines(&srv, gone_line, false), 0, "log %s", srv.log);
}

/*
 * The database, its -wal and its -shm renamed while the server runs: every
 * spend is refused (503) and so is /healthz, with one line logged.  Moved
 * back, the server writes again (the refused charge's Idempotency-Key is
 * new to it: charged once), and a restart on the file sees exactly the
 * charges answered 201.
 */
Test(storage, a_moved_database_refuses_spends_until_it_is_back)
{
	char rid[96], moved[400];
	dpg_resp r;

	dpg_skip_on_pg("moves the SQLite file (a PostgreSQL database has none)");
	spend_on_intact_file("m", rid, sizeof(rid));
	snprintf(moved, sizeof(moved), "%s/moved.db", srv.dir);
	dpg_move_database(&srv, "", moved);
	expect_every_spend_refused("m", rid, "moved-1");

	dpg_move_database(&srv, moved, "");
	r = post_keyed("/v1/datasets/m/charges", charge_half, "moved-1");
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);
	cr_assert_eq(dpg_log_lines(&srv, "database file back at its path", false), 1, "log %s",
		     srv.log);

	/* Moved away again and stopped there: the restart on the file put back
	 * sees nothing of the second refusal either. */
	dpg_move_database(&srv, "", moved);
	r = post_keyed("/v1/datasets/m/charges", charge_quarter, "moved-2");
	assert_file_gone(&r, "charge while moved again");
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	dpg_move_database(&srv, moved, "");
	dpg_server_restart(&srv);
	expect_ledger_after_restart("m", 1);
}

/* Copies the deleted file `name` (its path before it was deleted, as the
 * kernel shows it) that process pid still holds open to a new file at
 * `to`, through /proc/PID/fd, as docs/operations.md tells an operator to. */
static void rescue_deleted(pid_t pid, const char *name, const char *to)
{
	char dir[64], link[320], target[512], want[512], buf[65536];
	struct dirent *e;
	int fd = -1;
	ssize_t n;
	DIR *d;
	FILE *f;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "%s (deleted)", name);
	d = opendir(dir);
	cr_assert_not_null(d);
	while (fd < 0 && (e = readdir(d))) {
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n > 0 && (target[n] = '\0', strcmp(target, want) == 0))
			fd = open(link, O_RDONLY | O_CLOEXEC);
	}
	closedir(d);
	cr_assert_geq(fd, 0, "the server holds no %s", want);
	f = fopen(to, "wx");
	cr_assert_not_null(f, "%s", to);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		cr_assert_eq(fwrite(buf, 1, (size_t)n, f), (size_t)n);
	cr_assert_eq(n, 0);
	cr_assert_eq(fclose(f), 0);
	close(fd);
}

/*
 * The database and its side files deleted while the server runs (a second
 * server could then make a new file at the path): every spend is refused
 * (503) and so is /healthz, with one line logged.  Since the server writes
 * nothing more, the deleted file and its WAL, which it still holds, can be
 * copied out whole; a server started on the copies sees the charge
 * answered before and none of the refused ones.
 */
Test(storage, a_deleted_database_refuses_spends_and_healthz)
{
	char rid[96], real[PATH_MAX], from[PATH_MAX + 8], to[400], wal[400];

	dpg_skip_on_pg("deletes the SQLite file (a PostgreSQL database has none)");
	spend_on_intact_file("del", rid, sizeof(rid));
	cr_assert_not_null(realpath(srv.db, real));
	cr_assert_eq(unlink(srv.db), 0);
	snprintf(wal, sizeof(wal), "%s-wal", srv.db);
	cr_assert_eq(unlink(wal), 0);
	snprintf(to, sizeof(to), "%s-shm", srv.db);
	cr_assert_eq(unlink(to), 0);
	expect_every_spend_refused("del", rid, "deleted-1");
	/* Still refused, still one line. */
	expect_every_spend_refused("del", rid, "deleted-2");

	snprintf(to, sizeof(to), "%s/rescued.db", srv.dir);
	rescue_deleted(srv.pid, real, to);
	snprintf(from, sizeof(from), "%s-wal", real);
	snprintf(to, sizeof(to), "%s/rescued.db-wal", srv.dir);
	rescue_deleted(srv.pid, from, to);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	/* After the stop: its last connection removes the WAL by its name. */
	cr_assert_eq(rename(to, wal), 0);
	snprintf(to, sizeof(to), "%s/rescued.db", srv.dir);
	cr_assert_eq(rename(to, srv.db), 0);
	dpg_server_restart(&srv);
	expect_ledger_after_restart("del", 0);
}

/*
 * Makes dataset `id` as spend_on_intact_file does, then deletes the
 * database's side file `suffix` (-wal or -shm) under the server, which
 * checks it at most once a second: a charge of 0.5 right after may still
 * be answered 201, and its status is returned; a second later every spend
 * is refused, with line `logged` logged once.
 */
static long delete_side_file(const char *id, const char *suffix, const char *logged)
{
	char rid[96], path[400], charges[128], idem[64];
	long early;
	dpg_resp r;

	spend_on_intact_file(id, rid, sizeof(rid));
	snprintf(path, sizeof(path), "%s%s", srv.db, suffix);
	cr_assert_eq(unlink(path), 0);
	snprintf(charges, sizeof(charges), "/v1/datasets/%s/charges", id);
	snprintf(idem, sizeof(idem), "%s-0", id);
	r = post_keyed(charges, charge_half, idem);
	early = r.status;
	cr_assert(early == 201 || early == 503, "%ld %s", early, r.body);
	dpg_resp_free(&r);
	usleep(1100000);
	snprintf(idem, sizeof(idem), "%s-1", id);
	expect_spends_refused_logging(id, rid, idem, logged, 1 + (early == 201));
	return early;
}

/*
 * The WAL alone deleted under the server, the database file left: the
 * server would go on committing to the WAL it holds, and a crash would
 * lose every commit not yet copied into the database file (here all of
 * them: the dataset too).  The WAL is checked at most once a second, so a
 * charge right after the deletion may still be answered 201; a second
 * later every spend is refused (503) and so is /healthz, one line is
 * logged, and what the WAL holds is copied into the database file: the
 * server killed outright and started again on the file sees the charge
 * and the reservation made before, the charge answered 201 if it was, and
 * nothing refused.
 */
Test(storage, a_deleted_wal_is_copied_into_the_database_and_spends_refused)
{
	long early;

	dpg_skip_on_pg("deletes the SQLite WAL (a PostgreSQL database has none)");
	early = delete_side_file("wal", "-wal", wal_gone_line);
	cr_assert_eq(dpg_log_lines(&srv, gone_line, false), 0, "log %s", srv.log);
	cr_assert_eq(dpg_log_lines(&srv, wal_copied_line, false), 1, "log %s", srv.log);
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	dpg_server_restart(&srv);
	expect_ledger_after_restart("wal", early == 201);
}

/*
 * The WAL alone deleted while no request comes, so that no write checks
 * the files: the server still sees the loss within about a second and
 * copies what the WAL holds into the database file.  Releases answered
 * (the dataset made before a clean restart, so that it is in the database
 * file and only the releases are in the WAL), then the WAL deleted, a few
 * seconds with no request, and the server killed outright: started again,
 * it holds every release answered, its budget spent as then, and a retry
 * of each replays the same output instead of drawing fresh noise.
 */
Test(storage, a_wal_deleted_while_idle_is_copied_before_a_crash)
{
	static const char path[] = "/v1/datasets/idle/mechanisms/laplace";
	enum { RELEASES = 4 }; /* of 0.5 on a budget of 2: all of it */
	char idem[32], wal[400];
	dpg_resp answered[RELEASES], r;
	dpg_budget b;
	int copied_logged;

	dpg_skip_on_pg("deletes the SQLite WAL (a PostgreSQL database has none)");
	dpg_make_dataset(&srv, "idle", 2.0, 1e-5, "basic");
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	dpg_server_restart(&srv);
	for (int i = 0; i < RELEASES; i++) {
		snprintf(idem, sizeof(idem), "idle-%d", i);
		answered[i] = post_keyed(path, laplace, idem);
		cr_assert_eq(answered[i].status, 201, "%s", answered[i].body);
	}
	dpg_expect_status(&srv, "POST", path, srv.admin_key, laplace, 409);
	snprintf(wal, sizeof(wal), "%s-wal", srv.db);
	cr_assert_eq(unlink(wal), 0);
	usleep(2500000);
	copied_logged = dpg_log_lines(&srv, wal_copied_line, false);
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	dpg_server_restart(&srv);

	b = dpg_budget_of(&srv, "idle");
	cr_assert_eq(b.charges, RELEASES, "%ld charges after the restart", b.charges);
	cr_assert_eq(b.spent_eps, 0.5 * RELEASES, "spent %.17g", b.spent_eps);
	for (int i = 0; i < RELEASES; i++) {
		snprintf(idem, sizeof(idem), "idle-%d", i);
		r = post_keyed(path, laplace, idem);
		cr_assert_eq(r.status, 201, "%s", r.body);
		cr_assert_str_eq(r.body, answered[i].body, "release %d drew fresh noise", i);
		dpg_resp_free(&r);
		dpg_resp_free(&answered[i]);
	}
	dpg_expect_status(&srv, "POST", path, srv.admin_key, laplace, 409);
	cr_assert_eq(verify_exit(), 0);
	cr_assert_eq(copied_logged, 1, "the copy was not logged once");
}

/*
 * The WAL deleted while another process reads the database (a backup,
 * say): the copy of the lost WAL waits for that reader (SQLite's busy
 * timeout, 30 s), but /healthz answers its 503 at once, and only one copy
 * runs: once the reader ends, the copy is logged once and no failed copy
 * is logged at all.
 */
Test(storage, a_lost_wal_behind_a_reader_answers_healthz_at_once)
{
	static const char copy_failed_line[] = "cannot copy the lost database WAL";
	sqlite3 *reader = NULL;
	char wal[400];
	double t0, took;
	dpg_resp r;

	dpg_skip_on_pg("deletes the SQLite WAL (a PostgreSQL database has none)");
	dpg_make_dataset(&srv, "rdr", 10.0, 1e-5, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/rdr/charges", srv.admin_key, charge_half,
			  201);
	/* A read transaction on the WAL's frames, held until the COMMIT below. */
	cr_assert_eq(sqlite3_open_v2(srv.db, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM ledger;", NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(reader));
	snprintf(wal, sizeof(wal), "%s-wal", srv.db);
	cr_assert_eq(unlink(wal), 0);
	usleep(1500000); /* the watcher sees the loss and starts its copy */
	for (int i = 0; i < 3; i++) {
		t0 = dpg_now_s();
		r = dpg_call(&srv, "GET", "/healthz", NULL, NULL);
		took = dpg_now_s() - t0;
		assert_file_gone(&r, "healthz");
		cr_assert_lt(took, 3.0 * dpg_time_scale(), "/healthz took %.1f s", took);
	}
	cr_assert_eq(dpg_log_lines(&srv, wal_copied_line, false), 0, "copied past a reader: %s",
		     srv.log);
	cr_assert_eq(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	for (int i = 0; i < 100 && dpg_log_lines(&srv, wal_copied_line, false) == 0; i++)
		usleep(100000);
	cr_assert_eq(sqlite3_close(reader), SQLITE_OK);
	cr_assert_eq(dpg_log_lines(&srv, wal_copied_line, false), 1, "log %s", srv.log);
	cr_assert_eq(dpg_log_lines(&srv, copy_failed_line, false), 0, "log %s", srv.log);
}

/* What SQLite's own check finds in the database file at path: nothing. */
static void expect_intact(const char *path)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *s = NULL;

	cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
	cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "ok");
	sqlite3_finalize(s);
	sqlite3_close(h);
}

/*
 * The WAL's index (-shm) alone deleted under the server.  Another process
 * opening the database then makes an index of its own, and the two write
 * frames into the one WAL each where its own index says it ends, over each
 * other's.  The index is checked with the WAL, at most once a second, so a
 * charge right after the deletion may still be answered 201; a second
 * later every spend is refused (503) and so is /healthz, with one line
 * logged.  Another process's write made meanwhile, its connection still
 * open, is kept through the server's stop: a checkpoint through the
 * server's index would empty the WAL under it, so the stop leaves the WAL
 * whole.  A server started again sees the charge and the reservation made
 * before, the charge answered 201 if it was, and the other write.
 */
Test(storage, a_deleted_wal_index_refuses_spends_and_keeps_other_writes)
{
	sqlite3 *other = NULL;
	long early;
	json_t *j;

	dpg_skip_on_pg("deletes the SQLite -shm file (a PostgreSQL database has none)");
	early = delete_side_file("shm", "-shm", shm_gone_line);
	cr_assert_eq(dpg_log_lines(&srv, gone_line, false), 0, "log %s", srv.log);
	cr_assert_eq(dpg_log_lines(&srv, wal_gone_line, false), 0, "log %s", srv.log);
	cr_assert_eq(sqlite3_open(srv.db, &other), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(other, "UPDATE datasets SET name = 'renamed elsewhere' "
					 "WHERE id = 'shm'", NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(other));
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(sqlite3_close(other), SQLITE_OK);
	expect_intact(srv.db);
	dpg_server_restart(&srv);
	expect_ledger_after_restart("shm", early == 201);
	j = dpg_get_json(&srv, srv.admin_key, "/v1/datasets/shm");
	cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "renamed elsewhere");
	json_decref(j);
}

/* ---- a job's start refused by a failing disk ---------------------------- */

/*
 * A queued job whose start (the claim that marks it running) the disk
 * refuses is started once the disk is back, on the same server: its id
 * left the in-memory queue when a worker took it, so a worker that gave
 * up would leave it queued until a restart.  The job is left queued by a
 * graceful stop while both workers run long jobs; the server starts again
 * with every fsync failing, so its worker's first claim fails at COMMIT.
 */
Test(storage, a_queued_job_whose_start_the_disk_refused_runs_once_it_is_back)
{
	const char *const running[] = {"running", NULL};
	char ids[3][64], path[128], state[32];
	int failures;

	dpg_skip_on_pg("fails the SQLite file's fsync (PostgreSQL's is the server's)");
	dpg_make_dataset(&srv, "fm", 50.0, 1e-5, "rdp");
	dpg_expect_status(&srv, "PUT", "/v1/datasets/fm/data", srv.admin_key,
			  "{\"builtin\":\"fashion-mnist\"}", 200);
	for (int i = 0; i < 2; i++)
		dpg_start_job(&srv, "fm", dpg_fm_long_job, ids[i], sizeof(ids[i]));
	for (int i = 0; i < 2; i++)
		json_decref(dpg_job_wait(&srv, ids[i], running, 60));
	dpg_start_job(&srv, "fm", dpg_fm_small_job, ids[2], sizeof(ids[2]));
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);

	failures = commit_failures_logged();
	dpg_switch_file(sync_file, true);
	dpg_server_restart(&srv);
	for (int i = 0; i < 300 && commit_failures_logged() == failures; i++)
		usleep(100000);
	cr_assert_gt(commit_failures_logged(), failures, "no claim failed: log %s", srv.log);
	snprintf(path, sizeof(path), "/v1/jobs/%s", ids[2]);
	cr_assert_str_eq(dpg_get_string(&srv, path, "state", state, sizeof(state)), "queued");
	dpg_switch_file(sync_file, false);
	json_decref(dpg_job_succeeded(&srv, ids[2], 120));
}
