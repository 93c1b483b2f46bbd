/*
 * trn_slmc_run.c: one slmc job from start to released consensus: the
 * public feature map and initial consensus, the split of rows over
 * learners, K rounds of noisy consensus ADMM, and the metrics on public
 * test rows (docs/slmc.md, Algorithm 1).
 *
 * All learners run here, one after another, on rows held in one array
 * grouped by learner: the simulation is exact because a learner's upload
 * depends only on its own rows and on public state (Z, its dual).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_cblas.h>

#include "trn_slmc_internal.h"

typedef struct slmc_state {
	size_t n, d1, len;        /* rows, D + 1, (D + 1) x C */
	uint32_t C, M;
	double *a;                /* n x d1, rows grouped by learner */
	size_t *off;              /* learner m has rows off[m] .. off[m+1]-1 */
	double *alpha;            /* M x len: scaled duals (then theta~ + alpha) */
	double *theta;            /* len: one learner's upload */
	double *z_new;            /* len */
	double *u0;               /* n x C first memberships (public centres), or NULL */
	double *q, *c;            /* d1, C: the balance constraint q^T theta = c^T */
	trn__slmc_balance bal;
	trn__slmc_ws *ws;
	trn_slmc_model *model;    /* Z lives in model->theta */
} slmc_state;

static void state_free(slmc_state *s)
{
	double *arrays[] = {s->a, s->alpha, s->theta, s->z_new, s->u0, s->q, s->c};

	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		free(arrays[i]);
	free(s->off);
	trn__slmc_ws_free(s->ws);
	trn_slmc_model_free(s->model);
}

static double seconds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each row's learner: the party column, or a uniform draw from the CSPRNG
 * made per row (independent of every other row, so adding or removing a
 * row leaves the others' learners unchanged). */
static int assign_learners(const trn_slmc_params *p, size_t n, const uint32_t *party,
			   mech_rng *rng, uint32_t *ret_learner, acct_error *err)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t m;

		if (party) {
			if (party[i] >= p->parties)
				return acct_error_set(err, ACCT_EINVAL, "/params/party_column",
						      "row %zu names party %u of %u", i,
						      party[i], p->parties);
			ret_learner[i] = party[i];
			continue;
		}
		if (mech_rng_uint_below(rng, p->parties, &m) != 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random source failed");
		ret_learner[i] = (uint32_t)m;
	}
	return 0;
}

/* Features of every row, grouped by learner (a counting sort), into s->a;
 * with public centres, each row's first memberships into s->u0 alike. */
static int group_rows(slmc_state *s, const trn_dataset *train, const uint32_t *learner,
		      const trn_slmc_params *p, const double *centres, acct_error *err)
{
	size_t *pos = calloc(s->M + 1, sizeof(*pos));
	size_t cap = 0;

	if (!pos)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < s->n; i++)
		s->off[learner[i] + 1]++;
	for (uint32_t m = 0; m < s->M; m++) {
		if (s->off[m + 1] > cap)
			cap = s->off[m + 1];
		s->off[m + 1] += s->off[m];
		pos[m] = s->off[m];
	}
	for (size_t i = 0; i < s->n; i++) {
		size_t at = pos[learner[i]]++;

		trn__slmc_features(s->model->rff, train->x + i * train->d, 1, s->a + at * s->d1);
		if (centres)
			trn__slmc_centre_memberships(train->x + i * train->d, train->d, centres,
						     s->C, p->fuzzifier, s->u0 + at * s->C);
	}
	free(pos);
	return trn__slmc_ws_new(cap, s->d1, s->C, &s->ws, err);
}

/*
 * The balance constraint (docs/slmc.md, Sec. 2) from public data only: q
 * the mean mapped public row (phi, 1) and c the mean code 1/C, so the
 * consensus's mean output over the public rows is the mean code (the
 * class balance of maximum margin clustering, Xu et al. 2004).  Without
 * public rows q picks the bias: the bias is the mean code.
 */
static int balance_init(slmc_state *s, const trn_slmc_params *p, const trn_dataset *aux,
			acct_error *err)
{
	double *a = malloc(s->d1 * sizeof(double));
	int rc = 0;

	s->q = calloc(s->d1, sizeof(double));
	s->c = malloc(s->C * sizeof(double));
	if (!a || !s->q || !s->c) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t i = 0; aux && i < aux->n; i++) {
		trn__slmc_features(s->model->rff, aux->x + i * aux->d, 1, a);
		cblas_daxpy((int)s->d1, 1.0 / (double)aux->n, a, 1, s->q, 1);
	}
	if (!aux)
		s->q[s->d1 - 1] = 1.0;
	for (uint32_t k = 0; k < s->C; k++)
		s->c[k] = 1.0 / s->C;
	s->bal.q = s->q;
	s->bal.c = s->c;
	if (!trn__slmc_balance_fits(&s->bal, p->max_norm, s->d1, s->C))
		rc = acct_error_set(err, ACCT_EINVAL, "/params/max_norm",
				    "max_norm %g is below the norm of the balanced model",
				    p->max_norm);
out:
	free(a);
	return rc;
}

/* The public start: feature map, split, zero duals, and either FCM
 * centres of the public rows `aux` (first memberships against them, Z^0 =
 * 0) or, without public rows, Z^0 with N(0,1) weights and the mean code
 * as its bias (a data-independent random function into the label space,
 * so that the first memberships differ between clusters); then the
 * balance constraint from the same public rows. */
static int state_init(slmc_state *s, const trn_slmc_params *p, const trn_dataset *train,
		      const uint32_t *party, const trn_dataset *aux, mech_rng *rng,
		      acct_error *err)
{
	trn_rff *rff = NULL;
	uint32_t *learner = NULL;
	double *centres = NULL;
	size_t rows = train->n > 0 ? train->n : 1;  /* no malloc(0): it may give NULL */
	int rc;

	s->n = train->n;
	s->C = p->clusters;
	s->M = p->parties;
	s->d1 = (size_t)p->features + 1;
	s->len = s->d1 * s->C;
	rc = trn_rff_new((uint32_t)train->d, p->features, p->gamma, rng, &rff, err);
	if (rc != 0)
		return rc;
	rc = trn__slmc_model_new(rff, s->C, &s->model, err);
	if (rc != 0) {
		trn_rff_free(rff);
		return rc;
	}
	s->a = malloc(rows * s->d1 * sizeof(double));
	s->off = calloc((size_t)s->M + 1, sizeof(*s->off));
	s->alpha = calloc((size_t)s->M * s->len, sizeof(double));
	s->theta = malloc(s->len * sizeof(double));
	s->z_new = malloc(s->len * sizeof(double));
	learner = malloc(rows * sizeof(*learner));
	if (!s->a || !s->off || !s->alpha || !s->theta || !s->z_new || !learner) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if (aux) {
		centres = malloc((size_t)s->C * train->d * sizeof(double));
		s->u0 = malloc(rows * s->C * sizeof(double));
		if (!centres || !s->u0) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto out;
		}
		rc = trn__slmc_fcm_centres(aux, s->C, p->fuzzifier, rng, centres, err);
		if (rc != 0)
			goto out;
	}
	rc = assign_learners(p, s->n, party, rng, learner, err);
	if (rc == 0)
		rc = group_rows(s, train, learner, p, centres, err);
	if (rc == 0)
		rc = balance_init(s, p, aux, err);
	if (rc == 0 && !aux && mech_rng_normal_fill(rng, s->model->theta, s->len - s->C) != 0)
		rc = acct_error_set(err, ACCT_EINTERNAL, "", "the random source failed");
	/* The random start's bias is the mean code, inside the constraint. */
	if (rc == 0 && !aux)
		memcpy(s->model->theta + s->len - s->C, s->c, s->C * sizeof(double));
out:
	free(centres);
	free(learner);
	return rc;
}

/*
 * One round (Boyd et al. 2011, eqs. 7.6-7.8, g the indicator of the ball
 * of radius B within the balance constraint): every learner m takes
 * memberships from Z (or, in the first round with public centres, from
 * those), solves for theta_m towards v_m = Z - alpha_m and uploads
 * theta_m + N(0, sigma^2 I); then Z' = proj(mean_m(theta~_m + alpha_m))
 * and alpha_m += theta~_m - Z'.  The duals use the noisy uploads, so they
 * are public.
 */
static int admm_round(slmc_state *s, const trn_slmc_params *p, double sigma, mech_rng *rng,
		      double *ret_change, acct_error *err)
{
	double *z = s->model->theta, *v = s->z_new;
	int rc;

	for (uint32_t m = 0; m < s->M; m++) {
		double *alpha = s->alpha + (size_t)m * s->len;

		for (size_t j = 0; j < s->len; j++)
			v[j] = z[j] - alpha[j];
		if (s->u0)
			rc = trn__slmc_ridge(s->a + s->off[m] * s->d1, s->u0 + s->off[m] * s->C,
					     s->off[m + 1] - s->off[m], p, 1.0 / s->M, v, &s->bal,
					     s->ws, s->theta, err);
		else
			rc = trn__slmc_local_update(s->a + s->off[m] * s->d1,
						    s->off[m + 1] - s->off[m], p, 1.0 / s->M, z, v,
						    &s->bal, s->ws, s->theta, err);
		if (rc != 0)
			return rc;
		if (sigma > 0.0) {
			if (mech_rng_normal_fill(rng, s->ws->g, s->len) != 0)
				return acct_error_set(err, ACCT_EINTERNAL, "",
						      "the random source failed");
			cblas_daxpy((int)s->len, sigma, s->ws->g, 1, s->theta, 1);
		}
		/* From here on only the upload is used. */
		cblas_daxpy((int)s->len, 1.0, s->theta, 1, alpha, 1);
	}
	memset(s->z_new, 0, s->len * sizeof(double));
	for (uint32_t m = 0; m < s->M; m++)
		cblas_daxpy((int)s->len, 1.0 / s->M, s->alpha + (size_t)m * s->len, 1, s->z_new, 1);
	/* g = indicator of the ball ||Z|| <= B within the balance constraint
	 * ([B+11] eq. 7.6: the Z step is its prox, a projection).  Every local
	 * solution lies in that convex set, so the noiseless consensus does
	 * too, and projecting the noisy average can only bring it closer; it
	 * is post-processing of the uploads. */
	trn__slmc_project(s->z_new, &s->bal, p->max_norm, s->d1, s->C);
	for (uint32_t m = 0; m < s->M; m++)
		cblas_daxpy((int)s->len, -1.0, s->z_new, 1, s->alpha + (size_t)m * s->len, 1);
	/* The public-centre memberships serve the first round only. */
	free(s->u0);
	s->u0 = NULL;
	cblas_daxpy((int)s->len, -1.0, s->z_new, 1, z, 1);
	*ret_change = cblas_dnrm2((int)s->len, z, 1);
	memcpy(z, s->z_new, s->len * sizeof(double));
	return 0;
}

/* Clustering accuracy and NMI of the consensus on public test rows. */
static int test_metrics(const trn_slmc_model *m, const trn_dataset *test,
			trn_slmc_result *r, acct_error *err)
{
	uint32_t *cl;
	int rc;

	r->clustering_accuracy = NAN;
	r->nmi = NAN;
	if (!test)
		return 0;
	cl = malloc(test->n * sizeof(*cl));
	if (!cl)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	rc = trn_slmc_predict(m, test->x, test->n, test->d, cl, NULL, err);
	if (rc == 0)
		rc = trn_clustering_accuracy(cl, test->y, test->n, m->clusters, test->num_classes,
					     &r->clustering_accuracy, err);
	if (rc == 0)
		rc = trn_nmi(cl, test->y, test->n, m->clusters, test->num_classes, &r->nmi, err);
	free(cl);
	return rc;
}

/* The K rounds, with progress and cancellation; *ret_done rounds ran. */
static int admm_loop(slmc_state *s, const trn_slmc_params *p, double sigma, mech_rng *rng,
		     trn_slmc_progress_fn progress, void *user, const atomic_bool *cancel,
		     uint32_t *ret_done, acct_error *err)
{
	for (uint32_t k = 0; k < p->iterations; k++) {
		trn_slmc_progress pr;
		int rc;

		if (cancel && atomic_load(cancel))
			return TRN_CANCELLED;
		rc = admm_round(s, p, sigma, rng, &pr.consensus_change, err);
		if (rc != 0)
			return rc;
		*ret_done = k + 1;
		pr.iteration = k + 1;
		pr.iterations = p->iterations;
		pr.consensus = s->model;
		if (progress && progress(&pr, user) != 0)
			return TRN_CANCELLED;
	}
	return 0;
}

static int slmc_run(const trn_slmc_params *p, bool private, const trn_dataset *train,
		    const uint32_t *party, const trn_dataset *aux, const trn_dataset *test,
		    mech_rng *rng,
		    trn_slmc_progress_fn progress, void *user, const atomic_bool *cancel,
		    trn_slmc_result **ret, acct_error *err)
{
	slmc_state s;
	trn_slmc_result *r = NULL;
	double t0 = seconds_now();
	int rc, status;

	memset(&s, 0, sizeof(s));
	acct_gsl_quiet();
	if (!train || !rng)
		return acct_error_set(err, ACCT_EINVAL, "/data", "no training table");
	rc = trn__slmc_check_run_shape(p, train->n, train->d, err);
	if (rc == 0 && test && test->d != train->d)
		rc = acct_error_set(err, ACCT_EINVAL, "/params/test_data",
				    "test_data has %zu features, the table %zu", test->d, train->d);
	if (rc == 0 && aux && aux->d != train->d)
		rc = acct_error_set(err, ACCT_EINVAL, "/params/auxiliary_data",
				    "auxiliary_data has %zu features, the table %zu", aux->d,
				    train->d);
	if (rc != 0)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	r->noise_multiplier = private ? p->noise_multiplier : 0.0;
	r->sensitivity = trn_slmc_sensitivity(p);
	r->sigma = r->noise_multiplier * r->sensitivity;
	rc = state_init(&s, p, train, party, aux, rng, err);
	if (rc != 0)
		goto out;
	status = admm_loop(&s, p, r->sigma, rng, progress, user, cancel, &r->iterations_done,
			   err);
	if (status < 0) {
		rc = status;
		goto out;
	}
	rc = test_metrics(s.model, test, r, err);
	if (rc != 0)
		goto out;
	r->train_seconds = seconds_now() - t0;
	r->model = s.model;
	s.model = NULL;
	*ret = r;
	r = NULL;
	rc = status;
out:
	state_free(&s);
	trn_slmc_result_free(r);
	return rc;
}

int trn_slmc_run(const trn_slmc_params *p, const trn_dataset *train, const uint32_t *party,
		 const trn_dataset *aux, const trn_dataset *test, mech_rng *rng, trn_slmc_progress_fn progress,
		 void *progress_user, const atomic_bool *cancel, trn_slmc_result **ret,
		 acct_error *err)
{
	trn_slmc_params q;
	int rc;

	if (!p)
		return acct_error_set(err, ACCT_EINVAL, "/params", "no parameters");
	/* The run needs z itself; a target epsilon has done its work in
	 * trn_slmc_event. */
	q = *p;
	q.epsilon = 0.0;
	rc = trn_slmc_params_validate(&q, err);
	if (rc != 0)
		return rc;
	if (!(p->noise_multiplier > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/params/noise_multiplier",
				      "the noise multiplier must be resolved (trn_slmc_event) "
				      "before the run");
	return slmc_run(p, true, train, party, aux, test, rng, progress, progress_user, cancel, ret,
			err);
}

int trn_slmc_nonprivate_run(const trn_slmc_params *p, const trn_dataset *train,
			    const uint32_t *party, const trn_dataset *aux,
			    const trn_dataset *test, mech_rng *rng,
			    trn_slmc_progress_fn progress, void *progress_user,
			    const atomic_bool *cancel, trn_slmc_result **ret, acct_error *err)
{
	return slmc_run(p, false, train, party, aux, test, rng, progress, progress_user, cancel, ret,
			err);
}
