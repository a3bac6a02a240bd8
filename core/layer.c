/* SPDX-License-Identifier: MIT */
/*
 * layer.c - what a layer may ask of the core: its state, its upstream, the
 * runtime's device and streams, and calls down the stack.
 *
 * The NULL rules of the ABI live here, in one place: an adaptor's NULL
 * method forwards to the layer below it; a backend's NULL tracking method
 * refuses with STREAM_MISUSE, because a silent success would promise a
 * safety the backend does not give.
 */
#include "config.h"

#include <assert.h>
#include <stddef.h>

#include "core/internal.h"

/* module.h reads a layer's first members inline, as struct xdm_layer_head. */
#define HEAD_MATCHES(m) \
	(offsetof(struct xdm_layer, m) == offsetof(struct xdm_layer_head, m))
static_assert(HEAD_MATCHES(priv) && HEAD_MATCHES(serial) && HEAD_MATCHES(ops) &&
	      HEAD_MATCHES(serves_allocate) && HEAD_MATCHES(serves_deallocate),
	      "a layer must begin as struct xdm_layer_head (ABI 1.5)");

void *xdm_layer_priv(const struct xdm_layer *self)
{
	return self->priv;
}

uint64_t xdm_layer_serial(const struct xdm_layer *self)
{
	return self->serial;
}

void xdm_layer_set_priv(struct xdm_layer *self, void *priv)
{
	self->priv = priv;
}

struct xdm_layer *xdm_layer_upstream(const struct xdm_layer *self)
{
	return self->upstream;
}

uint32_t xdm_layer_ordinal(const struct xdm_layer *self)
{
	return self->rt->ordinal;
}

const char *xdm_layer_name(const struct xdm_layer *self)
{
	return self->ops->name;
}

const struct xdm_device_info *xdm_layer_device(const struct xdm_layer *self)
{
	return &self->rt->device;
}

void *xdm_layer_platform_priv(const struct xdm_layer *self)
{
	return self->rt->platform.priv;
}

/* Walk l down past adaptors that leave method NULL. */
#define FIND_IMPL(l, method)                                                          \
	while ((l) && !(l)->ops->method && (l)->ops->kind == XDM_KIND_ADAPTOR)        \
		(l) = (l)->upstream

static enum xdm_status no_upstream(void)
{
	return xdm_error_set(XDM_E_INVALID, "an adaptor has no layer below it");
}

static enum xdm_status untracked(struct xdm_layer *backend, const char *what)
{
	return xdm_error_set(XDM_E_STREAM_MISUSE,
			     "%s: backend '%s' does not track cross-stream uses; use a backend "
			     "that does, or synchronize the streams yourself", what,
			     backend->ops->name);
}

void xdm_layer_resolve(struct xdm_layer *l)
{
	struct xdm_layer *a = l, *d = l;

	FIND_IMPL(a, allocate);
	FIND_IMPL(d, deallocate);
	l->serves_allocate = a;
	l->serves_deallocate = d;
}

enum xdm_status xdm_up_allocate(struct xdm_layer *up, size_t bytes, xdm_stream_id stream,
				const char *tag, struct xdm_block *out)
{
	struct xdm_layer *l = up ? up->serves_allocate : NULL;

	return l ? l->ops->allocate(l, bytes, stream, tag, out) : no_upstream();
}

enum xdm_status xdm_up_deallocate(struct xdm_layer *up, struct xdm_block *block)
{
	struct xdm_layer *l = up ? up->serves_deallocate : NULL;

	return l ? l->ops->deallocate(l, block) : no_upstream();
}

size_t xdm_up_bytes_outstanding(struct xdm_layer *up)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, bytes_outstanding);

	return l && l->ops->bytes_outstanding ? l->ops->bytes_outstanding(l) : 0;
}

enum xdm_status xdm_up_reap_pending(struct xdm_layer *up)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, reap_pending);

	/* A backend without reap frees synchronously: nothing is pending. */
	return l && l->ops->reap_pending ? l->ops->reap_pending(l) : XDM_OK;
}

enum xdm_status xdm_up_record_block_use(struct xdm_layer *up, const struct xdm_block *block,
					xdm_stream_id use_stream)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, record_block_use);

	if (!l)
		return no_upstream();
	if (!l->ops->record_block_use)
		return untracked(l, "record_block_use");
	return l->ops->record_block_use(l, block, use_stream);
}

bool xdm_up_supports_block_use_tracking(struct xdm_layer *up)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, supports_block_use_tracking);

	return l && l->ops->supports_block_use_tracking &&
	       l->ops->supports_block_use_tracking(l);
}

uint64_t xdm_up_granularity(struct xdm_layer *up)
{
	/* No FIND_IMPL: an adaptor must say it passes the question down. */
	if (!up || !up->ops->granularity)
		return 0;
	return up->ops->granularity(up);
}

enum xdm_status xdm_up_allocate_at(struct xdm_layer *up, uint64_t ptr, size_t bytes,
				   xdm_stream_id stream, const char *tag, struct xdm_block *out)
{
	if (!up)
		return no_upstream();
	if (!up->ops->allocate_at)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "%s: cannot allocate at a given address",
				     up->ops->name);
	return up->ops->allocate_at(up, ptr, bytes, stream, tag, out);
}

enum xdm_status xdm_up_ipc_export(struct xdm_layer *up, const struct xdm_block *block,
				  struct xdm_ipc_object *out)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, ipc_export);

	if (!l)
		return no_upstream();
	if (!l->ops->ipc_export)
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "%s: its memory cannot be shared with other processes", l->ops->name);
	return l->ops->ipc_export(l, block, out);
}

enum xdm_status xdm_up_chunks(struct xdm_layer *up, xdm_chunk_fn fn, void *arg)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, chunks);

	if (!l)
		return no_upstream();
	if (!l->ops->chunks)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "%s: cannot tell the chunks it holds",
				     l->ops->name);
	return l->ops->chunks(l, fn, arg);
}

enum xdm_status xdm_up_prepare_block_use(struct xdm_layer *up, struct xdm_block_id id,
					 xdm_stream_id use_stream, enum xdm_access access)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, prepare_block_use);

	if (!l)
		return no_upstream();
	if (!l->ops->prepare_block_use)
		return untracked(l, "prepare_block_use");
	return l->ops->prepare_block_use(l, id, use_stream, access);
}

enum xdm_status xdm_up_finish_block_use(struct xdm_layer *up, struct xdm_block_id id,
					xdm_stream_id use_stream, enum xdm_access access)
{
	struct xdm_layer *l = up;

	FIND_IMPL(l, finish_block_use);

	if (!l)
		return no_upstream();
	if (!l->ops->finish_block_use)
		return untracked(l, "finish_block_use");
	return l->ops->finish_block_use(l, id, use_stream, access);
}

/* ---- the platform, by stream id -------------------------------------- */

const struct xdm_ops *xdm_platform_ops(struct xdm_runtime *rt)
{
	return rt->platform.ops;
}

void *xdm_layer_stream(const struct xdm_layer *self, xdm_stream_id stream)
{
	return xdm_stream_native(self->rt, stream);
}

uint32_t xdm_layer_stream_count(const struct xdm_layer *self)
{
	return atomic_load_explicit(&self->rt->streams.count, memory_order_acquire);
}

static enum xdm_status bad_stream(xdm_stream_id stream)
{
	return xdm_error_set(XDM_E_INVALID, "stream %u is not in the runtime's stream pool",
			     stream);
}

enum xdm_status xdm_layer_launch_host(struct xdm_layer *self, xdm_stream_id stream,
				      void (*fn)(void *arg), void *arg)
{
	struct xdm_runtime *rt = self->rt;
	void *s = xdm_stream_native(rt, stream);

	if (!s)
		return bad_stream(stream);
	return rt->platform.ops->launch_host_func(&rt->platform, s, fn, arg);
}

enum xdm_status xdm_layer_stream_synchronize(struct xdm_layer *self, xdm_stream_id stream)
{
	struct xdm_runtime *rt = self->rt;
	void *s = xdm_stream_native(rt, stream);

	if (!s)
		return bad_stream(stream);
	return rt->platform.ops->stream_synchronize(&rt->platform, s);
}

enum xdm_status xdm_layer_memset(struct xdm_layer *self, uint64_t ptr, int value, size_t bytes,
				 xdm_stream_id stream)
{
	struct xdm_runtime *rt = self->rt;
	void *s = xdm_stream_native(rt, stream);

	if (!s)
		return bad_stream(stream);
	if (!rt->platform.ops->memset_async)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "platform '%s' has no memset",
				     rt->platform.ops->name);
	return rt->platform.ops->memset_async(&rt->platform, ptr, value, bytes, s);
}

enum xdm_status xdm_layer_memcpy(struct xdm_layer *self, uint64_t dst, uint64_t src, size_t bytes,
				 xdm_stream_id stream)
{
	struct xdm_runtime *rt = self->rt;
	void *s = xdm_stream_native(rt, stream);

	if (!s)
		return bad_stream(stream);
	if (!rt->platform.ops->memcpy_async)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "platform '%s' has no memcpy",
				     rt->platform.ops->name);
	return rt->platform.ops->memcpy_async(&rt->platform, dst, src, bytes, s);
}

uint64_t xdm_layer_stream_capture(struct xdm_layer *self, xdm_stream_id stream)
{
	return xdm_stream_capture(self->rt, stream);
}

enum xdm_status xdm_layer_stream_order(struct xdm_layer *self, xdm_stream_id waiter,
				       xdm_stream_id signaler)
{
	struct xdm_runtime *rt = self->rt;
	void *w = xdm_stream_native(rt, waiter);
	void *s = xdm_stream_native(rt, signaler);
	enum xdm_status st;
	void *event;

	if (!w)
		return bad_stream(waiter);
	if (!s)
		return bad_stream(signaler);
	if (waiter == signaler)
		return XDM_OK;
	/*
	 * A wait on an event of another capture (or of none) from a captured
	 * stream ends that capture; one on a captured event from a stream
	 * outside makes that stream join it.  Either breaks the capture.
	 */
	if (xdm_stream_capture(rt, waiter) != xdm_stream_capture(rt, signaler))
		return xdm_error_set(XDM_E_STREAM_MISUSE, "streams %u and %u are not in the same "
				     "graph capture: one cannot wait for the other", waiter,
				     signaler);
	st = xdm_event_get(rt, &event);
	if (st)
		return st;
	st = rt->platform.ops->event_record(&rt->platform, event, s);
	if (st == XDM_OK)
		st = rt->platform.ops->stream_wait_event(&rt->platform, w, event);
	if (st == XDM_OK)
		atomic_fetch_add_explicit(&rt->counters.waits, 1, memory_order_relaxed);
	/* The wait is bound to this record: the event may be reused at once. */
	xdm_event_put(rt, event);
	return st;
}
