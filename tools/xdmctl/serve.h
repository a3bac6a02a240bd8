/* SPDX-License-Identifier: MIT */
/*
 * serve.h - the parts of xdmctl serve: the listening sockets (listen.c),
 * what HTTP/1.1 requests ask and how answers begin (http.c), and the one
 * loop that serves every client at once (serve_loop.c); serve.c runs
 * them.  No wait is without a deadline, no socket blocks, and the table
 * of clients has a bound that is answered (503), so no client keeps
 * another out, and a signalfd polled beside them all stops the server.
 */
#ifndef XDM_TOOLS_XDMCTL_SERVE_H
#define XDM_TOOLS_XDMCTL_SERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "xdmctl.h"

/* Loopback is two sockets: 127.0.0.1 and ::1. */
#define XDMCTL_LISTEN_MAX 2

struct xdmctl_listeners {
	int fd[XDMCTL_LISTEN_MAX];
	size_t n;
};

/*
 * Listening TCP sockets (non-blocking, close-on-exec) on addr: HOST:PORT,
 * [IPV6]:PORT, :PORT for the loopback addresses (127.0.0.1, and ::1 where
 * the kernel has IPv6), or *:PORT for every address (IPv6 and IPv4 on one
 * socket where it can); PORT 0 takes a free one (the same for both
 * loopback sockets).  The addresses it got, as "HOST:PORT" (joined by
 * " and "), into shown.  0, or -1 with the reason said and *rc set:
 * XDMCTL_EXIT_USAGE for an address that is not one, XDMCTL_EXIT_FAIL for
 * one it cannot take.
 */
int xdmctl_listen(const char *addr, struct xdmctl_listeners *l, char *shown, size_t len,
		  int *rc);
void xdmctl_listeners_close(struct xdmctl_listeners *l);

/* What a request asked, or why there is none to answer. */
enum http_ask {
	HTTP_METRICS,		/* GET or HEAD /metrics */
	HTTP_NOT_FOUND,		/* another path: 404 */
	HTTP_NOT_ALLOWED,	/* another method on /metrics: 405 */
	HTTP_BAD,		/* not an HTTP/1.x request: 400 */
	HTTP_BAD_VERSION,	/* HTTP, but not 1.x: 505 */
	HTTP_TOO_SLOW,		/* no whole request head within the time: 408 */
};

struct http_request {
	enum http_ask ask;
	bool head;		/* HEAD: the answer has no body */
};

/* A request head longer than this is not one this server was meant for. */
#define HTTP_HEAD_MAX 8192

/*
 * Whether the got bytes of buf (NUL-terminated, room for HTTP_HEAD_MAX + 1;
 * the last fresh of them just came) settle the request: true with *req
 * said (a whole head, or bytes that are no head: a NUL, HTTP_HEAD_MAX bytes
 * without an end), false while the head is not whole yet.  buf is cut at
 * the end of the head.
 */
bool http_parse(char *buf, size_t got, size_t fresh, struct http_request *req);

/*
 * The head of a response of status (200, 400, ...) with a body of body_len
 * bytes of content_type, into out; its length.  Every answer closes the
 * connection ("Connection: close").
 */
size_t http_response_head(char *out, size_t len, int status, const char *content_type,
			  size_t body_len);

/* How many clients are served at once; one more is answered 503. */
#define SERVE_CLIENTS_MAX 64

/*
 * Serves the listeners until sigfd is readable (SIGINT or SIGTERM): every
 * client at once, each given timeout_ms to send its request head and as
 * long again to take the answer.  XDMCTL_EXIT_OK, or XDMCTL_EXIT_FAIL with
 * the reason said.
 */
int xdmctl_serve_loop(const struct xdmctl_ctx *ctx, const struct xdmctl_listeners *l, int sigfd,
		      int timeout_ms);

#endif /* XDM_TOOLS_XDMCTL_SERVE_H */
