/*
 * pg_cluster.h: a throwaway PostgreSQL cluster for tests and benchmarks.
 *
 * A test that needs PostgreSQL makes its own cluster: a fresh directory,
 * `initdb` with trust authentication on loopback only and a fixed
 * superuser (PGC_SUPERUSER), a `postgres` listening on 127.0.0.1 at a free
 * port with its socket in that directory, and one fresh database per test
 * (pgc_new_database).  It can be stopped (fast or immediate, as a crash
 * would) and started again on the same port and data, and it is removed
 * whole at the end.
 *
 * Nothing is left behind when the test fails: pgc_cluster_new forks a
 * small reaper in its own session that waits on a pipe from the creating
 * process; if that process ends without pgc_cluster_free (an assertion, an
 * abort, kill -9, a meson timeout), the reaper stops the server at once
 * and removes the directory.  The server itself runs in its own session so
 * that a signal meant for the test's process group never half-kills it.
 *
 * PostgreSQL refuses to run as root.  When the effective uid is 0 (CI),
 * initdb and postgres run as the unprivileged user PGC_RUN_AS_USER, and
 * the directory is handed to that user.
 *
 * The server binaries are found in $DPGATE_PG_BINDIR if set, else in
 * Debian's /usr/lib/postgresql/<major>/bin (the highest major), else in
 * `pg_config --bindir`.
 *
 * Like the libraries, the harness never prints: every function returns
 * PGC_OK or a negative enum pgc_status and fills a caller-owned pgc_error
 * with what failed (the tail of the server's log where it helps).
 */
#ifndef DPGATE_PG_CLUSTER_H
#define DPGATE_PG_CLUSTER_H

#include <stddef.h>

/* The superuser initdb creates; every URL names it. */
#define PGC_SUPERUSER "dpgate"
/* Who runs initdb and postgres when the caller is root. */
#define PGC_RUN_AS_USER "nobody"
/* Room for the message of a pgc_error. */
#define PGC_ERROR_TEXT 512
/* Room for a URL from pgc_new_database or pgc_url, terminator included. */
#define PGC_URL_MAX 256
/* Bounds on waiting: initdb, a start until connections are accepted, and
 * a stop (after which a fast stop becomes immediate, then SIGKILL). */
#define PGC_INITDB_TIMEOUT_MS 120000
#define PGC_START_TIMEOUT_MS 60000
#define PGC_STOP_TIMEOUT_MS 30000
/* Connections the server accepts: three dpgate servers with their pools
 * and 64 bench clients fit in it. */
#define PGC_MAX_CONNECTIONS 400

enum pgc_status {
	PGC_OK = 0,
	PGC_E_ARG = -1,        /* a bad argument or a directory not ours */
	PGC_E_NO_SERVER = -2,  /* no PostgreSQL server binaries found */
	PGC_E_SYSTEM = -3,     /* a system call failed (errno in the text) */
	PGC_E_INITDB = -4,     /* initdb failed */
	PGC_E_START = -5,      /* postgres exited or never accepted connections */
	PGC_E_SQL = -6,        /* a statement of the harness failed */
	PGC_E_STOP = -7,       /* the server did not stop in time */
	PGC_E_STATE = -8,      /* started when running, or stopped when stopped */
};

struct pgc_error {
	int code;
	char text[PGC_ERROR_TEXT];
};

enum pgc_stop_mode {
	PGC_STOP_FAST,       /* SIGINT: roll back sessions, checkpoint, exit */
	PGC_STOP_IMMEDIATE,  /* SIGQUIT: exit at once, crash recovery on start */
};

/* Flags of pgc_cluster_new. */
enum {
	/* No reaper: the cluster outlives the calling process and is removed
	 * by pgc_cluster_remove from another one (the pgc command). */
	PGC_KEEP = 1,
};

struct pgc_cluster;

/*
 * Makes a cluster and starts it.  DIR NULL makes a fresh directory under
 * $TMPDIR (or /tmp; always /tmp for root, so that the unprivileged user
 * can reach it); otherwise DIR is made and must not exist yet.  On success
 * *ret holds a running cluster that the caller ends with
 * pgc_cluster_free; on failure nothing is left behind and *ret is
 * untouched.
 */
int pgc_cluster_new(const char *dir, int flags, struct pgc_cluster **ret,
		    struct pgc_error *err);

/*
 * Attaches to a cluster that pgc_cluster_new made with PGC_KEEP in DIR
 * (running or stopped).  The handle does not own it: pgc_cluster_free only
 * frees the handle, and pgc_cluster_remove ends the cluster.
 */
int pgc_cluster_attach(const char *dir, struct pgc_cluster **ret,
		       struct pgc_error *err);

/*
 * Creates a fresh, empty database (a name unique in the cluster) and
 * writes its URL, postgresql://PGC_SUPERUSER@127.0.0.1:PORT/NAME, to
 * URL (CAP bytes, PGC_URL_MAX is enough).  The cluster must be running.
 */
int pgc_new_database(struct pgc_cluster *c, char *url, size_t cap,
		     struct pgc_error *err);

/* Writes the URL of the existing database DBNAME (e.g. "postgres"). */
int pgc_url(const struct pgc_cluster *c, const char *dbname, char *url,
	    size_t cap, struct pgc_error *err);

/*
 * Stops the server and waits until it has exited and released its port
 * (bounded by PGC_STOP_TIMEOUT_MS; a fast stop that overruns is made
 * immediate, then killed, and reported as PGC_E_STOP).
 */
int pgc_stop(struct pgc_cluster *c, enum pgc_stop_mode mode,
	     struct pgc_error *err);

/*
 * Starts the stopped server again on the same port and data, and waits
 * until it accepts connections (bounded by PGC_START_TIMEOUT_MS; an
 * immediate stop before it means crash recovery first).
 */
int pgc_start(struct pgc_cluster *c, struct pgc_error *err);

/* Whether the server is running (its postmaster alive). */
int pgc_is_running(const struct pgc_cluster *c);

/* The loopback port and the directory of the cluster. */
int pgc_port(const struct pgc_cluster *c);
const char *pgc_dir(const struct pgc_cluster *c);

/*
 * Stops the server (fast, then immediate if it overruns) and removes the
 * directory with everything in it.  The handle stays valid for
 * pgc_cluster_free only.
 */
int pgc_cluster_remove(struct pgc_cluster *c, struct pgc_error *err);

/*
 * Ends the handle.  A cluster this process made without PGC_KEEP is
 * stopped at once and removed, and its reaper dismissed; an attached or
 * kept one is left as it is.  Accepts NULL.
 */
void pgc_cluster_free(struct pgc_cluster *c);

#endif
