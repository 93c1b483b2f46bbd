/*
 * trn_eval.h: the metrics every trainer reports on PUBLIC labelled data
 * (a job's test_data): accuracy, and for two classes the AUC and the
 * balanced error, the metrics of Bi and Suppakitpaisarn 2022 (Defs. 1-2)
 * and Charoenphakdee et al. 2019.  Never call these on private rows: their
 * output is not covered by any event.
 */
#ifndef TRN_EVAL_H
#define TRN_EVAL_H

#include "trn.h"

typedef struct trn_eval_metrics {
	size_t n;              /* rows evaluated (those with a class) */
	double accuracy;       /* fraction predicted right; NaN when n = 0 */
	double auc;            /* 2 classes: Pr[s(pos) > s(neg)] + Pr[tie] / 2 over
	                          pairs, s = score_1 - score_0; NaN otherwise, when a
	                          class is absent or a score is NaN */
	double balanced_error; /* 2 classes: (err_0 + err_1) / 2, err_c the fraction
	                          of class c predicted wrong; NaN as for auc */
} trn_eval_metrics;

/*
 * Metrics of predictions on n rows: y[i] the true class (TRN_NO_CLASS rows
 * are skipped), pred[i] the predicted one (NULL: the first argmax of the
 * scores), scores the n x num_classes per-class scores (logits or
 * probabilities: only their order and, for two classes, score_1 - score_0
 * matter; may be NULL when num_classes > 2).  The AUC is the Mann-Whitney
 * statistic U divided by n_0 n_1, ties between classes counted 1/2, by one
 * sort: O(n log n).  Returns 0 and *ret, ACCT_EINVAL (a label or predicted
 * class out of range, scores missing) or ACCT_ENOMEM.
 */
int trn_eval_predictions(const uint32_t *y, const uint32_t *pred, const double *scores,
			 size_t n, uint32_t num_classes, trn_eval_metrics *ret, acct_error *err);

/*
 * The metrics of a model on a table of raw rows (same features and
 * classes as the model), scored by its logits; rows without a class are
 * skipped.  Returns 0 and *ret, ACCT_EINVAL when the shapes differ, or
 * ACCT_ENOMEM.
 */
int trn_eval_model(const trn_model *m, const trn_dataset *ds, trn_eval_metrics *ret,
		   acct_error *err);

#endif
