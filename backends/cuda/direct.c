/* SPDX-License-Identifier: MIT */
/*
 * direct.c - cuda_direct: cuMemAlloc and cuMemFree, and nothing else.
 *
 * The genuine raw-driver path: no pool, no caching, no suballocation
 * anywhere below it, so every block is a driver allocation of its own and
 * tools such as Compute Sanitizer see each one exactly.  The caller's stream
 * is kept on the block (the core fills it in), but cuMemFree is not
 * stream-ordered, so this backend cannot honour the core's block-use
 * tracking: its tracking methods stay NULL and the core answers
 * STREAM_MISUSE and "not supported" for it.  Callers of cuda_direct order
 * their streams themselves, as with cudaMalloc/cudaFree.
 */
#include "config.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cuda_priv.h"

struct cuda_direct {
	const struct cuda_platform *p;
	atomic_uint_fast64_t bytes_outstanding;	/* allocated, not yet freed */
	atomic_uint_fast64_t allocs;
	atomic_uint_fast64_t frees;
};

static struct cuda_direct *cuda_direct_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

static enum xdm_status cuda_direct_init(struct xdm_layer *self, const struct xdm_params *params)
{
	struct cuda_platform *p;
	struct cuda_direct *cd;
	enum xdm_status st;

	st = cuda_platform_of(self, &p);
	if (st)
		return st;
	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_direct: no memory for its state");
	cd->p = p;
	atomic_init(&cd->bytes_outstanding, 0);
	atomic_init(&cd->allocs, 0);
	atomic_init(&cd->frees, 0);
	xdm_layer_set_priv(self, cd);
	return XDM_OK;
}

static void cuda_direct_fini(struct xdm_layer *self)
{
	free(cuda_direct_of(self));
	xdm_layer_set_priv(self, NULL);
}

static enum xdm_status cuda_direct_allocate(struct xdm_layer *self, size_t bytes,
					    xdm_stream_id stream, const char *tag,
					    struct xdm_block *out)
{
	struct cuda_direct *cd = cuda_direct_of(self);
	const struct cuda_platform *p = cd->p;
	CUdeviceptr ptr = 0;
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.MemAlloc(&ptr, bytes);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda_direct: cuMemAlloc(%zu bytes) on CUDA device %u",
				 bytes, p->ordinal);

	/* The core filled generation, ordinal, stream and tag; cuMemAlloc
	 * aligns to at least XDM_DEFAULT_ALIGN. */
	out->ptr = (uint64_t)ptr;
	out->bytes = bytes;
	out->align = XDM_DEFAULT_ALIGN;
	out->state = XDM_BLOCK_LIVE;
	atomic_fetch_add_explicit(&cd->bytes_outstanding, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&cd->allocs, 1, memory_order_relaxed);
	return XDM_OK;
}

static enum xdm_status cuda_direct_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct cuda_direct *cd = cuda_direct_of(self);
	const struct cuda_platform *p = cd->p;
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "cuda_direct: deallocate of a NULL block");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.MemFree((CUdeviceptr)block->ptr);
	cuda_ctx_leave(p, restore);
	/* A free the driver refused stays counted: as far as anyone can tell
	 * the memory is still held. */
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda_direct: cuMemFree(0x%" PRIx64 ", %zu bytes)",
				 block->ptr, block->bytes);
	atomic_fetch_sub_explicit(&cd->bytes_outstanding, block->bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&cd->frees, 1, memory_order_relaxed);
	block->state = XDM_BLOCK_FREED;
	return XDM_OK;
}

static size_t cuda_direct_bytes_outstanding(struct xdm_layer *self)
{
	return atomic_load_explicit(&cuda_direct_of(self)->bytes_outstanding,
				    memory_order_relaxed);
}

/* Another process maps the block's allocation by its legacy IPC handle. */
static enum xdm_status cuda_direct_ipc_export(struct xdm_layer *self,
					      const struct xdm_block *block,
					      struct xdm_ipc_object *out)
{
	return cuda_ipc_export_legacy(cuda_direct_of(self)->p, "cuda_direct", block, out);
}

/* ---- attributes ------------------------------------------------------ */

static int cuda_direct_show_bytes_outstanding(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, atomic_load(&cuda_direct_of(self)->bytes_outstanding));
}

static int cuda_direct_show_allocs(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, atomic_load(&cuda_direct_of(self)->allocs));
}

static int cuda_direct_show_frees(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, atomic_load(&cuda_direct_of(self)->frees));
}

static const struct xdm_attr cuda_direct_attrs[] = {
	{ "bytes_outstanding", 0444, "bytes allocated with cuMemAlloc and not yet freed",
	  cuda_direct_show_bytes_outstanding, NULL },
	{ "allocs", 0444, "cuMemAlloc calls that succeeded since the layer was created",
	  cuda_direct_show_allocs, NULL },
	{ "frees", 0444, "cuMemFree calls that succeeded since the layer was created",
	  cuda_direct_show_frees, NULL },
	{ .name = NULL },
};

/*
 * No reap_pending (every free is done when deallocate returns) and no
 * tracking methods: NULL makes the core refuse them with STREAM_MISUSE
 * instead of pretending to order cross-stream uses.
 */
const struct xdm_ops cuda_direct_ops = {
	XDM_OPS_HEADER("cuda_direct", XDM_KIND_BACKEND),
	.description = "device memory straight from cuMemAlloc/cuMemFree; no pool, "
		       "no cross-stream tracking",
	.attrs = cuda_direct_attrs,
	.init = cuda_direct_init,
	.fini = cuda_direct_fini,
	.allocate = cuda_direct_allocate,
	.deallocate = cuda_direct_deallocate,
	.bytes_outstanding = cuda_direct_bytes_outstanding,
	.ipc_export = cuda_direct_ipc_export,
};
