/*
 * trn_test_conv.c: the shared convolutional net of the gradient tests
 * (trn_test_conv.h).
 */
#include <criterion/criterion.h>

#include "trn_test_conv.h"
#include "trn_test_rng.h"

trn_conv_spec trn_test_conv_spec(trn_conv_act act)
{
	trn_conv_spec s = {
		.channels = 2, .side = 8, .n_conv = 2, .conv_channels = {4, 6}, .kernel = {3, 5},
		.hidden = 10, .classes = 3, .act = act, .ts_scale = 3.0, .ts_temp = 0.7,
		.ts_offset = 1.0,
	};
	return s;
}

trn_convnet *trn_test_conv_net(const trn_conv_spec *s, mech_rng *rng)
{
	trn_convnet *n = NULL;
	acct_error err;
	double *p;

	acct_error_init(&err);
	cr_assert_eq(trn_convnet_new(s, &n, &err), 0, "%s", err.text);
	cr_assert_eq(trn_convnet_init(n, rng, &err), 0, "%s", err.text);
	p = trn_convnet_params(n);
	for (size_t i = 0; i < trn_convnet_n_params(n); i++)
		if (p[i] == 0.0)
			p[i] = 0.1 * trn_test_normal(rng);
	return n;
}
