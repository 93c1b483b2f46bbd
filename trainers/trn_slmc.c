/*
 * trn_slmc.c: the slmc trainer's parameters, sensitivity, privacy event
 * and released model (soft large margin clustering, Wang and Chen,
 * Information Sciences 2013, over random Fourier features).
 *
 * The model is a cos feature layer and a linear map to the label space, so
 * predict needs no kernel matrix and no training row.  The privacy event is
 * fixed by the parameters alone: K Gaussian uploads whose sensitivity
 * follows from rho-strong convexity of each learner's ADMM subproblem
 * over a public convex set (the ball and the class-balance constraint),
 * not from the data (docs/slmc.md, Theorem 1).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>


#include "trn_internal.h"
#include "trn_slmc_internal.h"

/* Values beyond which a real parameter is surely a mistake. */
#define TRN_SLMC_MAX_REAL 1e6
#define TRN_SLMC_MAX_FUZZIFIER 100.0

/*
 * The least radius B: the balance constraint's nearest point to 0 has norm
 * ||c|| / ||q|| <= 1 (c is in the simplex, q ends in 1), so every B above
 * 1 leaves the local solve a feasible set (docs/slmc.md, Sec. 2); the
 * margin covers the 2^-40 the solve keeps inside the ball.
 */
#define TRN_SLMC_MIN_MAX_NORM (1.0 + 0x1p-20)

/*
 * The least lambda: the error bound of the local solve (solve_error_bound)
 * rests on a rounding model without underflow, and with subnormal terms
 * 2 lambda s_i a_i a_i^T the eigensolver's reflectors stop being
 * orthogonal (one extra row then moved an upload by 0.4 at lambda 1e-320).
 * At 1e-100, 2 lambda s_i >= 2e-298 even for s_i = C^(1-m) at C = 100 and
 * m = 100: ten decades above the underflow threshold (docs/slmc.md, Sec. 4).
 */
#define TRN_SLMC_MIN_LAMBDA 1e-100

void trn_slmc_params_default(trn_slmc_params *p)
{
	static const trn_slmc_params defaults = {
		.clusters = 3, .features = 200, .gamma = 1.0, .lambda = 1.0, .rho = 10.0,
		.fuzzifier = 2.0, .iterations = 10, .noise_multiplier = 0.0, .epsilon = 1.0,
		.parties = 2, .max_norm = 5.0, .neighbor = ACCT_ADD_REMOVE,
	};

	*p = defaults;
}

/* The fields the non-private baseline shares with the private run. */
static int params_check_model(const trn_slmc_params *p, acct_error *err)
{
	if (trn__check_count(p->clusters, 2, DPG_MAX_SLMC_CLUSTERS, "/params/clusters", err) < 0 ||
	    trn__check_count(p->features, 1, DPG_MAX_SLMC_FEATURES, "/params/features", err) < 0 ||
	    trn__check_positive(p->gamma, TRN_SLMC_MAX_REAL, "/params/gamma", err) < 0 ||
	    trn__check_positive(p->lambda, TRN_SLMC_MAX_REAL, "/params/lambda", err) < 0 ||
	    trn__check_positive(p->rho, TRN_SLMC_MAX_REAL, "/params/rho", err) < 0)
		return ACCT_EINVAL;
	if (p->lambda < TRN_SLMC_MIN_LAMBDA)
		return acct_error_set(err, ACCT_EINVAL, "/params/lambda",
				      "lambda must be at least %g: below it the local solve "
				      "underflows", TRN_SLMC_MIN_LAMBDA);
	if (!isfinite(p->fuzzifier) || !(p->fuzzifier > 1.0) ||
	    p->fuzzifier > TRN_SLMC_MAX_FUZZIFIER)
		return acct_error_set(err, ACCT_EINVAL, "/params/fuzzifier",
				      "fuzzifier must be > 1 and at most %g",
				      TRN_SLMC_MAX_FUZZIFIER);
	if (trn__check_count(p->iterations, 1, DPG_MAX_SLMC_ITERATIONS, "/params/iterations",
			     err) < 0 ||
	    trn__check_count(p->parties, 1, DPG_MAX_SLMC_PARTIES, "/params/parties", err) < 0 ||
	    trn__check_positive(p->max_norm, TRN_SLMC_MAX_REAL, "/params/max_norm", err) < 0)
		return ACCT_EINVAL;
	if (p->max_norm < TRN_SLMC_MIN_MAX_NORM)
		return acct_error_set(err, ACCT_EINVAL, "/params/max_norm",
				      "max_norm must be above 1, the norm the balance constraint "
				      "may force");
	if (p->neighbor != ACCT_ADD_REMOVE && p->neighbor != ACCT_REPLACE)
		return acct_error_set(err, ACCT_EINVAL, "/neighbor",
				      "unknown neighbouring relation");
	return 0;
}

int trn_slmc_params_validate(const trn_slmc_params *p, acct_error *err)
{
	bool has_z, has_eps;
	int rc;

	if (!p)
		return acct_error_set(err, ACCT_EINVAL, "/params", "no parameters");
	rc = params_check_model(p, err);
	if (rc != 0)
		return rc;
	if (!isfinite(p->noise_multiplier) || p->noise_multiplier < 0.0 ||
	    p->noise_multiplier > TRN_SLMC_MAX_REAL)
		return acct_error_set(err, ACCT_EINVAL, "/params/noise_multiplier",
				      "noise_multiplier must be > 0 and at most %g",
				      TRN_SLMC_MAX_REAL);
	if (!isfinite(p->epsilon) || p->epsilon < 0.0 || p->epsilon > TRN_SLMC_MAX_REAL)
		return acct_error_set(err, ACCT_EINVAL, "/params/epsilon",
				      "epsilon must be > 0 and at most %g", TRN_SLMC_MAX_REAL);
	has_z = p->noise_multiplier > 0.0;
	has_eps = p->epsilon > 0.0;
	if (has_z == has_eps)
		return acct_error_set(err, ACCT_EINVAL, "/params/noise_multiplier",
				      "give exactly one of noise_multiplier and epsilon");
	return 0;
}

double trn__slmc_rounding_units(const trn_slmc_params *p, double n_cap)
{
	double d1 = (double)p->features + 1.0;
	double m = TRN_SLMC_SUM_BLOCK + ceil(n_cap / TRN_SLMC_SUM_BLOCK);

	/* The factorisation (Higham 2002, Thm 10.4, || |R^T| |R| || <= d1 ||H||)
	 * with its margin; the block sums of H and of R (m each); the scaled
	 * rows sqrt(2 lambda s) a, whose s sums C powers (2 C + 6); H's
	 * diagonal (4); R's powers, 2 lambda and rho v (4). */
	return TRN_SLMC_SOLVE_ERR_UNITS * d1 * (3.0 * d1 + 1.0) + 2.0 * m +
	       2.0 * p->clusters + 14.0;
}

double trn__slmc_solve_slack(const trn_slmc_params *p, double n_cap)
{
	double slack = 2.0 * n_cap * 0x1p-53 * trn__slmc_rounding_units(p, n_cap);

	return fmax(TRN_SLMC_SOLVE_SLACK, slack);
}

/*
 * A bound on ||computed upload - exact upload||_F from the rounding that
 * does not scale with lambda: the part (1 + rho) / rho of ||H|| / rho,
 * times u W ||theta|| with ||theta|| <= B, and the 2^-40 B by which the
 * solve lands inside the ball (docs/slmc.md, Sec. 4).
 */
static double solve_error_bound(const trn_slmc_params *p)
{
	double w = trn__slmc_rounding_units(p, (double)DPG_MAX_TRAIN_EXAMPLES);

	return w * 0x1p-53 * p->max_norm * (1.0 + 1.0 / p->rho) + 0x1p-40 * p->max_norm;
}

double trn_slmc_sensitivity(const trn_slmc_params *p)
{
	double add_remove;

	if (!p || params_check_model(p, NULL) != 0)
		return NAN;
	/* Theorem 1 (docs/slmc.md): ||a|| <= sqrt(3), ||theta|| <= B, s <= 1 and
	 * ||t|| <= 1 bound the gradient of one row's loss by
	 * 2 lambda sqrt(3) (sqrt(3) B + 1); rho-strong convexity turns it into
	 * a bound on the move of the constrained minimiser. */
	add_remove = 2.0 * sqrt(3.0) * p->lambda * (sqrt(3.0) * p->max_norm + 1.0) / p->rho;
	/* Two computed uploads may each miss the exact one: by rounding that
	 * grows with lambda n / rho, bounded at the public row cap (never the
	 * table's private count), and by rounding relative to ||theta|| <= B,
	 * which when lambda / rho is tiny exceeds Delta itself. */
	add_remove += trn__slmc_solve_slack(p, (double)DPG_MAX_TRAIN_EXAMPLES) * add_remove +
		      2.0 * solve_error_bound(p);
	return p->neighbor == ACCT_REPLACE ? 2.0 * add_remove : add_remove;
}

int trn_slmc_event(const trn_slmc_params *p, double delta, const acct_options *opt,
		   acct_event **ret, double *ret_noise_multiplier, acct_error *err)
{
	acct_event *root = NULL, *inner;
	acct_options o;
	acct_error cerr;
	double z, eps_found;
	int rc;

	rc = trn_slmc_params_validate(p, err);
	if (rc != 0)
		return rc;
	inner = acct_event_gaussian(p->noise_multiplier > 0.0 ? p->noise_multiplier : 1.0);
	/* One round releases every learner's upload once: one Gaussian
	 * mechanism of sensitivity Delta (Theorem 1); K rounds compose. */
	root = acct_event_self_composed((int64_t)p->iterations, inner);
	if (!root)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (p->epsilon > 0.0) {
		if (!opt)
			memset(&o, 0, sizeof(o));
		else
			o = *opt;
		o.neighbor = p->neighbor;
		acct_error_init(&cerr);
		rc = acct_calibrate(root, root->u.self_composed.event, "noise_multiplier",
				    p->epsilon, delta, &o, &z, &eps_found, &cerr);
		if (rc != 0) {
			rc = acct_error_set(err, rc, "/params/epsilon",
					    "no noise reaches epsilon %g at delta %g: %s",
					    p->epsilon, delta, cerr.text);
			goto out;
		}
	}
	z = root->u.self_composed.event->u.gaussian.noise_multiplier;
	if (ret_noise_multiplier)
		*ret_noise_multiplier = z;
	*ret = root;
	root = NULL;
	rc = 0;
out:
	acct_event_free(root);
	return rc;
}

/* The shape checks with at least min_rows rows. */
static int check_shape(const trn_slmc_params *p, uint64_t n, uint64_t min_rows, size_t d,
		       acct_error *err)
{
	int rc = params_check_model(p, err);

	if (rc != 0)
		return rc;
	if (n < min_rows || n > (uint64_t)DPG_MAX_TRAIN_EXAMPLES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the training table needs %llu to %lld rows",
				      (unsigned long long)min_rows,
				      (long long)DPG_MAX_TRAIN_EXAMPLES);
	if (d < 1 || d > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/data", "the table needs 1 to %d features",
				      DPG_MAX_FEATURES);
	if ((long long)p->features * (long long)d > DPG_MAX_RFF_WEIGHTS)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "features x input columns exceeds %lld",
				      (long long)DPG_MAX_RFF_WEIGHTS);
	/* The coordinator keeps one dual of the model's size per learner. */
	if (((long long)p->features + 1) * p->clusters * p->parties > DPG_MAX_MODEL_PARAMS)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "(features + 1) x clusters x parties exceeds %lld",
				      (long long)DPG_MAX_MODEL_PARAMS);
	return 0;
}

int trn_slmc_check_shape(const trn_slmc_params *p, uint64_t n, size_t d, acct_error *err)
{
	return check_shape(p, n, 1, d, err);
}

int trn__slmc_check_run_shape(const trn_slmc_params *p, uint64_t n, size_t d, acct_error *err)
{
	return check_shape(p, n, 0, d, err);
}

/* ---- model --------------------------------------------------------------- */

int trn__slmc_model_new(trn_rff *rff, uint32_t C, trn_slmc_model **ret, acct_error *err)
{
	/* One block: the struct, then theta (the struct's size is a multiple
	 * of a pointer's, so theta is aligned for doubles). */
	size_t len = ((size_t)rff->features + 1) * C;
	trn_slmc_model *m = calloc(1, sizeof(*m) + len * sizeof(double));

	if (!m)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	m->theta = (double *)(m + 1);
	m->rff = rff;
	m->clusters = C;
	*ret = m;
	return 0;
}

void trn_slmc_model_free(trn_slmc_model *m)
{
	if (!m)
		return;
	trn_rff_free(m->rff);
	free(m);
}

void trn__slmc_features(const trn_rff *rff, const double *x, size_t n, double *ret_a)
{
	size_t D = rff->features;

	/* Map into the first n*D entries, then spread right to left so that
	 * no row is overwritten before it is moved. */
	trn_rff_map(rff, x, n, ret_a);
	for (size_t i = n; i-- > 0;) {
		double *a = ret_a + i * (D + 1);

		a[D] = 1.0;
		memmove(a, ret_a + i * D, D * sizeof(double));
		/* Finite cells near DBL_MAX overflow w.x to +-inf and cos to NaN.
		 * Such a row maps to phi = 0, so every row keeps ||a||^2 <= 3,
		 * as Theorem 1 needs (docs/slmc.md, Sec. 4). */
		for (size_t j = 0; j < D; j++) {
			if (!isfinite(a[j])) {
				memset(a, 0, D * sizeof(double));
				break;
			}
		}
	}
}

/* Rows mapped per block by predict and objective: bounds their scratch. */
#define TRN_SLMC_BLOCK_ROWS 512u

int trn_slmc_predict(const trn_slmc_model *m, const double *x, size_t n, size_t d,
		     uint32_t *ret_clusters, double *ret_scores, acct_error *err)
{
	size_t d1, C;
	double *a = NULL, *f = NULL;
	int rc = 0;

	if (!m || d != m->rff->d)
		return acct_error_set(err, ACCT_EINVAL, "/rows",
				      "rows must have the model's %u features",
				      m ? m->rff->d : 0u);
	d1 = (size_t)m->rff->features + 1;
	C = m->clusters;
	a = malloc(TRN_SLMC_BLOCK_ROWS * d1 * sizeof(double));
	f = malloc(TRN_SLMC_BLOCK_ROWS * C * sizeof(double));
	if (!a || !f) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t i0 = 0; i0 < n; i0 += TRN_SLMC_BLOCK_ROWS) {
		size_t b = n - i0 < TRN_SLMC_BLOCK_ROWS ? n - i0 : TRN_SLMC_BLOCK_ROWS;

		trn__slmc_features(m->rff, x + i0 * d, b, a);
		trn__slmc_outputs(m->theta, a, b, d1, (uint32_t)C, f);
		for (size_t i = 0; i < b; i++) {
			/* ||f - e_k||^2 = ||f||^2 - 2 f_k + 1: nearest code = argmax. */
			ret_clusters[i0 + i] = trn__argmax(f + i * C, (uint32_t)C);
			if (ret_scores)
				memcpy(ret_scores + (i0 + i) * C, f + i * C, C * sizeof(double));
		}
	}
out:
	free(a);
	free(f);
	return rc;
}

/* Sum over rows of sum_k u_ki^m ||f_i - y_k||^2 at the FCM memberships. */
static double membership_loss(const double *f, size_t n, uint32_t C, double fuzzifier,
			      double *u)
{
	double s = 0.0;

	for (size_t i = 0; i < n; i++) {
		trn__slmc_memberships(f + i * C, C, fuzzifier, u);
		for (uint32_t k = 0; k < C; k++) {
			double dist = 0.0;

			for (uint32_t l = 0; l < C; l++) {
				double e = f[i * C + l] - (l == k ? 1.0 : 0.0);

				dist += e * e;
			}
			s += pow(u[k], fuzzifier) * dist;
		}
	}
	return s;
}

int trn_slmc_objective(const trn_slmc_model *m, const trn_dataset *ds, double lambda,
		       double fuzzifier, double *ret, acct_error *err)
{
	size_t d1, C, D;
	double *a = NULL, *f = NULL, *u = NULL, loss = 0.0, w2 = 0.0;
	int rc = 0;

	if (!m || !ds || ds->d != m->rff->d)
		return acct_error_set(err, ACCT_EINVAL, "/data", "table and model disagree");
	D = m->rff->features;
	d1 = D + 1;
	C = m->clusters;
	/* One scratch block: mapped rows, their outputs, one membership. */
	a = malloc((TRN_SLMC_BLOCK_ROWS * (d1 + C) + C) * sizeof(double));
	if (!a) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	f = a + TRN_SLMC_BLOCK_ROWS * d1;
	u = f + TRN_SLMC_BLOCK_ROWS * C;
	for (size_t i0 = 0; i0 < ds->n; i0 += TRN_SLMC_BLOCK_ROWS) {
		size_t b = ds->n - i0 < TRN_SLMC_BLOCK_ROWS ? ds->n - i0 : TRN_SLMC_BLOCK_ROWS;

		trn__slmc_features(m->rff, ds->x + i0 * ds->d, b, a);
		trn__slmc_outputs(m->theta, a, b, d1, (uint32_t)C, f);
		loss += membership_loss(f, b, (uint32_t)C, fuzzifier, u);
	}
	for (size_t j = 0; j < D * C; j++)
		w2 += m->theta[j] * m->theta[j];
	*ret = 0.5 * w2 + lambda * loss;
out:
	free(a);
	return rc;
}

void trn_slmc_result_free(trn_slmc_result *r)
{
	if (!r)
		return;
	trn_slmc_model_free(r->model);
	free(r);
}

int trn_slmc_model_to_model(const trn_slmc_model *m, trn_model **ret, acct_error *err)
{
	const uint32_t acts[2] = {TRN_ACT_COS, TRN_ACT_IDENTITY};
	uint32_t widths[3];
	size_t d, D, C, n1;
	double *params, scale;
	int rc;

	if (!m || !m->rff || !ret)
		return acct_error_set(err, ACCT_EINVAL, "/model", "no model");
	d = m->rff->d;
	D = m->rff->features;
	C = m->clusters;
	widths[0] = (uint32_t)d;
	widths[1] = (uint32_t)D;
	widths[2] = (uint32_t)C;
	n1 = D * d + D;
	params = malloc((n1 + C * D + C) * sizeof(double));
	if (!params)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	memcpy(params, m->rff->omega, D * d * sizeof(double));
	memcpy(params + D * d, m->rff->phase, D * sizeof(double));
	/* phi(x) = sqrt(2/D) cos(Omega x + phase): the scale moves into W^T. */
	scale = sqrt(2.0 / (double)D);
	for (size_t k = 0; k < C; k++) {
		for (size_t j = 0; j < D; j++)
			params[n1 + k * D + j] = scale * m->theta[j * C + k];
		params[n1 + C * D + k] = m->theta[D * C + k];
	}
	rc = trn_model_from_layers(2, widths, acts, params, TRN_INPUT_NONE, 1.0, ret, err);
	free(params);
	return rc;
}
