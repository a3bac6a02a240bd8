/* SPDX-License-Identifier: MIT */
/*
 * async.c - cuda_async: the driver's stream-ordered allocator.
 *
 * A block is allocated with cuMemAllocFromPoolAsync on its allocation
 * stream and freed with cuMemFreeAsync on that same stream.  The core
 * queues a wait on that stream for every recorded cross-stream use just
 * before it calls deallocate, so the free runs only after all work that
 * may touch the block: that is what lets this backend point its tracking
 * methods at the core's.
 *
 * Accounting without locks.  Per stream (the allocation stream, which is
 * also the free's stream) three totals only grow:
 *   allocated - bytes handed out on the stream,
 *   queued    - bytes whose cuMemFreeAsync was queued on it,
 *   done      - bytes whose free the stream is known to have reached.
 * Outstanding is allocated - done, pending is queued - done.  allocate and
 * deallocate each add to one total of their own stream: one atomic per
 * operation, and threads on different streams touch different cache lines.
 * reap_pending reads queued before it synchronizes the stream, then moves
 * done up to that value (never down): a free queued during the synchronize
 * stays pending for the next reap, and two reaps of one stream at once
 * cannot count the same bytes twice.  A stream being captured into a graph
 * is passed over: see cuda_async_reap_pending().
 *
 * Both stream-ordered calls run without the context rule's check on the
 * runtime's own streams: the driver needs a current context for them only
 * with a special handle (their CUDA_ERROR_INVALID_CONTEXT case), and the
 * check would be a measurable share of the allocation's cost.  A
 * framework's legacy default stream (CU_STREAM_LEGACY in the pool, see
 * cuda_stream_resolve()) is such a handle, and PyTorch allocates from
 * autograd threads that have no context: those calls take the rule.
 *
 * With peers=, other devices are granted read and write on the pool once,
 * at init (cuMemPoolSetAccess): the grant is the pool's, so it covers every
 * allocation, past and future, and costs the allocation path nothing.
 * peers= is only ever granted on a pool of the layer's own; see
 * cuda_async_read_params().  A write of the `peers` attribute grants more
 * devices at run time, on whichever pool the layer has: that is the
 * process asking, for a copy it is about to make (PyTorch's
 * enablePeerAccess), and on the default pool it is the very grant
 * PyTorch's own cudaMallocAsync allocator would make.  Grants are never
 * taken back: memory a peer may be using stays reachable.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_priv.h"

struct cuda_async_stream {
	alignas(64) atomic_uint_fast64_t allocated;
	atomic_uint_fast64_t queued;
	atomic_uint_fast64_t done;
};

struct cuda_async {
	const struct cuda_platform *p;
	CUmemoryPool pool;
	bool own_pool;				/* created here, destroyed in fini */
	bool exportable;			/* ipc=true: the pool shares with other processes */
	uint64_t pool_id;			/* ...named so in its handles */
	/*
	 * The peers granted, and those `all` left out: grown by writes of
	 * `peers`, which grant_lock orders (the allocation path never takes
	 * it: the pool's grant needs nothing of an allocation).  The
	 * attributes read the copies, which are stored once a grant is made.
	 */
	pthread_mutex_t grant_lock;
	struct cuda_peers peers;
	atomic_uint_fast64_t peers_shown;
	atomic_uint_fast64_t skipped_shown;
	struct cuda_async_stream streams[XDM_MAX_STREAMS];
};

static struct cuda_async *cuda_async_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/* ---- the pool -------------------------------------------------------- */

static enum xdm_status cuda_async_check_support(const struct cuda_platform *p)
{
	enum xdm_status st;
	int supported = 0;

	st = CUDA_DEVICE_ATTRIBUTE(p, "cuda_async", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
				   &supported);
	if (st)
		return st;
	if (!supported)
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "cuda_async: CUDA device %u (%s) has no stream-ordered memory "
				     "pools; use cuda_direct", p->ordinal, p->name);
	return XDM_OK;
}

/* ipc=true: the device must be able to export a pool as a POSIX descriptor. */
static enum xdm_status cuda_async_check_exportable(const struct cuda_platform *p)
{
	enum xdm_status st;
	int types = 0;

	st = CUDA_DEVICE_ATTRIBUTE(p, "cuda_async", CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
				   &types);
	if (st)
		return st;
	if (!(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_async: ipc=true, but CUDA device "
				     "%u (%s) cannot export a memory pool as a POSIX descriptor",
				     p->ordinal, p->name);
	return XDM_OK;
}

static enum xdm_status cuda_async_own_pool(struct cuda_async *ca, bool exportable)
{
	const struct cuda_platform *p = ca->p;
	CUmemPoolProps props;
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	/* Every field the driver does not read must be zero. */
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.handleTypes = exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR :
			    CU_MEM_HANDLE_TYPE_NONE;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = (int)p->dev;
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.MemPoolCreate(&ca->pool, &props);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda_async: cuMemPoolCreate(pinned, device %u)",
				 p->ordinal);
	ca->own_pool = true;
	ca->exportable = exportable;
	if (exportable)
		ca->pool_id = cuda_ipc_new_pool_id();
	return XDM_OK;
}

static enum xdm_status cuda_async_set_int(const struct cuda_async *ca, CUmemPool_attribute attr,
					  const char *name, bool value)
{
	int v = value;
	CUresult rc = ca->p->drv.MemPoolSetAttribute(ca->pool, attr, &v);

	if (rc != CUDA_SUCCESS)
		return cuda_fail(&ca->p->drv, rc, "cuda_async: cuMemPoolSetAttribute(%s, %d)", name, v);
	return XDM_OK;
}

/* Apply the layer's parameters to the pool. */
static enum xdm_status cuda_async_configure(const struct cuda_async *ca,
					    const struct xdm_params *params)
{
	cuuint64_t threshold = xdm_params_size(params, "release_threshold");
	enum xdm_status st;
	CUresult rc;

	rc = ca->p->drv.MemPoolSetAttribute(ca->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
					    &threshold);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&ca->p->drv, rc, "cuda_async: cuMemPoolSetAttribute("
				 "CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, %" PRIu64 ")",
				 (uint64_t)threshold);
	st = cuda_async_set_int(ca, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
				"CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES",
				xdm_params_bool(params, "reuse_follow_event_dependencies"));
	if (st)
		return st;
	st = cuda_async_set_int(ca, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
				"CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC",
				xdm_params_bool(params, "reuse_allow_opportunistic"));
	if (st)
		return st;
	return cuda_async_set_int(ca, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
				  "CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES",
				  xdm_params_bool(params, "reuse_allow_internal_dependencies"));
}

/*
 * pool= and peers=, checked before anything else.  A grant to peers needs
 * a pool of the layer's own: cuMemPoolSetAccess on the device's default
 * pool would hand its memory to other devices for every cudaMallocAsync
 * user in the process, and the grant would outlive the runtime.  So
 * peers= other than none makes the pool own where pool= is not given, and
 * is refused beside an explicit pool=default.
 */
static enum xdm_status cuda_async_read_params(const struct xdm_params *params, bool *own,
					      bool *exportable, struct cuda_peers_request *peers)
{
	const char *pool = xdm_params_string(params, "pool");
	const char *text = xdm_params_string(params, "peers");
	enum xdm_status st;

	if (!pool || (strcmp(pool, "default") != 0 && strcmp(pool, "own") != 0))
		return xdm_error_set(XDM_E_CONFIG, "cuda_async: pool must be 'default' or 'own', "
				     "not '%s'", pool ? pool : "");
	st = cuda_peers_parse("cuda_async", text, peers);
	if (st)
		return st;
	*own = !strcmp(pool, "own");
	/* ipc=true as peers=: only a pool of the layer's own is made exportable. */
	*exportable = xdm_params_bool(params, "ipc");
	if (*exportable && !*own) {
		if (xdm_params_has(params, "pool"))
			return xdm_error_set(XDM_E_CONFIG, "cuda_async: ipc=true needs a pool of "
					     "the layer's own, not pool=default: the device's "
					     "default pool cannot be made exportable; write "
					     "pool=own, or leave pool= out");
		*own = true;
	}
	if (peers->kind == CUDA_PEERS_NONE || *own)
		return XDM_OK;
	if (xdm_params_has(params, "pool"))
		return xdm_error_set(XDM_E_CONFIG, "cuda_async: peers=%s needs a pool of the "
				     "layer's own, not pool=default: a grant on the device's "
				     "default pool would reach every cudaMallocAsync user in the "
				     "process; write pool=own, or leave pool= out", text);
	*own = true;
	return XDM_OK;
}

/* Let g's peers read and write every allocation of the pool, past and future. */
static enum xdm_status cuda_async_grant(const struct cuda_async *ca,
					const struct cuda_peer_grant *g)
{
	const struct cuda_platform *p = ca->p;
	char who[4 * CUDA_PEERS_MAX] = "";
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!g->n)
		return XDM_OK;
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	/* Only the peers: the owner's own access is the pool's from birth. */
	rc = p->drv.MemPoolSetAccess(ca->pool, g->access, g->n);
	cuda_ctx_leave(p, restore);
	if (rc == CUDA_SUCCESS)
		return XDM_OK;
	if (cuda_peers_show(g->set.granted, who, sizeof(who)) > 0)
		who[strcspn(who, "\n")] = '\0';
	return cuda_fail(&p->drv, rc, "cuda_async: cuMemPoolSetAccess(the pool of CUDA device %u, "
			 "read and write for device%s %s)", p->ordinal,
			 g->n == 1 ? "" : "s", who);
}

static void cuda_async_set_peers(struct cuda_async *ca, const struct cuda_peers *set)
{
	ca->peers = *set;
	atomic_store_explicit(&ca->peers_shown, set->granted, memory_order_relaxed);
	atomic_store_explicit(&ca->skipped_shown, set->skipped, memory_order_relaxed);
}

static enum xdm_status cuda_async_init(struct xdm_layer *self, const struct xdm_params *params)
{
	struct cuda_peers_request peers;
	struct cuda_peer_grant grant;
	struct cuda_platform *p;
	struct cuda_async *ca;
	bool own = false, exportable = false;
	enum xdm_status st;
	CUresult rc;

	st = cuda_async_read_params(params, &own, &exportable, &peers);
	if (st)
		return st;
	st = cuda_platform_of(self, &p);
	if (st)
		return st;
	st = cuda_async_check_support(p);
	if (st)
		return st;
	if (exportable) {
		st = cuda_async_check_exportable(p);
		if (st)
			return st;
	}

	/* The per-stream counters are cache-line aligned: so is the state. */
	ca = aligned_alloc(alignof(struct cuda_async), sizeof(*ca));
	if (!ca)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_async: no memory for its state");
	memset(ca, 0, sizeof(*ca));
	ca->p = p;
	for (size_t i = 0; i < XDM_MAX_STREAMS; i++) {
		atomic_init(&ca->streams[i].allocated, 0);
		atomic_init(&ca->streams[i].queued, 0);
		atomic_init(&ca->streams[i].done, 0);
	}
	atomic_init(&ca->peers_shown, 0);
	atomic_init(&ca->skipped_shown, 0);
	st = cuda_peers_grant_init(p, "cuda_async", &peers, &grant);
	if (st)
		goto err_free;
	if (pthread_mutex_init(&ca->grant_lock, NULL)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_async: cannot create its mutex");
		goto err_free;
	}

	if (own) {
		st = cuda_async_own_pool(ca, exportable);
	} else {
		rc = p->drv.DeviceGetDefaultMemPool(&ca->pool, p->dev);
		st = rc == CUDA_SUCCESS ? XDM_OK :
		     cuda_fail(&p->drv, rc, "cuda_async: cuDeviceGetDefaultMemPool(device %u)",
			       p->ordinal);
	}
	if (st)
		goto err_mutex;
	st = cuda_async_configure(ca, params);
	if (st)
		goto err_pool;
	st = cuda_async_grant(ca, &grant);
	if (st)
		goto err_pool;
	cuda_async_set_peers(ca, &grant.set);
	xdm_layer_set_priv(self, ca);
	return XDM_OK;

err_pool:
	if (ca->own_pool)
		p->drv.MemPoolDestroy(ca->pool);
err_mutex:
	pthread_mutex_destroy(&ca->grant_lock);
err_free:
	free(ca);
	return st;
}

static void cuda_async_fini(struct xdm_layer *self)
{
	struct cuda_async *ca = cuda_async_of(self);

	if (!ca)
		return;
	/*
	 * The core synchronized every stream before this, so the queued frees
	 * have run.  A pool destroyed with allocations still out (blocks the
	 * caller never freed) is released by the driver once they are gone.
	 */
	if (ca->own_pool)
		ca->p->drv.MemPoolDestroy(ca->pool);
	pthread_mutex_destroy(&ca->grant_lock);
	free(ca);
	xdm_layer_set_priv(self, NULL);
}

/* ---- allocation ------------------------------------------------------ */

/* The special handles (NULL, legacy, per-thread) mean "of the current
 * context"; the pool holds only CU_STREAM_LEGACY among them. */
static bool cuda_async_needs_ctx(CUstream s)
{
	return (uintptr_t)s <= (uintptr_t)CU_STREAM_PER_THREAD;
}

static enum xdm_status cuda_async_allocate(struct xdm_layer *self, size_t bytes,
					   xdm_stream_id stream, const char *tag,
					   struct xdm_block *out)
{
	struct cuda_async *ca = cuda_async_of(self);
	CUstream s = xdm_layer_stream(self, stream);
	CUdeviceptr ptr = 0;
	CUresult rc;

	if (!s || stream >= XDM_MAX_STREAMS)
		return xdm_error_set(XDM_E_INVALID, "cuda_async: stream %u is not in the pool",
				     stream);
	if (cuda_async_needs_ctx(s)) {
		CUcontext restore;
		enum xdm_status st = cuda_ctx_enter(ca->p, &restore);

		if (st)
			return st;
		rc = ca->p->drv.MemAllocFromPoolAsync(&ptr, bytes, ca->pool, s);
		cuda_ctx_leave(ca->p, restore);
	} else {
		rc = ca->p->drv.MemAllocFromPoolAsync(&ptr, bytes, ca->pool, s);
	}
	if (rc != CUDA_SUCCESS) {
		/*
		 * Seen on the H200: a refused request for more than the card
		 * leaves the pool holding nearly all of the device's memory
		 * (free memory fell from 149 GB to 30 MB).  Give back what no
		 * block uses, so one refusal does not starve every other user
		 * of the GPU.
		 */
		if (rc == CUDA_ERROR_OUT_OF_MEMORY)
			ca->p->drv.MemPoolTrimTo(ca->pool, 0);
		return cuda_fail(&ca->p->drv, rc, "cuda_async: cuMemAllocFromPoolAsync(%zu bytes, "
				 "stream %u) on CUDA device %u", bytes, stream, ca->p->ordinal);
	}

	out->ptr = (uint64_t)ptr;
	out->bytes = bytes;
	out->align = XDM_DEFAULT_ALIGN;
	out->state = XDM_BLOCK_LIVE;
	atomic_fetch_add_explicit(&ca->streams[stream].allocated, bytes, memory_order_relaxed);
	return XDM_OK;
}

static enum xdm_status cuda_async_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct cuda_async *ca = cuda_async_of(self);
	CUstream s;
	CUresult rc;

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "cuda_async: deallocate of a NULL block");
	s = xdm_layer_stream(self, block->stream);
	if (!s || block->stream >= XDM_MAX_STREAMS)
		return xdm_error_set(XDM_E_INVALID, "cuda_async: block 0x%" PRIx64 " names stream "
				     "%u, which is not in the pool", block->ptr, block->stream);
	/* Exactly the block's stream: the core queued the uses' waits there. */
	if (cuda_async_needs_ctx(s)) {
		CUcontext restore;
		enum xdm_status st = cuda_ctx_enter(ca->p, &restore);

		if (st)
			return st;
		rc = ca->p->drv.MemFreeAsync((CUdeviceptr)block->ptr, s);
		cuda_ctx_leave(ca->p, restore);
	} else {
		rc = ca->p->drv.MemFreeAsync((CUdeviceptr)block->ptr, s);
	}
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&ca->p->drv, rc, "cuda_async: cuMemFreeAsync(0x%" PRIx64 ", %zu "
				 "bytes, stream %u)", block->ptr, block->bytes, block->stream);
	atomic_fetch_add_explicit(&ca->streams[block->stream].queued, block->bytes,
				  memory_order_release);
	block->state = XDM_BLOCK_RETIRED;
	return XDM_OK;
}

/* Sum over the streams in use of (total - done). */
static uint64_t cuda_async_sum(struct cuda_async *ca, uint32_t nstreams, bool pending_only)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < nstreams && i < XDM_MAX_STREAMS; i++) {
		struct cuda_async_stream *cs = &ca->streams[i];
		/* done first: it never passes what it was read from, so the
		 * totals read after it are at least as large. */
		uint64_t done = atomic_load_explicit(&cs->done, memory_order_acquire);
		uint64_t total = pending_only ?
				 atomic_load_explicit(&cs->queued, memory_order_acquire) :
				 atomic_load_explicit(&cs->allocated, memory_order_relaxed);

		sum += total > done ? total - done : 0;
	}
	return sum;
}

static size_t cuda_async_bytes_outstanding(struct xdm_layer *self)
{
	return cuda_async_sum(cuda_async_of(self), xdm_layer_stream_count(self), false);
}

static enum xdm_status cuda_async_reap_pending(struct xdm_layer *self)
{
	struct cuda_async *ca = cuda_async_of(self);
	uint32_t n = xdm_layer_stream_count(self);
	enum xdm_status first = XDM_OK, st;

	for (uint32_t i = 0; i < n && i < XDM_MAX_STREAMS; i++) {
		struct cuda_async_stream *cs = &ca->streams[i];
		uint64_t queued = atomic_load_explicit(&cs->queued, memory_order_acquire);
		uint64_t done = atomic_load_explicit(&cs->done, memory_order_acquire);

		uint64_t cap = 0;

		if (queued == done)
			continue;
		/*
		 * A stream being captured into a graph runs nothing until the
		 * graph is launched, and synchronizing it would end the capture
		 * with an error: its frees stay pending for a reap after it.
		 */
		if (cuda_capture_of(ca->p, xdm_layer_stream(self, i), &cap) != XDM_OK || cap)
			continue;
		/* Everything queued up to `queued` is behind this point. */
		st = xdm_layer_stream_synchronize(self, i);
		if (st) {
			if (!first)
				first = st;
			continue;
		}
		while (done < queued &&
		       !atomic_compare_exchange_weak_explicit(&cs->done, &done, queued,
							      memory_order_release,
							      memory_order_acquire))
			;
	}
	return first;
}

/* ---- attributes ------------------------------------------------------ */

static int cuda_async_show_bytes_outstanding(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, cuda_async_sum(cuda_async_of(self),
						      xdm_layer_stream_count(self), false));
}

static int cuda_async_show_bytes_pending_free(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, cuda_async_sum(cuda_async_of(self),
						      xdm_layer_stream_count(self), true));
}

/* A cuuint64_t attribute of the pool, as the driver reports it now. */
static int cuda_async_show_pool(struct xdm_layer *self, char *buf, size_t len,
				CUmemPool_attribute attr)
{
	const struct cuda_async *ca = cuda_async_of(self);
	cuuint64_t value = 0;
	CUcontext restore;
	CUresult rc;

	/* Introspection runs on threads of its own, often with no context. */
	if (cuda_ctx_enter(ca->p, &restore))
		return -EIO;
	rc = ca->p->drv.MemPoolGetAttribute(ca->pool, attr, &value);
	cuda_ctx_leave(ca->p, restore);
	if (rc != CUDA_SUCCESS)
		return -EIO;
	return cuda_show_u64(buf, len, (uint64_t)value);
}

static int cuda_async_show_pool_reserved(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_async_show_pool(self, buf, len, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
}

static int cuda_async_show_pool_used(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_async_show_pool(self, buf, len, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
}

static int cuda_async_show_release_threshold(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_async_show_pool(self, buf, len, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
}

static int cuda_async_show_peers(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_peers_show(atomic_load_explicit(&cuda_async_of(self)->peers_shown,
						    memory_order_relaxed), buf, len);
}

/*
 * Grant the devices written (see cuda_peers_parse_write) on the pool, in
 * addition to those granted already.  Everything is checked before the one
 * cuMemPoolSetAccess, so a bad write grants nothing; the lock keeps two
 * writes from each missing the other's devices in what is shown.
 */
static int cuda_async_store_peers(struct xdm_layer *self, const char *buf, size_t len)
{
	struct cuda_async *ca = cuda_async_of(self);
	struct cuda_peers_request req;
	struct cuda_peer_grant add;
	struct cuda_peers after;
	enum xdm_status st;

	st = cuda_peers_parse_write("cuda_async", buf, len, &req);
	if (st)
		return cuda_peers_errno(st);
	pthread_mutex_lock(&ca->grant_lock);
	st = cuda_peers_grant_more(ca->p, "cuda_async", &req, &ca->peers, &after, &add);
	if (!st)
		st = cuda_async_grant(ca, &add);
	if (!st)
		cuda_async_set_peers(ca, &after);
	pthread_mutex_unlock(&ca->grant_lock);
	return st ? cuda_peers_errno(st) : 0;
}

static int cuda_async_show_peers_skipped(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_peers_show(atomic_load_explicit(&cuda_async_of(self)->skipped_shown,
						    memory_order_relaxed), buf, len);
}

/* ---- sharing with other processes (ipc=true) --------------------------- */

static enum xdm_status cuda_async_ipc_export(struct xdm_layer *self,
					     const struct xdm_block *block,
					     struct xdm_ipc_object *out)
{
	struct cuda_async *ca = cuda_async_of(self);

	if (!ca->exportable)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_async: its pool is not exportable; "
				     "ipc=true makes it so (a pool of the layer's own)");
	return cuda_ipc_export_pool(ca->p, ca->pool, ca->pool_id, block, out);
}

static const struct xdm_attr cuda_async_attrs[] = {
	{ "bytes_outstanding", 0444,
	  "bytes of live blocks plus bytes whose cuMemFreeAsync may not have run yet; "
	  "exact after reap_pending", cuda_async_show_bytes_outstanding, NULL },
	{ "bytes_pending_free", 0444,
	  "bytes whose cuMemFreeAsync is queued and not yet known to have run",
	  cuda_async_show_bytes_pending_free, NULL },
	{ "pool_reserved", 0444,
	  "bytes the pool holds from the device (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)",
	  cuda_async_show_pool_reserved, NULL },
	{ "pool_used", 0444,
	  "bytes of the pool in use by allocations (CU_MEMPOOL_ATTR_USED_MEM_CURRENT)",
	  cuda_async_show_pool_used, NULL },
	{ "release_threshold", 0444,
	  "bytes the pool keeps reserved across synchronizations "
	  "(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)", cuda_async_show_release_threshold, NULL },
	{ "peers", 0644,
	  "ordinals of the other devices granted read and write on the pool (peers=), "
	  "ascending, space separated; an empty line when none.  A write ('1', '1,3' or "
	  "'all') grants those devices too, on the pool the layer has (the default pool "
	  "too); a grant is never taken back; the layer's own device is accepted and "
	  "changes nothing; a device that is missing or cannot access this one refuses "
	  "the whole write", cuda_async_show_peers, cuda_async_store_peers },
	{ "peers_skipped", 0444,
	  "ordinals that peers=all (or a write of all) left out because they cannot access "
	  "this device; an empty line when none", cuda_async_show_peers_skipped, NULL },
	{ .name = NULL },
};

static const struct xdm_param_spec cuda_async_params[] = {
	{ "pool", XDM_PARAM_STRING, "default",
	  "'default': the device's default memory pool (shared with every cudaMallocAsync user "
	  "in the process); 'own': a pool created for this layer and destroyed with it; "
	  "peers= other than none makes it 'own' unless given" },
	{ "release_threshold", XDM_PARAM_SIZE, "max",
	  "bytes the pool may keep reserved when streams synchronize, instead of giving them "
	  "back to the device" },
	{ "reuse_follow_event_dependencies", XDM_PARAM_BOOL, "true",
	  "let an allocation reuse memory freed on another stream once an event wait already "
	  "orders the two" },
	{ "reuse_allow_opportunistic", XDM_PARAM_BOOL, "true",
	  "let an allocation reuse memory whose free has already completed on another stream" },
	{ "reuse_allow_internal_dependencies", XDM_PARAM_BOOL, "true",
	  "let the driver insert its own waits on a free's stream to reuse its memory" },
	{ "peers", XDM_PARAM_STRING, "none",
	  "other devices of the process that may read and write the pool's memory: 'none', "
	  "'all' (those that can), or ordinals separated by commas, like 1,2" },
	{ "ipc", XDM_PARAM_BOOL, "false",
	  "make the layer's own pool exportable, so that blocks can be shared with other "
	  "processes (xdm_ipc_export); makes the pool 'own' unless pool= is given.  Off by "
	  "default: the driver allocates from an exportable pool as from any other, but a "
	  "graph capture cannot" },
	{ .name = NULL },
};

const struct xdm_ops cuda_async_ops = {
	XDM_OPS_HEADER("cuda_async", XDM_KIND_BACKEND),
	.description = "stream-ordered device memory from a CUDA memory pool "
		       "(cuMemAllocFromPoolAsync/cuMemFreeAsync), with cross-stream tracking",
	.params = cuda_async_params,
	.attrs = cuda_async_attrs,
	.init = cuda_async_init,
	.fini = cuda_async_fini,
	.allocate = cuda_async_allocate,
	.deallocate = cuda_async_deallocate,
	.bytes_outstanding = cuda_async_bytes_outstanding,
	.reap_pending = cuda_async_reap_pending,
	.record_block_use = xdm_track_record,
	.supports_block_use_tracking = xdm_track_supported,
	.prepare_block_use = xdm_track_prepare,
	.finish_block_use = xdm_track_finish,
	.ipc_export = cuda_async_ipc_export,
};
