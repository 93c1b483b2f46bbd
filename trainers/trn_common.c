/*
 * trn_common.c: what every trainer's parameter checking and bookkeeping
 * shares: enumeration names looked up in a table, the checks of counts,
 * positive reals and hidden layers with one wording for their errors, the
 * dense layer widths of a trn_model, the clock a run is timed with, and
 * the argmax every classifier predicts by, and the composition of a run's
 * events.
 * A leaf: it calls nothing else in trainers/.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "trn_internal.h"

int trn__name_lookup(const trn__name *table, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (strcmp(name, table[i].name) == 0)
			return table[i].value;
	return -1;
}

bool trn__in_range(double x, double lo, double hi)
{
	return isfinite(x) && x >= lo && x <= hi;
}

/* The field's name is the last segment of its JSON pointer. */
static const char *field_name(const char *where)
{
	const char *slash = strrchr(where, '/');

	return slash ? slash + 1 : where;
}

int trn__check_count(uint32_t v, uint32_t lo, uint32_t hi, const char *where,
		     acct_error *err)
{
	if (v < lo || v > hi)
		return acct_error_set(err, ACCT_EINVAL, where, "%s must be %u to %u",
				      field_name(where), lo, hi);
	return 0;
}

int trn__check_positive(double x, double hi, const char *where, acct_error *err)
{
	if (!trn__in_range(x, 0.0, hi) || !(x > 0.0))
		return acct_error_set(err, ACCT_EINVAL, where, "%s must be > 0 and at most %g",
				      field_name(where), hi);
	return 0;
}

int trn__check_hidden(uint32_t n_hidden, const uint32_t *hidden, uint32_t activation,
		      acct_error *err)
{
	if (n_hidden < 1 || n_hidden > DPG_MAX_HIDDEN_LAYERS)
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "an mlp has 1 to %d hidden layers", DPG_MAX_HIDDEN_LAYERS);
	for (uint32_t i = 0; i < n_hidden; i++)
		if (hidden[i] < 1 || hidden[i] > DPG_MAX_HIDDEN_UNITS)
			return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
					      "hidden layer widths are 1 to %d",
					      DPG_MAX_HIDDEN_UNITS);
	if (activation != TRN_ACT_RELU && activation != TRN_ACT_TANH)
		return acct_error_set(err, ACCT_EINVAL, "/params/activation",
				      "activation must be \"relu\" or \"tanh\"");
	return 0;
}

uint32_t trn__dense_widths(uint32_t n_hidden, const uint32_t *hidden, uint32_t in,
			   uint32_t out, uint32_t widths[TRN_MAX_LAYERS + 1])
{
	uint32_t n_layers = n_hidden + 1;

	widths[0] = in;
	for (uint32_t l = 1; l < n_layers; l++)
		widths[l] = hidden[l - 1];
	widths[n_layers] = out;
	return n_layers;
}

double trn__now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int trn__nomem(acct_error *err)
{
	return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for training");
}

int trn__check_finite(const double *v, size_t n, const char *what, acct_error *err)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return acct_error_set(err, ACCT_EINVAL, "/model/params", "%s %zu is not finite",
					      what, i);
	return 0;
}

uint32_t trn__argmax(const double *s, uint32_t k)
{
	uint32_t arg = 0;

	for (uint32_t j = 1; j < k; j++)
		if (s[j] > s[arg])
			arg = j;
	return arg;
}

int trn__event_of_parts(acct_event *const *parts, size_t n, acct_event **ret)
{
	acct_event *ev = NULL;
	bool all_made = true;

	for (size_t i = 0; i < n; i++)
		all_made = all_made && parts[i];
	if (!all_made) {
		for (size_t i = 0; i < n; i++)
			acct_event_free(parts[i]);
		return -1;
	}
	if (n > 0) {
		ev = n == 1 ? parts[0] : acct_event_composed(parts, n);
		if (!ev)
			return -1;
	}
	*ret = ev;
	return 0;
}

/* The exponent that brings a largest entry m into [1, 2) when it is below
 * TRN_UPSCALE_BELOW, else 0.  ilogb(m) is in [-1074, -401] there; a NaN
 * m or an infinite one keeps 0, and the vector's sum stays non-finite. */
static int upscale_of_max(double m)
{
	return m > 0.0 && m < TRN_UPSCALE_BELOW ? -ilogb(m) : 0;
}

int trn__upscale_exponent(const double *v, size_t n)
{
	double m = 0.0;

	/* A comparison, not fmax(): fmax is a libm call per entry, and this
	 * runs on every example's errors at every step.  A NaN entry is
	 * skipped; the sum it enters is NaN all the same. */
	for (size_t k = 0; k < n; k++) {
		double a = fabs(v[k]);

		m = a > m ? a : m;
	}
	return upscale_of_max(m);
}

/* 2^e as two factors, each a double for |e| <= 1074 (2^1074 is not). */
static void pow2_halves(int e, double *p1, double *p2)
{
	*p1 = ldexp(1.0, e / 2);
	*p2 = ldexp(1.0, e - e / 2);
}

void trn__scale_pow2(double *v, size_t n, int e)
{
	double p1, p2;

	if (e == 0)
		return;
	pow2_halves(e, &p1, &p2);
	for (size_t k = 0; k < n; k++)
		v[k] = v[k] * p1 * p2;
}

double trn__sqnorm_upscaled(const double *v, size_t n, int *ret_e)
{
	double m = 0.0, s = 0.0, p1, p2;
	int e;

	/* One pass for the sum and the largest entry: at or above
	 * TRN_UPSCALE_BELOW (every example but the rarest) the sum is the
	 * plain one, bit for bit. */
	for (size_t k = 0; k < n; k++) {
		double a = fabs(v[k]);

		s += v[k] * v[k];
		m = a > m ? a : m;
	}
	*ret_e = e = upscale_of_max(m);
	if (e == 0)
		return s;
	pow2_halves(e, &p1, &p2);
	s = 0.0;
	for (size_t k = 0; k < n; k++) {
		double x = v[k] * p1 * p2;

		s += x * x;
	}
	return s;
}

double trn__sqnorm_unscale(double s, int e)
{
	double r = e == 0 ? s : ldexp(s, -2 * e);

	return s > 0.0 && r < DBL_MIN ? DBL_MIN : r;
}

double trn__clip_margin(size_t n)
{
	return 1.0 + ((double)n + 8.0) * TRN_F64_UNIT_ROUNDOFF;
}

double trn__clip_factor(double norm, double clip_norm, size_t n)
{
	double m = norm * trn__clip_margin(n);

	/* Abadi et al. 2016, Algorithm 1, g / max(1, ||g|| / C), with the
	 * computed norm inflated by M so that the bound holds for the
	 * rounded vector (docs/training.md, "Clipping in floating point"). */
	return clip_norm > 0.0 && m > clip_norm ? clip_norm / m : 1.0;
}
