/*
 * mech_internal.h: names shared inside mechanisms/ only.
 */
#ifndef MECH_INTERNAL_H
#define MECH_INTERNAL_H

#include <float.h>
#include <math.h>

#include "mech.h"

/* Like mech_rng_uint_below for a 128-bit bound. */
int mech__rng_u128_below(mech_rng *rng, unsigned __int128 bound, unsigned __int128 *ret);

/* An Exp(1) variate, -log U for U uniform on (0, 1) drawn with full relative
 * precision at both ends (a fair bit picks U = V or 1 - V, V uniform on
 * (0, 1/2] to every bit of the double): the variate is within a relative
 * 2^-50 of the exact one it is coupled to, down to about 2^-1074 and up to
 * about 745.  0 or ACCT_EINTERNAL. */
int mech__exp1(mech_rng *rng, double *ret);

/* The standard normal conditioned on z > R, R the 256-layer ziggurat's
 * base edge (about 3.654): Marsaglia's exact tail algorithm, as
 * mech_rng_normal_fill_fast uses it.  0 or ACCT_EINTERNAL. */
int mech__normal_tail(mech_rng *rng, double *ret);

/* Bernoulli(exp(-num/den)) with 128-bit num and den (CKS Algorithm 1). */
int mech__bernoulli_exp128(mech_rng *rng, unsigned __int128 num, unsigned __int128 den,
			   bool *ret);

/* The exponents' factor of a selection: c = epsilon / (2 D), or epsilon / D
 * for monotone scores (mech_select.c's header comment). */
double mech__selection_c(double epsilon, double sensitivity, bool monotone);

/* A candidate's exponent min(c (top - score), 1024), top the largest
 * score: c times the gap to the clamped utility max(score, top - 1024 / c),
 * which moves by at most c D when every score moves by at most D
 * (docs/mechanisms.md, "Selection scores").  NaN gives 1024. */
double mech__selection_exponent(double c, double top, double score);

/* mech_exponential (scores not monotone) over up to max_n scores instead of
 * DPG_MAX_VECTOR_LEN: for candidates the mechanisms build themselves, whose
 * number may depend on private rows, so that no cap below the largest
 * possible number refuses (and so tells) what the rows hold. */
int mech__exponential_over(mech_rng *rng, const double *scores, size_t n, size_t max_n,
			   double sensitivity, double epsilon, size_t *ret_index,
			   acct_event **ret_event, acct_error *err);

/* The grid of a real Laplace release of scale `scale`: values are scaled by
 * 2^shift, noise is discrete Laplace of scale num/den >= scale 2^shift. */
int mech__laplace_grid(double scale, int *ret_shift, uint64_t *ret_num, uint64_t *ret_den);

/* ceil(sensitivity 2^shift), a sensitivity's image in units of the grid
 * 2^-shift, into *ret.  At a tiny epsilon the grid is coarse and that
 * integer many times sensitivity 2^shift: the release would be charged
 * that many times the epsilon asked, so past MECH_GRID_MAX_OVERPRICE it is
 * refused at /epsilon (ACCT_EINVAL), before any noise is drawn or any row
 * read.  0 or the error. */
int mech__grid_units(double sensitivity, int shift, double *ret, acct_error *err);

/* A noisy grid sum scaled back, units 2^-shift, as a finite double: past
 * DBL_MAX it is DBL_MAX (a function of the noisy value alone).  An infinity
 * cannot be sent as JSON, and the error it caused told whether the noisy
 * value overflowed without a charge. */
static inline double mech__grid_value(__int128 units, int shift)
{
	double v = ldexp((double)units, -shift);

	return isfinite(v) ? v : copysign(DBL_MAX, v);
}

/* The event of randomized response over k buckets that replaces the
 * answer by a uniform bucket with probability p (noise_parameter p,
 * num_buckets k), in *ret_event.  0, or ACCT_ENOMEM in err with *ret_event
 * untouched. */
int mech__randomized_response_event(double p, int64_t k, acct_event **ret_event,
				    acct_error *err);

/* The checked number parser of mechanisms/: the whole string must be a
 * finite number (blanks around allowed).  0, or -1. */
int mech__parse_real(const char *s, double *ret);

#endif
