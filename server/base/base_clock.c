/*
 * base_clock.c: wall-clock text, monotonic intervals and the latency
 * histograms that /metrics renders.  A leaf, so that the store can time
 * its transactions without depending on the HTTP layer that shows them.
 */
#include "base.h"

void srv_now_text(char buf[32])
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	srv_fmt_timestamp(buf, (int64_t)ts.tv_sec, ts.tv_nsec / 1000000);
}

double srv_seconds_between(const struct timespec *from, const struct timespec *to)
{
	return (double)(to->tv_sec - from->tv_sec) + 1e-9 * (double)(to->tv_nsec - from->tv_nsec);
}

double srv_seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return srv_seconds_between(start, &now);
}

/* Upper bounds in seconds, shared by every histogram; the last bucket is
 * +Inf.  Fine below a millisecond, where a charge's whole answer and its
 * durable COMMIT both fall on a disk with a write-back cache. */
static const double histogram_bounds[SRV_METRIC_BUCKETS - 1] = {
	0.00005, 0.0001, 0.00015, 0.0002, 0.00025, 0.0005, 0.001, 0.0025,
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
};

double srv_histogram_bound(int i)
{
	return histogram_bounds[i];
}

void srv_histogram_observe(srv_histogram *h, double seconds)
{
	int b = 0;

	if (!(seconds > 0.0))
		seconds = 0.0;
	while (b < SRV_METRIC_BUCKETS - 1 && seconds > histogram_bounds[b])
		b++;
	atomic_fetch_add(&h->bucket[b], 1);
	/* Capped at 10^9 s, so that the conversion is defined. */
	atomic_fetch_add(&h->sum_ns, (uint_fast64_t)((seconds < 1e9 ? seconds : 1e9) * 1e9));
}
