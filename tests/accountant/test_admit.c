/*
 * test_admit.c: the repeated charge of test_admit.h.
 */
#include <criterion/criterion.h>

#include "test_admit.h"

int test_admit_repeatedly(const acct_filter *f, const acct_cost *c, int attempts, double eps_cap,
			  acct_cost *total)
{
	int admitted = 0;

	for (int i = 0; i < attempts; i++) {
		acct_cost next = *total;

		acct_cost_add_up(&next, c);
		if (!acct_filter_within(f, &next))
			continue;
		*total = next;
		admitted++;
		cr_expect(acct_filter_epsilon(f, total) <= eps_cap, "admission %d: epsilon %.17g",
			  admitted, acct_filter_epsilon(f, total));
	}
	return admitted;
}
