/* SPDX-License-Identifier: MIT */
/*
 * tracking.c - block-use tracking: the stream-ordered contract
 * (doc/design.md, "The stream-ordered contract").
 *
 * Each live block remembers the event of its last write and the events of
 * its outstanding reads, one per stream (a later read on a stream supersedes
 * an earlier one there, by stream order).  prepare queues the waits an
 * access needs on the using stream; finish records the new event; the free
 * makes the allocation stream wait on everything still recorded.  Waits on
 * an event recorded on the waiting stream itself are skipped: stream order
 * already covers them.
 *
 * Backends whose frees are queued on the block's stream opt in by pointing
 * their tracking methods here.
 *
 * A peer use is work of another device's runtime (the user) on a block of
 * this one (the owner): the waits are queued on the user's stream, the
 * event comes from the user's pool and is recorded on its stream, and the
 * owner keeps it with the block like any other use, naming the user, so
 * that the free on the owner's stream waits for it (a stream may wait on an
 * event of another device) and the event goes back to the user's pool.
 *
 * Graph capture (doc/design.md, "CUDA graph capture").  Each use remembers
 * the capture its event was recorded in.  A wait from a stream of the same
 * capture (or of none, for an event of none) is queued as always.  A use
 * captured into a graph runs only when the graph is launched, which its
 * caller orders: a stream outside that capture does not wait for it (the
 * wait would pull the stream into the capture, or end it).  A captured
 * stream that must follow a use outside its capture cannot wait for it
 * either (that ends the capture).  A free that must follow such a use is
 * held until the use completes (capture_frees.c); another access waits for
 * the use's event on the host instead, once, so that the block is free of
 * it in real time.
 */
#include "config.h"

#include <stdlib.h>

#include "core/internal.h"

/* The runtime a use's event and stream belong to. */
static struct xdm_runtime *use_rt(struct xdm_runtime *owner, const struct xdm_use_event *use)
{
	return use->rt ? use->rt : owner;
}

/* A use outside the capture of the stream that must follow it (cap). */
static enum xdm_status wait_across_capture(struct xdm_runtime *owner, uint64_t cap,
					   const struct xdm_use_event *use)
{
	struct xdm_runtime *from = use_rt(owner, use);

	if (!cap || use->capture)
		return XDM_OK;	/* the use is captured: it runs when its graph does */
	return from->platform.ops->event_synchronize(&from->platform, use->event);
}

/*
 * Make waiter, a stream of wrt in capture cap (xdm_stream_capture), wait on
 * a use of one of owner's blocks.
 */
static enum xdm_status queue_wait(struct xdm_runtime *owner, struct xdm_runtime *wrt,
				  xdm_stream_id waiter, uint64_t cap,
				  const struct xdm_use_event *use)
{
	enum xdm_status st;

	if (use_rt(owner, use) == wrt && use->stream == waiter)
		return XDM_OK;
	if (cap != use->capture)
		return wait_across_capture(owner, cap, use);
	st = wrt->platform.ops->stream_wait_event(&wrt->platform, xdm_stream_native(wrt, waiter),
						  use->event);
	if (st == XDM_OK)
		atomic_fetch_add_explicit(&wrt->counters.waits, 1, memory_order_relaxed);
	return st;
}

/* Outside any capture and on another stream than own: stream order does not cover it. */
static bool uncaptured_elsewhere(const struct xdm_use_event *use, xdm_stream_id own)
{
	return !use->capture && xdm_use_crosses(use, own);
}

bool xdm_track_has_uncaptured(const struct xdm_use_track *t, xdm_stream_id own)
{
	if (t->has_write && uncaptured_elsewhere(&t->last_write, own))
		return true;
	for (uint32_t i = 0; i < t->nreads; i++)
		if (uncaptured_elsewhere(&t->reads[i], own))
			return true;
	return false;
}

/* One use outside any capture: done, or (with wait) waited for. */
static bool uncaptured_use_done(struct xdm_runtime *owner, const struct xdm_use_event *use,
				bool wait)
{
	struct xdm_runtime *from = use_rt(owner, use);
	bool done = false;

	if (use->capture)
		return true;
	if (wait)
		return from->platform.ops->event_synchronize(&from->platform, use->event) == XDM_OK;
	return from->platform.ops->event_query(&from->platform, use->event, &done) == XDM_OK &&
	       done;
}

bool xdm_track_uncaptured_done(struct xdm_runtime *rt, const struct xdm_use_track *t, bool wait)
{
	bool done = true;

	/* With wait, every use is waited for even after one fails. */
	if (t->has_write && !uncaptured_use_done(rt, &t->last_write, wait))
		done = false;
	for (uint32_t i = 0; i < t->nreads && (done || wait); i++)
		if (!uncaptured_use_done(rt, &t->reads[i], wait))
			done = false;
	return done;
}

void xdm_use_put(struct xdm_runtime *rt, const struct xdm_use_event *use)
{
	struct xdm_runtime *from = use_rt(rt, use);

	xdm_stream_events_held(&from->streams, use->stream, -1);
	xdm_event_put(from, use->event);
	if (use->rt)
		atomic_fetch_sub_explicit(&from->peer_uses, 1, memory_order_release);
}

static enum xdm_status check_use(struct xdm_runtime *rt, xdm_stream_id stream,
				 enum xdm_access access)
{
	if (!xdm_stream_native(rt, stream))
		return xdm_error_set(XDM_E_STREAM_MISUSE,
				     "use stream %u is not in the runtime's stream pool", stream);
	if (access != XDM_ACCESS_READ && access != XDM_ACCESS_WRITE &&
	    access != XDM_ACCESS_READ_WRITE)
		return xdm_error_set(XDM_E_INVALID, "access %d is not READ, WRITE or READ_WRITE",
				     (int)access);
	return XDM_OK;
}

/* Lock the shard of id and find its live entry, or fail USE_AFTER_FREE. */
static struct xdm_reg_entry *lock_entry(struct xdm_runtime *rt, struct xdm_block_id id,
					struct xdm_reg_shard **shard_out)
{
	struct xdm_reg_shard *shard = xdm_registry_shard(&rt->registry, id.ptr);
	struct xdm_reg_entry *e;

	xdm_spin_lock(&shard->lock);
	e = xdm_registry_find_locked(shard, id.ptr);
	if (!e || e->block.generation != id.generation) {
		xdm_spin_unlock(&shard->lock);
		xdm_error_set_block(XDM_E_USE_AFTER_FREE, id.generation, XDM_SIDE_NONE,
				    "block 0x%llx generation %llu is not live (freed%s%llu%s)",
				    (unsigned long long)id.ptr, (unsigned long long)id.generation,
				    e ? ", and its address reissued as generation " : "",
				    e ? (unsigned long long)e->block.generation : 0ull,
				    e ? "" : "");
		return NULL;
	}
	*shard_out = shard;
	return e;
}

/*
 * Events replaced under a shard lock go back to the pool only after the lock
 * is dropped: the pool takes a mutex and may call the platform.  One call
 * replaces either one read (a later read on the same stream) or the last
 * write and every read.  A block's reads are one per stream of each runtime
 * that used it, so with peer uses there may be more than XDM_MAX_STREAMS of
 * them: a reads array on the heap is taken whole rather than copied, and the
 * block starts again from its inline array.
 */
struct spent_events {
	uint32_t n;
	struct xdm_use_event use[1 + XDM_INLINE_READS];
	struct xdm_use_event *taken;	/* a block's heap array of reads, or NULL */
	uint32_t ntaken;
};

static void spend(struct spent_events *sp, const struct xdm_use_event *use)
{
	sp->use[sp->n++] = *use;
}

/* Spend every read of t and leave it with none. */
static void spend_reads(struct xdm_use_track *t, struct spent_events *sp)
{
	if (t->reads == t->inline_reads) {
		for (uint32_t i = 0; i < t->nreads; i++)
			spend(sp, &t->reads[i]);
	} else {
		sp->taken = t->reads;
		sp->ntaken = t->nreads;
		t->reads = t->inline_reads;
		t->capreads = XDM_INLINE_READS;
	}
	t->nreads = 0;
}

static void put_spent(struct xdm_runtime *rt, struct spent_events *sp)
{
	for (uint32_t i = 0; i < sp->n; i++)
		xdm_use_put(rt, &sp->use[i]);
	for (uint32_t i = 0; i < sp->ntaken; i++)
		xdm_use_put(rt, &sp->taken[i]);
	free(sp->taken);
	sp->n = 0;
	sp->taken = NULL;
	sp->ntaken = 0;
}

/*
 * The first use of a block on another stream must follow the work already
 * queued on the block's own stream: its allocation (a stream-ordered pool may
 * hand out memory whose previous user on another stream is still running,
 * ordered only behind the allocation stream) and whatever the owner wrote
 * there without telling us.  That work is recorded as the block's first
 * write.  Called under the shard lock with a spare event from the pool.
 */
static enum xdm_status order_after_owner(struct xdm_runtime *rt, struct xdm_reg_entry *e,
					 void *event, uint64_t cap)
{
	enum xdm_status st;

	st = rt->platform.ops->event_record(&rt->platform, event,
					    xdm_stream_native(rt, e->block.stream));
	if (st)
		return st;
	atomic_fetch_add_explicit(&rt->counters.events, 1, memory_order_relaxed);
	xdm_stream_events_held(&rt->streams, e->block.stream, 1);
	e->track.last_write = (struct xdm_use_event){ event, e->block.stream, NULL, cap };
	e->track.has_write = true;
	return XDM_OK;
}

/* Queue on user's stream the waits an access to owner's block needs. */
static enum xdm_status prepare_use(struct xdm_runtime *owner, struct xdm_block_id id,
				   struct xdm_runtime *user, xdm_stream_id use_stream,
				   enum xdm_access access)
{
	struct xdm_reg_shard *shard;
	struct xdm_reg_entry *e;
	void *spare = NULL;
	enum xdm_status st;
	uint64_t cap;

	st = check_use(user, use_stream, access);
	if (st)
		return st;
	cap = xdm_stream_capture(user, use_stream);
relock:
	e = lock_entry(owner, id, &shard);
	if (!e) {
		st = XDM_E_USE_AFTER_FREE;
		goto out;
	}
	if (!e->track.has_write && (user != owner || use_stream != e->block.stream)) {
		if (!spare) {
			/* Fetch an event without the lock, then look again. */
			xdm_spin_unlock(&shard->lock);
			st = xdm_event_get(owner, &spare);
			if (st)
				return st;
			goto relock;
		}
		st = order_after_owner(owner, e, spare,
				       xdm_stream_capture(owner, e->block.stream));
		if (st)
			goto unlock;
		spare = NULL;
	}
	/* Reads and writes alike must follow the last write. */
	if (e->track.has_write)
		st = queue_wait(owner, user, use_stream, cap, &e->track.last_write);
	/* A writer must also follow every outstanding reader. */
	for (uint32_t i = 0; st == XDM_OK && (access & XDM_ACCESS_WRITE) && i < e->track.nreads; i++)
		st = queue_wait(owner, user, use_stream, cap, &e->track.reads[i]);
unlock:
	xdm_spin_unlock(&shard->lock);
out:
	if (spare)
		xdm_event_put(owner, spare);
	return st;
}

enum xdm_status xdm_track_prepare(struct xdm_layer *self, struct xdm_block_id id,
				  xdm_stream_id use_stream, enum xdm_access access)
{
	return prepare_use(self->rt, id, self->rt, use_stream, access);
}

enum xdm_status xdm_track_peer_prepare(struct xdm_runtime *owner, struct xdm_block_id id,
				       struct xdm_runtime *user, xdm_stream_id stream,
				       enum xdm_access access)
{
	return prepare_use(owner, id, user, stream, access);
}

static bool add_read(struct xdm_use_track *t, const struct xdm_use_event *use,
		     struct spent_events *sp)
{
	/* A captured read does not follow a real one on its stream: both stay. */
	for (uint32_t i = 0; i < t->nreads; i++) {
		if (t->reads[i].stream == use->stream && t->reads[i].rt == use->rt &&
		    t->reads[i].capture == use->capture) {
			spend(sp, &t->reads[i]);
			t->reads[i] = *use;
			return true;
		}
	}
	if (t->nreads == t->capreads) {
		uint32_t cap = t->capreads * 2;
		struct xdm_use_event *reads = malloc(cap * sizeof(*reads));

		if (!reads)
			return false;
		for (uint32_t i = 0; i < t->nreads; i++)
			reads[i] = t->reads[i];
		if (t->reads != t->inline_reads)
			free(t->reads);
		t->reads = reads;
		t->capreads = cap;
	}
	t->reads[t->nreads++] = *use;
	return true;
}

static void set_write(struct xdm_use_track *t, const struct xdm_use_event *use,
		      struct spent_events *sp)
{
	/* The new write followed every earlier use (prepare queued the waits). */
	if (t->has_write)
		spend(sp, &t->last_write);
	spend_reads(t, sp);
	t->last_write = *use;
	t->has_write = true;
}

/*
 * The event is recorded under the block's lock: two threads finishing uses
 * of one block on one stream then store their events in the order the stream
 * will reach them, so a later event never gets replaced by an earlier one.
 */
static enum xdm_status record_use(struct xdm_runtime *owner, struct xdm_block_id id,
				  struct xdm_runtime *user, xdm_stream_id use_stream,
				  enum xdm_access access)
{
	struct xdm_use_event use = { .stream = use_stream, .rt = user == owner ? NULL : user };
	struct spent_events sp = { .n = 0, .taken = NULL, .ntaken = 0 };
	struct xdm_reg_shard *shard;
	struct xdm_reg_entry *e;
	enum xdm_status st;

	st = check_use(user, use_stream, access);
	if (st)
		return st;
	use.capture = xdm_stream_capture(user, use_stream);
	st = xdm_event_get(user, &use.event);
	if (st)
		return st;
	e = lock_entry(owner, id, &shard);
	if (!e) {
		st = XDM_E_USE_AFTER_FREE;
		goto put;
	}
	st = user->platform.ops->event_record(&user->platform, use.event,
					      xdm_stream_native(user, use_stream));
	if (st) {
		xdm_spin_unlock(&shard->lock);
		goto put;
	}
	atomic_fetch_add_explicit(&user->counters.events, 1, memory_order_relaxed);
	if (access & XDM_ACCESS_WRITE)
		set_write(&e->track, &use, &sp);
	else if (!add_read(&e->track, &use, &sp))
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory recording a read");
	if (st == XDM_OK) {
		xdm_stream_events_held(&user->streams, use_stream, 1);
		if (use.rt)
			atomic_fetch_add_explicit(&user->peer_uses, 1, memory_order_relaxed);
	}
	xdm_spin_unlock(&shard->lock);
	put_spent(owner, &sp);
	if (st)
		goto put;
	return XDM_OK;

put:
	xdm_event_put(user, use.event);
	return st;
}

enum xdm_status xdm_track_finish(struct xdm_layer *self, struct xdm_block_id id,
				 xdm_stream_id use_stream, enum xdm_access access)
{
	return record_use(self->rt, id, self->rt, use_stream, access);
}

enum xdm_status xdm_track_peer_finish(struct xdm_runtime *owner, struct xdm_block_id id,
				      struct xdm_runtime *user, xdm_stream_id stream,
				      enum xdm_access access)
{
	return record_use(owner, id, user, stream, access);
}

/* An untyped use: ordered like a read, so later writers and the free wait. */
enum xdm_status xdm_track_record(struct xdm_layer *self, const struct xdm_block *block,
				 xdm_stream_id use_stream)
{
	if (!block)
		return xdm_error_set(XDM_E_INVALID, "record_block_use: block is NULL");
	return record_use(self->rt, xdm_block_id_of(block), self->rt, use_stream,
			  XDM_ACCESS_READ);
}

bool xdm_track_supported(struct xdm_layer *self)
{
	return true;
}

enum xdm_status xdm_track_release(struct xdm_runtime *rt, const struct xdm_block *b,
				  struct xdm_use_track *t, uint64_t cap)
{
	enum xdm_status st = XDM_OK, st2;

	/* Queue every wait even if one fails: each is one more safe edge. */
	if (t->has_write) {
		st = queue_wait(rt, rt, b->stream, cap, &t->last_write);
		xdm_use_put(rt, &t->last_write);
		t->has_write = false;
	}
	for (uint32_t i = 0; i < t->nreads; i++) {
		st2 = queue_wait(rt, rt, b->stream, cap, &t->reads[i]);
		if (st == XDM_OK)
			st = st2;
		xdm_use_put(rt, &t->reads[i]);
	}
	t->nreads = 0;
	return st;
}
