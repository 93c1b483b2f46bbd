/*
 * store_pg.c: the PostgreSQL driver of the store's statement interface
 * (store_sql.h), through libpq.  With store_pg.h, the only place of the
 * store that includes libpq-fe.h.
 *
 * Statements: the store's SQL is written once with ?N placeholders; this
 * driver rewrites them to $N.  A statement the store keeps (the cache of
 * store_sql.c) is a named server-side prepared statement (PQprepare once
 * per connection, then PQexecPrepared); a one-off one runs with
 * PQexecParams, one round trip.  Parameters go as text (numbers printed
 * exactly: %.17g for a double) and blobs as binary; results come back in
 * binary, so a double is read back bit for bit.  A result is read whole at
 * the first step; the rows are then handed out one by one.
 *
 * Round trips: a statement run for its effect alone (BEGIN, a SAVEPOINT,
 * the locks a write transaction takes first) is not sent when the store
 * asks for it: it waits on the connection and goes out with the next
 * statement, in one round trip (libpq's pipeline mode, one Sync after the
 * last).  The server runs them in order and skips the rest after a
 * failure, and the first failure is the answer, so the store sees what it
 * would have seen had it run each alone and stopped there, one statement
 * later.  A charge's BEGIN, row lock and dataset read so take one round
 * trip instead of three; the read still runs after the lock was granted,
 * with its own snapshot.  Only what the store hands to run_later, BEGIN
 * and the locks wait: the store must see at once whether a RELEASE or a
 * ROLLBACK TO failed (spend_batch).
 *
 * Durability and admission: synchronous_commit is set on for every session,
 * so a COMMIT that returned is on the primary's disk (and on a synchronous
 * standby's, where the operator configured one) before any answer goes out.
 * The write transaction is READ COMMITTED; lock_dataset takes the dataset's
 * row FOR UPDATE before its totals are read, so every writer of one
 * dataset, on any server, runs after the one before it committed, and each
 * statement after the lock sees what that writer committed.
 *
 * Failures: serialization_failure, deadlock_detected and lock_not_available
 * are BUSY; unique_violation is CONSTRAINT; a lost connection (class 08,
 * an administrator's shutdown, a session ended by
 * idle_in_transaction_session_timeout, or libpq's own CONNECTION_BAD) is
 * UNAVAILABLE, and the connection is reset when it is next acquired
 * (revive); its named statements are prepared again on first use.  So is
 * a connection whose answer goes DPG_PG_SILENT_S without a byte: every
 * statement is sent, then its result awaited with poll (await_result),
 * since a server that takes statements and answers nothing would block a
 * synchronous call for as long as it is silent.
 *
 * Other servers' commits: lock_dataset, which every write of a dataset
 * takes, also NOTIFYs PG_CHANGE_CHANNEL with the dataset's id, and a
 * listener (srv_store_listen_start) LISTENs on a connection of its own
 * and hands each id to the server's long-poll hub.  Rejected: a trigger
 * on every table (each new table would need one, and the totals row is
 * what every change of a dataset writes anyway), and polling a change
 * counter (a query a second per server, and a second's delay).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "dpg_limits.h"

#include "srv_embedded_pg.h"
#include "store_pg.h"

/* Parameters one statement may take, and columns a number is kept as text
 * for; the store's widest statement has 15 and 18. */
#define PG_MAX_PARAMS 24
#define PG_MAX_COLUMNS 24
/* Reads of an idle connection's socket before it is used: its server's
 * last message and the end of the stream take two. */
#define PG_IDLE_READS 4
#define PG_NUMBER_TEXT 32
/* Statements that may wait on a connection for the next one (BEGIN, a
 * SAVEPOINT, the dataset's lock), and the longest ?1 one may hold (a
 * dataset id, a lock's name). */
#define PG_MAX_DEFERRED 4
#define PG_DEFERRED_PARAM_BYTES 128
/* How long a statement waits for a row lock before it fails as BUSY:
 * SQLite's busy timeout (store_sqlite.c), so that both engines answer 503
 * after the same wait. */
#define PG_LOCK_TIMEOUT "30s"
/* How long a session may sit in a transaction waiting for its client
 * before PostgreSQL ends it (and rolls it back, releasing its locks): a
 * server that froze (SIGSTOP, a paused VM, a cut network) while it held a
 * dataset's row would otherwise hold it for good, and every other server's
 * writes of that dataset, and the spends batched with them, would fail
 * after PG_LOCK_TIMEOUT.  Well below PG_LOCK_TIMEOUT, so that a waiter gets
 * the row before its own wait ends; well above what dpgate computes between
 * two statements of one transaction, which is milliseconds (mechanisms and
 * table queries draw before the transaction; inside it run only the spend's
 * own statements, a PATE batch's inserts, a job's end, a lease renewal and
 * the migrations' DDL, each a statement after the other; docs/operations.md,
 * "Several servers on one PostgreSQL").  A session so ended is a lost
 * connection (failure_class, revive). */
#define PG_IDLE_TX_TIMEOUT "10s"
/* The channel a committed change of a dataset is announced on; its
 * payload is the dataset's id. */
#define PG_CHANGE_CHANNEL "dpgate_datasets"
/* pg_advisory_xact_lock's key for the migrations: "dpgate" in ASCII. */
#define PG_MIGRATION_LOCK_KEY "110425050900581" /* 0x647067617465 */

/* Type OIDs of pg_type.h (server headers are not installed with libpq). */
enum {
	PG_BOOLOID = 16,
	PG_BYTEAOID = 17,
	PG_TEXTOID = 25,
	PG_INT8OID = 20,
	PG_INT2OID = 21,
	PG_INT4OID = 23,
	PG_FLOAT4OID = 700,
	PG_FLOAT8OID = 701,
};

/* A kept statement waiting to go out with the next one (file's comment). */
struct pgd_deferred {
	struct pgd_stmt *st;
	bool has_param;
	char param[PG_DEFERRED_PARAM_BYTES]; /* its ?1 */
};

struct pgd_conn {
	struct srv__conn base;
	PGconn *pg;
	unsigned generation; /* bumped by every reset: named statements gone */
	unsigned next_name;
	int64_t changes;
	int errclass;
	char err[256];
	struct pgd_deferred deferred[PG_MAX_DEFERRED];
	int ndeferred;
	bool begin_deferred; /* deferred[0] is a BEGIN: no transaction on the server yet */
	bool broken;         /* a pipeline went wrong: made again at the next revive */
	bool silent;         /* given up on after DPG_PG_SILENT_S without an answer */
	bool patient;        /* migrating: no silent limit */
};

struct pgd_stmt {
	struct srv__stmt base;
	struct pgd_conn *c;
	char *sql;           /* with $N placeholders */
	char name[16];       /* a kept statement's server-side name, else "" */
	unsigned generation; /* c's generation when prepared; 0: not yet */
	int nparams;
	/* 0 (the server infers it) for a parameter the SQL names; text for
	 * one it skips, whose type nothing else would give. */
	Oid types[PG_MAX_PARAMS];
	const char *values[PG_MAX_PARAMS];
	int lengths[PG_MAX_PARAMS];
	int formats[PG_MAX_PARAMS];
	char number[PG_MAX_PARAMS][PG_NUMBER_TEXT];
	char as_text[PG_MAX_COLUMNS][PG_NUMBER_TEXT];
	PGresult *res;
	int row, rows;
	bool ran;
};

static const struct srv__sql_driver pgd_driver;

static struct pgd_conn *conn_of(srv__conn *c)
{
	return (struct pgd_conn *)c;
}

static struct pgd_stmt *stmt_of(srv__stmt *s)
{
	return (struct pgd_stmt *)s;
}

/* Keeps the message of a failure on c, on one line. */
static void keep_error(struct pgd_conn *c, const char *msg)
{
	size_t n = 0;

	for (; msg && *msg && n + 1 < sizeof(c->err); msg++)
		c->err[n++] = (*msg == '\n' || *msg == '\r') ? ' ' : *msg;
	while (n > 0 && c->err[n - 1] == ' ')
		n--;
	c->err[n] = '\0';
}

static int64_t monotonic_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* How long an answer may go without a byte (DPG_PG_SILENT_S; shorter
 * under a test's DPGATE_TEST_PG_SILENT_MS). */
static int64_t silent_limit_ms(void)
{
#ifdef DPG_TESTING
	const char *v = getenv("DPGATE_TEST_PG_SILENT_MS");

	if (v && atoll(v) > 0)
		return atoll(v);
#endif
	return (int64_t)DPG_PG_SILENT_S * 1000;
}

/* Gives c up: PostgreSQL sent nothing for the limit.  Shutting its socket
 * down makes every later libpq call on it return at once, as on a lost
 * connection, and the next revive makes it again. */
static void give_up(struct pgd_conn *c)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "PostgreSQL sent nothing for %lld ms: connection given up",
		 (long long)silent_limit_ms());
	keep_error(c, msg);
	c->silent = c->broken = true;
	c->errclass = SRV__SQL_UNAVAILABLE;
	if (PQsocket(c->pg) >= 0)
		shutdown(PQsocket(c->pg), SHUT_RDWR);
}

/*
 * The next result of what was sent on c, as PQgetResult, but waiting for
 * it only while PostgreSQL keeps answering: after silent_limit_ms() with
 * no byte, c is given up (give_up) and the result is libpq's of a lost
 * connection.  A long answer that keeps arriving (a large read) never
 * times out, nor does any answer while c migrates (pgd_migrate_around).
 */
static PGresult *await_result(struct pgd_conn *c)
{
	int64_t until = monotonic_ms() + silent_limit_ms();

	while (!c->silent && PQisBusy(c->pg)) {
		struct pollfd p = {.fd = PQsocket(c->pg), .events = POLLIN};
		int64_t left = c->patient ? 60000 : until - monotonic_ms();
		int n;

		if (p.fd < 0)
			break;
		if (left <= 0) {
			give_up(c);
			break;
		}
		n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (!PQconsumeInput(c->pg))
			break;
		until = monotonic_ms() + silent_limit_ms();
	}
	return PQgetResult(c->pg);
}

/*
 * What PQexec would answer for what was just sent on c (`sent`: whether
 * libpq took it), through await_result: the last result, or the first
 * failure (libpq's rule for a string of several statements); NULL when
 * nothing was sent or answered.
 */
static PGresult *exec_wait(struct pgd_conn *c, int sent)
{
	PGresult *keep = NULL, *r;
	bool keep_failed = false;

	if (!sent)
		return NULL;
	while ((r = await_result(c))) {
		ExecStatusType st = PQresultStatus(r);
		bool failed = st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
			      st != PGRES_EMPTY_QUERY;

		if (keep_failed) {
			PQclear(r);
			continue;
		}
		PQclear(keep);
		keep = r;
		keep_failed = failed;
	}
	return keep;
}

/* A failed result's class (see the file's comment); keeps its message. */
static int failure_class(struct pgd_conn *c, const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	int cls = SRV__SQL_ERROR;

	/* Its own message (give_up) says why the connection was closed. */
	if (c->silent)
		return c->errclass = SRV__SQL_UNAVAILABLE;
	keep_error(c, res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg));
	if (PQstatus(c->pg) == CONNECTION_BAD || !state || strncmp(state, "08", 2) == 0 ||
	    strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 ||
	    strcmp(state, "57P03") == 0 || strcmp(state, "25P03") == 0)
		cls = SRV__SQL_UNAVAILABLE;
	else if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
		 strcmp(state, "55P03") == 0)
		cls = SRV__SQL_BUSY;
	else if (strcmp(state, "23505") == 0)
		cls = SRV__SQL_CONSTRAINT;
	c->errclass = cls;
	return cls;
}

/*
 * The store's SQL with ?N rewritten to $N (quoted text left alone), the
 * highest N, and in named[N - 1] whether ?N appears (a listing binds ?1
 * whether or not its SQL uses it); NULL when out of memory or N is past
 * PG_MAX_PARAMS.
 */
static char *dollar_sql(const char *sql, int *ret_nparams, bool named[PG_MAX_PARAMS])
{
	char *out = malloc(strlen(sql) + 1), *o = out;
	bool quoted = false;
	int most = 0;

	if (!out)
		return NULL;
	for (const char *p = sql; *p; p++) {
		if (*p == '\'')
			quoted = !quoted;
		if (!quoted && *p == '?' && p[1] >= '1' && p[1] <= '9') {
			int n = (int)strtol(p + 1, NULL, 10);

			if (n > PG_MAX_PARAMS) {
				free(out);
				return NULL;
			}
			most = n > most ? n : most;
			named[n - 1] = true;
			*o++ = '$';
			continue;
		}
		*o++ = *p;
	}
	*o = '\0';
	*ret_nparams = most;
	return out;
}

static srv__stmt *pgd_prepare(srv__conn *conn, const char *sql, bool keep)
{
	struct pgd_conn *c = conn_of(conn);
	struct pgd_stmt *st = calloc(1, sizeof(*st));
	bool named[PG_MAX_PARAMS] = {false};

	if (!st)
		return NULL;
	st->base.drv = &pgd_driver;
	st->c = c;
	st->sql = dollar_sql(sql, &st->nparams, named);
	if (!st->sql) {
		free(st);
		return NULL;
	}
	for (int i = 0; i < st->nparams; i++)
		st->types[i] = named[i] ? 0 : PG_TEXTOID;
	if (keep)
		snprintf(st->name, sizeof(st->name), "s%u", ++c->next_name);
	return &st->base;
}

static void pgd_clear_result(struct pgd_stmt *st)
{
	PQclear(st->res);
	st->res = NULL;
	st->ran = false;
	st->row = -1;
	st->rows = 0;
}

static void pgd_finalize(srv__stmt *s)
{
	struct pgd_stmt *st = stmt_of(s);

	pgd_clear_result(st);
	free(st->sql);
	free(st);
}

static void pgd_reset(srv__stmt *s)
{
	struct pgd_stmt *st = stmt_of(s);

	pgd_clear_result(st);
	for (int i = 0; i < st->nparams; i++) {
		st->values[i] = NULL;
		st->lengths[i] = 0;
		st->formats[i] = 0;
	}
}

/* The slot of parameter i (1-based), or -1 past the statement's. */
static int param_slot(struct pgd_stmt *st, int i)
{
	return i >= 1 && i <= st->nparams ? i - 1 : -1;
}

static void pgd_bind_int64(srv__stmt *s, int i, int64_t v)
{
	struct pgd_stmt *st = stmt_of(s);
	int k = param_slot(st, i);

	if (k < 0)
		return;
	snprintf(st->number[k], PG_NUMBER_TEXT, "%" PRId64, v);
	st->values[k] = st->number[k];
}

static void pgd_bind_double(srv__stmt *s, int i, double v)
{
	struct pgd_stmt *st = stmt_of(s);
	int k = param_slot(st, i);

	if (k < 0)
		return;
	if (isnan(v))
		snprintf(st->number[k], PG_NUMBER_TEXT, "NaN");
	else if (isinf(v))
		snprintf(st->number[k], PG_NUMBER_TEXT, "%sInfinity", v < 0 ? "-" : "");
	else /* 17 significant digits: read back as the same double */
		snprintf(st->number[k], PG_NUMBER_TEXT, "%.17g", v);
	st->values[k] = st->number[k];
}

static void pgd_bind_text(srv__stmt *s, int i, const char *v)
{
	struct pgd_stmt *st = stmt_of(s);
	int k = param_slot(st, i);

	if (k >= 0)
		st->values[k] = v;
}

static void pgd_bind_blob(srv__stmt *s, int i, const void *v, size_t n)
{
	struct pgd_stmt *st = stmt_of(s);
	int k = param_slot(st, i);

	if (k < 0)
		return;
	st->values[k] = v ? v : "";
	st->lengths[k] = (int)n;
	st->formats[k] = 1;
}

/* Runs st alone on the server (prepared first when this connection has
 * not yet): its whole result into st->res, or a failure's class. */
static int run_alone(struct pgd_stmt *st)
{
	struct pgd_conn *c = st->c;
	ExecStatusType status;

	if (st->name[0] && st->generation != c->generation) {
		PGresult *p = exec_wait(c, PQsendPrepare(c->pg, st->name, st->sql, st->nparams,
							 st->types));
		int ok = PQresultStatus(p) == PGRES_COMMAND_OK;
		int cls = ok ? SRV__SQL_DONE : failure_class(c, p);

		PQclear(p);
		if (!ok)
			return cls;
		st->generation = c->generation;
	}
	st->res = exec_wait(c, st->name[0] ?
		PQsendQueryPrepared(c->pg, st->name, st->nparams, st->values, st->lengths, st->formats,
				    1) :
		PQsendQueryParams(c->pg, st->sql, st->nparams, st->types, st->values, st->lengths,
				  st->formats, 1));
	status = PQresultStatus(st->res);
	if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && status != PGRES_EMPTY_QUERY)
		return failure_class(c, st->res);
	return SRV__SQL_DONE;
}

/* What one result of a pipeline answers: st's PREPARE or its execution. */
struct pgd_op {
	struct pgd_stmt *st;
	bool prepare;
};

/* Queues st in the pipeline, its PREPARE first when this connection has
 * not had it (counted as done; undone if it fails); false when libpq
 * could not queue it. */
static bool pipe_send(struct pgd_stmt *st, struct pgd_op *ops, int *n)
{
	struct pgd_conn *c = st->c;

	if (st->name[0] && st->generation != c->generation) {
		if (!PQsendPrepare(c->pg, st->name, st->sql, st->nparams, st->types))
			return false;
		st->generation = c->generation;
		ops[(*n)++] = (struct pgd_op){st, true};
	}
	if (!(st->name[0] ? PQsendQueryPrepared(c->pg, st->name, st->nparams, st->values,
						st->lengths, st->formats, 1) :
			    PQsendQueryParams(c->pg, st->sql, st->nparams, st->types, st->values,
					      st->lengths, st->formats, 1)))
		return false;
	ops[(*n)++] = (struct pgd_op){st, false};
	return true;
}

/* Reads the pipeline's results in order (each is followed by a null, the
 * Sync's is not): SRV__SQL_DONE or the first failure's class, st's result
 * kept in st->res.  Sets *broken when the results do not come as sent. */
static int pipe_collect(struct pgd_conn *c, const struct pgd_op *ops, int n,
			struct pgd_stmt *st, bool *broken)
{
	int rc = SRV__SQL_DONE;
	PGresult *r;

	for (int i = 0; i < n; i++) {
		ExecStatusType status;

		r = await_result(c);
		if (!r || c->silent) {
			PQclear(r);
			*broken = true;
			return rc;
		}
		status = PQresultStatus(r);
		if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
		    status != PGRES_EMPTY_QUERY) {
			if (ops[i].prepare)
				ops[i].st->generation = 0;
			if (rc == SRV__SQL_DONE) /* later ones were skipped for it */
				rc = failure_class(c, r);
		} else if (!ops[i].prepare && ops[i].st == st && i == n - 1) {
			st->res = r;
			r = NULL;
		}
		PQclear(r);
		while ((r = await_result(c)))
			PQclear(r);
	}
	r = await_result(c);
	*broken = c->silent || PQresultStatus(r) != PGRES_PIPELINE_SYNC;
	PQclear(r);
	return rc;
}

/*
 * Sends the statements waiting on c, then st (NULL: none), in one round
 * trip (file's comment); st's result goes to st->res.  SRV__SQL_DONE, or
 * the first failure's class.  A pipeline whose results do not come back as
 * sent leaves the connection to be made again (revive).
 */
static int pipe_run(struct pgd_conn *c, struct pgd_stmt *st)
{
	struct pgd_op ops[2 * (PG_MAX_DEFERRED + 1)];
	bool sent = PQenterPipelineMode(c->pg) == 1, broken = false;
	int n = 0, rc = SRV__SQL_DONE;

	for (int i = 0; sent && i < c->ndeferred; i++) {
		struct pgd_deferred *d = &c->deferred[i];

		pgd_reset(&d->st->base);
		if (d->has_param)
			pgd_bind_text(&d->st->base, 1, d->param);
		sent = pipe_send(d->st, ops, &n);
	}
	c->ndeferred = 0;
	c->begin_deferred = false;
	if (sent && st)
		sent = pipe_send(st, ops, &n);
	if (sent && PQpipelineSync(c->pg) == 1)
		rc = pipe_collect(c, ops, n, st, &broken);
	else
		broken = true;
	if (broken || PQexitPipelineMode(c->pg) != 1) {
		c->broken = true;
		if (rc == SRV__SQL_DONE)
			rc = failure_class(c, NULL);
	}
	if (rc != SRV__SQL_DONE && st) {
		PQclear(st->res);
		st->res = NULL;
	}
	return rc;
}

/* Runs st on the server, with whatever waits on its connection: its whole
 * result into st->res, or a failure. */
static int pgd_run(struct pgd_stmt *st)
{
	struct pgd_conn *c = st->c;
	int rc = c->ndeferred > 0 ? pipe_run(c, st) : run_alone(st);
	const char *tag;

	if (rc != SRV__SQL_DONE) {
		pgd_clear_result(st);
		return rc;
	}
	tag = PQcmdStatus(st->res);
	if (strncmp(tag, "INSERT", 6) == 0 || strncmp(tag, "UPDATE", 6) == 0 ||
	    strncmp(tag, "DELETE", 6) == 0)
		c->changes = strtoll(PQcmdTuples(st->res), NULL, 10);
	st->ran = true;
	st->row = -1;
	st->rows = PQresultStatus(st->res) == PGRES_TUPLES_OK ? PQntuples(st->res) : 0;
	return SRV__SQL_DONE;
}

static int pgd_step(srv__stmt *s)
{
	struct pgd_stmt *st = stmt_of(s);

	if (!st->ran) {
		int rc = pgd_run(st);

		if (rc != SRV__SQL_DONE)
			return rc;
	}
	if (st->row + 1 < st->rows) {
		st->row++;
		return SRV__SQL_ROW;
	}
	st->row = st->rows;
	return SRV__SQL_DONE;
}

/* Whether the current row has column col. */
static bool has_value(struct pgd_stmt *st, int col)
{
	return st->res && st->row >= 0 && st->row < st->rows && col >= 0 &&
	       col < PQnfields(st->res);
}

static bool pgd_is_null(srv__stmt *s, int col)
{
	struct pgd_stmt *st = stmt_of(s);

	return !has_value(st, col) || PQgetisnull(st->res, st->row, col);
}

/* A big-endian integer of n bytes. */
static int64_t be_int(const char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = (v << 8) | (unsigned char)p[i];
	if (n < 8 && (v >> (8 * n - 1)) & 1) /* sign-extend */
		v |= ~(uint64_t)0 << (8 * n);
	return (int64_t)v;
}

static double be_double(const char *p, int n)
{
	if (n == 4) {
		uint32_t bits = (uint32_t)be_int(p, 4);
		float f;

		memcpy(&f, &bits, sizeof(f));
		return f;
	}
	{
		uint64_t bits = (uint64_t)be_int(p, 8);
		double d;

		memcpy(&d, &bits, sizeof(d));
		return d;
	}
}

/* Column col of the current row as libpq holds it (binary); NULL when it
 * is SQL NULL or there is no such column. */
static const char *column_value(srv__stmt *s, int col)
{
	struct pgd_stmt *st = stmt_of(s);

	return pgd_is_null(s, col) ? NULL : PQgetvalue(st->res, st->row, col);
}

static int64_t pgd_int64(srv__stmt *s, int col)
{
	const char *v = column_value(s, col);

	if (!v)
		return 0;
	switch (PQftype(stmt_of(s)->res, col)) {
	case PG_BOOLOID: return v[0] != 0;
	case PG_INT2OID: return be_int(v, 2);
	case PG_INT4OID: return be_int(v, 4);
	case PG_INT8OID: return be_int(v, 8);
	case PG_FLOAT4OID: return (int64_t)be_double(v, 4);
	case PG_FLOAT8OID: return (int64_t)be_double(v, 8);
	default: return strtoll(v, NULL, 10);
	}
}

static double pgd_double(srv__stmt *s, int col)
{
	const char *v = column_value(s, col);

	if (!v)
		return 0.0;
	switch (PQftype(stmt_of(s)->res, col)) {
	case PG_FLOAT4OID: return be_double(v, 4);
	case PG_FLOAT8OID: return be_double(v, 8);
	case PG_BOOLOID:
	case PG_INT2OID:
	case PG_INT4OID:
	case PG_INT8OID: return (double)pgd_int64(s, col);
	default: return strtod(v, NULL);
	}
}

/* A column's text; a number's is printed (as SQLite would give it). */
static const char *pgd_text(srv__stmt *s, int col)
{
	struct pgd_stmt *st = stmt_of(s);

	if (pgd_is_null(s, col))
		return NULL;
	switch (PQftype(st->res, col)) {
	case PG_BOOLOID:
	case PG_INT2OID:
	case PG_INT4OID:
	case PG_INT8OID:
		if (col >= PG_MAX_COLUMNS)
			return NULL;
		snprintf(st->as_text[col], PG_NUMBER_TEXT, "%" PRId64, pgd_int64(s, col));
		return st->as_text[col];
	case PG_FLOAT4OID:
	case PG_FLOAT8OID:
		if (col >= PG_MAX_COLUMNS)
			return NULL;
		snprintf(st->as_text[col], PG_NUMBER_TEXT, "%.17g", pgd_double(s, col));
		return st->as_text[col];
	default:
		return PQgetvalue(st->res, st->row, col); /* binary text: NUL-terminated */
	}
}

static const void *pgd_blob(srv__stmt *s, int col)
{
	return column_value(s, col);
}

static size_t pgd_bytes(srv__stmt *s, int col)
{
	struct pgd_stmt *st = stmt_of(s);

	return pgd_is_null(s, col) ? 0 : (size_t)PQgetlength(st->res, st->row, col);
}

static int64_t pgd_changes(srv__conn *c)
{
	return conn_of(c)->changes;
}

/* Sends what waits on c, alone: before a statement that cannot go in a
 * pipeline (the simple query protocol's). */
static int flush_deferred(struct pgd_conn *c)
{
	return c->ndeferred > 0 ? pipe_run(c, NULL) : SRV__SQL_DONE;
}

/* Runs SQL text through the simple query protocol. */
static int pgd_exec(srv__conn *conn, const char *sql)
{
	struct pgd_conn *c = conn_of(conn);
	PGresult *res;
	ExecStatusType status;
	int rc = flush_deferred(c);

	if (rc != SRV__SQL_DONE)
		return rc;
	res = exec_wait(c, PQsendQuery(c->pg, sql));
	status = PQresultStatus(res);
	if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_EMPTY_QUERY)
		rc = failure_class(c, res);
	PQclear(res);
	return rc;
}

/*
 * Leaves kept statement `sql` (with ?1 = param, or none) to go out with
 * the next statement (file's comment).  One that cannot wait (the queue
 * full, a param too long) runs now, after what waits before it; one the
 * statement cache has no room for runs through pgd_exec when it has no
 * param (as srv__sql_step_once would), else fails.
 */
static int defer(srv__conn *conn, const char *sql, const char *param)
{
	struct pgd_conn *c = conn_of(conn);
	srv__stmt *s = srv__sql_cached(conn, sql);
	struct pgd_deferred *d;
	int rc;

	if (!s)
		return param ? SRV__SQL_ERROR : pgd_exec(conn, sql);
	if (c->ndeferred < PG_MAX_DEFERRED && (!param || strlen(param) < sizeof(d->param))) {
		d = &c->deferred[c->ndeferred++];
		d->st = stmt_of(s);
		d->has_param = param != NULL;
		if (param)
			snprintf(d->param, sizeof(d->param), "%s", param);
		return SRV__SQL_DONE;
	}
	rc = flush_deferred(c); /* first: what waits may be this very statement */
	if (rc != SRV__SQL_DONE)
		return rc;
	if (param)
		pgd_bind_text(s, 1, param);
	rc = pgd_step(s);
	pgd_reset(s);
	return rc == SRV__SQL_ROW ? SRV__SQL_DONE : rc;
}

static const char sql_begin[] = "BEGIN";
static const char sql_begin_read[] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
/* A read transaction holds no row lock that a writer could wait for, and
 * may compute for long between its statements (a PATE release analyses
 * its first scan before the second, `dpgate verify` a ledger): it is not
 * ended by PG_IDLE_TX_TIMEOUT. */
static const char sql_read_no_idle_limit[] = "SET LOCAL idle_in_transaction_session_timeout = 0";
/* The lock also queues the dataset's notification (see the listener
 * below): PostgreSQL delivers it only if the transaction commits (and
 * not from a savepoint rolled back), once however many writes of the
 * transaction named the dataset (NOTIFY's documented semantics). */
static const char sql_lock_dataset[] = "SELECT pg_notify('" PG_CHANGE_CHANNEL "', ?1)"
				       " FROM datasets WHERE id = ?1 FOR UPDATE";
static const char sql_lock_named[] = "SELECT pg_advisory_xact_lock(hashtext(CAST(?1 AS TEXT)))";

static int pgd_run_later(srv__conn *c, const char *sql)
{
	return defer(c, sql, NULL);
}

/* A BEGIN waits for the transaction's first statement. */
static int begin_with(srv__conn *conn, const char *sql)
{
	struct pgd_conn *c = conn_of(conn);
	bool first = c->ndeferred == 0;
	int rc = defer(conn, sql, NULL);

	c->begin_deferred = first && c->ndeferred == 1;
	return rc;
}

static int pgd_begin_write(srv__conn *c)
{
	return begin_with(c, sql_begin);
}

static int pgd_begin_read(srv__conn *c)
{
	int rc = begin_with(c, sql_begin_read);

	return rc == SRV__SQL_DONE ? defer(c, sql_read_no_idle_limit, NULL) : rc;
}

/* COMMIT of a transaction that failed answers ROLLBACK, not an error.  A
 * transaction whose BEGIN never went out has nothing to commit. */
static int pgd_commit(srv__conn *conn)
{
	struct pgd_conn *c = conn_of(conn);
	PGresult *res;
	int rc;

	if (c->begin_deferred && c->ndeferred == 1) {
		c->ndeferred = 0;
		c->begin_deferred = false;
		return SRV__SQL_DONE;
	}
	rc = flush_deferred(c);
	if (rc != SRV__SQL_DONE)
		return rc;
	res = exec_wait(c, PQsendQuery(c->pg, "COMMIT"));
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = failure_class(c, res);
	} else if (strcmp(PQcmdStatus(res), "COMMIT") != 0) {
		keep_error(c, "the transaction had failed: COMMIT rolled it back");
		rc = c->errclass = SRV__SQL_ERROR;
	}
	PQclear(res);
	return rc;
}

/* What waits is dropped: it belongs to the transaction rolled back, or, a
 * BEGIN among it, there is no transaction on the server to roll back. */
static int pgd_rollback(srv__conn *conn)
{
	struct pgd_conn *c = conn_of(conn);
	bool none = c->begin_deferred;

	c->ndeferred = 0;
	c->begin_deferred = false;
	return none ? SRV__SQL_DONE : pgd_exec(conn, "ROLLBACK");
}

static bool pgd_in_transaction(srv__conn *c)
{
	PGTransactionStatusType t = PQtransactionStatus(conn_of(c)->pg);

	return conn_of(c)->begin_deferred || t == PQTRANS_INTRANS || t == PQTRANS_INERROR ||
	       t == PQTRANS_ACTIVE;
}

static int pgd_lock_dataset(srv__conn *c, const char *dataset_id)
{
	return defer(c, sql_lock_dataset, dataset_id);
}

/* An advisory lock held to the transaction's end, keyed by the name's
 * hash (a collision only makes two names wait for each other). */
static int pgd_lock_named(srv__conn *c, const char *what)
{
	return defer(c, sql_lock_named, what);
}

/* Other servers write the same database: nothing read before a
 * transaction may be assumed current. */
static bool pgd_data_version(srv__conn *c, unsigned *ret)
{
	(void)c;
	(void)ret;
	return false;
}

/* A result is read whole at the first step: nothing stays open on the
 * server between steps. */
static int pgd_reset_open(srv__conn *c)
{
	(void)c;
	return 0;
}

/* The first column of a one-row integer query, or -1. */
static int64_t pgd_query_int(srv__conn *c, const char *sql)
{
	srv__stmt *s = pgd_prepare(c, sql, false);
	int64_t v = -1;

	if (s && pgd_step(s) == SRV__SQL_ROW)
		v = pgd_int64(s, 0);
	if (s)
		pgd_finalize(s);
	return v;
}

static int pgd_schema_objects(srv__conn *c, int64_t *ret_has_migrations, int64_t *ret_objects)
{
	*ret_has_migrations = pgd_query_int(c, "SELECT count(*) FROM pg_catalog.pg_tables"
					      " WHERE schemaname = current_schema()"
					      " AND tablename = 'schema_migrations'");
	*ret_objects = pgd_query_int(c, "SELECT count(*) FROM pg_catalog.pg_class k"
				       " JOIN pg_catalog.pg_namespace n ON n.oid = k.relnamespace"
				       " WHERE n.nspname = current_schema()");
	return *ret_has_migrations < 0 || *ret_objects < 0 ? -1 : 0;
}

/* The migrations may rebuild an index of a large table, a statement that
 * runs minutes without a byte back: their connection waits for its
 * answers without the silent limit (await_result). */
static int pgd_migrate_around(srv__conn *c, bool before)
{
	conn_of(c)->patient = before;
	return 0;
}

/* Servers that start at once on one database migrate one after the other:
 * the second finds the first's migrations recorded. */
static int pgd_migrate_lock(srv__conn *c)
{
	return pgd_exec(c, "SELECT pg_advisory_xact_lock(" PG_MIGRATION_LOCK_KEY ")") ==
			       SRV__SQL_DONE ?
		       0 :
		       -1;
}

/* Foreign keys and checks are enforced at each statement: nothing is left
 * to check before the COMMIT. */
static int pgd_migrate_check(srv__conn *c, srv_error *err)
{
	(void)c;
	(void)err;
	return 0;
}

static int pgd_checkpoint(srv__conn *c, bool give_back)
{
	(void)c; /* the server's own business */
	(void)give_back;
	return 0;
}

static const char *pgd_errmsg(srv__conn *c)
{
	struct pgd_conn *pc = conn_of(c);

	return pc->err[0] ? pc->err : PQerrorMessage(pc->pg);
}

static int pgd_errcode(srv__conn *c)
{
	return conn_of(c)->errclass;
}

static void pgd_close(srv__conn *c)
{
	PQfinish(conn_of(c)->pg);
	free(c);
}

/* The settings every session of the store runs with (file's comment). */
static int configure_session(struct pgd_conn *c)
{
	return pgd_exec(&c->base, "SET synchronous_commit = on;"
				 " SET default_transaction_isolation = 'read committed';"
				 " SET lock_timeout = '" PG_LOCK_TIMEOUT "';"
				 " SET idle_in_transaction_session_timeout = '" PG_IDLE_TX_TIMEOUT "';"
				 " SET client_min_messages = warning");
}

/* Libraries never print: the server's notices are dropped. */
static void ignore_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/*
 * Whether the server has left an idle connection.  PQstatus still says
 * CONNECTION_OK until libpq reads: a server that restarted, or whose
 * administrator ended the session, has by then sent its last message
 * (FATAL 57P01) and closed the socket, and nothing else arrives on an idle
 * connection that does not LISTEN.  So a socket with something to read is
 * read now, without blocking, and libpq marks it bad when that was the
 * end; otherwise the next request's first statement would fail on it and
 * answer 503 although the database is back.  A server that vanished
 * without a word (a cut network) is found by the first statement, as
 * before.
 */
static bool server_left(PGconn *pg)
{
	struct pollfd p = {.fd = PQsocket(pg), .events = POLLIN};

	if (p.fd < 0)
		return true;
	/* A read that returns data does not also see the end behind it:
	 * read until nothing is waiting (the message, then the end). */
	for (int reads = 0; reads < PG_IDLE_READS && poll(&p, 1, 0) > 0; reads++) {
		if (!PQconsumeInput(pg) || PQstatus(pg) == CONNECTION_BAD)
			return true;
	}
	return false;
}

static int pgd_revive(srv__conn *conn)
{
	struct pgd_conn *c = conn_of(conn);

	if (!c->broken && PQstatus(c->pg) == CONNECTION_OK && !server_left(c->pg))
		return 0;
	PQreset(c->pg);
	c->generation++;
	c->ndeferred = 0;
	c->begin_deferred = false;
	c->broken = c->silent = false;
	if (PQstatus(c->pg) != CONNECTION_OK || configure_session(c) != SRV__SQL_DONE) {
		keep_error(c, PQerrorMessage(c->pg));
		return -1;
	}
	c->err[0] = '\0';
	return 0;
}

static const struct srv__sql_driver pgd_driver = {
	.name = "postgresql",
	.prepare = pgd_prepare,
	.finalize = pgd_finalize,
	.reset = pgd_reset,
	.bind_int64 = pgd_bind_int64,
	.bind_double = pgd_bind_double,
	.bind_text = pgd_bind_text,
	.bind_blob = pgd_bind_blob,
	.step = pgd_step,
	.column_is_null = pgd_is_null,
	.column_int64 = pgd_int64,
	.column_double = pgd_double,
	.column_text = pgd_text,
	.column_blob = pgd_blob,
	.column_bytes = pgd_bytes,
	.changes = pgd_changes,
	.exec = pgd_exec,
	.run_later = pgd_run_later,
	.begin_write = pgd_begin_write,
	.begin_read = pgd_begin_read,
	.commit = pgd_commit,
	.rollback = pgd_rollback,
	.in_transaction = pgd_in_transaction,
	.lock_dataset = pgd_lock_dataset,
	.skip_locked = " FOR UPDATE SKIP LOCKED",
	/* Not SQLite's join on l.seq = (subquery): that condition is hashable,
	 * and a plan made while the ledger is small (a never-analyzed table
	 * counts as ten pages) hash-joins a sequential scan of the whole
	 * ledger, which a prepared statement's generic plan then keeps as the
	 * ledger grows.  LATERAL with LIMIT 1 admits no hash or merge join:
	 * the ordered backward scan of ledger_by_dataset is the cheap path
	 * even for a one-page table. */
	.last_ledger_row = " LEFT JOIN LATERAL (SELECT * FROM ledger WHERE dataset_id = d.id"
			   " ORDER BY seq DESC LIMIT 1) l ON true",
	.lock_named = pgd_lock_named,
	.data_version = pgd_data_version,
	.reset_open = pgd_reset_open,
	.schema_objects = pgd_schema_objects,
	.migrate_around = pgd_migrate_around,
	.migrate_lock = pgd_migrate_lock,
	.migrate_check = pgd_migrate_check,
	.checkpoint = pgd_checkpoint,
	.revive = pgd_revive,
	.migrations = srv_embedded_pg,
	.migration_count = &srv_embedded_pg_count,
	.errmsg = pgd_errmsg,
	.errcode = pgd_errcode,
	.close = pgd_close,
};

bool srv__pg_is_url(const char *target)
{
	return strncmp(target, "postgresql://", 13) == 0 || strncmp(target, "postgres://", 11) == 0;
}

/*
 * The connection keywords dpgate sets, then the URL (expanded), whose own
 * settings come later and so win.  TCP keepalives and tcp_user_timeout
 * find a primary that vanished (a cut network, a host powered off) in
 * about 30 s instead of TCP's minutes, in the pool and in the listener
 * alike; connect_timeout bounds a connection's start.
 */
static const char *const pg_keywords[] = {
	"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "connect_timeout", "dbname", NULL,
};

static void pg_values(const char *url, const char *values[8])
{
	static const char *const ours[] = {"1", "5", "2", "3", "30000", "10"};

	for (int i = 0; i < 6; i++)
		values[i] = ours[i];
	values[6] = url;
	values[7] = NULL;
}

srv__conn *srv__pg_open(const char *url, bool read_only, srv_error *err)
{
	struct pgd_conn *c = calloc(1, sizeof(*c));
	const char *values[8];

	if (!c) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		return NULL;
	}
	c->base.drv = &pgd_driver;
	c->generation = 1;
	pg_values(url, values);
	c->pg = PQconnectdbParams(pg_keywords, values, 1);
	if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
		keep_error(c, c->pg ? PQerrorMessage(c->pg) : "out of memory");
		srv_error_set(err, SRV_DB_ERROR, "cannot connect to PostgreSQL: %s", c->err);
		goto fail;
	}
	PQsetNoticeProcessor(c->pg, ignore_notice, NULL);
	if (configure_session(c) != SRV__SQL_DONE ||
	    (read_only && pgd_exec(&c->base, "SET default_transaction_read_only = on") !=
				  SRV__SQL_DONE)) {
		srv_error_set(err, SRV_DB_ERROR, "cannot configure the PostgreSQL session: %s", c->err);
		goto fail;
	}
	return &c->base;
fail:
	PQfinish(c->pg);
	free(c);
	return NULL;
}

/*
 * The listener: one connection that LISTENs, and one thread that sleeps
 * in poll() on its socket and on a pipe that srv_store_listen_stop writes
 * to, so that it wakes for a notification, a lost link or the stop, and
 * never spins.
 */
struct srv_store_listener {
	char *url;
	srv_change_fn fn;
	void *arg;
	int stop_fds[2]; /* [0] polled by the thread, [1] written at the stop */
	pthread_t thread;
};

/* Waits until fd is ready for `events`, the stop or timeout_ms (-1: no
 * limit).  1 ready, 0 timed out, -1 stopped or failed. */
static int listen_wait(const struct srv_store_listener *l, int fd, short events, int timeout_ms)
{
	struct pollfd p[2] = {{.fd = l->stop_fds[0], .events = POLLIN},
			      {.fd = fd, .events = events}};
	int n;

	do
		n = poll(p, fd >= 0 ? 2 : 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n < 0 || p[0].revents)
		return -1;
	return n > 0 ? 1 : 0;
}

/* A connection that LISTENs, made without blocking past the stop or
 * DPG_PG_LISTEN_CONNECT_TIMEOUT_S; NULL when it cannot be made now. */
static PGconn *listen_connect(const struct srv_store_listener *l)
{
	int64_t until = monotonic_ms() + DPG_PG_LISTEN_CONNECT_TIMEOUT_S * 1000;
	const char *values[8];
	PGconn *pg;
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	PGresult *res = NULL;

	pg_values(l->url, values);
	pg = PQconnectStartParams(pg_keywords, values, 1);
	if (!pg || PQstatus(pg) == CONNECTION_BAD)
		goto fail;
	while (st != PGRES_POLLING_OK) {
		int64_t left = until - monotonic_ms();

		if (st == PGRES_POLLING_FAILED || left <= 0 ||
		    listen_wait(l, PQsocket(pg), st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
				(int)left) <= 0)
			goto fail;
		st = PQconnectPoll(pg);
	}
	PQsetNoticeProcessor(pg, ignore_notice, NULL);
	res = PQexec(pg, "LISTEN " PG_CHANGE_CHANNEL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		goto fail;
	PQclear(res);
	return pg;
fail:
	PQclear(res);
	PQfinish(pg);
	return NULL;
}

/* Hands each notification to fn until the link is lost (0) or the stop
 * (-1). */
static int listen_receive(struct srv_store_listener *l, PGconn *pg)
{
	for (;;) {
		PGnotify *n;

		if (listen_wait(l, PQsocket(pg), POLLIN, -1) < 0)
			return -1;
		if (!PQconsumeInput(pg))
			return 0;
		while ((n = PQnotifies(pg)) != NULL) {
			size_t len = strnlen(n->extra, DPG_MAX_ID_BYTES + 1);

			/* An id no dataset can have: wake everything. */
			l->fn(l->arg, len > 0 && len <= DPG_MAX_ID_BYTES ? n->extra : NULL);
			PQfreemem(n);
		}
		if (PQstatus(pg) != CONNECTION_OK)
			return 0;
	}
}

static void *listen_main(void *arg)
{
	struct srv_store_listener *l = arg;
	int backoff_ms = DPG_PG_LISTEN_BACKOFF_MIN_MS;
	sigset_t all;

	/* Signals are the serving thread's to take (a SIGTERM here would end
	 * the process without its orderly stop). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		PGconn *pg = listen_connect(l);
		int rc = 0;

		if (pg) {
			backoff_ms = DPG_PG_LISTEN_BACKOFF_MIN_MS;
			/* Commits while no connection listened were not heard. */
			l->fn(l->arg, NULL);
			rc = listen_receive(l, pg);
			PQfinish(pg);
		}
		if (rc < 0 || listen_wait(l, -1, 0, backoff_ms) < 0)
			break;
		if (!pg)
			backoff_ms = backoff_ms * 2 > DPG_PG_LISTEN_BACKOFF_MAX_MS ?
					     DPG_PG_LISTEN_BACKOFF_MAX_MS :
					     backoff_ms * 2;
	}
	return NULL;
}

int srv_store_listen_start(const char *target, srv_change_fn fn, void *arg,
			   srv_store_listener **ret, srv_error *err)
{
	struct srv_store_listener *l = NULL;
	int rc = SRV_DB_ERROR;

	if (!srv__pg_is_url(target)) {
		*ret = NULL;
		return SRV_OK;
	}
	l = calloc(1, sizeof(*l));
	if (!l || !(l->url = strdup(target))) {
		srv_error_set(err, SRV_DB_ERROR, "out of memory");
		goto out;
	}
	l->fn = fn;
	l->arg = arg;
	l->stop_fds[0] = l->stop_fds[1] = -1;
	if (pipe(l->stop_fds) < 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot make the listener's pipe: %s",
			      strerror(errno));
		goto out;
	}
	/* Not inherited by what the server runs (pg_dump, for one). */
	fcntl(l->stop_fds[0], F_SETFD, FD_CLOEXEC);
	fcntl(l->stop_fds[1], F_SETFD, FD_CLOEXEC);
	if (pthread_create(&l->thread, NULL, listen_main, l) != 0) {
		srv_error_set(err, SRV_DB_ERROR, "cannot start the listener's thread");
		goto out;
	}
	*ret = l;
	l = NULL;
	rc = SRV_OK;
out:
	if (l) {
		if (l->stop_fds[0] >= 0) {
			close(l->stop_fds[0]);
			close(l->stop_fds[1]);
		}
		free(l->url);
		free(l);
	}
	return rc;
}

void srv_store_listen_stop(srv_store_listener *l)
{
	ssize_t n;

	if (!l)
		return;
	/* One byte, never read: the pipe stays readable for every poll. */
	do
		n = write(l->stop_fds[1], "", 1);
	while (n < 0 && errno == EINTR);
	pthread_join(l->thread, NULL);
	close(l->stop_fds[0]);
	close(l->stop_fds[1]);
	free(l->url);
	free(l);
}
