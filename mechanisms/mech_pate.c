/*
 * mech_pate.c: PATE's noisy aggregation of teacher votes, its per-query
 * data-dependent RDP and the smooth-sensitivity release of that RDP.
 *
 * Papernot, Abadi, Erlingsson, Goodfellow, Talwar, ICLR 2017 (LNMax), and
 * Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable
 * private learning with PATE", ICLR 2018 (GNMax, Confident-GNMax = Algorithm
 * 1, Interactive-GNMax = Algorithm 2, the data-dependent analysis, and the
 * smooth-sensitivity release of Appendix B).  It lives here, below the
 * server's session routes and the `pate` trainer, because both must label
 * a query with the same noise and account for it the same way; the
 * session routes add the ledger and the store around it, the trainer its
 * teachers and student.
 *
 * Noise.  Vote counts are integers, so the noise is exact discrete Gaussian
 * (Canonne, Kamath, Steinke 2020, Algorithm 3) and discrete Laplace for
 * LNMax (CKS Algorithm 2); the discrete Gaussian on an integer vector of
 * L2 sensitivity D is (D^2 / (2 s^2))-zCDP as the continuous one (CKS 2020,
 * Theorem 14), so `gnmax` (D^2 = 2) and `pate_threshold` (D = 1) events
 * price it.  Threshold checks compare integers:
 *  - Confident-GNMax: max_j n_j + Z >= T  <=>  max_j n_j - ceil(T) + Z >= 0;
 *  - Interactive-GNMax: max_j (n_j - M p_j) + Z >= T  <=>
 *    max_j (n_j + floor(-M p_j - T)) + Z >= 0, the floors computed from the
 *    student's public probabilities only;
 * each statistic is an integer of sensitivity 1.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"

static const char *const agg_names[MECH_PATE_AGG_COUNT] = {
	[MECH_PATE_LNMAX] = "lnmax",
	[MECH_PATE_GNMAX] = "gnmax",
	[MECH_PATE_CONFIDENT] = "confident_gnmax",
	[MECH_PATE_INTERACTIVE] = "interactive_gnmax",
};

const char *mech_pate_agg_name(mech_pate_agg agg)
{
	return (unsigned)agg < MECH_PATE_AGG_COUNT ? agg_names[agg] : NULL;
}

int mech_pate_agg_from_name(const char *name, mech_pate_agg *ret)
{
	for (unsigned a = 0; name && a < MECH_PATE_AGG_COUNT; a++)
		if (strcmp(name, agg_names[a]) == 0) {
			*ret = (mech_pate_agg)a;
			return 0;
		}
	return -1;
}

bool mech_pate_agg_checks(mech_pate_agg agg)
{
	return agg == MECH_PATE_CONFIDENT || agg == MECH_PATE_INTERACTIVE;
}

int mech_pate_cfg_resolve(mech_pate_cfg *c, acct_error *err)
{
	if (c->agg == MECH_PATE_LNMAX) {
		if (mech_discrete_laplace_scale(1.0 / c->gamma, &c->lap_num, &c->lap_den) < 0)
			return acct_error_set(err, ACCT_EINVAL, "/gamma",
					      "1/gamma outside the sampler's range");
		return 0;
	}
	if (mech_pate_agg_checks(c->agg))
		c->sigma1_used = mech_discrete_gaussian_sigma(c->sigma1);
	c->sigma2_used = mech_discrete_gaussian_sigma(c->sigma2);
	if ((mech_pate_agg_checks(c->agg) && !isfinite(c->sigma1_used)) || !isfinite(c->sigma2_used))
		return acct_error_set(err, ACCT_EINVAL, "/sigma2", "sigma outside the sampler's range");
	return 0;
}

/*
 * The label of argmax_j (v[j] + noise_j), ties broken uniformly at random;
 * noise exact discrete Gaussian (sigma2) or discrete Laplace (lap_num /
 * lap_den) per the aggregator.
 */
static int noisy_argmax(mech_rng *rng, const double *v, size_t m, const mech_pate_cfg *c,
			int64_t *ret)
{
	int64_t best = 0, label = 0, ties = 0;

	for (size_t j = 0; j < m; j++) {
		int64_t z, val;
		int rc = c->agg == MECH_PATE_LNMAX ?
				 mech_sample_discrete_laplace(rng, c->lap_num, c->lap_den, &z) :
				 mech_sample_discrete_gaussian(rng, c->sigma2_used, &z);

		if (rc < 0)
			return rc;
		val = (int64_t)v[j] + z;
		if (j == 0 || val > best) {
			best = val;
			label = (int64_t)j;
			ties = 1;
		} else if (val == best) {
			uint64_t u;

			ties++;
			if ((rc = mech_rng_uint_below(rng, (uint64_t)ties, &u)) < 0)
				return rc;
			if (u == 0)
				label = (int64_t)j;
		}
	}
	*ret = label;
	return 0;
}

int64_t mech_pate_threshold_statistic(const mech_pate_cfg *c, const double *v, const double *p)
{
	int64_t stat = INT64_MIN;

	for (size_t j = 0; j < (size_t)c->num_classes; j++) {
		int64_t sj = c->agg == MECH_PATE_CONFIDENT ?
				     (int64_t)v[j] - (int64_t)ceil(c->threshold) :
				     (int64_t)v[j] + (int64_t)floor(-(double)c->num_teachers * p[j] -
								   c->threshold);
		if (sj > stat)
			stat = sj;
	}
	return stat;
}

/* The threshold check of Algorithms 1 and 2 on the integer statistic of
 * sensitivity 1 (see the top): whether it passed into *ret_pass, its
 * data-dependent RDP (2018, Section 4.2) added to dd. */
static int threshold_check(mech_rng *rng, const mech_pate_cfg *c, const double *v,
			   const double *p, bool *ret_pass, double *dd, acct_error *err)
{
	int64_t stat, z;
	double pair[2], r[DPG_MAX_PATE_ORDERS], logpr;
	int rc;

	stat = mech_pate_threshold_statistic(c, v, p);
	if ((rc = mech_sample_discrete_gaussian(rng, c->sigma1_used, &z)) < 0)
		return acct_error_set(err, rc, "", "the random number generator failed");
	*ret_pass = stat + z >= 0;
	pair[0] = pair[1] = (double)stat;
	if ((rc = acct_pate_threshold_logpr(pair, 2, 0, c->sigma1_used, &logpr, err)) < 0 ||
	    (rc = acct_pate_threshold_rdp(logpr, c->sigma1_used, c->orders, c->n_orders, r, err)) < 0)
		return rc;
	for (size_t k = 0; k < c->n_orders; k++)
		dd[k] += r[k];
	return 0;
}

/* Interactive-GNMax (Algorithm 2): the confident student's own label,
 * which costs nothing more. */
static void student_label(const mech_pate_cfg *c, const double *p, mech_pate_outcome *out)
{
	size_t best = 0;

	for (size_t j = 1; j < (size_t)c->num_classes; j++)
		if (p[j] > p[best])
			best = j;
	if (p[best] >= c->student_confidence) {
		out->label = (int64_t)best;
		out->source = MECH_PATE_SRC_STUDENT;
	}
}

int mech_pate_run_query(mech_rng *rng, const mech_pate_cfg *c, const double *v, const double *p,
			mech_pate_outcome *out, double *dd, acct_error *err)
{
	size_t m = (size_t)c->num_classes, no = c->n_orders;
	double r[DPG_MAX_PATE_ORDERS], logq;
	bool answer = true;
	int rc;

	memset(out, 0, sizeof(*out));
	out->label = -1;
	for (size_t k = 0; k < no; k++)
		dd[k] = 0;
	if (mech_pate_agg_checks(c->agg)) {
		out->checked = true;
		if ((rc = threshold_check(rng, c, v, p, &answer, dd, err)) < 0)
			return rc;
	}
	if (!answer) {
		if (c->agg == MECH_PATE_INTERACTIVE && isfinite(c->student_confidence))
			student_label(c, p, out);
		return 0;
	}
	if ((rc = noisy_argmax(rng, v, m, c, &out->label)) < 0)
		return acct_error_set(err, rc, "", "the random number generator failed");
	out->source = MECH_PATE_SRC_TEACHERS;
	out->teacher_answer = true;
	if (c->agg == MECH_PATE_LNMAX) {
		/* Pure eps-DP: RDP <= min(eps, alpha eps^2 / 2) (Bun, Steinke 2016). */
		double eps = 2 * c->gamma;

		for (size_t k = 0; k < no; k++)
			dd[k] += fmin(eps, 0.5 * c->orders[k] * eps * eps);
		return 0;
	}
	/* Proposition 7's bound on q, then Theorem 6. */
	if ((rc = acct_pate_gnmax_logq(v, m, c->sigma2_used, &logq, err)) < 0 ||
	    (rc = acct_pate_gnmax_rdp(logq, c->sigma2_used, c->orders, no, r, err)) < 0)
		return rc;
	for (size_t k = 0; k < no; k++)
		dd[k] += r[k];
	return 0;
}

/* ---- the smooth-sensitivity release (Appendix B.5) ------------------------- */

/* The GNSS release's grid and noise floor (see mech_pate_release_draw):
 * the grid serves noise scales up to 2^8 times the public bound on SS, the
 * floor is 2^-8 of it. */
#define GNSS_GRID_HEADROOM 0x1p8
#define GNSS_FLOOR 0x1p-8

struct mech_pate_release {
	mech_pate_cfg c;
	double order;
	acct_pate_workspace *ws;
	acct_pate_ls_bound *lsb;   /* made at the first answer */
	double *ls, *ls_sum, *v;   /* D, D, m; D = the bound's distances */
	size_t distances;
	double f;
	int64_t answers;
	/* The first pass (mech_pate_release_count) and its cut. */
	int64_t counted;
	double at_0, cut_beta;
	double tail;               /* the public bound past a capped walk, or 0 */
	bool cut;
};

void mech_pate_release_free(mech_pate_release *r)
{
	if (!r)
		return;
	acct_pate_workspace_free(r->ws);
	acct_pate_ls_bound_free(r->lsb);
	free(r->ls);
	free(r->ls_sum);
	free(r->v);
	free(r);
}

int mech_pate_release_new(const mech_pate_cfg *c, double order, mech_pate_release **ret,
			  acct_error *err)
{
	size_t m = (size_t)c->num_classes, M = (size_t)c->num_teachers;
	mech_pate_release *r = calloc(1, sizeof(*r));

	if (r) {
		r->c = *c;
		r->order = order;
		r->ws = acct_pate_workspace_new(m, (int64_t)M);
		r->v = malloc(m * sizeof(*r->v));
	}
	if (!r || !r->ws || !r->v) {
		mech_pate_release_free(r);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	*ret = r;
	return 0;
}

/* The local-sensitivity bound and its sums, which depend only on the
 * configuration, made when the first answer needs them. */
static int release_bound_new(mech_pate_release *r, acct_error *err)
{
	size_t D;
	int rc;

	if ((rc = acct_pate_ls_bound_new(r->ws, (size_t)r->c.num_classes, r->c.num_teachers,
					 r->c.sigma2_used, r->order, &r->lsb, err)) < 0)
		return rc;
	D = acct_pate_ls_bound_distances(r->lsb);
	r->ls = malloc(D * sizeof(*r->ls));
	r->ls_sum = calloc(D, sizeof(*r->ls_sum));
	if (!r->ls || !r->ls_sum)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	r->distances = D;
	return 0;
}

/* One answered histogram: its RDP at the order (Theorem 6 below q0,
 * lambda / sigma^2 above) into f, and its local sensitivities at every
 * distance into ls_sum (one teacher changes every answered histogram at
 * once, so the sums bound the sum's).  The bound is the two-sided one of
 * acct_pate_ls_bound, not the one-way walk of Algorithms 4-5, which is not
 * smooth for small sigma or high orders (docs/pate.md). */
int mech_pate_release_add(mech_pate_release *r, const double *votes, acct_error *err)
{
	size_t m = (size_t)r->c.num_classes;
	double s2 = r->c.sigma2_used, logq, rdp;
	int rc;

	if (!r->lsb && (rc = release_bound_new(r, err)) < 0)
		return rc;
	/* The cut holds for the answers counted, and no more. */
	if (r->cut && r->answers >= r->counted)
		return acct_error_set(err, ACCT_EINTERNAL, "", "more answers than the first pass counted");
	memcpy(r->v, votes, m * sizeof(*r->v));
	if ((rc = acct_pate_gnmax_logq(r->v, m, s2, &logq, err)) < 0 ||
	    (rc = acct_pate_gnmax_rdp_ss(r->ws, logq, s2, r->order, &rdp, err)) < 0 ||
	    (rc = acct_pate_ls_bound_prefix(r->ws, r->lsb, r->v, r->ls, r->distances, err)) < 0)
		return rc;
	r->f += rdp;
	r->answers++;
	for (size_t d = 0; d < r->distances; d++)
		r->ls_sum[d] += r->ls[d];
	return 0;
}

int mech_pate_release_count(mech_pate_release *r, const double *votes, acct_error *err)
{
	size_t m = (size_t)r->c.num_classes;
	double at_0;
	int rc;

	if (r->answers > 0 || r->cut)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the first pass comes before any answer");
	if (!r->lsb && (rc = release_bound_new(r, err)) < 0)
		return rc;
	memcpy(r->v, votes, m * sizeof(*r->v));
	if ((rc = acct_pate_ls_bound_prefix(r->ws, r->lsb, r->v, &at_0, 1, err)) < 0)
		return rc;
	/* Summed in the order the adds sum ls_sum[0], so the two agree. */
	r->at_0 += at_0;
	r->counted++;
	return 0;
}

void mech_pate_release_horizon(mech_pate_release *r, double beta, int64_t max_walk)
{
	size_t cap;

	if (r->cut || r->answers > 0 || !r->lsb)
		return;
	r->distances = acct_pate_ls_bound_horizon(r->lsb, beta, (double)r->counted, r->at_0);
	/* The cap depends on public counts only, and so does the tail that
	 * stands for the distances past it (acct_pate_ls_bound_tail, 0 when
	 * the cap leaves none out): the released S is max(SS over the first
	 * cap distances, tail), a beta-smooth upper bound on SS whatever the
	 * data. */
	cap = max_walk > 0 && r->counted > 0 ? (size_t)(max_walk / r->counted) : SIZE_MAX;
	if (cap < 1)
		cap = 1;
	if (r->distances > cap)
		r->distances = cap;
	r->tail = acct_pate_ls_bound_tail(r->lsb, beta, (double)r->counted, cap);
	r->cut_beta = beta;
	r->cut = true;
}

void mech_pate_release_figures_get(const mech_pate_release *r, int64_t checks, double beta,
				   mech_pate_release_figures *ret)
{
	const mech_pate_cfg *c = &r->c;
	double checks_rdp = 0;

	/* The checks at their data-independent bound: no local-sensitivity
	 * bound for their data-dependent cost exists, and the bound has
	 * sensitivity 0. */
	if (mech_pate_agg_checks(c->agg))
		checks_rdp = (double)checks * r->order / (2 * c->sigma1_used * c->sigma1_used);
	ret->f = r->f + checks_rdp;
	ret->ss = fmax(acct_pate_smooth_sensitivity(beta, r->ls_sum, r->distances), r->tail);
	/* The cut is exact only for the counted histograms, all added, at its
	 * beta or a larger one: else no figure is released. */
	if (r->cut && (beta < r->cut_beta || r->answers != r->counted ||
		       (r->answers > 0 && r->ls_sum[0] != r->at_0)))
		ret->ss = INFINITY;
	ret->bound = (double)r->answers * r->order / (c->sigma2_used * c->sigma2_used) + checks_rdp;
}

/*
 * Nothing after the figures may depend on the data except the value
 * itself: not an error and not the grid (the last bits of an output on a
 * grid chosen from SS name the grid, and so a range of SS).  So, with B the
 * public bound on f and on its local sensitivity at every distance (each
 * answer's RDP is in [0, order / sigma2^2]):
 *  - the grid g is chosen from the public scale 2^8 B sigma;
 *  - f is clamped to [0, B] and rounded down to the grid: the function
 *    released has local sensitivity at most LS_f + g at any distance;
 *  - S = max(SS_beta + g, 2^-8 B).  SS_beta + g is a beta-smooth upper
 *    bound on that, and so is its max with a constant (S >= LS, and
 *    S(x) <= e^beta S(y) for neighbours; Nissim, Raskhodnikova, Smith
 *    2007, Def. 2.1).  With g <= 2^-11 B sigma <= 32 B (sigma <= 2^16),
 *    S sigma / g then lies in [8, 2^20] units whatever the data;
 *  - the sampler rounds S sigma up by a factor below 1 + 2^-23, which
 *    keeps the bound and makes it (beta + 2^-23)-smooth: the release is
 *    priced at beta + MECH_PATE_GNSS_BETA_SLACK = beta + 2^-22.
 */
int mech_pate_release_draw(mech_rng *rng, const mech_pate_release_figures *fig, double sigma,
			   double *ret_noisy, acct_error *err)
{
	double bound = fig->bound > 0 ? fig->bound : 1.0, fval = fig->f, ss = fig->ss;
	int shift = mech_gaussian_grid_shift(GNSS_GRID_HEADROOM * bound * sigma);
	double g = ldexp(1.0, -shift), scale;
	acct_error ignored;

	if (!(fval <= bound))
		fval = bound;
	if (!(fval >= 0))
		fval = 0;
	scale = fmax(ss + g, GNSS_FLOOR * bound) * sigma;
	if (!(ss >= 0 && scale <= GNSS_GRID_HEADROOM * bound * sigma))
		/* never: SS <= B and g <= 32 B */
		return acct_error_set(err, ACCT_EINTERNAL, "", "the smooth sensitivity is out of range");
	acct_error_init(&ignored);
	if (mech_gaussian_on_grid(rng, fval, scale, shift, ret_noisy, &ignored) < 0)
		return acct_error_set(err, ACCT_EINTERNAL, "", "the release noise could not be drawn");
	return 0;
}
