/*
 * api_labelem.c: POST /v1/label-em/guidance (DESIGN.md, stateless routes).
 *
 * Forward: body {n, epsilon, sensitivity (1, the default, is the only value
 *   accepted: one label per privacy unit, see mech_labelem.c), ks} ->
 *   {keep_probability, success_probability, charged_epsilon,
 *   log_pmf: {"k": log Pr[q = k]}}, a log_pmf entry null where it is
 *   -infinity (below -DBL_MAX); charged_epsilon is what a release at these
 *   parameters costs per label, log(p / (1 - p)) = epsilon / 2.
 * Inverse: body {n, target_success_probability, sensitivity, ks} (no
 *   epsilon) -> {epsilon, keep_probability, success_probability, log_pmf}
 *   where epsilon is the smallest epsilon whose success probability
 *   Pr[q >= n/2] reaches the target (0 when every epsilon > 0 reaches it;
 *   the other figures are then those of the limit epsilon -> 0).
 * The numerics are mechanisms/mech_labelem.c's.
 */
#include <math.h>
#include <stdio.h>

#include "mech.h"
#include "json.h"
#include "api.h"

static const char *const guidance_keys[] = {
	"n", "epsilon", "sensitivity", "ks", "target_success_probability", NULL,
};

/* Adds log_pmf for every k of body.ks to ans. */
static int add_log_pmf(json_t *ans, const json_t *ks, int64_t n, double eps, double sens,
		       acct_error *err)
{
	json_t *obj = json_object();
	size_t i;
	json_t *v;
	int rc = 0;

	if (!obj)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	json_array_foreach(ks, i, v) {
		char where[ACCT_ERROR_WHERE_BYTES], key[32];
		int64_t k;
		double lp;

		snprintf(where, sizeof(where), "/ks/%zu", i);
		if (json_is_integer(v)) {
			k = (int64_t)json_integer_value(v);
		} else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
			   fabs(json_real_value(v)) < 0x1p62) {
			k = (int64_t)json_real_value(v);
		} else {
			rc = acct_error_set(err, ACCT_EINVAL, where, "'ks' entries must be integers");
			goto out;
		}
		if (k < 0 || k > n) {
			rc = acct_error_set(err, ACCT_EINVAL, where, "'ks' entries must be in [0, n]");
			goto out;
		}
		if (eps > 0.0) {
			rc = mech_label_em_log_pmf(n, eps, sens, k, &lp, err);
			if (rc < 0)
				goto out;
		} else {
			/* epsilon -> 0: Binomial(n, 1/2). */
			lp = acct_log_binomial((double)n, (double)k) - (double)n * M_LN2;
		}
		snprintf(key, sizeof(key), "%lld", (long long)k);
		/* JSON has no -infinity: a log-probability below -DBL_MAX (the
		 * probability underflows every double) is written null, as the
		 * RDP route writes an unbounded order. */
		if (json_object_set_new(obj, key, isfinite(lp) ? json_real(lp) : json_null()) < 0) {
			rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
			goto out;
		}
	}
	if (json_object_set(ans, "log_pmf", obj) < 0)
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
out:
	json_decref(obj);
	return rc;
}

/* The guidance request's parameters: n, sensitivity, either epsilon or
 * the target success probability (has_target says which), and ks or NULL. */
struct guidance_params {
	int64_t n;
	double eps, sens, target;
	int has_target;
	const json_t *ks;
};

/* Reads and checks the guidance body into *p; on failure fills err and
 * returns its negative code, leaving the fields it had not reached. */
static int parse_guidance(const json_t *body, struct guidance_params *p, acct_error *err)
{
	const json_t *ks;
	int rc, has_eps, has_target;

	if (!json_is_object(body))
		return acct_error_set(err, ACCT_EINVAL, "", "the body must be a JSON object");
	rc = srv_json_only_keys(body, "", guidance_keys, err);
	if (rc < 0)
		return rc;
	rc = srv_json_int(body, "", "n", SRV_REQUIRED, 1, DPG_MAX_LABEL_EM_N, &p->n, err);
	if (rc < 0)
		return rc;
	has_eps = srv_json_real(body, "", "epsilon", SRV_NULLABLE | SRV_LO_OPEN, 0.0, HUGE_VAL,
				&p->eps, err);
	if (has_eps < 0)
		return has_eps;
	has_target = srv_json_real(body, "", "target_success_probability",
				   SRV_NULLABLE | SRV_LO_OPEN | SRV_HI_OPEN, 0.0, 1.0, &p->target,
				   err);
	if (has_target < 0)
		return has_target;
	rc = srv_json_real(body, "", "sensitivity", SRV_NULLABLE | SRV_LO_OPEN, 0.0, HUGE_VAL,
			   &p->sens, err);
	if (rc < 0)
		return rc;
	if (has_eps && has_target)
		return acct_error_set(err, ACCT_EINVAL, "/target_success_probability",
				      "give either 'epsilon' or 'target_success_probability', not both");
	if (!has_eps && !has_target)
		return acct_error_set(err, ACCT_EINVAL, "/epsilon",
				      "'epsilon' (or 'target_success_probability') is required");
	ks = json_object_get(body, "ks");
	if (ks && !json_is_null(ks) &&
	    (!json_is_array(ks) || json_array_size(ks) > DPG_MAX_VECTOR_LEN))
		return acct_error_set(err, ACCT_EINVAL, "/ks",
				      "'ks' must be an array of at most %d integers",
				      DPG_MAX_VECTOR_LEN);
	p->has_target = has_target;
	p->ks = ks;
	return 0;
}

int srv_label_em_guidance(const json_t *body, json_t **ret_answer, acct_error *err)
{
	struct guidance_params p = { .n = 0, .eps = 0.0, .sens = 1.0, .target = 0.0 };
	json_t *ans = NULL;
	const json_t *ks;
	int64_t n;
	double eps, sens, target, keep, succ;
	int rc, has_target;

	rc = parse_guidance(body, &p, err);
	if (rc < 0)
		return rc;
	n = p.n;
	eps = p.eps;
	sens = p.sens;
	target = p.target;
	has_target = p.has_target;
	ks = p.ks;
	if (has_target) {
		rc = mech_label_em_epsilon_for_success(n, sens, target, &eps, err);
		if (rc < 0)
			return rc;
	}
	if (eps > 0.0) {
		keep = mech_label_em_keep_probability(eps, sens);
		rc = mech_label_em_success_probability(n, eps, sens, &succ, err);
		if (rc < 0)
			return rc;
	} else {
		/* Limit epsilon -> 0 (inverse answer 0): p = 1/2. */
		keep = 0.5;
		succ = target;
		rc = mech_label_em_success_probability(n, 0x1p-60, sens, &succ, err);
		if (rc < 0)
			return rc;
	}
	if (!isfinite(keep) || !isfinite(succ))
		return acct_error_set(err, ACCT_ENUMERIC, "/epsilon",
				      "the keep or success probability is not a finite number");
	ans = json_object();
	if (!ans || json_object_set_new(ans, "keep_probability", json_real(keep)) < 0 ||
	    json_object_set_new(ans, "success_probability", json_real(succ)) < 0 ||
	    json_object_set_new(ans, "charged_epsilon", json_real(eps / (2.0 * sens))) < 0 ||
	    (has_target && json_object_set_new(ans, "epsilon", json_real(eps)) < 0)) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if (ks && json_is_array(ks)) {
		rc = add_log_pmf(ans, ks, n, eps, sens, err);
		if (rc < 0)
			goto out;
	}
	*ret_answer = ans;
	ans = NULL;
	rc = 0;
out:
	json_decref(ans);
	return rc;
}
