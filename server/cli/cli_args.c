/*
 * cli/cli_args.c: argument helpers the commands share, so that every command
 * refuses a stray argument and answers --help the same way.
 */
#include <getopt.h>
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

int cli_args_strings(int argc, char **argv, const char *const *names, const char **const *values,
		     size_t n, const char *usage)
{
	struct option opts[CLI_ARGS_MAX_STRINGS + 2] = {{0}};
	size_t i;
	int c, at;

	if (n > CLI_ARGS_MAX_STRINGS)
		return 2;
	for (i = 0; i < n; i++)
		opts[i] = (struct option){names[i], required_argument, NULL, 0};
	opts[n] = (struct option){"help", no_argument, NULL, 'h'};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, &at)) != -1) {
		if (c == 0 && (size_t)at < n) {
			*values[at] = optarg;
		} else if (c == 'h') {
			fputs(usage, stdout);
			return 0;
		} else {
			fputs(usage, stderr);
			return 2;
		}
	}
	return -1;
}

bool cli_args_complete(const char *cmd, bool complete, int first, int argc, char **argv,
		       const char *usage)
{
	if (!complete) {
		fputs(usage, stderr);
		return false;
	}
	return cli_args_no_stray(cmd, first, argc, argv, usage);
}
