/* SPDX-License-Identifier: MIT */
/*
 * stream_frees.c - which frees a stream has not reached yet.
 *
 * A free that had to wait on another stream's use is the one a reader may
 * want to see stuck; after it is queued the runtime records a pooled event
 * on its stream.  The stream's list keeps those events until a query finds
 * them complete.  Platform calls (record, query) are made with the list's
 * spinlock released: the lock only guards the array, never a wait.  Frees
 * without cross-stream uses cost nothing here and are not counted.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* Past this many marked frees, a new mark first drops the completed ones. */
#define PRUNE_AT 32

static struct xdm_pending_frees *pending_of(struct xdm_runtime *rt, xdm_stream_id stream)
{
	if (stream >= xdm_stream_count(rt))
		return NULL;
	return &rt->streams.slots[stream].pending;
}

/* Append ev; the array grows outside the lock.  The new length, or 0
 * without memory. */
static uint32_t push(struct xdm_pending_frees *p, void *ev)
{
	void **grown = NULL, **old = NULL;
	uint32_t grown_cap = 0;

	for (;;) {
		xdm_spin_lock(&p->lock);
		if (p->n == p->cap && grown && grown_cap > p->cap) {
			if (p->n)
				memcpy(grown, p->events, p->n * sizeof(*grown));
			old = p->events;
			p->events = grown;
			p->cap = grown_cap;
			grown = NULL;
		}
		if (p->n < p->cap) {
			uint32_t n = ++p->n;

			p->events[n - 1] = ev;
			xdm_spin_unlock(&p->lock);
			free(grown);
			free(old);
			return n;
		}
		grown_cap = p->cap ? p->cap * 2 : 16;
		xdm_spin_unlock(&p->lock);
		free(grown);
		grown = malloc(grown_cap * sizeof(*grown));
		if (!grown)
			return 0;
	}
}

/* Take the list, query it unlocked, give back what is still pending. */
static void prune(struct xdm_runtime *rt, struct xdm_pending_frees *p)
{
	const struct xdm_ops *plat = rt->platform.ops;
	void **events;
	uint32_t n;

	xdm_spin_lock(&p->lock);
	events = p->events;
	n = p->n;
	p->events = NULL;
	p->n = 0;
	p->cap = 0;
	xdm_spin_unlock(&p->lock);

	for (uint32_t i = 0; i < n; i++) {
		bool done = false;

		if (plat->event_query(&rt->platform, events[i], &done) != XDM_OK)
			done = true;	/* a broken event says nothing: stop counting it */
		if (done || !push(p, events[i]))
			xdm_event_put(rt, events[i]);
	}
	free(events);
}

void xdm_pending_free_mark(struct xdm_runtime *rt, xdm_stream_id stream)
{
	struct xdm_pending_frees *p = pending_of(rt, stream);
	uint32_t n = 0;
	void *ev;

	if (!p || xdm_event_get(rt, &ev) != XDM_OK)
		return;
	if (rt->platform.ops->event_record(&rt->platform, ev, rt->streams.slots[stream].handle) ==
	    XDM_OK)
		n = push(p, ev);
	if (!n)
		xdm_event_put(rt, ev);
	else if (n >= PRUNE_AT)
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
			xdm_event_put(rt, p->events[i]);
		free(p->events);
		p->events = NULL;
		p->n = p->cap = 0;
	}
}
