/* SPDX-License-Identifier: MIT */
/*
 * vrange.h - a reserved address range cut into granules, and which of
 * them are free, mapped, or on their way back.
 *
 * The virtual-memory backends (cuda_vmm, host_vmm) reserve one large range
 * of addresses and map physical memory into it a granule at a time.  This
 * map is the part of their bookkeeping that has nothing to do with the
 * driver: finding room, checking that a range handed back is one they
 * mapped, and keeping a granule whose release is still queued behind a
 * stream from being handed out again.  It is compiled into each module
 * that uses it; the caller holds its own lock around every call.
 */
#ifndef XDM_VRANGE_H
#define XDM_VRANGE_H

#include <stdbool.h>
#include <stdint.h>

enum vrange_state {
	VR_FREE = 0,		/* nothing mapped: may be handed out */
	VR_MAPPED,		/* handed out */
	VR_RELEASING,		/* handed back, not yet unmapped: not reusable */
};

struct vrange {
	uint64_t base;		/* first address, a multiple of granule */
	uint64_t granule;	/* bytes per granule, a power of two */
	uint64_t count;		/* granules in the range */
	uint8_t *state;		/* enum vrange_state, one per granule */
	uint64_t low_free;	/* no free granule has a lower index */
	uint64_t mapped;	/* granules VR_MAPPED */
	uint64_t releasing;	/* granules VR_RELEASING */
};

/* All free; false: no host memory for the map, or a bad shape. */
bool vrange_init(struct vrange *v, uint64_t base, uint64_t bytes, uint64_t granule);
void vrange_fini(struct vrange *v);

/* The lowest run of n free granules; false: none. */
bool vrange_find(const struct vrange *v, uint64_t n, uint64_t *first);

/*
 * Whether [ptr, ptr + bytes) is non-empty, on granule bounds, inside the
 * range and wholly in state st; if so, its first granule and count.
 */
bool vrange_span(const struct vrange *v, uint64_t ptr, uint64_t bytes, enum vrange_state st,
		 uint64_t *first, uint64_t *n);

/* Move granules [first, first + n) to st, keeping the counts. */
void vrange_set(struct vrange *v, uint64_t first, uint64_t n, enum vrange_state st);

static inline uint64_t vrange_addr(const struct vrange *v, uint64_t index)
{
	return v->base + index * v->granule;
}

#endif /* XDM_VRANGE_H */
