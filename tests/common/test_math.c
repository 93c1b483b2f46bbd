/*
 * test_math.c: the closed forms of test_math.h.
 */
#include <math.h>

#include "test_math.h"

double test_binomial_upper_half(int n, double p)
{
	double sum = 0.0;

	/* C(n, k) p^k (1 - p)^(n - k) in logs, so that n in the thousands
	 * neither overflows the binomial nor underflows the powers. */
	for (int k = (n + 1) / 2; k <= n; k++)
		sum += exp(lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) + k * log(p) +
			   (n - k) * log1p(-p));
	return sum;
}

double test_rr_renyi(double p, double k, double a)
{
	double b = p / k, t = 1.0 - p + b;
	/* The terms' logs; t > b and a > 1 make the first the largest. */
	double l0 = a * log(t) + (1.0 - a) * log(b), l1 = a * log(b) + (1.0 - a) * log(t);
	double l2 = log(k - 2.0) + log(b);

	return (l0 + log(1.0 + exp(l1 - l0) + exp(l2 - l0))) / (a - 1.0);
}

double test_rdp_to_epsilon(double a, double r, double delta)
{
	return r + log((a - 1.0) / a) - (log(delta) + log(a)) / (a - 1.0);
}

size_t test_rdp_default_orders(double *o)
{
	size_t n = 0;

	for (int t = 11; t <= 109; t++)
		o[n++] = t / 10.0;
	for (int a = 11; a <= 63; a++)
		o[n++] = a;
	for (int a = 128; a <= 1024; a *= 2)
		o[n++] = a;
	return n;
}
