/* SPDX-License-Identifier: MIT */
/*
 * budget.c - xdmctl budget [DEVICE] [--group NAME] [--set SIZE]: a
 * device's shared budget and its groups, and a limit of either changed
 * for every process on it (budget_set.c).
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>

#include "segments.h"

#define BUDGET_TREE_TIMEOUT_MS 1000

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--json] [--dir DIR] budget [DEVICE] [--group NAME] [--set SIZE]\n"
	      "\n"
	      "Show the shared budget of a device and its groups, or change its limit\n"
	      "or a group's for every process on it.  DEVICE is the budget's key (the\n"
	      "device's UUID unless configured otherwise), a unique start of it, or\n"
	      "the segment's name; it may be left out when the machine has one budget.\n"
	      "\n"
	      "  --group NAME  that group of the budget: show it, or --set its limit\n"
	      "  --set SIZE    the new limit: bytes, K/M/G/T, a % of the device's\n"
	      "                memory, or max (as budget/limit in xdm-fs(7))\n"
	      "  --json        one JSON document\n"
	      "  --dir DIR     the directory of the budgets' segments\n",
	      f);
}

/*
 * The groups, in bytes as the rest; a group without a limit of its own
 * (max) has "max", and no remaining of its own ("-").
 */
static void print_groups(const struct xdmctl_segment *seg)
{
	printf("  groups        %zu\n", seg->ngroups);
	if (!seg->ngroups)
		return;
	printf("    %-16s  %7s  %14s  %14s  %14s  %14s  %8s\n", "GROUP", "MEMBERS", "LIMIT", "USED",
	       "REMAINING", "PEAK", "REFUSALS");
	for (size_t i = 0; i < seg->ngroups; i++) {
		const struct xdmctl_group *g = &seg->groups[i];
		char limit[24] = "max", remaining[24] = "-";

		if (g->limit != UINT64_MAX) {
			snprintf(limit, sizeof(limit), "%" PRIu64, g->limit);
			snprintf(remaining, sizeof(remaining), "%" PRIu64,
				 g->used < g->limit ? g->limit - g->used : 0);
		}
		printf("    %-16s  %7" PRIu32 "  %14s  %14" PRIu64 "  %14s  %14" PRIu64 "  %8" PRIu64
		       "\n",
		       g->name, g->members, limit, g->used, remaining, g->peak, g->refusals);
	}
}

static void print_text(const struct xdmctl_segment *seg)
{
	unsigned int states[3] = { 0, 0, 0 };
	char h[32];

	xdmctl_segment_text(stdout, seg);
	if (seg->unreadable[0])
		return;
	for (size_t i = 0; i < seg->nprocs; i++)
		states[seg->procs[i].state]++;
	printf("  segment       %s (owner uid %u)\n", seg->path, (unsigned int)seg->owner);
	printf("  limit         %" PRIu64 "\n", seg->limit);
	printf("  used          %" PRIu64 "\n", seg->used);
	printf("  remaining     %" PRIu64 "\n", seg->used < seg->limit ? seg->limit - seg->used : 0);
	printf("  peak          %" PRIu64 "\n", seg->peak);
	printf("  refusals      %" PRIu64 "\n", seg->refusals);
	printf("  device        %s\n", seg->device_uuid);
	printf("  device total  %" PRIu64 " (%s)\n", seg->device_total,
	       xdmctl_human(seg->device_total, h, sizeof(h)));
	printf("  processes     %zu: %u live, %u stopped, %u dead\n", seg->nprocs, states[0],
	       states[1], states[2]);
	printf("  unsettled     %u\n", seg->unsettled);
	print_groups(seg);
}

/* budget --group NAME: that group alone. */
static int show_group(const struct xdmctl_ctx *ctx, const struct xdmctl_segment *seg,
		      const char *name)
{
	const struct xdmctl_group *g;

	if (seg->unreadable[0])
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "/%s %s", seg->name, seg->unreadable);
	g = xdmctl_group_find(seg, name);
	if (!g)
		return xdmctl_fail(XDMCTL_EXIT_NONE, "budget",
				   "budget %s has no group '%s' (xdmctl budget %s lists its groups)",
				   seg->key, name, seg->key);
	if (ctx->json) {
		fputs("{\"key\": ", stdout);
		xdmctl_json_string(stdout, seg->key);
		fputs(", ", stdout);
		xdmctl_group_json(stdout, g);
		fputs("}\n", stdout);
		return XDMCTL_EXIT_OK;
	}
	printf("budget %s group %s\n", seg->key, g->name);
	printf("  members       %" PRIu32 "\n", g->members);
	printf("  limit         %" PRIu64 "\n", g->limit);
	printf("  used          %" PRIu64 "\n", g->used);
	printf("  remaining     %" PRIu64 "\n", g->used < g->limit ? g->limit - g->used : 0);
	printf("  peak          %" PRIu64 "\n", g->peak);
	printf("  refusals      %" PRIu64 "\n", g->refusals);
	return XDMCTL_EXIT_OK;
}

int xdmctl_budget(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "set", required_argument, NULL, 's' },
		{ "group", required_argument, NULL, 'g' },
		{ "dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct xdmctl_segment *segs = NULL, *seg;
	struct xdmctl_mount *mounts = NULL;
	size_t nmounts = 0;
	const char *device = NULL, *set = NULL, *group = NULL;
	size_t nsegs = 0;
	int c, rc;

	optind = 1;
	while ((c = xdmctl_next_option(ctx, argc, argv, "h", longopts, usage, &rc)) != -1) {
		if (c == 's')
			set = optarg;
		else
			group = optarg;
	}
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
	if (group && !group[0])
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "budget", "--group needs a group's name");
	if (optind < argc)
		device = argv[optind++];
	if (optind < argc)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "budget", "one DEVICE at most ('%s')",
				   argv[optind]);
	rc = xdmctl_segments_read(ctx, "budget", &segs, &nsegs);
	if (rc)
		return rc;
	seg = xdmctl_segment_find(segs, nsegs, device, "budget", &rc);
	if (!seg)
		goto out;
	if (set) {
		rc = xdmctl_budget_set(ctx, seg, group, set);
		goto out;
	}
	if (group) {
		rc = show_group(ctx, seg, group);
		goto out;
	}
	xdmctl_segments_find_pids(seg, 1);
	/* The processes' trees, as ps shows them; without them, none. */
	if (xdmctl_mounts_read(ctx, false, BUDGET_TREE_TIMEOUT_MS, &mounts, &nmounts) == 0)
		xdmctl_segments_link_mounts(seg, 1, mounts, nmounts);
	if (ctx->json) {
		xdmctl_segment_json(stdout, seg, true);
		putchar('\n');
		rc = seg->unreadable[0] ? XDMCTL_EXIT_FAIL : XDMCTL_EXIT_OK;
	} else {
		print_text(seg);
		rc = seg->unreadable[0] ? XDMCTL_EXIT_FAIL : XDMCTL_EXIT_OK;
	}
out:
	free(mounts);
	free(segs);
	if (fflush(stdout) != 0 && rc == XDMCTL_EXIT_OK)
		rc = XDMCTL_EXIT_FAIL;
	return rc;
}
