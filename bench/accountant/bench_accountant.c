/*
 * bench_accountant.c: epsilon of the 100-epoch DP-SGD event of Abadi et al.
 * (q = 0.01, sigma = 4, 10000 steps, delta = 1e-5) under rdp and pld.
 *
 * Prints the time per call (median of repeated runs), the answers, the PLD
 * answer's distance from the dp_accounting reference (acc-000 of
 * tests/data/reference/accounting.json), and the process's peak resident
 * memory.  Baseline measured in the same run: the full RDP curve at every
 * default order (acct_rdp, fractional orders integrated) converted without
 * pruning.  For orientation, Google's dp_accounting (Python) takes about
 * 18 ms (RDP) and 35 ms (PLD) for this event on this kind of machine.
 *
 * Run: ./build/bench/accountant/bench_accountant
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "acct.h"
#include "bench_common.h"

#define REF_PLD 0.9469993047462426 /* acc-000, dp_accounting PLD */
#define REF_RDP 1.0354900660362436 /* acc-000, dp_accounting RDP */

/* Sorts t; its upper median (t[0] is then the minimum, printed beside
 * it). */
static double median(double *t, int n)
{
	bench_sort(t, (size_t)n);
	return t[n / 2];
}

/* Times `calls` calls of acct_epsilon(ev, 1e-5) under o into t[] (in
 * seconds); the last result goes to r.  Returns 0, or -1 (said on stderr,
 * prefixed by `what`) when a call fails. */
static int time_epsilon(const acct_event *ev, acct_options *o, acct_accountant accountant,
			int calls, double *t, acct_result *r, double *ret_median_ms, const char *what)
{
	acct_error err;

	o->accountant = accountant;
	acct_error_init(&err);
	for (int n = 0; n < calls; n++) {
		double t0 = bench_now_s();

		if (acct_epsilon(ev, 1e-5, o, r, &err) < 0) {
			fprintf(stderr, "%s: %s\n", what, err.text);
			return -1;
		}
		t[n] = bench_now_s() - t0;
	}
	*ret_median_ms = 1e3 * median(t, calls);
	return 0;
}

int main(void)
{
	acct_event *ev;
	acct_options o;
	acct_result r;
	acct_error err;
	double med, t[200], eps_rdp = NAN, eps_pld = NAN, eps_base = NAN;
	struct rusage ru;
	int n;

	ev = acct_event_self_composed(10000, acct_event_poisson_sampled(0.01, acct_event_gaussian(4.0)));
	if (!ev)
		return 1;
	memset(&o, 0, sizeof(o));
	acct_error_init(&err);

	n = 200;
	if (time_epsilon(ev, &o, ACCT_RDP, n, t, &r, &med, "rdp") < 0)
		return 1;
	eps_rdp = r.epsilon;
	printf("rdp      epsilon %.10f (reference %.10f)  %8.3f ms/call (median of %d, min %.3f), order %g\n",
	       eps_rdp, REF_RDP, med, n, 1e3 * t[0], r.order);

	{
		size_t no;
		const double *orders = acct_rdp_default_orders(&no);
		double *curve = malloc(no * sizeof(double)), extra;

		for (n = 0; n < 20; n++) {
			double t0 = bench_now_s();

			if (!curve || acct_rdp(ev, ACCT_ADD_REMOVE, orders, no, curve, &extra, &err) < 0)
				return 1;
			eps_base = acct_rdp_to_epsilon(orders, curve, no, 1e-5, NULL);
			t[n] = bench_now_s() - t0;
		}
		med = 1e3 * median(t, n);
		printf("baseline epsilon %.10f (full curve, %zu orders)  %8.3f ms/call (median of %d, min %.3f)\n",
		       eps_base, no, med, n, 1e3 * t[0]);
		free(curve);
	}

	n = 20;
	if (time_epsilon(ev, &o, ACCT_PLD, n, t, &r, &med, "pld") < 0)
		return 1;
	eps_pld = r.epsilon;
	printf("pld      epsilon %.10f (reference %.10f, %+.3f%%)  %8.3f ms/call (median of %d, min %.3f)\n",
	       eps_pld, REF_PLD, 100.0 * (eps_pld - REF_PLD) / REF_PLD, med, n,
	       1e3 * t[0]);
	getrusage(RUSAGE_SELF, &ru);
	printf("peak resident memory of the process: %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
	acct_event_free(ev);
	return 0;
}
