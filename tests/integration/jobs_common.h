/*
 * jobs_common.h: what the trainer job tests (test_pate_job, test_slmc,
 * test_label_em, test_public, test_jobs) share on top of the harness: a
 * public dataset to read test or student rows from, and the check of a
 * refused submission.
 */
#ifndef JOBS_COMMON_H
#define JOBS_COMMON_H

#include "harness.h"

/*
 * dpg_two_class_rows(n, seed) as CSV (malloc'ed): the header `columns`, a
 * comma-separated order of "a", "b", "noise" (the three features, %.6f)
 * and "y" (the label), then one line per row in that order.
 */
char *jobs_common_two_class_csv(size_t n, unsigned seed, const char *columns);

/* Creates public dataset `id` (no budget, no ledger) on s: 201 asserted. */
void jobs_common_make_public(const dpg_server *s, const char *id);

/*
 * Asserts that answer r has `status` and names `field` as the field at
 * fault (`what` labels a failure), then frees r.
 */
void jobs_common_expect_refusal(dpg_resp *r, long status, const char *field, const char *what);

/*
 * A job's params object, without its braces, into buf: the members of
 * `over` ("key":value pairs), then those of `defaults` (the same form)
 * whose keys `over` does not name.  Fails the test when either is not
 * JSON members or the result does not fit in size bytes.
 */
void jobs_common_params(char *buf, size_t size, const char *over, const char *defaults);

/* POSTs {"trainer": trainer, ["dry_run": true,] "params": {params}} to
 * dataset's jobs with the admin key; the answer (the caller frees it). */
dpg_resp jobs_common_submit(const dpg_server *s, const char *dataset, const char *trainer,
			    const char *params, bool dry_run);

/* Submits the job, asserts 202 and its trainer, copies its id into job_id
 * (size bytes), waits at most `seconds` for its end and asserts it
 * succeeded; returns the job (the caller decrefs). */
json_t *jobs_common_run(const dpg_server *s, const char *dataset, const char *trainer,
			const char *params, char *job_id, size_t size, double seconds);

/* Asserts that the server holds no reservation and no job, and that
 * dataset's budget has no spend, no charge and no ledger row. */
void jobs_common_expect_nothing_written(const dpg_server *s, const char *dataset);

#endif
