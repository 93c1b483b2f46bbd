/*
 * test_gauss.h: the exact privacy curve of the Gaussian mechanism, computed
 * inside the tests (independently of acct_exact.c) so that accountants can
 * be checked against it.
 */
#ifndef TEST_GAUSS_H
#define TEST_GAUSS_H

/* delta(eps) of the Gaussian mechanism of noise multiplier s (sensitivity
 * 1): Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) (Balle and Wang
 * 2018, Thm. 8). */
double test_gauss_delta(double s, double eps);

/* The least eps with test_gauss_delta(s, eps) <= delta, by bisection on
 * [0, 100]. */
double test_gauss_exact_eps(double s, double delta);

/* test_gauss_exact_eps in long double (erfcl, expl), bisection on
 * [0, 200]: far tails such as delta = 1e-12 after thousands of
 * compositions, where the answer must be trusted to many digits. */
double test_gauss_exact_eps_l(double s, double delta);

/* The least noise multiplier in [0.1, 100] at which the Gaussian is
 * (eps, delta)-DP, by bisection. */
double test_gauss_analytic_sigma(double eps, double delta);

#endif
