/*
 * cli/cli_predict.c: `dpgate predict --model FILE [CSV|-]`: a downloaded
 * model scores a CSV table offline, with the predict route's row reader
 * and scorer (api_predict.c).  Nothing is charged and nothing is sent: a
 * released model is already private.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cli.h"

static const char usage_predict[] =
	"usage: dpgate predict --model FILE [CSV|-]\n"
	"\n"
	"Classifies the rows of CSV (standard input when it is - or absent) with the\n"
	"model FILE that GET /v1/jobs/{id}/model served, offline: nothing is charged\n"
	"or sent. The table holds the model's inputs, in the model's order (the\n"
	"job's result.features) and nothing else; a first line that is not all\n"
	"numbers is a header and is skipped (so a table headed by the feature names\n"
	"and plain rows of numbers both work). At most 10000 rows. Prints CSV: the\n"
	"header class,score_0,score_1,... and then, for each row, its class (the\n"
	"class index: a numeric label's value, or the position of a categorical\n"
	"label's name in the job's classes) and the softmax score of each class.\n"
	"Exit 0, or 2 on a bad model file, a bad row (its line in the file named,\n"
	"and the column of a cell that is not a number) or bad usage.\n";

/* The whole of a stream, at most `max` bytes: malloc'ed, NUL-terminated,
 * or NULL when it is longer or cannot be read. */
static char *read_stream(FILE *f, size_t max, size_t *ret_len)
{
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap + 1), *grown;

	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			grown = cap >= max ? NULL : realloc(buf, 2 * cap + 1);
			if (!grown) {
				free(buf);
				return NULL;
			}
			buf = grown;
			cap *= 2;
		}
	}
	if (!buf || ferror(f) || len > max) {
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	*ret_len = len;
	return buf;
}

/* Reads the file at path (or stdin for "-") whole; NULL after a message. */
static char *read_input(const char *path, size_t max, size_t *ret_len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *text = f ? read_stream(f, max, ret_len) : NULL;

	if (f && f != stdin)
		fclose(f);
	if (!text)
		fprintf(stderr, "dpgate predict: cannot read %s (at most %zu bytes)\n",
			strcmp(path, "-") == 0 ? "standard input" : path, max);
	return text;
}

static void print_predictions(const uint32_t *pred, const double *scores, size_t n, size_t k)
{
	printf("class");
	for (size_t c = 0; c < k; c++)
		printf(",score_%zu", c);
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		printf("%u", pred[i]);
		for (size_t c = 0; c < k; c++)
			printf(",%.17g", scores[i * k + c]);
		printf("\n");
	}
}

/* Scores the CSV text with the model in buf; 0, or 2 after a message. */
static int predict_text(const uint8_t *model_buf, size_t model_len, const char *text,
			size_t len)
{
	trn_model *m = NULL;
	double *x = NULL, *scores = NULL;
	uint32_t *pred = NULL;
	size_t n = 0, k;
	acct_error err;
	int rc = 2;

	acct_error_init(&err);
	if (trn_model_deserialize(model_buf, model_len, &m, &err) < 0) {
		fprintf(stderr, "dpgate predict: not a dpgate model: %s\n", err.text);
		return 2;
	}
	k = trn_model_num_classes(m);
	if (srv_predict_csv_rows(text, len, NULL, trn_model_input_dim(m), &x, &n, &err) < 0) {
		fprintf(stderr, "dpgate predict: %s%s%s\n", err.text, err.where[0] ? " at " : "",
			err.where);
		goto out;
	}
	pred = malloc(sizeof(*pred) * n);
	scores = malloc(sizeof(*scores) * n * k);
	if (!pred || !scores) {
		fprintf(stderr, "dpgate predict: out of memory\n");
		goto out;
	}
	if (srv_predict(m, x, n, "", pred, scores, &err) < 0) {
		fprintf(stderr, "dpgate predict: cannot score the rows: %s\n", err.text);
		goto out;
	}
	print_predictions(pred, scores, n, k);
	rc = 0;
out:
	free(x);
	free(pred);
	free(scores);
	trn_model_free(m);
	return rc;
}

int cli_predict_main(int argc, char **argv)
{
	static const char *const names[] = {"model"};
	const char *model_path = NULL, *csv_path = "-";
	const char **const values[] = {&model_path};
	char *model = NULL, *text = NULL;
	size_t model_len = 0, len = 0;
	int rc;

	rc = cli_args_strings(argc, argv, names, values, 1, usage_predict);
	if (rc >= 0)
		return rc;
	if (optind < argc)
		csv_path = argv[optind++];
	if (!cli_args_complete("predict", model_path != NULL, optind, argc, argv, usage_predict))
		return 2;
	rc = 2;
	model = read_input(model_path, DPG_MAX_CSV_BYTES, &model_len);
	if (model)
		text = read_input(csv_path, DPG_MAX_BODY_BYTES * 64, &len);
	if (model && text)
		rc = predict_text((const uint8_t *)model, model_len, text, len);
	free(model);
	free(text);
	return rc;
}
