/*
 * pgc: the throwaway cluster of pg_cluster.h from a shell, for the docs
 * and the benchmarks.
 *
 *   pgc start DIR   make DIR (it must not exist), initdb, start postgres
 *                   on a free loopback port; print the postgres database's
 *                   URL
 *   pgc url DIR     create a fresh database and print its URL
 *   pgc stop DIR    stop the server (fast) and remove DIR
 *
 * The cluster outlives `pgc start` (no reaper), so `pgc stop` is the
 * caller's to run.  Exit status 0 on success, 1 with the reason on stderr
 * on failure, 2 on a usage error.
 */
#include <stdio.h>
#include <string.h>

#include "pg_cluster.h"

static int usage(void)
{
	fputs("usage: pgc start DIR | pgc url DIR | pgc stop DIR\n", stderr);
	return 2;
}

static int report(const char *what, const struct pgc_error *err)
{
	fprintf(stderr, "pgc %s: %s\n", what, err->text);
	return 1;
}

int main(int argc, char **argv)
{
	struct pgc_error err = { 0 };
	struct pgc_cluster *c = NULL;
	char url[PGC_URL_MAX];
	int rc;

	if (argc != 3)
		return usage();
	if (strcmp(argv[1], "start") == 0)
		rc = pgc_cluster_new(argv[2], PGC_KEEP, &c, &err);
	else if (strcmp(argv[1], "url") == 0 || strcmp(argv[1], "stop") == 0)
		rc = pgc_cluster_attach(argv[2], &c, &err);
	else
		return usage();
	if (rc != PGC_OK)
		return report(argv[1], &err);
	if (strcmp(argv[1], "start") == 0)
		rc = pgc_url(c, "postgres", url, sizeof(url), &err);
	else if (strcmp(argv[1], "url") == 0)
		rc = pgc_new_database(c, url, sizeof(url), &err);
	else
		rc = pgc_cluster_remove(c, &err);
	pgc_cluster_free(c);
	if (rc != PGC_OK)
		return report(argv[1], &err);
	if (strcmp(argv[1], "stop") != 0)
		printf("%s\n", url);
	return 0;
}
