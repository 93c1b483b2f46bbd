/*
 * test_pg_tables.c: hosted tables on a shared database.  Two dpgate
 * servers, A and B, on one PostgreSQL database (a throwaway cluster,
 * tests/pg/pg_cluster.h), each with a data directory of its own: a table
 * uploaded through one is served by the other, from the database.
 *
 *   - a table uploaded through A: B shows the same metadata, answers
 *     charged queries on it, reads a public table back byte for byte, and
 *     runs a training job over it;
 *   - the table replaced through B: A answers on the new one;
 *   - a bad upload through either changes nothing on both.
 *
 * Noisy answers are checked against the table's true count and sum, known
 * here, with a margin the noise passes with negligible probability: at
 * epsilon 1 a count has discrete Laplace noise of scale 1 (sensitivity 1),
 * a sum over values clamped to [0, 1] the same (sensitivity max(|lo|,
 * |hi|) = 1 under add/remove), and Pr[|Z| >= MARGIN] <= 2 e^-MARGIN
 * (about 4e-22 at MARGIN 50).  The two tables' counts and sums differ by
 * far more than 2 MARGIN, so an answer says which table it was computed on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "pg_rig.h"

#define MARGIN 50.0
#define OLD_ROWS 200 /* the first table: x = 0 on every row */
#define NEW_ROWS 600 /* its replacement: x = 1 on every row */
#define COLUMNS "columns=x:numeric,y:numeric&row_count=public"

/* A table of `rows` rows "x,y" with x = `x` and y alternating 0 and 1
 * (two classes for a job); the caller frees it. */
static char *make_table(int rows, int x)
{
	size_t cap = 16 + (size_t)rows * 8, n;
	char *csv = malloc(cap);

	cr_assert(csv);
	n = (size_t)snprintf(csv, cap, "x,y\n");
	for (int i = 0; i < rows; i++)
		n += (size_t)snprintf(csv + n, cap - n, "%d,%d\n", x, i % 2);
	return csv;
}

/* PUTs csv as dataset id's table through s, with the declared schema;
 * returns the answer's status. */
static long put_table(const dpg_server *s, const char *id, const char *csv)
{
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	char path[256];
	dpg_resp r;
	long status;

	snprintf(path, sizeof(path), "/v1/datasets/%s/data?" COLUMNS, id);
	cr_assert_eq(dpg_http(s, "PUT", path, s->admin_key, csv, strlen(csv), hdr, &r), 0);
	status = r.status;
	dpg_resp_free(&r);
	return status;
}

/* The admin's view of dataset id's data link through s (caller decrefs). */
static json_t *data_link(const dpg_server *s, const char *id)
{
	char path[256];

	snprintf(path, sizeof(path), "/v1/datasets/%s/data", id);
	return dpg_get_json(s, s->admin_key, path);
}

/* A charged query through s; asserts 201 and returns its output. */
static double query(const dpg_server *s, const char *id, const char *body)
{
	char path[256];
	dpg_resp r;
	double out;

	snprintf(path, sizeof(path), "/v1/datasets/%s/queries", id);
	r = dpg_call(s, "POST", path, s->admin_key, body);
	cr_assert_eq(r.status, 201, "port %d: %s", s->port, r.body);
	out = dpg_num(r.json, "output");
	dpg_resp_free(&r);
	return out;
}

/* Both servers answer a count and a sum of x on the table with `rows`
 * rows whose x are all `x`, and show the same metadata: `rows` rows. */
static void assert_table(struct dpg_pg_pair *r, const char *id, int rows, int x)
{
	static const char count[] = "{\"query\":\"count\",\"epsilon\":1}";
	static const char sum[] = "{\"query\":\"sum\",\"column\":\"x\",\"lo\":0,\"hi\":1,\"epsilon\":1}";
	const dpg_server *both[] = {&r->a, &r->b};
	json_t *la = data_link(&r->a, id), *lb = data_link(&r->b, id);

	cr_assert(json_equal(la, lb), "A and B show different links");
	cr_assert_eq(dpg_num(la, "rows"), rows);
	json_decref(la);
	json_decref(lb);
	for (int i = 0; i < 2; i++) {
		double c = query(both[i], id, count), s = query(both[i], id, sum);

		cr_assert_lt(fabs(c - rows), MARGIN, "server %c counts %g, not about %d", "AB"[i],
			     c, rows);
		cr_assert_lt(fabs(s - (double)rows * x), MARGIN, "server %c sums %g, not about %d",
			     "AB"[i], s, rows * x);
	}
}

Test(pg_tables, a_table_is_served_by_every_server, .timeout = 300)
{
	struct dpg_pg_pair r;
	char *old = make_table(OLD_ROWS, 0), *new = make_table(NEW_ROWS, 1);

	dpg_pg_pair_start(&r);
	dpg_make_dataset(&r.a, "t", 1000, 1e-5, "basic");
	cr_assert_eq(put_table(&r.a, "t", old), 200);
	assert_table(&r, "t", OLD_ROWS, 0);

	cr_assert_eq(put_table(&r.b, "t", new), 200);
	assert_table(&r, "t", NEW_ROWS, 1);
	free(old);
	free(new);
	dpg_pg_pair_free(&r);
}

Test(pg_tables, a_bad_upload_through_either_changes_nothing, .timeout = 300)
{
	/* A declared numeric column with a word in it: refused (400). */
	static const char bad[] = "x,y\n1,0\nabc,1\n";
	struct dpg_pg_pair r;
	char *good = make_table(OLD_ROWS, 1);
	json_t *before, *after;

	dpg_pg_pair_start(&r);
	dpg_make_dataset(&r.a, "t", 1000, 1e-5, "basic");
	cr_assert_eq(put_table(&r.b, "t", good), 200);
	before = data_link(&r.a, "t");
	cr_assert_eq(put_table(&r.a, "t", bad), 400);
	cr_assert_eq(put_table(&r.b, "t", bad), 400);
	after = data_link(&r.b, "t");
	cr_assert(json_equal(before, after), "a refused upload changed the link");
	assert_table(&r, "t", OLD_ROWS, 1);
	json_decref(before);
	json_decref(after);
	free(good);
	dpg_pg_pair_free(&r);
}

Test(pg_tables, a_public_table_reads_back_the_same_bytes, .timeout = 300)
{
	const char *hdr[] = {"Content-Type: text/csv", NULL};
	struct dpg_pg_pair r;
	char *csv = make_table(OLD_ROWS, 1);
	dpg_resp res;

	dpg_pg_pair_start(&r);
	dpg_expect_status(&r.a, "POST", "/v1/datasets", r.a.admin_key,
			  "{\"id\":\"pub\",\"public\":true}", 201);
	cr_assert_eq(put_table(&r.a, "pub", csv), 200);
	cr_assert_eq(dpg_http(&r.b, "GET", "/v1/datasets/pub/data?format=csv", r.b.admin_key, NULL,
			      0, hdr, &res), 0);
	cr_assert_eq(res.status, 200, "%s", res.body);
	cr_assert_eq(res.len, strlen(csv));
	cr_assert(memcmp(res.body, csv, res.len) == 0, "B read back other bytes than A took");
	dpg_resp_free(&res);
	free(csv);
	dpg_pg_pair_free(&r);
}

/* Runs `job` on dataset id through s to its end; asserts it succeeded and
 * returns the number of rows it trained on (result.examples_used: every
 * row of the table it read, as the job sets no max_train_examples). */
static double job_rows(const dpg_server *s, const char *id, const char *job)
{
	static const char *const done[] = {"succeeded", "failed", "cancelled", NULL};
	char job_id[96], *text;
	json_t *j;
	double n;

	dpg_start_job(s, id, job, job_id, sizeof(job_id));
	j = dpg_job_wait(s, job_id, done, 240);
	text = json_dumps(j, JSON_COMPACT);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s", text);
	n = dpg_num(j, "result.examples_used");
	free(text);
	json_decref(j);
	return n;
}

Test(pg_tables, a_job_reads_a_table_uploaded_through_another_server, .timeout = 300)
{
	static const char job[] =
		"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"y\","
		"\"classes\":2,\"epochs\":1,\"lot_size\":50,\"noise_multiplier\":2,"
		"\"clip_norm\":1,\"learning_rate\":0.1}}";
	struct dpg_pg_pair r;
	char *old = make_table(OLD_ROWS, 0), *new = make_table(NEW_ROWS, 1);

	dpg_pg_pair_start(&r);
	dpg_make_dataset(&r.a, "t", 100, 1e-5, "rdp");
	/* B keeps the parse of its own upload; a job on A has only the
	 * database to read it from. */
	cr_assert_eq(put_table(&r.b, "t", old), 200);
	cr_assert_eq(job_rows(&r.a, "t", job), OLD_ROWS);
	/* Replaced through A: B's kept parse of the old table is not used. */
	cr_assert_eq(put_table(&r.a, "t", new), 200);
	cr_assert_eq(job_rows(&r.b, "t", job), NEW_ROWS);
	free(old);
	free(new);
	dpg_pg_pair_free(&r);
}
