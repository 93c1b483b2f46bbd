/*
 * cli/cli_args.c: argument helpers the commands share, so that every command
 * refuses a stray argument and answers --help the same way.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

bool cli_args_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

bool cli_args_no_stray(const char *cmd, int first, int argc, char **argv, const char *usage)
{
	if (first >= argc)
		return true;
	fprintf(stderr, "dpgate %s: unexpected argument '%s'\n%s", cmd, argv[first], usage);
	return false;
}
