/*
 * jobs_public.c: the public tables a job names ("auxiliary_data",
 * "test_data"): checked against the private table's schema when the job is
 * submitted, and read by name when it runs.  Their columns are matched to
 * the private table's BY NAME, so a public table may hold its columns in
 * any order and more of them.  Nothing here reads a private row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"
#include "jobs_pool.h"
#include "store.h"

static const char *col_name(const json_t *c)
{
	return json_string_value(json_object_get(c, "name"));
}

static bool col_numeric(const json_t *c)
{
	const char *kind = json_string_value(json_object_get(c, "kind"));

	return kind && strcmp(kind, "numeric") == 0;
}

/* The names of the numeric columns of `columns` but the one named `skip`
 * (may be NULL) and the job's party column, in table order. */
static json_t *feature_names(const json_t *params, const json_t *columns, const char *skip)
{
	json_t *features = json_array();
	const json_t *c;
	size_t i;

	json_array_foreach(columns, i, c)
		if (features && col_numeric(c) && col_name(c) &&
		    !(skip && strcmp(col_name(c), skip) == 0) &&
		    !srv__jobs_is_party_column(params, c) &&
		    json_array_append_new(features, json_string(col_name(c))) < 0) {
			json_decref(features);
			features = NULL;
		}
	return features;
}

json_t *srv__jobs_table_schema(const json_t *params, const json_t *columns)
{
	const char *label = json_string_value(json_object_get(params, "label"));
	const json_t *c, *lc = NULL;
	json_t *features;
	size_t i, n = json_array_size(columns);

	json_array_foreach(columns, i, c)
		if (label ? col_name(c) && strcmp(col_name(c), label) == 0 : i + 1 == n)
			lc = c;
	if (!lc || !col_name(lc))
		return NULL;
	/* table_to_dataset's features: every numeric column but the label
	 * (and an ensemble's party column). */
	features = feature_names(params, columns, col_name(lc));
	return features ? json_pack("{s:o, s:s, s:s}", "features", features, "label", col_name(lc),
				    "label_kind", col_numeric(lc) ? "numeric" : "categorical") :
			  NULL;
}

json_t *srv__jobs_clustering_schema(const json_t *params, const json_t *columns)
{
	const char *label = json_string_value(json_object_get(params, "label"));
	json_t *features = feature_names(params, columns, label);

	/* The private rows carry no label; test_data's label column is the
	 * one named, of the kind its declared classes say. */
	return features ? json_pack("{s:o, s:s?, s:s}", "features", features, "label", label,
				    "label_kind",
				    json_is_integer(json_object_get(params, "classes")) ?
					    "numeric" :
					    "categorical") :
			  NULL;
}

/* The column of `columns` named `name`, or NULL. */
static const json_t *column_named(const json_t *columns, const char *name)
{
	const json_t *c;
	size_t i;

	json_array_foreach(columns, i, c)
		if (col_name(c) && strcmp(col_name(c), name) == 0)
			return c;
	return NULL;
}

/* Every feature of `schema` a numeric column of `columns`; with
 * `labelled`, the label a column of the same kind. */
static int columns_match(const json_t *columns, const json_t *schema, bool labelled,
			 const char *where, const char *id, acct_error *err)
{
	const json_t *f, *c;
	const char *label = json_string_value(json_object_get(schema, "label"));
	size_t i;

	json_array_foreach(json_object_get(schema, "features"), i, f) {
		c = column_named(columns, json_string_value(f));
		if (!c || !col_numeric(c))
			return acct_error_set(err, ACCT_EUNSUPPORTED, where,
					      "public dataset '%s' has no numeric column '%.64s', a "
					      "feature of the job (columns are matched by name)",
					      id, json_string_value(f));
	}
	if (!labelled)
		return 0;
	c = column_named(columns, label);
	if (!c || col_numeric(c) !=
			  (strcmp(json_string_value(json_object_get(schema, "label_kind")),
				  "numeric") == 0))
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "public dataset '%s' has no %s label column '%.64s'", id,
				      json_string_value(json_object_get(schema, "label_kind")), label);
	return 0;
}

int srv__jobs_check_public(srv_db *db, const srv_principal *who, const char *where,
			   const char *id, const json_t *schema, bool labelled, uint64_t max_rows,
			   acct_error *err)
{
	srv_dataset ds;
	char *columns_text = NULL;
	json_t *columns = NULL;
	int64_t rows = 0;
	int rc = srv_store_dataset_get(db, id, &ds);

	/* A dataset the key may not see is answered as one that does not
	 * exist: its existence is not the caller's to learn. */
	if (rc == SRV_NOT_FOUND || (rc == SRV_OK && who && !srv_principal_sees(who, id)))
		return acct_error_set(err, ACCT_EUNSUPPORTED, where, "no dataset '%s'", id);
	if (rc != SRV_OK)
		return acct_error_set(err, ACCT_EINTERNAL, where, "cannot read dataset '%s'", id);
	if (!ds.is_public)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "dataset '%s' is private: a job reads public datasets only "
				      "as auxiliary or test rows, whose use no event covers", id);
	if (srv__data_link_rows(db, id, &rows, &columns_text) != SRV_OK || !columns_text) {
		free(columns_text);
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "public dataset '%s' has no table (PUT its data first)", id);
	}
	columns = srv_json_parse_text(columns_text);
	free(columns_text);
	rc = columns ? columns_match(columns, schema, labelled, where, id, err) :
		       acct_error_set(err, ACCT_EINTERNAL, where, "cannot read the schema of '%s'", id);
	json_decref(columns);
	if (rc == 0 && (rows < 1 || (uint64_t)rows > max_rows))
		rc = acct_error_set(err, ACCT_EUNSUPPORTED, where,
				    "public dataset '%s' has %lld rows; a job takes 1 to %llu", id,
				    (long long)rows, (unsigned long long)max_rows);
	return rc;
}

/* Copies the features of `schema`, by name, into row-major x. */
static int public_features(const mech_table *t, const json_t *names, double *x,
			   const char *where, acct_error *err)
{
	size_t d = json_array_size(names);

	for (size_t k = 0; k < d; k++) {
		const char *name = json_string_value(json_array_get(names, k));

		/* Checked at submission; the table may have been replaced since. */
		if (!mech_table_copy_numeric(t, mech_table_column_index(t, name), x + k, d))
			return acct_error_set(err, ACCT_EINVAL, where,
					      "the public table lost the feature column '%.64s'",
					      name);
	}
	return 0;
}

int srv_jobs__public_dataset(const mech_table *t, const json_t *schema, const json_t *params,
			     uint32_t num_classes, const char *where, trn_dataset **ret,
			     acct_error *err)
{
	const json_t *names = json_object_get(schema, "features");
	size_t rows = mech_table_rows(t), d = json_array_size(names), lj = 0;
	double *x = malloc(sizeof(double) * (rows ? rows : 1) * (d ? d : 1));
	int64_t *y = malloc(sizeof(int64_t) * (rows ? rows : 1));
	uint32_t classes = num_classes;
	int rc = ACCT_ENOMEM;

	if (!x || !y)
		goto out;
	rc = public_features(t, names, x, where, err);
	if (rc < 0)
		goto out;
	if (params) {
		lj = mech_table_column_index(t, json_string_value(json_object_get(schema, "label")));
		rc = lj < mech_table_columns(t) ?
			     srv_jobs__label_classes(t, lj, json_object_get(params, "classes"), y,
						     &classes) :
			     acct_error_set(err, ACCT_EINVAL, where,
					    "the public table lost its label column");
		if (rc < 0)
			goto out;
	} else {
		/* Unlabelled: the rows' labels are never read. */
		for (size_t i = 0; i < rows; i++)
			y[i] = (int64_t)TRN_NO_CLASS;
	}
	rc = trn_dataset_from_table(x, y, rows, d, classes, where, ret, err);
out:
	free(x);
	free(y);
	return rc;
}

/* The columns recorded for the dataset's hosted table; NULL for a builtin
 * link. */
static json_t *link_columns(srv_db *db, const char *dataset_id)
{
	char *text = NULL;
	int64_t rows = 0;
	json_t *columns;

	if (srv__data_link_rows(db, dataset_id, &rows, &text) != SRV_OK || !text) {
		free(text);
		return NULL;
	}
	columns = srv_json_parse_text(text);
	free(text);
	return columns;
}

json_t *srv_jobs__job_schema(srv_db *db, const char *dataset_id, const json_t *params)
{
	json_t *columns = link_columns(db, dataset_id);
	json_t *schema = columns ? srv__jobs_table_schema(params, columns) : NULL;

	json_decref(columns);
	return schema;
}

json_t *srv_jobs__job_clustering_schema(srv_db *db, const char *dataset_id,
					const json_t *params)
{
	json_t *columns = link_columns(db, dataset_id);
	json_t *schema = columns ? srv__jobs_clustering_schema(params, columns) : NULL;

	json_decref(columns);
	return schema;
}

int srv_jobs__read_public(srv_jobs *jobs, srv_db *db, const char *id, const char *where,
			  const json_t *schema, const json_t *params, uint32_t num_classes,
			  uint64_t max_rows, trn_dataset **ret, acct_error *err)
{
	srv_table_ref *t = NULL;
	/* Checked again: a public dataset stays public, but its table may
	 * have been replaced since the job was submitted. */
	int rc = schema ? srv__jobs_check_public(db, NULL, where, id, schema, params != NULL,
						 max_rows, err) :
			  acct_error_set(err, ACCT_EINVAL, where, "the job has no table schema");

	if (rc >= 0)
		rc = jobs->load_table(jobs->ctx->tables, db, jobs->ctx->data_dir, id, &t, err);
	if (rc < 0)
		return rc;
	rc = srv_jobs__public_dataset(srv_table_ref_table(t), schema, params, num_classes, where,
				      ret, err);
	srv_table_cache_release(jobs->ctx->tables, t);
	return rc;
}
