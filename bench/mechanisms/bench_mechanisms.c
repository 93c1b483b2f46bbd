/*
 * bench_mechanisms.c: samples per second of each sampler, next to the raw
 * getrandom throughput measured in the same run, and the label EM at
 * n = 10^6.  Usage: bench_mechanisms [seconds-per-item, default 0.5].
 *
 * Samplers run on the system rng (getrandom for every draw) and on the
 * ChaCha20 stream rng, so the cost of the kernel calls is visible.
 *
 * Last, the timing side of the discrete Laplace sampler: 10^6 draws at
 * scale 10 from the stream, each timed alone, grouped by |z| / scale; the
 * mean time per group shows how much a draw's duration says about |z|
 * (README, "Mechanisms").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "bench_common.h"
#include "mech.h"

typedef int (*one_fn)(mech_rng *rng, void *ctx);

/* Runs fn in batches until `budget` seconds pass; returns calls/second. */
static double rate(one_fn fn, mech_rng *rng, void *ctx, double budget)
{
	double t0 = bench_now_s(), t;
	long calls = 0;

	do {
		for (int i = 0; i < 256; i++)
			if (fn(rng, ctx) < 0) {
				fprintf(stderr, "sampler failed\n");
				exit(1);
			}
		calls += 256;
		t = bench_now_s();
	} while (t - t0 < budget);
	return (double)calls / (t - t0);
}

static int f_bytes8(mech_rng *r, void *c)
{
	uint64_t x;

	(void)c;
	return mech_rng_bytes(r, &x, sizeof(x));
}

static int f_uniform(mech_rng *r, void *c)
{
	double x;

	(void)c;
	return mech_rng_uniform(r, &x);
}

static int f_bernoulli(mech_rng *r, void *c)
{
	bool b;

	(void)c;
	return mech_rng_bernoulli(r, 0.3, &b);
}

static int f_bern_exp(mech_rng *r, void *c)
{
	bool b;

	(void)c;
	return mech_sample_bernoulli_exp(r, 7, 3, &b);
}

static int f_dlap(mech_rng *r, void *c)
{
	int64_t z;

	(void)c;
	return mech_sample_discrete_laplace(r, 10, 1, &z);
}

static int f_dgauss(mech_rng *r, void *c)
{
	int64_t z;

	(void)c;
	return mech_sample_discrete_gaussian(r, *(double *)c, &z);
}

/* An additive release of one value (mech_laplace or mech_gaussian, whose
 * signatures agree) at sensitivity 1 and the given scale. */
struct additive {
	int (*release)(mech_rng *rng, const double *values, size_t n, double sensitivity,
		       double scale, double *ret_out, acct_event **ret_event, acct_error *err);
	double scale;
};

static int f_additive(mech_rng *r, void *c)
{
	const struct additive *a = c;
	double v = 12.5, out;
	acct_event *ev = NULL;
	int rc = a->release(r, &v, 1, 1.0, a->scale, &out, &ev, NULL);

	acct_event_free(ev);
	return rc;
}

static int f_normal_fill(mech_rng *r, void *c)
{
	double buf[64];

	(void)c;
	return mech_rng_normal_fill(r, buf, 64);
}

static int f_normal_fill_fast(mech_rng *r, void *c)
{
	double buf[1024];

	(void)c;
	return mech_rng_normal_fill_fast(r, buf, 1024);
}

static int f_getrandom8(mech_rng *r, void *c)
{
	uint64_t x;

	(void)r;
	(void)c;
	return getrandom(&x, sizeof(x), 0) == sizeof(x) ? 0 : -1;
}

static int f_getrandom4k(mech_rng *r, void *c)
{
	uint8_t *buf = c;
	size_t done = 0;

	(void)r;
	while (done < 4096) {
		ssize_t got = getrandom(buf + done, 4096 - done > 256 ? 256 : 4096 - done, 0);

		if (got < 0)
			return -1;
		done += (size_t)got;
	}
	return 0;
}

static int f_stream4k(mech_rng *r, void *c)
{
	return mech_rng_bytes(r, c, 4096);
}

#define DLAP_TIMED_DRAWS 1000000
#define DLAP_TIMED_SCALE 10
#define DLAP_GROUPS 8

/* Mean nanoseconds per discrete Laplace draw, by floor(|z| / scale). */
static void dlap_time_by_magnitude(mech_rng *rng)
{
	double sum[DLAP_GROUPS] = {0};
	long count[DLAP_GROUPS] = {0};

	for (long i = 0; i < DLAP_TIMED_DRAWS; i++) {
		double t0 = bench_now_s(), t1;
		int64_t z;
		long g;

		if (mech_sample_discrete_laplace(rng, DLAP_TIMED_SCALE, 1, &z) < 0) {
			fprintf(stderr, "sampler failed\n");
			exit(1);
		}
		t1 = bench_now_s();
		g = (long)((z < 0 ? -z : z) / DLAP_TIMED_SCALE);
		if (g >= DLAP_GROUPS)
			g = DLAP_GROUPS - 1;
		sum[g] += (t1 - t0) * 1e9;
		count[g]++;
	}
	printf("discrete laplace t=%d, stream rng: mean ns per draw by |z|/t (%d draws)\n",
	       DLAP_TIMED_SCALE, DLAP_TIMED_DRAWS);
	for (int g = 0; g < DLAP_GROUPS; g++)
		if (count[g] > 0)
			printf("  floor(|z|/t) %s %d: %8.0f ns  (%ld draws)\n",
			       g == DLAP_GROUPS - 1 ? ">=" : "= ", g, sum[g] / (double)count[g], count[g]);
}

int main(int argc, char **argv)
{
	double budget = argc > 1 ? atof(argv[1]) : 0.5;
	mech_rng *sys = mech_rng_new_system(), *stream = mech_rng_new_stream(sys);
	static uint8_t page[4096];
	double sigma_small = 3.0, sigma_big = 1e5;
	struct additive laplace = {mech_laplace, 2.0}, gaussian = {mech_gaussian, 3.0};
	const struct {
		const char *name;
		one_fn fn;
		void *ctx;
		int per_call;
	} items[] = {
		{"rng 8 bytes", f_bytes8, NULL, 1},
		{"uniform (53 bits)", f_uniform, NULL, 1},
		{"bernoulli(0.3) exact", f_bernoulli, NULL, 1},
		{"bernoulli(exp(-7/3)) CKS", f_bern_exp, NULL, 1},
		{"discrete laplace t=10", f_dlap, NULL, 1},
		{"discrete gaussian s=3", f_dgauss, &sigma_small, 1},
		{"laplace release (grid)", f_additive, &laplace, 1},
		{"gaussian release (grid)", f_additive, &gaussian, 1},
		{"normal_fill (per value)", f_normal_fill, NULL, 64},
		{"normal_fill_fast (per value)", f_normal_fill_fast, NULL, 1024},
	};

	if (!sys || !stream)
		return 1;
	printf("%-32s %16s %16s\n", "", "system rng /s", "stream rng /s");
	printf("%-32s %16.3g %16s\n", "raw getrandom(8 bytes) calls", rate(f_getrandom8, NULL, NULL, budget), "");
	printf("%-32s %16.3g %16.3g   (MB/s)\n", "raw 4 KiB: getrandom | chacha20",
	       rate(f_getrandom4k, NULL, page, budget) * 4096 / 1e6,
	       rate(f_stream4k, stream, page, budget) * 4096 / 1e6);
	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		printf("%-32s %16.3g %16.3g\n", items[i].name,
		       rate(items[i].fn, sys, items[i].ctx, budget) * items[i].per_call,
		       rate(items[i].fn, stream, items[i].ctx, budget) * items[i].per_call);
	}
	printf("%-32s %16.3g %16.3g\n", "discrete gaussian s=1e5", rate(f_dgauss, sys, &sigma_big, budget),
	       rate(f_dgauss, stream, &sigma_big, budget));
	/* Label EM, n = 10^6. */
	{
		size_t n = 1000000;
		uint8_t *labels = malloc(n), *out = malloc(n);
		mech_rng *rngs[2] = {sys, stream};

		for (size_t i = 0; i < n; i++)
			labels[i] = (uint8_t)(i % 2);
		for (int k = 0; k < 2; k++) {
			acct_event *ev = NULL;
			double t0 = bench_now_s(), t1;

			if (mech_label_em(rngs[k], labels, n, 1.0, 1.0, out, &ev, NULL) < 0)
				return 1;
			t1 = bench_now_s();
			acct_event_free(ev);
			printf("label EM n=1e6 (%s rng): %.3f s\n", k ? "stream" : "system", t1 - t0);
		}
		free(labels);
		free(out);
	}
	dlap_time_by_magnitude(stream);
	mech_rng_free(stream);
	mech_rng_free(sys);
	return 0;
}
