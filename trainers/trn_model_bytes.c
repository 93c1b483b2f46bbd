/*
 * trn_model_bytes.c: the little-endian fields of the model file (trn.h),
 * shared by the dense models' format (trn_model.c) and the convolutional
 * one (trn_model_conv.c).  A leaf.
 */
#include <string.h>

#include "trn_internal.h"

uint8_t *trn__put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 4;
}

uint8_t *trn__put_f64(uint8_t *p, double x)
{
	uint64_t v;

	memcpy(&v, &x, 8);
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 8;
}

uint32_t trn__get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

double trn__get_f64(const uint8_t *p)
{
	uint64_t v = 0;
	double x;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	memcpy(&x, &v, 8);
	return x;
}
