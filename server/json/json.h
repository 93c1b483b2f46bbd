/*
 * srv_json.h: checked readers for request JSON and the event codec.
 *
 * Every number a client sends goes through srv_json_real or srv_json_int
 * (range, NaN, infinity, type), never through a bare json_number_value.
 * `where` arguments are JSON pointers naming the enclosing object; errors
 * name the field itself ("/event/noise_multiplier").
 */
#ifndef SRV_JSON_H
#define SRV_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "acct.h"

/* Range flags for srv_json_real. */
enum {
	SRV_REQUIRED = 1 << 0,   /* missing key is an error */
	SRV_LO_OPEN = 1 << 1,    /* value must be > lo (default >= lo) */
	SRV_HI_OPEN = 1 << 2,    /* value must be < hi (default <= hi) */
	SRV_NULLABLE = 1 << 3,   /* JSON null reads as absent */
};

/*
 * Reads obj[key] as a finite real in [lo, hi] (openness per flags).  Returns
 * 1 and writes *ret when present, 0 when absent and not required (leaving
 * *ret alone), or ACCT_EINVAL with err naming where/key.
 */
int srv_json_real(const json_t *obj, const char *where, const char *key, unsigned flags,
		  double lo, double hi, double *ret, acct_error *err);

/*
 * Reads element i of the array `arr` (named by `where`) as a finite real in
 * [lo, hi] (an end excluded with SRV_LO_OPEN or SRV_HI_OPEN), an integer
 * when `integer`.  0 and *ret, or ACCT_EINVAL with err naming where/i.
 */
int srv_json_array_real(const json_t *arr, const char *where, size_t i, unsigned flags,
			double lo, double hi, bool integer, double *ret, acct_error *err);

/* Like srv_json_real for integers in [lo, hi]; a real with an exact integer
 * value (3.0, 1e3) is accepted. */
int srv_json_int(const json_t *obj, const char *where, const char *key, unsigned flags,
		 int64_t lo, int64_t hi, int64_t *ret, acct_error *err);

/* Reads obj[key] as a string of 1..max_bytes bytes; same return convention. */
int srv_json_string(const json_t *obj, const char *where, const char *key, unsigned flags,
		    size_t max_bytes, const char **ret, acct_error *err);

/* Reads obj[key] as a boolean; same return convention. */
int srv_json_bool(const json_t *obj, const char *where, const char *key, unsigned flags,
		  bool *ret, acct_error *err);

/* Fails with ACCT_EINVAL naming the first key of obj not in the NULL-ended
 * list `allowed`. */
int srv_json_only_keys(const json_t *obj, const char *where, const char *const *allowed,
		       acct_error *err);

/* Writes where + "/" + key (JSON-pointer escaped) into buf. */
void srv_json_pointer(char *buf, size_t size, const char *where, const char *key);

/*
 * The JSON pointer of the last scalar value (number, string, literal) that
 * starts before byte `pos` of `data`, whose bytes up to there a parser read
 * as valid JSON: the value at fault when the parser stopped on it (a number
 * too large, say).  "" when that value is the whole text or there is none.
 */
void srv_json_pointer_at(const char *data, size_t len, size_t pos, char *buf, size_t size);

/*
 * Parses a privacy event (DESIGN.md, "Privacy events").  Checks types,
 * ranges, unknown fields, nesting depth and node count; relation-specific
 * rules are acct_event_validate's.  On success *ret_event owns a new tree.
 */
int srv_event_parse(const json_t *json, const char *where, acct_event **ret_event,
		    acct_error *err);

/* The canonical JSON of an event tree; NULL when out of memory. */
json_t *srv_event_to_json(const acct_event *ev);

/*
 * A new JSON array of n items, item(v, i) for i in [0, n), each a new
 * reference the array takes; NULL when out of memory (an item of NULL
 * counts as such).
 */
json_t *srv_json_array_of(size_t n, json_t *(*item)(const void *v, size_t i), const void *v);

/* A new JSON array of the n reals (integers) of v, or NULL when out of
 * memory. */
json_t *srv_json_real_array(const double *v, size_t n);
json_t *srv_json_int_array(const int64_t *v, size_t n);

/*
 * Serialises JSON compactly, each real in the shortest form that reads back
 * as the same double.  Caller frees; NULL when out of memory.
 */
char *srv_json_dump(const json_t *j);

/* Appends j's text, as srv_json_dump writes it, to b (a failure sets
 * b->failed).  For answers too long to hold as one tree: a list can write
 * each item and free it. */
struct srv_buf;
void srv_json_dump_append(struct srv_buf *b, const json_t *j);

/*
 * The last step of a calculator that builds its answer in place: gives ans
 * to the caller (*ret_answer) and returns 0, or, when failed (ans is NULL or
 * a member could not be set), frees ans and returns ACCT_ENOMEM.  ans is
 * the caller's no longer either way.
 */
int srv_json_hand_over(json_t *ans, bool failed, json_t **ret_answer, acct_error *err);

/* Parses "add_remove" / "replace" from obj[key] (default add_remove). */
int srv_json_neighbor(const json_t *obj, const char *where, const char *key,
		      acct_neighbor *ret, acct_error *err);

/*
 * Reads obj's optional "filter_orders" (the orders of an rdp ledger's
 * filter) into orders[0..*ret_n) (room for DPG_MAX_FILTER_ORDERS): an array of 1 to DPG_MAX_FILTER_ORDERS
 * numbers, allowed only when kind is an rdp ledger; acct_filter_init_orders
 * checks the values.  Absent: *ret_n = 0 (the default orders).  Returns 0,
 * or ACCT_EINVAL with err pointing under `where`; orders and *ret_n are
 * written only on success.
 */
int srv_json_filter_orders(const json_t *obj, const char *where, acct_ledger_kind kind,
			   double *orders, unsigned *ret_n, acct_error *err);

/* A dataset, key or job id: 1 to 64 of [A-Za-z0-9_.-], not "." or "..". */
bool srv_id_ok(const char *s);

#endif
