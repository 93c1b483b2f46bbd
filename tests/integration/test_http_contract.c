/*
 * test_http_contract.c: what openapi/openapi.yaml's conventions promise
 * about the request itself, checked against the server: the 414 limit
 * counts the whole request target (path and query), and JSON routes read
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

/* The status of the answer to GET `target` sent over a raw socket (for a
 * target longer than the harness's libcurl URL buffer); 0 when none came. */
static int raw_get_status(const dpg_server *s, const char *target)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = 10};
	char head[64], answer[256];
	int fd = socket(AF_INET, SOCK_STREAM, 0), status = 0;
	ssize_t n;

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)s->port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	(void)send(fd, "GET ", 4, MSG_NOSIGNAL);
	(void)send(fd, target, strlen(target), MSG_NOSIGNAL);
	snprintf(head, sizeof(head), " HTTP/1.1\r\nHost: x\r\n\r\n");
	(void)send(fd, head, strlen(head), MSG_NOSIGNAL);
	n = recv(fd, answer, sizeof(answer) - 1, 0);
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
