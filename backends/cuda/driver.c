/* SPDX-License-Identifier: MIT */
/*
 * driver.c - opening libcuda.so.1 and filling the driver table.
 *
 * cuda.h maps most plain names to versioned ABIs (cuMemAlloc is
 * cuMemAlloc_v2, cuStreamDestroy is cuStreamDestroy_v2); dlsym("cuMemAlloc")
 * would find the oldest ABI instead.  So only five entry points are taken
 * with dlsym, each by the name cuda.h maps it to (stringified after macro
 * expansion), and everything else is asked of cuGetProcAddress by its base
 * name for CUDA_VERSION, the toolkit we compile against: the driver then
 * hands out exactly the ABI whose prototype cuda.h declares.
 *
 * cuInit runs here, from the platform's init, never from a constructor:
 * loading the module must stay harmless on a machine without a GPU.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"

#define CUDA_STR(x) #x
#define CUDA_XSTR(x) CUDA_STR(x)

/*
 * Taken with dlsym before cuInit, which cuGetProcAddress may need; the
 * name is cuda.h's expansion ("cuGetProcAddress_v2", "cuInit").
 */
#define CUDA_DLSYM_SYMBOLS(X)				\
	X(DriverGetVersion, cuDriverGetVersion)		\
	X(GetProcAddress, cuGetProcAddress)		\
	X(Init, cuInit)					\
	X(GetErrorName, cuGetErrorName)			\
	X(GetErrorString, cuGetErrorString)

/* Asked of cuGetProcAddress by base name (#fn does not expand fn). */
#define CUDA_PROC_SYMBOLS(X)					\
	X(DeviceGetCount, cuDeviceGetCount)			\
	X(DeviceGet, cuDeviceGet)				\
	X(DeviceGetName, cuDeviceGetName)			\
	X(DeviceGetUuid, cuDeviceGetUuid)			\
	X(DeviceTotalMem, cuDeviceTotalMem)			\
	X(DeviceGetAttribute, cuDeviceGetAttribute)		\
	X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)	\
	X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease)	\
	X(CtxGetCurrent, cuCtxGetCurrent)			\
	X(CtxSetCurrent, cuCtxSetCurrent)			\
	X(DeviceCanAccessPeer, cuDeviceCanAccessPeer)		\
	X(StreamCreate, cuStreamCreate)				\
	X(StreamDestroy, cuStreamDestroy)			\
	X(StreamSynchronize, cuStreamSynchronize)		\
	X(StreamQuery, cuStreamQuery)				\
	X(StreamGetCtx, cuStreamGetCtx)				\
	X(StreamGetCaptureInfo, cuStreamGetCaptureInfo)		\
	X(StreamWaitEvent, cuStreamWaitEvent)			\
	X(EventCreate, cuEventCreate)				\
	X(EventDestroy, cuEventDestroy)				\
	X(EventRecord, cuEventRecord)				\
	X(EventQuery, cuEventQuery)				\
	X(EventSynchronize, cuEventSynchronize)			\
	X(LaunchHostFunc, cuLaunchHostFunc)			\
	X(MemsetD8Async, cuMemsetD8Async)			\
	X(MemcpyAsync, cuMemcpyAsync)				\
	X(MemAlloc, cuMemAlloc)					\
	X(MemFree, cuMemFree)					\
	X(MemAllocFromPoolAsync, cuMemAllocFromPoolAsync)	\
	X(MemFreeAsync, cuMemFreeAsync)				\
	X(DeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool)	\
	X(MemPoolCreate, cuMemPoolCreate)			\
	X(MemPoolDestroy, cuMemPoolDestroy)			\
	X(MemPoolSetAttribute, cuMemPoolSetAttribute)		\
	X(MemPoolGetAttribute, cuMemPoolGetAttribute)		\
	X(MemPoolTrimTo, cuMemPoolTrimTo)			\
	X(MemPoolSetAccess, cuMemPoolSetAccess)			\
	X(MemGetAllocationGranularity, cuMemGetAllocationGranularity) \
	X(MemAddressReserve, cuMemAddressReserve)		\
	X(MemAddressFree, cuMemAddressFree)			\
	X(MemCreate, cuMemCreate)				\
	X(MemRelease, cuMemRelease)				\
	X(MemMap, cuMemMap)					\
	X(MemUnmap, cuMemUnmap)					\
	X(MemSetAccess, cuMemSetAccess)				\
	X(MemGetAddressRange, cuMemGetAddressRange)		\
	X(IpcGetMemHandle, cuIpcGetMemHandle)			\
	X(IpcOpenMemHandle, cuIpcOpenMemHandle)			\
	X(IpcCloseMemHandle, cuIpcCloseMemHandle)		\
	X(MemPoolExportToShareableHandle, cuMemPoolExportToShareableHandle) \
	X(MemPoolImportFromShareableHandle, cuMemPoolImportFromShareableHandle) \
	X(MemPoolExportPointer, cuMemPoolExportPointer)		\
	X(MemPoolImportPointer, cuMemPoolImportPointer)		\
	X(MemPoolGetAccess, cuMemPoolGetAccess)			\
	X(MemExportToShareableHandle, cuMemExportToShareableHandle) \
	X(MemImportFromShareableHandle, cuMemImportFromShareableHandle)

/*
 * Each member of the table must have the type of cuda.h's declaration of
 * its function: assigning the function's address to the member inside
 * sizeof is checked by the compiler and never evaluated, so it costs
 * nothing and references no driver symbol at link time.  The pragma makes
 * a mismatch an error even without -Werror.
 */
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#define CUDA_CHECK_TYPE(field, fn)						\
	_Static_assert(sizeof(((struct cuda_driver *)0)->field = &fn) > 0,	\
		       "driver table member " #field " is not typed as " #fn " in cuda.h");
CUDA_DLSYM_SYMBOLS(CUDA_CHECK_TYPE)
CUDA_PROC_SYMBOLS(CUDA_CHECK_TYPE)

/* Function pointers travel through void * (dlsym, cuGetProcAddress). */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
	       "function pointers must have the size of void *");

struct cuda_symbol {
	const char *name;
	size_t offset;
};

#define CUDA_DLSYM_ENTRY(field, fn) { CUDA_XSTR(fn), offsetof(struct cuda_driver, field) },
#define CUDA_PROC_ENTRY(field, fn) { #fn, offsetof(struct cuda_driver, field) },

static const struct cuda_symbol cuda_dlsym_symbols[] = { CUDA_DLSYM_SYMBOLS(CUDA_DLSYM_ENTRY) };
static const struct cuda_symbol cuda_proc_symbols[] = { CUDA_PROC_SYMBOLS(CUDA_PROC_ENTRY) };

#define CUDA_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Store a resolved address into its (typed) member of the table. */
static void cuda_store(struct cuda_driver *d, const struct cuda_symbol *sym, void *fn)
{
	memcpy((char *)d + sym->offset, &fn, sizeof(fn));
}

const char *cuda_error_text(const struct cuda_driver *d, CUresult rc, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;

	if (d->GetErrorName && d->GetErrorName(rc, &name) != CUDA_SUCCESS)
		name = NULL;
	if (d->GetErrorString && d->GetErrorString(rc, &text) != CUDA_SUCCESS)
		text = NULL;
	if (name)
		snprintf(buf, len, "%s: %s", name, text ? text : "no description");
	else
		snprintf(buf, len, "CUDA error %d, which this driver cannot name", (int)rc);
	return buf;
}

enum xdm_status cuda_fail(const struct cuda_driver *d, CUresult rc, const char *fmt, ...)
{
	char what[256], text[192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return xdm_error_set_driver((int)rc, "%s: %s", what,
				    cuda_error_text(d, rc, text, sizeof(text)));
}

/* what: the missing piece, or NULL when the version alone says it. */
static enum xdm_status cuda_too_old(struct cuda_driver *d, const char *what)
{
	char have[32] = "an unknown version of CUDA";

	/* cuDriverGetVersion needs no cuInit; it is resolved first. */
	if (d->version <= 0 && d->DriverGetVersion &&
	    d->DriverGetVersion(&d->version) != CUDA_SUCCESS)
		d->version = 0;
	if (d->version > 0)
		snprintf(have, sizeof(have), "CUDA %d.%d", d->version / 1000,
			 d->version % 1000 / 10);
	return xdm_error_set(XDM_E_NO_DEVICE,
			     "the CUDA driver is too old: %s%sit supports %s, and xdm's cuda "
			     "module was built for CUDA %d.%d", what ? what : "", what ? "; " : "",
			     have, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
}

static enum xdm_status cuda_resolve_dlsym(struct cuda_driver *d)
{
	char what[128];

	for (size_t i = 0; i < CUDA_ARRAY_SIZE(cuda_dlsym_symbols); i++) {
		const struct cuda_symbol *sym = &cuda_dlsym_symbols[i];
		void *fn = dlsym(d->dl, sym->name);

		if (!fn) {
			snprintf(what, sizeof(what), "libcuda.so.1 has no %s", sym->name);
			return cuda_too_old(d, what);
		}
		cuda_store(d, sym, fn);
	}
	return XDM_OK;
}

static enum xdm_status cuda_resolve_procs(struct cuda_driver *d)
{
	char what[160], text[192];

	for (size_t i = 0; i < CUDA_ARRAY_SIZE(cuda_proc_symbols); i++) {
		const struct cuda_symbol *sym = &cuda_proc_symbols[i];
		CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		void *fn = NULL;
		CUresult rc;

		rc = d->GetProcAddress(sym->name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
				       &found);
		if (rc != CUDA_SUCCESS) {
			snprintf(what, sizeof(what), "cuGetProcAddress(%s) failed: %s", sym->name,
				 cuda_error_text(d, rc, text, sizeof(text)));
			return cuda_too_old(d, what);
		}
		if (!fn || found != CU_GET_PROC_ADDRESS_SUCCESS) {
			snprintf(what, sizeof(what), "it has no %s for CUDA %d.%d%s", sym->name,
				 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
				 found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ?
				 " (only older versions of it)" : "");
			return cuda_too_old(d, what);
		}
		cuda_store(d, sym, fn);
	}
	return XDM_OK;
}

enum xdm_status cuda_driver_open(struct cuda_driver *d)
{
	char text[192];
	enum xdm_status st;
	CUresult rc;

	memset(d, 0, sizeof(*d));
	d->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!d->dl)
		return xdm_error_set(XDM_E_NO_DEVICE,
				     "no CUDA driver: dlopen libcuda.so.1 failed: %s", dlerror());
	st = cuda_resolve_dlsym(d);
	if (st)
		goto fail;

	d->initialized = true;
	rc = d->Init(0);
	if (rc != CUDA_SUCCESS) {
		st = xdm_error_set(XDM_E_NO_DEVICE, "no CUDA device: cuInit: %s",
				   cuda_error_text(d, rc, text, sizeof(text)));
		goto fail;
	}
	rc = d->DriverGetVersion(&d->version);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(d, rc, "cuDriverGetVersion");
		goto fail;
	}
	/* cuGetProcAddress refuses a version above the driver's: say why. */
	if (d->version < CUDA_VERSION) {
		st = cuda_too_old(d, NULL);
		goto fail;
	}
	st = cuda_resolve_procs(d);
	if (st)
		goto fail;
	return XDM_OK;

fail:
	cuda_driver_close(d);
	return st;
}

void cuda_driver_close(struct cuda_driver *d)
{
	/*
	 * Once cuInit has run, the driver may have started threads and
	 * registered exit handlers inside libcuda; unmapping it under them
	 * would crash later.  The handle is only a reference count, so
	 * keeping it costs nothing.
	 */
	if (d->dl && !d->initialized)
		dlclose(d->dl);
	memset(d, 0, sizeof(*d));
}
