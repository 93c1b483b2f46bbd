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

#include <curl/curl.h>

#define MAX_ROUNDS 20
#define MAX_REPEATS 100

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The start of an answer's body (enough for a status check and /metrics). */
struct answer {
	char text[1 << 16];
	size_t len;
};

static size_t keep_answer(char *p, size_t size, size_t n, void *ud)
{
	struct answer *a = ud;
	size_t k = size * n, room = sizeof(a->text) - 1 - a->len, take = k < room ? k : room;

	memcpy(a->text + a->len, p, take);
	a->len += take;
	a->text[a->len] = '\0';
	return k;
}

/* One exchange on the shared handle (keep-alive); returns the status, 0 on
 * a transport failure. */
static long exchange(CURL *c, int port, const char *key, const char *method, const char *path,
		     const char *type, const char *body, size_t body_len, struct answer *out)
{
	char url[512], auth[256], ctype[96];
	struct curl_slist *h = NULL;
	long status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	snprintf(ctype, sizeof(ctype), "Content-Type: %s", type);
	h = curl_slist_append(h, auth);
	h = curl_slist_append(h, ctype);
	h = curl_slist_append(h, "Expect:");
	out->len = 0;
	out->text[0] = '\0';
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	}
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	return status;
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
	static const char count_q[] = "{\"query\":\"count\",\"epsilon\":0.01}";
	static const char sum_q[] =
		"{\"query\":\"sum\",\"column\":\"age\",\"lo\":0,\"hi\":100,\"epsilon\":0.01}";
	const char *bin = argc > 1 ? argv[1] : NULL;
	long rows = argc > 2 ? atol(argv[2]) : 1000000;
	int repeats = argc > 3 ? atoi(argv[3]) : 5, rounds = argc > 4 ? atoi(argv[4]) : 3;
	int port = 20000 + (int)(getpid() % 20000), rc = 1, bad = 0;
	char dir[] = "/tmp/bench-tables-XXXXXX", db[128], data[128], cmd[512], key[160] = "";
	char listen[64];
	double upload[MAX_ROUNDS], first[MAX_ROUNDS], miss[MAX_ROUNDS];
	double hit_count[MAX_ROUNDS * MAX_REPEATS];
	double hit_sum[MAX_ROUNDS * MAX_REPEATS], rss0 = -1, rss1 = -1, hits, misses;
	static struct answer out;
	size_t csv_len = 0;
	char *csv = NULL;
	long st = 0;
	pid_t pid;
	FILE *p;
	CURL *c;

	if (!bin || rows < 1 || rows > 1000000 || repeats < 1 || repeats > MAX_REPEATS ||
	    rounds < 1 || rounds > MAX_ROUNDS || !mkdtemp(dir)) {
		fprintf(stderr, "usage: bench_tables DPGATE [rows <= 10^6] [repeats <= %d]"
				" [rounds <= %d]\n", MAX_REPEATS, MAX_ROUNDS);
		return 2;
	}
	csv = make_csv(rows, &csv_len);
	snprintf(db, sizeof(db), "%s/b.db", dir);
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(cmd, sizeof(cmd), "%s keys create --db %s --role admin 2>/dev/null | tail -1", bin, db);
	p = popen(cmd, "r");
	if (!csv || !p || !fgets(key, sizeof(key), p))
		return 1;
	pclose(p);
	key[strcspn(key, "\n")] = '\0';
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		execl(bin, bin, "serve", "--db", db, "--data-dir", data, "--listen", listen, "--quiet",
		      (char *)NULL);
		_exit(127);
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	c = curl_easy_init();
	for (int i = 0; i < 300 && exchange(c, port, key, "GET", "/healthz", "text/plain", NULL, 0,
					    &out) != 200; i++)
		usleep(10000);
	{
		static const char dataset[] = "{\"id\":\"t\",\"budget\":{\"epsilon\":1000000,\"delta\":1e-5}}";

		st = exchange(c, port, key, "POST", "/v1/datasets", "application/json", dataset,
			      strlen(dataset), &out);
	}
	if (st != 201)
		goto out;
	rss0 = rss_mib(pid);
	for (int r = 0; r < rounds; r++) {
		double t = now_s();

		st = exchange(c, port, key, "PUT", "/v1/datasets/t/data", "text/csv", csv, csv_len,
			      &out);
		upload[r] = now_s() - t;
		if (st != 200)
			goto out;
		t = now_s();
		bad += exchange(c, port, key, "POST", "/v1/datasets/t/queries", "application/json",
				count_q, strlen(count_q), &out) != 201;
		first[r] = now_s() - t;
		if (age_table_file(data) < 0) {
			fprintf(stderr, "bench_tables: cannot find or age the table file\n");
			goto out;
		}
		t = now_s();
		bad += exchange(c, port, key, "POST", "/v1/datasets/t/queries", "application/json",
				count_q, strlen(count_q), &out) != 201;
		miss[r] = now_s() - t;
		for (int k = 0; k < repeats; k++) {
			t = now_s();
			bad += exchange(c, port, key, "POST", "/v1/datasets/t/queries",
					"application/json", count_q, strlen(count_q), &out) != 201;
			hit_count[r * repeats + k] = now_s() - t;
			t = now_s();
			bad += exchange(c, port, key, "POST", "/v1/datasets/t/queries",
					"application/json", sum_q, strlen(sum_q), &out) != 201;
			hit_sum[r * repeats + k] = now_s() - t;
		}
	}
	rss1 = rss_mib(pid);
	st = exchange(c, port, key, "GET", "/metrics", "text/plain", NULL, 0, &out);
	hits = metric(out.text, "dpgate_table_cache_hits_total");
	misses = metric(out.text, "dpgate_table_cache_misses_total");
	{
		double up = median(upload, rounds), m = median(miss, rounds), f = median(first, rounds);
		double hc = median(hit_count, rounds * repeats), hs = median(hit_sum, rounds * repeats);
		int want_hits = rounds * (1 + 2 * repeats);
		bool counters = hits == (double)want_hits && misses == (double)rounds;

		printf("hosted table: %ld rows, %.1f MB of CSV; %d rounds (upload, count, age the file,"
		       " count, then %d count and %d sum queries)\n", rows, (double)csv_len / 1e6, rounds,
		       repeats, repeats);
		printf("  upload (PUT, parse + fsync)          median %8.1f ms\n", 1e3 * up);
		printf("  baseline: count after a file change  median %8.1f ms (reads and parses the file)\n",
		       1e3 * m);
		printf("  first count after upload             median %8.2f ms  = %.4f x baseline"
		       " (the upload's parse)\n", 1e3 * f, f / m);
		printf("  count, parse kept                    median %8.2f ms  = %.4f x baseline\n",
		       1e3 * hc, hc / m);
		printf("  sum, parse kept                      median %8.2f ms  = %.4f x baseline\n",
		       1e3 * hs, hs / m);
		printf("  server RSS: %.1f MiB before the first upload, %.1f MiB at the end\n", rss0, rss1);
		printf("  /metrics: %.0f hits, %.0f misses (expected %d and %d): %s; non-201 answers: %d\n",
		       hits, misses, want_hits, rounds, counters ? "match" : "MISMATCH", bad);
		printf("{\"bench\":\"tables\",\"rows\":%ld,\"csv_bytes\":%zu,\"rounds\":%d,\"repeats\":%d,"
		       "\"upload_s\":%.6f,\"miss_s\":%.6f,\"first_after_upload_s\":%.6f,"
		       "\"hit_count_s\":%.6f,\"hit_sum_s\":%.6f,\"ratio_first\":%.6f,"
		       "\"ratio_count\":%.6f,\"ratio_sum\":%.6f,\"rss_mib_before\":%.1f,"
		       "\"rss_mib_after\":%.1f,\"hits\":%.0f,\"misses\":%.0f,\"ok\":%s}\n",
		       rows, csv_len, rounds, repeats, up, m, f, hc, hs, f / m, hc / m, hs / m, rss0,
		       rss1, hits, misses, counters && !bad ? "true" : "false");
		rc = counters && !bad ? 0 : 1;
	}
out:
	if (st != 200 && st != 201)
		fprintf(stderr, "bench_tables: setup failed: %ld %.300s\n", st, out.text);
	curl_easy_cleanup(c);
	curl_global_cleanup();
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	free(csv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
