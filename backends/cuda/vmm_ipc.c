/* SPDX-License-Identifier: MIT */
/*
 * vmm_ipc.c - cuda_vmm's blocks shared with other processes: each granule
 * is its own driver allocation, so a block is exported as the granules it
 * touches, one POSIX descriptor each (cuMemExportToShareableHandle), in
 * address order (XDM_IPC_FDS); the importer reserves a range as long and
 * maps each in its place (ipc_import.c).  A pool's block inside its chunk
 * shares the granules around it whole.
 *
 * A granule is exportable only if it was created so, with a descriptor
 * type in its properties; ipc= decides at init, for every granule of the
 * layer.  'auto' (the default) asks the device whether it has POSIX
 * descriptors and then creates and releases one granule with them, so a
 * driver that refuses the type costs the layer its sharing, never its
 * memory.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm.h"

bool cuda_vmm_ipc_parse(const char *word, enum cuda_vmm_ipc *out)
{
	static const char *const words[] = {
		[CUDA_VMM_IPC_AUTO] = "auto",
		[CUDA_VMM_IPC_TRUE] = "true",
		[CUDA_VMM_IPC_FALSE] = "false",
	};

	for (size_t i = 0; word && i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcmp(word, words[i])) {
			*out = (enum cuda_vmm_ipc)i;
			return true;
		}
	return false;
}

/* Whether the device makes exportable granules: asked, then tried once. */
static enum xdm_status try_exportable(struct cuda_vmm *v, size_t granule, bool *ok)
{
	const struct cuda_platform *p = v->p;
	CUmemAllocationProp prop = v->prop;
	CUmemGenericAllocationHandle h = 0;
	enum xdm_status st;
	int supported = 0;
	CUresult rc;

	*ok = false;
	st = CUDA_DEVICE_ATTRIBUTE(p, "cuda_vmm",
				   CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
				   &supported);
	if (st || !supported)
		return st;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	rc = p->drv.MemCreate(&h, granule, &prop, 0);
	if (rc != CUDA_SUCCESS)
		return XDM_OK;
	p->drv.MemRelease(h);
	*ok = true;
	return XDM_OK;
}

enum xdm_status cuda_vmm_ipc_setup(struct cuda_vmm *v, enum cuda_vmm_ipc ipc, size_t granule)
{
	enum xdm_status st;
	bool ok;

	v->exportable = false;
	if (ipc == CUDA_VMM_IPC_FALSE)
		return XDM_OK;
	st = try_exportable(v, granule, &ok);
	if (st)
		return st;
	if (!ok && ipc == CUDA_VMM_IPC_TRUE)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_vmm: ipc=true, but CUDA device %u "
				     "(%s) cannot create memory exportable as a POSIX descriptor; "
				     "ipc=auto does without", v->p->ordinal, v->p->name);
	if (ok)
		v->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	v->exportable = ok;
	return XDM_OK;
}

/* Under lock and the context rule: a descriptor for each of n granules from first. */
static enum xdm_status export_granules(struct cuda_vmm *v, uint64_t first, uint64_t n,
				       int *fds)
{
	const struct cuda_driver *d = &v->p->drv;

	for (uint64_t i = 0; i < n; i++) {
		int fd = -1;
		CUresult rc = d->MemExportToShareableHandle(&fd, v->handles[first + i],
							    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);

		if (rc != CUDA_SUCCESS) {
			while (i)
				close(fds[--i]);
			return cuda_fail(d, rc, "cuda_vmm: cuMemExportToShareableHandle(granule "
					 "of 0x%" PRIx64 ")", vrange_addr(&v->vr, first + i));
		}
		fds[i] = fd;
	}
	return XDM_OK;
}

enum xdm_status cuda_vmm_ipc_export(struct xdm_layer *self, const struct xdm_block *block,
				    struct xdm_ipc_object *out)
{
	struct cuda_vmm *v = cuda_vmm_of(self);
	uint64_t g = v->vr.granule, lo, hi, first = 0, n = 0;
	struct cuda_ipc_vmm pay;
	CUcontext restore;
	enum xdm_status st;
	int *fds;

	if (!v->exportable)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_vmm: its granules were not created "
				     "exportable (ipc=false, or the device cannot)");
	lo = block->ptr & ~(g - 1);
	hi = (block->ptr + (block->bytes ? block->bytes : 1) + g - 1) & ~(g - 1);
	n = hi > lo ? (hi - lo) / g : 0;
	if (!n || n > XDM_IPC_FDS_MAX)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "cuda_vmm: a block of %zu bytes cannot "
				     "be passed in %d descriptors or fewer", block->bytes,
				     XDM_IPC_FDS_MAX);
	if (!xdm_ipc_fd_room((uint32_t)n))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: a block of %" PRIu64
				     " granules needs as many descriptors, more than this process "
				     "may open (RLIMIT_NOFILE)", n);
	fds = malloc(sizeof(*fds) * n);
	if (!fds)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda_vmm: no memory to export a block");
	st = cuda_ctx_enter(v->p, &restore);
	if (st)
		goto err_free;
	pthread_mutex_lock(&v->lock);
	if (!vrange_span(&v->vr, lo, hi - lo, VR_MAPPED, &first, &n))
		st = xdm_error_set(XDM_E_INVALID, "cuda_vmm: 0x%" PRIx64 " (%zu bytes) is not "
				   "mapped memory of this layer", block->ptr, block->bytes);
	else
		st = export_granules(v, first, n, fds);
	pthread_mutex_unlock(&v->lock);
	cuda_ctx_leave(v->p, restore);
	if (st)
		goto err_free;
	memset(out, 0, sizeof(*out));
	out->kind = XDM_IPC_FDS;
	out->fd = -1;
	out->offset = block->ptr - lo;
	out->object_bytes = hi - lo;
	memset(&pay, 0, sizeof(pay));
	memcpy(pay.tag, CUDA_IPC_VMM_TAG, sizeof(pay.tag));
	pay.piece_bytes = g;
	memcpy(out->payload, &pay, sizeof(pay));
	out->payload_len = sizeof(pay);
	out->fds = fds;
	out->nfds = (uint32_t)n;
	/* Granules the block covers whole hold nothing else; a pool's part
	 * of a chunk shares its first or last granule with its neighbours. */
	if (block->ptr == lo && block->bytes == hi - lo)
		out->flags = XDM_IPC_ONLY_BLOCK;
	return XDM_OK;

err_free:
	free(fds);
	return st;
}
