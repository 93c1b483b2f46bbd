/*
 * trn_conv_params.c: what a DP-SGD job's "cnn" model takes beyond the
 * shared DP-SGD parameters: its activation's names, the checks of its
 * blocks, kernels and tempered sigmoid, and the net it describes for data
 * of a given (public) shape.  A leaf: the job's run (trn_dpsgd.c) and the
 * server's parameter parsing read it, and it reads neither.
 */
#include <math.h>
#include <string.h>

#include "trn_internal.h"

/* Bounds of the tempered sigmoid's s, T and |o|: beyond them a value is
 * surely a mistake (s = T = 2, o = 1 is tanh). */
#define TRN_MAX_SIGMOID_PARAM 1e3

/* The activations' names, indexed by trn_conv_act. */
static const char *const conv_act_names[] = {"tanh", "tempered_sigmoid"};

int trn_conv_act_from_name(const char *name, trn_conv_act *ret)
{
	for (uint32_t c = 0; name && c < TRN__COUNT(conv_act_names); c++)
		if (strcmp(name, conv_act_names[c]) == 0) {
			*ret = (trn_conv_act)c;
			return 0;
		}
	return -1;
}

const char *trn_conv_act_name(uint32_t code)
{
	return code < TRN__COUNT(conv_act_names) ? conv_act_names[code] : NULL;
}

/* The precisions' names; a code is its index. */
static const trn__name precision_names[] = {
	{ "float64", TRN_PRECISION_FLOAT64 }, { "float32", TRN_PRECISION_FLOAT32 },
};

int trn_precision_from_name(const char *name, trn_precision *ret)
{
	int v = trn__name_lookup(precision_names, TRN__COUNT(precision_names), name);

	if (v >= 0)
		*ret = (trn_precision)v;
	return v < 0 ? -1 : 0;
}

const char *trn_precision_name(uint32_t code)
{
	return code < TRN__COUNT(precision_names) ? precision_names[code].name : NULL;
}

int trn__precision_check(const trn_dpsgd_params *p, acct_error *err)
{
	if (p->precision != TRN_PRECISION_FLOAT64 && p->precision != TRN_PRECISION_FLOAT32)
		return acct_error_set(err, ACCT_EINVAL, "/params/precision",
				      "precision must be \"float64\" or \"float32\"");
	if (p->precision == TRN_PRECISION_FLOAT64)
		return 0;
	if (p->model != TRN_MODEL_CNN)
		return acct_error_set(err, ACCT_EINVAL, "/params/precision",
				      "precision \"float32\" is a cnn's only");
	return 0;
}

/* The tempered sigmoid's s, T (in (0, max]) and o (|o| <= max). */
static int sigmoid_check(const trn_dpsgd_params *p, acct_error *err)
{
	if (trn__check_positive(p->sigmoid_scale, TRN_MAX_SIGMOID_PARAM, "/params/sigmoid_scale",
				err) < 0 ||
	    trn__check_positive(p->sigmoid_temperature, TRN_MAX_SIGMOID_PARAM,
				"/params/sigmoid_temperature", err) < 0)
		return ACCT_EINVAL;
	if (!trn__in_range(p->sigmoid_offset, -TRN_MAX_SIGMOID_PARAM, TRN_MAX_SIGMOID_PARAM))
		return acct_error_set(err, ACCT_EINVAL, "/params/sigmoid_offset",
				      "sigmoid_offset must be in [%g, %g]", -TRN_MAX_SIGMOID_PARAM,
				      TRN_MAX_SIGMOID_PARAM);
	return 0;
}

int trn__conv_params_check(const trn_dpsgd_params *p, acct_error *err)
{
	if (p->n_hidden > 1 ||
	    (p->n_hidden == 1 && (p->hidden[0] < 1 || p->hidden[0] > DPG_MAX_HIDDEN_UNITS)))
		return acct_error_set(err, ACCT_EINVAL, "/params/hidden",
				      "a cnn has one dense hidden layer of 1 to %d units",
				      DPG_MAX_HIDDEN_UNITS);
	if (trn__check_count(p->image_channels, 1, TRN_CONV_MAX_CHANNELS,
			     "/params/image_channels", err) < 0 ||
	    trn__check_count(p->n_conv, 1, TRN_CONV_MAX_CONV, "/params/conv_channels", err) < 0)
		return ACCT_EINVAL;
	for (uint32_t l = 0; l < p->n_conv; l++) {
		if (trn__check_count(p->conv_channels[l], 1, TRN_CONV_MAX_CHANNELS,
				     "/params/conv_channels", err) < 0)
			return ACCT_EINVAL;
		if (p->kernel[l] % 2 == 0 || p->kernel[l] > TRN_CONV_MAX_KERNEL)
			return acct_error_set(err, ACCT_EINVAL, "/params/kernel",
					      "a kernel side is odd ('same' padding), at most %u",
					      TRN_CONV_MAX_KERNEL);
	}
	if (p->conv_activation != TRN_CONV_TANH && p->conv_activation != TRN_CONV_TEMPERED_SIGMOID)
		return acct_error_set(err, ACCT_EINVAL, "/params/activation",
				      "a cnn's activation is \"tanh\" or \"tempered_sigmoid\"");
	if (p->conv_activation == TRN_CONV_TEMPERED_SIGMOID && sigmoid_check(p, err) < 0)
		return ACCT_EINVAL;
	/* The net reads the raw images; its clipping is of the whole gradient. */
	if (p->features == TRN_FEATURES_SCATTER || p->pca_components > 0)
		return acct_error_set(err, ACCT_EINVAL, "/params/features",
				      "a cnn takes the raw images (features \"raw\")");
	if (p->clipping != TRN_CLIP_GLOBAL)
		return acct_error_set(err, ACCT_EINVAL, "/params/clipping",
				      "a cnn clips the whole gradient (\"global\")");
	return 0;
}

int trn_dpsgd_conv_spec(const trn_dpsgd_params *p, size_t d, uint32_t num_classes,
			trn_conv_spec *ret, acct_error *err)
{
	trn_conv_spec s = {0};
	size_t c = p->image_channels, side = c ? (size_t)llround(sqrt((double)d / (double)c)) : 0;

	if (c < 1 || d % c != 0 || side * side != d / c)
		return acct_error_set(err, ACCT_EINVAL, "/params/image_channels",
				      "the rows' %zu features are not %zu square images", d, c);
	s.channels = (uint32_t)c;
	s.side = (uint32_t)side;
	s.n_conv = p->n_conv;
	for (uint32_t l = 0; l < p->n_conv && l < TRN_CONV_MAX_CONV; l++) {
		s.conv_channels[l] = p->conv_channels[l];
		s.kernel[l] = p->kernel[l];
	}
	s.hidden = p->n_hidden ? p->hidden[0] : 0;
	s.classes = num_classes;
	s.act = p->conv_activation;
	/* tanh is the tempered sigmoid with s = T = 2, o = 1: store those. */
	s.ts_scale = s.act == TRN_CONV_TANH ? 2.0 : p->sigmoid_scale;
	s.ts_temp = s.act == TRN_CONV_TANH ? 2.0 : p->sigmoid_temperature;
	s.ts_offset = s.act == TRN_CONV_TANH ? 1.0 : p->sigmoid_offset;
	if (trn__conv_spec_check(&s, NULL, err) < 0)
		return ACCT_EINVAL;
	*ret = s;
	return 0;
}
