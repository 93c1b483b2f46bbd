/*
 * api_pate.c: the stateless PATE routes /v1/pate/cost and
 * /v1/pate/smooth-sensitivity (DESIGN.md, "HTTP API").
 *
 * Both parse and bound the request here, then call the PATE analysis of
 * accountant/acct_pate.c.  Bad input is ACCT_EINVAL with a JSON pointer to
 * the field ("/votes/3"); well-formed input the analysis cannot bound (a
 * sigma so small that the RDP overflows, an order at which Theorem 6 never
 * applies) is ACCT_EUNSUPPORTED.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "api.h"
#include "api_internal.h"

/*
 * Reads body.votes: 2 .. DPG_MAX_VOTE_CLASSES non-negative integers, at most
 * DPG_MAX_TEACHERS in all.  On success *ret_votes is a new array (caller
 * frees) and *ret_total the number of votes.
 */
static int read_votes(const json_t *body, double **ret_votes, size_t *ret_n, double *ret_total,
		      acct_error *err)
{
	const json_t *arr = json_object_get(body, "votes");
	size_t n;
	double *v, total = 0;

	if (!arr)
		return acct_error_set(err, ACCT_EINVAL, "/votes", "'votes' is required");
	n = json_array_size(arr);
	if (!json_is_array(arr) || n < 2 || n > DPG_MAX_VOTE_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/votes",
				      "'votes' must be an array of 2 to %d vote counts", DPG_MAX_VOTE_CLASSES);
	v = malloc(n * sizeof(*v));
	if (!v)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		int rc = srv_json_array_real(arr, "/votes", i, 0, 0, DPG_MAX_TEACHERS, true, &v[i],
					     err);

		if (rc < 0) {
			free(v);
			return rc;
		}
		total += v[i];
	}
	if (total > DPG_MAX_TEACHERS) {
		free(v);
		return acct_error_set(err, ACCT_EINVAL, "/votes", "%.0f votes: at most %d teachers", total,
				      DPG_MAX_TEACHERS);
	}
	*ret_votes = v;
	*ret_n = n;
	*ret_total = total;
	return 0;
}

/* Reads body.orders: 1 .. DPG_MAX_ORDERS orders in (1, DPG_MAX_RDP_ORDER]. */
/* The start of either calculator: an object with only `keys`, and its votes
 * read as read_votes does. */
static int read_body(const json_t *body, const char *const *keys, double **ret_votes,
		     size_t *ret_n, double *ret_total, acct_error *err)
{
	int rc;

	if (!json_is_object(body))
		return acct_error_set(err, ACCT_EINVAL, "", "the body must be a JSON object");
	rc = srv_json_only_keys(body, "", keys, err);
	return rc < 0 ? rc : read_votes(body, ret_votes, ret_n, ret_total, err);
}

static int read_orders(const json_t *body, double *orders, size_t *ret_n, acct_error *err)
{
	const json_t *arr = json_object_get(body, "orders");
	size_t n = json_array_size(arr);

	if (!arr)
		return acct_error_set(err, ACCT_EINVAL, "/orders", "'orders' is required");
	if (!json_is_array(arr) || n < 1 || n > DPG_MAX_ORDERS)
		return acct_error_set(err, ACCT_EINVAL, "/orders", "'orders' must be an array of 1 to %d orders",
				      DPG_MAX_ORDERS);
	for (size_t i = 0; i < n; i++) {
		int rc = srv_json_array_real(arr, "/orders", i, SRV_LO_OPEN, 1, DPG_MAX_RDP_ORDER,
					     false, &orders[i], err);

		if (rc < 0)
			return rc;
	}
	*ret_n = n;
	return 0;
}

/* Sets obj[key] = value (stolen); -1 when value is NULL or on failure. */
static int set(json_t *obj, const char *key, json_t *value)
{
	return value ? json_object_set_new(obj, key, value) : -1;
}

int srv_pate_cost(const json_t *body, json_t **ret_answer, acct_error *err)
{
	static const char *const keys[] = {"votes", "sigma", "orders", "threshold", "threshold_sigma",
					   "num_teachers", NULL};
	double orders[DPG_MAX_ORDERS], rdp[DPG_MAX_ORDERS], rdp_ind[DPG_MAX_ORDERS];
	double rdp_t[DPG_MAX_ORDERS], rdp_t_ind[DPG_MAX_ORDERS];
	double *votes = NULL, total = 0, sigma = 0, threshold = 0, threshold_sigma = 0, logq, logpr = 0;
	int64_t num_teachers = 0;
	size_t m = 0, n = 0;
	int has_t, has_ts, has_n, rc;
	bool failed;
	json_t *ans;

	if ((rc = read_body(body, keys, &votes, &m, &total, err)) < 0)
		goto out;
	if ((rc = srv_json_real(body, "", "sigma", SRV_REQUIRED | SRV_LO_OPEN, 0, ACCT_PATE_MAX_SIGMA,
				&sigma, err)) < 0 ||
	    (rc = read_orders(body, orders, &n, err)) < 0 ||
	    (rc = has_n = srv_json_int(body, "", "num_teachers", SRV_NULLABLE, 1, DPG_MAX_TEACHERS,
				       &num_teachers, err)) < 0)
		goto out;
	if (has_n && total > (double)num_teachers) {
		rc = acct_error_set(err, ACCT_EINVAL, "/votes", "%.0f votes from %lld teachers", total,
				    (long long)num_teachers);
		goto out;
	}
	/* Without num_teachers, every teacher is taken to have voted. */
	if ((rc = has_t = srv_json_real(body, "", "threshold", SRV_NULLABLE, 0,
					has_n ? (double)num_teachers : total, &threshold, err)) < 0 ||
	    (rc = has_ts = srv_json_real(body, "", "threshold_sigma", SRV_NULLABLE | SRV_LO_OPEN |
					 (has_t ? SRV_REQUIRED : 0), 0, ACCT_PATE_MAX_SIGMA,
					 &threshold_sigma, err)) < 0)
		goto out;
	if (has_ts && !has_t) {
		rc = acct_error_set(err, ACCT_EINVAL, "/threshold", "'threshold' is required with 'threshold_sigma'");
		goto out;
	}

	if ((rc = acct_pate_gnmax_logq(votes, m, sigma, &logq, err)) < 0 ||
	    (rc = acct_pate_gnmax_rdp(logq, sigma, orders, n, rdp, err)) < 0 ||
	    (rc = acct_pate_gnmax_rdp_data_independent(sigma, orders, n, rdp_ind, err)) < 0)
		goto out;
	if (has_t &&
	    ((rc = acct_pate_threshold_logpr(votes, m, threshold, threshold_sigma, &logpr, err)) < 0 ||
	     (rc = acct_pate_threshold_rdp(logpr, threshold_sigma, orders, n, rdp_t, err)) < 0 ||
	     (rc = acct_pate_threshold_rdp_data_independent(threshold_sigma, orders, n, rdp_t_ind, err)) < 0))
		goto out;

	ans = json_object();
	failed = !ans || set(ans, "logq", json_real(logq)) < 0 ||
		 set(ans, "orders", srv_json_real_array(orders, n)) < 0 ||
		 set(ans, "rdp", srv_json_real_array(rdp, n)) < 0 ||
		 set(ans, "rdp_data_independent", srv_json_real_array(rdp_ind, n)) < 0 ||
		 (has_t && (set(ans, "logpr_answered", json_real(logpr)) < 0 ||
			      set(ans, "rdp_threshold", srv_json_real_array(rdp_t, n)) < 0 ||
			      set(ans, "rdp_threshold_data_independent", srv_json_real_array(rdp_t_ind, n)) < 0));
	rc = srv_json_hand_over(ans, failed, ret_answer, err);
out:
	free(votes);
	return rc;
}

int srv_pate_smooth_sensitivity(const json_t *body, json_t **ret_answer, acct_error *err)
{
	static const char *const keys[] = {"votes", "num_teachers", "sigma", "order", "beta",
					   "release_sigma", NULL};
	double *votes = NULL, *ls = NULL, total = 0, sigma = 0, release_sigma = 0, order = 0, beta = 0;
	double logq, rdp, smooth, release_smooth, rdp_release, *lsb_d = NULL;
	int64_t num_teachers = 0;
	size_t m = 0;
	int rc;
	acct_pate_workspace *ws = NULL;
	acct_pate_ls_bound *lsb = NULL;
	bool failed;
	json_t *ans;

	if ((rc = read_body(body, keys, &votes, &m, &total, err)) < 0)
		goto out;
	/* The answer lists the local sensitivity at every distance below
	 * num_teachers, so its length is bounded like any returned vector. */
	if ((rc = srv_json_int(body, "", "num_teachers", SRV_REQUIRED, 1, DPG_MAX_VECTOR_LEN,
			       &num_teachers, err)) < 0 ||
	    (rc = srv_json_real(body, "", "sigma", SRV_REQUIRED | SRV_LO_OPEN, 0, ACCT_PATE_MAX_SIGMA,
				&sigma, err)) < 0 ||
	    (rc = srv_json_real(body, "", "order", SRV_REQUIRED | SRV_LO_OPEN, 1, DPG_MAX_RDP_ORDER,
				&order, err)) < 0 ||
	    (rc = srv_json_real(body, "", "beta", SRV_REQUIRED | SRV_HI_OPEN, 0, 0.5, &beta, err)) < 0)
		goto out;
	release_sigma = sigma;
	if ((rc = srv_json_real(body, "", "release_sigma", SRV_NULLABLE | SRV_LO_OPEN, 0,
				ACCT_PATE_MAX_SIGMA, &release_sigma, err)) < 0)
		goto out;
	if (total > (double)num_teachers) {
		rc = acct_error_set(err, ACCT_EINVAL, "/votes", "%.0f votes from %lld teachers", total,
				    (long long)num_teachers);
		goto out;
	}
	/* Theorem 23's condition first: it is a property of the request. */
	if ((rc = acct_pate_gnss_rdp(beta, release_sigma, order, &rdp_release, err)) < 0)
		goto out;
	ws = acct_pate_workspace_new(m, num_teachers);
	ls = malloc((size_t)num_teachers * sizeof(*ls));
	if (!ws || !ls) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if ((rc = acct_pate_gnmax_logq(votes, m, sigma, &logq, err)) < 0 ||
	    (rc = acct_pate_gnmax_rdp_ss(ws, logq, sigma, order, &rdp, err)) < 0 ||
	    (rc = acct_pate_gnmax_local_sensitivity(ws, votes, m, num_teachers, sigma, order, ls, err)) < 0)
		goto out;
	smooth = acct_pate_smooth_sensitivity(beta, ls, (size_t)num_teachers);
	/* What a release scales its noise by: the two-sided bound. */
	if ((rc = acct_pate_ls_bound_new(ws, m, num_teachers, sigma, order, &lsb, err)) < 0)
		goto out;
	if (!(lsb_d = malloc(acct_pate_ls_bound_distances(lsb) * sizeof(*lsb_d)))) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	if ((rc = acct_pate_ls_bound_at(ws, lsb, votes, lsb_d, err)) < 0)
		goto out;
	release_smooth = acct_pate_smooth_sensitivity(beta, lsb_d, acct_pate_ls_bound_distances(lsb));

	ans = json_object();
	failed = !ans || set(ans, "logq", json_real(logq)) < 0 || set(ans, "rdp", json_real(rdp)) < 0 ||
		 set(ans, "local_sensitivity", srv_json_real_array(ls, (size_t)num_teachers)) < 0 ||
		 set(ans, "smooth_sensitivity", json_real(smooth)) < 0 ||
		 set(ans, "release_smooth_sensitivity", json_real(release_smooth)) < 0 ||
		 set(ans, "rdp_of_release", json_real(rdp_release)) < 0;
	rc = srv_json_hand_over(ans, failed, ret_answer, err);
out:
	acct_pate_ls_bound_free(lsb);
	acct_pate_workspace_free(ws);
	free(lsb_d);
	free(ls);
	free(votes);
	return rc;
}
