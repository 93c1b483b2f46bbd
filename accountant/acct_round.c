/*
 * acct_round.c: arithmetic rounded toward +infinity (or -infinity), so
 * that a stored privacy cost never understates the exact one.  A leaf:
 * it calls no other accountant file.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "acct.h"

/*
 * fma shows a product's or a quotient's exact rounding error only while
 * that error is representable: for a product, while the exponents of the
 * factors sum to at least emin + p - 1 = -970 (Boldo and Muller 2011).
 * Below this bound the error can fall under the least subnormal and fma
 * rounds it to zero, so a nonzero result there is stepped one ulp outward
 * whether or not it was exact.
 */
#define TINY 0x1p-968

/* A product or quotient r below TINY of factors that are not zero, stepped
 * toward dir (+-INFINITY); one that rounded to zero goes to the nearest
 * double on dir's side of the exact value, whose sign is `negative`. */
static double tiny_step(double r, bool negative, double dir)
{
	if (r != 0.0)
		return nextafter(r, dir);
	if (dir > 0.0)
		return negative ? -0.0 : nextafter(0.0, dir);
	return negative ? nextafter(-0.0, dir) : 0.0;
}

double acct_add_up(double a, double b)
{
	/* Knuth's TwoSum gives the exact rounding error of a + b. */
	double s = a + b;
	double bp = s - a;
	double ap = s - bp;
	double e = (a - ap) + (b - bp);

	if (e > 0.0)
		s = nextafter(s, INFINITY);
	return s;
}

double acct_mul_up(double a, double b)
{
	double p = a * b;

	if (fabs(p) < TINY)
		return a == 0.0 || b == 0.0 ? p : tiny_step(p, signbit(a) != signbit(b), INFINITY);
	/* fma gives the exact error of the product. */
	if (fma(a, b, -p) > 0.0)
		p = nextafter(p, INFINITY);
	return p;
}

double acct_mul_down(double a, double b)
{
	double p = a * b;

	if (fabs(p) < TINY)
		return a == 0.0 || b == 0.0 ? p : tiny_step(p, signbit(a) != signbit(b), -INFINITY);
	if (fma(a, b, -p) < 0.0)
		p = nextafter(p, -INFINITY);
	return p;
}

double acct_inv_sq_up(double s)
{
	return acct_div_up(1.0, acct_mul_down(s, s));
}

double acct_div_up(double a, double b)
{
	double q = a / b;

	if (fabs(q) < TINY || fabs(a) < TINY)
		return a == 0.0 || isinf(b) ? q : tiny_step(q, signbit(a) != signbit(b), INFINITY);
	/* q * b - a, exactly: negative when q fell below a / b (b > 0). */
	if (fma(q, b, -a) < 0.0)
		q = nextafter(q, INFINITY);
	return q;
}

void acct_cost_add_up(acct_cost *a, const acct_cost *b)
{
	unsigned n = a->n > b->n ? a->n : b->n;

	for (unsigned i = 0; i < n; i++) {
		double x = i < a->n ? a->v[i] : 0.0;
		double y = i < b->n ? b->v[i] : 0.0;

		a->v[i] = acct_add_up(x, y);
	}
	a->n = n;
}

/*
 * n successive t = acct_add_up(t, c), exactly, in a step per binade.  Once
 * t is a double in [2^(e-1), 2^e) its ulp u divides it, so while the sum
 * stays below 2^e each step rounds t + c up to t + ceil(c/u) u: k such
 * steps are one exact product and sum.  A step that leaves the binade is
 * taken alone.  c >= 0; a negative or NaN c is added step by step.
 */
static double add_up_times(double t, double c, int64_t n)
{
	while (n > 0) {
		double u, step, room;
		int64_t k;
		int e;

		t = acct_add_up(t, c);
		n--;
		if (n == 0 || c == 0.0 || !isfinite(t))
			return t;
		if (!(c > 0.0))
			continue;
		frexp(t, &e);
		u = fmax(ldexp(1.0, e - DBL_MANT_DIG), DBL_TRUE_MIN);
		/* c > 0 moves t by one ulp at least, even where c / u underflows. */
		step = fmax(ceil(c / u), 1.0) * u;
		room = ldexp(1.0, e) - t;
		/* Both multiples of u below 2^53 u: the quotient's floor is exact. */
		k = (int64_t)fmin(floor((room - u) / step), (double)n);
		if (k > 0) {
			t += (double)k * step;
			n -= k;
		}
	}
	return t;
}

void acct_cost_add_up_times(acct_cost *a, const acct_cost *b, int64_t n)
{
	unsigned m = a->n > b->n ? a->n : b->n;

	for (unsigned i = 0; i < m; i++) {
		double x = i < a->n ? a->v[i] : 0.0;
		double y = i < b->n ? b->v[i] : 0.0;

		a->v[i] = add_up_times(x, y, n);
	}
	a->n = m;
}

void acct_cost_sub_up(acct_cost *a, const acct_cost *b)
{
	for (unsigned i = 0; i < a->n; i++) {
		double y = i < b->n ? b->v[i] : 0.0;
		double d;

		/* An infinite total cannot be taken apart: it stays infinite
		 * (conservative) until nothing it counts is left. */
		if (isinf(a->v[i]))
			continue;
		d = acct_add_up(a->v[i], -y);
		a->v[i] = d > 0.0 ? d : 0.0;
	}
}
