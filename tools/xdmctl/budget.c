/* SPDX-License-Identifier: MIT */
/*
 * budget.c - xdmctl budget [DEVICE] [--set SIZE]: a device's shared
 * budget, and its limit changed for every process on it.
 *
 * --set follows the rules of a write to a mount's budget/limit: the size
 * is read first, by xdm_parse_size() with the device's memory as the base
 * of a %, and a size that cannot be read is an error that changes nothing.
 * The limit and its check word are then written together under the
 * segment's lock, taken the way the adaptor takes it (both link
 * lib/budget_segment), so a process validating the segment at attach never
 * sees one without the other.  Lowering the limit below the usage refuses new
 * allocations until enough is freed; nothing already held is taken back.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "segments.h"

#define BUDGET_TREE_TIMEOUT_MS 1000

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--json] budget [DEVICE] [--set SIZE]\n"
	      "\n"
	      "Show the shared budget of a device, or change its limit for every\n"
	      "process on it.  DEVICE is the budget's key (the device's UUID unless\n"
	      "configured otherwise), a unique start of it, or the segment's name;\n"
	      "it may be left out when the machine has one budget.\n"
	      "\n"
	      "  --set SIZE  the new limit: bytes, K/M/G/T, a % of the device's\n"
	      "              memory, or max (as budget/limit in xdm-fs(7))\n"
	      "  --json      one JSON document\n",
	      f);
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
	printf("  segment       /%s (owner uid %u)\n", seg->name, (unsigned int)seg->owner);
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
}

/* Maps the segment for writing and checks it is still one: NULL, said. */
static struct budget_shm *map_writable(const struct xdmctl_segment *seg, int *rc)
{
	char why[160];
	struct budget_shm *s = budget_segment_map(AT_FDCWD, seg->path, true, NULL, NULL, why,
						  sizeof(why));

	if (!s)
		*rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "/%s %s", seg->name, why);
	return s;
}

static int set_limit(struct xdmctl_ctx *ctx, struct xdmctl_segment *seg, const char *text)
{
	uint64_t limit, before;
	struct budget_shm *s;
	char a[32], b[32];
	int rc = 0, err;

	if (seg->unreadable[0])
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "/%s %s", seg->name, seg->unreadable);
	if (xdm_parse_size(text, seg->device_total, &limit) != XDM_OK) {
		if (strchr(text, '%') && seg->device_total == 0)
			return xdmctl_fail(XDMCTL_EXIT_USAGE, "budget",
					   "--set '%s': a %% needs the device's memory, which this "
					   "budget does not record; give bytes",
					   text);
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "budget",
				   "--set '%s' is not a size: give bytes, K/M/G/T, a %% of the "
				   "device's memory, or max; the limit is unchanged",
				   text);
	}
	s = map_writable(seg, &rc);
	if (!s)
		return rc;
	err = budget_lock(s);
	if (err) {
		budget_segment_unmap(s);
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget",
				   "the lock of /%s cannot be taken (%s): the limit is unchanged",
				   seg->name,
				   err == ETIMEDOUT ? "a process holding it is stopped" : strerror(err));
	}
	/* The last process left since the listing: the name is gone with it. */
	if (s->unlinked) {
		budget_unlock(s);
		budget_segment_unmap(s);
		return xdmctl_fail(XDMCTL_EXIT_NONE, "budget",
				   "/%s went away (its last process left): nothing to set", seg->name);
	}
	before = atomic_load_explicit(&s->limit, memory_order_relaxed);
	/* A segment an attach would refuse is not mended behind its back. */
	if (atomic_load_explicit(&s->limit_check, memory_order_relaxed) != ~before) {
		budget_unlock(s);
		budget_segment_unmap(s);
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget",
				   "the limit of /%s does not match its check word: the segment is "
				   "corrupt (xdm-budget(7), THE SEGMENT); the limit is unchanged",
				   seg->name);
	}
	budget_set_limit_locked(s, limit);
	budget_unlock(s);
	budget_segment_unmap(s);
	seg->limit = limit;
	if (ctx->json) {
		printf("{\"key\": ");
		xdmctl_json_string(stdout, seg->key);
		printf(", \"limit_before\": %" PRIu64 ", \"limit\": %" PRIu64 "}\n", before, limit);
	} else {
		printf("budget %s: limit %s -> %s\n", seg->key,
		       before == UINT64_MAX ? "none" : xdmctl_human(before, a, sizeof(a)),
		       limit == UINT64_MAX ? "none" : xdmctl_human(limit, b, sizeof(b)));
	}
	return XDMCTL_EXIT_OK;
}

int xdmctl_budget(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "set", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct xdmctl_segment *segs = NULL, *seg;
	struct xdmctl_mount *mounts = NULL;
	size_t nmounts = 0;
	const char *device = NULL, *set = NULL;
	size_t nsegs = 0;
	int rc;

	optind = 1;
	while (xdmctl_next_option(ctx, argc, argv, "h", longopts, usage, &rc) != -1)
		set = optarg;	/* --set, the one option of budget's own */
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
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
		rc = set_limit(ctx, seg, set);
		goto out;
	}
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
