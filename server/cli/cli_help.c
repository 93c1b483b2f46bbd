/*
 * cli/cli_help.c: `dpgate --help` and `dpgate --version`.  The version is the
 * meson project's (cli_version.h is generated from it), as in the served
 * spec, so that the two cannot drift apart.
 */
#include <stdio.h>

#include "cli.h"
#include "cli_version.h"

static const char usage_top[] =
	"usage: dpgate <command> [options]\n"
	"\n"
	"A privacy-budget service: keeps a differential-privacy budget per dataset,\n"
	"prices every release in a privacy accountant, and hands releases out only\n"
	"while the budget holds.\n"
	"\n"
	"commands:\n"
	"  serve       run the HTTP API on SQLite or PostgreSQL\n"
	"  keys        create, list or revoke API keys (create|list|revoke)\n"
	"  epsilon     epsilon of a privacy event at a delta (stateless)\n"
	"  delta       delta of a privacy event at an epsilon (stateless)\n"
	"  calibrate   solve an event template's one null field for a target (stateless)\n"
	"  compare     epsilon of an event under every accountant (stateless)\n"
	"  rdp         Renyi-DP curve of an event (stateless)\n"
	"  pate-cost   RDP of a PATE GNMax answer from its votes (stateless)\n"
	"  pate-smooth-sensitivity\n"
	"              smooth sensitivity of a PATE answer's RDP (stateless)\n"
	"  label-em-guidance\n"
	"              keep and success probabilities of label EM at an epsilon (stateless)\n"
	"  check       check a budget policy file, for CI (exit 0 fits, 1 not, 2 bad)\n"
	"  verify      recompute every ledger's totals from its rows and compare\n"
	"  backup      write a consistent copy of the database, also while serving\n"
	"  migrate     copy an SQLite database into an empty PostgreSQL one, verified\n"
	"  routes      print the HTTP routes\n"
	"  predict     classify a CSV with a downloaded model, offline\n"
	"  help CMD    describe command CMD (as `dpgate CMD --help`)\n"
	"\n"
	"options:\n"
	"  --help      this text\n"
	"  --version   print dpgate's version\n"
	"\n"
	"`dpgate <command> --help` or `dpgate help <command>` describes a command.\n";

void cli_help_print(FILE *f)
{
	fputs(usage_top, f);
}

void cli_help_version(void)
{
	printf("dpgate %s\n", DPGATE_VERSION);
}
