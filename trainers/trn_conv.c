/*
 * trn_conv.c: small convolutional classifiers for DP-SGD and their
 * per-example clipped gradients: [conv -> tanh or tempered sigmoid -> 2x2
 * average pooling] x n, then dense layers, softmax cross-entropy.
 *
 * DP-SGD needs each example's gradient norm.  For a convolution written as
 * a product (im2col), example i's weight gradient is G_i = D_i^T U_i with
 * D_i the T x C_out output errors and U_i the T x (C_in k^2) unfolded input,
 * so ||G_i||_F^2 = <D_i D_i^T, U_i U_i^T>_F: two T x T Gram matrices, no
 * per-example gradient ("ghost norm": Lee and Kifer, "Scaling up
 * Differentially Private Deep Learning with Fast Per-Example Gradient
 * Clipping", PoPETs 2021; Li et al. 2022; Bu et al., "Scalable and
 * Efficient Training of Large Convolutional Neural Networks with
 * Differential Privacy", NeurIPS 2022, eq. 2.3).  It costs O(T^2 (C_out +
 * D)) against O(T C_out D) for materialising G_i, so as Bu et al.'s mixed
 * ghost clipping (their Section 3) does, a layer takes the ghost norm when
 * 2 T^2 < C_out D and materialises G_i otherwise.  A dense layer is the
 * case T = 1 (Goodfellow 2015's norm trick).  The clipped sum is then
 * accumulated with the clipping factor as the product's scale, so no
 * per-example gradient is stored either way.
 *
 * Examples are processed one at a time (their Gram matrices are per
 * example anyway); batching the products is left for when these models
 * are served by a job.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_conv_internal.h"

/* ---- shapes ------------------------------------------------------------ */

static int spec_check(const trn_conv_spec *s, acct_error *err)
{
	size_t side;

	if (!s || s->n_conv < 1 || s->n_conv > TRN_CONV_MAX_CONV)
		return acct_error_set(err, ACCT_EINVAL, "/params/conv_channels",
				      "1 to %u conv blocks", TRN_CONV_MAX_CONV);
	if (s->channels < 1 || s->channels > TRN_CONV_MAX_CHANNELS)
		return acct_error_set(err, ACCT_EINVAL, "/params/image_channels",
				      "images have 1 to %u channels", TRN_CONV_MAX_CHANNELS);
	if (s->classes < 2 || s->classes > DPG_MAX_CLASSES || s->hidden > DPG_MAX_HIDDEN_UNITS)
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "bad dense layers: %u hidden units, %u classes", s->hidden,
				      s->classes);
	if (s->act != TRN_CONV_TANH &&
	    (s->act != TRN_CONV_TEMPERED_SIGMOID || !(s->ts_scale > 0) || !(s->ts_temp > 0) ||
	     !isfinite(s->ts_scale) || !isfinite(s->ts_temp) || !isfinite(s->ts_offset)))
		return acct_error_set(err, ACCT_EINVAL, "/params/activation",
				      "tanh, or a tempered sigmoid with finite s > 0, T > 0, o");
	side = s->side;
	for (uint32_t l = 0; l < s->n_conv; l++) {
		if (s->conv_channels[l] < 1 || s->conv_channels[l] > TRN_CONV_MAX_CHANNELS)
			return acct_error_set(err, ACCT_EINVAL, "/params/conv_channels",
					      "conv block %u: 1 to %u channels", l + 1,
					      TRN_CONV_MAX_CHANNELS);
		if (s->kernel[l] % 2 == 0 || s->kernel[l] > TRN_CONV_MAX_KERNEL)
			return acct_error_set(err, ACCT_EINVAL, "/params/kernel",
					      "conv block %u: an odd kernel side up to %u", l + 1,
					      TRN_CONV_MAX_KERNEL);
		if (side < 2 || side % 2 != 0 || side > TRN_SCATTER_MAX_SIDE)
			return acct_error_set(err, ACCT_EINVAL, "/params/conv_channels",
					      "the image side %u must halve at each of the %u poolings",
					      s->side, s->n_conv);
		side /= 2;
	}
	return 0;
}

/* Lays the layers and their parameters out; returns the parameter count. */
static size_t convnet_layout(trn_convnet *n)
{
	const trn_conv_spec *s = &n->spec;
	size_t off = 0, c = s->channels, side = s->side, flat;

	for (uint32_t l = 0; l < s->n_conv; l++) {
		struct conv_layer *cl = &n->conv[l];

		*cl = (struct conv_layer){ .c_in = c, .c_out = s->conv_channels[l], .k = s->kernel[l],
					   .side = side, .t = side * side };
		cl->d = cl->c_in * cl->k * cl->k;
		cl->w_off = off;
		off += cl->c_out * cl->d;
		cl->b_off = off;
		off += cl->c_out;
		c = cl->c_out;
		side /= 2;
	}
	flat = c * side * side;
	n->n_dense = s->hidden ? 2 : 1;
	for (size_t l = 0; l < n->n_dense; l++) {
		struct dense_layer *dl = &n->dense[l];

		dl->in = l == 0 ? flat : s->hidden;
		dl->out = l + 1 == n->n_dense ? s->classes : s->hidden;
		dl->w_off = off;
		off += dl->out * dl->in;
		dl->b_off = off;
		off += dl->out;
	}
	return off;
}

void trn_convnet_free(trn_convnet *n)
{
	if (!n)
		return;
	free(n->scratch);
	if (!n->params_borrowed)
		free(n->params);
	free(n);
}

/* `count` doubles at *off of base (NULL: only counts them). */
static double *carve(double *base, size_t *off, size_t count)
{
	double *r = base ? base + *off : NULL;

	*off += count;
	return r;
}

/* Points one example's buffers into base (NULL: none), in one pass that
 * also counts them; returns their total length. */
static size_t convnet_carve(trn_convnet *n, double *base)
{
	size_t gram = 0, off = 0;

	for (uint32_t l = 0; l < n->spec.n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];
		size_t g = cl->t * cl->t > cl->c_out * cl->d ? cl->t * cl->t : cl->c_out * cl->d;

		gram = g > gram ? g : gram;
		n->in[l] = carve(base, &off, cl->c_in * cl->t);
		n->din[l] = carve(base, &off, cl->c_in * cl->t);
		n->u[l] = carve(base, &off, cl->t * cl->d);
		n->du[l] = carve(base, &off, cl->t * cl->d);
		n->a[l] = carve(base, &off, cl->c_out * cl->t);
		n->da[l] = carve(base, &off, cl->c_out * cl->t);
	}
	for (size_t l = 0; l <= n->n_dense; l++) {
		size_t w = l < n->n_dense ? n->dense[l].in : n->spec.classes;

		n->h[l] = carve(base, &off, w);
		n->dh[l] = carve(base, &off, w);
	}
	n->gram_a = carve(base, &off, gram);
	n->gram_b = carve(base, &off, gram);
	return off;
}

/* One example's scratch buffers, in one allocation. */
static int convnet_alloc(trn_convnet *n)
{
	n->scratch = malloc(convnet_carve(n, NULL) * sizeof(double));
	if (!n->scratch)
		return -1;
	convnet_carve(n, n->scratch);
	return 0;
}

int trn__conv_spec_check(const trn_conv_spec *spec, size_t *ret_params, acct_error *err)
{
	trn_convnet shape;
	int rc = spec_check(spec, err);

	if (rc < 0)
		return rc;
	memset(&shape, 0, sizeof(shape));
	shape.spec = *spec;
	shape.n_params = convnet_layout(&shape);
	if (shape.n_params > (size_t)DPG_MAX_MODEL_PARAMS)
		return acct_error_set(err, ACCT_EINVAL, "/params/conv_channels",
				      "the model would have more than %lld parameters",
				      (long long)DPG_MAX_MODEL_PARAMS);
	if (ret_params)
		*ret_params = shape.n_params;
	return 0;
}

double trn_conv_spec_work(const trn_conv_spec *spec)
{
	trn_convnet shape;
	double work = 0.0;

	memset(&shape, 0, sizeof(shape));
	shape.spec = *spec;
	(void)convnet_layout(&shape);
	/* A convolution applies its C_out x (D + 1) weights at each of its T
	 * positions; a dense layer its out x (in + 1) once. */
	for (uint32_t l = 0; l < spec->n_conv; l++) {
		const struct conv_layer *cl = &shape.conv[l];

		work += (double)cl->t * (double)cl->c_out * (double)(cl->d + 1);
	}
	for (size_t l = 0; l < shape.n_dense; l++)
		work += (double)shape.dense[l].out * (double)(shape.dense[l].in + 1);
	return work;
}

/* A model of `spec`'s layout with its scratch, and with `params` (borrowed)
 * or zero weights of its own (NULL). */
static int convnet_make(const trn_conv_spec *spec, double *params, trn_convnet **ret,
			acct_error *err)
{
	trn_convnet *n = NULL;
	int rc = trn__conv_spec_check(spec, NULL, err);

	if (rc < 0)
		return rc;
	n = calloc(1, sizeof(*n));
	if (!n)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a model");
	n->spec = *spec;
	n->n_params = convnet_layout(n);
	n->params_borrowed = params != NULL;
	n->params = params ? params : calloc(n->n_params, sizeof(double));
	if (!n->params || convnet_alloc(n) < 0) {
		trn_convnet_free(n);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a model");
	}
	*ret = n;
	return 0;
}

int trn_convnet_new(const trn_conv_spec *spec, trn_convnet **ret, acct_error *err)
{
	return convnet_make(spec, NULL, ret, err);
}

int trn__convnet_view(const trn_convnet *n, trn_convnet **ret, acct_error *err)
{
	return convnet_make(&n->spec, n->params, ret, err);
}

const trn_conv_spec *trn_convnet_spec(const trn_convnet *n)
{
	return &n->spec;
}

size_t trn_convnet_n_params(const trn_convnet *n)
{
	return n->n_params;
}

size_t trn_convnet_input_dim(const trn_convnet *n)
{
	return (size_t)n->spec.channels * n->spec.side * n->spec.side;
}

double *trn_convnet_params(trn_convnet *n)
{
	return n->params;
}

int trn_convnet_init(trn_convnet *n, mech_rng *rng, acct_error *err)
{
	memset(n->params, 0, n->n_params * sizeof(double));
	for (size_t i = 0; i < n->spec.n_conv + n->n_dense; i++) {
		bool conv = i < n->spec.n_conv;
		size_t fan_in = conv ? n->conv[i].d : n->dense[i - n->spec.n_conv].in;
		size_t nw = conv ? n->conv[i].c_out * fan_in
				 : n->dense[i - n->spec.n_conv].out * fan_in;
		double *w = n->params + (conv ? n->conv[i].w_off : n->dense[i - n->spec.n_conv].w_off);

		/* LeCun's N(0, 1/fan_in), suited to tanh-like units. */
		if (mech_rng_normal_fill(rng, w, nw) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
		cblas_dscal((int)nw, 1.0 / sqrt((double)fan_in), w, 1);
	}
	return 0;
}

/* ---- one example ------------------------------------------------------- */

/* U (T x D): row t holds the k x k patches of every input channel around
 * position t, zero outside the image ('same' padding). */
static void im2col(const struct conv_layer *cl, const double *x, double *u)
{
	long side = (long)cl->side, k = (long)cl->k, p = k / 2;

	for (long r = 0; r < side; r++)
		for (long c = 0; c < side; c++) {
			double *row = u + (size_t)(r * side + c) * cl->d;

			for (size_t ch = 0; ch < cl->c_in; ch++)
				for (long i = 0; i < k; i++)
					for (long j = 0; j < k; j++) {
						long rr = r + i - p, cc = c + j - p;

						*row++ = rr < 0 || rr >= side || cc < 0 || cc >= side
								 ? 0.0
								 : x[ch * cl->t + (size_t)(rr * side + cc)];
					}
		}
}

/* The adjoint of im2col: adds each entry of dU back to its pixel. */
static void col2im(const struct conv_layer *cl, const double *du, double *dx)
{
	long side = (long)cl->side, k = (long)cl->k, p = k / 2;

	memset(dx, 0, cl->c_in * cl->t * sizeof(double));
	for (long r = 0; r < side; r++)
		for (long c = 0; c < side; c++) {
			const double *row = du + (size_t)(r * side + c) * cl->d;

			for (size_t ch = 0; ch < cl->c_in; ch++)
				for (long i = 0; i < k; i++)
					for (long j = 0; j < k; j++, row++) {
						long rr = r + i - p, cc = c + j - p;

						if (rr >= 0 && rr < side && cc >= 0 && cc < side)
							dx[ch * cl->t + (size_t)(rr * side + cc)] += *row;
					}
		}
}

/* 2 x 2 average pooling of c channels of side x side into out. */
static void pool(const double *a, size_t c, size_t side, double *out)
{
	size_t half = side / 2;

	for (size_t ch = 0; ch < c; ch++)
		for (size_t r = 0; r < half; r++)
			for (size_t q = 0; q < half; q++) {
				const double *p = a + ch * side * side + 2 * r * side + 2 * q;

				out[ch * half * half + r * half + q] =
					0.25 * (p[0] + p[1] + p[side] + p[side + 1]);
			}
}

/* The pooling's adjoint: each output error spread evenly over its 4 inputs. */
static void pool_back(const double *dout, size_t c, size_t side, double *da)
{
	size_t half = side / 2;

	for (size_t ch = 0; ch < c; ch++)
		for (size_t r = 0; r < side; r++)
			for (size_t q = 0; q < side; q++)
				da[ch * side * side + r * side + q] =
					0.25 * dout[ch * half * half + (r / 2) * half + q / 2];
}

/* Forward pass of one example x; leaves the softmax in h[n_dense] and
 * returns the cross-entropy of class y. */
static double forward_one(trn_convnet *n, const double *x, uint32_t y)
{
	const trn_conv_spec *s = &n->spec;
	size_t K = s->classes;
	double *z, mx, sum = 0.0;

	memcpy(n->in[0], x, n->conv[0].c_in * n->conv[0].t * sizeof(double));
	for (uint32_t l = 0; l < s->n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];
		double *next = l + 1 < s->n_conv ? n->in[l + 1] : n->h[0];

		im2col(cl, n->in[l], n->u[l]);
		/* A (C_out x T) = W (C_out x D) U^T, plus the bias. */
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)cl->c_out, (int)cl->t,
			    (int)cl->d, 1.0, n->params + cl->w_off, (int)cl->d, n->u[l], (int)cl->d,
			    0.0, n->a[l], (int)cl->t);
		for (size_t o = 0; o < cl->c_out; o++)
			for (size_t t = 0; t < cl->t; t++)
				n->a[l][o * cl->t + t] =
					trn__conv_act(s, n->a[l][o * cl->t + t] + n->params[cl->b_off + o]);
		pool(n->a[l], cl->c_out, cl->side, next);
	}
	for (size_t l = 0; l < n->n_dense; l++) {
		const struct dense_layer *dl = &n->dense[l];

		memcpy(n->h[l + 1], n->params + dl->b_off, dl->out * sizeof(double));
		cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)dl->out, (int)dl->in, 1.0,
			    n->params + dl->w_off, (int)dl->in, n->h[l], 1, 1.0, n->h[l + 1], 1);
		for (size_t j = 0; l + 1 < n->n_dense && j < dl->out; j++)
			n->h[l + 1][j] = trn__conv_act(s, n->h[l + 1][j]);
	}
	z = n->h[n->n_dense];
	mx = z[trn__argmax(z, (uint32_t)K)];
	for (size_t j = 0; j < K; j++)
		sum += exp(z[j] - mx);
	for (size_t j = 0; j < K; j++)
		z[j] = exp(z[j] - mx) / sum;
	return -log(z[y] > 0.0 ? z[y] : 1e-300);
}

/*
 * The n of the clipping margin trn__clip_margin(n) for net n: each dense
 * layer's squared norm carries relative error at most gamma_{in + out + 4}
 * (as in trn_model.c's clip_margin_terms),
 * each convolution's bound s_hat + E one rounding, and the sum of the
 * layers' nonnegative terms gamma_L (docs/training.md, "Clipping in
 * floating point").
 */
static size_t conv_margin_terms(const trn_convnet *n)
{
	size_t k = 1;

	for (size_t l = 0; l < n->n_dense; l++)
		if (n->dense[l].in + n->dense[l].out + 4 > k)
			k = n->dense[l].in + n->dense[l].out + 4;
	return k + 1 + n->spec.n_conv + n->n_dense;
}

/*
 * Conv layer l's bound max(s^, 0) + E on the squared norm of its part of
 * the gradient (docs/training.md, "Clipping in floating point"), computed
 * with the errors dA scaled up by 2^e so that its largest entry is at
 * least 1: the products of tiny errors then underflow by far less than
 * E's slack, and dA is scaled back exactly afterwards ("Underflow").  The
 * computed s^ itself goes to *ret_sq.
 */
static double conv_layer_bound(trn_convnet *n, uint32_t l, trn_conv_norm_mode mode,
			       double *ret_sq)
{
	const struct conv_layer *cl = &n->conv[l];
	size_t len = cl->c_out * cl->t;
	int e = trn__upscale_exponent(n->da[l], len);
	double s, err;

	trn__scale_pow2(n->da[l], len, e);
	s = trn__conv_grad_sqnorm(n->da[l], n->u[l], cl->c_out, cl->t, cl->d, mode, n->gram_a,
				  n->gram_b);
	err = trn__conv_sqnorm_error(n->da[l], n->u[l], cl->c_out, cl->t, cl->d);
	trn__scale_pow2(n->da[l], len, -e);
	*ret_sq = ldexp(s, -2 * e);
	return trn__sqnorm_unscale(fmax(s, 0.0) + err, e);
}

/* Back-propagates one example's errors: dh[l] are the errors at dense
 * layer l's pre-activation output, da[l] at conv layer l's pre-activation;
 * returns the computed squared norm of its whole gradient, and in
 * *ret_bound the bound on it the clipping uses (conv layers' errors
 * added).  `mode` picks ghost norms or materialised G for the
 * convolutions. */
static double backward_one(trn_convnet *n, uint32_t y, trn_conv_norm_mode mode,
			   double *ret_bound)
{
	const trn_conv_spec *s = &n->spec;
	double sq = 0.0, bound = 0.0;

	memcpy(n->dh[n->n_dense], n->h[n->n_dense], s->classes * sizeof(double));
	n->dh[n->n_dense][y] -= 1.0;
	for (size_t l = n->n_dense; l-- > 0;) {
		const struct dense_layer *dl = &n->dense[l];
		int e;
		double dd = trn__sqnorm_upscaled(n->dh[l + 1], dl->out, &e);
		/* Norm trick: ||delta h^T||^2 + ||delta||^2, the errors scaled
		 * up as in trn_model.c's example_sqnorms. */
		double term = trn__sqnorm_unscale(
			dd * (cblas_ddot((int)dl->in, n->h[l], 1, n->h[l], 1) + 1.0), e);

		sq += term;
		bound += term;
		cblas_dgemv(CblasRowMajor, CblasTrans, (int)dl->out, (int)dl->in, 1.0,
			    n->params + dl->w_off, (int)dl->in, n->dh[l + 1], 1, 0.0, n->dh[l], 1);
		for (size_t j = 0; l > 0 && j < dl->in; j++)
			n->dh[l][j] *= trn__conv_act_deriv(s, n->h[l][j]);
	}
	for (uint32_t l = s->n_conv; l-- > 0;) {
		const struct conv_layer *cl = &n->conv[l];
		const double *dpool = l + 1 < s->n_conv ? n->din[l + 1] : n->dh[0];
		double term;

		pool_back(dpool, cl->c_out, cl->side, n->da[l]);
		for (size_t i = 0; i < cl->c_out * cl->t; i++)
			n->da[l][i] *= trn__conv_act_deriv(s, n->a[l][i]);
		bound += conv_layer_bound(n, l, mode, &term);
		sq += term;
		if (l == 0)
			break;
		/* dU (T x D) = dA^T (T x C_out) W (C_out x D), folded back. */
		cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cl->t, (int)cl->d,
			    (int)cl->c_out, 1.0, n->da[l], (int)cl->t, n->params + cl->w_off,
			    (int)cl->d, 0.0, n->du[l], (int)cl->d);
		col2im(cl, n->du[l], n->din[l]);
	}
	*ret_bound = bound;
	return sq;
}

double trn__conv_grad_sqnorm(const double *da, const double *u, size_t c_out, size_t t,
			     size_t d, trn_conv_norm_mode mode, double *scratch_a,
			     double *scratch_b)
{
	double sq = 0.0, bias = 0.0;

	for (size_t o = 0; o < c_out; o++) {
		double b = 0.0;

		for (size_t p = 0; p < t; p++)
			b += da[o * t + p];
		bias += b * b;
	}
	if (mode == TRN_CONV_NORM_AUTO)
		mode = 2 * t * t < c_out * d ? TRN_CONV_NORM_GHOST : TRN_CONV_NORM_MATERIALISE;
	if (mode == TRN_CONV_NORM_GHOST) {
		/* <dA^T dA, U U^T>_F, both T x T (Bu et al. 2022, eq. 2.3). */
		cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)t, (int)t, (int)c_out, 1.0,
			    da, (int)t, da, (int)t, 0.0, scratch_a, (int)t);
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)t, (int)d, 1.0, u,
			    (int)d, u, (int)d, 0.0, scratch_b, (int)t);
		sq = cblas_ddot((int)(t * t), scratch_a, 1, scratch_b, 1);
	} else {
		/* G = dA (C_out x T) U (T x D), then its Frobenius norm. */
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c_out, (int)d, (int)t,
			    1.0, da, (int)t, u, (int)d, 0.0, scratch_a, (int)d);
		sq = cblas_ddot((int)(c_out * d), scratch_a, 1, scratch_a, 1);
	}
	return sq + bias;
}

double trn__conv_sqnorm_error(const double *da, const double *u, size_t c_out, size_t t,
			      size_t d)
{
	/* docs/training.md, "Clipping in floating point": the k counts every
	 * gamma_k the bound takes (Higham eqs. 3.5 and 3.13); || |dA| |U| ||^2
	 * <= ||dA||^2 ||U||^2 (Cauchy-Schwarz) bounds the sums' absolute
	 * terms, the bias being U's column of ones. */
	double k = (double)((c_out + t) * (d + t) + c_out + t + 2);
	double dd = cblas_ddot((int)(c_out * t), da, 1, da, 1);
	double uu = cblas_ddot((int)(t * d), u, 1, u, 1) + (double)t;

	return 8.0 * k * TRN_F64_UNIT_ROUNDOFF * (dd * uu);
}

/* Adds scale times the example's gradient to grad, from the errors that
 * backward_one left (the products take `scale`, so nothing per example is
 * stored). */
static void accumulate_one(trn_convnet *n, double scale, double *grad)
{
	for (uint32_t l = 0; l < n->spec.n_conv; l++) {
		const struct conv_layer *cl = &n->conv[l];

		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)cl->c_out, (int)cl->d,
			    (int)cl->t, scale, n->da[l], (int)cl->t, n->u[l], (int)cl->d, 1.0,
			    grad + cl->w_off, (int)cl->d);
		for (size_t o = 0; o < cl->c_out; o++)
			for (size_t p = 0; p < cl->t; p++)
				grad[cl->b_off + o] += scale * n->da[l][o * cl->t + p];
	}
	for (size_t l = 0; l < n->n_dense; l++) {
		const struct dense_layer *dl = &n->dense[l];

		cblas_dger(CblasRowMajor, (int)dl->out, (int)dl->in, scale, n->dh[l + 1], 1, n->h[l],
			   1, grad + dl->w_off, (int)dl->in);
		cblas_daxpy((int)dl->out, scale, n->dh[l + 1], 1, grad + dl->b_off, 1);
	}
}

double trn_convnet_loss(trn_convnet *n, const double *x, uint32_t y)
{
	return forward_one(n, x, y);
}

void trn__convnet_scores(trn_convnet *n, const double *x, double *scores)
{
	forward_one(n, x, 0);
	memcpy(scores, n->h[n->n_dense], n->spec.classes * sizeof(double));
}

uint32_t trn_convnet_predict(trn_convnet *n, const double *x)
{
	/* The label only picks the loss term; the probabilities do not
	 * depend on it. */
	forward_one(n, x, 0);
	return trn__argmax(n->h[n->n_dense], n->spec.classes);
}

int trn__convnet_example(trn_convnet *n, const double *x, uint32_t y, double clip_norm,
			 trn_conv_norm_mode mode, double *grad, double *ret_norm, double *ret_factor,
			 double *ret_loss)
{
	double sq, bound, c = 0.0, loss;

	if (y >= n->spec.classes)
		return ACCT_EINVAL;
	loss = forward_one(n, x, y);
	sq = backward_one(n, y, mode, &bound);
	/* Abadi et al. Algorithm 1: g / max(1, ||g|| / C), with ||g|| the
	 * bound on the exact norm and the margin of conv_margin_terms, so that
	 * the exact contribution c g has norm at most C (docs/training.md,
	 * "Clipping in floating point"); an example whose norm is not finite
	 * contributes nothing. */
	if (isfinite(bound)) {
		c = trn__clip_factor(sqrt(bound), clip_norm, conv_margin_terms(n));
		accumulate_one(n, c, grad);
	}
	if (ret_norm)
		*ret_norm = sqrt(sq);
	if (ret_factor)
		*ret_factor = c;
	if (ret_loss)
		*ret_loss = loss;
	return 0;
}

int trn_convnet_clipped_grad(trn_convnet *n, const double *x, const uint32_t *y, size_t B,
			     double clip_norm, trn_conv_norm_mode mode, double *grad,
			     double *ret_norms, double *ret_loss_sum)
{
	size_t d = trn_convnet_input_dim(n);
	double loss = 0.0;

	for (size_t i = 0; i < B; i++) {
		double l = 0.0;
		int rc = trn__convnet_example(n, x + i * d, y[i], clip_norm, mode, grad,
					      ret_norms ? &ret_norms[i] : NULL, NULL, &l);

		if (rc)
			return rc;
		loss += l;
	}
	if (ret_loss_sum)
		*ret_loss_sum = loss;
	return 0;
}
