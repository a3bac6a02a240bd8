/* SPDX-License-Identifier: MIT */
/*
 * cuda_anchors.h - what the driver anchors of xdm-bench share: the table of
 * driver calls they reach through dlopen, and the state of one anchor.
 * Included only where configure found cuda.h (XDM_BENCH_CUDA).
 */
#ifndef XDM_TOOLS_BENCH_CUDA_ANCHORS_H
#define XDM_TOOLS_BENCH_CUDA_ANCHORS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "bench.h"

/*
 * The driver calls the anchors make, by their cuda.h names.  cuda.h maps
 * several names to versioned ABI symbols (cuMemAlloc to cuMemAlloc_v2,
 * cuStreamDestroy to cuStreamDestroy_v2, ...).  The argument of each X() is
 * macro-expanded before X sees it, so the member, its type (taken from
 * cuda.h's own prototype with __typeof__, never retyped by hand) and the
 * string dlsym looks up all name the versioned symbol, and a call written
 * d->cuMemAlloc(...) expands to the same member.
 */
#define CU_CALLS(X)							\
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
	X(cuDeviceGet) X(cuDeviceGetAttribute)				\
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)	\
	X(cuCtxGetCurrent) X(cuCtxSetCurrent)				\
	X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)	\
	X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) \
	X(cuMemAlloc) X(cuMemFree) X(cuMemAllocAsync) X(cuMemFreeAsync)	\
	X(cuMemsetD8Async)						\
	X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool)		\
	X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute) X(cuMemPoolTrimTo)

#define CU_STR_(x) #x
#define CU_STR(x) CU_STR_(x)
#define CU_MEMBER(fn) __typeof__(fn) *fn;

struct cu_driver {
	void *lib;
	int version;		/* cuDriverGetVersion: 13000 is 13.0 */
	CU_CALLS(CU_MEMBER)
};

struct cu_anchor {
	struct cu_driver drv;
	enum bench_cuda_kind kind;
	uint32_t ordinal;
	CUdevice dev;
	CUcontext ctx;		/* the primary context, retained while non-NULL */
	CUstream *streams;	/* both kinds: the streams workload touches blocks on them */
	uint32_t nstreams;	/* stream_count(): the xdm runtime's count */
	uint32_t nmade;		/* at least 2: event_edge needs a pair */
	CUmemoryPool pool;	/* the device's default pool (async only) */
	cuuint64_t old_threshold;	/* restored at destroy */
	bool threshold_set;
	/*
	 * The calling thread's last failure, for strerror(): the call's name
	 * and its CUresult, one key each, so that a failing thread allocates
	 * nothing and no thread's value ever needs freeing.
	 */
	pthread_key_t err_call, err_rc;
	bool keys;
};

/* cuda_driver.c */
/* Opens libcuda.so.1 and fills d; -1 with the reason in why. */
int cu_driver_open(struct cu_driver *d, char *why, size_t len);
/* "CUDA_ERROR_X: the driver's sentence" for rc, into buf. */
void cu_text(const struct cu_driver *d, CUresult rc, char *buf, size_t len);
/* Records why the calling thread failed, for strerror(); returns -1. */
int cu_fail(struct cu_anchor *a, const char *call, CUresult rc);
/* Makes the anchor's primary context current on the calling thread; 0 or -1. */
int cu_make_current(struct cu_anchor *a);
/* A warning on stderr for a failed call where nothing can be done but say so. */
void cu_warn(const struct cu_anchor *a, const char *name, const char *call, CUresult rc);

/* subject_cuda.c: the settle op, which event_edge runs after a failure too. */
int cu_settle(struct bench_subject *s);

#endif /* XDM_TOOLS_BENCH_CUDA_ANCHORS_H */
