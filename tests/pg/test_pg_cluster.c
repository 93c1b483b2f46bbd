/*
 * test_pg_cluster.c: the throwaway cluster of pg_cluster.h.
 *
 * Its life (start, two databases kept apart, a committed row through a
 * fast and an immediate stop and restart on the same port, removal), that
 * nothing runs or stays behind after it (processes found by their working
 * directory, independently of the harness's bookkeeping), the reaper when
 * the test process is killed, the refusals, and the pgc command.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <libpq-fe.h>

#include "pg_cluster.h"

/* How long the reaper may take to clean up after a killed test. */
#define REAPER_WAIT_MS 60000

/* Processes whose working directory lies under DIR (postgres runs in its
 * data directory, every backend and auxiliary process with it). */
static int processes_under(const char *dir)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	size_t len = strlen(dir);
	int n = 0;

	cr_assert_not_null(proc);
	while ((e = readdir(proc))) {
		char link[300], cwd[PATH_MAX];
		ssize_t r;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(link, sizeof(link), "/proc/%s/cwd", e->d_name);
		r = readlink(link, cwd, sizeof(cwd) - 1);
		if (r < 0)
			continue;
		cwd[r] = '\0';
		if (strncmp(cwd, dir, len) == 0 && (cwd[len] == '/' || cwd[len] == '\0' ||
						    cwd[len] == ' '))
			n++;
	}
	closedir(proc);
	return n;
}

static int dir_exists(const char *dir)
{
	struct stat st;

	return stat(dir, &st) == 0;
}

static PGconn *connect_url(const char *url)
{
	PGconn *conn = PQconnectdb(url);

	cr_assert_eq(PQstatus(conn), CONNECTION_OK, "%s: %s", url, PQerrorMessage(conn));
	return conn;
}

/* Runs SQL; returns the first value of the first row (a copy), or NULL. */
static char *query(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	char *v = NULL;

	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
		  PQresultErrorMessage(res));
	if (st == PGRES_TUPLES_OK && PQntuples(res) > 0)
		v = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

static void expect_value(PGconn *conn, const char *sql, const char *want)
{
	char *v = query(conn, sql);

	cr_assert_not_null(v, "%s returned no row", sql);
	cr_expect_str_eq(v, want, "%s", sql);
	free(v);
}

static void expect_count(const char *url, const char *table, const char *want)
{
	PGconn *conn = connect_url(url);
	char sql[128];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	expect_value(conn, sql, want);
	PQfinish(conn);
}

static struct pgc_cluster *new_cluster(void)
{
	struct pgc_error err = { 0 };
	struct pgc_cluster *c = NULL;

	cr_assert_eq(pgc_cluster_new(NULL, 0, &c, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(err.code, PGC_OK);
	return c;
}

/* What the server promises a test: loopback only, the fixed superuser,
 * durable commits, and not root. */
static void check_settings(const char *url, const char *dir)
{
	PGconn *conn = connect_url(url);
	struct stat st;

	expect_value(conn, "SELECT host(inet_server_addr())", "127.0.0.1");
	expect_value(conn, "SELECT current_user", PGC_SUPERUSER);
	expect_value(conn, "SHOW synchronous_commit", "on");
	expect_value(conn, "SHOW fsync", "on");
	expect_value(conn, "SHOW listen_addresses", "127.0.0.1");
	PQfinish(conn);
	cr_assert_eq(stat(dir, &st), 0);
	if (geteuid() == 0)
		cr_expect_neq(st.st_uid, 0, "the cluster must not belong to root");
}

Test(pg_cluster, two_databases_restarts_and_removal, .timeout = 600)
{
	struct pgc_error err = { 0 };
	struct pgc_cluster *c = new_cluster();
	char a[PGC_URL_MAX], b[PGC_URL_MAX], dir[PATH_MAX];
	int port = pgc_port(c);
	PGconn *conn;

	snprintf(dir, sizeof(dir), "%s", pgc_dir(c));
	cr_assert(pgc_is_running(c));
	cr_assert_eq(pgc_new_database(c, a, sizeof(a), &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_new_database(c, b, sizeof(b), &err), PGC_OK, "%s", err.text);
	cr_assert_str_neq(a, b);
	check_settings(a, dir);

	/* A table in one database is not in the other. */
	conn = connect_url(a);
	free(query(conn, "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)"));
	PQfinish(conn);
	conn = connect_url(b);
	expect_value(conn, "SELECT count(*) FROM pg_tables WHERE tablename = 't'", "0");
	PQfinish(conn);
	cr_assert_gt(processes_under(dir), 0, "the server's processes run in %s", dir);

	/* Fast stop: nothing answers; start on the same port: the rows are there. */
	cr_assert_eq(pgc_stop(c, PGC_STOP_FAST, &err), PGC_OK, "%s", err.text);
	cr_assert_not(pgc_is_running(c));
	cr_assert_eq(processes_under(dir), 0);
	cr_assert_neq(PQping(a), PQPING_OK);
	cr_assert_eq(pgc_stop(c, PGC_STOP_FAST, &err), PGC_E_STATE);
	err = (struct pgc_error){ 0 };
	cr_assert_eq(pgc_start(c, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_port(c), port);
	expect_count(a, "t", "2");

	/* Immediate stop after a commit: crash recovery keeps it. */
	conn = connect_url(a);
	free(query(conn, "INSERT INTO t VALUES (3)"));
	cr_assert_eq(pgc_stop(c, PGC_STOP_IMMEDIATE, &err), PGC_OK, "%s", err.text);
	PQfinish(conn);
	cr_assert_eq(processes_under(dir), 0);
	cr_assert_eq(pgc_start(c, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_start(c, &err), PGC_E_STATE);
	expect_count(a, "t", "3");

	pgc_cluster_free(c);
	cr_assert_not(dir_exists(dir), "%s must be removed", dir);
	cr_assert_eq(processes_under(dir), 0, "no process of the cluster may remain");
}

/* A test that dies without cleaning up: the reaper removes it all. */
Test(pg_cluster, reaper_cleans_up_after_a_killed_test, .timeout = 600)
{
	char dir[PATH_MAX] = "";
	int fds[2], status;
	long waited = 0;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct pgc_error err = { 0 };
		struct pgc_cluster *c = NULL;

		close(fds[0]);
		if (pgc_cluster_new(NULL, 0, &c, &err) == PGC_OK)
			(void)!write(fds[1], pgc_dir(c), strlen(pgc_dir(c)) + 1);
		kill(getpid(), SIGKILL);
	}
	close(fds[1]);
	cr_assert_gt(read(fds[0], dir, sizeof(dir) - 1), 0, "the child made no cluster");
	close(fds[0]);
	waitpid(pid, &status, 0);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	while ((dir_exists(dir) || processes_under(dir) > 0) && waited < REAPER_WAIT_MS) {
		usleep(50000);
		waited += 50;
	}
	cr_assert_not(dir_exists(dir), "the reaper must remove %s", dir);
	cr_assert_eq(processes_under(dir), 0, "the reaper must stop the server");
}

Test(pg_cluster, refusals)
{
	struct pgc_error err = { 0 };
	struct pgc_cluster *c = NULL;
	char dir[] = "/tmp/pgc-refusal-XXXXXX";

	cr_assert_not_null(mkdtemp(dir));
	cr_expect_eq(pgc_cluster_new(dir, 0, &c, &err), PGC_E_ARG, "an existing directory");
	cr_expect_null(c);
	cr_expect(dir_exists(dir), "a directory not ours must be left alone");
	err = (struct pgc_error){ 0 };
	cr_expect_eq(pgc_cluster_attach(dir, &c, &err), PGC_E_ARG, "no cluster in it");
	rmdir(dir);
	err = (struct pgc_error){ 0 };
	setenv("DPGATE_PG_BINDIR", "/nonexistent", 1);
	cr_expect_eq(pgc_cluster_new(NULL, 0, &c, &err), PGC_E_NO_SERVER);
	cr_expect(strstr(err.text, "/nonexistent") != NULL, "%s", err.text);
	unsetenv("DPGATE_PG_BINDIR");
}

/* Runs the pgc command; its first output line into OUT. */
static int run_pgc(const char *cmd, const char *dir, char *out, size_t cap)
{
	const char *bin = getenv("PGC_BIN");
	char line[1024];
	FILE *p;
	int status;

	cr_assert_not_null(bin, "PGC_BIN must name the pgc command");
	snprintf(line, sizeof(line), "'%s' %s '%s'", bin, cmd, dir);
	p = popen(line, "r");
	cr_assert_not_null(p);
	out[0] = '\0';
	if (fgets(out, (int)cap, p))
		out[strcspn(out, "\n")] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(pg_cluster, pgc_command, .timeout = 600)
{
	char base[] = "/tmp/pgc-cli-XXXXXX", dir[64], url[PGC_URL_MAX], url2[PGC_URL_MAX];

	cr_assert_not_null(mkdtemp(base));
	chmod(base, 0755);
	snprintf(dir, sizeof(dir), "%s/c", base);
	cr_assert_eq(run_pgc("start", dir, url, sizeof(url)), 0);
	cr_expect(strncmp(url, "postgresql://" PGC_SUPERUSER "@127.0.0.1:", 30) == 0, "%s", url);
	cr_expect(strstr(url, "/postgres") != NULL, "%s", url);
	cr_assert_eq(PQping(url), PQPING_OK, "the cluster outlives pgc start");
	cr_assert_eq(run_pgc("url", dir, url, sizeof(url)), 0);
	cr_assert_eq(run_pgc("url", dir, url2, sizeof(url2)), 0);
	cr_expect_str_neq(url, url2);
	expect_count(url, "pg_tables WHERE schemaname = 'public'", "0");
	expect_count(url2, "pg_tables WHERE schemaname = 'public'", "0");
	cr_assert_eq(run_pgc("stop", dir, url, sizeof(url)), 0);
	cr_assert_not(dir_exists(dir));
	cr_assert_eq(processes_under(dir), 0);
	cr_assert_neq(run_pgc("stop", dir, url, sizeof(url)), 0, "nothing left to stop");
	cr_assert_neq(run_pgc("frobnicate", dir, url, sizeof(url)), 0);
	rmdir(base);
}
