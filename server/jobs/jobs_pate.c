/*
 * jobs_pate.c: a pate job (Papernot et al., ICLR 2018) on its worker and
 * its checks at submission.
 *
 * Budget.  The submission reserves the worst case (every query checked,
 * every check answered, and the GNSS release: trn_pate_worst_event), so a
 * job that cannot fit is refused before any data is read.  When the job
 * ends, the reservation is released and what ran is charged in the same
 * transaction (srv__job_finish_charged): the checks and answers made and
 * the release, priced by the data-independent analysis.  A job that fails
 * without saying what ran is charged its whole reservation.  The
 * data-dependent figure is only ever shown through the GNSS release.
 * Progress and the result hold public facts only: counts the aggregator
 * released, the release, and figures on public rows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_pool.h"
#include "json.h"
#include "store.h"

json_t *srv_jobs__pate_progress_json(const trn_pate_progress *p)
{
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "phase", p->phase ? p->phase : "starting",
			 "teachers_trained", (json_int_t)p->teachers_trained, "teachers",
			 (json_int_t)p->teachers, "queries_asked", (json_int_t)p->queries_asked,
			 "queries_answered", (json_int_t)p->queries_answered, "queries",
			 (json_int_t)p->queries);
}

/* What a pate job ran, to charge in place of its reservation: known
 * false when it cannot say (then the reservation is committed whole);
 * event NULL with known true when nothing ran.  The caller frees event. */
typedef struct pate_charge {
	srv_ctx *ctx;
	bool known;
	char *event;
	acct_cost cost;
	double epsilon;     /* the event's epsilon on the dataset's filter */
} pate_charge;

/* The dataset's delta, at which the job states its epsilons. */
static int pate_job_delta(srv_ctx *ctx, const char *dataset_id, double *ret, acct_error *err)
{
	srv_db *db = srv_store_acquire(ctx->store);
	srv_dataset ds;
	int rc = srv_store_dataset_get(db, dataset_id, &ds) == SRV_OK ?
			 0 : acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the dataset");

	srv_store_release(ctx->store, db);
	if (rc == 0)
		*ret = ds.budget_delta;
	return rc;
}

static int on_pate_progress(const trn_pate_progress *p, void *user)
{
	srv_jobs__run *run = user;

	if (srv_jobs__phase_progress(run, &run->slot->pate_progress, p, sizeof(*p), p->phase))
		srv_jobs__save_progress(run->jobs, run->slot->id, srv_jobs__pate_progress_json(p));
	return 0;
}

/* The student rows: labelled when the public table has the label column
 * (its labels then give the answered queries' label accuracy, never the
 * student's training), else unlabelled. */
static int read_student(srv_jobs *jobs, srv_db *db, const json_t *params, struct job_data *d,
			acct_error *err)
{
	const char *id = json_string_value(json_object_get(params, "student_data"));
	bool labelled = srv__jobs_check_public(db, NULL, "/params/student_data", id, d->schema, true,
					       DPG_MAX_PATE_STUDENT_ROWS, NULL) == 0;

	return srv_jobs__read_public(jobs, db, id, "/params/student_data", d->schema,
				     labelled ? params : NULL, d->train->num_classes,
				     DPG_MAX_PATE_STUDENT_ROWS, &d->student, err);
}

/* Rows [lo, hi) of src as a new table. */
static int slice(const trn_dataset *src, size_t lo, size_t hi, trn_dataset **ret,
		 acct_error *err)
{
	int rc = trn_dataset_new(hi - lo, src->d, src->num_classes, ret, err);

	if (rc < 0)
		return rc;
	memcpy((*ret)->x, src->x + lo * src->d, (hi - lo) * src->d * sizeof(double));
	memcpy((*ret)->y, src->y + lo, (hi - lo) * sizeof(uint32_t));
	return 0;
}

/* Fashion-MNIST's public test split: the student pool, then the
 * evaluation rows (TRN_PATE_FASHION_MNIST_POOL). */
static int split_builtin(struct job_data *d, acct_error *err)
{
	size_t pool = TRN_PATE_FASHION_MNIST_POOL;

	if (d->eval->n <= pool)
		return acct_error_set(err, ACCT_EINVAL, "/data", "the test split is too short");
	if (slice(d->eval, 0, pool, &d->student, err) < 0 ||
	    slice(d->eval, pool, d->eval->n, &d->test, err) < 0)
		return ACCT_ENOMEM;
	return 0;
}

static int load_pate_data(srv_jobs *jobs, const srv_job_row *j, const json_t *params,
			  struct job_data *d, acct_error *err)
{
	srv_ctx *ctx = jobs->ctx;
	srv_db *db = srv_store_acquire(ctx->store);
	int rc = srv_jobs__load_priced(jobs, db, j, params, &d->train, &d->eval, err);

	if (rc >= 0 && d->eval) {
		rc = split_builtin(d, err);
	} else if (rc >= 0) {
		d->schema = srv_jobs__job_schema(db, j->dataset_id, params);
		rc = read_student(jobs, db, params, d, err);
		if (rc >= 0)
			rc = srv_jobs__read_test(jobs, db, params, d->schema,
						 d->train->num_classes, &d->test, err);
	}
	srv_store_release(ctx->store, db);
	return rc;
}

/* The result a pate job keeps: public figures only.  The teachers'
 * accuracy is left out: a function of the private rows that no event
 * covers (docs/pate.md). */
static char *pate_result(const trn_pate_params *p, const trn_pate_result *r,
			 const struct job_data *d, double epsilon_charged, bool model_kept,
			 size_t model_len)
{
	json_t *res = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:o, s:f, s:f, s:I, s:I,"
				" s:f, s:b, s:I}",
				"teachers", (json_int_t)p->teachers, "queries_asked",
				(json_int_t)r->queries_asked, "checks", (json_int_t)r->checks,
				"queries_answered", (json_int_t)r->answers, "student_answers",
				(json_int_t)r->student_answers, "abstained", (json_int_t)r->abstained,
				"released", r->released, "epsilon_charged",
				srv_jobs__real_or_null(epsilon_charged), "epsilon_data_dependent",
				srv_jobs__real_or_null(r->epsilon_data_dependent), "label_accuracy",
				srv_jobs__real_or_null(r->label_accuracy), "release_order",
				p->release_order, "delta", p->delta, "student_rows",
				(json_int_t)r->student_rows, "self_trained_rows",
				(json_int_t)r->self_trained_rows, "train_seconds", r->train_seconds,
				"model_available", model_kept, "model_bytes", (json_int_t)model_len);

	return srv_jobs__result_with_metrics(res, r->model, d->test, d->schema);
}

/*
 * What the job ran, as the event charged in place of its reservation, and
 * that event's epsilon on the dataset's filter (NaN for nothing run).
 */
static int pate_charge_of(const srv_job_row *j, const trn_pate_params *p,
			  const trn_pate_result *r, pate_charge *c, acct_error *err)
{
	srv_dataset ds;
	acct_filter f;
	acct_event *ev = NULL;
	srv_db *db;
	int rc = trn_pate_event(p, r->checks, r->answers, r->released, &ev, err);

	c->epsilon = ev ? NAN : 0.0;
	if (rc < 0 || !ev) {
		c->known = rc >= 0;
		return rc;
	}
	db = srv_store_acquire(c->ctx->store);
	rc = srv_store_dataset_get(db, j->dataset_id, &ds) == SRV_OK ?
		     0 : acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the dataset");
	srv_store_release(c->ctx->store, db);
	if (rc >= 0)
		rc = srv_dataset_filter(&ds, &f, err);
	if (rc >= 0)
		rc = acct_filter_price(&f, ev, 0.0, &c->cost, err);
	if (rc >= 0) {
		json_t *o = srv_event_to_json(ev);

		/* As the ledger keeps every event (srv_event_text). */
		c->event = o ? srv_json_dump(o) : NULL;
		json_decref(o);
		c->known = c->event != NULL;
		c->epsilon = acct_filter_epsilon(&f, &c->cost);
	}
	acct_event_free(ev);
	return rc;
}

/*
 * Loads the job's tables, runs the trainer, keeps the student's model file
 * and the result in *run and returns the trainer's code, with what ran in
 * *charge.
 */
static int run_pate(srv_jobs__run *run, pate_charge *charge, acct_error *err)
{
	const srv_job_row *j = run->j;
	struct job_data d = {0};
	trn_pate_params p;
	trn_pate_result *r = NULL;
	int rc = srv__jobs_parse_pate(run->params, &p, err);

	charge->ctx = run->jobs->ctx;
	if (rc >= 0)
		rc = pate_job_delta(run->jobs->ctx, j->dataset_id, &p.delta, err);
	if (rc >= 0)
		rc = load_pate_data(run->jobs, j, run->params, &d, err);
	if (rc >= 0)
		rc = trn_pate_run(&p, d.train, d.student, d.test, run->stream, on_pate_progress, run,
				  &run->slot->cancel, &r, err);
	/* Nothing ran before the trainer returned a result: a failure before
	 * it is charged in full (the trainer cannot say what it ran). */
	if (rc >= 0 && r && pate_charge_of(j, &p, r, charge, err) >= 0 && rc != TRN_CANCELLED) {
		bool kept = !r->model || srv_jobs__keep_model(run, r->model, err);

		run->result = pate_result(&p, r, &d, charge->epsilon, kept && r->model, run->model_len);
	}
	trn_pate_result_free(r);
	srv_jobs__job_data_clear(&d);
	return rc;
}

int srv__jobs_check_pate(srv_db *db, const srv_principal *who, const srv_dataset *ds,
			 const json_t *params, const json_t *columns, size_t features,
			 uint32_t classes, trn_pate_params *p, acct_error *err)
{
	const char *student = json_string_value(json_object_get(params, "student_data"));
	json_t *schema = NULL;
	char *student_columns = NULL;
	int64_t n_student = 0;
	int rc = 0;

	/* Its events are RDP curves, and what ran is re-priced when it ends:
	 * an rdp ledger prices both without a per-request delta share. */
	if (ds->accountant != ACCT_LEDGER_RDP)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/trainer",
				      "a pate job is charged on an rdp ledger (the dataset's is %s)",
				      acct_ledger_kind_name(ds->accountant));
	p->delta = ds->budget_delta;
	if (!columns && student)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/params/student_data",
				      "on Fashion-MNIST the student rows are the test split's first %d "
				      "images: name no student_data", TRN_PATE_FASHION_MNIST_POOL);
	if (!columns)
		return trn_pate_check_shape(p, features, classes, TRN_PATE_FASHION_MNIST_POOL, err);
	if (!student)
		return acct_error_set(err, ACCT_EINVAL, "/params/student_data",
				      "'student_data' (a public dataset) is required on a hosted table");
	schema = srv__jobs_table_schema(params, columns);
	rc = schema ? srv__jobs_check_public(db, who, "/params/student_data", student, schema, false,
					     DPG_MAX_PATE_STUDENT_ROWS, err) :
		      acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (rc >= 0 && srv__data_link_rows(db, student, &n_student, &student_columns) != SRV_OK)
		rc = acct_error_set(err, ACCT_EINTERNAL, "/params/student_data",
				    "cannot read the student table");
	free(student_columns);
	json_decref(schema);
	if (rc >= 0)
		rc = trn_pate_check_shape(p, features, classes, (uint64_t)n_student, err);
	return rc;
}

/*
 * Records a pate job's end: its reservation released and what ran charged
 * in one transaction when the run says what ran, else committed whole;
 * until the database takes it or the pool stops (srv_jobs__finish).
 */
static void pate_job_end(srv_jobs *jobs, const char *id, const char *final_state,
			 const pate_charge *c, const char *result, const char *error,
			 const char *model_path)
{
	srv_job_charge charge = {c->event, &c->cost, "pate job: the checks, answers and release run"};
	int rc = srv_jobs__finish(jobs, id, "running", final_state, false,
				  c->known ? &charge : NULL, result, error,
				  model_path[0] ? model_path : NULL);

	/* The charge is at most the reservation, so it is taken even after
	 * the budget was lowered (charge_actual); should the end still not
	 * be recorded (the pool stopped), the job stays running and the
	 * restart rule commits the reservation whole. */
	if (rc != SRV_OK)
		fprintf(stderr, "{\"level\":\"error\",\"msg\":\"cannot record the end of job %s\"}\n",
			id);
}

void srv_jobs__pate_job(srv_jobs__run *run)
{
	job_slot *slot = run->slot;
	pate_charge charge = {0};
	char msg[ACCT_ERROR_TEXT_BYTES + sizeof(" at ") + ACCT_ERROR_WHERE_BYTES];
	const char *state = "failed", *error = NULL;
	acct_error err;
	int rc;

	acct_error_init(&err);
	slot->pate = true;
	rc = run_pate(run, &charge, &err);
	/* The last counts, which the phase rule may have skipped. */
	if (slot->has_progress)
		srv_jobs__save_progress(run->jobs, slot->id,
					     srv_jobs__pate_progress_json(&slot->pate_progress));
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "%s%s%s", err.text, err.where[0] ? " at " : "", err.where);
		error = msg;
	} else if (rc == TRN_CANCELLED) {
		bool by_user = srv_jobs__cancelled_by_user(slot);

		state = by_user ? "cancelled" : "failed";
		error = by_user ? NULL : "the server stopped while the job ran";
	} else {
		state = "succeeded";
	}
	pate_job_end(run->jobs, slot->id, state, &charge, run->result, error, run->model_path);
	free(charge.event);
}
