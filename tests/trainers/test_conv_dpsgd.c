/*
 * test_conv_dpsgd.c: DP-SGD for convolutional models (trn_conv_dpsgd.c).
 *
 * - The noise: on an empty lot the clipped sum is zero, so with momentum 0
 *   and rate 1 one step moves every parameter by -(sigma C / L) z with z
 *   standard normal.  Over N coordinates the sample variance of the moves,
 *   divided by v = sigma^2 C^2 / L^2, has mean 1 and sd sqrt(2 / (N - 1));
 *   the mean has sd sqrt(v / N); the sample excess kurtosis has sd about
 *   sqrt(24 / N).  Each is asserted within 6 sd (a false failure below
 *   1e-8 per check).  A non-private step on an empty lot moves nothing.
 * - The event: the private run hands back trn_dpsgd_event's tree,
 *   self_composed(ceil(epochs n / L), poisson_sampled(L / n, gaussian(sigma))),
 *   checked against those closed forms.
 * - Learning: a tiny separable image problem (bright left half against
 *   bright right half, plus noise) trained without noise reaches >= 95%
 *   on fresh images.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "trn.h"
#include "trn_test_rng.h"

static const uint8_t seed_prefix[2] = {0xc0, 0xd5};

/* One 3x3 convolution to 4 channels on 1 x 8 x 8 inputs, then a dense
 * layer to 2 classes. */
static trn_convnet *tiny_net(trn_conv_act act, mech_rng *rng)
{
	trn_conv_spec s = {
		.channels = 1, .side = 8, .n_conv = 1, .conv_channels = {4}, .kernel = {3},
		.hidden = 0, .classes = 2, .act = act, .ts_scale = 2.0, .ts_temp = 2.0,
		.ts_offset = 1.0,
	};
	trn_convnet *n = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(trn_convnet_new(&s, &n, &err), 0, "%s", err.text);
	cr_assert_eq(trn_convnet_init(n, rng, &err), 0);
	return n;
}

static trn_dpsgd_params conv_params(uint32_t lot, double sigma, double clip)
{
	trn_dpsgd_params p;

	trn_dpsgd_params_default(&p);
	p.features = TRN_FEATURES_RAW;
	p.pca_components = 0;
	p.lot_size = lot;
	p.noise_multiplier = sigma;
	p.clip_norm = clip;
	p.momentum = 0.0;
	return p;
}

Test(conv_dpsgd, noise_on_empty_lot_has_sd_sigma_c_over_l)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);
	trn_convnet *n = tiny_net(TRN_CONV_TANH, rng);
	trn_dpsgd_params p = conv_params(50, 1.3, 2.0);
	trn_dataset empty = {.n = 0, .d = 64, .num_classes = 2};
	size_t np = trn_convnet_n_params(n), N = 0;
	double *before = malloc(np * sizeof(double));
	double v = pow(1.3 * 2.0 / 50.0, 2), s1 = 0, s2 = 0, s4 = 0, mean, var, kurt;
	trn_conv_sgd *s = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_not_null(before);
	cr_assert_eq(trn_conv_sgd_new(n, &p, true, &s, &err), 0, "%s", err.text);
	/* Repeat so that N is a few tens of thousands of draws. */
	for (int rep = 0; rep < 100; rep++) {
		memcpy(before, trn_convnet_params(n), np * sizeof(double));
		cr_assert_eq(trn_conv_sgd_step(s, &empty, NULL, 0, 1.0, rng, &err), 0);
		for (size_t i = 0; i < np; i++) {
			double d = trn_convnet_params(n)[i] - before[i];

			s1 += d;
			s2 += d * d;
			s4 += d * d * d * d;
			N++;
		}
	}
	mean = s1 / (double)N;
	var = s2 / (double)N - mean * mean;
	kurt = s4 / (double)N / (var * var) - 3.0;
	cr_assert_lt(fabs(mean), 6.0 * sqrt(v / (double)N), "mean %g", mean);
	cr_assert_lt(fabs(var / v - 1.0), 6.0 * sqrt(2.0 / (double)(N - 1)), "var/v %g (N %zu)",
		     var / v, N);
	cr_assert_lt(fabs(kurt), 6.0 * sqrt(24.0 / (double)N), "excess kurtosis %g", kurt);
	trn_conv_sgd_free(s);
	s = NULL;
	/* Without privacy an empty lot's step leaves every parameter as is. */
	cr_assert_eq(trn_conv_sgd_new(n, &p, false, &s, &err), 0);
	memcpy(before, trn_convnet_params(n), np * sizeof(double));
	cr_assert_eq(trn_conv_sgd_step(s, &empty, NULL, 0, 1.0, rng, &err), 0);
	cr_assert_eq(memcmp(before, trn_convnet_params(n), np * sizeof(double)), 0);
	trn_conv_sgd_free(s);
	free(before);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

/*
 * One private step on neighbouring lots (docs/training.md, "Sensitivity"):
 * the lot and the lot with one more row, at a random place, on two copies
 * of one net, each with the same seeded stream (so the same noise), move
 * the weights apart by exactly (lr / L) times the difference of the
 * clipped sums: at most C in L2 (times 1 + 1e-9 for the two sums'
 * rounding), in float64 and float32, with rows of no class among them.
 * Rows of scale 5 are clipped, so the bound is nearly reached.
 */
static void neighbouring_lots_step(trn_precision precision, uint8_t tag)
{
	enum { N = 40, TRIALS = 30 };
	const double C = 0.7, lr = 1.0;
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
	trn_dataset ds = {.n = N, .d = 64, .num_classes = 2};
	trn_dpsgd_params p = conv_params(4, 1.0, C);
	double worst = 0.0;
	acct_error err;

	acct_error_init(&err);
	p.precision = precision;
	ds.x = malloc(N * 64 * sizeof(double));
	ds.y = malloc(N * sizeof(uint32_t));
	cr_assert(ds.x && ds.y);
	for (int trial = 0; trial < TRIALS; trial++) {
		mech_rng *init_a = trn_test_seeded(seed_prefix, (uint8_t)(tag + 1));
		mech_rng *init_b = trn_test_seeded(seed_prefix, (uint8_t)(tag + 1));
		trn_convnet *a = tiny_net(trial % 2 ? TRN_CONV_TANH : TRN_CONV_TEMPERED_SIGMOID, init_a);
		trn_convnet *b = tiny_net(trial % 2 ? TRN_CONV_TANH : TRN_CONV_TEMPERED_SIGMOID, init_b);
		size_t np = trn_convnet_n_params(a), lot = 1 + trn_test_below(rng, 8), at, idx[10];
		double moved = 0.0;
		trn_conv_sgd *sa = NULL, *sb = NULL;

		for (size_t i = 0; i < N * 64; i++)
			ds.x[i] = (trial % 3 ? 5.0 : 0.2) * trn_test_normal(rng);
		for (size_t i = 0; i < N; i++)
			ds.y[i] = trn_test_below(rng, 5) ? (uint32_t)trn_test_below(rng, 2) : TRN_NO_CLASS;
		for (size_t i = 0; i <= lot; i++)
			idx[i] = trn_test_below(rng, N);
		at = trn_test_below(rng, lot + 1);
		cr_assert_eq(trn_conv_sgd_new(a, &p, true, &sa, &err), 0, "%s", err.text);
		cr_assert_eq(trn_conv_sgd_new(b, &p, true, &sb, &err), 0, "%s", err.text);
		/* b's lot is idx[0..lot]; a's is the same without idx[at]. */
		cr_assert_eq(trn_conv_sgd_step(sb, &ds, idx, lot + 1, lr, init_b, &err), 0);
		memmove(idx + at, idx + at + 1, (lot - at) * sizeof(size_t));
		cr_assert_eq(trn_conv_sgd_step(sa, &ds, idx, lot, lr, init_a, &err), 0);
		for (size_t j = 0; j < np; j++) {
			double d = trn_convnet_params(a)[j] - trn_convnet_params(b)[j];

			moved += d * d;
		}
		moved = sqrt(moved) * p.lot_size / lr;
		cr_assert_leq(moved, C * (1 + 1e-9), "trial %d: the step moved by %.17g > C", trial,
			      moved);
		worst = fmax(worst, moved / C);
		trn_conv_sgd_free(sa);
		trn_conv_sgd_free(sb);
		trn_convnet_free(a);
		trn_convnet_free(b);
		mech_rng_free(init_a);
		mech_rng_free(init_b);
	}
	cr_assert_gt(worst, 0.99, "no neighbour came near C: %g C", worst);
	free(ds.x);
	free(ds.y);
	mech_rng_free(rng);
}

Test(conv_dpsgd, a_private_step_on_neighbouring_lots_moves_by_at_most_c)
{
	neighbouring_lots_step(TRN_PRECISION_FLOAT64, 30);
}

Test(conv_dpsgd, a_float32_step_on_neighbouring_lots_moves_by_at_most_c)
{
	neighbouring_lots_step(TRN_PRECISION_FLOAT32, 40);
}

/* n images of 8 x 8: class 0 bright on the left half, class 1 on the
 * right, both with N(0, 0.3^2) pixel noise. */
static trn_dataset halves(mech_rng *rng, size_t n)
{
	trn_dataset ds = {.n = n, .d = 64, .num_classes = 2};

	ds.x = malloc(n * 64 * sizeof(double));
	ds.y = malloc(n * sizeof(uint32_t));
	cr_assert(ds.x && ds.y);
	for (size_t i = 0; i < n; i++) {
		ds.y[i] = (uint32_t)trn_test_below(rng, 2);
		for (size_t r = 0; r < 8; r++)
			for (size_t c = 0; c < 8; c++)
				ds.x[i * 64 + r * 8 + c] = ((c < 4) == (ds.y[i] == 0) ? 1.0 : 0.0) +
							   0.3 * trn_test_normal(rng);
	}
	return ds;
}

static double accuracy(trn_convnet *n, const trn_dataset *ds)
{
	size_t right = 0;

	for (size_t i = 0; i < ds->n; i++)
		right += trn_convnet_predict(n, ds->x + i * ds->d) == ds->y[i];
	return (double)right / (double)ds->n;
}

static void train_halves(trn_conv_act act, uint8_t tag)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
	trn_convnet *n = tiny_net(act, rng);
	trn_dataset train = halves(rng, 400), test = halves(rng, 400);
	trn_dpsgd_params p = conv_params(20, 1.0, 100.0);
	acct_error err;

	acct_error_init(&err);
	p.epochs = 10;
	p.learning_rate = 0.1;
	p.momentum = 0.9;
	cr_assert_lt(accuracy(n, &test), 0.9, "already separated before training");
	cr_assert_eq(trn_convnet_dpsgd_train(n, &p, false, &train, rng, NULL, NULL, &err), 0,
		     "%s", err.text);
	cr_assert_geq(accuracy(n, &test), 0.95, "test accuracy %g", accuracy(n, &test));
	free(train.x);
	free(train.y);
	free(test.x);
	free(test.y);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

Test(conv_dpsgd, learns_separable_images_tanh)
{
	train_halves(TRN_CONV_TANH, 2);
}

Test(conv_dpsgd, learns_separable_images_tempered_sigmoid)
{
	train_halves(TRN_CONV_TEMPERED_SIGMOID, 3);
}

Test(conv_dpsgd, private_run_returns_the_dpsgd_event)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 4);
	trn_convnet *n = tiny_net(TRN_CONV_TANH, rng);
	trn_dataset train = halves(rng, 300);
	trn_dpsgd_params p = conv_params(40, 1.1, 1.5);
	acct_event *ev = NULL;
	acct_error err;

	acct_error_init(&err);
	p.epochs = 2;
	cr_assert_eq(trn_convnet_dpsgd_train(n, &p, true, &train, rng, NULL, &ev, &err), 0, "%s",
		     err.text);
	cr_assert_not_null(ev);
	cr_assert_eq(ev->type, ACCT_EV_SELF_COMPOSED);
	/* ceil(2 * 300 / 40) = 15 steps at q = 40 / 300. */
	cr_assert_eq(ev->u.self_composed.count, 15);
	cr_assert_eq(ev->u.self_composed.event->type, ACCT_EV_POISSON_SAMPLED);
	cr_assert_float_eq(ev->u.self_composed.event->u.poisson_sampled.sampling_probability,
			   40.0 / 300.0, 1e-15);
	cr_assert_eq(ev->u.self_composed.event->u.poisson_sampled.event->type, ACCT_EV_GAUSSIAN);
	cr_assert_eq(ev->u.self_composed.event->u.poisson_sampled.event->u.gaussian
			     .noise_multiplier,
		     1.1);
	acct_event_free(ev);
	/* sigma = 0 would release exact sums: refused before any step. */
	p.noise_multiplier = 0.0;
	ev = NULL;
	cr_assert_lt(trn_convnet_dpsgd_train(n, &p, true, &train, rng, NULL, &ev, &err), 0);
	cr_assert_null(ev);
	free(train.x);
	free(train.y);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

/* ---- the "cnn" model of a DP-SGD job (trn_dpsgd_run, trn_model_conv.c) ---- */

/* A cnn job's params on 8 x 8 images: one 3x3 block of 4 channels (or two,
 * 3x3 to 4 then 5x5 to 6, with a tempered sigmoid), a dense layer of 8. */
static trn_dpsgd_params cnn_params(bool two_blocks)
{
	trn_dpsgd_params p = conv_params(40, 1.0, 1.0);

	p.model = TRN_MODEL_CNN;
	p.n_hidden = 1;
	p.hidden[0] = 8;
	p.n_conv = two_blocks ? 2 : 1;
	p.conv_channels[0] = 4;
	p.conv_channels[1] = 6;
	p.kernel[0] = 3;
	p.kernel[1] = 5;
	p.conv_activation = two_blocks ? TRN_CONV_TEMPERED_SIGMOID : TRN_CONV_TANH;
	p.sigmoid_scale = 3.0;
	p.sigmoid_temperature = 0.7;
	p.sigmoid_offset = 1.0;
	p.epochs = 8;
	p.learning_rate = 0.5;
	p.momentum = 0.5;
	return p;
}

static void free_rows(trn_dataset *ds)
{
	free(ds->x);
	free(ds->y);
}

/* Serialises m, checks the version and length of the file, reads it back
 * and returns the copy. */
static trn_model *file_round_trip(const trn_model *m, size_t n_params, uint32_t n_conv)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	trn_model *back = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(trn_model_serialize(m, &buf, &len, &err), 0, "%s", err.text);
	cr_assert_eq(memcmp(buf, TRN_MODEL_MAGIC, 8), 0);
	cr_assert_eq(buf[8] | buf[9] << 8, 4, "version 4 for a convolutional model");
	cr_assert_eq(len, 88 + 8 * (size_t)n_conv + 8 * n_params);
	cr_assert_eq(trn_model_deserialize(buf, len, &back, &err), 0, "%s", err.text);
	free(buf);
	return back;
}

/* The job's run trains the cnn with DP-SGD from the stream alone: it
 * learns the halves on public evaluation rows, reports their figures, and
 * the model it returns scores, evaluates and survives its file alike. */
/*
 * With every third row's label none of the classes, evaluation scores the
 * others only: accuracy and mean cross-entropy over them from
 * trn_model_scores row by row.  Restores the labels.
 */
static void unclassed_rows_are_not_scored(const trn_model *m, trn_dataset *eval)
{
	uint32_t *kept = malloc(eval->n * sizeof(uint32_t));
	double acc = NAN, loss = NAN, want_loss = 0.0, s[2];
	size_t right = 0, scored = 0;
	acct_error err;

	cr_assert_not_null(kept);
	memcpy(kept, eval->y, eval->n * sizeof(uint32_t));
	for (size_t i = 0; i < eval->n; i += 3)
		eval->y[i] = TRN_NO_CLASS;
	for (size_t i = 0; i < eval->n; i++) {
		if (eval->y[i] == TRN_NO_CLASS)
			continue;
		cr_assert_eq(trn_model_scores(m, eval->x + i * eval->d, eval->d, s, 2, NULL), 0);
		right += (s[1] > s[0] ? 1u : 0u) == eval->y[i];
		want_loss -= log(s[eval->y[i]] > 0.0 ? s[eval->y[i]] : 1e-300);
		scored++;
	}
	acct_error_init(&err);
	cr_assert_eq(trn_model_evaluate(m, eval, &acc, &loss, &err), 0, "%s", err.text);
	cr_assert_eq(acc, (double)right / (double)scored);
	cr_assert(fabs(loss - want_loss / (double)scored) <= 1e-12 * fabs(loss), "loss %.17g, want %.17g",
		  loss, want_loss / (double)scored);
	memcpy(eval->y, kept, eval->n * sizeof(uint32_t));
	free(kept);
}

static void cnn_job_learns(bool two_blocks, uint8_t tag)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
	trn_dataset train = halves(rng, 400), eval = halves(rng, 200);
	trn_dpsgd_params p = cnn_params(two_blocks);
	trn_dpsgd_result *r = NULL;
	trn_model *back;
	trn_model_info mi;
	double acc = NAN, s1[2], s2[2];
	uint32_t cls;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_run(&p, &train, &eval, rng, NULL, NULL, NULL, &r, &err), 0, "%s",
		     err.text);
	cr_assert_eq(r->steps_done, trn_dpsgd_steps(&p, train.n));
	cr_assert_geq(r->test_accuracy, 0.95, "accuracy %g", r->test_accuracy);
	trn_model_info_get(r->model, &mi);
	cr_assert_not_null(mi.conv);
	cr_assert_eq(mi.conv->n_conv, p.n_conv);
	cr_assert_eq(trn_model_input_dim(r->model), 64);
	cr_assert_eq(trn_model_num_classes(r->model), 2);
	cr_assert_eq(trn_model_evaluate(r->model, &eval, &acc, NULL, &err), 0);
	cr_assert_eq(acc, r->test_accuracy);
	unclassed_rows_are_not_scored(r->model, &eval);
	back = file_round_trip(r->model, mi.n_params, p.n_conv);
	for (size_t i = 0; i < eval.n; i++) {
		const double *x = eval.x + i * 64;

		cr_assert_eq(trn_model_scores(r->model, x, 64, s1, 2, &err), 0);
		cr_assert_eq(trn_model_scores(back, x, 64, s2, 2, &err), 0);
		cr_assert_eq(memcmp(s1, s2, sizeof(s1)), 0, "row %zu scores differ after the file", i);
		cr_assert_eq(trn_model_predict(back, x, 64, &cls, &err), 0);
		cr_assert_eq(cls, s1[1] > s1[0] ? 1u : 0u);
	}
	trn_model_free(back);
	trn_dpsgd_result_free(r);
	free_rows(&train);
	free_rows(&eval);
	mech_rng_free(rng);
}

Test(conv_dpsgd, cnn_job_learns_and_its_model_survives_its_file_tanh)
{
	cnn_job_learns(false, 5);
}

Test(conv_dpsgd, cnn_job_learns_and_its_model_survives_its_file_tempered_sigmoid)
{
	cnn_job_learns(true, 6);
}

/* All of a run's randomness is its stream's: the same stream gives the
 * same weights; another stream, other weights. */
Test(conv_dpsgd, cnn_job_draws_from_its_stream_only)
{
	trn_dpsgd_params p = cnn_params(false);
	trn_model_info mi[3];
	trn_dpsgd_result *r[3] = {NULL, NULL, NULL};
	acct_error err;

	acct_error_init(&err);
	p.epochs = 1;
	for (int k = 0; k < 3; k++) {
		mech_rng *data = trn_test_seeded(seed_prefix, 7);
		mech_rng *rng = trn_test_seeded(seed_prefix, k < 2 ? 8 : 9);
		trn_dataset train = halves(data, 200);

		cr_assert_eq(trn_dpsgd_run(&p, &train, NULL, rng, NULL, NULL, NULL, &r[k], &err), 0,
			     "%s", err.text);
		trn_model_info_get(r[k]->model, &mi[k]);
		free_rows(&train);
		mech_rng_free(rng);
		mech_rng_free(data);
	}
	cr_assert_eq(memcmp(mi[0].params, mi[1].params, mi[0].n_params * sizeof(double)), 0);
	cr_assert_neq(memcmp(mi[0].params, mi[2].params, mi[0].n_params * sizeof(double)), 0);
	for (int k = 0; k < 3; k++)
		trn_dpsgd_result_free(r[k]);
}

/* A cnn job is priced as an mlp job with the same lots, noise and steps:
 * its event is trn_dpsgd_event's, which reads neither model. */
Test(conv_dpsgd, cnn_event_is_the_mlps)
{
	trn_dpsgd_params cnn = cnn_params(true), mlp;
	acct_event *a = NULL, *b = NULL;
	acct_error err;

	acct_error_init(&err);
	trn_dpsgd_params_default(&mlp);
	mlp.lot_size = cnn.lot_size;
	mlp.epochs = cnn.epochs;
	mlp.noise_multiplier = cnn.noise_multiplier;
	cr_assert_eq(trn_dpsgd_event(&cnn, 1000, &a, &err), 0, "%s", err.text);
	cr_assert_eq(trn_dpsgd_event(&mlp, 1000, &b, &err), 0, "%s", err.text);
	/* ceil(8 * 1000 / 40) = 200 steps at q = 40 / 1000. */
	cr_assert_eq(a->u.self_composed.count, 200);
	cr_assert_eq(b->u.self_composed.count, 200);
	cr_assert_eq(a->u.self_composed.event->u.poisson_sampled.sampling_probability, 0.04);
	cr_assert_eq(b->u.self_composed.event->u.poisson_sampled.sampling_probability, 0.04);
	cr_assert_eq(a->u.self_composed.event->u.poisson_sampled.event->u.gaussian.noise_multiplier,
		     b->u.self_composed.event->u.poisson_sampled.event->u.gaussian.noise_multiplier);
	acct_event_free(a);
	acct_event_free(b);
}

/* Every bad cnn field is refused with its JSON pointer, by the params'
 * validation or (needing the data's shape) trn_dpsgd_check_shape. */
struct cnn_bad_case {
	const char *what, *where;
	void (*set)(trn_dpsgd_params *p);
	size_t d; /* 0: validation alone; else the data's features */
};

static void even_kernel(trn_dpsgd_params *p) { p->kernel[0] = 4; }
static void big_kernel(trn_dpsgd_params *p) { p->kernel[0] = DPG_MAX_CONV_KERNEL + 2; }
static void three_blocks(trn_dpsgd_params *p) { p->n_conv = DPG_MAX_CONV_LAYERS + 1; }
static void no_channels(trn_dpsgd_params *p) { p->conv_channels[0] = 0; }
static void two_hidden(trn_dpsgd_params *p) { p->n_hidden = 2; p->hidden[1] = 4; }
static void zero_scale(trn_dpsgd_params *p) { p->sigmoid_scale = 0.0; }
static void inf_temp(trn_dpsgd_params *p) { p->sigmoid_temperature = INFINITY; }
static void nan_offset(trn_dpsgd_params *p) { p->sigmoid_offset = NAN; }
static void per_layer(trn_dpsgd_params *p) { p->clipping = TRN_CLIP_PER_LAYER; }
static void scatter(trn_dpsgd_params *p) { p->features = TRN_FEATURES_SCATTER; }
static void with_pca(trn_dpsgd_params *p) { p->features = TRN_FEATURES_PCA; p->pca_components = 8; }
static void bad_act(trn_dpsgd_params *p) { p->conv_activation = (trn_conv_act)7; }
static void no_image_channels(trn_dpsgd_params *p) { p->image_channels = 0; }
static void three_channels(trn_dpsgd_params *p) { p->image_channels = 3; }
static void nothing(trn_dpsgd_params *p) { (void)p; }

Test(conv_dpsgd, cnn_params_refused_naming_the_field)
{
	static const struct cnn_bad_case cases[] = {
		{"even kernel", "/params/kernel", even_kernel, 0},
		{"kernel too wide", "/params/kernel", big_kernel, 0},
		{"three blocks", "/params/conv_channels", three_blocks, 0},
		{"a block without channels", "/params/conv_channels", no_channels, 0},
		{"two hidden layers", "/params/hidden", two_hidden, 0},
		{"s = 0", "/params/sigmoid_scale", zero_scale, 0},
		{"T infinite", "/params/sigmoid_temperature", inf_temp, 0},
		{"o NaN", "/params/sigmoid_offset", nan_offset, 0},
		{"per-layer clipping", "/params/clipping", per_layer, 0},
		{"scatter features", "/params/features", scatter, 0},
		{"DP-PCA", "/params/features", with_pca, 0},
		{"unknown activation", "/params/activation", bad_act, 0},
		{"no image channels", "/params/image_channels", no_image_channels, 0},
		{"64 features are not 3 square images", "/params/image_channels", three_channels, 64},
		{"63 features are no square image", "/params/image_channels", nothing, 63},
		/* 6 x 6: the second pooling would halve a side of 3. */
		{"a side that does not halve twice", "/params/conv_channels", nothing, 36},
	};
	acct_error err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		trn_dpsgd_params p = cnn_params(true);
		int rc;

		acct_error_init(&err);
		cr_assert_eq(trn_dpsgd_params_validate(&p, &err), 0, "%s", err.text);
		cr_assert_eq(trn_dpsgd_check_shape(&p, 64, 2, &err), 0, "%s", err.text);
		cases[i].set(&p);
		rc = cases[i].d ? trn_dpsgd_check_shape(&p, cases[i].d, 2, &err)
				: trn_dpsgd_params_validate(&p, &err);
		cr_assert_eq(rc, ACCT_EINVAL, "%s: accepted", cases[i].what);
		cr_assert_str_eq(err.where, cases[i].where, "%s: %s", cases[i].what, err.text);
	}
}

/* A version 4 file cut, lengthened, or with a field that disagrees with
 * the rest is refused; a weight that is not finite too. */
Test(conv_dpsgd, cnn_model_file_refuses_bad_files)
{
	static const struct {
		size_t off;
		uint32_t value;
	} fields[] = {
		{24, 1},  /* one dense layer where the hidden one makes two */
		{44, 16}, /* the side disagrees with D */
		{48, 3},  /* three blocks */
		{56, 2},  /* an unknown activation */
		{60, 1},  /* the reserved word */
		{12, 1},  /* an input rule */
		{92, 4},  /* an even kernel */
	};
	mech_rng *rng = trn_test_seeded(seed_prefix, 10);
	trn_dataset train = halves(rng, 100);
	trn_dpsgd_params p = cnn_params(false);
	trn_dpsgd_result *r = NULL;
	uint8_t *buf = NULL, *bad;
	size_t len = 0;
	trn_model *m = NULL;
	acct_error err;
	double nan = NAN;

	acct_error_init(&err);
	p.epochs = 1;
	cr_assert_eq(trn_dpsgd_run(&p, &train, NULL, rng, NULL, NULL, NULL, &r, &err), 0);
	cr_assert_eq(trn_model_serialize(r->model, &buf, &len, &err), 0);
	bad = malloc(len + 1);
	cr_assert_not_null(bad);
	memcpy(bad, buf, len);
	bad[len] = 0;
	cr_assert_eq(trn_model_deserialize(bad, len - 1, &m, &err), ACCT_EINVAL, "cut");
	cr_assert_eq(trn_model_deserialize(bad, len + 1, &m, &err), ACCT_EINVAL, "lengthened");
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		memcpy(bad, buf, len);
		for (int b = 0; b < 4; b++)
			bad[fields[i].off + (size_t)b] = (uint8_t)(fields[i].value >> (8 * b));
		cr_assert_eq(trn_model_deserialize(bad, len, &m, &err), ACCT_EINVAL,
			     "field at %zu accepted", fields[i].off);
	}
	memcpy(bad, buf, len);
	memcpy(bad + len - 8, &nan, 8);
	cr_assert_eq(trn_model_deserialize(bad, len, &m, &err), ACCT_EINVAL, "NaN weight");
	cr_assert_null(m);
	/* The untouched file still reads. */
	cr_assert_eq(trn_model_deserialize(buf, len, &m, &err), 0, "%s", err.text);
	trn_model_free(m);
	free(bad);
	free(buf);
	trn_dpsgd_result_free(r);
	free_rows(&train);
	mech_rng_free(rng);
}
