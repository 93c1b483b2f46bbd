/*
 * trn_scatter.c: the 2D scattering transform with Morlet wavelets (Mallat,
 * "Group Invariant Scattering", CPAM 2012; Oyallon and Mallat, "Deep
 * Roto-Translation Scattering for Object Classification", CVPR 2015), as
 * kymatio's Scattering2D computes it and as Tramer and Boneh ("Differentially
 * Private Learning Needs Better Features (or Much More Data)", ICLR 2021)
 * feed it to DP-SGD.  docs/training.md, "Scattering features", gives the
 * formulas.
 *
 * Fixed, data-independent features let a linear model reach what a private
 * CNN reaches, at a fraction of the parameters DP-SGD must noise.  Every
 * convolution is a product in Fourier (GSL's mixed-radix complex FFT, which
 * takes the padded sizes such as 36 = 2^2 3^2); subsampling by k after a
 * filter is done in Fourier by averaging the k x k aliased blocks, so each
 * order runs at the resolution of its coarsest wavelet, as in kymatio.  The
 * bank is built once and only read afterwards, so threads share it, each
 * with its own workspace: a table is mapped in two.  The per-row group
 * normalisation a "scatter" DP-SGD job applies after the transform is here
 * too, so that one row map serves the job, its model and this file's table.
 */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fft_complex.h>

#include "trn_internal.h"

/* Threads that map a table's rows (the bank is read-only; each thread has
 * its own workspace). */
#define TRN_SCATTER_THREADS 2u

/* Morlet parameters of kymatio's filter bank (Oyallon and Mallat 2015). */
#define SCATTER_SIGMA0 0.8          /* sigma_j = 0.8 * 2^j pixels */
#define SCATTER_XI0 (0.75 * M_PI)   /* xi_j = 3 pi / 4 / 2^j radians/pixel */
#define SCATTER_SLANT_NUM 4.0       /* slant = 4 / L */
/* The Gabor sums over 5 x 5 periods of the padded grid, as kymatio does. */
#define SCATTER_PERIODS 2

#define SCATTER_RES (TRN_SCATTER_MAX_J + 1u)

struct trn_scatter {
	size_t M, N, J, L;
	size_t P, Q;              /* padded rows and columns */
	size_t pad_top, pad_left;
	size_t channels, out_m, out_n;
	double *phi_full;         /* P x Q, real Fourier transform */
	double *psi_full;         /* J*L filters of P x Q */
	/* Filters cropped to the low frequencies of resolution r (size
	 * (P >> r) x (Q >> r)): kymatio's periodize_filter_fft. */
	double *phi_res[SCATTER_RES];
	double *psi_res[TRN_SCATTER_MAX_J * TRN_SCATTER_MAX_L][SCATTER_RES];
	gsl_fft_complex_wavetable *wt_m[SCATTER_RES], *wt_n[SCATTER_RES];
};

struct trn_scatter_workspace {
	double *x_hat, *u1_hat, *u2_hat, *low;   /* 2 P Q doubles each */
	gsl_fft_complex_workspace *wk_m[SCATTER_RES], *wk_n[SCATTER_RES];
};

size_t trn_scatter_channels(const trn_scatter *s) { return s->channels; }
size_t trn_scatter_out_rows(const trn_scatter *s) { return s->out_m; }
size_t trn_scatter_out_cols(const trn_scatter *s) { return s->out_n; }
size_t trn_scatter_padded_rows(const trn_scatter *s) { return s->P; }
size_t trn_scatter_padded_cols(const trn_scatter *s) { return s->Q; }

const double *trn_scatter_filter(const trn_scatter *s, size_t index)
{
	if (index < s->J * s->L)
		return s->psi_full + index * s->P * s->Q;
	if (index == s->J * s->L)
		return s->phi_full;
	return NULL;
}

void trn_scatter_workspace_free(trn_scatter_workspace *w)
{
	if (!w)
		return;
	for (size_t r = 0; r < SCATTER_RES; r++) {
		if (w->wk_m[r])
			gsl_fft_complex_workspace_free(w->wk_m[r]);
		if (w->wk_n[r])
			gsl_fft_complex_workspace_free(w->wk_n[r]);
	}
	free(w->x_hat);
	free(w->u1_hat);
	free(w->u2_hat);
	free(w->low);
	free(w);
}

int trn_scatter_workspace_new(const trn_scatter *s, trn_scatter_workspace **ret,
			      acct_error *err)
{
	trn_scatter_workspace *w = calloc(1, sizeof(*w));
	size_t len = 2 * s->P * s->Q;
	int rc = 0;

	if (!w) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	w->x_hat = malloc(len * sizeof(double));
	w->u1_hat = malloc(len * sizeof(double));
	w->u2_hat = malloc(len * sizeof(double));
	w->low = malloc(len * sizeof(double));
	if (!w->x_hat || !w->u1_hat || !w->u2_hat || !w->low) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t r = 0; r <= s->J; r++) {
		w->wk_m[r] = gsl_fft_complex_workspace_alloc(s->P >> r);
		w->wk_n[r] = gsl_fft_complex_workspace_alloc(s->Q >> r);
		if (!w->wk_m[r] || !w->wk_n[r]) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto out;
		}
	}
	*ret = w;
	w = NULL;
out:
	trn_scatter_workspace_free(w);
	return rc;
}

/* In-place 2D DFT (forward, or inverse with the 1/(mn) factor) of a packed
 * complex (P >> r) x (Q >> r) array: rows, then strided columns. */
static int scatter_fft2(const trn_scatter *s, trn_scatter_workspace *w, double *data,
			size_t r, bool inverse)
{
	size_t m = s->P >> r, n = s->Q >> r;
	int rc;

	for (size_t i = 0; i < m; i++) {
		rc = inverse ? gsl_fft_complex_inverse(data + 2 * i * n, 1, n, s->wt_n[r], w->wk_n[r])
			     : gsl_fft_complex_forward(data + 2 * i * n, 1, n, s->wt_n[r], w->wk_n[r]);
		if (rc != GSL_SUCCESS)
			return ACCT_ENUMERIC;
	}
	for (size_t b = 0; b < n; b++) {
		rc = inverse ? gsl_fft_complex_inverse(data + 2 * b, n, m, s->wt_m[r], w->wk_m[r])
			     : gsl_fft_complex_forward(data + 2 * b, n, m, s->wt_m[r], w->wk_m[r]);
		if (rc != GSL_SUCCESS)
			return ACCT_ENUMERIC;
	}
	return 0;
}

/*
 * out = the Fourier transform, at resolution r_out, of (in * filter) sampled
 * every 2^(r_out - r_in) pixels, where in and filter are at resolution r_in.
 * Sampling by k in space is averaging the k x k aliased blocks in Fourier:
 * x[k a] = (1/(m'n')) sum_u (1/k^2 sum_{i,l} X[u + i m', v + l n']) e^{...}
 * with m' = m/k, n' = n/k.
 */
static void scatter_filter_down(const trn_scatter *s, const double *in, const double *filter,
				size_t r_in, size_t r_out, double *out)
{
	size_t m = s->P >> r_in, n = s->Q >> r_in;
	size_t k = (size_t)1 << (r_out - r_in);
	size_t mo = m / k, no = n / k;
	double scale = 1.0 / (double)(k * k);

	for (size_t a = 0; a < mo; a++)
		for (size_t b = 0; b < no; b++) {
			double re = 0.0, im = 0.0;
			for (size_t i = 0; i < k; i++)
				for (size_t l = 0; l < k; l++) {
					size_t u = (a + i * mo) * n + b + l * no;
					re += in[2 * u] * filter[u];
					im += in[2 * u + 1] * filter[u];
				}
			out[2 * (a * no + b)] = re * scale;
			out[2 * (a * no + b) + 1] = im * scale;
		}
}

/* out_hat = FFT of |in * psi| at resolution r_out (in_hat at r_in). */
static int scatter_modulus(const trn_scatter *s, trn_scatter_workspace *w, const double *in_hat,
			   const double *psi, size_t r_in, size_t r_out, double *out_hat)
{
	size_t len = (s->P >> r_out) * (s->Q >> r_out);
	int rc;

	scatter_filter_down(s, in_hat, psi, r_in, r_out, out_hat);
	rc = scatter_fft2(s, w, out_hat, r_out, true);
	if (rc != 0)
		return rc;
	for (size_t u = 0; u < len; u++) {
		out_hat[2 * u] = hypot(out_hat[2 * u], out_hat[2 * u + 1]);
		out_hat[2 * u + 1] = 0.0;
	}
	return scatter_fft2(s, w, out_hat, r_out, false);
}

/* One output channel: (u * phi) sampled every 2^J pixels, its border of one
 * coarse pixel (the padding) cut off; u_hat is at resolution r. */
static int scatter_average(const trn_scatter *s, trn_scatter_workspace *w, const double *u_hat,
			   size_t r, double *out)
{
	size_t nJ = s->Q >> s->J;
	int rc;

	scatter_filter_down(s, u_hat, s->phi_res[r], r, s->J, w->low);
	rc = scatter_fft2(s, w, w->low, s->J, true);
	if (rc != 0)
		return rc;
	for (size_t a = 0; a < s->out_m; a++)
		for (size_t b = 0; b < s->out_n; b++)
			out[a * s->out_n + b] = w->low[2 * ((a + 1) * nJ + b + 1)];
	return 0;
}

/* numpy's "reflect" padding: the edge pixel is not repeated. */
static size_t scatter_reflect(long t, size_t len)
{
	if (t < 0)
		t = -t;
	if (t >= (long)len)
		t = 2 * ((long)len - 1) - t;
	return (size_t)t;
}

int trn_scatter_apply(const trn_scatter *s, const double *x, double *out,
		      trn_scatter_workspace *w)
{
	size_t plane = s->out_m * s->out_n, c = 1 + s->J * s->L;
	int rc;

	for (size_t i = 0; i < s->P; i++)
		for (size_t j = 0; j < s->Q; j++) {
			size_t si = scatter_reflect((long)i - (long)s->pad_top, s->M);
			size_t sj = scatter_reflect((long)j - (long)s->pad_left, s->N);
			w->x_hat[2 * (i * s->Q + j)] = x[si * s->N + sj];
			w->x_hat[2 * (i * s->Q + j) + 1] = 0.0;
		}
	rc = scatter_fft2(s, w, w->x_hat, 0, false);
	if (rc == 0)
		rc = scatter_average(s, w, w->x_hat, 0, out);
	for (size_t n1 = 0; rc == 0 && n1 < s->J * s->L; n1++) {
		size_t j1 = n1 / s->L;

		rc = scatter_modulus(s, w, w->x_hat, s->psi_res[n1][0], 0, j1, w->u1_hat);
		if (rc == 0)
			rc = scatter_average(s, w, w->u1_hat, j1, out + (1 + n1) * plane);
		for (size_t n2 = (j1 + 1) * s->L; rc == 0 && n2 < s->J * s->L; n2++) {
			size_t j2 = n2 / s->L;

			rc = scatter_modulus(s, w, w->u1_hat, s->psi_res[n2][j1], j1, j2, w->u2_hat);
			if (rc == 0)
				rc = scatter_average(s, w, w->u2_hat, j2, out + c++ * plane);
		}
	}
	return rc;
}

/*
 * The Gabor filter of kymatio's gabor_2d, periodised on the P x Q grid:
 * g(u) = sum_{periods} exp(-u^T R D R^T u / (2 sigma^2) + i xi (cos t, sin t).u)
 * / (2 pi sigma^2 / slant), D = diag(1, slant^2), R the rotation by t;
 * u = (row, column) offsets.
 */
static void scatter_gabor(size_t P, size_t Q, double sigma, double theta, double xi,
			  double slant, double complex *g)
{
	double c = cos(theta), sn = sin(theta), s2 = 2.0 * sigma * sigma;
	/* R D R^T / (2 sigma^2) */
	double a00 = (c * c + slant * slant * sn * sn) / s2;
	double a01 = (c * sn - slant * slant * c * sn) / s2;
	double a11 = (sn * sn + slant * slant * c * c) / s2;
	double norm = 2.0 * M_PI * sigma * sigma / slant;

	for (size_t i = 0; i < P; i++)
		for (size_t j = 0; j < Q; j++) {
			double complex sum = 0.0;
			for (int ex = -SCATTER_PERIODS; ex <= SCATTER_PERIODS; ex++)
				for (int ey = -SCATTER_PERIODS; ey <= SCATTER_PERIODS; ey++) {
					double xx = (double)i + ex * (double)P;
					double yy = (double)j + ey * (double)Q;
					double q = a00 * xx * xx + 2.0 * a01 * xx * yy + a11 * yy * yy;
					sum += cexp(-q + I * xi * (xx * c + yy * sn));
				}
			g[i * Q + j] = sum / norm;
		}
}

/*
 * The real part of the DFT of a filter: a Morlet wavelet (xi > 0) is the
 * Gabor minus K times its envelope, K chosen so that its sum (its DFT at 0)
 * is zero; xi = 0 gives the Gaussian low-pass.  g and e are P x Q scratch.
 */
static int scatter_filter_fourier(const trn_scatter *s, trn_scatter_workspace *w, double sigma,
				  double theta, double xi, double slant, double complex *g,
				  double complex *e, double *ret)
{
	size_t pq = s->P * s->Q;
	int rc;

	scatter_gabor(s->P, s->Q, sigma, theta, xi, slant, g);
	if (xi != 0.0) {
		double complex sum_g = 0.0, sum_e = 0.0, K;
		scatter_gabor(s->P, s->Q, sigma, theta, 0.0, slant, e);
		for (size_t u = 0; u < pq; u++) {
			sum_g += g[u];
			sum_e += e[u];
		}
		K = sum_g / sum_e;
		for (size_t u = 0; u < pq; u++)
			g[u] -= K * e[u];
	}
	for (size_t u = 0; u < pq; u++) {
		w->x_hat[2 * u] = creal(g[u]);
		w->x_hat[2 * u + 1] = cimag(g[u]);
	}
	rc = scatter_fft2(s, w, w->x_hat, 0, false);
	if (rc != 0)
		return rc;
	for (size_t u = 0; u < pq; u++)
		ret[u] = w->x_hat[2 * u];
	return 0;
}

/* Keeps the frequencies below half the band of resolution r (kymatio's
 * periodize_filter_fft, whose mask leaves one term per aliased sum). */
static double *scatter_crop(const trn_scatter *s, const double *full, size_t r)
{
	size_t mo = s->P >> r, no = s->Q >> r;
	double *c = malloc(mo * no * sizeof(double));

	if (!c)
		return NULL;
	for (size_t a = 0; a < mo; a++) {
		size_t sa = a < mo / 2 ? a : a + s->P - mo;
		for (size_t b = 0; b < no; b++) {
			size_t sb = b < no / 2 ? b : b + s->Q - no;
			c[a * no + b] = full[sa * s->Q + sb];
		}
	}
	return c;
}

/* Builds every filter at full size and its crops. */
static int scatter_bank(trn_scatter *s, trn_scatter_workspace *w, double complex *g,
			double complex *e)
{
	double slant = SCATTER_SLANT_NUM / (double)s->L;
	/* kymatio's orientations: int(L - L/2 - 1) - t, times pi / L */
	double t0 = trunc((double)s->L - (double)s->L / 2.0 - 1.0);
	int rc;

	for (size_t n = 0; n < s->J * s->L; n++) {
		size_t j = n / s->L, t = n % s->L;
		double scale = ldexp(1.0, (int)j);
		double theta = (t0 - (double)t) * M_PI / (double)s->L;

		rc = scatter_filter_fourier(s, w, SCATTER_SIGMA0 * scale, theta,
					    SCATTER_XI0 / scale, slant, g, e,
					    s->psi_full + n * s->P * s->Q);
		if (rc != 0)
			return rc;
		for (size_t r = 0; r < s->J; r++)
			if (!(s->psi_res[n][r] = scatter_crop(s, s->psi_full + n * s->P * s->Q, r)))
				return ACCT_ENOMEM;
	}
	/* phi: a Gaussian of sigma 0.8 * 2^(J-1), slant 1 (kymatio) */
	rc = scatter_filter_fourier(s, w, SCATTER_SIGMA0 * ldexp(1.0, (int)s->J - 1), 0.0, 0.0,
				    1.0, g, e, s->phi_full);
	if (rc != 0)
		return rc;
	for (size_t r = 0; r < s->J; r++)
		if (!(s->phi_res[r] = scatter_crop(s, s->phi_full, r)))
			return ACCT_ENOMEM;
	return 0;
}

void trn_scatter_free(trn_scatter *s)
{
	if (!s)
		return;
	for (size_t r = 0; r < SCATTER_RES; r++) {
		free(s->phi_res[r]);
		for (size_t n = 0; n < TRN_SCATTER_MAX_J * TRN_SCATTER_MAX_L; n++)
			free(s->psi_res[n][r]);
		if (s->wt_m[r])
			gsl_fft_complex_wavetable_free(s->wt_m[r]);
		if (s->wt_n[r])
			gsl_fft_complex_wavetable_free(s->wt_n[r]);
	}
	free(s->phi_full);
	free(s->psi_full);
	free(s);
}

static int scatter_check(uint32_t M, uint32_t N, uint32_t J, uint32_t L, acct_error *err)
{
	if (J < 1 || J > TRN_SCATTER_MAX_J)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "J must be 1 to %u", TRN_SCATTER_MAX_J);
	if (L < 1 || L > TRN_SCATTER_MAX_L)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "L must be 1 to %u", TRN_SCATTER_MAX_L);
	/* Reflect padding by 2^J needs more than 2^J pixels a side. */
	if (M % (1u << J) != 0 || N % (1u << J) != 0 || M < (2u << J) || N < (2u << J) ||
	    M > TRN_SCATTER_MAX_SIDE || N > TRN_SCATTER_MAX_SIDE)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "image sides must be multiples of 2^J from 2^(J+1) to %u",
				      TRN_SCATTER_MAX_SIDE);
	return 0;
}

/* Sizes: kymatio's compute_padding, ((M + 2^J) / 2^J + 1) 2^J, which for M
 * a multiple of 2^J pads 2^J pixels on each side. */
static void scatter_sizes(trn_scatter *s, uint32_t M, uint32_t N, uint32_t J, uint32_t L)
{
	s->M = M;
	s->N = N;
	s->J = J;
	s->L = L;
	s->P = ((M + (1u << J)) / (1u << J) + 1) << J;
	s->Q = ((N + (1u << J)) / (1u << J) + 1) << J;
	s->pad_top = (s->P - M) / 2;
	s->pad_left = (s->Q - N) / 2;
	s->out_m = M >> J;
	s->out_n = N >> J;
	s->channels = 1 + (size_t)J * L + (size_t)L * L * J * (J - 1) / 2;
}

int trn_scatter_new(uint32_t M, uint32_t N, uint32_t J, uint32_t L, trn_scatter **ret,
		    acct_error *err)
{
	trn_scatter *s = NULL;
	trn_scatter_workspace *w = NULL;
	double complex *g = NULL, *e = NULL;
	int rc = scatter_check(M, N, J, L, err);

	if (rc != 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	scatter_sizes(s, M, N, J, L);
	s->phi_full = malloc(s->P * s->Q * sizeof(double));
	s->psi_full = malloc((size_t)J * L * s->P * s->Q * sizeof(double));
	g = malloc(s->P * s->Q * sizeof(*g));
	e = malloc(s->P * s->Q * sizeof(*e));
	if (!s->phi_full || !s->psi_full || !g || !e) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t r = 0; r <= J; r++) {
		s->wt_m[r] = gsl_fft_complex_wavetable_alloc(s->P >> r);
		s->wt_n[r] = gsl_fft_complex_wavetable_alloc(s->Q >> r);
		if (!s->wt_m[r] || !s->wt_n[r]) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto out;
		}
	}
	rc = trn_scatter_workspace_new(s, &w, err);
	if (rc != 0)
		goto out;
	rc = scatter_bank(s, w, g, e);
	if (rc != 0) {
		rc = acct_error_set(err, rc, "", "building the scattering filters failed");
		goto out;
	}
	*ret = s;
	s = NULL;
out:
	trn_scatter_workspace_free(w);
	free(g);
	free(e);
	trn_scatter_free(s);
	return rc;
}

void trn__group_normalise(double *h, size_t channels, size_t plane, size_t groups)
{
	size_t len = channels / groups * plane;

	for (size_t g = 0; g < groups; g++) {
		double *v = h + g * len, mean = 0.0, var = 0.0, inv;

		for (size_t i = 0; i < len; i++)
			mean += v[i];
		mean /= (double)len;
		/* Two passes: the variance of values far from 0 stays exact. */
		for (size_t i = 0; i < len; i++)
			var += (v[i] - mean) * (v[i] - mean);
		var /= (double)len;
		inv = 1.0 / sqrt(var + TRN_GROUPNORM_EPS);
		for (size_t i = 0; i < len; i++)
			v[i] = (v[i] - mean) * inv;
	}
}

int trn__scatter_row(const trn_scatter *s, uint32_t groups, const double *x, double *out,
		     trn_scatter_workspace *w)
{
	size_t plane = trn_scatter_out_rows(s) * trn_scatter_out_cols(s);
	size_t d = trn_scatter_channels(s) * plane;
	int rc = trn_scatter_apply(s, x, out, w);

	if (rc != 0)
		return rc;
	if (groups > 0)
		trn__group_normalise(out, trn_scatter_channels(s), plane, groups);
	/* Finite cells near DBL_MAX overflow the transform or the variance to
	 * inf or NaN.  Such a row maps to the fixed vector 0, so the map stays
	 * a total function of the row: no table check downstream fails the
	 * whole job on one row's features (docs/training.md, "Scattering
	 * features"). */
	for (size_t i = 0; i < d; i++) {
		if (!isfinite(out[i])) {
			memset(out, 0, d * sizeof(*out));
			break;
		}
	}
	return 0;
}

/* One thread's share of a table: rows [lo, hi). */
struct map_part {
	const trn_scatter *s;
	uint32_t groups;
	const trn_dataset *in;
	trn_dataset *out;
	size_t lo, hi;
	int rc;
};

static void *map_part_main(void *arg)
{
	struct map_part *mp = arg;
	trn_scatter_workspace *w = NULL;

	mp->rc = trn_scatter_workspace_new(mp->s, &w, NULL);
	for (size_t i = mp->lo; mp->rc == 0 && i < mp->hi; i++)
		mp->rc = trn__scatter_row(mp->s, mp->groups, mp->in->x + i * mp->in->d,
					  mp->out->x + i * mp->out->d, w);
	trn_scatter_workspace_free(w);
	return NULL;
}

/* In TRN_SCATTER_THREADS parts; a part whose thread cannot start runs in
 * the caller. */
int trn__scatter_map_rows(const trn_scatter *s, uint32_t groups, const trn_dataset *in,
			  trn_dataset *out)
{
	struct map_part parts[TRN_SCATTER_THREADS];
	pthread_t th[TRN_SCATTER_THREADS];
	bool started[TRN_SCATTER_THREADS] = { false };
	int rc = 0;

	for (size_t t = 0; t < TRN_SCATTER_THREADS; t++) {
		parts[t] = (struct map_part){ .s = s, .groups = groups, .in = in, .out = out,
					      .lo = in->n * t / TRN_SCATTER_THREADS,
					      .hi = in->n * (t + 1) / TRN_SCATTER_THREADS };
		if (t > 0)
			started[t] = pthread_create(&th[t], NULL, map_part_main, &parts[t]) == 0;
	}
	for (size_t t = 0; t < TRN_SCATTER_THREADS; t++)
		if (!started[t])
			map_part_main(&parts[t]);
	for (size_t t = 0; t < TRN_SCATTER_THREADS; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		if (parts[t].rc != 0 && rc == 0)
			rc = parts[t].rc;
	}
	return rc;
}

int trn_scatter_table(const trn_scatter *s, const trn_dataset *in, trn_dataset **out,
		      acct_error *err)
{
	trn_dataset *ds = NULL;
	size_t d = s->channels * s->out_m * s->out_n;
	int rc;

	if (in->d != s->M * s->N)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the table has %zu features, the transform takes %zu x %zu",
				      in->d, s->M, s->N);
	if (d > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "%zu scattering features exceed %d", d, DPG_MAX_FEATURES);
	rc = trn_dataset_new(in->n, d, in->num_classes, &ds, err);
	if (rc != 0)
		return rc;
	memcpy(ds->y, in->y, in->n * sizeof(*in->y));
	rc = trn__scatter_map_rows(s, 0, in, ds);
	if (rc != 0) {
		trn_dataset_free(ds);
		return acct_error_set(err, rc, "", "the scattering FFT failed");
	}
	*out = ds;
	return 0;
}
