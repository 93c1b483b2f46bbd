/*
 * test_http_contract.c: what openapi/openapi.yaml's conventions promise
 * about the request itself, checked against the server: the 414 limit
 * counts the whole request target (path and query), a query holds at most
 * 16 parameters (400, however many more it has), and JSON routes read
 * their body as JSON under application/json, curl -d's
 * application/x-www-form-urlencoded and no Content-Type, and refuse
 * anything else with 415.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"

#define URL_LIMIT 2048 /* DPG_MAX_URL_BYTES: the spec's "request target" */
#define QUERY_PARAMS_LIMIT 16 /* DPG_MAX_QUERY_PARAMS: the spec's "query parameters" */
#define CHARGE "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"

/* "/?p=aaa…" of exactly `len` bytes, into buf (len + 1 bytes). */
static void target_of_length(char *buf, size_t len)
{
	static const char prefix[] = "/?p=";

	cr_assert_gt(len, sizeof(prefix) - 1);
	memcpy(buf, prefix, sizeof(prefix) - 1);
	memset(buf + sizeof(prefix) - 1, 'a', len - (sizeof(prefix) - 1));
	buf[len] = '\0';
}

/* A socket to the server on which "GET `target` HTTP/1.1" was sent with a
 * Host header and `extra` header lines ("" for none), and the request's
 * blank line; its reads give up after 10 s.  A raw socket serves targets
 * longer than the harness's libcurl URL buffer. */
static int raw_send_get(const dpg_server *s, const char *target, const char *extra)
{
	static const char version_host[] = " HTTP/1.1\r\nHost: x\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = 10};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)s->port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	(void)send(fd, "GET ", 4, MSG_NOSIGNAL);
	(void)send(fd, target, strlen(target), MSG_NOSIGNAL);
	(void)send(fd, version_host, sizeof(version_host) - 1, MSG_NOSIGNAL);
	(void)send(fd, extra, strlen(extra), MSG_NOSIGNAL);
	(void)send(fd, "\r\n", 2, MSG_NOSIGNAL);
	return fd;
}

/* The status of the answer to GET `target` sent over a raw socket; 0 when
 * none came. */
static int raw_get_status(const dpg_server *s, const char *target)
{
	char answer[256];
	int fd = raw_send_get(s, target, ""), status = 0;
	ssize_t n = recv(fd, answer, sizeof(answer) - 1, 0);

	if (n > 0) {
		answer[n] = '\0';
		if (sscanf(answer, "HTTP/1.1 %d", &status) != 1)
			status = 0;
	}
	close(fd);
	return status;
}

/*
 * A target of 2048 bytes is served; one of 2049, the excess in the query,
 * is 414 problem+json, as one whose path alone is too long; one too long
 * for libmicrohttpd's 16 KiB connection buffer is still 414 (its own
 * answer).  The dashboard's page takes any query parameter, so only the
 * length decides.
 */
Test(http_contract, the_414_limit_counts_path_and_query, .timeout = 120)
{
	static char target[20001];
	dpg_server srv;
	dpg_resp r;

	dpg_server_start(&srv);
	target_of_length(target, URL_LIMIT);
	cr_assert_eq(dpg_http(&srv, "GET", target, NULL, NULL, 0, NULL, &r), 0);
	cr_expect_eq(r.status, 200, "%zu bytes: %ld %s", strlen(target), r.status, r.body);
	dpg_resp_free(&r);

	target_of_length(target, URL_LIMIT + 1);
	cr_assert_eq(dpg_http(&srv, "GET", target, NULL, NULL, 0, NULL, &r), 0);
	cr_expect_eq(r.status, 414, "%zu bytes: %ld %s", strlen(target), r.status, r.body);
	cr_expect_str_eq(r.content_type, "application/problem+json");
	cr_expect_eq(r.json ? json_integer_value(json_object_get(r.json, "status")) : 0, 414);
	dpg_resp_free(&r);

	/* The path alone over the limit: a dataset id segment of 2100 bytes. */
	memcpy(target, "/v1/datasets/", 13);
	memset(target + 13, 'x', 2100);
	target[2113] = '\0';
	cr_assert_eq(dpg_http(&srv, "GET", target, srv.admin_key, NULL, 0, NULL, &r), 0);
	cr_expect_eq(r.status, 414, "%ld %s", r.status, r.body);
	cr_expect_str_eq(r.content_type, "application/problem+json");
	dpg_resp_free(&r);

	target_of_length(target, sizeof(target) - 1);
	cr_expect_eq(raw_get_status(&srv, target), 414);
	dpg_server_destroy(&srv);
}

/* "/?" and `n` parameters named p1, p2, ... (`sep` after each but the
 * last), or `n` empty ones ("&" each) when `named` is false, into buf. */
static void query_of(char *buf, size_t size, unsigned n, bool named)
{
	size_t len = 2;

	memcpy(buf, "/?", 3);
	for (unsigned i = 1; i <= n; i++) {
		int w = named ? snprintf(buf + len, size - len, "p%u%s", i, i < n ? "&" : "") :
				snprintf(buf + len, size - len, "&");

		cr_assert(w > 0 && (size_t)w < size - len);
		len += (size_t)w;
	}
}

/* The status line and headers of the answer to GET `target`, sent over a
 * raw socket (a target longer than the harness's URL buffer), into head;
 * "" when no whole header block came within 10 s. */
static void raw_get_head(const dpg_server *s, const char *target, char *head, size_t size)
{
	int fd = raw_send_get(s, target, "Connection: close\r\n");
	size_t have = 0;
	ssize_t n;

	head[0] = '\0';
	while (have + 1 < size && !strstr(head, "\r\n\r\n") &&
	       (n = recv(fd, head + have, size - 1 - have, 0)) > 0) {
		have += (size_t)n;
		head[have] = '\0';
	}
	if (!strstr(head, "\r\n\r\n"))
		head[0] = '\0';
	close(fd);
}

/*
 * A query of more than 16 parameters is 400 problem+json naming the query,
 * however many more it has: 300 (libmicrohttpd's per-connection memory had
 * run out at some 260, and the client got its bare 431 or nothing), 2000
 * empty ones within the 2048 bytes, and 2000 named ones past them (then
 * 414).  16 are served, the server serves on, and so do sane queries.
 */
Test(http_contract, a_query_of_too_many_parameters_is_refused_whole, .timeout = 120)
{
	static char target[20001];
	static const struct {
		unsigned n;
		bool named;
		int status;
	} cases[] = {
		{QUERY_PARAMS_LIMIT + 1, true, 400}, {300, true, 400},
		{2000, false, 400},                  {2000, true, 414},
	};
	dpg_server srv;
	dpg_resp r;
	char head[4096];

	dpg_server_start(&srv);
	query_of(target, sizeof(target), QUERY_PARAMS_LIMIT, true);
	cr_assert_eq(dpg_http(&srv, "GET", target, NULL, NULL, 0, NULL, &r), 0);
	cr_expect_eq(r.status, 200, "%u parameters: %ld %s", QUERY_PARAMS_LIMIT, r.status, r.body);
	dpg_resp_free(&r);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[32];

		query_of(target, sizeof(target), cases[i].n, cases[i].named);
		raw_get_head(&srv, target, head, sizeof(head));
		snprintf(want, sizeof(want), "HTTP/1.1 %d ", cases[i].status);
		cr_expect_eq(strncmp(head, want, strlen(want)), 0, "%u parameters (%zu bytes): %s",
			     cases[i].n, strlen(target), head);
		cr_expect(strstr(head, "application/problem+json"), "%u parameters: %s",
			  cases[i].n, head);
		if (cases[i].status != 400 || strlen(target) > URL_LIMIT)
			continue;
		/* Short enough for the harness: the problem's text. */
		cr_assert_eq(dpg_http(&srv, "GET", target, NULL, NULL, 0, NULL, &r), 0);
		cr_expect_eq(r.status, 400, "%ld %s", r.status, r.body);
		cr_expect(r.body && strstr(r.body, "query"), "%s", r.body);
		dpg_resp_free(&r);
	}
	/* The server serves on, sane queries included. */
	dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);
	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	dpg_expect_status(&srv, "GET", "/v1/datasets/d/ledger?limit=2", srv.admin_key, NULL, 200);
	dpg_expect_status(&srv, "GET", "/v1/datasets?archived=true", srv.admin_key, NULL, 200);
	dpg_server_destroy(&srv);
}

/*
 * A charge's JSON body is read as JSON under application/json (with a
 * charset), under application/x-www-form-urlencoded (curl -d's default)
 * and with no Content-Type at all: each one charges 0.125.  Under
 * text/plain it is 415 and charges nothing.
 */
Test(http_contract, json_routes_accept_what_curl_d_sends, .timeout = 120)
{
	static const char *const types[][2] = {
		{"Content-Type: application/json; charset=utf-8", NULL},
		{"Content-Type: application/x-www-form-urlencoded", NULL},
		{"Content-Type:", NULL}, /* libcurl then sends no Content-Type */
	};
	static const char *const plain[] = {"Content-Type: text/plain", NULL};
	dpg_server srv;
	dpg_budget b;
	dpg_resp r;

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "d", 1.0, 0, "basic");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE,
				      strlen(CHARGE), types[i], &r), 0);
		cr_expect_eq(r.status, 201, "%s: %ld %s", types[i][0], r.status, r.body);
		dpg_resp_free(&r);
	}
	cr_assert_eq(dpg_http(&srv, "POST", "/v1/datasets/d/charges", srv.admin_key, CHARGE,
			      strlen(CHARGE), plain, &r), 0);
	cr_expect_eq(r.status, 415, "%ld %s", r.status, r.body);
	dpg_resp_free(&r);
	b = dpg_budget_of(&srv, "d");
	cr_expect_eq(b.charges, 3);
	/* 3 x 0.125, exact in binary. */
	cr_expect_eq(b.spent_eps, 0.375);
	dpg_server_destroy(&srv);
}
