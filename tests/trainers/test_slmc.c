/*
 * test_slmc.c: unit tests of the slmc trainer: random Fourier features,
 * the membership and ridge steps against their optimality conditions and a
 * direct solve, the sensitivity bound on random neighbouring tables, the
 * event and its calibration, parameter checks, Hungarian matching and NMI.
 * Every expected value is a closed form or an independent computation here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_linalg.h>

#include "trn_slmc_internal.h"
#include "trn_test_rng.h"

/* ---- helpers --------------------------------------------------------------- */

/* This file's streams: trn_test_seeded(seed_prefix, tag). */
static const uint8_t seed_prefix[2] = {0x51, 0x3c};

/* A random point of the probability simplex with C entries. */
static void random_simplex(mech_rng *rng, uint32_t C, double *u)
{
	double s = 0.0;

	for (uint32_t k = 0; k < C; k++) {
		u[k] = -log(1.0 - trn_test_uniform(rng));
		s += u[k];
	}
	for (uint32_t k = 0; k < C; k++)
		u[k] /= s;
}

/* ---- random Fourier features ------------------------------------------------ */

/* Mean |phi(x).phi(y) - exp(-gamma ||x-y||^2)| over all pairs of P points,
 * averaged over `draws` independent maps. */
static double rff_error(const double *x, size_t P, uint32_t d, uint32_t D, double gamma,
			int draws, uint8_t tag)
{
	double *phi = malloc(P * D * sizeof(double)), err = 0.0;
	size_t pairs = 0;

	cr_assert_not_null(phi);
	for (int r = 0; r < draws; r++) {
		mech_rng *rng = trn_test_seeded(seed_prefix, (uint8_t)(tag + r));
		trn_rff *f = NULL;

		cr_assert_eq(trn_rff_new(d, D, gamma, rng, &f, NULL), 0);
		trn_rff_map(f, x, P, phi);
		for (size_t i = 0; i < P; i++) {
			double n2 = 0.0;

			for (uint32_t j = 0; j < D; j++)
				n2 += phi[i * D + j] * phi[i * D + j];
			cr_assert_leq(n2, 2.0 + 1e-12, "||phi||^2 = %g > 2", n2);
			for (size_t k = i + 1; k < P; k++) {
				double dot = 0.0, dist = 0.0;

				for (uint32_t j = 0; j < D; j++)
					dot += phi[i * D + j] * phi[k * D + j];
				for (uint32_t j = 0; j < d; j++)
					dist += (x[i * d + j] - x[k * d + j]) *
						(x[i * d + j] - x[k * d + j]);
				err += fabs(dot - exp(-gamma * dist));
				pairs++;
			}
		}
		trn_rff_free(f);
		mech_rng_free(rng);
	}
	free(phi);
	return err / (double)pairs;
}

Test(rff, kernel_error_shrinks_like_one_over_sqrt_D)
{
	enum { P = 24, d = 5 };
	static const uint32_t Ds[] = {64, 256, 1024, 4096};
	double x[P * d], e[4];
	mech_rng *rng = trn_test_seeded(seed_prefix, 1);

	/* Points at distances where the kernel takes values across (0, 1). */
	for (size_t i = 0; i < P * d; i++)
		x[i] = 0.5 * trn_test_normal(rng);
	mech_rng_free(rng);
	for (int k = 0; k < 4; k++)
		e[k] = rff_error(x, P, d, Ds[k], 0.7, 6, (uint8_t)(10 + 10 * k));
	/* The error of a mean of D bounded iid terms is O(1/sqrt(D)): each
	 * quadrupling of D should halve it.  Allow 1.5 to 2.7 per step, and
	 * require the product of the three steps near 8. */
	for (int k = 0; k < 3; k++) {
		double ratio = e[k] / e[k + 1];

		cr_assert(ratio > 1.5 && ratio < 2.7, "D %u -> %u: error %g -> %g (ratio %g)",
			  Ds[k], Ds[k + 1], e[k], e[k + 1], ratio);
	}
	cr_assert(e[0] / e[3] > 5.0 && e[0] / e[3] < 13.0, "ratio %g", e[0] / e[3]);
	/* And the constant is right: sd of one term is at most 1, so the
	 * mean absolute error is at most sqrt(2/pi) * 1 / sqrt(D) roughly. */
	cr_assert_lt(e[3], 1.0 / sqrt(4096.0), "error %g at D = 4096", e[3]);
}

Test(rff, refuses_bad_arguments)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 2);
	trn_rff *f = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(trn_rff_new(3, 0, 1.0, rng, &f, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/features");
	acct_error_init(&err);
	cr_assert_eq(trn_rff_new(3, 10, -1.0, rng, &f, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/gamma");
	acct_error_init(&err);
	cr_assert_eq(trn_rff_new(3, 10, NAN, rng, &f, &err), ACCT_EINVAL);
	cr_assert_null(f);
	mech_rng_free(rng);
}

/* ---- matching and NMI ----------------------------------------------------- */

/* The minimum of sum_i cost[i][perm[i]] over all permutations of n <= 7,
 * by Heap's algorithm. */
static double brute_min_cost(const double *cost, size_t n)
{
	size_t perm[8], c[8] = {0}, i = 1;
	double best, s = 0.0;

	for (size_t k = 0; k < n; k++)
		perm[k] = k;
	for (size_t k = 0; k < n; k++)
		s += cost[k * n + perm[k]];
	best = s;
	while (i < n) {
		if (c[i] < i) {
			size_t j = i % 2 == 0 ? 0 : c[i], t = perm[j];

			perm[j] = perm[i];
			perm[i] = t;
			s = 0.0;
			for (size_t k = 0; k < n; k++)
				s += cost[k * n + perm[k]];
			if (s < best)
				best = s;
			c[i]++;
			i = 1;
		} else {
			c[i] = 0;
			i++;
		}
	}
	return best;
}

Test(match, hungarian_equals_brute_force_on_random_cases)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 3);

	for (int trial = 0; trial < 400; trial++) {
		size_t n = 1 + (size_t)trn_test_below(rng, 7), assign[7];
		double cost[49], total = 0.0, brute;
		bool seen[7] = {false};

		for (size_t k = 0; k < n * n; k++)
			/* Small integers half the time: many ties. */
			cost[k] = trial % 2 ? (double)trn_test_below(rng, 5) - 2.0 : 10.0 * trn_test_normal(rng);
		cr_assert_eq(trn_match_assign(cost, n, assign, NULL), 0);
		for (size_t i = 0; i < n; i++) {
			cr_assert_lt(assign[i], n);
			cr_assert(!seen[assign[i]], "column %zu used twice", assign[i]);
			seen[assign[i]] = true;
			total += cost[i * n + assign[i]];
		}
		brute = brute_min_cost(cost, n);
		cr_assert(fabs(total - brute) <= 1e-9 * (1.0 + fabs(brute)),
			  "trial %d n %zu: hungarian %.12g, brute force %.12g", trial, n, total,
			  brute);
	}
	mech_rng_free(rng);
}

/* Best accuracy over every injective map of C clusters into K >= C classes
 * (C <= 5), by enumerating maps as base-K numbers. */
static double brute_accuracy(const uint32_t *cl, const uint32_t *lab, size_t n, uint32_t C,
			     uint32_t K)
{
	size_t total = 1, best = 0;

	for (uint32_t k = 0; k < C; k++)
		total *= K;
	for (size_t code = 0; code < total; code++) {
		uint32_t map[5];
		bool used[8] = {false}, ok = true;
		size_t c = code, hit = 0;

		for (uint32_t k = 0; k < C; k++) {
			map[k] = (uint32_t)(c % K);
			c /= K;
			if (used[map[k]])
				ok = false;
			used[map[k]] = true;
		}
		if (!ok)
			continue;
		for (size_t i = 0; i < n; i++)
			hit += map[cl[i]] == lab[i];
		if (hit > best)
			best = hit;
	}
	return (double)best / (double)n;
}

Test(match, clustering_accuracy_equals_brute_force)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 4);

	for (int trial = 0; trial < 200; trial++) {
		uint32_t C = 2 + (uint32_t)trn_test_below(rng, 4), K = C + (uint32_t)trn_test_below(rng, 3);
		size_t n = 1 + (size_t)trn_test_below(rng, 40);
		uint32_t cl[40], lab[40];
		double acc, acc_t;

		if (K > 8)
			K = 8;
		for (size_t i = 0; i < n; i++) {
			cl[i] = (uint32_t)trn_test_below(rng, C);
			lab[i] = (uint32_t)trn_test_below(rng, K);
		}
		cr_assert_eq(trn_clustering_accuracy(cl, lab, n, C, K, &acc, NULL), 0);
		cr_assert_float_eq(acc, brute_accuracy(cl, lab, n, C, K), 1e-12,
				   "trial %d", trial);
		/* More clusters than classes: the transpose has the same optimum. */
		cr_assert_eq(trn_clustering_accuracy(lab, cl, n, K, C, &acc_t, NULL), 0);
		cr_assert_float_eq(acc_t, acc, 1e-12, "trial %d transposed", trial);
	}
	mech_rng_free(rng);
}

Test(match, nmi_hand_cases)
{
	uint32_t a[400], b[400];
	double v, expect, hu, hv, mi;
	acct_error err;

	/* Identical partitions under a relabelling: 1. */
	for (size_t i = 0; i < 400; i++) {
		a[i] = (uint32_t)(i % 3);
		b[i] = (uint32_t)((i + 1) % 3);
	}
	cr_assert_eq(trn_nmi(a, b, 400, 3, 3, &v, NULL), 0);
	cr_assert_float_eq(v, 1.0, 1e-12);
	/* Exactly independent partitions (a product table): 0. */
	for (size_t i = 0; i < 400; i++) {
		a[i] = (uint32_t)(i % 2);
		b[i] = (uint32_t)((i / 2) % 4);
	}
	cr_assert_eq(trn_nmi(a, b, 400, 2, 4, &v, NULL), 0);
	cr_assert_float_eq(v, 0.0, 1e-12);
	/* clusters {0,0,1,1}, labels {0,0,0,1}: p_U = (1/2, 1/2), p_V = (3/4,
	 * 1/4), cells 1/2, 1/4, 1/4 (worked by hand). */
	a[0] = 0, a[1] = 0, a[2] = 1, a[3] = 1;
	b[0] = 0, b[1] = 0, b[2] = 0, b[3] = 1;
	mi = 0.5 * log(4.0 / 3.0) + 0.25 * log(2.0 / 3.0) + 0.25 * log(2.0);
	hu = log(2.0);
	hv = -(0.75 * log(0.75) + 0.25 * log(0.25));
	expect = mi / (0.5 * (hu + hv));
	cr_assert_eq(trn_nmi(a, b, 4, 2, 2, &v, NULL), 0);
	cr_assert_float_eq(v, expect, 1e-12, "nmi %.15g, by hand %.15g", v, expect);
	/* TRN_NO_CLASS rows are skipped; all skipped is an error. */
	b[3] = TRN_NO_CLASS;
	cr_assert_eq(trn_nmi(a, b, 4, 2, 2, &v, NULL), 0);
	/* Left: clusters {0,0,1}, one class: I = 0 while H(U) > 0. */
	cr_assert_float_eq(v, 0.0, 1e-12);
	for (size_t i = 0; i < 4; i++)
		b[i] = TRN_NO_CLASS;
	acct_error_init(&err);
	cr_assert_eq(trn_nmi(a, b, 4, 2, 2, &v, &err), ACCT_EINVAL);
	a[0] = 7;
	b[0] = 0;
	cr_assert_eq(trn_clustering_accuracy(a, b, 4, 2, 2, &v, NULL), ACCT_EINVAL);
}

/* ---- membership step ------------------------------------------------------- */

/* Squared distance of f to the one-hot code e_k. */
static double code_dist(const double *f, uint32_t C, uint32_t k)
{
	double s = 0.0;

	for (uint32_t l = 0; l < C; l++)
		s += (f[l] - (l == k)) * (f[l] - (l == k));
	return s;
}

Test(membership, satisfies_kkt_of_its_subproblem)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 5);

	/* min sum_k u_k^m d_k over the simplex is convex for m > 1; its KKT
	 * conditions with all d_k > 0 are u_k > 0, sum u = 1 and m u_k^(m-1)
	 * d_k = mu for every k (Bezdek 1981, Theorem 11.1). */
	for (int trial = 0; trial < 500; trial++) {
		uint32_t C = 2 + (uint32_t)trn_test_below(rng, 8);
		double f[10], u[10], m = 1.05 + 4.0 * trn_test_uniform(rng), sum = 0.0, mu0;

		for (uint32_t k = 0; k < C; k++)
			f[k] = (trial % 3 == 0 ? 30.0 : 1.0) * trn_test_normal(rng);
		trn__slmc_memberships(f, C, m, u);
		mu0 = m * pow(u[0], m - 1.0) * code_dist(f, C, 0);
		for (uint32_t k = 0; k < C; k++) {
			double muk = m * pow(u[k], m - 1.0) * code_dist(f, C, k);

			cr_assert(u[k] > 0.0 && u[k] <= 1.0, "u_%u = %g", k, u[k]);
			cr_assert(fabs(muk - mu0) <= 1e-9 * mu0, "trial %d k %u: %.15g vs %.15g",
				  trial, k, muk, mu0);
			sum += u[k];
		}
		cr_assert_float_eq(sum, 1.0, 1e-12);
	}
	mech_rng_free(rng);
}

Test(membership, exact_hit_takes_the_whole_mass)
{
	double f[3] = {0.0, 1.0, 0.0}, u[3];

	trn__slmc_memberships(f, 3, 2.0, u);
	cr_assert_float_eq(u[1], 1.0, 0.0);
	cr_assert_float_eq(u[0] + u[2], 0.0, 0.0);
}

/* ---- ridge step -------------------------------------------------------------- */

typedef struct ridge_case {
	size_t n, d1;
	uint32_t C;
	double *a, *u, *v;
	double *q, *c;           /* a random public balance constraint */
	trn__slmc_balance bal;
	const trn__slmc_balance *use;  /* &bal or NULL */
	trn_slmc_params p;
	double reg_w;
} ridge_case;

static void ridge_case_make(ridge_case *rc, mech_rng *rng, size_t n, size_t D, uint32_t C)
{
	rc->n = n;
	rc->d1 = D + 1;
	rc->C = C;
	rc->a = malloc((n ? n : 1) * rc->d1 * sizeof(double));
	rc->u = malloc((n ? n : 1) * C * sizeof(double));
	rc->v = malloc(rc->d1 * C * sizeof(double));
	rc->q = malloc(rc->d1 * sizeof(double));
	rc->c = malloc(C * sizeof(double));
	cr_assert(rc->a && rc->u && rc->v && rc->q && rc->c);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < D; j++)
			rc->a[i * rc->d1 + j] = sqrt(2.0 / (double)D) * cos(6.3 * trn_test_uniform(rng));
		rc->a[i * rc->d1 + D] = 1.0;
		random_simplex(rng, C, rc->u + i * C);
	}
	for (size_t j = 0; j < rc->d1 * C; j++)
		rc->v[j] = trn_test_normal(rng);
	/* The constraint of a run: q a mean mapped row (last entry 1), c a
	 * point of the simplex; used in every other case. */
	for (size_t j = 0; j < D; j++)
		rc->q[j] = sqrt(2.0 / (double)D) * cos(6.3 * trn_test_uniform(rng));
	rc->q[D] = 1.0;
	random_simplex(rng, C, rc->c);
	rc->bal.q = rc->q;
	rc->bal.c = rc->c;
	rc->use = trn_test_below(rng, 2) ? &rc->bal : NULL;
	trn_slmc_params_default(&rc->p);
	rc->p.clusters = C;
	rc->p.features = (uint32_t)D;
	rc->p.lambda = 0.7;
	rc->p.rho = 0.9;
	rc->p.fuzzifier = 1.7;
	rc->p.max_norm = 1e6;
	rc->reg_w = 0.25;
}

/*
 * A random case: D features in [2, 2 + d_span), C classes in [2, 6) and n
 * rows in [n_min, n_min + n_span), drawn in that order.
 */
static void ridge_case_draw(ridge_case *rc, mech_rng *rng, uint64_t d_span, size_t n_min,
			    uint64_t n_span)
{
	size_t D = 2 + (size_t)trn_test_below(rng, d_span);
	uint32_t C = 2 + (uint32_t)trn_test_below(rng, 4);

	ridge_case_make(rc, rng, n_min + (size_t)trn_test_below(rng, n_span), D, C);
}

static void ridge_case_free(ridge_case *rc)
{
	free(rc->a);
	free(rc->u);
	free(rc->v);
	free(rc->q);
	free(rc->c);
}

/* Removes from each column of x (d1 x C) its component along q: the
 * projection onto the directions the balance constraint leaves free. */
static void remove_q(const ridge_case *rc, double *x)
{
	double qq = 0.0;

	for (size_t j = 0; j < rc->d1; j++)
		qq += rc->q[j] * rc->q[j];
	for (size_t k = 0; k < rc->C; k++) {
		double dot = 0.0;

		for (size_t j = 0; j < rc->d1; j++)
			dot += rc->q[j] * x[j * rc->C + k];
		for (size_t j = 0; j < rc->d1; j++)
			x[j * rc->C + k] -= dot / qq * rc->q[j];
	}
}

/* max_k |q^T theta_k - c_k|: how far theta is from the constraint. */
static double balance_gap(const ridge_case *rc, const double *theta)
{
	double gap = 0.0;

	for (size_t k = 0; k < rc->C; k++) {
		double dot = 0.0;

		for (size_t j = 0; j < rc->d1; j++)
			dot += rc->q[j] * theta[j * rc->C + k];
		gap = fmax(gap, fabs(dot - rc->c[k]));
	}
	return gap;
}

/* The gradient of F (trn__slmc_ridge's comment), written out from the
 * objective term by term, independently of the code's normal equations. */
static void ridge_gradient(const ridge_case *rc, const double *theta, double *g)
{
	size_t d1 = rc->d1, C = rc->C;
	double lam = rc->p.lambda, m = rc->p.fuzzifier;

	for (size_t j = 0; j < d1 * C; j++)
		g[j] = rc->p.rho * (theta[j] - rc->v[j]) + (j < (d1 - 1) * C ? rc->reg_w * theta[j] : 0);
	for (size_t i = 0; i < rc->n; i++) {
		const double *a = rc->a + i * d1;

		for (size_t k = 0; k < C; k++) {
			double w = pow(rc->u[i * C + k], m);

			/* d/dtheta of w ||theta^T a - e_k||^2 = 2 w a (theta^T a - e_k)^T */
			for (size_t c = 0; c < C; c++) {
				double fc = 0.0;

				for (size_t j = 0; j < d1; j++)
					fc += theta[j * C + c] * a[j];
				fc -= (c == k);
				for (size_t j = 0; j < d1; j++)
					g[j * C + c] += 2.0 * lam * w * fc * a[j];
			}
		}
	}
}

/*
 * The KKT system of the ridge step written from the objective, not from the
 * code's normal equations: F is quadratic, so its gradient is affine and
 * the Hessian's columns are g(e_q) - g(0).  With the balance constraint the
 * system is bordered: [Hess Q^T; Q 0] (theta, nu) = (-g(0), c), Q the C rows
 * q^T theta_k.  Solved by GSL's LU into ret (len + C entries).
 */
static void ridge_direct(const ridge_case *rc, double *ret)
{
	size_t len = rc->d1 * rc->C, nc = rc->use ? rc->C : 0, N = len + nc;
	double *hm = calloc(N * N, sizeof(double)), *g0 = malloc(N * sizeof(double));
	double *gq = malloc(len * sizeof(double));
	gsl_permutation *perm = gsl_permutation_alloc(N);
	gsl_matrix_view hv = gsl_matrix_view_array(hm, N, N);
	gsl_vector_view b = gsl_vector_view_array(g0, N), x = gsl_vector_view_array(ret, N);
	int sign;

	cr_assert(hm && g0 && gq && perm);
	memset(ret, 0, N * sizeof(double));
	ridge_gradient(rc, ret, g0);
	for (size_t q = 0; q < len; q++) {
		ret[q] = 1.0;
		ridge_gradient(rc, ret, gq);
		ret[q] = 0.0;
		for (size_t r = 0; r < len; r++)
			hm[r * N + q] = gq[r] - g0[r];
	}
	for (size_t r = 0; r < len; r++)
		g0[r] = -g0[r];
	for (size_t k = 0; k < nc; k++) {
		for (size_t j = 0; j < rc->d1; j++) {
			hm[(len + k) * N + j * rc->C + k] = rc->q[j];
			hm[(j * rc->C + k) * N + len + k] = rc->q[j];
		}
		g0[len + k] = rc->c[k];
	}
	cr_assert_eq(gsl_linalg_LU_decomp(&hv.matrix, perm, &sign), 0);
	cr_assert_eq(gsl_linalg_LU_solve(&hv.matrix, perm, &b.vector, &x.vector), 0);
	gsl_permutation_free(perm);
	free(hm);
	free(g0);
	free(gq);
}

Test(ridge, equals_a_direct_solve_of_the_stationarity_conditions)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 6);
	int balanced = 0;

	for (int trial = 0; trial < 30; trial++) {
		ridge_case rc;
		size_t len;
		trn__slmc_ws *ws = NULL;
		double *theta, *direct;

		ridge_case_draw(&rc, rng, 12, 0, 50);
		len = rc.d1 * rc.C;
		balanced += rc.use != NULL;
		theta = malloc(len * sizeof(double));
		direct = malloc((len + rc.C) * sizeof(double));
		cr_assert_eq(trn__slmc_ws_new(rc.n, rc.d1, rc.C, &ws, NULL), 0);
		cr_assert_eq(trn__slmc_ridge(rc.a, rc.u, rc.n, &rc.p, rc.reg_w, rc.v, rc.use, ws,
					     theta, NULL), 0);
		ridge_direct(&rc, direct);
		for (size_t r = 0; r < len; r++)
			cr_assert(fabs(theta[r] - direct[r]) <= 1e-9 * (1.0 + fabs(direct[r])),
				  "trial %d entry %zu: %.15g vs direct %.15g", trial, r, theta[r],
				  direct[r]);
		if (rc.use)
			cr_assert_leq(balance_gap(&rc, theta), 1e-10);
		trn__slmc_ws_free(ws);
		ridge_case_free(&rc);
		free(theta);
		free(direct);
	}
	cr_assert(balanced >= 5 && balanced <= 25, "%d of 30 cases balanced", balanced);
	mech_rng_free(rng);
}

/* A radius B that cuts the free solution (norm nf) off: with the
 * constraint, between the norm of its nearest point p0 = ||c|| / ||q|| and
 * nf, else between 0 and nf. */
static double ball_radius_inside(const ridge_case *rc, double nf, mech_rng *rng)
{
	double cc = 0.0, qq = 0.0, p0 = 0.0;

	if (rc->use) {
		for (size_t k = 0; k < rc->C; k++)
			cc += rc->c[k] * rc->c[k];
		for (size_t j = 0; j < rc->d1; j++)
			qq += rc->q[j] * rc->q[j];
		p0 = sqrt(cc / qq);
		cr_assert_gt(nf, p0);
	}
	return p0 + (0.05 + 0.9 * trn_test_uniform(rng)) * (nf - p0);
}

Test(ridge, ball_constraint_meets_its_kkt_conditions)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 7);

	for (int trial = 0; trial < 40; trial++) {
		ridge_case rc;
		size_t len;
		trn__slmc_ws *ws = NULL;
		double *free_theta, *theta, *g, nf = 0.0, nt = 0.0, np = 0.0, gt = 0.0, mu;
		double res = 0.0;
		double gn = 0.0;

		ridge_case_draw(&rc, rng, 30, 5, 60);
		len = rc.d1 * rc.C;
		free_theta = malloc(len * sizeof(double));
		theta = malloc(len * sizeof(double));
		g = malloc(len * sizeof(double));
		cr_assert_eq(trn__slmc_ws_new(rc.n, rc.d1, rc.C, &ws, NULL), 0);
		cr_assert_eq(trn__slmc_ridge(rc.a, rc.u, rc.n, &rc.p, rc.reg_w, rc.v, rc.use, ws,
					     free_theta, NULL), 0);
		for (size_t r = 0; r < len; r++)
			nf += free_theta[r] * free_theta[r];
		rc.p.max_norm = ball_radius_inside(&rc, sqrt(nf), rng);
		cr_assert_eq(trn__slmc_ridge(rc.a, rc.u, rc.n, &rc.p, rc.reg_w, rc.v, rc.use, ws,
					     theta, NULL), 0);
		/* Minimiser on the ball with the free one outside: ||theta|| = B
		 * and grad F(theta) + q nu^T = -mu theta with mu > 0, i.e. with
		 * the q components removed from both, g = -mu theta. */
		if (rc.use)
			cr_assert_leq(balance_gap(&rc, theta), 1e-10, "trial %d", trial);
		ridge_gradient(&rc, theta, g);
		memcpy(free_theta, theta, len * sizeof(double));
		if (rc.use) {
			remove_q(&rc, g);
			remove_q(&rc, free_theta);
		}
		for (size_t r = 0; r < len; r++) {
			nt += theta[r] * theta[r];
			np += free_theta[r] * free_theta[r];
			gt += g[r] * free_theta[r];
			gn += g[r] * g[r];
		}
		cr_assert(sqrt(nt) <= rc.p.max_norm, "norm %.17g > B %.17g", sqrt(nt),
			  rc.p.max_norm);
		cr_assert(sqrt(nt) >= rc.p.max_norm * (1.0 - 1e-12));
		mu = -gt / np;
		cr_assert_gt(mu, 0.0);
		for (size_t r = 0; r < len; r++)
			res += (g[r] + mu * free_theta[r]) * (g[r] + mu * free_theta[r]);
		cr_assert(sqrt(res) <= 1e-8 * sqrt(gn), "trial %d: residual %g of %g", trial,
			  sqrt(res), sqrt(gn));
		trn__slmc_ws_free(ws);
		ridge_case_free(&rc);
		free(free_theta);
		free(theta);
		free(g);
	}
	mech_rng_free(rng);
}

/* ---- sensitivity ---------------------------------------------------------- */

typedef struct sens_case {
	trn_slmc_params p;
	trn_rff *rff;
	size_t d, d1, len;
	double *z, *v;
	double *q, *c;                 /* a public balance constraint */
	trn__slmc_balance bal;
	const trn__slmc_balance *use;  /* &bal or NULL */
	double reg_w;
} sens_case;

/* Random parameters, a random public feature map, consensus and centre. */
static void sens_case_make(sens_case *sc, mech_rng *rng)
{
	trn_slmc_params_default(&sc->p);
	sc->p.clusters = 2 + (uint32_t)trn_test_below(rng, 4);
	sc->p.features = 2 + (uint32_t)trn_test_below(rng, 30);
	sc->p.gamma = exp(4.0 * trn_test_uniform(rng) - 2.0);
	sc->p.lambda = exp(6.0 * trn_test_uniform(rng) - 3.0);
	sc->p.rho = exp(4.0 * trn_test_uniform(rng) - 2.0);
	sc->p.max_norm = 1.0 + exp(4.0 * trn_test_uniform(rng) - 2.0);
	sc->p.fuzzifier = 1.1 + 2.0 * trn_test_uniform(rng);
	sc->d = 1 + (size_t)trn_test_below(rng, 5);
	sc->d1 = (size_t)sc->p.features + 1;
	sc->len = sc->d1 * sc->p.clusters;
	sc->reg_w = 1.0 / (double)(1 + trn_test_below(rng, 4));
	cr_assert_eq(trn_rff_new((uint32_t)sc->d, sc->p.features, sc->p.gamma, rng, &sc->rff,
				 NULL), 0);
	sc->z = malloc(sc->len * sizeof(double));
	sc->v = malloc(sc->len * sizeof(double));
	for (size_t j = 0; j < sc->len; j++) {
		sc->z[j] = 3.0 * trn_test_normal(rng);
		sc->v[j] = 3.0 * trn_test_normal(rng);
	}
	/* Half the cases constrained as a run is: q the mean mapped row of
	 * a few random public rows, c a point of the simplex. */
	sc->q = calloc(sc->d1, sizeof(double));
	sc->c = malloc(sc->p.clusters * sizeof(double));
	cr_assert(sc->q && sc->c);
	for (int i = 0; i < 5; i++) {
		double x[5], a[33];

		for (size_t j = 0; j < sc->d; j++)
			x[j] = trn_test_normal(rng);
		trn__slmc_features(sc->rff, x, 1, a);
		for (size_t j = 0; j < sc->d1; j++)
			sc->q[j] += a[j] / 5.0;
	}
	random_simplex(rng, sc->p.clusters, sc->c);
	sc->bal.q = sc->q;
	sc->bal.c = sc->c;
	sc->use = trn_test_below(rng, 2) &&
			  trn__slmc_balance_fits(&sc->bal, sc->p.max_norm, sc->d1,
						 sc->p.clusters) ? &sc->bal : NULL;
}

static void sens_case_free(sens_case *sc)
{
	trn_rff_free(sc->rff);
	free(sc->z);
	free(sc->v);
	free(sc->q);
	free(sc->c);
}

/* One learner's upload (before noise) on rows x (n x d), as the run computes
 * it: features by the public map, then trn__slmc_local_update. */
static void upload(const sens_case *sc, const double *x, size_t n, double *theta)
{
	double *a = malloc((n ? n : 1) * sc->d1 * sizeof(double));
	trn__slmc_ws *ws = NULL;

	cr_assert_not_null(a);
	trn__slmc_features(sc->rff, x, n, a);
	cr_assert_eq(trn__slmc_ws_new(n, sc->d1, sc->p.clusters, &ws, NULL), 0);
	cr_assert_eq(trn__slmc_local_update(a, n, &sc->p, sc->reg_w, sc->z, sc->v, sc->use, ws,
					    theta, NULL), 0);
	trn__slmc_ws_free(ws);
	free(a);
}

static double dist2(const double *a, const double *b, size_t len)
{
	double s = 0.0;

	for (size_t j = 0; j < len; j++)
		s += (a[j] - b[j]) * (a[j] - b[j]);
	return s;
}

/* A random row: mostly near the others, sometimes far (outliers). */
static void random_row(mech_rng *rng, size_t d, double *x)
{
	double scale = trn_test_uniform(rng) < 0.2 ? 50.0 : 1.0;

	for (size_t j = 0; j < d; j++)
		x[j] = scale * trn_test_normal(rng);
}

/*
 * Replace moving row j to another learner: this learner (rows x[0..n))
 * loses row j, a second learner (rows x[1..n]) gains the new row x[n].
 * Returns the round's joint change: the root of the summed squares.  x2 is
 * scratch of n + 1 rows.
 */
static double party_move_change(const sens_case *sc, const double *x, double *x2, size_t n,
				size_t j)
{
	double *t1 = malloc(sc->len * sizeof(double)), *t2 = malloc(sc->len * sizeof(double));
	double *t3 = malloc(sc->len * sizeof(double)), *t4 = malloc(sc->len * sizeof(double));
	double moved;

	cr_assert(t1 && t2 && t3 && t4);
	memcpy(x2, x, n * sc->d * sizeof(double));
	memcpy(x2 + j * sc->d, x + (n - 1) * sc->d, sc->d * sizeof(double));
	upload(sc, x2, n - 1, t2);
	upload(sc, x + sc->d, n, t3);
	upload(sc, x, n, t1);
	memcpy(x2, x + sc->d, n * sc->d * sizeof(double));
	memcpy(x2 + n * sc->d, x + n * sc->d, sc->d * sizeof(double));
	upload(sc, x2, n + 1, t4);
	moved = sqrt(dist2(t1, t2, sc->len) + dist2(t3, t4, sc->len));
	free(t1);
	free(t2);
	free(t3);
	free(t4);
	return moved;
}

Test(sensitivity, realised_change_of_an_upload_never_exceeds_delta)
{
	mech_rng *rng = trn_test_seeded(seed_prefix, 8);
	double worst_ar = 0.0, worst_rep = 0.0, worst_bal = 0.0;
	int balanced = 0;

	for (int trial = 0; trial < 300; trial++) {
		sens_case sc;
		size_t n = 1 + (size_t)trn_test_below(rng, 40), j;
		double *x, *x2, *t0, *t1, *t2, d_ar, d_rep, moved;

		sens_case_make(&sc, rng);
		x = malloc((n + 1) * sc.d * sizeof(double));
		x2 = malloc((n + 1) * sc.d * sizeof(double));
		t0 = malloc(sc.len * sizeof(double));
		t1 = malloc(sc.len * sizeof(double));
		t2 = malloc(sc.len * sizeof(double));
		for (size_t i = 0; i <= n; i++)
			random_row(rng, sc.d, x + i * sc.d);
		sc.p.neighbor = ACCT_ADD_REMOVE;
		d_ar = trn_slmc_sensitivity(&sc.p);
		sc.p.neighbor = ACCT_REPLACE;
		d_rep = trn_slmc_sensitivity(&sc.p);
		/* add/remove: the table with and without its last row. */
		upload(&sc, x, n, t0);
		upload(&sc, x, n + 1, t1);
		moved = sqrt(dist2(t0, t1, sc.len));
		cr_assert(moved <= d_ar, "trial %d add: moved %.17g > Delta %.17g", trial, moved,
			  d_ar);
		worst_ar = fmax(worst_ar, moved / d_ar);
		if (sc.use) {
			balanced++;
			worst_bal = fmax(worst_bal, moved / d_ar);
		}
		/* replace row j by the extra row. */
		j = (size_t)trn_test_below(rng, n);
		memcpy(x2, x, n * sc.d * sizeof(double));
		memcpy(x2 + j * sc.d, x + n * sc.d, sc.d * sizeof(double));
		upload(&sc, x2, n, t2);
		moved = sqrt(dist2(t0, t2, sc.len));
		cr_assert(moved <= d_rep, "trial %d replace: moved %.17g > Delta %.17g", trial,
			  moved, d_rep);
		worst_rep = fmax(worst_rep, moved / d_rep);
		moved = party_move_change(&sc, x, x2, n, j);
		cr_assert(moved <= d_rep, "trial %d party move: %.17g > %.17g", trial, moved, d_rep);
		sens_case_free(&sc);
		free(x);
		free(x2);
		free(t0);
		free(t1);
		free(t2);
	}
	/* Random tables stay well inside the bound (the tight case is the
	 * next test); they must still reach a visible fraction of it. */
	cr_log_info("largest realised / Delta: add_remove %.3f, replace %.3f", worst_ar,
		    worst_rep);
	cr_assert_gt(worst_ar, 0.02, "add_remove never exceeded %.3g of Delta", worst_ar);
	cr_log_info("balanced cases %d, largest realised / Delta among them %.3f", balanced,
		    worst_bal);
	cr_assert_geq(balanced, 60, "only %d cases under the balance constraint", balanced);
	cr_assert_gt(worst_bal, 0.02, "balanced: never exceeded %.3g of Delta", worst_bal);
	mech_rng_free(rng);
}

/*
 * The smallest lambda / rho the parameter checks accept: rho at its cap
 * and lambda from 1e-8 down to its floor 1e-100.  There Theorem 1's move
 * is below the rounding unit of theta's entries, so what separates two
 * neighbours' computed uploads is the solve's rounding, relative to
 * ||theta|| and not to Delta: the realised change must still stay within
 * Delta.  Below the floor lambda is refused at /params/lambda (subnormal
 * terms there moved an upload by 0.4).
 */
Test(sensitivity, realised_change_stays_within_delta_at_the_least_lambda_over_rho)
{
	static const double lambdas[] = {1e-8, 1e-10, 1e-12, 1e-14, 1e-40, 1e-100};
	mech_rng *rng = trn_test_seeded(seed_prefix, 21);
	double worst = 0.0;
	trn_slmc_params p;
	acct_error err;

	for (size_t li = 0; li < sizeof(lambdas) / sizeof(lambdas[0]); li++) {
		for (int trial = 0; trial < 60; trial++) {
			sens_case sc;
			size_t n = 1 + (size_t)trn_test_below(rng, 40);
			double *x, *t0, *t1, delta, moved;

			sens_case_make(&sc, rng);
			sc.p.lambda = lambdas[li];
			sc.p.rho = 1e6;
			cr_assert_eq(trn_slmc_params_validate(&sc.p, NULL), 0);
			x = malloc((n + 1) * sc.d * sizeof(double));
			t0 = malloc(sc.len * sizeof(double));
			t1 = malloc(sc.len * sizeof(double));
			cr_assert(x && t0 && t1);
			for (size_t i = 0; i <= n; i++)
				random_row(rng, sc.d, x + i * sc.d);
			delta = trn_slmc_sensitivity(&sc.p);
			upload(&sc, x, n, t0);
			upload(&sc, x, n + 1, t1);
			moved = sqrt(dist2(t0, t1, sc.len));
			cr_assert(moved <= delta, "lambda %g trial %d: moved %.17g > Delta %.17g",
				  sc.p.lambda, trial, moved, delta);
			worst = fmax(worst, moved / delta);
			sens_case_free(&sc);
			free(x);
			free(t0);
			free(t1);
		}
	}
	cr_log_info("least lambda / rho: largest realised / Delta %.3g", worst);
	mech_rng_free(rng);
	trn_slmc_params_default(&p);
	p.lambda = 0.99e-100;
	acct_error_init(&err);
	cr_assert_eq(trn_slmc_params_validate(&p, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/params/lambda");
	p.lambda = 0x1p-1074;
	cr_assert(isnan(trn_slmc_sensitivity(&p)));
}

Test(sensitivity, delta_is_reached_by_the_extreme_row)
{
	/* Every step of Theorem 1 tight at once: a map with omega = 0 and
	 * phase = 0 (phi = sqrt(2/D) 1, ||a||^2 = 3), an empty learner whose
	 * solution is its centre v = -B a/||a|| e_2^T on the sphere, a public consensus that maps the new row exactly onto
	 * code e_2 (u = e_2, s = 1, t = e_2), and lambda << rho so that the
	 * move is the gradient step 2 lambda ||a|| ||s theta^T a - t|| / rho
	 * = 2 sqrt(3) lambda (sqrt(3) B + 1) / rho. */
	enum { D = 8, C = 3, d = 2 };
	trn_rff rff = {.d = d, .features = D, .gamma = 1.0};
	double omega[D * d] = {0}, phase[D] = {0}, a[D + 1], z[(D + 1) * C] = {0};
	double v[(D + 1) * C] = {0}, t0[(D + 1) * C], t1[(D + 1) * C], x[d] = {0.3, -1.0};
	trn_slmc_params p;
	trn__slmc_ws *ws = NULL;
	double na2 = 0.0, delta, moved;

	rff.omega = omega;
	rff.phase = phase;
	trn_slmc_params_default(&p);
	p.clusters = C;
	p.features = D;
	p.lambda = 1e-4;
	p.rho = 1.0;
	p.max_norm = 2.0;
	trn__slmc_features(&rff, x, 1, a);
	for (size_t j = 0; j <= D; j++)
		na2 += a[j] * a[j];
	cr_assert_float_eq(na2, 3.0, 1e-12);
	for (size_t j = 0; j <= D; j++) {
		z[j * C + 1] = a[j] / na2;
		v[j * C + 1] = -p.max_norm * a[j] / sqrt(na2);
	}
	cr_assert_eq(trn__slmc_ws_new(1, D + 1, C, &ws, NULL), 0);
	cr_assert_eq(trn__slmc_local_update(a, 0, &p, 0.0, z, v, NULL, ws, t0, NULL), 0);
	cr_assert_eq(trn__slmc_local_update(a, 1, &p, 0.0, z, v, NULL, ws, t1, NULL), 0);
	delta = trn_slmc_sensitivity(&p);
	moved = sqrt(dist2(t0, t1, (D + 1) * C));
	cr_assert(moved <= delta, "moved %.17g > Delta %.17g", moved, delta);
	cr_assert(moved >= 0.999 * delta, "moved %.17g, Delta %.17g: bound not tight", moved,
		  delta);
	trn__slmc_ws_free(ws);
}

/*
 * docs/slmc.md, Sec. 4 "Rounding", written out again: the rounding units
 * W = 8 d1 (3 d1 + 1) + 2 m + 2 C + 14 of one upload, m = 4096 +
 * ceil(n_cap / 4096), for learners of at most n_cap rows.
 */
static double doc_units(double D, double C, double n_cap)
{
	double d1 = D + 1.0, m = 4096.0 + ceil(n_cap / 4096.0);

	return 8.0 * d1 * (3.0 * d1 + 1.0) + 2.0 * m + 2.0 * C + 14.0;
}

static double doc_delta_ar(const trn_slmc_params *p)
{
	return 2.0 * sqrt(3.0) * p->lambda * (sqrt(3.0) * p->max_norm + 1.0) / p->rho;
}

/* The documented charged Delta (add_remove) at the row cap N = 10^7:
 * Delta_ar (1 + max(2^-20, 2 N u W)) + 2 (u W B (1 + 1/rho) + 2^-40 B). */
static double doc_delta(const trn_slmc_params *p)
{
	double u = ldexp(1.0, -53), n_cap = 1e7;
	double w = doc_units(p->features, p->clusters, n_cap);
	double slack = fmax(ldexp(1.0, -20), 2.0 * n_cap * u * w);

	return doc_delta_ar(p) * (1.0 + slack) +
	       2.0 * (u * w * p->max_norm * (1.0 + 1.0 / p->rho) + ldexp(p->max_norm, -40));
}

/*
 * Delta charges the worst case of the solve's rounding at the public row
 * cap DPG_MAX_TRAIN_EXAMPLES, not at a table's count: the documented
 * formula at the defaults, at the most features, at the least lambda /
 * rho and under replace, and the documented costs (0.22 % at the defaults,
 * 89 % at D = 4096).
 */
Test(sensitivity, delta_charges_the_worst_case_rounding_at_the_row_cap)
{
	trn_slmc_params p;
	double want, cost;

	trn_slmc_params_default(&p);
	want = doc_delta(&p);
	cr_assert_float_eq(trn_slmc_sensitivity(&p), want, 1e-14 * want);
	cost = want / doc_delta_ar(&p) - 1.0;
	cr_assert(cost > 2.18e-3 && cost < 2.19e-3, "cost at the defaults %.6g", cost);
	p.neighbor = ACCT_REPLACE;
	cr_assert_float_eq(trn_slmc_sensitivity(&p), 2.0 * want, 2e-14 * want);
	p.neighbor = ACCT_ADD_REMOVE;
	p.features = 4096;
	want = doc_delta(&p);
	cr_assert_float_eq(trn_slmc_sensitivity(&p), want, 1e-14 * want);
	cost = want / doc_delta_ar(&p) - 1.0;
	cr_assert(cost > 0.894 && cost < 0.895, "cost at D = 4096 %.6g", cost);
	p.features = 1;
	p.clusters = 100;
	p.lambda = 1e-12;
	p.rho = 1e6;
	want = doc_delta(&p);
	cr_assert_float_eq(trn_slmc_sensitivity(&p), want, 1e-14 * want);
}

/* The relative slack grows with the row cap as documented: max(2^-20,
 * 2 N u W(N)), the floor only for caps far below the limits'. */
Test(sensitivity, slack_grows_with_the_row_cap_as_documented)
{
	static const double caps[] = {1, 1e3, 35000, 1e5, 1e6, 1e7};
	trn_slmc_params p;
	double last = 0.0;

	trn_slmc_params_default(&p);
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		double got = trn__slmc_solve_slack(&p, caps[i]);
		double want = fmax(ldexp(1.0, -20),
				   2.0 * caps[i] * ldexp(1.0, -53) * doc_units(200, 3, caps[i]));

		cr_assert_float_eq(got, want, 1e-14 * want, "cap %g: %.17g, want %.17g", caps[i],
				   got, want);
		cr_assert(got >= last, "cap %g: slack fell", caps[i]);
		last = got;
	}
	cr_assert_eq(trn__slmc_solve_slack(&p, 1), ldexp(1.0, -20));
	/* Past the floor it is linear in the cap, up to W's slow growth. */
	cr_assert_float_eq(trn__slmc_solve_slack(&p, 1e7) / trn__slmc_solve_slack(&p, 1e6),
			   10.0 * doc_units(200, 3, 1e7) / doc_units(200, 3, 1e6), 1e-12);
}

/*
 * A learner of 40,000 rows at D = 200, past the 35,000 rows below which
 * the old relative slack alone covered the worst case: one extra row
 * moves the computed upload by at most Delta, and the same rows summed in
 * the reverse order (an exact change of 0: rounding alone) move it by at
 * most twice the documented error bound of one upload at n rows,
 * n u W(n) Delta_ar + u W(n) B (1 + 1/rho) + 2^-40 B.
 */
Test(sensitivity, realised_change_stays_within_delta_past_35000_rows)
{
	enum { N_ROWS = 40000, D_IN = 2 };
	mech_rng *rng = trn_test_seeded(seed_prefix, 23);
	double *x = malloc((N_ROWS + 1) * D_IN * sizeof(double)), *xr, *t0, *t1, *t2;
	double u = ldexp(1.0, -53), w, bound, delta, moved, reordered;
	sens_case sc = {.d = D_IN, .reg_w = 0.5};

	trn_slmc_params_default(&sc.p);
	sc.d1 = sc.p.features + 1;
	sc.len = sc.d1 * sc.p.clusters;
	cr_assert_eq(trn_rff_new(D_IN, sc.p.features, sc.p.gamma, rng, &sc.rff, NULL), 0);
	sc.z = malloc(sc.len * sizeof(double));
	sc.v = malloc(sc.len * sizeof(double));
	xr = malloc(N_ROWS * D_IN * sizeof(double));
	t0 = malloc(sc.len * sizeof(double));
	t1 = malloc(sc.len * sizeof(double));
	t2 = malloc(sc.len * sizeof(double));
	cr_assert(x && xr && sc.z && sc.v && t0 && t1 && t2);
	for (size_t j = 0; j < sc.len; j++) {
		sc.z[j] = 0.3 * trn_test_normal(rng);
		sc.v[j] = 0.3 * trn_test_normal(rng);
	}
	for (size_t i = 0; i <= N_ROWS; i++)
		random_row(rng, D_IN, x + i * D_IN);
	for (size_t i = 0; i < N_ROWS; i++)
		memcpy(xr + i * D_IN, x + (N_ROWS - 1 - i) * D_IN, D_IN * sizeof(double));
	upload(&sc, x, N_ROWS, t0);
	upload(&sc, x, N_ROWS + 1, t1);
	upload(&sc, xr, N_ROWS, t2);
	delta = trn_slmc_sensitivity(&sc.p);
	moved = sqrt(dist2(t0, t1, sc.len));
	reordered = sqrt(dist2(t0, t2, sc.len));
	w = doc_units(sc.p.features, sc.p.clusters, N_ROWS);
	bound = 2.0 * (N_ROWS * u * w * doc_delta_ar(&sc.p) +
		       u * w * sc.p.max_norm * (1.0 + 1.0 / sc.p.rho) + ldexp(sc.p.max_norm, -40));
	cr_log_info("40,000 rows: extra row %.3g of Delta; reordered %.3g of its bound (%.3g)",
		    moved / delta, reordered / bound, reordered);
	cr_assert(moved <= delta, "moved %.17g > Delta %.17g", moved, delta);
	cr_assert(reordered <= bound, "reordered %.17g > bound %.17g", reordered, bound);
	sens_case_free(&sc);
	free(x);
	free(xr);
	free(t0);
	free(t1);
	free(t2);
	mech_rng_free(rng);
}

/* ---- event, calibration, parameters ---------------------------------------- */

Test(event, is_k_gaussians_priced_as_the_zcdp_closed_form)
{
	trn_slmc_params p;
	acct_event *ev = NULL;
	acct_options opt = {.accountant = ACCT_ZCDP, .zcdp_bun_steinke = true};
	acct_result res;
	double z = 0.0, rho, expect;

	trn_slmc_params_default(&p);
	p.epsilon = 0.0;
	p.noise_multiplier = 3.0;
	p.iterations = 12;
	cr_assert_eq(trn_slmc_event(&p, 1e-5, &opt, &ev, &z, NULL), 0);
	cr_assert_eq(ev->type, ACCT_EV_SELF_COMPOSED);
	cr_assert_eq(ev->u.self_composed.count, 12);
	cr_assert_eq(ev->u.self_composed.event->type, ACCT_EV_GAUSSIAN);
	cr_assert_float_eq(ev->u.self_composed.event->u.gaussian.noise_multiplier, 3.0, 0.0);
	cr_assert_float_eq(z, 3.0, 0.0);
	/* Bun and Steinke 2016: Gaussian rho = 1/(2 z^2) (Prop. 1.6), K-fold
	 * composition adds (Lemma 1.7), eps = rho + 2 sqrt(rho ln(1/delta))
	 * (Prop. 1.3). */
	rho = 12.0 / (2.0 * 9.0);
	expect = rho + 2.0 * sqrt(rho * log(1e5));
	cr_assert_eq(acct_epsilon(ev, 1e-5, &opt, &res, NULL), 0);
	cr_assert(fabs(res.epsilon - expect) <= 1e-9 * expect, "eps %.15g, closed form %.15g",
		  res.epsilon, expect);
	acct_event_free(ev);
}

Test(event, calibrated_noise_meets_the_target_and_no_less_does)
{
	static const double targets[] = {0.5, 1.0, 4.0};
	acct_options opt = {.accountant = ACCT_RDP};

	for (size_t t = 0; t < 3; t++) {
		trn_slmc_params p;
		acct_event *ev = NULL, *lower;
		acct_result res;
		double z = 0.0;

		trn_slmc_params_default(&p);
		p.epsilon = targets[t];
		p.iterations = 20;
		cr_assert_eq(trn_slmc_event(&p, 1e-5, &opt, &ev, &z, NULL), 0);
		cr_assert_gt(z, 0.0);
		cr_assert_eq(acct_epsilon(ev, 1e-5, &opt, &res, NULL), 0);
		cr_assert_leq(res.epsilon, targets[t], "eps %.15g > %g", res.epsilon, targets[t]);
		/* One percent less noise misses the target: z is the smallest. */
		lower = acct_event_new(ACCT_EV_GAUSSIAN);
		lower->u.gaussian.noise_multiplier = 0.99 * z;
		lower = acct_event_self_composed(20, lower);
		cr_assert_eq(acct_epsilon(lower, 1e-5, &opt, &res, NULL), 0);
		cr_assert_gt(res.epsilon, targets[t]);
		acct_event_free(lower);
		acct_event_free(ev);
	}
}

typedef struct bad_param {
	const char *where;
	void (*spoil)(trn_slmc_params *p);
} bad_param;

static void no_clusters(trn_slmc_params *p) { p->clusters = 1; }
static void many_features(trn_slmc_params *p) { p->features = DPG_MAX_SLMC_FEATURES + 1; }
static void nan_gamma(trn_slmc_params *p) { p->gamma = NAN; }
static void zero_lambda(trn_slmc_params *p) { p->lambda = 0.0; }
static void negative_rho(trn_slmc_params *p) { p->rho = -1.0; }
static void crisp_fuzzifier(trn_slmc_params *p) { p->fuzzifier = 1.0; }
static void no_iterations(trn_slmc_params *p) { p->iterations = 0; }
static void no_parties(trn_slmc_params *p) { p->parties = 0; }
static void inf_norm(trn_slmc_params *p) { p->max_norm = INFINITY; }
static void unit_norm(trn_slmc_params *p) { p->max_norm = 1.0; }
static void both_noise(trn_slmc_params *p) { p->noise_multiplier = 1.0; }
static void no_noise(trn_slmc_params *p) { p->epsilon = 0.0; }
static void bad_epsilon(trn_slmc_params *p) { p->epsilon = -2.0; }

Test(params, bad_fields_are_named)
{
	static const bad_param table[] = {
		{"/params/clusters", no_clusters},
		{"/params/features", many_features},
		{"/params/gamma", nan_gamma},
		{"/params/lambda", zero_lambda},
		{"/params/rho", negative_rho},
		{"/params/fuzzifier", crisp_fuzzifier},
		{"/params/iterations", no_iterations},
		{"/params/parties", no_parties},
		{"/params/max_norm", inf_norm},
		{"/params/max_norm", unit_norm},
		{"/params/noise_multiplier", both_noise},
		{"/params/noise_multiplier", no_noise},
		{"/params/epsilon", bad_epsilon},
	};
	trn_slmc_params p;
	acct_event *ev = NULL;

	trn_slmc_params_default(&p);
	cr_assert_eq(trn_slmc_params_validate(&p, NULL), 0);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		acct_error err;

		trn_slmc_params_default(&p);
		table[i].spoil(&p);
		acct_error_init(&err);
		cr_assert_eq(trn_slmc_params_validate(&p, &err), ACCT_EINVAL, "%s", table[i].where);
		cr_assert_str_eq(err.where, table[i].where);
		acct_error_init(&err);
		cr_assert_eq(trn_slmc_event(&p, 1e-5, NULL, &ev, NULL, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, table[i].where);
		cr_assert_null(ev);
	}
	/* An unreachable target names epsilon too (delta 0: no Gaussian). */
	{
		acct_options opt = {.accountant = ACCT_RDP};
		acct_error err;

		trn_slmc_params_default(&p);
		acct_error_init(&err);
		cr_assert_lt(trn_slmc_event(&p, 0.0, &opt, &ev, NULL, &err), 0);
		cr_assert_str_eq(err.where, "/params/epsilon");
	}
	/* Shape: too many features x columns, and the learners' duals. */
	{
		acct_error err;

		trn_slmc_params_default(&p);
		p.features = 4096;
		acct_error_init(&err);
		cr_assert_eq(trn_slmc_check_shape(&p, 100, 4096, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, "/params/features");
		cr_assert_eq(trn_slmc_check_shape(&p, 100, 4, NULL), 0);
		p.features = 200;
		p.clusters = 100;
		p.parties = 1000;
		acct_error_init(&err);
		cr_assert_eq(trn_slmc_check_shape(&p, 100, 4, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, "/params/features");
		p.parties = 10;
		cr_assert_eq(trn_slmc_check_shape(&p, 100, 4, NULL), 0);
		acct_error_init(&err);
		cr_assert_eq(trn_slmc_check_shape(&p, 0, 4, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, "/data");
	}
}

/* ---- whole runs ------------------------------------------------------------ */

/* Two Gaussian blobs in the plane at (-2, 0) and (2, 0), sd 0.4. */
static trn_dataset *blobs(size_t n, uint8_t tag)
{
	trn_dataset *ds = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, tag);

	cr_assert_eq(trn_dataset_new(n, 2, 2, &ds, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		ds->y[i] = (uint32_t)(i % 2);
		ds->x[i * 2] = (ds->y[i] ? 2.0 : -2.0) + 0.4 * trn_test_normal(rng);
		ds->x[i * 2 + 1] = 0.4 * trn_test_normal(rng);
	}
	mech_rng_free(rng);
	return ds;
}

static int count_rounds(const trn_slmc_progress *pr, void *user)
{
	int *calls = user;

	cr_assert(isfinite(pr->consensus_change));
	cr_assert_eq(pr->iteration, (uint32_t)*calls + 1);
	(*calls)++;
	return 0;
}

static void blob_params(trn_slmc_params *p)
{
	trn_slmc_params_default(p);
	p->clusters = 2;
	p->features = 100;
	p->gamma = 0.25;
	p->lambda = 1.0;
	p->rho = 1.0;
	p->iterations = 15;
	p->parties = 3;
	p->max_norm = 10.0;
	p->epsilon = 0.0;
	p->noise_multiplier = 1e-6;
}

Test(run, separates_two_blobs_with_and_without_noise)
{
	trn_dataset *train = blobs(300, 20), *test = blobs(200, 21);
	trn_slmc_params p;
	trn_slmc_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 22);
	int calls = 0;

	blob_params(&p);
	cr_assert_eq(trn_slmc_nonprivate_run(&p, train, NULL, NULL, test, rng, count_rounds, &calls,
					     NULL, &r, NULL), 0);
	cr_assert_eq(calls, 15);
	cr_assert_eq(r->iterations_done, 15u);
	cr_assert_geq(r->clustering_accuracy, 0.97, "accuracy %g", r->clustering_accuracy);
	cr_assert_geq(r->nmi, 0.8, "nmi %g", r->nmi);
	cr_assert_float_eq(r->sigma, 0.0, 0.0);
	trn_slmc_result_free(r);
	r = NULL;
	/* Tiny noise, private path, learners from a party column. */
	{
		uint32_t *party = malloc(train->n * sizeof(uint32_t));

		for (size_t i = 0; i < train->n; i++)
			party[i] = (uint32_t)(i % 3);
		cr_assert_eq(trn_slmc_run(&p, train, party, NULL, test, rng, NULL, NULL, NULL, &r,
					  NULL), 0);
		cr_assert_geq(r->clustering_accuracy, 0.97, "accuracy %g",
			      r->clustering_accuracy);
		cr_assert_float_eq(r->sigma, 1e-6 * trn_slmc_sensitivity(&p), 1e-20);
		trn_slmc_result_free(r);
		r = NULL;
		party[7] = 3;
		{
			acct_error err;

			acct_error_init(&err);
			cr_assert_eq(trn_slmc_run(&p, train, party, NULL, test, rng, NULL, NULL, NULL,
						  &r, &err), ACCT_EINVAL);
			cr_assert_str_eq(err.where, "/params/party_column");
			cr_assert_null(r);
		}
		free(party);
	}
	mech_rng_free(rng);
	trn_dataset_free(train);
	trn_dataset_free(test);
}

Test(run, cancel_flag_stops_before_any_round)
{
	trn_dataset *train = blobs(50, 23);
	trn_slmc_params p;
	trn_slmc_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 24);
	atomic_bool cancel = true;

	blob_params(&p);
	cr_assert_eq(trn_slmc_run(&p, train, NULL, NULL, NULL, rng, NULL, NULL, &cancel, &r, NULL),
		     TRN_CANCELLED);
	cr_assert_eq(r->iterations_done, 0u);
	cr_assert(isnan(r->clustering_accuracy));
	trn_slmc_result_free(r);
	/* An unresolved epsilon is refused by the run. */
	p.noise_multiplier = 0.0;
	p.epsilon = 1.0;
	r = NULL;
	cr_assert_eq(trn_slmc_run(&p, train, NULL, NULL, NULL, rng, NULL, NULL, NULL, &r, NULL),
		     ACCT_EINVAL);
	mech_rng_free(rng);
	trn_dataset_free(train);
}

/* The objective of a noiseless run with M learners (rows by a party column,
 * so the rng stream and hence the map and Z^0 are the same for every M). */
static double objective_after(const trn_dataset *train, uint32_t M, uint32_t K)
{
	trn_slmc_params p;
	trn_slmc_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 26);
	uint32_t *party = malloc(train->n * sizeof(uint32_t));
	double obj;

	trn_dataset *aux = blobs(40, 27);

	blob_params(&p);
	p.parties = M;
	p.iterations = K;
	for (size_t i = 0; i < train->n; i++)
		party[i] = (uint32_t)(i % M);
	cr_assert_eq(trn_slmc_nonprivate_run(&p, train, party, aux, NULL, rng, NULL, NULL, NULL,
					     &r, NULL), 0);
	trn_dataset_free(aux);
	cr_assert_eq(trn_slmc_objective(r->model, train, p.lambda, p.fuzzifier, &obj, NULL), 0);
	trn_slmc_result_free(r);
	mech_rng_free(rng);
	free(party);
	return obj;
}

Test(run, consensus_admm_reaches_the_single_learner_objective)
{
	trn_dataset *train = blobs(120, 25);
	double one = objective_after(train, 1, 80), three = objective_after(train, 3, 80);
	double early = objective_after(train, 3, 1);

	/* Boyd et al. 2011, Sec. 7.1: consensus ADMM solves the same problem
	 * as one learner holding every row.  With the regulariser split 1/M per
	 * learner the two objectives agree once the rounds have converged. */
	cr_assert(fabs(three - one) <= 0.02 * one, "M=3: %g, M=1: %g", three, one);
	cr_assert_gt(early, 1.03 * one, "one round already at %g (converged %g)", early, one);
	trn_dataset_free(train);
}

Test(run, released_consensus_stays_in_the_ball_under_heavy_noise)
{
	trn_dataset *train = blobs(60, 28);
	trn_slmc_params p;
	trn_slmc_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 29);
	double n2 = 0.0;
	size_t len;

	blob_params(&p);
	p.noise_multiplier = 50.0;
	p.max_norm = 2.0;
	cr_assert_eq(trn_slmc_run(&p, train, NULL, NULL, NULL, rng, NULL, NULL, NULL, &r, NULL),
		     0);
	/* The noise alone has norm about 50 Delta sqrt((D+1) C), far outside. */
	cr_assert_gt(r->sigma * sqrt((double)(p.features + 1) * p.clusters), 10.0 * p.max_norm);
	len = ((size_t)p.features + 1) * p.clusters;
	for (size_t j = 0; j < len; j++)
		n2 += r->model->theta[j] * r->model->theta[j];
	cr_assert_leq(sqrt(n2), p.max_norm * (1.0 + 1e-12), "||Z|| = %g > B", sqrt(n2));
	trn_slmc_result_free(r);
	mech_rng_free(rng);
	trn_dataset_free(train);
}

/*
 * The balance constraint holds for the released consensus whatever the
 * noise: the mean output over the public rows, computed here from the
 * released map, is the mean code 1/C in every column (docs/slmc.md,
 * Sec. 2), and without public rows the bias is that code.
 */
Test(run, released_consensus_meets_the_balance_constraint)
{
	trn_dataset *train = blobs(80, 33), *aux = blobs(25, 34);
	trn_slmc_params p;
	mech_rng *rng = trn_test_seeded(seed_prefix, 35);

	blob_params(&p);
	p.noise_multiplier = 3.0;
	for (int with_aux = 0; with_aux < 2; with_aux++) {
		trn_slmc_result *r = NULL;
		size_t D = p.features, C = p.clusters;
		double *phi = malloc(aux->n * D * sizeof(double)), gap = 0.0;

		cr_assert_not_null(phi);
		cr_assert_eq(trn_slmc_run(&p, train, NULL, with_aux ? aux : NULL, NULL, rng, NULL,
					  NULL, NULL, &r, NULL), 0);
		trn_rff_map(r->model->rff, aux->x, aux->n, phi);
		for (size_t k = 0; k < C; k++) {
			double mean = r->model->theta[D * C + k];

			for (size_t i = 0; with_aux && i < aux->n; i++)
				for (size_t j = 0; j < D; j++)
					mean += phi[i * D + j] * r->model->theta[j * C + k] /
						(double)aux->n;
			gap = fmax(gap, fabs(mean - 1.0 / (double)C));
		}
		cr_assert_leq(gap, 1e-9, "with_aux %d: mean output off the mean code by %g",
			      with_aux, gap);
		free(phi);
		trn_slmc_result_free(r);
	}
	mech_rng_free(rng);
	trn_dataset_free(train);
	trn_dataset_free(aux);
}

/*
 * Without the balance constraint, "every row on one code, W = 0" is a
 * global minimum of (S) and a small lambda descends to it (docs/slmc.md,
 * Sec. 8.2: the noiseless run put every row in one cluster).  With the
 * constraint it is infeasible: the same small-lambda run must keep the two
 * blobs apart.
 */
Test(run, small_lambda_does_not_collapse_to_one_cluster)
{
	trn_dataset *train = blobs(200, 36), *aux = blobs(30, 37), *test = blobs(200, 38);
	trn_slmc_params p;
	trn_slmc_result *r = NULL;
	mech_rng *rng = trn_test_seeded(seed_prefix, 39);
	uint32_t *cl = malloc(test->n * sizeof(uint32_t)), count[2] = {0, 0};

	cr_assert_not_null(cl);
	blob_params(&p);
	p.lambda = 0.01;
	p.rho = 10.0;
	p.parties = 2;
	p.iterations = 30;
	cr_assert_eq(trn_slmc_nonprivate_run(&p, train, NULL, aux, test, rng, NULL, NULL, NULL,
					     &r, NULL), 0);
	cr_assert_eq(trn_slmc_predict(r->model, test->x, test->n, test->d, cl, NULL, NULL), 0);
	for (size_t i = 0; i < test->n; i++)
		count[cl[i]]++;
	cr_assert_geq(r->clustering_accuracy, 0.95, "accuracy %g (clusters %u, %u)",
		      r->clustering_accuracy, count[0], count[1]);
	trn_slmc_result_free(r);
	free(cl);
	mech_rng_free(rng);
	trn_dataset_free(train);
	trn_dataset_free(aux);
	trn_dataset_free(test);
}

/*
 * The private path differs from the non-private one by the noise alone:
 * the same map, start, split, order of updates, projection and duals.  On
 * one seeded stream (the map, the public centres and the split are drawn
 * before any noise) a run with z = 2^-60 must give the non-private
 * consensus to 1e-12.  The noise then moves each upload by about
 * z Delta sqrt(len) = 1e-16 (the realised difference is about 1e-15),
 * while any other difference between the paths (a skipped public start,
 * a clip, memberships or duals taken from other values) moves the
 * consensus by far more than 1e-12.
 */
Test(run, private_path_with_vanishing_noise_is_the_nonprivate_run)
{
	trn_dataset *train = blobs(90, 30), *aux = blobs(20, 31);
	trn_slmc_params p;
	trn_slmc_result *priv = NULL, *plain = NULL;
	mech_rng *r1 = trn_test_seeded(seed_prefix, 32), *r2 = trn_test_seeded(seed_prefix, 32);
	double diff = 0.0, n2 = 0.0;
	size_t len;

	blob_params(&p);
	p.iterations = 10;
	p.parties = 2;
	p.noise_multiplier = 0x1p-60;
	cr_assert_eq(trn_slmc_run(&p, train, NULL, aux, NULL, r1, NULL, NULL, NULL, &priv, NULL),
		     0);
	cr_assert_eq(trn_slmc_nonprivate_run(&p, train, NULL, aux, NULL, r2, NULL, NULL, NULL,
					     &plain, NULL), 0);
	len = ((size_t)p.features + 1) * p.clusters;
	for (size_t j = 0; j < len; j++) {
		diff = fmax(diff, fabs(priv->model->theta[j] - plain->model->theta[j]));
		n2 += plain->model->theta[j] * plain->model->theta[j];
	}
	/* A consensus that moved at all, so that equality means something. */
	cr_assert_gt(sqrt(n2), 0.1, "||Z|| = %g", sqrt(n2));
	cr_assert_leq(diff, 1e-12, "private and non-private consensus differ by %g", diff);
	trn_slmc_result_free(priv);
	trn_slmc_result_free(plain);
	mech_rng_free(r1);
	mech_rng_free(r2);
	trn_dataset_free(train);
	trn_dataset_free(aux);
}

/*
 * One row of finite cells near DBL_MAX: w.x overflows (cos(inf) is NaN)
 * and so do its distances to the public centres (inf / inf).  The row must
 * map to a = (0, ..., 0, 1) with uniform first memberships, the bounds of
 * Theorem 1, so the neighbour with that row added releases a finite
 * consensus as the table without it does, with and without public rows.
 */
Test(run, extreme_row_keeps_the_consensus_finite)
{
	trn_dataset *train = blobs(40, 36), *aux = blobs(20, 37), *big = NULL;
	const double x[2] = {1e308, -1e308};
	double a[101], u[2];
	trn_slmc_params p;
	mech_rng *rng = trn_test_seeded(seed_prefix, 38);

	blob_params(&p);
	p.iterations = 3;
	p.parties = 2;
	p.noise_multiplier = 1.0;
	cr_assert_eq(trn_dataset_new(41, 2, 2, &big, NULL), 0);
	memcpy(big->x, train->x, 80 * sizeof(double));
	memcpy(big->y, train->y, 40 * sizeof(uint32_t));
	memcpy(big->x + 80, x, sizeof(x));
	big->y[40] = 1;
	for (int with_aux = 0; with_aux < 2; with_aux++) {
		for (int extreme = 0; extreme < 2; extreme++) {
			trn_slmc_result *r = NULL;
			size_t len = ((size_t)p.features + 1) * p.clusters;

			cr_assert_eq(trn_slmc_run(&p, extreme ? big : train, NULL,
						  with_aux ? aux : NULL, NULL, rng, NULL, NULL,
						  NULL, &r, NULL), 0);
			for (size_t j = 0; j < len; j++)
				cr_assert(isfinite(r->model->theta[j]),
					  "with_aux %d, extreme %d: theta[%zu] = %g", with_aux,
					  extreme, j, r->model->theta[j]);
			if (extreme) {
				trn__slmc_features(r->model->rff, x, 1, a);
				for (size_t j = 0; j < 100; j++)
					cr_assert_eq(a[j], 0.0, "phi[%zu] = %g", j, a[j]);
				cr_assert_eq(a[100], 1.0);
			}
			trn_slmc_result_free(r);
		}
	}
	/* Distances all inf, or one NaN: uniform; one inf of two: the other. */
	u[0] = u[1] = INFINITY;
	trn__slmc_fcm_weights(u, 2, 2.0);
	cr_assert(u[0] == 0.5 && u[1] == 0.5, "u = (%g, %g)", u[0], u[1]);
	u[0] = NAN;
	u[1] = 1.0;
	trn__slmc_fcm_weights(u, 2, 2.0);
	cr_assert(u[0] == 0.5 && u[1] == 0.5, "u = (%g, %g)", u[0], u[1]);
	u[0] = INFINITY;
	u[1] = 4.0;
	trn__slmc_fcm_weights(u, 2, 2.0);
	cr_assert(u[0] == 0.0 && u[1] == 1.0, "u = (%g, %g)", u[0], u[1]);
	mech_rng_free(rng);
	trn_dataset_free(big);
	trn_dataset_free(train);
	trn_dataset_free(aux);
}

/*
 * A job drops the rows of no declared party after the table as submitted
 * passed its checks, so a run may get no row at all.  It must then release
 * a consensus like any other: every learner solves with its regulariser
 * alone (the minimiser of rho/2 ||theta - v||^2 + reg/2 ||W||^2 in the
 * constraint set), and the uploads carry the noise as charged.  The shape
 * check of a submitted table still wants a row.
 */
Test(run, no_row_left_still_releases_a_consensus)
{
	trn_dataset *train = blobs(1, 39), *aux = blobs(20, 40);
	uint32_t party[1] = {0};
	trn_slmc_params p;
	mech_rng *rng = trn_test_seeded(seed_prefix, 41);
	acct_error err;

	blob_params(&p);
	p.iterations = 3;
	p.parties = 2;
	p.noise_multiplier = 1.0;
	train->n = 0;
	for (int with_aux = 0; with_aux < 2; with_aux++) {
		trn_slmc_result *r = NULL;
		size_t len = ((size_t)p.features + 1) * p.clusters;
		double n2 = 0.0;

		acct_error_init(&err);
		cr_assert_eq(trn_slmc_run(&p, train, party, with_aux ? aux : NULL, NULL, rng, NULL,
					  NULL, NULL, &r, &err), 0, "with_aux %d: %s %s", with_aux,
			     err.where, err.text);
		cr_assert_eq(r->iterations_done, p.iterations);
		for (size_t j = 0; j < len; j++) {
			cr_assert(isfinite(r->model->theta[j]));
			n2 += r->model->theta[j] * r->model->theta[j];
		}
		cr_assert_leq(sqrt(n2), p.max_norm * (1.0 + 1e-12), "||Z|| = %g > B", sqrt(n2));
		trn_slmc_result_free(r);
	}
	cr_assert_eq(trn_slmc_check_shape(&p, 0, 2, &err), ACCT_EINVAL);
	mech_rng_free(rng);
	trn_dataset_free(train);
	trn_dataset_free(aux);
}

/* ---- the released model as a trn_model -------------------------------------- */

/* The converted model's logits are f(x) itself, so its softmax scores are
 * softmax of trn_slmc_predict's outputs and its class their argmax. */
Test(model, converts_to_a_trn_model_with_the_same_outputs)
{
	enum { d = 5, D = 40, C = 4, N = 60 };
	mech_rng *rng = trn_test_seeded(seed_prefix, 0x71);
	trn_slmc_model *m = NULL;
	trn_rff *rff = NULL;
	trn_model *tm = NULL;
	double x[N * d], f[N * C];
	uint32_t cl[N];

	cr_assert_eq(trn_rff_new(d, D, 0.7, rng, &rff, NULL), 0);
	cr_assert_eq(trn__slmc_model_new(rff, C, &m, NULL), 0);
	for (size_t i = 0; i < (size_t)(D + 1) * C; i++)
		m->theta[i] = trn_test_normal(rng);
	for (size_t i = 0; i < (size_t)N * d; i++)
		x[i] = 2.0 * trn_test_uniform(rng) - 1.0;
	cr_assert_eq(trn_slmc_predict(m, x, N, d, cl, f, NULL), 0);
	cr_assert_eq(trn_slmc_model_to_model(m, &tm, NULL), 0);
	for (size_t i = 0; i < N; i++) {
		double scores[C], mx = f[i * C], s = 0.0;
		uint32_t k_model;

		cr_assert_eq(trn_model_predict(tm, x + i * d, d, &k_model, NULL), 0);
		cr_assert_eq(k_model, cl[i], "row %zu: model %u, slmc %u", i, k_model, cl[i]);
		cr_assert_eq(trn_model_scores(tm, x + i * d, d, scores, C, NULL), 0);
		for (size_t k = 1; k < C; k++)
			mx = fmax(mx, f[i * C + k]);
		for (size_t k = 0; k < C; k++)
			s += exp(f[i * C + k] - mx);
		for (size_t k = 0; k < C; k++)
			cr_assert_float_eq(scores[k], exp(f[i * C + k] - mx) / s, 1e-12,
					   "row %zu class %zu", i, k);
	}
	trn_model_free(tm);
	trn_slmc_model_free(m);
	mech_rng_free(rng);
}
