/* SPDX-License-Identifier: MIT */
/*
 * attrs.c - the pool's files in the introspection tree (xdm-fs(7)).
 *
 * Counters are summed over the arenas without their locks: each is written
 * by its lock holder alone, so a sum is a consistent-enough snapshot for a
 * reader and never delays an allocation.  Only largest_free and
 * fragmentation look into the bins, one arena lock at a time.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct pool_sums {
	uint64_t in_use, free_bytes, free_blocks, cached_bytes, nchunks, idle_chunks;
	uint64_t thread_cached;
};

static uint64_t load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static struct pool_sums sums(struct pool *p)
{
	struct pool_sums s = { 0 };

	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);

		if (!a)
			continue;
		s.in_use += load(&a->in_use);
		s.free_bytes += load(&a->free_bytes);
		s.free_blocks += load(&a->free_blocks);
		s.cached_bytes += load(&a->cached_bytes);
		s.nchunks += load(&a->nchunks);
		s.idle_chunks += load(&a->idle_chunks);
	}
	/*
	 * The arenas count what threads cache as used; it is free.  Each sum
	 * is exact at quiescence; while threads run, the loads race their
	 * stores, so a subtraction is clamped rather than wrapped.
	 */
	s.thread_cached = pool_tc_bytes(p, -1);
	s.in_use = s.in_use > s.thread_cached ? s.in_use - s.thread_cached : 0;
	s.free_bytes += s.thread_cached;
	return s;
}

static uint64_t largest_free(struct pool *p)
{
	uint64_t best = 0;

	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);
		uint64_t l;

		if (!a)
			continue;
		pthread_spin_lock(&a->lock);
		l = pool_arena_largest(a);
		pthread_spin_unlock(&a->lock);
		if (l > best)
			best = l;
	}
	return best;
}

static int show_u64(char *buf, size_t len, uint64_t v)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", v);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

/* One value written as "1" or "1\n", as actions and resets take it. */
static bool is_word(const char *buf, size_t len, const char *word)
{
	size_t n = strlen(word);

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	return len == n && !memcmp(buf, word, n);
}

#define SHOW(field, expr)                                                        \
	static int field##_show(struct xdm_layer *self, char *buf, size_t len)   \
	{                                                                        \
		struct pool *p = pool_of(self);                                  \
		(void)p;                                                         \
		return show_u64(buf, len, (expr));                               \
	}

SHOW(reserved, load(&p->reserved))
SHOW(reserved_peak, load(&p->reserved_peak))
SHOW(in_use, sums(p).in_use)
SHOW(free_bytes, sums(p).free_bytes)
SHOW(free_blocks, sums(p).free_blocks)
SHOW(cached_bytes, sums(p).cached_bytes)
SHOW(thread_cached, sums(p).thread_cached)
SHOW(tcache, p->params.tcache)
SHOW(chunks, sums(p).nchunks)
SHOW(idle_chunks, sums(p).idle_chunks)
SHOW(largest_free, largest_free(p))
SHOW(growths, load(&p->growths))
SHOW(steals, load(&p->steals))
SHOW(trimmed, load(&p->trimmed))
SHOW(chunk, p->params.chunk)
SHOW(max, pool_max(p))
SHOW(small_max, p->params.small_max)
SHOW(granule, p->granule)
SHOW(given_back, load(&p->given_back))
SHOW(joins, load(&p->joins))
SHOW(trim_ms, load(&p->params.trim_ms))
SHOW(keep, (uint64_t)p->params.keep)
SHOW(split, p->split)

/* Writing 0 starts a new peak from what is reserved now. */
static int reserved_peak_store(struct xdm_layer *self, const char *buf, size_t len)
{
	struct pool *p = pool_of(self);

	if (!is_word(buf, len, "0"))
		return -EINVAL;
	atomic_store_explicit(&p->reserved_peak, load(&p->reserved), memory_order_relaxed);
	return 0;
}

/*
 * A new bound on reserved bytes, in the size syntax of the max parameter
 * ("8G", "80%" of the device, "0": none).  It takes effect at the next
 * growth; chunks already reserved stay, so a bound below what is reserved
 * only stops the pool from growing until frees and trims bring it under.
 * An atomic store: growth reads the bound once per refill under grow_lock,
 * which this store must not take (it is held across upstream calls).
 */
static int max_store(struct xdm_layer *self, const char *buf, size_t len)
{
	const struct xdm_device_info *dev = xdm_layer_device(self);
	char text[64];
	uint64_t v;

	if (len == 0 || len >= sizeof(text) || memchr(buf, '\0', len))
		return -EINVAL;
	memcpy(text, buf, len);
	text[len] = '\0';
	if (xdm_parse_size(text, dev ? dev->total_bytes : 0, &v) != XDM_OK)
		return -EINVAL;
	atomic_store_explicit(&pool_of(self)->params.max, v, memory_order_relaxed);
	return 0;
}

/*
 * The share of the merged free bytes outside the largest free segment: 0
 * when all free memory is one piece, near 1 when it is in crumbs.  Cached
 * small blocks are left out; they are kept apart on purpose.
 */
static int fragmentation_show(struct xdm_layer *self, char *buf, size_t len)
{
	struct pool *p = pool_of(self);
	struct pool_sums s = sums(p);
	/* Summed without locks: a give between the loads may pass free_bytes. */
	uint64_t merged = s.free_bytes > s.cached_bytes ? s.free_bytes - s.cached_bytes : 0;
	uint64_t largest = largest_free(p);
	double f = merged && largest < merged ? 1.0 - (double)largest / (double)merged : 0.0;
	int n = snprintf(buf, len, "%.3f\n", f);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

/*
 * A table, one row per stream that has an arena: stream, free bytes,
 * chunks (its arena of small blocks, if it has one, counted in).
 */
static int stream_free_show(struct xdm_layer *self, char *buf, size_t len)
{
	struct pool *p = pool_of(self);
	size_t used = 0;

	for (unsigned int i = 0; i < XDM_MAX_STREAMS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);
		struct pool_arena *b = pool_arena_at(p, i + XDM_MAX_STREAMS);
		uint64_t free_bytes = 0, chunks = 0;
		int n;

		if (!a && !b)
			continue;
		for (int k = 0; k < 2; k++) {
			struct pool_arena *x = k ? b : a;

			if (x) {
				free_bytes += load(&x->free_bytes);
				free_bytes += pool_tc_bytes(p, (int)(i + k * XDM_MAX_STREAMS));
				chunks += load(&x->nchunks);
			}
		}
		n = snprintf(buf + used, len - used, "%u %" PRIu64 " %" PRIu64 "\n", i,
			     free_bytes, chunks);
		if (n < 0 || (size_t)n >= len - used)
			return -EOVERFLOW;
		used += (size_t)n;
	}
	return (int)used;
}

/*
 * A new period for the trimmer, in milliseconds; 0 stops it.  Over any
 * upstream: a pool over plain device memory may be given a trimmer too
 * (it then hands back idle chunks).
 */
static int trim_ms_store(struct xdm_layer *self, const char *buf, size_t len)
{
	char text[32], *end;
	unsigned long long v;

	if (len == 0 || len >= sizeof(text) || memchr(buf, '\0', len))
		return -EINVAL;
	memcpy(text, buf, len);
	text[len] = '\0';
	if (len && text[len - 1] == '\n')
		text[len - 1] = '\0';
	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || *end || end == text)
		return -EINVAL;
	return pool_trimmer_set(pool_of(self), v);
}

static int trim_store(struct xdm_layer *self, const char *buf, size_t len)
{
	if (!is_word(buf, len, "1"))
		return -EINVAL;
	pool_trim(pool_of(self));
	return 0;
}

const struct xdm_attr pool_attrs[] = {
	{ "reserved", 0444, "bytes held from the upstream (all chunks)", reserved_show, NULL },
	{ "reserved_peak", 0644, "the most bytes reserved at once; writing 0 restarts it from "
	  "reserved", reserved_peak_show, reserved_peak_store },
	{ "in_use", 0444, "bytes of blocks handed out and not freed (sizes as rounded)",
	  in_use_show, NULL },
	{ "free_bytes", 0444, "bytes of the chunks not in use, cached included", free_bytes_show,
	  NULL },
	{ "free_blocks", 0444, "free pieces of the chunks, cached ones included",
	  free_blocks_show, NULL },
	{ "cached_bytes", 0444, "bytes of freed small blocks kept in their size class",
	  cached_bytes_show, NULL },
	{ "thread_cached", 0444, "bytes of freed blocks kept in threads' caches, in front of the "
	  "arenas (counted in free_bytes, not in in_use)", thread_cached_show, NULL },
	{ "tcache", 0444, "the tcache parameter: bytes each thread may keep per stream; 0: no "
	  "thread caches", tcache_show, NULL },
	{ "largest_free", 0444, "bytes of the largest merged free piece", largest_free_show,
	  NULL },
	{ "fragmentation", 0444, "1 - largest_free / merged free bytes, 0.000 to 1.000",
	  fragmentation_show, NULL },
	{ "chunks", 0444, "chunks held from the upstream", chunks_show, NULL },
	{ "idle_chunks", 0444, "chunks wholly free, which trim gives back", idle_chunks_show,
	  NULL },
	{ "stream_free", 0444, "per stream with an arena: stream id, free bytes, chunks owned",
	  stream_free_show, NULL },
	{ "growths", 0444, "chunks taken from the upstream so far", growths_show, NULL },
	{ "steals", 0444, "idle chunks moved to another stream behind an event wait",
	  steals_show, NULL },
	{ "trimmed", 0444, "chunks given back to the upstream so far", trimmed_show, NULL },
	{ "chunk", 0444, "the chunk parameter, bytes", chunk_show, NULL },
	{ "max", 0644, "bytes the pool may reserve in all, 0: no bound; a write (8G, 80%, 0) "
	  "holds from the next growth on, and below reserved it only stops growth", max_show,
	  max_store },
	{ "small_max", 0444, "the largest size-class block, bytes", small_max_show, NULL },
	{ "trim", 0200, "write 1: give every wholly free chunk (over a virtual-memory upstream: "
	  "every whole free granule) back to the upstream", NULL, trim_store },
	{ "granule", 0444, "the upstream's granularity, bytes; 0: its blocks are separate "
	  "allocations, never joined or cut", granule_show, NULL },
	{ "given_back", 0444, "bytes of whole free granules given back to the upstream so far",
	  given_back_show, NULL },
	{ "joins", 0444, "chunks joined to a neighbour in the address space so far", joins_show,
	  NULL },
	{ "keep", 0444, "the keep parameter: 1 when only a destroy or a write to trim gives "
	  "chunks back", keep_show, NULL },
	{ "trim_ms", 0644, "milliseconds between the trimmer's passes; 0: no trimmer (a write "
	  "stops it, and starts it again at the new period)", trim_ms_show, trim_ms_store },
	{ "split", 0444, "blocks up to this size live in chunks apart from larger ones, bytes; "
	  "0: no split", split_show, NULL },
	{ .name = NULL },
};
