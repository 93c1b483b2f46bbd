/*
 * test_mech.c: each mechanism's output distribution against its closed form
 * (or a numerical integral of it written here), and its event.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "mech.h"
#include "test_util.h"

/* A scalar release drawn N times: the mechanism, the value released at
 * `sensitivity` and `scale`, the law its outputs must follow (and two it
 * must tell apart: the location moved by 0.1, the scale grown by 0.1) and
 * the check of the event its first draw states. */
struct scalar_release {
	uint8_t seed;
	int (*release)(mech_rng *rng, const double *values, size_t n, double sensitivity,
		       double scale, double *ret_out, acct_event **ret_event, acct_error *err);
	double value, sensitivity, scale;
	double (*cdf)(double x, const void *ctx);
	void (*check_event)(const acct_event *ev);
};

static void check_scalar_release(const struct scalar_release *c)
{
	enum { N = 100000 };
	double *x = malloc(N * sizeof(double)), out;
	const struct test_loc_scale right = {c->value, c->scale},
				    wrong[] = {{c->value + 0.1, c->scale}, {c->value, c->scale + 0.1}};
	mech_rng *r = test_rng(c->seed);

	for (int i = 0; i < N; i++) {
		acct_event *ev = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(c->release(r, &c->value, 1, c->sensitivity, c->scale, &out, &ev, &err), 0,
			     "%s", err.text);
		if (i == 0)
			c->check_event(ev);
		acct_event_free(ev);
		x[i] = out;
	}
	test_expect_ks_fit(x, N, c->cdf, &right, wrong, 2);
	free(x);
	mech_rng_free(r);
}

/* mech_laplace at D = 1, b = 2. */
static void laplace_scalar_event(const acct_event *ev)
{
	double eps;

	cr_assert_eq(ev->type, ACCT_EV_DISCRETE_LAPLACE);
	eps = ev->u.discrete_laplace.noise_parameter * ev->u.discrete_laplace.sensitivity;
	/* epsilon = D / b = 0.5, never understated, rounding tiny. */
	cr_assert_geq(eps, 0.5);
	cr_assert_lt(eps, 0.5 * (1 + 1e-9));
	cr_assert_eq(ev->u.discrete_laplace.sensitivity, floor(ev->u.discrete_laplace.sensitivity));
}

Test(mech, laplace_scalar_distribution_and_event)
{
	const struct scalar_release c = {30, mech_laplace, 12.5, 1.0, 2.0, test_cdf_laplace,
					 laplace_scalar_event};

	check_scalar_release(&c);
}

Test(mech, laplace_vector_event_covers_rounding)
{
	enum { D = 5, N = 20000 };
	double v[D] = {-3, 0, 1e6, 0.25, 7}, out[D], *col = malloc(N * sizeof(double));
	struct test_loc_scale ls = {1e6, 4.0};
	mech_rng *r = test_rng(31);

	for (int i = 0; i < N; i++) {
		acct_event *ev = NULL;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(mech_laplace(r, v, D, 2.0, 4.0, out, &ev, &err), 0);
		cr_assert_eq(ev->type, ACCT_EV_EPSILON_DELTA);
		cr_assert_geq(ev->u.epsilon_delta.epsilon, 0.5);
		cr_assert_lt(ev->u.epsilon_delta.epsilon, 0.5 * (1 + 1e-9));
		cr_assert_eq(ev->u.epsilon_delta.delta, 0.0);
		acct_event_free(ev);
		col[i] = out[2];
	}
	cr_assert_gt(test_ks_p(col, N, test_cdf_laplace, &ls), TEST_P_MIN);
	free(col);
	mech_rng_free(r);
}

/* mech_gaussian at D = 1, sigma = 3. */
static void gaussian_scalar_event(const acct_event *ev)
{
	double nm;

	cr_assert_eq(ev->type, ACCT_EV_DISCRETE_GAUSSIAN);
	nm = ev->u.discrete_gaussian.sigma / ev->u.discrete_gaussian.sensitivity;
	/* sigma / D = 3 up to the grid rounding (2^-18 relative). */
	cr_assert_lt(fabs(nm / 3.0 - 1), 1e-5);
	cr_assert_eq(ev->u.discrete_gaussian.sensitivity, floor(ev->u.discrete_gaussian.sensitivity));
}

Test(mech, gaussian_scalar_distribution_and_event)
{
	const struct scalar_release c = {32, mech_gaussian, -40.0, 1.0, 3.0, test_cdf_gauss,
					 gaussian_scalar_event};

	check_scalar_release(&c);
}

Test(mech, gaussian_vector_event_is_zcdp)
{
	double v[4] = {1, 2, 3, 4}, out[4];
	acct_event *ev = NULL;
	acct_error err;
	mech_rng *r = test_rng(33);

	acct_error_init(&err);
	cr_assert_eq(mech_gaussian(r, v, 4, 1.0, 2.0, out, &ev, &err), 0);
	cr_assert_eq(ev->type, ACCT_EV_ZCDP);
	/* rho = D^2 / (2 sigma^2) = 1/8, inflated by the rounding: sigma = 2
	 * is 2^19 grid units, so D = 1 is 2^18 units plus sqrt(4) = 2 for the
	 * rounding of 4 coordinates; rho grows by (1 + 2^-17)^2. */
	cr_assert_geq(ev->u.zcdp.rho, 0.125 * (1 + 0x1p-17) * (1 + 0x1p-17));
	cr_assert_lt(ev->u.zcdp.rho, 0.125 * (1 + 0x1p-17) * (1 + 0x1p-17) * (1 + 1e-9));
	acct_event_free(ev);
	mech_rng_free(r);
}

Test(mech, analytic_gaussian_sigma)
{
	/* Balle-Wang condition written out here; sigma is the smallest meeting
	 * it, and it beats the classic sqrt(2 ln(1.25/delta)) / eps. */
	static const double cases[][3] = {{1.0, 1e-5, 1.0}, {0.5, 1e-6, 2.0}, {3.0, 1e-3, 1.0}};

	for (size_t i = 0; i < 3; i++) {
		double eps = cases[i][0], delta = cases[i][1], d = cases[i][2], s;
		acct_error err;

		acct_error_init(&err);
		cr_assert_eq(mech_gaussian_sigma_analytic(eps, delta, d, &s, &err), 0);
		for (int side = 0; side < 2; side++) {
			double ss = side ? s : s * (1 - 1e-9);
			double dd = gsl_cdf_ugaussian_P(d / (2 * ss) - eps * ss / d) -
				    exp(eps) * gsl_cdf_ugaussian_P(-d / (2 * ss) - eps * ss / d);

			if (side)
				cr_assert_leq(dd, delta);
			else
				cr_assert_gt(dd, delta);
		}
		if (eps < 1.0 + 1e-12)
			cr_assert_lt(s, d * sqrt(2 * log(1.25 / delta)) / eps);
	}
}

/* A scalar integer release: mech_discrete_laplace (scale t) or
 * mech_discrete_gaussian (sigma) of value with sensitivity. */
struct int_release {
	bool gaussian;
	int64_t value;
	double sensitivity, scale;
};

static int release_int(mech_rng *r, const struct int_release *c, int64_t *out, acct_event **ev,
		       acct_error *err)
{
	if (c->gaussian)
		return mech_discrete_gaussian(r, &c->value, 1, c->sensitivity, c->scale, out, ev, err);
	return mech_discrete_laplace(r, &c->value, 1, (int64_t)c->sensitivity, c->scale, out, ev,
				     err);
}

/* Counts the noise out - value of n releases in obs[0..2w] (test_int_cell)
 * and returns the first release's event (the caller frees it). */
static acct_event *count_int_noise(mech_rng *r, const struct int_release *c, int n, int w,
				   uint64_t *obs)
{
	acct_event *first = NULL;

	for (int i = 0; i < n; i++) {
		acct_event *ev = NULL;
		acct_error err;
		int64_t out;

		acct_error_init(&err);
		cr_assert_eq(release_int(r, c, &out, &ev, &err), 0, "%s", err.text);
		if (i == 0)
			first = ev;
		else
			acct_event_free(ev);
		obs[test_int_cell(out - c->value, w)]++;
	}
	return first;
}

/*
 * Scalar integer releases: the noise out - value against the exact pmf
 * (CKS 2020), and the event naming exactly the mechanism that ran.  The
 * discrete Laplace of scale 2.5 has noise parameter 1/2.5 = 0.4; the
 * discrete Gaussian of sigma 4 (an exact sampler sigma) keeps 4.
 */
Test(mech, scalar_integer_releases)
{
	enum { N = 100000, W = 40 };
	static const struct {
		struct int_release c;
		uint8_t tag;
		acct_event_type type;
		double param, sensitivity; /* noise_parameter or sigma */
	} cases[] = {
		{{false, 1000, 1, 2.5}, 34, ACCT_EV_DISCRETE_LAPLACE, 0.4, 1.0},
		{{true, -7, 2.0, 4.0}, 35, ACCT_EV_DISCRETE_GAUSSIAN, 4.0, 2.0},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct int_release *c = &cases[k].c;
		uint64_t obs[2 * W + 1] = {0};
		double prob[2 * W + 1];
		mech_rng *r = test_rng(cases[k].tag);
		acct_event *ev;

		if (c->gaussian)
			test_dgauss_pmf(c->scale, W, prob);
		else
			test_dlap_pmf(c->scale, W, prob);
		ev = count_int_noise(r, c, N, W, obs);
		cr_assert_eq(ev->type, cases[k].type);
		if (c->gaussian) {
			cr_assert_eq(ev->u.discrete_gaussian.sigma, cases[k].param);
			cr_assert_eq(ev->u.discrete_gaussian.sensitivity, cases[k].sensitivity);
		} else {
			cr_assert_eq(ev->u.discrete_laplace.noise_parameter, cases[k].param);
			cr_assert_eq(ev->u.discrete_laplace.sensitivity, cases[k].sensitivity);
		}
		acct_event_free(ev);
		cr_assert_gt(test_chi2_p(obs, prob, 2 * W + 1, N), TEST_P_MIN, "case %zu", k);
		mech_rng_free(r);
	}
}

/*
 * Near the ends of int64 the sum value + noise would overflow for half the
 * draws; it saturates instead (refusing would depend on the noise, which
 * leaks): from INT64_MAX every output is within reach of INT64_MAX below it
 * and never wraps, from INT64_MIN likewise above it, and both ends are hit.
 */
Test(mech, integer_releases_saturate_at_the_ends)
{
	enum { N = 2000 };
	static const int64_t ends[] = {INT64_MAX, INT64_MIN};
	mech_rng *r = test_rng(36);

	for (int g = 0; g < 2; g++)
		for (size_t e = 0; e < 2; e++) {
			struct int_release c = {g == 1, ends[e], 1.0, 2.5};
			int at_end = 0;

			for (int i = 0; i < N; i++) {
				acct_event *ev = NULL;
				acct_error err;
				int64_t out;

				acct_error_init(&err);
				cr_assert_eq(release_int(r, &c, &out, &ev, &err), 0, "%s", err.text);
				acct_event_free(ev);
				if (e == 0)
					cr_assert_geq(out, INT64_MAX - 1000, "%lld", (long long)out);
				else
					cr_assert_leq(out, INT64_MIN + 1000, "%lld", (long long)out);
				at_end += out == c.value;
			}
			/* P(noise >= 0) > 1/2 for either distribution. */
			cr_assert_gt(at_end, N / 3, "gaussian %d, end %zu: %d", g, e, at_end);
		}
	mech_rng_free(r);
}

/* Exponential-mechanism probabilities exp(c u_i) / sum. */
static void em_probs(const double *u, size_t n, double c, double *p)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i] = exp(c * u[i]);
	for (size_t i = 0; i < n; i++)
		p[i] /= s;
}

Test(mech, exponential_mechanism_distribution)
{
	enum { K = 5, N = 100000 };
	double u[K] = {0, 1, 2, 3, 1.5}, p[K], wrong[K];
	mech_rng *r = test_rng(36);

	for (int mono = 0; mono < 2; mono++) {
		uint64_t obs[K] = {0};

		em_probs(u, K, mono ? 1.0 : 0.5, p);
		em_probs(u, K, mono ? 1.1 : 0.55, wrong);
		for (int i = 0; i < N; i++) {
			acct_event *ev = NULL;
			acct_error err;
			size_t idx;

			acct_error_init(&err);
			cr_assert_eq(mech_exponential(r, u, K, 1.0, 1.0, mono, &idx, &ev, &err), 0);
			cr_assert_eq(ev->type, ACCT_EV_EXPONENTIAL_MECHANISM);
			cr_assert_geq(ev->u.exponential_mechanism.epsilon, 1.0);
			cr_assert_lt(ev->u.exponential_mechanism.epsilon, 1.0 + 1e-11);
			acct_event_free(ev);
			obs[idx]++;
		}
		cr_assert_gt(test_chi2_p(obs, p, K, N), TEST_P_MIN, "monotone %d", mono);
		cr_assert_lt(test_chi2_p(obs, wrong, K, N), TEST_P_MIN, "monotone %d", mono);
	}
	mech_rng_free(r);
}

Test(mech, exponential_mechanism_extreme_scores)
{
	double u[4] = {-1e300, 1e300, 0, 1e300 - 1e285}, p;
	size_t idx;
	acct_event *ev = NULL;
	acct_error err;
	mech_rng *r = test_rng(37);

	(void)p;
	acct_error_init(&err);
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(mech_exponential(r, u, 4, 1.0, 1.0, false, &idx, &ev, &err), 0);
		cr_assert_eq(idx, 1u);
		acct_event_free(ev);
		ev = NULL;
	}
	/* A huge but finite epsilon / (2 sensitivity): the argmax always wins. */
	for (int i = 0; i < 100; i++) {
		double w[2] = {0, 100};

		cr_assert_eq(mech_exponential(r, w, 2, 1e-300, 1.0, false, &idx, &ev, &err), 0);
		cr_assert_eq(idx, 1u);
		acct_event_free(ev);
		ev = NULL;
		cr_assert_eq(mech_permute_and_flip(r, w, 2, 1e-300, 1.0, &idx, &ev, &err), 0);
		cr_assert_eq(idx, 1u);
		acct_event_free(ev);
		ev = NULL;
	}
	mech_rng_free(r);
}

/*
 * Scores whose spread overflows: u* - u_i = inf made every exponent its cap
 * whatever the factor, so [1e308, -1e308] with sensitivity 1e308 picked
 * index 0 every time under a charge of 1e-10 (its neighbour [1e308, 0]
 * about half the time).  All three selection mechanisms refuse such scores,
 * naming /scores; a spread just inside the range is taken.
 */
Test(mech, selection_refuses_scores_whose_spread_overflows)
{
	double bad[2] = {1e308, -1e308}, ok[2] = {DBL_MAX / 2, -DBL_MAX / 2};
	size_t idx;
	acct_event *ev = NULL;
	acct_error err;
	mech_rng *r = test_rng(41);

	acct_error_init(&err);
	cr_assert_eq(mech_exponential(r, bad, 2, 1e308, 1e-10, false, &idx, &ev, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/scores");
	acct_error_init(&err);
	cr_assert_eq(mech_permute_and_flip(r, bad, 2, 1e308, 1e-10, &idx, &ev, &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/scores");
	acct_error_init(&err);
	cr_assert_eq(mech_report_noisy_max(r, bad, 2, 1e308, MECH_RNM_GUMBEL, 1e-10, false, &idx, &ev,
					   &err), ACCT_EINVAL);
	cr_assert_str_eq(err.where, "/scores");
	cr_assert_null(ev);
	acct_error_init(&err);
	cr_assert_eq(mech_exponential(r, ok, 2, 1e308, 1e-10, false, &idx, &ev, &err), 0, "%s",
		     err.text);
	acct_event_free(ev);
	mech_rng_free(r);
}

/*
 * The exponential mechanism draws the same randomness whatever the scores:
 * two runs from the same seed on very different scores leave their rng at
 * the same point.  A rejection sampler (the old one) needed about
 * n / sum e^-g rounds, so its work, and its run time, told the scores.
 */
/* Runs one selection mechanism (permute-and-flip or the exponential
 * mechanism) from one seed on flat and on peaked scores, and requires its
 * rng to have moved by the same amount. */
static void assert_work_independent_of_scores(bool flip, unsigned seed)
{
	enum { K = 2000 };
	static double flat[K], peaked[K];
	uint64_t after[2];

	for (int i = 0; i < K; i++) {
		flat[i] = 0;
		peaked[i] = i == 7 ? 0 : -60;
	}
	for (int k = 0; k < 2; k++) {
		mech_rng *r = test_rng(seed);
		const double *u = k ? peaked : flat;
		acct_event *ev = NULL;
		acct_error err;
		size_t idx;

		acct_error_init(&err);
		cr_assert_eq(flip ? mech_permute_and_flip(r, u, K, 1.0, 1.0, &idx, &ev, &err)
				  : mech_exponential(r, u, K, 1.0, 1.0, false, &idx, &ev, &err),
			     0);
		acct_event_free(ev);
		cr_assert_eq(mech_rng_bytes(r, &after[k], sizeof(after[k])), 0);
		mech_rng_free(r);
	}
	cr_assert_eq(after[0], after[1], "the rng moved by a different amount");
}

Test(mech, exponential_mechanism_work_does_not_depend_on_the_scores)
{
	assert_work_independent_of_scores(false, 38);
}

/*
 * Permute-and-flip too: it visited candidates in a random order until one
 * passed its coin, a number of visits that depended on all the scores (flat
 * scores stop at the first, a single peak seldom does).  Drawn as
 * report-noisy-max with exponential noise, it takes the same randomness
 * whatever the scores; its distribution is checked below against the
 * permutations enumerated.
 */
Test(mech, permute_and_flip_work_does_not_depend_on_the_scores)
{
	assert_work_independent_of_scores(true, 39);
}

/* Permute-and-flip: exact probabilities by enumerating the permutations. */
static void pf_probs(const double *u, int n, double c, double *p)
{
	int perm[6], count = 0;
	double acc[6] = {0}, top = u[0];

	for (int i = 1; i < n; i++)
		if (u[i] > top)
			top = u[i];
	for (int i = 0; i < n; i++)
		perm[i] = i;
	/* Heap's algorithm over n <= 6 items. */
	{
		int cc[6] = {0}, i = 0;

		for (;;) {
			double stay = 1.0 / 1.0;

			for (int j = 0; j < n; j++) {
				double q = exp(c * (u[perm[j]] - top));

				acc[perm[j]] += stay * q;
				stay *= 1 - q;
			}
			count++;
			while (i < n && cc[i] >= i) {
				cc[i] = 0;
				i++;
			}
			if (i >= n)
				break;
			{
				int a = (i % 2 == 0) ? 0 : cc[i], t = perm[a];

				perm[a] = perm[i];
				perm[i] = t;
			}
			cc[i]++;
			i = 0;
		}
	}
	for (int i = 0; i < n; i++)
		p[i] = acc[i] / count;
}

Test(mech, permute_and_flip_distribution)
{
	enum { K = 4, N = 100000 };
	double u[K] = {0, 2, 3, 1}, p[K], em[K];
	uint64_t obs[K] = {0};
	mech_rng *r = test_rng(38);

	pf_probs(u, K, 0.5, p);
	em_probs(u, K, 0.5, em);
	for (int i = 0; i < N; i++) {
		acct_event *ev = NULL;
		acct_error err;
		size_t idx;

		acct_error_init(&err);
		cr_assert_eq(mech_permute_and_flip(r, u, K, 1.0, 1.0, &idx, &ev, &err), 0);
		cr_assert_eq(ev->type, ACCT_EV_PERMUTE_AND_FLIP);
		acct_event_free(ev);
		obs[idx]++;
	}
	cr_assert_gt(test_chi2_p(obs, p, K, N), TEST_P_MIN);
	/* And it is not the exponential mechanism. */
	cr_assert_lt(test_chi2_p(obs, em, K, N), TEST_P_MIN);
	mech_rng_free(r);
}

/* Pr[argmax = i] = int f_i(x) prod_{j != i} F_j(x) dx, numerically. */
static void rnm_probs(const double *u, int n, double scale, int gauss, double *p)
{
	double lo = -60 * scale - 10, hi = 60 * scale + 10, h = (hi - lo) / 400000;

	for (int i = 0; i < n; i++) {
		double s = 0;

		for (double x = lo; x < hi; x += h) {
			double z = (x + h / 2 - u[i]) / scale, f, prod = 1;

			f = gauss ? exp(-z * z / 2) / sqrt(2 * M_PI) / scale : exp(-fabs(z)) / (2 * scale);
			for (int j = 0; j < n; j++) {
				struct test_loc_scale ls = {u[j], scale};

				if (j != i)
					prod *= gauss ? test_cdf_gauss(x + h / 2, &ls) : test_cdf_laplace(x + h / 2, &ls);
			}
			s += f * prod * h;
		}
		p[i] = s;
	}
}

Test(mech, report_noisy_max_distributions)
{
	enum { K = 4, N = 60000 };
	double u[K] = {0, 1, 2.5, 2}, p[K];
	mech_rng *r = test_rng(39);
	const struct {
		mech_rnm_noise noise;
		double param, scale;
		int gauss;
		acct_event_type type;
	} cases[] = {
		{MECH_RNM_LAPLACE, 1.0, 2.0, 0, ACCT_EV_EPSILON_DELTA},   /* scale 2D/eps */
		{MECH_RNM_GAUSSIAN, 1.5, 1.5, 1, ACCT_EV_ZCDP},
		{MECH_RNM_GUMBEL, 1.0, 0, 0, ACCT_EV_EXPONENTIAL_MECHANISM},
	};

	for (size_t c = 0; c < 3; c++) {
		uint64_t obs[K] = {0};

		if (cases[c].noise == MECH_RNM_GUMBEL)
			em_probs(u, K, 0.5, p);
		else
			rnm_probs(u, K, cases[c].scale, cases[c].gauss, p);
		for (int i = 0; i < N; i++) {
			acct_event *ev = NULL;
			acct_error err;
			size_t idx;

			acct_error_init(&err);
			cr_assert_eq(mech_report_noisy_max(r, u, K, 1.0, cases[c].noise, cases[c].param,
							   false, &idx, &ev, &err), 0, "%s", err.text);
			cr_assert_eq(ev->type, cases[c].type);
			if (cases[c].noise == MECH_RNM_LAPLACE) {
				cr_assert_geq(ev->u.epsilon_delta.epsilon, 1.0);
				cr_assert_lt(ev->u.epsilon_delta.epsilon, 1.0 + 1e-9);
			}
			if (cases[c].noise == MECH_RNM_GAUSSIAN) {
				/* L2 sensitivity sqrt(4) = 2: rho = 4 / (2 1.5^2). */
				cr_assert_geq(ev->u.zcdp.rho, 4 / (2 * 2.25));
				cr_assert_lt(ev->u.zcdp.rho, 4 / (2 * 2.25) * (1 + 1e-4));
			}
			acct_event_free(ev);
			obs[idx]++;
		}
		cr_assert_gt(test_chi2_p(obs, p, K, N), TEST_P_MIN, "case %zu", c);
	}
	mech_rng_free(r);
}

Test(mech, randomized_response_distribution)
{
	enum { K = 4, N = 100000 };
	const double eps = 1.2;
	double p = K / (exp(eps) + K - 1), prob[K];
	uint64_t obs[K] = {0};
	mech_rng *r = test_rng(40);

	for (int i = 0; i < K; i++)
		prob[i] = i == 2 ? 1 - p + p / K : p / K;
	for (int i = 0; i < N; i++) {
		acct_event *ev = NULL;
		acct_error err;
		int64_t out;

		acct_error_init(&err);
		cr_assert_eq(mech_randomized_response(r, 2, K, eps, &out, &ev, &err), 0);
		if (i == 0) {
			double q = ev->u.randomized_response.noise_parameter;

			cr_assert_eq(ev->type, ACCT_EV_RANDOMIZED_RESPONSE);
			cr_assert_eq(ev->u.randomized_response.num_buckets, K);
			/* The epsilon implied by the event is at most eps. */
			cr_assert_leq(log(1 + K * (1 - q) / q), eps);
			cr_assert_lt(fabs(q / p - 1), 1e-12);
		}
		acct_event_free(ev);
		obs[out]++;
	}
	cr_assert_gt(test_chi2_p(obs, prob, K, N), TEST_P_MIN);
	mech_rng_free(r);
}

Test(mech, bad_inputs_name_the_field)
{
	mech_rng *r = test_rng(41);
	double v[2] = {1, NAN}, out[2];
	int64_t iv = 1, iout;
	size_t idx;
	acct_event *ev = NULL;
	acct_error err;

#define EXPECT(call, field)                                                  \
	do {                                                                 \
		acct_error_init(&err);                                       \
		cr_assert_eq((call), ACCT_EINVAL, #call);                    \
		cr_assert_str_eq(err.where, field, #call);                   \
		cr_assert_null(ev);                                          \
	} while (0)
	EXPECT(mech_laplace(r, v, 2, 1, 1, out, &ev, &err), "/values/1");
	EXPECT(mech_laplace(r, v, 0, 1, 1, out, &ev, &err), "/values");
	EXPECT(mech_laplace(r, v, DPG_MAX_VECTOR_LEN + 1, 1, 1, out, &ev, &err), "/values");
	EXPECT(mech_laplace(r, v, 1, 0, 1, out, &ev, &err), "/sensitivity");
	EXPECT(mech_laplace(r, v, 1, -1, 1, out, &ev, &err), "/sensitivity");
	EXPECT(mech_laplace(r, v, 1, 1, 0, out, &ev, &err), "/scale");
	EXPECT(mech_gaussian(r, v, 1, 1, NAN, out, &ev, &err), "/sigma");
	EXPECT(mech_gaussian(r, v, 1, INFINITY, 1, out, &ev, &err), "/sensitivity");
	EXPECT(mech_discrete_laplace(r, &iv, 1, 0, 1, &iout, &ev, &err), "/sensitivity");
	EXPECT(mech_discrete_gaussian(r, &iv, 1, 1.5, 1, &iout, &ev, &err), "/sensitivity");
	EXPECT(mech_exponential(r, v, 2, 1, 1, false, &idx, &ev, &err), "/scores/1");
	EXPECT(mech_exponential(r, v, 0, 1, 1, false, &idx, &ev, &err), "/scores");
	EXPECT(mech_exponential(r, v, 1, 1, 0, false, &idx, &ev, &err), "/epsilon");
	EXPECT(mech_exponential(r, v, 1, 0, 1, false, &idx, &ev, &err), "/sensitivity");
	EXPECT(mech_permute_and_flip(r, v, 1, 1, -2, &idx, &ev, &err), "/epsilon");
	/* epsilon / (2 sensitivity) = +inf: the argmax's exponent would be
	 * 0 x inf = NaN (P&F accepted nobody; the race went uniform). */
	{
		double u[2] = {0, 100};

		EXPECT(mech_exponential(r, u, 2, 5e-324, 1e-10, false, &idx, &ev, &err),
		       "/sensitivity");
		EXPECT(mech_exponential(r, u, 2, 1e-300, 1e300, true, &idx, &ev, &err),
		       "/sensitivity");
		EXPECT(mech_permute_and_flip(r, u, 2, 5e-324, 1e-10, &idx, &ev, &err),
		       "/sensitivity");
	}
	EXPECT(mech_report_noisy_max(r, v, 2, 1, MECH_RNM_LAPLACE, 1, false, &idx, &ev, &err),
	       "/scores/1");
	EXPECT(mech_report_noisy_max(r, v, 2, 1, MECH_RNM_GAUSSIAN, 1, false, &idx, &ev, &err),
	       "/scores/1");
	EXPECT(mech_randomized_response(r, 4, 4, 1, &iout, &ev, &err), "/value");
	EXPECT(mech_randomized_response(r, 0, 1, 1, &iout, &ev, &err), "/num_buckets");
	/* e^epsilon past DBL_MAX: the event's epsilon would be infinite. */
	EXPECT(mech_randomized_response(r, 0, 2, 710, &iout, &ev, &err), "/epsilon");
	EXPECT(mech_randomized_response(r, 0, 2, 1e300, &iout, &ev, &err), "/epsilon");
	EXPECT(mech_randomized_response(r, 0, 2, 0, &iout, &ev, &err), "/epsilon");
	EXPECT(mech_gaussian_sigma_analytic(1, 0, 1, &v[0], &err), "/delta");
#undef EXPECT
	mech_rng_free(r);
}
