/*
 * harness.h: start the real dpgate binary on a free loopback port with a
 * temporary database, and talk to it over HTTP with libcurl.
 */
#ifndef HARNESS_H
#define HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

typedef struct dpg_server {
	pid_t pid;
	int port;
	char dir[256];
	char db[320];
	char log[320];
	char admin_key[160];
	unsigned threads;    /* --threads for the next (re)start; 0 = 8 */
	const char *body_timeout_s; /* --body-timeout for the next (re)start; NULL = the default */
	const char *const *serve_args; /* more serve arguments (NULL-terminated, at most 8) for
					* the next (re)start, or NULL */
	const char *const *env; /* "NAME=value" set in the server's environment, or NULL */
} dpg_server;

typedef struct dpg_resp {
	long status;
	char *body;          /* NUL-terminated, caller frees via dpg_resp_free */
	size_t len;
	json_t *json;        /* parsed body, or NULL */
	char content_type[96];
	long long content_length; /* the Content-Length header, -1 when absent */
	long long retry_after;    /* the Retry-After header in seconds, 0 when absent */
	char etag[96];            /* the ETag header, "" when absent */
	char location[256];       /* the Location header, "" when absent */
} dpg_resp;

/*
 * The PostgreSQL server the suite runs on instead of SQLite files: the URL
 * in $DPGATE_TEST_DB (postgresql://... of an existing database, whose
 * user may create databases), or NULL.  With it, every server a test
 * starts gets a fresh database of its own (dpg_new_database), dropped by
 * dpg_server_destroy.
 */
const char *dpg_test_pg(void);

/* Skips the running test when the suite runs on PostgreSQL: for a test of
 * what only an SQLite file has (its WAL, its links, a write to it behind the
 * server's back); `why` says which. */
void dpg_skip_on_pg(const char *why);

/* Starts a server in a fresh directory of its own on the existing database
 * `db` (a path or a PostgreSQL URL another server may use too), with an
 * admin key of its own; fails the test when it cannot. */
void dpg_server_start_on(dpg_server *s, const char *db);

/* As dpg_server_start_on, with `env` and `serve_args` (as the fields of
 * those names; NULL: none) at this and every restart. */
void dpg_server_start_on_with(dpg_server *s, const char *db, const char *const *env,
			      const char *const *serve_args);

/* Creates a fresh, empty database on $DPGATE_TEST_DB's server and writes
 * its URL into out (size bytes); fails the test when it cannot. */
void dpg_new_database(char *out, size_t size);

/* The dpgate binary under test ($DPGATE_BIN). */
const char *dpg_bin(void);

/* Makes a temp dir, creates an admin key and starts `dpgate serve` on port 0;
 * waits for /healthz.  Aborts the test on failure. */
void dpg_server_start(dpg_server *s);

/* As dpg_server_start, with `env` ("NAME=value", NULL-terminated) added to
 * the server's environment at this and every restart. */
void dpg_server_start_env(dpg_server *s, const char *const *env);

/* As dpg_server_start_env, with --threads `threads` (0: 8) at this and
 * every restart. */
void dpg_server_start_with(dpg_server *s, const char *const *env, unsigned threads);

/* The environment lines that preload a shared object into the server: put
 * `preload` and `asan` in the env given to dpg_server_start_env/_with. */
typedef struct dpg_preload {
	char preload[512]; /* LD_PRELOAD=shim */
	char asan[1024];   /* ASAN_OPTIONS as the tests run with, plus
			    * verify_asan_link_order=0: in the sanitizer build
			    * the shim comes before the ASan runtime */
} dpg_preload;

void dpg_preload_init(dpg_preload *p, const char *shim);

/* Switch files one shim reads at the most (fail_storage.c reads two). */
#define DPG_SHIM_MAX_SWITCHES 2

/* One switch of a shim: the variable that names its file to the shim
 * (DPGATE_TEST_NO_RANDOM) and the file's name in the switch dir. */
typedef struct dpg_shim_switch {
	const char *var, *name;
} dpg_shim_switch;

/*
 * What a server with a fault shim preloaded needs beside its dpg_server:
 * a temp dir for the switch files, their paths (file[i] for switches[i];
 * dpg_switch_file turns one on and off) and the environment that names
 * them, with the preload lines, to the server (env, NULL-terminated; also
 * what a CLI run next to the server must carry).
 */
typedef struct dpg_shim_env {
	char dir[64];
	char file[DPG_SHIM_MAX_SWITCHES][128];
	char var[DPG_SHIM_MAX_SWITCHES][200];
	dpg_preload preload;
	const char *env[DPG_SHIM_MAX_SWITCHES + 3];
} dpg_shim_env;

/* Makes the switch dir under /tmp (its name starting with `tag`), fills
 * `e` for the n switches (all off) and starts `srv` with shim preloaded.
 * `e` must outlive the server: restarts read e->env again. */
void dpg_shim_server_start(dpg_server *srv, dpg_shim_env *e, const char *tag, const char *shim,
			   const dpg_shim_switch *switches, size_t n);

/* Stops `srv` and removes the switch files and their dir. */
void dpg_shim_server_stop(dpg_server *srv, dpg_shim_env *e);

/* Seconds on the monotonic clock, for timing steps of a test. */
double dpg_now_s(void);

/* How much slower the server under test is: DPGATE_TEST_TIME_SCALE (1 to
 * 100) for a sanitizer build, 1 otherwise.  Time bounds stretch by it. */
double dpg_time_scale(void);

/* Whether s answers GET /healthz with 200 (its database takes queries)
 * within timeout_s, asking every 10 ms. */
bool dpg_healthy_within(const dpg_server *s, double timeout_s);

/* Starts the server again on the same database (after a stop or a kill). */
void dpg_server_restart(dpg_server *s);

/* Sends `sig` and waits for the process; returns its exit status (or 128+sig
 * when killed by a signal). */
int dpg_server_signal(dpg_server *s, int sig);

/* Stops the server (SIGTERM) and removes the temp dir. */
void dpg_server_destroy(dpg_server *s);

/*
 * One HTTP request.  `key` may be NULL (no Authorization), `body` may be NULL,
 * `headers` is a NULL-terminated list of extra "Name: value" lines (or NULL).
 * Returns 0 when an answer arrived (any status), -1 on transport failure.
 */
int dpg_http(const dpg_server *s, const char *method, const char *path, const char *key,
	     const char *body, size_t body_len, const char *const *headers, dpg_resp *ret);

/* How dpg_http_opt sends a request. */
typedef struct dpg_http_opts {
	long timeout_s;   /* limit on the whole exchange; 0 = 60 s (both times
			   * DPGATE_TEST_TIME_SCALE when set) */
	bool path_as_is;  /* send "." and ".." segments as written (libcurl removes them) */
} dpg_http_opts;

/* As dpg_http, with `opts` (NULL = the defaults above); a request that
 * outlasts the time limit is a transport failure (-1). */
int dpg_http_opt(const dpg_server *s, const dpg_http_opts *opts, const char *method,
		 const char *path, const char *key, const char *body, size_t body_len,
		 const char *const *headers, dpg_resp *ret);
void dpg_resp_free(dpg_resp *r);

/* Convenience: request with a JSON body string; asserts a transport answer. */
dpg_resp dpg_call(const dpg_server *s, const char *method, const char *path, const char *key,
		  const char *json_body);

/* Convenience: dpg_call, then asserts the answer's status (its body in the
 * message) and frees the answer. */
void dpg_expect_status(const dpg_server *s, const char *method, const char *path,
		       const char *key, const char *json_body, long status);

/* Runs `dpgate` with arguments (NULL-terminated), capturing stdout (its
 * first out_size - 1 bytes; the rest is read and dropped); returns the exit
 * status. */
int dpg_run(char *out, size_t out_size, const char *const *argv);

/* dpg_run with `setup` (when not NULL) called in the child before the
 * exec, which it may end with _exit(status) (a user to become, say). */
int dpg_run_with(char *out, size_t out_size, const char *const *argv, void (*setup)(void));

/* Checks a response body against the schema the spec gives that operation's
 * response (tests/server/check_response.py, JSON Schema 2020-12, where a
 * oneOf must match exactly one alternative): fails the test when it does
 * not fit, skips it when PyYAML or jsonschema is missing.  `spec_path` is
 * the spec's path template, e.g. "/v1/keys/{id}". */
void dpg_assert_in_spec(const dpg_server *s, const char *method, const char *spec_path,
			const char *status, const char *media, const char *body);

/* Two dpsgd jobs on Fashion-MNIST: ten steps of logistic regression
 * (seconds), and an MLP of 50 epochs that runs for minutes, for tests that
 * need a job to be running. */
extern const char dpg_fm_small_job[], dpg_fm_long_job[];

/* Renames server s's SQLite database and its -wal and -shm files from the
 * name `from` to `to` (each "" for the database's own path). */
void dpg_move_database(const dpg_server *s, const char *from, const char *to);

/* Creates a key through the CLI on the server's database. */
void dpg_make_key(const dpg_server *s, const char *role, const char *datasets, char *key,
		  size_t key_size);

/* The public id of a key "dpg_<id>_<secret>", copied into buf (size
 * bytes); fails the test on a key of another shape.  Returns buf. */
const char *dpg_key_id(const char *key, char *buf, size_t size);

/* Revokes the key with public id `id` through the CLI (`dpgate keys
 * revoke --db DB ID`, the server running or not); asserts exit 0. */
void dpg_revoke_key_cli(const char *db, const char *id);

/* Creates a dataset with the admin key; asserts 201. */
void dpg_make_dataset(const dpg_server *s, const char *id, double epsilon, double delta,
		      const char *accountant);

/* Reads a number at a path like "budget.spent.epsilon" of a JSON object. */
double dpg_num(const json_t *j, const char *dotted);

/* What a dataset's budget and ledger say, to compare before and after. */
typedef struct dpg_budget {
	double spent_eps, spent_delta;
	long charges;
	size_t ledger_rows;  /* entries of the ledger's first page of 1000 */
} dpg_budget;

/* Uploads tests/data/iris.csv (150 rows: four measurements and the
 * species) as dataset `id`'s hosted table, its first line replaced by
 * `header`; asserts 200 and 150 rows. */
void dpg_upload_iris(const dpg_server *s, const char *id, const char *header);

/* PUTs `len` bytes of CSV as dataset `id`'s hosted table with the admin
 * key, its column kinds declared (?columns=) as the test wrote them (a
 * column numeric when every cell is a finite number) and its row count
 * declared public; asserts 200 and returns the number of rows the answer
 * states. */
long dpg_upload_csv(const dpg_server *s, const char *id, const char *csv, size_t len);

/* dpg_upload_csv with the row count kept private. */
long dpg_upload_csv_private_count(const dpg_server *s, const char *id, const char *csv,
				  size_t len);

/* POSTs the job request `body` on dataset `id` with the admin key, asserts
 * 202 and copies the new job's id into job_id (size bytes); returns the
 * answer (the caller frees it). */
dpg_resp dpg_submit_job(const dpg_server *s, const char *id, const char *body, char *job_id,
			size_t size);

/* dpg_submit_job for a caller that needs only the job's id: asserts 202,
 * copies the id into job_id (size bytes) and frees the answer. */
void dpg_start_job(const dpg_server *s, const char *id, const char *body, char *job_id,
		   size_t size);

/* The whole content of the file at `path`, NUL-terminated (the caller
 * frees it); *ret_len, when not NULL, gets its length.  Fails the test when
 * the file cannot be read. */
char *dpg_read_file(const char *path, size_t *ret_len);

/* Writes `len` bytes of `data` to `path` (created or truncated); asserts. */
void dpg_write_file(const char *path, const void *data, size_t len);

/* Saves finished job `job_id`'s model (GET /v1/jobs/{id}/model, the
 * binary file `dpgate predict --model` reads) at `path`. */
void dpg_save_model(const dpg_server *s, const char *job_id, const char *path);

/* How many lines of the server's JSON log have a "msg" starting with
 * `prefix` (and, with with_code, an integer "code"); with a "msg" equal to
 * `msg`. */
int dpg_log_lines(const dpg_server *s, const char *prefix, bool with_code);
int dpg_log_lines_equal(const dpg_server *s, const char *msg);

/* GETs `path` with the admin key, asserts 200, and returns the length of
 * the array at the answer's top-level `field` (asserted to be one). */
size_t dpg_count_listed(const dpg_server *s, const char *path, const char *field);

/* Every entry of a paged listing, oldest first (the caller decrefs the
 * array): GETs `path` (which holds its query, "limit=" included), then
 * `path` with "&after=NEXT" appended for each page's "next" (an integer or
 * a string) until it is null, with the admin key; asserts 200 on each page,
 * and fails the test when the listing has not ended after max_pages pages. */
json_t *dpg_list_all(const dpg_server *s, const char *path, int max_pages);
/* As dpg_list_all, for a listing whose rows are at `field` (e.g.
 * "reservations") rather than at "entries". */
json_t *dpg_list_all_of(const dpg_server *s, const char *path, const char *field, int max_pages);

/* GETs `path` with the admin key and expects a 400 naming `field`. */
void dpg_expect_bad_query(const dpg_server *s, const char *path, const char *field);

/* Expects r to be a `status` problem naming `field`, byte for byte the
 * body *first holds: a refusal that must not tell which of several tables
 * it saw.  The first call (*first NULL) keeps the body in *first, which the
 * caller frees.  Frees r. */
void dpg_expect_same_refusal(dpg_resp *r, long status, const char *field, char **first);

/* Checks a listing walked to its end (`all`, rows with "id" and
 * "created_at"): each id of `made` (an object used as a set, emptied)
 * listed once and nothing else, in the order of created_at (newest first
 * when `newest_first`) and then id, and, as far as `first` (the listing's
 * first page) goes, in its order. */
void dpg_expect_listed_once(const json_t *all, json_t *made, const json_t *first,
			    bool newest_first);

/* Reads dataset `id`'s budget and ledger with the admin key; asserts 200. */
dpg_budget dpg_budget_of(const dpg_server *s, const char *id);

/* GETs `path` with `key` (asserts 200, the answer in the message) and
 * returns the answer's JSON (a new reference: the caller decrefs it). */
json_t *dpg_get_json(const dpg_server *s, const char *key, const char *path);

/* GETs `path` with the admin key (asserts 200) and copies the string at
 * its top-level `field` into buf (empty when it is not a string); returns
 * buf. */
const char *dpg_get_string(const dpg_server *s, const char *path, const char *field, char *buf,
			   size_t size);

/* The value of one /metrics sample: `name` is the sample as written before
 * its value, labels included (`dpgate_spends_total`,
 * `dpgate_spend_commit_duration_seconds_bucket{le="+Inf"}`).  Fails the test
 * when /metrics does not answer 200 or has no such sample. */
double dpg_metric(const dpg_server *s, const char *name);

/* Polls GET /v1/jobs/{id} every 0.1 s until its state is one of `states`
 * (NULL-terminated); returns the job (caller decrefs).  Fails the test after
 * `seconds` times dpg_time_scale(). */
json_t *dpg_job_wait(const dpg_server *s, const char *id, const char *const *states,
		     double seconds);

/* Polls GET /v1/jobs/{id} every 0.1 s until its progress shows at least
 * `steps` steps.  Fails the test when the job ends first, or after `seconds`
 * times dpg_time_scale(). */
void dpg_job_wait_steps(const dpg_server *s, const char *id, int64_t steps, double seconds);

/* dpg_job_wait until the job ends; fails the test, showing the job, unless
 * it succeeded.  Returns the job (caller decrefs). */
json_t *dpg_job_succeeded(const dpg_server *s, const char *id, double seconds);

/* The softmax scores of row x under a job's JSON model (GET
 * /v1/jobs/{id}/model?format=json, its parts `mj`), computed from its
 * weights alone by ModelJson's rules (input rule, dense layers and their
 * activations, softmax) into s; returns the argmax.  Fails the test on a
 * model it cannot read (a projection, a layer wider than 4096). */
size_t dpg_json_model_scores(const json_t *mj, const double *x, double *s);

/* The first column of a one-row query (a count) on the database file at
 * `path`, opened read-only; asserts that the query runs. */
long long dpg_count_rows(const char *path, const char *sql);

/* Creates the file at `path` (exists) or removes it: the switch a preloaded
 * test shim watches. */
void dpg_switch_file(const char *path, bool exists);

/*
 * n rows of a two-class table: v[i] = (a, b, noise) uniform in [-1, 1] from
 * a fixed LCG keyed by `seed`, rounded to the 6 decimals a CSV holds, and
 * y[i] = 1 when a + b > 0.  The same on every run.
 */
void dpg_two_class_rows(size_t n, unsigned seed, double (*v)[3], int *y);

#endif
