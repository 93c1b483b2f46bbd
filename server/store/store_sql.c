/*
 * store_sql.c: what the statement interface does the same on every driver:
 * the per-connection statement cache.
 */
#include "store_sql.h"

srv__stmt *srv__sql_cached(srv__conn *c, const char *sql)
{
	int i;

	for (i = 0; i < SRV__SQL_CACHED_STMTS && c->cached_sql[i]; i++) {
		if (c->cached_sql[i] == sql) {
			c->drv->reset(c->cached[i]);
			return c->cached[i];
		}
	}
	if (i == SRV__SQL_CACHED_STMTS)
		return NULL;
	c->cached[i] = c->drv->prepare(c, sql, true);
	if (!c->cached[i])
		return NULL;
	c->cached_sql[i] = sql;
	return c->cached[i];
}

int srv__sql_step_once(srv__conn *c, const char *sql)
{
	srv__stmt *s = srv__sql_cached(c, sql);
	int rc;

	if (!s)
		return c->drv->exec(c, sql);
	rc = c->drv->step(s);
	c->drv->reset(s);
	return rc;
}

void srv__sql_close(srv__conn *c)
{
	if (!c)
		return;
	for (int i = 0; i < SRV__SQL_CACHED_STMTS && c->cached_sql[i]; i++)
		c->drv->finalize(c->cached[i]);
	c->drv->close(c);
}
