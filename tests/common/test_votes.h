/*
 * test_votes.h: the deterministic vote histograms that the PATE tests
 * (tests/pate/test_pate.c) and the PATE benchmark (bench/pate/bench_pate.c)
 * feed the analysis.  Header-only, so that the benchmarks, which are built
 * without the tests, include it without linking anything of tests/.
 */
#ifndef TEST_VOTES_H
#define TEST_VOTES_H

#include <stddef.h>
#include <stdint.h>

/*
 * A histogram of n votes over m >= 2 classes (votes[0..m-1]): a share
 * `conc` of them on class 0, the rest spread over classes 1..m-1 by a
 * 64-bit LCG (Knuth's MMIX constants) whose state is *state.  Test and
 * benchmark input, not privacy noise.
 */
static inline void test_vote_histogram(double *votes, size_t m, int64_t n, double conc,
				       uint64_t *state)
{
	int64_t top = (int64_t)(conc * (double)n), left = n - top;

	for (size_t i = 0; i < m; i++)
		votes[i] = 0;
	votes[0] = (double)top;
	while (left-- > 0) {
		*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
		votes[1 + (*state >> 33) % (m - 1)] += 1;
	}
}

#endif
