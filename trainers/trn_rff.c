/*
 * trn_rff.c: random Fourier features of the RBF kernel (Rahimi and Recht,
 * "Random Features for Large-Scale Kernel Machines", NIPS 2007).
 *
 * SLMC is a kernel method; its exact form needs the n x n kernel matrix,
 * which no learner can share and which grows with the data.  An explicit
 * D-dimensional map makes every learner's model a (D+1) x C matrix of the
 * same shape, so the coordinator can average models and the noise added to
 * an upload does not depend on n.  The map is drawn from the job's stream
 * before any row is read: it is independent of the data, hence public.
 */
#include <math.h>
#include <stdlib.h>

#include <cblas.h>

#include "trn.h"

int trn_rff_new(uint32_t d, uint32_t features, double gamma, mech_rng *rng, trn_rff **ret,
		acct_error *err)
{
	trn_rff *f = NULL;
	double scale;
	int rc;

	if (d < 1 || d > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/data", "the table needs 1 to %d features",
				      DPG_MAX_FEATURES);
	if (features < 1 || features > DPG_MAX_SLMC_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "features must be 1 to %d", DPG_MAX_SLMC_FEATURES);
	if ((long long)features * d > DPG_MAX_RFF_WEIGHTS)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "features x input columns exceeds %lld",
				      (long long)DPG_MAX_RFF_WEIGHTS);
	if (!isfinite(gamma) || !(gamma > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/gamma",
				      "gamma must be finite and > 0");
	f = calloc(1, sizeof(*f));
	if (!f) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	f->d = d;
	f->features = features;
	f->gamma = gamma;
	/* One block: Omega (D x d) then the D phases; trn_rff_free frees it
	 * through omega. */
	f->omega = malloc((size_t)features * (d + 1) * sizeof(double));
	if (!f->omega) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	/* The Fourier transform of exp(-gamma ||delta||^2) is the density of
	 * N(0, 2 gamma I): E cos(w . delta) = exp(-gamma ||delta||^2). */
	rc = mech_rng_normal_fill(rng, f->omega, (size_t)features * d);
	if (rc != 0) {
		rc = acct_error_set(err, ACCT_EINTERNAL, "", "the random source failed");
		goto out;
	}
	f->phase = f->omega + (size_t)features * d;
	scale = sqrt(2.0 * gamma);
	for (size_t i = 0; i < (size_t)features * d; i++)
		f->omega[i] *= scale;
	for (uint32_t j = 0; j < features; j++) {
		double u;

		if (mech_rng_uniform(rng, &u) != 0) {
			rc = acct_error_set(err, ACCT_EINTERNAL, "", "the random source failed");
			goto out;
		}
		f->phase[j] = 2.0 * M_PI * u;
	}
	*ret = f;
	f = NULL;
	rc = 0;
out:
	trn_rff_free(f);
	return rc;
}

void trn_rff_free(trn_rff *f)
{
	if (!f)
		return;
	free(f->omega);
	free(f);
}

void trn_rff_map(const trn_rff *f, const double *x, size_t n, double *ret_phi)
{
	size_t D = f->features;
	double scale = sqrt(2.0 / (double)D);

	if (n == 0)
		return;
	/* ret_phi = X Omega^T (Rahimi and Recht, Algorithm 1: z(x) =
	 * sqrt(2/D) [cos(w_1'x + b_1) ... cos(w_D'x + b_D)]). */
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)D, (int)f->d, 1.0, x,
		    (int)f->d, f->omega, (int)f->d, 0.0, ret_phi, (int)D);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < D; j++)
			ret_phi[i * D + j] = scale * cos(ret_phi[i * D + j] + f->phase[j]);
}
