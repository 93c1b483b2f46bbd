/*
 * test_grid_sensitivity.c: the sensitivities a real-valued Laplace or
 * Gaussian release names on its grid (mech_noise.c's header comment,
 * docs/mechanisms.md "Sensitivities on the noise grid") hold on random
 * neighbouring inputs.
 *
 * Two inputs a and b whose distance is the caller's sensitivity D (L1 for
 * Laplace, L2 for the Gaussian) are released with one seeded stream each
 * (the same seed), so the outputs differ by exactly the move of the grid
 * indices floor(x / g); the test reads g from the closed form of the
 * header comment (the Laplace scale spans 2^39..2^40 grid units, sigma
 * 2^19..2^20), checks that the outputs' difference is a whole number of
 * grid units, and that the move is within the integer sensitivity the
 * event states.  The inputs are built in units of g / 256, so every value
 * and every distance is exact; half the trials put each coordinate just
 * below a grid point and move it just across one more, where the move
 * reaches ceil(D / g) + d - 1 (L1) and nearly D / g + sqrt(d) (L2): a
 * bound without its rounding term fails there.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "mech.h"
#include "test_util.h"

enum { MAX_D = 8, TRIALS = 400, SUBUNITS = 256 };

/* A uniform double in [0, 1) from the 53 high bits of a 64-bit LCG. */
static double lcg_unit(uint64_t *s)
{
	*s = *s * 6364136223846793005u + 1442695040888963407u;
	return (double)(*s >> 11) * 0x1p-53;
}

/* Neighbours a and b = a + delta in units of g / SUBUNITS: a's units are
 * below 2^48, and delta's are the signed integers du[i] with sum |du|
 * about `total`.  Adversarial: each |du| one subunit past a whole number
 * m of grid units, a one subunit below a grid point when du > 0 and on
 * one when du < 0, so that the index moves by m + 1. */
static void neighbours(uint64_t *s, size_t d, double total, int adversarial, double g,
		       double *a, double *b, double *du)
{
	for (size_t i = 0; i < d; i++) {
		double units = floor(lcg_unit(s) * 0x1p40), sign = lcg_unit(s) < 0.5 ? -1 : 1;
		double m = floor(total / (double)d / SUBUNITS), sub;

		if (adversarial) {
			sub = units * SUBUNITS + (sign > 0 ? SUBUNITS - 1 : 0);
			du[i] = sign * (m * SUBUNITS + 1);
		} else {
			sub = units * SUBUNITS + floor(lcg_unit(s) * SUBUNITS);
			du[i] = sign * floor(lcg_unit(s) * 2.0 * total / (double)d);
		}
		a[i] = sub * g / SUBUNITS;
		b[i] = (sub + du[i]) * g / SUBUNITS;
	}
}

/* The grid move of one coordinate: (out_b - out_a) / g, asserted whole. */
static double grid_move(double out_a, double out_b, double g, int trial)
{
	double k = (out_b - out_a) / g;

	cr_assert_eq(k, nearbyint(k), "trial %d: the outputs are %.17g grid units apart", trial, k);
	return k;
}

/* Releases a and b with one seeded stream each; returns the event of b's
 * release (a's is the same) and the per-coordinate grid moves. */
static acct_event *release_pair(int gaussian, const double *a, const double *b, size_t d,
				double sens, double scale, double g, int trial, double *moves)
{
	double out_a[MAX_D], out_b[MAX_D];
	acct_event *ev_a = NULL, *ev_b = NULL;
	mech_rng *ra = test_rng((uint8_t)trial), *rb = test_rng((uint8_t)trial);
	acct_error err = {0};
	int rc_a, rc_b;

	cr_assert(ra && rb);
	rc_a = gaussian ? mech_gaussian(ra, a, d, sens, scale, out_a, &ev_a, &err)
			: mech_laplace(ra, a, d, sens, scale, out_a, &ev_a, &err);
	cr_assert_eq(rc_a, 0, "trial %d: %s", trial, err.text);
	rc_b = gaussian ? mech_gaussian(rb, b, d, sens, scale, out_b, &ev_b, &err)
			: mech_laplace(rb, b, d, sens, scale, out_b, &ev_b, &err);
	cr_assert_eq(rc_b, 0, "trial %d: %s", trial, err.text);
	for (size_t i = 0; i < d; i++)
		moves[i] = grid_move(out_a[i], out_b[i], g, trial);
	acct_event_free(ev_a);
	mech_rng_free(ra);
	mech_rng_free(rb);
	return ev_b;
}

/* The integer L1 sensitivity a Laplace release's event states: the
 * scalar's field, or a vector's epsilon_delta {a D_Z} divided by a = 1 / t
 * (t the grid scale), which recovers the integer D_Z < 2^53 exactly. */
static double laplace_stated(const acct_event *ev, size_t d, double scale, int shift)
{
	uint64_t num = 0, den = 0;

	if (d == 1) {
		cr_assert_eq(ev->type, ACCT_EV_DISCRETE_LAPLACE);
		return ev->u.discrete_laplace.sensitivity;
	}
	cr_assert_eq(ev->type, ACCT_EV_EPSILON_DELTA);
	cr_assert_eq(mech_discrete_laplace_scale(ldexp(scale, shift), &num, &den), 0);
	return nearbyint(ev->u.epsilon_delta.epsilon * (double)num / (double)den);
}

/* The integer L2 sensitivity a Gaussian release's event states: the
 * scalar's field, or sqrt(2 rho) s for a vector's zcdp {D_Z^2 / (2 s^2)}
 * (s the sampler's sigma in grid units), within a few roundings. */
static double gaussian_stated(const acct_event *ev, size_t d, double scale, int shift)
{
	double s = mech_discrete_gaussian_sigma(ldexp(scale, shift));

	if (d == 1) {
		cr_assert_eq(ev->type, ACCT_EV_DISCRETE_GAUSSIAN);
		return ev->u.discrete_gaussian.sensitivity;
	}
	cr_assert_eq(ev->type, ACCT_EV_ZCDP);
	return sqrt(2.0 * ev->u.zcdp.rho) * s * (1 + 1e-14);
}

/* One relation's trials: `gaussian` picks the L2 release, else L1. */
static void check_releases(int gaussian)
{
	uint64_t s = gaussian ? 0x243f6a8885a308d3u : 0x13198a2e03707344u;
	double worst = 0.0;

	for (int trial = 0; trial < TRIALS; trial++) {
		size_t d = 1 + (size_t)(lcg_unit(&s) * MAX_D);
		double a[MAX_D], b[MAX_D], du[MAX_D], moves[MAX_D], sens = 0.0, moved = 0.0, stated;
		double scale = 0.5 + 3.5 * lcg_unit(&s), g;
		int e, shift;
		acct_event *ev;

		frexp(scale, &e);
		shift = (gaussian ? 20 : 40) - e;
		g = ldexp(1.0, -shift);
		/* D up to about 2 scales: epsilon up to 2, rho up to 2. */
		neighbours(&s, d, (0.05 + 2 * lcg_unit(&s)) * ldexp(scale, shift) * SUBUNITS,
			   trial % 2, g, a, b, du);
		for (size_t i = 0; i < d; i++)
			sens += gaussian ? du[i] * du[i] : fabs(du[i]);
		/* The distance in units of g / 256 is exact for L1; the L2 norm is
		 * rounded up so that D is never below the true distance. */
		sens = gaussian ? nextafter(sqrt(sens), INFINITY) * (1 + 1e-15) : sens;
		sens = sens * g / SUBUNITS;
		if (sens == 0.0)
			continue;
		ev = release_pair(gaussian, a, b, d, sens, scale, g, trial, moves);
		for (size_t i = 0; i < d; i++)
			moved += gaussian ? moves[i] * moves[i] : fabs(moves[i]);
		moved = gaussian ? sqrt(moved) : moved;
		stated = gaussian ? gaussian_stated(ev, d, scale, shift)
				  : laplace_stated(ev, d, scale, shift);
		cr_assert_leq(moved, stated,
			      "trial %d (d %zu): the grid indices moved %.17g, the event states %.17g "
			      "(D / g = %.17g)",
			      trial, d, moved, stated, sens / g);
		worst = fmax(worst, moved / stated);
		acct_event_free(ev);
	}
	cr_assert_gt(worst, 0.999, "no neighbour came near the stated sensitivity: %g", worst);
}

Test(grid_sensitivity, laplace_moves_within_the_stated_l1_on_random_neighbours)
{
	check_releases(0);
}

Test(grid_sensitivity, gaussian_moves_within_the_stated_l2_on_random_neighbours)
{
	check_releases(1);
}
