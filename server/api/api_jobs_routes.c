/*
 * api_jobs_routes.c: the job routes: submit (price and reserve), list, get
 * (with progress and epsilon so far) and cancel; the model routes are
 * api_predict.c's.  The budget rule they apply is in api_jobs.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "api_jobs.h"
#include "api_jobs_internal.h"
#include "json.h"

#define JOB_ID_PREFIX "job_"

/* A job being submitted: its row (reservation_id filled in the
 * transaction) and what its answer shows. */
struct submit_arg {
	srv_job_new job;
	const acct_event *event;
	const acct_cost *cost;
	bool queue_full; /* submit_txn found the shared queue full */
};

/* What an ensemble job's answers say of its privacy unit (docs/ensemble.md). */
#define ENSEMBLE_NEIGHBOURS                                                               \
	"whole party: neighbouring tables differ in every row of one party (the event is " \
	"pure epsilon-DP for that relation, which covers adding or removing any one row)"

/* What an slmc job's answers say of its privacy unit (docs/slmc.md,
 * Theorems 1 and 2). */
#define SLMC_NEIGHBOURS                                                                   \
	"one row: neighbouring tables differ in one row under the dataset's relation (a "  \
	"replaced row may move between parties: Delta covers it); the event does not use " \
	"the row count"

/* What a label_em job's answers say of its privacy unit (docs/label_em.md). */
#define LABEL_EM_NEIGHBOURS                                                                \
	"one label: neighbouring tables have the same public features and differ in one "  \
	"row's label (replace); the labels are read once, by the label exponential "       \
	"mechanism, whose event is the charge"

/* The privacy unit a trainer's answers state instead of the row count,
 * or NULL for one that states none (dpsgd, whose event takes the row count
 * as public, and pate, whose votes count teachers, not rows, and which
 * shows no row count either: it is private). */
static const char *job_neighbouring(const char *trainer)
{
	if (strcmp(trainer, "ensemble") == 0)
		return ENSEMBLE_NEIGHBOURS;
	if (strcmp(trainer, "slmc") == 0)
		return SLMC_NEIGHBOURS;
	if (strcmp(trainer, "label_em") == 0)
		return LABEL_EM_NEIGHBOURS;
	return NULL;
}

/* Adds to a job's answer `o` the row count its event takes as public
 * (DP-SGD's q = L / N) or the privacy unit it states instead. */
static void job_rows_json(json_t *o, const char *trainer, int64_t n_train)
{
	if (strcmp(trainer, "dpsgd") == 0)
		json_object_set_new(o, "public_row_count", json_integer(n_train));
	else if (job_neighbouring(trainer))
		json_object_set_new(o, "neighbouring", json_string(job_neighbouring(trainer)));
}

static int submit_txn(void *arg, srv_db *db, const srv_dataset *ds, int64_t charge_id,
		      const char *rid)
{
	struct submit_arg *a = arg;
	srv_job_new job = a->job;
	int64_t queued = 0;

	(void)ds;
	(void)charge_id;
	job.reservation_id = rid;
	/* On a shared database every server's worker claims from the
	 * database's one queue, so that queue is what is bounded: counted
	 * under SRV_JOB_QUEUE_LOCK (reserve_job), which the servers' submissions
	 * take one after the other until their COMMITs. */
	if (srv_db_shared(db)) {
		if (srv__job_count_queued(db, &queued) != SRV_OK)
			return -1;
		if (queued >= DPG_MAX_QUEUED_JOBS) {
			a->queue_full = true;
			return -1;
		}
	}
	return srv__job_insert(db, &job) == SRV_OK ? 0 : -1;
}

static json_t *submit_body(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	struct submit_arg *a = arg;
	acct_filter f;
	double eps = NAN;

	json_t *o;

	(void)charge_id;
	if (srv_dataset_filter(ds, &f, NULL) == 0)
		eps = acct_filter_epsilon(&f, a->cost);
	o = json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:f}, s:o}", "id", a->job.id, "state", "queued",
		      "trainer", a->job.trainer, "event", srv_event_to_json(a->event),
		      "reservation", "id", rid, "epsilon", eps, "budget",
		      srv_dataset_budget_json(ds));
	/* DP-SGD's event takes the row count as public (q = L / N); any
	 * other trainer does not use it, and its answers do not show it. */
	if (o)
		job_rows_json(o, a->job.trainer, a->job.n_train);
	return o;
}

/* submit_body's answer as the store keeps it (srv_spend_text_fn). */
static char *submit_text(void *arg, int64_t charge_id, const char *rid, const srv_dataset *ds)
{
	return srv_json_text(submit_body(arg, charge_id, rid, ds));
}

/* The request's own fields: everything but the dataset's state. */
struct submit_req {
	const char *trainer;      /* "dpsgd", "ensemble", "slmc", "label_em" or "pate" */
	trn_dpsgd_params p;
	trn_ensemble_params ep;
	trn_slmc_params sp;       /* neighbor set from the dataset when priced */
	trn_label_em_params lp;
	trn_pate_params pp;
	const char *note;
	bool dry_run;
	double ledger_delta;
	char *data_link;          /* the link's version the checks read (malloc'ed) */
};

static bool is_ensemble(const struct submit_req *sr)
{
	return strcmp(sr->trainer, "ensemble") == 0;
}

static bool is_slmc(const struct submit_req *sr)
{
	return strcmp(sr->trainer, "slmc") == 0;
}

static bool is_label_em(const struct submit_req *sr)
{
	return strcmp(sr->trainer, "label_em") == 0;
}

static bool is_pate(const struct submit_req *sr)
{
	return strcmp(sr->trainer, "pate") == 0;
}

static int parse_submit(const json_t *body, struct submit_req *sr, acct_error *err)
{
	static const char *const keys[] = {"trainer", "params", "dry_run", "note", "ledger_delta",
					   NULL};
	static const char *const trainers[] = {"dpsgd", "ensemble", "slmc", "label_em", "pate", NULL};
	const char *trainer = NULL;
	int rc = srv_json_only_keys(body, "", keys, err);

	if (rc >= 0)
		rc = srv_json_string(body, "", "trainer", SRV_REQUIRED, 32, &trainer, err);
	for (const char *const *t = trainers; rc >= 0 && !sr->trainer && *t; t++)
		if (strcmp(trainer, *t) == 0)
			sr->trainer = *t;
	if (rc >= 0 && !sr->trainer)
		rc = acct_error_set(err, ACCT_EINVAL, "/trainer",
				    "'trainer' must be \"dpsgd\", \"ensemble\", \"slmc\", "
				    "\"label_em\" or \"pate\"");
	if (rc >= 0)
		rc = srv_json_bool(body, "", "dry_run", 0, &sr->dry_run, err);
	if (rc >= 0)
		rc = srv_json_string(body, "", "note", SRV_NULLABLE, DPG_MAX_NOTE_BYTES, &sr->note, err);
	if (rc >= 0)
		rc = srv_json_real(body, "", "ledger_delta", SRV_NULLABLE | SRV_LO_OPEN | SRV_HI_OPEN, 0,
				   1, &sr->ledger_delta, err);
	if (rc >= 0 && is_ensemble(sr))
		rc = srv__jobs_parse_ensemble(json_object_get(body, "params"), &sr->ep, err);
	else if (rc >= 0 && is_slmc(sr))
		rc = srv__jobs_parse_slmc(json_object_get(body, "params"), &sr->sp, err);
	else if (rc >= 0 && is_label_em(sr))
		rc = srv__jobs_parse_label_em(json_object_get(body, "params"), &sr->lp, err);
	else if (rc >= 0 && is_pate(sr))
		rc = srv__jobs_parse_pate(json_object_get(body, "params"), &sr->pp, err);
	else if (rc >= 0)
		rc = srv__jobs_parse_params(json_object_get(body, "params"), &sr->p, err);
	return rc;
}

/*
 * An slmc job's event, self_composed(K, gaussian(z)) with Delta for the
 * dataset's relation (docs/slmc.md, Theorem 2).  A target epsilon is met
 * at the dataset's delta (a basic ledger's: the request's ledger_delta)
 * under the accountant of its ledger (zcdp for a zcdp ledger, else rdp):
 * the event's own epsilon; an rdp ledger's charge adds its delta split.
 */
static int slmc_event(const srv_dataset *ds, const struct submit_req *sr, acct_event **ret_ev,
		      acct_error *err)
{
	trn_slmc_params p = sr->sp;
	acct_options opt;
	double delta = ds->accountant == ACCT_LEDGER_BASIC ? sr->ledger_delta : ds->budget_delta;

	memset(&opt, 0, sizeof(opt));
	opt.accountant = ds->accountant == ACCT_LEDGER_ZCDP ? ACCT_ZCDP : ACCT_RDP;
	p.neighbor = ds->neighbor;
	if (p.epsilon > 0.0 && !(delta > 0.0 && delta < 1.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED,
				      ds->accountant == ACCT_LEDGER_BASIC ? "/ledger_delta" :
									    "/params/epsilon",
				      "a target epsilon for Gaussian noise needs a delta in (0, 1)");
	return trn_slmc_event(&p, delta, &opt, ret_ev, NULL, err);
}

/*
 * The job's event and its price on the dataset's filter, from parameters
 * and the row count alone: no data read.  Its sampling probability
 * q = lot_size / N takes the row count N as public, as the moments
 * accountant does (Abadi et al. 2016, section 3.1), whatever the upload
 * declared: the event (N = lot_size / q) and the answers say so in
 * "public_row_count" and the ledger note.
 */
static int price_job(const srv_dataset *ds, const struct submit_req *sr, int64_t n_train,
		     acct_event **ret_ev, acct_filter *f, acct_cost *cost, acct_error *err)
{
	/* An ensemble's or slmc's event is built from its parameters alone,
	 * before any data is read (trn_ensemble_event, trn_slmc_event); a
	 * label_em job's is the label mechanism's for the column's n labels
	 * (trn_label_em_event). */
	int rc = is_ensemble(sr) ? trn_ensemble_event(&sr->ep, ret_ev, err) :
		 is_slmc(sr)	 ? slmc_event(ds, sr, ret_ev, err) :
		 is_label_em(sr) ? trn_label_em_event(&sr->lp, (uint64_t)n_train, ret_ev, err) :
		 /* A pate job reserves its worst case (jobs_pate.c). */
		 is_pate(sr)	 ? trn_pate_worst_event(&sr->pp, ret_ev, err) :
				   trn_dpsgd_event(&sr->p, (uint64_t)n_train, ret_ev, err);

	if (rc >= 0)
		rc = acct_event_validate_at(*ret_ev, ds->neighbor, "/params", err);
	if (rc >= 0)
		rc = srv_dataset_filter(ds, f, err);
	if (rc >= 0)
		rc = acct_filter_price(f, *ret_ev, sr->ledger_delta, cost, err);
	/* A basic ledger prices the job's event at the delta share the request
	 * names in "ledger_delta" (as a mechanism's does). */
	if (rc < 0)
		srv__name_ledger_delta(err);
	return rc;
}

/*
 * A job's "test_data": a public dataset with the private table's feature
 * and label columns, by name (as `schema_of` reads the table's schema);
 * evaluated on once the model is released.  A builtin link has no column
 * names to match.
 */
static int check_test_data(srv_request *req, const json_t *columns,
			   json_t *(*schema_of)(const json_t *, const json_t *), acct_error *err)
{
	const json_t *params = json_object_get(req->body, "params");
	const char *test = json_string_value(json_object_get(params, "test_data"));
	json_t *schema;
	int rc;

	if (!test)
		return 0;
	if (!columns)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/params/test_data",
				      "test_data is matched to a hosted table's columns by name; "
				      "this dataset links a builtin data set");
	schema = schema_of(params, columns);
	rc = schema ? srv__jobs_check_public(req->db, req->who, "/params/test_data", test, schema,
					     true, DPG_MAX_TRAIN_EXAMPLES, err) :
		      acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	json_decref(schema);
	return rc;
}

/* The party column of an ensemble or slmc job: a column of the table,
 * not the label of `schema` (the job's reading of the table), numeric for
 * integer parties and categorical for named ones. */
static int check_party_column(const json_t *params, const json_t *columns, const json_t *schema,
			      acct_error *err)
{
	const json_t *c, *pc = NULL;
	const char *label = json_string_value(json_object_get(schema, "label"));
	size_t i;
	bool numeric;

	json_array_foreach(columns, i, c)
		if (srv__jobs_is_party_column(params, c))
			pc = c;
	if (!pc)
		return acct_error_set(err, ACCT_EINVAL, "/params/party_column",
				      "the hosted table has no such column");
	if (label && strcmp(label, json_string_value(json_object_get(pc, "name"))) == 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/party_column",
				      "the party column cannot be the label");
	numeric = strcmp(json_string_value(json_object_get(pc, "kind")), "numeric") == 0;
	if (numeric != json_is_integer(json_object_get(params, "parties")))
		return acct_error_set(err, ACCT_EINVAL, "/params/parties",
				      "integer parties (codes 0..M-1) need a numeric party column, "
				      "a list of names a categorical one");
	return 0;
}

/*
 * The checks of an ensemble job before anything is reserved: the dataset's
 * neighbouring relation, the party column, the public auxiliary table (its
 * features by name) and the trainer's bounds on the shapes.  `n_train` is
 * the private table's row count when the upload declared it public, else
 * the most rows a table holds: a refusal that depended on a private count
 * would tell it for free.
 */
static int check_ensemble_data(srv_request *req, const srv_dataset *ds,
				    const trn_ensemble_params *ep, const json_t *columns,
				    size_t features, uint32_t classes, int64_t n_train,
				    acct_error *err)
{
	const json_t *params = json_object_get(req->body, "params");
	const char *aux = json_string_value(json_object_get(params, "auxiliary_data"));
	json_t *schema = NULL;
	int64_t n_aux = 0;
	int rc;

	/* Replacing one row may move it from one party to another: two
	 * parties change, and a party-level guarantee covers one. */
	if (ds->neighbor == ACCT_REPLACE)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
				      "an ensemble's guarantee is for neighbours that differ in one "
				      "party; under this dataset's replace-one-row relation a row "
				      "may change parties, which changes two");
	if (!columns)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
				      "an ensemble job trains on a hosted table with a party column");
	schema = srv__jobs_table_schema(params, columns);
	rc = schema ? check_party_column(params, columns, schema, err) :
		      acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (rc >= 0)
		rc = srv__jobs_check_public(req->db, req->who, "/params/auxiliary_data", aux, schema,
					    false, DPG_MAX_ENSEMBLE_AUX_ROWS, err);
	if (rc >= 0) {
		char *aux_columns = NULL;

		if (srv__data_link_rows(req->db, aux, &n_aux, &aux_columns) != SRV_OK)
			rc = acct_error_set(err, ACCT_EINTERNAL, "/params/auxiliary_data",
					    "cannot read the auxiliary table");
		free(aux_columns);
	}
	json_decref(schema);
	if (rc >= 0)
		rc = trn_ensemble_check_shape(ep, features, classes, (uint64_t)n_train,
					      (uint64_t)n_aux, err);
	return rc;
}

/*
 * The checks of an slmc job before anything is reserved: a hosted table
 * (its features every numeric column but the party column and a column
 * named "label"), the party column, the public auxiliary and test tables
 * (features by name) and the trainer's bounds on the shapes.
 */
static int check_slmc_data(srv_request *req, const trn_slmc_params *sp, const json_t *columns,
			   int64_t n_train, acct_error *err)
{
	const json_t *params = json_object_get(req->body, "params");
	const char *aux = json_string_value(json_object_get(params, "auxiliary_data"));
	json_t *schema;
	int rc;

	if (!columns)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
				      "an slmc job clusters the rows of a hosted table");
	schema = srv__jobs_clustering_schema(params, columns);
	if (!schema)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	rc = json_object_get(params, "party_column") ?
		     check_party_column(params, columns, schema, err) : 0;
	if (rc >= 0 && aux)
		rc = srv__jobs_check_public(req->db, req->who, "/params/auxiliary_data", aux, schema,
					    false, DPG_MAX_SLMC_AUX_ROWS, err);
	if (rc >= 0)
		rc = check_test_data(req, columns, srv__jobs_clustering_schema, err);
	if (rc >= 0)
		rc = trn_slmc_check_shape(sp, (uint64_t)n_train,
					  json_array_size(json_object_get(schema, "features")), err);
	json_decref(schema);
	return rc;
}

/*
 * A label_em job uses the table's features without noise: that is private
 * only for a dataset created label-private (schema/011).  On any other the
 * features are protected with the labels, and the job is refused (422).
 */
static int check_label_private(const srv_dataset *ds, acct_error *err)
{
	if (ds->label_private)
		return 0;
	/* Both texts fit ACCT_ERROR_TEXT_BYTES with a 64-byte unit. */
	if (strcmp(ds->privacy_unit, "label") == 0)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
				      "this dataset's unit 'label' predates label privacy, so it is "
				      "record-level: label_em uses the features without noise, which "
				      "only a dataset created with privacy_unit \"label\" allows");
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
			      "label_em uses the features without noise; this dataset's unit "
			      "'%.64s' is record-level, its features private, and the job would "
			      "break that guarantee (create it with privacy_unit \"label\")",
			      ds->privacy_unit);
}

/* The checks of a label_em job on its hosted table's shape: binary labels
 * (the mechanism and the paper's setting), a model the trainer takes. */
static int check_label_em_data(const trn_label_em_params *lp, const json_t *columns,
			       size_t features, uint32_t classes, acct_error *err)
{
	if (!columns)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
				      "a label_em job trains on a hosted table with a label column");
	if (classes != 2)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/params/classes",
				      "label_em learns binary labels only: the label exponential "
				      "mechanism and its analysis are binary, and a K-ary "
				      "generalisation would need its own event, which is not offered");
	return trn_label_em_check_shape(lp, features, classes, err);
}

/*
 * What a job may read of a hosted table (columns) beyond its rows' noisy
 * use.  Kinds the upload inferred from the rows are private (GET .../data
 * shows them to admins only), and a job's shape would tell them: its
 * features are the numeric columns, its classes' form the label's kind.
 * The events of dpsgd (q = lot_size / N) and label_em (one label release
 * per row) publish the row count, which is private unless the upload
 * declared it public.  Either is refused the same way whatever the rows
 * hold.
 */
static int check_declared_table(const json_t *columns, const srv_data_link *link,
				const char *trainer, acct_error *err)
{
	if (!columns)
		return 0;
	if (!link->schema_declared)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/data",
				      "a job on a hosted table needs the table's column kinds "
				      "declared at upload (PUT .../data?columns=name:kind,...): kinds "
				      "inferred from the rows are private, and the job's shape would "
				      "tell them");
	if ((strcmp(trainer, "dpsgd") == 0 || strcmp(trainer, "label_em") == 0) &&
	    !link->rows_public)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/data",
				      "a %s job's event publishes the table's row count, which this "
				      "upload kept private: upload it with ?row_count=public to "
				      "declare the count public",
				      trainer);
	return 0;
}

/* The linked data's row count, with the label and shape checks a hosted
 * table needs, and the version of the link they read (sr->data_link: the
 * job runs on that version only); false when it answered. */
static bool check_data(srv_request *req, srv_response *res, const srv_dataset *ds,
		       struct submit_req *sr, int64_t *ret_n_train)
{
	json_t *columns;
	srv_data_link link;
	size_t features = 0;
	uint32_t classes = 0;
	acct_error err;
	int rc;

	acct_error_init(&err);
	if (is_label_em(sr) && check_label_private(ds, &err) < 0) {
		srv_problem_from_error(res, &err);
		return false;
	}
	if (srv__data_link_get_version(req->db, ds->id, &link, &sr->data_link) != SRV_OK) {
		srv_problem(res, 409, NULL,
			    "no data is linked to this dataset (PUT /v1/datasets/{id}/data first)",
			    NULL, NULL);
		return false;
	}
	*ret_n_train = link.rows;
	columns = strcmp(link.kind, "table") == 0 ? srv_json_parse_text(link.columns) : NULL;
	free(link.columns);
	link.columns = NULL;
	rc = check_declared_table(columns, &link, sr->trainer, &err);
	/* A clustering job's private rows have no label. */
	if (rc >= 0)
		rc = is_slmc(sr) ? check_slmc_data(req, &sr->sp, columns, *ret_n_train, &err) :
				   srv__jobs_check_label(json_object_get(req->body, "params"),
							 columns, &features, &classes, &err);
	if (rc >= 0 && !is_slmc(sr))
		rc = check_test_data(req, columns, srv__jobs_table_schema, &err);
	if (rc >= 0 && is_ensemble(sr))
		rc = check_ensemble_data(req, ds, &sr->ep, columns, features, classes,
					      link.rows_public ? *ret_n_train : DPG_MAX_CSV_ROWS,
					      &err);
	if (rc >= 0 && is_label_em(sr))
		rc = check_label_em_data(&sr->lp, columns, features, classes, &err);
	if (rc >= 0 && is_pate(sr))
		rc = srv__jobs_check_pate(req->db, req->who, ds, json_object_get(req->body, "params"),
					  columns, features, classes, &sr->pp, &err);
	json_decref(columns);
	/* A job that could only fail (PCA wider than the data, a model past
	 * its bounds) or would run for weeks is refused here, before anything
	 * is reserved for it.  Its row count is public by now (above). */
	if (rc >= 0 && strcmp(sr->trainer, "dpsgd") == 0)
		rc = trn_dpsgd_check_work(&sr->p, features, classes, (uint64_t)*ret_n_train, &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		free(sr->data_link);
		sr->data_link = NULL;
		return false;
	}
	return true;
}

/*
 * A label_em dry run's guidance for the table's n labels at the requested
 * epsilon, from the numerics of POST /v1/label-em/guidance
 * (trn_label_em_guidance_for): the keep probability, the expected fraction
 * of labels released correct, and Pr[q >= n/2], the paper's success
 * probability.  The inverse is that route's.  NULL for another trainer,
 * or out of memory.
 */
static json_t *dry_run_guidance(const struct submit_req *sr, int64_t n)
{
	trn_label_em_guidance g;

	if (!is_label_em(sr) || trn_label_em_guidance_for(&sr->lp, (uint64_t)n, &g, NULL) < 0)
		return NULL;
	return json_pack("{s:I, s:f, s:f, s:f, s:s}", "n", (json_int_t)n, "keep_probability",
			 g.keep_probability, "expected_correct_fraction",
			 g.expected_correct_fraction, "success_probability", g.success_probability,
			 "inverse",
			 "POST /v1/label-em/guidance {\"n\", \"target_success_probability\"} "
			 "gives the smallest epsilon that reaches a target success probability");
}

/* The dry run's verdict; the row count only for a trainer whose event
 * takes it as public (job_rows_json: dpsgd), which it shows as n_train
 * too; `guidance` (may be NULL; the reference is taken) a trainer's
 * figures on what it would release. */
static void reply_dry_run(srv_response *res, const srv_dataset *ds, const acct_event *ev,
			  const acct_filter *f, const acct_cost *cost, const char *trainer,
			  int64_t n_train, json_t *guidance)
{
	double needed = acct_filter_epsilon(f, cost);
	srv_epsilons after;
	bool fits = srv_dataset_epsilons(ds, cost, &after) == 0 && !ds->archived && after.within;
	json_t *answer;

	if (!isfinite(needed)) {
		/* JSON has no infinity, and such a job can never be reserved
		 * (409), as POST .../dry-run answers for an event. */
		json_decref(guidance);
		srv_problem(res, 422, NULL,
			    "the job's epsilon under this dataset's ledger is unbounded: it can "
			    "never fit", "/params", NULL);
		return;
	}
	answer = json_pack("{s:b, s:o, s:{s:f}, s:o}", "fits", fits, "event", srv_event_to_json(ev),
			   "needed", "epsilon", needed, "budget",
			   srv_dataset_budget_json(ds));

	if (answer && strcmp(trainer, "dpsgd") == 0)
		json_object_set_new(answer, "n_train", json_integer(n_train));
	if (answer)
		job_rows_json(answer, trainer, n_train);
	if (answer && guidance)
		json_object_set(answer, "guidance", guidance);
	json_decref(guidance);

	/* Beside the charge, the event's own epsilon (what the rdp
	 * filter's delta split adds). */
	if (answer &&
	    srv_dataset_explain_cost(ds, ev, json_object_get(answer, "needed")) < 0) {
		json_decref(answer);
		answer = NULL;
	}
	srv_json_reply(res, 200, answer);
}

/* A replayed submission's Location: the job its stored answer names (not
 * an id drawn for this request, which was never inserted). */
static void locate_replayed_job(srv_response *res)
{
	json_t *answer = res->status == 202 && res->body ?
				 json_loadb(res->body, res->len, 0, NULL) : NULL;
	const char *id = json_string_value(json_object_get(answer, "id"));

	if (id)
		snprintf(res->location, sizeof(res->location), "/v1/jobs/%.200s", id);
	json_decref(answer);
}

#define QUEUE_FULL "the job queue is full; try again later"

/* Reserves the job's cost and writes its row in one transaction, then
 * queues it.  The queue place is claimed first (on a shared database in
 * that transaction, from the database's count), so every 202 names a job
 * that a worker will run. */
static void reserve_job(srv_request *req, srv_response *res, srv_spend *sp, srv_dataset *ds,
			struct submit_arg *a)
{
	char *params_text = NULL;
	json_t *params_json = json_object_get(req->body, "params");
	char job_id[48];
	bool claimed;
	int rc;

	claimed = srv_jobs_claim(req->ctx->jobs);
	if (!claimed) {
		srv_problem(res, 503, NULL, QUEUE_FULL, NULL, NULL);
		return;
	}
	params_text = params_json ? srv_json_dump(params_json) : strdup("{}");
	if (!params_text) {
		srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
		goto out;
	}
	if ((rc = srv_random_id(JOB_ID_PREFIX, job_id, sizeof(job_id))) != SRV_OK) {
		srv_reply_store_error(res, rc, NULL);
		goto out;
	}
	a->job.id = job_id;
	a->job.params_text = params_text;
	a->job.event_text = sp->event_text;
	sp->body_arg = a;
	sp->lock_first = srv_db_shared(req->db) ? SRV_JOB_QUEUE_LOCK : NULL;
	rc = srv_spend_and_reply(req, res, sp, ds,
				 &(srv_spend_replies){.cost = a->cost,
						      .unavailable = "the ledger is busy or unavailable; "
								     "nothing was reserved"});
	if (a->queue_full && rc != SRV_OK && rc != SRV_REPLAYED)
		srv_problem(res, 503, NULL, QUEUE_FULL, NULL, NULL);
	if (rc == SRV_OK) {
		srv_jobs_enqueue_claimed(req->ctx->jobs, job_id);
		claimed = false;
	}
	if (rc == SRV_OK)
		snprintf(res->location, sizeof(res->location), "/v1/jobs/%s", job_id);
	else if (rc == SRV_REPLAYED)
		locate_replayed_job(res);
out:
	if (claimed)
		srv_jobs_unclaim(req->ctx->jobs);
	free(params_text);
}

int srv_h_job_submit(srv_request *req, srv_response *res)
{
	struct submit_req sr = {.ledger_delta = 0.0};
	srv_dataset ds;
	acct_error err;
	acct_event *ev = NULL;
	acct_filter f;
	acct_cost cost;
	int64_t n_train = 0;
	srv_spend sp;
	uint8_t hash[32];

	srv_spend_from_request(&sp, req, hash);
	if (srv_spend_replayed(req, res, &sp, srv_reply_raw_json)) {
		locate_replayed_job(res);
		return 0;
	}
	acct_error_init(&err);
	if (parse_submit(req->body, &sr, &err) < 0) {
		srv_problem_from_error(res, &err);
		return 0;
	}
	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	if (ds.is_public) {
		srv_reply_public(res);
		return 0;
	}
	if (!check_data(req, res, &ds, &sr, &n_train))
		return 0;
	if (price_job(&ds, &sr, n_train, &ev, &f, &cost, &err) < 0) {
		srv_problem_from_error(res, &err);
	} else if (sr.dry_run) {
		reply_dry_run(res, &ds, ev, &f, &cost, sr.trainer, n_train,
			      dry_run_guidance(&sr, n_train));
	} else {
		struct submit_arg a = {.job = {.dataset_id = ds.id,
					       .trainer = sr.trainer,
					       .n_train = n_train,
					       .actor = req->who->key_id,
					       .note = sr.note,
					       .data_link = sr.data_link},
				       .event = ev,
				       .cost = &cost};

		char *event_text = srv_event_text(ev);

		sp.kind = SRV_SPEND_RESERVE;
		sp.dataset_id = ds.id;
		sp.event_text = event_text;
		sp.cost = &cost;
		sp.note = sr.note			? sr.note :
			  is_ensemble(&sr) ? "ensemble job (pure epsilon; neighbours differ in one party)" :
			  is_slmc(&sr)	   ? "slmc job (K Gaussian rounds; neighbours differ in one row)" :
			  is_label_em(&sr) ? "label_em job (the label exponential mechanism, once; "
					     "neighbours differ in one label)" :
			  is_pate(&sr)	   ? "pate job (worst case reserved; what runs is charged)" :
					     "training job (treats the row count as public: q = L/N)";
		sp.ttl_seconds = 30LL * 24 * 3600;
		sp.txn_fn = submit_txn;
		sp.text_fn = submit_text;
		sp.success_status = 202;
		if (event_text)
			reserve_job(req, res, &sp, &ds, &a);
		else
			srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		free(event_text);
	}
	acct_event_free(ev);
	free(sr.data_link);
	return 0;
}

/* The epsilon the first `steps` steps cost under `accountant` at `delta`;
 * NAN when it cannot be priced. */
static double steps_epsilon(const trn_dpsgd_params *p, int64_t n_train, int64_t steps,
			    acct_accountant accountant, acct_neighbor nb, double delta)
{
	acct_event *ev = NULL;
	acct_options opt;
	acct_result r;
	double eps = NAN;

	if (trn_dpsgd_event_for_steps(p, (uint64_t)n_train, steps, &ev, NULL) < 0)
		return NAN;
	if (!ev)
		return 0.0;
	memset(&opt, 0, sizeof(opt));
	opt.accountant = accountant;
	opt.neighbor = nb;
	if (acct_epsilon(ev, delta, &opt, &r, NULL) == 0)
		eps = r.epsilon;
	acct_event_free(ev);
	return eps;
}

/* The ledger's price of the first `steps` steps on the dataset's filter,
 * and the ledger's accountant, into `e`. */
static void ledger_epsilon(const srv_dataset *ds, const trn_dpsgd_params *p, int64_t n_train,
			   int64_t steps, json_t *e)
{
	acct_filter f;
	acct_event *ev = NULL;

	if (srv_dataset_filter(ds, &f, NULL) == 0 &&
	    trn_dpsgd_event_for_steps(p, (uint64_t)n_train, steps, &ev, NULL) == 0) {
		acct_cost c;

		if (!ev)
			json_object_set_new(e, "ledger", json_real(0.0));
		else if (acct_filter_price(&f, ev, 0.0, &c, NULL) == 0)
			json_object_set_new(e, "ledger", json_real(acct_filter_epsilon(&f, &c)));
		json_object_set_new(e, "ledger_accountant",
				    json_string(acct_ledger_kind_name(ds->accountant)));
	}
	acct_event_free(ev);
}

/* Epsilon so far, from the steps done and the job's own parameters, into
 * progress.epsilon. */
static void epsilon_so_far(srv_request *req, const srv_job_row *j, int64_t steps,
			   json_t *progress)
{
	trn_dpsgd_params p;
	srv_dataset ds;
	json_t *params = srv_json_parse_text(j->params);

	if (srv__jobs_parse_params(params, &p, NULL) == 0 &&
	    srv_store_dataset_get(req->db, j->dataset_id, &ds) == SRV_OK) {
		double delta = ds.budget_delta > 0 ? ds.budget_delta : 1e-5;
		double m = steps_epsilon(&p, j->n_train, steps, ACCT_MOMENTS, ds.neighbor, delta);
		double r = steps_epsilon(&p, j->n_train, steps, ACCT_RDP, ds.neighbor, delta);
		json_t *e = json_pack("{s:f}", "delta", delta);

		json_object_set_new(e, "moments", isfinite(m) ? json_real(m) : json_null());
		json_object_set_new(e, "rdp", isfinite(r) ? json_real(r) : json_null());
		ledger_epsilon(&ds, &p, j->n_train, steps, e);
		json_object_set_new(progress, "epsilon", e);
	}
	/* p may point into params: released only once p is done with. */
	json_decref(params);
}

/* The job's progress: a running job's freshest is in its worker's slot. */
static json_t *job_progress(srv_request *req, const srv_job_row *j)
{
	json_t *progress = srv_json_parse_text(j->progress);
	json_t *result = srv_json_parse_text(j->result);
	json_t *live = srv_jobs_live_progress(req->ctx->jobs, j->id);
	int64_t steps = -1;

	if (live) {
		json_decref(progress);
		progress = live;
	}
	if (json_is_object(progress))
		steps = (int64_t)json_integer_value(json_object_get(progress, "step"));
	if (result && json_integer_value(json_object_get(result, "steps_done")) > 0)
		steps = json_integer_value(json_object_get(result, "steps_done"));
	json_decref(result);
	if (!progress)
		progress = json_object();
	/* Every other trainer's event is spent whole once it reads data (a
	 * pate job's is charged when it ends): only DP-SGD's grows with its
	 * steps. */
	if (steps >= 0 && json_is_object(progress) && strcmp(j->trainer, "dpsgd") == 0)
		epsilon_so_far(req, j, steps, progress);
	return progress;
}

/* The job's result, with the epsilon its progress states. */
static void job_result(json_t *o, const srv_job_row *j, const json_t *progress)
{
	/* An ended job that kept no result (it failed before training, was
	 * cancelled while queued, or was running when the server died) says
	 * so, as a kept result does. */
	json_t *result = srv_json_parse_text(j->result);

	if (!result && (!strcmp(j->state, "succeeded") || !strcmp(j->state, "failed") ||
			!strcmp(j->state, "cancelled")))
		json_object_set_new(o, "result", json_pack("{s:b}", "model_available", false));
	if (result) {
		json_t *eps = json_object_get(progress, "epsilon");

		/* A finished classifier's result states its epsilon (rdp). */
		if (eps && json_is_real(json_object_get(eps, "rdp")))
			json_object_set(result, "epsilon", json_object_get(eps, "rdp"));
		if (eps)
			json_object_set(result, "epsilon_by_accountant", eps);
		json_object_set_new(o, "result", result);
	}
}

static json_t *job_json(srv_request *req, const srv_job_row *j)
{
	json_t *params = srv_json_parse_text(j->params), *event = srv_json_parse_text(j->event);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:s}", "id", j->id, "dataset",
			      j->dataset_id, "trainer", j->trainer, "state", j->state, "params",
			      params ? params : json_null(), "event", event ? event : json_null(),
			      "reservation_id", j->reservation_id, "created_at", j->created_at);
	json_t *progress;

	if (!o)
		return NULL;
	/* The N of the event's q = lot_size / N (srv_h_job_submit); an
	 * other trainer's event does not take it as public. */
	job_rows_json(o, j->trainer, j->n_train);
	if (j->started_at[0])
		json_object_set_new(o, "started_at", json_string(j->started_at));
	if (j->finished_at[0])
		json_object_set_new(o, "finished_at", json_string(j->finished_at));
	progress = job_progress(req, j);
	json_object_set_new(o, "progress", progress);
	job_result(o, j, progress);
	if (j->error)
		json_object_set_new(o, "error", json_string(j->error));
	return o;
}

/* Loads {id} as a job visible to the caller, or answers. */
bool srv__load_visible_job(srv_request *req, srv_response *res, srv_job_row *j)
{
	int rc = srv__job_load(req->db, req->params[0], j);

	if (rc != SRV_OK) {
		srv_problem(res, rc == SRV_NOT_FOUND ? 404 : 503, NULL, "no such job", NULL, NULL);
		return false;
	}
	if (!srv_principal_sees(req->who, j->dataset_id)) {
		srv_problem(res, 403, NULL, "this key is not scoped to the job's dataset", NULL, NULL);
		srv__job_row_clear(j);
		return false;
	}
	return true;
}

int srv_h_job_get(srv_request *req, srv_response *res)
{
	srv_job_row j;

	if (!srv__load_visible_job(req, res, &j))
		return 0;
	srv_json_reply(res, 200, job_json(req, &j));
	srv__job_row_clear(&j);
	return 0;
}

static int list_append(void *arg, const char *id, const char *state, const char *created_at)
{
	return json_array_append_new(arg, json_pack("{s:s, s:s, s:s}", "id", id, "state", state,
						    "created_at", created_at));
}

/* Whether job `id` is one of dataset `dataset_id`'s. */
static int job_found(srv_db *db, const char *dataset_id, const char *id)
{
	srv_job_row j;
	int rc = srv__job_load(db, id, &j);

	if (rc == SRV_OK && strcmp(j.dataset_id, dataset_id) != 0)
		rc = SRV_NOT_FOUND;
	srv__job_row_clear(&j);
	return rc;
}

/* A page of the dataset's jobs, newest first (srv__id_page_or_reply:
 * `limit`, and `after`, the id of the last job of the previous page, which
 * answers `next` when more follow). */
int srv_h_job_list(srv_request *req, srv_response *res)
{
	const char *after;
	json_t *arr, *last;
	srv_dataset ds;
	int64_t limit;
	bool more;

	if (!srv__id_page_or_reply(req, res, &ds, job_found, "jobs", &limit, &after))
		return 0;
	arr = json_array();
	if (!arr ||
	    srv__job_each_of_dataset(req->db, ds.id, after, limit, list_append, arr, &more) != SRV_OK) {
		json_decref(arr);
		srv_reply_store_error(res, SRV_DB_ERROR, NULL);
		return 0;
	}
	last = more ? json_object_get(json_array_get(arr, json_array_size(arr) - 1), "id") : NULL;
	srv_json_reply(res, 200,
		       json_pack("{s:o, s:O}", "jobs", arr, "next", last ? last : json_null()));
	return 0;
}

int srv_h_job_cancel(srv_request *req, srv_response *res)
{
	srv_job_row j;
	int rc;

	if (!srv__load_visible_job(req, res, &j))
		return 0;
	if (req->who->role < SRV_ROLE_ANALYST) {
		srv__job_row_clear(&j);
		srv_problem(res, 403, NULL, "viewers cannot cancel jobs", NULL, NULL);
		return 0;
	}
	if (!srv__may_change(req, j.actor)) {
		srv__job_row_clear(&j);
		srv_reply_store_error(res, SRV_FORBIDDEN, NULL);
		return 0;
	}
	if (strcmp(j.state, "queued") == 0) {
		/* Never started: no data touched, the reservation is returned. */
		rc = srv__job_finish(req->db, j.id, "queued", "cancelled", true, NULL, NULL, NULL,
				     req->who->key_id);
		if (rc == SRV_OK) {
			srv_jobs_forget(req->ctx->jobs, j.id);
			srv__job_row_clear(&j);
			srv__job_load(req->db, req->params[0], &j);
			srv_json_reply(res, 200, job_json(req, &j));
			srv__job_row_clear(&j);
			return 0;
		}
		srv__job_row_clear(&j);
		if (rc != SRV_CONFLICT) {
			srv_problem(res, 503, NULL, "cannot cancel the job now", NULL, NULL);
			return 0;
		}
		srv__job_load(req->db, req->params[0], &j); /* it started meanwhile */
	}
	if (strcmp(j.state, "running") == 0) {
		/* The flag reaches the owner's lease thread when another
		 * server runs the job; the direct call is this server's,
		 * enough on SQLite, where this server runs every job. */
		rc = srv__job_request_cancel(req->db, j.id);
		if (rc == SRV_NOT_FOUND) { /* it ended meanwhile */
			srv__job_row_clear(&j);
			srv__job_load(req->db, req->params[0], &j);
		} else if (rc != SRV_OK && srv_db_shared(req->db)) {
			srv__job_row_clear(&j);
			srv_problem(res, 503, NULL, "cannot cancel the job now", NULL, NULL);
			return 0;
		}
	}
	if (strcmp(j.state, "running") == 0) {
		srv_jobs_cancel_running(req->ctx->jobs, j.id);
		srv_json_reply(res, 202, json_pack("{s:s, s:s, s:s}", "id", j.id, "state", "running",
						   "detail", "cancellation requested; the reservation is committed in full when the job stops"));
		srv__job_row_clear(&j);
		return 0;
	}
	srv_problem(res, 409, NULL, "the job has already ended", NULL,
		    json_pack("{s:s}", "state", j.state));
	srv__job_row_clear(&j);
	return 0;
}
