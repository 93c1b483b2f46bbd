/*
 * trn_conv_internal.h: the layout of a convolutional model (trn_conv.c),
 * shared with its float32 gradients (trn_conv_f32.c), the stepper
 * (trn_conv_sgd.c) and the unit tests.  Nothing here is public.
 */
#ifndef TRN_CONV_INTERNAL_H
#define TRN_CONV_INTERNAL_H

#include <math.h>

#include "trn_internal.h"

/* Layers: n_conv convolutions, then at most two dense layers. */
#define CONV_MAX_DENSE 2

struct conv_layer {
	size_t c_in, c_out, k, side; /* input c_in x side x side; 'same' padding */
	size_t t, d;                 /* T = side^2 positions, D = c_in k^2 */
	size_t w_off, b_off;
};

struct dense_layer {
	size_t in, out, w_off, b_off;
};

struct trn_convnet {
	trn_conv_spec spec;
	struct conv_layer conv[TRN_CONV_MAX_CONV];
	struct dense_layer dense[CONV_MAX_DENSE];
	size_t n_dense, n_params;
	double *params;
	bool params_borrowed;        /* a view's: another model's, not freed */
	/* One example's scratch: per conv layer its input, unfolded input,
	 * activations (after the nonlinearity) and their errors; the dense
	 * layers' inputs and errors; Gram matrices or a materialised G. */
	double *in[TRN_CONV_MAX_CONV + 1], *u[TRN_CONV_MAX_CONV], *a[TRN_CONV_MAX_CONV];
	double *da[TRN_CONV_MAX_CONV], *du[TRN_CONV_MAX_CONV], *din[TRN_CONV_MAX_CONV + 1];
	double *h[CONV_MAX_DENSE + 1], *dh[CONV_MAX_DENSE + 1];
	double *gram_a, *gram_b;
	double *scratch;             /* the one allocation they all point into */
};

/* The activations, shared by both precisions (which evaluate them in
 * double), inline so that the float64 passes call them as before. */

/* f(z): tanh, or the tempered sigmoid s / (1 + e^(-T z)) - o (Papernot et
 * al., "Tempered Sigmoid Activations for Deep Learning with Differential
 * Privacy", AAAI 2021, eq. 4; s = 2, T = 2, o = 1 is tanh). */
static inline double trn__conv_act(const trn_conv_spec *s, double z)
{
	if (s->act == TRN_CONV_TANH)
		return tanh(z);
	return s->ts_scale / (1.0 + exp(-s->ts_temp * z)) - s->ts_offset;
}

/* f'(z) through a = f(z): 1 - a^2 for tanh; for the tempered sigmoid,
 * with g = (a + o) / s = sigma(T z), f' = s T g (1 - g). */
static inline double trn__conv_act_deriv(const trn_conv_spec *s, double a)
{
	double g;

	if (s->act == TRN_CONV_TANH)
		return 1.0 - a * a;
	g = (a + s->ts_offset) / s->ts_scale;
	return s->ts_scale * s->ts_temp * g * (1.0 - g);
}

/*
 * One example x (label y) of the float64 passes: adds c g to grad, g its
 * gradient and c = min(1, C / (N M)) with N the bound on ||g|| that covers
 * the rounding of its computed norm (ghost or materialised by `mode`) and
 * M = trn__clip_margin of the net's terms (docs/training.md, "Clipping in
 * floating point"); clip_norm <= 0: c = 1; a bound that is not finite: c =
 * 0 and nothing added.  *ret_norm gets the computed ||g||, *ret_factor c,
 * *ret_loss the loss (each may be NULL).  0, or ACCT_EINVAL when y is not
 * a class (nothing added).
 */
int trn__convnet_example(trn_convnet *n, const double *x, uint32_t y, double clip_norm,
			 trn_conv_norm_mode mode, double *grad, double *ret_norm, double *ret_factor,
			 double *ret_loss);

/* ---- float32 per-example gradients (trn_conv_f32.c) ---- */

/*
 * A float32 workspace for net `n` (borrowed: it must outlive the
 * workspace, and keep its shape): a float copy of its weights, one
 * example's activations and errors in float, and that example's whole
 * gradient in double as it is added to a sum.  0, or ACCT_ENOMEM.
 */
typedef struct trn_conv_f32 trn_conv_f32;
int trn__conv_f32_new(const trn_convnet *n, trn_conv_f32 **ret, acct_error *err);
void trn__conv_f32_free(trn_conv_f32 *w);

/* Rounds the net's current (double) weights to the workspace's float
 * copy; every example until the next call is computed with them. */
void trn__conv_f32_load_weights(trn_conv_f32 *w);

/*
 * One example x (the net's input width, label y): its forward and
 * backward pass in float32 with the weights of the last load, its whole
 * gradient g realised as a double vector (docs/training.md, "float32"),
 * ||g|| computed in double on that vector, and c g added to grad with
 * c = min(1, C / (||g|| M)), M = trn__clip_margin(n_params); clip_norm
 * <= 0: c = 1.  An example whose norm is not finite adds nothing.
 * *ret_norm (may be NULL) gets ||g||, *ret_loss (may be NULL) its loss.
 * 0, or ACCT_EINVAL when y is not a class (nothing added).
 */
int trn__conv_f32_example(trn_conv_f32 *w, const double *x, uint32_t y, double clip_norm,
			  double *grad, double *ret_norm, double *ret_loss);

#endif
