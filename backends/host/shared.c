/* SPDX-License-Identifier: MIT */
/*
 * shared.c - host memory another process can map: the host backend's
 * ipc=true, the twin of a driver's shareable allocations, so that the
 * whole sharing protocol (xdm_ipc_export, xdm(3)) runs on a machine
 * without a GPU.
 *
 * Each block is a memfd of its own, mapped shared.  Exporting a block
 * passes a duplicate of its descriptor; an importer maps it (platform.c,
 * host_ipc_import), and the memory lives while any process maps it, so an
 * exporter that dies leaves the importer's mapping valid.  Slower than
 * aligned_alloc (three system calls a block), hence not the default.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"

struct host_shared_block {
	struct host_shared_block *next;
	uintptr_t ptr;
	size_t bytes;			/* as the block's owner asked */
	size_t size;			/* mapped, a multiple of the page */
	int fd;
};

int host_sealed_memfd(const char *name, uint64_t bytes)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), err;

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) == 0 &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
		return fd;
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

enum xdm_status host_shared_alloc(struct host_shared *sh, size_t asked, size_t bytes,
				  void **out)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
	struct host_shared_block *b;
	void *p;
	int fd;

	if (bytes > SIZE_MAX - page)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: %zu bytes: too large",
				     bytes);
	size = bytes ? (bytes + page - 1) & ~(page - 1) : page;
	b = malloc(sizeof(*b));
	if (!b)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: no memory for a record");
	fd = host_sealed_memfd("xdm-host-block", size);
	if (fd < 0) {
		int err = errno;

		free(b);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: a shareable block of %zu "
				     "bytes (memfd): %s", bytes, strerror(err));
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int err = errno;

		close(fd);
		free(b);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: cannot map a shareable "
				     "block of %zu bytes: %s", bytes, strerror(err));
	}
	b->ptr = (uintptr_t)p;
	b->bytes = asked;
	b->size = size;
	b->fd = fd;
	pthread_mutex_lock(&sh->lock);
	b->next = sh->blocks;
	sh->blocks = b;
	pthread_mutex_unlock(&sh->lock);
	*out = p;
	return XDM_OK;
}

/* Under sh->lock: the record whose mapping holds ptr, and where it is kept. */
static struct host_shared_block **find(struct host_shared *sh, uintptr_t ptr)
{
	struct host_shared_block **p;

	for (p = &sh->blocks; *p; p = &(*p)->next)
		if (ptr >= (*p)->ptr && ptr < (*p)->ptr + (*p)->size)
			return p;
	return NULL;
}

void host_shared_release(struct host_shared *sh, void *ptr)
{
	struct host_shared_block **p, *b = NULL;

	pthread_mutex_lock(&sh->lock);
	p = find(sh, (uintptr_t)ptr);
	if (p) {
		b = *p;
		*p = b->next;
	}
	pthread_mutex_unlock(&sh->lock);
	if (!b)
		return;
	munmap((void *)b->ptr, b->size);
	close(b->fd);
	free(b);
}

enum xdm_status host_shared_export(struct host_shared *sh, const struct xdm_block *block,
				   struct xdm_ipc_object *out)
{
	struct host_shared_block **p;
	enum xdm_status st = XDM_OK;

	pthread_mutex_lock(&sh->lock);
	p = find(sh, (uintptr_t)block->ptr);
	if (!p || block->ptr + block->bytes > (*p)->ptr + (*p)->size) {
		st = xdm_error_set(XDM_E_INVALID, "host backend: 0x%llx is no shareable block of "
				   "this layer", (unsigned long long)block->ptr);
	} else {
		memset(out, 0, sizeof(*out));
		out->kind = XDM_IPC_FD;
		out->fd = fcntl((*p)->fd, F_DUPFD_CLOEXEC, 0);
		out->offset = block->ptr - (*p)->ptr;
		out->object_bytes = (*p)->size;
		/* Not when the block is a pool's part of a chunk, or a guard's
		 * inside its canaries: the rest of the memfd is someone's. */
		if (block->ptr == (*p)->ptr && block->bytes == (*p)->bytes)
			out->flags = XDM_IPC_ONLY_BLOCK;
		if (out->fd < 0)
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "host backend: cannot duplicate a "
					   "block's descriptor: %s", strerror(errno));
	}
	pthread_mutex_unlock(&sh->lock);
	return st;
}

void host_shared_init(struct host_shared *sh)
{
	pthread_mutex_init(&sh->lock, NULL);
	sh->blocks = NULL;
}

void host_shared_fini(struct host_shared *sh)
{
	while (sh->blocks) {
		struct host_shared_block *b = sh->blocks;

		sh->blocks = b->next;
		munmap((void *)b->ptr, b->size);
		close(b->fd);
		free(b);
	}
	pthread_mutex_destroy(&sh->lock);
}

/* ---- the importer's side: the host platform's ipc_import ---------------- */

/*
 * Whether another process's memfd can no longer shrink: a mapping of one
 * that can faults (SIGBUS) the day its sender cuts it.
 */
static bool cannot_shrink(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_SEAL);
}

static enum xdm_status unsealed(void)
{
	return xdm_error_set(XDM_E_INVALID, "host platform: the exporter's memory is not sealed "
			     "against shrinking: its sender could cut it from under this process "
			     "(xdm's exporters seal theirs)");
}

/* What an import mapped: the pages around the block. */
struct host_import {
	void *base;
	size_t len;
};

/* One memfd of the host backend: the pages around the block. */
static enum xdm_status import_fd(const struct xdm_ipc_object *obj, size_t bytes,
				 struct host_import *im, uint64_t *ptr)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start, end;
	struct stat sb;
	void *p;

	/* The handle is checked already; the descriptor is the kernel's word
	 * on how big the object is: never map past it. */
	if (!cannot_shrink(obj->fd))
		return unsealed();
	if (fstat(obj->fd, &sb) != 0 || (uint64_t)sb.st_size < obj->object_bytes ||
	    obj->offset > obj->object_bytes || bytes > obj->object_bytes - obj->offset)
		return xdm_error_set(XDM_E_INVALID, "host platform: the exporter's memory object "
				     "is smaller than the handle says");
	start = obj->offset & ~(page - 1);
	end = (obj->offset + (bytes ? bytes : 1) + page - 1) & ~(page - 1);
	p = mmap(NULL, (size_t)(end - start), PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd,
		 (off_t)start);
	if (p == MAP_FAILED)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: cannot map %zu bytes of "
				     "another process's memory: %s", bytes, strerror(errno));
	im->base = p;
	im->len = (size_t)(end - start);
	*ptr = (uint64_t)(uintptr_t)p + (obj->offset - start);
	return XDM_OK;
}

/*
 * host_vmm's granules, one descriptor each: the extent is reserved, then
 * each granule mapped in its place, as cuda_vmm's importer does.
 */
static enum xdm_status import_pieces(const struct xdm_ipc_object *obj, size_t bytes,
				     struct host_import *im, uint64_t *ptr)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct host_vmm_pieces pc;
	char *base;

	if (obj->payload_len != sizeof(pc))
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host platform: the handle's pieces "
				     "are not host_vmm's (exported by another platform)");
	memcpy(&pc, obj->payload, sizeof(pc));
	if (memcmp(pc.tag, HOST_VMM_PIECES_TAG, sizeof(pc.tag)))
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host platform: the handle's pieces "
				     "are not host_vmm's (exported by another platform)");
	if (!pc.piece_bytes || pc.piece_bytes % page || pc.first_offset % page ||
	    obj->object_bytes / pc.piece_bytes != obj->nfds ||
	    obj->object_bytes % pc.piece_bytes || bytes > obj->object_bytes - obj->offset)
		return xdm_error_set(XDM_E_INVALID, "host platform: the exporter's pieces do not "
				     "make the memory the handle says");
	for (uint32_t i = 0; i < obj->nfds; i++) {
		struct stat sb;

		if (!cannot_shrink(obj->fds[i]))
			return unsealed();
		if (fstat(obj->fds[i], &sb) != 0 ||
		    (uint64_t)sb.st_size < pc.first_offset + (i + 1) * pc.piece_bytes)
			return xdm_error_set(XDM_E_INVALID, "host platform: piece %u of the "
					     "exporter's memory is smaller than the handle says", i);
	}
	base = mmap(NULL, (size_t)obj->object_bytes, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: cannot reserve %llu "
				     "bytes for another process's memory: %s",
				     (unsigned long long)obj->object_bytes, strerror(errno));
	for (uint32_t i = 0; i < obj->nfds; i++) {
		void *at = base + (size_t)i * pc.piece_bytes;

		if (mmap(at, (size_t)pc.piece_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			 obj->fds[i], (off_t)(pc.first_offset + i * pc.piece_bytes)) == MAP_FAILED) {
			int err = errno;

			munmap(base, (size_t)obj->object_bytes);
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: cannot map piece "
					     "%u of another process's memory: %s", i, strerror(err));
		}
	}
	im->base = base;
	im->len = (size_t)obj->object_bytes;
	*ptr = (uint64_t)(uintptr_t)base + obj->offset;
	return XDM_OK;
}

enum xdm_status host_ipc_import(struct xdm_layer *self, const struct xdm_ipc_object *obj,
				size_t bytes, uint64_t *ptr, void **cookie)
{
	struct host_import *im;
	enum xdm_status st;

	(void)self;
	if ((obj->kind != XDM_IPC_FD || obj->fd < 0) && (obj->kind != XDM_IPC_FDS || !obj->nfds))
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host platform: the handle's memory is "
				     "not a host descriptor (exported by another platform)");
	im = malloc(sizeof(*im));
	if (!im)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: no memory for an import");
	if (obj->kind == XDM_IPC_FD)
		st = import_fd(obj, bytes, im, ptr);
	else
		st = import_pieces(obj, bytes, im, ptr);
	if (st) {
		free(im);
		return st;
	}
	*cookie = im;
	return XDM_OK;
}

void host_ipc_unmap(struct xdm_layer *self, uint64_t ptr, size_t bytes, void *cookie)
{
	struct host_import *im = cookie;

	(void)self;
	(void)ptr;
	(void)bytes;
	munmap(im->base, im->len);
	free(im);
}
