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
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "core/internal.h"

/*
 * A map value is the stream id plus one (0: not seen), and JOIN for a
 * handle the platform serves through another stream, whose work a free or
 * a use must first join there (ops.stream_join: CUDA's per-thread stream).
 */
#define JOIN (UINT32_C(1) << 31)
#define VALUE(id) ((uint32_t)(id) + 1)
#define VALUE_ID(v) ((xdm_stream_id)(((v) & ~JOIN) - 1))

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

static enum xdm_status native_resolve(struct xdm_runtime *rt, void *handle, void **canonical)
{
	const struct xdm_ops *ops = rt->platform.ops;

	if (ops->stream_resolve)
		return ops->stream_resolve(&rt->platform, handle, canonical);
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
	enum xdm_status st;
	void *canonical;
	uint32_t count, id;

	/* The platform may call the driver: outside every lock. */
	st = native_resolve(rt, handle, &canonical);
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
	*value = VALUE(id);
	/* NULL is the platform's default stream itself, under another name. */
	if (rt->platform.ops->stream_join && handle && canonical != handle)
		*value |= JOIN;
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
	if (st)
		return st;
	if (v & JOIN)
		return xdm_error_set(XDM_E_STREAM_MISUSE, "xdm_native_stream: native stream %p is "
				     "served through stream %u and has no id of its own (work "
				     "ordered by that id would miss it); allocate, free and record "
				     "uses on it with xdm_native_allocate, xdm_native_free and "
				     "xdm_native_record_use", native_stream, VALUE_ID(v));
	*out = VALUE_ID(v);
	return XDM_OK;
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
 * Work queued on the native stream so far must finish before the block is
 * reused.  Nothing to do on the block's own stream; an untyped use on any
 * other.  A stack that cannot track uses frees synchronously (cuda_direct's
 * cuMemFree waits for the device, host's free=sync for every stream), which
 * orders the free after that work already.
 */
static enum xdm_status native_use(struct xdm_runtime *rt, void *handle, uint32_t v,
				  const struct xdm_block *b)
{
	enum xdm_status st;

	if (v & JOIN) {
		/* The thread's work on handle first joins the stream it is served on. */
		st = rt->platform.ops->stream_join(&rt->platform, handle,
						   xdm_stream_native(rt, VALUE_ID(v)));
		if (st)
			return st;
	}
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
