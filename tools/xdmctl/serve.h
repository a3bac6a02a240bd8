/* SPDX-License-Identifier: MIT */
/*
 * serve.h - the parts of xdmctl serve: the listening socket (listen.c)
 * and one HTTP/1.1 exchange (http.c); serve.c runs them, one client at a
 * time.  Every wait is bounded and watches a signalfd too, so neither a
 * slow client nor a silent one keeps the server from its next client or
 * from SIGTERM.
 */
#ifndef XDM_TOOLS_XDMCTL_SERVE_H
#define XDM_TOOLS_XDMCTL_SERVE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A listening TCP socket (non-blocking, close-on-exec) on addr: HOST:PORT,
 * [IPV6]:PORT or :PORT (every address, IPv6 and IPv4 where it can); PORT
 * 0 takes a free one.  The address it got, as HOST:PORT, into shown.
 * The socket, or -1 with the reason said and *rc set: XDMCTL_EXIT_USAGE
 * for an address that is not one, XDMCTL_EXIT_FAIL for one it cannot
 * take.
 */
int xdmctl_listen(const char *addr, char *shown, size_t len, int *rc);

/* What a request asked, or why there is none to answer. */
enum http_ask {
	HTTP_METRICS,		/* GET or HEAD /metrics */
	HTTP_NOT_FOUND,		/* another path: 404 */
	HTTP_NOT_ALLOWED,	/* another method on /metrics: 405 */
	HTTP_BAD,		/* not an HTTP/1.x request: 400 */
	HTTP_BAD_VERSION,	/* HTTP, but not 1.x: 505 */
	HTTP_TOO_SLOW,		/* no whole request head within the time: 408 */
	HTTP_GONE,		/* the client closed before a byte: nothing to answer */
	HTTP_SIGNAL,		/* a signal came: answer nothing, stop */
};

struct http_request {
	enum http_ask ask;
	bool head;		/* HEAD: the answer has no body */
};

/*
 * Reads one request head from the non-blocking socket fd, for at most
 * timeout_ms, and says what it asks.  sigfd becoming readable ends the
 * wait with HTTP_SIGNAL (the signal is left for the caller to read).
 */
void http_read_request(int fd, int sigfd, int timeout_ms, struct http_request *req);

/*
 * Writes a response of status (200, 400, ...) with body (its type
 * content_type), for at most timeout_ms, without the body for a HEAD;
 * then closes the writing side, "Connection: close" having said so.
 * false when sigfd became readable meanwhile.
 */
bool http_respond(int fd, int sigfd, int timeout_ms, const struct http_request *req, int status,
		  const char *content_type, const char *body, size_t len);

#endif /* XDM_TOOLS_XDMCTL_SERVE_H */
