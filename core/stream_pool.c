/* SPDX-License-Identifier: MIT */
/*
 * stream_pool.c - the runtime's non-blocking streams, indexed by a small
 * stream id.  Owned streams are created at build time; callers may import
 * their own native streams (PyTorch's, CuPy's), which are never destroyed.
 *
 * Slots are written once, before count is published with release order, so
 * lookups need no lock.
 */
#include "config.h"

#include "core/internal.h"

enum xdm_status xdm_stream_pool_init(struct xdm_runtime *rt, uint32_t count)
{
	struct xdm_stream_pool *pool = &rt->streams;
	enum xdm_status st;

	if (count == 0 || count > XDM_MAX_STREAMS)
		return xdm_error_set(XDM_E_CONFIG, "streams must be 1..%d, not %u",
				     XDM_MAX_STREAMS, count);
	for (uint32_t i = 0; i < count; i++) {
		st = rt->platform.ops->stream_create(&rt->platform, &pool->slots[i].handle);
		if (st)
			return st;	/* the caller's fini destroys what exists */
		pool->slots[i].owned = true;
		pool->owned = i + 1;
		atomic_store_explicit(&pool->count, i + 1, memory_order_release);
	}
	return XDM_OK;
}

void xdm_stream_pool_fini(struct xdm_runtime *rt)
{
	struct xdm_stream_pool *pool = &rt->streams;
	uint32_t count = atomic_load(&pool->count);

	for (uint32_t i = 0; i < count; i++)
		if (pool->slots[i].owned && pool->slots[i].handle)
			rt->platform.ops->stream_destroy(&rt->platform, pool->slots[i].handle);
	atomic_store(&pool->count, 0);
	pthread_mutex_destroy(&pool->lock);
}

uint32_t xdm_stream_count(struct xdm_runtime *rt)
{
	if (!rt)
		return 0;
	return atomic_load_explicit(&rt->streams.count, memory_order_acquire);
}

enum xdm_status xdm_stream_handle(struct xdm_runtime *rt, xdm_stream_id stream, void **handle)
{
	void *s = xdm_stream_native(rt, stream);

	if (!handle)
		return xdm_error_set(XDM_E_INVALID, "xdm_stream_handle: result is NULL");
	if (!s)
		return xdm_error_set(XDM_E_INVALID, "stream %u is not in the runtime's stream pool",
				     stream);
	*handle = s;
	return XDM_OK;
}

enum xdm_status xdm_stream_import(struct xdm_runtime *rt, void *handle, xdm_stream_id *out)
{
	struct xdm_stream_pool *pool;
	enum xdm_status st = XDM_OK;
	uint32_t count;

	if (!rt || !handle || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_stream_import: NULL runtime, handle or "
				     "result");
	pool = &rt->streams;
	pthread_mutex_lock(&pool->lock);
	count = atomic_load_explicit(&pool->count, memory_order_relaxed);
	/* Importing the same stream twice gives back the same id. */
	for (uint32_t i = 0; i < count; i++) {
		if (pool->slots[i].handle == handle) {
			*out = i;
			goto unlock;
		}
	}
	if (count == XDM_MAX_STREAMS) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "the stream pool is full (%d streams)",
				   XDM_MAX_STREAMS);
		goto unlock;
	}
	pool->slots[count].handle = handle;
	pool->slots[count].owned = false;
	atomic_store_explicit(&pool->count, count + 1, memory_order_release);
	*out = count;
unlock:
	pthread_mutex_unlock(&pool->lock);
	return st;
}

uint64_t xdm_stream_capture(struct xdm_runtime *rt, xdm_stream_id stream)
{
	const struct xdm_ops *ops = rt->platform.ops;
	void *s = xdm_stream_native(rt, stream);
	uint64_t capture = UINT64_MAX;

	if (!ops->stream_capture)
		return 0;
	if (!s || ops->stream_capture(&rt->platform, s, &capture) != XDM_OK)
		return UINT64_MAX;
	return capture;
}

enum xdm_status xdm_stream_synchronize(struct xdm_runtime *rt, xdm_stream_id stream)
{
	void *s = xdm_stream_native(rt, stream);

	if (!s)
		return xdm_error_set(XDM_E_INVALID, "stream %u is not in the runtime's stream pool",
				     stream);
	return rt->platform.ops->stream_synchronize(&rt->platform, s);
}

enum xdm_status xdm_stream_launch_host(struct xdm_runtime *rt, xdm_stream_id stream,
				       void (*fn)(void *arg), void *arg)
{
	void *s = xdm_stream_native(rt, stream);

	if (!s)
		return xdm_error_set(XDM_E_INVALID, "stream %u is not in the runtime's stream pool",
				     stream);
	if (!fn)
		return xdm_error_set(XDM_E_INVALID, "xdm_stream_launch_host: fn is NULL");
	return rt->platform.ops->launch_host_func(&rt->platform, s, fn, arg);
}
