/*
 * api_jobs.h: the routes of training jobs (api_jobs_routes.c) and of the
 * data linked to a dataset (api_data_routes.c).  The queue and worker pool
 * are in jobs/ (jobs/jobs.h), the jobs' SQL in store_jobs.c and their
 * parameters in jobs_params.c.
 *
 * The budget rule of a job (docs/training.md, "Budget rule"):
 *  - its privacy event is built from its parameters and the linked table's
 *    row count before any data is read, and reserved in full at submission;
 *    a job that does not fit is refused with 409 and the epsilon it needs;
 *  - a job cancelled while queued releases its reservation (no data read),
 *    and so does a started job that finds no secure randomness: it fails
 *    before it reads anything;
 *  - once a worker has started it, the reservation is committed in full when
 *    it ends, whether it succeeded, failed or was cancelled;
 *  - at start-up, a job found `running` (the server stopped or crashed under
 *    it) is marked failed and its reservation committed in full; `queued`
 *    jobs are queued again.
 */
#ifndef SRV_JOBS_H
#define SRV_JOBS_H

#include "jobs.h"
#include "api_internal.h"

/* Route handlers. */
srv_route_fn srv_h_data_put;
srv_route_fn srv_h_data_get;
srv_route_fn srv_h_job_submit;
srv_route_fn srv_h_job_list;
srv_route_fn srv_h_job_get;
srv_route_fn srv_h_job_cancel;
srv_route_fn srv_h_job_model;
srv_route_fn srv_h_job_predict;

#endif
