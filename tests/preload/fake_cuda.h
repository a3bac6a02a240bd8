/* SPDX-License-Identifier: MIT */
/*
 * fake_cuda.h - what the fake libcuda.so.1 (fake_cuda.c) exports: the
 * driver's entry points by their ABI names, with the types of
 * preload/cuda_abi.h, and the test hooks the driver does not have.
 *
 * The fake library declares its exports from here, and
 * preload_user_linked, built against the fake as a program built with
 * -lcuda is built against the driver, calls them by these names.
 */
#ifndef XDM_TESTS_FAKE_CUDA_H
#define XDM_TESTS_FAKE_CUDA_H

#include "preload/cuda_abi.h"

/* The codes the fake returns beyond those cuda_abi.h names. */
#define FAKE_CUDA_ERROR_NO_DEVICE 100
#define FAKE_CUDA_ERROR_INVALID_DEVICE 101
#define FAKE_CUDA_ERROR_NOT_FOUND 500

/* cuGetProcAddress's status: CUdriverProcAddressQueryResult. */
#define FAKE_CU_GET_PROC_ADDRESS_SUCCESS 0
#define FAKE_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1

/* cuMemAllocManaged's flags: CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST. */
#define FAKE_CU_MEM_ATTACH_GLOBAL 1
#define FAKE_CU_MEM_ATTACH_HOST 2

CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int *version);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuCtxGetDevice(CUdevice *dev);

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
			    unsigned int elem);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);

/* The stream-ordered calls; _ptsz is the per-thread default stream's twin. */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
				 CUstream stream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
				      CUstream stream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);

/* Virtual memory management: physical allocations by handle. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
		     const struct xdm_cu_alloc_prop *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status);

/*
 * Test hooks.  fakeCudaSetDevice makes a visible ordinal the calling
 * thread's current device (what cuCtxGetDevice answers and the
 * allocations charge); fakeCudaUsed says how many bytes the fake holds on
 * a physical device (0 for one that does not exist); fakeCudaTotal, the
 * bytes of each device (the fake NVML, fake_nvml.c, reads both);
 * fakeCudaCalls says how many times the exported function of that ABI
 * name ran.
 */
void fakeCudaSetDevice(int ordinal);
unsigned long long fakeCudaUsed(int physical);
unsigned long long fakeCudaTotal(void);
unsigned long long fakeCudaCalls(const char *symbol);

#endif /* XDM_TESTS_FAKE_CUDA_H */
