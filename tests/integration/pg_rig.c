/*
 * pg_rig.c: a throwaway PostgreSQL database for the tests that start
 * several servers on one (pg_rig.h).
 */
#include <criterion/criterion.h>

#include "pg_rig.h"

void dpg_pg_database(struct pgc_cluster **ret_cluster, char *url, size_t cap)
{
	struct pgc_error err = {0};

	cr_assert_eq(pgc_cluster_new(NULL, 0, ret_cluster, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_new_database(*ret_cluster, url, cap, &err), PGC_OK, "%s", err.text);
}
