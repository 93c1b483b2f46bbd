/*
 * test_table.c: CSV parsing (types, quoting, limits, errors naming line and
 * column) and the table queries' output distributions and events.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "json.h"
#include "mech.h"
#include "test_util.h"

static mech_table *parse_ok(const char *csv, const mech_column_decl *decl, size_t nd)
{
	mech_table *t = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(mech_table_parse_csv(csv, strlen(csv), decl, nd, &t, &err), 0, "%s: %s",
		     err.where, err.text);
	return t;
}

Test(table, parses_types_quotes_and_line_ends)
{
	const char *csv = "age,city,\"note, quoted\"\r\n"
			  "31,Paris,\"said \"\"hi\"\"\"\r\n"
			  "45,\"New\nYork\",x\r\n"
			  "\n"
			  "27.5,Paris,\r\n";
	mech_table *t = parse_ok(csv, NULL, 0);

	cr_assert_eq(mech_table_rows(t), 3);
	cr_assert_eq(mech_table_columns(t), 3);
	cr_assert_str_eq(mech_table_column_name(t, 2), "note, quoted");
	cr_assert_eq(mech_table_column_kind(t, 0), MECH_COL_NUMERIC);
	cr_assert_eq(mech_table_column_kind(t, 1), MECH_COL_CATEGORICAL);
	cr_assert_eq(mech_table_column_kind(t, 2), MECH_COL_CATEGORICAL);
	mech_table_free(t);
	/* A UTF-8 byte-order mark before the header is not part of a name. */
	t = parse_ok("\xef\xbb\xbf" "age,city\n31,Paris\n", NULL, 0);
	cr_assert_str_eq(mech_table_column_name(t, 0), "age");
	cr_assert_eq(mech_table_rows(t), 1);
	mech_table_free(t);
	/* A numeric-looking column declared categorical stays categorical. */
	{
		mech_column_decl decl[] = {{"zip", MECH_COL_CATEGORICAL}, {"n", MECH_COL_NUMERIC}};

		t = parse_ok("zip,n\n007,1\n75001,2\n", decl, 2);
		cr_assert_eq(mech_table_column_kind(t, 0), MECH_COL_CATEGORICAL);
		mech_table_free(t);
	}
}

/*
 * A declaration named "*" gives its kind to every header column not named;
 * a column named still takes its own, and one named but absent is still
 * an error (the wildcard is not a column of the header).
 */
Test(table, a_wildcard_declares_every_column_not_named)
{
	static const mech_column_decl decl[] = {{"city", MECH_COL_CATEGORICAL},
						{"*", MECH_COL_NUMERIC}};
	static const mech_column_decl all_text[] = {{"*", MECH_COL_CATEGORICAL}};
	static const mech_column_decl absent[] = {{"zip", MECH_COL_NUMERIC},
						  {"*", MECH_COL_NUMERIC}};
	mech_table *t = parse_ok("age,city,zip\n31,Paris,75001\n45,Lyon,69001\n", decl, 2);
	acct_error err;

	cr_assert_eq(mech_table_column_kind(t, 0), MECH_COL_NUMERIC);
	cr_assert_eq(mech_table_column_kind(t, 1), MECH_COL_CATEGORICAL);
	cr_assert_eq(mech_table_column_kind(t, 2), MECH_COL_NUMERIC);
	mech_table_free(t);
	t = parse_ok("age,zip\n31,75001\n", all_text, 1);
	cr_assert_eq(mech_table_column_kind(t, 0), MECH_COL_CATEGORICAL);
	cr_assert_eq(mech_table_column_kind(t, 1), MECH_COL_CATEGORICAL);
	mech_table_free(t);
	/* Numeric by the wildcard: a text cell is refused at its line. */
	t = NULL;
	acct_error_init(&err);
	{
		const char *csv = "age,city\n31,Paris\nold,Lyon\n";

		cr_assert_eq(mech_table_parse_csv(csv, strlen(csv), decl, 2, &t, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, "/csv/line/3/age", "%s", err.text);
		cr_assert_null(t);
		csv = "age,city\n31,Paris\n";
		acct_error_init(&err);
		cr_assert_eq(mech_table_parse_csv(csv, strlen(csv), absent, 2, &t, &err), ACCT_EINVAL);
		cr_assert_str_eq(err.where, "/schema/0", "%s", err.text);
	}
}

Test(table, bad_csv_names_line_and_column)
{
	static const mech_column_decl decl[] = {{"a", MECH_COL_NUMERIC}, {"b", MECH_COL_CATEGORICAL}};
	static const struct {
		const char *csv;
		const mech_column_decl *decl;
		size_t nd;
		const char *where;
	} cases[] = {
		{"a,b\n1,x\n2\n", NULL, 0, "/csv/line/3"},                 /* ragged: short */
		{"a,b\n1,x\n2,y,z\n", NULL, 0, "/csv/line/3"},             /* ragged: long */
		{"a,b\n1,x\nseven,y\n", decl, 2, "/csv/line/3/a"},         /* text in numeric */
		{"a,b\n1,x\nnan,y\n", decl, 2, "/csv/line/3/a"},           /* NaN is not a number */
		{"a,b,c\n1,x,3\n", decl, 2, "/csv/line/1/c"},              /* unknown column */
		{"a\n1\n", decl, 2, "/schema/1"},                          /* declared, absent */
		{"a,a\n1,2\n", NULL, 0, "/csv/line/1/a"},                  /* duplicate */
		{"a,b\n", NULL, 0, "/csv"},                                /* no rows */
		{"", NULL, 0, "/csv"},
		{"a,b\n\"1,x\n", NULL, 0, "/csv/line/2"},                  /* unterminated quote */
		{"a,b\n1,x\n2,\"y\nz\n", NULL, 0, "/csv/line/3"},         /* ... opened on line 3 */
		{"a,b\n1,x\n2,\"y\"z\n", NULL, 0, "/csv/line/3"},         /* text after a quote */
		{"a,b\n1,x\n2,y\"z\n", NULL, 0, "/csv/line/3"},            /* quote mid-field */
		{"a,b\n\"1\n2\",x\n3,y\"\n", NULL, 0, "/csv/line/4"},   /* after a quoted LF */
		{"a,,b\n1,2,3\n", NULL, 0, "/csv/line/1"},                 /* empty name */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mech_table *t = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(mech_table_parse_csv(cases[i].csv, strlen(cases[i].csv), cases[i].decl,
						  cases[i].nd, &t, &err), ACCT_EINVAL, "case %zu", i);
		cr_assert_str_eq(err.where, cases[i].where, "case %zu: %s", i, err.text);
		cr_assert_null(t);
	}
}

/* A string literal and its length (some hold NUL). */
#define CSV(lit) lit, sizeof(lit) - 1

Test(table, text_must_be_utf8_without_nul)
{
	static const struct {
		const char *csv;
		size_t len;
		const char *where;
	} bad[] = {
		{CSV("q\xff,b\n1,2\n"), "/csv/line/1"},                /* stray byte in a name */
		{CSV("\xe9\n1\n"), "/csv/line/1"},                      /* Latin-1, not UTF-8 */
		{CSV("a,b\n1,\xed\xa0\x80\n"), "/csv/line/2"},          /* a surrogate */
		{CSV("a,b\n1,x\n2,\xc0\xaf\n"), "/csv/line/3"},         /* overlong */
		{CSV("a,b\n1,x\n2,\xe2\x82"), "/csv/line/3"},            /* cut short at the end */
		{CSV("a,b\n1,x\0y\n"), "/csv/line/2"},                  /* NUL in a field */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		mech_table *t = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(mech_table_parse_csv(bad[i].csv, bad[i].len, NULL, 0, &t, &err),
			     ACCT_EINVAL, "case %zu", i);
		cr_assert_str_eq(err.where, bad[i].where, "case %zu: %s", i, err.text);
		cr_assert_null(t);
	}
	{
		/* Names and categories in any script are fine. */
		static const char ok[] = "caf\xc3\xa9,\xe2\x82\xac\n1,\xf0\x9f\x98\x80\n2,x\n";
		mech_table *t = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(mech_table_parse_csv(ok, sizeof(ok) - 1, NULL, 0, &t, &err), 0, "%s",
			     err.text);
		mech_table_free(t);
	}
}

/*
 * Rows end at LF or CRLF.  A CR that no LF follows, outside quotes, is an
 * input error at its line (never an internal error, and never "need a
 * header row" for a file whose only line ends are CRs), with or without a
 * declared schema; inside a quoted field a CR is data.
 */
Test(table, bare_cr_is_refused_at_its_line)
{
	static const mech_column_decl decl[] = {{"a", MECH_COL_NUMERIC}, {"b", MECH_COL_NUMERIC}};
	static const struct {
		const char *csv;
		bool declared;
		const char *where;
	} bad[] = {
		{"a\n1\r2\n", false, "/csv/line/2"},                    /* one lone CR among LFs */
		{"a,b\n1,2\r3,4\n", false, "/csv/line/2"},
		{"a,b\n1,2\r3,4\n", true, "/csv/line/2"},
		{"a,b\r1,2\r3,4\r", false, "/csv/line/1"},              /* CR-only line ends */
		{"a,b\r1,2\r3,4\r", true, "/csv/line/1"},
		{"a,b\n1,2\n3,4\r", false, "/csv/line/3"},              /* a CR at the very end */
		{"a,b\r\n1,2\r\n\r3,4\r\n", false, "/csv/line/3"},      /* a CR-terminated blank line */
		{"a,b\n\"1\"\r2,3\n", false, "/csv/line/2"},            /* after a closing quote */
		{"a,b\n1,2\r\r\n", false, "/csv/line/2"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		mech_table *t = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(mech_table_parse_csv(bad[i].csv, strlen(bad[i].csv),
						  bad[i].declared ? decl : NULL, bad[i].declared ? 2 : 0,
						  &t, &err),
			     ACCT_EINVAL, "case %zu: %s", i, err.text);
		cr_assert_str_eq(err.where, bad[i].where, "case %zu: %s", i, err.text);
		cr_assert(strstr(err.text, "carriage return"), "case %zu: %s", i, err.text);
		cr_assert_null(t);
	}
	{
		/* Mixed LF and CRLF rows, and a CR inside quotes, are fine. */
		mech_table *t = parse_ok("a,b\r\n1,\"x\ry\"\n2,z\r\n", NULL, 0);

		cr_assert_eq(mech_table_rows(t), 2);
		cr_assert_eq(mech_table_category_count(t, 1), 2);
		cr_assert_str_eq(mech_table_category_name(t, 1, 0), "x\ry");
		mech_table_free(t);
	}
}

Test(table, column_limit)
{
	size_t cols = DPG_MAX_CSV_COLUMNS + 1, len = 0;
	char *csv = malloc(cols * 16 * 2 + 16);
	mech_table *t = NULL;
	acct_error err;

	for (size_t j = 0; j < cols; j++)
		len += (size_t)sprintf(csv + len, "%sc%zu", j ? "," : "", j);
	len += (size_t)sprintf(csv + len, "\n");
	for (size_t j = 0; j < cols; j++)
		len += (size_t)sprintf(csv + len, "%s1", j ? "," : "");
	acct_error_init(&err);
	cr_assert_eq(mech_table_parse_csv(csv, len, NULL, 0, &t, &err), ACCT_EINVAL);
	cr_assert(strstr(err.text, "columns"));
	free(csv);
}

/* A table of 200 rows: x = 1..200, g = "a" for x <= 50, "b" otherwise, "c"
 * never. */
static mech_table *sample_table(void)
{
	char *csv = malloc(200 * 16 + 16);
	size_t len = (size_t)sprintf(csv, "x,g\n");
	mech_table *t;

	for (int i = 1; i <= 200; i++)
		len += (size_t)sprintf(csv + len, "%d,%s\n", i, i <= 50 ? "a" : "b");
	t = parse_ok(csv, NULL, 0);
	free(csv);
	return t;
}

/* A table and the seeded stream its queries draw from, made and freed
 * together. */
struct table_draws {
	mech_table *t;
	mech_rng *r;
};

/* The table parsed from csv (sample_table() for NULL) and test_rng(tag). */
static struct table_draws table_draws_open(const char *csv, uint8_t tag)
{
	struct table_draws d = {csv ? parse_ok(csv, NULL, 0) : sample_table(), test_rng(tag)};

	return d;
}

static void table_draws_close(struct table_draws *d)
{
	mech_table_free(d->t);
	mech_rng_free(d->r);
}

/* One query of a hosted table, as a row of data: its kind and the
 * arguments of the mech_table_* call (those the kind does not take are
 * ignored). */
enum query_kind { Q_COUNT, Q_SUM, Q_MEAN, Q_HISTOGRAM, Q_QUANTILE };

struct query {
	enum query_kind kind;
	const char *column;
	double q, lo, hi, epsilon;
	acct_neighbor neighbor;
	const char *const *cats;
	size_t n_cats;
};

/* Runs `q` on `t`: a count or a histogram into ints, the others into
 * *real.  Returns the mech_table_* call's code, err reset before it. */
static int run_query(mech_rng *r, const mech_table *t, const struct query *q, double *real,
		     int64_t *ints, acct_event **ev, acct_error *err)
{
	acct_error_init(err);
	switch (q->kind) {
	case Q_COUNT:
		return mech_table_count(r, t, q->epsilon, ints, ev, err);
	case Q_SUM:
		return mech_table_sum(r, t, q->column, q->lo, q->hi, q->epsilon, q->neighbor, real,
				      ev, err);
	case Q_MEAN:
		return mech_table_mean(r, t, q->column, q->lo, q->hi, q->epsilon, q->neighbor, real,
				       ev, err);
	case Q_HISTOGRAM:
		return mech_table_histogram(r, t, q->column, q->cats, q->n_cats, q->epsilon,
					    q->neighbor, ints, ev, err);
	case Q_QUANTILE:
		return mech_table_quantile(r, t, q->column, q->q, q->lo, q->hi, q->epsilon, real, ev,
					   err);
	}
	cr_assert_fail("query kind %d", (int)q->kind);
	return ACCT_EINTERNAL;
}

/* run_query that must succeed; returns the event it stated (the caller
 * frees it). */
static acct_event *query_ok(mech_rng *r, const mech_table *t, const struct query *q, double *real,
			    int64_t *ints)
{
	acct_event *ev = NULL;
	acct_error err;

	cr_assert_eq(run_query(r, t, q, real, ints, &ev, &err), 0, "%s: %s", err.where, err.text);
	cr_assert_not_null(ev);
	return ev;
}

Test(table, count_is_discrete_laplace_around_n)
{
	enum { N = 50000, W = 30 };
	struct table_draws d = table_draws_open(NULL, 60);
	double prob[2 * W + 1], eps = 0.5;
	uint64_t obs[2 * W + 1] = {0};
	const struct query count = {.kind = Q_COUNT, .epsilon = eps};

	/* Sensitivity 1 at epsilon eps: the discrete Laplace of scale 1/eps. */
	test_dlap_pmf(1 / eps, W, prob);
	for (int i = 0; i < N; i++) {
		int64_t out;
		acct_event *ev = query_ok(d.r, d.t, &count, NULL, &out);

		if (i == 0)
			cr_assert_eq(ev->type, ACCT_EV_DISCRETE_LAPLACE);
		acct_event_free(ev);
		obs[test_int_cell(out - 200, W)]++;
	}
	cr_assert_gt(test_chi2_p(obs, prob, 2 * W + 1, N), TEST_P_MIN);
	table_draws_close(&d);
}

Test(table, clamped_sum_distribution)
{
	enum { N = 40000 };
	struct table_draws d = table_draws_open(NULL, 61);
	double *x = malloc(N * sizeof(double));
	/* clamp to [0, 100]: sum = 1 + ... + 100 + 100 * 100 = 15050;
	 * add/remove sensitivity 100, eps 1: Laplace scale 100. */
	const struct test_loc_scale right = {15050, 100}, wrong = {15050 + 10, 100};
	const struct query sum = {.kind = Q_SUM, .column = "x", .lo = 0, .hi = 100, .epsilon = 1.0,
				  .neighbor = ACCT_ADD_REMOVE};

	for (int i = 0; i < N; i++) {
		acct_event *ev = query_ok(d.r, d.t, &sum, &x[i], NULL);

		if (i == 0) {
			double e = ev->u.discrete_laplace.noise_parameter * ev->u.discrete_laplace.sensitivity;

			cr_assert_eq(ev->type, ACCT_EV_DISCRETE_LAPLACE);
			cr_assert(e >= 1.0 && e < 1.0 + 1e-9);
		}
		acct_event_free(ev);
	}
	test_expect_ks_fit(x, N, test_cdf_laplace, &right, &wrong, 1);
	free(x);
	table_draws_close(&d);
}

/*
 * A sum's event states ceil(D / g) grid units for a sensitivity of D / g
 * units; at a tiny epsilon the grid is coarse and the two part (on
 * [0, 0.3] at epsilon 1e-12, D / g is 1.2 units and the event states 2:
 * 1.67 times the epsilon asked).  Each sum is either refused at /epsilon or charged at
 * most 1 % over epsilon, as the mechanisms' Laplace release is: the
 * discrete Laplace event's epsilon is its noise parameter (1 / scale, in
 * grid units) times its sensitivity.  Ordinary epsilons are never refused.
 */
Test(table, a_sum_is_charged_at_most_one_percent_over_its_epsilon)
{
	static const double bounds[][2] = {{0, 0.3}, {-1, 1}, {0, 100}, {0, 5e-324}};
	struct table_draws d = table_draws_open(NULL, 68);
	int refused = 0;

	for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++) {
		for (int k = 0; k <= 15; k++) {
			const struct query sum = {.kind = Q_SUM, .column = "x",
						  .lo = bounds[b][0], .hi = bounds[b][1],
						  .epsilon = pow(10.0, -k),
						  .neighbor = ACCT_ADD_REMOVE};
			acct_event *ev = NULL;
			acct_error err;
			double real, charged;

			if (run_query(d.r, d.t, &sum, &real, NULL, &ev, &err) < 0) {
				cr_assert_str_eq(err.where, "/epsilon", "%s", err.text);
				cr_assert_gt(k, 6, "[%g, %g] refused at epsilon %g: %s", sum.lo,
					     sum.hi, sum.epsilon, err.text);
				refused++;
				continue;
			}
			charged = ev->u.discrete_laplace.noise_parameter *
				  ev->u.discrete_laplace.sensitivity;
			cr_assert_leq(charged, 1.01 * sum.epsilon * (1 + 1e-9),
				      "[%g, %g] at epsilon %g is charged %g", sum.lo, sum.hi,
				      sum.epsilon, charged);
			acct_event_free(ev);
		}
	}
	cr_assert_gt(refused, 0, "no sum was refused");
	table_draws_close(&d);
}

/*
 * Under replace, one row moves the grid sum by floor(hi / g) - floor(lo / g)
 * at most.  With lo = -1e-300 and hi = 1 that is 2^39 + 1 grid units for
 * epsilon 1: the scale hi - lo is in [1, 2), so mech_noise.c's grid is
 * g = 2^-39 (scale / g in [2^39, 2^40)); floor(1 / g) = 2^39 and
 * floor(-1e-300 / g) = -1.  hi - lo rounded to nearest is exactly 1, which
 * stated 2^39.
 */
Test(table, replace_sum_sensitivity_covers_the_grid)
{
	struct table_draws d = table_draws_open(NULL, 67);
	const struct query sum = {.kind = Q_SUM, .column = "x", .lo = -1e-300, .hi = 1,
				  .epsilon = 1.0, .neighbor = ACCT_REPLACE};
	double out;
	acct_event *ev = query_ok(d.r, d.t, &sum, &out, NULL);

	cr_assert_eq(ev->type, ACCT_EV_DISCRETE_LAPLACE);
	cr_assert_geq(ev->u.discrete_laplace.sensitivity, 0x1p39 + 1, "%.17g",
		      ev->u.discrete_laplace.sensitivity);
	acct_event_free(ev);
	table_draws_close(&d);
}

/* `q` on `tables[k]` refused naming `where`, for every k. */
static void expect_refused_on_each(mech_rng *r, const char *const *tables, size_t n,
				   const struct query *q, const char *where)
{
	for (size_t k = 0; k < n; k++) {
		mech_table *t = parse_ok(tables[k], NULL, 0);
		acct_event *ev = NULL;
		acct_error err;
		double out;

		cr_assert_eq(run_query(r, t, q, &out, NULL, &ev, &err), ACCT_EINVAL, "table %zu", k);
		cr_assert_str_eq(err.where, where, "table %zu: %s", k, err.text);
		cr_assert_null(ev);
		mech_table_free(t);
	}
}

/*
 * A quantile's answer or error never depends on the data beyond the row
 * count: at epsilon 7.685e-308 the length term (2 / eps) log(len)
 * overflowed exactly when an interval was longer than 1000, so with
 * lo = 20 - 1000 the 400 said whether min > 20.  Both tables now get the
 * same 400 at /epsilon; at 1e-300 even the widest bounds work.
 */
Test(table, quantile_errors_do_not_depend_on_the_data)
{
	static const char *const tables[] = {"age\n23\n40\n50\n", "age\n19\n40\n50\n"};
	/* Bounds so wide that hi - lo overflows: a gap between values could
	 * then be infinite or not, depending on the values. */
	static const char *const wide[] = {"x\n1e308\n1e308\n", "x\n1e308\n0\n"};
	const struct query tiny = {.kind = Q_QUANTILE, .column = "age", .q = 0.5, .lo = 20 - 1000,
				   .hi = 1000, .epsilon = 7.685e-308};
	const struct query widest = {.kind = Q_QUANTILE, .column = "age", .q = 0.5, .lo = -1e300,
				     .hi = 1e300, .epsilon = 1e-300};
	const struct query overflow = {.kind = Q_QUANTILE, .column = "x", .q = 0.5, .lo = -1.7e308,
				       .hi = 1.7e308, .epsilon = 1};
	mech_rng *r = test_rng(71);

	expect_refused_on_each(r, tables, 2, &tiny, "/epsilon");
	for (int k = 0; k < 2; k++) {
		mech_table *t = parse_ok(tables[k], NULL, 0);
		double out;

		acct_event_free(query_ok(r, t, &widest, &out, NULL));
		cr_assert(isfinite(out) && out >= -1e300 && out <= 1e300, "table %d: %g", k, out);
		mech_table_free(t);
	}
	expect_refused_on_each(r, wide, 2, &overflow, "/hi");
	mech_rng_free(r);
}

/* A noisy sum past DBL_MAX is released as DBL_MAX: an infinity could not
 * be sent, and the error said whether the noisy value had overflowed. */
Test(table, a_noisy_sum_stays_finite)
{
	struct table_draws d = table_draws_open("x\n8.988e307\n8.988e307\n", 73);
	const struct query sum = {.kind = Q_SUM, .column = "x", .lo = 0, .hi = 8.988e307,
				  .epsilon = 100, .neighbor = ACCT_ADD_REMOVE};
	int at_max = 0;

	for (int i = 0; i < 64; i++) {
		double out;

		acct_event_free(query_ok(d.r, d.t, &sum, &out, NULL));
		cr_assert(isfinite(out), "draw %d: %g", i, out);
		at_max += out == DBL_MAX;
	}
	/* The true sum 1.7976e308 is within a noise scale of DBL_MAX. */
	cr_assert_gt(at_max, 0);
	table_draws_close(&d);
}

Test(table, mean_is_composed_and_close)
{
	enum { N = 2000 };
	struct table_draws d = table_draws_open(NULL, 62);
	const struct query mean = {.kind = Q_MEAN, .column = "x", .lo = 0, .hi = 200,
				   .epsilon = 2.0, .neighbor = ACCT_ADD_REMOVE};
	double acc = 0;

	for (int i = 0; i < N; i++) {
		double m;
		acct_event *ev = query_ok(d.r, d.t, &mean, &m, NULL);

		cr_assert_eq(ev->type, ACCT_EV_COMPOSED);
		cr_assert_eq(ev->u.composed.n, 2);
		cr_assert(m >= 0 && m <= 200);
		acct_event_free(ev);
		acc += m;
	}
	/* True mean 100.5; the noise (sum scale 200, count scale 1) averages
	 * to within about 1 over 2000 draws. */
	cr_assert_lt(fabs(acc / N - 100.5), 2.0);
	table_draws_close(&d);
}

Test(table, histogram_over_public_categories)
{
	enum { N = 20000 };
	static const char *const cats[] = {"b", "a", "c"};
	struct table_draws d = table_draws_open(NULL, 63);
	const struct query hist = {.kind = Q_HISTOGRAM, .column = "g", .epsilon = 1.0,
				   .neighbor = ACCT_ADD_REMOVE, .cats = cats, .n_cats = 3};
	double sum[3] = {0};

	for (int i = 0; i < N; i++) {
		int64_t out[3];
		acct_event *ev = query_ok(d.r, d.t, &hist, NULL, out);

		cr_assert_eq(ev->type, ACCT_EV_EPSILON_DELTA);
		cr_assert(ev->u.epsilon_delta.epsilon >= 1.0 &&
			  ev->u.epsilon_delta.epsilon < 1.0 + 1e-9);
		acct_event_free(ev);
		for (int k = 0; k < 3; k++)
			sum[k] += (double)out[k];
	}
	/* Means 150, 50, 0; noise sd sqrt(2 e^-1)/(1 - e^-1) ~ 1.35 per draw. */
	cr_assert_lt(fabs(sum[0] / N - 150), 0.1);
	cr_assert_lt(fabs(sum[1] / N - 50), 0.1);
	cr_assert_lt(fabs(sum[2] / N), 0.1);
	table_draws_close(&d);
}

/* A histogram's bad categories are named at the index a scan in order
 * stops at: the first that is not a string or repeats an earlier one. */
Test(table, histogram_names_the_first_bad_category)
{
	static const char *const dup_late[] = {"a", "b", "c", "d", "b", "a"};
	static const char *const null_first[] = {"a", "b", NULL, "a"};
	static const char *const dup_first[] = {"a", "a", NULL, "b"};
	static const char *const triple[] = {"z", "q", "z", "z", "q"};
	static const char *const absent_dups[] = {"x", "nowhere", "y", "nowhere"};
	static const struct {
		const char *const *cats;
		size_t n;
		const char *where, *text;
	} cases[] = {
		{dup_late, 6, "/categories/4", "repeats a category"},
		{null_first, 4, "/categories/2", "must be a string"},
		{dup_first, 4, "/categories/1", "repeats a category"},
		{triple, 5, "/categories/2", "repeats a category"},
		{absent_dups, 4, "/categories/3", "repeats a category"},
	};
	struct table_draws d = table_draws_open(NULL, 66);

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct query q = {.kind = Q_HISTOGRAM, .column = "g", .epsilon = 1,
					.neighbor = ACCT_ADD_REMOVE, .cats = cases[k].cats,
					.n_cats = cases[k].n};
		acct_event *ev = NULL;
		acct_error err;
		int64_t out[6];

		cr_assert_eq(run_query(d.r, d.t, &q, NULL, out, &ev, &err), ACCT_EINVAL, "case %zu",
			     k);
		cr_assert_str_eq(err.where, cases[k].where, "case %zu", k);
		cr_assert_str_eq(err.text, cases[k].text, "case %zu", k);
		cr_assert_null(ev, "case %zu", k);
	}
	table_draws_close(&d);
}

static double thread_cpu_seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * At the limits (a column of DPG_MAX_CSV_CATEGORIES distinct values, a
 * query of DPG_MAX_HISTOGRAM_BINS categories, half of them in the table)
 * the bins are exact at an epsilon whose noise is never nonzero
 * (Pr ≤ 2e^-1000 a bin), and matching takes well under the second that
 * comparing every value with every category took.
 */
Test(table, histogram_at_the_limits_is_exact_and_quick)
{
	enum { ROWS = DPG_MAX_CSV_CATEGORIES, BINS = DPG_MAX_HISTOGRAM_BINS };
	size_t cap = 16 + (size_t)ROWS * 32, len;
	char *csv = malloc(cap), **names = calloc(BINS, sizeof(char *));
	mech_rng *r = test_rng(67);
	mech_table *t;
	int64_t *out = calloc(BINS, sizeof(int64_t));
	acct_event *ev = NULL;
	acct_error err;
	double t0;

	cr_assert(csv && names && out);
	len = (size_t)snprintf(csv, cap, "g\n");
	for (int i = 0; i < ROWS; i++)
		len += (size_t)snprintf(csv + len, cap - len, "a-long-shared-prefix-%06d\n", i);
	t = parse_ok(csv, NULL, 0);
	/* Even bins are rows 0, 2, 4, ...; odd bins name no row. */
	for (int k = 0; k < BINS; k++) {
		names[k] = malloc(40);
		cr_assert_not_null(names[k]);
		snprintf(names[k], 40, "a-long-shared-prefix-%06d", k % 2 ? ROWS + k : k);
	}
	acct_error_init(&err);
	t0 = thread_cpu_seconds();
	cr_assert_eq(mech_table_histogram(r, t, "g", (const char *const *)names, BINS, 1000.0,
					  ACCT_ADD_REMOVE, out, &ev, &err),
		     0, "%s: %s", err.where, err.text);
	cr_expect_lt(thread_cpu_seconds() - t0, 0.25);
	for (int k = 0; k < BINS; k++)
		cr_assert_eq(out[k], k % 2 ? 0 : 1, "bin %d", k);
	acct_event_free(ev);
	for (int k = 0; k < BINS; k++)
		free(names[k]);
	free(names);
	free(out);
	free(csv);
	mech_table_free(t);
	mech_rng_free(r);
}

Test(table, quantile_interval_distribution)
{
	/* Values 2, 4, 6, 8 on [0, 10], q = 0.5, eps = 1: interval i = [x_i,
	 * x_{i+1}] of length 2 is chosen with probability proportional to
	 * 2 exp(-|i - 2| / 2), i = 0..4. */
	enum { N = 50000 };
	struct table_draws d = table_draws_open("v\n8\n2\n6\n4\n", 64);
	const struct query median = {.kind = Q_QUANTILE, .column = "v", .q = 0.5, .lo = 0, .hi = 10,
				     .epsilon = 1.0};
	double prob[5], s = 0;
	uint64_t obs[5] = {0};

	for (int i = 0; i < 5; i++)
		s += prob[i] = exp(-fabs(i - 2.0) / 2);
	for (int i = 0; i < 5; i++)
		prob[i] /= s;
	for (int i = 0; i < N; i++) {
		double y;
		acct_event *ev = query_ok(d.r, d.t, &median, &y, NULL);
		int k;

		cr_assert_eq(ev->type, ACCT_EV_EXPONENTIAL_MECHANISM);
		/* eps (1 + 2^-50) + 2^-38 (the sampler's arithmetic) plus
		 * 2^-50 (eps (n + 1) + 512) (the scores' rounding), taken at
		 * the public n = 10^7 a table can hold at most, not at the 4
		 * rows the table has. */
		if (i == 0) {
			double want = 1.0 + 0x1p-50 + 0x1p-38 + 0x1p-50 * (1e7 + 1.0 + 512.0);

			cr_assert(ev->u.exponential_mechanism.epsilon >= want &&
					  ev->u.exponential_mechanism.epsilon < want * (1 + 1e-15),
				  "%.17g", ev->u.exponential_mechanism.epsilon);
		}
		acct_event_free(ev);
		cr_assert(y >= 0 && y <= 10);
		k = (int)(y / 2);
		obs[k > 4 ? 4 : k]++;
	}
	cr_assert_gt(test_chi2_p(obs, prob, 5, N), TEST_P_MIN);
	table_draws_close(&d);
}

/*
 * A quantile's output is a point of the public grid lo + (hi - lo) j / 2^32,
 * whatever the data: drawn as a + u (b - a) between two data values, which
 * doubles could come out depended on the values (with lo = 0, hi = 1 and
 * rows {0.9} against {0.9, 0.5}, 44% of the doubles near 0.3 were possible
 * under one and not the other).
 */
Test(table, quantile_outputs_are_on_a_public_grid)
{
	static const char *const tables[] = {"v\n0.9\n", "v\n0.9\n0.5\n",
					     "v\n0.123456789\n0.3333333333333\n0.7\n"};
	const struct query median = {.kind = Q_QUANTILE, .column = "v", .q = 0.5, .lo = 0, .hi = 1,
				     .epsilon = 1.0};
	mech_rng *r = test_rng(74);

	for (int k = 0; k < 3; k++) {
		mech_table *t = parse_ok(tables[k], NULL, 0);

		for (int i = 0; i < 2000; i++) {
			double y, j;

			acct_event_free(query_ok(r, t, &median, &y, NULL));
			j = ldexp(y, 32);
			cr_assert(y >= 0 && y <= 1 && j == floor(j), "table %d: %.17g is off the grid",
				  k, y);
		}
		mech_table_free(t);
	}
	mech_rng_free(r);
}

Test(table, query_errors_name_the_field)
{
	static const char *const cats[] = {"a", "a"};
	static const struct {
		struct query q;
		const char *where;
	} cases[] = {
		{{Q_SUM, "nope", 0, 0, 1, 1, ACCT_ADD_REMOVE, NULL, 0}, "/column"},
		{{Q_SUM, "g", 0, 0, 1, 1, ACCT_ADD_REMOVE, NULL, 0}, "/column"},
		{{Q_SUM, "x", 0, 1, 1, 1, ACCT_ADD_REMOVE, NULL, 0}, "/hi"},
		{{Q_SUM, "x", 0, NAN, 1, 1, ACCT_ADD_REMOVE, NULL, 0}, "/lo"},
		{{Q_MEAN, "x", 0, 0, 1, 0, ACCT_ADD_REMOVE, NULL, 0}, "/epsilon"},
		{{Q_HISTOGRAM, "x", 0, 0, 0, 1, ACCT_ADD_REMOVE, cats, 1}, "/column"},
		{{Q_HISTOGRAM, "g", 0, 0, 0, 1, ACCT_ADD_REMOVE, cats, 2}, "/categories/1"},
		{{Q_QUANTILE, "x", 1.5, 0, 1, 1, ACCT_ADD_REMOVE, NULL, 0}, "/q"},
		{{Q_COUNT, NULL, 0, 0, 0, -1, ACCT_ADD_REMOVE, NULL, 0}, "/epsilon"},
		/* Epsilons whose noise scale the discrete Laplace sampler cannot
		 * take are the caller's epsilon at fault, not an internal scale. */
		{{Q_COUNT, NULL, 0, 0, 0, 1e-300, ACCT_ADD_REMOVE, NULL, 0}, "/epsilon"},
		{{Q_COUNT, NULL, 0, 0, 0, 1e300, ACCT_ADD_REMOVE, NULL, 0}, "/epsilon"},
		{{Q_MEAN, "x", 0, 0, 1, 1e-300, ACCT_ADD_REMOVE, NULL, 0}, "/epsilon"},
		{{Q_HISTOGRAM, "g", 0, 0, 0, 1e-300, ACCT_REPLACE, cats, 1}, "/epsilon"},
	};
	struct table_draws d = table_draws_open(NULL, 65);

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		acct_event *ev = NULL;
		acct_error err;
		double real;
		int64_t out[2];

		cr_assert_eq(run_query(d.r, d.t, &cases[k].q, &real, out, &ev, &err), ACCT_EINVAL,
			     "case %zu", k);
		cr_assert_str_eq(err.where, cases[k].where, "case %zu: %s", k, err.text);
		cr_assert_null(ev, "case %zu", k);
	}
	table_draws_close(&d);
}

/* The tokenizer's own limits name the line too: a field one byte over
 * DPG_MAX_CSV_FIELD_BYTES on line 3. */
Test(table, long_field_names_its_line)
{
	size_t n = DPG_MAX_CSV_FIELD_BYTES + 1;
	char *csv = malloc(n + 32);
	mech_table *t = NULL;
	acct_error err;
	size_t len;

	cr_assert_not_null(csv);
	len = (size_t)sprintf(csv, "a,b\n1,x\n2,");
	memset(csv + len, 'y', n);
	len += n;
	csv[len++] = '\n';
	acct_error_init(&err);
	cr_assert_eq(mech_table_parse_csv(csv, len, NULL, 0, &t, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/csv/line/3", "%s", err.text);
	cr_assert_null(t);
	free(csv);
}

/* ---- sensitivities on random neighbouring tables ---- */

/* Rows x (numeric) and g (one of a, b, c, d; d falls in no histogram bin)
 * of a table, the row `skip` left out (skip >= n keeps every row). */
static mech_table *rows_table(const double *x, const int *g, size_t n, size_t skip)
{
	char *csv = malloc(n * 40 + 8);
	size_t len = (size_t)sprintf(csv, "x,g\n");
	mech_table *t;

	for (size_t i = 0; i < n; i++)
		if (i != skip)
			len += (size_t)sprintf(csv + len, "%.17g,%c\n", x[i], "abcd"[g[i]]);
	t = parse_ok(csv, NULL, 0);
	free(csv);
	return t;
}

/* The grid unit g = 2^-k of a sum event stating sensitivity s: the one k
 * with 2^k s <= dz < 2^k s + 2 (dz = ceil(s / g), s perhaps rounded up by
 * an ulp); 0 when no k fits, i.e. the event did not state s. */
static double sum_grid_unit(const acct_event *ev, double s)
{
	double dz = ev->u.discrete_laplace.sensitivity;

	if (ev->type != ACCT_EV_DISCRETE_LAPLACE)
		return 0;
	for (int k = -1100; k <= 1100; k++)
		if (ldexp(s, k) <= dz && dz < ldexp(s, k) + 2)
			return ldexp(1.0, -k);
	return 0;
}

/* Runs `q` on tables a and b with one seeded stream each, the same seed,
 * so both answers carry the same noise; returns the event of a's. */
static acct_event *same_noise(const mech_table *a, const mech_table *b, const struct query *q,
			      uint8_t tag, double real[2], int64_t ints[2][3])
{
	mech_rng *ra = test_rng(tag), *rb = test_rng(tag);
	acct_event *ev = query_ok(ra, a, q, &real[0], ints[0]);

	acct_event_free(query_ok(rb, b, q, &real[1], ints[1]));
	mech_rng_free(ra);
	mech_rng_free(rb);
	return ev;
}

/*
 * docs/mechanisms.md, "The queries' sensitivities": on random neighbouring
 * tables, answers drawn with the same noise differ by at most the stated
 * sensitivity: a count by 1 (0 under replace), a clamped sum by
 * max(|lo|, |hi|) (add/remove) or hi - lo (replace), in the event's grid
 * units, a mean under replace by that bound over n (add/remove: its event
 * composes the sum's bound and a count's 1 at epsilon / 2 each), and a
 * histogram by L1 1 or 2.  The bounds are also reached, so
 * the neighbours are not too tame to catch an understated one.
 */
Test(table, stated_sensitivities_hold_on_random_neighbours)
{
	enum { TRIALS = 300, MAX_ROWS = 30 };
	static const char *const cats[] = {"a", "b", "c"};
	/* The tables come from a fixed stream, so every run checks the same
	 * neighbours; only the noise is a mech_rng. */
	uint64_t s = 0x9e3779b97f4a7c15u;

	for (int nb = 0; nb < 2; nb++) {
		acct_neighbor rel = nb ? ACCT_REPLACE : ACCT_ADD_REMOVE;
		double worst_sum = 0, worst_mean = 0;
		int64_t worst_hist = 0;

		for (int trial = 0; trial < TRIALS; trial++) {
			double x[MAX_ROWS + 1], real[2], lo, hi, sens, unit;
			int g[MAX_ROWS + 1];
			int64_t ints[2][3];
			size_t n = 2 + (size_t)(test_lcg_unit(&s) * (MAX_ROWS - 1)), j;
			mech_table *a, *b;
			acct_event *ev;
			struct query q = {.column = "x", .neighbor = rel, .cats = cats, .n_cats = 3};

			for (size_t i = 0; i <= n; i++) {
				x[i] = -120 + 270 * test_lcg_unit(&s);
				g[i] = (int)(test_lcg_unit(&s) * 4);
			}
			j = (size_t)(test_lcg_unit(&s) * (double)n);
			a = rows_table(x, g, n, n);
			if (rel == ACCT_REPLACE) {
				x[j] = x[n];
				g[j] = g[n];
				b = rows_table(x, g, n, n);
			} else {
				b = rows_table(x, g, n, j);
			}
			lo = -100 * test_lcg_unit(&s);
			hi = 1 + 99 * test_lcg_unit(&s);
			q.lo = lo;
			q.hi = hi;
			q.epsilon = 0.5 + test_lcg_unit(&s);

			q.kind = Q_COUNT;
			ev = same_noise(a, b, &q, (uint8_t)trial, real, ints);
			cr_assert_eq(ev->u.discrete_laplace.sensitivity, 1);
			cr_assert_eq(llabs(ints[0][0] - ints[1][0]), rel == ACCT_REPLACE ? 0 : 1,
				     "trial %d", trial);
			acct_event_free(ev);

			q.kind = Q_SUM;
			ev = same_noise(a, b, &q, (uint8_t)trial, real, ints);
			sens = rel == ACCT_REPLACE ? hi - lo : fmax(fabs(lo), fabs(hi));
			unit = sum_grid_unit(ev, sens);
			cr_assert_gt(unit, 0, "trial %d: the event does not state %.17g", trial, sens);
			cr_assert_leq(fabs(real[0] - real[1]),
				      ev->u.discrete_laplace.sensitivity * unit,
				      "trial %d: moved %.17g, stated %.17g grid units of %.17g", trial,
				      fabs(real[0] - real[1]), ev->u.discrete_laplace.sensitivity,
				      unit);
			worst_sum = fmax(worst_sum, fabs(real[0] - real[1]) / sens);
			acct_event_free(ev);

			/* The mean: under replace n is public and the noisy sum moves
			 * by the sum's bound, so the clamped quotient by at most that
			 * over n; under add/remove it composes the sum (its bound,
			 * at half of epsilon) with a count of sensitivity 1. */
			q.kind = Q_MEAN;
			ev = same_noise(a, b, &q, (uint8_t)trial, real, ints);
			if (rel == ACCT_REPLACE) {
				unit = sum_grid_unit(ev, sens);
				cr_assert_gt(unit, 0, "trial %d: the mean does not state %.17g", trial,
					     sens);
				/* (the quotient of doubles rounds: a few ulps over) */
				cr_assert_leq(fabs(real[0] - real[1]),
					      ev->u.discrete_laplace.sensitivity * unit / (double)n *
						      (1 + 1e-12),
					      "trial %d: the mean moved %.17g", trial,
					      fabs(real[0] - real[1]));
				worst_mean = fmax(worst_mean, fabs(real[0] - real[1]) * (double)n / sens);
			} else {
				cr_assert_eq(ev->type, ACCT_EV_COMPOSED);
				cr_assert_eq(ev->u.composed.n, 2);
				cr_assert_gt(sum_grid_unit(ev->u.composed.events[0], sens), 0,
					     "trial %d: the mean's sum does not state %.17g", trial, sens);
				cr_assert_eq(ev->u.composed.events[1]->type, ACCT_EV_DISCRETE_LAPLACE);
				cr_assert_eq(ev->u.composed.events[1]->u.discrete_laplace.sensitivity, 1);
				for (size_t k = 0; k < 2; k++) {
					const acct_event *part = ev->u.composed.events[k];
					/* epsilon = sensitivity / scale, the parameter 1 / scale */
					double share = part->u.discrete_laplace.sensitivity *
						       part->u.discrete_laplace.noise_parameter;

					cr_assert_float_eq(share, q.epsilon / 2, 1e-9 * q.epsilon,
							   "trial %d: part %zu spends %.17g of %.17g",
							   trial, k, share, q.epsilon);
				}
			}
			acct_event_free(ev);

			q.kind = Q_HISTOGRAM;
			q.column = "g";
			acct_event_free(same_noise(a, b, &q, (uint8_t)trial, real, ints));
			{
				int64_t l1 = 0;

				for (int k = 0; k < 3; k++)
					l1 += llabs(ints[0][k] - ints[1][k]);
				cr_assert_leq(l1, rel == ACCT_REPLACE ? 2 : 1, "trial %d", trial);
				worst_hist = l1 > worst_hist ? l1 : worst_hist;
			}
			mech_table_free(a);
			mech_table_free(b);
		}
		cr_assert_gt(worst_sum, 0.99, "%s: the sum never moved near its bound (%g)",
			     nb ? "replace" : "add/remove", worst_sum);
		cr_assert_eq(worst_hist, rel == ACCT_REPLACE ? 2 : 1);
		if (rel == ACCT_REPLACE)
			cr_assert_gt(worst_mean, 0.99, "the mean never moved near its bound (%g)",
				     worst_mean);
	}
}

/* r(j): how many of a[1 .. n] are at or below grid point j. */
static size_t quantile_rank(const uint64_t *a, size_t n, uint64_t j)
{
	size_t r = 0;

	for (size_t k = 1; k <= n; k++)
		r += a[k] <= j;
	return r;
}

/* The largest |u_a(j) - u_b(j)| over the grid points j in pts, where
 * u(j) = -|r(j) - c| on each table's ranks. */
static double quantile_worst_move(const uint64_t *a, size_t na, double ca, const uint64_t *b,
				  size_t nb, double cb, const uint64_t *pts, size_t npts)
{
	double worst = 0;

	for (size_t i = 0; i < npts; i++) {
		double ua = -fabs((double)quantile_rank(a, na, pts[i]) - ca);
		double ub = -fabs((double)quantile_rank(b, nb, pts[i]) - cb);

		worst = fmax(worst, fabs(ua - ub));
	}
	return worst;
}

/*
 * docs/mechanisms.md, "The queries' sensitivities": the quantile's utility
 * -|r(j) - c| moves by at most 1 at every grid point between neighbouring
 * tables (a row removed: r by 0 or 1 and c by q; a row replaced: r by at
 * most 1, c not at all).  300 random tables per relation, q at 0, at 1 or
 * random, checked at every row's grid point of either table, one on each
 * side of it, both ends and 20 random points.  The bound is reached
 * under both relations.
 */
Test(table, quantile_utility_moves_at_most_one_on_random_neighbours)
{
	enum { TRIALS = 300, MAX_ROWS = 30, NPTS = 6 * (MAX_ROWS + 1) + 22 };
	const uint64_t M = (uint64_t)1 << 32;
	uint64_t s = 0x2545f4914f6cdd1du;

	for (int nb = 0; nb < 2; nb++) {
		double reached = 0;

		for (int trial = 0; trial < TRIALS; trial++) {
			double x[MAX_ROWS + 1], lo = -100 * test_lcg_unit(&s), hi = 1 + 99 * test_lcg_unit(&s);
			double q = trial % 3 == 0 ? 0 : trial % 3 == 1 ? 1 : test_lcg_unit(&s), ca, cb, w;
			int g[MAX_ROWS + 1] = {0};
			size_t n = 2 + (size_t)(test_lcg_unit(&s) * (MAX_ROWS - 1)), j, npts = 0, n_b;
			uint64_t a[MAX_ROWS + 2], b[MAX_ROWS + 2], pts[NPTS];
			mech_table *ta, *tb;

			for (size_t i = 0; i <= n; i++)
				x[i] = -120 + 270 * test_lcg_unit(&s);
			j = (size_t)(test_lcg_unit(&s) * (double)n);
			ta = rows_table(x, g, n, n);
			if (nb) {
				x[j] = x[n];
				tb = rows_table(x, g, n, n);
			} else {
				tb = rows_table(x, g, n, j);
			}
			n_b = nb ? n : n - 1;
			cr_assert_eq(mech_table_quantile_ranks(ta, "x", q, lo, hi, a, &ca, NULL), 0);
			cr_assert_eq(mech_table_quantile_ranks(tb, "x", q, lo, hi, b, &cb, NULL), 0);
			for (size_t k = 1; k <= n; k++)
				for (int side = 0; side < 2; side++) {
					uint64_t v = side ? b[k <= n_b ? k : n_b] : a[k];

					pts[npts++] = v;
					pts[npts++] = v > 0 ? v - 1 : v;
					pts[npts++] = v < M ? v + 1 : v;
				}
			pts[npts++] = 0;
			pts[npts++] = M;
			for (int r = 0; r < 20; r++)
				pts[npts++] = (uint64_t)(test_lcg_unit(&s) * (double)M);
			w = quantile_worst_move(a, n, ca, b, n_b, cb, pts, npts);
			cr_assert_leq(w, 1.0, "trial %d: the utility moved %.17g", trial, w);
			reached = fmax(reached, w);
			mech_table_free(ta);
			mech_table_free(tb);
		}
		cr_assert_eq(reached, 1.0, "%s: no move reached 1", nb ? "replace" : "add/remove");
	}
}

/* q run on tables a and b, each with a stream of its own: whether the two
 * events, as the ledger would show them, are the same. */
static bool same_event(const mech_table *a, const mech_table *b, const struct query *q,
		       uint8_t tag)
{
	double real;
	int64_t ints[3];
	mech_rng *ra = test_rng(tag), *rb = test_rng((uint8_t)(tag + 1));
	acct_event *ea = query_ok(ra, a, q, &real, ints), *eb = query_ok(rb, b, q, &real, ints);
	json_t *ja = srv_event_to_json(ea), *jb = srv_event_to_json(eb);
	bool same = ja && jb && json_equal(ja, jb);

	json_decref(ja);
	json_decref(jb);
	acct_event_free(ea);
	acct_event_free(eb);
	mech_rng_free(ra);
	mech_rng_free(rb);
	return same;
}

/*
 * A query's event is public (the ledger shows it to every reader) while
 * the rows, and under add/remove their number, are private: every query's
 * event is the same on neighbouring tables.  The quantile's event once
 * carried a rounding slack proportional to the row count, whose digits the
 * ledger then showed.  A table of 100 001 rows is queried too: a quantile
 * used to be refused past 99 999 rows, before any charge, which told
 * whether the private count had passed it.
 */
Test(table, query_events_are_the_same_on_neighbouring_tables)
{
	enum { TRIALS = 40, MAX_ROWS = 30, BIG = 100001 };
	static const char *const cats[] = {"a", "b", "c"};
	static const enum query_kind kinds[] = {Q_COUNT, Q_SUM, Q_MEAN, Q_HISTOGRAM, Q_QUANTILE};
	uint64_t s = 0x853c49e6748fea9bu;
	double *x = malloc(BIG * sizeof(double));
	int *g = calloc(BIG, sizeof(int));
	mech_table *a, *b;

	cr_assert(x && g);
	for (int trial = 0; trial < 2 * TRIALS; trial++) {
		acct_neighbor rel = trial % 2 ? ACCT_REPLACE : ACCT_ADD_REMOVE;
		size_t n = 2 + (size_t)(test_lcg_unit(&s) * (MAX_ROWS - 1));
		struct query q = {.neighbor = rel, .cats = cats, .n_cats = 3, .q = test_lcg_unit(&s),
				  .lo = -100 * test_lcg_unit(&s), .hi = 1 + 99 * test_lcg_unit(&s),
				  .epsilon = 0.1 + test_lcg_unit(&s)};

		for (size_t i = 0; i <= n; i++) {
			x[i] = -120 + 270 * test_lcg_unit(&s);
			g[i] = (int)(test_lcg_unit(&s) * 4);
		}
		a = rows_table(x, g, n, n);
		if (rel == ACCT_REPLACE) {
			x[0] = x[n];
			g[0] = g[n];
		}
		/* replace: row 0 replaced by row n; add/remove: row n added */
		b = rows_table(x, g, rel == ACCT_REPLACE ? n : n + 1, n + 1);
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			q.kind = kinds[k];
			q.column = q.kind == Q_HISTOGRAM ? "g" : "x";
			cr_assert(same_event(a, b, &q, (uint8_t)(2 * trial)),
				  "trial %d, query kind %d: the events differ", trial, (int)q.kind);
		}
		mech_table_free(a);
		mech_table_free(b);
	}
	for (size_t i = 0; i < BIG; i++)
		x[i] = (double)(i % 1000);
	a = rows_table(x, g, BIG - 1, BIG);
	b = rows_table(x, g, BIG, BIG);
	{
		const struct query q = {.kind = Q_QUANTILE, .column = "x", .q = 0.5, .lo = 0,
					.hi = 1000, .epsilon = 1, .neighbor = ACCT_ADD_REMOVE};
		double out[2];
		int64_t ints[2][3];

		acct_event_free(same_noise(a, b, &q, 9, out, ints));
		cr_assert(out[0] >= 0 && out[0] <= 1000 && out[1] >= 0 && out[1] <= 1000);
		cr_assert(same_event(a, b, &q, 11));
	}
	mech_table_free(a);
	mech_table_free(b);
	free(x);
	free(g);
}

/* Columns by name, and a numeric column copied into a row-major matrix. */
Test(table, column_index_and_numeric_copy)
{
	mech_table *t = parse_ok("a,b,c\n1,x,10\n2,y,20\n3,x,30\n", NULL, 0);
	double m[3 * 2];

	cr_assert_eq(mech_table_column_index(t, "a"), 0);
	cr_assert_eq(mech_table_column_index(t, "c"), 2);
	cr_assert_eq(mech_table_column_index(t, "d"), 3);
	cr_assert_eq(mech_table_column_index(t, "A"), 3);
	cr_assert_eq(mech_table_column_index(t, NULL), 3);
	for (size_t k = 0; k < 6; k++)
		m[k] = -1;
	/* Column c into the first column of a 3 x 2 matrix, a into the second. */
	cr_assert(mech_table_copy_numeric(t, 2, m, 2));
	cr_assert(mech_table_copy_numeric(t, 0, m + 1, 2));
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(m[i * 2], 10.0 * (double)(i + 1));
		cr_assert_eq(m[i * 2 + 1], (double)(i + 1));
	}
	/* A categorical or missing column writes nothing. */
	cr_assert_not(mech_table_copy_numeric(t, 1, m, 2));
	cr_assert_not(mech_table_copy_numeric(t, 3, m, 2));
	cr_assert_eq(m[0], 10.0);
	mech_table_free(t);
}
