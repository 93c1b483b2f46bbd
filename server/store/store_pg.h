/*
 * store_pg.h: the PostgreSQL driver of store_sql.h (store_pg.c), for the
 * store files.
 */
#ifndef DPGATE_SRV_STORE_PG_H
#define DPGATE_SRV_STORE_PG_H

#include <stdbool.h>

#include "store.h"
#include "store_sql.h"

/* Whether a --db target names a PostgreSQL database (postgresql:// or
 * postgres://, libpq's URL forms). */
bool srv__pg_is_url(const char *target);

/* Connects to the PostgreSQL database at url (read_only: every transaction
 * of the session read-only); NULL with a message in err (libpq's, which
 * never shows the password). */
srv__conn *srv__pg_open(const char *url, bool read_only, srv_error *err);

#endif
