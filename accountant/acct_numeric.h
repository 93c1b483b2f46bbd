/*
 * acct_numeric.h: numerical helpers shared by the files of accountant/.
 */
#ifndef ACCT_NUMERIC_H
#define ACCT_NUMERIC_H

#include <math.h>
#include <stddef.h>

#include <gsl/gsl_integration.h>

/* log(exp(a) + exp(b)) without overflow; -INFINITY is the log of zero. */
static inline double acct__log_add(double a, double b)
{
	double hi = a > b ? a : b, lo = a > b ? b : a;

	/* NaN goes on, for the callers' checks to see: a comparison with it
	 * is false, and it could otherwise vanish behind an infinity. */
	if (isnan(a) || isnan(b))
		return NAN;
	if (hi == -INFINITY)
		return -INFINITY;
	if (hi == INFINITY)
		return INFINITY;
	return hi + log1p(exp(lo - hi));
}

/* ln(1 - e^x) for x <= 0, accurate at both ends (Maechler 2012): near 0,
 * log1p(-exp(x)) rounds exp(x) to 1 and answers -INFINITY, far below the
 * value (ln(1 - e^-1e-17) = -39.1). */
static inline double acct__log1mexp(double x)
{
	if (x < -0.6931471805599453) /* -ln 2 */
		return log1p(-exp(x));
	if (x < 0)
		return log(-expm1(x));
	if (x == 0)
		return -INFINITY;
	return NAN;
}

/* ln(e^x - 1) for x > 0, without overflow at large x or loss near 0. */
static inline double acct__log_expm1(double x)
{
	return x + acct__log1mexp(-x);
}

/* log(exp(a) - exp(b)) for a >= b; -INFINITY when a == b. */
static inline double acct__log_sub(double a, double b)
{
	if (b == -INFINITY)
		return a;
	if (a <= b)
		return -INFINITY;
	return a + acct__log1mexp(b - a);
}

/*
 * The least f(orders[i], values[i], x) over the n orders, and in *ret_order
 * (when not NULL) the order attaining it, NAN when none is below +inf: the
 * optimisation over orders that every conversion from a Renyi-type curve
 * makes (Mironov 2017, Prop. 3; Abadi et al. 2016, Thm. 2 (2)), each order
 * giving a valid bound.
 */
double acct__min_over_orders(double (*f)(double order, double value, double x),
			     const double *orders, const double *values, size_t n, double x,
			     double *ret_order);

/* Size of the integration workspaces this module allocates. */
#define ACCT_INTEGRATION_LIMIT 512

/*
 * log E_{z~N(0, sigma^2)} [(1 - q + q exp((2z - 1) / (2 sigma^2)))^beta] for
 * beta > 1 or beta < 0 (both make the integrand's excess over its linear
 * term non-negative), by GSL adaptive Gauss-Kronrod integration in log
 * space.  `w` is a caller-owned workspace of ACCT_INTEGRATION_LIMIT
 * intervals.  Returns NAN when the integration fails.
 */
double acct__log_mixture_moment(double q, double sigma, double beta,
				gsl_integration_workspace *w);

#endif
