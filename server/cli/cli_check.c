/*
 * cli/cli_check.c: `dpgate check POLICY [--json]`, a budget check for CI that
 * needs no server.
 *
 * Usage: dpgate check POLICY [--json]     (POLICY is a file, or - for stdin)
 * argv as passed to srv_check_main: argv[0] is the subcommand ("check"),
 * then the arguments in any order.
 *
 * Policy format (JSON):
 *
 *   {
 *     "datasets": [
 *       {
 *         "id": "adult",                          required, 1..64 bytes
 *         "budget": {"epsilon": 3, "delta": 1e-5}, required; epsilon > 0,
 *                                                  0 <= delta < 1
 *         "accountant": "rdp",                    ledger accountant: rdp
 *                                                  (default) | zcdp | basic
 *         "neighbor": "add_remove",               add_remove (default) | replace
 *         "filter_orders": [4, 8, 16],            rdp ledgers only: the filter's
 *                                                  orders, as the dataset's
 *                                                  (default: the 20 default
 *                                                  orders)
 *         "delta_share": 1e-7,                    basic ledgers only: the delta
 *                                                  each event that is not an
 *                                                  (epsilon, delta) pair is
 *                                                  charged at (default 0: such
 *                                                  events do not fit)
 *         "planned": [                            required, may be empty
 *           {"name": "dp-sgd run",                optional label
 *            "event": { ...privacy event... },    required (DESIGN.md events)
 *            "repeat": 3}                         optional, >= 1 (default 1):
 *                                                  the event is charged this
 *                                                  many times, each charge
 *                                                  on its own
 *         ]
 *       }
 *     ]
 *   }
 *
 * Each dataset's planned charges are priced and composed exactly as the
 * server's ledger filter would admit them (acct_filter_*: the rdp union of
 * single-order filters, the zcdp rho budget, or basic sums), in order; the
 * plan fits when every charge is admitted.  The reported spent epsilon is
 * the filter's own figure, the one the server's budget summary shows.
 *
 * Output: a table, one row per dataset (id, accountant, budget epsilon and
 * delta, spent epsilon, remaining epsilon, charges, FITS / EXCEEDS /
 * REFUSED), plus one line per refused charge with the reason and, for a
 * plan over its budget, one naming the planned release that did not fit
 * (nothing after it is charged); with --json
 * one JSON object:
 *   {"fits": bool, "datasets": [{"id", "accountant", "neighbor",
 *     "budget": {"epsilon", "delta"}, "spent": {"epsilon", "delta"},
 *     "remaining": {"epsilon"}, "charges": N, "fits": bool,
 *     "events": [{"name", "repeat", "epsilon", "admitted"}],
 *     "error": {"where", "detail"} (only when a charge cannot be priced)}]}
 *
 * A field a dataset's ledger ignores (delta_share on an rdp or zcdp ledger)
 * is warned about on stderr; the exit status does not change.
 *
 * Exit status: 0 when every plan fits, 1 when one does not (over budget, or
 * an event its ledger cannot price, e.g. a subsampled Gaussian on a zcdp
 * ledger), 2 on a bad policy (unreadable, malformed, unknown fields, bad
 * events) or bad usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "api.h"

/* obj[a][b], or NULL. */
static json_t *pget(const json_t *obj, const char *a, const char *b)
{
	return json_object_get(json_object_get(obj, a), b);
}

struct ds_report {
	json_t *json;
	bool fits;
	char warning[ACCT_ERROR_TEXT_BYTES]; /* a field the policy sets in vain, or "" */
};

/* A dataset's ledger as its policy entry sets it up. */
struct ds_ledger {
	const char *id, *acct_name;
	acct_ledger_kind kind;
	acct_neighbor nb;
	double eps_b, delta_b, share;
	double orders[DPG_MAX_FILTER_ORDERS];
	unsigned n_orders;
	acct_filter f;
};

/* The planned charges admitted so far, and the first refusal. */
struct ds_run {
	acct_cost total;
	acct_error refusal;
	int64_t charges;
	bool fits;
};

static int bad_policy(const acct_error *err)
{
	fprintf(stderr, "dpgate check: bad policy at %s: %s\n",
		err->where[0] ? err->where : "/", err->text);
	return 2;
}

/*
 * Reads a dataset entry's id, accountant, neighbour, delta share and filter
 * orders into *L.  Returns 0, or a negative ACCT_E* code with err.
 */
static int parse_ledger(const json_t *ds, const char *where, struct ds_ledger *L,
			acct_error *err)
{
	static const char *const ds_keys[] = {"id", "name", "budget", "accountant", "neighbor",
					      "delta_share", "filter_orders", "planned", NULL};
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int rc;

	if (!json_is_object(ds))
		return acct_error_set(err, ACCT_EINVAL, where, "a dataset must be an object");
	rc = srv_json_only_keys(ds, where, ds_keys, err);
	if (rc >= 0)
		rc = srv_json_string(ds, where, "id", SRV_REQUIRED, DPG_MAX_ID_BYTES, &L->id, err);
	if (rc >= 0 && !srv_id_ok(L->id)) {
		srv_json_pointer(ptr, sizeof(ptr), where, "id");
		rc = acct_error_set(err, ACCT_EINVAL, ptr,
				    "'id' must be a dataset id the server takes: letters, digits, "
				    "'_', '-' and '.', not '.' or '..'");
	}
	if (rc >= 0)
		rc = srv_json_string(ds, where, "accountant", SRV_NULLABLE, 16, &L->acct_name, err);
	if (rc < 0)
		return rc;
	if (acct_ledger_kind_from_name(L->acct_name, &L->kind) < 0) {
		srv_json_pointer(ptr, sizeof(ptr), where, "accountant");
		return acct_error_set(err, ACCT_EINVAL, ptr,
				      "'accountant' must be rdp, zcdp or basic");
	}
	rc = srv_json_neighbor(ds, where, "neighbor", &L->nb, err);
	if (rc >= 0)
		rc = srv_json_real(ds, where, "delta_share", SRV_NULLABLE | SRV_HI_OPEN, 0.0, 1.0,
				   &L->share, err);
	if (rc >= 0)
		rc = srv_json_filter_orders(ds, where, L->kind, L->orders, &L->n_orders, err);
	return rc;
}

/*
 * Only a basic ledger converts events at a delta share; rdp and zcdp price
 * every event themselves.  Not an error (the plan is priced as the server
 * would), but a policy author who set it expects it to count: rep->warning
 * says so, or is "".
 */
static void warn_ignored_share(const json_t *ds, const char *where, const struct ds_ledger *L,
			       struct ds_report *rep)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	rep->warning[0] = '\0';
	if (L->kind == ACCT_LEDGER_BASIC || !json_object_get(ds, "delta_share") ||
	    json_is_null(json_object_get(ds, "delta_share")))
		return;
	srv_json_pointer(ptr, sizeof(ptr), where, "delta_share");
	snprintf(rep->warning, sizeof(rep->warning),
		 "%s is ignored: a%s %s ledger prices every event itself; only basic "
		 "ledgers use a delta share",
		 ptr, L->kind == ACCT_LEDGER_RDP ? "n" : "", L->acct_name);
}

/*
 * Reads the entry's budget and sets up L->f, the filter the server's
 * ledger would use.  Returns 0, or a negative ACCT_E* code with err.
 */
static int open_filter(const json_t *ds, const char *where, struct ds_ledger *L, acct_error *err)
{
	static const char *const budget_keys[] = {"epsilon", "delta", NULL};
	char ptr[ACCT_ERROR_WHERE_BYTES];
	json_t *budget;
	int rc;

	srv_json_pointer(ptr, sizeof(ptr), where, "budget");
	budget = json_object_get(ds, "budget");
	if (!json_is_object(budget))
		return acct_error_set(err, ACCT_EINVAL, ptr, "'budget' must be an object");
	rc = srv_json_only_keys(budget, ptr, budget_keys, err);
	if (rc >= 0)
		rc = srv_json_real(budget, ptr, "epsilon", SRV_REQUIRED | SRV_LO_OPEN, 0.0,
				   DPG_MAX_BUDGET_EPSILON, &L->eps_b, err);
	if (rc >= 0)
		rc = srv_json_real(budget, ptr, "delta", SRV_REQUIRED | SRV_HI_OPEN, 0.0, 1.0,
				   &L->delta_b, err);
	if (rc < 0)
		return rc;
	rc = L->n_orders > 0 ? acct_filter_init_orders(&L->f, L->kind, L->nb, L->eps_b, L->delta_b,
						       L->orders, L->n_orders, err)
			     : acct_filter_init(&L->f, L->kind, L->nb, L->eps_b, L->delta_b, err);
	if (rc < 0) {
		/* The filter names "/budget/..." or "/filter_orders/..."; make it
		 * point into the policy.  A joined pointer too long for err->where
		 * falls back to the entry's own pointer rather than being cut. */
		if (err->code != ACCT_OK) {
			char tmp[ACCT_ERROR_WHERE_BYTES];

			if ((size_t)snprintf(tmp, sizeof(tmp), "%s%s", where, err->where) >=
			    sizeof(tmp))
				snprintf(tmp, sizeof(tmp), "%s", where);
			memcpy(err->where, tmp, sizeof(err->where));
			err->code = ACCT_EINVAL;
		}
		return ACCT_EINVAL;
	}
	/* As the server refuses to create such a dataset. */
	if (L->n_orders > 0 && !acct_filter_admits_some(&L->f)) {
		srv_json_pointer(ptr, sizeof(ptr), where, "filter_orders");
		return acct_error_set(err, ACCT_EINVAL, ptr,
				      "at these orders this budget admits no spending: the delta "
				      "share of each order converts to no RDP budget");
	}
	return 0;
}

/*
 * Reads planned release `j` (at pointer `item`; its event at `evp`): its
 * name, its repeat count and its event, in *ret_ev (caller frees).
 * Returns 0, or a negative ACCT_E* code with err.
 */
static int parse_planned(const json_t *j, const char *item, const char *evp,
			 const char **ret_name, int64_t *ret_repeat, acct_event **ret_ev,
			 acct_error *err)
{
	static const char *const ev_keys[] = {"name", "event", "repeat", NULL};
	acct_event *ev = NULL;
	int rc;

	if (!json_is_object(j))
		return acct_error_set(err, ACCT_EINVAL, item, "a planned release must be an object");
	rc = srv_json_only_keys(j, item, ev_keys, err);
	if (rc >= 0)
		rc = srv_json_string(j, item, "name", SRV_NULLABLE, DPG_MAX_NAME_BYTES, ret_name,
				     err);
	if (rc >= 0)
		rc = srv_json_int(j, item, "repeat", SRV_NULLABLE, 1, DPG_MAX_COMPOSITION_COUNT,
				  ret_repeat, err);
	if (rc < 0)
		return rc;
	if (!json_object_get(j, "event"))
		return acct_error_set(err, ACCT_EINVAL, evp, "'event' is required");
	rc = srv_event_parse(json_object_get(j, "event"), evp, &ev, err);
	if (rc < 0)
		return rc;
	*ret_ev = ev;
	return 0;
}

/*
 * Prices event `ev` (which it frees) on the ledger and admits `repeat`
 * charges of it when the plan still fits and the budget holds them all.
 * They are `repeat` separate charges, as many requests would be, not one
 * composed event: a basic ledger prices each at its own delta share, and
 * each sum is rounded as the server's running total rounds it.  A charge
 * the ledger cannot price is a refusal, recorded in run.  Sets
 * *ret_epsilon (the filter's epsilon of the `repeat` charges alone; NAN
 * when unpriced) and *ret_admitted.  Returns 0, or a negative ACCT_E*
 * code with err for a malformed event (bad policy).
 */
static int admit_planned(struct ds_ledger *L, struct ds_run *run, acct_event *ev, int64_t repeat,
			 const char *where, const char *evp, double *ret_epsilon,
			 bool *ret_admitted, acct_error *err)
{
	acct_cost c, next, alone;
	acct_error e;
	int rc;

	acct_error_init(&e);
	rc = acct_event_validate_at(ev, L->nb, evp, &e);
	if (rc == 0)
		rc = acct_filter_price(&L->f, ev, L->share, &c, &e);
	acct_event_free(ev);
	if (rc == ACCT_EINVAL || rc == ACCT_ENOMEM) {
		acct_error_set(err, rc, e.where[0] ? e.where : evp, "%s", e.text);
		return rc;
	}
	if (rc < 0) {
		/* Well formed but this ledger cannot price it: the plan cannot run.
		 * A missing delta share is the policy's field, not a request's. */
		if (run->refusal.code == ACCT_OK && strcmp(e.where, "/delta") == 0) {
			char ptr[ACCT_ERROR_WHERE_BYTES];

			srv_json_pointer(ptr, sizeof(ptr), where, "delta_share");
			acct_error_set(&run->refusal, rc, ptr,
				       "a basic ledger prices the event at %s only at a delta "
				       "share: give the dataset a \"delta_share\"", evp);
		} else if (run->refusal.code == ACCT_OK) {
			acct_error_set(&run->refusal, rc, evp, "%s", e.text);
		}
		run->fits = false;
		return 0;
	}
	acct_filter_zero(&L->f, &alone);
	acct_cost_add_up_times(&alone, &c, repeat);
	*ret_epsilon = acct_filter_epsilon(&L->f, &alone);
	if (!run->fits)
		return 0;
	/* Totals only grow and the filter is monotone in them: every one of
	 * the charges is admitted exactly when the last one is. */
	next = run->total;
	acct_cost_add_up_times(&next, &c, repeat);
	if (acct_filter_within(&L->f, &next)) {
		run->total = next;
		*ret_admitted = true;
		run->charges += repeat;
	} else {
		run->fits = false;
	}
	return 0;
}

/*
 * Checks planned release number i of a dataset (at `planned`/i) and appends
 * its row to events.  Returns 0, or a negative ACCT_E* code with err.
 */
static int check_planned(struct ds_ledger *L, struct ds_run *run, const json_t *j,
			 const char *where, const char *planned, size_t i, json_t *events,
			 acct_error *err)
{
	char item[ACCT_ERROR_WHERE_BYTES + 24], evp[ACCT_ERROR_WHERE_BYTES + 32];
	const char *name = NULL;
	int64_t repeat = 1;
	acct_event *ev = NULL;
	bool admitted = false;
	double cost_eps = NAN;
	json_t *row;
	int rc;

	snprintf(item, sizeof(item), "%s/%zu", planned, i);
	snprintf(evp, sizeof(evp), "%s/event", item);
	rc = parse_planned(j, item, evp, &name, &repeat, &ev, err);
	if (rc < 0)
		return rc;
	rc = admit_planned(L, run, ev, repeat, where, evp, &cost_eps, &admitted, err);
	if (rc < 0)
		return rc;
	row = json_pack("{s:s?,s:I,s:o,s:b}", "name", name, "repeat", (json_int_t)repeat,
			"epsilon", isfinite(cost_eps) ? json_real(cost_eps) : json_null(),
			"admitted", admitted);
	if (!row || json_array_append_new(events, row))
		return acct_error_set(err, ACCT_ENOMEM, item, "out of memory");
	return 0;
}

/* Fills rep from the ledger and the run, taking `events`.  Returns 0, or
 * ACCT_ENOMEM with err. */
static int report_dataset(const struct ds_ledger *L, const struct ds_run *run, json_t *events,
			  const char *where, struct ds_report *rep, acct_error *err)
{
	double spent = acct_filter_epsilon(&L->f, &run->total);
	double remaining = fmax(L->eps_b - spent, 0.0);

	rep->json = json_pack("{s:s,s:s,s:s,s:{s:f,s:f},s:{s:f,s:f},s:{s:f},s:I,s:b,s:o}",
			      "id", L->id, "accountant", acct_ledger_kind_name(L->kind), "neighbor",
			      L->nb == ACCT_REPLACE ? "replace" : "add_remove", "budget",
			      "epsilon", L->eps_b, "delta", L->delta_b, "spent", "epsilon", spent,
			      "delta", acct_filter_delta(&L->f, &run->total), "remaining",
			      "epsilon", remaining, "charges", (json_int_t)run->charges, "fits",
			      run->fits, "events", events);
	if (!rep->json)
		return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");
	if (run->refusal.code != ACCT_OK)
		json_object_set_new(rep->json, "error",
				    json_pack("{s:s,s:s}", "where", run->refusal.where, "detail",
					      run->refusal.text));
	rep->fits = run->fits;
	return 0;
}

/*
 * Checks one dataset.  Returns 0 (report filled), or ACCT_EINVAL with err
 * for a malformed entry (bad policy).
 */
static int check_dataset(const json_t *ds, const char *where, struct ds_report *rep,
			 acct_error *err)
{
	struct ds_ledger L = {.acct_name = "rdp", .kind = ACCT_LEDGER_RDP, .nb = ACCT_ADD_REMOVE};
	struct ds_run run = {.charges = 0, .fits = true};
	char planned_ptr[ACCT_ERROR_WHERE_BYTES];
	json_t *planned, *events = NULL, *j;
	size_t i;
	int rc;

	acct_error_init(&run.refusal);
	rc = parse_ledger(ds, where, &L, err);
	if (rc < 0)
		return rc;
	warn_ignored_share(ds, where, &L, rep);
	rc = open_filter(ds, where, &L, err);
	if (rc < 0)
		return rc;
	srv_json_pointer(planned_ptr, sizeof(planned_ptr), where, "planned");
	planned = json_object_get(ds, "planned");
	if (!json_is_array(planned) || json_array_size(planned) > DPG_MAX_CHECK_PLANNED)
		return acct_error_set(err, ACCT_EINVAL, planned_ptr,
				      "'planned' must be an array of at most %d events",
				      DPG_MAX_CHECK_PLANNED);
	events = json_array();
	if (!events)
		return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");
	acct_filter_zero(&L.f, &run.total);
	json_array_foreach(planned, i, j) {
		rc = check_planned(&L, &run, j, where, planned_ptr, i, events, err);
		if (rc < 0)
			goto out;
	}
	/* json_pack's "o" takes events, on failure too. */
	rc = report_dataset(&L, &run, events, where, rep, err);
	events = NULL;
out:
	json_decref(events);
	return rc;
}

/* For a plan that exceeds its budget: the planned release that did not fit
 * (the first not admitted; nothing after it is charged), where the table
 * alone shows only totals. */
static void print_first_exceeding(size_t index, const json_t *d)
{
	size_t k;
	json_t *ev;

	json_array_foreach(json_object_get(d, "events"), k, ev) {
		const char *name = json_string_value(json_object_get(ev, "name"));
		const json_t *eps = json_object_get(ev, "epsilon");

		if (json_is_true(json_object_get(ev, "admitted")))
			continue;
		printf("  does not fit: /datasets/%zu/planned/%zu%s%s%s x%lld, ", index, k,
		       name ? " \"" : "", name ? name : "", name ? "\"" : "",
		       (long long)json_integer_value(json_object_get(ev, "repeat")));
		if (json_is_real(eps))
			printf("epsilon %.4g alone", json_real_value(eps));
		else
			printf("epsilon unbounded");
		printf(", after spending %.4g of %.4g; nothing after it is charged\n",
		       json_real_value(pget(d, "spent", "epsilon")),
		       json_real_value(pget(d, "budget", "epsilon")));
		return;
	}
}

static void print_table(const json_t *all)
{
	size_t i;
	json_t *d;

	printf("%-20s %-6s %10s %10s %10s %10s %8s  %s\n", "dataset", "acct", "budget_eps",
	       "budget_del", "spent_eps", "remaining", "charges", "result");
	json_array_foreach(json_object_get(all, "datasets"), i, d) {
		json_t *err = json_object_get(d, "error");
		const char *res = json_is_true(json_object_get(d, "fits")) ? "FITS" :
				  err ? "REFUSED" : "EXCEEDS";

		printf("%-20s %-6s %10.4g %10.3g %10.4g %10.4g %8lld  %s\n",
		       json_string_value(json_object_get(d, "id")),
		       json_string_value(json_object_get(d, "accountant")),
		       json_real_value(pget(d, "budget", "epsilon")),
		       json_real_value(pget(d, "budget", "delta")),
		       json_real_value(pget(d, "spent", "epsilon")),
		       json_real_value(pget(d, "remaining", "epsilon")),
		       (long long)json_integer_value(json_object_get(d, "charges")), res);
		if (err)
			printf("  refused at %s: %s\n", json_string_value(json_object_get(err, "where")),
			       json_string_value(json_object_get(err, "detail")));
		else if (!json_is_true(json_object_get(d, "fits")))
			print_first_exceeding(i, d);
	}
}

static const char usage_check[] =
	"usage: dpgate check POLICY [--json]\n"
	"\n"
	"Prices a budget policy without a server, for CI: POLICY (a file, or - for\n"
	"stdin) is a JSON object {\"datasets\": [{\"id\", \"budget\": {\"epsilon\",\n"
	"\"delta\"}, \"accountant\" (rdp|zcdp|basic), \"neighbor\", \"filter_orders\" (rdp\n"
	"ledgers only, as the dataset's), \"delta_share\" (basic ledgers only; elsewhere\n"
	"a warning),\n"
	"\"planned\": [{\"name\", \"event\", \"repeat\"}]}]}.  Each dataset's planned\n"
	"charges are admitted in order exactly as the server's ledger filter would.\n"
	"\n"
	"  --json   print the report as JSON instead of text\n"
	"\n"
	"Exit status: 0 every plan fits, 1 some plan does not, 2 bad policy or usage.\n";

/*
 * Reads check's arguments: the POLICY path into *ret_path and --json into
 * *ret_json.  Returns -1 to go on, or the exit status (after --help, or a
 * message on stderr).
 */
static int parse_check_args(int argc, char **argv, const char **ret_path, bool *ret_json)
{
	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--json") == 0) {
			*ret_json = true;
		} else if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
			fputs(usage_check, stdout);
			return 0;
		} else if (argv[a][0] == '-' && argv[a][1] != '\0') {
			fprintf(stderr, "dpgate check: unknown option %s\n"
				"usage: dpgate check POLICY [--json]\n", argv[a]);
			return 2;
		} else if (!*ret_path) {
			*ret_path = argv[a];
		} else {
			fprintf(stderr, "dpgate check: unexpected argument '%s' (one POLICY)\n"
				"usage: dpgate check POLICY [--json]\n", argv[a]);
			return 2;
		}
	}
	if (!*ret_path) {
		fprintf(stderr, "dpgate check: POLICY is required (a file, or - for stdin)\n"
			"usage: dpgate check POLICY [--json]\n");
		return 2;
	}
	return -1;
}

/* The policy at path ("-": stdin), or NULL after a message on stderr. */
static json_t *load_policy(const char *path)
{
	json_error_t jerr;
	json_t *policy = strcmp(path, "-") == 0 ?
				 json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr) :
				 json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);

	if (policy)
		return policy;
	/* jansson reports line -1 when no text was read (a missing or
	 * unreadable file): no line to name then. */
	if (jerr.line > 0)
		fprintf(stderr, "dpgate check: cannot read policy %s: %s (line %d)\n", path,
			jerr.text, jerr.line);
	else
		fprintf(stderr, "dpgate check: cannot read policy %s: %s\n", path, jerr.text);
	return NULL;
}

/* The policy's top level: an object with at most DPG_MAX_CHECK_DATASETS
 * datasets, the format's version 1 if it names one, and no unknown keys.
 * Returns 0, or ACCT_EINVAL with err. */
static int check_policy_shape(const json_t *policy, acct_error *err)
{
	static const char *const top_keys[] = {"datasets", "version", NULL};
	const json_t *datasets = json_object_get(policy, "datasets");
	int64_t version = 1;

	if (!json_is_object(policy) || !json_is_array(datasets))
		return acct_error_set(err, ACCT_EINVAL, "/datasets",
				      "the policy must be an object with a 'datasets' array");
	if (json_array_size(datasets) > DPG_MAX_CHECK_DATASETS)
		return acct_error_set(err, ACCT_EINVAL, "/datasets",
				      "the policy lists %zu datasets; at most %d are allowed",
				      json_array_size(datasets), DPG_MAX_CHECK_DATASETS);
	if (srv_json_int(policy, "", "version", SRV_NULLABLE, 1, 1, &version, err) < 0)
		return ACCT_EINVAL;
	return srv_json_only_keys(policy, "", top_keys, err) < 0 ? ACCT_EINVAL : 0;
}

/*
 * Two entries for one dataset would be checked each on its own, so a plan
 * whose releases together overspend would pass: dataset i (at `where`) is
 * refused when an earlier entry has its id.  Returns 0, or ACCT_EINVAL
 * with err.
 */
static int check_listed_once(const json_t *datasets, size_t i, const char *where,
			     acct_error *err)
{
	const char *id = json_string_value(json_object_get(json_array_get(datasets, i), "id"));

	for (size_t k = 0; k < i; k++) {
		if (strcmp(id, json_string_value(json_object_get(json_array_get(datasets, k),
								  "id"))) == 0) {
			char ptr[80];

			snprintf(ptr, sizeof(ptr), "%s/id", where);
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "dataset '%s' is listed twice (also at /datasets/%zu): "
					      "plan all of its releases in one entry", id, k);
		}
	}
	return 0;
}

/*
 * Checks every dataset of the policy into the array arr, warning on stderr
 * of fields set in vain; *ret_all_fit says whether every plan fits.
 * Returns 0, or a negative ACCT_E* code with err (bad policy).
 */
static int check_datasets(const json_t *datasets, json_t *arr, bool *ret_all_fit,
			  acct_error *err)
{
	size_t i;
	json_t *d;

	json_array_foreach(datasets, i, d) {
		char where[64];
		struct ds_report rep = {0};

		snprintf(where, sizeof(where), "/datasets/%zu", i);
		if (check_dataset(d, where, &rep, err) < 0)
			return ACCT_EINVAL;
		if (check_listed_once(datasets, i, where, err) < 0) {
			json_decref(rep.json);
			return ACCT_EINVAL;
		}
		if (rep.warning[0])
			fprintf(stderr, "dpgate check: warning: %s\n", rep.warning);
		*ret_all_fit = *ret_all_fit && rep.fits;
		json_array_append_new(arr, rep.json);
	}
	return 0;
}

int srv_check_main(int argc, char **argv)
{
	const char *path = NULL;
	bool as_json = false, all_fit = true;
	json_t *policy = NULL, *out = NULL, *arr = NULL;
	acct_error err;
	int status;

	status = parse_check_args(argc, argv, &path, &as_json);
	if (status >= 0)
		return status;
	status = 2;
	policy = load_policy(path);
	if (!policy)
		return 2;
	acct_error_init(&err);
	if (check_policy_shape(policy, &err) < 0) {
		status = bad_policy(&err);
		goto out;
	}
	arr = json_array();
	if (!arr)
		goto out;
	if (check_datasets(json_object_get(policy, "datasets"), arr, &all_fit, &err) < 0) {
		status = bad_policy(&err);
		goto out;
	}
	out = json_pack("{s:b,s:O}", "fits", all_fit, "datasets", arr);
	if (!out)
		goto out;
	if (as_json) {
		char *s = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(10));

		if (s) {
			puts(s);
			free(s);
		}
	} else {
		print_table(out);
	}
	status = all_fit ? 0 : 1;
out:
	json_decref(out);
	json_decref(arr);
	json_decref(policy);
	return status;
}
