/*
 * trn_model.c: dense softmax classifiers (logistic regression, MLP, and
 * models other trainers assemble layer by layer), their batched
 * forward/backward passes with per-example clipping by the norm trick, the
 * input rule applied before the first layer, and the model file format.
 *
 * Linear algebra goes straight to CBLAS, which meson links from OpenBLAS
 * ahead of GSL's reference libgslcblas (tests/trainers checks where
 * cblas_dgemm resolves at run time).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_internal.h"

const char *trn_activation_name(uint32_t code)
{
	static const char *const names[] = {"identity", "relu", "tanh", "cos", "sigmoid"};

	return code <= TRN_ACT_MAX ? names[code] : NULL;
}

const char *trn_input_rule_name(uint32_t rule)
{
	return rule == TRN_INPUT_NONE ? "none" : rule == TRN_INPUT_UNIT_BALL ? "unit_ball" : NULL;
}

int trn__model_check(uint32_t n_layers, const uint32_t *widths, uint32_t activation,
		     acct_error *err)
{
	size_t off = 0;

	if (n_layers < 1 || n_layers > TRN_MAX_LAYERS)
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "a model has 1 to %d dense layers", TRN_MAX_LAYERS);
	if (activation != 0 && activation != TRN_ACT_RELU && activation != TRN_ACT_TANH)
		return acct_error_set(err, ACCT_EINVAL, "/params/activation",
				      "unknown activation");
	for (uint32_t l = 0; l <= n_layers; l++)
		if (widths[l] < 1 || widths[l] > (l == 0 ? DPG_MAX_FEATURES : DPG_MAX_HIDDEN_UNITS) ||
		    (l == n_layers && widths[l] < 2))
			return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
					      "layer width %u is out of bounds", widths[l]);
	for (uint32_t l = 0; l < n_layers; l++) {
		off += (size_t)widths[l + 1] * widths[l] + widths[l + 1];
		if (off > (size_t)DPG_MAX_MODEL_PARAMS)
			return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
					      "the model would have more than %lld parameters",
					      (long long)DPG_MAX_MODEL_PARAMS);
	}
	return 0;
}

int trn__model_new(uint32_t n_layers, const uint32_t *widths, uint32_t activation,
		   trn_model **ret, acct_error *err)
{
	trn_model *m = NULL;
	size_t off = 0;
	int rc = trn__model_check(n_layers, widths, activation, err);

	if (rc < 0)
		return rc;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto nomem;
	m->n_layers = n_layers;
	m->activation = activation;
	for (uint32_t l = 0; l < n_layers; l++)
		m->layer_act[l] = l + 1 < n_layers ? activation : TRN_ACT_IDENTITY;
	m->input_rule = TRN_INPUT_NONE;
	m->input_scale = 1.0;
	memcpy(m->dims, widths, (n_layers + 1) * sizeof(uint32_t));
	m->input_dim = widths[0];
	off = 0;
	for (uint32_t l = 0; l < n_layers; l++) {
		m->w_off[l] = off;
		off += (size_t)widths[l + 1] * widths[l];
		m->b_off[l] = off;
		off += widths[l + 1];
	}
	m->n_params = off;
	m->params = calloc(off, sizeof(double));
	if (!m->params)
		goto nomem;
	*ret = m;
	return 0;
nomem:
	trn_model_free(m);
	return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a model");
}

void trn_model_free(trn_model *m)
{
	if (!m)
		return;
	free(m->proj);
	free(m->params);
	trn_scatter_free(m->scatter);
	trn_convnet_free(m->conv);
	free(m);
}

int trn__model_init(trn_model *m, mech_rng *rng, acct_error *err)
{
	memset(m->params, 0, m->n_params * sizeof(double));
	if (m->activation == 0)
		return 0; /* logistic regression: a convex problem, start at zero */
	for (uint32_t l = 0; l < m->n_layers; l++) {
		size_t nw = (size_t)m->dims[l + 1] * m->dims[l];
		double *w = m->params + m->w_off[l];
		/* He et al. 2015 for relu, LeCun for tanh. */
		double sd = sqrt((m->activation == TRN_ACT_RELU ? 2.0 : 1.0) / m->dims[l]);

		if (mech_rng_normal_fill(rng, w, nw) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
		cblas_dscal((int)nw, sd, w, 1);
	}
	return 0;
}

/* ---- workspace ---------------------------------------------------------- */

int trn__workspace_new(const trn_model *m, size_t cap, trn__workspace **ret, acct_error *err)
{
	trn__workspace *ws = calloc(1, sizeof(*ws));

	if (!ws)
		goto nomem;
	ws->cap = cap;
	ws->n_layers = m->n_layers;
	for (uint32_t l = 0; l <= m->n_layers; l++) {
		ws->act[l] = malloc(cap * m->dims[l] * sizeof(double));
		if (!ws->act[l])
			goto nomem;
	}
	for (uint32_t l = 0; l < m->n_layers; l++) {
		ws->delta[l] = malloc(cap * m->dims[l + 1] * sizeof(double));
		ws->sq[l] = malloc(cap * sizeof(double));
		if (!ws->delta[l] || !ws->sq[l])
			goto nomem;
	}
	ws->scale = malloc(cap * m->n_layers * sizeof(double));
	ws->loss = malloc(cap * sizeof(double));
	if (!ws->scale || !ws->loss ||
	    (m->scatter && trn_scatter_workspace_new(m->scatter, &ws->scatter, NULL) < 0))
		goto nomem;
	*ret = ws;
	return 0;
nomem:
	trn__workspace_free(ws);
	return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a training workspace");
}

void trn__workspace_free(trn__workspace *ws)
{
	if (!ws)
		return;
	for (uint32_t l = 0; l <= TRN_MAX_LAYERS; l++)
		free(ws->act[l]);
	for (uint32_t l = 0; l < TRN_MAX_LAYERS; l++) {
		free(ws->delta[l]);
		free(ws->sq[l]);
	}
	free(ws->scale);
	free(ws->loss);
	trn_scatter_workspace_free(ws->scatter);
	free(ws);
}

/* ---- passes -------------------------------------------------------------- */

/* z <- f(z) elementwise for an activation code (identity: unchanged). */
static void activate(uint32_t code, double *z, size_t n)
{
	switch (code) {
	case TRN_ACT_RELU:
		for (size_t j = 0; j < n; j++)
			z[j] = z[j] > 0.0 ? z[j] : 0.0;
		break;
	case TRN_ACT_TANH:
		for (size_t j = 0; j < n; j++)
			z[j] = tanh(z[j]);
		break;
	case TRN_ACT_COS:
		for (size_t j = 0; j < n; j++)
			z[j] = cos(z[j]);
		break;
	case TRN_ACT_SIGMOID:
		for (size_t j = 0; j < n; j++)
			z[j] = 1.0 / (1.0 + exp(-z[j]));
		break;
	default:
		break;
	}
}

/* delta <- delta * f'(z), with f'(z) written through the layer's output
 * a = f(z): relu 1[a > 0], tanh 1 - a^2, sigmoid a (1 - a), identity 1. */
static void activation_backward(uint32_t code, const double *a, double *delta, size_t n)
{
	switch (code) {
	case TRN_ACT_RELU:
		for (size_t t = 0; t < n; t++)
			if (a[t] <= 0.0)
				delta[t] = 0.0;
		break;
	case TRN_ACT_TANH:
		for (size_t t = 0; t < n; t++)
			delta[t] *= 1.0 - a[t] * a[t];
		break;
	case TRN_ACT_SIGMOID:
		for (size_t t = 0; t < n; t++)
			delta[t] *= a[t] * (1.0 - a[t]);
		break;
	default:
		break;
	}
}

/*
 * act[l+1] = f(act[l] W_l^T + b_l) for every layer; the last layer's output
 * is overwritten with the softmax.  Per-example cross-entropy goes to
 * ws->loss, computed from the log-sum-exp of the logits.
 */
/* act[l+1] = f(act[l] W_l^T + b_l); the last layer's output is left as the
 * raw logits. */
static void dense_forward(const trn_model *m, trn__workspace *ws, size_t B)
{
	uint32_t L = m->n_layers;

	for (uint32_t l = 0; l < L; l++) {
		int in = (int)m->dims[l], out = (int)m->dims[l + 1];
		const double *w = m->params + m->w_off[l], *b = m->params + m->b_off[l];
		double *z = ws->act[l + 1];

		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, out, in, 1.0,
			    ws->act[l], in, w, in, 0.0, z, out);
		for (size_t i = 0; i < B; i++) {
			double *zi = z + i * (size_t)out;

			for (int j = 0; j < out; j++)
				zi[j] += b[j];
			activate(m->layer_act[l], zi, (size_t)out);
		}
	}
}

static void forward(const trn_model *m, trn__workspace *ws, const uint32_t *y, size_t B,
		    double *ret_loss_sum, size_t *ret_correct)
{
	uint32_t L = m->n_layers;
	double loss_sum = 0.0;
	size_t correct = 0;

	dense_forward(m, ws, B);
	for (size_t i = 0; i < B; i++) {
		int k = (int)m->dims[L];
		double *zi = ws->act[L] + i * (size_t)k, mx = zi[0], s = 0.0, lse;
		int arg = 0;

		for (int j = 1; j < k; j++)
			if (zi[j] > mx) {
				mx = zi[j];
				arg = j;
			}
		for (int j = 0; j < k; j++)
			s += exp(zi[j] - mx);
		lse = mx + log(s);
		ws->loss[i] = lse - zi[y[i]];
		loss_sum += ws->loss[i];
		correct += (uint32_t)arg == y[i];
		for (int j = 0; j < k; j++)
			zi[j] = exp(zi[j] - lse);
	}
	if (ret_loss_sum)
		*ret_loss_sum = loss_sum;
	if (ret_correct)
		*ret_correct = correct;
}

void trn__chunk_forward(const trn_model *m, trn__workspace *ws, const uint32_t *y, size_t B,
			double *ret_loss_sum, size_t *ret_correct)
{
	forward(m, ws, y, B, ret_loss_sum, ret_correct);
}

static double row_sqnorm(const double *v, size_t n)
{
	double s = 0.0;

	for (size_t j = 0; j < n; j++)
		s += v[j] * v[j];
	return s;
}

/* Back-propagates the output errors already in delta[L-1] through the
 * hidden layers: delta_{l-1} = (delta_l W_l) . f'. */
static void backprop_hidden(const trn_model *m, trn__workspace *ws, size_t B)
{
	uint32_t L = m->n_layers;

	for (uint32_t l = L - 1; l >= 1; l--) {
		int in = (int)m->dims[l], out = (int)m->dims[l + 1];
		const double *w = m->params + m->w_off[l];
		double *dprev = ws->delta[l - 1];
		const double *a = ws->act[l];

		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, in, out, 1.0,
			    ws->delta[l], out, w, in, 0.0, dprev, in);
		activation_backward(m->layer_act[l - 1], a, dprev, B * (size_t)in);
	}
}

/* Back-propagates the per-example errors of softmax cross-entropy: the
 * output error p - onehot(y), then through the hidden layers. */
static void backward(const trn_model *m, trn__workspace *ws, const uint32_t *y, size_t B)
{
	uint32_t L = m->n_layers;
	size_t k = m->dims[L];

	memcpy(ws->delta[L - 1], ws->act[L], B * k * sizeof(double));
	for (size_t i = 0; i < B; i++)
		ws->delta[L - 1][i * k + y[i]] -= 1.0;
	backprop_hidden(m, ws, B);
}

/*
 * Norm trick (Goodfellow 2015): example i's gradient for layer l is
 * delta_i a_i^T and delta_i, so its squared norm is
 * ||delta_i||^2 (||a_i||^2 + 1), with no per-example matrix.  The errors
 * are summed scaled up by 2^e (their squares may underflow: a confident
 * example's errors can be 1e-162 while its activations are large), the
 * product taken at that scale and brought back (docs/training.md,
 * "Underflow").  Fills ws->sq, and ret_norms (when not NULL) with the
 * global norms.
 */
static void example_sqnorms(const trn_model *m, trn__workspace *ws, size_t B, double *ret_norms)
{
	uint32_t L = m->n_layers;

	for (uint32_t l = 0; l < L; l++) {
		size_t in = m->dims[l], out = m->dims[l + 1];

		for (size_t i = 0; i < B; i++) {
			int e;
			double dd = trn__sqnorm_upscaled(ws->delta[l] + i * out, out, &e);

			ws->sq[l][i] = trn__sqnorm_unscale(
				dd * (row_sqnorm(ws->act[l] + i * in, in) + 1.0), e);
		}
	}
	if (ret_norms)
		for (size_t i = 0; i < B; i++) {
			double s = 0.0;

			for (uint32_t l = 0; l < L; l++)
				s += ws->sq[l][i];
			ret_norms[i] = sqrt(s);
		}
}

/*
 * The n of the clipping margin trn__clip_margin(n) for this model
 * (docs/training.md, "Clipping in floating point"): layer l's squared norm
 * fl(fl(sum (2^e delta)^2) fl(sum a^2 + 1)) 2^-2e carries relative error
 * at most gamma_{in + out + 4} (Higham eq. 3.5 and Lemma 3.3, and one u
 * for each sum's underflow, both sums being at least 1), the global sum
 * of the L layers' terms gamma_L more.
 */
static size_t clip_margin_terms(const trn_model *m)
{
	size_t k = 0;

	for (uint32_t l = 0; l < m->n_layers; l++)
		if (m->dims[l] + m->dims[l + 1] + 4 > k)
			k = m->dims[l] + m->dims[l + 1] + 4;
	return k + m->n_layers;
}

/*
 * Example i's clipping factors, one per layer in ws->scale (Abadi et al.
 * Alg. 1: g / max(1, ||g|| / C)), with the computed norm inflated by the
 * margin of `terms` so that the exact norm of what is summed, the scaled
 * errors fl(c delta_i) times a_i, is at most C (docs/training.md,
 * "Clipping in floating point"); for per-layer clipping each of the L
 * layers gets at most C / sqrt(L), so the whole clipped gradient still
 * has norm at most C.
 */
static void example_clip_factors(const trn_model *m, trn__workspace *ws, size_t B, size_t i,
				 const trn__clip *clip, size_t terms)
{
	uint32_t L = m->n_layers;
	double total = 0.0;

	/* An example whose gradient is not finite (features near DBL_MAX
	 * overflow it, then NaN escapes every comparison) contributes zero:
	 * its rows of delta and of the activations are cleared, since scaling
	 * inf by 0 gives NaN.  Every example's contribution then still has
	 * norm at most C. */
	for (uint32_t l = 0; l < L; l++)
		total += ws->sq[l][i];
	if (!isfinite(total)) {
		for (uint32_t l = 0; l < L; l++) {
			memset(ws->delta[l] + i * m->dims[l + 1], 0, m->dims[l + 1] * sizeof(double));
			memset(ws->act[l] + i * m->dims[l], 0, m->dims[l] * sizeof(double));
			ws->scale[l * B + i] = 1.0;
		}
		return;
	}
	if (clip->mode == TRN_CLIP_GLOBAL) {
		double c = trn__clip_factor(sqrt(total), clip->clip_norm, terms);

		for (uint32_t l = 0; l < L; l++)
			ws->scale[l * B + i] = c;
	} else {
		double cl = clip->clip_norm / sqrt((double)L);

		for (uint32_t l = 0; l < L; l++)
			ws->scale[l * B + i] = trn__clip_factor(sqrt(ws->sq[l][i]), cl, terms);
	}
}

/* Clips every example's errors in place by its factors. */
static void clip_deltas(const trn_model *m, trn__workspace *ws, size_t B, const trn__clip *clip)
{
	size_t terms = clip_margin_terms(m);

	for (size_t i = 0; i < B; i++)
		example_clip_factors(m, ws, B, i, clip, terms);
	for (uint32_t l = 0; l < m->n_layers; l++) {
		size_t out = m->dims[l + 1];

		for (size_t i = 0; i < B; i++) {
			double c = ws->scale[l * B + i];

			if (c != 1.0)
				cblas_dscal((int)out, c, ws->delta[l] + i * out, 1);
		}
	}
}

/* Adds to grad the sum over the B rows of delta_i a_i^T (and delta_i for
 * the bias), one matmul per layer: D^T A. */
static void sum_gradient(const trn_model *m, trn__workspace *ws, size_t B, double *grad)
{
	for (uint32_t l = 0; l < m->n_layers; l++) {
		int in = (int)m->dims[l], out = (int)m->dims[l + 1];
		double *gw = grad + m->w_off[l], *gb = grad + m->b_off[l];
		const double *d = ws->delta[l];

		cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, (int)B, 1.0, d, out,
			    ws->act[l], in, 1.0, gw, in);
		for (size_t i = 0; i < B; i++)
			cblas_daxpy(out, 1.0, d + i * (size_t)out, 1, gb, 1);
	}
}

void trn__chunk_gradient(const trn_model *m, trn__workspace *ws, const uint32_t *y, size_t B,
			 const trn__clip *clip, double *grad, double *ret_norms,
			 double *ret_loss_sum, size_t *ret_correct)
{
	if (B == 0) {
		if (ret_loss_sum)
			*ret_loss_sum = 0.0;
		if (ret_correct)
			*ret_correct = 0;
		return;
	}
	forward(m, ws, y, B, ret_loss_sum, ret_correct);
	backward(m, ws, y, B);
	if ((clip && clip->enabled) || ret_norms)
		example_sqnorms(m, ws, B, ret_norms);
	if (clip && clip->enabled)
		clip_deltas(m, ws, B, clip);
	/* The clipped sum as one reweighted matmul per layer: (diag(c) D)^T A. */
	sum_gradient(m, ws, B, grad);
}

void trn__chunk_logits(const trn_model *m, trn__workspace *ws, size_t B)
{
	dense_forward(m, ws, B);
}

void trn__chunk_backprop(const trn_model *m, trn__workspace *ws, size_t B, double *grad)
{
	if (B == 0)
		return;
	backprop_hidden(m, ws, B);
	sum_gradient(m, ws, B, grad);
}

double trn__example_loss(const trn_model *m, trn__workspace *ws, const double *x, uint32_t y)
{
	double loss;

	memcpy(ws->act[0], x, m->dims[0] * sizeof(double));
	forward(m, ws, &y, 1, &loss, NULL);
	return loss;
}

/* ---- prediction ------------------------------------------------------------ */

/* Copies (projecting if the model projects, transforming if it has a
 * feature transform) B raw rows into ws->act[0]. */
static int load_rows_raw(const trn_model *m, trn__workspace *ws, const double *src, size_t B)
{
	if (m->feature_rule != TRN_FEATURE_RULE_NONE)
		return trn__features_rows(m, ws->scatter, src, B, ws->act[0]);
	if (m->proj_dim)
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)m->proj_dim,
			    (int)m->input_dim, 1.0, src, (int)m->input_dim, m->proj, (int)m->proj_dim,
			    0.0, ws->act[0], (int)m->proj_dim);
	else
		memcpy(ws->act[0], src, B * m->input_dim * sizeof(double));
	return 0;
}

/*
 * The factor c with which the unit_ball rule maps a raw row to its input
 * c x: 1/B when ||x / B|| <= 1, else 1/||x||, so that ||c x|| <= 1.  The
 * norm is scaled by its largest entry first so that no square overflows.
 */
double trn__unit_ball_factor(const double *x, size_t d, double B)
{
	double mx = 0.0, s = 0.0, norm;

	for (size_t j = 0; j < d; j++)
		mx = fabs(x[j]) > mx ? fabs(x[j]) : mx;
	if (mx == 0.0)
		return 1.0 / B;
	for (size_t j = 0; j < d; j++)
		s += (x[j] / mx) * (x[j] / mx);
	norm = mx * sqrt(s);
	return norm / B > 1.0 ? 1.0 / norm : 1.0 / B;
}

/* Copies (projecting if the model projects) rows [start, start+B) of a raw
 * table into ws->act[0], after the model's input rule.  The rule scales
 * each row by a factor and the projection is linear, so the factor is
 * applied to the projected row: (c x) V = c (x V). */
static int load_rows(const trn_model *m, trn__workspace *ws, const double *x, size_t start,
		     size_t B)
{
	const double *src = x + start * m->input_dim;
	int rc = load_rows_raw(m, ws, src, B);

	if (rc < 0 || m->input_rule != TRN_INPUT_UNIT_BALL)
		return rc;
	for (size_t i = 0; i < B; i++)
		cblas_dscal((int)m->dims[0],
			    trn__unit_ball_factor(src + i * m->input_dim, m->input_dim, m->input_scale),
			    ws->act[0] + i * m->dims[0], 1);
	return 0;
}

int trn__model_load_rows(const trn_model *m, trn__workspace *ws, const double *x, size_t start,
			 size_t B)
{
	return load_rows(m, ws, x, start, B);
}

/*
 * The rows of an n-row table (w values each) that have a class: NULL
 * copies when every row has one, else the scored rows copied in order.
 * A public test table may hold labels that are none of the job's classes
 * (TRN_NO_CLASS); they are not scored, as trn_eval does not score them,
 * rather than failing a job whose training already ran.  A label past
 * the classes that is not TRN_NO_CLASS is a caller's error.
 */
static int classed_rows(const double *x, const uint32_t *y, size_t n, size_t w, uint32_t k,
			double **ret_x, uint32_t **ret_y, size_t *ret_n, acct_error *err)
{
	size_t scored = 0;

	*ret_x = NULL;
	*ret_y = NULL;
	for (size_t i = 0; i < n; i++) {
		if (y[i] != TRN_NO_CLASS && y[i] >= k)
			return acct_error_set(err, ACCT_EINVAL, "/data",
					      "row %zu: a class is out of range", i);
		scored += y[i] != TRN_NO_CLASS;
	}
	*ret_n = scored;
	if (scored == n || scored == 0)
		return 0;
	*ret_x = malloc(scored * w * sizeof(double));
	*ret_y = malloc(scored * sizeof(uint32_t));
	if (!*ret_x || !*ret_y)
		return trn__nomem(err);
	for (size_t i = 0, j = 0; i < n; i++)
		if (y[i] != TRN_NO_CLASS) {
			memcpy(*ret_x + j * w, x + i * w, w * sizeof(double));
			(*ret_y)[j++] = y[i];
		}
	return 0;
}

/* Accuracy and loss over the rows with a class, B at a time (NaN when no
 * row has one): raw rows through load_rows, or (inputs) rows already
 * mapped to the first layer's inputs. */
static int evaluate_rows(const trn_model *m, const double *x, const uint32_t *y, size_t n,
			 bool inputs, double *ret_accuracy, double *ret_loss, acct_error *err)
{
	trn__workspace *ws = NULL;
	size_t cap = 512, correct = 0, w = inputs ? m->dims[0] : m->input_dim;
	double loss = 0.0, *cx;
	uint32_t *cy;
	int rc = classed_rows(x, y, n, w, m->dims[m->n_layers], &cx, &cy, &n, err);

	if (cx) {
		x = cx;
		y = cy;
	}
	if (rc == 0 && n > 0)
		rc = trn__workspace_new(m, cap, &ws, err);
	for (size_t s = 0; rc == 0 && s < n; s += cap) {
		size_t B = n - s < cap ? n - s : cap, c;
		double l;

		if (inputs)
			memcpy(ws->act[0], x + s * w, B * w * sizeof(double));
		else if (load_rows(m, ws, x, s, B) < 0)
			rc = acct_error_set(err, ACCT_ENUMERIC, "", "the feature transform failed");
		if (rc < 0)
			break;
		forward(m, ws, y + s, B, &l, &c);
		loss += l;
		correct += c;
	}
	if (rc == 0 && ret_accuracy)
		*ret_accuracy = n ? (double)correct / (double)n : NAN;
	if (rc == 0 && ret_loss)
		*ret_loss = n ? loss / (double)n : NAN;
	trn__workspace_free(ws);
	free(cx);
	free(cy);
	return rc;
}

int trn__model_evaluate_inputs(const trn_model *m, const double *x, const uint32_t *y,
			       size_t n, double *ret_accuracy, double *ret_loss,
			       acct_error *err)
{
	return evaluate_rows(m, x, y, n, true, ret_accuracy, ret_loss, err);
}

int trn_model_evaluate(const trn_model *m, const trn_dataset *ds, double *ret_accuracy,
		       double *ret_loss, acct_error *err)
{
	if (!m || !ds || ds->d != m->input_dim || ds->num_classes != m->dims[m->n_layers])
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the table does not match the model's shape");
	if (m->conv)
		return trn__conv_model_evaluate(m, ds, ret_accuracy, ret_loss, err);
	return evaluate_rows(m, ds->x, ds->y, ds->n, false, ret_accuracy, ret_loss, err);
}

/* Runs one raw row through the model into a one-row workspace; the softmax
 * of the logits is left in ws->act[n_layers]. */
static int forward_one(const trn_model *m, const double *x, size_t d, trn__workspace **ret_ws,
		       acct_error *err)
{
	uint32_t dummy = 0;
	int rc;

	if (!m || !x || d != m->input_dim)
		return acct_error_set(err, ACCT_EINVAL, "/features",
				      "expected %u features", m ? m->input_dim : 0);
	rc = trn__workspace_new(m, 1, ret_ws, err);
	if (rc < 0)
		return rc;
	if (load_rows(m, *ret_ws, x, 0, 1) < 0) {
		trn__workspace_free(*ret_ws);
		*ret_ws = NULL;
		return acct_error_set(err, ACCT_ENUMERIC, "", "the feature transform failed");
	}
	forward(m, *ret_ws, &dummy, 1, NULL, NULL);
	return 0;
}

int trn_model_predict(const trn_model *m, const double *x, size_t d, uint32_t *ret_class,
		      acct_error *err)
{
	trn__workspace *ws = NULL;
	double scores[DPG_MAX_CLASSES];
	int rc;

	if (m && m->conv) {
		rc = trn_model_scores(m, x, d, scores, m->dims[m->n_layers], err);
		if (rc == 0)
			*ret_class = trn__argmax(scores, m->dims[m->n_layers]);
		return rc;
	}
	rc = forward_one(m, x, d, &ws, err);
	if (rc < 0)
		return rc;
	*ret_class = trn__argmax(ws->act[m->n_layers], m->dims[m->n_layers]);
	trn__workspace_free(ws);
	return 0;
}

int trn_model_scores(const trn_model *m, const double *x, size_t d, double *scores, size_t k,
		     acct_error *err)
{
	trn__workspace *ws = NULL;
	int rc;

	if (!m || !scores || k != m->dims[m->n_layers])
		return acct_error_set(err, ACCT_EINVAL, "/scores", "expected %u classes",
				      m ? m->dims[m->n_layers] : 0);
	if (m->conv) {
		if (!x || d != m->input_dim)
			return acct_error_set(err, ACCT_EINVAL, "/features", "expected %u features",
					      m->input_dim);
		return trn__conv_model_scores(m, x, 1, scores, err);
	}
	rc = forward_one(m, x, d, &ws, err);
	if (rc < 0)
		return rc;
	memcpy(scores, ws->act[m->n_layers], k * sizeof(double));
	trn__workspace_free(ws);
	return 0;
}

uint32_t trn_model_input_dim(const trn_model *m)
{
	return m ? m->input_dim : 0;
}

uint32_t trn_model_num_classes(const trn_model *m)
{
	return m ? m->dims[m->n_layers] : 0;
}

void trn_model_info_get(const trn_model *m, trn_model_info *ret)
{
	*ret = (trn_model_info){
		.input_dim = m->input_dim,
		.proj_dim = m->proj_dim,
		.proj = m->proj_dim ? m->proj : NULL,
		.n_layers = m->n_layers,
		.widths = m->dims,
		.activations = m->layer_act,
		.params = m->params,
		.n_params = m->n_params,
		.input_rule = (trn_input_rule)m->input_rule,
		.input_scale = m->input_scale,
		.feature_rule = (trn_feature_rule)m->feature_rule,
		.conv = m->conv ? trn_convnet_spec(m->conv) : NULL,
	};
	if (m->conv)
		ret->params = trn_convnet_params(m->conv);
	if (m->feature_rule != TRN_FEATURE_RULE_NONE) {
		ret->scatter_rows = m->scatter_rows;
		ret->scatter_cols = m->scatter_cols;
		ret->scatter_j = TRN_DPSGD_SCATTER_J;
		ret->scatter_l = TRN_DPSGD_SCATTER_L;
		ret->scatter_groups = m->scatter_groups;
	}
}

/* Checks per-layer codes (each known, the last identity) and an input rule
 * with its scale. */
static int check_layers_and_rule(uint32_t n_layers, const uint32_t *acts, uint32_t rule,
				 double scale, acct_error *err)
{
	for (uint32_t l = 0; l < n_layers; l++)
		if (acts[l] > TRN_ACT_MAX || (l + 1 == n_layers && acts[l] != TRN_ACT_IDENTITY))
			return acct_error_set(err, ACCT_EINVAL, "/model/activations",
					      "layer %u has a bad activation code %u", l + 1,
					      acts[l]);
	if (rule != TRN_INPUT_NONE && rule != TRN_INPUT_UNIT_BALL)
		return acct_error_set(err, ACCT_EINVAL, "/model/input_rule",
				      "unknown input rule %u", rule);
	if (!isfinite(scale) || scale <= 0.0)
		return acct_error_set(err, ACCT_EINVAL, "/model/input_scale",
				      "the input scale must be finite and positive");
	return 0;
}

/* A model of the given widths and per-layer codes with zero weights.  The
 * hidden-layer code recorded for initialisation is the first layer's. */
static int model_new_layers(uint32_t n_layers, const uint32_t *widths, const uint32_t *acts,
			    uint32_t rule, double scale, trn_model **ret, acct_error *err)
{
	trn_model *m = NULL;
	int rc = check_layers_and_rule(n_layers, acts, rule, scale, err);

	if (rc < 0)
		return rc;
	/* Bounds only: the per-layer codes replace the single code below. */
	rc = trn__model_new(n_layers, widths, n_layers > 1 ? TRN_ACT_RELU : 0, &m, err);
	if (rc < 0)
		return rc;
	m->activation = n_layers > 1 ? acts[0] : 0;
	memcpy(m->layer_act, acts, n_layers * sizeof(uint32_t));
	m->input_rule = rule;
	m->input_scale = rule == TRN_INPUT_NONE ? 1.0 : scale;
	*ret = m;
	return 0;
}

int trn_model_from_layers(uint32_t n_layers, const uint32_t *widths,
			  const uint32_t *activations, const double *params,
			  trn_input_rule rule, double input_scale, trn_model **ret,
			  acct_error *err)
{
	trn_model *m = NULL;
	int rc;

	if (!widths || !activations || !params || !ret)
		return acct_error_set(err, ACCT_EINVAL, "/model", "missing layers");
	rc = model_new_layers(n_layers, widths, activations, rule,
			      rule == TRN_INPUT_NONE ? 1.0 : input_scale, &m, err);
	if (rc < 0)
		return rc;
	if ((rc = trn__check_finite(params, m->n_params, "weight", err)) < 0) {
		trn_model_free(m);
		return rc;
	}
	memcpy(m->params, params, m->n_params * sizeof(double));
	*ret = m;
	return 0;
}

/* ---- serialisation ------------------------------------------------------ */

/* Bytes before the widths: magic, version, five u32 fields, and from
 * version 2 the input scale; version 3's feature-transform block. */
#define MODEL_V1_HEADER 32u
#define MODEL_V2_HEADER 40u
#define MODEL_V3_FEATURE_BLOCK 24u
/* The version written for a model with a feature transform. */
#define MODEL_FEATURES_VERSION 3u

/* The whole file's length for a given version and shape. */
static size_t model_file_len(uint32_t version, uint32_t n_layers, size_t n_proj,
			     size_t n_params)
{
	if (version == 1)
		return MODEL_V1_HEADER + 4 * (n_layers + 1) + 8 * (n_proj + n_params);
	return MODEL_V2_HEADER + 4 * (n_layers + 1) + 4 * (size_t)n_layers +
	       (version == MODEL_FEATURES_VERSION ? MODEL_V3_FEATURE_BLOCK : 0) +
	       8 * (n_proj + n_params);
}

int trn_model_serialize(const trn_model *m, uint8_t **ret_buf, size_t *ret_len,
			acct_error *err)
{
	size_t n_proj = (size_t)m->input_dim * m->proj_dim, len;
	uint32_t version = m->feature_rule != TRN_FEATURE_RULE_NONE ? MODEL_FEATURES_VERSION
								     : TRN_MODEL_FORMAT_VERSION;
	uint8_t *buf, *p;

	if (m->conv)
		return trn__conv_model_serialize(m, ret_buf, ret_len, err);
	len = model_file_len(version, m->n_layers, n_proj, m->n_params);
	buf = malloc(len);
	if (!buf)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory serialising a model");
	memcpy(buf, TRN_MODEL_MAGIC, 8);
	p = buf + 8;
	p = trn__put_u32(p, version);
	p = trn__put_u32(p, m->input_rule);
	p = trn__put_u32(p, m->input_dim);
	p = trn__put_u32(p, m->proj_dim);
	p = trn__put_u32(p, m->n_layers);
	p = trn__put_u32(p, m->dims[m->n_layers]);
	p = trn__put_f64(p, m->input_scale);
	for (uint32_t l = 0; l <= m->n_layers; l++)
		p = trn__put_u32(p, m->dims[l]);
	for (uint32_t l = 0; l < m->n_layers; l++)
		p = trn__put_u32(p, m->layer_act[l]);
	if (version == MODEL_FEATURES_VERSION) {
		p = trn__put_u32(p, m->feature_rule);
		p = trn__put_u32(p, m->scatter_rows);
		p = trn__put_u32(p, m->scatter_cols);
		p = trn__put_u32(p, TRN_DPSGD_SCATTER_J);
		p = trn__put_u32(p, TRN_DPSGD_SCATTER_L);
		p = trn__put_u32(p, m->scatter_groups);
	}
	for (size_t i = 0; i < n_proj; i++)
		p = trn__put_f64(p, m->proj[i]);
	/* params is already laid out as W_1, b_1, W_2, b_2, ... */
	for (size_t i = 0; i < m->n_params; i++)
		p = trn__put_f64(p, m->params[i]);
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/* The fields of either version's header, once read. */
typedef struct model_header {
	uint32_t version, rule, input_dim, proj_dim, n_layers, classes;
	double scale;
	uint32_t widths[TRN_MAX_LAYERS + 1];
	uint32_t acts[TRN_MAX_LAYERS];
	/* version 3: feature rule, image rows and columns, J, L, groups */
	uint32_t feature[MODEL_V3_FEATURE_BLOCK / 4];
	const uint8_t *body; /* the projection, then the layers */
} model_header;

/* Reads a v1 (hidden activation at 12) or v2 (input rule at 12, scale at
 * 32, per-layer codes after the widths) header and checks its bounds. */
static int read_header(const uint8_t *buf, size_t len, model_header *h, acct_error *err)
{
	uint32_t word12;
	size_t fixed;
	const uint8_t *p;

	if (!buf || len < MODEL_V1_HEADER || memcmp(buf, TRN_MODEL_MAGIC, 8) != 0)
		return acct_error_set(err, ACCT_EINVAL, "/model", "not a dpgate model file");
	h->version = trn__get_u32(buf + 8);
	word12 = trn__get_u32(buf + 12);
	h->input_dim = trn__get_u32(buf + 16);
	h->proj_dim = trn__get_u32(buf + 20);
	h->n_layers = trn__get_u32(buf + 24);
	h->classes = trn__get_u32(buf + 28);
	fixed = h->version == 1 ? MODEL_V1_HEADER : MODEL_V2_HEADER;
	if (h->version < 1 || h->version > MODEL_FEATURES_VERSION || h->n_layers < 1 ||
	    h->n_layers > TRN_MAX_LAYERS || h->input_dim < 1 || h->input_dim > DPG_MAX_FEATURES ||
	    h->proj_dim > DPG_MAX_PCA_COMPONENTS || h->proj_dim > h->input_dim ||
	    (h->version == 1 && (word12 > TRN_ACT_TANH || (word12 == 0) != (h->n_layers == 1))) ||
	    len < fixed + 4 * (size_t)(h->n_layers + 1) +
		    (h->version == 1 ? 0 : 4 * (size_t)h->n_layers) +
		    (h->version == MODEL_FEATURES_VERSION ? MODEL_V3_FEATURE_BLOCK : 0))
		return acct_error_set(err, ACCT_EINVAL, "/model", "bad model header");
	h->rule = h->version == 1 ? TRN_INPUT_NONE : word12;
	h->scale = h->version == 1 ? 1.0 : trn__get_f64(buf + 32);
	p = buf + fixed;
	for (uint32_t l = 0; l <= h->n_layers; l++, p += 4)
		h->widths[l] = trn__get_u32(p);
	for (uint32_t l = 0; l < h->n_layers; l++)
		if (h->version == 1)
			h->acts[l] = l + 1 < h->n_layers ? word12 : TRN_ACT_IDENTITY;
		else
			h->acts[l] = trn__get_u32(p + 4 * l);
	h->body = h->version == 1 ? p : p + 4 * h->n_layers;
	memset(h->feature, 0, sizeof(h->feature));
	if (h->version == MODEL_FEATURES_VERSION) {
		for (size_t i = 0; i < MODEL_V3_FEATURE_BLOCK / 4; i++)
			h->feature[i] = trn__get_u32(h->body + 4 * i);
		h->body += MODEL_V3_FEATURE_BLOCK;
		/* The transform's own checks (trn__model_set_scatter) fix w_0. */
		if (h->feature[0] != TRN_FEATURE_RULE_SCATTER_GROUPNORM ||
		    h->feature[3] != TRN_DPSGD_SCATTER_J || h->feature[4] != TRN_DPSGD_SCATTER_L ||
		    h->proj_dim != 0 || h->rule != TRN_INPUT_NONE ||
		    (uint64_t)h->feature[1] * h->feature[2] != h->input_dim)
			return acct_error_set(err, ACCT_EINVAL, "/model", "bad feature transform");
	}
	if ((h->version != MODEL_FEATURES_VERSION &&
	     h->widths[0] != (h->proj_dim ? h->proj_dim : h->input_dim)) ||
	    h->widths[h->n_layers] != h->classes)
		return acct_error_set(err, ACCT_EINVAL, "/model", "inconsistent layer widths");
	return 0;
}

int trn_model_deserialize(const uint8_t *buf, size_t len, trn_model **ret, acct_error *err)
{
	model_header h;
	trn_model *m = NULL;
	const uint8_t *p;
	size_t n_proj, need;
	int rc;

	if (buf && len >= MODEL_V1_HEADER && memcmp(buf, TRN_MODEL_MAGIC, 8) == 0 &&
	    trn__get_u32(buf + 8) == TRN__MODEL_CONV_VERSION)
		return trn__conv_model_deserialize(buf, len, ret, err);
	rc = read_header(buf, len, &h, err);
	if (rc < 0)
		return rc;
	rc = model_new_layers(h.n_layers, h.widths, h.acts, h.rule, h.scale, &m, err);
	if (rc < 0)
		return acct_error_set(err, ACCT_EINVAL, "/model", "bad layers or input rule");
	n_proj = (size_t)h.input_dim * h.proj_dim;
	need = model_file_len(h.version, h.n_layers, n_proj, m->n_params);
	if (len != need) {
		rc = acct_error_set(err, ACCT_EINVAL, "/model",
				    "model file has %zu bytes, expected %zu", len, need);
		goto out;
	}
	m->input_dim = h.input_dim;
	m->proj_dim = h.proj_dim;
	if (h.version == MODEL_FEATURES_VERSION) {
		rc = trn__model_set_scatter(m, h.feature[1], h.feature[2], h.feature[5], err);
		if (rc < 0)
			goto out;
	}
	p = h.body;
	if (h.proj_dim) {
		m->proj = malloc(n_proj * sizeof(double));
		if (!m->proj) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto out;
		}
		for (size_t i = 0; i < n_proj; i++, p += 8)
			m->proj[i] = trn__get_f64(p);
	}
	for (size_t i = 0; i < m->n_params; i++, p += 8)
		m->params[i] = trn__get_f64(p);
	/* No model this server trains holds a value that is not finite (a
	 * file with one is damaged), and it would score every row NaN. */
	if ((rc = trn__check_finite(m->proj, n_proj, "projection entry", err)) < 0 ||
	    (rc = trn__check_finite(m->params, m->n_params, "weight", err)) < 0)
		goto out;
	*ret = m;
	m = NULL;
	rc = 0;
out:
	trn_model_free(m);
	return rc;
}
