/*
 * test_gauss.c: the exact Gaussian curve for the accountant tests
 * (test_gauss.h).
 */
#include "test_gauss.h"

#include <math.h>

/* Phi, the standard normal CDF. */
static double phi(double x)
{
	return 0.5 * erfc(-x / M_SQRT2);
}

double test_gauss_delta(double s, double eps)
{
	return phi(1.0 / (2.0 * s) - eps * s) - exp(eps) * phi(-1.0 / (2.0 * s) - eps * s);
}

/* The upper end, after 200 halvings, of the interval [lo, hi] on which
 * f(x, fixed), decreasing in x, crosses `target`. */
static double bisect(double (*f)(double x, double fixed), double fixed, double target, double lo,
		     double hi)
{
	for (int i = 0; i < 200; i++) {
		double mid = 0.5 * (lo + hi);

		if (f(mid, fixed) > target)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}

static double delta_at_eps(double eps, double s)
{
	return test_gauss_delta(s, eps);
}

double test_gauss_exact_eps(double s, double delta)
{
	return bisect(delta_at_eps, s, delta, 0.0, 100.0);
}

double test_gauss_analytic_sigma(double eps, double delta)
{
	return bisect(test_gauss_delta, eps, delta, 0.1, 100.0);
}
