/*
 * bench_pate_job.c: the `pate` trainer (Papernot et al., ICLR 2018) on
 * Fashion-MNIST, as Section 4's MNIST experiment is set up: private
 * teachers on the 60 000 training images, the student on a public part of
 * the test split, evaluated on the rest.
 *
 *   bench_pate_job [--teachers N] [--queries Q] [--pcs K] [--epochs E]
 *              [--semi] [--data DIR]
 *
 * Splits: test images 0..8999 are the student's public unlabelled pool
 * (the first Q are the queries; their labels only score the answered
 * queries), images 9000..9999 the evaluation rows, as the paper splits
 * MNIST's test set.  Features: the top K principal directions of the
 * student pool (exact PCA of its unit-normalised rows, trn__dp_pca with no
 * noise), standardised with the pool's statistics: public data only, so
 * they cost nothing.  Teachers and students are logistic regressions
 * (non-private SGD, E epochs, lots of 32).
 *
 * Rows: the non-private student (trained on the true labels of the Q
 * queries), plain GNMax (sigma 40), Confident-GNMax at the paper's MNIST
 * setting (T 200, sigma1 150, sigma2 40) and a sweep of sigma2.  For each:
 * queries answered, their label accuracy, the student's test accuracy, the
 * data-independent epsilon of what ran (what a job's ledger is charged:
 * the rdp accountant's epsilon of trn_pate_event at delta 1e-5) and the
 * data-dependent epsilon released by the GNSS mechanism (order 14, beta
 * 0.0329, sigma 15: the job's defaults).  All noise and the partitions come
 * from a CSPRNG stream keyed by getrandom: figures vary from run to run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trn_internal.h"

#define POOL_ROWS 9000
#define DELTA 1e-5

typedef struct bench_opts {
	const char *dir;
	uint32_t teachers, queries, pcs, epochs;
	bool semi;
} bench_opts;

/* One configuration of the aggregator (gnmax: no check). */
typedef struct agg_row {
	const char *name;
	mech_pate_agg agg;
	double threshold, sigma1, sigma2;
} agg_row;

static const agg_row ROWS[] = {
	{"gnmax", MECH_PATE_GNMAX, 0, 0, 40},
	{"confident", MECH_PATE_CONFIDENT, 200, 150, 40},
	{"confident", MECH_PATE_CONFIDENT, 200, 150, 20},
	{"confident", MECH_PATE_CONFIDENT, 200, 150, 60},
	{"confident", MECH_PATE_CONFIDENT, 200, 150, 80},
};

/* Rows [lo, hi) of src as a new table. */
static trn_dataset *slice(const trn_dataset *src, size_t lo, size_t hi)
{
	trn_dataset *ds = NULL;

	if (trn_dataset_new(hi - lo, src->d, src->num_classes, &ds, NULL) < 0)
		return NULL;
	memcpy(ds->x, src->x + lo * src->d, (hi - lo) * src->d * sizeof(double));
	memcpy(ds->y, src->y + lo, (hi - lo) * sizeof(uint32_t));
	return ds;
}

/* The tables: private train, public pool and evaluation rows, projected on
 * the pool's top pcs directions and standardised by the pool. */
static int load(const bench_opts *o, mech_rng *rng, trn_dataset **train, trn_dataset **pool,
		trn_dataset **eval)
{
	trn_dataset *te = NULL;
	double *v = NULL;
	int rc = trn_fashion_mnist_load(o->dir, true, train, NULL) |
		 trn_fashion_mnist_load(o->dir, false, &te, NULL);

	if (rc == 0) {
		*pool = slice(te, 0, POOL_ROWS);
		*eval = slice(te, POOL_ROWS, te->n);
		v = malloc(te->d * o->pcs * sizeof(double));
		rc = *pool && *eval && v ? 0 : -1;
	}
	if (rc == 0)
		rc = trn__dp_pca((*pool)->x, (*pool)->n, (*pool)->d, o->pcs, 0.0, rng, v, NULL);
	if (rc == 0)
		rc = bench_project(train, v, o->pcs) | bench_project(eval, v, o->pcs) |
		     bench_project(pool, v, o->pcs);
	if (rc == 0) {
		bench_standardise(*pool, *train);
		bench_standardise(*pool, *eval);
		bench_standardise(*pool, *pool);
	}
	trn_dataset_free(te);
	free(v);
	return rc;
}

static trn_pate_params params_of(const bench_opts *o, const agg_row *row)
{
	trn_pate_params p;

	trn_pate_params_default(&p);
	p.teachers = o->teachers;
	p.queries = o->queries;
	p.aggregator = row->agg;
	p.threshold = row->threshold;
	p.sigma1 = row->sigma1 > 0 ? row->sigma1 : 1;
	p.sigma2 = row->sigma2;
	p.teacher.model = p.student.model = TRN_MODEL_LOGREG;
	p.teacher.epochs = p.student.epochs = o->epochs;
	p.teacher.lot_size = p.student.lot_size = 32;
	p.teacher.learning_rate = p.student.learning_rate = 0.05;
	p.semi_supervised = o->semi;
	p.delta = DELTA;
	return p;
}

/* The rdp accountant's epsilon at DELTA of what a run did. */
static double charged_epsilon(const trn_pate_params *p, const trn_pate_result *r)
{
	acct_event *ev = NULL;

	if (trn_pate_event(p, r->checks, r->answers, r->released, &ev, NULL) != 0)
		return NAN;
	return bench_rdp_epsilon(ev, DELTA, NULL);
}

static int run_row(const bench_opts *o, const agg_row *row, const trn_dataset *train,
		   const trn_dataset *pool, const trn_dataset *eval, mech_rng *rng)
{
	trn_pate_params p = params_of(o, row);
	trn_pate_result *r = NULL;
	acct_error err;
	int rc;

	acct_error_init(&err);
	rc = trn_pate_run(&p, train, pool, eval, rng, NULL, NULL, NULL, &r, &err);
	if (rc != 0) {
		fprintf(stderr, "bench_pate_job: %s at %s\n", err.text, err.where);
		return -1;
	}
	printf("%-10s %6.0f %6.0f %6.0f %8lld %8lld %9.4f %9.4f %9.3f %9.3f %7.1f\n", row->name,
	       row->threshold, row->sigma1, row->sigma2, (long long)r->queries_asked,
	       (long long)r->answers, r->label_accuracy, r->test_accuracy, charged_epsilon(&p, r),
	       r->epsilon_data_dependent, r->train_seconds);
	fflush(stdout);
	trn_pate_result_free(r);
	return 0;
}

/* The student on the true labels of the queries: the ceiling of label
 * quality at this student and this number of queries. */
static int nonprivate_row(const bench_opts *o, const trn_dataset *pool, const trn_dataset *eval,
			  mech_rng *rng)
{
	trn_dpsgd_params sp;
	trn_dpsgd_result *res = NULL;
	trn_dataset *q = slice(pool, 0, o->queries);
	int rc;

	trn_dpsgd_params_default(&sp);
	sp.model = TRN_MODEL_LOGREG;
	sp.n_hidden = 0;
	sp.epochs = o->epochs;
	sp.lot_size = 32;
	sp.learning_rate = sp.learning_rate_final = 0.05;
	sp.momentum = 0.9;
	rc = q ? trn_sgd_nonprivate_run(&sp, q, eval, rng, NULL, NULL, NULL, &res, NULL) : -1;
	if (rc == 0)
		printf("%-10s %6s %6s %6s %8u %8u %9.4f %9.4f %9s %9s %7.1f\n", "nonprivate", "-", "-",
		       "-", o->queries, o->queries, 1.0, res->test_accuracy, "inf", "inf",
		       res->train_seconds);
	trn_dpsgd_result_free(res);
	trn_dataset_free(q);
	return rc;
}

/* One option (bench_options); --semi is the one flag. */
static int parse_option(void *arg, const char *a, const char *v)
{
	bench_opts *o = arg;
	uint32_t *field = !strcmp(a, "--teachers") ? &o->teachers :
			  !strcmp(a, "--queries")  ? &o->queries :
			  !strcmp(a, "--pcs")	   ? &o->pcs :
			  !strcmp(a, "--epochs")   ? &o->epochs : NULL;
	double x;

	if (!strcmp(a, "--semi"))
		o->semi = true;
	else if (!strcmp(a, "--data"))
		o->dir = v;
	else if (field && bench_number(v, '\0', 1, POOL_ROWS, &x) == 0)
		*field = (uint32_t)x;
	else
		return -1;
	return 0;
}

static int parse(int argc, char **argv, bench_opts *o)
{
	static const char *const flags[] = {"--semi", NULL};

	*o = (bench_opts){NULL, 250, 1000, 50, 30, false};
	if (bench_options(argc, argv, 1, flags, parse_option, o) < 0)
		return -1;
	return o->pcs <= TRN_FASHION_MNIST_FEATURES ? 0 : -1;
}

int main(int argc, char **argv)
{
	bench_opts o;
	trn_dataset *train = NULL, *pool = NULL, *eval = NULL;
	mech_rng *sys = mech_rng_new_system(), *rng = sys ? mech_rng_new_stream(sys) : NULL;
	int rc = 1;

	if (parse(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: bench_pate_job [--teachers N] [--queries Q] [--pcs K] "
				"[--epochs E] [--semi] [--data DIR]\n");
		goto out;
	}
	if (!rng || load(&o, rng, &train, &pool, &eval) != 0) {
		fprintf(stderr, "bench_pate_job: cannot load Fashion-MNIST or draw randomness\n");
		goto out;
	}
	printf("# Fashion-MNIST: %zu private rows, %u teachers, %u queries of %d pool rows, "
	       "%zu evaluation rows, %u public PCs, logreg, %u epochs%s; delta %g\n",
	       train->n, o.teachers, o.queries, POOL_ROWS, eval->n, o.pcs, o.epochs,
	       o.semi ? ", self-training at 0.9" : "", DELTA);
	printf("%-10s %6s %6s %6s %8s %8s %9s %9s %9s %9s %7s\n", "aggregator", "T", "sigma1",
	       "sigma2", "asked", "answered", "label_acc", "test_acc", "eps_chg", "eps_dd", "sec");
	if (nonprivate_row(&o, pool, eval, rng) != 0)
		goto out;
	for (size_t i = 0; i < sizeof(ROWS) / sizeof(ROWS[0]); i++)
		if (run_row(&o, &ROWS[i], train, pool, eval, rng) != 0)
			goto out;
	rc = 0;
out:
	trn_dataset_free(train);
	trn_dataset_free(pool);
	trn_dataset_free(eval);
	mech_rng_free(rng);
	mech_rng_free(sys);
	return rc;
}
