/* SPDX-License-Identifier: MIT */
/*
 * serve.c - xdmctl serve --listen ADDR: the metrics of xdmctl metrics
 * over HTTP, for Prometheus to scrape.
 *
 * The listening sockets are listen.c's (loopback unless every address is
 * asked for), and the clients are served together by one poll loop
 * (serve_loop.c), each with its own deadline, so that no client, however
 * slow, keeps a scrape out.  SIGINT and SIGTERM are taken by a signalfd
 * polled beside the sockets, as top takes them: no handler, no global,
 * and the server exits 0 whatever its clients are doing.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "args.h"
#include "serve.h"

#define SERVE_TIMEOUT_MS 5000

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--dir DIR] serve --listen ADDR [--timeout MS]\n"
	      "\n"
	      "Answer GET /metrics over HTTP with what xdmctl metrics prints, for\n"
	      "Prometheus to scrape; many clients at once, a slow one keeping no\n"
	      "other out.  SIGINT or SIGTERM stops it.\n"
	      "\n"
	      "  --listen ADDR  :PORT for this machine's loopback (127.0.0.1 and ::1),\n"
	      "                *:PORT for every address, HOST:PORT or [IPV6]:PORT;\n"
	      "                port 0 takes a free one (the line it prints says which)\n"
	      "  --timeout MS   how long a client may take to send its request, and\n"
	      "                again to read the answer (default 5000)\n"
	      "  --dir DIR      the directory of the budgets' segments\n",
	      f);
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
	struct xdmctl_listeners listeners;
	struct signalfd_siginfo si;
	char shown[160];
	sigset_t set, old;
	int c, rc, sigfd;

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
				   "where? --listen :PORT for this machine alone (loopback), as in "
				   "--listen :9464, or *:PORT for every address");
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
	if (xdmctl_listen(listen_addr, &listeners, shown, sizeof(shown), &rc) != 0)
		goto out_sigfd;
	printf("xdmctl serve: listening on %s\n", shown);
	if (fflush(stdout) != 0) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "cannot write standard output");
		goto out_listen;
	}
	rc = xdmctl_serve_loop(ctx, &listeners, sigfd, (int)timeout_ms);
out_listen:
	xdmctl_listeners_close(&listeners);
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
