/* SPDX-License-Identifier: MIT */
/*
 * cuda_touch.c - the streams workload's touch for an xdm runtime on
 * the cuda platform: one cuMemsetD8Async over the block, queued on the
 * runtime's own stream (its native handle, from xdm_stream_handle()).
 *
 * The bench reaches the driver the way the anchors do, by dlopen, with a
 * reference of its own on the device's primary context, which is the
 * context of the cuda platform's streams.  A memset needs a current
 * context, and xdm's calls may leave the thread with the context it had
 * before them (none, on a thread that never called the driver), so the
 * touch makes the primary context current when it is not: the same one
 * cuCtxGetCurrent that the anchors' touch pays.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cuda_anchors.h"

struct bench_cuda_touch {
	struct cu_driver drv;
	CUdevice dev;
	CUcontext ctx;		/* the primary context, retained while non-NULL */
};

static int touch_say(const struct bench_cuda_touch *t, const char *call, CUresult rc,
		     char *why, size_t len)
{
	char text[256];

	cu_text(&t->drv, rc, text, sizeof(text));
	snprintf(why, len, "%s: %s", call, text);
	return -1;
}

void bench_cuda_touch_close(struct bench_cuda_touch *t)
{
	CUresult rc;

	if (!t)
		return;
	if (t->ctx) {
		rc = t->drv.cuDevicePrimaryCtxRelease(t->dev);
		if (rc != CUDA_SUCCESS) {
			char text[256];

			cu_text(&t->drv, rc, text, sizeof(text));
			fprintf(stderr, "xdm-bench: warning: xdm: cuDevicePrimaryCtxRelease at the end failed: %s\n",
				text);
		}
	}
	/* The library stays open: see cu_driver_open(). */
	free(t);
}

int bench_cuda_touch_open(uint32_t ordinal, struct bench_cuda_touch **out, char *why,
			  size_t len)
{
	struct bench_cuda_touch *t = calloc(1, sizeof(*t));
	char call[64];
	CUresult rc;

	if (!t) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	if (cu_driver_open(&t->drv, why, len))
		goto fail;
	/* The runtime ran cuInit already; a second call only says it is done. */
	rc = t->drv.cuInit(0);
	if (rc != CUDA_SUCCESS) {
		touch_say(t, "cuInit", rc, why, len);
		goto fail;
	}
	rc = t->drv.cuDeviceGet(&t->dev, (int)ordinal);
	if (rc != CUDA_SUCCESS) {
		snprintf(call, sizeof(call), "cuDeviceGet(%u)", ordinal);
		touch_say(t, call, rc, why, len);
		goto fail;
	}
	rc = t->drv.cuDevicePrimaryCtxRetain(&t->ctx, t->dev);
	if (rc != CUDA_SUCCESS) {
		t->ctx = NULL;
		touch_say(t, "cuDevicePrimaryCtxRetain", rc, why, len);
		goto fail;
	}
	*out = t;
	return 0;
fail:
	bench_cuda_touch_close(t);
	return -1;
}

int bench_cuda_touch(struct bench_cuda_touch *t, uint64_t ptr, size_t bytes, void *stream,
		     char *why, size_t len)
{
	CUcontext cur = NULL;
	CUresult rc;

	rc = t->drv.cuCtxGetCurrent(&cur);
	if (rc != CUDA_SUCCESS)
		return touch_say(t, "cuCtxGetCurrent", rc, why, len);
	if (cur != t->ctx) {
		rc = t->drv.cuCtxSetCurrent(t->ctx);
		if (rc != CUDA_SUCCESS)
			return touch_say(t, "cuCtxSetCurrent", rc, why, len);
	}
	rc = t->drv.cuMemsetD8Async((CUdeviceptr)ptr, 0, bytes, (CUstream)stream);
	return rc == CUDA_SUCCESS ? 0 : touch_say(t, "cuMemsetD8Async", rc, why, len);
}
