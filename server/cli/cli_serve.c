/*
 * cli/cli_serve.c: `dpgate serve`, the HTTP server on one database.
 *
 *   dpgate serve [--db FILE|URL] [--listen HOST:PORT] [--data-dir DIR] [--threads N] ...
 *
 * It takes a one-server lock on the database and on the data directory,
 * opens the store, starts the job workers and serves until a signal.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli.h"
#include "http.h"
#include "api.h"
#include "jobs.h"
#include "store.h"

#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x) /* a macro's value as a string literal */
static const char usage_serve[] =
	"usage: dpgate serve [--db FILE|URL] [--listen HOST:PORT] [--data-dir DIR]\n"
	"                    [--threads N] [--body-timeout S] [--header-timeout S]\n"
	"                    [--max-conns-per-ip N] [--public-metrics] [--quiet]\n"
	"                    [--cors-origin ORIGIN]... [--max-waiters N]\n"
	"\n"
	"  --db FILE|URL      SQLite database (default DIR/dpgate.db; sqlite:FILE too),\n"
	"                     or a PostgreSQL database (postgresql://...) that several\n"
	"                     servers share; created or migrated if needed\n"
	"  --listen HOST:PORT IPv4 address and port (default " DPG_SERVE_LISTEN "; port 0 picks one)\n"
	"  --data-dir DIR     where uploaded tables and models live (default ./" DPG_SERVE_DATA_DIR ")\n"
	"  --threads N        HTTP worker threads (default " TEXT_OF(DPG_SERVE_THREADS) "); at most half of them run\n"
	"                     stateless computations at once (past that: 503)\n"
	"  --body-timeout S   a request body still arriving S seconds after the\n"
	"                     request's headers is cut off and its connection closed\n"
	"                     (default " TEXT_OF(DPG_BODY_TIMEOUT_S) ", 1.." TEXT_OF(DPG_MAX_BODY_TIMEOUT_S) "): a client that sends slowly\n"
	"                     holds a connection at most that long (an idle one 30 s)\n"
	"  --header-timeout S a request's headers still arriving S seconds after their\n"
	"                     first byte get 408 and the connection is closed (default\n"
	"                     " TEXT_OF(DPG_HEADER_TIMEOUT_S) ", 1.." TEXT_OF(DPG_MAX_HEADER_TIMEOUT_S) ")\n"
	"  --max-conns-per-ip N  connections one client address may hold at once\n"
	"                     (default " TEXT_OF(DPG_MAX_CONNECTIONS_PER_IP) ", 1.." TEXT_OF(DPG_MAX_CONNECTIONS) "; loopback too); behind a proxy,\n"
	"                     whose clients all share its address, raise it to " TEXT_OF(DPG_MAX_CONNECTIONS) ".\n"
	"                     Connections waiting for a request (headers, a body not\n"
	"                     yet admitted, idle keep-alive) hold all but " TEXT_OF(DPG_CONNECTION_RESERVE) " of the\n"
	"                     " TEXT_OF(DPG_MAX_CONNECTIONS) " slots; past that a new connection closes the\n"
	"                     longest-waiting one\n"
	"  --public-metrics   /metrics shows every dataset's gauges to anyone; without\n"
	"                     it, only those of the datasets the request's key may read\n"
	"  --quiet            no access log lines\n"
	"  --cors-origin ORIGIN  lets a page served from ORIGIN (scheme://host[:port],\n"
	"                     matched exactly) call the API from a browser (CORS,\n"
	"                     preflight included); repeatable, at most " TEXT_OF(DPG_MAX_CORS_ORIGINS) "; none by default\n"
	"  --max-waiters N    long-polls (?wait=S) suspended at once (default\n"
	"                     " TEXT_OF(DPG_LONG_POLL_WAITERS) ", 1.." TEXT_OF(DPG_MAX_LONG_POLL_WAITERS) "); past that 503\n"
	"\n"
	"Logs the database path and the address on stderr; SIGINT, SIGTERM or SIGHUP\n"
	"stops accepting, finishes requests in flight and closes the database (SIGHUP\n"
	"not when serve was started with it ignored, as by nohup).\n"
	"One server per database and per data directory: serve holds an exclusive\n"
	"flock on FILE and on DIR themselves, whatever path reaches them (a symlink,\n"
	"a hard link, a bind mount), and exits 1 when another server holds either,\n"
	"or when the address is in use.\n"
	"A non-empty file that is not a dpgate database (not SQLite, or SQLite without\n"
	"dpgate's schema) is refused (exit 2), and so is one with a newer schema\n"
	"version than this dpgate knows (exit 1); neither is written.\n";

static int make_dir(const char *dir)
{
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	fprintf(stderr, "dpgate serve: cannot create %s: %s\n", dir, strerror(errno));
	return -1;
}


/*
 * Takes a one-server lock: an exclusive, non-blocking flock(2) on the file
 * or directory at `path` itself (the database file is created 0600 when
 * absent, as the store would create it; a directory is opened read-only).
 * A lock on the object rather than on a name beside it is shared by every
 * path that reaches it: a symlink, a hard link, a bind mount of its
 * directory.  flock locks are independent of the POSIX (fcntl) locks that
 * SQLite takes on the database file, so they neither block the `keys`,
 * `verify` and `backup` commands nor disappear when SQLite closes one of
 * its own descriptors of the file (as a second fcntl lock would).  The
 * kernel drops the lock when the process ends, kill -9 included.  `what`
 * names the path in messages.  Returns the descriptor, which the caller
 * keeps open while it serves, with the file's status in *ret_st
 * (may be NULL), or -1 after a message on stderr (another server holds the
 * lock, or the file cannot be opened).
 */
static int serve_lock(const char *path, bool directory, const char *what, struct stat *ret_st)
{
	struct stat st = {0};
	int fd = directory ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
			   : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0) {
		fprintf(stderr, "dpgate serve: cannot open the %s %s: %s\n", what, path,
			strerror(errno));
		return -1;
	}
	if (!directory && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		fprintf(stderr, "dpgate serve: the %s %s is not a regular file\n", what, path);
		close(fd);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			fprintf(stderr,
				"dpgate serve: another dpgate server is running on the %s %s (under "
				"this or another path to the same file); stop it first\n",
				what, path);
		else
			fprintf(stderr, "dpgate serve: cannot lock the %s %s: %s\n", what, path,
				strerror(errno));
		close(fd);
		return -1;
	}
	if (ret_st)
		*ret_st = st; /* a directory's is not read: all zero */
	return fd;
}

/* One JSON line of serve's log before it listens: level, msg, detail (when
 * not NULL) and count (when >= 0), as the access log writes its lines. */
static void log_event(const char *level, const char *msg, const char *detail, long long count)
{
	json_t *j = json_pack("{s:s, s:s}", "level", level, "msg", msg);

	if (!j)
		return;
	if (detail)
		json_object_set_new(j, "detail", json_string(detail));
	if (count >= 0)
		json_object_set_new(j, "count", json_integer(count));
	flockfile(stderr);
	if (json_dumpf(j, stderr, JSON_COMPACT) == 0)
		fputc('\n', stderr);
	funlockfile(stderr);
	json_decref(j);
}

/* The main thread's id, read by forward_stop_signal: set once, before
 * the handler is installed. */
static volatile pid_t stop_signal_thread;

/* A library may start threads before main() with every signal open
 * (OpenBLAS starts its pool when it is loaded).  The kernel hands a
 * process-directed stop signal (SIGINT, SIGTERM, SIGHUP) to such a thread
 * whenever the main thread is not inside its sigwait, and there the
 * default action would end the process mid-request.  This handler, which
 * only such a thread ever runs, passes the signal on to the main thread,
 * where it waits blocked until srv_http_serve's sigwait takes it.  tgkill
 * is a plain system call, safe in a handler. */
static void forward_stop_signal(int sig)
{
	int saved = errno;

	syscall(SYS_tgkill, getpid(), stop_signal_thread, sig);
	errno = saved;
}

/* Before any thread of ours starts (job workers, the long-poll timer, a
 * store's listener and its file watcher): they inherit the blocked mask,
 * so the stop signals (srv_http_stop_signals) reach only srv_http_serve's
 * sigwait; threads started earlier by a library forward them there. */
static void block_stop_signals(void)
{
	struct sigaction forward;
	sigset_t stop;

	stop_signal_thread = (pid_t)syscall(SYS_gettid);
	memset(&forward, 0, sizeof(forward));
	forward.sa_handler = forward_stop_signal;
	sigemptyset(&forward.sa_mask);
	srv_http_stop_signals(&stop);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&stop, sig) == 1)
			sigaction(sig, &forward, NULL);
}

/* cli_serve_main after the locks: opens the store, starts the job workers and
 * serves until a signal, on a copy of `settings` (data_dir, access_log).
 * Returns the exit status. */
static int serve_locked(const srv_ctx *settings, const char *db, const char *host, unsigned port,
			unsigned threads)
{
	srv_ctx ctx = *settings;
	srv_store_listener *listener = NULL;
	srv_error err;
	int rc = 1, opened;

	block_stop_signals();
	srv_error_init(&err);
	opened = cli_db_open("serve", db, threads + DPG_SERVE_EXTRA_DB_CONNECTIONS, &ctx.store);
	if (opened != 0)
		return opened;
	/* Not fatal: without it commits only pay more until the WAL has
	 * grown to this size by itself. */
	if (srv_store_preallocate_wal(ctx.store, &err) < 0)
		log_event("warn", "WAL file not written out", err.text, -1);
	if (srv_store_is_shared(db) || !realpath(srv_store_file(db), ctx.db_path))
		srv_store_target_name(db, ctx.db_path, sizeof(ctx.db_path));
	ctx.routes = (srv_route_table){.routes = srv_routes,
					.n = srv_routes_count,
					.caching = srv_route_caching,
					.n_caching = srv_route_caching_count,
					.queries = srv_route_queries,
					.n_queries = srv_route_queries_count};
	ctx.route_metrics = calloc(ctx.routes.n + 1, sizeof(srv_route_metrics));
	/* A shared database's keys are revoked through any server (or `dpgate
	 * keys`), which no stamp file beside it can tell the others: there,
	 * every request reads its key's row. */
	ctx.auth_cache = srv_store_is_shared(db) ? NULL : srv_auth_cache_new(srv_store_file(db));
	ctx.tables = srv_table_cache_new(DPG_TABLE_CACHE_BYTES);
	/* Before the job workers, which wake long-polls on their jobs. */
	ctx.watch = srv_watch_new(ctx.max_waiters);
	if (!ctx.route_metrics || (!ctx.auth_cache && !srv_store_is_shared(db)) || !ctx.tables ||
	    !ctx.watch)
		goto out;
	{
		srv_db *sdb = srv_store_acquire(ctx.store);
		unsigned removed = 0;

		/* Table files no link names: orphans of a crash mid-upload. */
		if (!sdb || srv_data_sweep_tables(sdb, ctx.data_dir, &removed) != SRV_OK)
			log_event("warn", "cannot sweep orphaned table files", ctx.data_dir, -1);
		else if (removed > 0)
			log_event("info", "removed orphaned table files", ctx.data_dir, removed);
		if (sdb)
			srv_store_release(ctx.store, sdb);
	}
	/* On a shared database, commits through the other servers wake this
	 * one's long-polls too. */
	if (srv_store_listen_start(db, srv_watch_store_changed, ctx.watch, &listener, &err) < 0) {
		fprintf(stderr, "dpgate serve: %s\n", err.text);
		goto out;
	}
	/* A lost WAL is copied into the database file even while no request
	 * comes to check the files; srv_store_close stops the thread. */
	if (srv_store_file_watch_start(ctx.store, &err) < 0) {
		fprintf(stderr, "dpgate serve: %s\n", err.text);
		goto out;
	}
	if (srv_jobs_start(&ctx, DPG_MAX_JOB_WORKERS, srv_data_load_table, &ctx.jobs, &err) < 0) {
		fprintf(stderr, "dpgate serve: %s\n", err.text);
		goto out;
	}
	rc = srv_http_serve(&ctx, host, port, threads);
	srv_jobs_stop(ctx.jobs);
out:
	srv_store_listen_stop(listener);
	srv_store_close(ctx.store);
	srv_auth_cache_free(ctx.auth_cache);
	/* After the HTTP threads and the job workers: no reference is left. */
	srv_table_cache_free(ctx.tables);
	srv_watch_free(ctx.watch);
	free(ctx.route_metrics);
	return rc;
}

/* Reads a count option: the whole text decimal digits (no sign, no
 * spaces), lo..hi.  False when it is not. */
static bool count_option(const char *text, unsigned lo, unsigned hi, unsigned *ret)
{
	size_t n = strlen(text);
	unsigned long v;

	if (n == 0 || n > 9 || strspn(text, "0123456789") != n)
		return false;
	v = strtoul(text, NULL, 10);
	if (v < lo || v > hi)
		return false;
	*ret = (unsigned)v;
	return true;
}

/* serve's options as the command line gives them. */
typedef struct {
	const char *db;         /* NULL: DIR/dpgate.db */
	const char *listen;     /* HOST:PORT, not yet split */
	const char *data_dir;
	unsigned threads;
	unsigned body_timeout_s;
	unsigned header_timeout_s;
	unsigned max_conns_per_ip;
	bool public_metrics;
	unsigned max_waiters;
	const char *cors_origins[DPG_MAX_CORS_ORIGINS];
	unsigned n_cors_origins;
} serve_options;

/* Whether `o` is an origin as a browser sends it (RFC 6454 6.1): http or
 * https, a host of letters, digits, dots, dashes (or a bracketed IPv6
 * address), an optional port, and nothing after: no path, no "*", no
 * "null", which would let any sandboxed page in. */
static bool origin_ok(const char *o)
{
	const char *host = strncmp(o, "https://", 8) == 0 ? o + 8 :
			   strncmp(o, "http://", 7) == 0  ? o + 7 :
							    NULL;
	size_t n = strlen(o);

	if (!host || !*host || n > DPG_MAX_ORIGIN_BYTES)
		return false;
	for (const char *p = host; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(".-:[]", *p)))
			return false;
	return true;
}

/* serve's whole-number options, one row each: the getopt letter, the
 * option's name, the unit its message names, its largest value (its
 * smallest is 1) and its field in serve_options. */
static const struct serve_count {
	int letter;
	const char *name;
	const char *unit;
	unsigned max;
	size_t offset;
} serve_counts[] = {
	{'t', "threads", "", DPG_MAX_SERVE_THREADS, offsetof(serve_options, threads)},
	{'T', "body-timeout", " seconds", DPG_MAX_BODY_TIMEOUT_S,
	 offsetof(serve_options, body_timeout_s)},
	{'H', "header-timeout", " seconds", DPG_MAX_HEADER_TIMEOUT_S,
	 offsetof(serve_options, header_timeout_s)},
	{'P', "max-conns-per-ip", "", DPG_MAX_CONNECTIONS, offsetof(serve_options, max_conns_per_ip)},
	{'W', "max-waiters", "", DPG_MAX_LONG_POLL_WAITERS, offsetof(serve_options, max_waiters)},
};

/* The row of serve_counts for getopt letter c; NULL when c is no count. */
static const struct serve_count *serve_count_of(int c)
{
	for (size_t i = 0; i < sizeof(serve_counts) / sizeof(serve_counts[0]); i++)
		if (serve_counts[i].letter == c)
			return &serve_counts[i];
	return NULL;
}

/* Reads the count option k from arg into its field of *o.  False after a
 * message. */
static bool serve_count_option(const struct serve_count *k, const char *arg, serve_options *o)
{
	if (count_option(arg, 1, k->max, (unsigned *)((char *)o + k->offset)))
		return true;
	fprintf(stderr, "dpgate serve: --%s must be 1..%u%s\n", k->name, k->max, k->unit);
	return false;
}

/* The dashboard's --cors-origin into *o.  False after a message. */
static bool serve_cors_option(const char *arg, serve_options *o)
{
	if (!origin_ok(arg)) {
		fprintf(stderr, "dpgate serve: --cors-origin must be scheme://host[:port] "
				"(http or https, no path, at most %d bytes)\n",
			DPG_MAX_ORIGIN_BYTES);
		return false;
	}
	if (o->n_cors_origins == DPG_MAX_CORS_ORIGINS) {
		fprintf(stderr, "dpgate serve: at most %d --cors-origin\n", DPG_MAX_CORS_ORIGINS);
		return false;
	}
	o->cors_origins[o->n_cors_origins++] = arg;
	return true;
}

/* Reads serve's options into *o, defaults first, and refuses a stray
 * argument.  True when serve goes on; false with the exit status in
 * *ret_status (0 after --help, 2 after a message and the usage). */
static bool serve_parse_options(int argc, char **argv, serve_options *o, int *ret_status)
{
	static const struct option opts[] = {
		{"db", required_argument, NULL, 'd'},
		{"listen", required_argument, NULL, 'l'},
		{"data-dir", required_argument, NULL, 'D'},
		{"threads", required_argument, NULL, 't'},
		{"body-timeout", required_argument, NULL, 'T'},
		{"header-timeout", required_argument, NULL, 'H'},
		{"max-conns-per-ip", required_argument, NULL, 'P'},
		{"public-metrics", no_argument, NULL, 'M'},
		{"quiet", no_argument, NULL, 'q'},
		{"cors-origin", required_argument, NULL, 'C'},
		{"max-waiters", required_argument, NULL, 'W'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const struct serve_count *k;
	int c;

	*o = (serve_options){
		.listen = DPG_SERVE_LISTEN,
		.data_dir = DPG_SERVE_DATA_DIR,
		.threads = DPG_SERVE_THREADS,
		.body_timeout_s = DPG_BODY_TIMEOUT_S,
		.header_timeout_s = DPG_HEADER_TIMEOUT_S,
		.max_conns_per_ip = DPG_MAX_CONNECTIONS_PER_IP,
		.max_waiters = DPG_LONG_POLL_WAITERS,
	};
	*ret_status = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o->db = optarg; break;
		case 'l': o->listen = optarg; break;
		case 'D': o->data_dir = optarg; break;
		case 'M': o->public_metrics = true; break;
		case 'C':
			if (!serve_cors_option(optarg, o))
				return false;
			break;
		case 'q': break;
		case 'h': fputs(usage_serve, stdout); *ret_status = 0; return false;
		default:
			k = serve_count_of(c);
			if (!k)
				fputs(usage_serve, stderr);
			if (!k || !serve_count_option(k, optarg, o))
				return false;
			break;
		}
	}
	return cli_args_no_stray("serve", optind, argc, argv, usage_serve);
}

/* Splits --listen's HOST:PORT into host (host_size bytes) and *ret_port.
 * False after a message; then neither is written. */
static bool serve_parse_listen(const char *listen, char *host, size_t host_size,
			       unsigned *ret_port)
{
	const char *colon = strrchr(listen, ':');
	char *end;
	long p;

	if (!colon || (size_t)(colon - listen) >= host_size) {
		fprintf(stderr, "dpgate serve: --listen must be HOST:PORT\n");
		return false;
	}
	p = strtol(colon + 1, &end, 10);
	if (*end || p < 0 || p > 65535) {
		fprintf(stderr, "dpgate serve: bad port in --listen\n");
		return false;
	}
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	*ret_port = (unsigned)p;
	return true;
}

/* The server's settings from the options into *ctx, zeroed first.
 * --quiet is looked for in argv word for word: an abbreviation that getopt
 * accepts (--qui) does not silence the access log. */
static void serve_settings(const serve_options *o, int argc, char **argv, srv_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->access_log = true;
	ctx->body_timeout_s = o->body_timeout_s;
	ctx->header_timeout_s = o->header_timeout_s;
	ctx->max_conns_per_ip = o->max_conns_per_ip;
	ctx->public_metrics = o->public_metrics;
	ctx->max_waiters = o->max_waiters;
	for (unsigned i = 0; i < o->n_cors_origins; i++)
		ctx->cors_origins[i] = o->cors_origins[i];
	ctx->n_cors_origins = o->n_cors_origins;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--quiet") == 0)
			ctx->access_log = false;
	if (!realpath(o->data_dir, ctx->data_dir))
		snprintf(ctx->data_dir, sizeof(ctx->data_dir), "%s", o->data_dir);
}

/* The database is created 0600; one made otherwise (by sqlite3, or copied
 * with a umask of 022) lets other users read the key hashes and the PATE
 * sessions' vote histograms, and SQLite gives its -wal and -shm files the
 * same mode.  Said once at the start; dpgate does not change it. */
static void warn_if_shared_mode(const char *db, mode_t mode)
{
	char detail[4200];

	if ((mode & 077) == 0)
		return;
	snprintf(detail, sizeof(detail), "%s (mode %04o)", db, (unsigned)(mode & 0777));
	log_event("warn",
		  "the database file is open to group or others; it holds the key hashes and "
		  "private vote histograms: chmod 600 it and its -wal and -shm files",
		  detail, -1);
}

/* Takes the one-server locks on the database and on settings->data_dir,
 * serves (serve_locked) and lets them go.  Returns the exit status. */
static int serve_with_locks(const srv_ctx *settings, const char *db, const char *host,
			    unsigned port, unsigned threads)
{
	struct stat st;
	int rc = 1, lock_fd, dir_lock_fd;

	/* Before the store opens: migrations and the restart rule (jobs left
	 * running are marked failed) are for the one server of a database, and
	 * the start-up sweep of the data directory removes table files that its
	 * own database does not name, so a directory has one server too. */
	if (srv_store_is_shared(db)) {
		/* A shared database has many servers: its migrations take a lock
		 * of the database's own (store_pg.c), and only the data directory
		 * stays one server's. */
		lock_fd = -1;
		goto dir_lock;
	}
	lock_fd = serve_lock(srv_store_file(db), false, "database", &st);
	if (lock_fd < 0)
		return 1;
	/* SQLite names the WAL after the path it was given: a command run on
	 * another hard link of this file (`dpgate keys`) would use a WAL of its
	 * own, and neither side would see the other's commits. */
	if (st.st_nlink > 1)
		log_event("warn",
			  "the database file has other hard links; give every dpgate command this "
			  "path", db, (long long)st.st_nlink);
	warn_if_shared_mode(db, st.st_mode);
dir_lock:
	dir_lock_fd = serve_lock(settings->data_dir, true, "data directory", NULL);
	if (dir_lock_fd < 0)
		goto out;
	rc = serve_locked(settings, db, host, port, threads);
	close(dir_lock_fd);
out:
	if (lock_fd >= 0)
		close(lock_fd);
	return rc;
}

int cli_serve_main(int argc, char **argv)
{
	serve_options o;
	char host[64], dbbuf[4096];
	unsigned port;
	srv_ctx ctx;
	int rc;

	if (!serve_parse_options(argc, argv, &o, &rc))
		return rc;
	if (!serve_parse_listen(o.listen, host, sizeof(host), &port))
		return 2;
	if (make_dir(o.data_dir) < 0)
		return 1;
	if (!o.db) {
		snprintf(dbbuf, sizeof(dbbuf), "%s/dpgate.db", o.data_dir);
		o.db = dbbuf;
	}
	serve_settings(&o, argc, argv, &ctx);
	return serve_with_locks(&ctx, o.db, host, port, o.threads);
}
