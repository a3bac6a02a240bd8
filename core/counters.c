/* SPDX-License-Identifier: MIT */
/*
 * counters.c - the per-thread counts of a runtime: joining and leaving its
 * list of threads, summing it, and sampling the peak (counters.h says why
 * and what each counter promises).
 */
#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

_Thread_local struct xdm_thread_last xdm_counts_last;

/* A reader that sees a fold in progress waits this many times, then yields. */
#define SUM_SPINS_BEFORE_YIELD 64

/* A compare-and-swap only when v is a new peak: never in a steady state. */
static void raise_peak(_Atomic uint64_t *peak, uint64_t v)
{
	uint64_t m = atomic_load_explicit(peak, memory_order_relaxed);

	while (v > m &&
	       !atomic_compare_exchange_weak_explicit(peak, &m, v, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

void xdm_counters_raise_peaks(struct xdm_counters *c, uint64_t bytes, uint64_t blocks)
{
	raise_peak(&c->peak, bytes);
	raise_peak(&c->blocks_peak, blocks);
}

/*
 * Writers of the retired totals and the baseline hold threads_lock; readers
 * take no lock.
 * The sequence count is made odd before a fold's first store and even after
 * its last; the fold's stores are release stores and the reader's loads
 * acquire loads, so a reader that sees any of them sees the count changed
 * (no fences: ThreadSanitizer does not model them).
 */
static void retire_begin(struct xdm_counters *c)
{
	uint32_t seq = atomic_load_explicit(&c->retired_seq, memory_order_relaxed);

	atomic_store_explicit(&c->retired_seq, seq + 1, memory_order_relaxed);
}

static void retire_end(struct xdm_counters *c)
{
	uint32_t seq = atomic_load_explicit(&c->retired_seq, memory_order_relaxed);

	atomic_store_explicit(&c->retired_seq, seq + 1, memory_order_release);
}

static void retire_store(_Atomic uint64_t *v, uint64_t value)
{
	atomic_store_explicit(v, value, memory_order_release);
}

/* Move counts into the retired totals; caller holds threads_lock. */
static void retire_add(struct xdm_counters *c, const struct xdm_counts_sum *d)
{
	retire_store(&c->retired_allocs,
		     atomic_load_explicit(&c->retired_allocs, memory_order_relaxed) + d->allocs);
	retire_store(&c->retired_frees,
		     atomic_load_explicit(&c->retired_frees, memory_order_relaxed) + d->frees);
	retire_store(&c->retired_allocated,
		     atomic_load_explicit(&c->retired_allocated, memory_order_relaxed) +
			     d->allocated);
	retire_store(&c->retired_freed,
		     atomic_load_explicit(&c->retired_freed, memory_order_relaxed) + d->freed);
}

/*
 * The key's destructor: the thread exits, its counts go to the retired
 * totals and its record to the next thread that joins.  A destructor of
 * another key that then allocates or frees here joins again (glibc calls
 * destructors again for a value set meanwhile, a few rounds); a record
 * left in use after the last round keeps its counts in the sum.
 */
static void thread_exit(void *arg)
{
	struct xdm_thread_counts *t = arg;
	struct xdm_counters *c = t->counters;
	/* This thread is the record's owner: nobody else writes the counts. */
	struct xdm_counts_sum d = {
		.allocs = atomic_load_explicit(&t->allocs, memory_order_relaxed),
		.frees = atomic_load_explicit(&t->frees, memory_order_relaxed),
		.allocated = atomic_load_explicit(&t->allocated, memory_order_relaxed),
		.freed = atomic_load_explicit(&t->freed, memory_order_relaxed),
	};

	/* The record goes to the next thread that joins: this one forgets it. */
	xdm_thread_last_forget(&xdm_counts_last, t);
	pthread_mutex_lock(&c->threads_lock);
	retire_begin(c);
	retire_add(c, &d);
	retire_store(&t->allocs, 0);
	retire_store(&t->frees, 0);
	retire_store(&t->allocated, 0);
	retire_store(&t->freed, 0);
	retire_end(c);
	t->in_use = false;
	pthread_mutex_unlock(&c->threads_lock);
}

enum xdm_status xdm_counters_init(struct xdm_counters *c, uint64_t serial)
{
	c->serial = serial;
	if (pthread_mutex_init(&c->threads_lock, NULL) != 0)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cannot create the counters' lock");
	if (pthread_key_create(&c->key, thread_exit) != 0) {
		pthread_mutex_destroy(&c->threads_lock);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "no pthread key left for the runtime's per-thread counters");
	}
	c->made = true;
	return XDM_OK;
}

/*
 * No destructor starts once the key is deleted, so every record still in
 * use belongs to a thread that will never hand it over.  The records are
 * freed under threads_lock, which a destructor holds for all its work: a
 * thread whose exit was still running (a join can return before the
 * thread's destructors ran, as Python's does) has then finished first.  A
 * destructor that starts and has not yet taken the lock when the runtime
 * is freed would still race: destroying a runtime while threads that used
 * it exit is the caller's error (xdm_runtime_destroy).
 */
void xdm_counters_fini(struct xdm_counters *c)
{
	struct xdm_thread_counts *t, *next;

	if (!c->made)
		return;
	pthread_mutex_lock(&c->threads_lock);
	pthread_key_delete(c->key);
	for (t = atomic_load_explicit(&c->threads, memory_order_acquire); t; t = next) {
		next = t->next;
		free(t);
	}
	atomic_store_explicit(&c->threads, NULL, memory_order_relaxed);
	pthread_mutex_unlock(&c->threads_lock);
	pthread_mutex_destroy(&c->threads_lock);
	c->made = false;
}

/*
 * The calling thread's record: one that an exited thread left, else a new
 * one, published at the head of the list.  NULL without memory; the caller
 * then counts in the retired totals under the lock.
 */
static struct xdm_thread_counts *join(struct xdm_counters *c)
{
	struct xdm_thread_counts *t, *head;

	pthread_mutex_lock(&c->threads_lock);
	head = atomic_load_explicit(&c->threads, memory_order_relaxed);
	for (t = head; t && t->in_use; t = t->next)
		;
	if (t)
		t->in_use = true;
	pthread_mutex_unlock(&c->threads_lock);

	if (!t) {
		/* Allocated outside the lock: a reader never waits on malloc. */
		t = aligned_alloc(_Alignof(struct xdm_thread_counts), sizeof(*t));
		if (!t)
			return NULL;
		memset(t, 0, sizeof(*t));
		t->counters = c;
		t->in_use = true;
		pthread_mutex_lock(&c->threads_lock);
		t->next = atomic_load_explicit(&c->threads, memory_order_relaxed);
		atomic_store_explicit(&c->threads, t, memory_order_release);
		pthread_mutex_unlock(&c->threads_lock);
	}
	/* A handed-down record holds no counts (the exit folded them). */
	atomic_store_explicit(&t->high, 0, memory_order_relaxed);
	atomic_store_explicit(&t->blocks_high, 0, memory_order_relaxed);
	if (pthread_setspecific(c->key, t) != 0) {
		pthread_mutex_lock(&c->threads_lock);
		t->in_use = false;
		pthread_mutex_unlock(&c->threads_lock);
		return NULL;
	}
	xdm_thread_last_set(&xdm_counts_last, c->serial, t);
	return t;
}

struct xdm_thread_counts *xdm_counters_find(struct xdm_counters *c)
{
	return xdm_thread_last_keep(&xdm_counts_last, c->serial, pthread_getspecific(c->key));
}

static void count_retired(struct xdm_counters *c, const struct xdm_counts_sum *d)
{
	pthread_mutex_lock(&c->threads_lock);
	retire_begin(c);
	retire_add(c, d);
	retire_end(c);
	pthread_mutex_unlock(&c->threads_lock);
}

void xdm_counters_alloc_slow(struct xdm_counters *c, uint64_t bytes)
{
	struct xdm_thread_counts *t = join(c);

	if (t) {
		xdm_thread_count_alloc(t, bytes);
		return;
	}
	count_retired(c, &(struct xdm_counts_sum){ .allocs = 1, .allocated = bytes });
	xdm_counters_sample_peaks(c);
}

void xdm_counters_free_slow(struct xdm_counters *c, uint64_t bytes)
{
	struct xdm_thread_counts *t = join(c);

	if (t)
		xdm_thread_count_free(t, bytes);
	else
		count_retired(c, &(struct xdm_counts_sum){ .frees = 1, .freed = bytes });
}

static void sum_add(struct xdm_counts_sum *out, _Atomic uint64_t *allocs,
		    _Atomic uint64_t *frees, _Atomic uint64_t *allocated, _Atomic uint64_t *freed)
{
	out->allocs += atomic_load_explicit(allocs, memory_order_acquire);
	out->frees += atomic_load_explicit(frees, memory_order_acquire);
	out->allocated += atomic_load_explicit(allocated, memory_order_acquire);
	out->freed += atomic_load_explicit(freed, memory_order_acquire);
}

/* One pass over the retired totals, the baseline and the records. */
static void sum_once(struct xdm_counters *c, struct xdm_counts_sum *out,
		     struct xdm_counts_sum *base)
{
	*out = (struct xdm_counts_sum){ 0 };
	sum_add(out, &c->retired_allocs, &c->retired_frees, &c->retired_allocated,
		&c->retired_freed);
	for (struct xdm_thread_counts *t = atomic_load_explicit(&c->threads, memory_order_acquire);
	     t; t = t->next)
		sum_add(out, &t->allocs, &t->frees, &t->allocated, &t->freed);
	out->failures = atomic_load_explicit(&c->failures, memory_order_acquire);
	if (!base)
		return;
	*base = (struct xdm_counts_sum){ 0 };
	sum_add(base, &c->base_allocs, &c->base_frees, &c->base_allocated, &c->base_freed);
	base->failures = atomic_load_explicit(&c->base_failures, memory_order_acquire);
}

void xdm_counters_sum(struct xdm_counters *c, struct xdm_counts_sum *out,
		      struct xdm_counts_sum *base)
{
	unsigned int spins = 0;

	for (;;) {
		uint32_t seq = atomic_load_explicit(&c->retired_seq, memory_order_acquire);

		if (seq & 1) {
			/* A fold or a reset is moving counts: a few instructions
			 * under a mutex. */
			if (++spins < SUM_SPINS_BEFORE_YIELD)
				xdm_cpu_relax();
			else
				sched_yield();
			continue;
		}
		sum_once(c, out, base);
		if (atomic_load_explicit(&c->retired_seq, memory_order_relaxed) == seq)
			return;
	}
}

void xdm_counters_reset_peaks(struct xdm_counters *c)
{
	struct xdm_counts_sum s;

	/* Every record, handed out or not: a thread that joins later starts
	 * from 0, which its first allocation passes. */
	pthread_mutex_lock(&c->threads_lock);
	for (struct xdm_thread_counts *t = atomic_load_explicit(&c->threads, memory_order_acquire);
	     t; t = t->next) {
		atomic_store_explicit(&t->high, INT64_MIN, memory_order_relaxed);
		atomic_store_explicit(&t->blocks_high, INT64_MIN, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->threads_lock);
	xdm_counters_sum(c, &s, NULL);
	atomic_store_explicit(&c->peak, xdm_counts_bytes_held(&s), memory_order_relaxed);
	atomic_store_explicit(&c->blocks_peak, xdm_counts_blocks_held(&s), memory_order_relaxed);
}

/*
 * The baseline is one sum, taken under threads_lock so that no fold or
 * other reset moves counts meanwhile, and stored inside the sequence count:
 * a reader subtracts either the old baseline or the new one, whole.  The
 * records are not touched: their owners may be counting right now.  An
 * allocation in flight may land on either side of the sum, so a reset that
 * meets calls in flight is a sample; every call that starts after the reset
 * returns is counted from 0.
 */
void xdm_counters_reset_totals(struct xdm_counters *c)
{
	struct xdm_counts_sum s;

	pthread_mutex_lock(&c->threads_lock);
	sum_once(c, &s, NULL);
	retire_begin(c);
	retire_store(&c->base_allocs, s.allocs);
	retire_store(&c->base_frees, s.frees);
	retire_store(&c->base_allocated, s.allocated);
	retire_store(&c->base_freed, s.freed);
	retire_store(&c->base_failures, s.failures);
	retire_end(c);
	pthread_mutex_unlock(&c->threads_lock);
}

void xdm_counters_sample_peaks(struct xdm_counters *c)
{
	struct xdm_counts_sum s;

	xdm_counters_sum(c, &s, NULL);
	xdm_counters_raise_peaks(c, xdm_counts_bytes_held(&s), xdm_counts_blocks_held(&s));
}
