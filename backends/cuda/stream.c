/* SPDX-License-Identifier: MIT */
/*
 * stream.c - the cuda platform's streams, events and copies: thin calls
 * into the driver under the context rule of cuda_priv.h.
 *
 * Streams are created non-blocking, so they never serialize with the
 * legacy NULL stream that other code in the process may still use; and a
 * NULL handle is refused everywhere rather than passed on, because the
 * driver would read it as that legacy stream.  Events are created without
 * timing, which makes record and wait cheaper; xdm only orders with them.
 */
#include "config.h"

#include <inttypes.h>

#include "cuda_priv.h"

static const struct cuda_platform *cuda_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

static enum xdm_status cuda_null(const char *op, const char *what)
{
	return xdm_error_set(XDM_E_INVALID, "cuda platform: %s was given a NULL %s", op, what);
}

enum xdm_status cuda_stream_create(struct xdm_layer *self, void **stream)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	CUstream s = NULL;
	enum xdm_status st;
	CUresult rc;

	if (!stream)
		return cuda_null("stream_create", "output");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.StreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuStreamCreate(CU_STREAM_NON_BLOCKING) on "
				 "device %u", p->ordinal);
	*stream = s;
	return XDM_OK;
}

void cuda_stream_destroy(struct xdm_layer *self, void *stream)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;

	if (!stream || cuda_ctx_enter(p, &restore))
		return;
	/* Work still queued on it completes; the driver frees it after. */
	p->drv.StreamDestroy(stream);
	cuda_ctx_leave(p, restore);
}

enum xdm_status cuda_stream_synchronize(struct xdm_layer *self, void *stream)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!stream)
		return cuda_null("stream_synchronize", "stream");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.StreamSynchronize(stream);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuStreamSynchronize(stream %p)", stream);
	return XDM_OK;
}

enum xdm_status cuda_event_create(struct xdm_layer *self, void **event)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	CUevent e = NULL;
	enum xdm_status st;
	CUresult rc;

	if (!event)
		return cuda_null("event_create", "output");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.EventCreate(&e, CU_EVENT_DISABLE_TIMING);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuEventCreate(CU_EVENT_DISABLE_TIMING) on "
				 "device %u", p->ordinal);
	*event = e;
	return XDM_OK;
}

void cuda_event_destroy(struct xdm_layer *self, void *event)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;

	if (!event || cuda_ctx_enter(p, &restore))
		return;
	/* Safe with waits on it still queued: they hold its record. */
	p->drv.EventDestroy(event);
	cuda_ctx_leave(p, restore);
}

enum xdm_status cuda_event_record(struct xdm_layer *self, void *event, void *stream)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!event)
		return cuda_null("event_record", "event");
	if (!stream)
		return cuda_null("event_record", "stream");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.EventRecord(event, stream);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuEventRecord(event %p, stream %p)", event,
				 stream);
	return XDM_OK;
}

enum xdm_status cuda_stream_wait_event(struct xdm_layer *self, void *stream, void *event)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!stream)
		return cuda_null("stream_wait_event", "stream");
	if (!event)
		return cuda_null("stream_wait_event", "event");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.StreamWaitEvent(stream, event, CU_EVENT_WAIT_DEFAULT);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuStreamWaitEvent(stream %p, event %p)", stream,
				 event);
	return XDM_OK;
}

enum xdm_status cuda_event_query(struct xdm_layer *self, void *event, bool *done)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!event)
		return cuda_null("event_query", "event");
	if (!done)
		return cuda_null("event_query", "output");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.EventQuery(event);
	cuda_ctx_leave(p, restore);
	/* NOT_READY is an answer, not a failure. */
	if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY) {
		*done = rc == CUDA_SUCCESS;
		return XDM_OK;
	}
	return cuda_fail(&p->drv, rc, "cuda: cuEventQuery(event %p)", event);
}

enum xdm_status cuda_event_synchronize(struct xdm_layer *self, void *event)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!event)
		return cuda_null("event_synchronize", "event");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.EventSynchronize(event);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuEventSynchronize(event %p)", event);
	return XDM_OK;
}

enum xdm_status cuda_launch_host_func(struct xdm_layer *self, void *stream,
				      void (*fn)(void *arg), void *arg)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!stream)
		return cuda_null("launch_host_func", "stream");
	if (!fn)
		return cuda_null("launch_host_func", "function");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.LaunchHostFunc(stream, fn, arg);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuLaunchHostFunc(stream %p)", stream);
	return XDM_OK;
}

enum xdm_status cuda_memset_async(struct xdm_layer *self, uint64_t ptr, int value, size_t bytes,
				  void *stream)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!stream)
		return cuda_null("memset_async", "stream");
	if (!bytes)
		return XDM_OK;
	if (!ptr)
		return xdm_error_set(XDM_E_INVALID,
				     "cuda platform: memset_async of %zu bytes at address 0", bytes);
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.MemsetD8Async((CUdeviceptr)ptr, (unsigned char)value, bytes, stream);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuMemsetD8Async(0x%" PRIx64 ", %d, %zu bytes)",
				 ptr, value, bytes);
	return XDM_OK;
}

enum xdm_status cuda_memcpy_async(struct xdm_layer *self, uint64_t dst, uint64_t src,
				  size_t bytes, void *stream)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (!stream)
		return cuda_null("memcpy_async", "stream");
	if (!bytes)
		return XDM_OK;
	if (!dst || !src)
		return xdm_error_set(XDM_E_INVALID,
				     "cuda platform: memcpy_async of %zu bytes with a %s address of 0",
				     bytes, dst ? "source" : "destination");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	/* Unified addressing: the driver tells host from device by address. */
	rc = p->drv.MemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc,
				 "cuda: cuMemcpyAsync(0x%" PRIx64 " <- 0x%" PRIx64 ", %zu bytes)", dst,
				 src, bytes);
	return XDM_OK;
}

/*
 * What a framework's handle means (xdm_native_stream()).  NULL and
 * CU_STREAM_LEGACY are the legacy default stream of the current context;
 * every call xdm makes on a stream first makes the device's primary
 * context current, so CU_STREAM_LEGACY held in the pool always means that
 * context's legacy stream, from any thread.
 *
 * CU_STREAM_PER_THREAD is served through the legacy stream too.  It names
 * the calling thread's own default stream, which no other thread can name,
 * so the pool could not order a block's reuse after it directly; but CUDA
 * orders every per-thread stream with the legacy stream both ways (work on
 * legacy waits for what the per-thread streams queued before it, and their
 * later work waits for it).  So its blocks belong to the legacy stream, and
 * a free naming it first queues one mark on legacy (cuda_stream_join()),
 * after which every later user of the block, on any thread's per-thread
 * stream or on legacy, follows the freeing thread's work.
 *
 * Nothing is queued on a per-thread stream itself, and nothing waits on
 * it.  On the H200 (driver 580) a thread that ends while its per-thread
 * stream still runs work may hang in its exit, xdm or not: a plain CUDA
 * program (cuMemAlloc, a 50 ms kernel on the per-thread stream, end) hung
 * on its second such thread once the process had freed with
 * cuMemFreeAsync on the legacy stream, and never when the thread
 * synchronized its stream first.  Such a thread must synchronize its
 * per-thread stream before it ends (xdm(3)); the mark adds no hazard.
 *
 * Any other handle must belong to the primary context: a stream of another
 * device or context would take the runtime's memory where it is not valid.
 */
enum xdm_status cuda_stream_resolve(struct xdm_layer *self, void *handle, void **canonical)
{
	const struct cuda_platform *p = cuda_of(self);
	CUcontext restore, ctx = NULL;
	enum xdm_status st;
	CUresult rc;

	if (!canonical)
		return cuda_null("stream_resolve", "output");
	if (!handle || handle == CU_STREAM_LEGACY) {
		*canonical = CU_STREAM_LEGACY;
		return XDM_OK;
	}
	if (handle == CU_STREAM_PER_THREAD) {
		*canonical = CU_STREAM_LEGACY;
		return XDM_OK;
	}
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	rc = p->drv.StreamGetCtx(handle, &ctx);
	cuda_ctx_leave(p, restore);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: native stream %p is not a stream "
				 "(cuStreamGetCtx)", handle);
	if (ctx != p->ctx)
		return xdm_error_set(XDM_E_INVALID, "cuda: native stream %p belongs to another "
				     "context than the primary context of CUDA device %u",
				     handle, p->ordinal);
	*canonical = handle;
	return XDM_OK;
}

/*
 * Whether s is being captured into a graph, and by which capture sequence
 * (the driver's id, unique in the process).  cuStreamGetCaptureInfo only
 * reads the stream's state: it is one of the calls a capture allows, on the
 * captured stream and from any thread.  The legacy stream answers
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream captures: it is
 * then part of that capture as far as any use of it goes.  An invalidated
 * capture is still one (its streams stay unusable until it ends), of an id
 * the driver no longer tells: UINT64_MAX.
 */
enum xdm_status cuda_capture_of(const struct cuda_platform *p, CUstream s, uint64_t *capture)
{
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t id = 0;
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	*capture = UINT64_MAX;
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
#if CUDA_VERSION >= 12030
	rc = p->drv.StreamGetCaptureInfo(s, &status, &id, NULL, NULL, NULL, NULL);
#else
	rc = p->drv.StreamGetCaptureInfo(s, &status, &id, NULL, NULL, NULL);
#endif
	cuda_ctx_leave(p, restore);
	if (rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
		return XDM_OK;
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuStreamGetCaptureInfo(stream %p)", (void *)s);
	if (status == CU_STREAM_CAPTURE_STATUS_NONE)
		*capture = 0;
	else if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE && id && id != UINT64_MAX)
		*capture = id;
	return XDM_OK;
}

enum xdm_status cuda_stream_capture(struct xdm_layer *self, void *stream, uint64_t *capture)
{
	if (!capture)
		return cuda_null("stream_capture", "output");
	if (!stream)
		return cuda_null("stream_capture", "stream");
	return cuda_capture_of(cuda_of(self), stream, capture);
}

/*
 * The mark of a per-thread stream's work on the legacy stream: an event
 * recorded there, which CUDA queues after everything the calling thread's
 * per-thread stream holds and before the later work of every per-thread
 * stream (measured on the H200: a second thread's kernel waited for the
 * first's, and without the mark it did not).  Nothing waits on the event;
 * one per platform, made at the first join, serves every thread.
 */
enum xdm_status cuda_stream_join(struct xdm_layer *self, void *handle, void *canonical)
{
	struct cuda_platform *p = xdm_layer_priv(self);
	CUevent mark, none = NULL;
	CUcontext restore;
	enum xdm_status st;
	CUresult rc;

	if (handle != CU_STREAM_PER_THREAD || canonical != CU_STREAM_LEGACY)
		return XDM_OK;
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	mark = atomic_load_explicit(&p->join_mark, memory_order_acquire);
	if (!mark) {
		rc = p->drv.EventCreate(&mark, CU_EVENT_DISABLE_TIMING);
		if (rc != CUDA_SUCCESS) {
			st = cuda_fail(&p->drv, rc, "cuda: cuEventCreate for the per-thread "
				       "stream's mark on device %u", p->ordinal);
			goto leave;
		}
		/* Two first joins at once: one event stays, the other goes. */
		if (!atomic_compare_exchange_strong_explicit(&p->join_mark, &none, mark,
							     memory_order_acq_rel,
							     memory_order_acquire)) {
			p->drv.EventDestroy(mark);
			mark = none;
		}
	}
	rc = p->drv.EventRecord(mark, CU_STREAM_LEGACY);
	if (rc != CUDA_SUCCESS)
		st = cuda_fail(&p->drv, rc, "cuda: cuEventRecord on the legacy stream, the "
			       "mark of the per-thread stream's work");
leave:
	cuda_ctx_leave(p, restore);
	return st;
}

void cuda_stream_join_fini(struct cuda_platform *p)
{
	CUevent mark = atomic_exchange_explicit(&p->join_mark, NULL, memory_order_acq_rel);
	CUcontext restore;

	if (!mark || cuda_ctx_enter(p, &restore))
		return;
	p->drv.EventDestroy(mark);
	cuda_ctx_leave(p, restore);
}
