/*
 * trn_internal.h: names shared inside trainers/ (and by its unit tests).
 * Nothing here is part of the public API.
 */
#ifndef TRN_INTERNAL_H
#define TRN_INTERNAL_H

#include "trn.h"

/*
 * A model: optional projection V (input_dim x proj_dim), then n_layers dense
 * layers.  dims[0] is the width fed to the first dense layer (proj_dim when
 * projecting, else input_dim); dims[n_layers] is the number of classes.
 * All weights and biases live in one array `params` so that noise, updates
 * and serialisation treat them as one vector: layer l (0-based) has W_l at
 * params + w_off[l] (dims[l+1] x dims[l], row-major) and b_l at
 * params + b_off[l] (dims[l+1]).
 */
struct trn_model {
	uint32_t n_layers;
	uint32_t dims[TRN_MAX_LAYERS + 1];
	uint32_t activation;          /* 0 none (logreg), TRN_ACT_RELU, TRN_ACT_TANH:
	                                 the hidden layers' code a DP-SGD model was
	                                 built with (initialisation reads it) */
	uint32_t layer_act[TRN_MAX_LAYERS]; /* code of each layer; the last is identity */
	uint32_t input_rule;          /* trn_input_rule */
	double input_scale;           /* B of the rule */
	uint32_t input_dim;
	uint32_t proj_dim;            /* 0: no projection */
	double *proj;                 /* input_dim x proj_dim, or NULL */
	size_t n_params;
	size_t w_off[TRN_MAX_LAYERS];
	size_t b_off[TRN_MAX_LAYERS];
	double *params;
	/* The feature transform (trn_feature_rule) from a raw row of input_dim
	 * to dims[0]; with it, proj_dim is 0 and the input rule none. */
	uint32_t feature_rule;
	uint32_t scatter_rows, scatter_cols, scatter_groups;
	trn_scatter *scatter;         /* the bank, owned; NULL without the rule */
	/* A convolutional model (version 4): the net, owned, which holds every
	 * weight (params is then NULL, n_params the net's count); n_layers,
	 * dims and layer_act describe its dense layers. */
	trn_convnet *conv;
};

/*
 * The bounds trn__model_new checks, without allocating: 1 to TRN_MAX_LAYERS
 * layers, widths within DPG_MAX_FEATURES / DPG_MAX_HIDDEN_UNITS, at least
 * two outputs and at most DPG_MAX_MODEL_PARAMS parameters.  Returns 0 or
 * ACCT_EINVAL with the field at fault.
 */
int trn__model_check(uint32_t n_layers, const uint32_t *widths, uint32_t activation,
		     acct_error *err);

/*
 * Allocates a model with zero parameters.  widths[0..n_layers] as dims
 * above; activation 0 only when n_layers == 1; every hidden layer gets
 * `activation`, the last identity.  No projection, input rule none.
 * Gradient passes support identity, relu, tanh and sigmoid layers (a cos
 * layer's derivative needs its pre-activation, which is not kept).
 */
int trn__model_new(uint32_t n_layers, const uint32_t *widths, uint32_t activation,
		   trn_model **ret, acct_error *err);

/*
 * Workspace for forward/backward passes on chunks of at most `cap` rows,
 * allocated once per job (GSL style), reused by every step.
 */
typedef struct trn__workspace {
	size_t cap;
	uint32_t n_layers;
	double *act[TRN_MAX_LAYERS + 1];  /* act[0] inputs; act[l] outputs of layer l */
	double *delta[TRN_MAX_LAYERS];    /* dloss_i / dz_l, cap x dims[l+1] */
	double *sq[TRN_MAX_LAYERS];       /* per-example squared gradient norm per layer */
	double *scale;                    /* cap x n_layers clipping factors */
	double *loss;                     /* per-example loss */
	trn_scatter_workspace *scatter;   /* models with a feature transform */
} trn__workspace;

int trn__workspace_new(const trn_model *m, size_t cap, trn__workspace **ret, acct_error *err);
void trn__workspace_free(trn__workspace *ws);

/* Unit roundoff of binary64, the u of the clipping margin below. */
#define TRN_F64_UNIT_ROUNDOFF 0x1p-53

/* M = 1 + (n + 8) u: bounds the rounding of a squared norm computed with
 * relative error at most gamma_n (Higham eq. 3.5), of its square root, of
 * the clipping factor and of the scaled vector (docs/training.md,
 * "Clipping in floating point"). */
double trn__clip_margin(size_t n);

/* The clipping factor min(1, C / (norm M)), M = trn__clip_margin(n)
 * (Abadi et al. 2016, Algorithm 1, with the margin); C <= 0: 1. */
double trn__clip_factor(double norm, double clip_norm, size_t n);

/* Below this largest entry a vector's squares are summed scaled up: at or
 * above it, the sum is at least 2^-800 and what its squares lose to
 * underflow (2^-1075 each) is far below one rounding of it. */
#define TRN_UPSCALE_BELOW 0x1p-400

/*
 * The exponent e >= 0 that brings the largest |v_k| into [1, 2) when it is
 * below TRN_UPSCALE_BELOW (0 otherwise, and for a vector of zeros): scaled
 * by 2^e, the squares of a vector of tiny entries do not underflow, and
 * 2^e v is exact (docs/training.md, "Underflow").
 */
int trn__upscale_exponent(const double *v, size_t n);

/* v *= 2^e for e in [-1074, 1074] in two exact steps (2^1074 is not a
 * double); exact whenever no entry overflows or leaves the normal range
 * (an upscale followed by the same downscale gives v back bit for bit). */
void trn__scale_pow2(double *v, size_t n, int e);

/* sum_k (2^e v_k)^2, e from trn__upscale_exponent(v, n) in *ret_e. */
double trn__sqnorm_upscaled(const double *v, size_t n, int *ret_e);

/* A squared norm computed at scale 2^(2e) brought back: s 2^(-2e), and
 * DBL_MIN when that is below it (an upper bound, since the exact value is
 * then below DBL_MIN too; such a norm, under 2^-511, is far below any
 * accepted clip_norm). */
double trn__sqnorm_unscale(double s, int e);

/* How a chunk's per-example gradients are combined into the sum. */
typedef struct trn__clip {
	bool enabled;           /* false: plain sum (non-private baseline) */
	trn_clipping mode;
	double clip_norm;       /* C */
} trn__clip;

/*
 * Forward and backward pass on the B <= ws->cap rows already copied into
 * ws->act[0] with labels y.  Adds to grad (n_params, layout of m->params)
 * the sum over the rows of their per-example gradients, each clipped per
 * `clip` (Abadi et al. Algorithm 1, "clip gradient"), using the norm trick:
 * ||g_i^l||^2 = ||delta_i^l||^2 (||a_i^{l-1}||^2 + 1), then
 * grad_W += (diag(c) Delta)^T A.  If ret_norms is not NULL it receives the
 * B unclipped per-example global gradient norms.  *ret_loss_sum (may be
 * NULL) receives the summed cross-entropy, *ret_correct (may be NULL) the
 * number of rows predicted right.
 */
void trn__chunk_gradient(const trn_model *m, trn__workspace *ws, const uint32_t *y, size_t B,
			 const trn__clip *clip, double *grad, double *ret_norms,
			 double *ret_loss_sum, size_t *ret_correct);

/* Forward pass only on B rows in ws->act[0]: summed loss and correct count. */
void trn__chunk_forward(const trn_model *m, trn__workspace *ws, const uint32_t *y, size_t B,
			double *ret_loss_sum, size_t *ret_correct);

/*
 * The hook for losses other than softmax cross-entropy.  trn__chunk_logits
 * runs the dense layers on the B <= ws->cap rows in ws->act[0] and leaves
 * the raw logits (B x classes) in ws->act[n_layers].  The caller then
 * writes d loss_i / d logits_i into ws->delta[n_layers - 1] (B x classes)
 * and calls trn__chunk_backprop, which back-propagates them through the
 * hidden layers and adds the summed (unclipped) gradient to grad.
 */
void trn__chunk_logits(const trn_model *m, trn__workspace *ws, size_t B);
void trn__chunk_backprop(const trn_model *m, trn__workspace *ws, size_t B, double *grad);

/* Copies rows [start, start+B) of a raw n x input_dim table into ws->act[0],
 * through the model's input rule, projection or feature transform.
 * Returns 0, or ACCT_ENUMERIC when the transform's FFT failed. */
int trn__model_load_rows(const trn_model *m, trn__workspace *ws, const double *x, size_t start,
			 size_t B);

/* Accuracy and mean cross-entropy of a model on n rows already mapped to
 * its first layer's inputs (n x dims[0]: projected, or feature-transformed
 * by trn__features_rows), labels y; rows labelled TRN_NO_CLASS are not
 * scored (NaN when none has a class).  Either output may be NULL.
 * Returns 0, ACCT_EINVAL (a label past the classes) or ACCT_ENOMEM. */
int trn__model_evaluate_inputs(const trn_model *m, const double *x, const uint32_t *y,
			       size_t n, double *ret_accuracy, double *ret_loss,
			       acct_error *err);

/* ---- feature transforms (trn_dpsgd_features.c, trn_scatter.c) ---- */

/*
 * Gives a model the scatter-then-group-norm transform for rows x cols
 * images (J = TRN_DPSGD_SCATTER_J, L = TRN_DPSGD_SCATTER_L) with `groups`
 * groups: builds the bank and sets the fields; dims[0] must already be the
 * transform's output width.  Returns 0, or ACCT_EINVAL / ACCT_ENOMEM.
 */
int trn__model_set_scatter(trn_model *m, uint32_t rows, uint32_t cols, uint32_t groups,
			   acct_error *err);

/*
 * The scattering of one row x into out, then (groups > 0) group
 * normalisation of its channels (trn_scatter.c).  A row whose features
 * are not all finite maps to zeros.  Returns 0 or ACCT_ENUMERIC when an
 * FFT failed.
 */
int trn__scatter_row(const trn_scatter *s, uint32_t groups, const double *x, double *out,
		     trn_scatter_workspace *w);

/* trn__scatter_row on every row of in into out (n rows of the bank's
 * output width, allocated by the caller), in two threads.  Returns 0,
 * ACCT_ENOMEM or ACCT_ENUMERIC. */
int trn__scatter_map_rows(const trn_scatter *s, uint32_t groups, const trn_dataset *in,
			  trn_dataset *out);

/*
 * Group normalisation of one row's feature maps h (channels x plane,
 * channel-major), in place, without affine parameters (Wu and He, "Group
 * Normalization", ECCV 2018, eq. 1-3 with S_i the C/G channels of i's
 * group): each group of channels/groups consecutive channels becomes
 * (h - mu) / sqrt(var + TRN_GROUPNORM_EPS), mu and var the mean and biased
 * variance of that group's values.  groups divides channels.
 */
#define TRN_GROUPNORM_EPS 1e-5
void trn__group_normalise(double *h, size_t channels, size_t plane, size_t groups);

/* Maps B raw rows (B x m->input_dim) through the model's feature transform
 * into out (B x m->dims[0]) with the workspace w.  Returns 0, or
 * ACCT_ENUMERIC when an FFT failed. */
int trn__features_rows(const trn_model *m, trn_scatter_workspace *w, const double *x,
		       size_t B, double *out);

/*
 * The squared norm of one example's gradient of a convolution as a product
 * (trn_conv.c): errors dA (C_out x T), unfolded input U (T x D); weight
 * part ||dA U||_F^2 by `mode`, plus the bias part ||dA 1||^2.  scratch_a and
 * scratch_b hold max(T^2, C_out D) values each.
 */
double trn__conv_grad_sqnorm(const double *da, const double *u, size_t c_out, size_t t,
			     size_t d, trn_conv_norm_mode mode, double *scratch_a,
			     double *scratch_b);

/*
 * E, the absolute error bound of trn__conv_grad_sqnorm in either mode
 * (docs/training.md, "Clipping in floating point"): the exact
 * ||dA U||_F^2 + ||dA 1||^2 is at most the computed value plus
 * E = 8 k u ||dA||^2 (||U||^2 + T), k = (C_out + T)(D + T) + C_out + T + 2.
 * The products have terms of both signs, so no relative bound holds.
 */
double trn__conv_sqnorm_error(const double *da, const double *u, size_t c_out, size_t t,
			      size_t d);

/* ---- convolutional models served as trn_model (trn_model_conv.c) ---- */

/* The bounds trn_convnet_new checks (trn_conv_spec's fields, the parameter
 * count), without allocating; the count in *ret_params (may be NULL). */
int trn__conv_spec_check(const trn_conv_spec *spec, size_t *ret_params, acct_error *err);

/* A net sharing n's weights (borrowed: n must outlive it, and they must not
 * change while it is used) with scratch of its own, so that a const model
 * can be evaluated, and from several threads.  0, ACCT_EINVAL or ENOMEM. */
int trn__convnet_view(const trn_convnet *n, trn_convnet **ret, acct_error *err);

/* The softmax of one example's logits into scores[0..classes). */
void trn__convnet_scores(trn_convnet *n, const double *x, double *scores);

/* Wraps a trained net as a model (which then owns it; freed by
 * trn_model_free).  On failure the net is freed.  0 or ACCT_ENOMEM. */
int trn__model_from_convnet(trn_convnet *net, trn_model **ret, acct_error *err);

/* The scores (softmax) of n raw rows of a convolutional model into scores
 * (n x classes).  0, or ACCT_ENOMEM. */
int trn__conv_model_scores(const trn_model *m, const double *x, size_t n, double *scores,
			   acct_error *err);

/* trn_model_evaluate of a convolutional model (its shape checked); rows
 * labelled TRN_NO_CLASS are not scored, as there. */
int trn__conv_model_evaluate(const trn_model *m, const trn_dataset *ds, double *ret_accuracy,
			     double *ret_loss, acct_error *err);

/* trn_model_serialize and trn_model_deserialize for version 4. */
#define TRN__MODEL_CONV_VERSION 4u
int trn__conv_model_serialize(const trn_model *m, uint8_t **ret_buf, size_t *ret_len,
			      acct_error *err);
int trn__conv_model_deserialize(const uint8_t *buf, size_t len, trn_model **ret,
				acct_error *err);

/* The checks a cnn job's parameters take beyond trn_dpsgd_params_validate's
 * shared ones (trn_conv_params.c).  0 or ACCT_EINVAL naming the field. */
int trn__conv_params_check(const trn_dpsgd_params *p, acct_error *err);

/* "precision" (trn_conv_params.c): float64, or float32 for a cnn.  0 or
 * ACCT_EINVAL naming it. */
int trn__precision_check(const trn_dpsgd_params *p, acct_error *err);

/* Little-endian fields of the model file (trn_model_bytes.c). */
uint8_t *trn__put_u32(uint8_t *p, uint32_t v);
uint8_t *trn__put_f64(uint8_t *p, double x);
uint32_t trn__get_u32(const uint8_t *p);
double trn__get_f64(const uint8_t *p);

/* Cross-entropy loss of one example (reference for finite differences). */
double trn__example_loss(const trn_model *m, trn__workspace *ws, const double *x, uint32_t y);

/*
 * Poisson sampling (Abadi et al. §3.1): writes into idx the indices i < n
 * whose uniform 64-bit word from rng's stream (bulk bytes in `buf`, 8*n
 * bytes) is below floor(q 2^64): P(i in lot) is exactly the double q when
 * q >= 2^-12, and at most q (never more) below that.
 */
int trn__poisson_sample(mech_rng *rng, size_t n, double q, uint64_t *buf, size_t *idx,
			size_t *ret_count);

/*
 * DP-PCA (Abadi et al. §5): the top k eigenvectors (columns of ret_v,
 * d x k row-major) of sum_i a_i a_i^T + E, a_i = x_i / ||x_i|| over the
 * first n rows of x (n x d), E symmetric with iid N(0, sigma^2) entries on
 * and above the diagonal (sigma = 0: exact PCA).
 */
int trn__dp_pca(const double *x, size_t n, size_t d, size_t k, double sigma, mech_rng *rng,
		double *ret_v, acct_error *err);

/* The rows DP-PCA stacks per rank-B update: the scratch trn__pca_gram_upper
 * takes is TRN__PCA_CHUNK_ROWS x d doubles. */
#define TRN__PCA_CHUNK_ROWS 1024u

/*
 * Adds the upper triangle (entries i <= j) of sum_i a_i a_i^T to cov (d x
 * d, row-major; the lower triangle is left as it was), a_i = x_i / ||x_i||
 * over the n rows of x, a row whose normalised norm is not within 1 taken
 * as zero: the statistic DP-PCA noises, whose L2 sensitivity under
 * add/remove is 1 (docs/training.md, "DP-PCA's sensitivity").  chunk is
 * scratch of TRN__PCA_CHUNK_ROWS x d doubles.
 */
void trn__pca_gram_upper(const double *x, size_t n, size_t d, double *chunk, double *cov);

/* Initialises weights (He for relu, Glorot for tanh, zero for logreg) and
 * zero biases from rng's stream. */
int trn__model_init(trn_model *m, mech_rng *rng, acct_error *err);

/* ---- ensemble (trn_ensemble.c), shared with its tests and benchmark ---- */

/* The factor c with which the unit_ball rule of scale B maps x to c x. */
double trn__unit_ball_factor(const double *x, size_t d, double B);

/* Losses of trn__erm_solve, as functions of the margin t. */
typedef enum trn__loss {
	TRN__LOSS_LOGISTIC = 0,  /* l(t) = log(1 + e^-t) */
	TRN__LOSS_SQ_HINGE = 1,  /* l(t) = max(0, 1 - t)^2 */
} trn__loss;

/*
 * Minimises R(w) = (1/n) sum_i [a_i l(w.u_i) + (1 - a_i) l(-w.u_i)] +
 * (lambda/2) ||w||^2 over w in R^du (u: n x du row-major, a_i in [0, 1]) by
 * Newton's method with step halving, from w = 0, until the computed
 * gradient norm is at most `tol`.  When `must_converge` is false the last
 * iterate is accepted after the iteration cap; otherwise that is
 * ACCT_EINTERNAL.  Writes w (du).  Returns 0 or a negative code.
 */
int trn__erm_solve(const double *u, size_t n, size_t du, const double *a, double lambda,
		   trn__loss loss, double tol, bool must_converge, double *w, acct_error *err);

/* The gradient stopping threshold of the released ERM. */
#define TRN__ENSEMBLE_GRAD_TOL 1e-10

/* ERM inputs of a table: u_i = (z_i, 1) / sqrt(2), z_i the unit-ball rule of
 * scale B applied to row i, so ||u_i|| <= 1.  *ret_u is n x (d+1), malloc'd. */
int trn__ensemble_inputs(const trn_dataset *ds, double B, double **ret_u, acct_error *err);

/* One party's rows for its local model: their inputs (gathered, n x du)
 * and labels. */
typedef struct trn__party_rows {
	size_t n, du;
	uint32_t num_classes;
	double *u;
	uint32_t *y;
} trn__party_rows;

/* Where a local model writes its predicted class of each auxiliary row. */
typedef struct trn__local_votes {
	const double *u_aux;   /* n_aux x du */
	size_t n_aux;
	uint32_t *cls;         /* n_aux */
} trn__local_votes;

/* Trains party j's local model (kind local_model[j mod n_local_models]) on
 * its rows and writes its votes (trn_ensemble_local.c).  A party without
 * rows votes class 0.  Returns 0, or ACCT_ENOMEM / an ERM error. */
int trn__local_train_vote(const trn_ensemble_params *p, uint32_t j, const trn__party_rows *pr,
			  trn__local_votes *lv, acct_error *err);

/* Number of ERM blocks for K classes: 1 for two, else K (one-vs-rest). */
uint32_t trn__ensemble_blocks(uint32_t num_classes);

/*
 * Trains every party's local model on its rows of `train` (inputs u_train,
 * from trn__ensemble_inputs) and adds its vote on each auxiliary row to
 * counts (n_aux x num_classes, zeroed by the caller).
 */
int trn__ensemble_votes(const trn_ensemble_params *p, const trn_dataset *train,
			const double *u_train, const uint32_t *party, const double *u_aux,
			size_t n_aux, trn_ensemble_progress_fn progress, void *progress_user,
			const atomic_bool *cancel, uint32_t *counts, acct_error *err);

/* Targets a (n x blocks, row-major) from the votes: the majority label's
 * indicator (ties to the lowest class) or the vote fractions out of M. */
void trn__ensemble_targets(trn_ensemble_algorithm algorithm, const uint32_t *counts, size_t n,
			   uint32_t num_classes, uint32_t parties, double *a);

/* The exact minimiser of every block's ERM (w: blocks x du). */
int trn__ensemble_fit(const double *u, size_t n, size_t du, const double *a, uint32_t blocks,
		      double lambda, double *w, acct_error *err);

/* Adds noise of rate beta to every block of w (in place) and builds the
 * released model: input rule unit_ball of scale B, logits of class k =
 * (w_k[0..d) . z + w_k[d]) / sqrt(2) (two classes: class 0's logit 0). */
int trn__ensemble_release(double *w, uint32_t num_classes, size_t d, double beta, double B,
			  mech_rng *rng, trn_model **ret, acct_error *err);

/*
 * The label column a label_em job hands to the label EM: y[i] == 1 gives 1,
 * anything else (class 0 or TRN_NO_CLASS) 0, so that neighbouring tables
 * (one label changed) give columns that differ in at most one position.
 */
void trn__label_em_column(const trn_dataset *ds, uint8_t *ret_column);

/*
 * The pate trainer's teachers (trn_pate_run.c): their streams and the
 * partition drawn from `rng`, each teacher trained on its part, and their
 * vote histograms on the first p->queries rows of `student` into votes
 * (queries x classes, zeroed here).  Private: for its unit tests, which
 * check the histograms' sensitivity on neighbouring tables.
 */
int trn__pate_votes(const trn_pate_params *p, const trn_dataset *train,
		    const trn_dataset *student, mech_rng *rng, double *votes, acct_error *err);

/*
 * The epochs a pate teacher or student trains on n rows in lots of `lot`
 * (already capped at n): `epochs`, or the most whose ceil(e n / lot) steps
 * stay within DPG_MAX_TRAINING_STEPS, at least 1.  A teacher's n is the
 * size of its random part of the private rows: capping where the step
 * check would refuse keeps that size from ever making it fail
 * (docs/pate.md, "A teacher's steps").
 */
uint32_t trn__pate_epochs(uint32_t epochs, uint64_t n, uint32_t lot);

/* ---- helpers every trainer shares (trn_common.c) ---- */

/* One JSON string of an enumeration and its value (>= 0). */
typedef struct trn__name {
	const char *name;
	int value;
} trn__name;

#define TRN__COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The value `name` has in table[0..n), or -1 when it is NULL or absent. */
int trn__name_lookup(const trn__name *table, size_t n, const char *name);

/* x is finite and in [lo, hi]. */
bool trn__in_range(double x, double lo, double hi);

/*
 * The checks most trainer parameters take, first error wins: a count in
 * [lo, hi], a real in (0, hi].  `where` is the field's JSON pointer; the
 * message names its last segment ("epochs must be 1 to 1000").  Return 0
 * or ACCT_EINVAL.
 */
int trn__check_count(uint32_t v, uint32_t lo, uint32_t hi, const char *where,
		     acct_error *err);
int trn__check_positive(double x, double hi, const char *where, acct_error *err);

/* The hidden layers of an mlp: 1 to DPG_MAX_HIDDEN_LAYERS of them, each 1
 * to DPG_MAX_HIDDEN_UNITS wide, activated by relu or tanh. */
int trn__check_hidden(uint32_t n_hidden, const uint32_t *hidden, uint32_t activation,
		      acct_error *err);

/* The widths of a dense model: in, the hidden layers, out.  Returns the
 * number of layers, n_hidden + 1. */
uint32_t trn__dense_widths(uint32_t n_hidden, const uint32_t *hidden, uint32_t in,
			   uint32_t out, uint32_t widths[TRN_MAX_LAYERS + 1]);

/* Seconds on the monotonic clock, for the run times a result reports. */
double trn__now_seconds(void);

/* ACCT_ENOMEM in err, for a run that could not allocate its buffers. */
int trn__nomem(acct_error *err);

/* 0 when v[0 .. n-1] are all finite, else ACCT_EINVAL at /model/params
 * naming the first that is not ("<what> <i> is not finite"): a model's
 * weights, as a file or a caller hands them over. */
int trn__check_finite(const double *v, size_t n, const char *what, acct_error *err);

/* The index of the largest of s[0..k), k >= 1; ties go to the lowest. */
uint32_t trn__argmax(const double *s, uint32_t k);

/* The event of a run made of parts[0..n) into *ret: their composition
 * (acct_event_composed), a lone part as itself, NULL for none.  Takes the
 * parts in every case.  Returns 0, or -1 with *ret untouched when a part is
 * NULL (its constructor ran out of memory) or the composition could not be
 * made. */
int trn__event_of_parts(acct_event *const *parts, size_t n, acct_event **ret);

#endif
