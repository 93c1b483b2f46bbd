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

static int on_ensemble_progress(const trn_ensemble_progress *p, void *user)
{
	srv_jobs__run *run = user;

	if (srv_jobs__phase_progress(run, &run->slot->ens, p, sizeof(*p), p->phase))
		srv_jobs__save_progress(run->jobs, run->slot->id, srv_jobs__ensemble_progress_json(p));
	return 0;
}

/* What an ensemble job reads: its private rows and their parties, the
 * auxiliary and test tables. */
static int load_ensemble_data(srv_jobs *jobs, const srv_job_row *j, const json_t *params,
			      uint32_t m, struct job_data *d, acct_error *err)
{
	srv_ctx *ctx = jobs->ctx;
	srv_db *db = srv_store_acquire(ctx->store);
	const char *aux = json_string_value(json_object_get(params, "auxiliary_data"));
	int rc = srv_jobs__load_party_table(jobs->load_table, ctx->tables, db, ctx->data_dir,
					    j->dataset_id, params, m, &d->train, &d->party, err);

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
static char *ensemble_result(const trn_ensemble_result *r, const struct job_data *d,
			     double epsilon, bool model_kept, size_t model_len)
{
	json_t *res = json_pack("{s:I, s:f, s:f, s:f, s:b, s:I}", "aux_rows",
				(json_int_t)r->aux_rows, "noise_beta", r->noise_beta, "train_seconds",
				r->train_seconds, "epsilon", epsilon, "model_available", model_kept,
				"model_bytes", (json_int_t)model_len);
	return srv_jobs__result_with_metrics(res, r->model, d->test, d->schema);
}

int srv_jobs__run_ensemble(srv_jobs__run *run, acct_error *err)
{
	struct job_data d = {0};
	trn_ensemble_params p;
	trn_ensemble_result *r = NULL;
	int rc = srv__jobs_parse_ensemble(run->params, &p, err);

	run->slot->ensemble = true;
	if (rc >= 0)
		rc = load_ensemble_data(run->jobs, run->j, run->params, p.parties, &d, err);
	if (rc >= 0)
		rc = trn_ensemble_run(&p, d.train, d.party, d.aux, d.test, run->stream,
				      on_ensemble_progress, run, &run->slot->cancel, &r, err);
	if (rc >= 0 && rc != TRN_CANCELLED && r) {
		bool kept = srv_jobs__keep_model(run, r->model, err);

		run->result = ensemble_result(r, &d, p.epsilon, kept, run->model_len);
	}
	trn_ensemble_result_free(r);
	srv_jobs__job_data_clear(&d);
	return rc;
}
