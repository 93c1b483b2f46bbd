/*
 * trn.h: data loaders, models and training algorithms of dpgate.
 *
 * No HTTP, no SQL: a trainer states its privacy event before it runs, reads
 * only the data it is handed, and reports progress through a callback.
 */
#ifndef TRN_H
#define TRN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acct.h"
#include "mech.h"

/* ==== Data (issue 6) ==== */

/* ==== end data ==== */

/* ==== Models and DP-SGD (issue 6) ==== */

/* ==== end models and DP-SGD ==== */

#endif
