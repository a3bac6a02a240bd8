/* SPDX-License-Identifier: MIT */
/*
 * cuda_abi.h - the few facts of the CUDA driver's ABI that the preload
 * shim needs: types, codes and the prototypes of the calls it wraps.
 *
 * The shim is built and tested where no CUDA toolkit is installed (CI
 * runs it over a fake libcuda.so.1, tests/preload/fake_cuda.c), so it
 * cannot include cuda.h.  These declarations are the driver's stable C
 * ABI: plain integers, pointers and one struct whose layout the driver
 * promises.  Where cuda.h is installed, tests/preload/check_cuda_abi.c
 * checks every value and layout here against it.
 */
#ifndef XDM_PRELOAD_CUDA_ABI_H
#define XDM_PRELOAD_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct { char bytes[16]; } CUuuid;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3

/* cuGetProcAddress: flags and the status it reports. */
#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (1 << 1)
typedef int CUdriverProcAddressQueryResult;

/* CUmemPool_attribute values the shim reads. */
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CU_MEMPOOL_ATTR_USED_MEM_CURRENT 7

/* CUmemLocationType: where a cuMemCreate allocation lives. */
#define CU_MEM_LOCATION_TYPE_DEVICE 1

struct xdm_cu_mem_location {
	int type;
	int id;
};

/* CUmemAllocationProp: cuMemCreate's description of the allocation. */
struct xdm_cu_alloc_prop {
	int type;
	int requested_handle_types;
	struct xdm_cu_mem_location location;
	void *win32_handle_meta_data;
	unsigned char alloc_flags[8];
};

/* The calls the shim wraps or asks, by the ABI name cuda.h maps them to. */
typedef CUresult (*cu_mem_alloc_fn)(CUdeviceptr *dptr, size_t bytes);
typedef CUresult (*cu_mem_alloc_pitch_fn)(CUdeviceptr *dptr, size_t *pitch, size_t width,
					  size_t height, unsigned int elem);
typedef CUresult (*cu_mem_alloc_managed_fn)(CUdeviceptr *dptr, size_t bytes, unsigned int flags);
typedef CUresult (*cu_mem_free_fn)(CUdeviceptr dptr);
typedef CUresult (*cu_mem_alloc_async_fn)(CUdeviceptr *dptr, size_t bytes, CUstream stream);
typedef CUresult (*cu_mem_alloc_from_pool_async_fn)(CUdeviceptr *dptr, size_t bytes,
						    CUmemoryPool pool, CUstream stream);
typedef CUresult (*cu_mem_free_async_fn)(CUdeviceptr dptr, CUstream stream);
typedef CUresult (*cu_mem_create_fn)(CUmemGenericAllocationHandle *handle, size_t bytes,
				     const struct xdm_cu_alloc_prop *prop,
				     unsigned long long flags);
typedef CUresult (*cu_mem_release_fn)(CUmemGenericAllocationHandle handle);
typedef CUresult (*cu_mem_get_info_fn)(size_t *free_bytes, size_t *total_bytes);
typedef CUresult (*cu_get_proc_address_fn)(const char *symbol, void **pfn, int cuda_version,
					   cuuint64_t flags,
					   CUdriverProcAddressQueryResult *status);
typedef CUresult (*cu_get_proc_address_v1_fn)(const char *symbol, void **pfn, int cuda_version,
					      cuuint64_t flags);
typedef CUresult (*cu_ctx_get_device_fn)(CUdevice *dev);
typedef CUresult (*cu_device_get_uuid_fn)(CUuuid *uuid, CUdevice dev);
typedef CUresult (*cu_device_total_mem_fn)(size_t *bytes, CUdevice dev);
typedef CUresult (*cu_device_get_default_mem_pool_fn)(CUmemoryPool *pool, CUdevice dev);
typedef CUresult (*cu_mem_pool_get_attribute_fn)(CUmemoryPool pool, int attr, void *value);

#endif /* XDM_PRELOAD_CUDA_ABI_H */
