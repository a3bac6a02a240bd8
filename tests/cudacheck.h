/* SPDX-License-Identifier: MIT */
/*
 * cudacheck.h - small helpers the GPU check suites share: a runtime
 * stream's native handle, a block's device pointer, synchronizing every
 * stream, and the runtime's count of queued waits.
 */
#ifndef XDM_TESTS_CUDACHECK_H
#define XDM_TESTS_CUDACHECK_H

#include "tests/cudatest.h"
#include "tests/testutil.h"

static inline CUstream ct_stream(struct xdm_runtime *rt, xdm_stream_id s)
{
	void *h = NULL;

	TU_OK(xdm_stream_handle(rt, s, &h));
	return (CUstream)h;
}

static inline CUdeviceptr ct_dev(const struct xdm_block *b)
{
	return (CUdeviceptr)b->ptr;
}

static inline void ct_sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		TU_OK(xdm_stream_synchronize(rt, s));
}

static inline uint64_t ct_waits(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	return st.waits_queued;
}

#endif /* XDM_TESTS_CUDACHECK_H */
