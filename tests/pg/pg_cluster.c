/*
 * pg_cluster.c: see pg_cluster.h.
 *
 * postgres is started directly (fork and exec), not through pg_ctl: the
 * harness then knows the postmaster's pid without reading files, stops it
 * with the signals pg_ctl would send (SIGINT fast, SIGQUIT immediate) and
 * reaps it itself.  pg_ctl's daemonising would hand the server to init,
 * and nothing would stop it if the test died.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pg_cluster.h"

/* A socket's path must fit sun_path (108 bytes): DIR/.s.PGSQL.65535. */
#define PGC_SOCKET_PATH_MAX 107
#define PGC_SOCKET_NAME_LEN 18
/* Attempts at a free port when the first start loses it to another
 * process between the probe and postgres's bind. */
#define PGC_PORT_ATTEMPTS 4
/* Attempts at a database name nobody took (pid and counter collide only
 * when a pid is reused). */
#define PGC_DB_ATTEMPTS 16
/* Poll interval while waiting for a child or a connection. */
#define PGC_POLL_MS 20
/* Bytes of a log's end quoted in an error. */
#define PGC_LOG_TAIL 300

struct pgc_cluster {
	char dir[PATH_MAX];
	char bindir[PATH_MAX];
	int port;
	pid_t postmaster;  /* 0 when stopped */
	pid_t creator;     /* the process that owns it; 0 when not owned */
	pid_t reaper;      /* 0 when none */
	int reaper_fd;     /* write end of the reaper's pipe; -1 when none */
	int drop;          /* run the server as run_uid:run_gid */
	uid_t run_uid;
	gid_t run_gid;
	unsigned next_db;
};

static int fail(struct pgc_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct pgc_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && err->code == PGC_OK) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->text, sizeof(err->text), fmt, ap);
		va_end(ap);
	}
	return code;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The last PGC_LOG_TAIL bytes of a log file, as one line, for an error. */
static void log_tail(const char *path, char *out, size_t cap)
{
	char buf[PGC_LOG_TAIL + 1];
	ssize_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t end;

	out[0] = '\0';
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	if (end > PGC_LOG_TAIL)
		lseek(fd, end - PGC_LOG_TAIL, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, PGC_LOG_TAIL);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n')
			buf[i] = ' ';
	snprintf(out, cap, "%s", buf);
}

/* The first CAP - 1 bytes of the file PATH, terminated; their count, or -1. */
static ssize_t read_head(const char *path, char *buf, size_t cap)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/*
 * Whether process PID has ended.  Our own child is reaped here; a process
 * we did not start (a cluster attached to, or made before a fork) counts
 * as ended once it is gone or a zombie.
 */
static int pid_gone(pid_t pid)
{
	char path[64], stat[256];
	const char *paren;
	int status;
	pid_t r = waitpid(pid, &status, WNOHANG);

	if (r == pid)
		return 1;
	if (r == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (read_head(path, stat, sizeof(stat)) <= 0)
		return 1;
	paren = strrchr(stat, ')');
	return paren && paren[1] == ' ' && paren[2] == 'Z';
}

/* Waits up to TIMEOUT_MS for PID to end; 1 when it did. */
static int wait_gone(pid_t pid, long timeout_ms)
{
	long deadline = now_ms() + timeout_ms;

	while (!pid_gone(pid)) {
		if (now_ms() > deadline)
			return 0;
		sleep_ms(PGC_POLL_MS);
	}
	return 1;
}

/* The postmaster's pid from DIR/data/postmaster.pid, or 0. */
static pid_t pidfile_pid(const char *dir)
{
	char path[PATH_MAX + 32], buf[32];
	long pid;

	snprintf(path, sizeof(path), "%s/data/postmaster.pid", dir);
	if (read_head(path, buf, sizeof(buf)) <= 0)
		return 0;
	pid = strtol(buf, NULL, 10);
	return pid > 0 && pid <= INT_MAX ? (pid_t)pid : 0;
}

/*
 * Ends the postmaster PID: SIG, then SIGQUIT and SIGKILL if it overruns
 * PGC_STOP_TIMEOUT_MS.  Returns 1 when the first signal was enough.
 */
static int end_postmaster(pid_t pid, int sig)
{
	if (kill(pid, sig) != 0 && errno == ESRCH)
		return 1;
	if (wait_gone(pid, PGC_STOP_TIMEOUT_MS))
		return 1;
	if (sig != SIGQUIT) {
		kill(pid, SIGQUIT);
		if (wait_gone(pid, PGC_STOP_TIMEOUT_MS))
			return 0;
	}
	kill(pid, SIGKILL);
	wait_gone(pid, PGC_STOP_TIMEOUT_MS);
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes DIR and everything under it; 0 or -1 with errno. */
static int remove_tree(const char *dir)
{
	if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
		return -1;
	return 0;
}

/*
 * The reaper: waits for the creating process to write its dismissal or to
 * end.  On the end (the pipe's EOF without a byte) it stops the server at
 * once and removes the directory.  It runs in its own session, deaf to the
 * signals a terminal or a test runner sends to a process group, so that
 * the cleanup it exists for is never cut short.  It holds no descriptor
 * but its pipe, so that it keeps no test's pipe or socket open.
 */
static void reaper_run(const char *dir, int fd)
{
	char byte;
	ssize_t n;
	pid_t pm;

	setsid();
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (dup2(fd, 0) < 0)
		_exit(1);
	fd = open("/dev/null", O_WRONLY);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	close_range(3, ~0U, 0);
	do
		n = read(0, &byte, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(0);
	pm = pidfile_pid(dir);
	if (pm > 0)
		end_postmaster(pm, SIGQUIT);
	remove_tree(dir);
	_exit(0);
}

/* Starts the reaper for C (see reaper_run). */
static int start_reaper(struct pgc_cluster *c, struct pgc_error *err)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return fail(err, PGC_E_SYSTEM, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return fail(err, PGC_E_SYSTEM, "fork: %s", strerror(errno));
	}
	if (pid == 0)
		reaper_run(c->dir, fds[0]);
	close(fds[0]);
	c->reaper = pid;
	c->reaper_fd = fds[1];
	return PGC_OK;
}

/* Whether BINDIR holds both initdb and postgres. */
static int bindir_usable(const char *bindir)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/initdb", bindir);
	if (access(path, X_OK) != 0)
		return 0;
	snprintf(path, sizeof(path), "%s/postgres", bindir);
	return access(path, X_OK) == 0;
}

/* Debian's /usr/lib/postgresql/<major>/bin with the highest major. */
static int debian_bindir(char *out, size_t cap)
{
	const char *prefix = "/usr/lib/postgresql/";
	glob_t g;
	long best = -1;

	if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *p = g.gl_pathv[i] + strlen(prefix);
		long major = strtol(p, NULL, 10);
		int len = (int)(strchr(p, '/') - g.gl_pathv[i]);

		if (major > best) {
			best = major;
			snprintf(out, cap, "%.*s/bin", len, g.gl_pathv[i]);
		}
	}
	globfree(&g);
	return best >= 0 && bindir_usable(out);
}

/* `pg_config --bindir`, when it names the server's binaries. */
static int pg_config_bindir(char *out, size_t cap)
{
	FILE *p = popen("pg_config --bindir 2>/dev/null", "r");
	int ok = 0;

	if (!p)
		return 0;
	if (fgets(out, (int)cap, p)) {
		out[strcspn(out, "\n")] = '\0';
		ok = out[0] != '\0';
	}
	pclose(p);
	return ok && bindir_usable(out);
}

static int find_bindir(char *out, size_t cap, struct pgc_error *err)
{
	const char *env = getenv("DPGATE_PG_BINDIR");

	if (env && *env) {
		snprintf(out, cap, "%s", env);
		if (bindir_usable(out))
			return PGC_OK;
		return fail(err, PGC_E_NO_SERVER,
			    "DPGATE_PG_BINDIR=%s holds no initdb and postgres", env);
	}
	if (debian_bindir(out, cap) || pg_config_bindir(out, cap))
		return PGC_OK;
	return fail(err, PGC_E_NO_SERVER,
		    "no PostgreSQL server binaries (initdb, postgres) in "
		    "/usr/lib/postgresql/*/bin or pg_config --bindir: install "
		    "Debian's postgresql, or set DPGATE_PG_BINDIR");
}

/* Who runs the server: the caller, or PGC_RUN_AS_USER when it is root. */
static int resolve_run_as(struct pgc_cluster *c, struct pgc_error *err)
{
	struct passwd *pw;

	c->drop = geteuid() == 0;
	if (!c->drop)
		return PGC_OK;
	pw = getpwnam(PGC_RUN_AS_USER);
	if (!pw)
		return fail(err, PGC_E_SYSTEM, "running as root and no user %s to run "
			    "PostgreSQL as", PGC_RUN_AS_USER);
	c->run_uid = pw->pw_uid;
	c->run_gid = pw->pw_gid;
	return PGC_OK;
}

/*
 * In a child: becomes the server's user, sends output to LOG and execs
 * ARGV with a fixed environment.  Never returns.
 */
static void child_exec(const struct pgc_cluster *c, char *const argv[], const char *log)
{
	static char *const env[] = { "LC_ALL=C", "TZ=UTC", "PATH=/usr/bin:/bin", NULL };
	int fd;

	setsid();
	if (c->drop && (setgroups(0, NULL) != 0 || setgid(c->run_gid) != 0 ||
			setuid(c->run_uid) != 0))
		_exit(126);
	fd = open("/dev/null", O_RDONLY);
	if (fd < 0 || dup2(fd, 0) < 0)
		_exit(126);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	if (chdir(c->dir) != 0)
		_exit(126);
	execve(argv[0], argv, env);
	_exit(127);
}

static int spawn(const struct pgc_cluster *c, char *const argv[], const char *log,
		 pid_t *ret, struct pgc_error *err)
{
	pid_t pid = fork();

	if (pid < 0)
		return fail(err, PGC_E_SYSTEM, "fork: %s", strerror(errno));
	if (pid == 0)
		child_exec(c, argv, log);
	*ret = pid;
	return PGC_OK;
}

/* Makes the cluster's directory (see pgc_cluster_new) and hands it to the
 * server's user. */
static int make_dir(struct pgc_cluster *c, const char *dir, struct pgc_error *err)
{
	const char *tmp = getenv("TMPDIR");

	if (dir) {
		if (snprintf(c->dir, sizeof(c->dir), "%s", dir) >= (int)sizeof(c->dir))
			return fail(err, PGC_E_ARG, "directory name too long");
		if (mkdir(c->dir, 0700) != 0)
			return fail(err, PGC_E_ARG, "mkdir %s: %s", dir, strerror(errno));
	} else {
		if (c->drop || !tmp || !*tmp)
			tmp = "/tmp";
		snprintf(c->dir, sizeof(c->dir), "%s/pgc-XXXXXX", tmp);
		if (!mkdtemp(c->dir))
			return fail(err, PGC_E_SYSTEM, "mkdtemp %s: %s", c->dir, strerror(errno));
	}
	if (strlen(c->dir) + PGC_SOCKET_NAME_LEN > PGC_SOCKET_PATH_MAX)
		return fail(err, PGC_E_ARG, "directory %s too long for a socket path", c->dir);
	if (c->drop && chown(c->dir, c->run_uid, c->run_gid) != 0)
		return fail(err, PGC_E_SYSTEM, "chown %s: %s", c->dir, strerror(errno));
	return PGC_OK;
}

/* Waits up to TIMEOUT_MS for the child PID to exit; its status or -1. */
static int wait_exit(pid_t pid, long timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0)
			return -1;
		if (now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		sleep_ms(PGC_POLL_MS);
	}
}

static int run_initdb(struct pgc_cluster *c, struct pgc_error *err)
{
	char exe[PATH_MAX + 16], data[PATH_MAX + 16], log[PATH_MAX + 16], tail[PGC_LOG_TAIL + 1];
	char *argv[] = { exe, "-D", data, "-U", PGC_SUPERUSER, "-A", "trust", "-E", "UTF8",
			 "--locale=C", "--no-sync", "--no-instructions", NULL };
	pid_t pid = 0;
	int rc, status;

	snprintf(exe, sizeof(exe), "%s/initdb", c->bindir);
	snprintf(data, sizeof(data), "%s/data", c->dir);
	snprintf(log, sizeof(log), "%s/initdb.log", c->dir);
	rc = spawn(c, argv, log, &pid, err);
	if (rc != PGC_OK)
		return rc;
	status = wait_exit(pid, PGC_INITDB_TIMEOUT_MS);
	if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return PGC_OK;
	log_tail(log, tail, sizeof(tail));
	return fail(err, PGC_E_INITDB, "initdb %s: %s: %s", data,
		    status < 0 ? "timed out" : "failed", tail);
}

/* A loopback port that nothing listens on now. */
static int free_port(struct pgc_error *err)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int port = -1;

	if (fd < 0)
		return fail(err, PGC_E_SYSTEM, "socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	if (port < 0)
		return fail(err, PGC_E_SYSTEM, "no free loopback port: %s", strerror(errno));
	return port;
}

static void conninfo(const struct pgc_cluster *c, const char *db, char *out, size_t cap)
{
	snprintf(out, cap, "host=127.0.0.1 port=%d user=%s dbname=%s connect_timeout=5",
		 c->port, PGC_SUPERUSER, db);
}

/* Waits until the server accepts connections, or its exit, or the end of
 * PGC_START_TIMEOUT_MS. */
static int wait_ready(struct pgc_cluster *c, const char *log, struct pgc_error *err)
{
	char info[128], tail[PGC_LOG_TAIL + 1];
	long deadline = now_ms() + PGC_START_TIMEOUT_MS;

	conninfo(c, "postgres", info, sizeof(info));
	for (;;) {
		if (PQping(info) == PQPING_OK)
			return PGC_OK;
		if (pid_gone(c->postmaster)) {
			c->postmaster = 0;
			log_tail(log, tail, sizeof(tail));
			return fail(err, PGC_E_START, "postgres on port %d exited: %s", c->port, tail);
		}
		if (now_ms() > deadline)
			break;
		sleep_ms(PGC_POLL_MS);
	}
	end_postmaster(c->postmaster, SIGQUIT);
	c->postmaster = 0;
	log_tail(log, tail, sizeof(tail));
	return fail(err, PGC_E_START, "postgres on port %d accepted no connection in %d ms: %s",
		    c->port, PGC_START_TIMEOUT_MS, tail);
}

/* Starts postgres on C's port and data and waits until it is ready. */
static int start_server(struct pgc_cluster *c, struct pgc_error *err)
{
	char exe[PATH_MAX + 16], data[PATH_MAX + 16], log[PATH_MAX + 16], port[16],
	     maxconn[48];
	char *argv[] = { exe, "-D", data, "-p", port, "-h", "127.0.0.1", "-k", c->dir,
			 "-c", maxconn, NULL };
	int rc;

	snprintf(exe, sizeof(exe), "%s/postgres", c->bindir);
	snprintf(data, sizeof(data), "%s/data", c->dir);
	snprintf(log, sizeof(log), "%s/postgres.log", c->dir);
	snprintf(port, sizeof(port), "%d", c->port);
	snprintf(maxconn, sizeof(maxconn), "max_connections=%d", PGC_MAX_CONNECTIONS);
	rc = spawn(c, argv, log, &c->postmaster, err);
	if (rc != PGC_OK)
		return rc;
	return wait_ready(c, log, err);
}

/* Records the port in DIR/pgc.port, for pgc_cluster_attach. */
static int save_port(const struct pgc_cluster *c, struct pgc_error *err)
{
	char path[PATH_MAX + 16];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/pgc.port", c->dir);
	f = fopen(path, "we");
	if (!f)
		return fail(err, PGC_E_SYSTEM, "%s: %s", path, strerror(errno));
	ok = fprintf(f, "%d\n", c->port) > 0;
	ok = fclose(f) == 0 && ok;
	return ok ? PGC_OK : fail(err, PGC_E_SYSTEM, "writing %s failed", path);
}

/* The first start: a fresh port per attempt, in case another process
 * takes the probed one first. */
static int first_start(struct pgc_cluster *c, struct pgc_error *err)
{
	int rc = PGC_E_START;

	for (int i = 0; i < PGC_PORT_ATTEMPTS && rc == PGC_E_START; i++) {
		struct pgc_error attempt = { 0 };

		c->port = free_port(err);
		if (c->port < 0)
			return c->port;
		rc = save_port(c, err);
		if (rc != PGC_OK)
			return rc;
		rc = start_server(c, &attempt);
		if (rc != PGC_OK && (rc != PGC_E_START || i + 1 == PGC_PORT_ATTEMPTS))
			return fail(err, rc, "%s", attempt.text);
	}
	return rc;
}

static struct pgc_cluster *cluster_alloc(void)
{
	struct pgc_cluster *c = calloc(1, sizeof(*c));

	if (c)
		c->reaper_fd = -1;
	return c;
}

int pgc_cluster_new(const char *dir, int flags, struct pgc_cluster **ret,
		    struct pgc_error *err)
{
	struct pgc_cluster *c = cluster_alloc();
	int rc, made = 0;

	if (!c)
		return fail(err, PGC_E_SYSTEM, "out of memory");
	rc = find_bindir(c->bindir, sizeof(c->bindir), err);
	if (rc == PGC_OK)
		rc = resolve_run_as(c, err);
	if (rc == PGC_OK)
		rc = make_dir(c, dir, err);
	if (rc != PGC_OK)
		goto out;
	made = 1;
	c->creator = (flags & PGC_KEEP) ? 0 : getpid();
	if (!(flags & PGC_KEEP))
		rc = start_reaper(c, err);
	if (rc == PGC_OK)
		rc = run_initdb(c, err);
	if (rc == PGC_OK)
		rc = first_start(c, err);
	if (rc == PGC_OK) {
		*ret = c;
		c = NULL;
	}
out:
	if (c && made) {
		c->creator = getpid();
		pgc_cluster_free(c);
	} else {
		free(c);
	}
	return rc;
}

int pgc_cluster_attach(const char *dir, struct pgc_cluster **ret, struct pgc_error *err)
{
	struct pgc_cluster *c = cluster_alloc();
	char path[PATH_MAX + 16];
	FILE *f = NULL;
	int rc;

	if (!c)
		return fail(err, PGC_E_SYSTEM, "out of memory");
	rc = find_bindir(c->bindir, sizeof(c->bindir), err);
	if (rc == PGC_OK)
		rc = resolve_run_as(c, err);
	if (rc != PGC_OK)
		goto out;
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/pgc.port", dir);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%d", &c->port) != 1 || c->port <= 0 || c->port > 65535) {
		rc = fail(err, PGC_E_ARG, "%s is not a cluster made by pgc start (no %s)", dir, path);
		goto out;
	}
	c->postmaster = pidfile_pid(dir);
	if (c->postmaster > 0 && pid_gone(c->postmaster))
		c->postmaster = 0;
	*ret = c;
	c = NULL;
out:
	if (f)
		fclose(f);
	free(c);
	return rc;
}

int pgc_url(const struct pgc_cluster *c, const char *dbname, char *url, size_t cap,
	    struct pgc_error *err)
{
	int n = snprintf(url, cap, "postgresql://%s@127.0.0.1:%d/%s", PGC_SUPERUSER, c->port,
			 dbname);

	if (n < 0 || (size_t)n >= cap)
		return fail(err, PGC_E_ARG, "URL longer than %zu bytes", cap);
	return PGC_OK;
}

/* One CREATE DATABASE attempt: PGC_OK, 1 when the name is taken, or an
 * error. */
static int create_database(PGconn *conn, const char *name, struct pgc_error *err)
{
	char sql[128];
	PGresult *res;
	const char *state;
	int rc = PGC_OK;

	snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\"", name);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (state && strcmp(state, "42P04") == 0)
			rc = 1;
		else
			rc = fail(err, PGC_E_SQL, "CREATE DATABASE %s: %s", name,
				  PQresultErrorMessage(res));
	}
	PQclear(res);
	return rc;
}

int pgc_new_database(struct pgc_cluster *c, char *url, size_t cap, struct pgc_error *err)
{
	char info[128], name[64];
	PGconn *conn;
	int rc = 1;

	conninfo(c, "postgres", info, sizeof(info));
	conn = PQconnectdb(info);
	if (PQstatus(conn) != CONNECTION_OK) {
		rc = fail(err, PGC_E_SQL, "connecting to port %d: %s", c->port,
			  PQerrorMessage(conn));
		goto out;
	}
	for (int i = 0; i < PGC_DB_ATTEMPTS && rc == 1; i++) {
		snprintf(name, sizeof(name), "dpgate_%ld_%u", (long)getpid(), c->next_db++);
		rc = create_database(conn, name, err);
	}
	if (rc == 1)
		rc = fail(err, PGC_E_SQL, "no free database name after %d attempts",
			  PGC_DB_ATTEMPTS);
	if (rc == PGC_OK)
		rc = pgc_url(c, name, url, cap, err);
out:
	PQfinish(conn);
	return rc;
}

int pgc_is_running(const struct pgc_cluster *c)
{
	return c->postmaster > 0 && !pid_gone(c->postmaster);
}

int pgc_stop(struct pgc_cluster *c, enum pgc_stop_mode mode, struct pgc_error *err)
{
	int clean;

	if (!pgc_is_running(c))
		return fail(err, PGC_E_STATE, "the server on port %d is not running", c->port);
	clean = end_postmaster(c->postmaster, mode == PGC_STOP_FAST ? SIGINT : SIGQUIT);
	c->postmaster = 0;
	if (!clean)
		return fail(err, PGC_E_STOP, "the server on port %d overran %d ms and was killed",
			    c->port, PGC_STOP_TIMEOUT_MS);
	return PGC_OK;
}

int pgc_start(struct pgc_cluster *c, struct pgc_error *err)
{
	if (pgc_is_running(c))
		return fail(err, PGC_E_STATE, "the server on port %d is already running", c->port);
	return start_server(c, err);
}

int pgc_port(const struct pgc_cluster *c)
{
	return c->port;
}

const char *pgc_dir(const struct pgc_cluster *c)
{
	return c->dir;
}

int pgc_cluster_remove(struct pgc_cluster *c, struct pgc_error *err)
{
	int rc = PGC_OK;

	if (pgc_is_running(c))
		rc = pgc_stop(c, PGC_STOP_FAST, err);
	if (remove_tree(c->dir) != 0)
		return fail(err, PGC_E_SYSTEM, "removing %s: %s", c->dir, strerror(errno));
	return rc;
}

void pgc_cluster_free(struct pgc_cluster *c)
{
	struct pgc_error ignored = { 0 };

	if (!c)
		return;
	if (c->creator == getpid()) {
		if (pgc_is_running(c))
			pgc_stop(c, PGC_STOP_IMMEDIATE, &ignored);
		/* The reaper is dismissed only when the directory is gone; else
		 * the pipe's end sends it to do the removal itself. */
		if (remove_tree(c->dir) == 0 && c->reaper_fd >= 0)
			(void)!write(c->reaper_fd, "q", 1);
	}
	if (c->reaper_fd >= 0)
		close(c->reaper_fd);
	if (c->reaper > 0 && c->creator == getpid())
		waitpid(c->reaper, NULL, 0);
	free(c);
}
