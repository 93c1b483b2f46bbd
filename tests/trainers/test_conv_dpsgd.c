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
