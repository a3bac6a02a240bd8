/* SPDX-License-Identifier: MIT */
/*
 * module.c - the "rmm" backend: a stack's bottom served by an RMM resource
 * (RAPIDS Memory Manager), so that `budget | logging | rmm resource=arena`
 * puts xdm's budget, log and tree over RMM's allocators.
 *
 * C++ inside (resource.cpp builds and calls RMM), the same struct xdm_ops
 * outside.  Blocks are stream-ordered as RMM's are: a block is allocated
 * on its stream and freed on it, and the core's cross-stream tracking
 * orders a free after every use recorded on other streams, as it does for
 * cuda_async.  The tree shows RMM's own counters (its statistics adaptor)
 * and, for resource=pool, the pool's size.  See xdm-rmm(7).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/module.h>

#include "resource.h"

struct rmm_layer {
	struct rmm_backend *rmm;
};

static struct rmm_layer *rmm_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

static const struct xdm_param_spec rmm_params[] = {
	{ "resource", XDM_PARAM_STRING, "cuda_async",
	  "RMM's resource: cuda_async, cuda, pool, arena, binning, or factory (a program's "
	  "own, see factory=)" },
	{ "upstream", XDM_PARAM_STRING, "cuda_async",
	  "what pool, arena and binning draw on: cuda_async or cuda" },
	{ "factory", XDM_PARAM_STRING, NULL,
	  "resource=factory: a symbol of the process, void *fn(int device), returning the "
	  "rmm::mr::device_memory_resource * to use (the program keeps it alive)" },
	{ "initial", XDM_PARAM_SIZE, "0",
	  "resource=pool: the pool's first size (0: it starts empty and grows)" },
	{ "max", XDM_PARAM_SIZE, "0", "resource=pool: the most it holds (0: no bound)" },
	{ "arena", XDM_PARAM_SIZE, "0",
	  "resource=arena: the global arena's size (0: RMM's default, half the free memory)" },
	{ NULL, 0, NULL, NULL },
};

static enum xdm_status rmm_init(struct xdm_layer *self, const struct xdm_params *params)
{
	const struct xdm_device_info *dev = xdm_layer_device(self);
	struct rmm_choice c = {
		.resource = xdm_params_string(params, "resource"),
		.upstream = xdm_params_string(params, "upstream"),
		.factory = xdm_params_string(params, "factory"),
		.initial = xdm_params_size(params, "initial"),
		.max = xdm_params_size(params, "max"),
		.arena = xdm_params_size(params, "arena"),
		.ordinal = xdm_layer_ordinal(self),
	};
	struct rmm_layer *l;
	enum xdm_status st;

	/* Its streams must be CUDA streams: RMM is handed them as they are. */
	if (!dev || strcmp(dev->platform, "cuda") != 0)
		return xdm_error_set(XDM_E_CONFIG, "rmm: needs the cuda platform, not %s",
				     dev ? dev->platform : "(none)");
	/* RMM rounds to 256 bytes itself; its pool refuses other sizes. */
	if ((c.initial | c.max) % XDM_DEFAULT_ALIGN)
		return xdm_error_set(XDM_E_CONFIG, "rmm: initial= and max= must be multiples of "
				     "%u bytes", (unsigned int)XDM_DEFAULT_ALIGN);
	l = calloc(1, sizeof(*l));
	if (!l)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "rmm: no memory for its state");
	st = rmm_backend_new(&c, &l->rmm);
	if (st)
		goto err_free;
	xdm_layer_set_priv(self, l);
	return XDM_OK;

err_free:
	free(l);
	return st;
}

static void rmm_fini(struct xdm_layer *self)
{
	struct rmm_layer *l = rmm_of(self);

	if (!l)
		return;
	xdm_layer_set_priv(self, NULL);
	rmm_backend_free(l->rmm);
	free(l);
}

static enum xdm_status rmm_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				    const char *tag, struct xdm_block *out)
{
	struct rmm_layer *l = rmm_of(self);
	void *s = xdm_layer_stream(self, stream);
	enum xdm_status st;
	uint64_t ptr = 0;

	(void)tag;
	if (!s || stream >= XDM_MAX_STREAMS)
		return xdm_error_set(XDM_E_INVALID, "rmm: stream %u is not in the pool", stream);
	st = rmm_backend_allocate(l->rmm, bytes, s, &ptr);
	if (st)
		return st;
	out->ptr = ptr;
	out->bytes = bytes;
	out->align = XDM_DEFAULT_ALIGN;
	out->state = XDM_BLOCK_LIVE;
	return XDM_OK;
}

static enum xdm_status rmm_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct rmm_layer *l = rmm_of(self);
	void *s;

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "rmm: deallocate of a NULL block");
	s = xdm_layer_stream(self, block->stream);
	if (!s)
		return xdm_error_set(XDM_E_INVALID, "rmm: block 0x%" PRIx64 " names stream %u, "
				     "not in the pool", block->ptr, block->stream);
	/* RMM frees in stream order and cannot fail. */
	rmm_backend_deallocate(l->rmm, block->ptr, block->bytes, s);
	block->state = XDM_BLOCK_RETIRED;
	return XDM_OK;
}

/* RMM's own count: its statistics adaptor sees every block this layer has. */
static size_t rmm_bytes_outstanding(struct xdm_layer *self)
{
	uint64_t bytes = 0;

	rmm_backend_figure(rmm_of(self)->rmm, RMM_BYTES_CURRENT, &bytes);
	return (size_t)bytes;
}

/* ---- the tree: RMM's own figures ------------------------------------------ */

static int show_u64(char *buf, size_t len, uint64_t value)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", value);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int show_figure(struct xdm_layer *self, enum rmm_figure which, char *buf, size_t len)
{
	uint64_t v;

	/* A figure the resource does not have (pool_size of an arena) is not
	 * supported there, as the tree says of such files. */
	if (!rmm_backend_figure(rmm_of(self)->rmm, which, &v))
		return -EOPNOTSUPP;
	return show_u64(buf, len, v);
}

#define FIGURE(name, which)                                                      \
	static int show_##name(struct xdm_layer *self, char *buf, size_t len)   \
	{                                                                        \
		return show_figure(self, which, buf, len);                       \
	}

FIGURE(bytes_current, RMM_BYTES_CURRENT)
FIGURE(bytes_peak, RMM_BYTES_PEAK)
FIGURE(bytes_total, RMM_BYTES_TOTAL)
FIGURE(allocations_current, RMM_ALLOCATIONS_CURRENT)
FIGURE(allocations_peak, RMM_ALLOCATIONS_PEAK)
FIGURE(allocations_total, RMM_ALLOCATIONS_TOTAL)
FIGURE(pool_size, RMM_POOL_SIZE)

static int show_text(char *buf, size_t len, const char *text)
{
	int n = snprintf(buf, len, "%s\n", text);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int show_resource(struct xdm_layer *self, char *buf, size_t len)
{
	return show_text(buf, len, rmm_backend_describe(rmm_of(self)->rmm));
}

static int show_version(struct xdm_layer *self, char *buf, size_t len)
{
	(void)self;
	return show_text(buf, len, rmm_backend_version());
}

static const struct xdm_attr rmm_attrs[] = {
	{ "resource", 0444, "the RMM resource serving the stack, as \"pool over cuda_async\"",
	  show_resource, NULL },
	{ "rmm_version", 0444, "the RMM release the module was built against", show_version,
	  NULL },
	{ "bytes_current", 0444, "bytes RMM has handed out and not had back (RMM's "
	  "statistics adaptor)", show_bytes_current, NULL },
	{ "bytes_peak", 0444, "the most bytes out at once, by RMM's count", show_bytes_peak, NULL },
	{ "bytes_total", 0444, "bytes RMM has handed out in all", show_bytes_total, NULL },
	{ "allocations_current", 0444, "blocks RMM has out now", show_allocations_current, NULL },
	{ "allocations_peak", 0444, "the most blocks out at once", show_allocations_peak, NULL },
	{ "allocations_total", 0444, "blocks RMM has handed out in all",
	  show_allocations_total, NULL },
	{ "pool_size", 0444, "resource=pool: bytes the pool holds from its upstream",
	  show_pool_size, NULL },
	{ NULL, 0, NULL, NULL, NULL },
};

static const struct xdm_ops rmm_ops = {
	XDM_OPS_HEADER("rmm", XDM_KIND_BACKEND),
	.description = "an RMM resource (RAPIDS Memory Manager: cuda_async, pool, arena, binning, "
		       "or a program's own) at the bottom of the stack",
	.params = rmm_params,
	.attrs = rmm_attrs,
	.attr_group = "rmm",
	.init = rmm_init,
	.fini = rmm_fini,
	.allocate = rmm_allocate,
	.deallocate = rmm_deallocate,
	.bytes_outstanding = rmm_bytes_outstanding,
	.record_block_use = xdm_track_record,
	.supports_block_use_tracking = xdm_track_supported,
	.prepare_block_use = xdm_track_prepare,
	.finish_block_use = xdm_track_finish,
};

XDM_MODULE(&rmm_ops)
