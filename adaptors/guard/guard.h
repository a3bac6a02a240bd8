/* SPDX-License-Identifier: MIT */
/*
 * guard.h - the guard adaptor's own types, shared by its files only.
 *
 * Each block the guard hands out sits inside a larger upstream block:
 *
 *	up.ptr          ptr = up.ptr + front       ptr + bytes
 *	| front canary  | the caller's bytes       | back canary | (slack) |
 *
 * front is the canary rounded up to XDM_DEFAULT_ALIGN so that ptr keeps the
 * upstream's alignment; back is exactly the canary.  Device memory cannot
 * hold host pointers, so what the guard knows about a block lives in a host
 * record (struct guard_block), found by the caller's ptr in a hash table
 * while the block is live and kept in a FIFO while it is quarantined.
 */
#ifndef XDM_GUARD_H
#define XDM_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xdm/module.h>

/* Room for a copy of the caller's tag: the caller's string may not outlive
 * the free, and a quarantined block is reported long after it. */
#define GUARD_TAG_MAX 48

/* Longest report kept for last_violation and the check attribute. */
#define GUARD_REPORT_MAX 512

enum guard_where {
	GUARD_LIVE = 1,		/* in the live table */
	GUARD_DEALLOCATING,	/* taken out of it by deallocate, not yet queued */
	GUARD_QUARANTINED,	/* in the FIFO */
	GUARD_EVICTING,		/* taken out of the FIFO, about to be freed */
};

struct guard_block {
	struct guard_block *hash_next;	/* live table chain */
	struct guard_block *q_next;	/* quarantine FIFO */
	struct xdm_block up;		/* as the upstream handed it out */
	uint64_t ptr;			/* the caller's address */
	size_t bytes;			/* the caller's bytes */
	xdm_generation generation;	/* known from deallocate on; 0 before */
	enum guard_where where;
	bool poisoned;			/* the poison was queued successfully */
	unsigned int reported;		/* 1 << status of each kind counted */
	unsigned int refs;		/* held by a running check: do not free */
	char tag[GUARD_TAG_MAX];
};

/* The live table: chained, keyed by the caller's ptr, grows by doubling. */
struct guard_table {
	struct guard_block **buckets;
	size_t nbuckets;		/* a power of two */
	size_t count;
};

struct guard {
	/* Parameters, fixed at init. */
	size_t canary;
	size_t front;			/* canary rounded up to XDM_DEFAULT_ALIGN */
	uint8_t canary_pattern;
	uint8_t poison;
	uint64_t quarantine_bytes;
	uint64_t quarantine_count;

	/*
	 * One lock for the table, the FIFO and the counters: a debug layer
	 * may serialise.  It is never held across a call into the platform
	 * or the upstream, which may block on a stream; records in use by
	 * a check are pinned by refs instead, and whoever wants to free one
	 * waits on unpinned.
	 */
	pthread_mutex_t lock;
	pthread_cond_t unpinned;
	struct guard_table live;
	struct guard_block *q_head, *q_tail;
	uint64_t q_count;
	uint64_t q_bytes;		/* upstream bytes held back */
	uint64_t violations;
	char last_violation[GUARD_REPORT_MAX];
	char last_check[GUARD_REPORT_MAX];
};

static inline struct guard *guard_of(const struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/* live.c - the table of live blocks; callers hold g->lock. */
int guard_table_init(struct guard_table *t);
void guard_table_destroy(struct guard_table *t);
/* Never fails: growing is best effort, a longer chain only costs time. */
void guard_table_insert(struct guard_table *t, struct guard_block *b);
struct guard_block *guard_table_remove(struct guard_table *t, uint64_t ptr);

/* scan.c - copy device bytes back and compare them with a pattern. */
#define GUARD_SCAN_MAX_REGIONS 4

struct guard_region {
	uint64_t ptr;			/* device address */
	size_t n;
	uint8_t pattern;		/* what every byte should hold */
	/* results, offsets from ptr */
	size_t damaged;			/* bytes that differ */
	size_t lowest, highest;		/* valid when damaged != 0 */
};

/*
 * Check nr (at most GUARD_SCAN_MAX_REGIONS) regions in stream order on
 * stream, synchronizing it; fills in each region's results.
 */
enum xdm_status guard_scan(struct xdm_layer *self, xdm_stream_id stream, struct guard_region *r,
			   size_t nr);

/* canary.c - the bytes just outside a live block. */
enum xdm_status guard_canary_fill(struct xdm_layer *self, const struct guard_block *b);
/*
 * Check both canaries of b.  Returns OK, OUT_OF_BOUNDS with the report set
 * as the thread's error (and copied into report), or the platform's error.
 */
enum xdm_status guard_canary_check(struct xdm_layer *self, const struct guard_block *b,
				   char *report, size_t len);

/*
 * poison.c - a freed block: the whole guarded range, canaries included, is
 * overwritten with the poison, and must still hold it when it leaves the
 * quarantine.  USE_AFTER_FREE (report set) if anything changed.
 */
enum xdm_status guard_poison_fill(struct xdm_layer *self, const struct guard_block *b);
enum xdm_status guard_poison_check(struct xdm_layer *self, const struct guard_block *b,
				   char *report, size_t len);

/* quarantine.c - the FIFO that delays reuse. */
/*
 * Queue b (already poisoned) and evict what the limits push out, checking
 * each.  Returns the first violation or error among the evicted.  *state
 * is what became of b: QUARANTINED, or the upstream's state if it left at
 * once.
 */
enum xdm_status guard_quarantine_put(struct xdm_layer *self, struct guard_block *b,
				     enum xdm_block_state *state);
/* Evict everything, checking each; the first violation or error. */
enum xdm_status guard_quarantine_flush(struct xdm_layer *self);
/* Free b upstream and its record, once no check holds it; *state (may be
 * NULL) is what the upstream made of the block. */
enum xdm_status guard_release(struct xdm_layer *self, struct guard_block *b,
			      enum xdm_block_state *state);

/* attrs.c */
extern const struct xdm_attr guard_attrs[];

/* report.c - violations kept for the attributes, errors carried over. */
/* "block 0x... (N bytes, generation G, tag "T")" into buf. */
void guard_describe(const struct guard_block *b, char *buf, size_t len);
/* Count a violation of kind code found in b (once per block and kind)
 * and keep its report; b may be NULL. */
void guard_note_violation(struct guard *g, struct guard_block *b, enum xdm_status code,
			  const char *report);
/* Re-set the thread's error from a saved copy, payload included. */
enum xdm_status guard_error_restore(const struct xdm_error *saved);

#endif /* XDM_GUARD_H */
