/*
 * bench_label_em.c: the experiment of Bi and Suppakitpaisarn 2022 (label
 * EM, then learning with a symmetric loss) on breast_cancer and on a binary
 * Fashion-MNIST pair: test accuracy, AUC and balanced error against epsilon
 * for each loss, over several runs (mean and standard deviation).
 *
 *   bench_label_em [options]
 *
 * Options (defaults in brackets): --dataset breast_cancer|fmnist|both
 * [both] --data DIR [../shared/data] --fmnist DIR [Debian's] --pair A,B
 * [2,4: pullover vs coat] --runs N [5] --eps LIST [0.1,0.25,0.5,1,2,4]
 * --losses LIST [all seven] --model linear|mlp [linear] --hidden N [64]
 * --epochs N [20] --batch N [64] --lr X [0.01] --momentum X [0.9] --wd X
 * [1e-3] --b X [200] --r X [50] --clip X [10] --clean (add a row trained
 * on the true labels: the ceiling, through the same code at epsilon 60).
 *
 * Splits: breast_cancer's rows with index = 0 mod 5 are the public test
 * split (114 rows), the other 455 are trained on; Fashion-MNIST's training
 * split (12,000 rows of the pair) is trained on and its test split (2,000)
 * is the public test data.  Under label DP the features are public, so
 * breast_cancer's columns are scaled to [0, 1] by their min and max over
 * the whole table; pixels are already in [0, 1].  All randomness comes from
 * the system CSPRNG, so figures vary slightly between runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trn.h"

#define BENCH_MAX_LIST 16

struct opts {
	trn_label_em_params p;
	const char *dataset, *data_dir, *fmnist_dir;
	uint32_t pair[2];
	int runs;
	double eps[BENCH_MAX_LIST];
	size_t n_eps;
	trn_loss_kind losses[BENCH_MAX_LIST];
	size_t n_losses;
	bool clean;
};

static int parse_eps(const char *v, struct opts *o)
{
	o->n_eps = 0;
	for (const char *s = v; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
		if (o->n_eps == BENCH_MAX_LIST || bench_number(s, ',', 1e-6, 100, &o->eps[o->n_eps]) < 0)
			return -1;
		o->n_eps++;
	}
	return o->n_eps ? 0 : -1;
}

static int parse_losses(const char *v, struct opts *o)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", v);
	o->n_losses = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (o->n_losses == BENCH_MAX_LIST ||
		    trn_loss_from_name(t, &o->losses[o->n_losses++]) < 0)
			return -1;
	return o->n_losses ? 0 : -1;
}

/* Options that take a number: name, bounds, where it goes. */
static int parse_number(struct opts *o, const char *k, const char *v)
{
	double x;

	if (bench_number(v, ',', 0, 1e7, &x) < 0)
		return -1;
	if (strcmp(k, "--runs") == 0 && x >= 1)
		o->runs = (int)x;
	else if (strcmp(k, "--hidden") == 0 && x >= 1)
		o->p.hidden[0] = (uint32_t)x;
	else if (strcmp(k, "--epochs") == 0 && x >= 1)
		o->p.epochs = (uint32_t)x;
	else if (strcmp(k, "--batch") == 0 && x >= 1)
		o->p.batch_size = (uint32_t)x;
	else if (strcmp(k, "--lr") == 0)
		o->p.learning_rate = x;
	else if (strcmp(k, "--momentum") == 0)
		o->p.momentum = x;
	else if (strcmp(k, "--wd") == 0)
		o->p.weight_decay = x;
	else if (strcmp(k, "--b") == 0)
		o->p.loss.b = x;
	else if (strcmp(k, "--r") == 0)
		o->p.loss.r = x;
	else if (strcmp(k, "--clip") == 0)
		o->p.gradient_clip = x;
	else
		return -1;
	return 0;
}

/* One option (bench_options); --clean is the one flag. */
static int parse_option(void *arg, const char *k, const char *v)
{
	struct opts *o = arg;
	unsigned a, b;

	if (strcmp(k, "--clean") == 0) {
		o->clean = true;
	} else if (strcmp(k, "--dataset") == 0) {
		o->dataset = v;
	} else if (strcmp(k, "--data") == 0) {
		o->data_dir = v;
	} else if (strcmp(k, "--fmnist") == 0) {
		o->fmnist_dir = v;
	} else if (strcmp(k, "--pair") == 0) {
		if (sscanf(v, "%u,%u", &a, &b) != 2 || a == b || a > 9 || b > 9)
			return -1;
		o->pair[0] = a;
		o->pair[1] = b;
	} else if (strcmp(k, "--eps") == 0) {
		return parse_eps(v, o);
	} else if (strcmp(k, "--losses") == 0) {
		return parse_losses(v, o);
	} else if (strcmp(k, "--model") == 0) {
		if (trn_label_em_model_from_name(v, &o->p.model) < 0)
			return -1;
		o->p.n_hidden = o->p.model == TRN_MODEL_MLP ? 1 : 0;
	} else {
		return parse_number(o, k, v);
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const char *const flags[] = {"--clean", NULL};

	trn_label_em_params_default(&o->p);
	o->dataset = "both";
	o->data_dir = "../shared/data";
	o->fmnist_dir = NULL;
	o->pair[0] = 2;
	o->pair[1] = 4;
	o->runs = 5;
	o->p.epochs = 20;
	o->clean = false;
	parse_eps("0.1,0.25,0.5,1,2,4", o);
	parse_losses("barrier_hinge,hinge,logistic,sigmoid,ramp,squared,unhinged", o);
	return bench_options(argc, argv, 1, flags, parse_option, o);
}

/* ---- data ------------------------------------------------------------------- */

/* breast_cancer scaled to [0, 1] per column, split by row index mod 5. */
static int load_breast_cancer(const char *dir, trn_dataset **ret_train, trn_dataset **ret_test)
{
	char path[4096];
	double *x = NULL;
	int64_t *y = NULL;
	size_t n, d, n_test, k[2] = { 0, 0 };
	int rc = -1;

	snprintf(path, sizeof(path), "%s/breast_cancer.csv", dir);
	if (bench_csv_read(path, &x, &y, &n, &d) < 0)
		return -1;
	for (size_t j = 0; j < d; j++) {
		double lo = INFINITY, hi = -INFINITY;

		for (size_t i = 0; i < n; i++) {
			lo = fmin(lo, x[i * d + j]);
			hi = fmax(hi, x[i * d + j]);
		}
		for (size_t i = 0; i < n; i++)
			x[i * d + j] = hi > lo ? (x[i * d + j] - lo) / (hi - lo) : 0.0;
	}
	n_test = (n + 4) / 5;
	if (trn_dataset_new(n - n_test, d, 2, ret_train, NULL) < 0 ||
	    trn_dataset_new(n_test, d, 2, ret_test, NULL) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		trn_dataset *t = i % 5 == 0 ? *ret_test : *ret_train;
		size_t r = k[i % 5 == 0]++;

		memcpy(t->x + r * d, x + i * d, d * sizeof(double));
		t->y[r] = (uint32_t)y[i];
	}
	rc = 0;
out:
	free(x);
	free(y);
	return rc;
}

/* The rows of classes a (label 0) and b (label 1) of a Fashion-MNIST split. */
static int fmnist_pair(const char *dir, bool train, const uint32_t pair[2], trn_dataset **ret)
{
	trn_dataset *all = NULL;
	size_t n = 0, r = 0, d = TRN_FASHION_MNIST_FEATURES;
	int rc = -1;

	if (trn_fashion_mnist_load(dir, train, &all, NULL) < 0)
		return -1;
	for (size_t i = 0; i < all->n; i++)
		n += all->y[i] == pair[0] || all->y[i] == pair[1];
	if (trn_dataset_new(n, d, 2, ret, NULL) < 0)
		goto out;
	for (size_t i = 0; i < all->n; i++) {
		if (all->y[i] != pair[0] && all->y[i] != pair[1])
			continue;
		memcpy((*ret)->x + r * d, all->x + i * d, d * sizeof(double));
		(*ret)->y[r++] = all->y[i] == pair[1];
	}
	rc = 0;
out:
	trn_dataset_free(all);
	return rc;
}

/* ---- the grid ------------------------------------------------------------------ */

struct stats {
	double sum[3], sq[3];
	int n;
};

static void stats_add(struct stats *s, const trn_label_em_result *r)
{
	const double v[3] = { r->test_accuracy, r->test_auc, r->test_balanced_error };

	for (int i = 0; i < 3; i++) {
		s->sum[i] += v[i];
		s->sq[i] += v[i] * v[i];
	}
	s->n++;
}

static void stats_print(const char *name, const char *loss, double eps,
			const struct stats *s, double seconds)
{
	double keep = mech_label_em_keep_probability(eps, 1.0);

	printf("| %s | %s | %g | %.4f |", name, loss, eps, keep);
	for (int i = 0; i < 3; i++) {
		double m = s->sum[i] / s->n;
		double var = s->n > 1 ? (s->sq[i] - s->n * m * m) / (s->n - 1) : 0.0;

		printf(" %.4f ± %.4f |", m, sqrt(var > 0 ? var : 0));
	}
	printf(" %.1f |\n", seconds / s->n);
	fflush(stdout);
}

/* One cell of the grid: `runs` independent jobs at (loss, eps). */
static int run_cell(const struct opts *o, const char *name, const trn_dataset *train,
		    const trn_dataset *test, trn_loss_kind loss, double eps, bool clean)
{
	trn_label_em_params p = o->p;
	struct stats s = { 0 };
	double seconds = 0.0;

	p.loss.kind = loss;
	p.epsilon = clean ? 60.0 : eps;
	if (loss == TRN_LOSS_UNHINGED && p.weight_decay == 0.0)
		p.weight_decay = 1e-3;
	for (int run = 0; run < o->runs; run++) {
		trn_label_em_result *r = NULL;
		mech_rng *rng = mech_rng_new_system();
		acct_error err = { 0 };
		int rc = rng ? trn_label_em_run(&p, train, test, rng, NULL, NULL, NULL, &r, &err)
			     : -1;

		mech_rng_free(rng);
		if (rc != 0) {
			fprintf(stderr, "run failed: %s %s\n", err.where, err.text);
			trn_label_em_result_free(r);
			return -1;
		}
		stats_add(&s, r);
		seconds += r->train_seconds;
		trn_label_em_result_free(r);
	}
	stats_print(name, trn_loss_name(loss), clean ? INFINITY : eps, &s, seconds);
	return 0;
}

static int run_grid(const struct opts *o, const char *name, const trn_dataset *train,
		    const trn_dataset *test)
{
	printf("\n%s: %zu training rows, %zu test rows, %zu features; model %s, %u epochs, "
	       "batch %u, lr %g, momentum %g, weight decay %g, b %g, r %g, clip %g, %d runs\n\n",
	       name, train->n, test->n, train->d, o->p.model == TRN_MODEL_MLP ? "mlp" : "linear",
	       o->p.epochs, o->p.batch_size, o->p.learning_rate, o->p.momentum,
	       o->p.weight_decay, o->p.loss.b, o->p.loss.r, o->p.gradient_clip, o->runs);
	printf("| data | loss | eps | keep p | accuracy | AUC | balanced error | s/run |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (size_t l = 0; l < o->n_losses; l++) {
		if (o->clean && run_cell(o, name, train, test, o->losses[l], 0, true) < 0)
			return -1;
		for (size_t e = 0; e < o->n_eps; e++)
			if (run_cell(o, name, train, test, o->losses[l], o->eps[e], false) < 0)
				return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	trn_dataset *train = NULL, *test = NULL;
	int rc = 1;

	if (parse(argc, argv, &o) < 0 || trn_label_em_params_validate(&o.p, NULL) < 0) {
		fprintf(stderr, "usage: see the header of bench/trainers/bench_label_em.c\n");
		return 2;
	}
	if (strcmp(o.dataset, "fmnist") != 0) {
		if (load_breast_cancer(o.data_dir, &train, &test) < 0 ||
		    run_grid(&o, "breast_cancer", train, test) < 0)
			goto out;
		trn_dataset_free(train);
		trn_dataset_free(test);
		train = test = NULL;
	}
	if (strcmp(o.dataset, "breast_cancer") != 0) {
		char name[64];

		snprintf(name, sizeof(name), "fmnist %u-vs-%u", o.pair[0], o.pair[1]);
		if (fmnist_pair(o.fmnist_dir, true, o.pair, &train) < 0 ||
		    fmnist_pair(o.fmnist_dir, false, o.pair, &test) < 0 ||
		    run_grid(&o, name, train, test) < 0)
			goto out;
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench_label_em: failed (data missing or a run failed)\n");
	trn_dataset_free(train);
	trn_dataset_free(test);
	return rc;
}
