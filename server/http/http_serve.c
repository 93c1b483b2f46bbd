/*
 * http_serve.c: libmicrohttpd glue: bounded request intake, routing, auth,
 * the access log, metrics and graceful shutdown (replies: http_reply.c).
 *
 * Every request is bounded before any handler runs: URL length, body size
 * (413, checked against Content-Length before the body is read and again
 * while it streams), JSON depth, and the connection timeout; connections
 * are bounded per client address, in the time their headers take, and in
 * how many may wait for a request (http_conns.h).  Handlers run
 * on libmicrohttpd's worker threads; each takes one pooled SQLite
 * connection for the duration of the request.
 */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <strings.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http.h"
#include "http_conns.h"
#include "http_watch.h"
#include "base.h"
#include "json.h"

#define SHUTDOWN_GRACE_S 10
/* An oversize body up to this size is read and dropped before the 413. */
#define DRAIN_MAX_BYTES (16u << 20)
/* A body declared larger than this, or chunked, is read only after the
 * route, key, role and scope were checked (refused_before_body). */
#define BODY_GATE_BYTES (64u << 10)
#define LOG_PATH_BYTES 256

struct conn_state {
	srv_buf body; /* the request body received so far */
	size_t limit;
	bool too_large;
	bool replied;
	size_t drained;     /* bytes of an oversize body read and dropped */
	struct timespec start;
	int route;          /* index, or -1 when unmatched */
	int status;
	size_t out_bytes;
	char method[16];
	char path[LOG_PATH_BYTES];
	char key_id[2 * SRV_KEY_ID_BYTES + 1];
	bool encoded_slash; /* the raw path held %2F (on_uri) */
	bool nul_in_target; /* the request target held a NUL byte (on_uri) */
	bool long_target;   /* the request target was over DPG_MAX_URL_BYTES (on_uri) */
	bool long_query;    /* the query had over DPG_MAX_QUERY_PARAMS parameters (on_uri) */
	bool keep_alive;    /* HTTP/1.1 without Connection: close, answered so */
	srv_conns *conns;   /* the server's waiting connections (http_conns.h) */
	srv_conn *waiting;  /* this connection's entry there, or NULL */
	srv_waiter waiter;  /* its long-poll, armed while it waits (http_watch.h) */
	srv_ctx *ctx;       /* the server's, for what send_response adds */
	bool park;          /* dispatch found it unchanged before its deadline */
};

/* ---- the request target ---------------------------------------------------- */

/*
 * libmicrohttpd percent-decodes the path before routing.  Its own decoding
 * turned an encoded NUL into the end of the path and an encoded slash into
 * a segment boundary, so DELETE /v1/datasets/a%00/charges archived dataset
 * a, and GET /v1/datasets/a%2Fbudget answered a's budget: another route
 * than the one asked for, about an identifier that is not one.
 */

/* *con_cls of a request whose raw path holds an encoded slash, whose
 * request target holds a NUL byte, whose target (path and query) is
 * longer than DPG_MAX_URL_BYTES, or whose query has more than
 * DPG_MAX_QUERY_PARAMS parameters; on_request replaces it with the
 * request's conn_state.  Only their addresses are used. */
static const char encoded_slash_mark, nul_target_mark, long_target_mark, long_query_mark;

static bool is_mark(const void *p)
{
	return p == (const void *)&encoded_slash_mark || p == (const void *)&nul_target_mark ||
	       p == (const void *)&long_target_mark || p == (const void *)&long_query_mark;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Whether the request line held a NUL byte inside its target.  The target
 * reaches dpgate as a C string, which ends at such a byte: DELETE
 * /v1/datasets/a<NUL>/charges would run as DELETE /v1/datasets/a and
 * archive a.  libmicrohttpd 0.9.75 parses the request line in place, with
 * the space before the HTTP version overwritten by a NUL, and hands this
 * callback the target inside that line: so the string is the whole target
 * exactly when "HTTP/" follows its end (the comparison stops at the first
 * byte that differs, inside the line or its terminator).  Newer releases
 * refuse a NUL in the request line themselves; with them the check is
 * left out (the bad_inputs test holds either way).
 */
static bool target_has_nul(const char *uri)
{
#if MHD_VERSION <= 0x00097500
	const char *end = uri + strlen(uri) + 1;

	return !(end[0] == 'H' && end[1] == 'T' && end[2] == 'T' && end[3] == 'P' && end[4] == '/');
#else
	(void)uri;
	return false;
#endif
}

/* How many parameters libmicrohttpd makes of `query` (the text after the
 * '?'): one before each '&', empty or not, and one for the text after the
 * last '&' unless it is empty (MHD_parse_arguments_). */
static size_t query_param_count(const char *query)
{
	size_t n = 0, len = strlen(query);

	for (size_t i = 0; i < len; i++)
		n += query[i] == '&';
	return n + (len > 0 && query[len - 1] != '&');
}

/*
 * Leaves the query of a refused request target unparsed.  libmicrohttpd
 * parses the query after on_uri returns, in place, from the bytes `uri`
 * points to in its read buffer (0.9.75's parse_initial_message_line, as
 * 1.0's process_request_target), and keeps a record of each parameter in
 * the connection's pool of DPG_CONNECTION_MEMORY_BYTES: some 240
 * parameters used the pool up, and 0.9.75 closed the connection with no
 * answer at all (it logs a 431 it does not send) instead of the 400 or
 * 414 that says why.  With the string ended after the '?', there is
 * nothing to parse.
 */
static void drop_query(const char *uri, size_t path_len)
{
	if (uri[path_len] == '?' && uri[path_len + 1] != '\0')
		((char *)uri)[path_len + 1] = '\0';
}

/*
 * Called with the raw request target before it is decoded
 * (MHD_OPTION_URI_LOG_CALLBACK): marks a target longer than
 * DPG_MAX_URL_BYTES (414; on_request sees the path alone, so a long query
 * would pass) and a query of more than DPG_MAX_QUERY_PARAMS parameters
 * (400), whose query is then not parsed (drop_query), and a path holding
 * %2F, which no route has (dispatch answers 404).  A query may hold %2F.
 */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	size_t path_len = strcspn(uri, "?");
	const char *mark = NULL;

	(void)cls;
	(void)conn;
	if (target_has_nul(uri))
		return (void *)&nul_target_mark;
	if (strlen(uri) > DPG_MAX_URL_BYTES)
		mark = &long_target_mark;
	else if (uri[path_len] == '?' &&
		 query_param_count(uri + path_len + 1) > DPG_MAX_QUERY_PARAMS)
		mark = &long_query_mark;
	if (mark) {
		drop_query(uri, path_len);
		return (void *)mark;
	}
	for (size_t i = 0; i + 2 < path_len; i++)
		if (uri[i] == '%' && uri[i + 1] == '2' && (uri[i + 2] == 'F' || uri[i + 2] == 'f'))
			return (void *)&encoded_slash_mark;
	return NULL;
}

/*
 * Percent-decodes the path and each query name and value in place
 * (MHD_OPTION_UNESCAPE_CALLBACK, RFC 3986 2.1), except %00, which stays as
 * the three characters: a NUL would end the string early.  It then fails as
 * any character outside a path identifier or a number does.  Returns the
 * new length.
 */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *conn, char *s)
{
	char *w = s;

	(void)cls;
	(void)conn;
	for (const char *r = s; *r;) {
		int hi = r[0] == '%' ? hex_value(r[1]) : -1;
		int lo = hi >= 0 ? hex_value(r[2]) : -1;

		if (lo >= 0 && (hi | lo) != 0) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

/* ---- routing --------------------------------------------------------------- */

int srv_route_match(const srv_route_table *t, const char *method, const char *path, char *scratch,
		    size_t scratch_size, const char *params[SRV_MAX_PATH_PARAMS])
{
	char *segs[16];
	size_t nseg = 0;
	bool path_known = false;

	if (strlen(path) + 1 > scratch_size || path[0] != '/')
		return -1;
	memcpy(scratch, path, strlen(path) + 1);
	for (char *p = scratch + 1, *save = NULL, *tok = strtok_r(p, "/", &save); tok;
	     tok = strtok_r(NULL, "/", &save)) {
		if (nseg == 16)
			return -1;
		segs[nseg++] = tok;
	}
	/* A trailing slash or an empty segment matches nothing. */
	if (strstr(path, "//") || (strlen(path) > 1 && path[strlen(path) - 1] == '/'))
		return -1;
	for (size_t r = 0; r < t->n; r++) {
		const char *pat = t->routes[r].pattern + 1;
		const char *tmp[SRV_MAX_PATH_PARAMS] = {0};
		size_t i = 0, np = 0;
		bool ok = true;

		while (ok && *pat) {
			const char *slash = strchr(pat, '/');
			size_t plen = slash ? (size_t)(slash - pat) : strlen(pat);

			if (i == nseg) {
				ok = false;
				break;
			}
			if (pat[0] == '{') {
				if (np == SRV_MAX_PATH_PARAMS)
					ok = false;
				else
					tmp[np++] = segs[i];
			} else if (strlen(segs[i]) != plen || strncmp(segs[i], pat, plen) != 0) {
				ok = false;
			}
			i++;
			pat += plen + (slash ? 1 : 0);
		}
		if (!ok || i != nseg)
			continue;
		path_known = true;
		if (strcmp(t->routes[r].method, method) == 0) {
			memcpy(params, tmp, sizeof(tmp));
			return (int)r;
		}
	}
	return path_known ? -2 : -1;
}

void srv_route_allowed(const srv_route_table *t, const char *path, char *buf, size_t size)
{
	char scratch[DPG_MAX_URL_BYTES + 1];
	const char *params[SRV_MAX_PATH_PARAMS];
	size_t n = 0;

	buf[0] = '\0';
	for (size_t r = 0; r < t->n; r++) {
		const char *m = t->routes[r].method;

		if (strstr(buf, m) || srv_route_match(t, m, path, scratch, sizeof(scratch), params) < 0)
			continue;
		n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? ", " : "", m);
	}
	/* HEAD is answered wherever GET is (dispatch). */
	if (strstr(buf, "GET"))
		snprintf(buf + n, n < size ? size - n : 0, ", HEAD");
}

srv_revalidate srv_route_revalidate(const srv_route_table *t, int r)
{
	if (r < 0 || (size_t)r >= t->n || strcmp(t->routes[r].method, "GET") != 0)
		return SRV_NO_STORE;
	for (size_t i = 0; i < t->n_caching; i++)
		if (strcmp(t->caching[i].pattern, t->routes[r].pattern) == 0)
			return t->caching[i].revalidate;
	return SRV_NO_STORE;
}

/* ---- dispatch ---------------------------------------------------------- */

/*
 * A long-poll (?wait=S, on a revalidated route other than the page's)
 * is armed before its handler reads, when it carries If-None-Match: a
 * change committed from then on wakes it (http_watch.c).  Without
 * If-None-Match there is nothing to wait for and the answer is
 * immediate.  Returns false with `res` filled when refused: a bad wait
 * (400), too many waiting (503), the server stopping (503).
 */
static bool long_poll_begin(srv_ctx *ctx, struct MHD_Connection *conn, struct conn_state *cs,
			    srv_revalidate rv, const char *id, srv_response *res)
{
	const char *wait = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "wait");
	unsigned secs;
	int rc;

	if (!wait || rv == SRV_NO_STORE || rv == SRV_TAG_STATIC)
		return true;
	if (srv_wait_parse(wait, &secs) < 0) {
		char detail[96];

		snprintf(detail, sizeof(detail), "wait must be a whole number of seconds, 1 to %u",
			 (unsigned)DPG_MAX_LONG_POLL_S);
		srv_problem(res, 400, NULL, detail, "wait", NULL);
		return false;
	}
	if (!MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH))
		return true;
	rc = srv_watch_arm(ctx->watch, &cs->waiter, rv, rv == SRV_TAG_DATASETS ? NULL : id, secs);
	if (rc == -1)
		srv_problem(res, 503, NULL, "too many long-polls are waiting; retry shortly", NULL,
			    NULL);
	else if (rc < 0)
		srv_problem(res, 503, NULL, "the server is shutting down", NULL, NULL);
	return rc == 0;
}

/* The field lines named `name` of a request (MHD_get_connection_values):
 * how many there are and, with `etag` set, whether one of them (an
 * If-None-Match list may come as several lines as well as one, RFC 9110
 * 5.3) names that tag. */
struct header_scan {
	const char *name;
	const char *etag;
	unsigned n;
	bool names_tag;
};

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	struct header_scan *hs = cls;

	(void)kind;
	if (strcasecmp(key, hs->name) == 0) {
		hs->n++;
		hs->names_tag = hs->names_tag || (hs->etag && srv_etag_matches(value, hs->etag));
	}
	return MHD_YES;
}

/*
 * A revalidated route's 200: its entity tag (http_cache.c), and 304 with
 * no body when If-None-Match names it (RFC 9110 15.4.5), or, for an armed
 * long-poll before its deadline, nothing yet: cs->park, and on_request
 * suspends it.  Any other answer keeps no-store.
 *
 * The 304 keeps the 200's body in `res`: libmicrohttpd sends no body with
 * a 304 but writes the Content-Length of the body its response holds, and
 * 0.9.75 has no flag to leave that header out.  An emptied body made it
 * "Content-Length: 0", which RFC 9110 8.6 forbids unless the 200 is empty
 * too; the 200's own body makes it the 200's length, as HEAD's is.
 */
static void tag_answer(srv_ctx *ctx, struct MHD_Connection *conn, struct conn_state *cs,
		       srv_revalidate rv, srv_response *res)
{
	struct header_scan hs = {MHD_HTTP_HEADER_IF_NONE_MATCH, NULL, 0, false};

	if (rv == SRV_NO_STORE || res->status != 200)
		return;
	res->cache = rv;
	srv_etag_of(res->body ? res->body : "", res->len, res->etag);
	hs.etag = res->etag;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, scan_header, &hs);
	if (!hs.names_tag)
		return;
	res->status = 304;
	cs->park = cs->waiter.armed && !srv_watch_expired(ctx->watch, &cs->waiter);
	if (cs->park) {
		/* Read again when it wakes: this answer is not sent. */
		free(res->body);
		res->body = NULL;
		res->len = 0;
	}
}

/*
 * After a request whose handler committed a write (srv_store_thread_commits
 * moved), its COMMIT has returned: the long-polls on what it touched are
 * woken.  A dataset route names its dataset; any other (a key, a job, a
 * new dataset) wakes every long-poll, which costs each a read.
 *
 * The commit decides, not the status: a refusal may follow one (a PATE
 * batch answered in part, 409; the expired reservations a refused spend
 * or reservation close committed, 409 or 403), and an answer that wrote
 * nothing (a dry run or a prediction, 200; a replay; a 404, or a 409 that
 * changed nothing) wakes no one, or a stream of them would make every
 * long-poll read again per request.  A job's own changes are signalled by
 * its worker.  A failed COMMIT's write, found only after a restart, is
 * read by the long-polls' periodic recheck.
 */
static void signal_change(srv_ctx *ctx, const srv_route *route, const srv_request *req,
			  bool committed)
{
	if (!committed)
		return;
	if (strncmp(route->pattern, "/v1/datasets/{id}", 17) == 0)
		srv_watch_signal(ctx->watch, req->params[0], NULL);
	else
		srv_watch_signal(ctx->watch, NULL, NULL);
}

static const char *conn_query(void *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

struct query_names {
	const char *name[DPG_MAX_QUERY_PARAMS];
	unsigned n;
	const char *takes;    /* the route's srv_route_query names, or NULL: any */
	const char *repeated; /* the first name seen twice, or NULL */
	const char *unknown;  /* the first name the route does not take, or NULL */
	bool too_many;
};

/* Whether `name` is a word of the space-separated list `names` ("*": any). */
static bool takes_name(const char *names, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(names, "*") == 0)
		return true;
	for (const char *w = names; *w;) {
		size_t n = strcspn(w, " ");

		if (n == len && strncmp(w, name, len) == 0)
			return true;
		w += n;
		w += strspn(w, " ");
	}
	return false;
}

/* The query parameters route r takes (srv_route_query), "" for none, or
 * NULL when the table declares none at all (unchecked). */
static const char *route_takes(const srv_route_table *t, int r)
{
	if (!t->queries)
		return NULL;
	for (size_t i = 0; i < t->n_queries; i++)
		if (strcmp(t->queries[i].method, t->routes[r].method) == 0 &&
		    strcmp(t->queries[i].pattern, t->routes[r].pattern) == 0)
			return t->queries[i].names;
	return "";
}

static enum MHD_Result note_query_name(void *cls, enum MHD_ValueKind kind, const char *key,
				       const char *value)
{
	struct query_names *q = cls;

	(void)kind;
	(void)value;
	for (unsigned i = 0; i < q->n; i++) {
		if (strcmp(q->name[i], key) == 0) {
			q->repeated = key;
			return MHD_NO;
		}
	}
	if (q->takes && !takes_name(q->takes, key)) {
		q->unknown = key;
		return MHD_NO;
	}
	if (q->n == DPG_MAX_QUERY_PARAMS) {
		q->too_many = true;
		return MHD_NO;
	}
	q->name[q->n++] = key;
	return MHD_YES;
}

/* The 400 of a query of more than DPG_MAX_QUERY_PARAMS parameters. */
static void refuse_long_query(srv_response *res)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "the query has more than %u parameters",
		 (unsigned)DPG_MAX_QUERY_PARAMS);
	srv_problem(res, 400, NULL, detail, NULL, NULL);
}

/*
 * A query parameter given twice is refused: routes read one value (the
 * first), and the others would pass unchecked (?limit=1&limit=abc).  So is
 * one that route r does not take (srv_route_query), and a query of more
 * than DPG_MAX_QUERY_PARAMS parameters (on_uri refuses those first; this
 * bounds q.name whatever libmicrohttpd parsed).  True with `res` filled
 * when refused.
 */
static bool query_refused(const srv_route_table *t, int r, struct MHD_Connection *conn,
			  srv_response *res)
{
	struct query_names q = {.n = 0, .takes = route_takes(t, r)};

	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, note_query_name, &q);
	if (q.unknown) {
		char field[80], detail[200];

		snprintf(field, sizeof(field), "%.64s", q.unknown);
		snprintf(detail, sizeof(detail), "'%s' is not a query parameter of this route%s%s",
			 field, *q.takes ? "; it takes: " : " (it takes none)", q.takes);
		srv_problem(res, 400, NULL, detail, field, NULL);
		return true;
	}
	if (q.repeated) {
		char field[80];

		snprintf(field, sizeof(field), "%.64s", q.repeated);
		srv_problem(res, 400, NULL, "a query parameter is given more than once", field, NULL);
		return true;
	}
	if (q.too_many) {
		refuse_long_query(res);
		return true;
	}
	return false;
}

/* An Idempotency-Key is stored in the ledger and shown in its JSON: 1 to
 * DPG_IDEMPOTENCY_KEY_BYTES printable ASCII characters (space to '~'). */
static bool idempotency_key_ok(const char *key)
{
	size_t n = strlen(key);

	if (n == 0 || n > DPG_IDEMPOTENCY_KEY_BYTES)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			return false;
	return true;
}

/* How many request headers are named `name`. */
static unsigned header_count(struct MHD_Connection *conn, const char *name)
{
	struct header_scan hs = {name, NULL, 0, false};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, scan_header, &hs);
	return hs.n;
}

/* What admit() found out about a request, held until admission_end(). */
struct admission {
	char scratch[DPG_MAX_URL_BYTES + 1]; /* the path's parameters point here */
	srv_request req;
	srv_principal who;
	bool have_who;
};

/* Releases what admit() acquired: the principal and the store handle. */
static void admission_end(srv_ctx *ctx, struct admission *a)
{
	if (a->have_who)
		srv_principal_clear(&a->who);
	if (a->req.db)
		srv_store_release(ctx->store, a->req.db);
}

/* The answer to a request whose key did not check (srv_auth_check's
 * `checked`): 401, or 503 when the key could not be read (the database
 * busy or unavailable), which says nothing against the key. */
static void refuse_key(srv_response *res, int checked)
{
	if (checked == SRV_DB_ERROR)
		srv_problem(res, 503, NULL, "the key store is busy or unavailable; retry shortly",
			    NULL, NULL);
	else
		srv_problem(res, 401, NULL, "a valid API key is required (Authorization: Bearer <key>)",
			    NULL, NULL);
}

/*
 * Authorization is a singleton field (RFC 9110, 11.6.2): with two, a proxy
 * that reads the last could check another key than the one used here (the
 * first), so neither is taken.  So is Idempotency-Key: with two, a proxy
 * or a client that retries with the other would be charged again under a
 * key it believes it has used.  True when one came twice (res holds the
 * 400).
 */
static bool repeated_singleton(struct MHD_Connection *conn, srv_response *res)
{
	static const char *const names[] = {MHD_HTTP_HEADER_AUTHORIZATION, "Idempotency-Key"};
	char detail[64];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (header_count(conn, names[i]) > 1) {
			snprintf(detail, sizeof(detail), "more than one %s header", names[i]);
			srv_problem(res, 400, NULL, detail, names[i], NULL);
			return true;
		}
	return false;
}

/*
 * The checks that need no body: route and method, path identifiers, key,
 * role and dataset scope.  Returns the route's index, or -1 with `res`
 * holding the refusal.  A route that needs a key gets a->req.db acquired
 * and a->who filled when the key was valid; admission_end() releases both,
 * whatever the outcome.
 */
static int admit(srv_ctx *ctx, struct MHD_Connection *conn, struct conn_state *cs,
		 const char *method, const char *url, struct admission *a, srv_response *res)
{
	srv_request *req = &a->req;
	srv_principal *who = &a->who;
	const srv_route *route;
	int r;

	memset(a, 0, sizeof(*a));
	if (repeated_singleton(conn, res))
		return -1;
	if (cs->encoded_slash) {
		srv_problem(res, 404, NULL, "no such route: the path holds an encoded slash (%2F)",
			    NULL, NULL);
		return -1;
	}
	/* HEAD runs the GET route; libmicrohttpd sends its headers without the
	 * body (RFC 9110 9.3.2). */
	r = srv_route_match(&ctx->routes, strcmp(method, "HEAD") == 0 ? "GET" : method, url,
			    a->scratch, sizeof(a->scratch), req->params);
	cs->route = r >= 0 ? r : -1;
	if (r == -1) {
		srv_problem(res, 404, NULL, "no such route", NULL, NULL);
		return -1;
	}
	if (r == -2) {
		srv_route_allowed(&ctx->routes, url, res->allow, sizeof(res->allow));
		srv_problem(res, 405, NULL, "the route does not support this method", NULL, NULL);
		return -1;
	}
	route = &ctx->routes.routes[r];
	for (int i = 0; i < SRV_MAX_PATH_PARAMS && req->params[i]; i++) {
		if (!srv_id_ok(req->params[i])) {
			srv_problem(res, 404, NULL, "no such resource: malformed identifier in the path",
				    NULL, NULL);
			return -1;
		}
	}
	if (route->access != SRV_PUBLIC) {
		const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
		bool allowed;
		int checked;

		req->db = srv_store_acquire(ctx->store);
		checked = srv_auth_check(req->db, ctx->auth_cache, authz, who);
		if (checked < 0) {
			refuse_key(res, checked);
			return -1;
		}
		a->have_who = true;
		srv_strcopy(cs->key_id, sizeof(cs->key_id), who->key_id);
		switch (route->access) {
		case SRV_ADMIN: allowed = who->role == SRV_ROLE_ADMIN; break;
		case SRV_SPEND: allowed = who->role >= SRV_ROLE_ANALYST; break;
		default: allowed = who->role >= SRV_ROLE_VIEWER; break;
		}
		if (!allowed) {
			srv_problem(res, 403, NULL, "this key's role may not use this route", NULL, NULL);
			return -1;
		}
		if ((route->access == SRV_READ || route->access == SRV_SPEND) &&
		    strstr(route->pattern, "/datasets/{id}") && !srv_principal_sees(who, req->params[0])) {
			srv_problem(res, 403, NULL, "this key is not scoped to the dataset", NULL, NULL);
			return -1;
		}
		req->who = who;
	}
	return r;
}

/*
 * A body that may be large (declared above BODY_GATE_BYTES, or chunked, its
 * size unknown) is read only for a request that admit() lets through: an
 * unknown route, a missing key or the wrong role is answered before any of
 * it arrives, and the connection closed.  Otherwise anyone could make the
 * server hold a 64 MiB upload per connection.  Returns true with `res`
 * filled when refused.
 */
static bool refused_before_body(srv_ctx *ctx, struct MHD_Connection *conn, struct conn_state *cs,
				const char *method, const char *url, srv_response *res)
{
	struct admission a;
	int r;

	memset(res, 0, sizeof(*res));
	r = admit(ctx, conn, cs, method, url, &a, res);
	admission_end(ctx, &a);
	if (r >= 0)
		return false;
	res->close = true;
	return true;
}

static void dispatch(srv_ctx *ctx, struct MHD_Connection *conn, struct conn_state *cs,
		     const char *method, const char *url, srv_response *res)
{
	struct admission a;
	srv_request *req = &a.req;
	const srv_route *route;
	json_t *body = NULL;
	bool public_slot = false;
	unsigned long commits;
	int r = admit(ctx, conn, cs, method, url, &a, res);

	if (r < 0 || query_refused(&ctx->routes, r, conn, res))
		goto out;
	route = &ctx->routes.routes[r];
	if (!long_poll_begin(ctx, conn, cs, srv_route_revalidate(&ctx->routes, r), req->params[0],
			     res))
		goto out;
	if (route->access == SRV_PUBLIC && route->json_body) {
		if (atomic_fetch_add(&ctx->public_busy, 1) >= ctx->public_limit) {
			atomic_fetch_sub(&ctx->public_busy, 1);
			srv_problem(res, 503, NULL,
				    "too many accountant computations are running; retry shortly", NULL,
				    NULL);
			goto out;
		}
		public_slot = true;
	}
	req->ctx = ctx;
	req->method = method;
	req->path = url;
	req->raw_body = cs->body.s;
	req->raw_len = cs->body.len;
	req->content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	req->idempotency_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
	req->authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	req->query = conn_query;
	req->conn = conn;
	if (route->json_body) {
		acct_error err;

		acct_error_init(&err);
		if (!srv_json_content_type(req->content_type)) {
			srv_problem(res, 415, NULL, "the body must be application/json", NULL, NULL);
			goto out;
		}
		body = srv_parse_body(cs->body.s, cs->body.len, &err);
		if (!body) {
			srv_problem_from_error(res, &err);
			goto out;
		}
		if (req->idempotency_key && !idempotency_key_ok(req->idempotency_key)) {
			srv_problem(res, 400, NULL,
				    "Idempotency-Key must be 1 to 128 printable ASCII characters",
				    "Idempotency-Key", NULL);
			goto out;
		}
	}
	req->body = body;
	commits = srv_store_thread_commits();
	route->handler(req, res);
	signal_change(ctx, route, req, srv_store_thread_commits() != commits);
	tag_answer(ctx, conn, cs, srv_route_revalidate(&ctx->routes, r), res);
out:
	json_decref(body);
	admission_end(ctx, &a);
	if (public_slot)
		atomic_fetch_sub(&ctx->public_busy, 1);
}

/* ---- CORS ------------------------------------------------------------------- */

/* The request's Origin when serve --cors-origin allows it (an exact
 * match, RFC 6454 origins compare as strings), else NULL. */
static const char *allowed_origin(const srv_ctx *ctx, struct MHD_Connection *conn)
{
	const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");

	for (unsigned i = 0; origin && i < ctx->n_cors_origins; i++)
		if (strcmp(origin, ctx->cors_origins[i]) == 0)
			return origin;
	return NULL;
}

/* A CORS preflight: OPTIONS with Origin and Access-Control-Request-Method
 * (Fetch standard, "CORS-preflight request"); any other OPTIONS is routed
 * and gets 405. */
static bool is_preflight(struct MHD_Connection *conn, const char *method)
{
	return strcmp(method, "OPTIONS") == 0 &&
	       MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin") &&
	       MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
}

/*
 * Answers a preflight: 204 with the path's methods and the headers a page
 * may send, for an allowed origin and a method the path has; 403 for an
 * origin serve does not allow (the browser then sends nothing), 404 for no
 * such path.  No key is asked: a browser sends none with a preflight.
 */
static void preflight(srv_ctx *ctx, struct MHD_Connection *conn, const char *url,
		      srv_response *res)
{
	const char *want = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						       "Access-Control-Request-Method");
	char scratch[DPG_MAX_URL_BYTES + 1];
	const char *params[SRV_MAX_PATH_PARAMS];

	if (!allowed_origin(ctx, conn)) {
		srv_problem(res, 403, NULL, "this origin may not call the API (serve --cors-origin)",
			    "Origin", NULL);
		return;
	}
	srv_route_allowed(&ctx->routes, url, res->allow, sizeof(res->allow));
	if (!res->allow[0]) {
		srv_problem(res, 404, NULL, "no such route", NULL, NULL);
		return;
	}
	if (srv_route_match(&ctx->routes, strcmp(want, "HEAD") == 0 ? "GET" : want, url, scratch,
			    sizeof(scratch), params) < 0) {
		srv_problem(res, 403, NULL, "the route does not support the method asked for",
			    "Access-Control-Request-Method", NULL);
		res->allow[0] = '\0';
		return;
	}
	res->status = 204;
	res->preflight = true;
}

/* The CORS headers of an answer to an allowed origin, and Vary. */
static void cors_headers(const srv_ctx *ctx, struct MHD_Connection *conn,
			 const srv_response *res, struct MHD_Response *r)
{
	const char *origin = allowed_origin(ctx, conn);
	bool by_key = res->cache && res->cache != SRV_TAG_STATIC;

	/* With origins allowed, the answer depends on the Origin sent. */
	if (ctx->n_cors_origins > 0)
		MHD_add_response_header(r, "Vary", by_key ? "Authorization, Origin" : "Origin");
	else if (by_key)
		MHD_add_response_header(r, "Vary", "Authorization");
	if (!origin)
		return;
	/* No Allow-Credentials: the key travels in a header the page sets,
	 * never in a cookie. */
	MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
	if (res->preflight) {
		MHD_add_response_header(r, "Access-Control-Allow-Methods", res->allow);
		MHD_add_response_header(r, "Access-Control-Allow-Headers",
					"Authorization, Content-Type, If-None-Match, Idempotency-Key");
		MHD_add_response_header(r, "Access-Control-Max-Age", "600");
	} else {
		MHD_add_response_header(r, "Access-Control-Expose-Headers",
					"ETag, Location, Retry-After");
	}
}

static enum MHD_Result send_response(struct MHD_Connection *conn, struct conn_state *cs,
				     srv_response *res)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	if (!res->body && res->status == 0)
		srv_problem(res, 500, NULL, "the handler produced no answer", NULL, NULL);
	r = MHD_create_response_from_buffer(res->len, res->body ? res->body : (void *)"",
					    res->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(res->body);
		return MHD_NO;
	}
	res->body = NULL;
	if (res->content_type)
		MHD_add_response_header(r, "Content-Type", res->content_type);
	/* A revalidated answer may be kept, but only for the key that read
	 * it, and only until the client asks again (no-cache); every other
	 * answer, keys and secrets among them, is never kept (no-store). */
	MHD_add_response_header(r, "Cache-Control", res->cache ? "no-cache" : "no-store");
	if (res->etag[0])
		MHD_add_response_header(r, "ETag", res->etag);
	cors_headers(cs->ctx, conn, res, r);
	if (res->csp) {
		MHD_add_response_header(r, "Content-Security-Policy", res->csp);
		MHD_add_response_header(r, "X-Frame-Options", "DENY");
		MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	}
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (res->location[0])
		MHD_add_response_header(r, "Location", res->location);
	if (res->status == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"dpgate\"");
	if (res->allow[0] && !res->preflight)
		MHD_add_response_header(r, "Allow", res->allow);
	/* Every 503 here is a passing state (a busy ledger or worker pool, a
	 * shutdown, a table being replaced, randomness failing): say when to
	 * come back (RFC 9110, 10.2.3). */
	if (res->status == 503)
		MHD_add_response_header(r, "Retry-After", "1");
	if (res->close) {
		MHD_add_response_header(r, "Connection", "close");
		cs->keep_alive = false;
	}
	cs->replied = true;
	srv_watch_disarm(cs->ctx->watch, &cs->waiter);
	/* Answered: no longer waiting, never closed for the reserve. */
	srv_conns_serving(cs->conns, cs->waiting);
	ok = MHD_queue_response(conn, (unsigned)res->status, r);
	MHD_destroy_response(r);
	/* libmicrohttpd 0.9.75 takes no answer while a body is arriving (a
	 * chunked one past DRAIN_MAX_BYTES): the connection is closed with
	 * nothing sent, and the access log says so (status 0). */
	cs->status = ok == MHD_YES ? res->status : 0;
	/* A 304's body is only its length (tag_answer): none is sent. */
	cs->out_bytes = ok == MHD_YES && res->status != 304 ? res->len : 0;
	return ok;
}

/* An RFC 9110 token character (5.6.2), the only ones a header name has. */
static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

struct bad_name {
	char name[64]; /* the first header name that is not a token, cut */
	bool found;
};

static enum MHD_Result find_bad_name(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct bad_name *b = cls;
	const unsigned char *k = (const unsigned char *)key;

	(void)kind;
	(void)value;
	if (*k == '\0')
		b->found = true;
	for (; *k && !b->found; k++)
		b->found = !is_tchar(*k);
	if (b->found) {
		size_t n = 0;

		for (k = (const unsigned char *)key; *k && n + 1 < sizeof(b->name); k++)
			b->name[n++] = (*k >= 0x20 && *k < 0x7f) ? (char)*k : '?';
		b->name[n] = '\0';
		return MHD_NO;
	}
	return MHD_YES;
}

/*
 * A header name must be a token (RFC 9110, 5.1): no space, no control.
 * libmicrohttpd 0.9.75 keeps "Content-Length : 5" as a header named
 * "Content-Length " and reads no body, so the body's bytes became the next
 * request on the connection (a proxy that reads the header frames it the
 * other way: a hidden request).  Refused with 400, the connection closed
 * (RFC 9112, 5.1).
 */
static bool header_names_refused(struct MHD_Connection *conn, srv_response *res)
{
	struct bad_name b = {.found = false};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, find_bad_name, &b);
	if (!b.found)
		return false;
	memset(res, 0, sizeof(*res));
	res->close = true;
	srv_problem(res, 400, NULL, "a header name is not an HTTP token (a space or a control "
		    "character in it)", b.name, NULL);
	return true;
}

/* The codings of a request's Transfer-Encoding headers, all of them in
 * order (RFC 9112, 6.1): how many are chunked, and whether the last one
 * is. */
struct te_codings {
	unsigned chunked;
	bool last_chunked;
};

static enum MHD_Result add_codings(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	struct te_codings *tc = cls;
	const char *p = value;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) != 0 || !p)
		return MHD_YES;
	for (;;) {
		size_t name;
		bool chunked;

		p += strspn(p, " \t,"); /* empty list elements count for nothing (RFC 9110, 5.6.1) */
		if (!*p)
			return MHD_YES;
		name = strcspn(p, " \t;,");
		chunked = name == 7 && strncasecmp(p, "chunked", 7) == 0;
		tc->chunked += chunked;
		tc->last_chunked = chunked;
		p += strcspn(p, ",");
	}
}

/*
 * Checks how the request's body is framed, before any of it is read
 * (RFC 9112, 6).  Returns true and fills `res` with a problem that closes
 * the connection when the framing is refused:
 *  - 400, two Content-Length headers, or Transfer-Encoding beside
 *    Content-Length: a proxy that reads the other header would see a
 *    hidden request (6.3);
 *  - 400, Transfer-Encoding whose last coding is not chunked, or that
 *    chunks twice: the body's length cannot be told (6.3, 7.1);
 *  - 501, any other Transfer-Encoding than one `chunked`: a coding
 *    libmicrohttpd does not decode, whose body it would wait for until the
 *    idle timeout (6.1).
 * Returns false for a request framed by one Content-Length, by `chunked`
 * alone, or by neither.
 */
static bool framing_refused(struct MHD_Connection *conn, srv_response *res)
{
	unsigned n_cl = header_count(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned n_te = header_count(conn, MHD_HTTP_HEADER_TRANSFER_ENCODING);
	const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_TRANSFER_ENCODING);
	struct te_codings tc = {0, false};
	const char *detail, *field = "Transfer-Encoding";
	int status = 400;

	if (n_cl > 1) {
		detail = "more than one Content-Length header";
		field = "Content-Length";
	} else if (n_te > 0 && n_cl > 0) {
		detail = "Transfer-Encoding and Content-Length together frame the body two ways";
	} else if (n_te == 0 || (n_te == 1 && te && strcasecmp(te, "chunked") == 0)) {
		return false;
	} else {
		MHD_get_connection_values(conn, MHD_HEADER_KIND, add_codings, &tc);
		if (!tc.last_chunked || tc.chunked > 1) {
			detail = "a Transfer-Encoding must end with chunked and chunk once, or the "
				 "body's length cannot be told";
		} else {
			status = 501;
			detail = "the only Transfer-Encoding accepted is chunked";
		}
	}
	memset(res, 0, sizeof(*res));
	res->close = true;
	srv_problem(res, status, NULL, detail, field, NULL);
	return true;
}

/* True when the client waits for 100 Continue before it sends the body. */
static bool expects_continue(struct MHD_Connection *conn)
{
	const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

	return expect && strcasecmp(expect, "100-continue") == 0;
}

/* ---- a connection's socket context --------------------------------------- */

/* Per connection (libmicrohttpd's socket context): its entry among the
 * connections waiting for a request (http_conns.h). */
struct conn_sock {
	srv_conn *waiting; /* its entry in ctx->conns, or NULL */
};

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	srv_ctx *ctx = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct conn_sock *sock = calloc(1, sizeof(*sock));
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (sock && ci)
			sock->waiting = srv_conns_add(ctx->conns, ci->connect_fd);
		*socket_context = sock;
	} else {
		struct conn_sock *sock = *socket_context;

		/* Before libmicrohttpd closes the socket (http_conns.h). */
		if (sock)
			srv_conns_remove(ctx->conns, sock->waiting);
		free(sock);
		*socket_context = NULL;
	}
}

static struct conn_sock *conn_sock_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/*
 * The first call for a request: its conn_state, made from what on_uri
 * marked in *con_cls, which then points to it.  NULL when out of memory,
 * *con_cls untouched.
 */
static struct conn_state *conn_state_new(srv_ctx *ctx, struct MHD_Connection *conn,
					 const char *url, const char *method, const char *version,
					 void **con_cls)
{
	struct conn_state *cs = calloc(1, sizeof(*cs));
	const char *connection, *ctype;
	struct conn_sock *sock;
	size_t ul;

	if (!cs)
		return NULL;
	cs->encoded_slash = *con_cls == (const void *)&encoded_slash_mark;
	cs->nul_in_target = *con_cls == (const void *)&nul_target_mark;
	cs->long_target = *con_cls == (const void *)&long_target_mark;
	cs->long_query = *con_cls == (const void *)&long_query_mark;
	*con_cls = cs;
	atomic_fetch_add(&ctx->in_flight, 1);
	clock_gettime(CLOCK_MONOTONIC, &cs->start);
	connection = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
	cs->keep_alive = strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
			 !(connection && strcasestr(connection, "close"));
	cs->route = -1;
	sock = conn_sock_of(conn);
	cs->conns = ctx->conns;
	cs->ctx = ctx;
	cs->waiting = sock ? sock->waiting : NULL;
	srv_conns_headers_in(cs->conns, cs->waiting);
	srv_strcopy(cs->method, sizeof(cs->method), method);
	srv_strcopy(cs->path, sizeof(cs->path), url);
	ul = strlen(url);
	/* Only PUT /v1/datasets/{id}/data takes a table, and only as text/csv:
	 * its JSON form ({"builtin": ...}) is parsed whole, like any JSON body,
	 * and keeps their limit. */
	ctype = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	cs->limit = (strcmp(method, "PUT") == 0 && ul > 5 && strcmp(url + ul - 5, "/data") == 0 &&
		     ctype && srv_media_type_is(ctype, "text/csv")) ?
			    DPG_MAX_CSV_BYTES :
			    DPG_MAX_BODY_BYTES;
	return cs;
}

/*
 * The checks on a request's head, made once, before any of its body is
 * read.  Returns send_response()'s result when the request is answered
 * here, MHD_YES when its body is to be read.
 */
static enum MHD_Result request_head(srv_ctx *ctx, struct MHD_Connection *conn,
				    struct conn_state *cs, const char *method, const char *url)
{
	srv_response res;
	const char *cl;

	/* A request line or header that cannot be read one way only, and
	 * refused framing, are answered at once, before any body is
	 * read, and the connection closed (RFC 9112, 3 and 6.3). */
	if (cs->nul_in_target) {
		memset(&res, 0, sizeof(res));
		res.close = true;
		srv_problem(&res, 400, NULL, "the request target holds a NUL byte", NULL, NULL);
		return send_response(conn, cs, &res);
	}
	if (header_names_refused(conn, &res) || framing_refused(conn, &res))
		return send_response(conn, cs, &res);
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
	if (cl) {
		char *end;
		unsigned long long n = strtoull(cl, &end, 10);

		if (*end != '\0' || n > cs->limit)
			cs->too_large = true;
	}
	if (cs->long_target || strlen(url) > DPG_MAX_URL_BYTES) {
		char detail[96];

		snprintf(detail, sizeof(detail),
			 "the request target (path and query) is longer than %u bytes",
			 (unsigned)DPG_MAX_URL_BYTES);
		memset(&res, 0, sizeof(res));
		srv_problem(&res, 414, "URI too long", detail, NULL, NULL);
		return send_response(conn, cs, &res);
	}
	if (cs->long_query) {
		memset(&res, 0, sizeof(res));
		refuse_long_query(&res);
		return send_response(conn, cs, &res);
	}
	if ((cl && strtoull(cl, NULL, 10) > BODY_GATE_BYTES) ||
	    header_count(conn, MHD_HTTP_HEADER_TRANSFER_ENCODING) > 0) {
		if (refused_before_body(ctx, conn, cs, method, url, &res))
			return send_response(conn, cs, &res);
		/* Admitted before its body is read: served from here
		 * on; its pace is the body timeout's to bound (and the
		 * address limit's). */
		srv_conns_serving(cs->conns, cs->waiting);
	}
	/* A declared body up to DRAIN_MAX_BYTES is read and dropped, so the
	 * client, still sending, reads the 413 rather than a reset; a
	 * larger one is answered at once and the connection closed.  A
	 * client that sent Expect: 100-continue has sent no body yet: it
	 * gets the 413 at once instead of 100 Continue (RFC 9110, 10.1.1). */
	if (cs->too_large && cl &&
	    (strtoull(cl, NULL, 10) > DRAIN_MAX_BYTES || expects_continue(conn))) {
		memset(&res, 0, sizeof(res));
		res.close = true;
		srv_problem(&res, 413, NULL, "the request body is larger than this route accepts",
			    NULL, NULL);
		return send_response(conn, cs, &res);
	}
	return MHD_YES;
}

/*
 * One piece of a request's body, `n` bytes at `data`: kept, or counted
 * and dropped once the body is known to be too large.  Returns MHD_NO to
 * cut the connection, send_response()'s result when the drained bytes
 * pass DRAIN_MAX_BYTES, MHD_YES to read on.
 */
static enum MHD_Result body_piece(srv_ctx *ctx, struct MHD_Connection *conn,
				  struct conn_state *cs, const char *data, size_t n)
{
	srv_response res;

	/* A body still arriving past the deadline: the connection is cut
	 * (libmicrohttpd 0.9.75 takes no answer while a body arrives).
	 * The idle timeout alone let one byte every 29 s hold it for ever. */
	if (ctx->body_timeout_s > 0 &&
	    srv_seconds_since(&cs->start) > (double)ctx->body_timeout_s) {
		cs->status = 0;
		return MHD_NO;
	}
	if (!cs->too_large && cs->body.len + n > cs->limit) {
		cs->too_large = true;
		free(cs->body.s);
		cs->body = (srv_buf){0};
	}
	if (cs->too_large) {
		cs->drained += n;
		if (cs->drained > DRAIN_MAX_BYTES) {
			memset(&res, 0, sizeof(res));
			srv_problem(&res, 413, NULL,
				    "the request body is larger than this route accepts", NULL, NULL);
			return send_response(conn, cs, &res);
		}
		return MHD_YES;
	}
	return srv_buf_put(&cs->body, data, n) ? MHD_YES : MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	srv_ctx *ctx = cls;
	struct conn_state *cs = *con_cls;
	srv_response res;

	if (!cs || is_mark(cs)) {
		cs = conn_state_new(ctx, conn, url, method, version, con_cls);
		if (!cs)
			return MHD_NO;
		return request_head(ctx, conn, cs, method, url);
	}
	if (cs->replied) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		return body_piece(ctx, conn, cs, upload_data, n);
	}
	/* The whole request is in: it is served from here on. */
	srv_conns_serving(cs->conns, cs->waiting);
	/* A long-poll unchanged before its deadline is suspended, holding
	 * neither this thread nor a database connection; when a change, its
	 * deadline or the recheck resumes it, libmicrohttpd calls here again
	 * and it is read again.  One marked by a commit while it read reads
	 * again at once. */
	do {
		memset(&res, 0, sizeof(res));
		cs->park = false;
		if (cs->too_large)
			srv_problem(&res, 413, NULL,
				    "the request body is larger than this route accepts", NULL, NULL);
		else if (atomic_load(&ctx->stopping))
			srv_problem(&res, 503, NULL, "the server is shutting down", NULL, NULL);
		else if (is_preflight(conn, method))
			preflight(ctx, conn, url, &res);
		else
			dispatch(ctx, conn, cs, method, url, &res);
		if (cs->park && srv_watch_suspend(ctx->watch, &cs->waiter, conn) == 0)
			return MHD_YES;
	} while (cs->park);
	return send_response(conn, cs, &res);
}

static void json_escape_into(srv_buf *b, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c != '"' && c != '\\' && c >= 0x20 && c < 0x7f)
			continue;
		srv_buf_put(b, run, (size_t)(s - run));
		if (c == '"' || c == '\\')
			srv_buf_printf(b, "\\%c", c);
		else
			srv_buf_printf(b, "\\u%04x", c);
		run = s + 1;
	}
	srv_buf_put(b, run, (size_t)(s - run));
}

/* A log line goes out in one write: stderr is unbuffered, so a line
 * printed in pieces would cost a system call a piece (one a character
 * of an escaped string) and could interleave with other threads' lines
 * wherever stderr is not locked, as in libraries. */
static void log_line(srv_buf *b)
{
	if (!b->failed)
		fwrite(b->s, 1, b->len, stderr);
	free(b->s);
}

/* libmicrohttpd's own messages (MHD_USE_ERROR_LOG: a malformed request it
 * answers itself, a failed accept), as JSON lines like the rest of the log.
 * Its messages are one sentence; a longer one is cut at 1 KiB. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[1024], ts[32];
	srv_buf line = {0};
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	srv_now_text(ts);
	srv_buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"warn\",\"msg\":\"libmicrohttpd\",\"detail\":\"", ts);
	json_escape_into(&line, msg);
	srv_buf_put(&line, "\"}\n", 3);
	log_line(&line);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	srv_ctx *ctx = cls;
	struct conn_state *cs = *con_cls;
	double secs;
	bool keep_alive;

	if (!cs || is_mark(cs))
		return; /* libmicrohttpd answered before on_request ran */
	secs = srv_seconds_since(&cs->start);
	srv_metrics_record(&ctx->route_metrics[cs->route >= 0 ? (size_t)cs->route : ctx->routes.n],
			   cs->status, secs);
	if (ctx->access_log) {
		char ts[32];
		srv_buf line = {0};

		srv_now_text(ts);
		srv_buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"request\",\"method\":\"", ts);
		json_escape_into(&line, cs->method);
		srv_buf_put(&line, "\",\"path\":\"", 10);
		json_escape_into(&line, cs->path);
		srv_buf_printf(&line, "\",\"route\":\"%s\",\"status\":%d,\"ms\":%.3f,\"bytes_in\":%zu,"
				"\"bytes_out\":%zu,\"key\":\"%s\",\"completed\":%s}\n",
			cs->route >= 0 ? ctx->routes.routes[cs->route].pattern : "-", cs->status, secs * 1e3,
			cs->body.len, cs->out_bytes, cs->key_id[0] ? cs->key_id : "-",
			toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "true" : "false");
		log_line(&line);
	}
	keep_alive = cs->keep_alive;
	srv_watch_disarm(ctx->watch, &cs->waiter);
	free(cs->body.s);
	free(cs);
	*con_cls = NULL;
	atomic_fetch_sub(&ctx->in_flight, 1);
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && keep_alive) {
		struct conn_sock *sock = conn_sock_of(conn);

		srv_conns_wait_again(ctx->conns, sock ? sock->waiting : NULL);
	}
}

/*
 * Starts libmicrohttpd on `addr` with `threads` workers and this file's
 * callbacks.  Returns the daemon, or NULL with errno set by the failure.
 */
static struct MHD_Daemon *start_daemon(srv_ctx *ctx, struct sockaddr_in *addr, unsigned port,
				       unsigned threads)
{
	/* A pool of `threads` workers; with 1, libmicrohttpd's one internal
	 * thread and no pool option at all (a size of 0 or 1 is ignored with a
	 * warning on stderr, among the JSON log lines). */
	struct MHD_OptionItem pool[] = {
		{threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)threads, NULL},
		{MHD_OPTION_END, 0, NULL},
	};

	/* No MHD_OPTION_LISTENING_ADDRESS_REUSE: its SO_REUSEPORT would let a
	 * second server bind the same port and take half the connections.
	 * libmicrohttpd's default SO_REUSEADDR still lets a restart rebind
	 * while old connections sit in TIME_WAIT; an address in use fails here. */
	/* poll, not epoll: libmicrohttpd 0.9.75 (Debian 12) quiesces a pool of
	 * epoll workers by taking the listening socket out of each worker's
	 * epoll set from this thread, while a worker that wakes meanwhile takes
	 * it out too; the second epoll_ctl fails and the library aborts
	 * ("Failed to remove listen FD from epoll set").  A poll worker leaves
	 * the socket out of its next poll set when told through its ITC, with
	 * no such race.  The sets are small: a worker polls its own connections
	 * and the listening socket. */
	return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG |
					MHD_ALLOW_SUSPEND_RESUME,
				(uint16_t)port, NULL, NULL, on_request, ctx,
				/* first, so that it gets the messages of the options below */
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)addr,
				MHD_OPTION_ARRAY, pool,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)DPG_CONNECTION_TIMEOUT_S,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)DPG_MAX_CONNECTIONS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, ctx->max_conns_per_ip,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)DPG_CONNECTION_MEMORY_BYTES,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, ctx,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, ctx,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
				MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
				MHD_OPTION_END);
}

/*
 * The graceful stop after a signal: no new connection is accepted, the
 * requests in flight get up to SHUTDOWN_GRACE_S to finish, then the
 * daemon and the connection sweeper are stopped and freed.
 */
static void stop_daemon(srv_ctx *ctx, struct MHD_Daemon *d)
{
	MHD_socket listen_fd;

	/* Stop accepting; let in-flight requests finish. */
	atomic_store(&ctx->stopping, true);
	listen_fd = MHD_quiesce_daemon(d);
	/* shutdown, not close: new connections are refused at once, but the
	 * descriptor stays ours until libmicrohttpd's threads, which drop it
	 * from their poll sets after the quiesce, have stopped; closed here,
	 * its number could be reused under them (ThreadSanitizer saw the
	 * close race their use of it with --threads 1). */
	if (listen_fd != MHD_INVALID_SOCKET)
		shutdown(listen_fd, SHUT_RDWR);
	/* Suspended long-polls are resumed and answered 503 (on_request);
	 * none is suspended after this. */
	srv_watch_close(ctx->watch);
	for (int i = 0; i < SHUTDOWN_GRACE_S * 100 && atomic_load(&ctx->in_flight) > 0; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	MHD_stop_daemon(d);
	/* After libmicrohttpd: every connection it had is closed and removed. */
	srv_conns_free(ctx->conns);
	ctx->conns = NULL;
	if (listen_fd != MHD_INVALID_SOCKET)
		close(listen_fd);
}

void srv_http_stop_signals(sigset_t *ret)
{
	struct sigaction hup;

	sigemptyset(ret);
	sigaddset(ret, SIGINT);
	sigaddset(ret, SIGTERM);
	/* A hangup's default action ends the process at once: requests cut
	 * off, the WAL left without its checkpoint, running jobs failed at the
	 * next start.  nohup(1) ignores it to keep a server past its
	 * terminal, and that choice stands. */
	if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN)
		sigaddset(ret, SIGHUP);
}

int srv_http_serve(srv_ctx *ctx, const char *host, unsigned port, unsigned threads)
{
	struct sockaddr_in addr;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	sigset_t set;
	int sig = 0;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
		fprintf(stderr, "dpgate serve: --listen needs an IPv4 address, not '%s'\n", host);
		return 2;
	}
	/* Workers inherit this mask; only the main thread takes the signals. */
	srv_http_stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ctx->public_limit = threads > 1 ? threads / 2 : 1;
	ctx->conns = srv_conns_new(ctx->header_timeout_s,
				   DPG_MAX_CONNECTIONS - DPG_CONNECTION_RESERVE);
	if (!ctx->conns || !ctx->watch) {
		srv_conns_free(ctx->conns);
		ctx->conns = NULL;
		fprintf(stderr, "dpgate serve: cannot start the connection sweeper (out of memory "
				"or threads), or no long-poll hub was made\n");
		return 1;
	}
	d = start_daemon(ctx, &addr, port, threads);
	if (!d) {
		fprintf(stderr, "dpgate serve: cannot listen on %s:%u: %s\n", host, port,
			strerror(errno));
		srv_conns_free(ctx->conns);
		ctx->conns = NULL;
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	fprintf(stderr,
		"{\"level\":\"info\",\"msg\":\"listening\",\"url\":\"http://%s:%u\",\"database\":\"%s\","
		"\"data_dir\":\"%s\",\"threads\":%u,\"header_timeout_s\":%u,"
		"\"max_conns_per_ip\":%u,\"public_metrics\":%s}\n",
		host, info ? info->port : port, ctx->db_path, ctx->data_dir, threads,
		ctx->header_timeout_s, ctx->max_conns_per_ip, ctx->public_metrics ? "true" : "false");
	fflush(stderr);

	sigwait(&set, &sig);
	fprintf(stderr, "{\"level\":\"info\",\"msg\":\"shutting down\",\"signal\":%d}\n", sig);
	stop_daemon(ctx, d);
	fprintf(stderr, "{\"level\":\"info\",\"msg\":\"stopped\"}\n");
	return 0;
}
