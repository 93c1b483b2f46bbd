/*
 * acct.h: the privacy event model and every accountant of dpgate.
 *
 * Pure numerics: nothing here does I/O, logs, or aborts on bad input.  Every
 * function that can fail returns 0 or a negative ACCT_E* code and fills a
 * caller-owned acct_error (first error wins).  The error type is shared by
 * every module of dpgate: mechanisms/ and trainers/ report through it too.
 */
#ifndef ACCT_H
#define ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpg_limits.h"

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

enum acct_code {
	ACCT_OK = 0,
	ACCT_EINVAL = -1,       /* bad input: HTTP 400, `where` names the field */
	ACCT_EUNSUPPORTED = -2, /* well-formed but cannot be priced: HTTP 422 */
	ACCT_ENUMERIC = -3,     /* a numerical routine failed to converge */
	ACCT_ENOMEM = -4,
	ACCT_EEXCEEDED = -5,    /* does not fit the budget: HTTP 409 */
	ACCT_EINTERNAL = -6,
};

#define ACCT_ERROR_WHERE_BYTES 128
#define ACCT_ERROR_TEXT_BYTES 256

/*
 * A caller-owned error record, in the manner of jansson's json_error_t.
 * `where` is a JSON pointer into the request ("/event/noise_multiplier"), or
 * empty when no single field is at fault.
 */
typedef struct acct_error {
	int code;
	char where[ACCT_ERROR_WHERE_BYTES];
	char text[ACCT_ERROR_TEXT_BYTES];
} acct_error;

/* Clears an error record.  Accepts NULL. */
void acct_error_init(acct_error *err);

/*
 * Records an error unless one is already recorded (the first error wins) and
 * returns `code`, so that callers can write `return acct_error_set(...)`.
 * `err` may be NULL, in which case only the code is returned.  The recorded
 * `where` and text are valid UTF-8 whatever the arguments (acct_utf8_scrub),
 * so that an error quoting client input, or cut short by the buffer, can
 * still be sent as JSON.
 */
int acct_error_set(acct_error *err, int code, const char *where,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A short, stable name for an error code ("invalid", "unsupported", ...). */
const char *acct_code_name(int code);

/*
 * UTF-8 as RFC 3629 defines it (shortest form, no surrogates, at most
 * U+10FFFF), the text JSON strings may hold.  acct_utf8_valid tells whether
 * the n bytes at s are valid UTF-8 and, when not, writes the offset of the
 * first byte that does not start a valid sequence.  acct_utf8_scrub
 * replaces, in place, each byte of a NUL-terminated string that is not part
 * of a valid sequence by '?'.
 */
bool acct_utf8_valid(const char *s, size_t n, size_t *ret_bad);
void acct_utf8_scrub(char *s);

/* ------------------------------------------------------------------------ */
/* Privacy events                                                            */
/* ------------------------------------------------------------------------ */

/*
 * The event types of DESIGN.md, named after dp_accounting's DpEvent classes.
 * The order is part of no contract; names are (see acct_event_type_name).
 */
typedef enum acct_event_type {
	ACCT_EV_GAUSSIAN,
	ACCT_EV_LAPLACE,
	ACCT_EV_DISCRETE_GAUSSIAN,
	ACCT_EV_DISCRETE_LAPLACE,
	ACCT_EV_RANDOMIZED_RESPONSE,
	ACCT_EV_EXPONENTIAL_MECHANISM,
	ACCT_EV_PERMUTE_AND_FLIP,
	ACCT_EV_EPSILON_DELTA,
	ACCT_EV_ZCDP,
	ACCT_EV_POISSON_SAMPLED,
	ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT,
	ACCT_EV_SELF_COMPOSED,
	ACCT_EV_COMPOSED,
	ACCT_EV_GNMAX,
	ACCT_EV_PATE_THRESHOLD,
	ACCT_EV_PATE_GNSS,
	ACCT_EV__COUNT
} acct_event_type;

typedef enum acct_neighbor {
	ACCT_ADD_REMOVE = 0,
	ACCT_REPLACE = 1,
} acct_neighbor;

typedef struct acct_event acct_event;

/*
 * One node of an event tree.  A tree owns its children: acct_event_free
 * frees the whole tree.  Fields not used by a type are zero.
 */
struct acct_event {
	acct_event_type type;
	union {
		struct { double noise_multiplier; } gaussian;    /* sigma / L2 sens. */
		struct { double noise_multiplier; } laplace;     /* b / L1 sens.     */
		struct { double sigma; double sensitivity; } discrete_gaussian;
		struct { double noise_parameter; double sensitivity; } discrete_laplace;
		struct { double noise_parameter; int64_t num_buckets; } randomized_response;
		struct { double epsilon; } exponential_mechanism;
		struct { double epsilon; } permute_and_flip;
		struct { double epsilon; double delta; } epsilon_delta;
		struct { double rho; } zcdp;
		struct { double sampling_probability; acct_event *event; } poisson_sampled;
		struct {
			int64_t source_dataset_size;
			int64_t sample_size;
			acct_event *event;
		} sampled_without_replacement;
		struct { int64_t count; acct_event *event; } self_composed;
		struct { size_t n; acct_event **events; } composed;
		struct { double sigma; } gnmax;
		struct { double sigma; } pate_threshold;
		/* The smooth-sensitivity (GNSS) release of PATE's data-dependent
		 * privacy cost: f + SS_beta N(0, sigma^2), Papernot et al. 2018,
		 * Theorem 23.  RDP only, for 1 < order < 1/(2 beta). */
		struct { double beta; double sigma; } pate_gnss;
	} u;
};

/*
 * The parameters of an event type, described once as data so that every
 * reader and writer of events (the server's JSON codec, the spec check,
 * free and copy here) walks one list instead of repeating a switch over
 * types.  The description knows no JSON: a parameter is a name, a kind, the
 * bounds a well-formed value lies in and where its field sits in
 * acct_event.  The bounds are those of the wire format; the stricter rules
 * of a type (acct_event_validate) are its validator's.
 */
typedef enum acct_param_kind {
	ACCT_PARAM_REAL,     /* a double in [lo, hi] */
	ACCT_PARAM_INT,      /* an int64_t in [min, max] */
	ACCT_PARAM_INT_REAL, /* an integer in [min, max], held in a double */
	ACCT_PARAM_EVENT,    /* a sub-event: an acct_event * the event owns */
	ACCT_PARAM_EVENTS,   /* at most max sub-events: an acct_event ** array
			      * the event owns, its length a size_t at
			      * count_offset */
} acct_param_kind;

enum acct_param_flag {
	ACCT_PARAM_LO_OPEN = 1 << 0, /* a real must be > lo, not >= lo */
	ACCT_PARAM_HI_OPEN = 1 << 1, /* a real must be < hi, not <= hi */
	ACCT_PARAM_MAX_PREV = 1 << 2, /* an integer's max is the value of the
				       * ACCT_PARAM_INT before it */
};

typedef struct acct_event_param {
	const char *name;    /* the JSON member name */
	acct_param_kind kind;
	unsigned flags;      /* acct_param_flag */
	double lo, hi;       /* ACCT_PARAM_REAL */
	int64_t min, max;    /* integers; max also bounds ACCT_PARAM_EVENTS */
	size_t offset;       /* offsetof(acct_event, u.<type>.<field>) */
	size_t count_offset; /* ACCT_PARAM_EVENTS: where its length is */
} acct_event_param;

/*
 * The parameters of `type` in their canonical order (the order the server
 * reads and prints them), *ret_n of them; NULL, *ret_n untouched, for a
 * type outside the table.  The array is static and read-only.
 */
const acct_event_param *acct_event_params(acct_event_type type, size_t *ret_n);

/* The JSON name of an event type ("poisson_sampled"), or NULL if invalid. */
const char *acct_event_type_name(acct_event_type type);

/* Looks a JSON type name up.  Returns 0 and writes *ret_type, or -1. */
int acct_event_type_from_name(const char *name, acct_event_type *ret_type);

/* Allocates a zeroed node of `type`; NULL when out of memory. */
acct_event *acct_event_new(acct_event_type type);

/* Frees a whole event tree.  Accepts NULL. */
void acct_event_free(acct_event *ev);

/* Deep-copies a tree; NULL when out of memory. */
acct_event *acct_event_copy(const acct_event *ev);

/* Convenience constructors; each returns NULL when out of memory and takes
 * ownership of `inner` in every case (freeing it on failure).  A NULL
 * `inner` gives NULL, so that they nest: a failed leaf fails the whole. */
acct_event *acct_event_epsilon_delta(double epsilon, double delta);
acct_event *acct_event_gaussian(double noise_multiplier);
acct_event *acct_event_self_composed(int64_t count, acct_event *inner);
acct_event *acct_event_poisson_sampled(double q, acct_event *inner);
/* The composition of events[0..n): a new composed node that takes
 * ownership of the n events in every case (freeing them on failure); the
 * array itself stays the caller's.  NULL when out of memory. */
acct_event *acct_event_composed(acct_event *const *events, size_t n);

/* ------------------------------------------------------------------------ */
/* Ledger filters (privacy filters for adaptively chosen releases)          */
/* ------------------------------------------------------------------------ */

typedef enum acct_ledger_kind {
	ACCT_LEDGER_BASIC = 0,
	ACCT_LEDGER_RDP = 1,
	ACCT_LEDGER_ZCDP = 2,
} acct_ledger_kind;

/* "basic", "rdp", "zcdp"; NULL if invalid. */
const char *acct_ledger_kind_name(acct_ledger_kind kind);
int acct_ledger_kind_from_name(const char *name, acct_ledger_kind *ret_kind);

#define ACCT_FILTER_MAX_ORDERS 64

/*
 * A composition vector in a ledger's coordinates: for `basic` v[0] = sum of
 * epsilon and v[1] = sum of delta; for `zcdp` v[0] = sum of rho; for `rdp`
 * v[i] = summed RDP at the filter's i-th order.  The running composition of
 * a dataset, the cost of one charge and the reserved total are all of this
 * type, so admission is O(n) in the number of coordinates only.
 */
typedef struct acct_cost {
	unsigned n;
	double v[ACCT_FILTER_MAX_ORDERS];
} acct_cost;

/*
 * The fixed configuration of one dataset's filter, derived from its budget
 * once (acct_filter_init) and then used read-only by every admission.
 */
typedef struct acct_filter {
	acct_ledger_kind kind;
	acct_neighbor neighbor;
	double epsilon_budget;
	double delta_budget;
	unsigned n_orders;                       /* rdp only */
	double orders[ACCT_FILTER_MAX_ORDERS];   /* rdp only */
	double bound[ACCT_FILTER_MAX_ORDERS];    /* rdp: B_alpha; zcdp: bound[0] = rho_B */
} acct_filter;

/*
 * Prepares a filter for a budget (epsilon_budget > 0, 0 <= delta_budget < 1).
 * Returns 0, or ACCT_EINVAL / ACCT_EUNSUPPORTED with `err` filled.
 */
int acct_filter_init(acct_filter *f, acct_ledger_kind kind, acct_neighbor neighbor,
		     double epsilon_budget, double delta_budget, acct_error *err);

/*
 * As acct_filter_init, for an rdp ledger whose filter uses the n `orders`
 * given instead of the default ones (n = 0 is acct_filter_init): each
 * finite, above DPG_MIN_FILTER_ORDER and at most DPG_MAX_RDP_ORDER, strictly
 * increasing, 1 <= n <= DPG_MAX_FILTER_ORDERS.  delta_budget is split over
 * these n orders, so fewer orders leave each a larger share, and one order
 * none to split.  Errors point at "/filter_orders" (or an element of it).
 */
int acct_filter_init_orders(acct_filter *f, acct_ledger_kind kind, acct_neighbor neighbor,
			    double epsilon_budget, double delta_budget, const double *orders,
			    unsigned n, acct_error *err);

/* The default rdp filter orders; *ret_n gets their count. */
const double *acct_filter_default_orders(unsigned *ret_n);

/* A zero composition vector of the filter's dimension. */
void acct_filter_zero(const acct_filter *f, acct_cost *ret_cost);

/*
 * Prices one event in the filter's coordinates.  `delta_share` is the delta a
 * `basic` ledger may spend on an event that is not an (epsilon, delta) pair
 * (0 means: only pure or (epsilon, delta) events are accepted).  Returns 0,
 * ACCT_EINVAL for a malformed event, or ACCT_EUNSUPPORTED when this ledger
 * cannot price it; *ret_cost is written only on success.
 */
int acct_filter_price(const acct_filter *f, const acct_event *ev, double delta_share,
		      acct_cost *ret_cost, acct_error *err);

/*
 * a + b, a * b and a / b rounded toward +infinity: a double at or above the
 * exact result, the least one while the result is at least 2^-968 (TwoSum
 * and fma give the exact rounding error, so the step up is taken only when
 * the rounded result fell below); a nonzero product or quotient below that,
 * where the error may not be representable, is stepped up one ulp.  For
 * finite arguments, and b > 0 for the quotient.
 */
double acct_add_up(double a, double b);
double acct_mul_up(double a, double b);
double acct_div_up(double a, double b);
/*
 * The epsilon of an event that is pure epsilon-DP by its definition
 * (laplace: 1/b; discrete_laplace: a D; randomized_response:
 * ln(1 + k (1 - p) / p); exponential_mechanism, permute_and_flip and
 * epsilon_delta with delta 0: their epsilon), rounded upward; -1 for any
 * other event.
 */
double acct_pure_epsilon_up(const acct_event *ev);
/* a * b rounded toward -infinity (the greatest double at or below it, or
 * one ulp lower for a nonzero product below 2^-968). */
double acct_mul_down(double a, double b);
/* 1 / s^2 rounded toward +infinity, for s > 0: 1 over s^2 rounded down. */
double acct_inv_sq_up(double s);

/*
 * Adds `b` to `a` coordinate-wise, each sum rounded toward +infinity, so a
 * stored running total never underestimates the exact sum of its charges.
 */
void acct_cost_add_up(acct_cost *a, const acct_cost *b);

/*
 * acct_cost_add_up(a, b) n times over (n >= 0), with every sum rounded as
 * that loop rounds it, in time that grows with the binades the totals
 * cross rather than with n: what n separate charges of b leave.
 */
void acct_cost_add_up_times(acct_cost *a, const acct_cost *b, int64_t n);

/*
 * Subtracts `b` from `a`, each difference rounded toward +infinity and
 * clamped at zero (used to return a released reservation).  An infinite
 * coordinate of `a` stays infinite.
 */
void acct_cost_sub_up(acct_cost *a, const acct_cost *b);

/*
 * True when the composition `total` is within the filter's budget: for basic
 * both sums within the budget, for zcdp rho within rho_B, for rdp at least one
 * order within its B_alpha.
 */
bool acct_filter_within(const acct_filter *f, const acct_cost *total);

/* False when the filter refuses every charge: an rdp filter whose every
 * order's bound is 0 (its delta share converts to no RDP budget there). */
bool acct_filter_admits_some(const acct_filter *f);

/*
 * The filter's own epsilon for a composition: what the gate compares with the
 * budget, so that the dashboard and the gate agree.  For basic, the summed
 * epsilon; for zcdp and rdp, the epsilon the composition converts to at the
 * filter's delta (split as the filter splits it).  Never below zero.
 */
double acct_filter_epsilon(const acct_filter *f, const acct_cost *total);

/* The filter's own delta spent (basic: the summed delta; otherwise the
 * budget's delta once anything was charged, else 0). */
double acct_filter_delta(const acct_filter *f, const acct_cost *total);

/* ==== Accountants: epsilon, delta, rdp, calibration ==== */

/*
 * The accountants of DESIGN.md.  `strong` is the advanced composition
 * theorem; `pld` privacy loss distributions.  The order is part of no
 * contract; the names are (acct_accountant_name).
 */
typedef enum acct_accountant {
	ACCT_BASIC = 0,
	ACCT_STRONG,
	ACCT_MOMENTS,
	ACCT_RDP,
	ACCT_ZCDP,
	ACCT_PLD,
	ACCT__N_ACCOUNTANTS
} acct_accountant;

/* "basic", "strong", "moments", "rdp", "zcdp", "pld"; NULL if invalid. */
const char *acct_accountant_name(acct_accountant a);
int acct_accountant_from_name(const char *name, acct_accountant *ret);

/* The PLD grid interval used when acct_options.pld_interval is 0. */
#define ACCT_PLD_DEFAULT_INTERVAL 1e-4

/*
 * How to price: which accountant, which neighbouring relation, and the
 * accountant's options.  Zero-initialised options mean: basic accountant,
 * add_remove, tight zCDP conversion, default PLD interval, default orders.
 */
typedef struct acct_options {
	acct_accountant accountant;
	acct_neighbor neighbor;
	bool zcdp_bun_steinke;   /* zcdp: rho + 2 sqrt(rho ln 1/delta) */
	double pld_interval;     /* pld: loss grid step; 0 = default */
	double *pld_work;        /* pld: grid work done so far, shared by the calls
				  * that use these options and bounded in total by
				  * DPG_MAX_PLD_WORK; NULL: each call has its own */
	double *rdp_work;        /* rdp: the same, in RDP work units, bounded by
				  * DPG_MAX_RDP_WORK */
	const double *orders;    /* rdp: NULL = acct_rdp_default_orders */
	size_t n_orders;
} acct_options;

/* What an accountant answers: (epsilon, delta) and, for rdp and moments,
 * the optimal order (RDP order alpha, or the moment lambda); NAN if none. */
typedef struct acct_result {
	double epsilon;
	double delta;
	double order;
} acct_result;

/*
 * Checks the rules an event must meet under a neighbouring relation beyond
 * its syntax: sampling without replacement only under `replace` (Wang,
 * Balle, Kasiviswanathan 2019 bound the replace-one relation), Poisson
 * sampling only under `add_remove` (its amplification is proven for
 * add/remove), randomized response only under `replace` (a respondent's
 * answer has no add/remove neighbour), sample_size <= source_dataset_size,
 * finite positive parameters, counts within DPG_MAX_COMPOSITION_COUNT and
 * depth within DPG_MAX_EVENT_DEPTH.  Returns 0, ACCT_EINVAL (malformed) or
 * ACCT_EUNSUPPORTED (well formed, not definable under this relation) with
 * err->where a JSON pointer below `prefix` ("/event" when prefix is NULL).
 */
int acct_event_validate(const acct_event *ev, acct_neighbor neighbor, acct_error *err);
int acct_event_validate_at(const acct_event *ev, acct_neighbor neighbor, const char *prefix,
			   acct_error *err);

/*
 * The smallest epsilon such that the event is (epsilon, delta)-DP under
 * opt->accountant (an upper bound for every accountant; pld's grid is
 * pessimistic).  delta in [0, 1).  Writes *ret on success.  An event the
 * accountant cannot price yields ACCT_EUNSUPPORTED with the reason and
 * err->where pointing at the offending sub-event ("/event/event"); it is
 * never approximated.  An event that is not (eps, delta)-DP for any finite
 * epsilon at this delta (e.g. delta = 0 for a Gaussian) also yields
 * ACCT_EUNSUPPORTED.
 */
int acct_epsilon(const acct_event *ev, double delta, const acct_options *opt,
		 acct_result *ret, acct_error *err);

/* The smallest delta such that the event is (epsilon, delta)-DP under
 * opt->accountant (rdp, moments, zcdp, pld, basic); same conventions. */
int acct_delta(const acct_event *ev, double epsilon, const acct_options *opt,
	       acct_result *ret, acct_error *err);

/*
 * The exact delta at epsilon of one release, an upper bound that errs only
 * by rounding, always upward: acct_gaussian_delta for Gaussian noise of
 * noise multiplier s (Balle and Wang 2018, Theorem 8), and
 * acct_discrete_gaussian_delta for discrete Gaussian noise N_Z(0, sigma^2)
 * on an integer query of sensitivity D (Canonne, Kamath, Steinke 2020,
 * Theorem 7).  Invalid arguments give 1.
 */
double acct_gaussian_delta(double noise_multiplier, double epsilon);
double acct_discrete_gaussian_delta(double sigma, double sensitivity, double epsilon);

/*
 * dp_accounting's default RDP orders (DESIGN.md): 1.1, 1.2, ..., 10.9, then
 * 11..63, then 128, 256, 512, 1024.  The array is static and read-only.
 */
const double *acct_rdp_default_orders(size_t *ret_n);

/*
 * The RDP curve of an event at `n` orders (each > 1, finite) under a
 * relation: ret_rdp[i] = epsilon(orders[i]).  Infinite entries mean no
 * bound at that order.  `*ret_extra_delta` (may be NULL) receives the delta
 * that (epsilon, delta) events with delta > 0 add outside the RDP curve
 * (1 - prod (1 - delta_i)); with NULL such events are refused.  A
 * subsampled Gaussian's curve is +infinity above order 1e5; an event whose
 * pricing would take more than DPG_MAX_RDP_WORK units of work is refused
 * with ACCT_EUNSUPPORTED, at "/orders" when one sampled event alone would.
 */
int acct_rdp(const acct_event *ev, acct_neighbor neighbor, const double *orders, size_t n,
	     double *ret_rdp, double *ret_extra_delta, acct_error *err);

/*
 * Refuses with ACCT_EUNSUPPORTED, at `where`, orders at which pricing one
 * Poisson-sampled (or without-replacement sampled) Gaussian under rdp would
 * take more than DPG_MAX_RDP_WORK units of work: a dataset's filter orders
 * are checked so when it is made.  Returns 0 when they are fine.
 */
int acct_rdp_orders_check(const double *orders, size_t n, const char *where, acct_error *err);

/*
 * RDP of the Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019):
 * integer orders by the binomial closed form (Sec. 3.3, eq. for A_alpha),
 * other orders by adaptive numerical integration of
 * A_alpha = E_{z~N(0,s^2)} [(1 - q + q exp((2z-1)/(2 s^2)))^alpha].
 * `force_integration` integrates at integer orders too (for tests).
 * Returns the RDP, +INF when unbounded, or NAN when integration failed.
 */
double acct_rdp_sampled_gaussian(double q, double sigma, double alpha, bool force_integration);

/*
 * The improved RDP-to-DP conversion (Canonne, Kamath, Steinke 2020,
 * Prop. 12; Balle et al. 2020, Thm. 21), minimised over the orders, with
 * the KL bound delta <= sqrt(1 - exp(-rdp)) for tiny curves: epsilon at
 * delta (ret_order = the optimal order), and delta at epsilon.
 */
double acct_rdp_to_epsilon(const double *orders, const double *rdp, size_t n, double delta,
			   double *ret_order);
double acct_rdp_to_delta(const double *orders, const double *rdp, size_t n, double epsilon,
			 double *ret_order);

/*
 * rho of an event under zCDP (Bun, Steinke 2016): Gaussian 1/(2 s^2),
 * discrete Gaussian D^2/(2 s^2) (Canonne et al. 2020, Prop. 5), zcdp events,
 * pure eps-DP events eps^2/2 (Prop. 1.4), the exponential mechanism eps^2/8
 * (Cesar, Rogers 2021), gnmax 1/s^2 and pate_threshold 1/(2 s^2);
 * compositions add.  Subsampled events and (eps, delta>0) events have no
 * zCDP bound: ACCT_EUNSUPPORTED.
 */
int acct_zcdp_rho(const acct_event *ev, acct_neighbor neighbor, double *ret_rho,
		  acct_error *err);

/*
 * epsilon of rho-zCDP at delta: the tight conversion inf_{alpha>1} of the
 * improved RDP conversion of alpha*rho (CKS 2020 Prop. 12), or with
 * bun_steinke rho + 2 sqrt(rho ln(1/delta)) (Bun, Steinke 2016, Prop. 1.3).
 */
double acct_zcdp_to_epsilon(double rho, double delta, bool bun_steinke);

/* The largest rho whose tight conversion, computed, gives at most epsilon
 * lowered by 2^-40 of itself at delta (the margin covers the rounding of
 * the conversion: the exact one then stays at or below epsilon). */
double acct_zcdp_rho_budget(double epsilon, double delta);

/*
 * Switches GSL's abort-on-error handler off, once per process.  Every
 * accountant entry point that calls GSL calls it; a program with threads
 * calls it before it starts them (GSL reads the handler unlocked).
 */
void acct_gsl_quiet(void);

/*
 * log(n choose k) for real n >= k >= 0, through lgamma_r: lgamma() writes
 * the global signgam, a data race when server threads price at once.
 */
double acct_log_binomial(double n, double k);

/*
 * Calibration (Brent's method): `field` names one numeric field of `node`,
 * a node of the tree `root` (noise_multiplier, sigma, noise_parameter,
 * epsilon, rho, count, sampling_probability, sample_size, ...).  Finds the
 * smallest noise (or the largest count, rate, epsilon ...) at which root is
 * (epsilon, delta)-DP under opt, and returns the conservative end of the
 * final bracket, so *ret_epsilon <= epsilon always.  The field is left set
 * to the answer.  ACCT_EUNSUPPORTED when no value in the field's range meets
 * the target.
 */
int acct_calibrate(acct_event *root, acct_event *node, const char *field, double epsilon,
		   double delta, const acct_options *opt, double *ret_value,
		   double *ret_epsilon, acct_error *err);

/* ==== end accountants ==== */

/* ==== PATE analysis ==== */

/*
 * Data-dependent privacy analysis of the PATE aggregators of Papernot et al.
 * 2018, "Scalable private learning with PATE" (ICLR 2018, arXiv:1802.08908):
 * GNMax (Proposition 7, Theorem 6, Proposition 8), the Confident-GNMax
 * threshold check (Section 4.2 and Appendix B), and the smooth sensitivity of
 * the data-dependent RDP (Algorithms 3-5, Theorem 23).  Vote histograms are
 * arrays of `num_classes` finite reals (integer-valued where stated); sigma
 * is a standard deviation.  Every function writes its out-parameters only on
 * success and otherwise returns a negative ACCT_E* code with `err` filled.
 * The GSL error handler must be off (gsl_set_error_handler_off) in the
 * process: GSL statuses are checked, never left to abort.
 */

/* Largest noise standard deviation accepted by the PATE routes. */
#define ACCT_PATE_MAX_SIGMA 1e9

/*
 * Proposition 7: an upper bound on ln q, q = Pr[GNMax answer != plurality],
 * q <= sum_{i != i*} Pr[N(0, 2 sigma^2) >= n_i* - n_i], computed in log space
 * (log erfc, log-sum-exp) and capped at ln(1 - 1/num_classes).  i* is the
 * first class with the most votes.  num_classes >= 2, sigma > 0.
 */
int acct_pate_gnmax_logq(const double *votes, size_t num_classes, double sigma,
			 double *ret_logq, acct_error *err);

/*
 * Proposition 8: the data-independent RDP of one GNMax answer (votes of
 * L2 sensitivity sqrt 2), lambda / sigma^2, at each of the n orders (> 1).
 */
int acct_pate_gnmax_rdp_data_independent(double sigma, const double *orders, size_t n,
					 double *ret_rdp, acct_error *err);

/*
 * Theorem 6 with the higher orders mu_2 = sigma sqrt(ln 1/q), mu_1 = mu_2 + 1
 * of Proposition 10: the data-dependent RDP of one GNMax answer at each order,
 * given an upper bound logq <= 0 on ln q (-INFINITY allowed: a fixed output
 * costs 0).  Where the theorem's conditions fail (mu_1 <= lambda, mu_2 <= 1,
 * q outside the range of Lemma 9 where the bound increases in q, or
 * ln 1/q <= mu_2 / sigma^2) the order falls back to lambda / sigma^2, and the
 * result is never above it.
 */
int acct_pate_gnmax_rdp(double logq, double sigma, const double *orders, size_t n,
			double *ret_rdp, acct_error *err);

/*
 * Confident-GNMax threshold check (Algorithm 1): ln Pr[max_i n_i + N(0,
 * sigma^2) >= threshold], the maximum vote rounded to the nearest integer.
 */
int acct_pate_threshold_logpr(const double *votes, size_t num_classes, double threshold,
			      double sigma, double *ret_logpr, acct_error *err);

/*
 * Data-dependent RDP of the threshold check given logpr = ln Pr[answered]:
 * the check is a Gaussian mechanism of sensitivity 1 on max votes, so
 * Theorem 6 applies with q = min(Pr[answered], 1 - Pr[answered]) and noise
 * sqrt(2) sigma (as for GNMax's sensitivity sqrt 2); falls back to, and never
 * exceeds, the data-independent lambda / (2 sigma^2).
 */
int acct_pate_threshold_rdp(double logpr, double sigma, const double *orders, size_t n,
			    double *ret_rdp, acct_error *err);

/* The data-independent RDP of the threshold check, lambda / (2 sigma^2). */
int acct_pate_threshold_rdp_data_independent(double sigma, const double *orders, size_t n,
					     double *ret_rdp, acct_error *err);

/*
 * Workspace for the smooth-sensitivity analysis of GNMax histograms of up to
 * `max_classes` classes and `max_teachers` teachers: a Brent root solver, the
 * grouped histogram that Algorithms 4-5 walk, and a table of Gaussian tail
 * probabilities by vote margin (O(max_classes + max_teachers) memory).  NULL
 * when out of memory or a size is outside [2, DPG_MAX_VOTE_CLASSES] and
 * [1, DPG_MAX_TEACHERS].  Not thread-safe: one workspace per thread.
 */
typedef struct acct_pate_workspace acct_pate_workspace;

acct_pate_workspace *acct_pate_workspace_new(size_t max_classes, int64_t max_teachers);

/* Frees a workspace.  Accepts NULL. */
void acct_pate_workspace_free(acct_pate_workspace *ws);

/*
 * ln q0(sigma, lambda) (Appendix B.4): the root of "Theorem 6's bound equals
 * lambda / sigma^2", below which the smooth-sensitivity analysis uses the
 * data-dependent bound; bracketed from ln q <= min(-(1 + 1/sigma)^2,
 * -((lambda - 0.99) / sigma)^2, -1/sigma^2) and refined by Brent's method.
 * ACCT_EUNSUPPORTED when Theorem 6's conditions fail there.
 */
int acct_pate_gnmax_logq0(acct_pate_workspace *ws, double sigma, double order,
			  double *ret_logq0, acct_error *err);

/*
 * The RDP at one order that the smooth-sensitivity analysis bounds and
 * releases: lambda / sigma^2 when logq >= ln q0, Theorem 6's bound below.
 */
int acct_pate_gnmax_rdp_ss(acct_pate_workspace *ws, double logq, double sigma, double order,
			   double *ret_rdp, acct_error *err);

/*
 * Algorithms 3-5 (Proposition 13): upper bounds on the local sensitivity of
 * acct_pate_gnmax_rdp_ss at distance d = 0 .. num_teachers - 1 from the
 * integer vote histogram `votes` (sum <= num_teachers), written to
 * ret_ls[0 .. num_teachers - 1] (caller-owned).  Distance is the number of
 * teachers changing their vote; beyond the distances the walk of Algorithms
 * 4-5 visits, the bound is the plateau LS(q1), q1 = B_l(q0).  Runs in
 * O(num_teachers * distinct vote values) at worst.
 */
int acct_pate_gnmax_local_sensitivity(acct_pate_workspace *ws, const double *votes,
				      size_t num_classes, int64_t num_teachers, double sigma,
				      double order, double *ret_ls, acct_error *err);

/*
 * Smooth sensitivity (Nissim, Raskhodnikova and Smith 2007; PATE 2018
 * Section B.5): max_d e^{-beta d} ls[d] over d = 0 .. n - 1, beta >= 0.  A
 * positive term that underflows counts as the smallest positive double, so
 * a positive sensitivity is never rounded down to 0.
 */
double acct_pate_smooth_sensitivity(double beta, const double *ls, size_t n);

/*
 * The release's bound on the local sensitivity at distance d, for one
 * (num_classes, num_teachers, sigma, order): a grid of cells in z =
 * erfc^-1(2q/(m-1)) whose bounds cover every neighbour of a histogram in
 * the cell, and two walks that find the least and the most q within each
 * distance.  Two-sided, where Algorithms 4-5 walk one way, and so a
 * beta-smooth upper bound through acct_pate_smooth_sensitivity whatever
 * the shape of LS(q) (the derivation is in acct_pate.c and docs/pate.md).
 * ACCT_EUNSUPPORTED where Theorem 6 does not apply or its bound is found
 * not to be monotone in q.
 */
typedef struct acct_pate_ls_bound acct_pate_ls_bound;

int acct_pate_ls_bound_new(acct_pate_workspace *ws, size_t num_classes, int64_t num_teachers,
			   double sigma, double order, acct_pate_ls_bound **ret,
			   acct_error *err);

/* Frees a bound.  Accepts NULL. */
void acct_pate_ls_bound_free(acct_pate_ls_bound *b);

/* How many distances the bound gives: num_teachers + 1 (0 .. num_teachers;
 * beyond, it is constant). */
size_t acct_pate_ls_bound_distances(const acct_pate_ls_bound *b);

/*
 * The bound at distances 0 .. num_teachers from the integer vote histogram
 * `votes` (the bound's classes; sum <= num_teachers), into ret_ls
 * (caller-owned, acct_pate_ls_bound_distances(b) long).  Non-decreasing in
 * d.  ws must hold the bound's classes and teachers.
 */
int acct_pate_ls_bound_at(acct_pate_workspace *ws, const acct_pate_ls_bound *b,
			  const double *votes, double *ret_ls, acct_error *err);

/* The same bound at distances 0 .. n - 1 only (1 <= n <=
 * acct_pate_ls_bound_distances(b)): the first n values acct_pate_ls_bound_at
 * writes, at the cost of n distances. */
int acct_pate_ls_bound_prefix(acct_pate_workspace *ws, const acct_pate_ls_bound *b,
			      const double *votes, double *ret_ls, size_t n, acct_error *err);

/*
 * The distances a smooth sensitivity needs.  For `answers` histograms
 * whose bounds at distance 0 sum to `at_0` (a float sum S(0)), the sum
 * S(d) of their bounds at any distance is at most answers * T, T the
 * largest cell bound; so past the n returned, e^(-beta d) S(d) stays
 * below S(0) (with a relative margin of 1e-6 for rounding), and
 * acct_pate_smooth_sensitivity over distances 0 .. n - 1 equals the one
 * over all of them.  acct_pate_ls_bound_distances(b) when no shorter n
 * is sure (beta or at_0 not positive).
 */
size_t acct_pate_ls_bound_horizon(const acct_pate_ls_bound *b, double beta, double answers,
				  double at_0);

/*
 * A bound on what the distances left out of a walk cut at `distances`
 * can add to a smooth sensitivity: at least e^(-beta d) answers T for
 * every d >= distances (T the largest cell bound), 0 when no distance is
 * left out.  It depends on the public configuration only, so the maximum
 * of a cut smooth sensitivity and this tail is still beta-smooth
 * (Nissim, Raskhodnikova, Smith 2007, Def. 2.1): for neighbours x, y the
 * term at d of y is at most e^beta times the term at d + 1 of x, which
 * is within the cut or at most the tail.  And it bounds the uncut one
 * from above, which is what a release needs.
 */
double acct_pate_ls_bound_tail(const acct_pate_ls_bound *b, double beta, double answers,
			       size_t distances);

/*
 * Theorem 23: RDP at `order` of the GNSS release f(D) + SS_beta(D) N(0,
 * sigma^2): lambda e^{2 beta} / sigma^2 + (beta lambda - ln(1 - 2 lambda beta)
 * / 2) / (lambda - 1), valid for 1 < lambda < 1 / (2 beta) (any lambda > 1
 * when beta = 0).
 */
int acct_pate_gnss_rdp(double beta, double sigma, double order, double *ret_rdp,
		       acct_error *err);

/* ==== end PATE analysis ==== */

#endif
