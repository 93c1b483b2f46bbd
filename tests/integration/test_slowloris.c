/*
 * test_slowloris.c: clients that hold connections by sending slowly must
 * not shut the others out (server/srv_conns.h).
 *
 * The attackers run from other loopback addresses than the honest client:
 * all of 127.0.0.0/8 is loopback on Linux, so a socket bound to 127.0.0.2
 * reaches the server as a distinct client address, while libcurl's
 * requests come from 127.0.0.1.  Each attack holds more connections than
 * the server's whole limit (DPG_MAX_CONNECTIONS, 1024): before the header
 * deadline, the limit per address and the reserve, 1,100 such connections
 * left no slot for anyone, /healthz included.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define ATTACKERS 1100        /* more than the server's 1024 connections */
#define CONNECTION_LIMIT 1024 /* DPG_MAX_CONNECTIONS */
#define RESERVE 64            /* DPG_CONNECTION_RESERVE */
#define HONEST_ROUNDS 10
#define CHARGE "{\"event\":{\"type\":\"epsilon_delta\",\"epsilon\":0.125,\"delta\":0}}"

/* Room for the attack's sockets here and in the server, which inherits
 * the limit: twice the attackers, and some. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = 2 * ATTACKERS + 512;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur >= want)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		cr_skip_test("RLIMIT_NOFILE's hard limit %llu is below the %llu descriptors this "
			     "test needs", (unsigned long long)rl.rlim_max, (unsigned long long)want);
	rl.rlim_cur = want;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "%s", strerror(errno));
}

/* A connection to the server from loopback address 127.0.0.`host`, with
 * 1 s send and receive timeouts; -1 when it cannot be made. */
static int connect_from(const dpg_server *s, int host)
{
	struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = 1};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0, "%s", strerror(errno));
	from.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)host);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons((uint16_t)s->port);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Opens ATTACKERS connections, `per_host` from each address from
 * 127.0.0.2 on, each sending `head` (a request cut short) and no more. */
static void open_attack(const dpg_server *s, int fds[ATTACKERS], int per_host, const char *head)
{
	for (int i = 0; i < ATTACKERS; i++) {
		fds[i] = connect_from(s, 2 + i / per_host);
		/* The server may have closed it already: a failed send is as
		 * good as a held connection here. */
		if (fds[i] >= 0)
			(void)send(fds[i], head, strlen(head), MSG_NOSIGNAL);
	}
}

static void close_attack(int fds[ATTACKERS])
{
	for (int i = 0; i < ATTACKERS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/*
 * While the attack holds its connections, the honest client (127.0.0.1)
 * gets each of HONEST_ROUNDS charges and health checks answered within a
 * second, and the dataset's ledger then holds exactly those charges.
 */
static void expect_honest_client_served(const dpg_server *s)
{
	double limit = 1.0 * dpg_time_scale();
	dpg_http_opts opts = {.timeout_s = 5};

	for (int i = 0; i < HONEST_ROUNDS; i++) {
		double t0 = dpg_now_s(), took;
		dpg_resp r;

		cr_assert_eq(dpg_http_opt(s, &opts, "POST", "/v1/datasets/d/charges", s->admin_key,
					  CHARGE, strlen(CHARGE), NULL, &r),
			     0, "charge %d: no answer while the attack holds its connections", i);
		took = dpg_now_s() - t0;
		cr_expect_eq(r.status, 201, "charge %d: %ld %s", i, r.status, r.body);
		cr_expect_leq(took, limit, "charge %d took %.3f s", i, took);
		dpg_resp_free(&r);
		t0 = dpg_now_s();
		cr_assert_eq(dpg_http_opt(s, &opts, "GET", "/healthz", NULL, NULL, 0, NULL, &r), 0,
			     "/healthz %d: no answer while the attack holds its connections", i);
		took = dpg_now_s() - t0;
		cr_expect_eq(r.status, 200);
		cr_expect_leq(took, limit, "/healthz %d took %.3f s", i, took);
		dpg_resp_free(&r);
	}
	cr_expect_eq(dpg_budget_of(s, "d").charges, HONEST_ROUNDS);
}

static void start(dpg_server *s, const char *const *args)
{
	raise_fd_limit();
	dpg_server_start(s);
	dpg_make_dataset(s, "d", 100.0, 0, "basic");
	cr_assert_eq(dpg_server_signal(s, SIGTERM), 0);
	s->serve_args = args;
	dpg_server_restart(s);
}

/*
 * A header block dripped a byte every 0.1 s is answered 408 and cut at
 * the header deadline (2 s here), counted from its first byte: not by the
 * idle timeout (30 s), which each byte restarts.  A connection that waits
 * longer than the deadline before its first byte is not cut for it, nor is
 * a kept-alive one idle that long between requests.
 */
Test(slowloris, a_dripped_header_block_is_cut_at_the_deadline, .timeout = 120)
{
	static const char *const args[] = {"--header-timeout", "2", NULL};
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	char drip[512], buf[1024];
	dpg_server srv;
	double t0, cut = -1;
	size_t got = 0;
	int fd;

	start(&srv, args);
	snprintf(drip, sizeof(drip), "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: %0300d\r\n\r\n", 0);
	fd = connect_from(&srv, 1);
	cr_assert_geq(fd, 0);
	t0 = dpg_now_s();
	for (size_t i = 0; i < strlen(drip) && dpg_now_s() - t0 < 20; i++) {
		ssize_t k;

		if (send(fd, drip + i, 1, MSG_NOSIGNAL) != 1) {
			cut = dpg_now_s() - t0;
			break;
		}
		usleep(100000);
		k = recv(fd, buf + got, sizeof(buf) - 1 - got, MSG_DONTWAIT);
		if (k > 0)
			got += (size_t)k;
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			cut = dpg_now_s() - t0;
			break;
		}
	}
	buf[got] = '\0';
	close(fd);
	/* 2 s, plus one sweep (0.1 s) and this loop's step, after the first byte. */
	cr_assert_geq(cut, 1.9, "cut after %.2f s, before the header deadline", cut);
	cr_assert_leq(cut, 2.0 + 2.0 * dpg_time_scale(), "the dripped headers were not cut (%.2f s)", cut);
	cr_expect(strncmp(buf, "HTTP/1.1 408 ", 13) == 0, "answer: %.200s", buf);
	cr_expect(strstr(buf, "application/problem+json") != NULL, "answer: %.200s", buf);
	cr_expect_eq(dpg_metric(&srv, "dpgate_connections_closed_total{reason=\"header_timeout\"}"), 1);

	/* Silent for 3 s, then a whole request at once: answered.  Then idle
	 * 3 s on the kept-alive connection, and a second request: answered. */
	fd = connect_from(&srv, 1);
	cr_assert_geq(fd, 0);
	for (int round = 0; round < 2; round++) {
		ssize_t k;

		usleep(3000000);
		cr_assert_eq(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req),
			     "round %d: %s", round, strerror(errno));
		k = recv(fd, buf, sizeof(buf) - 1, 0);
		cr_assert_gt(k, 0, "round %d: %s", round, k < 0 ? strerror(errno) : "closed");
		buf[k] = '\0';
		cr_expect(strncmp(buf, "HTTP/1.1 200 ", 13) == 0, "round %d: %.200s", round, buf);
	}
	close(fd);
	cr_expect_eq(dpg_metric(&srv, "dpgate_connections_closed_total{reason=\"header_timeout\"}"), 1);
	dpg_server_destroy(&srv);
}

/* The first bytes of an answer on fd, waiting at most timeout_s for them,
 * NUL-terminated into buf; "" when none came (closed, or none in time). */
static void first_answer_bytes(int fd, double timeout_s, char *buf, size_t size)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t k = 0;

	if (poll(&p, 1, (int)(timeout_s * 1000)) > 0)
		k = recv(fd, buf, size - 1, 0);
	buf[k > 0 ? k : 0] = '\0';
}

/*
 * The header deadline is the client's, not the server's: while the one
 * HTTP thread (--threads 1) serves another request for longer than the
 * deadline (1 s here; a key's creation, its getrandom held 2 s twice by
 * the slow_random shim), a kept-alive client whose whole request arrived
 * at once waits for the thread and is answered.  Before, it was answered
 * 408 one deadline after its request's first byte.  A client whose
 * headers are not complete is still cut at the deadline, busy thread or
 * not.
 */
Test(slowloris, headers_that_arrived_wait_for_a_busy_thread, .timeout = 120)
{
	static const dpg_shim_switch slow = {"DPGATE_TEST_SLOW_RANDOM", "slow"};
	static const char *const args[] = {"--header-timeout", "1", NULL};
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char body[] = "{\"role\":\"viewer\"}";
	char create[1024], buf[1024];
	dpg_server srv;
	dpg_shim_env e;
	int kept, busy, partial;
	double t0, answered;

	dpg_shim_server_start(&srv, &e, "busythread", SLOW_RANDOM_SHIM, &slow, 1);
	cr_assert_eq(dpg_server_signal(&srv, SIGTERM), 0);
	srv.threads = 1;
	srv.serve_args = args;
	dpg_server_restart(&srv);
	kept = connect_from(&srv, 1);
	cr_assert_geq(kept, 0);
	cr_assert_eq(send(kept, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	first_answer_bytes(kept, 5, buf, sizeof(buf));
	cr_assert(strncmp(buf, "HTTP/1.1 200 ", 13) == 0, "first answer: %.200s", buf);

	dpg_switch_file(e.file[0], true);
	snprintf(create, sizeof(create),
		 "POST /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		 srv.admin_key, strlen(body), body);
	busy = connect_from(&srv, 1);
	cr_assert_geq(busy, 0);
	t0 = dpg_now_s();
	cr_assert_eq(send(busy, create, strlen(create), MSG_NOSIGNAL), (ssize_t)strlen(create));
	usleep(300000);
	partial = connect_from(&srv, 1);
	cr_assert_geq(partial, 0);
	cr_assert_eq(send(partial, req, strlen(req) - 2, MSG_NOSIGNAL), (ssize_t)strlen(req) - 2);
	cr_assert_eq(send(kept, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));

	first_answer_bytes(kept, 20 * dpg_time_scale(), buf, sizeof(buf));
	answered = dpg_now_s() - t0;
	cr_expect(strncmp(buf, "HTTP/1.1 200 ", 13) == 0,
		  "the kept-alive request, answered after %.2f s: %.200s", answered, buf);
	/* It waited for the busy thread: longer than its deadline. */
	cr_expect_geq(answered, 2.0, "answered after %.2f s", answered);
	first_answer_bytes(busy, 20 * dpg_time_scale(), buf, sizeof(buf));
	cr_expect(strncmp(buf, "HTTP/1.1 201 ", 13) == 0, "the key's creation: %.200s", buf);
	first_answer_bytes(partial, 5 * dpg_time_scale(), buf, sizeof(buf));
	cr_expect(strncmp(buf, "HTTP/1.1 408 ", 13) == 0, "the unfinished headers: %.200s", buf);
	dpg_switch_file(e.file[0], false);
	cr_expect_eq(dpg_metric(&srv, "dpgate_connections_closed_total{reason=\"header_timeout\"}"),
		     1);
	close(kept);
	close(busy);
	close(partial);
	dpg_shim_server_stop(&srv, &e);
}

/*
 * 1,100 connections from one address that never finish their headers
 * (the deadline set long, so that it plays no part): the server holds at
 * most --max-conns-per-ip of them, and the honest client is served.
 */
Test(slowloris, one_address_holds_at_most_its_limit, .timeout = 300)
{
	static const char *const args[] = {"--header-timeout", "60", "--max-conns-per-ip", "50",
					   NULL};
	static int fds[ATTACKERS];
	dpg_server srv;
	double waiting;

	start(&srv, args);
	open_attack(&srv, fds, ATTACKERS, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
	expect_honest_client_served(&srv);
	/* 50 from the attacking address; beside them, the honest client's
	 * last few connections may still wait for the server to see them
	 * closed (libcurl's handles here open one per request). */
	waiting = dpg_metric(&srv, "dpgate_connections_waiting");
	cr_expect_leq(waiting, 50 + 4, "%g connections wait", waiting);
	cr_expect_eq(dpg_metric(&srv, "dpgate_connections_closed_total{reason=\"waiting_limit\"}"), 0);
	close_attack(fds);
	dpg_server_destroy(&srv);
}

/*
 * A keyed client whose large uploads (admitted before their bodies are
 * read) arrive slowly: 1,100 of them from one address hold at most
 * --max-conns-per-ip connections, and everyone else is served.
 */
Test(slowloris, slow_keyed_bodies_hold_at_most_the_address_limit, .timeout = 300)
{
	static const char *const args[] = {"--max-conns-per-ip", "50", NULL};
	static int fds[ATTACKERS];
	char head[512];
	dpg_server srv;

	start(&srv, args);
	snprintf(head, sizeof(head),
		 "PUT /v1/datasets/d/data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
		 "Content-Type: text/csv\r\nContent-Length: 1000000\r\n\r\nx,y\n",
		 srv.admin_key);
	open_attack(&srv, fds, ATTACKERS, head);
	expect_honest_client_served(&srv);
	close_attack(fds);
	dpg_server_destroy(&srv);
}

/*
 * 1,100 connections from 11 addresses, each within the limit per address,
 * that never finish their headers: past all but the reserve of the 1024
 * slots, each new connection closes the longest-waiting one, so the
 * honest client is served, and at least 1100 - (1024 - 64) were closed.
 */
Test(slowloris, many_addresses_leave_the_reserve, .timeout = 300)
{
	static const char *const args[] = {"--header-timeout", "60", "--max-conns-per-ip", "100",
					   NULL};
	static int fds[ATTACKERS];
	dpg_server srv;
	double closed, waiting;

	start(&srv, args);
	open_attack(&srv, fds, 100, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
	expect_honest_client_served(&srv);
	closed = dpg_metric(&srv, "dpgate_connections_closed_total{reason=\"waiting_limit\"}");
	waiting = dpg_metric(&srv, "dpgate_connections_waiting");
	cr_expect_geq(closed, ATTACKERS - (CONNECTION_LIMIT - RESERVE), "%g closed", closed);
	cr_expect_leq(waiting, CONNECTION_LIMIT - RESERVE, "%g wait", waiting);
	close_attack(fds);
	dpg_server_destroy(&srv);
}
