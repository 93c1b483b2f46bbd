/*
 * test_label_em.c: margin losses, the shared evaluation metrics and the
 * label_em trainer.
 *
 * Expected values come from closed forms (the losses' formulas, the
 * binomial tail, the unhinged minimiser), brute force (the O(n^2) AUC),
 * finite differences and the accuracy bound derived in docs/label_em.md,
 * never from numbers this code printed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <criterion/criterion.h>

#include "trn_eval.h"
#include "trn_internal.h"
#include "trn_test_rng.h"
#include "test_math.h"

/* This file's streams: trn_test_seeded(seed_prefix, tag). */
static const uint8_t seed_prefix[2] = {0x1a, 0xbe};

static double uniform(mech_rng *rng, double lo, double hi)
{
	return lo + (hi - lo) * trn_test_uniform(rng);
}

/* ==== losses ==== */

static const trn_loss all_losses[] = {
	{ TRN_LOSS_BARRIER_HINGE, 200.0, 50.0 },
	{ TRN_LOSS_BARRIER_HINGE, 3.0, 2.0 },
	{ TRN_LOSS_HINGE, 0, 0 },
	{ TRN_LOSS_LOGISTIC, 0, 0 },
	{ TRN_LOSS_SIGMOID, 0, 0 },
	{ TRN_LOSS_RAMP, 0, 0 },
	{ TRN_LOSS_SQUARED, 0, 0 },
	{ TRN_LOSS_UNHINGED, 0, 0 },
};
#define N_ALL_LOSSES (sizeof(all_losses) / sizeof(all_losses[0]))

/* The kinks of each loss, where finite differences are not a derivative. */
static bool near_kink(const trn_loss *l, double z, double h)
{
	double b = l->b, r = l->r;

	switch (l->kind) {
	case TRN_LOSS_BARRIER_HINGE:
		return fabs(z - r) < 2 * h || fabs(z - (-r - r / (b - 1))) < 2 * h;
	case TRN_LOSS_HINGE:
		return fabs(z - 1) < 2 * h;
	case TRN_LOSS_RAMP:
		return fabs(z - 1) < 2 * h || fabs(z + 1) < 2 * h;
	default:
		return false;
	}
}

Test(loss, derivative_matches_central_differences)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);
	const double h = 1e-6;

	for (size_t k = 0; k < N_ALL_LOSSES; k++) {
		const trn_loss *l = &all_losses[k];
		double span = l->kind == TRN_LOSS_BARRIER_HINGE ? 2.5 * l->r : 8.0;

		for (int t = 0; t < 2000; t++) {
			double z = uniform(rng, -span, span), d, up, down, fd;

			if (near_kink(l, z, h))
				continue;
			trn_loss_eval(l, z, &d);
			up = trn_loss_eval(l, z + h, NULL);
			down = trn_loss_eval(l, z - h, NULL);
			fd = (up - down) / (2 * h);
			cr_assert(fabs(fd - d) <= 1e-5 * (1 + fabs(d)),
				  "%s at z=%g: derivative %g, finite difference %g",
				  trn_loss_name(l->kind), z, d, fd);
		}
	}
	mech_rng_free(rng);
}

/* At a kink the right derivative: a subgradient for the convex losses. */
Test(loss, right_derivative_at_kinks)
{
	trn_loss bh = { TRN_LOSS_BARRIER_HINGE, 3.0, 2.0 }, hinge = { TRN_LOSS_HINGE, 0, 0 };
	trn_loss ramp = { TRN_LOSS_RAMP, 0, 0 };
	double d;

	trn_loss_eval(&bh, 2.0, &d);
	cr_assert_eq(d, 3.0);
	trn_loss_eval(&bh, -2.0 - 2.0 / 2.0, &d);
	cr_assert_eq(d, -1.0);
	trn_loss_eval(&hinge, 1.0, &d);
	cr_assert_eq(d, 0.0);
	trn_loss_eval(&ramp, -1.0, &d);
	cr_assert_eq(d, -0.5);
	trn_loss_eval(&ramp, 1.0, &d);
	cr_assert_eq(d, 0.0);
}

/* Hand values of each formula. */
Test(loss, values_by_hand)
{
	trn_loss bh = { TRN_LOSS_BARRIER_HINGE, 200.0, 50.0 };
	trn_loss l = { 0 };

	/* max(-b(r+z)+r, b(z-r), r-z): r at 0, 0 at r, 2r at -r, and past
	 * t0 = -r - r/(b-1) the slope -b piece. */
	cr_assert_float_eq(trn_loss_eval(&bh, 0.0, NULL), 50.0, 1e-12);
	cr_assert_float_eq(trn_loss_eval(&bh, 50.0, NULL), 0.0, 1e-12);
	cr_assert_float_eq(trn_loss_eval(&bh, -50.0, NULL), 100.0, 1e-12);
	cr_assert_float_eq(trn_loss_eval(&bh, 51.0, NULL), 200.0, 1e-9);
	cr_assert_float_eq(trn_loss_eval(&bh, -60.0, NULL), -200.0 * (50 - 60) + 50, 1e-9);
	l.kind = TRN_LOSS_HINGE;
	cr_assert_float_eq(trn_loss_eval(&l, -2.0, NULL), 3.0, 1e-15);
	cr_assert_float_eq(trn_loss_eval(&l, 4.0, NULL), 0.0, 1e-15);
	l.kind = TRN_LOSS_LOGISTIC;
	cr_assert_float_eq(trn_loss_eval(&l, 0.0, NULL), log(2.0), 1e-15);
	cr_assert_float_eq(trn_loss_eval(&l, -800.0, NULL), 800.0, 1e-12);
	cr_assert(trn_loss_eval(&l, 800.0, NULL) >= 0.0);
	l.kind = TRN_LOSS_SIGMOID;
	cr_assert_float_eq(trn_loss_eval(&l, 0.0, NULL), 0.5, 1e-15);
	cr_assert_float_eq(trn_loss_eval(&l, 2.0, NULL), 1.0 / (1.0 + exp(2.0)), 1e-15);
	l.kind = TRN_LOSS_RAMP;
	cr_assert_float_eq(trn_loss_eval(&l, -3.0, NULL), 1.0, 1e-15);
	cr_assert_float_eq(trn_loss_eval(&l, 0.5, NULL), 0.25, 1e-15);
	l.kind = TRN_LOSS_SQUARED;
	cr_assert_float_eq(trn_loss_eval(&l, -1.0, NULL), 4.0, 1e-15);
	l.kind = TRN_LOSS_UNHINGED;
	cr_assert_float_eq(trn_loss_eval(&l, 3.0, NULL), -2.0, 1e-15);
}

Test(loss, barrier_hinge_symmetric_on_minus_r_r_only)
{
	trn_loss bh = { TRN_LOSS_BARRIER_HINGE, 200.0, 50.0 };
	mech_rng *rng = trn_test_seeded(seed_prefix, 2);

	for (int t = 0; t < 5000; t++) {
		double z = uniform(rng, -50.0, 50.0);
		double s = trn_loss_eval(&bh, z, NULL) + trn_loss_eval(&bh, -z, NULL);

		cr_assert(fabs(s - 100.0) < 1e-9, "l(%g) + l(-%g) = %g, not 2r", z, z, s);
	}
	/* Outside [-r, r] the barrier breaks the symmetry. */
	cr_assert(trn_loss_eval(&bh, 51.0, NULL) + trn_loss_eval(&bh, -51.0, NULL) > 100.0 + 1.0);
	mech_rng_free(rng);
}

Test(loss, barrier_hinge_convex)
{
	const trn_loss cases[] = { { TRN_LOSS_BARRIER_HINGE, 200.0, 50.0 },
				   { TRN_LOSS_BARRIER_HINGE, 1.5, 1.0 } };
	mech_rng *rng = trn_test_seeded(seed_prefix, 3);

	for (size_t c = 0; c < 2; c++) {
		double span = 3.0 * cases[c].r + 2.0 * cases[c].r / (cases[c].b - 1.0);

		for (int t = 0; t < 20000; t++) {
			double a = uniform(rng, -span, span), b = uniform(rng, -span, span);
			double mid = trn_loss_eval(&cases[c], 0.5 * (a + b), NULL);
			double chord = 0.5 * (trn_loss_eval(&cases[c], a, NULL) +
					      trn_loss_eval(&cases[c], b, NULL));

			cr_assert(mid <= chord + 1e-9 * (1 + fabs(chord)),
				  "midpoint of %g and %g above the chord", a, b);
		}
	}
	mech_rng_free(rng);
}

Test(loss, symmetric_losses_sum_to_a_constant)
{
	const struct { trn_loss_kind kind; double c; } sym[] = {
		{ TRN_LOSS_SIGMOID, 1.0 }, { TRN_LOSS_RAMP, 1.0 }, { TRN_LOSS_UNHINGED, 2.0 } };
	mech_rng *rng = trn_test_seeded(seed_prefix, 4);

	for (size_t k = 0; k < 3; k++) {
		trn_loss l = { sym[k].kind, 0, 0 };

		cr_assert(trn_loss_is_symmetric(sym[k].kind));
		for (int t = 0; t < 5000; t++) {
			double z = uniform(rng, -30.0, 30.0);
			double s = trn_loss_eval(&l, z, NULL) + trn_loss_eval(&l, -z, NULL);

			cr_assert(fabs(s - sym[k].c) < 1e-12, "%s: l(z)+l(-z) = %g at %g",
				  trn_loss_name(l.kind), s, z);
		}
	}
	/* The baselines are not: each fails at z = 2. */
	for (trn_loss_kind k = TRN_LOSS_HINGE; k <= TRN_LOSS_SQUARED; k++) {
		trn_loss l = { k, 0, 0 };

		if (k == TRN_LOSS_SIGMOID || k == TRN_LOSS_RAMP)
			continue;
		cr_assert(!trn_loss_is_symmetric(k));
		cr_assert(fabs(trn_loss_eval(&l, 2.0, NULL) + trn_loss_eval(&l, -2.0, NULL) -
			       trn_loss_eval(&l, 0.0, NULL) * 2.0) > 1e-3);
	}
	mech_rng_free(rng);
}

Test(loss, names_round_trip)
{
	const char *names[] = { "barrier_hinge", "hinge", "logistic", "sigmoid",
				"ramp", "squared", "unhinged" };
	trn_loss_kind k;

	for (size_t i = 0; i < 7; i++) {
		cr_assert_eq(trn_loss_from_name(names[i], &k), 0);
		cr_assert_str_eq(trn_loss_name(k), names[i]);
	}
	cr_assert_eq(trn_loss_from_name("cross_entropy", &k), -1);
	cr_assert_eq(trn_loss_from_name(NULL, &k), -1);
	cr_assert_null(trn_loss_name((trn_loss_kind)42));
}

/* ==== evaluation metrics ==== */

/* AUC by its definition: every positive-negative pair, ties 1/2. */
static double brute_auc(const uint32_t *y, const double *margin, size_t n)
{
	double wins = 0.0, pairs = 0.0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			if (y[i] != 1 || y[j] != 0)
				continue;
			pairs += 1.0;
			wins += margin[i] > margin[j] ? 1.0 : (margin[i] == margin[j] ? 0.5 : 0.0);
		}
	return wins / pairs;
}

Test(eval, auc_matches_brute_force_with_ties)
{
	enum { N = 301 };
	mech_rng *rng = trn_test_seeded(seed_prefix, 5);
	uint32_t y[N], yy[N];
	double scores[2 * N], margin[N];

	for (int trial = 0; trial < 40; trial++) {
		size_t m = 0;
		trn_eval_metrics mt;
		uint64_t u;

		for (size_t i = 0; i < N; i++) {
			/* Few distinct scores, so ties within and across classes. */
			cr_assert_eq(mech_rng_uint_below(rng, 7, &u), 0);
			scores[2 * i] = (double)(u % 3) * 0.5;
			scores[2 * i + 1] = (double)u * 0.5;
			cr_assert_eq(mech_rng_uint_below(rng, 10, &u), 0);
			y[i] = u == 0 ? TRN_NO_CLASS : (uint32_t)(u % 2);
			if (y[i] != TRN_NO_CLASS) {
				yy[m] = y[i];
				margin[m++] = scores[2 * i + 1] - scores[2 * i];
			}
		}
		cr_assert_eq(trn_eval_predictions(y, NULL, scores, N, 2, &mt, NULL), 0);
		cr_assert_eq(mt.n, m);
		cr_assert(fabs(mt.auc - brute_auc(yy, margin, m)) < 1e-12, "auc %.15g vs %.15g",
			  mt.auc, brute_auc(yy, margin, m));
	}
	mech_rng_free(rng);
}

Test(eval, hand_cases)
{
	/* Positives score 3, 2; negatives 2, 1: pairs 1 + 1 + 1/2 + 1 of 4. */
	const uint32_t y[4] = { 1, 1, 0, 0 };
	const double s[8] = { 0, 3, 0, 2, 0, 2, 0, 1 };
	const double rev[8] = { 0, 1, 0, 0, 0, 2, 0, 3 };
	const double flat[8] = { 0 };
	/* Class 0: 3 rows, 1 wrong; class 1: 1 row, wrong. */
	const uint32_t y2[4] = { 0, 0, 0, 1 }, pred2[4] = { 0, 1, 0, 0 };
	trn_eval_metrics mt;

	cr_assert_eq(trn_eval_predictions(y, NULL, s, 4, 2, &mt, NULL), 0);
	cr_assert_float_eq(mt.auc, 3.5 / 4.0, 1e-15);
	/* Every margin is positive: class 1 is predicted for all four. */
	cr_assert_float_eq(mt.accuracy, 0.5, 1e-15);
	cr_assert_eq(trn_eval_predictions(y, NULL, rev, 4, 2, &mt, NULL), 0);
	cr_assert_float_eq(mt.auc, 0.0, 1e-15);
	cr_assert_eq(trn_eval_predictions(y, NULL, flat, 4, 2, &mt, NULL), 0);
	cr_assert_float_eq(mt.auc, 0.5, 1e-15);
	cr_assert_float_eq(mt.balanced_error, 0.5, 1e-15);
	cr_assert_eq(trn_eval_predictions(y2, pred2, flat, 4, 2, &mt, NULL), 0);
	cr_assert_float_eq(mt.accuracy, 0.5, 1e-15);
	cr_assert_float_eq(mt.balanced_error, 0.5 * (1.0 / 3.0 + 1.0), 1e-15);
	/* One class absent: AUC and balanced error undefined. */
	cr_assert_eq(trn_eval_predictions(y2, pred2, flat, 3, 2, &mt, NULL), 0);
	cr_assert(isnan(mt.auc) && isnan(mt.balanced_error));
	cr_assert_float_eq(mt.accuracy, 2.0 / 3.0, 1e-15);
}

Test(eval, multiclass_accuracy_and_refusals)
{
	const uint32_t y[5] = { 0, 2, 1, TRN_NO_CLASS, 2 }, pred[5] = { 0, 2, 2, 1, 1 };
	const uint32_t bad[2] = { 0, 3 };
	trn_eval_metrics mt;
	acct_error err = { 0 };

	cr_assert_eq(trn_eval_predictions(y, pred, NULL, 5, 3, &mt, NULL), 0);
	cr_assert_eq(mt.n, 4);
	cr_assert_float_eq(mt.accuracy, 0.5, 1e-15);
	cr_assert(isnan(mt.auc));
	cr_assert_eq(trn_eval_predictions(bad, pred, NULL, 2, 3, &mt, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/data");
	cr_assert_eq(trn_eval_predictions(y, NULL, NULL, 5, 2, &mt, NULL), ACCT_EINVAL);
}

/* A linear 2-class model with hand-set weights, scored by the metrics
 * helper against logits and AUC computed here. */
Test(eval, model_metrics_match_an_independent_computation)
{
	enum { N = 700, D = 3 };
	const uint32_t widths[2] = { D, 2 };
	trn_model *m = NULL;
	trn_dataset *ds = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 6);
	double margin[N];
	uint32_t yy[N];
	size_t m_n = 0, correct = 0;
	trn_eval_metrics mt;

	cr_assert_eq(trn__model_new(1, widths, 0, &m, NULL), 0);
	cr_assert_eq(mech_rng_normal_fill(rng, m->params, m->n_params), 0);
	cr_assert_eq(trn_dataset_new(N, D, 2, &ds, NULL), 0);
	cr_assert_eq(mech_rng_normal_fill(rng, ds->x, N * D), 0);
	for (size_t i = 0; i < N; i++) {
		const double *x = ds->x + i * D, *w = m->params;
		double z0 = w[6], z1 = w[7];
		uint64_t u;

		for (int j = 0; j < D; j++) {
			z0 += w[j] * x[j];
			z1 += w[D + j] * x[j];
		}
		cr_assert_eq(mech_rng_uint_below(rng, 9, &u), 0);
		/* Labels agree with the model two times in three, some missing. */
		ds->y[i] = u == 8 ? TRN_NO_CLASS : (uint32_t)((z1 > z0) ^ (u % 3 == 0));
		if (ds->y[i] == TRN_NO_CLASS)
			continue;
		yy[m_n] = ds->y[i];
		margin[m_n++] = z1 - z0;
		correct += (z1 > z0) == (ds->y[i] == 1);
	}
	cr_assert_eq(trn_eval_model(m, ds, &mt, NULL), 0);
	cr_assert_eq(mt.n, m_n);
	cr_assert_float_eq(mt.accuracy, (double)correct / m_n, 1e-12);
	cr_assert(fabs(mt.auc - brute_auc(yy, margin, m_n)) < 1e-12);
	trn_model_free(m);
	trn_dataset_free(ds);
	mech_rng_free(rng);
}

/* ==== the loss hook of trn_model.c ==== */

/* For random output errors c_i, back-propagation must give the gradient
 * of sum_i c_i . logits_i, checked against central differences. */
Test(hook, backprop_matches_finite_differences)
{
	enum { B = 5 };
	const uint32_t widths[2][4] = { { 4, 6, 2, 0 }, { 3, 5, 4, 2 } };
	const uint32_t layers[2] = { 2, 3 }, acts[2] = { TRN_ACT_TANH, TRN_ACT_RELU };
	mech_rng *rng = trn_test_seeded(seed_prefix, 7);

	for (int c = 0; c < 2; c++) {
		trn_model *m = NULL;
		trn__workspace *ws = NULL;
		uint32_t L = layers[c], d = widths[c][0];
		double x[B * 4], coef[B * 2], *g, *fd;

		cr_assert_eq(trn__model_new(L, widths[c], acts[c], &m, NULL), 0);
		cr_assert_eq(mech_rng_normal_fill(rng, m->params, m->n_params), 0);
		cr_assert_eq(mech_rng_normal_fill(rng, x, B * d), 0);
		cr_assert_eq(mech_rng_normal_fill(rng, coef, B * 2), 0);
		cr_assert_eq(trn__workspace_new(m, B, &ws, NULL), 0);
		g = calloc(m->n_params, sizeof(double));
		fd = calloc(m->n_params, sizeof(double));
		memcpy(ws->act[0], x, B * d * sizeof(double));
		trn__chunk_logits(m, ws, B);
		memcpy(ws->delta[L - 1], coef, sizeof(coef));
		trn__chunk_backprop(m, ws, B, g);
		for (size_t p = 0; p < m->n_params; p++) {
			double keep = m->params[p], val[2];

			for (int sgn = 0; sgn < 2; sgn++) {
				m->params[p] = keep + (sgn ? -1e-6 : 1e-6);
				memcpy(ws->act[0], x, B * d * sizeof(double));
				trn__chunk_logits(m, ws, B);
				val[sgn] = 0.0;
				for (int i = 0; i < B * 2; i++)
					val[sgn] += coef[i] * ws->act[L][i];
			}
			m->params[p] = keep;
			fd[p] = (val[0] - val[1]) / 2e-6;
			cr_assert(fabs(fd[p] - g[p]) < 1e-5 * (1 + fabs(g[p])),
				  "param %zu: %g vs %g", p, g[p], fd[p]);
		}
		free(g);
		free(fd);
		trn__workspace_free(ws);
		trn_model_free(m);
	}
	mech_rng_free(rng);
}

/* ==== the label_em trainer ==== */

Test(label_em, event_is_the_mechanisms)
{
	const double eps[] = { 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 30.0 };
	const size_t ns[] = { 1, 7, 1000 };
	mech_rng *rng = trn_test_seeded(seed_prefix, 8);

	for (size_t e = 0; e < sizeof(eps) / sizeof(eps[0]); e++)
		for (size_t k = 0; k < 3; k++) {
			trn_label_em_params p;
			acct_event *ours = NULL, *mech = NULL;
			uint8_t *labels = calloc(ns[k], 1), *out = malloc(ns[k]);

			trn_label_em_params_default(&p);
			p.epsilon = eps[e];
			cr_assert_eq(trn_label_em_event(&p, ns[k], &ours, NULL), 0);
			cr_assert_eq(mech_label_em(rng, labels, ns[k], eps[e], 1.0, out, &mech, NULL), 0);
			cr_assert_eq(ours->type, ACCT_EV_RANDOMIZED_RESPONSE);
			cr_assert_eq(ours->type, mech->type);
			cr_assert_eq(memcmp(&ours->u.randomized_response.noise_parameter,
					    &mech->u.randomized_response.noise_parameter,
					    sizeof(double)), 0);
			cr_assert_eq(ours->u.randomized_response.num_buckets,
				     mech->u.randomized_response.num_buckets);
			/* And it is the one that prices epsilon/2: 2(1 - p). */
			cr_assert_float_eq(ours->u.randomized_response.noise_parameter,
					   2.0 / (1.0 + exp(eps[e] / 2.0)), 1e-15);
			acct_event_free(ours);
			acct_event_free(mech);
			free(labels);
			free(out);
		}
	mech_rng_free(rng);
}

typedef struct bad_case {
	const char *where;
	void (*spoil)(trn_label_em_params *p);
} bad_case;

static void eps_zero(trn_label_em_params *p) { p->epsilon = 0.0; }
static void eps_nan(trn_label_em_params *p) { p->epsilon = NAN; }
static void eps_keeps_all(trn_label_em_params *p) { p->epsilon = 1e4; }
static void loss_unknown(trn_label_em_params *p) { p->loss.kind = (trn_loss_kind)99; }
static void b_one(trn_label_em_params *p) { p->loss.b = 1.0; }
static void r_zero(trn_label_em_params *p) { p->loss.r = 0.0; }
static void r_inf(trn_label_em_params *p) { p->loss.r = INFINITY; }
static void classes_three(trn_label_em_params *p) { p->classes = 3; }
static void model_bad(trn_label_em_params *p) { p->model = (trn_model_kind)7; }
static void linear_hidden(trn_label_em_params *p) { p->n_hidden = 1; }
static void mlp_no_hidden(trn_label_em_params *p) { p->model = TRN_MODEL_MLP; }
static void mlp_wide(trn_label_em_params *p)
{
	p->model = TRN_MODEL_MLP;
	p->n_hidden = 1;
	p->hidden[0] = DPG_MAX_HIDDEN_UNITS + 1;
}
static void mlp_act(trn_label_em_params *p)
{
	p->model = TRN_MODEL_MLP;
	p->n_hidden = 1;
	p->activation = (trn_activation)9;
}
static void epochs_zero(trn_label_em_params *p) { p->epochs = 0; }
static void batch_zero(trn_label_em_params *p) { p->batch_size = 0; }
static void lr_zero(trn_label_em_params *p) { p->learning_rate = 0.0; }
static void momentum_one(trn_label_em_params *p) { p->momentum = 1.0; }
static void decay_negative(trn_label_em_params *p) { p->weight_decay = -1e-3; }
static void clip_negative(trn_label_em_params *p) { p->gradient_clip = -1.0; }
static void clip_nan(trn_label_em_params *p) { p->gradient_clip = NAN; }
static void unhinged_no_decay(trn_label_em_params *p)
{
	p->loss.kind = TRN_LOSS_UNHINGED;
	p->weight_decay = 0.0;
}

Test(label_em, bad_params_refused_with_their_pointer)
{
	const bad_case cases[] = {
		{ "/params/epsilon", eps_zero }, { "/params/epsilon", eps_nan },
		{ "/params/epsilon", eps_keeps_all }, { "/params/loss", loss_unknown },
		{ "/params/b", b_one }, { "/params/r", r_zero }, { "/params/r", r_inf },
		{ "/params/classes", classes_three }, { "/params/model", model_bad },
		{ "/params/hidden", linear_hidden }, { "/params/hidden", mlp_no_hidden },
		{ "/params/hidden", mlp_wide }, { "/params/activation", mlp_act },
		{ "/params/epochs", epochs_zero }, { "/params/batch_size", batch_zero },
		{ "/params/learning_rate", lr_zero }, { "/params/momentum", momentum_one },
		{ "/params/weight_decay", decay_negative },
		{ "/params/weight_decay", unhinged_no_decay },
		{ "/params/gradient_clip", clip_negative }, { "/params/gradient_clip", clip_nan },
	};
	trn_label_em_params p;
	acct_event *ev = NULL;

	trn_label_em_params_default(&p);
	cr_assert_eq(trn_label_em_params_validate(&p, NULL), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		acct_error err = { 0 }, err2 = { 0 };

		trn_label_em_params_default(&p);
		cases[i].spoil(&p);
		cr_assert_eq(trn_label_em_params_validate(&p, &err), ACCT_EINVAL, "%s",
			     cases[i].where);
		cr_assert_str_eq(err.where, cases[i].where);
		cr_assert_eq(trn_label_em_event(&p, 100, &ev, &err2), ACCT_EINVAL);
		cr_assert_str_eq(err2.where, cases[i].where);
	}
}

Test(label_em, shape_and_size_refusals)
{
	trn_label_em_params p;
	acct_event *ev = NULL;
	acct_error err = { 0 };

	trn_label_em_params_default(&p);
	cr_assert_eq(trn_label_em_check_shape(&p, 30, 2, NULL), 0);
	cr_assert_eq(trn_label_em_check_shape(&p, 30, 3, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/classes");
	memset(&err, 0, sizeof(err));
	cr_assert_eq(trn_label_em_check_shape(&p, 0, 2, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/data");
	memset(&err, 0, sizeof(err));
	cr_assert_eq(trn_label_em_event(&p, 0, &ev, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/data");
	memset(&err, 0, sizeof(err));
	cr_assert_eq(trn_label_em_event(&p, (uint64_t)DPG_MAX_LABEL_EM_N + 1, &ev, &err),
		     ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/data");
	/* Steps over the limit: epochs * ceil(n / batch). */
	memset(&err, 0, sizeof(err));
	p.batch_size = 1;
	p.epochs = DPG_MAX_EPOCHS;
	cr_assert_eq(trn_label_em_event(&p, 10000, &ev, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/epochs");
}

Test(label_em, guidance_closed_forms)
{
	const double eps[] = { 0.1, 0.5, 2.0 };
	const int ns[] = { 1, 100, 101, 2001 };

	for (size_t e = 0; e < 3; e++)
		for (size_t k = 0; k < 4; k++) {
			trn_label_em_params p;
			trn_label_em_guidance g;
			double keep = 1.0 / (1.0 + exp(-eps[e] / 2.0));

			trn_label_em_params_default(&p);
			p.epsilon = eps[e];
			cr_assert_eq(trn_label_em_guidance_for(&p, (uint64_t)ns[k], &g, NULL), 0);
			cr_assert_float_eq(g.keep_probability, keep, 1e-15);
			cr_assert_float_eq(g.expected_correct_fraction, keep, 1e-15);
			cr_assert(fabs(g.success_probability - test_binomial_upper_half(ns[k], keep)) <
				  1e-10, "n=%d eps=%g: %g", ns[k], eps[e], g.success_probability);
		}
}

/* Neighbouring tables (one label changed, to a class or to none) hand the
 * mechanism columns that differ in at most one position. */
Test(label_em, neighbouring_tables_give_neighbouring_columns)
{
	enum { N = 50 };
	const uint32_t values[3] = { 0, 1, TRN_NO_CLASS };
	mech_rng *rng = trn_test_seeded(seed_prefix, 9);
	trn_dataset *ds = NULL;
	uint8_t a[N], b[N];

	cr_assert_eq(trn_dataset_new(N, 1, 2, &ds, NULL), 0);
	for (int t = 0; t < 2000; t++) {
		uint64_t u, row, v;
		int diff = 0;

		for (size_t i = 0; i < N; i++) {
			cr_assert_eq(mech_rng_uint_below(rng, 3, &u), 0);
			ds->y[i] = values[u];
		}
		trn__label_em_column(ds, a);
		cr_assert_eq(mech_rng_uint_below(rng, N, &row), 0);
		cr_assert_eq(mech_rng_uint_below(rng, 3, &v), 0);
		ds->y[row] = values[v];
		trn__label_em_column(ds, b);
		for (size_t i = 0; i < N; i++) {
			cr_assert(a[i] <= 1 && b[i] <= 1);
			diff += a[i] != b[i];
		}
		cr_assert_leq(diff, 1);
		cr_assert_eq(b[row], ds->y[row] == 1);
	}
	trn_dataset_free(ds);
	mech_rng_free(rng);
}

/* ---- the separable toy problem of docs/label_em.md ---- */

enum { TOY_D = 5 };

/* n rows x = (u, v_2..v_5), every coordinate uniform on [-1, 1], clean
 * label y = [u > 0]: linearly separable through the origin, symmetric. */
static trn_dataset *toy_table(size_t n, uint8_t tag)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
	trn_dataset *ds = NULL;

	cr_assert_eq(trn_dataset_new(n, TOY_D, 2, &ds, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		for (int j = 0; j < TOY_D; j++)
			ds->x[i * TOY_D + j] = uniform(rng, -1.0, 1.0);
		ds->y[i] = ds->x[i * TOY_D] > 0.0;
	}
	mech_rng_free(rng);
	return ds;
}

/* Full-batch descent to the regularised minimiser: with a linear model and
 * the unhinged loss the step is theta <- (1 - lr wd) theta + lr g for a
 * constant g, so 80 epochs at lr wd = 1/2 leave an error of 2^-80. */
static void toy_params(trn_label_em_params *p, trn_loss_kind loss, size_t n)
{
	trn_label_em_params_default(p);
	p->epsilon = 1.0;
	p->loss.kind = loss;
	p->batch_size = (uint32_t)n;
	p->epochs = 80;
	p->learning_rate = 10.0;
	p->momentum = 0.0;
	p->weight_decay = 0.05;
	p->center = false;
}

static double margin_of(const trn_model *m, const double *x)
{
	const double *w = m->params;
	double z0 = w[2 * TOY_D], z1 = w[2 * TOY_D + 1];

	for (int j = 0; j < TOY_D; j++) {
		z0 += w[j] * x[j];
		z1 += w[TOY_D + j] * x[j];
	}
	return z1 - z0;
}

/*
 * The minimiser of mean(1 - s_i f(x_i)) + (wd/2)||theta||^2 over the
 * 2-class linear model on rows x - mu is f(x) = (2/wd)(mean(s (x - mu)) .
 * (x - mu) + mean(s)), s_i = +-1 the released label, mu the training mean
 * (or 0 without centring); the barrier hinge has the same minimiser while
 * its margins stay inside [-r, r] (docs/label_em.md).  The released labels
 * are reproduced here from the same seed: the mechanism is the run's first
 * draw.
 */
Test(label_em, reaches_the_closed_form_minimiser, .timeout = 120)
{
	enum { N = 4000 };
	trn_dataset *ds = toy_table(N, 10), *test = toy_table(500, 11);
	const trn_loss_kind losses[2] = { TRN_LOSS_UNHINGED, TRN_LOSS_BARRIER_HINGE };
	uint8_t column[N], released[N];
	double mu[TOY_D] = { 0 };
	acct_event *ev = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 12);

	trn__label_em_column(ds, column);
	cr_assert_eq(mech_label_em(rng, column, N, 1.0, 1.0, released, &ev, NULL), 0);
	mech_rng_free(rng);
	acct_event_free(ev);
	for (size_t i = 0; i < N; i++)
		for (int j = 0; j < TOY_D; j++)
			mu[j] += ds->x[i * TOY_D + j] / N;
	for (int k = 0; k < 4; k++) {
		trn_label_em_params p;
		trn_label_em_result *res = NULL;
		double w[TOY_D] = { 0 }, c = 0.0, shift[TOY_D];

		toy_params(&p, losses[k % 2], N);
		p.center = k >= 2;
		for (int j = 0; j < TOY_D; j++)
			shift[j] = p.center ? mu[j] : 0.0;
		for (size_t i = 0; i < N; i++) {
			double s = released[i] ? 1.0 : -1.0;

			for (int j = 0; j < TOY_D; j++)
				w[j] += s * (ds->x[i * TOY_D + j] - shift[j]) / N;
			c += s / N;
		}
		rng = trn_test_seeded(seed_prefix, 12);
		cr_assert_eq(trn_label_em_run(&p, ds, test, rng, NULL, NULL, NULL, &res, NULL), 0);
		for (size_t i = 0; i < test->n; i++) {
			const double *x = test->x + i * TOY_D;
			double want = c;

			for (int j = 0; j < TOY_D; j++)
				want += w[j] * (x[j] - shift[j]);
			want *= 2.0 / p.weight_decay;
			cr_assert(fabs(margin_of(res->model, x) - want) < 1e-9 * (1 + fabs(want)),
				  "%s centre %d: margin %.12g, minimiser %.12g",
				  trn_loss_name(p.loss.kind), p.center, margin_of(res->model, x),
				  want);
			cr_assert(fabs(want) < p.loss.r);
		}
		trn_label_em_result_free(res);
		mech_rng_free(rng);
	}
	trn_dataset_free(ds);
	trn_dataset_free(test);
}

/*
 * The paper's claim (Charoenphakdee et al. 2019 for symmetric noise; Bi and
 * Suppakitpaisarn 2022 §III for the label EM): with keep probability p >
 * 1/2, a symmetric loss learns the clean classifier from released labels.
 * docs/label_em.md bounds the expected test accuracy of the minimiser on
 * the toy problem, for n rows, d features and any delta in (0, 1):
 *   E[acc] >= 1 - delta - sqrt(EQ) / (2 (m1 - sqrt(V1 / delta))),
 *   m1 = (2p - 1)/2, V1 = (1/12 + p(1 - p))/n, EQ = ((d - 1)/9 + 1)/n.
 * The mean over four independent runs must reach it, for the unhinged loss
 * and the barrier hinge, while the released labels are right only a
 * fraction p of the time.
 */
Test(label_em, reaches_the_expected_accuracy_bound, .timeout = 300)
{
	enum { N = 20000, RUNS = 4 };
	const trn_loss_kind losses[2] = { TRN_LOSS_UNHINGED, TRN_LOSS_BARRIER_HINGE };
	const double p = 1.0 / (1.0 + exp(-0.5)); /* epsilon = 1 */
	double m1 = (2 * p - 1) / 2, v1 = (1.0 / 12 + p * (1 - p)) / N;
	double eq = ((TOY_D - 1) / 9.0 + 1.0) / N, bound = 0.0;
	trn_dataset *test = toy_table(N, 20);

	for (double delta = 0.001; delta < 0.2; delta += 0.001) {
		double t = sqrt(v1 / delta), b;

		if (t >= m1)
			continue;
		b = 1.0 - delta - sqrt(eq) / (2.0 * (m1 - t));
		bound = b > bound ? b : bound;
	}
	cr_assert(bound > 0.9 && bound > p + 0.25, "bound %g", bound);
	for (int k = 0; k < 2; k++) {
		double mean = 0.0;

		for (int run = 0; run < RUNS; run++) {
			trn_dataset *ds = toy_table(N, (uint8_t)(30 + run));
			trn_label_em_params prm;
			trn_label_em_result *res = NULL;
			mech_rng *rng = trn_test_seeded(seed_prefix, (uint8_t)(40 + run));

			toy_params(&prm, losses[k], N);
			cr_assert_eq(trn_label_em_run(&prm, ds, test, rng, NULL, NULL, NULL, &res,
						      NULL), 0);
			mean += res->test_accuracy / RUNS;
			trn_label_em_result_free(res);
			trn_dataset_free(ds);
			mech_rng_free(rng);
		}
		cr_assert(mean >= bound, "%s: mean accuracy %g below the bound %g",
			  trn_loss_name(losses[k]), mean, bound);
	}
	trn_dataset_free(test);
}

static int stop_after_first(const trn_progress *pr, void *user)
{
	int *calls = user;

	(*calls)++;
	cr_assert(pr->evaluated && pr->accuracy >= 0.0 && pr->accuracy <= 1.0);
	cr_assert(isnan(pr->loss));
	return pr->epoch >= 1;
}

Test(label_em, mlp_runs_and_beats_the_released_labels, .timeout = 120)
{
	trn_dataset *ds = toy_table(3000, 50), *test = toy_table(1000, 51);
	trn_label_em_params p;
	trn_label_em_result *res = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 52);
	uint8_t *buf = NULL;
	size_t len = 0;
	trn_model *back = NULL;

	trn_label_em_params_default(&p);
	p.epsilon = 2.0;
	p.model = TRN_MODEL_MLP;
	p.n_hidden = 1;
	p.hidden[0] = 16;
	p.epochs = 20;
	cr_assert_eq(trn_label_em_run(&p, ds, test, rng, NULL, NULL, NULL, &res, NULL), 0);
	cr_assert(res->labels_released);
	cr_assert_eq(res->epochs_done, 20);
	cr_assert_eq(res->steps_total, 20 * ((3000 + 63) / 64));
	cr_assert_eq(res->steps_done, res->steps_total);
	/* Better than the released labels themselves (right w.p. p). */
	cr_assert(res->test_accuracy > 1.0 / (1.0 + exp(-1.0)) + 0.1, "%g", res->test_accuracy);
	cr_assert(res->test_auc > 0.9 && res->test_balanced_error < 0.2);
	/* The model file every trainer's predict reads. */
	cr_assert_eq(trn_model_serialize(res->model, &buf, &len, NULL), 0);
	cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), 0);
	trn_model_free(back);
	free(buf);
	trn_label_em_result_free(res);
	mech_rng_free(rng);
	trn_dataset_free(ds);
	trn_dataset_free(test);
}

Test(label_em, cancel_before_and_during)
{
	trn_dataset *ds = toy_table(500, 60);
	trn_label_em_params p;
	trn_label_em_result *res = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 61);
	atomic_bool stop = true;
	int calls = 0;

	trn_label_em_params_default(&p);
	p.epochs = 5;
	cr_assert_eq(trn_label_em_run(&p, ds, ds, rng, NULL, NULL, &stop, &res, NULL),
		     TRN_CANCELLED);
	cr_assert(!res->labels_released);
	cr_assert_null(res->model);
	cr_assert_eq(res->steps_done, 0);
	trn_label_em_result_free(res);
	res = NULL;
	cr_assert_eq(trn_label_em_run(&p, ds, ds, rng, stop_after_first, &calls, NULL, &res,
				      NULL), TRN_CANCELLED);
	cr_assert_eq(calls, 1);
	cr_assert(res->labels_released && res->model);
	cr_assert_eq(res->epochs_done, 1);
	trn_label_em_result_free(res);
	mech_rng_free(rng);
	trn_dataset_free(ds);
}

Test(label_em, more_than_two_classes_refused)
{
	trn_dataset *ds = NULL;
	trn_label_em_params p;
	trn_label_em_result *res = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 62);
	acct_error err = { 0 };

	cr_assert_eq(trn_dataset_new(10, 2, 3, &ds, NULL), 0);
	trn_label_em_params_default(&p);
	cr_assert_eq(trn_label_em_run(&p, ds, NULL, rng, NULL, NULL, NULL, &res, &err),
		     ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/classes");
	cr_assert_null(res);
	trn_dataset_free(ds);
	mech_rng_free(rng);
}

/* One full-batch step from theta = 0 (linear, no momentum, no centring) is
 * -lr g: with the clip on, its norm is exactly lr * gradient_clip. */
Test(label_em, gradient_clip_bounds_the_step)
{
	trn_dataset *ds = toy_table(200, 70);
	const double clips[2] = { 2.0, 0.0 };

	for (size_t i = 0; i < ds->n * TOY_D; i++)
		ds->x[i] *= 1000.0; /* a mean gradient of norm in the hundreds */
	for (int k = 0; k < 2; k++) {
		trn_label_em_params p;
		trn_label_em_result *res = NULL;
		mech_rng *rng = trn_test_seeded(seed_prefix, 71);
		double norm;

		trn_label_em_params_default(&p);
		p.loss.kind = TRN_LOSS_UNHINGED;
		p.weight_decay = 1e-9;
		p.momentum = 0.0;
		p.learning_rate = 0.5;
		p.batch_size = 200;
		p.epochs = 1;
		p.center = false;
		p.gradient_clip = clips[k];
		cr_assert_eq(trn_label_em_run(&p, ds, NULL, rng, NULL, NULL, NULL, &res, NULL), 0);
		norm = cblas_dnrm2((int)res->model->n_params, res->model->params, 1);
		if (k == 0)
			cr_assert(fabs(norm - 0.5 * 2.0) < 1e-12, "step norm %g", norm);
		else
			cr_assert(norm > 0.5 * 100.0, "unclipped step norm %g", norm);
		trn_label_em_result_free(res);
		mech_rng_free(rng);
	}
	trn_dataset_free(ds);
}
