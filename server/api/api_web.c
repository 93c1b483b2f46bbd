/*
 * api_web.c: the dashboard page (GET /) and its assets (GET
 * /assets/{name}): the page, style and script of server/web/, embedded in
 * the binary at build time, and Chart.js from where Debian's libjs-chart.js
 * installs it.  Without that file /assets/chart.js is 404 and the page
 * draws tables instead of charts.
 *
 * The page needs no key (it holds no data: it asks for a key and reads the
 * API with it).  Its Content-Security-Policy allows scripts, styles and
 * requests to this server only, no inline script or style, and no framing;
 * nothing it loads comes from elsewhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "api_web.h"
#include "srv_web_files.h"

/* Chart.js 3 as Debian installs it (libjs-chart.js): the UMD build, which
 * defines window.Chart. */
#define CHART_JS_PATH "/usr/share/javascript/chart.js/chart.min.js"
/* Larger than any Chart.js release (3.9.1 minified: 195 KiB). */
#define CHART_JS_MAX_BYTES (4u << 20)

/* The page's policy: everything from this server only, nothing inline, never framed. */
static const char page_csp[] =
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static const struct {
	const char *name;         /* under /assets/, or "" for the page */
	const char *file;         /* in srv_web_files */
	const char *content_type;
} web_assets[] = {
	{"", "index.html", "text/html; charset=utf-8"},
	{"dashboard.css", "dashboard.css", "text/css; charset=utf-8"},
	{"dashboard.js", "dashboard.js", "text/javascript; charset=utf-8"},
};

/* Answers an embedded file; 404 when the build lacks it. */
static int reply_embedded(const char *file, const char *content_type, srv_response *res)
{
	for (size_t i = 0; i < srv_web_files_count; i++) {
		if (strcmp(srv_web_files[i].name, file) != 0)
			continue;
		res->body = malloc(srv_web_files[i].size + 1);
		if (!res->body) {
			srv_problem(res, 500, NULL, "out of memory", NULL, NULL);
			return 0;
		}
		memcpy(res->body, srv_web_files[i].data, srv_web_files[i].size + 1);
		res->len = srv_web_files[i].size;
		res->status = 200;
		res->content_type = content_type;
		return 0;
	}
	srv_problem(res, 404, NULL, "no such asset in this build", NULL, NULL);
	return 0;
}

/* Answers Chart.js from CHART_JS_PATH; 404 when it is not installed. */
static int reply_chart_js(srv_response *res)
{
	FILE *f = fopen(CHART_JS_PATH, "rb");
	char *buf = NULL;
	size_t n = 0;

	if (!f) {
		srv_problem(res, 404, NULL,
			    "Chart.js is not installed on the server (Debian: libjs-chart.js); the "
			    "dashboard shows tables instead", NULL, NULL);
		return 0;
	}
	buf = malloc(CHART_JS_MAX_BYTES + 1);
	if (buf)
		n = fread(buf, 1, CHART_JS_MAX_BYTES + 1, f);
	if (!buf || ferror(f) || n > CHART_JS_MAX_BYTES) {
		free(buf);
		srv_problem(res, 500, NULL, "Chart.js could not be read", NULL, NULL);
		goto out;
	}
	buf[n] = '\0';
	res->body = buf;
	res->len = n;
	res->status = 200;
	res->content_type = "text/javascript; charset=utf-8";
out:
	fclose(f);
	return 0;
}

int srv_h_web_page(srv_request *req, srv_response *res)
{
	(void)req;
	res->csp = page_csp;
	return reply_embedded(web_assets[0].file, web_assets[0].content_type, res);
}

int srv_h_web_asset(srv_request *req, srv_response *res)
{
	const char *name = req->params[0];

	if (strcmp(name, "chart.js") == 0)
		return reply_chart_js(res);
	for (size_t i = 1; i < sizeof(web_assets) / sizeof(web_assets[0]); i++)
		if (strcmp(name, web_assets[i].name) == 0)
			return reply_embedded(web_assets[i].file, web_assets[i].content_type, res);
	srv_problem(res, 404, NULL, "no such asset", NULL, NULL);
	return 0;
}
