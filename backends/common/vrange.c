/* SPDX-License-Identifier: MIT */
/*
 * vrange.c - the granule map of a reserved address range (vrange.h).
 *
 * A byte per granule: a device's range of twice its memory in 2 MiB
 * granules is some 10^5 bytes.  Finding room scans from the lowest free
 * granule up, lowest address first, so that what the layers above hold
 * stays packed at the bottom of the range, where neighbours can merge.
 * The scan is linear, and only growth calls it, which maps memory and
 * costs far more.
 */
#include "config.h"

#include <stdlib.h>

#include "vrange.h"

bool vrange_init(struct vrange *v, uint64_t base, uint64_t bytes, uint64_t granule)
{
	*v = (struct vrange){ 0 };
	if (!granule || (granule & (granule - 1)) || (base & (granule - 1)) || bytes < granule)
		return false;
	v->state = calloc(bytes / granule, 1);
	if (!v->state)
		return false;
	v->base = base;
	v->granule = granule;
	v->count = bytes / granule;
	return true;
}

void vrange_fini(struct vrange *v)
{
	free(v->state);
	*v = (struct vrange){ 0 };
}

bool vrange_find(const struct vrange *v, uint64_t n, uint64_t *first)
{
	uint64_t run = 0;

	if (!n || n > v->count)
		return false;
	for (uint64_t i = v->low_free; i < v->count; i++) {
		if (v->state[i] != VR_FREE) {
			run = 0;
			continue;
		}
		if (++run == n) {
			*first = i + 1 - n;
			return true;
		}
	}
	return false;
}

bool vrange_span(const struct vrange *v, uint64_t ptr, uint64_t bytes, enum vrange_state st,
		 uint64_t *first, uint64_t *n)
{
	uint64_t mask = v->granule - 1, i, k;

	if (!bytes || (ptr & mask) || (bytes & mask) || ptr < v->base)
		return false;
	i = (ptr - v->base) / v->granule;
	k = bytes / v->granule;
	if (i >= v->count || k > v->count - i)
		return false;
	for (uint64_t j = i; j < i + k; j++)
		if (v->state[j] != st)
			return false;
	*first = i;
	*n = k;
	return true;
}

static uint64_t *count_of(struct vrange *v, enum vrange_state st)
{
	return st == VR_MAPPED ? &v->mapped : st == VR_RELEASING ? &v->releasing : NULL;
}

void vrange_set(struct vrange *v, uint64_t first, uint64_t n, enum vrange_state st)
{
	for (uint64_t j = first; j < first + n; j++) {
		uint64_t *from = count_of(v, v->state[j]), *to = count_of(v, st);

		if (from)
			(*from)--;
		if (to)
			(*to)++;
		v->state[j] = (uint8_t)st;
	}
	if (st == VR_FREE && first < v->low_free)
		v->low_free = first;
	/* Taking the lowest free granule moves the floor up past what is taken. */
	while (v->low_free < v->count && v->state[v->low_free] != VR_FREE)
		v->low_free++;
}
