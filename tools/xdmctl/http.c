/* SPDX-License-Identifier: MIT */
/*
 * http.c - one HTTP/1.1 exchange of xdmctl serve: a request head read
 * and judged, one response written, the connection closed.
 *
 * The server answers one path, so it reads no more of a request than its
 * head, and nothing of a body: it answers and closes ("Connection:
 * close"), which HTTP/1.1 lets a server do after any response.  Every
 * wait is a poll with what is left of the time given, so a client that
 * sends its request a byte at a time, or never reads the answer, costs
 * that time and no more; the signalfd is polled beside it.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

/* A request head longer than this is not one this server was meant for. */
#define HEAD_MAX 8192
/* What is read and dropped of a client's bytes after the answer, at most. */
#define DRAIN_MAX 65536

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Until fd is ready for events or the deadline: 1 ready, 0 time out,
 * -1 a signal came (or poll failed: stop all the same).
 */
static int wait_fd(int fd, short events, int sigfd, long long deadline)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = fd, .events = events },
					{ .fd = sigfd, .events = POLLIN } };
		long long left = deadline - now_ms();
		int n;

		if (left <= 0)
			return 0;
		n = poll(pf, 2, left > 60000 ? 60000 : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || pf[1].revents)
			return -1;
		if (pf[0].revents)
			return 1;
	}
}

/* A token character (RFC 9110, 5.6.2): what methods and field names are made of. */
static bool tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The end of the head in buf (after its empty line), or NULL. */
static char *head_end(char *buf)
{
	char *crlf = strstr(buf, "\r\n\r\n"), *lf = strstr(buf, "\n\n");

	if (crlf && (!lf || crlf < lf))
		return crlf + 4;
	return lf ? lf + 2 : NULL;
}

/* The next line of *p, its end of line cut off; NULL at the end. */
static char *next_line(char **p)
{
	char *line = *p, *nl = strchr(line, '\n');

	if (!nl)
		return NULL;
	*nl = '\0';
	if (nl > line && nl[-1] == '\r')
		nl[-1] = '\0';
	*p = nl + 1;
	return line;
}

/* The path of a request target: origin form, or absolute form; no query. */
static const char *target_path(char *target)
{
	char *p = target;

	if (!strncmp(p, "http://", 7) || !strncmp(p, "https://", 8)) {
		p = strchr(strstr(p, "//") + 2, '/');
		if (!p)
			return "/";
	}
	p[strcspn(p, "?#")] = '\0';
	return p;
}

/* What the head in buf (NUL-terminated, ending with its empty line) asks. */
static void judge(char *buf, struct http_request *req)
{
	char *p = buf, *line = next_line(&p), *method, *target, *version, *sp;

	req->ask = HTTP_BAD;
	if (!line)
		return;
	/* METHOD SP TARGET SP HTTP-VERSION, one space each. */
	method = line;
	sp = strchr(method, ' ');
	if (!sp || sp == method)
		return;
	*sp = '\0';
	target = sp + 1;
	sp = strchr(target, ' ');
	if (!sp || sp == target)
		return;
	*sp = '\0';
	version = sp + 1;
	for (const char *c = method; *c; c++)
		if (!tchar(*c))
			return;
	for (const char *c = target; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return;
	if (strncmp(version, "HTTP/", 5) || strlen(version) != 8 || version[5] < '0' ||
	    version[5] > '9' || version[6] != '.' || version[7] < '0' || version[7] > '9')
		return;
	/* The fields: NAME: value, no line folding. */
	while ((line = next_line(&p)) && *line) {
		char *colon = strchr(line, ':');

		if (!colon || colon == line)
			return;
		for (const char *c = line; c < colon; c++)
			if (!tchar(*c))
				return;
	}
	if (version[5] != '1') {
		req->ask = HTTP_BAD_VERSION;
		return;
	}
	req->head = !strcmp(method, "HEAD");
	if (strcmp(target_path(target), "/metrics"))
		req->ask = HTTP_NOT_FOUND;
	else if (strcmp(method, "GET") && !req->head)
		req->ask = HTTP_NOT_ALLOWED;
	else
		req->ask = HTTP_METRICS;
}

void http_read_request(int fd, int sigfd, int timeout_ms, struct http_request *req)
{
	long long deadline = now_ms() + timeout_ms;
	char buf[HEAD_MAX + 1];
	size_t got = 0;

	req->head = false;
	for (;;) {
		ssize_t n;
		int ready = wait_fd(fd, POLLIN, sigfd, deadline);

		if (ready <= 0) {
			req->ask = ready ? HTTP_SIGNAL : HTTP_TOO_SLOW;
			return;
		}
		n = recv(fd, buf + got, HEAD_MAX - got, 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			continue;
		if (n <= 0) {
			/* Closed (or reset) before a whole head: no one to answer. */
			req->ask = HTTP_GONE;
			return;
		}
		got += (size_t)n;
		buf[got] = '\0';
		/* A NUL is no part of a request; strstr would stop at it. */
		if (memchr(buf + got - (size_t)n, '\0', (size_t)n)) {
			req->ask = HTTP_BAD;
			return;
		}
		if (head_end(buf)) {
			*head_end(buf) = '\0';
			judge(buf, req);
			return;
		}
		if (got == HEAD_MAX) {
			req->ask = HTTP_BAD;
			return;
		}
	}
}

static const char *reason(int status)
{
	static const struct {
		int status;
		const char *reason;
	} reasons[] = {
		{ 200, "OK" },
		{ 400, "Bad Request" },
		{ 404, "Not Found" },
		{ 405, "Method Not Allowed" },
		{ 408, "Request Timeout" },
		{ 500, "Internal Server Error" },
		{ 505, "HTTP Version Not Supported" },
	};

	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].status == status)
			return reasons[i].reason;
	return "Unknown";
}

/* All of data to fd by the deadline: 1 sent, 0 not (time out, or the
 * client is gone), -1 a signal came. */
static int send_all(int fd, int sigfd, long long deadline, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		int ready;

		if (n > 0) {
			data += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return 0;
		ready = wait_fd(fd, POLLOUT, sigfd, deadline);
		if (ready <= 0)
			return ready;
	}
	return 1;
}

bool http_respond(int fd, int sigfd, int timeout_ms, const struct http_request *req, int status,
		  const char *content_type, const char *body, size_t len)
{
	long long deadline = now_ms() + timeout_ms;
	char head[512], drain[512];
	int n, sent;

	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %d %s\r\n"
		     "Content-Type: %s\r\n"
		     "Content-Length: %zu\r\n"
		     "%s"
		     "Connection: close\r\n"
		     "\r\n",
		     status, reason(status), content_type, len,
		     status == 405 ? "Allow: GET, HEAD\r\n" : "");
	sent = send_all(fd, sigfd, deadline, head, (size_t)n);
	if (sent == 1 && !req->head)
		sent = send_all(fd, sigfd, deadline, body, len);
	if (sent < 0)
		return false;
	shutdown(fd, SHUT_WR);
	/*
	 * What the client sent past its head is read and dropped, as far as
	 * it has come: closing over unread bytes resets the connection, and
	 * a reset may throw away the answer before the client reads it.
	 */
	for (int i = 0; i < DRAIN_MAX / (int)sizeof(drain); i++)
		if (recv(fd, drain, sizeof(drain), 0) <= 0)
			break;
	return true;
}
