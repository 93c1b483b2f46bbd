/*
 * http.h: the HTTP layer: the daemon, request framing and limits,
 * connections, the router, reply helpers, key checks and /metrics.
 *
 * server/http/ is the only folder that includes microhttpd.h; nothing of
 * it shows here, so route handlers (api/) see requests and responses as
 * plain structs.  One srv_ctx is made at start (serve) and reaches every
 * handler through its request; there are no mutable globals.
 */
#ifndef DPGATE_SRV_HTTP_H
#define DPGATE_SRV_HTTP_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "acct.h"
#include "base.h"
#include "store.h"

/* ------------------------------------------------------------------------ */
/* Callers and their keys (http_auth.c)                                       */
/* ------------------------------------------------------------------------ */

/* An authenticated caller. */
typedef struct srv_principal {
	char key_id[2 * SRV_KEY_ID_BYTES + 1];
	srv_role role;
	/* Array of dataset ids (analysts, scoped viewers); this request's own
	 * (the key cache keeps another copy, never shared between threads). */
	json_t *datasets;
} srv_principal;

/*
 * Checks what a new key would carry, the same for POST /v1/keys and `dpgate
 * keys create`: `datasets` (borrowed; NULL when absent) must be an array of
 * at most DPG_MAX_SCOPED_DATASETS distinct dataset ids (srv_id_ok), none for
 * an admin key, at least one for an analyst key; `note` (NULL when absent)
 * must be 1 to DPG_MAX_NOTE_BYTES bytes.  Returns 0, or ACCT_EINVAL with the
 * first problem in err (where: "/datasets" or "/note").
 */
int srv_keys_check(srv_role role, const json_t *datasets, const char *note, acct_error *err);

/* A key's scope as the store keeps it: `datasets` (checked by
 * srv_keys_check; NULL: none) as compact JSON text, malloc'ed; NULL when
 * out of memory. */
char *srv_keys_scope_text(const json_t *datasets);

/* The server's cache of checked keys (see http_auth.c). */
typedef struct srv_auth_cache srv_auth_cache;

srv_auth_cache *srv_auth_cache_new(const char *db_path);
void srv_auth_cache_free(srv_auth_cache *cache);
void srv_auth_cache_flush(srv_auth_cache *cache);

/*
 * Checks an Authorization header value ("Bearer dpg_..."); on success fills
 * *ret (caller frees with srv_principal_clear) and returns 0.  The hash is
 * compared in constant time; unknown, malformed and revoked keys all fail
 * alike with -1; a key whose row could not be read (the database busy or
 * unavailable) fails with SRV_DB_ERROR.  `cache` may be NULL (no caching).
 */
int srv_auth_check(srv_db *db, srv_auth_cache *cache, const char *authorization,
		   srv_principal *ret);

/* Defined only by tests (weak, so NULL in dpgate): srv_auth_check calls it
 * between reading a key row and caching it, the one moment at which a
 * concurrent revocation must not be undone by the cache. */
void srv__auth_between_read_and_cache(void) __attribute__((weak));
void srv_principal_clear(srv_principal *p);

/* True when the principal may see dataset `id` (admins: all; scoped keys:
 * only listed ids; unscoped viewers: all). */
bool srv_principal_sees(const srv_principal *p, const char *id);

/* ------------------------------------------------------------------------ */
/* Requests, routes and replies (http_serve.c), metrics (http_metrics.c)      */
/* ------------------------------------------------------------------------ */

#define SRV_METRIC_STATUSES 20

typedef struct srv_route_metrics {
	atomic_uint_fast64_t by_status[SRV_METRIC_STATUSES];
	srv_histogram latency;
} srv_route_metrics;

/* Records one request on a route (index into the route table, or the
 * unmatched slot). */
void srv_metrics_record(srv_route_metrics *m, int status, double seconds);

typedef struct srv_ctx srv_ctx;

typedef enum srv_access {
	SRV_PUBLIC,      /* no key: stateless routes, health, metrics, spec */
	SRV_ANY_KEY,     /* any valid key; scope applied by the handler */
	SRV_READ,        /* viewer, analyst or admin, scoped to {id} */
	SRV_SPEND,       /* analyst scoped to {id}, or admin */
	SRV_ADMIN,       /* admin only */
} srv_access;

#define SRV_MAX_PATH_PARAMS 3

typedef struct srv_request {
	srv_ctx *ctx;
	const char *method;
	const char *path;
	const char *params[SRV_MAX_PATH_PARAMS]; /* {id}, {rid}, ... in order */
	const char *raw_body;
	size_t raw_len;
	json_t *body;                            /* parsed object on JSON routes */
	const char *content_type;
	const char *idempotency_key;
	const char *authorization;               /* the header, or NULL */
	const srv_principal *who;                /* NULL on public routes */
	srv_db *db;                              /* acquired for the request */
	const char *(*query)(void *conn, const char *key);
	void *conn;
} srv_request;

/*
 * Whether a GET route's 200 carries an ETag and answers If-None-Match with
 * 304 (http_cache.c), and what a long-poll on it (?wait=S) waits for: the
 * dataset list, the dataset {id}, the job {id}.  SRV_NO_STORE (the default
 * of a row that names none) keeps Cache-Control: no-store: keys, secrets,
 * and every answer that is not the same for every reader of the key.
 */
typedef enum srv_revalidate {
	SRV_NO_STORE = 0,
	SRV_TAG_DATASETS,           /* GET /v1/datasets */
	SRV_TAG_DATASET,            /* GET /v1/datasets/{id}[/...] */
	SRV_TAG_JOB,                /* GET /v1/jobs/{id} */
	SRV_TAG_STATIC,             /* the page and its assets: no key, no wait */
} srv_revalidate;

/* An entity tag as sent: a quote, 32 hex digits, a quote, a NUL. */
#define SRV_ETAG_BYTES 35

typedef struct srv_response {
	int status;
	char *body;                 /* malloc'd; NULL = empty */
	size_t len;
	const char *content_type;   /* static string */
	char location[256];
	char allow[64];             /* Allow header of a 405 */
	bool close;                 /* Connection: close (a request whose framing was refused) */
	char etag[SRV_ETAG_BYTES];  /* set by the router on a revalidated route's 200 or 304 */
	srv_revalidate cache;       /* the route's caching (Cache-Control, Vary) */
	const char *csp;            /* Content-Security-Policy of a page, or NULL */
	bool preflight;             /* a CORS preflight's 204 (allow: its methods) */
} srv_response;

/* A route's handler.  A handler is declared by this type
 * (`srv_route_fn srv_h_job_get;`), so that its prototype is written here
 * once and the compiler holds every definition to it. */
typedef int srv_route_fn(srv_request *req, srv_response *res);
typedef srv_route_fn *srv_handler;

typedef struct srv_route {
	const char *method;
	const char *pattern;        /* "/v1/datasets/{id}/charges" */
	srv_access access;
	bool json_body;             /* body parsed as JSON and required */
	srv_handler handler;
} srv_route;

/* A GET route that revalidates (SRV_TAG_*), by its pattern: a table of its
 * own beside the route table, whose rows then stay as they are. */
typedef struct srv_route_cache {
	const char *pattern;
	srv_revalidate revalidate;
} srv_route_cache;

/* The query parameters a route takes, by its method and pattern: a table
 * of its own beside the route table.  `names` is space-separated; "*"
 * takes any (the dashboard's page and assets, where a cache-busting
 * parameter is customary).  A route the table does not list takes none,
 * and a parameter a route does not take is refused (400): a misspelt one
 * (?column= for ?columns=) must not pass for its default. */
typedef struct srv_route_query {
	const char *method;
	const char *pattern;
	const char *names;
} srv_route_query;

/* ------------------------------------------------------------------------ */
/* Revalidation (http_cache.c)                                                */
/* ------------------------------------------------------------------------ */

/* The strong entity tag of a body (a 128-bit BLAKE2b hash of its bytes),
 * quoted, into ret. */
void srv_etag_of(const char *body, size_t len, char ret[SRV_ETAG_BYTES]);

/* Whether an If-None-Match value (NULL: absent, never matches) names
 * `etag` or is "*" (RFC 9110 13.1.2, weak comparison: a W/ prefix is
 * ignored). */
bool srv_etag_matches(const char *if_none_match, const char *etag);

/* Reads a long-poll's ?wait=S: whole seconds, 1 to DPG_MAX_LONG_POLL_S.
 * Returns 0 with *ret_seconds set, or -1 for anything else. */
int srv_wait_parse(const char *text, unsigned *ret_seconds);

/* ------------------------------------------------------------------------ */
/* Long-polls (http_watch.c)                                                  */
/* ------------------------------------------------------------------------ */

/* The server's suspended long-polls, keyed by dataset and job. */
typedef struct srv_watch srv_watch;

/*
 * Makes the hub and starts its timer thread; at most max_waiters armed at
 * once.  serve makes it before the job workers start, which signal it,
 * and frees it after they stopped; srv_http_serve only closes it.  NULL
 * when out of memory or no thread could be started.
 */
srv_watch *srv_watch_new(unsigned max_waiters);

/* Stops the timer and frees the hub (NULL: a no-op); call after
 * libmicrohttpd and every thread that signals it have stopped. */
void srv_watch_free(srv_watch *w);

/*
 * Wakes the long-polls a committed change concerns: those on dataset
 * `dataset_id` and on the dataset list (dataset_id not NULL), those on job
 * `job_id` (not NULL), or every one (both NULL, when the change's dataset
 * is not known).  Call it after the COMMIT returned; a call for nothing
 * that changed only costs a read.  `w` may be NULL (not serving).
 */
void srv_watch_signal(srv_watch *w, const char *dataset_id, const char *job_id);

/*
 * srv_watch_signal for the store's listener (srv_change_fn, with `watch`
 * the hub): a commit to dataset_id, through any server sharing the
 * database, or (NULL) to anything.
 */
void srv_watch_store_changed(void *watch, const char *dataset_id);

/* How many long-polls are armed now (0 for NULL), for /metrics. */
unsigned srv_watch_count(srv_watch *w);

/* The routes a server answers: the application's table (api/'s
 * srv_routes), handed to the daemon in its srv_ctx so that http/ does not
 * depend on the layer above it. */
typedef struct srv_route_table {
	const srv_route *routes;
	size_t n;
	const srv_route_cache *caching; /* the GET routes that revalidate */
	size_t n_caching;
	const srv_route_query *queries; /* NULL: query parameters unchecked */
	size_t n_queries;
} srv_route_table;

/* How GET route `r` of the table revalidates (SRV_NO_STORE when its
 * pattern is not in t->caching). */
srv_revalidate srv_route_revalidate(const srv_route_table *t, int r);

/*
 * Matches a method and path against the table.  Returns the route index and
 * fills params (pointers into `scratch`, which must hold a copy of the path),
 * or -1 for no such path (404), -2 for a path with no such method (405).
 */
int srv_route_match(const srv_route_table *t, const char *method, const char *path, char *scratch,
		    size_t scratch_size, const char *params[SRV_MAX_PATH_PARAMS]);

/* The methods a path supports, comma-separated, for a 405's Allow header. */
void srv_route_allowed(const srv_route_table *t, const char *path, char *buf, size_t size);

struct srv_ctx {
	srv_route_table routes;
	srv_store *store;
	srv_auth_cache *auth_cache;
	struct srv_table_cache *tables; /* parsed hosted tables (store.h) */
	struct srv_jobs *jobs;
	char db_path[4096];
	char data_dir[4096];
	srv_route_metrics *route_metrics;  /* routes.n + 1 (unmatched) */
	atomic_int in_flight;
	atomic_bool stopping;
	bool access_log;
	/* Stateless computations (the public POST routes) running, and how many
	 * may run at once: one can take seconds (a PLD calibration), and the
	 * other HTTP threads stay free for the routes that spend budget. */
	atomic_uint public_busy;
	unsigned public_limit;
	/* Seconds a request's body may take to arrive, counted from its
	 * headers; a slower one is cut off (http_serve.c, on_request). */
	unsigned body_timeout_s;
	/* Seconds a request's header block may take from its first byte, and
	 * connections one client address may hold (http_conns.h). */
	unsigned header_timeout_s;
	unsigned max_conns_per_ip;
	/* Connections waiting for a request (http_conns.h); NULL until serving. */
	struct srv_conns *conns;
	/* /metrics shows every dataset's gauges to anyone (serve
	 * --public-metrics); otherwise only those a key may read. */
	bool public_metrics;
	/* Long-polls waiting for a change (http_watch.c), made by serve
	 * before the job workers and freed after them; at most max_waiters
	 * at once (serve --max-waiters). */
	srv_watch *watch;
	unsigned max_waiters;
	/* Origins a browser page may call from (serve --cors-origin), exact
	 * matches of the Origin header; none by default. */
	const char *cors_origins[DPG_MAX_CORS_ORIGINS];
	unsigned n_cors_origins;
};

/* Fills a problem+json response (RFC 9457).  `field` may be NULL; `extra`
 * (stolen, may be NULL) is merged into the body. */
void srv_problem(srv_response *res, int status, const char *title, const char *detail,
		 const char *field, json_t *extra);

/* Whether a Content-Type value names the media type `type` (any case),
 * alone or followed by parameters: "text/csv; charset=utf-8" is text/csv,
 * "text/csvx" is not. */
bool srv_media_type_is(const char *ct, const char *type);

/* Whether a body of this Content-Type (NULL: none) is read as JSON: none,
 * application/json or curl's default form type. */
bool srv_json_content_type(const char *ct);

/* Maps an acct_error to 400/409/422/500 problem+json. */
void srv_problem_from_error(srv_response *res, const acct_error *err);

/* Sends a JSON value (stolen) with a status. */
void srv_json_reply(srv_response *res, int status, json_t *body);


/* Parses a request body: size, depth and UTF-8 bounded.  Returns the JSON
 * or NULL with `err` filled (ACCT_EINVAL). */
json_t *srv_parse_body(const char *data, size_t len, acct_error *err);

/*
 * GET /metrics: the process's metrics to anyone; the per-dataset gauges
 * (labelled archived="true" or "false") for the datasets the request's
 * key may read, or for every dataset under serve --public-metrics.  A key
 * is optional; an invalid one is 401.
 */
srv_route_fn srv_metrics_get;

/*
 * The signals that stop the server gracefully, into *ret: SIGINT, SIGTERM
 * and SIGHUP (the terminal hung up; dpgate has no reload), but not SIGHUP
 * when the process runs with it ignored, as nohup(1) starts it.  Read
 * from SIGHUP's disposition: call it before installing a handler of one's
 * own, and then install one only for the signals it gave.
 */
void srv_http_stop_signals(sigset_t *ret);

/* Runs the HTTP server until one of srv_http_stop_signals' signals; returns
 * an exit status.  ctx->watch must be made (srv_watch_new); at the stop its
 * waiters are answered and it arms no more, but it is not freed. */
int srv_http_serve(srv_ctx *ctx, const char *host, unsigned port, unsigned threads);

#endif
