/* SPDX-License-Identifier: MIT */
/*
 * module.c - the pool backend: its parameters, its life, and the two calls
 * of the hot path.
 *
 * An allocation takes the lock of its stream's arena only: a pop from a
 * size-class cache, or a best-fit take from the bins; the upstream is
 * called only when the arena has no room (chunk.c).  A free goes back to
 * the arena of the block's stream, where the next allocation on that stream
 * may reuse it at once: stream order puts that reuse after all work queued
 * on the stream before the free, and the core has made the stream wait for
 * every recorded use on other streams before it calls deallocate.  That is
 * also why the tracking methods point at the core's.
 *
 * By the ABI's kinds the pool is an adaptor, because a stack puts it over
 * an upstream; it lives among the backends because it is a memory resource
 * of its own, not a decorator of another's blocks.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

/* A request above this is refused before any arithmetic can overflow. */
#define POOL_MAX_REQUEST (1ull << 50)

static const struct xdm_param_spec pool_params[] = {
	{ "chunk", XDM_PARAM_SIZE, NULL,
	  "bytes of each chunk the pool takes from its upstream (a larger request gets a "
	  "chunk of its own size); default 32M, or one granule over a virtual-memory "
	  "upstream" },
	{ "initial", XDM_PARAM_SIZE, "0",
	  "bytes of the first chunk, when more than chunk" },
	{ "growth", XDM_PARAM_STRING, "fixed",
	  "'fixed': every chunk is chunk bytes; 'double': each is twice the last, up to "
	  "chunk_max" },
	{ "chunk_max", XDM_PARAM_SIZE, "1G", "the largest chunk growth=double makes" },
	{ "max", XDM_PARAM_SIZE, "0",
	  "bytes the pool may reserve from its upstream in all; 0: no bound but the "
	  "upstream's" },
	{ "small_max", XDM_PARAM_SIZE, "64K",
	  "blocks up to this size are rounded to a size class and cached per class when "
	  "freed (256 to 1M)" },
	{ "split", XDM_PARAM_SIZE, NULL,
	  "over a virtual-memory upstream, blocks up to this size are carved from chunks of "
	  "their own, apart from larger ones; default small_max there, 0 (none) otherwise" },
	{ "release", XDM_PARAM_STRING, "trim",
	  "over a virtual-memory upstream, when whole free granules go back: 'trim' (at "
	  "trims only: the trimmer's, a write to trim, a reap, a refused growth), 'grow' "
	  "(also before the pool grows), 'free' (also on the free that empties them)" },
	{ "trim_ms", XDM_PARAM_UINT, NULL,
	  "milliseconds between trims by a thread of the pool, which give idle memory back "
	  "without any call; 0: no thread; default 1000 over a virtual-memory upstream, 0 "
	  "otherwise" },
	{ "keep", XDM_PARAM_BOOL, "false",
	  "true: chunks go back to the upstream only when the pool is destroyed or trim is "
	  "written, never by a reap, a refused growth or a trimmer (memory a captured CUDA "
	  "graph replays into must stay where the capture found it)" },
	{ "tcache", XDM_PARAM_SIZE, NULL,
	  "bytes of freed blocks each thread keeps per stream, in front of the arenas, so that "
	  "a pair it serves takes no lock; blocks up to this size are kept; 0: no thread "
	  "caches; default 16M, one granule over a virtual-memory upstream, 0 with release=free" },
	{ NULL, 0, NULL, NULL },
};

/* What release= names; -1: none of them. */
static int release_of(const char *v)
{
	static const char *const names[] = {
		[POOL_RELEASE_GROW] = "grow",
		[POOL_RELEASE_FREE] = "free",
		[POOL_RELEASE_TRIM] = "trim",
	};

	for (int i = 0; v && i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(v, names[i]))
			return i;
	return -1;
}

static enum xdm_status pool_configure(struct pool_params *pp, const struct xdm_params *params,
				      uint64_t granule)
{
	const char *growth = xdm_params_string(params, "growth");
	const char *release = xdm_params_string(params, "release");
	int rel = release_of(release);

	if (xdm_params_has(params, "chunk"))
		pp->chunk = pool_round(xdm_params_size(params, "chunk"));
	else
		pp->chunk = granule ? granule : 32ull << 20;
	if (rel < 0)
		return xdm_error_set(XDM_E_CONFIG, "pool: release must be 'grow', 'free' or "
				     "'trim', not '%s'", release ? release : "");
	pp->release = (enum pool_release)rel;
	pp->keep = xdm_params_bool(params, "keep");
	if (xdm_params_has(params, "trim_ms"))
		pp->trim_ms = xdm_params_uint(params, "trim_ms");
	else
		pp->trim_ms = granule && !pp->keep ? 1000 : 0;
	if (pp->keep && (pp->trim_ms || pp->release != POOL_RELEASE_TRIM))
		return xdm_error_set(XDM_E_CONFIG, "pool: keep=true gives nothing back by itself: "
				     "it takes neither trim_ms nor release=grow|free");
	pp->initial = pool_round(xdm_params_size(params, "initial"));
	pp->chunk_max = pool_round(xdm_params_size(params, "chunk_max"));
	pp->max = xdm_params_size(params, "max");
	pp->small_max = xdm_params_size(params, "small_max");
	if (!growth || (strcmp(growth, "fixed") && strcmp(growth, "double")))
		return xdm_error_set(XDM_E_CONFIG, "pool: growth must be 'fixed' or 'double', "
				     "not '%s'", growth ? growth : "");
	pp->doubling = !strcmp(growth, "double");
	if (xdm_params_has(params, "split"))
		pp->split = pool_round(xdm_params_size(params, "split"));
	else
		pp->split = granule ? pp->small_max : 0;
	if (pp->split && !granule)
		return xdm_error_set(XDM_E_CONFIG, "pool: split needs a virtual-memory upstream "
				     "(one with a granularity, e.g. cuda_vmm)");
	/*
	 * release=free promises granules back on the free: a cache would keep
	 * them.  Over a granular upstream the trimmer promises idle memory back
	 * within a period, and it cannot reach into an idle thread's cache:
	 * there a thread keeps at most a granule per stream.
	 */
	if (xdm_params_has(params, "tcache"))
		pp->tcache = xdm_params_size(params, "tcache");
	else if (pp->release == POOL_RELEASE_FREE)
		pp->tcache = 0;
	else
		pp->tcache = granule ? granule : 16ull << 20;
	if (pp->tcache > (1ull << 30))
		return xdm_error_set(XDM_E_CONFIG, "pool: tcache must be at most 1G, not %" PRIu64,
				     pp->tcache);
	if (!pp->chunk)
		return xdm_error_set(XDM_E_CONFIG, "pool: chunk must be at least 1 byte");
	if (pp->chunk_max < pp->chunk)
		pp->chunk_max = pp->chunk;
	if (pp->small_max < POOL_GRAIN || pp->small_max > (1u << 20))
		return xdm_error_set(XDM_E_CONFIG, "pool: small_max must be 256 to 1M, not %" PRIu64,
				     pp->small_max);
	return XDM_OK;
}

static enum xdm_status pool_init(struct xdm_layer *self, const struct xdm_params *params)
{
	struct pool *p;
	enum xdm_status st;

	if (!xdm_layer_upstream(self))
		return xdm_error_set(XDM_E_CONFIG, "pool: needs an upstream below it, e.g. "
				     "'pool | cuda_async'");
	p = calloc(1, sizeof(*p));
	if (!p)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no memory for its state");
	p->self = self;
	p->serial = xdm_layer_serial(self);
	p->granule = xdm_up_granularity(xdm_layer_upstream(self));
	if (p->granule && (p->granule & (p->granule - 1) || p->granule < POOL_GRAIN)) {
		st = xdm_error_set(XDM_E_NOT_SUPPORTED, "pool: the upstream's granularity %" PRIu64
				   " is not a power of two of at least %" PRIu64, p->granule,
				   POOL_GRAIN);
		goto err_free;
	}
	st = pool_configure(&p->params, params, p->granule);
	if (st)
		goto err_free;
	st = pool_classes_init(p);
	if (st)
		goto err_free;
	if (pthread_mutex_init(&p->grow_lock, NULL)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: cannot make its lock");
		goto err_classes;
	}
	p->next_chunk = p->params.chunk;
	p->split = p->params.split;
	st = pool_tc_init(p);
	if (st)
		goto err_mutex;
	xdm_layer_set_priv(self, p);
	st = pool_trimmer_start(p);
	if (st)
		goto err_tc;
	return XDM_OK;

err_tc:
	pool_tc_fini(p);
err_mutex:
	xdm_layer_set_priv(self, NULL);
	pthread_mutex_destroy(&p->grow_lock);
err_classes:
	pool_classes_fini(p);
err_free:
	free(p);
	return st;
}

static void pool_fini(struct xdm_layer *self)
{
	struct pool *p = pool_of(self);

	if (!p)
		return;
	pool_trimmer_stop(p);
	pool_tc_fini(p);
	pool_release_all(p);
	for (unsigned int i = 0; i < POOL_ARENAS; i++)
		pool_arena_free(pool_arena_at(p, i));
	pthread_mutex_destroy(&p->grow_lock);
	pool_classes_fini(p);
	free(p);
	xdm_layer_set_priv(self, NULL);
}

/*
 * A block from the arena: a size the thread's cache does not keep, or whose
 * list was empty.  Out of line, so that a cache hit saves no registers.
 */
static __attribute__((noinline)) enum xdm_status pool_allocate_arena(struct pool *p,
								   unsigned int i,
								   uint64_t size,
								   uint64_t *ptr)
{
	struct pool_arena *a;
	struct pool_seg *s;
	enum xdm_status st;
	bool no_memory, drained = false;

	a = pool_arena_at(p, i);
	if (!a && !(a = pool_arena_get(p, i)))
		return xdm_last_error()->code;
	for (;;) {
		pthread_spin_lock(&a->lock);
		s = pool_arena_take(p, a, size, &no_memory);
		if (s)
			break;
		pthread_spin_unlock(&a->lock);
		if (no_memory)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no host memory to keep "
					     "track of a block of %" PRIu64 " bytes", size);
		/* What this thread keeps may fit once merged: before growing. */
		if (!drained && pool_tc_takes(p, size)) {
			pool_tc_flush_arena(p, i);
			drained = true;
			continue;
		}
		st = pool_refill(p, a, size);
		if (st)
			return st;
	}
	pthread_spin_unlock(&a->lock);
	*ptr = s->ptr;
	return XDM_OK;
}

static enum xdm_status pool_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				     const char *tag, struct xdm_block *out)
{
	struct pool *p = pool_of(self);
	enum xdm_status st;
	unsigned int i;
	uint64_t size, ptr;

	(void)tag;
	if (bytes == 0 || bytes > POOL_MAX_REQUEST)
		return xdm_error_set(XDM_E_INVALID, "pool: cannot allocate %zu bytes", bytes);
	if (stream >= XDM_MAX_STREAMS)
		return xdm_error_set(XDM_E_INVALID, "pool: stream %u is not in the pool", stream);
	size = pool_block_size(p, bytes);
	i = pool_arena_index(p, stream, size);
	if (!pool_tc_takes(p, size) || !(ptr = pool_tc_pop(p, i, size))) {
		st = pool_allocate_arena(p, i, size, &ptr);
		if (st)
			return st;
	}
	out->ptr = ptr;
	out->bytes = size;
	out->align = XDM_DEFAULT_ALIGN;
	out->state = XDM_BLOCK_LIVE;
	return XDM_OK;
}

/*
 * A block at exactly ptr, out of the free memory of the arena that serves
 * size on stream: how a framework puts a pool back as it was at a
 * checkpoint (torch's CUDA graph trees), into chunks the pool still holds
 * (keep=true holds them all).  This thread's cache is merged first, so a
 * block it freed just before is free again; blocks other threads cache
 * stay taken.  The pool never grows for it: memory it does not hold is
 * OUT_OF_MEMORY, as a place that is taken.
 */
static enum xdm_status pool_allocate_at(struct xdm_layer *self, uint64_t ptr, size_t bytes,
					xdm_stream_id stream, const char *tag,
					struct xdm_block *out)
{
	struct pool *p = pool_of(self);
	struct pool_arena *a;
	struct pool_seg *s;
	uint64_t size;
	unsigned int i;
	bool no_memory;

	(void)tag;
	if (bytes == 0 || bytes > POOL_MAX_REQUEST || (ptr & (POOL_GRAIN - 1)))
		return xdm_error_set(XDM_E_INVALID, "pool: cannot allocate %zu bytes at 0x%" PRIx64,
				     bytes, ptr);
	if (stream >= XDM_MAX_STREAMS)
		return xdm_error_set(XDM_E_INVALID, "pool: stream %u is not in the pool", stream);
	size = pool_block_size(p, bytes);
	i = pool_arena_index(p, stream, size);
	a = pool_arena_at(p, i);
	if (!a)
		goto taken;
	if (pool_tc_takes(p, size))
		pool_tc_flush_arena(p, i);
	pthread_spin_lock(&a->lock);
	s = pool_arena_take_at(a, ptr, size, &no_memory);
	pthread_spin_unlock(&a->lock);
	if (!s) {
		if (no_memory)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no host memory to keep "
					     "track of a block of %" PRIu64 " bytes", size);
		goto taken;
	}
	out->ptr = ptr;
	out->bytes = size;
	out->align = XDM_DEFAULT_ALIGN;
	out->state = XDM_BLOCK_LIVE;
	return XDM_OK;

taken:
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: 0x%" PRIx64 ", %" PRIu64 " bytes, is "
			     "not free memory of the pool on stream %u", ptr, size, stream);
}

static __attribute__((noinline, cold)) enum xdm_status foreign_block(const struct xdm_block *b)
{
	return xdm_error_set(XDM_E_INVALID, "pool: 0x%" PRIx64 " is not a block this pool handed "
			     "out on stream %u", b->ptr, b->stream);
}

/* A block back to its arena (out of line, as pool_allocate_arena). */
static __attribute__((noinline)) enum xdm_status pool_deallocate_arena(struct pool *p,
								     unsigned int i,
								     struct xdm_block *block)
{
	struct pool_range r;
	struct pool_arena *a;
	struct pool_seg *s, *m;
	size_t cut = 0;

	a = pool_arena_at(p, i);
	if (!a)
		goto foreign;
	pthread_spin_lock(&a->lock);
	s = pool_arena_unhash(a, block->ptr);
	if (s) {
		m = pool_arena_give(p, a, s, false);
		/* release=free: the granules this free emptied go back now. */
		if (m && p->params.release == POOL_RELEASE_FREE && p->granule &&
		    m->size >= p->granule)
			cut = pool_span_cut_seg(p, a, m, &r);
	}
	pthread_spin_unlock(&a->lock);
	if (!s)
		goto foreign;
	if (cut)
		pool_give_ranges(p, &r, 1, a->stream);
	block->state = XDM_BLOCK_RETIRED;
	return XDM_OK;

foreign:
	return foreign_block(block);
}

static enum xdm_status pool_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct pool *p = pool_of(self);
	unsigned int i;

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "pool: deallocate of a NULL block");
	if (block->stream >= XDM_MAX_STREAMS)
		return foreign_block(block);
	i = pool_arena_index(p, block->stream, block->bytes);
	/* The core hands back only blocks it has live: no lookup before caching. */
	if (pool_tc_takes(p, block->bytes) &&
	    pool_tc_push(p, i, block->ptr, block->bytes)) {
		block->state = XDM_BLOCK_RETIRED;
		return XDM_OK;
	}
	return pool_deallocate_arena(p, i, block);
}

static size_t pool_bytes_outstanding(struct xdm_layer *self)
{
	struct pool *p = pool_of(self);
	uint64_t sum = 0, cached;

	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);

		if (a)
			sum += atomic_load_explicit(&a->in_use, memory_order_relaxed);
	}
	/* What threads cache is used in their arenas' eyes, not the caller's. */
	cached = pool_tc_bytes(p, -1);
	return sum > cached ? sum - cached : 0;
}

/*
 * Reaping gives the upstream every wholly free chunk, then reaps it.  Over
 * a virtual-memory upstream the trimmer gives memory back, to the device
 * itself; a reap only finishes the releases already queued, so that a
 * program that reaps between steps does not unmap and map again its whole
 * working set each time.
 */
static enum xdm_status pool_reap_pending(struct xdm_layer *self)
{
	struct pool *p = pool_of(self);

	if (!p->granule && !p->params.keep)
		pool_trim(p);
	return xdm_up_reap_pending(xdm_layer_upstream(self));
}

const struct xdm_ops pool_ops = {
	XDM_OPS_HEADER("pool", XDM_KIND_ADAPTOR),
	.description = "stream-ordered suballocator over any upstream: per-stream arenas, "
		       "size classes and best fit, chunks moved between streams behind events",
	.params = pool_params,
	.attrs = pool_attrs,
	.attr_group = "pool",
	.init = pool_init,
	.fini = pool_fini,
	.allocate = pool_allocate,
	.deallocate = pool_deallocate,
	.allocate_at = pool_allocate_at,
	.bytes_outstanding = pool_bytes_outstanding,
	.reap_pending = pool_reap_pending,
	.record_block_use = xdm_track_record,
	.supports_block_use_tracking = xdm_track_supported,
	.prepare_block_use = xdm_track_prepare,
	.finish_block_use = xdm_track_finish,
	.chunks = pool_chunks,
};

XDM_MODULE(&pool_ops)
