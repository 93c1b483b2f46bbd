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

/* Phi(x) - e^eps Phi(y) in long double; erfcl keeps its relative accuracy
 * in the tails, so the difference loses no more than the cancellation. */
static long double gauss_delta_l(long double s, long double eps)
{
	long double a = 1.0L / (2.0L * s) - eps * s, b = -1.0L / (2.0L * s) - eps * s;
	long double r2 = sqrtl(2.0L);

	return 0.5L * erfcl(-a / r2) - expl(eps) * 0.5L * erfcl(-b / r2);
}

double test_gauss_exact_eps_l(double s, double delta)
{
	long double lo = 0.0L, hi = 200.0L;

	for (int i = 0; i < 200; i++) {
		long double mid = 0.5L * (lo + hi);

		if (gauss_delta_l(s, mid) > delta)
			lo = mid;
		else
			hi = mid;
	}
	return (double)hi;
}
