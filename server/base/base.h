/*
 * base.h: the leaf of server/: number and time text, a growable text
 * buffer, clocks, latency histograms and an intrusive list.  It includes
 * nothing of dpgate's and no library, so every other layer (store/, http/,
 * api/, jobs/, cli/) may use it.
 *
 * Number text (base_fmt.c) is written without printf: the charge path
 * writes a dozen reals per request (the event, its cost, the running
 * totals, the answer); glibc's printf plus a strtod read-back for each was
 * a fifth of the server's CPU time per charge.
 */
#ifndef DPGATE_SRV_BASE_H
#define DPGATE_SRV_BASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Room for any output of srv_fmt_real, with its terminating NUL. */
#define SRV_FMT_REAL_MAX 32

/*
 * Writes the shortest decimal that reads back (strtod) as exactly x, in the
 * layout of printf's %.Pg for the smallest P in 15..17 that reads back, with
 * ".0" appended when the text has no '.', 'e' or 'n' (so that a JSON reader
 * sees a real).  Byte for byte what the loop "for P in 15..17: snprintf
 * %.*g; stop when strtod gives x back" prints, for every double, including
 * "nan", "inf" and "-0.0".  Returns the length (< SRV_FMT_REAL_MAX).
 */
size_t srv_fmt_real(char buf[SRV_FMT_REAL_MAX], double x);

/* Writes v in decimal; returns the length (at most 20). */
size_t srv_fmt_int64(char buf[24], int64_t v);

/* Copies src (NULL as "") into dst of size bytes, cut to fit, always
 * terminated: snprintf(dst, size, "%s", src) without printf. */
void srv_strcopy(char *dst, size_t size, const char *src);

/*
 * The file that a path stored in the database names, as this process reads
 * it: the stored path's last component under dir/sub ("DIR/SUB/NAME"),
 * whatever directory the stored path spelled.  A data directory copied or
 * restored to another path then finds its own files, and never reads (or
 * removes) files of the directory it was copied from.  Returns 0 with the
 * path in out, or -1 when the last component is empty, "." or "..", or the
 * path does not fit in size bytes (out then holds no usable path).
 */
int srv_path_in_dir(char *out, size_t size, const char *dir, const char *sub, const char *stored);

/* UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 characters and a NUL). */
void srv_fmt_timestamp(char buf[32], int64_t unix_s, long millis);

/* Current UTC time as RFC 3339 text (srv_fmt_timestamp of now). */
void srv_now_text(char buf[32]);

/* Seconds from `from` to `to`, and from `start` to now on CLOCK_MONOTONIC. */
double srv_seconds_between(const struct timespec *from, const struct timespec *to);
double srv_seconds_since(const struct timespec *start);

#define SRV_METRIC_BUCKETS 17

/* A latency histogram for /metrics: observations per bucket (not
 * cumulative; the upper bounds, shared by every histogram, are
 * srv_histogram_bound's) and their sum, each a lock-free atomic.  All zero
 * is an empty histogram. */
typedef struct srv_histogram {
	atomic_uint_fast64_t bucket[SRV_METRIC_BUCKETS];
	atomic_uint_fast64_t sum_ns;
} srv_histogram;

/* Adds one observation of `seconds` (a negative or NaN one counts as 0). */
void srv_histogram_observe(srv_histogram *h, double seconds);

/* The upper bound in seconds of bucket i < SRV_METRIC_BUCKETS - 1 (the
 * last bucket is +Inf). */
double srv_histogram_bound(int i);

/*
 * A growable text buffer, always NUL-terminated once written to.  Start
 * from {0}; the caller frees s.  A failed growth sets `failed`, after which
 * every append does nothing, so a writer checks it once at the end.
 */
typedef struct srv_buf {
	char *s;
	size_t len, cap;
	bool failed;
} srv_buf;

/* Appends n bytes of text.  False when out of memory (now or before). */
bool srv_buf_put(srv_buf *b, const char *text, size_t n);

/* Appends printf output; a failure only sets b->failed. */
void srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The server's error record, shaped like acct_error: functions of server/
 * return 0 or a negative code and fill the caller's record.  The message
 * holds a path and the library's own words (SQLite's, a system call's). */
#define SRV_ERROR_TEXT_BYTES 512

typedef struct srv_error {
	int code;
	char text[SRV_ERROR_TEXT_BYTES];
} srv_error;

/* Clears a record.  Accepts NULL. */
void srv_error_init(srv_error *err);

/* Sets err's code and message (err may be NULL); returns `code`. */
int srv_error_set(srv_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * An intrusive doubly linked list: the waiting connections, the
 * long-poll waiters, the parsed-table cache.  A listed object holds a
 * srv_link as its first member, so a pointer to the link is a pointer to
 * the object (C11 6.7.2.1p15) and NULL stays NULL.  Start both from {0};
 * the list owns nothing and takes no lock.
 */
typedef struct srv_link {
	struct srv_link *prev, *next;
} srv_link;

typedef struct srv_list {
	srv_link *head, *tail;
} srv_list;

/* Puts n, not in any list, first or last in l. */
void srv_list_push_front(srv_list *l, srv_link *n);
void srv_list_push_back(srv_list *l, srv_link *n);

/* Takes n out of l, which holds it, and clears its links. */
void srv_list_unlink(srv_list *l, srv_link *n);

#endif
