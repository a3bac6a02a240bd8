/* SPDX-License-Identifier: MIT */
/*
 * ps.c - xdmctl ps: every process attached to an xdm budget, per
 * device, and the tree each one serves.
 *
 * The budgets are found from their segments, so a process shows whether
 * or not it mounts a tree; the trees are matched to processes by the pid
 * each one shows at its root.  Trees of processes without a budget, and
 * trees that cannot be read, are listed after the budgets: they are xdm
 * processes too.  Processes are shown in pid order.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "segments.h"

#define MOUNT_TIMEOUT_MS 1000

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--json] [--dir DIR] ps [--timeout MS]\n"
	      "\n"
	      "Every process on this machine attached to an xdm budget, per device:\n"
	      "pid (as its container sees it), pid here (in xdmctl's pid namespace,\n"
	      "- where unknown), state (live, stopped, or dead and still counted),\n"
	      "bytes held, how it is charged (xdm: its budget layers; preload: the\n"
	      "LD_PRELOAD shim, xdm-run(1); or both), command, group, container (its\n"
	      "name, or its cgroup) and the tree it mounts; then the trees of\n"
	      "processes without a budget.\n"
	      "\n"
	      "  --json        one JSON document\n"
	      "  --dir DIR     the directory of the budgets' segments\n"
	      "  --timeout MS  how long a tree may take to answer (default 1000)\n",
	      f);
}

static const char *tree_trouble(const struct xdmctl_mount *m)
{
	switch (m->err) {
	case 0:
		return NULL;
	case EACCES:
	case EPERM:
		return "another user's";
	case ETIMEDOUT:
		return "does not answer (its process is stopped or hung)";
	case ENOTCONN:
		return "its process is gone";
	default:
		return strerror(m->err);
	}
}

static void print_text(const struct xdmctl_segment *segs, size_t nsegs,
		       const struct xdmctl_mount *mounts, size_t nmounts)
{
	size_t others = 0;
	char held[32];

	if (nsegs == 0)
		puts("no xdm budget on this machine");
	for (size_t i = 0; i < nsegs; i++) {
		const struct xdmctl_segment *seg = &segs[i];

		if (i)
			putchar('\n');
		xdmctl_segment_text(stdout, seg);
		if (seg->unreadable[0])
			continue;
		printf("  %8s  %8s  %-7s  %10s  %-11s  %-16s  %-12s  %-16s  %s\n", "PID", "HERE",
		       "STATE", "HELD", "VIA", "COMMAND", "GROUP", "CONTAINER", "TREE");
		for (size_t k = 0; k < seg->nprocs; k++) {
			const struct xdmctl_proc *p = &seg->procs[k];
			char here[16] = "-";

			if (p->pid_here)
				snprintf(here, sizeof(here), "%d", (int)p->pid_here);
			printf("  %8d  %8s  %-7s  %10s  %-11s  %-16s  %-12s  %-16s  %s\n", (int)p->pid,
			       here, xdmctl_proc_state_name(p->state),
			       xdmctl_human(p->used, held, sizeof(held)), xdmctl_proc_via(p), p->comm, p->group[0] ? p->group : "-",
			       p->container[0] ? p->container : "-", p->mount ? p->mount->path : "-");
		}
	}
	for (size_t i = 0; i < nmounts; i++) {
		const struct xdmctl_mount *m = &mounts[i];
		const char *trouble = tree_trouble(m);

		if (!trouble && xdmctl_tree_has_budget(m, segs, nsegs))
			continue;
		if (others++ == 0)
			printf("\nother xdm trees (no budget, or unreadable):\n  %8s  %s\n", "PID", "TREE");
		if (trouble)
			printf("  %8s  %s: %s\n", "?", m->path, trouble);
		else
			printf("  %8d  %s\n", (int)m->pid, m->path);
	}
}

static void print_json(const struct xdmctl_segment *segs, size_t nsegs,
		       const struct xdmctl_mount *mounts, size_t nmounts)
{
	fputs("{\"budgets\": [", stdout);
	for (size_t i = 0; i < nsegs; i++) {
		if (i)
			fputs(", ", stdout);
		xdmctl_segment_json(stdout, &segs[i], true);
	}
	fputs("], \"trees\": [", stdout);
	for (size_t i = 0; i < nmounts; i++) {
		const char *trouble = tree_trouble(&mounts[i]);

		printf("%s{\"path\": ", i ? ", " : "");
		xdmctl_json_string(stdout, mounts[i].path);
		if (trouble) {
			fputs(", \"pid\": null, \"error\": ", stdout);
			xdmctl_json_string(stdout, trouble);
		} else {
			printf(", \"pid\": %d, \"budget\": %s", (int)mounts[i].pid,
			       xdmctl_tree_has_budget(&mounts[i], segs, nsegs) ? "true" : "false");
		}
		fputc('}', stdout);
	}
	fputs("]}\n", stdout);
}

int xdmctl_ps(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct xdmctl_segment *segs = NULL;
	struct xdmctl_mount *mounts = NULL;
	size_t nsegs = 0, nmounts = 0;
	unsigned long timeout_ms = MOUNT_TIMEOUT_MS;
	int rc;

	optind = 1;
	while (xdmctl_next_option(ctx, argc, argv, "h", longopts, usage, &rc) != -1) {
		/* --timeout, the one option of ps's own */
		if (xdmctl_arg_uint("ps", "--timeout", optarg, 1, 600000, &timeout_ms))
			return XDMCTL_EXIT_USAGE;
	}
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
	if (optind < argc)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "ps", "takes no argument ('%s')", argv[optind]);
	rc = xdmctl_segments_read(ctx, "ps", &segs, &nsegs);
	if (rc)
		return rc;
	xdmctl_segments_find_pids(segs, nsegs);
	rc = xdmctl_mounts_read(ctx, false, (int)timeout_ms, &mounts, &nmounts);
	if (rc) {
		/* The budgets are still worth showing. */
		fprintf(stderr, "xdmctl: ps: the mounted trees cannot be listed: %s\n",
			strerror(-rc));
		nmounts = 0;
	}
	xdmctl_segments_link_mounts(segs, nsegs, mounts, nmounts);
	if (ctx->json)
		print_json(segs, nsegs, mounts, nmounts);
	else
		print_text(segs, nsegs, mounts, nmounts);
	free(mounts);
	free(segs);
	return fflush(stdout) == 0 ? XDMCTL_EXIT_OK : XDMCTL_EXIT_FAIL;
}
