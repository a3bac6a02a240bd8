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
 * capture with an error.  The list is only ever a count for a reader.
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

/* Append ev; the array grows outside the lock.  PUSHED_PRUNE: the list
 * reached prune_at. */
static enum push_result push(struct xdm_pending_frees *p, void *ev)
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

/* Query a copy of the list unlocked; drop what completed. */
static void prune(struct xdm_runtime *rt, struct xdm_pending_frees *p)
{
	const struct xdm_ops *plat = rt->platform.ops;
	struct xdm_pending_free *copy;
	uint32_t n, ndone = 0;

	xdm_spin_lock(&p->lock);
	n = p->n;
	xdm_spin_unlock(&p->lock);
	if (!n)
		return;
	copy = malloc(n * sizeof(*copy));
	if (!copy)
		return;
	xdm_spin_lock(&p->lock);
	if (n > p->n)
		n = p->n;
	memcpy(copy, p->v, n * sizeof(*copy));
	xdm_spin_unlock(&p->lock);

	/* Keep the completed ones at the front of copy. */
	for (uint32_t i = 0; i < n; i++) {
		bool done = false;

		if (plat->event_query(&rt->platform, copy[i].event, &done) != XDM_OK)
			done = true;	/* a broken event says nothing: stop counting it */
		if (done)
			copy[ndone++] = copy[i];
	}
	xdm_spin_lock(&p->lock);
	for (uint32_t i = 0; i < ndone; i++)
		if (!remove_locked(p, &copy[i]))
			copy[i].event = NULL;	/* another prune took it */
	p->prune_at = p->n * 2 > PRUNE_AT ? p->n * 2 : PRUNE_AT;
	xdm_spin_unlock(&p->lock);
	for (uint32_t i = 0; i < ndone; i++)
		if (copy[i].event)
			xdm_event_put(rt, copy[i].event);
	free(copy);
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
		pushed = push(p, ev);
	if (pushed == NO_MEMORY)
		xdm_event_put(rt, ev);
	else if (pushed == PUSHED_PRUNE)
		prune(rt, p);
}

uint32_t xdm_pending_free_count(struct xdm_runtime *rt, xdm_stream_id stream)
{
	struct xdm_pending_frees *p = pending_of(rt, stream);
	uint32_t n;

	if (!p)
		return 0;
	prune(rt, p);
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

		for (uint32_t i = 0; i < p->n; i++)
			xdm_event_put(rt, p->v[i].event);
		free(p->v);
		p->v = NULL;
		p->n = p->cap = 0;
	}
}
