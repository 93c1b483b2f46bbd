/*
 * jobs_common.c: the helpers the trainer job tests share (jobs_common.h).
 */
#include <stdio.h>

#include <criterion/criterion.h>

#include "jobs_common.h"

void jobs_common_make_public(const dpg_server *s, const char *id)
{
	char body[160];

	snprintf(body, sizeof(body), "{\"id\":\"%s\",\"public\":true}", id);
	dpg_expect_status(s, "POST", "/v1/datasets", s->admin_key, body, 201);
}

void jobs_common_expect_refusal(dpg_resp *r, long status, const char *field, const char *what)
{
	cr_assert_eq(r->status, status, "%s: %ld %s", what, r->status, r->body);
	cr_assert_str_eq(json_string_value(json_object_get(r->json, "field")), field, "%s",
			 r->body);
	dpg_resp_free(r);
}
