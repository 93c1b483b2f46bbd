/*
 * test_dpsgd_features.c: a DP-SGD job's "features" param: the per-row
 * group normalisation against a mean and variance computed here; the
 * scatter table against trn_scatter_apply and that normalisation, row by
 * row (so a changed row changes only its own features); a scatter model's
 * predictions on raw rows against a forward pass written here, before and
 * after the file round trip (version 3); the parameter and shape checks;
 * and the job's event, which scatter features leave unchanged.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "trn.h"
#include "trn_internal.h"
#include "trn_test_rng.h"

static const uint8_t seed_prefix[2] = {0xd9, 0x5f};

#define SIDE 28u
#define PIX (SIDE * SIDE)
#define PLANE 49u
#define NFEAT (TRN_DPSGD_SCATTER_CHANNELS * PLANE)

/* The group normalisation of Wu and He (2018), eq. 1-3, written again
 * here: two sums per group, then (v - mu) / sqrt(var + 1e-5). */
static void reference_group_norm(double *h, size_t channels, size_t plane, size_t groups)
{
	size_t len = channels / groups * plane;

	for (size_t g = 0; g < groups; g++) {
		double s1 = 0.0, s2 = 0.0, mu, var;

		for (size_t i = 0; i < len; i++) {
			s1 += h[g * len + i];
			s2 += h[g * len + i] * h[g * len + i];
		}
		mu = s1 / (double)len;
		var = s2 / (double)len - mu * mu;
		for (size_t i = 0; i < len; i++)
			h[g * len + i] = (h[g * len + i] - mu) / sqrt(var + 1e-5);
	}
}

Test(dpsgd_features, group_norm_closed_form)
{
	/* Two channels of two values, one group: mean 2.5, biased variance
	 * 1.25, so v -> (v - 2.5) / sqrt(1.25 + 1e-5). */
	double h[4] = {1.0, 2.0, 3.0, 4.0};
	double sd = sqrt(1.25 + 1e-5);

	trn__group_normalise(h, 2, 2, 1);
	cr_assert_float_eq(h[0], -1.5 / sd, 1e-15);
	cr_assert_float_eq(h[3], 1.5 / sd, 1e-15);
	/* Two groups: each channel on its own, [5, 7] -> -+1/sqrt(1 + 1e-5). */
	double g[4] = {5.0, 7.0, -1.0, -1.0};

	trn__group_normalise(g, 2, 2, 2);
	cr_assert_float_eq(g[0], -1.0 / sqrt(1.0 + 1e-5), 1e-15);
	cr_assert_float_eq(g[1], 1.0 / sqrt(1.0 + 1e-5), 1e-15);
	cr_assert_float_eq(g[2], 0.0, 1e-15); /* a constant group maps to 0 */
}

Test(dpsgd_features, group_norm_random)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);
	size_t groups[] = {1, 3, 27, 81};

	for (size_t k = 0; k < sizeof(groups) / sizeof(groups[0]); k++) {
		double *a = malloc(NFEAT * sizeof(double)), *b = malloc(NFEAT * sizeof(double));

		cr_assert(a && b);
		for (size_t i = 0; i < NFEAT; i++)
			a[i] = b[i] = 3.0 + 2.0 * trn_test_normal(rng);
		trn__group_normalise(a, TRN_DPSGD_SCATTER_CHANNELS, PLANE, groups[k]);
		reference_group_norm(b, TRN_DPSGD_SCATTER_CHANNELS, PLANE, groups[k]);
		for (size_t i = 0; i < NFEAT; i++)
			cr_assert_float_eq(a[i], b[i], 1e-12, "groups %zu, value %zu", groups[k], i);
		free(a);
		free(b);
	}
	mech_rng_free(rng);
}

/* n random images in [0, 1), labels 0..2. */
static trn_dataset *random_images(mech_rng *rng, size_t n)
{
	trn_dataset *ds = NULL;

	cr_assert_eq(trn_dataset_new(n, PIX, 3, &ds, NULL), 0);
	for (size_t i = 0; i < n * PIX; i++)
		ds->x[i] = trn_test_uniform(rng);
	for (size_t i = 0; i < n; i++)
		ds->y[i] = (uint32_t)trn_test_below(rng, 3);
	return ds;
}

/* The features of one image, from the scattering and the normalisation
 * above. */
static void reference_features(const double *x, uint32_t groups, double *out)
{
	trn_scatter *s = NULL;
	trn_scatter_workspace *w = NULL;

	cr_assert_eq(trn_scatter_new(SIDE, SIDE, 2, 8, &s, NULL), 0);
	cr_assert_eq(trn_scatter_workspace_new(s, &w, NULL), 0);
	cr_assert_eq(trn_scatter_apply(s, x, out, w), 0);
	reference_group_norm(out, TRN_DPSGD_SCATTER_CHANNELS, PLANE, groups);
	trn_scatter_workspace_free(w);
	trn_scatter_free(s);
}

static trn_dpsgd_params scatter_params(void)
{
	trn_dpsgd_params p;

	trn_dpsgd_params_default(&p);
	p.features = TRN_FEATURES_SCATTER;
	p.model = TRN_MODEL_LOGREG;
	p.n_hidden = 0;
	return p;
}

Test(dpsgd_features, table_is_row_by_row)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 2);
	trn_dataset *a = random_images(rng, 5), *b = random_images(rng, 5);
	trn_dataset *fa = NULL, *fb = NULL;
	trn_dpsgd_params p = scatter_params();
	double *ref = malloc(NFEAT * sizeof(double));
	acct_error err;

	acct_error_init(&err);
	cr_assert_not_null(ref);
	/* b is a's neighbour: only row 3 differs. */
	memcpy(b->x, a->x, 5 * PIX * sizeof(double));
	memcpy(b->y, a->y, 5 * sizeof(uint32_t));
	for (size_t j = 0; j < PIX; j++)
		b->x[3 * PIX + j] = trn_test_uniform(rng);
	cr_assert_eq(trn_dpsgd_features_table(&p, a, &fa, &err), 0, "%s", err.text);
	cr_assert_eq(trn_dpsgd_features_table(&p, b, &fb, &err), 0, "%s", err.text);
	cr_assert_eq(fa->d, NFEAT);
	for (size_t i = 0; i < 5; i++) {
		reference_features(a->x + i * PIX, p.scatter_groups, ref);
		cr_assert_eq(fa->y[i], a->y[i]);
		for (size_t j = 0; j < NFEAT; j++)
			cr_assert_float_eq(fa->x[i * NFEAT + j], ref[j], 1e-9, "row %zu feature %zu",
					   i, j);
		/* The neighbour's features differ in row 3 only. */
		cr_assert_eq(memcmp(fa->x + i * NFEAT, fb->x + i * NFEAT, NFEAT * sizeof(double)) == 0,
			     i != 3, "row %zu", i);
	}
	free(ref);
	trn_dataset_free(fa);
	trn_dataset_free(fb);
	trn_dataset_free(a);
	trn_dataset_free(b);
	mech_rng_free(rng);
}

/*
 * Finite cells near DBL_MAX overflow the transform.  The map is total: the
 * neighbour whose row 17 holds +-1e308 maps that row to zeros, every other
 * row as before, and the same job on either table succeeds (the whole job
 * failing on one row would tell that the row was there).
 */
Test(dpsgd_features, extreme_row_maps_to_zeros, .timeout = 120)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 5);
	trn_dataset *a = random_images(rng, 40), *b = random_images(rng, 40);
	trn_dataset *fa = NULL, *fb = NULL;
	trn_dpsgd_params p = scatter_params();
	trn_dpsgd_result *ra = NULL, *rb = NULL;
	acct_error err;

	acct_error_init(&err);
	memcpy(b->x, a->x, 40 * PIX * sizeof(double));
	memcpy(b->y, a->y, 40 * sizeof(uint32_t));
	for (size_t j = 0; j < PIX; j++)
		b->x[17 * PIX + j] = j % 2 ? -1e308 : 1e308;
	cr_assert_eq(trn_dpsgd_features_table(&p, a, &fa, &err), 0, "%s", err.text);
	cr_assert_eq(trn_dpsgd_features_table(&p, b, &fb, &err), 0, "%s", err.text);
	for (size_t i = 0; i < 40; i++) {
		if (i != 17) {
			cr_assert_eq(memcmp(fa->x + i * NFEAT, fb->x + i * NFEAT,
					    NFEAT * sizeof(double)), 0, "row %zu", i);
			continue;
		}
		for (size_t j = 0; j < NFEAT; j++)
			cr_assert_eq(fb->x[i * NFEAT + j], 0.0, "feature %zu", j);
	}
	p.epochs = 1;
	p.lot_size = 20;
	cr_assert_eq(trn_dpsgd_run(&p, a, NULL, rng, NULL, NULL, NULL, &ra, &err), 0, "%s",
		     err.text);
	cr_assert_eq(trn_dpsgd_run(&p, b, NULL, rng, NULL, NULL, NULL, &rb, &err), 0, "%s %s",
		     err.where, err.text);
	trn_dpsgd_result_free(ra);
	trn_dpsgd_result_free(rb);
	rb = NULL;
	/* Raw and PCA rows need no such rule: the non-finite gradient adds zero. */
	p.features = TRN_FEATURES_RAW;
	cr_assert_eq(trn_dpsgd_run(&p, b, NULL, rng, NULL, NULL, NULL, &rb, &err), 0, "%s",
		     err.text);
	trn_dpsgd_result_free(rb);
	rb = NULL;
	p.features = TRN_FEATURES_PCA;
	p.pca_components = 10;
	cr_assert_eq(trn_dpsgd_run(&p, b, NULL, rng, NULL, NULL, NULL, &rb, &err), 0, "%s",
		     err.text);
	trn_dpsgd_result_free(rb);
	trn_dataset_free(fa);
	trn_dataset_free(fb);
	trn_dataset_free(a);
	trn_dataset_free(b);
	mech_rng_free(rng);
}

/* softmax(W f(x) + b) for a one-layer model, f the reference features. */
static void reference_scores(const trn_model *m, const double *x, double *scores)
{
	trn_model_info mi;
	double *f = malloc(NFEAT * sizeof(double)), z[3], mx, sum = 0.0;

	cr_assert_not_null(f);
	trn_model_info_get(m, &mi);
	cr_assert_eq(mi.n_layers, 1);
	cr_assert_eq(mi.widths[0], NFEAT);
	reference_features(x, mi.scatter_groups, f);
	for (size_t k = 0; k < 3; k++) {
		z[k] = mi.params[3 * NFEAT + k];
		for (size_t j = 0; j < NFEAT; j++)
			z[k] += mi.params[k * NFEAT + j] * f[j];
	}
	mx = fmax(z[0], fmax(z[1], z[2]));
	for (size_t k = 0; k < 3; k++)
		sum += exp(z[k] - mx);
	for (size_t k = 0; k < 3; k++)
		scores[k] = exp(z[k] - mx) / sum;
	free(f);
}

Test(dpsgd_features, scatter_model_predicts_raw_rows, .timeout = 120)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 3);
	trn_dataset *tr = random_images(rng, 120), *te = random_images(rng, 4);
	trn_dpsgd_params p = scatter_params();
	trn_dpsgd_result *r = NULL;
	trn_model *back = NULL;
	trn_model_info mi;
	uint8_t *buf = NULL;
	size_t len = 0;
	double got[3], again[3], want[3], acc = NAN;
	acct_error err;

	acct_error_init(&err);
	p.scatter_groups = 9;
	p.epochs = 2;
	p.lot_size = 30;
	p.learning_rate = 0.5;
	cr_assert_eq(trn_dpsgd_run(&p, tr, te, rng, NULL, NULL, NULL, &r, &err), 0, "%s %s",
		     err.where, err.text);
	trn_model_info_get(r->model, &mi);
	cr_assert_eq(mi.feature_rule, TRN_FEATURE_RULE_SCATTER_GROUPNORM);
	cr_assert_eq(mi.input_dim, PIX);
	cr_assert_eq(mi.scatter_groups, 9);
	/* The trained weights are not all zero, so the check below has teeth. */
	cr_assert_gt(fabs(mi.params[0]) + fabs(mi.params[NFEAT + 7]), 0.0);
	cr_assert_eq(trn_model_serialize(r->model, &buf, &len, &err), 0);
	cr_assert_eq(buf[8], 3, "a model with a transform is written as version 3");
	cr_assert_eq(trn_model_deserialize(buf, len, &back, &err), 0, "%s", err.text);
	for (size_t i = 0; i < te->n; i++) {
		reference_scores(r->model, te->x + i * PIX, want);
		cr_assert_eq(trn_model_scores(r->model, te->x + i * PIX, PIX, got, 3, &err), 0);
		cr_assert_eq(trn_model_scores(back, te->x + i * PIX, PIX, again, 3, &err), 0);
		for (size_t k = 0; k < 3; k++) {
			cr_assert_float_eq(got[k], want[k], 1e-9, "row %zu class %zu", i, k);
			cr_assert_eq(got[k], again[k]);
		}
	}
	/* The evaluation the run reported used the same features. */
	cr_assert_eq(trn_model_evaluate(back, te, &acc, NULL, &err), 0);
	cr_assert_float_eq(acc, r->test_accuracy, 1e-12);
	/* A damaged transform block is refused: J = 3 at the block's offset. */
	buf[40 + 4 * 2 + 4 * 1 + 12] = 3;
	trn_model_free(back);
	back = NULL;
	cr_assert_eq(trn_model_deserialize(buf, len, &back, &err), ACCT_EINVAL);
	cr_assert_null(back);
	free(buf);
	trn_dpsgd_result_free(r);
	trn_dataset_free(tr);
	trn_dataset_free(te);
	mech_rng_free(rng);
}

Test(dpsgd_features, params_and_shape)
{
	trn_dpsgd_params p;
	acct_error err;

	acct_error_init(&err);
	trn_dpsgd_params_default(&p);
	cr_assert_eq(p.features, TRN_FEATURES_PCA, "pca stays the default");
	cr_assert_eq(p.scatter_groups, 27);
	p.features = TRN_FEATURES_RAW;
	p.pca_components = 10;
	cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/pca_components");
	p.features = TRN_FEATURES_SCATTER;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL);
	p.pca_components = 0;
	p.scatter_groups = 4;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&p, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/scatter_groups");
	p.scatter_groups = 3;
	cr_assert_eq(trn_dpsgd_params_validate(&p, NULL), 0);
	/* 784 = 28^2 and 64 = 8^2 are images; 100 = 10^2 (10 is not a multiple
	 * of 4) and 785 are not; 32 x 32 gives 81 * 64 > 4096 features. */
	cr_assert_eq(trn_dpsgd_check_shape(&p, 784, 10, NULL), 0);
	cr_assert_eq(trn_dpsgd_check_shape(&p, 64, 10, NULL), 0);
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_check_shape(&p, 100, 10, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/features");
	cr_assert_eq(trn_dpsgd_check_shape(&p, 785, 10, NULL), ACCT_EINVAL);
	cr_assert_eq(trn_dpsgd_check_shape(&p, 1024, 10, NULL), ACCT_EINVAL);
	{
		trn_features f;

		cr_assert_eq(trn_features_from_name("scatter", &f), 0);
		cr_assert_eq(f, TRN_FEATURES_SCATTER);
		cr_assert_eq(trn_features_from_name("raw", &f), 0);
		cr_assert_eq(f, TRN_FEATURES_RAW);
		cr_assert_eq(trn_features_from_name("wavelets", &f), -1);
	}
}

Test(dpsgd_features, event_unchanged_by_scatter)
{
	trn_dpsgd_params p = scatter_params(), q;
	acct_event *a = NULL, *b = NULL;

	q = p;
	q.features = TRN_FEATURES_RAW;
	cr_assert_eq(trn_dpsgd_event(&p, 60000, &a, NULL), 0);
	cr_assert_eq(trn_dpsgd_event(&q, 60000, &b, NULL), 0);
	cr_assert_eq(a->type, ACCT_EV_SELF_COMPOSED);
	cr_assert_eq(a->type, b->type);
	cr_assert_eq(a->u.self_composed.count, b->u.self_composed.count);
	acct_event_free(a);
	acct_event_free(b);
}

Test(dpsgd_features, prepared_needs_scatter)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 4);
	trn_dataset *tr = random_images(rng, 10);
	trn_dpsgd_params p;
	trn_dpsgd_result *r = NULL;
	acct_error err;

	acct_error_init(&err);
	trn_dpsgd_params_default(&p);
	cr_assert_eq(trn_dpsgd_run_prepared(&p, PIX, tr, NULL, rng, NULL, NULL, NULL, &r, &err),
		     ACCT_EINVAL);
	cr_assert_null(r);
	/* Scatter params with a table that is not the features' width. */
	p = scatter_params();
	p.lot_size = 5;
	cr_assert_eq(trn_dpsgd_run_prepared(&p, PIX, tr, NULL, rng, NULL, NULL, NULL, &r, &err),
		     ACCT_EINVAL);
	cr_assert_null(r);
	trn_dataset_free(tr);
	mech_rng_free(rng);
}
