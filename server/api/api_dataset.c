/*
 * api_dataset.c: a dataset's JSON shapes: the resource, its budget summary
 * (as a tree and, for the charge path, as text written directly), and what
 * a ledger's filter adds to a cost's explanation.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api_internal.h"

json_t *srv_dataset_budget_json(const srv_dataset *ds)
{
	acct_filter f;
	srv_epsilons e;
	json_t *o;

	if (srv_dataset_filter(ds, &f, NULL) < 0 || srv_dataset_epsilons(ds, NULL, &e) < 0)
		return NULL;
	/* A basic ledger's reserved epsilon is its own sum; other filters only
	 * have the difference of what spent and spent + reserved convert to. */
	o = json_pack("{s:{s:f, s:f}, s:{s:f, s:f}, s:{s:f, s:I}, s:{s:f}, s:I, s:s}",
			 "budget", "epsilon", ds->budget_epsilon, "delta", ds->budget_delta,
			 "spent", "epsilon", e.spent, "delta", acct_filter_delta(&f, &ds->spent),
			 "reserved", "epsilon",
			 ds->accountant == ACCT_LEDGER_BASIC ? ds->reserved.v[0] : e.committed - e.spent,
			 "open",
			 (json_int_t)ds->open_reservations,
			 "remaining", "epsilon", e.remaining,
			 "charges", (json_int_t)ds->charges,
			 "accountant", acct_ledger_kind_name(ds->accountant));
	/* Why an rdp ledger's epsilons exceed the events' own: the filter's
	 * delta is split over its orders (acct_renyi_filter.c). */
	if (o && ds->accountant == ACCT_LEDGER_RDP &&
	    json_object_set_new(o, "filter", json_pack("{s:I, s:f}", "order_count",
						       (json_int_t)f.n_orders, "delta_per_order",
						       f.delta_budget / (double)f.n_orders)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Appends text to buf (of size bytes, len used); false when it is full. */
static bool put_text(char *buf, size_t size, size_t *len, const char *text, size_t n)
{
	if (*len + n >= size)
		return false;
	memcpy(buf + *len, text, n);
	*len += n;
	buf[*len] = '\0';
	return true;
}

static bool put_real(char *buf, size_t size, size_t *len, double x)
{
	char num[SRV_FMT_REAL_MAX];

	return isfinite(x) && put_text(buf, size, len, num, srv_fmt_real(num, x));
}

static bool put_int(char *buf, size_t size, size_t *len, int64_t v)
{
	char num[24];

	return put_text(buf, size, len, num, srv_fmt_int64(num, v));
}

#define PUT(lit) put_text(buf, size, &len, lit, sizeof(lit) - 1)

size_t srv_dataset_budget_text(const srv_dataset *ds, char *buf, size_t size)
{
	const char *name = acct_ledger_kind_name(ds->accountant);
	acct_filter f;
	srv_epsilons e;
	size_t len = 0;
	bool ok;

	if (srv_dataset_filter(ds, &f, NULL) < 0 || srv_dataset_epsilons(ds, NULL, &e) < 0)
		return 0;
	/* The keys and values of srv_dataset_budget_json, in its order. */
	ok = PUT("{\"budget\":{\"epsilon\":") && put_real(buf, size, &len, ds->budget_epsilon) &&
	     PUT(",\"delta\":") && put_real(buf, size, &len, ds->budget_delta) &&
	     PUT("},\"spent\":{\"epsilon\":") && put_real(buf, size, &len, e.spent) &&
	     PUT(",\"delta\":") && put_real(buf, size, &len, acct_filter_delta(&f, &ds->spent)) &&
	     PUT("},\"reserved\":{\"epsilon\":") &&
	     put_real(buf, size, &len,
		      ds->accountant == ACCT_LEDGER_BASIC ? ds->reserved.v[0] : e.committed - e.spent) &&
	     PUT(",\"open\":") && put_int(buf, size, &len, ds->open_reservations) &&
	     PUT("},\"remaining\":{\"epsilon\":") && put_real(buf, size, &len, e.remaining) &&
	     PUT("},\"charges\":") && put_int(buf, size, &len, ds->charges) &&
	     PUT(",\"accountant\":\"") && put_text(buf, size, &len, name, strlen(name)) &&
	     PUT("\"");
	if (ok && ds->accountant == ACCT_LEDGER_RDP)
		ok = PUT(",\"filter\":{\"order_count\":") && put_int(buf, size, &len, f.n_orders) &&
		     PUT(",\"delta_per_order\":") &&
		     put_real(buf, size, &len, f.delta_budget / (double)f.n_orders) && PUT("}");
	ok = ok && PUT("}");
	return ok ? len : 0;
}

#undef PUT

json_t *srv_dataset_json(const srv_dataset *ds)
{
	json_t *o;

	/* A public dataset has no ledger: nothing of one is shown. */
	if (ds->is_public)
		return json_pack("{s:s, s:s, s:b, s:b, s:s, s:s}", "id", ds->id, "name", ds->name,
				 "public", true, "archived", ds->archived, "created_at",
				 ds->created_at, "updated_at", ds->updated_at);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:f, s:f}, s:b, s:s, s:s}",
			      "id", ds->id, "name", ds->name, "privacy_unit", ds->privacy_unit,
			      "neighbor", ds->neighbor == ACCT_REPLACE ? "replace" : "add_remove",
			      "accountant", acct_ledger_kind_name(ds->accountant),
			      "budget", "epsilon", ds->budget_epsilon, "delta", ds->budget_delta,
			      "archived", ds->archived, "created_at", ds->created_at,
			      "updated_at", ds->updated_at);

	if (o && json_object_set_new(o, "public", json_false()) < 0) {
		json_decref(o);
		return NULL;
	}

	/* An rdp dataset's filter orders, its own or the default ones. */
	if (o && ds->accountant == ACCT_LEDGER_RDP) {
		unsigned n = ds->n_filter_orders;
		const double *orders = n ? ds->filter_orders : acct_filter_default_orders(&n);

		if (json_object_set_new(o, "filter_orders", srv_json_real_array(orders, n)) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

void srv__name_ledger_delta(acct_error *err)
{
	static const char field[] = "\"delta\"";
	char text[ACCT_ERROR_TEXT_BYTES];
	const char *at;

	if (err->code != ACCT_EUNSUPPORTED || strcmp(err->where, "/delta") != 0)
		return;
	snprintf(err->where, sizeof(err->where), "/ledger_delta");
	/* The accountant's text quotes its field once; the rest of it (the
	 * event's type, the share it was given) still holds. */
	at = strstr(err->text, field);
	if (!at)
		return;
	snprintf(text, sizeof(text), "%.*s\"ledger_delta\"%s", (int)(at - err->text), err->text,
		 at + strlen(field));
	memcpy(err->text, text, sizeof(err->text));
}

int srv_dataset_explain_cost(const srv_dataset *ds, const acct_event *ev, json_t *cost)
{
	acct_filter f;
	acct_options opts;
	acct_result r;
	acct_error err;

	if (ds->accountant != ACCT_LEDGER_RDP || srv_dataset_filter(ds, &f, NULL) < 0)
		return 0;
	memset(&opts, 0, sizeof(opts));
	opts.accountant = ACCT_RDP;
	opts.neighbor = ds->neighbor;
	acct_error_init(&err);
	/* An event the RDP accountant prices, the filter priced too; were it
	 * to fail, the figure is left out rather than guessed. */
	if (acct_epsilon(ev, ds->budget_delta, &opts, &r, &err) == 0 && isfinite(r.epsilon) &&
	    json_object_set_new(cost, "event_epsilon", json_real(r.epsilon)) < 0)
		return -1;
	if (json_object_set_new(cost, "filter_order_count", json_integer(f.n_orders)) < 0 ||
	    json_object_set_new(cost, "delta_per_order",
				json_real(f.delta_budget / (double)f.n_orders)) < 0)
		return -1;
	return 0;
}
