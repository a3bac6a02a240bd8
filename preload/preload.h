/* SPDX-License-Identifier: MIT */
/*
 * preload.h - what the files of the preload shim share.  See
 * xdm-preload(7) for what the shim does and doc/design.md for where it
 * sits.
 *
 * libxdm-preload.so is loaded into programs that know nothing of xdm, by
 * LD_PRELOAD.  It has no handle to hand around, so its state is static,
 * each piece in the one file that owns it: the calls and their real entry
 * points (hooks.c, driver.c), the devices it has charged (devices.c), the
 * table of live allocations (table.c), and the C library's dlsym with the
 * callers known to be xdm modules (dlsym.c).
 */
#ifndef XDM_PRELOAD_H
#define XDM_PRELOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/budget_segment/segment.h"
#include "preload/cuda_abi.h"

#define PRELOAD_WHO "xdm-preload"
#define PRELOAD_EXPORT __attribute__((visibility("default")))

/* ---- driver.c: the driver's real entry points --------------------------- */

/*
 * One entry per call the shim wraps.  abi is the name libcuda exports (what
 * dlsym and a program linked with -lcuda use), base the name asked of
 * cuGetProcAddress, ptsz the per-thread-default-stream variant if there is
 * one.  cuGetProcAddress hands out the ABI of the CUDA version it is asked
 * for: the hook's ABI is the base name's from version since, until (if
 * not 0) a newer ABI took the name over.  real and real_ptsz are the
 * driver's functions, learnt from the lookups (driver.c); hook and
 * hook_ptsz are what the program gets instead.
 */
struct preload_entry {
	const char *lib;	/* the soname that exports abi */
	const char *abi;
	const char *base;
	const char *ptsz;
	int since;
	int until;
	void *hook;
	void *hook_ptsz;
	_Atomic(void *) real;
	_Atomic(void *) real_ptsz;
};

enum preload_call {
	PRELOAD_MEM_ALLOC,
	PRELOAD_MEM_ALLOC_PITCH,
	PRELOAD_MEM_ALLOC_MANAGED,
	PRELOAD_MEM_FREE,
	PRELOAD_MEM_ALLOC_ASYNC,
	PRELOAD_MEM_ALLOC_FROM_POOL_ASYNC,
	PRELOAD_MEM_FREE_ASYNC,
	PRELOAD_MEM_CREATE,
	PRELOAD_MEM_RELEASE,
	PRELOAD_MEM_GET_INFO,
	PRELOAD_GET_PROC_ADDRESS,
	PRELOAD_GET_PROC_ADDRESS_V1,
	PRELOAD_NVML_MEMORY_INFO,
	PRELOAD_NVML_MEMORY_INFO_V2,
	PRELOAD_CALL_COUNT
};

/* The real function of a call (ptsz: its per-thread variant), found if need be. */
void *preload_real(enum preload_call call, bool ptsz);
/* The driver's function of ABI name abi, not wrapped (helpers: cuCtxGetDevice ...). */
void *preload_driver_symbol(const char *abi);
/* The same of library lib (a soname), once the program has loaded it. */
void *preload_library_symbol(const char *lib, const char *abi);
/*
 * What a lookup of name returned (found), or the shim's hook in its place
 * when name is a call the shim wraps: by its ABI name (dlsym), or by its
 * base name for CUDA version (cuGetProcAddress, version > 0; ptsz: the
 * per-thread variant was asked for).
 */
void *preload_hook_for(const char *name, void *found, int version, bool ptsz);

/* ---- dlsym.c: lookups ---------------------------------------------------- */

/* The C library's dlsym, found on first use. */
void *preload_next_dlsym_get(void);
/* Every dlsym but RTLD_NEXT's, reached by a jump from the exported dlsym. */
void *preload_dlsym(void *handle, const char *name);

/* ---- hooks.c: the driver's names, exported ------------------------------- */

PRELOAD_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
PRELOAD_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
					   size_t height, unsigned int elem);
PRELOAD_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags);
PRELOAD_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
PRELOAD_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream);
PRELOAD_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream);
PRELOAD_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
						CUmemoryPool pool, CUstream stream);
PRELOAD_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
						     CUmemoryPool pool, CUstream stream);
PRELOAD_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
PRELOAD_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
PRELOAD_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
				    const struct xdm_cu_alloc_prop *prop, unsigned long long flags);
PRELOAD_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
PRELOAD_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
PRELOAD_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
					    cuuint64_t flags,
					    CUdriverProcAddressQueryResult *status);
PRELOAD_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
					 cuuint64_t flags);

/* ---- table.c: live allocations ------------------------------------------ */

enum preload_kind {
	PRELOAD_PTR = 1,	/* a device pointer: cuMemAlloc*, async, managed */
	PRELOAD_HANDLE = 2,	/* a cuMemCreate handle */
};

/* Record a live allocation; false if the table is full. */
bool preload_track(uint64_t key, enum preload_kind kind, uint64_t bytes, unsigned int device);
/* Forget one, with what it was; false if it was not recorded. */
bool preload_untrack(uint64_t key, enum preload_kind kind, uint64_t *bytes,
		     unsigned int *device);

/* ---- devices.c: the budget of each device ------------------------------- */

#define PRELOAD_DEVICES 64

enum preload_device_state {
	PRELOAD_DEV_NONE,	/* not seen yet */
	PRELOAD_DEV_READY,	/* attached: charged */
	PRELOAD_DEV_OPEN,	/* attach failed, fail=open: not charged */
	PRELOAD_DEV_CLOSED,	/* attach failed, fail=closed: refused */
	PRELOAD_DEV_GONE,	/* the process is leaving: not charged */
};

#define PRELOAD_POOLS 8
/* A thread asks the clock every PRELOAD_POOL_LOOK_EVERY stream-ordered
 * calls; a device's pools are looked at most once per PRELOAD_POOL_LOOK_NS. */
#define PRELOAD_POOL_LOOK_EVERY 64
#define PRELOAD_POOL_LOOK_NS 10000000ull

struct preload_device {
	_Atomic int state;		/* enum preload_device_state */
	_Atomic bool refusing;		/* in a burst of refusals: said once */
	/* pools.c: the driver pools seen on this device, and their slack */
	_Atomic(CUmemoryPool) pools[PRELOAD_POOLS];
	_Atomic bool current_pool_known;
	_Atomic bool looking;
	_Atomic uint64_t last_look_ns;	/* CLOCK_MONOTONIC of the last look */
	_Atomic uint64_t pool_slack;	/* bytes charged for what the pools keep */
	struct budget_account acct;	/* its segment and its threads' credit */
	char why[512];			/* the attach failure, for CLOSED refusals */
	char limit_from[48];		/* the scheduler's variable of the group's limit */
};

/*
 * The device of the calling thread's current context, attached on first
 * use; NULL where no device is current (the driver then answers the call
 * itself).  Never NULL for a device that failed closed: its state says.
 */
struct preload_device *preload_device_current(void);
/* The device of ordinal n, attached on first use; NULL for a bad ordinal. */
struct preload_device *preload_device_get(int ordinal);
/* Device index into the table (for the allocation table). */
unsigned int preload_device_index(const struct preload_device *d);
struct preload_device *preload_device_at(unsigned int index);

/*
 * Charge n bytes to d, or refuse: CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY
 * with one line on stderr per burst of refusals.  A device that is not
 * charged (open, gone) admits everything.
 */
CUresult preload_charge(struct preload_device *d, uint64_t n);
void preload_uncharge(struct preload_device *d, uint64_t n);

/* After fork, in the child: no device attached (state.c). */
void preload_devices_forked(void);
/* At exit: every attached device gives its slot back (state.c). */
void preload_devices_leave(void);

/* cuMemGetInfo's answer cut to the budget of the current device. */
void preload_clip_info(struct preload_device *d, size_t *free_bytes, size_t *total_bytes);
/* The attached device of this UUID (the budget's form), or NULL. */
struct preload_device *preload_device_by_uuid(const char *uuid);

/* ---- scheduler_env.c: the group, from xdm's or a scheduler's variables -- */

/*
 * Set m's group for device ordinal: XDM_BUDGET_GROUP and
 * XDM_BUDGET_GROUP_LIMIT, else the limit HAMi or KAI injected, in the
 * container's group (xdm-preload(7), SCHEDULERS); from gets the name of
 * the scheduler's variable that set the limit, or "".  After describe():
 * m->device_total is the base of KAI's GPU_PORTION.
 */
enum xdm_status preload_group_config(struct budget_member *m, int ordinal, char *from,
				     size_t from_len);

/* ---- nvml.c: NVML's memory figures --------------------------------------- */

PRELOAD_EXPORT int nvmlDeviceGetMemoryInfo(void *device, void *memory);
PRELOAD_EXPORT int nvmlDeviceGetMemoryInfo_v2(void *device, void *memory);

/* ---- pools.c: what the driver's pools keep -------------------------------- */

/* A stream-ordered allocation drew on pool (NULL: the device's current one). */
void preload_pool_seen(struct preload_device *d, CUmemoryPool pool);
/* A stream-ordered call: charge the pools' slack as it is now, at most
 * once per PRELOAD_POOL_LOOK_NS (the clock read every
 * PRELOAD_POOL_LOOK_EVERY calls of a thread). */
void preload_pools_tick(struct preload_device *d);
/* About to refuse: trim the pools and give back their slack; true if any. */
bool preload_pools_give_back(struct preload_device *d);

/* ---- state.c ------------------------------------------------------------- */

/* One line on stderr, "xdm-preload: ...\n", in one write. */
__attribute__((format(printf, 1, 2))) void preload_say(const char *fmt, ...);

#endif /* XDM_PRELOAD_H */
