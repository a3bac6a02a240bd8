/* SPDX-License-Identifier: MIT */
/*
 * counters.h - the runtime's own counters: what xdm_runtime_stats() returns
 * and the files of MOUNT/N/ show (tree_runtime.c).
 *
 * Allocations, frees and bytes are counted per thread.  Each thread that
 * uses a runtime gets a record of its own, on its own cache line, found
 * through a pthread key the runtime owns; only that thread writes it, with
 * a relaxed load and store (no lock prefix), so counting adds no atomic
 * read-modify-write to an allocation or a free.  A thread's bytes are what
 * it allocated less what it freed, so they go negative when it frees
 * blocks that other threads allocated: they are kept modulo 2^64 and only
 * the sum is read as a signed number.  Readers sum the records; a thread
 * that exits first folds its record into the runtime's retired totals, so
 * nothing it counted is lost (its blocks still live stay counted).
 *
 * The peak is sampled: when a thread's bytes pass the most that thread has
 * held, the runtime sums every thread's bytes and keeps the highest sum (a
 * compare-and-swap, made only when the sum is a new peak); every reader's
 * sum is kept the same way.  When one thread makes every allocation and
 * free, a new peak is always a new high of that thread, so the peak is
 * exact; with several threads it is a sample (see xdm_stats in xdm.h).
 *
 * What each counter the core shows says (xdm-fs(7) says the same):
 *  - allocs, frees, blocks_outstanding (allocs - frees), bytes_outstanding:
 *    exact at quiescence.  While threads allocate and free, a sum may miss
 *    or half-see their calls in flight; a difference that would be negative
 *    reads 0.
 *  - bytes_peak: exact when one thread makes every allocation and free;
 *    otherwise a sample, documented as one.
 *  - failures, waits_queued, events_recorded: one atomic add per event,
 *    off the allocation path: exact at quiescence.
 *  - streams/ID/events_outstanding: taken and released under the block's
 *    shard lock, so exact at quiescence (a negative read shows 0).
 *  - streams/ID/pending_frees: exact when read (each counted free is asked
 *    about), but counts only frees that waited on another stream, as named.
 *  - blocks/GENERATION/: copied from the registry under the shard lock.
 *  - layers/: each module's own files; its man page says what they mean.
 */
#ifndef XDM_CORE_COUNTERS_H
#define XDM_CORE_COUNTERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <xdm/module.h>

#ifndef XDM_HIDDEN
#define XDM_HIDDEN __attribute__((visibility("hidden")))
#endif

struct xdm_counters;

/* One thread's counts in one runtime; only the owner writes the counts. */
struct xdm_thread_counts {
	_Atomic uint64_t allocs;
	_Atomic uint64_t frees;
	_Atomic uint64_t bytes;		/* allocated less freed, modulo 2^64 */
	/* The most bytes it held: written by its owner, and by a peak reset
	 * (relaxed: a reset that meets an allocation in flight is a sample). */
	_Atomic int64_t high;
	struct xdm_counters *counters;
	struct xdm_thread_counts *next;	/* set before it is published */
	bool in_use;			/* under threads_lock: a live thread owns it */
} __attribute__((aligned(64)));

struct xdm_counters {
	/* Read-mostly: the allocation path reads serial; writers are rare. */
	uint64_t serial;		/* unique in the process, never 0 (the cache's key) */
	pthread_key_t key;
	bool made;			/* key and threads_lock exist */
	pthread_mutex_t threads_lock;	/* joins, exits, the fallback */
	/*
	 * Every record this runtime ever handed out, newest first, each
	 * published with release order and freed only at teardown: readers
	 * walk it without a lock.  A record whose thread exited is handed to
	 * the next thread that joins, so the list is as long as the most
	 * threads that used the runtime at once.
	 */
	struct xdm_thread_counts *_Atomic threads;
	/*
	 * The counts of exited threads.  A fold moves a record's counts
	 * here under threads_lock, inside a sequence count (odd while it
	 * moves): a reader that saw the count change sums again, so it never
	 * sees a thread's counts twice or not at all.
	 */
	_Atomic uint32_t retired_seq;
	_Atomic uint64_t retired_allocs;
	_Atomic uint64_t retired_frees;
	_Atomic uint64_t retired_bytes;

	/* Written with atomic adds, off the allocation path. */
	_Alignas(64) _Atomic uint64_t peak;
	_Atomic uint64_t failures;
	_Atomic uint64_t waits;
	_Atomic uint64_t events;
};

/* Sums of every thread's counts and the retired ones. */
struct xdm_counts_sum {
	uint64_t allocs, frees;
	uint64_t bytes;			/* modulo 2^64: signed at quiescence never < 0 */
};

/* serial: unique in the process and never 0 (xdm_runtime_serial()). */
XDM_HIDDEN enum xdm_status xdm_counters_init(struct xdm_counters *c, uint64_t serial);
/* Frees every record; no thread may exit inside this runtime's destructor
 * meanwhile (xdm_runtime_destroy's contract). */
XDM_HIDDEN void xdm_counters_fini(struct xdm_counters *c);
XDM_HIDDEN void xdm_counters_sum(struct xdm_counters *c, struct xdm_counts_sum *out);
XDM_HIDDEN void xdm_counters_raise_peak(struct xdm_counters *c, uint64_t v);
/* Sum the bytes and raise the peak to the sum; returns the sum (0 if the
 * sum reads negative). */
XDM_HIDDEN uint64_t xdm_counters_sample_peak(struct xdm_counters *c);
/* The peak starts again from the sum; every thread's high too. */
XDM_HIDDEN void xdm_counters_reset_peak(struct xdm_counters *c);
/* The calling thread's first count in this runtime. */
XDM_HIDDEN void xdm_counters_alloc_slow(struct xdm_counters *c, uint64_t bytes);
XDM_HIDDEN void xdm_counters_free_slow(struct xdm_counters *c, uint64_t bytes);

/* An add to a counter that only its owner writes: no lock prefix. */
static inline void xdm_own_add(_Atomic uint64_t *v, uint64_t d)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

static inline void xdm_thread_count_alloc(struct xdm_thread_counts *t, uint64_t bytes)
{
	uint64_t now = atomic_load_explicit(&t->bytes, memory_order_relaxed) + bytes;

	xdm_own_add(&t->allocs, 1);
	atomic_store_explicit(&t->bytes, now, memory_order_relaxed);
	if ((int64_t)now > atomic_load_explicit(&t->high, memory_order_relaxed)) {
		atomic_store_explicit(&t->high, (int64_t)now, memory_order_relaxed);
		xdm_counters_sample_peak(t->counters);
	}
}

static inline void xdm_thread_count_free(struct xdm_thread_counts *t, uint64_t bytes)
{
	xdm_own_add(&t->frees, 1);
	xdm_own_add(&t->bytes, -bytes);
}

/*
 * The record the calling thread last counted in, keyed by its counters'
 * serial (module.h, struct xdm_thread_last, as the modules keep theirs):
 * the allocation path finds its record with a thread-local load and a
 * compare, where pthread_getspecific costs a call and a dozen instructions
 * more.  The key stays the truth (its destructor folds an exiting thread's
 * record).
 */
XDM_HIDDEN extern _Thread_local struct xdm_thread_last xdm_counts_last;

/* The calling thread's record in c, or NULL if it has none yet. */
XDM_HIDDEN struct xdm_thread_counts *xdm_counters_find(struct xdm_counters *c);

static inline struct xdm_thread_counts *xdm_thread_counts_of(struct xdm_counters *c)
{
	struct xdm_thread_counts *t = xdm_thread_last_get(&xdm_counts_last, c->serial);

	return t ? t : xdm_counters_find(c);
}

/* Count a block the calling thread allocated. */
static inline void xdm_count_alloc(struct xdm_counters *c, uint64_t bytes)
{
	struct xdm_thread_counts *t = xdm_thread_counts_of(c);

	if (__builtin_expect(t != NULL, 1))
		xdm_thread_count_alloc(t, bytes);
	else
		xdm_counters_alloc_slow(c, bytes);
}

/* Count a block the calling thread freed, whoever allocated it. */
static inline void xdm_count_free(struct xdm_counters *c, uint64_t bytes)
{
	struct xdm_thread_counts *t = xdm_thread_counts_of(c);

	if (__builtin_expect(t != NULL, 1))
		xdm_thread_count_free(t, bytes);
	else
		xdm_counters_free_slow(c, bytes);
}

#endif /* XDM_CORE_COUNTERS_H */
