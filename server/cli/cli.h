/*
 * cli.h: the dpgate commands, one file each.
 *
 * Every command takes the arguments after `dpgate` (argv[0] is "dpgate
 * CMD", so that getopt's own messages name the command) and returns the
 * process exit status: 0 success, 1 a failure the command reports (a
 * ledger that does not verify, a key that cannot be written), 2 bad usage
 * or bad input.  Messages go to stderr and start "dpgate CMD:"; results go
 * to stdout.  `dpgate check` lives in cli/cli_check.c as srv_check_main
 * (api.h), which the accountant's tests call directly.
 */
#ifndef CLI_H
#define CLI_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "http.h"

/* cli/cli_help.c: `dpgate --help` and `dpgate --version`. */
void cli_help_print(FILE *f);
void cli_help_version(void);

/* cli/cli_serve.c: `dpgate serve [--db FILE] [--listen HOST:PORT] ...`: serves
 * until SIGINT, SIGTERM or SIGHUP (then 0); 1 when it cannot start
 * (another server holds the database or the data directory, the store or
 * the address cannot be opened), 2 on bad usage. */
int cli_serve_main(int argc, char **argv);

/* cli/cli_keys.c: `dpgate keys create|list|revoke --db FILE ...`. */
int cli_keys_main(int argc, char **argv);

/* cli/cli_verify.c: `dpgate verify --db FILE`. */
int cli_verify_main(int argc, char **argv);

/*
 * Replays the ledger of the dpgate database at path (srv_store_verify, on a
 * read-only store): 0 with the report in *ret_report (caller owns it) and
 * in *ret_agrees whether every dataset agreed (srv_store_verify's SRV_OK
 * rather than SRV_CONFLICT), or -1 after a message on stderr naming cmd.
 */
int cli_verify_file(const char *cmd, const char *path, json_t **ret_report, bool *ret_agrees);

/* cli/cli_backup.c: `dpgate backup --db FILE --to OUT`. */
int cli_backup_main(int argc, char **argv);

/* cli/cli_migrate.c: `dpgate migrate --from FILE --to postgresql://...`. */
int cli_migrate_main(int argc, char **argv);

/* cli/cli_predict.c: `dpgate predict --model FILE [CSV|-]`. */
int cli_predict_main(int argc, char **argv);

/* cli/cli_routes.c: `dpgate routes`. */
int cli_routes_main(int argc, char **argv);

/*
 * cli/cli_stateless.c: the commands that answer one stateless route (epsilon,
 * delta, calibrate, ...) from a JSON body.  cli_stateless_find returns the
 * command called `name`, or NULL; cli_stateless_main runs it.
 */
typedef struct cli_stateless_cmd cli_stateless_cmd;
const cli_stateless_cmd *cli_stateless_find(const char *name);
int cli_stateless_main(const cli_stateless_cmd *cmd, int argc, char **argv);

/* cli/cli_args.c: argument helpers shared by the commands. */

/* True when an argument after argv[0] is --help or -h. */
bool cli_args_wants_help(int argc, char **argv);

/* Refuses positional arguments left after the options (getopt moved them to
 * argv[first..argc)): prints the usage on stderr.  Returns true when there
 * were none. */
bool cli_args_no_stray(const char *cmd, int first, int argc, char **argv, const char *usage);

/* The most string options cli_args_strings reads for one command. */
#define CLI_ARGS_MAX_STRINGS 4

/*
 * Reads a command's options when each is `--NAME VALUE` (names[i]'s value
 * into *values[i], n <= CLI_ARGS_MAX_STRINGS of them) or --help / -h, with
 * getopt_long from argv[1].  Returns -1 to go on, optind then at the first
 * operand; 0 after --help (the usage on stdout); 2 after an unknown option
 * or a missing value (the usage on stderr).
 */
int cli_args_strings(int argc, char **argv, const char *const *names, const char **const *values,
		     size_t n, const char *usage);

/*
 * The check after the options: `complete` says every required option was
 * given, and no operand may be left at argv[first..argc).  Prints the usage
 * on stderr when one is missing (with a message for a stray operand).
 * Returns true when the command may go on.
 */
bool cli_args_complete(const char *cmd, bool complete, int first, int argc, char **argv,
		       const char *usage);

/* cli/cli_db.c: opening the database of a command. */

/* Opens (creates and migrates if needed) the store at db_path with `pool`
 * connections into *ret.  0, or the command's exit status after a message
 * naming cmd on stderr: 2 when db_path is not a dpgate database (nothing
 * was written to it), 1 for any other failure. */
int cli_db_open(const char *cmd, const char *db_path, unsigned pool, srv_store **ret);

/* Closes a store cli_db_open opened (NULL too): while a server holds the
 * file (serve's flock), without emptying the WAL the server wrote out to
 * its working size (srv_store_close_beside_server). */
void cli_db_close(const char *db_path, srv_store *st);

/* True when db_path is a regular file that is not empty; false after a
 * message naming cmd.  Commands that only read or change an existing
 * ledger must not create one at a mistyped path (and then report on it),
 * nor write a schema into an empty file. */
bool cli_db_exists(const char *cmd, const char *db_path);

/* For a command that would change an existing SQLite database beside a
 * running server: true when it may open it, false after a message naming
 * cmd when a server holds it (serve's flock) and the schema is not this
 * binary's, which opening would migrate under that server. */
bool cli_db_not_migrated_under_a_server(const char *cmd, const char *db_path);

#endif
