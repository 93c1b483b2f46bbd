/*
 * test_cnn.c: a dpsgd job with model "cnn" (trn_conv.c's convolutional
 * model, docs/training.md) end to end through the API: a private table of
 * 8 x 8 images (class 0 bright on the left half, class 1 on the right, plus
 * noise) and a public copy for test_data.
 *
 * - The charge: the job takes every row each step (lot_size = n, q = 1), so
 *   its event self_composed(T, poisson_sampled(1, gaussian(sigma))) is T
 *   Gaussian mechanisms, whose RDP at order a is T a / (2 sigma^2)
 *   (Mironov 2017, Prop. 3 and 7); the rdp ledger's filter converts it by
 *   CKS 2020, Prop. 12 (gaussians_epsilon).  That epsilon, computed here,
 *   must be the dry run's price and the charge.
 * - The model: predict's scores on the public rows must be the forward
 *   pass computed here from the JSON model's weights alone (convolution
 *   with 'same' zero padding, the activation, 2 x 2 average pooling, the
 *   dense layers, softmax); its test_accuracy the fraction of those
 *   predictions that are right.  Progress and result carry public figures
 *   only.
 * - "precision": "float32" is charged the same event, learns, and keeps a
 *   float64 model file of the same length.
 * - Bad params are refused with the field at fault, and nothing is
 *   reserved, queued or charged.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "jobs_common.h"

static dpg_server srv;

static void setup(void)
{
	dpg_server_start(&srv);
}

static void teardown(void)
{
	dpg_server_destroy(&srv);
}

TestSuite(cnn, .init = setup, .fini = teardown, .timeout = 300);

#define SIDE 8
#define PIX (SIDE * SIDE)
#define N_PRIV 240
#define N_TEST 120
#define EPOCHS 15
#define SIGMA 1.0
#define DELTA 1e-5
#define MAX_WIDTH 4096

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 11;
}

static double unif(uint64_t *s)
{
	return ((double)lcg(s) + 0.5) / 9007199254740992.0;
}

/* n images as CSV text (header p0..p63,y) and, when x is not NULL, the
 * values the server reads from that text (x[i * 64 + j]) and the labels. */
static char *image_csv(size_t n, uint64_t seed, double *x, int *y)
{
	size_t size = 512 + n * (PIX * 11 + 4), len = 0;
	char *csv = malloc(size), num[32];

	cr_assert_not_null(csv);
	for (int j = 0; j < PIX; j++)
		len += (size_t)snprintf(csv + len, size - len, "p%d,", j);
	len += (size_t)snprintf(csv + len, size - len, "y\n");
	for (size_t i = 0; i < n; i++) {
		int cls = (int)(lcg(&seed) % 2);

		for (int j = 0; j < PIX; j++) {
			double u1 = unif(&seed), u2 = unif(&seed);
			double v = (((j % SIDE) < SIDE / 2) == (cls == 0) ? 1.0 : 0.0) +
				   0.3 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);

			snprintf(num, sizeof(num), "%.6f", v);
			if (x)
				x[i * PIX + (size_t)j] = strtod(num, NULL);
			len += (size_t)snprintf(csv + len, size - len, "%s,", num);
		}
		if (y)
			y[i] = cls;
		len += (size_t)snprintf(csv + len, size - len, "%d\n", cls);
	}
	return csv;
}

/* A private rdp dataset `id` of N_PRIV images and the public "imgtest". */
static void make_images(const char *id, double epsilon)
{
	char *csv;

	dpg_make_dataset(&srv, id, epsilon, DELTA, "rdp");
	csv = image_csv(N_PRIV, 1, NULL, NULL);
	cr_assert_eq(dpg_upload_csv(&srv, id, csv, strlen(csv)), N_PRIV);
	free(csv);
	jobs_common_make_public(&srv, "imgtest");
	csv = image_csv(N_TEST, 2, NULL, NULL);
	cr_assert_eq(dpg_upload_csv(&srv, "imgtest", csv, strlen(csv)), N_TEST);
	free(csv);
}

/* A cnn job's params: `over` ("key":value pairs), then the defaults it
 * does not name. */
static const char cnn_defaults[] =
	"\"model\":\"cnn\",\"conv_channels\":4,\"kernel\":3,\"hidden\":8,\"epochs\":15,"
	"\"lot_size\":240,\"noise_multiplier\":1,\"clip_norm\":1,\"learning_rate\":0.5,"
	"\"momentum\":0.5,\"label\":\"y\",\"classes\":2,\"test_data\":\"imgtest\","
	"\"features\":\"raw\"";

static dpg_resp submit_cnn(const char *dataset, const char *over, bool dry_run)
{
	char params[1536];

	jobs_common_params(params, sizeof(params), over, cnn_defaults);
	return jobs_common_submit(&srv, dataset, "dpsgd", params, dry_run);
}

/*
 * T Gaussian mechanisms of noise multiplier sigma as the rdp ledger prices
 * them: a union of single-order Renyi filters (Feldman and Zrnic 2021,
 * Thm. 3.1) at its 20 default orders, each given delta / 20; the spent
 * epsilon is the least over the orders of CKS 2020 Prop. 12's conversion
 * of T a / (2 sigma^2) at delta / 20.
 */
static double gaussians_epsilon(int64_t t, double sigma, double delta)
{
	static const double orders[] = {1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10,
					12, 14, 16, 20, 24, 32, 48, 64, 128, 256};
	const size_t n = sizeof(orders) / sizeof(orders[0]);
	double best = INFINITY, d = delta / (double)n;

	for (size_t i = 0; i < n; i++) {
		double a = orders[i], r = (double)t * a / (2 * sigma * sigma);

		best = fmin(best, r + log1p(-1 / a) - (log(d) + log(a)) / (a - 1));
	}
	return best;
}

/* f of the JSON model's activation object: tanh, or s / (1 + e^-Tz) - o. */
static double activate(const json_t *act, double z)
{
	const char *name = json_string_value(json_object_get(act, "name"));

	if (strcmp(name, "tanh") == 0)
		return tanh(z);
	cr_assert_str_eq(name, "tempered_sigmoid");
	return dpg_num(act, "s") / (1 + exp(-dpg_num(act, "T") * z)) - dpg_num(act, "o");
}

static double weight(const json_t *w, size_t i)
{
	return json_number_value(json_array_get(json_object_get(w, "values"), i));
}

/* One block on a (c x side x side): the convolution of every output
 * channel with 'same' zero padding, f, then 2 x 2 averages, into a. */
static void block_forward(const json_t *blk, const json_t *act, double *a, double *tmp)
{
	const json_t *k_w = json_object_get(blk, "weight"), *b_w = json_object_get(blk, "bias");
	long c = (long)dpg_num(blk, "in"), out = (long)dpg_num(blk, "out");
	long k = (long)dpg_num(blk, "kernel"), side = (long)dpg_num(blk, "side"), p = k / 2;

	cr_assert_eq(json_integer_value(json_array_get(json_object_get(k_w, "shape"), 3)), k);
	for (long o = 0; o < out; o++)
		for (long r = 0; r < side; r++)
			for (long q = 0; q < side; q++) {
				double z = weight(b_w, (size_t)o);

				for (long ci = 0; ci < c; ci++)
					for (long i = 0; i < k; i++)
						for (long j = 0; j < k; j++) {
							long rr = r + i - p, qq = q + j - p;

							if (rr >= 0 && rr < side && qq >= 0 && qq < side)
								z += weight(k_w, (size_t)(((o * c + ci) * k + i) * k + j)) *
								     a[(ci * side + rr) * side + qq];
						}
				tmp[(o * side + r) * side + q] = activate(act, z);
			}
	for (long o = 0; o < out; o++)
		for (long r = 0; r < side / 2; r++)
			for (long q = 0; q < side / 2; q++) {
				const double *t = tmp + (o * side + 2 * r) * side + 2 * q;

				a[(o * (side / 2) + r) * (side / 2) + q] =
					(t[0] + t[1] + t[side] + t[side + 1]) / 4;
			}
}

/* The softmax scores of image x under the JSON model mj, from its weights
 * alone, into s; returns the argmax. */
static size_t cnn_scores(const json_t *mj, const double *x, double *s)
{
	const json_t *conv = json_object_get(mj, "convolution"), *blk, *layer;
	const json_t *act = json_object_get(conv, "activation");
	double *a = calloc(MAX_WIDTH, sizeof(double)), *tmp = calloc(MAX_WIDTH, sizeof(double));
	double sum = 0;
	size_t i, w = 0, best = 0;

	cr_assert(a && tmp && conv);
	memcpy(a, x, PIX * sizeof(double));
	json_array_foreach(json_object_get(conv, "blocks"), i, blk)
		block_forward(blk, act, a, tmp);
	json_array_foreach(json_object_get(mj, "layers"), i, layer) {
		const json_t *lw = json_object_get(layer, "weight"), *lb = json_object_get(layer, "bias");
		size_t in = (size_t)dpg_num(layer, "in");
		const char *name = json_string_value(json_object_get(layer, "activation"));

		w = (size_t)dpg_num(layer, "out");
		for (size_t o = 0; o < w; o++) {
			double z = weight(lb, o);

			for (size_t j = 0; j < in; j++)
				z += weight(lw, o * in + j) * a[j];
			tmp[o] = strcmp(name, "identity") == 0 ? z : activate(act, z);
		}
		cr_assert(strcmp(name, "identity") == 0 ||
			  strcmp(name, json_string_value(json_object_get(act, "name"))) == 0);
		memcpy(a, tmp, w * sizeof(double));
	}
	/* The softmax, shifted by the largest logit (the first of equals). */
	for (size_t c = 1; c < w; c++)
		best = a[c] > a[best] ? c : best;
	for (size_t c = 0; c < w; c++)
		sum += (s[c] = exp(a[c] - a[best]));
	for (size_t c = 0; c < w; c++)
		s[c] /= sum;
	free(a);
	free(tmp);
	return best;
}

/* The public rows as a predict body, in the CSV's own digits. */
static char *rows_body(const double *x, size_t n)
{
	size_t size = 32 + n * PIX * 12, len = 0;
	char *body = malloc(size);

	cr_assert_not_null(body);
	len += (size_t)snprintf(body, size, "{\"rows\":[");
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < PIX; j++)
			len += (size_t)snprintf(body + len, size - len, "%s%.6f%s",
						j ? "," : i ? ",[" : "[", x[i * PIX + j],
						j + 1 == PIX ? "]" : "");
	snprintf(body + len, size - len, "]}");
	return body;
}

/* Predict on the public rows against the forward pass from the JSON model;
 * their accuracy must be the job's test_accuracy. */
static void check_model(const char *job_id, const json_t *result)
{
	double *x = malloc(sizeof(double) * N_TEST * PIX), s[2];
	int *y = malloc(sizeof(int) * N_TEST);
	char path[128], *csv, *body;
	size_t right = 0;
	dpg_resp pj, mj;

	cr_assert(x && y);
	csv = image_csv(N_TEST, 2, x, y);
	free(csv);
	body = rows_body(x, N_TEST);
	snprintf(path, sizeof(path), "/v1/jobs/%s/predict", job_id);
	pj = dpg_call(&srv, "POST", path, srv.admin_key, body);
	cr_assert_eq(pj.status, 200, "%s", pj.body);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model?format=json", job_id);
	mj = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(mj.status, 200, "%s", mj.body);
	dpg_assert_in_spec(&srv, "GET", "/v1/jobs/{id}/model", "200", "application/json", mj.body);
	cr_assert_eq(dpg_num(mj.json, "input_dim"), PIX);
	for (size_t i = 0; i < N_TEST; i++) {
		const json_t *row = json_array_get(json_object_get(pj.json, "scores"), i);
		size_t cls = cnn_scores(mj.json, x + i * PIX, s);

		cr_assert_eq(json_integer_value(json_array_get(json_object_get(pj.json, "classes"), i)),
			     (json_int_t)cls, "row %zu", i);
		for (int c = 0; c < 2; c++)
			cr_assert_float_eq(s[c], json_number_value(json_array_get(row, c)), 1e-9,
					   "row %zu class %d", i, c);
		right += (int)cls == y[i];
	}
	cr_assert_float_eq(dpg_num(result, "test_accuracy"), (double)right / N_TEST, 1e-12);
	cr_assert_geq(dpg_num(result, "test_accuracy"), 0.9, "%s", json_dumps(result, 0));
	dpg_resp_free(&pj);
	dpg_resp_free(&mj);
	free(body);
	free(x);
	free(y);
}

/* Runs a cnn job to its success; the job (caller decrefs). */
static json_t *run_cnn(const char *dataset, const char *over, char job_id[64])
{
	char params[1536];

	jobs_common_params(params, sizeof(params), over, cnn_defaults);
	return jobs_common_run(&srv, dataset, "dpsgd", params, job_id, 64, 240);
}

/* Progress and result: public figures only, the last evaluation that of
 * the released model on the public test rows. */
static void check_public_figures(const json_t *job, int64_t steps)
{
	static const char *const progress_keys[] = {"epoch", "epochs", "step", "steps_total",
						    "learning_rate", "loss", "accuracy", "epsilon"};
	const json_t *progress = json_object_get(job, "progress");
	const json_t *result = json_object_get(job, "result");
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)progress, key, v) {
		bool known = false;

		for (size_t i = 0; i < sizeof(progress_keys) / sizeof(progress_keys[0]); i++)
			known = known || strcmp(key, progress_keys[i]) == 0;
		cr_assert(known, "progress reports '%s'", key);
	}
	cr_assert_eq(dpg_num(progress, "step"), steps);
	cr_assert_eq(dpg_num(result, "steps_done"), steps);
	cr_assert_eq(dpg_num(result, "test_rows"), N_TEST);
	cr_assert_eq(dpg_num(progress, "accuracy"), dpg_num(result, "test_accuracy"));
	cr_assert_null(json_object_get(result, "train_loss"));
	cr_assert_null(json_object_get(result, "train_accuracy"));
}

/* A job with the defaults and `over`: its dry run prices, and its run
 * charges, the computed epsilon; it reports public figures only, and its
 * model serves predict as its JSON form computes.  Its job id in job_id. */
static void priced_charged_and_served(const char *over, char job_id[64])
{
	double eps = gaussians_epsilon(EPOCHS, SIGMA, DELTA), needed;
	const json_t *ev;
	json_t *job;
	dpg_resp r;

	make_images("img", 50.0);
	r = submit_cnn("img", over, true);
	cr_assert_eq(r.status, 200, "%s", r.body);
	ev = json_object_get(r.json, "event");
	cr_assert_eq(dpg_num(ev, "count"), EPOCHS);
	cr_assert_eq(dpg_num(ev, "event.sampling_probability"), 1.0);
	cr_assert_eq(dpg_num(ev, "event.event.noise_multiplier"), SIGMA);
	needed = dpg_num(r.json, "needed.epsilon");
	cr_assert_float_eq(needed, eps, 1e-9 * eps, "dry run %.12g, computed %.12g", needed, eps);
	dpg_resp_free(&r);
	cr_assert_eq(dpg_budget_of(&srv, "img").spent_eps, 0.0);

	job = run_cnn("img", over, job_id);
	cr_assert_float_eq(dpg_budget_of(&srv, "img").spent_eps, needed, 1e-12 * needed);
	check_public_figures(job, EPOCHS);
	check_model(job_id, json_object_get(job, "result"));
	json_decref(job);
}

Test(cnn, a_job_is_priced_charged_and_served)
{
	char job_id[64];

	priced_charged_and_served("", job_id);
}

/* "precision": "float32" changes the arithmetic of the per-example passes
 * only: the same event is priced and charged, the job learns, and its
 * model is kept in float64, a version 4 file of the float64 length
 * (4 * 9 + 4 conv weights, 8 * 64 + 8 and 2 * 8 + 2 dense). */
Test(cnn, a_float32_job_is_priced_charged_and_served)
{
	size_t n_params = 40 + 520 + 18;
	char job_id[64], path[128];
	dpg_resp r;

	priced_charged_and_served("\"precision\":\"float32\"", job_id);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", job_id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.len, 88 + 8 + 8 * n_params);
	cr_assert_eq(memcmp(r.body, "DPGMDL01\x04\0\0\0", 12), 0);
	dpg_resp_free(&r);
}

/* Two blocks (3x3 to 4 channels, 5x5 to 6) and a tempered sigmoid: the
 * model file is version 4 of its computed length, and the JSON model
 * serves what predict does. */
Test(cnn, a_tempered_sigmoid_net_of_two_blocks)
{
	/* Weights: 4 * 1 * 9 + 4, 6 * 4 * 25 + 6, dense 8 * (6 * 2 * 2) + 8
	 * and 2 * 8 + 2. */
	size_t n_params = 40 + 606 + 200 + 18;
	char job_id[64], path[128];
	json_t *job;
	dpg_resp r;

	make_images("img", 500.0);
	job = run_cnn("img",
		      "\"conv_channels\":[4,6],\"kernel\":[3,5],\"activation\":\"tempered_sigmoid\","
		      "\"sigmoid_scale\":3,\"sigmoid_temperature\":0.7,\"sigmoid_offset\":1,"
		      "\"epochs\":30",
		      job_id);
	check_public_figures(job, 30);
	snprintf(path, sizeof(path), "/v1/jobs/%s/model", job_id);
	r = dpg_call(&srv, "GET", path, srv.admin_key, NULL);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.len, 88 + 2 * 8 + 8 * n_params);
	cr_assert_eq(memcmp(r.body, "DPGMDL01\x04\0\0\0", 12), 0);
	dpg_resp_free(&r);
	check_model(job_id, json_object_get(job, "result"));
	json_decref(job);
}

static void expect_refused(const char *over, const char *field)
{
	dpg_resp r = submit_cnn("img", over, false);

	jobs_common_expect_refusal(&r, 400, field, over);
	r = submit_cnn("img", over, true);
	jobs_common_expect_refusal(&r, 400, field, over);
}

/* Bad params are refused with the field at fault, before anything is
 * reserved: no reservation, no job, no charge. */
Test(cnn, bad_params_are_refused_and_nothing_changes)
{
	make_images("img", 50.0);
	expect_refused("\"kernel\":4", "/params/kernel");
	expect_refused("\"kernel\":[3,3,3]", "/params/kernel");
	expect_refused("\"conv_channels\":[4],\"kernel\":[3,5]", "/params/kernel");
	expect_refused("\"conv_channels\":[4,4,4]", "/params/conv_channels");
	expect_refused("\"conv_channels\":0", "/params/conv_channels");
	expect_refused("\"conv_channels\":\"4\"", "/params/conv_channels");
	expect_refused("\"activation\":\"relu\"", "/params/activation");
	expect_refused("\"sigmoid_scale\":2", "/params/sigmoid_scale");
	expect_refused("\"activation\":\"tempered_sigmoid\",\"sigmoid_scale\":0",
		       "/params/sigmoid_scale");
	expect_refused("\"activation\":\"tempered_sigmoid\",\"sigmoid_temperature\":\"hot\"",
		       "/params/sigmoid_temperature");
	expect_refused("\"image_channels\":3", "/params/image_channels");
	expect_refused("\"image_channels\":0", "/params/image_channels");
	expect_refused("\"clipping\":\"per_layer\"", "/params/clipping");
	expect_refused("\"features\":\"scatter\"", "/params/features");
	expect_refused("\"hidden\":[8,8]", "/params/hidden");
	expect_refused("\"model\":\"cnn2\"", "/params/model");
	expect_refused("\"precision\":\"float16\"", "/params/precision");
	expect_refused("\"precision\":32", "/params/precision");
	expect_refused("\"model\":\"mlp\",\"precision\":\"float32\"", "/params/precision");
	expect_refused("\"model\":\"mlp\",\"precision\":\"float64\"", "/params/precision");
	expect_refused("\"precision\":\"float32\",\"clip_norm\":1e-300", "/params/clip_norm");
	/* Below 2^-400 (3.87e-121) the clipped errors' underflow may exceed
	 * the margin's slack (docs/training.md, "Underflow"). */
	expect_refused("\"clip_norm\":3.8e-121", "/params/clip_norm");
	/* An mlp given the defaults' conv_channels: the first cnn field named. */
	expect_refused("\"model\":\"mlp\",\"kernel\":3", "/params/conv_channels");
	jobs_common_expect_nothing_written(&srv, "img");
}
