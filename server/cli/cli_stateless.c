/*
 * cli/cli_stateless.c: the commands that answer one stateless route from its
 * JSON body without a server (epsilon, delta, calibrate, compare, rdp,
 * pate-cost, pate-smooth-sensitivity, label-em-guidance): the same handler
 * the HTTP route calls, so that the two cannot disagree.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "api.h"

/*
 * The stateless commands: each reads the body of its route and prints the
 * route's answer.  `example` is a complete body the command answers (the
 * CLI test runs every one), shown by its --help.
 */
/* The options that fill a body's keys, each taken only by the commands
 * whose body has that key. */
enum {
	TAKES_DELTA = 1,
	TAKES_EPSILON = 2,
	TAKES_ACCOUNTANT = 4,
	TAKES_NEIGHBOR = 8,
};

struct cli_stateless_cmd {
	const char *name;
	const char *route;
	srv_json_fn fn;
	unsigned takes;
	const char *example;
};

static const cli_stateless_cmd stateless_cmds[] = {
	{"epsilon", "/v1/accountant/epsilon", srv_acct_epsilon,
	 TAKES_DELTA | TAKES_ACCOUNTANT | TAKES_NEIGHBOR,
	 "{\"event\": {\"type\": \"self_composed\", \"count\": 1000, \"event\": {\"type\": "
	 "\"poisson_sampled\", \"sampling_probability\": 0.01, \"event\": {\"type\": "
	 "\"gaussian\", \"noise_multiplier\": 1.1}}}, \"delta\": 1e-5, \"accountant\": "
	 "\"rdp\", \"neighbor\": \"add_remove\"}"},
	{"delta", "/v1/accountant/delta", srv_acct_delta,
	 TAKES_EPSILON | TAKES_ACCOUNTANT | TAKES_NEIGHBOR,
	 "{\"event\": {\"type\": \"gaussian\", \"noise_multiplier\": 2}, \"epsilon\": 1, "
	 "\"accountant\": \"pld\", \"neighbor\": \"add_remove\"}"},
	{"calibrate", "/v1/accountant/calibrate", srv_acct_calibrate,
	 TAKES_DELTA | TAKES_EPSILON | TAKES_ACCOUNTANT | TAKES_NEIGHBOR,
	 "{\"template\": {\"type\": \"self_composed\", \"count\": 1000, \"event\": {\"type\": "
	 "\"poisson_sampled\", \"sampling_probability\": 0.01, \"event\": {\"type\": "
	 "\"gaussian\", \"noise_multiplier\": null}}}, \"epsilon\": 3, \"delta\": 1e-5, "
	 "\"accountant\": \"rdp\", \"neighbor\": \"add_remove\"}"},
	{"compare", "/v1/accountant/compare", srv_acct_compare,
	 TAKES_DELTA | TAKES_NEIGHBOR,
	 "{\"event\": {\"type\": \"self_composed\", \"count\": 1000, \"event\": {\"type\": "
	 "\"poisson_sampled\", \"sampling_probability\": 0.01, \"event\": {\"type\": "
	 "\"gaussian\", \"noise_multiplier\": 1.1}}}, \"delta\": 1e-5, \"neighbor\": "
	 "\"add_remove\"}"},
	{"rdp", "/v1/accountant/rdp", srv_acct_rdp,
	 TAKES_NEIGHBOR,
	 "{\"event\": {\"type\": \"gaussian\", \"noise_multiplier\": 2}, \"orders\": [2, 4, "
	 "8, 16, 32]}"},
	{"pate-cost", "/v1/pate/cost", srv_pate_cost,
	 0,
	 "{\"votes\": [90, 5, 5], \"sigma\": 40, \"orders\": [2, 4, 8, 16, 32]}"},
	{"pate-smooth-sensitivity", "/v1/pate/smooth-sensitivity", srv_pate_smooth_sensitivity,
	 0,
	 "{\"votes\": [90, 5, 5], \"num_teachers\": 100, \"sigma\": 40, \"order\": 10, "
	 "\"beta\": 0.0329}"},
	{"label-em-guidance", "/v1/label-em/guidance", srv_label_em_guidance,
	 TAKES_EPSILON,
	 "{\"n\": 1000, \"epsilon\": 1, \"sensitivity\": 1, \"ks\": [0, 1, 2]}"},
};

/* Printed with the command's name and options, route, example body and
 * name again. */
static const char usage_stateless[] =
	"usage: dpgate %s%s [FILE|-]\n"
	"\n"
	"Reads the JSON body of POST %s from FILE or stdin (default),\n"
	"fills missing keys from the options, and prints the route's JSON answer.\n"
	"\n"
	"Example (a complete body):\n"
	"  %s\n"
	"in a file body.json: dpgate %s body.json\n"
	"\n"
	"Exit status: 0 answered, 1 the event cannot be priced (422), 2 bad input.\n";

/* The options that fill keys a body leaves out. */
struct stateless_opts {
	json_t *delta, *epsilon; /* JSON numbers, or NULL */
	const char *accountant, *neighbor;
};

const cli_stateless_cmd *cli_stateless_find(const char *name)
{
	for (size_t i = 0; i < sizeof(stateless_cmds) / sizeof(stateless_cmds[0]); i++)
		if (strcmp(name, stateless_cmds[i].name) == 0)
			return &stateless_cmds[i];
	return NULL;
}

/* The JSON body in the file at path (stdin when path is NULL or "-"),
 * parsed as the route parses a request body.  NULL with err on failure. */
static json_t *read_json_input(const char *path, acct_error *err)
{
	FILE *f = (!path || strcmp(path, "-") == 0) ? stdin : fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *j = NULL;

	if (!f) {
		acct_error_set(err, ACCT_EINVAL, "", "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t n;

		/* The route's limit: a body of DPG_MAX_BODY_BYTES is read whole. */
		if (len > DPG_MAX_BODY_BYTES) {
			acct_error_set(err, ACCT_EINVAL, "", "input larger than %u bytes",
				       DPG_MAX_BODY_BYTES);
			goto out;
		}
		if (len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			if (cap > DPG_MAX_BODY_BYTES + 4096 + 1)
				cap = DPG_MAX_BODY_BYTES + 4096 + 1;
			nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		acct_error_set(err, ACCT_EINVAL, "", "cannot read %s: %s",
			       f == stdin ? "stdin" : path, strerror(errno));
		goto out;
	}
	j = srv_parse_body(buf ? buf : "", len, err);
out:
	if (f != stdin)
		fclose(f);
	free(buf);
	return j;
}

/*
 * Reads the number option `--option` of command `cmd` into a new JSON real:
 * the whole text must be a finite decimal (strtod syntax, no hex or
 * infinities).  Returns the JSON value, or NULL after a message on stderr;
 * the route's own checks judge the range.
 */
static json_t *number_option(const char *cmd, const char *option, const char *text)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(text, &end);
	if (end == text || *end != '\0' || !isfinite(x) || errno == ERANGE ||
	    strpbrk(text, "xX") != NULL) {
		fprintf(stderr, "dpgate %s: --%s must be a finite number, not '%s'\n", cmd, option,
			text);
		return NULL;
	}
	return json_real(x);
}

static const struct {
	unsigned bit;
	const char *usage;
} option_usage[] = {
	{TAKES_DELTA, " [--delta X]"},
	{TAKES_EPSILON, " [--epsilon X]"},
	{TAKES_ACCOUNTANT, " [--accountant NAME]"},
	{TAKES_NEIGHBOR, " [--neighbor add_remove|replace]"},
};

static void print_stateless_usage(FILE *f, const cli_stateless_cmd *cmd)
{
	char options[128] = "";

	for (size_t i = 0; i < sizeof(option_usage) / sizeof(option_usage[0]); i++)
		if (cmd->takes & option_usage[i].bit)
			strcat(options, option_usage[i].usage);
	fprintf(f, usage_stateless, cmd->name, options, cmd->route, cmd->example, cmd->name);
}

/* Whether cmd takes option `bit`; otherwise says so on stderr. */
static bool takes_option(const cli_stateless_cmd *cmd, unsigned bit, const char *option)
{
	if (cmd->takes & bit)
		return true;
	fprintf(stderr, "dpgate %s: --%s does not apply: the body of POST %s has no '%s'\n",
		cmd->name, option, cmd->route, option);
	return false;
}

/* Number option `option` of cmd, given as text, into *slot (a later one
 * replaces an earlier); false, after a message, when cmd does not take
 * it or the text is not a finite number. */
static bool number_arg(const cli_stateless_cmd *cmd, unsigned bit, const char *option,
		       const char *text, json_t **slot)
{
	json_decref(*slot);
	*slot = NULL;
	if (!takes_option(cmd, bit, option))
		return false;
	*slot = number_option(cmd->name, option, text);
	return *slot != NULL;
}

/*
 * Reads the options of stateless command cmd into *o (numbers as new JSON
 * values, which the caller releases).  Returns -1 to go on, or the exit
 * status (after --help, or a message on stderr).
 */
static int parse_stateless_args(const cli_stateless_cmd *cmd, int argc, char **argv,
				struct stateless_opts *o)
{
	static const struct option opts[] = {
		{"delta", required_argument, NULL, 'd'},
		{"epsilon", required_argument, NULL, 'e'},
		{"accountant", required_argument, NULL, 'a'},
		{"neighbor", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (!number_arg(cmd, TAKES_DELTA, "delta", optarg, &o->delta))
				return 2;
			break;
		case 'e':
			if (!number_arg(cmd, TAKES_EPSILON, "epsilon", optarg, &o->epsilon))
				return 2;
			break;
		case 'a':
			if (!takes_option(cmd, TAKES_ACCOUNTANT, "accountant"))
				return 2;
			o->accountant = optarg;
			break;
		case 'n':
			if (!takes_option(cmd, TAKES_NEIGHBOR, "neighbor"))
				return 2;
			o->neighbor = optarg;
			break;
		case 'h': print_stateless_usage(stdout, cmd); return 0;
		default: print_stateless_usage(stderr, cmd); return 2;
		}
	}
	/* At most one FILE. */
	if (optind + 1 < argc) {
		fprintf(stderr, "dpgate %s: unexpected argument '%s'\n", cmd->name, argv[optind + 1]);
		print_stateless_usage(stderr, cmd);
		return 2;
	}
	return -1;
}

/* Options fill in missing keys of body; numbers are passed as JSON numbers. */
static void fill_from_options(json_t *body, const struct stateless_opts *o)
{
	if (o->delta && !json_object_get(body, "delta"))
		json_object_set(body, "delta", o->delta);
	if (o->epsilon && !json_object_get(body, "epsilon"))
		json_object_set(body, "epsilon", o->epsilon);
	if (o->accountant && !json_object_get(body, "accountant"))
		json_object_set_new(body, "accountant", json_string(o->accountant));
	if (o->neighbor && !json_object_get(body, "neighbor"))
		json_object_set_new(body, "neighbor", json_string(o->neighbor));
}

static void print_error(const char *name, const acct_error *err)
{
	fprintf(stderr, "dpgate %s: %s%s%s\n", name, err->text, err->where[0] ? " at " : "",
		err->where);
}

int cli_stateless_main(const cli_stateless_cmd *cmd, int argc, char **argv)
{
	struct stateless_opts o = {0};
	acct_error err;
	json_t *body = NULL, *answer = NULL;
	char *text;
	int rc;

	rc = parse_stateless_args(cmd, argc, argv, &o);
	if (rc >= 0)
		goto out;
	rc = 2;
	acct_error_init(&err);
	body = read_json_input(optind < argc ? argv[optind] : NULL, &err);
	if (!body) {
		print_error(cmd->name, &err);
		goto out;
	}
	fill_from_options(body, &o);
	rc = cmd->fn(body, &answer, &err);
	if (rc < 0 || !answer) {
		print_error(cmd->name, &err);
		rc = err.code == ACCT_EINVAL ? 2 : 1;
		goto out;
	}
	text = srv_json_dump(answer);
	if (text)
		printf("%s\n", text);
	free(text);
	rc = 0;
out:
	json_decref(answer);
	json_decref(body);
	json_decref(o.delta);
	json_decref(o.epsilon);
	return rc;
}
