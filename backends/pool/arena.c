/* SPDX-License-Identifier: MIT */
/*
 * arena.c - one stream's free memory: bins, size-class caches, and the
 * table that finds a used block's segment by its address.
 *
 * Everything here runs under the arena's lock, which only threads
 * allocating or freeing on that stream take on the hot path.
 *
 * Large requests get a best fit: the request's own bin is searched for the
 * smallest segment that holds it (a bounded look), and failing that the
 * first segment of the least non-empty bin above, whose every segment
 * holds it.  The remainder of a split stays free in its bin.  A freed large
 * block merges at once with free neighbours of its chunk.  Small blocks are
 * rounded to their class and cached on a per-class list when freed, unmerged;
 * the caches are merged back (flushed) before the pool grows or trims, so
 * the speed of the cache never costs the pool a new chunk.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pool.h"

/* How many segments of the request's own bin a best-fit search looks at. */
#define BEST_FIT_LOOK 16
#define HASH_INITIAL 256

/* ---- descriptors ------------------------------------------------------- */

struct pool_seg *pool_seg_new(struct pool_arena *a)
{
	struct pool_seg *s = a->spare;

	if (s) {
		a->spare = s->link_next;
		return s;
	}
	return malloc(sizeof(*s));
}

void pool_seg_put(struct pool_arena *a, struct pool_seg *s)
{
	s->link_next = a->spare;
	a->spare = s;
}

/* ---- bins ---------------------------------------------------------------- */

static inline unsigned int log2_u64(uint64_t v)
{
	return 63u - (unsigned int)__builtin_clzll(v);
}

/* The bin of a size: its power of two, then its eighth within it. */
static void bin_of(uint64_t size, unsigned int *fl, unsigned int *sl)
{
	uint64_t u = size >> POOL_GRAIN_SHIFT;
	unsigned int b;

	if (u < POOL_SL) {
		*fl = 0;
		*sl = (unsigned int)u;
		return;
	}
	b = log2_u64(u);
	*fl = b - POOL_SL_SHIFT + 1;
	*sl = (unsigned int)(u >> (b - POOL_SL_SHIFT)) - POOL_SL;
}

/* A segment that is all of its chunk. */
static inline bool seg_whole(const struct pool_seg *s)
{
	return !s->prev && !s->next;
}

void pool_bin_insert(struct pool_arena *a, struct pool_seg *s)
{
	unsigned int fl, sl;
	struct pool_seg **head;

	bin_of(s->size, &fl, &sl);
	head = &a->bins[fl][sl];
	s->state = SEG_FREE;
	s->fl = (uint8_t)fl;
	s->sl = (uint8_t)sl;
	s->link_prev = NULL;
	s->link_next = *head;
	if (*head)
		(*head)->link_prev = s;
	*head = s;
	a->fl_map |= 1ull << fl;
	a->sl_map[fl] |= 1u << sl;
	if (seg_whole(s))
		pool_add(&a->idle_chunks, 1);
}

void pool_bin_remove(struct pool_arena *a, struct pool_seg *s)
{
	unsigned int fl = s->fl, sl = s->sl;

	if (s->link_prev)
		s->link_prev->link_next = s->link_next;
	else
		a->bins[fl][sl] = s->link_next;
	if (s->link_next)
		s->link_next->link_prev = s->link_prev;
	if (!a->bins[fl][sl]) {
		a->sl_map[fl] &= ~(1u << sl);
		if (!a->sl_map[fl])
			a->fl_map &= ~(1ull << fl);
	}
	if (seg_whole(s))
		pool_sub(&a->idle_chunks, 1);
}

/* The smallest segment of a whole bin that holds size, or NULL. */
static struct pool_seg *bin_scan(struct pool_seg *s, uint64_t size)
{
	struct pool_seg *best = NULL;

	for (; s; s = s->link_next)
		if (s->size >= size && (!best || s->size < best->size))
			best = s;
	return best;
}

/*
 * The best free segment for size, still in its bin; NULL if none fits.
 * The request's own bin is looked at briefly first, then the least
 * non-empty bin above (all of whose segments fit), and only when there is
 * none the whole of the own bin: a fit is never missed.
 */
static struct pool_seg *bin_find(struct pool_arena *a, uint64_t size)
{
	struct pool_seg *s, *best = NULL;
	unsigned int fl, sl, look = 0;
	uint64_t map;

	bin_of(size, &fl, &sl);
	for (s = a->bins[fl][sl]; s && look < BEST_FIT_LOOK; s = s->link_next, look++) {
		if (s->size >= size && (!best || s->size < best->size)) {
			best = s;
			if (s->size == size)
				break;
		}
	}
	if (best)
		return best;
	/* Every segment of a higher bin is large enough: take the least. */
	map = sl + 1 < POOL_SL ? a->sl_map[fl] & (~0u << (sl + 1)) : 0;
	if (!map) {
		uint64_t fmap = fl + 1 < POOL_FL ? a->fl_map & (~0ull << (fl + 1)) : 0;

		if (!fmap)
			return bin_scan(a->bins[fl][sl], size);
		fl = (unsigned int)__builtin_ctzll(fmap);
		map = a->sl_map[fl];
	}
	return a->bins[fl][__builtin_ctz((unsigned int)map)];
}

bool pool_arena_fits(struct pool *p, struct pool_arena *a, uint64_t size)
{
	if (size <= p->params.small_max && a->cache[pool_class(p, size)])
		return true;
	return bin_find(a, size) != NULL;
}

uint64_t pool_arena_largest(const struct pool_arena *a)
{
	uint64_t best = 0;
	unsigned int fl, sl;

	if (!a->fl_map)
		return 0;
	fl = log2_u64(a->fl_map);
	sl = log2_u64(a->sl_map[fl]);
	for (const struct pool_seg *s = a->bins[fl][sl]; s; s = s->link_next)
		if (s->size > best)
			best = s->size;
	return best;
}

/* ---- the table of used segments ------------------------------------------ */

static inline uint64_t hash_slot(const struct pool_arena *a, uint64_t ptr)
{
	return ((ptr >> POOL_GRAIN_SHIFT) * 0x9e3779b97f4a7c15ull >> 32) & a->hash_mask;
}

/* Double the table; when there is no memory the chains just get longer. */
static void hash_grow(struct pool_arena *a)
{
	uint64_t n = a->hash ? (a->hash_mask + 1) * 2 : HASH_INITIAL;
	struct pool_seg **t = calloc(n, sizeof(*t));
	struct pool_seg **old = a->hash;
	uint64_t old_n = old ? a->hash_mask + 1 : 0;

	if (!t)
		return;
	a->hash = t;
	a->hash_mask = n - 1;
	for (uint64_t i = 0; i < old_n; i++) {
		struct pool_seg *s = old[i], *next;

		for (; s; s = next) {
			uint64_t h = hash_slot(a, s->ptr);

			next = s->hash_next;
			s->hash_next = t[h];
			t[h] = s;
		}
	}
	free(old);
}

static bool hash_insert(struct pool_arena *a, struct pool_seg *s)
{
	uint64_t h;

	if (!a->hash || a->hash_count > a->hash_mask)
		hash_grow(a);
	if (!a->hash)
		return false;
	h = hash_slot(a, s->ptr);
	s->hash_next = a->hash[h];
	a->hash[h] = s;
	a->hash_count++;
	return true;
}

struct pool_seg *pool_arena_lookup(struct pool_arena *a, uint64_t ptr)
{
	struct pool_seg *s;

	if (!a->hash)
		return NULL;
	for (s = a->hash[hash_slot(a, ptr)]; s; s = s->hash_next)
		if (s->ptr == ptr)
			return s;
	return NULL;
}

struct pool_seg *pool_arena_unhash(struct pool_arena *a, uint64_t ptr)
{
	struct pool_seg **pp, *s;

	if (!a->hash)
		return NULL;
	for (pp = &a->hash[hash_slot(a, ptr)]; (s = *pp); pp = &s->hash_next) {
		if (s->ptr == ptr) {
			*pp = s->hash_next;
			a->hash_count--;
			return s;
		}
	}
	return NULL;
}

/* ---- taking and giving ------------------------------------------------------ */

/*
 * Cut size bytes from the low end of the free segment s (out of its bin) and
 * return it; the rest stays free in its bin.  NULL: no descriptor for the rest.
 */
static struct pool_seg *split(struct pool_arena *a, struct pool_seg *s, uint64_t size)
{
	struct pool_seg *r;

	if (s->size - size < POOL_GRAIN)
		return s;
	r = pool_seg_new(a);
	if (!r)
		return NULL;
	r->ptr = s->ptr + size;
	r->size = s->size - size;
	r->chunk = s->chunk;
	r->prev = s;
	r->next = s->next;
	if (s->next)
		s->next->prev = r;
	s->next = r;
	s->size = size;
	pool_bin_insert(a, r);
	pool_add(&a->free_blocks, 1);
	return s;
}

/* Merge s with free neighbours of its chunk and put the result in its bin. */
static struct pool_seg *merge_and_bin(struct pool_arena *a, struct pool_seg *s)
{
	struct pool_seg *n = s->next, *p = s->prev;

	if (n && n->state == SEG_FREE) {
		pool_bin_remove(a, n);
		s->size += n->size;
		s->next = n->next;
		if (n->next)
			n->next->prev = s;
		pool_seg_put(a, n);
		pool_sub(&a->free_blocks, 1);
	}
	if (p && p->state == SEG_FREE) {
		pool_bin_remove(a, p);
		p->size += s->size;
		p->next = s->next;
		if (s->next)
			s->next->prev = p;
		pool_seg_put(a, s);
		pool_sub(&a->free_blocks, 1);
		s = p;
	}
	pool_bin_insert(a, s);
	return s;
}

/* A free segment, in the used table already, becomes used. */
static struct pool_seg *mark_used(struct pool_arena *a, struct pool_seg *s)
{
	s->state = SEG_USED;
	pool_sub(&a->free_bytes, s->size);
	pool_free_low_clamp(a);
	pool_sub(&a->free_blocks, 1);
	pool_add(&a->in_use, s->size);
	return s;
}

struct pool_seg *pool_arena_take(struct pool *p, struct pool_arena *a, uint64_t size,
				 bool *no_memory)
{
	struct pool_seg *s = NULL, *t;
	unsigned int c = 0;
	bool small = size <= p->params.small_max;

	*no_memory = false;
	if (small) {
		c = pool_class(p, size);
		s = a->cache[c];
		if (s) {
			a->cache[c] = s->link_next;
			a->cache_count[c]--;
			pool_sub(&a->cached_bytes, s->size);
			goto found;
		}
	}
	s = bin_find(a, size);
	if (!s)
		return NULL;
	pool_bin_remove(a, s);
	if (!(s = split(a, t = s, size))) {
		pool_bin_insert(a, t);
		*no_memory = true;
		return NULL;
	}
found:
	if (!hash_insert(a, s)) {
		/* Only with no host memory at all: leave it free. */
		if (small && s->state == SEG_CACHED) {
			s->link_next = a->cache[c];
			a->cache[c] = s;
			a->cache_count[c]++;
			pool_add(&a->cached_bytes, s->size);
		} else {
			merge_and_bin(a, s);
		}
		*no_memory = true;
		return NULL;
	}
	return mark_used(a, s);
}

/* The segment of a's chunks that holds the address ptr, or NULL. */
static struct pool_seg *seg_holding(struct pool_arena *a, uint64_t ptr)
{
	for (struct pool_chunk *c = a->chunks; c; c = c->next) {
		if (ptr < c->up.ptr || ptr >= c->up.ptr + c->size)
			continue;
		for (struct pool_seg *s = c->first; s; s = s->next)
			if (ptr < s->ptr + s->size)
				return s;
	}
	return NULL;
}

/*
 * Cut [ptr, ptr + size) out of the free segment s (out of its bin): the
 * pieces before and after stay free in their bins.  NULL with *no_memory
 * when a descriptor could not be had; s is then back in its bin.
 */
static struct pool_seg *split_at(struct pool_arena *a, struct pool_seg *s, uint64_t ptr,
				 uint64_t size, bool *no_memory)
{
	struct pool_seg *t;

	if (s->ptr < ptr) {
		if (!split(a, s, ptr - s->ptr))
			goto no_descriptor;
		/* split left the front out of its bin and the rest in one. */
		t = s->next;
		pool_bin_insert(a, s);
		pool_bin_remove(a, t);
		s = t;
	}
	if (!split(a, s, size))
		goto no_descriptor;
	return s;

no_descriptor:
	merge_and_bin(a, s);
	*no_memory = true;
	return NULL;
}

struct pool_seg *pool_arena_take_at(struct pool_arena *a, uint64_t ptr, uint64_t size,
				    bool *no_memory)
{
	struct pool_seg *s;

	*no_memory = false;
	/* Cached blocks are free but unmerged: merge them so the range shows. */
	pool_arena_flush(a);
	s = seg_holding(a, ptr);
	if (!s || s->state != SEG_FREE || s->ptr + s->size < ptr + size)
		return NULL;
	pool_bin_remove(a, s);
	s = split_at(a, s, ptr, size, no_memory);
	if (!s)
		return NULL;
	if (!hash_insert(a, s)) {
		merge_and_bin(a, s);
		*no_memory = true;
		return NULL;
	}
	return mark_used(a, s);
}

struct pool_seg *pool_arena_give(struct pool *p, struct pool_arena *a, struct pool_seg *s,
				 bool merge)
{
	pool_sub(&a->in_use, s->size);
	pool_add(&a->free_bytes, s->size);
	pool_add(&a->free_blocks, 1);
	if (!merge && s->size <= p->params.small_max) {
		unsigned int c = pool_class(p, s->size);

		s->state = SEG_CACHED;
		s->cls = (uint8_t)c;
		s->link_next = a->cache[c];
		a->cache[c] = s;
		a->cache_count[c]++;
		pool_add(&a->cached_bytes, s->size);
		return NULL;
	}
	return merge_and_bin(a, s);
}

void pool_arena_flush(struct pool_arena *a)
{
	for (unsigned int c = 0; c < POOL_MAX_CLASSES; c++) {
		struct pool_seg *s = a->cache[c], *next;

		a->cache[c] = NULL;
		a->cache_count[c] = 0;
		for (; s; s = next) {
			next = s->link_next;
			pool_sub(&a->cached_bytes, s->size);
			merge_and_bin(a, s);
		}
	}
}

/* ---- chunks ------------------------------------------------------------------ */

bool pool_arena_adopt(struct pool_arena *a, struct pool_chunk *c)
{
	struct pool_seg *s = pool_seg_new(a);

	if (!s)
		return false;
	memset(s, 0, sizeof(*s));
	s->ptr = c->up.ptr;
	s->size = c->size;
	s->chunk = c;
	c->first = s;
	pool_chunk_link(a, c);
	pool_bin_insert(a, s);
	pool_add(&a->free_bytes, c->size);
	pool_add(&a->free_blocks, 1);
	pool_add(&a->owned, c->size);
	return true;
}

void pool_chunk_link(struct pool_arena *a, struct pool_chunk *c)
{
	c->owner = a->stream;
	c->prev = NULL;
	c->next = a->chunks;
	if (a->chunks)
		a->chunks->prev = c;
	a->chunks = c;
	pool_add(&a->nchunks, 1);
}

struct pool_chunk *pool_arena_release_idle(struct pool_arena *a, uint64_t size)
{
	struct pool_chunk *c, *best = NULL;

	if (!atomic_load_explicit(&a->idle_chunks, memory_order_relaxed))
		return NULL;
	for (c = a->chunks; c; c = c->next) {
		struct pool_seg *s = c->first;

		if (s->state != SEG_FREE || !seg_whole(s) || c->size < size)
			continue;
		if (!best || c->size < best->size)
			best = c;
	}
	if (!best)
		return NULL;
	pool_bin_remove(a, best->first);
	pool_seg_put(a, best->first);
	best->first = NULL;
	pool_chunk_unlink(a, best);
	pool_sub(&a->free_bytes, best->size);
	pool_free_low_clamp(a);
	pool_sub(&a->free_blocks, 1);
	pool_sub(&a->owned, best->size);
	return best;
}

void pool_chunk_unlink(struct pool_arena *a, struct pool_chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		a->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pool_sub(&a->nchunks, 1);
}

/* ---- the arena itself ---------------------------------------------------------- */

struct pool_arena *pool_arena_new(xdm_stream_id stream)
{
	struct pool_arena *a = aligned_alloc(alignof(struct pool_arena), sizeof(*a));

	if (!a)
		return NULL;
	memset(a, 0, sizeof(*a));
	if (pthread_spin_init(&a->lock, PTHREAD_PROCESS_PRIVATE)) {
		free(a);
		return NULL;
	}
	a->stream = stream;
	return a;
}

/* Every chunk has left the arena (pool_release_all) before this. */
void pool_arena_free(struct pool_arena *a)
{
	struct pool_seg *s, *next;

	if (!a)
		return;
	for (s = a->spare; s; s = next) {
		next = s->link_next;
		free(s);
	}
	free(a->hash);
	pthread_spin_destroy(&a->lock);
	free(a);
}
