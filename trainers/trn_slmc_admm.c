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
 *
 * Every local solve and the coordinator keep the model on a class-balance
 * constraint (the mean output over public rows is the mean code), which
 * makes "every row in one cluster" infeasible.  A bias regulariser was
 * rejected because the one-cluster point stays a minimum at large n, and a
 * balance constraint over the private rows because it couples them and
 * voids the sensitivity bound (docs/slmc.md, Sec. 2.1).
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
	/* Distances that are all inf, or NaN (a row near DBL_MAX), give no
	 * weights: such a row takes the uniform memberships, so every row's
	 * stay on the simplex, as Theorem 1 needs (docs/slmc.md, Sec. 4). */
	for (uint32_t k = 0; k < C; k++)
		dist[k] = isfinite(sum) ? dist[k] / sum : 1.0 / C;
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

/* The workspace's arrays and their lengths, for `rows` rows: one table
 * drives both the allocation and the release. */
#define TRN_SLMC_WS_ARRAYS 10
static void ws_arrays(trn__slmc_ws *ws, size_t rows, double **field[TRN_SLMC_WS_ARRAYS],
		      size_t len[TRN_SLMC_WS_ARRAYS])
{
	size_t d1 = ws->d1, C = ws->C;
	double **f[TRN_SLMC_WS_ARRAYS] = {&ws->f,    &ws->u,    &ws->scaled, &ws->h, &ws->r,
					  &ws->evec, &ws->eval, &ws->g,      &ws->hq, &ws->nu};
	size_t l[TRN_SLMC_WS_ARRAYS] = {rows * C, rows * C, rows * d1, d1 * d1, d1 * C,
					d1 * d1,  d1,       d1 * C,    d1,      C};

	memcpy(field, f, sizeof(f));
	memcpy(len, l, sizeof(l));
}

int trn__slmc_ws_new(size_t cap, size_t d1, uint32_t C, trn__slmc_ws **ret, acct_error *err)
{
	trn__slmc_ws *ws = calloc(1, sizeof(*ws));
	double **field[TRN_SLMC_WS_ARRAYS];
	size_t len[TRN_SLMC_WS_ARRAYS];
	bool ok;

	if (!ws)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	ws->cap = cap;
	ws->d1 = d1;
	ws->C = C;
	ws_arrays(ws, cap > 0 ? cap : 1, field, len);
	ws->eig = gsl_eigen_symmv_alloc(d1);
	ok = ws->eig != NULL;
	for (size_t i = 0; i < TRN_SLMC_WS_ARRAYS; i++) {
		*field[i] = malloc(len[i] * sizeof(double));
		ok = ok && *field[i];
	}
	if (!ok) {
		trn__slmc_ws_free(ws);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	*ret = ws;
	return 0;
}

void trn__slmc_ws_free(trn__slmc_ws *ws)
{
	double **field[TRN_SLMC_WS_ARRAYS];
	size_t len[TRN_SLMC_WS_ARRAYS];

	if (!ws)
		return;
	ws_arrays(ws, 0, field, len);
	for (size_t i = 0; i < TRN_SLMC_WS_ARRAYS; i++)
		free(*field[i]);
	if (ws->eig)
		gsl_eigen_symmv_free(ws->eig);
	free(ws);
}

/*
 * The data's sums S^T S into ws->h (upper triangle) and 2 lambda A^T F
 * added to ws->r, TRN_SLMC_SUM_BLOCK rows at a time: every entry then goes
 * through at most TRN_SLMC_SUM_BLOCK + ceil(n / TRN_SLMC_SUM_BLOCK)
 * roundings instead of n, whatever order the BLAS sums in, which is the
 * count the sensitivity's slack assumes (docs/slmc.md, Sec. 4).  ws->evec
 * and ws->g are scratch.
 */
static void ridge_sums(const double *a, size_t n, double lambda, trn__slmc_ws *ws)
{
	size_t d1 = ws->d1, C = ws->C;

	memset(ws->h, 0, d1 * d1 * sizeof(double));
	for (size_t i0 = 0; i0 < n; i0 += TRN_SLMC_SUM_BLOCK) {
		size_t rows = n - i0 < TRN_SLMC_SUM_BLOCK ? n - i0 : TRN_SLMC_SUM_BLOCK;

		cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d1, (int)rows, 1.0,
			    ws->scaled + i0 * d1, (int)d1, 0.0, ws->evec, (int)d1);
		cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d1, (int)C, (int)rows,
			    2.0 * lambda, a + i0 * d1, (int)d1, ws->f + i0 * C, (int)C, 0.0, ws->g,
			    (int)C);
		for (size_t j = 0; j < d1; j++)
			for (size_t l = j; l < d1; l++)
				ws->h[j * d1 + l] += ws->evec[j * d1 + l];
		for (size_t j = 0; j < d1 * C; j++)
			ws->r[j] += ws->g[j];
	}
}

/* H and R of the normal equations (trn__slmc_ridge's comment) into ws->h
 * (both triangles) and ws->r; ws->f, ws->scaled, ws->evec and ws->g are
 * scratch. */
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
	for (size_t j = 0; j < d1 * C; j++)
		ws->r[j] = p->rho * v[j];
	ridge_sums(a, n, p->lambda, ws);
	for (size_t j = 0; j < d1; j++) {
		for (size_t l = 0; l < j; l++)
			ws->h[j * d1 + l] = ws->h[l * d1 + j];
		/* The regulariser 1/2 ||W||^2 covers W only, not the bias row. */
		ws->h[j * d1 + j] += p->rho + (j + 1 < d1 ? reg_w : 0.0);
	}
}

/*
 * The balance constraint by elimination: with X = H^-1 R and y = H^-1 q in
 * theta and ws->hq, the solution of H theta + q nu^T = R, q^T theta = c^T
 * is X - y nu^T with nu^T = (q^T X - c^T) / (q^T y) (H is positive
 * definite, so q^T y > 0).
 */
static void balance_correct(trn__slmc_ws *ws, const trn__slmc_balance *bal, double *theta)
{
	size_t d1 = ws->d1, C = ws->C;
	double qy = cblas_ddot((int)d1, bal->q, 1, ws->hq, 1);

	cblas_dgemv(CblasRowMajor, CblasTrans, (int)d1, (int)C, 1.0, theta, (int)C, bal->q, 1, 0.0,
		    ws->nu, 1);
	for (size_t c = 0; c < C; c++)
		ws->nu[c] = (ws->nu[c] - bal->c[c]) / qy;
	cblas_dger(CblasRowMajor, (int)d1, (int)C, -1.0, ws->hq, 1, ws->nu, 1, theta, (int)C);
}

/* The solution without the ball by Cholesky into theta; ws->evec is the
 * factor's storage. */
static int ridge_cholesky(trn__slmc_ws *ws, const trn__slmc_balance *bal, double *theta,
			  acct_error *err)
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
	if (bal) {
		gsl_vector_const_view b = gsl_vector_const_view_array(bal->q, d1);
		gsl_vector_view x = gsl_vector_view_array(ws->hq, d1);

		if (gsl_linalg_cholesky_solve(&l.matrix, &b.vector, &x.vector) != GSL_SUCCESS)
			return acct_error_set(err, ACCT_ENUMERIC, "", "local solve failed");
		balance_correct(ws, bal, theta);
	}
	return 0;
}

/*
 * ||theta(mu)||_F^2 in the eigenbasis H = Q diag(l) Q^T, G = Q^T R (ws->g),
 * h = Q^T q (ws->hq): theta(mu) has rows (G_j - h_j nu^T) / (l_j + mu),
 * where nu (into ws->nu) makes q^T theta = c^T, or is 0 without c.
 */
static double ball_norm2(trn__slmc_ws *ws, const double *c, double mu)
{
	size_t d1 = ws->d1, C = ws->C;
	double s = 0.0, hh = 0.0;

	memset(ws->nu, 0, C * sizeof(double));
	if (c) {
		for (size_t j = 0; j < d1; j++) {
			double w = ws->hq[j] / (ws->eval[j] + mu);

			hh += w * ws->hq[j];
			for (size_t k = 0; k < C; k++)
				ws->nu[k] += w * ws->g[j * C + k];
		}
		for (size_t k = 0; k < C; k++)
			ws->nu[k] = (ws->nu[k] - c[k]) / hh;
	}
	for (size_t j = 0; j < d1; j++) {
		double w = 1.0 / ((ws->eval[j] + mu) * (ws->eval[j] + mu));

		for (size_t k = 0; k < C; k++) {
			double e = ws->g[j * C + k] - ws->hq[j] * ws->nu[k];

			s += e * e * w;
		}
	}
	return s;
}

/*
 * The trust-region solution on the sphere ||theta|| = B (Moré and Sorensen
 * 1983), within the balance constraint when bal is given: theta(mu)
 * minimises F + mu/2 ||theta||^2 over {q^T theta = c^T}, and its norm does
 * not increase in mu (compare the two minimality inequalities at mu1 <
 * mu2), tending to ||p0|| < B; bisection finds the mu > 0 with
 * ||theta(mu)|| = B, keeping the upper end, so ||theta|| <= B.  Destroys
 * ws->h.
 */
static int ridge_ball(trn__slmc_ws *ws, const trn__slmc_balance *bal, double B, double *theta,
		      acct_error *err)
{
	size_t d1 = ws->d1, C = ws->C;
	const double *c = bal ? bal->c : NULL;
	gsl_matrix_view h, q;
	gsl_vector_view l;
	double lo = 0.0, hi;

	h = gsl_matrix_view_array(ws->h, d1, d1);
	q = gsl_matrix_view_array(ws->evec, d1, d1);
	l = gsl_vector_view_array(ws->eval, d1);
	if (gsl_eigen_symmv(&h.matrix, &l.vector, &q.matrix, ws->eig) != GSL_SUCCESS)
		return acct_error_set(err, ACCT_ENUMERIC, "", "local eigensolver failed");
	cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d1, (int)C, (int)d1, 1.0,
		    ws->evec, (int)d1, ws->r, (int)C, 0.0, ws->g, (int)C);
	memset(ws->hq, 0, d1 * sizeof(double));
	if (bal)
		cblas_dgemv(CblasRowMajor, CblasTrans, (int)d1, (int)d1, 1.0, ws->evec, (int)d1,
			    bal->q, 1, 0.0, ws->hq, 1);
	/* Every eigenvalue is >= rho > 0, so without the constraint
	 * ||theta(hi)|| <= ||G|| / hi = B; with it, double until inside. */
	hi = cblas_dnrm2((int)(d1 * C), ws->g, 1) / B;
	for (int it = 0; it < 1000 && ball_norm2(ws, c, hi) > B * B; it++)
		hi = 2.0 * hi + 1.0;
	for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; it++) {
		double mid = 0.5 * (lo + hi);

		if (ball_norm2(ws, c, mid) > B * B)
			lo = mid;
		else
			hi = mid;
	}
	ball_norm2(ws, c, hi);
	for (size_t j = 0; j < d1; j++)
		for (size_t k = 0; k < C; k++)
			ws->g[j * C + k] = (ws->g[j * C + k] - ws->hq[j] * ws->nu[k]) /
					   (ws->eval[j] + hi);
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d1, (int)C, (int)d1, 1.0,
		    ws->evec, (int)d1, ws->g, (int)C, 0.0, theta, (int)C);
	return 0;
}

static double frobenius(const double *x, size_t len)
{
	return cblas_dnrm2((int)len, x, 1);
}

bool trn__slmc_balance_fits(const trn__slmc_balance *bal, double B, size_t d1, uint32_t C)
{
	if (!bal)
		return true;
	/* ||p0|| = ||c|| / ||q||, strictly inside the margin the solve keeps. */
	return frobenius(bal->c, C) < B * (1.0 - 0x1p-30) * frobenius(bal->q, d1);
}

void trn__slmc_project(double *theta, const trn__slmc_balance *bal, double B, size_t d1,
		       uint32_t C)
{
	size_t len = d1 * C;
	double qq = 1.0, p0n2 = 0.0, n2;

	if (bal) {
		/* On the subspace, theta - p0 (p0 = q c^T / ||q||^2) is theta
		 * with each column's q component removed, and orthogonal to p0. */
		qq = cblas_ddot((int)d1, bal->q, 1, bal->q, 1);
		p0n2 = cblas_ddot((int)C, bal->c, 1, bal->c, 1) / qq;
		for (size_t k = 0; k < C; k++)
			cblas_daxpy((int)d1, -cblas_ddot((int)d1, bal->q, 1, theta + k, (int)C) / qq,
				    bal->q, 1, theta + k, (int)C);
	}
	n2 = cblas_ddot((int)len, theta, 1, theta, 1);
	if (n2 > B * B - p0n2)
		cblas_dscal((int)len, sqrt((B * B - p0n2) / n2), theta, 1);
	if (bal)
		cblas_dger(CblasRowMajor, (int)d1, (int)C, 1.0 / qq, bal->q, 1, bal->c, 1, theta,
			   (int)C);
}

int trn__slmc_ridge(const double *a, const double *u, size_t n, const trn_slmc_params *p,
		    double reg_w, const double *v, const trn__slmc_balance *bal,
		    trn__slmc_ws *ws, double *ret_theta, acct_error *err)
{
	size_t len = ws->d1 * ws->C;
	double target = p->max_norm * (1.0 - 0x1p-40);
	int rc;

	ridge_system(a, u, n, p, reg_w, v, ws);
	rc = ridge_cholesky(ws, bal, ret_theta, err);
	if (rc != 0)
		return rc;
	if (frobenius(ret_theta, len) > p->max_norm) {
		rc = ridge_ball(ws, bal, p->max_norm, ret_theta, err);
		if (rc != 0)
			return rc;
	}
	/* Rounding may leave the norm a few ulps above B; the bound on the
	 * gradient (Theorem 1) needs ||theta|| <= B however the norm is
	 * summed, so land a margin of 2^-40 inside (the solve's error bound
	 * in trn_slmc_sensitivity adds 2^-40 B for the move). */
	if (frobenius(ret_theta, len) > target)
		trn__slmc_project(ret_theta, bal, target, ws->d1, ws->C);
	return 0;
}

int trn__slmc_local_update(const double *a, size_t n, const trn_slmc_params *p, double reg_w,
			   const double *z, const double *v, const trn__slmc_balance *bal,
			   trn__slmc_ws *ws, double *ret_theta, acct_error *err)
{
	if (n > ws->cap)
		return acct_error_set(err, ACCT_EINTERNAL, "", "workspace too small");
	trn__slmc_outputs(z, a, n, ws->d1, ws->C, ws->f);
	for (size_t i = 0; i < n; i++)
		trn__slmc_memberships(ws->f + i * ws->C, ws->C, p->fuzzifier, ws->u + i * ws->C);
	return trn__slmc_ridge(a, ws->u, n, p, reg_w, v, bal, ws, ret_theta, err);
}
