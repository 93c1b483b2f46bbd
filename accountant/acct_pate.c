/*
 * acct_pate.c: data-dependent privacy analysis of PATE's aggregators.
 *
 * Papernot, Song, Mironov, Raghunathan, Talwar and Erlingsson, "Scalable
 * private learning with PATE", ICLR 2018 (arXiv:1802.08908).  Equation and
 * proposition numbers below are those of the arXiv version with appendices.
 *
 * Everything is computed in log space: q for a confident ensemble is far
 * below the smallest double (ln q of -4000 is common), so probabilities are
 * carried as logarithms and tail probabilities come from GSL's log erfc.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>
#include <gsl/gsl_sf_erf.h>

#include "acct.h"
#include "acct_numeric.h"

/* One distinct vote count of a histogram and how many classes have it. */
struct vote_group {
	int64_t value;
	int64_t count;
};

struct acct_pate_workspace {
	size_t max_classes;
	int64_t *sorted;            /* scratch: the histogram, sorted */
	struct vote_group *groups;  /* the histogram minus one top vote, ascending */
	size_t n_groups;
	int64_t max_teachers;
	double *lsf_by_margin;      /* ln Pr[N(0, 2 sigma^2) >= g], g = 0 .. max_teachers; NAN = not yet */
	double *ls;                 /* local sensitivity by distance, copied out on success */
	gsl_root_fsolver *solver;
};

/* The fixed parameters of one smooth-sensitivity analysis. */
struct ss_params {
	double sigma;
	double order;
	size_t num_classes;
	double logq0;
	double logq1;
};

/* Brent's method stops when the bracket is this narrow (SciPy's brentq
 * defaults, which the reference analysis uses). */
#define LOGQ0_XTOL 2e-12
#define LOGQ0_RTOL (4 * DBL_EPSILON)
#define LOGQ0_MAX_ITER 200
/* How many times the lower end of q0's bracket may be pushed down by 1.5x. */
#define LOGQ0_MAX_WIDEN 200
/* Newton steps for the inverse of ln erfc. */
#define ERFCINV_MAX_ITER 100

/* ------------------------------------------------------------------------ */
/* Log-space helpers                                                         */
/* ------------------------------------------------------------------------ */

/* ln erfc(x) through GSL (asymptotic expansion for large x, no underflow). */
static int log_erfc(double x, double *ret)
{
	gsl_sf_result r;
	int status = gsl_sf_log_erfc_e(x, &r);

	if (status != GSL_SUCCESS || isnan(r.val))
		return ACCT_ENUMERIC;
	*ret = r.val;
	return 0;
}

/* ln Pr[N(0, scale^2) >= x] = ln(erfc(x / (scale sqrt 2)) / 2). */
static int log_normal_sf(double x, double scale, double *ret)
{
	double l;
	int rc = log_erfc(x / (scale * M_SQRT2), &l);

	if (rc < 0)
		return rc;
	*ret = l - M_LN2;
	return 0;
}

/*
 * The z >= 0 with ln erfc(z) = logy, for logy <= 0 (erfc^-1 of e^logy, also
 * where e^logy underflows).  Starts from GSL's Gaussian quantile or, deep in
 * the tail, from erfc(z) ~ e^{-z^2} / (z sqrt pi), then polishes by Newton's
 * method on the concave ln erfc.
 */
static int log_erfc_inv(double logy, double *ret)
{
	double z, lz;

	if (logy > -700) {
		z = gsl_cdf_ugaussian_Qinv(0.5 * exp(logy)) / M_SQRT2;
	} else {
		double t = -logy;

		z = sqrt(t - 0.5 * log(M_PI * t));
	}
	if (!isfinite(z))
		return ACCT_ENUMERIC;
	for (int i = 0; i < ERFCINV_MAX_ITER; i++) {
		double slope, dz;
		int rc = log_erfc(z, &lz);

		if (rc < 0)
			return rc;
		/* d/dz ln erfc(z) = -(2 / sqrt pi) e^{-z^2} / erfc(z) */
		slope = -M_2_SQRTPI * exp(-z * z - lz);
		if (!(slope < 0))
			return ACCT_ENUMERIC;
		dz = (lz - logy) / slope;
		z -= dz;
		if (fabs(dz) <= 4 * DBL_EPSILON * fmax(1.0, fabs(z)))
			break;
	}
	if (!isfinite(z))
		return ACCT_ENUMERIC;
	*ret = z;
	return 0;
}

static int check_orders(const double *orders, size_t n, acct_error *err)
{
	if (!orders || n == 0)
		return acct_error_set(err, ACCT_EINVAL, "/orders", "at least one order is required");
	for (size_t i = 0; i < n; i++) {
		char where[32];

		snprintf(where, sizeof(where), "/orders/%zu", i);
		if (!(orders[i] > 1) || !isfinite(orders[i]))
			return acct_error_set(err, ACCT_EINVAL, where, "order %zu must be a finite number above 1", i);
	}
	return 0;
}

static int check_sigma(double sigma, const char *where, acct_error *err)
{
	if (!(sigma > 0) || !isfinite(sigma))
		return acct_error_set(err, ACCT_EINVAL, where, "sigma must be a finite number above 0");
	return 0;
}

static int check_histogram(const double *votes, size_t num_classes, acct_error *err)
{
	if (!votes || num_classes < 2)
		return acct_error_set(err, ACCT_EINVAL, "/votes", "a vote histogram needs at least 2 classes");
	for (size_t i = 0; i < num_classes; i++) {
		char where[32];

		snprintf(where, sizeof(where), "/votes/%zu", i);
		if (!isfinite(votes[i]))
			return acct_error_set(err, ACCT_EINVAL, where, "vote %zu is not finite", i);
	}
	return 0;
}

/* Writes a vector of results, refusing any that is not finite (sigma so
 * small that lambda / sigma^2 overflows). */
static int copy_finite(const double *v, size_t n, double *ret, acct_error *err)
{
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(v[i]))
			return acct_error_set(err, ACCT_EUNSUPPORTED, "/sigma",
					      "the RDP is not finite at this sigma");
	}
	memcpy(ret, v, n * sizeof(*ret));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* GNMax: Proposition 7, Proposition 8, Theorem 6                            */
/* ------------------------------------------------------------------------ */

int acct_pate_gnmax_logq(const double *votes, size_t num_classes, double sigma,
			 double *ret_logq, acct_error *err)
{
	size_t top = 0, second;
	double tmax, t, sum = 0;
	int rc;

	if ((rc = check_histogram(votes, num_classes, err)) < 0 ||
	    (rc = check_sigma(sigma, "/sigma", err)) < 0)
		return rc;
	for (size_t i = 1; i < num_classes; i++) {
		if (votes[i] > votes[top])
			top = i;
	}
	second = top == 0 ? 1 : 0;
	for (size_t i = 0; i < num_classes; i++) {
		if (i != top && votes[i] > votes[second])
			second = i;
	}
	/*
	 * Pr[n_i + N(0, s^2) >= n_i* + N(0, s^2)] = Pr[N(0, 2 s^2) >= n_i* - n_i],
	 * summed by log-sum-exp around the largest term, the runner-up's.
	 */
	if ((rc = log_normal_sf(votes[top] - votes[second], M_SQRT2 * sigma, &tmax)) < 0)
		return acct_error_set(err, rc, "/votes", "log erfc failed");
	for (size_t i = 0; i < num_classes; i++) {
		if (i == top)
			continue;
		if ((rc = log_normal_sf(votes[top] - votes[i], M_SQRT2 * sigma, &t)) < 0)
			return acct_error_set(err, rc, "/votes", "log erfc failed");
		sum += exp(t - tmax);
	}
	/* The union bound can exceed 1; q <= 1 - 1/m holds for any noise. */
	*ret_logq = fmin(tmax + log(sum), log1p(-1.0 / (double)num_classes));
	return 0;
}

int acct_pate_gnmax_rdp_data_independent(double sigma, const double *orders, size_t n,
					 double *ret_rdp, acct_error *err)
{
	double v[DPG_MAX_ORDERS];
	int rc;

	if ((rc = check_sigma(sigma, "/sigma", err)) < 0 || (rc = check_orders(orders, n, err)) < 0)
		return rc;
	if (n > DPG_MAX_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/orders", "at most %d orders", DPG_MAX_ORDERS);
	for (size_t i = 0; i < n; i++)
		v[i] = orders[i] / (sigma * sigma);
	return copy_finite(v, n, ret_rdp, err);
}

/*
 * Theorem 6 for a Gaussian noisy max whose neighbouring inputs shift the
 * winning margin by at most 2 (GNMax at noise sigma; the threshold check at
 * sqrt(2) sigma).  With mu_2 = sigma sqrt(ln 1/q), mu_1 = mu_2 + 1
 * (Proposition 10), eps_i = mu_i / sigma^2 (the RDP of the Gaussian at
 * order mu_i), the bound at order lambda < mu_1 is
 *   (1 / (lambda - 1)) ln((1 - q) A^{lambda - 1} + q B^{lambda - 1}),
 *   A = (1 - q) / (1 - (q e^{eps_2})^{(mu_2 - 1) / mu_2}),
 *   B = e^{eps_1} / q^{1 / (mu_1 - 1)},
 * valid when q <= e^{(mu_2 - 1) eps_2} / ((mu_1 / (mu_1 - 1)) (mu_2 / (mu_2
 * - 1)))^{mu_2} (Lemma 9: the bound increases in q up to there) and
 * q < e^{-eps_2} (A > 0).  Elsewhere lambda / sigma^2.
 */
static void rdp_theorem6(double logq, double sigma, const double *orders, size_t n, double *ret)
{
	double var = sigma * sigma, mu2, mu1, eps1, eps2, log1q;
	bool any = false;

	for (size_t i = 0; i < n; i++)
		ret[i] = orders[i] / var;
	if (logq == -INFINITY) {
		/* The output is fixed: 0-DP at every order. */
		for (size_t i = 0; i < n; i++)
			ret[i] = 0;
		return;
	}
	mu2 = sqrt(var * -logq);
	mu1 = mu2 + 1;
	eps1 = mu1 / var;
	eps2 = mu2 / var;
	for (size_t i = 0; i < n; i++)
		any = any || (mu1 > orders[i] && mu2 > 1);
	if (!any)
		return;
	if (!(logq <= (mu2 - 1) * eps2 - mu2 * (log1p(1 / (mu1 - 1)) + log1p(1 / (mu2 - 1)))) ||
	    !(-logq > eps2))
		return;
	log1q = acct__log1mexp(logq);
	for (size_t i = 0; i < n; i++) {
		double lam = orders[i], log_a, log_b, log_s;

		if (!(mu1 > lam))
			continue;
		log_a = (lam - 1) * (log1q - acct__log1mexp((logq + eps2) * (1 - 1 / mu2)));
		log_b = (lam - 1) * (eps1 - logq / (mu1 - 1));
		log_s = acct__log_add(log1q + log_a, logq + log_b);
		ret[i] = fmax(0.0, fmin(ret[i], log_s / (lam - 1)));
	}
}

static int check_logq(double logq, const char *where, acct_error *err)
{
	if (isnan(logq) || logq > 0)
		return acct_error_set(err, ACCT_EINVAL, where, "a log-probability must be <= 0");
	return 0;
}

int acct_pate_gnmax_rdp(double logq, double sigma, const double *orders, size_t n,
			double *ret_rdp, acct_error *err)
{
	double v[DPG_MAX_ORDERS];
	int rc;

	if ((rc = check_logq(logq, "/logq", err)) < 0 || (rc = check_sigma(sigma, "/sigma", err)) < 0 ||
	    (rc = check_orders(orders, n, err)) < 0)
		return rc;
	if (n > DPG_MAX_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/orders", "at most %d orders", DPG_MAX_ORDERS);
	rdp_theorem6(logq, sigma, orders, n, v);
	return copy_finite(v, n, ret_rdp, err);
}

/* ------------------------------------------------------------------------ */
/* Confident-GNMax threshold check                                           */
/* ------------------------------------------------------------------------ */

int acct_pate_threshold_logpr(const double *votes, size_t num_classes, double threshold,
			      double sigma, double *ret_logpr, acct_error *err)
{
	double top, l, x;
	int rc;

	if ((rc = check_histogram(votes, num_classes, err)) < 0 ||
	    (rc = check_sigma(sigma, "/threshold_sigma", err)) < 0)
		return rc;
	if (!isfinite(threshold))
		return acct_error_set(err, ACCT_EINVAL, "/threshold", "the threshold must be finite");
	top = votes[0];
	for (size_t i = 1; i < num_classes; i++)
		top = fmax(top, votes[i]);
	/* As the reference analysis does, the maximum is rounded so that the
	 * check's sensitivity analysis sees integer vote counts. */
	x = threshold - round(top);
	/* Below the maximum, Pr[answered] = 1 - Pr[N(0, sigma^2) > -x], taken
	 * from that smaller tail: as 1 - 1e-17 it would round to 1, its log to
	 * 0, and the check's RDP, which Theorem 6 reads from the less likely
	 * outcome's probability (acct_pate_threshold_rdp), to 0 where it is
	 * 3.75 at order 8 (votes 100 and 0, threshold 91.5, sigma 1). */
	rc = log_normal_sf(x < 0 ? -x : x, sigma, &l);
	if (rc < 0)
		return acct_error_set(err, rc, "/threshold", "log erfc failed");
	if (x < 0)
		l = acct__log1mexp(l);
	*ret_logpr = fmin(l, 0.0);
	return 0;
}

int acct_pate_threshold_rdp(double logpr, double sigma, const double *orders, size_t n,
			    double *ret_rdp, acct_error *err)
{
	double v[DPG_MAX_ORDERS];
	int rc;

	if ((rc = check_logq(logpr, "/logpr_answered", err)) < 0 ||
	    (rc = check_sigma(sigma, "/threshold_sigma", err)) < 0 ||
	    (rc = check_orders(orders, n, err)) < 0)
		return rc;
	if (n > DPG_MAX_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/orders", "at most %d orders", DPG_MAX_ORDERS);
	/* The check's two outcomes are symmetric: the less likely one plays q.
	 * Max votes have sensitivity 1, half GNMax's margin shift of 2, which
	 * Theorem 6 at noise sqrt(2) sigma accounts for. */
	rdp_theorem6(fmin(logpr, acct__log1mexp(logpr)), M_SQRT2 * sigma, orders, n, v);
	return copy_finite(v, n, ret_rdp, err);
}

int acct_pate_threshold_rdp_data_independent(double sigma, const double *orders, size_t n,
					     double *ret_rdp, acct_error *err)
{
	return acct_pate_gnmax_rdp_data_independent(M_SQRT2 * sigma, orders, n, ret_rdp, err);
}

/* ------------------------------------------------------------------------ */
/* Smooth sensitivity of the data-dependent RDP (Appendix B.4-B.5)          */
/* ------------------------------------------------------------------------ */

acct_pate_workspace *acct_pate_workspace_new(size_t max_classes, int64_t max_teachers)
{
	acct_pate_workspace *ws;

	if (max_classes < 2 || max_classes > DPG_MAX_VOTE_CLASSES || max_teachers < 1 ||
	    max_teachers > DPG_MAX_TEACHERS)
		return NULL;
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->max_classes = max_classes;
	ws->max_teachers = max_teachers;
	ws->sorted = malloc(max_classes * sizeof(*ws->sorted));
	ws->groups = malloc(max_classes * sizeof(*ws->groups));
	ws->lsf_by_margin = malloc(((size_t)max_teachers + 1) * sizeof(*ws->lsf_by_margin));
	ws->ls = malloc((size_t)max_teachers * sizeof(*ws->ls));
	ws->solver = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
	if (!ws->sorted || !ws->groups || !ws->lsf_by_margin || !ws->ls || !ws->solver) {
		acct_pate_workspace_free(ws);
		return NULL;
	}
	return ws;
}

void acct_pate_workspace_free(acct_pate_workspace *ws)
{
	if (!ws)
		return;
	free(ws->sorted);
	free(ws->groups);
	free(ws->lsf_by_margin);
	free(ws->ls);
	if (ws->solver)
		gsl_root_fsolver_free(ws->solver);
	free(ws);
}

/* Theorem 6's bound at one order, without the validity checks (the caller
 * keeps logq below q0, where they hold). */
static double theorem6_at(double sigma, double logq, double order)
{
	double var = sigma * sigma, mu2 = sigma * sqrt(-logq), mu1 = mu2 + 1;
	double eps1 = mu1 / var, eps2 = mu2 / var, log1q, log_a, log_b;

	if (logq == -INFINITY)
		return 0;
	log1q = acct__log1mexp(logq);
	log_a = (order - 1) * (log1q - acct__log1mexp((logq + eps2) * (1 - 1 / mu2)));
	log_b = (order - 1) * (eps1 - logq / (mu1 - 1));
	return acct__log_add(log1q + log_a, logq + log_b) / (order - 1);
}

/* Theorem 6's conditions at logq (mu_1 >= lambda, Lemma 9's range). */
static bool theorem6_applies(double sigma, double logq, double order)
{
	double mu2 = sigma * sqrt(-logq), mu1 = mu2 + 1, eps2 = mu2 / (sigma * sigma);

	if (!(mu1 >= order) || !(mu2 > 1))
		return false;
	/* log1p, not the log of the product: at large sigma the product is
	 * 1 + 2/mu_2 and mu_2 times its rounded log would swamp the margin. */
	return logq <= (mu2 - 1) * eps2 - mu2 * (log1p(1 / (mu1 - 1)) + log1p(1 / (mu2 - 1)));
}

static double dep_minus_indep(double logq, void *p)
{
	const struct ss_params *s = p;

	return theorem6_at(s->sigma, logq, s->order) - s->order / (s->sigma * s->sigma);
}

int acct_pate_gnmax_logq0(acct_pate_workspace *ws, double sigma, double order,
			  double *ret_logq0, acct_error *err)
{
	struct ss_params s = {.sigma = sigma, .order = order};
	gsl_function fn = {.function = dep_minus_indep, .params = &s};
	double ub, lb, f, root = NAN;
	int rc, status = GSL_CONTINUE;

	if (!ws)
		return acct_error_set(err, ACCT_EINVAL, "", "no workspace");
	if ((rc = check_sigma(sigma, "/sigma", err)) < 0)
		return rc;
	if (!(order > 1) || !isfinite(order))
		return acct_error_set(err, ACCT_EINVAL, "/order", "the order must be a finite number above 1");
	/* Natural upper bounds on ln q0: Theorem 6 needs mu_1 >= lambda and
	 * mu_2 > 1; (1 + 1/sigma)^2 and 1/sigma^2 keep mu_2 >= sigma + 1. */
	ub = fmin(fmin(-(1 + 1 / sigma) * (1 + 1 / sigma), -((order - 0.99) / sigma) * ((order - 0.99) / sigma)),
		  -1 / (sigma * sigma));
	if (!theorem6_applies(sigma, ub, order))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/order",
				      "Theorem 6 does not apply at sigma %g and order %g", sigma, order);
	f = dep_minus_indep(ub, &s);
	if (isnan(f))
		return acct_error_set(err, ACCT_ENUMERIC, "/order", "Theorem 6's bound is not a number");
	if (f < 0) {
		*ret_logq0 = ub;
		return 0;
	}
	lb = 2 * ub;
	for (int i = 0; (f = dep_minus_indep(lb, &s)) > 0; i++) {
		if (i >= LOGQ0_MAX_WIDEN || !isfinite(lb))
			return acct_error_set(err, ACCT_EUNSUPPORTED, "/order",
					      "no q where the data-dependent bound wins at sigma %g and order %g",
					      sigma, order);
		lb *= 1.5;
	}
	if (isnan(f))
		return acct_error_set(err, ACCT_ENUMERIC, "/order", "Theorem 6's bound is not a number");
	if (f == 0) {
		root = lb;
	} else {
		if (gsl_root_fsolver_set(ws->solver, &fn, lb, ub) != GSL_SUCCESS)
			return acct_error_set(err, ACCT_ENUMERIC, "/order", "cannot bracket q0");
		for (int i = 0; i < LOGQ0_MAX_ITER && status == GSL_CONTINUE; i++) {
			if (gsl_root_fsolver_iterate(ws->solver) != GSL_SUCCESS)
				return acct_error_set(err, ACCT_ENUMERIC, "/order", "root finding for q0 failed");
			status = gsl_root_test_interval(gsl_root_fsolver_x_lower(ws->solver),
							gsl_root_fsolver_x_upper(ws->solver),
							LOGQ0_XTOL, LOGQ0_RTOL);
		}
		if (status != GSL_SUCCESS)
			return acct_error_set(err, ACCT_ENUMERIC, "/order", "root finding for q0 did not converge");
		root = gsl_root_fsolver_root(ws->solver);
	}
	if (!theorem6_applies(sigma, root, order))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/order",
				      "Theorem 6 does not apply at q0 for sigma %g and order %g", sigma, order);
	*ret_logq0 = root;
	return 0;
}

/*
 * The bounds on q at a neighbouring histogram (Appendix B.4.1): one teacher
 * changing its vote moves every margin by at most 2 in units of votes, i.e.
 * by 1/sigma in erfc's argument, so with m classes and z = erfc^-1(2q/(m-1)),
 *   B_l(q) = (m-1)/2 erfc(z + 1/sigma),  B_u(q) = min(1, (m-1)/2 erfc(z - 1/sigma)).
 * Both in log space.
 */
static int log_q_bounds(double logq, double sigma, size_t m, double *ret_lo, double *ret_hi)
{
	double lc = log(0.5 * (double)(m - 1)), z, lo, hi;
	int rc;

	if ((rc = log_erfc_inv(logq - lc, &z)) < 0 || (rc = log_erfc(z + 1 / sigma, &lo)) < 0 ||
	    (rc = log_erfc(z - 1 / sigma, &hi)) < 0)
		return rc;
	*ret_lo = fmin(lc + lo, 0.0);
	*ret_hi = fmin(lc + hi, 0.0);
	return 0;
}

/* The released RDP: lambda / sigma^2 from q0 upwards, Theorem 6 below. */
static double rdp_ss_at(const struct ss_params *s, double logq)
{
	if (logq >= s->logq0)
		return s->order / (s->sigma * s->sigma);
	return theorem6_at(s->sigma, logq, s->order);
}

/*
 * Algorithm 3 (Proposition 13): local sensitivity of rdp_ss_at at q, the
 * larger of beta(B_u(q)) - beta(q) and beta(q) - beta(B_l(q)); inside
 * [q1, q0] q is replaced by q1, where the difference peaks.
 */
static int local_sensitivity_at(const struct ss_params *s, double logq, double *ret)
{
	double b, lo, hi;
	int rc;

	if (s->logq1 <= logq && logq <= s->logq0)
		logq = s->logq1;
	if ((rc = log_q_bounds(logq, s->sigma, s->num_classes, &lo, &hi)) < 0)
		return rc;
	b = rdp_ss_at(s, logq);
	*ret = fmax(rdp_ss_at(s, hi) - b, b - rdp_ss_at(s, lo));
	if (isnan(*ret))
		return ACCT_ENUMERIC;
	return 0;
}

int acct_pate_gnmax_rdp_ss(acct_pate_workspace *ws, double logq, double sigma, double order,
			   double *ret_rdp, acct_error *err)
{
	struct ss_params s = {.sigma = sigma, .order = order};
	int rc;

	if ((rc = check_logq(logq, "/logq", err)) < 0 ||
	    (rc = acct_pate_gnmax_logq0(ws, sigma, order, &s.logq0, err)) < 0)
		return rc;
	*ret_rdp = rdp_ss_at(&s, logq);
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x < y) - (x > y);
}

/* ln Pr[N(0, 2 sigma^2) >= margin] for an integer margin in [0, max_teachers],
 * computed once per analysis and then looked up. */
static int margin_lsf(acct_pate_workspace *ws, int64_t margin, double sigma, double *ret)
{
	double *slot = &ws->lsf_by_margin[margin];
	int rc;

	if (isnan(*slot) && (rc = log_normal_sf((double)margin, M_SQRT2 * sigma, slot)) < 0)
		return rc;
	*ret = *slot;
	return 0;
}

/*
 * ln q (Proposition 7) of the histogram {top} + groups, whose classes number
 * m.  Terms are visited by increasing margin; once a term is below the
 * largest by e^{-40}/m the rest, each smaller still, cannot change the sum in
 * double precision and are skipped, so a step costs O(vote values near the
 * top) rather than O(m).
 */
static int grouped_logq(acct_pate_workspace *ws, int64_t top, size_t m, double sigma,
			double *ret_logq)
{
	const struct vote_group *g = ws->groups;
	size_t ng = ws->n_groups;
	bool top_is_max = ng == 0 || top >= g[ng - 1].value;
	int64_t best = top_is_max ? top : g[ng - 1].value;
	double cutoff = -40 - log((double)m), tref = -INFINITY, t, sum = 0;
	int rc;

	/* The plurality class is excluded from the union bound. */
	if (!top_is_max) {
		if ((rc = margin_lsf(ws, best - top, sigma, &tref)) < 0)
			return rc;
	}
	for (size_t i = ng; i-- > 0;) {
		int64_t c = g[i].count - (!top_is_max && i == ng - 1);

		if (c > 0) {
			if ((rc = margin_lsf(ws, best - g[i].value, sigma, &t)) < 0)
				return rc;
			tref = fmax(tref, t);
			break;
		}
	}
	if (!top_is_max) {
		if ((rc = margin_lsf(ws, best - top, sigma, &t)) < 0)
			return rc;
		sum += exp(t - tref);
	}
	for (size_t i = ng; i-- > 0;) {
		int64_t c = g[i].count - (!top_is_max && i == ng - 1);

		if (c == 0)
			continue;
		if ((rc = margin_lsf(ws, best - g[i].value, sigma, &t)) < 0)
			return rc;
		if (t - tref < cutoff)
			break;
		sum += (double)c * exp(t - tref);
	}
	*ret_logq = fmin(tref + log(sum), log1p(-1.0 / (double)m));
	return 0;
}

/* Moves one vote of the largest non-top group to value + delta (delta is
 * -1 or +1), keeping the groups ascending and merged. */
static void move_second_vote(acct_pate_workspace *ws, int delta)
{
	struct vote_group *g = ws->groups;
	size_t ng = ws->n_groups;
	int64_t v = g[ng - 1].value;

	if (delta > 0) {
		/* v + 1 is above every group: it becomes the new last group. */
		if (--g[ng - 1].count == 0) {
			g[ng - 1].value = v + 1;
			g[ng - 1].count = 1;
		} else {
			g[ng] = (struct vote_group){.value = v + 1, .count = 1};
			ws->n_groups = ng + 1;
		}
		return;
	}
	if (ng >= 2 && g[ng - 2].value == v - 1) {
		g[ng - 2].count++;
	} else {
		g[ng] = g[ng - 1];
		g[ng - 1] = (struct vote_group){.value = v - 1, .count = 1};
		ng++;
	}
	if (--g[ng - 1].count == 0)
		ng--;
	ws->n_groups = ng;
}

/* Checks the histogram against the workspace and num_teachers, copies it,
 * as integers, into ws->sorted, and writes the votes cast to *ret_total.
 * Clears the table of tail probabilities, which holds one sigma's. */
static int ls_check_votes(acct_pate_workspace *ws, const double *votes, size_t num_classes,
			  int64_t num_teachers, int64_t *ret_total, acct_error *err)
{
	double total = 0;
	int rc;

	if ((rc = check_histogram(votes, num_classes, err)) < 0)
		return rc;
	if (num_classes > ws->max_classes)
		return acct_error_set(err, ACCT_EINVAL, "/votes", "more classes than the workspace holds");
	if (num_teachers < 1 || num_teachers > ws->max_teachers)
		return acct_error_set(err, ACCT_EINVAL, "/num_teachers", "num_teachers must be in [1, %lld]",
				      (long long)ws->max_teachers);
	for (size_t i = 0; i < num_classes; i++) {
		char where[32];

		snprintf(where, sizeof(where), "/votes/%zu", i);
		if (votes[i] < 0 || votes[i] != floor(votes[i]) || votes[i] > (double)num_teachers)
			return acct_error_set(err, ACCT_EINVAL, where,
					      "votes must be integers in [0, num_teachers]");
		total += votes[i];
		ws->sorted[i] = (int64_t)votes[i];
	}
	if (total > (double)num_teachers)
		return acct_error_set(err, ACCT_EINVAL, "/votes", "%.0f votes from %lld teachers", total,
				      (long long)num_teachers);
	for (int64_t g = 0; g <= num_teachers; g++)
		ws->lsf_by_margin[g] = NAN;
	*ret_total = (int64_t)total;
	return 0;
}

/* Groups ws->sorted (descending), minus its top vote, into ws->groups
 * (ascending); returns the top vote. */
static int64_t ls_regroup(acct_pate_workspace *ws, size_t num_classes)
{
	ws->n_groups = 0;
	for (size_t i = num_classes; i-- > 1;) {
		size_t ng = ws->n_groups;

		if (ng > 0 && ws->groups[ng - 1].value == ws->sorted[i]) {
			ws->groups[ng - 1].count++;
		} else {
			ws->groups[ng] = (struct vote_group){.value = ws->sorted[i], .count = 1};
			ws->n_groups = ng + 1;
		}
	}
	return ws->sorted[0];
}

/* Sorts ws->sorted descending and groups it (ls_regroup). */
static int64_t ls_group(acct_pate_workspace *ws, size_t num_classes)
{
	qsort(ws->sorted, num_classes, sizeof(*ws->sorted), cmp_desc);
	return ls_regroup(ws, num_classes);
}

/*
 * Algorithms 4-5, walked in O(distance) steps: a histogram at distance d
 * whose q is furthest from [q1, q0] moves one vote per step from the
 * runner-up to the top (q above q0: q falls towards q0) or from the top to
 * the runner-up (q below q1: q rises towards q1).  Once the walk reaches
 * [q1, q0] (or unanimity), the maximum is the plateau LS(q1), which fills
 * ws->ls[] beforehand.  `logq` is that of the grouped histogram.
 */
static int ls_walk(acct_pate_workspace *ws, const struct ss_params *s, int64_t top, double logq,
		   int64_t num_teachers, acct_error *err)
{
	bool go_left;
	double ls;
	int rc;

	if (!(logq < s->logq1 || logq > s->logq0))
		return 0;
	if ((rc = local_sensitivity_at(s, logq, &ls)) < 0)
		return acct_error_set(err, rc, "/votes", "local sensitivity failed");
	ws->ls[0] = ls;
	go_left = logq > s->logq0;
	for (int64_t d = 1; d < num_teachers; d++) {
		if (go_left ? !(logq > s->logq0 && ws->groups[ws->n_groups - 1].value > 0)
			    : !(logq < s->logq1))
			break;
		top += go_left ? 1 : -1;
		move_second_vote(ws, go_left ? -1 : 1);
		if ((rc = grouped_logq(ws, top, s->num_classes, s->sigma, &logq)) < 0 ||
		    (rc = local_sensitivity_at(s, logq, &ls)) < 0)
			return acct_error_set(err, rc, "/votes", "local sensitivity failed");
		ws->ls[d] = ls;
	}
	return 0;
}

int acct_pate_gnmax_local_sensitivity(acct_pate_workspace *ws, const double *votes,
				      size_t num_classes, int64_t num_teachers, double sigma,
				      double order, double *ret_ls, acct_error *err)
{
	struct ss_params s = {.sigma = sigma, .order = order, .num_classes = num_classes};
	double logq, plateau, lo, hi;
	int64_t top, total;
	int rc;

	if (!ws || !ret_ls)
		return acct_error_set(err, ACCT_EINVAL, "", "no workspace or output");
	if ((rc = ls_check_votes(ws, votes, num_classes, num_teachers, &total, err)) < 0)
		return rc;
	if ((rc = acct_pate_gnmax_logq0(ws, sigma, order, &s.logq0, err)) < 0)
		return rc;
	/* q1 = B_l(q0): below it a neighbour cannot reach q0 (Algorithm 3). */
	if ((rc = log_q_bounds(s.logq0, sigma, num_classes, &lo, &hi)) < 0)
		return acct_error_set(err, rc, "/sigma", "the bound B_l(q0) failed");
	s.logq1 = lo;

	top = ls_group(ws, num_classes);
	if ((rc = grouped_logq(ws, top, num_classes, sigma, &logq)) < 0 ||
	    (rc = local_sensitivity_at(&s, s.logq1, &plateau)) < 0)
		return acct_error_set(err, rc, "/votes", "local sensitivity failed");
	for (int64_t d = 0; d < num_teachers; d++)
		ws->ls[d] = plateau;
	if ((rc = ls_walk(ws, &s, top, logq, num_teachers, err)) < 0)
		return rc;
	memcpy(ret_ls, ws->ls, (size_t)num_teachers * sizeof(*ret_ls));
	return 0;
}

double acct_pate_smooth_sensitivity(double beta, const double *ls, size_t n)
{
	double best = 0;

	for (size_t d = 0; d < n; d++) {
		double v = ls[d] * exp(-beta * (double)d);

		/* Never round a positive sensitivity down to no noise at all. */
		if (v == 0 && ls[d] > 0)
			v = DBL_TRUE_MIN;
		best = fmax(best, v);
	}
	return best;
}

/* ---- a two-sided smooth bound for the release ------------------------------ */

/*
 * Why not the walk: Algorithms 4-5 walk from a histogram towards [q1, q0]
 * only, which bounds the local sensitivity within distance d when LS(q)
 * grows towards that interval.  For small sigma or high orders it does not, and a more
 * concentrated neighbour then has a larger LS than the walk allows.
 *
 * This bound needs what Algorithm 3 itself needs, and no shape of LS(q):
 *
 * 1. Theorem 6's bound, as the release uses it (rdp_ss_at), is
 *    non-decreasing in q (checked on the grid below);
 * 2. one teacher moves z = erfc^-1(2q/(m-1)) by at most 1/sigma (Appendix
 *    B.4.1: every margin moves by at most 2 votes, and Jensen's inequality
 *    gives B_l, B_u; when the top changes, the two classes trade places
 *    with margins of at most 2 votes on both sides).
 *
 * The local sensitivity at a histogram at z is then at most
 *   G(z) = max(eps(z - 1/sigma) - eps(z), eps(z) - eps(z + 1/sigma)),
 * eps(z) the released RDP there, non-increasing in z.  A fixed grid of
 * cells [z_k, z_k+1], K to each 1/sigma (widened by 1e-6 so that rounding
 * in z cannot cross a cell), bounds G on a cell by
 *   C_k = max(eps(z_k-K) - eps(z_k+1), eps(z_k) - eps(z_k+1+K)).
 *
 * A(d, x) is the largest C_k over the cells between the least and the most
 * q of the histograms within distance d of x (one cell more on each side),
 * which two greedy walks find exactly (lsb_walk_up, lsb_walk_down; q is
 * Proposition 7's sum of f(g) = erfc(g / 2 sigma) / 2 over the margins g,
 * f convex and decreasing for g >= 0):
 *  - most q: a vote moved from the top to class i lowers every margin by 1
 *    and g_i by one more, and beats every other move; d such moves, all
 *    into the runner-up, beat any split of them (a convex function on a
 *    simplex peaks at a vertex, and f falls fastest at the smallest g).
 *    While the runner-up ends at or below the top, no class can pass the
 *    top within d; past that the walk gives up and takes every cell above.
 *  - least q: a vote moved from class i to the top raises every margin by
 *    1 and g_i by one more, and beats every other move while some class
 *    holds a vote; the sum of f(g_i + d + k_i) over moves k_i summing to d
 *    is separable and convex, so taking each vote from the class with the
 *    smallest margin is optimal.  Then abstaining teachers vote for the
 *    top.  Concentrating on another class does no better: swapping it with
 *    the top, which holds at least as many votes, only raises margins.
 * The extremes within d of x lie within d + 1 of a neighbour y, so
 * A(d, x) <= A(d + 1, y) (each further step widens the range by 1e-6 of a
 * cell against rounding), and A(0, x) >= C of x's cell bounds the local
 * sensitivity at x (fact 2): max_d e^{-beta d} A(d, x) is a beta-smooth
 * upper bound (Nissim, Raskhodnikova and Smith 2007, Lemma 2.3 and
 * Definition 2.1), and so is the sum over a release's answers, since one
 * teacher moves every answered histogram at once.  The grid depends only
 * on public parameters; a walk stops once the cells beyond it cannot raise
 * the bound (the running maxima pmax, smax).
 *
 * The grid covers z from z_cap (q = 1 - 1/m, the cap of Proposition 7's
 * bound) up to the unanimous histogram, z = n / (2 sigma), or up to where
 * eps falls below 2^-40 lambda / sigma^2; past that one tail cell holds
 * eps at its start less 1/sigma, which bounds G there.
 */
#define LSB_CELLS_PER_STEP 8
#define LSB_WIDEN (1 + 1e-6)
#define LSB_TAIL 0x1p-40

struct acct_pate_ls_bound {
	double zcap, h;    /* the grid: z_k = zcap + k h */
	double lc;         /* ln((m - 1) / 2) */
	size_t cells;      /* cell bounds c[0 .. cells - 1]; the last may be a tail */
	double *c;
	double *pmax;      /* pmax[k] = max c[0 .. k] */
	double *smax;      /* smax[k] = max c[k .. cells - 1] */
	double sigma;
	size_t num_classes;
	int64_t num_teachers;
};

void acct_pate_ls_bound_free(acct_pate_ls_bound *b)
{
	if (!b)
		return;
	free(b->c);
	free(b->pmax);
	free(b->smax);
	free(b);
}

/* eps at grid point j (j may be below 0): the released RDP at that z. */
static int lsb_eps(const struct ss_params *s, const acct_pate_ls_bound *b, long j, double *ret)
{
	double le;
	int rc;

	if ((rc = log_erfc(b->zcap + (double)j * b->h, &le)) < 0)
		return rc;
	*ret = rdp_ss_at(s, fmin(b->lc + le, 0.0));
	return isfinite(*ret) ? 0 : ACCT_ENUMERIC;
}

/* a <= b up to rounding in Theorem 6's bound. */
static bool lsb_le(double a, double b)
{
	return a <= b * (1 + 1e-12) + 1e-300;
}

/* Makes room for cell n and grid point n + 2K + 1. */
static int lsb_grow(acct_pate_ls_bound *b, double **eps, size_t *room, size_t n)
{
	size_t want = *room ? 2 * *room : 1024;
	double *c, *e;

	if (n < *room)
		return 0;
	c = realloc(b->c, want * sizeof(*c));
	if (c)
		b->c = c;
	e = c ? realloc(*eps, (want + 2 * LSB_CELLS_PER_STEP + 2) * sizeof(*e)) : NULL;
	if (!e)
		return ACCT_ENOMEM;
	*eps = e;
	*room = want;
	return 0;
}

/*
 * Fills b->c from eps on the grid, checking on the way that eps is
 * non-increasing there (Algorithm 3's premise; a failure is refused, not
 * priced on a false premise).  A cell's bound carries a relative 1e-9 of
 * slack for rounding in eps.
 */
static int lsb_fill(const struct ss_params *s, acct_pate_ls_bound *b, double zend)
{
	const long K = LSB_CELLS_PER_STEP;
	size_t last = (size_t)ceil(fmax(zend - b->zcap, 0.0) / b->h) + 2, room = 0, n = 0;
	double *eps = NULL, tau = LSB_TAIL * s->order / (s->sigma * s->sigma);
	int rc = lsb_grow(b, &eps, &room, 0);

	/* eps[j + K] = eps(z_j), j >= -K */
	for (long j = -K; rc == 0 && j <= K; j++)
		if ((rc = lsb_eps(s, b, j, &eps[j + K])) == 0 && j > -K && !lsb_le(eps[j + K], eps[j + K - 1]))
			rc = ACCT_EUNSUPPORTED;
	for (size_t k = 0; rc == 0 && k < last; k++) {
		double *e;  /* e[i] = eps(z_{k - K + i}) */

		if ((rc = lsb_grow(b, &eps, &room, k)) < 0)
			break;
		e = eps + k;
		if ((rc = lsb_eps(s, b, (long)k + 1 + K, &e[2 * K + 1])) < 0)
			break;
		if (!lsb_le(e[2 * K + 1], e[2 * K])) {
			rc = ACCT_EUNSUPPORTED;
			break;
		}
		n = k + 1;
		if (e[0] <= tau) {
			/* The tail: for z >= z_k, G(z) <= eps(z - 1/sigma) <= eps(z_k-K). */
			b->c[k] = e[0] * (1 + 1e-9);
			break;
		}
		b->c[k] = fmax(fmax(e[0] - e[K + 1], e[K] - e[2 * K + 1]), 0.0) + 1e-9 * e[0];
	}
	free(eps);
	b->cells = n;
	return rc;
}

/* The running maxima a walk stops by. */
static int lsb_maxima(acct_pate_ls_bound *b)
{
	size_t n = b->cells;

	b->pmax = malloc(n * sizeof(*b->pmax));
	b->smax = malloc(n * sizeof(*b->smax));
	if (!b->pmax || !b->smax)
		return ACCT_ENOMEM;
	for (size_t k = 0; k < n; k++)
		b->pmax[k] = k ? fmax(b->pmax[k - 1], b->c[k]) : b->c[k];
	for (size_t k = n; k-- > 0;)
		b->smax[k] = k + 1 < n ? fmax(b->smax[k + 1], b->c[k]) : b->c[k];
	return 0;
}

int acct_pate_ls_bound_new(acct_pate_workspace *ws, size_t num_classes, int64_t num_teachers,
			   double sigma, double order, acct_pate_ls_bound **ret,
			   acct_error *err)
{
	struct ss_params s = {.sigma = sigma, .order = order, .num_classes = num_classes};
	acct_pate_ls_bound *b;
	int rc;

	if (!ws || !ret)
		return acct_error_set(err, ACCT_EINVAL, "", "no workspace or output");
	if (num_classes < 2 || num_classes > DPG_MAX_VOTE_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/num_classes", "num_classes must be in [2, %d]",
				      DPG_MAX_VOTE_CLASSES);
	if (num_teachers < 1 || num_teachers > DPG_MAX_TEACHERS)
		return acct_error_set(err, ACCT_EINVAL, "/num_teachers", "num_teachers must be in [1, %d]",
				      DPG_MAX_TEACHERS);
	if ((rc = acct_pate_gnmax_logq0(ws, sigma, order, &s.logq0, err)) < 0)
		return rc;
	if (!(b = calloc(1, sizeof(*b))))
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	b->lc = log(0.5 * (double)(num_classes - 1));
	b->h = LSB_WIDEN / (LSB_CELLS_PER_STEP * sigma);
	if ((rc = log_erfc_inv(log(2.0 / (double)num_classes), &b->zcap)) < 0) {
		acct_pate_ls_bound_free(b);
		return acct_error_set(err, rc, "/num_classes", "erfc^-1 failed");
	}
	b->sigma = sigma;
	b->num_classes = num_classes;
	b->num_teachers = num_teachers;
	if ((rc = lsb_fill(&s, b, (double)num_teachers / (2 * sigma))) < 0 ||
	    (rc = lsb_maxima(b)) < 0) {
		acct_pate_ls_bound_free(b);
		if (rc == ACCT_ENOMEM)
			return acct_error_set(err, rc, "", "out of memory");
		if (rc == ACCT_EUNSUPPORTED)
			return acct_error_set(err, rc, "/order",
					      "Theorem 6's bound is not monotone in q at sigma %g and order %g",
					      sigma, order);
		return acct_error_set(err, rc, "/sigma", "the local-sensitivity grid failed");
	}
	*ret = b;
	return 0;
}

size_t acct_pate_ls_bound_distances(const acct_pate_ls_bound *b)
{
	return (size_t)b->num_teachers + 1;
}

/* The cell of z, clamped to the grid (the last cell covers all above). */
static size_t lsb_cell(const acct_pate_ls_bound *b, double z)
{
	return z <= b->zcap ? 0 : (size_t)fmin((z - b->zcap) / b->h, (double)(b->cells - 1));
}

/* The z of the grouped histogram {top} + groups (q = 0: above every cell). */
static int lsb_z(acct_pate_workspace *ws, const acct_pate_ls_bound *b, int64_t top, double *ret)
{
	double logq;
	int rc;

	if ((rc = grouped_logq(ws, top, b->num_classes, b->sigma, &logq)) < 0)
		return rc;
	if (logq == -INFINITY) {
		*ret = INFINITY;
		return 0;
	}
	return log_erfc_inv(fmin(logq - b->lc, 0.0), ret);
}

/*
 * The walk towards more q: d votes from the top to the runner-up, the most
 * q within distance d while the runner-up stays at or below the top (no
 * class can pass the top then: every margin moves by at most 2 a step).
 * Writes the lowest cell reached by each distance, widened by eta per step
 * against rounding, to lo[0 .. n - 1]; 0 (every cell) once the runner-up
 * could pass the top, or once the cells below cannot raise the bound.
 */
static int lsb_walk_up(acct_pate_workspace *ws, const acct_pate_ls_bound *b, int64_t top,
		       double z, double *lo, size_t n)
{
	const double eta = 1e-6 * b->h;
	size_t k0 = lsb_cell(b, z), low = lsb_cell(b, z - eta), seen = k0;
	double mine = b->c[k0];  /* the largest cell bound in [seen, k0] */
	int rc;

	low = low > 0 ? low - 1 : 0;
	for (size_t d = 0; d < n; d++) {
		if (d > 0 && low > 0) {
			if (top - ws->groups[ws->n_groups - 1].value < 2) {
				low = 0;
			} else {
				size_t k;

				top--;
				move_second_vote(ws, 1);
				if ((rc = lsb_z(ws, b, top, &z)) < 0)
					return rc;
				k = lsb_cell(b, z - (double)(d + 1) * eta);
				k = k > 0 ? k - 1 : 0;
				low = k < low ? k : low;
			}
		}
		for (; seen > low; seen--)
			mine = fmax(mine, b->c[seen - 1]);
		if (low > 0 && b->pmax[low - 1] <= mine)
			low = 0;
		lo[d] = (double)low;
	}
	return 0;
}

/*
 * The walk towards less q: a vote from the runner-up to the top each step
 * (from the class with the smallest margin: for the convex tail the sum
 * falls most), then, once no other class holds a vote, an abstaining
 * teacher's vote to the top.  The least q within distance d.  A(d) is then
 * the largest cell bound between lo[d] and the highest cell reached,
 * written over lo[d].
 */
static int lsb_walk_down(acct_pate_workspace *ws, const acct_pate_ls_bound *b, int64_t top,
			 int64_t abstained, double z, double *ls, size_t n)
{
	const double eta = 1e-6 * b->h;
	size_t k0 = lsb_cell(b, z), high = lsb_cell(b, z + eta) + 1, lo = k0, hi = k0;
	double best = b->c[k0];
	bool done = false;
	int rc;

	for (size_t d = 0; d < n; d++) {
		if (d > 0 && !done && high + 1 < b->cells) {
			if (ws->groups[ws->n_groups - 1].value > 0) {
				move_second_vote(ws, -1);
			} else if (abstained > 0) {
				abstained--;
			} else {
				done = true;
			}
			if (!done) {
				top++;
				if ((rc = lsb_z(ws, b, top, &z)) < 0)
					return rc;
				high = (size_t)fmax((double)high,
						    (double)lsb_cell(b, z + (double)(d + 1) * eta) + 1);
			}
		}
		if (high >= b->cells || (high + 1 < b->cells && b->smax[high + 1] <= best))
			high = b->cells - 1;
		for (; lo > (size_t)ls[d]; lo--)
			best = fmax(best, b->c[lo - 1]);
		for (; hi < high; hi++)
			best = fmax(best, b->c[hi + 1]);
		ls[d] = best;
	}
	return 0;
}

int acct_pate_ls_bound_at(acct_pate_workspace *ws, const acct_pate_ls_bound *b,
			  const double *votes, double *ret_ls, acct_error *err)
{
	return acct_pate_ls_bound_prefix(ws, b, votes, ret_ls, (size_t)b->num_teachers + 1, err);
}

/* Each walk's step d depends on its steps before only, so a walk cut at n
 * writes the first n values of the whole one. */
int acct_pate_ls_bound_prefix(acct_pate_workspace *ws, const acct_pate_ls_bound *b,
			      const double *votes, double *ret_ls, size_t n, acct_error *err)
{
	size_t m = b->num_classes;
	int64_t top, total;
	double z;
	int rc;

	if (!ws || !ret_ls)
		return acct_error_set(err, ACCT_EINVAL, "", "no workspace or output");
	if (n < 1 || n > (size_t)b->num_teachers + 1)
		return acct_error_set(err, ACCT_EINVAL, "", "distances must be 1 to %lld",
				      (long long)b->num_teachers + 1);
	if ((rc = ls_check_votes(ws, votes, m, b->num_teachers, &total, err)) < 0)
		return rc;
	top = ls_group(ws, m);
	if ((rc = lsb_z(ws, b, top, &z)) < 0 || (rc = lsb_walk_up(ws, b, top, z, ret_ls, n)) < 0)
		return acct_error_set(err, rc, "/votes", "the local-sensitivity walk failed");
	/* The up walk moved only ws->groups: start again from the histogram. */
	top = ls_regroup(ws, m);
	if ((rc = lsb_walk_down(ws, b, top, b->num_teachers - total, z, ret_ls, n)) < 0)
		return acct_error_set(err, rc, "/votes", "the local-sensitivity walk failed");
	return 0;
}

size_t acct_pate_ls_bound_horizon(const acct_pate_ls_bound *b, double beta, double answers,
				  double at_0)
{
	size_t all = (size_t)b->num_teachers + 1;
	double top = answers * b->smax[0] * (1 + 1e-6), n;

	if (!(beta > 0) || !(at_0 > 0) || !(answers >= 1) || !isfinite(top))
		return all;
	/* e^(-beta d) top <= at_0 for every d >= n; the loop only mends
	 * rounding in the logarithms (exp is within an ulp). */
	n = ceil((log(top) - log(at_0)) / beta);
	for (int tries = 0; tries < 4 && n < (double)all && top * exp(-beta * n) > at_0; tries++)
		n += 1;
	if (!(n < (double)all) || top * exp(-beta * n) > at_0)
		return all;
	return n < 1 ? 1 : (size_t)n;
}

double acct_pate_ls_bound_tail(const acct_pate_ls_bound *b, double beta, double answers,
			       size_t distances)
{
	double top = answers * b->smax[0] * (1 + 1e-6);

	if (distances >= (size_t)b->num_teachers + 1)
		return 0;
	/* S(d) <= answers T <= top for every d, and e^(-beta d) <= e^(-beta
	 * distances) from the first distance left out on; the margin in top
	 * covers exp's ulp and the products' rounding. */
	if (!(beta > 0))
		return top;
	return top * exp(-beta * (double)distances);
}

int acct_pate_gnss_rdp(double beta, double sigma, double order, double *ret_rdp, acct_error *err)
{
	double r;
	int rc;

	if ((rc = check_sigma(sigma, "/sigma", err)) < 0)
		return rc;
	if (!(beta >= 0) || !isfinite(beta))
		return acct_error_set(err, ACCT_EINVAL, "/beta", "beta must be a finite number >= 0");
	if (!(order > 1) || !isfinite(order))
		return acct_error_set(err, ACCT_EINVAL, "/order", "the order must be a finite number above 1");
	if (beta > 0 && !(2 * order * beta < 1))
		return acct_error_set(err, ACCT_EINVAL, "/beta",
				      "Theorem 23 needs order < 1 / (2 beta): beta must be below %.17g",
				      0.5 / order);
	r = order * exp(2 * beta) / (sigma * sigma) +
	    (beta * order - 0.5 * log1p(-2 * order * beta)) / (order - 1);
	if (!isfinite(r))
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/sigma", "the RDP is not finite at this sigma");
	*ret_rdp = r;
	return 0;
}
