/*
 * http_metrics.c: /metrics in the Prometheus text format (version 0.0.4).
 *
 * Counters are lock-free atomics updated when a request completes; the
 * per-dataset gauges are read from the store at scrape time, through the
 * same filter code the gate uses, so dashboards and the gate agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_conns.h"
#include "store.h"

static const int metric_statuses[SRV_METRIC_STATUSES] = {
	200, 201, 202, 204, 400, 401, 403, 404, 405, 409,
	413, 414, 415, 422, 429, 500, 503, 0, 0, 0,
};

static int status_slot(int status)
{
	for (int i = 0; i < SRV_METRIC_STATUSES; i++)
		if (metric_statuses[i] == status)
			return i;
	return SRV_METRIC_STATUSES - 1; /* "other" */
}

void srv_metrics_record(srv_route_metrics *m, int status, double seconds)
{
	atomic_fetch_add(&m->by_status[status_slot(status)], 1);
	srv_histogram_observe(&m->latency, seconds);
}

/* The _bucket, _sum and _count lines of one histogram, with `labels`
 * (NULL for none) before le; nothing when it is empty and skip_empty.
 * Each bucket is read once and _count is their total, so that it always
 * equals the +Inf bucket, even while requests are observed. */
static void histogram_lines(srv_buf *b, const char *name, const char *labels,
			    const srv_histogram *h, bool skip_empty)
{
	uint64_t n[SRV_METRIC_BUCKETS], cum = 0;
	const char *sep = labels ? "," : "", *open = labels ? "{" : "", *close = labels ? "}" : "";

	for (int i = 0; i < SRV_METRIC_BUCKETS; i++) {
		n[i] = atomic_load(&h->bucket[i]);
		cum += n[i];
	}
	if (cum == 0 && skip_empty)
		return;
	if (!labels)
		labels = "";
	cum = 0;
	for (int i = 0; i < SRV_METRIC_BUCKETS; i++) {
		cum += n[i];
		if (i < SRV_METRIC_BUCKETS - 1)
			srv_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, srv_histogram_bound(i),
				  (unsigned long long)cum);
		else
			srv_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
				  (unsigned long long)cum);
	}
	srv_buf_printf(b, "%s_sum%s%s%s %.9f\n", name, open, labels, close,
		  1e-9 * (double)atomic_load(&h->sum_ns));
	srv_buf_printf(b, "%s_count%s%s%s %llu\n", name, open, labels, close, (unsigned long long)cum);
}

/* Whose datasets the per-dataset gauges show: every one, or those a key
 * may read (srv_principal_sees), or none (who NULL, all false). */
struct gauge_scope {
	srv_buf *b;
	const srv_principal *who;
	bool all;
};

static bool gauge_visible(void *arg, const char *id)
{
	const struct gauge_scope *g = arg;

	return g->all || srv_principal_sees(g->who, id);
}

static void dataset_gauges(void *arg, const srv_dataset *ds)
{
	const struct gauge_scope *g = arg;
	srv_buf *b = g->b;
	const char *archived = ds->archived ? "true" : "false";
	srv_epsilons e;

	/* A public dataset has no budget to gauge. */
	if (ds->is_public || srv_dataset_epsilons(ds, NULL, &e) < 0)
		return;
	/* Dataset ids are [A-Za-z0-9_.-], so they need no label escaping. */
	srv_buf_printf(b, "dpgate_dataset_epsilon_spent{dataset=\"%s\",accountant=\"%s\",archived=\"%s\"} %.17g\n",
		  ds->id, acct_ledger_kind_name(ds->accountant), archived, e.spent);
	srv_buf_printf(b, "dpgate_dataset_epsilon_remaining{dataset=\"%s\",accountant=\"%s\",archived=\"%s\"} %.17g\n",
		  ds->id, acct_ledger_kind_name(ds->accountant), archived, e.remaining);
	srv_buf_printf(b, "dpgate_dataset_epsilon_budget{dataset=\"%s\",archived=\"%s\"} %.17g\n", ds->id,
		  archived, ds->budget_epsilon);
	srv_buf_printf(b, "dpgate_dataset_charges{dataset=\"%s\",archived=\"%s\"} %lld\n", ds->id, archived,
		  (long long)ds->charges);
}

/*
 * A metric family with a line set per route: its HELP and TYPE lines
 * (`header`), then emit(b, labels, m) for each route's metrics m with its
 * labels, method="..",route="..", and last for the row after the routes,
 * the requests no route matched.
 */
static void per_route(srv_buf *b, const srv_ctx *ctx, const char *header,
		      void (*emit)(srv_buf *b, const char *labels, const srv_route_metrics *m))
{
	srv_buf_printf(b, "%s", header);
	for (size_t r = 0; r <= ctx->routes.n; r++) {
		const char *route = r < ctx->routes.n ? ctx->routes.routes[r].pattern : "unmatched";
		const char *method = r < ctx->routes.n ? ctx->routes.routes[r].method : "";
		char labels[256];

		snprintf(labels, sizeof(labels), "method=\"%s\",route=\"%s\"", method, route);
		emit(b, labels, &ctx->route_metrics[r]);
	}
}

/* dpgate_http_requests_total: a line per status a route has answered. */
static void request_count_lines(srv_buf *b, const char *labels, const srv_route_metrics *m)
{
	for (int s = 0; s < SRV_METRIC_STATUSES; s++) {
		uint64_t n = atomic_load(&m->by_status[s]);

		if (n == 0)
			continue;
		if (metric_statuses[s])
			srv_buf_printf(b, "dpgate_http_requests_total{%s,status=\"%d\"} %llu\n", labels,
				       metric_statuses[s], (unsigned long long)n);
		else
			srv_buf_printf(b, "dpgate_http_requests_total{%s,status=\"other\"} %llu\n",
				       labels, (unsigned long long)n);
	}
}

/* dpgate_http_request_duration_seconds: a route's latency histogram. */
static void request_duration_lines(srv_buf *b, const char *labels, const srv_route_metrics *m)
{
	histogram_lines(b, "dpgate_http_request_duration_seconds", labels, &m->latency, true);
}

/* The spend write transactions: how many ran, how many spends they
 * carried, how many COMMITs failed, and how long they took. */
static void spend_metrics(srv_buf *b, srv_ctx *ctx)
{
	uint64_t batches, spends;
	const srv_histogram *txn, *commit;

	srv_store_group_stats(ctx->store, &batches, &spends);
	srv_buf_printf(b, "# HELP dpgate_spend_commits_total Write transactions run for charges, reservations and other spends (concurrent spends share one); one whose spends were all refused is rolled back, not fsync'ed.\n"
		     "# TYPE dpgate_spend_commits_total counter\n"
		     "dpgate_spend_commits_total %llu\n"
		     "# HELP dpgate_spends_total Spends run in those transactions.\n"
		     "# TYPE dpgate_spends_total counter\n"
		     "dpgate_spends_total %llu\n",
		  (unsigned long long)batches, (unsigned long long)spends);
	srv_buf_printf(b, "# HELP dpgate_commit_failures_total COMMITs that failed (a storage error: fsync, a full disk), each logged; the request answered 503 and released nothing.\n"
		     "# TYPE dpgate_commit_failures_total counter\n"
		     "dpgate_commit_failures_total %llu\n",
		  (unsigned long long)srv_store_commit_failures(ctx->store));
	srv_store_spend_timings(ctx->store, &txn, &commit);
	srv_buf_printf(b, "# HELP dpgate_spend_transaction_duration_seconds Spend write transactions that committed, from BEGIN IMMEDIATE to the durable COMMIT's return (the write lock held).\n"
		     "# TYPE dpgate_spend_transaction_duration_seconds histogram\n");
	histogram_lines(b, "dpgate_spend_transaction_duration_seconds", NULL, txn, false);
	srv_buf_printf(b, "# HELP dpgate_spend_commit_duration_seconds The COMMIT of those transactions alone: the WAL write and its fsync.\n"
		     "# TYPE dpgate_spend_commit_duration_seconds histogram\n");
	histogram_lines(b, "dpgate_spend_commit_duration_seconds", NULL, commit, false);
}

/* The hosted-table cache: hits, misses, shared parses, evictions, the
 * bytes it holds, and parses that waited for a slot.  The bytes (and the
 * evictions they cause) follow the tables' sizes, from which a private
 * row count reads off exactly (12 bytes a row of a number and a
 * category): their values are shown only to an admin key, or to anyone
 * under serve --public-metrics, as the per-dataset gauges are. */
static void table_cache_metrics(srv_buf *b, srv_ctx *ctx, const struct gauge_scope *scope)
{
	bool sizes = scope->all || (scope->who && scope->who->role == SRV_ROLE_ADMIN);
	srv_table_cache_stats t;

	srv_table_cache_get_stats(ctx->tables, &t);
	srv_buf_printf(b, "# HELP dpgate_table_cache_hits_total Hosted-table reads served from a kept parse.\n"
		     "# TYPE dpgate_table_cache_hits_total counter\n"
		     "dpgate_table_cache_hits_total %llu\n"
		     "# HELP dpgate_table_cache_misses_total Hosted-table reads that read and parsed the file.\n"
		     "# TYPE dpgate_table_cache_misses_total counter\n"
		     "dpgate_table_cache_misses_total %llu\n"
		     "# HELP dpgate_table_cache_waits_total Hosted-table reads that waited for"
		     " another read's parse of the same table and shared it.\n"
		     "# TYPE dpgate_table_cache_waits_total counter\n"
		     "dpgate_table_cache_waits_total %llu\n"
		     "# HELP dpgate_table_cache_slot_waits_total Hosted-table parses that waited"
		     " for one of the parse slots.\n"
		     "# TYPE dpgate_table_cache_slot_waits_total counter\n"
		     "dpgate_table_cache_slot_waits_total %llu\n"
		     "# HELP dpgate_table_cache_evictions_total Kept parses dropped to stay within"
		     " the bound (admin key).\n"
		     "# TYPE dpgate_table_cache_evictions_total counter\n"
		     "# HELP dpgate_table_cache_bytes Memory held by kept parses (admin key).\n"
		     "# TYPE dpgate_table_cache_bytes gauge\n",
		  t.hits, t.misses, t.waits, t.slot_waits);
	if (sizes)
		srv_buf_printf(b, "dpgate_table_cache_evictions_total %llu\n"
			     "dpgate_table_cache_bytes %zu\n", t.evictions, t.bytes);
}

/* The connections waiting for a request, and those the server closed. */
static void connection_metrics(srv_buf *b, srv_ctx *ctx)
{
	srv_conns_stats cs = srv_conns_read_stats(ctx->conns);

	srv_buf_printf(b, "# HELP dpgate_connections_waiting Connections waiting for a request: its headers, a body not yet admitted, or idle between keep-alive requests.\n"
		     "# TYPE dpgate_connections_waiting gauge\n"
		     "dpgate_connections_waiting %u\n"
		     "# HELP dpgate_connections_closed_total Waiting connections the server closed, by why: a request's headers past the header deadline (serve --header-timeout, answered 408), or the longest-waiting one when waiting connections held all but the reserved slots.\n"
		     "# TYPE dpgate_connections_closed_total counter\n"
		     "dpgate_connections_closed_total{reason=\"header_timeout\"} %llu\n"
		     "dpgate_connections_closed_total{reason=\"waiting_limit\"} %llu\n",
		  cs.waiting, (unsigned long long)cs.header_timeouts,
		  (unsigned long long)cs.waiting_limit);
	srv_buf_printf(b, "# HELP dpgate_long_polls_waiting Long-polls (?wait=S) waiting for a change (serve --max-waiters bounds them).\n"
		     "# TYPE dpgate_long_polls_waiting gauge\n"
		     "dpgate_long_polls_waiting %u\n",
		  srv_watch_count(ctx->watch));
}

/* The per-dataset gauges' HELP and TYPE lines, always, and their values
 * for the datasets `scope` shows. */
static void dataset_metrics(srv_buf *b, srv_ctx *ctx, struct gauge_scope *scope)
{
	srv_db *db;

	/* Which datasets exist, their budgets and spending are the ledger's,
	 * not the process's: shown only as the request's key may read them,
	 * or to anyone under serve --public-metrics. */
	srv_buf_printf(b, "# HELP dpgate_dataset_epsilon_spent Epsilon spent, as the dataset's filter reports it.\n"
		     "# TYPE dpgate_dataset_epsilon_spent gauge\n"
		     "# HELP dpgate_dataset_epsilon_remaining Epsilon still available (budget minus spent and reserved).\n"
		     "# TYPE dpgate_dataset_epsilon_remaining gauge\n"
		     "# HELP dpgate_dataset_epsilon_budget The dataset's epsilon budget.\n"
		     "# TYPE dpgate_dataset_epsilon_budget gauge\n"
		     "# HELP dpgate_dataset_charges Charges on the dataset's ledger.\n"
		     "# TYPE dpgate_dataset_charges gauge\n");
	if (scope->all || scope->who) {
		scope->b = b;
		db = srv_store_acquire(ctx->store);
		srv_store_dataset_list(db, gauge_visible, dataset_gauges, scope);
		srv_store_release(ctx->store, db);
	}
}

/* The exposition text; the per-dataset gauges as `scope` says.  NULL when
 * out of memory. */
static char *metrics_render(srv_ctx *ctx, struct gauge_scope *scope, size_t *ret_len)
{
	srv_buf b = {0};

	per_route(&b, ctx,
		  "# HELP dpgate_http_requests_total HTTP requests by route and status.\n"
		  "# TYPE dpgate_http_requests_total counter\n",
		  request_count_lines);
	/* A histogram per route that has served a request, and one for the
	 * unmatched. */
	per_route(&b, ctx,
		  "# HELP dpgate_http_request_duration_seconds Request latency by route.\n"
		  "# TYPE dpgate_http_request_duration_seconds histogram\n",
		  request_duration_lines);
	spend_metrics(&b, ctx);
	table_cache_metrics(&b, ctx, scope);
	connection_metrics(&b, ctx);
	dataset_metrics(&b, ctx, scope);
	if (b.failed || !b.s) {
		free(b.s);
		return NULL;
	}
	*ret_len = b.len;
	return b.s;
}

int srv_metrics_get(srv_request *req, srv_response *res)
{
	srv_ctx *ctx = req->ctx;
	struct gauge_scope scope = {.all = ctx->public_metrics};
	srv_principal who;
	bool have_who = false;
	size_t len = 0;
	char *text;

	/* A key is optional; one given must be valid, so that a scraper with
	 * a revoked or mistyped token fails loudly rather than losing its
	 * gauges. */
	if (req->authorization) {
		srv_db *db = srv_store_acquire(ctx->store);
		int rc = srv_auth_check(db, ctx->auth_cache, req->authorization, &who);

		srv_store_release(ctx->store, db);
		if (rc == SRV_DB_ERROR) {
			srv_problem(res, 503, NULL, "the database could not be read", NULL, NULL);
			return 0;
		}
		if (rc < 0) {
			srv_problem(res, 401, NULL,
				    "the API key is not valid (a key is optional on /metrics)",
				    "Authorization", NULL);
			return 0;
		}
		have_who = true;
		scope.who = &who;
	}
	text = metrics_render(ctx, &scope, &len);
	if (have_who)
		srv_principal_clear(&who);
	if (!text) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		return 0;
	}
	res->status = 200;
	res->content_type = "text/plain; version=0.0.4";
	res->body = text;
	res->len = len;
	return 0;
}
