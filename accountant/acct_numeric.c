/*
 * acct_numeric.c: numerical helpers with no accountant logic in them:
 * switching GSL's abort-on-error handler off, and the log of a binomial
 * coefficient.  A leaf: it calls no other accountant file.
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
