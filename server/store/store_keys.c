/*
 * store_keys.c: the API keys' rows (api_keys) and their audit trail
 * (key_events).
 *
 * A key reads "dpg_<id>_<secret>": <id> is 8 random bytes in hex (public,
 * the row's primary key, shown in logs and the ledger as the actor) and
 * <secret> is 32 random bytes (256 bits) from getrandom, in hex.  Only
 * SHA-256("dpgate-key-v1" || id || secret) is stored; a presented key is
 * hashed the same way and compared with sodium_memcmp (constant time).
 *
 * Every creation and revocation is also a row of key_events (schema/008),
 * written in the same transaction: which key, what it could do, who did it
 * (an admin key's id, or "cli:<user>" for `dpgate keys`) and when.
 *
 * `dpgate keys revoke` (another process than the server) rewrites the stamp
 * file "<database>-keys" after its commit; the server's key cache
 * (http_auth.c) stats it and flushes itself when it changed.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "store.h"
#include "store_internal.h"

#define KEY_PREFIX "dpg_"
#define KEY_HASH_CONTEXT "dpgate-key-v1"

static const char sql_key_lookup[] =
	"SELECT hash, role, datasets FROM api_keys WHERE id = ?1 AND revoked_at IS NULL";

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

void srv_keys_hash(const char *id_hex, const char *secret_hex, uint8_t out[32])
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)KEY_HASH_CONTEXT, strlen(KEY_HASH_CONTEXT));
	crypto_hash_sha256_update(&st, (const uint8_t *)id_hex, strlen(id_hex));
	crypto_hash_sha256_update(&st, (const uint8_t *)secret_hex, strlen(secret_hex));
	crypto_hash_sha256_final(&st, out);
}

/* Appends the key_events row of `action` on key_id (its role and scope as
 * the key row holds them), inside the caller's transaction. */
static int key_event(srv_db *db, const char *key_id, const char *action, const char *actor,
		     const char *now)
{
	srv__stmt *s = srv__prepare(db,
				       "INSERT INTO key_events (key_id, action, role, datasets, actor,"
				       " created_at) SELECT id, CAST(?2 AS TEXT), role, datasets,"
				       " CAST(?3 AS TEXT), CAST(?4 AS TEXT) FROM api_keys WHERE id = ?1",
				       key_id);

	if (s) {
		srv__sql_bind_text(s, 2, action);
		srv__sql_bind_text(s, 3, actor);
		srv__sql_bind_text(s, 4, now);
	}
	if (srv__run(s) != SRV_OK)
		return SRV_DB_ERROR;
	return srv__sql_changes(srv__db_conn(db)) == 1 ? SRV_OK : SRV_DB_ERROR;
}

int srv_keys_create(srv_db *db, srv_role role, const char *scope_text, const char *note,
		    const char *actor, char key_text[SRV_KEY_TEXT_BYTES],
		    char key_id[2 * SRV_KEY_ID_BYTES + 1])
{
	uint8_t id[SRV_KEY_ID_BYTES], secret[SRV_KEY_SECRET_BYTES], hash[crypto_hash_sha256_BYTES];
	char id_hex[2 * SRV_KEY_ID_BYTES + 1], secret_hex[2 * SRV_KEY_SECRET_BYTES + 1];
	char now[32];
	srv__stmt *s = NULL;
	int rc = SRV_DB_ERROR;

	if (srv_random_bytes(id, sizeof(id)) != SRV_OK ||
	    srv_random_bytes(secret, sizeof(secret)) != SRV_OK)
		return SRV_NO_RANDOM;
	sodium_bin2hex(id_hex, sizeof(id_hex), id, sizeof(id));
	sodium_bin2hex(secret_hex, sizeof(secret_hex), secret, sizeof(secret));
	srv_keys_hash(id_hex, secret_hex, hash);
	srv_now_text(now);
	if (srv__begin_write(db) < 0)
		goto out;
	s = srv__prepare(db,
			 "INSERT INTO api_keys (id, hash, role, datasets, note, created_at)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			 id_hex);
	if (!s)
		goto out;
	srv__sql_bind_blob(s, 2, hash, sizeof(hash));
	srv__sql_bind_text(s, 3, srv_role_name(role));
	srv__sql_bind_text(s, 4, scope_text ? scope_text : "[]");
	if (note)
		srv__sql_bind_text(s, 5, note);
	srv__sql_bind_text(s, 6, now);
	if (srv__sql_step(s) != SRV__SQL_DONE)
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
	srv__sql_finalize(s);
	return rc;
}

static int key_row(srv__stmt *s, void *arg)
{
	struct srv__lister *w = arg;
	srv_key_row r = {
		.id = srv__sql_text(s, 0),
		.role = srv__sql_text(s, 1),
		.datasets = srv__sql_text(s, 2),
		.note = srv__sql_text(s, 3),
		.created_at = srv__sql_text(s, 4),
		.revoked_at = srv__sql_text(s, 5),
	};

	return w->each.key(w->arg, &r) < 0 ? SRV_DB_ERROR : 0;
}

int srv_keys_list(srv_db *db, srv_key_row_fn each, void *arg)
{
	struct srv__lister w = {.each.key = each, .arg = arg};

	return srv__each_row(srv__prepare(db,
					  "SELECT id, role, datasets, note, created_at, revoked_at"
					  " FROM api_keys ORDER BY created_at, id",
					  NULL),
			     key_row, &w);
}

/* Revokes a key inside the caller's transaction; a key revoked already
 * stays as it was (SRV_OK, no second audit row). */
static int revoke_locked(srv_db *db, const char *key_id, const char *actor)
{
	srv__stmt *s;
	char now[32];
	int rc;

	srv_now_text(now);
	s = srv__prepare_text2(
		db, "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", key_id,
		now);
	if (srv__run(s) != SRV_OK)
		return SRV_DB_ERROR;
	if (srv__sql_changes(srv__db_conn(db)) == 1)
		return key_event(db, key_id, "revoke", actor, now);
	s = srv__prepare(db, "SELECT 1 FROM api_keys WHERE id = ?1", key_id);
	rc = srv__first_row(s);
	srv__sql_finalize(s);
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
	srv__stmt *s = NULL;
	int64_t admins = 0;
	bool live_admin = false;
	int rc;

	/* One write transaction: two admins revoking their own keys at once
	 * each counted two admins outside it, and both went. */
	if (srv__begin_write(db) < 0 || srv__lock_named(db, "admin keys") != SRV_OK)
		return SRV_DB_ERROR;
	s = srv__prepare(db,
			 "SELECT role = 'admin' AND revoked_at IS NULL FROM api_keys WHERE id = ?1",
			 key_id);
	rc = srv__first_row(s);
	if (rc == SRV_OK)
		live_admin = srv__sql_int64(s, 0) != 0;
	srv__sql_finalize(s);
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
	srv__stmt *s = srv__prepare(
		db, "SELECT count(*) FROM api_keys WHERE role = ?1 AND revoked_at IS NULL",
		srv_role_name(role));
	int rc = srv__first_row(s) == SRV_OK ? SRV_OK : SRV_DB_ERROR;

	if (rc == SRV_OK)
		*ret = srv__sql_int64(s, 0);
	srv__sql_finalize(s);
	return rc;
}

static int key_event_page_row(srv__stmt *s, void *arg)
{
	struct srv__lister *kp = arg;
	srv_key_event_row r = {
		.seq = srv__sql_int64(s, 0),
		.key_id = srv__sql_text(s, 1),
		.action = srv__sql_text(s, 2),
		.role = srv__sql_text(s, 3),
		.datasets = srv__sql_text(s, 4),
		.actor = srv__sql_text(s, 5),
		.synthesized = srv__sql_int64(s, 6) != 0,
		.created_at = srv__sql_text(s, 7),
	};

	return kp->each.key_event(kp->arg, &r);
}

int srv_keys_audit(srv_db *db, int64_t after, int64_t limit, srv_key_event_fn each, void *arg,
		   int64_t *ret_next)
{
	struct srv__lister kp = {.each.key_event = each, .arg = arg};

	return srv__db_page(db,
			    "SELECT seq, key_id, action, role, datasets, actor, synthesized,"
			    " created_at FROM key_events WHERE seq > ?2 ORDER BY seq LIMIT ?3",
			    NULL, after, limit, key_event_page_row, &kp, ret_next);
}

int srv_keys_lookup(srv_db *db, const char *id_hex, const uint8_t hash[32], srv_role *ret_role,
		    char **ret_scope)
{
	srv__stmt *s = srv__cached_stmt(db, sql_key_lookup);
	int rc = SRV_DB_ERROR;
	int step;

	if (!s)
		return SRV_DB_ERROR;
	srv__sql_bind_text(s, 1, id_hex);
	step = srv__sql_step(s);
	if (step != SRV__SQL_ROW) {
		rc = step == SRV__SQL_DONE ? SRV_NOT_FOUND : SRV_DB_ERROR;
		goto out;
	}
	rc = SRV_NOT_FOUND;
	if (srv__sql_bytes(s, 0) != crypto_hash_sha256_BYTES ||
	    sodium_memcmp(srv__sql_blob(s, 0), hash, crypto_hash_sha256_BYTES) != 0)
		goto out;
	if (srv_role_from_name(srv__sql_text(s, 1), ret_role) < 0)
		goto out;
	rc = SRV_DB_ERROR;
	*ret_scope = strdup(srv__sql_text(s, 2));
	if (*ret_scope)
		rc = SRV_OK;
out:
	srv__sql_reset(s);
	return rc;
}

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

