/*
 * store_table_cache.c: hosted tables kept parsed between queries (see
 * store.h for what the key is and why a hit is the same table a
 * fresh parse would give).
 *
 * Entries live in one doubly linked list, most recently used first.  An
 * entry leaves the list when it is forgotten or evicted; if requests still
 * hold references it is then "detached" and freed by the last release.
 * bytes counts the listed entries only.
 *
 * A miss makes an entry without its table, in the list of parses under
 * way, and its maker (the claim's holder) reads and parses the file.
 * Requests that miss the same key meanwhile take a reference to that entry
 * and wait for it: without this, every request that missed read and
 * parsed the same file at once, each holding the file's bytes and its
 * parse (8 queries on one 64 MiB table held 0.8 to 2 GB), and enough of them
 * could exhaust memory.  The claim ends with the table (it becomes a
 * listed or detached entry as an added one does, and every waiter already
 * holds it) or without (the waiters drop their reference and look again:
 * the first becomes the next parser).  Parses of different keys share
 * c->max_parses slots, so memory for parses does not grow with threads.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* Where an entry is in its life; it only moves down the list. */
enum entry_state {
	ENTRY_PARSING, /* claimed: in c->parsing, no table yet */
	ENTRY_READY,   /* has its table (listed, or detached) */
	ENTRY_FAILED,  /* its claim ended without a table: freed by the last waiter */
};

/* The caller's hold on one key's parse: it lives in the entry it fills. */
struct srv_table_claim {
	srv_table_ref *entry;
};

struct srv_table_ref {
	srv_link link; /* first: in the list while listed, in parsing while parsing */
	char *path;
	char *schema;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	mech_table *table;
	size_t bytes;
	unsigned refs;
	bool listed;
	enum entry_state state;
	bool forgotten; /* forget() named its path while it was parsed */
	struct srv_table_claim claim;
};

struct srv_table_cache {
	pthread_mutex_t lock;
	pthread_cond_t parsed; /* an entry left ENTRY_PARSING */
	pthread_cond_t slot;   /* a parse slot came free */
	srv_list list;         /* most recently used first */
	srv_list parsing;      /* entries whose claim is held */
	size_t max_bytes;
	unsigned max_parses;      /* claims held at once, at most */
	srv_table_cache_stats st; /* kept tables, claims held, counters */
};

/* The entry whose link is l (its first member); NULL for NULL. */
static srv_table_ref *ref_of(srv_link *l)
{
	return (srv_table_ref *)l;
}

srv_table_cache *srv_table_cache_new(size_t max_bytes)
{
	srv_table_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->parsed, NULL);
	pthread_cond_init(&c->slot, NULL);
	c->max_bytes = max_bytes;
	c->max_parses = DPG_TABLE_PARSES;
	return c;
}

static void entry_free(srv_table_ref *e)
{
	if (!e)
		return;
	mech_table_free(e->table);
	free(e->path);
	free(e->schema);
	free(e);
}

static void unlink_entry(srv_table_cache *c, srv_table_ref *e)
{
	srv_list_unlink(&c->list, &e->link);
	e->listed = false;
	c->st.bytes -= e->bytes;
	c->st.tables--;
}

static void push_front(srv_table_cache *c, srv_table_ref *e)
{
	srv_list_push_front(&c->list, &e->link);
	e->listed = true;
	c->st.bytes += e->bytes;
	c->st.tables++;
}

/* Takes e out of the list; frees it when nobody uses it.  Under the lock. */
static void drop_entry(srv_table_cache *c, srv_table_ref *e)
{
	unlink_entry(c, e);
	if (e->refs == 0)
		entry_free(e);
}

/* Drops unused tables, least recently used first, until the listed ones
 * fit the bound (or only used ones are left).  Under the lock. */
static void shrink(srv_table_cache *c)
{
	srv_table_ref *e = ref_of(c->list.tail);

	while (e && c->st.bytes > c->max_bytes) {
		srv_table_ref *prev = ref_of(e->link.prev);

		if (e->refs == 0) {
			drop_entry(c, e);
			c->st.evictions++;
		}
		e = prev;
	}
}

void srv_table_cache_free(srv_table_cache *c)
{
	if (!c)
		return;
	while (c->list.head)
		drop_entry(c, ref_of(c->list.head));
	pthread_cond_destroy(&c->slot);
	pthread_cond_destroy(&c->parsed);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static bool same_state(const srv_table_ref *e, const struct stat *st)
{
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
	       e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Drops every listed parse of `path`, except one in state *keep (when
 * keep is not NULL); users that hold one keep it until their release.
 * Under the lock. */
static void drop_path(srv_table_cache *c, const char *path, const struct stat *keep)
{
	for (srv_table_ref *e = ref_of(c->list.head), *next; e; e = next) {
		next = ref_of(e->link.next);
		if ((!keep || !same_state(e, keep)) && !strcmp(e->path, path))
			drop_entry(c, e);
	}
}

/* Makes e the most recently used and takes a reference.  Under the lock. */
static srv_table_ref *use(srv_table_cache *c, srv_table_ref *e)
{
	if (ref_of(c->list.head) != e) {
		unlink_entry(c, e);
		push_front(c, e);
	}
	e->refs++;
	return e;
}

static bool same_key(const srv_table_ref *e, const char *path, const struct stat *st,
		     const char *schema)
{
	return same_state(e, st) && !strcmp(e->path, path) && !strcmp(e->schema, schema);
}

/* The entry of `l` (the listed ones, or those being parsed) for the key,
 * or NULL.  Under the lock. */
static srv_table_ref *lookup(srv_list *l, const char *path, const struct stat *st,
			     const char *schema)
{
	for (srv_table_ref *e = ref_of(l->head); e; e = ref_of(e->link.next))
		if (same_key(e, path, st, schema))
			return e;
	return NULL;
}

/* The listed entry for the key, used (see use), or NULL: whoever finds an
 * entry holds it.  Under the lock. */
static srv_table_ref *lookup_and_use(srv_table_cache *c, const char *path,
				     const struct stat *st, const char *schema)
{
	srv_table_ref *e = lookup(&c->list, path, st, schema);

	return e ? use(c, e) : NULL;
}

static void set_state(srv_table_ref *e, const struct stat *st)
{
	e->dev = st->st_dev;
	e->ino = st->st_ino;
	e->size = st->st_size;
	e->mtime = st->st_mtim;
}

/* A new entry for the key, with one reference and no table; NULL when out
 * of memory. */
static srv_table_ref *entry_new(const char *path, const struct stat *st, const char *schema)
{
	srv_table_ref *e = calloc(1, sizeof(*e));

	if (!e || !(e->path = strdup(path)) || !(e->schema = strdup(schema))) {
		entry_free(e);
		return NULL;
	}
	set_state(e, st);
	e->refs = 1;
	e->claim.entry = e;
	return e;
}

/* Gives e its table t and the size that counts against the bound. */
static void entry_fill(srv_table_ref *e, mech_table *t)
{
	e->table = t;
	e->bytes = mech_table_bytes(t) + strlen(e->path) + strlen(e->schema) + sizeof(*e);
	e->state = ENTRY_READY;
}

#ifdef DPG_TESTING
srv_table_ref *srv_table_cache_find(srv_table_cache *c, const char *path, const struct stat *st,
				    const char *schema)
{
	srv_table_ref *e;

	if (!c)
		return NULL;
	pthread_mutex_lock(&c->lock);
	e = lookup_and_use(c, path, st, schema);
	if (e)
		c->st.hits++;
	else
		c->st.misses++;
	pthread_mutex_unlock(&c->lock);
	return e;
}
#endif

/* Keeps e, a parse of its key (state *st) that just got its table, unless
 * it is too large or another parse of that key is kept already (e then
 * stays detached for those who hold it).  A parse of the same path in
 * another state describes a file that has since changed (it was just read
 * or written in state *st): no lookup will match it again, so it goes now
 * instead of when it ages out.  Under the lock. */
static void keep_new(srv_table_cache *c, srv_table_ref *e, const struct stat *st)
{
	drop_path(c, e->path, st);
	if (e->bytes <= c->max_bytes && !lookup(&c->list, e->path, st, e->schema)) {
		push_front(c, e);
		shrink(c);
	}
}

srv_table_ref *srv_table_cache_add(srv_table_cache *c, const char *path, const struct stat *st,
				   const char *schema, mech_table *t)
{
	srv_table_ref *e = entry_new(path, st, schema), *had;

	if (!e) {
		mech_table_free(t);
		return NULL;
	}
	entry_fill(e, t);
	if (!c)
		return e;
	pthread_mutex_lock(&c->lock);
	had = lookup_and_use(c, path, st, schema);
	if (had) {
		/* Another request parsed the same file meanwhile: one copy. */
		pthread_mutex_unlock(&c->lock);
		entry_free(e);
		return had;
	}
	keep_new(c, e, st);
	pthread_mutex_unlock(&c->lock);
	return e;
}

/* Ends one reference to e, which a claim's failure left without a table.
 * Under the lock. */
static void unref_failed(srv_table_ref *e)
{
	if (--e->refs == 0)
		entry_free(e);
}

/*
 * Waits, with a reference to e (a parse under way of the key asked for),
 * until its claim ends.  Returns e, held, when it got its table; NULL when
 * the claim failed (the reference is gone; the caller looks again).  Under
 * the lock, which the wait releases.
 */
static srv_table_ref *wait_for_parse(srv_table_cache *c, srv_table_ref *e)
{
	e->refs++;
	while (e->state == ENTRY_PARSING)
		pthread_cond_wait(&c->parsed, &c->lock);
	if (e->state == ENTRY_READY)
		return e;
	unref_failed(e);
	return NULL;
}

/* Waits until one of the max_parses slots is free, and takes it.  Under
 * the lock, which the wait releases. */
static void take_slot(srv_table_cache *c)
{
	if (c->st.parsing >= c->max_parses)
		c->st.slot_waits++;
	while (c->st.parsing >= c->max_parses)
		pthread_cond_wait(&c->slot, &c->lock);
	c->st.parsing++;
}

/* Frees a slot take_slot took.  Under the lock. */
static void give_slot(srv_table_cache *c)
{
	c->st.parsing--;
	pthread_cond_signal(&c->slot);
}

/* Runs take_slot or give_slot under the lock; nothing without a cache. */
static void slot_locked(srv_table_cache *c, void (*step)(srv_table_cache *))
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	step(c);
	pthread_mutex_unlock(&c->lock);
}

void srv_table_cache_slot_take(srv_table_cache *c)
{
	slot_locked(c, take_slot);
}

void srv_table_cache_slot_give(srv_table_cache *c)
{
	slot_locked(c, give_slot);
}

/* Makes `mine` (a new entry of the key) a parse under way, claimed by the
 * caller, once one of the max_parses slots is free.  Under the lock, which
 * the wait releases; waiters on the key wait on `mine` meanwhile. */
static srv_table_claim *claim_parse(srv_table_cache *c, srv_table_ref *mine)
{
	mine->state = ENTRY_PARSING;
	srv_list_push_front(&c->parsing, &mine->link);
	c->st.misses++;
	take_slot(c);
	return &mine->claim;
}

srv_table_ref *srv_table_cache_get(srv_table_cache *c, const char *path, const struct stat *st,
				   const char *schema, srv_table_claim **ret_claim)
{
	srv_table_ref *e = NULL, *mine = NULL, *parsing;

	*ret_claim = NULL;
	if (!c) {
		mine = entry_new(path, st, schema);
		*ret_claim = mine ? &mine->claim : NULL;
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	for (;;) {
		if ((e = lookup_and_use(c, path, st, schema))) {
			c->st.hits++;
			break;
		}
		if ((parsing = lookup(&c->parsing, path, st, schema))) {
			c->st.waits++;
			if ((e = wait_for_parse(c, parsing)))
				break;
			continue;
		}
		if (mine) {
			*ret_claim = claim_parse(c, mine);
			mine = NULL;
			break;
		}
		/* Not under the lock: the key may be claimed meanwhile, so look again. */
		pthread_mutex_unlock(&c->lock);
		mine = entry_new(path, st, schema);
		pthread_mutex_lock(&c->lock);
		if (!mine)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	entry_free(mine);
	return e;
}

/* Ends the claim held on e, which leaves the parses under way and frees
 * its slot.  Under the lock. */
static void end_claim(srv_table_cache *c, srv_table_ref *e)
{
	srv_list_unlink(&c->parsing, &e->link);
	give_slot(c);
	pthread_cond_broadcast(&c->parsed);
}

srv_table_ref *srv_table_cache_claim_done(srv_table_cache *c, srv_table_claim *claim,
					  const struct stat *st, mech_table *t)
{
	srv_table_ref *e = claim->entry;

	if (!c) {
		set_state(e, st);
		entry_fill(e, t);
		return e;
	}
	pthread_mutex_lock(&c->lock);
	/* Its key may change (the read found a newer state than the stat that
	 * claimed it), so under the lock: waiters compare keys in c->parsing. */
	set_state(e, st);
	entry_fill(e, t);
	end_claim(c, e);
	if (!e->forgotten)
		keep_new(c, e, st);
	pthread_mutex_unlock(&c->lock);
	return e;
}

void srv_table_cache_claim_drop(srv_table_cache *c, srv_table_claim *claim)
{
	srv_table_ref *e;

	if (!claim)
		return;
	e = claim->entry;
	if (!c) {
		entry_free(e);
		return;
	}
	pthread_mutex_lock(&c->lock);
	e->state = ENTRY_FAILED;
	end_claim(c, e);
	unref_failed(e);
	pthread_mutex_unlock(&c->lock);
}

const mech_table *srv_table_ref_table(const srv_table_ref *r)
{
	return r->table;
}

void srv_table_cache_release(srv_table_cache *c, srv_table_ref *r)
{
	bool gone;

	if (!r)
		return;
	if (!c) {
		entry_free(r);
		return;
	}
	pthread_mutex_lock(&c->lock);
	gone = --r->refs == 0 && !r->listed;
	if (!gone && r->refs == 0)
		shrink(c);
	pthread_mutex_unlock(&c->lock);
	if (gone)
		entry_free(r);
}

void srv_table_cache_forget(srv_table_cache *c, const char *path)
{
	if (!c || !path)
		return;
	pthread_mutex_lock(&c->lock);
	drop_path(c, path, NULL);
	/* A parse under way of the path would be kept when it ends: it still
	 * goes to those who wait for it, but is not kept. */
	for (srv_table_ref *e = ref_of(c->parsing.head); e; e = ref_of(e->link.next))
		if (!strcmp(e->path, path))
			e->forgotten = true;
	pthread_mutex_unlock(&c->lock);
}

void srv_table_cache_get_stats(srv_table_cache *c, srv_table_cache_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	*ret = c->st;
	pthread_mutex_unlock(&c->lock);
}
