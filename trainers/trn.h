/*
 * trn.h: data loaders, models and training algorithms of dpgate.
 *
 * No HTTP, no SQL: a trainer states its privacy event before it runs, reads
 * only the data it is handed, and reports progress through a callback.
 */
#ifndef TRN_H
#define TRN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acct.h"
#include "mech.h"

/* ==== Data ==== */

/*
 * A labelled numeric table held in memory: n rows of d features (float64,
 * row-major, x[i*d + j]) and one integer label per row in 0..num_classes-1.
 * The caller owns it; trn_dataset_free frees the struct and both arrays.
 * The server fills one from an uploaded CSV table (trn_dataset_new, then
 * write x and y, then trn_dataset_validate) or from the Fashion-MNIST files.
 *
 * Features are used as given: a trainer never rescales them from the data,
 * because statistics of private data would cost privacy.  Tables should be
 * scaled to about unit range before upload (pixels are mapped to [0,1]).
 */
typedef struct trn_dataset {
	size_t n;
	size_t d;
	uint32_t num_classes;
	double *x;
	uint32_t *y;
} trn_dataset;

/*
 * The label of a row whose label is none of the declared classes.  Such a
 * row is still sampled (the sampling rate is fixed from the row count before
 * any data is read) and its gradient is zero: dropping rows, or failing on
 * them, would depend on the data.  Evaluation skips it.
 */
#define TRN_NO_CLASS UINT32_MAX

/*
 * Allocates a zeroed n x d table with room for n labels.  Bounds: 1 <= n <=
 * DPG_MAX_TRAIN_EXAMPLES, 1 <= d <= DPG_MAX_FEATURES, 2 <= num_classes <=
 * DPG_MAX_CLASSES.  Returns 0 and *ret, or ACCT_EINVAL / ACCT_ENOMEM.
 */
int trn_dataset_new(size_t n, size_t d, uint32_t num_classes, trn_dataset **ret,
		    acct_error *err);

/* Frees a table and its arrays.  Accepts NULL. */
void trn_dataset_free(trn_dataset *ds);

/*
 * Checks a table a caller filled: the bounds above, every feature finite,
 * every label below num_classes or TRN_NO_CLASS.  `where` prefixes the
 * JSON pointer of an error (e.g. "/data"); the offending row is named in
 * the text.
 */
int trn_dataset_validate(const trn_dataset *ds, const char *where, acct_error *err);

/*
 * Builds a table from a parsed CSV: `x` holds n*d features row-major and
 * `labels` n integer labels.  The data are copied and validated as by
 * trn_dataset_validate.  Returns 0 and *ret, or a negative code.
 */
int trn_dataset_from_table(const double *x, const int64_t *labels, size_t n, size_t d,
			   uint32_t num_classes, const char *where, trn_dataset **ret,
			   acct_error *err);

/*
 * Reads an IDX pair (LeCun's format, as used by MNIST and Fashion-MNIST),
 * gzip-compressed or plain (zlib reads both): an image file with magic
 * 0x00000803 (unsigned bytes, 3 dimensions, big-endian sizes n, rows, cols)
 * and a label file with magic 0x00000801 (n).  Pixels are scaled to [0,1]
 * (divided by 255); labels must be below num_classes.  A file whose magic,
 * sizes or length is wrong (truncated, trailing bytes, counts that disagree,
 * more than DPG_MAX_IDX_BYTES or DPG_MAX_FEATURES) is refused with
 * ACCT_EINVAL and `where` = "/data"; nothing is allocated then.  I/O errors
 * give ACCT_EINVAL too, with the path in the text.
 */
int trn_idx_load(const char *images_path, const char *labels_path, uint32_t num_classes,
		 trn_dataset **ret, acct_error *err);

/* Where Debian's dataset-fashion-mnist package installs its files. */
#define TRN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define TRN_FASHION_MNIST_CLASSES 10u
/* Its images are 28 x 28 pixels: the features of every row. */
#define TRN_FASHION_MNIST_FEATURES 784

/*
 * Loads Fashion-MNIST's training split (60000 x 784) when `train` is true,
 * else its test split (10000 x 784), from `dir` (NULL: TRN_FASHION_MNIST_DIR)
 * via trn_idx_load.  The test split is public: it is the one a trainer may
 * evaluate on and report progress from.
 */
int trn_fashion_mnist_load(const char *dir, bool train, trn_dataset **ret, acct_error *err);

/* ==== end data ==== */

/* ==== Models and DP-SGD ==== */

typedef enum trn_model_kind {
	TRN_MODEL_LOGREG = 0,  /* "logreg": softmax regression */
	TRN_MODEL_MLP = 1,     /* "mlp": 1 or 2 hidden dense layers */
} trn_model_kind;

typedef enum trn_activation {
	TRN_ACT_RELU = 1,      /* "relu" */
	TRN_ACT_TANH = 2,      /* "tanh" */
} trn_activation;

typedef enum trn_clipping {
	TRN_CLIP_GLOBAL = 0,    /* "global": the whole gradient to norm C */
	TRN_CLIP_PER_LAYER = 1, /* "per_layer": each of K layers to C/sqrt(K) */
} trn_clipping;

/* Name <-> value for the JSON strings above; _from_name returns 0 or -1. */
int trn_model_kind_from_name(const char *name, trn_model_kind *ret);
int trn_activation_from_name(const char *name, trn_activation *ret);
int trn_clipping_from_name(const char *name, trn_clipping *ret);

/*
 * The parameters of a DP-SGD job (Abadi et al., "Deep Learning with
 * Differential Privacy", CCS 2016, Algorithm 1).  The server fills this from
 * the job's JSON "params"; the JSON name of each field is given beside it.
 * Start from trn_dpsgd_params_default and overwrite what the request names.
 */
#define TRN_MAX_LAYERS (DPG_MAX_HIDDEN_LAYERS + 1)

typedef struct trn_dpsgd_params {
	trn_model_kind model;        /* "model": "logreg" | "mlp" */
	uint32_t n_hidden;           /* number of hidden layers: 0 for logreg, 1-2 for mlp */
	uint32_t hidden[DPG_MAX_HIDDEN_LAYERS];
	                             /* "hidden": 1000 (one layer) or [512, 256] */
	trn_activation activation;   /* "activation": "relu" (default) | "tanh" */
	uint32_t epochs;             /* "epochs" */
	uint32_t lot_size;           /* "lot_size": expected lot size L */
	double noise_multiplier;     /* "noise_multiplier": sigma, noise sd = sigma * C */
	double clip_norm;            /* "clip_norm": C */
	trn_clipping clipping;       /* "clipping": "global" (default) | "per_layer" */
	double learning_rate;        /* "learning_rate": initial rate */
	double learning_rate_final;  /* "learning_rate_final": reached after the decay
	                                (default: = learning_rate, i.e. constant) */
	uint32_t learning_rate_decay_epochs;
	                             /* "learning_rate_decay_epochs": linear decay length
	                                (default 0: constant rate) */
	double momentum;             /* "momentum": heavy-ball momentum in [0,1), default 0 */
	uint32_t pca_components;     /* "pca_components": 0 = no DP-PCA projection */
	double pca_noise_multiplier; /* "pca_noise_multiplier": sigma_p of the DP-PCA
	                                covariance noise (default 7, as in Abadi et al.) */
	uint64_t max_train_examples; /* "max_train_examples": 0 = all rows; otherwise
	                                the first that many rows of the table */
} trn_dpsgd_params;

/* Fills the defaults: mlp, one hidden layer of 1000 relu units, 20 epochs,
 * lot 600, sigma 1.1, C 4, global clipping, lr 0.05 constant, no momentum,
 * no PCA (pca_noise_multiplier 7), all rows. */
void trn_dpsgd_params_default(trn_dpsgd_params *p);

/*
 * Checks every field against its range and DPG_ limits, with `where` set to
 * "/params/<json name>" for the first bad field (e.g. "/params/lot_size").
 * It does not need the data: n_train-dependent checks are in trn_dpsgd_event.
 */
int trn_dpsgd_params_validate(const trn_dpsgd_params *p, acct_error *err);

/*
 * The number of training examples a job uses: min(n_train,
 * max_train_examples) (all rows when max_train_examples is 0).
 */
uint64_t trn_dpsgd_examples_used(const trn_dpsgd_params *p, uint64_t n_train);

/*
 * The number of DP-SGD steps T: ceil(epochs * N / L) with N the examples
 * used, i.e. each epoch is N/L lots of expected size L (Abadi et al. §3.1),
 * rounded up over the whole run (not per epoch).  0 when the arguments are
 * invalid.
 */
int64_t trn_dpsgd_steps(const trn_dpsgd_params *p, uint64_t n_train);

/*
 * Builds the job's privacy event from its parameters and the number of rows
 * of its training table, before any data is read.  With N examples used
 * (trn_dpsgd_examples_used), q = L/N and T = trn_dpsgd_steps:
 *
 *   self_composed(T, poisson_sampled(q, gaussian(noise_multiplier)))
 *
 * and, when pca_components > 0, the DP-PCA release composed before it:
 *
 *   composed([gaussian(pca_noise_multiplier), <the event above>])
 *
 * The DP-PCA release is the Gaussian mechanism on the upper triangle of
 * A^T A for unit-normalised rows, whose L2 sensitivity to adding or removing
 * one row is at most ||a a^T||_F = 1.
 * Returns 0 and a new tree in *ret (caller frees with acct_event_free);
 * ACCT_EINVAL with "/params/..." when the parameters are invalid or
 * L > N (q > 1) or T > DPG_MAX_TRAINING_STEPS; ACCT_ENOMEM.
 */
int trn_dpsgd_event(const trn_dpsgd_params *p, uint64_t n_train, acct_event **ret,
		    acct_error *err);

/*
 * Checks that a job with parameters `p` can train on data of `d` features
 * and `num_classes` classes: 1 <= d <= DPG_MAX_FEATURES, pca_components <= d,
 * and the model's widths and parameter count within the bounds of
 * trn_dpsgd_run.  Needs only the data's shape, which is public (a hosted
 * table's column schema, a builtin dataset's size), so the server refuses
 * a job that could only fail before it reserves budget for it.  Returns 0
 * or ACCT_EINVAL with the field at fault.
 */
int trn_dpsgd_check_shape(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			  acct_error *err);

/*
 * As trn_dpsgd_event but with `steps` in place of T: the event of the first
 * `steps` steps of the job (0 <= steps <= T), for a job that stopped early.
 * With steps == 0 and PCA, the PCA release alone; with steps == 0 and no
 * PCA, *ret is NULL (nothing was released).
 */
int trn_dpsgd_event_for_steps(const trn_dpsgd_params *p, uint64_t n_train, int64_t steps,
			      acct_event **ret, acct_error *err);

/* A trained classifier: an optional linear input projection, then dense
 * layers.  Opaque; freed with trn_model_free. */
typedef struct trn_model trn_model;

void trn_model_free(trn_model *m);

/* The predicted class of one raw feature row (length = the model's input
 * dimension).  Returns 0, or ACCT_EINVAL. */
int trn_model_predict(const trn_model *m, const double *x, size_t d, uint32_t *ret_class,
		      acct_error *err);

/* Accuracy (fraction correct) and mean cross-entropy of a model on a table
 * of raw rows.  Either output may be NULL. */
int trn_model_evaluate(const trn_model *m, const trn_dataset *ds, double *ret_accuracy,
		       double *ret_loss, acct_error *err);

/*
 * Serialises a model into the documented format below, returned as a new
 * malloc'd buffer (caller frees).  Every integer is little-endian, every
 * real an IEEE-754 binary64 stored little-endian.
 *
 *   offset  size  field
 *   0       8     magic "DPGMDL01"
 *   8       4     u32 format version = 1
 *   12      4     u32 activation of hidden layers: 0 none, 1 relu, 2 tanh
 *   16      4     u32 raw input dimension D (features per table row)
 *   20      4     u32 projection dimension P (0 = no projection)
 *   24      4     u32 number of dense layers K (1 = logreg, 2-3 = mlp)
 *   28      4     u32 number of classes
 *   32      4*(K+1) u32 layer widths w_0..w_K (w_0 = P if P > 0 else D,
 *                   w_K = number of classes)
 *   then    D*P f64  projection V, row-major D x P (row r = input feature r)
 *   then    for each layer k = 1..K: W_k, f64 row-major w_k x w_{k-1},
 *           then b_k, f64 w_k
 *
 * Prediction: h_0 = x V (or x when P = 0); h_k = f(W_k h_{k-1} + b_k) for
 * hidden layers (f = relu or tanh); logits = W_K h_{K-1} + b_K; the class
 * is the argmax; probabilities the softmax of the logits.
 */
#define TRN_MODEL_MAGIC "DPGMDL01"
#define TRN_MODEL_FORMAT_VERSION 1u

int trn_model_serialize(const trn_model *m, uint8_t **ret_buf, size_t *ret_len,
			acct_error *err);

/* Parses the format above (bounds-checked; a short, long or inconsistent
 * buffer gives ACCT_EINVAL).  Returns 0 and a new model in *ret. */
int trn_model_deserialize(const uint8_t *buf, size_t len, trn_model **ret, acct_error *err);

/*
 * Progress of a running job, passed to the callback after every step.
 *
 * loss and accuracy are measured on the evaluation table handed to
 * trn_dpsgd_run, which must be public data (Fashion-MNIST's test split, or
 * a split the dataset declares public): statistics of the private lots
 * are not covered by the job's event and are never reported.  They are
 * refreshed at the end of every epoch (`evaluated` is true then) and are NaN
 * before the first evaluation or when there is no evaluation table.
 */
typedef struct trn_progress {
	uint32_t epoch;         /* 1-based epoch the step belongs to */
	uint32_t epochs;
	int64_t step;           /* steps done so far, 1..steps_total */
	int64_t steps_total;
	double learning_rate;   /* the rate used by this step */
	double loss;            /* mean cross-entropy on the evaluation table */
	double accuracy;        /* accuracy on the evaluation table */
	bool evaluated;         /* loss/accuracy were just refreshed */
} trn_progress;

/* Returns 0 to continue; anything else cancels the job like the flag. */
typedef int (*trn_progress_fn)(const trn_progress *progress, void *user);

/* trn_dpsgd_run's return value when the job was cancelled (not an error). */
#define TRN_CANCELLED 1

typedef struct trn_dpsgd_result {
	trn_model *model;         /* owned by the result */
	double test_accuracy;     /* on the evaluation table; NaN without one */
	double test_loss;
	int64_t steps_done;       /* steps whose noisy gradient was applied */
	int64_t steps_total;
	uint64_t examples_used;   /* N */
	uint64_t examples_processed; /* sum of the sampled lot sizes */
	double train_seconds;     /* wall time of the step loop */
	double pca_seconds;       /* wall time of DP-PCA (0 without it) */
} trn_dpsgd_result;

/* Frees a result and its model.  Accepts NULL. */
void trn_dpsgd_result_free(trn_dpsgd_result *r);

/*
 * Runs DP-SGD (Abadi et al. 2016, Algorithm 1) on `train` and returns the
 * trained model.  For each of T steps:
 *  - a lot is Poisson-sampled: each of the N rows used joins independently
 *    with probability q = L/N, from `rng`'s stream;
 *  - per-example gradients of the softmax cross-entropy are clipped to C
 *    (globally or per layer) without materialising them: for a dense layer
 *    the gradient of example i is delta_i a_i^T (plus delta_i for the bias),
 *    whose squared norm is ||delta_i||^2 (||a_i||^2 + 1); the clipped sum
 *    is the batch product (diag(c) Delta)^T A;
 *  - Gaussian noise N(0, sigma^2 C^2) is added to every coordinate, from
 *    `rng`'s stream (mech_rng_normal_fill), and the sum divided by L;
 *  - parameters step by the scheduled learning rate: linear decay from
 *    learning_rate to learning_rate_final over learning_rate_decay_epochs
 *    epochs, then constant.
 * With pca_components > 0, the rows are first projected on the top
 * components of a DP-PCA (Abadi et al. §5): the covariance A^T A of the
 * unit-normalised training rows plus a symmetric matrix of N(0,
 * pca_noise_multiplier^2) entries, then its top eigenvectors.
 *
 * `eval` (may be NULL) must be public data with the same d and classes; it
 * is used for progress and the final test accuracy.  `rng` must be a
 * CSPRNG stream (the server refuses a seeded one); `progress` may be NULL;
 * `cancel` (may be NULL) is polled before every step.  Model initialisation
 * also draws from `rng`.
 *
 * Returns 0 and *ret (caller frees with trn_dpsgd_result_free);
 * TRN_CANCELLED and *ret with the model so far and steps_done when the
 * flag or the callback cancelled the job; or a negative code with `err`
 * (ACCT_EINVAL for bad params/data, ACCT_ENOMEM, ACCT_EINTERNAL when the
 * rng fails), *ret untouched.  Never prints, never aborts.
 */
int trn_dpsgd_run(const trn_dpsgd_params *p, const trn_dataset *train,
		  const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
		  void *progress_user, const atomic_bool *cancel, trn_dpsgd_result **ret,
		  acct_error *err);

/*
 * Non-private SGD with the same model, sampling, schedule and code path
 * but no clipping and no noise, for benchmarks only: its output is NOT
 * differentially private and the server must never run it on protected
 * data.  Same arguments and results as trn_dpsgd_run (noise_multiplier,
 * clip_norm, clipping and PCA noise are ignored; PCA, if asked, is exact).
 */
int trn_sgd_nonprivate_run(const trn_dpsgd_params *p, const trn_dataset *train,
			   const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
			   void *progress_user, const atomic_bool *cancel,
			   trn_dpsgd_result **ret, acct_error *err);

/* ==== end models and DP-SGD ==== */

/* ==== Soft large margin clustering (slmc) ==== */

/*
 * Random Fourier features of the RBF kernel k(x, y) = exp(-gamma ||x-y||^2)
 * (Rahimi and Recht, "Random Features for Large-Scale Kernel Machines",
 * NIPS 2007, Algorithm 1): phi(x) = sqrt(2/D) cos(Omega x + phase), the D
 * rows of Omega iid N(0, 2 gamma I_d) (the kernel's Fourier transform), the
 * phases iid U[0, 2 pi).  E[phi(x).phi(y)] = k(x, y) and ||phi(x)|| <= sqrt(2).
 * The map is drawn before any data is read and does not depend on it: it is
 * public, shared by every learner and released with the model.  The caller
 * may read the fields; trn_rff_free frees the struct and its arrays.
 */
typedef struct trn_rff {
	uint32_t d;          /* input dimension */
	uint32_t features;   /* D */
	double gamma;
	double *omega;       /* D x d, row-major */
	double *phase;       /* D */
} trn_rff;

/*
 * Draws a map from `rng` (1 <= d <= DPG_MAX_FEATURES, 1 <= features <=
 * DPG_MAX_SLMC_FEATURES, D*d <= DPG_MAX_RFF_WEIGHTS, 0 < gamma finite).
 * Returns 0 and *ret, ACCT_EINVAL, ACCT_ENOMEM or ACCT_EINTERNAL (rng).
 */
int trn_rff_new(uint32_t d, uint32_t features, double gamma, mech_rng *rng, trn_rff **ret,
		acct_error *err);

/* Frees a map.  Accepts NULL. */
void trn_rff_free(trn_rff *f);

/* phi of the n rows of x (n x d, row-major) into ret_phi (n x D).  Never
 * fails for valid arguments. */
void trn_rff_map(const trn_rff *f, const double *x, size_t n, double *ret_phi);

/*
 * Clustering metrics (on public, labelled rows only).
 *
 * trn_match_assign solves the n x n assignment problem min sum_i
 * cost[i][assign[i]] (Kuhn-Munkres with potentials, O(n^3)); ret_assign[i]
 * is the column of row i.  n <= DPG_MAX_SLMC_CLUSTERS + DPG_MAX_CLASSES.
 *
 * trn_clustering_accuracy is max over one-to-one maps g from clusters to
 * classes of (1/n) sum_i [g(cluster_i) = label_i], found by the assignment
 * problem on the contingency table.  trn_nmi is the normalised mutual
 * information I(U;V) / ((H(U) + H(V)) / 2) (arithmetic mean, sklearn's
 * default), 1 when both partitions have one block.  Rows labelled
 * TRN_NO_CLASS are skipped.  Both return 0 and *ret, or ACCT_EINVAL
 * (no labelled row, a cluster >= n_clusters, a label >= n_classes) /
 * ACCT_ENOMEM.
 */
int trn_match_assign(const double *cost, size_t n, size_t *ret_assign, acct_error *err);
int trn_clustering_accuracy(const uint32_t *clusters, const uint32_t *labels, size_t n,
			    uint32_t n_clusters, uint32_t n_classes, double *ret, acct_error *err);
int trn_nmi(const uint32_t *clusters, const uint32_t *labels, size_t n, uint32_t n_clusters,
	    uint32_t n_classes, double *ret, acct_error *err);

/*
 * The parameters of an slmc job: soft large margin clustering (Wang and
 * Chen, Information Sciences 2013) over random Fourier features, split over
 * M learners by consensus ADMM (Boyd et al. 2011, Sec. 7.1) with Gaussian
 * noise on every upload.  docs/slmc.md derives every equation and the
 * sensitivity.  Give exactly one of noise_multiplier and epsilon.
 */
typedef struct trn_slmc_params {
	uint32_t clusters;        /* "clusters": C, 2..DPG_MAX_SLMC_CLUSTERS */
	uint32_t features;        /* "features": D, random Fourier features */
	double gamma;             /* "gamma": RBF bandwidth, k = exp(-gamma ||x-y||^2) */
	double lambda;            /* "lambda": weight of the membership loss */
	double rho;               /* "rho": ADMM penalty */
	double fuzzifier;         /* "fuzzifier": m > 1 */
	uint32_t iterations;      /* "iterations": K ADMM rounds, fixed in advance */
	double noise_multiplier;  /* "noise_multiplier": z, upload noise sd = z * Delta;
	                             0 when epsilon is given */
	double epsilon;           /* "epsilon": target epsilon, z calibrated; 0 when
	                             noise_multiplier is given */
	uint32_t parties;         /* "parties": M learners */
	double max_norm;          /* "max_norm": B, each local solution lies in the
	                             Frobenius ball of radius B (bounds Delta) */
	acct_neighbor neighbor;   /* not JSON: the dataset's neighbouring relation,
	                             set by the server; Delta depends on it */
} trn_slmc_params;

/* Defaults: 3 clusters, 200 features, gamma 1, lambda 1, rho 10, fuzzifier 2,
 * 10 iterations, noise_multiplier 0 with epsilon 1, 2 parties, max_norm 5,
 * add_remove. */
void trn_slmc_params_default(trn_slmc_params *p);

/* Checks every field; `where` = "/params/<json name>" of the first bad one. */
int trn_slmc_params_validate(const trn_slmc_params *p, acct_error *err);

/*
 * Delta: the L2 sensitivity of one ADMM round's uploads (all learners'
 * local solutions, before noise) to one row under p->neighbor:
 * 2 sqrt(3) lambda (sqrt(3) B + 1) / rho for add_remove, twice that for
 * replace (docs/slmc.md, Theorem 1).  NaN for invalid parameters.
 */
double trn_slmc_sensitivity(const trn_slmc_params *p);

/*
 * The job's event, self_composed(K, gaussian(z)), from the parameters alone,
 * before any data is read.  With epsilon > 0, z is the smallest noise
 * multiplier acct_calibrate finds at which the event is (epsilon, delta)-DP
 * under opt's accountant (opt->neighbor is replaced by p->neighbor);
 * otherwise z = noise_multiplier.  Returns 0, *ret (caller frees) and
 * *ret_noise_multiplier = z (may be NULL; the value trn_slmc_run needs),
 * or ACCT_EINVAL with "/params/..." / a calibration error.
 */
int trn_slmc_event(const trn_slmc_params *p, double delta, const acct_options *opt,
		   acct_event **ret, double *ret_noise_multiplier, acct_error *err);

/*
 * Checks that a job can run on data of public shape (n rows, d features):
 * 1 <= d <= DPG_MAX_FEATURES, D*d <= DPG_MAX_RFF_WEIGHTS, (D+1)*C*M <=
 * DPG_MAX_MODEL_PARAMS (the learners' duals), n >= 1.  Returns 0 or
 * ACCT_EINVAL.
 */
int trn_slmc_check_shape(const trn_slmc_params *p, uint64_t n, size_t d, acct_error *err);

/*
 * The released clustering: the feature map and the consensus Z = (W; b^T),
 * (D+1) x C row-major (rows 0..D-1 are W, row D is b).  The cluster of x
 * is argmin_k ||f(x) - y_k|| = argmax_k f_k(x), f(x) = W^T phi(x) + b, with
 * one-hot codes y_k.  It is a dense net with a cos hidden layer (Omega,
 * phase, scaled by sqrt(2/D)) and a linear output: where trn_model gains a
 * cos activation it converts one-to-one (trn_slmc_model stands in until
 * then).
 */
typedef struct trn_slmc_model {
	trn_rff *rff;
	uint32_t clusters;
	double *theta;            /* (D+1) x C */
} trn_slmc_model;

void trn_slmc_model_free(trn_slmc_model *m);

/* The cluster of each of the n rows of x (n x d) into ret_clusters; the
 * label-space outputs f(x) into ret_scores (n x C) when not NULL. */
int trn_slmc_predict(const trn_slmc_model *m, const double *x, size_t n, size_t d,
		     uint32_t *ret_clusters, double *ret_scores, acct_error *err);

/*
 * The SLMC objective of a model on a table, at the optimal memberships:
 * 1/2 ||W||^2 + lambda sum_i sum_k u_ki^m ||f(x_i) - y_k||^2.  For
 * benchmarks on public data only: it reads every row, and nothing of it is
 * covered by a job's event.
 */
int trn_slmc_objective(const trn_slmc_model *m, const trn_dataset *ds, double lambda,
		       double fuzzifier, double *ret, acct_error *err);

/* Progress after each round: public facts only (the noisy consensus). */
typedef struct trn_slmc_progress {
	uint32_t iteration;       /* rounds done, 1..K */
	uint32_t iterations;      /* K */
	double consensus_change;  /* ||Z^k - Z^(k-1)||_F of the noisy consensus */
	const trn_slmc_model *consensus; /* Z^k, valid during the call only */
} trn_slmc_progress;

/* Returns 0 to continue; anything else cancels like the flag. */
typedef int (*trn_slmc_progress_fn)(const trn_slmc_progress *progress, void *user);

typedef struct trn_slmc_result {
	trn_slmc_model *model;        /* owned by the result */
	double clustering_accuracy;   /* on the public test table; NaN without one */
	double nmi;                   /* likewise */
	uint32_t iterations_done;
	double noise_multiplier;      /* z used */
	double sensitivity;           /* Delta */
	double sigma;                 /* z * Delta, sd of every upload coordinate */
	double train_seconds;
} trn_slmc_result;

void trn_slmc_result_free(trn_slmc_result *r);

/*
 * Runs DP-SLMC (docs/slmc.md, Algorithm 1) on `train` and returns the
 * consensus model.  `party` (may be NULL) gives each row's learner in
 * 0..parties-1 (from the party column); NULL splits the rows uniformly at
 * random over p->parties learners with `rng`.  noise_multiplier must be the
 * resolved z (trn_slmc_event's output when epsilon is given; epsilon is
 * then ignored).  `aux` (may be NULL, "auxiliary_data") is public rows with
 * the same d: FCM on them gives centres, and each private row's first
 * memberships are the FCM formula against those centres (a function of the
 * row alone); without it the first memberships come from a random public
 * consensus Z^0.  `test` (may
 * be NULL) is public labelled data with the same d: clustering accuracy and
 * NMI are measured on it only.  `rng` must be a CSPRNG stream: it draws the
 * feature map, the split, the initial consensus and every noise vector.
 * Memberships of private rows never leave this function.
 * Returns 0 and *ret; TRN_CANCELLED and *ret with the consensus so far; or
 * a negative code with `err` (*ret untouched).  Never prints, never aborts.
 */
int trn_slmc_run(const trn_slmc_params *p, const trn_dataset *train, const uint32_t *party,
		 const trn_dataset *aux, const trn_dataset *test, mech_rng *rng, trn_slmc_progress_fn progress,
		 void *progress_user, const atomic_bool *cancel, trn_slmc_result **ret,
		 acct_error *err);

/*
 * The same algorithm with no noise (distributed SLMC, DS-SLMC), for
 * benchmarks only: NOT differentially private; the server must never run
 * it.  noise_multiplier and epsilon are ignored.
 */
int trn_slmc_nonprivate_run(const trn_slmc_params *p, const trn_dataset *train,
			    const uint32_t *party, const trn_dataset *aux,
			    const trn_dataset *test, mech_rng *rng,
			    trn_slmc_progress_fn progress, void *progress_user,
			    const atomic_bool *cancel, trn_slmc_result **ret, acct_error *err);

/* ==== end slmc ==== */

#endif
