/* SPDX-License-Identifier: MIT */
/*
 * row.h - the hot path of the log: one record into the calling thread's
 * ring, inlined into the allocate and free methods (module.c).
 *
 * A row that needs nothing but a slot costs a thread-local lookup, a
 * strlen, the stores of one 64-byte record and a release store of the
 * ring's head; everything else (the thread's first row, a long tag, the
 * kick at half a ring, a full ring, a marker after drops) is the slow
 * path in ring.c.  The owner keeps in fast_end the head at which the next
 * of those is due, so the fast path makes one comparison for all of them.
 */
#ifndef XDM_ADAPTORS_LOGGING_ROW_H
#define XDM_ADAPTORS_LOGGING_ROW_H

#include <string.h>

#include "adaptors/logging/logging.h"

/*
 * Copies len <= LOG_REC_TAG_INLINE bytes with fixed-size moves that may
 * overlap: the tag's length varies per row, and a call to memcpy for a few
 * bytes costs more than the copy.  Never reads past src + len.
 */
static inline void log_tag_copy(char *dst, const char *src, size_t len)
{
	if (len >= 8) {
		memcpy(dst, src, 8);
		if (len > 16)
			memcpy(dst + 8, src + 8, 8);
		memcpy(dst + len - 8, src + len - 8, 8);
	} else if (len >= 4) {
		memcpy(dst, src, 4);
		memcpy(dst + len - 4, src + len - 4, 4);
	} else if (len) {
		dst[0] = src[0];
		dst[len / 2] = src[len / 2];
		dst[len - 1] = src[len - 1];
	}
}

static inline void log_row(struct logging *lg, const struct log_event *ev)
{
	struct log_ring *r = log_ring_mine(lg);
	size_t tag_len = strlen(ev->tag);
	struct log_rec *rec;
	uint64_t head;

	if (__builtin_expect(!r || tag_len > LOG_REC_TAG_INLINE, 0)) {
		log_row_slow(lg, r, ev, tag_len);
		return;
	}
	head = r->head_own;
	if (__builtin_expect(head >= r->fast_end, 0)) {
		log_row_slow(lg, r, ev, tag_len);
		return;
	}
	/* Only the owner adds, so a plain load and store: no lock prefix. */
	atomic_store_explicit(&r->rows, atomic_load_explicit(&r->rows, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	rec = (struct log_rec *)(r->slots + (head & r->mask) * LOG_SLOT);
	log_rec_fill(rec, ev, tag_len);
	log_tag_copy(rec->tag, ev->tag, tag_len);
	r->head_own = head + 1;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

#endif /* XDM_ADAPTORS_LOGGING_ROW_H */
