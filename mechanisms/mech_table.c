/*
 * mech_table.c: hosted tables (CSV text -> typed columns) and the queries
 * the server answers on them, each priced by the event it returns.
 *
 * CSV: RFC 4180 (comma separator, double-quoted fields with "" escapes and
 * embedded newlines, LF or CRLF line ends, a leading UTF-8 byte-order mark
 * skipped) in UTF-8 without NUL bytes, a header row of unique non-empty
 * names.  Every bound is a DPG_MAX_CSV_* constant.  Errors name the line
 * (1 = header) and the column in the text and in `where`
 * ("/csv/line/17/age"); nothing is partially returned.
 *
 * Neighbouring tables differ by one row (add/remove) or in one row
 * (replace); each query states its sensitivity under both.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mech.h"
#include "mech_internal.h"

/* The least epsilon a quantile takes, and its public output grid: M = 2^32
 * cells, M + 1 points (see mech_table_quantile). */
#define QUANTILE_MIN_EPSILON 1e-300
#define QUANTILE_GRID_BITS 32
#define QUANTILE_GRID_POINTS ((UINT64_C(1) << QUANTILE_GRID_BITS) + 1)

struct column {
	char *name;
	mech_col_kind kind;
	double *num;      /* numeric: rows values */
	uint32_t *cat;    /* categorical: index into dict */
	char **dict;
	size_t ndict;
	/* open-addressing hash of dict: built while parsing, kept for the
	 * histogram's category lookups */
	uint32_t *slots;
	size_t nslots;
};

struct mech_table {
	size_t rows, cols;
	struct column *col;
};

/* ---- helpers ---- */

int mech__parse_real(const char *s, double *ret)
{
	char *end;
	double x;

	/* The one checked number parser of mechanisms/: the whole field must
	 * be a finite decimal (or hex) number, surrounding blanks allowed. */
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return -1;
	errno = 0;
	x = strtod(s, &end);
	if (end == s)
		return -1;
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end || !isfinite(x) || (errno == ERANGE && fabs(x) > 1.0))
		return -1;
	*ret = x;
	return 0;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 1099511628211ull;
	}
	return h;
}

static void column_free(struct column *c)
{
	free(c->name);
	free(c->num);
	free(c->cat);
	for (size_t i = 0; i < c->ndict; i++)
		free(c->dict[i]);
	free(c->dict);
	free(c->slots);
}

void mech_table_free(mech_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->cols; i++)
		column_free(&t->col[i]);
	free(t->col);
	free(t);
}

/* ---- CSV tokenizer ---- */

struct csv {
	const char *p, *end;
	size_t line;
	char field[DPG_MAX_CSV_FIELD_BYTES + 1];
};

enum { FIELD_MORE = 1, FIELD_EOL = 2, FIELD_EOF = 3 };

/* A tokenizer error at `line`: ACCT_EINVAL with where "/csv/line/N" and the
 * text "line N: what", so a client finds the line whichever it reads. */
static int csv_error(acct_error *err, size_t line, const char *what)
{
	char where[ACCT_ERROR_WHERE_BYTES];

	snprintf(where, sizeof(where), "/csv/line/%zu", line);
	return acct_error_set(err, ACCT_EINVAL, where, "line %zu: %s", line, what);
}

/* Reads one field into c->field; returns FIELD_MORE (a comma follows),
 * FIELD_EOL, FIELD_EOF, or a negative code with err set. */
static int csv_field(struct csv *c, acct_error *err)
{
	size_t n = 0, first_line = c->line;
	bool quoted = false;

	if (c->p < c->end && *c->p == '"') {
		quoted = true;
		c->p++;
	}
	for (;;) {
		char ch;

		if (c->p >= c->end) {
			/* Named by the line the quote opened on: the end of the
			 * text is where it was noticed, not where it went wrong. */
			if (quoted)
				return csv_error(err, first_line, "unterminated quoted field");
			break;
		}
		ch = *c->p;
		if (quoted) {
			if (ch == '"') {
				if (c->p + 1 < c->end && c->p[1] == '"') {
					c->p++;
				} else {
					c->p++;
					quoted = false;
					if (c->p < c->end && *c->p != ',' && *c->p != '\n' && *c->p != '\r')
						return csv_error(err, c->line,
								 "text after a closing quote");
					continue;
				}
			} else if (ch == '\n') {
				c->line++;
			}
		} else if (ch == ',' || ch == '\n' || ch == '\r') {
			break;
		} else if (ch == '"') {
			return csv_error(err, c->line, "quote inside an unquoted field");
		}
		if (ch == '\0')
			return csv_error(err, c->line, "NUL byte");
		if (n >= DPG_MAX_CSV_FIELD_BYTES) {
			char what[64];

			snprintf(what, sizeof(what), "field longer than %d bytes",
				 DPG_MAX_CSV_FIELD_BYTES);
			return csv_error(err, c->line, what);
		}
		c->field[n++] = ch;
		c->p++;
	}
	c->field[n] = '\0';
	if (c->p >= c->end)
		return FIELD_EOF;
	if (*c->p == ',') {
		c->p++;
		return FIELD_MORE;
	}
	/* A row ends at LF or CRLF.  A bare CR (old Mac line endings, or a
	 * stray one) is refused rather than guessed at: read as a row end it
	 * would split rows a spreadsheet shows as one, read as data it would
	 * glue two rows into one field. */
	if (*c->p == '\r') {
		if (c->p + 1 >= c->end || c->p[1] != '\n')
			return csv_error(err, c->line,
					 "a carriage return (CR) not followed by a line feed; "
					 "end lines with LF or CRLF");
		c->p++;
	}
	c->p++;
	c->line++;
	return c->p >= c->end ? FIELD_EOF : FIELD_EOL;
}

/* The slot of column c's value hash (c->slots non-NULL) that holds `s`,
 * or the empty one where it would go. */
static size_t dict_slot(const struct column *c, const char *s)
{
	size_t i = hash_str(s) & (c->nslots - 1);

	while (c->slots[i] && strcmp(c->dict[c->slots[i] - 1], s))
		i = (i + 1) & (c->nslots - 1);
	return i;
}

/* The dictionary index of `s` in categorical column c; SIZE_MAX when no
 * row has that value. */
static size_t dict_find(const struct column *c, const char *s)
{
	size_t i;

	if (!c->slots)
		return SIZE_MAX;
	i = dict_slot(c, s);
	return c->slots[i] ? c->slots[i] - 1 : SIZE_MAX;
}

static int add_category(struct column *col, const char *s, uint32_t *ret, acct_error *err,
			size_t line)
{
	size_t i;

	if (!col->slots) {
		col->nslots = 64;
		col->slots = calloc(col->nslots, sizeof(uint32_t));
		if (!col->slots)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	i = dict_slot(col, s);
	if (col->slots[i]) {
		*ret = col->slots[i] - 1;
		return 0;
	}
	if (col->ndict >= DPG_MAX_CSV_CATEGORIES) {
		char where[ACCT_ERROR_WHERE_BYTES];

		snprintf(where, sizeof(where), "/csv/line/%zu/%.64s", line, col->name);
		return acct_error_set(err, ACCT_EINVAL, where,
				      "line %zu, column '%.64s': more than %d distinct values", line,
				      col->name, DPG_MAX_CSV_CATEGORIES);
	}
	if ((col->ndict & (col->ndict - 1)) == 0) {
		char **d = realloc(col->dict, (col->ndict ? col->ndict * 2 : 1) * sizeof(char *));

		if (!d)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		col->dict = d;
	}
	col->dict[col->ndict] = strdup(s);
	if (!col->dict[col->ndict])
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	col->slots[i] = (uint32_t)++col->ndict;
	*ret = (uint32_t)(col->ndict - 1);
	if (col->ndict * 2 > col->nslots) {
		/* Grow and rehash. */
		size_t ns = col->nslots * 2;
		uint32_t *slots = calloc(ns, sizeof(uint32_t));

		if (!slots)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		for (size_t k = 0; k < col->ndict; k++) {
			size_t j = hash_str(col->dict[k]) & (ns - 1);

			while (slots[j])
				j = (j + 1) & (ns - 1);
			slots[j] = (uint32_t)(k + 1);
		}
		free(col->slots);
		col->slots = slots;
		col->nslots = ns;
	}
	return 0;
}

static int set_where(acct_error *err, size_t line, const char *col, const char *what)
{
	char where[ACCT_ERROR_WHERE_BYTES];

	snprintf(where, sizeof(where), "/csv/line/%zu/%.64s", line, col);
	return acct_error_set(err, ACCT_EINVAL, where, "line %zu, column '%.64s': %s", line, col,
			      what);
}

/* Skips empty lines (LF or CRLF); true when the input is exhausted. */
static bool skip_blank_lines(struct csv *c)
{
	for (;;) {
		if (c->p < c->end && *c->p == '\n') {
			c->p++;
			c->line++;
		} else if (c->p + 1 < c->end && c->p[0] == '\r' && c->p[1] == '\n') {
			c->p += 2;
			c->line++;
		} else {
			return c->p >= c->end;
		}
	}
}

/* The CSV parser's state between its phases: the tokenizer, the table being
 * built, each column's decided type, and the last tokenizer result. */
struct csv_parse {
	struct csv *c;
	mech_table *t;
	bool *is_num;
	const mech_column_decl *decl;
	size_t n_decl;
	int st;
};

/* Refuses text that is empty, too large, not UTF-8 or holds a NUL byte:
 * names and categories are sent back in JSON and become C strings. */
static int csv_check_text(const char *text, size_t len, acct_error *err)
{
	const char *nul;
	size_t bad = len;

	if (!text || len == 0)
		return acct_error_set(err, ACCT_EINVAL, "/csv", "the table is empty");
	if (len > DPG_MAX_CSV_BYTES)
		return acct_error_set(err, ACCT_EINVAL, "/csv", "the table is larger than %u bytes",
				      DPG_MAX_CSV_BYTES);
	nul = memchr(text, '\0', len);
	if (!acct_utf8_valid(text, len, &bad) || nul) {
		size_t at = nul && (size_t)(nul - text) < bad ? (size_t)(nul - text) : bad;
		char where[ACCT_ERROR_WHERE_BYTES];
		size_t line = 1;

		for (size_t i = 0; i < at; i++)
			line += text[i] == '\n';
		snprintf(where, sizeof(where), "/csv/line/%zu", line);
		return acct_error_set(err, ACCT_EINVAL, where, "line %zu: %s", line,
				      at == bad ? "not valid UTF-8 text" : "a NUL byte");
	}
	return 0;
}

/* Reads the header row into t->col: at most DPG_MAX_CSV_COLUMNS unique,
 * non-empty names. */
static int csv_read_header(struct csv_parse *p, acct_error *err)
{
	mech_table *t = p->t;
	struct csv *c = p->c;

	do {
		p->st = csv_field(c, err);
		if (p->st < 0)
			return p->st;
		if (t->cols >= DPG_MAX_CSV_COLUMNS)
			return acct_error_set(err, ACCT_EINVAL, "/csv/line/1",
					      "line 1: more than %d columns", DPG_MAX_CSV_COLUMNS);
		if (!c->field[0])
			return acct_error_set(err, ACCT_EINVAL, "/csv/line/1",
					      "line 1: column %zu has an empty name", t->cols + 1);
		for (size_t j = 0; j < t->cols; j++)
			if (!strcmp(t->col[j].name, c->field))
				return set_where(err, 1, c->field, "appears twice in the header");
		t->col[t->cols].name = strdup(c->field);
		if (!t->col[t->cols].name)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		t->cols++;
	} while (p->st == FIELD_MORE);
	return 0;
}

/* The index of the declaration named `name` in p's schema, or n_decl. */
static size_t decl_index(const struct csv_parse *p, const char *name)
{
	size_t k;

	for (k = 0; k < p->n_decl; k++)
		if (!strcmp(p->decl[k].name, name))
			break;
	return k;
}

/* Types the columns from the declared schema, or numeric until the first
 * pass says otherwise when there is none.  With a schema, every header
 * column must be declared, by name or by the wildcard "*" (the kind of
 * every column not named), and every column declared by name present. */
static int csv_apply_schema(struct csv_parse *p, acct_error *err)
{
	const mech_table *t = p->t;
	size_t any = p->decl ? decl_index(p, "*") : 0;

	for (size_t j = 0; j < t->cols; j++) {
		size_t k;

		p->is_num[j] = true;
		if (!p->decl)
			continue;
		k = decl_index(p, t->col[j].name);
		if (k == p->n_decl)
			k = any;
		if (k == p->n_decl)
			return set_where(err, 1, t->col[j].name, "is not in the declared schema");
		p->is_num[j] = p->decl[k].kind == MECH_COL_NUMERIC;
	}
	for (size_t k = 0; p->decl && k < p->n_decl; k++) {
		size_t j;

		if (k == any)
			continue;
		for (j = 0; j < t->cols; j++)
			if (!strcmp(p->decl[k].name, t->col[j].name))
				break;
		if (j == t->cols) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/schema/%zu", k);
			return acct_error_set(err, ACCT_EINVAL, where,
					      "declared column '%.64s' is not in the header",
					      p->decl[k].name);
		}
	}
	return 0;
}

/* A first pass over the rows counts them (for allocation and the row limit)
 * with the same tokenizer as the second, so the two agree on where every
 * row ends; without a schema it also decides the types: a column is
 * numeric when every field of it is a finite number.  (The second pass
 * checks raggedness and the other limits.)  Leaves the tokenizer where it
 * found it. */
static int csv_count_rows(struct csv_parse *p, size_t *ret_rows, acct_error *err)
{
	struct csv *c = p->c;
	const char *start = c->p;
	size_t start_line = c->line, rows = 0;
	int st = p->st;

	while (st != FIELD_EOF && !skip_blank_lines(c)) {
		size_t j = 0;
		double x;

		if (rows >= (size_t)DPG_MAX_CSV_ROWS) {
			char where[ACCT_ERROR_WHERE_BYTES];

			snprintf(where, sizeof(where), "/csv/line/%zu", c->line);
			return acct_error_set(err, ACCT_EINVAL, where, "line %zu: more than %lld rows",
					      c->line, (long long)DPG_MAX_CSV_ROWS);
		}
		rows++;
		do {
			st = csv_field(c, err);
			if (st < 0)
				return st;
			if (!p->decl && j < p->t->cols && p->is_num[j] &&
			    mech__parse_real(c->field, &x) < 0)
				p->is_num[j] = false;
			j++;
		} while (st == FIELD_MORE);
	}
	c->p = start;
	c->line = start_line;
	if (rows == 0)
		return acct_error_set(err, ACCT_EINVAL, "/csv", "need a header row and at least one row");
	*ret_rows = rows;
	return 0;
}

/* Allocates each column's storage, of its decided type only. */
static int csv_alloc_columns(struct csv_parse *p, size_t cap_rows, acct_error *err)
{
	for (size_t j = 0; j < p->t->cols; j++) {
		struct column *col = &p->t->col[j];

		if (p->is_num[j])
			col->num = malloc(cap_rows * sizeof(double));
		else
			col->cat = malloc(cap_rows * sizeof(uint32_t));
		if (!col->num && !col->cat)
			return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	return 0;
}

/* Stores the field just read as row `row` of column j (text line `line`). */
static int csv_store_field(struct csv_parse *p, size_t j, size_t row, size_t line,
			   acct_error *err)
{
	struct column *col = &p->t->col[j];
	uint32_t ci = 0;
	double x;
	int rc;

	if (p->is_num[j]) {
		if (mech__parse_real(p->c->field, &x) < 0) {
			if (p->decl)
				return set_where(err, line, col->name, "not a finite number");
			return acct_error_set(err, ACCT_EINTERNAL, "/csv", "type detection disagrees");
		}
		col->num[row] = x;
		return 0;
	}
	rc = add_category(col, p->c->field, &ci, err, line);
	if (rc < 0)
		return rc;
	col->cat[row] = ci;
	return 0;
}

/* Reads the row that starts at text line `line` as row `row`: exactly as
 * many fields as the header has. */
static int csv_read_row(struct csv_parse *p, size_t row, size_t line, acct_error *err)
{
	char where[ACCT_ERROR_WHERE_BYTES];
	size_t j = 0;
	int rc;

	do {
		p->st = csv_field(p->c, err);
		if (p->st < 0)
			return p->st;
		if (j >= p->t->cols) {
			snprintf(where, sizeof(where), "/csv/line/%zu", line);
			return acct_error_set(err, ACCT_EINVAL, where,
					      "line %zu: more than the header's %zu columns", line,
					      p->t->cols);
		}
		rc = csv_store_field(p, j, row, line, err);
		if (rc < 0)
			return rc;
		j++;
	} while (p->st == FIELD_MORE);
	if (j != p->t->cols) {
		snprintf(where, sizeof(where), "/csv/line/%zu", line);
		return acct_error_set(err, ACCT_EINVAL, where,
				      "line %zu: %zu fields, the header has %zu", line, j, p->t->cols);
	}
	return 0;
}

/* The second pass: every data row into the columns; empty lines are not
 * rows. */
static int csv_read_rows(struct csv_parse *p, size_t cap_rows, acct_error *err)
{
	size_t row = 0;
	int rc;

	while (p->st != FIELD_EOF) {
		if (skip_blank_lines(p->c))
			break;
		if (row >= cap_rows)
			return acct_error_set(err, ACCT_EINTERNAL, "/csv", "row count mismatch");
		rc = csv_read_row(p, row, p->c->line, err);
		if (rc < 0)
			return rc;
		row++;
	}
	p->t->rows = row;
	if (row == 0)
		return acct_error_set(err, ACCT_EINVAL, "/csv", "no data rows");
	return 0;
}

int mech_table_parse_csv(const char *text, size_t len, const mech_column_decl *decl,
			 size_t n_decl, mech_table **ret, acct_error *err)
{
	struct csv_parse p = { .decl = decl, .n_decl = n_decl };
	size_t cap_rows = 0;
	int rc;

	/* A UTF-8 byte-order mark (spreadsheet exports write one) is not part
	 * of the first column's name. */
	if (text && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	rc = csv_check_text(text, len, err);
	if (rc < 0)
		return rc;
	p.t = calloc(1, sizeof(*p.t));
	p.c = malloc(sizeof(*p.c));
	if (!p.t || !p.c) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	p.c->p = text;
	p.c->end = text + len;
	p.c->line = 1;
	p.t->col = calloc(DPG_MAX_CSV_COLUMNS, sizeof(struct column));
	if (!p.t->col) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	rc = csv_read_header(&p, err);
	if (rc < 0)
		goto out;
	p.is_num = calloc(p.t->cols, sizeof(bool));
	if (!p.is_num) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if ((rc = csv_apply_schema(&p, err)) < 0 || (rc = csv_count_rows(&p, &cap_rows, err)) < 0 ||
	    (rc = csv_alloc_columns(&p, cap_rows, err)) < 0 ||
	    (rc = csv_read_rows(&p, cap_rows, err)) < 0)
		goto out;
	for (size_t j = 0; j < p.t->cols; j++) {
		p.t->col[j].kind = p.is_num[j] ? MECH_COL_NUMERIC : MECH_COL_CATEGORICAL;
		if (p.is_num[j]) {
			free(p.t->col[j].slots);
			p.t->col[j].slots = NULL;
			p.t->col[j].nslots = 0;
		}
	}
	*ret = p.t;
	p.t = NULL;
out:
	free(p.is_num);
	free(p.c);
	mech_table_free(p.t);
	return rc;
}

size_t mech_table_rows(const mech_table *t)
{
	return t->rows;
}

size_t mech_table_bytes(const mech_table *t)
{
	size_t n = sizeof(*t) + DPG_MAX_CSV_COLUMNS * sizeof(struct column);

	for (size_t j = 0; j < t->cols; j++) {
		const struct column *c = &t->col[j];

		n += strlen(c->name) + 1 + c->nslots * sizeof(uint32_t);
		n += t->rows * (c->num ? sizeof(double) : sizeof(uint32_t));
		/* The dict array doubles as it grows: at most twice its count. */
		n += 2 * c->ndict * sizeof(char *);
		for (size_t k = 0; k < c->ndict; k++)
			n += strlen(c->dict[k]) + 1;
	}
	return n;
}

size_t mech_table_columns(const mech_table *t)
{
	return t->cols;
}

const char *mech_table_column_name(const mech_table *t, size_t j)
{
	return j < t->cols ? t->col[j].name : NULL;
}

mech_col_kind mech_table_column_kind(const mech_table *t, size_t j)
{
	return t->col[j].kind;
}

size_t mech_table_column_index(const mech_table *t, const char *name)
{
	for (size_t j = 0; name && j < t->cols; j++)
		if (!strcmp(t->col[j].name, name))
			return j;
	return t->cols;
}

static int find_column(const mech_table *t, const char *name, mech_col_kind kind,
		       const struct column **ret, acct_error *err)
{
	size_t j = mech_table_column_index(t, name);

	if (j == t->cols)
		return acct_error_set(err, ACCT_EINVAL, "/column", "unknown column '%.64s'",
				      name ? name : "");
	if (t->col[j].kind != kind)
		return acct_error_set(err, ACCT_EINVAL, "/column", "column '%.64s' is not %s", name,
				      kind == MECH_COL_NUMERIC ? "numeric" : "categorical");
	*ret = &t->col[j];
	return 0;
}

static int check_eps(double eps, acct_error *err)
{
	if (!(isfinite(eps) && eps > 0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "must be finite and > 0");
	return 0;
}

/*
 * Epsilon for a count released with discrete Laplace noise of scale
 * `width` / epsilon (width: the count's L1 sensitivity over its share of
 * epsilon).  The scale must stay within DPG_MECH_DLAP_{MIN,MAX}_SCALE; the
 * caller gave epsilon, not a scale, so the error names /epsilon.
 */
static int check_dlap_eps(double eps, double width, acct_error *err)
{
	double scale = width / eps;

	if (!(scale >= DPG_MECH_DLAP_MIN_SCALE && scale <= DPG_MECH_DLAP_MAX_SCALE))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "must be in [%g, %g] for this query",
				      width / DPG_MECH_DLAP_MAX_SCALE, width / DPG_MECH_DLAP_MIN_SCALE);
	return 0;
}

static int check_bounds(double lo, double hi, acct_error *err)
{
	if (!isfinite(lo))
		return acct_error_set(err, ACCT_EINVAL, "/lo", "must be a finite number");
	if (!(isfinite(hi) && hi > lo))
		return acct_error_set(err, ACCT_EINVAL, "/hi", "must be finite and > lo");
	return 0;
}

/* ---- queries ---- */

int mech_table_count(mech_rng *rng, const mech_table *t, double epsilon, int64_t *ret,
		     acct_event **ret_event, acct_error *err)
{
	int64_t n = (int64_t)t->rows;
	int rc = check_eps(epsilon, err);

	/* Adding or removing a row moves the count by 1: discrete Laplace of
	 * scale 1/eps is eps-DP (under replace the count is public anyway). */
	if (rc == 0)
		rc = check_dlap_eps(epsilon, 1.0, err);
	if (rc < 0)
		return rc;
	return mech_discrete_laplace(rng, &n, 1, 1, 1.0 / epsilon, ret, ret_event, err);
}

/* Sensitivity of a clamped sum: add/remove max(|lo|, |hi|), replace hi - lo
 * rounded up (to nearest, 1 - (-1e-300) is 1, and a row could move the grid
 * sum by one unit more than the event states). */
static double sum_sensitivity(double lo, double hi, acct_neighbor nb)
{
	return nb == ACCT_REPLACE ? acct_add_up(hi, -lo) : fmax(fabs(lo), fabs(hi));
}

/*
 * Releases the sum of the column's values clamped to [lo, hi] with Laplace
 * noise of scale `scale`, computed exactly on the noise grid: each clamped
 * value x becomes floor(x / g) (g = 2^-shift, mech_noise.c's grid), the
 * integers are added exactly in 128 bits, and exact discrete Laplace noise
 * in grid units is added.  A floating-point sum would have a rounding error
 * that depends on the data and can exceed the stated sensitivity; the
 * integer sum cannot.  Adding or removing a row moves it by
 * |floor(v / g)| <= ceil(max(|lo|, |hi|) / g); replacing one by at most
 * ceil((hi - lo) / g): the event's integer sensitivity ceil(sens / g).
 */
static int laplace_clamped_sum(mech_rng *rng, const struct column *c, size_t rows, double lo,
			       double hi, double sens, double scale, double *ret,
			       acct_event **ret_event, acct_error *err)
{
	__int128 k = 0;
	uint64_t num, den;
	int64_t z;
	int shift, rc;
	double dz;
	acct_event *ev;

	if (mech__laplace_grid(scale, &shift, &num, &den) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "epsilon out of range");
	/* Refused at a tiny epsilon's coarse grid, from lo, hi and epsilon
	 * alone, as the Laplace release is. */
	rc = mech__grid_units(sens, shift, &dz, err);
	if (rc < 0)
		return rc;
	/* The 128-bit sum holds rows x max(|lo|, |hi|) 2^shift below 2^100,
	 * checked at the most rows a table can hold, not at the private row
	 * count, so that the refusal tells nothing of it. */
	if (!(dz <= 0x1p53) ||
	    !(ldexp(fmax(fabs(lo), fabs(hi)), shift) < 0x1p100 / (double)DPG_MAX_CSV_ROWS))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "epsilon too large for the clamping bounds");
	for (size_t i = 0; i < rows; i++) {
		double x = c->num[i] < lo ? lo : c->num[i] > hi ? hi : c->num[i];

		k += (__int128)floor(ldexp(x, shift));
	}
	rc = mech_sample_discrete_laplace(rng, num, den, &z);
	if (rc < 0)
		return acct_error_set(err, rc, "", "noise sampling failed");
	ev = acct_event_new(ACCT_EV_DISCRETE_LAPLACE);
	if (!ev)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	ev->u.discrete_laplace.noise_parameter = nextafter((double)den / (double)num, INFINITY);
	ev->u.discrete_laplace.sensitivity = dz;
	*ret = mech__grid_value(k + z, shift);
	*ret_event = ev;
	return 0;
}

int mech_table_sum(mech_rng *rng, const mech_table *t, const char *column, double lo, double hi,
		   double epsilon, acct_neighbor neighbor, double *ret, acct_event **ret_event,
		   acct_error *err)
{
	const struct column *c = NULL;
	double sens;
	int rc;

	if ((rc = find_column(t, column, MECH_COL_NUMERIC, &c, err)) < 0 ||
	    (rc = check_bounds(lo, hi, err)) < 0 || (rc = check_eps(epsilon, err)) < 0)
		return rc;
	sens = sum_sensitivity(lo, hi, neighbor);
	return laplace_clamped_sum(rng, c, t->rows, lo, hi, sens, sens / epsilon, ret, ret_event,
				   err);
}

int mech_table_mean(mech_rng *rng, const mech_table *t, const char *column, double lo,
		    double hi, double epsilon, acct_neighbor neighbor, double *ret,
		    acct_event **ret_event, acct_error *err)
{
	const struct column *c = NULL;
	acct_event *ev = NULL, *e_sum = NULL, *e_cnt = NULL;
	double sens, noisy_sum, mean;
	int64_t noisy_count, n = (int64_t)t->rows;
	int rc;

	if ((rc = find_column(t, column, MECH_COL_NUMERIC, &c, err)) < 0 ||
	    (rc = check_bounds(lo, hi, err)) < 0 || (rc = check_eps(epsilon, err)) < 0 ||
	    (neighbor != ACCT_REPLACE && (rc = check_dlap_eps(epsilon, 2.0, err)) < 0))
		return rc;
	/* Noisy sum and noisy count with epsilon/2 each (basic composition);
	 * mean = noisy sum / max(noisy count, 1), clamped to [lo, hi] (post-
	 * processing).  Under replace the count is public: all of epsilon goes
	 * to the sum. */
	sens = sum_sensitivity(lo, hi, neighbor);
	if (neighbor == ACCT_REPLACE) {
		rc = laplace_clamped_sum(rng, c, t->rows, lo, hi, sens, sens / epsilon, &noisy_sum,
					 &ev, err);
		if (rc < 0)
			return rc;
		noisy_count = n;
	} else {
		rc = laplace_clamped_sum(rng, c, t->rows, lo, hi, sens, sens / (epsilon / 2),
					 &noisy_sum, &e_sum, err);
		if (rc == 0)
			rc = mech_discrete_laplace(rng, &n, 1, 1, 2.0 / epsilon, &noisy_count, &e_cnt, err);
		if (rc < 0)
			goto fail;
		ev = acct_event_composed((acct_event *[]){e_sum, e_cnt}, 2);
		e_sum = e_cnt = NULL;
		if (!ev) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto fail;
		}
	}
	mean = noisy_sum / (double)(noisy_count < 1 ? 1 : noisy_count);
	*ret = mean < lo ? lo : mean > hi ? hi : mean;
	*ret_event = ev;
	return 0;
fail:
	acct_event_free(ev);
	acct_event_free(e_sum);
	acct_event_free(e_cnt);
	return rc;
}

struct category_key {
	const char *s;
	size_t k;
};

static int cmp_category_key(const void *a, const void *b)
{
	const struct category_key *x = a, *y = b;
	int c = strcmp(x->s, y->s);

	return c ? c : (x->k > y->k) - (x->k < y->k);
}

/*
 * Checks a histogram's public categories: each a string, none repeated.
 * Names the index a scan in order would stop at (the first that is not a
 * string or repeats an earlier one), found by sorting: O(n log n) at the
 * DPG_MAX_HISTOGRAM_BINS a query may have, where comparing every pair
 * took seconds.
 */
static int check_categories(const char *const *cats, size_t n, acct_error *err)
{
	struct category_key *keys = malloc((n ? n : 1) * sizeof(*keys));
	const char *why = "must be a string";
	char where[ACCT_ERROR_WHERE_BYTES];
	size_t m = 0, bad = SIZE_MAX;

	if (!keys)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	while (m < n && cats[m]) {
		keys[m].s = cats[m];
		keys[m].k = m;
		m++;
	}
	if (m < n)
		bad = m;
	qsort(keys, m, sizeof(*keys), cmp_category_key);
	/* Equal strings sort by index: each but the first of a run repeats
	 * an earlier one. */
	for (size_t i = 1; i < m; i++)
		if (keys[i].k < bad && !strcmp(keys[i].s, keys[i - 1].s)) {
			bad = keys[i].k;
			why = "repeats a category";
		}
	free(keys);
	if (bad == SIZE_MAX)
		return 0;
	snprintf(where, sizeof(where), "/categories/%zu", bad);
	return acct_error_set(err, ACCT_EINVAL, where, "%s", why);
}

int mech_table_histogram(mech_rng *rng, const mech_table *t, const char *column,
			 const char *const *categories, size_t n_categories, double epsilon,
			 acct_neighbor neighbor, int64_t *ret_counts, acct_event **ret_event,
			 acct_error *err)
{
	const struct column *c = NULL;
	int64_t *counts = NULL;
	size_t *map = NULL;
	int rc;

	if ((rc = find_column(t, column, MECH_COL_CATEGORICAL, &c, err)) < 0 ||
	    (rc = check_eps(epsilon, err)) < 0 ||
	    (rc = check_dlap_eps(epsilon, neighbor == ACCT_REPLACE ? 2.0 : 1.0, err)) < 0)
		return rc;
	if (n_categories < 1 || n_categories > DPG_MAX_HISTOGRAM_BINS)
		return acct_error_set(err, ACCT_EINVAL, "/categories", "need 1 to %d categories",
				      DPG_MAX_HISTOGRAM_BINS);
	/* The bins are the caller's public categories: which values occur in
	 * the data is itself private, so the table's dictionary never shapes
	 * the answer (nor the errors: they are checked on the categories
	 * alone).  Rows with other values fall in no bin. */
	if ((rc = check_categories(categories, n_categories, err)) < 0)
		return rc;
	counts = calloc(n_categories, sizeof(int64_t));
	map = malloc((c->ndict ? c->ndict : 1) * sizeof(size_t));
	if (!counts || !map) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t d = 0; d < c->ndict; d++)
		map[d] = SIZE_MAX;
	for (size_t k = 0; k < n_categories; k++) {
		size_t d = dict_find(c, categories[k]);

		if (d != SIZE_MAX)
			map[d] = k;
	}
	for (size_t i = 0; i < t->rows; i++)
		if (map[c->cat[i]] != SIZE_MAX)
			counts[map[c->cat[i]]]++;
	/* One row changes one bin by 1 (add/remove, L1 = 1) or two bins by 1
	 * (replace, L1 = 2). */
	rc = mech_discrete_laplace(rng, counts, n_categories, neighbor == ACCT_REPLACE ? 2 : 1,
				   (neighbor == ACCT_REPLACE ? 2.0 : 1.0) / epsilon, ret_counts,
				   ret_event, err);
out:
	free(counts);
	free(map);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The grid's width (finite, so every grid point is) and q. */
static int quantile_check_grid(double q, double lo, double hi, acct_error *err)
{
	if (!isfinite(hi - lo))
		return acct_error_set(err, ACCT_EINVAL, "/hi", "hi - lo must be a finite number");
	if (!(q >= 0 && q <= 1))
		return acct_error_set(err, ACCT_EINVAL, "/q", "must be in [0, 1]");
	return 0;
}

/* The checks a quantile makes before it touches the data; sets *ret_col. */
static int quantile_check(const mech_table *t, const char *column, double q, double lo,
			  double hi, double epsilon, const struct column **ret_col, acct_error *err)
{
	int rc;

	if ((rc = find_column(t, column, MECH_COL_NUMERIC, ret_col, err)) < 0 ||
	    (rc = check_bounds(lo, hi, err)) < 0 || (rc = check_eps(epsilon, err)) < 0 ||
	    (rc = quantile_check_grid(q, lo, hi, err)) < 0)
		return rc;
	/* Every score below must be finite whatever the data: an error there,
	 * answered before any charge, would tell the data (with epsilon near
	 * 1e-307 a log term overflowed exactly when an interval was wider than
	 * a threshold the caller chose, which read the minimum for free).  An
	 * interval holds at most 2^32 + 1 grid points, log below 23, so at this
	 * epsilon or above |score| <= n + (2 / epsilon) 23 stays far below
	 * DBL_MAX. */
	if (!(epsilon >= QUANTILE_MIN_EPSILON))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon", "must be at least %g for a quantile",
				      QUANTILE_MIN_EPSILON);
	/* No limit on the rows but the upload's own: a cap below it would
	 * refuse, uncharged, exactly when the private row count passed it. */
	if (t->rows > (size_t)DPG_MAX_CSV_ROWS)
		return acct_error_set(err, ACCT_EINVAL, "/column",
				      "quantiles are limited to tables of %lld rows",
				      (long long)DPG_MAX_CSV_ROWS);
	return 0;
}

/* Fills a[0 .. n + 1] with 0, the sorted grid indexes a(x) of the n rows
 * clamped to [lo, hi], and M. */
static void quantile_grid_indexes(const struct column *c, size_t n, double lo, double hi,
				  uint64_t *a)
{
	const double grid_points = (double)QUANTILE_GRID_POINTS, width = hi - lo;

	a[0] = 0;
	for (size_t i = 0; i < n; i++) {
		double x = c->num[i] < lo ? lo : c->num[i] > hi ? hi : c->num[i];
		double pos = ceil(ldexp((x - lo) / width, QUANTILE_GRID_BITS));

		a[i + 1] = pos <= 0 ? 0 : pos >= grid_points ? (uint64_t)grid_points : (uint64_t)pos;
	}
	a[n + 1] = (uint64_t)grid_points;
	qsort(a + 1, n, sizeof(uint64_t), cmp_u64);
}

/* The sorted grid indexes (quantile_grid_indexes) and the centre q n
 * rounded to a multiple of 2^-20, so that i - c is exact. */
static void quantile_ranks(const struct column *c, size_t n, double q, double lo, double hi,
			   uint64_t *a, double *ret_centre)
{
	quantile_grid_indexes(c, n, lo, hi, a);
	*ret_centre = ldexp(nearbyint(ldexp(q * (double)n, 20)), -20);
}

int mech_table_quantile_ranks(const mech_table *t, const char *column, double q, double lo,
			      double hi, uint64_t *a, double *ret_centre, acct_error *err)
{
	const struct column *c = NULL;
	int rc;

	if ((rc = find_column(t, column, MECH_COL_NUMERIC, &c, err)) < 0 ||
	    (rc = check_bounds(lo, hi, err)) < 0 || (rc = quantile_check_grid(q, lo, hi, err)) < 0)
		return rc;
	quantile_ranks(c, t->rows, q, lo, hi, a, ret_centre);
	return 0;
}

/* The score of each non-empty interval i between a[i] and a[i + 1]:
 * -|i - c| + (2 / eps) log(count).  Writes the scores and their intervals'
 * indexes to scores and which; returns how many. */
static size_t quantile_scores(const uint64_t *a, size_t n, double centre, double epsilon,
			      double *scores, size_t *which)
{
	size_t m = 0;

	for (size_t i = 0; i <= n; i++) {
		uint64_t count = a[i + 1] - a[i];

		if (count > 0) {
			scores[m] = -fabs((double)i - centre) + (2.0 / epsilon) * log((double)count);
			which[m++] = i;
		}
	}
	return m;
}

/* Draws a uniform grid index in [a_lo, a_hi) and writes its point in
 * [lo, hi] to *ret. */
static int quantile_point(mech_rng *rng, uint64_t a_lo, uint64_t a_hi, double lo, double hi,
			  double *ret, acct_error *err)
{
	uint64_t u, j;
	double y;
	int rc;

	rc = mech_rng_uint_below(rng, a_hi - a_lo, &u);
	if (rc < 0)
		return acct_error_set(err, rc, "", "random number generator failed");
	j = a_lo + u;
	y = lo + (hi - lo) * ldexp((double)j, -QUANTILE_GRID_BITS);
	*ret = j >= QUANTILE_GRID_POINTS - 1 ? hi : y < lo ? lo : y > hi ? hi : y;
	return 0;
}

int mech_table_quantile(mech_rng *rng, const mech_table *t, const char *column, double q,
			double lo, double hi, double epsilon, double *ret, acct_event **ret_event,
			acct_error *err)
{
	const struct column *c = NULL;
	double *scores = NULL, centre;
	uint64_t *a = NULL;
	size_t *which = NULL, n = t->rows, m, pick;
	acct_event *ev = NULL;
	int rc;

	rc = quantile_check(t, column, q, lo, hi, epsilon, &c, err);
	if (rc < 0)
		return rc;
	/*
	 * Smith 2011's exponential mechanism, on a public grid: the outputs are
	 * the M + 1 points y_j = lo + (hi - lo) j / M, j = 0 .. M (M = 2^32),
	 * and y_j has probability proportional to exp(-eps |r(j) - c| / 2),
	 * r(j) the number of rows at or below it and c = q n (utility
	 * sensitivity 1).  The output is a function of j alone: drawing it as
	 * a + u (b - a) between two data values made which doubles could come
	 * out depend on the data (Mironov 2012), with delta near 0.1 at any
	 * epsilon.  Each row maps to the grid index a(x) = ceil((x - lo) /
	 * (hi - lo) M) (monotone in x), so r(j) = #{rows: a(x) <= j} and the
	 * indexes between two consecutive sorted a's share one r: the interval
	 * i of count a_{i+1} - a_i (an exact integer) is picked by
	 * mech_exponential with the count as the score term (2/eps) log(count),
	 * then a uniform index in it.  c is rounded to a multiple of 2^-20, so
	 * that i - c is exact and the utility's sensitivity exactly 1.
	 */
	a = malloc((n + 2) * sizeof(uint64_t));
	scores = malloc((n + 1) * sizeof(double));
	which = malloc((n + 1) * sizeof(size_t));
	if (!a || !scores || !which) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	quantile_ranks(c, n, q, lo, hi, a, &centre);
	m = quantile_scores(a, n, centre, epsilon, scores, which);
	rc = mech__exponential_over(rng, scores, m, (size_t)DPG_MAX_CSV_ROWS + 1, 1.0, epsilon,
				    &pick, &ev, err);
	if (rc < 0)
		goto out;
	/* mech_exponential's slack covers its own arithmetic on exact scores;
	 * these scores, up to n + (2/eps) 23 in size, carry rounding of their
	 * own: at most 2^-52 (eps (n + 1) + 512) in each exponent, which enters
	 * the privacy loss four times (see mech_select.c).  The event is
	 * public (the ledger shows it), so the slack is taken at the largest
	 * n a table can have, never at the private n, whose every digit the
	 * event's epsilon would otherwise carry. */
	ev->u.exponential_mechanism.epsilon = acct_add_up(
		ev->u.exponential_mechanism.epsilon,
		ldexp(acct_add_up(acct_mul_up(epsilon, (double)DPG_MAX_CSV_ROWS + 1.0), 512.0),
		      -50));
	rc = quantile_point(rng, a[which[pick]], a[which[pick] + 1], lo, hi, ret, err);
	if (rc < 0)
		goto out;
	*ret_event = ev;
	ev = NULL;
out:
	acct_event_free(ev);
	free(a);
	free(scores);
	free(which);
	return rc;
}

const double *mech_table_numeric_values(const mech_table *t, size_t j)
{
	if (!t || j >= t->cols || t->col[j].kind != MECH_COL_NUMERIC)
		return NULL;
	return t->col[j].num;
}

bool mech_table_copy_numeric(const mech_table *t, size_t j, double *x, size_t stride)
{
	const double *v = mech_table_numeric_values(t, j);

	if (!v)
		return false;
	for (size_t i = 0; i < t->rows; i++)
		x[i * stride] = v[i];
	return true;
}

int64_t mech_table_category_of(const mech_table *t, size_t j, size_t i)
{
	if (!t || j >= t->cols || i >= t->rows || t->col[j].kind != MECH_COL_CATEGORICAL)
		return -1;
	return (int64_t)t->col[j].cat[i];
}

size_t mech_table_category_count(const mech_table *t, size_t j)
{
	if (!t || j >= t->cols || t->col[j].kind != MECH_COL_CATEGORICAL)
		return 0;
	return t->col[j].ndict;
}

const char *mech_table_category_name(const mech_table *t, size_t j, size_t k)
{
	if (!t || j >= t->cols || t->col[j].kind != MECH_COL_CATEGORICAL || k >= t->col[j].ndict)
		return NULL;
	return t->col[j].dict[k];
}
