/*
 * api_acct.c: the stateless accountant routes
 * /v1/accountant/{epsilon,delta,calibrate,rdp,compare}, shared by HTTP and
 * the CLI (`dpgate epsilon|delta|calibrate|rdp|compare`).
 *
 * Common body keys:
 *   event       the privacy event (DESIGN.md), required except for calibrate
 *   accountant  basic | strong | moments | rdp | zcdp | pld (default rdp)
 *   neighbor    add_remove (default) | replace
 *   conversion  zcdp only: "tight" (default) | "bun_steinke"
 *   orders      rdp only: array of orders > 1 (default: DESIGN.md's)
 *   value_discretization_interval   pld only: grid step (default 1e-4)
 * Answers:
 *   epsilon   -> {"epsilon","accountant","delta","neighbor"} + "order" (rdp, moments)
 *   delta     -> {"delta","accountant","epsilon","neighbor"} + "order"
 *   calibrate -> {<field>: value, "epsilon": reached, "target_epsilon", "delta",
 *                 "accountant", "field": JSON pointer of the solved field}
 *   rdp       -> {"orders":[...], "rdp":[...]} (null where unbounded)
 *   compare   -> {"delta","neighbor","epsilon":{acct: eps, ...},
 *                 "unsupported":{acct: reason, ...},"best": acct}
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "api.h"

struct common {
	acct_options opt;
	double orders[DPG_MAX_ORDERS];
};

static int read_orders(const json_t *body, struct common *c, acct_error *err)
{
	json_t *arr = json_object_get(body, "orders");
	size_t n;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) == 0 ||
	    json_array_size(arr) > DPG_MAX_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/orders",
				      "'orders' must be an array of 1 to %d numbers", DPG_MAX_ORDERS);
	n = json_array_size(arr);
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(arr, i);
		double x = json_is_number(v) ? json_number_value(v) : NAN;

		if (!(isfinite(x) && x > 1.0 && x <= DPG_MAX_RDP_ORDER))
			return acct_error_set(err, ACCT_EINVAL, "/orders",
					      "orders[%zu] must be a number in (1, %g]", i,
					      DPG_MAX_RDP_ORDER);
		c->orders[i] = x;
	}
	c->opt.orders = c->orders;
	c->opt.n_orders = n;
	return 0;
}

/* Reads the options every accountant route takes into *c, then refuses
 * a member that is not among `keys` (the route's members, these included). */
static int read_common(const json_t *body, const char *const *keys, struct common *c,
		       acct_error *err)
{
	const char *s = NULL;
	int rc;

	memset(c, 0, sizeof(*c));
	c->opt.accountant = ACCT_RDP;
	if (!json_is_object(body))
		return acct_error_set(err, ACCT_EINVAL, "", "the body must be a JSON object");
	rc = srv_json_string(body, "", "accountant", SRV_NULLABLE, 32, &s, err);
	if (rc < 0)
		return rc;
	if (rc == 1 && acct_accountant_from_name(s, &c->opt.accountant) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/accountant",
				      "'accountant' must be one of basic, strong, moments, rdp, "
				      "zcdp, pld");
	rc = srv_json_neighbor(body, "", "neighbor", &c->opt.neighbor, err);
	if (rc < 0)
		return rc;
	s = NULL;
	rc = srv_json_string(body, "", "conversion", SRV_NULLABLE, 32, &s, err);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (strcmp(s, "bun_steinke") == 0)
			c->opt.zcdp_bun_steinke = true;
		else if (strcmp(s, "tight") != 0)
			return acct_error_set(err, ACCT_EINVAL, "/conversion",
					      "'conversion' must be \"tight\" or \"bun_steinke\"");
	}
	rc = srv_json_real(body, "", "value_discretization_interval", SRV_NULLABLE | SRV_LO_OPEN,
			   1e-6, 1.0, &c->opt.pld_interval, err);
	if (rc < 0)
		return rc;
	rc = read_orders(body, c, err);
	if (rc < 0)
		return rc;
	return srv_json_only_keys(body, "", keys, err);
}

static int parse_event(const json_t *body, const char *key, acct_event **ret, acct_error *err)
{
	char where[64];
	json_t *j = json_object_get(body, key);

	snprintf(where, sizeof(where), "/%s", key);
	if (!j)
		return acct_error_set(err, ACCT_EINVAL, where, "'%s' is required", key);
	return srv_event_parse(j, where, ret, err);
}

static const char *const neighbor_names[] = {"add_remove", "replace"};

/* Sets key to a finite real or, for +infinity, null. */
static int set_real(json_t *obj, const char *key, double v)
{
	return json_object_set_new(obj, key, isfinite(v) ? json_real(v) : json_null());
}

/* The members of each route's body: an /epsilon body's own "epsilon" (or
 * a template) would be read by nothing, and is refused, not ignored. */
#define ACCOUNTANT_KEYS "accountant", "neighbor", "conversion", "orders", \
	"value_discretization_interval"
static const char *const epsilon_keys[] = {"event", "delta", ACCOUNTANT_KEYS, NULL};
static const char *const delta_keys[] = {"event", "epsilon", ACCOUNTANT_KEYS, NULL};
static const char *const calibrate_keys[] = {"template", "epsilon", "delta", ACCOUNTANT_KEYS,
					     NULL};

/*
 * The two conversions, one from the other: epsilon at a given delta
 * (want_epsilon) or delta at a given epsilon.  The answer names the
 * quantity asked for first, then the accountant, the given one, the
 * neighbouring relation and the order where the accountant has one.
 */
static int convert(const json_t *body, bool want_epsilon, json_t **ret_answer, acct_error *err)
{
	const char *given = want_epsilon ? "delta" : "epsilon";
	const char *asked = want_epsilon ? "epsilon" : "delta";
	struct common c;
	acct_event *ev = NULL;
	acct_result r;
	double x = 0.0;
	json_t *ans;
	bool failed;
	int rc;

	rc = read_common(body, want_epsilon ? epsilon_keys : delta_keys, &c, err);
	if (rc >= 0)
		rc = want_epsilon ?
			     srv_json_real(body, "", given, SRV_REQUIRED | SRV_HI_OPEN, 0.0, 1.0, &x, err) :
			     srv_json_real(body, "", given, SRV_REQUIRED, 0.0, HUGE_VAL, &x, err);
	if (rc >= 0)
		rc = parse_event(body, "event", &ev, err);
	if (rc >= 0)
		rc = want_epsilon ? acct_epsilon(ev, x, &c.opt, &r, err) :
				    acct_delta(ev, x, &c.opt, &r, err);
	if (rc < 0)
		goto out;
	ans = json_object();
	failed = !ans || set_real(ans, asked, want_epsilon ? r.epsilon : r.delta) ||
		 json_object_set_new(ans, "accountant",
				     json_string(acct_accountant_name(c.opt.accountant))) ||
		 set_real(ans, given, want_epsilon ? r.delta : r.epsilon) ||
		 json_object_set_new(ans, "neighbor", json_string(neighbor_names[c.opt.neighbor])) ||
		 (!isnan(r.order) && set_real(ans, "order", r.order));
	rc = srv_json_hand_over(ans, failed, ret_answer, err);
out:
	acct_event_free(ev);
	return rc;
}

int srv_acct_epsilon(const json_t *body, json_t **ret_answer, acct_error *err)
{
	return convert(body, true, ret_answer, err);
}

int srv_acct_delta(const json_t *body, json_t **ret_answer, acct_error *err)
{
	return convert(body, false, ret_answer, err);
}

/* ---- calibrate ------------------------------------------------------------ */

/* Fields whose placeholder must be an integer. */
static bool integer_field(const char *key)
{
	return strcmp(key, "count") == 0 || strcmp(key, "sample_size") == 0 ||
	       strcmp(key, "source_dataset_size") == 0 || strcmp(key, "num_buckets") == 0 ||
	       strcmp(key, "sensitivity") == 0;
}

/* What calibrate puts where the null was, before parsing the template. */
static json_t *placeholder(const char *key)
{
	if (strcmp(key, "num_buckets") == 0)
		return json_integer(2);
	if (strcmp(key, "source_dataset_size") == 0)
		return json_integer(DPG_MAX_DATASET_SIZE);
	return integer_field(key) ? json_integer(1) : json_real(1.0);
}

struct null_hunt {
	unsigned found;
	json_t *parent;        /* the event object holding the null */
	char key[64];
	char ptr[ACCT_ERROR_WHERE_BYTES];
	/* Path of child steps from the root event to `parent`: -1 = "event",
	 * i >= 0 = "events"[i]. */
	long path[DPG_MAX_EVENT_DEPTH + 2];
	unsigned depth;
};

static int hunt(json_t *j, const char *where, unsigned depth, long *path, struct null_hunt *h,
		acct_error *err)
{
	const char *key;
	json_t *v;
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (!json_is_object(j))
		return 0;
	if (depth > DPG_MAX_EVENT_DEPTH)
		return acct_error_set(err, ACCT_EINVAL, where, "events nest deeper than %d levels",
				      DPG_MAX_EVENT_DEPTH);
	json_object_foreach(j, key, v) {
		srv_json_pointer(ptr, sizeof(ptr), where, key);
		if (json_is_null(v)) {
			if (++h->found > 1)
				return acct_error_set(err, ACCT_EINVAL, ptr,
						      "a template must have exactly one null field");
			h->parent = j;
			snprintf(h->key, sizeof(h->key), "%s", key);
			snprintf(h->ptr, sizeof(h->ptr), "%s", ptr);
			memcpy(h->path, path, sizeof(long) * depth);
			h->depth = depth;
		} else if (strcmp(key, "event") == 0) {
			int rc;

			path[depth] = -1;
			rc = hunt(v, ptr, depth + 1, path, h, err);
			if (rc < 0)
				return rc;
		} else if (strcmp(key, "events") == 0 && json_is_array(v)) {
			for (size_t i = 0; i < json_array_size(v); i++) {
				char item[ACCT_ERROR_WHERE_BYTES + 24];
				int rc;

				snprintf(item, sizeof(item), "%s/%zu", ptr, i);
				path[depth] = (long)i;
				rc = hunt(json_array_get(v, i), item, depth + 1, path, h, err);
				if (rc < 0)
					return rc;
			}
		}
	}
	return 0;
}

static acct_event *follow(acct_event *ev, const long *path, unsigned depth)
{
	for (unsigned i = 0; ev && i < depth; i++) {
		switch (ev->type) {
		case ACCT_EV_POISSON_SAMPLED: ev = ev->u.poisson_sampled.event; break;
		case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
			ev = ev->u.sampled_without_replacement.event;
			break;
		case ACCT_EV_SELF_COMPOSED: ev = ev->u.self_composed.event; break;
		case ACCT_EV_COMPOSED:
			ev = path[i] >= 0 && (size_t)path[i] < ev->u.composed.n ?
				     ev->u.composed.events[path[i]] : NULL;
			break;
		default: return NULL;
		}
	}
	return ev;
}

int srv_acct_calibrate(const json_t *body, json_t **ret_answer, acct_error *err)
{
	struct common c;
	struct null_hunt h;
	long path[DPG_MAX_EVENT_DEPTH + 2];
	json_t *tmpl = NULL, *ans, *solved = NULL;
	acct_event *ev = NULL, *node;
	double eps = 0.0, delta = 0.0, value = 0.0, reached = 0.0;
	bool failed;
	int rc;

	memset(&h, 0, sizeof(h));
	rc = read_common(body, calibrate_keys, &c, err);
	if (rc >= 0)
		rc = srv_json_real(body, "", "epsilon", SRV_REQUIRED | SRV_LO_OPEN, 0.0, HUGE_VAL, &eps,
				   err);
	if (rc >= 0)
		rc = srv_json_real(body, "", "delta", SRV_REQUIRED | SRV_HI_OPEN, 0.0, 1.0, &delta, err);
	if (rc < 0)
		goto out;
	if (!json_is_object(json_object_get(body, "template"))) {
		rc = acct_error_set(err, ACCT_EINVAL, "/template",
				    "'template' must be an event with one null field");
		goto out;
	}
	tmpl = json_deep_copy(json_object_get(body, "template"));
	if (!tmpl) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	rc = hunt(tmpl, "/template", 0, path, &h, err);
	if (rc < 0)
		goto out;
	if (h.found != 1) {
		rc = acct_error_set(err, ACCT_EINVAL, "/template",
				    "a template must have exactly one null field");
		goto out;
	}
	/* A placeholder inside every field's range whatever the fields beside
	 * it hold, so that a field the solver cannot take is refused as that,
	 * not for its placeholder; the solver overwrites it. */
	if (json_object_set_new(h.parent, h.key, placeholder(h.key))) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	rc = srv_event_parse(tmpl, "/template", &ev, err);
	if (rc < 0)
		goto out;
	node = follow(ev, h.path, h.depth);
	if (!node) {
		rc = acct_error_set(err, ACCT_EINVAL, h.ptr, "cannot locate the null field");
		goto out;
	}
	rc = acct_calibrate(ev, node, h.key, eps, delta, &c.opt, &value, &reached, err);
	if (rc < 0) {
		if (err && strcmp(err->where, "/template") == 0)
			snprintf(err->where, sizeof(err->where), "%s", h.ptr);
		goto out;
	}
	ans = json_object();
	solved = integer_field(h.key) ? json_integer((json_int_t)value) : json_real(value);
	/* The answer's "epsilon" is the epsilon reached: a solved field named
	 * epsilon (the exponential mechanism's, say) is in "value" and in the
	 * completed "event" only, never in place of it. */
	failed = !ans || !solved || json_object_set(h.parent, h.key, solved) ||
		 (strcmp(h.key, "epsilon") != 0 && json_object_set(ans, h.key, solved)) ||
		 json_object_set(ans, "value", solved) || json_object_set(ans, "event", tmpl) ||
		 set_real(ans, "epsilon", reached) || set_real(ans, "target_epsilon", eps) ||
		 set_real(ans, "delta", delta) ||
		 json_object_set_new(ans, "accountant",
				     json_string(acct_accountant_name(c.opt.accountant))) ||
		 json_object_set_new(ans, "field", json_string(h.ptr));
	rc = srv_json_hand_over(ans, failed, ret_answer, err);
out:
	json_decref(solved);
	json_decref(tmpl);
	acct_event_free(ev);
	return rc;
}

/* ---- rdp -------------------------------------------------------------------- */

int srv_acct_rdp(const json_t *body, json_t **ret_answer, acct_error *err)
{
	static const char *const keys[] = {"event", "orders", "neighbor", NULL};
	struct common c;
	acct_event *ev = NULL;
	json_t *ans = NULL, *jo = NULL, *jr = NULL;
	double rdp[DPG_MAX_ORDERS];
	const double *orders;
	size_t n;
	bool failed;
	int rc;

	rc = read_common(body, keys, &c, err);
	if (rc >= 0)
		rc = parse_event(body, "event", &ev, err);
	if (rc < 0)
		goto out;
	if (c.opt.orders) {
		orders = c.opt.orders;
		n = c.opt.n_orders;
	} else {
		orders = acct_rdp_default_orders(&n);
	}
	rc = acct_rdp(ev, c.opt.neighbor, orders, n, rdp, NULL, err);
	if (rc < 0)
		goto out;
	ans = json_object();
	jo = json_array();
	jr = json_array();
	if (!ans || !jo || !jr) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (json_array_append_new(jo, json_real(orders[i])) ||
		    json_array_append_new(jr, isfinite(rdp[i]) ? json_real(rdp[i]) : json_null())) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto out;
		}
	}
	failed = json_object_set(ans, "orders", jo) || json_object_set(ans, "rdp", jr);
	rc = srv_json_hand_over(ans, failed, ret_answer, err);
	ans = NULL;
out:
	json_decref(jo);
	json_decref(jr);
	json_decref(ans);
	acct_event_free(ev);
	return rc;
}

/* ---- compare ------------------------------------------------------------------ */

/* What compare gathers from the accountants, by accountant name. */
struct compare_sets {
	json_t *eps, *uns, *ord;
	const char *best_name; /* the least finite epsilon's, or NULL */
};

/*
 * Prices ev at delta under every accountant into *cs: its epsilon (and
 * order) in cs->eps (cs->ord), or why it cannot in cs->uns.  Returns 0, or
 * a negative code with err set when the event or the options are bad
 * (ACCT_EINVAL, under any accountant) or memory ran out.
 */
static int compare_each(const acct_event *ev, double delta, const acct_options *opt,
			struct compare_sets *cs, acct_error *err)
{
	double best = INFINITY;

	for (unsigned a = 0; a < ACCT__N_ACCOUNTANTS; a++) {
		acct_options o = *opt;
		acct_result r;
		acct_error e;
		const char *name = acct_accountant_name((acct_accountant)a);
		int arc;

		o.accountant = (acct_accountant)a;
		acct_error_init(&e);
		arc = acct_epsilon(ev, delta, &o, &r, &e);
		if (arc == ACCT_EINVAL || arc == ACCT_ENOMEM)
			return acct_error_set(err, arc, e.where, "%s", e.text);
		if (arc < 0) {
			if (json_object_set_new(cs->uns, name, json_string(e.text)))
				return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			continue;
		}
		if (set_real(cs->eps, name, r.epsilon) ||
		    (!isnan(r.order) && set_real(cs->ord, name, r.order)))
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		if (r.epsilon < best) {
			best = r.epsilon;
			cs->best_name = name;
		}
	}
	return 0;
}

int srv_acct_compare(const json_t *body, json_t **ret_answer, acct_error *err)
{
	static const char *const keys[] = {"event", "delta", "neighbor", "orders",
					   "value_discretization_interval", NULL};
	struct common c;
	struct compare_sets cs = {NULL, NULL, NULL, NULL};
	acct_event *ev = NULL;
	json_t *ans = NULL;
	double delta = 0.0;
	bool failed;
	int rc;

	rc = read_common(body, keys, &c, err);
	if (rc >= 0)
		rc = srv_json_real(body, "", "delta", SRV_REQUIRED | SRV_HI_OPEN, 0.0, 1.0, &delta, err);
	if (rc >= 0)
		rc = parse_event(body, "event", &ev, err);
	if (rc >= 0)
		rc = acct_event_validate(ev, c.opt.neighbor, err);
	if (rc < 0)
		goto out;
	ans = json_object();
	cs.eps = json_object();
	cs.uns = json_object();
	cs.ord = json_object();
	if (!ans || !cs.eps || !cs.uns || !cs.ord) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	rc = compare_each(ev, delta, &c.opt, &cs, err);
	if (rc < 0)
		goto out;
	/* The answer is epsilon under every accountant that can price the
	 * event: with none, there is none, and the event is refused as
	 * /v1/accountant/epsilon refuses it (422; `dpgate compare` exits 1),
	 * with the default accountant's reason. */
	if (json_object_size(cs.eps) == 0) {
		rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				    "no accountant can price this event (rdp: %s)",
				    json_string_value(json_object_get(cs.uns, "rdp")));
		goto out;
	}
	failed = set_real(ans, "delta", delta) ||
		 json_object_set_new(ans, "neighbor", json_string(neighbor_names[c.opt.neighbor])) ||
		 json_object_set(ans, "epsilon", cs.eps) ||
		 json_object_set(ans, "unsupported", cs.uns) ||
		 json_object_set(ans, "orders", cs.ord) ||
		 json_object_set_new(ans, "best",
				     cs.best_name ? json_string(cs.best_name) : json_null());
	rc = srv_json_hand_over(ans, failed, ret_answer, err);
	ans = NULL;
out:
	json_decref(cs.eps);
	json_decref(cs.uns);
	json_decref(cs.ord);
	json_decref(ans);
	acct_event_free(ev);
	return rc;
}
