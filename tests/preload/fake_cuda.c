/* SPDX-License-Identifier: MIT */
/*
 * fake_cuda.c - a fake libcuda.so.1 for the preload shim's tests: the
 * driver's allocation calls over plain bookkeeping, on machines with no
 * GPU.
 *
 * No memory stands behind a device pointer: an allocation is a record of
 * its bytes, its device and how it was made, at an address from a counter
 * that only grows, so that no two allocations ever share an address even
 * after one is freed.  Each device has a used count against its total,
 * and an allocation that would pass the total fails as the driver's does,
 * with CUDA_ERROR_OUT_OF_MEMORY.
 *
 * The environment sets the machine: FAKE_CUDA_DEVICES devices (default
 * 1, at most 8), each of FAKE_CUDA_TOTAL bytes (default 1 GiB; K, M, G
 * suffixes are binary).  CUDA_VISIBLE_DEVICES, a comma list of physical
 * indices (or of UUIDs, GPU-..., as NVML writes them), chooses and
 * orders the devices the program sees, and, as with the driver, the
 * list ends at its first entry that is not a device (or names one
 * twice).  Device handles are the ordinals the program sees;
 * the hooks of fake_cuda.h take a physical index only in fakeCudaUsed.
 * With FAKE_CUDA_POOL_KEEP=1 a pool keeps what its blocks give back, as a
 * driver pool with a release threshold does: the device's used count keeps
 * it, a pooled allocation reuses it first, and cuMemPoolTrimTo releases
 * it; the pool's reserved attribute is its used and its kept bytes.
 *
 * Each body is a static function with its exported ABI name as an alias.
 * cuGetProcAddress hands out the static's address: a real driver's table
 * gives its own entry points, never a preloaded library's functions of
 * the same name, and a shim that asks it for the driver's cuMemAlloc_v2
 * must not be handed its own wrapper back.
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/preload/fake_cuda.h"
#include "tests/preload/fake_uuid.h"

#define FAKE_MAX_DEVICES 8
#define FAKE_DEFAULT_TOTAL (1ull << 30)
#define FAKE_ADDR_BASE 0x7f0000000000ull
#define FAKE_ALIGN 512u		/* addresses and pitches */
#define FAKE_DRIVER_VERSION 13000

/* Every exported function: its ABI name and its body. */
#define FAKE_SYMBOLS(X)						\
	X(cuInit, fake_init)					\
	X(cuDriverGetVersion, fake_driver_get_version)		\
	X(cuDeviceGet, fake_device_get)				\
	X(cuDeviceGetCount, fake_device_get_count)		\
	X(cuDeviceGetUuid, fake_device_get_uuid)		\
	X(cuDeviceGetUuid_v2, fake_device_get_uuid_v2)		\
	X(cuDeviceTotalMem_v2, fake_device_total_mem)		\
	X(cuCtxGetDevice, fake_ctx_get_device)			\
	X(cuMemAlloc_v2, fake_mem_alloc)			\
	X(cuMemAllocPitch_v2, fake_mem_alloc_pitch)		\
	X(cuMemAllocManaged, fake_mem_alloc_managed)		\
	X(cuMemFree_v2, fake_mem_free)				\
	X(cuMemGetInfo_v2, fake_mem_get_info)			\
	X(cuMemAllocAsync, fake_mem_alloc_async)		\
	X(cuMemAllocAsync_ptsz, fake_mem_alloc_async_ptsz)	\
	X(cuMemAllocFromPoolAsync, fake_mem_alloc_from_pool)	\
	X(cuMemAllocFromPoolAsync_ptsz, fake_mem_alloc_from_pool_ptsz) \
	X(cuMemFreeAsync, fake_mem_free_async)			\
	X(cuMemFreeAsync_ptsz, fake_mem_free_async_ptsz)	\
	X(cuDeviceGetDefaultMemPool, fake_device_get_default_mem_pool) \
	X(cuMemPoolGetAttribute, fake_mem_pool_get_attribute)	\
	X(cuMemPoolTrimTo, fake_mem_pool_trim_to)		\
	X(cuMemCreate, fake_mem_create)				\
	X(cuMemRelease, fake_mem_release)			\
	X(cuGetProcAddress, fake_get_proc_address_v1)		\
	X(cuGetProcAddress_v2, fake_get_proc_address)		\
	X(fakeCudaSetDevice, fake_set_device)			\
	X(fakeCudaUsed, fake_used)				\
	X(fakeCudaTotal, fake_total)				\
	X(fakeCudaCalls, fake_calls)

enum fake_fn {
#define FAKE_ENUM(abi, body) FN_##abi,
	FAKE_SYMBOLS(FAKE_ENUM)
#undef FAKE_ENUM
	FN_COUNT
};

/* How many times each exported function ran, by enum fake_fn. */
static atomic_ullong fake_ncalls[FN_COUNT];

/* A memory pool is a device's default pool; the handle points here. */
struct CUmemPoolHandle_st {
	int phys;
	unsigned long long used;	/* bytes of its live allocations */
	unsigned long long kept;	/* freed and kept (FAKE_CUDA_POOL_KEEP) */
};

enum fake_kind {
	FAKE_PTR,		/* cuMemAlloc, Pitch, Managed: freed by cuMemFree */
	FAKE_POOLED,		/* from a pool: freed by either free */
	FAKE_HANDLE,		/* cuMemCreate: released by handle */
};

struct fake_alloc {
	unsigned long long key;		/* the address, or the handle */
	size_t bytes;
	int phys;
	enum fake_kind kind;
	struct CUmemPoolHandle_st *pool;	/* FAKE_POOLED only */
};

/* One lock guards all of this; the configuration is set once, first. */
static struct {
	pthread_mutex_t lock;
	int ndev;				/* physical devices */
	unsigned long long total;		/* bytes of each */
	int nvisible;
	int visible[FAKE_MAX_DEVICES];		/* ordinal -> physical */
	bool pool_keep;				/* FAKE_CUDA_POOL_KEEP=1 */
	unsigned long long used[FAKE_MAX_DEVICES];
	struct CUmemPoolHandle_st pools[FAKE_MAX_DEVICES];
	struct fake_alloc *live;		/* unordered */
	size_t nlive, cap;
	unsigned long long next_addr, next_handle;
} fake = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.next_addr = FAKE_ADDR_BASE,
	.next_handle = 1,
};

static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static _Thread_local int fake_current;	/* this thread's ordinal */

static void fake_count(enum fake_fn fn)
{
	atomic_fetch_add_explicit(&fake_ncalls[fn], 1, memory_order_relaxed);
}

/* A count (of bytes, of devices), decimal with an optional binary K, M or G. */
static bool fake_parse_count(const char *s, unsigned long long *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	v = strtoull(s, &end, 10);
	if (*end == 'K')
		shift = 10;
	else if (*end == 'M')
		shift = 20;
	else if (*end == 'G')
		shift = 30;
	if (shift)
		end++;
	if (*end || v > ULLONG_MAX >> shift)
		return false;
	*out = v << shift;
	return true;
}

/*
 * A fixture configured wrongly would otherwise test another machine than
 * the one its test meant, and pass or fail for that reason: stop loudly.
 */
static void fake_bad_env(const char *name, const char *value)
{
	fprintf(stderr, "fake libcuda: %s=%s is not valid\n", name, value);
	abort();
}

/* The index of the device whose UUID, as NVML writes it (GPU-...), starts
 * list at p, with *end past it; -1 for none.  (The driver takes UUIDs in
 * CUDA_VISIBLE_DEVICES, as a device plugin sets it.) */
static long fake_visible_uuid(const char *p, char **end)
{
	char u[48];
	int i, n;

	for (i = 0; i < fake.ndev; i++) {
		n = snprintf(u, sizeof(u),
			     "GPU-face%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			     i, i + 1, i + 1, i + 1, i + 1, i + 1, i + 1, i + 1, i + 1, i + 1,
			     i + 1, i + 1, i + 1, i + 1);
		if (!strncmp(p, u, (size_t)n) && (p[n] == ',' || !p[n])) {
			*end = (char *)p + n;
			return i;
		}
	}
	return -1;
}

static void fake_parse_visible(const char *list)
{
	const char *p = list;

	/* Like the driver's: the list ends at its first invalid entry. */
	while (*p && fake.nvisible < fake.ndev) {
		char *end;
		long v;
		int i;

		if (!strncmp(p, "GPU-", 4)) {
			v = fake_visible_uuid(p, &end);
			if (v < 0)
				return;
		} else if (*p < '0' || *p > '9') {
			return;
		} else {
			v = strtol(p, &end, 10);
		}
		if (v >= fake.ndev || (*end && *end != ','))
			return;
		for (i = 0; i < fake.nvisible; i++)
			if (fake.visible[i] == v)
				return;
		fake.visible[fake.nvisible++] = (int)v;
		p = *end ? end + 1 : end;
	}
}

static void fake_setup(void)
{
	const char *s;
	unsigned long long v;
	int i;

	fake.ndev = 1;
	s = getenv("FAKE_CUDA_DEVICES");
	if (s) {
		if (!fake_parse_count(s, &v) || v > FAKE_MAX_DEVICES)
			fake_bad_env("FAKE_CUDA_DEVICES", s);
		fake.ndev = (int)v;
	}
	fake.total = FAKE_DEFAULT_TOTAL;
	s = getenv("FAKE_CUDA_TOTAL");
	if (s && !fake_parse_count(s, &fake.total))
		fake_bad_env("FAKE_CUDA_TOTAL", s);
	for (i = 0; i < fake.ndev; i++)
		fake.pools[i].phys = i;
	s = getenv("FAKE_CUDA_POOL_KEEP");
	fake.pool_keep = s && !strcmp(s, "1");
	s = getenv("CUDA_VISIBLE_DEVICES");
	if (s) {
		fake_parse_visible(s);
		return;
	}
	for (i = 0; i < fake.ndev; i++)
		fake.visible[fake.nvisible++] = i;
}

static CUresult fake_phys(int ordinal, int *phys)
{
	pthread_once(&fake_once, fake_setup);
	if (ordinal < 0 || ordinal >= fake.nvisible)
		return FAKE_CUDA_ERROR_INVALID_DEVICE;
	*phys = fake.visible[ordinal];
	return CUDA_SUCCESS;
}

/* The pool behind a handle, or NULL for one the fake never handed out. */
static struct CUmemPoolHandle_st *fake_pool(CUmemoryPool pool)
{
	int i;

	pthread_once(&fake_once, fake_setup);
	for (i = 0; i < fake.ndev; i++)
		if (pool == &fake.pools[i])
			return pool;
	return NULL;
}

/* Records an allocation of bytes on phys, if they fit; sets *key. */
static CUresult fake_charge(int phys, size_t bytes, enum fake_kind kind,
			    struct CUmemPoolHandle_st *pool, unsigned long long *key)
{
	struct fake_alloc *a;
	CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
	size_t reuse = 0;

	pthread_mutex_lock(&fake.lock);
	/* A pool lends what it kept before it asks the device for more. */
	if (pool)
		reuse = bytes < pool->kept ? bytes : (size_t)pool->kept;
	if (bytes - reuse > fake.total - fake.used[phys])
		goto out;
	if (fake.nlive == fake.cap) {
		size_t cap = fake.cap ? 2 * fake.cap : 64;

		a = realloc(fake.live, cap * sizeof(*a));
		if (!a)
			goto out;
		fake.live = a;
		fake.cap = cap;
	}
	if (kind == FAKE_HANDLE) {
		*key = fake.next_handle++;
	} else {
		*key = fake.next_addr;
		fake.next_addr += (bytes + FAKE_ALIGN - 1) / FAKE_ALIGN * FAKE_ALIGN;
	}
	fake.live[fake.nlive++] = (struct fake_alloc){
		.key = *key, .bytes = bytes, .phys = phys, .kind = kind, .pool = pool,
	};
	fake.used[phys] += bytes - reuse;
	if (pool) {
		pool->used += bytes;
		pool->kept -= reuse;
	}
	rc = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fake.lock);
	return rc;
}

/*
 * Forgets the allocation at key.  Either free takes any pointer, as the
 * driver's do (cuMemFree waits for a pooled block's stream; the fake has
 * nothing to wait for); a handle is only released by handle.
 */
static CUresult fake_uncharge(unsigned long long key, bool handle)
{
	struct fake_alloc *a;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	size_t i;

	pthread_mutex_lock(&fake.lock);
	for (i = 0; i < fake.nlive; i++) {
		a = &fake.live[i];
		if (a->key != key || (a->kind == FAKE_HANDLE) != handle)
			continue;
		if (a->pool) {
			a->pool->used -= a->bytes;
			if (fake.pool_keep)
				a->pool->kept += a->bytes;
		}
		if (!a->pool || !fake.pool_keep)
			fake.used[a->phys] -= a->bytes;
		*a = fake.live[--fake.nlive];
		rc = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&fake.lock);
	return rc;
}

/* ---- initialisation and devices ------------------------------------- */

static CUresult fake_init(unsigned int flags)
{
	fake_count(FN_cuInit);
	pthread_once(&fake_once, fake_setup);
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	return fake.nvisible ? CUDA_SUCCESS : FAKE_CUDA_ERROR_NO_DEVICE;
}

static CUresult fake_driver_get_version(int *version)
{
	fake_count(FN_cuDriverGetVersion);
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = FAKE_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

static CUresult fake_device_get(CUdevice *dev, int ordinal)
{
	int phys;
	CUresult rc;

	fake_count(FN_cuDeviceGet);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_phys(ordinal, &phys);
	if (rc == CUDA_SUCCESS)
		*dev = ordinal;
	return rc;
}

static CUresult fake_device_get_count(int *count)
{
	fake_count(FN_cuDeviceGetCount);
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&fake_once, fake_setup);
	*count = fake.nvisible;
	return CUDA_SUCCESS;
}

/* Physical device i is fa ce i, then i + 1 thirteen times. */
static CUresult fake_uuid(CUuuid *uuid, CUdevice dev)
{
	int phys;
	CUresult rc;

	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_phys(dev, &phys);
	if (rc != CUDA_SUCCESS)
		return rc;
	fake_uuid_bytes(phys, (unsigned char *)uuid->bytes);
	return CUDA_SUCCESS;
}

static CUresult fake_device_get_uuid(CUuuid *uuid, CUdevice dev)
{
	fake_count(FN_cuDeviceGetUuid);
	return fake_uuid(uuid, dev);
}

static CUresult fake_device_get_uuid_v2(CUuuid *uuid, CUdevice dev)
{
	fake_count(FN_cuDeviceGetUuid_v2);
	return fake_uuid(uuid, dev);
}

static CUresult fake_device_total_mem(size_t *bytes, CUdevice dev)
{
	int phys;
	CUresult rc;

	fake_count(FN_cuDeviceTotalMem_v2);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_phys(dev, &phys);
	if (rc == CUDA_SUCCESS)
		*bytes = fake.total;
	return rc;
}

static CUresult fake_ctx_get_device(CUdevice *dev)
{
	int phys;
	CUresult rc;

	fake_count(FN_cuCtxGetDevice);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_phys(fake_current, &phys);
	if (rc == CUDA_SUCCESS)
		*dev = fake_current;
	return rc;
}

/* ---- memory ---------------------------------------------------------- */

/* Records bytes on the calling thread's device; *dptr is 0 on failure. */
static CUresult fake_alloc_here(CUdeviceptr *dptr, size_t bytes)
{
	int phys;
	CUresult rc;

	if (!dptr || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*dptr = 0;
	rc = fake_phys(fake_current, &phys);
	if (rc != CUDA_SUCCESS)
		return rc;
	return fake_charge(phys, bytes, FAKE_PTR, NULL, dptr);
}

static CUresult fake_mem_alloc(CUdeviceptr *dptr, size_t bytes)
{
	fake_count(FN_cuMemAlloc_v2);
	return fake_alloc_here(dptr, bytes);
}

/* Rows of width bytes, each padded to the pitch, a multiple of 512. */
static CUresult fake_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width,
				     size_t height, unsigned int elem)
{
	size_t p, bytes;
	CUresult rc;

	fake_count(FN_cuMemAllocPitch_v2);
	if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if (width > SIZE_MAX - (FAKE_ALIGN - 1))
		return CUDA_ERROR_OUT_OF_MEMORY;
	p = (width + FAKE_ALIGN - 1) / FAKE_ALIGN * FAKE_ALIGN;
	if (__builtin_mul_overflow(p, height, &bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = fake_alloc_here(dptr, bytes);
	if (rc == CUDA_SUCCESS)
		*pitch = p;
	return rc;
}

static CUresult fake_mem_alloc_managed(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
	fake_count(FN_cuMemAllocManaged);
	if (flags != FAKE_CU_MEM_ATTACH_GLOBAL && flags != FAKE_CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return fake_alloc_here(dptr, bytes);
}

static CUresult fake_mem_free(CUdeviceptr dptr)
{
	fake_count(FN_cuMemFree_v2);
	return fake_uncharge(dptr, false);
}

static CUresult fake_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
	int phys;
	CUresult rc;

	fake_count(FN_cuMemGetInfo_v2);
	if (!free_bytes || !total_bytes)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_phys(fake_current, &phys);
	if (rc != CUDA_SUCCESS)
		return rc;
	pthread_mutex_lock(&fake.lock);
	*free_bytes = fake.total - fake.used[phys];
	pthread_mutex_unlock(&fake.lock);
	*total_bytes = fake.total;
	return CUDA_SUCCESS;
}

/* ---- stream-ordered memory: streams are ignored, frees are at once --- */

/* From pool, or from the calling thread's device's default pool. */
static CUresult fake_alloc_pooled(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool)
{
	struct CUmemPoolHandle_st *p;
	int phys;
	CUresult rc;

	if (!dptr || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*dptr = 0;
	if (pool) {
		p = fake_pool(pool);
		if (!p)
			return CUDA_ERROR_INVALID_VALUE;
	} else {
		rc = fake_phys(fake_current, &phys);
		if (rc != CUDA_SUCCESS)
			return rc;
		p = &fake.pools[phys];
	}
	return fake_charge(p->phys, bytes, FAKE_POOLED, p, dptr);
}

static CUresult fake_mem_alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	fake_count(FN_cuMemAllocAsync);
	return fake_alloc_pooled(dptr, bytes, NULL);
}

static CUresult fake_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
	fake_count(FN_cuMemAllocAsync_ptsz);
	return fake_alloc_pooled(dptr, bytes, NULL);
}

static CUresult fake_mem_alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
					 CUstream stream)
{
	fake_count(FN_cuMemAllocFromPoolAsync);
	return pool ? fake_alloc_pooled(dptr, bytes, pool) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_mem_alloc_from_pool_ptsz(CUdeviceptr *dptr, size_t bytes,
					      CUmemoryPool pool, CUstream stream)
{
	fake_count(FN_cuMemAllocFromPoolAsync_ptsz);
	return pool ? fake_alloc_pooled(dptr, bytes, pool) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_mem_free_async(CUdeviceptr dptr, CUstream stream)
{
	fake_count(FN_cuMemFreeAsync);
	return fake_uncharge(dptr, false);
}

static CUresult fake_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream)
{
	fake_count(FN_cuMemFreeAsync_ptsz);
	return fake_uncharge(dptr, false);
}

static CUresult fake_device_get_default_mem_pool(CUmemoryPool *pool, CUdevice dev)
{
	int phys;
	CUresult rc;

	fake_count(FN_cuDeviceGetDefaultMemPool);
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	rc = fake_phys(dev, &phys);
	if (rc == CUDA_SUCCESS)
		*pool = &fake.pools[phys];
	return rc;
}

/* A pool's reserve is what it lends and what it kept. */
static CUresult fake_mem_pool_get_attribute(CUmemoryPool pool, int attr, void *value)
{
	struct CUmemPoolHandle_st *p;
	cuuint64_t v;

	fake_count(FN_cuMemPoolGetAttribute);
	p = fake_pool(pool);
	if (!p || !value || (attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT &&
			     attr != CU_MEMPOOL_ATTR_USED_MEM_CURRENT))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake.lock);
	v = p->used;
	if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
		v += p->kept;
	pthread_mutex_unlock(&fake.lock);
	memcpy(value, &v, sizeof(v));
	return CUDA_SUCCESS;
}

/* Gives back kept bytes until the pool reserves at most keep. */
static CUresult fake_mem_pool_trim_to(CUmemoryPool pool, size_t keep)
{
	struct CUmemPoolHandle_st *p;
	unsigned long long room, release;

	fake_count(FN_cuMemPoolTrimTo);
	p = fake_pool(pool);
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake.lock);
	room = keep > p->used ? keep - p->used : 0;
	release = p->kept > room ? p->kept - room : 0;
	p->kept -= release;
	fake.used[p->phys] -= release;
	pthread_mutex_unlock(&fake.lock);
	return CUDA_SUCCESS;
}

/* ---- physical allocations by handle ------------------------------------ */

static CUresult fake_mem_create(CUmemGenericAllocationHandle *handle, size_t bytes,
				const struct xdm_cu_alloc_prop *prop, unsigned long long flags)
{
	int ordinal, phys;
	CUresult rc;

	fake_count(FN_cuMemCreate);
	if (!handle || !bytes || !prop || flags)
		return CUDA_ERROR_INVALID_VALUE;
	ordinal = fake_current;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		ordinal = prop->location.id;
	rc = fake_phys(ordinal, &phys);
	if (rc != CUDA_SUCCESS)
		return rc;
	return fake_charge(phys, bytes, FAKE_HANDLE, NULL, handle);
}

static CUresult fake_mem_release(CUmemGenericAllocationHandle handle)
{
	fake_count(FN_cuMemRelease);
	return fake_uncharge(handle, true);
}

/* ---- test hooks ---------------------------------------------------------- */

static void fake_set_device(int ordinal)
{
	fake_count(FN_fakeCudaSetDevice);
	fake_current = ordinal;
}

static unsigned long long fake_used(int physical)
{
	unsigned long long used = 0;

	fake_count(FN_fakeCudaUsed);
	pthread_once(&fake_once, fake_setup);
	if (physical < 0 || physical >= fake.ndev)
		return 0;
	pthread_mutex_lock(&fake.lock);
	used = fake.used[physical];
	pthread_mutex_unlock(&fake.lock);
	return used;
}

static unsigned long long fake_total(void)
{
	fake_count(FN_fakeCudaTotal);
	pthread_once(&fake_once, fake_setup);
	return fake.total;
}

/* ---- the table: cuGetProcAddress and fakeCudaCalls ------------------------ */

static CUresult fake_get_proc_address(const char *symbol, void **pfn, int version,
				      cuuint64_t flags, CUdriverProcAddressQueryResult *status);
static CUresult fake_get_proc_address_v1(const char *symbol, void **pfn, int version,
					 cuuint64_t flags);
static unsigned long long fake_calls(const char *symbol);

static const struct fake_sym {
	const char *name;
	void *fn;
} fake_syms[FN_COUNT] = {
#define FAKE_SYM(abi, body) [FN_##abi] = { #abi, (void *)body },
	FAKE_SYMBOLS(FAKE_SYM)
#undef FAKE_SYM
};

/*
 * Base names whose entry point has another ABI name; _ptsz is the
 * per-thread default stream's, asked for with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.  Any other name is
 * looked up as it is.
 */
static const struct fake_rename {
	const char *base;
	enum fake_fn plain, ptsz;
} fake_renames[] = {
	{ "cuMemAlloc", FN_cuMemAlloc_v2, FN_cuMemAlloc_v2 },
	{ "cuMemAllocPitch", FN_cuMemAllocPitch_v2, FN_cuMemAllocPitch_v2 },
	{ "cuMemFree", FN_cuMemFree_v2, FN_cuMemFree_v2 },
	{ "cuMemGetInfo", FN_cuMemGetInfo_v2, FN_cuMemGetInfo_v2 },
	{ "cuDeviceTotalMem", FN_cuDeviceTotalMem_v2, FN_cuDeviceTotalMem_v2 },
	{ "cuDeviceGetUuid", FN_cuDeviceGetUuid_v2, FN_cuDeviceGetUuid_v2 },
	{ "cuGetProcAddress", FN_cuGetProcAddress_v2, FN_cuGetProcAddress_v2 },
	{ "cuMemAllocAsync", FN_cuMemAllocAsync, FN_cuMemAllocAsync_ptsz },
	{ "cuMemAllocFromPoolAsync", FN_cuMemAllocFromPoolAsync,
	  FN_cuMemAllocFromPoolAsync_ptsz },
	{ "cuMemFreeAsync", FN_cuMemFreeAsync, FN_cuMemFreeAsync_ptsz },
};

static int fake_find(const char *name)
{
	int i;

	for (i = 0; i < FN_COUNT; i++)
		if (!strcmp(fake_syms[i].name, name))
			return i;
	return -1;
}

static void *fake_lookup(const char *symbol, cuuint64_t flags)
{
	bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	size_t i;
	int fn;

	for (i = 0; i < sizeof(fake_renames) / sizeof(fake_renames[0]); i++)
		if (!strcmp(fake_renames[i].base, symbol))
			return fake_syms[ptds ? fake_renames[i].ptsz : fake_renames[i].plain].fn;
	fn = fake_find(symbol);
	return fn < 0 ? NULL : fake_syms[fn].fn;
}

/* The version asked for is ignored: every name has one entry point. */
static CUresult fake_proc_address(const char *symbol, void **pfn, cuuint64_t flags,
				  CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = fake_lookup(symbol, flags);
	if (status)
		*status = *pfn ? FAKE_CU_GET_PROC_ADDRESS_SUCCESS
			       : FAKE_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : FAKE_CUDA_ERROR_NOT_FOUND;
}

static CUresult fake_get_proc_address(const char *symbol, void **pfn, int version,
				      cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	fake_count(FN_cuGetProcAddress_v2);
	return fake_proc_address(symbol, pfn, flags, status);
}

static CUresult fake_get_proc_address_v1(const char *symbol, void **pfn, int version,
					 cuuint64_t flags)
{
	fake_count(FN_cuGetProcAddress);
	return fake_proc_address(symbol, pfn, flags, NULL);
}

static unsigned long long fake_calls(const char *symbol)
{
	int fn;

	fake_count(FN_fakeCudaCalls);
	fn = symbol ? fake_find(symbol) : -1;
	return fn < 0 ? 0 : atomic_load_explicit(&fake_ncalls[fn], memory_order_relaxed);
}

/* The exported names: each the same function as its body. */
#define FAKE_EXPORT(abi, body) \
	extern __typeof__(body) abi __attribute__((alias(#body), visibility("default")));
FAKE_SYMBOLS(FAKE_EXPORT)
#undef FAKE_EXPORT
