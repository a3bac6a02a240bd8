/* SPDX-License-Identifier: MIT */
/*
 * quarantine.c - freed blocks wait here, poisoned, before their memory goes
 * back upstream, so that a late write lands in poison rather than in the
 * next owner's data; the poison is checked on the way out.
 *
 * A FIFO bounded by bytes and by count: the oldest blocks leave first, from
 * whichever call pushed the totals over a limit, and that call reports what
 * their check found.  The totals count the upstream bytes held, canaries
 * included: that is the memory the quarantine keeps from reuse.
 */
#include "config.h"

#include <stdlib.h>

#include "adaptors/guard/guard.h"

enum xdm_status guard_release(struct xdm_layer *self, struct guard_block *b,
			      enum xdm_block_state *state)
{
	struct guard *g = guard_of(self);
	enum xdm_status st;

	/* A running check may still be reading it. */
	pthread_mutex_lock(&g->lock);
	while (b->refs)
		pthread_cond_wait(&g->unpinned, &g->lock);
	pthread_mutex_unlock(&g->lock);

	st = xdm_up_deallocate(xdm_layer_upstream(self), &b->up);
	if (state)
		*state = b->up.state == XDM_BLOCK_LIVE ? XDM_BLOCK_FREED : b->up.state;
	free(b);
	return st;
}

/* Check a block leaving the quarantine, then free it whatever was found. */
static enum xdm_status evict(struct xdm_layer *self, struct guard_block *b,
			     enum xdm_block_state *state)
{
	struct guard *g = guard_of(self);
	char report[GUARD_REPORT_MAX];
	struct xdm_error saved = { .code = XDM_OK };
	enum xdm_status st = XDM_OK, st_free;

	/* A block whose poison could not be queued holds no known pattern. */
	if (b->poisoned) {
		st = guard_poison_check(self, b, report, sizeof(report));
		if (st == XDM_E_USE_AFTER_FREE)
			guard_note_violation(g, b, st, report);
	}
	if (st)
		saved = *xdm_last_error();
	st_free = guard_release(self, b, state);
	if (st)
		return guard_error_restore(&saved);
	return st_free;
}

/*
 * Evict a chain of blocks; the first error is the one returned.  If mine
 * is among them, *state is set to what the upstream made of it.
 */
static enum xdm_status evict_chain(struct xdm_layer *self, struct guard_block *b,
				   const struct guard_block *mine, enum xdm_block_state *state)
{
	struct xdm_error saved = { .code = XDM_OK };
	enum xdm_status first = XDM_OK, st;

	while (b) {
		struct guard_block *next = b->q_next;
		bool is_mine = b == mine;

		if (is_mine)
			mine = NULL;	/* freed below: never compared again */
		st = evict(self, b, is_mine ? state : NULL);
		if (st && !first) {
			first = st;
			saved = *xdm_last_error();
		}
		b = next;
	}
	return first ? guard_error_restore(&saved) : XDM_OK;
}

/* Unlink the oldest block; caller holds the lock, the FIFO is not empty. */
static struct guard_block *pop_oldest(struct guard *g)
{
	struct guard_block *b = g->q_head;

	g->q_head = b->q_next;
	if (!g->q_head)
		g->q_tail = NULL;
	b->q_next = NULL;
	g->q_count--;
	g->q_bytes -= b->up.bytes;
	b->where = GUARD_EVICTING;
	return b;
}

/* Take blocks off the front until the totals are within the limits (all
 * of them with all set); caller holds the lock. */
static struct guard_block *take_over_limits(struct guard *g, bool all)
{
	struct guard_block *chain = NULL, **tail = &chain;

	while (g->q_head && (all || g->q_bytes > g->quarantine_bytes ||
			     g->q_count > g->quarantine_count)) {
		struct guard_block *b = pop_oldest(g);

		*tail = b;
		tail = &b->q_next;
	}
	return chain;
}

enum xdm_status guard_quarantine_put(struct xdm_layer *self, struct guard_block *b,
				     enum xdm_block_state *state)
{
	struct guard *g = guard_of(self);
	struct guard_block *out;

	pthread_mutex_lock(&g->lock);
	b->where = GUARD_QUARANTINED;
	b->q_next = NULL;
	if (g->q_tail)
		g->q_tail->q_next = b;
	else
		g->q_head = b;
	g->q_tail = b;
	g->q_count++;
	g->q_bytes += b->up.bytes;
	out = take_over_limits(g, false);
	pthread_mutex_unlock(&g->lock);

	/* With limits of 0 (or a block larger than quarantine_bytes) the block
	 * leaves at once, and its state is then the upstream's. */
	*state = XDM_BLOCK_QUARANTINED;
	return evict_chain(self, out, b, state);
}

enum xdm_status guard_quarantine_flush(struct xdm_layer *self)
{
	struct guard *g = guard_of(self);
	struct guard_block *out;

	pthread_mutex_lock(&g->lock);
	out = take_over_limits(g, true);
	pthread_mutex_unlock(&g->lock);

	return evict_chain(self, out, NULL, NULL);
}
