/*
 * test_pg_cancel.c: cancelling a running job through a server other than
 * the one running it, with two dpgate servers on one PostgreSQL database
 * (a throwaway cluster).
 *
 * Server a alone is up when the job is submitted, so a's worker claims it;
 * b starts afterwards and receives the cancel.  The cancel is recorded on
 * the job's row, and a's lease thread, which visits a's running jobs every
 * DPG_JOB_LEASE_RENEW_S, stops the job: it ends cancelled within one
 * renewal period (plus slack for a loaded machine), and its reservation is
 * committed once and never released (docs/training.md: a job stopped while
 * running may have read data).
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dpg_limits.h"
#include "harness.h"
#include "pg_rig.h"

/* Slack over the renewal period: the lease thread's transaction, the
 * worker reaching its next cancel check (a chunk of a lot, which a
 * sanitizer build computes several times slower), the test's polling. */
#define SLACK_S 10.0

static const char *const running[] = {"running", NULL};
static const char *const ended[] = {"succeeded", "failed", "cancelled", NULL};

/* Ledger rows of kind `kind` on dataset fm, read through server s. */
static int ledger_rows_of_kind(const dpg_server *s, const char *kind)
{
	json_t *entries = dpg_list_all(s, "/v1/datasets/fm/ledger?limit=1000", 100), *e;
	size_t i;
	int n = 0;

	json_array_foreach(entries, i, e)
		n += strcmp(json_string_value(json_object_get(e, "kind")), kind) == 0;
	json_decref(entries);
	return n;
}

TestSuite(pg_cancel, .timeout = 600);

Test(pg_cancel, a_running_job_is_cancelled_through_another_server)
{
	static struct pgc_cluster *cluster;
	static char url[PGC_URL_MAX], path[128];
	static dpg_server a, b;
	char id[64];
	double asked, waited, bound;
	dpg_resp resp;
	json_t *j;

	dpg_pg_database(&cluster, url, sizeof(url));
	dpg_server_start_on(&a, url);
	dpg_make_dataset(&a, "fm", 50.0, 1e-5, "rdp");
	resp = dpg_call(&a, "PUT", "/v1/datasets/fm/data", a.admin_key,
			"{\"builtin\":\"fashion-mnist\"}");
	cr_assert_eq(resp.status, 200, "%s", resp.body);
	dpg_resp_free(&resp);
	dpg_start_job(&a, "fm", dpg_fm_long_job, id, sizeof(id));
	json_decref(dpg_job_wait(&a, id, running, 120));
	dpg_server_start_on(&b, url);

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	resp = dpg_call(&b, "DELETE", path, b.admin_key, NULL);
	asked = dpg_now_s();
	cr_assert_eq(resp.status, 202, "%s", resp.body);
	dpg_resp_free(&resp);
	bound = DPG_JOB_LEASE_RENEW_S + SLACK_S * dpg_time_scale();
	j = dpg_job_wait(&b, id, ended, DPG_JOB_LEASE_RENEW_S + SLACK_S);
	waited = dpg_now_s() - asked;
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "cancelled", "%s",
			 json_dumps(j, 0));
	json_decref(j);
	cr_assert_leq(waited, bound, "cancelled after %.1f s", waited);

	/* Later lease passes of both servers change nothing more. */
	sleep(2 * DPG_JOB_LEASE_RENEW_S);
	cr_assert_eq(ledger_rows_of_kind(&b, "commit"), 1, "the reservation is committed once");
	cr_assert_eq(ledger_rows_of_kind(&a, "release"), 0, "nor released");
	cr_log_info("cancelled %.1f s after the request", waited);
	dpg_server_destroy(&a);
	dpg_server_destroy(&b);
	pgc_cluster_free(cluster);
}
