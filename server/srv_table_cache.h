/*
 * srv_table_cache.h: hosted tables kept parsed between queries.
 *
 * Parsing a hosted table's CSV is most of what a query on it costs (about
 * 0.2 s at 10^6 rows, for a count that then takes a millisecond).  The
 * cache keeps parsed tables, keyed by what makes the parse a function of
 * the key alone:
 *   - the file's path: every upload writes a file under a name no other
 *     upload uses, and a file is never written again after its upload
 *     (srv_data_put_csv), so a path names one content for its lifetime;
 *   - the file's identity and state from stat(2) (device, inode, size,
 *     modification time): a file changed or replaced behind dpgate's back
 *     is not served from an old parse;
 *   - the schema text it is parsed with (dataset_data.columns).
 * The database stays the source of truth: a reader first reads the link
 * (path and schema), then asks the cache, so a replaced or removed table is
 * never served (its path is no longer linked).  An upload adds the parse it
 * made under the key its link will have, so the first query after it reads
 * no file either.
 *
 * Tables are shared read-only between requests through counted
 * references.  The cache holds at most max_bytes of tables that no request
 * uses, dropping the least recently used first; tables in use are never
 * freed under their users.  One mutex guards it; parsing happens outside
 * it.
 */
#ifndef SRV_TABLE_CACHE_H
#define SRV_TABLE_CACHE_H

#include <stddef.h>
#include <sys/stat.h>

#include "mech.h"

typedef struct srv_table_cache srv_table_cache;

/* One use of a cached (or uncached) table; see srv_table_ref_table. */
typedef struct srv_table_ref srv_table_ref;

/* A new empty cache that keeps at most max_bytes of unused tables (0:
 * keeps none; every table is freed at its last release).  NULL when out of
 * memory. */
srv_table_cache *srv_table_cache_new(size_t max_bytes);

/* Frees the cache and its tables.  Every reference must have been
 * released.  Accepts NULL. */
void srv_table_cache_free(srv_table_cache *c);

/*
 * The cached table for file `path` with stat(2) state *st, parsed with
 * `schema` (text), as a new reference (srv_table_cache_release), or NULL
 * when there is none.  Counts a hit or a miss.
 */
srv_table_ref *srv_table_cache_find(srv_table_cache *c, const char *path, const struct stat *st,
				    const char *schema);

/*
 * Adds table t (ownership passes to the cache, also on failure) as the
 * parse of `path` in state *st with `schema`, and returns a reference to
 * it; when another request added the same key meanwhile, t is freed and
 * the reference is to that one.  Kept parses of `path` in another state
 * are dropped (the file has moved on).  A table larger than the cache's
 * bound is not kept, only referenced (freed at its last release).  With c == NULL,
 * the reference is to t alone.  NULL only when out of memory (t freed).
 */
srv_table_ref *srv_table_cache_add(srv_table_cache *c, const char *path, const struct stat *st,
				   const char *schema, mech_table *t);

/* The table a reference holds; valid until the reference is released. */
const mech_table *srv_table_ref_table(const srv_table_ref *r);

/* Ends a use.  c must be the cache the reference came from (NULL for one
 * made with c == NULL).  Accepts r == NULL. */
void srv_table_cache_release(srv_table_cache *c, srv_table_ref *r);

/* Drops every table parsed from `path` (a file that an upload replaced):
 * unused ones are freed now, used ones at their last release. */
void srv_table_cache_forget(srv_table_cache *c, const char *path);

/* What the cache holds and has done, for /metrics and tests. */
typedef struct srv_table_cache_stats {
	size_t tables;      /* tables kept (used or not) */
	size_t bytes;       /* their size */
	unsigned long long hits, misses, evictions;
} srv_table_cache_stats;

void srv_table_cache_get_stats(srv_table_cache *c, srv_table_cache_stats *ret);

#endif
