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
	TRN_MODEL_CNN = 2,     /* "cnn": conv blocks then dense layers (trn_conv.c);
	                          a dpsgd job's only, see trn_dpsgd_model_from_name */
} trn_model_kind;

/*
 * Activation codes of a model's layers, as stored in the model format.  A
 * DP-SGD job's hidden layers use relu or tanh; identity (code 0, v1's
 * "none"), cos and sigmoid exist for models other trainers build with
 * trn_model_from_layers.  The last (logit) layer is always identity.
 */
typedef enum trn_activation {
	TRN_ACT_IDENTITY = 0,  /* "identity" (v1 called it "none") */
	TRN_ACT_RELU = 1,      /* "relu" */
	TRN_ACT_TANH = 2,      /* "tanh" */
	TRN_ACT_COS = 3,       /* "cos" */
	TRN_ACT_SIGMOID = 4,   /* "sigmoid": 1 / (1 + e^-z) */
} trn_activation;

#define TRN_ACT_MAX TRN_ACT_SIGMOID

/* The activation of a convolutional model's blocks and hidden layer, as
 * its model file stores it. */
typedef enum trn_conv_act {
	TRN_CONV_TANH = 0,             /* "tanh" */
	TRN_CONV_TEMPERED_SIGMOID = 1, /* "tempered_sigmoid": s / (1 + e^(-T z)) - o */
} trn_conv_act;

/* The arithmetic of a cnn's per-example forward and backward passes; the
 * clipped sum, the noise and the weights stay float64 in both. */
typedef enum trn_precision {
	TRN_PRECISION_FLOAT64 = 0,     /* "float64" */
	TRN_PRECISION_FLOAT32 = 1,     /* "float32" */
} trn_precision;

/*
 * How a model maps a raw feature row x to its input, before any projection.
 * The rule and its public scale B are stored in the model, so predict
 * applies the same rule as training did.
 *  - none: x as given;
 *  - unit_ball: z = x / B, then z / ||z|| when ||z|| > 1, so ||z|| <= 1
 *    (the bound the output-perturbation theorems assume).
 */
typedef enum trn_input_rule {
	TRN_INPUT_NONE = 0,      /* "none" */
	TRN_INPUT_UNIT_BALL = 1, /* "unit_ball" */
} trn_input_rule;

/*
 * What a DP-SGD job trains on (its "features" param).  Every choice is a
 * fixed function of one row, or a private release priced in the event:
 *  - pca: the raw row, projected on pca_components DP-PCA directions when
 *    pca_components > 0 (their Gaussian release is in the event); with 0
 *    components the raw row.  The default.
 *  - raw: the raw row; pca_components must be 0.
 *  - scatter: the 2D scattering transform (J = 2, L = 8) of the row read as
 *    a square image, then each of its scatter_groups groups of channels
 *    standardised by its own mean and deviation within that row (group
 *    normalisation, Wu and He 2018, without affine parameters, as Tramer
 *    and Boneh 2021 use it).  Per row, so it costs no privacy;
 *    pca_components must be 0.
 */
typedef enum trn_features {
	TRN_FEATURES_PCA = 0,     /* "pca" */
	TRN_FEATURES_RAW = 1,     /* "raw" */
	TRN_FEATURES_SCATTER = 2, /* "scatter" */
} trn_features;

/* The scattering a "scatter" job applies, and its default groups. */
#define TRN_DPSGD_SCATTER_J 2u
#define TRN_DPSGD_SCATTER_L 8u
#define TRN_DPSGD_SCATTER_GROUPS 27u
/* Its channels, 1 + JL + L^2 J(J-1)/2 (trn_scatter_new). */
#define TRN_DPSGD_SCATTER_CHANNELS 81u

/* Feature transforms a model file records (see trn_model_serialize). */
typedef enum trn_feature_rule {
	TRN_FEATURE_RULE_NONE = 0,
	TRN_FEATURE_RULE_SCATTER_GROUPNORM = 1,
} trn_feature_rule;

typedef enum trn_clipping {
	TRN_CLIP_GLOBAL = 0,    /* "global": the whole gradient to norm C */
	TRN_CLIP_PER_LAYER = 1, /* "per_layer": each of K layers to C/sqrt(K) */
} trn_clipping;

/* Name <-> value for the JSON strings above; _from_name returns 0 or -1.
 * trn_activation_from_name accepts only the DP-SGD hidden activations
 * (relu, tanh); trn_activation_name names every code (NULL if unknown). */
int trn_model_kind_from_name(const char *name, trn_model_kind *ret);
int trn_activation_from_name(const char *name, trn_activation *ret);
const char *trn_activation_name(uint32_t code);
const char *trn_input_rule_name(uint32_t rule);
int trn_clipping_from_name(const char *name, trn_clipping *ret);
int trn_features_from_name(const char *name, trn_features *ret);

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
	trn_features features;       /* "features": "pca" (default) | "raw" | "scatter" */
	uint32_t scatter_groups;     /* "scatter_groups": groups of the per-row group
	                                normalisation of the 81 scattering channels,
	                                a divisor of 81 (default 27) */
	/* Model "cnn" only (trn.h's convolutional models; "hidden" is then
	 * its one dense hidden layer, "activation" tanh or tempered_sigmoid): */
	uint32_t image_channels;     /* "image_channels": channels of the input images,
	                                channel-major; their side is sqrt(d / channels) */
	uint32_t n_conv;             /* the length of "conv_channels" */
	uint32_t conv_channels[DPG_MAX_CONV_LAYERS]; /* "conv_channels": [16, 32] */
	uint32_t kernel[DPG_MAX_CONV_LAYERS]; /* "kernel": odd sides, one per block (5) */
	trn_conv_act conv_activation; /* "activation": "tanh" (default) | "tempered_sigmoid" */
	double sigmoid_scale;        /* "sigmoid_scale": s (2) */
	double sigmoid_temperature;  /* "sigmoid_temperature": T (2) */
	double sigmoid_offset;       /* "sigmoid_offset": o (1); s = T = 2, o = 1 is tanh */
	trn_precision precision;     /* "precision": "float64" (default) | "float32":
	                                the cnn's per-example passes (trn_conv_f32.c) */
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
 * trn_dpsgd_check_shape, then the run's work: T (n_train + (L + 1) w) with T
 * = trn_dpsgd_steps, L the lot size and w one example's forward
 * multiply-adds through the model (each weight once per position it is
 * applied at), at most DPG_MAX_DPSGD_WORK.  Every input is public where a
 * private run is priced (the row count is in its event), so the server
 * refuses before reserving.  0 also when T is past the step limit (the
 * event refuses that); ACCT_EINVAL at "/params/epochs" naming the limit.
 */
int trn_dpsgd_check_work(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			 uint64_t n_train, acct_error *err);

/*
 * As trn_dpsgd_event but with `steps` in place of T: the event of the first
 * `steps` steps of the job (0 <= steps <= T), for a job that stopped early.
 * With steps == 0 and PCA, the PCA release alone; with steps == 0 and no
 * PCA, *ret is NULL (nothing was released).
 */
int trn_dpsgd_event_for_steps(const trn_dpsgd_params *p, uint64_t n_train, int64_t steps,
			      acct_event **ret, acct_error *err);

/* A trained classifier: an input rule, an optional linear projection, then
 * dense layers.  Opaque; freed with trn_model_free. */
typedef struct trn_model trn_model;

void trn_model_free(trn_model *m);

/*
 * Builds a model from its layers: n_layers dense layers of widths
 * widths[0..n_layers] (widths[0] = raw input dimension, widths[n_layers] =
 * number of classes >= 2), activations[0..n_layers-1] (trn_activation codes;
 * the last must be TRN_ACT_IDENTITY), `params` the weights in the format's
 * order (W_1 row-major widths[1] x widths[0], b_1, W_2, b_2, ...), and the
 * input rule with its scale B (finite, > 0; ignored for TRN_INPUT_NONE).
 * Everything is copied.  Returns 0 and *ret, or ACCT_EINVAL (bounds of
 * trn_dpsgd_check_shape's models, a non-finite weight) / ACCT_ENOMEM.
 */
int trn_model_from_layers(uint32_t n_layers, const uint32_t *widths,
			  const uint32_t *activations, const double *params,
			  trn_input_rule rule, double input_scale, trn_model **ret,
			  acct_error *err);

/* The raw input dimension D and the number of classes of a model. */
uint32_t trn_model_input_dim(const trn_model *m);
uint32_t trn_model_num_classes(const trn_model *m);

/*
 * A read-only view of a model's parts, for exporting it (the JSON model):
 * every pointer points into the model and is valid until trn_model_free.
 * widths has n_layers + 1 entries, activations n_layers, params n_params
 * (the format's layer order), proj input_dim x proj_dim (NULL when
 * proj_dim is 0).
 */
typedef struct trn_model_info {
	uint32_t input_dim;
	uint32_t proj_dim;
	const double *proj;
	uint32_t n_layers;
	const uint32_t *widths;
	const uint32_t *activations;
	const double *params;
	size_t n_params;
	trn_input_rule input_rule;
	double input_scale;
	/* The feature transform between the raw row and the first layer (or
	 * TRN_FEATURE_RULE_NONE, the other fields then 0): the scattering of
	 * the row read as a scatter_rows x scatter_cols image, then group
	 * normalisation over scatter_groups groups of channels. */
	trn_feature_rule feature_rule;
	uint32_t scatter_rows, scatter_cols, scatter_j, scatter_l, scatter_groups;
	/* A convolutional model (version 4; NULL otherwise): its shape; params
	 * then holds every weight in trn_convnet_params' order, n_layers,
	 * widths and activations describe its dense layers only (the hidden
	 * one's code is TRN_ACT_TANH for either conv activation). */
	const struct trn_conv_spec *conv;
} trn_model_info;

void trn_model_info_get(const trn_model *m, trn_model_info *ret);

/* The predicted class of one raw feature row (length = the model's input
 * dimension): the argmax of the scores below.  Returns 0, or ACCT_EINVAL. */
int trn_model_predict(const trn_model *m, const double *x, size_t d, uint32_t *ret_class,
		      acct_error *err);

/*
 * The per-class scores of one raw feature row: the softmax of the logits,
 * written to scores[0..k-1]; k must be the model's number of classes.
 * Returns 0, or ACCT_EINVAL (wrong d or k; nothing written) / ACCT_ENOMEM.
 */
int trn_model_scores(const trn_model *m, const double *x, size_t d, double *scores, size_t k,
		     acct_error *err);

/* Accuracy (fraction correct) and mean cross-entropy of a model on a table
 * of raw rows, over the rows that have a class: a row labelled
 * TRN_NO_CLASS is not scored, and both are NaN when no row has a class
 * (as trn_eval_model).  Either output may be NULL.  ACCT_EINVAL for a
 * table of another shape or a label past the classes. */
int trn_model_evaluate(const trn_model *m, const trn_dataset *ds, double *ret_accuracy,
		       double *ret_loss, acct_error *err);

/*
 * Serialises a model into the documented format below, returned as a new
 * malloc'd buffer (caller frees).  Every integer is little-endian, every
 * real an IEEE-754 binary64 stored little-endian.  New models are written
 * as version 2; version 1 files (written before input rules and per-layer
 * activations existed) are still read.
 *
 * Version 2:
 *   offset  size  field
 *   0       8     magic "DPGMDL01"
 *   8       4     u32 format version = 2
 *   12      4     u32 input rule: 0 none, 1 unit_ball (see trn_input_rule)
 *   16      4     u32 raw input dimension D (features per table row)
 *   20      4     u32 projection dimension P (0 = no projection)
 *   24      4     u32 number of dense layers K
 *   28      4     u32 number of classes
 *   32      8     f64 input scale B of the rule (1 for rule none)
 *   40      4*(K+1) u32 layer widths w_0..w_K (w_0 = P if P > 0 else D,
 *                   w_K = number of classes)
 *   then    4*K   u32 activation of layers 1..K: 0 identity, 1 relu,
 *                   2 tanh, 3 cos, 4 sigmoid (layer K: 0)
 *   then    D*P f64  projection V, row-major D x P (row r = input feature r)
 *   then    for each layer k = 1..K: W_k, f64 row-major w_k x w_{k-1},
 *           then b_k, f64 w_k
 *
 * Version 3, written only for a model with a feature transform (a
 * "scatter" job's): version 2 with version = 3 and, right after the
 * per-layer codes, six u32: the feature rule (1: scatter then group norm,
 * see trn_feature_rule), the image rows M and columns N (M N = D), the
 * scattering's J and L, and the number of groups G.  P is then 0 and w_0
 * = C (M / 2^J)(N / 2^J), C = 1 + JL + L^2 J(J-1)/2 channels; the input
 * rule is none.  h_0 is the scattering of x (channel-major, as
 * trn_scatter_apply writes it), each group of C/G consecutive channels
 * then replaced by (h - mean) / sqrt(var + 1e-5), mean and (biased)
 * variance over that group's values in this row.
 *
 * Version 4, written only for a convolutional model (a "cnn" job's):
 * the first 40 bytes as version 2 with version = 4, input rule 0, P = 0,
 * K its dense layers (1 or 2) and scale 1; then
 *   40      4     u32 image channels c (D = c S^2)
 *   44      4     u32 image side S
 *   48      4     u32 conv blocks n (1..DPG_MAX_CONV_LAYERS)
 *   52      4     u32 dense hidden units h (0: none; K = 2 when h > 0)
 *   56      4     u32 activation: 0 tanh, 1 tempered sigmoid (trn_conv_act)
 *   60      4     u32 0
 *   64      24    f64 s, T, o of the tempered sigmoid (2, 2, 1 for tanh)
 *   88      8n    u32 channels c_l and odd kernel side k_l of each block
 *   then    f64   the weights in trn_convnet_params' order: per block
 *                 K_l (c_l x c_{l-1} k_l^2, row-major, a row's columns
 *                 ordered input channel, kernel row, kernel column), its
 *                 c_l biases; then W_1, b_1 (and W_2, b_2) of the dense
 *                 layers as version 2's.
 * Prediction: block l maps its input (c_{l-1} x S_l x S_l, channel-major;
 * S_1 = S) to f(K_l * x + b_l) by a stride-1 cross-correlation with zero
 * 'same' padding of (k_l - 1)/2, then 2 x 2 average pooling halves S_l;
 * the last block's output, flattened channel-major, feeds the dense
 * layers, the hidden one activated by f, the last identity.  f is tanh or
 * s / (1 + e^(-T z)) - o.
 *
 * Version 1 (read only): the same magic; then at 8 u32 version = 1, at 12
 * u32 activation of every hidden layer (0 none, 1 relu, 2 tanh; 0 exactly
 * when K = 1), D, P, K and classes at 16-28 as above, the widths at 32,
 * then V and the layers as above; no input rule, no per-layer codes.
 *
 * Prediction: z = the input rule applied to x; h_0 = z V (or z when P = 0;
 * or the feature transform of x in version 3);
 * h_k = f_k(W_k h_{k-1} + b_k); logits = h_K; the class is the argmax; the
 * scores the softmax of the logits.
 */
#define TRN_MODEL_MAGIC "DPGMDL01"
#define TRN_MODEL_FORMAT_VERSION 2u

int trn_model_serialize(const trn_model *m, uint8_t **ret_buf, size_t *ret_len,
			acct_error *err);

/* Parses any version above (bounds-checked; a short, long or
 * inconsistent buffer gives ACCT_EINVAL).  Returns 0 and a new model. */
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

/* ==== Ensemble of local classifiers (Hamm, Cao, Belkin 2016) ==== */

/*
 * Learning privately from multiparty data (Hamm, Cao, Belkin, ICML 2016):
 * each of M parties trains a classifier on its own rows, non-privately; the
 * ensemble labels public unlabelled auxiliary rows; a regularised logistic
 * ERM on those labels is released with output perturbation.  The privacy
 * unit is a whole party: neighbouring tables differ in every row of one
 * party (docs/ensemble.md derives the sensitivities).
 */
typedef enum trn_ensemble_algorithm {
	TRN_ENSEMBLE_SOFT_LABEL = 0,    /* "soft_label": Algorithm 2 (default) */
	TRN_ENSEMBLE_MAJORITY_VOTE = 1, /* "majority_vote": Algorithm 1 */
} trn_ensemble_algorithm;

typedef enum trn_local_model {
	TRN_LOCAL_LOGREG = 0,      /* "logreg": L2-regularised logistic regression */
	TRN_LOCAL_LINEAR_SVM = 1,  /* "linear_svm": L2-regularised squared hinge */
	TRN_LOCAL_GAUSSIAN_NB = 2, /* "gaussian_nb": Gaussian naive Bayes */
	TRN_LOCAL_KNN = 3,         /* "knn": k nearest neighbours, majority */
	TRN_LOCAL_DECISION_TREE = 4, /* "decision_tree": depth-limited CART (Gini) */
} trn_local_model;

int trn_ensemble_algorithm_from_name(const char *name, trn_ensemble_algorithm *ret);
int trn_local_model_from_name(const char *name, trn_local_model *ret);

/*
 * The parameters of an ensemble job; JSON names beside each field.  The
 * server resolves "party_column" (the party code of each row, given to
 * trn_ensemble_run), "label", "classes" (the table's labels and
 * num_classes) and "auxiliary_data" (the public table) itself; "parties"
 * as a list of names becomes M = its length, names mapped to codes 0..M-1.
 */
typedef struct trn_ensemble_params {
	trn_ensemble_algorithm algorithm; /* "algorithm": "soft_label" | "majority_vote" */
	double epsilon;                   /* "epsilon": the pure epsilon charged */
	uint32_t parties;                 /* "parties": M, public, never read from rows */
	uint32_t n_local_models;          /* length of "local_model" (a string: 1) */
	trn_local_model local_model[DPG_MAX_ENSEMBLE_LOCAL_KINDS];
	                                  /* "local_model": a kind or a list given to
	                                     parties round-robin (party j gets
	                                     local_model[j mod n_local_models]) */
	double lambda;                    /* "lambda": L2 weight of the released ERM */
	double input_scale;               /* "input_scale": B of the unit-ball rule */
	double local_lambda;              /* "local_lambda": L2 weight of local logreg/svm */
	uint32_t knn_k;                   /* "knn_k": neighbours of a knn local model */
	uint32_t max_depth;               /* "max_depth": depth of a decision_tree */
} trn_ensemble_params;

/* Fills the defaults: soft_label, epsilon 1, M = 0 (must be given),
 * logreg, lambda 0.03, input_scale 1, local_lambda 1e-3, knn_k 5,
 * max_depth 5. */
void trn_ensemble_params_default(trn_ensemble_params *p);

/* Checks every field, with `where` "/params/<json name>" for the first bad
 * one.  Returns 0 or ACCT_EINVAL. */
int trn_ensemble_params_validate(const trn_ensemble_params *p, acct_error *err);

/*
 * The event charged: epsilon_delta(epsilon, 0), pure epsilon-DP for the
 * party-level neighbouring relation (one party's rows change arbitrarily,
 * which covers adding, removing or replacing any of its rows).  Needs the
 * parameters only.  Returns 0 and a new event, or ACCT_EINVAL / ENOMEM.
 */
int trn_ensemble_event(const trn_ensemble_params *p, acct_event **ret, acct_error *err);

/*
 * Checks that a job can run on a private table of n_train rows, d features
 * and num_classes classes with an auxiliary table of n_aux rows of the same
 * d features: d <= DPG_MAX_ENSEMBLE_FEATURES, 1 <= n_aux <=
 * DPG_MAX_ENSEMBLE_AUX_ROWS, 2 <= num_classes <= DPG_MAX_CLASSES, and for
 * knn n_aux * n_train * d <= DPG_MAX_ENSEMBLE_KNN_WORK, and a noise rate
 * (trn_ensemble_noise_beta) whose noise stays finite: epsilon and lambda
 * so small that it does not are refused at /params/epsilon.  Public sizes
 * only: where the private row count is not public, the caller passes a
 * public bound on it as n_train.
 */
int trn_ensemble_check_shape(const trn_ensemble_params *p, size_t d, uint32_t num_classes,
			     uint64_t n_train, uint64_t n_aux, acct_error *err);

/*
 * The noise rate beta of each released block, eta ~ exp(-beta ||eta||):
 * beta = epsilon / S with S = 2/lambda (majority_vote, Theorem 1) or
 * 2/(M lambda) (soft_label, Theorem 3), plus the solver's slack (see
 * docs/ensemble.md), for an ERM over n_aux rows of d + 1 inputs.  A
 * function of public values only.  0 when the arguments are invalid.
 */
double trn_ensemble_noise_beta(const trn_ensemble_params *p, size_t d, uint32_t num_classes,
			       uint64_t n_aux);

/* Progress: public facts only (the phase and how many parties are done). */
typedef struct trn_ensemble_progress {
	const char *phase;          /* "local_models", "erm", "release" */
	uint32_t parties_trained;
	uint32_t parties;
} trn_ensemble_progress;

typedef int (*trn_ensemble_progress_fn)(const trn_ensemble_progress *progress, void *user);

typedef struct trn_ensemble_result {
	trn_model *model;       /* logistic model, v2, unit_ball input rule; owned */
	double test_accuracy;   /* on the public test table; NaN without one */
	double noise_beta;      /* trn_ensemble_noise_beta: public */
	uint64_t aux_rows;
	double train_seconds;
} trn_ensemble_result;

/* Frees a result and its model.  Accepts NULL. */
void trn_ensemble_result_free(trn_ensemble_result *r);

/*
 * Runs the ensemble trainer.  `train` is the private table; party[i] is the
 * party code of row i (a row whose code is >= M, or whose label is
 * TRN_NO_CLASS, is ignored by every party).  `aux` is the public auxiliary
 * table (its labels are ignored); `test` (may be NULL) a public labelled
 * table; both with train's d features (and test with its classes).  All
 * noise comes from `rng`, a CSPRNG stream.  `progress` may be NULL;
 * `cancel` (may be NULL) is polled between parties.
 *
 * Steps: each party's local model is trained on its rows and votes on
 * every auxiliary row; targets are the majority label (Algorithm 1) or the
 * vote fractions (Algorithm 2); one logistic ERM per block (one block for
 * two classes, one-vs-rest blocks for more) over u = (z, 1)/sqrt(2), z the
 * unit-ball rule of x, is solved by Newton's method until its gradient norm
 * is at most 1e-10; each block gets noise from mech_ball_sample with
 * trn_ensemble_noise_beta; the model folds the 1/sqrt(2) into its weights.
 *
 * Returns 0 and *ret; TRN_CANCELLED (nothing released, *ret untouched); or
 * a negative code: ACCT_EINVAL for bad params or tables, ACCT_ENOMEM,
 * ACCT_EINTERNAL when the rng fails or the ERM does not converge (then
 * nothing is released).  Never prints, never aborts.
 */
int trn_ensemble_run(const trn_ensemble_params *p, const trn_dataset *train,
		     const uint32_t *party, const trn_dataset *aux, const trn_dataset *test,
		     mech_rng *rng, trn_ensemble_progress_fn progress, void *progress_user,
		     const atomic_bool *cancel, trn_ensemble_result **ret, acct_error *err);

/* ==== end ensemble ==== */

/* ==== label_em: label-private learning with a symmetric loss ==== */

/*
 * Margin losses l(z) of a binary classifier, z = y f(x) with y in {-1, +1}
 * (trn_loss.c).  "symmetric" means l(z) + l(-z) is constant: sigmoid (1),
 * ramp (1) and unhinged (2) everywhere; the barrier hinge (2r) on [-r, r]
 * only, where it is r - z.
 */
typedef enum trn_loss_kind {
	TRN_LOSS_BARRIER_HINGE = 0, /* "barrier_hinge": max(-b(r+z)+r, max(b(z-r), r-z)) */
	TRN_LOSS_HINGE = 1,         /* "hinge": max(0, 1 - z) */
	TRN_LOSS_LOGISTIC = 2,      /* "logistic": log(1 + e^-z) */
	TRN_LOSS_SIGMOID = 3,       /* "sigmoid": 1 / (1 + e^z) */
	TRN_LOSS_RAMP = 4,          /* "ramp": min(1, max(0, (1 - z) / 2)) */
	TRN_LOSS_SQUARED = 5,       /* "squared": (1 - z)^2 */
	TRN_LOSS_UNHINGED = 6,      /* "unhinged": 1 - z */
} trn_loss_kind;

/* A loss and its shape parameters (b > 1, r > 0: the barrier hinge's only). */
typedef struct trn_loss {
	trn_loss_kind kind;
	double b;
	double r;
} trn_loss;

/* Name <-> value for the JSON strings above; _from_name returns 0 or -1,
 * trn_loss_name NULL for an unknown kind. */
int trn_loss_from_name(const char *name, trn_loss_kind *ret);
const char *trn_loss_name(trn_loss_kind kind);

/* True for the losses symmetric on the whole line (sigmoid, ramp, unhinged). */
bool trn_loss_is_symmetric(trn_loss_kind kind);

/*
 * l(z), and in *ret_deriv (may be NULL) dl/dz; at a kink the right
 * derivative (for the convex hinge and barrier hinge, a subgradient).
 * NaN for an unknown kind.  The caller checks b and r.
 */
double trn_loss_eval(const trn_loss *loss, double z, double *ret_deriv);

/*
 * The parameters of a label_em job (Bi and Suppakitpaisarn 2022): labels
 * privatised once by the label exponential mechanism, then ordinary
 * gradient descent with a margin loss on the public features.  The JSON
 * name of each field is beside it; "label" (the label column) is resolved
 * by the server into the trn_dataset's y.  Start from
 * trn_label_em_params_default.
 */
typedef struct trn_label_em_params {
	double epsilon;              /* "epsilon": the mechanism's epsilon; the release
	                                is epsilon/2-DP (mech_labelem.c) */
	trn_loss loss;               /* "loss", "b", "r" */
	uint32_t classes;            /* "classes": must be 2 */
	trn_model_kind model;        /* "model": "linear" (TRN_MODEL_LOGREG's one dense
	                                layer) | "mlp" */
	uint32_t n_hidden;           /* hidden layers: 0 for linear, 1-2 for mlp */
	uint32_t hidden[DPG_MAX_HIDDEN_LAYERS]; /* "hidden" */
	trn_activation activation;   /* "activation": "relu" | "tanh" */
	uint32_t epochs;             /* "epochs" */
	uint32_t batch_size;         /* "batch_size": rows per gradient step */
	double learning_rate;        /* "learning_rate" */
	double momentum;             /* "momentum": heavy-ball, in [0, 1) */
	double weight_decay;         /* "weight_decay": L2 on every parameter, >= 0;
	                                > 0 with the unhinged loss */
	double gradient_clip;        /* "gradient_clip": the mean batch gradient (decay
	                                included) is scaled to at most this L2 norm;
	                                0 = never (default 10) */
	bool center;                 /* "center": train on x - mean(x) over the training
	                                rows (public features), folded into the first
	                                layer's bias on release (default true) */
} trn_label_em_params;

/* "linear" <-> TRN_MODEL_LOGREG, "mlp" <-> TRN_MODEL_MLP; 0 or -1. */
int trn_label_em_model_from_name(const char *name, trn_model_kind *ret);

/*
 * Fills the defaults: epsilon 1, barrier hinge with b = 200, r = 50
 * (Charoenphakdee et al. 2019), 2 classes, linear model, 50 epochs of
 * batches of 64, learning rate 0.01, momentum 0.9, weight decay 1e-3,
 * gradient clip 10, centred features.
 */
void trn_label_em_params_default(trn_label_em_params *p);

/* Checks every field, with `where` = "/params/<json name>" for the first
 * bad one.  Needs no data. */
int trn_label_em_params_validate(const trn_label_em_params *p, acct_error *err);

/*
 * The job's privacy event for a label column of n_rows rows, before any
 * label is read: exactly mech_label_em's event for (n_rows, epsilon, D = 1),
 * binary randomized_response with keep probability p = e^{eps/2} / (1 +
 * e^{eps/2}), i.e. epsilon / 2.  Training afterwards is post-processing.
 * Returns 0 and a new event (caller frees), or ACCT_EINVAL ("/params/..."
 * or "/data" for n_rows outside 1..DPG_MAX_LABEL_EM_N), ACCT_ENOMEM.
 */
int trn_label_em_event(const trn_label_em_params *p, uint64_t n_rows, acct_event **ret,
		       acct_error *err);

/*
 * What a dry run shows before epsilon is spent, for n_rows labels: the keep
 * probability p, the expected fraction of labels released correct (E[q]/n =
 * p, q ~ Binomial(n, p)) and the paper's success probability Pr[q >= n/2]
 * (mech_label_em_success_probability).
 */
typedef struct trn_label_em_guidance {
	double keep_probability;
	double expected_correct_fraction;
	double success_probability;
} trn_label_em_guidance;

int trn_label_em_guidance_for(const trn_label_em_params *p, uint64_t n_rows,
			      trn_label_em_guidance *ret, acct_error *err);

/*
 * Checks that a job can train on d features and num_classes classes: 1 <=
 * d <= DPG_MAX_FEATURES, num_classes == 2 (the paper's binary setting; more
 * classes are refused at "/params/classes"), the model within the bounds
 * of trn_model.  Public shape only.  Returns 0 or ACCT_EINVAL.
 */
int trn_label_em_check_shape(const trn_label_em_params *p, size_t d, uint32_t num_classes,
			     acct_error *err);

typedef struct trn_label_em_result {
	trn_model *model;            /* 2 classes; margin = logit_1 - logit_0 */
	bool labels_released;        /* the mechanism ran: its event is spent */
	double test_accuracy;        /* on the public test table; NaN without one */
	double test_auc;
	double test_balanced_error;
	uint32_t epochs_done;
	int64_t steps_done;
	int64_t steps_total;
	uint64_t examples_used;      /* rows whose labels were released */
	double train_seconds;
} trn_label_em_result;

/* Frees a result and its model.  Accepts NULL. */
void trn_label_em_result_free(trn_label_em_result *r);

/*
 * Runs a label_em job on `train` (labels private, features public; 2
 * classes): one call of mech_label_em over the whole label column, the
 * first draw from `rng` and the only read of the labels (a row without a
 * class enters it as class 0, so that nothing depends on which rows lack
 * one); then `epochs` passes of mini-batch gradient descent with momentum
 * on the mean margin loss l(s_i (logit_1 - logit_0)), s_i = +1 for a
 * released label 1 and -1 for 0, plus (weight_decay / 2) ||theta||^2, on
 * rows centred by the training features' mean when p->center (features are
 * public under label DP); the released model takes raw rows.
 * Shuffling and initialisation draw from a stream keyed from `rng`.
 *
 * `test` (may be NULL) is public data with the same d and 2 classes: the
 * only table metrics and progress are computed on.  `cancel` is polled
 * before the mechanism and every step; `progress` (may be NULL) is called
 * after every epoch with the test accuracy (loss is NaN).  Returns 0 and
 * *ret; TRN_CANCELLED and *ret (labels_released says whether the event was
 * spent) when cancelled; or a negative code, *ret untouched.
 */
int trn_label_em_run(const trn_label_em_params *p, const trn_dataset *train,
		     const trn_dataset *test, mech_rng *rng, trn_progress_fn progress,
		     void *progress_user, const atomic_bool *cancel, trn_label_em_result **ret,
		     acct_error *err);

/* ==== end label_em ==== */

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
 * DPG_MAX_MODEL_PARAMS (the learners' duals), n >= 1 (the table as
 * submitted; a run takes n = 0, see trn_slmc_run).  Returns 0 or
 * ACCT_EINVAL.
 */
int trn_slmc_check_shape(const trn_slmc_params *p, uint64_t n, size_t d, acct_error *err);

/*
 * The released clustering: the feature map and the consensus Z = (W; b^T),
 * (D+1) x C row-major (rows 0..D-1 are W, row D is b).  The cluster of x
 * is argmin_k ||f(x) - y_k|| = argmax_k f_k(x), f(x) = W^T phi(x) + b, with
 * one-hot codes y_k.  It is a dense net with a cos hidden layer (Omega,
 * phase, scaled by sqrt(2/D)) and a linear output, which
 * trn_slmc_model_to_model turns into the trn_model that predict and the
 * model download use.
 */
typedef struct trn_slmc_model {
	trn_rff *rff;
	uint32_t clusters;
	double *theta;            /* (D+1) x C */
} trn_slmc_model;

void trn_slmc_model_free(trn_slmc_model *m);

/*
 * The same clustering as a trn_model: layer 1 is Omega (D x d) with bias
 * phase and a cos activation, layer 2 is sqrt(2/D) W^T (C x D) with bias b,
 * so its logits are f(x) and its argmax is the nearest one-hot code.  Its
 * scores are softmax(f(x)), not f(x).  Returns 0 and *ret, ACCT_EINVAL when
 * the model is outside trn_model's bounds (D > DPG_MAX_HIDDEN_UNITS), or
 * ACCT_ENOMEM.
 */
int trn_slmc_model_to_model(const trn_slmc_model *m, trn_model **ret, acct_error *err);

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
 * consensus model.  `train` may hold no row (a job's rows of no declared
 * party are dropped): every learner then solves with its regulariser alone,
 * and the uploads carry the same noise.  `party` (may be NULL) gives each
 * row's learner in 0..parties-1 (from the party column); NULL splits the rows
 * uniformly at random over p->parties learners with `rng`. noise_multiplier
 * must be the resolved z (trn_slmc_event's output when epsilon is given;
 * epsilon is then ignored).  `aux` (may be NULL, "auxiliary_data") is public
 * rows with the same d: FCM on them gives centres, and each private row's
 * first memberships are the FCM formula against those centres (a function of
 * the row alone); without it the first memberships come from a random public
 * consensus Z^0.  `test` (may be NULL) is public labelled data with the same
 * d: clustering accuracy and NMI are measured on it only.  `rng` must be a
 * CSPRNG stream: it draws the feature map, the split, the initial consensus
 * and every noise vector. Memberships of private rows never leave this
 * function. Returns 0 and *ret; TRN_CANCELLED and *ret with the consensus so
 * far; or a negative code with `err` (*ret untouched).  Never prints, never
 * aborts.
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

/* ==== Scattering features (Mallat 2012; Oyallon and Mallat 2015) ==== */

/*
 * The 2D scattering transform with Morlet wavelets, as kymatio's
 * Scattering2D computes it and as Tramer and Boneh (ICLR 2021) use it for
 * DP-SGD features: an M x N image is reflect-padded, then averaged by a
 * Gaussian low-pass phi at scale 2^J (order 0), and by phi after one or
 * two wavelet moduli |x * psi_{j1,t1}| and ||x * psi_{j1,t1}| * psi_{j2,t2}|
 * with j1 < j2 (orders 1 and 2), each sampled every 2^J pixels.  There are
 * 1 + JL + L^2 J(J-1)/2 channels of (M/2^J) x (N/2^J): 81 of 7 x 7 for a
 * 28 x 28 image with J = 2, L = 8.  The map is fixed and independent of
 * any data, so applying it to private rows costs no privacy.
 *
 * Channel order: 0 is order 0; 1 + j*L + t is order 1 at (j, t); then order
 * 2 in the order of (j1, t1) and, within it, (j2 > j1, t2).
 */
typedef struct trn_scatter trn_scatter;
typedef struct trn_scatter_workspace trn_scatter_workspace;

/* Largest J and L accepted (J = 2, L = 8 is the usual choice). */
#define TRN_SCATTER_MAX_J 4u
#define TRN_SCATTER_MAX_L 16u
/* Largest image side accepted (the filter bank is built at the padded size). */
#define TRN_SCATTER_MAX_SIDE 256u

/*
 * Builds the filter bank for M x N images (rows x columns): J >= 1 scales,
 * L >= 1 orientations, M and N multiples of 2^J and at least 2^J, at most
 * TRN_SCATTER_MAX_SIDE.  Returns 0 and *ret (free with trn_scatter_free), or
 * ACCT_EINVAL / ACCT_ENOMEM / ACCT_ENUMERIC (an FFT failed) with `err`.
 */
int trn_scatter_new(uint32_t M, uint32_t N, uint32_t J, uint32_t L, trn_scatter **ret,
		    acct_error *err);

/* Frees a filter bank.  Accepts NULL. */
void trn_scatter_free(trn_scatter *s);

/* Channels, and rows and columns of each channel's output. */
size_t trn_scatter_channels(const trn_scatter *s);
size_t trn_scatter_out_rows(const trn_scatter *s);
size_t trn_scatter_out_cols(const trn_scatter *s);

/* The padded size P x Q the filters are built at. */
size_t trn_scatter_padded_rows(const trn_scatter *s);
size_t trn_scatter_padded_cols(const trn_scatter *s);

/*
 * The real Fourier transform of a filter at the padded size, P x Q row-major
 * (frequency (0,0) first, as an unshifted DFT): index j*L + t is the
 * wavelet psi_{j,t}, index J*L the low-pass phi.  NULL past the end.  The
 * bank owns the array.
 */
const double *trn_scatter_filter(const trn_scatter *s, size_t index);

/*
 * Scratch memory for one trn_scatter_apply at a time.  Returns 0 and *ret,
 * or ACCT_ENOMEM with `err`.  Free with trn_scatter_workspace_free.
 */
int trn_scatter_workspace_new(const trn_scatter *s, trn_scatter_workspace **ret,
			      acct_error *err);
void trn_scatter_workspace_free(trn_scatter_workspace *w);

/*
 * Scatters one M x N image `x` (row-major) into `out` (channels x rows x
 * cols, row-major).  The bank is only read, so threads may share it, each
 * with its own workspace.  Returns 0, or ACCT_ENUMERIC if an FFT failed
 * (out is then unspecified).
 */
int trn_scatter_apply(const trn_scatter *s, const double *x, double *out,
		      trn_scatter_workspace *w);

/*
 * Maps every row of `in` (d = M*N), in two threads, to its scattering
 * coefficients: *out has
 * the same n, labels and classes, and d = channels x rows x cols (3969 for
 * 28 x 28, J = 2, L = 8).  Returns 0 and *out, or ACCT_EINVAL (d is not
 * M*N, or the output exceeds DPG_MAX_FEATURES), ACCT_ENOMEM or
 * ACCT_ENUMERIC with `err` (*out untouched).
 */
int trn_scatter_table(const trn_scatter *s, const trn_dataset *in, trn_dataset **out,
		      acct_error *err);

/* ==== end scattering ==== */

/* ==== PATE: teachers, aggregation and a student (trn_pate.c) ==== */

/*
 * Scalable private learning with PATE (Papernot, Song, Mironov,
 * Raghunathan, Talwar, Erlingsson, ICLR 2018), end to end: the private
 * rows are split at random between n teachers, each trained without
 * privacy on its part; the teachers vote on public unlabelled student
 * rows; the votes are aggregated by mech_pate_run_query (GNMax, Confident-
 * or Interactive-GNMax, exact discrete Gaussian noise); a student is
 * trained on the labels released.  Teachers and votes never leave
 * trn_pate_run: the labels, the counts of checks and answers and the
 * smooth-sensitivity release of the data-dependent RDP are its only
 * outputs computed from private rows.  docs/pate.md states the theorems.
 */

/* A teacher's or the student's model: non-private SGD (trn_sgd_nonprivate_run
 * with these fields; its noise fields are unused). */
typedef struct trn_pate_model_params {
	trn_model_kind model;        /* "model": "logreg" | "mlp" */
	uint32_t n_hidden;
	uint32_t hidden[DPG_MAX_HIDDEN_LAYERS]; /* "hidden" */
	trn_activation activation;   /* "activation" */
	uint32_t epochs;             /* "epochs": capped at the most within
	                                DPG_MAX_TRAINING_STEPS steps */
	uint32_t lot_size;           /* "lot_size": capped at the rows trained on */
	double learning_rate;        /* "learning_rate" */
	double momentum;             /* "momentum" */
} trn_pate_model_params;

typedef struct trn_pate_params {
	uint32_t teachers;           /* "teachers": n */
	trn_pate_model_params teacher; /* "teacher_model" */
	trn_pate_model_params student; /* "student_model" */
	uint32_t queries;            /* "queries": the first rows of the student data */
	mech_pate_agg aggregator;    /* "aggregator": gnmax | confident_gnmax | interactive_gnmax */
	double threshold;            /* "threshold": T (confident, interactive) */
	double sigma1;               /* "sigma1": the check's noise (confident, interactive) */
	double sigma2;               /* "sigma2": the answer's noise */
	double student_confidence;   /* "student_confidence": interactive only; NAN = never */
	bool semi_supervised;        /* "semi_supervised": self-training on the rest */
	double confidence;           /* "confidence": the self-training threshold */
	double release_beta;         /* "release_beta": beta of the smooth sensitivity */
	double release_sigma;        /* "release_sigma": sigma of the GNSS release */
	double release_order;        /* "release_order": the RDP order released */
	double delta;                /* not JSON: the dataset's delta, for the epsilons */
} trn_pate_params;

/* Defaults: 250 teachers, logreg teachers and student (30 epochs, lot 64,
 * rate 0.1, momentum 0.9), 1000 queries, confident_gnmax with T = 200,
 * sigma1 = 150, sigma2 = 40 (the paper's MNIST row), no student
 * confidence, no self-training (confidence 0.9), release beta 0.0329,
 * sigma 15, order 8 (docs/pate.md), delta 1e-5. */
void trn_pate_params_default(trn_pate_params *p);

/* Checks every field; `where` = "/params/<json name>" of the first bad one
 * ("/params/teacher_model/epochs" for a model's fields). */
int trn_pate_params_validate(const trn_pate_params *p, acct_error *err);

/* The aggregator's configuration for num_classes classes (the release
 * order as its one analysis order).  0 or ACCT_EINVAL. */
int trn_pate_cfg(const trn_pate_params *p, uint32_t num_classes, mech_pate_cfg *ret,
		 acct_error *err);

/*
 * The data-independent event of `checks` threshold checks, `answers` GNMax
 * answers and, when `released`, the GNSS release: composed of
 * self_composed(checks, pate_threshold(sigma1 used)), self_composed(answers,
 * gnmax(sigma2 used)) and pate_gnss(release_beta + MECH_PATE_GNSS_BETA_SLACK,
 * release_sigma), the parts with a zero count left out; NULL in *ret when
 * nothing was run.  The worst case is checks = answers = queries (checks 0
 * for gnmax) and released.  Returns 0, ACCT_EINVAL or ACCT_ENOMEM.
 */
int trn_pate_event(const trn_pate_params *p, int64_t checks, int64_t answers, bool released,
		   acct_event **ret, acct_error *err);

/* The worst case above: what a job reserves. */
int trn_pate_worst_event(const trn_pate_params *p, acct_event **ret, acct_error *err);

/*
 * Checks that a job can run on a private table of d features and
 * num_classes classes with n_student public student rows: queries <=
 * n_student <= DPG_MAX_PATE_STUDENT_ROWS, both models within trn_model's
 * bounds, teachers x queries <= DPG_MAX_PATE_VOTE_WORK.  Public sizes only:
 * not the private row count, which a refusal would tell for free (teachers
 * may outnumber the rows; a teacher without rows abstains).  0 or
 * ACCT_EINVAL.
 */
int trn_pate_check_shape(const trn_pate_params *p, size_t d, uint32_t num_classes,
			 uint64_t n_student, acct_error *err);

/*
 * The random partition: ret_teacher[i] in 0..teachers-1 for each of the n
 * rows, drawn independently and uniformly from `rng` (a CSPRNG stream), so
 * that adding, removing or replacing one row changes one teacher's rows
 * only (docs/pate.md says why not a balanced permutation).  Returns 0,
 * ACCT_EINVAL (teachers 0) or ACCT_EINTERNAL (rng).
 */
int trn_pate_partition(mech_rng *rng, size_t n, uint32_t teachers, uint32_t *ret_teacher,
		       acct_error *err);

/*
 * A pate job on Fashion-MNIST asks about the first 9000 images of the
 * public test split and evaluates on the last 1000, as Papernot et al.
 * split MNIST's test set (Section 4).
 */
#define TRN_PATE_FASHION_MNIST_POOL 9000

/* Progress: public facts only. */
typedef struct trn_pate_progress {
	const char *phase;           /* "teachers", "queries", "student", "release" */
	uint32_t teachers_trained;
	uint32_t teachers;
	uint32_t queries_asked;      /* queries run so far */
	uint32_t queries_answered;   /* of which labelled (released by the aggregator) */
	uint32_t queries;
} trn_pate_progress;

typedef int (*trn_pate_progress_fn)(const trn_pate_progress *progress, void *user);

typedef struct trn_pate_result {
	trn_model *model;            /* the student; owned; NULL when none was trained */
	int64_t queries_asked;
	int64_t checks;              /* threshold checks run (charged) */
	int64_t answers;             /* GNMax answers (charged) */
	int64_t student_answers;     /* interactive: the student's own labels */
	int64_t abstained;
	bool released;               /* the GNSS release ran (charged) */
	double epsilon_data_dependent; /* the sanitised figure at (order, delta); NaN if none */
	double rdp_data_dependent;   /* the noisy RDP released at release_order */
	double epsilon_data_independent; /* of the checks and answers made, at the order */
	double label_accuracy;       /* of the answered queries, when the student rows are
	                                labelled (public); NaN otherwise */
	double test_accuracy;        /* the student on the public test table; NaN without */
	uint64_t self_trained_rows;  /* semi_supervised: rows labelled by the student */
	uint64_t student_rows;       /* rows the final student trained on */
	double train_seconds;
} trn_pate_result;

void trn_pate_result_free(trn_pate_result *r);

/*
 * Runs PATE: partition, teachers (on `train`, private), votes and
 * aggregation on the first p->queries rows of `student` (public; its labels,
 * when it has them, are used for label_accuracy only), the GNSS release of
 * the data-dependent RDP, then the student on the labelled queries (and,
 * with semi_supervised, self-training on the other student rows whose
 * predicted class has probability >= confidence: post-processing).  `test`
 * (may be NULL) is public labelled data.  All randomness from `rng`.
 * `cancel` is polled between queries and at every training step of a
 * teacher or the student.  Returns 0 and *ret; TRN_CANCELLED and *ret
 * with the counts so far (no model); or a negative code, *ret untouched
 * (the caller then cannot know what ran).
 */
int trn_pate_run(const trn_pate_params *p, const trn_dataset *train, const trn_dataset *student,
		 const trn_dataset *test, mech_rng *rng, trn_pate_progress_fn progress,
		 void *progress_user, const atomic_bool *cancel, trn_pate_result **ret,
		 acct_error *err);

/* ==== end PATE ==== */
/* ==== DP-SGD feature transforms ==== */

/*
 * The shape of a "scatter" job's features for rows of d values: the side
 * of the square image (d = side^2, side a multiple of 2^J from 2^(J+1) to
 * TRN_SCATTER_MAX_SIDE) and the number of features, C (side / 2^J)^2 with
 * C = 81 channels (J = 2, L = 8), at most DPG_MAX_FEATURES; `groups` must
 * divide C.  Either output may be NULL.  Needs the public shape only.
 * Returns 0, or ACCT_EINVAL at /params/features or /params/scatter_groups.
 */
int trn_dpsgd_scatter_shape(size_t d, uint32_t groups, size_t *ret_side, size_t *ret_features,
			    acct_error *err);

/*
 * Maps every row of `in` to the features a job with p->features = scatter
 * trains on (the scattering, then per-row group normalisation over
 * p->scatter_groups groups; trn.h's model format, version 3, states the
 * formula), with two threads.  The map reads one row at a time and no
 * statistic of the table, so it costs no privacy.  *ret has in's n, labels
 * and classes.  Returns 0 and *ret (caller frees), or ACCT_EINVAL (not a
 * scatter job, or rows that are not such images) / ACCT_ENOMEM /
 * ACCT_ENUMERIC.
 */
int trn_dpsgd_features_table(const trn_dpsgd_params *p, const trn_dataset *in,
			     trn_dataset **ret, acct_error *err);

/*
 * trn_dpsgd_run and trn_sgd_nonprivate_run for a scatter job whose tables
 * were already mapped by trn_dpsgd_features_table with the same p (a
 * benchmark keeps them on disk between runs): `train` and `eval` hold the
 * features, `raw_d` the width of the raw rows they came from.  Training is
 * the same; the model records the transform and takes raw rows.  Any other
 * features value is refused with ACCT_EINVAL.
 */
int trn_dpsgd_run_prepared(const trn_dpsgd_params *p, size_t raw_d, const trn_dataset *train,
			   const trn_dataset *eval, mech_rng *rng, trn_progress_fn progress,
			   void *progress_user, const atomic_bool *cancel,
			   trn_dpsgd_result **ret, acct_error *err);
int trn_sgd_nonprivate_run_prepared(const trn_dpsgd_params *p, size_t raw_d,
				    const trn_dataset *train, const trn_dataset *eval,
				    mech_rng *rng, trn_progress_fn progress, void *progress_user,
				    const atomic_bool *cancel, trn_dpsgd_result **ret,
				    acct_error *err);

/* ==== end DP-SGD feature transforms ==== */

/* ==== Convolutional models (trn_conv.c) ==== */

/*
 * A small convolutional classifier: n_conv blocks of [convolution with an
 * odd k x k kernel, stride 1 and zero 'same' padding -> activation -> 2 x 2
 * average pooling], then an optional dense hidden layer (same activation)
 * and a dense output layer; softmax cross-entropy.  Inputs are channels x
 * side x side, channel-major.  Trained with DP-SGD by
 * trn_convnet_dpsgd_train below.
 */
#define TRN_CONV_MAX_CONV ((uint32_t)DPG_MAX_CONV_LAYERS)
#define TRN_CONV_MAX_CHANNELS ((uint32_t)DPG_MAX_CONV_CHANNELS)
#define TRN_CONV_MAX_KERNEL ((uint32_t)DPG_MAX_CONV_KERNEL)

typedef struct trn_conv_spec {
	uint32_t channels, side;             /* input */
	uint32_t n_conv;                     /* 1..TRN_CONV_MAX_CONV */
	uint32_t conv_channels[TRN_CONV_MAX_CONV];
	uint32_t kernel[TRN_CONV_MAX_CONV];  /* odd, <= TRN_CONV_MAX_KERNEL */
	uint32_t hidden;                     /* dense hidden units; 0 = none */
	uint32_t classes;
	trn_conv_act act;
	double ts_scale, ts_temp, ts_offset; /* the tempered sigmoid's s, T, o */
} trn_conv_spec;

/* How a convolution's per-example gradient norm is computed: from the two
 * T x T Gram matrices (ghost), from the materialised C_out x D gradient,
 * or whichever costs less (auto: ghost when 2 T^2 < C_out D). */
typedef enum trn_conv_norm_mode {
	TRN_CONV_NORM_AUTO = 0,
	TRN_CONV_NORM_GHOST = 1,
	TRN_CONV_NORM_MATERIALISE = 2,
} trn_conv_norm_mode;

typedef struct trn_convnet trn_convnet;

/* Builds a model with zero weights for `spec` (each side halving at every
 * pooling).  Returns 0 and *ret, ACCT_EINVAL or ACCT_ENOMEM. */
int trn_convnet_new(const trn_conv_spec *spec, trn_convnet **ret, acct_error *err);
void trn_convnet_free(trn_convnet *n);

/* One example's forward pass through a net of `spec` (checked), in
 * multiply-adds: each weight counted once per position it is applied at.
 * DP-SGD's work bound and predict's count examples in these units. */
double trn_conv_spec_work(const trn_conv_spec *spec);

/* Parameters, in the order conv W_1 (C_out x C_in k^2), b_1, ..., dense
 * W, b; the array belongs to the model.  Input width channels side^2. */
size_t trn_convnet_n_params(const trn_convnet *n);
size_t trn_convnet_input_dim(const trn_convnet *n);
double *trn_convnet_params(trn_convnet *n);

/* Weights N(0, 1/fan_in) from rng, biases 0. */
int trn_convnet_init(trn_convnet *n, mech_rng *rng, acct_error *err);

/* The cross-entropy of one example (the reference of gradient tests). */
double trn_convnet_loss(trn_convnet *n, const double *x, uint32_t y);

/*
 * Adds to grad (n_params) the sum over the B rows of x of each example's
 * gradient, clipped to norm clip_norm (Abadi et al. 2016, Algorithm 1;
 * clip_norm <= 0: not clipped), computing each norm by `mode` without
 * storing any example's gradient.  ret_norms (may be NULL) gets the B
 * unclipped norms, ret_loss_sum (may be NULL) the summed loss.  Returns 0,
 * or ACCT_EINVAL for a label out of range (grad then holds the rows
 * before it).
 */
int trn_convnet_clipped_grad(trn_convnet *n, const double *x, const uint32_t *y, size_t B,
			     double clip_norm, trn_conv_norm_mode mode, double *grad,
			     double *ret_norms, double *ret_loss_sum);

/* The most probable class of one example (ties: the lowest). */
uint32_t trn_convnet_predict(trn_convnet *n, const double *x);

/*
 * DP-SGD for a convolutional model (trn_conv_dpsgd.c): Abadi et al. 2016,
 * Algorithm 1, as trn_dpsgd_run does it for the MLP: each step a Poisson
 * lot (every row with probability q = L / n_train), the sum of its clipped
 * per-example gradients, noise N(0, sigma^2 C^2) per parameter from rng's
 * ziggurat fill, divided by the expected lot size L, heavy-ball momentum.
 * The privacy event is trn_dpsgd_event's (it depends only on q, sigma and
 * the steps), so nothing here prices anything.
 */
typedef struct trn_conv_sgd trn_conv_sgd;

/* A stepper for `n` (borrowed; must outlive it) under p's lot_size,
 * noise_multiplier, clip_norm and momentum; `private` false adds no noise
 * (clip_norm <= 0 then means unclipped).  0, ACCT_EINVAL or ACCT_ENOMEM. */
int trn_conv_sgd_new(trn_convnet *n, const trn_dpsgd_params *p, bool private,
		     trn_conv_sgd **ret, acct_error *err);
void trn_conv_sgd_free(trn_conv_sgd *s);

/* Has trn_conv_sgd_step read *cancel (borrowed, may be NULL: never) before
 * each example, so that a cancel is answered within one example. */
void trn_conv_sgd_set_cancel(trn_conv_sgd *s, const atomic_bool *cancel);

/* One step on the lot of ds's rows idx[0..count) (rows labelled
 * TRN_NO_CLASS, or beyond ds->num_classes, contribute zero) at learning
 * rate lr; ds->d must be the model's input width.  0, ACCT_EINTERNAL
 * when rng fails, or TRN_CANCELLED when the cancel flag was set within
 * the lot (the parameters are unchanged in both cases). */
int trn_conv_sgd_step(trn_conv_sgd *s, const trn_dataset *ds, const size_t *idx, size_t count,
		      double lr, mech_rng *rng, acct_error *err);

/*
 * Trains n for trn_dpsgd_steps(p, train->n) steps of Poisson lots drawn
 * from rng at p->learning_rate.  A private run first builds the event it
 * spends with trn_dpsgd_event and hands it to *ret_event (may be NULL:
 * then freed), so a caller charges exactly what ran.  p->pca_components
 * must be 0 (the model takes the raw images).  Returns 0, ACCT_EINVAL,
 * ACCT_ENOMEM or ACCT_EINTERNAL (rng); a set *cancel stops it early with
 * 0 (the event still covers every step: it is charged before the run).
 */
int trn_convnet_dpsgd_train(trn_convnet *n, const trn_dpsgd_params *p, bool private,
			    const trn_dataset *train, mech_rng *rng, const atomic_bool *cancel,
			    acct_event **ret_event, acct_error *err);

/* The shape a model was built with (valid until trn_convnet_free). */
const trn_conv_spec *trn_convnet_spec(const trn_convnet *n);

/*
 * The model "cnn" of a DP-SGD job (trn_dpsgd_params' cnn fields), trained
 * by trn_dpsgd_run like the dense models: same lots, clipping to C, noise
 * and event (trn_dpsgd_event does not depend on the model), the learning
 * rate schedule and momentum; the result's model is a trn_model holding
 * the convolutional net (model file version 4), which trn_model_predict,
 * trn_model_scores, trn_model_evaluate and trn_model_info_get serve.
 */

/* "logreg", "mlp" or "cnn" (the names a dpsgd job's "model" takes; other
 * trainers' models are trn_model_kind_from_name's).  0 or -1. */
int trn_dpsgd_model_from_name(const char *name, trn_model_kind *ret);

/* "tanh" | "tempered_sigmoid" <-> trn_conv_act; _from_name returns 0 or
 * -1, _name NULL for an unknown code. */
int trn_conv_act_from_name(const char *name, trn_conv_act *ret);
const char *trn_conv_act_name(uint32_t code);

/* "float64" | "float32" <-> trn_precision, as trn_conv_act's names. */
int trn_precision_from_name(const char *name, trn_precision *ret);
const char *trn_precision_name(uint32_t code);

/*
 * The convolutional model a cnn job with parameters p trains on rows of d
 * features and num_classes classes: image_channels images of side
 * sqrt(d / image_channels), p's blocks, one dense hidden layer of
 * p->hidden[0] units (none when n_hidden is 0), its activation.  Public
 * shape only.  Returns 0 and *ret, or ACCT_EINVAL naming the field
 * (/params/image_channels when d is not that many square images).
 */
int trn_dpsgd_conv_spec(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			trn_conv_spec *ret, acct_error *err);

/* ==== end convolutional models ==== */

#endif
