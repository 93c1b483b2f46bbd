/*
 * api_pate_session.c: PATE aggregation sessions on a dataset's budget.
 *
 * Papernot, Abadi, Erlingsson, Goodfellow, Talwar, "Semi-supervised knowledge
 * transfer for deep learning from private training data", ICLR 2017 (LNMax),
 * and Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable
 * private learning with PATE", ICLR 2018 (GNMax, Confident-GNMax = Algorithm
 * 1, Interactive-GNMax = Algorithm 2, the data-dependent analysis and the
 * smooth-sensitivity release of Appendix B).
 *
 * What is charged.  The ledger only ever sees data-independent events:
 *  - every threshold check (Confident and Interactive GNMax) is a
 *    `pate_threshold` event, RDP lambda / (2 sigma1^2);
 *  - every query the teachers answer by GNMax is a `gnmax` event, RDP
 *    lambda / sigma2^2 (a teacher changing its vote moves two counts by one:
 *    L2 sensitivity sqrt 2);
 *  - every LNMax answer is pure epsilon = 2 gamma (Laplace of scale 1/gamma on
 *    a histogram of L1 sensitivity 2, ICLR 2017 Section 2.1).
 * A query is admitted only if its worst case (check + answer) fits the
 * dataset's filter on top of what the batch already spent; the first query
 * that does not fit ends the batch.  A batch is one ledger row whose event
 * composes what was actually run (checks, answers).  Running the GNMax answer
 * only when the public outcome of the check says so is an adaptive choice of
 * the next mechanism, which the ledger's privacy filters allow.
 *
 * Noise.  Vote counts are integers, so the noise is exact discrete Gaussian
 * (Canonne, Kamath, Steinke 2020, Algorithm 3; mech_sample_discrete_gaussian)
 * and discrete Laplace for LNMax (CKS Algorithm 2).  The discrete Gaussian
 * N_Z(0, s^2) added to an integer vector of L2 sensitivity D satisfies the
 * same (D^2 / (2 s^2))-zCDP, hence RDP alpha D^2 / (2 s^2), as the continuous
 * Gaussian (CKS 2020, Theorem 4 / Proposition 5 and the multivariate
 * Theorem 14, which need only integer-valued sensitivity); the label is a
 * post-processing of the noisy counts.  So `gnmax` (D^2 = 2) and
 * `pate_threshold` (D = 1) events price these releases soundly.  The events
 * name the sigma the sampler really uses (mech_discrete_gaussian_sigma, the
 * requested sigma rounded up to 24 significant bits and a multiple of 2^-20:
 * 2.3e-5 relative at sigma 0.005).  Ties between noisy
 * maxima are broken uniformly at random.  Threshold checks compare integers:
 *  - Confident-GNMax: max_j n_j + Z >= T  <=>  max_j n_j - ceil(T) + Z >= 0;
 *  - Interactive-GNMax: max_j (n_j - M p_j) + Z >= T  <=>
 *    max_j (n_j + floor(-M p_j - T)) + Z >= 0, the floors computed from the
 *    student's public probabilities only;
 * each statistic is an integer of sensitivity 1.
 *
 * The data-dependent analysis (tracked privately per session, at its
 * orders) is that of the 2018 paper: Proposition 7's bound on q and Theorem
 * 6 for each GNMax answer, the data-dependent cost of each threshold check
 * (accountant/acct_pate.c).  Caveat: Proposition 7 bounds q for continuous
 * Gaussian noise.  With discrete Gaussian noise and random tie-breaking a
 * pairwise comparison at margin 0 fails with probability exactly 1/2, as in
 * the continuous case, and at margin g the discrete tail is slightly
 * heavier than the continuous one (1.0003 times at sigma 40 and g 200, 1.2
 * times at sigma 1 and g 3: docs/pate.md); the released data-dependent
 * figure inherits this approximation.  The ledger never depends on it.
 *
 * The release (POST .../release) publishes the data-dependent RDP at one
 * order lambda by the GNSS mechanism of Appendix B.5: f(D) + SS_beta(D)
 * N(0, sigma_r^2), where f sums, over the answered queries, the RDP bound of
 * acct_pate_gnmax_rdp_ss (Theorem 6 below q0, lambda / sigma^2 above), plus
 * the threshold checks at their data-independent lambda / (2 sigma1^2) (no
 * local-sensitivity bound for the threshold's data-dependent cost exists in
 * accountant/, so it is released at its upper bound, which has sensitivity 0);
 * the local sensitivity of f at distance d is at most the sum over queries of
 * each query's two-sided bound (acct_pate_ls_bound; not the one-way walk of
 * Algorithms 3-5, which is not smooth for small sigma or high orders), and
 * SS_beta = max_d e^{-beta d} LS(d).  The release is (lambda, eps_r)-RDP with
 * eps_r of Theorem 23 for every 1 < lambda < 1/(2 beta); it is charged as a
 * `pate_gnss` event {beta + 2^-22, sigma} (release_event): rdp ledgers
 * compose its curve, a basic ledger converts it at the request's delta, and
 * zcdp ledgers refuse it (422: no zCDP bound).
 *
 * Idempotent replay.  A batch's answer (its labels, and for a batch cut
 * short by the budget its 409 body with the labels answered) is stored with
 * the charge and replayed byte for byte for the same Idempotency-Key: the
 * same labels, never resampled, never charged twice.  The unanswered tail of
 * a 409 batch must be sent again as a new request (a new key).  A batch of
 * which nothing fits is not charged and not stored.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "mech.h"
#include "api_internal.h"
#include "json.h"
#include "api_mech_routes.h"
#include "api_pate_session.h"

/* The GNSS release's pricing slack and sigma range (mech_pate.c). */
#define GNSS_BETA_SLACK MECH_PATE_GNSS_BETA_SLACK
#define GNSS_MIN_SIGMA MECH_PATE_GNSS_MIN_SIGMA
#define GNSS_MAX_SIGMA MECH_PATE_GNSS_MAX_SIGMA

#define PROB_SUM_TOLERANCE 1e-6

/* The filter's orders (acct_renyi_filter.c) are a sensible default. */
static const double default_orders[] = {
	1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 32, 48, 64, 128, 256,
};

/* A session: its stored row (ids, counts, times; the row's config text is
 * not kept) and that configuration read back. */
struct pate_session {
	srv_pate_row row;
	mech_pate_cfg cfg;
	json_t *config; /* normalised creation request */
};

static void session_clear(struct pate_session *s)
{
	json_decref(s->config);
	s->config = NULL;
}

/* ---- small helpers --------------------------------------------------------- */

/* 409 when nothing fits (or the dataset is archived): nothing was charged.
 * `extra` (stolen, may be NULL) is merged into the body. */
static void reply_nothing_fits(srv_response *res, const srv_dataset *ds, const char *detail,
			       json_t *extra)
{
	json_t *budget = srv_dataset_budget_json(ds);

	if (!extra)
		extra = json_object();
	if (extra && budget) {
		json_object_set(extra, "remaining", json_object_get(budget, "remaining"));
		json_object_set_new(extra, "budget", budget);
		budget = NULL;
	}
	json_decref(budget);
	if (ds->is_public) {
		json_decref(extra);
		srv_reply_public(res);
	} else if (ds->archived)
		srv_problem(res, 409, NULL, "the dataset is archived and accepts no new charges", NULL,
			    extra);
	else
		srv_problem(res, 409, "Budget exhausted", detail, NULL, extra);
}

static void reply_body(srv_response *res, int status, char *body, const char *content_type)
{
	res->status = status;
	res->content_type = content_type;
	res->body = body;
	res->len = strlen(body);
}

static int parse_real_array_text(const char *text, double *v, size_t n)
{
	json_t *a = json_loads(text ? text : "", 0, NULL);
	int rc = -1;

	if (json_is_array(a) && json_array_size(a) == n) {
		rc = 0;
		for (size_t i = 0; i < n; i++) {
			json_t *x = json_array_get(a, i);

			if (!json_is_number(x)) {
				rc = -1;
				break;
			}
			v[i] = json_number_value(x);
		}
	}
	json_decref(a);
	return rc;
}

/* ---- configuration --------------------------------------------------------- */

/*
 * Checks the body's keys, reads the aggregator into c->agg and checks that
 * the aggregator's parameters, and only those, are present.
 */
static int config_aggregator(const json_t *body, mech_pate_cfg *c, acct_error *err)
{
	static const char *const keys[] = {"aggregator", "num_teachers", "num_classes", "sigma1",
					   "sigma2", "threshold", "gamma", "student_confidence",
					   "orders", "delta", NULL};
	/* Which parameters each aggregator takes (1 = required, 2 = optional). */
	static const struct { const char *key; unsigned char use[MECH_PATE_AGG_COUNT]; } params[] = {
		{"sigma1", {0, 0, 1, 1}},
		{"sigma2", {0, 1, 1, 1}},
		{"threshold", {0, 0, 1, 1}},
		{"gamma", {1, 0, 0, 0}},
		{"student_confidence", {0, 0, 0, 2}},
	};
	const char *agg = NULL;
	int rc;

	if (!json_is_object(body))
		return acct_error_set(err, ACCT_EINVAL, "", "the body must be a JSON object");
	if ((rc = srv_json_only_keys(body, "", keys, err)) < 0 ||
	    (rc = srv_json_string(body, "", "aggregator", SRV_REQUIRED, 32, &agg, err)) < 0)
		return rc;
	if (mech_pate_agg_from_name(agg, &c->agg) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/aggregator",
				      "'aggregator' must be \"lnmax\", \"gnmax\", \"confident_gnmax\" or \"interactive_gnmax\"");
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		bool present = json_object_get(body, params[i].key) != NULL;
		char ptr[64];

		snprintf(ptr, sizeof(ptr), "/%s", params[i].key);
		if (params[i].use[c->agg] == 1 && !present)
			return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' is required by %s", params[i].key,
					      mech_pate_agg_name(c->agg));
		if (params[i].use[c->agg] == 0 && present)
			return acct_error_set(err, ACCT_EINVAL, ptr, "%s takes no '%s'", mech_pate_agg_name(c->agg),
					      params[i].key);
	}
	return 0;
}

/* Reads 'orders' into c->orders, or the default orders when absent. */
static int config_orders(const json_t *body, mech_pate_cfg *c, acct_error *err)
{
	const json_t *orders = json_object_get(body, "orders");
	size_t n;
	int rc;

	if (!orders) {
		c->n_orders = sizeof(default_orders) / sizeof(default_orders[0]);
		memcpy(c->orders, default_orders, sizeof(default_orders));
		return 0;
	}
	n = json_array_size(orders);
	if (!json_is_array(orders) || n < 1 || n > DPG_MAX_PATE_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/orders",
				      "'orders' must be an array of 1 to %d orders", DPG_MAX_PATE_ORDERS);
	for (size_t i = 0; i < n; i++) {
		char ptr[32];

		if ((rc = srv_json_array_real(orders, "/orders", i, 0, 1, DPG_MAX_RDP_ORDER,
					      false, &c->orders[i], err)) < 0)
			return rc;
		snprintf(ptr, sizeof(ptr), "/orders/%zu", i);
		if (!(c->orders[i] > 1))
			return acct_error_set(err, ACCT_EINVAL, ptr, "order %zu must be above 1", i);
	}
	c->n_orders = n;
	return 0;
}

/* The normalised JSON copy of a checked configuration (new reference), or
 * NULL when out of memory. */
static json_t *config_json(const mech_pate_cfg *c)
{
	json_t *norm;

	norm = json_pack("{s:s, s:I, s:I, s:o}", "aggregator", mech_pate_agg_name(c->agg), "num_teachers",
			 (json_int_t)c->num_teachers, "num_classes", (json_int_t)c->num_classes,
			 "orders", srv_json_real_array(c->orders, c->n_orders));
	if (!norm)
		return NULL;
	if (c->agg != MECH_PATE_LNMAX && c->agg != MECH_PATE_GNMAX) {
		json_object_set_new(norm, "sigma1", json_real(c->sigma1));
		json_object_set_new(norm, "threshold", json_real(c->threshold));
	}
	if (c->agg != MECH_PATE_LNMAX)
		json_object_set_new(norm, "sigma2", json_real(c->sigma2));
	if (c->agg == MECH_PATE_LNMAX)
		json_object_set_new(norm, "gamma", json_real(c->gamma));
	if (isfinite(c->student_confidence))
		json_object_set_new(norm, "student_confidence", json_real(c->student_confidence));
	if (c->delta_share > 0)
		json_object_set_new(norm, "delta", json_real(c->delta_share));
	return norm;
}

/*
 * Reads and checks a session configuration (the creation body, or the
 * stored normalised config).  On success fills *cfg and, when ret_norm is
 * not NULL, a normalised JSON copy (new reference).
 */
static int parse_config(const json_t *body, mech_pate_cfg *cfg, json_t **ret_norm,
			acct_error *err)
{
	mech_pate_cfg c;
	json_t *norm = NULL;
	int rc;

	memset(&c, 0, sizeof(c));
	c.student_confidence = NAN;
	rc = config_aggregator(body, &c, err);
	if (rc < 0)
		return rc;
	if ((rc = srv_json_int(body, "", "num_teachers", SRV_REQUIRED, 1, DPG_MAX_TEACHERS,
			       &c.num_teachers, err)) < 0 ||
	    (rc = srv_json_int(body, "", "num_classes", SRV_REQUIRED, 2, DPG_MAX_VOTE_CLASSES,
			       &c.num_classes, err)) < 0)
		return rc;
	/* The exact sampler's range; sigma <= 0 falls below it (400). */
	if ((rc = srv_json_real(body, "", "sigma1", 0, DPG_MECH_DGAUSS_MIN_SIGMA,
				DPG_MECH_DGAUSS_MAX_SIGMA, &c.sigma1, err)) < 0 ||
	    (rc = srv_json_real(body, "", "sigma2", 0, DPG_MECH_DGAUSS_MIN_SIGMA,
				DPG_MECH_DGAUSS_MAX_SIGMA, &c.sigma2, err)) < 0 ||
	    (rc = srv_json_real(body, "", "threshold", 0, 0, (double)c.num_teachers, &c.threshold,
				err)) < 0 ||
	    (rc = srv_json_real(body, "", "gamma", 0, 1.0 / DPG_MECH_DLAP_MAX_SCALE,
				1.0 / DPG_MECH_DLAP_MIN_SCALE, &c.gamma, err)) < 0 ||
	    (rc = srv_json_real(body, "", "student_confidence", 0, 0, 1, &c.student_confidence,
				err)) < 0 ||
	    (rc = srv_json_real(body, "", "delta", 0, 0, 1, &c.delta_share, err)) < 0)
		return rc;
	rc = mech_pate_cfg_resolve(&c, err);
	if (rc < 0)
		return rc;
	rc = config_orders(body, &c, err);
	if (rc < 0)
		return rc;
	if (ret_norm) {
		norm = config_json(&c);
		if (!norm)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		*ret_norm = norm;
	}
	*cfg = c;
	return 0;
}

/* The per-query events of a session (NULL where the aggregator has none). */
struct query_events {
	acct_event *check;   /* pate_threshold {sigma1 used} */
	acct_event *answer;  /* gnmax {sigma2 used} or epsilon_delta {2 gamma, 0} */
	acct_cost check_cost, answer_cost;
};

static void query_events_clear(struct query_events *qe)
{
	acct_event_free(qe->check);
	acct_event_free(qe->answer);
	memset(qe, 0, sizeof(*qe));
}

/* Makes and prices the per-query events on the dataset's filter; ACCT_E*
 * (422 when the ledger cannot price them). */
static int query_events_init(struct query_events *qe, const mech_pate_cfg *c,
			     const srv_dataset *ds, acct_error *err)
{
	acct_filter f;
	int rc;

	memset(qe, 0, sizeof(*qe));
	if ((rc = srv_dataset_filter(ds, &f, err)) < 0)
		return rc;
	if (c->agg == MECH_PATE_CONFIDENT || c->agg == MECH_PATE_INTERACTIVE) {
		qe->check = acct_event_new(ACCT_EV_PATE_THRESHOLD);
		if (!qe->check)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		qe->check->u.pate_threshold.sigma = c->sigma1_used;
		if ((rc = acct_event_validate_at(qe->check, ds->neighbor, "/sigma1", err)) < 0 ||
		    (rc = acct_filter_price(&f, qe->check, c->delta_share, &qe->check_cost, err)) < 0)
			return rc;
	}
	if (c->agg == MECH_PATE_LNMAX) {
		qe->answer = acct_event_epsilon_delta(2 * c->gamma, 0);
	} else {
		qe->answer = acct_event_new(ACCT_EV_GNMAX);
		if (qe->answer)
			qe->answer->u.gnmax.sigma = c->sigma2_used;
	}
	if (!qe->answer)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if ((rc = acct_event_validate_at(qe->answer, ds->neighbor, "/event", err)) < 0 ||
	    (rc = acct_filter_price(&f, qe->answer, c->delta_share, &qe->answer_cost, err)) < 0)
		return rc;
	return 0;
}

/* ---- session rows ---------------------------------------------------------- */

/* A session from its stored row; SRV_OK, or SRV_DB_ERROR when its stored
 * configuration does not read back. */
static int session_from_row(const srv_pate_row *row, struct pate_session *s)
{
	acct_error err;
	json_t *cfg = json_loads(row->config, 0, NULL);

	memset(s, 0, sizeof(*s));
	acct_error_init(&err);
	if (!cfg || parse_config(cfg, &s->cfg, NULL, &err) < 0) {
		json_decref(cfg);
		return SRV_DB_ERROR;
	}
	s->row = *row;
	s->row.config = NULL;
	s->config = cfg;
	return SRV_OK;
}

static int session_load(srv_db *db, const char *dataset_id, const char *sid,
			struct pate_session *s)
{
	srv_pate_row row;
	int rc = srv_store_pate_get(db, dataset_id, sid, &row);

	memset(s, 0, sizeof(*s));
	if (rc == SRV_OK)
		rc = session_from_row(&row, s);
	srv_pate_row_clear(&row);
	return rc;
}

/* The public view of a session: configuration, counts, the sampler's noise
 * and the data-independent event per query.  Never the data-dependent RDP. */
static json_t *session_json(const struct pate_session *s)
{
	const srv_pate_row *r = &s->row;
	json_t *o = json_pack("{s:s, s:s, s:O, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:s, s:s}", "id",
			      r->id, "dataset_id", r->dataset_id, "config", s->config, "counts",
			      "queries", (json_int_t)r->queries, "checks", (json_int_t)r->checks,
			      "teacher_answers", (json_int_t)r->teacher_answers, "student_answers",
			      (json_int_t)r->student_answers, "abstained", (json_int_t)r->abstained,
			      "releases", (json_int_t)r->releases, "created_at", r->created_at,
			      "updated_at", r->updated_at);
	json_t *noise = json_object();

	if (!o || !noise) {
		json_decref(o);
		json_decref(noise);
		return NULL;
	}
	if (s->cfg.agg == MECH_PATE_LNMAX) {
		json_object_set_new(noise, "laplace_scale", json_real((double)s->cfg.lap_num /
								      (double)s->cfg.lap_den));
		json_object_set_new(noise, "epsilon_per_answer", json_real(2 * s->cfg.gamma));
	} else {
		if (s->cfg.agg != MECH_PATE_GNMAX)
			json_object_set_new(noise, "sigma1", json_real(s->cfg.sigma1_used));
		json_object_set_new(noise, "sigma2", json_real(s->cfg.sigma2_used));
	}
	json_object_set_new(o, "noise_used", noise);
	return o;
}

/* ---- create, list, read --------------------------------------------------- */

int srv_pate_session_create(srv_request *req, srv_response *res)
{
	struct pate_session s;
	struct query_events qe;
	srv_dataset ds;
	acct_error err;
	char *cfg_text = NULL, *dd_text = NULL;
	double zeros[DPG_MAX_PATE_ORDERS] = {0};
	json_t *dd = NULL;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&qe, 0, sizeof(qe));
	acct_error_init(&err);
	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	if (ds.archived || ds.is_public) {
		reply_nothing_fits(res, &ds, NULL, NULL);
		return 0;
	}
	/* Refuse now what the ledger could never price (422), not at the first batch. */
	if (parse_config(req->body, &s.cfg, &s.config, &err) < 0 ||
	    query_events_init(&qe, &s.cfg, &ds, &err) < 0) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	if (srv_random_id("pate_", s.row.id, sizeof(s.row.id)) != SRV_OK) {
		srv_reply_store_error(res, SRV_NO_RANDOM, NULL);
		goto out;
	}
	srv_strcopy(s.row.dataset_id, sizeof(s.row.dataset_id), ds.id);
	srv_now_text(s.row.created_at);
	memcpy(s.row.updated_at, s.row.created_at, sizeof(s.row.updated_at));
	dd = srv_json_real_array(zeros, s.cfg.n_orders);
	cfg_text = srv_json_dump(s.config);
	dd_text = dd ? srv_json_dump(dd) : NULL;
	s.row.config = cfg_text;
	rc = cfg_text && dd_text ? srv_store_pate_create(req->db, &s.row, dd_text, req->who->key_id)
				 : SRV_DB_ERROR;
	s.row.config = NULL;
	if (rc != SRV_OK) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		goto out;
	}
	snprintf(res->location, sizeof(res->location), "/v1/datasets/%s/pate/sessions/%s", ds.id,
		 s.row.id);
	srv_json_reply(res, 201, session_json(&s));
out:
	query_events_clear(&qe);
	session_clear(&s);
	json_decref(dd);
	free(cfg_text);
	free(dd_text);
	return 0;
}

int srv_pate_session_get(srv_request *req, srv_response *res)
{
	struct pate_session s;
	int rc = session_load(req->db, req->params[0], req->params[1], &s);

	if (rc != SRV_OK) {
		srv_reply_store_error(res, rc, "no such dataset or PATE session");
		return 0;
	}
	srv_json_reply(res, 200, session_json(&s));
	session_clear(&s);
	return 0;
}

/* A listing's sessions as JSON, and the id of the last. */
struct session_page {
	json_t *out;
	char last[SRV_PATE_SESSION_ID_BYTES];
};

static int list_append(void *arg, const srv_pate_row *row)
{
	struct session_page *pg = arg;
	struct pate_session s;
	int rc = session_from_row(row, &s);

	if (rc == SRV_OK)
		rc = json_array_append_new(pg->out, session_json(&s)) == 0 ? SRV_OK : SRV_DB_ERROR;
	session_clear(&s);
	srv_strcopy(pg->last, sizeof(pg->last), row->id);
	return rc == SRV_OK ? 0 : -1;
}

/* Whether session `sid` is one of dataset `dataset_id`'s. */
static int session_found(srv_db *db, const char *dataset_id, const char *sid)
{
	srv_pate_row row;
	int rc = srv_store_pate_get(db, dataset_id, sid, &row);

	srv_pate_row_clear(&row);
	return rc;
}

/* A page of the dataset's sessions, oldest first (srv__id_page_or_reply:
 * `limit`, and `after`, the id of the last session of the previous page,
 * which answers `next` when more follow).  A session has no ledger row to
 * count by, so its id is the cursor. */
int srv_pate_session_list(srv_request *req, srv_response *res)
{
	struct session_page pg = {NULL, ""};
	const char *after;
	srv_dataset ds;
	int64_t limit;
	bool more;

	if (!srv__id_page_or_reply(req, res, &ds, session_found, "PATE sessions", &limit, &after))
		return 0;
	pg.out = json_array();
	if (!pg.out ||
	    srv_store_pate_list(req->db, ds.id, after, limit, list_append, &pg, &more) != SRV_OK) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		json_decref(pg.out);
		return 0;
	}
	srv_json_reply(res, 200, json_pack("{s:o, s:o}", "sessions", pg.out, "next",
					   more ? json_string(pg.last) : json_null()));
	return 0;
}

/* ---- queries ----------------------------------------------------------------- */

/* Each query's outcome (mech_pate_outcome) is drawn before the
 * transaction and revealed only if the query is admitted and the charge
 * commits. */
struct batch {
	const struct pate_session *s;
	const struct query_events *qe;
	size_t n;                 /* queries requested */
	size_t m;                 /* classes */
	double *votes;            /* n x m */
	mech_pate_outcome *out;    /* n */
	double *dd;               /* n x n_orders: each query's data-dependent RDP */
	/* planned */
	size_t k;                 /* queries admitted */
	int64_t n_checks, n_answers, n_student, n_abstain;
	acct_cost cost;
	acct_event *event;
	char *event_text;         /* its JSON text, for the ledger */
	srv_spend *sp;            /* its success_status is set by the planner */
};

/* Reads one query's votes (or counts its predictions) into v[0..m). */
static int parse_query(const json_t *q, size_t i, const mech_pate_cfg *c, double *v, double *p,
		       acct_error *err)
{
	static const char *const keys_plain[] = {"votes", "predictions", NULL};
	static const char *const keys_inter[] = {"votes", "predictions", "student_probabilities", NULL};
	char where[64], ptr[96];
	const json_t *votes, *preds;
	size_t m = (size_t)c->num_classes;
	double total = 0;
	int rc;

	snprintf(where, sizeof(where), "/queries/%zu", i);
	if (!json_is_object(q))
		return acct_error_set(err, ACCT_EINVAL, where, "query %zu must be an object", i);
	if ((rc = srv_json_only_keys(q, where, c->agg == MECH_PATE_INTERACTIVE ? keys_inter : keys_plain,
				     err)) < 0)
		return rc;
	votes = json_object_get(q, "votes");
	preds = json_object_get(q, "predictions");
	if (!votes == !preds)
		return acct_error_set(err, ACCT_EINVAL, where,
				      "query %zu needs exactly one of 'votes' and 'predictions'", i);
	if (votes) {
		snprintf(ptr, sizeof(ptr), "%s/votes", where);
		if (!json_is_array(votes) || json_array_size(votes) != m)
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "'votes' must be an array of %zu counts (one per class)", m);
		for (size_t j = 0; j < m; j++) {
			if ((rc = srv_json_array_real(votes, ptr, j, 0, 0, (double)c->num_teachers,
						      true, &v[j], err)) < 0)
				return rc;
			total += v[j];
		}
		if (total > (double)c->num_teachers)
			return acct_error_set(err, ACCT_EINVAL, ptr, "%.0f votes from %lld teachers", total,
					      (long long)c->num_teachers);
	} else {
		snprintf(ptr, sizeof(ptr), "%s/predictions", where);
		if (!json_is_array(preds) || json_array_size(preds) != (size_t)c->num_teachers)
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "'predictions' must be an array of %lld class indices (one per teacher)",
					      (long long)c->num_teachers);
		memset(v, 0, m * sizeof(*v));
		for (size_t t = 0; t < (size_t)c->num_teachers; t++) {
			double x;

			if ((rc = srv_json_array_real(preds, ptr, t, 0, 0, (double)(m - 1), true, &x,
						      err)) < 0)
				return rc;
			v[(size_t)x] += 1;
		}
	}
	if (c->agg == MECH_PATE_INTERACTIVE) {
		const json_t *pr = json_object_get(q, "student_probabilities");
		double sum = 0;

		snprintf(ptr, sizeof(ptr), "%s/student_probabilities", where);
		if (!pr)
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "interactive_gnmax needs the student's 'student_probabilities'");
		if (!json_is_array(pr) || json_array_size(pr) != m)
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "'student_probabilities' must be an array of %zu probabilities", m);
		for (size_t j = 0; j < m; j++) {
			if ((rc = srv_json_array_real(pr, ptr, j, 0, 0, 1, false, &p[j], err)) < 0)
				return rc;
			sum += p[j];
		}
		if (!(fabs(sum - 1) <= PROB_SUM_TOLERANCE))
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "'student_probabilities' must sum to 1 (they sum to %.17g)", sum);
	}
	return 0;
}

/* The batch's event: its k admitted queries' checks and answers,
 * composed, and its JSON text for the ledger.  0, or -1 (out of memory). */
static int batch_event(struct batch *b)
{
	const struct query_events *qe = b->qe;
	acct_event *parts[2] = {NULL, NULL};
	size_t np = 0;

	acct_event_free(b->event);
	b->event = NULL;
	free(b->event_text);
	b->event_text = NULL;
	if (b->n_checks > 0) {
		parts[np] = acct_event_self_composed(b->n_checks, acct_event_copy(qe->check));
		if (!parts[np++])
			goto fail;
	}
	if (b->n_answers > 0) {
		parts[np] = acct_event_self_composed(b->n_answers, acct_event_copy(qe->answer));
		if (!parts[np++])
			goto fail;
	}
	if (np == 1) {
		b->event = parts[0];
	} else {
		/* The parts are the event's from here, or freed with it. */
		b->event = acct_event_composed(parts, np);
		np = 0;
		if (!b->event)
			goto fail;
	}
	b->event_text = srv_event_text(b->event);
	return b->event_text ? 0 : -1;
fail:
	for (size_t i = 0; i < np; i++)
		acct_event_free(parts[i]);
	return -1;
}

/* Planner (srv_spend_plan_fn): admits queries in order while the worst
 * case of the next one fits on top of what the batch already spends. */
static int batch_plan(void *arg, const acct_filter *f, const acct_cost *committed,
		      const acct_cost **ret_cost, const char **ret_event_text)
{
	struct batch *b = arg;
	const struct query_events *qe = b->qe;
	acct_cost spent, worst, cand, total;

	acct_filter_zero(f, &spent);
	acct_filter_zero(f, &worst);
	if (qe->check)
		acct_cost_add_up(&worst, &qe->check_cost);
	acct_cost_add_up(&worst, &qe->answer_cost);
	b->k = 0;
	b->n_checks = b->n_answers = b->n_student = b->n_abstain = 0;
	for (size_t i = 0; i < b->n; i++) {
		const mech_pate_outcome *o = &b->out[i];

		cand = spent;
		acct_cost_add_up(&cand, &worst);
		total = *committed;
		acct_cost_add_up(&total, &cand);
		if (!acct_filter_within(f, &total))
			break;
		if (o->checked) {
			acct_cost_add_up(&spent, &qe->check_cost);
			b->n_checks++;
		}
		if (o->teacher_answer) {
			acct_cost_add_up(&spent, &qe->answer_cost);
			b->n_answers++;
		} else if (o->source == MECH_PATE_SRC_STUDENT) {
			b->n_student++;
		}
		if (o->label < 0)
			b->n_abstain++;
		b->k = i + 1;
	}
	if (b->k == 0)
		return 1;
	if (batch_event(b) < 0)
		return -1;
	b->cost = spent;
	/* Read by the store after the answer is built, and stored with it. */
	b->sp->success_status = b->k < b->n ? 409 : 201;
	*ret_cost = &b->cost;
	*ret_event_text = b->event_text;
	return 0;
}

/* Transaction hook: the session's counters, its private data-dependent RDP
 * and the answered histograms, in the charge's transaction. */
static int batch_txn(void *arg, srv_db *db, const srv_dataset *ds, int64_t charge_id,
		     const char *rid)
{
	struct batch *b = arg;
	const mech_pate_cfg *c = &b->s->cfg;
	srv_pate_counts add = {(int64_t)b->k, b->n_checks, b->n_answers, b->n_student, b->n_abstain};
	double dd[DPG_MAX_PATE_ORDERS];
	char now[32], *dd_text = NULL;
	int32_t *blob = NULL;
	json_t *a = NULL;
	int rc = -1;

	(void)ds;
	(void)rid;
	if (srv_store_pate_dd_get(db, b->s->row.id, &dd_text) != SRV_OK ||
	    parse_real_array_text(dd_text, dd, c->n_orders) < 0)
		goto out;
	free(dd_text);
	dd_text = NULL;
	for (size_t i = 0; i < b->k; i++)
		for (size_t o = 0; o < c->n_orders; o++)
			dd[o] += b->dd[i * c->n_orders + o];
	a = srv_json_real_array(dd, c->n_orders);
	dd_text = a ? srv_json_dump(a) : NULL;
	srv_now_text(now);
	if (!dd_text || srv_store_pate_add_batch(db, b->s->row.id, &add, dd_text, now) != SRV_OK)
		goto out;
	/* The histograms the smooth-sensitivity release needs (GNMax answers). */
	if (c->agg != MECH_PATE_LNMAX && b->n_answers > 0) {
		blob = malloc(b->m * sizeof(*blob));
		if (!blob)
			goto out;
		for (size_t i = 0; i < b->k; i++) {
			if (!b->out[i].teacher_answer)
				continue;
			for (size_t j = 0; j < b->m; j++)
				blob[j] = (int32_t)b->votes[i * b->m + j];
			if (srv_store_pate_add_answer(db, b->s->row.id, charge_id, blob, b->m) !=
			    SRV_OK)
				goto out;
		}
	}
	rc = 0;
out:
	json_decref(a);
	free(dd_text);
	free(blob);
	return rc;
}

/* Answer builder (batch_text): 201, or a 409 problem body naming
 * how many queries were answered when the budget ran out inside the batch. */
static json_t *batch_body(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	struct batch *b = arg;
	json_t *labels = json_array(), *sources = NULL, *o;

	(void)rid;
	if (b->s->cfg.agg == MECH_PATE_INTERACTIVE)
		sources = json_array();
	for (size_t i = 0; labels && i < b->k; i++) {
		const mech_pate_outcome *q = &b->out[i];

		json_array_append_new(labels, q->label < 0 ? json_null() : json_integer(q->label));
		if (sources)
			json_array_append_new(sources, q->source == MECH_PATE_SRC_TEACHERS ? json_string("teachers") :
						       q->source == MECH_PATE_SRC_STUDENT ? json_string("student") :
										  json_null());
	}
	o = json_pack("{s:s, s:I, s:I, s:I, s:b, s:o, s:I, s:I, s:I, s:o, s:I, s:o}", "session",
		      b->s->row.id, "requested", (json_int_t)b->n, "answered", (json_int_t)b->k,
		      "abstained", (json_int_t)b->n_abstain, "complete", b->k == b->n, "labels", labels,
		      "checks", (json_int_t)b->n_checks, "teacher_answers", (json_int_t)b->n_answers,
		      "student_answers", (json_int_t)b->n_student, "event", srv_event_to_json(b->event),
		      "charge_id", (json_int_t)charge_id, "budget", srv_dataset_budget_json(ds));
	if (o && sources)
		json_object_set_new(o, "sources", sources);
	else
		json_decref(sources);
	if (o && b->k < b->n) {
		/* Room for the text and two counts of up to 20 digits each. */
		char detail[192], type[64];

		snprintf(detail, sizeof(detail),
			 "the budget ran out inside the batch: the first %zu of %zu queries were answered "
			 "and charged; send the rest again as a new request", b->k, b->n);
		/* The type every other problem of this status has (srv_problem). */
		snprintf(type, sizeof(type), "https://dpgate.dev/problems/%d", 409);
		json_object_set_new(o, "type", json_string(type));
		json_object_set_new(o, "title", json_string("Budget exhausted"));
		json_object_set_new(o, "status", json_integer(409));
		json_object_set_new(o, "detail", json_string(detail));
	}
	return o;
}

/* batch_body's answer as the store keeps it (srv_spend_text_fn). */
static char *batch_text(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	return srv_json_text(batch_body(arg, charge_id, rid, ds));
}

/* Sends a stored or fresh answer; a 409 (batch cut short) is problem+json. */
static void reply_stored(srv_response *res, int status, char *body)
{
	reply_body(res, status, body, status == 409 ? "application/problem+json" : "application/json");
}

/*
 * Starts the request's spend and answers a retry from storage before
 * anything else is checked (as the core spending routes do), so a replay
 * is the same bytes even after the session or the budget changed.  Returns
 * true when the request is answered.
 */
static bool try_replay(srv_request *req, srv_response *res, srv_spend *sp, uint8_t hash[32])
{
	srv_spend_from_request(sp, req, hash);
	return srv_spend_replayed(req, res, sp, reply_stored);
}

/*
 * The start both spending session routes share: a replay is answered first,
 * then the dataset and the session are read.  Returns true when the request
 * is answered (and nothing is left to free).
 */
static bool open_or_reply(srv_request *req, srv_response *res, srv_spend *sp, uint8_t hash[32],
			  srv_dataset *ds, struct pate_session *s)
{
	int rc;

	if (try_replay(req, res, sp, hash) || !srv__dataset_or_reply(req, res, ds))
		return true;
	rc = session_load(req->db, ds->id, req->params[1], s);
	if (rc == SRV_OK && !srv__may_change(req, s->row.actor))
		rc = SRV_FORBIDDEN;
	if (rc != SRV_OK) {
		session_clear(s);
		srv_reply_store_error(res, rc, "no such PATE session");
		return true;
	}
	return false;
}

/*
 * Reads the batch's note and queries into b (b->s set); the caller frees
 * b's arrays and *ret_probs (the student's probabilities, interactive
 * aggregator only) whether or not this succeeds.  On failure answers 400
 * or 500 and returns -1.
 */
static int batch_read(srv_request *req, srv_response *res, struct batch *b, double **ret_probs,
		      const char **ret_note)
{
	static const char *const keys[] = {"queries", "note", NULL};
	const mech_pate_cfg *c = &b->s->cfg;
	size_t m = (size_t)c->num_classes;
	double *probs = NULL;
	const json_t *qs;
	acct_error err;

	acct_error_init(&err);
	qs = json_object_get(req->body, "queries");
	if (srv_json_only_keys(req->body, "", keys, &err) < 0 ||
	    srv_json_string(req->body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, ret_note,
			    &err) < 0)
		goto bad;
	if (!json_is_array(qs) || json_array_size(qs) < 1 || json_array_size(qs) > DPG_MAX_PATE_BATCH) {
		acct_error_set(&err, ACCT_EINVAL, "/queries",
			       "'queries' must be an array of 1 to %d queries", DPG_MAX_PATE_BATCH);
		goto bad;
	}
	b->n = json_array_size(qs);
	b->m = m;
	/* Queries given as predictions (one class index per teacher) are small
	 * in the body but take m vote counts each here: n * m is bounded by
	 * its own limit, before anything is allocated. */
	if (b->n * m > DPG_MAX_PATE_BATCH_CELLS) {
		acct_error_set(&err, ACCT_EINVAL, "/queries",
			       "a batch holds at most %u queries x classes; with %zu classes, send "
			       "at most %zu queries at once",
			       DPG_MAX_PATE_BATCH_CELLS, m, (size_t)DPG_MAX_PATE_BATCH_CELLS / m);
		goto bad;
	}
	b->votes = malloc(b->n * m * sizeof(*b->votes));
	b->out = calloc(b->n, sizeof(*b->out));
	b->dd = malloc(b->n * c->n_orders * sizeof(*b->dd));
	if (c->agg == MECH_PATE_INTERACTIVE) {
		probs = malloc(b->n * m * sizeof(*probs));
		*ret_probs = probs;
	}
	if (!b->votes || !b->out || !b->dd || (c->agg == MECH_PATE_INTERACTIVE && !probs)) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		return -1;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (parse_query(json_array_get(qs, i), i, c, &b->votes[i * m],
				probs ? &probs[i * m] : NULL, &err) < 0)
			goto bad;
	}
	return 0;
bad:
	srv_problem_from_error(res, &err);
	return -1;
}

/*
 * Runs a filled spend and answers it: the stored reply (also a replay),
 * 409 with conflict_detail and conflict_extra (stolen, may be NULL) when
 * it does not fit, or the store's error.
 */
struct nothing_fits {
	const char *detail;
	json_t *extra; /* stolen by the 409 */
};

static void reply_conflict(srv_response *res, const srv_dataset *ds, void *arg)
{
	struct nothing_fits *nf = arg;

	reply_nothing_fits(res, ds, nf->detail, nf->extra);
	nf->extra = NULL;
}

static void spend_and_reply(srv_request *req, srv_response *res, const srv_spend *sp,
			    srv_dataset *ds, const char *conflict_detail, json_t *conflict_extra)
{
	struct nothing_fits nf = {conflict_detail, conflict_extra};

	srv_spend_and_reply(req, res, sp, ds,
			    &(srv_spend_replies){.stored = reply_stored,
						 .conflict = reply_conflict,
						 .what = "no such dataset",
						 .arg = &nf});
	json_decref(nf.extra);
}

/*
 * Charges the batch in one store transaction (batch_plan, batch_txn and
 * batch_body run inside srv_store_spend) and answers: the stored reply,
 * 409 when not even the first query fits, or the store's error.
 */
static void batch_spend(srv_request *req, srv_response *res, srv_spend *sp, struct batch *b,
			srv_dataset *ds, const char *note)
{
	b->sp = sp;
	sp->kind = SRV_SPEND_CHARGE;
	sp->dataset_id = ds->id;
	sp->plan_fn = batch_plan;
	sp->txn_fn = batch_txn;
	sp->text_fn = batch_text;
	sp->body_arg = b;
	sp->note = note;
	spend_and_reply(req, res, sp, ds,
			"not even the first query fits the dataset's remaining privacy budget; "
			"nothing was answered or charged",
			json_pack("{s:I, s:I}", "requested", (json_int_t)b->n, "answered",
				  (json_int_t)0));
}

int srv_pate_session_queries(srv_request *req, srv_response *res)
{
	uint8_t hash[32];
	struct pate_session s;
	struct query_events qe;
	struct batch b;
	srv_dataset ds;
	acct_error err;
	srv_spend sp;
	mech_rng *rng = NULL;
	const char *note = NULL;
	double *probs = NULL;
	size_t m;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&qe, 0, sizeof(qe));
	memset(&b, 0, sizeof(b));
	acct_error_init(&err);
	if (open_or_reply(req, res, &sp, hash, &ds, &s))
		return 0;
	m = (size_t)s.cfg.num_classes;
	b.s = &s;
	b.qe = &qe;
	if (batch_read(req, res, &b, &probs, &note) < 0)
		goto out;
	if (ds.archived || ds.is_public) {
		reply_nothing_fits(res, &ds, NULL, NULL);
		goto out;
	}
	if ((rc = query_events_init(&qe, &s.cfg, &ds, &err)) < 0)
		goto bad;
	/* Noise for every query, before the transaction: none of it is revealed
	 * unless its query is admitted and the charge commits. */
	rng = srv_release_rng(res);
	if (!rng)
		goto out;
	for (size_t i = 0; i < b.n; i++) {
		if ((rc = mech_pate_run_query(rng, &s.cfg, &b.votes[i * m], probs ? &probs[i * m] : NULL, &b.out[i],
				    &b.dd[i * s.cfg.n_orders], &err)) < 0)
			goto bad;
	}
	batch_spend(req, res, &sp, &b, &ds, note);
	goto out;
bad:
	srv_problem_from_error(res, &err);
out:
	mech_rng_free(rng);
	acct_event_free(b.event);
	free(b.event_text);
	free(b.votes);
	free(b.out);
	free(b.dd);
	free(probs);
	query_events_clear(&qe);
	session_clear(&s);
	return 0;
}

/* ---- release ----------------------------------------------------------------- */

struct release {
	const struct pate_session *s;
	double beta, sigma, order, delta;
	int64_t answers, checks;
	double rdp_noisy, rdp_release, rdp_independent;
	acct_event *event;
};

static int release_txn(void *arg, srv_db *db, const srv_dataset *ds, int64_t charge_id,
		       const char *rid)
{
	struct release *r = arg;
	char now[32];

	(void)ds;
	(void)charge_id;
	(void)rid;
	srv_now_text(now);
	return srv_store_pate_add_release(db, r->s->row.id, now) == SRV_OK ? 0 : -1;
}

/* epsilon at delta of an RDP value at one order (CKS 2020, Prop. 12). */
static double epsilon_at(double order, double rdp, double delta)
{
	return acct_rdp_to_epsilon(&order, &rdp, 1, delta, NULL);
}

static json_t *release_body(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	struct release *r = arg;
	double rdp = fmax(r->rdp_noisy, 0.0);

	(void)rid;
	return json_pack("{s:s, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:o, s:I, s:o}",
			 "session", r->s->row.id, "order", r->order, "beta", r->beta, "sigma", r->sigma,
			 "delta", r->delta, "answers_covered", (json_int_t)r->answers,
			 "checks_covered", (json_int_t)r->checks, "rdp", rdp, "rdp_of_release",
			 r->rdp_release, "epsilon", epsilon_at(r->order, rdp + r->rdp_release, r->delta),
			 "rdp_data_independent", r->rdp_independent, "epsilon_data_independent",
			 epsilon_at(r->order, r->rdp_independent, r->delta), "event",
			 srv_event_to_json(r->event), "charge_id", (json_int_t)charge_id, "budget",
			 srv_dataset_budget_json(ds));
}

/* release_body's answer as the store keeps it (srv_spend_text_fn). */
static char *release_text(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	return srv_json_text(release_body(arg, charge_id, rid, ds));
}

/*
 * The event the release is charged: `pate_gnss` {beta, sigma}, whose RDP
 * curve is Theorem 23's at every order inside (1, 1/(2 beta)) and unbounded
 * beyond.  rdp ledgers compose the curve directly; a basic ledger converts it
 * at the request's delta share; zcdp ledgers refuse it (no zCDP bound).
 */
static int release_event(double beta, double sigma, double delta, acct_event **ret,
			 acct_error *err)
{
	acct_event *ev;

	(void)delta;
	if (beta > 0 && !(2 * 1.01 * beta < 1))
		return acct_error_set(err, ACCT_EINVAL, "/beta", "no RDP order below 1/(2 beta)");
	ev = acct_event_new(ACCT_EV_PATE_GNSS);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	ev->u.pate_gnss.beta = beta;
	ev->u.pate_gnss.sigma = sigma;
	*ret = ev;
	return 0;
}

/* Reads the session's counters into r, inside the caller's read
 * snapshot. */
static int release_counters(srv_db *db, struct release *r, acct_error *err)
{
	switch (srv_store_pate_counters(db, r->s->row.id, &r->checks, &r->answers)) {
	case SRV_OK:
		return 0;
	case SRV_NOT_FOUND:
		return acct_error_set(err, ACCT_EINTERNAL, "", "the session vanished");
	default:
		return acct_error_set(err, ACCT_EINTERNAL, "", "the store is unavailable");
	}
}

/* What the scans of the answered histograms add to: the first counts
 * them (mech_pate_release_count), the second adds them. */
struct answer_scan {
	mech_pate_release *acc;
	size_t m;
	double *v;
	acct_error *err;
	bool counting;
};

/* One stored answer, counted or added to the release's accumulator. */
static int scan_answer(void *arg, const int32_t *blob, size_t bytes)
{
	struct answer_scan *s = arg;

	if (!blob || bytes != s->m * sizeof(int32_t))
		return acct_error_set(s->err, ACCT_EINTERNAL, "", "a stored histogram is corrupt");
	for (size_t j = 0; j < s->m; j++)
		s->v[j] = (double)blob[j];
	return s->counting ? mech_pate_release_count(s->acc, s->v, s->err) :
			     mech_pate_release_add(s->acc, s->v, s->err);
}

/* Both scans, in the caller's read transaction: the first finds how many
 * distances the smooth sensitivity at r->beta needs, which at many
 * teachers is far fewer than num_teachers + 1 (docs/pate.md). */
static int scan_answers(srv_db *db, const struct release *r, struct answer_scan *scan)
{
	int rc = 0;

	for (int pass = 0; rc == 0 && pass < 2; pass++) {
		scan->counting = pass == 0;
		rc = srv_store_pate_each_answer(db, r->s->row.id, scan_answer, scan);
		if (rc == SRV_DB_ERROR)
			rc = acct_error_set(scan->err, ACCT_EINTERNAL, "", "the store is unavailable");
		if (rc == 0 && scan->counting)
			mech_pate_release_horizon(scan->acc, r->beta, DPG_MAX_PATE_RELEASE_WALK);
	}
	return rc;
}

/*
 * f(D) at `order`, its smooth sensitivity and the public bound on f (see
 * the top of the file; mech_pate.c computes them), from the answered
 * histograms as of one snapshot.
 */
static int release_compute(srv_db *db, struct release *r, mech_pate_release_figures *ret,
			   acct_error *err)
{
	const mech_pate_cfg *c = &r->s->cfg;
	struct answer_scan scan = {NULL, (size_t)c->num_classes, NULL, err, false};
	size_t M = (size_t)c->num_teachers;
	int rc = 0;

	/* One read transaction: the counters and the rows agree. */
	if (srv_store_read_begin(db) != SRV_OK)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the store is unavailable");
	rc = release_counters(db, r, err);
	if (rc < 0)
		goto out;
	if ((double)r->answers * (double)M > (double)DPG_MAX_PATE_RELEASE_WORK) {
		rc = acct_error_set(err, ACCT_EUNSUPPORTED, "",
				    "%lld answers from %zu teachers exceed what one release analyses (%lld)",
				    (long long)r->answers, M, (long long)DPG_MAX_PATE_RELEASE_WORK);
		goto out;
	}
	scan.v = malloc(scan.m * sizeof(*scan.v));
	if (!scan.v) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if ((rc = mech_pate_release_new(c, r->order, &scan.acc, err)) < 0 ||
	    (rc = scan_answers(db, r, &scan)) < 0)
		goto out;
	mech_pate_release_figures_get(scan.acc, r->checks, r->beta, ret);
	r->rdp_independent = ret->bound;
	rc = 0;
out:
	srv_store_read_end(db);
	mech_pate_release_free(scan.acc);
	free(scan.v);
	return rc;
}

/* Reads the release request's parameters into r and *ret_note, and the
 * RDP of the release itself at r->order into r->rdp_release. */
static int release_read(const json_t *body, struct release *r, const char **ret_note,
			acct_error *err)
{
	static const char *const keys[] = {"beta", "sigma", "order", "delta", "note", NULL};
	int rc;

	if ((rc = srv_json_only_keys(body, "", keys, err)) < 0 ||
	    (rc = srv_json_real(body, "", "beta", SRV_REQUIRED | SRV_HI_OPEN, 0, 0.5, &r->beta,
				err)) < 0 ||
	    (rc = srv_json_real(body, "", "sigma", SRV_REQUIRED, GNSS_MIN_SIGMA, GNSS_MAX_SIGMA,
				&r->sigma, err)) < 0 ||
	    (rc = srv_json_real(body, "", "order", SRV_REQUIRED | SRV_LO_OPEN, 1,
				DPG_MAX_RDP_ORDER, &r->order, err)) < 0 ||
	    (rc = srv_json_real(body, "", "delta", SRV_REQUIRED | SRV_LO_OPEN | SRV_HI_OPEN, 0, 1,
				&r->delta, err)) < 0 ||
	    (rc = srv_json_string(body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, ret_note,
				  err)) < 0)
		return rc;
	/* Theorem 23 at the beta priced, beta + the sampler's slack: the
	 * bound stated is the one on the beta sent. */
	if (!(2 * r->order * (r->beta + GNSS_BETA_SLACK) < 1))
		return acct_error_set(err, ACCT_EINVAL, "/beta",
				      "beta must be below %.17g: Theorem 23 needs 2 order (beta + "
				      "2^-22) < 1, 2^-22 being the release's rounding slack",
				      0.5 / r->order - GNSS_BETA_SLACK);
	return acct_pate_gnss_rdp(r->beta + GNSS_BETA_SLACK, r->sigma, r->order, &r->rdp_release,
				  err);
}

/*
 * Charges the release in one store transaction (release_txn and
 * release_body run inside srv_store_spend) and answers: the stored reply,
 * 409 when it does not fit, or the store's error.
 */
static void release_spend(srv_request *req, srv_response *res, srv_spend *sp, struct release *r,
			  srv_dataset *ds, const acct_cost *cost, const char *note)
{
	sp->kind = SRV_SPEND_CHARGE;
	sp->dataset_id = ds->id;
	sp->event_text = srv_event_text(r->event);
	sp->cost = cost;
	sp->txn_fn = release_txn;
	sp->text_fn = release_text;
	sp->body_arg = r;
	sp->note = note;
	if (!sp->event_text) {
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return;
	}
	spend_and_reply(req, res, sp, ds,
			"the release does not fit the dataset's remaining privacy budget; "
			"nothing was released or charged",
			NULL);
	free((char *)sp->event_text);
	sp->event_text = NULL;
}

int srv_pate_session_release(srv_request *req, srv_response *res)
{
	uint8_t hash[32];
	struct pate_session s;
	struct release r;
	srv_dataset ds;
	acct_error err;
	acct_filter f;
	acct_cost cost;
	srv_spend sp;
	mech_rng *rng = NULL;
	const char *note = NULL;
	mech_pate_release_figures fig;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&r, 0, sizeof(r));
	acct_error_init(&err);
	if (open_or_reply(req, res, &sp, hash, &ds, &s))
		return 0;
	r.s = &s;
	if ((rc = release_read(req->body, &r, &note, &err)) < 0)
		goto bad;
	if (s.cfg.agg == MECH_PATE_LNMAX) {
		acct_error_set(&err, ACCT_EUNSUPPORTED, "",
			       "an lnmax session is charged its exact pure epsilon: there is no "
			       "data-dependent figure to release");
		goto bad;
	}
	if (ds.archived || ds.is_public) {
		reply_nothing_fits(res, &ds, NULL, NULL);
		goto out;
	}
	/* What the release costs, priced before any private computation. */
	if ((rc = release_event(r.beta + GNSS_BETA_SLACK, r.sigma, r.delta, &r.event, &err)) < 0 ||
	    (rc = srv_dataset_filter(&ds, &f, &err)) < 0 ||
	    (rc = acct_filter_price(&f, r.event, r.delta, &cost, &err)) < 0)
		goto bad;
	if ((rc = release_compute(req->db, &r, &fig, &err)) < 0)
		goto bad;
	/* From here on only the value depends on the data
	 * (mech_pate_release_draw). */
	rng = srv_release_rng(res);
	if (!rng)
		goto out;
	if (mech_pate_release_draw(rng, &fig, r.sigma, &r.rdp_noisy, &err) < 0)
		goto bad;
	release_spend(req, res, &sp, &r, &ds, &cost, note);
	goto out;
bad:
	srv_problem_from_error(res, &err);
out:
	mech_rng_free(rng);
	acct_event_free(r.event);
	session_clear(&s);
	return 0;
}
