/*
 * trn_conv_sgd.c: one DP-SGD step of a convolutional model (Abadi et al.,
 * "Deep Learning with Differential Privacy", CCS 2016, Algorithm 1): the
 * lot's clipped per-example gradients (trn_conv.c's ghost norms), Gaussian
 * noise of sd sigma C per parameter from the caller's CSPRNG stream, the
 * noisy sum divided by the expected lot size, heavy-ball momentum.  With
 * "precision" "float32" the per-example passes are trn_conv_f32.c's and
 * the sum, the noise and the weights stay double.  The privacy argument
 * is trn_conv_dpsgd.c's; this file holds no event.
 */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_conv_internal.h"

struct trn_conv_sgd {
	trn_convnet *net;
	size_t n_params;
	uint32_t lot_size;
	double noise_sd, clip_norm, momentum;
	bool private;
	const atomic_bool *cancel;   /* read before each example; may be NULL */
	trn_conv_f32 *f32;           /* precision float32: its workspace, else NULL */
	/* One allocation: the lot's gradient sum, the velocity and, when
	 * private, the step's noise, n_params each. */
	double *grad, *velocity, *noise;
};

void trn_conv_sgd_free(trn_conv_sgd *s)
{
	if (s) {
		free(s->grad);
		trn__conv_f32_free(s->f32);
	}
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
	if (p->precision == TRN_PRECISION_FLOAT32 &&
	    (rc = trn__conv_f32_new(n, &s->f32, err)) < 0)
		goto out;
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

void trn_conv_sgd_set_cancel(trn_conv_sgd *s, const atomic_bool *cancel)
{
	if (s)
		s->cancel = cancel;
}

int trn_conv_sgd_step(trn_conv_sgd *s, const trn_dataset *ds, const size_t *idx, size_t count,
		      double lr, mech_rng *rng, acct_error *err)
{
	int n = (int)s->n_params;

	/* Draw the noise first, so a failing stream leaves the model as it was. */
	if (s->private && mech_rng_normal_fill_fast(rng, s->noise, s->n_params) < 0)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
	memset(s->grad, 0, s->n_params * sizeof(double));
	if (s->f32)
		trn__conv_f32_load_weights(s->f32);
	for (size_t i = 0; i < count; i++) {
		size_t row = idx[i];

		/* A cancelled run stops within the lot (an example can take a
		 * millisecond, a lot of 10^6 a quarter of an hour), before the
		 * partial sum is used. */
		if (s->cancel && atomic_load(s->cancel))
			return TRN_CANCELLED;
		/* A row of no declared class has zero gradient (trn.h's
		 * TRN_NO_CLASS): it was sampled, it adds nothing. */
		if (ds->y[row] == TRN_NO_CLASS || ds->y[row] >= ds->num_classes)
			continue;
		/* Its only failure is a label beyond the model's classes, which
		 * then adds nothing, like a row of no class. */
		if (s->f32)
			(void)trn__conv_f32_example(s->f32, ds->x + row * ds->d, ds->y[row],
						    s->clip_norm, s->grad, NULL, NULL);
		else
			(void)trn_convnet_clipped_grad(s->net, ds->x + row * ds->d, ds->y + row,
						       1, s->clip_norm, TRN_CONV_NORM_AUTO,
						       s->grad, NULL, NULL);
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
