/* SPDX-License-Identifier: MIT */
/*
 * main.c - xdmctl: see and steer every xdm process on a machine.
 * main() takes the options every command shares and hands the rest of the
 * command line to the command.
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/xdm.h>

#include "segments.h"
#include "xdmctl.h"

static const struct command {
	const char *name;
	xdmctl_command_fn run;
	const char *summary;
} commands[] = {
	{ "ps", xdmctl_ps, "every process attached to an xdm budget, per device" },
	{ "budget", xdmctl_budget, "show a device's shared budget, or --set its limit" },
	{ "top", xdmctl_top, "a live view of the processes, refreshed" },
	{ "timeline", xdmctl_timeline, "a logging adaptor's CSV as memory over time (SVG, HTML)" },
	{ "snapshot", xdmctl_snapshot, "a logging adaptor's CSV as a PyTorch memory snapshot" },
	{ "metrics", xdmctl_metrics, "every budget, group and process as Prometheus metrics" },
	{ "serve", xdmctl_serve, "serve those metrics over HTTP, for Prometheus to scrape" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

int xdmctl_fail(int code, const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "xdmctl: %s%s", cmd ? cmd : "", cmd ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int xdmctl_next_option(struct xdmctl_ctx *ctx, int argc, char **argv, const char *shortopts,
		       const struct option *longopts, void (*usage)(FILE *f), int *rc)
{
	int c;

	*rc = XDMCTL_OPT_NEXT;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			ctx->json = true;
			break;
		case 'D':
			if (!optarg[0]) {
				*rc = xdmctl_fail(XDMCTL_EXIT_USAGE, NULL, "--dir needs a directory");
				return -1;
			}
			ctx->shm_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			*rc = XDMCTL_EXIT_OK;
			return -1;
		case '?':
			usage(stderr);
			*rc = XDMCTL_EXIT_USAGE;
			return -1;
		default:
			return c;
		}
	}
	return -1;
}

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--json] [--dir DIR] COMMAND [ARGS...]\n"
	      "       xdmctl --help | --version | help COMMAND\n"
	      "\n"
	      "See and steer the xdm processes of this machine.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fputs("\n"
	      "Options:\n"
	      "  --json     print one JSON document (ps, budget)\n"
	      "  --dir DIR  where the budgets' segments are (default: $XDMCTL_SHM_DIR,\n"
	      "             else $XDM_BUDGET_DIR, else " BUDGET_SHARED_DIR " where it\n"
	      "             exists, else /dev/shm)\n"
	      "  --help     this text; COMMAND --help: that command's\n"
	      "  --version  the version of xdm\n"
	      "\n"
	      "Exit status: 0 done, 1 failed, 2 bad usage or input, 3 nothing found.\n"
	      "See xdmctl(1).\n",
	      f);
}

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	struct xdmctl_said said = { .nskipped = 0 };
	struct xdmctl_ctx ctx = { .json = false, .shm_dir = budget_default_dir(), .said = &said };
	const struct command *cmd;
	const char *dir;
	char prog[32];
	int i = 1;

	/* A budget's processes find its segment by $XDM_BUDGET_DIR: so does
	 * xdmctl, unless told where to look for itself. */
	dir = getenv("XDM_BUDGET_DIR");
	if (dir && *dir)
		ctx.shm_dir = dir;
	dir = getenv("XDMCTL_SHM_DIR");
	if (dir && *dir)
		ctx.shm_dir = dir;
	dir = getenv("XDMCTL_TREES_UNDER");
	if (dir && *dir)
		ctx.trees_under = dir;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			ctx.json = true;
		} else if (strncmp(argv[i], "--dir=", 6) == 0 || strcmp(argv[i], "--dir") == 0) {
			ctx.shm_dir = argv[i][5] == '=' ? argv[i] + 6 : i + 1 < argc ? argv[++i] : "";
			if (!ctx.shm_dir[0])
				return xdmctl_fail(XDMCTL_EXIT_USAGE, NULL, "--dir needs a directory");
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return XDMCTL_EXIT_OK;
		} else if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
			printf("xdmctl (xdm) %s\n", xdm_version());
			return XDMCTL_EXIT_OK;
		} else {
			usage(stderr);
			return xdmctl_fail(XDMCTL_EXIT_USAGE, NULL, "unknown option '%s'", argv[i]);
		}
	}
	if (i == argc) {
		usage(stderr);
		return xdmctl_fail(XDMCTL_EXIT_USAGE, NULL, "no command given");
	}
	if (strcmp(argv[i], "help") == 0) {
		static char help_arg[] = "--help";
		char *help_argv[] = { argv[i + 1], help_arg, NULL };

		if (i + 1 == argc) {
			usage(stdout);
			return XDMCTL_EXIT_OK;
		}
		cmd = find(argv[i + 1]);
		if (!cmd)
			return xdmctl_fail(XDMCTL_EXIT_USAGE, NULL, "no command '%s' (xdmctl --help lists them)",
					   argv[i + 1]);
		return cmd->run(&ctx, 2, help_argv);
	}
	cmd = find(argv[i]);
	if (!cmd) {
		usage(stderr);
		return xdmctl_fail(XDMCTL_EXIT_USAGE, NULL, "no command '%s'", argv[i]);
	}
	/* getopt_long() names argv[0] in its complaints: "xdmctl ps: ...". */
	snprintf(prog, sizeof(prog), "xdmctl %s", cmd->name);
	argv[i] = prog;
	return cmd->run(&ctx, argc - i, argv + i);
}
