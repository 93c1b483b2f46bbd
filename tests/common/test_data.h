/*
 * test_data.h: the test data every unit-test folder reads the same way.
 *
 * The reference vectors live in tests/data/reference/ (copies of
 * ../shared/reference/); tests/meson.build points DPGATE_TEST_DATA at
 * tests/data.  One loader, so that each test folder checks a vector file
 * the same way before it trusts its cases.
 */
#ifndef TEST_DATA_H
#define TEST_DATA_H

#include <jansson.h>

/*
 * Loads tests/data/PATH (a JSON file) and returns it (the caller frees it
 * with json_decref).  Fails the running Criterion test when
 * DPGATE_TEST_DATA is unset or the file does not parse (a key twice
 * included).
 */
json_t *test_load_data(const char *path);

/*
 * Loads tests/data/reference/NAME.json and returns it (the caller frees it
 * with json_decref).  Fails the running Criterion test when
 * DPGATE_TEST_DATA is unset, when the file does not parse, or when it is
 * not a non-empty array of cases.
 */
json_t *test_load_reference(const char *name);

/* Loads NAME.json as test_load_reference does and calls check(id, case,
 * ctx) on each case in order, `id` being the case's "id" (or NULL). */
void test_each_reference_case(const char *name,
			      void (*check)(const char *id, json_t *c, void *ctx), void *ctx);

#endif
