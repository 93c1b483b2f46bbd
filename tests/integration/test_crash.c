/*
 * test_crash.c: charges under load, kill -9 at random moments, restart,
 * repeated.  Every acknowledged charge must be in the ledger, nothing may be
 * over budget, and the stored totals must equal a recomputation from the
 * rows (`dpgate verify`).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

#define ROUNDS 6
#define CLIENTS 8
#define MAX_ACKED 40000
/* Large enough that most kills land while charges are still admitted (group
 * commit admits several thousand a second), small enough that the budget's
 * edge is reached within the rounds on a fast disk. */
#define BUDGET_CHARGES 6000

struct load {
	dpg_server *srv;
	atomic_bool stop;
	pthread_mutex_t lock;
	long long acked[MAX_ACKED];
	int n_acked;
	atomic_int refused;
};

static void *client(void *arg)
{
	struct load *ld = arg;
	const char *body = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.0625,\"delta\":0}}";

	while (!atomic_load(&ld->stop)) {
		dpg_resp r;

		if (dpg_http(ld->srv, "POST", "/v1/datasets/c/charges", ld->srv->admin_key, body,
			     strlen(body), NULL, &r) < 0)
			continue; /* the server died mid-request: not acknowledged */
		if (r.status == 201 && r.json) {
			pthread_mutex_lock(&ld->lock);
			if (ld->n_acked < MAX_ACKED)
				ld->acked[ld->n_acked++] = (long long)dpg_num(r.json, "id");
			pthread_mutex_unlock(&ld->lock);
		} else if (r.status == 409) {
			atomic_fetch_add(&ld->refused, 1);
		}
		dpg_resp_free(&r);
	}
	return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

Test(crash, kill9_never_loses_an_acknowledged_charge, .timeout = 600)
{
	static struct load ld;
	dpg_server srv;
	char out[16384];
	unsigned seed = (unsigned)time(NULL);
	long long *seqs = calloc(MAX_ACKED * 2, sizeof(long long));
	int n_seqs = 0;

	cr_log_info("crash test seed %u", seed);
	srand(seed);
	memset(&ld, 0, sizeof(ld));
	pthread_mutex_init(&ld.lock, NULL);
	dpg_server_start(&srv);
	ld.srv = &srv;
	dpg_make_dataset(&srv, "c", 0.0625 * BUDGET_CHARGES, 0, "basic");
	for (int round = 0; round < ROUNDS; round++) {
		pthread_t th[CLIENTS];
		const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};

		atomic_store(&ld.stop, false);
		for (int i = 0; i < CLIENTS; i++)
			pthread_create(&th[i], NULL, client, &ld);
		usleep(100000 + (useconds_t)(rand() % 400000));
		cr_assert_eq(dpg_server_signal(&srv, SIGKILL), 128 + SIGKILL);
		atomic_store(&ld.stop, true);
		for (int i = 0; i < CLIENTS; i++)
			pthread_join(th[i], NULL);
		/* The database must verify even before anything reopens it. */
		cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "round %d: %s", round, out);
		dpg_server_restart(&srv);
	}
	cr_assert_gt(ld.n_acked, 0, "no charge was acknowledged");
	/* Collect every ledger seq and look each acknowledged id up. */
	{
		json_t *entries = dpg_list_all(&srv, "/v1/datasets/c/ledger?limit=1000", 1000), *e;
		size_t i;

		json_array_foreach(entries, i, e)
			if (n_seqs < MAX_ACKED * 2)
				seqs[n_seqs++] = json_integer_value(json_object_get(e, "seq"));
		json_decref(entries);
	}
	qsort(seqs, (size_t)n_seqs, sizeof(long long), cmp_ll);
	for (int i = 0; i < ld.n_acked; i++)
		cr_assert_not_null(bsearch(&ld.acked[i], seqs, (size_t)n_seqs, sizeof(long long), cmp_ll),
				   "acknowledged charge %lld is not in the ledger", ld.acked[i]);
	cr_assert_leq(n_seqs, BUDGET_CHARGES, "more charges than the budget admits");
	{
		dpg_resp r = dpg_call(&srv, "GET", "/v1/datasets/c/budget", srv.admin_key, NULL);

		cr_assert_eq(dpg_num(r.json, "charges"), n_seqs);
		cr_assert_leq(dpg_num(r.json, "spent.epsilon"), 0.0625 * BUDGET_CHARGES);
		dpg_resp_free(&r);
	}
	cr_log_info("crash test: %d acknowledged, %d in the ledger, %d refused over %d kills",
		    ld.n_acked, n_seqs, atomic_load(&ld.refused), ROUNDS);
	free(seqs);
	dpg_server_destroy(&srv);
}
