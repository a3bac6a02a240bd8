/* SPDX-License-Identifier: MIT */
/*
 * serve.c - xdmctl serve --listen ADDR: the metrics of xdmctl metrics
 * over HTTP, for Prometheus to scrape.
 *
 * One thread, one client at a time: a scrape reads the segments and
 * writes a few kilobytes, and Prometheus scrapes once every few seconds,
 * so there is nothing to gain from more and a lock less to reason about.
 * Each connection is given --timeout to send its request and as long to
 * take the answer (http.c), so a stalled client delays the next by that
 * much, never for ever.  SIGINT and SIGTERM are taken by a signalfd
 * polled beside the socket, as top takes them: no handler, no global, and
 * the server exits 0 between two clients or in the middle of one.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "args.h"
#include "metrics.h"
#include "serve.h"

#define SERVE_TIMEOUT_MS 5000
/* How long to stand back when accept() lacks a resource (descriptors). */
#define ACCEPT_BACKOFF_MS 100

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--dir DIR] serve --listen ADDR [--timeout MS]\n"
	      "\n"
	      "Answer GET /metrics over HTTP with what xdmctl metrics prints, for\n"
	      "Prometheus to scrape; one client at a time.  SIGINT or SIGTERM stops it.\n"
	      "\n"
	      "  --listen ADDR  HOST:PORT, [IPV6]:PORT, or :PORT for every address;\n"
	      "                 port 0 takes a free one (the line it prints says which)\n"
	      "  --timeout MS   how long a client may take to send its request, and\n"
	      "                 again to read the answer (default 5000)\n"
	      "  --dir DIR      the directory of the budgets' segments\n",
	      f);
}

static const char text_type[] = "text/plain; charset=utf-8";

/* Answers one client; false when a signal came meanwhile. */
static bool serve_client(const struct xdmctl_ctx *ctx, int fd, int sigfd, int timeout_ms)
{
	static const char bad[] = "bad request: this server answers GET /metrics\n";
	static const char not_found[] = "not found: the metrics are at /metrics\n";
	static const char not_allowed[] = "method not allowed: GET or HEAD /metrics\n";
	static const char too_slow[] = "request timeout: no whole request in time\n";
	static const char version[] = "HTTP version not supported: use HTTP/1.1 or 1.0\n";
	static const char failed[] = "the budgets cannot be read: xdmctl serve's standard error "
				     "says why\n";
	struct http_request req;
	char *body = NULL;
	size_t len = 0;
	FILE *f;
	bool go_on;
	int rc;

	http_read_request(fd, sigfd, timeout_ms, &req);
	switch (req.ask) {
	case HTTP_SIGNAL:
		return false;
	case HTTP_GONE:
		return true;
	case HTTP_BAD:
		return http_respond(fd, sigfd, timeout_ms, &req, 400, text_type, bad,
				    sizeof(bad) - 1);
	case HTTP_NOT_FOUND:
		return http_respond(fd, sigfd, timeout_ms, &req, 404, text_type, not_found,
				    sizeof(not_found) - 1);
	case HTTP_NOT_ALLOWED:
		return http_respond(fd, sigfd, timeout_ms, &req, 405, text_type, not_allowed,
				    sizeof(not_allowed) - 1);
	case HTTP_TOO_SLOW:
		return http_respond(fd, sigfd, timeout_ms, &req, 408, text_type, too_slow,
				    sizeof(too_slow) - 1);
	case HTTP_BAD_VERSION:
		return http_respond(fd, sigfd, timeout_ms, &req, 505, text_type, version,
				    sizeof(version) - 1);
	case HTTP_METRICS:
		break;
	}
	f = open_memstream(&body, &len);
	if (!f) {
		fprintf(stderr, "xdmctl: serve: out of memory for an answer\n");
		return http_respond(fd, sigfd, timeout_ms, &req, 500, text_type, failed,
				    sizeof(failed) - 1);
	}
	rc = xdmctl_metrics_write(ctx, "serve", f);
	if (fclose(f) != 0 && rc == 0)
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "out of memory for an answer");
	if (rc)
		go_on = http_respond(fd, sigfd, timeout_ms, &req, 500, text_type, failed,
				     sizeof(failed) - 1);
	else
		go_on = http_respond(fd, sigfd, timeout_ms, &req, 200, XDMCTL_METRICS_TYPE, body,
				     len);
	free(body);
	return go_on;
}

/* Serves until a signal: XDMCTL_EXIT_OK, or XDMCTL_EXIT_FAIL said. */
static int run(const struct xdmctl_ctx *ctx, int lfd, int sigfd, int timeout_ms)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = lfd, .events = POLLIN },
					{ .fd = sigfd, .events = POLLIN } };
		int fd;
		bool go_on;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "poll: %s", strerror(errno));
		}
		if (pf[1].revents)
			return XDMCTL_EXIT_OK;
		if (!pf[0].revents)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* The connection waits in the backlog; a signal still stops us. */
				fprintf(stderr, "xdmctl: serve: cannot take a connection: %s\n",
					strerror(errno));
				if (poll(&pf[1], 1, ACCEPT_BACKOFF_MS) > 0)
					return XDMCTL_EXIT_OK;
			}
			continue;	/* gone before we took it, or a signal: poll says */
		}
		go_on = serve_client(ctx, fd, sigfd, timeout_ms);
		close(fd);
		if (!go_on)
			return XDMCTL_EXIT_OK;
	}
}

int xdmctl_serve(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "listen", required_argument, NULL, 'l' },
		{ "timeout", required_argument, NULL, 't' },
		{ "dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long timeout_ms = SERVE_TIMEOUT_MS;
	const char *listen_addr = NULL;
	struct signalfd_siginfo si;
	char shown[128];
	sigset_t set, old;
	int c, rc, lfd, sigfd;

	optind = 1;
	while ((c = xdmctl_next_option(ctx, argc, argv, "h", longopts, usage, &rc)) != -1) {
		if (c == 'l')
			listen_addr = optarg;
		else if (xdmctl_arg_uint("serve", "--timeout", optarg, 1, 600000, &timeout_ms))
			return XDMCTL_EXIT_USAGE;
	}
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
	if (ctx->json)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "serve",
				   "has no --json: it serves Prometheus's text format");
	if (optind < argc)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "serve", "takes no argument ('%s')",
				   argv[optind]);
	if (!listen_addr)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "serve",
				   "where? --listen HOST:PORT, as in --listen 127.0.0.1:9464");
	/* Blocked before the socket is announced: a signal sent as soon as
	 * the line is read is never lost. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sigfd < 0) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "cannot take signals: %s",
				 strerror(errno));
		goto out_mask;
	}
	lfd = xdmctl_listen(listen_addr, shown, sizeof(shown), &rc);
	if (lfd < 0)
		goto out_sigfd;
	printf("xdmctl serve: listening on %s\n", shown);
	if (fflush(stdout) != 0) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "cannot write standard output");
		goto out_listen;
	}
	rc = run(ctx, lfd, sigfd, (int)timeout_ms);
out_listen:
	close(lfd);
out_sigfd:
	/* The signal that stopped us is taken, or unblocking would deliver it
	 * and kill us after all. */
	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	close(sigfd);
out_mask:
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}
