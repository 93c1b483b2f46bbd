/*
 * bench_scatter.c: the scattering transform (trn_scatter.c) on
 * Fashion-MNIST:
 *
 *   bench_scatter speed [--images N]       images/s on one core, 28 x 28,
 *                                          J = 2, L = 8 (81 x 7 x 7)
 *   bench_scatter accuracy [options]       NON-PRIVATE sanity figure: test
 *                                          accuracy of logistic regression
 *                                          on scattering features and on
 *                                          raw pixels
 *
 * Options of accuracy (defaults in brackets): --rows N (first N training
 * rows) [10000] --epochs E [30] --lot L [256] --lr X[,X...] [0.01] --momentum X
 * [0.9] --valid N [0]: with N > 0, the last N training rows replace the
 * test split as the evaluation table (tune there, then report the test
 * split once; --rows must leave them out).  Both tables are standardised per feature with the mean and
 * deviation of the training rows, as Tramer and Boneh standardise before
 * their linear model; that reads the rows, which only a public table and a
 * non-private figure allow.  Nothing here is differentially private.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "trn.h"

/* Learning rates one run may try. */
#define BENCH_SCATTER_MAX_LR 8

struct opts {
	size_t images;
	size_t rows;
	size_t valid;            /* rows held out at the end of the training split */
	double lr[BENCH_SCATTER_MAX_LR];
	size_t n_lr;
	trn_dpsgd_params p;
};

static int cmd_speed(const struct opts *o, const trn_dataset *train)
{
	trn_scatter *s = NULL;
	trn_scatter_workspace *w = NULL;
	size_t n = o->images < train->n ? o->images : train->n;
	double *out = NULL, t0, t1;
	int rc = 1;

	t0 = bench_now_s();
	if (trn_scatter_new(28, 28, 2, 8, &s, NULL) != 0)
		goto out;
	t1 = bench_now_s();
	if (trn_scatter_workspace_new(s, &w, NULL) != 0)
		goto out;
	out = malloc(trn_scatter_channels(s) * 49 * sizeof(double));
	if (!out)
		goto out;
	printf("bank: %zu channels of %zu x %zu, padded %zu x %zu, built in %.3f s\n",
	       trn_scatter_channels(s), trn_scatter_out_rows(s), trn_scatter_out_cols(s),
	       trn_scatter_padded_rows(s), trn_scatter_padded_cols(s), t1 - t0);
	t0 = bench_now_s();
	for (size_t i = 0; i < n; i++)
		if (trn_scatter_apply(s, train->x + i * train->d, out, w) != 0)
			goto out;
	t1 = bench_now_s();
	printf("speed: %zu images in %.3f s: %.0f images/s (one thread)\n", n, t1 - t0,
	       (double)n / (t1 - t0));
	rc = 0;
out:
	free(out);
	trn_scatter_workspace_free(w);
	trn_scatter_free(s);
	return rc;
}

/* Standardises every column of train and test with train's mean and
 * deviation (public tables only). */
static void standardise(trn_dataset *train, trn_dataset *test)
{
	for (size_t j = 0; j < train->d; j++) {
		double mean = 0.0, var = 0.0, sd;

		for (size_t i = 0; i < train->n; i++)
			mean += train->x[i * train->d + j];
		mean /= (double)train->n;
		for (size_t i = 0; i < train->n; i++) {
			double z = train->x[i * train->d + j] - mean;
			var += z * z;
		}
		sd = sqrt(var / (double)train->n);
		sd = sd > 1e-12 ? sd : 1.0;
		for (size_t i = 0; i < train->n; i++)
			train->x[i * train->d + j] = (train->x[i * train->d + j] - mean) / sd;
		for (size_t i = 0; i < test->n; i++)
			test->x[i * test->d + j] = (test->x[i * test->d + j] - mean) / sd;
	}
}

static int logreg(const struct opts *o, const char *name, trn_dataset *train, trn_dataset *test)
{
	trn_dpsgd_result *r = NULL;
	mech_rng *rng = NULL;
	acct_error err;
	int rc;

	acct_error_init(&err);
	rng = mech_rng_new_system();
	if (!rng)
		return 1;
	rc = trn_sgd_nonprivate_run(&o->p, train, test, rng, NULL, NULL, NULL, &r, &err);
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", name, err.text);
		mech_rng_free(rng);
		return 1;
	}
	printf("%s: d=%zu train_rows=%zu %s_accuracy=%.4f loss=%.4f "
	       "train_seconds=%.1f (NON-PRIVATE)\n",
	       name, train->d, train->n, o->valid ? "validation" : "test", r->test_accuracy, r->test_loss, r->train_seconds);
	trn_dpsgd_result_free(r);
	mech_rng_free(rng);
	return 0;
}

static int cmd_accuracy(const struct opts *o, trn_dataset *train, trn_dataset *test)
{
	trn_scatter *s = NULL;
	trn_dataset *strain = NULL, *stest = NULL;
	double t0;
	int rc = 1;

	if (trn_scatter_new(28, 28, 2, 8, &s, NULL) != 0)
		goto out;
	t0 = bench_now_s();
	if (trn_scatter_table(s, train, &strain, NULL) != 0 ||
	    trn_scatter_table(s, test, &stest, NULL) != 0)
		goto out;
	printf("scattered %zu + %zu images in %.1f s\n", train->n, test->n, bench_now_s() - t0);
	standardise(strain, stest);
	standardise(train, test);
	for (size_t k = 0; k < o->n_lr; k++) {
		struct opts run = *o;

		run.p.learning_rate = run.p.learning_rate_final = o->lr[k];
		printf("logreg: epochs=%u lot=%u lr=%g momentum=%g\n", run.p.epochs,
		       run.p.lot_size, run.p.learning_rate, run.p.momentum);
		if (logreg(&run, "scatter", strain, stest) != 0 ||
		    logreg(&run, "raw", train, test) != 0)
			goto out;
	}
	rc = 0;
out:
	trn_dataset_free(strain);
	trn_dataset_free(stest);
	trn_scatter_free(s);
	return rc;
}

/* A comma-separated list of learning rates. */
static int parse_rates(const char *v, struct opts *o)
{
	return bench_number_list(v, 1e-6, 100, o->lr, BENCH_SCATTER_MAX_LR, &o->n_lr);
}

/* One option (bench_options); every one takes a value. */
static int parse_option(void *arg, const char *k, const char *v)
{
	struct opts *o = arg;
	double x;

	if (strcmp(k, "--images") == 0 && bench_number(v, '\0', 1, 1e6, &x) == 0)
		o->images = (size_t)x;
	else if (strcmp(k, "--rows") == 0 && bench_number(v, '\0', 1, 60000, &x) == 0)
		o->rows = (size_t)x;
	else if (strcmp(k, "--valid") == 0 && bench_number(v, '\0', 0, 30000, &x) == 0)
		o->valid = (size_t)x;
	else if (strcmp(k, "--epochs") == 0 && bench_number(v, '\0', 1, 1000, &x) == 0)
		o->p.epochs = (uint32_t)x;
	else if (strcmp(k, "--lot") == 0 && bench_number(v, '\0', 1, 60000, &x) == 0)
		o->p.lot_size = (uint32_t)x;
	else if (strcmp(k, "--lr") == 0)
		return parse_rates(v, o);
	else if (strcmp(k, "--momentum") == 0 && bench_number(v, '\0', 0, 0.999, &x) == 0)
		o->p.momentum = x;
	else
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.images = 2000, .rows = 10000, .lr = {0.01}, .n_lr = 1};
	trn_dataset *all = NULL, *train = NULL, *test = NULL;
	int rc = 1;

	trn_dpsgd_params_default(&o.p);
	o.p.model = TRN_MODEL_LOGREG;
	o.p.n_hidden = 0;
	o.p.epochs = 30;
	o.p.lot_size = 256;
	o.p.momentum = 0.9;
	if (argc < 2 || (strcmp(argv[1], "speed") != 0 && strcmp(argv[1], "accuracy") != 0) ||
	    bench_options(argc, argv, 2, NULL, parse_option, &o) != 0) {
		fprintf(stderr, "usage: %s speed|accuracy [options]  (see the source)\n", argv[0]);
		return 2;
	}
	acct_gsl_quiet();
	if (trn_fashion_mnist_load(NULL, true, &all, NULL) != 0 ||
	    trn_fashion_mnist_load(NULL, false, &test, NULL) != 0) {
		fprintf(stderr, "cannot load Fashion-MNIST from %s\n", TRN_FASHION_MNIST_DIR);
		goto out;
	}
	if (o.valid > 0) {
		if (o.rows + o.valid > all->n) {
			fprintf(stderr, "--rows + --valid exceed the %zu training rows\n", all->n);
			goto out;
		}
		/* the last `valid` training rows become the evaluation table */
		trn_dataset_free(test);
		test = bench_rows(all, all->n - o.valid, o.valid);
		if (!test)
			goto out;
	}
	train = bench_rows(all, 0, o.rows);
	if (!train)
		goto out;
	rc = strcmp(argv[1], "speed") == 0 ? cmd_speed(&o, train) : cmd_accuracy(&o, train, test);
out:
	trn_dataset_free(all);
	trn_dataset_free(train);
	trn_dataset_free(test);
	return rc;
}
