/* SPDX-License-Identifier: MIT */
/*
 * stream_frees.c - which frees a stream has not reached yet.
 *
 * A free that had to wait on another stream's use is the one a reader may
 * want to see stuck; after it is queued the runtime records a pooled event
 * on its stream.  The stream's list keeps those events until a query finds
 * them complete.  Platform calls (record, query) are made with the list's
 * spinlock released: the lock only guards the array, never a wait.
 *
 * A prune queries a copy of the list and then removes, under the lock, only
 * the entries it found complete, matched by event and sequence number: the
 * list never looks shorter than it is to a concurrent reader, and an event
 * that went back to the pool and was marked again is not removed by a prune
 * that saw its earlier use.  Frees without cross-stream uses cost nothing
 * here and are not counted.
 *
 * Nor are frees on a stream that is being captured into a graph: an event
 * recorded there is part of the capture, and querying it would end the
 * capture with an error.
 *
 * The list also holds the frees made on a per-thread stream (CUDA's
 * per-thread default stream, doc/design.md "Per-thread default streams"):
 * the event was recorded by the freeing thread on its own per-thread
 * stream, which no other thread can name, and the block stays here until
 * the host sees the event complete.  Only then does it go to the stack, on
 * its own stream.  No stream is ever made to wait on such an event: on the
 * H200 (driver 580) a thread hung in its exit, where the driver tears its
 * per-thread stream down, while another stream still waited on an event
 * of it (commit c44f699).  The host's query or synchronize of an event
 * outlives the stream it was recorded on (an event is an object of its
 * own; a destroyed stream's queued work still runs).  A held free counts
 * as pending like any other, and is released by the prune that finds its
 * event complete, which removes it from the list: one prune, one release.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/*
 * A mark prunes once the list reaches prune_at, which then becomes twice
 * what the prune left (and never less than PRUNE_AT): a stream that stays
 * behind costs each free O(1) queries on average, not one per pending free.
 */
#define PRUNE_AT 32

static struct xdm_pending_frees *pending_of(struct xdm_runtime *rt, xdm_stream_id stream)
{
	if (stream >= xdm_stream_count(rt))
		return NULL;
	return &rt->streams.slots[stream].pending;
}

enum push_result { NO_MEMORY, PUSHED, PUSHED_PRUNE };

/* Append ev (and block, held, if not NULL); the array grows outside the
 * lock.  PUSHED_PRUNE: the list reached prune_at. */
static enum push_result push(struct xdm_pending_frees *p, void *ev, const struct xdm_block *block)
{
	struct xdm_pending_free *grown = NULL, *old = NULL;
	uint32_t grown_cap = 0;

	for (;;) {
		xdm_spin_lock(&p->lock);
		if (p->n == p->cap && grown && grown_cap > p->cap) {
			if (p->n)
				memcpy(grown, p->v, p->n * sizeof(*grown));
			old = p->v;
			p->v = grown;
			p->cap = grown_cap;
			grown = NULL;
		}
		if (p->n < p->cap) {
			uint32_t n = ++p->n;
			bool due = n >= (p->prune_at ? p->prune_at : PRUNE_AT);

			p->v[n - 1].event = ev;
			p->v[n - 1].seq = p->next_seq++;
			p->v[n - 1].held = block != NULL;
			if (block) {
				p->v[n - 1].block = *block;
				atomic_fetch_add_explicit(&p->held, 1, memory_order_relaxed);
			}
			xdm_spin_unlock(&p->lock);
			free(grown);
			free(old);
			return due ? PUSHED_PRUNE : PUSHED;
		}
		grown_cap = p->cap ? p->cap * 2 : 16;
		xdm_spin_unlock(&p->lock);
		free(grown);
		grown = malloc(grown_cap * sizeof(*grown));
		if (!grown)
			return NO_MEMORY;
	}
}

/* Remove the entry (event, seq) if it is still listed; true if it was. */
static bool remove_locked(struct xdm_pending_frees *p, const struct xdm_pending_free *e)
{
	for (uint32_t i = 0; i < p->n; i++) {
		if (p->v[i].event == e->event && p->v[i].seq == e->seq) {
			p->v[i] = p->v[--p->n];
			return true;
		}
	}
	return false;
}

/*
 * Whether an entry's free is done.  A plain pending free is only counted:
 * a broken event says nothing, so it stops being counted.  A held block
 * is memory: it goes to the stack only once the host has seen its event
 * complete, but for the runtime's end (FORCE), which must give it back.
 */
static bool entry_done(struct xdm_runtime *rt, const struct xdm_pending_free *e,
		       enum xdm_held_wait how, enum xdm_status *first)
{
	const struct xdm_ops *plat = rt->platform.ops;
	enum xdm_status st;
	bool done = false;

	if (e->held && how != XDM_HELD_QUERY)
		st = plat->event_synchronize(&rt->platform, e->event);
	else
		st = plat->event_query(&rt->platform, e->event, &done);
	if (st == XDM_OK)
		return e->held && how != XDM_HELD_QUERY ? true : done;
	if (e->held && how != XDM_HELD_QUERY && *first == XDM_OK)
		*first = st;
	return !e->held || how == XDM_HELD_FORCE;
}

/* Query a copy of the list unlocked; drop what completed, release what it held. */
static enum xdm_status prune(struct xdm_runtime *rt, struct xdm_pending_frees *p,
			     enum xdm_held_wait how)
{
	enum xdm_status first = XDM_OK, st;
	struct xdm_pending_free *copy;
	uint32_t n, ndone = 0, nheld = 0;

	xdm_spin_lock(&p->lock);
	n = p->n;
	xdm_spin_unlock(&p->lock);
	if (!n)
		return XDM_OK;
	copy = malloc(n * sizeof(*copy));
	if (!copy)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "no memory to look at %u pending frees",
				     n);
	xdm_spin_lock(&p->lock);
	if (n > p->n)
		n = p->n;
	memcpy(copy, p->v, n * sizeof(*copy));
	xdm_spin_unlock(&p->lock);

	/* Keep the completed ones at the front of copy. */
	for (uint32_t i = 0; i < n; i++)
		if (entry_done(rt, &copy[i], how, &first))
			copy[ndone++] = copy[i];
	xdm_spin_lock(&p->lock);
	for (uint32_t i = 0; i < ndone; i++) {
		if (!remove_locked(p, &copy[i]))
			copy[i].event = NULL;	/* another prune took it */
		else if (copy[i].held)
			nheld++;
	}
	p->prune_at = p->n * 2 > PRUNE_AT ? p->n * 2 : PRUNE_AT;
	xdm_spin_unlock(&p->lock);
	/* Outside the lock: the stack may call the platform. */
	for (uint32_t i = 0; i < ndone; i++) {
		if (!copy[i].event)
			continue;
		xdm_event_put(rt, copy[i].event);
		if (!copy[i].held)
			continue;
		st = xdm_release_held(rt, &copy[i].block);
		if (st && first == XDM_OK)
			first = st;
	}
	if (nheld) {
		atomic_fetch_sub_explicit(&p->held, nheld, memory_order_relaxed);
		atomic_fetch_sub_explicit(&rt->streams.held_frees, nheld, memory_order_release);
	}
	free(copy);
	return first;
}

void xdm_pending_free_mark(struct xdm_runtime *rt, xdm_stream_id stream)
{
	struct xdm_pending_frees *p = pending_of(rt, stream);
	enum push_result pushed = NO_MEMORY;
	void *ev;

	if (!p || xdm_stream_capture(rt, stream) || xdm_event_get(rt, &ev) != XDM_OK)
		return;
	if (rt->platform.ops->event_record(&rt->platform, ev, rt->streams.slots[stream].handle) ==
	    XDM_OK)
		pushed = push(p, ev, NULL);
	if (pushed == NO_MEMORY)
		xdm_event_put(rt, ev);
	else if (pushed == PUSHED_PRUNE)
		prune(rt, p, XDM_HELD_QUERY);
}

bool xdm_pending_free_hold(struct xdm_runtime *rt, void *event, const struct xdm_block *block)
{
	struct xdm_pending_frees *p = pending_of(rt, block->stream);
	enum push_result pushed;

	if (!p)
		return false;
	/* Counted first: a reader of held_frees never misses a held block. */
	atomic_fetch_add_explicit(&rt->streams.held_frees, 1, memory_order_relaxed);
	pushed = push(p, event, block);
	if (pushed == NO_MEMORY) {
		atomic_fetch_sub_explicit(&rt->streams.held_frees, 1, memory_order_relaxed);
		return false;
	}
	if (pushed == PUSHED_PRUNE)
		prune(rt, p, XDM_HELD_QUERY);
	return true;
}

enum xdm_status xdm_pending_frees_release(struct xdm_runtime *rt, enum xdm_held_wait how)
{
	uint32_t count = xdm_stream_count(rt);
	enum xdm_status first = XDM_OK, st;

	if (!atomic_load_explicit(&rt->streams.held_frees, memory_order_acquire))
		return XDM_OK;
	for (uint32_t s = 0; s < count; s++) {
		struct xdm_pending_frees *p = &rt->streams.slots[s].pending;

		if (!atomic_load_explicit(&p->held, memory_order_relaxed))
			continue;
		st = prune(rt, p, how);
		if (st && first == XDM_OK)
			first = st;
	}
	return first;
}

uint32_t xdm_pending_free_count(struct xdm_runtime *rt, xdm_stream_id stream)
{
	struct xdm_pending_frees *p = pending_of(rt, stream);
	uint32_t n;

	if (!p)
		return 0;
	prune(rt, p, XDM_HELD_QUERY);
	xdm_spin_lock(&p->lock);
	n = p->n;
	xdm_spin_unlock(&p->lock);
	return n;
}

void xdm_pending_frees_fini(struct xdm_runtime *rt)
{
	uint32_t count = xdm_stream_count(rt);

	for (uint32_t s = 0; s < count; s++) {
		struct xdm_pending_frees *p = &rt->streams.slots[s].pending;

		/* Held blocks went to the stack before it ended (teardown). */
		for (uint32_t i = 0; i < p->n; i++)
			xdm_event_put(rt, p->v[i].event);
		free(p->v);
		p->v = NULL;
		p->n = p->cap = 0;
	}
}
