/*
 * trn_pate.c: the parameters, the privacy event and the partition of the
 * `pate` trainer (Papernot et al., "Scalable private learning with PATE",
 * ICLR 2018); its run is trn_pate_run.c's.
 *
 * Privacy, in short (docs/pate.md has the statements): each private row is
 * in exactly one teacher's part, so a neighbouring table changes at most
 * one teacher and so moves one vote of each histogram: L2 sensitivity
 * sqrt 2 for GNMax (the `gnmax` event, RDP lambda / sigma2^2, Proposition
 * 8) and 1 for the threshold statistic (`pate_threshold`, lambda /
 * (2 sigma1^2)).  The event names what ran: the checks and answers made,
 * and the GNSS release of the data-dependent RDP (`pate_gnss`, Theorem
 * 23).  Teachers are never released; the student learns from released
 * labels only, which is post-processing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trn_internal.h"

/* The largest learning rate a teacher or student may take. */
#define PATE_MAX_LEARNING_RATE 1e3

static void model_default(trn_pate_model_params *m)
{
	memset(m, 0, sizeof(*m));
	m->model = TRN_MODEL_LOGREG;
	m->activation = TRN_ACT_RELU;
	m->epochs = 30;
	m->lot_size = 64;
	m->learning_rate = 0.1;
	m->momentum = 0.9;
}

void trn_pate_params_default(trn_pate_params *p)
{
	memset(p, 0, sizeof(*p));
	p->teachers = 250;
	model_default(&p->teacher);
	model_default(&p->student);
	p->queries = 1000;
	p->aggregator = MECH_PATE_CONFIDENT;
	/* The paper's MNIST setting of Confident-GNMax (Table 2). */
	p->threshold = 200;
	p->sigma1 = 150;
	p->sigma2 = 40;
	p->student_confidence = NAN;
	p->confidence = 0.9;
	/* 1 < order < 1/(2 beta) (Theorem 23): 2 * 14 * 0.0329 = 0.92. */
	p->release_beta = 0.0329;
	p->release_sigma = 15;
	p->release_order = 14;
	p->delta = 1e-5;
}

/* Points err at "/params/<field>/<last segment of its where>". */
static int model_error_at(const char *field, acct_error *err)
{
	const char *leaf;
	char where[ACCT_ERROR_WHERE_BYTES];

	if (!err)
		return ACCT_EINVAL;
	leaf = strrchr(err->where, '/');
	snprintf(where, sizeof(where), "/params/%s%s", field, leaf ? leaf : "");
	snprintf(err->where, sizeof(err->where), "%s", where);
	return ACCT_EINVAL;
}

static int model_validate(const trn_pate_model_params *m, const char *field, acct_error *err)
{
	if (m->model != TRN_MODEL_LOGREG && m->model != TRN_MODEL_MLP) {
		acct_error_set(err, ACCT_EINVAL, "/model", "model must be \"logreg\" or \"mlp\"");
		return model_error_at(field, err);
	}
	if (m->model == TRN_MODEL_LOGREG && m->n_hidden != 0) {
		acct_error_set(err, ACCT_EINVAL, "/hidden", "logreg has no hidden layers");
		return model_error_at(field, err);
	}
	if ((m->model == TRN_MODEL_MLP &&
	     trn__check_hidden(m->n_hidden, m->hidden, m->activation, err) < 0) ||
	    trn__check_count(m->epochs, 1, DPG_MAX_EPOCHS, "/epochs", err) < 0 ||
	    trn__check_count(m->lot_size, 1, DPG_MAX_LOT_SIZE, "/lot_size", err) < 0 ||
	    trn__check_positive(m->learning_rate, PATE_MAX_LEARNING_RATE, "/learning_rate",
				err) < 0)
		return model_error_at(field, err);
	if (!trn__in_range(m->momentum, 0.0, 1.0) || !(m->momentum < 1.0)) {
		acct_error_set(err, ACCT_EINVAL, "/momentum", "momentum must be in [0, 1)");
		return model_error_at(field, err);
	}
	return 0;
}

/* The aggregator's own fields, after the counts. */
static int aggregator_validate(const trn_pate_params *p, acct_error *err)
{
	bool checks = mech_pate_agg_checks(p->aggregator);

	if (p->aggregator == MECH_PATE_LNMAX || !mech_pate_agg_name(p->aggregator))
		return acct_error_set(err, ACCT_EINVAL, "/params/aggregator",
				      "aggregator must be \"gnmax\", \"confident_gnmax\" or "
				      "\"interactive_gnmax\"");
	if (!trn__in_range(p->sigma2, DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA))
		return acct_error_set(err, ACCT_EINVAL, "/params/sigma2",
				      "sigma2 must be in [%g, %g]", DPG_MECH_DGAUSS_MIN_SIGMA,
				      DPG_MECH_DGAUSS_MAX_SIGMA);
	if (checks && !trn__in_range(p->sigma1, DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA))
		return acct_error_set(err, ACCT_EINVAL, "/params/sigma1",
				      "sigma1 must be in [%g, %g]", DPG_MECH_DGAUSS_MIN_SIGMA,
				      DPG_MECH_DGAUSS_MAX_SIGMA);
	if (checks && !trn__in_range(p->threshold, 0, (double)p->teachers))
		return acct_error_set(err, ACCT_EINVAL, "/params/threshold",
				      "threshold must be in [0, teachers]");
	if (!isnan(p->student_confidence) &&
	    (p->aggregator != MECH_PATE_INTERACTIVE || !trn__in_range(p->student_confidence, 0, 1)))
		return acct_error_set(err, ACCT_EINVAL, "/params/student_confidence",
				      "student_confidence is a probability, for interactive_gnmax only");
	return 0;
}

/* The release's fields: Theorem 23 needs 1 < order < 1/(2 beta). */
static int release_validate(const trn_pate_params *p, acct_error *err)
{
	if (!trn__in_range(p->release_order, 1, DPG_MAX_RDP_ORDER) || !(p->release_order > 1))
		return acct_error_set(err, ACCT_EINVAL, "/params/release_order",
				      "release_order must be in (1, %g]", (double)DPG_MAX_RDP_ORDER);
	if (!trn__in_range(p->release_beta, 0, 0.5) ||
	    !(2 * p->release_order * (p->release_beta + MECH_PATE_GNSS_BETA_SLACK) < 1))
		return acct_error_set(err, ACCT_EINVAL, "/params/release_beta",
				      "release_beta must be >= 0 and below %.17g: Theorem 23 needs "
				      "2 release_order (release_beta + 2^-22) < 1, 2^-22 being the "
				      "release's rounding slack",
				      0.5 / p->release_order - MECH_PATE_GNSS_BETA_SLACK);
	if (!trn__in_range(p->release_sigma, MECH_PATE_GNSS_MIN_SIGMA, MECH_PATE_GNSS_MAX_SIGMA))
		return acct_error_set(err, ACCT_EINVAL, "/params/release_sigma",
				      "release_sigma must be in [%g, %g]", MECH_PATE_GNSS_MIN_SIGMA,
				      MECH_PATE_GNSS_MAX_SIGMA);
	if (!(p->delta > 0 && p->delta < 1))
		return acct_error_set(err, ACCT_EINVAL, "/params/delta", "delta must be in (0, 1)");
	return 0;
}

int trn_pate_params_validate(const trn_pate_params *p, acct_error *err)
{
	int rc;

	if (trn__check_count(p->teachers, 1, DPG_MAX_PATE_JOB_TEACHERS, "/params/teachers", err) < 0 ||
	    trn__check_count(p->queries, 1, DPG_MAX_PATE_QUERIES, "/params/queries", err) < 0)
		return ACCT_EINVAL;
	if ((rc = model_validate(&p->teacher, "teacher_model", err)) < 0 ||
	    (rc = model_validate(&p->student, "student_model", err)) < 0 ||
	    (rc = aggregator_validate(p, err)) < 0 || (rc = release_validate(p, err)) < 0)
		return rc;
	if (p->semi_supervised && !(trn__in_range(p->confidence, 0, 1) && p->confidence > 0))
		return acct_error_set(err, ACCT_EINVAL, "/params/confidence",
				      "confidence must be in (0, 1]");
	return 0;
}

int trn_pate_cfg(const trn_pate_params *p, uint32_t num_classes, mech_pate_cfg *ret,
		 acct_error *err)
{
	mech_pate_cfg c;
	int rc = trn_pate_params_validate(p, err);

	if (rc < 0)
		return rc;
	memset(&c, 0, sizeof(c));
	c.agg = p->aggregator;
	c.num_teachers = p->teachers;
	c.num_classes = num_classes;
	c.sigma1 = p->sigma1;
	c.sigma2 = p->sigma2;
	c.threshold = p->threshold;
	c.student_confidence = p->student_confidence;
	c.n_orders = 1;
	c.orders[0] = p->release_order;
	/* Within the sampler's range once validated: a failure names sigma2. */
	if (mech_pate_cfg_resolve(&c, NULL) < 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/sigma2",
				      "sigma outside the sampler's range");
	*ret = c;
	return 0;
}

/* One part of the event: `count` copies of a one-sigma event, or NULL with
 * *ok true when count is 0. */
static acct_event *counted_part(int64_t count, acct_event_type type, double sigma, bool *ok)
{
	acct_event *one;

	*ok = true;
	if (count <= 0)
		return NULL;
	one = acct_event_new(type);
	if (!one) {
		*ok = false;
		return NULL;
	}
	if (type == ACCT_EV_GNMAX)
		one->u.gnmax.sigma = sigma;
	else
		one->u.pate_threshold.sigma = sigma;
	one = acct_event_self_composed(count, one);
	*ok = one != NULL;
	return one;
}

int trn_pate_event(const trn_pate_params *p, int64_t checks, int64_t answers, bool released,
		   acct_event **ret, acct_error *err)
{
	acct_event *parts[3] = {NULL, NULL, NULL};
	mech_pate_cfg c;
	size_t n = 0;
	bool ok1, ok2, ok3 = true;
	int rc = trn_pate_cfg(p, 2, &c, err);

	if (rc < 0)
		return rc;
	if (!mech_pate_agg_checks(p->aggregator))
		checks = 0;
	parts[n] = counted_part(checks, ACCT_EV_PATE_THRESHOLD, c.sigma1_used, &ok1);
	n += parts[n] != NULL;
	parts[n] = counted_part(answers, ACCT_EV_GNMAX, c.sigma2_used, &ok2);
	n += parts[n] != NULL;
	if (released) {
		parts[n] = acct_event_new(ACCT_EV_PATE_GNSS);
		ok3 = parts[n] != NULL;
		if (ok3) {
			/* The sampler's rounding of the scale is paid for by the slack
			 * (mech_pate_release_draw). */
			parts[n]->u.pate_gnss.beta = p->release_beta + MECH_PATE_GNSS_BETA_SLACK;
			parts[n++]->u.pate_gnss.sigma = p->release_sigma;
		}
	}
	if (!(ok1 && ok2 && ok3)) {
		for (size_t i = 0; i < n; i++)
			acct_event_free(parts[i]);
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	}
	if (trn__event_of_parts(parts, n, ret) < 0)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	return 0;
}

int trn_pate_worst_event(const trn_pate_params *p, acct_event **ret, acct_error *err)
{
	return trn_pate_event(p, p->queries, p->queries, true, ret, err);
}

/* A model's widths for d inputs and k classes, checked against trn_model's
 * bounds. */
static int model_shape(const trn_pate_model_params *m, size_t d, uint32_t k, const char *field,
		       acct_error *err)
{
	uint32_t widths[TRN_MAX_LAYERS + 1];
	uint32_t n = trn__dense_widths(m->model == TRN_MODEL_MLP ? m->n_hidden : 0, m->hidden,
				       (uint32_t)d, k, widths);

	if (trn__model_check(n, widths, m->model == TRN_MODEL_MLP ? m->activation : 0, err) < 0)
		return model_error_at(field, err);
	return 0;
}

int trn_pate_check_shape(const trn_pate_params *p, size_t d, uint32_t num_classes,
			 uint64_t n_student, acct_error *err)
{
	int rc;

	if (d < 1 || d > DPG_MAX_FEATURES || num_classes < 2 || num_classes > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "a pate job needs 1 to %d features and 2 to %d classes",
				      DPG_MAX_FEATURES, DPG_MAX_CLASSES);
	if (n_student < p->queries || n_student > DPG_MAX_PATE_STUDENT_ROWS)
		return acct_error_set(err, ACCT_EINVAL, "/params/queries",
				      "queries (%u) must be at most the student data's rows (%llu, "
				      "itself at most %d)", p->queries, (unsigned long long)n_student,
				      DPG_MAX_PATE_STUDENT_ROWS);
	if ((int64_t)p->teachers * (int64_t)p->queries > DPG_MAX_PATE_VOTE_WORK)
		return acct_error_set(err, ACCT_EINVAL, "/params/queries",
				      "teachers x queries must be at most %lld",
				      (long long)DPG_MAX_PATE_VOTE_WORK);
	if ((rc = model_shape(&p->teacher, d, num_classes, "teacher_model", err)) < 0 ||
	    (rc = model_shape(&p->student, d, num_classes, "student_model", err)) < 0)
		return rc;
	return 0;
}

int trn_pate_partition(mech_rng *rng, size_t n, uint32_t teachers, uint32_t *ret_teacher,
		       acct_error *err)
{
	if (teachers == 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/teachers", "no teachers");
	for (size_t i = 0; i < n; i++) {
		uint64_t u;

		if (mech_rng_uint_below(rng, teachers, &u) < 0)
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random number generator failed");
		ret_teacher[i] = (uint32_t)u;
	}
	return 0;
}

void trn_pate_result_free(trn_pate_result *r)
{
	if (!r)
		return;
	trn_model_free(r->model);
	free(r);
}
