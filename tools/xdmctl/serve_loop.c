/* SPDX-License-Identifier: MIT */
/*
 * serve_loop.c - every client of xdmctl serve at once, in one thread.
 *
 * One poll(2) over the signalfd, the listening sockets and every client's
 * non-blocking socket.  A client is an entry of a fixed table: the bytes
 * of its request head as they came, or its answer as far as it was sent,
 * and its own deadline (--timeout to send the head, as long again to take
 * the answer).  A client that sends half a request and stalls holds one
 * entry until its deadline, and is then answered 408; meanwhile every
 * other client is read, answered and closed as its bytes come.  When the
 * table is full, a new connection is answered 503 at once and closed:
 * never queued, never spun on.  When accept(2) lacks a descriptor
 * (EMFILE), the listening sockets are left out of the poll for
 * ACCEPT_BACKOFF_MS, while the clients already taken go on being served.
 *
 * Why not libmicrohttpd: it would do this too (its own poll loop,
 * MHD_OPTION_CONNECTION_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT), but for
 * one path answered by one function it is a new build and run-time
 * dependency of xdm's packages, with its own threads beside xdmctl's
 * signalfd, to save the two hundred lines of this file and http.c.  The
 * loop below is small enough to read whole, and every bound in it is
 * xdmctl's own and tested (tests/tools/xdmctl_serve.sh,
 * tests/tools/xdmctl_hostile.sh).
 *
 * Reading the budgets for an answer is done in the loop, between two
 * polls: it is a few pread(2)s of files that cannot block (a FIFO with a
 * segment's name is never opened for reading; reader.c), so a scrape
 * delays the others by the time of one read of the segments.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "serve.h"

/* How long to leave the listening sockets alone when accept() lacks a resource. */
#define ACCEPT_BACKOFF_MS 100
/* Connections taken from one listening socket per round: the clients get their turn. */
#define ACCEPTS_PER_ROUND 16
/* What is read and dropped of a client's bytes before it is closed, at most. */
#define DRAIN_MAX 65536

enum phase {
	CLIENT_FREE,
	CLIENT_READING,		/* its request head, as it comes */
	CLIENT_WRITING,		/* its answer, as it takes it */
};

struct client {
	int fd;
	enum phase phase;
	long long deadline;	/* CLOCK_MONOTONIC ms: the end of this phase */
	struct http_request req;
	size_t got;		/* bytes of head */
	char head[HTTP_HEAD_MAX + 1];
	char *answer;		/* the response, head and body */
	size_t len, sent;
};

struct loop {
	const struct xdmctl_ctx *ctx;
	int timeout_ms;
	long long accept_resume;	/* accept() failed for want of resources: not before */
	struct client clients[SERVE_CLIENTS_MAX];
};

static const char text_type[] = "text/plain; charset=utf-8";

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What is there of the client's bytes, read and dropped: a close over unread bytes resets. */
static void drain(int fd)
{
	char buf[512];

	for (int i = 0; i < DRAIN_MAX / (int)sizeof(buf); i++)
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			break;
}

static void drop(struct client *c)
{
	close(c->fd);
	free(c->answer);
	c->answer = NULL;
	c->fd = -1;
	c->phase = CLIENT_FREE;
}

/*
 * Answered: the writing side closed first, so the client reads the whole
 * answer before the end; what it sent past its head is dropped, as far as
 * it has come (a close over unread bytes resets the connection, and a
 * reset may throw away the answer before the client reads it).
 */
static void finish(struct client *c)
{
	shutdown(c->fd, SHUT_WR);
	drain(c->fd);
	drop(c);
}

/* As much of the answer as the socket takes now. */
static void write_some(struct client *c)
{
	while (c->sent < c->len) {
		ssize_t n = send(c->fd, c->answer + c->sent, c->len - c->sent, MSG_NOSIGNAL);

		if (n > 0) {
			c->sent += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		drop(c);	/* the client is gone */
		return;
	}
	finish(c);
}

/* The client is answered status: head and body (none for a HEAD), sent from now on. */
static void respond(struct loop *lp, struct client *c, int status, const char *type,
		    const char *body, size_t len)
{
	char head[512];
	size_t hlen = http_response_head(head, sizeof(head), status, type, len);
	size_t blen = c->req.head ? 0 : len;

	c->answer = malloc(hlen + blen);
	if (!c->answer) {
		fprintf(stderr, "xdmctl: serve: out of memory for an answer\n");
		drop(c);
		return;
	}
	memcpy(c->answer, head, hlen);
	if (blen)
		memcpy(c->answer + hlen, body, blen);
	c->len = hlen + blen;
	c->sent = 0;
	c->phase = CLIENT_WRITING;
	c->deadline = now_ms() + lp->timeout_ms;
	write_some(c);
}

/* The metrics as they are now, or 500 with the reason on standard error. */
static void respond_metrics(struct loop *lp, struct client *c)
{
	static const char failed[] = "the budgets cannot be read: xdmctl serve's standard error "
				     "says why\n";
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	int rc;

	if (!f) {
		fprintf(stderr, "xdmctl: serve: out of memory for an answer\n");
		respond(lp, c, 500, text_type, failed, sizeof(failed) - 1);
		return;
	}
	rc = xdmctl_metrics_write(lp->ctx, "serve", f);
	if (fclose(f) != 0 && rc == 0)
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "out of memory for an answer");
	if (rc)
		respond(lp, c, 500, text_type, failed, sizeof(failed) - 1);
	else
		respond(lp, c, 200, XDMCTL_METRICS_TYPE, body, len);
	free(body);
}

/* What the request asked, answered. */
static void answer(struct loop *lp, struct client *c)
{
	static const struct {
		int status;
		const char *body;
	} plain[] = {
		[HTTP_NOT_FOUND] = { 404, "not found: the metrics are at /metrics\n" },
		[HTTP_NOT_ALLOWED] = { 405, "method not allowed: GET or HEAD /metrics\n" },
		[HTTP_BAD] = { 400, "bad request: this server answers GET /metrics\n" },
		[HTTP_BAD_VERSION] = { 505, "HTTP version not supported: use HTTP/1.1 or 1.0\n" },
		[HTTP_TOO_SLOW] = { 408, "request timeout: no whole request in time\n" },
	};

	if (c->req.ask == HTTP_METRICS) {
		respond_metrics(lp, c);
		return;
	}
	respond(lp, c, plain[c->req.ask].status, text_type, plain[c->req.ask].body,
		strlen(plain[c->req.ask].body));
}

/* What came of the client's request head; answered once it is whole. */
static void read_some(struct loop *lp, struct client *c)
{
	ssize_t n = recv(c->fd, c->head + c->got, HTTP_HEAD_MAX - c->got, 0);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		/* Closed (or reset) before a whole head: no one to answer. */
		drop(c);
		return;
	}
	c->got += (size_t)n;
	c->head[c->got] = '\0';
	if (http_parse(c->head, c->got, (size_t)n, &c->req))
		answer(lp, c);
}

/* Past its deadline: a head not whole is answered 408; an answer not taken is dropped. */
static void expire(struct loop *lp, struct client *c)
{
	if (c->phase == CLIENT_WRITING) {
		drop(c);
		return;
	}
	c->req.ask = HTTP_TOO_SLOW;
	c->req.head = false;
	answer(lp, c);
}

/* The table is full: 503 now, in one send that cannot block a fresh socket, and closed. */
static void refuse_busy(int fd)
{
	static const char body[] = "busy: as many clients as xdmctl serve takes at once are "
				   "being served; try again\n";
	char head[256];
	size_t hlen = http_response_head(head, sizeof(head), 503, text_type, sizeof(body) - 1);

	drain(fd);
	if (send(fd, head, hlen, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)hlen)
		send(fd, body, sizeof(body) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	close(fd);
}

static struct client *free_entry(struct loop *lp)
{
	for (size_t i = 0; i < SERVE_CLIENTS_MAX; i++)
		if (lp->clients[i].phase == CLIENT_FREE)
			return &lp->clients[i];
	return NULL;
}

/* The connections waiting on lfd, as many as one round takes. */
static void take(struct loop *lp, int lfd)
{
	for (int i = 0; i < ACCEPTS_PER_ROUND; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct client *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* The connection waits in the backlog meanwhile. */
				fprintf(stderr, "xdmctl: serve: cannot take a connection: %s\n",
					strerror(errno));
				lp->accept_resume = now_ms() + ACCEPT_BACKOFF_MS;
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			continue;	/* gone before we took it */
		}
		c = free_entry(lp);
		if (!c) {
			refuse_busy(fd);
			continue;
		}
		c->fd = fd;
		c->phase = CLIENT_READING;
		c->deadline = now_ms() + lp->timeout_ms;
		c->got = 0;
		c->head[0] = '\0';
		c->req.head = false;
	}
}

/* Milliseconds until t, for poll: 0 if past. */
static int until(long long t, long long now)
{
	long long left = t - now;

	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* One round: poll, then each ready client, each late one, the new ones. false: a signal. */
static bool round_once(struct loop *lp, const struct xdmctl_listeners *l, int sigfd, int *err)
{
	struct pollfd pf[1 + XDMCTL_LISTEN_MAX + SERVE_CLIENTS_MAX];
	struct client *of[1 + XDMCTL_LISTEN_MAX + SERVE_CLIENTS_MAX];
	long long now = now_ms();
	bool accepting = now >= lp->accept_resume;
	size_t n = 0, first_client;
	int wait = accepting ? -1 : until(lp->accept_resume, now);

	pf[n++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
	for (size_t i = 0; accepting && i < l->n; i++)
		pf[n++] = (struct pollfd){ .fd = l->fd[i], .events = POLLIN };
	first_client = n;
	for (size_t i = 0; i < SERVE_CLIENTS_MAX; i++) {
		struct client *c = &lp->clients[i];
		int left;

		if (c->phase == CLIENT_FREE)
			continue;
		of[n] = c;
		pf[n++] = (struct pollfd){ .fd = c->fd, .events = c->phase == CLIENT_READING ?
								 POLLIN : POLLOUT };
		left = until(c->deadline, now);
		if (wait < 0 || left < wait)
			wait = left;
	}
	if (poll(pf, n, wait) < 0) {
		if (errno == EINTR)
			return true;
		*err = errno;
		return false;
	}
	if (pf[0].revents)
		return false;
	for (size_t k = first_client; k < n; k++) {
		struct client *c = of[k];

		if (!pf[k].revents || c->phase == CLIENT_FREE)
			continue;
		if (c->phase == CLIENT_READING)
			read_some(lp, c);
		else
			write_some(c);
	}
	now = now_ms();
	for (size_t i = 0; i < SERVE_CLIENTS_MAX; i++) {
		struct client *c = &lp->clients[i];

		if (c->phase != CLIENT_FREE && now >= c->deadline)
			expire(lp, c);
	}
	for (size_t k = 1; k < first_client; k++)
		if (pf[k].revents)
			take(lp, pf[k].fd);
	return true;
}

int xdmctl_serve_loop(const struct xdmctl_ctx *ctx, const struct xdmctl_listeners *l, int sigfd,
		      int timeout_ms)
{
	struct loop *lp = calloc(1, sizeof(*lp));
	int err = 0;

	if (!lp)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "serve",
				   "out of memory for the clients' table");
	lp->ctx = ctx;
	lp->timeout_ms = timeout_ms;
	for (size_t i = 0; i < SERVE_CLIENTS_MAX; i++)
		lp->clients[i].fd = -1;
	while (round_once(lp, l, sigfd, &err))
		;
	for (size_t i = 0; i < SERVE_CLIENTS_MAX; i++)
		if (lp->clients[i].phase != CLIENT_FREE)
			drop(&lp->clients[i]);
	free(lp);
	if (err)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "poll: %s", strerror(err));
	return XDMCTL_EXIT_OK;
}
