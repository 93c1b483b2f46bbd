/*
 * acct_numeric.c: numerical helpers with no accountant logic in them:
 * switching GSL's abort-on-error handler off, the log of a binomial
 * coefficient, and the minimum over orders of a Renyi-type conversion.  A
 * leaf: it calls no other accountant file.
 */
#include <math.h>
#include <pthread.h>

#include <gsl/gsl_errno.h>

#include "acct.h"
#include "acct_numeric.h"

static pthread_once_t gsl_quiet_once = PTHREAD_ONCE_INIT;

static void gsl_quiet_now(void)
{
	gsl_set_error_handler_off();
}

/* Once per process: GSL keeps the handler in a global that it reads and
 * writes unlocked, so server threads pricing at once must not all set it. */
void acct_gsl_quiet(void)
{
	pthread_once(&gsl_quiet_once, gsl_quiet_now);
}

double acct_log_binomial(double n, double k)
{
	int sign;

	return lgamma_r(n + 1.0, &sign) - lgamma_r(k + 1.0, &sign) - lgamma_r(n - k + 1.0, &sign);
}

double acct__min_over_orders(double (*f)(double order, double value, double x),
			     const double *orders, const double *values, size_t n, double x,
			     double *ret_order)
{
	double best = INFINITY, order = NAN;

	for (size_t i = 0; i < n; i++) {
		double v = f(orders[i], values[i], x);

		if (v < best) {
			best = v;
			order = orders[i];
		}
	}
	if (ret_order)
		*ret_order = order;
	return best;
}
