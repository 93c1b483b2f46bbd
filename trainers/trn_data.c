/*
 * trn_data.c: in-memory training tables and the IDX (Fashion-MNIST) loader.
 *
 * IDX is LeCun's format: a 4-byte magic (0, 0, type, ndims), then ndims
 * big-endian u32 sizes, then the data.  We accept exactly the two forms
 * Fashion-MNIST uses (unsigned-byte images with 3 dimensions, unsigned-byte
 * labels with 1) and check every size against DPG_ limits before allocating.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "trn_internal.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

int trn_dataset_new(size_t n, size_t d, uint32_t num_classes, trn_dataset **ret,
		    acct_error *err)
{
	trn_dataset *ds = NULL;

	if (n < 1 || n > (size_t)DPG_MAX_TRAIN_EXAMPLES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "a table needs 1 to %lld rows, not %zu",
				      (long long)DPG_MAX_TRAIN_EXAMPLES, n);
	if (d < 1 || d > DPG_MAX_FEATURES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "a table needs 1 to %d features, not %zu",
				      DPG_MAX_FEATURES, d);
	if (num_classes < 2 || num_classes > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "a table needs 2 to %d classes, not %u",
				      DPG_MAX_CLASSES, num_classes);
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		goto nomem;
	ds->n = n;
	ds->d = d;
	ds->num_classes = num_classes;
	ds->x = calloc(n * d, sizeof(double));
	ds->y = calloc(n, sizeof(uint32_t));
	if (!ds->x || !ds->y)
		goto nomem;
	*ret = ds;
	return 0;
nomem:
	trn_dataset_free(ds);
	return acct_error_set(err, ACCT_ENOMEM, "", "out of memory for a %zu x %zu table", n, d);
}

void trn_dataset_free(trn_dataset *ds)
{
	if (!ds)
		return;
	free(ds->x);
	free(ds->y);
	free(ds);
}

int trn_dataset_validate(const trn_dataset *ds, const char *where, acct_error *err)
{
	if (!where)
		where = "/data";
	if (!ds || !ds->x || !ds->y)
		return acct_error_set(err, ACCT_EINVAL, where, "no table");
	if (ds->n < 1 || ds->n > (size_t)DPG_MAX_TRAIN_EXAMPLES || ds->d < 1 ||
	    ds->d > DPG_MAX_FEATURES || ds->num_classes < 2 ||
	    ds->num_classes > DPG_MAX_CLASSES)
		return acct_error_set(err, ACCT_EINVAL, where,
				      "table shape %zu x %zu with %u classes is out of bounds",
				      ds->n, ds->d, ds->num_classes);
	for (size_t i = 0; i < ds->n; i++) {
		if (ds->y[i] >= ds->num_classes && ds->y[i] != TRN_NO_CLASS)
			return acct_error_set(err, ACCT_EINVAL, where,
					      "row %zu: label %u is not below %u", i, ds->y[i],
					      ds->num_classes);
		for (size_t j = 0; j < ds->d; j++)
			if (!isfinite(ds->x[i * ds->d + j]))
				return acct_error_set(err, ACCT_EINVAL, where,
						      "row %zu, feature %zu is not finite", i, j);
	}
	return 0;
}

int trn_dataset_from_table(const double *x, const int64_t *labels, size_t n, size_t d,
			   uint32_t num_classes, const char *where, trn_dataset **ret,
			   acct_error *err)
{
	trn_dataset *ds = NULL;
	int rc;

	if (!where)
		where = "/data";
	if (!x || !labels)
		return acct_error_set(err, ACCT_EINVAL, where, "no table");
	rc = trn_dataset_new(n, d, num_classes, &ds, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (labels[i] == (int64_t)TRN_NO_CLASS) {
			ds->y[i] = TRN_NO_CLASS;
			continue;
		}
		if (labels[i] < 0 || labels[i] >= (int64_t)num_classes) {
			rc = acct_error_set(err, ACCT_EINVAL, where,
					    "row %zu: label %lld is not in 0..%u", i,
					    (long long)labels[i], num_classes - 1);
			goto out;
		}
		ds->y[i] = (uint32_t)labels[i];
	}
	memcpy(ds->x, x, n * d * sizeof(double));
	rc = trn_dataset_validate(ds, where, err);
	if (rc < 0)
		goto out;
	*ret = ds;
	ds = NULL;
out:
	trn_dataset_free(ds);
	return rc;
}

/* ---- IDX ---------------------------------------------------------------- */

/* Reads exactly n bytes; 0, or -1 on a short read or a zlib error. */
static int gz_read_exact(gzFile f, void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n > 0) {
		unsigned want = n > (1u << 30) ? (1u << 30) : (unsigned)n;
		int got = gzread(f, p, want);

		if (got <= 0)
			return -1;
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

/* True when the stream has no byte left and ended without a zlib error. */
static bool gz_at_clean_end(gzFile f)
{
	uint8_t extra;
	int errnum = Z_OK;

	if (gzread(f, &extra, 1) != 0)
		return false;
	gzerror(f, &errnum);
	return errnum == Z_OK;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static gzFile gz_open_checked(const char *path, acct_error *err, int *rc)
{
	gzFile f;

	if (!path) {
		*rc = acct_error_set(err, ACCT_EINVAL, "/data", "no IDX path");
		return NULL;
	}
	f = gzopen(path, "rb");
	if (!f) {
		*rc = acct_error_set(err, ACCT_EINVAL, "/data", "cannot open %s: %s", path,
				     errno ? strerror(errno) : "zlib error");
		return NULL;
	}
	gzbuffer(f, 1u << 17);
	return f;
}

/* Reads and checks the 16-byte header of an IDX image file (magic 0x803,
 * count, rows, columns) within the DPG_MAX_* bounds. */
static int idx_read_image_header(gzFile f, const char *path, uint32_t *ret_n, size_t *ret_d,
				 acct_error *err)
{
	uint8_t hdr[16];
	uint32_t n, rows, cols;

	if (gz_read_exact(f, hdr, 16) < 0 || be32(hdr) != IDX_MAGIC_IMAGES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "%s is not an IDX image file (magic 0x00000803)", path);
	n = be32(hdr + 4);
	rows = be32(hdr + 8);
	cols = be32(hdr + 12);
	if (n < 1 || (uint64_t)n > (uint64_t)DPG_MAX_TRAIN_EXAMPLES || rows < 1 || cols < 1 ||
	    (uint64_t)rows * cols > DPG_MAX_FEATURES ||
	    (uint64_t)n * rows * cols > (uint64_t)DPG_MAX_IDX_BYTES)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "%s: sizes %u x %u x %u are out of bounds", path, n, rows, cols);
	*ret_n = n;
	*ret_d = (size_t)rows * cols;
	return 0;
}

/* Reads and checks the 8-byte header of an IDX label file (magic 0x801)
 * holding n labels. */
static int idx_read_label_header(gzFile f, const char *path, uint32_t n, acct_error *err)
{
	uint8_t hdr[8];
	uint32_t n_labels;

	if (gz_read_exact(f, hdr, 8) < 0 || be32(hdr) != IDX_MAGIC_LABELS)
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "%s is not an IDX label file (magic 0x00000801)", path);
	n_labels = be32(hdr + 4);
	if (n_labels != n)
		return acct_error_set(err, ACCT_EINVAL, "/data", "%u images but %u labels", n,
				      n_labels);
	return 0;
}

/* Reads exactly n payload bytes, which must end the file. */
static int idx_read_payload(gzFile f, const char *path, uint8_t *buf, size_t n, acct_error *err)
{
	if (gz_read_exact(f, buf, n) < 0 || !gz_at_clean_end(f))
		return acct_error_set(err, ACCT_EINVAL, "/data",
				      "%s: payload is truncated, corrupt or has trailing bytes", path);
	return 0;
}

int trn_idx_load(const char *images_path, const char *labels_path, uint32_t num_classes,
		 trn_dataset **ret, acct_error *err)
{
	gzFile fi = NULL, fl = NULL;
	uint8_t *pix = NULL, *lab = NULL;
	trn_dataset *ds = NULL;
	uint32_t n = 0;
	size_t d = 0;
	int rc = 0;

	fi = gz_open_checked(images_path, err, &rc);
	if (!fi)
		goto out;
	fl = gz_open_checked(labels_path, err, &rc);
	if (!fl)
		goto out;
	if ((rc = idx_read_image_header(fi, images_path, &n, &d, err)) < 0 ||
	    (rc = idx_read_label_header(fl, labels_path, n, err)) < 0)
		goto out;
	pix = malloc((size_t)n * d);
	lab = malloc(n);
	if (!pix || !lab) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory reading IDX");
		goto out;
	}
	if ((rc = idx_read_payload(fi, images_path, pix, (size_t)n * d, err)) < 0 ||
	    (rc = idx_read_payload(fl, labels_path, lab, n, err)) < 0)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		if (lab[i] >= num_classes) {
			rc = acct_error_set(err, ACCT_EINVAL, "/data",
					    "%s: label %u of row %u is not below %u", labels_path,
					    lab[i], i, num_classes);
			goto out;
		}
	rc = trn_dataset_new(n, d, num_classes, &ds, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < (size_t)n * d; i++)
		ds->x[i] = pix[i] / 255.0;
	for (uint32_t i = 0; i < n; i++)
		ds->y[i] = lab[i];
	*ret = ds;
	ds = NULL;
out:
	if (fi)
		gzclose_r(fi);
	if (fl)
		gzclose_r(fl);
	free(pix);
	free(lab);
	trn_dataset_free(ds);
	return rc;
}

int trn_fashion_mnist_load(const char *dir, bool train, trn_dataset **ret, acct_error *err)
{
	char images[PATH_MAX], labels[PATH_MAX];
	const char *split = train ? "train" : "t10k";
	trn_dataset *ds = NULL;
	int a, b, rc;

	if (!dir)
		dir = TRN_FASHION_MNIST_DIR;
	a = snprintf(images, sizeof(images), "%s/%s-images-idx3-ubyte.gz", dir, split);
	b = snprintf(labels, sizeof(labels), "%s/%s-labels-idx1-ubyte.gz", dir, split);
	if (a < 0 || b < 0 || (size_t)a >= sizeof(images) || (size_t)b >= sizeof(labels))
		return acct_error_set(err, ACCT_EINVAL, "/data", "data directory path too long");
	rc = trn_idx_load(images, labels, TRN_FASHION_MNIST_CLASSES, &ds, err);
	if (rc < 0)
		return rc;
	/* Jobs were checked against this shape when they were submitted. */
	if (ds->d != TRN_FASHION_MNIST_FEATURES) {
		trn_dataset_free(ds);
		return acct_error_set(err, ACCT_EINVAL, "/data", "%s has rows of other than %d pixels",
				      images, TRN_FASHION_MNIST_FEATURES);
	}
	*ret = ds;
	return 0;
}
