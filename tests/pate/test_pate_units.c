/*
 * test_pate_units.c: the aggregator shared by the PATE sessions and the
 * pate trainer (mechanisms/mech_pate.c), and the trainer's partition,
 * event and run (trainers/trn_pate*.c).
 *
 * Expected values come from closed forms derived here (the Gaussian tail of
 * a GNMax comparison, the RDP of each event, Theorem 23), from the
 * accountant's PATE analysis (checked against the reference vectors by the
 * `pate` suite) recomposed here, or from a coupling argument run on two
 * seeded streams; never from numbers this code printed.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>

#include "mech.h"
#include "trn.h"
#include "trn_internal.h"
#include "trn_test_rng.h"
#include "test_votes.h"

static const uint8_t PREFIX[2] = {'P', 'J'};

static void setup(void)
{
	gsl_set_error_handler_off();
}

TestSuite(pate_units, .init = setup);

/* A configuration of `agg` with one analysis order. */
static mech_pate_cfg cfg_of(mech_pate_agg agg, int64_t teachers, int64_t classes, double s1,
			    double s2, double T, double order)
{
	mech_pate_cfg c;

	memset(&c, 0, sizeof(c));
	c.agg = agg;
	c.num_teachers = teachers;
	c.num_classes = classes;
	c.sigma1 = s1;
	c.sigma2 = s2;
	c.threshold = T;
	c.student_confidence = NAN;
	c.n_orders = 1;
	c.orders[0] = order;
	cr_assert_eq(mech_pate_cfg_resolve(&c, NULL), 0);
	return c;
}

/* ---- the aggregator -------------------------------------------------------- */

Test(pate_units, confident_answers_a_consensus_with_its_data_dependent_rdp)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_CONFIDENT, 250, 10, 4, 2, 200, 8);
	double v[10] = {245, 1, 1, 1, 1, 1, 0, 0, 0, 0}, dd, want = 0, pair[2], logpr, logq, r;
	mech_rng *rng = trn_test_seeded(PREFIX, 1);
	mech_pate_outcome o;

	/* 245 - 200 = 45 sd of the check's noise above the threshold: it
	 * passes; 244 votes ahead at sigma 2: the label is class 0. */
	cr_assert_eq(mech_pate_run_query(rng, &c, v, NULL, &o, &dd, NULL), 0);
	cr_assert(o.checked && o.teacher_answer);
	cr_assert_eq(o.label, 0);
	cr_assert_eq(o.source, MECH_PATE_SRC_TEACHERS);
	/* Its data-dependent RDP: the check's at its statistic (max n_j -
	 * ceil(T) = 45), plus Theorem 6 at Proposition 7's q. */
	pair[0] = pair[1] = 45;
	cr_assert_eq(acct_pate_threshold_logpr(pair, 2, 0, 4, &logpr, NULL), 0);
	cr_assert_eq(acct_pate_threshold_rdp(logpr, 4, &c.orders[0], 1, &r, NULL), 0);
	want += r;
	cr_assert_eq(acct_pate_gnmax_logq(v, 10, 2, &logq, NULL), 0);
	cr_assert_eq(acct_pate_gnmax_rdp(logq, 2, &c.orders[0], 1, &r, NULL), 0);
	want += r;
	cr_assert_float_eq(dd, want, 1e-15 * want);
	/* and below the data-independent cost lambda / (2 s1^2) + lambda / s2^2 */
	cr_assert(dd < 8 / 32.0 + 8 / 4.0, "%g", dd);
	mech_rng_free(rng);
}

Test(pate_units, confident_abstains_without_a_consensus)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_CONFIDENT, 250, 10, 4, 2, 200, 8);
	double v[10] = {30, 25, 25, 25, 25, 25, 25, 25, 25, 20}, dd, pair[2] = {-170, -170}, logpr, r;
	mech_rng *rng = trn_test_seeded(PREFIX, 2);
	mech_pate_outcome o;

	/* 170 below the threshold, 42 sd: the check fails. */
	cr_assert_eq(mech_pate_run_query(rng, &c, v, NULL, &o, &dd, NULL), 0);
	cr_assert(o.checked && !o.teacher_answer);
	cr_assert_eq(o.label, -1);
	cr_assert_eq(o.source, MECH_PATE_SRC_NONE);
	/* Charged the check alone: its data-dependent cost at 30 - 200. */
	cr_assert_eq(acct_pate_threshold_logpr(pair, 2, 0, 4, &logpr, NULL), 0);
	cr_assert_eq(acct_pate_threshold_rdp(logpr, 4, &c.orders[0], 1, &r, NULL), 0);
	cr_assert_float_eq(dd, r, 1e-300 + 1e-15 * r);
	cr_assert(dd >= 0 && dd < 8 / 32.0, "%g", dd);
	mech_rng_free(rng);
}

Test(pate_units, interactive_gives_the_confident_students_label)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_INTERACTIVE, 100, 3, 4, 2, 50, 8);
	double v[3] = {40, 30, 30}, p[3] = {0.05, 0.9, 0.05}, dd;
	mech_rng *rng = trn_test_seeded(PREFIX, 3);
	mech_pate_outcome o;

	/* max_j (n_j - M p_j) = 35 - far below T = 50 (4 sd): no answer;
	 * the student is 0.9 sure of class 1. */
	c.student_confidence = 0.8;
	cr_assert_eq(mech_pate_run_query(rng, &c, v, p, &o, &dd, NULL), 0);
	cr_assert(o.checked && !o.teacher_answer);
	cr_assert_eq(o.label, 1);
	cr_assert_eq(o.source, MECH_PATE_SRC_STUDENT);
	c.student_confidence = 0.95;
	cr_assert_eq(mech_pate_run_query(rng, &c, v, p, &o, &dd, NULL), 0);
	cr_assert_eq(o.label, -1);
	mech_rng_free(rng);
}

/*
 * GNMax on two classes (110, 100) at sigma 10: label 0 with probability
 * Pr[10 + Z1 - Z2 > 0] = Phi(10 / (10 sqrt 2)) = 0.7602 for the continuous
 * Gaussian; the discrete one differs by far less than the tolerance at
 * sigma 10 (Euler-Maclaurin, CKS 2020).  30 000 draws: sd 0.0025, the
 * tolerance 0.01 is four of them; the test rejects a fair coin (0.5) and
 * Laplace-like noise alike.
 */
Test(pate_units, gnmax_labels_follow_the_gaussian_comparison)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_GNMAX, 210, 2, 0, 10, 0, 8);
	double v[2] = {110, 100}, dd, want = gsl_cdf_ugaussian_P(10 / (10 * sqrt(2)));
	mech_rng *rng = trn_test_seeded(PREFIX, 4);
	mech_pate_outcome o;
	size_t zeros = 0, n = 30000;

	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(mech_pate_run_query(rng, &c, v, NULL, &o, &dd, NULL), 0);
		cr_assert(!o.checked && o.teacher_answer);
		zeros += o.label == 0;
	}
	cr_assert_float_eq((double)zeros / n, want, 0.01, "%g vs %g", (double)zeros / n, want);
	cr_assert(fabs(want - 0.5) > 0.05);
	mech_rng_free(rng);
}

/* ---- LNMax: the noise law and the charge of 2 gamma ------------------------ */

/*
 * The exact output law of LNMax on the histogram v (m classes): per class
 * v_j + Z_j with Z_j iid discrete Laplace of scale t, Pr[Z = z] =
 * (1 - q) / (1 + q) q^|z|, q = e^(-1/t) (CKS 2020, Algorithm 2's law), the
 * label the largest, ties broken uniformly.  Pr[label j] sums, over the
 * value x class j takes, Pr[v_j + Z_j = x] times sum_k e_k / (k + 1), e_k
 * the probability that exactly k other classes equal x and the rest fall
 * below (a product of the others' "below" and "equal" terms, expanded as a
 * polynomial in the number of ties).  Noise beyond +-K, with q^K < 1e-40,
 * is dropped.
 */
#define LNMAX_MAX_CLASSES 6

static double dlap_pmf(int64_t z, double q)
{
	return (1 - q) / (1 + q) * pow(q, (double)llabs(z));
}

/* Pr[Z < z] from the closed-form tails Pr[Z >= k] = q^k / (1 + q), k >= 1. */
static double dlap_below(int64_t z, double q)
{
	return z <= 0 ? pow(q, (double)(1 - z)) / (1 + q) : 1 - pow(q, (double)z) / (1 + q);
}

static void lnmax_law(const double *v, size_t m, double t, double *ret)
{
	double q = exp(-1 / t);
	int64_t K = (int64_t)ceil(40 * log(10) * t), lo = INT64_MAX, hi = INT64_MIN;

	for (size_t j = 0; j < m; j++) {
		lo = (int64_t)fmin((double)lo, v[j] - (double)K);
		hi = (int64_t)fmax((double)hi, v[j] + (double)K);
	}
	for (size_t j = 0; j < m; j++) {
		ret[j] = 0;
		for (int64_t x = lo; x <= hi; x++) {
			double poly[LNMAX_MAX_CLASSES] = {1}, win = 0;
			size_t deg = 0;

			for (size_t i = 0; i < m; i++) {
				double below, equal;

				if (i == j)
					continue;
				below = dlap_below(x - (int64_t)v[i], q);
				equal = dlap_pmf(x - (int64_t)v[i], q);
				for (size_t k = ++deg; k > 0; k--)
					poly[k] = poly[k] * below + poly[k - 1] * equal;
				poly[0] *= below;
			}
			for (size_t k = 0; k <= deg; k++)
				win += poly[k] / (double)(k + 1);
			ret[j] += dlap_pmf(x - (int64_t)v[j], q) * win;
		}
	}
}

/*
 * The votes of `teachers` teachers drawn at random over m classes into
 * v[0..m-1] (a draw of m stands for an abstention, which v does not
 * count), and into w the neighbouring histogram in which the first
 * teacher's vote moves to another class or to or from an abstention.
 * The move is *ret_from -> *ret_to.
 */
static void neighbouring_votes(mech_rng *rng, int64_t teachers, int64_t m, double *v, double *w,
			       int64_t *ret_from, int64_t *ret_to)
{
	int64_t from = -1, to;

	for (int64_t j = 0; j < m; j++)
		v[j] = 0;
	for (int64_t k = 0; k < teachers; k++) {
		int64_t vote = (int64_t)trn_test_below(rng, (uint64_t)m + 1);

		if (vote < m)
			v[vote]++;
		if (k == 0)
			from = vote;
	}
	do
		to = (int64_t)trn_test_below(rng, (uint64_t)m + 1);
	while (to == from);
	memcpy(w, v, (size_t)m * sizeof(*v));
	if (from < m)
		w[from]--;
	if (to < m)
		w[to]++;
	*ret_from = from;
	*ret_to = to;
}

/* The privacy loss between two histograms' output laws: max_j |ln P_j - ln P'_j|. */
static double lnmax_loss(const double *v, const double *w, size_t m, double t)
{
	double pv[LNMAX_MAX_CLASSES], pw[LNMAX_MAX_CLASSES], loss = 0;

	lnmax_law(v, m, t, pv);
	lnmax_law(w, m, t, pw);
	for (size_t j = 0; j < m; j++)
		loss = fmax(loss, fabs(log(pv[j]) - log(pw[j])));
	return loss;
}

/* An LNMax configuration at gamma, resolved to the sampler's scale. */
static mech_pate_cfg lnmax_cfg(int64_t teachers, size_t classes, double gamma)
{
	mech_pate_cfg c;

	memset(&c, 0, sizeof(c));
	c.agg = MECH_PATE_LNMAX;
	c.num_teachers = teachers;
	c.num_classes = (int64_t)classes;
	c.gamma = gamma;
	c.student_confidence = NAN;
	c.n_orders = 1;
	c.orders[0] = 8;
	cr_assert_eq(mech_pate_cfg_resolve(&c, NULL), 0);
	return c;
}

/* Pearson's chi^2 of `counts` (n draws) against the law p. */
static double chi2_of(const size_t *counts, const double *p, size_t m, size_t n)
{
	double x = 0;

	for (size_t j = 0; j < m; j++) {
		double e = (double)n * p[j];

		x += ((double)counts[j] - e) * ((double)counts[j] - e) / e;
	}
	return x;
}

/*
 * The labels mech_pate_run_query gives for LNMax follow the law above at
 * scale 1/gamma per class: 40 000 draws on (3, 1, 0, 2) at gamma 0.5 and
 * 0.25 (scales 2 and 4, which the sampler uses exactly).  Pearson's chi^2
 * with 3 degrees of freedom stays below 21.1 (p = 1e-4), and the same
 * draws reject the law at half and at twice the scale (a gamma off by 2
 * either way), so the test has the power to see a wrong noise scale.  The
 * law sums to 1 (the truncation and the tie terms are right).
 */
Test(pate_units, lnmax_labels_follow_the_discrete_laplace_law_at_scale_one_over_gamma)
{
	static const double gammas[] = {0.5, 0.25};
	double v[4] = {3, 1, 0, 2};
	mech_rng *rng = trn_test_seeded(PREFIX, 11);
	size_t n = 40000;

	for (size_t g = 0; g < 2; g++) {
		mech_pate_cfg c = lnmax_cfg(6, 4, gammas[g]);
		double want[4], half[4], twice[4], sum = 0, dd;
		size_t counts[4] = {0};
		mech_pate_outcome o;

		cr_assert_eq((double)c.lap_num / (double)c.lap_den, 1 / c.gamma);
		for (size_t i = 0; i < n; i++) {
			cr_assert_eq(mech_pate_run_query(rng, &c, v, NULL, &o, &dd, NULL), 0);
			cr_assert(!o.checked && o.teacher_answer && o.label >= 0 && o.label < 4);
			counts[o.label]++;
		}
		lnmax_law(v, 4, 1 / c.gamma, want);
		lnmax_law(v, 4, 0.5 / c.gamma, half);
		lnmax_law(v, 4, 2 / c.gamma, twice);
		for (size_t j = 0; j < 4; j++)
			sum += want[j];
		cr_assert_float_eq(sum, 1.0, 1e-12);
		cr_log_info("gamma %g: chi2 %.2f, at half the scale %.1f, at twice %.1f", c.gamma,
			    chi2_of(counts, want, 4, n), chi2_of(counts, half, 4, n),
			    chi2_of(counts, twice, 4, n));
		cr_assert_lt(chi2_of(counts, want, 4, n), 21.1, "gamma %g: chi2 %g", c.gamma,
			     chi2_of(counts, want, 4, n));
		cr_assert_gt(chi2_of(counts, half, 4, n), 21.1, "gamma %g: half the scale passes",
			     c.gamma);
		cr_assert_gt(chi2_of(counts, twice, 4, n), 21.1, "gamma %g: twice the scale passes",
			     c.gamma);
	}
	mech_rng_free(rng);
}

/*
 * The charge of an LNMax answer, epsilon = 2 gamma (docs/pate.md, "The
 * statistics' sensitivities"; the session's epsilon_delta event), covers
 * every neighbour: on 1 500 random histograms (1 to 40 teachers, 2 to 6
 * classes, abstentions included) and their neighbours with one teacher's
 * vote moved, withdrawn or given, the exact privacy loss of the output law
 * at the scale the sampler uses never exceeds 2 gamma, and the resolved
 * scale is at least 1/gamma.  A moved vote reaches more than 1.5 gamma,
 * so a charge of gamma would not cover it; at 40 votes to 0 it is within
 * 10% of 2 gamma (0.954 at gamma 0.5).
 */
Test(pate_units, lnmax_charge_of_two_gamma_covers_every_neighbour)
{
	static const double gammas[] = {1.0, 0.5, 0.3, 0.1};
	mech_rng *rng = trn_test_seeded(PREFIX, 12);
	double worst_moved = 0, worst_one = 0;

	for (int trial = 0; trial < 1500; trial++) {
		int64_t teachers = 1 + (int64_t)trn_test_below(rng, 40);
		size_t m = 2 + (size_t)trn_test_below(rng, LNMAX_MAX_CLASSES - 1);
		mech_pate_cfg c = lnmax_cfg(teachers, m, gammas[trial % 4]);
		double v[LNMAX_MAX_CLASSES] = {0}, w[LNMAX_MAX_CLASSES] = {0}, t, eps, loss;
		int64_t from, to;

		t = (double)c.lap_num / (double)c.lap_den;
		cr_assert_geq(t, 1 / c.gamma);
		cr_assert_leq(t, (1 / c.gamma) * (1 + 1e-9));
		eps = 2 * c.gamma;
		neighbouring_votes(rng, teachers, (int64_t)m, v, w, &from, &to);
		loss = lnmax_loss(v, w, m, t);
		cr_assert_leq(loss, eps * (1 + 1e-9), "trial %d: loss %.17g > 2 gamma %.17g", trial,
			      loss, eps);
		if (from < (int64_t)m && to < (int64_t)m)
			worst_moved = fmax(worst_moved, loss / c.gamma);
		else
			worst_one = fmax(worst_one, loss / c.gamma);
	}
	cr_log_info("LNMax loss / gamma: moved %.3f, withdrawn or given %.3f", worst_moved,
		    worst_one);
	cr_assert_gt(worst_moved, 1.5, "a moved vote never cost more than %.3f gamma", worst_moved);
	cr_assert_gt(worst_one, 0.5, "a withdrawn vote never cost more than %.3f gamma", worst_one);
	{
		double v[2] = {40, 0}, w[2] = {39, 1};
		double loss = lnmax_loss(v, w, 2, 2.0);

		cr_assert_leq(loss, 1.0 * (1 + 1e-12));
		cr_assert_gt(loss, 0.9, "40 to 0, a vote moved at gamma 0.5: loss %g", loss);
	}
	mech_rng_free(rng);
}

/* The release's figures: f the sum of each answer's smooth-sensitivity RDP
 * plus the checks at lambda / (2 s1^2), B the data-independent bound, SS
 * the smooth sensitivity of the summed local-sensitivity bounds, recomposed
 * here from the accountant's per-query analysis. */
Test(pate_units, release_figures_sum_the_answers)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_CONFIDENT, 50, 3, 20, 8, 30, 6);
	double h[2][3] = {{48, 1, 1}, {30, 15, 5}}, *ls, *ls_sum, f = 0, logq, r;
	acct_pate_workspace *ws = acct_pate_workspace_new(3, 50);
	acct_pate_ls_bound *lsb = NULL;
	mech_pate_release *acc = NULL;
	mech_pate_release_figures fig;
	double s1 = c.sigma1_used, s2 = c.sigma2_used, beta = 0.05;
	size_t D;

	cr_assert_not_null(ws);
	cr_assert_eq(acct_pate_ls_bound_new(ws, 3, 50, s2, 6, &lsb, NULL), 0);
	D = acct_pate_ls_bound_distances(lsb);
	ls = malloc(D * sizeof(*ls));
	ls_sum = calloc(D, sizeof(*ls_sum));
	cr_assert(ls && ls_sum);
	cr_assert_eq(mech_pate_release_new(&c, 6, &acc, NULL), 0);
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(mech_pate_release_add(acc, h[k], NULL), 0);
		cr_assert_eq(acct_pate_gnmax_logq(h[k], 3, s2, &logq, NULL), 0);
		cr_assert_eq(acct_pate_gnmax_rdp_ss(ws, logq, s2, 6, &r, NULL), 0);
		cr_assert_eq(acct_pate_ls_bound_at(ws, lsb, h[k], ls, NULL), 0);
		f += r;
		for (size_t d = 0; d < D; d++)
			ls_sum[d] += ls[d];
	}
	mech_pate_release_figures_get(acc, 7, beta, &fig);
	cr_assert_float_eq(fig.f, f + 7 * 6 / (2 * s1 * s1), 1e-14);
	cr_assert_float_eq(fig.bound, 2 * 6 / (s2 * s2) + 7 * 6 / (2 * s1 * s1), 1e-14);
	cr_assert_float_eq(fig.ss, acct_pate_smooth_sensitivity(beta, ls_sum, D), 1e-300);
	cr_assert(fig.ss > 0);
	cr_assert(fig.f <= fig.bound);
	mech_pate_release_free(acc);
	acct_pate_ls_bound_free(lsb);
	acct_pate_workspace_free(ws);
	free(ls);
	free(ls_sum);
}

/* The release's S for one answered histogram. */
static double release_ss(const mech_pate_cfg *c, double order, const double *v, double beta)
{
	mech_pate_release *acc = NULL;
	mech_pate_release_figures fig;

	cr_assert_eq(mech_pate_release_new(c, order, &acc, NULL), 0);
	cr_assert_eq(mech_pate_release_add(acc, v, NULL), 0);
	mech_pate_release_figures_get(acc, 0, beta, &fig);
	mech_pate_release_free(acc);
	return fig.ss;
}

/*
 * The release's noise scale is beta-smooth where the walk of Algorithms
 * 4-5 is not (sigma 10, order 20, 250 teachers): among random 6-class
 * histograms, find a neighbour pair (one vote moved) whose walk smooth
 * sensitivities differ by more than e^beta; the release's S for the same
 * pair stays within e^beta both ways.
 */
Test(pate_units, release_noise_scale_is_smooth_where_the_walk_is_not)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_GNMAX, 250, 6, 0, 10, 0, 20);
	acct_pate_workspace *ws = acct_pate_workspace_new(6, 250);
	double beta = 0.99 / 40, s2 = c.sigma2_used, ls[250];
	uint64_t state = 11;
	bool found = false;

	cr_assert(ws);
	for (int t = 0; t < 400 && !found; t++) {
		double v[6], y[6], sx, sy;

		test_vote_histogram(v, 6, 250, 0.3 + 0.7 * (double)((state >> 12) % 1000) / 1000.0, &state);
		cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, v, 6, 250, s2, 20, ls, NULL), 0);
		sx = acct_pate_smooth_sensitivity(beta, ls, 250);
		for (size_t i = 0; i < 6 && !found; i++)
			for (size_t j = 0; j < 6 && !found; j++) {
				if (i == j || v[i] == 0)
					continue;
				memcpy(y, v, sizeof(y));
				y[i]--;
				y[j]++;
				cr_assert_eq(acct_pate_gnmax_local_sensitivity(ws, y, 6, 250, s2, 20, ls, NULL), 0);
				sy = acct_pate_smooth_sensitivity(beta, ls, 250);
				if (sy <= exp(beta) * sx * (1 + 1e-9) && sx <= exp(beta) * sy * (1 + 1e-9))
					continue;
				found = true;
				sx = release_ss(&c, 20, v, beta);
				sy = release_ss(&c, 20, y, beta);
				cr_assert_gt(sx, 0);
				cr_assert_leq(sy, exp(beta) * sx * (1 + 1e-12), "S(y) %g, S(x) %g", sy, sx);
				cr_assert_leq(sx, exp(beta) * sy * (1 + 1e-12), "S(x) %g, S(y) %g", sx, sy);
			}
	}
	cr_assert(found, "no pair where the walk is not smooth: the test has no power");
	acct_pate_workspace_free(ws);
}

/*
 * A release whose histograms are first counted and then added walks only
 * to its horizon, and its figures equal those of the release that walks
 * every distance, bit for bit: 3000 teachers, 40 answers, two betas.
 * Used out of order it releases nothing: an add past the count fails,
 * and figures after fewer adds or at a smaller beta have an infinite SS.
 */
Test(pate_units, a_counted_release_has_the_figures_of_a_full_one)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_GNMAX, 3000, 10, 0, 40, 0, 14);
	static const double betas[] = {0.0329, 0.01};
	enum { ANSWERS = 40 };
	double v[ANSWERS][10];
	uint64_t state = 5;

	for (size_t a = 0; a < ANSWERS; a++)
		test_vote_histogram(v[a], 10, 3000, 0.1 + 0.9 * (double)(a % 10) / 10.0, &state);
	{
		/* The cut is real: both horizons are far below 3001 distances. */
		acct_pate_workspace *ws = acct_pate_workspace_new(10, 3000);
		acct_pate_ls_bound *b = NULL;
		double at_0 = 0, one;

		cr_assert_eq(acct_pate_ls_bound_new(ws, 10, 3000, c.sigma2_used, 14, &b, NULL), 0);
		for (size_t a = 0; a < ANSWERS; a++) {
			cr_assert_eq(acct_pate_ls_bound_prefix(ws, b, v[a], &one, 1, NULL), 0);
			at_0 += one;
		}
		for (size_t i = 0; i < 2; i++) {
			size_t h = acct_pate_ls_bound_horizon(b, betas[i], ANSWERS, at_0);

			cr_assert_lt(h, 1500, "beta %g: %zu", betas[i], h);
		}
		acct_pate_ls_bound_free(b);
		acct_pate_workspace_free(ws);
	}
	for (size_t i = 0; i < 2; i++) {
		mech_pate_release *full = NULL, *cut = NULL;
		mech_pate_release_figures ff, fc;
		acct_error err;

		cr_assert_eq(mech_pate_release_new(&c, 14, &full, NULL), 0);
		cr_assert_eq(mech_pate_release_new(&c, 14, &cut, NULL), 0);
		for (size_t a = 0; a < ANSWERS; a++)
			cr_assert_eq(mech_pate_release_count(cut, v[a], NULL), 0);
		mech_pate_release_horizon(cut, betas[i], 0);
		for (size_t a = 0; a < ANSWERS; a++) {
			cr_assert_eq(mech_pate_release_add(full, v[a], NULL), 0);
			cr_assert_eq(mech_pate_release_add(cut, v[a], NULL), 0);
		}
		mech_pate_release_figures_get(full, 0, betas[i], &ff);
		mech_pate_release_figures_get(cut, 0, betas[i], &fc);
		cr_assert_gt(ff.ss, 0);
		cr_assert_eq(fc.ss, ff.ss, "beta %g: %.17g against %.17g", betas[i], fc.ss, ff.ss);
		cr_assert_eq(fc.f, ff.f);
		cr_assert_eq(fc.bound, ff.bound);
		/* At a smaller beta than the cut's, nothing is released. */
		mech_pate_release_figures_get(cut, 0, betas[i] / 2, &fc);
		cr_assert(isinf(fc.ss));
		acct_error_init(&err);
		cr_assert_eq(mech_pate_release_add(cut, v[0], &err), ACCT_EINTERNAL);
		cr_assert_eq(mech_pate_release_count(full, v[0], NULL), ACCT_EINTERNAL);
		mech_pate_release_free(full);
		mech_pate_release_free(cut);
	}
	{
		mech_pate_release *cut = NULL;
		mech_pate_release_figures fc;

		cr_assert_eq(mech_pate_release_new(&c, 14, &cut, NULL), 0);
		for (size_t a = 0; a < ANSWERS; a++)
			cr_assert_eq(mech_pate_release_count(cut, v[a], NULL), 0);
		mech_pate_release_horizon(cut, 0.0329, 0);
		for (size_t a = 0; a + 1 < ANSWERS; a++)
			cr_assert_eq(mech_pate_release_add(cut, v[a], NULL), 0);
		mech_pate_release_figures_get(cut, 0, 0.0329, &fc);
		cr_assert(isinf(fc.ss), "one answer short: %g", fc.ss);
		mech_pate_release_free(cut);
	}
}

/* The SS of a release of the `answers` histograms in v (10 classes),
 * counted first and its walk capped by max_walk (0: the horizon only),
 * or walked over every distance (cut false). */
static double capped_ss(const mech_pate_cfg *c, const double (*v)[10], size_t answers,
			double beta, bool cut, int64_t max_walk)
{
	mech_pate_release *r = NULL;
	mech_pate_release_figures f;

	cr_assert_eq(mech_pate_release_new(c, 14, &r, NULL), 0);
	for (size_t a = 0; cut && a < answers; a++)
		cr_assert_eq(mech_pate_release_count(r, v[a], NULL), 0);
	if (cut)
		mech_pate_release_horizon(r, beta, max_walk);
	for (size_t a = 0; a < answers; a++)
		cr_assert_eq(mech_pate_release_add(r, v[a], NULL), 0);
	mech_pate_release_figures_get(r, 0, beta, &f);
	mech_pate_release_free(r);
	return f.ss;
}

/*
 * A release whose walk is capped below num_teachers + 1 distances (3000
 * teachers, 40 answers, 64 distances each) reports max(SS of the capped
 * walk, the public tail), which must be
 *  - at least the SS of the walk over every distance, at every beta
 *    (at beta 1e-9 the capped walk alone falls short of it: the tail is
 *    what keeps the bound, and the test has power);
 *  - beta-smooth: S(y) <= e^beta S(x) both ways when one teacher moves
 *    its vote in every answer, on 6 random pairs at each beta;
 *  - the uncut SS, bit for bit, where the cap (2000 distances here) is
 *    past the horizon.
 */
Test(pate_units, a_capped_release_bounds_the_full_one_and_stays_smooth)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_GNMAX, 3000, 10, 0, 40, 0, 14);
	static const double betas[] = {0.0329, 1e-3, 1e-9};
	enum { ANSWERS = 40, CAP = 64 };
	static double v[ANSWERS][10], y[ANSWERS][10];
	uint64_t state = 9;
	bool tail_needed = false;

	for (size_t pair = 0; pair < 6; pair++) {
		for (size_t a = 0; a < ANSWERS; a++) {
			size_t from, to;

			test_vote_histogram(v[a], 10, 3000, 0.1 + 0.85 * (double)((a + pair) % 10) / 10.0,
					    &state);
			/* One teacher's vote in this answer, moved from a class
			 * that has one to another. */
			memcpy(y[a], v[a], sizeof(y[a]));
			do {
				state = state * 6364136223846793005ULL + 1442695040888963407ULL;
				from = (state >> 33) % 10;
			} while (y[a][from] == 0);
			state = state * 6364136223846793005ULL + 1442695040888963407ULL;
			to = (from + 1 + (state >> 33) % 9) % 10;
			y[a][from]--;
			y[a][to]++;
		}
		for (size_t i = 0; i < 3; i++) {
			double beta = betas[i];
			double sx = capped_ss(&c, (const double (*)[10])v, ANSWERS, beta, true,
					      ANSWERS * CAP);
			double sy = capped_ss(&c, (const double (*)[10])y, ANSWERS, beta, true,
					      ANSWERS * CAP);
			double full = capped_ss(&c, (const double (*)[10])v, ANSWERS, beta, false, 0);

			cr_assert(isfinite(sx) && sx > 0, "beta %g: %g", beta, sx);
			cr_assert_geq(sx, full, "beta %g: capped %.17g under the full %.17g", beta, sx,
				      full);
			cr_assert_leq(sy, exp(beta) * sx * (1 + 1e-12), "beta %g: S(y) %g, S(x) %g", beta,
				      sy, sx);
			cr_assert_leq(sx, exp(beta) * sy * (1 + 1e-12), "beta %g: S(x) %g, S(y) %g", beta,
				      sx, sy);
			if (beta < 1e-6) {
				/* The capped walk alone, summed here from the
				 * accountant's walks. */
				acct_pate_workspace *ws = acct_pate_workspace_new(10, 3000);
				acct_pate_ls_bound *b = NULL;
				double ls[CAP], sum[CAP] = {0};

				cr_assert_eq(acct_pate_ls_bound_new(ws, 10, 3000, c.sigma2_used, 14, &b, NULL),
					     0);
				for (size_t a = 0; a < ANSWERS; a++) {
					cr_assert_eq(acct_pate_ls_bound_prefix(ws, b, v[a], ls, CAP, NULL), 0);
					for (size_t d = 0; d < CAP; d++)
						sum[d] += ls[d];
				}
				tail_needed |= acct_pate_smooth_sensitivity(beta, sum, CAP) < full;
				acct_pate_ls_bound_free(b);
				acct_pate_workspace_free(ws);
			}
		}
		for (size_t i = 0; i < 2; i++) {
			double beta = betas[i] == 1e-3 ? 0.01 : betas[i];

			cr_assert_eq(capped_ss(&c, (const double (*)[10])v, ANSWERS, beta, true,
					       ANSWERS * 2000),
				     capped_ss(&c, (const double (*)[10])v, ANSWERS, beta, false, 0),
				     "beta %g", beta);
		}
	}
	cr_assert(tail_needed, "the capped walk never fell short: the test has no power");
}

/*
 * The release that took minutes at a tiny beta: 10^6 teachers, 500
 * answers with votes (990000, about 1111 x 9), beta 1e-9, where the
 * horizon is every distance.  Capped at the server's walk it needs about
 * 3 s of CPU (7 s in the sanitizer build; the bound leaves room for it);
 * uncapped it walks 5 * 10^8 distances, 53 s at this sigma.
 */
Test(pate_units, a_release_at_a_tiny_beta_is_bounded_in_work, .timeout = 240)
{
	mech_pate_cfg c = cfg_of(MECH_PATE_GNMAX, 1000000, 10, 0, 40, 0, 14);
	enum { ANSWERS = 500 };
	static double v[ANSWERS][10];
	mech_pate_release *r = NULL;
	mech_pate_release_figures f;
	struct timespec t0, t1;
	uint64_t state = 21;
	double cpu;

	for (size_t a = 0; a < ANSWERS; a++)
		test_vote_histogram(v[a], 10, 1000000, 0.99, &state);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	cr_assert_eq(mech_pate_release_new(&c, 14, &r, NULL), 0);
	for (size_t a = 0; a < ANSWERS; a++)
		cr_assert_eq(mech_pate_release_count(r, v[a], NULL), 0);
	mech_pate_release_horizon(r, 1e-9, DPG_MAX_PATE_RELEASE_WALK);
	for (size_t a = 0; a < ANSWERS; a++)
		cr_assert_eq(mech_pate_release_add(r, v[a], NULL), 0);
	mech_pate_release_figures_get(r, 0, 1e-9, &f);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	mech_pate_release_free(r);
	cpu = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	cr_log_info("capped release at beta 1e-9: %.2f s of CPU, S %g, B %g", cpu, f.ss, f.bound);
	cr_assert(isfinite(f.ss) && f.ss > 0, "%g", f.ss);
	cr_assert_lt(cpu, 20.0, "the release took %.1f s of CPU", cpu);
}

/* The GNSS draw is centred on f (clamped into [0, B]) with sd max(SS + g,
 * B/256) sigma: 4000 draws, the mean within 5 standard errors. */
Test(pate_units, release_draw_is_centred_on_the_clamped_value)
{
	mech_pate_release_figures fig = {.f = 1.5, .ss = 0.01, .bound = 2.0};
	mech_rng *rng = trn_test_seeded(PREFIX, 5);
	double x, sum = 0, sd = 0.01 * 2.0, n = 4000;

	for (int i = 0; i < n; i++) {
		cr_assert_eq(mech_pate_release_draw(rng, &fig, 2.0, &x, NULL), 0);
		sum += x;
	}
	cr_assert_float_eq(sum / n, 1.5, 5 * sd / sqrt(n) + 1e-6, "%g", sum / n);
	fig.f = 7.0; /* above B: released as B */
	sum = 0;
	for (int i = 0; i < n; i++) {
		cr_assert_eq(mech_pate_release_draw(rng, &fig, 2.0, &x, NULL), 0);
		sum += x;
	}
	cr_assert_float_eq(sum / n, 2.0, 5 * sd / sqrt(n) + 1e-6, "%g", sum / n);
	mech_rng_free(rng);
}

/* ---- the trainer's partition and event ------------------------------------- */

/*
 * The threshold checks' statistic moves by at most 1 between neighbouring
 * vote histograms (docs/pate.md, "The statistics' sensitivities"): random
 * teachers each vote for a class or abstain, then one of them changes,
 * gives or withdraws its vote; confident and interactive GNMax, random
 * thresholds and student probabilities, through the code's own statistic.
 * The bound is reached in a good share of the trials.
 */
Test(pate_units, threshold_statistic_moves_by_at_most_one_on_neighbours)
{
	enum { TRIALS = 2000, MAX_CLASSES = 10 };
	mech_rng *rng = trn_test_seeded(PREFIX, 90);
	int reached = 0;

	for (int trial = 0; trial < TRIALS; trial++) {
		int64_t teachers = 2 + (int64_t)trn_test_below(rng, 249);
		int64_t classes = 2 + (int64_t)trn_test_below(rng, MAX_CLASSES - 1);
		mech_pate_agg agg = trial % 2 ? MECH_PATE_INTERACTIVE : MECH_PATE_CONFIDENT;
		mech_pate_cfg c = cfg_of(agg, teachers, classes, 50, 40,
					 (double)teachers * trn_test_uniform(rng), 10);
		double v[MAX_CLASSES] = {0}, w[MAX_CLASSES] = {0}, p[MAX_CLASSES], psum = 0;
		int64_t from, to, moved;

		neighbouring_votes(rng, teachers, classes, v, w, &from, &to);
		for (int64_t j = 0; j < classes; j++)
			psum += p[j] = trn_test_uniform(rng);
		for (int64_t j = 0; j < classes; j++)
			p[j] /= psum;
		moved = mech_pate_threshold_statistic(&c, w, p) - mech_pate_threshold_statistic(&c, v, p);
		cr_assert_leq(llabs(moved), 1, "trial %d (%s): the statistic moved by %lld", trial,
			      mech_pate_agg_name(agg), (long long)moved);
		reached += llabs(moved) == 1;
	}
	cr_assert_gt(reached, TRIALS / 10, "the statistic moved by 1 in %d trials only", reached);
	mech_rng_free(rng);
}

/*
 * Every row goes to exactly one teacher in range, every teacher gets about
 * n / T rows, and adding a row (the same stream, one draw more) leaves
 * every other row where it was: a neighbouring table changes one
 * teacher's part.
 */
Test(pate_units, the_partition_puts_each_row_in_one_teacher)
{
	enum { N = 20000, T = 25 };
	uint32_t *a = malloc(N * sizeof(*a)), *b = malloc((N + 1) * sizeof(*b));
	size_t count[T] = {0}, changed = 0;
	mech_rng *r1 = trn_test_seeded(PREFIX, 6), *r2 = trn_test_seeded(PREFIX, 6);
	double chi2 = 0, e = (double)N / T;

	cr_assert(a && b);
	cr_assert_eq(trn_pate_partition(r1, N, T, a, NULL), 0);
	cr_assert_eq(trn_pate_partition(r2, N + 1, T, b, NULL), 0);
	for (size_t i = 0; i < N; i++) {
		cr_assert_lt(a[i], T);
		count[a[i]]++;
		changed += a[i] != b[i];
	}
	cr_assert_lt(b[N], T);
	cr_assert_eq(changed, 0);
	for (int t = 0; t < T; t++)
		chi2 += (count[t] - e) * (count[t] - e) / e;
	/* chi-square with 24 degrees of freedom: below its 0.999 quantile. */
	cr_assert_lt(chi2, gsl_cdf_chisq_Pinv(0.999, T - 1), "%g", chi2);
	cr_assert_eq(trn_pate_partition(r1, N, 0, a, NULL), ACCT_EINVAL);
	mech_rng_free(r1);
	mech_rng_free(r2);
	free(a);
	free(b);
}

/* The RDP at lambda of what ran: checks lambda / (2 s1^2), answers
 * lambda / s2^2, the release Theorem 23's at beta + 2^-22. */
static double event_rdp(double checks, double answers, bool released, double s1, double s2,
			double beta, double sigma, double l)
{
	double b = beta + 0x1p-22, rdp = checks * l / (2 * s1 * s1) + answers * l / (s2 * s2);

	if (released)
		rdp += l * exp(2 * b) / (sigma * sigma) + (b * l - log(1 - 2 * l * b) / 2) / (l - 1);
	return rdp;
}

Test(pate_units, the_event_prices_what_ran)
{
	static const double orders[] = {2, 5, 14};
	trn_pate_params p;
	acct_event *ev = NULL;
	acct_filter f;
	acct_cost cost;

	trn_pate_params_default(&p);
	cr_assert_eq(trn_pate_params_validate(&p, NULL), 0);
	cr_assert_eq(acct_filter_init_orders(&f, ACCT_LEDGER_RDP, ACCT_ADD_REMOVE, 1000, 1e-5, orders,
					     3, NULL), 0);
	/* The paper's sigmas (150, 40) are exact for the sampler. */
	cr_assert_eq(trn_pate_event(&p, 300, 120, true, &ev, NULL), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0, &cost, NULL), 0);
	for (int i = 0; i < 3; i++) {
		double want = event_rdp(300, 120, true, 150, 40, p.release_beta, p.release_sigma,
					orders[i]);

		cr_assert_float_eq(cost.v[i], want, 1e-12 * want, "order %g", orders[i]);
	}
	acct_event_free(ev);
	/* gnmax runs no check; nothing run is no event. */
	p.aggregator = MECH_PATE_GNMAX;
	cr_assert_eq(trn_pate_event(&p, 300, 120, false, &ev, NULL), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0, &cost, NULL), 0);
	cr_assert_float_eq(cost.v[1], event_rdp(0, 120, false, 150, 40, 0, 1, 5), 1e-12);
	acct_event_free(ev);
	cr_assert_eq(trn_pate_event(&p, 0, 0, false, &ev, NULL), 0);
	cr_assert_null(ev);
	/* The worst case is every query checked and answered, and released. */
	p.aggregator = MECH_PATE_CONFIDENT;
	cr_assert_eq(trn_pate_worst_event(&p, &ev, NULL), 0);
	cr_assert_eq(acct_filter_price(&f, ev, 0, &cost, NULL), 0);
	cr_assert_float_eq(cost.v[0], event_rdp(p.queries, p.queries, true, 150, 40, p.release_beta,
						p.release_sigma, 2), 1e-12);
	acct_event_free(ev);
}

/* n rows of 2 features in [-1, 1], class x0 + x1 > 0. */
static trn_dataset *linear_table(mech_rng *rng, size_t n)
{
	trn_dataset *ds = NULL;

	cr_assert_eq(trn_dataset_new(n, 2, 2, &ds, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		ds->x[2 * i] = 2 * trn_test_uniform(rng) - 1;
		ds->x[2 * i + 1] = 2 * trn_test_uniform(rng) - 1;
		ds->y[i] = ds->x[2 * i] + ds->x[2 * i + 1] > 0;
	}
	return ds;
}

static trn_pate_params run_params(void)
{
	trn_pate_params p;

	trn_pate_params_default(&p);
	p.teachers = 30;
	p.queries = 200;
	p.threshold = 22;
	p.sigma1 = 4;
	p.sigma2 = 3;
	p.teacher.epochs = 30;
	p.teacher.lot_size = 16;
	p.teacher.learning_rate = 0.5;
	p.student = p.teacher;
	p.student.epochs = 40;
	return p;
}

/* A copy of `src` with `extra` more rows (zeroed) at the end. */
static trn_dataset *copy_table(const trn_dataset *src, size_t extra)
{
	trn_dataset *ds = NULL;

	cr_assert_eq(trn_dataset_new(src->n + extra, src->d, src->num_classes, &ds, NULL), 0);
	memcpy(ds->x, src->x, src->n * src->d * sizeof(double));
	memcpy(ds->y, src->y, src->n * sizeof(uint32_t));
	return ds;
}

/* Every query's histograms on the two tables differ by one teacher's vote
 * at most: L1 <= 2, so L2 <= sqrt 2 (the gnmax event's sensitivity), and
 * the plurality by at most 1 (the threshold statistic's).  Returns how
 * many queries differ. */
static size_t check_neighbours(const trn_pate_params *p, const trn_dataset *a,
			       const trn_dataset *b, const trn_dataset *student, uint8_t tag)
{
	size_t k = a->num_classes, changed = 0;
	double *va = malloc(p->queries * k * sizeof(double)), *vb = malloc(p->queries * k * sizeof(double));
	mech_rng *ra = trn_test_seeded(PREFIX, tag), *rb = trn_test_seeded(PREFIX, tag);

	cr_assert(va && vb);
	cr_assert_eq(trn__pate_votes(p, a, student, ra, va, NULL), 0);
	cr_assert_eq(trn__pate_votes(p, b, student, rb, vb, NULL), 0);
	for (size_t q = 0; q < p->queries; q++) {
		double l1 = 0, l2 = 0, ma = 0, mb = 0;

		for (size_t j = 0; j < k; j++) {
			double d = va[q * k + j] - vb[q * k + j];

			l1 += fabs(d);
			l2 += d * d;
			ma = fmax(ma, va[q * k + j]);
			mb = fmax(mb, vb[q * k + j]);
		}
		cr_assert_leq(l1, 2, "query %zu", q);
		cr_assert_leq(sqrt(l2), sqrt(2) + 1e-12, "query %zu", q);
		cr_assert_leq(fabs(ma - mb), 1, "query %zu", q);
		changed += l1 > 0;
	}
	mech_rng_free(ra);
	mech_rng_free(rb);
	free(va);
	free(vb);
	return changed;
}

/*
 * The sensitivity the events rely on (docs/pate.md), on random
 * neighbouring tables through the teachers as they are trained: a row
 * added (the partition draws one more, last) and a row replaced (the same
 * draws), under the coupling of one seed.  Each teacher has few rows, so
 * one row changes its votes: some queries must differ (the check is not
 * vacuous), and none by more than one vote.
 */
Test(pate_units, neighbouring_tables_move_one_vote_per_query, .timeout = 120)
{
	mech_rng *rng = trn_test_seeded(PREFIX, 10);
	trn_pate_params p = run_params();
	size_t changed = 0;

	/* Noisy teachers (one epoch of lots of 2 at a high rate): two
	 * trainings of a teacher on the same rows with other streams vote
	 * differently, so a coupling that moved the streams would show. */
	p.teachers = 40;
	p.queries = 300;
	p.teacher.epochs = 1;
	p.teacher.lot_size = 2;
	p.teacher.learning_rate = 2;
	p.teacher.momentum = 0;
	for (uint8_t trial = 0; trial < 6; trial++) {
		trn_dataset *d = linear_table(rng, 200), *student = linear_table(rng, 300);
		trn_dataset *added = copy_table(d, 1), *replaced = copy_table(d, 0);
		size_t i = (size_t)trn_test_below(rng, d->n);

		/* An outlier with the wrong label: it moves its teacher. */
		added->x[2 * d->n] = replaced->x[2 * i] = 3 * (trn_test_uniform(rng) - 0.5);
		added->x[2 * d->n + 1] = replaced->x[2 * i + 1] = 3 * (trn_test_uniform(rng) - 0.5);
		added->y[d->n] = replaced->y[i] = trn_test_below(rng, 2);
		changed += check_neighbours(&p, d, added, student, (uint8_t)(20 + trial));
		changed += check_neighbours(&p, d, replaced, student, (uint8_t)(40 + trial));
		trn_dataset_free(d);
		trn_dataset_free(student);
		trn_dataset_free(added);
		trn_dataset_free(replaced);
	}
	cr_assert_gt(changed, 0);
	mech_rng_free(rng);
}

/* ---- a run ------------------------------------------------------------------- */

/* The tables of the two full runs below, drawn in that order from one
 * stream that the run then goes on to use: 3000 private rows, 400 for the
 * student, 500 to test it.  Made and freed around each test (.init,
 * .fini), also when it fails. */
static struct {
	mech_rng *rng;
	trn_dataset *train, *student, *test;
} full_run;

static void full_run_draw(void)
{
	full_run.rng = trn_test_seeded(PREFIX, 7);
	full_run.train = linear_table(full_run.rng, 3000);
	full_run.student = linear_table(full_run.rng, 400);
	full_run.test = linear_table(full_run.rng, 500);
}

static void full_run_free(void)
{
	trn_dataset_free(full_run.train);
	trn_dataset_free(full_run.student);
	trn_dataset_free(full_run.test);
	mech_rng_free(full_run.rng);
}

Test(pate_units, a_run_labels_queries_and_trains_the_student, .init = full_run_draw,
     .fini = full_run_free, .timeout = 120)
{
	trn_pate_params p = run_params();
	trn_pate_result *r = NULL;

	cr_assert_eq(trn_pate_run(&p, full_run.train, full_run.student, full_run.test, full_run.rng,
				  NULL, NULL, NULL, &r, NULL),
		     0);
	cr_assert_eq(r->queries_asked, p.queries);
	cr_assert_eq(r->checks, p.queries);
	cr_assert_eq(r->answers + r->abstained, p.queries);
	cr_assert_gt(r->answers, 0);
	cr_assert(r->released && isfinite(r->epsilon_data_dependent));
	cr_assert_geq(r->label_accuracy, 0.9, "%g", r->label_accuracy);
	cr_assert_geq(r->test_accuracy, 0.9, "%g", r->test_accuracy);
	cr_assert_eq(r->student_rows, (uint64_t)r->answers);
	trn_pate_result_free(r);
	/* Self-training adds student rows beyond the answered queries. */
	p.semi_supervised = true;
	p.confidence = 0.8;
	cr_assert_eq(trn_pate_run(&p, full_run.train, full_run.student, full_run.test, full_run.rng,
				  NULL, NULL, NULL, &r, NULL),
		     0);
	cr_assert_gt(r->self_trained_rows, 0);
	cr_assert_eq(r->student_rows, (uint64_t)r->answers + r->self_trained_rows);
	trn_pate_result_free(r);
}

/* Interactive-GNMax: the second half of the queries is compared with a
 * student trained on the first half's labels; a confident student labels
 * some itself. */
Test(pate_units, an_interactive_run_uses_the_students_probabilities, .init = full_run_draw,
     .fini = full_run_free, .timeout = 120)
{
	trn_pate_params p = run_params();
	trn_pate_result *r = NULL;

	p.aggregator = MECH_PATE_INTERACTIVE;
	p.threshold = 5;
	p.student_confidence = 0.6;
	cr_assert_eq(trn_pate_run(&p, full_run.train, full_run.student, full_run.test, full_run.rng,
				  NULL, NULL, NULL, &r, NULL),
		     0);
	cr_assert_eq(r->checks, p.queries);
	cr_assert_eq(r->answers + r->student_answers + r->abstained, p.queries);
	cr_assert_gt(r->student_answers, 0);
	cr_assert_geq(r->test_accuracy, 0.85, "%g", r->test_accuracy);
	trn_pate_result_free(r);
}

static int stop_after_teachers(const trn_pate_progress *pr, void *user)
{
	(void)user;
	return pr->queries_asked >= 10;
}

Test(pate_units, a_cancelled_run_says_what_it_ran, .timeout = 120)
{
	mech_rng *rng = trn_test_seeded(PREFIX, 8);
	trn_dataset *train = linear_table(rng, 1000), *student = linear_table(rng, 300);
	trn_pate_params p = run_params();
	trn_pate_result *r = NULL;

	cr_assert_eq(trn_pate_run(&p, train, student, NULL, rng, stop_after_teachers, NULL, NULL, &r,
				  NULL),
		     TRN_CANCELLED);
	cr_assert_eq(r->queries_asked, 10);
	cr_assert_eq(r->checks, 10);
	cr_assert(!r->released);
	cr_assert_null(r->model);
	trn_pate_result_free(r);
	trn_dataset_free(train);
	trn_dataset_free(student);
	mech_rng_free(rng);
}

/* ---- a teacher's steps --------------------------------------------------------- */

/*
 * A teacher's epochs are capped where its steps, ceil(e n / L), would pass
 * the limit: the most epochs within it, never fewer than 1, and the asked
 * epochs when they fit.  The expected epochs are worked by hand here
 * (floor(10^7 L / n)); trn_dpsgd_steps counts the steps the trainer takes.
 */
Test(pate_units, a_teachers_epochs_stop_at_the_step_limit)
{
	static const struct {
		uint32_t epochs, lot;
		uint64_t n;
		uint32_t want;
	} cases[] = {
		{10000, 1, 1234, 8103},        /* 10^7 / 1234 = 8103.7 */
		{10000, 1, 1000, 10000},       /* exactly 10^7 steps: kept */
		{9990, 1, 1001, 9990},         /* 9 999 990 steps */
		{10000, 1, 10000000, 1},       /* the largest table, lots of 1 */
		{10000, 1000, 10000000, 1000}, /* 10^10 / 10^7 */
		{10000, 3, 4000, 7500},        /* 3 10^7 / 4000 */
		{10000, 7, 10000, 7000},       /* 7 10^7 / 10^4 */
		{30, 64, 240, 30},
	};

	cr_assert_eq(DPG_MAX_TRAINING_STEPS, 10000000LL, "the cases assume a limit of 10^7");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		trn_dpsgd_params sp;
		uint32_t e = trn__pate_epochs(cases[i].epochs, cases[i].n, cases[i].lot);

		cr_assert_eq(e, cases[i].want, "case %zu: %u epochs", i, e);
		trn_dpsgd_params_default(&sp);
		sp.lot_size = cases[i].lot;
		sp.epochs = e;
		cr_assert_leq(trn_dpsgd_steps(&sp, cases[i].n), DPG_MAX_TRAINING_STEPS, "case %zu",
			      i);
		if (e == cases[i].epochs)
			continue;
		sp.epochs = e + 1;
		cr_assert_gt(trn_dpsgd_steps(&sp, cases[i].n), DPG_MAX_TRAINING_STEPS, "case %zu",
			     i);
	}
}

/* Sets the flag after `seconds`. */
struct late_cancel {
	atomic_bool flag;
	double seconds;
};

static void *cancel_later(void *arg)
{
	struct late_cancel *c = arg;
	struct timespec ts = {.tv_sec = (time_t)c->seconds,
			      .tv_nsec = (long)((c->seconds - (double)(time_t)c->seconds) * 1e9)};

	nanosleep(&ts, NULL);
	atomic_store(&c->flag, true);
	return NULL;
}

/*
 * One teacher on 1234 rows, and on its neighbour of 1235, with lots of 1
 * for 10^4 epochs: about 1.2 10^7 steps uncapped, past the limit.  Neither
 * table makes the run fail: the teacher trains (capped, minutes of it)
 * until the cancel a moment later, and both runs end alike, cancelled with
 * no error.  The teacher once failed at once with "the job would take
 * 12340000 steps", the private row count in the job's error.
 */
Test(pate_units, a_teacher_past_the_step_limit_trains_on_either_neighbour, .timeout = 60)
{
	mech_rng *rng = trn_test_seeded(PREFIX, 12);
	trn_dataset *d = linear_table(rng, 1234), *student = linear_table(rng, 50);
	trn_dataset *added = copy_table(d, 1);
	const trn_dataset *tables[2] = {d, added};
	trn_pate_params p = run_params();

	p.teachers = 1;
	p.threshold = 1;
	p.queries = 50;
	p.teacher.epochs = 10000;
	p.teacher.lot_size = 1;
	for (size_t i = 0; i < 2; i++) {
		struct late_cancel c = {.seconds = 0.3};
		mech_rng *run = trn_test_seeded(PREFIX, 13);
		trn_pate_result *r = NULL;
		acct_error err;
		pthread_t th;
		int rc;

		atomic_init(&c.flag, false);
		acct_error_init(&err);
		cr_assert_eq(pthread_create(&th, NULL, cancel_later, &c), 0);
		rc = trn_pate_run(&p, tables[i], student, NULL, run, NULL, NULL, &c.flag, &r, &err);
		pthread_join(th, NULL);
		cr_assert_eq(rc, TRN_CANCELLED, "table %zu: %d %s at %s", i, rc, err.text,
			     err.where);
		cr_assert_eq(err.code, 0, "table %zu: %s", i, err.text);
		cr_assert_eq(r->queries_asked, 0);
		trn_pate_result_free(r);
		mech_rng_free(run);
	}
	trn_dataset_free(d);
	trn_dataset_free(added);
	trn_dataset_free(student);
	mech_rng_free(rng);
}

/*
 * Papernot et al. 2018, Theorem 6, written out here for one order lam:
 * the data-dependent RDP of a Gaussian noisy max at noise s whose less
 * likely outcome has probability q (mu_2 = s sqrt(ln 1/q), mu_1 = mu_2 + 1,
 * eps_i = mu_i / s^2), in long double.
 */
static double theorem6(long double q, long double s, long double lam)
{
	long double mu2 = s * sqrtl(-logl(q)), mu1 = mu2 + 1;
	long double eps1 = mu1 / (s * s), eps2 = mu2 / (s * s);
	long double a = (1 - q) / (1 - powl(q * expl(eps2), (mu2 - 1) / mu2));
	long double b = expl(eps1) / powl(q, 1 / (mu1 - 1));

	cr_assert(lam < mu1, "Theorem 6 needs the order below mu_1");
	return (double)(logl((1 - q) * powl(a, lam - 1) + q * powl(b, lam - 1)) / (lam - 1));
}

/*
 * A threshold check the teachers pass almost surely (votes 100 and 0,
 * threshold 91.5 at sigma 1: Pr[fail] = Phi(-8.5) = 9.5e-18) still costs
 * its data-dependent RDP.  Pr[answered] as 1 - 9.5e-18 rounded to 1, its
 * log to 0, and the check's RDP, read from the less likely outcome, was 0
 * at every order; the answer's log keeps its distance from 1, and order 8
 * gives Theorem 6 at q = Phi(-8.5) and noise sqrt(2).
 */
Test(pate_units, a_check_passed_almost_surely_keeps_its_data_dependent_cost)
{
	const double votes[] = {100, 0}, orders[] = {8};
	double logpr, r;
	long double q = erfcl(8.5L / sqrtl(2.0L)) / 2;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(acct_pate_threshold_logpr(votes, 2, 91.5, 1.0, &logpr, &err), 0, "%s",
		     err.text);
	cr_assert_float_eq(logpr, (double)log1pl(-q), 1e-12 * (double)q, "log Pr = %g", logpr);
	cr_assert_eq(acct_pate_threshold_rdp(logpr, 1.0, orders, 1, &r, &err), 0, "%s", err.text);
	cr_assert_float_eq(r, theorem6(q, sqrtl(2.0L), 8), 1e-9, "rdp %.17g", r);
	cr_assert_gt(r, 3.0);
}
