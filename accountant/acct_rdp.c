/*
 * acct_rdp.c: Renyi differential privacy (Mironov 2017) of every event type,
 * composition, and the conversion of an RDP curve to (epsilon, delta).
 *
 * Sources of each curve are cited where it is computed.  RDP at order alpha
 * is written rdp(alpha); every curve here is exact or an upper bound.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_sf_erf.h>
#include <gsl/gsl_sf_gamma.h>

#include "acct.h"
#include "acct_internal.h"
#include "acct_numeric.h"

/* dp_accounting's default orders, as DESIGN.md fixes them. */
#define N_DEFAULT_ORDERS (99 + 53 + 4)

static const double default_orders[N_DEFAULT_ORDERS] = {
	1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0,
	2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9, 3.0,
	3.1, 3.2, 3.3, 3.4, 3.5, 3.6, 3.7, 3.8, 3.9, 4.0,
	4.1, 4.2, 4.3, 4.4, 4.5, 4.6, 4.7, 4.8, 4.9, 5.0,
	5.1, 5.2, 5.3, 5.4, 5.5, 5.6, 5.7, 5.8, 5.9, 6.0,
	6.1, 6.2, 6.3, 6.4, 6.5, 6.6, 6.7, 6.8, 6.9, 7.0,
	7.1, 7.2, 7.3, 7.4, 7.5, 7.6, 7.7, 7.8, 7.9, 8.0,
	8.1, 8.2, 8.3, 8.4, 8.5, 8.6, 8.7, 8.8, 8.9, 9.0,
	9.1, 9.2, 9.3, 9.4, 9.5, 9.6, 9.7, 9.8, 9.9, 10.0,
	10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 10.9,
	11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
	28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
	45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61,
	62, 63,
	128, 256, 512, 1024,
};

const double *acct_rdp_default_orders(size_t *ret_n)
{
	*ret_n = N_DEFAULT_ORDERS;
	return default_orders;
}

static bool is_integer_order(double a)
{
	return a == floor(a) && a <= DPG_MAX_RDP_ORDER;
}

/*
 * Above this order a subsampled Gaussian's RDP is reported as +infinity,
 * for Poisson sampling and sampling without replacement alike: the sums
 * below take O(alpha) terms, and +infinity is an upper bound on any Renyi
 * divergence, so the curve stays sound.  Nothing useful is lost: the
 * conversion to (epsilon, delta) picks its order near sqrt(log(1/delta) /
 * rho) for a curve rho alpha, so an order above 1e5 wins only for epsilons
 * below ~0.02 at delta 1e-300 (docs/accountants.md).
 */
#define SAMPLED_MAX_ORDER 1e5

/*
 * Work units (DPG_MAX_RDP_WORK): one unit is a term of the integer order's
 * sum (log_a_int, wor_log_a_int), 40 to 50 ns on a busy 2-core machine.  A
 * term of the fractional series (two log erfc, a log binomial) took 2 to 4
 * times as long, up to 6 at large noise multipliers, where erfc's argument
 * is far out; an evaluation of the integrand about one.  The weights are
 * the measured worst, so that any admitted pricing ends in about the same
 * time (docs/accountants.md).
 */
#define RDP_UNITS_PER_SERIES_TERM 6.0
#define RDP_UNITS_PER_EVAL 1.0
/* The integral's fixed part: the 68 evaluations that find its scale and the
 * first 21-point rule on each of at most 3 intervals. */
#define RDP_EVALS_MIN (68.0 + 3.0 * 21.0)

/* ---- Poisson-subsampled Gaussian ---------------------------------------- */

/*
 * log A_alpha for integer alpha (Mironov, Talwar, Zhang 2019, Sec. 3.3):
 * A = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2 - k) / (2 s^2)).
 * Written as 1 + sum_{k>=2} C(alpha,k) (1-q)^(alpha-k) q^k expm1(...) (the
 * k = 0, 1 terms and the "1" of each exp sum to one), every term positive,
 * so small q keeps its digits: log A = log1p(sum).
 */
static double log_a_int(double q, double sigma, long alpha)
{
	double lq = log(q), l1q = log1p(-q), s = -INFINITY, lc = 0.0;
	double inv2s2 = 1.0 / (2.0 * sigma * sigma);

	/* lc = log C(alpha, k), updated by the ratio (alpha-k)/(k+1). */
	lc = log((double)alpha) + log((double)alpha - 1.0) - log(2.0);
	for (long k = 2; k <= alpha; k++) {
		double c = (double)(k * k - k) * inv2s2;
		double lexpm1 = acct__log_expm1(c);
		double t = lc + (double)k * lq + (double)(alpha - k) * l1q + lexpm1;

		s = acct__log_add(s, t);
		lc += log((double)(alpha - k)) - log((double)(k + 1));
	}
	return s > 0.0 ? s + log1p(exp(-s)) : log1p(exp(s));
}

struct moment_params {
	double q, sigma, beta, inv2s2, logc, shift;
	int scaled;
};

/* log(1 - q + q e^w), accurate for small q and any w. */
static double log_mix(double q, double w)
{
	if (q == 1.0)
		return w;
	if (w <= 0.0)
		return log1p(q * expm1(w));
	return acct__log_add(log1p(-q), log(q) + w);
}

static double moment_integrand(double z, void *vp)
{
	const struct moment_params *p = vp;
	double w = (2.0 * z - 1.0) * p->inv2s2;
	double lphi0 = -z * z * p->inv2s2 - p->logc;
	double l1 = log_mix(p->q, w);

	if (p->scaled)
		return exp(lphi0 + p->beta * l1 - p->shift);
	{
		/* phi0 * [(1+x)^beta - 1 - beta x] with x = q expm1(w) >= -q. */
		double x = p->q * expm1(w);

		if (fabs(p->beta * x) < 0.1) {
			/* sum_{k>=2} C(beta,k) x^k: no cancellation for tiny x */
			double t = p->beta * (p->beta - 1.0) / 2.0 * x * x, s = t;

			for (int k = 2; k < 60 && fabs(t) > 1e-17 * fabs(s); k++) {
				t *= (p->beta - k) / (k + 1.0) * x;
				s += t;
			}
			return exp(lphi0) * s;
		}
		if (isfinite(x) && fabs(x) < 0.5)
			return exp(lphi0) * (expm1(p->beta * l1) - p->beta * x);
		/* Far from the cancellation: phi0 (1+x)^beta - phi0 - beta q (phi1 - phi0). */
		{
			double lphi1 = -(z - 1.0) * (z - 1.0) * p->inv2s2 - p->logc;
			double v = exp(lphi0 + p->beta * l1) - exp(lphi0) -
				   p->beta * p->q * (exp(lphi1) - exp(lphi0));

			return v > 0.0 ? v : 0.0;
		}
	}
}

double acct__log_mixture_moment(double q, double sigma, double beta,
				gsl_integration_workspace *w)
{
	struct moment_params p;
	gsl_function fn;
	double lo, hi, pts[4], result = 0.0, abserr = 0.0, m = -INFINITY;
	size_t np = 0;
	int status;

	p.q = q;
	p.sigma = sigma;
	p.beta = beta;
	p.inv2s2 = 1.0 / (2.0 * sigma * sigma);
	p.logc = log(sigma) + 0.5 * log(2.0 * M_PI);
	p.shift = 0.0;
	p.scaled = 0;
	lo = -40.0 * sigma;
	/* For beta > 0 the integrand behaves like exp(-(z - beta)^2 / 2s^2) far
	 * right; for beta < 0 it is at most phi0 (1-q)^beta. */
	hi = (beta > 0.0 ? fmax(beta, 1.0) : 1.0) + 40.0 * sigma;
	/* Largest log-integrand, to choose the form and the scale. */
	for (int i = 0; i <= 64; i++) {
		double z = lo + (hi - lo) * i / 64.0;
		double v = -z * z * p.inv2s2 - p.logc + beta * log_mix(q, (2.0 * z - 1.0) * p.inv2s2);

		m = fmax(m, v);
	}
	{
		double cand[3] = {0.0, 0.5, beta};

		for (int i = 0; i < 3; i++) {
			double z = cand[i];
			double v = -z * z * p.inv2s2 - p.logc +
				   beta * log_mix(q, (2.0 * z - 1.0) * p.inv2s2);

			m = fmax(m, v);
		}
	}
	if (!isfinite(m))
		return m > 0 ? INFINITY : NAN;
	if (m > 300.0) {
		p.scaled = 1;
		p.shift = m;
	}
	fn.function = moment_integrand;
	fn.params = &p;
	pts[np++] = lo;
	pts[np++] = 0.5;
	if (beta > 0.5 && beta < hi)
		pts[np++] = beta;
	pts[np++] = hi;
	status = gsl_integration_qagp(&fn, pts, np, 0.0, 1e-11, ACCT_INTEGRATION_LIMIT, w,
				      &result, &abserr);
	if (status == GSL_EROUND && abserr <= 1e-8 * fabs(result))
		status = GSL_SUCCESS;
	if (status != GSL_SUCCESS || !isfinite(result) || result < 0.0)
		return NAN;
	if (p.scaled)
		return result > 0.0 ? p.shift + log(result) : NAN;
	return log1p(result);
}

/*
 * log A_alpha of the sampled Gaussian at a fractional order by the series of
 * Mironov, Talwar and Zhang, "Renyi Differential Privacy of the Sampled
 * Gaussian Mechanism" (2019), Sec. 3.3, with every binomial coefficient
 * C(alpha, i) taken in absolute value.  For fractional alpha some C(alpha, i)
 * are negative, so this sum is an upper bound on the exact A_alpha (which the
 * integration computes); it is the figure dp_accounting reports.  The
 * fractional-order RDP is the larger of the two, so dpgate's epsilon is never
 * below the reference implementation's, and never below the exact one.
 */
static double log_a_frac_abs_series(double q, double sigma, double alpha, double *ret_terms)
{
	double z0 = sigma * sigma * log(1.0 / q - 1.0) + 0.5;
	double la0 = -INFINITY, la1 = -INFINITY;
	double lq = log(q), l1q = log1p(-q), s2 = 2.0 * sigma * sigma;
	int i;

	for (i = 0; i < 100000; i++) {
		double j = alpha - i;
		double lc = acct_log_binomial(alpha, i);
		double lt0 = lc + i * lq + j * l1q;
		double lt1 = lc + j * lq + i * l1q;
		double le0 = log(0.5) + gsl_sf_log_erfc((i - z0) / (M_SQRT2 * sigma));
		double le1 = log(0.5) + gsl_sf_log_erfc((z0 - j) / (M_SQRT2 * sigma));
		double ls0 = lt0 + ((double)i * i - i) / s2 + le0;
		double ls1 = lt1 + (j * j - j) / s2 + le1;

		la0 = acct__log_add(la0, ls0);
		la1 = acct__log_add(la1, ls1);
		if (i > alpha && fmax(ls0, ls1) < acct__log_add(la0, la1) - 40.0)
			break;
	}
	*ret_terms = i + 1.0;
	return acct__log_add(la0, la1);
}

/*
 * Fractional-order RDP: max(exact integral, the absolute series).  The
 * exact integral's RDP alone goes to *ret_exact when it is not NULL: it is
 * a Renyi divergence, so nondecreasing in the order, which the absolute
 * series is not (its terms change sign pattern with the order).  The work
 * done, in RDP work units, is added to *ret_work: the series' terms, and the
 * integral's evaluations (each of the workspace's w->size intervals was
 * evaluated by a 21-point rule at most twice: once whole, once as a half).
 */
static double rdp_sampled_gaussian_frac(double q, double sigma, double alpha,
					gsl_integration_workspace *w, double *ret_exact,
					double *ret_work)
{
	double terms = 0.0;
	double exact = acct__log_mixture_moment(q, sigma, alpha, w);
	double series = log_a_frac_abs_series(q, sigma, alpha, &terms);

	*ret_work += RDP_UNITS_PER_SERIES_TERM * terms +
		     RDP_UNITS_PER_EVAL * (68.0 + 42.0 * (double)w->size);
	if (isnan(exact))
		return NAN;
	if (ret_exact)
		*ret_exact = exact / (alpha - 1.0);
	return (isfinite(series) ? fmax(exact, series) : exact) / (alpha - 1.0);
}

double acct_rdp_sampled_gaussian(double q, double sigma, double alpha, bool force_integration)
{
	gsl_integration_workspace *w;
	double la, work = 0.0;

	acct_gsl_quiet();
	if (!(q > 0.0) || !(sigma > 0.0) || !(alpha > 1.0))
		return q == 0.0 ? 0.0 : NAN;
	if (isinf(alpha))
		return INFINITY;
	if (q == 1.0)
		return alpha / (2.0 * sigma * sigma);
	if (is_integer_order(alpha) && !force_integration)
		return log_a_int(q, sigma, (long)alpha) / (alpha - 1.0);
	w = gsl_integration_workspace_alloc(ACCT_INTEGRATION_LIMIT);
	if (!w)
		return NAN;
	/* force_integration asks for the exact integral alone (tests). */
	la = force_integration ? acct__log_mixture_moment(q, sigma, alpha, w) / (alpha - 1.0) :
				 rdp_sampled_gaussian_frac(q, sigma, alpha, w, NULL, &work);
	gsl_integration_workspace_free(w);
	return la;
}

/* ---- sampling without replacement --------------------------------------- */

/*
 * Wang, Balle, Kasiviswanathan (AISTATS 2019), Theorem 27 for the Gaussian
 * mechanism (whose rdp(j) = j / (2 s^2) meets the theorem's condition),
 * replace-one relation, sampling ratio q = m / n:
 *   A = 1 + q^2 C(a,2) min(4 (e^{eps(2)} - 1), 2 e^{eps(2)})
 *       + sum_{j>=3} q^j C(a,j) min(4 sqrt(D^{2 floor(j/2)} D^{2 ceil(j/2)}),
 *                                    2 e^{(j-1) eps(j)})
 * where D^k is the k-th forward difference at 0 of h(x) = e^{(x-1) eps(x)}.
 * Beyond order WOR_MAX_EXACT only the second bound is used (it is the
 * larger, so this stays an upper bound).  Fractional orders interpolate the
 * cumulant log A linearly between the neighbouring integers (Corollary 10:
 * the cumulant is convex).
 */
#define WOR_MAX_EXACT 256

struct wor_table {
	double sigma;
	int kmax;
	double logd[WOR_MAX_EXACT + 3]; /* log |D^k h(0)| */
};

static void wor_table_init(struct wor_table *t, double sigma, int kmax)
{
	double lv[WOR_MAX_EXACT + 3] = {0};
	int sg[WOR_MAX_EXACT + 3];
	double inv2s2 = 1.0 / (2.0 * sigma * sigma);

	t->sigma = sigma;
	t->kmax = kmax;
	for (int i = 0; i <= kmax; i++) {
		lv[i] = (double)i * (double)(i - 1) * inv2s2;
		sg[i] = 1;
	}
	t->logd[0] = lv[0];
	for (int m = 1; m <= kmax; m++) {
		for (int i = 0; i + m <= kmax; i++) {
			/* v[i] <- v[i+1] - v[i], in (sign, log |.|) form. */
			double a = lv[i + 1], b = lv[i];
			int sa = sg[i + 1], sb = -sg[i];

			if (sa == sb) {
				lv[i] = acct__log_add(a, b);
				sg[i] = sa;
			} else if (a >= b) {
				lv[i] = acct__log_sub(a, b);
				sg[i] = sa;
			} else {
				lv[i] = acct__log_sub(b, a);
				sg[i] = sb;
			}
		}
		t->logd[m] = lv[0];
	}
}

/* The work of wor_table_init: kmax^2 / 2 differences, 2 units each. */
static double wor_table_work(int kmax)
{
	return (double)kmax * (double)kmax;
}

/* The work of one order's wor_log_a_int sums (two for a fractional order). */
static double wor_order_work(double a)
{
	if (a > SAMPLED_MAX_ORDER)
		return 1.0;
	return a == floor(a) ? a : 2.0 * ceil(a);
}

static double wor_log_a_int(const struct wor_table *t, double q, long alpha)
{
	double inv2s2 = 1.0 / (2.0 * t->sigma * t->sigma);
	double eps2 = 2.0 * inv2s2;
	double lq = log(q), s;

	if (alpha <= 1)
		return 0.0;
	s = 2.0 * lq + acct_log_binomial((double)alpha, 2.0) +
	    fmin(log(4.0) + acct__log_expm1(eps2), eps2 + log(2.0));
	for (long j = 3; j <= alpha; j++) {
		double cap = log(2.0) + (double)(j - 1) * (double)j * inv2s2;
		double b = cap;

		if (alpha <= WOR_MAX_EXACT) {
			long lo = 2 * (j / 2), hi = 2 * ((j + 1) / 2);

			b = fmin(log(4.0) + 0.5 * (t->logd[lo] + t->logd[hi]), cap);
		}
		s = acct__log_add(s, b + (double)j * lq + acct_log_binomial((double)alpha, (double)j));
	}
	return s > 0.0 ? s + log1p(exp(-s)) : log1p(exp(s));
}

/* ---- the event walk ------------------------------------------------------ */

struct rdp_walk {
	acct_neighbor nb;
	const double *orders;
	size_t n;
	double *out;
	double *floor;         /* a nondecreasing lower bound of out, or NULL */
	double log_keep;      /* log prod (1 - delta_i) of (eps, delta) events */
	bool allow_delta;
	gsl_integration_workspace *w;
	struct wor_table *wor; /* scratch, allocated on first use */
	double *work;          /* RDP work units done so far (DPG_MAX_RDP_WORK) */
	const char *root;      /* the event's JSON pointer */
	acct_error *err;
};

/* Counts `units` of work; refuses once the pricing's total passes the limit
 * (the fractional series and the integral, whose length depends on the
 * event's parameters, are counted only as they run).  The whole event is
 * named: the part where the count ran out is no more at fault than the
 * parts priced before it. */
static int work_add(struct rdp_walk *wk, double units)
{
	*wk->work += units;
	if (*wk->work > DPG_MAX_RDP_WORK)
		return acct_error_set(wk->err, ACCT_EUNSUPPORTED, wk->root,
				      "pricing this event under rdp needs more than %.3g units "
				      "of work (the limit): compose fewer distinct sampled "
				      "events, or ask for fewer orders", DPG_MAX_RDP_WORK);
	return 0;
}

/*
 * An upper bound on the order-a RDP of an eps-DP mechanism (eps = `pure`,
 * rounded up by the caller) from r, its closed form as computed.  The
 * closed forms below take a value of about a eps^2 / 2 as the difference
 * of terms as large as `mag`, so r can be off by a few ulps of mag: below
 * 0 (and a negative Laplace would cancel other events' RDP in a
 * composition), 0 for tiny eps, or NaN (inf - inf) for near-noiseless
 * parameters, which fmax(NaN, 0) made 0.  r plus 16 ulps of mag, an
 * upper bound beyond those roundings, and two bounds that hold for every
 * eps-DP mechanism: eps at every order (Mironov 2017, Prop. 3), and
 * a eps^2 / 2, since eps-DP implies (eps^2 / 2)-zCDP (Bun, Steinke 2016,
 * Prop. 3.3); the least of the three, and the last two alone for NaN.
 */
static double pure_dp_rdp(double r, double pure, double a, double mag)
{
	double cap = fmin(pure, acct_mul_up(0.5, acct_mul_up(a, acct_mul_up(pure, pure))));

	if (isnan(r))
		return cap;
	r = acct_add_up(r, 16.0 * DBL_EPSILON * mag / (a - 1.0));
	return fmin(fmax(r, 0.0), cap);
}

/* Mironov 2017, Prop. 6: Laplace (and any mechanism with its PLD). */
static double laplace_rdp(double eps, double a)
{
	double r = eps + log1p((a - 1.0) * expm1(eps * (1.0 - 2.0 * a)) / (2.0 * a - 1.0)) /
			     (a - 1.0);

	return pure_dp_rdp(r, eps, a, 1.0 + a * eps);
}

/* Mironov 2017, Prop. 5: binary randomized response with parameter eps,
 * which dominates every (eps, 0)-DP pair (Kairouz et al. 2015). */
static double rr_eps_rdp(double eps, double a)
{
	double num;

	if (eps == 0.0)
		return 0.0;
	num = a * eps + log1p(exp(eps * (1.0 - 2.0 * a))) - (eps + log1p(exp(-eps)));
	return pure_dp_rdp(num / (a - 1.0), eps, a, 1.0 + a * eps);
}

/* k-ary randomized response, replace-one: P = [1-p+p/k, p/k, ...],
 * Q = [p/k, 1-p+p/k, p/k, ...]; sum P^a Q^(1-a) = b e^{a l} + a' e^{-a l}
 * + (k-2) b with b = p/k, a' = 1-p+p/k, l = log(a'/b). */
static double rr_rdp(double p, double k, double a)
{
	/* log b from p and k: p / k underflows to 0 for p near the least
	 * double, where log b is still about -745. */
	double lb = log(p) - log(k), top = 1.0 - p + p / k, l, s, pure;

	if (p >= 1.0)
		return 0.0;
	l = log(top) - lb;
	s = acct__log_add(lb + a * l, log(top) - a * l);
	if (k > 2.0)
		s = acct__log_add(s, log(k - 2.0) + lb);
	/* The pure eps, ln(a' / b) = ln(1 + k (1 - p) / p), rounded up. */
	pure = nextafter(log1p(acct_div_up(acct_mul_up(k, 1.0 - p), p)), INFINITY);
	return pure_dp_rdp(s / (a - 1.0), pure, a, 1.0 + fabs(lb) + fabs(log(top)) + a * fabs(l));
}

/* Discrete Laplace P(x) ~ e^{-t|x|} against its shift by D (integer):
 * sum_x Q (P/Q)^a = r^D/(1+r) e^{a t D} + 1/(1+r) e^{-a t D}
 *   + c r^{D(1-a)} sum_{x=1}^{D-1} g^x,  r = e^{-t}, g = r^{2a-1},
 *   c = (1-r)/(1+r).  (Derived in tests/accountant/test_rdp.c's header.) */
static double dlaplace_rdp(double t, double d, double a)
{
	double l1pr = log1p(exp(-t));
	double s = acct__log_add(t * d * (a - 1.0) - l1pr, -a * t * d - l1pr);

	if (d >= 2.0) {
		double lg = -t * (2.0 * a - 1.0);
		double lc = log(-expm1(-t)) - l1pr;
		double geo = lg + log(-expm1(lg * (d - 1.0))) - log(-expm1(lg));

		s = acct__log_add(s, lc + t * d * (a - 1.0) + geo);
	}
	return pure_dp_rdp(s / (a - 1.0), acct_mul_up(t, d), a, 1.0 + a * t * d);
}

/*
 * The noise multiplier of the single Gaussian whose subsampling bounds that
 * of an event made only of Gaussian-type parts: Gaussians (compositions of
 * them are one Gaussian query with 1/s^2 = sum 1/s_i^2 -- Mironov et al.
 * 2019, Sec. 3) and discrete Gaussians at their (D/s)^2.  A generic `zcdp`
 * event is not one: its RDP curve is the Gaussian's, but what subsampling
 * does to a mechanism depends on more than its RDP curve, and no bound
 * says a rho-zCDP mechanism subsamples as well as the Gaussian does, so it
 * is refused.  Returns the inverse square (0 when none) or -1 when a part
 * is not Gaussian-type.
 */
static double gaussian_inv_sq(const acct_event *ev)
{
	switch (ev->type) {
	case ACCT_EV_GAUSSIAN:
		return acct_inv_sq_up(ev->u.gaussian.noise_multiplier);
	case ACCT_EV_DISCRETE_GAUSSIAN: {
		double r = acct_div_up(ev->u.discrete_gaussian.sensitivity,
				       ev->u.discrete_gaussian.sigma);

		return acct_mul_up(r, r);
	}
	case ACCT_EV_SELF_COMPOSED: {
		double v = gaussian_inv_sq(ev->u.self_composed.event);

		return v < 0.0 ? v : acct_mul_up(v, (double)ev->u.self_composed.count);
	}
	case ACCT_EV_COMPOSED: {
		double s = 0.0;

		for (size_t i = 0; i < ev->u.composed.n; i++) {
			double v = gaussian_inv_sq(ev->u.composed.events[i]);

			if (v < 0.0)
				return v;
			s = acct_add_up(s, v);
		}
		return s;
	}
	default:
		return -1.0;
	}
}

static int rdp_walk(struct rdp_walk *wk, const acct_event *ev, double scale, const char *where);

static int walk_child(struct rdp_walk *wk, const acct_event *ev, double scale, const char *where,
		      const char *key)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	snprintf(ptr, sizeof(ptr), "%s/%s", where, key);
	return rdp_walk(wk, ev, scale, ptr);
}

/*
 * Adds scale * r to the curve at order i, rounded toward +infinity: the
 * composition of the parts never falls below the sum of their RDP as
 * computed (the rational prices above round upward too; a value from a
 * transcendental formula carries libm's error, a few ulps at most).
 */
static void add_at(struct rdp_walk *wk, size_t i, double scale, double r)
{
	wk->out[i] = acct_add_up(wk->out[i], acct_mul_up(scale, r));
	if (wk->floor)
		wk->floor[i] += scale * r;
}

/*
 * The same for a curve whose computed values need not be nondecreasing in
 * the order (an upper bound that is not itself a Renyi divergence): r goes
 * to the curve, and `lo`, a lower bound of r that is nondecreasing in the
 * order, to the floor that the order search prunes with.
 */
static void add_at_floor(struct rdp_walk *wk, size_t i, double scale, double r, double lo)
{
	wk->out[i] = acct_add_up(wk->out[i], acct_mul_up(scale, r));
	if (wk->floor)
		wk->floor[i] += scale * lo;
}

static int add_curve(struct rdp_walk *wk, double scale, double (*fn)(double, double),
		     double param)
{
	for (size_t i = 0; i < wk->n; i++)
		add_at(wk, i, scale, fn(param, wk->orders[i]));
	return 0;
}

static int sampled_gaussian(struct rdp_walk *wk, const acct_event *ev, double scale,
			    const char *where)
{
	const acct_event *inner = ev->u.poisson_sampled.event;
	double q = ev->u.poisson_sampled.sampling_probability;
	double inv = gaussian_inv_sq(inner);
	char ptr[ACCT_ERROR_WHERE_BYTES];

	snprintf(ptr, sizeof(ptr), "%s/event", where);
	if (inv < 0.0 && inner->type == ACCT_EV_ZCDP)
		return acct_error_set(wk->err, ACCT_EUNSUPPORTED, ptr,
				      "a Poisson-sampled zcdp event has no proven RDP bound (what "
				      "subsampling does depends on more than the RDP curve); name the "
				      "mechanism itself (gaussian, discrete_gaussian)");
	if (inv < 0.0)
		return acct_error_set(wk->err, ACCT_EUNSUPPORTED, ptr,
				      "rdp prices Poisson sampling of Gaussian-type events only "
				      "(gaussian, discrete_gaussian and their compositions); "
				      "use pld for a sampled '%s'", acct_event_type_name(inner->type));
	if (inv == 0.0)
		return 0;
	{
		double sigma = 1.0 / sqrt(inv);

		for (size_t i = 0; i < wk->n; i++) {
			double a = wk->orders[i], r, exact, units = 0.0;

			if (q == 1.0) {
				r = exact = acct_mul_up(a, inv) / 2.0;
			} else if (a > SAMPLED_MAX_ORDER) {
				r = exact = INFINITY; /* an upper bound: SAMPLED_MAX_ORDER */
			} else if (is_integer_order(a)) {
				if (work_add(wk, a) < 0)
					return ACCT_EUNSUPPORTED;
				r = exact = log_a_int(q, sigma, (long)a) / (a - 1.0);
			} else {
				if (!wk->w) {
					wk->w = gsl_integration_workspace_alloc(ACCT_INTEGRATION_LIMIT);
					if (!wk->w)
						return acct_error_set(wk->err, ACCT_ENOMEM, where, "out of memory");
				}
				r = rdp_sampled_gaussian_frac(q, sigma, a, wk->w, &exact, &units);
				if (work_add(wk, units) < 0)
					return ACCT_EUNSUPPORTED;
				/* Where the integral fails (a noise multiplier so
				 * small that the integrand has no scale GSL can
				 * resolve), the Gaussian's own a / (2 sigma^2): Renyi
				 * divergence is jointly quasi-convex (van Erven and
				 * Harremoes 2014, Theorem 13), so either direction's
				 * divergence between the mixture (1 - q) N(0, s^2) +
				 * q N(1, s^2) and N(0, s^2) is at most the larger
				 * of its components', 0 and a / (2 s^2). */
				if (isnan(r))
					r = exact = acct_mul_up(a, inv) / 2.0;
			}
			/* The integer closed form and the integral are the exact
			 * divergence; the absolute series is not monotone. */
			add_at_floor(wk, i, scale, r, exact);
		}
	}
	return 0;
}

static int sampled_wor_gaussian(struct rdp_walk *wk, const acct_event *ev, double scale,
				const char *where)
{
	const acct_event *inner = ev->u.sampled_without_replacement.event;
	double q = (double)ev->u.sampled_without_replacement.sample_size /
		   (double)ev->u.sampled_without_replacement.source_dataset_size;
	double inv = gaussian_inv_sq(inner), sigma, amax = 0.0;
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int kmax;

	snprintf(ptr, sizeof(ptr), "%s/event", where);
	if (inv < 0.0)
		return acct_error_set(wk->err, ACCT_EUNSUPPORTED, ptr,
				      "rdp prices sampling without replacement of Gaussian-type "
				      "events only (Wang-Balle-Kasiviswanathan); found '%s'",
				      acct_event_type_name(inner->type));
	if (inv == 0.0)
		return 0;
	sigma = 1.0 / sqrt(inv);
	for (size_t i = 0; i < wk->n; i++)
		amax = fmax(amax, wk->orders[i]);
	if (q < 1.0) {
		kmax = (int)fmin(ceil(amax) + 1.0, WOR_MAX_EXACT + 1);
		if (!wk->wor) {
			wk->wor = malloc(sizeof(*wk->wor));
			if (!wk->wor)
				return acct_error_set(wk->err, ACCT_ENOMEM, where, "out of memory");
		}
		if (work_add(wk, wor_table_work(kmax)) < 0)
			return ACCT_EUNSUPPORTED;
		wor_table_init(wk->wor, sigma, kmax);
	}
	for (size_t i = 0; i < wk->n; i++) {
		double a = wk->orders[i], r;

		if (q < 1.0 && work_add(wk, wor_order_work(a)) < 0)
			return ACCT_EUNSUPPORTED;
		if (q == 1.0) {
			r = acct_mul_up(a, inv) / 2.0;
		} else if (a > SAMPLED_MAX_ORDER) {
			r = INFINITY; /* the O(alpha) sum is beyond any useful order */
		} else if (a == floor(a)) {
			r = wor_log_a_int(wk->wor, q, (long)a) / (a - 1.0);
		} else {
			double fl = floor(a), t = a - fl;
			double x = wor_log_a_int(wk->wor, q, (long)fl);
			double y = wor_log_a_int(wk->wor, q, (long)fl + 1);

			r = ((1.0 - t) * x + t * y) / (a - 1.0);
		}
		/* Never above the unsampled Gaussian's: couple the two
		 * datasets' samples by their indices; each pair of samples is
		 * equal or replace-neighbours, and Renyi divergence is jointly
		 * quasi-convex (van Erven, Harremoes 2014, Theorem 13).  The
		 * bound of Wang et al. is looser than that for samples of
		 * nearly the whole dataset (m = 999 of 1000: 1.86 at order 2
		 * where the whole costs 1).  Past SAMPLED_MAX_ORDER it stays
		 * +infinity, as documented for both samplings. */
		if (isfinite(r))
			r = fmin(r, acct_mul_up(a, inv) / 2.0);
		/* Theorem 27's bound is not shown to grow with the order:
		 * it gives the order search no floor. */
		add_at_floor(wk, i, scale, r, q == 1.0 ? r : 0.0);
	}
	return 0;
}

/* ---- the work of a pricing, counted before it is done ------------------ */

/*
 * The work units of one Poisson-sampled Gaussian at these orders that are
 * known before it is priced: each integer order's sum, and for a fractional
 * order the series' first terms (it runs past the order) and the integral's
 * first evaluations.  Orders above SAMPLED_MAX_ORDER cost nothing.
 */
static double poisson_leaf_work(const double *orders, size_t n)
{
	double u = 0.0;

	for (size_t i = 0; i < n; i++) {
		double a = orders[i];

		if (a > SAMPLED_MAX_ORDER)
			continue;
		if (is_integer_order(a))
			u += a;
		else
			u += RDP_UNITS_PER_SERIES_TERM * (ceil(a) + 1.0) +
			     RDP_UNITS_PER_EVAL * RDP_EVALS_MIN;
	}
	return u;
}

/* The same for sampling without replacement: its table and its sums. */
static double wor_leaf_work(const double *orders, size_t n)
{
	double amax = 0.0, u = 0.0;

	for (size_t i = 0; i < n; i++) {
		amax = fmax(amax, orders[i]);
		u += wor_order_work(orders[i]);
	}
	return u + wor_table_work((int)fmin(ceil(amax) + 1.0, WOR_MAX_EXACT + 1));
}

/* Counts the sampled events that the walk prices by an O(order) sum: those
 * with a sampling ratio below 1 around a Gaussian-type event. */
static void count_sampled(const acct_event *ev, double *n_poisson, double *n_wor)
{
	switch (ev->type) {
	case ACCT_EV_POISSON_SAMPLED:
		if (ev->u.poisson_sampled.sampling_probability < 1.0 &&
		    gaussian_inv_sq(ev->u.poisson_sampled.event) > 0.0)
			*n_poisson += 1.0;
		return;
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
		if (ev->u.sampled_without_replacement.sample_size <
			    ev->u.sampled_without_replacement.source_dataset_size &&
		    gaussian_inv_sq(ev->u.sampled_without_replacement.event) > 0.0)
			*n_wor += 1.0;
		return;
	case ACCT_EV_SELF_COMPOSED:
		count_sampled(ev->u.self_composed.event, n_poisson, n_wor);
		return;
	case ACCT_EV_COMPOSED:
		for (size_t i = 0; i < ev->u.composed.n; i++)
			count_sampled(ev->u.composed.events[i], n_poisson, n_wor);
		return;
	default:
		return;
	}
}

/* Refuses orders at which one sampled event alone costs `u` units, too many. */
static int leaf_too_costly(double u, const char *where, acct_error *err)
{
	return acct_error_set(err, ACCT_EUNSUPPORTED, where,
			      "pricing one sampled Gaussian at these orders needs %.3g units of "
			      "work, more than the %.3g allowed: ask for fewer or lower orders "
			      "(above %g its curve is +infinity, at no cost)", u, DPG_MAX_RDP_WORK,
			      SAMPLED_MAX_ORDER);
}

int acct_rdp_orders_check(const double *orders, size_t n, const char *where, acct_error *err)
{
	double u = fmax(poisson_leaf_work(orders, n), wor_leaf_work(orders, n));

	return u > DPG_MAX_RDP_WORK ? leaf_too_costly(u, where, err) : 0;
}

/*
 * Refuses, before any of it is done, a pricing whose known work (with
 * `done` units already spent by the same search) passes DPG_MAX_RDP_WORK:
 * at `orders_where` when one sampled event alone is too costly at these
 * orders, else at "/event".  Identical sampled events are counted each time
 * they appear (the walk prices each); a self-composed one, once.
 */
static int rdp_work_check(const acct_event *ev, const double *orders, size_t n, double done,
			  const char *orders_where, acct_error *err)
{
	double np = 0.0, nw = 0.0, up = poisson_leaf_work(orders, n);
	double uw = wor_leaf_work(orders, n), u;

	count_sampled(ev, &np, &nw);
	if (np > 0.0 && up > DPG_MAX_RDP_WORK)
		return leaf_too_costly(up, orders_where, err);
	if (nw > 0.0 && uw > DPG_MAX_RDP_WORK)
		return leaf_too_costly(uw, orders_where, err);
	u = np * up + nw * uw;
	if (done + u > DPG_MAX_RDP_WORK)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				      "pricing this event under rdp needs %.3g units of work "
				      "(%.0f sampled events at %zu orders), more than the %.3g "
				      "allowed: compose fewer distinct sampled events (self_composed "
				      "repeats one at no cost), or ask for fewer orders", u, np + nw,
				      n, DPG_MAX_RDP_WORK - fmax(done, 0.0));
	return 0;
}

int acct__rdp_work_check(const acct_event *ev, const double *orders, size_t n,
			 const char *orders_where, acct_error *err)
{
	return rdp_work_check(ev, orders, n, 0.0, orders_where, err);
}

static double exp_mech_rdp(double eps, double a)
{
	/* Cesar, Rogers 2021, Sec. 3: the eps-bounded-range exponential
	 * mechanism has rdp(a) <= xi + a eps^2/8 with the xi below, and eps-DP
	 * bounds every order by eps. */
	double r = eps / expm1(eps);
	double xi = r - 1.0 - log(r) - eps * eps / 8.0;

	/* xi is about eps^4 / 1152, the difference of terms near 1 (r and
	 * log r), so for small eps the rounding of those terms dominates. */
	return pure_dp_rdp(xi + a * eps * eps / 8.0, eps, a, (1.0 + a * eps * eps) * (a - 1.0));
}

static double linear_rdp(double slope, double a)
{
	return acct_mul_up(slope, a);
}

/* Papernot et al. 2018, Theorem 23; no bound at orders >= 1/(2 beta).  Its
 * second term falls with the order near 1; the first, a e^{2 beta} / s^2,
 * is the floor. */
static int walk_pate_gnss(struct rdp_walk *wk, const acct_event *ev, double scale)
{
	for (size_t i = 0; i < wk->n; i++) {
		double a = wk->orders[i], r = INFINITY;

		if (ev->u.pate_gnss.beta == 0.0 || 2.0 * a * ev->u.pate_gnss.beta < 1.0) {
			if (acct_pate_gnss_rdp(ev->u.pate_gnss.beta, ev->u.pate_gnss.sigma, a, &r,
					       NULL) < 0)
				r = INFINITY;
		}
		add_at_floor(wk, i, scale, r,
			     a * exp(2.0 * ev->u.pate_gnss.beta) /
				     (ev->u.pate_gnss.sigma * ev->u.pate_gnss.sigma));
	}
	return 0;
}

/* The discrete Laplace's curve, order by order (dlaplace_rdp). */
static int walk_discrete_laplace(struct rdp_walk *wk, const acct_event *ev, double scale)
{
	for (size_t i = 0; i < wk->n; i++)
		add_at(wk, i, scale,
		       dlaplace_rdp(ev->u.discrete_laplace.noise_parameter,
				    ev->u.discrete_laplace.sensitivity, wk->orders[i]));
	return 0;
}

/* Randomized response's curve (rr_rdp), under replace only. */
static int walk_randomized_response(struct rdp_walk *wk, const acct_event *ev, double scale,
				    const char *where)
{
	if (wk->nb != ACCT_REPLACE)
		return acct_error_set(wk->err, ACCT_EUNSUPPORTED, where,
				      "randomized response is defined under the replace "
				      "relation only");
	for (size_t i = 0; i < wk->n; i++)
		add_at(wk, i, scale,
		       rr_rdp(ev->u.randomized_response.noise_parameter,
			      (double)ev->u.randomized_response.num_buckets, wk->orders[i]));
	return 0;
}

/* An (epsilon, delta) pair: epsilon's curve as a pure-DP release, and its
 * delta kept apart (log_keep) where the caller allows one. */
static int walk_epsilon_delta(struct rdp_walk *wk, const acct_event *ev, double scale,
			      const char *where)
{
	double d = ev->u.epsilon_delta.delta;

	if (d > 0.0) {
		if (!wk->allow_delta)
			return acct_error_set(wk->err, ACCT_EUNSUPPORTED, where,
					      "an (epsilon, delta) event with delta > 0 has no "
					      "RDP bound; price it on a basic ledger");
		wk->log_keep += scale * log1p(-d);
	}
	return add_curve(wk, scale, rr_eps_rdp, ev->u.epsilon_delta.epsilon);
}

/* Composition adds the curves (Mironov 2017, Prop. 1). */
static int walk_composed(struct rdp_walk *wk, const acct_event *ev, double scale,
			 const char *where)
{
	for (size_t i = 0; i < ev->u.composed.n; i++) {
		char key[32];
		int rc;

		snprintf(key, sizeof(key), "events/%zu", i);
		rc = walk_child(wk, ev->u.composed.events[i], scale, where, key);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Adds `scale` times the RDP curve of `ev` to the walk's curve. */
static int rdp_walk(struct rdp_walk *wk, const acct_event *ev, double scale, const char *where)
{
	switch (ev->type) {
	case ACCT_EV_GAUSSIAN:
		return add_curve(wk, scale, linear_rdp,
				 acct_inv_sq_up(ev->u.gaussian.noise_multiplier) / 2.0);
	case ACCT_EV_DISCRETE_GAUSSIAN: {
		double r = acct_div_up(ev->u.discrete_gaussian.sensitivity,
				       ev->u.discrete_gaussian.sigma);

		/* Canonne, Kamath, Steinke 2020, Prop. 5: (D^2/2s^2)-zCDP. */
		return add_curve(wk, scale, linear_rdp, acct_mul_up(r, r) / 2.0);
	}
	case ACCT_EV_ZCDP:
		return add_curve(wk, scale, linear_rdp, ev->u.zcdp.rho);
	case ACCT_EV_GNMAX:
		/* Papernot et al. 2018: sensitivity-2 votes, rdp = a / s^2. */
		return add_curve(wk, scale, linear_rdp, acct_inv_sq_up(ev->u.gnmax.sigma));
	case ACCT_EV_PATE_THRESHOLD:
		return add_curve(wk, scale, linear_rdp,
				 acct_inv_sq_up(ev->u.pate_threshold.sigma) / 2.0);
	case ACCT_EV_PATE_GNSS:
		return walk_pate_gnss(wk, ev, scale);
	case ACCT_EV_LAPLACE:
		return add_curve(wk, scale, laplace_rdp,
				 acct_div_up(1.0, ev->u.laplace.noise_multiplier));
	case ACCT_EV_PERMUTE_AND_FLIP:
		/* McKenna, Sheldon 2020 (Thm 1) prove eps-DP and nothing finer,
		 * so it is priced as any eps-DP mechanism: by the binary
		 * randomized response that dominates every eps-DP pair. */
		return add_curve(wk, scale, rr_eps_rdp, ev->u.permute_and_flip.epsilon);
	case ACCT_EV_EXPONENTIAL_MECHANISM:
		return add_curve(wk, scale, exp_mech_rdp, ev->u.exponential_mechanism.epsilon);
	case ACCT_EV_DISCRETE_LAPLACE:
		return walk_discrete_laplace(wk, ev, scale);
	case ACCT_EV_RANDOMIZED_RESPONSE:
		return walk_randomized_response(wk, ev, scale, where);
	case ACCT_EV_EPSILON_DELTA:
		return walk_epsilon_delta(wk, ev, scale, where);
	case ACCT_EV_POISSON_SAMPLED:
		return sampled_gaussian(wk, ev, scale, where);
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
		return sampled_wor_gaussian(wk, ev, scale, where);
	case ACCT_EV_SELF_COMPOSED:
		return walk_child(wk, ev->u.self_composed.event,
				  acct_mul_up(scale, (double)ev->u.self_composed.count), where,
				  "event");
	case ACCT_EV_COMPOSED:
		return walk_composed(wk, ev, scale, where);
	default:
		return acct_error_set(wk->err, ACCT_EINVAL, where, "unknown event type");
	}
}

/*
 * The RDP curve at `n` orders and, when ret_floor is not NULL, its floor: at
 * each order a lower bound of the curve that is nondecreasing in the order,
 * so that floor(b) <= curve(a) for every order a >= b.
 */
static int rdp_at_floor(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
			double *ret_rdp, double *ret_floor, double *ret_extra_delta,
			const char *where, double *work, acct_error *err)
{
	struct rdp_walk wk;
	double *out = NULL;
	int rc;

	acct_gsl_quiet();
	for (size_t i = 0; i < n; i++)
		if (!(orders[i] > 1.0 && orders[i] <= DPG_MAX_RDP_ORDER))
			return acct_error_set(err, ACCT_EINVAL, "/orders",
					      "orders must be in (1, %g]", DPG_MAX_RDP_ORDER);
	out = calloc(2 * (n ? n : 1), sizeof(double));
	if (!out)
		return acct_error_set(err, ACCT_ENOMEM, where, "out of memory");
	memset(&wk, 0, sizeof(wk));
	wk.nb = nb;
	wk.orders = orders;
	wk.n = n;
	wk.out = out;
	wk.floor = ret_floor ? out + n : NULL;
	wk.allow_delta = ret_extra_delta != NULL;
	wk.work = work;
	wk.root = where;
	wk.err = err;
	rc = rdp_walk(&wk, ev, 1.0, where);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (isnan(out[i]) || out[i] < -1e-12) {
			rc = acct_error_set(err, ACCT_ENUMERIC, where,
					    "RDP at order %g is not a number", orders[i]);
			goto out;
		}
		out[i] = fmax(out[i], 0.0);
	}
	memcpy(ret_rdp, out, n * sizeof(double));
	if (ret_floor)
		for (size_t i = 0; i < n; i++)
			ret_floor[i] = fmin(fmax(wk.floor[i], 0.0), out[i]);
	if (ret_extra_delta)
		*ret_extra_delta = -expm1(wk.log_keep);
	rc = 0;
out:
	if (wk.w)
		gsl_integration_workspace_free(wk.w);
	free(wk.wor);
	free(out);
	return rc;
}

int acct__rdp_at(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
		 double *ret_rdp, double *ret_extra_delta, const char *where, double *work,
		 acct_error *err)
{
	double own = 0.0;

	return rdp_at_floor(ev, nb, orders, n, ret_rdp, NULL, ret_extra_delta, where,
			    work ? work : &own, err);
}

int acct_rdp(const acct_event *ev, acct_neighbor neighbor, const double *orders, size_t n,
	     double *ret_rdp, double *ret_extra_delta, acct_error *err)
{
	int rc = acct_event_validate(ev, neighbor, err);

	if (rc < 0)
		return rc;
	rc = rdp_work_check(ev, orders, n, 0.0, "/orders", err);
	if (rc < 0)
		return rc;
	return acct__rdp_at(ev, neighbor, orders, n, ret_rdp, ret_extra_delta, "/event", NULL,
			    err);
}

/* ---- conversions --------------------------------------------------------- */

/* CKS 2020 Prop. 12: eps = r + log1p(-1/a) - (log delta + log a)/(a - 1);
 * and the KL bound gives eps = 0 when delta^2 > 1 - e^{-r}. */
double acct__rdp_order_epsilon(double a, double r, double delta)
{
	if (r <= 0.0)
		return 0.0;
	if (delta > 0.0 && delta * delta + expm1(-r) > 0.0)
		return 0.0;
	if (!(delta > 0.0) || !isfinite(r))
		return INFINITY;
	if (a <= 1.01)
		return INFINITY;
	return fmax(r + log1p(-1.0 / a) - (log(delta) + log(a)) / (a - 1.0), 0.0);
}

double acct__rdp_order_log_delta(double a, double r, double epsilon)
{
	double ld;

	if (r <= 0.0)
		return -INFINITY;
	if (!isfinite(r))
		return 0.0;
	ld = 0.5 * acct__log1mexp(-r);
	if (a > 1.01)
		ld = fmin(ld, (a - 1.0) * (r - epsilon + log1p(-1.0 / a)) - log(a));
	return ld;
}

double acct_rdp_to_epsilon(const double *orders, const double *rdp, size_t n, double delta,
			   double *ret_order)
{
	return acct__min_over_orders(acct__rdp_order_epsilon, orders, rdp, n, delta, ret_order);
}

double acct_rdp_to_delta(const double *orders, const double *rdp, size_t n, double epsilon,
			 double *ret_order)
{
	double best = acct__min_over_orders(acct__rdp_order_log_delta, orders, rdp, n, epsilon,
					    ret_order);

	return n ? fmin(exp(best), 1.0) : 1.0;
}

/*
 * epsilon under RDP at the given orders: the minimum over all of them of
 * the conversion of the curve.  The curve itself need not grow with the
 * order (the fractional orders of the sampled Gaussian report the absolute
 * series, an upper bound that can exceed the value at a higher order), so
 * the search prunes with the walk's floor instead: a lower bound of the
 * curve that is nondecreasing in the order (the exact divergence where one
 * is computed, nothing where none is).  floor(b) <= rdp(a) for every order
 * a >= b, and the conversion grows with the RDP, so an order whose
 * conversion of the largest floor at or below it already exceeds the best
 * epsilon so far cannot win, and its RDP is not computed.  A few cheap
 * integer orders are computed first as seeds; the rest are visited most
 * promising first.  The result equals the minimum over all the orders.
 */
static const double seed_orders[] = {2, 4, 8, 16, 32, 63};

/* The floors carry rounding and the integration's error (relative 1e-11
 * asked, up to 1e-8 accepted where GSL reports round-off: see
 * acct__log_mixture_moment); pruning uses them lowered by this much. */
#define RDP_FLOOR_SLACK 1e-7

struct order_search {
	const double *orders; /* the orders asked for */
	size_t n;
	double delta;         /* the delta left after the (eps, delta) parts */
	double *done_o;       /* orders computed so far, and their floors */
	double *done_f;
	size_t nd;
	double best, order;   /* the lowest epsilon so far, and its order */
	double *work;         /* RDP work units spent so far */
};

/* The lowest epsilon that order a could still reach: the conversion of the
 * largest floor computed at an order at or below a. */
static double order_lower_bound(const struct order_search *s, double a)
{
	double r = 0.0;

	for (size_t j = 0; j < s->nd; j++)
		if (s->done_o[j] <= a && s->done_f[j] > r)
			r = s->done_f[j];
	return acct__rdp_order_epsilon(a, r * (1.0 - RDP_FLOOR_SLACK), s->delta);
}

static void order_done(struct order_search *s, double a, double floor_)
{
	s->done_o[s->nd] = a;
	s->done_f[s->nd++] = floor_;
}

/* Keeps epsilon e at order a if it beats the best so far (ties go to the
 * lower order). */
static void order_offer(struct order_search *s, double a, double e)
{
	if (e < s->best || (e == s->best && a < s->order)) {
		s->best = e;
		s->order = a;
	}
}

/* Writes to so[] the seed orders among those asked for (or the first one
 * when none is a seed), marks them computed; returns how many. */
static size_t seed_pick(const double *orders, size_t n, double *so, char *computed)
{
	size_t ns = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < sizeof(seed_orders) / sizeof(seed_orders[0]); j++)
			if (orders[i] == seed_orders[j] && !computed[i]) {
				so[ns++] = orders[i];
				computed[i] = 1;
			}
	if (ns == 0 && n > 0) {
		so[ns++] = orders[0];
		computed[0] = 1;
	}
	return ns;
}

/*
 * Computes the seeds' RDP (sr) and floors (sf), sets the delta left after
 * the event's (epsilon, delta) parts, and offers the seeds' epsilons.
 * Refused when those parts spend all of `delta`.
 */
static int seed_search(struct order_search *s, const acct_event *ev, acct_neighbor nb,
		       const double *so, size_t ns, double *sr, double *sf, double delta,
		       acct_error *err)
{
	double extra = 0.0;
	int rc = rdp_at_floor(ev, nb, so, ns, sr, sf, &extra, "/event", s->work, err);

	if (rc < 0)
		return rc;
	/* Remaining delta after the (eps, delta) events' share:
	 * 1 - delta = (1 - eff)(1 - extra). */
	s->delta = -expm1(log1p(-delta) - log1p(-extra));
	if (!(s->delta > 0.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "the event's (epsilon, delta) parts already spend delta %.6g, "
				      "more than the %.6g asked for", extra, delta);
	for (size_t i = 0; i < ns; i++) {
		double e = acct__rdp_order_epsilon(so[i], sr[i], s->delta);

		order_done(s, so[i], sf[i]);
		order_offer(s, so[i], e);
	}
	return 0;
}

/* Writes to idx[] the orders not yet computed, most promising (lowest
 * lower bound, lb[]) first; returns how many. */
static size_t rest_queue(const struct order_search *s, const char *computed, double *lb,
			 size_t *idx)
{
	size_t m = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (computed[i])
			continue;
		lb[i] = order_lower_bound(s, s->orders[i]);
		idx[m++] = i;
	}
	/* insertion sort: n is small */
	for (size_t a = 1; a < m; a++)
		for (size_t b = a; b > 0 && lb[idx[b]] < lb[idx[b - 1]]; b--) {
			size_t t = idx[b];

			idx[b] = idx[b - 1];
			idx[b - 1] = t;
		}
	return m;
}

/* Visits the queued orders, computing the RDP only at those whose lower
 * bound can still beat the best epsilon so far. */
static int rest_search(struct order_search *s, const acct_event *ev, acct_neighbor nb,
		       const size_t *idx, size_t m, acct_error *err)
{
	for (size_t t = 0; t < m; t++) {
		size_t i = idx[t];
		double a = s->orders[i], bound = order_lower_bound(s, a);
		/* Written by rdp_at_floor on success; set so that -O3's
		 * flow analysis, which cannot see that, has no warning. */
		double r = 0.0, f = 0.0, x = 0.0;
		int rc;

		if (bound > s->best || (bound == s->best && a > s->order))
			continue;
		rc = rdp_at_floor(ev, nb, &s->orders[i], 1, &r, &f, &x, "/event", s->work, err);
		if (rc < 0)
			return rc;
		order_done(s, a, f);
		order_offer(s, a, acct__rdp_order_epsilon(a, r, s->delta));
	}
	return 0;
}

int acct__rdp_epsilon(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
		      double delta, double *work, acct_result *ret, acct_error *err)
{
	double own = 0.0;
	struct order_search s = {.orders = orders, .n = n, .best = INFINITY, .order = NAN,
				 .work = work ? work : &own};
	double *so, *sr, *sf, *lb;
	size_t ns, m, *idx = NULL;
	char *computed = NULL;
	int rc;

	if (delta == 0.0)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "an RDP bound converts to no finite epsilon at delta = 0");
	rc = rdp_work_check(ev, orders, n, *s.work, "/orders", err);
	if (rc < 0)
		return rc;
	s.done_o = calloc(6 * (n ? n : 1), sizeof(double));
	idx = calloc(n ? n : 1, sizeof(size_t));
	computed = calloc(n ? n : 1, 1);
	if (!s.done_o || !idx || !computed) {
		rc = acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
		goto out;
	}
	s.done_f = s.done_o + n;
	so = s.done_f + n;
	sr = so + n;
	sf = sr + n;
	lb = sf + n;
	ns = seed_pick(orders, n, so, computed);
	rc = seed_search(&s, ev, nb, so, ns, sr, sf, delta, err);
	if (rc < 0)
		goto out;
	m = rest_queue(&s, computed, lb, idx);
	rc = rest_search(&s, ev, nb, idx, m, err);
	if (rc < 0)
		goto out;
	if (!isfinite(s.best)) {
		rc = acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				    "no finite epsilon under rdp at delta %.6g", delta);
		goto out;
	}
	*ret = (acct_result){.epsilon = s.best, .delta = delta, .order = s.order};
	rc = 0;
out:
	free(s.done_o);
	free(idx);
	free(computed);
	return rc;
}

int acct__rdp_delta(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
		    double epsilon, double *work, acct_result *ret, acct_error *err)
{
	double *rdp, extra = 0.0, order = NAN, d;
	int rc = rdp_work_check(ev, orders, n, work ? *work : 0.0, "/orders", err);

	if (rc < 0)
		return rc;
	rdp = calloc(n ? n : 1, sizeof(double));
	if (!rdp)
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	rc = acct__rdp_at(ev, nb, orders, n, rdp, &extra, "/event", work, err);
	if (rc < 0)
		goto out;
	d = acct_rdp_to_delta(orders, rdp, n, epsilon, &order);
	d = d + extra - d * extra;
	*ret = (acct_result){.epsilon = epsilon, .delta = fmin(d, 1.0), .order = order};
out:
	free(rdp);
	return rc;
}
