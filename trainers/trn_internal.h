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
	uint32_t activation;          /* 0 none (logreg), TRN_ACT_RELU, TRN_ACT_TANH */
	uint32_t input_dim;
	uint32_t proj_dim;            /* 0: no projection */
	double *proj;                 /* input_dim x proj_dim, or NULL */
	size_t n_params;
	size_t w_off[TRN_MAX_LAYERS];
	size_t b_off[TRN_MAX_LAYERS];
	double *params;
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
 * above; activation 0 only when n_layers == 1.  No projection.
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
} trn__workspace;

int trn__workspace_new(const trn_model *m, size_t cap, trn__workspace **ret, acct_error *err);
void trn__workspace_free(trn__workspace *ws);

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
 * through the model's projection if it has one. */
void trn__model_load_rows(const trn_model *m, trn__workspace *ws, const double *x,
			  size_t start, size_t B);

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

/* Initialises weights (He for relu, Glorot for tanh, zero for logreg) and
 * zero biases from rng's stream. */
int trn__model_init(trn_model *m, mech_rng *rng, acct_error *err);

/*
 * The label column a label_em job hands to the label EM: y[i] == 1 gives 1,
 * anything else (class 0 or TRN_NO_CLASS) 0, so that neighbouring tables
 * (one label changed) give columns that differ in at most one position.
 */
void trn__label_em_column(const trn_dataset *ds, uint8_t *ret_column);

#endif
