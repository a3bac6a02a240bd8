/* SPDX-License-Identifier: MIT */
/*
 * poison.c - freed blocks.  At the free the caller's bytes are overwritten
 * with the poison: a program that reads freed memory sees an unmistakable
 * pattern, and one that writes it leaves a mark.  The canaries keep their
 * own pattern, so that one check, when the block leaves the quarantine,
 * finds both what was written out of bounds while the block was live (or
 * after) and what was written into it after the free.
 *
 * Nothing is read back at the free: that would wait for the block's stream
 * on the caller's thread.  The checker reads the three regions back later
 * (checker.c), the check attribute on demand.
 */
#include "config.h"

#include <stdio.h>

#include "adaptors/guard/guard.h"

enum xdm_status guard_poison_fill(struct xdm_layer *self, const struct guard_block *b)
{
	struct guard *g = guard_of(self);

	return xdm_layer_memset(self, b->ptr, g->poison, b->bytes, b->up.stream);
}

void guard_freed_regions(const struct guard *g, const struct guard_block *b,
			 struct guard_region r[GUARD_FREED_REGIONS])
{
	r[0] = (struct guard_region){ .ptr = b->ptr - g->front, .n = g->front,
				      .pattern = g->canary_pattern };
	r[1] = (struct guard_region){ .ptr = b->ptr, .n = b->bytes, .pattern = g->poison };
	r[2] = (struct guard_region){ .ptr = b->ptr + b->bytes, .n = g->canary,
				      .pattern = g->canary_pattern };
}

static enum xdm_status poison_judge(const struct guard *g, const struct guard_block *b,
				    const struct guard_region *body, char *report, size_t len)
{
	char what[160];

	if (!body->damaged)
		return XDM_OK;
	guard_describe(b, what, sizeof(what));
	snprintf(report, len,
		 "guard: freed %s was written after the free: %zu byte%s no longer hold%s the "
		 "poison 0x%02x, from offset +%zu to +%zu",
		 what, body->damaged, body->damaged == 1 ? "" : "s",
		 body->damaged == 1 ? "s" : "", g->poison, body->lowest, body->highest);
	return xdm_error_set_block(XDM_E_USE_AFTER_FREE, b->generation, XDM_SIDE_NONE, "%s",
				   report);
}

enum xdm_status guard_freed_judge(struct xdm_layer *self, struct guard_block *b,
				  struct guard_region r[GUARD_FREED_REGIONS])
{
	struct guard *g = guard_of(self);
	struct xdm_error first = { .code = XDM_OK };
	char report[GUARD_REPORT_MAX];
	enum xdm_status st;

	/* A damaged canary is a write out of bounds, whenever it was made:
	 * it is the earlier bug, and reported first. */
	st = guard_canary_judge(g, b, &r[0], &r[2], report, sizeof(report));
	if (st) {
		guard_note_violation(g, b, st, report);
		first = *xdm_last_error();
	}
	/* A block whose poison could not be queued holds no known pattern. */
	st = b->poisoned ? poison_judge(g, b, &r[1], report, sizeof(report)) : XDM_OK;
	if (st) {
		guard_note_violation(g, b, st, report);
		if (!first.code)
			first = *xdm_last_error();
	}
	return first.code ? guard_error_restore(&first) : XDM_OK;
}

enum xdm_status guard_freed_check(struct xdm_layer *self, struct guard_block *b)
{
	struct guard_region r[GUARD_FREED_REGIONS];
	enum xdm_status st;

	guard_freed_regions(guard_of(self), b, r);
	st = guard_scan(self, b->up.stream, r, GUARD_FREED_REGIONS);
	if (st)
		return st;
	return guard_freed_judge(self, b, r);
}
