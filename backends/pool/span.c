/* SPDX-License-Identifier: MIT */
/*
 * span.c - chunks over an upstream with a granularity: joining neighbours,
 * and cutting whole free granules out to give them back.
 *
 * Such an upstream maps memory a granule at a time into one reserved
 * address range, and takes back any run of whole granules it mapped (see
 * xdm_ops.granularity).  So the pool may treat every run of granules it
 * holds as one chunk, whatever calls it came from: a chunk that grows in
 * place, or lands next to another of the arena's chunks, is joined to it,
 * and a large request is then served from the free end of one and the new
 * granules together.  The other way, a free segment that covers whole
 * granules gives them back, and its chunk splits where the hole is.
 *
 * Everything here runs under the arena's lock and touches only its
 * chunks.  The free segments at a seam are taken out of their bins before
 * their links change and put back after, so that the bins' idea of which
 * segments are a whole chunk (idle_chunks) stays right.
 */
#include "config.h"

#include <stdlib.h>

#include "pool.h"

static struct pool_seg *last_seg(const struct pool_chunk *c)
{
	struct pool_seg *s = c->first;

	while (s->next)
		s = s->next;
	return s;
}

/* Append r's segments to l (r starts where l ends), and free r. */
static void join(struct pool *p, struct pool_arena *a, struct pool_chunk *l, struct pool_chunk *r)
{
	struct pool_seg *lt = last_seg(l), *rf = r->first;
	bool lfree = lt->state == SEG_FREE, rfree = rf->state == SEG_FREE;

	if (lfree)
		pool_bin_remove(a, lt);
	if (rfree)
		pool_bin_remove(a, rf);
	for (struct pool_seg *s = rf; s; s = s->next)
		s->chunk = l;
	lt->next = rf;
	rf->prev = lt;
	l->size += r->size;
	l->up.bytes = l->size;
	if (lfree && rfree) {
		lt->size += rf->size;
		lt->next = rf->next;
		if (rf->next)
			rf->next->prev = lt;
		pool_seg_put(a, rf);
		pool_sub(&a->free_blocks, 1);
		pool_bin_insert(a, lt);
	} else {
		if (lfree)
			pool_bin_insert(a, lt);
		if (rfree)
			pool_bin_insert(a, rf);
	}
	pool_chunk_unlink(a, r);
	free(r);
	atomic_fetch_add_explicit(&p->joins, 1, memory_order_relaxed);
}

void pool_span_join(struct pool *p, struct pool_arena *a, struct pool_chunk *c)
{
	struct pool_chunk *l = NULL, *r = NULL;

	for (struct pool_chunk *o = a->chunks; o; o = o->next) {
		if (o == c)
			continue;
		if (o->up.ptr + o->size == c->up.ptr)
			l = o;
		else if (c->up.ptr + c->size == o->up.ptr)
			r = o;
	}
	if (r)
		join(p, a, c, r);
	if (l)
		join(p, a, l, c);
}

static int by_address(const void *x, const void *y)
{
	const struct pool_chunk *c = *(const struct pool_chunk *const *)x;
	const struct pool_chunk *d = *(const struct pool_chunk *const *)y;

	return c->up.ptr < d->up.ptr ? -1 : c->up.ptr > d->up.ptr;
}

/* Keep the place that maps the fewest new bytes; the lower one of equals. */
static void consider(uint64_t at, uint64_t want, uint64_t *best_at, uint64_t *best_want)
{
	if (!*best_want || want < *best_want || (want == *best_want && at < *best_at)) {
		*best_at = at;
		*best_want = want;
	}
}

bool pool_span_place(struct pool *p, struct pool_arena *a, uint64_t size, uint64_t *at,
		     uint64_t *want)
{
	uint64_t g = p->granule, n = atomic_load_explicit(&a->nchunks, memory_order_relaxed);
	uint64_t chunk = (p->params.chunk + g - 1) & ~(g - 1);
	struct pool_chunk **v, *c;
	uint64_t i = 0;

	*at = *want = 0;
	if (!n || !(v = malloc(n * sizeof(*v))))
		return false;
	for (c = a->chunks; c && i < n; c = c->next)
		v[i++] = c;
	n = i;
	qsort(v, n, sizeof(*v), by_address);
	for (i = 0; i < n; i++) {
		struct pool_chunk *l = v[i], *r = i + 1 < n ? v[i + 1] : NULL;
		struct pool_seg *lt = last_seg(l);
		uint64_t lend = l->up.ptr + l->size;
		uint64_t fl = lt->state == SEG_FREE ? lt->size : 0;
		uint64_t fr = r && r->first->state == SEG_FREE ? r->first->size : 0;
		uint64_t gap = r ? r->up.ptr - lend : UINT64_MAX;
		uint64_t need;

		/* A free end that holds the request already: a free raced the refill. */
		if (fl >= size || fr >= size)
			continue;
		need = (size - fl + g - 1) & ~(g - 1);
		/* Up from l's free end, stopping short of r, by a chunk where it fits... */
		if (fl && need <= gap)
			consider(lend, need < chunk && chunk <= gap ? chunk : need, at, want);
		/* ...or filling the gap, so that l's free end and r's free start join. */
		else if (fl && fr && gap + fl + fr >= size)
			consider(lend, gap, at, want);
		/* Down from r's free start, into the gap. */
		need = (size - fr + g - 1) & ~(g - 1);
		if (fr && need <= (r ? r->up.ptr - lend : 0))
			consider(r->up.ptr - need, need, at, want);
	}
	/* The lowest chunk may grow down, if the range has room below it. */
	if (n && v[0]->first->state == SEG_FREE && v[0]->first->size < size) {
		uint64_t need = (size - v[0]->first->size + g - 1) & ~(g - 1);

		if (need < v[0]->up.ptr)
			consider(v[0]->up.ptr - need, need, at, want);
	}
	free(v);
	return *want != 0;
}

/*
 * Cut [lo, hi), whole granules, out of the free segment s.  What is left
 * of s below lo stays with its chunk; what is above hi, and the segments
 * after it, go to a chunk of their own (*after: the first of them, or
 * NULL).  False when a descriptor or a chunk could not be had: then
 * nothing changed.
 */
static bool cut(struct pool_arena *a, struct pool_seg *s, uint64_t lo, uint64_t hi,
		struct pool_seg **after_out)
{
	struct pool_chunk *c = s->chunk, *c2 = NULL;
	uint64_t end = s->ptr + s->size, cend = c->up.ptr + c->size;
	bool keep_low = lo > s->ptr, keep_high = hi < end;
	struct pool_seg *r = NULL, *after, *before;

	if (keep_high && !(r = pool_seg_new(a)))
		return false;
	if ((keep_low || s->prev) && (keep_high || s->next) && !(c2 = calloc(1, sizeof(*c2)))) {
		if (r)
			pool_seg_put(a, r);
		return false;
	}
	pool_bin_remove(a, s);
	if (r) {
		*r = (struct pool_seg){ .ptr = hi, .size = end - hi, .next = s->next, .chunk = c };
		if (s->next)
			s->next->prev = r;
		after = r;
	} else {
		after = s->next;
		if (after)
			after->prev = NULL;
	}
	if (keep_low) {
		s->size = lo - s->ptr;
		s->next = NULL;
		before = s;
	} else {
		before = s->prev;
		if (before)
			before->next = NULL;
		pool_seg_put(a, s);
		s = NULL;
	}
	/* One free segment became keep_low + keep_high of them. */
	if (!keep_low && !keep_high)
		pool_sub(&a->free_blocks, 1);
	else if (keep_low && keep_high)
		pool_add(&a->free_blocks, 1);
	pool_sub(&a->free_bytes, hi - lo);
	pool_sub(&a->owned, hi - lo);
	pool_free_low_clamp(a);

	if (before && after) {
		c2->up = c->up;
		c2->up.ptr = hi;
		c2->size = cend - hi;
		c2->up.bytes = c2->size;
		c2->first = after;
		for (struct pool_seg *x = after; x; x = x->next)
			x->chunk = c2;
		pool_chunk_link(a, c2);
		c->size = lo - c->up.ptr;
	} else if (before) {
		c->size = lo - c->up.ptr;
	} else if (after) {
		c->first = after;
		c->up.ptr = hi;
		c->size = cend - hi;
	} else {
		pool_chunk_unlink(a, c);
		free(c);
		c = NULL;
	}
	if (c)
		c->up.bytes = c->size;
	if (s)
		pool_bin_insert(a, s);
	if (r)
		pool_bin_insert(a, r);
	*after_out = after;
	return true;
}

/* The whole granules of the free segment s: [*lo, *hi), or false if none. */
static bool whole_granules(const struct pool *p, const struct pool_seg *s, uint64_t *lo,
			   uint64_t *hi)
{
	uint64_t g = p->granule;

	*lo = (s->ptr + g - 1) & ~(g - 1);
	*hi = (s->ptr + s->size) & ~(g - 1);
	return s->state == SEG_FREE && *hi > *lo;
}

size_t pool_span_cut_seg(struct pool *p, struct pool_arena *a, struct pool_seg *s,
			 struct pool_range *out)
{
	struct pool_seg *after;
	uint64_t lo, hi;

	if (!whole_granules(p, s, &lo, &hi) || !cut(a, s, lo, hi, &after))
		return 0;
	*out = (struct pool_range){ .ptr = lo, .bytes = hi - lo };
	return 1;
}

size_t pool_span_cut(struct pool *p, struct pool_arena *a, struct pool_range *out, size_t max,
		     uint64_t *limit, bool *no_memory)
{
	struct pool_chunk *c, *next;
	size_t n = 0;

	*no_memory = false;
	pool_arena_flush(a);
	/*
	 * In address order within each chunk.  A cut puts what follows the
	 * hole in a chunk at the head of the list, already passed, so the
	 * walk goes on from there by hand and never sees a segment twice.
	 */
	for (c = a->chunks; c && n < max; c = next) {
		struct pool_seg *s = c->first;

		next = c->next;
		while (s && n < max) {
			struct pool_seg *after;
			uint64_t lo, hi;

			if (*limit < p->granule)
				return n;
			if (!whole_granules(p, s, &lo, &hi)) {
				s = s->next;
				continue;
			}
			if (hi - lo > *limit)
				hi = lo + (*limit & ~(p->granule - 1));
			if (!cut(a, s, lo, hi, &after)) {
				*no_memory = true;
				return n;
			}
			out[n++] = (struct pool_range){ .ptr = lo, .bytes = hi - lo };
			*limit -= hi - lo;
			s = after;
		}
	}
	return n;
}
