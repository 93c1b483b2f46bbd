/*
 * trn_version.c: placeholder translation unit so the trainers library links
 * before its first trainer lands.
 */
#include "trn.h"

int trn__unused(void);
int trn__unused(void)
{
	return 0;
}
