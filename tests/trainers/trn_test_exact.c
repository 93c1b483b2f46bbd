/*
 * trn_test_exact.c: double-double sums and products for the exact norm
 * checks of the clipping tests.
 */
#include <math.h>

#include "trn_test_exact.h"

/* Knuth's two-sum: s + e = a + b exactly. */
static trn_test_dd two_sum(double a, double b)
{
	double s = a + b, bb = s - a;

	return (trn_test_dd){s, (a - (s - bb)) + (b - bb)};
}

trn_test_dd trn_test_dd_add(trn_test_dd a, trn_test_dd b)
{
	trn_test_dd s = two_sum(a.hi, b.hi);

	return two_sum(s.hi, s.lo + a.lo + b.lo);
}

trn_test_dd trn_test_dd_mul(trn_test_dd a, trn_test_dd b)
{
	double p = a.hi * b.hi, e = fma(a.hi, b.hi, -p);

	return two_sum(p, e + a.hi * b.lo + a.lo * b.hi);
}

trn_test_dd trn_test_sqsum(const double *v, size_t n, double extra)
{
	trn_test_dd s = {extra, 0.0};

	for (size_t i = 0; i < n; i++) {
		double p = v[i] * v[i];

		s = trn_test_dd_add(s, (trn_test_dd){p, fma(v[i], v[i], -p)});
	}
	return s;
}

double trn_test_excess_over_c2(trn_test_dd a, double C)
{
	double c2 = C * C;

	return (a.hi - c2) + (a.lo - fma(C, C, -c2));
}
