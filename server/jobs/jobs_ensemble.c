/*
 * jobs_ensemble.c: an ensemble job's run (Hamm, Cao, Belkin 2016): its
 * private table with each row's party, its public auxiliary and test
 * tables, the trainer, and what the job then keeps: the released model,
 * and figures on public rows only.  Progress reports the phase and how
 * many parties are trained, facts fixed by the public parameters.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jobs_pool.h"
#include "json.h"
#include "store.h"

json_t *srv_jobs__ensemble_progress_json(const trn_ensemble_progress *p)
{
	return json_pack("{s:s, s:I, s:I}", "phase", p->phase ? p->phase : "starting",
			 "parties_trained", (json_int_t)p->parties_trained, "parties",
			 (json_int_t)p->parties);
}

/* The progress JSON of a phase report (srv_jobs__phase_progress). */
static json_t *ensemble_progress_json(const void *p)
{
	return srv_jobs__ensemble_progress_json(p);
}

static int on_ensemble_progress(const trn_ensemble_progress *p, void *user)
{
	srv_jobs__phase_run *er = user;

	srv_jobs__phase_progress(er, &er->slot->ens, p, sizeof(*p), p->phase,
				 ensemble_progress_json);
	return 0;
}

/* What an ensemble job reads; freed by ens_data_clear. */
struct ens_data {
	trn_dataset *train, *aux, *test;
	uint32_t *party;
	json_t *schema;
};

static void ens_data_clear(struct ens_data *d)
{
	trn_dataset_free(d->train);
	trn_dataset_free(d->aux);
	trn_dataset_free(d->test);
	free(d->party);
	json_decref(d->schema);
}

static int load_ensemble_data(srv_jobs *jobs, const srv_job_row *j, const json_t *params,
			      uint32_t m, struct ens_data *d, acct_error *err)
{
	srv_ctx *ctx = jobs->ctx;
	srv_db *db = srv_store_acquire(ctx->store);
	const char *aux = json_string_value(json_object_get(params, "auxiliary_data"));
	int rc = srv_jobs__load_party_table(jobs->load_table, ctx->tables, db, j->dataset_id,
					    params, m, &d->train, &d->party, err);

	if (rc >= 0)
		rc = srv_jobs__check_rows(j, d->train->n, err);
	if (rc >= 0) {
		d->schema = srv_jobs__job_schema(db, j->dataset_id, params);
		rc = srv_jobs__read_public(jobs, db, aux, "/params/auxiliary_data", d->schema, NULL,
					   d->train->num_classes, DPG_MAX_ENSEMBLE_AUX_ROWS, &d->aux,
					   err);
	}
	if (rc >= 0)
		rc = srv_jobs__read_test(jobs, db, params, d->schema, d->train->num_classes,
					 &d->test, err);
	srv_store_release(ctx->store, db);
	return rc;
}

/* The result an ensemble job keeps: public figures only. */
static char *ensemble_result(const trn_ensemble_result *r, const struct ens_data *d,
			     double epsilon, bool model_kept, size_t model_len)
{
	json_t *res = json_pack("{s:I, s:f, s:f, s:f, s:b, s:I}", "aux_rows",
				(json_int_t)r->aux_rows, "noise_beta", r->noise_beta, "train_seconds",
				r->train_seconds, "epsilon", epsilon, "model_available", model_kept,
				"model_bytes", (json_int_t)model_len);
	return srv_jobs__result_with_metrics(res, r->model, d->test, d->schema);
}

int srv_jobs__run_ensemble(srv_jobs *jobs, job_slot *slot, const srv_job_row *j,
			   mech_rng *stream, char **ret_result, char *model_path,
			   size_t model_path_size, acct_error *err)
{
	srv_jobs__phase_run er = {.jobs = jobs, .slot = slot};
	struct ens_data d = {0};
	trn_ensemble_params p;
	trn_ensemble_result *r = NULL;
	json_t *params = srv_json_parse_text(j->params);
	size_t model_len = 0;
	int rc = srv__jobs_parse_ensemble(params, &p, err);

	slot->ensemble = true;
	if (rc >= 0)
		rc = load_ensemble_data(jobs, j, params, p.parties, &d, err);
	if (rc >= 0)
		rc = trn_ensemble_run(&p, d.train, d.party, d.aux, d.test, stream,
				      on_ensemble_progress, &er, &slot->cancel, &r, err);
	if (rc >= 0 && rc != TRN_CANCELLED && r) {
		bool kept = srv_jobs__write_model(jobs->ctx, slot->id, r->model, model_path,
						  model_path_size, &model_len, err) == 0;

		*ret_result = ensemble_result(r, &d, p.epsilon, kept, model_len);
	}
	trn_ensemble_result_free(r);
	ens_data_clear(&d);
	json_decref(params);
	return rc;
}
