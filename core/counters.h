/* SPDX-License-Identifier: MIT */
/*
 * counters.h - the runtime's own counters: what xdm_runtime_stats() returns
 * and the files of MOUNT/N/ show (tree_runtime.c).
 *
 * Allocations, frees and their bytes are counted per thread.  Each thread
 * that uses a runtime gets a record of its own, on cache lines of its own,
 * found through a pthread key the runtime owns; only that thread writes it,
 * with a relaxed load and store (no lock prefix), so counting adds no
 * atomic read-modify-write to an allocation or a free.  A thread counts the
 * bytes it allocated and the bytes it freed, each only ever growing (modulo
 * 2^64); what it holds is the difference, which goes negative when it frees
 * blocks that other threads allocated, so only the sum is read as a signed
 * number.  Two totals and no third for the bytes held: an allocation stores
 * its two counts (allocs, allocated) and a free its two (frees, freed), as
 * many stores as when a thread kept allocs, frees and one count of bytes
 * held; keeping bytes held as well would cost every allocation or every free
 * a third store, where the difference costs one load of a line the thread
 * owns.  bytes_outstanding is the difference of the sums, the same value
 * modulo 2^64 as the sum of differences it was before.  Readers sum the
 * records; a thread that exits first folds its record into the runtime's
 * retired totals, so nothing it counted is lost (its blocks still live stay
 * counted).
 *
 * The peaks are sampled: when a thread's bytes or blocks pass the most that
 * thread has held, the runtime sums every thread's records and keeps the
 * highest sums, bytes and blocks alike (a compare-and-swap, made only when a
 * sum is a new peak); every reader's sums are kept the same way.  When one
 * thread makes every allocation and free, a new peak is always a new high of
 * that thread, so the peaks are exact; with several threads they are samples
 * (see xdm_stats in xdm.h).
 *
 * The totals (allocs, frees, bytes_allocated, bytes_freed, failures) count
 * from a baseline: xdm_runtime_reset_totals() stores what they sum to then,
 * and a read subtracts it.  No thread's record is written by anyone but its
 * owner, so a reset costs the allocation path nothing; the outstanding
 * counts and the peaks are differences and samples of the raw sums, which a
 * reset leaves alone.
 *
 * What each counter the core shows says (xdm-fs(7) says the same):
 *  - allocs, frees, bytes_allocated, bytes_freed, blocks_outstanding
 *    (allocs - frees), bytes_outstanding (allocated - freed): exact at
 *    quiescence.  While threads allocate and free, a sum may miss or
 *    half-see their calls in flight; an outstanding count that would be
 *    negative reads 0.
 *  - bytes_peak, blocks_peak: exact when one thread makes every allocation
 *    and free; otherwise samples, documented as such.
 *  - failures, waits_queued, events_recorded: one atomic add per event,
 *    off the allocation path: exact at quiescence.
 *  - A reset of the totals takes its baseline from one sum: calls in flight
 *    then may land on either side of it (a sample), calls made after it
 *    all count.  A read sees the baseline and the sums together, never half
 *    a reset.
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

/*
 * One thread's counts in one runtime; only the owner writes the counts.
 * What an allocation or a free touches comes first, on the first cache line.
 */
struct xdm_thread_counts {
	_Atomic uint64_t allocs;
	_Atomic uint64_t frees;
	_Atomic uint64_t allocated;	/* bytes of its allocations, modulo 2^64 */
	_Atomic uint64_t freed;		/* bytes of the blocks it freed, modulo 2^64 */
	/* The most bytes (allocated - freed) and blocks (allocs - frees) it
	 * held: written by its owner, and by a peak reset (relaxed: a reset
	 * that meets an allocation in flight is a sample). */
	_Atomic int64_t high;
	_Atomic int64_t blocks_high;
	struct xdm_counters *counters;
	struct xdm_thread_counts *next;	/* set before it is published */
	bool in_use;			/* under threads_lock: a live thread owns it */
} __attribute__((aligned(64)));

/* Sums of every thread's counts and the retired ones (or their baseline). */
struct xdm_counts_sum {
	uint64_t allocs, frees;
	uint64_t allocated, freed;	/* bytes, modulo 2^64 */
	uint64_t failures;
};

struct xdm_counters {
	/* Read-mostly: the allocation path reads serial; writers are rare. */
	uint64_t serial;		/* unique in the process, never 0 (the cache's key) */
	pthread_key_t key;
	bool made;			/* key and threads_lock exist */
	pthread_mutex_t threads_lock;	/* joins, exits, the fallback, resets */
	/*
	 * Every record this runtime ever handed out, newest first, each
	 * published with release order and freed only at teardown: readers
	 * walk it without a lock.  A record whose thread exited is handed to
	 * the next thread that joins, so the list is as long as the most
	 * threads that used the runtime at once.
	 */
	struct xdm_thread_counts *_Atomic threads;
	/*
	 * The counts of exited threads, and the totals' baseline.  A fold
	 * moves a record's counts here, and a reset of the totals stores the
	 * baseline, under threads_lock inside a sequence count (odd while
	 * they move): a reader that saw the count change sums again, so it
	 * never sees a thread's counts twice or not at all, nor half a
	 * baseline.
	 */
	_Atomic uint32_t retired_seq;
	_Atomic uint64_t retired_allocs;
	_Atomic uint64_t retired_frees;
	_Atomic uint64_t retired_allocated;
	_Atomic uint64_t retired_freed;
	_Atomic uint64_t base_allocs;
	_Atomic uint64_t base_frees;
	_Atomic uint64_t base_allocated;
	_Atomic uint64_t base_freed;
	_Atomic uint64_t base_failures;

	/* Written with atomic adds, off the allocation path. */
	_Alignas(64) _Atomic uint64_t peak;
	_Atomic uint64_t blocks_peak;
	_Atomic uint64_t failures;
	_Atomic uint64_t waits;
	_Atomic uint64_t events;
};

/* serial: unique in the process and never 0 (xdm_runtime_serial()). */
XDM_HIDDEN enum xdm_status xdm_counters_init(struct xdm_counters *c, uint64_t serial);
/* Frees every record; no thread may exit inside this runtime's destructor
 * meanwhile (xdm_runtime_destroy's contract). */
XDM_HIDDEN void xdm_counters_fini(struct xdm_counters *c);
/*
 * The sums since the runtime was made, and (base, unless NULL) the totals'
 * baseline, read together; out->failures is the runtime's count of them.
 */
XDM_HIDDEN void xdm_counters_sum(struct xdm_counters *c, struct xdm_counts_sum *out,
				 struct xdm_counts_sum *base);
/* Raise the peaks to a total of bytes and blocks the runtime held. */
XDM_HIDDEN void xdm_counters_raise_peaks(struct xdm_counters *c, uint64_t bytes,
					 uint64_t blocks);
/* Sum the records and raise the peaks to the sums. */
XDM_HIDDEN void xdm_counters_sample_peaks(struct xdm_counters *c);
/* The peaks start again from the sums; every thread's highs too. */
XDM_HIDDEN void xdm_counters_reset_peaks(struct xdm_counters *c);
/* The totals start again from 0: the baseline is what they sum to now. */
XDM_HIDDEN void xdm_counters_reset_totals(struct xdm_counters *c);
/* The calling thread's first count in this runtime. */
XDM_HIDDEN void xdm_counters_alloc_slow(struct xdm_counters *c, uint64_t bytes);
XDM_HIDDEN void xdm_counters_free_slow(struct xdm_counters *c, uint64_t bytes);

/* What the sums say is held; either reads 0 where it would be negative. */
static inline uint64_t xdm_counts_bytes_held(const struct xdm_counts_sum *s)
{
	uint64_t held = s->allocated - s->freed;

	return (int64_t)held > 0 ? held : 0;
}

static inline uint64_t xdm_counts_blocks_held(const struct xdm_counts_sum *s)
{
	return s->allocs >= s->frees ? s->allocs - s->frees : 0;
}

/* An add to a counter that only its owner writes: no lock prefix. */
static inline void xdm_own_add(_Atomic uint64_t *v, uint64_t d)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

/* Keep v as the thread's high if it passes it; true if it did. */
static inline bool xdm_own_raise(_Atomic int64_t *high, int64_t v)
{
	if (v <= atomic_load_explicit(high, memory_order_relaxed))
		return false;
	atomic_store_explicit(high, v, memory_order_relaxed);
	return true;
}

static inline void xdm_thread_count_alloc(struct xdm_thread_counts *t, uint64_t bytes)
{
	uint64_t allocs = atomic_load_explicit(&t->allocs, memory_order_relaxed) + 1;
	uint64_t allocated = atomic_load_explicit(&t->allocated, memory_order_relaxed) + bytes;
	/* Only this thread writes frees and freed: its own loads are exact. */
	uint64_t held = allocated - atomic_load_explicit(&t->freed, memory_order_relaxed);
	uint64_t blocks = allocs - atomic_load_explicit(&t->frees, memory_order_relaxed);
	bool raised;

	atomic_store_explicit(&t->allocs, allocs, memory_order_relaxed);
	atomic_store_explicit(&t->allocated, allocated, memory_order_relaxed);
	/* | and not ||: each high is kept, whichever passed. */
	raised = xdm_own_raise(&t->high, (int64_t)held);
	raised |= xdm_own_raise(&t->blocks_high, (int64_t)blocks);
	if (raised)
		xdm_counters_sample_peaks(t->counters);
}

static inline void xdm_thread_count_free(struct xdm_thread_counts *t, uint64_t bytes)
{
	xdm_own_add(&t->frees, 1);
	xdm_own_add(&t->freed, bytes);
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
