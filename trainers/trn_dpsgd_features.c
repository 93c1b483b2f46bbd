/*
 * trn_dpsgd_features.c: the "scatter" features of a DP-SGD job: the
 * scattering transform of each row (trn_scatter.c), then group
 * normalisation of its channels within that row, as Tramer and Boneh
 * ("Differentially Private Learning Needs Better Features (or Much More
 * Data)", ICLR 2021, Section 3) normalise ScatterNet features before a
 * linear model on Fashion-MNIST.
 *
 * The normalisation is computed from the row alone, never from a table, so
 * the whole map is a fixed function of one row and costs no privacy
 * (docs/training.md, "Scattering features").  Their alternative, batch
 * normalisation with noisy statistics of the training set, would need its
 * own Gaussian release in the job's event; per-row statistics need none.
 * The row map itself, and a whole table's in two threads, are
 * trn_scatter.c's (trn__scatter_row, trn__scatter_map_rows).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trn_internal.h"

static const trn__name features_names[] = {
	{ "pca", TRN_FEATURES_PCA }, { "raw", TRN_FEATURES_RAW },
	{ "scatter", TRN_FEATURES_SCATTER },
};

int trn_features_from_name(const char *name, trn_features *ret)
{
	int v = trn__name_lookup(features_names, TRN__COUNT(features_names), name);

	if (v >= 0)
		*ret = (trn_features)v;
	return v < 0 ? -1 : 0;
}

int trn_dpsgd_scatter_shape(size_t d, uint32_t groups, size_t *ret_side, size_t *ret_features,
			    acct_error *err)
{
	size_t side = (size_t)llround(sqrt((double)d)), k = (size_t)1 << TRN_DPSGD_SCATTER_J;
	size_t channels = TRN_DPSGD_SCATTER_CHANNELS, out;

	if (side * side != d || side % k != 0 || side < 2 * k || side > TRN_SCATTER_MAX_SIDE)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "scatter features need square images whose side is a multiple "
				      "of %zu from %zu to %u; the rows have %zu features",
				      k, 2 * k, TRN_SCATTER_MAX_SIDE, d);
	if (groups < 1 || channels % groups != 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/scatter_groups",
				      "scatter_groups must divide the %zu channels", channels);
	out = channels * (side / k) * (side / k);
	if (out > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "%zu scattering features exceed %d", out, DPG_MAX_FEATURES);
	if (ret_side)
		*ret_side = side;
	if (ret_features)
		*ret_features = out;
	return 0;
}

int trn__model_set_scatter(trn_model *m, uint32_t rows, uint32_t cols, uint32_t groups,
			   acct_error *err)
{
	size_t side = 0, out = 0;
	int rc;

	if (rows != cols || (size_t)rows * cols != m->input_dim)
		return acct_error_set(err, ACCT_EINVAL, "/model", "bad feature transform");
	rc = trn_dpsgd_scatter_shape(m->input_dim, groups, &side, &out, err);
	if (rc < 0)
		return rc;
	if (out != m->dims[0] || m->proj_dim != 0 || m->input_rule != TRN_INPUT_NONE)
		return acct_error_set(err, ACCT_EINVAL, "/model", "bad feature transform");
	rc = trn_scatter_new(rows, cols, TRN_DPSGD_SCATTER_J, TRN_DPSGD_SCATTER_L, &m->scatter,
			     err);
	if (rc < 0)
		return rc;
	m->feature_rule = TRN_FEATURE_RULE_SCATTER_GROUPNORM;
	m->scatter_rows = rows;
	m->scatter_cols = cols;
	m->scatter_groups = groups;
	return 0;
}

int trn__features_rows(const trn_model *m, trn_scatter_workspace *w, const double *x,
		       size_t B, double *out)
{
	for (size_t i = 0; i < B; i++) {
		int rc = trn__scatter_row(m->scatter, m->scatter_groups, x + i * m->input_dim,
					  out + i * m->dims[0], w);

		if (rc != 0)
			return rc;
	}
	return 0;
}

int trn_dpsgd_features_table(const trn_dpsgd_params *p, const trn_dataset *in,
			     trn_dataset **ret, acct_error *err)
{
	trn_scatter *s = NULL;
	trn_dataset *ds = NULL;
	size_t side = 0, d = 0;
	int rc;

	if (!p || !in || !ret || p->features != TRN_FEATURES_SCATTER)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "only scatter features map a table");
	rc = trn_dpsgd_scatter_shape(in->d, p->scatter_groups, &side, &d, err);
	if (rc == 0)
		rc = trn_scatter_new((uint32_t)side, (uint32_t)side, TRN_DPSGD_SCATTER_J,
				     TRN_DPSGD_SCATTER_L, &s, err);
	if (rc == 0)
		rc = trn_dataset_new(in->n, d, in->num_classes, &ds, err);
	if (rc < 0)
		goto out;
	memcpy(ds->y, in->y, in->n * sizeof(*in->y));
	rc = trn__scatter_map_rows(s, p->scatter_groups, in, ds);
	if (rc != 0) {
		rc = acct_error_set(err, rc, "", "the scattering transform failed");
		goto out;
	}
	*ret = ds;
	ds = NULL;
out:
	trn_dataset_free(ds);
	trn_scatter_free(s);
	return rc;
}
