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

/* True when column j of t is a feature: numeric, neither the label lj
 * nor the party column pj (cols when there is none). */
static bool is_feature(const mech_table *t, size_t j, size_t lj, size_t pj)
{
	return j != lj && j != pj && mech_table_numeric_values(t, j) != NULL;
}

/* Copies every feature column into row-major `x`. */
static void table_features(const mech_table *t, size_t lj, size_t pj, size_t d, double *x)
{
	for (size_t j = 0, k = 0; j < mech_table_columns(t); j++)
		if (is_feature(t, j, lj, pj))
			mech_table_copy_numeric(t, j, x + k++, d);
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
	const char *party = json_string_value(json_object_get(params, "party_column"));
	const json_t *declared = json_object_get(params, "classes");
	size_t cols = mech_table_columns(t), rows = mech_table_rows(t), d = 0;
	size_t lj = label ? mech_table_column_index(t, label) : cols - 1;
	size_t pj = mech_table_column_index(t, party);
	double *x = NULL;
	int64_t *y = NULL;
	uint32_t classes = 0;
	int rc = ACCT_ENOMEM;

	if (lj >= cols)
		return acct_error_set(err, ACCT_EINVAL, "/params/label",
				      "the hosted table has no column '%.64s'", label ? label : "");
	for (size_t j = 0; j < cols; j++)
		if (is_feature(t, j, lj, pj))
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
	table_features(t, lj, pj, d, x);
	if (srv_jobs__label_classes(t, lj, declared, y, &classes) < 0)
		goto out;
	rc = trn_dataset_from_table(x, y, rows, d, classes, "/data", ret, err);
out:
	free(x);
	free(y);
	return rc;
}

int srv_jobs__load_data(srv_jobs_table_fn load_table, srv_table_cache *tables, srv_db *db,
			const char *data_dir, const char *dataset_id, const json_t *params,
			trn_dataset **ret_train, trn_dataset **ret_eval, acct_error *err)
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

		rc = load_table(tables, db, data_dir, dataset_id, &t, err);
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

/*
 * The party of each row of t (an ensemble or slmc job's "party_column"): with
 * "parties" an integer M, a numeric value v is party v when v is an
 * integer in 0..M-1; with a list of names, a categorical value is the
 * index of its name.  Any other row gets code M: it belongs to no declared
 * party and every party ignores it (trn_ensemble_run), so nothing released
 * depends on it, nor on how many such rows there are.
 */
int srv_jobs__party_codes(const mech_table *t, const json_t *params, uint32_t m, uint32_t *party,
			  acct_error *err)
{
	const char *name = json_string_value(json_object_get(params, "party_column"));
	const json_t *parties = json_object_get(params, "parties");
	size_t cols = mech_table_columns(t), rows = mech_table_rows(t);
	size_t pj = mech_table_column_index(t, name);
	const double *v;
	int64_t *code;
	int rc;

	if (pj == cols)
		return acct_error_set(err, ACCT_EINVAL, "/params/party_column",
				      "the hosted table has no column '%.64s'", name ? name : "");
	v = mech_table_numeric_values(t, pj);
	if (json_is_integer(parties) != (v != NULL))
		return acct_error_set(err, ACCT_EINVAL, "/params/party_column",
				      "integer parties need a numeric party column, named parties "
				      "a categorical one");
	if (v) {
		for (size_t i = 0; i < rows; i++)
			party[i] = v[i] >= 0 && v[i] < (double)m && v[i] == floor(v[i]) ? (uint32_t)v[i] : m;
		return 0;
	}
	code = malloc(sizeof(*code) * (rows ? rows : 1));
	if (!code)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	rc = categorical_classes(t, pj, parties, code);
	for (size_t i = 0; rc == 0 && i < rows; i++)
		party[i] = code[i] == (int64_t)TRN_NO_CLASS ? m : (uint32_t)code[i];
	free(code);
	return rc;
}

int srv_jobs__load_party_table(srv_jobs_table_fn load_table, srv_table_cache *tables, srv_db *db,
			       const char *data_dir, const char *dataset_id, const json_t *params, uint32_t m,
			       trn_dataset **ret_train, uint32_t **ret_party, acct_error *err)
{
	srv_table_ref *ref = NULL;
	const mech_table *t;
	uint32_t *party = NULL;
	int rc = load_table(tables, db, data_dir, dataset_id, &ref, err);

	if (rc < 0)
		return rc;
	t = srv_table_ref_table(ref);
	party = malloc(sizeof(*party) * (mech_table_rows(t) ? mech_table_rows(t) : 1));
	rc = party ? srv_jobs__party_codes(t, params, m, party, err) :
		     acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (rc >= 0)
		rc = table_to_dataset(t, params, ret_train, err);
	srv_table_cache_release(tables, ref);
	if (rc < 0) {
		free(party);
		return rc;
	}
	*ret_party = party;
	return 0;
}
