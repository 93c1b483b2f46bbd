/*
 * trn_pca.c: the differentially private PCA input projection of Abadi et
 * al. 2016, §5 ("Differentially private PCA"): normalise each row to unit
 * L2 norm (rows A), add symmetric Gaussian noise to A^T A, and project on
 * the top principal directions of the noisy matrix.
 *
 * Privacy (docs/training.md, "DP-PCA's sensitivity"): adding or
 * removing one row changes A^T A by a a^T with
 * ||a a^T||_F = ||a||^2 <= 1, so releasing its upper triangle (which
 * determines the matrix) plus iid N(0, sigma^2) noise is the Gaussian
 * mechanism with noise multiplier sigma; the eigenvectors are
 * post-processing.  trn_dpsgd_event prices it as gaussian(sigma).  Under
 * replace the change a a^T - b b^T reaches sqrt 2; a DP-SGD job never
 * runs there (its Poisson-sampled steps are refused under replace).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GSL's CBLAS declarations (same symbols, resolved to OpenBLAS at link). */
#include <gsl/gsl_cblas.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include "trn_internal.h"

/* One rank-B update per chunk of TRN__PCA_CHUNK_ROWS rows. */
void trn__pca_gram_upper(const double *x, size_t n, size_t d, double *chunk, double *cov)
{
	for (size_t s = 0; s < n; s += TRN__PCA_CHUNK_ROWS) {
		size_t B = n - s < TRN__PCA_CHUNK_ROWS ? n - s : TRN__PCA_CHUNK_ROWS;

		memcpy(chunk, x + s * d, B * d * sizeof(double));
		for (size_t i = 0; i < B; i++) {
			double *row = chunk + i * d, nrm = cblas_dnrm2((int)d, row, 1), check;

			/* Divide, not multiply by 1 / nrm: for a row of subnormals
			 * 1 / nrm overflows and 0 * inf made the covariance NaN, which
			 * told that such a row was there.  A row whose normalised norm
			 * is still not within 1 (never, short of that) is dropped, so
			 * every row adds at most norm 1 whatever it holds. */
			for (size_t j = 0; nrm > 0.0 && j < d; j++)
				row[j] /= nrm;
			check = cblas_dnrm2((int)d, row, 1);
			if (!(check <= 1.0 + 1e-12))
				memset(row, 0, d * sizeof(double));
		}
		cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)B, 1.0, chunk,
			    (int)d, 1.0, cov, (int)d);
	}
}

/* Adds N(0, sigma^2) to each of the d (d + 1) / 2 upper entries of cov
 * (none when sigma is 0), then mirrors the upper triangle into the lower. */
static int pca_add_noise(double *cov, size_t d, double sigma, mech_rng *rng, double *noise,
			 acct_error *err)
{
	if (sigma > 0.0) {
		size_t t = 0;

		if (mech_rng_normal_fill(rng, noise, d * (d + 1) / 2) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
		for (size_t i = 0; i < d; i++)
			for (size_t j = i; j < d; j++)
				cov[i * d + j] += sigma * noise[t++];
	}
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < i; j++)
			cov[i * d + j] = cov[j * d + i];
	return 0;
}

int trn__dp_pca(const double *x, size_t n, size_t d, size_t k, double sigma, mech_rng *rng,
		double *ret_v, acct_error *err)
{
	double *cov = NULL, *chunk = NULL, *noise = NULL;
	gsl_matrix *evec = NULL;
	gsl_vector *eval = NULL;
	gsl_eigen_symmv_workspace *ew = NULL;
	gsl_matrix_view cv;
	int rc = 0;

	if (k < 1 || k > d)
		return acct_error_set(err, ACCT_EINVAL, "/params/pca_components",
				      "pca_components must be between 1 and the %zu features", d);
	cov = calloc(d * d, sizeof(double));
	chunk = malloc(TRN__PCA_CHUNK_ROWS * d * sizeof(double));
	noise = malloc((d * (d + 1) / 2) * sizeof(double));
	evec = gsl_matrix_alloc(d, d);
	eval = gsl_vector_alloc(d);
	ew = gsl_eigen_symmv_alloc(d);
	if (!cov || !chunk || !noise || !evec || !eval || !ew) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for DP-PCA");
		goto out;
	}
	trn__pca_gram_upper(x, n, d, chunk, cov);
	rc = pca_add_noise(cov, d, sigma, rng, noise, err);
	if (rc < 0)
		goto out;
	cv = gsl_matrix_view_array(cov, d, d);
	if (gsl_eigen_symmv(&cv.matrix, eval, evec, ew) != GSL_SUCCESS ||
	    gsl_eigen_symmv_sort(eval, evec, GSL_EIGEN_SORT_VAL_DESC) != GSL_SUCCESS) {
		rc = acct_error_set(err, ACCT_ENUMERIC, "", "eigendecomposition failed");
		goto out;
	}
	for (size_t i = 0; i < d; i++)
		for (size_t j = 0; j < k; j++)
			ret_v[i * k + j] = gsl_matrix_get(evec, i, j);
out:
	if (ew)
		gsl_eigen_symmv_free(ew);
	if (eval)
		gsl_vector_free(eval);
	if (evec)
		gsl_matrix_free(evec);
	free(cov);
	free(chunk);
	free(noise);
	return rc;
}
