/*
 * bench_dpsgd.c: DP-SGD on Fashion-MNIST.
 *
 *   bench_dpsgd throughput [options]   DP-SGD examples/s next to non-private
 *                                      SGD on the same model, same run
 *   bench_dpsgd train [options]        one full DP-SGD run: test accuracy,
 *                                      wall time, RDP epsilon of its event
 *   bench_dpsgd epsilon [options]      only the configuration and epsilon
 *   bench_dpsgd train-nonprivate [options]  the same run without clipping
 *                                      or noise (the accuracy ceiling)
 *
 * Options (defaults in brackets): --model mlp|logreg [mlp] --hidden N [1000]
 * --hidden2 N [none] --act relu|tanh [relu] --epochs N [20] --lot N [600]
 * --sigma X [1.1] --clip X [4] --clipping global|per_layer [global]
 * --lr X [0.05] --lr-final X --decay-epochs N [0] --momentum X [0]
 * --pca K [0] --pca-sigma X [7] --max-train N [all] --epsilon X (choose sigma
 * so that the RDP epsilon at --delta [1e-5] is at most X) --steps N
 * (throughput: stop after N steps of each) --quiet
 *
 * The epsilon printed is the RDP accountant's (accountant/, dp_accounting's
 * default orders, improved conversion) for the job's event, DP-PCA release
 * included: the same figure the service reports for the job.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trn.h"

/* ---- epsilon, from the service's own accountant -------------------------- */

/*
 * The RDP epsilon at `delta` of the job these parameters describe (the
 * event trn_dpsgd_event builds, DP-PCA included), priced by accountant/
 * exactly as the service prices it.  NAN when it cannot be priced.
 */
static double job_epsilon(const trn_dpsgd_params *p, uint64_t n_train, double delta,
			  double *ret_order)
{
	acct_event *ev = NULL;
	acct_options opt;
	acct_result r;
	double eps = NAN;

	memset(&opt, 0, sizeof(opt));
	opt.accountant = ACCT_RDP;
	opt.neighbor = ACCT_ADD_REMOVE;
	if (trn_dpsgd_event(p, n_train, &ev, NULL) == 0 && acct_epsilon(ev, delta, &opt, &r, NULL) == 0) {
		eps = r.epsilon;
		if (ret_order)
			*ret_order = r.order;
	}
	acct_event_free(ev);
	return eps;
}

/* ---- options ---------------------------------------------------------------- */

struct opts {
	trn_dpsgd_params p;
	double epsilon, delta;
	long long steps;
	bool quiet;
};

static int parse(int argc, char **argv, struct opts *o)
{
	double x;

	trn_dpsgd_params_default(&o->p);
	o->epsilon = 0;
	o->delta = 1e-5;
	o->steps = 0;
	o->quiet = false;
	for (int i = 2; i < argc; i++) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(k, "--quiet") == 0) {
			o->quiet = true;
			continue;
		}
		if (!v)
			return -1;
		i++;
		if (strcmp(k, "--model") == 0) {
			if (trn_model_kind_from_name(v, &o->p.model) < 0)
				return -1;
			if (o->p.model == TRN_MODEL_LOGREG)
				o->p.n_hidden = 0;
		} else if (strcmp(k, "--hidden") == 0) {
			if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
				return -1;
			o->p.hidden[0] = (uint32_t)x;
		} else if (strcmp(k, "--hidden2") == 0) {
			if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
				return -1;
			o->p.hidden[1] = (uint32_t)x;
			o->p.n_hidden = 2;
		} else if (strcmp(k, "--act") == 0) {
			if (trn_activation_from_name(v, &o->p.activation) < 0)
				return -1;
		} else if (strcmp(k, "--epochs") == 0) {
			if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
				return -1;
			o->p.epochs = (uint32_t)x;
		} else if (strcmp(k, "--lot") == 0) {
			if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
				return -1;
			o->p.lot_size = (uint32_t)x;
		} else if (strcmp(k, "--sigma") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->p.noise_multiplier = x;
		} else if (strcmp(k, "--clip") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->p.clip_norm = x;
		} else if (strcmp(k, "--clipping") == 0) {
			if (trn_clipping_from_name(v, &o->p.clipping) < 0)
				return -1;
		} else if (strcmp(k, "--lr") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->p.learning_rate = x;
		} else if (strcmp(k, "--lr-final") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->p.learning_rate_final = x;
		} else if (strcmp(k, "--decay-epochs") == 0) {
			if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
				return -1;
			o->p.learning_rate_decay_epochs = (uint32_t)x;
		} else if (strcmp(k, "--momentum") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->p.momentum = x;
		} else if (strcmp(k, "--pca") == 0) {
			if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
				return -1;
			o->p.pca_components = (uint32_t)x;
		} else if (strcmp(k, "--pca-sigma") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->p.pca_noise_multiplier = x;
		} else if (strcmp(k, "--max-train") == 0) {
			if (bench_number(v, '\0', 0, 1e12, &x) < 0 || x != floor(x))
				return -1;
			o->p.max_train_examples = (uint64_t)x;
		} else if (strcmp(k, "--epsilon") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->epsilon = x;
		} else if (strcmp(k, "--delta") == 0) {
			if (bench_number(v, '\0', 0, 1e9, &x) < 0)
				return -1;
			o->delta = x;
		} else if (strcmp(k, "--steps") == 0) {
			if (bench_number(v, '\0', 0, 1e12, &x) < 0 || x != floor(x))
				return -1;
			o->steps = (long long)x;
		} else {
			return -1;
		}
	}
	return 0;
}

/* Smallest sigma (to 1e-4) whose RDP epsilon is at most the target. */
static double calibrate_sigma(const struct opts *o, uint64_t n_train)
{
	trn_dpsgd_params p = o->p;
	double lo = 0.3, hi = 50;

	p.noise_multiplier = hi;
	if (!(job_epsilon(&p, n_train, o->delta, NULL) <= o->epsilon))
		return NAN;
	while (hi - lo > 1e-4) {
		p.noise_multiplier = 0.5 * (lo + hi);
		if (job_epsilon(&p, n_train, o->delta, NULL) > o->epsilon)
			lo = p.noise_multiplier;
		else
			hi = p.noise_multiplier;
	}
	return hi;
}

/* ---- progress ------------------------------------------------------------------ */

struct prog {
	bool quiet;
	long long stop_after;
};

static int on_progress(const trn_progress *p, void *user)
{
	const struct prog *pg = user;

	if (p->evaluated && !pg->quiet)
		fprintf(stderr, "  epoch %u/%u step %lld/%lld lr %.4f  test loss %.4f acc %.4f\n",
			p->epoch, p->epochs, (long long)p->step, (long long)p->steps_total,
			p->learning_rate, p->loss, p->accuracy);
	return pg->stop_after > 0 && p->step >= pg->stop_after;
}

static void print_config(const trn_dpsgd_params *p, uint64_t n)
{
	printf("config: model=%s hidden=", p->model == TRN_MODEL_LOGREG ? "logreg" : "mlp");
	for (uint32_t i = 0; i < p->n_hidden; i++)
		printf("%s%u", i ? "," : "", p->hidden[i]);
	printf(" activation=%s epochs=%u lot_size=%u noise_multiplier=%.4f clip_norm=%g "
	       "clipping=%s learning_rate=%g learning_rate_final=%g decay_epochs=%u "
	       "momentum=%g pca_components=%u pca_noise_multiplier=%g N=%llu\n",
	       p->activation == TRN_ACT_TANH ? "tanh" : "relu", p->epochs, p->lot_size,
	       p->noise_multiplier, p->clip_norm,
	       p->clipping == TRN_CLIP_GLOBAL ? "global" : "per_layer", p->learning_rate,
	       isnan(p->learning_rate_final) ? p->learning_rate : p->learning_rate_final,
	       p->learning_rate_decay_epochs, p->momentum, p->pca_components,
	       p->pca_noise_multiplier, (unsigned long long)n);
}

int main(int argc, char **argv)
{
	struct opts o;
	trn_dataset *tr = NULL, *te = NULL;
	trn_dpsgd_result *r = NULL;
	mech_rng *sys = NULL, *rng = NULL;
	acct_error err;
	uint64_t n;
	long long steps;
	double q, eps;
	double order = NAN;
	int rc = 1;

	if (argc < 2 ||
	    (strcmp(argv[1], "throughput") && strcmp(argv[1], "train") &&
	     strcmp(argv[1], "train-nonprivate") && strcmp(argv[1], "epsilon")) ||
	    parse(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: %s throughput|train|epsilon [options]  (see the source)\n",
			argv[0]);
		return 2;
	}
	acct_error_init(&err);
	if (trn_dpsgd_params_validate(&o.p, &err) < 0) {
		fprintf(stderr, "bad option: %s: %s\n", err.where, err.text);
		return 2;
	}
	if (trn_fashion_mnist_load(NULL, true, &tr, &err) < 0 ||
	    trn_fashion_mnist_load(NULL, false, &te, &err) < 0) {
		fprintf(stderr, "loading Fashion-MNIST: %s\n", err.text);
		goto out;
	}
	sys = mech_rng_new_system();
	rng = sys ? mech_rng_new_stream(sys) : NULL;
	if (!rng)
		goto out;
	n = trn_dpsgd_examples_used(&o.p, tr->n);
	q = (double)o.p.lot_size / (double)n;
	steps = trn_dpsgd_steps(&o.p, tr->n);
	if (o.epsilon > 0) {
		o.p.noise_multiplier = calibrate_sigma(&o, tr->n);
		if (isnan(o.p.noise_multiplier)) {
			fprintf(stderr, "no sigma reaches epsilon %g\n", o.epsilon);
			goto out;
		}
	}
	print_config(&o.p, n);
	eps = job_epsilon(&o.p, tr->n, o.delta, &order);
	printf("event: q=%.6g steps=%lld sigma=%.4f%s -> RDP epsilon %.4f at delta %g "
	       "(order %g)\n",
	       q, steps, o.p.noise_multiplier, o.p.pca_components ? " + DP-PCA gaussian" : "",
	       eps, o.delta, order);
	fflush(stdout);

	if (strcmp(argv[1], "epsilon") == 0) {
		rc = 0;
		goto out;
	} else if (strcmp(argv[1], "throughput") == 0) {
		struct prog pg = {true, o.steps};
		double ex_np, ex_dp;

		if (trn_sgd_nonprivate_run(&o.p, tr, NULL, rng, on_progress, &pg, NULL, &r,
					   &err) < 0)
			goto fail;
		ex_np = r->examples_processed / r->train_seconds;
		printf("non-private SGD: %lld steps, %llu examples in %.2f s: %.0f examples/s\n",
		       (long long)r->steps_done, (unsigned long long)r->examples_processed,
		       r->train_seconds, ex_np);
		trn_dpsgd_result_free(r);
		r = NULL;
		if (trn_dpsgd_run(&o.p, tr, NULL, rng, on_progress, &pg, NULL, &r, &err) < 0)
			goto fail;
		ex_dp = r->examples_processed / r->train_seconds;
		printf("DP-SGD:          %lld steps, %llu examples in %.2f s: %.0f examples/s\n",
		       (long long)r->steps_done, (unsigned long long)r->examples_processed,
		       r->train_seconds, ex_dp);
		printf("ratio DP/non-private: %.3f (target >= 0.5)\n", ex_dp / ex_np);
	} else {
		struct prog pg = {o.quiet, 0};

		bool np = strcmp(argv[1], "train-nonprivate") == 0;

		if ((np ? trn_sgd_nonprivate_run : trn_dpsgd_run)(&o.p, tr, te, rng, on_progress,
								   &pg, NULL, &r, &err) < 0)
			goto fail;
		printf("result%s: test_accuracy=%.4f test_loss=%.4f steps=%lld pca_seconds=%.1f "
		       "train_seconds=%.1f examples/s=%.0f\n",
		       np ? " (NON-PRIVATE baseline)" : "", r->test_accuracy, r->test_loss, (long long)r->steps_done, r->pca_seconds,
		       r->train_seconds, r->examples_processed / r->train_seconds);
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "error: %s %s: %s\n", acct_code_name(err.code), err.where, err.text);
out:
	trn_dpsgd_result_free(r);
	mech_rng_free(rng);
	mech_rng_free(sys);
	trn_dataset_free(tr);
	trn_dataset_free(te);
	return rc;
}
