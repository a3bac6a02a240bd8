/* SPDX-License-Identifier: MIT */
/*
 * xdmctl.h - what the commands of xdmctl share: the exit codes, the
 * options every command takes, and one function per command.
 *
 * xdmctl reads what xdm processes publish for anyone of their user to see:
 * the budget segments in /dev/shm or the directory they share
 * (lib/budget_segment/segment.h), the trees they mount
 * (xdm-fs(7)) and the CSV logs of the logging adaptor (xdm-logging(7)).
 * It never loads a module and never builds a runtime: it looks at xdm from
 * outside, as a person with cat(1) would, only faster.
 */
#ifndef XDM_TOOLS_XDMCTL_H
#define XDM_TOOLS_XDMCTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* xdmctl(1), EXIT STATUS. */
enum xdmctl_exit {
	XDMCTL_EXIT_OK = 0,
	XDMCTL_EXIT_FAIL = 1,	/* what was asked could not be done */
	XDMCTL_EXIT_USAGE = 2,	/* a bad command line or a bad input file */
	XDMCTL_EXIT_NONE = 3,	/* nothing to show: no such device or budget */
};

/* Options taken before the command as well as after it. */
struct xdmctl_ctx {
	bool json;		/* --json: one JSON document on standard output */
	/* Where the segments are: --dir, else $XDMCTL_SHM_DIR, else
	 * $XDM_BUDGET_DIR (where this machine's processes keep them), else
	 * /dev/shm. */
	const char *shm_dir;
	const char *trees_under;	/* $XDMCTL_TREES_UNDER: only trees below it; NULL: all */
	/* What this run said once (segments.h); main's, for the whole run. */
	struct xdmctl_said *said;
};

/* One command: argv[0] is its name; returns an enum xdmctl_exit. */
typedef int (*xdmctl_command_fn)(struct xdmctl_ctx *ctx, int argc, char **argv);

int xdmctl_ps(struct xdmctl_ctx *ctx, int argc, char **argv);
int xdmctl_budget(struct xdmctl_ctx *ctx, int argc, char **argv);
int xdmctl_top(struct xdmctl_ctx *ctx, int argc, char **argv);
int xdmctl_timeline(struct xdmctl_ctx *ctx, int argc, char **argv);
int xdmctl_snapshot(struct xdmctl_ctx *ctx, int argc, char **argv);
int xdmctl_metrics(struct xdmctl_ctx *ctx, int argc, char **argv);
int xdmctl_serve(struct xdmctl_ctx *ctx, int argc, char **argv);

/*
 * getopt_long() for a command, the options every command takes handled
 * here: --json ('j'), --dir ('D'), --help ('h': usage on stdout) and an
 * unknown option (usage on stderr).  Returns the next of the command's own options, or -1
 * at the end, and then *rc is XDMCTL_OPT_NEXT to go on or the exit code to
 * return now.  The caller sets optind to 1 before the first call.
 */
#define XDMCTL_OPT_NEXT (-2)
int xdmctl_next_option(struct xdmctl_ctx *ctx, int argc, char **argv, const char *shortopts,
		       const struct option *longopts, void (*usage)(FILE *f), int *rc);

/* "xdmctl CMD: " and the sentence, on standard error; returns code. */
int xdmctl_fail(int code, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* units.c: bytes as "344.4 MiB" (binary units, one decimal; "512 B"
 * below 1 KiB), into buf, which it returns. */
const char *xdmctl_human(unsigned long long bytes, char *buf, size_t len);

/* json.c: a JSON string (quotes and escapes included) on f. */
void xdmctl_json_string(FILE *f, const char *s);

#endif /* XDM_TOOLS_XDMCTL_H */
