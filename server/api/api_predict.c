/*
 * api_predict.c: using a released model: its rows read from JSON or CSV,
 * its classes and per-class scores (POST /v1/jobs/{id}/predict and
 * `dpgate predict`), and the model as JSON (GET /v1/jobs/{id}/model?
 * format=json).  A released model is already private: scoring rows with
 * it reads no private data and charges nothing.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "api_jobs_internal.h"
#include "dpg_limits.h"
#include "mech.h"

/* Whether all k scores are finite: JSON has no infinity or NaN, and an
 * argmax over NaN would name an arbitrary class. */
static bool scores_finite(const double *s, size_t k)
{
	for (size_t c = 0; c < k; c++)
		if (!isfinite(s[c]))
			return false;
	return true;
}

/* The error of row i (from 0) whose scores overflow (srv_predict). */
static int row_overflow(const char *where, size_t i, acct_error *err)
{
	char at[ACCT_ERROR_WHERE_BYTES];

	if (strcmp(where, "/rows") != 0)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "the model's scores of row %zu overflow: its inputs are too "
				      "large for it", i + 1);
	snprintf(at, sizeof(at), "/rows/%zu", i);
	return acct_error_set(err, ACCT_EUNSUPPORTED, at,
			      "the model's scores of this row overflow: its inputs are too "
			      "large for it");
}

int srv_predict(const trn_model *m, const double *x, size_t n, const char *where, uint32_t *pred,
		double *scores, acct_error *err)
{
	size_t d = trn_model_input_dim(m), k = trn_model_num_classes(m);

	for (size_t i = 0; i < n; i++) {
		double *s = scores + i * k;
		int rc = trn_model_scores(m, x + i * d, d, s, k, err);

		if (rc < 0)
			return rc;
		if (!scores_finite(s, k))
			return row_overflow(where, i, err);
		/* The first argmax, as trn_model_predict takes it. */
		pred[i] = 0;
		for (size_t c = 1; c < k; c++)
			if (s[c] > s[pred[i]])
				pred[i] = (uint32_t)c;
	}
	return 0;
}

int srv_predict_json_rows(const json_t *body, size_t d, double **ret_x, size_t *ret_n,
			  acct_error *err)
{
	static const char *const keys[] = {"rows", NULL};
	const json_t *rows = json_object_get(body, "rows"), *row, *v;
	size_t n = json_array_size(rows), i, j;
	char where[ACCT_ERROR_WHERE_BYTES];
	double *x;
	int rc = srv_json_only_keys(body, "", keys, err);

	if (rc < 0)
		return rc;
	if (!json_is_array(rows) || n < 1)
		return acct_error_set(err, ACCT_EINVAL, "/rows",
				      "'rows' must be a list of 1 or more rows of numbers");
	if (n > DPG_MAX_PREDICT_ROWS)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/rows",
				      "at most %d rows in one request", DPG_MAX_PREDICT_ROWS);
	x = malloc(sizeof(double) * n * d);
	if (!x)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	json_array_foreach(rows, i, row) {
		snprintf(where, sizeof(where), "/rows/%zu", i);
		if (!json_is_array(row) || json_array_size(row) != d) {
			free(x);
			return acct_error_set(err, ACCT_EINVAL, where,
					      "a row holds the model's %zu inputs, numbers", d);
		}
		json_array_foreach(row, j, v) {
			if (!json_is_number(v) || !isfinite(json_number_value(v))) {
				free(x);
				snprintf(where, sizeof(where), "/rows/%zu/%zu", i, j);
				return acct_error_set(err, ACCT_EINVAL, where, "not a finite number");
			}
			x[i * d + j] = json_number_value(v);
		}
	}
	*ret_x = x;
	*ret_n = n;
	return 0;
}

/* True when the first line of text is numbers only (a headerless CSV). */
static bool first_line_numeric(const char *text, size_t len)
{
	const char *p = text, *end = memchr(text, '\n', len);

	if (!end)
		end = text + len;
	while (p < end) {
		char *stop;

		strtod(p, &stop);
		if (stop == p)
			return false;
		while (stop < end && (*stop == ' ' || *stop == '\r'))
			stop++;
		if (stop < end && *stop != ',')
			return false;
		p = stop + 1;
	}
	return true;
}

/* text with a header "c1,...,cd" put before it (a headerless CSV, whose
 * columns are the inputs in order); NULL when out of memory. */
static char *with_header(const char *text, size_t len, size_t d, size_t *ret_len)
{
	size_t cap = len + 12 * d + 2, off = 0;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	for (size_t j = 0; j < d; j++)
		off += (size_t)snprintf(out + off, cap - off, "%sc%zu", j ? "," : "", j + 1);
	out[off++] = '\n';
	memcpy(out + off, text, len);
	*ret_len = off + len;
	return out;
}

/* Copies the model's inputs from t: by name, or the first d in order. */
static int csv_inputs(const mech_table *t, const json_t *features, size_t d, double *x,
		      acct_error *err)
{
	if (!features && mech_table_columns(t) != d)
		return acct_error_set(err, ACCT_EINVAL, "/csv",
				      "the table has %zu columns; the model takes %zu inputs",
				      mech_table_columns(t), d);
	for (size_t k = 0; k < d; k++) {
		const char *name = features ? json_string_value(json_array_get(features, k)) : NULL;
		size_t j = name ? mech_table_column_index(t, name) : k;

		if (!mech_table_copy_numeric(t, j, x + k, d))
			return acct_error_set(err, ACCT_EINVAL, "/csv",
					      "the header has no numeric column '%.64s', an input of "
					      "the model", name ? name : mech_table_column_name(t, j));
	}
	return 0;
}

/*
 * A feature column of t (parsed without a schema) that holds a cell that is
 * not a number was typed categorical, which says neither line nor cell.
 * Parses text again with each feature declared numeric and every other
 * column as it was typed, so that the parser names the first such cell
 * (its line and column) in err.  Returns that error, or 0 when every
 * feature t has is numeric (a missing one is csv_inputs' error).
 */
static int name_bad_cell(const char *text, size_t len, const mech_table *t,
			 const json_t *features, acct_error *err)
{
	size_t cols = mech_table_columns(t);
	mech_column_decl *decl = malloc(sizeof(*decl) * cols);
	mech_table *again = NULL;
	bool bad = false;
	int rc;

	if (!decl)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t j = 0; j < cols; j++) {
		size_t k;

		decl[j].name = mech_table_column_name(t, j);
		decl[j].kind = mech_table_column_kind(t, j);
		for (k = 0; k < json_array_size(features); k++) {
			const char *name = json_string_value(json_array_get(features, k));

			if (name && !strcmp(decl[j].name, name))
				break;
		}
		if (k < json_array_size(features) && decl[j].kind != MECH_COL_NUMERIC) {
			decl[j].kind = MECH_COL_NUMERIC;
			bad = true;
		}
	}
	rc = bad ? mech_table_parse_csv(text, len, decl, cols, &again, err) : 0;
	mech_table_free(again);
	free(decl);
	return rc;
}

/*
 * An error of the parser on text that with_header() headed: its line is one
 * past the user's, and a column is named "cK", a name the user never wrote.
 * Rewrites err to the user's line and the column's number K.  Errors of the
 * header line itself (which the user did not write either) stay as they are.
 */
static void headerless_error(acct_error *err)
{
	char where[ACCT_ERROR_WHERE_BYTES], text[ACCT_ERROR_TEXT_BYTES];
	size_t line, col;
	int at = -1;

	if (sscanf(err->where, "/csv/line/%zu", &line) != 1 || line < 2)
		return;
	if (sscanf(err->text, "line %*u, column 'c%zu'%n", &col, &at) == 1 && at > 0) {
		snprintf(where, sizeof(where), "/csv/line/%zu/%zu", line - 1, col);
		snprintf(text, sizeof(text), "line %zu, column %zu%s", line - 1, col,
			 err->text + at);
	} else if (sscanf(err->text, "line %*u%n", &at) == 0 && at > 0) {
		snprintf(where, sizeof(where), "/csv/line/%zu", line - 1);
		snprintf(text, sizeof(text), "line %zu%s", line - 1, err->text + at);
	} else {
		return;
	}
	memcpy(err->where, where, sizeof(err->where));
	memcpy(err->text, text, sizeof(err->text));
}

int srv_predict_csv_rows(const char *text, size_t len, const json_t *features, size_t d,
			 double **ret_x, size_t *ret_n, acct_error *err)
{
	/* Without names every column is an input: a cell that is not a number
	 * is the parser's error, at its line and column. */
	static const mech_column_decl all_numeric[] = {{"*", MECH_COL_NUMERIC}};
	mech_table *t = NULL;
	char *own = NULL;
	double *x = NULL;
	int rc;

	if (features && json_array_size(features) != d)
		return acct_error_set(err, ACCT_EINVAL, "", "the model's feature names do not fit it");
	/* Without names, a first line of numbers is a row, not a header. */
	if (!features && len > 0 && first_line_numeric(text, len)) {
		own = with_header(text, len, d, &len);
		if (!own)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		text = own;
	}
	rc = mech_table_parse_csv(text, len, features ? NULL : all_numeric, features ? 0 : 1, &t,
				  err);
	if (rc < 0) {
		if (own)
			headerless_error(err);
		goto out;
	}
	if (mech_table_rows(t) < 1 || mech_table_rows(t) > DPG_MAX_PREDICT_ROWS) {
		rc = acct_error_set(err, mech_table_rows(t) ? ACCT_EUNSUPPORTED : ACCT_EINVAL, "/csv",
				    "1 to %d rows in one request", DPG_MAX_PREDICT_ROWS);
		goto out;
	}
	rc = features ? name_bad_cell(text, len, t, features, err) : 0;
	if (rc < 0)
		goto out;
	x = malloc(sizeof(double) * mech_table_rows(t) * d);
	rc = x ? csv_inputs(t, features, d, x, err) : acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if (rc < 0)
		goto out;
	*ret_n = mech_table_rows(t);
	*ret_x = x;
	x = NULL;
out:
	free(x);
	free(own);
	mech_table_free(t);
	return rc;
}

void srv_predict_answer(srv_buf *b, const uint32_t *pred, const double *scores, size_t n,
			size_t k, const json_t *labels)
{
	char num[SRV_FMT_REAL_MAX];

	srv_buf_put(b, "{\"classes\":[", 12);
	for (size_t i = 0; i < n; i++) {
		if (i)
			srv_buf_put(b, ",", 1);
		if (labels)
			srv_json_dump_append(b, json_array_get(labels, pred[i]));
		else
			srv_buf_put(b, num, srv_fmt_int64(num, pred[i]));
	}
	srv_buf_put(b, "],\"scores\":[", 12);
	for (size_t i = 0; i < n; i++) {
		srv_buf_put(b, i ? ",[" : "[", i ? 2 : 1);
		for (size_t c = 0; c < k; c++) {
			if (c)
				srv_buf_put(b, ",", 1);
			srv_buf_put(b, num, srv_fmt_real(num, scores[i * k + c]));
		}
		srv_buf_put(b, "]", 1);
	}
	srv_buf_put(b, "]", 1);
	if (labels) {
		srv_buf_put(b, ",\"labels\":", 10);
		srv_json_dump_append(b, labels);
	}
	srv_buf_put(b, "}", 1);
}

json_t *srv_job_class_labels(const json_t *params, uint32_t k)
{
	const json_t *classes = json_object_get(params, "classes");

	/* A categorical label's declared names, in class order; a numeric
	 * label's class v is the value v, its index. */
	if (json_is_array(classes) && json_array_size(classes) == k)
		return json_incref((json_t *)classes);
	return NULL;
}

/*
 * The names of a job's model's classes (srv_job_class_labels), NULL for a
 * clustering job: its classes are cluster indices 0..C-1, and the classes
 * its params declare name test_data's labels, to which no cluster is bound
 * (clustering accuracy matches them afresh on every table).
 */
static json_t *job_class_labels(const srv_job_row *j, const json_t *params, uint32_t k)
{
	if (strcmp(j->trainer, "slmc") == 0)
		return NULL;
	return srv_job_class_labels(params, k);
}

/* Whether a job's model_path names a blob in the database (a shared
 * database: model_blobs), not a file under some server's data directory. */
#define DB_MODEL_PREFIX "db:"

/* Reads the model a job's model_path names, from the database or from its
 * file, into *ret (malloc'd) and *ret_len: 0, -ENOENT when it is gone,
 * -EIO.  A file is read by its name under this server's data_dir/models,
 * whatever directory model_path spelled: the data directory may have been
 * copied or restored elsewhere since, and another directory is another
 * server's (srv_path_in_dir). */
static int read_model_bytes(srv_db *db, const char *data_dir, const char *path, uint8_t **ret,
			    size_t *ret_len)
{
	FILE *f = NULL;
	uint8_t *buf = NULL;
	char local[4400];
	long size = -1;
	int rc = -EIO;

	if (!strncmp(path, DB_MODEL_PREFIX, sizeof(DB_MODEL_PREFIX) - 1)) {
		rc = srv_store_model_blob_get(db, path, ret, ret_len);
		return rc == SRV_OK ? 0 : rc == SRV_NOT_FOUND ? -ENOENT : -EIO;
	}
	if (srv_path_in_dir(local, sizeof(local), data_dir, "models", path) < 0)
		return -EIO;
	f = fopen(local, "rb");
	if (!f) {
		rc = errno == ENOENT ? -ENOENT : -EIO;
		goto out;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && size <= DPG_MAX_MODEL_BYTES &&
	    fseek(f, 0, SEEK_SET) == 0)
		buf = malloc((size_t)size);
	if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size)
		goto out;
	*ret = buf;
	*ret_len = (size_t)size;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	if (f)
		fclose(f);
	return rc;
}

/* Reads and parses a job's model; answers and returns -1 when it cannot
 * (409 without a model). */
static int load_job_model(srv_request *req, srv_response *res, const srv_job_row *j,
			  trn_model **ret)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	acct_error err;
	int rc = -1;

	acct_error_init(&err);
	if (!j->model_path) {
		srv_problem(res, 409, NULL,
			    "the job has no model yet (it has not ended, or it ended before "
			    "training or while the server was down)",
			    NULL, json_pack("{s:s}", "state", j->state));
		return -1;
	}
	if (read_model_bytes(req->db, req->ctx->data_dir, j->model_path, &buf, &len) < 0 ||
	    trn_model_deserialize(buf, len, ret, &err) < 0)
		srv_problem(res, 500, NULL, "cannot read the model file", NULL, NULL);
	else
		rc = 0;
	free(buf);
	return rc;
}

static bool x_from_csv(const srv_request *req)
{
	return req->content_type && srv_media_type_is(req->content_type, "text/csv");
}

/* The rows of a predict request: a JSON body or a text/csv one. */
static int request_rows(srv_request *req, const json_t *features, size_t d, double **ret_x,
			size_t *ret_n, acct_error *err)
{
	json_t *body;
	int rc;

	if (x_from_csv(req))
		return srv_predict_csv_rows(req->raw_body, req->raw_len, features, d, ret_x, ret_n,
					    err);
	body = srv_parse_body(req->raw_body, req->raw_len, err);
	if (!body)
		return ACCT_EINVAL;
	rc = srv_predict_json_rows(body, d, ret_x, ret_n, err);
	json_decref(body);
	return rc;
}

/* The job's result and params, parsed (new references; NULL when absent). */
static void job_json_columns(const srv_job_row *j, json_t **ret_result, json_t **ret_params)
{
	*ret_result = srv_json_parse_text(j->result);
	*ret_params = srv_json_parse_text(j->params);
}

/*
 * The multiply-adds scoring one row with m takes: every weight once, a
 * convolution's at every position it is applied at (trn_conv_spec_work,
 * the unit of DP-SGD's work bound too), the input projection, and for a
 * scattering model its FFTs, about channels x pixels x log2(pixels).
 */
static double model_row_work(const trn_model *m)
{
	trn_model_info mi;
	double work;

	trn_model_info_get(m, &mi);
	work = mi.conv ? trn_conv_spec_work(mi.conv) : (double)mi.n_params;
	work += (double)mi.input_dim * mi.proj_dim;
	if (mi.feature_rule != TRN_FEATURE_RULE_NONE) {
		double pixels = (double)mi.scatter_rows * mi.scatter_cols;

		work += TRN_DPSGD_SCATTER_CHANNELS * pixels * log2(pixels + 1.0);
	}
	return work;
}

/* The predictions as text, written a row at a time: an answer of 10^6
 * scores built as JSON values took a value per score. */
static void reply_predictions(srv_response *res, const uint32_t *pred, const double *scores,
			      size_t n, size_t k, const json_t *labels)
{
	srv_buf text = {0};

	srv_predict_answer(&text, pred, scores, n, k, labels);
	if (text.failed) {
		free(text.s);
		srv_problem(res, 500, NULL, "the answer could not be built", NULL, NULL);
		return;
	}
	srv_reply_raw_json(res, 200, text.s);
}

/*
 * Whether n rows may be scored with m in one request: the answer's rows x
 * classes scores within DPG_MAX_JSON_NUMBERS, and the rows' multiply-adds
 * within DPG_MAX_PREDICT_WORK, since the scoring runs on an HTTP thread
 * and rows x model size, not rows, is what holds it.  Returns 0, or
 * ACCT_EUNSUPPORTED naming `where` with the most rows this model takes.
 */
static int rows_fit_model(const trn_model *m, size_t n, const char *where, acct_error *err)
{
	size_t k = trn_model_num_classes(m);
	double row_work = model_row_work(m);
	size_t most = (size_t)floor((double)DPG_MAX_PREDICT_WORK / row_work);

	if (n > DPG_MAX_JSON_NUMBERS / k)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "at most %zu rows in one request for a model of %zu classes "
				      "(%ld scores in an answer)",
				      (size_t)DPG_MAX_JSON_NUMBERS / k, k, DPG_MAX_JSON_NUMBERS);
	if (n > most)
		return acct_error_set(err, ACCT_EUNSUPPORTED, where,
				      "at most %zu rows in one request for this model (%.0f "
				      "multiply-adds a row, %lld in one request)",
				      most, row_work, (long long)DPG_MAX_PREDICT_WORK);
	return 0;
}

int srv_h_job_predict(srv_request *req, srv_response *res)
{
	srv_job_row j;
	trn_model *m = NULL;
	json_t *result = NULL, *params = NULL, *labels = NULL;
	double *x = NULL, *scores = NULL;
	uint32_t *pred = NULL;
	size_t n = 0, d, k;
	acct_error err;
	int rc;

	acct_error_init(&err);
	if (!srv__load_visible_job(req, res, &j))
		return 0;
	if (!(req->content_type && srv_media_type_is(req->content_type, "text/csv")) &&
	    !srv_json_content_type(req->content_type)) {
		srv_problem(res, 415, NULL, "the body must be application/json or text/csv", NULL,
			    NULL);
		goto out;
	}
	if (load_job_model(req, res, &j, &m) < 0)
		goto out;
	job_json_columns(&j, &result, &params);
	d = trn_model_input_dim(m);
	k = trn_model_num_classes(m);
	rc = request_rows(req, json_object_get(result, "features"), d, &x, &n, &err);
	if (rc >= 0)
		rc = rows_fit_model(m, n, x_from_csv(req) ? "/csv" : "/rows", &err);
	if (rc < 0) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	pred = malloc(sizeof(*pred) * n);
	scores = malloc(sizeof(*scores) * n * k);
	rc = pred && scores ? srv_predict(m, x, n, x_from_csv(req) ? "/csv" : "/rows", pred,
					  scores, &err) : ACCT_ENOMEM;
	if (rc == ACCT_EUNSUPPORTED) {
		srv_problem_from_error(res, &err);
		goto out;
	}
	if (rc < 0) {
		srv_problem(res, 500, NULL, "cannot score the rows", NULL, NULL);
		goto out;
	}
	labels = job_class_labels(&j, params, (uint32_t)k);
	reply_predictions(res, pred, scores, n, k, labels);
out:
	json_decref(labels);
	json_decref(result);
	json_decref(params);
	free(x);
	free(pred);
	free(scores);
	trn_model_free(m);
	srv__job_row_clear(&j);
	return 0;
}

/* A named block of weights: {"name", "shape": [rows(, cols)], "values"}. */
static json_t *weights_json(const char *name, const double *v, size_t rows, size_t cols)
{
	json_t *values = json_array();
	json_t *shape = cols ? json_pack("[I, I]", (json_int_t)rows, (json_int_t)cols) :
			       json_pack("[I]", (json_int_t)rows);
	size_t n = rows * (cols ? cols : 1);

	for (size_t i = 0; values && i < n; i++)
		if (json_array_append_new(values, json_real(v[i])) < 0)
			break;
	return json_pack("{s:s, s:o*, s:o*}", "name", name, "shape", shape, "values", values);
}

/* The dense layers of a model, in the binary format's order, from params
 * (the first dense weight); a convolutional model's hidden layer is named
 * by its conv activation (hidden_act), since no dense code names the
 * tempered sigmoid. */
static json_t *layers_json(const trn_model_info *mi, const double *params, const char *hidden_act)
{
	json_t *layers = json_array();
	const double *p = params;
	char wname[16], bname[16];

	for (uint32_t k = 1; layers && k <= mi->n_layers; k++) {
		size_t in = mi->widths[k - 1], out = mi->widths[k];
		const char *act = hidden_act && k < mi->n_layers ?
					  hidden_act :
					  trn_activation_name(mi->activations[k - 1]);

		snprintf(wname, sizeof(wname), "W%u", k);
		snprintf(bname, sizeof(bname), "b%u", k);
		json_array_append_new(layers,
				      json_pack("{s:I, s:I, s:s, s:o*, s:o*}", "in", (json_int_t)in,
						"out", (json_int_t)out, "activation",
						act ? act : "identity", "weight",
						weights_json(wname, p, out, in), "bias",
						weights_json(bname, p + out * in, out, 0)));
		p += out * in + out;
	}
	return layers;
}

/*
 * A convolutional model's blocks (model file version 4, trn.h): the image,
 * the activation, and per block its kernel K (shape [out, in, k, k]) and
 * bias; *ret_dense the first dense weight after them.
 */
static json_t *conv_json(const trn_model_info *mi, const double **ret_dense)
{
	const trn_conv_spec *s = mi->conv;
	const double *p = mi->params;
	json_t *blocks = json_array(), *act;
	uint32_t c_in = s->channels, side = s->side;
	char kname[16], bname[16];

	act = s->act == TRN_CONV_TANH ?
		      json_pack("{s:s}", "name", "tanh") :
		      json_pack("{s:s, s:f, s:f, s:f}", "name", "tempered_sigmoid", "s", s->ts_scale,
				"T", s->ts_temp, "o", s->ts_offset);
	for (uint32_t l = 0; blocks && l < s->n_conv; l++) {
		size_t k = s->kernel[l], out = s->conv_channels[l], nw = out * c_in * k * k;
		json_t *w;

		snprintf(kname, sizeof(kname), "K%u", l + 1);
		snprintf(bname, sizeof(bname), "c%u", l + 1);
		w = weights_json(kname, p, out, c_in * k * k);
		json_object_set_new(w, "shape", json_pack("[I, I, I, I]", (json_int_t)out,
							  (json_int_t)c_in, (json_int_t)k,
							  (json_int_t)k));
		json_array_append_new(blocks,
				      json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:o*, s:o*}", "in",
						(json_int_t)c_in, "out", (json_int_t)out, "kernel",
						(json_int_t)k, "side", (json_int_t)side, "padding",
						"same", "pool", "average_2x2", "weight", w, "bias",
						weights_json(bname, p + nw, out, 0)));
		p += nw + out;
		c_in = (uint32_t)out;
		side /= 2;
	}
	*ret_dense = p;
	return json_pack("{s:{s:I, s:I}, s:o*, s:o*}", "image", "channels",
			 (json_int_t)s->channels, "side", (json_int_t)s->side, "activation", act,
			 "blocks", blocks);
}

/* The model's parts as JSON (trn_model_info): what reproduces its
 * predictions without the binary file. */
static json_t *model_parts_json(const trn_model *m)
{
	trn_model_info mi;
	const double *dense;
	json_t *o, *conv = NULL;

	trn_model_info_get(m, &mi);
	dense = mi.params;
	if (mi.conv)
		conv = conv_json(&mi, &dense);
	o = json_pack("{s:I, s:I, s:{s:s, s:f}, s:o, s:o*}", "input_dim", (json_int_t)mi.input_dim,
		      "num_classes", (json_int_t)trn_model_num_classes(m), "input_rule", "name",
		      trn_input_rule_name(mi.input_rule), "scale", mi.input_scale, "widths",
		      json_array(), "layers",
		      layers_json(&mi, dense, mi.conv ? trn_conv_act_name(mi.conv->act) : NULL));
	if (o && conv)
		json_object_set_new(o, "convolution", conv);
	else
		json_decref(conv);
	for (uint32_t k = 0; o && k <= mi.n_layers; k++)
		json_array_append_new(json_object_get(o, "widths"), json_integer(mi.widths[k]));
	if (o)
		json_object_set_new(o, "projection",
				    mi.proj_dim ? weights_json("V", mi.proj, mi.input_dim, mi.proj_dim) :
						  json_null());
	if (o && mi.feature_rule == TRN_FEATURE_RULE_SCATTER_GROUPNORM)
		json_object_set_new(o, "feature_transform",
				    json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "name",
					      "scatter_groupnorm", "rows", (json_int_t)mi.scatter_rows,
					      "cols", (json_int_t)mi.scatter_cols, "j",
					      (json_int_t)mi.scatter_j, "l", (json_int_t)mi.scatter_l,
					      "groups", (json_int_t)mi.scatter_groups));
	return o;
}

/* GET /v1/jobs/{id}/model?format=json: the model's parts beside the job's
 * event and params. */
static int job_model_json(srv_request *req, srv_response *res, const srv_job_row *j)
{
	trn_model *m = NULL;
	json_t *result, *params, *labels, *features, *o, *head;
	trn_model_info mi;
	size_t numbers;
	uint32_t k;

	if (load_job_model(req, res, j, &m) < 0)
		return 0;
	trn_model_info_get(m, &mi);
	numbers = mi.n_params + (size_t)mi.input_dim * mi.proj_dim;
	if (numbers > DPG_MAX_JSON_NUMBERS) {
		char detail[160];

		snprintf(detail, sizeof(detail),
			 "a model of more than %ld numbers (this one has %zu) is served in the "
			 "binary format only", DPG_MAX_JSON_NUMBERS, numbers);
		srv_problem(res, 422, NULL, detail, "format", NULL);
		trn_model_free(m);
		return 0;
	}
	job_json_columns(j, &result, &params);
	k = trn_model_num_classes(m);
	labels = job_class_labels(j, params, k);
	if (!labels) {
		labels = json_array();
		for (uint32_t c = 0; labels && c < k; c++)
			json_array_append_new(labels, json_integer(c));
	}
	features = json_object_get(result, "features");
	head = json_pack("{s:s, s:i, s:O, s:o*, s:{s:s, s:s, s:s, s:o*, s:O}}", "format",
			 "dpgate-model-json", "version", 1, "features",
			 features ? features : json_null(), "classes", labels, "job", "id", j->id,
			 "dataset", j->dataset_id, "trainer", j->trainer, "event",
			 srv_json_parse_text(j->event), "params", params ? params : json_null());
	o = model_parts_json(m);
	if (!head || !o || json_object_update(o, head) < 0) {
		json_decref(o);
		o = NULL;
	}
	srv_json_reply(res, 200, o);
	json_decref(head);
	json_decref(result);
	json_decref(params);
	trn_model_free(m);
	return 0;
}

int srv_h_job_model(srv_request *req, srv_response *res)
{
	srv_job_row j;
	const char *format;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	if (!srv__load_visible_job(req, res, &j))
		return 0;
	format = req->query(req->conn, "format");
	if (format && strcmp(format, "json") != 0 && strcmp(format, "binary") != 0) {
		srv_problem(res, 400, NULL, "'format' must be binary or json", "format", NULL);
		goto out;
	}
	/* The same model, its parts as JSON beside the job's event and params. */
	if (format && strcmp(format, "json") == 0) {
		job_model_json(req, res, &j);
		goto out;
	}
	/* A cancelled or failed job's model is delivered too: it saw no more
	 * steps than the event its reservation committed in full covers
	 * (result.steps_done says how many). */
	if (!j.model_path) {
		srv_problem(res, 409, NULL,
			    "the job kept no model (it has not ended, or it ended before training "
			    "or while the server was down)",
			    NULL, json_pack("{s:s}", "state", j.state));
		goto out;
	}
	rc = read_model_bytes(req->db, req->ctx->data_dir, j.model_path, &buf, &len);
	if (rc < 0) {
		srv_problem(res, 500, NULL,
			    rc == -ENOENT ? "the model file is missing" : "cannot read the model file",
			    NULL, NULL);
		goto out;
	}
	res->body = (char *)buf;
	res->len = len;
	res->status = 200;
	res->content_type = "application/octet-stream";
out:
	srv__job_row_clear(&j);
	return 0;
}
