/*
 * http_conns.h: the connections that wait for a request, their header
 * deadline and their share of the connection slots.
 *
 * libmicrohttpd's idle timeout restarts on every byte, so a client that
 * sends one header line every few seconds holds its connection for as long
 * as it likes, and enough such clients hold every slot: no one else, not
 * even /healthz, is served.  Two bounds here, beside libmicrohttpd's own
 * limit per client address (MHD_OPTION_PER_IP_CONNECTION_LIMIT, set by
 * http_serve.c):
 *
 *   - the header deadline: a request's header block must be complete
 *     header_timeout_s after its first byte arrived, or the connection is
 *     answered 408 and closed.  libmicrohttpd 0.9.75 has neither such a
 *     timer nor a hook per byte read, so a sweeper thread looks at the
 *     waiting connections every SRV_CONNS_SWEEP_MS; a request's first byte
 *     is seen as the socket's count of bytes received (TCP_INFO) growing
 *     past what it was when the connection began to wait.  A connection
 *     that sends nothing is left to the idle timeout.
 *   - the reserve: connections that wait (for a request's headers, for a
 *     body not yet admitted, or idle between keep-alive requests) hold at
 *     most max_waiting slots.  A new connection past that closes the one
 *     that has waited longest.  So a new client is always accepted, its
 *     request (complete in milliseconds) is never the oldest waiting, and
 *     requests being served keep the other slots.
 *
 * Rejected: a shorter idle timeout (each dripped byte restarts it);
 * refusing new connections when the waiting ones fill the slots (the
 * flood keeps its slots, and the honest client is the one turned away);
 * an accept policy alone (it decides before any byte is seen).
 *
 * The calls below for one connection come from the libmicrohttpd thread
 * that owns it; srv_conns_add may close another thread's connection, and
 * the sweeper closes any.  Closing is shutdown(2): libmicrohttpd sees the
 * end of the stream and closes the descriptor itself.  An entry leaves
 * the table in srv_conns_remove, which libmicrohttpd calls (through the
 * connection notification) before it closes the descriptor, under the
 * table's lock: a cut never reaches a reused descriptor number.
 */
#ifndef SRV_CONNS_H
#define SRV_CONNS_H

#include <stdint.h>

/* How often the sweeper checks header deadlines: a header block is cut
 * between header_timeout_s and header_timeout_s + this after its first
 * byte. */
#define SRV_CONNS_SWEEP_MS 100

typedef struct srv_conns srv_conns;
typedef struct srv_conn srv_conn;

/*
 * Makes the table and starts its sweeper: a header block is allowed
 * header_timeout_s seconds from its first byte (0: no deadline), and at
 * most max_waiting (at least 1) connections wait at once.  NULL when out
 * of memory or no thread could be started.
 */
srv_conns *srv_conns_new(unsigned header_timeout_s, unsigned max_waiting);

/* Stops and joins the sweeper and frees the table and every entry left in
 * it; NULL is a no-op.  Call it after libmicrohttpd has stopped. */
void srv_conns_free(srv_conns *t);

/*
 * A connection was accepted on socket `fd`: it waits for its first
 * request.  When that makes more than max_waiting wait, the connection
 * that has waited longest is closed.  Returns the connection's entry, or
 * NULL when out of memory (the connection is then not tracked: no
 * deadline, never closed for the reserve); every call below accepts NULL.
 */
srv_conn *srv_conns_add(srv_conns *t, int fd);

/* The connection's request headers are complete: no header deadline for
 * that request; it still waits (its body may be slow) until admitted. */
void srv_conns_headers_in(srv_conns *t, srv_conn *c);

/* The connection's request is being served (admitted, or answered): it
 * no longer waits and is never closed for the reserve. */
void srv_conns_serving(srv_conns *t, srv_conn *c);

/* The connection's answer was sent and it stays open (keep-alive): it
 * waits for its next request, whose deadline starts at its first byte. */
void srv_conns_wait_again(srv_conns *t, srv_conn *c);

/* The connection is closing: its entry is freed.  Must run before its
 * socket is closed. */
void srv_conns_remove(srv_conns *t, srv_conn *c);

typedef struct srv_conns_stats {
	unsigned waiting;             /* connections waiting now */
	uint64_t header_timeouts;     /* closed at the header deadline */
	uint64_t waiting_limit;       /* closed to keep the reserve */
} srv_conns_stats;

/* The counts above (all zero for NULL). */
srv_conns_stats srv_conns_read_stats(srv_conns *t);

#endif
