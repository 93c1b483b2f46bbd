/*
 * store_table_cache.c: hosted tables kept parsed between queries (see
 * store.h for what the key is and why a hit is the same table a
 * fresh parse would give).
 *
 * Entries live in one doubly linked list, most recently used first.  An
 * entry leaves the list when it is forgotten or evicted; if requests still
 * hold references it is then "detached" and freed by the last release.
 * bytes counts the listed entries only.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

struct srv_table_ref {
	srv_link link; /* first: in the list while listed */
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
};

struct srv_table_cache {
	pthread_mutex_t lock;
	srv_list list; /* most recently used first */
	size_t max_bytes, bytes, tables;
	unsigned long long hits, misses, evictions;
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
	c->max_bytes = max_bytes;
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
	c->bytes -= e->bytes;
	c->tables--;
}

static void push_front(srv_table_cache *c, srv_table_ref *e)
{
	srv_list_push_front(&c->list, &e->link);
	e->listed = true;
	c->bytes += e->bytes;
	c->tables++;
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

	while (e && c->bytes > c->max_bytes) {
		srv_table_ref *prev = ref_of(e->link.prev);

		if (e->refs == 0) {
			drop_entry(c, e);
			c->evictions++;
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

/* The listed entry for the key, used (see use), or NULL: whoever finds an
 * entry holds it.  Under the lock. */
static srv_table_ref *lookup_and_use(srv_table_cache *c, const char *path,
				     const struct stat *st, const char *schema)
{
	for (srv_table_ref *e = ref_of(c->list.head); e; e = ref_of(e->link.next))
		if (same_state(e, st) && !strcmp(e->path, path) && !strcmp(e->schema, schema))
			return use(c, e);
	return NULL;
}

srv_table_ref *srv_table_cache_find(srv_table_cache *c, const char *path, const struct stat *st,
				    const char *schema)
{
	srv_table_ref *e;

	if (!c)
		return NULL;
	pthread_mutex_lock(&c->lock);
	e = lookup_and_use(c, path, st, schema);
	if (e)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->lock);
	return e;
}

srv_table_ref *srv_table_cache_add(srv_table_cache *c, const char *path, const struct stat *st,
				   const char *schema, mech_table *t)
{
	srv_table_ref *e = calloc(1, sizeof(*e)), *had;

	if (!e || !(e->path = strdup(path)) || !(e->schema = strdup(schema))) {
		if (e)
			e->table = t;
		else
			mech_table_free(t);
		entry_free(e);
		return NULL;
	}
	e->dev = st->st_dev;
	e->ino = st->st_ino;
	e->size = st->st_size;
	e->mtime = st->st_mtim;
	e->table = t;
	e->bytes = mech_table_bytes(t) + strlen(path) + strlen(schema) + sizeof(*e);
	e->refs = 1;
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
	/* A parse of the same path in another state describes a file that has
	 * since changed (it was just read or written in state *st): no lookup
	 * will match it again, so it goes now instead of when it ages out. */
	drop_path(c, path, st);
	if (e->bytes <= c->max_bytes) {
		push_front(c, e);
		shrink(c);
	}
	pthread_mutex_unlock(&c->lock);
	return e;
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
	pthread_mutex_unlock(&c->lock);
}

void srv_table_cache_get_stats(srv_table_cache *c, srv_table_cache_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	ret->tables = c->tables;
	ret->bytes = c->bytes;
	ret->hits = c->hits;
	ret->misses = c->misses;
	ret->evictions = c->evictions;
	pthread_mutex_unlock(&c->lock);
}
