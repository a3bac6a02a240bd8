/* SPDX-License-Identifier: MIT */
/*
 * report.c - how the guard names a block, keeps what it found, and carries
 * an error across the calls it makes while unwinding.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "adaptors/guard/guard.h"

void guard_describe(const struct guard_block *b, char *buf, size_t len)
{
	/*
	 * The runtime gives a block its generation after the stack returns,
	 * so a live block seen by the check attribute has none yet here; its
	 * address finds it under blocks/ in the introspection tree.
	 */
	if (b->generation)
		snprintf(buf, len, "block 0x%llx (%zu bytes, generation %llu, tag \"%s\")",
			 (unsigned long long)b->ptr, b->bytes, (unsigned long long)b->generation,
			 b->tag);
	else
		snprintf(buf, len, "live block 0x%llx (%zu bytes, tag \"%s\")",
			 (unsigned long long)b->ptr, b->bytes, b->tag);
}

void guard_note_violation(struct guard *g, struct guard_block *b, enum xdm_status code,
			  const char *report)
{
	unsigned int bit = 1u << code;

	pthread_mutex_lock(&g->lock);
	/*
	 * A damage is counted once per block: a canary the check attribute
	 * found broken is found again at the free, and the free must still
	 * report it to its caller, but it is one violation.
	 */
	if (!b || !(b->reported & bit)) {
		g->violations++;
		if (b)
			b->reported |= bit;
	}
	snprintf(g->last_violation, sizeof(g->last_violation), "%s", report);
	pthread_mutex_unlock(&g->lock);
}

enum xdm_status guard_error_restore(const struct xdm_error *e)
{
	switch (e->code) {
	case XDM_E_OUT_OF_BUDGET:
		return xdm_error_set_budget(e->requested, e->remaining, "%s", e->message);
	case XDM_E_USE_AFTER_FREE:
	case XDM_E_OUT_OF_BOUNDS:
		return xdm_error_set_block(e->code, e->generation, e->side, "%s", e->message);
	case XDM_E_DRIVER:
		return xdm_error_set_driver(e->driver_code, "%s", e->message);
	default:
		return xdm_error_set(e->code, "%s", e->message);
	}
}
