/*
 * srv_check.c: `dpgate check` is not yet available in this build.
 */
#include <stdio.h>

#include "srv_stateless.h"

int srv_check_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "dpgate check: not available in this build\n");
	return 2;
}
