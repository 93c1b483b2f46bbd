/*
 * trn_slmc_admm.c: DP-SLMC's learners and coordinator: consensus ADMM
 * (Boyd, Parikh, Chu, Peleato, Eckstein 2011, Sec. 7.1, scaled form) over
 * the soft large margin clustering objective, with Gaussian noise on every
 * upload (docs/slmc.md, Algorithm 1).
 *
 * Two choices keep one row's influence confined to one upload per round,
 * which is what lets the sensitivity be derived rather than hoped for:
 * memberships are computed from the public (noisy) consensus, never from a
 * learner's private iterate, and the duals are updated from the released
 * uploads, so every state carried between rounds is post-processing.  The
 * paper's FCM initialisation on private rows was rejected for the same
 * reason: it couples every row's initial membership to every other row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_cblas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include "trn_slmc_internal.h"

void trn__slmc_fcm_weights(double *dist, uint32_t C, double m)
{
	double dmin = INFINITY, sum = 0.0;
	uint32_t zeros = 0;

	for (uint32_t k = 0; k < C; k++) {
		if (dist[k] < dmin)
			dmin = dist[k];
		if (dist[k] == 0.0)
			zeros++;
	}
	if (zeros > 0) {
		for (uint32_t k = 0; k < C; k++)
			dist[k] = dist[k] == 0.0 ? 1.0 / zeros : 0.0;
		return;
	}
	/* u_k proportional to d_k^(-1/(m-1)), scaled by dmin so that every
	 * weight is in (0, 1] and nothing overflows. */
	for (uint32_t k = 0; k < C; k++) {
		dist[k] = pow(dmin / dist[k], 1.0 / (m - 1.0));
		sum += dist[k];
	}
	for (uint32_t k = 0; k < C; k++)
		dist[k] /= sum;
}

/* f = A theta for n mapped rows A (n x d1) and theta (d1 x C): the
 * label-space outputs every step and predict start from. */
void trn__slmc_outputs(const double *theta, const double *a, size_t n, size_t d1, uint32_t C,
		       double *ret_f)
{
	if (n == 0)
		return;
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)C, (int)d1, 1.0, a,
		    (int)d1, theta, (int)C, 0.0, ret_f, (int)C);
}

void trn__slmc_memberships(const double *f, uint32_t C, double m, double *ret_u)
{
	for (uint32_t k = 0; k < C; k++) {
		double dk = 0.0;

		for (uint32_t l = 0; l < C; l++) {
			double e = f[l] - (l == k ? 1.0 : 0.0);

			dk += e * e;
		}
		ret_u[k] = dk;
	}
	trn__slmc_fcm_weights(ret_u, C, m);
}

int trn__slmc_ws_new(size_t cap, size_t d1, uint32_t C, trn__slmc_ws **ret, acct_error *err)
{
	trn__slmc_ws *ws = calloc(1, sizeof(*ws));
	size_t rows = cap > 0 ? cap : 1;

	if (!ws)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	ws->cap = cap;
	ws->d1 = d1;
	ws->C = C;
	ws->f = malloc(rows * C * sizeof(double));
	ws->u = malloc(rows * C * sizeof(double));
	ws->scaled = malloc(rows * d1 * sizeof(double));
	ws->h = malloc(d1 * d1 * sizeof(double));
	ws->r = malloc(d1 * C * sizeof(double));
	ws->evec = malloc(d1 * d1 * sizeof(double));
	ws->eval = malloc(d1 * sizeof(double));
	ws->g = malloc(d1 * C * sizeof(double));
	ws->eig = gsl_eigen_symmv_alloc(d1);
	if (!ws->f || !ws->u || !ws->scaled || !ws->h || !ws->r || !ws->evec || !ws->eval ||
	    !ws->g || !ws->eig) {
		trn__slmc_ws_free(ws);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	*ret = ws;
	return 0;
}

void trn__slmc_ws_free(trn__slmc_ws *ws)
{
	if (!ws)
		return;
	free(ws->f);
	free(ws->u);
	free(ws->scaled);
	free(ws->h);
	free(ws->r);
	free(ws->evec);
	free(ws->eval);
	free(ws->g);
	if (ws->eig)
		gsl_eigen_symmv_free(ws->eig);
	free(ws);
}

/* H and R of the normal equations (trn__slmc_ridge's comment) into ws->h
 * (both triangles) and ws->r; ws->f and ws->scaled are scratch. */
static void ridge_system(const double *a, const double *u, size_t n, const trn_slmc_params *p,
			 double reg_w, const double *v, trn__slmc_ws *ws)
{
	size_t d1 = ws->d1, C = ws->C;

	for (size_t i = 0; i < n; i++) {
		double s = 0.0, c;

		for (size_t k = 0; k < C; k++) {
			ws->f[i * C + k] = pow(u[i * C + k], p->fuzzifier);
			s += ws->f[i * C + k];
		}
		c = sqrt(2.0 * p->lambda * s);
		for (size_t j = 0; j < d1; j++)
			ws->scaled[i * d1 + j] = c * a[i * d1 + j];
	}
	memset(ws->h, 0, d1 * d1 * sizeof(double));
	memcpy(ws->r, v, d1 * C * sizeof(double));
	if (n > 0) {
		cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d1, (int)n, 1.0,
			    ws->scaled, (int)d1, 0.0, ws->h, (int)d1);
		cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d1, (int)C, (int)n,
			    2.0 * p->lambda, a, (int)d1, ws->f, (int)C, p->rho, ws->r, (int)C);
	} else {
		for (size_t j = 0; j < d1 * C; j++)
			ws->r[j] *= p->rho;
	}
	for (size_t j = 0; j < d1; j++) {
		for (size_t l = 0; l < j; l++)
			ws->h[j * d1 + l] = ws->h[l * d1 + j];
		/* The regulariser 1/2 ||W||^2 covers W only, not the bias row. */
		ws->h[j * d1 + j] += p->rho + (j + 1 < d1 ? reg_w : 0.0);
	}
}

/* The unconstrained solution H^-1 R by Cholesky into theta; ws->evec is
 * the factor's storage. */
static int ridge_cholesky(trn__slmc_ws *ws, double *theta, acct_error *err)
{
	size_t d1 = ws->d1, C = ws->C;
	gsl_matrix_view l = gsl_matrix_view_array(ws->evec, d1, d1);

	memcpy(ws->evec, ws->h, d1 * d1 * sizeof(double));
	if (gsl_linalg_cholesky_decomp1(&l.matrix) != GSL_SUCCESS)
		return acct_error_set(err, ACCT_ENUMERIC, "", "local system not positive definite");
	for (size_t c = 0; c < C; c++) {
		gsl_vector_view b = gsl_vector_view_array_with_stride(ws->r + c, C, d1);
		gsl_vector_view x = gsl_vector_view_array_with_stride(theta + c, C, d1);

		if (gsl_linalg_cholesky_solve(&l.matrix, &b.vector, &x.vector) != GSL_SUCCESS)
			return acct_error_set(err, ACCT_ENUMERIC, "", "local solve failed");
	}
	return 0;
}

/* ||(H + mu I)^-1 R||_F^2 from the eigenpairs: sum_j ||g_j||^2/(l_j+mu)^2. */
static double ball_norm2(const double *eval, const double *rows2, size_t d1, double mu)
{
	double s = 0.0;

	for (size_t j = 0; j < d1; j++)
		s += rows2[j] / ((eval[j] + mu) * (eval[j] + mu));
	return s;
}

/*
 * The trust-region solution on the sphere ||theta|| = B (Moré and Sorensen
 * 1983): H = Q diag(l) Q^T, G = Q^T R, theta(mu) = Q diag(1/(l+mu)) G with
 * the mu > 0 at which ||theta(mu)|| = B, by bisection (the norm decreases
 * in mu).  The upper end is kept, so ||theta|| <= B.  Destroys ws->h.
 */
static int ridge_ball(trn__slmc_ws *ws, double B, double *theta, acct_error *err)
{
	size_t d1 = ws->d1, C = ws->C;
	gsl_matrix_view h, q;
	gsl_vector_view l;
	double *rows2 = ws->scaled, lo = 0.0, hi, gnorm2 = 0.0;

	h = gsl_matrix_view_array(ws->h, d1, d1);
	q = gsl_matrix_view_array(ws->evec, d1, d1);
	l = gsl_vector_view_array(ws->eval, d1);
	if (gsl_eigen_symmv(&h.matrix, &l.vector, &q.matrix, ws->eig) != GSL_SUCCESS)
		return acct_error_set(err, ACCT_ENUMERIC, "", "local eigensolver failed");
	cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d1, (int)C, (int)d1, 1.0,
		    ws->evec, (int)d1, ws->r, (int)C, 0.0, ws->g, (int)C);
	for (size_t j = 0; j < d1; j++) {
		rows2[j] = 0.0;
		for (size_t c = 0; c < C; c++)
			rows2[j] += ws->g[j * C + c] * ws->g[j * C + c];
		gnorm2 += rows2[j];
	}
	/* Every eigenvalue is >= rho > 0, so ||theta(hi)|| <= ||G|| / hi = B. */
	hi = sqrt(gnorm2) / B;
	for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; it++) {
		double mid = 0.5 * (lo + hi);

		if (ball_norm2(ws->eval, rows2, d1, mid) > B * B)
			lo = mid;
		else
			hi = mid;
	}
	for (size_t j = 0; j < d1; j++)
		for (size_t c = 0; c < C; c++)
			ws->g[j * C + c] /= ws->eval[j] + hi;
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d1, (int)C, (int)d1, 1.0,
		    ws->evec, (int)d1, ws->g, (int)C, 0.0, theta, (int)C);
	return 0;
}

static double frobenius(const double *x, size_t len)
{
	return cblas_dnrm2((int)len, x, 1);
}

int trn__slmc_ridge(const double *a, const double *u, size_t n, const trn_slmc_params *p,
		    double reg_w, const double *v, trn__slmc_ws *ws, double *ret_theta,
		    acct_error *err)
{
	size_t len = ws->d1 * ws->C;
	double norm, target = p->max_norm * (1.0 - 0x1p-40);
	int rc;

	ridge_system(a, u, n, p, reg_w, v, ws);
	rc = ridge_cholesky(ws, ret_theta, err);
	if (rc != 0)
		return rc;
	if (frobenius(ret_theta, len) > p->max_norm) {
		rc = ridge_ball(ws, p->max_norm, ret_theta, err);
		if (rc != 0)
			return rc;
	}
	/* Rounding may leave the norm a few ulps above B; the bound on the
	 * gradient (Theorem 1) needs ||theta|| <= B however the norm is
	 * summed, so land a margin of 2^-40 inside (TRN_SLMC_SOLVE_SLACK
	 * covers the move). */
	norm = frobenius(ret_theta, len);
	if (norm > target)
		cblas_dscal((int)len, target / norm, ret_theta, 1);
	return 0;
}

int trn__slmc_local_update(const double *a, size_t n, const trn_slmc_params *p, double reg_w,
			   const double *z, const double *v, trn__slmc_ws *ws,
			   double *ret_theta, acct_error *err)
{
	if (n > ws->cap)
		return acct_error_set(err, ACCT_EINTERNAL, "", "workspace too small");
	trn__slmc_outputs(z, a, n, ws->d1, ws->C, ws->f);
	for (size_t i = 0; i < n; i++)
		trn__slmc_memberships(ws->f + i * ws->C, ws->C, p->fuzzifier, ws->u + i * ws->C);
	return trn__slmc_ridge(a, ws->u, n, p, reg_w, v, ws, ret_theta, err);
}
