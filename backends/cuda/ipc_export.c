/* SPDX-License-Identifier: MIT */
/*
 * ipc_export.c - what the CUDA backends tell of a block another process
 * is to map (their ipc_export), for the allocations the driver made whole:
 * cuda_direct's (a legacy IPC handle) and cuda_async's (an exportable
 * pool's pointer).  cuda_vmm describes its granules itself (vmm_ipc.c).
 *
 * The block may be a part of the allocation (a pool's block inside its
 * chunk, a guard's inside its canaries): the driver is asked where the
 * allocation starts and how long it is, and the block's offset in it goes
 * into the handle.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "cuda_priv.h"

uint64_t cuda_ipc_new_pool_id(void)
{
	uint64_t id = 0;

	while (!id)
		if (getentropy(&id, sizeof(id)) != 0)
			id = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&id;
	return id;
}

/* Under the context rule: the allocation block lies in. */
static enum xdm_status allocation_of(const struct cuda_platform *p, const char *layer,
				     const struct xdm_block *block, CUdeviceptr *base,
				     size_t *size)
{
	CUresult rc = p->drv.MemGetAddressRange(base, size, (CUdeviceptr)block->ptr);

	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "%s: cuMemGetAddressRange(0x%" PRIx64 ")", layer,
				 block->ptr);
	if ((uint64_t)*base > block->ptr || block->ptr - *base > *size ||
	    block->bytes > *size - (block->ptr - *base))
		return xdm_error_set(XDM_E_INVALID, "%s: 0x%" PRIx64 " (%zu bytes) runs past the "
				     "driver's allocation at 0x%llx (%zu bytes)", layer, block->ptr,
				     block->bytes, (unsigned long long)*base, *size);
	return XDM_OK;
}

static void describe(struct xdm_ipc_object *out, enum xdm_ipc_kind kind, uint64_t offset,
		     size_t size, const void *payload, size_t len)
{
	memset(out, 0, sizeof(*out));
	out->kind = kind;
	out->fd = -1;
	out->offset = offset;
	out->object_bytes = size;
	memcpy(out->payload, payload, len);
	out->payload_len = (uint32_t)len;
}

enum xdm_status cuda_ipc_export_legacy(const struct cuda_platform *p, const char *layer,
				       const struct xdm_block *block, struct xdm_ipc_object *out)
{
	struct cuda_ipc_legacy pay;
	CUdeviceptr base = 0;
	CUcontext restore;
	enum xdm_status st;
	size_t size = 0;
	CUresult rc;

	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	st = allocation_of(p, layer, block, &base, &size);
	if (st)
		goto out;
	memset(&pay, 0, sizeof(pay));
	memcpy(pay.tag, CUDA_IPC_LEGACY_TAG, sizeof(pay.tag));
	rc = p->drv.IpcGetMemHandle(&pay.handle, base);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "%s: cuIpcGetMemHandle(0x%llx)", layer,
			       (unsigned long long)base);
		goto out;
	}
	describe(out, XDM_IPC_BYTES, block->ptr - base, size, &pay, sizeof(pay));
	/*
	 * The legacy handle opens the whole allocation, and the driver asks
	 * nothing of whoever presents it: it is a bearer credential, which is
	 * why it travels in the server's reply and never in xdm's handle.
	 * The allocation holds nothing else only when the block is all of it.
	 */
	if (block->ptr == (uint64_t)base && block->bytes == size)
		out->flags = XDM_IPC_ONLY_BLOCK;
out:
	cuda_ctx_leave(p, restore);
	return st;
}

enum xdm_status cuda_ipc_export_pool(const struct cuda_platform *p, CUmemoryPool pool,
				     uint64_t pool_id, const struct xdm_block *block,
				     struct xdm_ipc_object *out)
{
	struct cuda_ipc_pool pay;
	CUdeviceptr base = 0;
	CUcontext restore;
	enum xdm_status st;
	size_t size = 0;
	int fd = -1;
	CUresult rc;

	st = cuda_ctx_enter(p, &restore);
	if (st)
		return st;
	st = allocation_of(p, "cuda_async", block, &base, &size);
	if (st)
		goto out;
	memset(&pay, 0, sizeof(pay));
	memcpy(pay.tag, CUDA_IPC_POOL_TAG, sizeof(pay.tag));
	pay.pool_id = pool_id;
	pay.base = (uint64_t)base;
	/*
	 * The pool first.  The driver exports a pool's pointer only after the
	 * pool itself has been exported, and only at the start of an
	 * allocation.  On the H200 (driver 580), cuMemPoolExportPointer
	 * answered CUDA_ERROR_INVALID_VALUE before
	 * cuMemPoolExportToShareableHandle, and CUDA_SUCCESS after it; a
	 * pointer 4 KiB into an allocation failed either way.  The descriptor
	 * is the pool's, and every importer gets a copy of it: the object
	 * holds every block of the pool, so it is never ONLY_BLOCK, and goes
	 * to the exporter's own user alone.
	 */
	rc = p->drv.MemPoolExportToShareableHandle(&fd, pool,
						   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda_async: cuMemPoolExportToShareableHandle(the "
			       "pool of CUDA device %u, a POSIX descriptor)", p->ordinal);
		goto out;
	}
	rc = p->drv.MemPoolExportPointer(&pay.data, base);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda_async: cuMemPoolExportPointer(0x%llx)",
			       (unsigned long long)base);
		close(fd);
		goto out;
	}
	describe(out, XDM_IPC_FD, block->ptr - base, size, &pay, sizeof(pay));
	out->fd = fd;
out:
	cuda_ctx_leave(p, restore);
	return st;
}
