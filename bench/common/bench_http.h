/*
 * bench_http.h: a dpgate under test, driven over one keep-alive
 * connection.  The HTTP benchmarks start the binary they are given on a
 * temporary database, exactly as an operator would, and time what a
 * client sees.
 */
#ifndef BENCH_HTTP_H
#define BENCH_HTTP_H

#include <stddef.h>
#include <sys/types.h>

#include <curl/curl.h>

/* The start of an answer's body (enough for a status check and /metrics),
 * NUL-terminated; the rest is read and dropped. */
typedef struct bench_answer {
	char text[1 << 16];
	size_t len;
} bench_answer;

/* A running `dpgate serve` and the handle that talks to it. */
typedef struct bench_dpgate {
	pid_t pid;
	int port;
	char key[160];
	CURL *curl;
} bench_dpgate;

/*
 * Makes an admin key on the database `db` with `bin keys create`, starts
 * `bin serve --db DB --listen 127.0.0.1:PORT` followed by `extra` (NULL or
 * NULL-terminated, at most 8), its stderr sent to /dev/null, and waits up
 * to 3 s for GET /healthz to answer.  Returns 0, or -1 when the key or the
 * process could not be made (then nothing is left running).
 */
int bench_dpgate_start(bench_dpgate *d, const char *bin, const char *db, int port,
		       const char *const *extra);

/* Ends the server (SIGTERM, then waits for it) and frees the handle. */
void bench_dpgate_stop(bench_dpgate *d);

/*
 * One request on the kept connection with the admin key: `body` (body_len
 * bytes, or none when NULL) of content type `type`.  The answer's start
 * goes to out.  Returns the status, or 0 on a transport failure.
 */
long bench_exchange(bench_dpgate *d, const char *method, const char *path, const char *type,
		    const char *body, size_t body_len, bench_answer *out);

#endif
