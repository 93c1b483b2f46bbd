/*
 * bench_pate_http.c: PATE label queries per second through HTTP.
 *
 * Starts `dpgate serve` (the binary named by argv[1]) on a temporary
 * database, creates an rdp dataset with a budget no batch exhausts and a
 * Confident-GNMax session (250 teachers, 10 classes, sigma1 150, sigma2 40,
 * T 200), then posts batches of `per_batch` vote histograms over one
 * keep-alive connection for `seconds` and prints queries per second.  The
 * baseline, measured in the same run, is GET /healthz round trips.
 *
 * usage: bench_pate_http DPGATE [seconds = 3] [per_batch = 100]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_http.h"

/* A JSON request (body NUL-terminated, or NULL) on the kept connection. */
static long call(bench_dpgate *d, const char *method, const char *path, const char *body,
		 bench_answer *out)
{
	return bench_exchange(d, method, path, "application/json", body, body ? strlen(body) : 0,
			      out);
}

/*
 * Creates the dataset and the Confident-GNMax session, and writes the
 * session's queries path to ret_path.  *st is the last status.  Returns 0,
 * or -1 when a step failed.
 */
static int open_session(bench_dpgate *d, bench_answer *out, long *st, char *ret_path,
			size_t cap)
{
	char *id;

	*st = call(d, "POST", "/v1/datasets",
		   "{\"id\":\"b\",\"budget\":{\"epsilon\":1000000,\"delta\":1e-5}}", out);
	if (*st != 201)
		return -1;
	*st = call(d, "POST", "/v1/datasets/b/pate/sessions",
		   "{\"aggregator\":\"confident_gnmax\",\"num_teachers\":250,\"num_classes\":10,"
		   "\"sigma1\":150,\"sigma2\":40,\"threshold\":200}", out);
	if (*st != 201)
		return -1;
	id = strstr(out->text, "\"id\":\"");
	if (!id)
		return -1;
	id += 6;
	id[strcspn(id, "\"")] = '\0';
	snprintf(ret_path, cap, "/v1/datasets/b/pate/sessions/%s/queries", id);
	return 0;
}

/* A batch of per_batch vote histograms of 250 teachers over 10 classes,
 * the plurality holding 150 to 213 votes, as a JSON body; NULL when out of
 * memory. */
static char *batch_body(int per_batch)
{
	size_t n = 0, cap = 64 + (size_t)per_batch * 64;
	char *body = malloc(cap);
	uint64_t state = 1;

	if (!body)
		return NULL;
	n += (size_t)snprintf(body + n, cap - n, "{\"queries\":[");
	for (int i = 0; i < per_batch; i++) {
		int v[10] = {0}, top = 150 + (int)((state = state * 6364136223846793005ULL + 1) >> 58);

		v[i % 10] = top;
		for (int t2 = top; t2 < 250; t2++)
			v[(i + 1 + t2 % 9) % 10]++;
		n += (size_t)snprintf(body + n, cap - n, "%s{\"votes\":[%d,%d,%d,%d,%d,%d,%d,%d,%d,%d]}",
				      i ? "," : "", v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
	}
	snprintf(body + n, cap - n, "]}");
	return body;
}

/* Posts the batch to path for `seconds` and prints label queries per
 * second.  *st is the last status.  Returns 0, or -1 on an answer other
 * than 201. */
static int time_batches(bench_dpgate *d, bench_answer *out, const char *path, const char *body,
			int per_batch, double seconds, long *st)
{
	double t0 = bench_now_s(), t;
	long batches = 0;

	do {
		*st = call(d, "POST", path, body, out);
		if (*st != 201) {
			fprintf(stderr, "batch: %ld %.200s\n", *st, out->text);
			return -1;
		}
		batches++;
	} while ((t = bench_now_s()) - t0 < seconds);
	printf("PATE over HTTP: %d queries/batch, %ld batches in %.2f s: %.0f label queries/s (%.2f ms/batch)\n",
	       per_batch, batches, t - t0, (double)batches * per_batch / (t - t0), 1e3 * (t - t0) / (double)batches);
	return 0;
}

/* The baseline: GET /healthz round trips for a second. */
static void time_healthz(bench_dpgate *d, bench_answer *out)
{
	double t0 = bench_now_s(), t;
	long pings = 0;

	do {
		call(d, "GET", "/healthz", NULL, out);
		pings++;
	} while ((t = bench_now_s()) - t0 < 1.0);
	printf("baseline GET /healthz: %.0f requests/s\n", (double)pings / (t - t0));
}

int main(int argc, char **argv)
{
	const char *bin = argc > 1 ? argv[1] : NULL;
	double seconds = argc > 2 ? atof(argv[2]) : 3;
	int per_batch = argc > 3 ? atoi(argv[3]) : 100, port = 18000 + (int)(getpid() % 20000);
	char dir[] = "/tmp/bench-pate-XXXXXX", db[128], cmd[512];
	char path[256], *body = NULL;
	static bench_answer out;
	bench_dpgate d;
	long st = 0;
	int rc = 1;

	if (!bin || !(seconds > 0) || per_batch < 1 || per_batch > 10000 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: bench_pate_http DPGATE [seconds] [per_batch <= 10000]\n");
		return 2;
	}
	snprintf(db, sizeof(db), "%s/b.db", dir);
	if (bench_dpgate_start(&d, bin, db, port, NULL) < 0)
		return 1;
	if (open_session(&d, &out, &st, path, sizeof(path)) < 0 ||
	    !(body = batch_body(per_batch)) ||
	    time_batches(&d, &out, path, body, per_batch, seconds, &st) < 0)
		goto out;
	time_healthz(&d, &out);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "setup failed: %ld %.300s\n", st, out.text);
	free(body);
	bench_dpgate_stop(&d);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
