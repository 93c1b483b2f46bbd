/*
 * srv_fmt.h: number and time text on the request path without printf.
 *
 * The charge path writes a dozen reals per request (the event, its cost,
 * the running totals, the answer); glibc's printf plus a strtod read-back
 * for each was a fifth of the server's CPU time per charge.
 */
#ifndef DPGATE_SRV_FMT_H
#define DPGATE_SRV_FMT_H

#include <stddef.h>
#include <stdint.h>

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

/* UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 characters and a NUL). */
void srv_fmt_timestamp(char buf[32], int64_t unix_s, long millis);

#endif
