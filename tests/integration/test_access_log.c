/*
 * test_access_log.c: the access log's lines under concurrent requests, and
 * how it writes a path that is not plain ASCII.
 *
 * A line is built whole and written in one piece (server/http/http_serve.c);
 * these tests hold it to what docs/operations.md promises: one JSON object
 * a line, one line a request, the path as the server read it, with `"`, `\`,
 * control characters and every byte outside printable ASCII escaped (a byte
 * b >= 0x7f as \u00bb, so a reader decoding the JSON gets U+00bb).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define CLIENTS 4
#define REQUESTS_EACH 50
#define LONG_SEGMENT 200 /* a path the log keeps whole (it cuts at 255 bytes) */

struct client {
	const dpg_server *srv;
	int id;
	int answered;
};

/* The path client `id` asks for in its request `i`: long, and its own
 * within the part of it the log keeps. */
static void long_path(char *out, size_t size, int id, int i)
{
	int n = snprintf(out, size, "/v1/datasets/c%d-r%d-", id, i);

	for (int k = 0; k < LONG_SEGMENT && (size_t)n + 1 < size; k++)
		out[n++] = (char)('a' + (id + i + k) % 26);
	out[n] = '\0';
}

static void *client_run(void *arg)
{
	struct client *c = arg;
	char path[LONG_SEGMENT + 64];

	for (int i = 0; i < REQUESTS_EACH; i++) {
		dpg_resp r;

		long_path(path, sizeof(path), c->id, i);
		if (dpg_http(c->srv, "GET", path, c->srv->admin_key, NULL, 0, NULL, &r) == 0 &&
		    r.status == 404)
			c->answered++;
		dpg_resp_free(&r);
	}
	return NULL;
}

/* The paths of the log's request lines, in order, as a JSON array; fails
 * the test on a line that is not one JSON object. */
static json_t *request_paths(const char *log)
{
	FILE *f = fopen(log, "r");
	json_t *paths = json_array();
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	cr_assert_not_null(f, "%s", log);
	while (getline(&line, &cap, f) > 0) {
		json_error_t err;
		json_t *j = json_loads(line, 0, &err);
		const char *msg;

		n++;
		cr_assert(j && json_is_object(j), "%s line %d is not one JSON object: %.200s", log, n,
			  line);
		msg = json_string_value(json_object_get(j, "msg"));
		if (msg && strcmp(msg, "request") == 0)
			json_array_append(paths, json_object_get(j, "path"));
		json_decref(j);
	}
	free(line);
	fclose(f);
	return paths;
}

/* How many of `paths` are the string `want`. */
static int count_path(const json_t *paths, const char *want)
{
	const json_t *p;
	size_t i;
	int found = 0;

	json_array_foreach(paths, i, p)
		found += json_is_string(p) && strcmp(json_string_value(p), want) == 0;
	return found;
}

Test(access_log, one_whole_line_per_request_from_concurrent_clients, .timeout = 300)
{
	dpg_server srv;
	pthread_t th[CLIENTS];
	struct client cl[CLIENTS];
	char path[LONG_SEGMENT + 64];
	const int total = CLIENTS * REQUESTS_EACH;
	json_t *paths;

	dpg_server_start(&srv);
	for (int i = 0; i < CLIENTS; i++) {
		cl[i] = (struct client){.srv = &srv, .id = i};
		cr_assert_eq(pthread_create(&th[i], NULL, client_run, &cl[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(cl[i].answered, REQUESTS_EACH, "client %d: %d answers of 404", i,
			     cl[i].answered);
	}
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	paths = request_paths(srv.log);
	for (int id = 0; id < CLIENTS; id++)
		for (int i = 0; i < REQUESTS_EACH; i++) {
			long_path(path, sizeof(path), id, i);
			cr_expect_eq(count_path(paths, path), 1,
				     "client %d request %d: not exactly one log line with its path", id,
				     i);
		}
	/* the server's own requests (the harness's /healthz polls) come on top */
	cr_expect_geq((int)json_array_size(paths), total, "%zu request lines for %d requests",
		      json_array_size(paths), total);
	json_decref(paths);
	dpg_server_destroy(&srv);
}

Test(access_log, escapes_quotes_controls_and_bytes_outside_ascii)
{
	dpg_server srv;
	dpg_resp r;
	json_t *paths;
	/* %22 ", %5C \, %0A newline, %09 tab, %C3%A9 the two bytes of UTF-8 é */
	const char *sent = "/v1/datasets/a%22b%5Cc%0Ad%09e%C3%A9f";
	/* What the log's JSON decodes to: the path as read (percent-decoded),
	 * each byte >= 0x7f as the code point of that value: 0xC3 -> U+00C3
	 * (UTF-8 C3 83), 0xA9 -> U+00A9 (UTF-8 C2 A9). */
	const char *want = "/v1/datasets/a\"b\\c\nd\te\xC3\x83\xC2\xA9" "f";

	dpg_server_start(&srv);
	cr_assert_eq(dpg_http(&srv, "GET", sent, srv.admin_key, NULL, 0, NULL, &r), 0);
	cr_expect_eq(r.status, 404, "%ld", r.status);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	paths = request_paths(srv.log);
	cr_expect_eq(count_path(paths, want), 1, "no log line decodes to the path");
	json_decref(paths);
	dpg_server_destroy(&srv);
}
