/* SPDX-License-Identifier: MIT */
/*
 * vmm_attrs.c - cuda_vmm's attributes: the granule, the reserved range, and
 * how much of it is mapped, in use, or on its way back; and its peers.
 *
 * Each reads one atomic that the backend writes under its mutex, so a read
 * never waits on a map or a release, and every value is exact whenever no
 * call is in flight.  The peers are set at init and never change.
 */
#include "config.h"

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
	return cuda_peers_show(cuda_vmm_of(self)->peers.set.granted, buf, len);
}

static int peers_skipped_show(struct xdm_layer *self, char *buf, size_t len)
{
	return cuda_peers_show(cuda_vmm_of(self)->peers.set.skipped, buf, len);
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
	{ "peers", 0444, "ordinals of the other devices every mapping grants read and write "
	  "(peers=), ascending, space separated; an empty line when none", peers_show, NULL },
	{ "peers_skipped", 0444, "ordinals that peers=all left out because they cannot access "
	  "this device; an empty line when none", peers_skipped_show, NULL },
	{ .name = NULL },
};
