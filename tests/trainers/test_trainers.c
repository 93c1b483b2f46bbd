/*
 * test_trainers.c: data loaders, models, per-example clipping and DP-SGD.
 *
 * Expected values come from finite differences, closed forms or known facts
 * about the data (Fashion-MNIST has 6000 training images per class), never
 * from numbers this code printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <zlib.h>

#include "trn_internal.h"
#include "trn_test_exact.h"
#include "trn_test_rng.h"

/* ---- helpers --------------------------------------------------------------- */

/* This file's streams: trn_test_seeded(seed_prefix, tag). */
static const uint8_t seed_prefix[2] = {0x5e, 0xed};

/* A model with random weights and biases (scale `s`), fixed seed. */
static trn_model *random_model(uint32_t n_layers, const uint32_t *widths, uint32_t act,
			       double s, uint8_t tag)
{
	trn_model *m = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);

	cr_assert_eq(trn__model_new(n_layers, widths, act, &m, NULL), 0);
	cr_assert_eq(mech_rng_normal_fill(rng, m->params, m->n_params), 0);
	for (size_t i = 0; i < m->n_params; i++)
		m->params[i] *= s;
	mech_rng_free(rng);
	return m;
}

static void random_rows(double *x, size_t n, uint32_t *y, size_t rows, uint32_t k,
			uint8_t tag)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);

	cr_assert_eq(mech_rng_normal_fill(rng, x, n), 0);
	for (size_t i = 0; i < rows; i++) {
		uint64_t c;

		cr_assert_eq(mech_rng_uint_below(rng, k, &c), 0);
		y[i] = (uint32_t)c;
	}
	mech_rng_free(rng);
}

/* Central finite-difference gradient of one example's loss. */
static void fd_gradient(trn_model *m, trn__workspace *ws, const double *x, uint32_t y,
			double *g)
{
	const double h = 1e-5;

	for (size_t p = 0; p < m->n_params; p++) {
		double keep = m->params[p], up, down;

		m->params[p] = keep + h;
		up = trn__example_loss(m, ws, x, y);
		m->params[p] = keep - h;
		down = trn__example_loss(m, ws, x, y);
		m->params[p] = keep;
		g[p] = (up - down) / (2 * h);
	}
}

static double norm_range(const double *g, size_t a, size_t b)
{
	double s = 0.0;

	for (size_t i = a; i < b; i++)
		s += g[i] * g[i];
	return sqrt(s);
}

/* ---- gradient checks ----------------------------------------------------------- */

struct gradcase {
	const char *name;
	uint32_t n_layers;
	uint32_t widths[4];
	uint32_t act;
};

static const struct gradcase gradcases[] = {
	{"logreg", 1, {5, 3}, 0},
	{"mlp-relu-1", 2, {5, 7, 3}, TRN_ACT_RELU},
	{"mlp-tanh-1", 2, {4, 6, 3}, TRN_ACT_TANH},
	{"mlp-relu-2", 3, {5, 6, 4, 3}, TRN_ACT_RELU},
	{"mlp-tanh-2", 3, {4, 5, 4, 2}, TRN_ACT_TANH},
};

#define GC_ROWS 8

static void check_case(const struct gradcase *c, uint8_t tag)
{
	trn_model *m = random_model(c->n_layers, c->widths, c->act, 0.7, tag);
	trn__workspace *ws = NULL;
	size_t d = c->widths[0], P = m->n_params;
	double x[GC_ROWS * 8], norms[GC_ROWS], loss_sum;
	uint32_t y[GC_ROWS];
	double *fd = calloc(GC_ROWS * P, sizeof(double));
	double *g1 = calloc(P, sizeof(double)), *sum = calloc(P, sizeof(double));
	double *want = calloc(P, sizeof(double));
	trn__clip noclip = {false, TRN_CLIP_GLOBAL, 0.0};
	double C, sorted[GC_ROWS];

	random_rows(x, GC_ROWS * d, y, GC_ROWS, c->widths[c->n_layers], tag + 100);
	cr_assert_eq(trn__workspace_new(m, GC_ROWS, &ws, NULL), 0);
	for (size_t i = 0; i < GC_ROWS; i++)
		fd_gradient(m, ws, x + i * d, y[i], fd + i * P);

	/* Explicit per-example gradients (batches of one) against FD. */
	for (size_t i = 0; i < GC_ROWS; i++) {
		memset(g1, 0, P * sizeof(double));
		memcpy(ws->act[0], x + i * d, d * sizeof(double));
		trn__chunk_gradient(m, ws, y + i, 1, &noclip, g1, NULL, NULL, NULL);
		for (size_t p = 0; p < P; p++)
			cr_assert(fabs(g1[p] - fd[i * P + p]) < 1e-6 * (1 + fabs(fd[i * P + p])),
				  "%s: example %zu param %zu: %g vs FD %g", c->name, i, p, g1[p],
				  fd[i * P + p]);
	}

	/* Norm trick against the FD norms, and the unclipped batch sum. */
	memcpy(ws->act[0], x, GC_ROWS * d * sizeof(double));
	trn__chunk_gradient(m, ws, y, GC_ROWS, &noclip, sum, norms, &loss_sum, NULL);
	for (size_t i = 0; i < GC_ROWS; i++) {
		double want_norm = norm_range(fd + i * P, 0, P);

		cr_assert(fabs(norms[i] - want_norm) < 1e-6 * (1 + want_norm),
			  "%s: norm of example %zu: %g vs FD %g", c->name, i, norms[i], want_norm);
		sorted[i] = want_norm;
	}
	for (size_t p = 0; p < P; p++) {
		double s = 0.0;

		for (size_t i = 0; i < GC_ROWS; i++)
			s += fd[i * P + p];
		cr_assert(fabs(sum[p] - s) < 1e-6 * (1 + fabs(s)), "%s: sum param %zu", c->name, p);
	}

	/* Global clipping at a C between the smallest and largest norms. */
	for (size_t i = 0; i < GC_ROWS; i++)
		for (size_t j = i + 1; j < GC_ROWS; j++)
			if (sorted[j] < sorted[i]) {
				double t = sorted[i];

				sorted[i] = sorted[j];
				sorted[j] = t;
			}
	C = 0.5 * (sorted[GC_ROWS / 2 - 1] + sorted[GC_ROWS / 2]);
	cr_assert(sorted[GC_ROWS - 1] > C && sorted[0] < C);
	{
		trn__clip clip = {true, TRN_CLIP_GLOBAL, C};

		memset(sum, 0, P * sizeof(double));
		memset(want, 0, P * sizeof(double));
		for (size_t i = 0; i < GC_ROWS; i++) {
			double n = norm_range(fd + i * P, 0, P), f = n > C ? C / n : 1.0;

			for (size_t p = 0; p < P; p++)
				want[p] += f * fd[i * P + p];
		}
		memcpy(ws->act[0], x, GC_ROWS * d * sizeof(double));
		trn__chunk_gradient(m, ws, y, GC_ROWS, &clip, sum, NULL, NULL, NULL);
		for (size_t p = 0; p < P; p++)
			cr_assert(fabs(sum[p] - want[p]) < 1e-6 * (1 + fabs(want[p])),
				  "%s: globally clipped sum, param %zu: %g vs %g", c->name, p, sum[p],
				  want[p]);
	}
	/* Per-layer clipping: each layer's slice to C / sqrt(K). */
	{
		trn__clip clip = {true, TRN_CLIP_PER_LAYER, C};
		double cl = C / sqrt((double)m->n_layers);

		memset(sum, 0, P * sizeof(double));
		memset(want, 0, P * sizeof(double));
		for (size_t i = 0; i < GC_ROWS; i++)
			for (uint32_t l = 0; l < m->n_layers; l++) {
				size_t a = m->w_off[l], b = m->b_off[l] + m->dims[l + 1];
				double n = norm_range(fd + i * P, a, b), f = n > cl ? cl / n : 1.0;

				for (size_t p = a; p < b; p++)
					want[p] += f * fd[i * P + p];
			}
		memcpy(ws->act[0], x, GC_ROWS * d * sizeof(double));
		trn__chunk_gradient(m, ws, y, GC_ROWS, &clip, sum, NULL, NULL, NULL);
		for (size_t p = 0; p < P; p++)
			cr_assert(fabs(sum[p] - want[p]) < 1e-6 * (1 + fabs(want[p])),
				  "%s: per-layer clipped sum, param %zu", c->name, p);
	}
	free(fd);
	free(g1);
	free(sum);
	free(want);
	trn__workspace_free(ws);
	trn_model_free(m);
}

Test(gradients, per_example_norm_trick_and_clipping_match_finite_differences)
{
	for (size_t i = 0; i < sizeof(gradcases) / sizeof(gradcases[0]); i++)
		check_case(&gradcases[i], (uint8_t)(i + 1));
}

/* Closed form: a zero softmax regression predicts 1/K, so every loss is
 * log K and the gradient of example i is (1/K - [j = y_i]) x_i (and bias). */
Test(gradients, zero_logreg_closed_form)
{
	uint32_t widths[2] = {3, 4};
	trn_model *m = NULL;
	trn__workspace *ws = NULL;
	double x[2 * 3] = {1, 2, 3, -1, 0.5, 0}, grad[3 * 4 + 4] = {0}, loss;
	uint32_t y[2] = {2, 0};
	trn__clip noclip = {false, TRN_CLIP_GLOBAL, 0.0};

	cr_assert_eq(trn__model_new(1, widths, 0, &m, NULL), 0);
	cr_assert_eq(trn__workspace_new(m, 2, &ws, NULL), 0);
	memcpy(ws->act[0], x, sizeof(x));
	trn__chunk_gradient(m, ws, y, 2, &noclip, grad, NULL, &loss, NULL);
	cr_assert_float_eq(loss, 2 * log(4.0), 1e-12);
	for (int j = 0; j < 4; j++) {
		for (int f = 0; f < 3; f++) {
			double want = 0.0;

			for (int i = 0; i < 2; i++)
				want += (0.25 - (y[i] == (uint32_t)j)) * x[i * 3 + f];
			cr_assert_float_eq(grad[j * 3 + f], want, 1e-12);
		}
		cr_assert_float_eq(grad[12 + j], 0.5 - (y[0] == (uint32_t)j) - (y[1] == (uint32_t)j),
				   1e-12);
	}
	trn__workspace_free(ws);
	trn_model_free(m);
}

/* ---- clipping bounds the influence of one example --------------------------- */

/*
 * One example against B others: a 6-8-4 relu model with random weights
 * (seed model_tag) and B + 1 random rows (seed rows_tag), of which the
 * caller spoils the last; `with` and `without` take the clipped gradient
 * sums over all the rows and over the first B.
 */
enum { OUTLIER_B = 16 };

typedef struct outlier_case {
	trn_model *m;
	trn__workspace *ws;
	double x[(OUTLIER_B + 1) * 6];
	uint32_t y[OUTLIER_B + 1];
	double *with, *without;
	trn__clip clip;
} outlier_case;

static void outlier_case_make(outlier_case *oc, trn_clipping mode, double C, uint8_t model_tag,
			      uint8_t rows_tag)
{
	uint32_t widths[3] = {6, 8, 4};

	oc->m = random_model(2, widths, TRN_ACT_RELU, 0.5, model_tag);
	oc->ws = NULL;
	oc->with = calloc(oc->m->n_params, sizeof(double));
	oc->without = calloc(oc->m->n_params, sizeof(double));
	oc->clip = (trn__clip){true, mode, C};
	random_rows(oc->x, (OUTLIER_B + 1) * 6, oc->y, OUTLIER_B + 1, 4, rows_tag);
	cr_assert_eq(trn__workspace_new(oc->m, OUTLIER_B + 1, &oc->ws, NULL), 0);
}

/* Adds the clipped gradients of the first n rows to sum (norms: theirs). */
static void outlier_case_sum(outlier_case *oc, size_t n, double *sum, double *norms)
{
	memcpy(oc->ws->act[0], oc->x, n * 6 * sizeof(double));
	trn__chunk_gradient(oc->m, oc->ws, oc->y, n, &oc->clip, sum, norms, NULL, NULL);
}

static void outlier_case_free(outlier_case *oc)
{
	free(oc->with);
	free(oc->without);
	trn__workspace_free(oc->ws);
	trn_model_free(oc->m);
}

static void clip_influence(trn_clipping mode)
{
	enum { B = OUTLIER_B };
	const double C = 0.1;
	outlier_case oc;
	double norms[B + 1], diff = 0.0;

	outlier_case_make(&oc, mode, C, 40, 41);
	for (int j = 0; j < 6; j++)
		oc.x[B * 6 + j] *= 1e6; /* the outlier */
	/* Give the outlier a label its saturated softmax gets wrong. */
	for (uint32_t c = 0; c < 4; c++) {
		oc.y[B] = c;
		memset(oc.with, 0, oc.m->n_params * sizeof(double));
		outlier_case_sum(&oc, B + 1, oc.with, norms);
		if (norms[B] > 1e3 * C)
			break;
	}
	cr_assert(norms[B] > 1e3 * C, "the outlier's gradient must be huge: %g", norms[B]);
	outlier_case_sum(&oc, B, oc.without, NULL);
	for (size_t p = 0; p < oc.m->n_params; p++)
		diff += (oc.with[p] - oc.without[p]) * (oc.with[p] - oc.without[p]);
	diff = sqrt(diff);
	cr_assert(diff <= C * (1 + 1e-12), "one example moved the sum by %g > C = %g", diff, C);
	cr_assert(diff > 0.5 * C, "a clipped huge gradient still has norm about C: %g", diff);
	outlier_case_free(&oc);
}

Test(clipping, one_huge_example_moves_sum_by_at_most_C_global)
{
	clip_influence(TRN_CLIP_GLOBAL);
}

Test(clipping, one_huge_example_moves_sum_by_at_most_C_per_layer)
{
	clip_influence(TRN_CLIP_PER_LAYER);
}

/*
 * DP-SGD's sensitivity on random neighbours (docs/training.md,
 * "Sensitivity" and "The lot's sum"): a lot and the lot without one of
 * its rows, chosen at random, have clipped sums at most C apart in L2,
 * global and per-layer, on random models, rows of scale 0.01 to 1e6 and
 * C from 0.01 to 1; the rounding of the two sums (16 rows) stays far
 * below 1e-12 C.  Large rows are clipped to C, so the bound is reached.
 */
static void random_neighbours_within_c(trn_clipping mode)
{
	enum { B = OUTLIER_B + 1, TRIALS = 60 };
	static const double scales[4] = {0.01, 1.0, 100.0, 1e6}, cs[3] = {0.01, 0.1, 1.0};
	double worst = 0.0;

	for (int trial = 0; trial < TRIALS; trial++) {
		outlier_case oc;
		double C = cs[trial % 3], diff = 0.0;
		size_t drop = (size_t)trial % B;

		outlier_case_make(&oc, mode, C, (uint8_t)(120 + trial % 7), (uint8_t)(130 + trial));
		for (size_t i = 0; i < B * 6; i++)
			oc.x[i] *= scales[(i / 6 + (size_t)trial) % 4];
		outlier_case_sum(&oc, B, oc.with, NULL);
		/* The neighbour: row `drop` removed, the others in their order. */
		memmove(oc.x + drop * 6, oc.x + (drop + 1) * 6, (B - 1 - drop) * 6 * sizeof(double));
		memmove(oc.y + drop, oc.y + drop + 1, (B - 1 - drop) * sizeof(uint32_t));
		outlier_case_sum(&oc, B - 1, oc.without, NULL);
		for (size_t p = 0; p < oc.m->n_params; p++)
			diff += (oc.with[p] - oc.without[p]) * (oc.with[p] - oc.without[p]);
		diff = sqrt(diff);
		cr_assert_leq(diff, C * (1 + 1e-12), "trial %d: removing row %zu moved the sum by %g > C = %g",
			      trial, drop, diff, C);
		worst = fmax(worst, diff / C);
		outlier_case_free(&oc);
	}
	cr_assert_gt(worst, 0.99, "no neighbour came near C: %g C", worst);
}

Test(clipping, random_neighbouring_lots_differ_by_at_most_C_global)
{
	random_neighbours_within_c(TRN_CLIP_GLOBAL);
}

Test(clipping, random_neighbouring_lots_differ_by_at_most_C_per_layer)
{
	random_neighbours_within_c(TRN_CLIP_PER_LAYER);
}

/*
 * An example whose gradient overflows (features near DBL_MAX: the norm is inf
 * or NaN, and NaN escaped the clipping comparison unclipped) contributes
 * nothing: the clipped sum with it is the sum without it, and finite.
 */
static void non_finite_example(trn_clipping mode)
{
	enum { B = OUTLIER_B };
	outlier_case oc;

	outlier_case_make(&oc, mode, 0.1, 42, 43);
	for (int j = 0; j < 6; j++)
		oc.x[B * 6 + j] = 1.7e308;
	outlier_case_sum(&oc, B + 1, oc.with, NULL);
	outlier_case_sum(&oc, B, oc.without, NULL);
	for (size_t p = 0; p < oc.m->n_params; p++) {
		cr_assert(isfinite(oc.with[p]), "parameter %zu: %g", p, oc.with[p]);
		cr_assert_eq(oc.with[p], oc.without[p], "parameter %zu", p);
	}
	outlier_case_free(&oc);
}

Test(clipping, a_non_finite_example_contributes_nothing_global)
{
	non_finite_example(TRN_CLIP_GLOBAL);
}

Test(clipping, a_non_finite_example_contributes_nothing_per_layer)
{
	non_finite_example(TRN_CLIP_PER_LAYER);
}

/*
 * Example 0's clipped contribution as summed, layer by layer: the exact
 * squared norm of fl(c delta) a^T and fl(c delta), ||fl(c delta)||^2
 * (||a||^2 + 1), from the scaled errors and activations the chunk leaves
 * in the workspace, in double-double.
 */
static trn_test_dd contribution_sq(const trn_model *m, const trn__workspace *ws, uint32_t l)
{
	return trn_test_dd_mul(trn_test_sqsum(ws->delta[l], m->dims[l + 1], 0.0),
			       trn_test_sqsum(ws->act[l], m->dims[l], 1.0));
}

/* Runs example x alone with clipping `clip`; returns the number of bounds
 * it checked: the whole contribution within C (global), or each layer's
 * within C / sqrt(L) (per layer), exactly. */
static int check_one_clipped(const trn_model *m, trn__workspace *ws, const double *x,
			     uint32_t y, const trn__clip *clip, double *grad)
{
	uint32_t L = m->n_layers;
	trn_test_dd total = {0.0, 0.0};
	int checked = 0;

	memcpy(ws->act[0], x, m->dims[0] * sizeof(double));
	trn__chunk_gradient(m, ws, &y, 1, clip, grad, NULL, NULL, NULL);
	for (uint32_t l = 0; l < L; l++) {
		trn_test_dd sq = contribution_sq(m, ws, l);

		total = trn_test_dd_add(total, sq);
		if (clip->mode == TRN_CLIP_PER_LAYER) {
			/* L ||v_l||^2 <= C^2, L exact in double-double. */
			sq = trn_test_dd_mul(sq, (trn_test_dd){(double)L, 0.0});
			cr_assert_leq(trn_test_excess_over_c2(sq, clip->clip_norm), 0.0,
				      "layer %u of %u over C / sqrt(L), C = %.17g", l, L,
				      clip->clip_norm);
			checked++;
		}
	}
	cr_assert_leq(trn_test_excess_over_c2(total, clip->clip_norm), 0.0,
		      "contribution over C = %.17g (%s)", clip->clip_norm,
		      clip->mode == TRN_CLIP_PER_LAYER ? "per layer" : "global");
	return checked + 1;
}

/*
 * Every example's clipped contribution, as the matmul sums it, has exact
 * norm at most C (docs/training.md, "Clipping in floating point"): on
 * random models up to 60 units wide and random rows, with C a third of
 * the computed norm (clipped) and C the computed norm itself (global), or
 * sqrt(L) times a layer's computed norm (per layer), where without the
 * margin the exact norm exceeds C for a good share of the rows.
 */
static void every_contribution_within_c(trn_clipping mode)
{
	static const uint32_t shapes[4][4] = {{20, 5}, {30, 60, 4}, {12, 40, 25, 3}, {60, 10}};
	static const uint32_t layers[4] = {1, 2, 3, 1};
	mech_rng *rng = trn_test_seeded(seed_prefix, 60 + (uint8_t)mode);
	int checked = 0;

	for (int trial = 0; trial < 16; trial++) {
		uint32_t L = layers[trial % 4], act = trial % 2 ? TRN_ACT_TANH : TRN_ACT_RELU;
		trn_model *m = random_model(L, shapes[trial % 4], act, 0.5, (uint8_t)(70 + trial));
		trn__workspace *ws = NULL;
		double x[64], norm, *grad = calloc(m->n_params, sizeof(double));

		cr_assert(grad);
		cr_assert_eq(trn__workspace_new(m, 1, &ws, NULL), 0);
		for (int row = 0; row < 40; row++) {
			uint32_t y = (uint32_t)trn_test_below(rng, m->dims[L]);
			trn__clip noclip = {false, mode, 0.0};

			for (uint32_t j = 0; j < m->dims[0]; j++)
				x[j] = (row % 2 ? 3.0 : 0.4) * trn_test_normal(rng);
			memcpy(ws->act[0], x, m->dims[0] * sizeof(double));
			trn__chunk_gradient(m, ws, &y, 1, &noclip, grad, &norm, NULL, NULL);
			cr_assert(isfinite(norm) && norm > 0.0);
			for (int k = 0; k < 2; k++) {
				trn__clip clip = {true, mode, k == 0 ? norm / 3.0 : norm};

				if (k == 1 && mode == TRN_CLIP_PER_LAYER)
					/* ws->sq still holds the unclipped run's terms. */
					clip.clip_norm = sqrt(ws->sq[row % L][0]) * sqrt((double)L);
				checked += check_one_clipped(m, ws, x, y, &clip, grad);
			}
		}
		trn__workspace_free(ws);
		trn_model_free(m);
		free(grad);
	}
	cr_assert_geq(checked, 16 * 40 * 2);
	mech_rng_free(rng);
}

Test(clipping, every_contribution_has_exact_norm_at_most_C_global)
{
	every_contribution_within_c(TRN_CLIP_GLOBAL);
}

Test(clipping, every_contribution_has_exact_norm_at_most_C_per_layer)
{
	every_contribution_within_c(TRN_CLIP_PER_LAYER);
}

/* sum_k v_k^2 + extra in long double, whose exponent range (x86's 15
 * bits) takes squares near 2^-1100 without underflow. */
static long double sqsum_ld(const double *v, size_t n, long double extra)
{
	long double s = extra;

	for (size_t k = 0; k < n; k++)
		s += (long double)v[k] * v[k];
	return s;
}

/*
 * An example the model is sure of: its logits (0, -380, -400) on features
 * 2^300 give output errors (0, e^-380, e^-400), about 2^-548, whose
 * squares underflow to 0 in double while the contribution's norm is about
 * 2^-247.  With C = 2^-390 and 2^-300 (accepted: at least
 * DPG_MIN_CLIP_NORM) the contribution summed, fl(c delta) a^T per layer,
 * and the gradient itself stay within C, checked in long double; a norm
 * computed from the squares as they are, 0, left it unclipped, 2^143
 * times C.  A one-layer model and one with a ReLU layer that passes the
 * features on; global and per-layer clipping.
 */
static void errors_whose_squares_underflow(trn_clipping mode)
{
	static const uint32_t shapes[2][3] = {{4, 3}, {4, 4, 3}};
	static const double cs[2] = {0x1p-390, 0x1p-300};

	cr_assert(LDBL_MIN_EXP < -1200, "long double has no wider exponent range here");
	for (uint32_t L = 1; L <= 2; L++) {
		trn_model *m = NULL;
		trn__workspace *ws = NULL;
		double x[4] = {0x1p300, 0x1p300, 0x1p300, 0x1p300};
		double *grad = NULL, *w;
		uint32_t y = 0;

		cr_assert_eq(trn__model_new(L, shapes[L - 1], TRN_ACT_RELU, &m, NULL), 0);
		cr_assert_eq(trn__workspace_new(m, 1, &ws, NULL), 0);
		grad = calloc(m->n_params, sizeof(double));
		cr_assert(grad);
		memset(m->params, 0, m->n_params * sizeof(double));
		for (uint32_t j = 0; L == 2 && j < 4; j++)
			m->params[m->w_off[0] + j * 4 + j] = 1.0;
		w = m->params + m->w_off[L - 1];
		w[1 * 4] = -380.0 * 0x1p-300;
		w[2 * 4] = -400.0 * 0x1p-300;
		for (int k = 0; k < 2; k++) {
			trn__clip clip = {true, mode, cs[k]};
			long double total = 0.0L, g;

			memset(grad, 0, m->n_params * sizeof(double));
			memcpy(ws->act[0], x, sizeof(x));
			trn__chunk_gradient(m, ws, &y, 1, &clip, grad, NULL, NULL, NULL);
			cr_assert_gt(ws->delta[L - 1][1], 0.0, "the errors were cleared");
			for (uint32_t l = 0; l < L; l++) {
				long double part = sqsum_ld(ws->delta[l], m->dims[l + 1], 0.0L) *
						   sqsum_ld(ws->act[l], m->dims[l], 1.0L);
				long double cap = mode == TRN_CLIP_PER_LAYER ?
							  (long double)cs[k] * cs[k] / L :
							  (long double)cs[k] * cs[k];

				cr_assert_leq(part, cap * (1.0L + 0x1p-60L),
					      "L %u, layer %u: %Lg times its bound", L, l,
					      sqrtl(part / cap));
				total += part;
			}
			g = sqsum_ld(grad, m->n_params, 0.0L);
			cr_assert_leq(total, (long double)cs[k] * cs[k] * (1.0L + 0x1p-60L),
				      "L %u: the contribution is %Lg times C", L,
				      sqrtl(total) / cs[k]);
			cr_assert_leq(g, (long double)cs[k] * cs[k] * (1.0L + 0x1p-40L),
				      "L %u: the gradient is %Lg times C", L, sqrtl(g) / cs[k]);
			/* Clipped to C, not to nothing. */
			cr_assert_gt(sqrtl(g), 0.5L * cs[k], "L %u: %Lg", L, sqrtl(g) / cs[k]);
		}
		free(grad);
		trn__workspace_free(ws);
		trn_model_free(m);
	}
}

Test(clipping, errors_whose_squares_underflow_are_still_clipped_global)
{
	errors_whose_squares_underflow(TRN_CLIP_GLOBAL);
}

Test(clipping, errors_whose_squares_underflow_are_still_clipped_per_layer)
{
	errors_whose_squares_underflow(TRN_CLIP_PER_LAYER);
}

/* ---- the privacy event -------------------------------------------------------- */

static void assert_sgd_event(const acct_event *ev, int64_t count, double q, double sigma)
{
	cr_assert_eq(ev->type, ACCT_EV_SELF_COMPOSED);
	cr_assert_eq(ev->u.self_composed.count, count);
	ev = ev->u.self_composed.event;
	cr_assert_eq(ev->type, ACCT_EV_POISSON_SAMPLED);
	cr_assert_eq(ev->u.poisson_sampled.sampling_probability, q);
	ev = ev->u.poisson_sampled.event;
	cr_assert_eq(ev->type, ACCT_EV_GAUSSIAN);
	cr_assert_eq(ev->u.gaussian.noise_multiplier, sigma);
}

Test(event, equals_hand_built_event)
{
	trn_dpsgd_params p;
	acct_event *ev = NULL;

	trn_dpsgd_params_default(&p);
	p.epochs = 10;
	p.lot_size = 600;
	p.noise_multiplier = 1.1;
	/* N = 60000: T = 10 * 60000 / 600 = 1000, q = 0.01. */
	cr_assert_eq(trn_dpsgd_event(&p, 60000, &ev, NULL), 0);
	assert_sgd_event(ev, 1000, 600.0 / 60000.0, 1.1);
	acct_event_free(ev);
	/* N = 59999: T = ceil(599990 / 600) = 1000 (rounded up over the run). */
	cr_assert_eq(trn_dpsgd_event(&p, 59999, &ev, NULL), 0);
	assert_sgd_event(ev, 1000, 600.0 / 59999.0, 1.1);
	acct_event_free(ev);
	/* N = 60001: ceil(600010 / 600) = 1001. */
	cr_assert_eq(trn_dpsgd_event(&p, 60001, &ev, NULL), 0);
	assert_sgd_event(ev, 1001, 600.0 / 60001.0, 1.1);
	acct_event_free(ev);
	/* max_train_examples counts an epoch as N = 30000 examples, T = 10 *
	 * 30000 / 600 = 500 steps, but every step samples from all 60000 rows:
	 * q = 600 / 60000 (taking the first N rows made a removed row swap
	 * another in, a change of two where the event is priced for one). */
	p.max_train_examples = 30000;
	cr_assert_eq(trn_dpsgd_event(&p, 60000, &ev, NULL), 0);
	assert_sgd_event(ev, 500, 600.0 / 60000.0, 1.1);
	acct_event_free(ev);
	/* With DP-PCA: composed([gaussian(sigma_p), sgd]). */
	p.pca_components = 60;
	p.pca_noise_multiplier = 7.0;
	cr_assert_eq(trn_dpsgd_event(&p, 60000, &ev, NULL), 0);
	cr_assert_eq(ev->type, ACCT_EV_COMPOSED);
	cr_assert_eq(ev->u.composed.n, 2);
	cr_assert_eq(ev->u.composed.events[0]->type, ACCT_EV_GAUSSIAN);
	cr_assert_eq(ev->u.composed.events[0]->u.gaussian.noise_multiplier, 7.0);
	assert_sgd_event(ev->u.composed.events[1], 500, 600.0 / 60000.0, 1.1);
	acct_event_free(ev);
	/* A job stopped after 123 steps. */
	cr_assert_eq(trn_dpsgd_event_for_steps(&p, 60000, 123, &ev, NULL), 0);
	assert_sgd_event(ev->u.composed.events[1], 123, 600.0 / 60000.0, 1.1);
	acct_event_free(ev);
	cr_assert_eq(trn_dpsgd_event_for_steps(&p, 60000, 0, &ev, NULL), 0);
	cr_assert_eq(ev->type, ACCT_EV_GAUSSIAN);
	acct_event_free(ev);
	p.pca_components = 0;
	ev = (acct_event *)1;
	cr_assert_eq(trn_dpsgd_event_for_steps(&p, 60000, 0, &ev, NULL), 0);
	cr_assert_null(ev);
}

struct badparam {
	const char *where;
	void (*spoil)(trn_dpsgd_params *p);
	uint64_t n;
};

static void sp_lot(trn_dpsgd_params *p) { p->lot_size = 70000; }
static void sp_lot0(trn_dpsgd_params *p) { p->lot_size = 0; }
static void sp_sigma(trn_dpsgd_params *p) { p->noise_multiplier = 0.0; }
static void sp_sigma_nan(trn_dpsgd_params *p) { p->noise_multiplier = NAN; }
static void sp_clip(trn_dpsgd_params *p) { p->clip_norm = -1.0; }
static void sp_hidden(trn_dpsgd_params *p) { p->model = TRN_MODEL_LOGREG; }
static void sp_hidden_wide(trn_dpsgd_params *p) { p->hidden[0] = DPG_MAX_HIDDEN_UNITS + 1; }
static void sp_steps(trn_dpsgd_params *p) { p->epochs = DPG_MAX_EPOCHS; p->lot_size = 1; }
static void sp_lr(trn_dpsgd_params *p) { p->learning_rate = INFINITY; }
static void sp_pca(trn_dpsgd_params *p) { p->pca_components = 10; p->pca_noise_multiplier = 0; }
static void sp_momentum(trn_dpsgd_params *p) { p->momentum = 1.0; }
static void sp_model(trn_dpsgd_params *p) { p->model = (trn_model_kind)7; }

static const struct badparam badparams[] = {
	{"/params/lot_size", sp_lot, 60000},
	{"/params/lot_size", sp_lot0, 60000},
	{"/params/noise_multiplier", sp_sigma, 60000},
	{"/params/noise_multiplier", sp_sigma_nan, 60000},
	{"/params/clip_norm", sp_clip, 60000},
	{"/params/hidden", sp_hidden, 60000},
	{"/params/hidden", sp_hidden_wide, 60000},
	{"/params/epochs", sp_steps, 60000},
	{"/params/learning_rate", sp_lr, 60000},
	{"/params/pca_noise_multiplier", sp_pca, 60000},
	{"/params/momentum", sp_momentum, 60000},
	{"/params/model", sp_model, 60000},
};

Test(event, bad_params_name_their_field)
{
	for (size_t i = 0; i < sizeof(badparams) / sizeof(badparams[0]); i++) {
		trn_dpsgd_params p;
		acct_error err;
		acct_event *ev = NULL;

		trn_dpsgd_params_default(&p);
		badparams[i].spoil(&p);
		acct_error_init(&err);
		cr_assert_eq(trn_dpsgd_event(&p, badparams[i].n, &ev, &err), ACCT_EINVAL,
			     "case %zu", i);
		cr_assert_null(ev);
		cr_assert_str_eq(err.where, badparams[i].where, "case %zu: %s", i, err.text);
	}
}

/* ---- helpers every trainer shares (trn_common.c) ------------------------------ */

Test(common, names_map_every_json_string_and_nothing_else)
{
	trn_model_kind mk = TRN_MODEL_MLP;
	trn_activation act = TRN_ACT_RELU;
	trn_clipping clip = TRN_CLIP_GLOBAL;
	trn_ensemble_algorithm alg = TRN_ENSEMBLE_SOFT_LABEL;
	trn_local_model lm = TRN_LOCAL_LOGREG;
	static const char *const locals[] = {"logreg", "linear_svm", "gaussian_nb", "knn",
					     "decision_tree"};
	static const trn__name table[] = {{"a", 7}, {"b", 0}};

	cr_assert_eq(trn__name_lookup(table, 2, "a"), 7);
	cr_assert_eq(trn__name_lookup(table, 2, "b"), 0);
	cr_assert_eq(trn__name_lookup(table, 1, "b"), -1, "looks past n");
	cr_assert_eq(trn__name_lookup(table, 2, NULL), -1);
	cr_assert(trn_model_kind_from_name("logreg", &mk) == 0 && mk == TRN_MODEL_LOGREG);
	cr_assert(trn_model_kind_from_name("mlp", &mk) == 0 && mk == TRN_MODEL_MLP);
	cr_assert(trn_label_em_model_from_name("linear", &mk) == 0 && mk == TRN_MODEL_LOGREG);
	cr_assert(trn_label_em_model_from_name("mlp", &mk) == 0 && mk == TRN_MODEL_MLP);
	cr_assert(trn_activation_from_name("tanh", &act) == 0 && act == TRN_ACT_TANH);
	cr_assert(trn_activation_from_name("relu", &act) == 0 && act == TRN_ACT_RELU);
	cr_assert(trn_clipping_from_name("per_layer", &clip) == 0 && clip == TRN_CLIP_PER_LAYER);
	cr_assert(trn_clipping_from_name("global", &clip) == 0 && clip == TRN_CLIP_GLOBAL);
	cr_assert(trn_ensemble_algorithm_from_name("majority_vote", &alg) == 0 &&
		  alg == TRN_ENSEMBLE_MAJORITY_VOTE);
	cr_assert(trn_ensemble_algorithm_from_name("soft_label", &alg) == 0 &&
		  alg == TRN_ENSEMBLE_SOFT_LABEL);
	for (size_t i = 0; i < sizeof(locals) / sizeof(locals[0]); i++)
		cr_assert(trn_local_model_from_name(locals[i], &lm) == 0 && lm == (trn_local_model)i,
			  "%s", locals[i]);
	/* A miss leaves the output alone: lm is still decision_tree. */
	cr_assert_eq(trn_local_model_from_name("forest", &lm), -1);
	cr_assert_eq(trn_model_kind_from_name("linear", &mk), -1);
	cr_assert_eq(trn_label_em_model_from_name("logreg", &mk), -1);
	cr_assert_eq(trn_activation_from_name("sigmoid", &act), -1);
	cr_assert_eq(trn_clipping_from_name(NULL, &clip), -1);
	cr_assert_eq(trn_ensemble_algorithm_from_name("", &alg), -1);
	cr_assert(lm == TRN_LOCAL_DECISION_TREE && mk == TRN_MODEL_MLP && act == TRN_ACT_RELU);
}

Test(common, count_and_positive_checks_bound_and_name_the_field)
{
	acct_error err;

	cr_assert_eq(trn__check_count(2, 2, 9, "/params/clusters", NULL), 0);
	cr_assert_eq(trn__check_count(9, 2, 9, "/params/clusters", NULL), 0);
	cr_assert_eq(trn__check_count(10, 2, 9, "/params/clusters", NULL), ACCT_EINVAL);
	acct_error_init(&err);
	cr_assert_eq(trn__check_count(1, 2, 9, "/params/clusters", &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/clusters");
	cr_assert_str_eq(err.text, "clusters must be 2 to 9");

	cr_assert_eq(trn__check_positive(1e-300, 5.0, "/params/rho", NULL), 0);
	cr_assert_eq(trn__check_positive(5.0, 5.0, "/params/rho", NULL), 0);
	cr_assert_eq(trn__check_positive(nextafter(5.0, 6.0), 5.0, "/params/rho", NULL),
		     ACCT_EINVAL);
	cr_assert_eq(trn__check_positive(-0.0, 5.0, "/params/rho", NULL), ACCT_EINVAL);
	cr_assert_eq(trn__check_positive(NAN, 5.0, "/params/rho", NULL), ACCT_EINVAL);
	cr_assert_eq(trn__check_positive(INFINITY, INFINITY, "/params/rho", NULL), ACCT_EINVAL);
	acct_error_init(&err);
	cr_assert_eq(trn__check_positive(0.0, 5.0, "/params/rho", &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/rho");
	cr_assert_str_eq(err.text, "rho must be > 0 and at most 5");
}

/* The public validators word their errors as they did before the checks
 * were shared (the texts reach clients in problem+json). */
Test(common, validators_keep_their_wording)
{
	trn_dpsgd_params dp;
	trn_label_em_params lp;
	trn_slmc_params sp;
	acct_error err;
	char want[3][80];

	snprintf(want[0], sizeof(want[0]), "lot_size must be 1 to %d", DPG_MAX_LOT_SIZE);
	snprintf(want[1], sizeof(want[1]), "hidden layer widths are 1 to %d",
		 DPG_MAX_HIDDEN_UNITS);
	snprintf(want[2], sizeof(want[2]), "epochs must be 1 to %d", DPG_MAX_EPOCHS);

	trn_dpsgd_params_default(&dp);
	dp.lot_size = 0;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&dp, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.text, want[0]);
	trn_dpsgd_params_default(&dp);
	dp.hidden[0] = 0;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_params_validate(&dp, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.text, want[1]);
	trn_label_em_params_default(&lp);
	lp.epochs = DPG_MAX_EPOCHS + 1;
	acct_error_init(&err);
	cr_assert_eq(trn_label_em_params_validate(&lp, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.text, want[2]);
	trn_slmc_params_default(&sp);
	sp.max_norm = INFINITY;
	acct_error_init(&err);
	cr_assert_eq(trn_slmc_params_validate(&sp, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/max_norm");
	cr_assert_str_eq(err.text, "max_norm must be > 0 and at most 1e+06");
}

Test(common, hidden_layers_and_dense_widths)
{
	uint32_t hidden[2] = {30, 20}, widths[TRN_MAX_LAYERS + 1];
	acct_error err;

	cr_assert_eq(trn__dense_widths(2, hidden, 5, 3, widths), 3);
	cr_assert(widths[0] == 5 && widths[1] == 30 && widths[2] == 20 && widths[3] == 3);
	cr_assert_eq(trn__dense_widths(0, hidden, 7, 2, widths), 1);
	cr_assert(widths[0] == 7 && widths[1] == 2);
	cr_assert_eq(trn__check_hidden(2, hidden, TRN_ACT_TANH, NULL), 0);
	cr_assert_eq(trn__check_hidden(0, hidden, TRN_ACT_RELU, NULL), ACCT_EINVAL);
	cr_assert_eq(trn__check_hidden(2, hidden, TRN_ACT_SIGMOID, NULL), ACCT_EINVAL);
	hidden[1] = 0;
	acct_error_init(&err);
	cr_assert_eq(trn__check_hidden(2, hidden, TRN_ACT_RELU, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/hidden");
}

/* ---- data --------------------------------------------------------------------- */

static char tmpdir[64];

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/trn-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

/* Removes the files the test wrote and the directory (it has no subdirectories). */
static void remove_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	/* Room for any directory entry's name, so no path is cut short. */
	char path[sizeof(tmpdir) + 1 + sizeof(e->d_name)];

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmpdir);
}

static void write_file(const char *name, const uint8_t *buf, size_t n, bool gz, char *path)
{
	sprintf(path, "%s/%s", tmpdir, name);
	if (gz) {
		gzFile f = gzopen(path, "wb");

		cr_assert_not_null(f);
		if (n)
			cr_assert_eq(gzwrite(f, buf, (unsigned)n), (int)n);
		cr_assert_eq(gzclose(f), Z_OK);
	} else {
		FILE *f = fopen(path, "wb");

		cr_assert_not_null(f);
		cr_assert_eq(fwrite(buf, 1, n, f), n);
		fclose(f);
	}
}

static size_t be(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
	return 4;
}

/* Three 2x2 images with pixels 0..11 * 20, labels 0, 2, 1. */
static size_t good_images(uint8_t *b)
{
	size_t o = 0;

	o += be(b + o, 0x803);
	o += be(b + o, 3);
	o += be(b + o, 2);
	o += be(b + o, 2);
	for (int i = 0; i < 12; i++)
		b[o++] = (uint8_t)(i * 20);
	return o;
}

static size_t good_labels(uint8_t *b)
{
	size_t o = 0;

	o += be(b + o, 0x801);
	o += be(b + o, 3);
	b[o++] = 0;
	b[o++] = 2;
	b[o++] = 1;
	return o;
}

Test(idx, loads_a_valid_pair, .init = make_tmpdir, .fini = remove_tmpdir)
{
	uint8_t im[64], lb[64];
	char pi[128], pl[128];
	trn_dataset *ds = NULL;

	write_file("i.gz", im, good_images(im), true, pi);
	write_file("l.gz", lb, good_labels(lb), true, pl);
	cr_assert_eq(trn_idx_load(pi, pl, 3, &ds, NULL), 0);
	cr_assert_eq(ds->n, 3);
	cr_assert_eq(ds->d, 4);
	for (int i = 0; i < 12; i++)
		cr_assert_float_eq(ds->x[i], i * 20 / 255.0, 1e-15);
	cr_assert_eq(ds->y[1], 2);
	trn_dataset_free(ds);
}

struct idxcase {
	const char *name;
	int kind;
};

Test(idx, rejects_truncated_and_garbled_files, .init = make_tmpdir, .fini = remove_tmpdir)
{
	uint8_t im[64], lb[64], big[64];
	char pi[128], pl[128], pb[128];
	size_t ni = good_images(im), nl = good_labels(lb);
	trn_dataset *ds = NULL;
	acct_error err;
	uint8_t *gzbuf;
	size_t gzlen;
	FILE *f;

	write_file("l.gz", lb, nl, true, pl);
	write_file("i.gz", im, ni, true, pi);

	/* Cases on the image file: each must fail with EINVAL and "/data". */
	struct {
		const char *what;
		size_t len;
		void (*edit)(uint8_t *b);
	} cases[] = {
		{"empty", 0, NULL},
		{"header only", 16, NULL},
		{"truncated payload", 16 + 11, NULL},
		{"trailing byte", 16 + 12 + 1, NULL},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint8_t b[64] = {0};

		memcpy(b, im, ni);
		write_file("bad.gz", b, cases[c].len, true, pb);
		acct_error_init(&err);
		ds = NULL;
		cr_assert_eq(trn_idx_load(pb, pl, 3, &ds, &err), ACCT_EINVAL, "%s", cases[c].what);
		cr_assert_null(ds);
		cr_assert_str_eq(err.where, "/data");
	}
	/* Bad magic (labels' magic on the image file). */
	memcpy(big, im, ni);
	big[3] = 0x01;
	write_file("magic.gz", big, ni, true, pb);
	cr_assert_eq(trn_idx_load(pb, pl, 3, &ds, NULL), ACCT_EINVAL);
	/* Absurd sizes: 2^31 images of 28x28, refused before allocating. */
	memcpy(big, im, ni);
	be(big + 4, 0x80000000u);
	write_file("huge.gz", big, ni, true, pb);
	cr_assert_eq(trn_idx_load(pb, pl, 3, &ds, NULL), ACCT_EINVAL);
	/* Rows x cols beyond DPG_MAX_FEATURES. */
	memcpy(big, im, ni);
	be(big + 8, 65536);
	write_file("wide.gz", big, ni, true, pb);
	cr_assert_eq(trn_idx_load(pb, pl, 3, &ds, NULL), ACCT_EINVAL);
	/* Label count disagrees with image count. */
	memcpy(big, lb, nl);
	be(big + 4, 2);
	write_file("l2.gz", big, nl - 1, true, pb);
	cr_assert_eq(trn_idx_load(pi, pb, 3, &ds, NULL), ACCT_EINVAL);
	/* A label beyond the classes. */
	cr_assert_eq(trn_idx_load(pi, pl, 2, &ds, NULL), ACCT_EINVAL);
	/* Missing file. */
	cr_assert_eq(trn_idx_load("/nonexistent/x.gz", pl, 3, &ds, NULL), ACCT_EINVAL);
	/* A gzip stream cut in half, and one with garbage after its header. */
	f = fopen(pi, "rb");
	cr_assert_not_null(f);
	gzbuf = malloc(4096);
	gzlen = fread(gzbuf, 1, 4096, f);
	fclose(f);
	write_file("cut.gz", gzbuf, gzlen / 2, false, pb);
	cr_assert_eq(trn_idx_load(pb, pl, 3, &ds, NULL), ACCT_EINVAL);
	for (size_t i = 10; i < gzlen; i++)
		gzbuf[i] ^= 0xA5;
	write_file("garbled.gz", gzbuf, gzlen, false, pb);
	cr_assert_eq(trn_idx_load(pb, pl, 3, &ds, NULL), ACCT_EINVAL);
	cr_assert_null(ds);
	free(gzbuf);
}

Test(idx, real_fashion_mnist_header_dims)
{
	trn_dataset *tr = NULL, *te = NULL;
	acct_error err;
	size_t per_class[10] = {0};
	double mn = 1, mx = 0;

	acct_error_init(&err);
	cr_assert_eq(trn_fashion_mnist_load(NULL, true, &tr, &err), 0, "%s", err.text);
	cr_assert_eq(trn_fashion_mnist_load(NULL, false, &te, &err), 0, "%s", err.text);
	cr_assert_eq(tr->n, 60000);
	cr_assert_eq(tr->d, 784);
	cr_assert_eq(te->n, 10000);
	cr_assert_eq(te->d, 784);
	cr_assert_eq(tr->num_classes, 10);
	for (size_t i = 0; i < tr->n; i++)
		per_class[tr->y[i]]++;
	for (int c = 0; c < 10; c++)
		cr_assert_eq(per_class[c], 6000, "class %d has %zu", c, per_class[c]);
	for (size_t i = 0; i < te->n * te->d; i++) {
		mn = fmin(mn, te->x[i]);
		mx = fmax(mx, te->x[i]);
	}
	cr_assert_eq(mn, 0.0);
	cr_assert_eq(mx, 1.0);
	trn_dataset_free(tr);
	trn_dataset_free(te);
}

Test(data, table_loader_validates)
{
	double x[6] = {0, 1, 2, 3, 4, 5};
	int64_t y[3] = {0, 1, 1};
	trn_dataset *ds = NULL;
	acct_error err;

	cr_assert_eq(trn_dataset_from_table(x, y, 3, 2, 2, "/data", &ds, NULL), 0);
	cr_assert_eq(ds->x[5], 5.0);
	cr_assert_eq(ds->y[2], 1);
	trn_dataset_free(ds);
	ds = NULL;
	y[1] = 2;
	acct_error_init(&err);
	cr_assert_eq(trn_dataset_from_table(x, y, 3, 2, 2, "/data", &ds, &err), ACCT_EINVAL);
	cr_assert_null(ds);
	y[1] = -1;
	cr_assert_eq(trn_dataset_from_table(x, y, 3, 2, 2, "/data", &ds, NULL), ACCT_EINVAL);
	y[1] = 1;
	x[3] = NAN;
	cr_assert_eq(trn_dataset_from_table(x, y, 3, 2, 2, "/data", &ds, NULL), ACCT_EINVAL);
	cr_assert_eq(trn_dataset_from_table(x, y, 0, 2, 2, "/data", &ds, NULL), ACCT_EINVAL);
	cr_assert_eq(trn_dataset_from_table(x, y, 3, 2, 1, "/data", &ds, NULL), ACCT_EINVAL);
	cr_assert_null(ds);
}

/* ---- sampling, PCA, BLAS ------------------------------------------------------- */

Test(sampling, poisson_lot_sizes)
{
	enum { N = 100000 };
	uint64_t *buf = malloc(N * sizeof(uint64_t));
	size_t *idx = malloc(N * sizeof(size_t)), count;
	mech_rng *rng = trn_test_seeded(seed_prefix, 60);
	double q = 0.01, total = 0;

	for (int rep = 0; rep < 20; rep++) {
		cr_assert_eq(trn__poisson_sample(rng, N, q, buf, idx, &count), 0);
		/* Binomial(1e5, 0.01): sd 31.5; 6 sd bounds. */
		cr_assert(fabs((double)count - 1000.0) < 6 * 31.5, "lot of %zu", count);
		for (size_t i = 1; i < count; i++)
			cr_assert(idx[i] > idx[i - 1]);
		total += count;
	}
	cr_assert(fabs(total / 20 - 1000.0) < 6 * 31.5 / sqrt(20.0));
	cr_assert_eq(trn__poisson_sample(rng, N, 1.0, buf, idx, &count), 0);
	cr_assert_eq(count, N);
	mech_rng_free(rng);
	free(buf);
	free(idx);
}

/*
 * A row of subnormals normalises like any other: dividing by its norm, not
 * multiplying by 1 / norm (which overflows, and 0 * inf is NaN), so the
 * projection stays finite whatever the rows hold.  With the row
 * (1e-320, 0, 0, 0) among others, the old code returned NaNs.
 */
Test(pca, subnormal_rows_do_not_poison_the_projection)
{
	enum { N = 50, D = 4 };
	double x[N * D], v[D * 2];
	mech_rng *rng = trn_test_seeded(seed_prefix, 71);

	cr_assert_eq(mech_rng_normal_fill(rng, x, N * D), 0);
	x[0] = 1e-320;
	x[1] = x[2] = x[3] = 0;
	cr_assert_eq(trn__dp_pca(x, N, D, 2, 1.0, rng, v, NULL), 0);
	for (int i = 0; i < D * 2; i++)
		cr_assert(isfinite(v[i]), "projection entry %d: %g", i, v[i]);
	mech_rng_free(rng);
}

Test(pca, exact_pca_finds_the_data_subspace)
{
	enum { N = 200, D = 6 };
	double x[N * D], v[D * 2], coef[2 * N];
	/* Orthonormal u = e0 rotated, w = (e1 + e2) / sqrt 2. */
	double u[D] = {0.6, 0, 0, 0.8, 0, 0}, w[D] = {0, M_SQRT1_2, M_SQRT1_2, 0, 0, 0};
	mech_rng *rng = trn_test_seeded(seed_prefix, 70);

	cr_assert_eq(mech_rng_normal_fill(rng, coef, 2 * N), 0);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < D; j++)
			x[i * D + j] = 3 * coef[2 * i] * u[j] + coef[2 * i + 1] * w[j];
	cr_assert_eq(trn__dp_pca(x, N, D, 2, 0.0, rng, v, NULL), 0);
	/* u and w lie in span(V): ||V^T u|| = ||V^T w|| = 1. */
	for (int t = 0; t < 2; t++) {
		const double *z = t ? w : u;
		double s = 0;

		for (int c = 0; c < 2; c++) {
			double dot = 0;

			for (int j = 0; j < D; j++)
				dot += v[j * 2 + c] * z[j];
			s += dot * dot;
		}
		cr_assert_float_eq(s, 1.0, 1e-9);
	}
	/* With noise it still runs and returns unit columns. */
	cr_assert_eq(trn__dp_pca(x, N, D, 2, 4.0, rng, v, NULL), 0);
	for (int c = 0; c < 2; c++) {
		double s = 0;

		for (int j = 0; j < D; j++)
			s += v[j * 2 + c] * v[j * 2 + c];
		cr_assert_float_eq(s, 1.0, 1e-9);
	}
	mech_rng_free(rng);
}

/*
 * DP-PCA's statistic, the upper triangle of sum_i a_i a_i^T, moves by at
 * most 1 in L2 when a row is added (docs/training.md, "DP-PCA's
 * sensitivity": ||upper(a a^T)||^2 = (||a||^4 + sum_j a_j^4) / 2 <= 1),
 * on random tables of rows of every magnitude (subnormal to 1e300), the
 * extra row at a random place; the rows' summation may differ between
 * the two tables by rounding only (1e-12 here).  An extra row on a
 * coordinate axis reaches the bound, so a looser normalisation fails.
 */
Test(pca, gram_of_neighbouring_tables_moves_by_at_most_one)
{
	enum { TRIALS = 400, MAX_N = 40, MAX_D = 7 };
	static const double scales[4] = {1e-310, 1e-3, 1.0, 1e300};
	double x[(MAX_N + 1) * MAX_D], with[MAX_D * MAX_D], without[MAX_D * MAX_D];
	double *chunk = malloc(TRN__PCA_CHUNK_ROWS * MAX_D * sizeof(double)), worst = 0.0;
	mech_rng *rng = trn_test_seeded(seed_prefix, 72);

	cr_assert(chunk);
	for (int trial = 0; trial < TRIALS; trial++) {
		size_t n = (size_t)trn_test_below(rng, MAX_N + 1), d = 2 + trn_test_below(rng, MAX_D - 1);
		size_t at = (size_t)trn_test_below(rng, n + 1);
		double moved = 0.0, extra[MAX_D];

		for (size_t i = 0; i < n * d; i++)
			x[i] = scales[trn_test_below(rng, 4)] * trn_test_normal(rng);
		for (size_t j = 0; j < d; j++)
			extra[j] = trial % 3 ? trn_test_normal(rng) : (j == (size_t)trial % d);
		for (size_t j = 0; j < d; j++)
			extra[j] *= scales[trn_test_below(rng, 4)];
		memset(without, 0, sizeof(without));
		memset(with, 0, sizeof(with));
		trn__pca_gram_upper(x, n, d, chunk, without);
		/* The neighbour: the extra row inserted before row `at`. */
		memmove(x + (at + 1) * d, x + at * d, (n - at) * d * sizeof(double));
		memcpy(x + at * d, extra, d * sizeof(double));
		trn__pca_gram_upper(x, n + 1, d, chunk, with);
		for (size_t i = 0; i < d; i++)
			for (size_t j = i; j < d; j++)
				moved += (with[i * d + j] - without[i * d + j]) *
					 (with[i * d + j] - without[i * d + j]);
		moved = sqrt(moved);
		cr_assert_leq(moved, 1.0 + 1e-12, "trial %d (n %zu, d %zu): moved %.17g", trial, n, d,
			      moved);
		worst = fmax(worst, moved);
	}
	cr_assert_gt(worst, 1.0 - 1e-12, "no neighbour came near the bound: %.17g", worst);
	free(chunk);
	mech_rng_free(rng);
}

/*
 * GSL calls cblas_* through the global symbol scope; the first library in
 * that scope that defines cblas_dgemm must be OpenBLAS, not libgslcblas.
 */
Test(blas, cblas_resolves_to_openblas)
{
	void *sym = dlsym(RTLD_DEFAULT, "cblas_dgemm");
	Dl_info info;

	cr_assert_not_null(sym);
	cr_assert(dladdr(sym, &info) != 0);
	cr_assert_not_null(info.dli_fname);
	cr_assert(strstr(info.dli_fname, "openblas") != NULL, "cblas_dgemm comes from %s",
		  info.dli_fname);
}

/* ---- models and training -------------------------------------------------------- */

Test(model, serialise_round_trip_and_format)
{
	uint32_t widths[3] = {3, 4, 2};
	trn_model *m = random_model(2, widths, TRN_ACT_TANH, 1.0, 80), *back = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	double row[3] = {0.3, -1, 2}, w0;
	uint32_t c1, c2;
	uint64_t bits;

	cr_assert_eq(trn_model_serialize(m, &buf, &len, NULL), 0);
	/* Version 2: 40 + 4 * 3 header bytes, 4 * 2 activation codes, then
	 * (4*3 + 4 + 2*4 + 2) doubles. */
	cr_assert_eq(len, 40 + 12 + 8 + 8 * 26);
	cr_assert_eq(memcmp(buf, "DPGMDL01", 8), 0);
	cr_assert_eq(buf[8], 2);
	cr_assert_eq(buf[12], TRN_INPUT_NONE);
	cr_assert_eq(buf[16], 3);   /* input dim */
	cr_assert_eq(buf[20], 0);   /* no projection */
	cr_assert_eq(buf[24], 2);   /* layers */
	cr_assert_eq(buf[28], 2);   /* classes */
	cr_assert_eq(buf[44], 4);   /* hidden width */
	cr_assert_eq(buf[52], TRN_ACT_TANH);
	cr_assert_eq(buf[56], TRN_ACT_IDENTITY);
	bits = 0;
	for (int i = 0; i < 8; i++)
		bits |= (uint64_t)buf[60 + i] << (8 * i);
	memcpy(&w0, &bits, 8);
	cr_assert_eq(w0, m->params[0]);
	cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), 0);
	cr_assert_eq(memcmp(back->params, m->params, m->n_params * sizeof(double)), 0);
	cr_assert_eq(trn_model_predict(m, row, 3, &c1, NULL), 0);
	cr_assert_eq(trn_model_predict(back, row, 3, &c2, NULL), 0);
	cr_assert_eq(c1, c2);
	trn_model_free(back);
	back = NULL;
	cr_assert_eq(trn_model_deserialize(buf, len - 1, &back, NULL), ACCT_EINVAL);
	/* A weight that is not finite, first or last: the file is damaged. */
	for (size_t at = 60; at < len; at += len - 8 - 60) {
		uint8_t keep[8];
		acct_error err;

		memcpy(keep, buf + at, 8);
		for (int k = 0; k < 2; k++) {
			bits = k ? 0x7ff8000000000000ull : 0xfff0000000000000ull; /* NaN, -inf */
			for (int i = 0; i < 8; i++)
				buf[at + i] = (uint8_t)(bits >> (8 * i));
			acct_error_init(&err);
			cr_assert_eq(trn_model_deserialize(buf, len, &back, &err), ACCT_EINVAL, "byte %zu", at);
			cr_assert_str_eq(err.where, "/model/params");
			cr_assert_null(back);
		}
		memcpy(buf + at, keep, 8);
	}
	cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), 0);
	trn_model_free(back);
	back = NULL;
	buf[24] = 9;
	cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), ACCT_EINVAL);
	cr_assert_null(back);
	free(buf);
	trn_model_free(m);
}

/* Three well-separated Gaussian blobs in 4 dimensions. */
static trn_dataset *blobs(size_t n, uint8_t tag)
{
	trn_dataset *ds = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
	static const double centres[3][4] = {{2, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 2, 0}};

	cr_assert_eq(trn_dataset_new(n, 4, 3, &ds, NULL), 0);
	cr_assert_eq(mech_rng_normal_fill(rng, ds->x, n * 4), 0);
	for (size_t i = 0; i < n; i++) {
		ds->y[i] = (uint32_t)(i % 3);
		for (int j = 0; j < 4; j++)
			ds->x[i * 4 + j] = 0.4 * ds->x[i * 4 + j] + centres[i % 3][j];
	}
	mech_rng_free(rng);
	return ds;
}

struct counter {
	int calls, evaluated, stop_at;
	int64_t last_step;
};

static int count_progress(const trn_progress *p, void *user)
{
	struct counter *c = user;

	c->calls++;
	c->evaluated += p->evaluated;
	cr_assert_eq(p->step, c->last_step + 1);
	c->last_step = p->step;
	if (p->evaluated)
		cr_assert(p->accuracy >= 0 && p->accuracy <= 1);
	return c->stop_at && p->step == c->stop_at;
}

Test(dpsgd, learns_blobs_and_reports_progress)
{
	trn_dataset *tr = blobs(3000, 90), *te = blobs(600, 91);
	trn_dpsgd_params p;
	trn_dpsgd_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 92);
	struct counter c = {0};
	acct_error err;

	trn_dpsgd_params_default(&p);
	p.hidden[0] = 16;
	p.epochs = 5;
	p.lot_size = 100;
	p.noise_multiplier = 1.0;
	p.clip_norm = 1.0;
	p.learning_rate = 0.5;
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_run(&p, tr, te, rng, count_progress, &c, NULL, &r, &err), 0,
		     "%s", err.text);
	cr_assert_eq(r->steps_done, 150);
	cr_assert_eq(r->steps_total, 150);
	cr_assert_eq(c.calls, 150);
	cr_assert_eq(c.evaluated, 5);
	cr_assert(r->test_accuracy > 0.9, "accuracy %g", r->test_accuracy);
	/* Sampled lots average L = 100: 15000 expected examples, sd ~ 122. */
	cr_assert(fabs((double)r->examples_processed - 15000.0) < 6 * 122.0);
	trn_dpsgd_result_free(r);
	mech_rng_free(rng);
	trn_dataset_free(tr);
	trn_dataset_free(te);
}

/*
 * A seeded run gives the same model twice, for a model whose noise is
 * filled in line (131 parameters) and one whose noise a second thread draws
 * ahead (16803): the noise stream is its own and filled in step order, so
 * the threads' timing cannot show.  A different seed changes the model.
 */
Test(dpsgd, seeded_run_is_deterministic_with_noise_drawn_ahead)
{
	static const uint32_t hidden[] = {16, 2100};
	trn_dataset *tr = blobs(2000, 96);

	for (size_t h = 0; h < sizeof(hidden) / sizeof(hidden[0]); h++) {
		trn_dpsgd_result *r[3] = {NULL, NULL, NULL};
		trn_dpsgd_params p;

		trn_dpsgd_params_default(&p);
		p.hidden[0] = hidden[h];
		p.epochs = 1;
		p.lot_size = 100; /* 20 steps */
		p.learning_rate = 0.5;
		for (int k = 0; k < 3; k++) {
			mech_rng *rng = trn_test_seeded(seed_prefix, k < 2 ? 97 : 98);

			cr_assert_eq(trn_dpsgd_run(&p, tr, NULL, rng, NULL, NULL, NULL, &r[k], NULL),
				     0);
			mech_rng_free(rng);
		}
		cr_assert_eq(r[0]->model->n_params, 8 * (size_t)hidden[h] + 3);
		cr_assert_eq(memcmp(r[0]->model->params, r[1]->model->params,
				    r[0]->model->n_params * sizeof(double)),
			     0, "hidden %u", hidden[h]);
		cr_assert_neq(memcmp(r[0]->model->params, r[2]->model->params,
				     r[0]->model->n_params * sizeof(double)),
			      0);
		for (int k = 0; k < 3; k++)
			trn_dpsgd_result_free(r[k]);
	}
	trn_dataset_free(tr);
}

/* The defaults with the model a softmax regression: no hidden layer. */
static void logreg_params(trn_dpsgd_params *p)
{
	trn_dpsgd_params_default(p);
	p->model = TRN_MODEL_LOGREG;
	p->n_hidden = 0;
}

Test(dpsgd, cancel_flag_and_callback_stop_the_job)
{
	trn_dataset *tr = blobs(600, 93);
	trn_dpsgd_params p;
	trn_dpsgd_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 94);
	struct counter c = {.stop_at = 3};
	atomic_bool cancel = true;

	logreg_params(&p);
	p.lot_size = 60;
	cr_assert_eq(trn_dpsgd_run(&p, tr, NULL, rng, NULL, NULL, &cancel, &r, NULL),
		     TRN_CANCELLED);
	cr_assert_eq(r->steps_done, 0);
	cr_assert_not_null(r->model);
	trn_dpsgd_result_free(r);
	r = NULL;
	cr_assert_eq(trn_dpsgd_run(&p, tr, NULL, rng, count_progress, &c, NULL, &r, NULL),
		     TRN_CANCELLED);
	cr_assert_eq(r->steps_done, 3);
	cr_assert(isnan(r->test_accuracy));
	trn_dpsgd_result_free(r);
	mech_rng_free(rng);
	trn_dataset_free(tr);
}

/*
 * Noise scale: with all-zero features a softmax regression's weight
 * gradients vanish, so after one step from zero the weights are exactly
 * -lr/L * sigma C z, z standard normal: their sample sd must be lr sigma C / L.
 */
Test(dpsgd, noise_has_sd_sigma_C_over_L)
{
	enum { N = 100, D = 4000, K = 5 };
	trn_dataset *tr = NULL;
	trn_dpsgd_params p;
	trn_dpsgd_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 95);
	double s = 0, s2 = 0, want;
	size_t nw = (size_t)K * D;

	cr_assert_eq(trn_dataset_new(N, D, K, &tr, NULL), 0);
	for (size_t i = 0; i < N; i++)
		tr->y[i] = i % K;
	logreg_params(&p);
	p.epochs = 1;
	p.lot_size = N; /* q = 1: one step */
	p.noise_multiplier = 2.0;
	p.clip_norm = 3.0;
	p.learning_rate = 0.5;
	cr_assert_eq(trn_dpsgd_run(&p, tr, NULL, rng, NULL, NULL, NULL, &r, NULL), 0);
	cr_assert_eq(r->steps_done, 1);
	for (size_t i = 0; i < nw; i++) {
		s += r->model->params[i];
		s2 += r->model->params[i] * r->model->params[i];
	}
	want = 0.5 * 2.0 * 3.0 / N;
	/* An sd estimated from 20000 samples has relative sd 1/sqrt(40000):
	 * 5 of them is 2.5%, so a noise scale off by 10% fails. */
	cr_assert(fabs(sqrt(s2 / nw) - want) < 5 * want / sqrt(2.0 * nw), "sd %g, want %g",
		  sqrt(s2 / nw), want);
	cr_assert(fabs(s / nw) < 6 * want / sqrt((double)nw));
	trn_dpsgd_result_free(r);
	mech_rng_free(rng);
	trn_dataset_free(tr);
}

/*
 * A row whose label is none of the declared classes (TRN_NO_CLASS) is
 * sampled and contributes a zero gradient: logistic regression starts at
 * zero, so without noise a table of such rows leaves every parameter at
 * exactly zero, while the same rows labelled move them.  Evaluation scores
 * no such row: on this table it has nothing to score.
 */
Test(dpsgd, rows_without_a_class_have_zero_gradient)
{
	trn_dataset *tr = blobs(300, 99);
	trn_dpsgd_params p;
	trn_dpsgd_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 100);
	size_t moved = 0;
	acct_error err;

	logreg_params(&p);
	p.epochs = 2;
	p.lot_size = 50;
	cr_assert_eq(trn_sgd_nonprivate_run(&p, tr, NULL, rng, NULL, NULL, NULL, &r, NULL), 0);
	for (size_t i = 0; i < r->model->n_params; i++)
		moved += r->model->params[i] != 0.0;
	cr_assert_gt(moved, 0);
	trn_dpsgd_result_free(r);
	r = NULL;

	for (size_t i = 0; i < tr->n; i++)
		tr->y[i] = TRN_NO_CLASS;
	cr_assert_eq(trn_dataset_validate(tr, "/data", NULL), 0);
	cr_assert_eq(trn_sgd_nonprivate_run(&p, tr, NULL, rng, NULL, NULL, NULL, &r, NULL), 0);
	cr_assert_gt(r->steps_done, 0);
	for (size_t i = 0; i < r->model->n_params; i++)
		cr_assert_eq(r->model->params[i], 0.0, "parameter %zu", i);
	acct_error_init(&err);
	{
		double acc = 0.0, loss = 0.0;

		cr_assert_eq(trn_model_evaluate(r->model, tr, &acc, &loss, &err), 0, "%s", err.text);
		cr_assert(isnan(acc) && isnan(loss), "accuracy %g, loss %g", acc, loss);
	}
	trn_dpsgd_result_free(r);
	mech_rng_free(rng);
	trn_dataset_free(tr);
}

/*
 * A public test table may hold labels that are none of the job's classes;
 * evaluation scores the other rows only.  Over them, accuracy and mean
 * cross-entropy computed row by row from trn_model_scores equal
 * trn_model_evaluate's, across its 512-row chunks; a label past the
 * classes that is not TRN_NO_CLASS is still refused.
 */
Test(dpsgd, evaluation_scores_only_rows_with_a_class)
{
	const uint32_t widths[] = {5, 7, 3};
	trn_model *m = random_model(2, widths, TRN_ACT_TANH, 0.8, 41);
	trn_dataset ds = {.n = 1200, .d = 5, .num_classes = 3};
	double acc = NAN, loss = NAN, want_loss = 0.0, s[3];
	size_t right = 0, scored = 0;
	acct_error err;

	ds.x = malloc(ds.n * ds.d * sizeof(double));
	ds.y = malloc(ds.n * sizeof(uint32_t));
	cr_assert(ds.x && ds.y);
	random_rows(ds.x, ds.n * ds.d, ds.y, ds.n, 3, 42);
	for (size_t i = 1; i < ds.n; i += 3)
		ds.y[i] = TRN_NO_CLASS;
	for (size_t i = 0; i < ds.n; i++) {
		uint32_t best = 0;

		if (ds.y[i] == TRN_NO_CLASS)
			continue;
		cr_assert_eq(trn_model_scores(m, ds.x + i * ds.d, ds.d, s, 3, NULL), 0);
		for (uint32_t j = 1; j < 3; j++)
			best = s[j] > s[best] ? j : best;
		right += best == ds.y[i];
		want_loss -= log(s[ds.y[i]]);
		scored++;
	}
	acct_error_init(&err);
	cr_assert_eq(trn_model_evaluate(m, &ds, &acc, &loss, &err), 0, "%s", err.text);
	cr_assert_eq(scored, 800);
	cr_assert_eq(acc, (double)right / (double)scored);
	cr_assert(fabs(loss - want_loss / (double)scored) <= 1e-12 * fabs(loss), "loss %.17g, want %.17g",
		  loss, want_loss / (double)scored);
	ds.y[0] = 3;
	cr_assert_eq(trn_model_evaluate(m, &ds, &acc, &loss, &err), ACCT_EINVAL);
	free(ds.x);
	free(ds.y);
	trn_model_free(m);
}

Test(dpsgd, nonprivate_baseline_and_pca_run)
{
	trn_dataset *tr = blobs(1500, 96), *te = blobs(300, 97);
	trn_dpsgd_params p;
	trn_dpsgd_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 98);
	acct_error err;

	trn_dpsgd_params_default(&p);
	p.hidden[0] = 8;
	p.epochs = 3;
	p.lot_size = 50;
	p.pca_components = 3;
	p.learning_rate = 0.2;
	acct_error_init(&err);
	cr_assert_eq(trn_sgd_nonprivate_run(&p, tr, te, rng, NULL, NULL, NULL, &r, &err), 0,
		     "%s", err.text);
	cr_assert(r->test_accuracy > 0.9, "accuracy %g", r->test_accuracy);
	cr_assert_eq(r->model->proj_dim, 3);
	{
		/* Its file with a projection entry that is not finite is refused:
		 * the entries follow 40 header bytes, 3 widths and 2 activation
		 * codes. */
		uint8_t *buf = NULL;
		size_t len = 0, at = 40 + 4 * 3 + 4 * 2;
		trn_model *back = NULL;

		cr_assert_eq(trn_model_serialize(r->model, &buf, &len, NULL), 0);
		cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), 0);
		cr_assert_eq(memcmp(back->proj, r->model->proj, 4 * 3 * sizeof(double)), 0);
		trn_model_free(back);
		back = NULL;
		memset(buf + at, 0xff, 8); /* a NaN */
		cr_assert_eq(trn_model_deserialize(buf, len, &back, &err), ACCT_EINVAL);
		cr_assert(strstr(err.text, "projection entry 0") != NULL, "%s", err.text);
		cr_assert_null(back);
		free(buf);
	}
	trn_dpsgd_result_free(r);
	r = NULL;
	cr_assert_eq(trn_dpsgd_run(&p, tr, te, rng, NULL, NULL, NULL, &r, &err), 0, "%s",
		     err.text);
	trn_dpsgd_result_free(r);
	r = NULL;
	p.pca_components = 5; /* more than the 4 features */
	acct_error_init(&err);
	cr_assert_eq(trn_dpsgd_run(&p, tr, te, rng, NULL, NULL, NULL, &r, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/pca_components");
	mech_rng_free(rng);
	trn_dataset_free(tr);
	trn_dataset_free(te);
}

/*
 * The work bound counts steps x (rows + (lot + 1) x one example's forward
 * multiply-adds), from public sizes only.  An mlp 784-4096-3000-10 does
 * 4096*785 + 3000*4097 + 10*3001 = 15 536 370 multiply-adds an example;
 * on 60 000 rows in lots of 60 000 (one step an epoch) a step is
 * 60 000 + 60 001 * 15 536 370 = 932 197 796 370 units, so 10^14 allows
 * 107 epochs (9.97e13) and not 108 (1.007e14).  The reviewer's job of
 * 10 000 epochs (about two weeks of one core) is refused at the door.
 */
Test(dpsgd, work_bound_refuses_weeks_of_training)
{
	static const uint32_t epochs[] = {1, 107, 108, 10000};
	trn_dpsgd_params p;
	acct_error err;

	cr_assert_eq(DPG_MAX_DPSGD_WORK, 1e14, "the cases assume a bound of 10^14");
	trn_dpsgd_params_default(&p);
	p.n_hidden = 2;
	p.hidden[0] = 4096;
	p.hidden[1] = 3000;
	p.lot_size = 60000;
	for (size_t i = 0; i < sizeof(epochs) / sizeof(epochs[0]); i++) {
		p.epochs = epochs[i];
		acct_error_init(&err);
		if (epochs[i] <= 107) {
			cr_assert_eq(trn_dpsgd_check_work(&p, 784, 10, 60000, &err), 0, "%u: %s",
				     epochs[i], err.text);
			continue;
		}
		cr_assert_eq(trn_dpsgd_check_work(&p, 784, 10, 60000, &err), ACCT_EINVAL, "%u",
			     epochs[i]);
		cr_assert_str_eq(err.where, "/params/epochs");
		cr_assert_not_null(strstr(err.text, "1e+14"), "%s", err.text);
	}
	/* The bench's largest runs pass: the PCA-MLP (60-1000-10, 40 epochs of
	 * lots of 2400) and Papernot et al.'s cnn at their 40 epochs. */
	p.n_hidden = 1;
	p.hidden[0] = 1000;
	p.pca_components = 60;
	p.lot_size = 2400;
	p.epochs = 40;
	cr_assert_eq(trn_dpsgd_check_work(&p, 784, 10, 60000, &err), 0, "%s", err.text);
}

struct cancel_watch {
	atomic_bool cancel, first_step_done;
};

static int note_first_step(const trn_progress *p, void *user)
{
	struct cancel_watch *w = user;

	if (p->step == 1)
		atomic_store(&w->first_step_done, true);
	return 0;
}

struct cancel_job {
	const trn_dpsgd_params *p;
	const trn_dataset *tr;
	struct cancel_watch *w;
	trn_dpsgd_result *r;
	int rc;
};

static void *run_cancel_job(void *arg)
{
	struct cancel_job *j = arg;
	mech_rng *rng = trn_test_seeded(seed_prefix, 96);

	j->rc = trn_dpsgd_run(j->p, j->tr, NULL, rng, note_first_step, j->w, &j->w->cancel,
			      &j->r, NULL);
	mech_rng_free(rng);
	return NULL;
}

/*
 * A cancel set within a step is answered within the lot, not after it: an
 * mlp 256-2048-1024-2 (2.6 million parameters) on lots of all 16384 rows
 * takes seconds a step, and a cancel set 0.2 s into the second step must
 * leave one step done (the old loop read the flag only between steps, so
 * it finished the second) and return within a fraction of a step.
 */
Test(dpsgd, cancel_is_answered_within_a_lot, .timeout = 300)
{
	enum { N = 16384, D = 256 };
	trn_dataset *tr = NULL;
	trn_dpsgd_params p;
	struct cancel_watch w;
	struct cancel_job j = {.p = &p, .w = &w};
	mech_rng *rng = trn_test_seeded(seed_prefix, 97);
	pthread_t th;
	double t_start, t_step, t_cancel, t_end;

	atomic_init(&w.cancel, false);
	atomic_init(&w.first_step_done, false);
	cr_assert_eq(trn_dataset_new(N, D, 2, &tr, NULL), 0);
	cr_assert_eq(mech_rng_normal_fill(rng, tr->x, (size_t)N * D), 0);
	for (size_t i = 0; i < N; i++)
		tr->y[i] = (uint32_t)(i % 2);
	trn_dpsgd_params_default(&p);
	p.n_hidden = 2;
	p.hidden[0] = 2048;
	p.hidden[1] = 1024;
	p.lot_size = N; /* q = 1: every step takes every row */
	p.epochs = 3;
	j.tr = tr;
	t_start = trn__now_seconds();
	cr_assert_eq(pthread_create(&th, NULL, run_cancel_job, &j), 0);
	while (!atomic_load(&w.first_step_done))
		usleep(1000);
	t_step = trn__now_seconds() - t_start;
	usleep(200000);
	t_cancel = trn__now_seconds();
	atomic_store(&w.cancel, true);
	cr_assert_eq(pthread_join(th, NULL), 0);
	t_end = trn__now_seconds();
	cr_assert_eq(j.rc, TRN_CANCELLED);
	cr_assert_eq(j.r->steps_done, 1, "the second step ran to its end after the cancel");
	cr_assert_lt(t_end - t_cancel, t_step / 2, "cancel took %.2f s, a step %.2f s",
		     t_end - t_cancel, t_step);
	trn_dpsgd_result_free(j.r);
	mech_rng_free(rng);
	trn_dataset_free(tr);
}
