/*
 * api_lists.c: the store's listings as the API shows them: ledger and
 * audit pages, reservations, keys and their audit trail, and the verify
 * report.  The store hands rows over as C structs (store.h); their JSON
 * shapes are decided here, once.
 */
#include <string.h>
#include <time.h>

#include "api_internal.h"

/* A budget pair as JSON: {"epsilon", "delta"}, or JSON null when it was
 * never recorded. */
static json_t *budget_pair(bool known, double epsilon, double delta)
{
	if (!known)
		return json_null();
	return json_pack("{s:f, s:f}", "epsilon", epsilon, "delta", delta);
}

/*
 * One ledger row as JSON.  A budget row also shows the budget it replaced
 * (previous_budget, when recorded); in the audit list (`audit`), create and
 * budget rows show their budget as "budget" and a synthesized creation row
 * says so.
 */
static json_t *ledger_row_json(const srv_ledger_row *r, bool audit)
{
	bool has_budget = strcmp(r->kind, "create") == 0 || strcmp(r->kind, "budget") == 0;
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "seq", json_integer(r->seq));
	json_object_set_new(o, "kind", json_string(r->kind));
	if (r->event)
		json_object_set_new(o, "event", json_loads(r->event, 0, NULL));
	if (audit && has_budget) {
		json_object_set_new(o, "budget", budget_pair(r->has_epsilon, r->epsilon, r->delta));
	} else {
		if (r->has_epsilon)
			json_object_set_new(o, "epsilon", json_real(r->epsilon));
		if (r->has_delta)
			json_object_set_new(o, "delta", json_real(r->delta));
	}
	if (strcmp(r->kind, "budget") == 0 && r->has_previous)
		json_object_set_new(o, "previous_budget",
				    budget_pair(true, r->previous_epsilon, r->previous_delta));
	if (r->reservation_id)
		json_object_set_new(o, "reservation_id", json_string(r->reservation_id));
	if (r->note)
		json_object_set_new(o, "note", json_string(r->note));
	if (audit && strcmp(r->kind, "create") == 0)
		json_object_set_new(o, "synthesized",
				    json_boolean(r->note && strcmp(r->note, "synthesized") == 0));
	json_object_set_new(o, "actor", json_string(r->actor));
	json_object_set_new(o, "created_at", json_string(r->created_at));
	if (r->idempotency_key)
		json_object_set_new(o, "idempotency_key", json_string(r->idempotency_key));
	return o;
}

/* Appends the new object `o` to the array `arr`: 0, or -1 (o is freed). */
static int append(json_t *arr, json_t *o)
{
	return o && json_array_append_new(arr, o) == 0 ? 0 : -1;
}

static int ledger_append(void *arg, const srv_ledger_row *r)
{
	return append(arg, ledger_row_json(r, false));
}

static int audit_append(void *arg, const srv_ledger_row *r)
{
	return append(arg, ledger_row_json(r, true));
}

int srv_ledger_json(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
		    json_t *entries, int64_t *ret_next)
{
	return srv_store_ledger_list(db, dataset_id, after, limit, ledger_append, entries, ret_next);
}

int srv_audit_json(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
		   json_t *entries, int64_t *ret_next)
{
	return srv_store_dataset_audit(db, dataset_id, after, limit, audit_append, entries, ret_next);
}

static int key_event_append(void *arg, const srv_key_event_row *r)
{
	return append(arg, json_pack("{s:I, s:s, s:s, s:s, s:o, s:s, s:b, s:s}", "seq",
				     (json_int_t)r->seq, "key_id", r->key_id, "action", r->action,
				     "role", r->role, "datasets", json_loads(r->datasets, 0, NULL),
				     "actor", r->actor, "synthesized", r->synthesized, "created_at",
				     r->created_at));
}

int srv_keys_audit_json(srv_db *db, const char *unused, int64_t after, int64_t limit,
			json_t *entries, int64_t *ret_next)
{
	(void)unused;
	return srv_keys_audit(db, after, limit, key_event_append, entries, ret_next);
}

static int reservation_append(void *arg, const srv_reservation_row *r)
{
	json_t *o = json_object();
	time_t exp = (time_t)r->expires_at;
	struct tm tm;
	char expires[32];

	gmtime_r(&exp, &tm);
	strftime(expires, sizeof(expires), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "ledger_seq", json_integer(r->ledger_seq));
	json_object_set_new(o, "event", json_loads(r->event, 0, NULL));
	json_object_set_new(o, "epsilon", json_real(r->epsilon));
	json_object_set_new(o, "state", json_string(r->state));
	json_object_set_new(o, "actor", json_string(r->actor));
	if (r->note)
		json_object_set_new(o, "note", json_string(r->note));
	json_object_set_new(o, "created_at", json_string(r->created_at));
	json_object_set_new(o, "expires_at", json_string(expires));
	if (r->closed_at) {
		json_object_set_new(o, "closed_at", json_string(r->closed_at));
		json_object_set_new(o, "closed_by", json_string(r->closed_by));
	}
	return append(arg, o);
}

int srv_reservations_json(srv_db *db, const char *dataset_id, int64_t after, int64_t limit,
			  json_t *entries, int64_t *ret_next)
{
	return srv_store_reservation_list(db, dataset_id, after, limit, reservation_append, entries,
					  ret_next);
}

static int key_append(void *arg, const srv_key_row *r)
{
	json_t *o = json_pack("{s:s, s:s, s:o, s:s}", "id", r->id, "role", r->role, "datasets",
			      json_loads(r->datasets, 0, NULL), "created_at", r->created_at);

	if (o && r->note)
		json_object_set_new(o, "note", json_string(r->note));
	json_object_set_new(o, "revoked", json_boolean(r->revoked_at != NULL));
	if (r->revoked_at)
		json_object_set_new(o, "revoked_at", json_string(r->revoked_at));
	return append(arg, o);
}

int srv_keys_json(srv_db *db, json_t **ret)
{
	json_t *arr = json_array();

	if (!arr || srv_keys_list(db, key_append, arr) != SRV_OK) {
		json_decref(arr);
		return SRV_DB_ERROR;
	}
	*ret = arr;
	return SRV_OK;
}

/* One dataset of the verify report, in the order `dpgate verify` prints. */
static void verify_append(void *arg, const srv_verify_dataset *v)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:b, s:b, s:f, s:f, s:b, s:b, s:I}", "id", v->id,
			      "rows", (json_int_t)v->rows, "rows_with_totals",
			      (json_int_t)v->rows_with_totals, "totals_match", v->totals_match,
			      "within_budget", v->within_budget, "spent_epsilon", v->spent_epsilon,
			      "stored_spent_epsilon", v->stored_spent_epsilon,
			      "admissions_within_budget", v->admissions_within_budget,
			      "budget_history_matches", v->budget_history_matches,
			      "admissions_before_a_known_budget",
			      (json_int_t)v->admissions_before_a_known_budget);

	if (o && v->first_row_with_wrong_totals >= 0)
		json_object_set_new(o, "first_row_with_wrong_totals",
				    json_integer(v->first_row_with_wrong_totals));
	if (o && v->first_row_over_budget >= 0)
		json_object_set_new(o, "first_row_over_budget", json_integer(v->first_row_over_budget));
	if (o && v->budget_known)
		json_object_set_new(o, "largest_budget",
				    json_pack("{s:f, s:f}", "epsilon", v->largest_epsilon, "delta",
					      v->largest_delta));
	json_array_append_new(arg, o);
}

int srv_verify_json(srv_db *db, json_t **ret_report)
{
	json_t *report = json_array();
	int rc;

	if (!report)
		return SRV_DB_ERROR;
	rc = srv_store_verify(db, verify_append, report);
	if (rc != SRV_OK && rc != SRV_CONFLICT) {
		json_decref(report);
		return SRV_DB_ERROR;
	}
	*ret_report = json_pack("{s:b, s:o}", "ok", rc == SRV_OK, "datasets", report);
	return rc;
}
