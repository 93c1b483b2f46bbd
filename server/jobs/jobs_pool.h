/*
 * jobs_pool.h: the pool's state, shared by the files of server/jobs/ only
 * (jobs_queue.c moves ids in and out of it, jobs_worker.c runs them).
 */
#ifndef SRV_JOBS_POOL_H
#define SRV_JOBS_POOL_H

#include <pthread.h>
#include "jobs.h"
#include "trn.h"

/* An instance id: host name, process id and random bits. */
#define SRV_JOB_OWNER_BYTES 128

#define PROGRESS_SAVE_INTERVAL_S 2.0
/* Long-polls on a running job are woken at most this often by its steps
 * (every step would make a client read as fast as its round trip). */
#define PROGRESS_SIGNAL_INTERVAL_S 0.25

typedef struct job_slot {
	pthread_mutex_t lock;
	char id[48];               /* empty when idle */
	atomic_bool cancel;
	bool cancel_by_user;       /* under `lock`: a request, not the shutdown, set `cancel` */
	trn_progress progress;
	bool ensemble;             /* the job is an ensemble job: `ens` is its progress */
	trn_ensemble_progress ens;
	bool slmc;                 /* the job is an slmc job: `slmc_progress` is its progress */
	trn_slmc_progress slmc_progress;
	bool pate;                 /* the job is a pate job: `pate_progress` is its progress */
	trn_pate_progress pate_progress;
	/* Under `lock`.  The worker sets the kind flags above before its
	 * first progress, and a reader looks at them only once this is set. */
	bool has_progress;
} job_slot;

struct srv_jobs {
	srv_ctx *ctx;
	srv_jobs_table_fn load_table;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	char queue[DPG_MAX_QUEUED_JOBS][48];
	unsigned head, count;
	unsigned claimed;   /* places held by submissions between check and enqueue */
	bool stopping;
	unsigned n_workers;
	pthread_t threads[DPG_MAX_JOB_WORKERS];
	job_slot slots[DPG_MAX_JOB_WORKERS];
	/* On a shared database (srv_store_shared): workers claim from the
	 * database's one queue, the in-memory queue only wakes them, and the
	 * lease thread renews this server's jobs and sweeps expired ones. */
	bool shared;
	char owner[SRV_JOB_OWNER_BYTES]; /* this server's instance id */
	/* The claims made so far: each claim takes the next number, which
	 * with `owner` names it among every server's (jobs.claim_seq). */
	atomic_int_fast64_t claims;
	bool lease_started;
	pthread_t lease_thread;
	pthread_cond_t lease_wake; /* under `lock`: the pool stops */
	/* Under `lock`: the pool stops.  A worker waiting to write a job's
	 * start or end again waits on this, not on `wake`, so that it never
	 * takes the signal of a queued job from an idle worker. */
	pthread_cond_t retry_wake;
};

/* The restart rule's reason on a job it failed, by whichever path. */
#define SRV_JOBS_INTERRUPTED                                                              \
	"interrupted: the server stopped while the job ran; its reservation is committed in " \
	"full"

/* Names this server in `jobs->owner` and, on a shared database, starts the
 * lease thread (jobs_lease.c); -1 when it cannot be started. */
int srv_jobs__lease_start(srv_jobs *jobs);
/* Stops the lease thread; the caller has set jobs->stopping. */
void srv_jobs__lease_stop(srv_jobs *jobs);
/* The Unix time, in seconds, a lease taken now runs until. */
int64_t srv_jobs__lease_until(void);

/* Whether the slot's job was cancelled by a request, read under the slot's
 * lock: another server's cancel arrives through the lease thread. */
bool srv_jobs__cancelled_by_user(job_slot *slot);

/* The first and the longest wait, in milliseconds, before a job's start or
 * end is written again after the database refused it. */
#define SRV_JOBS_RETRY_FIRST_MS 100
#define SRV_JOBS_RETRY_MAX_MS 1000

/*
 * Waits *delay_ms (at most SRV_JOBS_RETRY_MAX_MS) before a write of a
 * job's start or end is tried again, and doubles *delay_ms for the next
 * wait; the caller starts it at SRV_JOBS_RETRY_FIRST_MS.  False, at once,
 * when the pool stops: the restart rule then ends what the worker held
 * (jobs_worker.c).
 */
bool srv_jobs__retry_wait(srv_jobs *jobs, unsigned *delay_ms);

/* A write of a job's start or end refused by the database, not by the
 * job's row: SRV_DB_ERROR, SRV_DB_MOVED, SRV_COMMIT_FAILED (a lost disk, a
 * moved file, a lock held too long, a PostgreSQL server gone), which
 * passes, so the write is tried again. */
bool srv_jobs__write_refused(int rc);

/*
 * Records a job's end as srv__job_finish_charged does (`charge` may be
 * NULL), through a connection of its own each time, until the database
 * takes it or answers for the row (SRV_CONFLICT: the row moved; SRV_NOT_FOUND:
 * gone), or the pool stops.  Every try writes the end time of the first,
 * so that a try after one whose COMMIT was written though reported failed
 * answers SRV_OK, with the reservation closed once.  Logs the first
 * refusal and the write that goes through after it.  The last answer.
 */
int srv_jobs__finish(srv_jobs *jobs, const char *id, const char *from_state, const char *state,
		     bool release, const srv_job_charge *charge, const char *result,
		     const char *error, const char *model_path);

/* Queues a job id; false when the queue is full. */
bool srv_jobs__enqueue(srv_jobs *jobs, const char *id);

/* Waits for a queued id and moves it into `slot`; false when the pool
 * stops.  On a shared database it waits at most DPG_JOB_POLL_S and then
 * leaves slot->id empty: the worker looks in the database's queue. */
bool srv_jobs__take(srv_jobs *jobs, job_slot *slot);

/* A progress report as the job row stores it and GET /v1/jobs/{id} shows. */
json_t *srv_jobs__progress_json(const trn_progress *p);

/* Saves progress `o` (any trainer's; the reference is taken, NULL is
 * ignored) on job `id`'s row, best effort (jobs_progress.c). */
void srv_jobs__save_progress(srv_jobs *jobs, const char *id, json_t *o);

/* A metric as JSON: null when it is undefined (NaN: no row of a class,
 * no test table). */
json_t *srv_jobs__real_or_null(double x);

/* A job's result object as the job row stores it: its text (malloc'ed),
 * or NULL when `res` is NULL or out of memory; the reference is taken. */
char *srv_jobs__result_text(json_t *res);

/* Room for a job's model file path (<data-dir>/models/<id>.dpgm). */
#define SRV_JOBS_MODEL_PATH_BYTES 4200

/*
 * One job's run on its worker (run_job), handed to the file of its
 * trainer: the job, its params parsed once, its random stream; the
 * progress its reports keep; and what the run leaves, the result text
 * (malloc'ed; NULL when no model was released) and the model file's path
 * (empty when none is kept) and length.
 */
typedef struct srv_jobs__run {
	srv_jobs *jobs;
	job_slot *slot;
	const srv_job_row *j;
	const json_t *params;
	mech_rng *stream;
	const char *phase;   /* the last phase saved (srv_jobs__phase_progress) */
	double last_save;    /* srv_jobs__note_progress's clocks */
	double last_signal;
	char *result;
	char model_path[SRV_JOBS_MODEL_PATH_BYTES];
	size_t model_len;
} srv_jobs__run;

/* A trainer's run with its own loading, progress and result: the
 * trainer's code, ACCT_E* before it ran; run->result and
 * run->model_path are filled when a model was released. */
typedef int srv_jobs__run_fn(srv_jobs__run *run, acct_error *err);

/*
 * A phase report p (size bytes) of the trainer: copied to `live`, the
 * slot's copy, under the slot's lock, and the slot marked as having
 * progress.  True at each phase's start, when the caller saves the
 * report on the job's row, so GET answers the live figures in between
 * (jobs_progress.c).
 */
bool srv_jobs__phase_progress(srv_jobs__run *run, void *live, const void *p, size_t size,
			      const char *phase);

/* Loads the training table (and a public evaluation table where there is
 * one) that the dataset links; a hosted table through `tables`, its file
 * under data_dir. */
int srv_jobs__load_data(srv_jobs_table_fn load_table, srv_table_cache *tables, srv_db *db,
			const char *data_dir, const char *dataset_id, const json_t *params,
			trn_dataset **ret_train, trn_dataset **ret_eval, acct_error *err);

/*
 * Reads public dataset `id`, which a job names at `where`, as the job reads
 * it: checked again (srv__jobs_check_public, at most max_rows rows), then
 * its columns taken by the names of `schema`, labelled by the job's
 * `params` or, with NULL params, unlabelled with num_classes classes.
 */
int srv_jobs__read_public(srv_jobs *jobs, srv_db *db, const char *id, const char *where,
			  const json_t *schema, const json_t *params, uint32_t num_classes,
			  uint64_t max_rows, trn_dataset **ret, acct_error *err);

/*
 * Adds to a job's result the feature names of `schema` (may be NULL) and,
 * with a test table, the released model's metrics on it (trn_eval_model):
 * test_accuracy and test_rows, and test_auc and test_balanced_error for
 * two classes (null where undefined).  Public rows only.  0 or -1.
 */
int srv_jobs__test_metrics(json_t *res, const trn_model *m, const trn_dataset *test,
			   const json_t *schema);

/*
 * A job's result as the job row stores it, with the features and test
 * metrics of srv_jobs__test_metrics added when there is a model m (a job
 * that released none reports neither): its text, or NULL when `res` is
 * NULL or out of memory.  The reference to res is taken.
 */
char *srv_jobs__result_with_metrics(json_t *res, const trn_model *m, const trn_dataset *test,
				    const json_t *schema);

/* Writes a job's model file (<data-dir>/models/<id>.dpgm, atomically):
 * 0 and its path and length, or -1 with model_path empty. */
int srv_jobs__write_model(srv_ctx *ctx, const char *id, const trn_model *m, char *model_path,
			  size_t model_path_size, size_t *ret_len, acct_error *err);

/* srv_jobs__write_model into run->model_path and run->model_len: true
 * when the model file is kept. */
bool srv_jobs__keep_model(srv_jobs__run *run, const trn_model *m, acct_error *err);

/*
 * An ensemble job's private hosted table: its training rows (features but
 * the label and the party column) and the party code of each row, M for a
 * row of no declared party (jobs_dataset.c, party_codes).  *ret_party is
 * malloc'ed.
 */
int srv_jobs__load_party_table(srv_jobs_table_fn load_table, srv_table_cache *tables, srv_db *db,
			       const char *data_dir, const char *dataset_id, const json_t *params, uint32_t m,
			       trn_dataset **ret_train, uint32_t **ret_party, acct_error *err);

/*
 * The party of each row of t, by the job's "party_column" and "parties":
 * codes 0..m-1, and m for a row of no declared party (jobs_dataset.c).
 */
int srv_jobs__party_codes(const mech_table *t, const json_t *params, uint32_t m, uint32_t *party,
			  acct_error *err);

/* A hosted table's schema as a job reads it (srv__jobs_table_schema), from
 * the link's recorded columns; NULL for a builtin link. */
json_t *srv_jobs__job_schema(srv_db *db, const char *dataset_id, const json_t *params);

/* The same for a clustering job (srv__jobs_clustering_schema). */
json_t *srv_jobs__job_clustering_schema(srv_db *db, const char *dataset_id,
					const json_t *params);

/* An ensemble job's progress as the job row stores it (jobs_ensemble.c). */
json_t *srv_jobs__ensemble_progress_json(const trn_ensemble_progress *p);

/* Runs an ensemble job on its worker (jobs_ensemble.c): loads its
 * tables, trains and keeps the model file and the result. */
srv_jobs__run_fn srv_jobs__run_ensemble;

/* An slmc job's progress as the job row stores it (jobs_slmc.c): the
 * round and the change of the noisy consensus. */
json_t *srv_jobs__slmc_progress_json(const trn_slmc_progress *p);

/*
 * Runs an slmc job on its worker (jobs_slmc.c), as srv_jobs__run_ensemble
 * does: the noise multiplier is the reserved event's; the model file is
 * the consensus as a trn_model (trn_slmc_model_to_model).
 */
srv_jobs__run_fn srv_jobs__run_slmc;

/* What a job reads: its private table, a public table to evaluate on
 * while it trains (eval), its public test table ("test_data", which is
 * also its eval), and its hosted table's schema (NULL for a builtin);
 * an ensemble's auxiliary rows and each private row's party, a pate
 * job's student rows.  What a trainer does not read stays NULL. */
struct job_data {
	trn_dataset *train, *eval, *test;
	trn_dataset *aux, *student;
	uint32_t *party;
	json_t *schema;
};

/* Loads the job's private table, its schema and its test table
 * (jobs_load.c); a table that changed since the job was priced is
 * refused.  srv_jobs__job_data_clear frees what was loaded. */
int srv_jobs__load_job_data(srv_jobs *jobs, const srv_job_row *j, const json_t *params,
			    struct job_data *jd, acct_error *err);
void srv_jobs__job_data_clear(struct job_data *jd);

/* 0 when the job's private table still has the `rows` it was priced on at
 * submission (j->n_train), else ACCT_EINVAL: the link changed since. */
int srv_jobs__check_rows(const srv_job_row *j, uint64_t rows, acct_error *err);

/* Loads the job's private table (and the builtin evaluation split, where
 * there is one) as srv_jobs__load_data does, through db, and refuses it
 * (srv_jobs__check_rows) when it no longer has the rows the job was
 * priced on.  What was loaded is the caller's either way. */
int srv_jobs__load_priced(srv_jobs *jobs, srv_db *db, const srv_job_row *j, const json_t *params,
			  trn_dataset **ret_train, trn_dataset **ret_eval, acct_error *err);

/*
 * Reads the public table the job's params name as "test_data", labelled
 * by params, into *ret (left NULL when none is named), as
 * srv_jobs__read_public does with at most DPG_MAX_TRAIN_EXAMPLES rows.
 */
int srv_jobs__read_test(srv_jobs *jobs, srv_db *db, const json_t *params, const json_t *schema,
			uint32_t num_classes, trn_dataset **ret, acct_error *err);

/*
 * A trainer's progress report `p` on `slot`: kept for live reads, and
 * saved on the job's row when it carries an evaluation or
 * PROGRESS_SAVE_INTERVAL_S has passed since *last_save (a monotonic time
 * in seconds, updated); long-polls on the job are woken when it carries an
 * evaluation or PROGRESS_SIGNAL_INTERVAL_S has passed since *last_signal.
 * Shared by DP-SGD's and label_em's runs (jobs_queue.c).
 */
void srv_jobs__note_progress(srv_jobs *jobs, job_slot *slot, const trn_progress *p,
			     double *last_save, double *last_signal);

/*
 * Runs a label_em job on its worker (jobs_label_em.c), as
 * srv_jobs__run_ensemble does: loads its label-private table and public
 * test table, trains (the labels read once, by the label exponential
 * mechanism) and keeps each epoch's progress in the slot.
 */
srv_jobs__run_fn srv_jobs__run_label_em;

/* Classes of the label column `lj` into `y` (int64, TRN_NO_CLASS for a
 * value none of the declared classes is); their number in *ret. */
int srv_jobs__label_classes(const mech_table *t, size_t lj, const json_t *declared, int64_t *y,
			    uint32_t *ret);

/*
 * A public table as a job reads it (jobs_public.c): the features of
 * `schema` (srv__jobs_table_schema) taken BY NAME, and with `params` the
 * label column of the same name classed by its declared classes; without,
 * every row unlabelled with num_classes classes.  Errors name `where`.
 */
int srv_jobs__public_dataset(const mech_table *t, const json_t *schema, const json_t *params,
			     uint32_t num_classes, const char *where, trn_dataset **ret,
			     acct_error *err);

/* A pate job's progress as the job row stores it (jobs_pate.c). */
json_t *srv_jobs__pate_progress_json(const trn_pate_progress *p);

/* A pate job on its worker, from its run to its recorded end (the worker's
 * run_job for trainer "pate"). */
void srv_jobs__pate_job(srv_jobs__run *run);

#endif
