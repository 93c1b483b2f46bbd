/*
 * test_instance.c: one server per port and per database, and the command
 * line's refusals: `dpgate verify` is read-only and refuses what is not a
 * dpgate database (or a newer one), `dpgate keys create` checks what POST
 * /v1/keys checks, and bad numbers or stray arguments are usage errors.
 *
 * Commands that must fail at once are run with a time limit, so that a
 * binary which starts serving instead fails the test rather than hanging it.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* How long a command that should fail at start may take (sanitizer builds
 * start slowly). */
#define START_LIMIT_S 20
#define STILL_RUNNING (-1)

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(instance, .init = setup, .fini = teardown, .timeout = 300);

/*
 * Runs argv with stdout and stderr both captured into out (NUL-terminated)
 * and stdin empty.  Returns the exit status, or STILL_RUNNING when the
 * command had not ended after `seconds` (it is killed then).
 */
static int run_limited(char *out, size_t out_size, const char *const *argv, int seconds)
{
	char path[] = "/tmp/dpgate-instance-out-XXXXXX";
	int fd = mkstemp(path), status = 0, rc = STILL_RUNNING;
	pid_t pid;
	FILE *f;
	size_t n;

	cr_assert_geq(fd, 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDONLY);

		dup2(null_fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fd);
	for (int i = 0; i < seconds * 20; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			break;
		}
		usleep(50000);
	}
	if (rc == STILL_RUNNING) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	n = fread(out, 1, out_size - 1, f);
	out[n] = '\0';
	fclose(f);
	unlink(path);
	return rc;
}

static void sql_file(const char *path, const char *sql)
{
	sqlite3 *h = NULL;

	dpg_skip_on_pg("writes to an SQLite file");
	cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000); /* a server may hold the file */
	cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
	sqlite3_close(h);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* Runs argv on `path` and requires `want` and the file unchanged, byte for
 * byte, with no -wal, -shm or -journal file left beside it. */
static void expect_refused_untouched(const char *const *argv, const char *path, int want,
				     const char *says)
{
	char out[8192], side[512];
	static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
	size_t before_len, after_len;
	char *before = dpg_read_file(path, &before_len), *after;
	int rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);

	cr_assert_eq(rc, want, "dpgate %s on %s: exit %d: %s", argv[1], path, rc, out);
	cr_assert_not_null(strstr(out, says), "dpgate %s on %s said: %s", argv[1], path, out);
	after = dpg_read_file(path, &after_len);
	cr_assert_eq(after_len, before_len, "dpgate %s changed the size of %s", argv[1], path);
	cr_assert_eq(memcmp(before, after, before_len), 0, "dpgate %s changed %s", argv[1], path);
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(side, sizeof(side), "%s%s", path, suffixes[i]);
		cr_assert(!exists(side), "dpgate %s left %s", argv[1], side);
	}
	free(before);
	free(after);
}

Test(instance, a_second_server_on_the_same_port_fails_and_the_first_keeps_its_database)
{
	char out[8192], listen[64], other_db[400], other_data[400];
	const char *argv[] = {dpg_bin(), "serve", "--db", other_db, "--listen", listen,
			      "--data-dir", other_data, "--quiet", NULL};
	int rc;

	dpg_make_dataset(&srv, "mine", 1.0, 0, "basic");
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", srv.port);
	snprintf(other_db, sizeof(other_db), "%s/other.db", srv.dir);
	snprintf(other_data, sizeof(other_data), "%s/other-data", srv.dir);
	rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
	cr_assert_eq(rc, 1, "second serve on port %d: exit %d: %s", srv.port, rc, out);
	/* Its message starts as every error of a command does (before:
	 * "dpgate: cannot listen"). */
	cr_assert(!strncmp(out, "dpgate serve: cannot listen on ", 31) ||
			  strstr(out, "\ndpgate serve: cannot listen on "),
		  "%s", out);
	/* Every request still reaches the first server and its database. */
	for (int i = 0; i < 20; i++) {
		dpg_resp r = dpg_call(&srv, "GET", "/v1/datasets/mine", srv.admin_key, NULL);

		cr_assert_eq(r.status, 200, "request %d: %ld %s", i, r.status, r.body);
		dpg_resp_free(&r);
	}
}

/* A job that runs for minutes: an MLP on iris, 3000 epochs of lots of 5. */
static const char minutes_long_job[] =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\",\"hidden\":64,\"label\":\"species\","
	"\"classes\":3,\"epochs\":3000,\"lot_size\":5,\"noise_multiplier\":1.0}}";

Test(instance, a_second_server_on_the_same_database_exits_1_and_leaves_running_jobs)
{
	static const char *const running[] = {"running", NULL};
	char out[8192], id[64], job_path[128], other_data[400];
	const char *argv[] = {dpg_bin(), "serve", "--db", srv.db, "--listen", "127.0.0.1:0",
			      "--data-dir", other_data, "--quiet", NULL};
	dpg_resp r;
	int rc;

	dpg_skip_on_pg("several servers share a PostgreSQL database");
	dpg_make_dataset(&srv, "iris", 1000.0, 1e-5, "rdp");
	dpg_upload_iris(&srv, "iris", "a,b,c,d,species");
	dpg_start_job(&srv, "iris", minutes_long_job, id, sizeof(id));
	json_decref(dpg_job_wait(&srv, id, running, 60));

	snprintf(other_data, sizeof(other_data), "%s/other-data", srv.dir);
	rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
	cr_assert_eq(rc, 1, "second serve on %s: exit %d: %s", srv.db, rc, out);
	cr_assert_not_null(strstr(out, "another dpgate server is running"), "%s", out);

	/* The restart rule did not run: the job still runs, unfailed. */
	snprintf(job_path, sizeof(job_path), "/v1/jobs/%s", id);
	r = dpg_call(&srv, "GET", job_path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "state")), "running", "%s", r.body);
	cr_assert_null(json_object_get(r.json, "error"), "%s", r.body);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "DELETE", job_path, srv.admin_key, NULL);
	dpg_resp_free(&r);
	/* Once the first server is gone, the lock is free again. */
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	dpg_server_restart(&srv);
}

/* Starts a second `dpgate serve` on `db` and `data` (a time limit: one that
 * starts serving fails the test) and asserts that it exits 1 naming `why`. */
static void expect_second_server_refused(const char *db, const char *data, const char *why)
{
	char out[8192];
	const char *argv[] = {dpg_bin(), "serve", "--db", db, "--listen", "127.0.0.1:0",
			      "--data-dir", data, "--quiet", NULL};
	int rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);

	cr_assert_eq(rc, 1, "second serve on %s, %s: exit %d: %s", db, data, rc, out);
	cr_assert_not_null(strstr(out, why), "%s", out);
}

/* The first server still answers and charges on its own database. */
static void first_server_still_charges(const char *id)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	dpg_expect_status(&srv, "POST", path, srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,\"delta\":0}}",
			  201);
}

/*
 * A hard link or a symlink to the running server's database is the same
 * file: a second server on it would admit its own copy of every budget and
 * keep its own WAL.  It must exit 1 before it opens the store.
 */
Test(instance, a_second_server_on_a_hard_link_or_symlink_of_the_database_exits_1)
{
	char hard[400], soft[400], data[400];

	dpg_skip_on_pg("links of an SQLite file");
	dpg_make_dataset(&srv, "one", 1.0, 0, "basic");
	snprintf(hard, sizeof(hard), "%s/hard-link.db", srv.dir);
	snprintf(soft, sizeof(soft), "%s/symlink.db", srv.dir);
	snprintf(data, sizeof(data), "%s/other-data", srv.dir);
	cr_assert_eq(link(srv.db, hard), 0, "link: %s", strerror(errno));
	cr_assert_eq(symlink(srv.db, soft), 0, "symlink: %s", strerror(errno));
	expect_second_server_refused(hard, data, "another dpgate server is running");
	expect_second_server_refused(soft, data, "another dpgate server is running");
	first_server_still_charges("one");
	/* Once the first server is gone, the file is free under any name; the
	 * server says that another name exists (each name has its own WAL). */
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	dpg_server_restart(&srv);
	first_server_still_charges("one");
	{
		char *log = dpg_read_file(srv.log, NULL);

		cr_assert_not_null(strstr(log, "other hard links"), "%s", log);
		free(log);
	}
}

/*
 * The database's directory (and with it the data directory) bound through a
 * second path: neither the database nor the data directory may get a second
 * server.  Needs mount(2) (root or CAP_SYS_ADMIN); skipped where refused.
 */
Test(instance, a_second_server_through_a_bind_mount_of_the_directory_exits_1)
{
	char bind_point[] = "/tmp/dpgate-bind-XXXXXX", db[400], data[400], other_db[400],
	     other_data[400], out[8192];
	const char *base = strrchr(srv.db, '/') + 1;

	dpg_skip_on_pg("an SQLite file through a bind mount");
	dpg_make_dataset(&srv, "one", 1.0, 0, "basic");
	cr_assert_not_null(mkdtemp(bind_point));
	if (mount(srv.dir, bind_point, NULL, MS_BIND, NULL) < 0) {
		int e = errno;

		rmdir(bind_point);
		cr_skip_test("mount --bind is not permitted here (%s); run as root to test it",
			     strerror(e));
	}
	snprintf(db, sizeof(db), "%s/%s", bind_point, base);
	snprintf(data, sizeof(data), "%s/data", bind_point);
	snprintf(other_db, sizeof(other_db), "%s/other.db", srv.dir);
	snprintf(other_data, sizeof(other_data), "%s/other-data", srv.dir);
	{
		const char *mk[] = {dpg_bin(), "keys", "create", "--db", other_db, "--role", "admin",
				    NULL};

		cr_assert_eq(dpg_run(out, sizeof(out), mk), 0, "%s", out);
	}
	expect_second_server_refused(db, other_data, "another dpgate server is running");
	expect_second_server_refused(other_db, data, "data directory");
	umount2(bind_point, MNT_DETACH);
	rmdir(bind_point);
	first_server_still_charges("one");
}

Test(instance, verify_refuses_a_foreign_or_empty_file_and_leaves_it_as_it_was)
{
	char foreign[400], empty[400];
	const char *verify_foreign[] = {dpg_bin(), "verify", "--db", foreign, NULL};
	const char *verify_empty[] = {dpg_bin(), "verify", "--db", empty, NULL};
	FILE *f;

	snprintf(foreign, sizeof(foreign), "%s/foreign.db", srv.dir);
	snprintf(empty, sizeof(empty), "%s/empty.db", srv.dir);
	sql_file(foreign, "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
	f = fopen(empty, "wb");
	cr_assert_not_null(f);
	fclose(f);
	expect_refused_untouched(verify_foreign, foreign, 2, "not a dpgate database");
	expect_refused_untouched(verify_empty, empty, 2, "not a dpgate database");
	/* keys list and revoke read an existing database too: they had
	 * written a schema into the empty file. */
	{
		const char *list[] = {dpg_bin(), "keys", "list", "--db", empty, NULL};
		const char *revoke[] = {dpg_bin(), "keys", "revoke", "--db", empty,
					"0123456789abcdef", NULL};

		expect_refused_untouched(list, empty, 2, "not a dpgate database");
		expect_refused_untouched(revoke, empty, 2, "not a dpgate database");
	}
}

Test(instance, serve_and_keys_refuse_a_foreign_database_and_leave_it_as_it_was)
{
	char foreign[400], data[400], empty[400], out[8192];
	const char *serve[] = {dpg_bin(), "serve", "--db", foreign, "--listen", "127.0.0.1:0",
			       "--data-dir", data, "--quiet", NULL};
	const char *keys[] = {dpg_bin(), "keys", "create", "--db", foreign, "--role", "admin", NULL};
	const char *keys_empty[] = {dpg_bin(), "keys", "create", "--db", empty, "--role", "admin", NULL};
	const char *verify_empty[] = {dpg_bin(), "verify", "--db", empty, NULL};
	FILE *f;

	snprintf(foreign, sizeof(foreign), "%s/foreign.db", srv.dir);
	snprintf(data, sizeof(data), "%s/foreign-data", srv.dir);
	snprintf(empty, sizeof(empty), "%s/empty.db", srv.dir);
	sql_file(foreign, "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
	expect_refused_untouched(serve, foreign, 2, "not a dpgate database");
	expect_refused_untouched(keys, foreign, 2, "not a dpgate database");
	/* A zero-byte file is a new database, as before. */
	f = fopen(empty, "wb");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(run_limited(out, sizeof(out), keys_empty, START_LIMIT_S), 0, "%s", out);
	cr_assert_eq(run_limited(out, sizeof(out), verify_empty, START_LIMIT_S), 0, "%s", out);
}

/*
 * A --db that is not a dpgate database is bad input (the manual's exit
 * status 2) for every keys command and for serve, with a message naming
 * the file and why; the file is left as it was, byte for byte: a text file
 * (a CSV given by mistake, short and long; the newline `echo > FILE`
 * leaves, which SQLite itself reads as an empty database), and another
 * program's SQLite database, which must not get dpgate's tables.
 */
Test(instance, keys_and_serve_exit_2_on_what_is_not_a_dpgate_database)
{
	char paths[4][400], data[400];
	const char *const why[] = {"not an SQLite database", "not an SQLite database",
				   "not an SQLite database",
				   "it has tables but no schema_migrations"};
	FILE *f;

	dpg_skip_on_pg("an SQLite file");
	snprintf(paths[0], sizeof(paths[0]), "%s/iris.csv", srv.dir);
	snprintf(paths[1], sizeof(paths[1]), "%s/long.csv", srv.dir);
	snprintf(paths[2], sizeof(paths[2]), "%s/newline.db", srv.dir);
	snprintf(paths[3], sizeof(paths[3]), "%s/another-program.db", srv.dir);
	snprintf(data, sizeof(data), "%s/foreign-data", srv.dir);
	f = fopen(paths[0], "wb");
	cr_assert_not_null(f);
	fputs("sepal_length,species\n5.1,setosa\n", f);
	fclose(f);
	f = fopen(paths[1], "wb");
	cr_assert_not_null(f);
	for (int i = 0; i < 5000; i++)
		fprintf(f, "%d,row %d\n", i, i);
	fclose(f);
	f = fopen(paths[2], "wb");
	cr_assert_not_null(f);
	fputs("\n", f);
	fclose(f);
	sql_file(paths[3], "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
			   "INSERT INTO notes (body) VALUES ('keep me')");
	for (int i = 0; i < 4; i++) {
		const char *const list[] = {dpg_bin(), "keys", "list", "--db", paths[i], NULL};
		const char *const revoke[] = {dpg_bin(), "keys", "revoke", "--db", paths[i],
					      "0123456789abcdef", NULL};
		const char *const create[] = {dpg_bin(), "keys", "create", "--db", paths[i],
					      "--role", "admin", NULL};
		const char *const serve[] = {dpg_bin(), "serve", "--db", paths[i], "--listen",
					     "127.0.0.1:0", "--data-dir", data, "--quiet", NULL};
		const char *const *const cmds[] = {list, revoke, create, serve};
		char says[512];

		snprintf(says, sizeof(says), "%.400s is not a dpgate database (%.64s", paths[i],
			 why[i]);
		for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++)
			expect_refused_untouched(cmds[c], paths[i], 2, says);
	}
}

Test(instance, verify_serve_and_keys_refuse_a_newer_schema)
{
	char newer[400], data[400];
	const char *verify[] = {dpg_bin(), "verify", "--db", newer, NULL};
	const char *serve[] = {dpg_bin(), "serve", "--db", newer, "--listen", "127.0.0.1:0",
			       "--data-dir", data, "--quiet", NULL};
	const char *keys_list[] = {dpg_bin(), "keys", "list", "--db", newer, NULL};
	char cmd[1024];

	dpg_skip_on_pg("writes to an SQLite file");
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	snprintf(newer, sizeof(newer), "%s/newer.db", srv.dir);
	snprintf(data, sizeof(data), "%s/newer-data", srv.dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", srv.db, newer);
	cr_assert_eq(system(cmd), 0);
	/* A version above every schema/NNN_*.sql this binary embeds. */
	sql_file(newer, "PRAGMA journal_mode = DELETE;"
			"INSERT INTO schema_migrations VALUES (999, '999_future.sql', 't')");
	expect_refused_untouched(verify, newer, 2, "newer than this dpgate");
	expect_refused_untouched(serve, newer, 1, "newer than this dpgate");
	expect_refused_untouched(keys_list, newer, 1, "newer than this dpgate");
	dpg_server_restart(&srv);
}

Test(instance, verify_works_while_a_server_runs_on_the_database)
{
	char out[8192];
	const char *verify[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	int rc;

	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}",
			  201);
	rc = run_limited(out, sizeof(out), verify, START_LIMIT_S);
	cr_assert_eq(rc, 0, "verify beside a running server: exit %d: %s", rc, out);
	cr_assert_not_null(strstr(out, "\"totals_match\": true"), "%s", out);
	/* The server goes on charging afterwards. */
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}",
			  201);
}

/*
 * A `dpgate keys` of a newer binary run while the old server still runs
 * would migrate the database under it.  The database is made to look one
 * migration old (the last one's column and row removed) under a running
 * server: keys refuses (exit 1), naming the server, and leaves the schema
 * as it was; once the server stops, the same command migrates it.
 */
Test(instance, keys_does_not_migrate_a_database_under_a_running_server)
{
	char out[8192], sql[128];
	const char *list[] = {dpg_bin(), "keys", "list", "--db", srv.db, NULL};
	long known;
	int rc;

	rc = run_limited(out, sizeof(out), list, START_LIMIT_S);
	cr_assert_eq(rc, 0, "%s", out);
	known = (long)dpg_count_rows(srv.db, "SELECT max(version) FROM schema_migrations");
	cr_assert_gt(known, 1);
	sql_file(srv.db, "ALTER TABLE jobs DROP COLUMN claim_seq");
	snprintf(sql, sizeof(sql), "DELETE FROM schema_migrations WHERE version = %ld", known);
	sql_file(srv.db, sql);
	rc = run_limited(out, sizeof(out), list, START_LIMIT_S);
	cr_assert_eq(rc, 1, "keys beside a running server: exit %d: %s", rc, out);
	cr_assert(strstr(out, "a dpgate server is running"), "%s", out);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT max(version) FROM schema_migrations"), known - 1);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	rc = run_limited(out, sizeof(out), list, START_LIMIT_S);
	cr_assert_eq(rc, 0, "keys with the server stopped: exit %d: %s", rc, out);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT max(version) FROM schema_migrations"), known);
}

Test(instance, keys_create_refuses_what_post_keys_refuses_and_writes_nothing)
{
	enum { MANY = 257 };
	char out[16384], long_id[201], *many = malloc(MANY * 8), *note = malloc(5001), fresh[400];
	const char *list[] = {dpg_bin(), "keys", "list", "--db", srv.db, NULL};
	size_t n = 0, keys_before;
	json_t *arr;

	cr_assert_not_null(many);
	cr_assert_not_null(note);
	for (int i = 0; i < MANY; i++)
		n += (size_t)snprintf(many + n, MANY * 8 - n, "%sd%d", i ? "," : "", i);
	memset(long_id, 'a', 200);
	long_id[200] = '\0';
	memset(note, 'n', 5000);
	note[5000] = '\0';
	snprintf(fresh, sizeof(fresh), "%s/fresh.db", srv.dir);
	cr_assert_eq(dpg_run(out, sizeof(out), list), 0);
	arr = json_loads(out, 0, NULL);
	keys_before = json_array_size(arr);
	json_decref(arr);
	{
		const char *const bad[][10] = {
			{"--role", "analyst", "--datasets", many},
			{"--role", "analyst", "--datasets", "../x"},
			{"--role", "viewer", "--datasets", "ok,a/b"},
			/* An unset variable must not make a viewer of everything. */
			{"--role", "viewer", "--datasets", ""},
			{"--role", "viewer", "--datasets", ","},
			/* An empty entry, as POST /v1/keys refuses "" (it was
			 * dropped: "a,,b" made a key of a and b). */
			{"--role", "analyst", "--datasets", "a,,b"},
			{"--role", "analyst", "--datasets", "a,"},
			{"--role", "analyst", "--datasets", ",a"},
			{"--role", "analyst", "--datasets", long_id},
			{"--role", "analyst", "--datasets", "a,b,a"},
			{"--role", "viewer", "--note", note},
			{"--role", "admin", "--datasets", "a"},
			{"--role", "analyst"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			for (int on_fresh = 0; on_fresh < 2; on_fresh++) {
				const char *argv[16] = {dpg_bin(), "keys", "create", "--db",
							on_fresh ? fresh : srv.db};
				int k = 5, rc;

				for (int j = 0; bad[i][j]; j++)
					argv[k++] = bad[i][j];
				argv[k] = NULL;
				rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
				cr_assert_eq(rc, 2, "case %zu: exit %d: %s", i, rc, out);
				cr_assert_null(strstr(out, "dpg_"), "case %zu printed a key: %s", i, out);
				cr_assert(!exists(fresh), "case %zu made %s", i, fresh);
			}
		}
	}
	cr_assert_eq(dpg_run(out, sizeof(out), list), 0);
	arr = json_loads(out, 0, NULL);
	cr_assert_eq(json_array_size(arr), keys_before, "a refused create wrote a key: %s", out);
	json_decref(arr);
	/* The same limits hold over HTTP. */
	{
		char body[8192];

		snprintf(body, sizeof(body), "{\"role\":\"analyst\",\"datasets\":[\"%s\"]}", long_id);
		dpg_expect_status(&srv, "POST", "/v1/keys", srv.admin_key, body, 400);
		snprintf(body, sizeof(body), "{\"role\":\"viewer\",\"note\":\"%s\"}", note);
		dpg_expect_status(&srv, "POST", "/v1/keys", srv.admin_key, body, 400);
	}
	free(many);
	free(note);
}

Test(instance, bad_numbers_and_stray_arguments_exit_2)
{
	char out[8192], data[400], body[400];
	const char *db = srv.db;
	const char *const cases[][10] = {
		{"epsilon", "--delta", "abc", body},
		{"epsilon", "--delta", "1e-5x", body},
		{"delta", "--epsilon", "", body},
		{"calibrate", "--epsilon", "0x10", body},
		{"compare", "--delta", "nan", body},
		{"rdp", "--delta", "inf", body},
		{"epsilon", body, "extra"},
		{"serve", "extra", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"serve", "--threads", "0", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"serve", "--threads", "65", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"serve", "--threads", "8x", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"serve", "--threads", "", "--listen", "127.0.0.1:0", "--data-dir", data},
		/* a removed option is refused like any unknown one, also with a
		 * value it once took */
		{"serve", "--busy-poll-us", "200", "--listen", "127.0.0.1:0", "--data-dir", data},
		{"verify", "--db", db, "extra"},
		{"keys", "list", "--db", db, "extra"},
		{"keys", "create", "--db", db, "--role", "admin", "extra"},
		{"keys", "revoke", "--db", db, "abc", "extra"},
		{"check", body, "extra"},
	};
	FILE *f;

	snprintf(data, sizeof(data), "%s/stray-data", srv.dir);
	snprintf(body, sizeof(body), "%s/event.json", srv.dir);
	f = fopen(body, "w");
	cr_assert_not_null(f);
	fputs("{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}", f);
	fclose(f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[16] = {dpg_bin()};
		int k = 1, rc;

		for (int j = 0; j < 10 && cases[i][j]; j++)
			argv[k++] = cases[i][j];
		argv[k] = NULL;
		rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
		cr_assert_eq(rc, 2, "dpgate %s %s (case %zu): exit %d: %s", cases[i][0], cases[i][1], i,
			     rc, out);
		if (strncmp(cases[i][1], "--", 2) == 0 && strcmp(cases[i][0], "verify") != 0)
			cr_assert_not_null(strstr(out, cases[i][1]), "case %zu names no option: %s", i, out);
		else
			cr_assert_not_null(strstr(out, "usage"), "case %zu: %s", i, out);
	}
	/* A good number is still passed on. */
	{
		const char *argv[] = {dpg_bin(), "epsilon", "--delta", "1e-5", body, NULL};
		int rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);

		cr_assert_eq(rc, 0, "%s", out);
		cr_assert_not_null(strstr(out, "\"epsilon\""), "%s", out);
	}
}

/*
 * `--neighbor` fills the body's relation when it names none, and a body's
 * own "neighbor" wins.  Randomized response (p = 0.25, k = 4) is defined
 * under replace only, at epsilon ln(1 + k (1 - p) / p) = ln 13 (Kairouz,
 * Oh, Viswanath 2016); sampling without replacement is accounted under
 * replace only (Wang, Balle, Kasiviswanathan 2019).  Exit 1 is the route's
 * 422: the event cannot be priced under that relation.
 */
Test(instance, the_neighbor_option_sets_the_relation_a_body_leaves_out)
{
	static const struct {
		const char *own, *option; /* the body's own "neighbor" member, or "";
					   * the --neighbor value, or NULL */
		int exit;
		const char *neighbor;      /* the answer's relation when it exits 0 */
	} cases[] = {
		{"", "replace", 0, "replace"},
		{"", "add_remove", 1, NULL},
		{"", NULL, 1, NULL},
		{",\"neighbor\":\"replace\"", "add_remove", 0, "replace"},
		{",\"neighbor\":\"add_remove\"", "replace", 1, NULL},
	};
	/* Each event with an accountant that prices it and the delta it takes. */
	static const char *const events[][3] = {
		{"{\"type\":\"randomized_response\",\"noise_parameter\":0.25,\"num_buckets\":4}",
		 "basic", "0"},
		{"{\"type\":\"sampled_without_replacement\",\"source_dataset_size\":100,"
		 "\"sample_size\":10,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":2}}",
		 "rdp", "1e-5"},
	};
	char out[8192], body[512], path[400];

	snprintf(path, sizeof(path), "%s/neighbor-body.json", srv.dir);
	for (size_t e = 0; e < 2; e++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			const char *argv[10] = {dpg_bin(), "epsilon", "--accountant", events[e][1],
						"--delta", events[e][2]};
			size_t k = 6;
			FILE *f = fopen(path, "w");
			json_t *answer;
			int rc;

			cr_assert_not_null(f);
			snprintf(body, sizeof(body), "{\"event\":%s%s}", events[e][0], cases[i].own);
			fputs(body, f);
			fclose(f);
			if (cases[i].option) {
				argv[k++] = "--neighbor";
				argv[k++] = cases[i].option;
			}
			argv[k++] = path;
			argv[k] = NULL;
			rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
			cr_assert_eq(rc, cases[i].exit, "event %zu case %zu: exit %d: %s", e, i, rc, out);
			if (rc != 0)
				continue;
			answer = json_loads(out, 0, NULL);
			cr_assert_not_null(answer, "%s", out);
			cr_assert_str_eq(json_string_value(json_object_get(answer, "neighbor")),
					 cases[i].neighbor, "%s", out);
			/* Randomized response costs ln 13. */
			if (e == 0)
				cr_assert(fabs(json_number_value(json_object_get(answer, "epsilon")) -
					       log(13.0)) <= 1e-12 * log(13.0), "%s", out);
			json_decref(answer);
		}
	}
}

Test(instance, check_names_the_dataset_limit)
{
	char path[400], out[8192];
	const char *argv[] = {dpg_bin(), "check", path, NULL};
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/big-policy.json", srv.dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("{\"datasets\":[", f);
	for (int i = 0; i < 10001; i++)
		fprintf(f, "%s{}", i ? "," : "");
	fputs("]}", f);
	fclose(f);
	rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
	cr_assert_eq(rc, 2, "%s", out);
	cr_assert_not_null(strstr(out, "at most 10000"), "%s", out);
}

/*
 * One server per data directory too: a server's start-up sweep removes
 * table files its own database does not name, so a second server on the
 * same data directory with another database would delete the first one's
 * tables.  It exits 1 instead, and the first server's table stays readable.
 */
Test(instance, a_second_server_on_the_same_data_directory_exits_1)
{
	char out[8192], other_db[400], data_dir[400];
	const char *argv[] = {dpg_bin(), "serve", "--db", other_db, "--listen", "127.0.0.1:0",
			      "--data-dir", data_dir, "--quiet", NULL};
	const char *query = "{\"query\":\"count\",\"epsilon\":0.5}";
	int rc;

	dpg_make_dataset(&srv, "t", 10.0, 1e-5, "basic");
	dpg_upload_csv(&srv, "t", "a\n1\n2\n", 6);
	snprintf(data_dir, sizeof(data_dir), "%s/data", srv.dir);
	snprintf(other_db, sizeof(other_db), "%s/other.db", srv.dir);
	/* The other database's own first admin key, so it would start. */
	{
		const char *mk[] = {dpg_bin(), "keys", "create", "--db", other_db, "--role", "admin",
				    NULL};

		cr_assert_eq(dpg_run(out, sizeof(out), mk), 0, "%s", out);
	}
	rc = run_limited(out, sizeof(out), argv, START_LIMIT_S);
	cr_assert_eq(rc, 1, "second serve on %s: exit %d: %s", data_dir, rc, out);
	cr_assert_not_null(strstr(out, "data directory"), "%s", out);
	dpg_expect_status(&srv, "POST", "/v1/datasets/t/queries", srv.admin_key, query, 201);
}

/* Sends `req` on a new connection to the server and returns the answer's
 * status code (from its status line), or -1. */
static int raw_status(const dpg_server *s, const char *req)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
	struct timeval tv = {.tv_sec = 10};
	char buf[64] = {0};
	int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req) ||
	    recv(fd, buf, sizeof(buf) - 1, 0) <= 0 || sscanf(buf, "HTTP/1.1 %d", &status) != 1)
		status = -1;
	close(fd);
	return status;
}

/* Every line `serve` writes to stderr is one JSON object: the start and stop
 * lines, the access log, and libmicrohttpd's own messages about requests it
 * answers itself (here a bad Content-Length and an unknown HTTP version).
 * Also with --threads 1, where libmicrohttpd runs without a pool and would
 * warn about a pool size it was given and ignores. */
Test(instance, every_serve_log_line_is_json_with_one_thread_or_many)
{
	static const unsigned thread_counts[] = {1, 8};

	for (size_t i = 0; i < sizeof(thread_counts) / sizeof(thread_counts[0]); i++) {
		dpg_server s;
		char line[4096];
		int lines = 0, library_lines = 0;
		FILE *f;

		dpg_server_start_with(&s, NULL, thread_counts[i]);
		dpg_expect_status(&s, "GET", "/healthz", NULL, NULL, 200);
		dpg_expect_status(&s, "GET", "/v1/nope", NULL, NULL, 404);
		cr_assert_eq(raw_status(&s, "GET /healthz HTTP/1.1\r\nHost: x\r\n"
					    "Content-Length: abc\r\n\r\n"),
			     400);
		cr_assert_eq(raw_status(&s, "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"), 505);
		cr_assert_eq(dpg_server_signal(&s, SIGTERM), 0);
		f = fopen(s.log, "r");
		cr_assert_not_null(f, "%s", s.log);
		while (fgets(line, sizeof(line), f)) {
			json_error_t err;
			json_t *j;

			if (line[0] == '\n')
				continue;
			j = json_loads(line, 0, &err);
			cr_expect(j && json_is_object(j), "--threads %u, %s line %d is not a JSON object: %s",
				  thread_counts[i], s.log, lines + 1, line);
			if (j && json_is_string(json_object_get(j, "msg")) &&
			    strcmp(json_string_value(json_object_get(j, "msg")), "libmicrohttpd") == 0)
				library_lines++;
			json_decref(j);
			lines++;
		}
		fclose(f);
		/* listening, two access lines, shutting down, stopped at least */
		cr_expect_geq(lines, 5, "--threads %u: %d log lines", thread_counts[i], lines);
		/* one or more per request libmicrohttpd answered itself */
		cr_expect_geq(library_lines, 2, "--threads %u: %d libmicrohttpd lines",
			      thread_counts[i], library_lines);
		dpg_server_destroy(&s);
	}
}

/* The WAL's working size: its 32-byte header, then the frames (a 24-byte
 * header and a 1024-byte page each) of one checkpoint interval, 4000. */
#define WAL_WORKING_BYTES (32 + 4000LL * (24 + 1024))

static long long wal_bytes(const dpg_server *s)
{
	char path[400];
	struct stat st;

	snprintf(path, sizeof(path), "%s-wal", s->db);
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void charge_n(const dpg_server *s, const char *id, int n)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	for (int i = 0; i < n; i++) {
		dpg_resp r = dpg_call(s, "POST", path, s->admin_key,
				      "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.25,"
				      "\"delta\":0}}");

		cr_assert_eq(r.status, 201, "charge %d: %s", i, r.body);
		dpg_resp_free(&r);
	}
}

/*
 * serve writes the WAL file out to its working size at start, so that
 * commits overwrite blocks the file has instead of growing it, and again
 * after a clean stop (which deletes the WAL).  The zeros past the last frame
 * are never read as frames: after kill -9 right after a start, and after
 * kill -9 following charges, the ledger holds exactly the acknowledged
 * charges and `dpgate verify` passes.
 */
Test(instance, serve_writes_the_wal_out_and_its_zeros_are_never_read_as_frames)
{
	char out[8192];
	const char *verify[] = {dpg_bin(), "verify", "--db", srv.db, NULL};
	dpg_budget b;
	int rc;

	dpg_skip_on_pg("SQLite's WAL");
	cr_assert_geq(wal_bytes(&srv), WAL_WORKING_BYTES, "at start: %lld bytes", wal_bytes(&srv));
	dpg_make_dataset(&srv, "w", 1000.0, 0, "basic");
	charge_n(&srv, "w", 3);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_leq(wal_bytes(&srv), 0, "a clean stop leaves %lld WAL bytes", wal_bytes(&srv));
	dpg_server_restart(&srv);
	cr_assert_geq(wal_bytes(&srv), WAL_WORKING_BYTES, "after a restart: %lld bytes",
		      wal_bytes(&srv));

	/* Killed before its first commit: the WAL is zeros from its first byte. */
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	dpg_server_restart(&srv);
	b = dpg_budget_of(&srv, "w");
	cr_assert_eq(b.charges, 3);
	cr_assert_eq(b.ledger_rows, 3, "%zu ledger rows", b.ledger_rows);

	/* Killed after charges: valid frames, then zeros. */
	charge_n(&srv, "w", 5);
	cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
	rc = run_limited(out, sizeof(out), verify, START_LIMIT_S);
	cr_assert_eq(rc, 0, "verify after kill -9: exit %d: %s", rc, out);
	dpg_server_restart(&srv);
	b = dpg_budget_of(&srv, "w");
	cr_assert_eq(b.charges, 8);
	cr_assert_eq(b.ledger_rows, 8, "%zu ledger rows", b.ledger_rows);
	cr_assert(fabs(b.spent_eps - 2.0) < 1e-9, "spent %.17g", b.spent_eps);
}

/*
 * `dpgate keys` beside a running server leaves the WAL the server wrote out
 * at start as it is: only the working-size rule cuts it back.  (Before, its
 * close ran a TRUNCATE checkpoint, which emptied the file whenever no
 * reader held a snapshot, so the server's next commits grew it again.)
 * The key it made is the server's at once.
 */
Test(instance, keys_beside_a_running_server_leave_its_wal_as_it_is)
{
	const long long start = wal_bytes(&srv);
	const char *list[] = {dpg_bin(), "keys", "list", "--db", srv.db, NULL};
	char key[200], out[8192];
	dpg_resp r;

	dpg_skip_on_pg("SQLite's WAL");
	cr_assert_geq(start, WAL_WORKING_BYTES, "at start: %lld bytes", start);
	dpg_make_dataset(&srv, "k", 1000.0, 0, "basic");
	charge_n(&srv, "k", 3);
	cr_assert_eq(wal_bytes(&srv), start);
	dpg_make_key(&srv, "viewer", "k", key, sizeof(key));
	cr_assert_eq(wal_bytes(&srv), start, "after keys create: %lld bytes", wal_bytes(&srv));
	cr_assert_eq(dpg_run(out, sizeof(out), list), 0, "%s", out);
	cr_assert_eq(wal_bytes(&srv), start, "after keys list: %lld bytes", wal_bytes(&srv));
	r = dpg_call(&srv, "GET", "/v1/datasets/k/budget", key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	charge_n(&srv, "k", 1);
	cr_assert_eq(wal_bytes(&srv), start);
}

/*
 * A WAL that outgrew its working size is cut back to it.  A reader holding
 * one snapshot keeps every checkpoint from finishing, so the WAL grows past
 * what serve wrote out at start.  Once the reader is gone, a checkpoint
 * finishes, SQLite starts the WAL over from its first frame, and the commit
 * that does so must leave the file at its size at start: not larger (the
 * excess is given back), not smaller (the written-out blocks are kept).
 */
Test(instance, a_wal_grown_past_its_working_size_is_cut_back_to_it)
{
	const long long start = wal_bytes(&srv);
	sqlite3 *reader = NULL;
	sqlite3_stmt *s = NULL;
	long long grown;
	int charges = 0;
	dpg_budget b;

	dpg_skip_on_pg("SQLite's WAL");
	cr_assert_geq(start, WAL_WORKING_BYTES, "at start: %lld bytes", start);
	dpg_make_dataset(&srv, "g", 1e6, 0, "basic");
	cr_assert_eq(sqlite3_open_v2(srv.db, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(reader, "SELECT count(*) FROM ledger", -1, &s, NULL),
		     SQLITE_OK);
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW); /* the snapshot is taken here */
	sqlite3_finalize(s);

	/* Each charge appends frames; no checkpoint can get past the snapshot. */
	while (wal_bytes(&srv) <= start && charges < 6000) {
		charge_n(&srv, "g", 50);
		charges += 50;
	}
	grown = wal_bytes(&srv);
	cr_assert_gt(grown, start, "%d charges under the reader: %lld bytes", charges, grown);
	cr_assert_eq(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_close(reader), SQLITE_OK);

	/* The next commit checkpoints all of it; one after that starts over. */
	for (int i = 0; i < 200 && wal_bytes(&srv) != start; i++) {
		charge_n(&srv, "g", 1);
		charges++;
	}
	cr_assert_eq(wal_bytes(&srv), start, "grown to %lld, now %lld bytes, working size %lld",
		     grown, wal_bytes(&srv), start);

	b = dpg_budget_of(&srv, "g");
	cr_assert_eq(b.charges, charges);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM ledger"
					    " WHERE dataset_id = 'g' AND kind = 'charge'"),
		     charges);
}

/*
 * At start, serve fails every job left running (its reservation committed
 * in full).  A job it cannot fail, here one whose reservation belongs to
 * another dataset, stops the start with exit 1 and the job named, instead
 * of serving with the job still 'running'; 70 of them (more than one pass
 * of 64) once made the start loop for ever.  The rows are left as they were.
 */
Test(instance, a_running_job_that_cannot_be_failed_stops_the_start)
{
	char data[400], out[8192], rid[64], sql[1024];
	const char *serve[] = {dpg_bin(), "serve", "--db", srv.db, "--listen", "127.0.0.1:0",
			       "--data-dir", data, "--quiet", NULL};
	const char *body = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}";
	dpg_resp r;
	int rc;

	snprintf(data, sizeof(data), "%s/data", srv.dir);
	dpg_make_dataset(&srv, "j", 1.0, 0, "basic");
	dpg_make_dataset(&srv, "k", 1.0, 0, "basic");
	r = dpg_call(&srv, "POST", "/v1/datasets/k/reservations", srv.admin_key, body);
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(rid, sizeof(rid), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 70)"
		 " INSERT INTO jobs (id, dataset_id, trainer, params, event, n_train,"
		 " reservation_id, state, actor, created_at)"
		 " SELECT 'job-' || i, 'j', 'dpsgd', '{}', '{}', 1, '%s', 'running', 'test',"
		 " '2026-01-01T00:00:00.000Z' FROM n", rid);
	sql_file(srv.db, sql);
	rc = run_limited(out, sizeof(out), serve, START_LIMIT_S);
	cr_assert_eq(rc, 1, "serve: exit %d: %s", rc, out);
	cr_assert_not_null(strstr(out, "cannot mark interrupted job job-"), "%s", out);
	cr_assert_eq(dpg_count_rows(srv.db, "SELECT count(*) FROM jobs WHERE state = 'running'"), 70);
	sql_file(srv.db, "DELETE FROM jobs");
	dpg_server_restart(&srv);
}

/*
 * A new database and its WAL are created mode 0600: they hold the ledger
 * and the key hashes (a backup is written 0600 for the same reason).  The
 * fixture's database was made by `dpgate keys create`; the server then
 * opened it and wrote its WAL.
 */
Test(instance, a_new_database_and_its_wal_are_private_to_their_owner)
{
	struct stat st;
	char wal[420];

	dpg_skip_on_pg("an SQLite file's mode");
	cr_assert_eq(stat(srv.db, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "database mode %o", st.st_mode & 0777);
	snprintf(wal, sizeof(wal), "%s-wal", srv.db);
	cr_assert_eq(stat(wal, &st), 0, "the serving database has a WAL file");
	cr_assert_eq(st.st_mode & 0777, 0600, "WAL mode %o", st.st_mode & 0777);
}

/*
 * A database open to group or others (made by sqlite3, or copied under a
 * umask of 022) is warned about once at the start: it holds the key hashes
 * and the PATE sessions' vote histograms, and its WAL takes its mode.  The
 * fixture's own 0600 database is not.
 */
Test(instance, serve_warns_of_a_database_open_to_others)
{
	char *log;

	dpg_skip_on_pg("an SQLite file's mode");
	log = dpg_read_file(srv.log, NULL);
	cr_assert_not_null(log);
	cr_expect_null(strstr(log, "open to group or others"), "%s", log);
	free(log);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	cr_assert_eq(chmod(srv.db, 0644), 0);
	dpg_server_restart(&srv);
	log = dpg_read_file(srv.log, NULL);
	cr_assert_not_null(log);
	cr_expect(strstr(log, "open to group or others") && strstr(log, "(mode 0644)"), "%s", log);
	free(log);
	cr_assert_eq(chmod(srv.db, 0600), 0);
}

/* Whether directory dir holds an entry whose name starts with prefix, and
 * (min_size >= 0) is a file at least min_size bytes long. */
static bool has_entry(const char *dir, const char *prefix, long long min_size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	cr_assert_not_null(d);
	while (!found && (e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		found = min_size < 0 || (stat(path, &st) == 0 && st.st_size >= min_size);
	}
	closedir(d);
	return found;
}

/*
 * A backup stopped by a signal (^C, a cron job's timeout) removes its
 * partial copy before it ends; it had left tens of megabytes behind.  The
 * database is padded to 64 MiB so that the copy is caught while written.
 */
Test(instance, a_backup_stopped_by_a_signal_leaves_no_partial_copy)
{
	char out[PATH_MAX];
	int status = 0;
	pid_t pid;

	dpg_skip_on_pg("an SQLite backup");
	sql_file(srv.db, "CREATE TABLE padding (b BLOB);"
			 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1024)"
			 " INSERT INTO padding SELECT randomblob(65536) FROM n");
	snprintf(out, sizeof(out), "%s/bk.db", srv.dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl(dpg_bin(), dpg_bin(), "backup", "--db", srv.db, "--to", out, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 20000 && !has_entry(srv.dir, ".bk.db.partial-", 1 << 20); i++)
		usleep(500);
	kill(pid, SIGINT);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT,
		  "the backup was not stopped by the signal (status %#x): pad more", status);
	cr_expect_not(has_entry(srv.dir, ".bk.db.partial", -1), "a partial copy is left");
	cr_expect_not(has_entry(srv.dir, "bk.db", -1));
	sql_file(srv.db, "DROP TABLE padding");
}
