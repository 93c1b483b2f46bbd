/*
 * cli/cli_keys.c: `dpgate keys create|list|revoke --db FILE ...`, the way to
 * the first admin key, which no HTTP route can make.
 */
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "api.h"
#include "cli.h"

static const char usage_keys[] =
	"usage: dpgate keys create --db FILE --role admin|analyst|viewer [--datasets a,b] [--note TEXT] [--if-none]\n"
	"       dpgate keys list   --db FILE\n"
	"       dpgate keys revoke --db FILE KEY_ID\n"
	"\n"
	"create prints the new key alone on the last line of stdout; it is shown only\n"
	"once (the database keeps a SHA-256 hash). --if-none creates a key only when\n"
	"no unrevoked key of that role exists (and then prints nothing). create makes\n"
	"the database if there is none; list and revoke need an existing one (exit 2).\n"
	"A file that is not a dpgate database is refused (exit 2) and left as it was.\n"
	"create and revoke are recorded with the login name that ran them (\"cli:NAME\"),\n"
	"readable by admins at GET /v1/audit/keys.\n";

/* A keys command line: the subcommand and its options. */
struct keys_args {
	const char *sub, *db_path, *role_name, *datasets, *note;
	bool if_none;
	int first; /* argv index of the first positional argument */
};

/* Who runs a `dpgate keys` command, as the key audit rows name it:
 * "cli:<login name>", or "cli:uid=<n>" when the uid has no passwd entry. */
static void keys_actor(char *buf, size_t size)
{
	struct passwd *pw = getpwuid(geteuid());

	if (pw && pw->pw_name && pw->pw_name[0])
		snprintf(buf, size, "cli:%s", pw->pw_name);
	else
		snprintf(buf, size, "cli:uid=%lu", (unsigned long)geteuid());
}

/*
 * Reads the subcommand and options into *a.  Returns -1 to go on, or the
 * exit status (after --help, or a message on stderr).
 */
static int parse_keys_args(int argc, char **argv, struct keys_args *a)
{
	static const struct option opts[] = {
		{"db", required_argument, NULL, 'd'},
		{"role", required_argument, NULL, 'r'},
		{"datasets", required_argument, NULL, 's'},
		{"note", required_argument, NULL, 'n'},
		{"if-none", no_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	if (cli_args_wants_help(argc, argv)) {
		fputs(usage_keys, stdout);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "dpgate keys: name a subcommand: create, list or revoke\n%s",
			usage_keys);
		return 2;
	}
	a->sub = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': a->db_path = optarg; break;
		case 'r': a->role_name = optarg; break;
		case 's': a->datasets = optarg; break;
		case 'n': a->note = optarg; break;
		case 'i': a->if_none = true; break;
		default: fputs(usage_keys, stderr); return 2;
		}
	}
	a->first = optind;
	if (!a->db_path) {
		fprintf(stderr, "dpgate keys: --db FILE is required\n");
		return 2;
	}
	if (strcmp(a->sub, "create") != 0 && strcmp(a->sub, "list") != 0 &&
	    strcmp(a->sub, "revoke") != 0) {
		fprintf(stderr, "dpgate keys: unknown subcommand '%s': create, list or revoke\n%s",
			a->sub, usage_keys);
		return 2;
	}
	/* revoke takes KEY_ID; nothing else takes a positional argument. */
	if (!cli_args_no_stray("keys", optind + (strcmp(a->sub, "revoke") == 0), argc, argv,
			       usage_keys))
		return 2;
	return -1;
}

/* --datasets "a,b" as the array ["a", "b"], every comma a separator: an
 * empty entry ("a,,b", "a,") stays, for srv_keys_check to refuse as
 * POST /v1/keys refuses "". */
static json_t *scope_from_list(const char *list)
{
	json_t *scope = json_array();
	const char *t = list, *end;

	for (; scope; t = end + 1) {
		end = strchr(t, ',');
		/* Unchecked: srv_keys_check refuses any byte outside an id's
		 * characters, invalid UTF-8 included, before it is used. */
		if (json_array_append_new(scope, json_stringn_nocheck(t, end ? (size_t)(end - t) :
									  strlen(t))) < 0) {
			json_decref(scope);
			return NULL;
		}
		if (!end)
			break;
	}
	return scope;
}

/*
 * create's checks, those of POST /v1/keys, before the database is opened
 * or made: the role into *ret_role and --datasets into *ret_scope (a new
 * array, or NULL for no scope at all, as an absent "datasets").  Returns
 * -1 to go on, or the exit status after a message on stderr.
 */
static int check_create(const struct keys_args *a, srv_role *ret_role, json_t **ret_scope)
{
	acct_error err;

	if (!a->role_name || srv_role_from_name(a->role_name, ret_role) < 0) {
		fprintf(stderr, "dpgate keys create: --role must be admin, analyst or viewer\n");
		return 2;
	}
	if (a->datasets) {
		/* An empty list would make a viewer of every dataset: most often
		 * an unset shell variable, so only the option's absence says so. */
		if (!*a->datasets) {
			fprintf(stderr, "dpgate keys create: --datasets lists no dataset id (leave "
					"it out for a viewer of every dataset)\n");
			return 2;
		}
		*ret_scope = scope_from_list(a->datasets);
		if (!*ret_scope)
			return 1;
	}
	acct_error_init(&err);
	if (srv_keys_check(*ret_role, *ret_scope, a->note, &err) < 0) {
		fprintf(stderr, "dpgate keys create: %s: %s\n",
			strcmp(err.where, "/note") == 0 ? "--note" : "--datasets", err.text);
		return 2;
	}
	return -1;
}

/* keys create on the open database: prints the new key.  Exit status. */
static int keys_create(srv_db *db, const struct keys_args *a, srv_role role, const json_t *scope,
		       const char *actor)
{
	char key_text[SRV_KEY_TEXT_BYTES], key_id[2 * SRV_KEY_ID_BYTES + 1];
	char *scope_text;
	int64_t existing = 0;
	int made;

	if (a->if_none && srv_keys_count(db, role, &existing) == SRV_OK && existing > 0) {
		fprintf(stderr,
			"dpgate keys create: an unrevoked %s key exists already; none created\n",
			a->role_name);
		return 0;
	}
	scope_text = srv_keys_scope_text(scope);
	made = scope_text ? srv_keys_create(db, role, scope_text, a->note, actor, key_text, key_id) :
			    SRV_DB_ERROR;
	free(scope_text);
	if (made != SRV_OK) {
		fprintf(stderr, "dpgate keys create: %s\n",
			made == SRV_NO_RANDOM ? "no secure randomness is available" :
						"cannot write the key");
		return 1;
	}
	fprintf(stderr, "dpgate: created %s key %s; it is shown once:\n", a->role_name, key_id);
	printf("%s\n", key_text);
	sodium_memzero(key_text, sizeof(key_text));
	return 0;
}

/* keys list: every key as JSON.  Exit status. */
static int keys_list(srv_db *db)
{
	json_t *arr = NULL;

	if (srv_keys_json(db, &arr) != SRV_OK)
		return 1;
	json_dumpf(arr, stdout, JSON_INDENT(2));
	printf("\n");
	json_decref(arr);
	return 0;
}

/* keys revoke KEY_ID (argv[first], if any).  Exit status. */
static int keys_revoke(srv_db *db, const struct keys_args *a, int argc, char **argv,
		       const char *actor)
{
	int rc;

	if (a->first >= argc) {
		fprintf(stderr, "dpgate keys revoke: KEY_ID is required\n");
		return 2;
	}
	rc = srv_keys_revoke(db, argv[a->first], actor);
	if (rc == SRV_NOT_FOUND) {
		fprintf(stderr, "dpgate keys revoke: no such key\n");
	} else if (rc == SRV_OK) {
		/* Running servers flush their key caches on this (servers on a
		 * shared database keep no key cache). */
		if (!srv_store_is_shared(a->db_path) &&
		    srv_keys_touch_stamp(srv_store_file(a->db_path)) < 0)
			fprintf(stderr, "dpgate keys revoke: cannot write %s-keys; restart running "
					"servers for the revocation to take effect\n", a->db_path);
		printf("revoked %s\n", argv[a->first]);
	}
	return rc == SRV_OK ? 0 : 1;
}

int cli_keys_main(int argc, char **argv)
{
	struct keys_args a = {0};
	srv_store *store = NULL;
	srv_db *db = NULL;
	json_t *scope = NULL;
	srv_role role = SRV_ROLE_NONE;
	char actor[SRV_ACTOR_BYTES];
	int rc;

	rc = parse_keys_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (strcmp(a.sub, "create") == 0) {
		rc = check_create(&a, &role, &scope);
		if (rc >= 0)
			goto out;
	} else if (!cli_db_exists("keys", a.db_path)) {
		return 2;
	}
	if (!cli_db_not_migrated_under_a_server("keys", a.db_path)) {
		rc = 1;
		goto out;
	}
	rc = cli_db_open("keys", a.db_path, 1, &store);
	if (rc != 0)
		goto out;
	db = srv_store_acquire(store);
	keys_actor(actor, sizeof(actor));
	if (strcmp(a.sub, "create") == 0)
		rc = keys_create(db, &a, role, scope, actor);
	else if (strcmp(a.sub, "list") == 0)
		rc = keys_list(db);
	else
		rc = keys_revoke(db, &a, argc, argv, actor);
out:
	json_decref(scope);
	srv_store_release(store, db);
	cli_db_close(a.db_path, store);
	return rc;
}
