/* SPDX-License-Identifier: MIT */
/*
 * subject_cuda.c - the CUDA driver's own allocators as bench subjects:
 * the anchors that xdm's numbers are divided by.
 *
 * "cuMemAlloc" is cuMemAlloc/cuMemFree: synchronous, no pool anywhere, what
 * a cuda_direct stack stands on.  "cuMemAllocAsync" is cuMemAllocAsync/
 * cuMemFreeAsync on non-blocking streams of its own, from the device's
 * default pool with the release threshold at its maximum, so that freed
 * memory stays in the pool: the driver's fastest path, what a cuda_async
 * stack stands on.  Both touch blocks for the streams workload with a
 * cuMemsetD8Async on streams of their own, and "cuMemAllocAsync" reports
 * its pool's reserved high-water mark for the fragmentation figure.
 *
 * Nothing links libcuda: the driver is dlopened when an anchor opens, so
 * xdm-bench still runs where there is none.  Each subject holds its own
 * driver table, primary-context reference and streams; dlopen and the
 * primary context are reference counted, so the anchors and the xdm runtime
 * share the driver without sharing any state of ours.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_anchors.h"

/* ---- errors ------------------------------------------------------------ */

/* "call: CUDA_ERROR_X: text" for a failure during open, into why. */
static int cu_say(struct cu_anchor *a, const char *call, CUresult rc, char *why, size_t len)
{
	char text[256];

	cu_text(&a->drv, rc, text, sizeof(text));
	snprintf(why, len, "%s: %s", call, text);
	return -1;
}

static void cu_strerror(struct bench_subject *s, char *buf, size_t len)
{
	struct cu_anchor *a = s->priv;
	const char *call = (const char *)(uintptr_t)pthread_getspecific(a->err_call);
	CUresult rc = (CUresult)(uintptr_t)pthread_getspecific(a->err_rc);
	char text[256];

	if (!call) {
		snprintf(buf, len, "no CUDA error was recorded on this thread");
		return;
	}
	cu_text(&a->drv, rc, text, sizeof(text));
	snprintf(buf, len, "%s: %s", call, text);
}

/* ---- cuMemAlloc -------------------------------------------------------- */

/*
 * cuMemAlloc and cuMemFree act on the calling thread's current context, and
 * any thread may call a subject, so both make the primary context current
 * first when it is not: one cuCtxGetCurrent when it is, the same check xdm's
 * cuda_direct makes before the same two calls, so that both pay alike.
 */
static int sync_allocate(struct bench_subject *s, size_t bytes, uint32_t stream,
			 struct xdm_block *out)
{
	struct cu_anchor *a = s->priv;
	CUdeviceptr p;
	CUresult rc;

	if (cu_make_current(a))
		return -1;
	rc = a->drv.cuMemAlloc(&p, bytes);
	if (rc != CUDA_SUCCESS)
		return cu_fail(a, "cuMemAlloc", rc);
	out->ptr = (uint64_t)p;
	out->bytes = bytes;
	out->stream = stream;
	return 0;
}

static int sync_deallocate(struct bench_subject *s, struct xdm_block *blk)
{
	struct cu_anchor *a = s->priv;
	CUresult rc;

	if (cu_make_current(a))
		return -1;
	rc = a->drv.cuMemFree((CUdeviceptr)blk->ptr);
	return rc == CUDA_SUCCESS ? 0 : cu_fail(a, "cuMemFree", rc);
}

/* ---- cuMemAllocAsync --------------------------------------------------- */

/*
 * No context check here: on an explicit stream, cuMemAllocAsync and
 * cuMemFreeAsync take the context from the stream (cuda.h gives them
 * CUDA_ERROR_INVALID_CONTEXT only for the default stream with none
 * current), and xdm's cuda_async skips the check for that reason.  A check
 * here would charge the anchor a cost its xdm counterpart does not pay.
 */

/* Workloads ask only for streams below stream_count(); this guards the array. */
static int bad_stream(struct cu_anchor *a)
{
	return cu_fail(a, "xdm-bench: stream index out of range", CUDA_ERROR_INVALID_VALUE);
}

static int async_allocate(struct bench_subject *s, size_t bytes, uint32_t stream,
			  struct xdm_block *out)
{
	struct cu_anchor *a = s->priv;
	CUdeviceptr p;
	CUresult rc;

	if (stream >= a->nmade)
		return bad_stream(a);
	rc = a->drv.cuMemAllocAsync(&p, bytes, a->streams[stream]);
	if (rc != CUDA_SUCCESS)
		return cu_fail(a, "cuMemAllocAsync", rc);
	out->ptr = (uint64_t)p;
	out->bytes = bytes;
	out->stream = stream;
	return 0;
}

static int async_deallocate(struct bench_subject *s, struct xdm_block *blk)
{
	struct cu_anchor *a = s->priv;
	CUresult rc;

	if (blk->stream >= a->nmade)
		return bad_stream(a);
	rc = a->drv.cuMemFreeAsync((CUdeviceptr)blk->ptr, a->streams[blk->stream]);
	return rc == CUDA_SUCCESS ? 0 : cu_fail(a, "cuMemFreeAsync", rc);
}

/* ---- streams and the fragmentation figure ------------------------------ */

/*
 * The streams workload's work on a block: a memset on the anchor's stream,
 * as xdm's touch on the cuda platform queues one on the runtime's.  The
 * context check is the one xdm's touch makes too, so both pay it.  For
 * cuMemAlloc the stream only carries the memset; cuMemFree waits for it.
 */
static int cu_touch(struct bench_subject *s, const struct xdm_block *blk, uint32_t stream,
		    char *why, size_t len)
{
	struct cu_anchor *a = s->priv;
	char text[256];
	CUresult rc;

	if (stream >= a->nmade) {
		snprintf(why, len, "stream %u is not one of the anchor's %u", stream, a->nmade);
		return -1;
	}
	if (cu_make_current(a)) {
		cu_strerror(s, why, len);
		return -1;
	}
	rc = a->drv.cuMemsetD8Async((CUdeviceptr)blk->ptr, 0, blk->bytes, a->streams[stream]);
	if (rc == CUDA_SUCCESS)
		return 0;
	cu_text(&a->drv, rc, text, sizeof(text));
	snprintf(why, len, "cuMemsetD8Async: %s", text);
	return -1;
}

static void reserved_warn(struct bench_subject *s, const char *call, CUresult rc)
{
	struct cu_anchor *a = s->priv;
	char text[256];

	cu_text(&a->drv, rc, text, sizeof(text));
	fprintf(stderr, "xdm-bench: warning: %s: %s failed: %s; no peak reserved figure\n",
		s->name, call, text);
}

/*
 * With the release threshold at its maximum the pool keeps all it ever
 * reserved, earlier workloads' memory too.  After a settle every block is
 * free, so trimming to 0 gives all of it back, and the high-water mark,
 * reset to 0, then counts what this workload makes the pool reserve.  If
 * the xdm runtime draws from the same default pool (cuda_async with
 * pool=default) the mark counts its reservations too: the man page says so.
 */
static bool async_reserved_reset(struct bench_subject *s)
{
	struct cu_anchor *a = s->priv;
	cuuint64_t zero = 0;
	char why[BENCH_ERR_LEN];
	CUresult rc;

	if (cu_settle(s)) {
		cu_strerror(s, why, sizeof(why));
		fprintf(stderr, "xdm-bench: warning: %s: %s; no peak reserved figure\n", s->name,
			why);
		return false;
	}
	rc = a->drv.cuMemPoolTrimTo(a->pool, 0);
	if (rc != CUDA_SUCCESS) {
		reserved_warn(s, "cuMemPoolTrimTo", rc);
		return false;
	}
	rc = a->drv.cuMemPoolSetAttribute(a->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero);
	if (rc != CUDA_SUCCESS) {
		reserved_warn(s, "cuMemPoolSetAttribute(RESERVED_MEM_HIGH)", rc);
		return false;
	}
	return true;
}

static bool async_reserved_peak(struct bench_subject *s, uint64_t *bytes)
{
	struct cu_anchor *a = s->priv;
	cuuint64_t v = 0;
	CUresult rc;

	rc = a->drv.cuMemPoolGetAttribute(a->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v);
	if (rc != CUDA_SUCCESS) {
		reserved_warn(s, "cuMemPoolGetAttribute(RESERVED_MEM_HIGH)", rc);
		return false;
	}
	*bytes = v;
	return true;
}

/* ---- common ops -------------------------------------------------------- */

static uint32_t cu_stream_count(struct bench_subject *s)
{
	struct cu_anchor *a = s->priv;

	return a->nstreams;
}

/* Frees queued on the streams have run once each stream is synchronized. */
int cu_settle(struct bench_subject *s)
{
	struct cu_anchor *a = s->priv;

	if (a->nmade && cu_make_current(a))
		return -1;
	for (uint32_t i = 0; i < a->nmade; i++) {
		CUresult rc = a->drv.cuStreamSynchronize(a->streams[i]);

		if (rc != CUDA_SUCCESS)
			return cu_fail(a, "cuStreamSynchronize", rc);
	}
	return 0;
}

/* The driver offers no counters of its own, and counting here would be
 * bookkeeping the anchors exist to leave out. */
static bool cu_counters(struct bench_subject *s, struct bench_counters *out)
{
	return false;
}

static void anchor_free(struct cu_anchor *a, const char *name)
{
	const struct cu_driver *d = &a->drv;
	CUresult rc;

	if (a->ctx) {
		CUcontext cur = NULL;

		if (d->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != a->ctx)
			d->cuCtxSetCurrent(a->ctx);
	}
	for (uint32_t i = 0; a->streams && i < a->nmade; i++) {
		if (!a->streams[i])
			continue;
		rc = d->cuStreamSynchronize(a->streams[i]);
		if (rc != CUDA_SUCCESS)
			cu_warn(a, name, "cuStreamSynchronize", rc);
		rc = d->cuStreamDestroy(a->streams[i]);
		if (rc != CUDA_SUCCESS)
			cu_warn(a, name, "cuStreamDestroy", rc);
	}
	/* The default pool is the device's, shared with any cuda_async layer. */
	if (a->threshold_set) {
		rc = d->cuMemPoolSetAttribute(a->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
					      &a->old_threshold);
		if (rc != CUDA_SUCCESS)
			cu_warn(a, name, "restoring the pool's release threshold", rc);
	}
	if (a->ctx) {
		rc = d->cuDevicePrimaryCtxRelease(a->dev);
		if (rc != CUDA_SUCCESS)
			cu_warn(a, name, "cuDevicePrimaryCtxRelease", rc);
	}
	if (a->keys) {
		pthread_key_delete(a->err_call);
		pthread_key_delete(a->err_rc);
	}
	free(a->streams);
	free(a);
}

static void cu_destroy(struct bench_subject *s)
{
	if (!s->priv)
		return;
	anchor_free(s->priv, s->name);
	s->priv = NULL;
}

/* No cross_use: the driver's allocators have no block-use tracking. */
static const struct bench_subject_ops sync_ops = {
	.allocate = sync_allocate,
	.deallocate = sync_deallocate,
	.stream_count = cu_stream_count,
	.settle = cu_settle,
	.counters = cu_counters,
	.strerror = cu_strerror,
	.destroy = cu_destroy,
	.touch = cu_touch,
};

static const struct bench_subject_ops async_ops = {
	.allocate = async_allocate,
	.deallocate = async_deallocate,
	.stream_count = cu_stream_count,
	.settle = cu_settle,
	.counters = cu_counters,
	.strerror = cu_strerror,
	.destroy = cu_destroy,
	.touch = cu_touch,
	.reserved_reset = async_reserved_reset,
	.reserved_peak = async_reserved_peak,
};

/* ---- opening ----------------------------------------------------------- */

/* The device, its primary context, current on the calling thread. */
static int open_device(struct cu_anchor *a, char *why, size_t len)
{
	const struct cu_driver *d = &a->drv;
	char call[64];
	CUresult rc;

	rc = d->cuInit(0);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuInit", rc, why, len);
	rc = d->cuDriverGetVersion(&a->drv.version);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuDriverGetVersion", rc, why, len);
	rc = d->cuDeviceGet(&a->dev, (int)a->ordinal);
	if (rc != CUDA_SUCCESS) {
		snprintf(call, sizeof(call), "cuDeviceGet(%u)", a->ordinal);
		return cu_say(a, call, rc, why, len);
	}
	rc = d->cuDevicePrimaryCtxRetain(&a->ctx, a->dev);
	if (rc != CUDA_SUCCESS) {
		a->ctx = NULL;
		return cu_say(a, "cuDevicePrimaryCtxRetain", rc, why, len);
	}
	rc = d->cuCtxSetCurrent(a->ctx);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuCtxSetCurrent", rc, why, len);
	return 0;
}

/*
 * cuMemAllocAsync draws from the device's current pool; the anchor is
 * meant to measure the default one, so it refuses a process in which
 * someone made another pool current.  The threshold at its maximum keeps
 * freed memory in the pool instead of handing it back at each
 * synchronization, as the anchor table was measured.
 */
static int open_pool(struct cu_anchor *a, char *why, size_t len)
{
	const struct cu_driver *d = &a->drv;
	cuuint64_t max = UINT64_MAX;
	CUmemoryPool cur;
	int supported = 0;
	CUresult rc;

	rc = d->cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
				     a->dev);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)", rc, why, len);
	if (!supported) {
		snprintf(why, len, "device %u does not support memory pools, so cuMemAllocAsync cannot be measured",
			 a->ordinal);
		return -1;
	}
	rc = d->cuDeviceGetDefaultMemPool(&a->pool, a->dev);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuDeviceGetDefaultMemPool", rc, why, len);
	rc = d->cuDeviceGetMemPool(&cur, a->dev);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuDeviceGetMemPool", rc, why, len);
	if (cur != a->pool) {
		snprintf(why, len, "device %u's current memory pool is not its default pool (cuDeviceSetMemPool was called), so cuMemAllocAsync would not measure the default pool",
			 a->ordinal);
		return -1;
	}
	rc = d->cuMemPoolGetAttribute(a->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
				      &a->old_threshold);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuMemPoolGetAttribute(RELEASE_THRESHOLD)", rc, why, len);
	rc = d->cuMemPoolSetAttribute(a->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max);
	if (rc != CUDA_SUCCESS)
		return cu_say(a, "cuMemPoolSetAttribute(RELEASE_THRESHOLD)", rc, why, len);
	a->threshold_set = true;
	return 0;
}

/* Non-blocking: nothing may order our streams behind the legacy stream. */
static int open_streams(struct cu_anchor *a, char *why, size_t len)
{
	a->nmade = a->nstreams < 2 ? 2 : a->nstreams;
	a->streams = calloc(a->nmade, sizeof(*a->streams));
	if (!a->streams) {
		snprintf(why, len, "out of memory for %u streams", a->nmade);
		return -1;
	}
	for (uint32_t i = 0; i < a->nmade; i++) {
		CUresult rc = a->drv.cuStreamCreate(&a->streams[i], CU_STREAM_NON_BLOCKING);

		if (rc != CUDA_SUCCESS) {
			a->streams[i] = NULL;
			return cu_say(a, "cuStreamCreate", rc, why, len);
		}
	}
	return 0;
}

static void describe(struct bench_subject *s, const struct cu_anchor *a)
{
	int major = a->drv.version / 1000, minor = a->drv.version % 1000 / 10;

	if (a->kind == BENCH_CUDA_SYNC) {
		snprintf(s->name, sizeof(s->name), "cuMemAlloc");
		snprintf(s->desc, sizeof(s->desc),
			 "cuMemAlloc_v2 / cuMemFree_v2, synchronous, primary context of device %u (%u non-blocking streams for the streams workload's memsets); CUDA driver %d.%d",
			 a->ordinal, a->nmade, major, minor);
	} else {
		snprintf(s->name, sizeof(s->name), "cuMemAllocAsync");
		snprintf(s->desc, sizeof(s->desc),
			 "cuMemAllocAsync / cuMemFreeAsync on %u non-blocking streams, default pool of device %u, release threshold UINT64_MAX; CUDA driver %d.%d",
			 a->nstreams, a->ordinal, major, minor);
	}
}

int bench_cuda_open(uint32_t ordinal, enum bench_cuda_kind kind, uint32_t nstreams,
		    struct bench_subject *s, char *why, size_t len)
{
	struct cu_anchor *a = calloc(1, sizeof(*a));

	if (!a) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	a->kind = kind;
	a->ordinal = ordinal;
	a->nstreams = nstreams ? nstreams : 1;
	if (pthread_key_create(&a->err_call, NULL)) {
		snprintf(why, len, "out of thread-specific keys");
		free(a);
		return -1;
	}
	if (pthread_key_create(&a->err_rc, NULL)) {
		snprintf(why, len, "out of thread-specific keys");
		pthread_key_delete(a->err_call);
		free(a);
		return -1;
	}
	a->keys = true;
	if (cu_driver_open(&a->drv, why, len) || open_device(a, why, len))
		goto fail;
	if (kind == BENCH_CUDA_ASYNC && open_pool(a, why, len))
		goto fail;
	/* cuMemAlloc has streams too: the streams workload queues its memsets there. */
	if (open_streams(a, why, len))
		goto fail;

	memset(s, 0, sizeof(*s));
	s->ops = kind == BENCH_CUDA_SYNC ? &sync_ops : &async_ops;
	s->priv = a;
	s->anchor = true;
	describe(s, a);
	return 0;
fail:
	anchor_free(a, kind == BENCH_CUDA_SYNC ? "cuMemAlloc" : "cuMemAllocAsync");
	return -1;
}
