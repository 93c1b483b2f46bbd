/*
 * test_admit.h: a ledger filter fed the same charge again and again, as the
 * filter tests of several files do.
 */
#ifndef TEST_ADMIT_H
#define TEST_ADMIT_H

#include "acct.h"

/*
 * Offers the charge c to filter f `attempts` times, starting from *total:
 * a charge is admitted when the total with it stays within f
 * (acct_filter_within), and refused otherwise.  After each admission the
 * filter's epsilon of the total must be at most eps_cap (the test fails if
 * not).  Returns how many were admitted; *total ends as the total spent.
 */
int test_admit_repeatedly(const acct_filter *f, const acct_cost *c, int attempts, double eps_cap,
			  acct_cost *total);

#endif
