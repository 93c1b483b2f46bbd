/*
 * mech_noise.c: additive-noise mechanisms (Laplace, Gaussian and their
 * discrete counterparts), each returning its output and its event.
 *
 * Real-valued releases (defence against Mironov 2012): a value x is mapped
 * to the grid g Z with g a power of two tied to the noise scale, k =
 * floor(x / g) (exact: scaling by a power of two and floor are exact in
 * binary floating point), exact discrete noise Z in grid units is added in
 * 128-bit integers, and the output is (k + Z) g, rounded to the nearest
 * double.  That last rounding is a function of the exact integer k + Z, so
 * it is post-processing; the set of possible outputs does not depend on x
 * beyond k, which closes the gaps that the textbook sampler leaves.
 *
 * Sensitivity on the grid (docs/mechanisms.md, "Sensitivities on the noise
 * grid").  For reals a, b, |floor(a) - floor(b)| <=
 * ceil(|a - b|).  Hence a scalar query of sensitivity D has integer
 * sensitivity ceil(D / g); a d-vector of L1 sensitivity D has integer L1
 * sensitivity at most ceil(D / g) + d - 1 (the sum is an integer below
 * D/g + d), and of L2 sensitivity D at most D / g + sqrt(d).  Events name
 * these rounded-up sensitivities, so the charge covers the rounding.
 *
 * Events.  Scalars: discrete_laplace {noise_parameter a, sensitivity} and
 * discrete_gaussian {sigma, sensitivity} in grid units: exactly the integer
 * mechanism that ran (scaling by g is post-processing).  Vectors: the
 * d-fold discrete Laplace with integer L1 sensitivity D_Z is pure
 * (a D_Z)-DP (the privacy loss is a sum |z_i| - |z_i - s_i| <= a sum |s_i|),
 * emitted as epsilon_delta {a D_Z, 0}; the d-fold discrete Gaussian with
 * integer L2 sensitivity D_Z satisfies D_Z^2 / (2 sigma^2)-zCDP (CKS 2020,
 * Theorem 14, multivariate), emitted as zcdp {rho}.  Every number in an
 * event is rounded in the direction that overstates the privacy cost.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"
#include "mech_internal.h"

typedef __int128 i128;

/* Grid resolution: the Laplace scale spans 2^39..2^40 grid units, the
 * Gaussian sigma 2^19..2^20 (the discrete Gaussian's 128-bit range). */
#define LAPLACE_GRID_BITS 40
#define GAUSSIAN_GRID_BITS 20

static int check_len(size_t n, acct_error *err)
{
	if (n < 1 || n > DPG_MAX_VECTOR_LEN)
		return acct_error_set(err, ACCT_EINVAL, "/values",
				      "need 1 to %d values", DPG_MAX_VECTOR_LEN);
	return 0;
}

static int check_positive(double x, const char *where, acct_error *err)
{
	if (!(isfinite(x) && x > 0.0))
		return acct_error_set(err, ACCT_EINVAL, where, "must be finite and > 0");
	return 0;
}

static int check_values(const double *v, size_t n, acct_error *err)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(v[i])) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/values/%zu", i);
			return acct_error_set(err, ACCT_EINVAL, where, "must be a finite number");
		}
	return 0;
}

/* The checks every real-valued release starts with: 1 to
 * DPG_MAX_VECTOR_LEN finite values, a finite positive sensitivity and a
 * finite positive noise scale (named `scale_where` in the error). */
static int check_real_release(const double *values, size_t n, double sensitivity, double scale,
			      const char *scale_where, acct_error *err)
{
	int rc;

	if ((rc = check_len(n, err)) < 0 || (rc = check_values(values, n, err)) < 0 ||
	    (rc = check_positive(sensitivity, "/sensitivity", err)) < 0 ||
	    (rc = check_positive(scale, scale_where, err)) < 0)
		return rc;
	return 0;
}

/* k = floor(x 2^shift) as a 128-bit integer; x finite. */
static int grid_index(double x, int shift, i128 *ret)
{
	double k = floor(ldexp(x, shift));

	if (!(fabs(k) < 0x1p120))
		return -1;
	*ret = (i128)k;
	return 0;
}

int mech_laplace_grid_shift(double scale)
{
	int e;

	/* scale < 2^e; grid g = 2^(e - 40), scale / g in [2^39, 2^40). */
	frexp(scale, &e);
	return LAPLACE_GRID_BITS - e;
}

double mech_laplace_grid_sensitivity(double l1_sensitivity, double scale, size_t n)
{
	return ceil(ldexp(l1_sensitivity, mech_laplace_grid_shift(scale))) + (double)(n - 1);
}

static acct_event *event_epsilon(double eps)
{
	return acct_event_epsilon_delta(eps, 0.0);
}

int mech__laplace_grid(double scale, int *ret_shift, uint64_t *ret_num, uint64_t *ret_den)
{
	*ret_shift = mech_laplace_grid_shift(scale);
	return mech_discrete_laplace_scale(ldexp(scale, *ret_shift), ret_num, ret_den);
}

int mech__grid_units(double sensitivity, int shift, double *ret, acct_error *err)
{
	double units = ldexp(sensitivity, shift);

	*ret = ceil(units);
	if (*ret <= MECH_GRID_MAX_OVERPRICE * units)
		return 0;
	return acct_error_set(err, ACCT_EINVAL, "/epsilon",
			      "epsilon is too small for the noise grid to resolve the sensitivity: "
			      "the release would cost about %.3g times the epsilon asked for",
			      *ret / units);
}

/* Integer noise, the one thing in which the four additive mechanisms
 * differ once their inputs are checked: discrete Laplace of scale num/den
 * or discrete Gaussian of sigma (the sampler's own sigma), both exact. */
struct int_noise {
	bool gaussian;
	uint64_t num, den;
	double sigma;
};

static int draw_noise(mech_rng *rng, const struct int_noise *nz, int64_t *ret_z, acct_error *err)
{
	int rc;

	if (nz->gaussian)
		rc = mech_sample_discrete_gaussian(rng, nz->sigma, ret_z);
	else
		rc = mech_sample_discrete_laplace(rng, nz->num, nz->den, ret_z);
	if (rc < 0)
		return acct_error_set(err, rc, "", "noise sampling failed");
	return 0;
}

/* out[i] = (floor(values[i] 2^shift) + Z_i) 2^-shift, the grid release of
 * the header comment.  Fails on a value too large for the grid. */
static int add_grid_noise(mech_rng *rng, const struct int_noise *nz, const double *values,
			  size_t n, int shift, double *out, acct_error *err)
{
	for (size_t i = 0; i < n; i++) {
		i128 k;
		int64_t z;
		int rc;

		if (grid_index(values[i], shift, &k) < 0) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/values/%zu", i);
			return acct_error_set(err, ACCT_EINVAL, where, "too large for the noise scale");
		}
		if ((rc = draw_noise(rng, nz, &z, err)) < 0)
			return rc;
		out[i] = mech__grid_value(k + z, shift);
	}
	return 0;
}

/* out[i] = values[i] + Z_i, saturated at the int64 range. */
static int add_int_noise(mech_rng *rng, const struct int_noise *nz, const int64_t *values,
			 size_t n, int64_t *out, acct_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int64_t z;
		int rc;

		if ((rc = draw_noise(rng, nz, &z, err)) < 0)
			return rc;
		if (__builtin_add_overflow(values[i], z, &out[i])) {
			/* Depends on the noise, not only on the data: refusing
			 * here would leak; saturate instead (post-processing of
			 * the exact sum). */
			out[i] = z > 0 ? INT64_MAX : INT64_MIN;
		}
	}
	return 0;
}

/* The event of n discrete Laplace draws of scale num/den on a query of
 * integer L1 sensitivity sens (header comment: the scalar names the
 * mechanism, a vector is pure (a sens)-DP), a = den/num rounded up.  NULL
 * when out of memory. */
static acct_event *laplace_event(uint64_t num, uint64_t den, double sens, size_t n)
{
	double a = acct_div_up((double)den, (double)num);
	acct_event *ev;

	if (n > 1)
		return event_epsilon(acct_mul_up(a, sens));
	ev = acct_event_new(ACCT_EV_DISCRETE_LAPLACE);
	if (ev) {
		ev->u.discrete_laplace.noise_parameter = a;
		ev->u.discrete_laplace.sensitivity = sens;
	}
	return ev;
}

/* The event of n discrete Gaussian draws of sigma sg on a query of
 * integer L2 sensitivity sens: the scalar names the mechanism, a vector is
 * sens^2 / (2 sg^2)-zCDP (CKS 2020, Theorem 14), rounded up.  NULL when
 * out of memory. */
static acct_event *gaussian_event(double sg, double sens, size_t n)
{
	acct_event *ev;

	if (n > 1) {
		ev = acct_event_new(ACCT_EV_ZCDP);
		if (ev)
			ev->u.zcdp.rho = acct_div_up(acct_mul_up(acct_mul_up(sens, sens), 0.5),
						     sg * sg);
		return ev;
	}
	ev = acct_event_new(ACCT_EV_DISCRETE_GAUSSIAN);
	if (ev) {
		ev->u.discrete_gaussian.sigma = sg;
		ev->u.discrete_gaussian.sensitivity = sens;
	}
	return ev;
}

/* The event of n draws of nz on a query of integer sensitivity sens
 * (L1 for Laplace, L2 for the Gaussian); NULL when out of memory. */
static acct_event *noise_event(const struct int_noise *nz, double sens, size_t n)
{
	if (nz->gaussian)
		return gaussian_event(nz->sigma, sens, n);
	return laplace_event(nz->num, nz->den, sens, n);
}

/* Hands the caller its output (bytes of out) and the event of the draws,
 * or fails when that event could not be made: outputs are written only
 * on success. */
static int publish(const struct int_noise *nz, double sens, size_t n, const void *out,
		   size_t bytes, void *ret_out, acct_event **ret_event, acct_error *err)
{
	acct_event *ev = noise_event(nz, sens, n);

	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	memcpy(ret_out, out, bytes);
	*ret_event = ev;
	return 0;
}

/* A real-valued release on the grid of `shift` (header comment), priced
 * for the integer sensitivity sens. */
static int grid_release(mech_rng *rng, const struct int_noise *nz, const double *values,
			size_t n, int shift, double sens, double *ret_out, acct_event **ret_event,
			acct_error *err)
{
	double *out = malloc(n * sizeof(*out));
	int rc;

	if (!out)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	rc = add_grid_noise(rng, nz, values, n, shift, out, err);
	if (rc == 0)
		rc = publish(nz, sens, n, out, n * sizeof(*out), ret_out, ret_event, err);
	free(out);
	return rc;
}

/* An integer release, priced for the sensitivity sens. */
static int int_release(mech_rng *rng, const struct int_noise *nz, const int64_t *values,
		       size_t n, double sens, int64_t *ret_out, acct_event **ret_event,
		       acct_error *err)
{
	int64_t *out = malloc(n * sizeof(*out));
	int rc;

	if (!out)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	rc = add_int_noise(rng, nz, values, n, out, err);
	if (rc == 0)
		rc = publish(nz, sens, n, out, n * sizeof(*out), ret_out, ret_event, err);
	free(out);
	return rc;
}

/*
 * The grid of a real release (header comment) in *nz, *ret_shift and
 * *ret_dz, the integer sensitivity the event names: for Laplace the grid
 * of mech__laplace_grid and the L1 bound ceil(D / g) + d - 1; for the
 * Gaussian a sigma of 2^19..2^20 units and the L2 bound, ceil(D / g) for a
 * scalar and D / g + sqrt(d) (rounded up) for a vector.  -1 when the noise
 * scale is too small for the sensitivity.
 */
static int grid_setup(struct int_noise *nz, double sens, double scale, size_t n,
		      int *ret_shift, double *ret_dz)
{
	if (!nz->gaussian) {
		if (mech__laplace_grid(scale, ret_shift, &nz->num, &nz->den) < 0)
			return -1;
		*ret_dz = mech_laplace_grid_sensitivity(sens, scale, n);
		return *ret_dz <= 0x1p53 ? 0 : -1; /* a sensitivity absurd for the scale */
	}
	*ret_shift = mech_gaussian_grid_shift(scale);
	nz->sigma = mech_discrete_gaussian_sigma(ldexp(scale, *ret_shift));
	*ret_dz = mech_gaussian_grid_sensitivity(sens, scale, n);
	return isfinite(nz->sigma) && *ret_dz <= 0x1p53 ? 0 : -1;
}

double mech_gaussian_grid_sensitivity(double l2_sensitivity, double scale, size_t n)
{
	double units = ldexp(l2_sensitivity, mech_gaussian_grid_shift(scale));

	if (n == 1)
		return ceil(units);
	return acct_add_up(units, nextafter(sqrt((double)n), INFINITY));
}

/* mech_laplace and mech_gaussian: one real-valued release on the grid,
 * with the noise `gaussian` names at `scale` (the Laplace scale or sigma,
 * checked at `scale_where`). */
static int real_release(mech_rng *rng, bool gaussian, const double *values, size_t n,
			double sens, double scale, const char *scale_where, double *ret_out,
			acct_event **ret_event, acct_error *err)
{
	struct int_noise nz = {.gaussian = gaussian};
	double dz;
	int shift, rc;

	if ((rc = check_real_release(values, n, sens, scale, scale_where, err)) < 0)
		return rc;
	if (grid_setup(&nz, sens, scale, n, &shift, &dz) < 0)
		return acct_error_set(err, ACCT_EINVAL, scale_where,
				      "is too small for the sensitivity on the noise grid");
	return grid_release(rng, &nz, values, n, shift, dz, ret_out, ret_event, err);
}

int mech_laplace(mech_rng *rng, const double *values, size_t n, double l1_sensitivity,
		 double scale, double *ret_out, acct_event **ret_event, acct_error *err)
{
	return real_release(rng, false, values, n, l1_sensitivity, scale, "/scale", ret_out,
			    ret_event, err);
}

int mech_gaussian_grid_shift(double scale)
{
	int e;

	frexp(scale, &e);
	return GAUSSIAN_GRID_BITS - e;
}

int mech_gaussian_on_grid(mech_rng *rng, double value, double sigma, int shift, double *ret,
			  acct_error *err)
{
	double units = ldexp(sigma, shift), sg;
	i128 k;
	int64_t z;
	int rc;

	if (!(isfinite(units) && units >= 8.0 && units <= 0x1p20))
		return acct_error_set(err, ACCT_EINVAL, "/sigma", "sigma is off the grid's range");
	sg = mech_discrete_gaussian_sigma(units);
	if (!isfinite(value) || !isfinite(sg) || grid_index(value, shift, &k) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/value", "the value is off the grid's range");
	rc = mech_sample_discrete_gaussian(rng, sg, &z);
	if (rc < 0)
		return acct_error_set(err, rc, "", "noise sampling failed");
	*ret = mech__grid_value(k + z, shift);
	return 0;
}

int mech_gaussian(mech_rng *rng, const double *values, size_t n, double l2_sensitivity,
		  double sigma, double *ret_out, acct_event **ret_event, acct_error *err)
{
	return real_release(rng, true, values, n, l2_sensitivity, sigma, "/sigma", ret_out,
			    ret_event, err);
}

int mech_discrete_laplace(mech_rng *rng, const int64_t *values, size_t n,
			  int64_t l1_sensitivity, double scale, int64_t *ret_out,
			  acct_event **ret_event, acct_error *err)
{
	struct int_noise nz = {.gaussian = false};
	int rc;

	if ((rc = check_len(n, err)) < 0)
		return rc;
	if (l1_sensitivity < 1 || l1_sensitivity > (INT64_C(1) << 53))
		return acct_error_set(err, ACCT_EINVAL, "/sensitivity",
				      "must be an integer in [1, 2^53]");
	if (mech_discrete_laplace_scale(scale, &nz.num, &nz.den) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/scale", "must be in [%g, %g]",
				      DPG_MECH_DLAP_MIN_SCALE, DPG_MECH_DLAP_MAX_SCALE);
	return int_release(rng, &nz, values, n, (double)l1_sensitivity, ret_out, ret_event, err);
}

int mech_discrete_gaussian(mech_rng *rng, const int64_t *values, size_t n,
			   double l2_sensitivity, double sigma, int64_t *ret_out,
			   acct_event **ret_event, acct_error *err)
{
	struct int_noise nz = {.gaussian = true};
	int rc;

	if ((rc = check_len(n, err)) < 0 ||
	    (rc = check_positive(l2_sensitivity, "/sensitivity", err)) < 0)
		return rc;
	if (n == 1 && l2_sensitivity != floor(l2_sensitivity))
		return acct_error_set(err, ACCT_EINVAL, "/sensitivity",
				      "must be an integer for a scalar");
	nz.sigma = mech_discrete_gaussian_sigma(sigma);
	if (!isfinite(nz.sigma))
		return acct_error_set(err, ACCT_EINVAL, "/sigma", "must be in [%g, %g]",
				      DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA);
	return int_release(rng, &nz, values, n, l2_sensitivity, ret_out, ret_event, err);
}

/* delta of the Gaussian mechanism at epsilon (Balle and Wang 2018,
 * Theorem 8): Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D). */
static double analytic_gaussian_delta(double eps, double sens, double s)
{
	double a = sens / (2 * s), b = eps * s / sens;
	double t1 = 0.5 * erfc(-(a - b) / M_SQRT2);
	double c = erfc((a + b) / M_SQRT2);
	double t2 = c > 0 ? 0.5 * exp(eps + log(c)) : 0.0;

	return t1 - t2;
}

int mech_gaussian_sigma_analytic(double epsilon, double delta, double l2_sensitivity,
				 double *ret_sigma, acct_error *err)
{
	double lo, hi;
	int rc;

	if ((rc = check_positive(epsilon, "/epsilon", err)) < 0 ||
	    (rc = check_positive(l2_sensitivity, "/sensitivity", err)) < 0)
		return rc;
	if (!(delta > 0.0 && delta < 1.0))
		return acct_error_set(err, ACCT_EINVAL, "/delta", "must be in (0, 1)");
	/* delta(sigma) decreases in sigma; bracket, then bisect and return the
	 * upper end (where delta is known to be met), 2^-45 relative. */
	hi = l2_sensitivity;
	while (analytic_gaussian_delta(epsilon, l2_sensitivity, hi) > delta) {
		hi *= 2;
		if (hi > l2_sensitivity * 1e12)
			return acct_error_set(err, ACCT_EINVAL, "/delta", "delta too small");
	}
	lo = hi / 2;
	while (lo > l2_sensitivity * 1e-12 &&
	       analytic_gaussian_delta(epsilon, l2_sensitivity, lo) <= delta) {
		hi = lo;
		lo /= 2;
	}
	for (int i = 0; i < 200 && hi - lo > hi * 0x1p-45; i++) {
		double mid = 0.5 * (lo + hi);

		if (analytic_gaussian_delta(epsilon, l2_sensitivity, mid) <= delta)
			hi = mid;
		else
			lo = mid;
	}
	*ret_sigma = hi;
	return 0;
}
