/*
 * acct_exact.c: the exact privacy curve delta(epsilon) of a lone Gaussian
 * or discrete Gaussian release, and epsilon(delta) from it.
 *
 * One such release is (eps, delta)-DP for exactly the hockey-stick
 * divergence of its dominating pair, in closed form:
 *  - gaussian, noise multiplier s (Balle and Wang 2018, "Improving the
 *    Gaussian mechanism for differential privacy", Theorem 8):
 *      delta(eps) = Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s);
 *  - discrete_gaussian, sigma s, integer sensitivity D (Canonne, Kamath,
 *    Steinke 2020, "The Discrete Gaussian for Differential Privacy",
 *    Theorem 7), with Y ~ N_Z(0, s^2):
 *      delta(eps) = P[Y > eps s^2/D - D/2] - e^eps P[Y > eps s^2/D + D/2].
 * RDP and zCDP price the same release 7-10% higher at common (eps, delta),
 * and pld has no discrete Gaussian; the tails of N_Z are sums over the
 * integers, taken term by term for small sigma and by Euler-Maclaurin with
 * its remainder bounded for large sigma (where a sum would take millions of
 * terms).  Every delta here is an upper bound on the exact one (each
 * rounding and remainder is added, never subtracted), and every epsilon is
 * the upper end of a bisection on that bound, so both err toward privacy.
 */
#include <float.h>
#include <math.h>

#include <gsl/gsl_sf_erf.h>

#include "acct.h"
#include "acct_internal.h"
#include "acct_numeric.h"

/* Up to this sigma the tails of N_Z are summed term by term (at most some
 * ten sigma terms); above it Euler-Maclaurin's remainder, at most 0.02 /
 * sigma^3 of the largest term, is below 2e-11 of it. */
#define DG_DIRECT_MAX_SIGMA 1024.0
/* A bound on the terms of one such sum (about 10 sigma are needed). */
#define DG_DIRECT_MAX_TERMS (1L << 16)
/* Rounding allowance per closed-form term (erfc, exp, log: a few ulps). */
#define EXACT_ULPS (16.0 * DBL_EPSILON)
/* Largest epsilon the inversion looks at before calling it unbounded. */
#define EXACT_MAX_EPSILON 1e6

/* log of a lower and an upper bound on a positive quantity. */
struct log_bounds {
	double lo, hi;
};

/* ---- tails of the discrete Gaussian ------------------------------------- */

/*
 * sum_{y >= m} e^{-y^2 / 2s^2} for an integer m >= 0, term by term, scaled
 * by e^{m^2 / 2s^2} so that no term underflows before the sum is known.
 * Past y >= s the ratio of consecutive terms, e^{-(2y+1)/2s^2}, falls with
 * y, so what is left after the last term is at most a geometric series.
 * Each term's exponent x carries 3 roundings (relative), exp one ulp, and
 * the compensated sum (Neumaier) two: (8 + 3|x|) ulps bound them all.
 */
static struct log_bounds dg_tail_direct(double s, double m)
{
	double inv = 1.0 / (2.0 * s * s), sum = 0.0, comp = 0.0, x = 0.0, y = m, rem, slack, lf;
	long n = 0;
	struct log_bounds b;

	for (;;) {
		double t, u;

		x = (y - m) * (y + m) * inv;
		t = exp(-x);
		u = sum + t;
		comp += fabs(sum) >= t ? (sum - u) + t : (t - u) + sum;
		sum = u;
		n++;
		if ((y >= s && (t < 1e-20 * sum || t == 0.0)) || n >= DG_DIRECT_MAX_TERMS)
			break;
		y += 1.0;
	}
	sum += comp;
	/* Terms from y + 1 on: at most the next one over 1 - its ratio. */
	rem = exp(-(y + 1.0 - m) * (y + 1.0 + m) * inv) / -expm1(-(2.0 * y + 3.0) * inv);
	slack = (8.0 + 3.0 * x) * DBL_EPSILON;
	/* The scale's exponent m^2 / 2s^2 carries three roundings too. */
	lf = -m * m * inv;
	b.lo = lf + log(sum) + log1p(-slack) - 4.0 * DBL_EPSILON * (1.0 - lf);
	b.hi = lf + log(sum + rem) + log1p(slack) + 4.0 * DBL_EPSILON * (1.0 - lf);
	return b;
}

/*
 * The same by Euler-Maclaurin to fourth order (f(y) = e^{-y^2/2s^2}, t =
 * m/s, He3(t) = t^3 - 3t and He4(t) = t^4 - 6t^2 + 3 the Hermite
 * polynomials, so that f^(3) = -f He3(t)/s^3 and f^(4) = f He4(t)/s^4):
 *   sum_{y>=m} f(y) = int_m^inf f + f(m)/2 - f'(m)/12 + f^(3)(m)/720 + R,
 *   |R| <= (2 zeta(4) / (2 pi)^4) int_m^inf |f^(4)| = (1/720) int |f^(4)|.
 * Beyond t = 2.3345 (above He4's largest root, sqrt(3 + sqrt 6)) f^(4) > 0,
 * so the integral is -f^(3)(m) = f(m) He3(t)/s^3; below it, at most the
 * whole line's, s^-3 int |He4| e^{-t^2/2} dt <= s^-3 sqrt(24) sqrt(2 pi)
 * (Cauchy-Schwarz, E He4(Z)^2 = 4! = 24) < 12.3 / s^3.  Everything is
 * scaled by f(m); the continuous tail is s sqrt(pi/2) erfcx(t / sqrt 2).
 */
static struct log_bounds dg_tail_em(double s, double m)
{
	double t = m / s, s3 = s * s * s, lf = -0.5 * t * t;
	double he3 = t * t * t - 3.0 * t;
	double tail = s * sqrt(M_PI / 2.0) * exp(gsl_sf_log_erfc(t / M_SQRT2) + 0.5 * t * t);
	double main_ = tail + 0.5 + t / (12.0 * s) - he3 / (720.0 * s3);
	double rem = t >= 2.3345 ? he3 / (720.0 * s3) : 12.3 / (720.0 * s3) / exp(lf);
	/* erfcx through exp(log erfc + t^2/2) loses about ulp(t^2/2). */
	double round = (8.0 + 0.5 * t * t) * DBL_EPSILON * main_;
	double lerr = 4.0 * DBL_EPSILON * (1.0 - lf); /* of lf itself */
	struct log_bounds b;

	b.hi = lf + log(main_ + rem + round) + lerr;
	b.lo = main_ - rem - round > 0.0 ? lf + log(main_ - rem - round) - lerr : -INFINITY;
	return b;
}

/* sum_{y >= m} f(y), m >= 0, by the method that suits sigma. */
static struct log_bounds dg_tail(double s, double m)
{
	return s <= DG_DIRECT_MAX_SIGMA ? dg_tail_direct(s, m) : dg_tail_em(s, m);
}

/* The normaliser Z = sum_y f(y): 1 + 2 S(1) for small sigma; for large
 * sigma, Poisson summation, Z = s sqrt(2 pi) (1 + 2 sum_k e^{-2 pi^2 s^2
 * k^2}), whose k >= 1 terms are below e^{-2e7} there. */
static struct log_bounds dg_norm(double s)
{
	struct log_bounds b;

	if (s <= DG_DIRECT_MAX_SIGMA) {
		struct log_bounds t = dg_tail_direct(s, 1.0);

		b.lo = log1p(2.0 * exp(t.lo));
		b.hi = log1p(2.0 * exp(t.hi)) + EXACT_ULPS;
		return b;
	}
	b.lo = log(s) + 0.5 * log(2.0 * M_PI) - EXACT_ULPS;
	b.hi = log(s) + 0.5 * log(2.0 * M_PI) + EXACT_ULPS;
	return b;
}

/* sum_{y >= m} f(y) for any integer m: below 0, Z - S(1 - m). */
static struct log_bounds dg_upper_sum(double s, double m, struct log_bounds z)
{
	struct log_bounds t, b;

	if (m >= 0.0)
		return dg_tail(s, m);
	t = dg_tail(s, 1.0 - m);
	b.lo = acct__log_sub(z.lo, t.hi);
	b.hi = acct__log_sub(z.hi, t.lo);
	return b;
}

double acct_discrete_gaussian_delta(double sigma, double sensitivity, double epsilon)
{
	double s = sigma, d = sensitivity, c = epsilon * s * s / d;
	double u = c - d / 2.0, m, eu, near, lnum, tie;
	struct log_bounds z, a, b;

	/* Outside what doubles resolve (1 / 2s^2 overflowing, u past 2^52)
	 * nothing is claimed: delta 1. */
	if (!(s > 0.0 && d >= 1.0 && epsilon >= 0.0) || !isfinite(1.0 / (2.0 * s * s)) ||
	    !isfinite(u) || fabs(u) > 0x1p52)
		return 1.0;
	z = dg_norm(s);
	/* The losses above eps are the outputs y > u (Theorem 7's events),
	 * and y > u + D for the shifted distribution. */
	m = floor(u) + 1.0;
	a = dg_upper_sum(s, m, z);
	b = dg_upper_sum(s, m + d, z);
	lnum = a.hi > epsilon + b.lo ? acct__log_sub(a.hi, epsilon + b.lo) : -INFINITY;
	/* Rounding of the difference. */
	lnum = acct__log_add(lnum, log(EXACT_ULPS) + acct__log_add(a.hi, epsilon + b.hi));
	/* u carries rounding eu; an output within eu of u may sit on the wrong
	 * side of it, where its term P(y)(1 - e^{eps - L(y)}) is at most
	 * P(y) 2 D eu / s^2 in size (|L(y) - eps| = D |y - u| / s^2). */
	eu = 4.0 * DBL_EPSILON * (fabs(c) + d / 2.0);
	near = nearbyint(u);
	if (fabs(near - u) <= eu) {
		tie = -near * near / (2.0 * s * s) + log(2.0 * d * eu / (s * s));
		lnum = acct__log_add(lnum, tie);
	}
	return fmin(exp(lnum - z.lo), 1.0);
}

/* ---- the Gaussian ------------------------------------------------------- */

/* log of an upper bound on Balle and Wang's delta(eps). */
static double gauss_log_delta(double s, double epsilon)
{
	double a = 1.0 / (2.0 * s), b = epsilon * s;
	double x1 = (b - a) / M_SQRT2, x2 = (a + b) / M_SQRT2;
	double l1 = log(0.5) + gsl_sf_log_erfc(x1);
	double l2 = epsilon + log(0.5) + gsl_sf_log_erfc(x2);
	double num = l1 > l2 ? acct__log_sub(l1, l2) : -INFINITY;
	/* log erfc(x) ~ -x^2 turns the arguments' relative rounding into
	 * about 2 x^2 ulps of each term. */
	double ulps = (16.0 + 2.0 * (x1 * x1 + x2 * x2)) * DBL_EPSILON;

	return acct__log_add(num, log(ulps) + acct__log_add(l1, l2));
}

double acct_gaussian_delta(double noise_multiplier, double epsilon)
{
	if (!(noise_multiplier > 0.0 && epsilon >= 0.0) || !isfinite(epsilon))
		return 1.0;
	return fmin(exp(gauss_log_delta(noise_multiplier, epsilon)), 1.0);
}

/* ---- epsilon from delta ------------------------------------------------- */

const acct_event *acct__exact_leaf(const acct_event *ev)
{
	while (ev && ((ev->type == ACCT_EV_SELF_COMPOSED && ev->u.self_composed.count == 1) ||
		      (ev->type == ACCT_EV_COMPOSED && ev->u.composed.n == 1)))
		ev = ev->type == ACCT_EV_COMPOSED ? ev->u.composed.events[0] :
						    ev->u.self_composed.event;
	if (ev && (ev->type == ACCT_EV_GAUSSIAN || ev->type == ACCT_EV_DISCRETE_GAUSSIAN))
		return ev;
	return NULL;
}

/* delta(eps) of a lone Gaussian-type event; false when it is not one. */
static bool lone_curve(const acct_event *ev, double epsilon, double *ret_delta)
{
	ev = acct__exact_leaf(ev);
	if (!ev)
		return false;
	if (ev->type == ACCT_EV_GAUSSIAN)
		*ret_delta = acct_gaussian_delta(ev->u.gaussian.noise_multiplier, epsilon);
	else
		*ret_delta = acct_discrete_gaussian_delta(ev->u.discrete_gaussian.sigma,
							  ev->u.discrete_gaussian.sensitivity, epsilon);
	return true;
}

int acct__exact_delta(const acct_event *ev, double epsilon, acct_result *ret, acct_error *err)
{
	double d;

	(void)err;
	if (!lone_curve(ev, epsilon, &d))
		return ACCT_EUNSUPPORTED;
	*ret = (acct_result){.epsilon = epsilon, .delta = d, .order = NAN};
	return 0;
}

/*
 * delta(eps) falls as eps grows, so the smallest eps whose bound meets the
 * target is found by doubling, then bisection to the last bits; the end
 * returned is one where the bound was seen to hold (0 when delta(0), the
 * total variation distance, already does).
 */
int acct__exact_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err)
{
	double lo = 0.0, hi = 0.0, d;

	if (!lone_curve(ev, 0.0, &d))
		return ACCT_EUNSUPPORTED;
	if (d > delta) {
		hi = 1.0;
		while (lone_curve(ev, hi, &d) && d > delta) {
			lo = hi;
			hi *= 2.0;
			if (hi > EXACT_MAX_EPSILON)
				return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
						      "the event is not (epsilon, %g)-DP for any "
						      "epsilon up to %g", delta, EXACT_MAX_EPSILON);
		}
		for (int i = 0; i < 200 && hi - lo > 4.0 * DBL_EPSILON * hi; i++) {
			double mid = 0.5 * (lo + hi);

			lone_curve(ev, mid, &d);
			if (d <= delta)
				hi = mid;
			else
				lo = mid;
		}
	}
	*ret = (acct_result){.epsilon = hi, .delta = delta, .order = NAN};
	return 0;
}
