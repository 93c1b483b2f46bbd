/*
 * pg_rig.c: a throwaway PostgreSQL database for the tests that start
 * several servers on one (pg_rig.h).
 */
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#include "pg_rig.h"

bool dpg_pg_store_built(void)
{
	const char *argv[] = {dpg_bin(), "serve", "--help", NULL};
	char out[16384];

	dpg_run(out, sizeof(out), argv);
	return strstr(out, "postgresql://") != NULL;
}

void dpg_pg_database(struct pgc_cluster **ret_cluster, char *url, size_t cap)
{
	struct pgc_error err = {0};

	cr_assert_eq(pgc_cluster_new(NULL, 0, ret_cluster, &err), PGC_OK, "%s", err.text);
	cr_assert_eq(pgc_new_database(*ret_cluster, url, cap, &err), PGC_OK, "%s", err.text);
}

int dpg_pg_psql(const char *url, const char *sql, char *out, size_t size)
{
	const char *argv[] = {"/usr/bin/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
			      "-c", sql, url, NULL};
	int rc = dpg_run(out, size, argv);
	size_t len = strlen(out);

	while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r'))
		out[--len] = '\0';
	return rc;
}

FILE *dpg_pg_session_open(const char *url)
{
	char cmd[PGC_URL_MAX + 128];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "psql -X -q -At -v ON_ERROR_STOP=1 '%s' >/dev/null", url);
	/* Close-on-exec: a server started later must not hold the pipe open,
	 * or psql never sees its end. */
	f = popen(cmd, "we");
	cr_assert_not_null(f);
	return f;
}

void dpg_pg_session_send(FILE *f, const char *sql)
{
	fprintf(f, "%s\n", sql);
	fflush(f);
}

void dpg_pg_pair_start(struct dpg_pg_pair *p)
{
	memset(p, 0, sizeof(*p));
	dpg_pg_database(&p->cluster, p->url, sizeof(p->url));
	dpg_server_start_on(&p->a, p->url);
	dpg_server_start_on(&p->b, p->url);
}

void dpg_pg_pair_free(struct dpg_pg_pair *p)
{
	dpg_server_destroy(&p->a);
	dpg_server_destroy(&p->b);
	pgc_cluster_free(p->cluster);
}
