/*
 * trn_slmc_internal.h: names shared by trn_slmc.c, trn_slmc_admm.c and the
 * slmc unit tests.  Nothing here is part of the public API.
 */
#ifndef TRN_SLMC_INTERNAL_H
#define TRN_SLMC_INTERNAL_H

#include <gsl/gsl_eigen.h>

#include "trn.h"

/*
 * The least relative slack on Delta for the local solve's rounding; the
 * worst-case one, trn__slmc_solve_slack, is larger at every row cap the
 * limits allow (docs/slmc.md, Sec. 4).
 */
#define TRN_SLMC_SOLVE_SLACK 0x1p-20

/*
 * The argued margin K on the factorisation's backward error
 * d1 (3 d1 + 1) u ||H|| (Higham 2002, Thm 10.4): it covers the second
 * solve of the balance constraint, the eigendecomposition of the ball path
 * and the bisection's 1e-15 in mu, whose constants are not proven here
 * (docs/slmc.md, Sec. 4).
 */
#define TRN_SLMC_SOLVE_ERR_UNITS 8.0

/*
 * Rows per block when H and R sum the data (trn_slmc_admm.c): an entry of
 * either then carries at most TRN_SLMC_SUM_BLOCK + ceil(n_cap /
 * TRN_SLMC_SUM_BLOCK) roundings, not n_cap.
 */
#define TRN_SLMC_SUM_BLOCK 4096

/*
 * W, the rounding units of one upload per unit of ||H|| ||theta|| / rho,
 * for learners of at most n_cap rows: K d1 (3 d1 + 1) + 2 m + 2 C + 14
 * with m = TRN_SLMC_SUM_BLOCK + ceil(n_cap / TRN_SLMC_SUM_BLOCK), d1 = D + 1
 * (docs/slmc.md, Sec. 4).
 */
double trn__slmc_rounding_units(const trn_slmc_params *p, double n_cap);

/*
 * The relative slack on Delta_ar for the rounding that scales with
 * lambda n / rho, for tables of at most n_cap rows (a public cap, never a
 * table's count): max(2^-20, 2 n_cap u W), u = 2^-53, both uploads of a
 * neighbouring pair counted.  trn_slmc_sensitivity uses n_cap =
 * DPG_MAX_TRAIN_EXAMPLES.
 */
double trn__slmc_solve_slack(const trn_slmc_params *p, double n_cap);

/*
 * FCM memberships of one row in the label space (Bezdek 1981, eq. 11.3a,
 * with label-space distances as in Wang and Chen 2013): d_k = ||f - y_k||^2
 * for one-hot y_k, u_k = 1 / sum_l (d_k / d_l)^(1/(m-1)); when some d_k are
 * 0, u is uniform on them.  f and ret_u have C entries.
 */
void trn__slmc_memberships(const double *f, uint32_t C, double m, double *ret_u);

/* The same closed form from C squared distances, in place: dist[k] becomes
 * u_k.  Distances that give no finite weights (all inf, or a NaN) give the
 * uniform memberships 1/C. */
void trn__slmc_fcm_weights(double *dist, uint32_t C, double m);

/*
 * Fuzzy c-means (Bezdek 1981, eqs. 11.3a-b) on the rows of a PUBLIC table:
 * centres seeded by k-means++ (Arthur and Vassilvitskii 2007) from `rng`,
 * then TRN_SLMC_FCM_ROUNDS rounds of the membership and centre updates.
 * Writes C x d centres.
 */
#define TRN_SLMC_FCM_ROUNDS 100
int trn__slmc_fcm_centres(const trn_dataset *pub, uint32_t C, double m, mech_rng *rng,
			  double *ret_centres, acct_error *err);

/* FCM memberships of one row x (d) to public centres (C x d). */
void trn__slmc_centre_memberships(const double *x, size_t d, const double *centres,
				  uint32_t C, double m, double *ret_u);

/*
 * The balance constraint of the local solve (docs/slmc.md, Sec. 2):
 * q^T theta = c^T, i.e. the mean label-space output over the public rows,
 * whose mean mapped row is q (d1 entries, last 1), equals c (C entries,
 * their mean FCM membership).  Public, so both neighbouring tables see the
 * same feasible set.
 */
typedef struct trn__slmc_balance {
	const double *q;
	const double *c;
} trn__slmc_balance;

/*
 * Projects theta (d1 x C) in place onto {q^T theta = c^T} (when bal is not
 * NULL) and then onto the ball ||theta||_F <= B within it: the Euclidean
 * projection onto their intersection, since the intersection is the ball
 * of radius sqrt(B^2 - ||p0||^2) about p0 = q c^T / ||q||^2 in that
 * subspace.  Requires ||p0|| < B (trn__slmc_balance_fits).
 */
void trn__slmc_project(double *theta, const trn__slmc_balance *bal, double B, size_t d1,
		       uint32_t C);

/* Whether the feasible set {q^T theta = c^T, ||theta|| <= B} has an
 * interior point: ||c|| / ||q|| < B (always, without a constraint). */
bool trn__slmc_balance_fits(const trn__slmc_balance *bal, double B, size_t d1, uint32_t C);

/* Workspace of the local solve, for up to `cap` rows of D+1 columns. */
typedef struct trn__slmc_ws {
	size_t cap;
	size_t d1;             /* D + 1 */
	uint32_t C;
	double *f;             /* cap x C: label-space outputs */
	double *u;             /* cap x C: memberships, then 2 lambda u^m */
	double *scaled;        /* cap x d1: sqrt(2 lambda s_i) a_i */
	double *h;             /* d1 x d1 */
	double *r;             /* d1 x C */
	double *evec;          /* d1 x d1 */
	double *eval;          /* d1 */
	double *g;             /* d1 x C */
	double *hq;            /* d1: H^-1 q, or Q^T q */
	double *nu;            /* C: the balance constraint's multipliers */
	gsl_eigen_symmv_workspace *eig;
} trn__slmc_ws;

int trn__slmc_ws_new(size_t cap, size_t d1, uint32_t C, trn__slmc_ws **ret, acct_error *err);
void trn__slmc_ws_free(trn__slmc_ws *ws);

/*
 * The weighted ridge step of one learner with given memberships u (n x C):
 * the minimiser over ||theta||_F <= B and, when bal is not NULL, the
 * balance constraint q^T theta = c^T, of
 *   F(theta) = lambda sum_i sum_k u_ki^m ||theta^T a_i - y_k||^2
 *              + (reg_w / 2) ||W||^2 + (rho / 2) ||theta - v||_F^2
 * (a_i = (phi_i, 1), rows of `a`, n x d1; theta = (W; b^T), d1 x C).  The
 * normal equations H theta = R with H = 2 lambda sum_i s_i a_i a_i^T +
 * diag(reg_w, .., reg_w, 0) + rho I and R = 2 lambda sum_i a_i t_i^T + rho v
 * (s_i = sum_k u_ki^m, t_i = (u_ki^m)_k) by Cholesky; with the balance
 * constraint, H theta + q nu^T = R, q^T theta = c^T, by eliminating nu.
 * When the solution leaves the ball, the trust-region solution (H + mu I
 * in place of H, ||.||_F = B, mu > 0; Moré and Sorensen 1983) by
 * eigendecomposition and bisection on mu.  Writes ret_theta (d1 x C).
 */
int trn__slmc_ridge(const double *a, const double *u, size_t n, const trn_slmc_params *p,
		    double reg_w, const double *v, const trn__slmc_balance *bal,
		    trn__slmc_ws *ws, double *ret_theta, acct_error *err);

/*
 * One learner's upload before noise: memberships of its n rows from the
 * public consensus z (d1 x C), then trn__slmc_ridge towards v = Z - alpha_m.
 * This is the function Theorem 1 of docs/slmc.md bounds.
 */
int trn__slmc_local_update(const double *a, size_t n, const trn_slmc_params *p, double reg_w,
			   const double *z, const double *v, const trn__slmc_balance *bal,
			   trn__slmc_ws *ws, double *ret_theta, acct_error *err);

/* f = theta^T a for n rows of a (n x d1) into ret_f (n x C). */
void trn__slmc_outputs(const double *theta, const double *a, size_t n, size_t d1, uint32_t C,
		       double *ret_f);

/*
 * trn_slmc_check_shape for the rows a run is given, which may be none: the
 * rows of no declared party are dropped after the table as submitted was
 * checked, and how many are left is private (docs/slmc.md, "Privacy
 * unit").  With no row, every learner solves with its regulariser alone.
 */
int trn__slmc_check_run_shape(const trn_slmc_params *p, uint64_t n, size_t d, acct_error *err);

/* a = (phi(x), 1) for n rows of x into ret_a (n x (D+1)); a row whose
 * phi is not all finite gets phi = 0. */
void trn__slmc_features(const trn_rff *rff, const double *x, size_t n, double *ret_a);

/* Allocates a model that takes ownership of rff, with theta zeroed. */
int trn__slmc_model_new(trn_rff *rff, uint32_t C, trn_slmc_model **ret, acct_error *err);

#endif
