/* SPDX-License-Identifier: MIT */
/*
 * poison.c - freed blocks.  At the free the whole guarded range, canaries
 * included, is overwritten with the poison: a program that reads freed
 * memory sees an unmistakable pattern, and one that writes it leaves a mark
 * that the quarantine finds when the block leaves it.  Poisoning the
 * canaries too makes a damage found at the free, already reported, not
 * count again as a write after the free.
 */
#include "config.h"

#include <stdio.h>

#include "adaptors/guard/guard.h"

static struct guard_region poison_region(const struct guard *g, const struct guard_block *b)
{
	return (struct guard_region){ .ptr = b->ptr - g->front,
				      .n = g->front + b->bytes + g->canary,
				      .pattern = g->poison };
}

enum xdm_status guard_poison_fill(struct xdm_layer *self, const struct guard_block *b)
{
	struct guard_region r = poison_region(guard_of(self), b);

	return xdm_layer_memset(self, r.ptr, r.pattern, r.n, b->up.stream);
}

/* An offset in the guarded range, from the caller's pointer, signed. */
static long long from_ptr(const struct guard *g, size_t off)
{
	return (long long)off - (long long)g->front;
}

enum xdm_status guard_poison_check(struct xdm_layer *self, const struct guard_block *b,
				   char *report, size_t len)
{
	struct guard *g = guard_of(self);
	struct guard_region r = poison_region(g, b);
	enum xdm_status st;
	char what[160];

	st = guard_scan(self, b->up.stream, &r, 1);
	if (st)
		return st;
	if (!r.damaged)
		return XDM_OK;
	guard_describe(b, what, sizeof(what));
	snprintf(report, len,
		 "guard: freed %s was written after the free: %zu byte%s no longer hold%s the "
		 "poison 0x%02x, from offset %+lld to %+lld",
		 what, r.damaged, r.damaged == 1 ? "" : "s", r.damaged == 1 ? "s" : "",
		 g->poison, from_ptr(g, r.lowest), from_ptr(g, r.highest));
	return xdm_error_set_block(XDM_E_USE_AFTER_FREE, b->generation, XDM_SIDE_NONE, "%s",
				   report);
}
