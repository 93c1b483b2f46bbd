/*
 * test_data.c: the reference-vector loader of test_data.h.
 */
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "test_data.h"

json_t *test_load_reference(const char *name)
{
	const char *dir = getenv("DPGATE_TEST_DATA");
	char path[1024];
	json_error_t jerr;
	json_t *j;

	cr_assert(dir, "DPGATE_TEST_DATA is not set");
	snprintf(path, sizeof(path), "%s/reference/%s.json", dir, name);
	j = json_load_file(path, 0, &jerr);
	cr_assert(j, "cannot read %s: %s", path, jerr.text);
	cr_assert(json_is_array(j) && json_array_size(j) > 0, "%s holds no cases", path);
	return j;
}
