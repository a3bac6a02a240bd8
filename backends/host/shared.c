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
	size_t size;			/* mapped, a multiple of the page */
	int fd;
};

enum xdm_status host_shared_alloc(struct host_shared *sh, size_t bytes, void **out)
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
	fd = memfd_create("xdm-host-block", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		int err = errno;

		if (fd >= 0)
			close(fd);
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

/* What an import mapped: the pages around the block. */
struct host_import {
	void *base;
	size_t len;
};

enum xdm_status host_ipc_import(struct xdm_layer *self, const struct xdm_ipc_object *obj,
				size_t bytes, uint64_t *ptr, void **cookie)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start, end;
	struct host_import *im;
	struct stat sb;
	void *p;

	(void)self;
	if (obj->kind != XDM_IPC_FD || obj->fd < 0)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host platform: the handle's memory is "
				     "not a host descriptor (exported by another platform)");
	/* The handle is checked already; the descriptor is the kernel's word
	 * on how big the object is: never map past it. */
	if (fstat(obj->fd, &sb) != 0 || (uint64_t)sb.st_size < obj->object_bytes ||
	    obj->offset > obj->object_bytes || bytes > obj->object_bytes - obj->offset)
		return xdm_error_set(XDM_E_INVALID, "host platform: the exporter's memory object "
				     "is smaller than the handle says");
	start = obj->offset & ~(page - 1);
	end = (obj->offset + (bytes ? bytes : 1) + page - 1) & ~(page - 1);
	im = malloc(sizeof(*im));
	if (!im)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: no memory for an import");
	p = mmap(NULL, (size_t)(end - start), PROT_READ | PROT_WRITE, MAP_SHARED, obj->fd,
		 (off_t)start);
	if (p == MAP_FAILED) {
		int err = errno;

		free(im);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: cannot map %zu bytes of "
				     "another process's memory: %s", bytes, strerror(err));
	}
	im->base = p;
	im->len = (size_t)(end - start);
	*ptr = (uint64_t)(uintptr_t)p + (obj->offset - start);
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
