/* SPDX-License-Identifier: MIT */
/*
 * hooks.c - the driver calls the shim stands in for.
 *
 * Each hook charges the budget of the allocation's device before it asks
 * the driver, gives the charge back if the driver fails, and records the
 * pointer or handle with its size (table.c); the matching free looks it up
 * and gives back exactly that.  A refusal is CUDA_ERROR_OUT_OF_MEMORY, the
 * driver's own answer when memory runs out, so every framework's own OOM
 * path runs.
 *
 * Which device: the memory's own for cuMemCreate (its location), the
 * current context's for everything else (cuMemAllocFromPoolAsync from a
 * pool of another device is charged to the current one: xdm-preload(7)).
 * Stream-ordered frees give their bytes back when the free is issued, not
 * when the stream reaches it.
 *
 * Each hook is exported under the name libcuda exports, for programs
 * linked with -lcuda; dlsym and cuGetProcAddress hand out the same
 * functions (driver.c).
 */
#include "config.h"

#include "preload/preload.h"

#define REAL(call, type) ((type)preload_real(call, false))
#define REAL_PTSZ(call, type, ptsz) ((type)preload_real(call, ptsz))

/* Past the table's capacity an allocation is not counted: say so once. */
static void untracked(struct preload_device *d, uint64_t bytes)
{
	static _Atomic bool said;

	preload_uncharge(d, bytes);
	if (!atomic_exchange_explicit(&said, true, memory_order_relaxed))
		preload_say("more live allocations than the shim can record: later ones "
			    "are not counted");
}

/* After the driver answered an allocation that was charged. */
static CUresult settle(struct preload_device *d, CUresult rc, uint64_t key,
		       enum preload_kind kind, uint64_t bytes)
{
	if (!d)
		return rc;
	if (rc != CUDA_SUCCESS)
		preload_uncharge(d, bytes);
	else if (!preload_track(key, kind, bytes, preload_device_index(d)))
		untracked(d, bytes);
	return rc;
}

/* Charge bytes to the current device; its result in *rc. */
static struct preload_device *admit(uint64_t bytes, CUresult *rc)
{
	struct preload_device *d = preload_device_current();

	*rc = d ? preload_charge(d, bytes) : CUDA_SUCCESS;
	return d;
}

/*
 * A free: the record is taken before the driver is asked, so that the
 * address, once free, can be recorded again by another thread's
 * allocation; a free the driver refuses puts the record back.
 */
struct held {
	bool known;
	unsigned int device;
	uint64_t bytes;
};

static struct held take(uint64_t key, enum preload_kind kind)
{
	struct held h = { 0 };

	h.known = preload_untrack(key, kind, &h.bytes, &h.device);
	return h;
}

static CUresult give_back(uint64_t key, enum preload_kind kind, struct held h, CUresult rc)
{
	struct preload_device *d = preload_device_at(h.device);

	if (!h.known || !d)
		return rc;
	if (rc == CUDA_SUCCESS)
		preload_uncharge(d, h.bytes);
	else if (!preload_track(key, kind, h.bytes, h.device))
		untracked(d, h.bytes);
	return rc;
}

/* ---- the synchronous calls ---------------------------------------------- */

PRELOAD_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	cu_mem_alloc_fn real = REAL(PRELOAD_MEM_ALLOC, cu_mem_alloc_fn);
	struct preload_device *d;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	d = admit(bytes, &rc);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = real(dptr, bytes);
	return settle(d, rc, rc == CUDA_SUCCESS ? *dptr : 0, PRELOAD_PTR, bytes);
}

/* The size is the driver's pitch times the height: charged once known. */
PRELOAD_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
					   size_t height, unsigned int elem)
{
	cu_mem_alloc_pitch_fn real = REAL(PRELOAD_MEM_ALLOC_PITCH, cu_mem_alloc_pitch_fn);
	cu_mem_free_fn real_free = REAL(PRELOAD_MEM_FREE, cu_mem_free_fn);
	struct preload_device *d;
	uint64_t bytes;
	CUresult rc;

	if (!real || !real_free)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(dptr, pitch, width, height, elem);
	d = rc == CUDA_SUCCESS ? preload_device_current() : NULL;
	if (!d)
		return rc;
	bytes = (uint64_t)*pitch * height;
	rc = preload_charge(d, bytes);
	if (rc != CUDA_SUCCESS) {
		real_free(*dptr);
		return rc;
	}
	return settle(d, rc, *dptr, PRELOAD_PTR, bytes);
}

/* Managed memory may migrate: it is charged to the current device. */
PRELOAD_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
	cu_mem_alloc_managed_fn real = REAL(PRELOAD_MEM_ALLOC_MANAGED, cu_mem_alloc_managed_fn);
	struct preload_device *d;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	d = admit(bytes, &rc);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = real(dptr, bytes, flags);
	return settle(d, rc, rc == CUDA_SUCCESS ? *dptr : 0, PRELOAD_PTR, bytes);
}

PRELOAD_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	cu_mem_free_fn real = REAL(PRELOAD_MEM_FREE, cu_mem_free_fn);
	struct held h;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	h = take(dptr, PRELOAD_PTR);
	return give_back(dptr, PRELOAD_PTR, h, real(dptr));
}

/* ---- the stream-ordered calls, each also in its per-thread variant ------ */

/* A stream-ordered allocation answered: its pool is known and looked at. */
static CUresult settle_pooled(struct preload_device *d, CUresult rc, CUdeviceptr *dptr,
			      CUmemoryPool pool, uint64_t bytes)
{
	if (d && rc == CUDA_SUCCESS) {
		preload_pool_seen(d, pool);
		preload_pools_tick(d);
	}
	return settle(d, rc, rc == CUDA_SUCCESS ? *dptr : 0, PRELOAD_PTR, bytes);
}

static CUresult alloc_async(bool ptsz, CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	cu_mem_alloc_async_fn real = REAL_PTSZ(PRELOAD_MEM_ALLOC_ASYNC, cu_mem_alloc_async_fn,
					       ptsz);
	struct preload_device *d;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	d = admit(bytes, &rc);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = real(dptr, bytes, stream);
	return settle_pooled(d, rc, dptr, NULL, bytes);
}

static CUresult alloc_from_pool_async(bool ptsz, CUdeviceptr *dptr, size_t bytes,
				      CUmemoryPool pool, CUstream stream)
{
	cu_mem_alloc_from_pool_async_fn real =
		REAL_PTSZ(PRELOAD_MEM_ALLOC_FROM_POOL_ASYNC, cu_mem_alloc_from_pool_async_fn,
			  ptsz);
	struct preload_device *d;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	d = admit(bytes, &rc);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = real(dptr, bytes, pool, stream);
	return settle_pooled(d, rc, dptr, pool, bytes);
}

static CUresult free_async(bool ptsz, CUdeviceptr dptr, CUstream stream)
{
	cu_mem_free_async_fn real = REAL_PTSZ(PRELOAD_MEM_FREE_ASYNC, cu_mem_free_async_fn,
					      ptsz);
	struct preload_device *d;
	struct held h;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	h = take(dptr, PRELOAD_PTR);
	rc = give_back(dptr, PRELOAD_PTR, h, real(dptr, stream));
	/* A free is when a pool starts to keep memory. */
	d = h.known && rc == CUDA_SUCCESS ? preload_device_at(h.device) : NULL;
	if (d)
		preload_pools_tick(d);
	return rc;
}

PRELOAD_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	return alloc_async(false, dptr, bytes, stream);
}

PRELOAD_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	return alloc_async(true, dptr, bytes, stream);
}

PRELOAD_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
						CUmemoryPool pool, CUstream stream)
{
	return alloc_from_pool_async(false, dptr, bytes, pool, stream);
}

PRELOAD_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
						     CUmemoryPool pool, CUstream stream)
{
	return alloc_from_pool_async(true, dptr, bytes, pool, stream);
}

PRELOAD_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
	return free_async(false, dptr, stream);
}

PRELOAD_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
	return free_async(true, dptr, stream);
}

/* ---- virtual memory management: the physical allocation is charged ------ */

PRELOAD_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
				    const struct xdm_cu_alloc_prop *prop, unsigned long long flags)
{
	cu_mem_create_fn real = REAL(PRELOAD_MEM_CREATE, cu_mem_create_fn);
	struct preload_device *d = NULL;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	/* Host memory made through cuMemCreate is not the device's. */
	if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		d = preload_device_get(prop->location.id);
		rc = d ? preload_charge(d, bytes) : CUDA_SUCCESS;
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	rc = real(handle, bytes, prop, flags);
	return settle(d, rc, rc == CUDA_SUCCESS ? *handle : 0, PRELOAD_HANDLE, bytes);
}

PRELOAD_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	cu_mem_release_fn real = REAL(PRELOAD_MEM_RELEASE, cu_mem_release_fn);
	struct held h;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	h = take(handle, PRELOAD_HANDLE);
	return give_back(handle, PRELOAD_HANDLE, h, real(handle));
}

/* ---- what the program sees ---------------------------------------------- */

/* The budget's limit as the total, its room as what is free (if less). */
PRELOAD_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	cu_mem_get_info_fn real = REAL(PRELOAD_MEM_GET_INFO, cu_mem_get_info_fn);
	struct preload_device *d;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(free_bytes, total_bytes);
	if (rc != CUDA_SUCCESS)
		return rc;
	d = preload_device_current();
	if (d)
		preload_clip_info(d, free_bytes, total_bytes);
	return rc;
}

/* ---- lookups through the driver ----------------------------------------- */

PRELOAD_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
					    cuuint64_t flags,
					    CUdriverProcAddressQueryResult *status)
{
	cu_get_proc_address_fn real = REAL(PRELOAD_GET_PROC_ADDRESS, cu_get_proc_address_fn);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cuda_version, flags, status);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = preload_hook_for(symbol, *pfn, cuda_version > 0 ? cuda_version : 1,
					flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	return rc;
}

/* The older lookup, without the status (CUDA 11). */
PRELOAD_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
					 cuuint64_t flags)
{
	cu_get_proc_address_v1_fn real = REAL(PRELOAD_GET_PROC_ADDRESS_V1,
					      cu_get_proc_address_v1_fn);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cuda_version, flags);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = preload_hook_for(symbol, *pfn, cuda_version > 0 ? cuda_version : 1,
					flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	return rc;
}

/*
 * The calls, with the CUDA version from which cuGetProcAddress hands out
 * each hook's ABI for the base name (cuda.h's _v2 names date from 3.2;
 * cuGetProcAddress took its status argument in 12.0).
 */
#define ENTRY(abi_, base_, since_, until_, ptsz_, hook_, hook_ptsz_) \
	{ .lib = "libcuda.so.1", .abi = abi_, .base = base_, .ptsz = ptsz_, .since = since_, \
	  .until = until_, .hook = (void *)(hook_), .hook_ptsz = (void *)(hook_ptsz_) }
/* NVML's calls: found by dlsym only. */
#define NVML_ENTRY(abi_, hook_) \
	{ .lib = "libnvidia-ml.so.1", .abi = abi_, .hook = (void *)(hook_) }

struct preload_entry preload_entries[PRELOAD_CALL_COUNT] = {
	[PRELOAD_MEM_ALLOC] =
		ENTRY("cuMemAlloc_v2", "cuMemAlloc", 3020, 0, NULL, cuMemAlloc_v2, NULL),
	[PRELOAD_MEM_ALLOC_PITCH] =
		ENTRY("cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, 0, NULL,
		      cuMemAllocPitch_v2, NULL),
	[PRELOAD_MEM_ALLOC_MANAGED] =
		ENTRY("cuMemAllocManaged", "cuMemAllocManaged", 6000, 0, NULL,
		      cuMemAllocManaged, NULL),
	[PRELOAD_MEM_FREE] =
		ENTRY("cuMemFree_v2", "cuMemFree", 3020, 0, NULL, cuMemFree_v2, NULL),
	[PRELOAD_MEM_ALLOC_ASYNC] =
		ENTRY("cuMemAllocAsync", "cuMemAllocAsync", 11020, 0, "cuMemAllocAsync_ptsz",
		      cuMemAllocAsync, cuMemAllocAsync_ptsz),
	[PRELOAD_MEM_ALLOC_FROM_POOL_ASYNC] =
		ENTRY("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, 0,
		      "cuMemAllocFromPoolAsync_ptsz", cuMemAllocFromPoolAsync,
		      cuMemAllocFromPoolAsync_ptsz),
	[PRELOAD_MEM_FREE_ASYNC] =
		ENTRY("cuMemFreeAsync", "cuMemFreeAsync", 11020, 0, "cuMemFreeAsync_ptsz",
		      cuMemFreeAsync, cuMemFreeAsync_ptsz),
	[PRELOAD_MEM_CREATE] =
		ENTRY("cuMemCreate", "cuMemCreate", 10020, 0, NULL, cuMemCreate, NULL),
	[PRELOAD_MEM_RELEASE] =
		ENTRY("cuMemRelease", "cuMemRelease", 10020, 0, NULL, cuMemRelease, NULL),
	[PRELOAD_MEM_GET_INFO] =
		ENTRY("cuMemGetInfo_v2", "cuMemGetInfo", 3020, 0, NULL, cuMemGetInfo_v2, NULL),
	[PRELOAD_GET_PROC_ADDRESS] =
		ENTRY("cuGetProcAddress_v2", "cuGetProcAddress", 12000, 0, NULL,
		      cuGetProcAddress_v2, NULL),
	[PRELOAD_GET_PROC_ADDRESS_V1] =
		ENTRY("cuGetProcAddress", "cuGetProcAddress", 11030, 12000, NULL,
		      cuGetProcAddress, NULL),
	[PRELOAD_NVML_MEMORY_INFO] =
		NVML_ENTRY("nvmlDeviceGetMemoryInfo", nvmlDeviceGetMemoryInfo),
	[PRELOAD_NVML_MEMORY_INFO_V2] =
		NVML_ENTRY("nvmlDeviceGetMemoryInfo_v2", nvmlDeviceGetMemoryInfo_v2),
};
