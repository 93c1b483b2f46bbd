/*
 * harness.c: see harness.h.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "harness.h"
#include "mech.h"

/* How long a server just started may take to answer /healthz with 200. */
#define HEALTHZ_AT_START_S 5.0

const char *dpg_bin(void)
{
	const char *b = getenv("DPGATE_BIN");

	cr_assert(b && *b, "DPGATE_BIN must name the dpgate binary");
	return b;
}

int dpg_run(char *out, size_t out_size, const char *const *argv)
{
	return dpg_run_with(out, out_size, argv, NULL);
}

int dpg_run_with(char *out, size_t out_size, const char *const *argv, void (*setup)(void))
{
	int pipefd[2];
	pid_t pid;
	size_t n = 0;
	int status = 0;

	cr_assert_eq(pipe(pipefd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		close(pipefd[1]);
		if (setup)
			setup();
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		char drop[4096];
		/* Past the buffer the rest is read and dropped: closing the pipe
		 * early would kill the child with SIGPIPE. */
		ssize_t r = n < out_size - 1 ? read(pipefd[0], out + n, out_size - 1 - n)
					     : read(pipefd[0], drop, sizeof(drop));

		if (r <= 0)
			break;
		if (n < out_size - 1)
			n += (size_t)r;
	}
	out[n] = '\0';
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void dpg_assert_in_spec(const dpg_server *s, const char *method, const char *spec_path,
			const char *status, const char *media, const char *body)
{
	const char *root = getenv("DPGATE_SOURCE_ROOT");
	char script[512], spec[512], file[400], out[4096];
	FILE *f;
	int fd, rc;

	cr_assert_not_null(root);
	snprintf(script, sizeof(script), "%s/tests/server/check_response.py", root);
	snprintf(spec, sizeof(spec), "%s/openapi/openapi.yaml", root);
	snprintf(file, sizeof(file), "%s/body-XXXXXX", s->dir);
	fd = mkstemp(file);
	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fputs(body, f) >= 0 && fclose(f) == 0, true);
	{
		const char *argv[] = {"/usr/bin/env", "python3", script, spec, method, spec_path,
				      status, media, file, NULL};

		rc = dpg_run(out, sizeof(out), argv);
	}
	if (rc == 77)
		cr_skip_test("%s", out);
	cr_assert_eq(rc, 0, "%s %s %s: the body does not fit the spec:\n%s\n%s", method, spec_path,
		     status, out, body);
}

static void last_line(char *s)
{
	size_t n = strlen(s);
	char *p;

	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	p = strrchr(s, '\n');
	if (p)
		memmove(s, p + 1, strlen(p + 1) + 1);
}

const char dpg_fm_small_job[] =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"epochs\":1,\"lot_size\":600,"
	"\"noise_multiplier\":1.1,\"clip_norm\":1,\"learning_rate\":0.5,\"max_train_examples\":6000}}";
const char dpg_fm_long_job[] =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"mlp\",\"hidden\":256,\"epochs\":50,"
	"\"lot_size\":100,\"noise_multiplier\":4,\"clip_norm\":1,\"learning_rate\":0.1}}";

void dpg_move_database(const dpg_server *s, const char *from, const char *to)
{
	static const char *const sides[] = {"", "-wal", "-shm"};

	for (size_t i = 0; i < 3; i++) {
		char a[400], b[400];

		snprintf(a, sizeof(a), "%s%s", *from ? from : s->db, sides[i]);
		snprintf(b, sizeof(b), "%s%s", *to ? to : s->db, sides[i]);
		cr_assert_eq(rename(a, b), 0, "rename %s %s", a, b);
	}
}

void dpg_make_key(const dpg_server *s, const char *role, const char *datasets, char *key,
		  size_t key_size)
{
	char out[4096];
	const char *argv[] = {dpg_bin(), "keys", "create", "--db", s->db, "--role", role,
			      datasets ? "--datasets" : NULL, datasets, NULL};

	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "keys create failed");
	last_line(out);
	cr_assert_eq(strncmp(out, "dpg_", 4), 0, "unexpected key text: %s", out);
	snprintf(key, key_size, "%s", out);
}

static void spawn(dpg_server *s)
{
	char listen[64];
	char data[300], threads[16];
	FILE *f;

	snprintf(listen, sizeof(listen), "127.0.0.1:0");
	snprintf(threads, sizeof(threads), "%u", s->threads ? s->threads : 8);
	snprintf(data, sizeof(data), "%s/data", s->dir);
	if (truncate(s->log, 0) < 0 && errno != ENOENT)
		cr_assert_fail("cannot truncate %s", s->log);
	s->pid = fork();
	cr_assert_geq(s->pid, 0);
	if (s->pid == 0) {
		int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		/* The server ends with the test process, even when a failed
		 * assertion skips the test's own teardown. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);

		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		for (const char *const *e = s->env; e && *e; e++)
			putenv((char *)*e);
		{
			const char *argv[24] = {dpg_bin(), "serve", "--db", s->db, "--listen", listen,
						"--data-dir", data, "--threads", threads};
			int n = 10;

			if (s->body_timeout_s) {
				argv[n++] = "--body-timeout";
				argv[n++] = s->body_timeout_s;
			}
			for (const char *const *a = s->serve_args; a && *a && n < 23; a++)
				argv[n++] = *a;
			argv[n] = NULL;
			execv(dpg_bin(), (char *const *)argv);
		}
		_exit(127);
	}
	/* The server logs its URL once it listens. */
	s->port = 0;
	for (int i = 0; i < 500 && s->port == 0; i++) {
		char line[1024];

		usleep(10000);
		f = fopen(s->log, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char *u = strstr(line, "\"url\":\"http://127.0.0.1:");

			if (u)
				s->port = atoi(u + strlen("\"url\":\"http://127.0.0.1:"));
		}
		fclose(f);
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
			cr_assert_fail("dpgate serve exited early; see %s", s->log);
	}
	cr_assert_gt(s->port, 0, "dpgate serve did not start; see %s", s->log);
	cr_assert(dpg_healthy_within(s, HEALTHZ_AT_START_S), "dpgate serve did not answer /healthz");
}

bool dpg_healthy_within(const dpg_server *s, double timeout_s)
{
	double deadline = dpg_now_s() + timeout_s;

	do {
		dpg_resp r = {0};
		bool ok = dpg_http(s, "GET", "/healthz", NULL, NULL, 0, NULL, &r) == 0 &&
			  r.status == 200;

		dpg_resp_free(&r);
		if (ok)
			return true;
		usleep(10000);
	} while (dpg_now_s() < deadline);
	return false;
}

void dpg_server_start(dpg_server *s)
{
	dpg_server_start_env(s, NULL);
}

void dpg_server_start_env(dpg_server *s, const char *const *env)
{
	dpg_server_start_with(s, env, 0);
}

const char *dpg_test_pg(void)
{
	const char *url = getenv("DPGATE_TEST_DB");

	return url && (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0) ?
		       url :
		       NULL;
}

void dpg_skip_on_pg(const char *why)
{
	if (dpg_test_pg())
		cr_skip_test("on PostgreSQL: %s", why);
}

/* Runs one statement on the PostgreSQL database at url; fails the test
 * when it fails. */
static void pg_run_sql(const char *url, const char *sql)
{
	PGconn *c = PQconnectdb(url);
	PGresult *r;

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "cannot connect to %s: %s", url,
		     PQerrorMessage(c));
	r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* url, with its database (the path after the host) replaced by name. */
static void pg_url_with_database(const char *url, const char *name, char *out, size_t size)
{
	const char *host = strstr(url, "://") + 3;
	const char *slash = strchr(host, '/');
	const char *query = strchr(host, '?');
	int head = (int)((slash ? slash : query ? query : host + strlen(host)) - url);

	snprintf(out, size, "%.*s/%s%s", head, url, name, query ? query : "");
}

void dpg_new_database(char *out, size_t size)
{
	static unsigned made;
	char name[64], sql[128];

	snprintf(name, sizeof(name), "dpgt_%ld_%u_%ld", (long)getpid(), made++, (long)time(NULL));
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	pg_run_sql(dpg_test_pg(), sql);
	pg_url_with_database(dpg_test_pg(), name, out, size);
}

/* Drops the database a PostgreSQL test server ran on. */
static void drop_test_database(const char *url)
{
	const char *name = strrchr(url, '/') + 1;
	char sql[160];

	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %.*s WITH (FORCE)",
		 (int)strcspn(name, "?"), name);
	pg_run_sql(dpg_test_pg(), sql);
}

void dpg_server_start_on(dpg_server *s, const char *db)
{
	dpg_server_start_on_with(s, db, NULL, NULL);
}

void dpg_server_start_on_with(dpg_server *s, const char *db, const char *const *env,
			      const char *const *serve_args)
{
	memset(s, 0, sizeof(*s));
	s->env = env;
	s->serve_args = serve_args;
	snprintf(s->dir, sizeof(s->dir), "/tmp/dpgate-test-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	cr_assert_lt((size_t)snprintf(s->db, sizeof(s->db), "%s", db), sizeof(s->db));
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	dpg_make_key(s, "admin", NULL, s->admin_key, sizeof(s->admin_key));
	spawn(s);
}

void dpg_server_start_with(dpg_server *s, const char *const *env, unsigned threads)
{
	memset(s, 0, sizeof(*s));
	s->env = env;
	s->threads = threads;
	snprintf(s->dir, sizeof(s->dir), "/tmp/dpgate-test-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	if (dpg_test_pg())
		dpg_new_database(s->db, sizeof(s->db));
	else
		snprintf(s->db, sizeof(s->db), "%s/test.db", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	dpg_make_key(s, "admin", NULL, s->admin_key, sizeof(s->admin_key));
	spawn(s);
}

double dpg_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void dpg_preload_init(dpg_preload *p, const char *shim)
{
	const char *asan = getenv("ASAN_OPTIONS");

	snprintf(p->preload, sizeof(p->preload), "LD_PRELOAD=%s", shim);
	snprintf(p->asan, sizeof(p->asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
		 asan ? asan : "", asan && *asan ? ":" : "");
}

void dpg_shim_server_start(dpg_server *srv, dpg_shim_env *e, const char *tag, const char *shim,
			   const dpg_shim_switch *switches, size_t n)
{
	size_t k = 0;

	cr_assert(n <= DPG_SHIM_MAX_SWITCHES);
	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "/tmp/dpgate-%s-XXXXXX", tag);
	cr_assert_not_null(mkdtemp(e->dir));
	dpg_preload_init(&e->preload, shim);
	e->env[k++] = e->preload.preload;
	for (size_t i = 0; i < n; i++) {
		snprintf(e->file[i], sizeof(e->file[i]), "%s/%s", e->dir, switches[i].name);
		snprintf(e->var[i], sizeof(e->var[i]), "%s=%s", switches[i].var, e->file[i]);
		e->env[k++] = e->var[i];
	}
	e->env[k++] = e->preload.asan;
	e->env[k] = NULL;
	dpg_server_start_env(srv, e->env);
}

void dpg_shim_server_stop(dpg_server *srv, dpg_shim_env *e)
{
	dpg_server_destroy(srv);
	for (size_t i = 0; i < DPG_SHIM_MAX_SWITCHES; i++)
		if (e->file[i][0])
			unlink(e->file[i]);
	rmdir(e->dir);
}

void dpg_server_restart(dpg_server *s)
{
	spawn(s);
}

/*
 * DPGATE_TEST_TIME_SCALE (a number from 1 to 100, default 1) is how much
 * slower a server built with a sanitizer is (ThreadSanitizer: 5-15 times).
 * Every time limit of an exchange or a wait stretches by it; what a test
 * asserts does not change.
 */
double dpg_time_scale(void)
{
	const char *v = getenv("DPGATE_TEST_TIME_SCALE");
	double k = v ? strtod(v, NULL) : 1.0;

	return k >= 1.0 && k <= 100.0 ? k : 1.0;
}

static long scaled_timeout(long seconds)
{
	return (long)((double)seconds * dpg_time_scale() + 0.5);
}

/* The stop's limit is scaled like an exchange's: a sanitizer's server
 * stops its running jobs as much slower as it runs them. */
int dpg_server_signal(dpg_server *s, int sig)
{
	int status = 0;
	long limit_s = scaled_timeout(30);

	if (s->pid <= 0)
		return -1;
	kill(s->pid, sig);
	for (long i = 0; i < limit_s * 100; i++) {
		pid_t r = waitpid(s->pid, &status, WNOHANG);

		if (r == s->pid) {
			s->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		usleep(10000);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &status, 0);
	s->pid = 0;
	cr_assert_fail("dpgate did not stop within %ld s after signal %d", limit_s, sig);
	return -1;
}

void dpg_server_destroy(dpg_server *s)
{
	char cmd[400];
	int status = 0;

	if (s->pid > 0)
		status = dpg_server_signal(s, SIGTERM);
	if (status != 0) {
		/* A graceful stop exits 0; anything else (a sanitizer report at
		 * exit, a crash during shutdown) fails the test.  The log stays. */
		fprintf(stderr, "dpgate exited with status %d after SIGTERM; its log:\n", status);
		snprintf(cmd, sizeof(cmd), "tail -n 60 '%s' >&2", s->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(could not show %s)\n", s->log);
		cr_assert_fail("dpgate exited with status %d after SIGTERM; see %s", status, s->log);
	}
	if (!getenv("DPGATE_KEEP_TEST_DIRS") && s->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", s->dir);
		if (dpg_test_pg() && strncmp(s->db, "postgres", 8) == 0)
			drop_test_database(s->db);
	}
}

struct sink {
	char *buf;
	size_t len, cap;
};

/* Grows the buffer by doubling: a realloc per 16 KiB chunk copied a 20 MB
 * answer some thousand times, which took a minute under ASan (whose
 * realloc always moves). */
static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	size_t n = size * nmemb;

	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		char *nb;

		while (cap < s->len + n + 1)
			cap *= 2;
		nb = realloc(s->buf, cap);
		if (!nb)
			return 0;
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, ptr, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

int dpg_http(const dpg_server *s, const char *method, const char *path, const char *key,
	     const char *body, size_t body_len, const char *const *headers, dpg_resp *ret)
{
	return dpg_http_opt(s, NULL, method, path, key, body, body_len, headers, ret);
}

int dpg_http_opt(const dpg_server *s, const dpg_http_opts *opts, const char *method,
		 const char *path, const char *key, const char *body, size_t body_len,
		 const char *const *headers, dpg_resp *ret)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct sink sink = {0};
	char url[2600], auth[256];
	char *ct = NULL;
	CURLcode rc;

	memset(ret, 0, sizeof(*ret));
	if (!c)
		return -1;
	cr_assert_lt((size_t)snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", s->port, path),
		     sizeof(url), "a path of %zu bytes does not fit the harness's URL buffer",
		     strlen(path));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L); /* headers only, as HEAD answers */
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT,
			 scaled_timeout(opts && opts->timeout_s > 0 ? opts->timeout_s : 60L));
	if (opts && opts->path_as_is)
		curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (key) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
		h = curl_slist_append(h, auth);
	}
	for (const char *const *p = headers; p && *p; p++)
		h = curl_slist_append(h, *p);
	h = curl_slist_append(h, "Expect:");
	if (body) {
		bool has_ct = false;

		for (const char *const *p = headers; p && *p; p++)
			if (strncasecmp(*p, "Content-Type:", 13) == 0)
				has_ct = true;
		if (!has_ct)
			h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		{
			curl_off_t cl = -1;

			curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
			ret->content_length = (long long)cl;
			cl = 0;
			curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &cl);
			ret->retry_after = (long long)cl;
		}
		if (ct)
			snprintf(ret->content_type, sizeof(ret->content_type), "%s", ct);
		{
			struct curl_header *eh = NULL;

			if (curl_easy_header(c, "ETag", 0, CURLH_HEADER, -1, &eh) == CURLHE_OK)
				snprintf(ret->etag, sizeof(ret->etag), "%s", eh->value);
			if (curl_easy_header(c, "Location", 0, CURLH_HEADER, -1, &eh) == CURLHE_OK)
				snprintf(ret->location, sizeof(ret->location), "%s", eh->value);
		}
		ret->body = sink.buf ? sink.buf : strdup("");
		ret->len = sink.len;
		ret->json = json_loads(ret->body, 0, NULL);
	} else {
		free(sink.buf);
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return rc == CURLE_OK ? 0 : -1;
}

void dpg_resp_free(dpg_resp *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

dpg_resp dpg_call(const dpg_server *s, const char *method, const char *path, const char *key,
		  const char *json_body)
{
	dpg_resp r;

	cr_assert_eq(dpg_http(s, method, path, key, json_body, json_body ? strlen(json_body) : 0,
			      NULL, &r), 0, "%s %s: no answer", method, path);
	return r;
}

void dpg_make_dataset(const dpg_server *s, const char *id, double epsilon, double delta,
		      const char *accountant)
{
	char body[512];
	dpg_resp r;

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":%.17g,\"delta\":%.17g},\"accountant\":\"%s\"}",
		 id, epsilon, delta, accountant);
	r = dpg_call(s, "POST", "/v1/datasets", s->admin_key, body);
	cr_assert_eq(r.status, 201, "create dataset %s: %ld %s", id, r.status, r.body);
	dpg_resp_free(&r);
}

double dpg_num(const json_t *j, const char *dotted)
{
	char buf[256], *save = NULL;
	const json_t *cur = j;

	snprintf(buf, sizeof(buf), "%s", dotted);
	for (char *t = strtok_r(buf, ".", &save); t && cur; t = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, t);
	cr_assert(json_is_number(cur), "no number at %s", dotted);
	return json_number_value(cur);
}

void dpg_upload_iris(const dpg_server *s, const char *id, const char *header)
{
	char path[512], line[256], *csv = malloc(16384);
	size_t n = 0;
	FILE *f;

	cr_assert_not_null(csv);
	snprintf(path, sizeof(path), "%s/iris.csv", getenv("DPGATE_TEST_DATA"));
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_not_null(fgets(line, sizeof(line), f)); /* "150,4,setosa,..." */
	n += (size_t)snprintf(csv + n, 16384 - n, "%s\n", header);
	while (fgets(line, sizeof(line), f))
		n += (size_t)snprintf(csv + n, 16384 - n, "%s", line);
	fclose(f);
	cr_assert_eq(dpg_upload_csv(s, id, csv, n), 150);
	free(csv);
}

void dpg_expect_status(const dpg_server *s, const char *method, const char *path,
		       const char *key, const char *json_body, long status)
{
	dpg_resp r = dpg_call(s, method, path, key, json_body);

	cr_assert_eq(r.status, status, "%s %s: %ld %s", method, path, r.status, r.body);
	dpg_resp_free(&r);
}

void dpg_expect_bad_query(const dpg_server *s, const char *path, const char *field)
{
	dpg_resp r = dpg_call(s, "GET", path, s->admin_key, NULL);

	cr_expect_eq(r.status, 400, "GET %s: %ld %s", path, r.status, r.body);
	cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), field, "GET %s: %s",
			 path, r.body);
	dpg_resp_free(&r);
}

void dpg_expect_same_refusal(dpg_resp *r, long status, const char *field, char **first)
{
	cr_assert_eq(r->status, status, "%s", r->body);
	cr_assert_str_eq(json_string_value(json_object_get(r->json, "field")), field, "%s",
			 r->body);
	if (*first)
		cr_assert_str_eq(r->body, *first);
	else
		cr_assert_not_null(*first = strdup(r->body));
	dpg_resp_free(r);
}

void dpg_expect_listed_once(const json_t *all, json_t *made, const json_t *first,
			    bool newest_first)
{
	char prev_at[64] = "", prev_id[128] = "";
	const json_t *e;
	size_t i;

	json_array_foreach(all, i, e) {
		const char *id = json_string_value(json_object_get(e, "id"));
		const char *at = json_string_value(json_object_get(e, "created_at"));
		int c;

		cr_assert(id && at, "row %zu has no id or created_at", i);
		cr_assert_eq(json_object_del(made, id), 0, "%s listed twice or never made", id);
		c = strcmp(at, prev_at) * (newest_first ? -1 : 1);
		cr_assert(i == 0 || c > 0 || (c == 0 && strcmp(id, prev_id) > 0),
			  "%s (%s) listed after %s (%s)", id, at, prev_id, prev_at);
		if (i < json_array_size(first))
			cr_assert_str_eq(json_string_value(json_object_get(json_array_get(first, i), "id")),
					 id, "the pages differ from the first page at %zu", i);
		snprintf(prev_at, sizeof(prev_at), "%s", at);
		snprintf(prev_id, sizeof(prev_id), "%s", id);
	}
	cr_assert_eq(json_object_size(made), 0, "%zu made but never listed", json_object_size(made));
}

const char *dpg_key_id(const char *key, char *buf, size_t size)
{
	const char *start = key + 4, *end = strchr(start, '_');

	cr_assert(strncmp(key, "dpg_", 4) == 0 && end, "%s", key);
	snprintf(buf, size, "%.*s", (int)(end - start), start);
	return buf;
}

void dpg_revoke_key_cli(const char *db, const char *id)
{
	const char *argv[] = {dpg_bin(), "keys", "revoke", "--db", db, id, NULL};
	char out[512];

	cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "keys revoke %s: %s", id, out);
}

/* The ?columns= value for csv, percent-encoded: the kinds the product's
 * own parser infers for it (mech_table_parse_csv with no schema), the
 * categorical columns by name, then "*:numeric" for the others (short
 * enough for the request target even with a column a pixel). */
static void csv_declaration(const char *csv, size_t len, char *out, size_t size)
{
	mech_table *t = NULL;
	acct_error err;
	size_t n = 0;
	bool any_numeric = false;

	acct_error_init(&err);
	cr_assert_eq(mech_table_parse_csv(csv, len, NULL, 0, &t, &err), 0, "%s: %s", err.where,
		     err.text);
	for (size_t j = 0; j < mech_table_columns(t); j++) {
		if (mech_table_column_kind(t, j) == MECH_COL_NUMERIC) {
			any_numeric = true;
			continue;
		}
		for (const unsigned char *p = (const unsigned char *)mech_table_column_name(t, j); *p;
		     p++)
			n += (size_t)snprintf(out + n, size - n, isalnum(*p) || *p == '_' ? "%c" : "%%%02X",
					      *p);
		n += (size_t)snprintf(out + n, size - n, "%%3Acategorical%%2C");
		cr_assert_lt(n, size, "the declaration is too long");
	}
	mech_table_free(t);
	if (any_numeric)
		n += (size_t)snprintf(out + n, size - n, "%%2A%%3Anumeric");
	else if (n >= 3)
		out[n -= 3] = '\0';
	cr_assert_lt(n, size);
}

static long upload_declared(const dpg_server *s, const char *id, const char *csv, size_t len,
			    bool count_public)
{
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	char path[2048], decl[1800];
	dpg_resp r;
	long rows;

	csv_declaration(csv, len, decl, sizeof(decl));
	snprintf(path, sizeof(path), "/v1/datasets/%s/data?columns=%s&row_count=%s", id, decl,
		 count_public ? "public" : "private");
	cr_assert_eq(dpg_http(s, "PUT", path, s->admin_key, csv, len, hdr, &r), 0, "PUT %s", path);
	cr_assert_eq(r.status, 200, "%s", r.body);
	rows = (long)dpg_num(r.json, "rows");
	dpg_resp_free(&r);
	return rows;
}

long dpg_upload_csv(const dpg_server *s, const char *id, const char *csv, size_t len)
{
	return upload_declared(s, id, csv, len, true);
}

long dpg_upload_csv_private_count(const dpg_server *s, const char *id, const char *csv,
				  size_t len)
{
	return upload_declared(s, id, csv, len, false);
}

dpg_resp dpg_submit_job(const dpg_server *s, const char *id, const char *body, char *job_id,
			size_t size)
{
	char path[512];
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", id);
	r = dpg_call(s, "POST", path, s->admin_key, body);
	cr_assert_eq(r.status, 202, "%s", r.body);
	snprintf(job_id, size, "%s", json_string_value(json_object_get(r.json, "id")));
	return r;
}

void dpg_start_job(const dpg_server *s, const char *id, const char *body, char *job_id,
		   size_t size)
{
	dpg_resp r = dpg_submit_job(s, id, body, job_id, size);

	dpg_resp_free(&r);
}

char *dpg_read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (ret_len)
		*ret_len = (size_t)n;
	return buf;
}

void dpg_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

void dpg_save_model(const dpg_server *s, const char *job_id, const char *path)
{
	char route[128];
	dpg_resp r;

	snprintf(route, sizeof(route), "/v1/jobs/%s/model", job_id);
	r = dpg_call(s, "GET", route, s->admin_key, NULL);
	cr_assert_eq(r.status, 200, "GET %s: %ld", route, r.status);
	dpg_write_file(path, r.body, r.len);
	dpg_resp_free(&r);
}

static int log_lines(const dpg_server *s, const char *text, bool whole, bool with_code)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(s->log, "r");

	cr_assert_not_null(f, "%s", s->log);
	while (fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		const char *msg = json_string_value(json_object_get(j, "msg"));

		if (msg && (whole ? strcmp(msg, text) : strncmp(msg, text, strlen(text))) == 0 &&
		    (!with_code || json_is_integer(json_object_get(j, "code"))))
			n++;
		json_decref(j);
	}
	fclose(f);
	return n;
}

int dpg_log_lines(const dpg_server *s, const char *prefix, bool with_code)
{
	return log_lines(s, prefix, false, with_code);
}

int dpg_log_lines_equal(const dpg_server *s, const char *msg)
{
	return log_lines(s, msg, true, false);
}

size_t dpg_count_listed(const dpg_server *s, const char *path, const char *field)
{
	dpg_resp r = dpg_call(s, "GET", path, s->admin_key, NULL);
	size_t n;

	cr_assert_eq(r.status, 200, "GET %s: %ld %s", path, r.status, r.body);
	cr_assert(json_is_array(json_object_get(r.json, field)), "GET %s: no %s: %s", path, field,
		  r.body);
	n = json_array_size(json_object_get(r.json, field));
	dpg_resp_free(&r);
	return n;
}

json_t *dpg_list_all(const dpg_server *s, const char *path, int max_pages)
{
	return dpg_list_all_of(s, path, "entries", max_pages);
}

json_t *dpg_list_all_of(const dpg_server *s, const char *path, const char *field, int max_pages)
{
	json_t *all = json_array();
	char url[512];

	cr_assert_not_null(all);
	snprintf(url, sizeof(url), "%s", path);
	for (int page = 0; page < max_pages; page++) {
		json_t *next;
		dpg_resp r = dpg_call(s, "GET", url, s->admin_key, NULL);

		cr_assert_eq(r.status, 200, "GET %s: %ld %s", url, r.status, r.body);
		cr_assert_eq(json_array_extend(all, json_object_get(r.json, field)), 0, "%s",
			     r.body);
		next = json_object_get(r.json, "next");
		if (json_is_null(next)) {
			dpg_resp_free(&r);
			return all;
		}
		if (json_is_integer(next)) {
			snprintf(url, sizeof(url), "%s&after=%lld", path,
				 (long long)json_integer_value(next));
		} else {
			cr_assert(json_is_string(next), "%s", r.body);
			snprintf(url, sizeof(url), "%s&after=%s", path, json_string_value(next));
		}
		dpg_resp_free(&r);
	}
	cr_assert_fail("GET %s did not end within %d pages", path, max_pages);
	return NULL;
}

json_t *dpg_get_json(const dpg_server *s, const char *key, const char *path)
{
	dpg_resp r = dpg_call(s, "GET", path, key, NULL);
	json_t *j;

	cr_assert_eq(r.status, 200, "GET %s: %ld %s", path, r.status, r.body);
	j = json_incref(r.json);
	dpg_resp_free(&r);
	return j;
}

const char *dpg_get_string(const dpg_server *s, const char *path, const char *field, char *buf,
			   size_t size)
{
	json_t *j = dpg_get_json(s, s->admin_key, path);
	const char *v = json_string_value(json_object_get(j, field));

	snprintf(buf, size, "%s", v ? v : "");
	json_decref(j);
	return buf;
}

double dpg_metric(const dpg_server *s, const char *name)
{
	dpg_resp r = dpg_call(s, "GET", "/metrics", NULL, NULL);
	size_t n = strlen(name);
	bool found = false;
	double v = 0;

	cr_assert_eq(r.status, 200);
	for (const char *line = r.body; line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, name, n) && line[n] == ' ') {
			v = strtod(line + n + 1, NULL);
			found = true;
			break;
		}
	}
	dpg_resp_free(&r);
	cr_assert(found, "no %s in /metrics", name);
	return v;
}

dpg_budget dpg_budget_of(const dpg_server *s, const char *id)
{
	char path[256];
	dpg_budget b;
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", id);
	r = dpg_call(s, "GET", path, s->admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	b.spent_eps = dpg_num(r.json, "spent.epsilon");
	b.spent_delta = dpg_num(r.json, "spent.delta");
	b.charges = (long)dpg_num(r.json, "charges");
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/datasets/%s/ledger?limit=1000", id);
	r = dpg_call(s, "GET", path, s->admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	b.ledger_rows = json_array_size(json_object_get(r.json, "entries"));
	dpg_resp_free(&r);
	return b;
}

/* Polls GET /v1/jobs/{id} every 0.1 s until `done` says yes of the job;
 * returns the job (caller decrefs), or NULL after `seconds` times
 * dpg_time_scale(). */
static json_t *job_poll(const dpg_server *s, const char *id, double seconds,
			bool (*done)(const json_t *job, const void *arg), const void *arg)
{
	char path[128];
	int polls = (int)(seconds * dpg_time_scale() * 10);

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	for (int i = 0; i < polls; i++) {
		dpg_resp r = dpg_call(s, "GET", path, s->admin_key, NULL);
		json_t *j = NULL;

		cr_assert_eq(r.status, 200, "%s", r.body);
		if (done(r.json, arg))
			j = json_incref(r.json);
		dpg_resp_free(&r);
		if (j)
			return j;
		usleep(100000);
	}
	return NULL;
}

static bool state_is_one_of(const json_t *job, const void *arg)
{
	const char *st = json_string_value(json_object_get(job, "state"));

	for (const char *const *want = arg; st && *want; want++)
		if (strcmp(st, *want) == 0)
			return true;
	return false;
}

json_t *dpg_job_wait(const dpg_server *s, const char *id, const char *const *states,
		     double seconds)
{
	json_t *j = job_poll(s, id, seconds, state_is_one_of, states);

	if (!j)
		cr_assert_fail("job %s did not reach the expected state", id);
	return j;
}

static bool ended_or_stepped(const json_t *job, const void *arg)
{
	static const char *const live[] = {"queued", "running", NULL};
	json_t *step = json_object_get(json_object_get(job, "progress"), "step");

	return !state_is_one_of(job, live) ||
	       (json_is_integer(step) && json_integer_value(step) >= *(const int64_t *)arg);
}

void dpg_job_wait_steps(const dpg_server *s, const char *id, int64_t steps, double seconds)
{
	static const char *const running[] = {"running", NULL};
	json_t *j = job_poll(s, id, seconds, ended_or_stepped, &steps);

	if (!j)
		cr_assert_fail("job %s did not reach %lld steps", id, (long long)steps);
	if (!state_is_one_of(j, running)) {
		char *text = json_dumps(j, JSON_COMPACT);

		cr_assert_fail("job %s ended before %lld steps: %s", id, (long long)steps,
			       text ? text : "");
	}
	json_decref(j);
}

json_t *dpg_job_succeeded(const dpg_server *s, const char *id, double seconds)
{
	static const char *const ended[] = {"succeeded", "failed", "cancelled", NULL};
	json_t *job = dpg_job_wait(s, id, ended, seconds);
	const char *state = json_string_value(json_object_get(job, "state"));

	if (!state || strcmp(state, "succeeded") != 0) {
		char *text = json_dumps(job, JSON_COMPACT);

		cr_assert_fail("job %s ended %s: %s", id, state ? state : "without a state",
			       text ? text : "");
	}
	return job;
}

/* dpg_count_rows on a PostgreSQL database. */
static long long pg_count_rows(const char *url, const char *sql)
{
	PGconn *c = PQconnectdb(url);
	PGresult *r;
	long long n;

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "cannot connect to %s: %s", url,
		     PQerrorMessage(c));
	r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	cr_assert_eq(PQntuples(r), 1, "%s", sql);
	n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return n;
}

long long dpg_count_rows(const char *path, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *s = NULL;
	long long n;

	if (strncmp(path, "postgres", 8) == 0)
		return pg_count_rows(path, sql);
	cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
	n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return n;
}

void dpg_switch_file(const char *path, bool exists)
{
	if (exists) {
		FILE *f = fopen(path, "w");

		cr_assert_not_null(f);
		fclose(f);
	} else {
		cr_assert(unlink(path) == 0 || access(path, F_OK) != 0);
	}
}

/* A JSON model's layer width this reader takes (DPG_MAX_HIDDEN_UNITS). */
#define JSON_MODEL_MAX_WIDTH 4096

/* One dense layer of a JSON model on h (w inputs) into z, then its
 * activation back into h; returns its width. */
static size_t json_model_layer(const json_t *layer, double *h, double *z, size_t w)
{
	size_t out = (size_t)json_integer_value(json_object_get(layer, "out"));
	const json_t *W = json_object_get(json_object_get(layer, "weight"), "values");
	const json_t *b = json_object_get(json_object_get(layer, "bias"), "values");
	const char *act = json_string_value(json_object_get(layer, "activation"));

	cr_assert(out <= JSON_MODEL_MAX_WIDTH && json_array_size(W) == out * w);
	for (size_t o = 0; o < out; o++) {
		z[o] = json_real_value(json_array_get(b, o));
		for (size_t j = 0; j < w; j++)
			z[o] += json_real_value(json_array_get(W, o * w + j)) * h[j];
	}
	for (size_t o = 0; o < out; o++)
		h[o] = !strcmp(act, "relu")    ? (z[o] > 0 ? z[o] : 0) :
		       !strcmp(act, "tanh")    ? tanh(z[o]) :
		       !strcmp(act, "sigmoid") ? 1 / (1 + exp(-z[o])) :
		       !strcmp(act, "cos")     ? cos(z[o]) :
						 z[o];
	return out;
}

size_t dpg_json_model_scores(const json_t *mj, const double *x, double *s)
{
	size_t d = (size_t)json_integer_value(json_object_get(mj, "input_dim")), w = d, i, best = 0;
	const json_t *rule = json_object_get(mj, "input_rule"), *layer;
	double scale = dpg_num(rule, "scale"), norm = 0, mx, sum = 0;
	bool ball = strcmp(json_string_value(json_object_get(rule, "name")), "unit_ball") == 0;
	double *h = calloc(JSON_MODEL_MAX_WIDTH, sizeof(double));
	double *z = calloc(JSON_MODEL_MAX_WIDTH, sizeof(double));

	cr_assert(h && z && d <= JSON_MODEL_MAX_WIDTH);
	cr_assert(json_is_null(json_object_get(mj, "projection")));
	for (size_t j = 0; j < d; j++) {
		h[j] = ball ? x[j] / scale : x[j];
		norm += h[j] * h[j];
	}
	for (size_t j = 0; ball && norm > 1 && j < d; j++)
		h[j] /= sqrt(norm);
	json_array_foreach(json_object_get(mj, "layers"), i, layer)
		w = json_model_layer(layer, h, z, w);
	mx = h[0];
	for (size_t c = 1; c < w; c++)
		if (h[c] > mx) {
			mx = h[c];
			best = c;
		}
	for (size_t c = 0; c < w; c++)
		sum += (s[c] = exp(h[c] - mx));
	for (size_t c = 0; c < w; c++)
		s[c] /= sum;
	free(h);
	free(z);
	return best;
}

void dpg_two_class_rows(size_t n, unsigned seed, double (*v)[3], int *y)
{
	uint64_t s = seed;
	char num[32];

	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < 3; k++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			snprintf(num, sizeof(num), "%.6f",
				 (double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
			v[i][k] = strtod(num, NULL);
		}
		y[i] = v[i][0] + v[i][1] > 0;
	}
}
