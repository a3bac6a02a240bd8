/* SPDX-License-Identifier: MIT */
/*
 * tracking.c - block-use tracking: the stream-ordered contract of DESIGN.md.
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
 */
#include "config.h"

#include <stdlib.h>

#include "core/internal.h"

static enum xdm_status queue_wait(struct xdm_runtime *rt, xdm_stream_id waiter,
				  const struct xdm_use_event *use)
{
	enum xdm_status st;

	if (use->stream == waiter)
		return XDM_OK;
	st = rt->platform.ops->stream_wait_event(&rt->platform, xdm_stream_native(rt, waiter),
						 use->event);
	if (st == XDM_OK)
		atomic_fetch_add_explicit(&rt->counters.waits, 1, memory_order_relaxed);
	return st;
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
				    "block 0x%llx generation %llu is not live (freed%s)",
				    (unsigned long long)id.ptr, (unsigned long long)id.generation,
				    e ? ", and its address reissued" : "");
		return NULL;
	}
	*shard_out = shard;
	return e;
}

enum xdm_status xdm_track_prepare(struct xdm_layer *self, struct xdm_block_id id,
				  xdm_stream_id use_stream, enum xdm_access access)
{
	struct xdm_runtime *rt = self->rt;
	struct xdm_reg_shard *shard;
	struct xdm_reg_entry *e;
	enum xdm_status st;

	st = check_use(rt, use_stream, access);
	if (st)
		return st;
	e = lock_entry(rt, id, &shard);
	if (!e)
		return XDM_E_USE_AFTER_FREE;
	/* Reads and writes alike must follow the last write. */
	if (e->track.has_write)
		st = queue_wait(rt, use_stream, &e->track.last_write);
	/* A writer must also follow every outstanding reader. */
	for (uint32_t i = 0; st == XDM_OK && (access & XDM_ACCESS_WRITE) && i < e->track.nreads; i++)
		st = queue_wait(rt, use_stream, &e->track.reads[i]);
	xdm_spin_unlock(&shard->lock);
	return st;
}

static bool add_read(struct xdm_runtime *rt, struct xdm_use_track *t,
		     const struct xdm_use_event *use)
{
	for (uint32_t i = 0; i < t->nreads; i++) {
		if (t->reads[i].stream == use->stream) {
			xdm_event_put(rt, t->reads[i].event);
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

static void set_write(struct xdm_runtime *rt, struct xdm_use_track *t,
		      const struct xdm_use_event *use)
{
	/* The new write followed every earlier use (prepare queued the waits). */
	if (t->has_write)
		xdm_event_put(rt, t->last_write.event);
	for (uint32_t i = 0; i < t->nreads; i++)
		xdm_event_put(rt, t->reads[i].event);
	t->nreads = 0;
	t->last_write = *use;
	t->has_write = true;
}

static enum xdm_status record_use(struct xdm_runtime *rt, struct xdm_block_id id,
				  xdm_stream_id use_stream, enum xdm_access access)
{
	struct xdm_use_event use = { .stream = use_stream };
	struct xdm_reg_shard *shard;
	struct xdm_reg_entry *e;
	enum xdm_status st;

	st = check_use(rt, use_stream, access);
	if (st)
		return st;
	st = xdm_event_get(rt, &use.event);
	if (st)
		return st;
	st = rt->platform.ops->event_record(&rt->platform, use.event,
					    xdm_stream_native(rt, use_stream));
	if (st)
		goto put;
	atomic_fetch_add_explicit(&rt->counters.events, 1, memory_order_relaxed);
	e = lock_entry(rt, id, &shard);
	if (!e) {
		st = XDM_E_USE_AFTER_FREE;
		goto put;
	}
	if (access & XDM_ACCESS_WRITE)
		set_write(rt, &e->track, &use);
	else if (!add_read(rt, &e->track, &use))
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory recording a read");
	xdm_spin_unlock(&shard->lock);
	if (st)
		goto put;
	return XDM_OK;

put:
	xdm_event_put(rt, use.event);
	return st;
}

enum xdm_status xdm_track_finish(struct xdm_layer *self, struct xdm_block_id id,
				 xdm_stream_id use_stream, enum xdm_access access)
{
	return record_use(self->rt, id, use_stream, access);
}

/* An untyped use: ordered like a read, so later writers and the free wait. */
enum xdm_status xdm_track_record(struct xdm_layer *self, const struct xdm_block *block,
				 xdm_stream_id use_stream)
{
	if (!block)
		return xdm_error_set(XDM_E_INVALID, "record_block_use: block is NULL");
	return record_use(self->rt, xdm_block_id_of(block), use_stream, XDM_ACCESS_READ);
}

bool xdm_track_supported(struct xdm_layer *self)
{
	return true;
}

enum xdm_status xdm_track_release(struct xdm_runtime *rt, const struct xdm_block *b,
				  struct xdm_use_track *t)
{
	enum xdm_status st = XDM_OK, st2;

	/* Queue every wait even if one fails: each is one more safe edge. */
	if (t->has_write) {
		st = queue_wait(rt, b->stream, &t->last_write);
		xdm_event_put(rt, t->last_write.event);
		t->has_write = false;
	}
	for (uint32_t i = 0; i < t->nreads; i++) {
		st2 = queue_wait(rt, b->stream, &t->reads[i]);
		if (st == XDM_OK)
			st = st2;
		xdm_event_put(rt, t->reads[i].event);
	}
	t->nreads = 0;
	return st;
}
