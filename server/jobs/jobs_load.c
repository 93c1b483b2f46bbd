/*
 * jobs_load.c: what a job reads once it runs: its private table (the
 * builtin splits or a hosted table), its hosted table's schema and its
 * public test table.  Shared by the trainers' runs (jobs_worker.c,
 * jobs_label_em.c), beneath both.
 */
#include <stdlib.h>
#include <string.h>

#include "jobs_pool.h"
#include "store.h"
#include "json.h"

void srv_jobs__job_data_clear(struct job_data *jd)
{
	trn_dataset_free(jd->train);
	if (jd->eval != jd->test)
		trn_dataset_free(jd->eval);
	trn_dataset_free(jd->test);
	trn_dataset_free(jd->aux);
	trn_dataset_free(jd->student);
	free(jd->party);
	json_decref(jd->schema);
	memset(jd, 0, sizeof(*jd));
}

int srv_jobs__check_rows(const srv_job_row *j, uint64_t rows, acct_error *err)
{
	if ((int64_t)rows != j->n_train)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "the linked data changed since the job was submitted");
	return 0;
}

int srv_jobs__read_test(srv_jobs *jobs, srv_db *db, const json_t *params, const json_t *schema,
			uint32_t num_classes, trn_dataset **ret, acct_error *err)
{
	const char *test = json_string_value(json_object_get(params, "test_data"));

	if (!test)
		return 0;
	return srv_jobs__read_public(jobs, db, test, "/params/test_data", schema, params,
				     num_classes, DPG_MAX_TRAIN_EXAMPLES, ret, err);
}

int srv_jobs__load_priced(srv_jobs *jobs, srv_db *db, const srv_job_row *j, const json_t *params,
			  trn_dataset **ret_train, trn_dataset **ret_eval, acct_error *err)
{
	int rc = srv_jobs__load_data(jobs->load_table, jobs->ctx->tables, db, jobs->ctx->data_dir,
				     j->dataset_id, params, ret_train, ret_eval, err);

	return rc < 0 ? rc : srv_jobs__check_rows(j, (*ret_train)->n, err);
}

int srv_jobs__load_job_data(srv_jobs *jobs, const srv_job_row *j, const json_t *params,
			    struct job_data *jd, acct_error *err)
{
	srv_ctx *ctx = jobs->ctx;
	srv_db *db = srv_store_acquire(ctx->store);
	int rc = srv_jobs__load_priced(jobs, db, j, params, &jd->train, &jd->eval, err);

	if (rc >= 0)
		jd->schema = srv_jobs__job_schema(db, j->dataset_id, params);
	if (rc >= 0)
		rc = srv_jobs__read_test(jobs, db, params, jd->schema, jd->train->num_classes,
					 &jd->test, err);
	/* A hosted table has no eval split of its own: the test rows, public,
	 * serve as one. */
	if (rc >= 0 && !jd->eval)
		jd->eval = jd->test;
	srv_store_release(ctx->store, db);
	return rc;
}
