/*
 * trn_model_conv.c: a convolutional net (trn_conv.c) served as a trn_model:
 * the released model of a "cnn" job, its scores and evaluation, and its
 * model file (version 4, trn.h).
 *
 * The net keeps its weights and one example's scratch in one object; a
 * trn_model is const to its readers and may be scored from several
 * threads, so every read makes a view (trn__convnet_view): the weights
 * shared, the scratch its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trn_internal.h"

/* Bytes of the version 4 header before the blocks, and per block. */
#define CONV_FILE_HEADER 88u
#define CONV_FILE_BLOCK 8u

int trn__model_from_convnet(trn_convnet *net, trn_model **ret, acct_error *err)
{
	const trn_conv_spec *s = trn_convnet_spec(net);
	trn_model *m = calloc(1, sizeof(*m));
	uint32_t side = s->side >> s->n_conv;

	if (!m) {
		trn_convnet_free(net);
		return trn__nomem(err);
	}
	m->conv = net;
	m->input_dim = (uint32_t)trn_convnet_input_dim(net);
	m->input_rule = TRN_INPUT_NONE;
	m->input_scale = 1.0;
	m->n_params = trn_convnet_n_params(net);
	/* The dense layers: the last block's flattened output, the hidden
	 * layer if any, the classes. */
	m->dims[0] = s->conv_channels[s->n_conv - 1] * side * side;
	m->n_layers = s->hidden ? 2 : 1;
	if (s->hidden)
		m->dims[1] = s->hidden;
	m->dims[m->n_layers] = s->classes;
	m->activation = s->hidden ? TRN_ACT_TANH : 0;
	m->layer_act[0] = s->hidden ? TRN_ACT_TANH : TRN_ACT_IDENTITY;
	m->layer_act[1] = TRN_ACT_IDENTITY;
	*ret = m;
	return 0;
}

int trn__conv_model_scores(const trn_model *m, const double *x, size_t n, double *scores,
			   acct_error *err)
{
	trn_convnet *view = NULL;
	size_t d = m->input_dim, k = m->dims[m->n_layers];
	int rc = trn__convnet_view(m->conv, &view, err);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		trn__convnet_scores(view, x + i * d, scores + i * k);
	trn_convnet_free(view);
	return 0;
}

int trn__conv_model_evaluate(const trn_model *m, const trn_dataset *ds, double *ret_accuracy,
			     double *ret_loss, acct_error *err)
{
	size_t k = m->dims[m->n_layers], correct = 0, scored = 0;
	double *scores = malloc(k * sizeof(double)), loss = 0.0;
	trn_convnet *view = NULL;
	int rc = 0;

	/* Rows of no class are not scored (trn_model.c, classed_rows). */
	for (size_t i = 0; i < ds->n; i++) {
		if (ds->y[i] != TRN_NO_CLASS && ds->y[i] >= k)
			rc = acct_error_set(err, ACCT_EINVAL, "/data",
					    "row %zu: a class is out of range", i);
		scored += ds->y[i] != TRN_NO_CLASS;
	}
	if (rc == 0 && !scores)
		rc = trn__nomem(err);
	if (rc == 0)
		rc = trn__convnet_view(m->conv, &view, err);
	for (size_t i = 0; rc == 0 && i < ds->n; i++) {
		uint32_t y = ds->y[i];

		if (y == TRN_NO_CLASS)
			continue;
		trn__convnet_scores(view, ds->x + i * ds->d, scores);
		correct += trn__argmax(scores, (uint32_t)k) == y;
		loss -= log(scores[y] > 0.0 ? scores[y] : 1e-300);
	}
	if (rc == 0 && ret_accuracy)
		*ret_accuracy = scored ? (double)correct / (double)scored : NAN;
	if (rc == 0 && ret_loss)
		*ret_loss = scored ? loss / (double)scored : NAN;
	trn_convnet_free(view);
	free(scores);
	return rc;
}

int trn__conv_model_serialize(const trn_model *m, uint8_t **ret_buf, size_t *ret_len,
			      acct_error *err)
{
	const trn_conv_spec *s = trn_convnet_spec(m->conv);
	const double *w = trn_convnet_params(m->conv);
	size_t len = CONV_FILE_HEADER + CONV_FILE_BLOCK * s->n_conv + 8 * m->n_params;
	/* The words at 8..28, then 40..60, and the reals at 64..80 (trn.h). */
	const uint32_t head[] = {TRN__MODEL_CONV_VERSION, TRN_INPUT_NONE, m->input_dim, 0,
				 m->n_layers, s->classes};
	const uint32_t shape[] = {s->channels, s->side, s->n_conv, s->hidden, s->act, 0};
	const double act[] = {s->ts_scale, s->ts_temp, s->ts_offset};
	uint8_t *buf = malloc(len), *p;

	if (!buf)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory serialising a model");
	memcpy(buf, TRN_MODEL_MAGIC, 8);
	p = buf + 8;
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		p = trn__put_u32(p, head[i]);
	p = trn__put_f64(p, 1.0);
	for (size_t i = 0; i < sizeof(shape) / sizeof(shape[0]); i++)
		p = trn__put_u32(p, shape[i]);
	for (size_t i = 0; i < sizeof(act) / sizeof(act[0]); i++)
		p = trn__put_f64(p, act[i]);
	for (uint32_t l = 0; l < s->n_conv; l++) {
		p = trn__put_u32(p, s->conv_channels[l]);
		p = trn__put_u32(p, s->kernel[l]);
	}
	for (size_t i = 0; i < m->n_params; i++)
		p = trn__put_f64(p, w[i]);
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/* The shape a version 4 file states; ACCT_EINVAL when its fixed fields
 * disagree with each other (the spec's own bounds are trn_convnet_new's). */
static int read_conv_header(const uint8_t *buf, size_t len, trn_conv_spec *s, acct_error *err)
{
	uint32_t n_layers;

	memset(s, 0, sizeof(*s));
	if (len < CONV_FILE_HEADER)
		return acct_error_set(err, ACCT_EINVAL, "/model", "bad model header");
	n_layers = trn__get_u32(buf + 24);
	s->classes = trn__get_u32(buf + 28);
	s->channels = trn__get_u32(buf + 40);
	s->side = trn__get_u32(buf + 44);
	s->n_conv = trn__get_u32(buf + 48);
	s->hidden = trn__get_u32(buf + 52);
	s->act = (trn_conv_act)trn__get_u32(buf + 56);
	s->ts_scale = trn__get_f64(buf + 64);
	s->ts_temp = trn__get_f64(buf + 72);
	s->ts_offset = trn__get_f64(buf + 80);
	if (trn__get_u32(buf + 12) != TRN_INPUT_NONE || trn__get_u32(buf + 20) != 0 ||
	    trn__get_f64(buf + 32) != 1.0 || trn__get_u32(buf + 60) != 0 || s->n_conv < 1 ||
	    s->n_conv > TRN_CONV_MAX_CONV || s->channels > TRN_CONV_MAX_CHANNELS ||
	    s->side > TRN_SCATTER_MAX_SIDE || n_layers != (s->hidden ? 2u : 1u) ||
	    (uint64_t)s->channels * s->side * s->side != trn__get_u32(buf + 16) ||
	    len < CONV_FILE_HEADER + CONV_FILE_BLOCK * (size_t)s->n_conv)
		return acct_error_set(err, ACCT_EINVAL, "/model", "bad model header");
	for (uint32_t l = 0; l < s->n_conv; l++) {
		s->conv_channels[l] = trn__get_u32(buf + CONV_FILE_HEADER + CONV_FILE_BLOCK * l);
		s->kernel[l] = trn__get_u32(buf + CONV_FILE_HEADER + CONV_FILE_BLOCK * l + 4);
	}
	return 0;
}

int trn__conv_model_deserialize(const uint8_t *buf, size_t len, trn_model **ret,
				acct_error *err)
{
	trn_conv_spec s;
	trn_convnet *net = NULL;
	const uint8_t *p;
	double *w;
	size_t np;
	int rc = read_conv_header(buf, len, &s, err);

	if (rc == 0 && trn_convnet_new(&s, &net, NULL) < 0)
		rc = acct_error_set(err, ACCT_EINVAL, "/model", "bad convolutional model");
	if (rc < 0)
		return rc;
	np = trn_convnet_n_params(net);
	if (len != CONV_FILE_HEADER + CONV_FILE_BLOCK * (size_t)s.n_conv + 8 * np) {
		trn_convnet_free(net);
		return acct_error_set(err, ACCT_EINVAL, "/model", "model file has %zu bytes", len);
	}
	w = trn_convnet_params(net);
	p = buf + CONV_FILE_HEADER + CONV_FILE_BLOCK * s.n_conv;
	for (size_t i = 0; i < np; i++, p += 8)
		w[i] = trn__get_f64(p);
	if ((rc = trn__check_finite(w, np, "weight", err)) < 0) {
		trn_convnet_free(net);
		return rc;
	}
	return trn__model_from_convnet(net, ret, err);
}
