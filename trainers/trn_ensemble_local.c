/*
 * trn_ensemble_local.c: the local classifiers of the ensemble trainer
 * (Hamm, Cao, Belkin 2016, §3.1): each party's model, trained without
 * privacy on that party's rows, and its votes on the auxiliary rows.
 *
 * Nothing here is released: a party's votes may change arbitrarily with
 * its rows and the ensemble's sensitivity bound still holds
 * (docs/ensemble.md), so these are plain, deterministic learners.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "trn_internal.h"

/* Gradient tolerance of local models: their output need not be exact. */
#define LOCAL_TOL 1e-8

/* One-vs-rest linear models (or one for two classes), trained by
 * trn__erm_solve with the local loss; votes argmax_k w_k . u. */
static int local_linear(const trn_ensemble_params *p, trn__loss loss, const trn__party_rows *pr,
			trn__local_votes *lv, acct_error *err)
{
	uint32_t K = pr->num_classes, blocks = trn__ensemble_blocks(K);
	double *w = calloc((size_t)blocks * pr->du, sizeof(double));
	double *a = malloc(pr->n * sizeof(double));
	int rc = 0;

	if (!w || !a) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a local model");
		goto out;
	}
	for (uint32_t b = 0; b < blocks; b++) {
		uint32_t pos = blocks == 1 ? 1 : b;

		for (size_t i = 0; i < pr->n; i++)
			a[i] = pr->y[i] == pos ? 1.0 : 0.0;
		rc = trn__erm_solve(pr->u, pr->n, pr->du, a, p->local_lambda, loss, LOCAL_TOL,
				    false, w + (size_t)b * pr->du, err);
		if (rc < 0)
			goto out;
	}
	for (size_t i = 0; i < lv->n_aux; i++) {
		const double *ui = lv->u_aux + i * pr->du;
		double best = -INFINITY;

		for (uint32_t b = 0; b < blocks; b++) {
			double s = cblas_ddot((int)pr->du, w + (size_t)b * pr->du, 1, ui, 1);

			if (blocks == 1) {
				lv->cls[i] = s > 0.0 ? 1 : 0;
			} else if (s > best) {
				best = s;
				lv->cls[i] = b;
			}
		}
	}
out:
	free(w);
	free(a);
	return rc;
}

/*
 * Gaussian naive Bayes: per class, the prior count and each feature's mean
 * and variance; variances get a floor of 1e-9 times the largest one plus
 * 1e-12 (as scikit-learn's var_smoothing), so a constant feature stays
 * finite.  A class absent from the party is never predicted.
 */
static int local_gaussian_nb(const trn__party_rows *pr, trn__local_votes *lv, acct_error *err)
{
	size_t K = pr->num_classes, du = pr->du;
	double *mean = calloc(K * du, sizeof(double)), *var = calloc(K * du, sizeof(double));
	double *cnt = calloc(K, sizeof(double)), vmax = 0.0, floor_v;
	int rc = 0;

	if (!mean || !var || !cnt) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a local model");
		goto out;
	}
	for (size_t i = 0; i < pr->n; i++) {
		cnt[pr->y[i]] += 1.0;
		cblas_daxpy((int)du, 1.0, pr->u + i * du, 1, mean + pr->y[i] * du, 1);
	}
	for (size_t k = 0; k < K; k++)
		if (cnt[k] > 0)
			cblas_dscal((int)du, 1.0 / cnt[k], mean + k * du, 1);
	for (size_t i = 0; i < pr->n; i++)
		for (size_t j = 0; j < du; j++) {
			double e = pr->u[i * du + j] - mean[pr->y[i] * du + j];

			var[pr->y[i] * du + j] += e * e / cnt[pr->y[i]];
		}
	for (size_t t = 0; t < K * du; t++)
		vmax = var[t] > vmax ? var[t] : vmax;
	floor_v = 1e-9 * vmax + 1e-12;
	for (size_t i = 0; i < lv->n_aux; i++) {
		double best = -INFINITY;

		lv->cls[i] = 0;
		for (size_t k = 0; k < K; k++) {
			double s = log(cnt[k]);

			for (size_t j = 0; cnt[k] > 0 && j < du; j++) {
				double v = var[k * du + j] + floor_v, e = lv->u_aux[i * du + j] - mean[k * du + j];

				s -= 0.5 * (log(v) + e * e / v);
			}
			if (cnt[k] > 0 && s > best) {
				best = s;
				lv->cls[i] = (uint32_t)k;
			}
		}
	}
out:
	free(mean);
	free(var);
	free(cnt);
	return rc;
}

/* k nearest neighbours (Euclidean on the inputs), majority of their labels,
 * ties to the lowest class; k is capped at the party's row count. */
static int local_knn(const trn_ensemble_params *p, const trn__party_rows *pr, trn__local_votes *lv,
		     acct_error *err)
{
	size_t k = p->knn_k < pr->n ? p->knn_k : pr->n, du = pr->du;
	double *bd = malloc(k * sizeof(double));
	uint32_t *bl = malloc(k * sizeof(uint32_t)), *tally = calloc(pr->num_classes, sizeof(uint32_t));
	int rc = 0;

	if (!bd || !bl || !tally) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a local model");
		goto out;
	}
	for (size_t i = 0; i < lv->n_aux; i++) {
		size_t have = 0;

		for (size_t r = 0; r < pr->n; r++) {
			double dist = 0.0;
			size_t pos;

			for (size_t j = 0; j < du; j++) {
				double e = lv->u_aux[i * du + j] - pr->u[r * du + j];

				dist += e * e;
			}
			if (have == k && dist >= bd[k - 1])
				continue;
			pos = have < k ? have++ : k - 1;
			for (; pos > 0 && bd[pos - 1] > dist; pos--) {
				bd[pos] = bd[pos - 1];
				bl[pos] = bl[pos - 1];
			}
			bd[pos] = dist;
			bl[pos] = pr->y[r];
		}
		memset(tally, 0, pr->num_classes * sizeof(uint32_t));
		lv->cls[i] = 0;
		for (size_t t = 0; t < have; t++)
			tally[bl[t]]++;
		for (uint32_t c = 1; c < pr->num_classes; c++)
			if (tally[c] > tally[lv->cls[i]])
				lv->cls[i] = c;
	}
out:
	free(bd);
	free(bl);
	free(tally);
	return rc;
}

/* ---- depth-limited CART ------------------------------------------------------ */

/* A node: a leaf when feature < 0, else rows with u[feature] <= threshold
 * go to `left`. */
typedef struct tree_node {
	int32_t feature;
	double threshold;
	uint32_t left, right;
	uint32_t cls;
} tree_node;

/* A value and its label, sorted to scan thresholds. */
typedef struct tree_pair {
	double v;
	uint32_t y;
} tree_pair;

typedef struct tree_build {
	const trn__party_rows *pr;
	tree_node *nodes;
	size_t n_nodes;
	tree_pair *pairs;      /* n scratch */
	uint32_t *cl, *cr;     /* class counts left and right of a threshold */
} tree_build;

static int cmp_pair(const void *a, const void *b)
{
	double x = ((const tree_pair *)a)->v, y = ((const tree_pair *)b)->v;

	return (x > y) - (x < y);
}

/* The majority class of rows idx[0..n) (ties to the lowest class). */
static uint32_t tree_majority(tree_build *tb, const size_t *idx, size_t n)
{
	uint32_t K = tb->pr->num_classes, best = 0;

	memset(tb->cl, 0, K * sizeof(uint32_t));
	for (size_t i = 0; i < n; i++)
		tb->cl[tb->pr->y[idx[i]]]++;
	for (uint32_t c = 1; c < K; c++)
		if (tb->cl[c] > tb->cl[best])
			best = c;
	return best;
}

/*
 * The split of rows idx[0..n) with the lowest weighted Gini impurity
 * (Breiman et al. 1984): maximises sum_c l_c^2 / n_l + sum_c r_c^2 / n_r
 * over features and midpoints between distinct values.  Returns false when
 * no split beats the unsplit node.
 */
static bool tree_best_split(tree_build *tb, const size_t *idx, size_t n, int32_t *ret_f,
			    double *ret_t)
{
	uint32_t K = tb->pr->num_classes;
	double base = 0, best;
	bool found = false;

	tree_majority(tb, idx, n);
	for (uint32_t c = 0; c < K; c++)
		base += (double)tb->cl[c] * tb->cl[c] / (double)n;
	best = base * (1 + 1e-12);
	for (size_t j = 0; j < tb->pr->du; j++) {
		double sl = 0, sr = base * (double)n;

		for (size_t i = 0; i < n; i++)
			tb->pairs[i] = (tree_pair){tb->pr->u[idx[i] * tb->pr->du + j], tb->pr->y[idx[i]]};
		qsort(tb->pairs, n, sizeof(tree_pair), cmp_pair);
		tree_majority(tb, idx, n);
		memcpy(tb->cr, tb->cl, K * sizeof(uint32_t));
		memset(tb->cl, 0, K * sizeof(uint32_t));
		for (size_t i = 0; i + 1 < n; i++) {
			uint32_t y = tb->pairs[i].y;
			double score;

			/* sums of squared counts, updated as one row moves left */
			sl += 2.0 * tb->cl[y] + 1;
			sr -= 2.0 * tb->cr[y] - 1;
			tb->cl[y]++;
			tb->cr[y]--;
			if (tb->pairs[i + 1].v <= tb->pairs[i].v)
				continue;
			score = sl / (double)(i + 1) + sr / (double)(n - i - 1);
			if (score > best) {
				best = score;
				*ret_f = (int32_t)j;
				*ret_t = tb->pairs[i].v + (tb->pairs[i + 1].v - tb->pairs[i].v) / 2;
				found = true;
			}
		}
	}
	return found;
}

/* Grows the subtree of rows idx[0..n) at `depth`; returns its node index. */
static uint32_t tree_grow(tree_build *tb, size_t *idx, size_t n, uint32_t depth,
			  uint32_t max_depth)
{
	uint32_t me = (uint32_t)tb->n_nodes++;
	int32_t f = -1;
	double t = 0;
	size_t nl = 0;

	tb->nodes[me] = (tree_node){.feature = -1, .cls = tree_majority(tb, idx, n)};
	if (depth >= max_depth || n < 2 || !tree_best_split(tb, idx, n, &f, &t))
		return me;
	for (size_t i = 0; i < n; i++)   /* partition: u[f] <= t first */
		if (tb->pr->u[idx[i] * tb->pr->du + (size_t)f] <= t) {
			size_t s = idx[nl];

			idx[nl++] = idx[i];
			idx[i] = s;
		}
	tb->nodes[me].feature = f;
	tb->nodes[me].threshold = t;
	tb->nodes[me].left = tree_grow(tb, idx, nl, depth + 1, max_depth);
	tb->nodes[me].right = tree_grow(tb, idx + nl, n - nl, depth + 1, max_depth);
	return me;
}

/* A depth-limited CART classification tree on the party's rows. */
static int local_tree(const trn_ensemble_params *p, const trn__party_rows *pr,
		      trn__local_votes *lv, acct_error *err)
{
	size_t max_nodes = ((size_t)2 << p->max_depth) - 1;
	tree_build tb = {.pr = pr};
	size_t *idx = malloc(pr->n * sizeof(size_t));
	int rc = 0;

	tb.nodes = malloc(max_nodes * sizeof(tree_node));
	tb.pairs = malloc(pr->n * sizeof(tree_pair));
	tb.cl = malloc(pr->num_classes * sizeof(uint32_t));
	tb.cr = malloc(pr->num_classes * sizeof(uint32_t));
	if (!idx || !tb.nodes || !tb.pairs || !tb.cl || !tb.cr) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a local model");
		goto out;
	}
	for (size_t i = 0; i < pr->n; i++)
		idx[i] = i;
	tree_grow(&tb, idx, pr->n, 0, p->max_depth);
	for (size_t i = 0; i < lv->n_aux; i++) {
		const tree_node *nd = tb.nodes;

		while (nd->feature >= 0)
			nd = tb.nodes + (lv->u_aux[i * pr->du + (size_t)nd->feature] <= nd->threshold
						 ? nd->left
						 : nd->right);
		lv->cls[i] = nd->cls;
	}
out:
	free(idx);
	free(tb.nodes);
	free(tb.pairs);
	free(tb.cl);
	free(tb.cr);
	return rc;
}

/* Trains party j's model and writes its votes.  A party without labelled
 * rows votes class 0: any fixed rule will do, the votes being a function
 * of that party's rows alone. */
int trn__local_train_vote(const trn_ensemble_params *p, uint32_t j, const trn__party_rows *pr,
			  trn__local_votes *lv, acct_error *err)
{
	trn_local_model kind = p->local_model[j % p->n_local_models];

	if (pr->n == 0) {
		memset(lv->cls, 0, lv->n_aux * sizeof(uint32_t));
		return 0;
	}
	switch (kind) {
	case TRN_LOCAL_LOGREG:
		return local_linear(p, TRN__LOSS_LOGISTIC, pr, lv, err);
	case TRN_LOCAL_LINEAR_SVM:
		return local_linear(p, TRN__LOSS_SQ_HINGE, pr, lv, err);
	case TRN_LOCAL_GAUSSIAN_NB:
		return local_gaussian_nb(pr, lv, err);
	case TRN_LOCAL_KNN:
		return local_knn(p, pr, lv, err);
	default:
		return local_tree(p, pr, lv, err);
	}
}
