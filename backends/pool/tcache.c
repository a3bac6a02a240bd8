/* SPDX-License-Identifier: MIT */
/*
 * tcache.c - each thread's cache of freed blocks, in front of the arenas.
 *
 * A pair that the cache serves takes no lock and makes no atomic
 * read-modify-write: the thread's cache is found through a thread-local
 * cache of its key (pool_tc_mine in pool.h),
 * a free pushes the block's address onto a list of its arena and size, and
 * the next allocation of that size on that stream pops it.  Only the owner
 * thread ever writes its cache; the counters others read are plain
 * (relaxed) stores.
 *
 * The stream-ordered contract is the arena's: a cache list belongs to one
 * arena, that is to one stream, so a block freed on stream S goes back only
 * to allocations on S, and the core has made S wait for every use recorded
 * on other streams before it calls deallocate.
 *
 * What a cache holds stays a used segment of its arena (still in the
 * arena's table of used blocks), so neither a free nor an allocation that
 * the cache serves touches the arena; the pool's counters subtract what the
 * caches hold (attrs.c), so in_use and free_bytes stay exact at quiescence.
 *
 * Bounds: a class list holds at most POOL_TC_CAP blocks, and all the lists
 * of one arena in one thread at most `tcache` bytes; past that bound the
 * older half of every list goes back under one lock hold (arena_halve).
 * Blocks above small_max are kept one each, by exact size, in
 * POOL_TC_LARGE lists per arena; an allocation of a large size they do not
 * hold gives them back in the lock hold that takes its block, so a large
 * block kept for a repeat never keeps its neighbours from merging.  An
 * allocation that finds its class list empty takes, with its block, up to
 * half a list of the blocks the arena's own class cache holds.  Whatever a
 * cache gives back is merged at once.
 *
 * Measured on the H100 (DESIGN-NOTES.md, "Thread caches"): a bound of 2M
 * per stream, which random sizes pass all the time, made the random
 * workload 23 ns slower per operation than no cache, since what a cache
 * gives back is then cut again; at 16M it is even.
 *
 * A cache goes back to its arenas when its thread exits (the key's
 * destructor), before its thread makes the arena grow, and whenever the
 * pool is trimmed (a trim bumps the pool's epoch; each thread flushes its
 * cache at its next allocation or free, and the trimming thread at once).
 * A thread that stays idle keeps its cache until then: at most `tcache`
 * bytes per arena it used.  fini frees every cache under tc_lock, which a
 * thread's exit holds for its whole drain (cache_exit); lock order: tc_lock,
 * then an arena's lock.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pool.h"

static inline uint64_t load(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/* ---- giving back to the arena -------------------------------------------- */

/*
 * Under the arena's lock: return n cached blocks to it, merged with their
 * free neighbours at once.  The thread caches are the pool's cache of
 * small blocks now; left unmerged in the arena's class lists as well, they
 * would split its free memory into pieces no large request fits.
 */
static void give_locked(struct pool *p, struct pool_arena *a, const uint64_t *ptr, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		struct pool_seg *s = pool_arena_unhash(a, ptr[k]);

		if (s)
			pool_arena_give(p, a, s, true);
	}
}

/* Give n blocks from the bottom of the list back; the rest moves down. */
static void bin_drain(struct pool *p, struct pool_tc_arena *ta, struct pool_arena *a,
		      struct pool_tc_bin *bin, uint32_t n)
{
	if (!n)
		return;
	pthread_spin_lock(&a->lock);
	give_locked(p, a, bin->ptr, n);
	pthread_spin_unlock(&a->lock);
	memmove(bin->ptr, bin->ptr + n, (bin->n - n) * sizeof(bin->ptr[0]));
	bin->n -= n;
	pool_sub(&ta->bytes, n * bin->size);
}

/* Every list of one arena, back under one lock hold. */
static void arena_drain(struct pool *p, struct pool_tc_arena *ta, unsigned int i)
{
	struct pool_arena *a = pool_arena_at(p, i);
	struct pool_tc_bin *bin;

	if (!a || !load(&ta->bytes))
		return;
	pthread_spin_lock(&a->lock);
	for (bin = ta->bins; bin < ta->bins + ta->nbins; bin++) {
		give_locked(p, a, bin->ptr, bin->n);
		bin->n = 0;
	}
	pthread_spin_unlock(&a->lock);
	atomic_store_explicit(&ta->bytes, 0, memory_order_relaxed);
}

/*
 * Over its bound: the older half of every list goes back, under one lock
 * hold.  Halving keeps every list warm and leaves room for a run of frees
 * before the next lock; emptying them all made the next allocations of
 * every class miss.
 */
static void arena_halve(struct pool *p, struct pool_tc_arena *ta, struct pool_arena *a)
{
	uint64_t gone = 0;

	pthread_spin_lock(&a->lock);
	for (struct pool_tc_bin *bin = ta->bins; bin < ta->bins + ta->nbins; bin++) {
		uint32_t n = (bin->n + 1) / 2;

		if (!n)
			continue;
		give_locked(p, a, bin->ptr, n);
		memmove(bin->ptr, bin->ptr + n, (bin->n - n) * sizeof(bin->ptr[0]));
		bin->n -= n;
		gone += n * bin->size;
	}
	pthread_spin_unlock(&a->lock);
	pool_sub(&ta->bytes, gone);
}

static void cache_drain(struct pool *p, struct pool_tcache *tc)
{
	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_tc_arena *ta = pool_tc_arena_of(tc, i);

		if (ta)
			arena_drain(p, ta, i);
	}
}

/* ---- a thread's cache: made on first use, gone at exit -------------------- */

static void cache_free(struct pool_tcache *tc)
{
	for (unsigned int i = 0; i < POOL_ARENAS; i++)
		free(pool_tc_arena_of(tc, i));
	free(tc);
}

/*
 * The key's destructor: the thread exits, its blocks go back.  All of it
 * under tc_lock, which fini takes too: a thread whose exit is still
 * running when its runtime is torn down (a join that returns before the
 * thread's destructors ran, as Python's does) is then either done before
 * fini frees the caches, or finds its key deleted and is never called.
 */
static void cache_exit(void *arg)
{
	struct pool_tcache *tc = arg;
	struct pool *p = tc->pool;

	xdm_thread_last_forget(&pool_tc_last, tc);
	pthread_mutex_lock(&p->tc_lock);
	cache_drain(p, tc);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		p->tcaches = tc->next;
	if (tc->next)
		tc->next->prev = tc->prev;
	pthread_mutex_unlock(&p->tc_lock);
	cache_free(tc);
}

static struct pool_tcache *cache_new(struct pool *p)
{
	struct pool_tcache *tc = calloc(1, sizeof(*tc));

	if (!tc)
		return NULL;
	tc->pool = p;
	tc->epoch = atomic_load_explicit(&p->tc_epoch, memory_order_relaxed);
	if (pthread_setspecific(p->tc_key, tc)) {
		free(tc);
		return NULL;
	}
	pthread_mutex_lock(&p->tc_lock);
	tc->next = p->tcaches;
	if (tc->next)
		tc->next->prev = tc;
	p->tcaches = tc;
	pthread_mutex_unlock(&p->tc_lock);
	xdm_thread_last_set(&pool_tc_last, p->serial, tc);
	return tc;
}

_Thread_local struct xdm_thread_last pool_tc_last;

struct pool_tcache *pool_tc_find(struct pool *p)
{
	return xdm_thread_last_keep(&pool_tc_last, p->serial, pthread_getspecific(p->tc_key));
}

static struct pool_tc_arena *arena_new(struct pool *p, struct pool_tcache *tc, unsigned int i)
{
	unsigned int nbins = POOL_TC_LARGE + p->nclasses;
	struct pool_tc_arena *ta;

	ta = calloc(1, sizeof(*ta) + nbins * sizeof(ta->bins[0]));
	if (!ta)
		return NULL;
	ta->nbins = nbins;
	/* Class lists hold up to the cap, and never more than tcache bytes. */
	for (unsigned int c = 0; c < p->nclasses; c++) {
		struct pool_tc_bin *bin = &ta->bins[POOL_TC_LARGE + c];
		uint64_t fit = p->params.tcache / p->class_size[c];

		bin->size = p->class_size[c];
		bin->cap = (uint32_t)(fit < POOL_TC_CAP ? fit : POOL_TC_CAP);
	}
	/* Published whole: the counters read it from other threads. */
	atomic_store_explicit(&tc->arena[i], ta, memory_order_release);
	return ta;
}

/*
 * This thread's cache for arena i, made if need be; NULL when host memory
 * ran out (the caller then goes to the arena).  A trim since the thread's
 * last call first sends the whole cache back.
 */
static struct pool_tc_arena *cache_of(struct pool *p, unsigned int i)
{
	struct pool_tcache *tc = pool_tc_mine(p);
	uint64_t epoch = atomic_load_explicit(&p->tc_epoch, memory_order_relaxed);
	struct pool_tc_arena *ta;

	if (__builtin_expect(!tc, 0) && !(tc = cache_new(p)))
		return NULL;
	if (__builtin_expect(tc->epoch != epoch, 0)) {
		cache_drain(p, tc);
		tc->epoch = epoch;
	}
	ta = pool_tc_arena_of(tc, i);
	return __builtin_expect(ta != NULL, 1) ? ta : arena_new(p, tc, i);
}

/* ---- lists ------------------------------------------------------------------ */

static struct pool_tc_bin *class_bin(struct pool *p, struct pool_tc_arena *ta, uint64_t size)
{
	return &ta->bins[POOL_TC_LARGE + pool_class(p, size)];
}

/* The list of a large size; NULL if none holds it. */
static struct pool_tc_bin *large_find(struct pool_tc_arena *ta, uint64_t size)
{
	for (unsigned int k = 0; k < POOL_TC_LARGE; k++)
		if (ta->bins[k].size == size)
			return &ta->bins[k];
	return NULL;
}

/* A list for a large size: its own, an empty one, or the least recently used, emptied. */
static struct pool_tc_bin *large_claim(struct pool *p, struct pool_tc_arena *ta,
				       struct pool_arena *a, uint64_t size)
{
	struct pool_tc_bin *bin = large_find(ta, size), *lru = &ta->bins[0];

	if (bin)
		return bin;
	for (unsigned int k = 0; k < POOL_TC_LARGE; k++) {
		if (!ta->bins[k].n) {
			lru = &ta->bins[k];
			break;
		}
		if (ta->bins[k].used < lru->used)
			lru = &ta->bins[k];
	}
	bin_drain(p, ta, a, lru, lru->n);
	lru->size = size;
	lru->cap = 1;
	return lru;
}

/*
 * A block of the list's class from the arena, and up to half a list more of
 * those the arena's own class cache holds, under one lock hold.  Only ready
 * blocks are fetched ahead: cutting more out of free memory for a thread
 * that may never ask for them would scatter the arena.
 */
static uint64_t refill(struct pool *p, struct pool_tc_arena *ta, struct pool_arena *a,
		       struct pool_tc_bin *bin)
{
	uint64_t room = p->params.tcache - load(&ta->bytes);
	unsigned int c = pool_class(p, bin->size);
	uint32_t want = bin->cap / 2, got = 0;
	struct pool_seg *s;
	bool no_memory;

	if (room / bin->size < want)
		want = (uint32_t)(room / bin->size);
	pthread_spin_lock(&a->lock);
	s = pool_arena_take(p, a, bin->size, &no_memory);
	while (s && got < want && a->cache[c]) {
		struct pool_seg *t = pool_arena_take(p, a, bin->size, &no_memory);

		if (!t)
			break;
		bin->ptr[bin->n++] = t->ptr;
		got++;
	}
	pthread_spin_unlock(&a->lock);
	pool_add(&ta->bytes, got * bin->size);
	return s ? s->ptr : 0;
}

/*
 * A large size no list holds: the large lists go back, merged, in the
 * lock hold that takes the block, so a large block kept for a repeat that
 * did not come never keeps its neighbours from merging into what a large
 * request needs, and costs no lock of its own.
 */
static uint64_t large_take(struct pool *p, struct pool_tc_arena *ta, struct pool_arena *a,
			   uint64_t size)
{
	struct pool_seg *s;
	bool no_memory;
	uint64_t kept = 0;

	for (unsigned int k = 0; k < POOL_TC_LARGE; k++)
		kept += ta->bins[k].n;
	if (!kept)
		return 0;
	pthread_spin_lock(&a->lock);
	for (unsigned int k = 0; k < POOL_TC_LARGE; k++) {
		struct pool_tc_bin *bin = &ta->bins[k];

		give_locked(p, a, bin->ptr, bin->n);
		pool_sub(&ta->bytes, bin->n * bin->size);
		bin->n = 0;
	}
	s = pool_arena_take(p, a, size, &no_memory);
	pthread_spin_unlock(&a->lock);
	return s ? s->ptr : 0;
}

/* ---- the two calls -------------------------------------------------------- */

uint64_t pool_tc_get(struct pool *p, unsigned int i, uint64_t size)
{
	struct pool_arena *a = pool_arena_at(p, i);
	struct pool_tc_arena *ta;
	struct pool_tc_bin *bin;

	/* A cache exists only for an arena that does: the caller makes it. */
	if (!a || !(ta = cache_of(p, i)))
		return 0;
	if (size > p->params.small_max) {
		/* Large sizes are not fetched ahead: the next request may be any size. */
		bin = large_find(ta, size);
		if (!bin || !bin->n)
			return large_take(p, ta, a, size);
	} else {
		bin = class_bin(p, ta, size);
		if (!bin->n)
			return bin->cap ? refill(p, ta, a, bin) : 0;
	}
	pool_sub(&ta->bytes, size);
	bin->used = ++ta->clock;
	return bin->ptr[--bin->n];
}

bool pool_tc_put(struct pool *p, unsigned int i, uint64_t ptr, uint64_t size)
{
	struct pool_arena *a = pool_arena_at(p, i);
	struct pool_tc_arena *ta;
	struct pool_tc_bin *bin;

	if (!a || !(ta = cache_of(p, i)))
		return false;
	bin = size <= p->params.small_max ? class_bin(p, ta, size) : large_claim(p, ta, a, size);
	if (!bin->cap)
		return false;
	if (bin->n == bin->cap)
		bin_drain(p, ta, a, bin, (bin->n + 1) / 2);
	while (load(&ta->bytes) && load(&ta->bytes) + size > p->params.tcache)
		arena_halve(p, ta, a);
	bin->ptr[bin->n++] = ptr;
	bin->used = ++ta->clock;
	pool_add(&ta->bytes, size);
	return true;
}

void pool_tc_flush_arena(struct pool *p, unsigned int i)
{
	struct pool_tcache *tc;
	struct pool_tc_arena *ta;

	if (!p->params.tcache)
		return;
	tc = pool_tc_mine(p);
	if (tc && (ta = pool_tc_arena_of(tc, i)))
		arena_drain(p, ta, i);
}

void pool_tc_flush_all(struct pool *p)
{
	struct pool_tcache *tc;

	uint64_t epoch;

	if (!p->params.tcache)
		return;
	tc = pool_tc_mine(p);
	epoch = atomic_fetch_add_explicit(&p->tc_epoch, 1, memory_order_relaxed) + 1;
	if (tc) {
		cache_drain(p, tc);
		tc->epoch = epoch;
	}
}

/* ---- what the caches hold, for the counters ----------------------------------- */

uint64_t pool_tc_bytes(struct pool *p, int arena)
{
	unsigned int first = arena < 0 ? 0 : (unsigned int)arena;
	unsigned int end = arena < 0 ? POOL_ARENAS : first + 1;
	uint64_t sum = 0;

	if (!p->params.tcache)
		return 0;
	pthread_mutex_lock(&p->tc_lock);
	for (struct pool_tcache *tc = p->tcaches; tc; tc = tc->next) {
		for (unsigned int i = first; i < end; i++) {
			struct pool_tc_arena *ta = pool_tc_arena_of(tc, i);

			if (ta)
				sum += load(&ta->bytes);
		}
	}
	pthread_mutex_unlock(&p->tc_lock);
	return sum;
}

/* ---- the pool's life ---------------------------------------------------------- */

enum xdm_status pool_tc_init(struct pool *p)
{
	if (!p->params.tcache)
		return XDM_OK;
	if (pthread_mutex_init(&p->tc_lock, NULL))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: cannot make its cache lock");
	if (pthread_key_create(&p->tc_key, cache_exit)) {
		pthread_mutex_destroy(&p->tc_lock);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no thread key for its caches");
	}
	return XDM_OK;
}

/*
 * The chunks go back whole after this (pool_release_all), so what the
 * caches hold needs no drain: only their memory is freed.  Deleting the
 * key first means no destructor runs for them afterwards.
 */
void pool_tc_fini(struct pool *p)
{
	struct pool_tcache *tc, *next;

	if (!p->params.tcache)
		return;
	pthread_mutex_lock(&p->tc_lock);
	pthread_key_delete(p->tc_key);
	for (tc = p->tcaches; tc; tc = next) {
		next = tc->next;
		cache_free(tc);
	}
	p->tcaches = NULL;
	pthread_mutex_unlock(&p->tc_lock);
	pthread_mutex_destroy(&p->tc_lock);
	p->params.tcache = 0;
}
