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
 * while the block is live, kept in a FIFO while it is quarantined, and in
 * a second list from when it leaves the FIFO until the checker thread has
 * read it back and freed it upstream (checker.c).
 */
#ifndef XDM_GUARD_H
#define XDM_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
	GUARD_CHECKING,		/* left the FIFO: read back, judged, then freed */
};

struct guard_block {
	struct guard_block *hash_next;	/* live table chain */
	struct guard_block *q_next;	/* quarantine FIFO, then the checker's list */
	struct xdm_block up;		/* as the upstream handed it out */
	uint64_t ptr;			/* the caller's address */
	size_t bytes;			/* the caller's bytes */
	xdm_generation generation;	/* known from deallocate on; 0 before */
	enum guard_where where;
	bool poisoned;			/* the poison was queued successfully */
	unsigned int reported;		/* 1 << status of each kind counted */
	unsigned int refs;		/* held by a running check: do not free */
	uint64_t ticket;		/* its place in the checker's order */
	char tag[GUARD_TAG_MAX];
};

/* The live table: chained, keyed by the caller's ptr, grows by doubling. */
struct guard_table {
	struct guard_block **buckets;
	size_t nbuckets;		/* a power of two */
	size_t count;
};

/* Host buffers of finished rounds kept for the next (checker.c). */
#define GUARD_SPARE_BUFFERS 4

/* Someone checking a chain taken from the pending list: the checker
 * thread, or a caller that would otherwise wait for it. */
struct guard_taker {
	struct guard_taker *next;
	uint64_t oldest;		/* the oldest ticket it has not released */
};

struct guard {
	/* Parameters, fixed at init. */
	size_t canary;
	size_t front;			/* canary rounded up to XDM_DEFAULT_ALIGN */
	uint8_t canary_pattern;
	uint8_t poison;
	uint64_t quarantine_bytes;
	uint64_t quarantine_count;
	/* Derived: the FIFO hands its oldest to the checker above lo_*, and
	 * the checker is woken once kick_* of them wait (see checker.c). */
	uint64_t lo_bytes, lo_count;
	uint64_t kick_bytes, kick_count;

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
	uint64_t q_bytes;		/* upstream bytes held back in the FIFO */

	/*
	 * Blocks out of the FIFO and not yet freed: pend_* those the checker
	 * has not taken yet, out_* all of them (the pending, and the batch
	 * in its hands).  q_* + out_* is what the limits bound.
	 */
	struct guard_block *pend_head, *pend_tail;
	uint64_t pend_count, pend_bytes;
	uint64_t out_count, out_bytes;
	uint64_t handed;		/* tickets given out, in FIFO order */
	struct guard_taker *takers;	/* chains being checked */
	uint8_t *spare[GUARD_SPARE_BUFFERS];	/* round buffers kept for reuse */
	unsigned int nspare;

	pthread_t checker;
	bool has_checker;		/* the thread was started */
	bool stop;			/* fini: the checker empties its list and ends */
	pid_t pid;			/* the process the checker runs in */
	pthread_cond_t work;		/* checker: the pending list has a batch */
	pthread_cond_t room;		/* callers: blocks were released */

	/* The first finding of a check no caller has been told of yet:
	 * returned by the next deallocate or reap_pending. */
	struct xdm_error report;

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
/* Compare n bytes of buf with region r from offset r_off on, adding to its
 * results (which the caller zeroed). */
void guard_region_compare(struct guard_region *r, size_t r_off, const uint8_t *buf, size_t n);

/* canary.c - the bytes just outside a block, live or freed. */
enum xdm_status guard_canary_fill(struct xdm_layer *self, const struct guard_block *b);
/*
 * Check both canaries of b.  Returns OK, OUT_OF_BOUNDS with the report set
 * as the thread's error (and copied into report), or the platform's error.
 */
enum xdm_status guard_canary_check(struct xdm_layer *self, const struct guard_block *b,
				   char *report, size_t len);
/* The same judgement on canaries already scanned (before, after). */
enum xdm_status guard_canary_judge(const struct guard *g, const struct guard_block *b,
				   const struct guard_region *before,
				   const struct guard_region *after, char *report, size_t len);

/*
 * poison.c - a freed block: the caller's bytes are overwritten with the
 * poison, the canaries keep their pattern, and all three must still hold
 * them when the block leaves the quarantine.
 */
#define GUARD_FREED_REGIONS 3	/* front canary, the caller's bytes, back canary */
enum xdm_status guard_poison_fill(struct xdm_layer *self, const struct guard_block *b);
/* The regions of a freed block, offsets from up.ptr in this order. */
void guard_freed_regions(const struct guard *g, const struct guard_block *b,
			 struct guard_region r[GUARD_FREED_REGIONS]);
/*
 * Judge scanned regions: each damage is counted (guard_note_violation) and
 * the first, OUT_OF_BOUNDS before USE_AFTER_FREE, is returned with the
 * thread's error set; OK if none.
 */
enum xdm_status guard_freed_judge(struct xdm_layer *self, struct guard_block *b,
				  struct guard_region r[GUARD_FREED_REGIONS]);
/* Scan and judge a freed block (synchronizing its stream). */
enum xdm_status guard_freed_check(struct xdm_layer *self, struct guard_block *b);

/* quarantine.c - the FIFO that delays reuse. */
/*
 * Queue b (already poisoned), hand what the limits push out to the
 * checker, and wait while the guard holds more than the limits allow.
 * Returns a finding no caller was told of yet, if any.  *state is what
 * became of b: QUARANTINED, or FREED if it left at once (checked).
 */
enum xdm_status guard_quarantine_put(struct xdm_layer *self, struct guard_block *b,
				     enum xdm_block_state *state);
/* Hand every quarantined block to the checker and wait until all are
 * checked and freed; the first finding not yet told, if any. */
enum xdm_status guard_quarantine_drain(struct xdm_layer *self);

/*
 * checker.c - reading freed blocks back, in batches, judging and freeing
 * them: on the guard's own thread, so that no caller waits for a stream on
 * their account, or by a caller that would otherwise wait for it.
 */
int guard_checker_start(struct xdm_layer *self);
/* Let it finish the pending list, and end it. */
void guard_checker_stop(struct xdm_layer *self);
/* Take a batch from the head of the pending list (not empty) as t; lock
 * held.  The chain is the taker's to pass to guard_check_chain. */
struct guard_block *guard_take_batch(struct guard *g, struct guard_taker *t);
/* Check, judge and free a batch in order, counting each release and
 * keeping the first finding in g->report; t is done after.  Lock not held. */
void guard_check_chain(struct xdm_layer *self, struct guard_block *chain,
		       struct guard_taker *t);
/* Has every block up to ticket been freed?  Lock held. */
bool guard_released(const struct guard *g, uint64_t ticket);
/* At fini: the round buffers kept. */
void guard_free_buffers(struct guard *g);
/* Keep the thread's current error as g->report unless one is kept. */
void guard_keep_report(struct guard *g);
/* Take the kept report, if any, into *out (lock held). */
bool guard_report_take_locked(struct guard *g, struct xdm_error *out);

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
