/*
 * test_params.c: a job's "params" read into each trainer's parameters.
 * Every scalar is set to a value other than its default and read back from
 * the member it names, and every bound the spec gives (openapi.yaml's
 * DpsgdParams, EnsembleParams, SlmcParams, LabelEmParams, PateParams) is
 * tried on both sides: the value inside is taken, the one outside refused
 * at that field's pointer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "jobs.h"

typedef union {
	trn_dpsgd_params dpsgd;
	trn_ensemble_params ensemble;
	trn_slmc_params slmc;
	trn_label_em_params label_em;
	trn_pate_params pate;
} any_params;

typedef int (*parse_fn)(const json_t *params, any_params *p, acct_error *err);

static int dpsgd(const json_t *j, any_params *p, acct_error *e)
{
	return srv__jobs_parse_params(j, &p->dpsgd, e);
}

static int ensemble(const json_t *j, any_params *p, acct_error *e)
{
	return srv__jobs_parse_ensemble(j, &p->ensemble, e);
}

static int slmc(const json_t *j, any_params *p, acct_error *e)
{
	return srv__jobs_parse_slmc(j, &p->slmc, e);
}

static int label_em(const json_t *j, any_params *p, acct_error *e)
{
	return srv__jobs_parse_label_em(j, &p->label_em, e);
}

static int pate(const json_t *j, any_params *p, acct_error *e)
{
	return srv__jobs_parse_pate(j, &p->pate, e);
}

/* The least an ensemble or label_em job must name. */
#define ENSEMBLE_BASE \
	"{\"party_column\":\"site\",\"auxiliary_data\":\"aux\",\"parties\":2,\"epsilon\":1}"
#define LABEL_EM_BASE "{\"epsilon\":1}"
/* A dataset id is 1 to 64 bytes (the spec's TestDataRef). */
#define A16 "aaaaaaaaaaaaaaaa"
#define ID64 "\"" A16 A16 A16 A16 "\""
#define ID65 "\"" A16 A16 A16 A16 "a\""
/* The tempered sigmoid's fields are a cnn's with that activation only. */
#define CNN_TS "{\"model\":\"cnn\",\"activation\":\"tempered_sigmoid\"}"
/* student_confidence is interactive_gnmax's only. */
#define PATE_INTERACTIVE "{\"aggregator\":\"interactive_gnmax\"}"

/* Parses `text` (base, then `key`: `value` over it when key is given). */
static int parse(parse_fn f, const char *text, const char *key, const char *value, any_params *p,
		 acct_error *err)
{
	json_error_t je;
	json_t *params = json_loads(text, 0, &je);
	int rc;

	cr_assert(params, "%s: %s", text, je.text);
	if (key) {
		char patch[256];
		json_t *v;

		snprintf(patch, sizeof(patch), "{\"%s\":%s}", key, value);
		v = json_loads(patch, 0, &je);
		cr_assert(v, "%s: %s", patch, je.text);
		json_object_update(params, v);
		json_decref(v);
	}
	acct_error_init(err);
	memset(p, 0, sizeof(*p));
	rc = f(params, p, err);
	json_decref(params);
	return rc;
}

static void parse_ok(parse_fn f, const char *text, any_params *p)
{
	acct_error err;

	cr_assert_eq(parse(f, text, NULL, NULL, p, &err), 0, "%s: %s at %s", text, err.text,
		     err.where);
}

Test(params, each_dpsgd_scalar_lands_in_its_member)
{
	any_params a;
	const trn_dpsgd_params *p = &a.dpsgd;

	parse_ok(dpsgd,
		 "{\"model\":\"mlp\",\"activation\":\"tanh\",\"clipping\":\"per_layer\","
		 "\"epochs\":3,\"lot_size\":17,\"noise_multiplier\":2.5,\"clip_norm\":0.75,"
		 "\"learning_rate\":0.125,\"learning_rate_final\":0.0625,"
		 "\"learning_rate_decay_epochs\":2,\"momentum\":0.5,\"features\":\"pca\","
		 "\"pca_components\":5,\"pca_noise_multiplier\":3.5,\"max_train_examples\":1234}",
		 &a);
	cr_expect_eq(p->model, TRN_MODEL_MLP);
	cr_expect_eq(p->activation, TRN_ACT_TANH);
	cr_expect_eq(p->clipping, TRN_CLIP_PER_LAYER);
	cr_expect_eq(p->epochs, 3);
	cr_expect_eq(p->lot_size, 17);
	cr_expect_eq(p->noise_multiplier, 2.5);
	cr_expect_eq(p->clip_norm, 0.75);
	cr_expect_eq(p->learning_rate, 0.125);
	cr_expect_eq(p->learning_rate_final, 0.0625);
	cr_expect_eq(p->learning_rate_decay_epochs, 2);
	cr_expect_eq(p->momentum, 0.5);
	cr_expect_eq(p->features, TRN_FEATURES_PCA);
	cr_expect_eq(p->pca_components, 5);
	cr_expect_eq(p->pca_noise_multiplier, 3.5);
	cr_expect_eq(p->max_train_examples, 1234);
}

Test(params, each_cnn_scalar_lands_in_its_member)
{
	any_params a;
	const trn_dpsgd_params *p = &a.dpsgd;

	parse_ok(dpsgd,
		 "{\"model\":\"cnn\",\"activation\":\"tempered_sigmoid\",\"image_channels\":3,"
		 "\"sigmoid_scale\":1.5,\"sigmoid_temperature\":2.5,\"sigmoid_offset\":-0.25,"
		 "\"precision\":\"float32\"}",
		 &a);
	cr_expect_eq(p->model, TRN_MODEL_CNN);
	cr_expect_eq(p->conv_activation, TRN_CONV_TEMPERED_SIGMOID);
	cr_expect_eq(p->image_channels, 3);
	cr_expect_eq(p->sigmoid_scale, 1.5);
	cr_expect_eq(p->sigmoid_temperature, 2.5);
	cr_expect_eq(p->sigmoid_offset, -0.25);
	cr_expect_eq(p->precision, TRN_PRECISION_FLOAT32);
}

/* A learning rate given alone is constant: its final rate is itself. */
Test(params, a_lone_learning_rate_is_constant)
{
	any_params a, d;

	parse_ok(dpsgd, "{}", &d);
	parse_ok(dpsgd, "{\"learning_rate\":0.25}", &a);
	cr_expect_eq(a.dpsgd.learning_rate, 0.25);
	cr_expect_eq(a.dpsgd.learning_rate_final, 0.25);
	parse_ok(dpsgd, "{\"learning_rate_final\":0.01}", &a);
	cr_expect_eq(a.dpsgd.learning_rate, d.dpsgd.learning_rate);
	cr_expect_eq(a.dpsgd.learning_rate_final, 0.01);
}

Test(params, each_ensemble_scalar_lands_in_its_member)
{
	any_params a;
	const trn_ensemble_params *p = &a.ensemble;

	parse_ok(ensemble,
		 "{\"party_column\":\"site\",\"auxiliary_data\":\"aux\",\"parties\":3,"
		 "\"algorithm\":\"majority_vote\",\"epsilon\":2.5,\"lambda\":0.125,"
		 "\"input_scale\":4,\"local_lambda\":0.5,\"knn_k\":7,\"max_depth\":9}",
		 &a);
	cr_expect_eq(p->parties, 3);
	cr_expect_eq(p->algorithm, TRN_ENSEMBLE_MAJORITY_VOTE);
	cr_expect_eq(p->epsilon, 2.5);
	cr_expect_eq(p->lambda, 0.125);
	cr_expect_eq(p->input_scale, 4.0);
	cr_expect_eq(p->local_lambda, 0.5);
	cr_expect_eq(p->knn_k, 7);
	cr_expect_eq(p->max_depth, 9);
}

Test(params, each_slmc_scalar_lands_in_its_member)
{
	any_params a;
	const trn_slmc_params *p = &a.slmc;

	parse_ok(slmc,
		 "{\"clusters\":4,\"features\":64,\"iterations\":12,\"gamma\":0.25,"
		 "\"lambda\":0.5,\"rho\":1.5,\"fuzzifier\":1.75,\"max_norm\":3,\"epsilon\":2.5,"
		 "\"parties\":3}",
		 &a);
	cr_expect_eq(p->clusters, 4);
	cr_expect_eq(p->features, 64);
	cr_expect_eq(p->iterations, 12);
	cr_expect_eq(p->gamma, 0.25);
	cr_expect_eq(p->lambda, 0.5);
	cr_expect_eq(p->rho, 1.5);
	cr_expect_eq(p->fuzzifier, 1.75);
	cr_expect_eq(p->max_norm, 3.0);
	cr_expect_eq(p->epsilon, 2.5);
	cr_expect_eq(p->parties, 3);
	/* A noise multiplier given alone replaces the default target epsilon. */
	parse_ok(slmc, "{\"noise_multiplier\":6.5}", &a);
	cr_expect_eq(p->noise_multiplier, 6.5);
	cr_expect_eq(p->epsilon, 0.0);
}

Test(params, each_label_em_scalar_lands_in_its_member)
{
	any_params a;
	const trn_label_em_params *p = &a.label_em;

	parse_ok(label_em,
		 "{\"epsilon\":2.5,\"loss\":\"ramp\",\"b\":3,\"r\":4,\"model\":\"mlp\","
		 "\"activation\":\"tanh\",\"epochs\":7,\"batch_size\":33,\"learning_rate\":0.125,"
		 "\"momentum\":0.25,\"weight_decay\":0.0625,\"gradient_clip\":5,\"center\":false}",
		 &a);
	cr_expect_eq(p->epsilon, 2.5);
	cr_expect_eq(p->loss.kind, TRN_LOSS_RAMP);
	cr_expect_eq(p->loss.b, 3.0);
	cr_expect_eq(p->loss.r, 4.0);
	cr_expect_eq(p->model, TRN_MODEL_MLP);
	cr_expect_eq(p->activation, TRN_ACT_TANH);
	cr_expect_eq(p->epochs, 7);
	cr_expect_eq(p->batch_size, 33);
	cr_expect_eq(p->learning_rate, 0.125);
	cr_expect_eq(p->momentum, 0.25);
	cr_expect_eq(p->weight_decay, 0.0625);
	cr_expect_eq(p->gradient_clip, 5.0);
	cr_expect_eq(p->center, false);
}

Test(params, each_pate_scalar_lands_in_its_member)
{
	any_params a;
	const trn_pate_params *p = &a.pate;

	parse_ok(pate,
		 "{\"teachers\":50,\"queries\":300,\"aggregator\":\"interactive_gnmax\","
		 "\"threshold\":30,\"sigma1\":20,\"sigma2\":8,\"student_confidence\":0.75,"
		 "\"semi_supervised\":true,\"confidence\":0.5,\"release_beta\":0.03125,"
		 "\"release_sigma\":12,\"release_order\":10}",
		 &a);
	cr_expect_eq(p->teachers, 50);
	cr_expect_eq(p->queries, 300);
	cr_expect_eq(p->aggregator, MECH_PATE_INTERACTIVE);
	cr_expect_eq(p->threshold, 30.0);
	cr_expect_eq(p->sigma1, 20.0);
	cr_expect_eq(p->sigma2, 8.0);
	cr_expect_eq(p->student_confidence, 0.75);
	cr_expect_eq(p->semi_supervised, true);
	cr_expect_eq(p->confidence, 0.5);
	cr_expect_eq(p->release_beta, 0.03125);
	cr_expect_eq(p->release_sigma, 12.0);
	cr_expect_eq(p->release_order, 10.0);
}

/* A field's value just inside (taken) and just outside (refused at
 * /params/<key>) a bound of the spec. */
typedef struct {
	parse_fn f;
	const char *base, *key, *inside, *outside;
} bound_case;

static const bound_case bounds[] = {
	{dpsgd, "{}", "epochs", "1", "0"},
	{dpsgd, "{}", "epochs", "10000", "10001"},
	{dpsgd, "{}", "lot_size", "1", "0"},
	{dpsgd, "{}", "noise_multiplier", "1e-9", "0"},
	{dpsgd, "{}", "clip_norm", "1e-9", "0"},
	{dpsgd, "{}", "learning_rate", "1e-9", "0"},
	{dpsgd, "{}", "learning_rate_final", "1e-9", "0"},
	{dpsgd, "{}", "learning_rate_decay_epochs", "0", "-1"},
	{dpsgd, "{}", "momentum", "0", "1"},
	{dpsgd, "{}", "momentum", "0", "-0.5"},
	{dpsgd, "{}", "pca_components", "0", "-1"},
	{dpsgd, "{}", "pca_noise_multiplier", "1e-9", "0"},
	{dpsgd, "{}", "max_train_examples", "0", "-1"},
	{dpsgd, "{}", "clipping", "\"global\"", "\"none\""},
	{dpsgd, "{}", "model", "\"logreg\"", "\"rnn\""},
	{dpsgd, "{}", "activation", "\"relu\"", "\"sigmoid\""},
	{dpsgd, "{}", "label", "\"y\"", "\"\""},
	{dpsgd, "{}", "test_data", "\"iris\"", "7"},
	{dpsgd, CNN_TS, "image_channels", "256", "257"},
	{dpsgd, CNN_TS, "sigmoid_scale", "1e-9", "0"},
	{dpsgd, CNN_TS, "sigmoid_temperature", "1000", "1000.5"},
	{dpsgd, CNN_TS, "sigmoid_offset", "-1000", "-1001"},
	{dpsgd, CNN_TS, "precision", "\"float32\"", "\"float16\""},
	{ensemble, ENSEMBLE_BASE, "epsilon", "1e-9", "0"},
	{ensemble, ENSEMBLE_BASE, "knn_k", "100", "101"},
	{ensemble, ENSEMBLE_BASE, "knn_k", "1", "0"},
	{ensemble, ENSEMBLE_BASE, "max_depth", "16", "17"},
	{ensemble, ENSEMBLE_BASE, "lambda", "1e-9", "0"},
	{ensemble, ENSEMBLE_BASE, "input_scale", "1e-9", "0"},
	{ensemble, ENSEMBLE_BASE, "local_lambda", "1e-9", "0"},
	{ensemble, ENSEMBLE_BASE, "algorithm", "\"soft_label\"", "\"vote\""},
	{ensemble, ENSEMBLE_BASE, "party_column", "\"p\"", "\"\""},
	{ensemble, ENSEMBLE_BASE, "auxiliary_data", "\"a\"", "null"},
	{slmc, "{}", "iterations", "1", "-1"},
	{slmc, "{}", "gamma", "0.5", "-0.5"},
	{slmc, "{}", "max_norm", "2", "\"2\""},
	{label_em, LABEL_EM_BASE, "epsilon", "1e-9", "0"},
	{label_em, LABEL_EM_BASE, "b", "1.5", "1"},
	{label_em, LABEL_EM_BASE, "r", "1e-9", "0"},
	{label_em, LABEL_EM_BASE, "batch_size", "1", "0"},
	{label_em, LABEL_EM_BASE, "learning_rate", "1000", "1001"},
	{label_em, LABEL_EM_BASE, "momentum", "0", "1"},
	{label_em, LABEL_EM_BASE, "weight_decay", "0", "-1e-9"},
	{label_em, LABEL_EM_BASE, "gradient_clip", "1e9", "1.5e9"},
	{label_em, LABEL_EM_BASE, "center", "true", "1"},
	{label_em, LABEL_EM_BASE, "loss", "\"unhinged\"", "\"huber\""},
	{label_em, LABEL_EM_BASE, "model", "\"linear\"", "\"cnn\""},
	{pate, "{}", "teachers", "10000", "10001"},
	{pate, "{}", "queries", "100000", "100001"},
	{pate, "{}", "aggregator", "\"gnmax\"", "\"lnmax\""},
	{pate, "{}", "threshold", "0", "-1"},
	{pate, "{}", "sigma1", "1", "0"},
	{pate, "{}", "sigma2", "1", "0"},
	{pate, PATE_INTERACTIVE, "student_confidence", "1", "1.5"},
	{pate, "{}", "semi_supervised", "false", "0"},
	{pate, "{}", "confidence", "1", "0"},
	{pate, "{}", "release_beta", "0", "0.5"},
	{pate, "{}", "release_sigma", "65536", "65537"},
	{pate, "{}", "release_order", "1.5", "1"},
	{pate, "{}", "student_data", "\"s\"", "\"\""},
	{pate, "{}", "student_data", ID64, ID65},
	{ensemble, ENSEMBLE_BASE, "auxiliary_data", ID64, ID65},
	{slmc, "{}", "auxiliary_data", ID64, ID65},
	{dpsgd, "{}", "test_data", ID64, ID65},
	{ensemble, ENSEMBLE_BASE, "test_data", ID64, ID65},
	{label_em, LABEL_EM_BASE, "test_data", ID64, ID65},
	{pate, "{}", "test_data", ID64, ID65},
};

Test(params, each_bound_of_the_spec_holds_at_its_field)
{
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		const bound_case *c = &bounds[i];
		char where[64];
		any_params a;
		acct_error err;

		cr_expect_eq(parse(c->f, c->base, c->key, c->inside, &a, &err), 0,
			     "%s %s: %s at %s", c->key, c->inside, err.text, err.where);
		snprintf(where, sizeof(where), "/params/%s", c->key);
		cr_expect_eq(parse(c->f, c->base, c->key, c->outside, &a, &err), ACCT_EINVAL,
			     "%s %s was taken", c->key, c->outside);
		cr_expect_str_eq(err.where, where, "%s %s: %s", c->key, c->outside, err.text);
	}
}

/* The fields a job kind does not know are refused, by name. */
Test(params, a_field_of_another_trainer_is_refused)
{
	any_params a;
	acct_error err;

	cr_expect_eq(parse(dpsgd, "{}", "knn_k", "5", &a, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/params/knn_k");
	cr_expect_eq(parse(pate, "{}", "lot_size", "5", &a, &err), ACCT_EINVAL);
	cr_expect_str_eq(err.where, "/params/lot_size");
}
