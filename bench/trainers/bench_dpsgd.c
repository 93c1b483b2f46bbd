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
 *   bench_dpsgd tune [options]         for each epsilon of --eps-list, one
 *                                      run per point of the grid (--grid-lr
 *                                      x --grid-epochs, sigma calibrated to
 *                                      that epsilon), scored on the
 *                                      validation rows (--valid N, the last
 *                                      N training rows, never trained on);
 *                                      the best run's model is scored once
 *                                      on the test split, through predict's
 *                                      path (raw rows)
 *   bench_dpsgd tune-nonprivate [options]  the same grid without clipping
 *                                      or noise: the ceiling, tuned alike
 *   bench_dpsgd conv [options]         train with --model cnn: one DP-SGD
 *                                      run of the job's CNN (trn_dpsgd_run)
 *                                      on the raw images: [--kernel [5]
 *                                      conv, --conv1 [16] channels -> tanh
 *                                      or tempered sigmoid -> 2x2 avg pool]
 *                                      then the same with --conv2 [32; 0:
 *                                      one block], a dense layer of
 *                                      --conv-hidden [32; 0: none] units,
 *                                      10 classes (Papernot et al. 2021's
 *                                      tempered-sigmoid CNN, with pooling
 *                                      in place of its strides)
 *   bench_dpsgd conv-nonprivate [options]  the same without clipping or
 *                                      noise; tune --model cnn tunes it
 *
 * Options (defaults in brackets): --model mlp|logreg [mlp] --hidden N [1000]
 * --hidden2 N [none] --act relu|tanh [relu] --epochs N [20] --lot N [600]
 * --sigma X [1.1] --clip X [4] --clipping global|per_layer [global]
 * --lr X [0.05] --lr-final X --decay-epochs N [0] --momentum X [0]
 * --pca K [0] --pca-sigma X [7] --max-train N [all] --epsilon X (choose sigma
 * so that the RDP epsilon at --delta [1e-5] is at most X) --steps N
 * (throughput: stop after N steps of each) --quiet
 * --features pca|raw|scatter [pca] --groups G [27] (scatter_groups)
 * --valid N [0]: train on all but the last N training rows and evaluate on
 * those (the test split is then left alone) --cache DIR [/tmp]: where the
 * scattering features of the 70000 images are kept between runs, in a file
 * named by a hash of the pixels, labels and groups --eps-list X,... [3]
 * --grid-lr X,... [lr] --grid-epochs N,... [epochs]
 * --model cnn: --conv1, --conv2, --conv-hidden, --kernel as above,
 * --conv-act tanh|tempered_sigmoid [tanh] with --ts-s, --ts-t, --ts-o
 * [2, 2, 1] (the tempered sigmoid's s, T, o), --precision
 * float64|float32|both [float64] (the job's "precision"; both: throughput
 * runs DP-SGD legs of float64 and float32 alternately, BENCH_PRECISION_ROUNDS
 * of each, in place of the non-private leg)
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
#include <unistd.h>

#include "bench_common.h"
#include "trn.h"

/* Longest list a grid option takes. */
#define BENCH_MAX_GRID 8
/* Legs of each precision in a --precision both throughput run. */
#define BENCH_PRECISION_ROUNDS 3

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

	if (trn_dpsgd_event(p, n_train, &ev, NULL) != 0)
		return NAN;
	return bench_rdp_epsilon(ev, delta, ret_order);
}

/* ---- options ---------------------------------------------------------------- */

struct opts {
	trn_dpsgd_params p;
	double epsilon, delta;
	long long steps;
	bool quiet, both_precisions;
	uint64_t valid;
	const char *cache_dir;
	uint32_t conv1, conv2, conv_hidden, kernel;
	double eps_list[BENCH_MAX_GRID], grid_lr[BENCH_MAX_GRID], grid_epochs[BENCH_MAX_GRID];
	size_t n_eps, n_lr, n_epochs;
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
	{ "--groups", NUM_U32, offsetof(struct opts, p.scatter_groups) },
	{ "--valid", NUM_U64, offsetof(struct opts, valid) },
	{ "--conv1", NUM_U32, offsetof(struct opts, conv1) },
	{ "--conv2", NUM_U32, offsetof(struct opts, conv2) },
	{ "--conv-hidden", NUM_U32, offsetof(struct opts, conv_hidden) },
	{ "--kernel", NUM_U32, offsetof(struct opts, kernel) },
	{ "--ts-s", NUM_REAL, offsetof(struct opts, p.sigmoid_scale) },
	{ "--ts-t", NUM_REAL, offsetof(struct opts, p.sigmoid_temperature) },
	{ "--ts-o", NUM_REAL, offsetof(struct opts, p.sigmoid_offset) },
};

/* The options that take a list. */
static const struct list_opt {
	const char *name;
	double lo, hi;
	size_t off, n_off;
} list_opts[] = {
	{ "--eps-list", 1e-3, 1e3, offsetof(struct opts, eps_list), offsetof(struct opts, n_eps) },
	{ "--grid-lr", 1e-6, 1e3, offsetof(struct opts, grid_lr), offsetof(struct opts, n_lr) },
	{ "--grid-epochs", 1, 1e4, offsetof(struct opts, grid_epochs),
	  offsetof(struct opts, n_epochs) },
};

/* Sets the list option k from v: 1 when set, 0 when k is not a list
 * option, -1 on a bad list. */
static int parse_list(struct opts *o, const char *k, const char *v)
{
	char *base = (char *)o;

	for (size_t i = 0; i < sizeof(list_opts) / sizeof(list_opts[0]); i++)
		if (strcmp(k, list_opts[i].name) == 0)
			return bench_number_list(v, list_opts[i].lo, list_opts[i].hi,
						 (double *)(void *)(base + list_opts[i].off),
						 BENCH_MAX_GRID,
						 (size_t *)(void *)(base + list_opts[i].n_off)) == 0
				       ? 1
				       : -1;
	return 0;
}

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
	int rc = parse_list(o, k, v);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (strcmp(k, "--features") == 0) {
		return trn_features_from_name(v, &o->p.features);
	} else if (strcmp(k, "--cache") == 0) {
		o->cache_dir = v;
	} else if (strcmp(k, "--model") == 0) {
		if (trn_dpsgd_model_from_name(v, &o->p.model) < 0)
			return -1;
		if (o->p.model == TRN_MODEL_LOGREG)
			o->p.n_hidden = 0;
	} else if (strcmp(k, "--hidden2") == 0) {
		if (bench_number(v, '\0', 0, 1e7, &x) < 0 || x != floor(x))
			return -1;
		o->p.hidden[1] = (uint32_t)x;
		o->p.n_hidden = 2;
	} else if (strcmp(k, "--precision") == 0) {
		o->both_precisions = strcmp(v, "both") == 0;
		return o->both_precisions ? 0 : trn_precision_from_name(v, &o->p.precision);
	} else if (strcmp(k, "--conv-act") == 0) {
		return trn_conv_act_from_name(v, &o->p.conv_activation);
	} else if (strcmp(k, "--act") == 0) {
		return trn_activation_from_name(v, &o->p.activation);
	} else if (strcmp(k, "--clipping") == 0) {
		return trn_clipping_from_name(v, &o->p.clipping);
	} else {
		return parse_num(o, k, v);
	}
	return 0;
}

/* One option (bench_options): --quiet, the one flag, or one of parse_one's. */
static int parse_option(void *arg, const char *k, const char *v)
{
	struct opts *o = arg;

	if (strcmp(k, "--quiet") != 0)
		return parse_one(o, k, v);
	o->quiet = true;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const char *const flags[] = {"--quiet", NULL};

	trn_dpsgd_params_default(&o->p);
	o->epsilon = 0;
	o->delta = 1e-5;
	o->steps = 0;
	o->quiet = false;
	o->both_precisions = false;
	o->valid = 0;
	o->cache_dir = "/tmp";
	o->conv1 = 16;
	o->conv2 = 32;
	o->conv_hidden = 32;
	o->kernel = 5;
	o->n_eps = o->n_lr = o->n_epochs = 0;
	if (bench_options(argc, argv, 2, flags, parse_option, o) < 0)
		return -1;
	/* A cnn: its blocks and dense layer from the conv options. */
	if (o->p.model == TRN_MODEL_CNN) {
		o->p.n_conv = o->conv2 ? 2 : 1;
		o->p.conv_channels[0] = o->conv1;
		o->p.conv_channels[1] = o->conv2;
		o->p.kernel[0] = o->p.kernel[1] = o->kernel;
		o->p.n_hidden = o->conv_hidden ? 1 : 0;
		o->p.hidden[0] = o->conv_hidden;
		o->p.features = TRN_FEATURES_RAW;
	}
	return 0;
}

/* Smallest sigma (to 1e-4) whose RDP epsilon at delta is at most epsilon
 * for the job p describes. */
static double calibrate_sigma(const trn_dpsgd_params *job, uint64_t n_train, double epsilon,
			      double delta)
{
	trn_dpsgd_params p = *job;
	double lo = 0.3, hi = 50;

	p.noise_multiplier = hi;
	if (!(job_epsilon(&p, n_train, delta, NULL) <= epsilon))
		return NAN;
	while (hi - lo > 1e-4) {
		p.noise_multiplier = 0.5 * (lo + hi);
		if (job_epsilon(&p, n_train, delta, NULL) > epsilon)
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
		fprintf(stderr, "  epoch %u/%u step %lld/%lld lr %.4f  eval loss %.4f acc %.4f\n",
			p->epoch, p->epochs, (long long)p->step, (long long)p->steps_total,
			p->learning_rate, p->loss, p->accuracy);
	return pg->stop_after > 0 && p->step >= pg->stop_after;
}

static void print_config(const trn_dpsgd_params *p, uint64_t n)
{
	static const char *const features[] = {"pca", "raw", "scatter"};

	static const char *const models[] = {"logreg", "mlp", "cnn"};

	printf("config: features=%s model=%s hidden=", features[p->features], models[p->model]);
	for (uint32_t i = 0; i < p->n_hidden; i++)
		printf("%s%u", i ? "," : "", p->hidden[i]);
	printf(" activation=%s epochs=%u lot_size=%u noise_multiplier=%.4f clip_norm=%g "
	       "clipping=%s learning_rate=%g learning_rate_final=%g decay_epochs=%u "
	       "momentum=%g pca_components=%u pca_noise_multiplier=%g scatter_groups=%u N=%llu\n",
	       p->activation == TRN_ACT_TANH ? "tanh" : "relu", p->epochs, p->lot_size,
	       p->noise_multiplier, p->clip_norm,
	       p->clipping == TRN_CLIP_GLOBAL ? "global" : "per_layer", p->learning_rate,
	       isnan(p->learning_rate_final) ? p->learning_rate : p->learning_rate_final,
	       p->learning_rate_decay_epochs, p->momentum, p->pca_components,
	       p->pca_noise_multiplier, p->scatter_groups, (unsigned long long)n);
	if (p->model == TRN_MODEL_CNN)
		printf("config: cnn blocks=%u channels=%u,%u kernel=%u,%u activation=%s s=%g T=%g "
		       "o=%g precision=%s (the activation above is the mlp's, unused)\n",
		       p->n_conv, p->conv_channels[0], p->n_conv > 1 ? p->conv_channels[1] : 0,
		       p->kernel[0], p->n_conv > 1 ? p->kernel[1] : 0,
		       trn_conv_act_name(p->conv_activation), p->sigmoid_scale,
		       p->sigmoid_temperature, p->sigmoid_offset, trn_precision_name(p->precision));
}

/* ---- the tables a run reads ------------------------------------------- */

/*
 * train: the rows trained on (all training rows but the last --valid);
 * eval: the validation rows, or the test split without --valid; test: the
 * raw test split.  Under scatter features train and eval hold the
 * features (prepared) and raw_d the pixels per image.
 */
struct tables {
	trn_dataset *train, *eval, *test;
	size_t raw_d;
	bool prepared;
};

static void tables_free(struct tables *t)
{
	trn_dataset_free(t->train);
	trn_dataset_free(t->eval);
	trn_dataset_free(t->test);
}

/* FNV-1a, 64 bits, continued from h over n bytes. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* The cache key: the format, the transform's parameters and both tables'
 * sizes, pixels and labels. */
static uint64_t cache_key(const trn_dataset *const tabs[2], uint32_t groups)
{
	static const char magic[] = "dpgate scatter cache 1";
	uint32_t params[3] = {TRN_DPSGD_SCATTER_J, TRN_DPSGD_SCATTER_L, groups};
	uint64_t h = fnv1a(0xcbf29ce484222325ULL, magic, sizeof(magic));

	h = fnv1a(h, params, sizeof(params));
	for (int k = 0; k < 2; k++) {
		h = fnv1a(h, &tabs[k]->n, sizeof(tabs[k]->n));
		h = fnv1a(h, &tabs[k]->d, sizeof(tabs[k]->d));
		h = fnv1a(h, tabs[k]->x, tabs[k]->n * tabs[k]->d * sizeof(double));
		h = fnv1a(h, tabs[k]->y, tabs[k]->n * sizeof(uint32_t));
	}
	return h;
}

/* Reads two feature tables from a cache file written by cache_write with
 * the same key; -1 when it is absent or does not match. */
static int cache_read(const char *path, uint64_t key, const trn_dataset *const raw[2],
		      trn_dataset *out[2])
{
	FILE *f = fopen(path, "rb");
	uint64_t k = 0, hdr[2];
	int rc = -1;

	if (!f)
		return -1;
	if (fread(&k, sizeof(k), 1, f) != 1 || k != key)
		goto out;
	for (int t = 0; t < 2; t++) {
		if (fread(hdr, sizeof(hdr), 1, f) != 1 || hdr[0] != raw[t]->n ||
		    hdr[1] > DPG_MAX_FEATURES ||
		    trn_dataset_new(hdr[0], hdr[1], raw[t]->num_classes, &out[t], NULL) != 0 ||
		    fread(out[t]->x, sizeof(double), hdr[0] * hdr[1], f) != hdr[0] * hdr[1])
			goto out;
		memcpy(out[t]->y, raw[t]->y, raw[t]->n * sizeof(uint32_t));
	}
	rc = fgetc(f) == EOF ? 0 : -1;
out:
	fclose(f);
	if (rc < 0)
		for (int t = 0; t < 2; t++) {
			trn_dataset_free(out[t]);
			out[t] = NULL;
		}
	return rc;
}

/* Writes the tables to path through a temporary file renamed over it. */
static void cache_write(const char *path, uint64_t key, trn_dataset *const tabs[2])
{
	char tmp[4200];
	FILE *f;
	bool ok;

	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	f = fopen(tmp, "wb");
	if (!f)
		return;
	ok = fwrite(&key, sizeof(key), 1, f) == 1;
	for (int t = 0; ok && t < 2; t++) {
		uint64_t hdr[2] = {tabs[t]->n, tabs[t]->d};

		ok = fwrite(hdr, sizeof(hdr), 1, f) == 1 &&
		     fwrite(tabs[t]->x, sizeof(double), tabs[t]->n * tabs[t]->d, f) ==
			     tabs[t]->n * tabs[t]->d;
	}
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0)
		remove(tmp);
}

/* The scattering features of the training and test splits (out[0],
 * out[1]), from the cache when it holds them, else computed and kept. */
static int scatter_features(const struct opts *o, const trn_dataset *tr, const trn_dataset *te,
			    trn_dataset *out[2], acct_error *err)
{
	const trn_dataset *const raw[2] = {tr, te};
	uint64_t key = cache_key(raw, o->p.scatter_groups);
	char path[4096];
	double t0 = bench_now_s();

	snprintf(path, sizeof(path), "%s/dpgate-scatter-%016llx.bin", o->cache_dir,
		 (unsigned long long)key);
	if (cache_read(path, key, raw, out) == 0) {
		printf("features: read from %s in %.1f s\n", path, bench_now_s() - t0);
		return 0;
	}
	for (int t = 0; t < 2; t++)
		if (trn_dpsgd_features_table(&o->p, raw[t], &out[t], err) < 0)
			return -1;
	printf("features: %zu + %zu images mapped in %.1f s, kept in %s\n", tr->n, te->n,
	       bench_now_s() - t0, path);
	cache_write(path, key, out);
	return 0;
}

/* Builds the run's tables from the two raw splits (which it consumes). */
static int tables_make(const struct opts *o, trn_dataset *tr, trn_dataset *te, struct tables *t,
		       acct_error *err)
{
	trn_dataset *feat[2] = {NULL, NULL}, *all = tr, *test_side = te;
	int rc = 0;

	t->raw_d = tr->d;
	t->test = te;
	t->prepared = o->p.features == TRN_FEATURES_SCATTER;
	if (t->prepared) {
		rc = scatter_features(o, tr, te, feat, err);
		all = feat[0];
		test_side = feat[1];
	}
	if (rc == 0 && o->valid >= all->n)
		rc = acct_error_set(err, ACCT_EINVAL, "/valid", "--valid leaves no training row");
	if (rc == 0) {
		t->train = bench_rows(all, 0, all->n - o->valid);
		t->eval = o->valid ? bench_rows(all, all->n - o->valid, o->valid)
				   : bench_rows(test_side, 0, test_side->n);
		if (!t->train || !t->eval)
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	trn_dataset_free(feat[0]);
	trn_dataset_free(feat[1]);
	trn_dataset_free(tr);
	return rc < 0 ? -1 : 0;
}

/* One run on the tables: private or not, prepared features or raw rows. */
static int run_on(const trn_dpsgd_params *p, bool np, const struct tables *t,
		  const trn_dataset *eval, mech_rng *rng, struct prog *pg, trn_dpsgd_result **ret,
		  acct_error *err)
{
	if (t->prepared)
		return (np ? trn_sgd_nonprivate_run_prepared : trn_dpsgd_run_prepared)(
			p, t->raw_d, t->train, eval, rng, on_progress, pg, NULL, ret, err);
	return (np ? trn_sgd_nonprivate_run : trn_dpsgd_run)(p, t->train, eval, rng, on_progress,
							     pg, NULL, ret, err);
}

/* One leg of the throughput run: o->steps steps, its examples per second
 * printed after `label` and set in *ret_rate; the same per CPU second of
 * the calling thread over steps 2 to the last (a noise thread's work is
 * not counted: it runs beside the step) in *ret_cpu_rate. */
static int throughput_leg(bool np, const char *label, const struct opts *o,
			  const struct tables *t, mech_rng *rng, double *ret_rate,
			  double *ret_cpu_rate, acct_error *err)
{
	struct prog pg = {true, o->steps, 0.0, 0.0};
	trn_dpsgd_result *r = NULL;
	int rc = run_on(&o->p, np, t, NULL, rng, &pg, &r, err);
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

/* DP-SGD legs of o->steps steps in float64 and float32 alternately (the
 * machine's load then weighs on both alike), BENCH_PRECISION_ROUNDS of
 * each: every leg's examples per second, each precision's mean and the
 * ratio of the means. */
static int run_precisions(const struct opts *o, const struct tables *t, mech_rng *rng,
			  acct_error *err)
{
	double rate[2] = {0.0, 0.0}, ex, cpu;
	struct opts leg = *o;

	for (int r = 0; r < BENCH_PRECISION_ROUNDS; r++)
		for (int k = 0; k < 2; k++) {
			leg.p.precision = k ? TRN_PRECISION_FLOAT32 : TRN_PRECISION_FLOAT64;
			if (throughput_leg(false, k ? "DP-SGD float32:" : "DP-SGD float64:", &leg, t,
					   rng, &ex, &cpu, err) < 0)
				return -1;
			rate[k] += ex / BENCH_PRECISION_ROUNDS;
		}
	printf("mean examples/s: float64 %.0f, float32 %.0f; ratio float32/float64: %.3f\n",
	       rate[0], rate[1], rate[1] / rate[0]);
	return 0;
}

/* Non-private SGD, then DP-SGD, on the same model for o->steps steps each:
 * examples per second of both and their ratio (--precision both:
 * run_precisions instead). */
static int run_throughput(const struct opts *o, const struct tables *t, mech_rng *rng,
			  acct_error *err)
{
	double ex_np, ex_dp, cpu_np, cpu_dp;
	int rc;

	if (o->both_precisions)
		return run_precisions(o, t, rng, err);
	rc = throughput_leg(true, "non-private SGD:", o, t, rng, &ex_np, &cpu_np, err);
	if (rc < 0)
		return rc;
	rc = throughput_leg(false, "DP-SGD:         ", o, t, rng, &ex_dp, &cpu_dp, err);
	if (rc < 0)
		return rc;
	printf("ratio DP/non-private: %.3f (target >= 0.9); by main-thread CPU: %.3f\n",
	       ex_dp / ex_np, cpu_dp / cpu_np);
	return 0;
}

/* One full run, DP-SGD or (np) its non-private baseline: accuracy and loss
 * on the evaluation table (validation rows with --valid), and times. */
static int run_train(const struct opts *o, bool np, const struct tables *t, mech_rng *rng,
		     acct_error *err)
{
	struct prog pg = {o->quiet, 0, 0.0, 0.0};
	trn_dpsgd_result *r = NULL;
	int rc = run_on(&o->p, np, t, t->eval, rng, &pg, &r, err);

	if (rc < 0)
		return rc;
	printf("result%s: %s_accuracy=%.4f %s_loss=%.4f steps=%lld pca_seconds=%.1f "
	       "train_seconds=%.1f examples/s=%.0f\n",
	       np ? " (NON-PRIVATE baseline)" : "", o->valid ? "validation" : "test",
	       r->test_accuracy, o->valid ? "validation" : "test", r->test_loss,
	       (long long)r->steps_done, r->pca_seconds, r->train_seconds,
	       r->examples_processed / r->train_seconds);
	trn_dpsgd_result_free(r);
	return 0;
}

/* The grid's runs at one epsilon (np: no noise, epsilon ignored): the run
 * with the best validation accuracy in *ret_best, its params in *ret_p. */
static int tune_grid(const struct opts *o, bool np, double epsilon, const struct tables *t,
		     mech_rng *rng, trn_dpsgd_result **ret_best, trn_dpsgd_params *ret_p,
		     acct_error *err)
{
	struct prog pg = {true, 0, 0.0, 0.0};

	for (size_t a = 0; a < o->n_lr; a++)
		for (size_t b = 0; b < o->n_epochs; b++) {
			trn_dpsgd_params p = o->p;
			trn_dpsgd_result *r = NULL;

			p.learning_rate = p.learning_rate_final = o->grid_lr[a];
			p.epochs = (uint32_t)o->grid_epochs[b];
			if (!np)
				p.noise_multiplier = calibrate_sigma(&p, t->train->n, epsilon,
								     o->delta);
			if (isnan(p.noise_multiplier) ||
			    run_on(&p, np, t, t->eval, rng, &pg, &r, err) < 0)
				return -1;
			printf("  grid: lr=%g epochs=%u sigma=%.4f validation_accuracy=%.4f "
			       "train_seconds=%.1f\n",
			       p.learning_rate, p.epochs, np ? 0.0 : p.noise_multiplier,
			       r->test_accuracy, r->train_seconds);
			fflush(stdout);
			if (!*ret_best || r->test_accuracy > (*ret_best)->test_accuracy) {
				trn_dpsgd_result_free(*ret_best);
				*ret_best = r;
				*ret_p = p;
			} else {
				trn_dpsgd_result_free(r);
			}
		}
	return 0;
}

/* tune / tune-nonprivate: per epsilon, the grid on the validation rows,
 * then the selected model once on the raw test split. */
static int run_tune(const struct opts *o, bool np, const struct tables *t, mech_rng *rng,
		    acct_error *err)
{
	size_t n_eps = np ? 1 : o->n_eps;

	if (!o->valid)
		return acct_error_set(err, ACCT_EINVAL, "/valid", "tuning needs --valid N");
	for (size_t e = 0; e < n_eps; e++) {
		trn_dpsgd_result *best = NULL;
		trn_dpsgd_params p;
		double test_acc = NAN, eps = NAN, t0 = bench_now_s();

		if (!np)
			printf("epsilon %g:\n", o->eps_list[e]);
		if (tune_grid(o, np, np ? 0.0 : o->eps_list[e], t, rng, &best, &p, err) < 0 ||
		    trn_model_evaluate(best->model, t->test, &test_acc, NULL, err) < 0) {
			trn_dpsgd_result_free(best);
			return -1;
		}
		if (!np)
			eps = job_epsilon(&p, t->train->n, o->delta, NULL);
		printf("selected%s: lr=%g epochs=%u sigma=%.4f RDP epsilon %.4f at delta %g, "
		       "validation_accuracy=%.4f -> test_accuracy=%.4f (test split read once; "
		       "grid %.0f s)\n",
		       np ? " (NON-PRIVATE, no epsilon)" : "", p.learning_rate, p.epochs,
		       np ? 0.0 : p.noise_multiplier, np ? 0.0 : eps, o->delta, best->test_accuracy,
		       test_acc, bench_now_s() - t0);
		fflush(stdout);
		trn_dpsgd_result_free(best);
	}
	return 0;
}

/* The subcommands, and whether each is a run without noise. */
static const struct {
	const char *name;
	bool np;
} commands[] = {
	{"throughput", false}, {"train", false}, {"train-nonprivate", true},
	{"epsilon", false}, {"tune", false}, {"tune-nonprivate", true},
	{"conv", false}, {"conv-nonprivate", true},
};

static int command_index(int argc, char **argv)
{
	for (size_t i = 0; argc >= 2 && i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return (int)i;
	return -1;
}

/* Loads both splits and builds the run's tables. */
static int load_tables(const struct opts *o, struct tables *t, acct_error *err)
{
	trn_dataset *tr = NULL, *te = NULL;

	if (trn_fashion_mnist_load(NULL, true, &tr, err) < 0 ||
	    trn_fashion_mnist_load(NULL, false, &te, err) < 0) {
		trn_dataset_free(tr);
		trn_dataset_free(te);
		return -1;
	}
	return tables_make(o, tr, te, t, err);
}

/* The command's index and its options in *o; conv and conv-nonprivate are
 * train and train-nonprivate with --model cnn.  -1 on a bad command line. */
static int parse_command(int argc, char **argv, struct opts *o)
{
	static char model_opt[] = "--model", cnn[] = "cnn";
	int cmd = command_index(argc, argv), rc;
	char **args;

	if (cmd < 6)
		return cmd < 0 || parse(argc, argv, o) < 0 ? -1 : cmd;
	args = calloc((size_t)argc + 2, sizeof(char *));
	if (!args)
		return -1;
	memcpy(args, argv, (size_t)argc * sizeof(char *));
	args[argc] = model_opt;
	args[argc + 1] = cnn;
	rc = parse(argc + 2, args, o);
	free(args);
	return rc < 0 ? -1 : cmd - 5;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct tables t = {0};
	mech_rng *sys = NULL, *rng = NULL;
	acct_error err;
	uint64_t n;
	double eps, order = NAN;
	int cmd = parse_command(argc, argv, &o), rc = 1;

	if (cmd < 0) {
		fprintf(stderr, "usage: %s throughput|train|train-nonprivate|epsilon|tune|"
			"tune-nonprivate|conv|conv-nonprivate [options]  (see the source)\n", argv[0]);
		return 2;
	}
	if (o.n_lr == 0)
		o.grid_lr[o.n_lr++] = o.p.learning_rate;
	if (o.n_epochs == 0)
		o.grid_epochs[o.n_epochs++] = o.p.epochs;
	if (o.n_eps == 0)
		o.eps_list[o.n_eps++] = o.epsilon > 0 ? o.epsilon : 3.0;
	acct_error_init(&err);
	acct_gsl_quiet();
	if (trn_dpsgd_params_validate(&o.p, &err) < 0) {
		fprintf(stderr, "bad option: %s: %s\n", err.where, err.text);
		return 2;
	}
	if (load_tables(&o, &t, &err) < 0)
		goto fail;
	sys = mech_rng_new_system();
	rng = sys ? mech_rng_new_stream(sys) : NULL;
	if (!rng)
		goto out;
	n = trn_dpsgd_examples_used(&o.p, t.train->n);
	if (o.epsilon > 0) {
		o.p.noise_multiplier = calibrate_sigma(&o.p, t.train->n, o.epsilon, o.delta);
		if (isnan(o.p.noise_multiplier)) {
			fprintf(stderr, "no sigma reaches epsilon %g\n", o.epsilon);
			goto out;
		}
	}
	print_config(&o.p, n);
	eps = job_epsilon(&o.p, t.train->n, o.delta, &order);
	printf("event: q=%.6g steps=%lld sigma=%.4f%s -> RDP epsilon %.4f at delta %g "
	       "(order %g)\n",
	       (double)o.p.lot_size / (double)t.train->n,
	       (long long)trn_dpsgd_steps(&o.p, t.train->n), o.p.noise_multiplier,
	       o.p.pca_components ? " + DP-PCA gaussian" : "", eps, o.delta, order);
	fflush(stdout);
	if ((cmd == 0 && run_throughput(&o, &t, rng, &err) < 0) ||
	    ((cmd == 1 || cmd == 2) && run_train(&o, commands[cmd].np, &t, rng, &err) < 0) ||
	    ((cmd == 4 || cmd == 5) && run_tune(&o, commands[cmd].np, &t, rng, &err) < 0))
		goto fail;
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "error: %s %s: %s\n", acct_code_name(err.code), err.where, err.text);
out:
	mech_rng_free(rng);
	mech_rng_free(sys);
	tables_free(&t);
	return rc;
}
