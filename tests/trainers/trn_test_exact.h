/*
 * trn_test_exact.h: squared norms measured exactly enough to compare a
 * clipped contribution against C to far below one rounding of a double,
 * for the tests of the clipping margin (docs/training.md, "Clipping in
 * floating point").
 */
#ifndef TRN_TEST_EXACT_H
#define TRN_TEST_EXACT_H

#include <stddef.h>

/* A double-double value hi + lo. */
typedef struct trn_test_dd {
	double hi, lo;
} trn_test_dd;

/* sum_i v_i^2 + extra: each square split into its rounded value and error
 * (fma), summed with Knuth's two-sum. */
trn_test_dd trn_test_sqsum(const double *v, size_t n, double extra);

/* a b to double-double accuracy (Dekker's product with fma). */
trn_test_dd trn_test_dd_mul(trn_test_dd a, trn_test_dd b);

/* a + b to double-double accuracy. */
trn_test_dd trn_test_dd_add(trn_test_dd a, trn_test_dd b);

/* a - C^2, rounded once: positive exactly when a exceeds C^2 (up to the
 * double-double error, far below one ulp of C^2). */
double trn_test_excess_over_c2(trn_test_dd a, double C);

#endif
