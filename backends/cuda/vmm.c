/* SPDX-License-Identifier: MIT */
/*
 * vmm.c - cuda_vmm: device memory mapped a granule at a time into one
 * virtual range reserved at init, on the driver's virtual memory
 * management API (cuMemAddressReserve, cuMemCreate, cuMemMap).
 *
 * It is meant to sit under `pool`: every block starts and ends on a
 * granule, blocks that are neighbours in the range may be used as one, a
 * layer above may grow a range it holds in place (allocate_at), and any run
 * of whole granules may be handed back, whatever blocks it came from.  So
 * the pool's chunks merge with their neighbours, and the memory it holds
 * follows the memory it uses.  Lowest addresses are handed out first, which
 * keeps what is mapped packed at the bottom of the range.
 *
 * deallocate is stream-ordered: the granules are marked releasing (never
 * handed out again until unmapped), an event is recorded on the block's
 * stream, and they are unmapped once it has completed: at once if it
 * already has, else at the start of a later call or in reap_pending.
 * Nothing here synchronizes a device; only the out-of-memory path and fini
 * wait, and only on the events of queued releases.
 *
 * These calls are off the hot path (the pool calls them to grow and to
 * give back), so one mutex covers the state, and each call takes the
 * context rule once.
 *
 * With peers=, other devices are granted read and write on every mapping
 * too: each map's one cuMemSetAccess names them after the device itself.
 * Which devices is settled at init (peers_grant.c), and a write of the
 * `peers` attribute adds more: every mapping there is gets them, and so
 * does every later one (cuda_vmm_grant() in vmm_map.c).  None is ever
 * taken back.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

/* ---- init and fini --------------------------------------------------- */

static enum xdm_status cuda_vmm_check_support(const struct cuda_platform *p)
{
	enum xdm_status st;
	int supported = 0;

	st = CUDA_DEVICE_ATTRIBUTE(p, "cuda_vmm",
				   CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &supported);
	if (st)
		return st;
	if (!supported)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_vmm: CUDA device %u (%s) does "
				     "not support virtual memory management (cuMemCreate, "
				     "cuMemMap); use cuda_async", p->ordinal, p->name);
	return XDM_OK;
}

/* The bytes to reserve: the parameter, else twice the device's memory. */
static enum xdm_status cuda_vmm_reserve_size(const struct cuda_platform *p,
					     const struct xdm_params *params, uint64_t granule,
					     uint64_t *out)
{
	uint64_t want = xdm_params_has(params, "reserve") ? xdm_params_size(params, "reserve") :
			p->total_bytes * 2;

	if (!want)
		return xdm_error_set(XDM_E_CONFIG, "cuda_vmm: reserve must be more than 0 bytes");
	if (want > UINT64_MAX - (granule - 1) || want > SIZE_MAX)
		return xdm_error_set(XDM_E_CONFIG, "cuda_vmm: reserve=%" PRIu64 " bytes is more "
				     "than any address range", want);
	*out = (want + granule - 1) / granule * granule;
	return XDM_OK;
}

/* The granule the device recommends for v->prop: a power of two. */
static enum xdm_status cuda_vmm_granule(const struct cuda_vmm *v, size_t *granule)
{
	const struct cuda_platform *p = v->p;
	CUresult rc;

	*granule = 0;
	rc = p->drv.MemGetAllocationGranularity(granule, &v->prop,
						CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda_vmm: cuMemGetAllocationGranularity(pinned, "
				 "device %u, recommended)", p->ordinal);
	if (!*granule || (*granule & (*granule - 1)))
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_vmm: CUDA device %u recommends a "
				     "granule of %zu bytes, which is not a power of two",
				     p->ordinal, *granule);
	return XDM_OK;
}

/* Ask the granule, reserve the range and set up its map; under the context rule. */
static enum xdm_status cuda_vmm_setup(struct cuda_vmm *v, const struct xdm_params *params,
				      enum cuda_vmm_ipc ipc)
{
	const struct cuda_platform *p = v->p;
	const struct cuda_driver *d = &p->drv;
	CUdeviceptr base = 0;
	enum xdm_status st;
	size_t granule = 0;
	CUresult rc;

	st = cuda_vmm_granule(v, &granule);
	if (st)
		return st;
	st = cuda_vmm_ipc_setup(v, ipc, granule);
	/* Exportable granules are asked for again: the handle type is part of
	 * the properties the granule is recommended for. */
	if (!st && v->exportable)
		st = cuda_vmm_granule(v, &granule);
	if (st)
		return st;
	st = cuda_vmm_reserve_size(p, params, granule, &v->reserved);
	if (st)
		return st;
	rc = d->MemAddressReserve(&base, v->reserved, granule, 0, 0);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "cuda_vmm: cuMemAddressReserve(%" PRIu64 " bytes, aligned "
				 "to %zu) for CUDA device %u; a smaller reserve= may fit",
				 v->reserved, granule, p->ordinal);
	if (!vrange_init(&v->vr, base, v->reserved, granule)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: no host memory for the map of "
				   "%" PRIu64 " granules", v->reserved / granule);
		goto err_free_va;
	}
	v->handles = calloc(v->vr.count, sizeof(*v->handles));
	if (!v->handles) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: no host memory for the handles "
				   "of %" PRIu64 " granules", v->vr.count);
		goto err_vrange;
	}
	return XDM_OK;

err_vrange:
	vrange_fini(&v->vr);
err_free_va:
	d->MemAddressFree(base, v->reserved);
	return st;
}

static enum xdm_status cuda_vmm_init(struct xdm_layer *self, const struct xdm_params *params)
{
	struct cuda_peers_request peers;
	struct cuda_peer_grant grant;
	enum cuda_vmm_ipc ipc;
	struct cuda_platform *p;
	struct cuda_vmm *v;
	CUcontext restore;
	enum xdm_status st;

	/* peers= and ipc= first: a bad value is refused before the driver is needed. */
	st = cuda_peers_parse("cuda_vmm", xdm_params_string(params, "peers"), &peers);
	if (st)
		return st;
	if (!cuda_vmm_ipc_parse(xdm_params_string(params, "ipc"), &ipc))
		return xdm_error_set(XDM_E_CONFIG, "cuda_vmm: ipc must be 'auto', 'true' or "
				     "'false', not '%s'", xdm_params_string(params, "ipc"));
	st = cuda_platform_of(self, &p);
	if (st)
		return st;
	st = cuda_vmm_check_support(p);
	if (st)
		return st;
	v = calloc(1, sizeof(*v));
	if (!v)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: no memory for its state");
	v->p = p;
	v->pending_tail = &v->pending;
	/* Every field the driver does not read must be zero (calloc). */
	v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	v->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	v->prop.location.id = (int)p->dev;
	v->access[0].location = v->prop.location;
	v->access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	v->naccess = 1;
	atomic_init(&v->outstanding, 0);
	atomic_init(&v->mapped, 0);
	atomic_init(&v->mapped_peak, 0);
	atomic_init(&v->releasing, 0);
	atomic_init(&v->maps, 0);
	atomic_init(&v->releases, 0);
	st = cuda_peers_grant_init(p, "cuda_vmm", &peers, &grant);
	if (st)
		goto err_free;
	memcpy(&v->access[1], grant.access, grant.n * sizeof(v->access[0]));
	v->naccess = 1 + grant.n;
	v->peers = grant.set;
	atomic_init(&v->peers_shown, grant.set.granted);
	atomic_init(&v->skipped_shown, grant.set.skipped);
	if (pthread_mutex_init(&v->lock, NULL)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: cannot create its mutex");
		goto err_free;
	}
	st = cuda_ctx_enter(p, &restore);
	if (st)
		goto err_mutex;
	st = cuda_vmm_setup(v, params, ipc);
	cuda_ctx_leave(p, restore);
	if (st)
		goto err_mutex;
	xdm_layer_set_priv(self, v);
	return XDM_OK;

err_mutex:
	pthread_mutex_destroy(&v->lock);
err_free:
	free(v);
	return st;
}

static void cuda_vmm_fini(struct xdm_layer *self)
{
	struct cuda_vmm *v = cuda_vmm_of(self);
	CUcontext restore;

	if (!v)
		return;
	/* Without the context nothing can be given back; the driver reclaims
	 * it all with the context. */
	if (!cuda_ctx_enter(v->p, &restore)) {
		/* Queued releases first, after their streams; then whatever
		 * blocks were never freed, which no one may use any more. */
		cuda_vmm_reap(v, true);
		for (uint64_t i = 0; i < v->vr.count; i++)
			if (v->vr.state[i] == VR_MAPPED)
				cuda_vmm_unmap(v, i, 1);
		/* A release whose event failed leaves its granules mapped,
		 * and a range with mappings cannot be freed. */
		if (!v->pending)
			v->p->drv.MemAddressFree(v->vr.base, v->reserved);
		for (struct cuda_vmm_release *r = v->pending; r; r = r->next)
			v->p->drv.EventDestroy(r->done);
		cuda_ctx_leave(v->p, restore);
	}
	while (v->pending) {
		struct cuda_vmm_release *r = v->pending;

		v->pending = r->next;
		free(r);
	}
	vrange_fini(&v->vr);
	free(v->handles);
	pthread_mutex_destroy(&v->lock);
	free(v);
	xdm_layer_set_priv(self, NULL);
}

/* ---- allocation ------------------------------------------------------ */

/* Granules for bytes; 0 if more than the whole range. */
static uint64_t cuda_vmm_granules(const struct cuda_vmm *v, size_t bytes)
{
	uint64_t g = v->vr.granule;

	if (!bytes || bytes > v->reserved)
		return 0;
	return ((uint64_t)bytes + g - 1) / g;
}

static void cuda_vmm_fill(const struct cuda_vmm *v, uint64_t first, uint64_t n,
			  struct xdm_block *out)
{
	/* The core filled generation, ordinal, stream and tag. */
	out->ptr = vrange_addr(&v->vr, first);
	out->bytes = n * v->vr.granule;
	out->align = v->vr.granule;
	out->state = XDM_BLOCK_LIVE;
}

/*
 * Map n granules at *first (want_at) or at the lowest free run, under lock
 * and the context rule.  When the device is out of memory, or the range has
 * no room but some is being released, it waits for the queued releases
 * once and tries again: memory on its way back is the only memory there is
 * to wait for.  A place that is taken for allocate_at is not waited for:
 * its caller allocates elsewhere instead.
 */
static enum xdm_status cuda_vmm_place(struct cuda_vmm *v, bool want_at, uint64_t *first,
				      uint64_t n, size_t bytes)
{
	const struct cuda_driver *d = &v->p->drv;
	uint64_t g = v->vr.granule, k;
	const char *call = "";
	char text[192];
	CUresult rc;

	for (int attempt = 0;; attempt++) {
		bool may_wait = attempt == 0 && v->pending;

		if (want_at) {
			if (!vrange_span(&v->vr, vrange_addr(&v->vr, *first), n * g, VR_FREE,
					 first, &k))
				return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: %zu bytes at "
						     "0x%" PRIx64 " are taken (in use, or still "
						     "being released)", bytes,
						     vrange_addr(&v->vr, *first));
		} else if (!vrange_find(&v->vr, n, first)) {
			if (may_wait && v->vr.releasing) {
				cuda_vmm_reap(v, true);
				continue;
			}
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: no room for %zu bytes "
					     "in the reserved range of %" PRIu64 " bytes (%" PRIu64
					     " mapped); a larger reserve= would have some", bytes,
					     v->reserved, (v->vr.mapped + v->vr.releasing) * g);
		}
		rc = cuda_vmm_map(v, *first, n, &call);
		if (rc == CUDA_SUCCESS)
			break;
		if (rc != CUDA_ERROR_OUT_OF_MEMORY)
			return cuda_fail(d, rc, "cuda_vmm: %s for %" PRIu64 " granules of %" PRIu64
					 " bytes at 0x%" PRIx64 " on CUDA device %u", call, n, g,
					 vrange_addr(&v->vr, *first), v->p->ordinal);
		if (!may_wait)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: %s for %zu bytes (%"
					     PRIu64 " granules) on CUDA device %u: %s", call,
					     bytes, n, v->p->ordinal,
					     cuda_error_text(d, rc, text, sizeof(text)));
		cuda_vmm_reap(v, true);
	}
	vrange_set(&v->vr, *first, n, VR_MAPPED);
	atomic_fetch_add_explicit(&v->maps, n, memory_order_relaxed);
	cuda_vmm_publish(v);
	return XDM_OK;
}

/* allocate (at NULL) and allocate_at, once the arguments are checked. */
static enum xdm_status cuda_vmm_get(struct xdm_layer *self, const uint64_t *at, size_t bytes,
				    struct xdm_block *out)
{
	struct cuda_vmm *v = cuda_vmm_of(self);
	uint64_t n = cuda_vmm_granules(v, bytes), first = 0;
	CUcontext restore;
	enum xdm_status st;

	if (!out)
		return xdm_error_set(XDM_E_INVALID, "cuda_vmm: allocate was given a NULL block");
	if (!n)
		return xdm_error_set(bytes ? XDM_E_OUT_OF_MEMORY : XDM_E_INVALID,
				     "cuda_vmm: %zu bytes %s", bytes, bytes ?
				     "are more than the whole reserved range (reserve=)" :
				     "is no allocation");
	if (at) {
		if (*at & (v->vr.granule - 1))
			return xdm_error_set(XDM_E_INVALID, "cuda_vmm: allocate_at 0x%" PRIx64
					     ", which is not on a granule of %" PRIu64 " bytes",
					     *at, v->vr.granule);
		if (*at < v->vr.base || (*at - v->vr.base) / v->vr.granule + n > v->vr.count)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: %zu bytes at 0x%"
					     PRIx64 " are not inside the reserved range of %"
					     PRIu64 " bytes at 0x%" PRIx64, bytes, *at,
					     v->reserved, v->vr.base);
		first = (*at - v->vr.base) / v->vr.granule;
	}
	st = cuda_ctx_enter(v->p, &restore);
	if (st)
		return st;
	pthread_mutex_lock(&v->lock);
	/* A failed reap is reported by reap_pending; it may still have freed room. */
	cuda_vmm_reap(v, false);
	st = cuda_vmm_place(v, at != NULL, &first, n, bytes);
	pthread_mutex_unlock(&v->lock);
	cuda_ctx_leave(v->p, restore);
	if (!st)
		cuda_vmm_fill(v, first, n, out);
	return st;
}

static enum xdm_status cuda_vmm_allocate(struct xdm_layer *self, size_t bytes,
					 xdm_stream_id stream, const char *tag,
					 struct xdm_block *out)
{
	(void)stream;	/* a mapping is no stream's: usable at once, by any */
	(void)tag;
	return cuda_vmm_get(self, NULL, bytes, out);
}

static enum xdm_status cuda_vmm_allocate_at(struct xdm_layer *self, uint64_t ptr, size_t bytes,
					    xdm_stream_id stream, const char *tag,
					    struct xdm_block *out)
{
	(void)stream;
	(void)tag;
	return cuda_vmm_get(self, &ptr, bytes, out);
}

/* ---- release --------------------------------------------------------- */

/* Why [ptr, ptr + bytes) is not a run of mapped granules, for the sentence. */
static const char *cuda_vmm_why_not(const struct cuda_vmm *v, uint64_t ptr, uint64_t bytes)
{
	uint64_t g = v->vr.granule;

	if (!bytes)
		return "it is empty";
	if ((ptr | bytes) & (g - 1))
		return "it does not start and end on a granule";
	if (ptr < v->vr.base || (ptr - v->vr.base) / g + bytes / g > v->vr.count)
		return "it is not inside the reserved range";
	for (uint64_t i = (ptr - v->vr.base) / g; i < (ptr - v->vr.base + bytes) / g; i++) {
		if (v->vr.state[i] == VR_FREE)
			return "some of it is not mapped";
		if (v->vr.state[i] == VR_RELEASING)
			return "some of it is already being released";
	}
	return "it is not mapped";
}

/*
 * Queue the release of [first, first + n) behind an event recorded on s, or
 * release it now if the stream is already past it.  Under lock and the
 * context rule; on failure nothing has changed.
 */
static enum xdm_status cuda_vmm_release(struct cuda_vmm *v, uint64_t first, uint64_t n,
					CUstream s, struct xdm_block *block)
{
	const struct cuda_driver *d = &v->p->drv;
	struct cuda_vmm_release *r;
	enum xdm_status st;
	uint64_t cap = 0;
	CUresult rc;

	/*
	 * On a stream being captured into a graph the release would follow
	 * work that runs only when the graph does, and asking the stream (or
	 * the event) ends the capture with an error: the range stays mapped.
	 */
	st = cuda_capture_of(v->p, s, &cap);
	if (st)
		return st;
	if (cap)
		return xdm_error_set(XDM_E_STREAM_MISUSE, "cuda_vmm: stream %u is being captured "
				     "into a graph: 0x%" PRIx64 " (%zu bytes) stays mapped",
				     block->stream, block->ptr, block->bytes);
	/*
	 * A stream with nothing left to run (the queried state includes the
	 * waits the core queued for uses on other streams) has finished every
	 * use of the range: unmap now, with no event.  That is the usual case
	 * for the pool's trimmer and for a reap after a synchronize, and it
	 * gives the memory back within the call instead of at the next reap.
	 */
	if (d->StreamQuery(s) == CUDA_SUCCESS) {
		vrange_set(&v->vr, first, n, VR_RELEASING);
		st = cuda_vmm_unmap(v, first, n);
		block->state = XDM_BLOCK_FREED;
		cuda_vmm_publish(v);
		return st;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: no memory to queue a release");
	rc = d->EventCreate(&r->done, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(d, rc, "cuda_vmm: cuEventCreate for a release on CUDA device %u",
			       v->p->ordinal);
		goto err_free;
	}
	rc = d->EventRecord(r->done, s);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(d, rc, "cuda_vmm: cuEventRecord on stream %u for the release of "
			       "0x%" PRIx64, block->stream, block->ptr);
		goto err_event;
	}
	r->first = first;
	r->n = n;
	vrange_set(&v->vr, first, n, VR_RELEASING);
	*v->pending_tail = r;
	v->pending_tail = &r->next;
	block->state = XDM_BLOCK_RETIRED;
	/* Usually done at once: the pool gives back what its streams finished. */
	cuda_vmm_reap(v, false);
	if (v->vr.state[first] == VR_FREE)
		block->state = XDM_BLOCK_FREED;
	return XDM_OK;

err_event:
	d->EventDestroy(r->done);
err_free:
	free(r);
	return st;
}

static enum xdm_status cuda_vmm_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct cuda_vmm *v = cuda_vmm_of(self);
	uint64_t first, n;
	CUcontext restore;
	enum xdm_status st;
	CUstream s;

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "cuda_vmm: deallocate of a NULL block");
	s = xdm_layer_stream(self, block->stream);
	if (!s)
		return xdm_error_set(XDM_E_INVALID, "cuda_vmm: block 0x%" PRIx64 " names stream "
				     "%u, which is not in the pool", block->ptr, block->stream);
	st = cuda_ctx_enter(v->p, &restore);
	if (st)
		return st;
	pthread_mutex_lock(&v->lock);
	cuda_vmm_reap(v, false);
	if (vrange_span(&v->vr, block->ptr, block->bytes, VR_MAPPED, &first, &n))
		st = cuda_vmm_release(v, first, n, s, block);
	else
		st = xdm_error_set(XDM_E_INVALID, "cuda_vmm: deallocate of %zu bytes at 0x%"
				   PRIx64 ", which is no run of granules it handed out: %s",
				   block->bytes, block->ptr,
				   cuda_vmm_why_not(v, block->ptr, block->bytes));
	pthread_mutex_unlock(&v->lock);
	cuda_ctx_leave(v->p, restore);
	return st;
}

static enum xdm_status cuda_vmm_reap_pending(struct xdm_layer *self)
{
	struct cuda_vmm *v = cuda_vmm_of(self);
	CUcontext restore;
	enum xdm_status st;

	st = cuda_ctx_enter(v->p, &restore);
	if (st)
		return st;
	pthread_mutex_lock(&v->lock);
	st = cuda_vmm_reap(v, false);
	pthread_mutex_unlock(&v->lock);
	cuda_ctx_leave(v->p, restore);
	return st;
}

static size_t cuda_vmm_bytes_outstanding(struct xdm_layer *self)
{
	return atomic_load_explicit(&cuda_vmm_of(self)->outstanding, memory_order_relaxed);
}

static uint64_t cuda_vmm_granularity(struct xdm_layer *self)
{
	/* Set at init, never changed: no lock. */
	return cuda_vmm_of(self)->vr.granule;
}

static const struct xdm_param_spec cuda_vmm_params[] = {
	{ "reserve", XDM_PARAM_SIZE, NULL,
	  "bytes of virtual addresses to reserve for the device's memory, rounded up to the "
	  "granule; absent: twice the device's memory" },
	{ "peers", XDM_PARAM_STRING, "none",
	  "other devices of the process that may read and write every mapping: 'none', 'all' "
	  "(those that can), or ordinals separated by commas, like 1,2" },
	{ "ipc", XDM_PARAM_STRING, "auto",
	  "whether blocks can be shared with other processes (xdm_ipc_export): 'true' creates "
	  "every granule exportable as a POSIX descriptor or fails init where the device "
	  "cannot; 'auto' does where the device can; 'false' never does" },
	{ .name = NULL },
};

const struct xdm_ops cuda_vmm_ops = {
	XDM_OPS_HEADER("cuda_vmm", XDM_KIND_BACKEND),
	.description = "device memory mapped a granule at a time into one reserved virtual "
		       "range (cuMemCreate/cuMemMap), released in stream order; meant to sit "
		       "under pool",
	.params = cuda_vmm_params,
	.attrs = cuda_vmm_attrs,
	.init = cuda_vmm_init,
	.fini = cuda_vmm_fini,
	.allocate = cuda_vmm_allocate,
	.deallocate = cuda_vmm_deallocate,
	.bytes_outstanding = cuda_vmm_bytes_outstanding,
	.reap_pending = cuda_vmm_reap_pending,
	.record_block_use = xdm_track_record,
	.supports_block_use_tracking = xdm_track_supported,
	.prepare_block_use = xdm_track_prepare,
	.finish_block_use = xdm_track_finish,
	.granularity = cuda_vmm_granularity,
	.allocate_at = cuda_vmm_allocate_at,
	.ipc_export = cuda_vmm_ipc_export,
};
