/*
 * jobs_slmc.c: an slmc job's run (DP soft large margin clustering,
 * docs/slmc.md): its private rows with each row's learner, its public
 * auxiliary and test tables, the trainer, and what the job then keeps: the
 * consensus model and figures on public rows only.
 *
 * The noise multiplier is read back from the event the job reserved, not
 * calibrated again: the run adds exactly the noise that was priced, even
 * if the dataset's delta or the calibration changed since submission.
 * Progress reports the round and the change of the noisy consensus, both
 * functions of released uploads (Theorem 2's post-processing).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "jobs_pool.h"
#include "mech.h"
#include "json.h"
#include "store.h"

json_t *srv_jobs__slmc_progress_json(const trn_slmc_progress *p)
{
	return json_pack("{s:I, s:I, s:f}", "iteration", (json_int_t)p->iteration, "iterations",
			 (json_int_t)p->iterations, "consensus_change", p->consensus_change);
}

struct slmc_run {
	srv_jobs__run *run;
	struct timespec last_save;   /* CLOCK_MONOTONIC */
};

static int on_slmc_progress(const trn_slmc_progress *p, void *user)
{
	struct slmc_run *sr = user;
	job_slot *slot = sr->run->slot;
	trn_slmc_progress copy = *p;

	/* The consensus pointer is valid during this call only. */
	copy.consensus = NULL;
	pthread_mutex_lock(&slot->lock);
	slot->slmc_progress = copy;
	slot->has_progress = true;
	pthread_mutex_unlock(&slot->lock);
	/* Saved every PROGRESS_SAVE_INTERVAL_S, and after the last round. */
	if (p->iteration < p->iterations &&
	    srv_seconds_since(&sr->last_save) < PROGRESS_SAVE_INTERVAL_S)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &sr->last_save);
	srv_jobs__save_progress(sr->run->jobs, slot->id, srv_jobs__slmc_progress_json(&copy));
	return 0;
}

/*
 * The noise multiplier z of the job's reserved event, which
 * trn_slmc_event built as self_composed(K, gaussian(z)) at submission.
 */
static int reserved_noise_multiplier(const srv_job_row *j, uint32_t iterations, double *ret,
				     acct_error *err)
{
	json_t *json = srv_json_parse_text(j->event);
	acct_event *ev = NULL;
	int rc = json ? srv_event_parse(json, "/event", &ev, err) :
			acct_error_set(err, ACCT_EINTERNAL, "/event", "cannot read the job's event");

	if (rc >= 0 && (ev->type != ACCT_EV_SELF_COMPOSED ||
			ev->u.self_composed.count != (int64_t)iterations ||
			ev->u.self_composed.event->type != ACCT_EV_GAUSSIAN))
		rc = acct_error_set(err, ACCT_EINTERNAL, "/event",
				    "the job's event is not the K Gaussian rounds it runs");
	if (rc >= 0)
		*ret = ev->u.self_composed.event->u.gaussian.noise_multiplier;
	acct_event_free(ev);
	json_decref(json);
	return rc < 0 ? rc : 0;
}

/* A clustering job's private rows. */
struct clustering_rows {
	trn_dataset *train;  /* features of the schema, unlabelled */
	uint32_t *party;     /* each row's party, or NULL without a party column */
	size_t table_rows;   /* rows of the hosted table, before rows of no party
			      * are dropped */
};

/* Drops the rows of no declared party (code m) from train and party, in
 * place: nothing released depends on them, as in an ensemble job. */
static void keep_declared_parties(trn_dataset *train, uint32_t *party, uint32_t m)
{
	size_t k = 0;

	for (size_t i = 0; i < train->n; i++) {
		if (party[i] >= m)
			continue;
		memmove(train->x + k * train->d, train->x + i * train->d,
			sizeof(double) * train->d);
		train->y[k] = train->y[i];
		party[k++] = party[i];
	}
	train->n = k;
}

/*
 * The job's private hosted table: the features of `schema`
 * (srv__jobs_clustering_schema), taken by name as a public table's are,
 * every row unlabelled with `clusters` classes; with a "party_column",
 * each row's party (srv_jobs__party_codes, as an ensemble's) and the rows
 * of no declared party dropped.
 */
static int load_clustering_table(srv_jobs *jobs, srv_db *db, const char *dataset_id,
				 const json_t *params, const json_t *schema, uint32_t m,
				 uint32_t clusters, struct clustering_rows *ret, acct_error *err)
{
	srv_table_ref *ref = NULL;
	const mech_table *t;
	uint32_t *party = NULL;
	trn_dataset *train = NULL;
	int rc = jobs->load_table(jobs->ctx->tables, db, jobs->ctx->data_dir, dataset_id, &ref, err);

	if (rc < 0)
		return rc;
	t = srv_table_ref_table(ref);
	ret->table_rows = mech_table_rows(t);
	if (json_object_get(params, "party_column")) {
		party = malloc(sizeof(*party) * (mech_table_rows(t) ? mech_table_rows(t) : 1));
		rc = party ? srv_jobs__party_codes(t, params, m, party, err) :
			     acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	/* The private rows as public ones are read: features by name, no label. */
	if (rc >= 0)
		rc = srv_jobs__public_dataset(t, schema, NULL, clusters, "/data", &train, err);
	srv_table_cache_release(jobs->ctx->tables, ref);
	if (rc < 0) {
		free(party);
		return rc;
	}
	if (party)
		keep_declared_parties(train, party, m);
	ret->train = train;
	ret->party = party;
	return 0;
}

/* What an slmc job reads; freed by slmc_data_clear. */
struct slmc_data {
	struct clustering_rows priv;
	trn_dataset *aux, *test;
	json_t *schema;
};

static void slmc_data_clear(struct slmc_data *d)
{
	trn_dataset_free(d->priv.train);
	free(d->priv.party);
	trn_dataset_free(d->aux);
	trn_dataset_free(d->test);
	json_decref(d->schema);
}

static int load_slmc_data(srv_jobs *jobs, const srv_job_row *j, const json_t *params,
			  const trn_slmc_params *p, struct slmc_data *d, acct_error *err)
{
	srv_ctx *ctx = jobs->ctx;
	srv_db *db = srv_store_acquire(ctx->store);
	const char *aux = json_string_value(json_object_get(params, "auxiliary_data"));
	int rc;

	d->schema = srv_jobs__job_clustering_schema(db, j->dataset_id, params);
	rc = d->schema ? load_clustering_table(jobs, db, j->dataset_id, params, d->schema,
					       p->parties, p->clusters, &d->priv, err) :
			 acct_error_set(err, ACCT_EINVAL, "/data", "the dataset has no hosted table");
	if (rc >= 0)
		rc = srv_jobs__check_rows(j, d->priv.table_rows, err);
	if (rc >= 0 && aux)
		rc = srv_jobs__read_public(jobs, db, aux, "/params/auxiliary_data", d->schema, NULL,
					   p->clusters, DPG_MAX_SLMC_AUX_ROWS, &d->aux, err);
	if (rc >= 0)
		rc = srv_jobs__read_test(jobs, db, params, d->schema, p->clusters, &d->test, err);
	srv_store_release(ctx->store, db);
	return rc;
}

/* The result an slmc job keeps: public figures only (the noise is a
 * function of the parameters; the metrics come from test_data). */
static char *slmc_result(const trn_slmc_result *r, const struct slmc_data *d,
			 const trn_slmc_params *p, bool model_kept, size_t model_len)
{
	json_t *res = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:b, s:I, s:O*}", "clusters",
				(json_int_t)p->clusters, "iterations_done",
				(json_int_t)r->iterations_done, "iterations",
				(json_int_t)p->iterations, "noise_multiplier", r->noise_multiplier,
				"sensitivity", r->sensitivity, "sigma", r->sigma, "train_seconds",
				r->train_seconds, "model_available", model_kept, "model_bytes",
				(json_int_t)model_len, "features",
				json_object_get(d->schema, "features"));
	if (res && d->test &&
	    (json_object_set_new(res, "clustering_accuracy",
				 srv_jobs__real_or_null(r->clustering_accuracy)) < 0 ||
	     json_object_set_new(res, "nmi", srv_jobs__real_or_null(r->nmi)) < 0 ||
	     json_object_set_new(res, "test_rows", json_integer((json_int_t)d->test->n)) < 0)) {
		json_decref(res);
		res = NULL;
	}
	return srv_jobs__result_text(res);
}

/* Converts the consensus to the model format and writes the model file;
 * model_path stays empty when it cannot be kept. */
static bool keep_model(srv_jobs__run *run, const trn_slmc_result *r)
{
	trn_model *m = NULL;
	acct_error err;
	bool kept;

	acct_error_init(&err);
	run->model_path[0] = '\0';
	run->model_len = 0;
	if (trn_slmc_model_to_model(r->model, &m, &err) < 0)
		return false;
	kept = srv_jobs__keep_model(run, m, &err);
	trn_model_free(m);
	return kept;
}

/* The dataset's neighbouring relation, on which Delta depends. */
static int dataset_neighbor(srv_jobs *jobs, const char *dataset_id, acct_neighbor *ret,
			    acct_error *err)
{
	srv_db *db = srv_store_acquire(jobs->ctx->store);
	srv_dataset ds;
	int rc = srv_store_dataset_get(db, dataset_id, &ds);

	srv_store_release(jobs->ctx->store, db);
	if (rc != SRV_OK)
		return acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the job's dataset");
	*ret = ds.neighbor;
	return 0;
}

int srv_jobs__run_slmc(srv_jobs__run *run, acct_error *err)
{
	struct slmc_run sr = {.run = run};
	struct slmc_data d = {0};
	trn_slmc_params p;
	trn_slmc_result *r = NULL;
	int rc = srv__jobs_parse_slmc(run->params, &p, err);

	run->slot->slmc = true;
	clock_gettime(CLOCK_MONOTONIC, &sr.last_save);
	if (rc >= 0)
		rc = dataset_neighbor(run->jobs, run->j->dataset_id, &p.neighbor, err);
	if (rc >= 0)
		rc = reserved_noise_multiplier(run->j, p.iterations, &p.noise_multiplier, err);
	/* z is resolved: the target epsilon has done its work at submission. */
	p.epsilon = 0.0;
	if (rc >= 0)
		rc = load_slmc_data(run->jobs, run->j, run->params, &p, &d, err);
	if (rc >= 0)
		rc = trn_slmc_run(&p, d.priv.train, d.priv.party, d.aux, d.test, run->stream,
				  on_slmc_progress, &sr, &run->slot->cancel, &r, err);
	if (rc >= 0 && rc != TRN_CANCELLED && r) {
		bool kept = keep_model(run, r);

		run->result = slmc_result(r, &d, &p, kept, run->model_len);
	}
	trn_slmc_result_free(r);
	slmc_data_clear(&d);
	return rc;
}
