/*
 * bench_common.h: what every benchmark measures with: a monotonic clock,
 * medians and latency quantiles.  Benchmarks report medians of repeated
 * runs, so that one slow run on a shared machine does not move the figure.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>

/* Seconds on the monotonic clock (CLOCK_MONOTONIC), from an arbitrary
 * origin. */
double bench_now_s(void);

/* Sorts v[0..n) in ascending order. */
void bench_sort(double *v, size_t n);

/* Sorts v[0..n) and returns its median (the mean of the two middle values
 * when n is even), or NAN when n is 0. */
double bench_median(double *v, size_t n);

/* The q-quantile (nearest rank) of n sorted values, or NAN when n is 0. */
double bench_quantile(const double *sorted, size_t n, double q);

/* A growable array of latencies in microseconds; {0} is empty. */
typedef struct bench_lat {
	double *v;
	size_t n, cap;
} bench_lat;

/* Appends us to l; -1, with l unchanged, when out of memory. */
int bench_lat_push(bench_lat *l, double us);

/* Frees l's values and leaves it empty. */
void bench_lat_free(bench_lat *l);

#endif
