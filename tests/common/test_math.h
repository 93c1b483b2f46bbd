/*
 * test_math.h: closed forms that tests in several folders compare the
 * product against, written once so that every folder checks the same
 * formula.
 */
#ifndef TEST_MATH_H
#define TEST_MATH_H

/*
 * Pr[q >= n/2] (precisely, q >= floor((n + 1) / 2)) for q ~ Binomial(n, p),
 * 0 < p < 1, summed term by term with lgamma: the chance that a majority
 * of n kept labels is right when each is kept with probability p.
 */
double test_binomial_upper_half(int n, double p);

/*
 * k-ary randomized response's Renyi divergence of order a > 1 under the
 * replace relation (Mironov 2017, Definition 3), 0 < p < 1, k >= 2: with
 * b = p/k and t = 1 - p + b the outputs' laws are (t, b, ..., b) and
 * (b, t, b, ..., b), so sum P^a Q^(1-a) = t^a b^(1-a) + b^a t^(1-a) +
 * (k - 2) b, summed relative to its largest term (orders up to 1024).
 */
double test_rr_renyi(double p, double k, double a);

#endif
