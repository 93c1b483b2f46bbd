/*
 * acct_event.c: the event tree's leaf helpers: the names of event types,
 * ledger kinds and accountants, allocation, copies and constructors, and
 * validation of an event against a neighbouring relation, all driven by one
 * table that describes each event type once (event_descs).  Every other
 * accountant file calls into this one, and it calls none of them but the
 * error helpers, so the accountants never call each other in a loop.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acct.h"

static const char *const ledger_names[] = {
	[ACCT_LEDGER_BASIC] = "basic",
	[ACCT_LEDGER_RDP] = "rdp",
	[ACCT_LEDGER_ZCDP] = "zcdp",
};

const char *acct_ledger_kind_name(acct_ledger_kind kind)
{
	if ((unsigned)kind > ACCT_LEDGER_ZCDP)
		return NULL;
	return ledger_names[kind];
}

int acct_ledger_kind_from_name(const char *name, acct_ledger_kind *ret_kind)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i <= ACCT_LEDGER_ZCDP; i++) {
		if (strcmp(ledger_names[i], name) == 0) {
			*ret_kind = (acct_ledger_kind)i;
			return 0;
		}
	}
	return -1;
}

static const char *const accountant_names[ACCT__N_ACCOUNTANTS] = {
	[ACCT_BASIC] = "basic",
	[ACCT_STRONG] = "strong",
	[ACCT_MOMENTS] = "moments",
	[ACCT_RDP] = "rdp",
	[ACCT_ZCDP] = "zcdp",
	[ACCT_PLD] = "pld",
};

const char *acct_accountant_name(acct_accountant a)
{
	if ((unsigned)a >= ACCT__N_ACCOUNTANTS)
		return NULL;
	return accountant_names[a];
}

int acct_accountant_from_name(const char *name, acct_accountant *ret)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < ACCT__N_ACCOUNTANTS; i++) {
		if (strcmp(accountant_names[i], name) == 0) {
			*ret = (acct_accountant)i;
			return 0;
		}
	}
	return -1;
}

/* ---- validation --------------------------------------------------------- */

static bool pos_finite(double x)
{
	return isfinite(x) && x > 0.0;
}

/*
 * The JSON pointer of the field `name` of the event at `where`, written into
 * `buf` (ACCT_ERROR_WHERE_BYTES long); returns buf.  A pointer too long for
 * an acct_error (events nest, and the caller's prefix adds to the depth) is
 * shortened to the deepest ancestor that fits, ending at a '/' boundary: it
 * still names the right place, only less precisely, where a cut string
 * would name a field that does not exist.
 */
static const char *field_at(char *buf, const char *where, const char *name)
{
	size_t n = strlen(where);

	if ((size_t)snprintf(buf, ACCT_ERROR_WHERE_BYTES, "%s/%s", where, name) <
	    ACCT_ERROR_WHERE_BYTES)
		return buf;
	/* where[0..n) is a whole pointer when where[n] is '/' or the end (RFC
	 * 6901 escapes a '/' inside a key as "~1"). */
	if (n >= ACCT_ERROR_WHERE_BYTES)
		for (n = ACCT_ERROR_WHERE_BYTES - 1; n > 0 && where[n] != '/'; n--)
			;
	memcpy(buf, where, n);
	buf[n] = '\0';
	return buf;
}

/* 0 when x, the event's field `name`, is a finite number > 0; else the
 * error, at where/name. */
static int need_positive(double x, const char *where, const char *name, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (pos_finite(x))
		return 0;
	return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, name),
			      "'%s' must be a finite number > 0", name);
}

/* The same for a finite number >= 0 (an epsilon, a rho). */
static int need_non_negative(double x, const char *where, const char *name, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (isfinite(x) && x >= 0.0)
		return 0;
	return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, name),
			      "'%s' must be a finite number >= 0", name);
}

/* The same for `name`, a sensitivity of a discrete mechanism: an integer
 * >= 1. */
static int need_sensitivity(double x, const char *where, const char *name, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (x >= 1.0 && x == floor(x))
		return 0;
	return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, name),
			      "'%s' must be an integer >= 1", name);
}


static int validate(const acct_event *ev, acct_neighbor nb, const char *where, unsigned depth,
		    acct_error *err);

/* An event defined under one neighbouring relation only: refused under
 * any other with the reason `why`, pointing at the event. */
static int need_relation(acct_neighbor nb, acct_neighbor only, const char *where,
			 const char *why, acct_error *err)
{
	if (nb != only)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where, "%s", why);
	return 0;
}

/* A wrapper's sub-event, validated at where/event one level deeper. */
static int validate_inner(const acct_event *inner, acct_neighbor nb, const char *where,
			  unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	return validate(inner, nb, field_at(ptr, where, "event"), depth + 1, err);
}

/* A sampling wrapper, whose amplification holds under one relation only:
 * refused under any other with `why`, else its sub-event validated. */
static int validate_sampled(const acct_event *inner, acct_neighbor nb, acct_neighbor only,
			    const char *why, const char *where, unsigned depth, acct_error *err)
{
	int rc = need_relation(nb, only, where, why, err);

	if (rc < 0)
		return rc;
	return validate_inner(inner, nb, where, depth, err);
}

/*
 * One validator per kind of event, each with the same signature so that
 * the descriptor table below can name it: `ev` is of a type the validator
 * is for, at JSON pointer `where`, `depth` levels down; wrappers validate
 * their children.
 *
 * A noise mechanism's event (gaussian, laplace, their discrete forms, the
 * exponential mechanism, permute-and-flip, PATE's GNMax and threshold) is
 * valid when each real parameter of its row, a noise scale or an epsilon,
 * is a finite number > 0 and each integer held in a real, a discrete
 * sensitivity, is an integer >= 1, checked in the row's order.
 */
static int validate_mechanism(const acct_event *ev, acct_neighbor nb, const char *where,
			      unsigned depth, acct_error *err)
{
	size_t n = 0;
	const acct_event_param *p = acct_event_params(ev->type, &n);

	for (size_t i = 0; p && i < n; i++) {
		double x = *(const double *)(const void *)((const char *)ev + p[i].offset);
		int rc = 0;

		if (p[i].kind == ACCT_PARAM_REAL)
			rc = need_positive(x, where, p[i].name, err);
		else if (p[i].kind == ACCT_PARAM_INT_REAL)
			rc = need_sensitivity(x, where, p[i].name, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int validate_randomized_response(const acct_event *ev, acct_neighbor nb,
					const char *where, unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (!(ev->u.randomized_response.noise_parameter > 0.0 &&
	      ev->u.randomized_response.noise_parameter <= 1.0))
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "noise_parameter"),
				      "'noise_parameter' must be in (0, 1]");
	if (ev->u.randomized_response.num_buckets < 2 ||
	    ev->u.randomized_response.num_buckets > DPG_MAX_NUM_BUCKETS)
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "num_buckets"),
				      "'num_buckets' must be in [2, %lld]",
				      (long long)DPG_MAX_NUM_BUCKETS);
	return need_relation(nb, ACCT_REPLACE, where,
			     "randomized response is defined under the replace "
			     "relation only (a respondent's answer has no "
			     "add/remove neighbour); set \"neighbor\":\"replace\"",
			     err);
}

static int validate_epsilon_delta(const acct_event *ev, acct_neighbor nb, const char *where,
				  unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int rc = need_non_negative(ev->u.epsilon_delta.epsilon, where, "epsilon", err);

	if (rc < 0)
		return rc;
	if (!(ev->u.epsilon_delta.delta >= 0.0 && ev->u.epsilon_delta.delta < 1.0))
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "delta"),
				      "'delta' must be in [0, 1)");
	return 0;
}

static int validate_zcdp(const acct_event *ev, acct_neighbor nb, const char *where,
			 unsigned depth, acct_error *err)
{
	return need_non_negative(ev->u.zcdp.rho, where, "rho", err);
}

static int validate_pate_gnss(const acct_event *ev, acct_neighbor nb, const char *where,
			      unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (!(ev->u.pate_gnss.beta >= 0.0 && ev->u.pate_gnss.beta < 0.5))
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "beta"),
				      "'beta' must be in [0, 0.5)");
	return need_positive(ev->u.pate_gnss.sigma, where, "sigma", err);
}

static int validate_poisson_sampled(const acct_event *ev, acct_neighbor nb, const char *where,
				    unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	double q = ev->u.poisson_sampled.sampling_probability;

	if (!(q > 0.0 && q <= 1.0))
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "sampling_probability"),
				      "'sampling_probability' must be in (0, 1]");
	return validate_sampled(ev->u.poisson_sampled.event, nb, ACCT_ADD_REMOVE,
				"Poisson sampling is accounted under the add_remove relation "
				"only; under replace use sampled_without_replacement",
				where, depth, err);
}

static int validate_sampled_wor(const acct_event *ev, acct_neighbor nb, const char *where,
				unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int64_t n = ev->u.sampled_without_replacement.source_dataset_size;
	int64_t m = ev->u.sampled_without_replacement.sample_size;

	if (n < 1 || n > DPG_MAX_DATASET_SIZE)
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "source_dataset_size"),
				      "'source_dataset_size' must be in [1, %lld]",
				      (long long)DPG_MAX_DATASET_SIZE);
	if (m < 1 || m > n)
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "sample_size"),
				      "'sample_size' must be in [1, source_dataset_size]");
	return validate_sampled(ev->u.sampled_without_replacement.event, nb, ACCT_REPLACE,
				"sampling without replacement is accounted under the "
				"replace relation only (Wang, Balle, Kasiviswanathan "
				"2019); under add_remove use poisson_sampled",
				where, depth, err);
}

static int validate_self_composed(const acct_event *ev, acct_neighbor nb, const char *where,
				  unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (ev->u.self_composed.count < 1 ||
	    ev->u.self_composed.count > DPG_MAX_COMPOSITION_COUNT)
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "count"),
				      "'count' must be in [1, %lld]",
				      (long long)DPG_MAX_COMPOSITION_COUNT);
	return validate_inner(ev->u.self_composed.event, nb, where, depth, err);
}

static int validate_composed(const acct_event *ev, acct_neighbor nb, const char *where,
			     unsigned depth, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (ev->u.composed.n > DPG_MAX_EVENT_NODES)
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "events"),
				      "too many events");
	for (size_t i = 0; i < ev->u.composed.n; i++) {
		char item[ACCT_ERROR_WHERE_BYTES + 32];
		int rc;

		snprintf(item, sizeof(item), "%s/events/%zu", where, i);
		rc = validate(ev->u.composed.events[i], nb, item, depth + 1, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- the event types ---------------------------------------------------- */

/*
 * The parameters of each type, in canonical order.  The JSON name is the
 * field's name in acct_event, so a row cannot name a field that is not
 * there.  The bounds are the wire format's (openapi.yaml's event schemas):
 * what a parser accepts before the validator applies a type's own rules.
 */
#define REAL(type, field, fl, l, h)                                                         \
	{.name = #field, .kind = ACCT_PARAM_REAL, .flags = (fl), .lo = (l), .hi = (h),      \
	 .offset = offsetof(acct_event, u.type.field)}
#define INT(type, field, kind_, fl, lo_, hi_)                                               \
	{.name = #field, .kind = (kind_), .flags = (fl), .min = (lo_), .max = (hi_),        \
	 .offset = offsetof(acct_event, u.type.field)}
#define EVENT(type)                                                                         \
	{.name = "event", .kind = ACCT_PARAM_EVENT, .offset = offsetof(acct_event, u.type.event)}

static const acct_event_param p_gaussian[] = {
	REAL(gaussian, noise_multiplier, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};
static const acct_event_param p_laplace[] = {
	REAL(laplace, noise_multiplier, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};
static const acct_event_param p_discrete_gaussian[] = {
	REAL(discrete_gaussian, sigma, ACCT_PARAM_LO_OPEN, 0, INFINITY),
	INT(discrete_gaussian, sensitivity, ACCT_PARAM_INT_REAL, 0, 1, DPG_MAX_EVENT_SENSITIVITY),
};
static const acct_event_param p_discrete_laplace[] = {
	REAL(discrete_laplace, noise_parameter, ACCT_PARAM_LO_OPEN, 0, INFINITY),
	INT(discrete_laplace, sensitivity, ACCT_PARAM_INT_REAL, 0, 1, DPG_MAX_EVENT_SENSITIVITY),
};
static const acct_event_param p_randomized_response[] = {
	REAL(randomized_response, noise_parameter, ACCT_PARAM_LO_OPEN, 0, 1),
	INT(randomized_response, num_buckets, ACCT_PARAM_INT, 0, 2, DPG_MAX_NUM_BUCKETS),
};
static const acct_event_param p_exponential_mechanism[] = {
	REAL(exponential_mechanism, epsilon, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};
static const acct_event_param p_permute_and_flip[] = {
	REAL(permute_and_flip, epsilon, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};
static const acct_event_param p_epsilon_delta[] = {
	REAL(epsilon_delta, epsilon, 0, 0, INFINITY),
	REAL(epsilon_delta, delta, 0, 0, 1),
};
static const acct_event_param p_zcdp[] = {
	REAL(zcdp, rho, 0, 0, INFINITY),
};
static const acct_event_param p_poisson_sampled[] = {
	REAL(poisson_sampled, sampling_probability, ACCT_PARAM_LO_OPEN, 0, 1),
	EVENT(poisson_sampled),
};
static const acct_event_param p_sampled_wor[] = {
	INT(sampled_without_replacement, source_dataset_size, ACCT_PARAM_INT, 0, 1,
	    DPG_MAX_DATASET_SIZE),
	INT(sampled_without_replacement, sample_size, ACCT_PARAM_INT, ACCT_PARAM_MAX_PREV, 1,
	    DPG_MAX_DATASET_SIZE),
	EVENT(sampled_without_replacement),
};
static const acct_event_param p_self_composed[] = {
	INT(self_composed, count, ACCT_PARAM_INT, 0, 1, DPG_MAX_COMPOSITION_COUNT),
	EVENT(self_composed),
};
static const acct_event_param p_composed[] = {
	{.name = "events", .kind = ACCT_PARAM_EVENTS, .max = DPG_MAX_EVENT_NODES,
	 .offset = offsetof(acct_event, u.composed.events),
	 .count_offset = offsetof(acct_event, u.composed.n)},
};
static const acct_event_param p_gnmax[] = {
	REAL(gnmax, sigma, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};
static const acct_event_param p_pate_threshold[] = {
	REAL(pate_threshold, sigma, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};
static const acct_event_param p_pate_gnss[] = {
	REAL(pate_gnss, beta, ACCT_PARAM_HI_OPEN, 0, 0.5),
	REAL(pate_gnss, sigma, ACCT_PARAM_LO_OPEN, 0, INFINITY),
};

#undef REAL
#undef INT
#undef EVENT

/*
 * Each event type described once, on the accountant side: its name (the
 * JSON "type"), its validator and its parameters.  Names, parsing and
 * printing (server/json/json_codec.c), free, copy and validation all read this
 * table; adding an event type adds one row here (and its pricing in each
 * accountant).
 */
struct event_desc {
	const char *name;
	int (*validate)(const acct_event *ev, acct_neighbor nb, const char *where,
			unsigned depth, acct_error *err);
	const acct_event_param *params;
	size_t n_params;
};

#define ROW(name, validator, params) {name, validator, params, sizeof(params) / sizeof(params[0])}

static const struct event_desc event_descs[ACCT_EV__COUNT] = {
	[ACCT_EV_GAUSSIAN] = ROW("gaussian", validate_mechanism, p_gaussian),
	[ACCT_EV_LAPLACE] = ROW("laplace", validate_mechanism, p_laplace),
	[ACCT_EV_DISCRETE_GAUSSIAN] = ROW("discrete_gaussian", validate_mechanism,
					  p_discrete_gaussian),
	[ACCT_EV_DISCRETE_LAPLACE] = ROW("discrete_laplace", validate_mechanism,
					 p_discrete_laplace),
	[ACCT_EV_RANDOMIZED_RESPONSE] = ROW("randomized_response", validate_randomized_response,
					    p_randomized_response),
	[ACCT_EV_EXPONENTIAL_MECHANISM] = ROW("exponential_mechanism",
					      validate_mechanism,
					      p_exponential_mechanism),
	[ACCT_EV_PERMUTE_AND_FLIP] = ROW("permute_and_flip", validate_mechanism,
					 p_permute_and_flip),
	[ACCT_EV_EPSILON_DELTA] = ROW("epsilon_delta", validate_epsilon_delta, p_epsilon_delta),
	[ACCT_EV_ZCDP] = ROW("zcdp", validate_zcdp, p_zcdp),
	[ACCT_EV_POISSON_SAMPLED] = ROW("poisson_sampled", validate_poisson_sampled,
					p_poisson_sampled),
	[ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT] = ROW("sampled_without_replacement",
						    validate_sampled_wor, p_sampled_wor),
	[ACCT_EV_SELF_COMPOSED] = ROW("self_composed", validate_self_composed, p_self_composed),
	[ACCT_EV_COMPOSED] = ROW("composed", validate_composed, p_composed),
	[ACCT_EV_GNMAX] = ROW("gnmax", validate_mechanism, p_gnmax),
	[ACCT_EV_PATE_THRESHOLD] = ROW("pate_threshold", validate_mechanism,
				       p_pate_threshold),
	[ACCT_EV_PATE_GNSS] = ROW("pate_gnss", validate_pate_gnss, p_pate_gnss),
};

#undef ROW

/* The row of `type`, or NULL for a type outside the table. */
static const struct event_desc *event_desc_of(acct_event_type type)
{
	if ((unsigned)type >= ACCT_EV__COUNT || !event_descs[type].name)
		return NULL;
	return &event_descs[type];
}

const char *acct_event_type_name(acct_event_type type)
{
	const struct event_desc *d = event_desc_of(type);

	return d ? d->name : NULL;
}

const acct_event_param *acct_event_params(acct_event_type type, size_t *ret_n)
{
	const struct event_desc *d = event_desc_of(type);

	if (!d)
		return NULL;
	*ret_n = d->n_params;
	return d->params;
}

int acct_event_type_from_name(const char *name, acct_event_type *ret_type)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < ACCT_EV__COUNT; i++) {
		if (event_descs[i].name && strcmp(event_descs[i].name, name) == 0) {
			*ret_type = (acct_event_type)i;
			return 0;
		}
	}
	return -1;
}

/* Validates the event at JSON pointer `where`, `depth` levels down. */
static int validate(const acct_event *ev, acct_neighbor nb, const char *where, unsigned depth,
		    acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	const struct event_desc *d;

	if (!ev)
		return acct_error_set(err, ACCT_EINVAL, where, "missing event");
	if (depth > DPG_MAX_EVENT_DEPTH)
		return acct_error_set(err, ACCT_EINVAL, where, "events nest deeper than %d levels",
				      DPG_MAX_EVENT_DEPTH);
	d = event_desc_of(ev->type);
	if (!d)
		return acct_error_set(err, ACCT_EINVAL, field_at(ptr, where, "type"),
				      "unknown event type");
	return d->validate(ev, nb, where, depth, err);
}

acct_event *acct_event_new(acct_event_type type)
{
	acct_event *ev = calloc(1, sizeof(*ev));

	if (ev)
		ev->type = type;
	return ev;
}

/* The sub-event field `p` (ACCT_PARAM_EVENT) of `ev`. */
static acct_event **event_at(acct_event *ev, const acct_event_param *p)
{
	return (acct_event **)(void *)((char *)ev + p->offset);
}

/* The sub-event list `p` (ACCT_PARAM_EVENTS) of `ev`, and its length. */
static acct_event ***events_at(acct_event *ev, const acct_event_param *p)
{
	return (acct_event ***)(void *)((char *)ev + p->offset);
}

static size_t *count_at(acct_event *ev, const acct_event_param *p)
{
	return (size_t *)(void *)((char *)ev + p->count_offset);
}

/* Frees what parameter `p` of `ev` owns (its sub-events), if anything. */
static void free_param(acct_event *ev, const acct_event_param *p)
{
	if (p->kind == ACCT_PARAM_EVENT) {
		acct_event_free(*event_at(ev, p));
	} else if (p->kind == ACCT_PARAM_EVENTS) {
		acct_event **list = *events_at(ev, p);

		for (size_t i = 0; i < *count_at(ev, p); i++)
			acct_event_free(list[i]);
		free(list);
	}
}

void acct_event_free(acct_event *ev)
{
	const struct event_desc *d;

	if (!ev)
		return;
	d = event_desc_of(ev->type);
	for (size_t i = 0; d && i < d->n_params; i++)
		free_param(ev, &d->params[i]);
	free(ev);
}

/* Deep-copies parameter `p` of `ev` into `copy`, whose field for it is
 * empty: on failure it holds the sub-events copied so far. */
static int copy_param(acct_event *copy, const acct_event *ev, const acct_event_param *p)
{
	const char *src = (const char *)ev;
	const acct_event *child;
	acct_event *const *list;
	size_t n;

	if (p->kind == ACCT_PARAM_EVENT) {
		child = *(acct_event *const *)(const void *)(src + p->offset);
		if (!child)
			return 0;
		*event_at(copy, p) = acct_event_copy(child);
		return *event_at(copy, p) ? 0 : -1;
	}
	if (p->kind != ACCT_PARAM_EVENTS)
		return 0;
	list = *(acct_event *const *const *)(const void *)(src + p->offset);
	n = *(const size_t *)(const void *)(src + p->count_offset);
	*events_at(copy, p) = n ? calloc(n, sizeof(acct_event *)) : NULL;
	if (n && !*events_at(copy, p))
		return -1;
	for (size_t i = 0; i < n; i++) {
		(*events_at(copy, p))[i] = acct_event_copy(list[i]);
		if (!(*events_at(copy, p))[i])
			return -1;
		*count_at(copy, p) = i + 1;
	}
	return 0;
}

/*
 * Replaces the sub-events `copy` shares with `ev` (a shallow copy of it) by
 * deep copies.  Every shared field is emptied first, so that on failure
 * `copy` holds only what it owns (the children copied so far) and
 * acct_event_free(copy) is safe.
 */
static int copy_children(acct_event *copy, const acct_event *ev)
{
	const struct event_desc *d = event_desc_of(ev->type);

	for (size_t i = 0; d && i < d->n_params; i++) {
		const acct_event_param *p = &d->params[i];

		if (p->kind == ACCT_PARAM_EVENT) {
			*event_at(copy, p) = NULL;
		} else if (p->kind == ACCT_PARAM_EVENTS) {
			*events_at(copy, p) = NULL;
			*count_at(copy, p) = 0;
		}
	}
	for (size_t i = 0; d && i < d->n_params; i++)
		if (copy_param(copy, ev, &d->params[i]) < 0)
			return -1;
	return 0;
}

acct_event *acct_event_copy(const acct_event *ev)
{
	acct_event *copy;

	if (!ev)
		return NULL;
	copy = malloc(sizeof(*copy));
	if (!copy)
		return NULL;
	*copy = *ev;
	if (copy_children(copy, ev) < 0) {
		acct_event_free(copy);
		return NULL;
	}
	return copy;
}

acct_event *acct_event_epsilon_delta(double epsilon, double delta)
{
	acct_event *ev = acct_event_new(ACCT_EV_EPSILON_DELTA);

	if (ev) {
		ev->u.epsilon_delta.epsilon = epsilon;
		ev->u.epsilon_delta.delta = delta;
	}
	return ev;
}

acct_event *acct_event_gaussian(double noise_multiplier)
{
	acct_event *ev = acct_event_new(ACCT_EV_GAUSSIAN);

	if (ev)
		ev->u.gaussian.noise_multiplier = noise_multiplier;
	return ev;
}

/*
 * A new event of `type`, a wrapper (its row has one ACCT_PARAM_EVENT), that
 * holds `inner` as its sub-event; `inner` is freed when that fails.  A NULL
 * `inner` (its own constructor ran out of memory) makes no wrapper, so that
 * constructors nest without a tree with a missing leaf.
 */
static acct_event *wrapper_new(acct_event_type type, acct_event *inner)
{
	const struct event_desc *d = event_desc_of(type);
	acct_event *ev = inner ? acct_event_new(type) : NULL;

	for (size_t i = 0; ev && d && i < d->n_params; i++) {
		if (d->params[i].kind == ACCT_PARAM_EVENT) {
			*event_at(ev, &d->params[i]) = inner;
			return ev;
		}
	}
	acct_event_free(ev);
	acct_event_free(inner);
	return NULL;
}

acct_event *acct_event_self_composed(int64_t count, acct_event *inner)
{
	acct_event *ev = wrapper_new(ACCT_EV_SELF_COMPOSED, inner);

	if (ev)
		ev->u.self_composed.count = count;
	return ev;
}

acct_event *acct_event_poisson_sampled(double q, acct_event *inner)
{
	acct_event *ev = wrapper_new(ACCT_EV_POISSON_SAMPLED, inner);

	if (ev)
		ev->u.poisson_sampled.sampling_probability = q;
	return ev;
}

acct_event *acct_event_composed(acct_event *const *events, size_t n)
{
	acct_event *ev = acct_event_new(ACCT_EV_COMPOSED);
	acct_event **list = n ? malloc(n * sizeof(*list)) : NULL;

	if (!ev || (n && !list)) {
		free(ev);
		free(list);
		for (size_t i = 0; i < n; i++)
			acct_event_free(events[i]);
		return NULL;
	}
	if (n)
		memcpy(list, events, n * sizeof(*list));
	ev->u.composed.events = list;
	ev->u.composed.n = n;
	return ev;
}


int acct_event_validate_at(const acct_event *ev, acct_neighbor neighbor, const char *prefix,
			   acct_error *err)
{
	if (neighbor != ACCT_ADD_REMOVE && neighbor != ACCT_REPLACE)
		return acct_error_set(err, ACCT_EINVAL, "/neighbor", "unknown neighbouring relation");
	return validate(ev, neighbor, prefix ? prefix : "/event", 0, err);
}

int acct_event_validate(const acct_event *ev, acct_neighbor neighbor, acct_error *err)
{
	return acct_event_validate_at(ev, neighbor, NULL, err);
}
