/*
 * acct_pld.c: privacy loss distributions (Sommer, Meiser, Mohammadi 2019;
 * Koskela et al. 2020; Doroshenko et al. 2022).
 *
 * Each base mechanism is given by its privacy curve delta(eps) (the hockey-
 * stick divergence of its dominating pair, in closed form).  It is
 * discretised on the grid eps_i = i h by "connecting the dots" (Doroshenko,
 * Ghazi, Kamath, Kumar, Manurangsi, PETS 2022, Sec. 3): the discrete PLD
 * whose curve, as a function of e^eps, is the piecewise-linear interpolation
 * of the true curve through (0, 1), the grid points and a flat tail at
 * delta(eps_n).  The true curve is convex in e^eps, so the interpolation
 * lies above it: the discrete PLD dominates the mechanism (pessimistic), and
 * the mass delta(eps_n) beyond the grid goes to +infinity, i.e. into delta.
 * Discrete bases (a few atoms) are gridded from their atoms instead, each
 * atom split over its two neighbouring grid points keeping its mass under
 * P and under Q (base_atoms, atom_split).
 *
 * Add/remove pairs are not symmetric under sampling, so both directions
 * ("remove": P = (1-q) mu0 + q mu1, Q = mu0; "add": P = mu0, Q = that
 * mixture) are composed separately and the larger epsilon is reported.
 * PLDs with few nonzero masses are composed by direct summation where that
 * costs no more than the FFT (pmf_convolve_direct).  Otherwise composition
 * is FFT convolution (GSL mixed radix, 5-smooth sizes); self-composition
 * raises the FFT to the count-th power once, in a window that a Chernoff
 * bound shows holds all but ACCT_PLD_TAIL of the mass.  Tails lighter than
 * ACCT_PLD_TAIL are truncated pessimistically: the lower tail is moved up to
 * the lowest kept loss, the upper tail to +infinity.  The FFTs' rounding is
 * absolute and of either sign, larger than the far tail's masses after many
 * compositions: each FFT path, and the direct one, bounds the 1-norm of its
 * error (pmf.err) and every delta read adds that bound, so every epsilon
 * returned is an upper bound (docs/accountants.md, "pld and rounding").
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fft_halfcomplex.h>
#include <gsl/gsl_fft_real.h>

#include "acct.h"
#include "acct_internal.h"
#include "acct_numeric.h"

/* The unit roundoff of double. */
#define FFT_U (DBL_EPSILON / 2.0)
/* Mass truncated per tail and operation. */
#define ACCT_PLD_TAIL 1e-15
/* Most grid points one PLD may hold (32 MiB of doubles). */
#define ACCT_PLD_MAX_POINTS (1L << 22)
/* Gaussian tails beyond this many standard deviations are not gridded
 * (Phi(-8.5) < 1e-17; the mass is kept pessimistically, see above). */
#define GAUSS_Z 8.5

/* A discrete PLD: mass p[i] at loss (off + i) h, plus `inf` at +infinity.
 * `err` bounds the FFTs' rounding: sum_i |p[i] - p*[i]| + |inf - inf*| <=
 * err, where p* and inf* are the masses exact arithmetic would give. */
struct pmf {
	double h;
	long off;
	size_t n;
	double *p;
	double inf;
	double err;
};

/*
 * The grid work one PLD computation may do: grid points discretised
 * (PLD_POINT_WORK each) plus, per FFT, its length times log2 of it.  A composition of many distinct
 * events, or of events with wide losses, would otherwise run for minutes
 * (each convolution widens the support); past DPG_MAX_PLD_WORK the
 * computation stops with ACCT_EUNSUPPORTED, which the basic ledger's
 * fallback treats as "pld has no answer" and prices with rdp and zcdp.
 */
struct pld_work {
	double done;
};

static int work_add(struct pld_work *w, double units, const char *where, acct_error *err)
{
	w->done += units;
	if (w->done > (double)DPG_MAX_PLD_WORK)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "pricing this event with pld needs more than %.3g grid "
				      "operations (the limit); use rdp or zcdp, or raise "
				      "value_discretization_interval", (double)DPG_MAX_PLD_WORK);
	return 0;
}

/* A discretised point evaluates the curve (exp, expm1, erfc): measured at
 * about 25 FFT work units (n log2 n counts one per unit). */
#define PLD_POINT_WORK 25.0

static double fft_work(size_t nfft)
{
	return (double)nfft * log2((double)nfft + 1.0);
}

static void pmf_free(struct pmf *m)
{
	free(m->p);
	m->p = NULL;
	m->n = 0;
}

static int pmf_copy(struct pmf *dst, const struct pmf *src, acct_error *err)
{
	*dst = *src;
	dst->p = malloc(src->n * sizeof(double));
	if (!dst->p)
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	memcpy(dst->p, src->p, src->n * sizeof(double));
	return 0;
}

/* ---- base mechanisms ---------------------------------------------------- */

enum base_kind { B_GAUSS, B_LAPLACE, B_DLAPLACE, B_DISCRETE };

#define MAX_ATOMS 4

struct base {
	enum base_kind kind;
	double s;        /* gauss: sigma; laplace: b; dlaplace: a */
	double d;        /* dlaplace: sensitivity */
	double q;        /* sampling probability (1 = none) */
	bool add;        /* direction */
	/* discrete: losses and their P-masses, plus mass at +infinity */
	int natoms;
	double loss[MAX_ATOMS], w[MAX_ATOMS], winf;
};

static double phi_upper(double x) /* P(N(0,1) > x) */
{
	return 0.5 * erfc(x / M_SQRT2);
}

/* Gaussian pair N(0, s^2) vs N(1, s^2) (unit sensitivity): with
 * t = s^2 l + 1/2, {log lambda > l} = {x > t}. */
static void lr_set_gauss(const struct base *b, double l, bool above, double *m0, double *m1)
{
	double s = b->s, t = s * s * l + 0.5;

	if (above) {
		*m0 = phi_upper(t / s);
		*m1 = phi_upper((t - 1.0) / s);
	} else {
		*m0 = phi_upper(-t / s);
		*m1 = phi_upper(-(t - 1.0) / s);
	}
}

/* Laplace pair of scale b centred at 0 and 1: the loss is clamped to
 * [-1/b, 1/b], and between those {log lambda > l} = {x > t},
 * t = (1 + b l) / 2. */
static void lr_set_laplace(const struct base *b, double l, bool above, double *m0, double *m1)
{
	double bb = b->s, e0 = 1.0 / bb, t;

	if (above) {
		if (l >= e0) {
			*m0 = *m1 = 0.0;
			return;
		}
		if (l < -e0) {
			*m0 = *m1 = 1.0;
			return;
		}
		t = (1.0 + bb * l) / 2.0;
		*m0 = 0.5 * exp(-t / bb);
		*m1 = 1.0 - 0.5 * exp(-(1.0 - t) / bb);
	} else {
		if (l <= -e0) {
			*m0 = *m1 = 0.0;
			return;
		}
		if (l > e0) {
			*m0 = *m1 = 1.0;
			return;
		}
		t = (1.0 + bb * l) / 2.0;
		*m0 = 1.0 - 0.5 * exp(-t / bb);
		*m1 = 0.5 * exp(-(1.0 - t) / bb);
	}
}

/* P(X >= j) for the discrete Laplace with r = e^{-a}, given lr = log r and
 * l1r = log(1 + r). */
static inline double dlaplace_surv(double j, double lr, double l1r)
{
	return j >= 1 ? exp(j * lr - l1r) : -expm1((1.0 - j) * lr - l1r);
}

/* Discrete Laplace pair (parameter a, sensitivity d) centred at 0 and d:
 * the loss is clamped to [-a d, a d], and between those the set is a tail
 * {x >= m} of integers. */
static void lr_set_dlaplace(const struct base *b, double l, bool above, double *m0, double *m1)
{
	double a = b->s, d = b->d, lr = -a, l1r = log1p(exp(-a)), m, sx0, sx1;

	if (above) {
		if (l >= a * d) {
			*m0 = *m1 = 0.0;
			return;
		}
		if (l < -a * d) {
			*m0 = *m1 = 1.0;
			return;
		}
		m = floor((l / a + d) / 2.0) + 1.0;
		*m0 = dlaplace_surv(m, lr, l1r);
		*m1 = dlaplace_surv(m - d, lr, l1r);
	} else {
		if (l <= -a * d) {
			*m0 = *m1 = 0.0;
			return;
		}
		if (l > a * d) {
			*m0 = *m1 = 1.0;
			return;
		}
		m = ceil((l / a + d) / 2.0);
		sx0 = dlaplace_surv(m, lr, l1r);
		sx1 = dlaplace_surv(m - d, lr, l1r);
		*m0 = 1.0 - sx0;
		*m1 = 1.0 - sx1;
	}
}

/* mu0 and mu1 masses of {log lambda > l} (above) or {log lambda < l}. */
static void lr_set(const struct base *b, double l, bool above, double *m0, double *m1)
{
	switch (b->kind) {
	case B_GAUSS:
		lr_set_gauss(b, l, above, m0, m1);
		return;
	case B_LAPLACE:
		lr_set_laplace(b, l, above, m0, m1);
		return;
	case B_DLAPLACE:
		lr_set_dlaplace(b, l, above, m0, m1);
		return;
	default:
		*m0 = *m1 = 0.0;
		return;
	}
}

/* The privacy curve delta(eps) of the base pair, for any real eps. */
static double base_delta(const struct base *b, double eps)
{
	double q = b->q, m0, m1, v;

	if (b->kind == B_DISCRETE) {
		v = b->winf;
		for (int j = 0; j < b->natoms; j++)
			if (b->loss[j] > eps)
				v += b->w[j] * -expm1(eps - b->loss[j]);
		return v;
	}
	if (!b->add) {
		/* (1-q-e^eps) mu0(S) + q mu1(S), S = {lambda > (e^eps - 1 + q)/q} */
		double c = expm1(eps) + q;

		if (c <= 0.0)
			return -expm1(eps);
		lr_set(b, log(c) - log(q), true, &m0, &m1);
		v = q * (m1 - m0) - expm1(eps) * m0;
	} else {
		/* mu0(S) - e^eps ((1-q) mu0(S) + q mu1(S)), S = {lambda < (e^-eps - 1 + q)/q} */
		double c = expm1(-eps) + q;

		if (c <= 0.0)
			return 0.0;
		lr_set(b, log(c) - log(q), false, &m0, &m1);
		v = m0 - exp(eps) * ((1.0 - q) * m0 + q * m1);
	}
	return fmax(v, 0.0);
}

/* log lambda range of the base (lambda = mu1/mu0), gridded part. */
static void base_lr_range(const struct base *b, double *lo, double *hi)
{
	switch (b->kind) {
	case B_GAUSS: {
		double s = b->s;

		*lo = (2.0 * (-GAUSS_Z * s) - 1.0) / (2.0 * s * s);
		*hi = (2.0 * (1.0 + GAUSS_Z * s) - 1.0) / (2.0 * s * s);
		return;
	}
	case B_LAPLACE:
		*lo = -1.0 / b->s;
		*hi = 1.0 / b->s;
		return;
	case B_DLAPLACE:
		*lo = -b->s * b->d;
		*hi = b->s * b->d;
		return;
	default:
		*lo = *hi = 0.0;
		return;
	}
}

/* log(1 - q + q lambda) at l = log lambda: the loss of the q-subsampled
 * pair where the base pair's is l, increasing in l. */
static inline double mix_loss(double q, double l)
{
	if (q == 1.0)
		return l;
	return l <= 0.0 ? log1p(q * expm1(l)) : acct__log_add(log1p(-q), log(q) + l);
}

/* The loss range of the (possibly subsampled) base pair. */
static void base_loss_range(const struct base *b, double *lo, double *hi)
{
	double l0, l1, q = b->q;

	if (b->kind == B_DISCRETE) {
		*lo = INFINITY;
		*hi = -INFINITY;
		for (int j = 0; j < b->natoms; j++) {
			*lo = fmin(*lo, b->loss[j]);
			*hi = fmax(*hi, b->loss[j]);
		}
		if (b->natoms == 0)
			*lo = *hi = 0.0;
		return;
	}
	base_lr_range(b, &l0, &l1);
	if (!b->add) {
		*lo = mix_loss(q, l0);
		*hi = mix_loss(q, l1);
	} else {
		*lo = -mix_loss(q, l1);
		*hi = -mix_loss(q, l0);
	}
}

/*
 * A discrete base's PLD straight from its atoms, connect-the-dots
 * (Doroshenko et al., "Connect the Dots", PETS 2022, Sec. 3).  An atom of
 * mass w at a loss l between grid points g_i <= l < g_(i+1) (g_i = i h as
 * every read computes it) goes w r to g_(i+1) and w (1 - r) to g_i, with
 * r = (e^-g_i - e^-l) / (e^-g_i - e^-g_(i+1)) in [0, 1): the pair of
 * points keeps the atom's mass under P (w) and under Q (w e^-l), so the
 * atom is their merge, a post-processing, and delta(eps) = inf +
 * sum p (1 - e^(eps - l))_+ can only grow (the positive part is
 * subadditive); composition keeps that order.  Rounding each loss up
 * instead costs up to h of epsilon per composed event, k h after k.
 * In floating point r is rounded up (more mass at the higher loss only
 * raises delta) and the products' and sums' rounding is in err.
 * Differencing the closed-form curve would leave rounding junk at every
 * grid point between the atoms.
 */
static void atom_split(double l, double h, long *ret_i, double *ret_r)
{
	long i = (long)floor(l / h);
	double gi, t, d;

	/* l / h is itself rounded: settle i on the grid as reads compute it. */
	while ((double)i * h > l)
		i--;
	while ((double)(i + 1) * h <= l)
		i++;
	gi = (double)i * h;
	/* t and d carry one rounding each (relative u), expm1 and the
	 * quotient a few ulps more: r is within 8 u of its exact value. */
	t = l - gi;
	d = (double)(i + 1) * h - gi;
	*ret_i = i;
	*ret_r = t == 0.0 ? 0.0 : fmin(1.0, expm1(-t) / expm1(-d) + 16.0 * FFT_U);
}

static void base_atoms(const struct base *b, struct pmf *ret)
{
	double e = 0.0;

	ret->inf = b->winf;
	if (b->natoms == 0) {
		ret->p[0] = 1.0 - b->winf;
		return;
	}
	for (int j = 0; j < b->natoms; j++) {
		double r, up, down;
		long i;

		atom_split(b->loss[j], ret->h, &i, &r);
		up = b->w[j] * r;
		down = b->w[j] - up;
		/* Past the grid (base_pmf leaves a point to spare): +infinity,
		 * higher still. */
		if (i + 1 - ret->off < (long)ret->n)
			ret->p[i + 1 - ret->off] += up;
		else
			ret->inf += up;
		ret->p[i - ret->off] += down;
		/* The product and the difference (3 u w), and each sum's
		 * rounding, at most u of the total it reaches. */
		e += 3.0 * b->w[j] + ret->p[i - ret->off] +
		     (i + 1 - ret->off < (long)ret->n ? ret->p[i + 1 - ret->off] : ret->inf);
	}
	ret->err = 1.01 * FFT_U * e;
}

/* Connect-the-dots discretisation of one base pair on the grid of step h
 * (discrete bases: their atoms, base_atoms). */
static int base_pmf(const struct base *b, double h, struct pmf *ret, const char *where,
		    struct pld_work *w, acct_error *err)
{
	double lo, hi, eh = expm1(h), *dl = NULL;
	long ilo, ihi;
	size_t n;

	base_loss_range(b, &lo, &hi);
	if (!(fabs(lo) < 700.0 && fabs(hi) < 700.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "the privacy loss of this event exceeds 700 nats; pld cannot "
				      "grid it (use rdp)");
	/* A discrete base's atoms may settle one point either side of
	 * lo / h and hi / h (atom_split). */
	ilo = (long)floor(lo / h) - (b->kind == B_DISCRETE);
	ihi = (long)ceil(hi / h) + (b->kind == B_DISCRETE);
	if (ihi - ilo + 1 > ACCT_PLD_MAX_POINTS)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "the PLD of this event needs %ld grid points, more than %ld; "
				      "raise value_discretization_interval",
				      ihi - ilo + 1, ACCT_PLD_MAX_POINTS);
	if (ihi < ilo)
		return acct_error_set(err, ACCT_EINTERNAL, where, "empty PLD grid");
	n = (size_t)(ihi - ilo + 1);
	if (work_add(w, PLD_POINT_WORK * (double)n, where, err) < 0)
		return ACCT_EUNSUPPORTED;
	dl = calloc(n, sizeof(double));
	ret->p = calloc(n, sizeof(double));
	if (!dl || !ret->p) {
		free(dl);
		free(ret->p);
		ret->p = NULL;
		return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");
	}
	ret->h = h;
	ret->off = ilo;
	ret->n = n;
	ret->err = 0.0;
	if (b->kind == B_DISCRETE) {
		free(dl);
		base_atoms(b, ret);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		dl[i] = base_delta(b, (double)(ilo + (long)i) * h);
	ret->inf = dl[n - 1];
	if (n == 1) {
		ret->p[0] = 1.0 - dl[0];
	} else {
		/* p_i = y_i (s_i - s_{i-1}) with s the chord slopes in y = e^eps:
		 * p_i = [(d_{i+1} - d_i) - e^h (d_i - d_{i-1})] / expm1(h),
		 * with s_{-1} = (d_0 - 1)/y_0 and s_{n-1} = 0. */
		for (size_t i = 0; i < n; i++) {
			double right = i + 1 < n ? (dl[i + 1] - dl[i]) / eh : 0.0;
			double left = i > 0 ? exp(h) * (dl[i] - dl[i - 1]) / eh : (dl[0] - 1.0);
			double v = right - left;

			ret->p[i] = v > 0.0 ? v : 0.0;
		}
	}
	free(dl);
	return 0;
}

/* ---- operations ------------------------------------------------------------ */

/* Pessimistic tail truncation: lower tail below `tail` moves up to the lowest
 * kept point, upper tail below `tail` goes to +infinity. */
static void pmf_trim(struct pmf *m, double tail)
{
	size_t a = 0, b = m->n;
	double lo = 0.0, up = 0.0;

	while (a + 1 < b && lo + m->p[a] < tail)
		lo += m->p[a++];
	while (b - 1 > a && up + m->p[b - 1] < tail)
		up += m->p[--b];
	if (a == 0 && b == m->n)
		return;
	memmove(m->p, m->p + a, (b - a) * sizeof(double));
	m->p[0] += lo;
	m->inf += up;
	m->off += (long)a;
	m->n = b - a;
}

/* The smallest 5-smooth number >= n: GSL's mixed-radix FFT is fast there. */
static size_t fft_size(size_t n)
{
	size_t best = 1;

	while (best < n)
		best <<= 1;
	for (size_t p5 = 1; p5 < best; p5 *= 5)
		for (size_t p35 = p5; p35 < best; p35 *= 3) {
			size_t v = p35;

			while (v < n)
				v <<= 1;
			if (v < best)
				best = v;
		}
	return best;
}

/* In-place real FFT (forward: halfcomplex out; inverse: halfcomplex in),
 * GSL mixed radix; the wavetable and workspace live for this call only. */
static int fft_real(double *x, size_t n, bool inverse)
{
	gsl_fft_real_workspace *ws = gsl_fft_real_workspace_alloc(n);
	gsl_fft_real_wavetable *rw = NULL;
	gsl_fft_halfcomplex_wavetable *hw = NULL;
	int status = GSL_ENOMEM;

	if (!ws)
		goto out;
	if (!inverse) {
		rw = gsl_fft_real_wavetable_alloc(n);
		if (rw)
			status = gsl_fft_real_transform(x, 1, n, rw, ws);
	} else {
		hw = gsl_fft_halfcomplex_wavetable_alloc(n);
		if (hw)
			status = gsl_fft_halfcomplex_inverse(x, 1, n, hw, ws);
	}
out:
	if (rw)
		gsl_fft_real_wavetable_free(rw);
	if (hw)
		gsl_fft_halfcomplex_wavetable_free(hw);
	if (ws)
		gsl_fft_real_workspace_free(ws);
	return status;
}

/* ---- rounding error of the FFT paths ------------------------------------------- */

/*
 * An FFT's rounding errors are absolute, of the order of the largest
 * coefficient, and of either sign: in the far tail, where a small delta is
 * read, they exceed the masses themselves.  Each FFT path bounds the 1-norm
 * of its error and adds it to pmf.err, which every delta read adds
 * (docs/accountants.md, "pld and rounding", has the whole argument).  For
 * a transform F of length n, Higham (Accuracy and Stability of Numerical
 * Algorithms, 2nd ed., Thm 24.2 and its proof) gives ||fl(F y) - F y||_2
 * <= eta(n) ||F y||_2 = eta(n) sqrt(n) ||y||_2 with eta(n) =
 * prod_i (1 + eta_i) - 1 over the stages S_i, where ||fl(S_i v) - S_i v||_2
 * <= eta_i ||S_i||_2 ||v||_2.
 */
/* |computed - exact| of a GSL twiddle cos/sin(theta), theta = (2 pi / n) m:
 * theta carries relative error gamma_3, at most 6 pi u absolute, and cos and
 * sin one ulp each: sqrt(2) (6 pi + 1) u < 29 u.  The butterflies' constants
 * (sin(2 pi / 5) ...) are computed the same way. */
#define FFT_MU (32.0 * FFT_U)

static double fft_gamma(double m)
{
	return m * FFT_U / (1.0 - m * FFT_U);
}

/*
 * eta(n) for GSL's mixed-radix real FFT: one stage per factor (5, 4, 3 or
 * 2), so at most log2 n stages.  A radix-r stage forms each output from r
 * inputs, each times a twiddle and a butterfly constant (two complex
 * products, sqrt(2) gamma_2 each, Higham Lemma 3.5, and two constants within
 * FFT_MU), summed (gamma_{r-1}): componentwise |error| <= (gamma_{r+5} +
 * 2 mu) |S_i| |v|, and || |S_i| ||_2 = r = sqrt(r) ||S_i||_2, so eta_i <=
 * sqrt(5) (gamma_10 + 2 mu).  The inverse transform is the same stages.
 */
static double fft_rel_err(size_t n)
{
	double stages = ceil(log2((double)n + 1.0));
	double eta = sqrt(5.0) * (fft_gamma(10.0) + 2.0 * FFT_MU);

	return 1.01 * expm1(stages * log1p(eta));
}

/*
 * The componentwise forward error of GSL's FFT of a real vector x of length
 * n: every output is within eta_c(n) ||x||_1 of the exact one.  Each stage
 * satisfies |fl(S_i v) - S_i v| <= c |S_i| |v| with c = gamma_10 + 2 mu (as
 * for fft_rel_err), so the computed transform is within (prod (1 + c) - 1)
 * |S_m| ... |S_1| |x| of F x (Higham, Lemma 3.8's argument), and in the
 * Cooley-Tukey graph every output meets every input along exactly one path
 * of unit-modulus weights: |S_m| ... |S_1| is the all-ones matrix.
 */
static double fft_comp_err(size_t n)
{
	double stages = ceil(log2((double)n + 1.0));

	return 1.01 * expm1(stages * log1p(fft_gamma(10.0) + 2.0 * FFT_MU));
}

/* 2-norm and 1-norm of a real vector, rounded up (long double sums). */
static double vec_l2(const double *x, size_t n)
{
	long double s = 0.0L;

	for (size_t i = 0; i < n; i++)
		s += (long double)x[i] * x[i];
	return (double)sqrtl(s) * (1.0 + 1e-9);
}

static double vec_l1(const double *x, size_t n)
{
	long double s = 0.0L;

	for (size_t i = 0; i < n; i++)
		s += fabsl((long double)x[i]);
	return (double)s * (1.0 + 1e-9);
}

/* 2-norm of the full (conjugate-symmetric) spectrum a GSL halfcomplex array
 * of length n stands for: each (re, im) pair counts twice. */
static double spectrum_l2(const double *x, size_t n)
{
	long double s = (long double)x[0] * x[0];

	for (size_t k = 1; 2 * k < n; k++)
		s += 2.0L * ((long double)x[2 * k - 1] * x[2 * k - 1] +
			     (long double)x[2 * k] * x[2 * k]);
	if (n % 2 == 0)
		s += (long double)x[n - 1] * x[n - 1];
	return (double)sqrtl(s) * (1.0 + 1e-9);
}

/*
 * The 1-norm bound, over `kept` points of the result, of the error of
 * x = fl(F^-1 w~ / n) against F^-1 w / n, given ||w~ - w||_2 <= dw and
 * ||w~||_2 = wn: F^-1 adds eta(n) sqrt(n) wn, GSL's scaling by fl(1/n)
 * 2.01 u of each value; the result's 2-norm bound times sqrt(kept)
 * (Cauchy-Schwarz) bounds the 1-norm.
 */
static double inverse_err_l1(double dw, double wn, size_t nfft, size_t kept)
{
	double eta = fft_rel_err(nfft);
	double e2 = (dw + (eta + 2.01 * FFT_U * (1.0 + eta)) * wn) / sqrt((double)nfft);

	return 1.01 * e2 * sqrt((double)kept);
}

/*
 * The bound for a * b by FFT, X = F a and Y = F b, with X~ Y~ - X Y =
 * (X~ - X) Y + X~ (Y~ - Y).  Each term is bounded in two ways, the smaller
 * kept: normwise, ||X~ - X||_2 <= eta sqrt(n) ||a||_2 times |Y_j| <= ||b||_1
 * (good for a smooth a), or componentwise, |X~_j - X_j| <= eta_c ||a||_1
 * times ||Y||_2 = sqrt(n) ||b||_2 (good for a spiky a, whose ||a||_2 is
 * large); likewise the second.  Plus the products' own rounding,
 * sqrt(2) gamma_2 ||X~ Y~||_2.  Then the inputs' own errors:
 * ||a~ * b~ - a * b||_1 <= err_a ||b~||_1 + ||a||_1 err_b, ||a||_1 <= 1.
 */
static double convolve_err(const struct pmf *a, const struct pmf *b, double wn, size_t nfft,
			   size_t len)
{
	double eta = fft_rel_err(nfft), ec = fft_comp_err(nfft), rn = sqrt((double)nfft);
	double a1 = vec_l1(a->p, a->n), b1 = vec_l1(b->p, b->n);
	double a2 = vec_l2(a->p, a->n), b2 = vec_l2(b->p, b->n);
	double ta = fmin(eta * rn * a2 * b1, ec * a1 * rn * b2);
	double tb = fmin(eta * rn * b2 * a1 * (1.0 + ec), ec * b1 * rn * (a2 + ec * a1));
	double dw = ta + tb + 1.01 * M_SQRT2 * fft_gamma(2.0) * wn;

	return inverse_err_l1(dw, wn, nfft, len) + a->err * (b1 + b->inf) + b->err +
	       4.0 * FFT_U;
}

/* ---- sparse PLDs: direct convolution ---------------------------------------------- */

/*
 * A PLD with few nonzero masses (a discrete base's atoms and their
 * compositions) is convolved directly, without the FFT's absolute rounding:
 * every output is a sum of at most m = min(nnz a, nnz b) products of
 * nonnegative masses, so it is within gamma_m of its exact value
 * relatively (Higham, Accuracy and Stability, 2nd ed., Sec. 3.1), and the
 * 1-norm of the error within gamma_m ||a||_1 ||b||_1.  It is used where it
 * costs no more work than the FFT it replaces (direct_cost, on the work
 * meter).
 */
static size_t pmf_nnz(const struct pmf *m)
{
	size_t c = 0;

	for (size_t i = 0; i < m->n; i++)
		c += m->p[i] > 0.0;
	return c;
}

/* Work of a direct convolution: the scans of both inputs and the output,
 * plus one unit per product. */
static double direct_cost(const struct pmf *a, const struct pmf *b, size_t na, size_t nb)
{
	return (double)(2 * (a->n + b->n)) + (double)na * (double)nb;
}

/* a * b into a by direct summation (a and b may be the same PLD); na and nb
 * are their nonzero counts.  The error bound as pmf.err defines it: the
 * products' rounding, then the inputs' own errors as in convolve_err. */
static int pmf_convolve_direct(struct pmf *a, const struct pmf *b, size_t na, size_t nb,
			       acct_error *err)
{
	size_t len = a->n + b->n - 1, m = na < nb ? na : nb, t = 0;
	size_t *jb = malloc((nb ? nb : 1) * sizeof(size_t));
	double *c = calloc(len, sizeof(double));
	double a1 = vec_l1(a->p, a->n), b1 = vec_l1(b->p, b->n), e;

	if (!jb || !c) {
		free(jb);
		free(c);
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	}
	for (size_t j = 0; j < b->n; j++)
		if (b->p[j] > 0.0)
			jb[t++] = j;
	for (size_t i = 0; i < a->n; i++)
		if (a->p[i] > 0.0)
			for (size_t u = 0; u < t; u++)
				c[i + jb[u]] += a->p[i] * b->p[jb[u]];
	free(jb);
	e = 1.01 * fft_gamma((double)(m + 1)) * a1 * b1 + a->err * (b1 + b->inf) + b->err +
	    4.0 * FFT_U;
	a->inf = a->inf + b->inf - a->inf * b->inf;
	a->off += b->off;
	a->err = e;
	free(a->p);
	a->p = c;
	a->n = len;
	pmf_trim(a, ACCT_PLD_TAIL);
	return 0;
}

/*
 * One step of self_compose_direct: a * b into a if it fits the points' limit
 * and, with what the powering has spent, the budget; 1 (nothing done) if not.
 */
static int direct_step(struct pmf *a, const struct pmf *b, double *spent, double budget,
		       struct pld_work *w, acct_error *err)
{
	size_t na = pmf_nnz(a), nb = pmf_nnz(b);
	double cost = direct_cost(a, b, na, nb);

	if (a->n + b->n - 1 > (size_t)ACCT_PLD_MAX_POINTS || *spent + cost > budget)
		return 1;
	*spent += cost;
	if (work_add(w, cost, "/event", err) < 0)
		return ACCT_EUNSUPPORTED;
	return pmf_convolve_direct(a, b, na, nb, err);
}

/*
 * The k-fold self-convolution by direct convolutions (binary powering), as
 * long as their work stays within `budget` (what the FFT path would cost);
 * 1, m untouched, once it would not: the caller then takes the FFT path, the
 * work spent here having been metered.
 */
static int self_compose_direct(struct pmf *m, int64_t k, double budget, struct pld_work *w,
			       acct_error *err)
{
	struct pmf r, sq;
	double spent = 0.0;
	bool have = false;
	int rc;

	memset(&r, 0, sizeof(r));
	rc = pmf_copy(&sq, m, err);
	for (int64_t e = k; rc == 0 && e > 0; e >>= 1) {
		if (e & 1) {
			if (have)
				rc = direct_step(&r, &sq, &spent, budget, w, err);
			else
				rc = pmf_copy(&r, &sq, err);
			have = true;
		}
		if (rc == 0 && e > 1)
			rc = direct_step(&sq, &sq, &spent, budget, w, err);
	}
	pmf_free(&sq);
	if (rc != 0) {
		pmf_free(&r);
		return rc;
	}
	pmf_free(m);
	*m = r;
	return 0;
}

/* ---- the FFT paths ---------------------------------------------------------------- */

/* Convolution a * b into a: directly if sparse enough to cost no more than
 * the FFT (pmf_convolve_direct), else by FFT (GSL mixed radix). */
static int pmf_convolve(struct pmf *a, const struct pmf *b, struct pld_work *w, acct_error *err)
{
	size_t len = a->n + b->n - 1, nfft = fft_size(len), na, nb;
	double *x = NULL, *y = NULL, err_bound;
	int rc = 0;

	if (len > (size_t)ACCT_PLD_MAX_POINTS)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				      "the composed PLD needs more than %ld grid points; raise "
				      "value_discretization_interval", ACCT_PLD_MAX_POINTS);
	na = pmf_nnz(a);
	nb = pmf_nnz(b);
	if (direct_cost(a, b, na, nb) <= 3.0 * fft_work(nfft)) {
		if (work_add(w, direct_cost(a, b, na, nb), "/event", err) < 0)
			return ACCT_EUNSUPPORTED;
		return pmf_convolve_direct(a, b, na, nb, err);
	}
	if (work_add(w, 3.0 * fft_work(nfft), "/event", err) < 0)
		return ACCT_EUNSUPPORTED;
	x = calloc(nfft, sizeof(double));
	y = calloc(nfft, sizeof(double));
	if (!x || !y) {
		rc = acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
		goto out;
	}
	memcpy(x, a->p, a->n * sizeof(double));
	memcpy(y, b->p, b->n * sizeof(double));
	if (fft_real(x, nfft, false) != GSL_SUCCESS || fft_real(y, nfft, false) != GSL_SUCCESS) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "/event", "FFT failed");
		goto out;
	}
	/* GSL halfcomplex: x[0] real, then (re, im) pairs, and for even n the
	 * real Nyquist term last. */
	x[0] *= y[0];
	for (size_t k = 1; 2 * k < nfft; k++) {
		double ar = x[2 * k - 1], ai = x[2 * k], br = y[2 * k - 1], bi = y[2 * k];

		x[2 * k - 1] = ar * br - ai * bi;
		x[2 * k] = ar * bi + ai * br;
	}
	if (nfft % 2 == 0)
		x[nfft - 1] *= y[nfft - 1];
	err_bound = convolve_err(a, b, spectrum_l2(x, nfft), nfft, len);
	if (fft_real(x, nfft, true) != GSL_SUCCESS) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "/event", "inverse FFT failed");
		goto out;
	}
	/* Keep only the len values the result has (x holds nfft); without
	 * memory for the smaller copy, x itself serves. */
	{
		double *kept = len < nfft ? malloc(len * sizeof(double)) : NULL;

		if (kept) {
			memcpy(kept, x, len * sizeof(double));
			free(x);
			x = kept;
		}
	}
	free(a->p);
	a->p = x;
	x = NULL;
	for (size_t i = 0; i < len; i++)
		if (!(a->p[i] > 0.0))
			a->p[i] = 0.0;
	a->n = len;
	a->off += b->off;
	a->inf = a->inf + b->inf - a->inf * b->inf;
	a->err = err_bound;
	pmf_trim(a, ACCT_PLD_TAIL);
out:
	free(x);
	free(y);
	return rc;
}

/* log sum_i p_i e^{t L_i}, with lp[i] = log p_i precomputed. */
static double log_mgf(const struct pmf *m, const double *lp, double t)
{
	double mx = -INFINITY, s = 0.0, th = t * m->h;

	for (size_t i = 0; i < m->n; i++)
		mx = fmax(mx, lp[i] + th * (double)(m->off + (long)i));
	if (mx == -INFINITY)
		return -INFINITY;
	for (size_t i = 0; i < m->n; i++)
		if (lp[i] > -INFINITY)
			s += exp(lp[i] + th * (double)(m->off + (long)i) - mx);
	return mx + log(s);
}

/*
 * The grid window [*ret_wlo, *ret_whi] outside which the k-fold sum of `m`
 * has at most ACCT_PLD_TAIL mass per side: for each tilt t on a geometric
 * scan, Chernoff's bound P(S >= u) <= M(t)^k e^{-t u} gives an upper end,
 * and the same at -t a lower end; the tightest of each is kept.
 */
static int self_compose_window(const struct pmf *m, int64_t k, long *ret_wlo, long *ret_whi,
			       acct_error *err)
{
	double kk = (double)k, lt = log(1.0 / ACCT_PLD_TAIL), h = m->h;
	double ulo = kk * (double)m->off * h, uhi = kk * (double)(m->off + (long)m->n - 1) * h;
	double best_hi = uhi, best_lo = ulo, *x;
	long wlo, whi;

	x = malloc(m->n * sizeof(double));
	if (!x)
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	for (size_t i = 0; i < m->n; i++)
		x[i] = m->p[i] > 0.0 ? log(m->p[i]) : -INFINITY;
	/* t = 2^j / 100 for j = -10..40: from very flat to very steep tilts. */
	for (int j = -10; j <= 40; j += 2) {
		double t = ldexp(1.0, j) * 0.01;
		double up = (kk * log_mgf(m, x, t) + lt) / t;
		double dn = -(kk * log_mgf(m, x, -t) + lt) / t;

		if (isfinite(up))
			best_hi = fmin(best_hi, up);
		if (isfinite(dn))
			best_lo = fmax(best_lo, dn);
	}
	free(x);
	wlo = (long)floor(best_lo / h) - 1;
	whi = (long)ceil(best_hi / h) + 1;
	if (whi < wlo)
		whi = wlo;
	*ret_wlo = wlo;
	*ret_whi = whi;
	return 0;
}

/* |z~^k - z^k| <= k (|z~| + dc)^(k-1) dc where |z~ - z| <= dc. */
static double power_err(double kk, double absz, double dc)
{
	return 1.01 * kk * exp((kk - 1.0) * log(absz + dc)) * dc;
}

/*
 * Raises each coefficient of a real FFT (GSL's halfcomplex order) to the
 * k-th power, in polar form: z^k = |z|^k e^{i k arg z}.  Returns a bound on
 * the 2-norm (over the full spectrum) of the exact powers' error when each
 * coefficient given is within dc of the exact one (power_err), and in
 * *ret_own one on the step's own rounding.  Per coefficient: lr = k log|z| is
 * off by at most 0.51 k gamma_2 + 2.1 u |lr| (r2's gamma_2 through log,
 * log's and the product's ulp), which moves |z|^k by expm1(that)
 * relatively; the phase k atan2 by at most 7.3 k u (atan2 within an ulp of
 * a value below pi, 4 u, times k, plus the product's ulp), and cos, sin and
 * the products add 7 u.  pow() is within an ulp.
 */
static double spectrum_power(double *x, size_t nfft, int64_t k, double dc, double *ret_own)
{
	double kk = (double)k, e0 = 2.0 * FFT_U, b, ls, os;

	b = power_err(kk, fabs(x[0]), dc);
	x[0] = pow(x[0], kk);
	ls = b * b;
	os = (e0 * x[0]) * (e0 * x[0]);
	if (nfft % 2 == 0) {
		b = power_err(kk, fabs(x[nfft - 1]), dc);
		x[nfft - 1] = x[nfft - 1] < 0.0 && (k & 1) ? -pow(-x[nfft - 1], kk) :
							     pow(fabs(x[nfft - 1]), kk);
		ls += b * b;
		os += (e0 * x[nfft - 1]) * (e0 * x[nfft - 1]);
	}
	for (size_t i = 1; 2 * i < nfft; i++) {
		double re = x[2 * i - 1], im = x[2 * i], r2 = re * re + im * im;
		double lr = 0.5 * kk * log(r2);

		b = power_err(kk, sqrt(r2) * (1.0 + e0), dc);
		ls += 2.0 * b * b;
		/* |z|^k below the smallest double: skip the phase altogether. */
		if (!(lr > -745.0)) {
			x[2 * i - 1] = x[2 * i] = 0.0;
			os += 2.0 * 1e-300 * 1e-300;
			continue;
		}
		{
			double th = fmod(kk * atan2(im, re), 2.0 * M_PI);
			double mag = exp(lr);

			x[2 * i - 1] = mag * cos(th);
			x[2 * i] = mag * sin(th);
			b = expm1(0.51 * kk * fft_gamma(2.0) + 2.1 * FFT_U * fabs(lr));
			b = 1.01 * mag * (b + 7.3 * kk * FFT_U + 7.0 * FFT_U);
			os += 2.0 * b * b;
		}
	}
	*ret_own = sqrt(os) * (1.0 + 1e-9);
	return sqrt(ls) * (1.0 + 1e-9);
}

/*
 * The bound for the k-fold self-convolution of m (its masses not yet
 * replaced).  The powers' error from the forward transform's is the smaller
 * of `lip`, spectrum_power's componentwise bound, and the normwise one:
 * ||Z~ - Z||_2 <= D = eta sqrt(n) ||p~||_2, every |Z_j| <= ||p~||_1 and
 * |Z~_j| <= that + D =: R, so the powers are within k R^(k-1) D; `own` is
 * the power step's rounding and `wn` the powered spectrum's 2-norm.  Then
 * the input's own error, ||p~^{*k} - p^{*k}||_1 <= (1 + err)^k - 1
 * (||p||_1 <= 1), and the mass at infinity's rounding.
 */
static double self_compose_err(const struct pmf *m, int64_t k, double lip, double own,
			       double wn, size_t nfft, size_t width)
{
	double kk = (double)k;
	double d = fft_rel_err(nfft) * sqrt((double)nfft) * vec_l2(m->p, m->n);
	double r = vec_l1(m->p, m->n) + d;
	double lip_n = 1.01 * kk * exp((kk - 1.0) * log(r)) * d;

	return inverse_err_l1(fmin(lip, lip_n) + own, wn, nfft, width) +
	       1.01 * expm1(kk * log1p(m->err)) + 4.0 * FFT_U;
}

/* Replaces m's masses by the window [wlo, wlo + width) of the circular
 * k-fold convolution x (nfft long), with the k-fold mass at infinity. */
static int self_compose_unwrap(struct pmf *m, const double *x, size_t nfft, int64_t k, long wlo,
			       size_t width, acct_error *err)
{
	long whi = wlo + (long)width - 1;

	free(m->p);
	m->p = calloc(width, sizeof(double));
	if (!m->p)
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	/* True index t sits at circular position (t - k off) mod nfft. */
	for (long t = wlo; t <= whi; t++) {
		long pos = (long)((t - (long)k * m->off) % (long)nfft);
		double v;

		if (pos < 0)
			pos += (long)nfft;
		v = x[pos];
		m->p[t - wlo] = v > 0.0 ? v : 0.0;
	}
	m->off = wlo;
	m->n = width;
	/* 1 - (1 - inf)^k, plus the mass the window may have folded back. */
	m->inf = -expm1((double)k * log1p(-m->inf)) + 2.0 * ACCT_PLD_TAIL;
	pmf_trim(m, ACCT_PLD_TAIL);
	return 0;
}

/* The k-fold self-convolution, by one FFT raised to the k-th power in a
 * window [wlo, whi] outside which the k-fold sum has at most ACCT_PLD_TAIL
 * mass per side (Chernoff: P(S >= u) <= M(t)^k e^{-t u}). */
static int pmf_self_compose(struct pmf *m, int64_t k, struct pld_work *w, acct_error *err)
{
	double *x = NULL, lip, own, err_bound;
	long wlo = 0, whi = 0;
	size_t nfft, width;
	int rc;

	if (k == 1)
		return 0;
	rc = self_compose_window(m, k, &wlo, &whi, err);
	if (rc < 0)
		return rc;
	width = (size_t)(whi - wlo + 1);
	if (width > (size_t)ACCT_PLD_MAX_POINTS)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				      "the self-composed PLD needs %zu grid points, more than %ld; "
				      "raise value_discretization_interval", width,
				      ACCT_PLD_MAX_POINTS);
	nfft = fft_size(width > m->n ? width : m->n);
	rc = self_compose_direct(m, k, 2.0 * fft_work(nfft), w, err);
	if (rc <= 0)
		return rc;
	if (work_add(w, 2.0 * fft_work(nfft), "/event", err) < 0)
		return ACCT_EUNSUPPORTED;
	x = calloc(nfft, sizeof(double));
	if (!x)
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	memcpy(x, m->p, m->n * sizeof(double));
	if (fft_real(x, nfft, false) != GSL_SUCCESS) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "/event", "FFT failed");
		goto out;
	}
	lip = spectrum_power(x, nfft, k, fft_comp_err(nfft) * vec_l1(m->p, m->n), &own);
	err_bound = self_compose_err(m, k, lip, own, spectrum_l2(x, nfft), nfft, width);
	if (fft_real(x, nfft, true) != GSL_SUCCESS) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "/event", "inverse FFT failed");
		goto out;
	}
	rc = self_compose_unwrap(m, x, nfft, k, wlo, width, err);
	m->err = err_bound;
out:
	free(x);
	return rc;
}

/* ---- the event walk ------------------------------------------------------------ */

struct pld_pair {
	struct pmf rm, ad;
	bool same; /* ad is rm (symmetric pair): ad unused */
};

static void pair_free(struct pld_pair *p)
{
	pmf_free(&p->rm);
	pmf_free(&p->ad);
}

static int pld_walk(const acct_event *ev, acct_neighbor nb, double h, const char *where,
		    struct pld_pair *out, struct pld_work *w, acct_error *err);

static int pair_from_base(struct base *b, double h, const char *where, struct pld_pair *out,
			  struct pld_work *w, acct_error *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	b->add = false;
	rc = base_pmf(b, h, &out->rm, where, w, err);
	if (rc < 0)
		return rc;
	/* Unsampled Gaussian, Laplace and discrete Laplace are symmetric under
	 * reflection; discrete pairs are built symmetric-dominating. */
	if (b->q == 1.0 || b->kind == B_DISCRETE) {
		out->same = true;
		return 0;
	}
	b->add = true;
	rc = base_pmf(b, h, &out->ad, where, w, err);
	if (rc < 0)
		pair_free(out);
	return rc;
}

static void base_eps_delta(struct base *b, double eps, double delta)
{
	memset(b, 0, sizeof(*b));
	b->kind = B_DISCRETE;
	b->q = 1.0;
	/* Kairouz, Oh, Viswanath 2015: every (eps, delta) pair is dominated by
	 * this four-point pair; its losses are +-eps and +infinity. */
	b->natoms = 2;
	b->loss[0] = eps;
	b->w[0] = (1.0 - delta) / (1.0 + exp(-eps));
	b->loss[1] = -eps;
	b->w[1] = (1.0 - delta) / (1.0 + exp(eps));
	b->winf = delta;
}

static int pld_leaf(const acct_event *ev, acct_neighbor nb, double q, double h, const char *where,
		    struct pld_pair *out, struct pld_work *w, acct_error *err)
{
	struct base b;

	memset(&b, 0, sizeof(b));
	b.q = q;
	switch (ev->type) {
	case ACCT_EV_GAUSSIAN:
		b.kind = B_GAUSS;
		b.s = ev->u.gaussian.noise_multiplier;
		break;
	case ACCT_EV_LAPLACE:
		b.kind = B_LAPLACE;
		b.s = ev->u.laplace.noise_multiplier;
		break;
	case ACCT_EV_DISCRETE_LAPLACE:
		b.kind = B_DLAPLACE;
		b.s = ev->u.discrete_laplace.noise_parameter;
		b.d = ev->u.discrete_laplace.sensitivity;
		break;
	case ACCT_EV_RANDOMIZED_RESPONSE: {
		double p = ev->u.randomized_response.noise_parameter;
		double k = (double)ev->u.randomized_response.num_buckets;
		double lo = p / k, top = 1.0 - p + lo, l = log(top) - log(lo);

		if (q != 1.0)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "Poisson-sampled randomized response is not defined "
					      "(sampling needs add_remove, randomized response replace)");
		(void)nb;
		b.kind = B_DISCRETE;
		b.natoms = 3;
		b.loss[0] = l;
		b.w[0] = top;
		b.loss[1] = -l;
		b.w[1] = lo;
		b.loss[2] = 0.0;
		b.w[2] = (k - 2.0) * lo;
		break;
	}
	case ACCT_EV_EPSILON_DELTA:
	case ACCT_EV_EXPONENTIAL_MECHANISM:
	case ACCT_EV_PERMUTE_AND_FLIP:
		if (q != 1.0)
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "pld prices Poisson sampling of gaussian, laplace and "
					      "discrete_laplace events only");
		/* Of the two selections only eps-DP is used here (for
		 * permute-and-flip nothing finer is proven: McKenna, Sheldon
		 * 2020, Thm 1), and every eps-DP pair is dominated by randomized
		 * response with eps (Kairouz, Oh, Viswanath 2015). */
		if (ev->type == ACCT_EV_EPSILON_DELTA)
			base_eps_delta(&b, ev->u.epsilon_delta.epsilon, ev->u.epsilon_delta.delta);
		else
			base_eps_delta(&b, acct_pure_epsilon_up(ev), 0.0);
		break;
	default:
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "pld has no privacy loss distribution for a '%s' event%s",
				      acct_event_type_name(ev->type),
				      q != 1.0 ? " under Poisson sampling" : " (use rdp)");
	}
	if (q != 1.0 && b.kind == B_DISCRETE)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where, "unsupported sampled event");
	return pair_from_base(&b, h, where, out, w, err);
}

static int pair_compose(struct pld_pair *acc, struct pld_pair *x, struct pld_work *w,
			acct_error *err)
{
	int rc;

	if (acc->same && !x->same) {
		rc = pmf_copy(&acc->ad, &acc->rm, err);
		if (rc < 0)
			return rc;
		acc->same = false;
	}
	rc = pmf_convolve(&acc->rm, &x->rm, w, err);
	if (rc < 0 || acc->same)
		return rc;
	return pmf_convolve(&acc->ad, x->same ? &x->rm : &x->ad, w, err);
}

static int pld_walk(const acct_event *ev, acct_neighbor nb, double h, const char *where,
		    struct pld_pair *out, struct pld_work *w, acct_error *err)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int rc;

	switch (ev->type) {
	case ACCT_EV_POISSON_SAMPLED:
		snprintf(ptr, sizeof(ptr), "%s/event", where);
		return pld_leaf(ev->u.poisson_sampled.event, nb,
				ev->u.poisson_sampled.sampling_probability, h, ptr, out, w, err);
	case ACCT_EV_SELF_COMPOSED:
		snprintf(ptr, sizeof(ptr), "%s/event", where);
		rc = pld_walk(ev->u.self_composed.event, nb, h, ptr, out, w, err);
		if (rc < 0)
			return rc;
		rc = pmf_self_compose(&out->rm, ev->u.self_composed.count, w, err);
		if (rc >= 0 && !out->same)
			rc = pmf_self_compose(&out->ad, ev->u.self_composed.count, w, err);
		if (rc < 0)
			pair_free(out);
		return rc;
	case ACCT_EV_COMPOSED: {
		struct pld_pair acc, x;

		memset(&acc, 0, sizeof(acc));
		for (size_t i = 0; i < ev->u.composed.n; i++) {
			snprintf(ptr, sizeof(ptr), "%s/events/%zu", where, i);
			rc = pld_walk(ev->u.composed.events[i], nb, h, ptr, i == 0 ? &acc : &x, w, err);
			if (rc < 0) {
				pair_free(&acc);
				return rc;
			}
			if (i == 0)
				continue;
			rc = pair_compose(&acc, &x, w, err);
			pair_free(&x);
			if (rc < 0) {
				pair_free(&acc);
				return rc;
			}
		}
		if (ev->u.composed.n == 0) {
			/* the empty composition: all mass at loss 0 */
			acc.rm.h = h;
			acc.rm.n = 1;
			acc.rm.p = calloc(1, sizeof(double));
			if (!acc.rm.p)
				return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");
			acc.rm.p[0] = 1.0;
			acc.same = true;
		}
		*out = acc;
		return 0;
	}
	default:
		return pld_leaf(ev, nb, 1.0, h, where, out, w, err);
	}
}

/* ---- queries ---------------------------------------------------------------------- */

/* The smallest eps >= 0 with delta(eps) <= target, on the discrete PLD. */
static double pmf_epsilon(const struct pmf *m, double delta)
{
	double a = 0.0, d = 0.0, eh = exp(-m->h);
	/* The FFTs' rounding may have taken up to err from the masses above
	 * any loss: the computed curve must meet delta with err to spare. */
	double target = delta - m->err;

	if (!(target > 0.0) || m->inf > target)
		return INFINITY;
	/* Walk down: before visiting point i, a = sum_{j>i} p_j and
	 * d = sum_{j>i} p_j e^{L_i - L_j}; delta(L_i) = a - d + inf. */
	for (size_t ii = m->n; ii-- > 0;) {
		double li = (double)(m->off + (long)ii) * m->h;

		if (ii + 1 < m->n) {
			d = eh * (d + m->p[ii + 1]);
			a += m->p[ii + 1];
		}
		if (a - d + m->inf > target) {
			/* delta(x) = a + inf - e^{x - L_i} d on [L_i, L_{i+1}] */
			double x = li + log((a + m->inf - target) / d);

			return fmax(fmax(x, li), 0.0);
		}
		if (li <= 0.0)
			return 0.0;
	}
	return 0.0;
}

static double pmf_delta(const struct pmf *m, double eps)
{
	double v = m->inf + m->err;

	for (size_t i = 0; i < m->n; i++) {
		double l = (double)(m->off + (long)i) * m->h;

		if (l > eps)
			v += m->p[i] * -expm1(eps - l);
	}
	return fmin(v, 1.0);
}

static int pld_build(const acct_event *ev, acct_neighbor nb, double h, double *work,
		     struct pld_pair *out, acct_error *err)
{
	struct pld_work w = {work ? *work : 0.0};
	int rc;

	acct_gsl_quiet();
	if (!(h > 0.0 && h <= 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/value_discretization_interval",
				      "the PLD interval must be in (0, 1]");
	rc = pld_walk(ev, nb, h, "/event", out, &w, err);
	if (work)
		*work = w.done;
	return rc;
}

/* Whether `ev` is a lone discrete Gaussian, which pld prices by its exact
 * curve: it has no grid for it, and alone that curve is the privacy loss
 * distribution's own answer. */
static bool lone_discrete_gaussian(const acct_event *ev)
{
	const acct_event *leaf = acct__exact_leaf(ev);

	return leaf && leaf->type == ACCT_EV_DISCRETE_GAUSSIAN;
}

/*
 * The privacy loss distributions of `ev` read by `f` (pmf_epsilon at a
 * delta, pmf_delta at an epsilon) at x: for an asymmetric pair the larger
 * of the two readings, the bound that holds for both orders of the
 * neighbouring datasets.
 */
static int pld_read(const acct_event *ev, acct_neighbor nb, double interval, double *work,
		    double (*f)(const struct pmf *, double), double x, double *ret,
		    acct_error *err)
{
	struct pld_pair p;
	int rc = pld_build(ev, nb, interval, work, &p, err);

	if (rc < 0)
		return rc;
	*ret = f(&p.rm, x);
	if (!p.same)
		*ret = fmax(*ret, f(&p.ad, x));
	pair_free(&p);
	return 0;
}

int acct__pld_epsilon(const acct_event *ev, acct_neighbor nb, double interval, double *work,
		      double delta, acct_result *ret, acct_error *err)
{
	double e;
	int rc;

	if (lone_discrete_gaussian(ev) && delta > 0.0)
		return acct__exact_epsilon(ev, delta, ret, err);
	rc = pld_read(ev, nb, interval, work, pmf_epsilon, delta, &e, err);
	if (rc < 0)
		return rc;
	if (!isfinite(e))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "the event is not (epsilon, %g)-DP for any finite epsilon "
				      "under pld (its mass at infinity plus the bound on its FFTs' "
				      "rounding reach delta)", delta);
	*ret = (acct_result){.epsilon = e, .delta = delta, .order = NAN};
	return 0;
}

int acct__pld_points(const acct_event *ev, acct_neighbor nb, double interval, size_t *ret,
		     acct_error *err)
{
	struct pld_pair p;
	int rc = pld_build(ev, nb, interval, NULL, &p, err);

	if (rc < 0)
		return rc;
	*ret = pmf_nnz(&p.rm);
	pair_free(&p);
	return 0;
}

int acct__pld_delta(const acct_event *ev, acct_neighbor nb, double interval, double *work,
		    double epsilon, acct_result *ret, acct_error *err)
{
	double d;
	int rc;

	if (lone_discrete_gaussian(ev))
		return acct__exact_delta(ev, epsilon, ret, err);
	rc = pld_read(ev, nb, interval, work, pmf_delta, epsilon, &d, err);
	if (rc < 0)
		return rc;
	*ret = (acct_result){.epsilon = epsilon, .delta = d, .order = NAN};
	return 0;
}
