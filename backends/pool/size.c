/* SPDX-License-Identifier: MIT */
/*
 * size.c - the size classes of small blocks.
 *
 * Up to 4 KiB a class is every multiple of the 256-byte grain; above it,
 * each doubling is cut in eight, so a small block is never rounded up by
 * more than an eighth.  Rounding costs memory only where blocks are small,
 * and buys a free that is one push onto a per-class list and an allocation
 * that is one pop, without searching or merging (arena.c).
 */
#include "config.h"

#include <stdlib.h>

#include "pool.h"

enum xdm_status pool_classes_init(struct pool *p)
{
	uint64_t size = POOL_GRAIN, step = POOL_GRAIN, grains;
	unsigned int n = 0;

	while (size <= p->params.small_max && n < POOL_MAX_CLASSES) {
		p->class_size[n++] = size;
		if (size >= 16 * step)
			step *= 2;
		size += step;
	}
	p->nclasses = n;
	/* small_max may fall between classes: sizes above the last are large. */
	p->params.small_max = p->class_size[n - 1];
	grains = p->params.small_max >> POOL_GRAIN_SHIFT;
	p->class_of = calloc(grains + 1, sizeof(*p->class_of));
	if (!p->class_of)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no memory for its size classes");
	/* Every small size maps to the least class that holds it. */
	for (uint64_t g = 1, c = 0; g <= grains; g++) {
		while (p->class_size[c] < g << POOL_GRAIN_SHIFT)
			c++;
		p->class_of[g] = (uint8_t)c;
	}
	return XDM_OK;
}

void pool_classes_fini(struct pool *p)
{
	free(p->class_of);
	p->class_of = NULL;
}
