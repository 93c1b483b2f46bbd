/*
 * bench_dpsgd.c: DP-SGD on Fashion-MNIST.
 *
 *   bench_dpsgd throughput [options]   DP-SGD examples/s next to non-private
 *                                      SGD on the same model, same run, per
 *                                      wall second and per CPU second of
 *                                      the main thread
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* How a numeric option is stored; its kind fixes its range and whether it
 * must be a whole number. */
enum num_kind { NUM_U32, NUM_U64, NUM_LL, NUM_REAL };

static const struct num_opt {
	const char *name;
	enum num_kind kind;
	size_t off;
} num_opts[] = {
	{ "--hidden", NUM_U32, offsetof(struct opts, p.hidden[0]) },
	{ "--epochs", NUM_U32, offsetof(struct opts, p.epochs) },
	{ "--lot", NUM_U32, offsetof(struct opts, p.lot_size) },
	{ "--sigma", NUM_REAL, offsetof(struct opts, p.noise_multiplier) },
	{ "--clip", NUM_REAL, offsetof(struct opts, p.clip_norm) },
	{ "--lr", NUM_REAL, offsetof(struct opts, p.learning_rate) },
	{ "--lr-final", NUM_REAL, offsetof(struct opts, p.learning_rate_final) },
	{ "--decay-epochs", NUM_U32, offsetof(struct opts, p.learning_rate_decay_epochs) },
	{ "--momentum", NUM_REAL, offsetof(struct opts, p.momentum) },
	{ "--pca", NUM_U32, offsetof(struct opts, p.pca_components) },
	{ "--pca-sigma", NUM_REAL, offsetof(struct opts, p.pca_noise_multiplier) },
	{ "--max-train", NUM_U64, offsetof(struct opts, p.max_train_examples) },
	{ "--epsilon", NUM_REAL, offsetof(struct opts, epsilon) },
	{ "--delta", NUM_REAL, offsetof(struct opts, delta) },
	{ "--steps", NUM_LL, offsetof(struct opts, steps) },
};

/* Sets the numeric option k to v: 0, or -1 when k is not one or v is out
 * of its range. */
static int parse_num(struct opts *o, const char *k, const char *v)
{
	static const double hi[] = { [NUM_U32] = 1e7, [NUM_U64] = 1e12, [NUM_LL] = 1e12,
				     [NUM_REAL] = 1e9 };
	const struct num_opt *n = NULL;
	char *dst = (char *)o;
	double x;

	for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]) && !n; i++)
		if (strcmp(k, num_opts[i].name) == 0)
			n = &num_opts[i];
	if (!n || bench_number(v, '\0', 0, hi[n->kind], &x) < 0 ||
	    (n->kind != NUM_REAL && x != floor(x)))
		return -1;
	dst += n->off;
	if (n->kind == NUM_U32)
		*(uint32_t *)(void *)dst = (uint32_t)x;
	else if (n->kind == NUM_U64)
		*(uint64_t *)(void *)dst = (uint64_t)x;
	else if (n->kind == NUM_LL)
		*(long long *)(void *)dst = (long long)x;
	else
		*(double *)(void *)dst = x;
	return 0;
}

/* The options that take a name, and --hidden2, which also sets the layer
 * count; the rest go to parse_num. */
static int parse_one(struct opts *o, const char *k, const char *v)
{
	double x;

	if (strcmp(k, "--model") == 0) {
		if (trn_model_kind_from_name(v, &o->p.model) < 0)
			return -1;
		if (o->p.model == TRN_MODEL_LOGREG)
			o->p.n_hidden = 0;
	} else if (strcmp(k, "--hidden2") == 0) {
		if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
			return -1;
		o->p.hidden[1] = (uint32_t)x;
		o->p.n_hidden = 2;
	} else if (strcmp(k, "--act") == 0) {
		return trn_activation_from_name(v, &o->p.activation);
	} else if (strcmp(k, "--clipping") == 0) {
		return trn_clipping_from_name(v, &o->p.clipping);
	} else {
		return parse_num(o, k, v);
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
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
		if (!v || parse_one(o, k, v) < 0)
			return -1;
		i++;
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

/* cpu_first, cpu_last: the calling thread's CPU seconds at the end of step
 * 1 and of the latest step (a measure of the step loop that other
 * processes on a shared machine disturb far less than wall time). */
struct prog {
	bool quiet;
	long long stop_after;
	double cpu_first, cpu_last;
};

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int on_progress(const trn_progress *p, void *user)
{
	struct prog *pg = user;

	pg->cpu_last = thread_cpu_seconds();
	if (p->step == 1)
		pg->cpu_first = pg->cpu_last;

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

/* trn_dpsgd_run or trn_sgd_nonprivate_run. */
typedef int (*run_fn)(const trn_dpsgd_params *p, const trn_dataset *train,
		      const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
		      void *progress_user, const atomic_bool *cancel, trn_dpsgd_result **ret,
		      acct_error *err);

/* One leg of the throughput run: o->steps steps of `run`, its examples
 * per second printed after `label` and set in *ret_rate; the same per
 * CPU second of the calling thread over steps 2 to the last (a noise
 * thread's work is not counted: it runs beside the step) in *ret_cpu_rate. */
static int throughput_leg(run_fn run, const char *label, const struct opts *o,
			  const trn_dataset *tr, mech_rng *rng, double *ret_rate,
			  double *ret_cpu_rate, acct_error *err)
{
	struct prog pg = {true, o->steps, 0.0, 0.0};
	trn_dpsgd_result *r = NULL;
	int rc = run(&o->p, tr, NULL, rng, on_progress, &pg, NULL, &r, err);
	double steps;

	if (rc < 0)
		return rc;
	steps = (double)r->steps_done;
	*ret_rate = r->examples_processed / r->train_seconds;
	*ret_cpu_rate = steps > 1 ? r->examples_processed * (steps - 1) / steps /
					    (pg.cpu_last - pg.cpu_first)
				  : NAN;
	printf("%s %lld steps, %llu examples in %.2f s: %.0f examples/s; "
	       "%.0f examples per main-thread CPU s\n",
	       label, (long long)r->steps_done, (unsigned long long)r->examples_processed,
	       r->train_seconds, *ret_rate, *ret_cpu_rate);
	trn_dpsgd_result_free(r);
	return 0;
}

/* Non-private SGD, then DP-SGD, on the same model for o->steps steps each:
 * examples per second of both and their ratio. */
static int run_throughput(const struct opts *o, const trn_dataset *tr, mech_rng *rng,
			  acct_error *err)
{
	double ex_np, ex_dp, cpu_np, cpu_dp;
	int rc;

	rc = throughput_leg(trn_sgd_nonprivate_run, "non-private SGD:", o, tr, rng, &ex_np,
			    &cpu_np, err);
	if (rc < 0)
		return rc;
	rc = throughput_leg(trn_dpsgd_run, "DP-SGD:         ", o, tr, rng, &ex_dp, &cpu_dp, err);
	if (rc < 0)
		return rc;
	printf("ratio DP/non-private: %.3f (target >= 0.5); by main-thread CPU: %.3f\n",
	       ex_dp / ex_np, cpu_dp / cpu_np);
	return 0;
}

/* One full run, DP-SGD or (np) its non-private baseline: test accuracy,
 * loss and times. */
static int run_train(const struct opts *o, bool np, const trn_dataset *tr,
		     const trn_dataset *te, mech_rng *rng, acct_error *err)
{
	struct prog pg = {o->quiet, 0, 0.0, 0.0};
	trn_dpsgd_result *r = NULL;
	int rc;

	rc = (np ? trn_sgd_nonprivate_run : trn_dpsgd_run)(&o->p, tr, te, rng, on_progress, &pg,
							    NULL, &r, err);
	if (rc < 0)
		return rc;
	printf("result%s: test_accuracy=%.4f test_loss=%.4f steps=%lld pca_seconds=%.1f "
	       "train_seconds=%.1f examples/s=%.0f\n",
	       np ? " (NON-PRIVATE baseline)" : "", r->test_accuracy, r->test_loss,
	       (long long)r->steps_done, r->pca_seconds, r->train_seconds,
	       r->examples_processed / r->train_seconds);
	trn_dpsgd_result_free(r);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	trn_dataset *tr = NULL, *te = NULL;
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
		if (run_throughput(&o, tr, rng, &err) < 0)
			goto fail;
	} else if (run_train(&o, strcmp(argv[1], "train-nonprivate") == 0, tr, te, rng, &err) < 0) {
		goto fail;
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "error: %s %s: %s\n", acct_code_name(err.code), err.where, err.text);
out:
	mech_rng_free(rng);
	mech_rng_free(sys);
	trn_dataset_free(tr);
	trn_dataset_free(te);
	return rc;
}
