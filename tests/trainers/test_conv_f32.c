/*
 * test_conv_f32.c: the float32 option of a cnn's per-example gradients
 * (trn_conv_f32.c).  Its gradients, norms and losses against the float64
 * passes (which test_conv.c checks against finite differences) on random
 * nets and inputs, to a float32-sized tolerance; the clipping bound on the
 * vector actually added, measured exactly (double-double sums) against C,
 * both for clipped examples and for C set to the computed norm itself,
 * where a missing margin shows; a private float32 job that learns; and the
 * param's checks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "trn.h"
#include "trn_conv_internal.h"
#include "trn_test_conv.h"
#include "trn_test_exact.h"
#include "trn_test_rng.h"

static const uint8_t seed_prefix[2] = {0xf3, 0x20};

/* Random nets: two blocks with a hidden layer (tanh or a tempered
 * sigmoid), or one block straight to the classes. */
static trn_conv_spec spec_of(int shape)
{
	trn_conv_spec s = trn_test_conv_spec(shape == 1 ? TRN_CONV_TEMPERED_SIGMOID : TRN_CONV_TANH);

	if (shape == 2) {
		s.channels = 1;
		s.side = 12;
		s.n_conv = 1;
		s.conv_channels[0] = 5;
		s.kernel[0] = 5;
		s.hidden = 0;
		s.classes = 4;
	}
	return s;
}

static trn_convnet *random_net(int shape, mech_rng *rng)
{
	trn_conv_spec s = spec_of(shape);

	return trn_test_conv_net(&s, rng);
}

static void random_row(mech_rng *rng, double *x, size_t d, double scale)
{
	for (size_t i = 0; i < d; i++)
		x[i] = scale * trn_test_normal(rng);
}

/* ||v||^2 - C^2, exact to far below one rounding of a double. */
static double excess_over_c2(const double *v, size_t n, double C)
{
	return trn_test_excess_over_c2(trn_test_sqsum(v, n, 0.0), C);
}

Test(conv_f32, gradients_agree_with_float64)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);

	for (int trial = 0; trial < 12; trial++) {
		trn_convnet *n = random_net(trial % 3, rng);
		size_t np = trn_convnet_n_params(n), d = trn_convnet_input_dim(n);
		double *x = malloc(d * sizeof(double)), *g64 = calloc(np, sizeof(double));
		double *g32 = calloc(np, sizeof(double)), n64 = 0, n32 = 0, l64 = 0, l32 = 0;
		double diff = 0.0, size = 0.0;
		uint32_t y = (uint32_t)trn_test_below(rng, trn_convnet_spec(n)->classes);
		trn_conv_f32 *w = NULL;

		cr_assert(x && g64 && g32);
		random_row(rng, x, d, trial < 6 ? 1.0 : 3.0);
		cr_assert_eq(trn_convnet_clipped_grad(n, x, &y, 1, 0.0, TRN_CONV_NORM_MATERIALISE,
						      g64, &n64, &l64),
			     0);
		cr_assert_eq(trn__conv_f32_new(n, &w, NULL), 0);
		cr_assert_eq(trn__conv_f32_example(w, x, y, 0.0, g32, &n32, &l32), 0);
		for (size_t j = 0; j < np; j++) {
			diff += (g32[j] - g64[j]) * (g32[j] - g64[j]);
			size += g64[j] * g64[j];
		}
		/* float32 carries 2^-24 = 6e-8 relative per operation; sums of a
		 * few hundred products keep well inside 1e-5. */
		cr_assert_leq(sqrt(diff), 1e-5 * sqrt(size), "trial %d: %g of %g", trial, sqrt(diff),
			      sqrt(size));
		cr_assert_gt(sqrt(size), 1e-3, "trial %d: a vanishing gradient tests nothing", trial);
		cr_assert_float_eq(n32, n64, 1e-5 * n64, "trial %d", trial);
		cr_assert_float_eq(l32, l64, 1e-5 * (1.0 + l64), "trial %d", trial);
		trn__conv_f32_free(w);
		trn_convnet_free(n);
		free(x);
		free(g64);
		free(g32);
	}
	mech_rng_free(rng);
}

/* The weights a workspace uses are those of its last load: a changed net
 * changes nothing until it is loaded again. */
Test(conv_f32, weights_are_those_loaded)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 2);
	trn_convnet *n = random_net(0, rng);
	size_t np = trn_convnet_n_params(n), d = trn_convnet_input_dim(n);
	double x[128], a = 0, b = 0, c = 0, *g = calloc(np, sizeof(double));
	trn_conv_f32 *w = NULL;

	cr_assert(g && d <= 128);
	random_row(rng, x, d, 1.0);
	cr_assert_eq(trn__conv_f32_new(n, &w, NULL), 0);
	cr_assert_eq(trn__conv_f32_example(w, x, 1, 0.0, g, NULL, &a), 0);
	for (size_t j = 0; j < np; j++)
		trn_convnet_params(n)[j] *= 2.0;
	cr_assert_eq(trn__conv_f32_example(w, x, 1, 0.0, g, NULL, &b), 0);
	cr_assert_eq(a, b);
	trn__conv_f32_load_weights(w);
	cr_assert_eq(trn__conv_f32_example(w, x, 1, 0.0, g, NULL, &c), 0);
	cr_assert_float_eq(c, trn_convnet_loss(n, x, 1), 1e-5 * (1.0 + c));
	cr_assert_neq(a, c);
	cr_assert_eq(trn__conv_f32_example(w, x, 3, 0.0, g, NULL, NULL), ACCT_EINVAL);
	trn__conv_f32_free(w);
	trn_convnet_free(n);
	free(g);
	mech_rng_free(rng);
}

/*
 * Every example's contribution, as added to a zero sum, has norm at most C
 * exactly: on random nets and rows, with C a third of the computed norm
 * (clipped) and with C the computed norm itself, where without the margin
 * the unclipped vector's exact norm exceeds C for about half the rows.
 */
Test(conv_f32, every_contribution_has_norm_at_most_c)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 3);
	size_t checked = 0;

	for (int trial = 0; trial < 30; trial++) {
		trn_convnet *n = random_net(trial % 3, rng);
		size_t np = trn_convnet_n_params(n), d = trn_convnet_input_dim(n);
		double *x = malloc(d * sizeof(double)), *g = malloc(np * sizeof(double));
		trn_conv_f32 *w = NULL;

		cr_assert(x && g);
		cr_assert_eq(trn__conv_f32_new(n, &w, NULL), 0);
		for (int row = 0; row < 20; row++) {
			uint32_t y = (uint32_t)trn_test_below(rng, trn_convnet_spec(n)->classes);
			double norm = NAN, again = NAN;

			random_row(rng, x, d, row % 2 ? 4.0 : 0.5);
			memset(g, 0, np * sizeof(double));
			cr_assert_eq(trn__conv_f32_example(w, x, y, 0.0, g, &norm, NULL), 0);
			cr_assert(isfinite(norm) && norm > 0.0);
			for (int k = 0; k < 2; k++) {
				double C = k == 0 ? norm / 3.0 : norm;

				memset(g, 0, np * sizeof(double));
				cr_assert_eq(trn__conv_f32_example(w, x, y, C, g, &again, NULL), 0);
				cr_assert_eq(again, norm, "the realised gradient depends on the row only");
				cr_assert_leq(excess_over_c2(g, np, C), 0.0,
					      "trial %d row %d C %s: ||c g||^2 - C^2 = %g", trial, row,
					      k ? "= ||g||" : "= ||g|| / 3", excess_over_c2(g, np, C));
				checked++;
			}
		}
		trn__conv_f32_free(w);
		trn_convnet_free(n);
		free(x);
		free(g);
	}
	cr_assert_eq(checked, 1200);
	mech_rng_free(rng);
}

/* The margin's bound (docs/training.md): M = 1 + (n + 8) u, and the factor
 * is 1 exactly when the inflated norm is within C. */
Test(conv_f32, clip_factor_and_margin)
{
	double u = 0x1p-53;

	cr_assert_eq(trn__clip_margin(0), 1.0 + 8.0 * u);
	cr_assert_eq(trn__clip_margin(1000), 1.0 + 1008.0 * u);
	cr_assert_eq(trn__clip_factor(1.0, 2.0, 100), 1.0);
	cr_assert_eq(trn__clip_factor(5.0, 0.0, 100), 1.0);
	cr_assert_lt(trn__clip_factor(1.0, 1.0, 100), 1.0);
	cr_assert_float_eq(trn__clip_factor(4.0, 1.0, 100), 0.25, 1e-13);
	cr_assert_eq(trn__clip_factor(4.0, 1.0, 100),
		     1.0 / (4.0 * (1.0 + 108.0 * u)));
}

/* A stepper of precision float32 moves the weights as the float64 one
 * does, to float32's tolerance, on the same lot with clipping acting. */
Test(conv_f32, a_step_agrees_with_float64)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 4);
	trn_convnet *n64 = random_net(1, rng), *n32 = NULL;
	size_t np = trn_convnet_n_params(n64), d = trn_convnet_input_dim(n64), idx[40];
	trn_dataset ds = {.n = 40, .d = d, .num_classes = 3};
	trn_dpsgd_params p;
	trn_conv_sgd *s64 = NULL, *s32 = NULL;
	double *before = malloc(np * sizeof(double)), diff = 0.0, size = 0.0;
	trn_conv_spec spec = spec_of(1);

	ds.x = malloc(ds.n * d * sizeof(double));
	ds.y = malloc(ds.n * sizeof(uint32_t));
	cr_assert(before && ds.x && ds.y);
	random_row(rng, ds.x, ds.n * d, 2.0);
	for (size_t i = 0; i < ds.n; i++) {
		ds.y[i] = (uint32_t)trn_test_below(rng, 3);
		idx[i] = i;
	}
	cr_assert_eq(trn_convnet_new(&spec, &n32, NULL), 0);
	memcpy(before, trn_convnet_params(n64), np * sizeof(double));
	memcpy(trn_convnet_params(n32), before, np * sizeof(double));
	trn_dpsgd_params_default(&p);
	p.lot_size = 40;
	p.clip_norm = 0.3;
	p.momentum = 0.0;
	cr_assert_eq(trn_conv_sgd_new(n64, &p, false, &s64, NULL), 0);
	p.precision = TRN_PRECISION_FLOAT32;
	cr_assert_eq(trn_conv_sgd_new(n32, &p, false, &s32, NULL), 0);
	cr_assert_eq(trn_conv_sgd_step(s64, &ds, idx, ds.n, 1.0, rng, NULL), 0);
	cr_assert_eq(trn_conv_sgd_step(s32, &ds, idx, ds.n, 1.0, rng, NULL), 0);
	for (size_t j = 0; j < np; j++) {
		double m64 = trn_convnet_params(n64)[j] - before[j];
		double m32 = trn_convnet_params(n32)[j] - before[j];

		diff += (m32 - m64) * (m32 - m64);
		size += m64 * m64;
	}
	cr_assert_gt(sqrt(size), 1e-3, "the step moved nothing");
	cr_assert_gt(diff, 0.0, "the float32 stepper took the float64 path");
	cr_assert_leq(sqrt(diff), 1e-5 * sqrt(size), "%g of %g", sqrt(diff), sqrt(size));
	trn_conv_sgd_free(s64);
	trn_conv_sgd_free(s32);
	trn_convnet_free(n64);
	trn_convnet_free(n32);
	free(before);
	free(ds.x);
	free(ds.y);
	mech_rng_free(rng);
}

/* "precision": its names, float64 by default, float32 for a cnn only; and
 * clip_norm at least DPG_MIN_CLIP_NORM in every private job, whatever the
 * precision and the model (below it the margin's argument fails by
 * underflow). */
Test(conv_f32, precision_param_checks)
{
	trn_dpsgd_params p;
	trn_precision v = TRN_PRECISION_FLOAT64;
	acct_error err;

	cr_assert_eq(trn_precision_from_name("float32", &v), 0);
	cr_assert_eq(v, TRN_PRECISION_FLOAT32);
	cr_assert_eq(trn_precision_from_name("float16", &v), -1);
	cr_assert_eq(trn_precision_from_name(NULL, &v), -1);
	cr_assert_str_eq(trn_precision_name(TRN_PRECISION_FLOAT64), "float64");
	cr_assert_null(trn_precision_name(2));
	trn_dpsgd_params_default(&p);
	cr_assert_eq(p.precision, TRN_PRECISION_FLOAT64);
	p.precision = TRN_PRECISION_FLOAT32;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/precision");
	p.model = TRN_MODEL_CNN;
	cr_assert_eq(trn_dpsgd_params_validate(&p, NULL), 0);
	p.clip_norm = 0x1p-401;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/clip_norm");
	p.clip_norm = DPG_MIN_CLIP_NORM;
	cr_assert_eq(trn_dpsgd_params_validate(&p, NULL), 0);
	p.precision = TRN_PRECISION_FLOAT64;
	/* float64, the cnn as set above, then the default mlp: the same floor. */
	for (int m = 0; m < 2; m++) {
		if (m == 1)
			trn_dpsgd_params_default(&p);
		p.clip_norm = DPG_MIN_CLIP_NORM;
		acct_error_init(&err);
		cr_assert_eq(trn_dpsgd_params_validate(&p, &err), 0, "model %d: %s %s", (int)p.model,
			     err.where, err.text);
		p.clip_norm = 0x1p-401;
		acct_error_init(&err);
		cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL, "model %d", (int)p.model);
		cr_assert_str_eq(err.where, "/params/clip_norm");
	}
	cr_assert_eq(p.model, TRN_MODEL_MLP);
	p.model = TRN_MODEL_CNN;
	p.clip_norm = 1.0;
	p.precision = (trn_precision)2;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/precision");
}
