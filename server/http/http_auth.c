/*
 * http_auth.c: who a request comes from: its key, checked.
 *
 * The server keeps the keys it has checked in a small in-memory cache (id,
 * hash, role, scope), so a request costs no database read for its key.  A
 * revocation must reach it at once: through the API it flushes the cache;
 * `dpgate keys revoke` (another process) rewrites the stamp file
 * "<database>-keys" after its commit, and every lookup stats that file and
 * flushes the cache when it changed.  Two rewrites within one tick of the
 * file system's clock leave the same mtime, inode and size, so while the
 * stamp is that recent its contents (a nanosecond time) are compared too,
 * as git does for racily clean files.  The rows themselves are the store's
 * (store_keys.c).
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "http.h"
#include "json.h"

#define KEY_PREFIX "dpg_"

/* srv_keys_check's scope half: an array of distinct valid ids. */
static int check_scope(srv_role role, const json_t *datasets, acct_error *err)
{
	size_t i;
	json_t *v;

	if (!datasets)
		return role == SRV_ROLE_ANALYST ?
			       acct_error_set(err, ACCT_EINVAL, "/datasets",
					      "an analyst key needs 'datasets', the ids it may spend on") :
			       0;
	if (!json_is_array(datasets) || json_array_size(datasets) > DPG_MAX_SCOPED_DATASETS)
		return acct_error_set(err, ACCT_EINVAL, "/datasets",
				      "'datasets' must be an array of at most %d dataset ids",
				      DPG_MAX_SCOPED_DATASETS);
	if (role == SRV_ROLE_ADMIN && json_array_size(datasets) > 0)
		return acct_error_set(err, ACCT_EINVAL, "/datasets", "admin keys are not scoped");
	if (role == SRV_ROLE_ANALYST && json_array_size(datasets) == 0)
		return acct_error_set(err, ACCT_EINVAL, "/datasets",
				      "an analyst key needs at least one dataset");
	json_array_foreach(datasets, i, v) {
		if (!json_is_string(v) || !srv_id_ok(json_string_value(v)))
			return acct_error_set(err, ACCT_EINVAL, "/datasets",
					      "entry %zu is not a dataset id (1 to %d of A-Z a-z 0-9 _ - .)",
					      i, DPG_MAX_ID_BYTES);
		for (size_t k = 0; k < i; k++)
			if (json_equal(v, json_array_get(datasets, k)))
				return acct_error_set(err, ACCT_EINVAL, "/datasets",
						      "dataset '%s' is listed twice", json_string_value(v));
	}
	return 0;
}

int srv_keys_check(srv_role role, const json_t *datasets, const char *note, acct_error *err)
{
	if (check_scope(role, datasets, err) < 0)
		return ACCT_EINVAL;
	if (note && (note[0] == '\0' || strlen(note) > DPG_MAX_NOTE_BYTES))
		return acct_error_set(err, ACCT_EINVAL, "/note", "'note' must be a string of 1 to %d bytes",
				      DPG_MAX_NOTE_BYTES);
	return 0;
}

char *srv_keys_scope_text(const json_t *datasets)
{
	return datasets ? json_dumps(datasets, JSON_COMPACT) : strdup("[]");
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0' || s[n] == '_';
}

/* ---- the key cache --------------------------------------------------------- */

#define AUTH_CACHE_SLOTS 64

struct auth_entry {
	bool used;
	char id[2 * SRV_KEY_ID_BYTES + 1];
	uint8_t hash[crypto_hash_sha256_BYTES];
	srv_role role;
	json_t *scope;           /* parsed once; lookups hand out references */
};

struct srv_auth_cache {
	pthread_mutex_t lock;
	char stamp_path[4200];
	bool stamp_seen;         /* the stamp's state below is known */
	bool stamp_exists;
	struct timespec stamp_mtime;
	ino_t stamp_ino;
	off_t stamp_size;
	char stamp_text[64];     /* its contents, read while its mtime was recent */
	unsigned next;
	/* Incremented by every flush.  A miss notes it before reading the key
	 * row, and the row is cached only if no flush came between: a row read
	 * just before a revocation committed, cached just after the flush that
	 * followed it, would keep the revoked key valid until the next one. */
	uint64_t gen;
	struct auth_entry e[AUTH_CACHE_SLOTS];
};

srv_auth_cache *srv_auth_cache_new(const char *db_path)
{
	srv_auth_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	srv_keys_stamp_path(db_path, c->stamp_path, sizeof(c->stamp_path));
	return c;
}

static void cache_flush_locked(srv_auth_cache *c)
{
	c->gen++;
	for (unsigned i = 0; i < AUTH_CACHE_SLOTS; i++) {
		json_decref(c->e[i].scope);
		sodium_memzero(&c->e[i], sizeof(c->e[i]));
	}
}

void srv_auth_cache_flush(srv_auth_cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	cache_flush_locked(c);
	pthread_mutex_unlock(&c->lock);
}

void srv_auth_cache_free(srv_auth_cache *c)
{
	if (!c)
		return;
	cache_flush_locked(c);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The stamp's first bytes into buf (size bytes, NUL-terminated; empty
 * when it cannot be read). */
static void read_stamp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

/* Whether a file modified at `mtime` may be modified again within the same
 * tick of the file system's clock (coarse: a jiffy, or seconds on some file
 * systems); two seconds covers them all, and a clock stepped back. */
static bool mtime_recent(const struct timespec *mtime)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec - mtime->tv_sec < 2;
}

/* Flushes the cache when the keys stamp changed (another process revoked a
 * key).  Called with the lock held. */
static void cache_check_stamp_locked(srv_auth_cache *c)
{
	struct stat st;
	bool exists = stat(c->stamp_path, &st) == 0;
	char text[sizeof(c->stamp_text)] = "";

	if (c->stamp_seen && exists == c->stamp_exists &&
	    (!exists || (st.st_mtim.tv_sec == c->stamp_mtime.tv_sec &&
			 st.st_mtim.tv_nsec == c->stamp_mtime.tv_nsec && st.st_ino == c->stamp_ino &&
			 st.st_size == c->stamp_size))) {
		if (!exists || !mtime_recent(&st.st_mtim))
			return;
		read_stamp(c->stamp_path, text, sizeof(text));
		if (strcmp(text, c->stamp_text) == 0)
			return;
	} else if (exists) {
		read_stamp(c->stamp_path, text, sizeof(text));
	}
	cache_flush_locked(c);
	c->stamp_seen = true;
	c->stamp_exists = exists;
	if (exists) {
		c->stamp_mtime = st.st_mtim;
		c->stamp_ino = st.st_ino;
		c->stamp_size = st.st_size;
		memcpy(c->stamp_text, text, sizeof(text));
	}
}

/* 1 = found and checked (ret filled), 0 = not cached (*ret_gen: the
 * generation to pass to cache_insert), -1 = cached, wrong. */
static int cache_lookup(srv_auth_cache *c, const char *id, const uint8_t *want, srv_principal *ret,
			uint64_t *ret_gen)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	cache_check_stamp_locked(c);
	*ret_gen = c->gen;
	for (unsigned i = 0; i < AUTH_CACHE_SLOTS; i++) {
		struct auth_entry *e = &c->e[i];

		if (!e->used || strcmp(e->id, id) != 0)
			continue;
		rc = -1;
		if (sodium_memcmp(e->hash, want, crypto_hash_sha256_BYTES) == 0) {
			memset(ret, 0, sizeof(*ret));
			srv_strcopy(ret->key_id, sizeof(ret->key_id), id);
			ret->role = e->role;
			/* A copy of its own: jansson reads a reference count
			 * without an atomic load before it decrements it, so
			 * one json_t must not be released by two threads. */
			ret->datasets = json_deep_copy(e->scope);
			rc = ret->datasets ? 1 : 0;
		}
		break;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Caches a key row read after cache_lookup returned generation `gen`,
 * unless the cache was flushed since. */
static void cache_insert(srv_auth_cache *c, const srv_principal *p, const uint8_t *hash,
			 uint64_t gen)
{
	json_t *scope = json_deep_copy(p->datasets); /* the cache's own */
	struct auth_entry *e;

	if (!json_is_array(scope)) {
		json_decref(scope);
		return;
	}
	pthread_mutex_lock(&c->lock);
	cache_check_stamp_locked(c);
	if (c->gen != gen) {
		pthread_mutex_unlock(&c->lock);
		json_decref(scope);
		return;
	}
	e = &c->e[c->next];
	c->next = (c->next + 1) % AUTH_CACHE_SLOTS;
	json_decref(e->scope);
	e->used = true;
	snprintf(e->id, sizeof(e->id), "%s", p->key_id);
	memcpy(e->hash, hash, crypto_hash_sha256_BYTES);
	e->role = p->role;
	e->scope = scope;
	pthread_mutex_unlock(&c->lock);
}

/* ---- checking a key ------------------------------------------------------- */

#define KEY_BODY_LEN (2 * SRV_KEY_ID_BYTES + 1 + 2 * SRV_KEY_SECRET_BYTES) /* "<id>_<secret>" */

/*
 * The last key this thread hashed, and its hash.  A keep-alive client shows
 * the same key on every request, and the hash is a function of the key text
 * alone, so one SHA-256 per thread and key suffices.  The text is compared
 * in constant time and wiped when replaced.  Only the hash is memoised:
 * every request still goes through the cache (and its revocation stamp) or
 * the database.
 */
static _Thread_local struct {
	bool valid;
	char text[KEY_BODY_LEN];
	uint8_t hash[crypto_hash_sha256_BYTES];
} hash_memo;

/* `body` is a checked "<id>_<secret>" (KEY_BODY_LEN characters), `id_hex`
 * its id part. */
static void key_hash_memo(const char *body, const char *id_hex,
			  uint8_t out[crypto_hash_sha256_BYTES])
{
	char secret_hex[2 * SRV_KEY_SECRET_BYTES + 1];

	if (hash_memo.valid && sodium_memcmp(hash_memo.text, body, KEY_BODY_LEN) == 0) {
		memcpy(out, hash_memo.hash, crypto_hash_sha256_BYTES);
		return;
	}
	memcpy(secret_hex, body + 2 * SRV_KEY_ID_BYTES + 1, 2 * SRV_KEY_SECRET_BYTES);
	secret_hex[2 * SRV_KEY_SECRET_BYTES] = '\0';
	srv_keys_hash(id_hex, secret_hex, out);
	sodium_memzero(secret_hex, sizeof(secret_hex));
	sodium_memzero(&hash_memo, sizeof(hash_memo));
	memcpy(hash_memo.text, body, KEY_BODY_LEN);
	memcpy(hash_memo.hash, out, crypto_hash_sha256_BYTES);
	hash_memo.valid = true;
}

int srv_auth_check(srv_db *db, srv_auth_cache *cache, const char *authorization,
		   srv_principal *ret)
{
	char id_hex[2 * SRV_KEY_ID_BYTES + 1];
	uint8_t want[crypto_hash_sha256_BYTES];
	const char *p;
	char *scope = NULL;
	srv_principal pr;
	uint64_t gen = 0;

	/* The scheme's name is case-insensitive (RFC 9110, 11.1). */
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return -1;
	p = authorization + 7;
	while (*p == ' ')
		p++;
	if (strncmp(p, KEY_PREFIX, strlen(KEY_PREFIX)) != 0)
		return -1;
	p += strlen(KEY_PREFIX);
	if (strlen(p) != KEY_BODY_LEN ||
	    !is_hex(p, 2 * SRV_KEY_ID_BYTES) || p[2 * SRV_KEY_ID_BYTES] != '_' ||
	    !is_hex(p + 2 * SRV_KEY_ID_BYTES + 1, 2 * SRV_KEY_SECRET_BYTES))
		return -1;
	memcpy(id_hex, p, 2 * SRV_KEY_ID_BYTES);
	id_hex[2 * SRV_KEY_ID_BYTES] = '\0';
	key_hash_memo(p, id_hex, want);
	if (cache) {
		int hit = cache_lookup(cache, id_hex, want, ret, &gen);

		if (hit != 0)
			return hit > 0 ? 0 : -1;
	}
	memset(&pr, 0, sizeof(pr));
	switch (srv_keys_lookup(db, id_hex, want, &pr.role, &scope)) {
	case SRV_OK: break;
	case SRV_NOT_FOUND: return -1;
	default: return SRV_DB_ERROR;
	}
	snprintf(pr.key_id, sizeof(pr.key_id), "%s", id_hex);
	pr.datasets = json_loads(scope, 0, NULL);
	free(scope);
	if (!json_is_array(pr.datasets)) {
		json_decref(pr.datasets);
		return -1;
	}
	if (srv__auth_between_read_and_cache)
		srv__auth_between_read_and_cache();
	if (cache)
		cache_insert(cache, &pr, want, gen);
	*ret = pr;
	return 0;
}

void srv_principal_clear(srv_principal *p)
{
	if (!p)
		return;
	json_decref(p->datasets);
	p->datasets = NULL;
}

bool srv_principal_sees(const srv_principal *p, const char *id)
{
	size_t i;
	json_t *v;

	if (!p)
		return false;
	if (p->role == SRV_ROLE_ADMIN)
		return true;
	if (p->role == SRV_ROLE_VIEWER && json_array_size(p->datasets) == 0)
		return true;
	json_array_foreach(p->datasets, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), id) == 0)
			return true;
	return false;
}
