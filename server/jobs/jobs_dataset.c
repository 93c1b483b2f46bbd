/*
 * jobs_dataset.c: the data a job trains on, loaded by its worker once the job
 * runs: the builtin Fashion-MNIST splits, or a hosted table turned into
 * features and declared classes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"
#include "jobs_pool.h"
#include "store.h"

/* A declared class name and its index, sorted by name for bsearch. */
struct class_name {
	const char *name;
	uint32_t index;
};

static int cmp_class_names(const void *a, const void *b)
{
	return strcmp(((const struct class_name *)a)->name, ((const struct class_name *)b)->name);
}

/* Copies every numeric column but the label `lj` into row-major `x`. */
static void table_features(const mech_table *t, size_t lj, size_t d, double *x)
{
	size_t cols = mech_table_columns(t), rows = mech_table_rows(t);

	for (size_t j = 0, k = 0; j < cols; j++) {
		const double *v = mech_table_numeric_values(t, j);

		if (j == lj || !v)
			continue;
		for (size_t i = 0; i < rows; i++)
			x[i * d + k] = v[i];
		k++;
	}
}

/* Classes of a categorical label: the index of each category's name in
 * the declared list, TRN_NO_CLASS for a name not declared. */
static int categorical_classes(const mech_table *t, size_t lj, const json_t *declared,
			       int64_t *y)
{
	size_t k = mech_table_category_count(t, lj), m = json_array_size(declared);
	struct class_name *byname = calloc(m ? m : 1, sizeof(*byname));
	int64_t *of = calloc(k ? k : 1, sizeof(int64_t));
	int rc = ACCT_ENOMEM;

	if (!byname || !of)
		goto out;
	for (size_t c = 0; c < m; c++) {
		byname[c].name = json_string_value(json_array_get(declared, c));
		byname[c].index = (uint32_t)c;
	}
	qsort(byname, m, sizeof(*byname), cmp_class_names);
	for (size_t c = 0; c < k; c++) {
		struct class_name key = {mech_table_category_name(t, lj, c), 0};
		const struct class_name *hit =
			bsearch(&key, byname, m, sizeof(*byname), cmp_class_names);

		of[c] = hit ? (int64_t)hit->index : (int64_t)TRN_NO_CLASS;
	}
	for (size_t i = 0; i < mech_table_rows(t); i++)
		y[i] = of[mech_table_category_of(t, lj, i)];
	rc = 0;
out:
	free(byname);
	free(of);
	return rc;
}

int srv_jobs__label_classes(const mech_table *t, size_t lj, const json_t *declared, int64_t *y,
			 uint32_t *ret)
{
	const double *v = mech_table_numeric_values(t, lj);
	uint32_t classes;

	if (!v) {
		*ret = (uint32_t)json_array_size(declared);
		return categorical_classes(t, lj, declared, y);
	}
	classes = (uint32_t)json_integer_value(declared);
	for (size_t i = 0; i < mech_table_rows(t); i++)
		y[i] = v[i] >= 0 && v[i] < (double)classes && v[i] == floor(v[i]) ?
			       (int64_t)v[i] :
			       (int64_t)TRN_NO_CLASS;
	*ret = classes;
	return 0;
}

/*
 * A training table from a hosted CSV: the label is the column the job's
 * params name ("label"; default the last column), the features every other
 * numeric column, as uploaded (categorical feature columns are skipped).
 * The classes are the params' declared ones (srv__jobs_check_label): a numeric label
 * v is class v when v is an integer in 0 .. K-1, a categorical one is the
 * index of its name in the declared list; any other row gets TRN_NO_CLASS
 * (sampled, zero gradient).  So nothing here depends on the rows beyond
 * what the job's event was priced for, and nothing fails on them.
 */
static int table_to_dataset(const mech_table *t, const json_t *params, trn_dataset **ret,
			    acct_error *err)
{
	const char *label = json_string_value(json_object_get(params, "label"));
	const json_t *declared = json_object_get(params, "classes");
	size_t cols = mech_table_columns(t), rows = mech_table_rows(t), lj = cols, d = 0;
	double *x = NULL;
	int64_t *y = NULL;
	uint32_t classes = 0;
	int rc = ACCT_ENOMEM;

	for (size_t j = 0; j < cols; j++)
		if (label ? strcmp(mech_table_column_name(t, j), label) == 0 : j == cols - 1)
			lj = j;
	if (lj == cols)
		return acct_error_set(err, ACCT_EINVAL, "/params/label",
				      "the hosted table has no column '%.64s'", label);
	for (size_t j = 0; j < cols; j++)
		if (j != lj && mech_table_numeric_values(t, j))
			d++;
	if (d == 0 || rows == 0)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the hosted table has no numeric feature column besides the label");
	/* Never refused here: srv__jobs_check_label refused the job at submission. */
	if (mech_table_numeric_values(t, lj) ?
		    !(json_is_integer(declared) && json_integer_value(declared) >= 2) :
		    json_array_size(declared) < 2)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "the label's classes are not declared");
	x = malloc(sizeof(double) * rows * d);
	y = malloc(sizeof(int64_t) * rows);
	if (!x || !y)
		goto out;
	table_features(t, lj, d, x);
	if (srv_jobs__label_classes(t, lj, declared, y, &classes) < 0)
		goto out;
	rc = trn_dataset_from_table(x, y, rows, d, classes, "/data", ret, err);
out:
	free(x);
	free(y);
	return rc;
}

int srv_jobs__load_data(srv_jobs_table_fn load_table, srv_table_cache *tables, srv_db *db, const char *dataset_id,
			const json_t *params, trn_dataset **ret_train, trn_dataset **ret_eval,
			acct_error *err)
{
	char kind[16] = "", builtin[64] = "";
	int rc;

	if (srv__data_link_kind(db, dataset_id, kind, builtin) != SRV_OK)
		return acct_error_set(err, ACCT_EINTERNAL, "", "cannot read the data link");
	if (strcmp(kind, "builtin") == 0 && strcmp(builtin, "fashion-mnist") == 0) {
		rc = trn_fashion_mnist_load(NULL, true, ret_train, err);
		if (rc < 0)
			return rc;
		/* The test split is public: progress and accuracy come from it. */
		rc = trn_fashion_mnist_load(NULL, false, ret_eval, err);
		if (rc < 0) {
			trn_dataset_free(*ret_train);
			*ret_train = NULL;
		}
		return rc;
	}
	if (strcmp(kind, "table") == 0) {
		srv_table_ref *t = NULL;

		rc = load_table(tables, db, dataset_id, &t, err);
		if (rc < 0)
			return rc;
		/* A hosted table has no public split: no progress accuracy. */
		rc = table_to_dataset(srv_table_ref_table(t), params, ret_train, err);
		srv_table_cache_release(tables, t);
		*ret_eval = NULL;
		return rc;
	}
	return acct_error_set(err, ACCT_EUNSUPPORTED, "/data",
			      "the dataset's data cannot be trained on by this trainer");
}
