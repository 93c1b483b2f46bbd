/*
 * api_routes.c: the route table and the handlers of the core API
 * (health, metrics, spec, stateless accountant routes, datasets, budgets,
 * ledger, charges, reservations, dry-run, keys).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "api_internal.h"
#include "srv_embedded.h"
#include "api_web.h"
#include "base.h"
#include "api_jobs.h"
#include "json.h"
#include "api_mech_routes.h"
#include "api_pate_session.h"
#include "api.h"

#define DEFAULT_RESERVATION_TTL_S (24 * 3600)
#define MAX_RESERVATION_TTL_S (30 * 24 * 3600)

/* ---- public routes -------------------------------------------------------- */

static int h_healthz(srv_request *req, srv_response *res)
{
	srv_db *db;
	int version;

	/* A server whose file is gone still reads it, but writes nothing. */
	if (srv_store_file_check(req->ctx->store) != SRV_OK) {
		srv_problem(res, 503, NULL, SRV_DB_MOVED_DETAIL, NULL, NULL);
		return 0;
	}
	db = srv_store_acquire(req->ctx->store);
	version = srv_store_schema_version(db);
	srv_store_release(req->ctx->store, db);
	if (version <= 0) {
		srv_problem(res, 503, NULL, "the database is not readable", NULL, NULL);
		return 0;
	}
	srv_json_reply(res, 200, json_pack("{s:s, s:i}", "status", "ok", "schema_version", version));
	return 0;
}

static int h_openapi(srv_request *req, srv_response *res)
{
	(void)req;
	for (size_t i = 0; i < srv_embedded_count; i++) {
		if (strcmp(srv_embedded[i].name, "openapi.yaml") == 0) {
			res->body = malloc(srv_embedded[i].size + 1);
			if (!res->body)
				break;
			memcpy(res->body, srv_embedded[i].data, srv_embedded[i].size + 1);
			res->len = srv_embedded[i].size;
			res->status = 200;
			res->content_type = "application/yaml";
			return 0;
		}
	}
	srv_problem(res, 500, NULL, "the API description is missing from this build", NULL, NULL);
	return 0;
}

static int run_stateless(srv_json_fn fn, srv_request *req, srv_response *res)
{
	acct_error err;
	json_t *answer = NULL;

	acct_error_init(&err);
	if (fn(req->body, &answer, &err) < 0 || !answer) {
		if (err.code == ACCT_OK)
			acct_error_set(&err, ACCT_EINTERNAL, "", "the computation failed");
		srv_problem_from_error(res, &err);
		json_decref(answer);
		return 0;
	}
	srv_json_reply(res, 200, answer);
	return 0;
}

#define STATELESS(name, fn)                                                  \
	static int name(srv_request *req, srv_response *res)                 \
	{                                                                    \
		return run_stateless(fn, req, res);                          \
	}
STATELESS(h_acct_epsilon, srv_acct_epsilon)
STATELESS(h_acct_delta, srv_acct_delta)
STATELESS(h_acct_calibrate, srv_acct_calibrate)
STATELESS(h_acct_rdp, srv_acct_rdp)
STATELESS(h_acct_compare, srv_acct_compare)
STATELESS(h_pate_cost, srv_pate_cost)
STATELESS(h_pate_smooth, srv_pate_smooth_sensitivity)
STATELESS(h_label_em, srv_label_em_guidance)
#undef STATELESS

/* ---- datasets ------------------------------------------------------------- */

/* Reads {"epsilon":…, "delta":…} at /budget; either may be absent when
 * `partial`.  Absent values are left as NAN. */
static int read_budget(const json_t *body, bool partial, double *eps, double *delta,
		       acct_error *err)
{
	static const char *const keys[] = {"epsilon", "delta", NULL};
	json_t *b = json_object_get(body, "budget");
	unsigned req = partial ? 0 : SRV_REQUIRED;
	int rc;

	*eps = NAN;
	*delta = NAN;
	if (!b) {
		if (partial)
			return 0;
		return acct_error_set(err, ACCT_EINVAL, "/budget", "'budget' is required");
	}
	if (!json_is_object(b))
		return acct_error_set(err, ACCT_EINVAL, "/budget",
				      "'budget' must be an object with epsilon and delta");
	rc = srv_json_only_keys(b, "/budget", keys, err);
	if (rc >= 0)
		rc = srv_json_real(b, "/budget", "epsilon", req | SRV_LO_OPEN, 0,
					   DPG_MAX_BUDGET_EPSILON, eps, err);
	if (rc >= 0)
		rc = srv_json_real(b, "/budget", "delta", req | SRV_HI_OPEN, 0, 1, delta, err);
	return rc < 0 ? rc : 0;
}

/*
 * privacy_unit "label" declares label differential privacy (schema/011,
 * docs/label_em.md): the features are public and neighbouring tables
 * differ in one row's label, which is the replace relation, the default
 * and the only one such a dataset takes.  Any other unit is a description
 * of a record-level dataset.
 */
static int read_label_unit(const json_t *body, const char *unit, srv_dataset *ds,
			   acct_error *err)
{
	const json_t *nb = json_object_get(body, "neighbor");

	if (strcmp(unit, "label") != 0)
		return 0;
	if (nb && !json_is_null(nb) && ds->neighbor != ACCT_REPLACE)
		return acct_error_set(err, ACCT_EINVAL, "/neighbor",
				      "a label-private dataset's neighbours differ in one row's "
				      "label: its relation is \"replace\"");
	ds->neighbor = ACCT_REPLACE;
	ds->label_private = true;
	return 0;
}

/* Reads a private dataset's ledger from a create body into *ds. */
static int read_ledger_fields(const json_t *body, srv_dataset *ds, const char **ret_unit,
			      acct_error *err)
{
	const char *acc = "rdp";
	acct_filter f;
	int rc;

	rc = srv_json_string(body, "", "accountant", 0, 16, &acc, err);
	if (rc >= 0 && acct_ledger_kind_from_name(acc, &ds->accountant) < 0)
		rc = acct_error_set(err, ACCT_EINVAL, "/accountant",
				    "'accountant' must be \"rdp\", \"zcdp\" or \"basic\" (pld and the others price single events, not ledgers)");
	if (rc >= 0)
		rc = srv_json_neighbor(body, "", "neighbor", &ds->neighbor, err);
	if (rc >= 0)
		rc = srv_json_string(body, "", "privacy_unit", 0, DPG_MAX_ID_BYTES, ret_unit, err);
	if (rc >= 0)
		rc = read_label_unit(body, *ret_unit, ds, err);
	if (rc >= 0)
		rc = read_budget(body, false, &ds->budget_epsilon, &ds->budget_delta, err);
	if (rc >= 0)
		rc = srv_json_filter_orders(body, "", ds->accountant, ds->filter_orders,
					    &ds->n_filter_orders, err);
	if (rc >= 0)
		rc = srv_dataset_filter(ds, &f, err);
	if (rc >= 0 && ds->n_filter_orders > 0 && !acct_filter_admits_some(&f))
		rc = acct_error_set(err, ACCT_EINVAL, "/filter_orders",
				    "at these orders this budget admits no spending: the delta "
				    "share of each order converts to no RDP budget");
	/* Every spend prices its event at these orders: refused now if one
	 * sampled Gaussian alone would be too costly there. */
	if (rc >= 0 && ds->n_filter_orders > 0)
		rc = acct_rdp_orders_check(ds->filter_orders, ds->n_filter_orders,
					   "/filter_orders", err);
	return rc;
}

/*
 * A public dataset protects nothing and has no ledger: what describes a
 * ledger (budget, accountant, neighbour, unit, orders) has no meaning on
 * it and is refused rather than ignored.
 */
static int check_public_body(const json_t *body, acct_error *err)
{
	static const char *const keys[] = {"id", "name", "public", NULL};
	static const char *const ledger_keys[] = {"budget", "accountant", "neighbor",
						  "privacy_unit", "filter_orders", NULL};
	char where[32];

	for (const char *const *k = ledger_keys; *k; k++)
		if (json_object_get(body, *k)) {
			snprintf(where, sizeof(where), "/%s", *k);
			return acct_error_set(err, ACCT_EINVAL, where,
					      "a public dataset has no budget and no ledger: "
					      "only 'id', 'name' and 'public' may be given");
		}
	return srv_json_only_keys(body, "", keys, err);
}

static int h_dataset_create(srv_request *req, srv_response *res)
{
	static const char *const keys[] = {"id", "name", "budget", "accountant", "neighbor",
					   "privacy_unit", "filter_orders", "public", NULL};
	srv_dataset ds;
	acct_error err;
	const char *id = NULL, *name = NULL, *unit = "record";
	bool is_public = false;
	int rc;

	memset(&ds, 0, sizeof(ds));
	acct_error_init(&err);
	rc = srv_json_only_keys(req->body, "", keys, &err);
	if (rc >= 0)
		rc = srv_json_bool(req->body, "", "public", 0, &is_public, &err);
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "id", SRV_REQUIRED, DPG_MAX_ID_BYTES, &id, &err);
	if (rc >= 0 && !srv_id_ok(id))
		rc = acct_error_set(&err, ACCT_EINVAL, "/id",
				    "'id' may hold only letters, digits, '_', '-' and '.', "
				    "and may not be '.' or '..'");
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "name", 0, DPG_MAX_NAME_BYTES, &name, &err);
	if (rc >= 0)
		rc = is_public ? check_public_body(req->body, &err)
			       : read_ledger_fields(req->body, &ds, &unit, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	ds.is_public = is_public;
	snprintf(ds.id, sizeof(ds.id), "%s", id);
	snprintf(ds.name, sizeof(ds.name), "%s", name ? name : id);
	snprintf(ds.privacy_unit, sizeof(ds.privacy_unit), "%s", is_public ? "none" : unit);
	rc = srv_store_dataset_create(req->db, &ds, req->who->key_id);
	if (rc == SRV_CONFLICT) {
		srv_problem(res, 409, NULL, "a dataset with this id exists", "/id", NULL);
		return 0;
	}
	if (rc != SRV_OK || srv_store_dataset_get(req->db, id, &ds) != SRV_OK) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return 0;
	}
	snprintf(res->location, sizeof(res->location), "/v1/datasets/%s", ds.id);
	srv_json_reply(res, 201, srv_dataset_json(&ds));
	return 0;
}

/* The list is written as text a dataset at a time: as one tree of JSON
 * values it took about 6 KB a dataset (0.6 GB for 10⁵), ten times its
 * text, and every server thread that built one kept its memory. */
struct list_arg {
	const srv_principal *who;
	srv_buf text;
	bool include_archived, any;
};

static bool list_visible(void *arg, const char *id)
{
	struct list_arg *la = arg;

	return srv_principal_sees(la->who, id);
}

static void list_each(void *arg, const srv_dataset *ds)
{
	struct list_arg *la = arg;
	json_t *o;

	if (ds->archived && !la->include_archived)
		return;
	o = srv_dataset_json(ds);
	if (o && !ds->is_public)
		json_object_set_new(o, "budget_summary", srv_dataset_budget_json(ds));
	if (!o) {
		la->text.failed = true;
		return;
	}
	if (la->any)
		srv_buf_put(&la->text, ",", 1);
	la->any = true;
	srv_json_dump_append(&la->text, o);
	json_decref(o);
}

/* Reads the boolean query parameter `key` ("true" or "false", as the
 * spec's enum says; absent is `dflt`) into *ret.  Any other value is
 * answered 400 naming the parameter and returns -1: a misspelt flag
 * must not pass for its default. */
static int query_bool(srv_request *req, const char *key, bool dflt, bool *ret, srv_response *res)
{
	const char *v = req->query(req->conn, key);
	char detail[128];

	if (!v) {
		*ret = dflt;
		return 0;
	}
	if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
		snprintf(detail, sizeof(detail), "'%s' must be true or false", key);
		srv_problem(res, 400, NULL, detail, key, NULL);
		return -1;
	}
	*ret = strcmp(v, "true") == 0;
	return 0;
}

static int h_dataset_list(srv_request *req, srv_response *res)
{
	struct list_arg la = {.who = req->who};

	if (query_bool(req, "archived", false, &la.include_archived, res) < 0)
		return 0;
	srv_buf_put(&la.text, "{\"datasets\":[", 13);
	if (srv_store_dataset_list(req->db, list_visible, list_each, &la) != SRV_OK) {
		free(la.text.s);
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return 0;
	}
	if (!srv_buf_put(&la.text, "]}", 2)) {
		free(la.text.s);
		srv_problem(res, 500, NULL, "the answer could not be built", NULL, NULL);
		return 0;
	}
	res->status = 200;
	res->content_type = "application/json";
	res->body = la.text.s;
	res->len = la.text.len;
	return 0;
}

static int h_dataset_get(srv_request *req, srv_response *res)
{
	srv_dataset ds;
	json_t *o;

	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	o = srv_dataset_json(&ds);
	if (o && !ds.is_public)
		json_object_set_new(o, "budget_summary", srv_dataset_budget_json(&ds));
	srv_json_reply(res, 200, o);
	return 0;
}

/* A dataset route's answer after a store write: the dataset as it now
 * is (200), or the store's refusal (404 for an unknown id). */
static int reply_dataset(srv_response *res, int rc, const srv_dataset *ds)
{
	if (rc != SRV_OK)
		srv_reply_store_error(res, rc, "no such dataset");
	else
		srv_json_reply(res, 200, srv_dataset_json(ds));
	return 0;
}

static int h_dataset_update(srv_request *req, srv_response *res)
{
	static const char *const keys[] = {"name", "budget", "public", "privacy_unit", NULL};
	srv_dataset ds, after;
	acct_error err;
	acct_filter f;
	const char *name = NULL;
	double eps, delta;
	int rc;

	acct_error_init(&err);
	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	rc = srv_json_only_keys(req->body, "", keys, &err);
	if (rc >= 0 && json_object_get(req->body, "public"))
		rc = acct_error_set(&err, ACCT_EINVAL, "/public",
				    "'public' is fixed when the dataset is created: a public "
				    "dataset's rows have been readable, a private one's budget "
				    "spent; neither can become the other");
	if (rc >= 0 && json_object_get(req->body, "privacy_unit"))
		rc = acct_error_set(&err, ACCT_EINVAL, "/privacy_unit",
				    "'privacy_unit' is fixed when the dataset is created: what "
				    "was released was priced for that unit (a label-private "
				    "dataset's features were used without noise)");
	if (rc >= 0 && ds.is_public && json_object_get(req->body, "budget"))
		rc = acct_error_set(&err, ACCT_EINVAL, "/budget",
				    "a public dataset has no budget");
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "name", 0, DPG_MAX_NAME_BYTES, &name, &err);
	if (rc >= 0)
		rc = read_budget(req->body, true, &eps, &delta, &err);
	if (rc >= 0)
		rc = acct_filter_init_orders(&f, ds.accountant, ds.neighbor,
					     isfinite(eps) ? eps : ds.budget_epsilon,
					     isfinite(delta) ? delta : ds.budget_delta,
					     ds.filter_orders, ds.n_filter_orders, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	rc = srv_store_dataset_update(req->db, ds.id, name, eps, delta, req->who->key_id, &after);
	if (rc == SRV_CONFLICT) {
		srv_problem(res, 409, NULL, "the dataset is archived", NULL, NULL);
		return 0;
	}
	return reply_dataset(res, rc, &after);
}

static int h_dataset_archive(srv_request *req, srv_response *res)
{
	srv_dataset ds;
	int rc = srv_store_dataset_archive(req->db, req->params[0], req->who->key_id, &ds);

	return reply_dataset(res, rc, &ds);
}

static int h_budget(srv_request *req, srv_response *res)
{
	srv_dataset ds;

	if (!srv__private_dataset_or_reply(req, res, &ds))
		return 0;
	srv_json_reply(res, 200, srv_dataset_budget_json(&ds));
	return 0;
}

/* A list page of a store lister: {field: [...], "next": seq|null} from
 * the request's `after` and `limit`. */
typedef int (*list_fn)(srv_db *db, const char *id, int64_t after, int64_t limit,
		       json_t *entries, int64_t *ret_next);

static int reply_page(srv_request *req, srv_response *res, list_fn list, const char *id,
		      const char *field)
{
	json_t *entries;
	int64_t limit, after, next = -1;

	if (srv__query_int(req, "limit", 1, DPG_MAX_PAGE_SIZE, DPG_DEFAULT_PAGE_SIZE, &limit, res) < 0 ||
	    srv__query_int(req, "after", 0, INT64_MAX, 0, &after, res) < 0)
		return 0;
	entries = json_array();
	if (!entries || list(req->db, id, after, limit, entries, &next) != SRV_OK) {
		json_decref(entries);
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return 0;
	}
	srv_json_reply(res, 200, json_pack("{s:o, s:o}", field, entries, "next",
					   next >= 0 ? json_integer(next) : json_null()));
	return 0;
}

/* reply_page on the request's dataset, looked up first (404 before 400). */
static int reply_dataset_page(srv_request *req, srv_response *res, list_fn list,
			      const char *field)
{
	srv_dataset ds;

	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	return reply_page(req, res, list, ds.id, field);
}

static int h_ledger(srv_request *req, srv_response *res)
{
	return reply_dataset_page(req, res, srv_ledger_json, "entries");
}

/* A dataset's administrative history: creation, budget changes, archive. */
static int h_dataset_audit(srv_request *req, srv_response *res)
{
	return reply_dataset_page(req, res, srv_audit_json, "entries");
}

/* Who created and revoked which key, and when (http_auth.c). */
static int h_keys_audit(srv_request *req, srv_response *res)
{
	return reply_page(req, res, srv_keys_audit_json, NULL, "entries");
}

/* ---- spending ------------------------------------------------------------- */

/*
 * Parses the event (and the basic ledger's "delta" share) of a spending
 * request and prices it with the dataset's filter.  On failure answers the
 * request and returns -1.
 */
static int price_request(srv_request *req, srv_response *res, const srv_dataset *ds,
			 acct_event **ret_event, acct_cost *ret_cost)
{
	acct_error err;
	acct_filter f;
	acct_event *ev = NULL;
	double delta_share = 0.0;
	json_t *ej = json_object_get(req->body, "event");
	int rc;

	acct_error_init(&err);
	if (!ej)
		rc = acct_error_set(&err, ACCT_EINVAL, "/event", "'event' is required");
	else
		rc = srv_event_parse(ej, "/event", &ev, &err);
	if (rc >= 0)
		rc = acct_event_validate_at(ev, ds->neighbor, "/event", &err);
	if (rc >= 0)
		rc = srv_json_real(req->body, "", "delta", 0, 0, 1, &delta_share, &err);
	if (rc >= 0)
		rc = srv_dataset_filter(ds, &f, &err);
	if (rc >= 0)
		rc = acct_filter_price(&f, ev, delta_share, ret_cost, &err);
	if (rc < 0) {
		acct_event_free(ev);
		srv_problem_from_error(res, &err);
		return -1;
	}
	*ret_event = ev;
	return 0;
}

struct charge_body_arg {
	const acct_event *event;
	char *event_text;         /* its canonical JSON, for the ledger */
	const acct_cost *cost;
	int64_t ttl;
	double delta_share;
	acct_cost priced;         /* the event's price under `priced_for` */
	acct_filter priced_for;   /* the filter it was priced with, outside the transaction */
	bool have_price;
	acct_error err;           /* why pricing refused */
};

/*
 * A price depends on the filter's kind, neighbouring relation and orders
 * only, never on the budget or the running totals; all three are fixed when
 * the dataset is created (PATCH changes name and budget only).
 */
static bool same_pricing(const acct_filter *a, const acct_filter *b)
{
	if (a->kind != b->kind || a->neighbor != b->neighbor || a->n_orders != b->n_orders)
		return false;
	for (unsigned i = 0; i < a->n_orders; i++)
		if (a->orders[i] != b->orders[i])
			return false;
	return true;
}

static int price_event(struct charge_body_arg *a, const acct_filter *f)
{
	acct_error_init(&a->err);
	if (acct_event_validate_at(a->event, f->neighbor, "/event", &a->err) < 0 ||
	    acct_filter_price(f, a->event, a->delta_share, &a->priced, &a->err) < 0)
		return -1;
	a->priced_for = *f;
	a->have_price = true;
	a->cost = &a->priced;
	return 0;
}

/*
 * Hands the price computed before the transaction to the store, which
 * admits it with the filter built from the dataset row read under the write
 * lock.  Pricing can take seconds (a long composition under PLD) and runs
 * outside the lock, so it delays no other spend.  Should the pricing inputs
 * differ from those of the snapshot (they cannot change today), the event
 * is priced again here rather than admitted at a stale price.
 */
static int charge_plan(void *arg, const acct_filter *f, const acct_cost *committed,
		       const acct_cost **ret_cost, const char **ret_event_text)
{
	struct charge_body_arg *a = arg;

	(void)committed;
	if ((!a->have_price || !same_pricing(&a->priced_for, f)) && price_event(a, f) < 0)
		return -1;
	*ret_cost = &a->priced;
	*ret_event_text = a->event_text;
	return 0;
}

/* A direct charge's answer, {"id": seq, "budget": {...}}, written as text:
 * the hot path builds no JSON tree. */
static char *charge_text(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	static const char head[] = "{\"id\":", mid[] = ",\"budget\":";
	char budget[1024], id[24], *s, *p;
	size_t n = srv_dataset_budget_text(ds, budget, sizeof(budget)), idn;

	(void)arg;
	(void)rid;
	if (n == 0)
		return NULL;
	idn = srv_fmt_int64(id, charge_id);
	s = malloc(sizeof(head) - 1 + idn + sizeof(mid) - 1 + n + sizeof("}"));
	if (!s)
		return NULL;
	p = s;
	memcpy(p, head, sizeof(head) - 1);
	p += sizeof(head) - 1;
	memcpy(p, id, idn);
	p += idn;
	memcpy(p, mid, sizeof(mid) - 1);
	p += sizeof(mid) - 1;
	memcpy(p, budget, n);
	p += n;
	memcpy(p, "}", sizeof("}"));
	return s;
}

static json_t *reserve_body(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	struct charge_body_arg *a = arg;
	acct_filter f;
	double eps = NAN;

	if (srv_dataset_filter(ds, &f, NULL) == 0)
		eps = acct_filter_epsilon(&f, a->cost);
	return json_pack("{s:s, s:I, s:s, s:o, s:f, s:I, s:o}", "id", rid, "ledger_seq",
			 (json_int_t)charge_id, "state", "open", "event", srv_event_to_json(a->event),
			 "epsilon", eps, "ttl_seconds", (json_int_t)a->ttl, "budget",
			 srv_dataset_budget_json(ds));
}

/* reserve_body's answer as the store keeps it (srv_spend_text_fn). */
static char *reserve_text(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	return srv_json_text(reserve_body(arg, charge_id, rid, ds));
}

/*
 * Reads a spend's "note" and, for a reservation, its "ttl_seconds", and
 * refuses any key a spend of this kind does not have.
 */
static int spend_read_head(const json_t *body, srv_spend_kind kind, const char **ret_note,
			   int64_t *ret_ttl, acct_error *err)
{
	static const char *const keys_charge[] = {"event", "note", "delta", NULL};
	static const char *const keys_reserve[] = {"event", "note", "delta", "ttl_seconds", NULL};
	int rc;

	rc = srv_json_only_keys(body, "", kind == SRV_SPEND_RESERVE ? keys_reserve : keys_charge,
				err);
	if (rc >= 0)
		rc = srv_json_string(body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, ret_note, err);
	if (rc >= 0 && kind == SRV_SPEND_RESERVE)
		rc = srv_json_int(body, "", "ttl_seconds", 0, 1, MAX_RESERVATION_TTL_S, ret_ttl, err);
	return rc;
}

/*
 * Reads a spend's required "event" into *ret_ev (the caller frees it) and
 * its optional "delta" share into *ret_delta_share.
 */
static int spend_read_event(const json_t *body, acct_event **ret_ev, double *ret_delta_share,
			    acct_error *err)
{
	json_t *ej = json_object_get(body, "event");
	acct_event *ev = NULL;
	int rc;

	if (!ej)
		rc = acct_error_set(err, ACCT_EINVAL, "/event", "'event' is required");
	else
		rc = srv_event_parse(ej, "/event", &ev, err);
	if (rc >= 0)
		rc = srv_json_real(body, "", "delta", 0, 0, 1, ret_delta_share, err);
	if (rc < 0) {
		acct_event_free(ev);
		return rc;
	}
	*ret_ev = ev;
	return rc;
}

static int spend(srv_request *req, srv_response *res, srv_spend_kind kind)
{
	uint8_t hash[crypto_hash_sha256_BYTES];
	struct charge_body_arg arg;
	srv_dataset ds;
	acct_event *ev = NULL;
	acct_error err;
	srv_spend sp;
	const char *note = NULL;
	int64_t ttl = DEFAULT_RESERVATION_TTL_S;
	int rc;

	acct_error_init(&err);
	rc = spend_read_head(req->body, kind, &note, &ttl, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	srv_spend_from_request(&sp, req, hash);
	if (srv_spend_replayed(req, res, &sp, srv_reply_raw_json))
		return 0;
	memset(&arg, 0, sizeof(arg));
	rc = spend_read_event(req->body, &ev, &arg.delta_share, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	arg.event = ev;
	arg.event_text = srv_event_text(ev);
	arg.ttl = ttl;
	if (!arg.event_text) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		goto out;
	}
	/* Price before the write lock, with the dataset's pricing inputs. */
	{
		acct_filter f;
		bool archived;

		rc = srv_store_dataset_pricing(req->db, req->params[0], &f, &archived);
		/* An archived dataset is refused (409) by the store. */
		if (rc == SRV_OK && !archived && price_event(&arg, &f) < 0) {
			srv_problem_from_error(res, &arg.err);
			goto out;
		}
	}
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset");
		goto out;
	}
	sp.kind = kind;
	sp.dataset_id = req->params[0];
	sp.plan_fn = charge_plan;
	sp.note = note;
	sp.ttl_seconds = ttl;
	sp.text_fn = kind == SRV_SPEND_RESERVE ? reserve_text : charge_text;
	sp.body_arg = &arg;
	srv_spend_and_reply(req, res, &sp, &ds,
			    &(srv_spend_replies){.cost = arg.have_price ? &arg.priced : NULL,
						 .refused = &arg.err,
						 .what = "no such dataset"});
out:
	free(arg.event_text);
	acct_event_free(ev);
	return 0;
}

static int h_charge(srv_request *req, srv_response *res)
{
	return spend(req, res, SRV_SPEND_CHARGE);
}

static int h_reserve(srv_request *req, srv_response *res)
{
	return spend(req, res, SRV_SPEND_RESERVE);
}

static int close_reservation(srv_request *req, srv_response *res, bool do_commit)
{
	srv_dataset ds;
	char state[16] = "", job[64] = "";
	int rc = srv_store_reservation_close(req->db, req->params[0], req->params[1], do_commit,
					     req->who->key_id, req->who->role == SRV_ROLE_ADMIN,
					     &ds, state, job);

	if (rc == SRV_CONFLICT && job[0]) {
		char detail[256];

		snprintf(detail, sizeof(detail),
			 "the reservation belongs to training job %s: it is committed when the job "
			 "ends, or released if the job is cancelled while queued (DELETE /v1/jobs/%s)",
			 job, job);
		srv_problem(res, 409, NULL, detail, NULL,
			    json_pack("{s:s, s:s}", "state", state, "job", job));
		return 0;
	}
	if (rc == SRV_CONFLICT) {
		char detail[96];

		snprintf(detail, sizeof(detail), "the reservation is %s, not open", state);
		srv_problem(res, 409, NULL, detail, NULL, json_pack("{s:s}", "state", state));
		return 0;
	}
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset or reservation");
		return 0;
	}
	srv_json_reply(res, 200, json_pack("{s:s, s:s, s:o}", "id", req->params[1], "state", state,
					   "budget", srv_dataset_budget_json(&ds)));
	return 0;
}

static int h_res_commit(srv_request *req, srv_response *res)
{
	return close_reservation(req, res, true);
}

static int h_res_release(srv_request *req, srv_response *res)
{
	return close_reservation(req, res, false);
}

static int h_res_list(srv_request *req, srv_response *res)
{
	return reply_dataset_page(req, res, srv_reservations_json, "reservations");
}

static int h_dry_run(srv_request *req, srv_response *res)
{
	static const char *const keys[] = {"event", "delta", NULL};
	srv_dataset ds;
	acct_event *ev = NULL;
	acct_cost cost;
	acct_filter f;
	acct_error err;
	srv_epsilons after;
	json_t *answer;
	bool fits;

	acct_error_init(&err);
	if (srv_json_only_keys(req->body, "", keys, &err) < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	if (!srv__private_dataset_or_reply(req, res, &ds))
		return 0;
	if (price_request(req, res, &ds, &ev, &cost) < 0)
		return 0;
	srv_dataset_filter(&ds, &f, NULL);
	if (!isfinite(acct_filter_epsilon(&f, &cost))) {
		/* JSON has no infinity; such an event can never be charged (409). */
		srv_problem(res, 422, NULL,
			    "the event's epsilon under this dataset's ledger is unbounded: it can "
			    "never fit", "/event", NULL);
		acct_event_free(ev);
		return 0;
	}
	srv_dataset_epsilons(&ds, &cost, &after);
	fits = !ds.archived && after.within;
	answer = json_pack("{s:b, s:o, s:{s:f}, s:{s:f, s:f}, s:o}", "fits", fits, "event",
			   srv_event_to_json(ev), "cost", "epsilon", acct_filter_epsilon(&f, &cost),
			   "after", "spent_epsilon", after.committed, "remaining_epsilon",
			   fits ? after.remaining : 0.0, "budget", srv_dataset_budget_json(&ds));
	if (answer && srv_dataset_explain_cost(&ds, ev, json_object_get(answer, "cost")) < 0) {
		json_decref(answer);
		answer = NULL;
	}
	srv_json_reply(res, 200, answer);
	acct_event_free(ev);
	return 0;
}

/* ---- keys ---------------------------------------------------------------- */

static int h_keys_list(srv_request *req, srv_response *res)
{
	json_t *arr = NULL;

	if (srv_keys_json(req->db, &arr) != SRV_OK) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return 0;
	}
	srv_json_reply(res, 200, json_pack("{s:o}", "keys", arr));
	return 0;
}

static int h_keys_create(srv_request *req, srv_response *res)
{
	static const char *const keys[] = {"role", "datasets", "note", NULL};
	const char *role_name = NULL, *note = NULL;
	char key_text[SRV_KEY_TEXT_BYTES], key_id[2 * SRV_KEY_ID_BYTES + 1];
	json_t *scope;
	char *scope_text;
	srv_role role;
	acct_error err;
	int rc;

	acct_error_init(&err);
	rc = srv_json_only_keys(req->body, "", keys, &err);
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "role", SRV_REQUIRED, 16, &role_name, &err);
	if (rc >= 0 && srv_role_from_name(role_name, &role) < 0)
		rc = acct_error_set(&err, ACCT_EINVAL, "/role",
				    "'role' must be \"admin\", \"analyst\" or \"viewer\"");
	scope = json_object_get(req->body, "datasets");
	/* The JSON types here; what a key may carry in srv_keys_check, which
	 * `dpgate keys create` shares. */
	if (rc >= 0)
		rc = srv_json_string(req->body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, &note, &err);
	if (rc >= 0)
		rc = srv_keys_check(role, scope, note, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	scope_text = srv_keys_scope_text(scope);
	rc = scope_text ? srv_keys_create(req->db, role, scope_text, note, req->who->key_id,
					  key_text, key_id) :
			  SRV_DB_ERROR;
	free(scope_text);
	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, NULL);
		return 0;
	}
	srv_json_reply(res, 201, json_pack("{s:s, s:s, s:s, s:o}", "id", key_id, "key", key_text,
					   "role", srv_role_name(role), "datasets",
					   scope ? json_incref(scope) : json_array()));
	sodium_memzero(key_text, sizeof(key_text));
	return 0;
}

static int h_keys_revoke(srv_request *req, srv_response *res)
{
	/* Revoking the last admin key over HTTP would lock every admin out;
	 * `dpgate keys revoke` on the host can still do it. */
	int rc = srv_keys_revoke_keeping_an_admin(req->db, req->params[0], req->who->key_id);

	if (rc == SRV_CONFLICT) {
		srv_problem(res, 409, NULL, "this is the last admin key; create another admin key first",
			    NULL, NULL);
		return 0;
	}
	if (rc == SRV_OK) {
		srv_auth_cache_flush(req->ctx->auth_cache);
		srv_keys_touch_stamp(req->ctx->db_path);
	}

	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such key");
		return 0;
	}
	srv_json_reply(res, 200, json_pack("{s:s, s:b}", "id", req->params[0], "revoked", 1));
	return 0;
}

/* ---- the table ------------------------------------------------------------ */

const srv_route srv_routes[] = {
	{"GET", "/healthz", SRV_PUBLIC, false, h_healthz},
	{"GET", "/metrics", SRV_PUBLIC, false, srv_metrics_get},
	{"GET", "/v1/openapi.yaml", SRV_PUBLIC, false, h_openapi},
	{"POST", "/v1/accountant/epsilon", SRV_PUBLIC, true, h_acct_epsilon},
	{"POST", "/v1/accountant/delta", SRV_PUBLIC, true, h_acct_delta},
	{"POST", "/v1/accountant/calibrate", SRV_PUBLIC, true, h_acct_calibrate},
	{"POST", "/v1/accountant/rdp", SRV_PUBLIC, true, h_acct_rdp},
	{"POST", "/v1/accountant/compare", SRV_PUBLIC, true, h_acct_compare},
	{"POST", "/v1/pate/cost", SRV_PUBLIC, true, h_pate_cost},
	{"POST", "/v1/pate/smooth-sensitivity", SRV_PUBLIC, true, h_pate_smooth},
	{"POST", "/v1/label-em/guidance", SRV_PUBLIC, true, h_label_em},
	{"GET", "/v1/datasets", SRV_ANY_KEY, false, h_dataset_list},
	{"POST", "/v1/datasets", SRV_ADMIN, true, h_dataset_create},
	{"GET", "/v1/datasets/{id}", SRV_READ, false, h_dataset_get},
	{"PATCH", "/v1/datasets/{id}", SRV_ADMIN, true, h_dataset_update},
	{"DELETE", "/v1/datasets/{id}", SRV_ADMIN, false, h_dataset_archive},
	{"GET", "/v1/datasets/{id}/budget", SRV_READ, false, h_budget},
	{"GET", "/v1/datasets/{id}/ledger", SRV_READ, false, h_ledger},
	{"GET", "/v1/datasets/{id}/audit", SRV_ADMIN, false, h_dataset_audit},
	{"POST", "/v1/datasets/{id}/charges", SRV_SPEND, true, h_charge},
	{"GET", "/v1/datasets/{id}/reservations", SRV_READ, false, h_res_list},
	{"POST", "/v1/datasets/{id}/reservations", SRV_SPEND, true, h_reserve},
	{"POST", "/v1/datasets/{id}/reservations/{rid}/commit", SRV_SPEND, false, h_res_commit},
	{"POST", "/v1/datasets/{id}/reservations/{rid}/release", SRV_SPEND, false, h_res_release},
	{"POST", "/v1/datasets/{id}/dry-run", SRV_READ, true, h_dry_run},
	{"GET", "/v1/keys", SRV_ADMIN, false, h_keys_list},
	{"POST", "/v1/keys", SRV_ADMIN, true, h_keys_create},
	{"DELETE", "/v1/keys/{id}", SRV_ADMIN, false, h_keys_revoke},
	{"GET", "/v1/audit/keys", SRV_ADMIN, false, h_keys_audit},
	/* ---- mechanisms and hosted data (api_mech_routes.c) ---- */
	{"POST", "/v1/datasets/{id}/mechanisms/{name}", SRV_SPEND, true, srv_h_mech_release},
	{"POST", "/v1/datasets/{id}/queries", SRV_SPEND, true, srv_h_table_query},
	/* ---- end mechanisms and hosted data ---- */

	/* ---- PATE sessions (api_pate_session.c) ---- */
	{"GET", "/v1/datasets/{id}/pate/sessions", SRV_READ, false, srv_pate_session_list},
	{"POST", "/v1/datasets/{id}/pate/sessions", SRV_SPEND, true, srv_pate_session_create},
	{"GET", "/v1/datasets/{id}/pate/sessions/{sid}", SRV_READ, false, srv_pate_session_get},
	{"POST", "/v1/datasets/{id}/pate/sessions/{sid}/queries", SRV_SPEND, true, srv_pate_session_queries},
	{"POST", "/v1/datasets/{id}/pate/sessions/{sid}/release", SRV_SPEND, true, srv_pate_session_release},
	/* ---- end PATE sessions ---- */

	/* ---- data links and jobs (api_data_routes.c, api_jobs_routes.c) ---- */
	{"PUT", "/v1/datasets/{id}/data", SRV_ADMIN, false, srv_h_data_put},
	{"GET", "/v1/datasets/{id}/data", SRV_READ, false, srv_h_data_get},
	{"POST", "/v1/datasets/{id}/jobs", SRV_SPEND, true, srv_h_job_submit},
	{"GET", "/v1/datasets/{id}/jobs", SRV_READ, false, srv_h_job_list},
	{"GET", "/v1/jobs/{id}", SRV_ANY_KEY, false, srv_h_job_get},
	{"DELETE", "/v1/jobs/{id}", SRV_ANY_KEY, false, srv_h_job_cancel},
	{"GET", "/v1/jobs/{id}/model", SRV_ANY_KEY, false, srv_h_job_model},
	{"POST", "/v1/jobs/{id}/predict", SRV_ANY_KEY, false, srv_h_job_predict},
	/* ---- end jobs ---- */

	/* ---- the dashboard (api_web.c) ---- */
	{"GET", "/", SRV_PUBLIC, false, srv_h_web_page},
	{"GET", "/assets/{name}", SRV_PUBLIC, false, srv_h_web_asset},
	/* ---- end dashboard ---- */
};

const size_t srv_routes_count = sizeof(srv_routes) / sizeof(srv_routes[0]);

/* The GET routes whose answer a key may revalidate (ETag, If-None-Match,
 * ?wait=S), and what a long-poll on each waits for.  Every other route
 * answers Cache-Control: no-store. */
const srv_route_cache srv_route_caching[] = {
	{"/v1/datasets", SRV_TAG_DATASETS},
	{"/v1/datasets/{id}", SRV_TAG_DATASET},
	{"/v1/datasets/{id}/budget", SRV_TAG_DATASET},
	{"/v1/datasets/{id}/ledger", SRV_TAG_DATASET},
	{"/v1/jobs/{id}", SRV_TAG_JOB},
	{"/", SRV_TAG_STATIC},
	{"/assets/{name}", SRV_TAG_STATIC},
};

const size_t srv_route_caching_count = sizeof(srv_route_caching) / sizeof(srv_route_caching[0]);

/* The query parameters each route takes, as openapi.yaml declares them
 * (check_served_spec.py holds the two together); a long-poll's `wait` on
 * the routes that revalidate. */
const srv_route_query srv_route_queries[] = {
	{"GET", "/v1/datasets", "archived wait"},
	{"GET", "/v1/datasets/{id}", "wait"},
	{"GET", "/v1/datasets/{id}/budget", "wait"},
	{"GET", "/v1/datasets/{id}/ledger", "limit after wait"},
	{"GET", "/v1/datasets/{id}/audit", "limit after"},
	{"GET", "/v1/datasets/{id}/reservations", "limit after"},
	{"GET", "/v1/audit/keys", "limit after"},
	{"PUT", "/v1/datasets/{id}/data", "columns row_count"},
	{"GET", "/v1/datasets/{id}/data", "format"},
	{"GET", "/v1/datasets/{id}/pate/sessions", "limit after"},
	{"GET", "/v1/datasets/{id}/jobs", "limit after"},
	{"GET", "/v1/jobs/{id}", "wait"},
	{"GET", "/v1/jobs/{id}/model", "format"},
	{"GET", "/", "*"},
	{"GET", "/assets/{name}", "*"},
};

const size_t srv_route_queries_count = sizeof(srv_route_queries) / sizeof(srv_route_queries[0]);
