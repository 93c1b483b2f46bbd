/*
 * acct_moments.c: the moments accountant of Abadi et al., "Deep learning with
 * differential privacy" (CCS 2016), as published.
 *
 * For the sampled Gaussian mechanism with mu0 = N(0, s^2), mu1 = N(1, s^2)
 * and mu = (1-q) mu0 + q mu1, the log moment at lambda is
 *   alpha(lambda) = log max(E1, E2),
 *   E1 = E_{z~mu0} [(mu0(z)/mu(z))^lambda],  E2 = E_{z~mu} [(mu(z)/mu0(z))^lambda]
 * (Sec. 3.2), both integrated numerically by GSL (acct__log_mixture_moment:
 * E2 = E_{mu0}[(mu/mu0)^(lambda+1)], E1 = E_{mu0}[(mu/mu0)^(-lambda)], each
 * integrated as its non-negative excess over the linear term, in log space,
 * so neither large lambda nor small q overflows or cancels).  Log moments
 * add under composition (Theorem 2.1) and the tail bound gives
 *   delta = min_lambda exp(alpha(lambda) - lambda eps),  lambda = 1..32.
 * Without sampling (q = 1) E1 = E2 = exp(lambda (lambda+1) / (2 s^2)).
 * Other mechanisms are not part of the published accountant and are
 * refused (use rdp).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_integration.h>

#include "acct.h"
#include "acct_internal.h"
#include "acct_numeric.h"

#define MOMENTS_MAX_LAMBDA 32

struct moments_walk {
	double a[MOMENTS_MAX_LAMBDA + 1];
	gsl_integration_workspace *w;
	acct_error *err;
};

static int moments_walk(struct moments_walk *mw, const acct_event *ev, double scale,
			const char *where)
{
	char ptr[ACCT_ERROR_WHERE_BYTES];

	switch (ev->type) {
	case ACCT_EV_GAUSSIAN: {
		double s = ev->u.gaussian.noise_multiplier;

		for (int l = 1; l <= MOMENTS_MAX_LAMBDA; l++)
			mw->a[l] += scale * (double)l * (double)(l + 1) / (2.0 * s * s);
		return 0;
	}
	case ACCT_EV_POISSON_SAMPLED: {
		const acct_event *in = ev->u.poisson_sampled.event;
		double q = ev->u.poisson_sampled.sampling_probability, s;

		snprintf(ptr, sizeof(ptr), "%s/event", where);
		if (in->type != ACCT_EV_GAUSSIAN)
			return acct_error_set(mw->err, ACCT_EUNSUPPORTED, ptr,
					      "the moments accountant (Abadi et al. 2016) prices the "
					      "sampled Gaussian mechanism only; found a sampled '%s' "
					      "(use rdp or pld)", acct_event_type_name(in->type));
		s = in->u.gaussian.noise_multiplier;
		if (q == 1.0)
			return moments_walk(mw, in, scale, ptr);
		for (int l = 1; l <= MOMENTS_MAX_LAMBDA; l++) {
			double e2 = acct__log_mixture_moment(q, s, (double)(l + 1), mw->w);
			double e1 = acct__log_mixture_moment(q, s, -(double)l, mw->w);

			/* Where the integral fails (a noise multiplier too
			 * small for GSL to resolve the integrand), the
			 * unsampled Gaussian's l (l + 1) / (2 s^2) bounds both
			 * directions: Renyi divergence is jointly quasi-convex
			 * (van Erven and Harremoes 2014, Theorem 13), and the
			 * log moment is l times the divergence of order l + 1. */
			if (isnan(e1) || isnan(e2))
				e1 = e2 = (double)l * (double)(l + 1) / (2.0 * s * s);
			mw->a[l] += scale * fmax(fmax(e1, e2), 0.0);
		}
		return 0;
	}
	case ACCT_EV_SELF_COMPOSED:
		snprintf(ptr, sizeof(ptr), "%s/event", where);
		return moments_walk(mw, ev->u.self_composed.event,
				    scale * (double)ev->u.self_composed.count, ptr);
	case ACCT_EV_COMPOSED:
		for (size_t i = 0; i < ev->u.composed.n; i++) {
			int rc;

			snprintf(ptr, sizeof(ptr), "%s/events/%zu", where, i);
			rc = moments_walk(mw, ev->u.composed.events[i], scale, ptr);
			if (rc < 0)
				return rc;
		}
		return 0;
	default:
		return acct_error_set(mw->err, ACCT_EUNSUPPORTED, where,
				      "the moments accountant (Abadi et al. 2016) prices Gaussian "
				      "and sampled Gaussian events only; found '%s' (use rdp)",
				      acct_event_type_name(ev->type));
	}
}

static int moments_curve(const acct_event *ev, struct moments_walk *mw, acct_error *err)
{
	int rc;

	acct_gsl_quiet();
	memset(mw, 0, sizeof(*mw));
	mw->err = err;
	mw->w = gsl_integration_workspace_alloc(ACCT_INTEGRATION_LIMIT);
	if (!mw->w)
		return acct_error_set(err, ACCT_ENOMEM, "/event", "out of memory");
	rc = moments_walk(mw, ev, 1.0, "/event");
	gsl_integration_workspace_free(mw->w);
	mw->w = NULL;
	return rc;
}

/* The tail bound at one lambda (Abadi et al. 2016, Thm. 2 (2)): epsilon at
 * `delta`, (alpha(lambda) + ln 1/delta) / lambda, and log delta at `eps`,
 * alpha(lambda) - lambda eps. */
static double epsilon_at(double lambda, double alpha, double delta)
{
	return (alpha - log(delta)) / lambda;
}

static double log_delta_at(double lambda, double alpha, double eps)
{
	return alpha - lambda * eps;
}

/* The log moments of `ev`, then the least f(lambda, alpha(lambda), x) over
 * lambda = 1..MOMENTS_MAX_LAMBDA and the lambda attaining it. */
static int moments_best(const acct_event *ev, double (*f)(double, double, double), double x,
			double *ret_best, double *ret_order, acct_error *err)
{
	struct moments_walk mw;
	double lambdas[MOMENTS_MAX_LAMBDA];
	int rc = moments_curve(ev, &mw, err);

	if (rc < 0)
		return rc;
	for (int l = 1; l <= MOMENTS_MAX_LAMBDA; l++)
		lambdas[l - 1] = l;
	*ret_best = acct__min_over_orders(f, lambdas, mw.a + 1, MOMENTS_MAX_LAMBDA, x, ret_order);
	return 0;
}

int acct__moments_epsilon(const acct_event *ev, acct_neighbor nb, double delta,
			  acct_result *ret, acct_error *err)
{
	double best = INFINITY, order = NAN;
	int rc = moments_best(ev, epsilon_at, delta, &best, &order, err);

	(void)nb;
	if (rc < 0)
		return rc;
	if (!(delta > 0.0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/delta",
				      "the moments accountant needs delta > 0");
	if (!isfinite(best))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/event",
				      "the log moments are unbounded");
	*ret = (acct_result){.epsilon = fmax(best, 0.0), .delta = delta, .order = order};
	return 0;
}

int acct__moments_delta(const acct_event *ev, acct_neighbor nb, double epsilon,
			acct_result *ret, acct_error *err)
{
	double best = INFINITY, order = NAN;
	int rc = moments_best(ev, log_delta_at, epsilon, &best, &order, err);

	(void)nb;
	if (rc < 0)
		return rc;
	*ret = (acct_result){.epsilon = epsilon, .delta = fmin(exp(best), 1.0), .order = order};
	return 0;
}
