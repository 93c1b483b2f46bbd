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

/* A pate model object's scalars, in either model, land in that model's
 * members, and the other model keeps its defaults. */
Test(params, each_pate_model_scalar_lands_in_its_member)
{
	static const char *const keys[] = {"teacher_model", "student_model"};

	for (int k = 0; k < 2; k++) {
		char text[256];
		any_params a, d;
		const trn_pate_model_params *m = k ? &a.pate.student : &a.pate.teacher;
		const trn_pate_model_params *other = k ? &a.pate.teacher : &a.pate.student;
		const trn_pate_model_params *other_d = k ? &d.pate.teacher : &d.pate.student;

		snprintf(text, sizeof(text),
			 "{\"%s\":{\"model\":\"mlp\",\"hidden\":[7,5],\"activation\":\"tanh\","
			 "\"epochs\":13,\"lot_size\":17,\"learning_rate\":0.375,\"momentum\":0.25}}",
			 keys[k]);
		parse_ok(pate, text, &a);
		parse_ok(pate, "{}", &d);
		cr_expect_eq(m->model, TRN_MODEL_MLP, "%s", keys[k]);
		cr_expect_eq(m->n_hidden, 2, "%s", keys[k]);
		cr_expect_eq(m->hidden[0], 7, "%s", keys[k]);
		cr_expect_eq(m->hidden[1], 5, "%s", keys[k]);
		cr_expect_eq(m->activation, TRN_ACT_TANH, "%s", keys[k]);
		cr_expect_eq(m->epochs, 13, "%s", keys[k]);
		cr_expect_eq(m->lot_size, 17, "%s", keys[k]);
		cr_expect_eq(m->learning_rate, 0.375, "%s", keys[k]);
		cr_expect_eq(m->momentum, 0.25, "%s", keys[k]);
		cr_expect_eq(memcmp(other, other_d, sizeof(*other)), 0, "%s moved the other model",
			     keys[k]);
	}
}

/*
 * A field's value just inside (taken) and just outside (refused at `where`,
 * /params/<key> when NULL) a bound of the spec; no inside value where the
 * bound is one no value near it meets with the defaults (the validation
 * refuses it for another reason).
 */
typedef struct {
	parse_fn f;
	const char *base, *key, *inside, *outside, *where;
} bound_case;

#define DP(key, in, out) {dpsgd, "{}", key, in, out, NULL}
#define EN(key, in, out) {ensemble, ENSEMBLE_BASE, key, in, out, NULL}
#define SL(key, in, out) {slmc, "{}", key, in, out, NULL}
#define LE(key, in, out) {label_em, LABEL_EM_BASE, key, in, out, NULL}
#define PA(key, in, out) {pate, "{}", key, in, out, NULL}

static const bound_case bounds[] = {
	DP("epochs", "1", "0"),
	DP("epochs", "10000", "10001"),
	DP("lot_size", "1", "0"),
	DP("lot_size", "1000000", "1000001"),
	DP("noise_multiplier", "1e-9", "0"),
	DP("noise_multiplier", "1e6", "1000001"),
	DP("clip_norm", "1e-120", "3e-121"),
	DP("clip_norm", "1e6", "1000001"),
	DP("learning_rate", "1e-9", "0"),
	DP("learning_rate", "1000", "1000.5"),
	DP("learning_rate_final", "1e-9", "0"),
	DP("learning_rate_final", "1000", "1000.5"),
	DP("learning_rate_decay_epochs", "0", "-1"),
	{dpsgd, "{\"epochs\":10000}", "learning_rate_decay_epochs", "10000", "10001", NULL},
	DP("momentum", "0", "-0.5"),
	DP("momentum", "0.999", "1"),
	DP("pca_components", "0", "-1"),
	DP("pca_components", "1024", "1025"),
	DP("pca_noise_multiplier", "1e-9", "0"),
	DP("pca_noise_multiplier", "1e6", "1000001"),
	DP("max_train_examples", "0", "-1"),
	DP("max_train_examples", "10000000", "10000001"),
	{dpsgd, "{\"features\":\"scatter\"}", "scatter_groups", "1", "0", NULL},
	{dpsgd, "{\"features\":\"scatter\"}", "scatter_groups", "81", "82", NULL},
	DP("hidden", "4096", "4097"),
	DP("hidden", "[1, 4096]", "[1, 4097]"),
	DP("clipping", "\"global\"", "\"none\""),
	DP("model", "\"logreg\"", "\"rnn\""),
	DP("activation", "\"relu\"", "\"sigmoid\""),
	DP("label", "\"y\"", "\"\""),
	DP("test_data", "\"iris\"", "7"),
	DP("test_data", ID64, ID65),
	{dpsgd, CNN_TS, "image_channels", "1", "0", NULL},
	{dpsgd, CNN_TS, "image_channels", "256", "257", NULL},
	{dpsgd, CNN_TS, "conv_channels", "1", "0", NULL},
	{dpsgd, CNN_TS, "conv_channels", "[16, 256]", "[16, 257]", NULL},
	{dpsgd, CNN_TS, "kernel", "1", "0", NULL},
	{dpsgd, CNN_TS, "kernel", "[5, 9]", "[5, 11]", NULL},
	{dpsgd, CNN_TS, "sigmoid_scale", "1e-9", "0", NULL},
	{dpsgd, CNN_TS, "sigmoid_scale", "1000", "1000.5", NULL},
	{dpsgd, CNN_TS, "sigmoid_temperature", "1e-9", "0", NULL},
	{dpsgd, CNN_TS, "sigmoid_temperature", "1000", "1000.5", NULL},
	{dpsgd, CNN_TS, "sigmoid_offset", "-1000", "-1001", NULL},
	{dpsgd, CNN_TS, "sigmoid_offset", "1000", "1001", NULL},
	{dpsgd, CNN_TS, "precision", "\"float32\"", "\"float16\"", NULL},
	EN("epsilon", "1e-9", "0"),
	EN("epsilon", "1e6", "1000001"),
	EN("lambda", "1e-9", "0"),
	EN("lambda", "1e6", "1000001"),
	EN("input_scale", "1e-9", "0"),
	EN("input_scale", "1e12", "1.5e12"),
	EN("local_lambda", "1e-9", "0"),
	EN("local_lambda", "1e6", "1000001"),
	EN("parties", "1", "0"),
	EN("parties", "100000", "100001"),
	EN("knn_k", "1", "0"),
	EN("knn_k", "100", "101"),
	EN("max_depth", "1", "0"),
	EN("max_depth", "16", "17"),
	EN("algorithm", "\"soft_label\"", "\"vote\""),
	EN("party_column", "\"p\"", "\"\""),
	EN("auxiliary_data", "\"a\"", "null"),
	EN("auxiliary_data", ID64, ID65),
	EN("test_data", ID64, ID65),
	SL("parties", "1", "0"),
	SL("parties", "1000", "1001"),
	SL("clusters", "2", "1"),
	SL("clusters", "100", "101"),
	SL("features", "1", "0"),
	SL("features", "4096", "4097"),
	SL("gamma", "1e-9", "0"),
	SL("gamma", "1e6", "1000001"),
	SL("lambda", "1e-100", "5e-101"),
	SL("lambda", "1e6", "1000001"),
	SL("rho", "1e-9", "0"),
	SL("rho", "1e6", "1000001"),
	SL("fuzzifier", "1.5", "1"),
	SL("fuzzifier", "100", "100.5"),
	SL("iterations", "1", "0"),
	SL("iterations", "1000", "1001"),
	SL("noise_multiplier", "1e-9", "0"),
	SL("noise_multiplier", "1e6", "1000001"),
	SL("epsilon", "1e-9", "0"),
	SL("epsilon", "1e6", "1000001"),
	SL("max_norm", "1.5", "1"),
	SL("max_norm", "1e6", "1000001"),
	SL("max_norm", "2", "\"2\""),
	SL("auxiliary_data", ID64, ID65),
	LE("epsilon", "1e-9", "0"),
	LE("epsilon", NULL, "1000001"),
	LE("b", "1.5", "1"),
	LE("b", "1e6", "1000001"),
	LE("r", "1e-9", "0"),
	LE("r", "1e6", "1000001"),
	LE("epochs", "1", "0"),
	LE("epochs", "10000", "10001"),
	LE("batch_size", "1", "0"),
	LE("batch_size", "1000000", "1000001"),
	LE("learning_rate", "1e-9", "0"),
	LE("learning_rate", "1000", "1001"),
	LE("momentum", "0", "-0.5"),
	LE("momentum", "0.999", "1"),
	LE("weight_decay", "0", "-1e-9"),
	LE("weight_decay", "1e6", "1000001"),
	LE("gradient_clip", "0", "-1"),
	LE("gradient_clip", "1e9", "1.5e9"),
	{label_em, "{\"epsilon\":1,\"model\":\"mlp\"}", "hidden", "4096", "0", NULL},
	{label_em, "{\"epsilon\":1,\"model\":\"mlp\"}", "hidden", "[4096]", "[4097]", NULL},
	LE("center", "true", "1"),
	LE("loss", "\"unhinged\"", "\"huber\""),
	LE("model", "\"linear\"", "\"cnn\""),
	LE("test_data", ID64, ID65),
	{pate, "{\"threshold\":0}", "teachers", "1", "0", NULL},
	PA("teachers", "10000", "10001"),
	PA("queries", "1", "0"),
	PA("queries", "100000", "100001"),
	PA("aggregator", "\"gnmax\"", "\"lnmax\""),
	PA("threshold", "0", "-1"),
	{pate, "{\"teachers\":10000}", "threshold", "10000", "10001", NULL},
	PA("sigma1", "0.00390625", "0.0039"),
	PA("sigma1", "1048576", "1048577"),
	PA("sigma2", "0.00390625", "0.0039"),
	PA("sigma2", "1048576", "1048577"),
	{pate, PATE_INTERACTIVE, "student_confidence", "0", "-0.5", NULL},
	{pate, PATE_INTERACTIVE, "student_confidence", "1", "1.5", NULL},
	PA("semi_supervised", "false", "0"),
	PA("confidence", "1e-9", "0"),
	PA("confidence", "1", "1.5"),
	PA("release_beta", "0", "-0.1"),
	{pate, "{\"release_order\":1.01}", "release_beta", "0.49", "0.5", NULL},
	PA("release_sigma", "1e-6", "9e-7"),
	PA("release_sigma", "65536", "65537"),
	PA("release_order", "1.5", "1"),
	{pate, "{\"release_beta\":0}", "release_order", "1e6", "1000001", NULL},
	PA("student_data", "\"s\"", "\"\""),
	PA("student_data", ID64, ID65),
	PA("test_data", ID64, ID65),
	{pate, "{}", "teacher_model", "{\"epochs\":1}", "{\"epochs\":0}",
	 "/params/teacher_model/epochs"},
	{pate, "{}", "teacher_model", "{\"epochs\":10000}", "{\"epochs\":10001}",
	 "/params/teacher_model/epochs"},
	{pate, "{}", "student_model", "{\"lot_size\":1}", "{\"lot_size\":0}",
	 "/params/student_model/lot_size"},
	{pate, "{}", "student_model", "{\"lot_size\":1000000}", "{\"lot_size\":1000001}",
	 "/params/student_model/lot_size"},
	{pate, "{}", "teacher_model", "{\"learning_rate\":1000}", "{\"learning_rate\":1001}",
	 "/params/teacher_model/learning_rate"},
	{pate, "{}", "teacher_model", "{\"learning_rate\":1e-9}", "{\"learning_rate\":0}",
	 "/params/teacher_model/learning_rate"},
	{pate, "{}", "student_model", "{\"momentum\":0}", "{\"momentum\":1}",
	 "/params/student_model/momentum"},
	{pate, "{}", "student_model", "{\"activation\":\"tanh\"}",
	 "{\"activation\":\"sigmoid\"}", "/params/student_model/activation"},
	{pate, "{}", "teacher_model", "{\"model\":\"mlp\",\"hidden\":4096}",
	 "{\"model\":\"mlp\",\"hidden\":4097}", "/params/teacher_model/hidden"},
};

Test(params, each_bound_of_the_spec_holds_at_its_field)
{
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		const bound_case *c = &bounds[i];
		char where[64];
		any_params a;
		acct_error err;

		if (c->inside)
			cr_expect_eq(parse(c->f, c->base, c->key, c->inside, &a, &err), 0,
				     "%s %s: %s at %s", c->key, c->inside, err.text, err.where);
		snprintf(where, sizeof(where), "/params/%s", c->key);
		cr_expect_eq(parse(c->f, c->base, c->key, c->outside, &a, &err), ACCT_EINVAL,
			     "%s %s was taken", c->key, c->outside);
		cr_expect_str_eq(err.where, c->where ? c->where : where, "%s %s: %s", c->key,
				 c->outside, err.text);
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
