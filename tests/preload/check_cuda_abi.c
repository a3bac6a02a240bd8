/* SPDX-License-Identifier: MIT */
/*
 * check_cuda_abi.c - preload/cuda_abi.h against the toolkit's cuda.h,
 * where the toolkit is installed: every value, type size and layout the
 * shim declares for itself must be the driver's.  The checks are the
 * compiler's (static_assert); the program only says so.  The two headers
 * declare the same names, so cuda.h's values are kept first and
 * cuda_abi.h's types are renamed around its inclusion.
 */
#include "config.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>

#include <cuda.h>

/* cuda.h's values, kept before cuda_abi.h defines the same names. */
enum {
	DRIVER_SUCCESS = CUDA_SUCCESS,
	DRIVER_INVALID_VALUE = CUDA_ERROR_INVALID_VALUE,
	DRIVER_OUT_OF_MEMORY = CUDA_ERROR_OUT_OF_MEMORY,
	DRIVER_NOT_INITIALIZED = CUDA_ERROR_NOT_INITIALIZED,
	DRIVER_PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
	DRIVER_RESERVED = CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
	DRIVER_USED = CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
	DRIVER_LOCATION_DEVICE = CU_MEM_LOCATION_TYPE_DEVICE,
};

/* cuda_abi.h's types under names of their own, beside cuda.h's. */
#define CUresult abi_CUresult
#define CUdevice abi_CUdevice
#define CUdeviceptr abi_CUdeviceptr
#define CUmemGenericAllocationHandle abi_CUmemGenericAllocationHandle
#define cuuint64_t abi_cuuint64_t
#define CUcontext abi_CUcontext
#define CUstream abi_CUstream
#define CUmemoryPool abi_CUmemoryPool
#define CUuuid abi_CUuuid
#define CUdriverProcAddressQueryResult abi_CUdriverProcAddressQueryResult
#undef CUDA_SUCCESS
#undef CUDA_ERROR_INVALID_VALUE
#undef CUDA_ERROR_OUT_OF_MEMORY
#undef CUDA_ERROR_NOT_INITIALIZED
#undef CU_GET_PROC_ADDRESS_DEFAULT
#undef CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#undef CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
#undef CU_MEMPOOL_ATTR_USED_MEM_CURRENT
#undef CU_MEM_LOCATION_TYPE_DEVICE
#include "preload/cuda_abi.h"

static_assert(CUDA_SUCCESS == DRIVER_SUCCESS, "CUDA_SUCCESS");
static_assert(CUDA_ERROR_INVALID_VALUE == DRIVER_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE");
static_assert(CUDA_ERROR_OUT_OF_MEMORY == DRIVER_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY");
static_assert(CUDA_ERROR_NOT_INITIALIZED == DRIVER_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED");
static_assert(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == DRIVER_PTDS, "PTDS flag");
static_assert(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == DRIVER_RESERVED, "reserved attribute");
static_assert(CU_MEMPOOL_ATTR_USED_MEM_CURRENT == DRIVER_USED, "used attribute");
static_assert(CU_MEM_LOCATION_TYPE_DEVICE == DRIVER_LOCATION_DEVICE, "device location");
static_assert(sizeof(abi_CUresult) == sizeof(enum cudaError_enum), "CUresult");
static_assert(sizeof(abi_CUdevice) == sizeof(CUdevice_v1), "CUdevice");
static_assert(sizeof(abi_CUdeviceptr) == sizeof(CUdeviceptr_v2), "CUdeviceptr");
static_assert(sizeof(abi_CUmemGenericAllocationHandle) == sizeof(CUmemGenericAllocationHandle_v1),
	      "CUmemGenericAllocationHandle");
static_assert(sizeof(abi_CUuuid) == sizeof(struct CUuuid_st), "CUuuid");
static_assert(sizeof(struct xdm_cu_alloc_prop) == sizeof(CUmemAllocationProp),
	      "CUmemAllocationProp's size");
static_assert(offsetof(struct xdm_cu_alloc_prop, location) ==
	      offsetof(CUmemAllocationProp, location), "CUmemAllocationProp's location");
static_assert(offsetof(struct xdm_cu_alloc_prop, location.id) ==
	      offsetof(CUmemAllocationProp, location.id), "CUmemLocation's id");
static_assert(offsetof(struct xdm_cu_alloc_prop, win32_handle_meta_data) ==
	      offsetof(CUmemAllocationProp, win32HandleMetaData), "win32HandleMetaData");

int main(void)
{
	printf("preload/cuda_abi.h agrees with cuda.h %d.%d\n", CUDA_VERSION / 1000,
	       CUDA_VERSION % 1000 / 10);
	return 0;
}
