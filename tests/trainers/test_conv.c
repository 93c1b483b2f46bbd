/*
 * test_conv.c: convolutional models (trn_conv.c).  The ghost norm of a
 * convolution's per-example gradient against that gradient built here
 * with three loops; the batch's per-example norms (ghost, materialised,
 * auto) against the norm of each example's gradient computed alone; the
 * gradient against central finite differences of the loss, for tanh and a
 * tempered sigmoid; and the clipping bound: on random neighbouring batches
 * (one row added) the clipped sums differ by at most C.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "trn.h"
#include "trn_conv_internal.h"
#include "trn_test_conv.h"
#include "trn_test_exact.h"
#include "trn_test_rng.h"

static const uint8_t seed_prefix[2] = {0xc0, 0x4e};

/* The shared two-block net (trn_test_conv.h) with activation act. */
static trn_convnet *small_net(trn_conv_act act, mech_rng *rng)
{
	trn_conv_spec s = trn_test_conv_spec(act);

	return trn_test_conv_net(&s, rng);
}

static double *random_rows(mech_rng *rng, size_t n, size_t d, double scale)
{
	double *x = malloc(n * d * sizeof(double));

	cr_assert_not_null(x);
	for (size_t i = 0; i < n * d; i++)
		x[i] = scale * trn_test_normal(rng);
	return x;
}

static double vec_norm(const double *v, size_t n)
{
	double s = 0.0;

	for (size_t i = 0; i < n; i++)
		s += v[i] * v[i];
	return sqrt(s);
}

Test(conv, ghost_norm_of_random_matrices)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);
	static const size_t shapes[][3] = {{1, 1, 1}, {3, 16, 9}, {8, 25, 72}, {2, 49, 4}};

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		size_t c = shapes[k][0], t = shapes[k][1], d = shapes[k][2];
		size_t g = t * t > c * d ? t * t : c * d;
		double *da = random_rows(rng, c, t, 1.0), *u = random_rows(rng, t, d, 1.0);
		double *sa = malloc(g * sizeof(double)), *sb = malloc(g * sizeof(double));
		double want = 0.0, ghost, mat;

		cr_assert(sa && sb);
		/* G = dA U entry by entry, and the bias gradient dA 1. */
		for (size_t o = 0; o < c; o++) {
			double b = 0.0;

			for (size_t p = 0; p < t; p++)
				b += da[o * t + p];
			want += b * b;
			for (size_t j = 0; j < d; j++) {
				double gij = 0.0;

				for (size_t p = 0; p < t; p++)
					gij += da[o * t + p] * u[p * d + j];
				want += gij * gij;
			}
		}
		ghost = trn__conv_grad_sqnorm(da, u, c, t, d, TRN_CONV_NORM_GHOST, sa, sb);
		mat = trn__conv_grad_sqnorm(da, u, c, t, d, TRN_CONV_NORM_MATERIALISE, sa, sb);
		cr_assert_float_eq(ghost, want, 1e-10 * want, "shape %zu", k);
		cr_assert_float_eq(mat, want, 1e-10 * want, "shape %zu", k);
		free(da);
		free(u);
		free(sa);
		free(sb);
	}
	mech_rng_free(rng);
}

/* The gradient of example x alone, unclipped, into a new array. */
static double *one_gradient(trn_convnet *n, const double *x, uint32_t y)
{
	double *g = calloc(trn_convnet_n_params(n), sizeof(double));

	cr_assert_not_null(g);
	cr_assert_eq(trn_convnet_clipped_grad(n, x, &y, 1, 0.0, TRN_CONV_NORM_MATERIALISE, g, NULL,
					      NULL),
		     0);
	return g;
}

Test(conv, batch_norms_are_each_examples_gradient_norm)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 2);
	trn_convnet *n = small_net(TRN_CONV_TANH, rng);
	size_t B = 6, d = trn_convnet_input_dim(n), np = trn_convnet_n_params(n);
	double *x = random_rows(rng, B, d, 1.0), *g = calloc(np, sizeof(double));
	double norms[3][6];
	static const trn_conv_norm_mode modes[] = {TRN_CONV_NORM_GHOST, TRN_CONV_NORM_MATERIALISE,
						   TRN_CONV_NORM_AUTO};
	uint32_t y[6];

	cr_assert_not_null(g);
	for (size_t i = 0; i < B; i++)
		y[i] = (uint32_t)trn_test_below(rng, 3);
	for (size_t m = 0; m < 3; m++)
		cr_assert_eq(trn_convnet_clipped_grad(n, x, y, B, 0.0, modes[m], g, norms[m], NULL),
			     0);
	for (size_t i = 0; i < B; i++) {
		double *gi = one_gradient(n, x + i * d, y[i]), want = vec_norm(gi, np);

		for (size_t m = 0; m < 3; m++)
			cr_assert_float_eq(norms[m][i], want, 1e-10 * want, "example %zu mode %zu", i,
					   m);
		free(gi);
	}
	free(g);
	free(x);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

/* Every coordinate of the gradient against (L(p + h) - L(p - h)) / 2h. */
static void check_finite_differences(trn_conv_act act, uint8_t tag)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);
	trn_convnet *n = small_net(act, rng);
	size_t d = trn_convnet_input_dim(n), np = trn_convnet_n_params(n);
	double *x = random_rows(rng, 1, d, 1.0), *p = trn_convnet_params(n), *g;
	uint32_t y = 2;

	g = one_gradient(n, x, y);
	for (size_t j = 0; j < np; j++) {
		double keep = p[j], h = 1e-5, up, down, fd;

		p[j] = keep + h;
		up = trn_convnet_loss(n, x, y);
		p[j] = keep - h;
		down = trn_convnet_loss(n, x, y);
		p[j] = keep;
		fd = (up - down) / (2 * h);
		cr_assert_float_eq(g[j], fd, 1e-7 + 1e-5 * fabs(fd), "param %zu: %g vs %g", j, g[j],
				   fd);
	}
	free(g);
	free(x);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

Test(conv, gradient_matches_finite_differences_tanh)
{
	check_finite_differences(TRN_CONV_TANH, 3);
}

Test(conv, gradient_matches_finite_differences_tempered_sigmoid)
{
	check_finite_differences(TRN_CONV_TEMPERED_SIGMOID, 4);
}

/* The tempered sigmoid with s = 2, T = 2, o = 1 is tanh: same losses. */
Test(conv, tempered_sigmoid_2_2_1_is_tanh)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 5);
	trn_conv_spec a = trn_test_conv_spec(TRN_CONV_TANH);
	trn_conv_spec b = trn_test_conv_spec(TRN_CONV_TEMPERED_SIGMOID);
	trn_convnet *na = NULL, *nb = NULL;
	double *x;

	b.ts_scale = 2.0;
	b.ts_temp = 2.0;
	b.ts_offset = 1.0;
	cr_assert_eq(trn_convnet_new(&a, &na, NULL), 0);
	cr_assert_eq(trn_convnet_new(&b, &nb, NULL), 0);
	cr_assert_eq(trn_convnet_init(na, rng, NULL), 0);
	memcpy(trn_convnet_params(nb), trn_convnet_params(na),
	       trn_convnet_n_params(na) * sizeof(double));
	x = random_rows(rng, 1, trn_convnet_input_dim(na), 1.0);
	cr_assert_float_eq(trn_convnet_loss(na, x, 1), trn_convnet_loss(nb, x, 1), 1e-12);
	free(x);
	trn_convnet_free(na);
	trn_convnet_free(nb);
	mech_rng_free(rng);
}

Test(conv, clipped_sums_of_neighbouring_batches_differ_by_at_most_c)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 6);
	trn_convnet *n = small_net(TRN_CONV_TANH, rng);
	size_t d = trn_convnet_input_dim(n), np = trn_convnet_n_params(n);
	const double C = 0.5;
	double *s0 = malloc(np * sizeof(double)), *s1 = malloc(np * sizeof(double));
	size_t clipped = 0;

	cr_assert(s0 && s1);
	for (int trial = 0; trial < 20; trial++) {
		size_t B = 1 + trn_test_below(rng, 8);
		/* Large inputs make most norms exceed C, so clipping acts. */
		double *x = random_rows(rng, B + 1, d, trial % 2 ? 5.0 : 0.3), norms[9], diff = 0.0;
		uint32_t y[9];

		for (size_t i = 0; i <= B; i++)
			y[i] = (uint32_t)trn_test_below(rng, 3);
		memset(s0, 0, np * sizeof(double));
		memset(s1, 0, np * sizeof(double));
		/* X, then X with one more row. */
		cr_assert_eq(trn_convnet_clipped_grad(n, x, y, B, C, TRN_CONV_NORM_AUTO, s0, NULL,
						      NULL), 0);
		cr_assert_eq(trn_convnet_clipped_grad(n, x, y, B + 1, C, TRN_CONV_NORM_AUTO, s1, norms,
						      NULL), 0);
		for (size_t j = 0; j < np; j++)
			diff += (s1[j] - s0[j]) * (s1[j] - s0[j]);
		cr_assert_leq(sqrt(diff), C * (1 + 1e-12), "trial %d: %g", trial, sqrt(diff));
		clipped += norms[B] > C;
		free(x);
	}
	cr_assert_geq(clipped, 5, "clipping must have acted in some trials");
	free(s0);
	free(s1);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

/* ||dA U||^2 + ||dA 1||^2 of conv layer cl, each entry of dA U and dA 1
 * summed exactly enough in double-double, then squared. */
static trn_test_dd exact_conv_sq(const struct conv_layer *cl, const double *da, const double *u)
{
	trn_test_dd total = {0.0, 0.0};

	for (size_t o = 0; o < cl->c_out; o++)
		for (size_t j = 0; j <= cl->d; j++) {
			trn_test_dd g = {0.0, 0.0};

			/* Column d is the bias: U's column of ones. */
			for (size_t p = 0; p < cl->t; p++)
				g = trn_test_dd_add(g, trn_test_dd_mul((trn_test_dd){da[o * cl->t + p], 0.0},
								      (trn_test_dd){j < cl->d ? u[p * cl->d + j] : 1.0, 0.0}));
			total = trn_test_dd_add(total, trn_test_dd_mul(g, g));
		}
	return total;
}

/* The exact squared norm of the gradient whose errors and inputs the last
 * example left in net n: its convolutions' and dense layers' parts. */
static trn_test_dd exact_example_sq(const trn_convnet *n)
{
	trn_test_dd total = {0.0, 0.0};

	for (uint32_t l = 0; l < n->spec.n_conv; l++)
		total = trn_test_dd_add(total, exact_conv_sq(&n->conv[l], n->da[l], n->u[l]));
	for (size_t l = 0; l < n->n_dense; l++)
		total = trn_test_dd_add(total,
					trn_test_dd_mul(trn_test_sqsum(n->dh[l + 1], n->dense[l].out, 0.0),
							trn_test_sqsum(n->h[l], n->dense[l].in, 1.0)));
	return total;
}

/*
 * Every example's contribution c g, g exact for the errors and inputs the
 * passes computed, has norm at most C (docs/training.md, "Clipping in
 * floating point"), in every norm mode: on random nets and rows, with C a
 * third of the computed norm (clipped) and C the computed norm itself,
 * where without the margin c = 1 and the exact norm exceeds C for a good
 * share of the rows.
 */
Test(conv, every_contribution_has_exact_norm_at_most_c)
{
	static const trn_conv_norm_mode modes[3] = {TRN_CONV_NORM_GHOST, TRN_CONV_NORM_MATERIALISE,
						    TRN_CONV_NORM_AUTO};
	mech_rng *rng = trn_test_seeded(seed_prefix, 7);
	size_t checked = 0;

	for (int trial = 0; trial < 6; trial++) {
		trn_convnet *n = small_net(trial % 2 ? TRN_CONV_TANH : TRN_CONV_TEMPERED_SIGMOID, rng);
		size_t d = trn_convnet_input_dim(n), np = trn_convnet_n_params(n);
		double *g = malloc(np * sizeof(double));

		cr_assert_not_null(g);
		for (int row = 0; row < 30; row++) {
			double *x = random_rows(rng, 1, d, row % 2 ? 4.0 : 0.5), norm = NAN, c = NAN;
			trn_conv_norm_mode mode = modes[row % 3];
			uint32_t y = (uint32_t)trn_test_below(rng, 3);

			cr_assert_eq(trn__convnet_example(n, x, y, 0.0, mode, g, &norm, NULL, NULL), 0);
			cr_assert(isfinite(norm) && norm > 0.0);
			for (int k = 0; k < 2; k++) {
				double C = k == 0 ? norm / 3.0 : norm;
				trn_test_dd sq;

				cr_assert_eq(trn__convnet_example(n, x, y, C, mode, g, NULL, &c, NULL), 0);
				cr_assert(c > 0.0 && c <= 1.0);
				sq = trn_test_dd_mul(exact_example_sq(n), trn_test_dd_mul((trn_test_dd){c, 0.0},
											 (trn_test_dd){c, 0.0}));
				cr_assert_leq(trn_test_excess_over_c2(sq, C), 0.0,
					      "trial %d row %d mode %d C %s: ||c g||^2 - C^2 = %g", trial, row,
					      (int)mode, k ? "= ||g||" : "= ||g|| / 3",
					      trn_test_excess_over_c2(sq, C));
				checked++;
			}
			free(x);
		}
		free(g);
		trn_convnet_free(n);
	}
	cr_assert_eq(checked, 360);
	mech_rng_free(rng);
}

/* The squared norm of the gradient the last example left in net n, as
 * exact_example_sq, in long double: x86's 15-bit exponent takes products
 * near 2^-1100 that double-double loses to underflow. */
static long double example_sq_ld(const trn_convnet *n)
{
	long double total = 0.0L;

	for (uint32_t l = 0; l < n->spec.n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];

		for (size_t o = 0; o < cl->c_out; o++)
			for (size_t j = 0; j <= cl->d; j++) {
				long double g = 0.0L;

				for (size_t p = 0; p < cl->t; p++)
					g += (long double)n->da[l][o * cl->t + p] *
					     (j < cl->d ? n->u[l][p * cl->d + j] : 1.0);
				total += g * g;
			}
	}
	for (size_t l = 0; l < n->n_dense; l++) {
		long double dd = 0.0L, hh = 1.0L;

		for (size_t k = 0; k < n->dense[l].out; k++)
			dd += (long double)n->dh[l + 1][k] * n->dh[l + 1][k];
		for (size_t k = 0; k < n->dense[l].in; k++)
			hh += (long double)n->h[l][k] * n->h[l][k];
		total += dd * hh;
	}
	return total;
}

/*
 * An example the net is sure of, on inputs near 2^300: the last layer's
 * biases (0, -380, -400) and small weights give output errors near
 * 2^-548, and the first convolution's weights, scaled by 2^-300, keep its
 * activations of order one, so its errors dA are near 2^-550 while U is
 * near 2^300.  Every product of errors underflowed in double, the norm
 * and its bound E came out 0, and the contribution went unclipped, about
 * 2^145 times C = 2^-390.  Now c g stays within C in every norm mode,
 * checked in long double (to 2^-50, its own rounding's order; the margin
 * itself is checked in double-double above), and is not clipped to
 * nothing.
 */
Test(conv, errors_whose_products_underflow_are_still_clipped)
{
	static const trn_conv_norm_mode modes[3] = {TRN_CONV_NORM_GHOST, TRN_CONV_NORM_MATERIALISE,
						    TRN_CONV_NORM_AUTO};
	static const double bias[3] = {0.0, -380.0, -400.0};
	const double C = 0x1p-390;
	mech_rng *rng = trn_test_seeded(seed_prefix, 11);
	trn_convnet *n = small_net(TRN_CONV_TANH, rng);
	const struct dense_layer *last = &n->dense[n->n_dense - 1];
	size_t d = trn_convnet_input_dim(n), np = trn_convnet_n_params(n);
	double *g = malloc(np * sizeof(double)), *x = random_rows(rng, 1, d, 0x1p300);

	cr_assert(LDBL_MIN_EXP < -1200, "long double has no wider exponent range here");
	cr_assert_not_null(g);
	for (size_t i = 0; i < n->conv[0].c_out * n->conv[0].d; i++)
		n->params[n->conv[0].w_off + i] *= 0x1p-300;
	for (size_t i = 0; i < last->out * last->in; i++)
		n->params[last->w_off + i] *= 1e-3;
	for (size_t k = 0; k < 3; k++)
		n->params[last->b_off + k] = bias[k];
	for (int m = 0; m < 3; m++) {
		double c = NAN;
		long double sq;

		cr_assert_eq(trn__convnet_example(n, x, 0, C, modes[m], g, NULL, &c, NULL), 0);
		sq = example_sq_ld(n) * c * c;
		cr_assert_gt(n->dh[n->n_dense][1], 0.0, "the errors were cleared");
		cr_assert_leq(sq, (long double)C * C * (1.0L + 0x1p-50L),
			      "mode %d: c g is %Lg times C", m, sqrtl(sq) / C);
		cr_assert_gt(sqrtl(sq), 0.5L * C, "mode %d: %Lg", m, sqrtl(sq) / C);
	}
	free(x);
	free(g);
	trn_convnet_free(n);
	mech_rng_free(rng);
}

/* Makes each of da's c rows (length t) orthogonal, in double, to the d
 * columns of u (t x d) and to the ones vector: modified Gram-Schmidt on
 * those columns, applied twice, so that dA U and dA 1 vanish up to
 * rounding while dA and U stay of order one. */
static void orthogonalise_rows(double *da, size_t c, size_t t, const double *u, size_t d)
{
	double *q = malloc(t * (d + 1) * sizeof(double));

	cr_assert_not_null(q);
	for (size_t j = 0; j <= d; j++) {
		double *v = q + j * t, nv;

		for (size_t p = 0; p < t; p++)
			v[p] = j < d ? u[p * d + j] : 1.0;
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < j; i++) {
				double dot = 0.0;

				for (size_t p = 0; p < t; p++)
					dot += v[p] * q[i * t + p];
				for (size_t p = 0; p < t; p++)
					v[p] -= dot * q[i * t + p];
			}
		nv = vec_norm(v, t);
		for (size_t p = 0; p < t; p++)
			v[p] /= nv;
	}
	for (size_t o = 0; o < c; o++)
		for (int pass = 0; pass < 2; pass++)
			for (size_t j = 0; j <= d; j++) {
				double dot = 0.0;

				for (size_t p = 0; p < t; p++)
					dot += da[o * t + p] * q[j * t + p];
				for (size_t p = 0; p < t; p++)
					da[o * t + p] -= dot * q[j * t + p];
			}
	free(q);
}

/*
 * With cancellation, a computed conv norm is no relative bound: errors
 * orthogonal to U's columns make dA U vanish up to rounding, and the
 * computed squared norm (ghost or materialised) then misses the exact one
 * by more than any relative margin for some draws; the absolute bound E
 * covers every draw (docs/training.md, "Clipping in floating point").
 */
Test(conv, conv_norm_error_bound_holds_under_cancellation)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 8);
	static const size_t shapes[][3] = {{3, 16, 9}, {4, 25, 8}, {2, 36, 18}, {6, 64, 20}};
	int under = 0, checked = 0;

	for (int trial = 0; trial < 40; trial++) {
		const size_t *sh = shapes[trial % 4];
		size_t c = sh[0], t = sh[1], d = sh[2], g = t * t > c * d ? t * t : c * d;
		double *da = random_rows(rng, c, t, 1.0), *u = random_rows(rng, t, d, 1.0);
		double *sa = malloc(g * sizeof(double)), *sb = malloc(g * sizeof(double));
		struct conv_layer cl = {.c_out = c, .t = t, .d = d};
		trn_test_dd exact;

		cr_assert(sa && sb);
		if (trial % 2)
			orthogonalise_rows(da, c, t, u, d);
		exact = exact_conv_sq(&cl, da, u);
		for (int m = 0; m < 2; m++) {
			trn_conv_norm_mode mode = m ? TRN_CONV_NORM_MATERIALISE : TRN_CONV_NORM_GHOST;
			double sq = trn__conv_grad_sqnorm(da, u, c, t, d, mode, sa, sb);
			double e = trn__conv_sqnorm_error(da, u, c, t, d);
			trn_test_dd over = trn_test_dd_add(exact, (trn_test_dd){-(fmax(sq, 0.0) + e), 0.0});

			cr_assert_leq(over.hi + over.lo, 0.0, "trial %d mode %d: exact %g, computed %g + %g",
				      trial, m, exact.hi, sq, e);
			/* Past a relative margin far wider than the clipping's. */
			under += exact.hi > fmax(sq, 0.0) * (1.0 + 1e-6);
			checked++;
		}
		free(da);
		free(u);
		free(sa);
		free(sb);
	}
	cr_assert_eq(checked, 80);
	cr_assert_geq(under, 5, "cancellation must defeat a relative margin: %d of 80", under);
	mech_rng_free(rng);
}

Test(conv, bad_specs_are_refused)
{
	trn_conv_spec s = trn_test_conv_spec(TRN_CONV_TANH);
	trn_convnet *n = NULL;

	s.kernel[0] = 4;
	cr_assert_eq(trn_convnet_new(&s, &n, NULL), ACCT_EINVAL);
	s = trn_test_conv_spec(TRN_CONV_TANH);
	s.side = 6; /* 6 -> 3 cannot halve again */
	cr_assert_eq(trn_convnet_new(&s, &n, NULL), ACCT_EINVAL);
	s = trn_test_conv_spec(TRN_CONV_TEMPERED_SIGMOID);
	s.ts_temp = 0.0;
	cr_assert_eq(trn_convnet_new(&s, &n, NULL), ACCT_EINVAL);
	cr_assert_null(n);
}
