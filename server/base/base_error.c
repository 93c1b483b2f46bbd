/*
 * base_error.c: the server's error record, shaped like the accountant's
 * acct_error: a negative code and a message, owned by the caller.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

void srv_error_init(srv_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

int srv_error_set(srv_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->text, sizeof(err->text), fmt, ap);
	va_end(ap);
	return code;
}
