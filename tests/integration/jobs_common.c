/*
 * jobs_common.c: the helpers the trainer job tests share (jobs_common.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "jobs_common.h"

/* One row of jobs_common_two_class_csv: features x, label y, in the order
 * the header `columns` names them.  The bytes written. */
static size_t row_text(char *buf, size_t size, const char *columns, const double x[3], int y)
{
	static const char *const features[] = {"a", "b", "noise"};
	size_t len = 0;

	for (const char *c = columns; *c;) {
		size_t w = strcspn(c, ",");
		const char *sep = c[w] ? "," : "\n";
		size_t k = 0;

		while (k < 3 && !(strlen(features[k]) == w && strncmp(c, features[k], w) == 0))
			k++;
		cr_assert(k < 3 || (w == 1 && *c == 'y'), "unknown column in %s", columns);
		len += k < 3 ? (size_t)snprintf(buf + len, size - len, "%.6f%s", x[k], sep) :
			       (size_t)snprintf(buf + len, size - len, "%d%s", y, sep);
		c += w + (c[w] != '\0');
	}
	return len;
}

char *jobs_common_two_class_csv(size_t n, unsigned seed, const char *columns)
{
	size_t size = 64 + n * 64, len;
	char *csv = malloc(size);
	double (*v)[3] = malloc(sizeof(*v) * n);
	int *y = malloc(sizeof(int) * n);

	cr_assert(csv && v && y);
	dpg_two_class_rows(n, seed, v, y);
	len = (size_t)snprintf(csv, size, "%s\n", columns);
	for (size_t i = 0; i < n; i++)
		len += row_text(csv + len, size - len, columns, v[i], y[i]);
	free(v);
	free(y);
	return csv;
}

void jobs_common_make_public(const dpg_server *s, const char *id)
{
	char body[160];

	snprintf(body, sizeof(body), "{\"id\":\"%s\",\"public\":true}", id);
	dpg_expect_status(s, "POST", "/v1/datasets", s->admin_key, body, 201);
}

void jobs_common_expect_refusal(dpg_resp *r, long status, const char *field, const char *what)
{
	cr_assert_eq(r->status, status, "%s: %ld %s", what, r->status, r->body);
	cr_assert_str_eq(json_string_value(json_object_get(r->json, "field")), field, "%s",
			 r->body);
	dpg_resp_free(r);
}

void jobs_common_params(char *buf, size_t size, const char *over, const char *defaults)
{
	size_t n = strlen(over) + strlen(defaults) + 3, len;
	char *text = malloc(n), *out;
	json_t *o, *d;

	cr_assert_not_null(text);
	snprintf(text, n, "{%s}", over);
	o = json_loads(text, 0, NULL);
	snprintf(text, n, "{%s}", defaults);
	d = json_loads(text, 0, NULL);
	cr_assert(o && d, "params that are not JSON members: %s / %s", over, defaults);
	cr_assert_eq(json_object_update_missing(o, d), 0);
	out = json_dumps(o, JSON_COMPACT);
	cr_assert_not_null(out);
	/* The members, without the object's braces. */
	len = strlen(out) - 2;
	cr_assert_lt(len, size, "the params do not fit");
	memcpy(buf, out + 1, len);
	buf[len] = '\0';
	free(out);
	free(text);
	json_decref(o);
	json_decref(d);
}

dpg_resp jobs_common_submit(const dpg_server *s, const char *dataset, const char *trainer,
			    const char *params, bool dry_run)
{
	size_t size = strlen(params) + 256;
	char *body = malloc(size), path[160];
	dpg_resp r;

	cr_assert_not_null(body);
	snprintf(body, size, "{\"trainer\":\"%s\",%s\"params\":{%s}}", trainer,
		 dry_run ? "\"dry_run\":true," : "", params);
	snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", dataset);
	r = dpg_call(s, "POST", path, s->admin_key, body);
	free(body);
	return r;
}

json_t *jobs_common_run(const dpg_server *s, const char *dataset, const char *trainer,
			const char *params, char *job_id, size_t size, double seconds)
{
	dpg_resp r = jobs_common_submit(s, dataset, trainer, params, false);
	json_t *job;

	cr_assert_eq(r.status, 202, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "trainer")), trainer);
	snprintf(job_id, size, "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	job = dpg_job_succeeded(s, job_id, seconds);
	return job;
}

void jobs_common_expect_nothing_written(const dpg_server *s, const char *dataset)
{
	dpg_budget b = dpg_budget_of(s, dataset);

	cr_assert_eq(dpg_count_rows(s->db, "SELECT count(*) FROM reservations"), 0);
	cr_assert_eq(dpg_count_rows(s->db, "SELECT count(*) FROM jobs"), 0);
	cr_assert_eq(b.spent_eps, 0.0);
	cr_assert_eq(b.ledger_rows, 0);
	cr_assert_eq(b.charges, 0);
}
