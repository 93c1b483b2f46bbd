/*
 * cli_main.c: dpgate's main() and its table of commands.
 *
 * Every command lives in cli/, one file each (cli.h); main() finds a
 * command by name and runs it.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "cli.h"
#include "api.h"

/* OpenBLAS's own control (cblas.h of libopenblas-dev declares it too). */
void openblas_set_num_threads(int num_threads);

/* "dpgate " and a command name of up to 48 bytes. */
#define PROG_NAME_BYTES 64

/* The commands other than the stateless ones, by name (cli.h). */
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"serve", cli_serve_main},
	{"keys", cli_keys_main},
	{"check", srv_check_main},
	{"verify", cli_verify_main},
	{"backup", cli_backup_main},
	{"migrate", cli_migrate_main},
	{"routes", cli_routes_main},
	{"predict", cli_predict_main},
};

/*
 * Runs command `cmd` with its arguments argv[1..argc).  argv[0] is set to
 * `prog`, the caller's buffer of PROG_NAME_BYTES, which then holds "dpgate
 * CMD": getopt's own messages ("unrecognized option") start with argv[0],
 * and so every error of a command starts with "dpgate CMD:".  Returns the
 * command's exit status, or -1 when there is no such command.
 */
static int run_command(const char *cmd, int argc, char **argv, char *prog)
{
	const cli_stateless_cmd *stateless;

	snprintf(prog, PROG_NAME_BYTES, "dpgate %.48s", cmd);
	argv[0] = prog;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(cmd, commands[i].name) == 0)
			return commands[i].run(argc, argv);
	stateless = cli_stateless_find(cmd);
	return stateless ? cli_stateless_main(stateless, argc, argv) : -1;
}

int main(int argc, char **argv)
{
	const char *cmd;
	char prog[PROG_NAME_BYTES];
	int rc;

	acct_gsl_quiet();
	/* Job workers run in parallel; one BLAS thread each keeps the two
	 * cores from being oversubscribed. */
	openblas_set_num_threads(1);
	/* Before anything opens a database (see srv_store_init_process). */
	srv_store_init_process();
	if (sodium_init() < 0) {
		fprintf(stderr, "dpgate: libsodium failed to initialise\n");
		return 1;
	}
	if (argc < 2) {
		cli_help_print(stderr);
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
	    (strcmp(cmd, "help") == 0 && argc == 2)) {
		cli_help_print(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0) {
		cli_help_version();
		return 0;
	}
	/* `dpgate help CMD` is `dpgate CMD --help`. */
	if (strcmp(cmd, "help") == 0) {
		char *help_argv[] = {argv[2], "--help", NULL};

		if (argc > 3) {
			fprintf(stderr, "dpgate help: one command at a time\n");
			return 2;
		}
		rc = run_command(argv[2], 2, help_argv, prog);
		if (rc < 0) {
			fprintf(stderr, "dpgate help: unknown command '%s'\n\n", argv[2]);
			cli_help_print(stderr);
		}
		return rc < 0 ? 2 : rc;
	}
	rc = run_command(cmd, argc - 1, argv + 1, prog);
	if (rc < 0) {
		fprintf(stderr, "dpgate: unknown command '%s'\n\n", cmd);
		cli_help_print(stderr);
	}
	return rc < 0 ? 2 : rc;
}
