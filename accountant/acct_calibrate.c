/*
 * acct_calibrate.c: calibration, the search for the value of one event
 * field that meets an epsilon target under a chosen accountant.
 */
#include <math.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>

#include "acct.h"
#include "acct_internal.h"

enum field_kind {
	FIELD_NOISE,    /* real, epsilon decreases as it grows, (0, inf) */
	FIELD_NOISE01,  /* real, epsilon decreases as it grows, (0, 1] */
	FIELD_LOSS,     /* real, epsilon increases as it grows, (0, inf) */
	FIELD_LOSS01,   /* real, epsilon increases as it grows, (0, 1] */
	FIELD_COUNT,    /* integer, epsilon increases as it grows, [1, hi] */
};

struct field_ref {
	enum field_kind kind;
	double *real;
	int64_t *integer;
	int64_t int_hi;
};

/* Whether `field` of `node` is the field `name` of an event of type `t`. */
static inline bool is_field(const acct_event *node, const char *field, acct_event_type t,
			    const char *name)
{
	return node->type == t && strcmp(field, name) == 0;
}

/* Points `f` at the field of `node` named `field`, with how epsilon moves
 * as it grows; -1 when that field cannot be calibrated. */
static int find_field(acct_event *node, const char *field, struct field_ref *f)
{
	memset(f, 0, sizeof(*f));
	if (is_field(node, field, ACCT_EV_GAUSSIAN, "noise_multiplier")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.gaussian.noise_multiplier;
	} else if (is_field(node, field, ACCT_EV_LAPLACE, "noise_multiplier")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.laplace.noise_multiplier;
	} else if (is_field(node, field, ACCT_EV_DISCRETE_GAUSSIAN, "sigma")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.discrete_gaussian.sigma;
	} else if (is_field(node, field, ACCT_EV_GNMAX, "sigma")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.gnmax.sigma;
	} else if (is_field(node, field, ACCT_EV_PATE_THRESHOLD, "sigma")) {
		f->kind = FIELD_NOISE;
		f->real = &node->u.pate_threshold.sigma;
	} else if (is_field(node, field, ACCT_EV_RANDOMIZED_RESPONSE, "noise_parameter")) {
		f->kind = FIELD_NOISE01;
		f->real = &node->u.randomized_response.noise_parameter;
	} else if (is_field(node, field, ACCT_EV_DISCRETE_LAPLACE, "noise_parameter")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.discrete_laplace.noise_parameter;
	} else if (is_field(node, field, ACCT_EV_EXPONENTIAL_MECHANISM, "epsilon")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.exponential_mechanism.epsilon;
	} else if (is_field(node, field, ACCT_EV_PERMUTE_AND_FLIP, "epsilon")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.permute_and_flip.epsilon;
	} else if (is_field(node, field, ACCT_EV_EPSILON_DELTA, "epsilon")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.epsilon_delta.epsilon;
	} else if (is_field(node, field, ACCT_EV_ZCDP, "rho")) {
		f->kind = FIELD_LOSS;
		f->real = &node->u.zcdp.rho;
	} else if (is_field(node, field, ACCT_EV_POISSON_SAMPLED, "sampling_probability")) {
		f->kind = FIELD_LOSS01;
		f->real = &node->u.poisson_sampled.sampling_probability;
	} else if (is_field(node, field, ACCT_EV_SELF_COMPOSED, "count")) {
		f->kind = FIELD_COUNT;
		f->integer = &node->u.self_composed.count;
		f->int_hi = DPG_MAX_COMPOSITION_COUNT;
	} else if (is_field(node, field, ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT, "sample_size")) {
		f->kind = FIELD_COUNT;
		f->integer = &node->u.sampled_without_replacement.sample_size;
		f->int_hi = node->u.sampled_without_replacement.source_dataset_size;
	} else {
		return -1;
	}
	return 0;
}

/* Values already evaluated, with their gaps: Brent's method and the
 * bracket check below ask for the same points again and again, and one
 * evaluation can cost a tenth of a second (a PLD convolution). */
#define CALIB_MEMO 64

struct calib {
	acct_event *root;
	struct field_ref f;
	double delta, target;
	const acct_options *opt;
	int rc;
	acct_error err;
	unsigned evals;
	double last_eps;
	double memo_v[CALIB_MEMO], memo_eps[CALIB_MEMO];
	unsigned memo_n, memo_next;
};

/* epsilon(v) - target; records the first failure and returns NAN. */
static double calib_gap(struct calib *c, double v)
{
	acct_result r;
	acct_error e;
	int rc;

	for (unsigned i = 0; i < c->memo_n; i++) {
		if (c->memo_v[i] == v) {
			c->last_eps = c->memo_eps[i];
			return c->last_eps - c->target;
		}
	}
	if (c->f.real)
		*c->f.real = v;
	else
		*c->f.integer = (int64_t)v;
	c->evals++;
	acct_error_init(&e);
	rc = acct_epsilon(c->root, c->delta, c->opt, &r, &e);
	if (rc == ACCT_EUNSUPPORTED && strcmp(e.where, "/delta") == 0) {
		r.epsilon = INFINITY; /* no finite epsilon at this value */
	} else if (rc < 0) {
		if (c->rc == 0) {
			c->rc = rc;
			c->err = e;
		}
		return NAN;
	}
	c->last_eps = r.epsilon;
	c->memo_v[c->memo_next] = v;
	c->memo_eps[c->memo_next] = r.epsilon;
	c->memo_next = (c->memo_next + 1) % CALIB_MEMO;
	if (c->memo_n < CALIB_MEMO)
		c->memo_n++;
	return r.epsilon - c->target;
}

/* The GSL function: the gap as a function of log(v) for unbounded fields,
 * of v for (0,1] fields; sign arranged so that it increases with epsilon. */
struct calib_fn {
	struct calib *c;
	bool log_scale;
};

static double calib_gsl(double x, void *vp)
{
	struct calib_fn *cf = vp;
	double g = calib_gap(cf->c, cf->log_scale ? exp(x) : x);

	if (isinf(g))
		g = g > 0 ? 1e300 : -1e300;
	return g;
}

/* Reports the first failure that calib_gap recorded; returns its code. */
static int calib_fail(const struct calib *c, acct_error *err)
{
	return acct_error_set(err, c->rc, c->err.where, "%s", c->err.text);
}

/*
 * A count or a sample size: the largest integer in [1, int_hi] that meets
 * the target, by bisection (epsilon is nondecreasing in either).
 */
static int calib_count(struct calib *c, const char *field, double *ret_ok, acct_error *err)
{
	int64_t lo = 1, hi = c->f.int_hi;
	double g = calib_gap(c, 1.0);

	if (c->rc < 0)
		return calib_fail(c, err);
	if (g > 0.0)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
				      "even '%s' = 1 exceeds epsilon %g", field, c->target);
	g = calib_gap(c, (double)hi);
	if (c->rc < 0)
		return calib_fail(c, err);
	if (g <= 0.0) {
		lo = hi;
	} else {
		while (hi - lo > 1) {
			int64_t mid = lo + (hi - lo) / 2;

			g = calib_gap(c, (double)mid);
			if (c->rc < 0)
				return calib_fail(c, err);
			if (g <= 0.0)
				lo = mid;
			else
				hi = mid;
		}
	}
	*ret_ok = (double)lo;
	return 0;
}

/*
 * An unbounded real field: from 1, doubles or halves the value until one
 * value meets the target (`ok`) and one does not (`bad`), within
 * [1e-12, 1e12].  Writes the bracket's ends in log scale.
 */
static int calib_bracket_log(struct calib *c, bool decreasing, const char *field,
			     double *ret_x_ok, double *ret_x_bad, acct_error *err)
{
	double v = 1.0, ok = v, bad = v, g;
	bool have_ok = false, have_bad = false;

	for (int i = 0; i < 200 && !(have_ok && have_bad); i++) {
		g = calib_gap(c, v);
		if (c->rc < 0)
			return calib_fail(c, err);
		if (g <= 0.0) {
			ok = v;
			have_ok = true;
		} else {
			bad = v;
			have_bad = true;
		}
		/* Move toward the side still missing. */
		if (!have_ok)
			v = decreasing ? v * 2.0 : v / 2.0;
		else if (!have_bad)
			v = decreasing ? v / 2.0 : v * 2.0;
		if (v < 1e-12 || v > 1e12)
			break;
	}
	if (!have_ok)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
				      "no value of '%s' in [1e-12, 1e12] meets epsilon %g",
				      field, c->target);
	if (!have_bad)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/template",
				      "every value of '%s' meets epsilon %g; the target does "
				      "not constrain it", field, c->target);
	*ret_x_ok = log(ok);
	*ret_x_bad = log(bad);
	return 0;
}

/*
 * A field in (0, 1]: from 1, halves toward 0 until the bracket is found.
 * Returns 1, with *ret_x_ok = 1, when 1 itself is the answer (a loss field
 * that meets the target at its largest value), 0 with a bracket otherwise.
 */
static int calib_bracket_unit(struct calib *c, bool decreasing, const char *field,
			      double *ret_x_ok, double *ret_x_bad, acct_error *err)
{
	double ok, bad, g = calib_gap(c, 1.0);

	if (c->rc < 0)
		return calib_fail(c, err);
	if (decreasing) {
		if (g > 0.0)
			return acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
					      "even '%s' = 1 exceeds epsilon %g", field, c->target);
		ok = 1.0;
		bad = 0.5;
		while ((g = calib_gap(c, bad)) <= 0.0 && bad > 1e-300) {
			ok = bad;
			bad /= 2.0;
		}
	} else {
		if (g <= 0.0) {
			*ret_x_ok = 1.0;
			return 1;
		}
		bad = 1.0;
		ok = 0.5;
		while ((g = calib_gap(c, ok)) > 0.0 && ok > 1e-300) {
			bad = ok;
			ok /= 2.0;
		}
	}
	if (c->rc < 0)
		return calib_fail(c, err);
	/* The halving ran out at 1e-300 without crossing the target. */
	if (decreasing && g <= 0.0)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
				      "every value of '%s' in [1e-300, 1] meets epsilon %g; the "
				      "target does not constrain it", field, c->target);
	if (!decreasing && g > 0.0)
		return acct_error_set(err, ACCT_EUNSUPPORTED, "/epsilon",
				      "no value of '%s' in [1e-300, 1] meets epsilon %g", field,
				      c->target);
	*ret_x_ok = ok;
	*ret_x_bad = bad;
	return 0;
}

/*
 * Whether Brent's bracket [lo, hi] is narrow enough: 1e-10 relative in
 * log(v), and for a (0, 1] field 1e-10 of the distance to the nearer end
 * (or a few ulps): randomized response calibrated to a small epsilon
 * with many buckets wants p = 1 - 2e-11, and a tolerance relative to p
 * stopped at the bracket [1 - 1e-10, 1], whose conservative end p = 1 is
 * all noise.
 */
static bool bracket_narrow(const struct calib_fn *cf, double lo, double hi)
{
	if (cf->log_scale)
		return gsl_root_test_interval(lo, hi, 0.0, 1e-10) == GSL_SUCCESS;
	return hi - lo <= fmax(1e-10 * fmin(lo, 1.0 - hi), 4.0 * (nextafter(hi, 2.0) - hi));
}

/*
 * Brent's method on the bracket [x_ok, x_bad] (Brent 1973, ch. 4; GSL's
 * brent), keeping track of which end meets the target; writes that end,
 * checked once more, to *x_ok.
 */
static int calib_brent(struct calib_fn *cf, double *x_ok, double x_bad, acct_error *err)
{
	struct calib *c = cf->c;
	gsl_root_fsolver *s = NULL;
	gsl_function fn = {.function = calib_gsl, .params = cf};
	double glo;
	int rc = 0, status;

	s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
	if (!s) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	status = gsl_root_fsolver_set(s, &fn, fmin(*x_ok, x_bad), fmax(*x_ok, x_bad));
	if (status != GSL_SUCCESS) {
		rc = c->rc < 0 ? calib_fail(c, err) :
		     acct_error_set(err, ACCT_ENUMERIC, "", "calibration bracket failed");
		goto out;
	}
	for (int it = 0; it < 100; it++) {
		double lo, hi;

		status = gsl_root_fsolver_iterate(s);
		if (c->rc < 0) {
			rc = calib_fail(c, err);
			goto out;
		}
		if (status != GSL_SUCCESS) {
			rc = acct_error_set(err, ACCT_ENUMERIC, "", "Brent's method failed");
			goto out;
		}
		lo = gsl_root_fsolver_x_lower(s);
		hi = gsl_root_fsolver_x_upper(s);
		/* Keep our own bracket: which end meets the target. */
		glo = calib_gsl(lo, cf);
		if (c->rc < 0) {
			rc = calib_fail(c, err);
			goto out;
		}
		*x_ok = glo <= 0.0 ? lo : hi;
		if (bracket_narrow(cf, lo, hi))
			break;
	}
	/* The conservative end, checked. */
	glo = calib_gsl(*x_ok, cf);
	if (c->rc < 0)
		rc = calib_fail(c, err);
	else if (glo > 0.0)
		rc = acct_error_set(err, ACCT_ENUMERIC, "", "calibration lost its bracket");
out:
	if (s)
		gsl_root_fsolver_free(s);
	return rc;
}

/* Finds the value of a real field that meets the target, into *ret_ok. */
static int calib_real(struct calib *c, const char *field, double *ret_ok, acct_error *err)
{
	struct calib_fn cf;
	bool decreasing = c->f.kind == FIELD_NOISE || c->f.kind == FIELD_NOISE01;
	double x_ok = 1.0, x_bad = 1.0;
	int rc;

	cf.c = c;
	cf.log_scale = c->f.kind == FIELD_NOISE || c->f.kind == FIELD_LOSS;
	/* Bracket: `x_ok` meets the target, `x_bad` does not. */
	if (cf.log_scale)
		rc = calib_bracket_log(c, decreasing, field, &x_ok, &x_bad, err);
	else
		rc = calib_bracket_unit(c, decreasing, field, &x_ok, &x_bad, err);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		rc = calib_brent(&cf, &x_ok, x_bad, err);
		if (rc < 0)
			return rc;
	}
	*ret_ok = cf.log_scale ? exp(x_ok) : x_ok;
	return 0;
}

int acct_calibrate(acct_event *root, acct_event *node, const char *field, double epsilon,
		   double delta, const acct_options *opt, double *ret_value, double *ret_epsilon,
		   acct_error *err)
{
	struct calib c;
	acct_options shared = *opt;
	/* The rdp count starts below zero: a search prices its event some 30
	 * to 100 times, and its budget is DPG_MAX_RDP_CALIBRATION_WORK. */
	double pld_work = 0.0, rdp_work = DPG_MAX_RDP_WORK - DPG_MAX_RDP_CALIBRATION_WORK;
	double ok = 1.0, g;
	int rc;

	acct_gsl_quiet();
	memset(&c, 0, sizeof(c));
	if (!(isfinite(epsilon) && epsilon > 0.0))
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "'epsilon' must be a finite number > 0");
	if (find_field(node, field, &c.f) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/template",
				      "'%s' of a '%s' event cannot be calibrated", field,
				      acct_event_type_name(node->type));
	c.root = root;
	c.delta = delta;
	c.target = epsilon;
	/* One work budget for every pld (rdp) evaluation of the search, so a
	 * calibration ends within DPG_MAX_PLD_WORK as one pricing does (within
	 * DPG_MAX_RDP_CALIBRATION_WORK). */
	if (!shared.pld_work)
		shared.pld_work = &pld_work;
	if (!shared.rdp_work)
		shared.rdp_work = &rdp_work;
	c.opt = &shared;
	acct_error_init(&c.err);

	if (c.f.kind == FIELD_COUNT)
		rc = calib_count(&c, field, &ok, err);
	else
		rc = calib_real(&c, field, &ok, err);
	if (rc < 0)
		return rc;
	/* exp(log(v)) may round: make sure the value evaluated is returned. */
	g = calib_gap(&c, ok);
	if (c.rc < 0)
		return calib_fail(&c, err);
	if (g > 0.0)
		return acct_error_set(err, ACCT_ENUMERIC, "", "calibration result misses the target");
	*ret_value = ok;
	*ret_epsilon = c.last_eps;
	return 0;
}
