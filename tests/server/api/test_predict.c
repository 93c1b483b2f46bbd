/*
 * test_predict.c: srv_predict's classes and scores against softmax written
 * out here, and its refusal of a row whose scores overflow (finite inputs
 * times the weights past DBL_MAX): JSON has no NaN or infinity, and an
 * argmax over NaN names no class the model chose.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "api.h"
#include "json.h"
#include "trn.h"

/* One dense layer, 2 inputs to 2 classes: logits (x0 + x1, -(x0 + x1)). */
static trn_model *opposite_sums(void)
{
	static const uint32_t widths[] = {2, 2}, acts[] = {TRN_ACT_IDENTITY};
	static const double params[] = {1, 1, -1, -1, 0, 0};
	trn_model *m = NULL;
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(trn_model_from_layers(1, widths, acts, params, TRN_INPUT_NONE, 1.0, &m, &err),
		     0, "%s", err.text);
	return m;
}

Test(predict, scores_are_the_softmax_of_the_logits)
{
	trn_model *m = opposite_sums();
	const double x[] = {0.25, 0.5, -1.0, -2.0};
	double scores[4];
	uint32_t pred[2];
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(srv_predict(m, x, 2, "/rows", pred, scores, &err), 0, "%s", err.text);
	for (int i = 0; i < 2; i++) {
		double t = x[2 * i] + x[2 * i + 1];
		double p0 = 1.0 / (1.0 + exp(-2.0 * t)); /* e^t / (e^t + e^-t) */

		cr_assert_float_eq(scores[2 * i], p0, 1e-15);
		cr_assert_float_eq(scores[2 * i + 1], 1.0 - p0, 1e-15);
		cr_assert_eq(pred[i], t > 0 ? 0u : 1u);
	}
	trn_model_free(m);
}

Test(predict, a_row_whose_scores_overflow_is_refused_and_named)
{
	trn_model *m = opposite_sums();
	/* The second row's logits are +-(2e308): past DBL_MAX. */
	const double x[] = {1.0, 2.0, 1e308, 1e308};
	double scores[4];
	uint32_t pred[2];
	acct_error err;

	acct_error_init(&err);
	cr_assert_eq(srv_predict(m, x, 2, "/rows", pred, scores, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/rows/1");
	acct_error_init(&err);
	cr_assert_eq(srv_predict(m, x, 2, "/csv", pred, scores, &err), ACCT_EUNSUPPORTED);
	cr_assert_str_eq(err.where, "/csv");
	cr_assert(strstr(err.text, "row 2 ") != NULL, "%s", err.text);
	trn_model_free(m);
}

/* The answer as the JSON values it stands for, built with jansson. */
static json_t *answer_as_values(const uint32_t *pred, const double *scores, size_t n, size_t k,
				json_t *labels)
{
	json_t *classes = json_array(), *all = json_array(), *o;

	for (size_t i = 0; i < n; i++) {
		json_t *row = json_array();

		for (size_t c = 0; c < k; c++)
			json_array_append_new(row, json_real(scores[i * k + c]));
		json_array_append_new(all, row);
		json_array_append_new(classes, labels ? json_incref(json_array_get(labels, pred[i])) :
							json_integer(pred[i]));
	}
	o = json_pack("{s:o, s:o}", "classes", classes, "scores", all);
	if (labels)
		json_object_set(o, "labels", labels);
	return o;
}

/*
 * The answer is written as text a row at a time (an answer of 10^6 scores
 * built as JSON values took one allocation a score): byte for byte what
 * the server's JSON writer prints for the same values, with and without
 * labels, on scores of every magnitude, and valid JSON whose numbers read
 * back exactly.
 */
Test(predict, the_answer_text_is_the_json_of_its_values)
{
	static const double scores[] = {0.1, 0.9, 1.0, 0.0, 1e-300, 0.3333333333333333,
					2.5e-17, 1 - 0x1p-53, 0.5};
	static const uint32_t pred[] = {1, 0, 2};
	json_t *labels = json_pack("[s, s, i]", "cat", "d\"og", 7);

	for (int with = 0; with < 2; with++) {
		json_t *want = answer_as_values(pred, scores, 3, 3, with ? labels : NULL), *back;
		char *want_text = srv_json_dump(want);
		srv_buf got = {0};

		srv_predict_answer(&got, pred, scores, 3, 3, with ? labels : NULL);
		cr_assert(!got.failed);
		cr_assert_str_eq(got.s, want_text);
		back = json_loads(got.s, 0, NULL);
		cr_assert_not_null(back, "%s", got.s);
		for (size_t i = 0; i < 9; i++)
			cr_assert_eq(json_real_value(json_array_get(
					     json_array_get(json_object_get(back, "scores"), i / 3), i % 3)),
				     scores[i]);
		json_decref(back);
		json_decref(want);
		free(want_text);
		free(got.s);
	}
	json_decref(labels);
}
