/*
 * test_buf.c: the growable text buffer.  Expected texts are written out
 * by hand, and the growth is forced past the first 256 bytes.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "base.h"

Test(srv_buf, pieces_are_joined_and_terminated)
{
	srv_buf b = {0};

	cr_assert(srv_buf_put(&b, "ab", 2));
	cr_assert(srv_buf_put(&b, "", 0));
	srv_buf_printf(&b, "-%d-%s", 42, "x");
	cr_assert_eq(b.len, 7);
	cr_assert_str_eq(b.s, "ab-42-x");
	cr_assert_not(b.failed);
	free(b.s);
}

Test(srv_buf, printf_longer_than_the_room_grows_and_keeps_all)
{
	srv_buf b = {0};
	char want[1001];

	memset(want, 'z', 1000);
	want[1000] = '\0';
	cr_assert(srv_buf_put(&b, "z", 1));
	srv_buf_printf(&b, "%.*s", 999, want);
	cr_assert_eq(b.len, 1000);
	cr_assert_str_eq(b.s, want);
	cr_assert_geq(b.cap, 1001);
	free(b.s);
}

Test(srv_buf, after_a_failure_nothing_is_appended)
{
	srv_buf b = {0};

	cr_assert(srv_buf_put(&b, "ok", 2));
	b.failed = true;
	cr_assert_not(srv_buf_put(&b, "more", 4));
	srv_buf_printf(&b, "%s", "more");
	cr_assert_eq(b.len, 2);
	cr_assert_str_eq(b.s, "ok");
	free(b.s);
}
