/*
 * cli/cli_backup.c: `dpgate backup --db FILE --to OUT`, a consistent copy of a
 * database, also while a server runs on it, that never replaces a file and
 * leaves nothing behind when it fails.
 */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char usage_backup[] =
	"usage: dpgate backup --db FILE --to OUT\n"
	"\n"
	"Writes a consistent copy of the dpgate database FILE to the new file OUT,\n"
	"also while a server runs on FILE: the copy holds every transaction committed\n"
	"before it began (every charge already answered) and none after. OUT must not\n"
	"exist; the copy is written beside it under a temporary name (mode 0600),\n"
	"synced, replayed as `dpgate verify` does, and only then named OUT. Table\n"
	"files in the server's data directory are not copied. Prints a JSON report;\n"
	"exit 0 when the copy is in place and its ledger verifies (or its schema is\n"
	"another dpgate version's, which this one does not replay), 1 when it is in\n"
	"place but its ledger does not verify (the source's would not either), 2 on\n"
	"errors, when nothing is left behind.\n";

/* The directory part of path ("." when it has none), in buf. */
static void dir_of(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, size, ".");
	else if (slash == path)
		snprintf(buf, size, "/");
	else
		snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

/*
 * Gives the finished copy tmp the name out without ever replacing a file
 * that appeared there meanwhile: renameat2 with RENAME_NOREPLACE, or, where
 * the filesystem lacks it, a hard link (which fails on an existing name)
 * and the temporary name removed.  0, or -1 with errno set.
 */
static int name_without_replacing(const char *tmp, const char *out)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(tmp, out) < 0)
		return -1;
	unlink(tmp);
	return 0;
}

/*
 * Reads --db and --to into *ret_db and *ret_out.  Returns -1 to go on, or
 * the exit status (after --help, or a message on stderr).
 */
static int parse_backup_args(int argc, char **argv, const char **ret_db, const char **ret_out)
{
	static const char *const names[] = {"db", "to"};
	const char **const values[] = {ret_db, ret_out};
	int rc = cli_args_strings(argc, argv, names, values, 2, usage_backup);

	if (rc >= 0)
		return rc;
	if (!cli_args_complete("backup", *ret_db && *ret_out, optind, argc, argv, usage_backup))
		return 2;
	return -1;
}

/*
 * Checks that out_path names a file that does not exist yet, and puts its
 * directory in dir (PATH_MAX bytes) and a new temporary file's name beside
 * it in tmp (tmp_size bytes).  Returns the temporary file's descriptor
 * (mode 0600), or -1 after a message on stderr.
 */
static int make_partial(const char *out_path, char *dir, char *tmp, size_t tmp_size)
{
	const char *base;
	struct stat st;
	int fd;

	if (lstat(out_path, &st) == 0) {
		fprintf(stderr, "dpgate backup: %s exists; a backup never replaces a file\n",
			out_path);
		return -1;
	}
	if (errno != ENOENT) {
		fprintf(stderr, "dpgate backup: %s: %s\n", out_path, strerror(errno));
		return -1;
	}
	base = strrchr(out_path, '/') ? strrchr(out_path, '/') + 1 : out_path;
	if (!*base || strlen(out_path) >= PATH_MAX) {
		fprintf(stderr, "dpgate backup: --to must name a file\n");
		return -1;
	}
	dir_of(out_path, dir, PATH_MAX);
	snprintf(tmp, tmp_size, "%s/.%s.partial-XXXXXX", dir, base);
	fd = mkstemp(tmp); /* mode 0600: the copy holds the ledger and key hashes */
	if (fd < 0)
		fprintf(stderr, "dpgate backup: cannot create a file in %s: %s\n", dir,
			strerror(errno));
	return fd;
}

/*
 * The report on the synced copy tmp of db_path (bytes long, at schema
 * `version`), with its ledger replayed when the schema is this dpgate's
 * (`current`); *ret_agrees says whether the replay found every dataset
 * agreeing.  Returns the report, or NULL after a message on stderr.
 */
static json_t *backup_report(const char *db_path, const char *out_path, const char *tmp,
			     long long bytes, int64_t version, bool current, bool *ret_agrees)
{
	json_t *report = NULL, *out;
	char note[512];

	if (current) {
		/* The copy is a plain (rollback-journal) file: opened read-only
		 * it gains no side files. */
		if (cli_verify_file("backup", tmp, &report, ret_agrees) < 0)
			return NULL;
		out = json_pack("{s:s, s:s, s:I, s:I, s:o}", "backup", out_path, "source", db_path,
				"bytes", (json_int_t)bytes, "schema_version", (json_int_t)version,
				"verify", report);
	} else {
		/* Another dpgate version's schema (a backup before an upgrade):
		 * copied as it is, not replayed by this binary. */
		*ret_agrees = true;
		snprintf(note, sizeof(note),
			 "schema version %lld is not this dpgate's (%ld): copied, not replayed",
			 (long long)version, srv_store_known_schema_version());
		out = json_pack("{s:s, s:s, s:I, s:I, s:n, s:s}", "backup", out_path, "source",
				db_path, "bytes", (json_int_t)bytes, "schema_version",
				(json_int_t)version, "verify", "note", note);
	}
	if (!out)
		fprintf(stderr, "dpgate backup: out of memory\n");
	return out;
}

/* The copy's temporary file and the side files SQLite may give it, which a
 * backup stopped by a signal (^C, a cron timeout) removes before it ends. */
static char partial[3][PATH_MAX + 80];
static volatile sig_atomic_t partial_set;
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void stop_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaddset(set, stop_signals[i]);
}

/* Removes the partial files and ends the process with the signal: the
 * signal, raised again with its default action, is held until the handler
 * returns, so errno is put back for the code it interrupted meanwhile. */
static void drop_partial(int sig)
{
	int saved = errno;
	struct sigaction dfl;

	if (partial_set)
		for (int i = 0; i < 3; i++)
			unlink(partial[i]);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	raise(sig);
	errno = saved;
}

/* Sets (tmp) or clears (NULL) what a stop signal removes, with the
 * signals held meanwhile so that the handler never sees half a name. */
static void set_partial(const char *tmp)
{
	sigset_t stop, old;

	stop_set(&stop);
	sigprocmask(SIG_BLOCK, &stop, &old);
	partial_set = 0;
	if (tmp) {
		snprintf(partial[0], sizeof(partial[0]), "%s", tmp);
		snprintf(partial[1], sizeof(partial[1]), "%s-journal", tmp);
		snprintf(partial[2], sizeof(partial[2]), "%s-wal", tmp);
		partial_set = 1;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* make_partial with the stop signals set to remove what it made. */
static int make_partial_dropped_on_stop(const char *out_path, char *dir, char *tmp,
					size_t tmp_size)
{
	struct sigaction drop;
	sigset_t stop, old;
	int fd;

	memset(&drop, 0, sizeof(drop));
	drop.sa_handler = drop_partial;
	stop_set(&stop);
	drop.sa_mask = stop;
	/* Held from before the file exists until its name is set. */
	sigprocmask(SIG_BLOCK, &stop, &old);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaction(stop_signals[i], &drop, NULL);
	fd = make_partial(out_path, dir, tmp, tmp_size);
	if (fd >= 0)
		set_partial(tmp);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return fd;
}

/*
 * Names the synced copy tmp out_path and syncs its directory dir.  Returns
 * 0; or -1 after a message on stderr, when no file is left at out_path
 * (tmp may remain: *ret_named says whether it was renamed).
 */
static int publish(const char *tmp, const char *out_path, const char *dir, bool *ret_named)
{
	if (name_without_replacing(tmp, out_path) < 0) {
		fprintf(stderr, "dpgate backup: cannot name the copy %s: %s\n", out_path,
			errno == EEXIST ? "a file of that name appeared meanwhile" : strerror(errno));
		return -1;
	}
	*ret_named = true;
	if (srv_fsync_dir(dir) < 0) {
		/* The name may not survive a crash: no copy rather than one
		 * that might vanish. */
		fprintf(stderr, "dpgate backup: cannot sync %s: %s\n", dir, strerror(errno));
		unlink(out_path);
		return -1;
	}
	return 0;
}

int cli_backup_main(int argc, char **argv)
{
	const char *db_path = NULL, *out_path = NULL;
	char dir[PATH_MAX], tmp[PATH_MAX + 64];
	srv_error err;
	json_t *out = NULL;
	struct stat st;
	int64_t version = 0;
	bool current = false, named = false;
	bool agrees = true;
	int fd, rc;

	rc = parse_backup_args(argc, argv, &db_path, &out_path);
	if (rc >= 0)
		return rc;
	if (!cli_db_exists("backup", db_path))
		return 2;
	fd = make_partial_dropped_on_stop(out_path, dir, tmp, sizeof(tmp));
	if (fd < 0)
		return 2;
	rc = 2;
	srv_error_init(&err);
	if (srv_store_backup(db_path, tmp, &version, &current, &err) < 0) {
		fprintf(stderr, "dpgate backup: %s\n", err.text);
		goto out;
	}
	if (fsync(fd) < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "dpgate backup: cannot sync %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	out = backup_report(db_path, out_path, tmp, (long long)st.st_size, version, current, &agrees);
	if (!out || publish(tmp, out_path, dir, &named) < 0)
		goto out;
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	printf("\n");
	rc = agrees ? 0 : 1;
out:
	close(fd);
	if (rc == 2 && !named)
		unlink(tmp);
	set_partial(NULL);
	json_decref(out);
	return rc;
}
