/*
 * trn_conv_f32.c: the float32 option of a convolutional model's DP-SGD
 * gradients ("precision": "float32").  The forward and backward passes of
 * one example (im2col, the convolutions' and dense layers' products,
 * pooling, the errors) run in float32 with a float copy of the weights,
 * whose products (sgemm) take half the memory traffic and twice the SIMD
 * lanes of dgemm.  What privacy rests on does not: the example's whole
 * gradient is realised as one double vector g (each float32 entry, a
 * conv bias as the double sum of its float errors, a dense weight as the
 * exact double product of two floats), ||g|| is computed in double on
 * that very vector, and c g with c = min(1, C / (||g|| M)) is added to the
 * lot's double sum; M = 1 + (n + 8) u covers the rounding of the norm, of
 * c and of c g, so that ||c g|| <= C holds for the vector actually added
 * (docs/training.md, "The float32 option", has the bound).
 *
 * Ghost norms are not used here: a ghost norm computed in float32 bounds
 * the float32 Gram product, not the vector added, and this per-example
 * design pays the product G_i = D_i U_i once anyway to accumulate it, so
 * materialising G_i costs nothing more than the accumulation (the float64
 * path computes it twice when it materialises, once for the norm and once
 * scaled).  The model keeps its weights, and its file, in float64.
 */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_conv_internal.h"

struct trn_conv_f32 {
	const trn_convnet *net;
	float *params;               /* the net's weights rounded to float */
	/* Per conv layer, the source of each entry of the unfolded input U
	 * (T x D, row-major) in the layer's input, or -1 for padding (below
	 * 2^24: at most 256 channels of 256 x 256). */
	int32_t *patch[TRN_CONV_MAX_CONV];
	/* One example's activations and errors, laid out as the float64
	 * net's (trn_conv_internal.h); g one conv layer's weight gradient. */
	float *in[TRN_CONV_MAX_CONV + 1], *u[TRN_CONV_MAX_CONV], *a[TRN_CONV_MAX_CONV];
	float *da[TRN_CONV_MAX_CONV], *du[TRN_CONV_MAX_CONV], *din[TRN_CONV_MAX_CONV + 1];
	float *h[CONV_MAX_DENSE + 1], *dh[CONV_MAX_DENSE + 1];
	float *g;
	double *grad;                /* the example's gradient g, n_params */
	float *fscratch;             /* the floats above, one allocation */
	int32_t *iscratch;           /* the patch maps, one allocation */
};

void trn__conv_f32_free(trn_conv_f32 *w)
{
	if (!w)
		return;
	free(w->params);
	free(w->fscratch);
	free(w->iscratch);
	free(w->grad);
	free(w);
}

/* Points the float buffers into base (NULL: none) and counts them. */
static size_t f32_carve(trn_conv_f32 *w, float *base)
{
	const trn_convnet *n = w->net;
	size_t off = 0, g = 0;
	float **slots[6 * TRN_CONV_MAX_CONV + 2 * (CONV_MAX_DENSE + 1) + 1];
	size_t sizes[sizeof(slots) / sizeof(slots[0])], k = 0;

	for (uint32_t l = 0; l < n->spec.n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];
		float **p[6] = {&w->in[l], &w->din[l], &w->u[l], &w->du[l], &w->a[l], &w->da[l]};
		size_t s[6] = {cl->c_in * cl->t, cl->c_in * cl->t, cl->t * cl->d,
			       cl->t * cl->d, cl->c_out * cl->t, cl->c_out * cl->t};

		for (int i = 0; i < 6; i++, k++) {
			slots[k] = p[i];
			sizes[k] = s[i];
		}
		g = cl->c_out * cl->d > g ? cl->c_out * cl->d : g;
	}
	for (size_t l = 0; l <= n->n_dense; l++) {
		size_t width = l < n->n_dense ? n->dense[l].in : n->spec.classes;

		slots[k] = &w->h[l];
		sizes[k++] = width;
		slots[k] = &w->dh[l];
		sizes[k++] = width;
	}
	slots[k] = &w->g;
	sizes[k++] = g;
	for (size_t i = 0; i < k; i++) {
		*slots[i] = base ? base + off : NULL;
		off += sizes[i];
	}
	return off;
}

/* Fills each conv layer's patch map: entry (t, ch k^2 + i k + j) of U is
 * pixel (r + i - p, c + j - p) of channel ch around position t = (r, c). */
static void f32_patch_maps(trn_conv_f32 *w, int32_t *base)
{
	const trn_convnet *n = w->net;

	for (uint32_t l = 0; l < n->spec.n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];
		long side = (long)cl->side, k = (long)cl->k, p = k / 2;
		int32_t *m = base;

		w->patch[l] = base;
		base += cl->t * cl->d;
		for (long t = 0; t < side * side; t++)
			for (long ch = 0; ch < (long)cl->c_in; ch++)
				for (long ij = 0; ij < k * k; ij++) {
					long rr = t / side + ij / k - p, cc = t % side + ij % k - p;

					*m++ = rr < 0 || rr >= side || cc < 0 || cc >= side
						       ? -1
						       : (int32_t)(ch * side * side + rr * side + cc);
				}
	}
}

int trn__conv_f32_new(const trn_convnet *n, trn_conv_f32 **ret, acct_error *err)
{
	trn_conv_f32 *w = calloc(1, sizeof(*w));
	size_t maps = 0;

	if (!w)
		return trn__nomem(err);
	w->net = n;
	for (uint32_t l = 0; l < n->spec.n_conv; l++)
		maps += n->conv[l].t * n->conv[l].d;
	w->params = malloc(n->n_params * sizeof(float));
	w->grad = malloc(n->n_params * sizeof(double));
	w->fscratch = calloc(f32_carve(w, NULL), sizeof(float));
	w->iscratch = malloc(maps * sizeof(int32_t));
	if (!w->params || !w->grad || !w->fscratch || !w->iscratch) {
		trn__conv_f32_free(w);
		return trn__nomem(err);
	}
	f32_carve(w, w->fscratch);
	f32_patch_maps(w, w->iscratch);
	trn__conv_f32_load_weights(w);
	*ret = w;
	return 0;
}

void trn__conv_f32_load_weights(trn_conv_f32 *w)
{
	for (size_t i = 0; i < w->net->n_params; i++)
		w->params[i] = (float)w->net->params[i];
}

/* 2 x 2 average pooling of c channels of side x side (side even): with the
 * channels stacked, output row R averages input rows 2R and 2R + 1. */
static void f32_pool(const float *a, size_t c, size_t side, float *out)
{
	size_t half = side / 2;

	for (size_t r = 0; r < c * half; r++)
		for (size_t q = 0; q < half; q++) {
			const float *p = a + 2 * r * side + 2 * q;

			out[r * half + q] = 0.25f * (p[0] + p[1] + p[side] + p[side + 1]);
		}
}

/* Forward pass of one example in float32; leaves the softmax in
 * h[n_dense] and returns the cross-entropy of class y (in double). */
static double f32_forward(trn_conv_f32 *w, const double *x, uint32_t y)
{
	const trn_convnet *n = w->net;
	const trn_conv_spec *s = &n->spec;
	float *z;
	double mx, zy, sum = 0.0, e[DPG_MAX_CLASSES];

	for (size_t i = 0; i < n->conv[0].c_in * n->conv[0].t; i++)
		w->in[0][i] = (float)x[i];
	for (uint32_t l = 0; l < s->n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];
		const float *bias = w->params + cl->b_off;

		for (size_t i = 0; i < cl->t * cl->d; i++)
			w->u[l][i] = w->patch[l][i] < 0 ? 0.0f : w->in[l][w->patch[l][i]];
		/* A (C_out x T) = W (C_out x D) U^T, plus the bias. */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)cl->c_out, (int)cl->t,
			    (int)cl->d, 1.0f, w->params + cl->w_off, (int)cl->d, w->u[l], (int)cl->d,
			    0.0f, w->a[l], (int)cl->t);
		for (size_t i = 0; i < cl->c_out * cl->t; i++)
			w->a[l][i] = (float)trn__conv_act(s, (double)(w->a[l][i] + bias[i / cl->t]));
		f32_pool(w->a[l], cl->c_out, cl->side, l + 1 < s->n_conv ? w->in[l + 1] : w->h[0]);
	}
	for (size_t l = 0; l < n->n_dense; l++) {
		const struct dense_layer *dl = &n->dense[l];

		memcpy(w->h[l + 1], w->params + dl->b_off, dl->out * sizeof(float));
		cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)dl->out, (int)dl->in, 1.0f,
			    w->params + dl->w_off, (int)dl->in, w->h[l], 1, 1.0f, w->h[l + 1], 1);
		for (size_t j = 0; l + 1 < n->n_dense && j < dl->out; j++)
			w->h[l + 1][j] = (float)trn__conv_act(s, (double)w->h[l + 1][j]);
	}
	/* The softmax in double, rounded once to float; the loss
	 * log(sum_j e^(z_j - mx)) - (z_y - mx) never takes the log of 0. */
	z = w->h[n->n_dense];
	mx = z[0];
	for (size_t j = 1; j < s->classes; j++)
		mx = z[j] > mx ? z[j] : mx;
	zy = (double)z[y] - mx;
	for (size_t j = 0; j < s->classes; j++)
		sum += e[j] = exp((double)z[j] - mx);
	for (size_t j = 0; j < s->classes; j++)
		z[j] = (float)(e[j] / sum);
	return log(sum) - zy;
}

/* Back-propagates one example's errors in float32 (dh[l] at dense layer
 * l's pre-activation output, da[l] at conv layer l's pre-activation), as
 * trn_conv.c's backward pass does in double, without any norm. */
static void f32_backward(trn_conv_f32 *w, uint32_t y)
{
	const trn_convnet *n = w->net;
	const trn_conv_spec *s = &n->spec;

	memcpy(w->dh[n->n_dense], w->h[n->n_dense], s->classes * sizeof(float));
	w->dh[n->n_dense][y] -= 1.0f;
	for (size_t l = n->n_dense; l-- > 0;) {
		const struct dense_layer *dl = &n->dense[l];

		cblas_sgemv(CblasRowMajor, CblasTrans, (int)dl->out, (int)dl->in, 1.0f,
			    w->params + dl->w_off, (int)dl->in, w->dh[l + 1], 1, 0.0f, w->dh[l], 1);
		for (size_t j = 0; l > 0 && j < dl->in; j++)
			w->dh[l][j] *= (float)trn__conv_act_deriv(s, (double)w->h[l][j]);
	}
	for (uint32_t l = s->n_conv; l-- > 0;) {
		const struct conv_layer *cl = &n->conv[l];
		const float *dpool = l + 1 < s->n_conv ? w->din[l + 1] : w->dh[0];
		size_t half = cl->side / 2;

		/* The pooling's adjoint, then the activation's derivative. */
		for (size_t r = 0; r < cl->c_out * cl->side; r++)
			for (size_t q = 0; q < cl->side; q++)
				w->da[l][r * cl->side + q] =
					0.25f * dpool[(r / 2) * half + q / 2] *
					(float)trn__conv_act_deriv(s, (double)w->a[l][r * cl->side + q]);
		if (l == 0)
			break;
		/* dU (T x D) = dA^T (T x C_out) W (C_out x D), added back to the
		 * pixels U was gathered from. */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cl->t, (int)cl->d,
			    (int)cl->c_out, 1.0f, w->da[l], (int)cl->t, w->params + cl->w_off,
			    (int)cl->d, 0.0f, w->du[l], (int)cl->d);
		memset(w->din[l], 0, cl->c_in * cl->t * sizeof(float));
		for (size_t i = 0; i < cl->t * cl->d; i++)
			if (w->patch[l][i] >= 0)
				w->din[l][w->patch[l][i]] += w->du[l][i];
	}
}

/* The example's whole gradient as the double vector grad that is added:
 * a conv weight is its float32 entry of G = dA U (sgemm), a conv bias the
 * double sum of its float errors, a dense weight the product of two
 * floats (exact in double), a dense bias its float error. */
static void f32_realise(trn_conv_f32 *w)
{
	const trn_convnet *n = w->net;

	for (uint32_t l = 0; l < n->spec.n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)cl->c_out, (int)cl->d,
			    (int)cl->t, 1.0f, w->da[l], (int)cl->t, w->u[l], (int)cl->d, 0.0f, w->g,
			    (int)cl->d);
		for (size_t i = 0; i < cl->c_out * cl->d; i++)
			w->grad[cl->w_off + i] = (double)w->g[i];
		for (size_t o = 0; o < cl->c_out; o++) {
			double b = 0.0;

			for (size_t p = 0; p < cl->t; p++)
				b += (double)w->da[l][o * cl->t + p];
			w->grad[cl->b_off + o] = b;
		}
	}
	for (size_t l = 0; l < n->n_dense; l++) {
		const struct dense_layer *dl = &n->dense[l];

		for (size_t j = 0; j < dl->out; j++) {
			double *row = w->grad + dl->w_off + j * dl->in, e = (double)w->dh[l + 1][j];

			for (size_t k = 0; k < dl->in; k++)
				row[k] = e * (double)w->h[l][k];
			w->grad[dl->b_off + j] = e;
		}
	}
}

int trn__conv_f32_example(trn_conv_f32 *w, const double *x, uint32_t y, double clip_norm,
			  double *grad, double *ret_norm, double *ret_loss)
{
	size_t np = w->net->n_params;
	double loss, norm;

	if (y >= w->net->spec.classes)
		return ACCT_EINVAL;
	loss = f32_forward(w, x, y);
	f32_backward(w, y);
	f32_realise(w);
	norm = sqrt(cblas_ddot((int)np, w->grad, 1, w->grad, 1));
	if (ret_norm)
		*ret_norm = norm;
	if (ret_loss)
		*ret_loss = loss;
	/* An example whose norm is not finite contributes nothing. */
	if (isfinite(norm))
		cblas_daxpy((int)np, trn__clip_factor(norm, clip_norm, np), w->grad, 1,
			    grad, 1);
	return 0;
}
