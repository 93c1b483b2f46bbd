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

#endif
