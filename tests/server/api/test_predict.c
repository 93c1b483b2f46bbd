/*
 * test_predict.c: srv_predict's classes and scores against softmax written
 * out here, and its refusal of a row whose scores overflow (finite inputs
 * times the weights past DBL_MAX): JSON has no NaN or infinity, and an
 * argmax over NaN names no class the model chose.
 */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "api.h"
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
