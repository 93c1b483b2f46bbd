/*
 * srv_mech_routes.h: budget-charged mechanism releases and hosted tables.
 *
 *   POST /v1/datasets/{id}/mechanisms/{name}   (spend)  srv_h_mech_release
 *   POST /v1/datasets/{id}/queries             (spend)  srv_h_table_query
 *   PUT  /v1/datasets/{id}/data, text/csv      (admin)  srv_data_put_csv,
 *        called by srv_h_data_put (srv_jobs.c) for CSV bodies.
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
#include "srv.h"

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
 * (srv_mech.h), plus optional "note" (ledger note) and "ledger_delta" (the
 * delta share at which a basic ledger prices an event that is not an
 * (epsilon, delta) pair, e.g. a Gaussian release; defaults to the body's
 * "delta" when it has one).  201 {"mechanism", "output", "event",
 * "charge_id", "cost": {"epsilon"}, "budget"}; 404 for an unknown name or
 * dataset; 400 with the field; 409 over budget; 422 unpriceable.
 */
int srv_h_mech_release(srv_request *req, srv_response *res);

/*
 * POST /v1/datasets/{id}/queries: a query on the hosted table
 * (srv_mech_table_query's bodies, plus "note").  201 {"query", "mechanism",
 * "output", "event", "charge_id", "cost", "budget"}; 404 when no table is
 * hosted; otherwise as above.
 */
int srv_h_table_query(srv_request *req, srv_response *res);

/*
 * The text/csv branch of PUT /v1/datasets/{id}/data for dataset `ds`: parses
 * the body (mech_table_parse_csv, optional declared schema in the query
 * parameter `columns=name:numeric,city:categorical`), stores the raw bytes
 * at <data_dir>/tables/<id>.csv (temp file, fsync, rename) and records rows,
 * columns and bytes in dataset_data (kind 'table'), replacing any earlier
 * link.  Answers 200 with the metadata (never rows), 400 with the field
 * (nothing stored), or 503.  Always returns 0 (the answer is in *res).
 */
int srv_data_put_csv(srv_request *req, srv_response *res, const srv_dataset *ds);

/*
 * Reads the dataset's hosted table back (with its recorded schema) for a
 * trainer.  Returns 0 and a new table (mech_table_free), ACCT_EUNSUPPORTED
 * when no table is hosted, or ACCT_EINTERNAL when it cannot be read.  The
 * error text never quotes the table's contents.
 */
int srv_data_load_table(srv_db *db, const char *dataset_id, mech_table **ret, acct_error *err);

#endif
