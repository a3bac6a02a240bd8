/* SPDX-License-Identifier: MIT */
/*
 * chunk.c - the pool's memory from and back to its upstream, and between
 * streams.
 *
 * All of it runs under grow_lock, off the hot path: only an arena that
 * cannot serve a request comes here.  What it tries, in order:
 *  1. merge the arena's cached small blocks back (a fit may appear);
 *  2. take a wholly free chunk from another stream's arena: the new stream
 *     first waits on an event recorded on the old one, so every use queued
 *     there before the chunk went idle is complete before the new stream
 *     touches it; no host thread ever waits;
 *  3. allocate a new chunk from the upstream on the arena's stream, within
 *     max;
 *  4. when the bound or the upstream refuses: give every idle chunk back,
 *     and try once more with a chunk of exactly the request.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>

#include "pool.h"

struct pool_arena *pool_arena_get(struct pool *p, unsigned int i)
{
	xdm_stream_id stream = i % XDM_MAX_STREAMS;
	struct pool_arena *a;

	if (i >= POOL_ARENAS) {
		xdm_error_set(XDM_E_INVALID, "pool: stream %u is not in the pool", i);
		return NULL;
	}
	a = pool_arena_at(p, i);
	if (a)
		return a;
	pthread_mutex_lock(&p->grow_lock);
	a = pool_arena_at(p, i);
	if (!a) {
		a = pool_arena_new(stream);
		if (a)
			atomic_store_explicit(&p->arenas[i], a, memory_order_release);
	}
	pthread_mutex_unlock(&p->grow_lock);
	if (!a)
		xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no memory for the arena of stream %u",
			      stream);
	return a;
}

static void raise_peak(struct pool *p, uint64_t reserved)
{
	uint64_t peak = atomic_load_explicit(&p->reserved_peak, memory_order_relaxed);

	while (reserved > peak &&
	       !atomic_compare_exchange_weak_explicit(&p->reserved_peak, &peak, reserved,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void pool_give_ranges(struct pool *p, const struct pool_range *r, size_t n,
		      xdm_stream_id stream)
{
	struct xdm_layer *up = xdm_layer_upstream(p->self);

	for (size_t i = 0; i < n; i++) {
		struct xdm_block b = {
			.ordinal = xdm_layer_ordinal(p->self),
			.stream = stream,
			.ptr = r[i].ptr,
			.bytes = r[i].bytes,
			.align = p->granule,
			.tag = "pool chunk",
			.state = XDM_BLOCK_LIVE,
		};

		/*
		 * The upstream releases the range after the work queued on the
		 * stream that last owned it.  If it refuses, the granules stay
		 * mapped and counted in reserved: a leak that says so.
		 */
		if (xdm_up_deallocate(up, &b) != XDM_OK)
			continue;
		atomic_fetch_sub_explicit(&p->reserved, r[i].bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->given_back, r[i].bytes, memory_order_relaxed);
	}
}

/* Hand a chunk back upstream, after every use of it on its last owner. */
static void chunk_release(struct pool *p, struct pool_chunk *c)
{
	struct xdm_layer *up = xdm_layer_upstream(p->self);

	if (p->granule) {
		/* Its owner's stream orders the release: no other stream used it since. */
		struct pool_range r = { .ptr = c->up.ptr, .bytes = c->size };

		pool_give_ranges(p, &r, 1, c->owner);
		atomic_fetch_add_explicit(&p->trimmed, 1, memory_order_relaxed);
		free(c);
		return;
	}
	/*
	 * The upstream frees on the chunk's allocation stream; if the chunk
	 * has moved since, that stream first waits for its last owner.  If
	 * the wait cannot be queued, keep the memory (a leak, still counted
	 * in reserved) rather than free it under work that may still use it;
	 * so too if the upstream refuses the free.
	 */
	if (xdm_layer_stream_order(p->self, c->up.stream, c->owner) == XDM_OK &&
	    xdm_up_deallocate(up, &c->up) == XDM_OK) {
		atomic_fetch_sub_explicit(&p->reserved, c->size, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->trimmed, 1, memory_order_relaxed);
	}
	free(c);
}

/* Ranges cut per pass under an arena's lock: bounds how long it is held. */
#define CUT_BATCH 64

/*
 * Under grow_lock: whole free granules of a, up to limit bytes, back
 * upstream; how many ranges.  The arena's low-water mark of free bytes
 * starts again from what is free after.
 */
static uint64_t give_back_arena(struct pool *p, struct pool_arena *a, uint64_t limit)
{
	struct pool_range r[CUT_BATCH];
	uint64_t total = 0;
	bool no_memory;
	size_t n;

	/* Nothing to give: leave the caches alone, only start the mark again. */
	if (limit < p->granule) {
		pthread_spin_lock(&a->lock);
		a->free_low = atomic_load_explicit(&a->free_bytes, memory_order_relaxed);
		pthread_spin_unlock(&a->lock);
		return 0;
	}

	do {
		pthread_spin_lock(&a->lock);
		n = pool_span_cut(p, a, r, CUT_BATCH, &limit, &no_memory);
		a->free_low = atomic_load_explicit(&a->free_bytes, memory_order_relaxed);
		pthread_spin_unlock(&a->lock);
		pool_give_ranges(p, r, n, a->stream);
		total += n;
	} while (n == CUT_BATCH && !no_memory);
	return total;
}

/* Under grow_lock: the free bytes of a that stayed free since the last look. */
static uint64_t idle_bytes(struct pool_arena *a)
{
	uint64_t low;

	pthread_spin_lock(&a->lock);
	low = a->free_low;
	pthread_spin_unlock(&a->lock);
	return low;
}

/*
 * Under grow_lock: every idle chunk of every arena, back upstream; over a
 * granular upstream every whole free granule, or with idle_only those
 * that stayed free since the last such pass.
 */
static uint64_t trim_some(struct pool *p, bool idle_only)
{
	uint64_t n = 0;

	/* Threads' caches first: this one's now, the others' at their next call. */
	pool_tc_flush_all(p);

	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);
		struct pool_chunk *idle = NULL, *c;

		/*
		 * Memory of a stream being captured into a graph stays: its
		 * release would be captured too, and its blocks may be the
		 * graph's.  The next trim after the capture takes it.
		 */
		if (!a || xdm_layer_stream_capture(p->self, a->stream))
			continue;
		if (p->granule) {
			n += give_back_arena(p, a, idle_only ? idle_bytes(a) : UINT64_MAX);
			continue;
		}
		pthread_spin_lock(&a->lock);
		pool_arena_flush(a);
		while ((c = pool_arena_release_idle(a, 0))) {
			c->next = idle;
			idle = c;
		}
		pthread_spin_unlock(&a->lock);
		/* Upstream calls are made without the arena's lock. */
		while ((c = idle)) {
			idle = c->next;
			chunk_release(p, c);
			n++;
		}
	}
	return n;
}

static uint64_t trim_locked(struct pool *p)
{
	return trim_some(p, false);
}

uint64_t pool_trim(struct pool *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->grow_lock);
	n = trim_locked(p);
	pthread_mutex_unlock(&p->grow_lock);
	return n;
}

uint64_t pool_trim_idle(struct pool *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->grow_lock);
	n = trim_some(p, true);
	pthread_mutex_unlock(&p->grow_lock);
	return n;
}

/* Add c to a; without a descriptor for it, c goes back to the upstream. */
static enum xdm_status adopt(struct pool *p, struct pool_arena *a, struct pool_chunk *c)
{
	bool ok;

	pthread_spin_lock(&a->lock);
	ok = pool_arena_adopt(a, c);
	if (ok && p->granule)
		pool_span_join(p, a, c);
	pthread_spin_unlock(&a->lock);
	if (ok)
		return XDM_OK;
	chunk_release(p, c);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no host memory to give a chunk to "
			     "stream %u", a->stream);
}

/*
 * Under grow_lock: move an idle chunk of at least size bytes from another
 * stream's arena to a.  True if one moved, with *st saying whether a may
 * use it; false sends the caller on to growth.
 */
static bool steal(struct pool *p, struct pool_arena *a, uint64_t size, enum xdm_status *st)
{
	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *b = pool_arena_at(p, i);
		struct pool_chunk *c;

		if (!b || b == a)
			continue;
		pthread_spin_lock(&b->lock);
		/* Its cached blocks may be all that keeps a chunk from being idle. */
		pool_arena_flush(b);
		c = pool_arena_release_idle(b, size);
		pthread_spin_unlock(&b->lock);
		if (!c)
			continue;
		if (xdm_layer_stream_order(p->self, a->stream, b->stream) != XDM_OK) {
			/* a may not touch it: b keeps it, and a grows instead. */
			adopt(p, b, c);
			return false;
		}
		*st = adopt(p, a, c);
		if (*st == XDM_OK)
			atomic_fetch_add_explicit(&p->steals, 1, memory_order_relaxed);
		return true;
	}
	return false;
}

/* The size of the next chunk for a request of size bytes. */
static uint64_t chunk_size(struct pool *p, uint64_t size)
{
	uint64_t want = p->next_chunk;

	if (!atomic_load_explicit(&p->growths, memory_order_relaxed) && p->params.initial > want)
		want = p->params.initial;
	if (want < size)
		want = size;
	return pool_round(want);
}

/* Under grow_lock: a new chunk of want bytes for a (at address at, if not 0), or an error. */
static enum xdm_status grow(struct pool *p, struct pool_arena *a, uint64_t want, uint64_t at)
{
	struct xdm_layer *up = xdm_layer_upstream(p->self);
	struct pool_chunk *c = calloc(1, sizeof(*c));
	enum xdm_status st;

	if (!c)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no host memory for a chunk");
	c->up = (struct xdm_block){
		.ordinal = xdm_layer_ordinal(p->self),
		.stream = a->stream,
		.bytes = want,
		.align = XDM_DEFAULT_ALIGN,
		.tag = "pool chunk",
		.state = XDM_BLOCK_LIVE,
	};
	st = at ? xdm_up_allocate_at(up, at, want, a->stream, c->up.tag, &c->up) :
		  xdm_up_allocate(up, want, a->stream, c->up.tag, &c->up);
	if (st) {
		free(c);
		return st;
	}
	/* A granular upstream may map more than asked: all of it is the pool's. */
	if (p->granule && c->up.bytes > want)
		want = c->up.bytes;
	if (c->up.ptr & (POOL_GRAIN - 1)) {
		st = xdm_error_set(XDM_E_NOT_SUPPORTED, "pool: the upstream returned 0x%" PRIx64
				   ", which is not %" PRIu64 "-byte aligned", c->up.ptr, POOL_GRAIN);
		xdm_up_deallocate(up, &c->up);
		free(c);
		return st;
	}
	c->size = want;
	/* Over a granular upstream the chunk is what the pool holds, all of it;
	 * otherwise c->up stays exactly as the upstream handed it out. */
	if (p->granule)
		c->up.bytes = want;
	pthread_spin_lock(&a->lock);
	if (!pool_arena_adopt(a, c)) {
		pthread_spin_unlock(&a->lock);
		xdm_up_deallocate(up, &c->up);
		free(c);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no host memory for a chunk");
	}
	if (p->granule)
		pool_span_join(p, a, c);
	pthread_spin_unlock(&a->lock);
	raise_peak(p, atomic_fetch_add_explicit(&p->reserved, want, memory_order_relaxed) + want);
	atomic_fetch_add_explicit(&p->growths, 1, memory_order_relaxed);
	if (p->params.doubling && p->next_chunk < p->params.chunk_max)
		p->next_chunk = p->next_chunk * 2 < p->params.chunk_max ?
				p->next_chunk * 2 : p->params.chunk_max;
	return XDM_OK;
}

/* Under grow_lock: whether want more bytes stay within max (0: no bound). */
static bool within_max(struct pool *p, uint64_t max, uint64_t want)
{
	uint64_t reserved = atomic_load_explicit(&p->reserved, memory_order_relaxed);

	/* Written so that no sum can wrap. */
	return !max || (want <= max && reserved <= max - want);
}

static uint64_t granule_round(const struct pool *p, uint64_t bytes)
{
	return (bytes + p->granule - 1) & ~(p->granule - 1);
}

/*
 * Under grow_lock, over a granular upstream: room for size bytes on a.
 * Idle granules go back first (unless release=trim), since they are not
 * where this request can go; then the arena grows where the fewest new
 * granules, beside free memory it holds already, make room (a chunk's free
 * end, or the hole between two chunks whose free ends then join), so that
 * a large request costs only the granules it really adds and the free
 * pieces around holes get used; failing that, new granules anywhere,
 * joined to whatever neighbours they land beside.
 */
static enum xdm_status grow_span(struct pool *p, struct pool_arena *a, uint64_t size,
				 uint64_t max)
{
	uint64_t at, want;
	bool placed;

	if (p->params.release != POOL_RELEASE_TRIM)
		give_back_arena(p, a, UINT64_MAX);
	pthread_spin_lock(&a->lock);
	placed = pool_span_place(p, a, size, &at, &want);
	pthread_spin_unlock(&a->lock);
	/* The place may be taken since (another arena's, or still being released). */
	if (placed && within_max(p, max, want) && grow(p, a, want, at) == XDM_OK)
		return XDM_OK;
	want = granule_round(p, chunk_size(p, size));
	if (!within_max(p, max, want))
		want = granule_round(p, size);
	if (within_max(p, max, want) && grow(p, a, want, 0) == XDM_OK)
		return XDM_OK;
	/* Refused: every arena's idle granules back, what is pending reaped, once more. */
	if (!p->params.keep)
		trim_locked(p);
	xdm_up_reap_pending(xdm_layer_upstream(p->self));
	want = granule_round(p, size);
	if (!within_max(p, max, want))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: %" PRIu64 " bytes on stream %u "
				     "do not fit: %" PRIu64 " bytes reserved of max %" PRIu64, size,
				     a->stream, atomic_load_explicit(&p->reserved,
								     memory_order_relaxed), max);
	return grow(p, a, want, 0);
}

static enum xdm_status refill_locked(struct pool *p, struct pool_arena *a, uint64_t size)
{
	/* One value for the whole refill, whatever the max attribute stores meanwhile. */
	uint64_t max = pool_max(p);
	enum xdm_status st = XDM_OK;
	uint64_t want;
	bool fits;

	if (max && size > max)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: %" PRIu64 " bytes on stream %u "
				     "are more than its max of %" PRIu64, size, a->stream, max);
	pthread_spin_lock(&a->lock);
	pool_arena_flush(a);
	fits = pool_arena_fits(p, a, size);
	pthread_spin_unlock(&a->lock);
	if (fits || steal(p, a, size, &st))
		return st;
	if (p->granule)
		return grow_span(p, a, size, max);

	want = chunk_size(p, size);
	if (!within_max(p, max, want))
		want = size;
	if (within_max(p, max, want) && grow(p, a, want, 0) == XDM_OK)
		return XDM_OK;
	/* The bound or the upstream refused: make room, then ask for exactly size. */
	if (!p->params.keep)
		trim_locked(p);
	if (!within_max(p, max, size))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: %" PRIu64 " bytes on stream %u "
				     "do not fit: %" PRIu64 " bytes reserved of max %" PRIu64, size,
				     a->stream, atomic_load_explicit(&p->reserved,
								     memory_order_relaxed), max);
	return grow(p, a, size, 0);
}

enum xdm_status pool_refill(struct pool *p, struct pool_arena *a, uint64_t size)
{
	enum xdm_status st;

	pthread_mutex_lock(&p->grow_lock);
	st = refill_locked(p, a, size);
	pthread_mutex_unlock(&p->grow_lock);
	return st;
}

void pool_release_all(struct pool *p)
{
	pthread_mutex_lock(&p->grow_lock);
	trim_locked(p);
	/* Chunks with blocks still used: only if the core's drain was skipped. */
	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);
		struct pool_chunk *c;

		while (a && (c = a->chunks)) {
			struct pool_seg *s = c->first, *next;

			a->chunks = c->next;
			for (; s; s = next) {
				next = s->next;
				free(s);
			}
			chunk_release(p, c);
		}
	}
	pthread_mutex_unlock(&p->grow_lock);
}
