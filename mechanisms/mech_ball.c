/*
 * mech_ball.c: noise for output perturbation under an L2 sensitivity bound
 * (Chaudhuri, Monteleoni, Sarwate, JMLR 2011, Algorithm 1; Hamm, Cao,
 * Belkin, ICML 2016, Theorems 1 and 3): eta in R^d with density
 * proportional to exp(-beta ||eta||).
 *
 * In polar form the density factors into r^(d-1) exp(-beta r) for the norm
 * r (the surface of the sphere of radius r grows as r^(d-1)), i.e. r ~
 * Gamma(shape d, scale 1/beta), times the uniform law on the unit sphere
 * for the direction.  With d an integer the Gamma variate is exactly a sum
 * of d independent Exp(1) variates over beta, drawn to full relative
 * precision (mech__exp1); the direction is a vector of d standard normals
 * over its norm (Muller 1959).  Everything comes from the caller's mech_rng.
 * A rejection sampler in Cartesian coordinates was not considered: its
 * acceptance rate decays exponentially in d.
 */
#include <math.h>

#include "mech.h"
#include "mech_internal.h"

/* A direction uniform on the unit sphere of R^d, in out[0..d). */
static int unit_direction(mech_rng *rng, size_t d, double *out)
{
	double s;

	/* A zero vector has probability 0; redraw rather than divide by it. */
	do {
		s = 0.0;
		if (mech_rng_normal_fill(rng, out, d) < 0)
			return ACCT_EINTERNAL;
		for (size_t j = 0; j < d; j++)
			s += out[j] * out[j];
	} while (s == 0.0);
	s = sqrt(s);
	for (size_t j = 0; j < d; j++)
		out[j] /= s;
	return 0;
}

int mech_ball_sample(mech_rng *rng, size_t d, double beta, double *out, acct_error *err)
{
	double r = 0.0;
	int rc;

	if (!rng || !out || d == 0 || d > DPG_MAX_VECTOR_LEN)
		return acct_error_set(err, ACCT_EINVAL, "/d", "the dimension must be 1 to %d",
				      DPG_MAX_VECTOR_LEN);
	if (!isfinite(beta) || beta <= 0.0)
		return acct_error_set(err, ACCT_EINVAL, "/beta",
				      "beta must be finite and positive");
	/* Gamma(d, 1) as a sum of d Exp(1) variates. */
	for (size_t j = 0; j < d; j++) {
		double e;

		if (mech__exp1(rng, &e) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random stream failed");
		r += e;
	}
	r /= beta;
	rc = unit_direction(rng, d, out);
	if (rc < 0)
		return acct_error_set(err, rc, "", "the random stream failed");
	for (size_t j = 0; j < d; j++)
		out[j] *= r;
	return 0;
}
