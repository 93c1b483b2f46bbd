/*
 * test_bad_inputs.c: a table of bad requests.  Each gets the right status
 * and a problem+json body (naming the field where one is at fault), and
 * none changes the ledger.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <netinet/in.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dpg_limits.h"
#include "harness.h"
#include "test_math.h"

enum key_kind { K_ADMIN, K_NONE, K_GARBAGE, K_WRONG_SECRET };

struct bad_case {
	const char *name;
	const char *method;
	const char *path;
	enum key_kind key;
	const char *content_type;  /* NULL = application/json */
	const char *body;          /* NULL = no body */
	long status;
	const char *field;         /* expected "field", or NULL for none required */
};

#define CH "/v1/datasets/t/charges"
#define EV(x) "{\"event\":" x "}"

static const struct bad_case cases[] = {
	{"malformed json", "POST", CH, K_ADMIN, NULL, "{\"event\":", 400, ""},
	{"not an object", "POST", CH, K_ADMIN, NULL, "[1,2,3]", 400, ""},
	{"empty body", "POST", CH, K_ADMIN, NULL, "", 400, ""},
	{"NaN literal", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":NaN}"), 400, NULL},
	{"Infinity literal", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":Infinity}"), 400, NULL},
	{"overflowing number", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1e400}"), 400, "/event/noise_multiplier"},
	{"integer past 2^64", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"self_composed\",\"count\":18446744073709551616,\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1}}"), 400, "/event/count"},
	{"overflow inside an array", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"composed\",\"events\":[{\"type\":\"laplace\",\"noise_multiplier\":1},{\"type\":\"laplace\",\"noise_multiplier\":-1e999}]}"), 400, "/event/events/1/noise_multiplier"},
	{"negative noise", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":-1}"), 400, "/event/noise_multiplier"},
	{"zero noise", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"gaussian\",\"noise_multiplier\":0}"), 400, "/event/noise_multiplier"},
	{"string for number", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":\"2\"}"), 400, "/event/noise_multiplier"},
	{"negative epsilon", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"epsilon_delta\",\"epsilon\":-0.1,\"delta\":0}"), 400, "/event/epsilon"},
	{"delta above one", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"epsilon_delta\",\"epsilon\":0.1,\"delta\":2}"), 400, "/event/delta"},
	{"huge count", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"self_composed\",\"count\":1000000000000,\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1}}"), 400, "/event/count"},
	{"zero count", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"self_composed\",\"count\":0,\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1}}"), 400, "/event/count"},
	{"fractional count", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"self_composed\",\"count\":2.5,\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1}}"), 400, "/event/count"},
	{"q above one", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"poisson_sampled\",\"sampling_probability\":1.5,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1}}"), 400, "/event/sampling_probability"},
	{"unknown event type", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"magic\"}"), 400, "/event/type"},
	{"missing event", "POST", CH, K_ADMIN, NULL, "{}", 400, "/event"},
	{"missing nested event", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"self_composed\",\"count\":2}"), 400, "/event/event"},
	{"bad item in composed", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"composed\",\"events\":[{\"type\":\"laplace\",\"noise_multiplier\":1},{\"type\":\"laplace\"}]}"), 400, "/event/events/1/noise_multiplier"},
	{"unknown field", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1,\"noise_multipler\":2}"), 400, "/event/noise_multipler"},
	{"unknown top-level field", "POST", CH, K_ADMIN, NULL, "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},\"extra\":1}", 400, "/extra"},
	{"duplicate keys", "POST", CH, K_ADMIN, NULL, "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1,\"noise_multiplier\":0.001}}", 400, NULL},
	{"event nesting too deep", "POST", CH, K_ADMIN, NULL,
	 EV("{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"self_composed\",\"count\":1,\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1}}}}}}}}}}}"), 400, NULL},
	{"note too long", "POST", CH, K_ADMIN, NULL, NULL /* filled in below */, 400, "/note"},
	{"invalid utf-8", "POST", CH, K_ADMIN, NULL, "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},\"note\":\"\xff\xfe\"}", 400, NULL},
	{"wrong content type", "POST", CH, K_ADMIN, "text/plain", EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 415, NULL},
	{"json as a prefix of another type", "POST", CH, K_ADMIN, "application/jsonx", EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 415, NULL},
	{"json-seq", "POST", CH, K_ADMIN, "application/json-seq", EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 415, NULL},
	{"xml upload", "PUT", "/v1/datasets/t/data", K_ADMIN, "application/xml", "<table/>", 415, NULL},
	{"no key", "POST", CH, K_NONE, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 401, NULL},
	{"garbage key", "POST", CH, K_GARBAGE, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 401, NULL},
	{"wrong secret", "POST", CH, K_WRONG_SECRET, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 401, NULL},
	{"unknown route", "GET", "/v1/nothing", K_ADMIN, NULL, NULL, 404, NULL},
	{"unknown dataset", "POST", "/v1/datasets/nope/charges", K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 404, NULL},
	{"bad id characters", "GET", "/v1/datasets/a%20b", K_ADMIN, NULL, NULL, 404, NULL},
	/* An encoded NUL ended the decoded path and an encoded slash split a
	 * segment: DELETE /v1/datasets/t%00/charges archived t, and
	 * /v1/datasets/t%2Fbudget answered t's budget (found by test_fuzz). */
	{"encoded NUL in an id", "GET", "/v1/datasets/t%00/budget", K_ADMIN, NULL, NULL, 404, NULL},
	{"encoded NUL before a segment", "DELETE", "/v1/datasets/t%00/charges", K_ADMIN, NULL, NULL, 405, NULL},
	{"encoded slash in an id", "GET", "/v1/datasets/t%2Fbudget", K_ADMIN, NULL, NULL, 404, NULL},
	{"encoded NUL in a query value", "GET", "/v1/datasets/t/ledger?limit=5%00", K_ADMIN, NULL, NULL, 400, "limit"},
	{"wrong method", "PUT", "/v1/datasets/t/charges", K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 405, NULL},
	{"trailing slash", "GET", "/v1/datasets/", K_ADMIN, NULL, NULL, 404, NULL},
	{"budget not a number", "PATCH", "/v1/datasets/t", K_ADMIN, NULL, "{\"budget\":{\"epsilon\":\"lots\"}}", 400, "/budget/epsilon"},
	{"budget zero", "PATCH", "/v1/datasets/t", K_ADMIN, NULL, "{\"budget\":{\"epsilon\":0}}", 400, "/budget/epsilon"},
	{"dataset bad accountant", "POST", "/v1/datasets", K_ADMIN, NULL, "{\"id\":\"x\",\"budget\":{\"epsilon\":1,\"delta\":0},\"accountant\":\"pld\"}", 400, "/accountant"},
	{"dataset bad id", "POST", "/v1/datasets", K_ADMIN, NULL, "{\"id\":\"a/b\",\"budget\":{\"epsilon\":1,\"delta\":0}}", 400, "/id"},
	{"repeated query parameter", "GET", "/v1/datasets/t/ledger?limit=1&limit=abc", K_ADMIN, NULL, NULL, 400, "limit"},
	{"too many query parameters", "GET", "/v1/datasets/t/ledger?a=1&b=1&c=1&d=1&e=1&f=1&g=1&h=1&i=1&j=1&k=1&l=1&m=1&n=1&o=1&p=1&q=1", K_ADMIN, NULL, NULL, 400, NULL},
	{"dataset id dot", "POST", "/v1/datasets", K_ADMIN, NULL, "{\"id\":\".\",\"budget\":{\"epsilon\":1,\"delta\":0}}", 400, "/id"},
	{"dataset id dot dot", "POST", "/v1/datasets", K_ADMIN, NULL, "{\"id\":\"..\",\"budget\":{\"epsilon\":1,\"delta\":0}}", 400, "/id"},
	{"dataset delta one", "POST", "/v1/datasets", K_ADMIN, NULL, "{\"id\":\"x\",\"budget\":{\"epsilon\":1,\"delta\":1}}", 400, "/budget/delta"},
	{"dataset bad neighbor", "POST", "/v1/datasets", K_ADMIN, NULL, "{\"id\":\"x\",\"budget\":{\"epsilon\":1,\"delta\":0},\"neighbor\":\"swap\"}", 400, "/neighbor"},
	{"reservation ttl negative", "POST", "/v1/datasets/t/reservations", K_ADMIN, NULL, "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},\"ttl_seconds\":-5}", 400, "/ttl_seconds"},
	{"unknown reservation", "POST", "/v1/datasets/t/reservations/rsv_0000/commit", K_ADMIN, NULL, NULL, 404, NULL},
	{"idempotency key too long", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 400, "Idempotency-Key"},
	{"idempotency key not ascii", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"laplace\",\"noise_multiplier\":1}"), 400, "Idempotency-Key"},
	{"key role unknown", "POST", "/v1/keys", K_ADMIN, NULL, "{\"role\":\"root\"}", 400, "/role"},
	{"analyst key without scope", "POST", "/v1/keys", K_ADMIN, NULL, "{\"role\":\"analyst\"}", 400, "/datasets"},
	{"basic ledger cannot price gaussian without a delta share", "POST", CH, K_ADMIN, NULL, EV("{\"type\":\"gaussian\",\"noise_multiplier\":1}"), 422, NULL},
};

static int ledger_rows(const dpg_server *s)
{
	dpg_resp r = dpg_call(s, "GET", "/v1/datasets/t/ledger?limit=1000", s->admin_key, NULL);
	int n = (int)json_array_size(json_object_get(r.json, "entries"));

	dpg_resp_free(&r);
	return n;
}

Test(bad_inputs, each_gets_its_status_and_changes_nothing, .timeout = 180)
{
	dpg_server srv;
	char long_note[2200];
	char note_body[2400];
	char hdr_ct[128];
	char big_key[300];

	dpg_server_start(&srv);
	dpg_make_dataset(&srv, "t", 1.0, 1e-6, "basic");
	memset(long_note, 'a', sizeof(long_note) - 1);
	long_note[sizeof(long_note) - 1] = '\0';
	snprintf(note_body, sizeof(note_body),
		 "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},\"note\":\"%s\"}", long_note);
	memset(big_key, 'k', 200);
	big_key[200] = '\0';

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *c = &cases[i];
		const char *body = c->body;
		const char *hdrs[4] = {NULL};
		char idem[sizeof("Idempotency-Key: ") + sizeof(big_key)];
		const char *key = NULL;
		char wrong[200];
		int nh = 0;
		dpg_resp r;

		if (strcmp(c->name, "note too long") == 0)
			body = note_body;
		if (c->content_type) {
			snprintf(hdr_ct, sizeof(hdr_ct), "Content-Type: %s", c->content_type);
			hdrs[nh++] = hdr_ct;
		}
		if (strcmp(c->name, "idempotency key too long") == 0) {
			snprintf(idem, sizeof(idem), "Idempotency-Key: %s", big_key);
			hdrs[nh++] = idem;
		}
		if (strcmp(c->name, "idempotency key not ascii") == 0)
			hdrs[nh++] = "Idempotency-Key: caf\xc3\xa9-\xff";
		switch (c->key) {
		case K_ADMIN: key = srv.admin_key; break;
		case K_NONE: key = NULL; break;
		case K_GARBAGE: key = "not-a-key"; break;
		case K_WRONG_SECRET:
			snprintf(wrong, sizeof(wrong), "%s", srv.admin_key);
			wrong[strlen(wrong) - 1] = wrong[strlen(wrong) - 1] == '0' ? '1' : '0';
			key = wrong;
			break;
		}
		cr_assert_eq(dpg_http(&srv, c->method, c->path, key, body, body ? strlen(body) : 0,
				      hdrs, &r), 0, "%s: no answer", c->name);
		cr_expect_eq(r.status, c->status, "%s: status %ld, want %ld: %s", c->name, r.status,
			     c->status, r.body);
		cr_expect_str_eq(r.content_type, "application/problem+json", "%s: content type %s",
				 c->name, r.content_type);
		cr_expect(json_is_object(r.json) && json_integer_value(json_object_get(r.json, "status")) == c->status &&
				  json_is_string(json_object_get(r.json, "detail")) &&
				  json_is_string(json_object_get(r.json, "title")),
			  "%s: not problem+json: %s", c->name, r.body);
		if (c->field)
			cr_expect(json_is_string(json_object_get(r.json, "field")) &&
					  strcmp(json_string_value(json_object_get(r.json, "field")), c->field) == 0,
				  "%s: field %s, want %s", c->name, r.body, c->field);
		dpg_resp_free(&r);
	}
	/* Nothing was charged or recorded. */
	{
		dpg_resp r = dpg_call(&srv, "GET", "/v1/datasets/t/budget", srv.admin_key, NULL);

		cr_assert_eq(dpg_num(r.json, "charges"), 0);
		cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.0);
		cr_assert_eq(dpg_num(r.json, "budget.epsilon"), 1.0);
		dpg_resp_free(&r);
	}
	cr_assert_eq(ledger_rows(&srv), 0);
	dpg_server_destroy(&srv);
}

/* Starts srv with dataset t (basic, epsilon 1), which the refused
 * requests below aim at; returns t's budget and ledger as they start. */
static dpg_budget start_with_t(dpg_server *srv)
{
	dpg_server_start(srv);
	dpg_make_dataset(srv, "t", 1.0, 0, "basic");
	return dpg_budget_of(srv, "t");
}

/* t's budget and ledger are still as `before` says. */
static void expect_t_unchanged(const dpg_server *srv, const dpg_budget *before)
{
	dpg_budget after = dpg_budget_of(srv, "t");

	cr_expect_eq(after.charges, before->charges);
	cr_expect_eq(after.ledger_rows, before->ledger_rows);
	cr_expect_eq(after.spent_eps, before->spent_eps);
	cr_expect_eq(after.spent_delta, before->spent_delta);
}

Test(bad_inputs, oversize_body_is_413_and_changes_nothing, .timeout = 60)
{
	dpg_server srv;
	size_t n = 2u << 20;
	char *big = malloc(n + 1);
	dpg_resp r;

	start_with_t(&srv);
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	big[n] = '\0';
	cr_assert_eq(dpg_http(&srv, "POST", CH, srv.admin_key, big, n, NULL, &r), 0);
	cr_assert_eq(r.status, 413);
	cr_assert_str_eq(r.content_type, "application/problem+json");
	dpg_resp_free(&r);
	/* The data route takes 64 MiB of text/csv, but its JSON form keeps
	 * the 1 MiB of every JSON body (it is parsed whole: 64 MiB of JSON
	 * took the server past a gigabyte). */
	cr_assert_eq(dpg_http(&srv, "PUT", "/v1/datasets/t/data", srv.admin_key, big, n, NULL, &r),
		     0);
	cr_assert_eq(r.status, 413, "%s", r.body);
	cr_assert_str_eq(r.content_type, "application/problem+json");
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/v1/datasets/t/data", srv.admin_key, NULL, 404);
	/* The server is still healthy. */
	dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);
	free(big);
	cr_assert_eq(ledger_rows(&srv), 0);
	dpg_server_destroy(&srv);
}

/* Sends raw bytes on a new connection and reads until the server closes it
 * (or 5 s pass); returns what came back, NUL-terminated (caller frees).
 * *ret_closed (when not NULL) tells whether the server closed the
 * connection (end of stream or a reset) rather than leaving it open. */
static char *raw_exchange(const dpg_server *srv, const char *req, size_t len, bool *ret_closed)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv->port)};
	struct timeval tv = {.tv_sec = 5};
	size_t cap = 65536, have = 0;
	char *out = malloc(cap);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t k = 0;

	cr_assert(out && fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(write(fd, req, len), (ssize_t)len);
	while (have + 1 < cap && (k = read(fd, out + have, cap - have - 1)) > 0)
		have += (size_t)k;
	if (ret_closed)
		*ret_closed = k == 0 || (k < 0 && errno == ECONNRESET);
	out[have] = '\0';
	close(fd);
	return out;
}

/* How many times `needle` occurs in `hay`. */
static int occurrences(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* A refused request got exactly one answer with `status_line`, as
 * problem+json, and the server closed the connection after it. */
static void expect_refused_and_closed(const char *what, const char *out, bool closed,
				      const char *status_line)
{
	cr_expect(strncmp(out, status_line, strlen(status_line)) == 0, "%s: %.300s", what, out);
	cr_expect(strstr(out, "Content-Type: application/problem+json"), "%s: %.300s", what, out);
	cr_expect(strstr(out, "Connection: close"), "%s: %.300s", what, out);
	cr_expect_eq(occurrences(out, "HTTP/1.1 "), 1, "%s: %.600s", what, out);
	cr_expect(closed, "%s: the connection was left open: %.300s", what, out);
}

/* Writes a POST to the charges of t with the admin key into req (size
 * bytes): the request line, Host and Authorization, then `fmt` with its
 * arguments (the other headers and the body).  Returns the length. */
__attribute__((format(printf, 4, 0)))
static int vcharge_request(char *req, size_t size, const dpg_server *srv, const char *fmt,
			   va_list ap)
{
	int n = snprintf(req, size, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n",
			 CH, srv->admin_key);

	cr_assert(n > 0 && (size_t)n < size);
	n += vsnprintf(req + n, size - (size_t)n, fmt, ap);
	cr_assert((size_t)n < size, "request too long for its buffer");
	return n;
}

__attribute__((format(printf, 4, 5)))
static int charge_request(char *req, size_t size, const dpg_server *srv, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vcharge_request(req, size, srv, fmt, ap);
	va_end(ap);
	return n;
}

/* Sends a charge request of t whose other headers and body are `fmt` (as
 * charge_request), on a connection of its own, and checks that it is
 * refused with `status_line` and the connection closed.  Returns the
 * answer (the caller frees it). */
__attribute__((format(printf, 4, 5)))
static char *refused_charge(const dpg_server *srv, const char *what, const char *status_line,
			    const char *fmt, ...)
{
	char req[2048], *out;
	va_list ap;
	bool closed;
	int n;

	va_start(ap, fmt);
	n = vcharge_request(req, sizeof(req), srv, fmt, ap);
	va_end(ap);
	out = raw_exchange(srv, req, (size_t)n, &closed);
	expect_refused_and_closed(what, out, closed, status_line);
	return out;
}

/*
 * Two Content-Length headers frame the body two ways (a proxy reading the
 * other one would see a hidden request): refused with 400 and the
 * connection closed, nothing read or charged.  libmicrohttpd took the
 * first value and answered 201.
 */
Test(bad_inputs, two_content_lengths_are_refused, .timeout = 60)
{
	static const char body[] = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.1,"
				   "\"delta\":0}}";
	char req[1024], *out;
	dpg_server srv;
	int n;

	start_with_t(&srv);
	n = charge_request(req, sizeof(req), &srv,
			   "Content-Type: application/json\r\nContent-Length: %zu\r\n"
			   "Content-Length: 3\r\n\r\n%s",
			   strlen(body), body);
	out = raw_exchange(&srv, req, (size_t)n, NULL);
	cr_assert(strncmp(out, "HTTP/1.1 400 ", 13) == 0, "%.200s", out);
	cr_assert(strstr(out, "Connection: close"), "%.300s", out);
	cr_assert(strstr(out, "\"field\":\"Content-Length\""), "%.300s", out);
	free(out);
	cr_assert_eq(ledger_rows(&srv), 0);
	dpg_server_destroy(&srv);
}

#define CHARGE_BODY "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.1,\"delta\":0}}"

/*
 * Transfer-Encoding: chunked beside a Content-Length frames the body two
 * ways (RFC 9112, 6.3): refused with 400 naming Transfer-Encoding and the
 * connection closed, so the request pipelined behind it is never read.
 * libmicrohttpd decoded the chunks, charged (201) and answered the
 * pipelined GET /healthz (200) on the same connection.
 */
Test(bad_inputs, chunked_with_content_length_is_refused, .timeout = 60)
{
	dpg_server srv;
	dpg_budget before = start_with_t(&srv);
	char *out = refused_charge(&srv, "chunked and Content-Length", "HTTP/1.1 400 ",
				   "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
				   "Content-Length: %zu\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n"
				   "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
				   strlen(CHARGE_BODY), strlen(CHARGE_BODY), CHARGE_BODY);

	cr_expect(strstr(out, "\"field\":\"Transfer-Encoding\""), "%.400s", out);
	free(out);
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * A Transfer-Encoding other than one `chunked` is refused at once and the
 * connection closed (RFC 9112): 400 when chunked is not the last coding or
 * is applied twice, since the body's length cannot then be told (6.3,
 * 7.1); 501 for a coding before the final chunked, which libmicrohttpd
 * cannot decode (6.1).  libmicrohttpd read such a body until the client
 * closed, so the client got no answer until the 30 s idle timeout.
 */
Test(bad_inputs, a_transfer_encoding_other_than_chunked_is_refused, .timeout = 120)
{
	static const struct {
		const char *codings, *status;
	} tes[] = {
		{"gzip", "HTTP/1.1 400 "},
		{"identity", "HTTP/1.1 400 "},
		{"chunked, gzip", "HTTP/1.1 400 "},
		{"chunked, chunked", "HTTP/1.1 400 "},
		{"chunked\r\nTransfer-Encoding: chunked", "HTTP/1.1 400 "},
		{"gzip, chunked", "HTTP/1.1 501 "},
		{"gzip\r\nTransfer-Encoding: chunked", "HTTP/1.1 501 "},
		{"chunked;x=1", "HTTP/1.1 501 "},
		{"chunked,", "HTTP/1.1 501 "},
	};
	dpg_server srv;
	dpg_budget before;

	before = start_with_t(&srv);
	for (size_t i = 0; i < sizeof(tes) / sizeof(tes[0]); i++) {
		char *out = refused_charge(&srv, tes[i].codings, tes[i].status,
					   "Content-Type: application/json\r\nTransfer-Encoding: %s\r\n"
					   "\r\n%zx\r\n%s\r\n0\r\n\r\n",
					   tes[i].codings, strlen(CHARGE_BODY), CHARGE_BODY);

		cr_expect(strstr(out, "\"field\":\"Transfer-Encoding\""), "%s: %.400s",
			  tes[i].codings, out);
		free(out);
	}
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * Expect: 100-continue with a Content-Length over DPG_MAX_BODY_BYTES: the
 * client has sent no body yet, so the 413 comes at once, without 100
 * Continue, and the connection is closed.  The server used to answer 100
 * Continue and wait for the 2 MiB body.
 */
Test(bad_inputs, expect_continue_oversize_is_413_at_once, .timeout = 60)
{
	dpg_server srv;
	dpg_budget before = start_with_t(&srv);
	char *out = refused_charge(&srv, "Expect: 100-continue", "HTTP/1.1 413 ",
				   "Content-Type: application/json\r\nExpect: 100-continue\r\n"
				   "Content-Length: %u\r\n\r\n",
				   2097152u /* twice DPG_MAX_BODY_BYTES */);

	cr_expect(!strstr(out, "100 Continue"), "%.300s", out);
	free(out);
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

Test(bad_inputs, deep_json_is_refused_not_recursed, .timeout = 60)
{
	dpg_server srv;
	char body[4200];
	size_t n = 0;
	dpg_resp r;
	dpg_budget before = start_with_t(&srv);

	n += (size_t)snprintf(body, sizeof(body), "{\"event\":");
	for (int i = 0; i < 2000; i++)
		body[n++] = '[';
	for (int i = 0; i < 2000; i++)
		body[n++] = ']';
	body[n++] = '}';
	body[n] = '\0';
	r = dpg_call(&srv, "POST", CH, srv.admin_key, body);
	cr_assert_eq(r.status, 400, "%s", r.body);
	cr_assert(strstr(r.body, "deeper"));
	dpg_resp_free(&r);
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * A NUL byte inside the request target: the target reaches dpgate as a C
 * string, cut at the NUL, so DELETE /v1/datasets/t<NUL>/charges ran as
 * DELETE /v1/datasets/t and archived t (as %00 once did).  Now 400, the
 * connection closed, and t untouched.
 */
Test(bad_inputs, a_nul_byte_in_the_request_target_is_refused, .timeout = 60)
{
	static const char *const targets[] = {"/v1/datasets/t\0/charges", "/v1/datasets/t\0x/budget",
					      "/v1/datasets/t?x\0y"};
	static const char *const methods[] = {"DELETE", "GET", "GET"};
	static const size_t target_len[] = {sizeof("/v1/datasets/t\0/charges") - 1,
					    sizeof("/v1/datasets/t\0x/budget") - 1,
					    sizeof("/v1/datasets/t?x\0y") - 1};
	dpg_server srv;
	dpg_budget before = start_with_t(&srv);
	dpg_resp r;

	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		char req[1024], tail[512], *out;
		size_t n = 0;
		bool closed;
		int m;

		n += (size_t)snprintf(req, sizeof(req), "%s ", methods[i]);
		memcpy(req + n, targets[i], target_len[i]);
		n += target_len[i];
		m = snprintf(tail, sizeof(tail), " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n",
			     srv.admin_key);
		memcpy(req + n, tail, (size_t)m);
		n += (size_t)m;
		out = raw_exchange(&srv, req, n, &closed);
		expect_refused_and_closed(targets[i], out, closed, "HTTP/1.1 400 ");
		free(out);
	}
	r = dpg_call(&srv, "GET", "/v1/datasets/t", srv.admin_key, NULL);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(json_is_false(json_object_get(r.json, "archived")), "%s", r.body);
	dpg_resp_free(&r);
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * Idempotency-Key, like Authorization, is one field: with two, the first
 * was taken, and a retry carrying the second was charged again.  Two are a
 * 400 naming the header, in either order, and nothing is charged.
 */
Test(bad_inputs, a_repeated_idempotency_key_is_refused, .timeout = 60)
{
	static const char *const pairs[] = {"Idempotency-Key: d1\r\nIdempotency-Key: d2\r\n",
					    "Idempotency-Key: d2\r\nidempotency-key: d1\r\n"};
	dpg_server srv;
	dpg_budget before = start_with_t(&srv);

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		char req[1024];
		int n = charge_request(req, sizeof(req), &srv,
				       "%sContent-Type: application/json\r\nContent-Length: %zu\r\n"
				       "\r\n%s",
				       pairs[i], strlen(CHARGE_BODY), CHARGE_BODY);
		char *out = raw_exchange(&srv, req, (size_t)n, NULL);

		cr_expect(strncmp(out, "HTTP/1.1 400 ", 13) == 0, "pair %zu: %.300s", i, out);
		cr_expect(strstr(out, "application/problem+json"), "pair %zu: %.300s", i, out);
		cr_expect(strstr(out, "\"field\":\"Idempotency-Key\""), "pair %zu: %.300s", i, out);
		free(out);
	}
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * A header name that is not a token: "Content-Length : N" was kept as a
 * header named "Content-Length " and framed no body, so the body (here a
 * whole charge request) ran as the next request on the connection and
 * charged.  Now 400 naming the header, the connection closed, no charge.
 */
Test(bad_inputs, a_header_name_with_a_space_is_refused_and_hides_no_request, .timeout = 60)
{
	static const char *const names[] = {"Content-Length ", "Transfer-Encoding ", "X-A\tB"};
	char inner[1024];
	dpg_server srv;
	dpg_budget before;

	before = start_with_t(&srv);
	charge_request(inner, sizeof(inner), &srv,
		       "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		       strlen(CHARGE_BODY), CHARGE_BODY);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *out = refused_charge(&srv, names[i], "HTTP/1.1 400 ", "%s: %zu\r\n\r\n%s",
					   names[i], strlen(inner), inner);

		cr_expect(strstr(out, "not an HTTP token"), "%.400s", out);
		free(out);
	}
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * A body that may be large (declared over 64 KiB, or chunked) is read only
 * after the route, key, role and scope were checked: without them the
 * answer comes before the body, and the connection closes, so no one can
 * make the server hold a 64 MiB upload per connection.  Only 1000 of the
 * declared bytes are sent: an answer proves the body was not awaited.
 */
Test(bad_inputs, a_large_body_is_refused_before_it_is_read_without_a_key, .timeout = 60)
{
	dpg_server srv;
	dpg_budget before;
	char viewer[160];
	static const char pad[1001] = {[0 ... 999] = 'a'};
	struct {
		const char *head;
		const char *key;
		const char *status;
	} gated[] = {
		{"PUT /zzz/data HTTP/1.1\r\nContent-Length: 62914560", NULL, "HTTP/1.1 404 "},
		{"PUT /v1/datasets/t/data HTTP/1.1\r\nContent-Type: text/csv\r\nContent-Length: 62914560",
		 NULL, "HTTP/1.1 401 "},
		{"PUT /v1/datasets/t/data HTTP/1.1\r\nContent-Type: text/csv\r\nContent-Length: 62914560",
		 viewer, "HTTP/1.1 403 "},
		{"PUT /v1/datasets/t/data HTTP/1.1\r\nContent-Type: text/csv\r\nExpect: 100-continue\r\n"
		 "Content-Length: 62914560", NULL, "HTTP/1.1 401 "},
		{"POST /v1/datasets/t/dry-run HTTP/1.1\r\nTransfer-Encoding: chunked", NULL, "HTTP/1.1 401 "},
	};

	before = start_with_t(&srv);
	dpg_make_key(&srv, "viewer", "t", viewer, sizeof(viewer));
	for (size_t i = 0; i < sizeof(gated) / sizeof(gated[0]); i++) {
		char req[4096], auth[256] = "", *out;
		bool closed;
		int n;

		if (gated[i].key)
			snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", gated[i].key);
		n = snprintf(req, sizeof(req), "%s\r\nHost: x\r\n%s\r\n%s", gated[i].head, auth,
			     strstr(gated[i].head, "chunked") ? "3e8\r\n" : "");
		memcpy(req + n, pad, 1000);
		n += 1000;
		out = raw_exchange(&srv, req, (size_t)n, &closed);
		expect_refused_and_closed(gated[i].head, out, closed, gated[i].status);
		cr_expect(!strstr(out, "100 Continue"), "%.300s", out);
		free(out);
	}
	expect_t_unchanged(&srv, &before);
	dpg_server_destroy(&srv);
}

/*
 * A body sent a byte at a time: the idle timeout (30 s) never fires, and
 * the connection was held for as long as the client kept dripping.  With
 * --body-timeout 2 the server cuts it about 2 s after the headers (at the
 * first byte after that), long before the declared 100 bytes arrive; the
 * request changes nothing, and the next client is served.
 */
Test(bad_inputs, a_body_that_drips_is_cut_at_the_body_timeout, .timeout = 60)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = 1};
	dpg_server srv;
	dpg_budget before;
	char req[1024], buf[256];
	double t0, cut = -1;
	int fd, n;

	start_with_t(&srv);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.body_timeout_s = "2";
	dpg_server_restart(&srv);
	before = dpg_budget_of(&srv, "t");
	n = charge_request(req, sizeof(req), &srv,
			   "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"event\":");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons((uint16_t)srv.port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	t0 = dpg_now_s();
	while (dpg_now_s() - t0 < 20) {
		ssize_t k;

		usleep(500000);
		if (send(fd, " ", 1, MSG_NOSIGNAL) != 1) {
			cut = dpg_now_s() - t0;
			break;
		}
		k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			cut = dpg_now_s() - t0;
			break;
		}
	}
	close(fd);
	cr_assert_geq(cut, 1.5, "cut after %.2f s, before the body timeout", cut);
	cr_assert_leq(cut, 6.0, "the dripping body was not cut (%.2f s)", cut);
	expect_t_unchanged(&srv, &before);
	dpg_expect_status(&srv, "GET", "/healthz", NULL, NULL, 200);
	dpg_server_destroy(&srv);
}

/* ---- the command line ----------------------------------------------------------- */

/* The stateless commands: each one's --help shows a complete example body. */
static const char *const stateless_cmds[] = {"epsilon", "delta", "calibrate", "compare", "rdp",
					     "pate-cost", "pate-smooth-sensitivity",
					     "label-em-guidance"};

/*
 * Runs dpgate with `args` (NULL-terminated, without the binary) and returns
 * its exit status; out gets its stderr when `want_stderr`, else its stdout.
 */
static int cli(char *out, size_t size, bool want_stderr, const char *const *args)
{
	const char *argv[16] = {"/bin/sh", "-c",
				want_stderr ? "exec \"$@\" 2>&1 >/dev/null" : "exec \"$@\" 2>/dev/null",
				"sh", dpg_bin()};
	size_t n = 5;

	for (size_t i = 0; args[i]; i++) {
		cr_assert_lt(n, sizeof(argv) / sizeof(argv[0]) - 1);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return dpg_run(out, size, argv);
}

/* Writes `text` to a new file in a new directory; returns its path. */
static void temp_file(char *path, size_t size, const char *name, const char *text)
{
	char dir[] = "/tmp/dpgate-cli-XXXXXX";
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, size, "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert(fputs(text, f) >= 0 && fclose(f) == 0);
}

static void remove_temp_file(const char *path)
{
	char dir[400];

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	unlink(path);
	rmdir(dir);
}

/* `dpgate check` (with --json if json) on a policy file holding `policy`,
 * as cli() runs it: its exit status, and its output in out. */
static int check_policy(char *out, size_t size, bool want_stderr, const char *policy, bool json)
{
	char path[400];
	int rc;

	temp_file(path, sizeof(path), "policy.json", policy);
	rc = cli(out, size, want_stderr, (const char *const[]){"check", path, json ? "--json" : NULL,
								  NULL});
	remove_temp_file(path);
	return rc;
}

Test(cli, help_lists_version_and_help_cmd_is_cmd_help)
{
	static const char *const cmds[] = {"serve", "keys", "epsilon", "delta", "calibrate",
					   "compare", "rdp", "pate-cost", "pate-smooth-sensitivity",
					   "label-em-guidance", "check", "verify", "backup",
					   "routes"};
	char top[16384], a[16384], b[16384];

	cr_assert_eq(cli(top, sizeof(top), false, (const char *const[]){"--help", NULL}), 0);
	cr_assert(strstr(top, "--version"), "--version is not in dpgate --help:\n%s", top);
	cr_assert_eq(cli(a, sizeof(a), false, (const char *const[]){"--version", NULL}), 0);
	cr_assert(!strncmp(a, "dpgate ", 7), "%s", a);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char usage[64];

		cr_assert(strstr(top, cmds[i]), "%s is not in dpgate --help", cmds[i]);
		cr_assert_eq(cli(a, sizeof(a), false, (const char *const[]){"help", cmds[i], NULL}), 0,
			     "dpgate help %s", cmds[i]);
		cr_assert_eq(cli(b, sizeof(b), false, (const char *const[]){cmds[i], "--help", NULL}),
			     0, "dpgate %s --help", cmds[i]);
		snprintf(usage, sizeof(usage), "usage: dpgate %s", cmds[i]);
		cr_assert(!strncmp(a, usage, strlen(usage)), "dpgate help %s:\n%s", cmds[i], a);
		cr_assert_str_eq(a, b, "dpgate help %s differs from dpgate %s --help", cmds[i],
				 cmds[i]);
	}
	cr_assert_eq(cli(a, sizeof(a), true, (const char *const[]){"help", "frobnicate", NULL}), 2);
	cr_assert(!strncmp(a, "dpgate help: ", 13), "%s", a);
}

/*
 * dpgate compare exits as its route answers: 1 when no accountant can price
 * the event (an (epsilon 1, delta 0.5) release at delta 1e-5: 422), with
 * the reason on stderr and nothing on stdout, and 0 with the answer when
 * one can (basic, at delta 1e-6).
 */
Test(cli, compare_exits_1_when_no_accountant_prices_the_event)
{
	char none[400], some[400], out[8192];

	temp_file(none, sizeof(none), "none.json",
		  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":1,\"delta\":0.5},"
		  "\"delta\":1e-5}");
	temp_file(some, sizeof(some), "some.json",
		  "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":1,\"delta\":1e-6},"
		  "\"delta\":1e-5}");
	cr_expect_eq(cli(out, sizeof(out), true, (const char *const[]){"compare", none, NULL}), 1,
		     "%s", out);
	cr_expect(!strncmp(out, "dpgate compare: no accountant", 29), "%s", out);
	cr_expect_eq(cli(out, sizeof(out), false, (const char *const[]){"compare", none, NULL}), 1);
	cr_expect_str_eq(out, "");
	cr_expect_eq(cli(out, sizeof(out), false, (const char *const[]){"compare", some, NULL}), 0,
		     "%s", out);
	cr_expect(strstr(out, "\"basic\""), "%s", out);
	remove_temp_file(none);
	remove_temp_file(some);
}

/* Every error of a command starts "dpgate CMD:", getopt's included, and a
 * missing file is named without a line number it does not have. */
Test(cli, errors_start_with_the_command)
{
	static const struct { const char *args[6]; const char *prefix; } bad[] = {
		{{"epsilon", "--bogus", NULL}, "dpgate epsilon: "},
		{{"rdp", "a.json", "b.json", NULL}, "dpgate rdp: "},
		{{"pate-cost", "--epsilon", "x", NULL}, "dpgate pate-cost: "},
		{{"serve", "--bogus", NULL}, "dpgate serve: "},
		{{"keys", "list", "--bogus", NULL}, "dpgate keys: "},
		{{"verify", "--bogus", NULL}, "dpgate verify: "},
		{{"backup", "--bogus", NULL}, "dpgate backup: "},
		/* Before, these two printed their usage alone. */
		{{"routes", "extra", NULL}, "dpgate routes: "},
		{{"keys", "bogus", "--db", "/nonexistent/x.db", NULL}, "dpgate keys: "},
		{{"keys", NULL}, "dpgate keys: "},
		{{"check", NULL}, "dpgate check: "},
		{{"check", "a.json", "b.json", NULL}, "dpgate check: "},
		{{"check", "/nonexistent/policy.json", NULL}, "dpgate check: "},
		{{"epsilon", "/nonexistent/body.json", NULL}, "dpgate epsilon: "},
	};
	char err[8192];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(cli(err, sizeof(err), true, bad[i].args), 2, "case %zu: %s", i, err);
		cr_assert(!strncmp(err, bad[i].prefix, strlen(bad[i].prefix)),
			  "case %zu: stderr does not start with '%s':\n%s", i, bad[i].prefix, err);
		cr_assert_null(strstr(err, "line -1"), "case %zu: %s", i, err);
	}
	cr_assert_eq(cli(err, sizeof(err), true,
			 (const char *const[]){"check", "/nonexistent/policy.json", NULL}),
		     2);
	cr_assert(strstr(err, "/nonexistent/policy.json") && strstr(err, "No such file"), "%s", err);
	/* A store that cannot be opened too (it said "dpgate: "). */
	cr_assert_eq(cli(err, sizeof(err), true,
			 (const char *const[]){"keys", "create", "--db", "/nonexistent/x.db", "--role",
					       "viewer", NULL}),
		     1, "%s", err);
	cr_assert(!strncmp(err, "dpgate keys: ", 13), "%s", err);
}

/* Each stateless command's help shows a complete body: run as shown, the
 * command answers it (exit 0, a JSON object). */
Test(cli, stateless_help_examples_run)
{
	char help[16384], out[65536], path[400];

	for (size_t i = 0; i < sizeof(stateless_cmds) / sizeof(stateless_cmds[0]); i++) {
		const char *ex, *end;
		char body[4096];
		json_t *answer;

		cr_assert_eq(cli(help, sizeof(help), false,
				 (const char *const[]){stateless_cmds[i], "--help", NULL}),
			     0);
		ex = strstr(help, "Example");
		cr_assert_not_null(ex, "dpgate %s --help shows no example:\n%s", stateless_cmds[i],
				   help);
		ex = strstr(ex, "\n  {");
		cr_assert_not_null(ex, "dpgate %s --help: no body after Example", stateless_cmds[i]);
		ex += 3;
		end = strchr(ex, '\n');
		cr_assert_not_null(end);
		cr_assert_lt((size_t)(end - ex), sizeof(body));
		snprintf(body, sizeof(body), "%.*s", (int)(end - ex), ex);
		temp_file(path, sizeof(path), "body.json", body);
		cr_assert_eq(cli(out, sizeof(out), false,
				 (const char *const[]){stateless_cmds[i], path, NULL}),
			     0, "dpgate %s %s (%s)", stateless_cmds[i], path, body);
		answer = json_loads(out, 0, NULL);
		cr_assert(json_is_object(answer), "dpgate %s: %s", stateless_cmds[i], out);
		json_decref(answer);
		remove_temp_file(path);
	}
}

/* delta_share is read by basic ledgers only: on rdp and zcdp it is warned
 * about on stderr, and the exit status is the one without it. */
Test(cli, check_warns_of_a_field_its_accountant_ignores)
{
	static const char *const accountants[] = {"rdp", "zcdp", "basic"};
	char policy[1024], err[8192], out[16384];

	for (size_t i = 0; i < 3; i++) {
		int with, without;

		for (int share = 1; share >= 0; share--) {
			snprintf(policy, sizeof(policy),
				 "{\"datasets\":[{\"id\":\"d\",\"budget\":{\"epsilon\":1,\"delta\":1e-5},"
				 "\"accountant\":\"%s\"%s,\"planned\":[{\"event\":{\"type\":\"laplace\","
				 "\"noise_multiplier\":10}}]}]}",
				 accountants[i], share ? ",\"delta_share\":1e-7" : "");
			if (share) {
				with = check_policy(err, sizeof(err), true, policy, false);
				if (i < 2)
					cr_assert(strstr(err, "dpgate check: warning: "
							      "/datasets/0/delta_share"),
						  "%s: no warning:\n%s", accountants[i], err);
				else
					cr_assert_null(strstr(err, "warning"), "basic: %s", err);
			} else {
				without = check_policy(out, sizeof(out), false, policy, false);
			}
		}
		cr_assert_eq(with, without, "%s", accountants[i]);
		cr_assert_eq(with, 0, "%s", accountants[i]);
	}
}

/*
 * A policy prices an rdp dataset at its own filter orders, as the server's
 * dataset with those orders: with the one order 8, a Gaussian of noise
 * multiplier 2 repeated 3 times costs its RDP 3 * 8 / (2 * 2^2) = 3
 * (Mironov 2017, Prop. 7) converted at all of delta; filter orders on a
 * basic ledger are a bad policy (exit 2, the field named).
 */
Test(cli, check_prices_a_datasets_own_filter_orders)
{
	const double delta = 1e-5, want = test_rdp_to_epsilon(8.0, 3.0, 1e-5);
	char policy[1024], out[16384];
	json_t *report;
	double spent;
	int rc;

	snprintf(policy, sizeof(policy),
		 "{\"datasets\":[{\"id\":\"d\",\"budget\":{\"epsilon\":10,\"delta\":%g},"
		 "\"accountant\":\"rdp\",\"filter_orders\":[8],\"planned\":[{\"event\":"
		 "{\"type\":\"gaussian\",\"noise_multiplier\":2},\"repeat\":3}]}]}",
		 delta);
	rc = check_policy(out, sizeof(out), false, policy, true);
	cr_assert_eq(rc, 0, "%s", out);
	report = json_loads(out, 0, NULL);
	cr_assert_not_null(report, "%s", out);
	spent = json_real_value(json_object_get(
		json_object_get(json_array_get(json_object_get(report, "datasets"), 0), "spent"),
		"epsilon"));
	/* The report prints 10 significant digits. */
	cr_assert_float_eq(spent, want, 1e-9 * want, "spent %.17g, want %.17g\n%s", spent, want,
			   out);
	json_decref(report);

	snprintf(policy, sizeof(policy),
		 "{\"datasets\":[{\"id\":\"d\",\"budget\":{\"epsilon\":10,\"delta\":1e-5},"
		 "\"accountant\":\"basic\",\"filter_orders\":[8],\"planned\":[]}]}");
	rc = check_policy(out, sizeof(out), true, policy, false);
	cr_assert_eq(rc, 2, "%s", out);
	cr_assert(strstr(out, "/datasets/0/filter_orders"), "%s", out);
}

/*
 * A bad planned release after one its basic ledger refuses (no delta
 * share) is named at its own pointer: the refusal's pointer to
 * "delta_share" once replaced the "planned" one that later releases are
 * named by.
 */
Test(cli, check_names_a_bad_release_after_a_refused_one)
{
	static const char policy[] =
		"{\"datasets\":[{\"id\":\"d\",\"budget\":{\"epsilon\":1,\"delta\":1e-5},"
		"\"accountant\":\"basic\",\"planned\":[{\"event\":{\"type\":\"gaussian\","
		"\"noise_multiplier\":1}},{\"x\":1}]}]}";
	char err[8192];
	int rc;

	rc = check_policy(err, sizeof(err), true, policy, false);
	cr_assert_eq(rc, 2, "%s", err);
	cr_assert(strstr(err, "dpgate check: bad policy at /datasets/0/planned/1/x: "), "%s", err);
}

/*
 * A stateless command takes only the options for keys its route's body
 * has, and its --help offers only those: `rdp --delta` had been offered,
 * then refused as an unknown field, and `delta --delta` or `epsilon
 * --epsilon` silently ignored.  The routes refuse such a key in the body
 * too (an /epsilon body's "epsilon" had been read by nothing).
 */
Test(cli, stateless_commands_take_only_their_bodys_options)
{
	static const struct {
		const char *cmd, *option;
		bool takes;
	} options[] = {
		{"epsilon", "--epsilon", false}, {"epsilon", "--delta", true},
		{"delta", "--delta", false},     {"delta", "--epsilon", true},
		{"compare", "--accountant", false}, {"compare", "--delta", true},
		{"rdp", "--delta", false},       {"rdp", "--neighbor", true},
		{"pate-cost", "--neighbor", false}, {"label-em-guidance", "--epsilon", true},
		{"label-em-guidance", "--delta", false},
	};
	char out[8192];

	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		const char *value = strcmp(options[i].option, "--neighbor") == 0 ? "replace" : "1";
		int rc = cli(out, sizeof(out), true,
			     (const char *const[]){options[i].cmd, options[i].option, value, "/dev/null",
						   NULL});
		bool refused = strstr(out, "does not apply") != NULL;

		cr_expect_eq(refused, !options[i].takes, "%s %s: %s", options[i].cmd, options[i].option,
			     out);
		if (refused)
			cr_expect_eq(rc, 2, "%s %s", options[i].cmd, options[i].option);
		rc = cli(out, sizeof(out), false, (const char *const[]){options[i].cmd, "--help", NULL});
		cr_assert_eq(rc, 0);
		cr_expect_eq(strstr(out, options[i].option) != NULL, options[i].takes, "%s --help: %s",
			     options[i].cmd, out);
	}
	{
		char path[400];
		int rc;

		temp_file(path, sizeof(path), "body.json",
			  "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},"
			  "\"delta\":1e-5,\"epsilon\":1}");
		rc = cli(out, sizeof(out), true, (const char *const[]){"epsilon", path, NULL});
		remove_temp_file(path);
		cr_expect_eq(rc, 2, "%s", out);
		cr_expect(strstr(out, "at /epsilon"), "%s", out);
	}
}

/*
 * A stateless command reads a body as long as the route takes
 * (DPG_MAX_BODY_BYTES: one padded with spaces to the limit is answered; it
 * was refused from about 1,040,000 bytes, its buffer's doubling past the
 * limit), refuses one byte more, and names a path it cannot read.
 */
Test(cli, stateless_input_is_read_up_to_the_body_limit)
{
	static const char body[] = "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1},"
				   "\"delta\":1e-5}";
	char path[400], out[8192], *text = malloc(DPG_MAX_BODY_BYTES + 2);
	int rc;

	cr_assert_not_null(text);
	for (int extra = 0; extra < 2; extra++) {
		memset(text, ' ', DPG_MAX_BODY_BYTES + 1);
		memcpy(text, body, strlen(body));
		text[DPG_MAX_BODY_BYTES + extra] = '\0';
		temp_file(path, sizeof(path), "body.json", text);
		rc = cli(out, sizeof(out), true, (const char *const[]){"epsilon", path, NULL});
		remove_temp_file(path);
		cr_expect_eq(rc, extra ? 2 : 0, "%d extra: %s", extra, out);
		cr_expect_eq(strstr(out, "larger than") != NULL, extra == 1, "%s", out);
	}
	free(text);
	rc = cli(out, sizeof(out), true, (const char *const[]){"epsilon", "/tmp", NULL});
	cr_expect_eq(rc, 2);
	cr_expect(strstr(out, "cannot read /tmp"), "%s", out);
}

/* Charges `event` to dataset id until the server refuses one (409);
 * returns how many it admitted. */
static int charges_admitted(const dpg_server *s, const char *id, const char *event,
			    const char *extra)
{
	char path[128], body[512];
	int n = 0;

	snprintf(path, sizeof(path), "/v1/datasets/%s/charges", id);
	snprintf(body, sizeof(body), "{\"event\":%s%s}", event, extra);
	for (;; n++) {
		dpg_resp r = dpg_call(s, "POST", path, s->admin_key, body);
		long status = r.status;

		cr_assert(status == 201 || status == 409, "%s: %ld %s", id, status, r.body);
		dpg_resp_free(&r);
		if (status == 409)
			return n;
		cr_assert_lt(n, 500, "%s: no refusal", id);
	}
}

/*
 * `check` admits what the server admits, charge by charge: `repeat` N is N
 * separate charges, each priced alone (on a basic ledger a Gaussian costs
 * its epsilon at the delta share each time; composed into one event, 20 of
 * them had cost about sqrt(20) times one), each total rounded as the
 * server's running total rounds it (four charges of 0.1 leave more than
 * 0.4).  The server is charged until it refuses; a policy with that many
 * charges fits and shows the server's spent epsilon, one more does not.
 */
Test(cli, check_admits_what_the_server_admits_charge_by_charge, .timeout = 180)
{
	static const struct {
		const char *accountant, *event, *request, *policy;
		double epsilon, delta;
	} plans[] = {
		{"basic", "{\"type\":\"gaussian\",\"noise_multiplier\":5}", ",\"delta\":1e-6",
		 ",\"delta_share\":1e-6", 10, 1e-5},
		{"basic", "{\"type\":\"epsilon_delta\",\"epsilon\":0.1,\"delta\":0}", "", "", 0.4, 0},
		{"rdp", "{\"type\":\"gaussian\",\"noise_multiplier\":3}", "", "", 2, 1e-5},
		{"zcdp", "{\"type\":\"laplace\",\"noise_multiplier\":2}", "", "", 6, 1e-5},
	};
	dpg_server s;

	dpg_server_start(&s);
	for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++) {
		char id[8], policy[1024], out[16384];
		int n;

		snprintf(id, sizeof(id), "c%zu", i);
		dpg_make_dataset(&s, id, plans[i].epsilon, plans[i].delta, plans[i].accountant);
		n = charges_admitted(&s, id, plans[i].event, plans[i].request);
		cr_assert_gt(n, 0, "%s", id);
		for (int more = 0; more < 2; more++) {
			json_t *report;
			int rc;

			snprintf(policy, sizeof(policy),
				 "{\"datasets\":[{\"id\":\"%s\",\"accountant\":\"%s\",\"budget\":"
				 "{\"epsilon\":%.17g,\"delta\":%.17g}%s,\"planned\":[{\"event\":%s,"
				 "\"repeat\":%d}]}]}",
				 id, plans[i].accountant, plans[i].epsilon, plans[i].delta,
				 plans[i].policy, plans[i].event, n + more);
			rc = check_policy(out, sizeof(out), false, policy, true);
			cr_assert_eq(rc, more, "%s: the server admitted %d; repeat %d: %s", id, n,
				     n + more, out);
			if (more)
				continue;
			report = json_loads(out, 0, NULL);
			cr_assert_not_null(report, "%s", out);
			/* The report prints 10 significant digits. */
			cr_assert_float_eq(dpg_num(json_array_get(json_object_get(report, "datasets"),
								  0),
						   "spent.epsilon"),
					   dpg_budget_of(&s, id).spent_eps,
					   1e-9 * dpg_budget_of(&s, id).spent_eps, "%s: %s", id, out);
			json_decref(report);
		}
	}
	dpg_server_destroy(&s);
}

/* The value after `key` in text (up to a quote, a space or a line end),
 * into buf; asserts it is there. */
static void value_after(const char *text, const char *key, char *buf, size_t size,
			const char *what)
{
	const char *at = strstr(text, key);
	size_t n;

	cr_assert_not_null(at, "no %s in %s", key, what);
	at += strlen(key);
	n = strcspn(at, "' \n");
	cr_assert(n > 0 && n < size, "bad %s in %s", key, what);
	memcpy(buf, at, n);
	buf[n] = '\0';
}

/*
 * The version has one source, meson.build's project(): `dpgate --version`
 * prints it, and the served spec's info.version says the same.
 */
Test(cli, version_is_the_meson_projects_everywhere, .timeout = 60)
{
	const char *root = getenv("DPGATE_SOURCE_ROOT");
	char path[512], want[64], got[64], out[256], line[96];
	char *meson, *info;
	dpg_server srv;
	dpg_resp r;
	FILE *f;
	long size;

	cr_assert_not_null(root, "DPGATE_SOURCE_ROOT is not set (run through meson test)");
	snprintf(path, sizeof(path), "%s/meson.build", root);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	cr_assert(fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0);
	rewind(f);
	meson = calloc((size_t)size + 1, 1);
	cr_assert(meson && fread(meson, 1, (size_t)size, f) == (size_t)size);
	fclose(f);
	cr_assert_not_null(strstr(meson, "project('dpgate'"), "%s", path);
	value_after(strstr(meson, "project('dpgate'"), "version : '", want, sizeof(want), path);
	free(meson);

	cr_assert_eq(cli(out, sizeof(out), false, (const char *const[]){"--version", NULL}), 0);
	snprintf(line, sizeof(line), "dpgate %s\n", want);
	cr_assert_str_eq(out, line, "dpgate --version");

	dpg_server_start(&srv);
	cr_assert_eq(dpg_http(&srv, "GET", "/v1/openapi.yaml", NULL, NULL, 0, NULL, &r), 0);
	cr_assert_eq(r.status, 200);
	info = strstr(r.body, "\ninfo:\n");
	cr_assert_not_null(info, "the served spec has no info block");
	value_after(info, "\n  version: ", got, sizeof(got), "the served spec's info");
	cr_assert_str_eq(got, want, "served info.version %s, meson.build %s", got, want);
	dpg_resp_free(&r);
	dpg_server_destroy(&srv);
}

/*
 * A query parameter the route does not take is refused, naming it, before
 * anything is read or written: a misspelt declaration (?column= for
 * ?columns=) would otherwise upload the table with inferred kinds, and a
 * parameter on a charge would be silently dropped.  Each route's declared
 * parameters are checked against the spec by check_served_spec.py.
 */
Test(bad_inputs, an_undeclared_query_parameter_is_refused_and_changes_nothing, .timeout = 60)
{
	static const char csv[] = "x,y\n1,a\n2,b\n";
	static const char *const csv_type[] = {"Content-Type: text/csv", NULL};
	dpg_server srv;
	dpg_budget before = start_with_t(&srv);
	dpg_resp r;

	cr_assert_eq(dpg_http(&srv, "PUT", "/v1/datasets/t/data?column=x:numeric,y:categorical",
			      srv.admin_key, csv, strlen(csv), csv_type, &r),
		     0);
	cr_expect_eq(r.status, 400, "%s", r.body);
	cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), "column", "%s",
			 r.body);
	cr_expect(strstr(r.body, "columns row_count"), "%s", r.body);
	dpg_resp_free(&r);
	dpg_expect_status(&srv, "GET", "/v1/datasets/t/data", srv.admin_key, NULL, 404);
	r = dpg_call(&srv, "POST", CH "?dry_run=true", srv.admin_key, CHARGE_BODY);
	cr_expect_eq(r.status, 400, "%s", r.body);
	cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), "dry_run", "%s",
			 r.body);
	cr_expect(strstr(r.body, "takes none"), "%s", r.body);
	dpg_resp_free(&r);
	expect_t_unchanged(&srv, &before);
	/* The declared spelling still works. */
	cr_assert_eq(dpg_http(&srv, "PUT", "/v1/datasets/t/data?columns=x:numeric,y:categorical",
			      srv.admin_key, csv, strlen(csv), csv_type, &r),
		     0);
	cr_expect_eq(r.status, 200, "%s", r.body);
	dpg_resp_free(&r);
	dpg_server_destroy(&srv);
}
