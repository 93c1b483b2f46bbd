/*
 * api_mech_routes.h: budget-charged mechanism releases and hosted tables.
 *
 *   POST /v1/datasets/{id}/mechanisms/{name}   (spend)  srv_h_mech_release
 *   POST /v1/datasets/{id}/queries             (spend)  srv_h_table_query
 *   PUT  /v1/datasets/{id}/data, text/csv      (admin)  srv_data_put_csv,
 *        called by srv_h_data_put (api_data_routes.c) for CSV bodies.
 *
 * The release rule (DESIGN.md, "Budgets, ledger and the filter"): a retried
 * request with a known Idempotency-Key gets its stored answer before
 * anything else happens; otherwise the body is validated, the output is
 * sampled with a fresh CSPRNG (never a deterministic one), the event is
 * validated and priced with the dataset's filter, and srv_store_spend admits
 * and durably writes the charge together with the answer.  Only then is the
 * output sent.  A request that is refused (bad input, unpriceable event,
 * over budget) charges nothing and reveals nothing.
 */
#ifndef SRV_MECH_ROUTES_H
#define SRV_MECH_ROUTES_H

#include "mech.h"
#include "api_internal.h"
#include "store.h"

/*
 * A fresh CSPRNG for one release: a ChaCha20 stream keyed with 256 bits of
 * getrandom(2) for this release alone.  Not getrandom per draw: the
 * samplers' rejection loops run longer for some outputs, and at a system
 * call per draw each extra round cost microseconds that a client could
 * time; from a stream it costs nanoseconds.  (Narrowed, not closed: not
 * every sampler is constant-time.)  Refuses a deterministic source (the
 * server has no way to make one; this is the last line of defence).
 * Returns the rng (caller frees), or NULL after answering 503: every
 * release route refuses alike, before its charge.
 */
mech_rng *srv_release_rng(srv_response *res);

/*
 * POST /v1/datasets/{id}/mechanisms/{name}.  Body: the mechanism's fields
 * (api_mech.h), plus optional "note" (ledger note) and "ledger_delta" (the
 * delta share at which a basic ledger prices an event that is not an
 * (epsilon, delta) pair, e.g. a Gaussian release; defaults to the body's
 * "delta" when it has one).  201 {"mechanism", "output", "event",
 * "charge_id", "cost": {"epsilon"}, "budget"}; 404 for an unknown name or
 * dataset; 400 with the field; 409 over budget; 422 unpriceable.
 */
srv_route_fn srv_h_mech_release;

/*
 * POST /v1/datasets/{id}/queries: a query on the hosted table
 * (srv_mech_table_query's bodies, plus "note").  201 {"query", "mechanism",
 * "output", "event", "charge_id", "cost", "budget"}; 404 when no table is
 * hosted; otherwise as above.
 */
srv_route_fn srv_h_table_query;

/*
 * The text/csv branch of PUT /v1/datasets/{id}/data for dataset `ds`: parses
 * the body (mech_table_parse_csv, optional declared schema in the query
 * parameter `columns=name:numeric,city:categorical`, optional
 * `row_count=public|private`, private by default), writes the raw bytes
 * to a file of its own, <data_dir>/tables/<id>.<24 hex>.csv (fsync of the
 * file and of the directory), then in one write transaction records that
 * path with the rows, columns, bytes and what was declared (the schema,
 * a public row count) in dataset_data (kind 'table'),
 * replacing any earlier link, and after the commit removes the file the
 * earlier link named.  Readers never see a path with another upload's
 * schema.  Answers 200 with the metadata (never rows), 400 with the field
 * (nothing stored), 409 while a job of the dataset runs
 * (srv__reply_data_in_use) or 503 (nothing changed; a file already
 * written is removed).  Always returns 0 (the answer is in *res).
 */
int srv_data_put_csv(srv_request *req, srv_response *res, const srv_dataset *ds);

/* The 409 of a data link that cannot change while a job of its dataset
 * runs: the job may not have read it yet (srv__data_link_hold).  Nothing
 * was changed. */
void srv__reply_data_in_use(srv_response *res);



/*
 * After the commit that replaced a dataset's table link (its old path from
 * srv_store_table_record or srv__data_link_builtin), pass the path to
 * srv__table_file_drop, which removes it if it is a file an upload of
 * this dataset wrote (and drops its parse from `cache`, which may be NULL)
 * and leaves anything else alone.
 */
void srv__table_file_drop(srv_table_cache *cache, const char *data_dir, const char *path,
			  const char *dataset_id);

/* The bytes of the table a dataset's link names (`path`, as the link
 * read), from its file (under data_dir/tables, by its name) or, on a
 * shared database, from the database; *ret is malloc'd and
 * NUL-terminated.  0, -ENOENT when it is gone (an upload replaced it since
 * the link was read), or -EIO. */
int srv__table_read_linked(srv_db *db, const char *data_dir, const char *dataset_id,
			   const char *path, char **ret, size_t *ret_len);

#endif
