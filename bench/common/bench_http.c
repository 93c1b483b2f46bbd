/*
 * bench_http.c: the server a benchmark drives, and its requests
 * (bench_http.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_http.h"

#define BENCH_MAX_EXTRA_ARGS 8
#define BENCH_START_TRIES 300 /* of 10 ms each */

static int make_admin_key(const char *bin, const char *db, char *key, size_t size)
{
	char cmd[512];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd), "%s keys create --db %s --role admin 2>/dev/null | tail -1", bin,
		 db);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	ok = fgets(key, (int)size, p) != NULL;
	pclose(p);
	if (!ok)
		return -1;
	key[strcspn(key, "\n")] = '\0';
	return 0;
}

int bench_dpgate_start(bench_dpgate *d, const char *bin, const char *db, int port,
		       const char *const *extra)
{
	const char *argv[7 + BENCH_MAX_EXTRA_ARGS];
	char listen[64];
	bench_answer *out;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	d->port = port;
	if (make_admin_key(bin, db, d->key, sizeof(d->key)) < 0)
		return -1;
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	argv[n++] = bin;
	argv[n++] = "serve";
	argv[n++] = "--db";
	argv[n++] = db;
	argv[n++] = "--listen";
	argv[n++] = listen;
	for (size_t i = 0; extra && i < BENCH_MAX_EXTRA_ARGS && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	d->curl = curl_easy_init();
	out = malloc(sizeof(*out));
	if (!d->curl || !out)
		goto fail;
	d->pid = fork();
	if (d->pid < 0)
		goto fail;
	if (d->pid == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < BENCH_START_TRIES &&
			bench_exchange(d, "GET", "/healthz", "text/plain", NULL, 0, out) != 200;
	     i++)
		usleep(10000);
	free(out);
	return 0;
fail:
	free(out);
	curl_easy_cleanup(d->curl);
	d->curl = NULL;
	return -1;
}

void bench_dpgate_stop(bench_dpgate *d)
{
	curl_easy_cleanup(d->curl);
	d->curl = NULL;
	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
}

static size_t keep_answer(char *p, size_t size, size_t n, void *ud)
{
	bench_answer *a = ud;
	size_t k = size * n, room = sizeof(a->text) - 1 - a->len, take = k < room ? k : room;

	memcpy(a->text + a->len, p, take);
	a->len += take;
	a->text[a->len] = '\0';
	return k;
}

long bench_exchange(bench_dpgate *d, const char *method, const char *path, const char *type,
		    const char *body, size_t body_len, bench_answer *out)
{
	char url[512], auth[256], ctype[96];
	struct curl_slist *h = NULL;
	CURL *c = d->curl;
	long status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", d->port, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", d->key);
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
