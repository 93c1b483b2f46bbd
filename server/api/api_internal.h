/*
 * api_internal.h: what the route handlers of server/api/ share and nothing
 * outside api/ includes: the one spend-and-reply path, the store-outcome
 * replies, and the dataset's JSON shapes.
 */
#ifndef DPGATE_SRV_API_INTERNAL_H
#define DPGATE_SRV_API_INTERNAL_H

#include <jansson.h>

#include "api.h"
#include "http.h"
#include "json.h"
#include "store.h"

/* The 409 answer for a release that does not fit (or an archived dataset):
 * budget summary, remaining and the release's cost. `cost` may be NULL. */
void srv_reply_over_budget(srv_response *res, const srv_dataset *ds, const acct_cost *cost);

/* The 409 answer for a spend on a public dataset, which has no budget. */
void srv_reply_public(srv_response *res);

/* SHA-256 of method, path and body: what an Idempotency-Key is bound to. */
void srv_request_hash(const srv_request *req, uint8_t out[32]);

/*
 * Starts a spend from its request: zeroes *sp and sets what every spending
 * route takes from the request alike, the key that spends (the ledger's
 * actor) and, when the request has an Idempotency-Key, that key with the
 * request's hash, computed into `hash` (which must outlive *sp).
 */
void srv_spend_from_request(srv_spend *sp, const srv_request *req, uint8_t hash[32]);

/*
 * Answers a retry from storage, before anything else of the request is
 * checked, so that a replay is the same bytes even after the dataset changed.
 * True when *res holds the answer: the stored one (given to `reply`, which
 * takes the body) or the store's error.  False when there is nothing stored
 * for sp's Idempotency-Key, or it has none: go on.
 */
bool srv_spend_replayed(const srv_request *req, srv_response *res, const srv_spend *sp,
			void (*reply)(srv_response *res, int status, char *body));

/*
 * How a route answers its spend's outcomes where routes differ; zeroed
 * members take the defaults.  stored: sends the stored answer (default
 * srv_reply_raw_json); conflict: the 409 (default srv_reply_over_budget
 * with `cost`, which may be NULL); refused: the problem of a planner's
 * refusal; unavailable: the 503's detail for every other store outcome but
 * a reused Idempotency-Key and a database file gone from its path
 * (default: srv_reply_store_error's, naming `what` on a 404).
 */
typedef struct srv_spend_replies {
	const acct_cost *cost;
	void (*stored)(srv_response *res, int status, char *body);
	void (*conflict)(srv_response *res, const srv_dataset *ds, void *arg);
	const acct_error *refused;
	const char *unavailable;
	const char *what;
	void *arg;
} srv_spend_replies;

/*
 * The one spend-and-reply path: admits and writes `sp` (srv_store_spend;
 * ds gets the dataset after it, or as it stood for a 409) and answers as
 * `how` says.  The answer is revealed only when the store returned SRV_OK
 * (durable) or SRV_REPLAYED.  Returns the store's code.
 */
int srv_spend_and_reply(const srv_request *req, srv_response *res, const srv_spend *sp,
			srv_dataset *ds, const srv_spend_replies *how);

/* 404 (`what`), 422 (Idempotency-Key reused) or 503 for a store outcome. */
void srv_reply_store_error(srv_response *res, int rc, const char *what);

/* The 503's detail for SRV_DB_MOVED, on a write and on /healthz. */
#define SRV_DB_MOVED_DETAIL                                                           \
	"the database file or its WAL was deleted, moved or replaced under the server: " \
	"nothing was written; writes resume once it is back at its path"

/* Sends stored or prebuilt JSON bytes (takes ownership of body). */
void srv_reply_raw_json(srv_response *res, int status, char *body);

/* A JSON value's compact text (srv_json_dump), taking the reference (NULL
 * gives NULL): what a spend's answer becomes for the store. */
char *srv_json_text(json_t *j);

/* An event's canonical JSON text, as the ledger stores it; NULL when out of
 * memory. */
char *srv_event_text(const acct_event *ev);

/* The budget summary of DESIGN.md for a dataset (new reference); an rdp
 * dataset's also says how its filter splits delta ("filter"). */
json_t *srv_dataset_budget_json(const srv_dataset *ds);

/*
 * Adds to `cost` (a JSON object that states what a charge of `ev` costs on
 * this dataset's ledger) what the ledger's filter adds to the event's own
 * price: on an rdp ledger "event_epsilon", the event's own RDP epsilon at the
 * budget's full delta (minimised over the RDP accountant's orders), beside
 * the filter's orders and delta share.  Nothing on other ledgers.  Returns
 * 0, or -1 when out of memory.
 */
int srv_dataset_explain_cost(const srv_dataset *ds, const acct_event *ev, json_t *cost);

/*
 * A basic ledger's refusal to price an event without a delta share names the
 * accountant's field, "delta"; a route takes that share in "ledger_delta".
 * Rewrites such a refusal in err (where and text) to name "ledger_delta";
 * leaves any other error as it is.
 */
void srv__name_ledger_delta(acct_error *err);

/*
 * srv_dataset_budget_json's object as compact JSON text, byte for byte what
 * srv_json_dump prints of it, into buf; returns its length, or 0 when it
 * does not fit or a figure is not finite.
 */
size_t srv_dataset_budget_text(const srv_dataset *ds, char *buf, size_t size);
/* Query parameter `key` as an integer in [lo, hi], `dflt` when absent;
 * otherwise answers 400 naming `key` and returns -1. */
int srv__query_int(srv_request *req, const char *key, int64_t lo, int64_t hi, int64_t dflt,
		   int64_t *ret, srv_response *res);
/* For a listing of dataset {id} paged by the id of its last row: reads
 * the dataset (as srv__dataset_or_reply), `limit` (default and most
 * DPG_MAX_PAGE_SIZE) and `after`, which `found` (SRV_OK, SRV_NOT_FOUND or
 * SRV_DB_ERROR) must find among the dataset's `what`; otherwise answers
 * (404, 400 naming the parameter, 503) and returns false. */
bool srv__id_page_or_reply(srv_request *req, srv_response *res, srv_dataset *ds,
			   int (*found)(srv_db *db, const char *dataset_id, const char *id),
			   const char *what, int64_t *ret_limit, const char **ret_after);
/* Reads dataset {id} (req->params[0]), or answers as every dataset route
 * does (404 when there is none); false when it answered. */
bool srv__dataset_or_reply(srv_request *req, srv_response *res, srv_dataset *ds);
/* Whether the caller may change (commit, release, cancel, query) what key
 * `actor` made: only that key and admin keys may.  Any key that sees the
 * dataset may read it. */
bool srv__may_change(const srv_request *req, const char *actor);
/* The same for a route that a public dataset has no use for: a public one
 * is also answered (srv_reply_public); false when it answered. */
bool srv__private_dataset_or_reply(srv_request *req, srv_response *res, srv_dataset *ds);

/* The dataset resource (new reference). */
json_t *srv_dataset_json(const srv_dataset *ds);

/* A page of the ledger, of a dataset's audit rows, of the keys' audit
 * trail (whose `id` is unused) or of a dataset's reservations, each row
 * appended to `entries` as JSON (api_lists.c).  SRV_OK or SRV_DB_ERROR. */
int srv_ledger_json(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
		    json_t *entries, int64_t *ret_next);
int srv_audit_json(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
		   json_t *entries, int64_t *ret_next);
int srv_keys_audit_json(srv_db *db, const char *unused, int64_t after, int64_t limit,
			json_t *entries, int64_t *ret_next);
int srv_reservations_json(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			  json_t *entries, int64_t *ret_next);

#endif
