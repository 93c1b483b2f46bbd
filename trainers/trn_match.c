/*
 * trn_match.c: clustering metrics on public labelled rows: clustering
 * accuracy through the assignment problem, and normalised mutual
 * information.
 *
 * A cluster index carries no meaning, so accuracy is taken under the best
 * one-to-one map of clusters to classes.  Trying all maps costs C!; the
 * Hungarian method (Kuhn 1955, Munkres 1957) with dual potentials finds it
 * in O(n^3), which is what makes C up to DPG_MAX_SLMC_CLUSTERS usable.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "trn.h"

/* The largest assignment problem: clusters and classes padded square. */
#define TRN_MATCH_MAX_N ((size_t)DPG_MAX_SLMC_CLUSTERS + DPG_MAX_CLASSES)

/*
 * Row i of the 1-based problem joins the matching: Dijkstra-like search for
 * the shortest augmenting path in reduced costs, potentials u (rows) and v
 * (columns) kept feasible, u[i] + v[j] <= cost(i, j) (the primal-dual
 * Hungarian method, Kuhn-Munkres; each row costs O(n^2)).  p[j] is the row
 * matched to column j (0: none), way[j] the previous column on the path.
 */
static void match_add_row(const double *cost, size_t n, size_t i, double *u, double *v,
			  size_t *p, size_t *way, double *minv, unsigned char *used)
{
	size_t j0 = 0;

	p[0] = i;
	for (size_t j = 0; j <= n; j++) {
		minv[j] = DBL_MAX;
		used[j] = 0;
	}
	do {
		size_t i0 = p[j0], j1 = 0;
		double delta = DBL_MAX;

		used[j0] = 1;
		for (size_t j = 1; j <= n; j++) {
			double cur;

			if (used[j])
				continue;
			cur = cost[(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
			if (cur < minv[j]) {
				minv[j] = cur;
				way[j] = j0;
			}
			if (minv[j] < delta) {
				delta = minv[j];
				j1 = j;
			}
		}
		for (size_t j = 0; j <= n; j++) {
			if (used[j]) {
				u[p[j]] += delta;
				v[j] -= delta;
			} else {
				minv[j] -= delta;
			}
		}
		j0 = j1;
	} while (p[j0] != 0);
	do {
		size_t j1 = way[j0];

		p[j0] = p[j1];
		j0 = j1;
	} while (j0 != 0);
}

int trn_match_assign(const double *cost, size_t n, size_t *ret_assign, acct_error *err)
{
	double *u = NULL, *v = NULL, *minv = NULL;
	size_t *p = NULL, *way = NULL;
	unsigned char *used = NULL;
	int rc;

	if (n < 1 || n > TRN_MATCH_MAX_N)
		return acct_error_set(err, ACCT_EINVAL, "", "assignment size must be 1 to %zu",
				      TRN_MATCH_MAX_N);
	for (size_t k = 0; k < n * n; k++)
		if (!isfinite(cost[k]))
			return acct_error_set(err, ACCT_EINVAL, "", "costs must be finite");
	u = calloc(n + 1, sizeof(*u));
	v = calloc(n + 1, sizeof(*v));
	minv = calloc(n + 1, sizeof(*minv));
	p = calloc(n + 1, sizeof(*p));
	way = calloc(n + 1, sizeof(*way));
	used = calloc(n + 1, 1);
	if (!u || !v || !minv || !p || !way || !used) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t i = 1; i <= n; i++)
		match_add_row(cost, n, i, u, v, p, way, minv, used);
	for (size_t j = 1; j <= n; j++)
		ret_assign[p[j] - 1] = j - 1;
	rc = 0;
out:
	free(u);
	free(v);
	free(minv);
	free(p);
	free(way);
	free(used);
	return rc;
}

/* The contingency table, n_clusters x n_classes, of the labelled rows;
 * *ret_total is their count. */
static int contingency(const uint32_t *clusters, const uint32_t *labels, size_t n,
		       uint32_t n_clusters, uint32_t n_classes, double **ret, double *ret_total,
		       acct_error *err)
{
	double *t, total = 0.0;

	if (n_clusters < 1 || n_clusters > DPG_MAX_SLMC_CLUSTERS || n_classes < 1 ||
	    n_classes > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/test_data",
				      "clusters must be 1 to %d and classes 1 to %d",
				      DPG_MAX_SLMC_CLUSTERS, DPG_MAX_CLASSES);
	t = calloc((size_t)n_clusters * n_classes, sizeof(*t));
	if (!t)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (labels[i] == TRN_NO_CLASS)
			continue;
		if (clusters[i] >= n_clusters || labels[i] >= n_classes) {
			free(t);
			return acct_error_set(err, ACCT_EINVAL, "/test_data",
					      "row %zu: cluster or label out of range", i);
		}
		t[(size_t)clusters[i] * n_classes + labels[i]] += 1.0;
		total += 1.0;
	}
	if (total == 0.0) {
		free(t);
		return acct_error_set(err, ACCT_EINVAL, "/test_data", "no labelled row");
	}
	*ret = t;
	*ret_total = total;
	return 0;
}

int trn_clustering_accuracy(const uint32_t *clusters, const uint32_t *labels, size_t n,
			    uint32_t n_clusters, uint32_t n_classes, double *ret, acct_error *err)
{
	double *t = NULL, *cost = NULL, total = 0.0, hit = 0.0;
	size_t *assign = NULL;
	size_t sq = n_clusters > n_classes ? n_clusters : n_classes;
	int rc;

	rc = contingency(clusters, labels, n, n_clusters, n_classes, &t, &total, err);
	if (rc != 0)
		return rc;
	/* Square cost matrix, padded with zero counts: minimising -count
	 * maximises the rows a one-to-one map gets right. */
	cost = calloc(sq * sq, sizeof(*cost));
	assign = calloc(sq, sizeof(*assign));
	if (!cost || !assign) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t k = 0; k < n_clusters; k++)
		for (size_t c = 0; c < n_classes; c++)
			cost[k * sq + c] = -t[k * n_classes + c];
	rc = trn_match_assign(cost, sq, assign, err);
	if (rc != 0)
		goto out;
	for (size_t k = 0; k < n_clusters; k++)
		if (assign[k] < n_classes)
			hit += t[k * n_classes + assign[k]];
	*ret = hit / total;
out:
	free(t);
	free(cost);
	free(assign);
	return rc;
}

/* -sum p log p over counts c[0..len) with stride, total `total`. */
static double entropy(const double *c, size_t len, double total)
{
	double h = 0.0;

	for (size_t i = 0; i < len; i++)
		if (c[i] > 0.0)
			h -= c[i] / total * log(c[i] / total);
	return h;
}

int trn_nmi(const uint32_t *clusters, const uint32_t *labels, size_t n, uint32_t n_clusters,
	    uint32_t n_classes, double *ret, acct_error *err)
{
	double *t = NULL, *a = NULL, *b = NULL, total = 0.0, mi = 0.0, ha, hb;
	int rc;

	rc = contingency(clusters, labels, n, n_clusters, n_classes, &t, &total, err);
	if (rc != 0)
		return rc;
	a = calloc(n_clusters, sizeof(*a));
	b = calloc(n_classes, sizeof(*b));
	if (!a || !b) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t k = 0; k < n_clusters; k++)
		for (size_t c = 0; c < n_classes; c++) {
			a[k] += t[k * n_classes + c];
			b[c] += t[k * n_classes + c];
		}
	/* I(U;V) = sum n_kc/N log(N n_kc / (a_k b_c)) (Strehl and Ghosh 2002,
	 * with the arithmetic-mean normalisation of Vinh, Epps, Bailey 2010). */
	for (size_t k = 0; k < n_clusters; k++)
		for (size_t c = 0; c < n_classes; c++) {
			double nkc = t[k * n_classes + c];

			if (nkc > 0.0)
				mi += nkc / total * log(total * nkc / (a[k] * b[c]));
		}
	ha = entropy(a, n_clusters, total);
	hb = entropy(b, n_classes, total);
	if (ha == 0.0 && hb == 0.0)
		*ret = 1.0;  /* one block each: the partitions are identical */
	else
		*ret = fmax(0.0, fmin(1.0, mi / (0.5 * (ha + hb))));
out:
	free(t);
	free(a);
	free(b);
	return rc;
}
