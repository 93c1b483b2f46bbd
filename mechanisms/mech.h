/*
 * mech.h: randomness, exact noise samplers and the mechanisms of dpgate.
 *
 * Pure: no I/O besides the kernel's getrandom, no logging.  Every mechanism
 * returns its output together with the privacy event that prices it.  Errors
 * are reported through acct_error (accountant/acct.h).
 */
#ifndef MECH_H
#define MECH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acct.h"

/* ==== Randomness ==== */

/*
 * A source of cryptographically secure random bytes.  Three kinds exist:
 *  - system: every byte straight from getrandom(2);
 *  - stream: a ChaCha20 keystream keyed with 256 bits from another rng, for
 *    bulk noise (training);
 *  - seeded: a ChaCha20 keystream keyed from a caller's seed, compiled
 *    only under DPG_TESTING; mech_rng_is_deterministic() says so and the
 *    server refuses it.
 * A mech_rng is not thread-safe: one per thread or job.
 */
typedef struct mech_rng mech_rng;

mech_rng *mech_rng_new_system(void);
mech_rng *mech_rng_new_stream(mech_rng *key_source);
#ifdef DPG_TESTING
mech_rng *mech_rng_new_seeded(const uint8_t seed[32]);
#endif
bool mech_rng_is_deterministic(const mech_rng *rng);
void mech_rng_free(mech_rng *rng);

/* Fills buf with n random bytes.  Returns 0, or ACCT_EINTERNAL if the kernel
 * refuses (the caller must not release anything then). */
int mech_rng_bytes(mech_rng *rng, void *buf, size_t n);

/* Fills buf with n bytes straight from getrandom(2), without an rng object
 * (what a system rng does per call).  Returns 0, or ACCT_EINTERNAL if the
 * kernel refuses. */
int mech_system_bytes(void *buf, size_t n);

/*
 * Draws a uniform double in [0, 1): 53 random bits scaled by 2^-53, so every
 * multiple of 2^-53 in [0, 1) is equally likely.  Returns 0 and writes *ret,
 * or ACCT_EINTERNAL when the rng fails (nothing written).
 *
 * Not for releasing private scalars by inversion (Mironov 2012): releases use
 * the exact samplers below.
 */
int mech_rng_uniform(mech_rng *rng, double *ret);

/*
 * Fills out[0..n) with independent standard normal doubles (Box-Muller: the
 * radius from a full-precision Exp(1), so the tail reaches about 38 sd; the
 * angle from a 53-bit uniform; both outputs of each pair used).  Meant for
 * bulk gradient noise in training, where the noise is added to a large
 * aggregate and the output is not a single released scalar; releases of
 * scalars go through mech_gaussian_* (exact discrete sampler on a
 * power-of-two grid).  Training is priced as the continuous Gaussian
 * mechanism: these doubles approximate it (the approximation is not priced;
 * its tail is cut past e^-745 of mass).  Returns 0, or ACCT_EINTERNAL when
 * the rng fails (out is then unspecified).
 */
int mech_rng_normal_fill(mech_rng *rng, double *out, size_t n);

/*
 * Draws an integer uniform in [0, bound) without bias (rejection of the
 * 2^64 mod bound lowest draws).  Returns 0 and writes *ret, ACCT_EINVAL when
 * bound is 0, or ACCT_EINTERNAL when the rng fails.
 */
int mech_rng_uint_below(mech_rng *rng, uint64_t bound, uint64_t *ret);

/*
 * Draws true with probability exactly p (the double p, as a dyadic rational):
 * random bits are compared lazily with the binary expansion of p, two bits on
 * average.  Returns 0 and writes *ret, ACCT_EINVAL when p is not in [0, 1]
 * (or NaN), or ACCT_EINTERNAL when the rng fails.
 */
int mech_rng_bernoulli(mech_rng *rng, double p, bool *ret);

/* ==== end randomness ==== */

/* ==== Samplers and mechanisms ==== */

/* ---- Exact samplers (Canonne, Kamath, Steinke 2020) ---- */

/*
 * Draws Bernoulli(exp(-num/den)) exactly (CKS Algorithm 1), for any num and
 * den >= 1.  Expected cost: a few uniform integers.  Returns 0 and writes
 * *ret, ACCT_EINVAL when den is 0, or ACCT_EINTERNAL when the rng fails.
 */
int mech_sample_bernoulli_exp(mech_rng *rng, uint64_t num, uint64_t den, bool *ret);

/*
 * Draws Z from the discrete Laplace distribution of scale t = scale_num /
 * scale_den, Pr[Z = z] = (1 - e^{-1/t}) / (1 + e^{-1/t}) e^{-|z|/t}, exactly
 * (CKS Algorithm 2).  1 <= scale_num, scale_den < 2^63.  Returns 0 and
 * writes *ret, ACCT_EINVAL for bad parameters, ACCT_EINTERNAL when the rng
 * fails.
 */
int mech_sample_discrete_laplace(mech_rng *rng, uint64_t scale_num, uint64_t scale_den,
				 int64_t *ret);

/*
 * Writes the rational scale_num / scale_den >= scale that the mechanisms use
 * for a discrete Laplace of real scale `scale` (40 significant bits, rounded
 * up, a power-of-two denominator).  Returns 0, or ACCT_EINVAL when scale is
 * outside [DPG_MECH_DLAP_MIN_SCALE, DPG_MECH_DLAP_MAX_SCALE].
 */
int mech_discrete_laplace_scale(double scale, uint64_t *ret_num, uint64_t *ret_den);

/*
 * The sigma that mech_sample_discrete_gaussian really uses for `sigma`: sigma
 * rounded up to S / 2^f with S < 2^24 and f <= 20 (so that CKS's acceptance
 * test fits 128-bit integers).  NAN when sigma is outside
 * [DPG_MECH_DGAUSS_MIN_SIGMA, DPG_MECH_DGAUSS_MAX_SIGMA].  Events must name
 * this value, not the requested one.
 */
double mech_discrete_gaussian_sigma(double sigma);

/*
 * Draws Z from the discrete Gaussian N_Z(0, s^2), Pr[Z = z] proportional to
 * exp(-z^2 / (2 s^2)), s = mech_discrete_gaussian_sigma(sigma), by CKS
 * Algorithm 3 (discrete Laplace proposals of scale floor(s) + 1 accepted with
 * Bernoulli(exp(-(|y| - s^2/t)^2 / (2 s^2)))).  Proposals with |y| > 64 t + 64
 * are rejected outright: their acceptance probability is below e^-1900, so the
 * output differs from N_Z(0, s^2) by less than that in total variation.
 * Returns 0 and writes *ret, ACCT_EINVAL for sigma out of range,
 * ACCT_EINTERNAL when the rng fails.
 */
int mech_sample_discrete_gaussian(mech_rng *rng, double sigma, int64_t *ret);



/* ---- Additive noise (mech_noise.c) ---- */

/*
 * Laplace release of values[0..n) (n <= DPG_MAX_VECTOR_LEN) with L1
 * sensitivity `l1_sensitivity` and noise scale `scale` (b; epsilon =
 * sensitivity / b).  Exact discrete Laplace noise on the power-of-two grid
 * g = 2^(ceil(log2 b) - 40); see mech_noise.c for why this resists
 * floating-point attacks.  ret_out[0..n) receives the noisy values;
 * *ret_event is discrete_laplace {noise_parameter, sensitivity} in grid
 * units for n = 1 (sensitivity ceil(D/g)), epsilon_delta {a (ceil(D/g) + n -
 * 1), 0} for vectors.  Returns 0, or ACCT_EINVAL (where: /values/i,
 * /sensitivity, /scale), ACCT_ENOMEM, ACCT_EINTERNAL; outputs untouched on
 * failure.
 */
int mech_laplace(mech_rng *rng, const double *values, size_t n, double l1_sensitivity,
		 double scale, double *ret_out, acct_event **ret_event, acct_error *err);

/*
 * The grid mech_laplace uses for scale b: values are in units 2^-shift
 * with shift = 40 - ceil(log2 b), so that b spans 2^39 .. 2^40 units; and
 * the sensitivity its event states, in those units, for n values of L1
 * sensitivity D: ceil(D / g) + n - 1 (docs/mechanisms.md, "Sensitivities
 * on the noise grid").
 */
int mech_laplace_grid_shift(double scale);
double mech_laplace_grid_sensitivity(double l1_sensitivity, double scale, size_t n);

/* A release asked for at an epsilon is refused (at /epsilon) when its
 * sensitivity on the grid exceeds D's image by more than this factor: its
 * event would price visibly more than the epsilon asked for. */
#define MECH_GRID_MAX_OVERPRICE 1.01

/*
 * The grid mech_gaussian uses for standard deviation `scale`: values are in
 * units 2^-shift with shift = 20 - ceil(log2 scale), so that the scale spans
 * 2^19 .. 2^20 units.
 */
int mech_gaussian_grid_shift(double scale);

/*
 * The sensitivity, in units of that grid, of the event mech_gaussian states
 * for n values of L2 sensitivity D at standard deviation `scale`: ceil(D / g)
 * for a scalar, D / g + sqrt(n) rounded up for a vector (docs/mechanisms.md,
 * "Sensitivities on the noise grid").
 */
double mech_gaussian_grid_sensitivity(double l2_sensitivity, double scale, size_t n);

/*
 * One value rounded down to the grid 2^-shift plus exact discrete Gaussian
 * noise of standard deviation `sigma` (value units) on that grid, for a
 * caller that must choose the grid from public figures only (a grid chosen
 * from a data-dependent sigma shows in the output's last bits).  sigma 2^shift
 * must be in [8, 2^20]: the sampler then rounds it up by a factor below
 * 1 + 2^-23.  The output is finite (mech__grid_value).  Returns 0,
 * ACCT_EINVAL (value or sigma out of range) or ACCT_EINTERNAL (rng).
 */
int mech_gaussian_on_grid(mech_rng *rng, double value, double sigma, int shift, double *ret,
			  acct_error *err);

/*
 * Gaussian release with L2 sensitivity and standard deviation `sigma`:
 * exact discrete Gaussian noise on the grid g = 2^(ceil(log2 sigma) - 20).
 * *ret_event: discrete_gaussian {sigma/g (as used), ceil(D/g)} for n = 1;
 * zcdp {rho = (D/g + sqrt(n))^2 / (2 (sigma/g)^2)} for vectors (CKS 2020,
 * Theorem 14).  Same conventions as mech_laplace (where /sigma for sigma).
 */
int mech_gaussian(mech_rng *rng, const double *values, size_t n, double l2_sensitivity,
		  double sigma, double *ret_out, acct_event **ret_event, acct_error *err);

/*
 * The smallest sigma (to 2^-45 relative, rounded up) for which the Gaussian
 * mechanism with L2 sensitivity D is (epsilon, delta)-DP, by the analytic
 * Gaussian mechanism's exact condition (Balle and Wang 2018, Theorem 8):
 * Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D) <=
 * delta.  This calibrates the continuous Gaussian; the release itself is the
 * discrete Gaussian on a grid, whose event the ledger prices.  Returns 0 or
 * ACCT_EINVAL (/epsilon, /delta, /sensitivity).
 */
int mech_gaussian_sigma_analytic(double epsilon, double delta, double l2_sensitivity,
				 double *ret_sigma, acct_error *err);

/*
 * Discrete Laplace on integers: ret_out[i] = values[i] + Z_i, Z_i exact
 * discrete Laplace of scale `scale` (rounded up to 40 significant bits).
 * Event: discrete_laplace {1/scale used, sensitivity} for n = 1,
 * epsilon_delta {sensitivity / scale used, 0} for vectors (L1).  Sums
 * beyond int64 saturate (post-processing).
 */
int mech_discrete_laplace(mech_rng *rng, const int64_t *values, size_t n,
			  int64_t l1_sensitivity, double scale, int64_t *ret_out,
			  acct_event **ret_event, acct_error *err);

/*
 * Discrete Gaussian on integers with L2 sensitivity (an integer for n = 1)
 * and sigma (rounded up, mech_discrete_gaussian_sigma).  Event:
 * discrete_gaussian {sigma used, sensitivity} for n = 1, zcdp {D^2 /
 * (2 sigma^2)} for vectors (CKS 2020, Theorem 14).
 */
int mech_discrete_gaussian(mech_rng *rng, const int64_t *values, size_t n,
			   double l2_sensitivity, double sigma, int64_t *ret_out,
			   acct_event **ret_event, acct_error *err);

/* ---- Selection (mech_select.c) ---- */

/*
 * The epsilon that selection events name for a requested epsilon: epsilon
 * (1 + 2^-50) + 2^-38, covering the rounding of the exponents (mech_select.c).
 */
double mech_exponential_epsilon_used(double epsilon);

/*
 * Exponential mechanism (McSherry and Talwar 2007): picks index i of
 * scores[0..n) with probability proportional to exp(eps u_i / (2 D)), or
 * exp(eps u_i / D) when `monotone` (all scores move in the same direction
 * between neighbours; McSherry-Talwar's remark, Dwork-Roth Thm 3.10).
 * Sampled exactly from exponents rounded to 2^-42.  Event:
 * exponential_mechanism {mech_exponential_epsilon_used(eps)}.  Returns 0 or
 * ACCT_EINVAL (where: /scores, /scores/i, /sensitivity, /epsilon), ...
 */
int mech_exponential(mech_rng *rng, const double *scores, size_t n, double sensitivity,
		     double epsilon, bool monotone, size_t *ret_index, acct_event **ret_event,
		     acct_error *err);

/*
 * Permute-and-flip (McKenna and Sheldon 2020): epsilon-DP, never worse than
 * the exponential mechanism in expected error.  Event: permute_and_flip
 * {mech_exponential_epsilon_used(eps)}.  Same conventions.
 */
int mech_permute_and_flip(mech_rng *rng, const double *scores, size_t n, double sensitivity,
			  double epsilon, size_t *ret_index, acct_event **ret_event,
			  acct_error *err);

typedef enum mech_rnm_noise {
	MECH_RNM_LAPLACE,
	MECH_RNM_GUMBEL,
	MECH_RNM_GAUSSIAN,
} mech_rnm_noise;

/*
 * Report-noisy-max: the index of the largest noisy score.  `param` is
 * epsilon for Laplace and Gumbel noise, sigma for Gaussian noise.
 *  - Gumbel: identical in distribution to the exponential mechanism; event
 *    exponential_mechanism.
 *  - Laplace: scale 2D/eps (D/eps monotone), Dwork-Roth Claim 3.9, on the
 *    grid with discrete Laplace noise; event epsilon_delta {eps_eff, 0}.
 *  - Gaussian: argmax of a Gaussian release of the score vector with L2
 *    sensitivity D sqrt(n); that release's event (monotone is ignored).
 */
int mech_report_noisy_max(mech_rng *rng, const double *scores, size_t n, double sensitivity,
			  mech_rnm_noise noise, double param, bool monotone, size_t *ret_index,
			  acct_event **ret_event, acct_error *err);

/* The replacement probability p used by k-ary randomized response at
 * epsilon (dp_accounting's noise_parameter), rounded up. */
double mech_randomized_response_noise(double epsilon, int64_t k);

/*
 * k-ary randomized response of value in [0, k): with probability p (above)
 * a uniform bucket, else the value; epsilon-DP (Warner 1965; Kairouz et al.
 * 2016).  Event: randomized_response {p, k}.  Returns 0 or ACCT_EINVAL
 * (where: /value, /num_buckets, /epsilon), ...
 */
int mech_randomized_response(mech_rng *rng, int64_t value, int64_t k, double epsilon,
			     int64_t *ret, acct_event **ret_event, acct_error *err);

/* ---- Label exponential mechanism (binary labels, Hamming agreement) ---- */

/*
 * keep_probability p = e^x / (1 + e^x), x = epsilon / (2 sensitivity): the
 * score q of the label EM is Binomial(n, p) (see mech_labelem.c).
 */
double mech_label_em_keep_probability(double epsilon, double sensitivity);

/* log Pr[q = k] = log C(n, k) + k log p + (n - k) log(1 - p); -infinity
 * where that is below -DBL_MAX (epsilon / sensitivity so large that Pr[q = k]
 * for k < n underflows every double, or overflows itself).  Never NaN.
 * Returns 0, or ACCT_EINVAL (where: /n, /epsilon, /sensitivity, /ks). */
int mech_label_em_log_pmf(int64_t n, double epsilon, double sensitivity, int64_t k,
			  double *ret, acct_error *err);

/* Success probability Pr[q >= n/2], summed in log space around the tail's
 * largest term (relative error below 1e-12).  Returns 0 or ACCT_EINVAL. */
int mech_label_em_success_probability(int64_t n, double epsilon, double sensitivity,
				      double *ret, acct_error *err);

/*
 * The inverse: the smallest epsilon whose success probability reaches
 * `target` in (0, 1), found by bisection (success is increasing in epsilon)
 * to 2^-50 relative, rounded to the side that reaches the target.  Returns 0
 * for targets already met as epsilon -> 0 (Pr[Bin(n, 1/2) >= n/2]).  Returns
 * 0, ACCT_EINVAL, or ACCT_ENUMERIC when the target is too close to 1 to be
 * reached in double precision.
 */
int mech_label_em_epsilon_for_success(int64_t n, double sensitivity, double target,
				      double *ret, acct_error *err);

/*
 * Releases labels ret_labels[0..n) (0/1, caller-allocated) by the label EM on
 * the private labels[0..n): the score is drawn as Binomial(n, p) by n exact
 * Bernoulli(p) trials, then a uniform labelling with that score by selection
 * sampling.  The 2n draws come from a ChaCha20 stream keyed from `key_rng`
 * (mech_rng_new_stream; a seeded key_rng gives a seeded stream).  The
 * privacy unit is one label and `sensitivity` (D) must be 1, the Hamming
 * score's; any other D is ACCT_EINVAL at /sensitivity.  *ret_event is binary
 * randomized_response with the keep probability p used, whose epsilon is
 * log(p / (1 - p)) = epsilon / (2D) = epsilon / 2 (mech_labelem.c derives it).
 * Returns 0, ACCT_EINVAL (bad parameters or a label not 0/1), ACCT_ENOMEM or
 * ACCT_EINTERNAL; on failure *ret_event is untouched and ret_labels holds
 * nothing usable.
 */
int mech_label_em(mech_rng *key_rng, const uint8_t *labels, size_t n, double epsilon,
		  double sensitivity, uint8_t *ret_labels, acct_event **ret_event,
		  acct_error *err);

/*
 * The event mech_label_em charges for n labels at (epsilon, sensitivity),
 * built without running it, so that a dry run or a reservation can price a
 * release before any label is read; the same code builds mech_label_em's
 * event.  Returns 0 and a new event (caller frees), or ACCT_EINVAL /
 * ACCT_ENOMEM as mech_label_em would.
 */
int mech_label_em_event(int64_t n, double epsilon, double sensitivity, acct_event **ret_event,
			acct_error *err);


/* ---- Hosted tables (mech_table.c) ---- */

typedef enum mech_col_kind {
	MECH_COL_NUMERIC,
	MECH_COL_CATEGORICAL,
} mech_col_kind;

/* A declared column of an upload's schema. */
typedef struct mech_column_decl {
	const char *name;
	mech_col_kind kind;
} mech_column_decl;

/* A parsed table held in memory; opaque. */
typedef struct mech_table mech_table;

/*
 * Parses CSV text[0..len) (RFC 4180, header row) into a table.  Rows end
 * at LF or CRLF (blank lines are skipped); a CR that no LF follows, outside
 * a quoted field, is an error at its line, and inside one it is data.  With
 * decl == NULL, a column is numeric when every field parses as a finite
 * number, categorical otherwise.  With a declared schema, a header column
 * not declared (by name, or by a declaration named "*", which gives the
 * kind of every column not named), a column declared by name missing, or a
 * non-number in a numeric column is an error.  Ragged rows, limits
 * (DPG_MAX_CSV_BYTES, _ROWS, _COLUMNS, _FIELD_BYTES, _CATEGORIES) and bad
 * quoting are errors.  Errors
 * are ACCT_EINVAL with the line (1 = header) and column in the text and in
 * err->where ("/csv/line/17/age"), or ACCT_ENOMEM.  On success *ret owns a
 * new table (mech_table_free).
 */
int mech_table_parse_csv(const char *text, size_t len, const mech_column_decl *decl,
			 size_t n_decl, mech_table **ret, acct_error *err);
void mech_table_free(mech_table *t);
size_t mech_table_rows(const mech_table *t);
size_t mech_table_columns(const mech_table *t);
/* The heap bytes the table holds (an upper bound within a few percent). */
size_t mech_table_bytes(const mech_table *t);
const char *mech_table_column_name(const mech_table *t, size_t j);
mech_col_kind mech_table_column_kind(const mech_table *t, size_t j);
/* The index of the column named `name` (names are unique), or
 * mech_table_columns(t) when none is or name is NULL. */
size_t mech_table_column_index(const mech_table *t, const char *name);

/*
 * Raw cell access for trainers (the server never serves rows): the values of
 * numeric column j (rows of them; NULL for a categorical column), the
 * category index of row i of categorical column j (-1 for a numeric one), and
 * the number and names of a categorical column's categories.  The table
 * keeps ownership of everything returned.
 */
const double *mech_table_numeric_values(const mech_table *t, size_t j);
int64_t mech_table_category_of(const mech_table *t, size_t j, size_t i);
size_t mech_table_category_count(const mech_table *t, size_t j);
const char *mech_table_category_name(const mech_table *t, size_t j, size_t k);
/* Copies numeric column j into x[0], x[stride], ..., one value a row (a
 * column of a row-major matrix).  False, nothing written, when column j
 * does not exist or is categorical. */
bool mech_table_copy_numeric(const mech_table *t, size_t j, double *x, size_t stride);

/*
 * Queries.  Each validates (where: /column for unknown or wrongly typed
 * columns, /lo, /hi, /epsilon, /q, /categories/i), computes the exact
 * answer, releases it through a mechanism above and returns that
 * mechanism's event:
 *  - count: discrete Laplace of scale 1/eps (sensitivity 1);
 *  - sum of values clamped to [lo, hi]: Laplace, sensitivity max(|lo|,|hi|)
 *    (add/remove) or hi - lo (replace);
 *  - mean: noisy clamped sum (eps/2) over noisy count (eps/2), clamped to
 *    [lo, hi]; event composed of both (replace: count public, sum gets eps);
 *  - histogram over the caller's public categories of a categorical column:
 *    discrete Laplace per bin, L1 sensitivity 1 (add/remove) or 2 (replace);
 *  - quantile q in [0, 1]: exponential mechanism over the intervals between
 *    sorted clamped values (Smith 2011), event exponential_mechanism.
 */
int mech_table_count(mech_rng *rng, const mech_table *t, double epsilon, int64_t *ret,
		     acct_event **ret_event, acct_error *err);
int mech_table_sum(mech_rng *rng, const mech_table *t, const char *column, double lo, double hi,
		   double epsilon, acct_neighbor neighbor, double *ret, acct_event **ret_event,
		   acct_error *err);
int mech_table_mean(mech_rng *rng, const mech_table *t, const char *column, double lo,
		    double hi, double epsilon, acct_neighbor neighbor, double *ret,
		    acct_event **ret_event, acct_error *err);
int mech_table_histogram(mech_rng *rng, const mech_table *t, const char *column,
			 const char *const *categories, size_t n_categories, double epsilon,
			 acct_neighbor neighbor, int64_t *ret_counts, acct_event **ret_event,
			 acct_error *err);
int mech_table_quantile(mech_rng *rng, const mech_table *t, const char *column, double q,
			double lo, double hi, double epsilon, double *ret, acct_event **ret_event,
			acct_error *err);

/*
 * What a quantile's scores are made of: a[0 .. rows + 1] holds 0, the
 * sorted grid indexes ceil((x - lo) / (hi - lo) 2^32) of the column's
 * values clamped to [lo, hi], and 2^32 + 1, the number of grid points
 * 0 .. 2^32; *ret_centre is c = q rows rounded
 * to a multiple of 2^-20.  Grid point j scores -|r(j) - c|, r(j) the count
 * of a[1 .. rows] at or below j (mech_table_quantile draws from these;
 * docs/mechanisms.md derives their sensitivity).
 */
int mech_table_quantile_ranks(const mech_table *t, const char *column, double q, double lo,
			      double hi, uint64_t *a, double *ret_centre, acct_error *err);

/* ==== end samplers and mechanisms ==== */

/* ==== L2 output-perturbation noise (mech_ball.c) ==== */

/*
 * Draws eta in R^d with density proportional to exp(-beta ||eta||_2), the
 * noise of output perturbation for an L2 sensitivity S at beta = eps / S
 * (Chaudhuri et al. 2011; Hamm et al. 2016, Theorems 1 and 3): its norm is
 * Gamma(shape d, scale 1/beta), its direction uniform on the sphere, all
 * from `rng`.  Writes out[0..d).  Returns 0; ACCT_EINVAL (nothing written)
 * when d is 0 or above DPG_MAX_VECTOR_LEN or beta is not finite and
 * positive; ACCT_EINTERNAL when the rng fails (out unspecified).
 */
int mech_ball_sample(mech_rng *rng, size_t d, double beta, double *out, acct_error *err);

/* ==== end L2 output-perturbation noise ==== */

/* ==== bulk normal noise (ziggurat) ==== */

/*
 * Fills out[0..n) with independent standard normal doubles by the 256-layer
 * ziggurat of Marsaglia and Tsang (2000) with Marsaglia's exact tail: one
 * 64-bit word of the stream per value about 99% of the time: 9 ns a value
 * against Box-Muller's 43 ns (bench_mechanisms, stream rng).  Within a layer values lie on a grid of
 * 2^-52 of the layer's width (Box-Muller's angle has 2^-53); the tail reaches
 * about 42 sd (Box-Muller's about 38).  A separate function so the seeded
 * streams other callers and their tests rely on keep their values; the same
 * pricing note as mech_rng_normal_fill applies (continuous Gaussian,
 * approximation unpriced).  Returns 0, or ACCT_EINTERNAL when the rng fails
 * (out is then unspecified).
 */
int mech_rng_normal_fill_fast(mech_rng *rng, double *out, size_t n);

/* ==== end bulk normal noise ==== */

/* ==== PATE aggregation (mech_pate.c) ==== */

/*
 * The noisy aggregation of teacher votes of Papernot et al. (ICLR 2017:
 * LNMax; ICLR 2018: GNMax, Confident-GNMax = Algorithm 1, Interactive-GNMax
 * = Algorithm 2), its per-query data-dependent RDP, and the
 * smooth-sensitivity release of that RDP (2018, Appendix B.5).  The PATE
 * session routes and the `pate` trainer both run queries through here, so
 * a label and its bookkeeping are the same whoever asks.
 */
typedef enum mech_pate_agg {
	MECH_PATE_LNMAX = 0,       /* "lnmax" */
	MECH_PATE_GNMAX = 1,       /* "gnmax" */
	MECH_PATE_CONFIDENT = 2,   /* "confident_gnmax" */
	MECH_PATE_INTERACTIVE = 3, /* "interactive_gnmax" */
	MECH_PATE_AGG_COUNT
} mech_pate_agg;

/* The JSON name of an aggregator (NULL if unknown); its value by name (0
 * or -1). */
const char *mech_pate_agg_name(mech_pate_agg agg);
int mech_pate_agg_from_name(const char *name, mech_pate_agg *ret);

/* True for the aggregators that run a threshold check before answering. */
bool mech_pate_agg_checks(mech_pate_agg agg);

/* An aggregator's configuration; the *_used and lap_* fields are filled by
 * mech_pate_cfg_resolve from the requested ones. */
typedef struct mech_pate_cfg {
	mech_pate_agg agg;
	int64_t num_teachers;
	int64_t num_classes;
	double sigma1, sigma2;        /* as requested */
	double sigma1_used, sigma2_used; /* as the sampler uses them */
	double threshold;             /* T */
	double gamma;                 /* lnmax: Laplace scale 1/gamma */
	uint64_t lap_num, lap_den;    /* the discrete Laplace scale used, >= 1/gamma */
	double student_confidence;    /* interactive: NAN = never the student's label */
	double delta_share;           /* basic ledgers: delta per query event; 0 = none */
	size_t n_orders;
	double orders[DPG_MAX_PATE_ORDERS]; /* the orders of the private analysis */
} mech_pate_cfg;

/*
 * Fills sigma1_used and sigma2_used (mech_discrete_gaussian_sigma) or, for
 * lnmax, lap_num / lap_den (mech_discrete_laplace_scale of 1/gamma).
 * Returns 0, or ACCT_EINVAL at "/sigma2" or "/gamma" when the sampler
 * cannot reach the scale.
 */
int mech_pate_cfg_resolve(mech_pate_cfg *c, acct_error *err);

/* Where a query's label came from. */
enum { MECH_PATE_SRC_NONE = 0, MECH_PATE_SRC_TEACHERS = 1, MECH_PATE_SRC_STUDENT = 2 };

/* The outcome of one query. */
typedef struct mech_pate_outcome {
	int64_t label;        /* -1: abstain */
	unsigned char source; /* MECH_PATE_SRC_* */
	bool checked;         /* a threshold check ran (is charged) */
	bool teacher_answer;  /* GNMax / LNMax answered (is charged) */
} mech_pate_outcome;

/*
 * Runs one query on its vote histogram v[0..num_classes) (integers, sum at
 * most num_teachers; p, the student's probabilities, for interactive only):
 * the threshold check when the aggregator has one, then the noisy argmax
 * with exact discrete Gaussian (discrete Laplace for lnmax) noise, ties
 * broken uniformly.  Writes the outcome and the query's data-dependent RDP
 * at c->orders into dd[0..n_orders): Proposition 7 and Theorem 6 for the
 * answer, the threshold check's data-dependent cost (2018, Section 4.2).
 * Returns 0, ACCT_EINTERNAL (rng) or an analysis error; *out and dd are
 * then unspecified.
 */
int mech_pate_run_query(mech_rng *rng, const mech_pate_cfg *c, const double *v, const double *p,
			mech_pate_outcome *out, double *dd, acct_error *err);

/*
 * The integer statistic a threshold check compares with zero, on the vote
 * histogram v (p, the student's public probabilities, for interactive
 * only): max_j v_j - ceil(T) for confident_gnmax, max_j (v_j +
 * floor(-M p_j - T)) for interactive_gnmax (M = num_teachers).  A teacher
 * changing, giving or withdrawing its vote moves it by at most 1, the
 * sensitivity `pate_threshold` is priced for (docs/pate.md, "The
 * statistics' sensitivities").  Meaningful for those two aggregators only.
 */
int64_t mech_pate_threshold_statistic(const mech_pate_cfg *c, const double *v, const double *p);

/*
 * The smooth-sensitivity release of the data-dependent RDP at one order
 * (2018, Appendix B.5).  Histograms of the answered queries are added one at
 * a time; then f (the sum of acct_pate_gnmax_rdp_ss over them, plus each
 * threshold check at its data-independent lambda / (2 sigma1^2)), its
 * smooth sensitivity at beta (acct_pate_ls_bound per query, the two-sided
 * bound, summed over queries at each distance) and the public bound B = answers lambda / sigma2^2 +
 * checks lambda / (2 sigma1^2) are read.  Opaque; freed by
 * mech_pate_release_free.
 */
typedef struct mech_pate_release mech_pate_release;

int mech_pate_release_new(const mech_pate_cfg *c, double order, mech_pate_release **ret,
			  acct_error *err);
void mech_pate_release_free(mech_pate_release *r);
int mech_pate_release_add(mech_pate_release *r, const double *votes, acct_error *err);

/*
 * An optional first pass over the same histograms, before any
 * mech_pate_release_add: mech_pate_release_count adds each one's bound at
 * distance 0, then mech_pate_release_horizon(r, beta, max_walk) cuts the
 * distances every add walks to acct_pate_ls_bound_horizon's, past which
 * no term of the smooth sensitivity at that beta can be its largest.  The
 * figures at that beta are then those of the uncut release, at a cost of
 * the horizon in place of num_teachers + 1 distances per answer.
 *
 * max_walk (> 0) bounds the work whatever the data: no answer walks more
 * than max_walk / answers distances (at least 1).  Where that cap is
 * below num_teachers + 1, the SS reported is the larger of the capped
 * walk's and acct_pate_ls_bound_tail's public bound past it: equal to
 * the uncut SS where the horizon is within the cap (up to the tail's
 * rounding, which can only raise it), an upper bound on it and still
 * beta-smooth elsewhere.  max_walk <= 0: no cap.
 *
 * The adds must then be of the counted histograms, in the same order (a
 * further one is ACCT_EINTERNAL); figures after fewer or other adds, or
 * at a smaller beta, report an infinite SS, which no draw releases.
 */
int mech_pate_release_count(mech_pate_release *r, const double *votes, acct_error *err);
void mech_pate_release_horizon(mech_pate_release *r, double beta, int64_t max_walk);

/* The figures above for `answers` added histograms and `checks` checks. */
typedef struct mech_pate_release_figures {
	double f;          /* data-dependent RDP: private */
	double ss;         /* its smooth sensitivity: private */
	double bound;      /* B: public */
} mech_pate_release_figures;

void mech_pate_release_figures_get(const mech_pate_release *r, int64_t checks, double beta,
				   mech_pate_release_figures *ret);

/*
 * Draws the GNSS release f + S N(0, sigma^2) on a grid chosen from the
 * public bound only: f clamped to [0, B] and rounded to the grid g, S =
 * max(SS + g, 2^-8 B) (mech_pate.c says why each step keeps the release
 * (beta + MECH_PATE_GNSS_BETA_SLACK)-smooth).  sigma in
 * [MECH_PATE_GNSS_MIN_SIGMA, MECH_PATE_GNSS_MAX_SIGMA].  Returns 0 and
 * *ret_noisy, or ACCT_EINTERNAL.
 */
#define MECH_PATE_GNSS_BETA_SLACK 0x1p-22
#define MECH_PATE_GNSS_MIN_SIGMA 1e-6
#define MECH_PATE_GNSS_MAX_SIGMA 0x1p16

int mech_pate_release_draw(mech_rng *rng, const mech_pate_release_figures *fig, double sigma,
			   double *ret_noisy, acct_error *err);

/* ==== end PATE aggregation ==== */

#endif
