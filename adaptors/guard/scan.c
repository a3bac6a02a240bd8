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
 * (the canaries) share a single copy-and-synchronize round.  This is the
 * check of one block, for the check attribute and for blocks too large for
 * the checker's batches (checker.c); the comparison serves both.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "adaptors/guard/guard.h"

#define GUARD_SCAN_CHUNK ((size_t)1 << 20)

/* A piece of a region that sits in the buffer this round. */
struct piece {
	struct guard_region *r;
	size_t r_off;		/* from the region's start */
	size_t buf_off;
	size_t n;
};

/* The bytes of buf from i on, a word at a time, until one differs. */
static size_t skip_intact(const uint8_t *buf, size_t i, size_t n, uint8_t pattern)
{
	uint64_t want = 0x0101010101010101ULL * pattern, w;

	for (; i + sizeof(w) <= n; i += sizeof(w)) {
		memcpy(&w, buf + i, sizeof(w));
		if (w != want)
			break;
	}
	return i;
}

void guard_region_compare(struct guard_region *r, size_t r_off, const uint8_t *buf, size_t n)
{
	/* Intact memory is the rule: compare it by words, damage by bytes. */
	for (size_t i = skip_intact(buf, 0, n, r->pattern); i < n;
	     i = skip_intact(buf, i + 1, n, r->pattern)) {
		size_t off = r_off + i;

		if (buf[i] == r->pattern)
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
			guard_region_compare(pieces[k].r, pieces[k].r_off, buf + pieces[k].buf_off,
					     pieces[k].n);
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
