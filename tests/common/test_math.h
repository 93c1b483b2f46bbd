/*
 * test_math.h: closed forms that tests in several folders compare the
 * product against, written once so that every folder checks the same
 * formula.
 */
#ifndef TEST_MATH_H
#define TEST_MATH_H

#include <stddef.h>

/*
 * Pr[q >= n/2] (precisely, q >= floor((n + 1) / 2)) for q ~ Binomial(n, p),
 * 0 < p < 1, summed term by term with lgamma: the chance that a majority
 * of n kept labels is right when each is kept with probability p.
 */
double test_binomial_upper_half(int n, double p);

/*
 * k-ary randomized response's Renyi divergence of order a > 1 under the
 * replace relation (Renyi's divergence, D_a(P||Q) = log sum P^a Q^(1-a) /
 * (a - 1), which RDP bounds: Mironov 2017), 0 < p < 1, k >= 2: with
 * b = p/k and t = 1 - p + b the outputs' laws are (t, b, ..., b) and
 * (b, t, b, ..., b), so sum P^a Q^(1-a) = t^a b^(1-a) + b^a t^(1-a) +
 * (k - 2) b, summed relative to its largest term (orders up to 1024).
 */
double test_rr_renyi(double p, double k, double a);

/* RDP r at order a as (epsilon, delta)-DP: Canonne, Kamath, Steinke 2020,
 * Prop. 12 (Balle et al. 2020, Thm. 21),
 * epsilon = r + log((a - 1)/a) - (log delta + log a)/(a - 1). */
double test_rdp_to_epsilon(double a, double r, double delta);

/* How many orders test_rdp_default_orders writes. */
#define TEST_RDP_DEFAULT_ORDERS 156

/* dp_accounting's default orders, as DESIGN.md lists them: 1.1 to 10.9 by
 * tenths, 11 to 63, then 128, 256, 512 and 1024, into o; returns their
 * count, TEST_RDP_DEFAULT_ORDERS. */
size_t test_rdp_default_orders(double *o);

#endif
