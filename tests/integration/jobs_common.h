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

#endif
