/*
 * trn_erm.c: the regularised ERM that the ensemble trainer releases and its
 * local logistic and linear-SVM models train: Newton's method with a
 * Cholesky factorisation of the Hessian and step halving, solved to a
 * stated gradient norm (trn_internal.h).  A leaf of trainers/: the ensemble
 * and its local models both call it, so it lives apart from either.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_internal.h"

/* Newton iterations of the released ERM and of local models; step halvings
 * per iteration. */
#define ENS_MAX_NEWTON 100
#define ENS_MAX_HALVINGS 40

uint32_t trn__ensemble_blocks(uint32_t num_classes)
{
	if (num_classes < 2)
		return 0;
	return num_classes == 2 ? 1 : num_classes;
}

/* ---- the regularised ERM ----------------------------------------------- */

/* a l(t) + (1 - a) l(-t) and its first two derivatives in t. */
static void weighted_loss(trn__loss loss, double t, double a, double *f, double *g, double *h)
{
	if (loss == TRN__LOSS_LOGISTIC) {
		/* log(1 + e^-t) = softplus(-t), computed without overflow; the
		 * derivative of the weighted sum is sigma(t) - a, the second
		 * sigma(t) sigma(-t). */
		double sp_neg = t > 0 ? log1p(exp(-t)) : -t + log1p(exp(t));
		double sig = t >= 0 ? 1.0 / (1.0 + exp(-t)) : exp(t) / (1.0 + exp(t));

		*f = a * sp_neg + (1.0 - a) * (sp_neg + t);
		*g = sig - a;
		*h = sig * (1.0 - sig);
	} else {
		double mp = t < 1.0 ? 1.0 - t : 0.0, mn = -t < 1.0 ? 1.0 + t : 0.0;

		/* max(0, 1 - t)^2 and max(0, 1 + t)^2: a generalised Hessian
		 * (Mangasarian 2002) where the hinge is not twice differentiable. */
		*f = a * mp * mp + (1.0 - a) * mn * mn;
		*g = -2.0 * a * mp + 2.0 * (1.0 - a) * mn;
		*h = 2.0 * a * (mp > 0.0) + 2.0 * (1.0 - a) * (mn > 0.0);
	}
}

typedef struct erm_problem {
	const double *u, *a;
	size_t n, du;
	double lambda;
	trn__loss loss;
	double *t, *dg, *dh;  /* n margins and loss derivatives */
	double *v;            /* n x du scaled rows for the Hessian */
	double *hess;         /* du x du */
	double *grad, *step, *w_try;
} erm_problem;

/* R(w), and when `with_grad` its gradient in pb->grad (and the per-row
 * second derivatives in pb->dh). */
static double erm_eval(erm_problem *pb, const double *w, bool with_grad)
{
	double f = 0.0;

	cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)pb->n, (int)pb->du, 1.0, pb->u,
		    (int)pb->du, w, 1, 0.0, pb->t, 1);
	for (size_t i = 0; i < pb->n; i++) {
		double fi;

		weighted_loss(pb->loss, pb->t[i], pb->a[i], &fi, &pb->dg[i], &pb->dh[i]);
		f += fi;
	}
	f = f / (double)pb->n + 0.5 * pb->lambda * cblas_ddot((int)pb->du, w, 1, w, 1);
	if (with_grad) {
		memcpy(pb->grad, w, pb->du * sizeof(double));
		cblas_dgemv(CblasRowMajor, CblasTrans, (int)pb->n, (int)pb->du,
			    1.0 / (double)pb->n, pb->u, (int)pb->du, pb->dg, 1, pb->lambda,
			    pb->grad, 1);
	}
	return f;
}

/* In-place Cholesky H = L L^T (lower triangle, row-major), then solves
 * L L^T x = b into x.  H is positive definite (lambda I is added), so a
 * non-positive pivot only comes from non-finite input: -1 then. */
static int cholesky_solve(double *h, size_t n, const double *b, double *x)
{
	for (size_t j = 0; j < n; j++) {
		double s = h[j * n + j] - cblas_ddot((int)j, h + j * n, 1, h + j * n, 1);

		if (!(s > 0.0))
			return -1;
		h[j * n + j] = sqrt(s);
		for (size_t i = j + 1; i < n; i++)
			h[i * n + j] = (h[i * n + j] - cblas_ddot((int)j, h + i * n, 1, h + j * n, 1)) /
				       h[j * n + j];
	}
	for (size_t i = 0; i < n; i++)
		x[i] = (b[i] - cblas_ddot((int)i, h + i * n, 1, x, 1)) / h[i * n + i];
	for (size_t i = n; i-- > 0;) {
		double s = x[i];

		for (size_t k = i + 1; k < n; k++)
			s -= h[k * n + i] * x[k];
		x[i] = s / h[i * n + i];
	}
	return 0;
}

/*
 * The Newton direction -H^-1 grad, H = V^T V + lambda I with V's rows
 * sqrt(l''_i / n) u_i.  With fewer rows than inputs (a party's local model)
 * the n x n system of the Woodbury identity is solved instead:
 * H^-1 g = (g - V^T (V V^T + lambda I)^-1 V g) / lambda.
 */
static int newton_direction(erm_problem *pb)
{
	size_t n = pb->n, du = pb->du;

	for (size_t i = 0; i < n; i++) {
		double c = sqrt(pb->dh[i] / (double)n);

		for (size_t j = 0; j < du; j++)
			pb->v[i * du + j] = c * pb->u[i * du + j];
	}
	if (n >= du) {
		cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, (int)du, (int)n, 1.0, pb->v,
			    (int)du, 0.0, pb->hess, (int)du);
		for (size_t j = 0; j < du; j++)
			pb->hess[j * du + j] += pb->lambda;
		if (cholesky_solve(pb->hess, du, pb->grad, pb->step) < 0)
			return -1;
		cblas_dscal((int)du, -1.0, pb->step, 1);
		return 0;
	}
	cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)n, (int)du, 1.0, pb->v,
		    (int)du, 0.0, pb->hess, (int)n);
	for (size_t i = 0; i < n; i++)
		pb->hess[i * n + i] += pb->lambda;
	cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)du, 1.0, pb->v, (int)du, pb->grad,
		    1, 0.0, pb->t, 1);
	if (cholesky_solve(pb->hess, n, pb->t, pb->dg) < 0)
		return -1;
	/* step = -(g - V^T s) / lambda; t and dg are recomputed by the next
	 * evaluation. */
	memcpy(pb->step, pb->grad, du * sizeof(double));
	cblas_dgemv(CblasRowMajor, CblasTrans, (int)n, (int)du, -1.0, pb->v, (int)du, pb->dg, 1,
		    1.0, pb->step, 1);
	cblas_dscal((int)du, -1.0 / pb->lambda, pb->step, 1);
	return 0;
}

/*
 * Step halving: the first of w + 2^-k step that lowers R or the gradient
 * norm (near the optimum R stops resolving, the gradient still does).
 * Returns 0 with w, f, gnorm updated, or -1 when no step helps.
 */
static int newton_step(erm_problem *pb, double *w, double *f, double *gnorm)
{
	double t = 1.0;

	for (int k = 0; k < ENS_MAX_HALVINGS; k++, t *= 0.5) {
		double f_try, g_try;

		for (size_t j = 0; j < pb->du; j++)
			pb->w_try[j] = w[j] + t * pb->step[j];
		f_try = erm_eval(pb, pb->w_try, true);
		g_try = cblas_dnrm2((int)pb->du, pb->grad, 1);
		if (isfinite(f_try) && (f_try < *f || g_try < *gnorm)) {
			memcpy(w, pb->w_try, pb->du * sizeof(double));
			*f = f_try;
			*gnorm = g_try;
			return 0;
		}
	}
	return -1;
}

static void erm_problem_free(erm_problem *pb)
{
	free(pb->t);
	free(pb->dg);
	free(pb->dh);
	free(pb->v);
	free(pb->hess);
	free(pb->grad);
	free(pb->step);
	free(pb->w_try);
}

static int erm_problem_alloc(erm_problem *pb)
{
	pb->t = malloc(pb->n * sizeof(double));
	pb->dg = malloc(pb->n * sizeof(double));
	pb->dh = malloc(pb->n * sizeof(double));
	pb->v = malloc(pb->n * pb->du * sizeof(double));
	pb->hess = malloc((pb->n < pb->du ? pb->n * pb->n : pb->du * pb->du) * sizeof(double));
	pb->grad = malloc(pb->du * sizeof(double));
	pb->step = malloc(pb->du * sizeof(double));
	pb->w_try = malloc(pb->du * sizeof(double));
	return pb->t && pb->dg && pb->dh && pb->v && pb->hess && pb->grad && pb->step &&
			       pb->w_try ? 0 : -1;
}

int trn__erm_solve(const double *u, size_t n, size_t du, const double *a, double lambda,
		   trn__loss loss, double tol, bool must_converge, double *w, acct_error *err)
{
	erm_problem pb = {.u = u, .a = a, .n = n, .du = du, .lambda = lambda, .loss = loss};
	double f, gnorm;
	int rc = 0;

	if (n == 0 || du == 0 || !(lambda > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/lambda", "empty or bad ERM");
	if (erm_problem_alloc(&pb) < 0) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for the ERM");
		goto out;
	}
	memset(w, 0, du * sizeof(double));
	f = erm_eval(&pb, w, true);
	gnorm = cblas_dnrm2((int)du, pb.grad, 1);
	for (int it = 0; it < ENS_MAX_NEWTON && gnorm > tol; it++)
		if (newton_direction(&pb) < 0 || newton_step(&pb, w, &f, &gnorm) < 0)
			break;
	if (must_converge && !(gnorm <= tol))
		rc = acct_error_set(err, ACCT_EINTERNAL, "",
				    "the ERM did not reach its gradient tolerance");
out:
	erm_problem_free(&pb);
	return rc;
}
