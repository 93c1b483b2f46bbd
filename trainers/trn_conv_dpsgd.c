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
 * gaussian(sigma))), built there and nowhere else.  The step itself is
 * trn_conv_sgd.c's, which a job's run (trn_dpsgd.c) takes too.
 */
#include <stdlib.h>

#include "trn_internal.h"

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
