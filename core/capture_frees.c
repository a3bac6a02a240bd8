/* SPDX-License-Identifier: MIT */
/*
 * capture_frees.c - frees made inside a graph capture that must follow
 * work outside it.
 *
 * A block freed on a stream that is being captured, with a use recorded
 * outside the capture (on another stream, before the capture began), may
 * not go back to the stack yet: the capturing stream cannot wait for that
 * use (a wait on an event from outside the capture ends the capture), and
 * a wait queued outside the capture would not order the graph's later
 * launches.  Waiting on the host instead, until the use completes, stalls
 * the capturing thread, and deadlocks it outright where the use itself
 * waits for that thread (a kernel spinning on a host flag).
 *
 * So such a free is held: the block has left the registry (its handle is
 * dead, the runtime's counters say it was freed), its memory stays with
 * the stack, and the uses it must follow stay with it.  The hold is let go
 * once every one of those uses has completed in real time and the block's
 * stream is no longer capturing; then the free runs as any cross-stream
 * free does, in stream order.  Uses captured into a graph are not waited
 * for: they run when the graph does, which its caller orders.
 *
 * The held frees are looked at by xdm_reap_pending() and
 * xdm_release_capture_frees(), by a later free of the runtime that crosses
 * streams (outside a capture), and by the runtime's teardown, which waits
 * for them.  Nothing here runs on the
 * common free: a free is held only on the out-of-line tracked path.
 */
#include "config.h"

#include <stdlib.h>

#include "core/internal.h"

struct xdm_capture_free {
	struct xdm_capture_free *next;
	struct xdm_block block;
	struct xdm_use_track uses;
};

void xdm_capture_frees_init(struct xdm_capture_frees *h)
{
	pthread_mutex_init(&h->lock, NULL);
	h->head = NULL;
	atomic_init(&h->count, 0);
	atomic_init(&h->bytes, 0);
}

bool xdm_capture_free_must_hold(uint64_t cap, const struct xdm_block *b,
				const struct xdm_use_track *uses)
{
	/* UINT64_MAX: the capture state is unknown; the host wait stays. */
	if (!cap || cap == UINT64_MAX)
		return false;
	return xdm_track_has_uncaptured(uses, b->stream);
}

/*
 * False without memory for the hold: the caller then waits on the host as
 * before, and no error is left behind for a free that succeeds.
 */
bool xdm_capture_free_hold(struct xdm_runtime *rt, const struct xdm_block *b,
			   struct xdm_use_track *uses)
{
	struct xdm_capture_frees *h = &rt->capture_frees;
	struct xdm_capture_free *f = malloc(sizeof(*f));

	if (!f)
		return false;
	f->block = *b;
	xdm_use_track_move(&f->uses, uses);
	pthread_mutex_lock(&h->lock);
	f->next = h->head;
	h->head = f;
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->bytes, b->bytes, memory_order_relaxed);
	pthread_mutex_unlock(&h->lock);
	return true;
}

/*
 * The free a hold stood for, now in stream order, as free_tracked makes
 * it; cap: the capture its stream is in (0 unless at teardown's wait).
 */
static enum xdm_status give_to_stack(struct xdm_runtime *rt, struct xdm_capture_free *f,
				     uint64_t cap)
{
	enum xdm_status st_wait, st;

	st_wait = xdm_track_release(rt, &f->block, &f->uses, cap);
	xdm_use_track_free(&f->uses);
	if (xdm_ipc_hold_free(&rt->ipc, &f->block))
		return st_wait;
	st = xdm_up_deallocate(&rt->layers[0], &f->block);
	if (st == XDM_OK && !cap)
		xdm_pending_free_mark(rt, f->block.stream);
	return st ? st : st_wait;
}

/*
 * Whether the hold may go; *cap: its stream's capture then.  The stream is
 * asked once, so that the free goes in the state this saw (a capture that
 * begins right after is the caller's race, as for any free).
 */
static bool may_go(struct xdm_runtime *rt, struct xdm_capture_free *f, bool wait, uint64_t *cap)
{
	*cap = xdm_stream_capture(rt, f->block.stream);
	/* Teardown: the uses are waited for, and the free runs whatever they said. */
	if (wait) {
		xdm_track_uncaptured_done(rt, &f->uses, true);
		return true;
	}
	if (*cap)
		return false;
	return xdm_track_uncaptured_done(rt, &f->uses, false);
}

enum xdm_status xdm_capture_frees_release(struct xdm_runtime *rt, bool wait)
{
	struct xdm_capture_frees *h = &rt->capture_frees;
	struct xdm_capture_free *list, *f, *kept = NULL;
	enum xdm_status first = XDM_OK, st;
	uint64_t cap;

	if (!atomic_load_explicit(&h->count, memory_order_relaxed))
		return XDM_OK;
	/* Taken whole: two threads never look at the same hold. */
	pthread_mutex_lock(&h->lock);
	list = h->head;
	h->head = NULL;
	pthread_mutex_unlock(&h->lock);
	while ((f = list) != NULL) {
		list = f->next;
		if (!may_go(rt, f, wait, &cap)) {
			f->next = kept;
			kept = f;
			continue;
		}
		atomic_fetch_sub_explicit(&h->count, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&h->bytes, f->block.bytes, memory_order_relaxed);
		st = give_to_stack(rt, f, cap);
		if (st && !first)
			first = st;
		free(f);
	}
	if (kept) {
		pthread_mutex_lock(&h->lock);
		for (f = kept; f->next; f = f->next)
			;
		f->next = h->head;
		h->head = kept;
		pthread_mutex_unlock(&h->lock);
	}
	return first;
}

void xdm_capture_frees_fini(struct xdm_capture_frees *h)
{
	/* xdm_capture_frees_release(rt, true) has emptied it. */
	pthread_mutex_destroy(&h->lock);
}
