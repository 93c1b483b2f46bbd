/*
 * test_race.c: many concurrent clients charging one dataset whose budget
 * admits exactly K charges: exactly K succeed, every other answer is a 409
 * that says what remains, and the ledger and the stored totals agree.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define CLIENTS 24
#define PER_CLIENT 12
#define BUDGET_CHARGES 100 /* epsilon 12.5 at 0.125 per charge, exactly */

struct race {
	dpg_server *srv;
	char key[160];
	atomic_int ok;
	atomic_int refused;
	atomic_int other;
};

static void *client(void *arg)
{
	struct race *rc = arg;
	const char *body = "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}";

	for (int i = 0; i < PER_CLIENT; i++) {
		dpg_resp r;

		if (dpg_http(rc->srv, "POST", "/v1/datasets/race/charges", rc->key, body, strlen(body),
			     NULL, &r) < 0) {
			atomic_fetch_add(&rc->other, 1);
			continue;
		}
		if (r.status == 201) {
			atomic_fetch_add(&rc->ok, 1);
		} else if (r.status == 409 && r.json && json_object_get(r.json, "remaining")) {
			atomic_fetch_add(&rc->refused, 1);
		} else {
			atomic_fetch_add(&rc->other, 1);
		}
		dpg_resp_free(&r);
	}
	return NULL;
}

Test(race, exactly_k_charges_win, .timeout = 300)
{
	dpg_server srv;
	struct race rc = {0};
	pthread_t th[CLIENTS];
	char out[8192];
	dpg_resp r;
	int ledger_rows = 0;

	dpg_server_start(&srv);
	rc.srv = &srv;
	dpg_make_dataset(&srv, "race", 0.125 * BUDGET_CHARGES, 0, "basic");
	/* Clients spend with an analyst key scoped to the dataset. */
	dpg_make_key(&srv, "analyst", "race", rc.key, sizeof(rc.key));
	for (int i = 0; i < CLIENTS; i++)
		pthread_create(&th[i], NULL, client, &rc);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(atomic_load(&rc.other), 0, "unexpected answers");
	cr_assert_eq(atomic_load(&rc.ok), BUDGET_CHARGES);
	cr_assert_eq(atomic_load(&rc.refused), CLIENTS * PER_CLIENT - BUDGET_CHARGES);

	r = dpg_call(&srv, "GET", "/v1/datasets/race/budget", srv.admin_key, NULL);
	cr_assert_eq(dpg_num(r.json, "charges"), BUDGET_CHARGES);
	cr_assert_eq(dpg_num(r.json, "spent.epsilon"), 0.125 * BUDGET_CHARGES);
	cr_assert_eq(dpg_num(r.json, "remaining.epsilon"), 0.0);
	dpg_resp_free(&r);
	r = dpg_call(&srv, "GET", "/v1/datasets/race/ledger?limit=1000", srv.admin_key, NULL);
	ledger_rows = (int)json_array_size(json_object_get(r.json, "entries"));
	dpg_resp_free(&r);
	cr_assert_eq(ledger_rows, BUDGET_CHARGES);
	{
		const char *argv[] = {dpg_bin(), "verify", "--db", srv.db, NULL};

		cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "%s", out);
	}
	dpg_server_destroy(&srv);
}
