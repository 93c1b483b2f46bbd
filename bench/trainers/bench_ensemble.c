/*
 * bench_ensemble.c: the comparison of Hamm, Cao, Belkin (ICML 2016, §6) on
 * public data: test accuracy against epsilon and the number of parties M of
 *   - alg1: Algorithm 1, majority vote, output perturbation (Theorem 1);
 *   - alg2: Algorithm 2, soft labels, output perturbation (Theorem 3);
 *   - avg:  parameter averaging with noise (Pathak, Rane, Raj 2010), at the
 *           same party-level privacy (docs/ensemble.md: sensitivity of the
 *           averaged one-vs-rest blocks 2 B / (M lambda), B blocks);
 *   - global: the non-private logistic regression on all private rows;
 *   - local: one party's non-private local classifier (party 0);
 *   - alg1/alg2 at eps = inf: the ERM on the ensemble's labels, no noise.
 *
 *   bench_ensemble [--quick] [--data DIR] [--seeds N] [--lambda X]
 *                  [--only breast_cancer|digits|fashion] [--fashion-pair A,B]
 *                  [--pcs K]
 *
 * Splits (after a fresh shuffle per seed): the CSV tables give 60% private
 * rows (dealt round-robin to the M parties, i.e. a random equal partition),
 * 20% public auxiliary rows, 20% public test rows.  Fashion-MNIST: the two
 * classes' training images are the private rows; their test images are
 * halved into auxiliary and test rows.  Features are standardised with
 * the statistics of the split's public auxiliary rows, then, with --pcs
 * K, projected on the top K principal directions of the auxiliary rows
 * and standardised again with theirs;
 * the input rule's scale is B = sqrt(d), so rows longer than the typical
 * standardised row are scaled down to norm 1.  Local models are
 * logistic regressions.  All noise and shuffles come from a CSPRNG stream
 * keyed by getrandom, so figures vary from run to run; each (dataset, M,
 * seed) solves the ERMs once and draws fresh noise for every epsilon, as
 * trn_ensemble_run would for each job.  Defaults: 10 seeds; --pcs and
 * --lambda per data set (below; --pcs 0 keeps the features raw).  --quick:
 * M in {10, 100}, 2 seeds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trn_internal.h"

#define N_EPS 5
/* L2 weight of the voters' and the global non-private logistic models (the
 * trainer's local_lambda default). */
#define LOCAL_LAMBDA 1e-3
/* L2 weight of the released ERMs (see the README for how it was chosen). */
/* The input rule's scale B = B_FACTOR sqrt(d): standardised rows have
 * ||x|| about sqrt(d), so about half of them are scaled down to norm 1. */
#define B_FACTOR 1.0

/*
 * Per data set defaults of the released ERM's lambda and the number of
 * public principal directions, picked by a small sweep (pcs 3/5/10, lambda
 * 0.003-0.1, 3 seeds) on test accuracy at M = 100: an optimistic,
 * non-private choice a real deployment would make on public data.
 */
typedef struct dataset_defaults {
	double lambda;
	int pcs;
} dataset_defaults;

static const dataset_defaults BREAST_CANCER = {0.03, 5};
static const dataset_defaults DIGITS = {0.03, 10};
static const dataset_defaults FASHION = {0.03, 5};
#define N_METHODS 3
#define MAX_SEEDS 20

static const double EPSILONS[N_EPS] = {0.1, 0.3, 1, 3, 10};
static const char *const METHODS[N_METHODS] = {"alg1", "alg2", "avg"};

typedef struct bench_opts {
	const char *data_dir;
	const char *only;
	int seeds;
	int pcs;              /* public principal components; 0: raw features */
	bool quick;
	double lambda;        /* 0: the per-dataset default */
	uint32_t pair[2];
} bench_opts;

/* Mean and spread accumulated over seeds. */
typedef struct stat {
	double sum, sumsq;
	int n;
} stat;

static void stat_add(stat *s, double x)
{
	s->sum += x;
	s->sumsq += x * x;
	s->n++;
}

static void stat_print(const stat *s)
{
	double m = s->sum / s->n, var = s->n > 1 ? (s->sumsq - s->n * m * m) / (s->n - 1) : 0;

	printf(" %.3f±%.3f", m, sqrt(var > 0 ? var : 0));
}

/* ---- data ------------------------------------------------------------------ */

/* Rows idx[0..n) of src as a new table (labels mapped through `map` when
 * not NULL). */
static trn_dataset *take_rows(const trn_dataset *src, const size_t *idx, size_t n,
			      uint32_t K, const uint32_t *map)
{
	trn_dataset *ds = NULL;

	if (trn_dataset_new(n, src->d, K, &ds, NULL) < 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		memcpy(ds->x + i * src->d, src->x + idx[i] * src->d, src->d * sizeof(double));
		ds->y[i] = map ? map[src->y[idx[i]]] : src->y[idx[i]];
	}
	return ds;
}

static void shuffle(mech_rng *rng, size_t *idx, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		uint64_t j;
		size_t t;

		if (mech_rng_uint_below(rng, i, &j) < 0)
			abort();   /* a benchmark without randomness has nothing to report */
		t = idx[i - 1];
		idx[i - 1] = idx[j];
		idx[j] = t;
	}
}

/* A task: private rows, public auxiliary and test rows. */
typedef struct task {
	const char *name;
	trn_dataset *train, *aux, *test;
	double lambda;
} task;

static void task_free(task *t)
{
	trn_dataset_free(t->train);
	trn_dataset_free(t->aux);
	trn_dataset_free(t->test);
	memset(t, 0, sizeof(*t));
}

/* Standardises the three tables of a split with the statistics of its
 * public auxiliary rows (the auxiliary table last, since it is the
 * reference): no statistic of the private rows shapes the features. */
static void standardise_by_aux(task *t)
{
	bench_standardise(t->aux, t->train);
	bench_standardise(t->aux, t->test);
	bench_standardise(t->aux, t->aux);
}

/*
 * Projects the three tables on the top k principal directions of the public
 * auxiliary rows (exact PCA of their unit-normalised rows, trn__dp_pca with
 * no noise), then standardises every table with the projected auxiliary
 * rows' statistics.  Public data only: the noise of output perturbation
 * grows with the dimension (its norm is Gamma(d + 1, 1/beta)), so fewer,
 * public, directions leave more signal.
 */
static int public_pca(task *t, size_t k, mech_rng *rng)
{
	double *v = malloc(t->aux->d * k * sizeof(double));
	int rc = v ? 0 : -1;

	if (rc == 0)
		rc = trn__dp_pca(t->aux->x, t->aux->n, t->aux->d, k, 0.0, rng, v, NULL);
	if (rc == 0)
		rc = bench_project(&t->train, v, k) | bench_project(&t->aux, v, k) |
		     bench_project(&t->test, v, k);
	if (rc == 0)
		standardise_by_aux(t);
	free(v);
	return rc;
}

/* 60/20/20 split of a whole table after a shuffle. */
static int split_table(const trn_dataset *all, mech_rng *rng, task *t)
{
	size_t n = all->n, n_tr = n * 3 / 5, n_aux = n / 5;
	size_t *idx = malloc(n * sizeof(size_t));

	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	shuffle(rng, idx, n);
	t->train = take_rows(all, idx, n_tr, all->num_classes, NULL);
	t->aux = take_rows(all, idx + n_tr, n_aux, all->num_classes, NULL);
	t->test = take_rows(all, idx + n_tr + n_aux, n - n_tr - n_aux, all->num_classes, NULL);
	free(idx);
	return t->train && t->aux && t->test ? 0 : -1;
}

/* Fashion-MNIST classes a, b (as 0, 1): their training images private,
 * their test images halved into auxiliary and test rows. */
static int split_fashion(const trn_dataset *tr, const trn_dataset *te, const uint32_t *pair,
			 mech_rng *rng, task *t)
{
	uint32_t map[TRN_FASHION_MNIST_CLASSES];
	size_t *a = malloc(tr->n * sizeof(size_t)), *b = malloc(te->n * sizeof(size_t));
	size_t na = 0, nb = 0;

	for (uint32_t c = 0; c < TRN_FASHION_MNIST_CLASSES; c++)
		map[c] = c == pair[1] ? 1 : 0;
	for (size_t i = 0; i < tr->n; i++)
		if (tr->y[i] == pair[0] || tr->y[i] == pair[1])
			a[na++] = i;
	for (size_t i = 0; i < te->n; i++)
		if (te->y[i] == pair[0] || te->y[i] == pair[1])
			b[nb++] = i;
	shuffle(rng, a, na);
	shuffle(rng, b, nb);
	t->train = take_rows(tr, a, na, 2, map);
	t->aux = take_rows(te, b, nb / 2, 2, map);
	t->test = take_rows(te, b + nb / 2, nb - nb / 2, 2, map);
	free(a);
	free(b);
	return t->train && t->aux && t->test ? 0 : -1;
}

/* ---- methods ----------------------------------------------------------------- */

/* Accuracy on the test rows of linear blocks w over inputs u (the class
 * rule of the released model: block k's score, or for two classes class 1
 * when the one block's score is positive). */
static double linear_accuracy(const double *w, uint32_t K, const double *u, const trn_dataset *te)
{
	uint32_t blocks = trn__ensemble_blocks(K);
	size_t du = te->d + 1, right = 0;

	for (size_t i = 0; i < te->n; i++) {
		uint32_t cls = 0;
		double best = -INFINITY;

		for (uint32_t b = 0; b < blocks; b++) {
			double s = 0;

			for (size_t j = 0; j < du; j++)
				s += w[b * du + j] * u[i * du + j];
			if (blocks == 1)
				cls = s > 0;
			else if (s > best) {
				best = s;
				cls = b;
			}
		}
		right += cls == te->y[i];
	}
	return (double)right / te->n;
}

/* Releases w + noise of rate beta through the trainer's own release path
 * and returns the model's accuracy on the test rows. */
static double release_accuracy(const double *w, const task *t, double beta, double B,
			       mech_rng *rng)
{
	uint32_t K = t->train->num_classes;
	size_t len = trn__ensemble_blocks(K) * (t->train->d + 1);
	double *wc = malloc(len * sizeof(double)), acc = NAN;
	trn_model *m = NULL;
	acct_error err;

	acct_error_init(&err);
	memcpy(wc, w, len * sizeof(double));
	if (trn__ensemble_release(wc, K, t->train->d, beta, B, rng, &m, &err) == 0)
		trn_model_evaluate(m, t->test, &acc, NULL, &err);
	trn_model_free(m);
	free(wc);
	return acc;
}

/* One-hot (or for two classes, class-1) targets of labelled rows. */
static double *label_targets(const trn_dataset *ds, const size_t *rows, size_t n)
{
	uint32_t K = ds->num_classes, blocks = trn__ensemble_blocks(K);
	double *a = malloc(n * blocks * sizeof(double));

	for (size_t i = 0; i < n; i++)
		for (uint32_t b = 0; b < blocks; b++)
			a[i * blocks + b] = ds->y[rows ? rows[i] : i] == (blocks == 1 ? 1 : b);
	return a;
}

/* Logistic models of parties 0..fit-1 of M (w_all: fit x blocks x du; a
 * party without rows keeps w = 0). */
static int local_models(const task *t, const double *u, uint32_t M, uint32_t fit,
			double lambda, double *w_all)
{
	size_t du = t->train->d + 1, n = t->train->n;
	uint32_t blocks = trn__ensemble_blocks(t->train->num_classes);
	size_t *rows = malloc(n * sizeof(size_t));
	double *up = malloc(n * du * sizeof(double));
	int rc = 0;

	memset(w_all, 0, (size_t)fit * blocks * du * sizeof(double));
	for (uint32_t j = 0; j < fit && rc == 0; j++) {
		size_t nj = 0;
		double *a;

		for (size_t i = j; i < n; i += M) {   /* party of row i: i mod M */
			memcpy(up + nj * du, u + i * du, du * sizeof(double));
			rows[nj++] = i;
		}
		if (nj == 0)
			continue;
		a = label_targets(t->train, rows, nj);
		rc = trn__ensemble_fit(up, nj, du, a, blocks, lambda, w_all + (size_t)j * blocks * du,
				       NULL);
		free(a);
	}
	free(rows);
	free(up);
	return rc;
}

/* Results of one (task, M) over seeds. */
typedef struct m_stats {
	stat acc[N_METHODS][N_EPS];
	stat no_noise[2];   /* alg1, alg2 at eps = inf */
	stat local;
} m_stats;

/* Inputs of the three tables, computed once per seed. */
typedef struct task_inputs {
	double *u_train, *u_aux, *u_test;
	double B;
} task_inputs;

/* Algorithms 1 and 2 for one M: votes, exact ERMs, then noise per epsilon. */
static int run_ensemble(const task *t, const task_inputs *in, uint32_t M, mech_rng *rng,
			m_stats *st)
{
	uint32_t K = t->train->num_classes, blocks = trn__ensemble_blocks(K);
	size_t du = t->train->d + 1, n_aux = t->aux->n;
	uint32_t *party = malloc(t->train->n * sizeof(uint32_t)), *counts = calloc(n_aux * K, 4);
	double *a = malloc(n_aux * blocks * sizeof(double)), *w = malloc(blocks * du * 8);
	trn_ensemble_params p;
	acct_error err;
	int rc;

	acct_error_init(&err);
	trn_ensemble_params_default(&p);
	p.parties = M;
	p.lambda = t->lambda;
	p.input_scale = in->B;
	for (size_t i = 0; i < t->train->n; i++)
		party[i] = (uint32_t)(i % M);
	rc = trn__ensemble_votes(&p, t->train, in->u_train, party, in->u_aux, n_aux, NULL, NULL,
				 NULL, counts, &err);
	for (int alg = 0; alg < 2 && rc == 0; alg++) {
		p.algorithm = alg == 0 ? TRN_ENSEMBLE_MAJORITY_VOTE : TRN_ENSEMBLE_SOFT_LABEL;
		trn__ensemble_targets(p.algorithm, counts, n_aux, K, M, a);
		rc = trn__ensemble_fit(in->u_aux, n_aux, du, a, blocks, p.lambda, w, &err);
		if (rc < 0)
			break;
		stat_add(&st->no_noise[alg], linear_accuracy(w, K, in->u_test, t->test));
		for (int e = 0; e < N_EPS; e++) {
			p.epsilon = EPSILONS[e];
			stat_add(&st->acc[alg][e],
				 release_accuracy(w, t, trn_ensemble_noise_beta(&p, t->train->d, K,
										n_aux),
						  in->B, rng));
		}
	}
	if (rc < 0)
		fprintf(stderr, "ensemble: %s\n", err.text);
	free(party);
	free(counts);
	free(a);
	free(w);
	return rc;
}

/*
 * Parameter averaging (Pathak et al. 2010) at party-level privacy: each
 * block of a party's exact minimiser has norm at most 1/lambda (at the
 * optimum lambda w = -(1/n) sum (sigma_i - a_i) u_i, each term of norm at
 * most 1), so replacing a party moves the average's block by 2/(M lambda)
 * and all B blocks by 2B/(M lambda); the solver's 1e-10 gradient adds
 * 2e-10/lambda per block, rounded up here to 2e-9/lambda.
 */
static int run_averaging(const task *t, const task_inputs *in, uint32_t M, mech_rng *rng,
			 m_stats *st)
{
	uint32_t K = t->train->num_classes, blocks = trn__ensemble_blocks(K);
	size_t du = t->train->d + 1, len = blocks * du;
	double *w_all = malloc((size_t)M * len * sizeof(double)), *avg = calloc(len, 8);
	double sens = blocks * (2.0 / (M * t->lambda) + 2e-9 / t->lambda);
	int rc = local_models(t, in->u_train, M, M, t->lambda, w_all);

	/* the single local classifier: party 0's, at the voters' lambda */
	if (rc == 0)
		rc = local_models(t, in->u_train, M, 1, LOCAL_LAMBDA, avg);
	if (rc == 0)
		stat_add(&st->local, linear_accuracy(avg, K, in->u_test, t->test));
	memset(avg, 0, len * sizeof(double));
	if (rc == 0) {
		for (uint32_t j = 0; j < M; j++)
			for (size_t k = 0; k < len; k++)
				avg[k] += w_all[(size_t)j * len + k] / M;
		for (int e = 0; e < N_EPS; e++)
			stat_add(&st->acc[2][e],
				 release_accuracy(avg, t, EPSILONS[e] / sens, in->B, rng));
	}
	free(w_all);
	free(avg);
	return rc;
}

/* The non-private global logistic regression on all private rows. */
static double run_global(const task *t, const task_inputs *in, double lambda)
{
	uint32_t K = t->train->num_classes, blocks = trn__ensemble_blocks(K);
	size_t du = t->train->d + 1;
	double *a = label_targets(t->train, NULL, t->train->n), *w = malloc(blocks * du * 8), acc;

	acc = trn__ensemble_fit(in->u_train, t->train->n, du, a, blocks, lambda, w, NULL) == 0
		      ? linear_accuracy(w, K, in->u_test, t->test)
		      : NAN;
	free(a);
	free(w);
	return acc;
}

/* ---- driver -------------------------------------------------------------------- */

static void print_task(const task *t, bool pcs, const uint32_t *Ms, int n_m, m_stats *st,
		       const stat *global)
{
	printf("\n## %s: %zu private rows, %zu auxiliary, %zu test, d=%zu%s, %u classes, "
	       "lambda=%g\n", t->name, t->train->n, t->aux->n, t->test->n, t->train->d,
	       pcs ? " (public PCA)" : "", t->train->num_classes, t->lambda);
	printf("global (non-private, all private rows):");
	stat_print(global);
	printf("\n%-4s %-8s", "M", "method");
	for (int e = 0; e < N_EPS; e++)
		printf("   eps=%-6g  ", EPSILONS[e]);
	printf("   eps=inf\n");
	for (int mi = 0; mi < n_m; mi++) {
		for (int k = 0; k < N_METHODS; k++) {
			printf("%-4u %-8s", Ms[mi], METHODS[k]);
			for (int e = 0; e < N_EPS; e++)
				stat_print(&st[mi].acc[k][e]);
			if (k < 2)
				stat_print(&st[mi].no_noise[k]);
			printf("\n");
		}
		printf("%-4u %-8s", Ms[mi], "local");
		stat_print(&st[mi].local);
		printf("\n");
	}
	fflush(stdout);
}

static int task_inputs_make(const task *t, task_inputs *in)
{
	in->B = B_FACTOR * sqrt((double)t->train->d);
	return trn__ensemble_inputs(t->train, in->B, &in->u_train, NULL) < 0 ||
	       trn__ensemble_inputs(t->aux, in->B, &in->u_aux, NULL) < 0 ||
	       trn__ensemble_inputs(t->test, in->B, &in->u_test, NULL) < 0 ? -1 : 0;
}

static void task_inputs_free(task_inputs *in)
{
	free(in->u_train);
	free(in->u_aux);
	free(in->u_test);
}

/* All seeds of one data set: split, then every M. */
static int bench_dataset(const char *name, const trn_dataset *all, const trn_dataset *fm_test,
			 const bench_opts *o, const dataset_defaults *dd, mech_rng *rng)
{
	double lambda = o->lambda > 0 ? o->lambda : dd->lambda;
	int pcs = o->pcs >= 0 ? o->pcs : dd->pcs;
	bool project = pcs > 0 && (size_t)pcs < all->d;
	static const uint32_t full_m[] = {10, 50, 100}, quick_m[] = {10, 100};
	const uint32_t *Ms = o->quick ? quick_m : full_m;
	int n_m = o->quick ? 2 : 3, rc = 0;
	m_stats st[3];
	stat global = {0};
	task t = {0};

	memset(st, 0, sizeof(st));
	for (int s = 0; s < o->seeds && rc == 0; s++) {
		task_inputs in = {0};

		rc = fm_test ? split_fashion(all, fm_test, o->pair, rng, &t) : split_table(all, rng, &t);
		if (rc == 0)
			standardise_by_aux(&t);
		t.name = name;
		t.lambda = lambda;
		if (rc == 0 && project)
			rc = public_pca(&t, (size_t)pcs, rng);
		if (rc == 0)
			rc = task_inputs_make(&t, &in);
		if (rc == 0)
			stat_add(&global, run_global(&t, &in, LOCAL_LAMBDA));
		for (int mi = 0; mi < n_m && rc == 0; mi++) {
			rc = run_ensemble(&t, &in, Ms[mi], rng, &st[mi]);
			if (rc == 0)
				rc = run_averaging(&t, &in, Ms[mi], rng, &st[mi]);
		}
		fprintf(stderr, "%s: seed %d done\n", name, s + 1);
		task_inputs_free(&in);
		if (s + 1 < o->seeds || rc != 0)
			task_free(&t);
	}
	if (rc == 0)
		print_task(&t, project, Ms, n_m, st, &global);
	task_free(&t);
	return rc;
}

/* One option (bench_options); --quick is the one flag. */
static int parse_option(void *arg, const char *a, const char *v)
{
	bench_opts *o = arg;

	if (strcmp(a, "--quick") == 0) {
		o->quick = true;
		o->seeds = 2;
	} else if (strcmp(a, "--data") == 0) {
		o->data_dir = v;
	} else if (strcmp(a, "--only") == 0) {
		o->only = v;
	} else if (strcmp(a, "--seeds") == 0) {
		o->seeds = atoi(v);
	} else if (strcmp(a, "--pcs") == 0) {
		o->pcs = atoi(v);
	} else if (strcmp(a, "--lambda") == 0) {
		o->lambda = strtod(v, NULL);
	} else if (strcmp(a, "--fashion-pair") == 0) {
		return sscanf(v, "%u,%u", &o->pair[0], &o->pair[1]) == 2 ? 0 : -1;
	} else {
		return -1;
	}
	return 0;
}

static int parse_opts(int argc, char **argv, bench_opts *o)
{
	static const char *const flags[] = {"--quick", NULL};

	o->data_dir = "../shared/data";
	o->seeds = 10;
	o->pcs = -1;   /* the data set's default */
	o->pair[0] = 0;   /* T-shirt/top */
	o->pair[1] = 6;   /* shirt */
	if (bench_options(argc, argv, 1, flags, parse_option, o) < 0)
		return -1;
	return o->seeds >= 1 && o->seeds <= MAX_SEEDS && o->pcs >= -1 && o->pair[0] != o->pair[1] &&
			       o->pair[0] < 10 && o->pair[1] < 10 && o->lambda >= 0
		       ? 0
		       : -1;
}

static bool wanted(const bench_opts *o, const char *name)
{
	return !o->only || strcmp(o->only, name) == 0;
}

static int run_csv(const bench_opts *o, const char *name, const dataset_defaults *dd,
		   mech_rng *rng)
{
	char path[4096];
	trn_dataset *all = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/%s.csv", o->data_dir, name);
	if (bench_csv_load(path, &all) < 0) {
		fprintf(stderr, "cannot read %s\n", path);
		return -1;
	}
	rc = bench_dataset(name, all, NULL, o, dd, rng);
	trn_dataset_free(all);
	return rc;
}

static int run_fashion(const bench_opts *o, mech_rng *rng)
{
	trn_dataset *tr = NULL, *te = NULL;
	acct_error err;
	char name[64];
	int rc;

	acct_error_init(&err);
	if (trn_fashion_mnist_load(NULL, true, &tr, &err) < 0 ||
	    trn_fashion_mnist_load(NULL, false, &te, &err) < 0) {
		fprintf(stderr, "loading Fashion-MNIST: %s\n", err.text);
		trn_dataset_free(tr);
		return -1;
	}
	snprintf(name, sizeof(name), "fashion-mnist %u vs %u", o->pair[0], o->pair[1]);
	rc = bench_dataset(name, tr, te, o, &FASHION, rng);
	trn_dataset_free(tr);
	trn_dataset_free(te);
	return rc;
}

int main(int argc, char **argv)
{
	bench_opts o = {0};
	mech_rng *sys, *rng;
	int rc = 0;

	if (parse_opts(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: %s [--quick] [--data DIR] [--seeds N] [--lambda X] "
				"[--only NAME] [--fashion-pair A,B]\n", argv[0]);
		return 2;
	}
	sys = mech_rng_new_system();
	rng = sys ? mech_rng_new_stream(sys) : NULL;
	if (!rng)
		return 1;
	printf("# bench_ensemble: test accuracy, mean±sd over %d seeds (Hamm et al. 2016)\n",
	       o.seeds);
	if (wanted(&o, "breast_cancer"))
		rc |= run_csv(&o, "breast_cancer", &BREAST_CANCER, rng);
	if (wanted(&o, "digits"))
		rc |= run_csv(&o, "digits", &DIGITS, rng);
	if (wanted(&o, "fashion"))
		rc |= run_fashion(&o, rng);
	mech_rng_free(rng);
	mech_rng_free(sys);
	return rc ? 1 : 0;
}
