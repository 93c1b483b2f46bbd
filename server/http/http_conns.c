/*
 * http_conns.c: the connections that wait for a request (see http_conns.h
 * for why, and what was rejected).
 *
 * Waiting connections are a doubly linked list, oldest first, under one
 * mutex: adding, leaving and closing the oldest are O(1); the sweeper
 * walks the list once per SRV_CONNS_SWEEP_MS while it is not empty (and
 * sleeps while it is), with one getsockopt per connection whose request
 * has not yet sent a byte, and one peek at the unread bytes of a request
 * at its header deadline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <netinet/in.h>
#include <linux/tcp.h>

#include "base.h"
#include "dpg_limits.h"
#include "http_conns.h"

/* The 408 sent before a connection is cut at its header deadline
 * (RFC 9110, 15.5.9): a problem document like every other refusal. */
#define TIMEOUT_BODY                                                                         \
	"{\"type\":\"https://dpgate.dev/problems/408\",\"title\":\"Request timeout\","         \
	"\"status\":408,\"detail\":\"the request's headers did not arrive within the header " \
	"timeout (serve --header-timeout)\"}"

typedef enum conn_phase {
	PHASE_HEADERS, /* waits for its request's headers */
	PHASE_BODY,    /* headers in; waits for its body or its admission */
	PHASE_SERVING, /* its request is served; not in the list */
	PHASE_CUT,     /* shut down here; not in the list, closing */
} conn_phase;

struct srv_conn {
	srv_link link;               /* first: in the waiting list, oldest first */
	int fd;
	conn_phase phase;
	uint64_t bytes_mark;         /* bytes received when it began to wait */
	bool first_byte_seen;        /* its request's first byte arrived */
	bool headers_waiting;        /* past its deadline, its whole header block unread */
	struct timespec first_byte;  /* when the sweeper saw it (CLOCK_MONOTONIC) */
};

struct srv_conns {
	pthread_mutex_t lock;
	pthread_cond_t wake;         /* on CLOCK_MONOTONIC; signalled to stop */
	pthread_t sweeper;
	bool stop;
	srv_list list;
	unsigned waiting;
	unsigned max_waiting;
	unsigned header_timeout_s;
	atomic_uint_fast64_t header_timeouts;
	atomic_uint_fast64_t waiting_limit;
	char timeout_answer[512];
	size_t timeout_answer_len;
};

/* The connection whose link is l (its first member); NULL for NULL. */
static srv_conn *conn_of(srv_link *l)
{
	return (srv_conn *)l;
}

static void list_append(srv_conns *t, srv_conn *c)
{
	srv_list_push_back(&t->list, &c->link);
	t->waiting++;
}

static void list_unlink(srv_conns *t, srv_conn *c)
{
	srv_list_unlink(&t->list, &c->link);
	t->waiting--;
}

static bool in_list(const srv_conn *c)
{
	return c->phase == PHASE_HEADERS || c->phase == PHASE_BODY;
}

/* Bytes the socket has received so far (TCP_INFO, Linux 4.1 and later);
 * false when the kernel does not say. */
static bool bytes_received(int fd, uint64_t *ret)
{
	struct tcp_info info;
	socklen_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received))
		return false;
	*ret = info.tcpi_bytes_received;
	return true;
}

/*
 * Starts a wait, at the tail, its request's first byte not yet seen.  A
 * new connection's request starts with its first byte ever (bytes sent
 * before the accept count).  A kept-alive one's starts with the first
 * byte past those received when its answer was sent; a partial request
 * pipelined behind the previous one is among those, so its deadline
 * starts at its next byte: it gains at most one idle timeout.
 */
static void begin_wait(srv_conns *t, srv_conn *c, bool fresh)
{
	c->phase = PHASE_HEADERS;
	c->first_byte_seen = false;
	c->headers_waiting = false;
	c->bytes_mark = 0;
	if (!fresh && !bytes_received(c->fd, &c->bytes_mark)) {
		/* No count to compare with: the deadline runs from now. */
		c->first_byte_seen = true;
		clock_gettime(CLOCK_MONOTONIC, &c->first_byte);
	}
	list_append(t, c);
	/* The sweeper sleeps while no connection waits: wake it for this one. */
	if (t->waiting == 1)
		pthread_cond_signal(&t->wake);
}

/* Closes a waiting connection (lock held): libmicrohttpd reads the end of
 * the stream and closes it; srv_conns_remove frees the entry. */
static void cut(srv_conns *t, srv_conn *c)
{
	list_unlink(t, c);
	c->phase = PHASE_CUT;
	shutdown(c->fd, SHUT_RDWR);
}

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/*
 * Whether a whole header block waits unread in socket fd: the end of the
 * block ("\r\n\r\n") after its request line, among the bytes libmicrohttpd
 * has not read.  Then the client sent its headers in time, and the thread
 * that owns the connection is busy serving another connection's request
 * (it reads none of its connections meanwhile): the deadline is not the
 * client's to pay.  A client that drips its headers has no whole block
 * waiting, and is cut as before.  The block is looked for within the bytes
 * libmicrohttpd gives one request's headers (DPG_CONNECTION_MEMORY_BYTES);
 * a longer one it refuses itself.
 */
static bool header_block_unread(int fd)
{
	char buf[DPG_CONNECTION_MEMORY_BYTES];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	size_t start = 0;

	if (n <= 0)
		return false;
	/* Empty lines before a request line are skipped (RFC 9112, 2.2). */
	while (start < (size_t)n && (buf[start] == '\r' || buf[start] == '\n'))
		start++;
	return memmem(buf + start, (size_t)n - start, "\r\n\r\n", 4) != NULL;
}

/* One pass over the waiting list (lock held). */
static void sweep(srv_conns *t, const struct timespec *now)
{
	srv_conn *c = conn_of(t->list.head);

	while (c) {
		srv_conn *next = conn_of(c->link.next);
		uint64_t n;

		/* Without a count (an error), the deadline runs from now. */
		if (c->phase == PHASE_HEADERS && !c->first_byte_seen &&
		    (!bytes_received(c->fd, &n) || n > c->bytes_mark)) {
			c->first_byte_seen = true;
			c->first_byte = *now;
		}
		/* Peeked once: the block stays unread until libmicrohttpd reads
		 * it, and then the connection leaves this phase. */
		if (c->phase == PHASE_HEADERS && c->first_byte_seen && !c->headers_waiting &&
		    seconds_between(&c->first_byte, now) >= (double)t->header_timeout_s)
			c->headers_waiting = header_block_unread(c->fd);
		if (c->phase == PHASE_HEADERS && c->first_byte_seen && !c->headers_waiting &&
		    seconds_between(&c->first_byte, now) >= (double)t->header_timeout_s) {
			/* Best effort: a client that reads learns why. */
			(void)send(c->fd, t->timeout_answer, t->timeout_answer_len,
				   MSG_NOSIGNAL | MSG_DONTWAIT);
			cut(t, c);
			atomic_fetch_add(&t->header_timeouts, 1);
		}
		c = next;
	}
}

static void *sweeper_main(void *arg)
{
	srv_conns *t = arg;
	struct timespec next;

	pthread_mutex_lock(&t->lock);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!t->stop) {
		struct timespec now;

		/* An idle server costs no wake-ups: with no connection waiting
		 * there is nothing to time, until begin_wait signals. */
		if (!t->list.head) {
			pthread_cond_wait(&t->wake, &t->lock);
			clock_gettime(CLOCK_MONOTONIC, &next);
			continue;
		}
		next.tv_nsec += SRV_CONNS_SWEEP_MS * 1000000L;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (!t->stop && pthread_cond_timedwait(&t->wake, &t->lock, &next) != ETIMEDOUT)
			;
		if (t->stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		sweep(t, &now);
		next = now;
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

srv_conns *srv_conns_new(unsigned header_timeout_s, unsigned max_waiting)
{
	srv_conns *t = calloc(1, sizeof(*t));
	pthread_condattr_t attr;
	bool cond_made = false;
	int n;

	if (!t)
		return NULL;
	t->header_timeout_s = header_timeout_s;
	t->max_waiting = max_waiting > 0 ? max_waiting : 1;
	n = snprintf(t->timeout_answer, sizeof(t->timeout_answer),
		     "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
		     "Content-Type: application/problem+json\r\nCache-Control: no-store\r\n"
		     "Content-Length: %zu\r\n\r\n%s",
		     sizeof(TIMEOUT_BODY) - 1, TIMEOUT_BODY);
	t->timeout_answer_len = (size_t)n;
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		free(t);
		return NULL;
	}
	if (pthread_condattr_init(&attr) == 0) {
		cond_made = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
			    pthread_cond_init(&t->wake, &attr) == 0;
		pthread_condattr_destroy(&attr);
	}
	if (!cond_made)
		goto fail;
	/* No sweeper without a deadline: the reserve needs none. */
	if (header_timeout_s > 0 && pthread_create(&t->sweeper, NULL, sweeper_main, t) != 0) {
		pthread_cond_destroy(&t->wake);
		goto fail;
	}
	return t;
fail:
	pthread_mutex_destroy(&t->lock);
	free(t);
	return NULL;
}

void srv_conns_free(srv_conns *t)
{
	srv_conn *c;

	if (!t)
		return;
	if (t->header_timeout_s > 0) {
		pthread_mutex_lock(&t->lock);
		t->stop = true;
		pthread_cond_signal(&t->wake);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->sweeper, NULL);
	}
	/* Entries left are those of waiting connections libmicrohttpd did not
	 * report closed (none, after it stopped). */
	while ((c = conn_of(t->list.head))) {
		list_unlink(t, c);
		free(c);
	}
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

srv_conn *srv_conns_add(srv_conns *t, int fd)
{
	srv_conn *c;

	if (!t || !(c = calloc(1, sizeof(*c))))
		return NULL;
	c->fd = fd;
	pthread_mutex_lock(&t->lock);
	begin_wait(t, c, true);
	if (t->waiting > t->max_waiting && conn_of(t->list.head) != c) {
		cut(t, conn_of(t->list.head));
		atomic_fetch_add(&t->waiting_limit, 1);
	}
	pthread_mutex_unlock(&t->lock);
	return c;
}

void srv_conns_headers_in(srv_conns *t, srv_conn *c)
{
	if (!t || !c)
		return;
	pthread_mutex_lock(&t->lock);
	if (c->phase == PHASE_HEADERS)
		c->phase = PHASE_BODY;
	pthread_mutex_unlock(&t->lock);
}

void srv_conns_serving(srv_conns *t, srv_conn *c)
{
	if (!t || !c)
		return;
	pthread_mutex_lock(&t->lock);
	if (in_list(c)) {
		list_unlink(t, c);
		c->phase = PHASE_SERVING;
	}
	pthread_mutex_unlock(&t->lock);
}

void srv_conns_wait_again(srv_conns *t, srv_conn *c)
{
	if (!t || !c)
		return;
	pthread_mutex_lock(&t->lock);
	if (c->phase == PHASE_SERVING)
		begin_wait(t, c, false);
	pthread_mutex_unlock(&t->lock);
}

void srv_conns_remove(srv_conns *t, srv_conn *c)
{
	if (!t || !c)
		return;
	pthread_mutex_lock(&t->lock);
	if (in_list(c))
		list_unlink(t, c);
	pthread_mutex_unlock(&t->lock);
	free(c);
}

srv_conns_stats srv_conns_read_stats(srv_conns *t)
{
	srv_conns_stats s = {0};

	if (!t)
		return s;
	pthread_mutex_lock(&t->lock);
	s.waiting = t->waiting;
	pthread_mutex_unlock(&t->lock);
	s.header_timeouts = atomic_load(&t->header_timeouts);
	s.waiting_limit = atomic_load(&t->waiting_limit);
	return s;
}
