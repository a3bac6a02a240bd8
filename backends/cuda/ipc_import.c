/* SPDX-License-Identifier: MIT */
/*
 * ipc_import.c - the cuda platform's ipc_import and ipc_unmap: device
 * memory another process exported, mapped into this one.
 *
 * The core has checked the handle (its device is this platform's) and
 * passed what its exporter sent; the payload's tag says which driver
 * object it is.  What the driver opens once per process is opened once
 * and counted (struct cuda_ipc_open): a legacy handle (cuIpcOpenMemHandle
 * refuses a second open of one allocation), an imported pool and each of
 * its pointers.  A granule set (cuda_vmm's) is mapped anew each time, in a
 * range reserved for it.  Every mapping is checked against what the driver
 * says it mapped, so that a handle that lies about its memory maps nothing
 * past it, on a later open of the same object too.  Unmapping comes after
 * the work on the import's stream (the core synchronized it; work on other
 * streams is the caller's to have finished): an imported pointer is freed
 * with cuMemFree before the exporter hears of the close.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_priv.h"

enum open_kind { OPEN_LEGACY, OPEN_POOL, OPEN_POOL_PTR, OPEN_VMM };

struct cuda_ipc_open {
	struct cuda_ipc_open *next;
	enum open_kind kind;
	unsigned int refs;
	CUdeviceptr base;		/* what the driver mapped */
	size_t size;			/* ... its bytes from base */
	size_t piece;			/* OPEN_VMM: the granule it was mapped in */
	CUipcMemHandle legacy;		/* OPEN_LEGACY */
	uint64_t pool_id;		/* OPEN_POOL, OPEN_POOL_PTR */
	uint64_t exporter_base;		/* OPEN_POOL_PTR: the allocation, in the exporter */
	CUmemoryPool pool;		/* OPEN_POOL */
	struct cuda_ipc_open *of_pool;	/* OPEN_POOL_PTR: its pool's entry */
};

void cuda_ipc_imports_init(struct cuda_ipc_imports *im)
{
	pthread_mutex_init(&im->lock, NULL);
	im->opens = NULL;
}

static struct cuda_platform *platform_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/*
 * Under lock: the entry of a driver object already open (a legacy handle;
 * a pool by its id; a pool's allocation by the pool and where the
 * exporter has it), or NULL.
 */
static struct cuda_ipc_open *find(struct cuda_ipc_imports *im, enum open_kind kind,
				  const CUipcMemHandle *legacy, uint64_t pool_id,
				  uint64_t exporter_base)
{
	for (struct cuda_ipc_open *o = im->opens; o; o = o->next) {
		if (o->kind != kind)
			continue;
		if ((kind == OPEN_LEGACY && !memcmp(&o->legacy, legacy, sizeof(o->legacy))) ||
		    (kind == OPEN_POOL && o->pool_id == pool_id) ||
		    (kind == OPEN_POOL_PTR && o->pool_id == pool_id &&
		     o->exporter_base == exporter_base))
			return o;
	}
	return NULL;
}

static struct cuda_ipc_open *add(struct cuda_ipc_imports *im, enum open_kind kind)
{
	struct cuda_ipc_open *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->kind = kind;
	o->refs = 1;
	o->next = im->opens;
	im->opens = o;
	return o;
}

static void drop(struct cuda_ipc_imports *im, struct cuda_ipc_open *gone)
{
	for (struct cuda_ipc_open **p = &im->opens; *p; p = &(*p)->next)
		if (*p == gone) {
			*p = gone->next;
			break;
		}
	free(gone);
}

/* What the handle says of its memory lies inside the size bytes mapped. */
static enum xdm_status fits(const struct xdm_ipc_object *obj, size_t bytes, size_t size)
{
	if (obj->object_bytes > size || obj->offset > obj->object_bytes ||
	    bytes > obj->object_bytes - obj->offset)
		return xdm_error_set(XDM_E_INVALID, "cuda: the exporter's memory (%zu bytes) is "
				     "smaller than the handle says (%llu)", size,
				     (unsigned long long)obj->object_bytes);
	return XDM_OK;
}

/*
 * An entry open already is counted once more, if the handle fits what it
 * mapped (*out, *fresh false); else a new entry (*fresh true) for the
 * caller to open.
 */
static enum xdm_status reuse_or_add(struct cuda_ipc_imports *im, struct cuda_ipc_open *found,
				    enum open_kind kind, const struct xdm_ipc_object *obj,
				    size_t bytes, struct cuda_ipc_open **out, bool *fresh)
{
	enum xdm_status st;

	*fresh = !found;
	if (found) {
		st = kind == OPEN_POOL ? XDM_OK : fits(obj, bytes, found->size);
		if (st)
			return st;
		found->refs++;
		*out = found;
		return XDM_OK;
	}
	*out = add(im, kind);
	return *out ? XDM_OK : xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda: no memory for an import");
}

/*
 * How much the driver mapped from base on (the query may name an enclosing
 * mapping: base need only lie in it), and that the handle fits in it.
 */
static enum xdm_status check_mapped(const struct cuda_platform *p, struct cuda_ipc_open *o,
				    const struct xdm_ipc_object *obj, size_t bytes)
{
	CUdeviceptr start = 0;
	size_t size = 0;
	CUresult rc = p->drv.MemGetAddressRange(&start, &size, o->base);

	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuMemGetAddressRange(an imported 0x%llx)",
				 (unsigned long long)o->base);
	if (start > o->base || o->base - start > size)
		return xdm_error_set(XDM_E_INVALID, "cuda: the driver maps an import at 0x%llx, "
				     "outside what it says it mapped", (unsigned long long)o->base);
	o->size = size - (size_t)(o->base - start);
	return fits(obj, bytes, o->size);
}

static void close_open(struct cuda_platform *p, struct cuda_ipc_open *o);

/* Under lock and the context rule, each opener below. */

static enum xdm_status open_legacy(struct cuda_platform *p, const struct xdm_ipc_object *obj,
				   size_t bytes, struct cuda_ipc_open **out)
{
	struct cuda_ipc_imports *im = &p->imports;
	struct cuda_ipc_legacy pay;
	struct cuda_ipc_open *o = NULL;
	enum xdm_status st;
	bool fresh;
	CUresult rc;

	memcpy(&pay, obj->payload, sizeof(pay));
	st = reuse_or_add(im, find(im, OPEN_LEGACY, &pay.handle, 0, 0), OPEN_LEGACY, obj, bytes,
			  &o, &fresh);
	if (st || !fresh)
		goto out;
	o->legacy = pay.handle;
	rc = p->drv.IpcOpenMemHandle(&o->base, pay.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: cuIpcOpenMemHandle(memory of another process "
			       "on CUDA device %u)", p->ordinal);
		drop(im, o);
		return st;
	}
	st = check_mapped(p, o, obj, bytes);
	if (st) {
		p->drv.IpcCloseMemHandle(o->base);
		drop(im, o);
		return st;
	}
out:
	*out = o;
	return st;
}

/* The pool of pool_id, imported from fd unless it is already. */
static enum xdm_status open_pool(struct cuda_platform *p, uint64_t pool_id, int fd,
				 struct cuda_ipc_open **out)
{
	struct cuda_ipc_imports *im = &p->imports;
	CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	CUmemLocation here = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)p->dev };
	struct cuda_ipc_open *o = NULL;
	enum xdm_status st;
	bool fresh;
	CUresult rc;

	st = reuse_or_add(im, find(im, OPEN_POOL, NULL, pool_id, 0), OPEN_POOL, NULL, 0, &o,
			  &fresh);
	if (st || !fresh)
		goto out;
	o->pool_id = pool_id;
	rc = p->drv.MemPoolImportFromShareableHandle(&o->pool, (void *)(uintptr_t)fd,
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: cuMemPoolImportFromShareableHandle(the pool "
			       "of another process on CUDA device %u)", p->ordinal);
		drop(im, o);
		return st;
	}
	/* An imported pool's memory is this device's to use only once granted. */
	rc = p->drv.MemPoolGetAccess(&flags, o->pool, &here);
	if (rc == CUDA_SUCCESS && flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
		CUmemAccessDesc rw = { .location = here,
				       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

		rc = p->drv.MemPoolSetAccess(o->pool, &rw, 1);
	}
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: read and write for CUDA device %u on an "
			       "imported pool", p->ordinal);
		p->drv.MemPoolDestroy(o->pool);
		drop(im, o);
		return st;
	}
out:
	*out = o;
	return st;
}

static enum xdm_status open_pool_ptr(struct cuda_platform *p, const struct xdm_ipc_object *obj,
				     size_t bytes, struct cuda_ipc_open **out)
{
	struct cuda_ipc_imports *im = &p->imports;
	struct cuda_ipc_open *o = NULL, *pool = NULL;
	struct cuda_ipc_pool pay;
	enum xdm_status st;
	bool fresh;
	CUresult rc;

	memcpy(&pay, obj->payload, sizeof(pay));
	st = reuse_or_add(im, find(im, OPEN_POOL_PTR, NULL, pay.pool_id, pay.base),
			  OPEN_POOL_PTR, obj, bytes, &o, &fresh);
	if (st || !fresh)
		goto out;
	o->pool_id = pay.pool_id;
	o->exporter_base = pay.base;
	if (obj->kind != XDM_IPC_FD || obj->fd < 0) {
		drop(im, o);
		return xdm_error_set(XDM_E_INVALID, "cuda: the exporter sent no descriptor of "
				     "its pool");
	}
	st = open_pool(p, pay.pool_id, obj->fd, &pool);
	if (st) {
		drop(im, o);
		return st;
	}
	o->of_pool = pool;
	rc = p->drv.MemPoolImportPointer(&o->base, pool->pool, &pay.data);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: cuMemPoolImportPointer(memory of another "
			       "process on CUDA device %u)", p->ordinal);
		goto fail;
	}
	st = check_mapped(p, o, obj, bytes);
	if (st) {
		p->drv.MemFree(o->base);
		goto fail;
	}
out:
	*out = o;
	return st;

fail:
	drop(im, o);
	close_open(p, pool);
	return st;
}

/* Granules, a descriptor each: a range reserved, each mapped in its place. */
static enum xdm_status open_vmm(struct cuda_platform *p, const struct xdm_ipc_object *obj,
				size_t bytes, struct cuda_ipc_open **out)
{
	CUmemAccessDesc rw = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
					     .id = (int)p->dev },
			       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	struct cuda_ipc_open *o;
	struct cuda_ipc_vmm pay;
	const char *call = "";
	enum xdm_status st;
	uint32_t mapped = 0;
	CUresult rc;

	memcpy(&pay, obj->payload, sizeof(pay));
	if (!pay.piece_bytes || (pay.piece_bytes & (pay.piece_bytes - 1)) ||
	    obj->object_bytes % pay.piece_bytes || obj->object_bytes / pay.piece_bytes != obj->nfds ||
	    obj->offset > obj->object_bytes || bytes > obj->object_bytes - obj->offset)
		return xdm_error_set(XDM_E_INVALID, "cuda: the exporter's granules do not make "
				     "the memory the handle says");
	o = add(&p->imports, OPEN_VMM);
	if (!o)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda: no memory for an import");
	o->size = (size_t)obj->object_bytes;
	o->piece = (size_t)pay.piece_bytes;
	rc = p->drv.MemAddressReserve(&o->base, o->size, (size_t)pay.piece_bytes, 0, 0);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: cuMemAddressReserve(%zu bytes) for memory of "
			       "another process", o->size);
		drop(&p->imports, o);
		return st;
	}
	for (; mapped < obj->nfds; mapped++) {
		CUmemGenericAllocationHandle h = 0;
		CUdeviceptr at = o->base + (CUdeviceptr)mapped * pay.piece_bytes;

		call = "cuMemImportFromShareableHandle";
		rc = p->drv.MemImportFromShareableHandle(&h, (void *)(uintptr_t)obj->fds[mapped],
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
		if (rc != CUDA_SUCCESS)
			break;
		call = "cuMemMap";
		rc = p->drv.MemMap(at, (size_t)pay.piece_bytes, 0, h, 0);
		/* The mapping keeps the granule: the handle is not needed after. */
		p->drv.MemRelease(h);
		if (rc != CUDA_SUCCESS)
			break;
	}
	if (rc == CUDA_SUCCESS) {
		call = "cuMemSetAccess";
		rc = p->drv.MemSetAccess(o->base, o->size, &rw, 1);
	}
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: %s(granule %u of %u of memory of another "
			       "process)", call, mapped, obj->nfds);
		while (mapped)
			p->drv.MemUnmap(o->base + (CUdeviceptr)--mapped * pay.piece_bytes,
					(size_t)pay.piece_bytes);
		p->drv.MemAddressFree(o->base, o->size);
		drop(&p->imports, o);
		return st;
	}
	*out = o;
	return XDM_OK;
}

/* Which opener the payload's tag and the object's kind ask for, or NULL. */
typedef enum xdm_status (*opener)(struct cuda_platform *p, const struct xdm_ipc_object *obj,
				  size_t bytes, struct cuda_ipc_open **out);

static opener opener_of(const struct xdm_ipc_object *obj)
{
	static const struct {
		enum xdm_ipc_kind kind;
		const char *tag;
		size_t len;
		opener open;
	} kinds[] = {
		{ XDM_IPC_BYTES, CUDA_IPC_LEGACY_TAG, sizeof(struct cuda_ipc_legacy), open_legacy },
		{ XDM_IPC_FD, CUDA_IPC_POOL_TAG, sizeof(struct cuda_ipc_pool), open_pool_ptr },
		{ XDM_IPC_FDS, CUDA_IPC_VMM_TAG, sizeof(struct cuda_ipc_vmm), open_vmm },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (obj->kind == kinds[i].kind && obj->payload_len == kinds[i].len &&
		    !memcmp(obj->payload, kinds[i].tag, 8))
			return kinds[i].open;
	return NULL;
}

enum xdm_status cuda_ipc_import(struct xdm_layer *self, const struct xdm_ipc_object *obj,
				size_t bytes, uint64_t *ptr, void **cookie)
{
	struct cuda_platform *p = platform_of(self);
	opener open = opener_of(obj);
	struct cuda_ipc_open *o = NULL;
	CUcontext restore;
	enum xdm_status st;

	if (!open)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda platform: the handle's memory is "
				     "not CUDA memory xdm exported (another platform's, or "
				     "another kind)");
	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	pthread_mutex_lock(&p->imports.lock);
	st = open(p, obj, bytes, &o);
	pthread_mutex_unlock(&p->imports.lock);
	cuda_ctx_leave(p, restore);
	if (st)
		return st;
	*ptr = (uint64_t)o->base + obj->offset;
	*cookie = o;
	return XDM_OK;
}

/* Under lock and the context rule: one import of o goes, and o with the last. */
static void close_open(struct cuda_platform *p, struct cuda_ipc_open *o)
{
	if (--o->refs)
		return;
	switch (o->kind) {
	case OPEN_LEGACY:
		p->drv.IpcCloseMemHandle(o->base);
		break;
	case OPEN_POOL_PTR:
		/*
		 * No implicit synchronization for pool memory: xdm_ipc_close
		 * waited for the import's stream, and work on other streams is
		 * the caller's to have finished (xdm(3)).
		 */
		p->drv.MemFree(o->base);
		close_open(p, o->of_pool);
		break;
	case OPEN_VMM:
		/* Each granule was mapped on its own, and is unmapped so. */
		for (size_t at = 0; at < o->size; at += o->piece)
			p->drv.MemUnmap(o->base + at, o->piece);
		p->drv.MemAddressFree(o->base, o->size);
		break;
	case OPEN_POOL:
		p->drv.MemPoolDestroy(o->pool);
		break;
	}
	drop(&p->imports, o);
}

void cuda_ipc_unmap(struct xdm_layer *self, uint64_t ptr, size_t bytes, void *cookie)
{
	struct cuda_platform *p = platform_of(self);
	CUcontext restore;

	(void)ptr;
	(void)bytes;
	/* Without the context the driver keeps the mapping until the process ends. */
	if (cuda_ctx_enter(p, &restore) != XDM_OK)
		return;
	pthread_mutex_lock(&p->imports.lock);
	close_open(p, cookie);
	pthread_mutex_unlock(&p->imports.lock);
	cuda_ctx_leave(p, restore);
}

void cuda_ipc_imports_fini(struct cuda_platform *p)
{
	struct cuda_ipc_imports *im = &p->imports;

	/* The core unmapped every import before this; what is left is a leak
	 * of the driver's, reclaimed with the context. */
	while (im->opens) {
		struct cuda_ipc_open *o = im->opens;

		im->opens = o->next;
		free(o);
	}
	pthread_mutex_destroy(&im->lock);
}
