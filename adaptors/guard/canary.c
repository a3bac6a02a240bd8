/* SPDX-License-Identifier: MIT */
/*
 * canary.c - the canaries: known bytes just before and just after the
 * caller's bytes, written when the block is handed out and compared when it
 * leaves the quarantine (or on demand).  A changed byte there is a write
 * out of bounds, and which canary it is in says which side.
 */
#include "config.h"

#include <stdio.h>

#include "adaptors/guard/guard.h"

/* Both canaries: the whole front (up to ptr) and canary bytes after. */
static void canary_regions(const struct guard *g, const struct guard_block *b,
			   struct guard_region r[2])
{
	r[0] = (struct guard_region){ .ptr = b->ptr - g->front, .n = g->front,
				      .pattern = g->canary_pattern };
	r[1] = (struct guard_region){ .ptr = b->ptr + b->bytes, .n = g->canary,
				      .pattern = g->canary_pattern };
}

/*
 * Up to this many guarded bytes, one memset covers both canaries and the
 * caller's bytes between them: each memset is a call into the driver that
 * costs more than writing a few KiB on the device, and what a fresh block
 * holds is the caller's to define.  Larger blocks get two small memsets.
 */
#define GUARD_FILL_WHOLE_MAX ((size_t)64 << 10)

enum xdm_status guard_canary_fill(struct xdm_layer *self, const struct guard_block *b)
{
	struct guard *g = guard_of(self);
	size_t whole = g->front + b->bytes + g->canary;
	struct guard_region r[2];
	enum xdm_status st;

	if (!g->canary)
		return XDM_OK;
	if (whole <= GUARD_FILL_WHOLE_MAX)
		return xdm_layer_memset(self, b->ptr - g->front, g->canary_pattern, whole,
					b->up.stream);
	canary_regions(g, b, r);
	for (int k = 0; k < 2; k++) {
		st = xdm_layer_memset(self, r[k].ptr, r[k].pattern, r[k].n, b->up.stream);
		if (st)
			return st;
	}
	return XDM_OK;
}

static const char *plural(size_t n)
{
	return n == 1 ? "" : "s";
}

enum xdm_status guard_canary_check(struct xdm_layer *self, const struct guard_block *b,
				   char *report, size_t len)
{
	struct guard *g = guard_of(self);
	struct guard_region r[2];
	enum xdm_status st;

	canary_regions(g, b, r);
	st = guard_scan(self, b->up.stream, r, 2);
	if (st)
		return st;
	return guard_canary_judge(g, b, &r[0], &r[1], report, len);
}

enum xdm_status guard_canary_judge(const struct guard *g, const struct guard_block *b,
				   const struct guard_region *before,
				   const struct guard_region *after, char *report, size_t len)
{
	enum xdm_bounds_side side;
	char what[160];
	int n = 0;

	if (!before->damaged && !after->damaged)
		return XDM_OK;

	guard_describe(b, what, sizeof(what));
	/*
	 * Offsets are from the caller's pointer.  Writes run away from the
	 * block, so the damaged byte nearest to it is where the bug starts:
	 * the lowest one after the end, the highest one before the start.
	 */
	if (after->damaged) {
		side = XDM_SIDE_AFTER;
		n = snprintf(report, len,
			     "guard: %zu byte%s after the end of %s %s overwritten: first damaged "
			     "byte at offset +%zu",
			     after->damaged, plural(after->damaged), what,
			     after->damaged == 1 ? "was" : "were", b->bytes + after->lowest);
		if (before->damaged && n >= 0 && (size_t)n < len)
			snprintf(report + n, len - n,
				 "; and %zu byte%s before its start, the nearest at offset -%zu",
				 before->damaged, plural(before->damaged),
				 g->front - before->highest);
	} else {
		side = XDM_SIDE_BEFORE;
		snprintf(report, len,
			 "guard: %zu byte%s before the start of %s %s overwritten: first damaged "
			 "byte at offset -%zu",
			 before->damaged, plural(before->damaged), what,
			 before->damaged == 1 ? "was" : "were", g->front - before->highest);
	}
	return xdm_error_set_block(XDM_E_OUT_OF_BOUNDS, b->generation, side, "%s", report);
}
