/*
 * test_crash.c: releases under load, kill -9 at random moments, restart,
 * repeated.  Every acknowledged charge must be in the ledger, nothing may be
 * over budget, and the stored totals must equal a recomputation from the
 * rows (`dpgate verify`); the same for a mix of mechanism calls, idempotent
 * charges, reservations and PATE queries, with their own invariants.
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

/*
 * ROUNDS times: CLIENTS threads run fn(args[i]) until *stop, the server is
 * killed with SIGKILL after min_us plus up to spread_us microseconds, its
 * database must verify before anything reopens it, and it is restarted.
 */
static void kill_rounds(dpg_server *srv, atomic_bool *stop, void *(*fn)(void *),
			void *const args[CLIENTS], unsigned min_us, unsigned spread_us)
{
	unsigned seed = (unsigned)time(NULL);

	cr_log_info("kill times seed %u", seed);
	srand(seed);
	for (int round = 0; round < ROUNDS; round++) {
		pthread_t th[CLIENTS];
		const char *argv[] = {dpg_bin(), "verify", "--db", srv->db, NULL};
		char out[16384];

		atomic_store(stop, false);
		for (int i = 0; i < CLIENTS; i++)
			pthread_create(&th[i], NULL, fn, args[i]);
		usleep((useconds_t)(min_us + (unsigned)rand() % spread_us));
		cr_assert_eq(dpg_server_signal(srv, SIGKILL), 128 + SIGKILL);
		atomic_store(stop, true);
		for (int i = 0; i < CLIENTS; i++)
			pthread_join(th[i], NULL);
		cr_assert_eq(dpg_run(out, sizeof(out), argv), 0, "round %d: %s", round, out);
		dpg_server_restart(srv);
	}
}

/* The seqs of a dataset's ledger, sorted (caller frees); *ret_n of them. */
static long long *ledger_seqs(dpg_server *srv, const char *id, size_t *ret_n)
{
	char path[128];
	json_t *rows, *e;
	long long *seqs;
	size_t i;

	snprintf(path, sizeof(path), "/v1/datasets/%s/ledger?limit=1000", id);
	rows = dpg_list_all(srv, path, 1000);
	seqs = calloc(json_array_size(rows) + 1, sizeof(long long));
	cr_assert_not_null(seqs);
	json_array_foreach(rows, i, e)
		seqs[i] = json_integer_value(json_object_get(e, "seq"));
	*ret_n = json_array_size(rows);
	json_decref(rows);
	qsort(seqs, *ret_n, sizeof(long long), cmp_ll);
	return seqs;
}

static void assert_acked_in(const long long *acked, int n_acked, const long long *seqs,
			    size_t n_seqs, const char *what)
{
	for (int i = 0; i < n_acked; i++)
		cr_assert_not_null(bsearch(&acked[i], seqs, n_seqs, sizeof(long long), cmp_ll),
				   "acknowledged %s %lld is not in the ledger", what, acked[i]);
}

Test(crash, kill9_never_loses_an_acknowledged_charge, .timeout = 600)
{
	static struct load ld;
	void *args[CLIENTS];
	dpg_server srv;
	long long *seqs;
	size_t n_seqs;

	memset(&ld, 0, sizeof(ld));
	pthread_mutex_init(&ld.lock, NULL);
	dpg_server_start(&srv);
	ld.srv = &srv;
	dpg_make_dataset(&srv, "c", 0.0625 * BUDGET_CHARGES, 0, "basic");
	for (int i = 0; i < CLIENTS; i++)
		args[i] = &ld;
	kill_rounds(&srv, &ld.stop, client, args, 100000, 400000);
	cr_assert_gt(ld.n_acked, 0, "no charge was acknowledged");
	seqs = ledger_seqs(&srv, "c", &n_seqs);
	assert_acked_in(ld.acked, ld.n_acked, seqs, n_seqs, "charge");
	cr_assert_leq(n_seqs, BUDGET_CHARGES, "more charges than the budget admits");
	{
		dpg_resp r = dpg_call(&srv, "GET", "/v1/datasets/c/budget", srv.admin_key, NULL);

		cr_assert_eq(dpg_num(r.json, "charges"), (double)n_seqs);
		cr_assert_leq(dpg_num(r.json, "spent.epsilon"), 0.0625 * BUDGET_CHARGES);
		dpg_resp_free(&r);
	}
	cr_log_info("crash test: %d acknowledged, %zu in the ledger, %d refused over %d kills",
		    ld.n_acked, n_seqs, atomic_load(&ld.refused), ROUNDS);
	free(seqs);
	dpg_server_destroy(&srv);
}

/*
 * Every kind of release under kill -9: laplace mechanism calls and
 * idempotent charges on a basic dataset, reservations (each committed or
 * released) and PATE label queries on an rdp one.  After the kills:
 *  - every acknowledged release's ledger row is there;
 *  - every idempotency key sent, answered or not, charged exactly once,
 *    and a retry of an answered one gets the id it was answered;
 *  - every reservation acknowledged as committed or released reads so;
 *  - the PATE session holds every acknowledged answer, and no more than
 *    the batches in flight at the kills could add.
 */
#define MIX_MAX 20000
#define MIX_BATCH 5

struct mix {
	dpg_server *srv;
	char sid[64];
	atomic_bool stop;
	pthread_mutex_t lock;
	long long acked_m[MIX_MAX], acked_p[MIX_MAX];
	int n_m, n_p;
	/* idempotency keys: "k<client>-<n>", the id they were answered or -1 */
	char keys[MIX_MAX][24];
	long long key_id[MIX_MAX];
	int n_keys;
	char rids[MIX_MAX][64];
	bool committed[MIX_MAX];
	int n_rids;
	long pate_acked;
};

static void mix_add(struct mix *mx, long long *arr, int *n, long long v)
{
	pthread_mutex_lock(&mx->lock);
	if (*n < MIX_MAX)
		arr[(*n)++] = v;
	pthread_mutex_unlock(&mx->lock);
}

/* One idempotent charge on m; its key is on record before it is sent. */
static void mix_charge(struct mix *mx, int client, long n)
{
	const char *body = "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1000}}";
	char hdr[64];
	const char *headers[] = {hdr, NULL};
	int k;
	dpg_resp r;

	pthread_mutex_lock(&mx->lock);
	k = mx->n_keys < MIX_MAX ? mx->n_keys++ : -1;
	if (k >= 0) {
		snprintf(mx->keys[k], sizeof(mx->keys[k]), "k%d-%ld", client, n);
		mx->key_id[k] = -1;
	}
	pthread_mutex_unlock(&mx->lock);
	if (k < 0)
		return;
	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", mx->keys[k]);
	if (dpg_http(mx->srv, "POST", "/v1/datasets/m/charges", mx->srv->admin_key, body,
		     strlen(body), headers, &r) < 0)
		return;
	if (r.status == 201 && r.json) {
		pthread_mutex_lock(&mx->lock);
		mx->key_id[k] = (long long)dpg_num(r.json, "id");
		pthread_mutex_unlock(&mx->lock);
	}
	dpg_resp_free(&r);
}

/* A reservation on p, then its commit or release. */
static void mix_reserve(struct mix *mx, long n)
{
	const char *body = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":500}}";
	bool commit = n % 2 == 0;
	char path[160], rid[64];
	dpg_resp r;

	if (dpg_http(mx->srv, "POST", "/v1/datasets/p/reservations", mx->srv->admin_key, body,
		     strlen(body), NULL, &r) < 0)
		return;
	if (r.status != 201 || !r.json) {
		dpg_resp_free(&r);
		return;
	}
	snprintf(rid, sizeof(rid), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/datasets/p/reservations/%s/%s", rid,
		 commit ? "commit" : "release");
	if (dpg_http(mx->srv, "POST", path, mx->srv->admin_key, NULL, 0, NULL, &r) < 0)
		return;
	if (r.status == 200) {
		pthread_mutex_lock(&mx->lock);
		if (mx->n_rids < MIX_MAX) {
			snprintf(mx->rids[mx->n_rids], sizeof(mx->rids[0]), "%s", rid);
			mx->committed[mx->n_rids++] = commit;
		}
		pthread_mutex_unlock(&mx->lock);
	}
	dpg_resp_free(&r);
}

static void mix_release(struct mix *mx, long n)
{
	char path[160];
	const char *path_m = "/v1/datasets/m/mechanisms/laplace";
	const char *laplace = "{\"value\":1,\"sensitivity\":1,\"epsilon\":0.001}";
	const char *votes = "{\"queries\":[{\"votes\":[60,40,0]},{\"votes\":[10,80,10]},"
			    "{\"votes\":[0,0,100]},{\"votes\":[33,33,34]},{\"votes\":[90,5,5]}]}";
	bool pate = n % 2 == 0;
	dpg_resp r;

	snprintf(path, sizeof(path), "/v1/datasets/p/pate/sessions/%s/queries", mx->sid);
	if (dpg_http(mx->srv, "POST", pate ? path : path_m, mx->srv->admin_key,
		     pate ? votes : laplace, strlen(pate ? votes : laplace), NULL, &r) < 0)
		return;
	if (r.status == 201 && r.json) {
		long long id = (long long)dpg_num(r.json, "charge_id");

		if (pate) {
			mix_add(mx, mx->acked_p, &mx->n_p, id);
			pthread_mutex_lock(&mx->lock);
			mx->pate_acked += MIX_BATCH;
			pthread_mutex_unlock(&mx->lock);
		} else {
			mix_add(mx, mx->acked_m, &mx->n_m, id);
		}
	}
	dpg_resp_free(&r);
}

struct mix_client {
	struct mix *mx;
	int id;
	long n;
};

static void *mix_client(void *arg)
{
	struct mix_client *c = arg;

	while (!atomic_load(&c->mx->stop)) {
		long n = c->n++;

		if (n % 3 == 0)
			mix_charge(c->mx, c->id, n);
		else if (n % 3 == 1)
			mix_reserve(c->mx, n / 3);
		else
			mix_release(c->mx, n / 3);
	}
	return NULL;
}

/* Each key sent again: an answered one gets its id back; then each key
 * stands on exactly one ledger row of m. */
static void assert_keys_charged_once(struct mix *mx)
{
	const char *body = "{\"event\":{\"type\":\"laplace\",\"noise_multiplier\":1000}}";
	size_t i;
	json_t *rows, *e;
	int *seen = calloc((size_t)mx->n_keys + 1, sizeof(int));

	cr_assert_not_null(seen);
	for (int k = 0; k < mx->n_keys; k++) {
		char hdr[64];
		const char *headers[] = {hdr, NULL};
		dpg_resp r;

		snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", mx->keys[k]);
		cr_assert_eq(dpg_http(mx->srv, "POST", "/v1/datasets/m/charges",
				      mx->srv->admin_key, body, strlen(body), headers, &r),
			     0);
		cr_assert(r.status == 200 || r.status == 201, "retry of %s: %ld %s", mx->keys[k],
			  r.status, r.body);
		if (mx->key_id[k] >= 0)
			cr_assert_eq((long long)dpg_num(r.json, "id"), mx->key_id[k],
				     "a retry of %s got another charge", mx->keys[k]);
		dpg_resp_free(&r);
	}
	rows = dpg_list_all(mx->srv, "/v1/datasets/m/ledger?limit=1000", 1000);
	json_array_foreach(rows, i, e) {
		const char *key = json_string_value(json_object_get(e, "idempotency_key"));
		int k;

		if (!key)
			continue;
		for (k = 0; k < mx->n_keys && strcmp(mx->keys[k], key) != 0; k++)
			;
		cr_assert_lt(k, mx->n_keys, "a ledger row has the unknown key %s", key);
		seen[k]++;
	}
	for (int k = 0; k < mx->n_keys; k++)
		cr_assert_eq(seen[k], 1, "key %s is on %d ledger rows", mx->keys[k], seen[k]);
	json_decref(rows);
	free(seen);
}

static void assert_reservations_closed(struct mix *mx)
{
	json_t *all = dpg_list_all_of(mx->srv, "/v1/datasets/p/reservations?limit=1000",
				      "reservations", 1000);

	for (int k = 0; k < mx->n_rids; k++) {
		const char *state = NULL;
		size_t i;
		json_t *e;

		json_array_foreach(all, i, e)
			if (strcmp(json_string_value(json_object_get(e, "id")), mx->rids[k]) == 0)
				state = json_string_value(json_object_get(e, "state"));
		cr_assert_not_null(state, "reservation %s is gone", mx->rids[k]);
		cr_assert_str_eq(state, mx->committed[k] ? "committed" : "released", "%s",
				 mx->rids[k]);
	}
	json_decref(all);
}

Test(crash, kill9_keeps_every_kind_of_release, .timeout = 600)
{
	static struct mix mx;
	static struct mix_client cl[CLIENTS];
	void *args[CLIENTS];
	dpg_server srv;
	long long *seqs;
	size_t n_seqs;
	dpg_resp r;
	long stored;

	memset(&mx, 0, sizeof(mx));
	pthread_mutex_init(&mx.lock, NULL);
	dpg_server_start(&srv);
	mx.srv = &srv;
	dpg_make_dataset(&srv, "m", 1e6, 0, "basic");
	dpg_make_dataset(&srv, "p", 1e6, 1e-5, "rdp");
	r = dpg_call(&srv, "POST", "/v1/datasets/p/pate/sessions", srv.admin_key,
		     "{\"aggregator\":\"gnmax\",\"num_teachers\":100,\"num_classes\":3,"
		     "\"sigma2\":10}");
	cr_assert_eq(r.status, 201, "%s", r.body);
	snprintf(mx.sid, sizeof(mx.sid), "%s", json_string_value(json_object_get(r.json, "id")));
	dpg_resp_free(&r);
	for (int i = 0; i < CLIENTS; i++) {
		cl[i].mx = &mx;
		cl[i].id = i;
		args[i] = &cl[i];
	}
	kill_rounds(&srv, &mx.stop, mix_client, args, 200000, 600000);
	cr_assert(mx.n_m > 0 && mx.n_p > 0 && mx.n_rids > 0 && mx.n_keys > 0,
		  "a kind of release was never acknowledged: %d %d %d %d", mx.n_m, mx.n_p,
		  mx.n_rids, mx.n_keys);

	seqs = ledger_seqs(&srv, "m", &n_seqs);
	assert_acked_in(mx.acked_m, mx.n_m, seqs, n_seqs, "mechanism release");
	free(seqs);
	seqs = ledger_seqs(&srv, "p", &n_seqs);
	assert_acked_in(mx.acked_p, mx.n_p, seqs, n_seqs, "PATE batch");
	free(seqs);
	assert_keys_charged_once(&mx);
	assert_reservations_closed(&mx);

	{
		char path[160];

		snprintf(path, sizeof(path), "/v1/datasets/p/pate/sessions/%s", mx.sid);
		r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
		cr_assert_eq(r.status, 200, "%s", r.body);
		stored = (long)dpg_num(r.json, "counts.queries");
		dpg_resp_free(&r);
	}
	cr_assert_geq(stored, mx.pate_acked, "acknowledged PATE answers were lost");
	/* One request in flight per client at each kill. */
	cr_assert_leq(stored, mx.pate_acked + (long)MIX_BATCH * CLIENTS * ROUNDS);
	cr_log_info("mixed crash test: %d mechanism, %d PATE, %d keys, %d reservations over %d kills",
		    mx.n_m, mx.n_p, mx.n_keys, mx.n_rids, ROUNDS);
	dpg_server_destroy(&srv);
}
