/*
 * trn_conv_dpsgd.c: DP-SGD (Abadi et al., "Deep Learning with Differential
 * Privacy", CCS 2016, Algorithm 1) for the convolutional models of
 * trn_conv.c, the same recipe trn_dpsgd.c runs for the MLP: Poisson lots of
 * rate q = L / n_train, per-example clipping to C (trn_conv.c's ghost
 * norms, no per-example gradient stored), Gaussian noise of sd sigma C per
 * parameter from the job's CSPRNG through the ziggurat fill, the noisy sum
 * divided by the expected lot size L, heavy-ball momentum.
 *
 * Privacy: a step releases sum_i clip(g_i) + N(0, sigma^2 C^2 I) on a
 * Poisson sample, whose L2 sensitivity under add/remove of one row is C
 * (each clipped term has norm at most C; test_conv.c checks it on random
 * neighbouring batches).  That is the sampled Gaussian mechanism of
 * Mironov, Talwar and Zhang 2019 with noise multiplier sigma, so the run's
 * event is trn_dpsgd_event's self_composed(T, poisson_sampled(q,
 * gaussian(sigma))), built there and nowhere else.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_internal.h"

/* Bounds of the tempered sigmoid's s, T and |o|: beyond them a value is
 * surely a mistake (Papernot et al. 2021 search s, T in [0.5, 8]). */
#define TRN_MAX_SIGMOID_PARAM 1e3

/* The activations' names, indexed by trn_conv_act. */
static const char *const conv_act_names[] = {"tanh", "tempered_sigmoid"};

int trn_dpsgd_model_from_name(const char *name, trn_model_kind *ret)
{
	/* The other trainers' models, and the cnn of a dpsgd job. */
	if (!name || strcmp(name, "cnn") != 0)
		return trn_model_kind_from_name(name, ret);
	*ret = TRN_MODEL_CNN;
	return 0;
}

int trn_conv_act_from_name(const char *name, trn_conv_act *ret)
{
	for (uint32_t c = 0; name && c < TRN__COUNT(conv_act_names); c++)
		if (strcmp(name, conv_act_names[c]) == 0) {
			*ret = (trn_conv_act)c;
			return 0;
		}
	return -1;
}

const char *trn_conv_act_name(uint32_t code)
{
	return code < TRN__COUNT(conv_act_names) ? conv_act_names[code] : NULL;
}

/* The tempered sigmoid's s, T (in (0, max]) and o (|o| <= max). */
static int sigmoid_check(const trn_dpsgd_params *p, acct_error *err)
{
	if (trn__check_positive(p->sigmoid_scale, TRN_MAX_SIGMOID_PARAM, "/params/sigmoid_scale",
				err) < 0 ||
	    trn__check_positive(p->sigmoid_temperature, TRN_MAX_SIGMOID_PARAM,
				"/params/sigmoid_temperature", err) < 0)
		return ACCT_EINVAL;
	if (!trn__in_range(p->sigmoid_offset, -TRN_MAX_SIGMOID_PARAM, TRN_MAX_SIGMOID_PARAM))
		return acct_error_set(err, ACCT_EINVAL, "/params/sigmoid_offset",
				      "sigmoid_offset must be in [%g, %g]", -TRN_MAX_SIGMOID_PARAM,
				      TRN_MAX_SIGMOID_PARAM);
	return 0;
}

int trn__conv_params_check(const trn_dpsgd_params *p, acct_error *err)
{
	if (p->n_hidden > 1 ||
	    (p->n_hidden == 1 && (p->hidden[0] < 1 || p->hidden[0] > DPG_MAX_HIDDEN_UNITS)))
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "a cnn has one dense hidden layer of 1 to %d units",
				      DPG_MAX_HIDDEN_UNITS);
	if (trn__check_count(p->image_channels, 1, TRN_CONV_MAX_CHANNELS,
			     "/params/image_channels", err) < 0 ||
	    trn__check_count(p->n_conv, 1, TRN_CONV_MAX_CONV, "/params/conv_channels", err) < 0)
		return ACCT_EINVAL;
	for (uint32_t l = 0; l < p->n_conv; l++) {
		if (trn__check_count(p->conv_channels[l], 1, TRN_CONV_MAX_CHANNELS,
				     "/params/conv_channels", err) < 0)
			return ACCT_EINVAL;
		if (p->kernel[l] % 2 == 0 || p->kernel[l] > TRN_CONV_MAX_KERNEL)
			return acct_error_set(err, ACCT_EINVAL, "/params/kernel",
					      "a kernel side is odd ('same' padding), at most %u",
					      TRN_CONV_MAX_KERNEL);
	}
	if (p->conv_activation != TRN_CONV_TANH && p->conv_activation != TRN_CONV_TEMPERED_SIGMOID)
		return acct_error_set(err, ACCT_EINVAL, "/params/activation",
				      "a cnn's activation is \"tanh\" or \"tempered_sigmoid\"");
	if (p->conv_activation == TRN_CONV_TEMPERED_SIGMOID && sigmoid_check(p, err) < 0)
		return ACCT_EINVAL;
	/* The net reads the raw images; its clipping is of the whole gradient. */
	if (p->features == TRN_FEATURES_SCATTER || p->pca_components > 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "a cnn takes the raw images (features \"raw\")");
	if (p->clipping != TRN_CLIP_GLOBAL)
		return acct_error_set(err, ACCT_EINVAL, "/params/clipping",
				      "a cnn clips the whole gradient (\"global\")");
	return 0;
}

int trn_dpsgd_conv_spec(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			trn_conv_spec *ret, acct_error *err)
{
	trn_conv_spec s = {0};
	size_t c = p->image_channels, side = c ? (size_t)llround(sqrt((double)d / (double)c)) : 0;

	if (c < 1 || d % c != 0 || side * side != d / c)
		return acct_error_set(err, ACCT_EINVAL, "/params/image_channels",
				      "the rows' %zu features are not %zu square images", d, c);
	s.channels = (uint32_t)c;
	s.side = (uint32_t)side;
	s.n_conv = p->n_conv;
	for (uint32_t l = 0; l < p->n_conv && l < TRN_CONV_MAX_CONV; l++) {
		s.conv_channels[l] = p->conv_channels[l];
		s.kernel[l] = p->kernel[l];
	}
	s.hidden = p->n_hidden ? p->hidden[0] : 0;
	s.classes = num_classes;
	s.act = p->conv_activation;
	/* tanh is the tempered sigmoid with s = T = 2, o = 1: store those. */
	s.ts_scale = s.act == TRN_CONV_TANH ? 2.0 : p->sigmoid_scale;
	s.ts_temp = s.act == TRN_CONV_TANH ? 2.0 : p->sigmoid_temperature;
	s.ts_offset = s.act == TRN_CONV_TANH ? 1.0 : p->sigmoid_offset;
	if (trn__conv_spec_check(&s, NULL, err) < 0)
		return ACCT_EINVAL;
	*ret = s;
	return 0;
}

struct trn_conv_sgd {
	trn_convnet *net;
	size_t n_params;
	uint32_t lot_size;
	double noise_sd, clip_norm, momentum;
	bool private;
	/* One allocation: the lot's gradient sum, the velocity and, when
	 * private, the step's noise, n_params each. */
	double *grad, *velocity, *noise;
};

void trn_conv_sgd_free(trn_conv_sgd *s)
{
	if (s)
		free(s->grad);
	free(s);
}

int trn_conv_sgd_new(trn_convnet *n, const trn_dpsgd_params *p, bool private,
		     trn_conv_sgd **ret, acct_error *err)
{
	trn_conv_sgd *s = NULL;
	int rc = 0;

	if (!n || !p || p->lot_size < 1) {
		rc = acct_error_set(err, ACCT_EINVAL, "/params/lot_size", "no model or lot size");
		goto out;
	}
	if (private && !(p->noise_multiplier > 0.0 && p->clip_norm > 0.0)) {
		rc = acct_error_set(err, ACCT_EINVAL, "/params/noise_multiplier",
				    "a private run needs noise_multiplier and clip_norm > 0");
		goto out;
	}
	s = calloc(1, sizeof(*s));
	if (s)
		s->n_params = trn_convnet_n_params(n);
	if (s)
		s->grad = calloc((private ? 3 : 2) * s->n_params, sizeof(double));
	if (!s || !s->grad) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for the conv stepper");
		goto out;
	}
	s->velocity = s->grad + s->n_params;
	s->noise = private ? s->velocity + s->n_params : NULL;
	s->net = n;
	s->lot_size = p->lot_size;
	s->clip_norm = p->clip_norm;
	s->noise_sd = p->noise_multiplier * p->clip_norm;
	s->momentum = p->momentum;
	s->private = private;
	*ret = s;
	s = NULL;
out:
	trn_conv_sgd_free(s);
	return rc;
}

int trn_conv_sgd_step(trn_conv_sgd *s, const trn_dataset *ds, const size_t *idx, size_t count,
		      double lr, mech_rng *rng, acct_error *err)
{
	int n = (int)s->n_params;

	/* Draw the noise first, so a failing stream leaves the model as it was. */
	if (s->private && mech_rng_normal_fill_fast(rng, s->noise, s->n_params) < 0)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
	memset(s->grad, 0, s->n_params * sizeof(double));
	for (size_t i = 0; i < count; i++) {
		size_t row = idx[i];

		/* A row of no declared class has zero gradient (trn.h's
		 * TRN_NO_CLASS): it was sampled, it adds nothing. */
		if (ds->y[row] == TRN_NO_CLASS || ds->y[row] >= ds->num_classes)
			continue;
		/* Its only failure is a label beyond the model's classes, which
		 * then adds nothing, like a row of no class. */
		(void)trn_convnet_clipped_grad(s->net, ds->x + row * ds->d, ds->y + row, 1,
					       s->clip_norm, TRN_CONV_NORM_AUTO, s->grad, NULL,
					       NULL);
	}
	/* Algorithm 1: g~ = (sum_i clip(g_i) + N(0, sigma^2 C^2 I)) / L, with
	 * L the expected lot size, never the sampled |L_t| (which would
	 * depend on the data). */
	if (s->private)
		cblas_daxpy(n, s->noise_sd, s->noise, 1, s->grad, 1);
	/* Heavy-ball momentum: v = mu v + g~; theta -= lr v (post-processing). */
	cblas_dscal(n, s->momentum, s->velocity, 1);
	cblas_daxpy(n, 1.0 / s->lot_size, s->grad, 1, s->velocity, 1);
	cblas_daxpy(n, -lr, s->velocity, 1, trn_convnet_params(s->net), 1);
	return 0;
}

/* The run's checks and, when private, its event. */
static int train_check(trn_convnet *n, const trn_dpsgd_params *p, bool private,
		       const trn_dataset *train, acct_event **ret_event, acct_error *err)
{
	if (!train || train->n < 1 || train->d != trn_convnet_input_dim(n))
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the table's rows are not the model's input width %zu",
				      trn_convnet_input_dim(n));
	if (p->pca_components > 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/pca_components",
				      "a convolutional model takes the raw images");
	if (private)
		return trn_dpsgd_event(p, train->n, ret_event, err);
	return trn_dpsgd_params_validate(p, err);
}

int trn_convnet_dpsgd_train(trn_convnet *n, const trn_dpsgd_params *p, bool private,
			    const trn_dataset *train, mech_rng *rng, const atomic_bool *cancel,
			    acct_event **ret_event, acct_error *err)
{
	trn_conv_sgd *s = NULL;
	acct_event *ev = NULL;
	uint64_t *ubuf = NULL;
	size_t *idx = NULL;
	int64_t steps;
	double q;
	int rc = train_check(n, p, private, train, &ev, err);

	if (rc < 0)
		goto out;
	rc = trn_conv_sgd_new(n, p, private, &s, err);
	if (rc < 0)
		goto out;
	steps = trn_dpsgd_steps(p, train->n);
	/* q as trn_dpsgd_event prices it: every step samples all n_train rows. */
	q = (double)p->lot_size / (double)train->n;
	ubuf = malloc(train->n * sizeof(uint64_t));
	idx = malloc(train->n * sizeof(size_t));
	if (!ubuf || !idx) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for the lots");
		goto out;
	}
	for (int64_t t = 0; t < steps && !(cancel && atomic_load(cancel)); t++) {
		size_t count = 0;

		if (trn__poisson_sample(rng, train->n, q, ubuf, idx, &count) < 0) {
			rc = acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
			goto out;
		}
		rc = trn_conv_sgd_step(s, train, idx, count, p->learning_rate, rng, err);
		if (rc < 0)
			goto out;
	}
	if (ret_event) {
		*ret_event = ev;
		ev = NULL;
	}
out:
	acct_event_free(ev);
	trn_conv_sgd_free(s);
	free(ubuf);
	free(idx);
	return rc;
}
