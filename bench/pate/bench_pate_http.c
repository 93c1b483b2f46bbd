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
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct sink {
	char buf[1 << 16];
	size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t k = size * n, room = sizeof(s->buf) - 1 - s->len;

	memcpy(s->buf + s->len, p, k < room ? k : room);
	s->len += k < room ? k : room;
	s->buf[s->len] = '\0';
	return k;
}

static long call(CURL *c, int port, const char *key, const char *method, const char *path,
		 const char *body, struct sink *out)
{
	char url[512], auth[256];
	struct curl_slist *h = NULL;
	long status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	h = curl_slist_append(h, auth);
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:");
	out->len = 0;
	out->buf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPGET, body ? 0L : 1L);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	else
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	return status;
}

int main(int argc, char **argv)
{
	const char *bin = argc > 1 ? argv[1] : NULL;
	double seconds = argc > 2 ? atof(argv[2]) : 3;
	int per_batch = argc > 3 ? atoi(argv[3]) : 100, port = 18000 + (int)(getpid() % 20000);
	char dir[] = "/tmp/bench-pate-XXXXXX", db[128], cmd[512], key[160] = "", listen[64];
	char path[256], *body;
	struct sink out;
	uint64_t state = 1;
	size_t n = 0, cap;
	long st;
	pid_t pid;
	FILE *p;
	CURL *c;
	double t0, t;
	long batches = 0, pings = 0;
	int rc = 1;

	if (!bin || !(seconds > 0) || per_batch < 1 || per_batch > 10000 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: bench_pate_http DPGATE [seconds] [per_batch <= 10000]\n");
		return 2;
	}
	snprintf(db, sizeof(db), "%s/b.db", dir);
	snprintf(cmd, sizeof(cmd), "%s keys create --db %s --role admin 2>/dev/null | tail -1", bin, db);
	p = popen(cmd, "r");
	if (!p || !fgets(key, sizeof(key), p))
		return 1;
	pclose(p);
	key[strcspn(key, "\n")] = '\0';
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	pid = fork();
	if (pid == 0) {
		freopen("/dev/null", "w", stderr);
		execl(bin, bin, "serve", "--db", db, "--listen", listen, (char *)NULL);
		_exit(127);
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	c = curl_easy_init();
	for (int i = 0; i < 300 && call(c, port, key, "GET", "/healthz", NULL, &out) != 200; i++)
		usleep(10000);
	st = call(c, port, key, "POST", "/v1/datasets",
		  "{\"id\":\"b\",\"budget\":{\"epsilon\":1000000,\"delta\":1e-5}}", &out);
	if (st != 201)
		goto out;
	st = call(c, port, key, "POST", "/v1/datasets/b/pate/sessions",
		  "{\"aggregator\":\"confident_gnmax\",\"num_teachers\":250,\"num_classes\":10,"
		  "\"sigma1\":150,\"sigma2\":40,\"threshold\":200}", &out);
	if (st != 201)
		goto out;
	{
		char *id = strstr(out.buf, "\"id\":\"");

		if (!id)
			goto out;
		id += 6;
		id[strcspn(id, "\"")] = '\0';
		snprintf(path, sizeof(path), "/v1/datasets/b/pate/sessions/%s/queries", id);
	}
	cap = 64 + (size_t)per_batch * 64;
	body = malloc(cap);
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
	t0 = now();
	do {
		st = call(c, port, key, "POST", path, body, &out);
		if (st != 201) {
			fprintf(stderr, "batch: %ld %.200s\n", st, out.buf);
			goto out;
		}
		batches++;
	} while ((t = now()) - t0 < seconds);
	printf("PATE over HTTP: %d queries/batch, %ld batches in %.2f s: %.0f label queries/s (%.2f ms/batch)\n",
	       per_batch, batches, t - t0, (double)batches * per_batch / (t - t0), 1e3 * (t - t0) / (double)batches);
	t0 = now();
	do {
		call(c, port, key, "GET", "/healthz", NULL, &out);
		pings++;
	} while ((t = now()) - t0 < 1.0);
	printf("baseline GET /healthz: %.0f requests/s\n", (double)pings / (t - t0));
	free(body);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "setup failed: %ld %.300s\n", st, out.buf);
	curl_easy_cleanup(c);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
