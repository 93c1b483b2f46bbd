/*
 * trn_ensemble.c: learning privately from multiparty data (Hamm, Cao,
 * Belkin, ICML 2016, Algorithms 1 and 2): local classifiers trained per
 * party, their votes on public auxiliary rows, a regularised logistic ERM on
 * those votes solved to a stated gradient tolerance, and output
 * perturbation (Chaudhuri, Monteleoni, Sarwate, JMLR 2011).
 *
 * The ERM is solved by Newton's method with a Cholesky factorisation of the
 * d+1 by d+1 Hessian: the objective is lambda-strongly convex, so a small
 * gradient bounds the distance to the exact minimiser (||w - w*|| <=
 * ||grad R(w)|| / lambda), and that distance enters the sensitivity as a
 * stated slack (docs/ensemble.md).  First-order methods were not used: they
 * reach a 1e-10 gradient only after a number of steps that grows with the
 * condition number 1/lambda.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_internal.h"

/* Unit roundoff of binary64, 2^-53. */
#define ENS_UNIT_ROUNDOFF 0x1p-53

/* ---- names and parameters ------------------------------------------------ */

int trn_ensemble_algorithm_from_name(const char *name, trn_ensemble_algorithm *ret)
{
	static const trn__name names[] = {
		{ "soft_label", TRN_ENSEMBLE_SOFT_LABEL },
		{ "majority_vote", TRN_ENSEMBLE_MAJORITY_VOTE },
	};
	int v = trn__name_lookup(names, TRN__COUNT(names), name);

	if (v >= 0)
		*ret = (trn_ensemble_algorithm)v;
	return v < 0 ? -1 : 0;
}

int trn_local_model_from_name(const char *name, trn_local_model *ret)
{
	static const trn__name names[] = {
		{ "logreg", TRN_LOCAL_LOGREG }, { "linear_svm", TRN_LOCAL_LINEAR_SVM },
		{ "gaussian_nb", TRN_LOCAL_GAUSSIAN_NB }, { "knn", TRN_LOCAL_KNN },
		{ "decision_tree", TRN_LOCAL_DECISION_TREE },
	};
	int v = trn__name_lookup(names, TRN__COUNT(names), name);

	if (v >= 0)
		*ret = (trn_local_model)v;
	return v < 0 ? -1 : 0;
}

void trn_ensemble_params_default(trn_ensemble_params *p)
{
	memset(p, 0, sizeof(*p));
	p->algorithm = TRN_ENSEMBLE_SOFT_LABEL;
	p->epsilon = 1.0;
	p->parties = 0;
	p->n_local_models = 1;
	p->local_model[0] = TRN_LOCAL_LOGREG;
	p->lambda = 0.03;
	p->input_scale = 1.0;
	p->local_lambda = 1e-3;
	p->knn_k = 5;
	p->max_depth = 5;
}

static bool positive_finite(double x)
{
	return isfinite(x) && x > 0.0;
}

int trn_ensemble_params_validate(const trn_ensemble_params *p, acct_error *err)
{
	if (p->algorithm != TRN_ENSEMBLE_SOFT_LABEL && p->algorithm != TRN_ENSEMBLE_MAJORITY_VOTE)
		return acct_error_set(err, ACCT_EINVAL, "/params/algorithm",
				      "algorithm must be \"soft_label\" or \"majority_vote\"");
	if (!positive_finite(p->epsilon))
		return acct_error_set(err, ACCT_EINVAL, "/params/epsilon",
				      "epsilon must be finite and positive");
	if (trn__check_count(p->parties, 1, DPG_MAX_ENSEMBLE_PARTIES, "/params/parties", err) < 0)
		return ACCT_EINVAL;
	if (p->n_local_models < 1 || p->n_local_models > DPG_MAX_ENSEMBLE_LOCAL_KINDS)
		return acct_error_set(err, ACCT_EINVAL, "/params/local_model",
				      "local_model lists 1 to %d kinds",
				      DPG_MAX_ENSEMBLE_LOCAL_KINDS);
	for (uint32_t i = 0; i < p->n_local_models; i++)
		if ((unsigned)p->local_model[i] > TRN_LOCAL_DECISION_TREE)
			return acct_error_set(err, ACCT_EINVAL, "/params/local_model",
					      "unknown local model kind");
	if (!positive_finite(p->lambda) || p->lambda > 1e6)
		return acct_error_set(err, ACCT_EINVAL, "/params/lambda",
				      "lambda must be in (0, 1e6]");
	if (!positive_finite(p->input_scale))
		return acct_error_set(err, ACCT_EINVAL, "/params/input_scale",
				      "input_scale must be finite and positive");
	if (!positive_finite(p->local_lambda) || p->local_lambda > 1e6)
		return acct_error_set(err, ACCT_EINVAL, "/params/local_lambda",
				      "local_lambda must be in (0, 1e6]");
	if (trn__check_count(p->knn_k, 1, DPG_MAX_ENSEMBLE_KNN_K, "/params/knn_k", err) < 0)
		return ACCT_EINVAL;
	return trn__check_count(p->max_depth, 1, DPG_MAX_ENSEMBLE_TREE_DEPTH, "/params/max_depth",
				err);
}

int trn_ensemble_event(const trn_ensemble_params *p, acct_event **ret, acct_error *err)
{
	acct_event *ev;
	int rc = trn_ensemble_params_validate(p, err);

	if (rc < 0)
		return rc;
	ev = acct_event_epsilon_delta(p->epsilon, 0.0);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for an event");
	*ret = ev;
	return 0;
}

static bool uses_kind(const trn_ensemble_params *p, trn_local_model kind)
{
	for (uint32_t i = 0; i < p->n_local_models && i < p->parties; i++)
		if (p->local_model[i] == kind)
			return true;
	return false;
}

int trn_ensemble_check_shape(const trn_ensemble_params *p, size_t d, uint32_t num_classes,
			     uint64_t n_train, uint64_t n_aux, acct_error *err)
{
	int rc = trn_ensemble_params_validate(p, err);
	double beta;

	if (rc < 0)
		return rc;
	if (d < 1 || d > DPG_MAX_ENSEMBLE_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "an ensemble job uses 1 to %d features",
				      DPG_MAX_ENSEMBLE_FEATURES);
	if (num_classes < 2 || num_classes > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "classes must be 2 to %d", DPG_MAX_CLASSES);
	if (n_aux < 1 || n_aux > DPG_MAX_ENSEMBLE_AUX_ROWS)
		return acct_error_set(err, ACCT_EINVAL, "/params/auxiliary_data",
				      "the auxiliary table must have 1 to %d rows",
				      DPG_MAX_ENSEMBLE_AUX_ROWS);
	if (uses_kind(p, TRN_LOCAL_KNN) &&
	    (double)n_aux * (double)n_train * (double)d > DPG_MAX_ENSEMBLE_KNN_WORK)
		return acct_error_set(err, ACCT_EINVAL, "/params/local_model",
				      "knn over %llu private rows, %llu auxiliary rows and %zu "
				      "features would take more than %g operations",
				      (unsigned long long)n_train, (unsigned long long)n_aux, d,
				      DPG_MAX_ENSEMBLE_KNN_WORK);
	/* Each block's noise has norm Gamma(d + 1, 1) / beta, a sum of d + 1
	 * Exp(1) draws each below 745 (mech__exp1 reaches -ln of the least
	 * double): a beta that underflows to 0, or a norm past the largest
	 * double, would fail the job after it trained. */
	beta = trn_ensemble_noise_beta(p, d, num_classes, n_aux);
	if (!(beta > 0.0) || !isfinite(1024.0 * (double)(d + 1) / beta))
		return acct_error_set(err, ACCT_EINVAL, "/params/epsilon",
				      "epsilon %g at lambda %g gives the noise rate beta = %g, "
				      "whose noise a double cannot hold",
				      p->epsilon, p->lambda, beta);
	return 0;
}

/*
 * Sensitivity of the released blocks, summed over blocks (docs/ensemble.md):
 * the exact minimisers move by at most 2/lambda (Algorithm 1, Theorem 1) or
 * 2/(M lambda) (Algorithm 2, Theorem 3) in total over the one-vs-rest
 * blocks.  Each returned block is within tau/lambda of its exact minimiser,
 * tau the true gradient norm at the stop: at most the tolerance plus a
 * first-order bound on the rounding error of the computed gradient
 * (Higham 2002, §3.1: a sum of n terms errs by at most about n u times the
 * sum of their magnitudes; here each coordinate is (1/n) sum r_i u_ij + lambda w_j
 * with |r_i| <= 1 + (du / lambda) u from the rounded margins, |u_ij| <= 1,
 * and ||w|| <= 1/lambda).  Two tables' blocks then differ by 2 tau/lambda
 * more than their minimisers.
 */
double trn_ensemble_noise_beta(const trn_ensemble_params *p, size_t d, uint32_t num_classes,
			       uint64_t n_aux)
{
	double du = (double)d + 1.0, lam = p->lambda, s, tau;
	uint32_t blocks = trn__ensemble_blocks(num_classes);

	if (trn_ensemble_params_validate(p, NULL) < 0 || d < 1 || n_aux < 1 || blocks == 0)
		return 0.0;
	s = p->algorithm == TRN_ENSEMBLE_MAJORITY_VOTE ? 2.0 / lam : 2.0 / (p->parties * lam);
	tau = TRN__ENSEMBLE_GRAD_TOL +
	      sqrt(du) * 4.0 * ENS_UNIT_ROUNDOFF * ((double)n_aux + du * (2.0 + 1.0 / lam) + 8.0);
	s += blocks * 2.0 * tau / lam;
	return p->epsilon / s;
}

/* ---- inputs and votes --------------------------------------------------------- */

int trn__ensemble_inputs(const trn_dataset *ds, double B, double **ret_u, acct_error *err)
{
	size_t d = ds->d, du = d + 1;
	double *u = malloc(ds->n * du * sizeof(double));

	if (!u)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for ERM inputs");
	for (size_t i = 0; i < ds->n; i++) {
		const double *x = ds->x + i * d;
		double c = trn__unit_ball_factor(x, d, B) / sqrt(2.0);

		for (size_t j = 0; j < d; j++)
			u[i * du + j] = c * x[j];
		u[i * du + d] = 1.0 / sqrt(2.0);
	}
	*ret_u = u;
	return 0;
}

/* Row indices grouped by party (counting sort): party j's rows are
 * order[start[j] .. start[j+1]).  Rows of no declared party or class are
 * left out. */
static int group_by_party(const trn_dataset *train, const uint32_t *party, uint32_t M,
			  size_t **ret_order, size_t **ret_start)
{
	size_t *start = calloc((size_t)M + 2, sizeof(size_t));
	size_t *order = malloc((train->n ? train->n : 1) * sizeof(size_t));

	if (!start || !order) {
		free(start);
		free(order);
		return -1;
	}
	for (size_t i = 0; i < train->n; i++)
		if (party[i] < M && train->y[i] < train->num_classes)
			start[party[i] + 2]++;
	for (uint32_t j = 0; j < M; j++)
		start[j + 2] += start[j + 1];
	for (size_t i = 0; i < train->n; i++)
		if (party[i] < M && train->y[i] < train->num_classes)
			order[start[party[i] + 1]++] = i;
	*ret_order = order;
	*ret_start = start;
	return 0;
}

/* Gathers party j's rows into pr (buffers sized for the largest party). */
static void gather_party(const trn_dataset *train, const double *u_train, const size_t *order,
			 const size_t *start, uint32_t j, trn__party_rows *pr)
{
	pr->n = start[j + 1] - start[j];
	for (size_t r = 0; r < pr->n; r++) {
		size_t i = order[start[j] + r];

		memcpy(pr->u + r * pr->du, u_train + i * pr->du, pr->du * sizeof(double));
		pr->y[r] = train->y[i];
	}
}

static bool cancelled(const atomic_bool *cancel)
{
	return cancel && atomic_load(cancel);
}

int trn__ensemble_votes(const trn_ensemble_params *p, const trn_dataset *train,
			const double *u_train, const uint32_t *party, const double *u_aux,
			size_t n_aux, trn_ensemble_progress_fn progress, void *progress_user,
			const atomic_bool *cancel, uint32_t *counts, acct_error *err)
{
	trn__party_rows pr = {.du = train->d + 1, .num_classes = train->num_classes};
	trn__local_votes lv = {.u_aux = u_aux, .n_aux = n_aux};
	size_t *order = NULL, *start = NULL, biggest = 1;
	int rc = 0;

	if (group_by_party(train, party, p->parties, &order, &start) < 0)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory grouping parties");
	for (uint32_t j = 0; j < p->parties; j++)
		biggest = start[j + 1] - start[j] > biggest ? start[j + 1] - start[j] : biggest;
	pr.u = malloc(biggest * pr.du * sizeof(double));
	pr.y = malloc(biggest * sizeof(uint32_t));
	lv.cls = malloc(n_aux * sizeof(uint32_t));
	if (!pr.u || !pr.y || !lv.cls) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for local models");
		goto out;
	}
	for (uint32_t j = 0; j < p->parties; j++) {
		trn_ensemble_progress pg = {"local_models", j, p->parties};

		if (cancelled(cancel) || (progress && progress(&pg, progress_user) != 0)) {
			rc = TRN_CANCELLED;
			goto out;
		}
		gather_party(train, u_train, order, start, j, &pr);
		rc = trn__local_train_vote(p, j, &pr, &lv, err);
		if (rc < 0)
			goto out;
		for (size_t i = 0; i < n_aux; i++)
			counts[i * train->num_classes + lv.cls[i]]++;
	}
out:
	free(order);
	free(start);
	free(pr.u);
	free(pr.y);
	free(lv.cls);
	return rc;
}

/* ---- targets, fit, release ------------------------------------------------ */

void trn__ensemble_targets(trn_ensemble_algorithm algorithm, const uint32_t *counts, size_t n,
			   uint32_t num_classes, uint32_t parties, double *a)
{
	uint32_t blocks = trn__ensemble_blocks(num_classes);

	for (size_t i = 0; i < n; i++) {
		const uint32_t *c = counts + i * num_classes;
		uint32_t maj = 0;

		for (uint32_t k = 1; k < num_classes; k++)
			if (c[k] > c[maj])
				maj = k;
		for (uint32_t b = 0; b < blocks; b++) {
			uint32_t pos = blocks == 1 ? 1 : b;

			/* Algorithm 1, eq. (6): the majority label; Algorithm 2:
			 * alpha(x), the fraction of the M parties voting pos. */
			a[i * blocks + b] = algorithm == TRN_ENSEMBLE_MAJORITY_VOTE
						    ? (maj == pos ? 1.0 : 0.0)
						    : (double)c[pos] / (double)parties;
		}
	}
}

int trn__ensemble_fit(const double *u, size_t n, size_t du, const double *a, uint32_t blocks,
		      double lambda, double *w, acct_error *err)
{
	double *ab = malloc(n * sizeof(double));
	int rc = 0;

	if (!ab)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for ERM targets");
	for (uint32_t b = 0; b < blocks && rc == 0; b++) {
		for (size_t i = 0; i < n; i++)
			ab[i] = a[i * blocks + b];
		rc = trn__erm_solve(u, n, du, ab, lambda, TRN__LOSS_LOGISTIC,
				    TRN__ENSEMBLE_GRAD_TOL, true, w + (size_t)b * du, err);
	}
	free(ab);
	return rc;
}

int trn__ensemble_release(double *w, uint32_t num_classes, size_t d, double beta, double B,
			  mech_rng *rng, trn_model **ret, acct_error *err)
{
	uint32_t blocks = trn__ensemble_blocks(num_classes), widths[2] = {(uint32_t)d, num_classes};
	uint32_t acts[1] = {TRN_ACT_IDENTITY};
	size_t du = d + 1;
	double *params = calloc((size_t)num_classes * du, sizeof(double));
	double *eta = malloc(du * sizeof(double));
	int rc = 0;

	if (!params || !eta) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for the model");
		goto out;
	}
	for (uint32_t b = 0; b < blocks; b++) {
		/* Theorems 1 and 3: w + eta, eta of density ~ exp(-beta ||eta||),
		 * independently per block (docs/ensemble.md: the privacy loss is
		 * at most beta times the summed block sensitivities). */
		rc = mech_ball_sample(rng, du, beta, eta, err);
		if (rc < 0)
			goto out;
		cblas_daxpy((int)du, 1.0, eta, 1, w + (size_t)b * du, 1);
	}
	/* Post-processing: the logit w . (z, 1)/sqrt(2) as W z + b, W the
	 * num_classes x d rows then b; two classes keep class 0's logit 0. */
	for (uint32_t b = 0; b < blocks; b++) {
		uint32_t row = blocks == 1 ? 1 : b;

		for (size_t j = 0; j < d; j++)
			params[(size_t)row * d + j] = w[(size_t)b * du + j] / sqrt(2.0);
		params[(size_t)num_classes * d + row] = w[(size_t)b * du + d] / sqrt(2.0);
	}
	rc = trn_model_from_layers(1, widths, acts, params, TRN_INPUT_UNIT_BALL, B, ret, err);
out:
	free(params);
	free(eta);
	return rc;
}

/* ---- the job ---------------------------------------------------------------- */

void trn_ensemble_result_free(trn_ensemble_result *r)
{
	if (!r)
		return;
	trn_model_free(r->model);
	free(r);
}

static int run_check(const trn_ensemble_params *p, const trn_dataset *train,
		     const uint32_t *party, const trn_dataset *aux, const trn_dataset *test,
		     mech_rng *rng, acct_error *err)
{
	if (!train || !party || !aux || !rng)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "an ensemble job needs its table, parties and auxiliary data");
	if (aux->d != train->d)
		return acct_error_set(err, ACCT_EINVAL, "/params/auxiliary_data",
				      "the auxiliary table has %zu features, the table %zu",
				      aux->d, train->d);
	if (test && (test->d != train->d || test->num_classes != train->num_classes))
		return acct_error_set(err, ACCT_EINVAL, "/params/test_data",
				      "the test table does not match the table's shape");
	return trn_ensemble_check_shape(p, train->d, train->num_classes, train->n, aux->n, err);
}

/* The ERM phase: targets from the votes, then every block's minimiser. */
static int run_erm(const trn_ensemble_params *p, const uint32_t *counts, const double *u_aux,
		   size_t n_aux, uint32_t K, size_t du, double *w, acct_error *err)
{
	uint32_t blocks = trn__ensemble_blocks(K);
	double *a = malloc(n_aux * blocks * sizeof(double));
	int rc;

	if (!a)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for ERM targets");
	trn__ensemble_targets(p->algorithm, counts, n_aux, K, p->parties, a);
	rc = trn__ensemble_fit(u_aux, n_aux, du, a, blocks, p->lambda, w, err);
	free(a);
	return rc;
}

static int report(trn_ensemble_progress_fn progress, void *user, const char *phase,
		  uint32_t parties, const atomic_bool *cancel)
{
	trn_ensemble_progress pg = {phase, parties, parties};

	return cancelled(cancel) || (progress && progress(&pg, user) != 0) ? TRN_CANCELLED : 0;
}

int trn_ensemble_run(const trn_ensemble_params *p, const trn_dataset *train,
		     const uint32_t *party, const trn_dataset *aux, const trn_dataset *test,
		     mech_rng *rng, trn_ensemble_progress_fn progress, void *progress_user,
		     const atomic_bool *cancel, trn_ensemble_result **ret, acct_error *err)
{
	double *u_train = NULL, *u_aux = NULL, *w = NULL, t0 = trn__now_seconds();
	uint32_t *counts = NULL, K;
	trn_ensemble_result *r = NULL;
	int rc = run_check(p, train, party, aux, test, rng, err);

	if (rc < 0)
		return rc;
	K = train->num_classes;
	r = calloc(1, sizeof(*r));
	counts = calloc(aux->n * K, sizeof(uint32_t));
	w = calloc((size_t)trn__ensemble_blocks(K) * (train->d + 1), sizeof(double));
	if (!r || !counts || !w) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for an ensemble job");
		goto out;
	}
	rc = trn__ensemble_inputs(train, p->input_scale, &u_train, err);
	if (rc == 0)
		rc = trn__ensemble_inputs(aux, p->input_scale, &u_aux, err);
	if (rc == 0)
		rc = trn__ensemble_votes(p, train, u_train, party, u_aux, aux->n, progress,
					 progress_user, cancel, counts, err);
	if (rc == 0)
		rc = report(progress, progress_user, "erm", p->parties, cancel);
	if (rc == 0)
		rc = run_erm(p, counts, u_aux, aux->n, K, train->d + 1, w, err);
	if (rc == 0)
		rc = report(progress, progress_user, "release", p->parties, cancel);
	if (rc != 0)
		goto out;
	r->noise_beta = trn_ensemble_noise_beta(p, train->d, K, aux->n);
	rc = trn__ensemble_release(w, K, train->d, r->noise_beta, p->input_scale, rng, &r->model,
				   err);
	r->test_accuracy = NAN;
	if (rc == 0 && test)
		rc = trn_model_evaluate(r->model, test, &r->test_accuracy, NULL, err);
	if (rc < 0)
		goto out;
	r->aux_rows = aux->n;
	r->train_seconds = trn__now_seconds() - t0;
	*ret = r;
	r = NULL;
out:
	trn_ensemble_result_free(r);
	free(u_train);
	free(u_aux);
	free(w);
	free(counts);
	return rc;
}
