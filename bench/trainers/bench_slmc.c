/*
 * bench_slmc.c: DP-SLMC on public tables, the two findings of the DP-SLMC
 * paper (docs/slmc.md):
 *
 *   bench_slmc converge [options]   the SLMC objective per ADMM round of the
 *                                   non-private distributed SLMC and of
 *                                   DP-SLMC at epsilon 512, 8 and 0.5
 *                                   (or --eps), each the mean over --seeds
 *                                   streams, then the same runs' accuracy
 *                                   and NMI
 *   bench_slmc accuracy [options]   clustering accuracy and NMI against
 *                                   epsilon in {0.5, 1, 2, 4, 8, 64, 512}
 *                                   (or --eps) and inf, next
 *                                   to k-means and FCM on the same rows
 *   bench_slmc noise [options]      accuracy, the share of rows in the
 *                                   largest cluster and the fraction of
 *                                   runs with >= 90% of the rows in one
 *                                   cluster, against noise multipliers z
 *                                   in {0, 0.01, 0.03, 0.1, 0.2, 0.41, 1,
 *                                   1000} (docs/slmc.md, Sec. 8.1)
 *   bench_slmc baselines [options]  k-means and FCM alone (accuracy and
 *                                   NMI over --seeds streams)
 *
 * Options (defaults in brackets): --data iris|wine|digits|fashion [iris]
 * --data-dir DIR [../shared/data] --rows N (fashion: first N rows) [2000]
 * --split train|test (fashion: which split) [train] --eps X,... (the finite
 * epsilons of accuracy and converge; the non-private run is always made)
 * --seeds N [5] --clusters C [classes] --features D [200] --gamma X [1]
 * --lambda X [1] --rho X [10] --fuzzifier X [2] --iterations K [10]
 * --parties M [2] --max-norm B [5] --delta X [1e-5] --aux N [0]: hold out N
 * evenly spaced rows as public rows for the FCM start (auxiliary_data);
 * the others are clustered and scored
 *
 * Every table is public, so the bench may measure anything on it: the
 * objective reads every row (trn_slmc_objective), which a job never
 * reports.  Features are min-max scaled to [0, 1] from the table itself,
 * which only a public table allows.  Noise comes from a CSPRNG stream, so
 * figures vary from run to run; --seeds runs average it.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trn.h"

#define BENCH_MAX_SEEDS 100
#define BENCH_MAX_EPS 16

struct opts {
	const char *data;
	const char *dir;
	bool test_split;         /* fashion: the test split instead of train */
	double eps[BENCH_MAX_EPS]; /* finite epsilons; n_eps 0: the mode's own */
	size_t n_eps;
	size_t rows;
	size_t aux;              /* public rows held out for the FCM start */
	int seeds;
	double delta;
	trn_slmc_params p;
};

/* ---- data ------------------------------------------------------------------ */

/* Min-max scaling of every column to [0, 1] (public tables only). */
static void scale_columns(trn_dataset *ds)
{
	for (size_t j = 0; j < ds->d; j++) {
		double lo = DBL_MAX, hi = -DBL_MAX;

		for (size_t i = 0; i < ds->n; i++) {
			lo = fmin(lo, ds->x[i * ds->d + j]);
			hi = fmax(hi, ds->x[i * ds->d + j]);
		}
		for (size_t i = 0; i < ds->n; i++)
			ds->x[i * ds->d + j] = hi > lo ? (ds->x[i * ds->d + j] - lo) / (hi - lo) : 0.0;
	}
}

static trn_dataset *load_data(const struct opts *o)
{
	trn_dataset *ds = NULL;
	char path[4096];

	if (strcmp(o->data, "fashion") == 0) {
		trn_dataset *all = NULL;
		size_t n;

		if (trn_fashion_mnist_load(NULL, !o->test_split, &all, NULL) != 0)
			return NULL;
		n = o->rows < all->n ? o->rows : all->n;
		if (trn_dataset_new(n, all->d, all->num_classes, &ds, NULL) == 0) {
			memcpy(ds->x, all->x, n * all->d * sizeof(double));
			memcpy(ds->y, all->y, n * sizeof(uint32_t));
		}
		trn_dataset_free(all);
		return ds;
	}
	snprintf(path, sizeof(path), "%s/%s.csv", o->dir, o->data);
	if (bench_csv_load(path, &ds) == 0)
		scale_columns(ds);
	return ds;
}

/*
 * Holds out `n_aux` evenly spaced rows as the public start rows (*ret_aux)
 * and keeps the others as the table to cluster (*ds, replaced).
 */
static int split_aux(trn_dataset **ds, size_t n_aux, trn_dataset **ret_aux)
{
	trn_dataset *all = *ds, *aux = NULL, *rest = NULL;
	size_t step, a = 0, r = 0;

	if (n_aux == 0 || n_aux >= all->n)
		return n_aux == 0 ? 0 : -1;
	step = all->n / n_aux;
	if (trn_dataset_new(n_aux, all->d, all->num_classes, &aux, NULL) != 0 ||
	    trn_dataset_new(all->n - n_aux, all->d, all->num_classes, &rest, NULL) != 0) {
		trn_dataset_free(aux);
		return -1;
	}
	for (size_t i = 0; i < all->n; i++) {
		bool is_aux = i % step == 0 && a < n_aux;
		trn_dataset *to = is_aux ? aux : rest;
		size_t at = is_aux ? a++ : r++;

		memcpy(to->x + at * all->d, all->x + i * all->d, all->d * sizeof(double));
		to->y[at] = all->y[i];
	}
	trn_dataset_free(all);
	*ds = rest;
	*ret_aux = aux;
	return 0;
}

/* ---- baselines: k-means (Lloyd, k-means++ seeding) and FCM -------------- */

static double sq_dist(const double *a, const double *b, size_t d)
{
	double s = 0.0;

	for (size_t j = 0; j < d; j++)
		s += (a[j] - b[j]) * (a[j] - b[j]);
	return s;
}

/* Arthur and Vassilvitskii 2007: each next centre drawn with probability
 * proportional to the squared distance to the nearest chosen one. */
static void kmeanspp(const trn_dataset *ds, uint32_t C, mech_rng *rng, double *cent)
{
	double *dmin = malloc(ds->n * sizeof(double));
	uint64_t first;

	mech_rng_uint_below(rng, ds->n, &first);
	memcpy(cent, ds->x + first * ds->d, ds->d * sizeof(double));
	for (size_t i = 0; i < ds->n; i++)
		dmin[i] = sq_dist(ds->x + i * ds->d, cent, ds->d);
	for (uint32_t k = 1; k < C; k++) {
		double tot = 0.0, u, acc = 0.0;
		size_t pick = ds->n - 1;

		for (size_t i = 0; i < ds->n; i++)
			tot += dmin[i];
		mech_rng_uniform(rng, &u);
		for (size_t i = 0; i < ds->n; i++) {
			acc += dmin[i];
			if (acc >= u * tot) {
				pick = i;
				break;
			}
		}
		memcpy(cent + k * ds->d, ds->x + pick * ds->d, ds->d * sizeof(double));
		for (size_t i = 0; i < ds->n; i++)
			dmin[i] = fmin(dmin[i], sq_dist(ds->x + i * ds->d, cent + k * ds->d, ds->d));
	}
	free(dmin);
}

/* Centres as membership-weighted means (weights w, n x C). */
static void weighted_centres(const trn_dataset *ds, uint32_t C, const double *w, double *cent)
{
	for (uint32_t k = 0; k < C; k++) {
		double tot = 0.0;

		memset(cent + k * ds->d, 0, ds->d * sizeof(double));
		for (size_t i = 0; i < ds->n; i++) {
			tot += w[i * C + k];
			for (size_t j = 0; j < ds->d; j++)
				cent[k * ds->d + j] += w[i * C + k] * ds->x[i * ds->d + j];
		}
		for (size_t j = 0; j < ds->d && tot > 0.0; j++)
			cent[k * ds->d + j] /= tot;
	}
}

/*
 * k-means (fuzzy = false: hard assignments) or FCM (Bezdek 1981, eqs.
 * 11.3: u_ki proportional to ||x_i - c_k||^(-2/(m-1)), c_k the u^m-weighted
 * mean), 100 rounds from k-means++ centres; writes each row's cluster.
 */
static void cluster_baseline(const trn_dataset *ds, uint32_t C, bool fuzzy, double m,
			     mech_rng *rng, uint32_t *ret)
{
	double *cent = malloc((size_t)C * ds->d * sizeof(double));
	double *w = malloc(ds->n * C * sizeof(double));

	kmeanspp(ds, C, rng, cent);
	for (int it = 0; it < 100; it++) {
		for (size_t i = 0; i < ds->n; i++) {
			double best = DBL_MAX, sum = 0.0;
			uint32_t bk = 0;

			for (uint32_t k = 0; k < C; k++) {
				w[i * C + k] = sq_dist(ds->x + i * ds->d, cent + k * ds->d, ds->d);
				if (w[i * C + k] < best) {
					best = w[i * C + k];
					bk = k;
				}
			}
			/* (d_min / d_k)^(1/(m-1)): no overflow; a zero distance
			 * takes the whole membership. */
			for (uint32_t k = 0; k < C; k++) {
				double dk = w[i * C + k];

				w[i * C + k] = !fuzzy || best == 0.0 ? (double)(k == bk)
								     : pow(best / dk, 1.0 / (m - 1.0));
				sum += w[i * C + k];
			}
			for (uint32_t k = 0; k < C; k++)
				w[i * C + k] = fuzzy ? pow(w[i * C + k] / sum, m) : w[i * C + k];
			ret[i] = bk;
		}
		weighted_centres(ds, C, w, cent);
	}
	free(cent);
	free(w);
}

/* ---- runs -------------------------------------------------------------------- */

/* A fresh CSPRNG stream per run. */
static mech_rng *new_stream(void)
{
	mech_rng *sys = mech_rng_new_system(), *s = sys ? mech_rng_new_stream(sys) : NULL;

	mech_rng_free(sys);
	return s;
}

/* z for a target epsilon (RDP accountant, add_remove, at delta). */
static double noise_for(const trn_slmc_params *p, double eps, double delta)
{
	trn_slmc_params q = *p;
	acct_options opt = {.accountant = ACCT_RDP, .neighbor = ACCT_ADD_REMOVE};
	acct_event *ev = NULL;
	double z = NAN;

	q.epsilon = eps;
	q.noise_multiplier = 0.0;
	if (trn_slmc_event(&q, delta, &opt, &ev, &z, NULL) != 0)
		z = NAN;
	acct_event_free(ev);
	return z;
}

struct trace {
	const trn_dataset *ds;
	const trn_slmc_params *p;
	double *obj;       /* one per round */
};

static int record_objective(const trn_slmc_progress *pr, void *user)
{
	struct trace *t = user;

	trn_slmc_objective(pr->consensus, t->ds, t->p->lambda, t->p->fuzzifier,
			   &t->obj[pr->iteration - 1], NULL);
	return 0;
}

/* The share of the rows of ds that the consensus puts in its largest
 * cluster: 1 when every row lands in one cluster. */
static double largest_share(const trn_slmc_model *m, const trn_dataset *ds)
{
	uint32_t *cl = malloc(ds->n * sizeof(uint32_t)), count[DPG_MAX_SLMC_CLUSTERS] = {0};
	uint32_t most = 0;

	if (!cl || trn_slmc_predict(m, ds->x, ds->n, ds->d, cl, NULL, NULL) != 0) {
		free(cl);
		return NAN;
	}
	for (size_t i = 0; i < ds->n; i++)
		if (++count[cl[i]] > most)
			most = count[cl[i]];
	free(cl);
	return (double)most / (double)ds->n;
}

/* One run with noise multiplier z (0: the non-private DS-SLMC); accuracy
 * and NMI on the same public rows, the largest cluster's share when
 * ret_share is not NULL, objective trace when obj is not NULL. */
static int run_at_noise(const struct opts *o, const trn_dataset *ds, const trn_dataset *aux,
			double z, double *ret_acc, double *ret_nmi, double *ret_share, double *obj)
{
	trn_slmc_params p = o->p;
	trn_slmc_result *r = NULL;
	struct trace t = {ds, &o->p, obj};
	mech_rng *rng = new_stream();
	acct_error err;
	int rc;

	acct_error_init(&err);
	p.epsilon = 0.0;
	p.noise_multiplier = z;
	if (z == 0.0)
		rc = trn_slmc_nonprivate_run(&p, ds, NULL, aux, ds, rng, obj ? record_objective : NULL,
					     &t, NULL, &r, &err);
	else
		rc = trn_slmc_run(&p, ds, NULL, aux, ds, rng, obj ? record_objective : NULL, &t, NULL,
				  &r, &err);
	if (rc == 0) {
		*ret_acc = r->clustering_accuracy;
		*ret_nmi = r->nmi;
		if (ret_share)
			*ret_share = largest_share(r->model, ds);
	} else {
		fprintf(stderr, "run failed: %s %s\n", err.where, err.text);
	}
	trn_slmc_result_free(r);
	mech_rng_free(rng);
	return rc;
}

/* One run at epsilon eps (INFINITY: the non-private DS-SLMC). */
static int one_run(const struct opts *o, const trn_dataset *ds, const trn_dataset *aux,
		   double eps, double *ret_acc, double *ret_nmi, double *obj)
{
	double z = isinf(eps) ? 0.0 : noise_for(&o->p, eps, o->delta);

	return run_at_noise(o, ds, aux, z, ret_acc, ret_nmi, NULL, obj);
}

static void mean_sd(const double *v, int n, double *m, double *sd)
{
	double s = 0.0, s2 = 0.0;

	for (int i = 0; i < n; i++)
		s += v[i];
	*m = s / n;
	for (int i = 0; i < n; i++)
		s2 += (v[i] - *m) * (v[i] - *m);
	*sd = n > 1 ? sqrt(s2 / (n - 1)) : 0.0;
}

static void print_row(const char *name, const double *acc, const double *nmi, int n)
{
	double am, as, nm, ns;

	mean_sd(acc, n, &am, &as);
	mean_sd(nmi, n, &nm, &ns);
	printf("%-12s %6.3f +- %5.3f   %6.3f +- %5.3f\n", name, am, as, nm, ns);
}

static void print_config(const struct opts *o, const trn_dataset *ds)
{
	trn_slmc_params p = o->p;

	printf("# %s: n %zu, d %zu, classes %u; C %u, D %u, gamma %g, lambda %g, rho %g, "
	       "m %g, K %u, M %u, B %g, delta %g, %d seeds\n",
	       o->data, ds->n, ds->d, ds->num_classes, p.clusters, p.features, p.gamma,
	       p.lambda, p.rho, p.fuzzifier, p.iterations, p.parties, p.max_norm, o->delta,
	       o->seeds);
	p.neighbor = ACCT_ADD_REMOVE;
	printf("# Delta (add_remove) %.4g; start: %s\n", trn_slmc_sensitivity(&p),
	       o->aux ? "FCM centres of the public held-out rows" : "random public Z^0");
}

/* The finite epsilons of a mode: --eps, or the mode's own `dflt`; copied
 * to out[first..], so that the caller can put the non-private run (INFINITY)
 * before or after them.  Returns the count copied. */
static size_t eps_grid(const struct opts *o, const double *dflt, size_t n_dflt, double *out,
		       size_t first)
{
	const double *src = o->n_eps ? o->eps : dflt;
	size_t n = o->n_eps ? o->n_eps : n_dflt;

	memcpy(out + first, src, n * sizeof(double));
	return n;
}

/* k-means and FCM on the same rows, one fresh stream per seed. */
static void print_baselines(const struct opts *o, const trn_dataset *ds, uint32_t *cl)
{
	double acc[BENCH_MAX_SEEDS], nmi[BENCH_MAX_SEEDS];

	for (int fuzzy = 0; fuzzy < 2; fuzzy++) {
		for (int s = 0; s < o->seeds; s++) {
			mech_rng *rng = new_stream();

			cluster_baseline(ds, o->p.clusters, fuzzy, o->p.fuzzifier, rng, cl);
			trn_clustering_accuracy(cl, ds->y, ds->n, o->p.clusters, ds->num_classes,
						&acc[s], NULL);
			trn_nmi(cl, ds->y, ds->n, o->p.clusters, ds->num_classes, &nmi[s], NULL);
			mech_rng_free(rng);
		}
		print_row(fuzzy ? "FCM" : "k-means", acc, nmi, o->seeds);
	}
}

static int cmd_accuracy(const struct opts *o, const trn_dataset *ds, const trn_dataset *aux)
{
	/* The paper's grid, then two large budgets that show where the noise
	 * stops mattering under the proven sensitivity. */
	static const double dflt[] = {0.5, 1.0, 2.0, 4.0, 8.0, 64.0, 512.0};
	double eps[BENCH_MAX_EPS + 1], acc[BENCH_MAX_SEEDS], nmi[BENCH_MAX_SEEDS];
	size_t n_eps = eps_grid(o, dflt, sizeof(dflt) / sizeof(dflt[0]), eps, 0);
	uint32_t *cl = malloc(ds->n * sizeof(uint32_t));

	eps[n_eps++] = INFINITY;
	print_config(o, ds);
	printf("%-12s %-16s   %-16s   %s\n", "method", "accuracy", "NMI", "z");
	for (size_t e = 0; e < n_eps; e++) {
		char name[32];

		for (int s = 0; s < o->seeds; s++)
			if (one_run(o, ds, aux, eps[e], &acc[s], &nmi[s], NULL) != 0) {
				free(cl);
				return 1;
			}
		snprintf(name, sizeof(name), isinf(eps[e]) ? "DS-SLMC" : "eps=%g", eps[e]);
		print_row(name, acc, nmi, o->seeds);
		if (!isinf(eps[e]))
			printf("%-12s (noise multiplier %.4g)\n", "",
			       noise_for(&o->p, eps[e], o->delta));
	}
	print_baselines(o, ds, cl);
	free(cl);
	return 0;
}

/* Accuracy against the noise multiplier itself: where the floor, the
 * one-cluster dip and the approach to DS-SLMC lie (docs/slmc.md, 8.1). */
static int cmd_noise(const struct opts *o, const trn_dataset *ds, const trn_dataset *aux)
{
	static const double zs[] = {0.0, 0.01, 0.03, 0.1, 0.2, 0.41, 1.0, 1000.0};
	double acc[BENCH_MAX_SEEDS], nmi[BENCH_MAX_SEEDS], share[BENCH_MAX_SEEDS];

	print_config(o, ds);
	printf("%-8s %-10s %-16s %-8s %s\n", "z", "sigma", "accuracy", "largest",
	       "runs >= 90% in one cluster");
	for (size_t e = 0; e < sizeof(zs) / sizeof(zs[0]); e++) {
		double am, as, sm, ss;
		int collapsed = 0;

		for (int s = 0; s < o->seeds; s++) {
			if (run_at_noise(o, ds, aux, zs[e], &acc[s], &nmi[s], &share[s], NULL) != 0)
				return 1;
			collapsed += share[s] >= 0.9;
		}
		mean_sd(acc, o->seeds, &am, &as);
		mean_sd(share, o->seeds, &sm, &ss);
		printf("%-8g %-10.4g %6.3f +- %5.3f  %6.3f   %d/%d\n", zs[e],
		       zs[e] * trn_slmc_sensitivity(&o->p), am, as, sm, collapsed, o->seeds);
	}
	return 0;
}

/* Prints the objective per round, one column per epsilon: obj holds
 * n_eps x K values, each the mean over the streams. */
static void print_trace(const double *eps, size_t n_eps, uint32_t K, const double *obj)
{
	/* The non-private column comes first (converge puts it there). */
	char name[32];

	printf("%5s", "round");
	for (size_t e = 0; e < n_eps; e++) {
		snprintf(name, sizeof(name), isinf(eps[e]) ? "DS-SLMC" : "eps=%g", eps[e]);
		printf(" %12s", name);
	}
	for (uint32_t k = 0; k < K; k++) {
		printf("\n%5u", k + 1);
		for (size_t e = 0; e < n_eps; e++)
			printf(" %12.6g", obj[e * K + k]);
	}
	printf("\n");
}

/* The objective per round, averaged over --seeds streams per epsilon, then
 * the same runs' accuracy and NMI (finding (1) and (2) from one set of
 * runs). */
static int cmd_converge(const struct opts *o, const trn_dataset *ds, const trn_dataset *aux)
{
	static const double dflt[] = {512.0, 8.0, 0.5};
	double eps[BENCH_MAX_EPS + 1] = {INFINITY};
	size_t n_eps = 1 + eps_grid(o, dflt, sizeof(dflt) / sizeof(dflt[0]), eps, 1);
	uint32_t K = o->p.iterations;
	double *obj = calloc(n_eps * K, sizeof(double)), *one = calloc(K, sizeof(double));
	double *acc = calloc(n_eps * (size_t)o->seeds, sizeof(double));
	double *nmi = calloc(n_eps * (size_t)o->seeds, sizeof(double));
	int rc = obj && one && acc && nmi ? 0 : 1;

	print_config(o, ds);
	for (size_t e = 0; e < n_eps && rc == 0; e++)
		for (int s = 0; s < o->seeds && rc == 0; s++) {
			size_t at = e * (size_t)o->seeds + (size_t)s;

			rc = one_run(o, ds, aux, eps[e], &acc[at], &nmi[at], one) != 0;
			for (uint32_t k = 0; k < K && rc == 0; k++)
				obj[e * K + k] += one[k] / o->seeds;
		}
	if (rc == 0) {
		print_trace(eps, n_eps, K, obj);
		/* The noise multiplier of each column (0: no noise). */
		printf("%5s %12d", "z", 0);
		for (size_t e = 1; e < n_eps; e++)
			printf(" %12.4g", noise_for(&o->p, eps[e], o->delta));
		printf("\n");
		printf("%-12s %-16s   %s\n", "method", "accuracy", "NMI");
		for (size_t e = 0; e < n_eps; e++) {
			char name[32];

			snprintf(name, sizeof(name), isinf(eps[e]) ? "DS-SLMC" : "eps=%g", eps[e]);
			print_row(name, acc + e * (size_t)o->seeds, nmi + e * (size_t)o->seeds,
				  o->seeds);
		}
	}
	free(obj);
	free(one);
	free(acc);
	free(nmi);
	return rc;
}

/* k-means and FCM alone: they do not depend on the learners or epsilon. */
static int cmd_baselines(const struct opts *o, const trn_dataset *ds)
{
	uint32_t *cl = malloc(ds->n * sizeof(uint32_t));

	if (!cl)
		return 1;
	print_config(o, ds);
	printf("%-12s %-16s   %s\n", "method", "accuracy", "NMI");
	print_baselines(o, ds, cl);
	free(cl);
	return 0;
}

/* ---- options ---------------------------------------------------------------- */

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct { const char *name; double lo, hi; } real[] = {
		{"--gamma", 1e-9, 1e6}, {"--lambda", 1e-12, 1e6}, {"--rho", 1e-9, 1e9},
		{"--fuzzifier", 1.0001, 100}, {"--max-norm", 1e-9, 1e6}, {"--delta", 1e-300, 0.5},
		{"--features", 1, DPG_MAX_SLMC_FEATURES}, {"--iterations", 1, 1000},
		{"--parties", 1, 1000}, {"--seeds", 1, BENCH_MAX_SEEDS}, {"--rows", 1, 70000},
		{"--clusters", 2, DPG_MAX_SLMC_CLUSTERS}, {"--aux", 0, 70000},
	};
	double *dst[] = {&o->p.gamma, &o->p.lambda, &o->p.rho, &o->p.fuzzifier, &o->p.max_norm,
			 &o->delta};
	double v;

	for (int i = 2; i < argc; i += 2) {
		size_t r;

		if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
			o->data = argv[i + 1];
			continue;
		}
		if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) {
			o->dir = argv[i + 1];
			continue;
		}
		if (strcmp(argv[i], "--split") == 0 && i + 1 < argc &&
		    (strcmp(argv[i + 1], "train") == 0 || strcmp(argv[i + 1], "test") == 0)) {
			o->test_split = strcmp(argv[i + 1], "test") == 0;
			continue;
		}
		if (strcmp(argv[i], "--eps") == 0 && i + 1 < argc) {
			if (bench_number_list(argv[i + 1], 1e-3, 1e6, o->eps, BENCH_MAX_EPS,
					      &o->n_eps) != 0) {
				fprintf(stderr, "bad option --eps\n");
				return -1;
			}
			continue;
		}
		for (r = 0; r < sizeof(real) / sizeof(real[0]); r++)
			if (strcmp(argv[i], real[r].name) == 0)
				break;
		if (r == sizeof(real) / sizeof(real[0]) || i + 1 >= argc ||
		    bench_number(argv[i + 1], '\0', real[r].lo, real[r].hi, &v) != 0) {
			fprintf(stderr, "bad option %s\n", argv[i]);
			return -1;
		}
		if (r < 6)
			*dst[r] = v;
		else if (r == 6)
			o->p.features = (uint32_t)v;
		else if (r == 7)
			o->p.iterations = (uint32_t)v;
		else if (r == 8)
			o->p.parties = (uint32_t)v;
		else if (r == 9)
			o->seeds = (int)v;
		else if (r == 10)
			o->rows = (size_t)v;
		else if (r == 11)
			o->p.clusters = (uint32_t)v;
		else
			o->aux = (size_t)v;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.data = "iris", .dir = "../shared/data", .rows = 2000, .seeds = 5,
			 .delta = 1e-5};
	trn_dataset *ds, *aux = NULL;
	int rc;

	trn_slmc_params_default(&o.p);
	o.p.clusters = 0;
	if (argc < 2 ||
	    (strcmp(argv[1], "accuracy") != 0 && strcmp(argv[1], "converge") != 0 &&
	     strcmp(argv[1], "noise") != 0 && strcmp(argv[1], "baselines") != 0) ||
	    parse(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: %s accuracy|converge|noise|baselines [options]  (see the source)\n",
			argv[0]);
		return 2;
	}
	acct_gsl_quiet();
	ds = load_data(&o);
	if (!ds) {
		fprintf(stderr, "cannot load %s (--data-dir %s)\n", o.data, o.dir);
		return 1;
	}
	if (o.p.clusters == 0)
		o.p.clusters = ds->num_classes;
	if (split_aux(&ds, o.aux, &aux) != 0) {
		fprintf(stderr, "--aux must be below the row count\n");
		trn_dataset_free(ds);
		return 1;
	}
	if (strcmp(argv[1], "accuracy") == 0)
		rc = cmd_accuracy(&o, ds, aux);
	else if (strcmp(argv[1], "noise") == 0)
		rc = cmd_noise(&o, ds, aux);
	else if (strcmp(argv[1], "baselines") == 0)
		rc = cmd_baselines(&o, ds);
	else
		rc = cmd_converge(&o, ds, aux);
	trn_dataset_free(ds);
	trn_dataset_free(aux);
	return rc;
}
