/*
 * srv_auth.c: API keys.
 *
 * A key reads "dpg_<id>_<secret>": <id> is 8 random bytes in hex (public,
 * the row's primary key, shown in logs and the ledger as the actor) and
 * <secret> is 32 random bytes (256 bits) from getrandom, in hex.  Only
 * SHA-256("dpgate-key-v1" || id || secret) is stored; a presented key is
 * hashed the same way and compared with sodium_memcmp (constant time).
 *
 * The server keeps the keys it has checked in a small in-memory cache (id,
 * hash, role, scope), so a request costs no database read for its key.  A
 * revocation must reach it at once: through the API it flushes the cache;
 * `dpgate keys revoke` (another process) rewrites the stamp file
 * "<database>-keys" after its commit, and every lookup stats that file and
 * flushes the cache when it changed.
 *
 * Every creation and revocation is also a row of key_events (schema/008),
 * written in the same transaction: which key, what it could do, who did it
 * (an admin key's id, or "cli:<user>" for `dpgate keys`) and when.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <sodium.h>

#include "srv.h"
#include "base.h"
#include "srv_json.h"
#include "srv_store_internal.h"

#define KEY_PREFIX "dpg_"

static const char sql_key_lookup[] =
	"SELECT hash, role, datasets FROM api_keys WHERE id = ?1 AND revoked_at IS NULL";
#define KEY_HASH_CONTEXT "dpgate-key-v1"

static const char *const role_names[] = {
	[SRV_ROLE_NONE] = "none",
	[SRV_ROLE_VIEWER] = "viewer",
	[SRV_ROLE_ANALYST] = "analyst",
	[SRV_ROLE_ADMIN] = "admin",
};

const char *srv_role_name(srv_role role)
{
	return (unsigned)role <= SRV_ROLE_ADMIN ? role_names[role] : "none";
}

int srv_role_from_name(const char *name, srv_role *ret)
{
	for (unsigned i = SRV_ROLE_VIEWER; name && i <= SRV_ROLE_ADMIN; i++) {
		if (strcmp(role_names[i], name) == 0) {
			*ret = (srv_role)i;
			return 0;
		}
	}
	return -1;
}

static void key_hash(const char *id_hex, const char *secret_hex,
		     uint8_t out[crypto_hash_sha256_BYTES])
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)KEY_HASH_CONTEXT, strlen(KEY_HASH_CONTEXT));
	crypto_hash_sha256_update(&st, (const uint8_t *)id_hex, strlen(id_hex));
	crypto_hash_sha256_update(&st, (const uint8_t *)secret_hex, strlen(secret_hex));
	crypto_hash_sha256_final(&st, out);
}

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

/* Appends the key_events row of `action` on key_id (its role and scope as
 * the key row holds them), inside the caller's transaction. */
static int key_event(srv_db *db, const char *key_id, const char *action, const char *actor,
		     const char *now)
{
	sqlite3_stmt *s = NULL;
	int rc = SRV_DB_ERROR;

	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "INSERT INTO key_events (key_id, action, role, datasets, actor,"
			       " created_at) SELECT id, ?2, role, datasets, ?3, ?4 FROM api_keys"
			       " WHERE id = ?1",
			       -1, &s, NULL) != SQLITE_OK)
		return SRV_DB_ERROR;
	sqlite3_bind_text(s, 1, key_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, action, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, actor, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, now, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_DONE && sqlite3_changes(srv__db_handle(db)) == 1)
		rc = SRV_OK;
	sqlite3_finalize(s);
	return rc;
}

int srv_keys_create(srv_db *db, srv_role role, const json_t *datasets, const char *note,
		    const char *actor, char key_text[SRV_KEY_TEXT_BYTES],
		    char key_id[2 * SRV_KEY_ID_BYTES + 1])
{
	uint8_t id[SRV_KEY_ID_BYTES], secret[SRV_KEY_SECRET_BYTES], hash[crypto_hash_sha256_BYTES];
	char id_hex[2 * SRV_KEY_ID_BYTES + 1], secret_hex[2 * SRV_KEY_SECRET_BYTES + 1];
	char now[32];
	char *scope = NULL;
	sqlite3_stmt *s = NULL;
	int rc = SRV_DB_ERROR;

	if (srv__random_bytes(id, sizeof(id)) != SRV_OK ||
	    srv__random_bytes(secret, sizeof(secret)) != SRV_OK)
		return SRV_NO_RANDOM;
	sodium_bin2hex(id_hex, sizeof(id_hex), id, sizeof(id));
	sodium_bin2hex(secret_hex, sizeof(secret_hex), secret, sizeof(secret));
	key_hash(id_hex, secret_hex, hash);
	scope = datasets ? json_dumps(datasets, JSON_COMPACT) : strdup("[]");
	if (!scope)
		goto out;
	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		goto out;
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "INSERT INTO api_keys (id, hash, role, datasets, note, created_at)"
			       " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			       -1, &s, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(s, 1, id_hex, -1, SQLITE_STATIC);
	sqlite3_bind_blob(s, 2, hash, sizeof(hash), SQLITE_STATIC);
	sqlite3_bind_text(s, 3, srv_role_name(role), -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, scope, -1, SQLITE_STATIC);
	if (note)
		sqlite3_bind_text(s, 5, note, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 6, now, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_DONE)
		goto out;
	if (key_event(db, id_hex, "create", actor, now) != SRV_OK)
		goto out;
	/* The key is shown only once it and its audit row are durable. */
	rc = srv__commit(db);
	if (rc != SRV_OK)
		goto out;
	snprintf(key_text, SRV_KEY_TEXT_BYTES, KEY_PREFIX "%s_%s", id_hex, secret_hex);
	snprintf(key_id, 2 * SRV_KEY_ID_BYTES + 1, "%s", id_hex);
out:
	srv__rollback(db);
	sodium_memzero(secret, sizeof(secret));
	sodium_memzero(secret_hex, sizeof(secret_hex));
	sqlite3_finalize(s);
	free(scope);
	return rc;
}

int srv_keys_list(srv_db *db, json_t **ret)
{
	sqlite3_stmt *s = NULL;
	json_t *arr = json_array();
	int rc;

	if (!arr || sqlite3_prepare_v2(srv__db_handle(db),
				       "SELECT id, role, datasets, note, created_at, revoked_at"
				       " FROM api_keys ORDER BY created_at, id",
				       -1, &s, NULL) != SQLITE_OK) {
		json_decref(arr);
		return SRV_DB_ERROR;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		json_t *o = json_pack("{s:s, s:s, s:o, s:s}", "id", sqlite3_column_text(s, 0),
				      "role", sqlite3_column_text(s, 1), "datasets",
				      json_loads((const char *)sqlite3_column_text(s, 2), 0, NULL),
				      "created_at", sqlite3_column_text(s, 4));

		if (!o)
			continue;
		if (sqlite3_column_type(s, 3) != SQLITE_NULL)
			json_object_set_new(o, "note", json_string((const char *)sqlite3_column_text(s, 3)));
		json_object_set_new(o, "revoked", json_boolean(sqlite3_column_type(s, 5) != SQLITE_NULL));
		if (sqlite3_column_type(s, 5) != SQLITE_NULL)
			json_object_set_new(o, "revoked_at",
					    json_string((const char *)sqlite3_column_text(s, 5)));
		json_array_append_new(arr, o);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		json_decref(arr);
		return SRV_DB_ERROR;
	}
	*ret = arr;
	return SRV_OK;
}

/* Revokes a key inside the caller's transaction; a key revoked already
 * stays as it was (SRV_OK, no second audit row). */
static int revoke_locked(srv_db *db, const char *key_id, const char *actor)
{
	sqlite3_stmt *s = NULL;
	char now[32];
	int rc = SRV_DB_ERROR;

	srv_now_text(now);
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
			       -1, &s, NULL) != SQLITE_OK)
		return SRV_DB_ERROR;
	sqlite3_bind_text(s, 1, key_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, now, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_DONE)
		goto out;
	if (sqlite3_changes(srv__db_handle(db)) == 1) {
		rc = key_event(db, key_id, "revoke", actor, now);
		goto out;
	}
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(srv__db_handle(db), "SELECT 1 FROM api_keys WHERE id = ?1", -1, &s,
			       NULL) != SQLITE_OK) {
		s = NULL;
		goto out;
	}
	sqlite3_bind_text(s, 1, key_id, -1, SQLITE_STATIC);
	switch (sqlite3_step(s)) {
	case SQLITE_ROW: rc = SRV_OK; break;
	case SQLITE_DONE: rc = SRV_NOT_FOUND; break;
	default: break;
	}
out:
	sqlite3_finalize(s);
	return rc;
}

int srv_keys_revoke(srv_db *db, const char *key_id, const char *actor)
{
	int rc;

	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	rc = revoke_locked(db, key_id, actor);
	if (rc == SRV_OK)
		rc = srv__commit(db);
	srv__rollback(db);
	return rc;
}

int srv_keys_revoke_keeping_an_admin(srv_db *db, const char *key_id, const char *actor)
{
	sqlite3_stmt *s = NULL;
	int64_t admins = 0;
	bool live_admin = false;
	int rc;

	/* One write transaction: two admins revoking their own keys at once
	 * each counted two admins outside it, and both went. */
	if (srv__begin_write(db) < 0)
		return SRV_DB_ERROR;
	rc = SRV_DB_ERROR;
	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT role = 'admin' AND revoked_at IS NULL FROM api_keys WHERE id = ?1",
			       -1, &s, NULL) == SQLITE_OK) {
		sqlite3_bind_text(s, 1, key_id, -1, SQLITE_STATIC);
		switch (sqlite3_step(s)) {
		case SQLITE_ROW:
			live_admin = sqlite3_column_int(s, 0) != 0;
			rc = SRV_OK;
			break;
		case SQLITE_DONE: rc = SRV_NOT_FOUND; break;
		default: break;
		}
	}
	sqlite3_finalize(s);
	if (rc == SRV_OK && live_admin && (rc = srv_keys_count(db, SRV_ROLE_ADMIN, &admins)) == SRV_OK &&
	    admins <= 1)
		rc = SRV_CONFLICT;
	if (rc == SRV_OK)
		rc = revoke_locked(db, key_id, actor);
	if (rc == SRV_OK)
		rc = srv__commit(db);
	srv__rollback(db);
	return rc;
}

int srv_keys_count(srv_db *db, srv_role role, int64_t *ret)
{
	sqlite3_stmt *s = NULL;
	int rc = SRV_DB_ERROR;

	if (sqlite3_prepare_v2(srv__db_handle(db),
			       "SELECT count(*) FROM api_keys WHERE role = ?1 AND revoked_at IS NULL",
			       -1, &s, NULL) != SQLITE_OK)
		return SRV_DB_ERROR;
	sqlite3_bind_text(s, 1, srv_role_name(role), -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		*ret = sqlite3_column_int64(s, 0);
		rc = SRV_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

static json_t *key_event_row(sqlite3_stmt *s, const void *unused)
{
	(void)unused;
	return json_pack("{s:I, s:s, s:s, s:s, s:o, s:s, s:b, s:s}", "seq",
			 (json_int_t)sqlite3_column_int64(s, 0), "key_id", sqlite3_column_text(s, 1),
			 "action", sqlite3_column_text(s, 2), "role", sqlite3_column_text(s, 3),
			 "datasets", json_loads((const char *)sqlite3_column_text(s, 4), 0, NULL),
			 "actor", sqlite3_column_text(s, 5), "synthesized",
			 sqlite3_column_int(s, 6) != 0, "created_at", sqlite3_column_text(s, 7));
}

int srv_keys_audit(srv_db *db, const char *unused, int64_t after, int64_t limit,
		   json_t **ret_entries, int64_t *ret_next)
{
	(void)unused;
	return srv__db_page(db,
			    "SELECT seq, key_id, action, role, datasets, actor, synthesized,"
			    " created_at FROM key_events WHERE seq > ?2 ORDER BY seq LIMIT ?3",
			    NULL, after, limit, key_event_row, NULL, ret_entries, ret_next);
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
	unsigned next;
	/* Incremented by every flush.  A miss notes it before reading the key
	 * row, and the row is cached only if no flush came between: a row read
	 * just before a revocation committed, cached just after the flush that
	 * followed it, would keep the revoked key valid until the next one. */
	uint64_t gen;
	struct auth_entry e[AUTH_CACHE_SLOTS];
};

/* The stamp beside the database's resolved path: a server started on a
 * symlink and a `keys revoke` given the file itself (or the reverse) must
 * name one stamp, or the revocation never reaches the server's cache. */
void srv_keys_stamp_path(const char *db_path, char *buf, size_t size)
{
	char resolved[PATH_MAX];

	snprintf(buf, size, "%s-keys", realpath(db_path, resolved) ? resolved : db_path);
}

int srv_keys_touch_stamp(const char *db_path)
{
	char path[4200], text[64];
	struct timespec ts;
	FILE *f;

	srv_keys_stamp_path(db_path, path, sizeof(path));
	clock_gettime(CLOCK_REALTIME, &ts);
	f = fopen(path, "w");
	if (!f)
		return -1;
	snprintf(text, sizeof(text), "%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

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

/* Flushes the cache when the keys stamp changed (another process revoked a
 * key).  Called with the lock held. */
static void cache_check_stamp_locked(srv_auth_cache *c)
{
	struct stat st;
	bool exists = stat(c->stamp_path, &st) == 0;

	if (c->stamp_seen && exists == c->stamp_exists &&
	    (!exists || (st.st_mtim.tv_sec == c->stamp_mtime.tv_sec &&
			 st.st_mtim.tv_nsec == c->stamp_mtime.tv_nsec && st.st_ino == c->stamp_ino &&
			 st.st_size == c->stamp_size)))
		return;
	cache_flush_locked(c);
	c->stamp_seen = true;
	c->stamp_exists = exists;
	if (exists) {
		c->stamp_mtime = st.st_mtim;
		c->stamp_ino = st.st_ino;
		c->stamp_size = st.st_size;
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
	key_hash(id_hex, secret_hex, out);
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
	sqlite3_stmt *s = NULL;
	srv_principal pr;
	uint64_t gen = 0;
	int rc = -1;

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
	s = srv__cached_stmt(db, sql_key_lookup);
	if (!s)
		return -1;
	sqlite3_bind_text(s, 1, id_hex, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW)
		goto out;
	if (sqlite3_column_bytes(s, 0) != crypto_hash_sha256_BYTES ||
	    sodium_memcmp(sqlite3_column_blob(s, 0), want, sizeof(want)) != 0)
		goto out;
	memset(&pr, 0, sizeof(pr));
	snprintf(pr.key_id, sizeof(pr.key_id), "%s", id_hex);
	if (srv_role_from_name((const char *)sqlite3_column_text(s, 1), &pr.role) < 0)
		goto out;
	pr.datasets = json_loads((const char *)sqlite3_column_text(s, 2), 0, NULL);
	if (!json_is_array(pr.datasets)) {
		json_decref(pr.datasets);
		goto out;
	}
	if (srv__auth_between_read_and_cache)
		srv__auth_between_read_and_cache();
	if (cache)
		cache_insert(cache, &pr, want, gen);
	*ret = pr;
	rc = 0;
out:
	sqlite3_reset(s);
	return rc;
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
