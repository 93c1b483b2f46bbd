/*
 * api_web.h: the dashboard's routes (api_web.c), for the route table.
 */
#ifndef SRV_API_WEB_H
#define SRV_API_WEB_H

#include "http.h"

/* GET /: the dashboard page, with its Content-Security-Policy. */
int srv_h_web_page(srv_request *req, srv_response *res);

/* GET /assets/{name}: the page's style and script, and Chart.js when the
 * server has it (404 otherwise). */
int srv_h_web_asset(srv_request *req, srv_response *res);

#endif
