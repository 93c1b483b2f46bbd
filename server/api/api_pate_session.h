/*
 * api_pate_session.h: stateful PATE aggregation sessions.
 *
 *   POST /v1/datasets/{id}/pate/sessions                      create (SRV_SPEND)
 *   GET  /v1/datasets/{id}/pate/sessions                      list (SRV_READ)
 *   GET  /v1/datasets/{id}/pate/sessions/{sid}                read (SRV_READ)
 *   POST /v1/datasets/{id}/pate/sessions/{sid}/queries        a batch of label queries (SRV_SPEND)
 *   POST /v1/datasets/{id}/pate/sessions/{sid}/release        smooth-sensitivity release of the
 *                                                             data-dependent RDP (SRV_SPEND)
 *
 * Each handler follows srv_handler's contract (http.h): it always fills the
 * response and returns 0.
 */
#ifndef SRV_PATE_SESSION_H
#define SRV_PATE_SESSION_H

#include "api_internal.h"

srv_route_fn srv_pate_session_create;
srv_route_fn srv_pate_session_list;
srv_route_fn srv_pate_session_get;
srv_route_fn srv_pate_session_queries;
srv_route_fn srv_pate_session_release;

#endif
