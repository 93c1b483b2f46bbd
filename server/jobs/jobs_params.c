/*
 * jobs_params.c: a training job's "params" object: the DP-SGD
 * parameters it sets, and its label and classes checked against the
 * linked table's schema.  Both run before anything is reserved or read.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "json.h"

static int parse_enum(const json_t *params, const char *where, const char *key,
		      int (*from)(const char *, void *), void *ret, const char *allowed,
		      acct_error *err)
{
	const char *s = NULL;
	char ptr[ACCT_ERROR_WHERE_BYTES];
	int rc = srv_json_string(params, where, key, 0, 32, &s, err);

	if (rc <= 0)
		return rc;
	if (from(s, ret) < 0) {
		srv_json_pointer(ptr, sizeof(ptr), where, key);
		return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' must be one of %s", key, allowed);
	}
	return 1;
}

static int dpsgd_model_from(const char *s, void *r) { return trn_dpsgd_model_from_name(s, r); }
static int conv_act_from(const char *s, void *r) { return trn_conv_act_from_name(s, r); }
static int act_from(const char *s, void *r) { return trn_activation_from_name(s, r); }
static int clip_from(const char *s, void *r) { return trn_clipping_from_name(s, r); }
static int features_from(const char *s, void *r) { return trn_features_from_name(s, r); }
static int precision_from(const char *s, void *r) { return trn_precision_from_name(s, r); }

static int parse_u32(const json_t *params, const char *key, int64_t lo, int64_t hi, uint32_t *ret,
		     acct_error *err)
{
	int64_t v;
	int rc = srv_json_int(params, "/params", key, 0, lo, hi, &v, err);

	if (rc == 1)
		*ret = (uint32_t)v;
	return rc;
}

/*
 * One field of a job's "params": its key, the member of the trainer's
 * params struct it sets over the default, and what it may hold.  A job
 * kind's fields are a table of these, read in order, so the first field
 * at fault is the one named; adding a parameter is a row.
 */
typedef enum { PF_U32, PF_U64, PF_REAL, PF_BOOL, PF_ENUM, PF_TEXT } param_kind;

typedef struct {
	const char *key;
	param_kind kind;
	size_t offset;			   /* of the member; none for PF_TEXT */
	unsigned flags;			   /* SRV_REQUIRED, SRV_LO_OPEN, SRV_HI_OPEN */
	double lo, hi;			   /* bounds (integers exact); PF_TEXT: most bytes */
	int (*from)(const char *, void *); /* PF_ENUM: a name to its code */
	const char *allowed;		   /* PF_ENUM: the names, for the error */
} param_field;

/* offsetof(T, m), refused at compile time unless T's m is a `type`. */
#define PF_AT(T, m, type) (offsetof(T, m) + 0 * sizeof(_Generic(((T *)0)->m, type: 1)))
#define PARAM_U32(T, key, m, lo, hi) {key, PF_U32, PF_AT(T, m, uint32_t), 0, lo, hi, NULL, NULL}
#define PARAM_U64(T, key, m, lo, hi) {key, PF_U64, PF_AT(T, m, uint64_t), 0, lo, hi, NULL, NULL}
#define PARAM_REAL(T, key, m, flags, lo, hi) \
	{key, PF_REAL, PF_AT(T, m, double), flags, lo, hi, NULL, NULL}
#define PARAM_BOOL(T, key, m) {key, PF_BOOL, PF_AT(T, m, bool), 0, 0, 0, NULL, NULL}
#define PARAM_ENUM(T, key, m, from, allowed) {key, PF_ENUM, offsetof(T, m), 0, 0, 0, from, allowed}
/* A string checked here for its type and length, and read later. */
#define PARAM_TEXT(key, flags, max_bytes) {key, PF_TEXT, 0, flags, 0, max_bytes, NULL, NULL}
#define PARAM_ROWS(table) (sizeof(table) / sizeof((table)[0]))

/* Field f of the object `params` at JSON pointer `where` into *p. */
static int parse_field(const json_t *params, const char *where, const param_field *f, void *p,
		       acct_error *err)
{
	void *at = (char *)p + f->offset;
	const char *s = NULL;
	int64_t v = 0;
	int rc;

	switch (f->kind) {
	case PF_REAL:
		return srv_json_real(params, where, f->key, f->flags, f->lo, f->hi, at, err);
	case PF_BOOL:
		return srv_json_bool(params, where, f->key, f->flags, at, err);
	case PF_ENUM:
		return parse_enum(params, where, f->key, f->from, at, f->allowed, err);
	case PF_TEXT:
		return srv_json_string(params, where, f->key, f->flags, (size_t)f->hi, &s, err);
	case PF_U32:
	case PF_U64:
		break;
	}
	rc = srv_json_int(params, where, f->key, f->flags, (int64_t)f->lo, (int64_t)f->hi, &v,
			  err);
	if (rc == 1 && f->kind == PF_U32)
		*(uint32_t *)at = (uint32_t)v;
	else if (rc == 1)
		*(uint64_t *)at = (uint64_t)v;
	return rc;
}

/* The fields of `table` into *p, in order; the first one at fault stops. */
static int parse_fields(const json_t *params, const char *where, const param_field *table,
			size_t n, void *p, acct_error *err)
{
	int rc = 0;

	for (size_t i = 0; rc >= 0 && i < n; i++)
		rc = parse_field(params, where, &table[i], p, err);
	return rc < 0 ? rc : 0;
}

#define T trn_dpsgd_params
static const param_field dpsgd_model =
	PARAM_ENUM(T, "model", model, dpsgd_model_from, "\"logreg\", \"mlp\", \"cnn\"");
static const param_field dpsgd_activation =
	PARAM_ENUM(T, "activation", activation, act_from, "\"relu\", \"tanh\"");
static const param_field cnn_activation =
	PARAM_ENUM(T, "activation", conv_activation, conv_act_from,
		   "\"tanh\", \"tempered_sigmoid\" (a cnn's)");
static const param_field dpsgd_scalars[] = {
	PARAM_ENUM(T, "clipping", clipping, clip_from, "\"global\", \"per_layer\""),
	PARAM_U32(T, "epochs", epochs, 1, DPG_MAX_EPOCHS),
	PARAM_U32(T, "lot_size", lot_size, 1, DPG_MAX_LOT_SIZE),
	PARAM_REAL(T, "noise_multiplier", noise_multiplier, SRV_LO_OPEN, 0, 1e6),
	PARAM_REAL(T, "clip_norm", clip_norm, SRV_LO_OPEN, 0, 1e6),
	PARAM_REAL(T, "learning_rate", learning_rate, SRV_LO_OPEN, 0, 1e3),
	PARAM_REAL(T, "learning_rate_final", learning_rate_final, SRV_LO_OPEN, 0, 1e3),
	PARAM_U32(T, "learning_rate_decay_epochs", learning_rate_decay_epochs, 0, DPG_MAX_EPOCHS),
	PARAM_REAL(T, "momentum", momentum, SRV_HI_OPEN, 0, 1),
	PARAM_U32(T, "pca_components", pca_components, 0, DPG_MAX_PCA_COMPONENTS),
	PARAM_REAL(T, "pca_noise_multiplier", pca_noise_multiplier, SRV_LO_OPEN, 0, 1e6),
	PARAM_U64(T, "max_train_examples", max_train_examples, 0, DPG_MAX_TRAIN_EXAMPLES),
};
#undef T

/* The enumerations and scalars of "params", each over its default; a
 * cnn's activations are its own.  The learning rate is constant unless a
 * final one is given. */
static int parse_scalars(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	int rc = parse_field(params, "/params", &dpsgd_model, p, err);

	if (rc >= 0)
		rc = parse_field(params, "/params",
				 p->model == TRN_MODEL_CNN ? &cnn_activation : &dpsgd_activation, p,
				 err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", dpsgd_scalars, PARAM_ROWS(dpsgd_scalars), p,
				  err);
	if (rc >= 0 && json_object_get(params, "learning_rate") &&
	    !json_object_get(params, "learning_rate_final"))
		p->learning_rate_final = p->learning_rate;
	return rc;
}

/* "precision": a cnn's only (any value given to another model is refused,
 * as its other fields are). */
static int parse_precision(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	int rc = parse_enum(params, "/params", "precision", precision_from, &p->precision,
			    "\"float64\", \"float32\" (a cnn's)", err);

	if (rc == 1 && p->model != TRN_MODEL_CNN)
		return acct_error_set(err, ACCT_EINVAL, "/params/precision",
				      "'precision' is a cnn's only");
	return rc;
}

/* "features" and "scatter_groups".  An explicit "pca" needs components:
 * without them the rows would go in raw, which the request did not ask. */
static int parse_features(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	int rc = parse_enum(params, "/params", "features", features_from, &p->features,
			    "\"pca\", \"raw\", \"scatter\"", err);

	if (rc == 1 && p->features == TRN_FEATURES_PCA && p->pca_components == 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/pca_components",
				      "features \"pca\" needs pca_components >= 1");
	if (rc >= 0)
		rc = parse_u32(params, "scatter_groups", 1, TRN_DPSGD_SCATTER_CHANNELS,
			       &p->scatter_groups, err);
	return rc;
}

/* The count `key`: one integer in [lo, hi], or a list of 1 to max_n of
 * them, into ret[0..*ret_n).  0 when absent (nothing written), 1 when set,
 * or ACCT_EINVAL naming the key. */
static int parse_count_list(const json_t *params, const char *key, size_t max_n, int64_t lo,
			    int64_t hi, uint32_t *ret, uint32_t *ret_n, acct_error *err)
{
	const json_t *v = json_object_get(params, key);
	size_t n = json_is_array(v) ? json_array_size(v) : 1;
	char ptr[ACCT_ERROR_WHERE_BYTES];

	if (!v)
		return 0;
	srv_json_pointer(ptr, sizeof(ptr), "/params", key);
	if (n < 1 || n > max_n)
		return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' lists 1 to %zu integers", key,
				      max_n);
	for (size_t i = 0; i < n; i++) {
		const json_t *w = json_is_array(v) ? json_array_get(v, i) : v;

		if (!json_is_integer(w) || json_integer_value(w) < lo || json_integer_value(w) > hi)
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "'%s' is an integer in [%lld, %lld] or a list of them",
					      key, (long long)lo, (long long)hi);
		ret[i] = (uint32_t)json_integer_value(w);
	}
	*ret_n = (uint32_t)n;
	return 1;
}

/* "hidden": one width, or a list of 1 to DPG_MAX_HIDDEN_LAYERS widths. */
static int parse_hidden(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	int rc = parse_count_list(params, "hidden", DPG_MAX_HIDDEN_LAYERS, 1, DPG_MAX_HIDDEN_UNITS,
				  p->hidden, &p->n_hidden, err);

	return rc < 0 ? rc : 0;
}

#define T trn_dpsgd_params
/* The tempered sigmoid's (Papernot et al. 2021) scale, inverse temperature
 * and offset. */
static const param_field cnn_sigmoid[] = {
	PARAM_REAL(T, "sigmoid_scale", sigmoid_scale, 0, -1e3, 1e3),
	PARAM_REAL(T, "sigmoid_temperature", sigmoid_temperature, 0, -1e3, 1e3),
	PARAM_REAL(T, "sigmoid_offset", sigmoid_offset, 0, -1e3, 1e3),
};
#undef T

/*
 * A cnn's fields: "image_channels", "conv_channels" (one block's or a list),
 * "kernel" (one side for every block, or one per block), the tempered
 * sigmoid's "sigmoid_scale", "sigmoid_temperature", "sigmoid_offset" (with
 * activation "tempered_sigmoid" only), and its one dense hidden layer of
 * 32 units unless "hidden" names it.  Another model given any is refused.
 */
static int parse_cnn(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	static const char *const cnn_only[] = {"image_channels", "conv_channels", "kernel",
					       "sigmoid_scale", "sigmoid_temperature",
					       "sigmoid_offset"};
	char ptr[ACCT_ERROR_WHERE_BYTES];
	uint32_t nk = 0;
	int rc = 0;

	for (size_t i = 0; i < sizeof(cnn_only) / sizeof(cnn_only[0]); i++)
		if (json_object_get(params, cnn_only[i]) &&
		    (p->model != TRN_MODEL_CNN ||
		     (i >= 3 && p->conv_activation != TRN_CONV_TEMPERED_SIGMOID))) {
			srv_json_pointer(ptr, sizeof(ptr), "/params", cnn_only[i]);
			return acct_error_set(err, ACCT_EINVAL, ptr, "'%s' is a %s's only",
					      cnn_only[i],
					      i >= 3 ? "tempered_sigmoid cnn" : "cnn");
		}
	if (p->model != TRN_MODEL_CNN)
		return 0;
	if (!json_object_get(params, "hidden")) {
		p->n_hidden = 1;
		p->hidden[0] = 32;
	}
	rc = parse_u32(params, "image_channels", 1, DPG_MAX_CONV_CHANNELS, &p->image_channels, err);
	if (rc >= 0)
		rc = parse_count_list(params, "conv_channels", DPG_MAX_CONV_LAYERS, 1,
				      DPG_MAX_CONV_CHANNELS, p->conv_channels, &p->n_conv, err);
	if (rc >= 0)
		rc = parse_count_list(params, "kernel", DPG_MAX_CONV_LAYERS, 1, DPG_MAX_CONV_KERNEL,
				      p->kernel, &nk, err);
	/* One kernel side serves every block; a list gives one per block. */
	if (rc == 1 && nk == 1)
		p->kernel[1] = p->kernel[0];
	else if (rc == 1 && nk != p->n_conv)
		return acct_error_set(err, ACCT_EINVAL, "/params/kernel",
				      "'kernel' is one side, or one per conv block (%u)", p->n_conv);
	if (rc >= 0)
		rc = parse_fields(params, "/params", cnn_sigmoid, PARAM_ROWS(cnn_sigmoid), p, err);
	return rc < 0 ? rc : 0;
}

/* What every job kind's params pass first: an object holding none but
 * `keys`. */
static int params_object(const json_t *params, const char *const *keys, acct_error *err)
{
	if (!json_is_object(params))
		return acct_error_set(err, ACCT_EINVAL, "/params", "'params' must be an object");
	return srv_json_only_keys(params, "/params", keys, err);
}

/* The label column's name, read by the worker for hosted tables, and a
 * public dataset's id, checked against the data at submission. */
static const param_field dpsgd_data[] = {
	PARAM_TEXT("label", 0, DPG_MAX_NAME_BYTES),
	PARAM_TEXT("test_data", 0, DPG_MAX_ID_BYTES),
};

int srv__jobs_parse_params(const json_t *params, trn_dpsgd_params *p, acct_error *err)
{
	static const char *const keys[] = {
		"model", "hidden", "activation", "epochs", "lot_size", "noise_multiplier",
		"clip_norm", "clipping", "learning_rate", "learning_rate_final",
		"learning_rate_decay_epochs", "momentum", "pca_components",
		"pca_noise_multiplier", "max_train_examples", "label", "classes", "test_data",
		"features", "scatter_groups", "image_channels", "conv_channels", "kernel",
		"sigmoid_scale", "sigmoid_temperature", "sigmoid_offset", "precision", NULL,
	};
	int rc;

	trn_dpsgd_params_default(p);
	if (!params)
		params = json_object();
	else
		json_incref((json_t *)params);
	rc = params_object(params, keys, err);
	if (rc >= 0)
		rc = parse_scalars(params, p, err);
	if (rc >= 0)
		rc = parse_precision(params, p, err);
	if (rc >= 0)
		rc = parse_hidden(params, p, err);
	if (rc >= 0)
		rc = parse_features(params, p, err);
	if (rc >= 0)
		rc = parse_cnn(params, p, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", dpsgd_data, PARAM_ROWS(dpsgd_data), p, err);
	if (rc >= 0 && p->model == TRN_MODEL_LOGREG)
		p->n_hidden = 0;
	json_decref((json_t *)params);
	if (rc < 0)
		return rc;
	return trn_dpsgd_params_validate(p, err);
}

/*
 * The declared classes of a label column: an integer K in [2,
 * DPG_MAX_CLASSES] for a numeric label (classes 0 .. K-1), or the list of
 * 2 to DPG_MAX_CLASSES distinct category names for a categorical one.
 */
static int check_declared_classes(const json_t *classes, bool numeric, uint32_t *ret_classes,
				  acct_error *err)
{
	const json_t *c;
	size_t i;

	if (!classes)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "a hosted table's label classes must be declared: an integer K "
				      "for a numeric label (0 .. K-1), or the list of category names");
	if (numeric) {
		if (!json_is_integer(classes) || json_integer_value(classes) < 2 ||
		    json_integer_value(classes) > DPG_MAX_CLASSES)
			return acct_error_set(err, ACCT_EINVAL, "/params/classes",
					      "a numeric label's classes are an integer K in [2, %d]",
					      DPG_MAX_CLASSES);
		*ret_classes = (uint32_t)json_integer_value(classes);
		return 0;
	}
	if (!json_is_array(classes) || json_array_size(classes) < 2 ||
	    json_array_size(classes) > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/params/classes",
				      "a categorical label's classes are a list of 2 to %d names",
				      DPG_MAX_CLASSES);
	json_array_foreach(classes, i, c) {
		char where[ACCT_ERROR_WHERE_BYTES];

		snprintf(where, sizeof(where), "/params/classes/%zu", i);
		if (!json_is_string(c) || json_string_length(c) < 1 ||
		    json_string_length(c) > DPG_MAX_CSV_FIELD_BYTES ||
		    strlen(json_string_value(c)) != json_string_length(c))
			return acct_error_set(err, ACCT_EINVAL, where,
					      "a class is a category name of 1 to %d bytes",
					      DPG_MAX_CSV_FIELD_BYTES);
		for (size_t k = 0; k < i; k++)
			if (strcmp(json_string_value(json_array_get(classes, k)),
				   json_string_value(c)) == 0)
				return acct_error_set(err, ACCT_EINVAL, where, "appears twice");
	}
	*ret_classes = (uint32_t)json_array_size(classes);
	return 0;
}

bool srv__jobs_is_party_column(const json_t *params, const json_t *column)
{
	const char *party = json_string_value(json_object_get(params, "party_column"));
	const char *name = json_string_value(json_object_get(column, "name"));

	return party && name && strcmp(party, name) == 0;
}

/*
 * Checks the job's label and classes against a hosted table's schema
 * (metadata, so before any data is read).  The label must name a column
 * (default: the last).  The classes must be declared: an integer K for a
 * numeric label (classes 0 .. K-1), or the list of category names for a
 * categorical one.  Taken from the data, their number and order would be
 * released by the model's shape whatever noise the training adds (one row
 * with a new category changed it), so they are public parameters; a row
 * whose label is none of them is sampled with a zero gradient
 * (TRN_NO_CLASS).  Fashion-MNIST has its ten classes and takes none.
 */
int srv__jobs_check_label(const json_t *params, const json_t *columns, size_t *ret_features,
			  uint32_t *ret_classes, acct_error *err)
{
	const char *label = json_string_value(json_object_get(params, "label"));
	const json_t *classes = json_object_get(params, "classes"), *col = NULL, *c;
	size_t i, n = json_array_size(columns), features = 0;

	if (!columns) {
		if (classes)
			return acct_error_set(err, ACCT_EINVAL, "/params/classes",
					      "classes are declared for a hosted table's label only");
		if (label)
			return acct_error_set(err, ACCT_EINVAL, "/params/label",
					      "a label column is named for a hosted table only");
		*ret_features = TRN_FASHION_MNIST_FEATURES;
		*ret_classes = TRN_FASHION_MNIST_CLASSES;
		return 0;
	}
	json_array_foreach(columns, i, c)
		if (label ? json_is_string(json_object_get(c, "name")) &&
				    strcmp(json_string_value(json_object_get(c, "name")), label) == 0 :
			    i + 1 == n)
			col = c;
	if (!col)
		return acct_error_set(err, ACCT_EINVAL, "/params/label",
				      "the hosted table has no column '%.64s'", label ? label : "");
	/* The features: every numeric column but the label and an ensemble's
	 * party column (table_to_dataset). */
	json_array_foreach(columns, i, c)
		if (c != col && !srv__jobs_is_party_column(params, c) &&
		    json_is_string(json_object_get(c, "kind")) &&
		    strcmp(json_string_value(json_object_get(c, "kind")), "numeric") == 0)
			features++;
	*ret_features = features;
	return check_declared_classes(classes,
				      strcmp(json_string_value(json_object_get(col, "kind")),
					     "numeric") == 0,
				      ret_classes, err);
}

json_t *srv_json_parse_text(const char *text)
{
	return text ? json_loads(text, 0, NULL) : NULL;
}

/* ---- the ensemble trainer's params ------------------------------------- */

static int algo_from(const char *s, void *r) { return trn_ensemble_algorithm_from_name(s, r); }

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 0 when no two strings of `list` are equal (sorted copies compared), else
 * ACCT_EINVAL at `where`. */
static int names_unique(const json_t *list, const char *where, acct_error *err)
{
	size_t n = json_array_size(list);
	const char **v = malloc(sizeof(*v) * (n ? n : 1));
	int rc = 0;

	if (!v)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++)
		v[i] = json_string_value(json_array_get(list, i));
	qsort(v, n, sizeof(*v), cmp_names);
	for (size_t i = 1; i < n && rc == 0; i++)
		if (strcmp(v[i - 1], v[i]) == 0)
			rc = acct_error_set(err, ACCT_EINVAL, where, "'%.64s' appears twice", v[i]);
	free(v);
	return rc;
}

/* "parties": an integer M (codes 0..M-1) or the list of M party names,
 * 1 <= M <= max; the ensemble's and slmc's party column alike. */
static int parse_parties(const json_t *params, int64_t max, uint32_t *ret, acct_error *err)
{
	const json_t *parties = json_object_get(params, "parties"), *c;
	size_t i, n = json_array_size(parties);

	if (json_is_integer(parties)) {
		if (json_integer_value(parties) < 1 || json_integer_value(parties) > max)
			return acct_error_set(err, ACCT_EINVAL, "/params/parties",
					      "'parties' is 1 to %lld", (long long)max);
		*ret = (uint32_t)json_integer_value(parties);
		return 0;
	}
	if (!json_is_array(parties) || n < 1 || n > (size_t)max)
		return acct_error_set(err, ACCT_EINVAL, "/params/parties",
				      "'parties' is required: an integer M (party codes 0..M-1) or "
				      "the list of 1 to %lld party names, never read from the rows",
				      (long long)max);
	json_array_foreach(parties, i, c) {
		char where[ACCT_ERROR_WHERE_BYTES];

		snprintf(where, sizeof(where), "/params/parties/%zu", i);
		if (!json_is_string(c) || json_string_length(c) < 1 ||
		    json_string_length(c) > DPG_MAX_CSV_FIELD_BYTES)
			return acct_error_set(err, ACCT_EINVAL, where,
					      "a party name is a category of 1 to %d bytes",
					      DPG_MAX_CSV_FIELD_BYTES);
	}
	*ret = (uint32_t)n;
	return names_unique(parties, "/params/parties", err);
}

/* "local_model": a kind, or a list of kinds given to parties round-robin. */
static int parse_local_models(const json_t *params, trn_ensemble_params *p, acct_error *err)
{
	const json_t *lm = json_object_get(params, "local_model"), *c;
	size_t i, n = json_array_size(lm);
	static const char allowed[] =
		"\"logreg\", \"linear_svm\", \"gaussian_nb\", \"decision_tree\", \"knn\"";

	if (!lm)
		return 0;
	if (json_is_string(lm)) {
		p->n_local_models = 1;
		if (trn_local_model_from_name(json_string_value(lm), &p->local_model[0]) < 0)
			return acct_error_set(err, ACCT_EINVAL, "/params/local_model",
					      "'local_model' is one of %s, or a list of them", allowed);
		return 0;
	}
	if (!json_is_array(lm) || n < 1 || n > DPG_MAX_ENSEMBLE_LOCAL_KINDS)
		return acct_error_set(err, ACCT_EINVAL, "/params/local_model",
				      "'local_model' is a kind or a list of 1 to %d kinds",
				      DPG_MAX_ENSEMBLE_LOCAL_KINDS);
	json_array_foreach(lm, i, c) {
		char where[ACCT_ERROR_WHERE_BYTES];

		snprintf(where, sizeof(where), "/params/local_model/%zu", i);
		if (!json_is_string(c) ||
		    trn_local_model_from_name(json_string_value(c), &p->local_model[i]) < 0)
			return acct_error_set(err, ACCT_EINVAL, where, "one of %s", allowed);
	}
	p->n_local_models = (uint32_t)n;
	return 0;
}

#define T trn_ensemble_params
/* An ensemble job's fields, each over its default; the party column and
 * the public datasets are read at submission. */
static const param_field ensemble_fields[] = {
	PARAM_TEXT("party_column", SRV_REQUIRED, DPG_MAX_NAME_BYTES),
	PARAM_TEXT("auxiliary_data", SRV_REQUIRED, DPG_MAX_ID_BYTES),
	PARAM_TEXT("label", 0, DPG_MAX_NAME_BYTES),
	PARAM_TEXT("test_data", 0, DPG_MAX_ID_BYTES),
};
static const param_field ensemble_scalars[] = {
	PARAM_ENUM(T, "algorithm", algorithm, algo_from, "\"soft_label\", \"majority_vote\""),
	PARAM_REAL(T, "epsilon", epsilon, SRV_REQUIRED | SRV_LO_OPEN, 0, 1e6),
	PARAM_REAL(T, "lambda", lambda, SRV_LO_OPEN, 0, 1e6),
	PARAM_REAL(T, "input_scale", input_scale, SRV_LO_OPEN, 0, 1e12),
	PARAM_REAL(T, "local_lambda", local_lambda, SRV_LO_OPEN, 0, 1e6),
	PARAM_U32(T, "knn_k", knn_k, 1, DPG_MAX_ENSEMBLE_KNN_K),
	PARAM_U32(T, "max_depth", max_depth, 1, DPG_MAX_ENSEMBLE_TREE_DEPTH),
};
#undef T

int srv__jobs_parse_ensemble(const json_t *params, trn_ensemble_params *p, acct_error *err)
{
	static const char *const keys[] = {
		"party_column", "parties", "label", "classes", "local_model", "lambda",
		"algorithm", "epsilon", "auxiliary_data", "test_data", "input_scale",
		"local_lambda", "knn_k", "max_depth", NULL,
	};
	int rc;

	trn_ensemble_params_default(p);
	rc = params_object(params, keys, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", ensemble_fields, PARAM_ROWS(ensemble_fields), p,
				  err);
	if (rc >= 0)
		rc = parse_parties(params, DPG_MAX_ENSEMBLE_PARTIES, &p->parties, err);
	if (rc >= 0)
		rc = parse_local_models(params, p, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", ensemble_scalars, PARAM_ROWS(ensemble_scalars), p,
				  err);
	if (rc < 0)
		return rc;
	return trn_ensemble_params_validate(p, err);
}

/* ---- the slmc trainer's params ----------------------------------------- */

#define T trn_slmc_params
/* An slmc job's fields, each over its default; trn_slmc_params_validate
 * then checks their meaning (clusters >= 2, fuzzifier > 1, ...).  The
 * strings are read at submission. */
static const param_field slmc_fields[] = {
	PARAM_TEXT("party_column", 0, DPG_MAX_NAME_BYTES),
	PARAM_TEXT("label", 0, DPG_MAX_NAME_BYTES),
	PARAM_TEXT("auxiliary_data", 0, DPG_MAX_ID_BYTES),
	PARAM_TEXT("test_data", 0, DPG_MAX_ID_BYTES),
	PARAM_U32(T, "clusters", clusters, 0, UINT32_MAX),
	PARAM_U32(T, "features", features, 0, UINT32_MAX),
	PARAM_U32(T, "iterations", iterations, 0, UINT32_MAX),
	PARAM_REAL(T, "gamma", gamma, 0, 0, 1e12),
	PARAM_REAL(T, "lambda", lambda, 0, 0, 1e12),
	PARAM_REAL(T, "rho", rho, 0, 0, 1e12),
	PARAM_REAL(T, "fuzzifier", fuzzifier, 0, 0, 1e12),
	PARAM_REAL(T, "max_norm", max_norm, 0, 0, 1e12),
	PARAM_REAL(T, "noise_multiplier", noise_multiplier, SRV_LO_OPEN, 0, 1e12),
	PARAM_REAL(T, "epsilon", epsilon, SRV_LO_OPEN, 0, 1e12),
};
#undef T

/* "parties": with a party column, as the ensemble's (an integer M or M
 * names); without one, the integer M of a uniform random split. */
static int parse_slmc_parties(const json_t *params, trn_slmc_params *p, acct_error *err)
{
	if (json_object_get(params, "party_column"))
		return parse_parties(params, DPG_MAX_SLMC_PARTIES, &p->parties, err);
	if (json_object_get(params, "parties") && !json_is_integer(json_object_get(params, "parties")))
		return acct_error_set(err, ACCT_EINVAL, "/params/parties",
				      "without a party_column 'parties' is the integer number of "
				      "learners the rows are split over at random");
	return parse_u32(params, "parties", 0, UINT32_MAX, &p->parties, err);
}

int srv__jobs_parse_slmc(const json_t *params, trn_slmc_params *p, acct_error *err)
{
	static const char *const keys[] = {
		"clusters", "features", "gamma", "lambda", "rho", "fuzzifier", "iterations",
		"noise_multiplier", "epsilon", "max_norm", "parties", "party_column",
		"auxiliary_data", "test_data", "label", "classes", NULL,
	};
	uint32_t classes = 0;
	int rc;

	trn_slmc_params_default(p);
	if (!params)
		return trn_slmc_params_validate(p, err);
	rc = params_object(params, keys, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", slmc_fields, PARAM_ROWS(slmc_fields), p, err);
	/* The default is a target epsilon; a noise multiplier given alone
	 * replaces it (both given is refused by the validation). */
	if (rc >= 0 && json_object_get(params, "noise_multiplier") &&
	    !json_object_get(params, "epsilon"))
		p->epsilon = 0.0;
	if (rc >= 0)
		rc = parse_slmc_parties(params, p, err);
	/* test_data is scored against its label column, whose classes are
	 * declared as any job's are. */
	if (rc >= 0 && json_object_get(params, "test_data") && !json_object_get(params, "label"))
		rc = acct_error_set(err, ACCT_EINVAL, "/params/label",
				    "test_data needs 'label', the name of its label column");
	if (rc >= 0 && (json_object_get(params, "test_data") || json_object_get(params, "classes")))
		rc = check_declared_classes(json_object_get(params, "classes"),
					    json_is_integer(json_object_get(params, "classes")),
					    &classes, err);
	if (rc < 0)
		return rc;
	return trn_slmc_params_validate(p, err);
}

/* ---- the label_em trainer's params ------------------------------------- */

static int loss_from(const char *s, void *r) { return trn_loss_from_name(s, r); }
static int lem_model_from(const char *s, void *r) { return trn_label_em_model_from_name(s, r); }

#define T trn_label_em_params
/* A label_em job's fields, each over its default: the public datasets,
 * the mechanism's epsilon, the loss, the model and the optimiser. */
static const param_field label_em_fields[] = {
	PARAM_TEXT("label", 0, DPG_MAX_NAME_BYTES),
	PARAM_TEXT("test_data", 0, DPG_MAX_ID_BYTES),
	PARAM_REAL(T, "epsilon", epsilon, SRV_REQUIRED | SRV_LO_OPEN, 0, 1e6),
	PARAM_ENUM(T, "loss", loss.kind, loss_from,
		"\"barrier_hinge\", \"hinge\", \"logistic\", \"sigmoid\", \"ramp\", \"squared\", "
		"\"unhinged\""),
	PARAM_REAL(T, "b", loss.b, SRV_LO_OPEN, 1, 1e6),
	PARAM_REAL(T, "r", loss.r, SRV_LO_OPEN, 0, 1e6),
	PARAM_ENUM(T, "model", model, lem_model_from, "\"linear\", \"mlp\""),
	PARAM_ENUM(T, "activation", activation, act_from, "\"relu\", \"tanh\""),
	PARAM_U32(T, "epochs", epochs, 1, DPG_MAX_EPOCHS),
	PARAM_U32(T, "batch_size", batch_size, 1, DPG_MAX_LOT_SIZE),
	PARAM_REAL(T, "learning_rate", learning_rate, SRV_LO_OPEN, 0, 1e3),
	PARAM_REAL(T, "momentum", momentum, SRV_HI_OPEN, 0, 1),
	PARAM_REAL(T, "weight_decay", weight_decay, 0, 0, 1e6),
	PARAM_REAL(T, "gradient_clip", gradient_clip, 0, 0, 1e9),
	PARAM_BOOL(T, "center", center),
};
#undef T

int srv__jobs_parse_label_em(const json_t *params, trn_label_em_params *p, acct_error *err)
{
	static const char *const keys[] = {
		"epsilon", "label", "classes", "test_data", "loss", "b", "r", "model", "hidden",
		"activation", "epochs", "batch_size", "learning_rate", "momentum", "weight_decay",
		"gradient_clip", "center", NULL,
	};
	trn_dpsgd_params widths;
	int rc;

	trn_label_em_params_default(p);
	rc = params_object(params, keys, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", label_em_fields, PARAM_ROWS(label_em_fields), p,
				  err);
	/* "hidden" as DP-SGD reads it; a linear model has none. */
	memset(&widths, 0, sizeof(widths));
	widths.n_hidden = 1;
	widths.hidden[0] = p->hidden[0];
	if (rc >= 0)
		rc = parse_hidden(params, &widths, err);
	if (rc >= 0 && p->model == TRN_MODEL_MLP) {
		p->n_hidden = widths.n_hidden;
		memcpy(p->hidden, widths.hidden, sizeof(p->hidden));
	} else if (rc >= 0 && json_object_get(params, "hidden")) {
		rc = acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				    "a linear model has no hidden layers");
	}
	if (rc < 0)
		return rc;
	return trn_label_em_params_validate(p, err);
}

/* ---- the pate trainer's params ------------------------------------------ */

/* "hidden" of a pate model object at `where`: one width or a list. */
static int parse_pate_hidden(const json_t *m, const char *where, trn_pate_model_params *ret,
			     acct_error *err)
{
	const json_t *h = json_object_get(m, "hidden");
	char ptr[ACCT_ERROR_WHERE_BYTES];
	size_t n = json_is_array(h) ? json_array_size(h) : 1;

	if (!h)
		return 0;
	srv_json_pointer(ptr, sizeof(ptr), where, "hidden");
	if (n < 1 || n > DPG_MAX_HIDDEN_LAYERS)
		return acct_error_set(err, ACCT_EINVAL, ptr, "'hidden' lists 1 to %d layer widths",
				      DPG_MAX_HIDDEN_LAYERS);
	for (size_t i = 0; i < n; i++) {
		const json_t *w = json_is_array(h) ? json_array_get(h, i) : h;

		if (!json_is_integer(w) || json_integer_value(w) < 1 ||
		    json_integer_value(w) > DPG_MAX_HIDDEN_UNITS)
			return acct_error_set(err, ACCT_EINVAL, ptr,
					      "hidden widths are integers in [1, %d]",
					      DPG_MAX_HIDDEN_UNITS);
		ret->hidden[i] = (uint32_t)json_integer_value(w);
	}
	ret->n_hidden = (uint32_t)n;
	return 0;
}

#define T trn_pate_model_params
static const param_field pate_model_scalars[] = {
	PARAM_U32(T, "epochs", epochs, 1, DPG_MAX_EPOCHS),
	PARAM_U32(T, "lot_size", lot_size, 1, DPG_MAX_LOT_SIZE),
	PARAM_REAL(T, "learning_rate", learning_rate, SRV_LO_OPEN, 0, 1e3),
	PARAM_REAL(T, "momentum", momentum, SRV_HI_OPEN, 0, 1),
	PARAM_ENUM(T, "activation", activation, act_from, "\"relu\", \"tanh\""),
};
#undef T

/* "teacher_model" or "student_model": a kind ("logreg" | "mlp") or an
 * object {model, hidden, activation, epochs, lot_size, learning_rate,
 * momentum}. */
static int parse_pate_model(const json_t *params, const char *key, trn_pate_model_params *ret,
			    acct_error *err)
{
	static const char *const keys[] = {"model", "hidden", "activation", "epochs", "lot_size",
					   "learning_rate", "momentum", NULL};
	const json_t *m = json_object_get(params, key);
	const char *kind = json_is_string(m) ? json_string_value(m) : NULL;
	char where[ACCT_ERROR_WHERE_BYTES], ptr[ACCT_ERROR_WHERE_BYTES];
	int rc;

	snprintf(where, sizeof(where), "/params/%s", key);
	if (!m)
		return 0;
	if (!kind && !json_is_object(m))
		return acct_error_set(err, ACCT_EINVAL, where,
				      "'%s' is \"logreg\", \"mlp\" or an object", key);
	if (json_is_object(m) && ((rc = srv_json_only_keys(m, where, keys, err)) < 0 ||
				  (rc = srv_json_string(m, where, "model", 0, 32, &kind, err)) < 0))
		return rc;
	snprintf(ptr, sizeof(ptr), "/params/%s%s", key, json_is_object(m) ? "/model" : "");
	if (kind && trn_model_kind_from_name(kind, &ret->model) < 0)
		return acct_error_set(err, ACCT_EINVAL, ptr, "the model must be \"logreg\" or \"mlp\"");
	if (ret->model == TRN_MODEL_MLP && ret->n_hidden == 0) {
		/* An mlp named without its layers gets one of 100 units. */
		ret->n_hidden = 1;
		ret->hidden[0] = 100;
	}
	if (json_is_object(m) &&
	    ((rc = parse_fields(m, where, pate_model_scalars, PARAM_ROWS(pate_model_scalars), ret,
				err)) < 0 ||
	     (rc = parse_pate_hidden(m, where, ret, err)) < 0))
		return rc;
	if (ret->model == TRN_MODEL_LOGREG && ret->n_hidden > 0 && json_object_get(m, "hidden"))
		return acct_error_set(err, ACCT_EINVAL, where, "logreg has no hidden layers");
	if (ret->model == TRN_MODEL_LOGREG)
		ret->n_hidden = 0;
	return 0;
}

/* A pate job's aggregators: the session's but LNMax, a Laplace one. */
static int pate_agg_from(const char *s, void *r)
{
	mech_pate_agg a;

	if (mech_pate_agg_from_name(s, &a) < 0 || a == MECH_PATE_LNMAX)
		return -1;
	*(mech_pate_agg *)r = a;
	return 0;
}

#define T trn_pate_params
/* A pate job's scalars, each over its default. */
static const param_field pate_scalars[] = {
	PARAM_U32(T, "teachers", teachers, 1, DPG_MAX_PATE_JOB_TEACHERS),
	PARAM_U32(T, "queries", queries, 1, DPG_MAX_PATE_QUERIES),
	PARAM_ENUM(T, "aggregator", aggregator, pate_agg_from,
		"\"gnmax\", \"confident_gnmax\", \"interactive_gnmax\""),
	PARAM_REAL(T, "threshold", threshold, 0, 0, DPG_MAX_PATE_JOB_TEACHERS),
	PARAM_REAL(T, "sigma1", sigma1, 0, DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA),
	PARAM_REAL(T, "sigma2", sigma2, 0, DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA),
	PARAM_REAL(T, "student_confidence", student_confidence, 0, 0, 1),
	PARAM_BOOL(T, "semi_supervised", semi_supervised),
	PARAM_REAL(T, "confidence", confidence, SRV_LO_OPEN, 0, 1),
	PARAM_REAL(T, "release_beta", release_beta, SRV_HI_OPEN, 0, 0.5),
	PARAM_REAL(T, "release_sigma", release_sigma, 0, MECH_PATE_GNSS_MIN_SIGMA,
		MECH_PATE_GNSS_MAX_SIGMA),
	PARAM_REAL(T, "release_order", release_order, SRV_LO_OPEN, 1, DPG_MAX_RDP_ORDER),
};
/* Public datasets' ids and the label's name, checked against the data at
 * submission. */
static const param_field pate_data[] = {
	PARAM_TEXT("student_data", 0, DPG_MAX_ID_BYTES),
	PARAM_TEXT("test_data", 0, DPG_MAX_ID_BYTES),
	PARAM_TEXT("label", 0, DPG_MAX_NAME_BYTES),
};
#undef T

int srv__jobs_parse_pate(const json_t *params, trn_pate_params *p, acct_error *err)
{
	static const char *const keys[] = {
		"teachers", "teacher_model", "student_model", "student_data", "queries",
		"aggregator", "threshold", "sigma1", "sigma2", "student_confidence",
		"semi_supervised", "confidence", "release_beta", "release_sigma", "release_order",
		"label", "classes", "test_data", NULL,
	};
	int rc;

	trn_pate_params_default(p);
	rc = params_object(params, keys, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", pate_scalars, PARAM_ROWS(pate_scalars), p, err);
	if (rc >= 0)
		rc = parse_pate_model(params, "teacher_model", &p->teacher, err);
	if (rc >= 0)
		rc = parse_pate_model(params, "student_model", &p->student, err);
	if (rc >= 0)
		rc = parse_fields(params, "/params", pate_data, PARAM_ROWS(pate_data), p, err);
	if (rc < 0)
		return rc;
	return trn_pate_params_validate(p, err);
}
