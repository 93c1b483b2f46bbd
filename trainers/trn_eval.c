/*
 * trn_eval.c: accuracy, AUC and balanced error of a classifier on public
 * labelled data, shared by every trainer.
 *
 * The AUC is computed from ranks (Mann and Whitney 1947): sort the scores
 * once, give tied scores their mean rank, and U = R_1 - n_1 (n_1 + 1) / 2
 * with R_1 the rank sum of the positives, AUC = U / (n_0 n_1).  That counts
 * every positive-negative pair with a tie as 1/2 in O(n log n), where the
 * pairwise definition is O(n^2) (the test compares both).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trn_eval.h"
#include "trn_internal.h"

/* Rows per logits chunk when evaluating a model. */
#define TRN_EVAL_CHUNK_ROWS 512u

typedef struct scored {
	double s;
	uint8_t positive;
} scored;

static int cmp_scored(const void *a, const void *b)
{
	double x = ((const scored *)a)->s, y = ((const scored *)b)->s;

	return (x > y) - (x < y);
}

/* AUC of n scored rows with n_pos positives; NaN when a class is absent or
 * a score is NaN.  Sorts v in place. */
static double auc_of(scored *v, size_t n, size_t n_pos)
{
	double rank_sum = 0.0, n1 = (double)n_pos, n0 = (double)(n - n_pos);

	if (n_pos == 0 || n_pos == n)
		return NAN;
	for (size_t i = 0; i < n; i++)
		if (isnan(v[i].s))
			return NAN;
	qsort(v, n, sizeof(*v), cmp_scored);
	for (size_t i = 0; i < n;) {
		size_t j = i, pos = 0;

		while (j < n && v[j].s == v[i].s)
			pos += v[j++].positive;
		/* Ranks i+1 .. j share their mean (i + 1 + j) / 2. */
		rank_sum += (double)pos * 0.5 * (double)(i + 1 + j);
		i = j;
	}
	return (rank_sum - n1 * (n1 + 1.0) / 2.0) / (n0 * n1);
}

/* Running counts of a binary or multiclass evaluation. */
typedef struct tally {
	size_t n, correct, class_n[2], class_wrong[2];
	scored *v; /* 2 classes: margin and class of each evaluated row */
} tally;

static void tally_add(tally *t, uint32_t num_classes, uint32_t y, uint32_t pred,
		      double margin)
{
	t->correct += pred == y;
	if (num_classes == 2) {
		t->class_n[y]++;
		t->class_wrong[y] += pred != y;
		t->v[t->n].s = margin;
		t->v[t->n].positive = y == 1;
	}
	t->n++;
}

static void tally_finish(tally *t, uint32_t num_classes, trn_eval_metrics *ret)
{
	ret->n = t->n;
	ret->accuracy = t->n ? (double)t->correct / (double)t->n : NAN;
	ret->auc = NAN;
	ret->balanced_error = NAN;
	if (num_classes != 2 || t->class_n[0] == 0 || t->class_n[1] == 0)
		return;
	ret->auc = auc_of(t->v, t->n, t->class_n[1]);
	ret->balanced_error = 0.5 * ((double)t->class_wrong[0] / (double)t->class_n[0] +
				     (double)t->class_wrong[1] / (double)t->class_n[1]);
}

int trn_eval_predictions(const uint32_t *y, const uint32_t *pred, const double *scores,
			 size_t n, uint32_t num_classes, trn_eval_metrics *ret, acct_error *err)
{
	tally t = { 0 };
	int rc = 0;

	if (!y || num_classes < 2 || num_classes > DPG_MAX_CLASSES ||
	    ((!pred || num_classes == 2) && !scores))
		return acct_error_set(err, ACCT_EINVAL, "/data", "labels or scores are missing");
	if (num_classes == 2 && n > 0) {
		t.v = malloc(n * sizeof(*t.v));
		if (!t.v)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory evaluating");
	}
	for (size_t i = 0; i < n; i++) {
		const double *s = scores ? scores + i * num_classes : NULL;
		uint32_t c = pred ? pred[i] : trn__argmax(s, num_classes);

		if (y[i] == TRN_NO_CLASS)
			continue;
		if (y[i] >= num_classes || c >= num_classes) {
			rc = acct_error_set(err, ACCT_EINVAL, "/data",
					    "row %zu: a class is out of range", i);
			goto out;
		}
		tally_add(&t, num_classes, y[i], c, s ? s[1] - s[0] : 0.0);
	}
	tally_finish(&t, num_classes, ret);
out:
	free(t.v);
	return rc;
}

/* A convolutional model's metrics: its scores on every row, then as any
 * predictions' (trn_model_conv.c scores them). */
static int eval_conv_model(const trn_model *m, const trn_dataset *ds, trn_eval_metrics *ret,
			   acct_error *err)
{
	double *scores = malloc(ds->n * ds->num_classes * sizeof(double));
	int rc = scores ? trn__conv_model_scores(m, ds->x, ds->n, scores, err) : trn__nomem(err);

	if (rc == 0)
		rc = trn_eval_predictions(ds->y, NULL, scores, ds->n, ds->num_classes, ret, err);
	free(scores);
	return rc;
}

int trn_eval_model(const trn_model *m, const trn_dataset *ds, trn_eval_metrics *ret,
		   acct_error *err)
{
	trn__workspace *ws = NULL;
	uint32_t k;
	tally t = { 0 };
	int rc;

	if (!m || !ds || ds->d != m->input_dim || ds->num_classes != m->dims[m->n_layers])
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the table does not match the model's shape");
	if (m->conv)
		return eval_conv_model(m, ds, ret, err);
	k = ds->num_classes;
	rc = trn__workspace_new(m, TRN_EVAL_CHUNK_ROWS, &ws, err);
	if (rc < 0)
		return rc;
	if (k == 2) {
		t.v = malloc(ds->n * sizeof(*t.v));
		if (!t.v) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory evaluating");
			goto out;
		}
	}
	for (size_t s = 0; s < ds->n; s += TRN_EVAL_CHUNK_ROWS) {
		size_t B = ds->n - s < TRN_EVAL_CHUNK_ROWS ? ds->n - s : TRN_EVAL_CHUNK_ROWS;
		const double *logits = ws->act[m->n_layers];

		if (trn__model_load_rows(m, ws, ds->x, s, B) < 0) {
			rc = acct_error_set(err, ACCT_ENUMERIC, "", "the feature transform failed");
			goto out;
		}
		trn__chunk_logits(m, ws, B);
		for (size_t i = 0; i < B; i++) {
			const double *z = logits + i * k;
			uint32_t y = ds->y[s + i];

			if (y == TRN_NO_CLASS)
				continue;
			if (y >= k) {
				rc = acct_error_set(err, ACCT_EINVAL, "/data",
						    "row %zu: a class is out of range", s + i);
				goto out;
			}
			tally_add(&t, k, y, trn__argmax(z, k), z[1] - z[0]);
		}
	}
	tally_finish(&t, k, ret);
out:
	free(t.v);
	trn__workspace_free(ws);
	return rc;
}
