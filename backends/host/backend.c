/* SPDX-License-Identifier: MIT */
/*
 * backend.c - the host backend: host memory as the device memory of the
 * host platform.
 *
 * free=stream (the default) behaves like cuMemFreeAsync: deallocate queues
 * the free on the block's allocation stream, behind every cross-stream wait
 * the core has queued there, so the memory outlives all work that may still
 * touch it.  Because its frees are stream-ordered, this mode opts in to the
 * core's block-use tracking.
 *
 * free=sync behaves like cuMemFree: the memory is gone when deallocate
 * returns, after the runtime's streams have drained (cuMemFree synchronizes
 * the device the same way).  It tracks no cross-stream use and says so.
 *
 * ipc=true makes every block a memfd of its own (shared.c) that another
 * process can map: the twin of a driver's shareable memory, so that
 * xdm_ipc_export runs, and is tested, without a GPU.
 *
 * The allocate path takes no lock of its own (ipc=false): counters are C11
 * atomics.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/module.h>

#include "host.h"

struct host_backend {
	bool stream_ordered;			/* free=stream */
	bool shareable;				/* ipc=true: memfd blocks */
	struct host_shared shared;
	atomic_uint_fast64_t bytes_outstanding;	/* allocated, not yet freed */
	atomic_uint_fast64_t pending_frees;	/* frees queued, not yet run */
	atomic_uint_fast64_t allocs;
	atomic_uint_fast64_t frees;		/* memory actually returned */
};

/* A free waiting on its stream. */
struct host_free {
	struct host_backend *hb;
	void *ptr;
	size_t bytes;
};

static struct host_backend *host_backend_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

static void host_release(struct host_backend *hb, void *ptr, size_t bytes)
{
	if (hb->shareable)
		host_shared_release(&hb->shared, ptr);
	else
		free(ptr);
	atomic_fetch_sub_explicit(&hb->bytes_outstanding, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&hb->frees, 1, memory_order_relaxed);
}

/* Runs on the block's stream once all work queued before the free is done. */
static void host_free_run(void *arg)
{
	struct host_free *f = arg;
	struct host_backend *hb = f->hb;

	host_release(hb, f->ptr, f->bytes);
	free(f);
	atomic_fetch_sub_explicit(&hb->pending_frees, 1, memory_order_release);
}

static enum xdm_status host_backend_init(struct xdm_layer *self, const struct xdm_params *params)
{
	const char *mode = xdm_params_string(params, "free");
	struct host_backend *hb;
	bool stream_ordered;

	if (mode && !strcmp(mode, "stream"))
		stream_ordered = true;
	else if (mode && !strcmp(mode, "sync"))
		stream_ordered = false;
	else
		return xdm_error_set(XDM_E_CONFIG,
				     "host backend: free must be 'stream' or 'sync', not '%s'",
				     mode ? mode : "");

	hb = calloc(1, sizeof(*hb));
	if (!hb)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: no memory for its state");
	hb->stream_ordered = stream_ordered;
	hb->shareable = xdm_params_bool(params, "ipc");
	if (hb->shareable)
		host_shared_init(&hb->shared);
	atomic_init(&hb->bytes_outstanding, 0);
	atomic_init(&hb->pending_frees, 0);
	atomic_init(&hb->allocs, 0);
	atomic_init(&hb->frees, 0);
	xdm_layer_set_priv(self, hb);
	return XDM_OK;
}

static enum xdm_status host_reap_pending(struct xdm_layer *self)
{
	struct host_backend *hb = host_backend_of(self);
	enum xdm_status first = XDM_OK, st;
	uint32_t i, n;

	if (!atomic_load_explicit(&hb->pending_frees, memory_order_acquire))
		return XDM_OK;
	/*
	 * Which streams hold frees is not worth tracking on the free path:
	 * draining every stream is simple and leaves the count exact.  Except
	 * a stream being captured into a graph (the platform's simulation):
	 * a synchronize would end the capture, so its frees stay pending until
	 * a reap after it, as over cuda_async.
	 */
	n = xdm_layer_stream_count(self);
	for (i = 0; i < n; i++) {
		if (xdm_layer_stream_capture(self, i))
			continue;
		st = xdm_layer_stream_synchronize(self, i);
		if (st && !first)
			first = st;
	}
	return first;
}

static void host_backend_fini(struct xdm_layer *self)
{
	struct host_backend *hb = host_backend_of(self);

	if (!hb)
		return;
	host_reap_pending(self);
	xdm_layer_set_priv(self, NULL);
	/* A free still queued on a stream that could not be drained would
	 * touch hb when it runs; leaking hb is the lesser harm. */
	if (atomic_load_explicit(&hb->pending_frees, memory_order_acquire))
		return;
	if (hb->shareable)
		host_shared_fini(&hb->shared);
	free(hb);
}

static enum xdm_status host_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				     const char *tag, struct xdm_block *out)
{
	struct host_backend *hb = host_backend_of(self);
	const size_t align = XDM_DEFAULT_ALIGN;
	size_t rounded;
	void *p;

	if (bytes > SIZE_MAX - (align - 1))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "host backend: cannot allocate %zu bytes: too large", bytes);
	/* aligned_alloc wants a multiple of the alignment; a 0-byte request
	 * still gets a unique address. */
	rounded = bytes ? (bytes + align - 1) & ~(align - 1) : align;
	if (hb->shareable) {
		enum xdm_status st = host_shared_alloc(&hb->shared, bytes, rounded, &p);

		if (st)
			return st;
	} else {
		p = aligned_alloc(align, rounded);
		if (!p)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: cannot allocate "
					     "%zu bytes of host memory", bytes);
	}

	/* The core filled generation, ordinal, stream and tag. */
	out->ptr = (uint64_t)(uintptr_t)p;
	out->bytes = bytes;
	out->align = align;
	out->state = XDM_BLOCK_LIVE;
	atomic_fetch_add_explicit(&hb->bytes_outstanding, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&hb->allocs, 1, memory_order_relaxed);
	return XDM_OK;
}

static enum xdm_status host_drain_all(struct xdm_layer *self)
{
	enum xdm_status st;
	uint32_t i, n = xdm_layer_stream_count(self);

	for (i = 0; i < n; i++) {
		st = xdm_layer_stream_synchronize(self, i);
		if (st)
			return st;
	}
	return XDM_OK;
}

static enum xdm_status host_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct host_backend *hb = host_backend_of(self);
	void *ptr;
	struct host_free *f;
	enum xdm_status st;

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "host backend: deallocate of a NULL block");
	ptr = (void *)(uintptr_t)block->ptr;

	if (!hb->stream_ordered) {
		st = host_drain_all(self);
		if (st)
			return st;	/* work may still use it: leak, never free early */
		host_release(hb, ptr, block->bytes);
		block->state = XDM_BLOCK_FREED;
		return XDM_OK;
	}

	f = malloc(sizeof(*f));
	if (f) {
		f->hb = hb;
		f->ptr = ptr;
		f->bytes = block->bytes;
		atomic_fetch_add_explicit(&hb->pending_frees, 1, memory_order_relaxed);
		st = xdm_layer_launch_host(self, block->stream, host_free_run, f);
		if (!st) {
			block->state = XDM_BLOCK_RETIRED;
			return XDM_OK;
		}
		atomic_fetch_sub_explicit(&hb->pending_frees, 1, memory_order_relaxed);
		free(f);
	}
	/* The free could not be queued.  Waiting for the stream gives the same
	 * order, only slower; if even that fails the memory is leaked. */
	st = xdm_layer_stream_synchronize(self, block->stream);
	if (st)
		return st;
	host_release(hb, ptr, block->bytes);
	block->state = XDM_BLOCK_FREED;
	return XDM_OK;
}

static size_t host_bytes_outstanding(struct xdm_layer *self)
{
	return atomic_load_explicit(&host_backend_of(self)->bytes_outstanding,
				    memory_order_relaxed);
}

/* ---- block-use tracking: the core's, when frees are stream-ordered ---- */

static enum xdm_status host_no_tracking(void)
{
	return xdm_error_set(XDM_E_STREAM_MISUSE,
			     "host backend: free=sync frees synchronously and does not track "
			     "cross-stream uses; use free=stream");
}

static enum xdm_status host_record_block_use(struct xdm_layer *self, const struct xdm_block *block,
					     xdm_stream_id use_stream)
{
	if (!host_backend_of(self)->stream_ordered)
		return host_no_tracking();
	return xdm_track_record(self, block, use_stream);
}

static bool host_supports_block_use_tracking(struct xdm_layer *self)
{
	return host_backend_of(self)->stream_ordered && xdm_track_supported(self);
}

static enum xdm_status host_prepare_block_use(struct xdm_layer *self, struct xdm_block_id id,
					      xdm_stream_id use_stream, enum xdm_access access)
{
	if (!host_backend_of(self)->stream_ordered)
		return host_no_tracking();
	return xdm_track_prepare(self, id, use_stream, access);
}

static enum xdm_status host_finish_block_use(struct xdm_layer *self, struct xdm_block_id id,
					     xdm_stream_id use_stream, enum xdm_access access)
{
	if (!host_backend_of(self)->stream_ordered)
		return host_no_tracking();
	return xdm_track_finish(self, id, use_stream, access);
}

/* ---- sharing with other processes (ipc=true) -------------------------- */

static enum xdm_status host_ipc_export(struct xdm_layer *self, const struct xdm_block *block,
				       struct xdm_ipc_object *out)
{
	struct host_backend *hb = host_backend_of(self);

	if (!hb->shareable)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host backend: its blocks are private "
				     "memory; ipc=true makes them shareable (one memfd each)");
	return host_shared_export(&hb->shared, block, out);
}

/* ---- attributes ------------------------------------------------------ */

static int host_show_u64(char *buf, size_t len, uint64_t value)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", value);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int host_show_bytes_outstanding(struct xdm_layer *self, char *buf, size_t len)
{
	return host_show_u64(buf, len, atomic_load(&host_backend_of(self)->bytes_outstanding));
}

static int host_show_pending_frees(struct xdm_layer *self, char *buf, size_t len)
{
	return host_show_u64(buf, len, atomic_load(&host_backend_of(self)->pending_frees));
}

static int host_show_allocs(struct xdm_layer *self, char *buf, size_t len)
{
	return host_show_u64(buf, len, atomic_load(&host_backend_of(self)->allocs));
}

static int host_show_frees(struct xdm_layer *self, char *buf, size_t len)
{
	return host_show_u64(buf, len, atomic_load(&host_backend_of(self)->frees));
}

static const struct xdm_attr host_backend_attrs[] = {
	{ "bytes_outstanding", 0444, "bytes allocated and not yet returned to the system",
	  host_show_bytes_outstanding, NULL },
	{ "pending_frees", 0444, "frees queued on a stream that has not reached them yet",
	  host_show_pending_frees, NULL },
	{ "allocs", 0444, "allocations since the layer was created", host_show_allocs, NULL },
	{ "frees", 0444, "blocks whose memory was returned to the system", host_show_frees, NULL },
	{ NULL },
};

static const struct xdm_param_spec host_backend_params[] = {
	{ "free", XDM_PARAM_STRING, "stream",
	  "'stream': frees are queued on the block's stream and cross-stream uses are tracked; "
	  "'sync': frees happen at once, after the streams drain, and nothing is tracked" },
	{ "ipc", XDM_PARAM_BOOL, "false",
	  "true: every block is a memfd of its own that other processes can map "
	  "(xdm_ipc_export); slower to allocate" },
	{ NULL },
};

const struct xdm_ops host_backend_ops = {
	XDM_OPS_HEADER("host", XDM_KIND_BACKEND),
	.description = "host memory (aligned_alloc) for the host platform",
	.params = host_backend_params,
	.attrs = host_backend_attrs,
	.init = host_backend_init,
	.fini = host_backend_fini,
	.allocate = host_allocate,
	.deallocate = host_deallocate,
	.bytes_outstanding = host_bytes_outstanding,
	.reap_pending = host_reap_pending,
	.record_block_use = host_record_block_use,
	.supports_block_use_tracking = host_supports_block_use_tracking,
	.prepare_block_use = host_prepare_block_use,
	.finish_block_use = host_finish_block_use,
	.ipc_export = host_ipc_export,
};
