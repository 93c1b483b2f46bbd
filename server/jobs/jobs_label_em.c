/*
 * jobs_label_em.c: a label_em job's run (Bi and Suppakitpaisarn 2022,
 * docs/label_em.md): its label-private hosted table, its public test table,
 * the trainer, and what the job then keeps: the released model, the
 * mechanism's facts (its epsilon, what it charged, the keep probability)
 * and figures on the public test rows only.  The labels are read once, by
 * the label exponential mechanism inside trn_label_em_run; the job's
 * reservation, made durable at submission, prices exactly that event, and
 * nothing is computed on the private rows for anyone to see.
 */
#include <math.h>
#include <stdlib.h>

#include "jobs_pool.h"
#include "json.h"

/*
 * The pure epsilon the job's event costs: randomized response at the
 * mechanism's epsilon / 2 (mech_labelem.c), priced by the basic accountant
 * from trn_label_em_event rather than restated here.  NAN when it cannot
 * be priced.
 */
static double charged_epsilon(const trn_label_em_params *p, uint64_t n)
{
	acct_event *ev = NULL;
	acct_options opt = {.accountant = ACCT_BASIC, .neighbor = ACCT_REPLACE};
	acct_result r;
	double eps = NAN;

	if (trn_label_em_event(p, n, &ev, NULL) == 0 && acct_epsilon(ev, 0.0, &opt, &r, NULL) == 0)
		eps = r.epsilon;
	acct_event_free(ev);
	return eps;
}

/* Each epoch's report (test_data figures only; the loss is not computed)
 * kept for live reads and saved on the job's row. */
static int on_label_em_progress(const trn_progress *p, void *user)
{
	srv_jobs__run *run = user;

	srv_jobs__note_progress(run->jobs, run->slot, p, &run->last_save, &run->last_signal);
	return 0;
}

/* The result a label_em job keeps: public figures and the mechanism's
 * facts only (no loss or accuracy on the private rows).  NULL when out of
 * memory. */
static char *label_em_result(const trn_label_em_result *r, const struct job_data *jd,
			     const trn_label_em_params *p, bool model_kept, size_t model_len)
{
	trn_label_em_guidance g = {.keep_probability = NAN};
	double charged = charged_epsilon(p, jd->train->n);
	json_t *res;

	trn_label_em_guidance_for(p, jd->train->n, &g, NULL);
	res = json_pack("{s:I, s:I, s:I, s:f, s:b, s:I, s:f, s:o, s:o}", "steps_done",
			(json_int_t)r->steps_done, "steps_total", (json_int_t)r->steps_total,
			"examples_used", (json_int_t)r->examples_used, "train_seconds",
			r->train_seconds, "model_available", model_kept, "model_bytes",
			(json_int_t)model_len, "epsilon", p->epsilon, "charged_epsilon",
			srv_jobs__real_or_null(charged), "keep_probability",
			srv_jobs__real_or_null(g.keep_probability));
	return srv_jobs__result_with_metrics(res, r->model, jd->test, jd->schema);
}

int srv_jobs__run_label_em(srv_jobs__run *run, acct_error *err)
{
	job_slot *slot = run->slot;
	struct job_data jd = {0};
	trn_label_em_params p;
	trn_label_em_result *r = NULL;
	int rc = srv__jobs_parse_label_em(run->params, &p, err);

	if (rc >= 0)
		rc = srv_jobs__load_job_data(run->jobs, run->j, run->params, &jd, err);
	if (rc >= 0)
		rc = trn_label_em_run(&p, jd.train, jd.test, run->stream, on_label_em_progress, run,
				      &slot->cancel, &r, err);
	/* The last epoch's progress, which the save interval may have skipped. */
	if (slot->has_progress)
		srv_jobs__save_progress(run->jobs, slot->id, srv_jobs__progress_json(&slot->progress));
	if (rc >= 0 && rc != TRN_CANCELLED && r) {
		bool kept = srv_jobs__keep_model(run, r->model, err);

		run->result = label_em_result(r, &jd, &p, kept, run->model_len);
	}
	trn_label_em_result_free(r);
	srv_jobs__job_data_clear(&jd);
	return rc;
}
