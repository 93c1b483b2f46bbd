/*
 * test_sensitivity.c: the sensitivities the mechanisms on values sent rely
 * on, each checked on random neighbouring inputs through the code's own
 * computation.
 *
 * The grid (mech_noise.c's header comment, docs/mechanisms.md
 * "Sensitivities on the noise grid"): the sensitivity a real-valued
 * Laplace or Gaussian release names on its grid holds.
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
 *
 * Selection (docs/mechanisms.md, "Selection scores"): the distribution the
 * exponential mechanism's exponents define moves by at most its event's
 * epsilon in log-probability between scores that each move by at most D
 * (in one direction, for monotone scores); report-noisy-max's grid scores
 * move by at most the integer sensitivity its event states.
 *
 * The label EM (mech_labelem.c): two label columns that differ in one
 * label, released with one seeded stream each, give releases that differ
 * in that label only: the mechanism is randomized response label by label.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "mech.h"
#include "mech_internal.h"
#include "test_util.h"

enum { MAX_D = 8, TRIALS = 400, SUBUNITS = 256 };

/* Neighbours a and b = a + delta in units of g / SUBUNITS: a's units are
 * below 2^48, and delta's are the signed integers du[i] with sum |du|
 * about `total`.  Adversarial: each |du| one subunit past a whole number
 * m of grid units, a one subunit below a grid point when du > 0 and on
 * one when du < 0, so that the index moves by m + 1. */
static void neighbours(uint64_t *s, size_t d, double total, int adversarial, double g,
		       double *a, double *b, double *du)
{
	for (size_t i = 0; i < d; i++) {
		double units = floor(test_lcg_unit(s) * 0x1p40), sign = test_lcg_unit(s) < 0.5 ? -1 : 1;
		double m = floor(total / (double)d / SUBUNITS), sub;

		if (adversarial) {
			sub = units * SUBUNITS + (sign > 0 ? SUBUNITS - 1 : 0);
			du[i] = sign * (m * SUBUNITS + 1);
		} else {
			sub = units * SUBUNITS + floor(test_lcg_unit(s) * SUBUNITS);
			du[i] = sign * floor(test_lcg_unit(s) * 2.0 * total / (double)d);
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
		size_t d = 1 + (size_t)(test_lcg_unit(&s) * MAX_D);
		double a[MAX_D], b[MAX_D], du[MAX_D], moves[MAX_D], sens = 0.0, moved = 0.0, stated;
		double scale = 0.5 + 3.5 * test_lcg_unit(&s), g;
		int e, shift;
		acct_event *ev;

		frexp(scale, &e);
		shift = (gaussian ? 20 : 40) - e;
		g = ldexp(1.0, -shift);
		/* D up to about 2 scales: epsilon up to 2, rho up to 2. */
		neighbours(&s, d, (0.05 + 2 * test_lcg_unit(&s)) * ldexp(scale, shift) * SUBUNITS,
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

/* log Pr[i] of the distribution e^(-g_i) / sum_j e^(-g_j) that the code's
 * exponents for `scores` define, in long double. */
static void selection_log_probs(const double *u, size_t n, double c, long double *ret)
{
	double top = u[0];
	long double norm = 0.0L;

	for (size_t i = 1; i < n; i++)
		top = fmax(top, u[i]);
	for (size_t i = 0; i < n; i++) {
		ret[i] = -(long double)mech__selection_exponent(c, top, u[i]);
		norm += expl(ret[i]);
	}
	for (size_t i = 0; i < n; i++)
		ret[i] -= logl(norm);
}

/*
 * Random scores (spreads up to 10^4 D, so the clamp at 1024 acts) and
 * neighbours that move each score by at most D (half of them by exactly
 * +D for one candidate and -D for the others, the worst case; monotone
 * neighbours all one way): the log-probabilities move by at most the
 * event's epsilon, and come within 10% of it.
 */
Test(selection, exponents_move_within_epsilon_on_random_neighbours)
{
	enum { MAX_N = 12 };
	uint64_t s = 0xa4093822299f31d0u;

	for (int monotone = 0; monotone < 2; monotone++) {
		double worst = 0.0;

		for (int trial = 0; trial < TRIALS; trial++) {
			size_t n = 2 + (size_t)(test_lcg_unit(&s) * (MAX_N - 1)), star;
			double u[MAX_N], v[MAX_N], D = 0.01 + 10 * test_lcg_unit(&s);
			double eps = 0.01 + 4 * test_lcg_unit(&s), c = mech__selection_c(eps, D, monotone);
			double spread = D * pow(10.0, 4 * test_lcg_unit(&s)), moved = 0.0;
			long double lp[MAX_N], lq[MAX_N];

			star = (size_t)(test_lcg_unit(&s) * (double)n);
			for (size_t i = 0; i < n; i++) {
				double step = D * test_lcg_unit(&s);

				u[i] = spread * (2 * test_lcg_unit(&s) - 1);
				if (monotone)
					v[i] = u[i] + (trial % 2 ? D : step);
				else if (trial % 2)
					v[i] = u[i] + (i == star ? D : -D);
				else
					v[i] = u[i] + (test_lcg_unit(&s) < 0.5 ? step : -step);
				/* The neighbour moves by at most D as doubles too. */
				if (fabs(v[i] - u[i]) > D)
					v[i] = u[i];
			}
			selection_log_probs(u, n, c, lp);
			selection_log_probs(v, n, c, lq);
			for (size_t i = 0; i < n; i++)
				moved = fmax(moved, (double)fabsl(lp[i] - lq[i]));
			cr_assert_leq(moved, mech_exponential_epsilon_used(eps),
				      "trial %d (%s): log-probabilities moved %.17g, epsilon %.17g", trial,
				      monotone ? "monotone" : "any", moved, eps);
			worst = fmax(worst, moved / eps);
		}
		cr_assert_gt(worst, 0.9, "%s: no neighbour came near epsilon (%g)",
			     monotone ? "monotone" : "any", worst);
	}
}

/*
 * Report-noisy-max with Laplace noise compares grid scores floor(u / g), g
 * the grid of mech__laplace_grid((2 or 1) D / eps), and states epsilon =
 * (2 or 1) a dz with dz = ceil(D / g) the grid scores' sensitivity
 * (docs/mechanisms.md, "Sensitivities on the noise grid").  On random scores and
 * neighbours that move each score by at most D (half of them by exactly D,
 * up from just below a grid point or down from one, where the grid score
 * moves by ceil(D / g)), the grid scores move by at most the dz the event
 * states, read back from its epsilon, and reach it.
 */
Test(selection, noisy_max_grid_scores_move_within_the_stated_sensitivity)
{
	enum { MAX_N = 12 };
	uint64_t s = 0x452821e638d01377u;

	for (int monotone = 0; monotone < 2; monotone++) {
		double worst = 0.0, f = monotone ? 1.0 : 2.0;

		for (int trial = 0; trial < TRIALS; trial++) {
			size_t n = 2 + (size_t)(test_lcg_unit(&s) * (MAX_N - 1)), idx;
			double D = 0.01 + 10 * test_lcg_unit(&s), eps = 0.05 + 4 * test_lcg_unit(&s);
			double u[MAX_N], v[MAX_N], g, a, dz, moved = 0.0;
			uint64_t num, den;
			int shift;
			mech_rng *r = test_rng((uint8_t)trial);
			acct_event *ev = NULL;
			acct_error err;

			cr_assert_eq(mech__laplace_grid(f * D / eps, &shift, &num, &den), 0);
			g = ldexp(1.0, -shift);
			for (size_t i = 0; i < n; i++) {
				double k = floor((2 * test_lcg_unit(&s) - 1) * 0x1p44);
				double step = trial % 2 ? D : D * test_lcg_unit(&s);
				bool up = monotone || test_lcg_unit(&s) < 0.5;

				u[i] = up ? (k + 1) * g - g / 256 : k * g;
				v[i] = up ? u[i] + step : u[i] - step;
				/* The neighbour moves by at most D as doubles too. */
				while (fabs(v[i] - u[i]) > D)
					v[i] = nextafter(v[i], u[i]);
				moved = fmax(moved, fabs(floor(ldexp(u[i], shift)) -
							 floor(ldexp(v[i], shift))));
			}
			acct_error_init(&err);
			cr_assert_eq(mech_report_noisy_max(r, u, n, D, MECH_RNM_LAPLACE, eps, monotone,
							   &idx, &ev, &err),
				     0, "%s", err.text);
			cr_assert_eq(ev->type, ACCT_EV_EPSILON_DELTA);
			a = nextafter((double)den / (double)num, INFINITY);
			dz = nearbyint(ev->u.epsilon_delta.epsilon / (f * a));
			cr_assert_leq(moved, dz,
				      "trial %d (%s): grid scores moved %.17g, the event states %.17g "
				      "(D / g = %.17g)",
				      trial, monotone ? "monotone" : "any", moved, dz, D / g);
			worst = fmax(worst, moved / dz);
			acct_event_free(ev);
			mech_rng_free(r);
		}
		cr_assert_gt(worst, 0.999, "%s: no neighbour came near the stated sensitivity (%g)",
			     monotone ? "monotone" : "any", worst);
	}
}

/*
 * Random label columns and the same with one label flipped, released with
 * one seeded stream each: the releases differ exactly at that label, so
 * each label is released by its own randomized response, whose loss is
 * the event's log(p / (1 - p)); the events agree.
 */
Test(labelem, releases_of_neighbouring_columns_differ_in_one_label)
{
	enum { MAX_N = 200 };
	uint64_t s = 0x082efa98ec4e6c89u;

	for (int trial = 0; trial < 100; trial++) {
		size_t n = 1 + (size_t)(test_lcg_unit(&s) * MAX_N), j = (size_t)(test_lcg_unit(&s) * (double)n);
		uint8_t x[MAX_N], y[MAX_N], rx[MAX_N], ry[MAX_N];
		double eps = 0.05 + 4 * test_lcg_unit(&s);
		mech_rng *ka = test_rng((uint8_t)(100 + trial)), *kb = test_rng((uint8_t)(100 + trial));
		acct_event *ea = NULL, *eb = NULL;
		size_t differ = 0;

		cr_assert(ka && kb);
		for (size_t i = 0; i < n; i++)
			x[i] = y[i] = test_lcg_unit(&s) < 0.5;
		y[j] = (uint8_t)(1u - y[j]);
		cr_assert_eq(mech_label_em(ka, x, n, eps, 1.0, rx, &ea, NULL), 0);
		cr_assert_eq(mech_label_em(kb, y, n, eps, 1.0, ry, &eb, NULL), 0);
		for (size_t i = 0; i < n; i++)
			differ += rx[i] != ry[i];
		cr_assert_eq(differ, 1, "trial %d: the releases differ in %zu labels", trial, differ);
		cr_assert_neq(rx[j], ry[j], "trial %d: not at the flipped label", trial);
		cr_assert_eq(ea->u.randomized_response.noise_parameter,
			     eb->u.randomized_response.noise_parameter);
		acct_event_free(ea);
		acct_event_free(eb);
		mech_rng_free(ka);
		mech_rng_free(kb);
	}
}
