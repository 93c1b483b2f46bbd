/*
 * bench_tables.c: hosted-table queries through HTTP, a kept parse against
 * a fresh one.
 *
 * Starts `dpgate serve` (the binary named by argv[1]) on a temporary
 * database and data directory, creates a dataset, and in each round
 * uploads a table of `rows` rows (age numeric, income numeric, city
 * categorical; the same bytes every round, but every upload is a new
 * file) and times:
 *   - the first count query after the upload: served from the parse the
 *     upload kept;
 *   - a count after the table file's modification time was moved back an
 *     hour (the kept parse no longer matches the file): the server reads
 *     and parses the file (the baseline, measured in the same run);
 *   - `repeats` count queries and `repeats` sum queries after it: served
 *     from the parse the server keeps (srv_table_cache).
 * Prints the median of each over the rounds, their ratios to the baseline,
 * and the server's resident memory before the first upload and at the
 * end; checks the cache's counters in /metrics (one read of the file per
 * round, every other query a hit) and that every query was answered 201.
 *
 * usage: bench_tables DPGATE [rows = 1000000] [repeats = 5] [rounds = 3]
 * Exit status 0 when every check passed, 1 otherwise, 2 on bad usage.
 */
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_http.h"

#define MAX_ROUNDS 20
#define MAX_REPEATS 100

/* One JSON request (body NUL-terminated) on the kept connection. */
static long post_json(bench_dpgate *d, const char *path, const char *body, bench_answer *out)
{
	return bench_exchange(d, "POST", path, "application/json", body, strlen(body), out);
}

/* The table: `rows` rows from a fixed linear congruential sequence. */
static char *make_csv(long rows, size_t *ret_len)
{
	static const char *const cities[] = {"amsterdam", "berlin", "cork", "dublin", "essen"};
	size_t cap = 32 + (size_t)rows * 40, n = 0;
	char *s = malloc(cap);
	uint64_t x = 88172645463325252ULL;

	if (!s)
		return NULL;
	n += (size_t)snprintf(s, cap, "age,income,city\n");
	for (long i = 0; i < rows; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		n += (size_t)snprintf(s + n, cap - n, "%u,%u.%02u,%s\n", 18 + (unsigned)(x >> 58) % 73,
				      (unsigned)(x >> 20) % 200000, (unsigned)(x >> 8) % 100,
				      cities[(x >> 40) % 5]);
	}
	*ret_len = n;
	return s;
}

/* VmRSS of process pid in MiB, or -1. */
static double rss_mib(pid_t pid)
{
	char path[64], line[256];
	double kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lf", &kib) == 1)
			break;
	fclose(f);
	return kib < 0 ? -1 : kib / 1024;
}

/* The value of an unlabelled counter in a /metrics answer, or -1. */
static double metric(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *line = text; line && *line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, name, n) && line[n] == ' ')
			return strtod(line + n + 1, NULL);
	}
	return -1;
}

/* Moves the modification time of the one table file under data/tables
 * an hour back, so that the server's kept parse no longer matches it. */
static int age_table_file(const char *data)
{
	char pattern[256];
	struct timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
	glob_t g;
	int rc = -1;

	snprintf(pattern, sizeof(pattern), "%s/tables/*.csv", data);
	if (glob(pattern, 0, NULL, &g) != 0)
		return -1;
	times[1].tv_sec = time(NULL) - 3600;
	if (g.gl_pathc == 1 && utimensat(AT_FDCWD, g.gl_pathv[0], times, 0) == 0)
		rc = 0;
	globfree(&g);
	return rc;
}

static const char count_q[] = "{\"query\":\"count\",\"epsilon\":0.01}";
static const char sum_q[] =
	"{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":0.01}";

/* One run: the server, the table, and every time taken. */
typedef struct tables_run {
	bench_dpgate d;
	bench_answer *out;
	char data[128];      /* the server's data directory */
	long rows;
	int repeats, rounds;
	char *csv;
	size_t csv_len;
	long st;             /* the last setup status: the upload's, then /metrics' */
	int bad;             /* queries not answered 201 */
	double upload[MAX_ROUNDS], first[MAX_ROUNDS], miss[MAX_ROUNDS];
	double hit_count[MAX_ROUNDS * MAX_REPEATS], hit_sum[MAX_ROUNDS * MAX_REPEATS];
	double rss0, rss1, hits, misses;
} tables_run;

/* One query on dataset t, timed into *ret_s; an answer other than 201
 * counts in t->bad. */
static void timed_query(tables_run *t, const char *query, double *ret_s)
{
	double t0 = bench_now_s();

	t->bad += post_json(&t->d, "/v1/datasets/t/queries", query, t->out) != 201;
	*ret_s = bench_now_s() - t0;
}

/* Round r: the upload, the first count, the count after the file was
 * aged, then the repeated count and sum queries.  Returns 0, or -1 when
 * the upload failed or the file could not be aged. */
static int tables_round(tables_run *t, int r)
{
	double t0 = bench_now_s();

	t->st = bench_exchange(&t->d, "PUT",
			       "/v1/datasets/t/data?columns=age:numeric,income:numeric,city:categorical",
			       "text/csv", t->csv, t->csv_len, t->out);
	t->upload[r] = bench_now_s() - t0;
	if (t->st != 200)
		return -1;
	timed_query(t, count_q, &t->first[r]);
	if (age_table_file(t->data) < 0) {
		fprintf(stderr, "bench_tables: cannot find or age the table file\n");
		return -1;
	}
	timed_query(t, count_q, &t->miss[r]);
	for (int k = 0; k < t->repeats; k++) {
		timed_query(t, count_q, &t->hit_count[r * t->repeats + k]);
		timed_query(t, sum_q, &t->hit_sum[r * t->repeats + k]);
	}
	return 0;
}

/* Prints the medians, their ratios to the baseline and the checks, then
 * the JSON line; returns the exit status (0 when every check passed). */
static int tables_report(tables_run *t)
{
	int rounds = t->rounds, repeats = t->repeats;
	double up = bench_median(t->upload, (size_t)rounds);
	double m = bench_median(t->miss, (size_t)rounds);
	double f = bench_median(t->first, (size_t)rounds);
	double hc = bench_median(t->hit_count, (size_t)(rounds * repeats));
	double hs = bench_median(t->hit_sum, (size_t)(rounds * repeats));
	int want_hits = rounds * (1 + 2 * repeats);
	bool counters = t->hits == (double)want_hits && t->misses == (double)rounds;

	printf("hosted table: %ld rows, %.1f MB of CSV; %d rounds (upload, count, age the file,"
	       " count, then %d count and %d sum queries)\n", t->rows, (double)t->csv_len / 1e6,
	       rounds, repeats, repeats);
	printf("  upload (PUT, parse + fsync)          median %8.1f ms\n", 1e3 * up);
	printf("  baseline: count after a file change  median %8.1f ms (reads and parses the file)\n",
	       1e3 * m);
	printf("  first count after upload             median %8.2f ms  = %.4f x baseline"
	       " (the upload's parse)\n", 1e3 * f, f / m);
	printf("  count, parse kept                    median %8.2f ms  = %.4f x baseline\n",
	       1e3 * hc, hc / m);
	printf("  sum, parse kept                      median %8.2f ms  = %.4f x baseline\n",
	       1e3 * hs, hs / m);
	printf("  server RSS: %.1f MiB before the first upload, %.1f MiB at the end\n", t->rss0,
	       t->rss1);
	printf("  /metrics: %.0f hits, %.0f misses (expected %d and %d): %s; non-201 answers: %d\n",
	       t->hits, t->misses, want_hits, rounds, counters ? "match" : "MISMATCH", t->bad);
	printf("{\"bench\":\"tables\",\"rows\":%ld,\"csv_bytes\":%zu,\"rounds\":%d,\"repeats\":%d,"
	       "\"upload_s\":%.6f,\"miss_s\":%.6f,\"first_after_upload_s\":%.6f,"
	       "\"hit_count_s\":%.6f,\"hit_sum_s\":%.6f,\"ratio_first\":%.6f,"
	       "\"ratio_count\":%.6f,\"ratio_sum\":%.6f,\"rss_mib_before\":%.1f,"
	       "\"rss_mib_after\":%.1f,\"hits\":%.0f,\"misses\":%.0f,\"ok\":%s}\n",
	       t->rows, t->csv_len, rounds, repeats, up, m, f, hc, hs, f / m, hc / m, hs / m,
	       t->rss0, t->rss1, t->hits, t->misses, counters && !t->bad ? "true" : "false");
	return counters && !t->bad ? 0 : 1;
}

int main(int argc, char **argv)
{
	static bench_answer out;
	tables_run t = {.out = &out, .rss0 = -1, .rss1 = -1};
	const char *bin = argc > 1 ? argv[1] : NULL;
	int port = 20000 + (int)(getpid() % 20000), rc = 1;
	char dir[] = "/tmp/bench-tables-XXXXXX", db[128], cmd[512];
	const char *serve_args[] = {"--data-dir", t.data, "--quiet", NULL};

	t.rows = argc > 2 ? atol(argv[2]) : 1000000;
	t.repeats = argc > 3 ? atoi(argv[3]) : 5;
	t.rounds = argc > 4 ? atoi(argv[4]) : 3;
	if (!bin || t.rows < 1 || t.rows > 1000000 || t.repeats < 1 || t.repeats > MAX_REPEATS ||
	    t.rounds < 1 || t.rounds > MAX_ROUNDS || !mkdtemp(dir)) {
		fprintf(stderr, "usage: bench_tables DPGATE [rows <= 10^6] [repeats <= %d]"
				" [rounds <= %d]\n", MAX_REPEATS, MAX_ROUNDS);
		return 2;
	}
	t.csv = make_csv(t.rows, &t.csv_len);
	snprintf(db, sizeof(db), "%s/b.db", dir);
	snprintf(t.data, sizeof(t.data), "%s/data", dir);
	if (!t.csv || bench_dpgate_start(&t.d, bin, db, port, serve_args) < 0) {
		fprintf(stderr, "bench_tables: %s\n", t.csv ? "dpgate did not start" : "out of memory");
		goto out;
	}
	t.st = post_json(&t.d, "/v1/datasets",
			 "{\"id\":\"t\",\"budget\":{\"epsilon\":1000000,\"delta\":1e-5}}", &out);
	if (t.st != 201)
		goto out;
	t.rss0 = rss_mib(t.d.pid);
	for (int r = 0; r < t.rounds; r++)
		if (tables_round(&t, r) < 0)
			goto out;
	t.rss1 = rss_mib(t.d.pid);
	t.st = bench_exchange(&t.d, "GET", "/metrics", "text/plain", NULL, 0, &out);
	t.hits = metric(out.text, "dpgate_table_cache_hits_total");
	t.misses = metric(out.text, "dpgate_table_cache_misses_total");
	rc = tables_report(&t);
out:
	if (t.st != 0 && t.st != 200 && t.st != 201)
		fprintf(stderr, "bench_tables: setup failed: %ld %.300s\n", t.st, out.text);
	bench_dpgate_stop(&t.d);
	curl_global_cleanup();
	free(t.csv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
