/*
 * test_fuzz.c: a structure-aware fuzz test of the HTTP API, against the real
 * binary.
 *
 * The server is started (harness.c) with datasets of each ledger accountant
 * (basic, rdp, zcdp; small and large budgets; one under the replace
 * relation; one archived), hosted tables, PATE sessions of each aggregator,
 * analyst (scoped), viewer and revoked keys, and one finished training job.
 * A seed corpus of valid requests, at least one for every route of
 * openapi/openapi.yaml that takes a body, a path identifier or a query
 * parameter, is then mutated by a seeded PRNG:
 *  - in the JSON tree (jansson): one node replaced by null, a boolean, 0,
 *    -1, +-1e308, 5e-324, 2^63 and 2^64+1 as integers, 1e400 as raw text,
 *    "", a 10 KB string, "NaN" and "Infinity", an array nested 1000 deep,
 *    {} or [], a value of the wrong type, a number at a limit of
 *    dpg_limits.h or a word of the API out of place; a key removed, an
 *    unknown key added or a key duplicated; an array grown by copies of an
 *    element (to 100001 more); the body wrapped in an array;
 *  - in the serialized bytes: truncated, bits flipped, bytes inserted
 *    (invalid UTF-8, NUL, JSON punctuation), a range deleted, a key
 *    duplicated in the text;
 *  - in the URL: a path identifier replaced by an empty, overlong,
 *    percent-encoded, "..", unicode or foreign one (another dataset's id,
 *    another dataset's reservation); query parameters negative, huge,
 *    non-numeric, repeated;
 *  - in the headers: the key (admin mostly; analyst in and out of scope,
 *    viewer, none, garbage, revoked, a wrong secret), the Content-Type, an
 *    Idempotency-Key shared between requests or malformed;
 *  - now and then the method; and a quarter of the mutated requests carry
 *    two mutations or more.
 *
 * Every answer must satisfy properties of the contract (DESIGN.md and
 * openapi.yaml), never values the code printed:
 *  - it arrives within FUZZ_ANSWER_LIMIT_S, and the server process lives;
 *  - no 5xx but a 503 that carries Retry-After;
 *  - a 4xx is application/problem+json: an object with type, title and
 *    detail strings and a "status" equal to the HTTP status;
 *  - a 2xx application/json answer parses;
 *  - nothing succeeds without authority: no key, a garbage or revoked key,
 *    a viewer on a spending or admin route, an analyst on an admin route or
 *    on a dataset (or a job of a dataset) outside its scope;
 *  - a reservation or PATE session never answers 2xx under another
 *    dataset's path;
 *  - a path identifier that is not 1 to 64 of [A-Za-z0-9_.-] once
 *    percent-decoded is 404 (405, or 413, 414 and the 400 of a query of
 *    more than 16 parameters, which come first);
 *  - a spending route refuses an Idempotency-Key that is not 1 to 128
 *    printable ASCII characters.
 * After the run, jobs are cancelled or waited out, and for every dataset
 * whose budget was never lowered the spent epsilon and delta, and the
 * epsilon of spent + reserved (a dry run of a zero event), stay within the
 * budget; open reservations and charges agree with the reservation list and
 * the ledger.  SIGTERM stops the server with status 0 and `dpgate verify`
 * exits 0 on its database.
 *
 * The run is deterministic for one seed (the server's random ids and
 * timing aside).  DPGATE_FUZZ_SEED and DPGATE_FUZZ_ITERS override the seed
 * and the number of mutated requests; DPGATE_FUZZ_VERBOSE prints a line per
 * request.  A failure prints the seed, the iteration and the exact request;
 * the run goes on to FUZZ_MAX_FAILURES failures.  The fixed cases, inputs
 * that once broke a property, are sent on every run.  The seeds and the
 * fixed cases are data, in tests/data/fuzz_seeds.json.
 */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "test_data.h"

#define FUZZ_DEFAULT_SEED     20240611u
#define FUZZ_DEFAULT_ITERS    6000
#define FUZZ_ANSWER_LIMIT_S   10      /* an answer later than this is a potential hang */
#define FUZZ_MAX_FAILURES     20      /* failures reported before the run stops */
#define FUZZ_MAX_NODES        512     /* JSON nodes one mutation chooses among */
#define FUZZ_POOL_MAX         4096    /* ids remembered per kind */
#define FUZZ_ID_BYTES         96
#define FUZZ_PATH_BYTES       2400    /* fits the harness's URL buffer */
#define FUZZ_RAW_BYTES        4096    /* raw text put in place of one JSON node */
#define FUZZ_LONG_STRING      10240   /* "a 10 KB string" */
#define FUZZ_DEEP_ARRAY       1000    /* "an array nested 1000 deep" */
#define FUZZ_PRINT_BODY_BYTES 4096    /* a longer body is printed in part and saved whole */
#define FUZZ_JOB_END_S        120     /* waiting for the fuzzer's jobs to end */
#define FUZZ_MAX_REPLAYS      1024    /* stored answers to Idempotency-Keys remembered */
#define FUZZ_CLOCK_SLACK_S    1.5     /* between the server's clock and ours */

/* Stand-ins in a serialized body, replaced by raw text after jansson's dump. */
#define RAW_MARK "@@fuzz-raw@@"
#define DUP_MARK "@@fuzz-dup@@"

/* The analyst key's scope; every other dataset is out of it. */
#define ANALYST_SCOPE "b-large,r-small,z-large,iris,cities,r-replace,scratch"

/* ---- the world the requests act on ---------------------------------------- */

enum role { R_ADMIN, R_ANALYST, R_VIEWER, R_NONE, R_GARBAGE, R_REVOKED, R_WRONG_SECRET };

static const char *const role_names[] = {"admin", "analyst", "viewer", "none", "garbage",
					 "revoked", "wrong-secret"};

/* Who may call a route (openapi.yaml, x-dpgate-access). */
enum access { A_PUBLIC, A_ANY_KEY, A_READ, A_SPEND, A_ADMIN };

/* A dataset, with the budget it was created with (to tell a lowered one). */
struct fz_dataset {
	char id[FUZZ_ID_BYTES];
	char accountant[16];
	double epsilon, delta;          /* at creation */
	double cur_epsilon, cur_delta;  /* after the PATCHes answered 200 */
	bool lowered;                   /* by one of them */
	bool known_budget;
	bool protected_; /* never archived, re-linked or re-budgeted by the fuzzer */
};

/* A reservation, PATE session, job or key, and the dataset it belongs to. */
struct fz_object {
	char id[FUZZ_ID_BYTES];
	char dataset[FUZZ_ID_BYTES];
	char kind[24];  /* a session's aggregator */
	bool closed;    /* a reservation committed or released; a job cancelled (200) */
	double expires; /* a reservation's expiry on our clock (0: unknown) */
};

/* A stored answer: what an Idempotency-Key of one API key was first
 * admitted with (the server identifies the request by method, path and raw
 * body bytes). */
struct fz_replay {
	const char *api_key;
	char idempotency[160];
	char method[16];
	char path[FUZZ_PATH_BYTES];
	uint64_t body_hash;
	size_t body_len;
	long status;
	char *answer;
	size_t answer_len;
};

struct fz_pool {
	struct fz_object item[FUZZ_POOL_MAX];
	size_t n;
};

struct world {
	dpg_server srv;
	uint64_t rng;
	uint64_t seed;
	long iter;          /* -1 while setting up, then the mutated request's number */
	char analyst[160], viewer[160], revoked[160], wrong_secret[160];
	struct fz_dataset ds[FUZZ_POOL_MAX];
	size_t n_ds;
	struct fz_pool reservations, sessions, jobs, keys;
	struct fz_replay replays[FUZZ_MAX_REPLAYS];
	size_t n_replays;
	long replays_seen;  /* retries that had to get a stored answer */
	long counter;       /* fresh names */
	int failures;
	bool server_dead;
	bool verbose;       /* DPGATE_FUZZ_VERBOSE: a line per request */
	long statuses[600]; /* answers by status */
	long last_status;   /* of the last answer, -1 for none */
	json_t *corpus;     /* tests/data/fuzz_seeds.json, which seeds[] points into */
	struct seed *seeds;
	size_t n_seeds;
};

/* ---- the PRNG (splitmix64: deterministic for a seed) ---------------------- */

static uint64_t rnd(struct world *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A uniform integer in [0, n); n > 0. */
static size_t below(struct world *w, size_t n)
{
	return (size_t)(rnd(w) % n);
}

/* True with probability num / den. */
static bool chance(struct world *w, unsigned num, unsigned den)
{
	return below(w, den) < num;
}

/* ---- growable byte buffers ---------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	b->cap = (b->len + extra + 1) * 2;
	b->p = realloc(b->p, b->cap);
	cr_assert_not_null(b->p);
}

static void buf_add(struct buf *b, const char *s, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_adds(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* Inserts n bytes at offset `at` (at <= len). */
static void buf_insert(struct buf *b, size_t at, const char *s, size_t n)
{
	buf_reserve(b, n);
	memmove(b->p + at + n, b->p + at, b->len - at);
	memcpy(b->p + at, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* Replaces the first `find` in b by `with`; false when absent. */
static bool buf_replace(struct buf *b, const char *find, const char *with, size_t with_len)
{
	char *at = b->p ? memmem(b->p, b->len, find, strlen(find)) : NULL;
	size_t off, fl = strlen(find);

	if (!at)
		return false;
	off = (size_t)(at - b->p);
	memmove(at, at + fl, b->len - off - fl);
	b->len -= fl;
	buf_insert(b, off, with, with_len);
	return true;
}

/* ---- the seed corpus ---------------------------------------------------- */

/* What must exist before a seed's request: made with valid admin requests. */
enum prep {
	P_NONE,
	P_RESERVATION,   /* an open reservation on {ds}: {rid} */
	P_FRESH_DATASET, /* a new dataset: {ds} */
	P_JOB,           /* a new training job on the iris table: {jid} */
	P_KEY,           /* a new viewer key: {kid} */
};

/*
 * One valid request of the corpus, tests/data/fuzz_seeds.json (its "about"
 * says what each field holds).  The path may hold {ds} (a dataset of
 * `pool`), {sid} (a PATE session whose aggregator is `sessions`, or any
 * with "any"; it fixes {ds}), {rid}, {jid} (a job of the pool, or a new one
 * with P_JOB), {kid}, and a query.  "{n}" in the body is a fresh number.
 * The strings live in the world's corpus.
 */
struct seed {
	const char *method;
	const char *path;
	enum access access;
	const char *pool;
	const char *sessions;
	enum prep prep;
	const char *body;
	bool csv;
};


/* The index of `text` among the n `names`; fails the test on another word. */
static int corpus_word(const char *text, const char *const *names, size_t n, size_t seed,
		       const char *field)
{
	for (size_t i = 0; i < n; i++)
		if (text && strcmp(text, names[i]) == 0)
			return (int)i;
	cr_assert_fail("seed %zu: %s \"%s\" is not a word of the corpus", seed, field,
		       text ? text : "(none)");
	return -1;
}

/* Seed i's string `field`, or NULL when absent; fails the test on
 * another type or a field the corpus does not have. */
static const char *corpus_string(const json_t *o, const char *field, size_t i)
{
	const json_t *v = json_object_get(o, field);

	cr_assert(!v || json_is_string(v), "seed %zu: %s is not a string", i, field);
	return json_string_value(v);
}

/* Reads one seed of the corpus into s. */
static void corpus_seed(const json_t *o, size_t i, struct seed *s)
{
	static const char *const fields[] = {"method", "path", "access", "pool", "sessions",
					     "prep", "body", "csv"};
	static const char *const access[] = {"public", "any_key", "read", "spend", "admin"};
	static const char *const prep[] = {"none", "reservation", "fresh_dataset", "job", "key"};
	const json_t *csv = json_object_get(o, "csv"), *v;
	const char *key, *p;

	cr_assert(json_is_object(o), "seed %zu is not an object", i);
	json_object_foreach((json_t *)o, key, v)
		corpus_word(key, fields, sizeof(fields) / sizeof(fields[0]), i, "field");
	s->method = corpus_string(o, "method", i);
	s->path = corpus_string(o, "path", i);
	cr_assert(s->method && s->path, "seed %zu: no method or path", i);
	s->access = (enum access)corpus_word(corpus_string(o, "access", i), access,
					     sizeof(access) / sizeof(access[0]), i, "access");
	s->pool = corpus_string(o, "pool", i);
	s->sessions = corpus_string(o, "sessions", i);
	p = corpus_string(o, "prep", i);
	s->prep = p ? (enum prep)corpus_word(p, prep, sizeof(prep) / sizeof(prep[0]), i, "prep")
		    : P_NONE;
	s->body = corpus_string(o, "body", i);
	cr_assert(!csv || json_is_boolean(csv), "seed %zu: csv is not a boolean", i);
	s->csv = json_is_true(csv);
}

/* Loads the seed corpus into w->seeds. */
static void load_corpus(struct world *w)
{
	const json_t *list;

	w->corpus = test_load_data("fuzz_seeds.json");
	list = json_object_get(w->corpus, "seeds");
	w->n_seeds = json_array_size(list);
	cr_assert_gt(w->n_seeds, 0, "fuzz_seeds.json holds no seeds");
	w->seeds = calloc(w->n_seeds, sizeof(*w->seeds));
	cr_assert_not_null(w->seeds);
	for (size_t i = 0; i < w->n_seeds; i++)
		corpus_seed(json_array_get(list, i), i, &w->seeds[i]);
}

/* ---- one request ------------------------------------------------------------ */

/* A path identifier and, for a reservation or session, its dataset. */
struct ident {
	char name[8];                 /* "ds", "rid", "sid", "jid", "kid" */
	char value[FUZZ_PATH_BYTES];  /* as sent */
	char plain[FUZZ_ID_BYTES];    /* what the server decodes, when known */
	char owner[FUZZ_ID_BYTES];    /* the dataset of a reservation, session or job */
};

#define MAX_IDENTS 3

struct request {
	const struct seed *seed;
	char method[16];
	char path[FUZZ_PATH_BYTES];
	char query[FUZZ_PATH_BYTES];
	struct ident id[MAX_IDENTS];
	int n_id;
	enum role role;
	const char *key;
	struct buf body;
	bool has_body;
	char content_type[96];
	char idempotency[160];
	bool bad_idempotency;   /* not a key the contract admits */
	bool method_changed;    /* the route is not the seed's */
	char mutation[320];
};

static void request_free(struct request *r)
{
	free(r->body.p);
	memset(r, 0, sizeof(*r));
}

/* Authorization texts that are no key ("Bearer " and the text is sent). */
static const char *const garbage_keys[] = {
	"dpg_0123456789abcdef_not-a-secret",
	"",
	" ",
	"dpg_",
	"dpg__",
	"dpg_0123456789ABCDEF_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"dpg_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
	"dpg_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
	"Bearer dpg_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"dpg_%00",
	"\xc3\xa9",
	"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
	"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
};

static const char *key_of(struct world *w, enum role role)
{
	switch (role) {
	case R_ADMIN: return w->srv.admin_key;
	case R_ANALYST: return w->analyst;
	case R_VIEWER: return w->viewer;
	case R_NONE: return NULL;
	case R_GARBAGE: return garbage_keys[0]; /* mutate() picks among them */
	case R_REVOKED: return w->revoked;
	case R_WRONG_SECRET: return w->wrong_secret;
	}
	return NULL;
}

/* Prints bytes as C escapes. */
static void print_escaped(FILE *f, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\\' || c == '"')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c >= 0x20 && c < 0x7f)
			fputc(c, f);
		else
			fprintf(f, "\\x%02x", c);
	}
}

/* Prints the request a failure is about: seed, iteration and every byte
 * needed to send it again.  A long body is also written to a file. */
static void print_request(const struct world *w, const struct request *r)
{
	fprintf(stderr, "  seed %" PRIu64 ", iteration %ld (DPGATE_FUZZ_SEED=%" PRIu64 ")\n",
		w->seed, w->iter, w->seed);
	fprintf(stderr, "  mutation: %s\n", r->mutation[0] ? r->mutation : "none (valid seed)");
	fprintf(stderr, "  %s ", r->method);
	print_escaped(stderr, r->path, strlen(r->path));
	fprintf(stderr, "\n  key: %s", role_names[r->role]);
	if (r->role == R_GARBAGE) {
		fputs(" \"", stderr);
		print_escaped(stderr, r->key, strlen(r->key));
		fputc('"', stderr);
	}
	fputc('\n', stderr);
	if (r->content_type[0])
		fprintf(stderr, "  Content-Type: %s\n", r->content_type);
	if (r->idempotency[0])
		fprintf(stderr, "  Idempotency-Key: %s\n", r->idempotency);
	if (!r->has_body) {
		fprintf(stderr, "  no body\n");
		return;
	}
	fprintf(stderr, "  body (%zu bytes): \"", r->body.len);
	if (r->body.len <= FUZZ_PRINT_BODY_BYTES) {
		print_escaped(stderr, r->body.p, r->body.len);
		fprintf(stderr, "\"\n");
	} else {
		char file[256];
		FILE *f;

		print_escaped(stderr, r->body.p, FUZZ_PRINT_BODY_BYTES / 2);
		fprintf(stderr, "\" ... \"");
		print_escaped(stderr, r->body.p + r->body.len - FUZZ_PRINT_BODY_BYTES / 2,
			      FUZZ_PRINT_BODY_BYTES / 2);
		snprintf(file, sizeof(file), "/tmp/dpgate-fuzz-%" PRIu64 "-%ld.body", w->seed, w->iter);
		f = fopen(file, "wb");
		if (f) {
			fwrite(r->body.p, 1, r->body.len, f);
			fclose(f);
		}
		fprintf(stderr, "\"\n  the whole body is in %s\n", file);
	}
}

/* The last lines of the server's log (a sanitizer report, a crash). */
static void print_server_log(const struct world *w)
{
	char cmd[512];

	fprintf(stderr, "  the server's log (%s) ends:\n", w->srv.log);
	snprintf(cmd, sizeof(cmd), "tail -n 40 '%s' >&2", w->srv.log);
	if (system(cmd) != 0)
		fprintf(stderr, "  (could not show it)\n");
}

/* Reports a failed property of the answer to `r`. */
static void fail_request(struct world *w, const struct request *r, const dpg_resp *resp,
			 const char *what)
{
	w->failures++;
	fprintf(stderr, "\nFUZZ FAILURE %d: %s\n", w->failures, what);
	print_request(w, r);
	if (resp && resp->body) {
		fprintf(stderr, "  answer %ld (%s): ", resp->status, resp->content_type);
		print_escaped(stderr, resp->body, resp->len < 1000 ? resp->len : 1000);
		fputc('\n', stderr);
	}
	if (w->server_dead)
		print_server_log(w);
}

/* ---- the properties of every answer ---------------------------------- */

static bool in_analyst_scope(const char *dataset)
{
	const char *p = ANALYST_SCOPE;
	size_t n = strlen(dataset);

	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && strncmp(p, dataset, n) == 0)
			return true;
		p += len + (end ? 1 : 0);
	}
	return false;
}

static const struct ident *ident_named(const struct request *r, const char *name)
{
	for (int i = 0; i < r->n_id; i++)
		if (strcmp(r->id[i].name, name) == 0)
			return &r->id[i];
	return NULL;
}

/* Whether the seed's route reads an Idempotency-Key (openapi.yaml): the
 * spending POSTs but PATE session creation, commit and release. */
static bool reads_idempotency_key(const struct seed *s)
{
	const char *p = s->path;
	size_t n = strlen(p);

	if (strcmp(s->method, "POST") != 0 || strstr(p, "{rid}"))
		return false;
	return (n >= 8 && strcmp(p + n - 8, "/charges") == 0) ||
	       (n >= 13 && strcmp(p + n - 13, "/reservations") == 0) ||
	       (n >= 8 && strcmp(p + n - 8, "/queries") == 0) ||
	       (n >= 5 && strcmp(p + n - 5, "/jobs") == 0) || strstr(p, "/mechanisms/") ||
	       (strstr(p, "/pate/sessions/{sid}/release") != NULL);
}

/* Whether libcurl sends the Idempotency-Key of `r` (not an empty or blank
 * value). */
static bool idempotency_sent(const struct request *r)
{
	return strspn(r->idempotency, " ") < strlen(r->idempotency);
}

/*
 * Why a 2xx to `r` would be wrong, or NULL when it may succeed: the key's
 * authority (openapi.yaml, x-dpgate-access and the route descriptions), and
 * a reservation or session named under a dataset it does not belong to.
 */
static const char *success_forbidden(const struct request *r)
{
	const struct seed *s = r->seed;
	const struct ident *ds = ident_named(r, "ds");
	const struct ident *obj = ident_named(r, "rid");
	const struct ident *job = ident_named(r, "jid");

	if (!obj)
		obj = ident_named(r, "sid");
	if (r->method_changed)
		/* Another route: only a key is known to be needed (no seed path
		 * is public under another method). */
		return s->access != A_PUBLIC && (r->role == R_NONE || r->role == R_GARBAGE ||
						 r->role == R_REVOKED || r->role == R_WRONG_SECRET)
			       ? "a request without a valid key succeeded"
			       : NULL;
	if (s->access != A_PUBLIC &&
	    (r->role == R_NONE || r->role == R_GARBAGE || r->role == R_REVOKED ||
	     r->role == R_WRONG_SECRET))
		return "a request without a valid key succeeded";
	if (r->role == R_VIEWER &&
	    (s->access == A_SPEND || s->access == A_ADMIN || strcmp(s->method, "DELETE") == 0))
		return "a viewer key spent, cancelled or administered";
	if (r->role == R_ANALYST) {
		if (s->access == A_ADMIN)
			return "an analyst key used an admin route";
		if (ds && ds->plain[0] && !in_analyst_scope(ds->plain))
			return "an analyst key reached a dataset outside its scope";
		if (job && job->owner[0] && !in_analyst_scope(job->owner))
			return "an analyst key reached a job of a dataset outside its scope";
	}
	if (ds && obj && ds->plain[0] && obj->owner[0] && strcmp(ds->plain, obj->owner) != 0)
		return "a reservation or session answered under another dataset's path";
	if (r->bad_idempotency && reads_idempotency_key(s))
		return "a spending route took an Idempotency-Key outside 1 to 128 printable ASCII";
	return NULL;
}

/* Whether a query (the text after '?') holds more parameters than the
 * 16 a request may carry (DPG_MAX_QUERY_PARAMS): one before each '&', and
 * one after the last unless the query ends there. */
static bool too_many_params(const char *query)
{
	size_t n = 0, len = strlen(query);

	for (size_t i = 0; i < len; i++)
		n += query[i] == '&';
	return n + (len > 0 && query[len - 1] != '&') > 16;
}

/*
 * Whether a path identifier as sent names 1 to 64 of [A-Za-z0-9_.-] once
 * percent-decoded (RFC 3986, 2.1); an encoded NUL or slash does not.  The
 * decoding is libc's (isxdigit, strtol) and the class a list, so that this
 * oracle shares no code with the server's decoder.
 */
static bool ident_ok(const char *sent)
{
	static const char allowed[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				      "0123456789_.-";
	size_t n = 0;

	for (const char *p = sent; *p; p++, n++) {
		int c = (unsigned char)*p;

		if (c == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
			char hex[3] = {p[1], p[2], '\0'};

			c = (int)strtol(hex, NULL, 16);
			p += 2;
		}
		if (c == 0 || !strchr(allowed, c))
			return false;
	}
	return n >= 1 && n <= 64;
}

static double elapsed_s(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* Whether the server process still runs; a dead one is reaped. */
static bool server_alive(struct world *w)
{
	int status = 0;

	if (w->server_dead)
		return false;
	if (waitpid(w->srv.pid, &status, WNOHANG) == w->srv.pid) {
		fprintf(stderr, "\nthe server died: %s %d\n",
			WIFEXITED(status) ? "exit status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		w->srv.pid = 0;
		w->server_dead = true;
		return false;
	}
	return true;
}

/*
 * Checks the properties every answer must have; reports each failure.
 * `rc` is dpg_http_opt's result and `seconds` how long the answer took.
 */
static void check_answer(struct world *w, const struct request *r, int rc, const dpg_resp *resp,
			 double seconds)
{
	char what[256];
	const char *why;

	if (!server_alive(w)) {
		fail_request(w, r, rc == 0 ? resp : NULL, "the server process died");
		return;
	}
	if (rc != 0) {
		snprintf(what, sizeof(what), "no answer within %d s (transport failure or hang)",
			 FUZZ_ANSWER_LIMIT_S);
		fail_request(w, r, NULL, what);
		return;
	}
	if (seconds > FUZZ_ANSWER_LIMIT_S) {
		snprintf(what, sizeof(what), "the answer took %.1f s", seconds);
		fail_request(w, r, resp, what);
	}
	if (resp->status >= 500 && !(resp->status == 503 && resp->retry_after > 0)) {
		snprintf(what, sizeof(what), "status %ld%s", resp->status,
			 resp->status == 503 ? " without Retry-After" : "");
		fail_request(w, r, resp, what);
	}
	if (resp->status >= 400) {
		const json_t *j = resp->json;

		if (strcmp(resp->content_type, "application/problem+json") != 0)
			fail_request(w, r, resp, "an error that is not application/problem+json");
		else if (strcmp(r->method, "HEAD") == 0)
			; /* no body to look at */
		else if (!json_is_object(j) || !json_is_integer(json_object_get(j, "status")) ||
			 json_integer_value(json_object_get(j, "status")) != resp->status ||
			 !json_is_string(json_object_get(j, "type")) ||
			 !json_is_string(json_object_get(j, "title")) ||
			 !json_is_string(json_object_get(j, "detail")))
			fail_request(w, r, resp,
				     "a problem document without type, title, detail and the HTTP status");
	}
	/* A malformed path identifier is refused before anything else is
	 * looked at: 404 (405 when the path is another method's; 413 and 414,
	 * a body or target too large, and 400 for a query of too many
	 * parameters come before any routing). */
	for (int i = 0; i < r->n_id; i++)
		if (!ident_ok(r->id[i].value) && resp->status != 404 && resp->status != 405 &&
		    resp->status != 413 && resp->status != 414 &&
		    !(resp->status == 400 && too_many_params(r->query))) {
			fail_request(w, r, resp, "a malformed path identifier was not refused with 404");
			break;
		}
	if (resp->status >= 200 && resp->status < 300) {
		if (strncmp(resp->content_type, "application/json", 16) == 0 && !resp->json &&
		    strcmp(r->method, "HEAD") != 0)
			fail_request(w, r, resp, "a 2xx JSON answer that does not parse");
		why = success_forbidden(r);
		if (why)
			fail_request(w, r, resp, why);
	}
}

/* ---- pools ------------------------------------------------------------------ */

static struct fz_dataset *dataset_find(struct world *w, const char *id)
{
	for (size_t i = 0; i < w->n_ds; i++)
		if (strcmp(w->ds[i].id, id) == 0)
			return &w->ds[i];
	return NULL;
}

/* Remembers a dataset from its create answer (the budget it has now). */
static void dataset_add(struct world *w, const json_t *answer, bool protected_)
{
	const char *id = json_string_value(json_object_get(answer, "id"));
	const char *acct = json_string_value(json_object_get(answer, "accountant"));
	const json_t *b = json_object_get(answer, "budget");
	struct fz_dataset *d;

	if (!id || w->n_ds == FUZZ_POOL_MAX || dataset_find(w, id))
		return;
	d = &w->ds[w->n_ds++];
	snprintf(d->id, sizeof(d->id), "%s", id);
	snprintf(d->accountant, sizeof(d->accountant), "%s", acct ? acct : "");
	d->known_budget = json_is_number(json_object_get(b, "epsilon")) &&
			  json_is_number(json_object_get(b, "delta"));
	d->epsilon = d->cur_epsilon = json_number_value(json_object_get(b, "epsilon"));
	d->delta = d->cur_delta = json_number_value(json_object_get(b, "delta"));
	d->protected_ = protected_;
}

static void pool_add(struct fz_pool *p, const char *id, const char *dataset, const char *kind)
{
	struct fz_object *o;

	if (!id || p->n == FUZZ_POOL_MAX)
		return;
	o = &p->item[p->n++];
	snprintf(o->id, sizeof(o->id), "%s", id);
	snprintf(o->dataset, sizeof(o->dataset), "%s", dataset ? dataset : "");
	snprintf(o->kind, sizeof(o->kind), "%s", kind ? kind : "");
}

static struct fz_object *pool_find(struct fz_pool *p, const char *id)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->item[i].id, id) == 0)
			return &p->item[i];
	return NULL;
}

/* A random word of a space-separated list. */
static void pick_word(struct world *w, const char *list, char *out, size_t size)
{
	size_t n = 1, k;
	const char *p = list;

	for (const char *q = list; *q; q++)
		n += *q == ' ';
	k = below(w, n);
	while (k-- > 0)
		p = strchr(p, ' ') + 1;
	snprintf(out, size, "%.*s", (int)(strchr(p, ' ') ? (size_t)(strchr(p, ' ') - p) : strlen(p)), p);
}

/* ---- valid requests made as preparation, and from the seeds ---------------- */

/* Sends a valid admin request that must succeed with `want`; returns the
 * answer's JSON (caller decrefs). */
static json_t *admin_call(struct world *w, const char *method, const char *path, const char *body,
			  long want)
{
	dpg_resp r = dpg_call(&w->srv, method, path, w->srv.admin_key, body);
	json_t *j;

	cr_assert_eq(r.status, want, "%s %s: %ld %s", method, path, r.status, r.body);
	j = json_incref(r.json);
	dpg_resp_free(&r);
	return j;
}

static void make_dataset(struct world *w, const char *id, const char *accountant, double epsilon,
			 double delta, const char *neighbor, bool protected_)
{
	char body[512];
	json_t *j;

	snprintf(body, sizeof(body),
		 "{\"id\":\"%s\",\"budget\":{\"epsilon\":%.17g,\"delta\":%.17g},\"accountant\":\"%s\","
		 "\"neighbor\":\"%s\"}",
		 id, epsilon, delta, accountant, neighbor);
	j = admin_call(w, "POST", "/v1/datasets", body, 201);
	dataset_add(w, j, protected_);
	json_decref(j);
}

static const char *const iris_job =
	"{\"trainer\":\"dpsgd\",\"params\":{\"model\":\"logreg\",\"label\":\"species\",\"classes\":3,"
	"\"epochs\":1,\"lot_size\":30,\"noise_multiplier\":4,\"clip_norm\":1,\"learning_rate\":0.5}}";

/* Submits a small valid job on the iris table; returns its id's entry. */
static const struct fz_object *submit_job(struct world *w)
{
	json_t *j = admin_call(w, "POST", "/v1/datasets/iris/jobs", iris_job, 202);

	pool_add(&w->jobs, json_string_value(json_object_get(j, "id")), "iris", "dpsgd");
	json_decref(j);
	return &w->jobs.item[w->jobs.n - 1];
}

/* Makes what seed `s` needs and fills the identifiers of its path. */
static void prepare(struct world *w, const struct seed *s, struct request *r)
{
	char ds[FUZZ_ID_BYTES] = "", path[256];
	json_t *j;

	r->n_id = 0;
	if (strstr(s->path, "{sid}")) {
		/* A session of the wanted aggregator fixes the dataset. */
		const struct fz_object *pick[FUZZ_POOL_MAX];
		size_t n = 0;

		for (size_t i = 0; i < w->sessions.n; i++) {
			const char *k = w->sessions.item[i].kind;

			if (strcmp(s->sessions, "any") == 0 || strcmp(s->sessions, k) == 0 ||
			    (strcmp(s->sessions, "plain") == 0 && strcmp(k, "interactive_gnmax") != 0))
				pick[n++] = &w->sessions.item[i];
		}
		cr_assert_gt(n, 0, "no PATE session of kind %s", s->sessions);
		{
			const struct fz_object *o = pick[below(w, n)];

			snprintf(ds, sizeof(ds), "%s", o->dataset);
			snprintf(r->id[1].name, sizeof(r->id[1].name), "sid");
			snprintf(r->id[1].value, sizeof(r->id[1].value), "%s", o->id);
			snprintf(r->id[1].plain, sizeof(r->id[1].plain), "%s", o->id);
			snprintf(r->id[1].owner, sizeof(r->id[1].owner), "%s", o->dataset);
		}
	} else if (s->pool) {
		pick_word(w, s->pool, ds, sizeof(ds));
	}
	if (s->prep == P_FRESH_DATASET) {
		snprintf(ds, sizeof(ds), "del-%ld", w->counter++);
		make_dataset(w, ds, chance(w, 1, 2) ? "basic" : "rdp", 1.0, 1e-6, "add_remove", false);
	}
	if (ds[0]) {
		snprintf(r->id[0].name, sizeof(r->id[0].name), "ds");
		snprintf(r->id[0].value, sizeof(r->id[0].value), "%s", ds);
		snprintf(r->id[0].plain, sizeof(r->id[0].plain), "%s", ds);
		r->n_id = strstr(s->path, "{sid}") ? 2 : 1;
	}
	if (s->prep == P_RESERVATION) {
		struct ident *id = &r->id[r->n_id++];
		const char *rid;

		snprintf(path, sizeof(path), "/v1/datasets/%s/reservations", ds);
		j = admin_call(w, "POST", path,
			       "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.001,\"delta\":0}}",
			       201);
		rid = json_string_value(json_object_get(j, "id"));
		snprintf(id->name, sizeof(id->name), "rid");
		snprintf(id->value, sizeof(id->value), "%s", rid);
		snprintf(id->plain, sizeof(id->plain), "%s", rid);
		snprintf(id->owner, sizeof(id->owner), "%s", ds);
		pool_add(&w->reservations, rid, ds, "");
		json_decref(j);
	}
	if (strstr(s->path, "{jid}")) {
		struct ident *id = &r->id[r->n_id++];
		const struct fz_object *o = s->prep == P_JOB || w->jobs.n == 0
						    ? submit_job(w)
						    : &w->jobs.item[below(w, w->jobs.n)];

		snprintf(id->name, sizeof(id->name), "jid");
		snprintf(id->value, sizeof(id->value), "%s", o->id);
		snprintf(id->plain, sizeof(id->plain), "%s", o->id);
		snprintf(id->owner, sizeof(id->owner), "%s", o->dataset);
	}
	if (s->prep == P_KEY) {
		struct ident *id = &r->id[r->n_id++];

		j = admin_call(w, "POST", "/v1/keys", "{\"role\":\"viewer\",\"note\":\"to revoke\"}", 201);
		snprintf(id->name, sizeof(id->name), "kid");
		snprintf(id->value, sizeof(id->value), "%s", json_string_value(json_object_get(j, "id")));
		pool_add(&w->keys, id->value, NULL, NULL);
		json_decref(j);
	}
}

/* Writes the path of `r` from its seed's template, identifiers and query;
 * false (and the path unchanged) when it would not fit FUZZ_PATH_BYTES. */
static bool build_path(struct request *r)
{
	const char *t = r->seed->path, *q = strchr(t, '?');
	struct buf b = {0};
	bool fits;

	while (*t && t != q) {
		if (*t == '{') {
			const char *end = strchr(t, '}');
			char name[8];
			const struct ident *id;

			snprintf(name, sizeof(name), "%.*s", (int)(end - t - 1), t + 1);
			id = ident_named(r, name);
			cr_assert_not_null(id, "no value for {%s} in %s", name, r->seed->path);
			buf_adds(&b, id->value);
			t = end + 1;
		} else {
			buf_add(&b, t++, 1);
		}
	}
	if (r->query[0]) {
		buf_adds(&b, "?");
		buf_adds(&b, r->query);
	}
	fits = b.len < sizeof(r->path);
	if (fits)
		memcpy(r->path, b.p, b.len + 1);
	free(b.p);
	return fits;
}

/* Fills `r` with seed `s`, valid and unmutated. */
static void instantiate(struct world *w, const struct seed *s, struct request *r)
{
	memset(r, 0, sizeof(*r));
	r->seed = s;
	snprintf(r->method, sizeof(r->method), "%s", s->method);
	if (strchr(s->path, '?'))
		snprintf(r->query, sizeof(r->query), "%s", strchr(s->path, '?') + 1);
	prepare(w, s, r);
	cr_assert(build_path(r));
	if (s->body) {
		char number[24];

		snprintf(number, sizeof(number), "%ld", w->counter++);
		r->has_body = true;
		buf_adds(&r->body, s->body);
		while (buf_replace(&r->body, "{n}", number, strlen(number)))
			;
	}
	if (s->csv)
		snprintf(r->content_type, sizeof(r->content_type), "text/csv");
}

/* ---- mutations of the JSON tree ------------------------------------------- */

/* Adds a description to the request's list of mutations. */
static void note(struct request *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct request *r, const char *fmt, ...)
{
	size_t n = strlen(r->mutation);
	va_list ap;

	if (n > 0 && n + 2 < sizeof(r->mutation)) {
		memcpy(r->mutation + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(r->mutation + n, sizeof(r->mutation) - n, fmt, ap);
	va_end(ap);
}

/* A node of a JSON tree and where it hangs (no parent for the root). */
struct slot {
	json_t *node, *parent;
	char key[128];
	size_t index;
};

static void collect(json_t *node, json_t *parent, const char *key, size_t index, struct slot *out,
		    size_t *n)
{
	const char *k;
	json_t *v;
	size_t i;

	if (*n == FUZZ_MAX_NODES)
		return;
	out[*n].node = node;
	out[*n].parent = parent;
	snprintf(out[*n].key, sizeof(out[*n].key), "%s", key ? key : "");
	out[*n].index = index;
	(*n)++;
	if (json_is_object(node))
		json_object_foreach(node, k, v)
			collect(v, node, k, 0, out, n);
	else if (json_is_array(node))
		json_array_foreach(node, i, v)
			collect(v, node, NULL, i, out, n);
}

/* Puts `value` (a new reference) where slot `s` is. */
static void slot_set(json_t **root, const struct slot *s, json_t *value)
{
	if (!s->parent) {
		json_decref(*root);
		*root = value;
	} else if (json_is_object(s->parent)) {
		json_object_set_new(s->parent, s->key, value);
	} else {
		json_array_set_new(s->parent, s->index, value);
	}
}

/* A value of another JSON type than `old`. */
static json_t *wrong_type(const json_t *old)
{
	switch (json_typeof(old)) {
	case JSON_OBJECT: return json_array();
	case JSON_ARRAY: return json_object();
	case JSON_STRING: return json_integer(1);
	case JSON_INTEGER: return json_string("1");
	case JSON_REAL: return json_string("0.5");
	case JSON_TRUE:
	case JSON_FALSE: return json_string("true");
	case JSON_NULL: return json_real(1.5);
	}
	return json_null();
}

/*
 * A replacement for node `old`, described in `what`.  Values jansson cannot
 * hold (integers past 2^63, 1e400, an array nested 1000 deep) are written to
 * `raw` and stand in the tree as RAW_MARK until the body is serialized.
 */
static json_t *fuzz_value(struct world *w, const json_t *old, char *raw, char *what, size_t size)
{
	static const char *const raws[] = {
		"9223372036854775808",  /* 2^63 */
		"18446744073709551617", /* 2^64 + 1 */
		"1e400",
		"-9223372036854775809",
		"-0",
	};
	/* Numbers at and past the limits of dpg_limits.h and of doubles. */
	static const double edges[] = {
		1, 2, 0.5, 1e-6, 1e-300, 1e300, 0.99999999999999989, 1.0000000000000002, 4096, 4097,
		65536, 100000, 100001, 1e6, 1000001, 1e8, 100000001, 1e9, 1000000001, 1e12,
		1000000000001, 2147483648.0, 4294967296.0, 9007199254740992.0, 9007199254740994.0,
		0x1p-20, 0x1p50, 0x1p-8, 0x1p20,
	};
	/* Words of the API in places that do not take them. */
	static const char *const words[] = {
		"pld", "basic", "strong", "moments", "rdp", "zcdp", "replace", "add_remove", "admin",
		"analyst", "gaussian", "laplace", "composed", "self_composed", "fashion-mnist",
		"../../etc/passwd", "b-large", "gone", "species", "city", "\\u0000", "%s%n",
	};
	/* The cases below that are numbers: a number is replaced by one half
	 * of the time, where a mistake in a numeric routine shows. */
	static const size_t numeric[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 22, 24, 25, 26, 27};
	size_t k = json_is_number(old) && chance(w, 1, 2)
			   ? numeric[below(w, sizeof(numeric) / sizeof(numeric[0]))]
			   : below(w, 30);
	json_t *v = NULL;

	raw[0] = '\0';
	switch (k) {
	case 0: v = json_null(); break;
	case 1: v = json_true(); break;
	case 2: v = json_false(); break;
	case 3: v = json_integer(0); break;
	case 4: v = json_integer(-1); break;
	case 5: v = json_real(1e308); break;
	case 6: v = json_real(-1e308); break;
	case 7: v = json_real(5e-324); break;
	case 8: case 9: case 10: case 11: case 12:
		snprintf(raw, FUZZ_RAW_BYTES, "%s", raws[k - 8]);
		break;
	case 13: v = json_string(""); break;
	case 14: {
		char *s = malloc(FUZZ_LONG_STRING);

		cr_assert_not_null(s);
		memset(s, 'x', FUZZ_LONG_STRING);
		v = json_stringn(s, FUZZ_LONG_STRING);
		free(s);
		break;
	}
	case 15: v = json_string("NaN"); break;
	case 16: v = json_string("Infinity"); break;
	case 17:
		memset(raw, '[', FUZZ_DEEP_ARRAY);
		memset(raw + FUZZ_DEEP_ARRAY, ']', FUZZ_DEEP_ARRAY);
		raw[2 * FUZZ_DEEP_ARRAY] = '\0';
		break;
	case 18: v = json_object(); break;
	case 19: v = json_array(); break;
	case 20: case 21: v = wrong_type(old); break;
	case 22: v = json_integer(INT64_MAX); break;
	case 23: v = json_stringn("a\0b", 3); break;
	case 24: case 25: case 26: case 27: {
		double e = edges[below(w, sizeof(edges) / sizeof(edges[0]))];

		/* Integers as integers (JSON has one number type; jansson two). */
		v = e == floor(e) && e < 0x1p62 && chance(w, 1, 2) ? json_integer((json_int_t)e)
								 : json_real(e);
		break;
	}
	default: v = json_string(words[below(w, sizeof(words) / sizeof(words[0]))]); break;
	}
	if (raw[0]) {
		snprintf(what, size, "raw %.40s%s", raw, strlen(raw) > 40 ? "..." : "");
		return json_string(RAW_MARK);
	}
	if (json_is_string(v) && json_string_length(v) > 40)
		snprintf(what, size, "a %zu-byte string", json_string_length(v));
	else {
		char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

		snprintf(what, size, "%s", t ? t : "?");
		free(t);
	}
	return v;
}

/* The JSON pointer of slot `s` (for the failure report). */
static void slot_pointer(const struct slot *slots, size_t n, const struct slot *s, char *out,
			 size_t size)
{
	char tail[256] = "";

	out[0] = '\0';
	while (s && s->parent) {
		char seg[160];
		const struct slot *up = NULL;

		if (json_is_object(s->parent))
			snprintf(seg, sizeof(seg), "/%s%s", s->key, tail);
		else
			snprintf(seg, sizeof(seg), "/%zu%s", s->index, tail);
		snprintf(tail, sizeof(tail), "%s", seg);
		for (size_t i = 0; i < n; i++)
			if (slots[i].node == s->parent)
				up = &slots[i];
		s = up;
	}
	snprintf(out, size, "%s", tail[0] ? tail : "(root)");
}

/* A random object among the slots, with at least `min_keys` members. */
static const struct slot *random_object(struct world *w, const struct slot *slots, size_t n,
					size_t min_keys)
{
	size_t objs[FUZZ_MAX_NODES], m = 0;

	for (size_t i = 0; i < n; i++)
		if (json_is_object(slots[i].node) && json_object_size(slots[i].node) >= min_keys)
			objs[m++] = i;
	return m ? &slots[objs[below(w, m)]] : NULL;
}

/* A random member name of object `o` (non-empty). */
static const char *random_key(struct world *w, json_t *o)
{
	size_t k = below(w, json_object_size(o));
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		if (k-- == 0)
			return key;
	}
	return NULL;
}

/* A random array among the slots, with at least one element. */
static const struct slot *random_array(struct world *w, const struct slot *slots, size_t n)
{
	size_t arrs[FUZZ_MAX_NODES], m = 0;

	for (size_t i = 0; i < n; i++)
		if (json_is_array(slots[i].node) && json_array_size(slots[i].node) > 0)
			arrs[m++] = i;
	return m ? &slots[arrs[below(w, m)]] : NULL;
}

/*
 * Mutates the JSON body of `r` in its tree: `structural` removes, adds or
 * duplicates a key, grows an array or wraps the body; otherwise one node is
 * replaced.  False (and nothing changed) when the body is not JSON jansson
 * reads, as after an earlier raw mutation.
 */
static bool mutate_json(struct world *w, struct request *r, bool structural)
{
	struct slot *slots = calloc(FUZZ_MAX_NODES, sizeof(*slots));
	char raw[FUZZ_RAW_BYTES], where[256], what[128], dup_key[128] = "";
	json_error_t jerr;
	json_t *root = json_loadb(r->body.p, r->body.len, 0, &jerr);
	const struct slot *s;
	size_t n = 0;
	char *text;

	cr_assert_not_null(slots);
	raw[0] = '\0';
	if (!root) {
		free(slots);
		return false;
	}
	collect(root, NULL, NULL, 0, slots, &n);
	if (!structural) {
		/* Mostly a leaf: the values the handlers check one by one. */
		size_t leaves[FUZZ_MAX_NODES], m = 0;

		for (size_t i = 0; i < n; i++)
			if (!json_is_object(slots[i].node) && !json_is_array(slots[i].node))
				leaves[m++] = i;
		s = m && chance(w, 3, 4) ? &slots[leaves[below(w, m)]] : &slots[below(w, n)];
		slot_pointer(slots, n, s, where, sizeof(where));
		{
			json_t *v = fuzz_value(w, s->node, raw, what, sizeof(what));

			note(r, "%s := %s", where, what);
			slot_set(&root, s, v);
		}
	} else {
		switch (below(w, 5)) {
		case 4:
			s = random_array(w, slots, n);
			if (s) {
				static const size_t growth[] = {1, 63, 1000, 100001};
				size_t more = growth[below(w, 4)];
				json_t *item = json_array_get(s->node, below(w, json_array_size(s->node)));

				slot_pointer(slots, n, s, where, sizeof(where));
				note(r, "grow %s by %zu copies", where, more);
				json_incref(item);
				for (size_t i = 0; i < more; i++)
					json_array_append(s->node, item);
				json_decref(item);
				break;
			}
			/* fall through */
		case 0:
			s = random_object(w, slots, n, 1);
			if (s) {
				char key[128];

				snprintf(key, sizeof(key), "%s", random_key(w, s->node));
				slot_pointer(slots, n, s, where, sizeof(where));
				note(r, "remove %s/%s", where, key);
				json_object_del(s->node, key);
				break;
			}
			/* fall through */
		case 1:
			s = random_object(w, slots, n, 0);
			if (s) {
				slot_pointer(slots, n, s, where, sizeof(where));
				note(r, "add %s/zz_fuzz", where);
				json_object_set_new(s->node, "zz_fuzz", json_integer(1));
				break;
			}
			/* fall through */
		case 2:
			s = random_object(w, slots, n, 1);
			if (s) {
				json_t *copy;

				snprintf(dup_key, sizeof(dup_key), "%s", random_key(w, s->node));
				copy = chance(w, 1, 2) ? json_deep_copy(json_object_get(s->node, dup_key))
						       : json_integer(0);
				slot_pointer(slots, n, s, where, sizeof(where));
				note(r, "duplicate %s/%s", where, dup_key);
				json_object_set_new(s->node, DUP_MARK, copy);
				break;
			}
			/* fall through */
		default: {
			json_t *arr = json_array();

			json_array_append_new(arr, root);
			root = arr;
			note(r, "wrap the body in an array");
			break;
		}
		}
	}
	text = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
	cr_assert_not_null(text);
	r->body.len = 0;
	buf_adds(&r->body, text);
	free(text);
	if (raw[0])
		cr_assert(buf_replace(&r->body, "\"" RAW_MARK "\"", raw, strlen(raw)));
	if (dup_key[0]) {
		char quoted[160];

		snprintf(quoted, sizeof(quoted), "\"%s\"", dup_key);
		cr_assert(buf_replace(&r->body, "\"" DUP_MARK "\"", quoted, strlen(quoted)));
	}
	json_decref(root);
	free(slots);
	return true;
}

/* ---- mutations of the bytes ------------------------------------------------- */

/* Byte strings a parser must refuse or take in its stride. */
static const char *const nasty_bytes[] = {
	"\x00", "\xff", "\xfe\xff", "\xc3", "\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"\xef\xbb\xbf", "\"", "\\", "{", "}", "[", "]", ",", ":", "\\u0000", "\\ud800", "\\uZZ",
	"\r", "\n", "\t", " ", "-", "e", ".", "0", "\"\"", "\r\n", "\"a,b\"",
};

/* Offsets of `"name":` in a serialized body (at most `max`). */
static size_t key_offsets(const struct buf *b, size_t *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < b->len && n < max; i++) {
		size_t j = i + 1;

		if (b->p[i] != '"')
			continue;
		while (j < b->len && (b->p[j] == '_' || (b->p[j] >= 'a' && b->p[j] <= 'z') ||
				      (b->p[j] >= 'A' && b->p[j] <= 'Z') || (b->p[j] >= '0' && b->p[j] <= '9')))
			j++;
		if (j > i + 1 && j + 1 < b->len && b->p[j] == '"' && b->p[j + 1] == ':')
			out[n++] = i;
	}
	return n;
}

/* Mutates the serialized body of `r` byte by byte. */
static void mutate_bytes(struct world *w, struct request *r)
{
	struct buf *b = &r->body;
	size_t k = b->len ? below(w, 6) : 2;

	switch (k) {
	case 0: {
		size_t at = below(w, b->len);

		b->len = at;
		b->p[at] = '\0';
		note(r, "truncate at %zu", at);
		break;
	}
	case 1: {
		size_t flips = 1 + below(w, 4);

		note(r, "flip %zu bits", flips);
		while (flips-- > 0)
			b->p[below(w, b->len)] ^= (char)(1u << below(w, 8));
		break;
	}
	case 2: {
		const char *s = nasty_bytes[below(w, sizeof(nasty_bytes) / sizeof(nasty_bytes[0]))];
		size_t n = s[0] ? strlen(s) : 1, at = below(w, b->len + 1);

		buf_reserve(b, n);
		buf_insert(b, at, s, n);
		note(r, "insert %zu nasty bytes at %zu", n, at);
		break;
	}
	case 3: {
		size_t at = below(w, b->len), n = 1 + below(w, b->len - at < 16 ? b->len - at : 16);

		memmove(b->p + at, b->p + at + n, b->len - at - n);
		b->len -= n;
		b->p[b->len] = '\0';
		note(r, "delete %zu bytes at %zu", n, at);
		break;
	}
	case 4: {
		size_t offs[64], n = key_offsets(b, offs, 64);

		if (n > 0) {
			size_t at = offs[below(w, n)], end = at + 1;
			char dup[160];

			while (b->p[end] != '"')
				end++;
			snprintf(dup, sizeof(dup), "%.*s:0,", (int)(end + 1 - at), b->p + at);
			buf_insert(b, at, dup, strlen(dup));
			note(r, "duplicate key %s in the text", dup);
			break;
		}
	}
		/* fall through */
	default: {
		size_t n = 1 + below(w, 8), at = below(w, b->len + 1);
		char bytes[8];

		for (size_t i = 0; i < n; i++)
			bytes[i] = (char)rnd(w);
		buf_insert(b, at, bytes, n);
		note(r, "insert %zu random bytes at %zu", n, at);
		break;
	}
	}
}

/*
 * Mutates a CSV body cell by cell: one field (or header name) replaced by a
 * value a table loader must read or refuse, or a line repeated or dropped.
 * The fields are found by commas and line feeds alone (quotes ignored).
 */
static void mutate_csv(struct world *w, struct request *r)
{
	static const char *const cells[] = {
		"", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e-400", "5e-324",
		"0x1p3", " 1", "1 ", "\"1\"", "\"a\"\"b\"", "\"a\nb\"", "\"a\r\nb\"", "\"", "a\"b",
		"\r", "-0", "+1", "1,2", "9007199254740993", "1e308", "-1e308", "\xc3\xa9", "\xff",
		"a", "x", "y", "c", "\t",
	};
	struct buf *b = &r->body;
	size_t lines = 0, line, start = 0, end;

	for (size_t i = 0; i < b->len; i++)
		lines += b->p[i] == '\n';
	if (lines == 0) {
		mutate_bytes(w, r);
		return;
	}
	line = below(w, lines);
	for (size_t i = 0, seen = 0; i < b->len && seen < line; i++)
		if (b->p[i] == '\n' && ++seen == line)
			start = i + 1;
	end = start;
	while (end < b->len && b->p[end] != '\n')
		end++;
	if (chance(w, 1, 4)) {
		/* Repeat the line, or drop it. */
		if (chance(w, 1, 2)) {
			char *copy = malloc(end - start + 1);

			cr_assert_not_null(copy);
			memcpy(copy, b->p + start, end - start);
			copy[end - start] = '\n';
			buf_insert(b, end + (end < b->len), copy, end - start + 1);
			free(copy);
			note(r, "repeat CSV line %zu", line);
		} else {
			size_t n = end - start + (end < b->len);

			memmove(b->p + start, b->p + start + n, b->len - start - n);
			b->len -= n;
			b->p[b->len] = '\0';
			note(r, "drop CSV line %zu", line);
		}
		return;
	}
	{
		/* The k-th field of the line. */
		size_t fields = 1, k, fs = start, fe;
		const char *cell = cells[below(w, sizeof(cells) / sizeof(cells[0]))];

		for (size_t i = start; i < end; i++)
			fields += b->p[i] == ',';
		k = below(w, fields);
		for (size_t i = start, seen = 0; i < end && seen < k; i++)
			if (b->p[i] == ',' && ++seen == k)
				fs = i + 1;
		fe = fs;
		while (fe < end && b->p[fe] != ',' && b->p[fe] != '\r')
			fe++;
		memmove(b->p + fs, b->p + fe, b->len - fe);
		b->len -= fe - fs;
		b->p[b->len] = '\0';
		if (chance(w, 1, 8)) {
			/* A field past DPG_MAX_CSV_FIELD_BYTES. */
			char *big = malloc(1025);

			cr_assert_not_null(big);
			memset(big, '7', 1025);
			buf_insert(b, fs, big, 1025);
			free(big);
			note(r, "CSV line %zu field %zu := 1025 digits", line, k);
		} else {
			buf_insert(b, fs, cell, strlen(cell));
			note(r, "CSV line %zu field %zu := \"%s\"", line, k, cell);
		}
	}
}

/* ---- mutations of the URL -------------------------------------------------- */

/* Datasets the fuzzer may archive, re-link or re-budget (never the
 * protected ones, whose budgets and tables the other seeds rely on). */
static bool destructive(const struct seed *s)
{
	return s->access == A_ADMIN && strcmp(s->method, "GET") != 0 && strstr(s->path, "{ds}");
}

static const struct fz_dataset *random_dataset(struct world *w, bool unprotected_only)
{
	for (int tries = 0; tries < 100; tries++) {
		const struct fz_dataset *d = &w->ds[below(w, w->n_ds)];

		if (!unprotected_only || !d->protected_)
			return d;
	}
	return NULL;
}

/* Replaces one path identifier of `r` with a bad, foreign or encoded one. */
static void mutate_ident(struct world *w, struct request *r)
{
	struct ident *id = &r->id[below(w, (size_t)r->n_id)];
	struct ident before = *id;
	char old[FUZZ_ID_BYTES];
	size_t k = below(w, 20);

	snprintf(old, sizeof(old), "%s", id->value);
	id->plain[0] = '\0';
	id->owner[0] = '\0';
	switch (k) {
	case 0: id->value[0] = '\0'; break;
	case 1:
		memset(id->value, 'a', 65); /* one past DPG_MAX_ID_BYTES */
		id->value[65] = '\0';
		break;
	case 2:
		memset(id->value, 'x', 2100); /* the request target passes DPG_MAX_URL_BYTES */
		id->value[2100] = '\0';
		break;
	case 3: {
		const struct fz_dataset *d = random_dataset(w, destructive(r->seed));
		size_t n = 0;

		if (!d) {
			*id = before; /* nothing to put there: left as it was */
			return;
		}
		for (const char *p = d->id; *p; p++)
			n += (size_t)snprintf(id->value + n, sizeof(id->value) - n, "%%%02X",
					      (unsigned char)*p);
		snprintf(id->plain, sizeof(id->plain), "%s", d->id);
		break;
	}
	case 4: snprintf(id->value, sizeof(id->value), ".."); break;
	case 5: snprintf(id->value, sizeof(id->value), "."); break;
	case 6: snprintf(id->value, sizeof(id->value), "%%2e%%2e"); break;
	case 7: case 8: {
		/* An encoded slash or NUL, where decoding would split the segment
		 * or end the path: another route than the one asked for. */
		static const char *const tails[] = {"%2F..", "%2Fbudget", "%2fledger", "%00",
						    "%00/budget", "%00x"};

		snprintf(id->value, sizeof(id->value), "%s%s", old,
			 tails[below(w, sizeof(tails) / sizeof(tails[0]))]);
		break;
	}
	case 9: snprintf(id->value, sizeof(id->value), "%%C3%%A9t%%C3%%A9-%%F0%%9F%%98%%80"); break;
	case 10: case 11: {
		const struct fz_dataset *d = random_dataset(w, destructive(r->seed));

		if (!d) {
			*id = before;
			return;
		}
		snprintf(id->value, sizeof(id->value), "%s", d->id);
		snprintf(id->plain, sizeof(id->plain), "%s", d->id);
		break;
	}
	case 12: case 13: {
		/* Another object: a reservation, session or job (maybe of another dataset). */
		const struct fz_pool *pools[] = {&w->reservations, &w->sessions, &w->jobs};
		const struct fz_pool *p = pools[below(w, 3)];

		const struct fz_object *o;

		if (!p->n) {
			*id = before;
			return;
		}
		o = &p->item[below(w, p->n)];
		snprintf(id->value, sizeof(id->value), "%s", o->id);
		snprintf(id->plain, sizeof(id->plain), "%s", o->id);
		snprintf(id->owner, sizeof(id->owner), "%s", o->dataset);
		break;
	}
	case 14:
		snprintf(id->value, sizeof(id->value), "%s", old);
		for (char *p = id->value; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		break;
	case 15: snprintf(id->value, sizeof(id->value), "%s%%20", old); break;
	case 16: snprintf(id->value, sizeof(id->value), "%s%%", old); break;
	case 17: snprintf(id->value, sizeof(id->value), "%%zz%s", old); break;
	case 18: snprintf(id->value, sizeof(id->value), "%s/", old); break;
	default: snprintf(id->value, sizeof(id->value), "%s~*", old); break;
	}
	if (!build_path(r)) {
		*id = before; /* another identifier is long already */
		return;
	}
	note(r, "{%s} := \"%.60s%s\"", id->name, id->value, strlen(id->value) > 60 ? "..." : "");
}

/* Values a query parameter must refuse or take. */
static const char *const bad_params[] = {
	"-1", "0", "1001", "99999999999999999999", "9223372036854775807", "9223372036854775808",
	"abc", "", "1e3", "0x10", "+5", "%205", "5%00", "1.5", "%2D1", "-0", "%", "%zz", "true",
	"a:numeric", "a:bogus,b", ":", ",", "a:numeric,a:numeric", "%C3%A9:categorical",
};

/* Mutates the query of `r`: a value, a repeat, an unknown or bare name. */
static void mutate_query(struct world *w, struct request *r)
{
	static const char *const names[] = {"limit", "after", "archived", "columns", "zz"};
	const char *v = bad_params[below(w, sizeof(bad_params) / sizeof(bad_params[0]))];
	const char *name = names[below(w, sizeof(names) / sizeof(names[0]))];
	size_t n = strlen(r->query);
	char before[FUZZ_PATH_BYTES];

	memcpy(before, r->query, sizeof(before));
	switch (below(w, 5)) {
	case 0: {
		/* Replace the value of a parameter already there (or add it). */
		char *eq = r->query[0] ? strchr(r->query, '=') : NULL;

		if (eq) {
			char *amp = strchr(eq, '&');
			char rest[FUZZ_PATH_BYTES];

			snprintf(rest, sizeof(rest), "%s", amp ? amp : "");
			snprintf(eq + 1, sizeof(r->query) - (size_t)(eq + 1 - r->query), "%s%s", v, rest);
			break;
		}
	}
		/* fall through */
	case 1:
		/* Add or repeat a parameter. */
		snprintf(r->query + n, sizeof(r->query) - n, "%s%s=%s", n ? "&" : "", name, v);
		break;
	case 2: snprintf(r->query + n, sizeof(r->query) - n, "%s%s", n ? "&" : "", name); break;
	case 3: snprintf(r->query + n, sizeof(r->query) - n, "&&=%s&", v); break;
	default: {
		/* A long value. */
		char longv[1501];

		memset(longv, '9', sizeof(longv) - 1);
		longv[sizeof(longv) - 1] = '\0';
		snprintf(r->query + n, sizeof(r->query) - n, "%s%s=%s", n ? "&" : "", name, longv);
		break;
	}
	}
	if (!build_path(r)) {
		memcpy(r->query, before, sizeof(before)); /* the path is long already */
		return;
	}
	note(r, "query := \"%.100s%s\"", r->query, strlen(r->query) > 100 ? "..." : "");
}

/* Another Content-Type than the seed's, or a bad Idempotency-Key. */
static void mutate_headers(struct world *w, struct request *r)
{
	static const char *const json_types[] = {
		"text/plain", "text/csv", "application/json; charset=utf-8", "APPLICATION/JSON",
		"application/jsonx", "multipart/form-data", "application/x-www-form-urlencoded",
	};
	static const char *const csv_types[] = {"application/json", "text/csv; charset=utf-8",
						"text/plain", "TEXT/CSV"};
	static const char *const idempotency[] = {
		"", " ", "caf\xc3\xa9", "\x7f", "a\tb", "\xff\xfe",
		"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
		"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", /* 129: one past the limit */
	};

	if (chance(w, 1, 2)) {
		snprintf(r->idempotency, sizeof(r->idempotency), "%s",
			 idempotency[below(w, sizeof(idempotency) / sizeof(idempotency[0]))]);
		/* libcurl sends no header for an empty or blank value. */
		r->bad_idempotency = idempotency_sent(r);
		note(r, "Idempotency-Key := \"%s\"", r->idempotency);
	} else if (r->seed->csv) {
		snprintf(r->content_type, sizeof(r->content_type), "%s",
			 csv_types[below(w, sizeof(csv_types) / sizeof(csv_types[0]))]);
		note(r, "Content-Type := %s", r->content_type);
	} else {
		snprintf(r->content_type, sizeof(r->content_type), "%s",
			 json_types[below(w, sizeof(json_types) / sizeof(json_types[0]))]);
		note(r, "Content-Type := %s", r->content_type);
	}
}

/* Another method on the same path (never one that could archive, re-link
 * or re-budget a protected dataset). */
static void mutate_method(struct world *w, struct request *r)
{
	static const char *const methods[] = {"GET", "POST", "HEAD", "OPTIONS", "get", "FOO",
					      "PUT", "PATCH", "DELETE"};
	const struct ident *ds = ident_named(r, "ds");
	const struct fz_dataset *d = ds ? dataset_find(w, ds->plain) : NULL;
	size_t safe = 6; /* the methods before PUT */

	snprintf(r->method, sizeof(r->method), "%s",
		 methods[below(w, d && d->protected_ ? safe : sizeof(methods) / sizeof(methods[0]))]);
	r->method_changed = strcmp(r->method, r->seed->method) != 0;
	note(r, "method := %s", r->method);
}

static enum role pick_role(struct world *w)
{
	size_t k = below(w, 100);

	if (k < 72)
		return R_ADMIN;
	if (k < 82)
		return R_ANALYST;
	if (k < 89)
		return R_VIEWER;
	if (k < 93)
		return R_NONE;
	if (k < 96)
		return R_GARBAGE;
	return k < 98 ? R_REVOKED : R_WRONG_SECRET;
}

/* One mutation of a kind that applies to `r`. */
static void mutate_once(struct world *w, struct request *r)
{
	bool json = r->has_body && !r->seed->csv;
	size_t k = below(w, 100);

	if (k < 35 && json && mutate_json(w, r, false))
		return;
	if (k < 47 && json && mutate_json(w, r, true))
		return;
	if (k < 50 && r->seed->csv) {
		mutate_csv(w, r);
	} else if (k < 65 && r->has_body) {
		mutate_bytes(w, r);
	} else if (k < 82 && r->n_id > 0) {
		mutate_ident(w, r);
	} else if (k < 92 || !r->has_body) {
		mutate_query(w, r);
	} else {
		mutate_headers(w, r);
	}
}

/* Mutates `r` (nothing, once, or more) and picks its key. */
static void mutate(struct world *w, struct request *r)
{
	r->role = pick_role(w);
	r->key = r->role == R_GARBAGE ? garbage_keys[below(w, sizeof(garbage_keys) /
							    sizeof(garbage_keys[0]))]
				      : key_of(w, r->role);
	/* Spending routes sometimes carry an Idempotency-Key: one of a few
	 * shared ones (mismatches), or a fresh one (retried below). */
	if (r->seed->access == A_SPEND && chance(w, 3, 10)) {
		if (chance(w, 1, 2))
			snprintf(r->idempotency, sizeof(r->idempotency), "fuzz-%zu", below(w, 8));
		else
			snprintf(r->idempotency, sizeof(r->idempotency), "fuzz-once-%ld", w->counter++);
	}
	if (chance(w, 1, 10))
		return; /* the valid seed itself */
	mutate_once(w, r);
	/* Stacked mutations reach what one cannot (a bad value in a body
	 * that also lost a key, a foreign id with a bad body). */
	while (chance(w, 1, 4))
		mutate_once(w, r);
	if (chance(w, 1, 30))
		mutate_method(w, r);
}

/* ---- sending, and learning ids from the answers ------------------------------ */

/* Remembers what a successful request created. */
static void learn(struct world *w, const struct request *r, const dpg_resp *resp, double started)
{
	const struct seed *s = r->seed;
	const struct ident *ds = ident_named(r, "ds");
	const char *dataset = ds && ds->plain[0] ? ds->plain : "";
	const char *id = json_string_value(json_object_get(resp->json, "id"));

	if (resp->status < 200 || resp->status >= 300 || strcmp(s->method, "POST") != 0 || !id)
		return;
	if (strcmp(s->path, "/v1/datasets") == 0)
		dataset_add(w, resp->json, false);
	else if (strcmp(s->path, "/v1/keys") == 0)
		pool_add(&w->keys, id, NULL, NULL);
	else if (strstr(s->path, "/reservations") && !strstr(s->path, "{rid}")) {
		const json_t *ttl = json_object_get(resp->json, "ttl_seconds");

		if (pool_find(&w->reservations, id))
			return; /* a replay */
		pool_add(&w->reservations, id, dataset, "");
		if (json_is_integer(ttl))
			w->reservations.item[w->reservations.n - 1].expires =
				started + (double)json_integer_value(ttl);
	}
	else if (strstr(s->path, "/pate/sessions") && !strstr(s->path, "{sid}")) {
		/* A session is picked later by its dataset: one whose dataset this
		 * request's path left unknown takes the answer's. */
		const char *owner = dataset[0] ? dataset
					       : json_string_value(json_object_get(resp->json, "dataset_id"));

		if (owner && owner[0])
			pool_add(&w->sessions, id, owner,
				 json_string_value(json_object_get(json_object_get(resp->json, "config"),
								   "aggregator")));
	}
	else if (strstr(s->path, "/jobs") && resp->status == 202)
		pool_add(&w->jobs, id, dataset, "dpsgd");
}

/* FNV-1a, to recognise a body sent again. */
static uint64_t body_hash(const struct buf *b)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < b->len; i++)
		h = (h ^ (unsigned char)b->p[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * Idempotency (openapi.yaml, IdempotencyKey): a request sent again with the
 * key, method, path and body of an admitted one gets the stored answer byte
 * for byte; another request with the same key never succeeds.  Admitted
 * answers are remembered.
 */
static void check_replay(struct world *w, const struct request *r, const dpg_resp *resp,
			 double started)
{
	size_t path_len = strcspn(r->path, "?");
	uint64_t h = body_hash(&r->body);
	struct fz_replay *rp = NULL;

	(void)started;
	if (!idempotency_sent(r) || r->bad_idempotency || !reads_idempotency_key(r->seed) ||
	    r->method_changed || !r->key)
		return;
	for (size_t i = 0; i < w->n_replays; i++)
		if (w->replays[i].api_key == r->key &&
		    strcmp(w->replays[i].idempotency, r->idempotency) == 0)
			rp = &w->replays[i];
	if (rp) {
		bool same = strcmp(rp->method, r->method) == 0 && strlen(rp->path) == path_len &&
			    strncmp(rp->path, r->path, path_len) == 0 && rp->body_hash == h &&
			    rp->body_len == r->body.len;

		/* A Content-Type of its own may be refused (415) before the
		 * stored answer is looked up. */
		bool own_type = !r->content_type[0] ||
				(r->seed->csv && strcmp(r->content_type, "text/csv") == 0);

		w->replays_seen += same && own_type;
		if (same && own_type &&
		    (resp->status != rp->status || resp->len != rp->answer_len ||
		     memcmp(resp->body, rp->answer, rp->answer_len) != 0))
			fail_request(w, r, resp, "a retry did not get the stored answer byte for byte");
		else if (!same && resp->status >= 200 && resp->status < 300)
			fail_request(w, r, resp,
				     "an Idempotency-Key used before succeeded with another request");
		return;
	}
	if ((resp->status == 201 || resp->status == 202) && w->n_replays < FUZZ_MAX_REPLAYS) {
		rp = &w->replays[w->n_replays++];
		rp->api_key = r->key;
		snprintf(rp->idempotency, sizeof(rp->idempotency), "%s", r->idempotency);
		snprintf(rp->method, sizeof(rp->method), "%s", r->method);
		snprintf(rp->path, sizeof(rp->path), "%.*s", (int)path_len, r->path);
		rp->body_hash = h;
		rp->body_len = r->body.len;
		rp->status = resp->status;
		rp->answer = malloc(resp->len + 1);
		cr_assert_not_null(rp->answer);
		memcpy(rp->answer, resp->body, resp->len);
		rp->answer_len = resp->len;
	}
}

/*
 * Properties that span requests: a budget summary in any answer stays within
 * a budget never lowered; a reservation closes once, and never past its
 * expiry; a PATCH that lowers a budget is remembered.
 */
static void check_sequence(struct world *w, const struct request *r, const dpg_resp *resp,
			   double started)
{
	const struct ident *ds = ident_named(r, "ds");
	const struct ident *rid = ident_named(r, "rid");
	struct fz_dataset *d = ds && ds->plain[0] ? dataset_find(w, ds->plain) : NULL;
	const json_t *sum = json_object_get(resp->json, "budget");
	bool ok = resp->status >= 200 && resp->status < 300;

	if (!json_object_get(sum, "spent"))
		sum = json_object_get(resp->json, "budget_summary");
	if (d && d->known_budget && !d->lowered && json_is_object(json_object_get(sum, "spent"))) {
		double be = json_number_value(json_object_get(json_object_get(sum, "budget"), "epsilon"));
		double bd = json_number_value(json_object_get(json_object_get(sum, "budget"), "delta"));
		double se = json_number_value(json_object_get(json_object_get(sum, "spent"), "epsilon"));
		double sd = json_number_value(json_object_get(json_object_get(sum, "spent"), "delta"));

		if (be == d->cur_epsilon && bd == d->cur_delta && (se > be || sd > bd))
			fail_request(w, r, resp, "an answer shows more spent than a budget never lowered");
	}
	if (ok && d && strcmp(r->method, "PATCH") == 0 && strcmp(r->seed->path, "/v1/datasets/{ds}") == 0) {
		const json_t *b = json_object_get(resp->json, "budget");
		double e = json_number_value(json_object_get(b, "epsilon"));
		double dl = json_number_value(json_object_get(b, "delta"));

		d->lowered |= e < d->cur_epsilon || dl < d->cur_delta;
		d->cur_epsilon = e;
		d->cur_delta = dl;
	}
	if (ok && rid && !r->method_changed) {
		struct fz_object *o = pool_find(&w->reservations, rid->plain);

		if (o && ds && strcmp(o->dataset, ds->plain) == 0) {
			if (o->closed)
				fail_request(w, r, resp, "a reservation was committed or released twice");
			else if (o->expires > 0 && started > o->expires + FUZZ_CLOCK_SLACK_S)
				fail_request(w, r, resp,
					     "a reservation past its expiry was committed or released");
			o->closed = true;
		}
	}
	if (ok && strcmp(r->seed->path, "/v1/jobs/{jid}") == 0 && strcmp(r->method, "DELETE") == 0 &&
	    resp->status == 200) {
		struct fz_object *o = pool_find(&w->jobs, ident_named(r, "jid")->plain);

		if (o)
			o->closed = true;
	}
	check_replay(w, r, resp, started);
}

/* Sends `r` and checks the answer's properties. */
static void send_and_check(struct world *w, struct request *r)
{
	const dpg_http_opts opts = {.timeout_s = FUZZ_ANSWER_LIMIT_S, .path_as_is = true};
	char ct[128], idem[200];
	const char *hdrs[3] = {NULL};
	int nh = 0, rc;
	double started, answered;
	dpg_resp resp;

	if (r->content_type[0]) {
		snprintf(ct, sizeof(ct), "Content-Type: %s", r->content_type);
		hdrs[nh++] = ct;
	}
	if (r->idempotency[0]) {
		snprintf(idem, sizeof(idem), "Idempotency-Key: %s", r->idempotency);
		hdrs[nh++] = idem;
	}
	started = dpg_now_s();
	rc = dpg_http_opt(&w->srv, &opts, r->method, r->path, r->key,
			  r->has_body ? (r->body.p ? r->body.p : "") : NULL, r->body.len, hdrs, &resp);
	answered = dpg_now_s();
	check_answer(w, r, rc, &resp, answered - started);
	if (w->verbose) {
		fprintf(stderr, "%ld %ld %.3f %s %s %.150s [%s]\n", w->iter, rc == 0 ? resp.status : -1,
			answered - started, role_names[r->role], r->method, r->path, r->mutation);
		if (rc == 0 && resp.status >= 400 && resp.json)
			fprintf(stderr, "    %s %s\n",
				json_string_value(json_object_get(resp.json, "field")),
				json_string_value(json_object_get(resp.json, "detail")));
	}
	if (rc == 0 && resp.status >= 100 && resp.status < 600)
		w->statuses[resp.status]++;
	w->last_status = rc == 0 ? resp.status : -1;
	if (rc == 0) {
		check_sequence(w, r, &resp, started);
		learn(w, r, &resp, answered);
		dpg_resp_free(&resp);
	}
}

/* ---- the world's setup -------------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return dflt;
	errno = 0;
	x = strtoull(v, &end, 0);
	cr_assert(errno == 0 && *end == '\0', "%s=%s is not a number", name, v);
	return (uint64_t)x;
}

#define IRIS_HEADER "sepal_length,sepal_width,petal_length,petal_width,species"

/* Uploads a 40-row table with a categorical column to dataset `id`. */
static void upload_cities(struct world *w, const char *id)
{
	char csv[2048];
	size_t n = 0;

	n += (size_t)snprintf(csv + n, sizeof(csv) - n, "age,income,city\n");
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(csv + n, sizeof(csv) - n, "%d,%d,%s\n", 20 + i, 1000 * (i % 9),
				      i % 2 ? "Paris" : "Lyon");
	dpg_upload_csv(&w->srv, id, csv, n);
}

/* Creates a PATE session on `dataset` and answers one batch on it. */
static void make_session(struct world *w, const char *dataset, const char *config,
			 const char *batch)
{
	char path[256];
	json_t *j;
	const char *id;

	snprintf(path, sizeof(path), "/v1/datasets/%s/pate/sessions", dataset);
	j = admin_call(w, "POST", path, config, 201);
	id = json_string_value(json_object_get(j, "id"));
	pool_add(&w->sessions, id, dataset,
		 json_string_value(json_object_get(json_object_get(j, "config"), "aggregator")));
	snprintf(path, sizeof(path), "/v1/datasets/%s/pate/sessions/%s/queries", dataset, id);
	json_decref(j);
	json_decref(admin_call(w, "POST", path, batch, 201));
}

/* Starts the server and makes the datasets, tables, keys, sessions and job
 * the seeds act on. */
static struct world *world_start(void)
{
	static const char *const votes = "{\"queries\":[{\"votes\":[8,1,1]},{\"votes\":[2,7,1]}]}";
	struct world *w = calloc(1, sizeof(*w));
	char path[128];

	cr_assert_not_null(w);
	w->seed = env_u64("DPGATE_FUZZ_SEED", FUZZ_DEFAULT_SEED);
	w->rng = w->seed;
	w->iter = -1;
	w->verbose = getenv("DPGATE_FUZZ_VERBOSE") != NULL;
	load_corpus(w);
	dpg_server_start(&w->srv);

	make_dataset(w, "b-small", "basic", 1.0, 1e-6, "add_remove", false);
	make_dataset(w, "b-large", "basic", 1e5, 0.5, "add_remove", true);
	make_dataset(w, "r-small", "rdp", 1.0, 1e-6, "add_remove", false);
	make_dataset(w, "r-large", "rdp", 1e5, 1e-3, "add_remove", true);
	make_dataset(w, "z-small", "zcdp", 1.0, 1e-6, "add_remove", false);
	make_dataset(w, "z-large", "zcdp", 1e5, 1e-3, "add_remove", true);
	make_dataset(w, "r-replace", "rdp", 1e5, 1e-3, "replace", true);
	make_dataset(w, "iris", "rdp", 1e5, 1e-3, "add_remove", true);
	make_dataset(w, "iris-b", "basic", 1e5, 0.5, "add_remove", true);
	make_dataset(w, "cities", "rdp", 1e5, 1e-3, "add_remove", true);
	make_dataset(w, "gone", "basic", 10, 0, "add_remove", true);
	make_dataset(w, "scratch", "basic", 10, 1e-6, "add_remove", false);
	make_dataset(w, "patch-r", "rdp", 5, 1e-5, "add_remove", false);
	dpg_upload_iris(&w->srv, "iris", IRIS_HEADER);
	dpg_upload_iris(&w->srv, "iris-b", IRIS_HEADER);
	upload_cities(w, "cities");
	json_decref(admin_call(w, "DELETE", "/v1/datasets/gone", NULL, 200));

	dpg_make_key(&w->srv, "analyst", ANALYST_SCOPE, w->analyst, sizeof(w->analyst));
	dpg_make_key(&w->srv, "viewer", NULL, w->viewer, sizeof(w->viewer));
	dpg_make_key(&w->srv, "viewer", NULL, w->revoked, sizeof(w->revoked));
	snprintf(path, sizeof(path), "/v1/keys/%.16s", w->revoked + 4);
	json_decref(admin_call(w, "DELETE", path, NULL, 200));
	/* The admin key with one hex digit of its secret changed. */
	snprintf(w->wrong_secret, sizeof(w->wrong_secret), "%s", w->srv.admin_key);
	{
		char *last = &w->wrong_secret[strlen(w->wrong_secret) - 1];

		*last = *last == '0' ? '1' : '0';
	}

	make_session(w, "r-large", "{\"aggregator\":\"gnmax\",\"num_teachers\":10,\"num_classes\":3,"
		     "\"sigma2\":5}", votes);
	make_session(w, "r-large", "{\"aggregator\":\"confident_gnmax\",\"num_teachers\":10,"
		     "\"num_classes\":3,\"sigma1\":4,\"sigma2\":2,\"threshold\":6}", votes);
	make_session(w, "r-large", "{\"aggregator\":\"interactive_gnmax\",\"num_teachers\":10,"
		     "\"num_classes\":3,\"sigma1\":4,\"sigma2\":2,\"threshold\":6,"
		     "\"student_confidence\":0.9}",
		     "{\"queries\":[{\"votes\":[6,3,1],\"student_probabilities\":[0.7,0.2,0.1]}]}");
	make_session(w, "r-large", "{\"aggregator\":\"lnmax\",\"num_teachers\":10,\"num_classes\":3,"
		     "\"gamma\":0.05}", votes);
	make_session(w, "b-large", "{\"aggregator\":\"gnmax\",\"num_teachers\":10,\"num_classes\":3,"
		     "\"sigma2\":5,\"delta\":1e-9}", votes);
	make_session(w, "z-large", "{\"aggregator\":\"gnmax\",\"num_teachers\":10,\"num_classes\":3,"
		     "\"sigma2\":5}", votes);

	/* One finished job, for the model route. */
	json_decref(dpg_job_succeeded(&w->srv, submit_job(w)->id, FUZZ_JOB_END_S));
	fprintf(stderr, "fuzz: seed %" PRIu64 " (DPGATE_FUZZ_SEED), %zu seeds\n", w->seed, w->n_seeds);
	return w;
}

/* ---- after the run ------------------------------------------------------------ */

static bool job_ended(const char *state)
{
	return state && (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
			 strcmp(state, "cancelled") == 0);
}

/* Cancels every job that has not ended, and waits until each has. */
static void end_jobs(struct world *w)
{
	static const char *const ended[] = {"succeeded", "failed", "cancelled", NULL};

	for (size_t i = 0; i < w->n_ds; i++) {
		char path[256];
		json_t *jobs, *job;
		size_t k;

		snprintf(path, sizeof(path), "/v1/datasets/%s/jobs", w->ds[i].id);
		jobs = admin_call(w, "GET", path, NULL, 200);
		json_array_foreach(json_object_get(jobs, "jobs"), k, job) {
			const char *id = json_string_value(json_object_get(job, "id"));
			dpg_resp r;

			if (job_ended(json_string_value(json_object_get(job, "state"))))
				continue;
			snprintf(path, sizeof(path), "/v1/jobs/%s", id);
			r = dpg_call(&w->srv, "DELETE", path, w->srv.admin_key, NULL);
			cr_expect(r.status == 200 || r.status == 202 || r.status == 409, "cancel %s: %ld %s",
				  id, r.status, r.body);
			dpg_resp_free(&r);
			json_decref(dpg_job_wait(&w->srv, id, ended, FUZZ_JOB_END_S));
		}
		json_decref(jobs);
	}
	/* A job cancelled while queued (200) ends cancelled, never run. */
	for (size_t i = 0; i < w->jobs.n; i++) {
		const struct fz_object *o = &w->jobs.item[i];
		char path[256];
		const char *state;
		json_t *j;

		if (!o->closed && !w->verbose)
			continue;
		snprintf(path, sizeof(path), "/v1/jobs/%s", o->id);
		j = admin_call(w, "GET", path, NULL, 200);
		state = json_string_value(json_object_get(j, "state"));
		cr_expect(!o->closed || (state && strcmp(state, "cancelled") == 0),
			  "job %s was cancelled while queued (200) but ended %s", o->id, state);
		if (w->verbose)
			fprintf(stderr, "job %s: %s %s\n", o->id, state,
				json_string_value(json_object_get(j, "error")));
		json_decref(j);
	}
}

/* Reads every ledger row of dataset `id`, oldest first (caller decrefs). */
static json_t *ledger_of(struct world *w, const char *id)
{
	char path[256];

	snprintf(path, sizeof(path), "/v1/datasets/%s/ledger?limit=1000", id);
	return dpg_list_all(&w->srv, path, 10000);
}

/*
 * The filter's invariants for one dataset (DESIGN.md, "Budgets, ledger and
 * the filter"): unless its budget was ever lowered (a PATCH below what was
 * spent is allowed), the spent epsilon and delta and the epsilon of spent +
 * reserved stay within the budget; open reservations and charges agree with
 * the reservation list and the ledger.
 */
static void check_dataset(struct world *w, const struct fz_dataset *d)
{
	char path[256];
	json_t *b, *ledger, *rsv, *dry, *row;
	double eps = d->epsilon, delta = d->delta, b_eps, b_delta, spent_eps, spent_delta;
	bool lowered = !d->known_budget, archived;
	long charge_rows = 0, open = 0;
	size_t i;

	snprintf(path, sizeof(path), "/v1/datasets/%s", d->id);
	b = admin_call(w, "GET", path, NULL, 200);
	archived = json_is_true(json_object_get(b, "archived"));
	json_decref(b);
	snprintf(path, sizeof(path), "/v1/datasets/%s/budget", d->id);
	b = admin_call(w, "GET", path, NULL, 200);
	ledger = ledger_of(w, d->id);
	json_array_foreach(ledger, i, row) {
		const char *kind = json_string_value(json_object_get(row, "kind"));

		if (strcmp(kind, "budget") == 0) {
			double e = dpg_num(row, "epsilon"), dl = dpg_num(row, "delta");

			lowered |= e < eps || dl < delta;
			eps = e;
			delta = dl;
		}
		charge_rows += strcmp(kind, "charge") == 0 || strcmp(kind, "commit") == 0;
	}
	snprintf(path, sizeof(path), "/v1/datasets/%s/reservations?limit=1000", d->id);
	rsv = dpg_list_all_of(&w->srv, path, "reservations", 10000);
	json_array_foreach(rsv, i, row)
		open += strcmp(json_string_value(json_object_get(row, "state")), "open") == 0;
	snprintf(path, sizeof(path), "/v1/datasets/%s/dry-run", d->id);
	dry = admin_call(w, "POST", path,
			 "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0,\"delta\":0}}", 200);

	b_eps = dpg_num(b, "budget.epsilon");
	b_delta = dpg_num(b, "budget.delta");
	spent_eps = dpg_num(b, "spent.epsilon");
	spent_delta = dpg_num(b, "spent.delta");
	cr_expect_eq(b_eps, eps, "%s: the budget is not the ledger's last", d->id);
	cr_expect_eq(b_delta, delta, "%s: the budget delta is not the ledger's last", d->id);
	cr_expect_eq((long)dpg_num(b, "charges"), charge_rows, "%s: charges vs ledger rows", d->id);
	cr_expect_eq((long)dpg_num(b, "reserved.open"), open, "%s: open reservations", d->id);
	cr_expect(open > 0 || dpg_num(b, "reserved.epsilon") == 0.0,
		  "%s: epsilon reserved with no open reservation", d->id);
	cr_expect(spent_eps >= 0 && spent_delta >= 0 && dpg_num(b, "remaining.epsilon") >= 0,
		  "%s: a negative figure", d->id);
	if (!lowered) {
		cr_expect(spent_eps <= b_eps, "%s (%s): spent epsilon %.17g > budget %.17g", d->id,
			  d->accountant, spent_eps, b_eps);
		cr_expect(spent_delta <= b_delta, "%s (%s): spent delta %.17g > budget %.17g", d->id,
			  d->accountant, spent_delta, b_delta);
		cr_expect(dpg_num(dry, "after.spent_epsilon") <= b_eps,
			  "%s (%s): spent + reserved epsilon %.17g > budget %.17g", d->id, d->accountant,
			  dpg_num(dry, "after.spent_epsilon"), b_eps);
		cr_expect(archived || json_is_true(json_object_get(dry, "fits")),
			  "%s (%s): a zero event does not fit a dataset within its budget", d->id,
			  d->accountant);
	}
	json_decref(b);
	json_decref(ledger);
	json_decref(rsv);
	json_decref(dry);
}

/* Ends the run: jobs, invariants, SIGTERM, `dpgate verify`, cleanup. */
static void world_finish(struct world *w)
{
	const char *argv[] = {dpg_bin(), "verify", "--db", w->srv.db, NULL};
	char out[1 << 16];
	json_t *list, *d;
	size_t i;
	int status;

	if (w->server_dead) {
		print_server_log(w);
		cr_assert_fail("the server died (seed %" PRIu64 ")", w->seed);
	}
	end_jobs(w);
	/* Every dataset the server knows is one the fuzzer knows. */
	list = admin_call(w, "GET", "/v1/datasets?archived=true", NULL, 200);
	json_array_foreach(json_object_get(list, "datasets"), i, d) {
		const char *id = json_string_value(json_object_get(d, "id"));

		cr_expect_not_null(dataset_find(w, id), "a dataset the fuzzer did not see made: %s", id);
	}
	json_decref(list);
	for (i = 0; i < w->n_ds; i++)
		check_dataset(w, &w->ds[i]);
	status = dpg_server_signal(&w->srv, SIGTERM);
	if (status != 0)
		print_server_log(w);
	cr_expect_eq(status, 0, "dpgate exited with status %d after SIGTERM", status);
	status = dpg_run(out, sizeof(out), argv);
	cr_expect_eq(status, 0, "dpgate verify exited %d: %s", status, out);
	dpg_server_destroy(&w->srv); /* removes the directory (the server has stopped) */
	for (i = 0; i < w->n_replays; i++)
		free(w->replays[i].answer);
	free(w->seeds);
	json_decref(w->corpus);
}

/* ---- fixed cases: inputs sent on every run ----------------------------------- */

/* Builds fixed case i of the corpus (an object of its "fixed" list, which
 * "about" describes) into r; returns the status its answer must have (0:
 * any). */
static long fixed_request(struct world *w, const json_t *c, size_t i, struct request *r)
{
	static const char *const fields[] = {"why", "method", "path", "role", "content_type",
					     "body", "status"};
	static const struct seed fixed_seed = {"", "", A_PUBLIC, NULL, NULL, P_NONE, NULL, false};
	const char *method = corpus_string(c, "method", i), *path = corpus_string(c, "path", i);
	const char *content_type = corpus_string(c, "content_type", i), *key;
	const json_t *body = json_object_get(c, "body"), *v;

	json_object_foreach((json_t *)c, key, v)
		corpus_word(key, fields, sizeof(fields) / sizeof(fields[0]), i, "field");
	cr_assert(method && path && corpus_string(c, "why", i), "fixed case %zu: no why, method or path",
		  i);
	cr_assert(json_is_integer(json_object_get(c, "status")), "fixed case %zu: no status", i);
	memset(r, 0, sizeof(*r));
	r->seed = &fixed_seed;
	snprintf(r->method, sizeof(r->method), "%s", method);
	snprintf(r->path, sizeof(r->path), "%s", path);
	snprintf(r->mutation, sizeof(r->mutation), "fixed case %zu", i);
	r->role = (enum role)corpus_word(corpus_string(c, "role", i), role_names,
					 sizeof(role_names) / sizeof(role_names[0]), i, "role");
	r->key = key_of(w, r->role);
	if (content_type)
		snprintf(r->content_type, sizeof(r->content_type), "%s", content_type);
	if (corpus_string(c, "body", i)) {
		r->has_body = true;
		buf_add(&r->body, json_string_value(body), json_string_length(body));
	}
	return (long)json_integer_value(json_object_get(c, "status"));
}

/* Sends each fixed case and checks the properties of its answer. */
static void run_fixed(struct world *w)
{
	const json_t *list = json_object_get(w->corpus, "fixed");

	cr_assert_gt(json_array_size(list), 0, "fuzz_seeds.json holds no fixed cases");
	for (size_t i = 0; i < json_array_size(list); i++) {
		const json_t *c = json_array_get(list, i);
		struct request r;
		long status = fixed_request(w, c, i, &r);

		send_and_check(w, &r);
		cr_expect(status == 0 || w->last_status == status,
			  "fixed case %zu (%s %s: %s): status %ld, want %ld", i, r.method, r.path,
			  corpus_string(c, "why", i), w->last_status, status);
		request_free(&r);
	}
}

/* ---- the tests ---------------------------------------------------------------- */

Test(fuzz, fixed_cases_keep_every_property, .timeout = 300)
{
	struct world *w = world_start();

	run_fixed(w);
	cr_expect_eq(w->failures, 0, "%d fixed case(s) broke a property (see above)", w->failures);
	world_finish(w);
	free(w);
}

Test(fuzz, mutated_requests_keep_every_property, .timeout = 900)
{
	struct world *w = world_start();
	long iters = (long)env_u64("DPGATE_FUZZ_ITERS", FUZZ_DEFAULT_ITERS);
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (w->iter = 0; w->iter < iters && !w->server_dead && w->failures < FUZZ_MAX_FAILURES;
	     w->iter++) {
		struct request r;

		instantiate(w, &w->seeds[below(w, w->n_seeds)], &r);
		mutate(w, &r);
		send_and_check(w, &r);
		/* A client retrying an admitted request gets its stored answer. */
		if ((w->last_status == 201 || w->last_status == 202) && idempotency_sent(&r) &&
		    chance(w, 1, 2)) {
			note(&r, "sent again");
			send_and_check(w, &r);
		}
		request_free(&r);
	}
	fprintf(stderr, "fuzz: seed %" PRIu64 ": %ld requests in %.1f s, %d failure(s), %zu datasets,"
		" %zu jobs, %ld retries of stored answers\n", w->seed, w->iter, elapsed_s(&t0),
		w->failures, w->n_ds, w->jobs.n, w->replays_seen);
	fprintf(stderr, "fuzz: answers by status:");
	for (int st = 0; st < 600; st++)
		if (w->statuses[st])
			fprintf(stderr, " %d:%ld", st, w->statuses[st]);
	fputc('\n', stderr);
	cr_expect_eq(w->failures, 0, "seed %" PRIu64 ": %d request(s) broke a property (see above)",
		     w->seed, w->failures);
	world_finish(w);
	free(w);
}
