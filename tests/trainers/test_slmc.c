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

/* ---- helpers --------------------------------------------------------------- */

static mech_rng *seeded(uint8_t tag)
{
	uint8_t seed[32] = {0x51, 0x3c, tag};

	return mech_rng_new_seeded(seed);
}

static double unif(mech_rng *rng)
{
	double u;

	cr_assert_eq(mech_rng_uniform(rng, &u), 0);
	return u;
}

static double normal(mech_rng *rng)
{
	double z;

	cr_assert_eq(mech_rng_normal_fill(rng, &z, 1), 0);
	return z;
}

static uint64_t below(mech_rng *rng, uint64_t n)
{
	uint64_t v;

	cr_assert_eq(mech_rng_uint_below(rng, n, &v), 0);
	return v;
}

/* A random point of the probability simplex with C entries. */
static void random_simplex(mech_rng *rng, uint32_t C, double *u)
{
	double s = 0.0;

	for (uint32_t k = 0; k < C; k++) {
		u[k] = -log(1.0 - unif(rng));
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
		mech_rng *rng = seeded((uint8_t)(tag + r));
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
	mech_rng *rng = seeded(1);

	/* Points at distances where the kernel takes values across (0, 1). */
	for (size_t i = 0; i < P * d; i++)
		x[i] = 0.5 * normal(rng);
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
	mech_rng *rng = seeded(2);
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
	mech_rng *rng = seeded(3);

	for (int trial = 0; trial < 400; trial++) {
		size_t n = 1 + (size_t)below(rng, 7), assign[7];
		double cost[49], total = 0.0, brute;
		bool seen[7] = {false};

		for (size_t k = 0; k < n * n; k++)
			/* Small integers half the time: many ties. */
			cost[k] = trial % 2 ? (double)below(rng, 5) - 2.0 : 10.0 * normal(rng);
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
	mech_rng *rng = seeded(4);

	for (int trial = 0; trial < 200; trial++) {
		uint32_t C = 2 + (uint32_t)below(rng, 4), K = C + (uint32_t)below(rng, 3);
		size_t n = 1 + (size_t)below(rng, 40);
		uint32_t cl[40], lab[40];
		double acc, acc_t;

		if (K > 8)
			K = 8;
		for (size_t i = 0; i < n; i++) {
			cl[i] = (uint32_t)below(rng, C);
			lab[i] = (uint32_t)below(rng, K);
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
	mech_rng *rng = seeded(5);

	/* min sum_k u_k^m d_k over the simplex is convex for m > 1; its KKT
	 * conditions with all d_k > 0 are u_k > 0, sum u = 1 and m u_k^(m-1)
	 * d_k = mu for every k (Bezdek 1981, Theorem 11.1). */
	for (int trial = 0; trial < 500; trial++) {
		uint32_t C = 2 + (uint32_t)below(rng, 8);
		double f[10], u[10], m = 1.05 + 4.0 * unif(rng), sum = 0.0, mu0;

		for (uint32_t k = 0; k < C; k++)
			f[k] = (trial % 3 == 0 ? 30.0 : 1.0) * normal(rng);
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
	cr_assert(rc->a && rc->u && rc->v);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < D; j++)
			rc->a[i * rc->d1 + j] = sqrt(2.0 / (double)D) * cos(6.3 * unif(rng));
		rc->a[i * rc->d1 + D] = 1.0;
		random_simplex(rng, C, rc->u + i * C);
	}
	for (size_t j = 0; j < rc->d1 * C; j++)
		rc->v[j] = normal(rng);
	trn_slmc_params_default(&rc->p);
	rc->p.clusters = C;
	rc->p.features = (uint32_t)D;
	rc->p.lambda = 0.7;
	rc->p.rho = 0.9;
	rc->p.fuzzifier = 1.7;
	rc->p.max_norm = 1e6;
	rc->reg_w = 0.25;
}

static void ridge_case_free(ridge_case *rc)
{
	free(rc->a);
	free(rc->u);
	free(rc->v);
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

Test(ridge, equals_a_direct_solve_of_the_stationarity_conditions)
{
	mech_rng *rng = seeded(6);

	for (int trial = 0; trial < 20; trial++) {
		ridge_case rc;
		size_t D = 2 + (size_t)below(rng, 12), len;
		uint32_t C = 2 + (uint32_t)below(rng, 4);
		trn__slmc_ws *ws = NULL;
		double *theta, *g0, *hm, *direct;
		gsl_matrix_view hv;
		gsl_permutation *perm;
		int sign;

		ridge_case_make(&rc, rng, (size_t)below(rng, 50), D, C);
		len = rc.d1 * C;
		theta = malloc(len * sizeof(double));
		g0 = malloc(len * sizeof(double));
		direct = malloc(len * sizeof(double));
		hm = calloc(len * len, sizeof(double));
		cr_assert_eq(trn__slmc_ws_new(rc.n, rc.d1, C, &ws, NULL), 0);
		cr_assert_eq(trn__slmc_ridge(rc.a, rc.u, rc.n, &rc.p, rc.reg_w, rc.v, ws, theta,
					     NULL), 0);
		/* F is quadratic: its gradient is affine, so the Hessian's
		 * columns are g(e_q) - g(0); solve Hess x = -g(0) by LU. */
		memset(direct, 0, len * sizeof(double));
		ridge_gradient(&rc, direct, g0);
		for (size_t q = 0; q < len; q++) {
			double *gq = malloc(len * sizeof(double));

			direct[q] = 1.0;
			ridge_gradient(&rc, direct, gq);
			direct[q] = 0.0;
			for (size_t r = 0; r < len; r++)
				hm[r * len + q] = gq[r] - g0[r];
			free(gq);
		}
		hv = gsl_matrix_view_array(hm, len, len);
		perm = gsl_permutation_alloc(len);
		for (size_t r = 0; r < len; r++)
			g0[r] = -g0[r];
		cr_assert_eq(gsl_linalg_LU_decomp(&hv.matrix, perm, &sign), 0);
		{
			gsl_vector_view b = gsl_vector_view_array(g0, len);
			gsl_vector_view x = gsl_vector_view_array(direct, len);

			cr_assert_eq(gsl_linalg_LU_solve(&hv.matrix, perm, &b.vector, &x.vector), 0);
		}
		for (size_t r = 0; r < len; r++)
			cr_assert(fabs(theta[r] - direct[r]) <= 1e-9 * (1.0 + fabs(direct[r])),
				  "trial %d entry %zu: %.15g vs direct %.15g", trial, r, theta[r],
				  direct[r]);
		gsl_permutation_free(perm);
		trn__slmc_ws_free(ws);
		ridge_case_free(&rc);
		free(theta);
		free(g0);
		free(direct);
		free(hm);
	}
	mech_rng_free(rng);
}

Test(ridge, ball_constraint_meets_its_kkt_conditions)
{
	mech_rng *rng = seeded(7);

	for (int trial = 0; trial < 40; trial++) {
		ridge_case rc;
		size_t D = 2 + (size_t)below(rng, 30), len;
		uint32_t C = 2 + (uint32_t)below(rng, 4);
		trn__slmc_ws *ws = NULL;
		double *free_theta, *theta, *g, nf = 0.0, nt = 0.0, gt = 0.0, mu, res = 0.0;
		double gn = 0.0;

		ridge_case_make(&rc, rng, 5 + (size_t)below(rng, 60), D, C);
		len = rc.d1 * C;
		free_theta = malloc(len * sizeof(double));
		theta = malloc(len * sizeof(double));
		g = malloc(len * sizeof(double));
		cr_assert_eq(trn__slmc_ws_new(rc.n, rc.d1, C, &ws, NULL), 0);
		cr_assert_eq(trn__slmc_ridge(rc.a, rc.u, rc.n, &rc.p, rc.reg_w, rc.v, ws,
					     free_theta, NULL), 0);
		for (size_t r = 0; r < len; r++)
			nf += free_theta[r] * free_theta[r];
		rc.p.max_norm = (0.05 + 0.9 * unif(rng)) * sqrt(nf);
		cr_assert_eq(trn__slmc_ridge(rc.a, rc.u, rc.n, &rc.p, rc.reg_w, rc.v, ws, theta,
					     NULL), 0);
		/* Minimiser on the ball with the free one outside: ||theta|| = B
		 * and grad F(theta) = -mu theta with mu > 0. */
		ridge_gradient(&rc, theta, g);
		for (size_t r = 0; r < len; r++) {
			nt += theta[r] * theta[r];
			gt += g[r] * theta[r];
			gn += g[r] * g[r];
		}
		cr_assert(sqrt(nt) <= rc.p.max_norm, "norm %.17g > B %.17g", sqrt(nt),
			  rc.p.max_norm);
		cr_assert(sqrt(nt) >= rc.p.max_norm * (1.0 - 1e-12));
		mu = -gt / nt;
		cr_assert_gt(mu, 0.0);
		for (size_t r = 0; r < len; r++)
			res += (g[r] + mu * theta[r]) * (g[r] + mu * theta[r]);
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
