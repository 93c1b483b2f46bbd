/*
 * trn_label_em.c: label-private learning with a symmetric loss (Bi and
 * Suppakitpaisarn, "Performances of symmetric loss for private data from
 * exponential mechanism", 2022, arXiv 2210.04132).
 *
 * The features are public and the labels private (label DP).  The labels
 * are read once, by mech_label_em over the whole column, which releases a
 * labelling at epsilon / 2 (randomized response with keep probability p,
 * mech_labelem.c); everything after is post-processing of that release and
 * the public features, so it costs nothing more: plain mini-batch gradient
 * descent with a margin loss (trn_loss.c) on a 2-class trn_model whose
 * margin is logit_1 - logit_0.  A symmetric loss makes the flips harmless
 * for p > 1/2 (docs/label_em.md derives it).  Only binary labels: the
 * paper's setting and the mechanism's; more classes are refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_eval.h"
#include "trn_internal.h"

/* Values beyond which a real parameter is surely a mistake. */
#define TRN_LEM_MAX_LEARNING_RATE 1e3
#define TRN_LEM_MAX_WEIGHT_DECAY 1e6
#define TRN_LEM_MAX_BARRIER 1e6
#define TRN_LEM_MAX_GRADIENT_CLIP 1e9

/* The Hamming score's sensitivity under one-label neighbours: the only one
 * mech_label_em accepts. */
#define TRN_LEM_SENSITIVITY 1.0

/* ---- parameters, event, guidance -------------------------------------------- */

int trn_label_em_model_from_name(const char *name, trn_model_kind *ret)
{
	static const trn__name names[] = {
		{ "linear", TRN_MODEL_LOGREG }, { "mlp", TRN_MODEL_MLP },
	};
	int v = trn__name_lookup(names, TRN__COUNT(names), name);

	if (v >= 0)
		*ret = (trn_model_kind)v;
	return v < 0 ? -1 : 0;
}

void trn_label_em_params_default(trn_label_em_params *p)
{
	memset(p, 0, sizeof(*p));
	p->epsilon = 1.0;
	p->loss.kind = TRN_LOSS_BARRIER_HINGE;
	p->loss.b = 200.0;
	p->loss.r = 50.0;
	p->classes = 2;
	p->model = TRN_MODEL_LOGREG;
	p->n_hidden = 0;
	p->hidden[0] = 100;
	p->activation = TRN_ACT_RELU;
	p->epochs = 50;
	p->batch_size = 64;
	p->learning_rate = 0.01;
	p->momentum = 0.9;
	p->weight_decay = 1e-3;
	p->gradient_clip = 10.0;
	p->center = true;
}

static int check_model(const trn_label_em_params *p, acct_error *err)
{
	if (p->model != TRN_MODEL_LOGREG && p->model != TRN_MODEL_MLP)
		return acct_error_set(err, ACCT_EINVAL, "/params/model",
				      "model must be \"linear\" or \"mlp\"");
	if (p->model == TRN_MODEL_LOGREG && p->n_hidden != 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "a linear model has no hidden layers");
	if (p->model == TRN_MODEL_LOGREG)
		return 0;
	return trn__check_hidden(p->n_hidden, p->hidden, p->activation, err);
}

static int check_loss(const trn_label_em_params *p, acct_error *err)
{
	if (!trn_loss_name(p->loss.kind))
		return acct_error_set(err, ACCT_EINVAL, "/params/loss", "unknown loss");
	if (p->loss.kind != TRN_LOSS_BARRIER_HINGE)
		return 0;
	/* b > 1 makes the left piece overtake r - z (convexity); r > 0 gives
	 * the interval [-r, r] on which the loss is symmetric. */
	if (!trn__in_range(p->loss.b, 0.0, TRN_LEM_MAX_BARRIER) || !(p->loss.b > 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/b",
				      "b must be > 1 and at most %g", TRN_LEM_MAX_BARRIER);
	return trn__check_positive(p->loss.r, TRN_LEM_MAX_BARRIER, "/params/r", err);
}

static int check_optimiser(const trn_label_em_params *p, acct_error *err)
{
	if (trn__check_count(p->epochs, 1, DPG_MAX_EPOCHS, "/params/epochs", err) < 0 ||
	    trn__check_count(p->batch_size, 1, DPG_MAX_LOT_SIZE, "/params/batch_size", err) < 0 ||
	    trn__check_positive(p->learning_rate, TRN_LEM_MAX_LEARNING_RATE,
				"/params/learning_rate", err) < 0)
		return ACCT_EINVAL;
	if (!trn__in_range(p->momentum, 0.0, 1.0) || !(p->momentum < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/momentum",
				      "momentum must be in [0, 1)");
	if (!trn__in_range(p->weight_decay, 0.0, TRN_LEM_MAX_WEIGHT_DECAY))
		return acct_error_set(err, ACCT_EINVAL, "/params/weight_decay",
				      "weight_decay must be in [0, %g]", TRN_LEM_MAX_WEIGHT_DECAY);
	if (!trn__in_range(p->gradient_clip, 0.0, TRN_LEM_MAX_GRADIENT_CLIP))
		return acct_error_set(err, ACCT_EINVAL, "/params/gradient_clip",
				      "gradient_clip must be in [0, %g]", TRN_LEM_MAX_GRADIENT_CLIP);
	/* The unhinged risk is linear in the parameters: without decay it has
	 * no minimum and descent only grows them. */
	if (p->loss.kind == TRN_LOSS_UNHINGED && !(p->weight_decay > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/weight_decay",
				      "the unhinged loss needs weight_decay > 0");
	return 0;
}

int trn_label_em_params_validate(const trn_label_em_params *p, acct_error *err)
{
	int rc;

	if (!p)
		return acct_error_set(err, ACCT_EINVAL, "/params", "no parameters");
	if (!(isfinite(p->epsilon) && p->epsilon > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/epsilon",
				      "epsilon must be finite and > 0");
	if (!(mech_label_em_keep_probability(p->epsilon, TRN_LEM_SENSITIVITY) < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/epsilon",
				      "epsilon is so large that every label would be kept");
	if ((rc = check_loss(p, err)) < 0)
		return rc;
	if (p->classes != 2)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "label_em learns binary labels only (classes = 2)");
	if ((rc = check_model(p, err)) < 0)
		return rc;
	return check_optimiser(p, err);
}

static int check_rows(uint64_t n_rows, acct_error *err)
{
	if (n_rows < 1 || n_rows > (uint64_t)DPG_MAX_LABEL_EM_N ||
	    n_rows > (uint64_t)DPG_MAX_TRAIN_EXAMPLES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the label column needs 1 to %lld rows",
				      (long long)(DPG_MAX_LABEL_EM_N < DPG_MAX_TRAIN_EXAMPLES ?
						  DPG_MAX_LABEL_EM_N : DPG_MAX_TRAIN_EXAMPLES));
	return 0;
}

/* Steps of a job: epochs * ceil(n / batch_size); 0 if over the limit. */
static int64_t job_steps(const trn_label_em_params *p, uint64_t n_rows)
{
	uint64_t per_epoch = (n_rows + p->batch_size - 1) / p->batch_size;
	uint64_t steps = per_epoch * p->epochs;

	return steps > (uint64_t)DPG_MAX_TRAINING_STEPS ? 0 : (int64_t)steps;
}

int trn_label_em_event(const trn_label_em_params *p, uint64_t n_rows, acct_event **ret,
		       acct_error *err)
{
	int rc = trn_label_em_params_validate(p, err);

	if (rc < 0)
		return rc;
	if ((rc = check_rows(n_rows, err)) < 0)
		return rc;
	if (job_steps(p, n_rows) < 1)
		return acct_error_set(err, ACCT_EINVAL, "/params/epochs",
				      "the job would take more than %lld steps",
				      (long long)DPG_MAX_TRAINING_STEPS);
	/* The checks above are the mechanism's (epsilon, n, p < 1): only
	 * ACCT_ENOMEM is left. */
	return mech_label_em_event((int64_t)n_rows, p->epsilon, TRN_LEM_SENSITIVITY, ret, err);
}

int trn_label_em_guidance_for(const trn_label_em_params *p, uint64_t n_rows,
			      trn_label_em_guidance *ret, acct_error *err)
{
	double keep, success;
	int rc = trn_label_em_params_validate(p, err);

	if (rc < 0)
		return rc;
	if ((rc = check_rows(n_rows, err)) < 0)
		return rc;
	keep = mech_label_em_keep_probability(p->epsilon, TRN_LEM_SENSITIVITY);
	rc = mech_label_em_success_probability((int64_t)n_rows, p->epsilon, TRN_LEM_SENSITIVITY,
					       &success, err);
	if (rc < 0)
		return rc;
	ret->keep_probability = keep;
	/* q ~ Binomial(n, p) (mech_labelem.c): E[q] / n = p exactly. */
	ret->expected_correct_fraction = keep;
	ret->success_probability = success;
	return 0;
}

/* The dense widths: d, hidden layers, 2.  Returns the number of layers. */
static uint32_t model_widths(const trn_label_em_params *p, size_t d,
			     uint32_t widths[TRN_MAX_LAYERS + 1])
{
	return trn__dense_widths(p->model == TRN_MODEL_LOGREG ? 0 : p->n_hidden, p->hidden,
				 (uint32_t)d, 2, widths);
}

int trn_label_em_check_shape(const trn_label_em_params *p, size_t d, uint32_t num_classes,
			     acct_error *err)
{
	uint32_t widths[TRN_MAX_LAYERS + 1];
	int rc = trn_label_em_params_validate(p, err);

	if (rc < 0)
		return rc;
	if (d < 1 || d > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the table has %zu features; 1 to %d are trained on", d,
				      DPG_MAX_FEATURES);
	if (num_classes != 2)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "label_em learns binary labels only; the label has %u "
				      "classes", num_classes);
	return trn__model_check(model_widths(p, d, widths), widths,
				p->model == TRN_MODEL_LOGREG ? 0 : p->activation, err);
}

/* ---- training -------------------------------------------------------------- */

/* Rows per forward/backward chunk (as DP-SGD's). */
#define TRN_LEM_CHUNK_ROWS 1024u

void trn_label_em_result_free(trn_label_em_result *r)
{
	if (!r)
		return;
	trn_model_free(r->model);
	free(r);
}

/* One job: its inputs, what it owns, and the step loop's buffers. */
struct lem_run {
	const trn_label_em_params *p;
	const trn_dataset *ds, *test;
	trn_label_em_result *res;
	trn_model *m;
	trn__workspace *ws;
	mech_rng *stream;   /* shuffling and initialisation, keyed from the job's rng */
	uint8_t *released;  /* the mechanism's labels, 0/1 */
	size_t *order;
	double *grad, *velocity;
	double *center;     /* mean of the public training features */
	double *bias_keep;  /* the first layer's biases while folded */
	size_t cap;
	int64_t steps;
};

static void lem_run_free(struct lem_run *r)
{
	trn_label_em_result_free(r->res);
	trn_model_free(r->m);
	trn__workspace_free(r->ws);
	mech_rng_free(r->stream);
	free(r->released);
	free(r->order);
	free(r->grad);
	free(r->velocity);
	free(r->center);
	free(r->bias_keep);
}

static int lem_check(struct lem_run *r, mech_rng *rng, acct_error *err)
{
	const trn_dataset *ds = r->ds, *test = r->test;
	int rc = trn_label_em_params_validate(r->p, err);

	if (rc < 0)
		return rc;
	if (!ds || !rng)
		return acct_error_set(err, ACCT_EINVAL, "/data", "no training table or rng");
	if ((rc = trn_dataset_validate(ds, "/data", err)) < 0 ||
	    (rc = check_rows(ds->n, err)) < 0 ||
	    (rc = trn_label_em_check_shape(r->p, ds->d, ds->num_classes, err)) < 0)
		return rc;
	if (test && (test->d != ds->d || test->num_classes != 2 ||
		     trn_dataset_validate(test, "/test_data", NULL) < 0))
		return acct_error_set(err, ACCT_EINVAL, "/test_data",
				      "the test table does not match the training table");
	r->steps = job_steps(r->p, ds->n);
	if (r->steps < 1)
		return acct_error_set(err, ACCT_EINVAL, "/params/epochs",
				      "the job would take more than %lld steps",
				      (long long)DPG_MAX_TRAINING_STEPS);
	return 0;
}

/*
 * The only read of the private labels: one call of the label EM over the
 * whole column.  A row without a class enters as 0: dropping it or failing
 * would depend on a private label, and under one-label neighbours the
 * column handed over still differs in at most one position.
 */
static int lem_release(struct lem_run *r, mech_rng *rng, acct_error *err)
{
	const trn_dataset *ds = r->ds;
	uint8_t *column = malloc(ds->n);
	acct_event *ev = NULL;
	int rc;

	r->released = malloc(ds->n);
	if (!column || !r->released) {
		free(column);
		return trn__nomem(err);
	}
	trn__label_em_column(ds, column);
	rc = mech_label_em(rng, column, ds->n, r->p->epsilon, TRN_LEM_SENSITIVITY, r->released,
			   &ev, err);
	free(column);
	/* The event is trn_label_em_event's, which the caller charged. */
	acct_event_free(ev);
	if (rc < 0)
		return rc;
	r->res->labels_released = true;
	return 0;
}

void trn__label_em_column(const trn_dataset *ds, uint8_t *ret_column)
{
	for (size_t i = 0; i < ds->n; i++)
		ret_column[i] = ds->y[i] == 1 ? 1 : 0;
}

/* The model, its initialisation from the stream, and the step buffers. */
static int lem_setup(struct lem_run *r, mech_rng *rng, acct_error *err)
{
	const trn_label_em_params *p = r->p;
	uint32_t widths[TRN_MAX_LAYERS + 1], n_layers;
	int rc;

	r->stream = mech_rng_new_stream(rng);
	if (!r->stream)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
	n_layers = model_widths(p, r->ds->d, widths);
	rc = trn__model_new(n_layers, widths, p->model == TRN_MODEL_LOGREG ? 0 : p->activation,
			    &r->m, err);
	if (rc < 0 || (rc = trn__model_init(r->m, r->stream, err)) < 0)
		return rc;
	r->cap = p->batch_size < TRN_LEM_CHUNK_ROWS ? p->batch_size : TRN_LEM_CHUNK_ROWS;
	rc = trn__workspace_new(r->m, r->cap, &r->ws, err);
	if (rc < 0)
		return rc;
	r->grad = malloc(r->m->n_params * sizeof(double));
	r->velocity = calloc(r->m->n_params, sizeof(double));
	r->order = malloc(r->ds->n * sizeof(size_t));
	r->center = calloc(r->ds->d, sizeof(double));
	r->bias_keep = malloc(r->m->dims[1] * sizeof(double));
	if (!r->grad || !r->velocity || !r->order || !r->center || !r->bias_keep)
		return trn__nomem(err);
	for (size_t i = 0; i < r->ds->n; i++)
		r->order[i] = i;
	/* Features are public under label DP: centring them costs nothing. */
	for (size_t i = 0; r->p->center && i < r->ds->n; i++)
		cblas_daxpy((int)r->ds->d, 1.0 / (double)r->ds->n, r->ds->x + i * r->ds->d, 1,
			    r->center, 1);
	return 0;
}

/*
 * Training sees centred rows x - mu; the model file takes raw rows, so the
 * first layer's bias becomes b - W mu (fold) for evaluation and release,
 * and the centred bias is put back exactly afterwards (unfold).
 */
static void lem_fold(struct lem_run *r)
{
	trn_model *m = r->m;
	double *b = m->params + m->b_off[0];

	memcpy(r->bias_keep, b, m->dims[1] * sizeof(double));
	cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)m->dims[1], (int)m->dims[0], -1.0,
		    m->params + m->w_off[0], (int)m->dims[0], r->center, 1, 1.0, b, 1);
}

static void lem_unfold(struct lem_run *r)
{
	memcpy(r->m->params + r->m->b_off[0], r->bias_keep, r->m->dims[1] * sizeof(double));
}

/* Fisher-Yates with exact uniform integers from the stream. */
static int lem_shuffle(struct lem_run *r, acct_error *err)
{
	for (size_t i = r->ds->n; i > 1; i--) {
		uint64_t j;
		size_t t;

		if (mech_rng_uint_below(r->stream, i, &j) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
		t = r->order[i - 1];
		r->order[i - 1] = r->order[j];
		r->order[j] = t;
	}
	return 0;
}

/*
 * Adds to grad the summed gradient of l(s_i (z_1 - z_0)) over B rows whose
 * indices are rows[0..B): the output error is d l / d z_1 = s_i l'(m_i) and
 * d l / d z_0 = -s_i l'(m_i), with s_i = +1 for a released 1, -1 for a 0.
 */
static void lem_chunk_gradient(struct lem_run *r, const size_t *rows, size_t B)
{
	trn__workspace *ws = r->ws;
	uint32_t L = r->m->n_layers;
	size_t d = r->ds->d;

	for (size_t i = 0; i < B; i++) {
		memcpy(ws->act[0] + i * d, r->ds->x + rows[i] * d, d * sizeof(double));
		cblas_daxpy((int)d, -1.0, r->center, 1, ws->act[0] + i * d, 1);
	}
	trn__chunk_logits(r->m, ws, B);
	for (size_t i = 0; i < B; i++) {
		const double *z = ws->act[L] + 2 * i;
		double s = r->released[rows[i]] ? 1.0 : -1.0, dl;

		trn_loss_eval(&r->p->loss, s * (z[1] - z[0]), &dl);
		ws->delta[L - 1][2 * i] = -s * dl;
		ws->delta[L - 1][2 * i + 1] = s * dl;
	}
	trn__chunk_backprop(r->m, ws, B, r->grad);
}

/*
 * One step on the batch rows[0..B): the mean loss gradient plus weight
 * decay, scaled to norm at most gradient_clip, through heavy-ball momentum:
 * v = mu v + g, theta -= lr v.  The clip is for stability, not privacy:
 * past the barrier (margin > r) the barrier hinge's slope b = 200 makes one
 * batch's gradient hundreds of times the usual, which sent a relu MLP on
 * Fashion-MNIST to NaN with momentum 0.9.  A gradient that is not finite
 * skips the step.
 */
static void lem_step(struct lem_run *r, const size_t *rows, size_t B)
{
	const trn_label_em_params *p = r->p;
	int np = (int)r->m->n_params;
	double norm;

	memset(r->grad, 0, r->m->n_params * sizeof(double));
	for (size_t s = 0; s < B; s += r->cap)
		lem_chunk_gradient(r, rows + s, B - s < r->cap ? B - s : r->cap);
	cblas_dscal(np, 1.0 / (double)B, r->grad, 1);
	cblas_daxpy(np, p->weight_decay, r->m->params, 1, r->grad, 1);
	norm = cblas_dnrm2(np, r->grad, 1);
	if (!isfinite(norm))
		return;
	if (p->gradient_clip > 0.0 && norm > p->gradient_clip)
		cblas_dscal(np, p->gradient_clip / norm, r->grad, 1);
	cblas_dscal(np, p->momentum, r->velocity, 1);
	cblas_daxpy(np, 1.0, r->grad, 1, r->velocity, 1);
	cblas_daxpy(np, -p->learning_rate, r->velocity, 1, r->m->params, 1);
}

/* Metrics of the current model on the public test table, into the result. */
static int lem_evaluate(struct lem_run *r, acct_error *err)
{
	trn_eval_metrics mt;
	int rc;

	if (!r->test)
		return 0;
	lem_fold(r);
	rc = trn_eval_model(r->m, r->test, &mt, err);
	lem_unfold(r);
	if (rc < 0)
		return rc;
	r->res->test_accuracy = mt.accuracy;
	r->res->test_auc = mt.auc;
	r->res->test_balanced_error = mt.balanced_error;
	return 0;
}

/* Reports a finished epoch; returns non-zero when the callback cancels. */
static int lem_report(struct lem_run *r, uint32_t epoch, trn_progress_fn progress,
		      void *progress_user)
{
	trn_progress pr = {
		.epoch = epoch, .epochs = r->p->epochs, .step = r->res->steps_done,
		.steps_total = r->steps, .learning_rate = r->p->learning_rate, .loss = NAN,
		.accuracy = r->res->test_accuracy, .evaluated = r->test != NULL,
	};

	return progress ? progress(&pr, progress_user) : 0;
}

/* The epochs: shuffle, step through the batches, evaluate, report. */
static int lem_loop(struct lem_run *r, trn_progress_fn progress, void *progress_user,
		    const atomic_bool *cancel, acct_error *err)
{
	const trn_label_em_params *p = r->p;
	size_t n = r->ds->n;
	int rc;

	for (uint32_t epoch = 1; epoch <= p->epochs; epoch++) {
		if ((rc = lem_shuffle(r, err)) < 0)
			return rc;
		for (size_t s = 0; s < n; s += p->batch_size) {
			if (cancel && atomic_load(cancel))
				return 0;
			lem_step(r, r->order + s, n - s < p->batch_size ? n - s : p->batch_size);
			r->res->steps_done++;
		}
		r->res->epochs_done = epoch;
		if ((rc = lem_evaluate(r, err)) < 0)
			return rc;
		if (lem_report(r, epoch, progress, progress_user) != 0)
			return 0;
	}
	return 0;
}

int trn_label_em_run(const trn_label_em_params *p, const trn_dataset *train,
		     const trn_dataset *test, mech_rng *rng, trn_progress_fn progress,
		     void *progress_user, const atomic_bool *cancel, trn_label_em_result **ret,
		     acct_error *err)
{
	struct lem_run r = { .p = p, .ds = train, .test = test };
	double t0;
	int rc = lem_check(&r, rng, err);

	if (rc < 0)
		goto out;
	r.res = calloc(1, sizeof(*r.res));
	if (!r.res) {
		rc = trn__nomem(err);
		goto out;
	}
	r.res->test_accuracy = r.res->test_auc = r.res->test_balanced_error = NAN;
	r.res->steps_total = r.steps;
	r.res->examples_used = train->n;
	if (cancel && atomic_load(cancel)) {
		rc = TRN_CANCELLED; /* nothing released, nothing to charge */
		goto done;
	}
	t0 = trn__now_seconds();
	if ((rc = lem_release(&r, rng, err)) < 0 || (rc = lem_setup(&r, rng, err)) < 0 ||
	    (rc = lem_loop(&r, progress, progress_user, cancel, err)) < 0)
		goto out;
	r.res->train_seconds = trn__now_seconds() - t0;
	if (r.res->epochs_done < p->epochs && (rc = lem_evaluate(&r, err)) < 0)
		goto out;
	lem_fold(&r);
	r.res->model = r.m;
	r.m = NULL;
	rc = r.res->steps_done < r.steps ? TRN_CANCELLED : 0;
done:
	*ret = r.res;
	r.res = NULL;
out:
	lem_run_free(&r);
	return rc;
}
