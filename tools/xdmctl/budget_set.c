/* SPDX-License-Identifier: MIT */
/*
 * budget_set.c - xdmctl budget --set: the limit of a device's budget, or
 * of one of its groups, changed for every process on it.
 *
 * It follows the rules of a write to a tree's budget/limit or
 * budget/group_limit: the size is read first, by xdm_parse_size() with the
 * device's memory as the base of a %, and a size that cannot be read is an
 * error that changes nothing.  The limit and its check word are then
 * written together under the segment's lock, taken the way the adaptor
 * takes it (both link lib/budget_segment), so a process validating the
 * segment at attach never sees one without the other.  A group is looked
 * up again under the lock: its last member may have left since the
 * listing, and its entry be another group's by now.  Lowering a limit
 * below the usage refuses new allocations until enough is freed; nothing
 * already held is taken back.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>

#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "segments.h"

/* The size text as bytes, with the device's memory as the base of a %. */
static int parse(const struct xdmctl_segment *seg, const char *text, uint64_t *limit)
{
	if (xdm_parse_size(text, seg->device_total, limit) == XDM_OK)
		return XDMCTL_EXIT_OK;
	if (strchr(text, '%') && seg->device_total == 0)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "budget",
				   "--set '%s': a %% needs the device's memory, which this budget "
				   "does not record; give bytes",
				   text);
	return xdmctl_fail(XDMCTL_EXIT_USAGE, "budget",
			   "--set '%s' is not a size: give bytes, K/M/G/T, a %% of the device's "
			   "memory, or max; the limit is unchanged",
			   text);
}

static int no_group(const struct xdmctl_segment *seg, const char *group)
{
	return xdmctl_fail(XDMCTL_EXIT_NONE, "budget",
			   "budget %s has no group '%s' (xdmctl budget %s lists its groups); "
			   "nothing is changed",
			   seg->key, group, seg->key);
}

/* Under the lock: the entry of the group named name, or NULL. */
static struct budget_group *group_locked(struct budget_shm *s, const char *name)
{
	for (unsigned int i = 0; i < BUDGET_GROUPS; i++) {
		struct budget_group *g = &s->groups[i];

		if (g->members && strnlen(g->name, sizeof(g->name)) == strlen(name) &&
		    strncmp(g->name, name, sizeof(g->name)) == 0)
			return g;
	}
	return NULL;
}

static void say(const struct xdmctl_ctx *ctx, const struct xdmctl_segment *seg,
		const char *group, uint64_t before, uint64_t limit)
{
	char a[32], b[32];

	if (ctx->json) {
		printf("{\"key\": ");
		xdmctl_json_string(stdout, seg->key);
		if (group) {
			printf(", \"group\": ");
			xdmctl_json_string(stdout, group);
		}
		printf(", \"limit_before\": %" PRIu64 ", \"limit\": %" PRIu64 "}\n", before, limit);
		return;
	}
	printf("budget %s%s%s: limit %s -> %s\n", seg->key, group ? " group " : "",
	       group ? group : "", before == UINT64_MAX ? "none" : xdmctl_human(before, a, sizeof(a)),
	       limit == UINT64_MAX ? "none" : xdmctl_human(limit, b, sizeof(b)));
}

int xdmctl_budget_set(const struct xdmctl_ctx *ctx, const struct xdmctl_segment *seg,
		      const char *group, const char *text)
{
	_Atomic uint64_t *limitp, *checkp;
	struct budget_group *g = NULL;
	uint64_t limit, before = 0;
	struct budget_shm *s;
	char why[160];
	int rc, err;

	if (seg->unreadable[0])
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "/%s %s", seg->name, seg->unreadable);
	rc = parse(seg, text, &limit);
	if (rc)
		return rc;
	if (group && !xdmctl_group_find(seg, group))
		return no_group(seg, group);
	s = budget_segment_map(AT_FDCWD, seg->path, true, NULL, NULL, why, sizeof(why));
	if (!s)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "/%s %s", seg->name, why);
	err = budget_lock(s);
	if (err) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "budget",
				 "the lock of /%s cannot be taken (%s): the limit is unchanged",
				 seg->name,
				 err == ETIMEDOUT ? "a process holding it is stopped" : strerror(err));
		goto out_unmap;
	}
	/* The last process left since the listing: the name is gone with it. */
	if (s->unlinked) {
		rc = xdmctl_fail(XDMCTL_EXIT_NONE, "budget",
				 "/%s went away (its last process left): nothing to set", seg->name);
		goto out_unlock;
	}
	if (group) {
		g = group_locked(s, group);
		if (!g) {
			rc = no_group(seg, group);
			goto out_unlock;
		}
		limitp = &g->limit;
		checkp = &g->limit_check;
	} else {
		limitp = &s->limit;
		checkp = &s->limit_check;
	}
	before = atomic_load_explicit(limitp, memory_order_relaxed);
	/* A segment an attach would refuse is not mended behind its back. */
	if (atomic_load_explicit(checkp, memory_order_relaxed) != ~before) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "budget",
				 "the limit of /%s%s%s does not match its check word: the segment "
				 "is corrupt (xdm-budget(7), THE SEGMENT); the limit is unchanged",
				 seg->name, group ? ", group " : "", group ? group : "");
		goto out_unlock;
	}
	if (g)
		budget_set_group_limit_locked(g, limit);
	else
		budget_set_limit_locked(s, limit);
	rc = XDMCTL_EXIT_OK;
out_unlock:
	budget_unlock(s);
out_unmap:
	budget_segment_unmap(s);
	/* Said after the lock is let go: a full pipe must not hold it. */
	if (rc == XDMCTL_EXIT_OK)
		say(ctx, seg, group, before, limit);
	return rc;
}
