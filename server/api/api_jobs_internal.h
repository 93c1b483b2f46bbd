/*
 * api_jobs_internal.h: what the job and data-link routes share: the DP-SGD
 * parameters a job carries (api_jobs_params.c).  The job rows and data
 * links are the store's (store.h); the budget rule is api_jobs.h's.
 */
#ifndef DPGATE_SRV_API_JOBS_INTERNAL_H
#define DPGATE_SRV_API_JOBS_INTERNAL_H

#include "api_internal.h"
#include "jobs.h"

/* Loads job {id} (req->params[0]) when the key reaches its dataset, or
 * answers 404 / 403 / 503; false when it answered.  The caller clears j. */
bool srv__load_visible_job(srv_request *req, srv_response *res, srv_job_row *j);

#endif
