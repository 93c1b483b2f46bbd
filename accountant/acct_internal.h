/*
 * acct_internal.h: names shared between the files of accountant/ only.
 */
#ifndef ACCT_INTERNAL_H
#define ACCT_INTERNAL_H

#include "acct.h"

/*
 * Renyi-family filters (rdp, zcdp): set up the orders and bounds, price an
 * event in the filter's coordinates, test a composition, and report the
 * filter's own epsilon.  Implemented in acct_renyi_filter.c.
 */
int acct__filter_init_renyi(acct_filter *f, acct_error *err);
int acct__filter_price_renyi(const acct_filter *f, const acct_event *ev, acct_cost *ret_cost,
			     acct_error *err);
bool acct__filter_within_renyi(const acct_filter *f, const acct_cost *total);
double acct__filter_epsilon_renyi(const acct_filter *f, const acct_cost *total);

/*
 * Prices an event that is not an (epsilon, delta) pair for a basic ledger by
 * the tightest accountant that can price it at `delta_share`.
 */
int acct__basic_price_fallback(const acct_filter *f, const acct_event *ev, double delta_share,
			       double *ret_eps, double *ret_delta, acct_error *err);

/* ---- accountants ---- */

/*
 * basic and strong composition of (epsilon, delta) releases (acct_basic.c),
 * without validation.  basic answers a lone Gaussian-type event by its
 * exact curve (acct__exact_*).  acct__basic_delta writes only ret->delta
 * (or, for that event, the whole result).
 */
int acct__basic_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err);
int acct__strong_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err);
int acct__basic_delta(const acct_event *ev, double epsilon, acct_result *ret, acct_error *err);

/* The rho of an event (acct_zcdp_rho without validation), and the tight
 * conversion of rho-zCDP to delta at `eps` (acct_zcdp.c). */
int acct__zcdp_rho(const acct_event *ev, acct_neighbor neighbor, double *ret_rho,
		   acct_error *err);
double acct__zcdp_to_delta(double rho, double eps);

/* epsilon at `delta` and delta at `epsilon` under zcdp (no validation):
 * the event's rho converted tightly, or by rho + 2 sqrt(rho ln 1/delta)
 * when `bun_steinke`.  Each writes only the member it answers. */
int acct__zcdp_epsilon(const acct_event *ev, acct_neighbor nb, double delta, bool bun_steinke,
		       acct_result *ret, acct_error *err);
int acct__zcdp_delta(const acct_event *ev, acct_neighbor nb, double epsilon, bool bun_steinke,
		     acct_result *ret, acct_error *err);

/* RDP of an event at `n` orders (acct_rdp without validation nor the work
 * check below); `where` is the JSON pointer of the event.  `work` counts the
 * RDP work units spent (NULL: this call's own count), refused with
 * ACCT_EUNSUPPORTED past DPG_MAX_RDP_WORK. */
int acct__rdp_at(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
		 double *ret_rdp, double *ret_extra_delta, const char *where, double *work,
		 acct_error *err);

/* Refuses with ACCT_EUNSUPPORTED, before pricing, an event whose known RDP
 * work at these orders passes DPG_MAX_RDP_WORK: at `orders_where` when one
 * sampled event alone does, else at "/event". */
int acct__rdp_work_check(const acct_event *ev, const double *orders, size_t n,
			 const char *orders_where, acct_error *err);

/* One order's improved conversion (CKS 2020 Prop. 12, with the KL bound). */
double acct__rdp_order_epsilon(double a, double r, double delta);
double acct__rdp_order_log_delta(double a, double r, double epsilon);

/*
 * epsilon / delta under rdp, moments, pld (no validation).  rdp refuses
 * delta = 0 (no finite epsilon); pld answers a lone discrete Gaussian by
 * its exact curve (acct__exact_*), having no grid for it.
 */
int acct__rdp_epsilon(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
		      double delta, double *work, acct_result *ret, acct_error *err);
int acct__rdp_delta(const acct_event *ev, acct_neighbor nb, const double *orders, size_t n,
		    double epsilon, double *work, acct_result *ret, acct_error *err);
int acct__moments_epsilon(const acct_event *ev, acct_neighbor nb, double delta,
			  acct_result *ret, acct_error *err);
int acct__moments_delta(const acct_event *ev, acct_neighbor nb, double epsilon,
			acct_result *ret, acct_error *err);
int acct__pld_epsilon(const acct_event *ev, acct_neighbor nb, double interval, double *work, double delta,
		      acct_result *ret, acct_error *err);
/* How many grid points of ev's PLD (its remove direction) hold mass: the
 * discretisation's own check (a discrete event's PLD holds only its atoms). */
int acct__pld_points(const acct_event *ev, acct_neighbor nb, double interval, size_t *ret,
		     acct_error *err);
int acct__pld_delta(const acct_event *ev, acct_neighbor nb, double interval, double *work, double epsilon,
		    acct_result *ret, acct_error *err);

/*
 * Lone Gaussian-type events priced by their exact privacy curve
 * (acct_exact.c).  acct__exact_leaf returns the gaussian or
 * discrete_gaussian that `ev` is (through compositions of one event), or
 * NULL.  The two others answer for such an event (epsilon and delta each an
 * upper bound) and return ACCT_EUNSUPPORTED, err untouched, for any other.
 */
const acct_event *acct__exact_leaf(const acct_event *ev);
int acct__exact_epsilon(const acct_event *ev, double delta, acct_result *ret, acct_error *err);
int acct__exact_delta(const acct_event *ev, double epsilon, acct_result *ret, acct_error *err);

#endif
