/* SPDX-License-Identifier: MIT */
/*
 * driver.h - the CUDA driver as one table of function pointers.
 *
 * Nothing in xdm links libcuda: the cuda platform dlopens libcuda.so.1 when
 * a runtime asks for it, so libxdm and every module load on a machine
 * without a GPU.  The table holds exactly the driver calls xdm makes; its
 * members are typed from cuda.h's prototypes (driver.c checks each one
 * against cuda.h at compile time), and each points at the ABI version that
 * cuda.h of the toolkit we build against means by the plain name.
 *
 * One table per platform instance (per runtime): dlopen is reference
 * counted, so every instance may open the library for itself and no state
 * is shared between runtimes.
 */
#ifndef XDM_CUDA_DRIVER_H
#define XDM_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

#include <xdm/module.h>

struct cuda_driver {
	void *dl;			/* dlopen handle of libcuda.so.1 */
	bool initialized;		/* cuInit was called: never dlclose */
	int version;			/* cuDriverGetVersion, e.g. 13000 */

	/* reached with dlsym: the driver has only one ABI of each */
	CUresult (*GetProcAddress)(const char *symbol, void **pfn, int cudaVersion,
				   cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus);
	CUresult (*Init)(unsigned int Flags);
	CUresult (*DriverGetVersion)(int *driverVersion);
	CUresult (*GetErrorName)(CUresult error, const char **pStr);
	CUresult (*GetErrorString)(CUresult error, const char **pStr);

	/* reached with cuGetProcAddress(base name, CUDA_VERSION) */
	CUresult (*DeviceGetCount)(int *count);
	CUresult (*DeviceGet)(CUdevice *device, int ordinal);
	CUresult (*DeviceGetName)(char *name, int len, CUdevice dev);
	CUresult (*DeviceGetUuid)(CUuuid *uuid, CUdevice dev);
	CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);
	CUresult (*DeviceGetAttribute)(int *pi, CUdevice_attribute attrib, CUdevice dev);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);
	CUresult (*CtxGetCurrent)(CUcontext *pctx);
	CUresult (*CtxSetCurrent)(CUcontext ctx);
	CUresult (*DeviceCanAccessPeer)(int *canAccessPeer, CUdevice dev, CUdevice peerDev);

	CUresult (*StreamCreate)(CUstream *phStream, unsigned int Flags);
	CUresult (*StreamDestroy)(CUstream hStream);
	CUresult (*StreamSynchronize)(CUstream hStream);
	CUresult (*StreamQuery)(CUstream hStream);
	CUresult (*StreamGetCtx)(CUstream hStream, CUcontext *pctx);
	/* Its arguments changed with the toolkit (edge data since 12.3): as cuda.h says. */
	__typeof__(&cuStreamGetCaptureInfo) StreamGetCaptureInfo;
	CUresult (*StreamWaitEvent)(CUstream hStream, CUevent hEvent, unsigned int Flags);
	CUresult (*EventCreate)(CUevent *phEvent, unsigned int Flags);
	CUresult (*EventDestroy)(CUevent hEvent);
	CUresult (*EventRecord)(CUevent hEvent, CUstream hStream);
	CUresult (*EventQuery)(CUevent hEvent);
	CUresult (*EventSynchronize)(CUevent hEvent);
	CUresult (*LaunchHostFunc)(CUstream hStream, CUhostFn fn, void *userData);
	CUresult (*MemsetD8Async)(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				  CUstream hStream);
	CUresult (*MemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
				CUstream hStream);

	/* cuda_direct */
	CUresult (*MemAlloc)(CUdeviceptr *dptr, size_t bytesize);
	CUresult (*MemFree)(CUdeviceptr dptr);

	/* cuda_async */
	CUresult (*MemAllocFromPoolAsync)(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					  CUstream hStream);
	CUresult (*MemFreeAsync)(CUdeviceptr dptr, CUstream hStream);
	CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool *pool_out, CUdevice dev);
	CUresult (*MemPoolCreate)(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
	CUresult (*MemPoolDestroy)(CUmemoryPool pool);
	CUresult (*MemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
	CUresult (*MemPoolGetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
	CUresult (*MemPoolTrimTo)(CUmemoryPool pool, size_t minBytesToKeep);
	CUresult (*MemPoolSetAccess)(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count);

	/* cuda_vmm */
	CUresult (*MemGetAllocationGranularity)(size_t *granularity,
						const CUmemAllocationProp *prop,
						CUmemAllocationGranularity_flags option);
	CUresult (*MemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
				      CUdeviceptr addr, unsigned long long flags);
	CUresult (*MemAddressFree)(CUdeviceptr ptr, size_t size);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
			      const CUmemAllocationProp *prop, unsigned long long flags);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle handle);
	CUresult (*MemMap)(CUdeviceptr ptr, size_t size, size_t offset,
			   CUmemGenericAllocationHandle handle, unsigned long long flags);
	CUresult (*MemUnmap)(CUdeviceptr ptr, size_t size);
	CUresult (*MemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				 size_t count);

	/* sharing with other processes (ipc_export.c, ipc_import.c, vmm_ipc.c) */
	CUresult (*MemGetAddressRange)(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
	CUresult (*IpcGetMemHandle)(CUipcMemHandle *pHandle, CUdeviceptr dptr);
	CUresult (*IpcOpenMemHandle)(CUdeviceptr *pdptr, CUipcMemHandle handle,
				     unsigned int Flags);
	CUresult (*IpcCloseMemHandle)(CUdeviceptr dptr);
	CUresult (*MemPoolExportToShareableHandle)(void *handle_out, CUmemoryPool pool,
						   CUmemAllocationHandleType handleType,
						   unsigned long long flags);
	CUresult (*MemPoolImportFromShareableHandle)(CUmemoryPool *pool_out, void *handle,
						     CUmemAllocationHandleType handleType,
						     unsigned long long flags);
	CUresult (*MemPoolExportPointer)(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr);
	CUresult (*MemPoolImportPointer)(CUdeviceptr *ptr_out, CUmemoryPool pool,
					 CUmemPoolPtrExportData *shareData);
	CUresult (*MemPoolGetAccess)(CUmemAccess_flags *flags, CUmemoryPool memPool,
				     CUmemLocation *location);
	CUresult (*MemExportToShareableHandle)(void *shareableHandle,
					       CUmemGenericAllocationHandle handle,
					       CUmemAllocationHandleType handleType,
					       unsigned long long flags);
	CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *handle,
						 void *osHandle,
						 CUmemAllocationHandleType shHandleType);
};

/*
 * Open libcuda.so.1, call cuInit(0) and fill the table.  XDM_E_NO_DEVICE
 * with a sentence when there is no driver, no device, or a driver too old
 * for the table.  On failure nothing is left open that can be closed.
 */
enum xdm_status cuda_driver_open(struct cuda_driver *d);
void cuda_driver_close(struct cuda_driver *d);

/*
 * Report a failed driver call: XDM_E_DRIVER carrying rc, with the message
 * "<what, formatted>: CUDA_ERROR_NAME: the driver's sentence".
 */
enum xdm_status cuda_fail(const struct cuda_driver *d, CUresult rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "CUDA_ERROR_NAME: sentence" for rc, into buf; returns buf. */
const char *cuda_error_text(const struct cuda_driver *d, CUresult rc, char *buf, size_t len);

#endif /* XDM_CUDA_DRIVER_H */
