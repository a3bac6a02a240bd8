/* SPDX-License-Identifier: MIT */
/*
 * scan.c - read device bytes back and compare them with what they should
 * hold.
 *
 * The bytes are copied into a host buffer by the platform, on the block's
 * stream, so the copy comes after every write queued there (and after the
 * waits the core queued for cross-stream uses before a free), then the
 * stream is synchronized.  The copy works on cuda because of unified
 * addressing, and the buffer may be ordinary malloc memory because nothing
 * reads it before the synchronize.  Large ranges go through the buffer in
 * chunks, so a freed 1 GiB block costs a bounded host buffer; small ones
 * (the canaries) share a single copy-and-synchronize round.
 */
#include "config.h"

#include <stdlib.h>

#include "adaptors/guard/guard.h"

#define GUARD_SCAN_CHUNK ((size_t)1 << 20)

/* A piece of a region that sits in the buffer this round. */
struct piece {
	struct guard_region *r;
	size_t r_off;		/* from the region's start */
	size_t buf_off;
	size_t n;
};

static void compare(const uint8_t *buf, const struct piece *p)
{
	struct guard_region *r = p->r;

	for (size_t i = 0; i < p->n; i++) {
		size_t off = p->r_off + i;

		if (buf[p->buf_off + i] == r->pattern)
			continue;
		if (!r->damaged++)
			r->lowest = off;
		r->highest = off;
	}
}

enum xdm_status guard_scan(struct xdm_layer *self, xdm_stream_id stream, struct guard_region *r,
			   size_t nr)
{
	struct piece pieces[GUARD_SCAN_MAX_REGIONS];
	size_t total = 0, cap, i = 0, off = 0;
	enum xdm_status st = XDM_OK;
	uint8_t *buf;

	if (nr > GUARD_SCAN_MAX_REGIONS)
		return xdm_error_set(XDM_E_INVALID, "guard: %zu regions to scan at once", nr);
	for (size_t k = 0; k < nr; k++) {
		r[k].damaged = r[k].lowest = r[k].highest = 0;
		total += r[k].n;
	}
	if (!total)
		return XDM_OK;
	cap = total < GUARD_SCAN_CHUNK ? total : GUARD_SCAN_CHUNK;
	buf = malloc(cap);
	if (!buf)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "guard: no host memory (%zu bytes) to read a block back", cap);

	while (i < nr) {
		size_t used = 0, np = 0;

		/* Each region adds at most one piece per round: np <= nr. */
		while (i < nr && used < cap) {
			size_t take = r[i].n - off;

			if (take > cap - used)
				take = cap - used;
			if (take) {
				st = xdm_layer_memcpy(self, (uint64_t)(uintptr_t)(buf + used),
						      r[i].ptr + off, take, stream);
				if (st)
					goto drain;
				pieces[np++] = (struct piece){ &r[i], off, used, take };
				used += take;
				off += take;
			}
			if (off == r[i].n) {
				i++;
				off = 0;
			}
		}
		st = xdm_layer_stream_synchronize(self, stream);
		if (st)
			goto leak;
		for (size_t k = 0; k < np; k++)
			compare(buf, &pieces[k]);
	}
	free(buf);
	return XDM_OK;

drain:
	/* Copies already queued write into buf: it must outlive them. */
	if (xdm_layer_stream_synchronize(self, stream) == XDM_OK) {
		free(buf);
		return st;
	}
leak:
	/*
	 * The stream could not be waited for, so a queued copy may still land
	 * in buf: leaking it is the lesser harm.  The platform's error stands.
	 */
	return st;
}
