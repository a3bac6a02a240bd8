/* SPDX-License-Identifier: MIT */
/*
 * vmm_attrs.c - cuda_vmm's attributes: the granule, the reserved range, and
 * how much of it is mapped, in use, or on its way back; and its peers.
 *
 * Each reads one atomic that the backend writes under its mutex, so a read
 * never waits on a map or a release, and every value is exact whenever no
 * call is in flight.  `peers` is the one that may be written: a grant,
 * made under the mutex like a map (see cuda_vmm_grant()).
 */
#include "config.h"

#include <errno.h>

#include "vmm.h"

static uint64_t load(atomic_uint_fast64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

static int granule_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, cuda_vmm_of(self)->vr.granule);
}

static int reserved_va_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, cuda_vmm_of(self)->reserved);
}

static int mapped_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, load(&cuda_vmm_of(self)->mapped));
}

static int mapped_peak_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, load(&cuda_vmm_of(self)->mapped_peak));
}

static int releasing_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, load(&cuda_vmm_of(self)->releasing));
}

static int maps_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, load(&cuda_vmm_of(self)->maps));
}

static int releases_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, load(&cuda_vmm_of(self)->releases));
}

static int peers_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_peers_show(load(&cuda_vmm_of(self)->peers_shown), buf, len);
}

/* A grant to more devices; checked whole before any mapping is touched. */
static int peers_store(struct xdm_layer *self, const char *buf, size_t len)
{
	struct cuda_vmm *v = cuda_vmm_of(self);
	struct cuda_peers_request req;
	CUcontext restore;
	enum xdm_status st;

	st = cuda_peers_parse_write("cuda_vmm", buf, len, &req);
	if (st)
		return cuda_peers_errno(st);
	st = cuda_ctx_enter(v->p, &restore);
	if (st)
		return -EIO;
	pthread_mutex_lock(&v->lock);
	st = cuda_vmm_grant(v, &req);
	pthread_mutex_unlock(&v->lock);
	cuda_ctx_leave(v->p, restore);
	return st ? cuda_peers_errno(st) : 0;
}

static int peers_skipped_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_peers_show(load(&cuda_vmm_of(self)->skipped_shown), buf, len);
}

static int ipc_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_show_u64(buf, len, cuda_vmm_of(self)->exportable);
}

const struct xdm_attr cuda_vmm_attrs[] = {
	{ "granule", 0444, "bytes of each piece memory is mapped and given back in",
	  granule_show, NULL },
	{ "reserved_va", 0444, "bytes of the virtual address range reserved at init",
	  reserved_va_show, NULL },
	{ "mapped", 0444, "bytes of device memory mapped now, including those whose release "
	  "waits on a stream", mapped_show, NULL },
	{ "mapped_peak", 0444, "the most bytes mapped at once since the layer was created",
	  mapped_peak_show, NULL },
	{ "releasing", 0444, "bytes handed back whose release waits on their stream",
	  releasing_show, NULL },
	{ "maps", 0444, "granules mapped since the layer was created", maps_show, NULL },
	{ "releases", 0444, "granules unmapped and released since the layer was created",
	  releases_show, NULL },
	{ "peers", 0644, "ordinals of the other devices every mapping grants read and write "
	  "(peers=), ascending, space separated; an empty line when none.  A write ('1', "
	  "'1,3' or 'all') grants those devices too, on every mapping made and every one to "
	  "come; a grant is never taken back; the layer's own device is accepted and changes "
	  "nothing; a device that is missing or cannot access this one refuses the whole "
	  "write", peers_show, peers_store },
	{ "peers_skipped", 0444, "ordinals that peers=all (or a write of all) left out because "
	  "they cannot access this device; an empty line when none", peers_skipped_show, NULL },
	{ "ipc", 0444, "1 when blocks can be shared with other processes (ipc=, and what the "
	  "device allows), else 0", ipc_show, NULL },
	{ .name = NULL },
};
