/* SPDX-License-Identifier: MIT */
/*
 * http.c - what xdmctl serve makes of HTTP/1.1: a request head judged,
 * and the head of a response.  No I/O here: serve_loop.c reads and
 * writes every client's socket without blocking, and hands the bytes of
 * a head to http_parse as they come.
 *
 * The server answers one path, so it reads no more of a request than its
 * head, and nothing of a body: it answers and closes ("Connection:
 * close"), which HTTP/1.1 lets a server do after any response.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "serve.h"

/* A token character (RFC 9110, 5.6.2): what methods and field names are made of. */
static bool tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * The end of the head in buf (after its empty line), or NULL; from is
 * where the search starts (an end before it would have been found when
 * the bytes before it came: a client that sends a byte at a time costs
 * the server its bytes, not their square).
 */
static char *head_end(char *buf, size_t from)
{
	char *crlf = strstr(buf + from, "\r\n\r\n"), *lf = strstr(buf + from, "\n\n");

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

bool http_parse(char *buf, size_t got, size_t fresh, struct http_request *req)
{
	char *end;

	req->head = false;
	/* A NUL is no part of a request; strstr would stop at it. */
	if (memchr(buf + got - fresh, '\0', fresh)) {
		req->ask = HTTP_BAD;
		return true;
	}
	/* The empty line may have begun in the bytes before these: 3 back. */
	end = head_end(buf, got - fresh > 3 ? got - fresh - 3 : 0);
	if (end) {
		*end = '\0';
		judge(buf, req);
		return true;
	}
	if (got >= HTTP_HEAD_MAX) {
		req->ask = HTTP_BAD;
		return true;
	}
	return false;
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
		{ 503, "Service Unavailable" },
		{ 505, "HTTP Version Not Supported" },
	};

	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].status == status)
			return reasons[i].reason;
	return "Unknown";
}

size_t http_response_head(char *out, size_t len, int status, const char *content_type,
			  size_t body_len)
{
	int n = snprintf(out, len,
			 "HTTP/1.1 %d %s\r\n"
			 "Content-Type: %s\r\n"
			 "Content-Length: %zu\r\n"
			 "%s"
			 "Connection: close\r\n"
			 "\r\n",
			 status, reason(status), content_type, body_len,
			 status == 405 ? "Allow: GET, HEAD\r\n" :
			 status == 503 ? "Retry-After: 1\r\n" : "");

	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}
