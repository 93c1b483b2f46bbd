/*
 * test_dashboard.c: the API a dashboard polls: entity tags and 304s on the
 * revalidated GETs, a tag that changes with every kind of change, long-polls
 * (?wait=S) woken by another connection's charge, their timeout and their
 * limit, and CORS for the origins serve allows.
 *
 * Requests whose headers matter (ETag, Vary, the CORS headers) and the
 * concurrent long-polls go over raw sockets, so that every response header
 * is seen as sent; the rest goes through the harness.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

static dpg_server srv;

#define IRIS_HEADER "sepal_length,sepal_width,petal_length,petal_width,species"
#define CHARGE_SMALL "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.01,\"delta\":0}}"

/* ---- a raw HTTP/1.1 client ------------------------------------------------ */

typedef struct raw_resp {
	int status;
	char head[8192];  /* the status line and headers, NUL-terminated */
	char *body;       /* NUL-terminated, may be empty; free with raw_free */
	size_t len;
} raw_resp;

static int raw_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "connect: %s", strerror(errno));
	return fd;
}

/* Sends a request with no body; `extra` is more header lines, each ending
 * in \r\n, or NULL. */
static void raw_send(int fd, const char *method, const char *path, const char *key,
		     const char *extra)
{
	char req[4096];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s%s\r\n",
			 method, path, key ? "Authorization: Bearer " : "", key ? key : "",
			 key ? "\r\n" : "", extra ? extra : "");

	cr_assert(n > 0 && (size_t)n < sizeof(req));
	cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
}

/* The value of header `name` (first one, any case) in r->head, copied into
 * buf; "" when absent. */
static const char *raw_header(const raw_resp *r, const char *name, char *buf, size_t size)
{
	size_t nl = strlen(name);

	buf[0] = '\0';
	for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;

		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1, *end = strstr(v, "\r\n");

			while (*v == ' ')
				v++;
			snprintf(buf, size, "%.*s", (int)(end - v), v);
			break;
		}
	}
	return buf;
}

/* Reads one response (no body for HEAD, 204 and 304).  Returns 0, or -1
 * when nothing complete arrived within `timeout_s`. */
static int raw_read(int fd, bool head_only, double timeout_s, raw_resp *r)
{
	enum { RAW_MAX = 1 << 20 };
	char *buf = malloc(RAW_MAX), cl[32];
	size_t have = 0, hlen = 0, want = 0;
	int rc = -1;
	double end = dpg_now_s() + timeout_s;
	char *eoh = NULL;

	memset(r, 0, sizeof(*r));
	while (!eoh || have < hlen + want) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		double left = end - dpg_now_s();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			goto out;
		n = recv(fd, buf + have, RAW_MAX - 1 - have, 0);
		if (n <= 0)
			goto out;
		have += (size_t)n;
		buf[have] = '\0';
		if (!eoh && (eoh = strstr(buf, "\r\n\r\n"))) {
			hlen = (size_t)(eoh - buf) + 4;
			cr_assert_lt(hlen, sizeof(r->head));
			memcpy(r->head, buf, hlen);
			r->head[hlen] = '\0';
			r->status = atoi(buf + 9);
			raw_header(r, "Content-Length", cl, sizeof(cl));
			want = (head_only || r->status == 304 || r->status == 204) ? 0 :
										      strtoul(cl, NULL, 10);
		}
	}
	r->len = want;
	r->body = malloc(want + 1);
	memcpy(r->body, buf + hlen, want);
	r->body[want] = '\0';
	rc = 0;
out:
	free(buf);
	return rc;
}

static void raw_free(raw_resp *r)
{
	free(r->body);
	r->body = NULL;
}

/* One request on a new connection, answered within 10 s. */
static raw_resp raw_get(const char *path, const char *key, const char *extra)
{
	raw_resp r;
	int fd = raw_connect();

	raw_send(fd, "GET", path, key, extra);
	cr_assert_eq(raw_read(fd, false, 10, &r), 0, "no answer to GET %s", path);
	close(fd);
	return r;
}

/* The current ETag of `path` (asserting a 200 that carries one). */
static void etag_of(const char *path, char *tag, size_t size)
{
	raw_resp r = raw_get(path, srv.admin_key, NULL);

	cr_assert_eq(r.status, 200, "GET %s: %d %s", path, r.status, r.body);
	raw_header(&r, "ETag", tag, size);
	cr_assert_neq(tag[0], '\0', "GET %s has no ETag", path);
	raw_free(&r);
}

/* ---- setup ------------------------------------------------------------------ */

static void setup(void)
{
	static const char *const args[] = {"--cors-origin", "https://dash.example",
					   "--cors-origin", "http://localhost:3000",
					   "--max-waiters", "4", NULL};

	/* Fewer HTTP threads (2) than long-polls allowed (4), and so fewer
	 * database connections: waiting long-polls must hold neither.  The
	 * harness takes serve's arguments at a restart. */
	dpg_server_start_with(&srv, NULL, 2);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.serve_args = args;
	dpg_server_restart(&srv);
	dpg_make_dataset(&srv, "d", 1.0, 1e-5, "basic");
	dpg_make_dataset(&srv, "e", 1.0, 1e-5, "basic");
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(dashboard, .init = setup, .fini = teardown, .timeout = 300);

/* ---- ETag and 304 ------------------------------------------------------------ */

static const char *const tagged[] = {"/v1/datasets", "/v1/datasets/d", "/v1/datasets/d/budget",
				     "/v1/datasets/d/ledger", NULL};

Test(dashboard, revalidated_gets_carry_a_tag_and_answer_304)
{
	for (int i = 0; tagged[i]; i++) {
		char tag[64], tag2[64], cc[64], vary[64], inm[160];
		raw_resp r = raw_get(tagged[i], srv.admin_key, NULL), r2;

		cr_assert_eq(r.status, 200, "%s", tagged[i]);
		raw_header(&r, "ETag", tag, sizeof(tag));
		/* A strong tag: quoted, no W/. */
		cr_assert(tag[0] == '"' && strlen(tag) > 2 && tag[strlen(tag) - 1] == '"', "%s: %s",
			  tagged[i], tag);
		cr_assert_str_eq(raw_header(&r, "Cache-Control", cc, sizeof(cc)), "no-cache");
		cr_assert_str_eq(raw_header(&r, "Vary", vary, sizeof(vary)), "Authorization, Origin");
		raw_free(&r);

		/* Unchanged: the same tag, and 304 with no body for it, for a
		 * list holding it, for its weak form and for "*". */
		etag_of(tagged[i], tag2, sizeof(tag2));
		cr_assert_str_eq(tag, tag2);
		const char *prefix[] = {"", "\"nope\", ", "W/", NULL};
		for (int f = 0; f < 4; f++) {
			char line[200];

			if (prefix[f])
				snprintf(inm, sizeof(inm), "%s%s", prefix[f], tag);
			else
				snprintf(inm, sizeof(inm), "*");
			snprintf(line, sizeof(line), "If-None-Match: %s\r\n", inm);
			r2 = raw_get(tagged[i], srv.admin_key, line);
			cr_assert_eq(r2.status, 304, "%s with %s: %d", tagged[i], inm, r2.status);
			cr_assert_eq(r2.len, 0);
			cr_assert_str_eq(raw_header(&r2, "ETag", tag2, sizeof(tag2)), tag);
			cr_assert_str_eq(raw_header(&r2, "Cache-Control", cc, sizeof(cc)), "no-cache");
			raw_free(&r2);
		}
		/* The list split over two field lines, the tag on the second
		 * (only the first line had been read). */
		{
			char lines[240];

			snprintf(lines, sizeof(lines),
				 "If-None-Match: \"nope\"\r\nIf-None-Match: %s\r\n", tag);
			r2 = raw_get(tagged[i], srv.admin_key, lines);
			cr_assert_eq(r2.status, 304, "%s with two lines: %d", tagged[i], r2.status);
			raw_free(&r2);
		}
		/* Another tag: the whole answer. */
		r2 = raw_get(tagged[i], srv.admin_key, "If-None-Match: \"0000\"\r\n");
		cr_assert_eq(r2.status, 200);
		cr_assert_gt(r2.len, 0);
		raw_free(&r2);
	}
}

Test(dashboard, keys_and_errors_stay_no_store)
{
	char cc[64], tag[64];
	raw_resp r = raw_get("/v1/keys", srv.admin_key, NULL);

	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(raw_header(&r, "Cache-Control", cc, sizeof(cc)), "no-store");
	cr_assert_str_eq(raw_header(&r, "ETag", tag, sizeof(tag)), "");
	raw_free(&r);
	r = raw_get("/v1/datasets/nope", srv.admin_key, NULL);
	cr_assert_eq(r.status, 404);
	cr_assert_str_eq(raw_header(&r, "Cache-Control", cc, sizeof(cc)), "no-store");
	cr_assert_str_eq(raw_header(&r, "ETag", tag, sizeof(tag)), "");
	raw_free(&r);
}

/* Every tag of `paths` differs from the one held in tags[] (then updated). */
static void assert_all_changed(const char *what, const char *const *paths, char (*tags)[64])
{
	for (int i = 0; paths[i]; i++) {
		char now[64];

		etag_of(paths[i], now, sizeof(now));
		cr_assert_str_neq(now, tags[i], "%s left the tag of %s unchanged", what, paths[i]);
		snprintf(tags[i], sizeof(tags[i]), "%s", now);
	}
}

static void read_tags(const char *const *paths, char (*tags)[64])
{
	for (int i = 0; paths[i]; i++)
		etag_of(paths[i], tags[i], sizeof(tags[i]));
}

Test(dashboard, the_tag_changes_with_every_kind_of_change)
{
	static const char *const ds_paths[] = {"/v1/datasets", "/v1/datasets/d",
					       "/v1/datasets/d/budget", NULL};
	static const char *const ledger[] = {"/v1/datasets/d/ledger", NULL};
	static const char *const other[] = {"/v1/datasets/e", "/v1/datasets/e/budget",
					    "/v1/datasets/e/ledger", NULL};
	char tags[4][64], ltag[1][64], otags[3][64], path[160], rid[64];
	dpg_resp r;

	read_tags(ds_paths, tags);
	read_tags(ledger, ltag);
	read_tags(other, otags);
	/* A charge: budget and ledger. */
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE_SMALL, 201);
	assert_all_changed("a charge", ds_paths, tags);
	assert_all_changed("a charge", ledger, ltag);
	/* A reservation, then its release. */
	r = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key, CHARGE_SMALL);
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(rid, sizeof(rid), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	assert_all_changed("a reservation", ds_paths, tags);
	snprintf(path, sizeof(path), "/v1/datasets/d/reservations/%s/release", rid);
	dpg_expect_status(&srv, "POST", path, srv.admin_key, NULL, 200);
	assert_all_changed("a release", ds_paths, tags);
	/* A patch of the name. */
	dpg_expect_status(&srv, "PATCH", "/v1/datasets/d", srv.admin_key, "{\"name\":\"renamed\"}",
			  200);
	static const char *const named[] = {"/v1/datasets", "/v1/datasets/d", NULL};
	assert_all_changed("a rename", named, tags);
	/* The archive. */
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/d", srv.admin_key, NULL, 200);
	assert_all_changed("the archive", named, tags);
	/* None of this touched e. */
	for (int i = 0; other[i]; i++) {
		char now[64];

		etag_of(other[i], now, sizeof(now));
		cr_assert_str_eq(now, otags[i], "%s changed with d", other[i]);
	}
}

Test(dashboard, archiving_changes_the_tag)
{
	char before[64], after[64], lbefore[64], lafter[64];

	etag_of("/v1/datasets/e", before, sizeof(before));
	etag_of("/v1/datasets?archived=true", lbefore, sizeof(lbefore));
	dpg_expect_status(&srv, "DELETE", "/v1/datasets/e", srv.admin_key, NULL, 200);
	etag_of("/v1/datasets/e", after, sizeof(after));
	etag_of("/v1/datasets?archived=true", lafter, sizeof(lafter));
	cr_assert_str_neq(before, after);
	cr_assert_str_neq(lbefore, lafter);
}

Test(dashboard, a_key_sees_its_own_tag)
{
	char scoped[160], a[64], b[64];
	raw_resp r;

	dpg_make_key(&srv, "viewer", "e", scoped, sizeof(scoped));
	etag_of("/v1/datasets", a, sizeof(a));
	r = raw_get("/v1/datasets", scoped, NULL);
	cr_assert_eq(r.status, 200);
	raw_header(&r, "ETag", b, sizeof(b));
	raw_free(&r);
	/* Two keys that see different lists get different tags, and the
	 * admin's tag is no 304 for the viewer. */
	cr_assert_str_neq(a, b);
	{
		char line[120];

		snprintf(line, sizeof(line), "If-None-Match: %s\r\n", a);
		r = raw_get("/v1/datasets", scoped, line);
		cr_assert_eq(r.status, 200);
		raw_free(&r);
	}
}

Test(dashboard, job_progress_changes_the_job_tag)
{
	/* Many small steps (300 000 lots of about one row, under a second),
	 * so the job is still running when it is first read: a job of five
	 * steps could end before the first GET, leaving one tag to see.  Its
	 * event is epsilon 4.3 under RDP at delta 1e-5 (a little more on the
	 * ledger's filter), inside the budget of 10. */
	static const char *job =
		"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"species\","
		"\"classes\":3,\"epochs\":2000,\"lot_size\":1,\"noise_multiplier\":4,\"clip_norm\":1,"
		"\"learning_rate\":0.5}}";
	static const char *const done[] = {"succeeded", "failed", "cancelled", NULL};
	char id[96], path[160], tag[64], last[64] = "";
	int changes = 0;
	json_t *j;

	dpg_make_dataset(&srv, "iris", 10.0, 1e-5, "rdp");
	dpg_upload_iris(&srv, "iris", IRIS_HEADER);
	dpg_start_job(&srv, "iris", job, id, sizeof(id));
	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	/* The tag follows the job from its first read to its end. */
	for (int i = 0; i < 400; i++) {
		raw_resp rr = raw_get(path, srv.admin_key, NULL);

		cr_assert_eq(rr.status, 200);
		raw_header(&rr, "ETag", tag, sizeof(tag));
		if (last[0] && strcmp(last, tag) != 0)
			changes++;
		snprintf(last, sizeof(last), "%s", tag);
		j = json_loads(rr.body, 0, NULL);
		raw_free(&rr);
		cr_assert(j);
		if (strcmp(json_string_value(json_object_get(j, "state")), "succeeded") == 0) {
			json_decref(j);
			break;
		}
		json_decref(j);
		usleep(20000);
	}
	j = dpg_job_wait(&srv, id, done, 120);
	json_decref(j);
	etag_of(path, tag, sizeof(tag));
	cr_assert_gt(changes, 0, "the job's tag never changed");
	cr_assert_str_eq(tag, last, "the finished job's tag is the last one seen");
}

/* ---- long-polls ------------------------------------------------------------ */

/* Sends a long-poll on `path` for its current tag (copied into tag) on a
 * new connection, and returns the connection. */
static int long_poll(const char *path, unsigned wait_s, char *tag, size_t size)
{
	char target[256], line[128];
	int fd;

	etag_of(path, tag, size);
	snprintf(target, sizeof(target), "%s%swait=%u", path, strchr(path, '?') ? "&" : "?", wait_s);
	snprintf(line, sizeof(line), "If-None-Match: %s\r\n", tag);
	fd = raw_connect();
	raw_send(fd, "GET", target, srv.admin_key, line);
	return fd;
}

/* Whether anything arrived on fd within ms milliseconds. */
static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) > 0;
}

Test(dashboard, a_long_poll_wakes_on_a_charge_from_another_connection)
{
	static const char *const paths[] = {"/v1/datasets/d/budget", "/v1/datasets/d/ledger",
					    "/v1/datasets/d", "/v1/datasets", NULL};

	for (int i = 0; paths[i]; i++) {
		char tag[64], now_tag[64];
		int fd = long_poll(paths[i], 30, tag, sizeof(tag));
		double t_charged, t_woken;
		raw_resp r;

		/* Unchanged: it waits. */
		cr_assert_not(readable_within(fd, 300), "%s answered before any change", paths[i]);
		dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE_SMALL,
				  201);
		t_charged = dpg_now_s();
		cr_assert_eq(raw_read(fd, false, 5, &r), 0, "%s: no answer after the charge", paths[i]);
		t_woken = dpg_now_s();
		close(fd);
		cr_assert_eq(r.status, 200, "%s: %d", paths[i], r.status);
		raw_header(&r, "ETag", now_tag, sizeof(now_tag));
		cr_assert_str_neq(now_tag, tag);
		raw_free(&r);
		cr_assert_lt(t_woken - t_charged, 0.1 * dpg_time_scale(), "%s woke %.3f s after the charge", paths[i],
			     t_woken - t_charged);
	}
}

Test(dashboard, a_long_poll_is_not_woken_by_another_dataset)
{
	char tag[64];
	int fd = long_poll("/v1/datasets/e/budget", 2, tag, sizeof(tag));
	double t0 = dpg_now_s();
	raw_resp r;

	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE_SMALL, 201);
	cr_assert_eq(raw_read(fd, false, 10, &r), 0);
	close(fd);
	/* Woken or not, unchanged: 304 at its deadline, after 2 s. */
	cr_assert_eq(r.status, 304);
	cr_assert_geq(dpg_now_s() - t0, 1.9);
	raw_free(&r);
}

/* Requires a 304's Content-Length, when it has one, to be `len200`: RFC
 * 9110 8.6 allows a 304 no other (a cache would take "0" for the length
 * of the representation it keeps). */
static void expect_304_length(const raw_resp *r, const char *len200, const char *what)
{
	char len[32];

	cr_assert_eq(r->status, 304, "%s: %d", what, r->status);
	raw_header(r, "Content-Length", len, sizeof(len));
	cr_expect(len[0] == '\0' || strcmp(len, len200) == 0,
		  "%s: 304 with Content-Length %s, its 200 with %s", what, len, len200);
}

/*
 * A 304 says no Content-Length, or the 200's: answered at once, and a
 * long-poll's at its deadline.  It has no body: the next answer on its
 * connection comes whole.
 */
Test(dashboard, a_304_says_the_length_of_the_200_or_none)
{
	for (int i = 0; tagged[i]; i++) {
		char tag[64], len200[32], line[160];
		raw_resp r = raw_get(tagged[i], srv.admin_key, NULL), r2;
		int fd;

		cr_assert_eq(r.status, 200, "%s: %d", tagged[i], r.status);
		raw_header(&r, "ETag", tag, sizeof(tag));
		raw_header(&r, "Content-Length", len200, sizeof(len200));
		cr_assert_gt(r.len, 0, "%s: an empty 200 tells nothing", tagged[i]);
		snprintf(line, sizeof(line), "If-None-Match: %s\r\n", tag);
		fd = raw_connect();
		raw_send(fd, "GET", tagged[i], srv.admin_key, line);
		cr_assert_eq(raw_read(fd, false, 10, &r2), 0, "%s: no 304", tagged[i]);
		expect_304_length(&r2, len200, tagged[i]);
		raw_free(&r2);
		raw_send(fd, "GET", tagged[i], srv.admin_key, NULL);
		cr_assert_eq(raw_read(fd, false, 10, &r2), 0, "%s: no answer after the 304",
			     tagged[i]);
		cr_expect_eq(r2.status, 200, "%s after the 304: %d", tagged[i], r2.status);
		cr_expect_str_eq(r2.body, r.body, "%s after the 304", tagged[i]);
		raw_free(&r2);
		close(fd);
		raw_free(&r);
	}
	{
		char tag[64], len200[32];
		raw_resp r = raw_get("/v1/datasets/e/budget", srv.admin_key, NULL);
		int fd;

		raw_header(&r, "Content-Length", len200, sizeof(len200));
		raw_free(&r);
		fd = long_poll("/v1/datasets/e/budget", 1, tag, sizeof(tag));
		cr_assert_eq(raw_read(fd, false, 10, &r), 0, "no 304 at the long-poll's deadline");
		expect_304_length(&r, len200, "a long-poll at its deadline");
		raw_free(&r);
		close(fd);
	}
}

/* The server's CPU seconds so far (user and system), from /proc. */
static double server_cpu_s(void)
{
	char path[64], text[1024], *p;
	unsigned long utime = 0, stime = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)srv.pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_not_null(fgets(text, sizeof(text), f));
	fclose(f);
	/* Fields 14 and 15, counted after the command's closing parenthesis. */
	p = strrchr(text, ')');
	cr_assert_not_null(p);
	cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
			    &stime), 2);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* What the answers that commit nothing need: an analyst key scoped to d,
 * and the commit route of a reservation of d the admin key holds. */
static char other_key[128], others_reservation[160];

/* A charge of d under one Idempotency-Key: the first call writes it, each
 * later one replays the stored answer (201). */
static void charge_d_once(void)
{
	static const char *const idem[] = {"Idempotency-Key: once", NULL};
	dpg_resp r;

	cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE_SMALL,
			      strlen(CHARGE_SMALL), idem, &r),
		     0);
	cr_assert_eq(r.status, 201, "%s", r.body);
	dpg_resp_free(&r);
}

/* The server's CPU seconds for `n` answers that commit nothing, of six
 * kinds in turn: a 404 on a job route (which wakes every long-poll when
 * it wakes any), a 400, a dry run (200), a replayed charge (201), a
 * charge over the budget (409) and a close of another key's reservation
 * (403), the last four on dataset d with no expired reservation to
 * commit. */
static double refusals_cpu_s(int n)
{
	double t0 = server_cpu_s();

	for (int i = 0; i < n; i++) {
		switch (i % 6) {
		case 0:
			dpg_expect_status(&srv, "POST", "/v1/jobs/job_nonexistent/predict",
					  srv.admin_key, "{\"rows\":[[1]]}", 404);
			break;
		case 1:
			dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
					  "{\"event\":{}}", 400);
			break;
		case 2:
			dpg_expect_status(&srv, "POST", "/v1/datasets/d/dry-run", srv.admin_key,
					  CHARGE_SMALL, 200);
			break;
		case 3:
			charge_d_once();
			break;
		case 4:
			dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key,
					  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":2,"
					  "\"delta\":0}}",
					  409);
			break;
		default:
			dpg_expect_status(&srv, "POST", others_reservation, other_key, NULL, 403);
		}
	}
	return server_cpu_s() - t0;
}

/*
 * An answer that committed nothing wakes no long-poll, whatever its
 * status: woken, each would read its resource again for nothing, and a
 * stream of cheap 404s made 256 long-polls cost the server 100 times the
 * stream's own CPU (11 s for 2000 requests).  With 100 long-polls on
 * dataset d, 1200 such answers (refusals, dry runs, replays) must cost
 * the server about what they cost with none; a charge then wakes all 100.
 */
Test(dashboard, answers_that_committed_nothing_wake_no_long_poll)
{
	static const char *const args[] = {"--max-waiters", "128", NULL};
	enum { WAITERS = 100, REFUSALS = 1200 };
	int fds[WAITERS];
	char tag[64];
	double alone, waited;
	dpg_resp made;
	raw_resp r;

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.serve_args = args;
	dpg_server_restart(&srv);
	dpg_make_key(&srv, "analyst", "d", other_key, sizeof(other_key));
	made = dpg_call(&srv, "POST", "/v1/datasets/d/reservations", srv.admin_key, CHARGE_SMALL);
	cr_assert_eq(made.status, 201, "%s", made.body);
	snprintf(others_reservation, sizeof(others_reservation),
		 "/v1/datasets/d/reservations/%s/commit",
		 json_string_value(json_object_get(made.json, "id")));
	dpg_resp_free(&made);
	charge_d_once();
	alone = refusals_cpu_s(REFUSALS);
	for (int i = 0; i < WAITERS; i++)
		fds[i] = long_poll("/v1/datasets/d", 60, tag, sizeof(tag));
	cr_assert_not(readable_within(fds[0], 300));
	cr_assert_eq(dpg_metric(&srv, "dpgate_long_polls_waiting"), (double)WAITERS);
	waited = refusals_cpu_s(REFUSALS);
	for (int i = 0; i < WAITERS; i++)
		cr_assert_not(readable_within(fds[i], 0), "long-poll %d answered a refusal", i);
	cr_assert_lt(waited, 2.0 * alone + 0.3 * dpg_time_scale(),
		     "%d refusals cost %.2f s of server CPU with %d long-polls, %.2f s without",
		     REFUSALS, waited, WAITERS, alone);
	dpg_expect_status(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE_SMALL, 201);
	for (int i = 0; i < WAITERS; i++) {
		cr_assert_eq(raw_read(fds[i], false, 5, &r), 0, "long-poll %d: no answer", i);
		cr_assert_eq(r.status, 200, "long-poll %d: %d", i, r.status);
		raw_free(&r);
		close(fds[i]);
	}
}

/*
 * A refusal that follows a commit still wakes: a spend refused over the
 * budget first commits the dataset's expired reservations (their cost
 * moves from reserved to spent), so the long-polls on its budget read it
 * again and answer the change.
 */
Test(dashboard, a_refused_spend_that_committed_expired_reservations_wakes)
{
	char tag[64], now_tag[64];
	int fd;
	raw_resp r;

	dpg_expect_status(&srv, "POST", "/v1/datasets/e/reservations", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.5,\"delta\":0},"
			  "\"ttl_seconds\":1}", 201);
	usleep(2200000);
	fd = long_poll("/v1/datasets/e/budget", 30, tag, sizeof(tag));
	cr_assert_not(readable_within(fd, 300));
	dpg_expect_status(&srv, "POST", "/v1/datasets/e/charges", srv.admin_key,
			  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.9,\"delta\":0}}",
			  409);
	cr_assert_eq(raw_read(fd, false, 5, &r), 0, "no answer after the refusal");
	close(fd);
	cr_assert_eq(r.status, 200, "%d", r.status);
	cr_assert_str_neq(raw_header(&r, "ETag", now_tag, sizeof(now_tag)), tag);
	cr_assert(strstr(r.body, "\"open\":0"), "%s", r.body);
	raw_free(&r);
}

Test(dashboard, a_long_poll_times_out_with_304)
{
	char tag[64], tag2[64];
	double t0;
	int fd = long_poll("/v1/datasets/d", 1, tag, sizeof(tag));
	raw_resp r;

	t0 = dpg_now_s();
	cr_assert_eq(raw_read(fd, false, 10, &r), 0);
	close(fd);
	cr_assert_eq(r.status, 304);
	cr_assert_eq(r.len, 0);
	cr_assert_str_eq(raw_header(&r, "ETag", tag2, sizeof(tag2)), tag);
	cr_assert_geq(dpg_now_s() - t0, 0.9, "answered after %.3f s", dpg_now_s() - t0);
	cr_assert_lt(dpg_now_s() - t0, 3.0 * dpg_time_scale(), "answered after %.3f s", dpg_now_s() - t0);
	raw_free(&r);
}

Test(dashboard, a_bad_wait_is_400_and_no_tag_answers_at_once)
{
	static const char *const bad[] = {"0", "61", "-1", "abc", "1.5", "", "1e1", "0060", NULL};
	char path[128];
	raw_resp r;

	for (int i = 0; bad[i]; i++) {
		snprintf(path, sizeof(path), "/v1/datasets/d/budget?wait=%s", bad[i]);
		r = raw_get(path, srv.admin_key, "If-None-Match: \"x\"\r\n");
		cr_assert_eq(r.status, 400, "wait=%s: %d", bad[i], r.status);
		raw_free(&r);
	}
	/* 60 is allowed; with a tag that is not current, or none, the answer
	 * is at once. */
	r = raw_get("/v1/datasets/d/budget?wait=60", srv.admin_key, "If-None-Match: \"x\"\r\n");
	cr_assert_eq(r.status, 200);
	raw_free(&r);
	r = raw_get("/v1/datasets/d/budget?wait=60", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	raw_free(&r);
}

Test(dashboard, long_polls_are_bounded_and_hold_no_thread)
{
	int fds[4];
	char tag[64], ra[16];
	raw_resp r;
	double t0;

	/* --max-waiters 4 on a server of 2 HTTP threads. */
	for (int i = 0; i < 4; i++)
		fds[i] = long_poll("/v1/datasets/e/budget", 30, tag, sizeof(tag));
	for (int i = 0; i < 4; i++)
		cr_assert_not(readable_within(fds[i], i == 0 ? 300 : 0));
	/* The threads and the database are free: other requests are
	 * answered at once. */
	t0 = dpg_now_s();
	for (int i = 0; i < 10; i++) {
		r = raw_get("/v1/datasets/d/budget", srv.admin_key, NULL);
		cr_assert_eq(r.status, 200);
		raw_free(&r);
	}
	cr_assert_lt(dpg_now_s() - t0, 2.0 * dpg_time_scale());
	cr_assert_eq(dpg_metric(&srv, "dpgate_long_polls_waiting"), 4.0);
	/* A fifth waiter: 503 with Retry-After, at once. */
	{
		char line[128];

		snprintf(line, sizeof(line), "If-None-Match: %s\r\n", tag);
		r = raw_get("/v1/datasets/e/budget?wait=30", srv.admin_key, line);
	}
	cr_assert_eq(r.status, 503, "%d %s", r.status, r.body);
	cr_assert_str_neq(raw_header(&r, "Retry-After", ra, sizeof(ra)), "");
	raw_free(&r);
	/* One change answers all four, and the slots are free again. */
	dpg_expect_status(&srv, "POST", "/v1/datasets/e/charges", srv.admin_key, CHARGE_SMALL, 201);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(raw_read(fds[i], false, 5, &r), 0);
		cr_assert_eq(r.status, 200);
		raw_free(&r);
		close(fds[i]);
	}
	fds[0] = long_poll("/v1/datasets/e/budget", 1, tag, sizeof(tag));
	cr_assert_eq(raw_read(fds[0], false, 5, &r), 0);
	cr_assert_eq(r.status, 304);
	raw_free(&r);
	close(fds[0]);
}

Test(dashboard, shutdown_answers_the_waiting_long_polls)
{
	int fds[3];
	char tag[64];
	raw_resp r;

	for (int i = 0; i < 3; i++)
		fds[i] = long_poll("/v1/datasets/d", 60, tag, sizeof(tag));
	cr_assert_not(readable_within(fds[0], 300));
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	for (int i = 0; i < 3; i++) {
		/* Answered 503, or closed: never left hanging. */
		if (raw_read(fds[i], false, 5, &r) == 0) {
			cr_assert_eq(r.status, 503);
			raw_free(&r);
		}
		cr_assert(readable_within(fds[i], 0) || true);
		close(fds[i]);
	}
	dpg_server_restart(&srv);
}

Test(dashboard, a_long_poll_on_a_job_wakes_when_it_ends)
{
	static const char *job =
		"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"species\","
		"\"classes\":3,\"epochs\":1,\"lot_size\":30,\"noise_multiplier\":4,\"clip_norm\":1,"
		"\"learning_rate\":0.5}}";
	char id[96], path[160], tag[64];
	raw_resp r;
	json_t *j;
	bool ended = false;

	dpg_make_dataset(&srv, "iris", 10.0, 1e-5, "rdp");
	dpg_upload_iris(&srv, "iris", IRIS_HEADER);
	dpg_start_job(&srv, "iris", job, id, sizeof(id));
	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	/* Each long-poll answers with a new state well before its 30 s,
	 * until the job has ended. */
	for (int i = 0; i < 50 && !ended; i++) {
		raw_resp now = raw_get(path, srv.admin_key, NULL);
		char line[128], target[200];
		double t0;
		int fd;

		cr_assert_eq(now.status, 200);
		j = json_loads(now.body, 0, NULL);
		ended = strcmp(json_string_value(json_object_get(j, "state")), "succeeded") == 0;
		json_decref(j);
		raw_header(&now, "ETag", tag, sizeof(tag));
		raw_free(&now);
		if (ended)
			break;
		snprintf(target, sizeof(target), "%s?wait=30", path);
		snprintf(line, sizeof(line), "If-None-Match: %s\r\n", tag);
		t0 = dpg_now_s();
		fd = raw_connect();
		raw_send(fd, "GET", target, srv.admin_key, line);
		cr_assert_eq(raw_read(fd, false, 40, &r), 0);
		close(fd);
		cr_assert_eq(r.status, 200, "a running job's long-poll ended %d", r.status);
		cr_assert_lt(dpg_now_s() - t0, 5.0 * dpg_time_scale(), "woken after %.3f s", dpg_now_s() - t0);
		raw_free(&r);
	}
	cr_assert(ended);
}

/* ---- CORS ------------------------------------------------------------------- */

static raw_resp raw_options(const char *path, const char *origin, const char *method)
{
	char extra[512];
	raw_resp r;
	int fd = raw_connect();

	snprintf(extra, sizeof(extra),
		 "Origin: %s\r\nAccess-Control-Request-Method: %s\r\n"
		 "Access-Control-Request-Headers: authorization, if-none-match\r\n",
		 origin, method);
	raw_send(fd, "OPTIONS", path, NULL, extra);
	cr_assert_eq(raw_read(fd, false, 10, &r), 0);
	close(fd);
	return r;
}

Test(dashboard, cors_answers_the_allowed_origins_only)
{
	static const char *const allowed[] = {"https://dash.example", "http://localhost:3000", NULL};
	static const char *const refused[] = {"https://evil.example", "https://dash.example.evil",
					      "https://DASH.example", "http://dash.example", "null",
					      "http://localhost:3001", NULL};
	char v[256], line[300];
	raw_resp r;

	for (int i = 0; allowed[i]; i++) {
		snprintf(line, sizeof(line), "Origin: %s\r\n", allowed[i]);
		r = raw_get("/v1/datasets/d/budget", srv.admin_key, line);
		cr_assert_eq(r.status, 200);
		cr_assert_str_eq(raw_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)),
				 allowed[i]);
		cr_assert(strstr(raw_header(&r, "Access-Control-Expose-Headers", v, sizeof(v)), "ETag"));
		cr_assert_str_eq(raw_header(&r, "Vary", v, sizeof(v)), "Authorization, Origin");
		cr_assert_str_eq(raw_header(&r, "Access-Control-Allow-Credentials", v, sizeof(v)), "");
		raw_free(&r);

		r = raw_options("/v1/datasets/d/charges", allowed[i], "POST");
		cr_assert_eq(r.status, 204, "%d %s", r.status, r.body);
		cr_assert_str_eq(raw_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)),
				 allowed[i]);
		cr_assert(strstr(raw_header(&r, "Access-Control-Allow-Methods", v, sizeof(v)), "POST"));
		raw_header(&r, "Access-Control-Allow-Headers", v, sizeof(v));
		cr_assert(strstr(v, "Authorization") && strstr(v, "If-None-Match"), "%s", v);
		cr_assert_str_neq(raw_header(&r, "Access-Control-Max-Age", v, sizeof(v)), "");
		raw_free(&r);
		/* A method the path does not have, a path that does not exist. */
		r = raw_options("/v1/datasets/d/charges", allowed[i], "PUT");
		cr_assert_eq(r.status, 403);
		raw_free(&r);
		r = raw_options("/v1/nothing", allowed[i], "GET");
		cr_assert_eq(r.status, 404);
		raw_free(&r);
	}
	for (int i = 0; refused[i]; i++) {
		snprintf(line, sizeof(line), "Origin: %s\r\n", refused[i]);
		r = raw_get("/v1/datasets/d/budget", srv.admin_key, line);
		cr_assert_eq(r.status, 200);
		cr_assert_str_eq(raw_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)), "",
				 "%s was allowed", refused[i]);
		raw_free(&r);
		r = raw_options("/v1/datasets/d/budget", refused[i], "GET");
		cr_assert_eq(r.status, 403, "%s: %d", refused[i], r.status);
		cr_assert_str_eq(raw_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)), "");
		raw_free(&r);
	}
	/* An OPTIONS that is no preflight is routed as ever: 405. */
	r = raw_get("/v1/datasets/d/budget", srv.admin_key, NULL);
	raw_free(&r);
	{
		int fd = raw_connect();

		raw_send(fd, "OPTIONS", "/v1/datasets/d/budget", srv.admin_key, NULL);
		cr_assert_eq(raw_read(fd, false, 10, &r), 0);
		close(fd);
		cr_assert_eq(r.status, 405);
		raw_free(&r);
	}
}

Test(dashboard, no_origin_is_allowed_by_default)
{
	char v[256];
	raw_resp r;

	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.serve_args = NULL;
	dpg_server_restart(&srv);
	r = raw_get("/v1/datasets/d/budget", srv.admin_key, "Origin: https://dash.example\r\n");
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(raw_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)), "");
	cr_assert_str_eq(raw_header(&r, "Vary", v, sizeof(v)), "Authorization");
	raw_free(&r);
	r = raw_options("/v1/datasets/d/budget", "https://dash.example", "GET");
	cr_assert_eq(r.status, 403);
	raw_free(&r);
}

Test(dashboard, serve_refuses_a_bad_origin)
{
	static const char *const bad[] = {"*", "null", "https://a.example/path", "ftp://a.example",
					  "https://", "https://a b", NULL};
	char out[256];

	for (int i = 0; bad[i]; i++) {
		const char *argv[] = {dpg_bin(), "serve", "--listen", "127.0.0.1:0", "--cors-origin", bad[i],
				      NULL};

		cr_assert_eq(dpg_run(out, sizeof(out), argv), 2, "--cors-origin '%s' accepted", bad[i]);
	}
}

/* ---- the Grafana dashboard ------------------------------------------------- */

/* Every dpgate_* series a query of contrib/grafana/dpgate.json names is
 * one /metrics serves (with a sample: datasets exist), and every panel
 * has a query. */
Test(dashboard, the_grafana_dashboard_queries_served_metrics)
{
	char path[512];
	const char *root = getenv("DPGATE_SOURCE_ROOT");
	json_t *dash, *panels, *panel;
	size_t i, checked = 0;
	raw_resp m;

	cr_assert(root, "DPGATE_SOURCE_ROOT is not set");
	snprintf(path, sizeof(path), "%s/contrib/grafana/dpgate.json", root);
	dash = json_load_file(path, 0, NULL);
	cr_assert(dash, "%s is not JSON", path);
	m = raw_get("/metrics", srv.admin_key, NULL);
	cr_assert_eq(m.status, 200);
	panels = json_object_get(dash, "panels");
	cr_assert_gt(json_array_size(panels), 0);
	json_array_foreach(panels, i, panel) {
		json_t *targets = json_object_get(panel, "targets"), *t;
		size_t k;

		cr_assert_gt(json_array_size(targets), 0, "panel %zu has no query", i);
		json_array_foreach(targets, k, t) {
			const char *expr = json_string_value(json_object_get(t, "expr"));

			cr_assert(expr);
			for (const char *p = strstr(expr, "dpgate_"); p; p = strstr(p + 1, "dpgate_")) {
				char name[128], sample[140];
				size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_");

				snprintf(name, sizeof(name), "%.*s", (int)n, p);
				snprintf(sample, sizeof(sample), "\n%s{", name);
				if (!strstr(m.body, sample))
					snprintf(sample, sizeof(sample), "\n%s ", name);
				cr_assert(strstr(m.body, sample), "%s is not in /metrics", name);
				checked++;
			}
		}
	}
	cr_assert_geq(checked, 10);
	raw_free(&m);
	json_decref(dash);
}

/* ---- the page ------------------------------------------------------------------ */

/* Whether HTML holds an attribute like onclick= (an inline handler). */
static bool has_handler_attribute(const char *html)
{
	for (const char *p = strstr(html, " on"); p; p = strstr(p + 1, " on")) {
		size_t n = strspn(p + 3, "abcdefghijklmnopqrstuvwxyz");

		if (n > 0 && p[3 + n] == '=')
			return true;
	}
	return false;
}

Test(dashboard, the_page_is_served_with_a_strict_policy)
{
	static const char *const assets[][2] = {{"/assets/dashboard.js", "text/javascript"},
						{"/assets/dashboard.css", "text/css"}};
	char v[512], tag[64], line[128];
	raw_resp r = raw_get("/", NULL, NULL);

	cr_assert_eq(r.status, 200);
	cr_assert(strncmp(raw_header(&r, "Content-Type", v, sizeof(v)), "text/html", 9) == 0, "%s", v);
	raw_header(&r, "Content-Security-Policy", v, sizeof(v));
	cr_assert(strstr(v, "default-src 'none'") && strstr(v, "script-src 'self'") &&
		  strstr(v, "style-src 'self'") && strstr(v, "frame-ancestors 'none'") &&
		  strstr(v, "connect-src 'self'"), "CSP: %s", v);
	cr_assert_null(strstr(v, "unsafe"), "CSP: %s", v);
	cr_assert_str_eq(raw_header(&r, "X-Content-Type-Options", v, sizeof(v)), "nosniff");
	cr_assert_str_eq(raw_header(&r, "Cache-Control", v, sizeof(v)), "no-cache");
	/* Nothing inline for the policy to refuse, nothing from elsewhere. */
	cr_assert_null(strstr(r.body, "<script>"));
	cr_assert_null(strstr(r.body, "<style"));
	cr_assert_null(strstr(r.body, " style="));
	cr_assert_not(has_handler_attribute(r.body), "an inline handler attribute");
	cr_assert_null(strstr(r.body, "http://"));
	cr_assert_null(strstr(r.body, "https://"));
	raw_header(&r, "ETag", tag, sizeof(tag));
	raw_free(&r);
	snprintf(line, sizeof(line), "If-None-Match: %s\r\n", tag);
	r = raw_get("/", NULL, line);
	cr_assert_eq(r.status, 304);
	raw_free(&r);
	for (size_t i = 0; i < 2; i++) {
		r = raw_get(assets[i][0], NULL, NULL);
		cr_assert_eq(r.status, 200, "%s", assets[i][0]);
		raw_header(&r, "Content-Type", v, sizeof(v));
		cr_assert(strncmp(v, assets[i][1], strlen(assets[i][1])) == 0, "%s: %s", assets[i][0], v);
		cr_assert_null(strstr(r.body, "innerHTML"), "%s writes HTML", assets[i][0]);
		cr_assert_null(strstr(r.body, "http://"), "%s names another server", assets[i][0]);
		cr_assert_null(strstr(r.body, "https://"), "%s names another server", assets[i][0]);
		cr_assert_null(strstr(r.body, "localStorage"), "%s keeps something beyond the tab",
			       assets[i][0]);
		raw_free(&r);
	}
	/* Chart.js where Debian installs it, else 404 (the page draws tables). */
	r = raw_get("/assets/chart.js", NULL, NULL);
	cr_assert_eq(r.status, access("/usr/share/javascript/chart.js/chart.min.js", R_OK) == 0 ? 200 : 404);
	raw_free(&r);
	r = raw_get("/assets/nope.js", NULL, NULL);
	cr_assert_eq(r.status, 404);
	raw_free(&r);
}
