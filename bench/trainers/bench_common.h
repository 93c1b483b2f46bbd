/*
 * bench_common.h: what the trainer benchmarks share: the walk over their
 * options, the checked number parser of their values and the loader of the
 * public CSV tables
 * (../shared/data: a header line, then d features and an integer label per
 * row).  Benchmarks only; the service parses tables in mechanisms/.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "trn.h"

/* Longest CSV line the loader reads. */
#define BENCH_MAX_CSV_LINE 65536

/*
 * What bench_options calls once per option, in order: `key` as typed and
 * `value` the argument after it, or NULL for a flag.  0 to go on, -1 to
 * refuse the option.
 */
typedef int (*bench_option_fn)(void *opts, const char *key, const char *value);

/*
 * Walks argv[first..argc), the options of a trainer benchmark: a key named
 * in `flags` (NULL-terminated; NULL for none) stands alone, any other takes
 * the next argument as its value, whatever it looks like.  Calls fn for
 * each.  -1 as soon as fn refuses one or a key that is not a flag comes
 * last, with no value; 0 otherwise.
 */
int bench_options(int argc, char **argv, int first, const char *const *flags, bench_option_fn fn,
		  void *opts);

/*
 * Parses the number at the start of v into *ret: the whole of v, or up to
 * the separator `sep` ('\0' for none).  -1 when v is NULL or not a finite
 * number in [lo, hi]; *ret is then left alone.
 */
int bench_number(const char *v, char sep, double lo, double hi, double *ret);

/*
 * Parses a comma-separated list of at most `max` numbers in [lo, hi] into
 * out[0..*ret_n).  -1 when v is NULL, empty, too long or has a bad item.
 */
int bench_number_list(const char *v, double lo, double hi, double *out, size_t max,
		      size_t *ret_n);

/* Seconds on the monotonic clock: bench/common's clock, linked in (its
 * header shares this one's name). */
double bench_now_s(void);

/* A new table holding rows [start, start + n) of `all` (fewer when the
 * table ends first); NULL when out of memory or no row is left. */
trn_dataset *bench_rows(const trn_dataset *all, size_t start, size_t n);

/*
 * Reads a CSV table: d is the header's field count minus one, every row
 * gives d finite features then its label (a whole number).  On success
 * the caller owns *ret_x (n x d, row-major) and *ret_y (n); -1 on an
 * unreadable file, a short or non-numeric row, or no memory.
 */
int bench_csv_read(const char *path, double **ret_x, int64_t **ret_y, size_t *ret_n,
		   size_t *ret_d);

/* The same table as a trn_dataset with (largest label + 1) classes. */
int bench_csv_load(const char *path, trn_dataset **ret);

/* Standardises every feature of `target` with the mean and standard
 * deviation of that feature over `ref` (a public table); standardise `ref`
 * itself last. */
void bench_standardise(const trn_dataset *ref, trn_dataset *target);

/* Replaces *ds by its rows projected on the k columns of v (d x k,
 * row-major), labels kept.  0, or -1 (no memory; *ds unchanged). */
int bench_project(trn_dataset **ds, const double *v, size_t k);

/*
 * The rdp accountant's epsilon at `delta` of event ev under add/remove
 * neighbours, as the service prices a job, and its order in *ret_order
 * (may be NULL).  Frees ev; NAN when ev is NULL or cannot be priced.
 */
double bench_rdp_epsilon(acct_event *ev, double delta, double *ret_order);

#endif
