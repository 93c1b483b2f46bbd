/*
 * trn_slmc_init.c: the initial memberships of DP-SLMC from public rows.
 *
 * SLMC's alternation keeps the partition it starts from when lambda is
 * large and drifts to one cluster when it is small, so the start decides
 * most of the result; the SLMC papers start from FCM.  FCM on a learner's
 * private rows would tie every row's start to every other row (the centres
 * move when one row changes) and void the per-round sensitivity bound, so
 * FCM runs on public auxiliary rows instead, and each private row's first
 * memberships are the FCM formula against those public centres: a
 * function of that row alone.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trn_slmc_internal.h"

static double sq_dist(const double *a, const double *b, size_t d)
{
	double s = 0.0;

	for (size_t j = 0; j < d; j++)
		s += (a[j] - b[j]) * (a[j] - b[j]);
	return s;
}

void trn__slmc_centre_memberships(const double *x, size_t d, const double *centres,
				  uint32_t C, double m, double *ret_u)
{
	for (uint32_t k = 0; k < C; k++)
		ret_u[k] = sq_dist(x, centres + (size_t)k * d, d);
	trn__slmc_fcm_weights(ret_u, C, m);
}

/* k-means++: each next centre a row drawn with probability proportional to
 * its squared distance to the nearest centre so far. */
static int seed_centres(const trn_dataset *pub, uint32_t C, mech_rng *rng, double *dmin,
			double *cent)
{
	size_t d = pub->d;
	uint64_t first;

	if (mech_rng_uint_below(rng, pub->n, &first) != 0)
		return -1;
	memcpy(cent, pub->x + first * d, d * sizeof(double));
	for (size_t i = 0; i < pub->n; i++)
		dmin[i] = sq_dist(pub->x + i * d, cent, d);
	for (uint32_t k = 1; k < C; k++) {
		double tot = 0.0, u, acc = 0.0;
		size_t pick = pub->n - 1;

		for (size_t i = 0; i < pub->n; i++)
			tot += dmin[i];
		if (mech_rng_uniform(rng, &u) != 0)
			return -1;
		for (size_t i = 0; i < pub->n; i++) {
			acc += dmin[i];
			if (acc > u * tot) {
				pick = i;
				break;
			}
		}
		memcpy(cent + (size_t)k * d, pub->x + pick * d, d * sizeof(double));
		for (size_t i = 0; i < pub->n; i++)
			dmin[i] = fmin(dmin[i], sq_dist(pub->x + i * d, cent + (size_t)k * d, d));
	}
	return 0;
}

/* One FCM round: memberships u^m into w (n x C), then weighted means. */
static void fcm_round(const trn_dataset *pub, uint32_t C, double m, double *w, double *cent)
{
	size_t d = pub->d;

	for (size_t i = 0; i < pub->n; i++) {
		trn__slmc_centre_memberships(pub->x + i * d, d, cent, C, m, w + i * C);
		for (uint32_t k = 0; k < C; k++)
			w[i * C + k] = pow(w[i * C + k], m);
	}
	for (uint32_t k = 0; k < C; k++) {
		double tot = 0.0;

		for (size_t i = 0; i < pub->n; i++)
			tot += w[i * C + k];
		if (!(tot > 0.0))
			continue;  /* an empty centre stays where it is */
		memset(cent + (size_t)k * d, 0, d * sizeof(double));
		for (size_t i = 0; i < pub->n; i++)
			for (size_t j = 0; j < d; j++)
				cent[(size_t)k * d + j] += w[i * C + k] / tot * pub->x[i * d + j];
	}
}

int trn__slmc_fcm_centres(const trn_dataset *pub, uint32_t C, double m, mech_rng *rng,
			  double *ret_centres, acct_error *err)
{
	double *w = malloc(pub->n * (size_t)(C > 1 ? C : 1) * sizeof(double));
	int rc = 0;

	if (!w)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (seed_centres(pub, C, rng, w, ret_centres) != 0) {
		rc = acct_error_set(err, ACCT_EINTERNAL, "", "the random source failed");
		goto out;
	}
	for (int r = 0; r < TRN_SLMC_FCM_ROUNDS; r++)
		fcm_round(pub, C, m, w, ret_centres);
out:
	free(w);
	return rc;
}
