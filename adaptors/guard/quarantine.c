/* SPDX-License-Identifier: MIT */
/*
 * quarantine.c - freed blocks wait here, poisoned, before their memory goes
 * back upstream, so that a late write lands in poison rather than in the
 * next owner's data; the block is checked on the way out.
 *
 * A FIFO bounded by bytes and by count.  The totals count the upstream
 * bytes held, canaries included, of the blocks in the FIFO and of those
 * that left it and wait for the checker (checker.c): all of that is memory
 * kept from reuse, and it never exceeds quarantine_bytes nor
 * quarantine_count, at any moment: a freed block enters only once it fits.
 * The one exception passes straight through: a block larger than the whole
 * quarantine (or any block, with a limit of 0) is checked at once, and its
 * free returns when it is gone, with what its check found.
 *
 * The oldest blocks leave the FIFO once it would hold more than lo_* (7/8
 * of the limits), so that the checker reads them back while the remaining
 * eighth fills.  A caller waits only when the checker has fallen that far
 * behind.
 */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "adaptors/guard/guard.h"

/* Move the oldest block to the checker's pending list; lock held. */
static void hand_oldest(struct guard *g)
{
	struct guard_block *b = g->q_head;

	g->q_head = b->q_next;
	if (!g->q_head)
		g->q_tail = NULL;
	g->q_count--;
	g->q_bytes -= b->up.bytes;

	b->q_next = NULL;
	b->where = GUARD_CHECKING;
	b->ticket = ++g->handed;
	if (g->pend_tail)
		g->pend_tail->q_next = b;
	else
		g->pend_head = b;
	g->pend_tail = b;
	g->pend_count++;
	g->pend_bytes += b->up.bytes;
	g->out_count++;
	g->out_bytes += b->up.bytes;
}

/* Would adding bytes more (and one block) pass a limit?  Lock held. */
static bool over_limits(const struct guard *g, uint64_t bytes, uint64_t count)
{
	return g->q_bytes + g->out_bytes + bytes > g->quarantine_bytes ||
	       g->q_count + g->out_count + count > g->quarantine_count;
}

/*
 * Wait, lock held, for blocks to be released: or rather than wait idle,
 * take a batch of the pending list and check it here.  Where the checker
 * thread cannot run (it failed to start, this is a forked child) this is
 * how blocks are checked at all.
 */
static bool progress(struct xdm_layer *self)
{
	struct guard *g = guard_of(self);
	struct guard_block *chain;
	struct guard_taker t;

	if (!g->pend_head) {
		/*
		 * All of it is being checked: wait for the takers.  In a
		 * forked child they are threads of the parent, which will
		 * never release anything here: give up waiting (the blocks
		 * they held are lost to this process, and so is the bound).
		 */
		if (getpid() != g->pid)
			return false;
		pthread_cond_wait(&g->room, &g->lock);
		return true;
	}
	chain = guard_take_batch(g, &t);
	pthread_mutex_unlock(&g->lock);
	guard_check_chain(self, chain, &t);
	pthread_mutex_lock(&g->lock);
	return true;
}

/* Hand the oldest to the checker until bytes more (and count blocks) fit
 * under lo_*; lock held. */
static void make_room(struct guard *g, uint64_t bytes, uint64_t count)
{
	while (g->q_head && (g->q_bytes + bytes > g->lo_bytes || g->q_count + count > g->lo_count))
		hand_oldest(g);
	if (g->pend_count >= g->kick_count || g->pend_bytes >= g->kick_bytes)
		pthread_cond_signal(&g->work);
}

static void fifo_append(struct guard *g, struct guard_block *b)
{
	b->where = GUARD_QUARANTINED;
	b->q_next = NULL;
	if (g->q_tail)
		g->q_tail->q_next = b;
	else
		g->q_head = b;
	g->q_tail = b;
	g->q_count++;
	g->q_bytes += b->up.bytes;
}

enum xdm_status guard_quarantine_put(struct xdm_layer *self, struct guard_block *b,
				     enum xdm_block_state *state)
{
	struct guard *g = guard_of(self);
	uint64_t bytes = b->up.bytes;
	struct xdm_error report;
	bool told;

	pthread_mutex_lock(&g->lock);
	if (bytes > g->quarantine_bytes || !g->quarantine_count) {
		/*
		 * It cannot be held at all: it is checked at once, after the
		 * blocks already waiting, and this free returns when it is
		 * gone, with what its check found.
		 */
		uint64_t ticket;

		fifo_append(g, b);
		make_room(g, 0, 0);
		ticket = b->ticket;	/* b left the FIFO last: its record is the checker's */
		while (!guard_released(g, ticket) && progress(self))
			;
		*state = XDM_BLOCK_FREED;
	} else {
		/* The bound holds at every moment: b enters only once it fits. */
		for (;;) {
			make_room(g, bytes, 1);
			if (!over_limits(g, bytes, 1) || !progress(self))
				break;
		}
		fifo_append(g, b);
		*state = XDM_BLOCK_QUARANTINED;
	}
	told = guard_report_take_locked(g, &report);
	pthread_mutex_unlock(&g->lock);
	return told ? guard_error_restore(&report) : XDM_OK;
}

enum xdm_status guard_quarantine_drain(struct xdm_layer *self)
{
	struct guard *g = guard_of(self);
	struct xdm_error report;
	uint64_t ticket;
	bool told;

	pthread_mutex_lock(&g->lock);
	while (g->q_head)
		hand_oldest(g);
	/* Blocks others hand over meanwhile are theirs to wait for. */
	ticket = g->handed;
	while (!guard_released(g, ticket) && progress(self))
		;
	told = guard_report_take_locked(g, &report);
	pthread_mutex_unlock(&g->lock);
	return told ? guard_error_restore(&report) : XDM_OK;
}
