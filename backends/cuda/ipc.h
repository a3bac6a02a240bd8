/* SPDX-License-Identifier: MIT */
/*
 * ipc.h - sharing device memory with other processes (xdm_ipc_export):
 * what each CUDA backend puts in a handle's payload, the exporters' common
 * calls, and the platform's side, which maps what another process exported.
 *
 * Three kinds of driver memory, three ways (xdm-cuda(7), SHARING):
 *   cuda_direct  the legacy IPC handle of the cuMemAlloc allocation
 *                (bytes alone: cuIpcGetMemHandle, cuIpcOpenMemHandle);
 *   cuda_async   with ipc=true its own pool is exportable: the pool's
 *                descriptor and the pointer's export data
 *                (cuMemPoolExportToShareableHandle, cuMemPoolExportPointer);
 *   cuda_vmm     each granule the block touches, a descriptor each
 *                (cuMemExportToShareableHandle), mapped by the importer
 *                into a range it reserves for them.
 * A pool over any of them answers with its chunk's memory and the block's
 * offset in it (its ipc_export is left to its upstream).
 */
#ifndef XDM_CUDA_IPC_H
#define XDM_CUDA_IPC_H

#include <pthread.h>
#include <stdint.h>

#include <cuda.h>

#include <xdm/module.h>

struct cuda_platform;

/* The payloads: a tag first, so that memory of another kind is refused. */
#define CUDA_IPC_LEGACY_TAG "cuipcmh1"
#define CUDA_IPC_POOL_TAG "cupoolp1"
#define CUDA_IPC_VMM_TAG "cuvmmgr1"

struct cuda_ipc_legacy {
	char tag[8];
	CUipcMemHandle handle;
};

struct cuda_ipc_pool {
	char tag[8];
	uint64_t pool_id;		/* the exporting layer's pool, for the importer's cache */
	uint64_t base;			/* the allocation, as the exporter sees it: the same */
	CUmemPoolPtrExportData data;
};

struct cuda_ipc_vmm {
	char tag[8];
	uint64_t piece_bytes;		/* the exporter's granule */
};

_Static_assert(sizeof(struct cuda_ipc_legacy) <= XDM_IPC_PAYLOAD_MAX, "fits a handle");
_Static_assert(sizeof(struct cuda_ipc_pool) <= XDM_IPC_PAYLOAD_MAX, "fits a handle");

/*
 * What the platform has opened, shared by every import of one driver
 * object: the driver lets a process open a legacy handle only once, and a
 * pool or a pool's pointer is imported once however often it is opened.
 */
struct cuda_ipc_open;

struct cuda_ipc_imports {
	pthread_mutex_t lock;		/* held across the driver's open and close */
	struct cuda_ipc_open *opens;
};

/* ---- the exporters ---------------------------------------------------- */

/* cuda_direct: the legacy handle of the allocation block lies in. */
enum xdm_status cuda_ipc_export_legacy(const struct cuda_platform *p, const char *layer,
				       const struct xdm_block *block, struct xdm_ipc_object *out);

/* cuda_async: the pool (pool_id names it) and the allocation block lies in. */
enum xdm_status cuda_ipc_export_pool(const struct cuda_platform *p, CUmemoryPool pool,
				     uint64_t pool_id, const struct xdm_block *block,
				     struct xdm_ipc_object *out);

/* A number for a pool that no other process's pool has (getentropy). */
uint64_t cuda_ipc_new_pool_id(void);

/* ---- the platform's side ------------------------------------------------ */

void cuda_ipc_imports_init(struct cuda_ipc_imports *im);
/* What imports are left open when the platform goes (none, normally). */
void cuda_ipc_imports_fini(struct cuda_platform *p);
enum xdm_status cuda_ipc_import(struct xdm_layer *self, const struct xdm_ipc_object *obj,
				size_t bytes, uint64_t *ptr, void **cookie);
void cuda_ipc_unmap(struct xdm_layer *self, uint64_t ptr, size_t bytes, void *cookie);

#endif /* XDM_CUDA_IPC_H */
