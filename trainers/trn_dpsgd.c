/*
 * trn_dpsgd.c: DP-SGD (Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar,
 * Zhang, "Deep Learning with Differential Privacy", CCS 2016, Algorithm 1)
 * and its parameters, privacy event and non-private baseline.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_internal.h"

/* Rows per forward/backward chunk: big enough for efficient dgemm, small
 * enough that the workspace stays a few MiB. */
#define TRN_CHUNK_ROWS 1024u
/* At most this many weight uses (rows x parameters) a chunk: well under a
 * second of one core, the cancel flag's latency within a lot. */
#define TRN_CHUNK_WORK ((size_t)1 << 30)

/* Models with at least this many parameters draw each step's noise in a
 * second thread: below it (some 100 us of noise) waking the thread costs a
 * noticeable part of what it saves. */
#define TRN_NOISE_AHEAD_MIN_PARAMS 16384u

/* ---- names ------------------------------------------------------------- */

static const trn__name model_names[] = {
	{ "logreg", TRN_MODEL_LOGREG }, { "mlp", TRN_MODEL_MLP },
};
static const trn__name activation_names[] = {
	{ "relu", TRN_ACT_RELU }, { "tanh", TRN_ACT_TANH },
};
static const trn__name clipping_names[] = {
	{ "global", TRN_CLIP_GLOBAL }, { "per_layer", TRN_CLIP_PER_LAYER },
};

int trn_model_kind_from_name(const char *name, trn_model_kind *ret)
{
	int v = trn__name_lookup(model_names, TRN__COUNT(model_names), name);

	if (v >= 0)
		*ret = (trn_model_kind)v;
	return v < 0 ? -1 : 0;
}

int trn_dpsgd_model_from_name(const char *name, trn_model_kind *ret)
{
	/* The other trainers' models, and the cnn of a dpsgd job. */
	if (!name || strcmp(name, "cnn") != 0)
		return trn_model_kind_from_name(name, ret);
	*ret = TRN_MODEL_CNN;
	return 0;
}

int trn_activation_from_name(const char *name, trn_activation *ret)
{
	int v = trn__name_lookup(activation_names, TRN__COUNT(activation_names), name);

	if (v >= 0)
		*ret = (trn_activation)v;
	return v < 0 ? -1 : 0;
}

int trn_clipping_from_name(const char *name, trn_clipping *ret)
{
	int v = trn__name_lookup(clipping_names, TRN__COUNT(clipping_names), name);

	if (v >= 0)
		*ret = (trn_clipping)v;
	return v < 0 ? -1 : 0;
}

/* ---- parameters and event -------------------------------------------------- */

void trn_dpsgd_params_default(trn_dpsgd_params *p)
{
	memset(p, 0, sizeof(*p));
	p->model = TRN_MODEL_MLP;
	p->n_hidden = 1;
	p->hidden[0] = 1000;
	p->activation = TRN_ACT_RELU;
	p->epochs = 20;
	p->lot_size = 600;
	p->noise_multiplier = 1.1;
	p->clip_norm = 4.0;
	p->clipping = TRN_CLIP_GLOBAL;
	p->learning_rate = 0.05;
	p->learning_rate_final = NAN;
	p->learning_rate_decay_epochs = 0;
	p->momentum = 0.0;
	p->pca_components = 0;
	p->pca_noise_multiplier = 7.0;
	p->max_train_examples = 0;
	p->features = TRN_FEATURES_PCA;
	p->scatter_groups = TRN_DPSGD_SCATTER_GROUPS;
	/* A cnn's: Papernot et al. 2021's Fashion-MNIST net has two conv
	 * blocks of 16 and 32 channels (their 8x8 and 4x4 strided kernels
	 * become 5x5 with pooling here) and a dense layer of 32. */
	p->image_channels = 1;
	p->n_conv = 2;
	p->conv_channels[0] = 16;
	p->conv_channels[1] = 32;
	p->kernel[0] = p->kernel[1] = 5;
	p->conv_activation = TRN_CONV_TANH;
	p->sigmoid_scale = 2.0;
	p->sigmoid_temperature = 2.0;
	p->sigmoid_offset = 1.0;
}

/* Values beyond which a real parameter is surely a mistake. */
#define TRN_MAX_NOISE_MULTIPLIER 1e6
#define TRN_MAX_CLIP_NORM 1e6
#define TRN_MAX_LEARNING_RATE 1e3

/* The features and what they allow: DP-PCA only with "pca", groups that
 * divide the scattering's channels. */
static int features_check(const trn_dpsgd_params *p, acct_error *err)
{
	if (p->features != TRN_FEATURES_PCA && p->features != TRN_FEATURES_RAW &&
	    p->features != TRN_FEATURES_SCATTER)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "features must be \"pca\", \"raw\" or \"scatter\"");
	if (p->features != TRN_FEATURES_PCA && p->pca_components > 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/pca_components",
				      "pca_components needs features \"pca\"");
	if (p->features == TRN_FEATURES_SCATTER &&
	    (p->scatter_groups < 1 || TRN_DPSGD_SCATTER_CHANNELS % p->scatter_groups != 0))
		return acct_error_set(err, ACCT_EINVAL, "/params/scatter_groups",
				      "scatter_groups must divide the %u scattering channels",
				      TRN_DPSGD_SCATTER_CHANNELS);
	return 0;
}

static int params_check(const trn_dpsgd_params *p, bool private, acct_error *err)
{
	if (!p)
		return acct_error_set(err, ACCT_EINVAL, "/params", "no parameters");
	if (p->model != TRN_MODEL_LOGREG && p->model != TRN_MODEL_MLP && p->model != TRN_MODEL_CNN)
		return acct_error_set(err, ACCT_EINVAL, "/params/model",
				      "model must be \"logreg\", \"mlp\" or \"cnn\"");
	if (p->model == TRN_MODEL_CNN && trn__conv_params_check(p, err) < 0)
		return ACCT_EINVAL;
	if (trn__precision_check(p, err) < 0)
		return ACCT_EINVAL;
	if (p->model == TRN_MODEL_LOGREG && p->n_hidden != 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "logreg has no hidden layers");
	if (p->model == TRN_MODEL_MLP) {
		int rc = trn__check_hidden(p->n_hidden, p->hidden, p->activation, err);

		if (rc < 0)
			return rc;
	}
	if (trn__check_count(p->epochs, 1, DPG_MAX_EPOCHS, "/params/epochs", err) < 0 ||
	    trn__check_count(p->lot_size, 1, DPG_MAX_LOT_SIZE, "/params/lot_size", err) < 0)
		return ACCT_EINVAL;
	if (private) {
		/* sigma = 0 would release exact sums: no privacy, refused. */
		if (trn__check_positive(p->noise_multiplier, TRN_MAX_NOISE_MULTIPLIER,
					"/params/noise_multiplier", err) < 0 ||
		    trn__check_positive(p->clip_norm, TRN_MAX_CLIP_NORM, "/params/clip_norm",
					err) < 0)
			return ACCT_EINVAL;
		/* Below it gradual underflow could push a clipped contribution
		 * past the clipping margin's slack, in float64 as in float32. */
		if (p->clip_norm < DPG_MIN_CLIP_NORM)
			return acct_error_set(err, ACCT_EINVAL, "/params/clip_norm",
					      "clip_norm must be at least %g", DPG_MIN_CLIP_NORM);
		if (p->clipping != TRN_CLIP_GLOBAL && p->clipping != TRN_CLIP_PER_LAYER)
			return acct_error_set(err, ACCT_EINVAL, "/params/clipping",
					      "clipping must be \"global\" or \"per_layer\"");
	}
	if (trn__check_positive(p->learning_rate, TRN_MAX_LEARNING_RATE, "/params/learning_rate",
				err) < 0)
		return ACCT_EINVAL;
	if (!isnan(p->learning_rate_final) &&
	    !trn__in_range(p->learning_rate_final, 0.0, TRN_MAX_LEARNING_RATE))
		return acct_error_set(err, ACCT_EINVAL, "/params/learning_rate_final",
				      "learning_rate_final must be in [0, %g]",
				      TRN_MAX_LEARNING_RATE);
	if (p->learning_rate_decay_epochs > DPG_MAX_EPOCHS)
		return acct_error_set(err, ACCT_EINVAL, "/params/learning_rate_decay_epochs",
				      "learning_rate_decay_epochs must be at most %d",
				      DPG_MAX_EPOCHS);
	if (!trn__in_range(p->momentum, 0.0, 1.0) || !(p->momentum < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/momentum",
				      "momentum must be in [0, 1)");
	if (p->pca_components > DPG_MAX_PCA_COMPONENTS)
		return acct_error_set(err, ACCT_EINVAL, "/params/pca_components",
				      "pca_components must be at most %d", DPG_MAX_PCA_COMPONENTS);
	if (private && p->pca_components > 0 &&
	    trn__check_positive(p->pca_noise_multiplier, TRN_MAX_NOISE_MULTIPLIER,
				"/params/pca_noise_multiplier", err) < 0)
		return ACCT_EINVAL;
	if (p->max_train_examples > (uint64_t)DPG_MAX_TRAIN_EXAMPLES)
		return acct_error_set(err, ACCT_EINVAL, "/params/max_train_examples",
				      "max_train_examples must be at most %lld",
				      (long long)DPG_MAX_TRAIN_EXAMPLES);
	return features_check(p, err);
}

int trn_dpsgd_params_validate(const trn_dpsgd_params *p, acct_error *err)
{
	return params_check(p, true, err);
}

uint64_t trn_dpsgd_examples_used(const trn_dpsgd_params *p, uint64_t n_train)
{
	if (p->max_train_examples > 0 && p->max_train_examples < n_train)
		return p->max_train_examples;
	return n_train;
}

int64_t trn_dpsgd_steps(const trn_dpsgd_params *p, uint64_t n_train)
{
	uint64_t n = trn_dpsgd_examples_used(p, n_train);

	if (p->lot_size < 1 || n < 1 || p->epochs < 1 || n > (uint64_t)DPG_MAX_TRAIN_EXAMPLES ||
	    p->epochs > DPG_MAX_EPOCHS)
		return 0;
	/* epochs * n < 1e4 * 1e7 fits easily in 64 bits. */
	return (int64_t)(((uint64_t)p->epochs * n + p->lot_size - 1) / p->lot_size);
}

/* Checks that also need the table size; writes N, T and q. */
static int size_check(const trn_dpsgd_params *p, uint64_t n_train, uint64_t *ret_n,
		      int64_t *ret_steps, double *ret_q, acct_error *err)
{
	uint64_t n = trn_dpsgd_examples_used(p, n_train);
	int64_t steps;

	if (n < 1 || n > (uint64_t)DPG_MAX_TRAIN_EXAMPLES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the training table needs 1 to %lld rows",
				      (long long)DPG_MAX_TRAIN_EXAMPLES);
	if (p->lot_size > n)
		return acct_error_set(err, ACCT_EINVAL, "/params/lot_size",
				      "lot_size %u exceeds the %llu training examples (q > 1)",
				      p->lot_size, (unsigned long long)n);
	steps = trn_dpsgd_steps(p, n_train);
	if (steps < 1 || steps > DPG_MAX_TRAINING_STEPS)
		return acct_error_set(err, ACCT_EINVAL, "/params/epochs",
				      "the job would take %lld steps; at most %lld are allowed",
				      (long long)steps, (long long)DPG_MAX_TRAINING_STEPS);
	*ret_n = n;
	*ret_steps = steps;
	/* Every step samples from all n_train rows: max_train_examples sets how
	 * many examples an epoch counts (the number of steps), never which rows
	 * take part, which under add/remove would swap a row in for one removed
	 * (a change of two, where the event is priced for one). */
	*ret_q = (double)p->lot_size / (double)n_train;
	return 0;
}

/* The private run's parameter and size checks; its steps and q. */
static int event_size_check(const trn_dpsgd_params *p, uint64_t n_train, int64_t *ret_steps,
			    double *ret_q, acct_error *err)
{
	uint64_t n = 0;
	int rc = params_check(p, true, err);

	if (rc < 0)
		return rc;
	return size_check(p, n_train, &n, ret_steps, ret_q, err);
}

int trn_dpsgd_event_for_steps(const trn_dpsgd_params *p, uint64_t n_train, int64_t steps,
			      acct_event **ret, acct_error *err)
{
	acct_event *parts[2];
	size_t n = 0;
	int64_t total = 0;
	double q = 0;
	int rc = event_size_check(p, n_train, &total, &q, err);

	if (rc < 0)
		return rc;
	if (steps < 0 || steps > total)
		return acct_error_set(err, ACCT_EINVAL, "/params/epochs",
				      "steps %lld outside 0..%lld", (long long)steps,
				      (long long)total);
	/* DP-PCA runs first, then the steps: composed([gaussian, sgd]). */
	if (p->pca_components > 0)
		parts[n++] = acct_event_gaussian(p->pca_noise_multiplier);
	if (steps > 0)
		parts[n++] = acct_event_self_composed(
			steps, acct_event_poisson_sampled(q, acct_event_gaussian(p->noise_multiplier)));
	if (trn__event_of_parts(parts, n, ret) < 0)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory building the event");
	return 0;
}

int trn_dpsgd_event(const trn_dpsgd_params *p, uint64_t n_train, acct_event **ret,
		    acct_error *err)
{
	int64_t steps = 0;
	double q = 0;
	int rc = event_size_check(p, n_train, &steps, &q, err);

	if (rc < 0)
		return rc;
	return trn_dpsgd_event_for_steps(p, n_train, steps, ret, err);
}

/* ---- sampling ------------------------------------------------------------- */

int trn__poisson_sample(mech_rng *rng, size_t n, double q, uint64_t *buf, size_t *idx,
			size_t *ret_count)
{
	/*
	 * Row i joins when a uniform 64-bit word is below floor(q 2^64): the
	 * probability is floor(q 2^64) / 2^64, which equals the double q exactly
	 * when q >= 2^-12 (its ulp is then a multiple of 2^-64) and is at most q
	 * otherwise; q = 1 takes every row.
	 */
	uint64_t threshold;
	size_t count = 0;

	if (q >= 1.0) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		*ret_count = n;
		return 0;
	}
	threshold = (uint64_t)ldexp(q, 64);
	if (mech_rng_bytes(rng, buf, n * sizeof(uint64_t)) < 0)
		return ACCT_EINTERNAL;
	for (size_t i = 0; i < n; i++)
		if (buf[i] < threshold)
			idx[count++] = i;
	*ret_count = count;
	return 0;
}

/* ---- training loop ------------------------------------------------------------ */

void trn_dpsgd_result_free(trn_dpsgd_result *r)
{
	if (!r)
		return;
	trn_model_free(r->model);
	free(r);
}

/* Linear decay from lr0 to lr1 over `decay` epochs, then lr1 (Abadi et al. §5). */
static double scheduled_rate(const trn_dpsgd_params *p, double epochs_done)
{
	double lr0 = p->learning_rate;
	double lr1 = isnan(p->learning_rate_final) ? lr0 : p->learning_rate_final;

	if (p->learning_rate_decay_epochs == 0)
		return lr0;
	if (epochs_done >= p->learning_rate_decay_epochs)
		return lr1;
	return lr0 + (lr1 - lr0) * epochs_done / p->learning_rate_decay_epochs;
}

/* The layer widths of the model a job trains: input (the PCA dimension or
 * d), hidden layers, classes.  Returns the number of dense layers. */
static uint32_t model_widths(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			     uint32_t widths[TRN_MAX_LAYERS + 1])
{
	size_t in = p->pca_components ? p->pca_components : d;

	/* Scatter features: the transform's output (d was checked). */
	if (p->features == TRN_FEATURES_SCATTER &&
	    trn_dpsgd_scatter_shape(d, p->scatter_groups, NULL, &in, NULL) < 0)
		in = d;
	return trn__dense_widths(p->model == TRN_MODEL_LOGREG ? 0 : p->n_hidden, p->hidden,
				 (uint32_t)in, num_classes, widths);
}

/* One example's forward pass through p's model on d features (its shape
 * checked), in multiply-adds: the unit of DPG_MAX_DPSGD_WORK. */
static double example_work(const trn_dpsgd_params *p, size_t d, uint32_t num_classes)
{
	uint32_t widths[TRN_MAX_LAYERS + 1];
	uint32_t n_layers;
	double work = 0.0;

	if (p->model == TRN_MODEL_CNN) {
		trn_conv_spec spec;

		if (trn_dpsgd_conv_spec(p, d, num_classes, &spec, NULL) < 0)
			return 0.0;
		return trn_conv_spec_work(&spec);
	}
	n_layers = model_widths(p, d, num_classes, widths);
	for (uint32_t l = 0; l < n_layers; l++)
		work += (double)widths[l + 1] * (double)(widths[l] + 1);
	return work;
}

int trn_dpsgd_check_work(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			 uint64_t n_train, acct_error *err)
{
	int64_t steps;
	double work;
	int rc = trn_dpsgd_check_shape(p, d, num_classes, err);

	if (rc < 0)
		return rc;
	/* Past the step limit the event's own check refuses, naming it. */
	steps = trn_dpsgd_steps(p, n_train);
	if (steps < 1 || steps > DPG_MAX_TRAINING_STEPS)
		return 0;
	/* Each step draws a word for every row, then passes the expected lot
	 * forward and back, then draws the noise and descends (the "+ 1"). */
	work = (double)steps * ((double)n_train + ((double)p->lot_size + 1.0) *
							  example_work(p, d, num_classes));
	if (work > DPG_MAX_DPSGD_WORK)
		return acct_error_set(err, ACCT_EINVAL, "/params/epochs",
				      "the job would take about %.2g units of work (steps x "
				      "(rows + (lot_size + 1) x an example's multiply-adds)); "
				      "at most %.0e are allowed: fewer epochs, a smaller model "
				      "or a smaller lot",
				      work, DPG_MAX_DPSGD_WORK);
	return 0;
}

int trn_dpsgd_check_shape(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			  acct_error *err)
{
	uint32_t widths[TRN_MAX_LAYERS + 1];

	if (d < 1 || d > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the training data has %zu features; 1 to %d are trained on",
				      d, DPG_MAX_FEATURES);
	if (p->pca_components > d)
		return acct_error_set(err, ACCT_EINVAL, "/params/pca_components",
				      "pca_components %u exceeds the %zu features", p->pca_components,
				      d);
	if (p->model == TRN_MODEL_CNN) {
		trn_conv_spec spec;

		return trn_dpsgd_conv_spec(p, d, num_classes, &spec, err);
	}
	if (p->features == TRN_FEATURES_SCATTER &&
	    trn_dpsgd_scatter_shape(d, p->scatter_groups, NULL, NULL, err) < 0)
		return ACCT_EINVAL;
	if (p->model != TRN_MODEL_LOGREG && p->n_hidden > DPG_MAX_HIDDEN_LAYERS)
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "at most %d hidden layers", DPG_MAX_HIDDEN_LAYERS);
	return trn__model_check(model_widths(p, d, num_classes, widths), widths,
				p->model == TRN_MODEL_LOGREG ? 0 : p->activation, err);
}

/* ---- noise drawn ahead ------------------------------------------------- */

/*
 * The step's noise N(0, I) comes from its own ChaCha20 stream, keyed once
 * from the run's rng, one fill per step in step order.  The noise does not
 * depend on the data, so for a large model a second thread draws the next
 * step's noise while this step's gradient is computed; the thread sleeps on
 * a condition variable between fills.  Small models fill in line.  Either
 * way a seeded run gives the same noise, whatever the threads' timing.
 */
struct noise_ahead {
	mech_rng *rng;
	double *buf;
	size_t n;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool threaded, want, ready, stop;
	int rc;
};

static void *noise_ahead_main(void *arg)
{
	struct noise_ahead *a = arg;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		int rc;

		while (!a->want && !a->stop)
			pthread_cond_wait(&a->cv, &a->mu);
		if (a->stop)
			break;
		pthread_mutex_unlock(&a->mu);
		rc = mech_rng_normal_fill_fast(a->rng, a->buf, a->n);
		pthread_mutex_lock(&a->mu);
		a->rc = rc;
		a->want = false;
		a->ready = true;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* Asks for the next step's noise in buf (a no-op when filling in line). */
static void noise_ahead_request(struct noise_ahead *a)
{
	if (!a->threaded)
		return;
	pthread_mutex_lock(&a->mu);
	a->want = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* Makes buf hold this step's noise: waits for the thread, or fills. */
static int noise_ahead_take(struct noise_ahead *a)
{
	int rc;

	if (!a->threaded)
		return mech_rng_normal_fill_fast(a->rng, a->buf, a->n);
	pthread_mutex_lock(&a->mu);
	while (!a->ready)
		pthread_cond_wait(&a->cv, &a->mu);
	a->ready = false;
	rc = a->rc;
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* Keys the noise stream from rng and, for a large model, starts the thread
 * and asks for the first step's noise.  A thread that cannot be started
 * leaves the in-line fill, which draws the same values. */
static int noise_ahead_start(struct noise_ahead *a, mech_rng *rng, double *buf, size_t n)
{
	a->rng = mech_rng_new_stream(rng);
	if (!a->rng)
		return ACCT_EINTERNAL;
	a->buf = buf;
	a->n = n;
	if (n < TRN_NOISE_AHEAD_MIN_PARAMS || pthread_mutex_init(&a->mu, NULL) != 0)
		return 0;
	if (pthread_cond_init(&a->cv, NULL) != 0) {
		pthread_mutex_destroy(&a->mu);
		return 0;
	}
	if (pthread_create(&a->thread, NULL, noise_ahead_main, a) != 0) {
		pthread_cond_destroy(&a->cv);
		pthread_mutex_destroy(&a->mu);
		return 0;
	}
	a->threaded = true;
	noise_ahead_request(a);
	return 0;
}

/* Stops the thread (after the fill it may be doing) and frees the stream. */
static void noise_ahead_stop(struct noise_ahead *a)
{
	if (a->threaded) {
		pthread_mutex_lock(&a->mu);
		a->stop = true;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->thread, NULL);
		pthread_cond_destroy(&a->cv);
		pthread_mutex_destroy(&a->mu);
		a->threaded = false;
	}
	mech_rng_free(a->rng);
	a->rng = NULL;
}

/* ---- the run ----------------------------------------------------------- */

/* One training run: its inputs, the model and buffers it owns, and what
 * the step loop reports.  train_run_free releases what it owns. */
struct train_run {
	const trn_dpsgd_params *p;
	bool private;
	const trn_dataset *ds, *eval; /* under scatter features, the mapped tables */
	size_t raw_d;      /* the width of the raw rows the model takes */
	trn_dataset *feat_train, *feat_eval; /* the tables this run mapped */
	mech_rng *rng;
	trn_dpsgd_result *res;
	trn_model *m;
	trn__workspace *ws;
	const double *xtr; /* the rows trained on: ds->x, or xproj under DP-PCA */
	size_t row_dim;    /* their width */
	double *xproj, *grad, *noise, *velocity;
	uint64_t *ubuf;
	size_t *idx;
	uint32_t *ylot;
	size_t cap;        /* rows per gradient chunk */
	uint64_t n;        /* examples used, N */
	int64_t steps;
	double q, last_loss, last_acc;
	trn__clip clip;
	struct noise_ahead ahead; /* private runs: the noise stream */
	trn_conv_sgd *conv;       /* a cnn's stepper (its net is m's) */
	const atomic_bool *cancel; /* read between chunks of a lot too */
};

static void train_run_free(struct train_run *r)
{
	noise_ahead_stop(&r->ahead);
	trn_conv_sgd_free(r->conv);
	trn_dpsgd_result_free(r->res);
	trn_dataset_free(r->feat_train);
	trn_dataset_free(r->feat_eval);
	trn_model_free(r->m);
	trn__workspace_free(r->ws);
	free(r->xproj);
	free(r->grad);
	free(r->noise);
	free(r->velocity);
	free(r->ubuf);
	free(r->idx);
	free(r->ylot);
}

/* Checks the parameters and the tables, and sets the run's N, steps and
 * sampling rate q. */
static int train_check(struct train_run *r, acct_error *err)
{
	const trn_dataset *ds = r->ds, *eval = r->eval;
	uint32_t widths[TRN_MAX_LAYERS + 1];
	int rc;

	rc = params_check(r->p, r->private, err);
	if (rc < 0)
		return rc;
	if (!ds || !r->rng)
		return acct_error_set(err, ACCT_EINVAL, "/data", "no training table or rng");
	rc = trn_dataset_validate(ds, "/data", err);
	if (rc < 0)
		return rc;
	if (eval && (eval->d != ds->d || eval->num_classes != ds->num_classes ||
		     trn_dataset_validate(eval, "/data", NULL) < 0))
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the evaluation table does not match the training table");
	rc = size_check(r->p, ds->n, &r->n, &r->steps, &r->q, err);
	if (rc < 0)
		return rc;
	/* A private run's row count is public (its event holds it); a
	 * non-private one (a pate teacher on its private part) is bounded by
	 * its caller. */
	rc = r->private ? trn_dpsgd_check_work(r->p, r->raw_d, ds->num_classes, ds->n, err) :
			  trn_dpsgd_check_shape(r->p, r->raw_d, ds->num_classes, err);
	if (rc < 0)
		return rc;
	/* Mapped tables have the transform's width, raw ones raw_d. */
	model_widths(r->p, r->raw_d, ds->num_classes, widths);
	if (ds->d != (r->p->features == TRN_FEATURES_SCATTER ? widths[0] : r->raw_d))
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the table's width is not the features' (%zu)", ds->d);
	return 0;
}

/*
 * Scatter features: checks the raw tables and the parameters against
 * them, then maps both tables once (trn_dpsgd_features_table) and trains
 * on the copies.  The map is a function of each row alone.
 */
static int train_map(struct train_run *r, acct_error *err)
{
	int rc = params_check(r->p, r->private, err);

	if (rc == 0)
		rc = trn_dataset_validate(r->ds, "/data", err);
	if (rc == 0)
		rc = trn_dpsgd_check_shape(r->p, r->ds->d, r->ds->num_classes, err);
	if (rc == 0 && r->eval && r->eval->d != r->ds->d)
		rc = acct_error_set(err, ACCT_EINVAL, "/data",
				    "the evaluation table does not match the training table");
	if (rc == 0)
		rc = trn_dpsgd_features_table(r->p, r->ds, &r->feat_train, err);
	if (rc == 0 && r->eval)
		rc = trn_dpsgd_features_table(r->p, r->eval, &r->feat_eval, err);
	if (rc < 0)
		return rc;
	r->ds = r->feat_train;
	r->eval = r->feat_eval;
	return 0;
}

/* Accuracy and loss on the evaluation table: raw rows, or rows the run
 * already mapped to the model's inputs. */
static int train_evaluate(const struct train_run *r, double *ret_acc, double *ret_loss,
			  acct_error *err)
{
	if (r->p->features != TRN_FEATURES_SCATTER)
		return trn_model_evaluate(r->m, r->eval, ret_acc, ret_loss, err);
	return trn__model_evaluate_inputs(r->m, r->eval->x, r->eval->y, r->eval->n, ret_acc,
					  ret_loss, err);
}

/* DP-PCA on all the rows, then projects them once (Abadi et al. §5). */
static int train_project(struct train_run *r, acct_error *err)
{
	const trn_dataset *ds = r->ds;
	size_t k = r->p->pca_components, d = ds->d, rows = ds->n;
	double tp = trn__now_seconds();
	int rc;

	r->m->proj_dim = (uint32_t)k;
	r->m->proj = malloc(d * k * sizeof(double));
	r->xproj = malloc(rows * k * sizeof(double));
	if (!r->m->proj || !r->xproj)
		return trn__nomem(err);
	rc = trn__dp_pca(ds->x, rows, d, k, r->private ? r->p->pca_noise_multiplier : 0.0, r->rng,
			 r->m->proj, err);
	if (rc < 0)
		return rc;
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)k, (int)d, 1.0, ds->x,
		    (int)d, r->m->proj, (int)k, 0.0, r->xproj, (int)k);
	r->xtr = r->xproj;
	r->res->pca_seconds = trn__now_seconds() - tp;
	return 0;
}

/* Allocates the gradient workspace and the step loop's buffers. */
static int train_alloc(struct train_run *r, acct_error *err)
{
	const trn_dpsgd_params *p = r->p;
	size_t np = r->m->n_params;
	int rc;

	r->cap = p->lot_size < TRN_CHUNK_ROWS ? p->lot_size : TRN_CHUNK_ROWS;
	/* A large model's chunk is smaller, so that a cancel read between
	 * chunks is answered within a fraction of a second. */
	if (r->cap > TRN_CHUNK_WORK / np)
		r->cap = TRN_CHUNK_WORK / np > 0 ? TRN_CHUNK_WORK / np : 1;
	rc = trn__workspace_new(r->m, r->cap, &r->ws, err);
	if (rc < 0)
		return rc;
	r->grad = malloc(np * sizeof(double));
	r->noise = r->private ? malloc(np * sizeof(double)) : NULL;
	r->velocity = p->momentum > 0.0 ? calloc(np, sizeof(double)) : NULL;
	r->ubuf = malloc(r->ds->n * sizeof(uint64_t));
	r->idx = malloc(r->ds->n * sizeof(size_t));
	r->ylot = malloc(r->cap * sizeof(uint32_t));
	if (!r->grad || (r->private && !r->noise) || (p->momentum > 0.0 && !r->velocity) ||
	    !r->ubuf || !r->idx || !r->ylot)
		return trn__nomem(err);
	if (r->private && noise_ahead_start(&r->ahead, r->rng, r->noise, np) < 0)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
	return 0;
}

/* Sums the clipped per-example gradients of the `count` sampled rows into
 * grad, chunk by chunk; a sampled row without a class contributes zero.
 * TRN_CANCELLED when the run's cancel flag was set before a chunk (grad is
 * then partial and must not be used), else 0. */
static int train_lot_gradient(struct train_run *r, size_t count)
{
	trn__workspace *ws = r->ws;
	size_t k0 = r->row_dim;

	memset(r->grad, 0, r->m->n_params * sizeof(double));
	for (size_t s = 0; s < count; s += r->cap) {
		size_t B = count - s < r->cap ? count - s : r->cap, b = 0;

		if (r->cancel && atomic_load(r->cancel))
			return TRN_CANCELLED;
		for (size_t i = 0; i < B; i++) {
			size_t row = r->idx[s + i];

			if (r->ds->y[row] == TRN_NO_CLASS)
				continue;
			memcpy(ws->act[0] + b * k0, r->xtr + row * k0, k0 * sizeof(double));
			r->ylot[b++] = r->ds->y[row];
		}
		trn__chunk_gradient(r->m, ws, r->ylot, b, &r->clip, r->grad, NULL, NULL, NULL);
	}
	return 0;
}

/* One step of Abadi et al.'s Algorithm 1 at learning rate lr: sample a lot,
 * sum its clipped gradients, add noise when private, descend; `more` when
 * another step follows (its noise is then asked for).  TRN_CANCELLED, the
 * model untouched, when the run was cancelled within the lot. */
static int train_step(struct train_run *r, double lr, bool more, acct_error *err)
{
	const trn_dpsgd_params *p = r->p;
	trn_model *m = r->m;
	size_t count;

	/* Algorithm 1: take a random sample L_t, each of the n_train rows
	 * with probability q = L / n_train. */
	if (trn__poisson_sample(r->rng, r->ds->n, r->q, r->ubuf, r->idx, &count) < 0)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
	r->res->examples_processed += count;
	/* A cnn: the same step on its net, noise from the run's stream. */
	if (r->conv)
		return trn_conv_sgd_step(r->conv, r->ds, r->idx, count, lr, r->rng, err);
	if (train_lot_gradient(r, count) == TRN_CANCELLED)
		return TRN_CANCELLED;
	/* Add noise N(0, sigma^2 C^2 I); the sum is divided by L, not |L_t|.
	 * The ziggurat (mech_rng_normal_fill_fast): Box-Muller had been a fifth
	 * of a step. */
	if (r->private) {
		if (noise_ahead_take(&r->ahead) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
		cblas_daxpy((int)m->n_params, p->noise_multiplier * p->clip_norm, r->noise, 1,
			    r->grad, 1);
		if (more)
			noise_ahead_request(&r->ahead);
	}
	/* Descend: theta -= lr * g / L (with heavy-ball momentum if asked). */
	if (r->velocity) {
		cblas_dscal((int)m->n_params, p->momentum, r->velocity, 1);
		cblas_daxpy((int)m->n_params, 1.0 / p->lot_size, r->grad, 1, r->velocity, 1);
		cblas_daxpy((int)m->n_params, -lr, r->velocity, 1, m->params, 1);
	} else {
		cblas_daxpy((int)m->n_params, -lr / p->lot_size, r->grad, 1, m->params, 1);
	}
	return 0;
}

/* Runs the steps until the last, a cancel, or a progress callback that
 * returns non-zero; evaluates after each full epoch and the last step. */
static int train_loop(struct train_run *r, trn_progress_fn progress, void *progress_user,
		      const atomic_bool *cancel, acct_error *err)
{
	const trn_dpsgd_params *p = r->p;
	int rc;

	for (int64_t step = 1; step <= r->steps; step++) {
		double epochs_done = (double)(step - 1) * p->lot_size / (double)r->n;
		double lr = scheduled_rate(p, epochs_done);
		uint64_t full_before = (uint64_t)(step - 1) * p->lot_size / r->n;
		uint64_t full_after = (uint64_t)step * p->lot_size / r->n;
		trn_progress pr;

		if (cancel && atomic_load(cancel))
			break;
		rc = train_step(r, lr, step < r->steps, err);
		if (rc == TRN_CANCELLED)
			break;
		if (rc < 0)
			return rc;
		r->res->steps_done = step;
		pr.evaluated = false;
		if (r->eval && (full_after > full_before || step == r->steps)) {
			rc = train_evaluate(r, &r->last_acc, &r->last_loss, err);
			if (rc < 0)
				return rc;
			pr.evaluated = true;
		}
		if (progress) {
			uint64_t ep = full_before + 1;

			pr.epoch = (uint32_t)(ep > p->epochs ? p->epochs : ep);
			pr.epochs = p->epochs;
			pr.step = step;
			pr.steps_total = r->steps;
			pr.learning_rate = lr;
			pr.loss = r->last_loss;
			pr.accuracy = r->last_acc;
			if (progress(&pr, progress_user) != 0)
				break;
		}
	}
	return 0;
}

/* A cnn's net, initialised (LeCun's N(0, 1/fan_in), trn_convnet_init),
 * its stepper and the lots' buffers. */
static int train_conv_new(struct train_run *r, acct_error *err)
{
	trn_conv_spec spec;
	trn_convnet *net = NULL;
	int rc = trn_dpsgd_conv_spec(r->p, r->raw_d, r->ds->num_classes, &spec, err);

	if (rc == 0)
		rc = trn_convnet_new(&spec, &net, err);
	if (rc == 0 && (rc = trn_convnet_init(net, r->rng, err)) < 0)
		trn_convnet_free(net);
	if (rc == 0)
		rc = trn__model_from_convnet(net, &r->m, err);
	if (rc == 0) {
		/* The non-private baseline neither clips nor adds noise. */
		trn_dpsgd_params sp = *r->p;

		sp.clip_norm = r->private ? sp.clip_norm : 0.0;
		rc = trn_conv_sgd_new(net, &sp, r->private, &r->conv, err);
	}
	if (rc == 0)
		trn_conv_sgd_set_cancel(r->conv, r->cancel);
	if (rc < 0)
		return rc;
	r->ubuf = malloc(r->ds->n * sizeof(uint64_t));
	r->idx = malloc(r->ds->n * sizeof(size_t));
	return r->ubuf && r->idx ? 0 : trn__nomem(err);
}

/* Builds the model (recording the feature transform or the DP-PCA
 * projection it takes raw rows through), initialises it and allocates
 * the step loop's buffers. */
static int train_model_new(struct train_run *r, acct_error *err)
{
	const trn_dpsgd_params *p = r->p;
	uint32_t widths[TRN_MAX_LAYERS + 1];
	uint32_t n_layers = model_widths(p, r->raw_d, r->ds->num_classes, widths);
	size_t side = 0;
	int rc;

	if (p->model == TRN_MODEL_CNN)
		return train_conv_new(r, err);
	rc = trn__model_new(n_layers, widths, p->model == TRN_MODEL_LOGREG ? 0 : p->activation,
			    &r->m, err);
	if (rc < 0)
		return rc;
	r->m->input_dim = (uint32_t)r->raw_d;
	r->xtr = r->ds->x;
	r->row_dim = widths[0];
	if (p->features == TRN_FEATURES_SCATTER &&
	    ((rc = trn_dpsgd_scatter_shape(r->raw_d, p->scatter_groups, &side, NULL, err)) < 0 ||
	     (rc = trn__model_set_scatter(r->m, (uint32_t)side, (uint32_t)side, p->scatter_groups,
					  err)) < 0))
		return rc;
	if ((p->pca_components && (rc = train_project(r, err)) < 0) ||
	    (rc = trn__model_init(r->m, r->rng, err)) < 0)
		return rc;
	return train_alloc(r, err);
}

/*
 * One run: raw tables, or (prepared) tables a scatter job's features were
 * already mapped to, from rows of raw_d values.
 */
static int train(struct train_run *r, bool prepared, trn_progress_fn progress,
		 void *progress_user, const atomic_bool *cancel, trn_dpsgd_result **ret,
		 acct_error *err)
{
	double t0;
	int rc = 0;

	if (prepared && (!r->p || r->p->features != TRN_FEATURES_SCATTER))
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "prepared tables hold scatter features");
	if (!prepared)
		r->raw_d = r->ds ? r->ds->d : 0;
	if (!prepared && r->p && r->p->features == TRN_FEATURES_SCATTER && r->ds && r->rng)
		rc = train_map(r, err);
	if (rc == 0)
		rc = train_check(r, err);
	if (rc < 0)
		goto out;
	r->res = calloc(1, sizeof(*r->res));
	if (!r->res) {
		rc = trn__nomem(err);
		goto out;
	}
	r->res->test_accuracy = NAN;
	r->res->test_loss = NAN;
	r->res->steps_total = r->steps;
	r->res->examples_used = r->n;
	r->cancel = cancel;
	rc = train_model_new(r, err);
	if (rc < 0)
		goto out;
	r->clip.enabled = r->private;
	r->clip.mode = r->p->clipping;
	r->clip.clip_norm = r->p->clip_norm;
	t0 = trn__now_seconds();
	rc = train_loop(r, progress, progress_user, cancel, err);
	if (rc < 0)
		goto out;
	r->res->train_seconds = trn__now_seconds() - t0;
	if (r->eval) {
		rc = train_evaluate(r, &r->res->test_accuracy, &r->res->test_loss, err);
		if (rc < 0)
			goto out;
	}
	r->res->model = r->m;
	r->m = NULL;
	rc = r->res->steps_done < r->steps ? TRN_CANCELLED : 0;
	*ret = r->res;
	r->res = NULL;
out:
	train_run_free(r);
	return rc;
}

int trn_dpsgd_run(const trn_dpsgd_params *p, const trn_dataset *train_ds,
		  const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
		  void *progress_user, const atomic_bool *cancel, trn_dpsgd_result **ret,
		  acct_error *err)
{
	struct train_run r = { .p = p, .private = true, .ds = train_ds, .eval = eval,
			       .rng = rng, .last_loss = NAN, .last_acc = NAN };

	return train(&r, false, progress, progress_user, cancel, ret, err);
}

int trn_sgd_nonprivate_run(const trn_dpsgd_params *p, const trn_dataset *train_ds,
			   const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
			   void *progress_user, const atomic_bool *cancel,
			   trn_dpsgd_result **ret, acct_error *err)
{
	struct train_run r = { .p = p, .private = false, .ds = train_ds, .eval = eval,
			       .rng = rng, .last_loss = NAN, .last_acc = NAN };

	return train(&r, false, progress, progress_user, cancel, ret, err);
}

int trn_dpsgd_run_prepared(const trn_dpsgd_params *p, size_t raw_d, const trn_dataset *train_ds,
			   const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
			   void *progress_user, const atomic_bool *cancel,
			   trn_dpsgd_result **ret, acct_error *err)
{
	struct train_run r = { .p = p, .private = true, .ds = train_ds, .eval = eval,
			       .raw_d = raw_d, .rng = rng, .last_loss = NAN, .last_acc = NAN };

	return train(&r, true, progress, progress_user, cancel, ret, err);
}

int trn_sgd_nonprivate_run_prepared(const trn_dpsgd_params *p, size_t raw_d,
				    const trn_dataset *train_ds, const trn_dataset *eval,
				    mech_rng *rng, trn_progress_fn progress, void *progress_user,
				    const atomic_bool *cancel, trn_dpsgd_result **ret,
				    acct_error *err)
{
	struct train_run r = { .p = p, .private = false, .ds = train_ds, .eval = eval,
			       .raw_d = raw_d, .rng = rng, .last_loss = NAN, .last_acc = NAN };

	return train(&r, true, progress, progress_user, cancel, ret, err);
}
