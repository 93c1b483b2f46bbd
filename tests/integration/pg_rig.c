/*
 * pg_rig.c: a throwaway PostgreSQL cluster and database for the tests of
 * several servers on one database (pg_rig.h).
 */
#include <criterion/criterion.h>

#include "pg_rig.h"

void dpg_pg_cluster_database(struct pgc_cluster **ret, char *url, size_t size)
{
	struct pgc_error err = {0};

	cr_assert_eq(pgc_cluster_new(NULL, 0, ret, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_new_database(*ret, url, size, &err), PGC_OK, "%s", err.text);
}
