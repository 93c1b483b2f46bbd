/*
 * api_data_routes.c: the data linked to a dataset: PUT .../data (a builtin
 * link here, a CSV table through srv_data_put_csv) and GET .../data, which
 * shows of the link only what the caller's role may see.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "api_jobs.h"
#include "api_jobs_internal.h"
#include "json.h"
#include "api_mech_routes.h"

/* Reads the number of items from an IDX file's header (gzip or plain). */
static int idx_count(const char *path, int64_t *ret)
{
	gzFile f = gzopen(path, "rb");
	unsigned char h[8];
	int n;

	if (!f)
		return -1;
	n = gzread(f, h, sizeof(h));
	gzclose(f);
	if (n != (int)sizeof(h) || h[0] != 0 || h[1] != 0 || h[2] != 0x08)
		return -1;
	*ret = ((int64_t)h[4] << 24) | ((int64_t)h[5] << 16) | ((int64_t)h[6] << 8) | h[7];
	return 0;
}

/* Parses a builtin link's body; the only builtin data set is
 * Fashion-MNIST.  False when it answered. */
static bool parse_builtin(srv_request *req, srv_response *res, json_t **ret_body,
			  const char **ret_builtin)
{
	static const char *const keys[] = {"builtin", NULL};
	acct_error err;
	json_t *body;
	const char *builtin = NULL;

	acct_error_init(&err);
	body = srv_parse_body(req->raw_body, req->raw_len, &err);
	if (body && srv_json_only_keys(body, "", keys, &err) >= 0 &&
	    srv_json_string(body, "", "builtin", SRV_REQUIRED, 64, &builtin, &err) >= 0 &&
	    strcmp(builtin, "fashion-mnist") != 0)
		acct_error_set(&err, ACCT_EINVAL, "/builtin", "the only builtin data set is \"fashion-mnist\"");
	if (err.code != ACCT_OK) {
		json_decref(body);
		srv_problem_from_error(res, &err);
		return false;
	}
	*ret_body = body;
	*ret_builtin = builtin;
	return true;
}

static void put_builtin(srv_request *req, srv_response *res, const srv_dataset *ds)
{
	json_t *body = NULL;
	const char *builtin = NULL;
	char path[512], *old_table = NULL;
	int64_t rows = 0;
	int rc;

	if (!parse_builtin(req, res, &body, &builtin))
		return;
	snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", TRN_FASHION_MNIST_DIR);
	if (idx_count(path, &rows) < 0) {
		srv_problem(res, 422, NULL,
			    "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)",
			    "/builtin", NULL);
		goto out;
	}
	/* A hosted table this link replaces is removed after the commit
	 * (srv_data_put_csv's order). */
	rc = srv__data_link_builtin(req->db, ds->id, builtin, TRN_FASHION_MNIST_DIR, rows,
				   req->who->key_id, &old_table);
	if (rc == SRV_CONFLICT)
		srv__reply_data_in_use(res);
	else if (rc != SRV_OK)
		srv_problem(res, 503, NULL, "cannot record the data link", NULL, NULL);
	if (rc != SRV_OK)
		goto out;
	srv__table_file_drop(req->ctx->tables, req->ctx->data_dir, old_table, ds->id);
	free(old_table);
	srv_json_reply(res, 200, json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "dataset", ds->id, "kind",
					   "builtin", "builtin", builtin, "rows", (json_int_t)rows,
					   "row_count", "public", "schema", "declared"));
out:
	json_decref(body);
}

int srv_h_data_put(srv_request *req, srv_response *res)
{
	srv_dataset ds;

	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	/* As PATCH: an archived dataset does not change.  (Archiving between
	 * this read and the write below links data nothing can query.) */
	if (ds.archived) {
		srv_problem(res, 409, NULL, "the dataset is archived; its data cannot change", NULL,
			    NULL);
		return 0;
	}
	if (req->content_type && srv_media_type_is(req->content_type, "text/csv"))
		return srv_data_put_csv(req, res, &ds);
	/* Any other type than the JSON ones the JSON routes take is 415. */
	if (!srv_json_content_type(req->content_type)) {
		srv_problem(res, 415, NULL,
			    "the body must be text/csv (a table) or application/json (a builtin link)",
			    NULL, NULL);
		return 0;
	}
	put_builtin(req, res, &ds);
	return 0;
}

/* GET .../data?format=csv: a public dataset's table as uploaded.  A
 * private dataset's rows are never answered, to any role. */
static int data_csv(srv_request *req, srv_response *res)
{
	srv_dataset ds;
	char *path = NULL, *columns = NULL;
	int rc = SRV_DB_ERROR;

	if (!srv__dataset_or_reply(req, res, &ds))
		return 0;
	if (!ds.is_public) {
		srv_problem(res, 403, NULL,
			    "the rows of a private dataset are never answered; only a public "
			    "dataset's table can be read back", "format", NULL);
		return 0;
	}
	/* An upload that replaces the table removes the old file (or blob): a
	 * reader that finds none reads the link again, once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		free(path);
		free(columns);
		path = columns = NULL;
		rc = srv_store_table_link_get(req->db, ds.id, &path, &columns, NULL);
		if (rc != SRV_OK ||
		    srv__table_read_linked(req->db, req->ctx->data_dir, ds.id, path, &res->body,
					   &res->len) == 0)
			break;
		rc = SRV_DB_ERROR;
	}
	if (rc == SRV_NOT_FOUND) {
		srv_problem(res, 404, NULL, "no table is linked to this dataset", NULL, NULL);
	} else if (rc != SRV_OK) {
		srv_problem(res, 503, NULL, "cannot read the table", NULL, NULL);
	} else {
		res->status = 200;
		res->content_type = "text/csv";
	}
	free(path);
	free(columns);
	return 0;
}

int srv_h_data_get(srv_request *req, srv_response *res)
{
	srv_data_link link;
	json_t *o = NULL;
	bool admin = req->who && req->who->role == SRV_ROLE_ADMIN;
	const char *format = req->query(req->conn, "format");
	int rc;

	if (format && strcmp(format, "csv") == 0)
		return data_csv(req, res);
	if (format && strcmp(format, "json") != 0) {
		srv_problem(res, 400, NULL, "'format' must be json or csv", "format", NULL);
		return 0;
	}
	rc = srv__data_link_get(req->db, req->params[0], &link);

	if (rc == SRV_DB_ERROR) {
		srv_problem(res, 503, NULL, "cannot read the data link", NULL, NULL);
		return 0;
	}
	if (rc != SRV_OK) {
		srv_problem(res, 404, NULL, "no data is linked to this dataset", NULL, NULL);
		return 0;
	}
	/* Under add/remove neighbours the row count is a function of the
	 * private rows, and so are kinds inferred from the values: either is
	 * shown to a reader other than an admin (who uploads the data) only
	 * when the upload declared it. */
	o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "dataset", req->params[0], "kind", link.kind,
		      "row_count", link.rows_public ? "public" : "private", "schema",
		      link.schema_declared ? "declared" : "inferred", "created_at", link.created_at);
	if (o && (link.rows_public || admin))
		json_object_set_new(o, "rows", json_integer(link.rows));
	if (o && (link.schema_declared || admin)) {
		json_object_set_new(o, "columns", srv_json_parse_text(link.columns));
	}
	/* The file's size depends on the values (their digits): an admin sees
	 * it; a viewer or analyst does not. */
	if (o && admin)
		json_object_set_new(o, "bytes", json_integer(link.bytes));
	if (o && link.builtin[0])
		json_object_set_new(o, "builtin", json_string(link.builtin));
	free(link.columns);
	if (!o) {
		srv_problem(res, 404, NULL, "no data is linked to this dataset", NULL, NULL);
		return 0;
	}
	srv_json_reply(res, 200, o);
	return 0;
}
