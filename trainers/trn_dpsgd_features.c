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
 * A whole table is mapped by two threads (the bank is read-only and each
 * thread has its own workspace): some 70 s of one core for 60000 images.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "trn_internal.h"

/* Threads that map a table's rows. */
#define TRN_FEATURE_THREADS 2u

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

void trn__group_normalise(double *h, size_t channels, size_t plane, size_t groups)
{
	size_t len = channels / groups * plane;

	for (size_t g = 0; g < groups; g++) {
		double *v = h + g * len, mean = 0.0, var = 0.0, inv;

		for (size_t i = 0; i < len; i++)
			mean += v[i];
		mean /= (double)len;
		/* Two passes: the variance of values far from 0 stays exact. */
		for (size_t i = 0; i < len; i++)
			var += (v[i] - mean) * (v[i] - mean);
		var /= (double)len;
		inv = 1.0 / sqrt(var + TRN_GROUPNORM_EPS);
		for (size_t i = 0; i < len; i++)
			v[i] = (v[i] - mean) * inv;
	}
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

/* Scatters one row into out and normalises its groups. */
static int scatter_row(const trn_scatter *s, uint32_t groups, const double *x, double *out,
		       trn_scatter_workspace *w)
{
	int rc = trn_scatter_apply(s, x, out, w);

	if (rc == 0)
		trn__group_normalise(out, trn_scatter_channels(s),
				     trn_scatter_out_rows(s) * trn_scatter_out_cols(s), groups);
	return rc;
}

int trn__features_rows(const trn_model *m, trn_scatter_workspace *w, const double *x,
		       size_t B, double *out)
{
	for (size_t i = 0; i < B; i++) {
		int rc = scatter_row(m->scatter, m->scatter_groups, x + i * m->input_dim,
				     out + i * m->dims[0], w);

		if (rc != 0)
			return rc;
	}
	return 0;
}

/* One thread's share of a table: rows [lo, hi). */
struct map_part {
	const trn_scatter *s;
	uint32_t groups;
	const trn_dataset *in;
	trn_dataset *out;
	size_t lo, hi;
	int rc;
};

static void *map_part_main(void *arg)
{
	struct map_part *mp = arg;
	trn_scatter_workspace *w = NULL;

	mp->rc = trn_scatter_workspace_new(mp->s, &w, NULL);
	for (size_t i = mp->lo; mp->rc == 0 && i < mp->hi; i++)
		mp->rc = scatter_row(mp->s, mp->groups, mp->in->x + i * mp->in->d,
				     mp->out->x + i * mp->out->d, w);
	trn_scatter_workspace_free(w);
	return NULL;
}

/* Maps every row of in into out, in TRN_FEATURE_THREADS parts; a part
 * whose thread cannot start runs in the caller. */
static int map_rows(const trn_scatter *s, uint32_t groups, const trn_dataset *in,
		    trn_dataset *out)
{
	struct map_part parts[TRN_FEATURE_THREADS];
	pthread_t th[TRN_FEATURE_THREADS];
	bool started[TRN_FEATURE_THREADS] = { false };
	int rc = 0;

	for (size_t t = 0; t < TRN_FEATURE_THREADS; t++) {
		parts[t] = (struct map_part){ .s = s, .groups = groups, .in = in, .out = out,
					      .lo = in->n * t / TRN_FEATURE_THREADS,
					      .hi = in->n * (t + 1) / TRN_FEATURE_THREADS };
		if (t > 0)
			started[t] = pthread_create(&th[t], NULL, map_part_main, &parts[t]) == 0;
	}
	for (size_t t = 0; t < TRN_FEATURE_THREADS; t++)
		if (!started[t])
			map_part_main(&parts[t]);
	for (size_t t = 0; t < TRN_FEATURE_THREADS; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		if (parts[t].rc != 0 && rc == 0)
			rc = parts[t].rc;
	}
	return rc;
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
	rc = map_rows(s, p->scatter_groups, in, ds);
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
