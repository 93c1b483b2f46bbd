/*
 * cli/cli_routes.c: `dpgate routes`, the router's table as text, so that the
 * spec and the docs can be checked against what the server matches.
 */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "cli.h"

int cli_routes_main(int argc, char **argv)
{
	static const char usage[] =
		"usage: dpgate routes\n\nPrints every HTTP route, one \"METHOD pattern\" a "
		"line, as the\nserver's router holds them (the OpenAPI spec lists the same).\n";

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		return 0;
	}
	if (!cli_args_no_stray("routes", 1, argc, argv, usage))
		return 2;
	for (size_t i = 0; i < srv_routes_count; i++)
		printf("%s %s\n", srv_routes[i].method, srv_routes[i].pattern);
	return 0;
}
