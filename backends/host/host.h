/* SPDX-License-Identifier: MIT */
/*
 * host.h - the ops tables of the host module, for module.c.
 *
 * The platform (streams, events, copies on worker threads) and the backend
 * (host memory as device memory) are separate tables of one shared object;
 * the core keys tables by kind and name, so both are called "host".
 * host_vmm (vmm.c) is a second backend: one reserved address range mapped a
 * granule at a time, the host twin of cuda_vmm.
 */
#ifndef XDM_HOST_HOST_H
#define XDM_HOST_HOST_H

#include <pthread.h>
#include <stdint.h>

#include <xdm/module.h>

extern const struct xdm_ops host_platform_ops;
extern const struct xdm_ops host_backend_ops;
extern const struct xdm_ops host_vmm_ops;

/*
 * Shareable host memory (shared.c): the host backend's blocks with ipc=true,
 * one memfd each, that another process maps (xdm_ipc_export).
 */
struct host_shared_block;
struct host_shared {
	pthread_mutex_t lock;			/* the list; no system call under it */
	struct host_shared_block *blocks;	/* live blocks, newest first */
};

void host_shared_init(struct host_shared *sh);
void host_shared_fini(struct host_shared *sh);
/* A block the caller asked bytes for, of size bytes (rounded by the caller). */
enum xdm_status host_shared_alloc(struct host_shared *sh, size_t asked, size_t bytes,
				  void **out);
void host_shared_release(struct host_shared *sh, void *ptr);
/*
 * A memfd of size bytes whose size nobody can change any more (sealed
 * against shrinking and growing, and against new seals): an importer maps
 * it, and a descriptor passed to another process must not let that
 * process cut the pages from under this one, nor the exporter from under
 * its importers.  -1 with errno set.
 */
int host_sealed_memfd(const char *name, uint64_t bytes);
/* The memfd that holds [block->ptr, +bytes): a part of a block will do.
 * It vouches for holding nothing else (XDM_IPC_ONLY_BLOCK) when the block
 * is the whole of what the backend allocated. */
enum xdm_status host_shared_export(struct host_shared *sh, const struct xdm_block *block,
				   struct xdm_ipc_object *out);

/*
 * What host_vmm puts in the payload of a block it exports in pieces
 * (XDM_IPC_FDS): one descriptor a granule, each the range's memfd, the
 * first granule at first_offset in it and each next one piece_bytes on.
 */
#define HOST_VMM_PIECES_TAG "hostvmm1"

struct host_vmm_pieces {
	char tag[8];
	uint64_t first_offset;
	uint64_t piece_bytes;
};

/* The platform's side (platform.c): map and unmap another process's memfd. */
enum xdm_status host_ipc_import(struct xdm_layer *self, const struct xdm_ipc_object *obj,
				size_t bytes, uint64_t *ptr, void **cookie);
void host_ipc_unmap(struct xdm_layer *self, uint64_t ptr, size_t bytes, void *cookie);

#endif /* XDM_HOST_HOST_H */
