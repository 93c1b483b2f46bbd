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
#include <endian.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>

#include "trn_internal.h"
#include "trn_test_rng.h"

/* This file's streams: trn_test_seeded(seed_prefix, tag). */
static const uint8_t seed_prefix[2] = {0xe5, 0xb1};

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

/* Little-endian writers through <endian.h>, not the shifts of
 * trn_model.c's writer: the file this test builds by hand then checks the
 * reader against an encoding it does not share. */
static uint8_t *put32(uint8_t *p, uint32_t v)
{
	uint32_t le = htole32(v);

	memcpy(p, &le, 4);
	return p + 4;
}

static uint8_t *put64(uint8_t *p, double x)
{
	uint64_t v, le;

	memcpy(&v, &x, 8);
	le = htole64(v);
	memcpy(p, &le, 8);
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
	{
		trn_model_info info;

		trn_model_info_get(back, &info);
		cr_assert_eq(info.input_dim, 3);
		cr_assert_eq(info.proj_dim, 0);
		cr_assert_null(info.proj);
		cr_assert_eq(info.n_layers, 3);
		cr_assert_eq(info.n_params, 43);
		cr_assert_eq(memcmp(info.widths, widths, sizeof(widths)), 0);
		cr_assert_eq(memcmp(info.activations, acts, sizeof(acts)), 0);
		cr_assert_eq(memcmp(info.params, w, sizeof(w)), 0);
		cr_assert_eq(info.input_rule, TRN_INPUT_UNIT_BALL);
		cr_assert_eq(info.input_scale, 2.0);
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
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
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
	mech_rng *rng = trn_test_seeded(seed_prefix, 30);
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

/* ---- the ensemble trainer: its ERM ------------------------------------------- */

/* n random inputs in the unit ball (d+1 coordinates, the last constant, as
 * trn__ensemble_inputs makes them). */
static double *random_inputs(mech_rng *rng, size_t n, size_t d)
{
	double *u = malloc(n * (d + 1) * sizeof(double));

	for (size_t i = 0; i < n; i++) {
		double s = 0.0, r = trn_test_uniform(rng);

		for (size_t j = 0; j < d; j++) {
			u[i * (d + 1) + j] = 2 * trn_test_uniform(rng) - 1;
			s += u[i * (d + 1) + j] * u[i * (d + 1) + j];
		}
		for (size_t j = 0; j < d; j++)
			u[i * (d + 1) + j] *= r / sqrt(s) / sqrt(2.0);
		u[i * (d + 1) + d] = 1 / sqrt(2.0);
	}
	return u;
}

/* The gradient of the weighted logistic risk, written out again here in
 * long double: (1/n) sum (sigma(w.u_i) - a_i) u_i + lambda w. */
static long double ref_grad_norm(const double *u, size_t n, size_t du, const double *a,
				 double lambda, const double *w)
{
	long double g[64] = {0}, s = 0;

	cr_assert(du <= 64);
	for (size_t i = 0; i < n; i++) {
		long double t = 0;

		for (size_t j = 0; j < du; j++)
			t += (long double)w[j] * u[i * du + j];
		for (size_t j = 0; j < du; j++)
			g[j] += (1.0L / (1.0L + expl(-t)) - a[i]) * u[i * du + j] / n;
	}
	for (size_t j = 0; j < du; j++)
		s += (g[j] + lambda * (long double)w[j]) * (g[j] + lambda * (long double)w[j]);
	return sqrtl(s);
}

Test(ensemble_erm, minimiser_has_zero_gradient_by_an_independent_computation)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 40);
	static const double lambdas[] = {1e-4, 1e-2, 1.0};

	/* 200 rows (Newton on the du x du Hessian) and 4 rows (fewer rows than
	 * inputs: the Woodbury form) */
	for (size_t c = 0; c < 6; c++) {
		size_t n = c < 3 ? 200 : 4, d = 6, du = d + 1;
		double *u = random_inputs(rng, n, d), a[200], w[7];

		for (size_t i = 0; i < n; i++)
			a[i] = i % 3 == 0 ? trn_test_uniform(rng) : (u[i * du] > 0 ? 1.0 : 0.0);
		cr_assert_eq(trn__erm_solve(u, n, du, a, lambdas[c % 3], TRN__LOSS_LOGISTIC,
					    TRN__ENSEMBLE_GRAD_TOL, true, w, NULL), 0);
		cr_assert(ref_grad_norm(u, n, du, a, lambdas[c % 3], w) < 1e-10L,
			  "n %zu lambda %g: gradient %Lg", n, lambdas[c % 3],
			  ref_grad_norm(u, n, du, a, lambdas[c % 3], w));
		free(u);
	}
	mech_rng_free(rng);
}

/* One input u = 1 with target a: the minimiser solves sigma(w) - a +
 * lambda w = 0, found here by bisection (the left side increases in w). */
Test(ensemble_erm, one_dimension_matches_bisection)
{
	static const double as[] = {0.0, 0.3, 0.5, 0.97, 1.0};
	double one = 1.0, w;

	for (size_t c = 0; c < 5; c++) {
		double lo = -1e4, hi = 1e4, lam = 0.05;

		for (int it = 0; it < 200; it++) {
			double mid = (lo + hi) / 2;

			if (1 / (1 + exp(-mid)) - as[c] + lam * mid > 0)
				hi = mid;
			else
				lo = mid;
		}
		cr_assert_eq(trn__erm_solve(&one, 1, 1, &as[c], lam, TRN__LOSS_LOGISTIC,
					    TRN__ENSEMBLE_GRAD_TOL, true, &w, NULL), 0);
		cr_assert(fabs(w - (lo + hi) / 2) < 1e-8, "a=%g: %.12g vs %.12g", as[c], w,
			  (lo + hi) / 2);
	}
	/* a = 1/2 everywhere: w = 0 exactly by symmetry */
	cr_assert_eq(trn__erm_solve(&one, 1, 1, &as[2], 0.05, TRN__LOSS_LOGISTIC,
				    TRN__ENSEMBLE_GRAD_TOL, true, &w, NULL), 0);
	cr_assert(fabs(w) < 1e-12);
}

/* ---- the ensemble trainer: sensitivity on neighbouring party sets ------------ */

/* The bound charged (Theorems 1 and 3, summed over one-vs-rest blocks) and
 * the tighter one docs/ensemble.md derives for the logistic loss:
 * (1/lambda) max sum_k |Delta a_k|, i.e. 1/(M lambda) or 2/(M lambda) for
 * soft labels with two or more classes, 1/lambda or 2/lambda for the vote. */
static double charged_bound(trn_ensemble_algorithm alg, uint32_t M, double lam)
{
	return alg == TRN_ENSEMBLE_MAJORITY_VOTE ? 2 / lam : 2 / (M * lam);
}

static double tight_bound(trn_ensemble_algorithm alg, uint32_t K, uint32_t M, double lam)
{
	return charged_bound(alg, M, lam) / (K == 2 ? 2 : 1);
}

/* sum over blocks of ||w_S - w_S'|| for the exact minimisers on two vote
 * tables. */
static double realised_shift(trn_ensemble_algorithm alg, const uint32_t *c1,
			     const uint32_t *c2, const double *u, size_t n, size_t du, uint32_t K,
			     uint32_t M, double lam)
{
	uint32_t blocks = trn__ensemble_blocks(K);
	double *a1 = malloc(n * blocks * sizeof(double)), *a2 = malloc(n * blocks * sizeof(double));
	double *w1 = malloc(blocks * du * sizeof(double)), *w2 = malloc(blocks * du * sizeof(double));
	double total = 0;

	trn__ensemble_targets(alg, c1, n, K, M, a1);
	trn__ensemble_targets(alg, c2, n, K, M, a2);
	cr_assert_eq(trn__ensemble_fit(u, n, du, a1, blocks, lam, w1, NULL), 0);
	cr_assert_eq(trn__ensemble_fit(u, n, du, a2, blocks, lam, w2, NULL), 0);
	for (uint32_t b = 0; b < blocks; b++) {
		double s = 0;

		for (size_t j = 0; j < du; j++)
			s += (w1[b * du + j] - w2[b * du + j]) * (w1[b * du + j] - w2[b * du + j]);
		total += sqrt(s);
	}
	free(a1);
	free(a2);
	free(w1);
	free(w2);
	return total;
}

/* Vote tables of M parties on n rows: votes[j*n + i]; counts from them. */
static void count_votes(const uint32_t *votes, size_t n, uint32_t M, uint32_t K,
			uint32_t *counts)
{
	memset(counts, 0, n * K * sizeof(uint32_t));
	for (uint32_t j = 0; j < M; j++)
		for (size_t i = 0; i < n; i++)
			counts[i * K + votes[j * n + i]]++;
}

Test(ensemble_sensitivity, random_neighbouring_votes_stay_within_the_bound)
{
	enum { N = 40, D = 3, M = 7 };
	static const double lambdas[] = {0.01, 1.0, 10.0};
	mech_rng *rng = trn_test_seeded(seed_prefix, 50);
	uint32_t votes[M * N], c1[N * 3], c2[N * 3];

	for (int trial = 0; trial < 36; trial++) {
		trn_ensemble_algorithm alg = trial % 2 ? TRN_ENSEMBLE_MAJORITY_VOTE
						       : TRN_ENSEMBLE_SOFT_LABEL;
		uint32_t K = 2 + (trial / 2) % 2, j = (uint32_t)(trn_test_uniform(rng) * M);
		double lam = lambdas[(trial / 4) % 3], shift;
		double *u = random_inputs(rng, N, D);

		for (size_t t = 0; t < M * N; t++)
			votes[t] = (uint32_t)(trn_test_uniform(rng) * K);
		count_votes(votes, N, M, K, c1);
		for (size_t i = 0; i < N; i++)   /* party j's votes, redrawn */
			votes[j * N + i] = (uint32_t)(trn_test_uniform(rng) * K);
		count_votes(votes, N, M, K, c2);
		shift = realised_shift(alg, c1, c2, u, N, D + 1, K, M, lam);
		cr_assert(shift <= tight_bound(alg, K, M, lam) * (1 + 1e-9),
			  "trial %d: shift %g above %g", trial, shift, tight_bound(alg, K, M, lam));
		cr_assert(shift <= charged_bound(alg, M, lam));
		free(u);
	}
	mech_rng_free(rng);
}

/* The worst case the bounds describe, built on purpose: every auxiliary row
 * at one point of the unit sphere, lambda large (the ERM nearly linear),
 * one party moving every row's target as far as it can.  The realised shift
 * comes within 5% of the tight bound, so the test above has power. */
Test(ensemble_sensitivity, worst_case_neighbours_come_close_to_the_bound)
{
	enum { N = 10, M = 7 };
	double u[N * 3], lam = 10.0;
	uint32_t votes[M * N], c1[N * 3], c2[N * 3];

	for (size_t i = 0; i < N; i++) {
		u[i * 3] = 0.6 / sqrt(2.0);
		u[i * 3 + 1] = 0.8 / sqrt(2.0);
		u[i * 3 + 2] = 1 / sqrt(2.0);
	}
	for (uint32_t K = 2; K <= 3; K++)
		for (int alg = 0; alg < 2; alg++) {
			double shift, tb = tight_bound((trn_ensemble_algorithm)alg, K, M, lam);

			/* three parties vote 0, three vote 1, the last 0 then 1 */
			for (uint32_t j = 0; j < M; j++)
				for (size_t i = 0; i < N; i++)
					votes[j * N + i] = j < 3 ? 0 : 1;
			for (size_t i = 0; i < N; i++)
				votes[6 * N + i] = 0;
			count_votes(votes, N, M, K, c1);
			for (size_t i = 0; i < N; i++)
				votes[6 * N + i] = 1;
			count_votes(votes, N, M, K, c2);
			shift = realised_shift((trn_ensemble_algorithm)alg, c1, c2, u, N, 3, K, M,
					       lam);
			cr_assert(shift <= tb * (1 + 1e-9) && shift >= 0.95 * tb,
				  "K=%u alg=%d: shift %g, bound %g", K, alg, shift, tb);
		}
}

/* A random private table whose rows belong to M parties. */
static trn_dataset *party_table(mech_rng *rng, size_t n, size_t d, uint32_t K,
				uint32_t M, uint32_t *party)
{
	trn_dataset *ds = NULL;

	cr_assert_eq(trn_dataset_new(n, d, K, &ds, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		ds->y[i] = (uint32_t)(trn_test_uniform(rng) * K);
		party[i] = (uint32_t)(trn_test_uniform(rng) * M);
		for (size_t j = 0; j < d; j++)
			ds->x[i * d + j] = ds->y[i] * (j == ds->y[i] % d) + trn_test_uniform(rng) - 0.5;
	}
	return ds;
}

/* Votes of every party through the local models, then the shift when one
 * party's rows are all replaced (new features, labels, and row count). */
static double table_shift(const trn_ensemble_params *p, const trn_dataset *t1,
			  const uint32_t *p1, const trn_dataset *t2, const uint32_t *p2,
			  const trn_dataset *aux)
{
	uint32_t K = t1->num_classes, *c1 = calloc(aux->n * K, 4), *c2 = calloc(aux->n * K, 4);
	double *u1 = NULL, *u2 = NULL, *ua = NULL, shift;

	cr_assert_eq(trn__ensemble_inputs(t1, p->input_scale, &u1, NULL), 0);
	cr_assert_eq(trn__ensemble_inputs(t2, p->input_scale, &u2, NULL), 0);
	cr_assert_eq(trn__ensemble_inputs(aux, p->input_scale, &ua, NULL), 0);
	cr_assert_eq(trn__ensemble_votes(p, t1, u1, p1, ua, aux->n, NULL, NULL, NULL, c1, NULL), 0);
	cr_assert_eq(trn__ensemble_votes(p, t2, u2, p2, ua, aux->n, NULL, NULL, NULL, c2, NULL), 0);
	shift = realised_shift(p->algorithm, c1, c2, ua, aux->n, t1->d + 1, K, p->parties,
			       p->lambda);
	free(c1);
	free(c2);
	free(u1);
	free(u2);
	free(ua);
	return shift;
}

Test(ensemble_sensitivity, replacing_a_whole_party_stays_within_the_bound)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 51);
	trn_ensemble_params p;

	trn_ensemble_params_default(&p);
	p.parties = 7;
	p.n_local_models = 5;
	for (uint32_t k = 0; k < 5; k++)
		p.local_model[k] = (trn_local_model)k;
	p.input_scale = 2.0;
	for (int trial = 0; trial < 12; trial++) {
		uint32_t K = 2 + trial % 2, j = (uint32_t)(trn_test_uniform(rng) * p.parties);
		uint32_t p1[150], p2[190];
		trn_dataset *t1 = party_table(rng, 150, 3, K, p.parties, p1), *t2 = NULL;
		trn_dataset *aux = party_table(rng, 30, 3, K, 1, p2);
		size_t m = 0, kept;

		p.algorithm = trial % 4 < 2 ? TRN_ENSEMBLE_SOFT_LABEL : TRN_ENSEMBLE_MAJORITY_VOTE;
		p.lambda = trial < 6 ? 0.05 : 2.0;
		/* S': party j's rows replaced by 40 fresh rows, the others kept */
		cr_assert_eq(trn_dataset_new(190, 3, K, &t2, NULL), 0);
		for (size_t i = 0; i < 150; i++)
			if (p1[i] != j) {
				memcpy(t2->x + m * 3, t1->x + i * 3, 3 * sizeof(double));
				t2->y[m] = t1->y[i];
				p2[m++] = p1[i];
			}
		for (kept = m; m < kept + 40; m++) {
			t2->y[m] = (uint32_t)(trn_test_uniform(rng) * K);
			p2[m] = j;
			for (size_t c = 0; c < 3; c++)
				t2->x[m * 3 + c] = 4 * trn_test_uniform(rng) - 2;
		}
		t2->n = m;
		{
			double shift = table_shift(&p, t1, p1, t2, p2, aux);
			double tb = tight_bound(p.algorithm, K, p.parties, p.lambda);

			cr_assert(shift <= tb * (1 + 1e-9), "trial %d: %g > %g", trial, shift, tb);
		}
		trn_dataset_free(t1);
		trn_dataset_free(t2);
		trn_dataset_free(aux);
	}
	mech_rng_free(rng);
}

/* ---- the ensemble trainer: local models, event, params, the job ----------- */

/* Three separable classes in 2-D: class c around angle 2 pi c / 3 at
 * radius 1.5, spread 0.2 (gaps wider than 2.5). */
static trn_dataset *separable(mech_rng *rng, size_t n, uint32_t K)
{
	trn_dataset *ds = NULL;

	cr_assert_eq(trn_dataset_new(n, 2, K, &ds, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		uint32_t c = (uint32_t)(i % K);

		ds->y[i] = c;
		ds->x[i * 2] = 1.5 * cos(2 * M_PI * c / 3) + 0.4 * (trn_test_uniform(rng) - 0.5);
		ds->x[i * 2 + 1] = 1.5 * sin(2 * M_PI * c / 3) + 0.4 * (trn_test_uniform(rng) - 0.5);
	}
	return ds;
}

Test(ensemble_local, every_kind_separates_a_separable_table)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 60);
	static const char *const names[] = {"logreg", "linear_svm", "gaussian_nb", "knn",
					    "decision_tree"};

	for (uint32_t K = 2; K <= 3; K++)
		for (size_t k = 0; k < 5; k++) {
			trn_dataset *tr = separable(rng, 30, K), *te = separable(rng, 60, K);
			uint32_t party[30] = {0}, *counts = calloc(60 * K, 4);
			trn_ensemble_params p;
			double *ut = NULL, *ua = NULL;

			trn_ensemble_params_default(&p);
			p.parties = 1;
			p.input_scale = 2.0;
			cr_assert_eq(trn_local_model_from_name(names[k], &p.local_model[0]), 0);
			cr_assert_eq(trn__ensemble_inputs(tr, 2.0, &ut, NULL), 0);
			cr_assert_eq(trn__ensemble_inputs(te, 2.0, &ua, NULL), 0);
			cr_assert_eq(trn__ensemble_votes(&p, tr, ut, party, ua, 60, NULL, NULL, NULL,
							 counts, NULL), 0);
			for (size_t i = 0; i < 60; i++)
				cr_assert_eq(counts[i * K + te->y[i]], 1, "%s K=%u row %zu", names[k],
					     K, i);
			free(counts);
			free(ut);
			free(ua);
			trn_dataset_free(tr);
			trn_dataset_free(te);
		}
	mech_rng_free(rng);
}

Test(ensemble, event_is_pure_epsilon_on_every_ledger)
{
	trn_ensemble_params p;
	acct_event *ev = NULL;
	static const acct_ledger_kind kinds[] = {ACCT_LEDGER_BASIC, ACCT_LEDGER_RDP,
						 ACCT_LEDGER_ZCDP};

	trn_ensemble_params_default(&p);
	p.parties = 10;
	p.epsilon = 0.7;
	cr_assert_eq(trn_ensemble_event(&p, &ev, NULL), 0);
	cr_assert_eq(acct_pure_epsilon_up(ev), 0.7);
	for (size_t k = 0; k < 6; k++) {
		acct_neighbor nb = k < 3 ? ACCT_REPLACE : ACCT_ADD_REMOVE;
		acct_filter f;
		acct_cost c;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(acct_filter_init(&f, kinds[k % 3], nb, 5.0, 1e-6, &err), 0,
			     "%s", err.text);
		cr_assert_eq(acct_filter_price(&f, ev, 0.0, &c, &err), 0, "%s", err.text);
		if (kinds[k % 3] == ACCT_LEDGER_BASIC) {
			cr_assert_eq(c.v[0], 0.7);
			cr_assert_eq(c.v[1], 0.0);
		} else if (kinds[k % 3] == ACCT_LEDGER_ZCDP) {
			/* pure eps-DP is eps^2/2-zCDP (Bun, Steinke 2016, Prop. 1.4) */
			cr_assert(fabs(c.v[0] - 0.245) < 1e-12, "rho %g", c.v[0]);
		} else {
			for (unsigned i = 0; i < c.n; i++)   /* RDP of pure eps-DP <= eps */
				cr_assert(c.v[i] > 0 && c.v[i] <= 0.7 * (1 + 1e-12));
		}
	}
	acct_event_free(ev);
}

static void bp_alg(trn_ensemble_params *p) { p->algorithm = (trn_ensemble_algorithm)2; }
static void bp_eps0(trn_ensemble_params *p) { p->epsilon = 0; }
static void bp_eps_inf(trn_ensemble_params *p) { p->epsilon = INFINITY; }
static void bp_parties0(trn_ensemble_params *p) { p->parties = 0; }
static void bp_parties_big(trn_ensemble_params *p) { p->parties = DPG_MAX_ENSEMBLE_PARTIES + 1; }
static void bp_kinds0(trn_ensemble_params *p) { p->n_local_models = 0; }
static void bp_kind(trn_ensemble_params *p) { p->local_model[0] = (trn_local_model)9; }
static void bp_lambda(trn_ensemble_params *p) { p->lambda = -1; }
static void bp_lambda_nan(trn_ensemble_params *p) { p->lambda = NAN; }
static void bp_scale(trn_ensemble_params *p) { p->input_scale = 0; }
static void bp_local_lambda(trn_ensemble_params *p) { p->local_lambda = 0; }
static void bp_knn(trn_ensemble_params *p) { p->knn_k = DPG_MAX_ENSEMBLE_KNN_K + 1; }
static void bp_depth0(trn_ensemble_params *p) { p->max_depth = 0; }
static void bp_depth(trn_ensemble_params *p) { p->max_depth = DPG_MAX_ENSEMBLE_TREE_DEPTH + 1; }

Test(ensemble, bad_params_are_refused_with_their_pointer)
{
	static const struct { void (*set)(trn_ensemble_params *); const char *where; } cases[] = {
		{bp_alg, "/params/algorithm"},     {bp_eps0, "/params/epsilon"},
		{bp_eps_inf, "/params/epsilon"},   {bp_parties0, "/params/parties"},
		{bp_parties_big, "/params/parties"}, {bp_kinds0, "/params/local_model"},
		{bp_kind, "/params/local_model"},  {bp_lambda, "/params/lambda"},
		{bp_lambda_nan, "/params/lambda"}, {bp_scale, "/params/input_scale"},
		{bp_local_lambda, "/params/local_lambda"}, {bp_knn, "/params/knn_k"},
		{bp_depth0, "/params/max_depth"},  {bp_depth, "/params/max_depth"},
	};
	trn_ensemble_params p;
	acct_event *ev = NULL;
	acct_error err;

	trn_ensemble_params_default(&p);
	p.parties = 3;
	cr_assert_eq(trn_ensemble_params_validate(&p, NULL), 0);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		trn_ensemble_params q = p;

		cases[c].set(&q);
		acct_error_init(&err);
		cr_assert_eq(trn_ensemble_params_validate(&q, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, cases[c].where);
		cr_assert_eq(trn_ensemble_event(&q, &ev, NULL), ACCT_EINVAL);
		cr_assert_null(ev);
	}
	/* shapes: too many features, one class, no auxiliary rows, knn work */
	acct_error_init(&err);
	cr_assert_eq(trn_ensemble_check_shape(&p, DPG_MAX_ENSEMBLE_FEATURES + 1, 2, 10, 10, &err),
		     ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/data");
	acct_error_init(&err);
	cr_assert_eq(trn_ensemble_check_shape(&p, 4, 1, 10, 10, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/classes");
	acct_error_init(&err);
	cr_assert_eq(trn_ensemble_check_shape(&p, 4, 2, 10, 0, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/auxiliary_data");
	cr_assert_eq(trn_ensemble_check_shape(&p, 1000, 2, 1000000, 100000, NULL), 0);
	p.local_model[0] = TRN_LOCAL_KNN;
	cr_assert_eq(trn_ensemble_check_shape(&p, 1000, 2, 1000000, 100000, NULL), ACCT_EINVAL);
}

/* beta = eps M lambda / 2 (Theorem 3) or eps lambda / 2 (Theorem 1), less
 * the solver's slack, which is below a relative 1e-4 at these sizes. */
Test(ensemble, noise_rate_follows_theorems_1_and_3)
{
	trn_ensemble_params p;

	trn_ensemble_params_default(&p);
	p.parties = 50;
	p.epsilon = 0.3;
	p.lambda = 0.01;
	for (uint32_t K = 2; K <= 10; K += 8) {
		double b = trn_ensemble_noise_beta(&p, 784, K, 5000);

		cr_assert(b < 0.3 * 50 * 0.01 / 2 && b > 0.3 * 50 * 0.01 / 2 * (1 - 1e-4), "%g", b);
		p.algorithm = TRN_ENSEMBLE_MAJORITY_VOTE;
		b = trn_ensemble_noise_beta(&p, 784, K, 5000);
		cr_assert(b < 0.3 * 0.01 / 2 && b > 0.3 * 0.01 / 2 * (1 - 1e-4), "%g", b);
		p.algorithm = TRN_ENSEMBLE_SOFT_LABEL;
	}
	p.parties = 0;
	cr_assert_eq(trn_ensemble_noise_beta(&p, 784, 2, 5000), 0.0);
}

/*
 * epsilon = 5e-324 (the least double) gives beta = eps M lambda / 2 / (1 +
 * slack), which rounds to 0: refused at /params/epsilon before anything is
 * reserved, where it used to fail the job after training.  For epsilon
 * down the decades, whatever the check accepts releases a model whose
 * every parameter is finite, over 20 draws each; epsilon 1e-300 is
 * accepted.
 */
Test(ensemble, an_epsilon_whose_noise_overflows_is_refused)
{
	trn_ensemble_params p;
	mech_rng *rng = trn_test_seeded(seed_prefix, 61);
	double w[5] = {0};
	size_t accepted = 0;
	acct_error err;

	trn_ensemble_params_default(&p);
	p.parties = 3;
	p.epsilon = 0x1p-1074;
	acct_error_init(&err);
	cr_assert_eq(trn_ensemble_check_shape(&p, 4, 2, 10, 10, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/epsilon");
	cr_assert_eq(trn_ensemble_noise_beta(&p, 4, 2, 10), 0.0);
	p.epsilon = 1e-300;
	cr_assert_eq(trn_ensemble_check_shape(&p, 4, 2, 10, 10, NULL), 0);
	for (int e = -300; e >= -323; e--) {
		p.epsilon = pow(10.0, e);
		if (trn_ensemble_check_shape(&p, 4, 2, 10, 10, NULL) < 0)
			continue;
		accepted++;
		for (int draw = 0; draw < 20; draw++) {
			trn_model *m = NULL;
			double beta = trn_ensemble_noise_beta(&p, 4, 2, 10);

			memset(w, 0, sizeof(w));
			cr_assert_eq(trn__ensemble_release(w, 2, 4, beta, 1.0, rng, &m, &err), 0, "%s",
				     err.text);
			for (size_t i = 0; i < m->n_params; i++)
				cr_assert(isfinite(m->params[i]), "epsilon %g: parameter %zu is %g",
					  p.epsilon, i, m->params[i]);
			trn_model_free(m);
		}
	}
	cr_assert_geq(accepted, 1);
	mech_rng_free(rng);
}

typedef struct progress_log {
	uint32_t calls, last_trained, stop_at;
	bool saw_erm;
} progress_log;

static int log_progress(const trn_ensemble_progress *pg, void *user)
{
	progress_log *lg = user;

	lg->calls++;
	if (strcmp(pg->phase, "local_models") == 0)
		lg->last_trained = pg->parties_trained;
	lg->saw_erm |= strcmp(pg->phase, "erm") == 0;
	return lg->stop_at && lg->calls >= lg->stop_at;
}

/* The whole job on separable data split over 12 parties of mixed kinds: at
 * a large epsilon the released model classifies public test rows well;
 * the result carries the public beta and the model's input rule. */
Test(ensemble, job_end_to_end_then_cancel)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 70);
	trn_dataset *tr = separable(rng, 240, 3), *aux = separable(rng, 90, 3);
	trn_dataset *te = separable(rng, 150, 3);
	uint32_t party[240];
	trn_ensemble_params p;
	trn_ensemble_result *r = NULL;
	progress_log lg = {0};
	atomic_bool stop = true;

	for (size_t i = 0; i < 240; i++)
		party[i] = (uint32_t)(i / 3 % 12);   /* every party sees every class */
	trn_ensemble_params_default(&p);
	p.parties = 12;
	p.epsilon = 50;
	p.lambda = 0.01;
	p.input_scale = 2.0;
	p.n_local_models = 3;
	p.local_model[1] = TRN_LOCAL_GAUSSIAN_NB;
	p.local_model[2] = TRN_LOCAL_KNN;
	p.local_model[3] = TRN_LOCAL_DECISION_TREE;
	p.n_local_models = 4;
	cr_assert_eq(trn_ensemble_run(&p, tr, party, aux, te, rng, log_progress, &lg, NULL, &r,
				      NULL), 0);
	cr_assert(r->test_accuracy > 0.95, "accuracy %g", r->test_accuracy);
	cr_assert_eq(r->noise_beta, trn_ensemble_noise_beta(&p, 2, 3, 90));
	cr_assert_eq(r->model->input_rule, TRN_INPUT_UNIT_BALL);
	cr_assert_eq(r->model->input_scale, 2.0);
	cr_assert_eq(lg.last_trained, 11);
	cr_assert(lg.saw_erm);
	trn_ensemble_result_free(r);
	r = NULL;
	cr_assert_eq(trn_ensemble_run(&p, tr, party, aux, te, rng, NULL, NULL, &stop, &r, NULL),
		     TRN_CANCELLED);
	lg = (progress_log){.stop_at = 3};
	cr_assert_eq(trn_ensemble_run(&p, tr, party, aux, te, rng, log_progress, &lg, NULL, &r,
				      NULL), TRN_CANCELLED);
	cr_assert_null(r);
	aux->d = 1;
	cr_assert_eq(trn_ensemble_run(&p, tr, party, aux, te, rng, NULL, NULL, NULL, &r, NULL),
		     ACCT_EINVAL);
	aux->d = 2;
	trn_dataset_free(tr);
	trn_dataset_free(aux);
	trn_dataset_free(te);
	mech_rng_free(rng);
}

/* class 1 exactly in the quadrant x > 0, y > 0 (an AND): one axis split
 * gets about 3/4 of the rows right (a threshold inside a cluster may gain a
 * row or two by chance, never the missing quarter), two splits all. */
Test(ensemble_local, decision_tree_depth_limits_what_it_learns)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 61);
	trn_dataset *tr = NULL;
	uint32_t party[80] = {0}, *counts = calloc(80 * 2, 4);
	trn_ensemble_params p;
	double *u = NULL;

	cr_assert_eq(trn_dataset_new(80, 2, 2, &tr, NULL), 0);
	for (size_t i = 0; i < 80; i++) {
		double sx = i % 2 ? 1 : -1, sy = i % 4 < 2 ? 1 : -1;

		tr->x[2 * i] = sx * (0.5 + 0.4 * trn_test_uniform(rng));
		tr->x[2 * i + 1] = sy * (0.5 + 0.4 * trn_test_uniform(rng));
		tr->y[i] = sx > 0 && sy > 0;
	}
	trn_ensemble_params_default(&p);
	p.parties = 1;
	p.input_scale = 2;
	p.local_model[0] = TRN_LOCAL_DECISION_TREE;
	cr_assert_eq(trn__ensemble_inputs(tr, 2, &u, NULL), 0);
	for (uint32_t depth = 1; depth <= 2; depth++) {
		size_t right = 0;

		p.max_depth = depth;
		memset(counts, 0, 80 * 2 * 4);
		cr_assert_eq(trn__ensemble_votes(&p, tr, u, party, u, 80, NULL, NULL, NULL, counts,
						 NULL), 0);
		for (size_t i = 0; i < 80; i++)
			right += counts[i * 2 + tr->y[i]];
		if (depth == 1)
			cr_assert(right >= 60 && right <= 64, "depth 1: %zu right", right);
		else
			cr_assert_eq(right, 80, "depth 2: %zu right", right);
	}
	free(counts);
	free(u);
	trn_dataset_free(tr);
	mech_rng_free(rng);
}
