/*
 * test_json_arrays.c: the JSON array builders of json.h
 * (srv_json_array_of, srv_json_real_array, srv_json_int_array).
 *
 * Contract: a new array of exactly the n values, in order, each read back
 * with jansson's own accessors; an empty array for n = 0; NULL, with
 * nothing leaked, when an item cannot be made.
 */
#include <math.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "json.h"

Test(json_arrays, values_in_order)
{
	const double r[] = {0.5, -3.0, 1e-300, 0x1.fffffffffffffp1023};
	const int64_t z[] = {0, -1, INT64_MAX, INT64_MIN, 42};
	json_t *ra = srv_json_real_array(r, 4), *za = srv_json_int_array(z, 5);

	cr_assert(json_is_array(ra) && json_array_size(ra) == 4);
	cr_assert(json_is_array(za) && json_array_size(za) == 5);
	for (size_t i = 0; i < 5; i++) {
		json_t *ri = json_array_get(ra, i), *zi = json_array_get(za, i);

		cr_assert(json_is_integer(zi) && json_integer_value(zi) == z[i], "integer %zu", i);
		if (i < 4)
			cr_assert(json_is_real(ri) && json_real_value(ri) == r[i], "real %zu", i);
	}
	json_decref(ra);
	json_decref(za);
}

Test(json_arrays, none_is_an_empty_array)
{
	json_t *a = srv_json_real_array(NULL, 0);

	cr_assert(json_is_array(a));
	cr_assert_eq(json_array_size(a), 0);
	json_decref(a);
}

/* Items 0..2 are strings; item 3 fails as an allocation would. */
static json_t *fails_at_three(const void *v, size_t i)
{
	(void)v;
	return i == 3 ? NULL : json_string("x");
}

Test(json_arrays, a_missing_item_gives_null)
{
	cr_assert_null(srv_json_array_of(5, fails_at_three, NULL));
	cr_assert_not_null(srv_json_array_of(3, fails_at_three, NULL));
}
