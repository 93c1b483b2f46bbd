/*
 * test_scatter.c: unit tests of the scattering transform: its shapes, exact
 * covariance to shifts by 2^J, stability to small shifts, the low-pass
 * against its closed-form DFT (Poisson summation), the Littlewood-Paley sum
 * of the bank, order 0 and one order-1 channel against a naive DFT written
 * here, linearity of order 0 and the sign of orders 1 and 2.
 */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "trn.h"
#include "trn_test_rng.h"

static const uint8_t seed_prefix[2] = {0x5c, 0x47};

#define SIDE 28u
#define J 2u
#define L 8u
#define PIX (SIDE * SIDE)

static trn_scatter *bank(void)
{
	trn_scatter *s = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(trn_scatter_new(SIDE, SIDE, J, L, &s, &err), 0, "%s", err.text);
	return s;
}

static double *scatter(const trn_scatter *s, const double *x)
{
	size_t len = trn_scatter_channels(s) * trn_scatter_out_rows(s) * trn_scatter_out_cols(s);
	double *out = malloc(len * sizeof(double));
	trn_scatter_workspace *w = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_not_null(out);
	cr_assert_eq(trn_scatter_workspace_new(s, &w, &err), 0);
	cr_assert_eq(trn_scatter_apply(s, x, out, w), 0);
	trn_scatter_workspace_free(w);
	return out;
}

/* Uniform pixels in [0,1) inside rows and columns [lo, hi), zero elsewhere. */
static void random_image(mech_rng *rng, size_t lo, size_t hi, double *x)
{
	for (size_t i = 0; i < SIDE; i++)
		for (size_t j = 0; j < SIDE; j++)
			x[i * SIDE + j] = (i >= lo && i < hi && j >= lo && j < hi)
				? trn_test_uniform(rng) : 0.0;
}

Test(scatter, shapes_and_table)
{
	trn_scatter *s = bank();
	trn_dataset *in = NULL, *out = NULL;
	acct_error err;

	acct_error_init(&err);
	/* 1 + JL + L^2 J(J-1)/2 paths at 28/2^J per side; padding to 36 */
	cr_assert_eq(trn_scatter_channels(s), 1 + J * L + L * L * J * (J - 1) / 2);
	cr_assert_eq(trn_scatter_channels(s), 81);
	cr_assert_eq(trn_scatter_out_rows(s), 7);
	cr_assert_eq(trn_scatter_out_cols(s), 7);
	cr_assert_eq(trn_scatter_padded_rows(s), 36);
	cr_assert_null(trn_scatter_filter(s, J * L + 1));
	cr_assert_eq(trn_dataset_new(3, PIX, 10, &in, &err), 0);
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);
	for (size_t i = 0; i < 3; i++) {
		random_image(rng, 0, SIDE, in->x + i * PIX);
		in->y[i] = (uint32_t)(7 - i);
	}
	cr_assert_eq(trn_scatter_table(s, in, &out, &err), 0, "%s", err.text);
	cr_assert_eq(out->n, 3);
	cr_assert_eq(out->d, 3969);
	for (size_t i = 0; i < 3; i++) {
		double *one = scatter(s, in->x + i * PIX);
		cr_assert_eq(out->y[i], 7 - i);
		cr_assert_eq(memcmp(one, out->x + i * out->d, out->d * sizeof(double)), 0);
		free(one);
	}
	trn_dataset_free(out);
	out = NULL;
	in->d = PIX - 1;
	cr_assert_eq(trn_scatter_table(s, in, &out, &err), ACCT_EINVAL);
	cr_assert_null(out);
	in->d = PIX;
	trn_scatter *bad = NULL;
	cr_assert_eq(trn_scatter_new(30, 28, 2, 8, &bad, &err), ACCT_EINVAL);
	cr_assert_eq(trn_scatter_new(28, 28, 0, 8, &bad, &err), ACCT_EINVAL);
	cr_assert_eq(trn_scatter_new(4, 4, 2, 8, &bad, &err), ACCT_EINVAL);
	cr_assert_null(bad);
	mech_rng_free(rng);
	trn_dataset_free(in);
	trn_scatter_free(s);
}

/*
 * An image zero within 6 pixels of every edge, and the same image moved by
 * 2^J = 4 pixels down and right, reflect-pad to two 36 x 36 images that are
 * cyclic shifts of each other; every channel is a shift-covariant map
 * sampled every 4 pixels, so the output moves by exactly one sample.
 */
Test(scatter, shift_by_two_to_the_j_moves_output_by_one)
{
	trn_scatter *s = bank();
	mech_rng *rng = trn_test_seeded(seed_prefix, 2);
	double x[PIX], y[PIX] = {0};
	size_t m = trn_scatter_out_rows(s), C = trn_scatter_channels(s);

	random_image(rng, 6, 18, x);
	for (size_t i = 0; i + 4 < SIDE; i++)
		for (size_t j = 0; j + 4 < SIDE; j++)
			y[(i + 4) * SIDE + j + 4] = x[i * SIDE + j];
	double *sx = scatter(s, x), *sy = scatter(s, y);
	for (size_t c = 0; c < C; c++)
		for (size_t a = 0; a + 1 < m; a++)
			for (size_t b = 0; b + 1 < m; b++) {
				double u = sx[(c * m + a) * m + b];
				double v = sy[(c * m + a + 1) * m + b + 1];
				cr_assert(fabs(u - v) <= 1e-12 * (1.0 + fabs(u)),
					  "channel %zu (%zu,%zu): %g vs %g", c, a, b, u, v);
			}
	free(sx);
	free(sy);
	mech_rng_free(rng);
	trn_scatter_free(s);
}

static double rel_change(const double *a, const double *b, size_t n)
{
	double d = 0.0, s = 0.0;

	for (size_t i = 0; i < n; i++) {
		d += (a[i] - b[i]) * (a[i] - b[i]);
		s += a[i] * a[i];
	}
	return sqrt(d / s);
}

/*
 * Moving white noise by one pixel changes it by sqrt(2) relatively.  Order
 * 0 is the noise smoothed by a Gaussian of sigma = 1.6, whose correlation
 * at lag 1 is exp(-1/(4 sigma^2)), hence a relative change of
 * sqrt(2 (1 - exp(-1/(4 sigma^2)))) = 0.43 = 0.30 sqrt(2); order 1 smooths
 * moduli, which vary more slowly still.  We require 0.35 and 0.2 of the
 * pixels' change.
 */
Test(scatter, small_shifts_change_orders_0_and_1_little)
{
	trn_scatter *s = bank();
	mech_rng *rng = trn_test_seeded(seed_prefix, 3);
	double x[PIX], y[PIX] = {0};
	size_t plane = 49;

	random_image(rng, 6, 22, x);
	for (size_t i = 0; i < PIX; i++)
		x[i] = x[i] != 0.0 ? x[i] - 0.5 : 0.0;
	for (size_t i = 0; i < SIDE; i++)
		for (size_t j = 0; j + 1 < SIDE; j++)
			y[i * SIDE + j + 1] = x[i * SIDE + j];
	double raw = rel_change(x, y, PIX);
	double *sx = scatter(s, x), *sy = scatter(s, y);
	double r0 = rel_change(sx, sy, plane);
	double r1 = rel_change(sx + plane, sy + plane, J * L * plane);
	cr_assert_gt(raw, 1.0);
	cr_assert_lt(r0, 0.35 * raw, "order 0 moved %g, pixels %g", r0, raw);
	cr_assert_lt(r1, 0.2 * raw, "order 1 moved %g, pixels %g", r1, raw);
	free(sx);
	free(sy);
	mech_rng_free(rng);
	trn_scatter_free(s);
}

/*
 * phi is the periodised sampled Gaussian exp(-|u|^2 / (2 sigma^2)) /
 * (2 pi sigma^2), sigma = 0.8 * 2^(J-1); by Poisson summation its DFT at
 * w = 2 pi (u/P, v/Q) is sum_{k,l} exp(-sigma^2 |w + 2 pi (k,l)|^2 / 2).
 */
Test(scatter, low_pass_matches_its_closed_form)
{
	trn_scatter *s = bank();
	const double *phi = trn_scatter_filter(s, J * L);
	size_t P = trn_scatter_padded_rows(s), Q = trn_scatter_padded_cols(s);
	double sigma = 0.8 * 2.0;

	for (size_t u = 0; u < P; u++)
		for (size_t v = 0; v < Q; v++) {
			double wu = 2 * M_PI * (double)u / (double)P;
			double wv = 2 * M_PI * (double)v / (double)Q;
			double want = 0.0;
			for (int k = -4; k <= 4; k++)
				for (int l = -4; l <= 4; l++) {
					double a = wu + 2 * M_PI * k, b = wv + 2 * M_PI * l;
					want += exp(-sigma * sigma * (a * a + b * b) / 2);
				}
			cr_assert(fabs(phi[u * Q + v] - want) < 1e-12, "(%zu,%zu): %.15g vs %.15g",
				  u, v, phi[u * Q + v], want);
		}
	trn_scatter_free(s);
}

/*
 * Littlewood-Paley: A(w) = |phi(w)|^2 + 1/2 sum_{j,t} (|psi(w)|^2 +
 * |psi(-w)|^2).  Every wavelet has zero mean, so A(0) = phi(0)^2 = 1.
 * A <= 1 everywhere makes the wavelet transform, hence each scattering
 * layer and the whole transform, non-expansive (Mallat 2012, eq. (2.5) and
 * Proposition 2.5): ||Sx - Sy|| <= ||x - y||.  A > 0 says the bank misses
 * no frequency; its minimum for J = 2, L = 8 at 36 x 36 is about 0.12, at
 * the corners of the band, and we require 0.1.
 */
Test(scatter, littlewood_paley_sum_is_bounded)
{
	trn_scatter *s = bank();
	size_t P = trn_scatter_padded_rows(s), Q = trn_scatter_padded_cols(s);
	const double *phi = trn_scatter_filter(s, J * L);
	double lo = INFINITY, hi = 0.0;

	for (size_t n = 0; n < J * L; n++)
		cr_assert(fabs(trn_scatter_filter(s, n)[0]) < 1e-12, "psi %zu has a mean", n);
	for (size_t u = 0; u < P; u++)
		for (size_t v = 0; v < Q; v++) {
			size_t mu = (P - u) % P, mv = (Q - v) % Q;
			double a = phi[u * Q + v] * phi[u * Q + v];
			for (size_t n = 0; n < J * L; n++) {
				const double *psi = trn_scatter_filter(s, n);
				a += 0.5 * (psi[u * Q + v] * psi[u * Q + v] +
					    psi[mu * Q + mv] * psi[mu * Q + mv]);
			}
			if (u == 0 && v == 0)
				cr_assert(fabs(a - 1.0) < 1e-12);
			lo = fmin(lo, a);
			hi = fmax(hi, a);
		}
	cr_assert_gt(lo, 0.1, "A >= %g", lo);
	cr_assert_leq(hi, 1.0 + 1e-12, "A <= %g", hi);
	trn_scatter_free(s);
}

/* numpy's "reflect" padding of a 28 x 28 image by 4 on every side. */
static void pad_reflect(const double *x, size_t P, double *xp)
{
	for (size_t i = 0; i < P; i++)
		for (size_t j = 0; j < P; j++) {
			long a = labs((long)i - 4), b = labs((long)j - 4);
			if (a >= (long)SIDE)
				a = 2 * ((long)SIDE - 1) - a;
			if (b >= (long)SIDE)
				b = 2 * ((long)SIDE - 1) - b;
			xp[i * P + j] = x[a * SIDE + b];
		}
}

/* Naive forward DFT of an n x n array. */
static void naive_dft(const double complex *x, size_t n, double complex *X)
{
	for (size_t u = 0; u < n; u++)
		for (size_t v = 0; v < n; v++) {
			double complex acc = 0.0;
			for (size_t p = 0; p < n; p++)
				for (size_t q = 0; q < n; q++)
					acc += x[p * n + q] *
					       cexp(-2.0 * M_PI * I * (double)(u * p + v * q) / (double)n);
			X[u * n + v] = acc;
		}
}

/* (1/n^2) sum_{u,v} X H e^{2 pi i (u p + v q)/n}: the circular convolution
 * of x with the filter whose DFT is H, at pixel (p, q). */
static double complex naive_conv_at(const double complex *X, const double *H, size_t n,
				    size_t p, size_t q)
{
	double complex acc = 0.0;

	for (size_t u = 0; u < n; u++)
		for (size_t v = 0; v < n; v++)
			acc += X[u * n + v] * H[u * n + v] *
			       cexp(2.0 * M_PI * I * (double)(u * p + v * q) / (double)n);
	return acc / (double)(n * n);
}

/*
 * S0 = (x_pad * phi)(4a + 4, 4b + 4) and, for the wavelet n1 = (j1 = 1,
 * t = 2), S1 = (U * phi_1)(2a + 2, 2b + 2) with U(p, q) = |x_pad *
 * psi|(2p, 2q) on the 18 x 18 grid and phi_1 phi's DFT kept at the
 * frequencies |u| < 9 (kymatio's periodisation), all by naive DFTs here.
 */
Test(scatter, order_0_and_1_match_a_naive_dft)
{
	trn_scatter *s = bank();
	mech_rng *rng = trn_test_seeded(seed_prefix, 4);
	size_t P = 36, h = 18, n1 = L + 2;
	double x[PIX], xp[36 * 36], phi1[18 * 18];
	double complex *xc = malloc(P * P * sizeof(*xc)), *X = malloc(P * P * sizeof(*X));
	double complex U[18 * 18], Uh[18 * 18];
	const double *phi = trn_scatter_filter(s, J * L), *psi = trn_scatter_filter(s, n1);

	random_image(rng, 0, SIDE, x);
	double *out = scatter(s, x);
	pad_reflect(x, P, xp);
	for (size_t i = 0; i < P * P; i++)
		xc[i] = xp[i];
	naive_dft(xc, P, X);
	for (size_t a = 0; a < 7; a++)
		for (size_t b = 0; b < 7; b++) {
			double want = creal(naive_conv_at(X, phi, P, 4 * a + 4, 4 * b + 4));
			cr_assert(fabs(out[a * 7 + b] - want) < 1e-9, "S0 %g vs %g", out[a * 7 + b], want);
		}
	for (size_t p = 0; p < h; p++)
		for (size_t q = 0; q < h; q++)
			U[p * h + q] = cabs(naive_conv_at(X, psi, P, 2 * p, 2 * q));
	for (size_t u = 0; u < h; u++)
		for (size_t v = 0; v < h; v++)
			phi1[u * h + v] = phi[(u < 9 ? u : u + 18) * P + (v < 9 ? v : v + 18)];
	naive_dft(U, h, Uh);
	for (size_t a = 0; a < 7; a++)
		for (size_t b = 0; b < 7; b++) {
			double want = creal(naive_conv_at(Uh, phi1, h, 2 * a + 2, 2 * b + 2));
			double got = out[((1 + n1) * 7 + a) * 7 + b];
			cr_assert(fabs(got - want) < 1e-9, "S1 (%zu,%zu) %g vs %g", a, b, got, want);
		}
	free(out);
	free(xc);
	free(X);
	mech_rng_free(rng);
	trn_scatter_free(s);
}

Test(scatter, order_0_is_linear)
{
	trn_scatter *s = bank();
	mech_rng *rng = trn_test_seeded(seed_prefix, 5);
	double x[PIX], y[PIX], z[PIX], alpha = 1.7, beta = -0.6;

	random_image(rng, 0, SIDE, x);
	random_image(rng, 3, 25, y);
	for (size_t i = 0; i < PIX; i++)
		z[i] = alpha * x[i] + beta * y[i];
	double *sx = scatter(s, x), *sy = scatter(s, y), *sz = scatter(s, z);
	for (size_t i = 0; i < 49; i++)
		cr_assert(fabs(sz[i] - (alpha * sx[i] + beta * sy[i])) < 1e-12);
	free(sx);
	free(sy);
	free(sz);
	mech_rng_free(rng);
	trn_scatter_free(s);
}

/*
 * Orders 1 and 2 average moduli, |.| >= 0.  Order 1 at j1 = 0 averages with
 * phi itself, a positive (periodised) Gaussian, so it is >= 0 up to
 * rounding.  The other channels average on the 18 x 18 grid with phi's DFT
 * cut at |w| < pi/2 (kymatio's periodisation), where phi's DFT is
 * exp(-1.28 (pi/2)^2) = 0.04: that band-limited Gaussian has small negative
 * lobes, so a spike can drive a coefficient slightly below 0 (we see
 * -9e-5 of the largest coefficient for a single pixel, -2e-7 for random
 * images); they must stay above -2e-4 of the largest.
 */
Test(scatter, orders_1_and_2_are_non_negative)
{
	trn_scatter *s = bank();
	mech_rng *rng = trn_test_seeded(seed_prefix, 6);
	size_t C = trn_scatter_channels(s);
	double x[PIX];

	for (int k = 0; k < 6; k++) {
		random_image(rng, (size_t)k, SIDE - (size_t)k, x);
		for (size_t i = 0; i < PIX; i++)
			x[i] = k % 2 ? x[i] - 0.5 : x[i];
		if (k == 5) {
			memset(x, 0, sizeof(x));
			x[13 * SIDE + 14] = 1.0;
		}
		double *sx = scatter(s, x), top = 0.0;
		for (size_t i = 49; i < C * 49; i++)
			top = fmax(top, sx[i]);
		for (size_t i = 49; i < C * 49; i++) {
			double tol = i < (1 + L) * 49 ? 1e-13 : 2e-4;
			cr_assert_geq(sx[i], -tol * top, "image %d coefficient %zu: %g", k, i, sx[i]);
		}
		free(sx);
	}
	mech_rng_free(rng);
	trn_scatter_free(s);
}

struct scatter_thread {
	const trn_scatter *s;
	const double *images;
	double *out;
	size_t count;
	int rc;
};

static void *scatter_thread_run(void *arg)
{
	struct scatter_thread *t = arg;
	size_t len = 81 * 49;
	trn_scatter_workspace *w = NULL;

	t->rc = trn_scatter_workspace_new(t->s, &w, NULL);
	for (int rep = 0; rep < 60 && t->rc == 0; rep++)
		for (size_t i = 0; i < t->count && t->rc == 0; i++)
			t->rc = trn_scatter_apply(t->s, t->images + i * PIX, t->out + i * len, w);
	trn_scatter_workspace_free(w);
	return NULL;
}

/* One bank, two threads with their own workspaces: the same bits as one
 * thread alone. */
Test(scatter, concurrent_calls_with_own_workspaces_agree)
{
	trn_scatter *s = bank();
	mech_rng *rng = trn_test_seeded(seed_prefix, 7);
	size_t count = 8, len = 81 * 49;
	double *images = malloc(count * PIX * sizeof(double));
	double *outs[2] = {malloc(count * len * sizeof(double)), malloc(count * len * sizeof(double))};
	struct scatter_thread t[2];
	pthread_t th[2];

	cr_assert(images && outs[0] && outs[1]);
	for (size_t i = 0; i < count; i++)
		random_image(rng, 0, SIDE, images + i * PIX);
	for (int k = 0; k < 2; k++) {
		t[k] = (struct scatter_thread){s, images, outs[k], count, 0};
		cr_assert_eq(pthread_create(&th[k], NULL, scatter_thread_run, &t[k]), 0);
	}
	for (int k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		cr_assert_eq(t[k].rc, 0);
	}
	for (size_t i = 0; i < count; i++) {
		double *one = scatter(s, images + i * PIX);
		for (int k = 0; k < 2; k++)
			cr_assert_eq(memcmp(one, outs[k] + i * len, len * sizeof(double)), 0);
		free(one);
	}
	free(images);
	free(outs[0]);
	free(outs[1]);
	mech_rng_free(rng);
	trn_scatter_free(s);
}
