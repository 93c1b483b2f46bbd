/*
 * test_ensemble.c: the model format's version 2 (input rule, per-layer
 * activations, scores, version 1 still read), the output-perturbation noise
 * sampler, and the ensemble trainer (Hamm, Cao, Belkin, ICML 2016).
 *
 * Expected values come from closed forms, from computations written out
 * again here independently of the library, or from GSL's distribution
 * functions; never from numbers the code printed.  Every distribution test
 * also checks its power on a wrong distribution.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>

#include "trn_internal.h"

static mech_rng *seeded(uint8_t tag)
{
	uint8_t seed[32] = {0xe5, 0xb1, tag};

	return mech_rng_new_seeded(seed);
}

static void softmax_ref(const double *z, size_t k, double *p)
{
	double mx = z[0], s = 0.0;

	for (size_t j = 1; j < k; j++)
		mx = z[j] > mx ? z[j] : mx;
	for (size_t j = 0; j < k; j++)
		s += exp(z[j] - mx);
	for (size_t j = 0; j < k; j++)
		p[j] = exp(z[j] - mx) / s;
}

static void check_scores(const trn_model *m, const double *x, size_t d, const double *want,
			 size_t k)
{
	double got[8];
	uint32_t cls, arg = 0;

	cr_assert_eq(trn_model_scores(m, x, d, got, k, NULL), 0);
	for (size_t j = 0; j < k; j++) {
		cr_assert(fabs(got[j] - want[j]) < 1e-12, "score %zu: %.17g vs %.17g", j, got[j],
			  want[j]);
		arg = want[j] > want[arg] ? (uint32_t)j : arg;
	}
	cr_assert_eq(trn_model_predict(m, x, d, &cls, NULL), 0);
	cr_assert_eq(cls, arg);
}

/* ---- model format version 2 -------------------------------------------------- */

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 4;
}

static uint8_t *put64(uint8_t *p, double x)
{
	uint64_t v;

	memcpy(&v, &x, 8);
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 8;
}

/* A version 1 file written byte by byte from the format table: 2 inputs,
 * a relu hidden layer of 3, 2 classes.  W1 rows (1,-1), (0.5,2), (-1,0.25),
 * b1 (0.1,-0.2,0.3); W2 rows (1,-2,0.5), (-1,1,2), b2 (0.05,-0.05). */
static const double V1_W[] = {1, -1, 0.5, 2, -1, 0.25, 0.1, -0.2, 0.3,
			      1, -2, 0.5, -1, 1, 2, 0.05, -0.05};

static size_t v1_buffer(uint8_t *buf)
{
	uint8_t *p = buf;

	memcpy(p, "DPGMDL01", 8);
	p = put32(p + 8, 1);
	p = put32(p, TRN_ACT_RELU);
	p = put32(p, 2);   /* D */
	p = put32(p, 0);   /* P */
	p = put32(p, 2);   /* K */
	p = put32(p, 2);   /* classes */
	p = put32(p, 2);
	p = put32(p, 3);
	p = put32(p, 2);
	for (size_t i = 0; i < sizeof(V1_W) / sizeof(V1_W[0]); i++)
		p = put64(p, V1_W[i]);
	return (size_t)(p - buf);
}

/* The scores of the v1 model above, written out by hand. */
static void v1_reference(const double *x, double *p)
{
	double h[3], z[2];

	for (int r = 0; r < 3; r++) {
		h[r] = V1_W[2 * r] * x[0] + V1_W[2 * r + 1] * x[1] + V1_W[6 + r];
		h[r] = h[r] > 0 ? h[r] : 0;
	}
	for (int c = 0; c < 2; c++)
		z[c] = V1_W[9 + 3 * c] * h[0] + V1_W[10 + 3 * c] * h[1] + V1_W[11 + 3 * c] * h[2] +
		       V1_W[15 + c];
	softmax_ref(z, 2, p);
}

Test(model_v2, version_1_files_still_load_and_come_back_as_version_2)
{
	uint8_t buf[256], *out = NULL;
	double rows[3][2] = {{0.3, -0.7}, {2, 1}, {-1.5, 0.2}}, want[2];
	trn_model *m = NULL, *back = NULL;
	size_t len = v1_buffer(buf), out_len = 0;

	cr_assert_eq(len, 32 + 12 + 8 * 17);
	cr_assert_eq(trn_model_deserialize(buf, len, &m, NULL), 0);
	cr_assert_eq(trn_model_input_dim(m), 2);
	cr_assert_eq(trn_model_num_classes(m), 2);
	for (int i = 0; i < 3; i++) {
		v1_reference(rows[i], want);
		check_scores(m, rows[i], 2, want, 2);
	}
	cr_assert_eq(trn_model_serialize(m, &out, &out_len, NULL), 0);
	cr_assert_eq(out[8], 2);
	cr_assert_eq(out_len, len + 8 + 8);   /* the scale and two layer codes */
	cr_assert_eq(trn_model_deserialize(out, out_len, &back, NULL), 0);
	for (int i = 0; i < 3; i++) {
		v1_reference(rows[i], want);
		check_scores(back, rows[i], 2, want, 2);
	}
	/* A v1 file one byte short, or claiming a hidden layer without an
	 * activation, is refused. */
	trn_model_free(back);
	back = NULL;
	cr_assert_eq(trn_model_deserialize(buf, len - 1, &back, NULL), ACCT_EINVAL);
	put32(buf + 12, 0);
	cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), ACCT_EINVAL);
	cr_assert_null(back);
	free(out);
	trn_model_free(m);
}

/* 3 inputs -> cos layer of 4 -> sigmoid layer of 3 -> 3 classes; weights
 * i-dependent but fixed. */
static void layered_weights(double *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w[i] = sin(1.7 * (double)i + 0.3) * 1.5;
}

/* The same network evaluated here from its definition, unit_ball rule with
 * scale B first. */
static void layered_reference(const double *w, const double *x, double B, double *p)
{
	double z[3], h1[4], h2[3], logit[3], n2 = 0;
	const double *W1 = w, *b1 = w + 12, *W2 = w + 16, *b2 = w + 28, *W3 = w + 31, *b3 = w + 40;

	for (int j = 0; j < 3; j++)
		n2 += (x[j] / B) * (x[j] / B);
	for (int j = 0; j < 3; j++)
		z[j] = x[j] / B / (n2 > 1 ? sqrt(n2) : 1.0);
	for (int r = 0; r < 4; r++)
		h1[r] = cos(W1[3 * r] * z[0] + W1[3 * r + 1] * z[1] + W1[3 * r + 2] * z[2] + b1[r]);
	for (int r = 0; r < 3; r++) {
		double s = b2[r];

		for (int c = 0; c < 4; c++)
			s += W2[4 * r + c] * h1[c];
		h2[r] = 1.0 / (1.0 + exp(-s));
	}
	for (int r = 0; r < 3; r++) {
		logit[r] = b3[r];
		for (int c = 0; c < 3; c++)
			logit[r] += W3[3 * r + c] * h2[c];
	}
	softmax_ref(logit, 3, p);
}

Test(model_v2, layers_activations_and_unit_ball_rule_match_their_definition)
{
	uint32_t widths[4] = {3, 4, 3, 3};
	uint32_t acts[3] = {TRN_ACT_COS, TRN_ACT_SIGMOID, TRN_ACT_IDENTITY};
	double w[43], want[3];
	/* inside the ball of radius B = 2, on its edge, far outside it */
	double rows[3][3] = {{0.1, -0.4, 0.3}, {2, 0, 0}, {30, -40, 12}};
	trn_model *m = NULL, *back = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;

	layered_weights(w, 43);
	cr_assert_eq(trn_model_from_layers(3, widths, acts, w, TRN_INPUT_UNIT_BALL, 2.0, &m, NULL),
		     0);
	cr_assert_eq(trn_model_serialize(m, &buf, &len, NULL), 0);
	cr_assert_eq(buf[12], TRN_INPUT_UNIT_BALL);
	cr_assert_eq(trn_model_deserialize(buf, len, &back, NULL), 0);
	for (int i = 0; i < 3; i++) {
		layered_reference(w, rows[i], 2.0, want);
		check_scores(m, rows[i], 3, want, 3);
		check_scores(back, rows[i], 3, want, 3);
	}
	free(buf);
	trn_model_free(back);
	trn_model_free(m);
}

Test(model_v2, bad_layers_rules_and_score_sizes_are_refused)
{
	uint32_t widths[3] = {3, 4, 2}, good[2] = {TRN_ACT_TANH, TRN_ACT_IDENTITY};
	uint32_t last_relu[2] = {TRN_ACT_TANH, TRN_ACT_RELU}, unknown[2] = {9, TRN_ACT_IDENTITY};
	double w[26] = {0}, x[3] = {1, 2, 3}, s[3];
	trn_model *m = NULL;
	acct_error err;

	layered_weights(w, 26);
	acct_error_init(&err);
	cr_assert_eq(trn_model_from_layers(2, widths, last_relu, w, TRN_INPUT_NONE, 1, &m, &err),
		     ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/model/activations");
	cr_assert_eq(trn_model_from_layers(2, widths, unknown, w, TRN_INPUT_NONE, 1, &m, NULL),
		     ACCT_EINVAL);
	cr_assert_eq(trn_model_from_layers(2, widths, good, w, TRN_INPUT_UNIT_BALL, 0, &m, NULL),
		     ACCT_EINVAL);
	cr_assert_eq(trn_model_from_layers(2, widths, good, w, TRN_INPUT_UNIT_BALL, NAN, &m, NULL),
		     ACCT_EINVAL);
	cr_assert_eq(trn_model_from_layers(2, widths, good, w, (trn_input_rule)5, 1, &m, NULL),
		     ACCT_EINVAL);
	w[3] = INFINITY;
	cr_assert_eq(trn_model_from_layers(2, widths, good, w, TRN_INPUT_NONE, 1, &m, NULL),
		     ACCT_EINVAL);
	cr_assert_null(m);
	w[3] = 0.5;
	cr_assert_eq(trn_model_from_layers(2, widths, good, w, TRN_INPUT_NONE, 1, &m, NULL), 0);
	cr_assert_eq(trn_model_scores(m, x, 3, s, 3, NULL), ACCT_EINVAL);
	cr_assert_eq(trn_model_scores(m, x, 2, s, 2, NULL), ACCT_EINVAL);
	cr_assert_eq(trn_model_scores(m, x, 3, s, 2, NULL), 0);
	cr_assert(fabs(s[0] + s[1] - 1.0) < 1e-15);
	trn_model_free(m);
}

/* ---- the output-perturbation noise sampler ----------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Kolmogorov-Smirnov statistic of n samples (sorted in place) against a
 * CDF given by its parameters. */
typedef double (*cdf_fn)(double x, double a, double b);

static double ks_stat(double *v, size_t n, cdf_fn cdf, double a, double b)
{
	double dmax = 0.0;

	qsort(v, n, sizeof(double), cmp_double);
	for (size_t i = 0; i < n; i++) {
		double f = cdf(v[i], a, b), lo = f - (double)i / n, hi = (double)(i + 1) / n - f;

		dmax = fmax(dmax, fmax(lo, hi));
	}
	return dmax;
}

/* The KS critical value at level 1e-3: sqrt(-ln(alpha/2) / 2) / sqrt(n). */
static double ks_critical(size_t n)
{
	return sqrt(-log(0.5e-3) / 2.0) / sqrt((double)n);
}

#define BALL_SAMPLES 4000

/* Norms, and (1 + <eta/||eta||, e>)/2 for a fixed unit vector e, of
 * BALL_SAMPLES draws. */
static void ball_draws(size_t d, double beta, uint8_t tag, double *norms, double *proj)
{
	mech_rng *rng = seeded(tag);
	double *eta = malloc(d * sizeof(double)), e_dot;

	cr_assert_not_null(eta);
	for (size_t s = 0; s < BALL_SAMPLES; s++) {
		double n2 = 0.0;

		cr_assert_eq(mech_ball_sample(rng, d, beta, eta, NULL), 0);
		e_dot = 0.0;
		for (size_t j = 0; j < d; j++) {
			n2 += eta[j] * eta[j];
			e_dot += eta[j] / sqrt((double)d);   /* e = (1,...,1)/sqrt(d) */
		}
		norms[s] = sqrt(n2);
		proj[s] = (1.0 + e_dot / norms[s]) / 2.0;
	}
	free(eta);
	mech_rng_free(rng);
}

/* Norm ~ Gamma(d, 1/beta); for a uniform direction in R^d, (1 + t)/2 ~
 * Beta((d-1)/2, (d-1)/2) with t its projection on a fixed unit vector. */
Test(ball, norm_is_gamma_and_direction_uniform)
{
	static const struct { size_t d; double beta; } cases[] = {
		{2, 1.0}, {3, 0.25}, {10, 7.5}, {101, 2.0},
	};
	double *norms = malloc(BALL_SAMPLES * sizeof(double));
	double *proj = malloc(BALL_SAMPLES * sizeof(double));
	double crit = ks_critical(BALL_SAMPLES);

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double d = (double)cases[c].d, b = cases[c].beta, h = (d - 1) / 2, ks;

		ball_draws(cases[c].d, b, (uint8_t)(10 + c), norms, proj);
		ks = ks_stat(norms, BALL_SAMPLES, gsl_cdf_gamma_P, d, 1.0 / b);
		cr_assert(ks < crit, "d=%g norm KS %.4f >= %.4f", d, ks, crit);
		/* power: the same norms are far from Gamma(d, 1.15/beta) and, for
		 * small d, from Gamma(d - 1, 1/beta) (the density without the
		 * r^(d-1) factor's last power) */
		ks = ks_stat(norms, BALL_SAMPLES, gsl_cdf_gamma_P, d, 1.15 / b);
		cr_assert(ks > crit, "d=%g: KS cannot tell a 15%% wrong scale (%.4f)", d, ks);
		if (d <= 10) {
			ks = ks_stat(norms, BALL_SAMPLES, gsl_cdf_gamma_P, d - 1, 1.0 / b);
			cr_assert(ks > crit, "d=%g: KS cannot tell shape d-1", d);
		}
		ks = ks_stat(proj, BALL_SAMPLES, gsl_cdf_beta_P, h, h);
		cr_assert(ks < crit, "d=%g direction KS %.4f >= %.4f", d, ks, crit);
		/* power: a direction law with twice the concentration */
		ks = ks_stat(proj, BALL_SAMPLES, gsl_cdf_beta_P, 2 * h + 1, 2 * h + 1);
		cr_assert(ks > crit, "d=%g: KS cannot tell a wrong direction law (%.4f)", d, ks);
	}
	free(norms);
	free(proj);
}

Test(ball, bad_dimension_or_beta_is_refused_and_nothing_written)
{
	mech_rng *rng = seeded(30);
	double out[3] = {7, 7, 7};
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(mech_ball_sample(rng, 0, 1.0, out, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/d");
	cr_assert_eq(mech_ball_sample(rng, DPG_MAX_VECTOR_LEN + 1, 1.0, out, NULL), ACCT_EINVAL);
	acct_error_init(&err);
	cr_assert_eq(mech_ball_sample(rng, 3, 0.0, out, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/beta");
	cr_assert_eq(mech_ball_sample(rng, 3, -1.0, out, NULL), ACCT_EINVAL);
	cr_assert_eq(mech_ball_sample(rng, 3, NAN, out, NULL), ACCT_EINVAL);
	cr_assert_eq(mech_ball_sample(rng, 3, INFINITY, out, NULL), ACCT_EINVAL);
	cr_assert_eq(mech_ball_sample(NULL, 3, 1.0, out, NULL), ACCT_EINVAL);
	for (int j = 0; j < 3; j++)
		cr_assert_eq(out[j], 7);
	mech_rng_free(rng);
}
