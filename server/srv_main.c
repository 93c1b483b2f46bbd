/*
 * srv_main.c: the dpgate command line.
 *
 *   dpgate serve [--db FILE] [--listen HOST:PORT] [--data-dir DIR] [--threads N]
 *   dpgate keys create|list|revoke --db FILE ...
 *   dpgate epsilon|delta|calibrate|compare|rdp [options] [FILE|-]
 *   dpgate check POLICY [--json]
 *   dpgate verify --db FILE
 *   dpgate backup --db FILE --to OUT
 *   dpgate routes
 */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "srv.h"
#include "srv_jobs.h"
#include "srv_json.h"
#include "srv_mech_routes.h"
#include "srv_stateless.h"
#include "srv_table_cache.h"

/* OpenBLAS's own control (cblas.h of libopenblas-dev declares it too). */
void openblas_set_num_threads(int num_threads);

#define DEFAULT_LISTEN "127.0.0.1:8080"
#define DEFAULT_DATA_DIR "dpgate-data"
#define DEFAULT_THREADS 8
/* serve --body-timeout (srv_http.c, on_request) */
#define DEFAULT_BODY_TIMEOUT_S 300
#define MAX_BODY_TIMEOUT_S 86400
/* serve --header-timeout (srv_conns.h); the default is DPG_HEADER_TIMEOUT_S */
#define MAX_HEADER_TIMEOUT_S 3600
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x) /* a macro's value as a string literal */
static const char usage_top[] =
	"usage: dpgate <command> [options]\n"
	"\n"
	"A privacy-budget service: keeps a differential-privacy budget per dataset,\n"
	"prices every release in a privacy accountant, and hands releases out only\n"
	"while the budget holds.\n"
	"\n"
	"commands:\n"
	"  serve       run the HTTP API on an embedded SQLite database\n"
	"  keys        create, list or revoke API keys (create|list|revoke)\n"
	"  epsilon     epsilon of a privacy event at a delta (stateless)\n"
	"  delta       delta of a privacy event at an epsilon (stateless)\n"
	"  calibrate   solve an event template's one null field for a target (stateless)\n"
	"  compare     epsilon of an event under every accountant (stateless)\n"
	"  rdp         Renyi-DP curve of an event (stateless)\n"
	"  pate-cost   RDP of a PATE GNMax answer from its votes (stateless)\n"
	"  pate-smooth-sensitivity\n"
	"              smooth sensitivity of a PATE answer's RDP (stateless)\n"
	"  label-em-guidance\n"
	"              keep and success probabilities of label EM at an epsilon (stateless)\n"
	"  check       check a budget policy file, for CI (exit 0 fits, 1 not, 2 bad)\n"
	"  verify      recompute every ledger's totals from its rows and compare\n"
	"  backup      write a consistent copy of the database, also while serving\n"
	"  routes      print the HTTP routes\n"
	"  help CMD    describe command CMD (as `dpgate CMD --help`)\n"
	"\n"
	"options:\n"
	"  --help      this text\n"
	"  --version   print dpgate's version\n"
	"\n"
	"`dpgate <command> --help` or `dpgate help <command>` describes a command.\n";

static const char usage_serve[] =
	"usage: dpgate serve [--db FILE] [--listen HOST:PORT] [--data-dir DIR] [--threads N]\n"
	"                    [--body-timeout S] [--header-timeout S]\n"
	"                    [--max-conns-per-ip N] [--public-metrics] [--quiet]\n"
	"\n"
	"  --db FILE          SQLite database (default DIR/dpgate.db); created and\n"
	"                     migrated if needed\n"
	"  --listen HOST:PORT IPv4 address and port (default " DEFAULT_LISTEN "; port 0 picks one)\n"
	"  --data-dir DIR     where uploaded tables and models live (default ./" DEFAULT_DATA_DIR ")\n"
	"  --threads N        HTTP worker threads (default 8); at most half of them run\n"
	"                     stateless computations at once (past that: 503)\n"
	"  --body-timeout S   a request body still arriving S seconds after the\n"
	"                     request's headers is cut off and its connection closed\n"
	"                     (default " TEXT_OF(DEFAULT_BODY_TIMEOUT_S) ", 1.." TEXT_OF(MAX_BODY_TIMEOUT_S) "): a client that sends slowly\n"
	"                     holds a connection at most that long (an idle one 30 s)\n"
	"  --header-timeout S a request's headers still arriving S seconds after their\n"
	"                     first byte get 408 and the connection is closed (default\n"
	"                     " TEXT_OF(DPG_HEADER_TIMEOUT_S) ", 1.." TEXT_OF(MAX_HEADER_TIMEOUT_S) ")\n"
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
	"\n"
	"Logs the database path and the address on stderr; SIGINT or SIGTERM stops\n"
	"accepting, finishes requests in flight and closes the database.\n"
	"One server per database and per data directory: serve holds an exclusive\n"
	"flock on FILE and on DIR themselves, whatever path reaches them (a symlink,\n"
	"a hard link, a bind mount), and exits 1 when another server holds either,\n"
	"or when the address is in use.\n"
	"A non-empty SQLite file without dpgate's schema, or with a newer schema\n"
	"version than this dpgate knows, is refused (exit 1).\n";

static const char usage_keys[] =
	"usage: dpgate keys create --db FILE --role admin|analyst|viewer [--datasets a,b] [--note TEXT] [--if-none]\n"
	"       dpgate keys list   --db FILE\n"
	"       dpgate keys revoke --db FILE KEY_ID\n"
	"\n"
	"create prints the new key alone on the last line of stdout; it is shown only\n"
	"once (the database keeps a SHA-256 hash). --if-none creates a key only when\n"
	"no unrevoked key of that role exists (and then prints nothing). create makes\n"
	"the database if there is none; list and revoke need an existing one (exit 2).\n"
	"create and revoke are recorded with the login name that ran them (\"cli:NAME\"),\n"
	"readable by admins at GET /v1/audit/keys.\n";

/*
 * The stateless commands: each reads the body of its route and prints the
 * route's answer.  `example` is a complete body the command answers (the
 * CLI test runs every one), shown by its --help.
 */
static const struct stateless_cmd {
	const char *name;
	const char *route;
	srv_json_fn fn;
	const char *example;
} stateless_cmds[] = {
	{"epsilon", "/v1/accountant/epsilon", srv_acct_epsilon,
	 "{\"event\": {\"type\": \"self_composed\", \"count\": 1000, \"event\": {\"type\": "
	 "\"poisson_sampled\", \"sampling_probability\": 0.01, \"event\": {\"type\": "
	 "\"gaussian\", \"noise_multiplier\": 1.1}}}, \"delta\": 1e-5, \"accountant\": "
	 "\"rdp\", \"neighbor\": \"add_remove\"}"},
	{"delta", "/v1/accountant/delta", srv_acct_delta,
	 "{\"event\": {\"type\": \"gaussian\", \"noise_multiplier\": 2}, \"epsilon\": 1, "
	 "\"accountant\": \"pld\", \"neighbor\": \"add_remove\"}"},
	{"calibrate", "/v1/accountant/calibrate", srv_acct_calibrate,
	 "{\"template\": {\"type\": \"self_composed\", \"count\": 1000, \"event\": {\"type\": "
	 "\"poisson_sampled\", \"sampling_probability\": 0.01, \"event\": {\"type\": "
	 "\"gaussian\", \"noise_multiplier\": null}}}, \"epsilon\": 3, \"delta\": 1e-5, "
	 "\"accountant\": \"rdp\", \"neighbor\": \"add_remove\"}"},
	{"compare", "/v1/accountant/compare", srv_acct_compare,
	 "{\"event\": {\"type\": \"self_composed\", \"count\": 1000, \"event\": {\"type\": "
	 "\"poisson_sampled\", \"sampling_probability\": 0.01, \"event\": {\"type\": "
	 "\"gaussian\", \"noise_multiplier\": 1.1}}}, \"delta\": 1e-5, \"neighbor\": "
	 "\"add_remove\"}"},
	{"rdp", "/v1/accountant/rdp", srv_acct_rdp,
	 "{\"event\": {\"type\": \"gaussian\", \"noise_multiplier\": 2}, \"orders\": [2, 4, "
	 "8, 16, 32]}"},
	{"pate-cost", "/v1/pate/cost", srv_pate_cost,
	 "{\"votes\": [90, 5, 5], \"sigma\": 40, \"orders\": [2, 4, 8, 16, 32]}"},
	{"pate-smooth-sensitivity", "/v1/pate/smooth-sensitivity", srv_pate_smooth_sensitivity,
	 "{\"votes\": [90, 5, 5], \"num_teachers\": 100, \"sigma\": 40, \"order\": 10, "
	 "\"beta\": 0.0329}"},
	{"label-em-guidance", "/v1/label-em/guidance", srv_label_em_guidance,
	 "{\"n\": 1000, \"epsilon\": 1, \"sensitivity\": 1, \"ks\": [0, 1, 2]}"},
};

/* Printed with the command's name, route, example body and name again. */
static const char usage_stateless[] =
	"usage: dpgate %s [--delta X] [--epsilon X] [--accountant NAME] [--neighbor add_remove|replace] [FILE|-]\n"
	"\n"
	"Reads the JSON body of POST %s from FILE or stdin (default),\n"
	"fills missing keys from the options, and prints the route's JSON answer.\n"
	"\n"
	"Example (a complete body):\n"
	"  %s\n"
	"in a file body.json: dpgate %s body.json\n"
	"\n"
	"Exit status: 0 answered, 1 the event cannot be priced (422), 2 bad input.\n";

static const char usage_verify[] =
	"usage: dpgate verify --db FILE\n"
	"\n"
	"Recomputes every dataset's spent and reserved totals from its ledger rows and\n"
	"compares them with the stored running totals, and replays its budget history\n"
	"(creation, each raise and lower) to check every admission against the budget\n"
	"in force at its row. Prints a JSON report; exit 0 when all agree and no\n"
	"admission was over its budget, 1 otherwise, 2 on errors (among\n"
	"them: FILE is not a dpgate database, or its schema version is not this\n"
	"dpgate's). Read-only: it never writes FILE, and works while a server runs.\n";

static const char usage_backup[] =
	"usage: dpgate backup --db FILE --to OUT\n"
	"\n"
	"Writes a consistent copy of the dpgate database FILE to the new file OUT,\n"
	"also while a server runs on FILE: the copy holds every transaction committed\n"
	"before it began (every charge already answered) and none after. OUT must not\n"
	"exist; the copy is written beside it under a temporary name (mode 0600),\n"
	"synced, replayed as `dpgate verify` does, and only then named OUT. Table\n"
	"files in the server's data directory are not copied. Prints a JSON report;\n"
	"exit 0 when the copy is in place and its ledger verifies (or its schema is\n"
	"another dpgate version's, which this one does not replay), 1 when it is in\n"
	"place but its ledger does not verify (the source's would not either), 2 on\n"
	"errors, when nothing is left behind.\n";

static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

static int make_dir(const char *dir)
{
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	fprintf(stderr, "dpgate: cannot create %s: %s\n", dir, strerror(errno));
	return -1;
}

static int open_store(const char *db_path, unsigned pool, srv_store **ret)
{
	char errbuf[512];

	if (srv_store_open(db_path, pool, ret, errbuf, sizeof(errbuf)) < 0) {
		fprintf(stderr, "dpgate: %s\n", errbuf);
		return -1;
	}
	return 0;
}

/* Commands that only read or change an existing ledger must not create an
 * empty one at a mistyped path (and then report on it). */
static bool database_exists(const char *cmd, const char *db_path)
{
	struct stat st;

	if (stat(db_path, &st) == 0 && S_ISREG(st.st_mode))
		return true;
	fprintf(stderr, "dpgate %s: no database at %s\n", cmd, db_path);
	return false;
}

/* Refuses positional arguments left after the options (getopt moved them to
 * argv[first..argc)): prints the usage on stderr.  Returns true when there
 * were none. */
static bool no_stray_arguments(const char *cmd, int first, int argc, char **argv,
			       const char *usage)
{
	if (first >= argc)
		return true;
	fprintf(stderr, "dpgate %s: unexpected argument '%s'\n%s", cmd, argv[first], usage);
	return false;
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
 * keeps open while it serves, with the file's hard link count in *ret_links
 * (may be NULL), or -1 after a message on stderr (another server holds the
 * lock, or the file cannot be opened).
 */
static int serve_lock(const char *path, bool directory, const char *what, long long *ret_links)
{
	struct stat st;
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
	if (ret_links)
		*ret_links = fstat(fd, &st) == 0 ? (long long)st.st_nlink : 1;
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

/* cmd_serve after the lock: opens the store, starts the job workers and
 * serves until a signal, on a copy of `settings` (data_dir, access_log).
 * Returns the exit status. */
static int serve_locked(const srv_ctx *settings, const char *db, const char *host, unsigned port,
			unsigned threads)
{
	srv_ctx ctx = *settings;
	int rc = 1;

	if (open_store(db, threads + 2, &ctx.store) < 0)
		return 1;
	{
		char errbuf[256];

		/* Not fatal: without it commits only pay more until the WAL
		 * has grown to this size by itself. */
		if (srv_store_preallocate_wal(ctx.store, errbuf, sizeof(errbuf)) < 0)
			log_event("warn", "WAL file not written out", errbuf, -1);
	}
	if (!realpath(db, ctx.db_path))
		snprintf(ctx.db_path, sizeof(ctx.db_path), "%s", db);
	ctx.route_metrics = calloc(srv_routes_count + 1, sizeof(srv_route_metrics));
	ctx.auth_cache = srv_auth_cache_new(db);
	ctx.tables = srv_table_cache_new(DPG_TABLE_CACHE_BYTES);
	if (!ctx.route_metrics || !ctx.auth_cache || !ctx.tables)
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
	{
		char errbuf[256];

		if (srv_jobs_start(&ctx, DPG_MAX_JOB_WORKERS, &ctx.jobs, errbuf, sizeof(errbuf)) < 0) {
			fprintf(stderr, "dpgate: %s\n", errbuf);
			goto out;
		}
	}
	rc = srv_http_serve(&ctx, host, port, threads);
	srv_jobs_stop(ctx.jobs);
out:
	srv_store_close(ctx.store);
	srv_auth_cache_free(ctx.auth_cache);
	/* After the HTTP threads and the job workers: no reference is left. */
	srv_table_cache_free(ctx.tables);
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

static int cmd_serve(int argc, char **argv)
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
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *db = NULL, *listen = DEFAULT_LISTEN, *data_dir = DEFAULT_DATA_DIR;
	unsigned threads = DEFAULT_THREADS, port;
	unsigned body_timeout_s = DEFAULT_BODY_TIMEOUT_S, header_timeout_s = DPG_HEADER_TIMEOUT_S;
	unsigned max_conns_per_ip = DPG_MAX_CONNECTIONS_PER_IP;
	bool public_metrics = false;
	char host[64], dbbuf[4096];
	const char *colon;
	srv_ctx ctx;
	int c, rc, lock_fd, dir_lock_fd;
	long long links = 1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db = optarg; break;
		case 'l': listen = optarg; break;
		case 'D': data_dir = optarg; break;
		case 't':
			if (!count_option(optarg, 1, 64, &threads)) {
				fprintf(stderr, "dpgate serve: --threads must be 1..64\n");
				return 2;
			}
			break;
		case 'T':
			if (!count_option(optarg, 1, MAX_BODY_TIMEOUT_S, &body_timeout_s)) {
				fprintf(stderr, "dpgate serve: --body-timeout must be 1..%d seconds\n",
					MAX_BODY_TIMEOUT_S);
				return 2;
			}
			break;
		case 'H':
			if (!count_option(optarg, 1, MAX_HEADER_TIMEOUT_S, &header_timeout_s)) {
				fprintf(stderr, "dpgate serve: --header-timeout must be 1..%d seconds\n",
					MAX_HEADER_TIMEOUT_S);
				return 2;
			}
			break;
		case 'P':
			if (!count_option(optarg, 1, DPG_MAX_CONNECTIONS, &max_conns_per_ip)) {
				fprintf(stderr, "dpgate serve: --max-conns-per-ip must be 1..%d\n",
					DPG_MAX_CONNECTIONS);
				return 2;
			}
			break;
		case 'M': public_metrics = true; break;
		case 'q': break;
		case 'h': fputs(usage_serve, stdout); return 0;
		default: fputs(usage_serve, stderr); return 2;
		}
	}
	if (!no_stray_arguments("serve", optind, argc, argv, usage_serve))
		return 2;
	colon = strrchr(listen, ':');
	if (!colon || (size_t)(colon - listen) >= sizeof(host)) {
		fprintf(stderr, "dpgate serve: --listen must be HOST:PORT\n");
		return 2;
	}
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	{
		char *end;
		long p = strtol(colon + 1, &end, 10);

		if (*end || p < 0 || p > 65535) {
			fprintf(stderr, "dpgate serve: bad port in --listen\n");
			return 2;
		}
		port = (unsigned)p;
	}
	if (make_dir(data_dir) < 0)
		return 1;
	if (!db) {
		snprintf(dbbuf, sizeof(dbbuf), "%s/dpgate.db", data_dir);
		db = dbbuf;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.access_log = true;
	ctx.body_timeout_s = body_timeout_s;
	ctx.header_timeout_s = header_timeout_s;
	ctx.max_conns_per_ip = max_conns_per_ip;
	ctx.public_metrics = public_metrics;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--quiet") == 0)
			ctx.access_log = false;
	if (!realpath(data_dir, ctx.data_dir))
		snprintf(ctx.data_dir, sizeof(ctx.data_dir), "%s", data_dir);
	/* Before the store opens: migrations and the restart rule (jobs left
	 * running are marked failed) are for the one server of a database, and
	 * the start-up sweep of the data directory removes table files that its
	 * own database does not name, so a directory has one server too. */
	lock_fd = serve_lock(db, false, "database", &links);
	if (lock_fd < 0)
		return 1;
	/* SQLite names the WAL after the path it was given: a command run on
	 * another hard link of this file (`dpgate keys`) would use a WAL of its
	 * own, and neither side would see the other's commits. */
	if (links > 1)
		log_event("warn",
			  "the database file has other hard links; give every dpgate command this "
			  "path", db, links);
	dir_lock_fd = serve_lock(ctx.data_dir, true, "data directory", NULL);
	if (dir_lock_fd < 0) {
		close(lock_fd);
		return 1;
	}
	rc = serve_locked(&ctx, db, host, port, threads);
	close(dir_lock_fd);
	close(lock_fd);
	return rc;
}

/* Who runs a `dpgate keys` command, as the key audit rows name it:
 * "cli:<login name>", or "cli:uid=<n>" when the uid has no passwd entry. */
static void cli_actor(char *buf, size_t size)
{
	struct passwd *pw = getpwuid(geteuid());

	if (pw && pw->pw_name && pw->pw_name[0])
		snprintf(buf, size, "cli:%s", pw->pw_name);
	else
		snprintf(buf, size, "cli:uid=%lu", (unsigned long)geteuid());
}

static int cmd_keys(int argc, char **argv)
{
	static const struct option opts[] = {
		{"db", required_argument, NULL, 'd'},
		{"role", required_argument, NULL, 'r'},
		{"datasets", required_argument, NULL, 's'},
		{"note", required_argument, NULL, 'n'},
		{"if-none", no_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *db_path = NULL, *role_name = NULL, *datasets = NULL, *note = NULL, *sub;
	bool if_none = false;
	srv_store *store = NULL;
	srv_db *db = NULL;
	json_t *scope = NULL;
	srv_role role = SRV_ROLE_NONE;
	char actor[SRV_ACTOR_BYTES];
	int c, rc = 2;

	if (argc < 2 || wants_help(argc, argv)) {
		fputs(usage_keys, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	sub = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db_path = optarg; break;
		case 'r': role_name = optarg; break;
		case 's': datasets = optarg; break;
		case 'n': note = optarg; break;
		case 'i': if_none = true; break;
		default: fputs(usage_keys, stderr); return 2;
		}
	}
	if (!db_path) {
		fprintf(stderr, "dpgate keys: --db FILE is required\n");
		return 2;
	}
	if (strcmp(sub, "create") != 0 && strcmp(sub, "list") != 0 && strcmp(sub, "revoke") != 0) {
		fputs(usage_keys, stderr);
		return 2;
	}
	/* revoke takes KEY_ID; nothing else takes a positional argument. */
	if (!no_stray_arguments("keys", optind + (strcmp(sub, "revoke") == 0), argc, argv,
				usage_keys))
		return 2;
	if (strcmp(sub, "create") == 0) {
		acct_error err;

		if (!role_name || srv_role_from_name(role_name, &role) < 0) {
			fprintf(stderr, "dpgate keys create: --role must be admin, analyst or viewer\n");
			goto out;
		}
		/* No --datasets is no scope at all, as an absent "datasets". */
		if (datasets) {
			char *copy = strdup(datasets), *save = NULL;

			scope = json_array();
			if (!copy || !scope) {
				free(copy);
				rc = 1;
				goto out;
			}
			for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
				json_array_append_new(scope, json_string(t));
			free(copy);
		}
		/* POST /v1/keys's checks, before the database is opened or made. */
		acct_error_init(&err);
		if (srv_keys_check(role, scope, note, &err) < 0) {
			fprintf(stderr, "dpgate keys create: %s: %s\n",
				strcmp(err.where, "/note") == 0 ? "--note" : "--datasets", err.text);
			goto out;
		}
	}
	if (strcmp(sub, "create") != 0 && !database_exists("keys", db_path))
		return 2;
	if (open_store(db_path, 1, &store) < 0) {
		rc = 1;
		goto out;
	}
	db = srv_store_acquire(store);
	cli_actor(actor, sizeof(actor));
	if (strcmp(sub, "create") == 0) {
		char key_text[SRV_KEY_TEXT_BYTES], key_id[2 * SRV_KEY_ID_BYTES + 1];
		int64_t existing = 0;
		int made;

		if (if_none && srv_keys_count(db, role, &existing) == SRV_OK && existing > 0) {
			fprintf(stderr, "dpgate keys: a %s key exists already; none created\n", role_name);
			rc = 0;
			goto out;
		}
		made = srv_keys_create(db, role, scope, note, actor, key_text, key_id);
		if (made != SRV_OK) {
			fprintf(stderr, "dpgate keys create: %s\n",
				made == SRV_NO_RANDOM ? "no secure randomness is available" :
							"cannot write the key");
			rc = 1;
			goto out;
		}
		fprintf(stderr, "dpgate: created %s key %s; it is shown once:\n", role_name, key_id);
		printf("%s\n", key_text);
		sodium_memzero(key_text, sizeof(key_text));
		rc = 0;
	} else if (strcmp(sub, "list") == 0) {
		json_t *arr = NULL;

		if (srv_keys_list(db, &arr) != SRV_OK) {
			rc = 1;
			goto out;
		}
		json_dumpf(arr, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(arr);
		rc = 0;
	} else if (strcmp(sub, "revoke") == 0) {
		if (optind >= argc) {
			fprintf(stderr, "dpgate keys revoke: KEY_ID is required\n");
			goto out;
		}
		rc = srv_keys_revoke(db, argv[optind], actor);
		if (rc == SRV_NOT_FOUND) {
			fprintf(stderr, "dpgate keys revoke: no such key\n");
		} else if (rc == SRV_OK) {
			/* Running servers flush their key caches on this. */
			if (srv_keys_touch_stamp(db_path) < 0)
				fprintf(stderr, "dpgate keys revoke: cannot write %s-keys; restart running "
						"servers for the revocation to take effect\n", db_path);
			printf("revoked %s\n", argv[optind]);
		}
		rc = rc == SRV_OK ? 0 : 1;
	} else {
		fputs(usage_keys, stderr);
	}
out:
	json_decref(scope);
	srv_store_release(store, db);
	srv_store_close(store);
	return rc;
}

static json_t *read_json_input(const char *path, acct_error *err)
{
	FILE *f = (!path || strcmp(path, "-") == 0) ? stdin : fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *j = NULL;

	if (!f) {
		acct_error_set(err, ACCT_EINVAL, "", "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t n;

		if (len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			if (cap > DPG_MAX_BODY_BYTES + 8192) {
				acct_error_set(err, ACCT_EINVAL, "", "input larger than %u bytes",
					       DPG_MAX_BODY_BYTES);
				goto out;
			}
			nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	j = srv_parse_body(buf ? buf : "", len, err);
out:
	if (f != stdin)
		fclose(f);
	free(buf);
	return j;
}

/*
 * Reads the number option `--option` of command `cmd` into a new JSON real:
 * the whole text must be a finite decimal (strtod syntax, no hex or
 * infinities).  Returns the JSON value, or NULL after a message on stderr;
 * the route's own checks judge the range.
 */
static json_t *number_option(const char *cmd, const char *option, const char *text)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(text, &end);
	if (end == text || *end != '\0' || !isfinite(x) || errno == ERANGE ||
	    strpbrk(text, "xX") != NULL) {
		fprintf(stderr, "dpgate %s: --%s must be a finite number, not '%s'\n", cmd, option,
			text);
		return NULL;
	}
	return json_real(x);
}

static void print_stateless_usage(FILE *f, const struct stateless_cmd *cmd)
{
	fprintf(f, usage_stateless, cmd->name, cmd->route, cmd->example, cmd->name);
}

static int cmd_stateless(const struct stateless_cmd *cmd, int argc, char **argv)
{
	const char *name = cmd->name;
	static const struct option opts[] = {
		{"delta", required_argument, NULL, 'd'},
		{"epsilon", required_argument, NULL, 'e'},
		{"accountant", required_argument, NULL, 'a'},
		{"neighbor", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *accountant = NULL, *neighbor = NULL;
	acct_error err;
	json_t *body = NULL, *answer = NULL, *delta = NULL, *epsilon = NULL;
	int c, rc = 2;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			json_decref(delta);
			if (!(delta = number_option(name, "delta", optarg)))
				goto out;
			break;
		case 'e':
			json_decref(epsilon);
			if (!(epsilon = number_option(name, "epsilon", optarg)))
				goto out;
			break;
		case 'a': accountant = optarg; break;
		case 'n': neighbor = optarg; break;
		case 'h': print_stateless_usage(stdout, cmd); rc = 0; goto out;
		default: print_stateless_usage(stderr, cmd); goto out;
		}
	}
	/* At most one FILE. */
	if (optind + 1 < argc) {
		fprintf(stderr, "dpgate %s: unexpected argument '%s'\n", name, argv[optind + 1]);
		print_stateless_usage(stderr, cmd);
		goto out;
	}
	acct_error_init(&err);
	body = read_json_input(optind < argc ? argv[optind] : NULL, &err);
	if (!body) {
		fprintf(stderr, "dpgate %s: %s%s%s\n", name, err.text, err.where[0] ? " at " : "",
			err.where);
		goto out;
	}
	/* Options fill in missing keys; numbers are passed as JSON numbers. */
	if (delta && !json_object_get(body, "delta"))
		json_object_set(body, "delta", delta);
	if (epsilon && !json_object_get(body, "epsilon"))
		json_object_set(body, "epsilon", epsilon);
	if (accountant && !json_object_get(body, "accountant"))
		json_object_set_new(body, "accountant", json_string(accountant));
	if (neighbor && !json_object_get(body, "neighbor"))
		json_object_set_new(body, "neighbor", json_string(neighbor));
	rc = cmd->fn(body, &answer, &err);
	if (rc < 0 || !answer) {
		fprintf(stderr, "dpgate %s: %s%s%s\n", name, err.text, err.where[0] ? " at " : "",
			err.where);
		rc = err.code == ACCT_EINVAL ? 2 : 1;
		goto out;
	}
	{
		char *text = srv_json_dump(answer);

		if (text)
			printf("%s\n", text);
		free(text);
	}
	rc = 0;
out:
	json_decref(answer);
	json_decref(body);
	json_decref(delta);
	json_decref(epsilon);
	return rc;
}

/*
 * Replays the ledger of the dpgate database at path (srv_store_verify, on a
 * read-only store): SRV_OK or SRV_CONFLICT with the report in *ret_report,
 * or -1 after a message on stderr naming cmd.
 */
static int verify_file(const char *cmd, const char *path, json_t **ret_report)
{
	srv_store *store = NULL;
	char errbuf[512];
	srv_db *db;
	int rc;

	if (srv_store_open_read_only(path, &store, errbuf, sizeof(errbuf)) < 0) {
		fprintf(stderr, "dpgate %s: %s\n", cmd, errbuf);
		return -1;
	}
	db = srv_store_acquire(store);
	rc = srv_store_verify(db, ret_report);
	srv_store_release(store, db);
	srv_store_close(store);
	if (rc == SRV_DB_ERROR) {
		fprintf(stderr, "dpgate %s: cannot read the ledger of %s\n", cmd, path);
		return -1;
	}
	return rc;
}

static int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{"db", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *db_path = NULL;
	json_t *report = NULL;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db_path = optarg; break;
		case 'h': fputs(usage_verify, stdout); return 0;
		default: fputs(usage_verify, stderr); return 2;
		}
	}
	if (!db_path || !no_stray_arguments("verify", optind, argc, argv, usage_verify)) {
		if (!db_path)
			fputs(usage_verify, stderr);
		return 2;
	}
	/* Read-only: no migration, nothing created, no checkpoint. */
	if (!database_exists("verify", db_path))
		return 2;
	rc = verify_file("verify", db_path, &report);
	if (rc < 0)
		return 2;
	json_dumpf(report, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	printf("\n");
	json_decref(report);
	return rc == SRV_OK ? 0 : 1;
}

/* The directory part of path ("." when it has none), in buf. */
static void dir_of(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, size, ".");
	else if (slash == path)
		snprintf(buf, size, "/");
	else
		snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

/*
 * Gives the finished copy tmp the name out without ever replacing a file
 * that appeared there meanwhile: renameat2 with RENAME_NOREPLACE, or, where
 * the filesystem lacks it, a hard link (which fails on an existing name)
 * and the temporary name removed.  0, or -1 with errno set.
 */
static int name_without_replacing(const char *tmp, const char *out)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(tmp, out) < 0)
		return -1;
	unlink(tmp);
	return 0;
}

static int cmd_backup(int argc, char **argv)
{
	static const struct option opts[] = {
		{"db", required_argument, NULL, 'd'},
		{"to", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *db_path = NULL, *out_path = NULL, *base;
	char dir[PATH_MAX], tmp[PATH_MAX + 64], errbuf[512];
	json_t *report = NULL, *out = NULL;
	struct stat st;
	int64_t version = 0;
	bool current = false;
	int c, fd = -1, rc = 2, vrc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db_path = optarg; break;
		case 't': out_path = optarg; break;
		case 'h': fputs(usage_backup, stdout); return 0;
		default: fputs(usage_backup, stderr); return 2;
		}
	}
	if (!db_path || !out_path || !no_stray_arguments("backup", optind, argc, argv, usage_backup)) {
		if (!db_path || !out_path)
			fputs(usage_backup, stderr);
		return 2;
	}
	if (!database_exists("backup", db_path))
		return 2;
	if (lstat(out_path, &st) == 0) {
		fprintf(stderr, "dpgate backup: %s exists; a backup never replaces a file\n",
			out_path);
		return 2;
	}
	if (errno != ENOENT) {
		fprintf(stderr, "dpgate backup: %s: %s\n", out_path, strerror(errno));
		return 2;
	}
	base = strrchr(out_path, '/') ? strrchr(out_path, '/') + 1 : out_path;
	if (!*base || strlen(out_path) >= sizeof(dir)) {
		fprintf(stderr, "dpgate backup: --to must name a file\n");
		return 2;
	}
	dir_of(out_path, dir, sizeof(dir));
	snprintf(tmp, sizeof(tmp), "%s/.%s.partial-XXXXXX", dir, base);
	fd = mkstemp(tmp); /* mode 0600: the copy holds the ledger and key hashes */
	if (fd < 0) {
		fprintf(stderr, "dpgate backup: cannot create a file in %s: %s\n", dir,
			strerror(errno));
		return 2;
	}
	if (srv_store_backup(db_path, tmp, &version, &current, errbuf, sizeof(errbuf)) < 0) {
		fprintf(stderr, "dpgate backup: %s\n", errbuf);
		goto out;
	}
	if (fsync(fd) < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "dpgate backup: cannot sync %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	if (current) {
		/* The copy is a plain (rollback-journal) file: opened read-only
		 * it gains no side files. */
		vrc = verify_file("backup", tmp, &report);
		if (vrc < 0)
			goto out;
		out = json_pack("{s:s, s:s, s:I, s:I, s:o}", "backup", out_path, "source", db_path,
				"bytes", (json_int_t)st.st_size, "schema_version",
				(json_int_t)version, "verify", report);
	} else {
		/* Another dpgate version's schema (a backup before an upgrade):
		 * copied as it is, not replayed by this binary. */
		vrc = SRV_OK;
		snprintf(errbuf, sizeof(errbuf),
			 "schema version %lld is not this dpgate's (%ld): copied, not replayed",
			 (long long)version, srv_store_known_schema_version());
		out = json_pack("{s:s, s:s, s:I, s:I, s:n, s:s}", "backup", out_path, "source",
				db_path, "bytes", (json_int_t)st.st_size, "schema_version",
				(json_int_t)version, "verify", "note", errbuf);
	}
	if (!out) {
		fprintf(stderr, "dpgate backup: out of memory\n");
		goto out;
	}
	if (name_without_replacing(tmp, out_path) < 0) {
		fprintf(stderr, "dpgate backup: cannot name the copy %s: %s\n", out_path,
			errno == EEXIST ? "a file of that name appeared meanwhile" : strerror(errno));
		goto out;
	}
	tmp[0] = '\0'; /* named: nothing to remove */
	if (srv_fsync_dir(dir) < 0) {
		/* The name may not survive a crash: no copy rather than one
		 * that might vanish. */
		fprintf(stderr, "dpgate backup: cannot sync %s: %s\n", dir, strerror(errno));
		unlink(out_path);
		goto out;
	}
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	printf("\n");
	rc = vrc == SRV_OK ? 0 : 1;
out:
	if (fd >= 0)
		close(fd);
	if (rc == 2 && tmp[0])
		unlink(tmp);
	json_decref(out);
	return rc;
}

static int cmd_routes(int argc, char **argv)
{
	if (argc > 1) {
		bool help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;

		fputs("usage: dpgate routes\n\nPrints every HTTP route, one \"METHOD pattern\" a line,"
		      " as the\nserver's router holds them (the OpenAPI spec lists the same).\n",
		      help ? stdout : stderr);
		return help ? 0 : 2;
	}
	for (size_t i = 0; i < srv_routes_count; i++)
		printf("%s %s\n", srv_routes[i].method, srv_routes[i].pattern);
	return 0;
}

/* "dpgate " and a command name of up to 48 bytes. */
#define PROG_NAME_BYTES 64

/* The commands other than the stateless ones, by name. */
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"serve", cmd_serve},
	{"keys", cmd_keys},
	{"check", srv_check_main},
	{"verify", cmd_verify},
	{"backup", cmd_backup},
	{"routes", cmd_routes},
};

/*
 * Runs command `cmd` with its arguments argv[1..argc).  argv[0] is set to
 * `prog`, the caller's buffer of PROG_NAME_BYTES, which then holds "dpgate
 * CMD": getopt's own messages ("unrecognized option") start with argv[0],
 * and so every error of a command starts with "dpgate CMD:".  Returns the
 * command's exit status, or -1 when there is no such command.
 */
static int run_command(const char *cmd, int argc, char **argv, char *prog)
{
	snprintf(prog, PROG_NAME_BYTES, "dpgate %.48s", cmd);
	argv[0] = prog;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(cmd, commands[i].name) == 0)
			return commands[i].run(argc, argv);
	for (size_t i = 0; i < sizeof(stateless_cmds) / sizeof(stateless_cmds[0]); i++)
		if (strcmp(cmd, stateless_cmds[i].name) == 0)
			return cmd_stateless(&stateless_cmds[i], argc, argv);
	return -1;
}

int main(int argc, char **argv)
{
	const char *cmd;
	char prog[PROG_NAME_BYTES];
	int rc;

	acct_gsl_quiet();
	/* Job workers run in parallel; one BLAS thread each keeps the two
	 * cores from being oversubscribed. */
	openblas_set_num_threads(1);
	/* SQLite's allocation statistics take a global mutex on every
	 * allocation; nothing here reads them (sqlite3_memory_used and the soft
	 * heap limit are unused).  Off, a one-client charge ran 2-5% faster.
	 * Must precede SQLite's initialisation, hence first thing. */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	if (sodium_init() < 0) {
		fprintf(stderr, "dpgate: libsodium failed to initialise\n");
		return 1;
	}
	if (argc < 2) {
		fputs(usage_top, stderr);
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
	    (strcmp(cmd, "help") == 0 && argc == 2)) {
		fputs(usage_top, stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("dpgate 0.1.0\n");
		return 0;
	}
	/* `dpgate help CMD` is `dpgate CMD --help`. */
	if (strcmp(cmd, "help") == 0) {
		char *help_argv[] = {argv[2], "--help", NULL};

		if (argc > 3) {
			fprintf(stderr, "dpgate help: one command at a time\n");
			return 2;
		}
		rc = run_command(argv[2], 2, help_argv, prog);
		if (rc < 0)
			fprintf(stderr, "dpgate help: unknown command '%s'\n\n%s", argv[2], usage_top);
		return rc < 0 ? 2 : rc;
	}
	rc = run_command(cmd, argc - 1, argv + 1, prog);
	if (rc < 0)
		fprintf(stderr, "dpgate: unknown command '%s'\n\n%s", cmd, usage_top);
	return rc < 0 ? 2 : rc;
}
