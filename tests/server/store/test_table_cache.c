/*
 * test_table_cache.c: the parsed-table cache (server/store/store_table_cache.c).
 *
 * What it must guarantee: a hit is only ever the table parsed from the same
 * path, in the same stat state, with the same schema; a table a request
 * holds is never freed under it (also when it is forgotten or evicted); the
 * unused tables it keeps stay within its bound, least recently used dropped
 * first; readers that miss one key at once parse it once, and at most
 * DPG_TABLE_PARSES parses run at once.  Use after free and leaks are the
 * sanitizer build's to catch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <criterion/criterion.h>

#include "mech.h"
#include "store.h"

/* A table of `rows` rows of one numeric column `x` (values 1..rows). */
static mech_table *table_of(size_t rows)
{
	size_t cap = 16 + rows * 24;
	char *csv = malloc(cap);
	size_t n = (size_t)snprintf(csv, cap, "x\n");
	mech_table *t = NULL;
	acct_error err;

	cr_assert_not_null(csv);
	for (size_t i = 1; i <= rows; i++)
		n += (size_t)snprintf(csv + n, cap - n, "%zu\n", i);
	acct_error_init(&err);
	cr_assert_eq(mech_table_parse_csv(csv, n, NULL, 0, &t, &err), 0, "%s", err.text);
	free(csv);
	return t;
}

/* A stat state: inode `ino`, size `size`, modified at `mtime` s. */
static struct stat state(ino_t ino, off_t size, time_t mtime)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_dev = 7;
	st.st_ino = ino;
	st.st_size = size;
	st.st_mtim.tv_sec = mtime;
	return st;
}

static size_t rows_of(const srv_table_ref *r)
{
	return mech_table_rows(srv_table_ref_table(r));
}

Test(table_cache, a_hit_is_the_same_parse_and_counts)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	struct stat st = state(1, 100, 1000);
	srv_table_cache_stats s;
	srv_table_ref *a, *b;

	cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &st, "[]"));
	a = srv_table_cache_add(c, "/t/a.csv", &st, "[]", table_of(5));
	cr_assert_not_null(a);
	b = srv_table_cache_find(c, "/t/a.csv", &st, "[]");
	cr_assert_not_null(b);
	cr_assert_eq(srv_table_ref_table(a), srv_table_ref_table(b));
	cr_assert_eq(rows_of(b), 5);
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.hits, 1);
	cr_assert_eq(s.misses, 1);
	cr_assert_eq(s.tables, 1);
	cr_assert_gt(s.bytes, 5 * sizeof(double));
	srv_table_cache_release(c, a);
	srv_table_cache_release(c, b);
	/* Released, still kept: the next query is a hit. */
	b = srv_table_cache_find(c, "/t/a.csv", &st, "[]");
	cr_assert_not_null(b);
	srv_table_cache_release(c, b);
	srv_table_cache_free(c);
}

/* Every part of the key on its own turns a hit into a miss. */
Test(table_cache, any_change_of_the_key_misses)
{
	static const struct {
		const char *what, *path, *schema;
		ino_t ino;
		off_t size;
		time_t mtime;
		long mtime_ns;
	} other[] = {
		{"another path", "/t/b.csv", "[]", 1, 100, 1000, 0},
		{"another schema", "/t/a.csv", "[{\"name\":\"x\"}]", 1, 100, 1000, 0},
		{"another inode (replaced file)", "/t/a.csv", "[]", 2, 100, 1000, 0},
		{"another size (appended to)", "/t/a.csv", "[]", 1, 101, 1000, 0},
		{"another mtime (rewritten)", "/t/a.csv", "[]", 1, 100, 1001, 0},
		{"another mtime nanosecond", "/t/a.csv", "[]", 1, 100, 1000, 1},
	};
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	struct stat st = state(1, 100, 1000);

	srv_table_cache_release(c, srv_table_cache_add(c, "/t/a.csv", &st, "[]", table_of(3)));
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		struct stat o = state(other[i].ino, other[i].size, other[i].mtime);
		srv_table_ref *r;

		o.st_mtim.tv_nsec = other[i].mtime_ns;
		r = srv_table_cache_find(c, other[i].path, &o, other[i].schema);
		cr_assert_null(r, "%s: served the old parse", other[i].what);
	}
	{
		struct stat o = state(1, 100, 1000);

		o.st_dev = 8;
		cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &o, "[]"), "another device");
	}
	srv_table_cache_free(c);
}

/*
 * A file read again in a new state (rewritten behind the server's back, or
 * its modification time moved) leaves one parse kept, not two: the old
 * state's parse goes at the add, also while a user holds it (the user
 * keeps its table until release).  Another path is untouched.
 */
Test(table_cache, a_new_state_of_a_path_drops_its_older_parse)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	struct stat old_st = state(1, 100, 1000), new_st = state(1, 100, 2000);
	srv_table_ref *held = srv_table_cache_add(c, "/t/a.csv", &old_st, "[]", table_of(4));
	srv_table_cache_stats s;
	srv_table_ref *r;

	srv_table_cache_release(c, srv_table_cache_add(c, "/t/b.csv", &old_st, "[]", table_of(2)));
	srv_table_cache_release(c, srv_table_cache_add(c, "/t/a.csv", &new_st, "[]", table_of(5)));
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 2, "%zu tables kept", s.tables);
	cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &old_st, "[]"));
	cr_assert_eq(rows_of(held), 4, "the holder's table changed under it");
	srv_table_cache_release(c, held);
	r = srv_table_cache_find(c, "/t/a.csv", &new_st, "[]");
	cr_assert_not_null(r);
	cr_assert_eq(rows_of(r), 5);
	srv_table_cache_release(c, r);
	r = srv_table_cache_find(c, "/t/b.csv", &old_st, "[]");
	cr_assert_not_null(r, "another path's parse was dropped");
	srv_table_cache_release(c, r);
	srv_table_cache_free(c);
}

/* Two requests that parsed the same file at once share one copy. */
Test(table_cache, a_second_add_of_a_key_returns_the_first)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	struct stat st = state(1, 100, 1000);
	srv_table_ref *a = srv_table_cache_add(c, "/t/a.csv", &st, "[]", table_of(4));
	srv_table_ref *b = srv_table_cache_add(c, "/t/a.csv", &st, "[]", table_of(4));
	srv_table_cache_stats s;

	cr_assert_eq(a, b);
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 1);
	srv_table_cache_release(c, a);
	srv_table_cache_release(c, b);
	srv_table_cache_free(c);
}

/* Room for two tables of 1000 rows: a third drops the least recently used
 * (a find counts as a use). */
Test(table_cache, unused_tables_beyond_the_bound_go_least_recent_first)
{
	mech_table *probe = table_of(1000);
	size_t one = mech_table_bytes(probe) + 256;
	srv_table_cache *c = srv_table_cache_new(2 * one + one / 2);
	struct stat sa = state(1, 10, 1), sb = state(2, 10, 1), sc = state(3, 10, 1);
	srv_table_cache_stats s;
	srv_table_ref *r;

	mech_table_free(probe);
	srv_table_cache_release(c, srv_table_cache_add(c, "/t/a.csv", &sa, "[]", table_of(1000)));
	srv_table_cache_release(c, srv_table_cache_add(c, "/t/b.csv", &sb, "[]", table_of(1000)));
	/* a is now more recent than b. */
	srv_table_cache_release(c, srv_table_cache_find(c, "/t/a.csv", &sa, "[]"));
	srv_table_cache_release(c, srv_table_cache_add(c, "/t/c.csv", &sc, "[]", table_of(1000)));
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 2);
	cr_assert_eq(s.evictions, 1);
	cr_assert_leq(s.bytes, 2 * one + one / 2);
	cr_assert_null(srv_table_cache_find(c, "/t/b.csv", &sb, "[]"), "b was the least recent");
	r = srv_table_cache_find(c, "/t/a.csv", &sa, "[]");
	cr_assert_not_null(r);
	srv_table_cache_release(c, r);
	r = srv_table_cache_find(c, "/t/c.csv", &sc, "[]");
	cr_assert_not_null(r);
	srv_table_cache_release(c, r);
	srv_table_cache_free(c);
}

/* A table in use outlives eviction and forgetting; it goes at its last
 * release. */
Test(table_cache, a_table_in_use_is_never_freed_under_its_user)
{
	mech_table *probe = table_of(1000);
	size_t one = mech_table_bytes(probe) + 256;
	srv_table_cache *c = srv_table_cache_new(one + one / 2);
	struct stat sa = state(1, 10, 1), sb = state(2, 10, 1);
	srv_table_ref *held, *other;
	srv_table_cache_stats s;
	const double *x;

	mech_table_free(probe);
	held = srv_table_cache_add(c, "/t/a.csv", &sa, "[]", table_of(1000));
	/* b does not fit beside a, and a is in use: both stay while used. */
	other = srv_table_cache_add(c, "/t/b.csv", &sb, "[]", table_of(1000));
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 2);
	cr_assert_eq(s.evictions, 0);
	x = mech_table_numeric_values(srv_table_ref_table(held), 0);
	cr_assert_eq(x[999], 1000.0);
	/* Released, a is the least recent unused one: dropped to fit. */
	srv_table_cache_release(c, held);
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 1);
	cr_assert_eq(s.evictions, 1);
	cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &sa, "[]"));
	/* b forgotten while used: readable until released. */
	srv_table_cache_forget(c, "/t/b.csv");
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 0);
	cr_assert_eq(s.bytes, 0);
	cr_assert_null(srv_table_cache_find(c, "/t/b.csv", &sb, "[]"));
	x = mech_table_numeric_values(srv_table_ref_table(other), 0);
	cr_assert_eq(x[0], 1.0);
	cr_assert_eq(rows_of(other), 1000);
	srv_table_cache_release(c, other);
	srv_table_cache_free(c);
}

/* Forgetting drops every state of the path and nothing else. */
Test(table_cache, forget_drops_only_that_path)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	struct stat s1 = state(1, 10, 1), s2 = state(1, 11, 2), s3 = state(3, 10, 1);
	srv_table_cache_stats s;
	srv_table_ref *r;

	srv_table_cache_release(c, srv_table_cache_add(c, "/t/a.csv", &s1, "[]", table_of(2)));
	srv_table_cache_release(c, srv_table_cache_add(c, "/t/a.csv", &s2, "[]", table_of(3)));
	srv_table_cache_release(c, srv_table_cache_add(c, "/t/c.csv", &s3, "[]", table_of(4)));
	srv_table_cache_forget(c, "/t/a.csv");
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 1);
	cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &s1, "[]"));
	cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &s2, "[]"));
	r = srv_table_cache_find(c, "/t/c.csv", &s3, "[]");
	cr_assert_not_null(r);
	cr_assert_eq(rows_of(r), 4);
	srv_table_cache_release(c, r);
	srv_table_cache_forget(c, NULL);
	srv_table_cache_forget(NULL, "/t/c.csv");
	srv_table_cache_free(c);
}

/* A table larger than the bound is served but not kept; with no cache at
 * all, the reference owns its table. */
Test(table_cache, too_large_or_no_cache_is_served_and_not_kept)
{
	srv_table_cache *c = srv_table_cache_new(1024);
	struct stat st = state(1, 10, 1);
	srv_table_cache_stats s;
	srv_table_ref *r = srv_table_cache_add(c, "/t/big.csv", &st, "[]", table_of(2000));

	cr_assert_not_null(r);
	cr_assert_eq(rows_of(r), 2000);
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 0);
	cr_assert_eq(s.bytes, 0);
	srv_table_cache_release(c, r);
	cr_assert_null(srv_table_cache_find(c, "/t/big.csv", &st, "[]"));
	srv_table_cache_free(c);

	cr_assert_null(srv_table_cache_find(NULL, "/t/a.csv", &st, "[]"));
	r = srv_table_cache_add(NULL, "/t/a.csv", &st, "[]", table_of(3));
	cr_assert_not_null(r);
	cr_assert_eq(rows_of(r), 3);
	srv_table_cache_release(NULL, r);
	srv_table_cache_release(NULL, NULL);
}

/* Threads that find, add, claim, parse (or fail to), read, forget and
 * release the same few keys at once, under a bound that keeps about two
 * tables: every table read has the rows its key says (a table is the
 * parse of `rows = 100 * key`), and at the end nothing is in use, so what
 * is kept fits the bound. */
#define RACE_THREADS 4
#define RACE_ROUNDS 400
#define RACE_KEYS 5

struct race {
	srv_table_cache *c;
	unsigned seed;
	int bad;
};

/* A reader through srv_table_cache_get: the table, kept or parsed here
 * (`rows` rows); NULL when `fail` and this reader had to parse (its claim
 * dropped). */
static srv_table_ref *claimed_parse(srv_table_cache *c, const char *path, const struct stat *st,
				    size_t rows, bool fail)
{
	srv_table_claim *claim = NULL;
	srv_table_ref *ref = srv_table_cache_get(c, path, st, "[]", &claim);

	if (ref || !claim)
		return ref;
	if (fail) {
		srv_table_cache_claim_drop(c, claim);
		return NULL;
	}
	return srv_table_cache_claim_done(c, claim, st, table_of(rows));
}

static void *race_loop(void *arg)
{
	struct race *r = arg;
	unsigned x = r->seed;

	for (int i = 0; i < RACE_ROUNDS; i++) {
		unsigned k;
		char path[32];
		struct stat st;
		srv_table_ref *ref;

		x = x * 1103515245u + 12345u;
		k = (x >> 16) % RACE_KEYS;
		snprintf(path, sizeof(path), "/t/%u.csv", k);
		st = state(k + 1, (off_t)k, 1);
		if ((x >> 8) % 17 == 0) {
			srv_table_cache_forget(r->c, path);
			continue;
		}
		if ((x >> 4) % 2) {
			ref = srv_table_cache_find(r->c, path, &st, "[]");
			if (!ref)
				ref = srv_table_cache_add(r->c, path, &st, "[]",
							  table_of(100 * (k + 1)));
		} else {
			ref = claimed_parse(r->c, path, &st, 100 * (k + 1), (x >> 12) % 7 == 0);
			if (!ref)
				continue;
		}
		if (!ref || rows_of(ref) != 100 * (k + 1))
			r->bad++;
		srv_table_cache_release(r->c, ref);
	}
	return NULL;
}

Test(table_cache, concurrent_users_see_their_own_tables)
{
	mech_table *probe = table_of(300);
	size_t bound = 2 * (mech_table_bytes(probe) + 256);
	srv_table_cache *c = srv_table_cache_new(bound);
	struct race r[RACE_THREADS];
	pthread_t th[RACE_THREADS];
	srv_table_cache_stats s;

	mech_table_free(probe);
	for (int i = 0; i < RACE_THREADS; i++) {
		r[i] = (struct race){c, 1000u + (unsigned)i, 0};
		cr_assert_eq(pthread_create(&th[i], NULL, race_loop, &r[i]), 0);
	}
	for (int i = 0; i < RACE_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(r[i].bad, 0, "thread %d read a wrong table %d times", i, r[i].bad);
	}
	srv_table_cache_get_stats(c, &s);
	cr_assert_gt(s.hits, 0);
	cr_assert_gt(s.misses, 0);
	cr_assert_leq(s.bytes, bound);
	srv_table_cache_free(c);
}

/* ---- concurrent misses share one parse ---------------------------------------- */

/* How long a reader waits for the others to wait (they need a few
 * microseconds): a cache that lets them parse instead fails the test's
 * counts after this, rather than hanging it. */
#define AWAIT_WAITS_MS 60000

/* Waits (polling) until the cache has counted at least `waits` waits for
 * a parse under way and `slot_waits` waits for a parse slot, or for
 * AWAIT_WAITS_MS. */
static void await_waits(srv_table_cache *c, unsigned long long waits,
			unsigned long long slot_waits)
{
	struct timespec ms = {0, 1000000};
	srv_table_cache_stats s;

	for (int i = 0; i < AWAIT_WAITS_MS; i++) {
		srv_table_cache_get_stats(c, &s);
		if (s.waits >= waits && s.slot_waits >= slot_waits)
			return;
		nanosleep(&ms, NULL);
	}
}

#define FETCHERS 8

/* Readers of one key, all started at once: the first claim is dropped
 * when fail_first is set (its holder gives up, as a request whose read
 * failed answers an error), every other one ends with a table of `rows`
 * rows. */
struct fetchers {
	srv_table_cache *c;
	pthread_barrier_t start;
	size_t rows;
	bool fail_first;
	atomic_uint claims;
	const mech_table *got[FETCHERS];
	srv_table_ref *refs[FETCHERS];
	int failed; /* the reader that dropped its claim, or -1 */
	atomic_int bad;
};

struct fetcher {
	struct fetchers *all;
	int i;
};

static void *fetch_run(void *arg)
{
	struct fetcher *me = arg;
	struct fetchers *f = me->all;
	struct stat st = state(3, 300, 3000);
	srv_table_claim *claim;
	srv_table_ref *r;

	pthread_barrier_wait(&f->start);
	for (;;) {
		r = srv_table_cache_get(f->c, "/t/one.csv", &st, "[]", &claim);
		if (r || !claim)
			break;
		/* The first parse holds on until every other reader waits for
		 * it: the misses are concurrent, whatever the scheduler does. */
		if (atomic_fetch_add(&f->claims, 1) == 0) {
			await_waits(f->c, FETCHERS - 1, 0);
			if (f->fail_first) {
				srv_table_cache_claim_drop(f->c, claim);
				f->failed = me->i;
				return NULL;
			}
		}
		r = srv_table_cache_claim_done(f->c, claim, &st, table_of(f->rows));
		break;
	}
	if (!r || rows_of(r) != f->rows)
		atomic_fetch_add(&f->bad, 1);
	f->refs[me->i] = r;
	f->got[me->i] = r ? srv_table_ref_table(r) : NULL;
	return NULL;
}

/* Runs FETCHERS readers of one key on c; checks that every one (but a
 * failed one) got the same table, and returns how many claims they made. */
static unsigned run_fetchers(srv_table_cache *c, size_t rows, bool fail_first)
{
	static struct fetchers f;
	struct fetcher me[FETCHERS];
	pthread_t th[FETCHERS];

	memset(&f, 0, sizeof(f));
	f.c = c;
	f.rows = rows;
	f.fail_first = fail_first;
	f.failed = -1;
	atomic_init(&f.claims, 0);
	atomic_init(&f.bad, 0);
	cr_assert_eq(pthread_barrier_init(&f.start, NULL, FETCHERS), 0);
	for (int i = 0; i < FETCHERS; i++) {
		me[i] = (struct fetcher){&f, i};
		cr_assert_eq(pthread_create(&th[i], NULL, fetch_run, &me[i]), 0);
	}
	for (int i = 0; i < FETCHERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&f.start);
	cr_assert_eq(atomic_load(&f.bad), 0, "%d readers got no table or a wrong one",
		     atomic_load(&f.bad));
	cr_assert_eq(f.failed >= 0, fail_first);
	for (int i = 0, first = f.failed == 0; i < FETCHERS; i++) {
		if (i == f.failed)
			continue;
		cr_assert_eq(f.got[i], f.got[first], "reader %d got another parse than %d", i,
			     first);
		srv_table_cache_release(c, f.refs[i]);
	}
	return atomic_load(&f.claims);
}

/* Eight readers miss one uncached key at once: one reads and parses, the
 * seven others wait for it and share its table. */
Test(table_cache, concurrent_misses_of_one_key_parse_once)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	srv_table_cache_stats s;

	cr_assert_eq(run_fetchers(c, 50, false), 1, "the key was parsed more than once");
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.misses, 1);
	cr_assert_eq(s.waits, FETCHERS - 1);
	cr_assert_eq(s.hits, 0);
	cr_assert_eq(s.tables, 1);
	cr_assert_eq(s.parsing, 0);
	srv_table_cache_free(c);
}

/* The first parse fails (its claim dropped, as on a read error or out of
 * memory): its waiters are released, exactly one of them parses again,
 * and every other one ends with that table. */
Test(table_cache, a_failed_parse_releases_its_waiters_and_one_parses)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	srv_table_cache_stats s;

	cr_assert_eq(run_fetchers(c, 60, true), 2, "not one parse after the failed one");
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.misses, 2);
	cr_assert_eq(s.tables, 1);
	cr_assert_eq(s.parsing, 0);
	srv_table_cache_free(c);
}

/* A parse too large for the bound is not kept, but still goes to every
 * reader that waited for it, and is freed at the last release (the
 * sanitizer build checks that it is freed, and only once). */
Test(table_cache, a_parse_too_large_to_keep_goes_to_its_waiters)
{
	srv_table_cache *c = srv_table_cache_new(1024);
	srv_table_cache_stats s;

	cr_assert_eq(run_fetchers(c, 2000, false), 1);
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.waits, FETCHERS - 1);
	cr_assert_eq(s.tables, 0);
	cr_assert_eq(s.bytes, 0);
	srv_table_cache_free(c);
}

/* Readers of as many different keys at once: at most DPG_TABLE_PARSES
 * parses run together, the others wait for a slot. */
#define SLOT_READERS 6

struct slot_readers {
	srv_table_cache *c;
	pthread_barrier_t start;
	atomic_uint claims, running, most;
	atomic_int bad;
};

struct slot_reader {
	struct slot_readers *all;
	unsigned key;
};

static void *slot_run(void *arg)
{
	struct slot_reader *me = arg;
	struct slot_readers *sr = me->all;
	struct stat st = state(10 + me->key, me->key, 1);
	srv_table_claim *claim;
	srv_table_ref *r;
	unsigned n, most;
	char path[32];

	snprintf(path, sizeof(path), "/t/slot%u.csv", me->key);
	pthread_barrier_wait(&sr->start);
	r = srv_table_cache_get(sr->c, path, &st, "[]", &claim);
	if (r || !claim) {
		atomic_fetch_add(&sr->bad, 1);
		srv_table_cache_release(sr->c, r);
		return NULL;
	}
	n = atomic_fetch_add(&sr->running, 1) + 1;
	most = atomic_load(&sr->most);
	while (n > most && !atomic_compare_exchange_weak(&sr->most, &most, n))
		;
	/* The first parses hold their slots until every other reader waits
	 * for one. */
	if (atomic_fetch_add(&sr->claims, 1) < DPG_TABLE_PARSES)
		await_waits(sr->c, 0, SLOT_READERS - DPG_TABLE_PARSES);
	atomic_fetch_sub(&sr->running, 1);
	srv_table_cache_release(sr->c, srv_table_cache_claim_done(sr->c, claim, &st, table_of(10)));
	return NULL;
}

Test(table_cache, parses_at_once_stay_within_the_slots)
{
	static struct slot_readers sr;
	struct slot_reader me[SLOT_READERS];
	pthread_t th[SLOT_READERS];
	srv_table_cache_stats s;

	memset(&sr, 0, sizeof(sr));
	sr.c = srv_table_cache_new(1 << 20);
	atomic_init(&sr.claims, 0);
	atomic_init(&sr.running, 0);
	atomic_init(&sr.most, 0);
	atomic_init(&sr.bad, 0);
	cr_assert_eq(pthread_barrier_init(&sr.start, NULL, SLOT_READERS), 0);
	for (unsigned i = 0; i < SLOT_READERS; i++) {
		me[i] = (struct slot_reader){&sr, i};
		cr_assert_eq(pthread_create(&th[i], NULL, slot_run, &me[i]), 0);
	}
	for (int i = 0; i < SLOT_READERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&sr.start);
	cr_assert_eq(atomic_load(&sr.bad), 0, "a reader of its own key did not get the parse");
	cr_assert_leq(atomic_load(&sr.most), DPG_TABLE_PARSES, "%u parses ran at once",
		      atomic_load(&sr.most));
	srv_table_cache_get_stats(sr.c, &s);
	cr_assert_eq(s.misses, SLOT_READERS);
	cr_assert_eq(s.slot_waits, SLOT_READERS - DPG_TABLE_PARSES);
	cr_assert_eq(s.tables, SLOT_READERS);
	cr_assert_eq(s.parsing, 0);
	srv_table_cache_free(sr.c);
}

/* A slot taken for a parse that no key names (an upload's) counts
 * against the same bound: with every slot so taken, a miss waits for one. */
struct slot_miss {
	srv_table_cache *c;
	atomic_int claimed; /* 0 while waiting; 1 claimed; -1 anything else */
};

static void *slot_miss_run(void *arg)
{
	struct slot_miss *m = arg;
	struct stat st = state(1, 10, 1);
	srv_table_claim *claim;
	srv_table_ref *r = srv_table_cache_get(m->c, "/t/miss.csv", &st, "[]", &claim);

	atomic_store(&m->claimed, !r && claim ? 1 : -1);
	srv_table_cache_release(m->c, r);
	srv_table_cache_claim_drop(m->c, claim);
	return NULL;
}

Test(table_cache, a_slot_held_for_an_upload_counts_against_parses_at_once)
{
	static struct slot_miss m;
	srv_table_cache_stats s;
	pthread_t th;

	m.c = srv_table_cache_new(1 << 20);
	atomic_init(&m.claimed, 0);
	for (int i = 0; i < DPG_TABLE_PARSES; i++)
		srv_table_cache_slot_take(m.c);
	srv_table_cache_get_stats(m.c, &s);
	cr_assert_eq(s.parsing, DPG_TABLE_PARSES);
	cr_assert_eq(pthread_create(&th, NULL, slot_miss_run, &m), 0);
	await_waits(m.c, 0, 1);
	cr_assert_eq(atomic_load(&m.claimed), 0, "a miss parsed while every slot was held");
	srv_table_cache_slot_give(m.c);
	pthread_join(th, NULL);
	cr_assert_eq(atomic_load(&m.claimed), 1);
	for (int i = 1; i < DPG_TABLE_PARSES; i++)
		srv_table_cache_slot_give(m.c);
	srv_table_cache_get_stats(m.c, &s);
	cr_assert_eq(s.slot_waits, 1);
	cr_assert_eq(s.parsing, 0);
	srv_table_cache_free(m.c);
}

/* A claim's table is kept under the state its read found, which may be
 * newer than the one it was claimed in, and not at all when its path was
 * forgotten (replaced) meanwhile; the claimer gets it either way. */
Test(table_cache, a_claim_keeps_its_reads_state_unless_forgotten)
{
	srv_table_cache *c = srv_table_cache_new(1 << 20);
	struct stat claimed = state(1, 100, 1000), read = state(1, 120, 1001);
	srv_table_claim *claim = NULL;
	srv_table_cache_stats s;
	srv_table_ref *r;

	cr_assert_null(srv_table_cache_get(c, "/t/a.csv", &claimed, "[]", &claim));
	cr_assert_not_null(claim);
	r = srv_table_cache_claim_done(c, claim, &read, table_of(6));
	cr_assert_eq(rows_of(r), 6);
	srv_table_cache_release(c, r);
	cr_assert_null(srv_table_cache_find(c, "/t/a.csv", &claimed, "[]"));
	r = srv_table_cache_find(c, "/t/a.csv", &read, "[]");
	cr_assert_not_null(r, "the parse is kept under the state that was read");
	srv_table_cache_release(c, r);

	claim = NULL;
	cr_assert_null(srv_table_cache_get(c, "/t/b.csv", &claimed, "[]", &claim));
	srv_table_cache_forget(c, "/t/b.csv");
	r = srv_table_cache_claim_done(c, claim, &claimed, table_of(7));
	cr_assert_eq(rows_of(r), 7);
	srv_table_cache_get_stats(c, &s);
	cr_assert_eq(s.tables, 1, "a parse of a forgotten path was kept");
	srv_table_cache_release(c, r);
	cr_assert_null(srv_table_cache_find(c, "/t/b.csv", &claimed, "[]"));

	/* Without a cache: a claim that waits for nothing, and its table. */
	claim = NULL;
	cr_assert_null(srv_table_cache_get(NULL, "/t/c.csv", &claimed, "[]", &claim));
	cr_assert_not_null(claim);
	r = srv_table_cache_claim_done(NULL, claim, &claimed, table_of(2));
	cr_assert_eq(rows_of(r), 2);
	srv_table_cache_release(NULL, r);
	claim = NULL;
	cr_assert_null(srv_table_cache_get(NULL, "/t/c.csv", &claimed, "[]", &claim));
	srv_table_cache_claim_drop(NULL, claim);
	srv_table_cache_claim_drop(c, NULL);
	srv_table_cache_free(c);
}
