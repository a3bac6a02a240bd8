/* SPDX-License-Identifier: MIT */
/*
 * native.c - the entry frameworks use: allocate on a native stream, free by
 * pointer (DESIGN: Frameworks).
 *
 * PyTorch, CuPy and Numba name their own streams and give back pointers,
 * not blocks.  A native handle is resolved by the platform (which knows
 * what NULL, CUDA's legacy and per-thread handles mean), imported into the
 * stream pool once, and remembered in a lock-free map, so the second and
 * later calls on a stream cost one hash probe.  A pointer is found in the
 * registry, which is keyed by address already; the free then goes through
 * xdm_deallocate() like any other, so the stack, the budget, the log and
 * the tree see framework blocks exactly as they see a C engine's.
 *
 * A per-thread handle (ops.stream_per_thread: CUDA's per-thread default
 * stream) is a different stream on every thread, which no other thread can
 * name.  It is served from the stream the platform resolves it to (CUDA's
 * legacy stream, whose earlier work every per-thread stream follows by
 * itself), and the map remembers it with XDM_NATIVE_PER_THREAD.  A free
 * naming it records an event there, from the freeing thread, and the block
 * is held until the host sees that event complete (stream_frees.c): no
 * stream ever waits on it (doc/design.md, "Per-thread default streams").
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "core/internal.h"

#define VALUE(id, flags) (((uint32_t)(flags) << 16) | ((uint32_t)(id) + 1))
#define VALUE_ID(v) ((xdm_stream_id)(((v) & 0xffffu) - 1))
#define VALUE_FLAGS(v) ((unsigned int)((v) >> 16))

static size_t native_hash(uintptr_t key)
{
	/* Handles are pointers: drop the alignment bits, then mix. */
	uint64_t h = (uint64_t)key >> 4;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h & (XDM_NATIVE_SLOTS - 1);
}

/* The packed value of a handle seen before, or 0. */
static uint32_t native_find(struct xdm_native_map *m, void *handle)
{
	uintptr_t key = (uintptr_t)handle;

	if (key < XDM_NATIVE_SPECIAL)
		return atomic_load_explicit(&m->special[key], memory_order_acquire);
	for (size_t i = native_hash(key), n = 0; n < XDM_NATIVE_SLOTS;
	     i = (i + 1) & (XDM_NATIVE_SLOTS - 1), n++) {
		uintptr_t k = atomic_load_explicit(&m->slots[i].key, memory_order_acquire);

		if (k == key)
			return atomic_load_explicit(&m->slots[i].value, memory_order_relaxed);
		if (k == 0)
			return 0;
	}
	return 0;
}

/* Caller holds the stream pool's lock; the map has room (one entry per
 * distinct handle, and a handle needs a pool slot or names one). */
static void native_put(struct xdm_native_map *m, void *handle, uint32_t value)
{
	uintptr_t key = (uintptr_t)handle;
	size_t i;

	if (key < XDM_NATIVE_SPECIAL) {
		atomic_store_explicit(&m->special[key], value, memory_order_release);
		return;
	}
	for (i = native_hash(key); atomic_load_explicit(&m->slots[i].key, memory_order_relaxed);
	     i = (i + 1) & (XDM_NATIVE_SLOTS - 1))
		;
	atomic_store_explicit(&m->slots[i].value, value, memory_order_relaxed);
	atomic_store_explicit(&m->slots[i].key, key, memory_order_release);
}

/* Count the map's hashed entries: it must never fill up. */
static uint32_t native_used(struct xdm_native_map *m)
{
	uint32_t n = 0;

	for (size_t i = 0; i < XDM_NATIVE_SLOTS; i++)
		n += atomic_load_explicit(&m->slots[i].key, memory_order_relaxed) != 0;
	return n;
}

static enum xdm_status native_resolve(struct xdm_runtime *rt, void *handle, void **canonical,
				      unsigned int *flags)
{
	const struct xdm_ops *ops = rt->platform.ops;
	enum xdm_status st;

	*flags = 0;
	if (ops->stream_resolve) {
		st = ops->stream_resolve(&rt->platform, handle, canonical);
		if (st == XDM_OK && ops->stream_per_thread &&
		    ops->stream_per_thread(&rt->platform, handle))
			*flags = XDM_NATIVE_PER_THREAD;
		return st;
	}
	if (!handle)
		return xdm_error_set(XDM_E_INVALID, "platform '%s' has no default stream: a "
				     "native stream handle must not be NULL", ops->name);
	*canonical = handle;
	return XDM_OK;
}

/* First sight of a handle: resolve it and give it a stream of the pool. */
static enum xdm_status native_import(struct xdm_runtime *rt, void *handle, uint32_t *value)
{
	struct xdm_stream_pool *pool = &rt->streams;
	unsigned int flags;
	enum xdm_status st;
	void *canonical;
	uint32_t count, id;

	/* The platform may call the driver: outside every lock. */
	st = native_resolve(rt, handle, &canonical, &flags);
	if (st)
		return st;
	pthread_mutex_lock(&pool->lock);
	*value = native_find(&rt->native, handle);
	if (*value)
		goto unlock;	/* another thread imported it meanwhile */
	if ((uintptr_t)handle >= XDM_NATIVE_SPECIAL &&
	    native_used(&rt->native) >= XDM_NATIVE_SLOTS / 2) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "runtime %u: %d native stream handles "
				   "seen, the most it keeps", rt->ordinal, XDM_NATIVE_SLOTS / 2);
		goto unlock;
	}
	count = atomic_load_explicit(&pool->count, memory_order_relaxed);
	for (id = 0; id < count; id++)
		if (pool->slots[id].handle == canonical)
			break;
	if (id == count) {
		if (count == XDM_MAX_STREAMS) {
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "the stream pool is full (%d "
					   "streams)", XDM_MAX_STREAMS);
			goto unlock;
		}
		pool->slots[count].handle = canonical;
		pool->slots[count].owned = false;
		atomic_store_explicit(&pool->count, count + 1, memory_order_release);
	}
	*value = VALUE(id, flags);
	native_put(&rt->native, handle, *value);
unlock:
	pthread_mutex_unlock(&pool->lock);
	return st;
}

static enum xdm_status native_value(struct xdm_runtime *rt, void *handle, uint32_t *value)
{
	*value = native_find(&rt->native, handle);
	return *value ? XDM_OK : native_import(rt, handle, value);
}

enum xdm_status xdm_native_stream(struct xdm_runtime *rt, void *native_stream,
				  xdm_stream_id *out)
{
	enum xdm_status st;
	uint32_t v;

	if (!rt || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_native_stream: NULL runtime or result");
	st = native_value(rt, native_stream, &v);
	if (st == XDM_OK)
		*out = VALUE_ID(v);
	return st;
}

enum xdm_status xdm_native_allocate(struct xdm_runtime *rt, size_t bytes, void *native_stream,
				    const char *tag, void **ptr)
{
	struct xdm_block b;
	enum xdm_status st;
	uint32_t v;

	if (!rt || !ptr)
		return xdm_error_set(XDM_E_INVALID, "xdm_native_allocate: NULL runtime or result");
	*ptr = NULL;
	if (bytes == 0)
		return XDM_OK;
	st = native_value(rt, native_stream, &v);
	if (st)
		return st;
	/*
	 * Blocks freed on per-thread streams come back once the host sees
	 * their events: asked here without blocking, by one thread at a time
	 * (the others need not queue behind its queries).
	 */
	if (atomic_load_explicit(&rt->streams.held_frees, memory_order_relaxed) &&
	    !atomic_flag_test_and_set_explicit(&rt->streams.releasing, memory_order_acquire)) {
		xdm_pending_frees_release(rt, XDM_HELD_QUERY);
		atomic_flag_clear_explicit(&rt->streams.releasing, memory_order_release);
	}
	st = xdm_allocate(rt, bytes, VALUE_ID(v), tag ? tag : xdm_thread_tag(), &b);
	if (st == XDM_OK)
		*ptr = (void *)(uintptr_t)b.ptr;
	return st;
}

/* Copy out the live block whose address is ptr. */
static bool native_block(struct xdm_runtime *rt, void *ptr, struct xdm_block *out)
{
	struct xdm_reg_shard *shard = xdm_registry_shard(&rt->registry, (uintptr_t)ptr);
	struct xdm_reg_entry *e;

	xdm_spin_lock(&shard->lock);
	e = xdm_registry_find_locked(shard, (uintptr_t)ptr);
	if (e)
		*out = e->block;
	xdm_spin_unlock(&shard->lock);
	return e != NULL;
}

static enum xdm_status not_a_block(struct xdm_runtime *rt, const char *fn, void *ptr)
{
	return xdm_error_set(XDM_E_INVALID, "%s: %p is not the address of a live block of "
			     "runtime %s (foreign, freed already, or inside a block)", fn, ptr,
			     rt->name[0] ? rt->name : "(unpublished)");
}

/*
 * Whether the calling thread's per-thread stream is being captured into a
 * graph: its work then runs when the graph does, in the order the graph
 * keeps, and nothing recorded there may be queried (doc/design.md, "CUDA
 * graph capture").  An error reads as capturing, as xdm_stream_capture().
 */
static bool per_thread_captured(struct xdm_runtime *rt, void *handle)
{
	const struct xdm_ops *ops = rt->platform.ops;
	uint64_t capture = 0;

	if (!ops->stream_capture)
		return false;
	return ops->stream_capture(&rt->platform, handle, &capture) != XDM_OK || capture;
}

/*
 * An event recorded on the calling thread's per-thread stream, after the
 * work queued there so far.  The record is the only call that can name
 * that stream, and it is made from this thread.
 */
static enum xdm_status per_thread_event(struct xdm_runtime *rt, void *handle, void **event)
{
	enum xdm_status st;

	st = xdm_event_get(rt, event);
	if (st)
		return st;
	st = rt->platform.ops->event_record(&rt->platform, *event, handle);
	if (st)
		goto put;
	atomic_fetch_add_explicit(&rt->counters.events, 1, memory_order_relaxed);
	return XDM_OK;

put:
	xdm_event_put(rt, *event);
	*event = NULL;
	return st;
}

/*
 * A free naming the calling thread's per-thread stream: the block is held
 * until the host sees the thread's work done (xdm_deallocate_held()), so
 * that nothing reuses it before, and no stream is made to wait for it.  It
 * orders the free after the freeing thread's work only: a block last used
 * on another thread's per-thread stream must be synchronized by its user
 * first, which no other thread could name.
 */
static enum xdm_status per_thread_free(struct xdm_runtime *rt, void *handle, struct xdm_block *b)
{
	enum xdm_status st, st_free;
	void *event;

	/* Captured: the graph orders the block's next use in the capture. */
	if (per_thread_captured(rt, handle))
		return xdm_deallocate(rt, b);
	st = per_thread_event(rt, handle, &event);
	if (st == XDM_OK)
		return xdm_deallocate_held(rt, b, event);
	/*
	 * No event: the host waits for the thread's stream instead.  If even
	 * that fails, free all the same: keeping the block would leak it for
	 * good, and the error still reaches the caller (as native_use's).
	 */
	st = rt->platform.ops->stream_synchronize(&rt->platform, handle);
	st_free = xdm_deallocate(rt, b);
	return st_free ? st_free : st;
}

/*
 * A use on the calling thread's per-thread stream: the host waits for the
 * work queued there so far, now.  A block keeps uses only as events that
 * its stream and later users wait on, which a per-thread stream's event
 * must never be.
 */
static enum xdm_status per_thread_use(struct xdm_runtime *rt, void *handle)
{
	enum xdm_status st;
	void *event;

	if (per_thread_captured(rt, handle))
		return XDM_OK;	/* it runs when its graph does, which its caller orders */
	st = per_thread_event(rt, handle, &event);
	if (st)
		return st;
	st = rt->platform.ops->event_synchronize(&rt->platform, event);
	xdm_event_put(rt, event);
	return st;
}

/*
 * Work queued on the native stream so far must finish before the block is
 * reused.  Nothing to do on the block's own stream; an untyped use on any
 * other.  A stack that cannot track uses frees synchronously (cuda_direct's
 * cuMemFree waits for the device, host's free=sync for every stream), which
 * orders the free after that work already.
 */
static enum xdm_status native_use(struct xdm_runtime *rt, void *handle, uint32_t v,
				  const struct xdm_block *b)
{
	if (VALUE_FLAGS(v) & XDM_NATIVE_PER_THREAD)
		return per_thread_use(rt, handle);
	if (VALUE_ID(v) == b->stream || !xdm_supports_block_use_tracking(rt))
		return XDM_OK;
	return xdm_record_block_use(rt, b, VALUE_ID(v));
}

enum xdm_status xdm_native_free(struct xdm_runtime *rt, void *ptr, void *native_stream)
{
	enum xdm_status st, st_free;
	struct xdm_block b;
	uint32_t v;

	if (!rt)
		return xdm_error_set(XDM_E_INVALID, "xdm_native_free: runtime is NULL");
	if (!ptr)
		return XDM_OK;
	st = native_value(rt, native_stream, &v);
	if (st)
		return st;
	if (!native_block(rt, ptr, &b))
		return not_a_block(rt, "xdm_native_free", ptr);
	if (VALUE_FLAGS(v) & XDM_NATIVE_PER_THREAD)
		return per_thread_free(rt, native_stream, &b);
	/*
	 * If the use cannot be ordered, free all the same: keeping the block
	 * would leak it for good, and the error still reaches the caller (the
	 * same choice as a failed wait in xdm_deallocate()).
	 */
	st = native_use(rt, native_stream, v, &b);
	st_free = xdm_deallocate(rt, &b);
	return st_free ? st_free : st;
}

enum xdm_status xdm_native_release(struct xdm_runtime *rt, void *ptr)
{
	struct xdm_block b;

	if (!rt)
		return xdm_error_set(XDM_E_INVALID, "xdm_native_release: runtime is NULL");
	if (!ptr)
		return XDM_OK;
	if (!native_block(rt, ptr, &b))
		return not_a_block(rt, "xdm_native_release", ptr);
	return xdm_deallocate(rt, &b);
}

enum xdm_status xdm_native_record_use(struct xdm_runtime *rt, void *ptr, void *native_stream)
{
	enum xdm_status st;
	struct xdm_block b;
	uint32_t v;

	if (!rt || !ptr)
		return xdm_error_set(XDM_E_INVALID, "xdm_native_record_use: NULL runtime or "
				     "pointer");
	st = native_value(rt, native_stream, &v);
	if (st)
		return st;
	if (!native_block(rt, ptr, &b))
		return not_a_block(rt, "xdm_native_record_use", ptr);
	return native_use(rt, native_stream, v, &b);
}

enum xdm_status xdm_native_lookup(struct xdm_runtime *rt, void *ptr, struct xdm_block *out)
{
	if (!rt || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_native_lookup: NULL runtime or result");
	if (!ptr || !native_block(rt, ptr, out))
		return not_a_block(rt, "xdm_native_lookup", ptr);
	return XDM_OK;
}
