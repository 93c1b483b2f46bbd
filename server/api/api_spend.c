/*
 * api_spend.c: the one spend-and-reply path every spending route shares:
 * a spend started from its request (actor, Idempotency-Key and the
 * request's hash), a retry answered from storage, and the store's outcomes
 * mapped to replies in one place (404 / 409 over budget / 422 / 503).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "api_internal.h"

/* ---- helpers -------------------------------------------------------------- */

void srv_reply_store_error(srv_response *res, int rc, const char *what)
{
	switch (rc) {
	case SRV_NOT_FOUND:
		srv_problem(res, 404, NULL, what, NULL, NULL);
		break;
	case SRV_FORBIDDEN:
		srv_problem(res, 403, NULL, "this was made by another key: only it, or an admin key, "
				      "can change it", NULL, NULL);
		break;
	case SRV_NO_RANDOM:
		srv_problem(res, 503, NULL, "no secure randomness is available; nothing was charged",
			    NULL, NULL);
		break;
	case SRV_IDEM_MISMATCH:
		srv_problem(res, 422, NULL,
			    "this Idempotency-Key was used with a different request", "Idempotency-Key",
			    NULL);
		break;
	case SRV_COMMIT_FAILED:
		srv_problem(res, 503, NULL,
			    "the database could not be written (a storage error); nothing was answered. "
			    "The write may still be found, and counted, after the server restarts; "
			    "a retry with the same Idempotency-Key is applied once",
			    NULL, NULL);
		break;
	case SRV_DB_MOVED:
		srv_problem(res, 503, NULL, SRV_DB_MOVED_DETAIL, NULL, NULL);
		break;
	default:
		srv_problem(res, 503, NULL, "the ledger is busy or unavailable; nothing was charged",
			    NULL, NULL);
		break;
	}
}

/* Computes SHA-256(method \n path \n body) for idempotency checks. */
void srv_request_hash(const srv_request *req, uint8_t out[crypto_hash_sha256_BYTES])
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)req->method, strlen(req->method));
	crypto_hash_sha256_update(&st, (const uint8_t *)"\n", 1);
	crypto_hash_sha256_update(&st, (const uint8_t *)req->path, strlen(req->path));
	crypto_hash_sha256_update(&st, (const uint8_t *)"\n", 1);
	if (req->raw_len)
		crypto_hash_sha256_update(&st, (const uint8_t *)req->raw_body, req->raw_len);
	crypto_hash_sha256_final(&st, out);
}

void srv_spend_from_request(srv_spend *sp, const srv_request *req, uint8_t hash[32])
{
	memset(sp, 0, sizeof(*sp));
	sp->actor = req->who->key_id;
	if (req->idempotency_key) {
		srv_request_hash(req, hash);
		sp->idempotency_key = req->idempotency_key;
		sp->request_hash = hash;
	}
}

bool srv_spend_replayed(const srv_request *req, srv_response *res, const srv_spend *sp,
			void (*reply)(srv_response *res, int status, char *body))
{
	char *body = NULL;
	int status = 0, rc;

	if (!sp->idempotency_key)
		return false;
	rc = srv_store_replay(req->db, sp, &status, &body);
	if (rc == SRV_REPLAYED) {
		reply(res, status, body);
		return true;
	}
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, NULL);
		return true;
	}
	return false;
}

void srv_reply_public(srv_response *res)
{
	srv_problem(res, 409, "Public dataset",
		    "the dataset is public: its rows protect nothing, so it has no budget to "
		    "charge or reserve and no ledger; nothing was charged",
		    NULL, NULL);
}

void srv_reply_raw_json(srv_response *res, int status, char *body)
{
	res->status = status;
	res->content_type = "application/json";
	res->body = body;
	res->len = strlen(body);
}

void srv_reply_over_budget(srv_response *res, const srv_dataset *ds, const acct_cost *cost)
{
	acct_filter f;
	json_t *budget = srv_dataset_budget_json(ds);
	json_t *extra;
	double cost_eps = NAN;

	if (ds->is_public) {
		json_decref(budget);
		srv_reply_public(res);
		return;
	}
	if (ds->archived) {
		srv_problem(res, 409, NULL, "the dataset is archived and accepts no new charges", NULL,
			    json_pack("{s:o}", "budget", budget));
		return;
	}
	if (cost && srv_dataset_filter(ds, &f, NULL) == 0)
		cost_eps = acct_filter_epsilon(&f, cost);
	extra = json_pack("{s:O, s:O}", "budget", budget, "remaining",
			  json_object_get(budget, "remaining"));
	if (extra && isfinite(cost_eps))
		json_object_set_new(extra, "cost", json_pack("{s:f}", "epsilon", cost_eps));
	json_decref(budget);
	srv_problem(res, 409, "Budget exhausted",
		    "the release does not fit the dataset's remaining privacy budget", NULL, extra);
}

char *srv_json_text(json_t *j)
{
	char *text = j ? srv_json_dump(j) : NULL;

	json_decref(j);
	return text;
}

int srv__query_int(srv_request *req, const char *key, int64_t lo, int64_t hi, int64_t dflt,
		   int64_t *ret, srv_response *res)
{
	const char *v = req->query(req->conn, key);
	char *end;
	long long x;
	char detail[128];

	if (!v) {
		*ret = dflt;
		return 0;
	}
	errno = 0;
	x = strtoll(v, &end, 10);
	if (*v < '0' || *v > '9' || *end != '\0' || errno == ERANGE || x < lo || x > hi) {
		snprintf(detail, sizeof(detail), "'%s' must be an integer in [%lld, %lld]", key,
			 (long long)lo, (long long)hi);
		srv_problem(res, 400, NULL, detail, key, NULL);
		return -1;
	}
	*ret = x;
	return 0;
}

bool srv__id_page_or_reply(srv_request *req, srv_response *res, srv_dataset *ds,
			   int (*found)(srv_db *db, const char *dataset_id, const char *id),
			   const char *what, int64_t *ret_limit, const char **ret_after)
{
	char detail[128];
	int rc;

	*ret_after = req->query(req->conn, "after");
	if (!srv__dataset_or_reply(req, res, ds) ||
	    srv__query_int(req, "limit", 1, DPG_MAX_PAGE_SIZE, DPG_MAX_PAGE_SIZE, ret_limit, res) < 0)
		return false;
	rc = *ret_after ? found(req->db, ds->id, *ret_after) : SRV_OK;
	if (rc == SRV_NOT_FOUND) {
		snprintf(detail, sizeof(detail), "'after' must be the id of one of the dataset's %s",
			 what);
		srv_problem(res, 400, NULL, detail, "after", NULL);
		return false;
	}
	if (rc != SRV_OK) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return false;
	}
	return true;
}

bool srv__may_change(const srv_request *req, const char *actor)
{
	return req->who->role == SRV_ROLE_ADMIN || strcmp(req->who->key_id, actor) == 0;
}

bool srv__dataset_or_reply(srv_request *req, srv_response *res, srv_dataset *ds)
{
	int rc = srv_store_dataset_get(req->db, req->params[0], ds);

	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset");
		return false;
	}
	return true;
}

bool srv__private_dataset_or_reply(srv_request *req, srv_response *res, srv_dataset *ds)
{
	if (!srv__dataset_or_reply(req, res, ds))
		return false;
	if (ds->is_public) {
		srv_reply_public(res);
		return false;
	}
	return true;
}

char *srv_event_text(const acct_event *ev)
{
	return srv_json_text(srv_event_to_json(ev));
}

int srv_spend_and_reply(const srv_request *req, srv_response *res, const srv_spend *sp,
			srv_dataset *ds, const srv_spend_replies *how)
{
	char *body = NULL;
	int status = 0;
	int rc = srv_store_spend(req->db, sp, &status, &body, ds);

	switch (rc) {
	case SRV_OK:
	case SRV_REPLAYED:
		(how->stored ? how->stored : srv_reply_raw_json)(res, status, body);
		body = NULL;
		break;
	case SRV_CONFLICT:
		if (how->conflict)
			how->conflict(res, ds, how->arg);
		else
			srv_reply_over_budget(res, ds, how->cost);
		break;
	case SRV_PLAN_REFUSED:
		if (how->refused) {
			srv_problem_from_error(res, how->refused);
			break;
		}
		/* fall through */
	default:
		if (how->unavailable && rc != SRV_IDEM_MISMATCH && rc != SRV_DB_MOVED)
			srv_problem(res, 503, NULL, how->unavailable, NULL, NULL);
		else
			srv_reply_store_error(res, rc, how->what);
		break;
	}
	free(body);
	return rc;
}
