/*
 * test_error.c: srv_error, the server's caller-owned error record, and the
 * store filling it instead of a message buffer.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "store.h"

Test(srv_error, set_returns_the_code_and_formats_the_message)
{
	srv_error err;

	srv_error_init(&err);
	cr_assert_eq(err.code, 0);
	cr_assert_str_eq(err.text, "");
	cr_assert_eq(srv_error_set(&err, -7, "%s has %d rows", "t", 3), -7);
	cr_assert_eq(err.code, -7);
	cr_assert_str_eq(err.text, "t has 3 rows");
	/* No record: the code still comes back. */
	cr_assert_eq(srv_error_set(NULL, -3, "ignored"), -3);
}

Test(srv_error, a_long_message_is_cut_to_the_record_and_terminated)
{
	char *long_text = malloc(2 * SRV_ERROR_TEXT_BYTES);
	srv_error err;

	cr_assert_not_null(long_text);
	memset(long_text, 'x', 2 * SRV_ERROR_TEXT_BYTES - 1);
	long_text[2 * SRV_ERROR_TEXT_BYTES - 1] = '\0';
	srv_error_set(&err, -1, "%s", long_text);
	cr_assert_eq(strlen(err.text), SRV_ERROR_TEXT_BYTES - 1);
	free(long_text);
}

/* A file that is not SQLite is refused with the store's code for what is
 * not a dpgate database and a message naming it, in the caller's record. */
Test(srv_error, the_store_fills_the_record_when_it_refuses_a_file)
{
	char dir[] = "/tmp/dpg-error-XXXXXX", path[64];
	srv_store *st = NULL;
	srv_error err;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/not.db", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("this is not a database, and long enough to show it: 0123456789abcdef\n", f);
	fclose(f);
	srv_error_init(&err);
	cr_assert_lt(srv_store_open_read_only(path, false, &st, &err), 0);
	cr_assert_null(st);
	cr_assert_eq(err.code, SRV_NOT_DPGATE);
	cr_assert_not_null(strstr(err.text, path), "message: %s", err.text);
	unlink(path);
	rmdir(dir);
}
