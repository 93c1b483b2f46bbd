/*
 * test_data.c: the reference-vector loader of test_data.h.
 */
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "test_data.h"

json_t *test_load_data(const char *path)
{
	const char *dir = getenv("DPGATE_TEST_DATA");
	char full[1024];
	json_error_t jerr;
	json_t *j;

	cr_assert(dir, "DPGATE_TEST_DATA is not set");
	snprintf(full, sizeof(full), "%s/%s", dir, path);
	j = json_load_file(full, JSON_REJECT_DUPLICATES, &jerr);
	cr_assert(j, "cannot read %s: %s", full, jerr.text);
	return j;
}

json_t *test_load_reference(const char *name)
{
	char path[512];
	json_t *j;

	snprintf(path, sizeof(path), "reference/%s.json", name);
	j = test_load_data(path);
	cr_assert(json_is_array(j) && json_array_size(j) > 0, "%s holds no cases", path);
	return j;
}

void test_each_reference_case(const char *name,
			      void (*check)(const char *id, json_t *c, void *ctx), void *ctx)
{
	json_t *cases = test_load_reference(name);
	size_t k;
	json_t *c;

	json_array_foreach(cases, k, c)
		check(json_string_value(json_object_get(c, "id")), c, ctx);
	json_decref(cases);
}
