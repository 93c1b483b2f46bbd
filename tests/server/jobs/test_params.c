/*
 * test_params.c: a job's "params" read into each trainer's parameters.
 * Every scalar is set alone to a value other than its default and read
 * back from the member it names, with no other byte of the params moved,
 * and every bound the spec gives (openapi.yaml's
 * DpsgdParams, EnsembleParams, SlmcParams, LabelEmParams, PateParams) is
 * tried on both sides: the value inside is taken, the one outside refused
 * at that field's pointer.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
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

/*
 * One field set alone over a base: it must change its member, to `want`,
 * and nothing else of the params (every other byte as the base leaves
 * it), so a row that writes the wrong member, or two, fails.
 */
typedef enum { MEMBER_INT, MEMBER_REAL } member_kind;

typedef struct {
	parse_fn f;
	const char *base, *key, *value;
	size_t offset, size;
	member_kind kind;
	double want;
} member_case;

/* Where member m of params struct T lies, and how to read it. */
#define IN(T, m)                           \
	offsetof(T, m), sizeof(((T *)0)->m), \
		_Generic(((T *)0)->m, double: MEMBER_REAL, default: MEMBER_INT)
#define SET_DP(key, value, m, want) {dpsgd, "{}", key, value, IN(trn_dpsgd_params, m), want}
#define SET_CNN(key, value, m, want) {dpsgd, CNN_TS, key, value, IN(trn_dpsgd_params, m), want}
#define SET_EN(key, value, m, want) \
	{ensemble, ENSEMBLE_BASE, key, value, IN(trn_ensemble_params, m), want}
#define SET_SL(key, value, m, want) {slmc, "{}", key, value, IN(trn_slmc_params, m), want}
#define SET_LE(key, value, m, want) \
	{label_em, LABEL_EM_BASE, key, value, IN(trn_label_em_params, m), want}
#define SET_PT(key, value, m, want) {pate, "{}", key, value, IN(trn_pate_params, m), want}

static const member_case members[] = {
	SET_DP("activation", "\"tanh\"", activation, TRN_ACT_TANH),
	SET_DP("clipping", "\"per_layer\"", clipping, TRN_CLIP_PER_LAYER),
	SET_DP("epochs", "3", epochs, 3),
	SET_DP("lot_size", "17", lot_size, 17),
	SET_DP("noise_multiplier", "2.5", noise_multiplier, 2.5),
	SET_DP("clip_norm", "0.75", clip_norm, 0.75),
	{dpsgd, "{\"learning_rate_final\":0.01}", "learning_rate", "0.125",
	 IN(trn_dpsgd_params, learning_rate), 0.125},
	SET_DP("learning_rate_final", "0.0625", learning_rate_final, 0.0625),
	SET_DP("learning_rate_decay_epochs", "2", learning_rate_decay_epochs, 2),
	SET_DP("momentum", "0.5", momentum, 0.5),
	SET_DP("features", "\"raw\"", features, TRN_FEATURES_RAW),
	SET_DP("pca_components", "5", pca_components, 5),
	SET_DP("pca_noise_multiplier", "3.5", pca_noise_multiplier, 3.5),
	SET_DP("max_train_examples", "1234", max_train_examples, 1234),
	{dpsgd, "{\"model\":\"cnn\"}", "activation", "\"tempered_sigmoid\"",
	 IN(trn_dpsgd_params, conv_activation), TRN_CONV_TEMPERED_SIGMOID},
	{dpsgd, "{\"model\":\"cnn\"}", "image_channels", "3", IN(trn_dpsgd_params, image_channels),
	 3},
	{dpsgd, "{\"model\":\"cnn\"}", "precision", "\"float32\"", IN(trn_dpsgd_params, precision),
	 TRN_PRECISION_FLOAT32},
	SET_CNN("sigmoid_scale", "1.5", sigmoid_scale, 1.5),
	SET_CNN("sigmoid_temperature", "2.5", sigmoid_temperature, 2.5),
	SET_CNN("sigmoid_offset", "-0.25", sigmoid_offset, -0.25),
	SET_EN("parties", "3", parties, 3),
	SET_EN("algorithm", "\"majority_vote\"", algorithm, TRN_ENSEMBLE_MAJORITY_VOTE),
	SET_EN("epsilon", "2.5", epsilon, 2.5),
	SET_EN("lambda", "0.125", lambda, 0.125),
	SET_EN("input_scale", "4", input_scale, 4),
	SET_EN("local_lambda", "0.5", local_lambda, 0.5),
	SET_EN("knn_k", "7", knn_k, 7),
	SET_EN("max_depth", "9", max_depth, 9),
	SET_SL("clusters", "4", clusters, 4),
	SET_SL("features", "64", features, 64),
	SET_SL("iterations", "12", iterations, 12),
	SET_SL("gamma", "0.25", gamma, 0.25),
	SET_SL("lambda", "0.5", lambda, 0.5),
	SET_SL("rho", "1.5", rho, 1.5),
	SET_SL("fuzzifier", "1.75", fuzzifier, 1.75),
	SET_SL("max_norm", "3", max_norm, 3),
	SET_SL("epsilon", "2.5", epsilon, 2.5),
	SET_SL("parties", "3", parties, 3),
	SET_LE("epsilon", "2.5", epsilon, 2.5),
	SET_LE("loss", "\"ramp\"", loss.kind, TRN_LOSS_RAMP),
	SET_LE("b", "3", loss.b, 3),
	SET_LE("r", "4", loss.r, 4),
	SET_LE("activation", "\"tanh\"", activation, TRN_ACT_TANH),
	SET_LE("epochs", "7", epochs, 7),
	SET_LE("batch_size", "33", batch_size, 33),
	SET_LE("learning_rate", "0.125", learning_rate, 0.125),
	SET_LE("momentum", "0.25", momentum, 0.25),
	SET_LE("weight_decay", "0.0625", weight_decay, 0.0625),
	SET_LE("gradient_clip", "5", gradient_clip, 5),
	SET_LE("center", "false", center, false),
	SET_PT("teachers", "300", teachers, 300),
	SET_PT("queries", "300", queries, 300),
	SET_PT("aggregator", "\"interactive_gnmax\"", aggregator, MECH_PATE_INTERACTIVE),
	SET_PT("threshold", "30", threshold, 30),
	SET_PT("sigma1", "20", sigma1, 20),
	SET_PT("sigma2", "8", sigma2, 8),
	{pate, PATE_INTERACTIVE, "student_confidence", "0.75",
	 IN(trn_pate_params, student_confidence), 0.75},
	SET_PT("semi_supervised", "true", semi_supervised, true),
	SET_PT("confidence", "0.5", confidence, 0.5),
	SET_PT("release_beta", "0.03125", release_beta, 0.03125),
	SET_PT("release_sigma", "12", release_sigma, 12),
	SET_PT("release_order", "10", release_order, 10),
	SET_PT("teacher_model", "{\"epochs\":13}", teacher.epochs, 13),
	SET_PT("teacher_model", "{\"lot_size\":17}", teacher.lot_size, 17),
	SET_PT("teacher_model", "{\"learning_rate\":0.375}", teacher.learning_rate, 0.375),
	SET_PT("teacher_model", "{\"momentum\":0.25}", teacher.momentum, 0.25),
	SET_PT("teacher_model", "{\"activation\":\"tanh\"}", teacher.activation, TRN_ACT_TANH),
	SET_PT("student_model", "{\"epochs\":13}", student.epochs, 13),
	SET_PT("student_model", "{\"lot_size\":17}", student.lot_size, 17),
	SET_PT("student_model", "{\"learning_rate\":0.375}", student.learning_rate, 0.375),
	SET_PT("student_model", "{\"momentum\":0.25}", student.momentum, 0.25),
	SET_PT("student_model", "{\"activation\":\"tanh\"}", student.activation, TRN_ACT_TANH),
};

#undef SET_DP
#undef SET_CNN
#undef SET_EN
#undef SET_SL
#undef SET_LE
#undef SET_PT
#undef IN

/* The member a case names, read from p as its kind. */
static double member_value(const member_case *c, const any_params *p)
{
	const unsigned char *at = (const unsigned char *)p + c->offset;
	uint64_t u64;
	uint32_t u32;
	double d;

	if (c->kind == MEMBER_REAL) {
		memcpy(&d, at, sizeof(d));
		return d;
	}
	if (c->size == sizeof(u64)) {
		memcpy(&u64, at, sizeof(u64));
		return (double)u64;
	}
	if (c->size == sizeof(u32)) {
		memcpy(&u32, at, sizeof(u32));
		return (double)u32;
	}
	cr_assert_eq(c->size, 1, "%s: a member of %zu bytes", c->key, c->size);
	return (double)*at;
}

Test(params, each_field_sets_its_member_and_nothing_else)
{
	for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
		const member_case *c = &members[i];
		const unsigned char *a_bytes, *d_bytes;
		any_params a, d;
		acct_error err;

		parse_ok(c->f, c->base, &d);
		cr_assert_eq(parse(c->f, c->base, c->key, c->value, &a, &err), 0, "%s %s: %s at %s",
			     c->key, c->value, err.text, err.where);
		cr_expect_neq(member_value(c, &d), c->want, "%s: %s is its default", c->key,
			      c->value);
		cr_expect_eq(member_value(c, &a), c->want, "%s %s: read %.17g", c->key, c->value,
			     member_value(c, &a));
		a_bytes = (const unsigned char *)&a;
		d_bytes = (const unsigned char *)&d;
		for (size_t k = 0; k < sizeof(a); k++)
			if (k < c->offset || k >= c->offset + c->size)
				cr_expect_eq(a_bytes[k], d_bytes[k],
					     "%s %s moved byte %zu of the params", c->key, c->value,
					     k);
	}
}

/* A model named sets its kind and the widths that go with it. */
Test(params, a_model_sets_its_kind_and_widths)
{
	any_params a;

	parse_ok(dpsgd, "{\"model\":\"logreg\"}", &a);
	cr_expect_eq(a.dpsgd.model, TRN_MODEL_LOGREG);
	cr_expect_eq(a.dpsgd.n_hidden, 0);
	parse_ok(dpsgd, "{\"model\":\"cnn\"}", &a);
	cr_expect_eq(a.dpsgd.model, TRN_MODEL_CNN);
	parse_ok(label_em, "{\"epsilon\":1,\"model\":\"mlp\"}", &a);
	cr_expect_eq(a.label_em.model, TRN_MODEL_MLP);
	cr_expect_geq(a.label_em.n_hidden, 1);
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

/* An slmc noise multiplier given alone replaces the default target epsilon. */
Test(params, an_slmc_noise_multiplier_replaces_the_target_epsilon)
{
	any_params a;

	parse_ok(slmc, "{\"noise_multiplier\":6.5}", &a);
	cr_expect_eq(a.slmc.noise_multiplier, 6.5);
	cr_expect_eq(a.slmc.epsilon, 0.0);
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
			 "\"epochs\":13,\"lot_size\":17,\"learning_rate\":0.375,"
			 "\"momentum\":0.25}}",
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
