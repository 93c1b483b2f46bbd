/*
 * api_web.h: the dashboard's routes (api_web.c), for the route table.
 */
#ifndef SRV_API_WEB_H
#define SRV_API_WEB_H

#include "http.h"

/* GET /: the dashboard page, with its Content-Security-Policy. */
srv_route_fn srv_h_web_page;

/* GET /assets/{name}: the page's style and script, and Chart.js when the
 * server has it (404 otherwise). */
srv_route_fn srv_h_web_asset;

#endif
