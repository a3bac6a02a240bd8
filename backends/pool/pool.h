/* SPDX-License-Identifier: MIT */
/*
 * pool.h - what the files of the pool backend share.
 *
 * The pool carves blocks out of chunks it allocates from its upstream.
 * Every stream has an arena of its own: the chunks it owns, their free
 * pieces and its size-class caches, under one lock that only threads of
 * that stream (and the rare steal, trim or attribute read) ever take.
 * Memory moves between streams only a whole free chunk at a time, behind an
 * event wait queued on the stream that takes it (chunk.c).
 *
 * Device memory cannot hold the allocator's bookkeeping, so every piece of
 * a chunk has a host descriptor, a segment, linked in address order within
 * its chunk; a segment never links to one of another chunk, which is why
 * blocks of different upstream allocations are never merged.
 *
 * Over an upstream with a granularity (a virtual-memory backend, see
 * xdm_ops.granularity) the rule is different: a chunk is any run of
 * mapped granules, chunks of one arena that are neighbours in the address
 * space are joined into one (span.c), and whole free granules are cut out
 * of free segments and given back while the pool runs, splitting their
 * chunk in two.  Reserved then follows what is used, not what was once.
 */
#ifndef XDM_POOL_H
#define XDM_POOL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <xdm/module.h>

/* Every block is a multiple of this, and so is every address. */
#define POOL_GRAIN ((uint64_t)XDM_DEFAULT_ALIGN)
#define POOL_GRAIN_SHIFT 8

/*
 * Free segments of an arena sit in bins, two levels as in TLSF: the first
 * by power of two of the size in grains, the second splitting each power in
 * POOL_SL equal steps.  A bitmap per level finds the next non-empty bin in
 * constant time.
 */
#define POOL_SL_SHIFT 3
#define POOL_SL (1u << POOL_SL_SHIFT)
#define POOL_FL 48

/* Small sizes are rounded to a class and cached per class (size.c). */
#define POOL_MAX_CLASSES 80

enum pool_seg_state {
	SEG_USED = 1,		/* handed out */
	SEG_FREE,		/* in a bin, merged with its free neighbours */
	SEG_CACHED,		/* in a size-class cache, not merged */
};

struct pool_chunk;

/* A stream's arena, and its arena of small blocks (index + XDM_MAX_STREAMS). */
#define POOL_ARENAS (2 * XDM_MAX_STREAMS)

struct pool_seg {
	uint64_t ptr;
	uint64_t size;
	struct pool_seg *prev, *next;		/* address order, one chunk only */
	struct pool_seg *link_prev, *link_next;	/* bin, cache or spare list */
	struct pool_seg *hash_next;		/* the arena's used-block table */
	struct pool_chunk *chunk;
	enum pool_seg_state state;
	uint8_t fl, sl;				/* its bin, while SEG_FREE */
	uint8_t cls;				/* its class, while SEG_CACHED */
};

struct pool_chunk {
	struct xdm_block up;		/* as the upstream handed it out */
	uint64_t size;			/* what the pool carves: the request */
	struct pool_seg *first;		/* lowest address */
	struct pool_chunk *prev, *next;	/* the owning arena's chunks */
	xdm_stream_id owner;
};

/* One stream's share of the pool. */
struct pool_arena {
	alignas(64) pthread_spinlock_t lock;
	xdm_stream_id stream;
	uint64_t fl_map;
	uint32_t sl_map[POOL_FL];
	struct pool_seg *bins[POOL_FL][POOL_SL];
	struct pool_seg *cache[POOL_MAX_CLASSES];
	uint32_t cache_count[POOL_MAX_CLASSES];
	struct pool_seg **hash;		/* used segments by address */
	uint64_t hash_mask;
	uint64_t hash_count;
	struct pool_seg *spare;		/* descriptors for reuse */
	struct pool_chunk *chunks;
	/* Written under the lock, read by attributes without it. */
	_Atomic uint64_t in_use;	/* bytes of SEG_USED */
	_Atomic uint64_t free_bytes;	/* SEG_FREE and SEG_CACHED */
	_Atomic uint64_t free_blocks;
	_Atomic uint64_t cached_bytes;
	_Atomic uint64_t owned;		/* bytes of chunks it owns */
	_Atomic uint64_t nchunks;
	_Atomic uint64_t idle_chunks;	/* wholly free (cached blocks not merged) */
	/*
	 * The fewest free bytes since the trimmer last looked: at least this
	 * much stayed unused all that time, so the trimmer gives back no more.
	 */
	uint64_t free_low;
};

/* ---- each thread's cache (tcache.c) ---------------------------------------- */

/* Blocks one thread keeps per list, and lists of large sizes per arena. */
#define POOL_TC_CAP 32
#define POOL_TC_LARGE 2

/* Freed blocks of one size, by address; the last pushed is popped first. */
struct pool_tc_bin {
	uint64_t size;			/* 0: a large list not claimed yet */
	uint32_t n, cap;
	uint64_t used;			/* the arena cache's clock at its last use */
	uint64_t ptr[POOL_TC_CAP];
};

/* One thread's lists for one arena: large sizes first, then each class. */
struct pool_tc_arena {
	_Atomic uint64_t bytes;		/* what its lists hold; only the owner writes */
	uint64_t clock;
	unsigned int nbins;
	struct pool_tc_bin bins[];
};

struct pool;

/* One thread's cache of one pool, the value of the pool's key. */
struct pool_tcache {
	struct pool *pool;
	struct pool_tcache *prev, *next;	/* the pool's list, under tc_lock */
	uint64_t epoch;			/* the pool's tc_epoch when it last drained */
	/* Written by the owner only, read by counters under tc_lock. */
	struct pool_tc_arena *_Atomic arena[POOL_ARENAS];
};

/* When a pool over a granular upstream gives whole free granules back. */
enum pool_release {
	POOL_RELEASE_TRIM = 0,	/* at trims only */
	POOL_RELEASE_GROW,	/* also before it grows */
	POOL_RELEASE_FREE,	/* also at once, on the free that empties them */
};

struct pool_params {
	uint64_t initial;		/* the first chunk, when larger than chunk */
	uint64_t chunk;			/* the first growth */
	uint64_t chunk_max;		/* growth=double stops doubling here */
	/*
	 * Reserved never passes it; 0: no bound.  The max attribute may
	 * store it at any time, so growth loads it once per refill
	 * (pool_max()); a store below what is reserved only stops growth.
	 */
	_Atomic uint64_t max;
	uint64_t small_max;		/* classes and caches up to here */
	bool doubling;			/* growth=double */
	enum pool_release release;	/* over a granular upstream: when to give back */
	/* The trimmer's period; 0: no trimmer.  The trim_ms attribute stores it. */
	_Atomic uint64_t trim_ms;
	uint64_t split;			/* small-block arenas up to this size; 0: none */
	uint64_t tcache;		/* bytes a thread caches per arena; 0: no caches */
	bool keep;			/* only a destroy or a write to trim gives back */
};

struct pool {
	struct xdm_layer *self;
	struct pool_params params;
	/* Size classes: their sizes, and the class of each small size. */
	uint32_t nclasses;
	uint64_t class_size[POOL_MAX_CLASSES];
	uint8_t *class_of;		/* indexed by size in grains */
	/*
	 * Arenas are made on a stream's first allocation: one per stream, and
	 * over a granular upstream a second per stream for blocks up to split
	 * bytes (pool_arena_index).
	 */
	struct pool_arena *_Atomic arenas[POOL_ARENAS];
	uint64_t split;
	/* Serialises growth, steals and trims: never on the hot path. */
	pthread_mutex_t grow_lock;
	uint64_t next_chunk;		/* growth=double: the next chunk's size */
	_Atomic uint64_t reserved;
	_Atomic uint64_t reserved_peak;
	_Atomic uint64_t growths;
	_Atomic uint64_t steals;
	_Atomic uint64_t trimmed;	/* chunks given back */
	/* Over a granular upstream (0: none, chunks are whole blocks). */
	uint64_t granule;
	_Atomic uint64_t given_back;	/* bytes of granules given back */
	_Atomic uint64_t joins;		/* chunks joined to a neighbour */
	/* The trimmer thread, when trim_ms is set. */
	pthread_t trimmer;
	bool trimmer_running;
	bool trimmer_stop;		/* under trim_lock */
	pthread_mutex_t trim_lock;
	/* Serialises writes of trim_ms: each stops the thread and starts it again. */
	pthread_mutex_t trim_knob;
	pthread_cond_t trim_wake;
	/* Each thread's cache (tcache.c), when params.tcache is set. */
	pthread_key_t tc_key;
	uint64_t serial;		/* xdm_layer_serial: the key of pool_tc_last */
	pthread_mutex_t tc_lock;	/* the list, for counters, exits and fini */
	struct pool_tcache *tcaches;
	_Atomic uint64_t tc_epoch;	/* bumped by a trim: every cache drains */
};

static inline struct pool *pool_of(const struct xdm_layer *self)
{
	return xdm_layer_priv_inline(self);
}

/*
 * The index of the arena that serves size bytes on stream (< XDM_MAX_STREAMS).
 * Over a virtual-memory upstream, blocks up to split bytes live in chunks
 * of their own: a small block left among large ones would keep a whole
 * granule mapped when they are freed.
 */
static inline unsigned int pool_arena_index(const struct pool *p, xdm_stream_id stream,
					    uint64_t size)
{
	return stream + (size <= p->split ? XDM_MAX_STREAMS : 0);
}

/* The arena at index i, or NULL before its first allocation. */
static inline struct pool_arena *pool_arena_at(struct pool *p, unsigned int i)
{
	return atomic_load_explicit(&p->arenas[i], memory_order_acquire);
}

/* The bound on reserved bytes as it is now; 0: none. */
static inline uint64_t pool_max(struct pool *p)
{
	return atomic_load_explicit(&p->params.max, memory_order_relaxed);
}

/* Relaxed stores of arena counters that only the lock holder writes. */
static inline void pool_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static inline void pool_sub(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) - v,
			      memory_order_relaxed);
}

static inline uint64_t pool_round(uint64_t bytes)
{
	return (bytes + POOL_GRAIN - 1) & ~(POOL_GRAIN - 1);
}

/* ---- size.c: classes ------------------------------------------------ */

enum xdm_status pool_classes_init(struct pool *p);
void pool_classes_fini(struct pool *p);
/* The class of a small size (a multiple of the grain, <= small_max). */
static inline unsigned int pool_class(const struct pool *p, uint64_t size)
{
	return p->class_of[size >> POOL_GRAIN_SHIFT];
}

/* What a request of bytes is carved as: grains, or its size class. */
static inline uint64_t pool_block_size(const struct pool *p, uint64_t bytes)
{
	uint64_t size = pool_round(bytes);

	return size <= p->params.small_max ? p->class_size[pool_class(p, size)] : size;
}

/* ---- arena.c: one stream's free pieces -------------------------------- */

struct pool_arena *pool_arena_new(xdm_stream_id stream);
void pool_arena_free(struct pool_arena *a);
/*
 * Under the arena's lock.  Take a block of size bytes (a multiple of the
 * grain; a class size when small), or NULL when nothing fits, or when host
 * memory for a descriptor ran out (*no_memory: a refill would not help).
 */
struct pool_seg *pool_arena_take(struct pool *p, struct pool_arena *a, uint64_t size,
				 bool *no_memory);
/*
 * Under the lock: take exactly [ptr, ptr + size) (size as pool_arena_take
 * rounds it) out of a's free memory, caches flushed first; NULL when any
 * of it is not free in a, or (*no_memory) when host memory ran out.
 */
struct pool_seg *pool_arena_take_at(struct pool_arena *a, uint64_t ptr, uint64_t size,
				    bool *no_memory);
/*
 * Under the lock: give a used segment back; small ones go to the cache
 * (NULL) unless merge is set, others merge with their free neighbours (the
 * merged segment).
 */
struct pool_seg *pool_arena_give(struct pool *p, struct pool_arena *a, struct pool_seg *s,
				 bool merge);
/* Under the lock: the used segment at ptr, unlinked from the table; NULL if none. */
struct pool_seg *pool_arena_unhash(struct pool_arena *a, uint64_t ptr);
/* Under the lock: the used segment at ptr, or NULL. */
struct pool_seg *pool_arena_lookup(struct pool_arena *a, uint64_t ptr);
/* Under the lock: merge every cached segment back into the bins. */
void pool_arena_flush(struct pool_arena *a);
/* Under the lock: add a chunk (wholly free) to the arena; false: no memory. */
bool pool_arena_adopt(struct pool_arena *a, struct pool_chunk *c);
/* Under the lock: a wholly free chunk of at least size bytes, removed. */
struct pool_chunk *pool_arena_release_idle(struct pool_arena *a, uint64_t size);
/* Under the lock: whether a take of size would succeed. */
bool pool_arena_fits(struct pool *p, struct pool_arena *a, uint64_t size);
/* Under the lock: the largest free segment. */
uint64_t pool_arena_largest(const struct pool_arena *a);

/* Under the lock: put c at the head of a's list of chunks, a's own; take it out. */
void pool_chunk_link(struct pool_arena *a, struct pool_chunk *c);
void pool_chunk_unlink(struct pool_arena *a, struct pool_chunk *c);

/* Under the lock: free bytes just fell; the trimmer's mark follows them down. */
static inline void pool_free_low_clamp(struct pool_arena *a)
{
	uint64_t now = atomic_load_explicit(&a->free_bytes, memory_order_relaxed);

	if (now < a->free_low)
		a->free_low = now;
}

/* Under the lock: descriptors and bins, for span.c. */
struct pool_seg *pool_seg_new(struct pool_arena *a);
void pool_seg_put(struct pool_arena *a, struct pool_seg *s);
void pool_bin_insert(struct pool_arena *a, struct pool_seg *s);
void pool_bin_remove(struct pool_arena *a, struct pool_seg *s);

/* ---- span.c: chunks over a granular upstream ------------------------------ */

/* A range of granules to give back upstream. */
struct pool_range {
	uint64_t ptr;
	uint64_t bytes;
};

/* Under the lock: join c (just adopted by a) with its neighbours in a. */
void pool_span_join(struct pool *p, struct pool_arena *a, struct pool_chunk *c);
/*
 * Under the lock: cut whole free granules out of a's free segments (caches
 * flushed first), up to max ranges and *limit bytes, which it lowers by
 * what it cut; returns how many ranges.  The ranges leave the arena; the
 * caller gives them upstream without the lock.  *no_memory: a cut needed
 * a descriptor or chunk that could not be had.
 */
size_t pool_span_cut(struct pool *p, struct pool_arena *a, struct pool_range *out, size_t max,
		     uint64_t *limit, bool *no_memory);
/* Under the lock: cut the whole free granules of the free segment s only. */
size_t pool_span_cut_seg(struct pool *p, struct pool_arena *a, struct pool_seg *s,
			 struct pool_range *out);
/*
 * Under the lock: where growing the arena by the fewest granules makes
 * room for size bytes next to free memory it holds already: *want bytes at
 * *at, upward from a chunk's free end (filling the gap to the next chunk
 * if that joins two free ends), or downward from a chunk's free start.
 * False: no chunk has a free end, so the growth may go anywhere.
 */
bool pool_span_place(struct pool *p, struct pool_arena *a, uint64_t size, uint64_t *at,
		     uint64_t *want);

/* ---- chunk.c: memory from and back to the upstream, and between streams */

/* Make room on a's stream for size bytes: steal, grow.  No lock held. */
enum xdm_status pool_refill(struct pool *p, struct pool_arena *a, uint64_t size);
/* Give every wholly free chunk back upstream; returns how many. */
uint64_t pool_trim(struct pool *p);
/*
 * The trimmer's pass: over a granular upstream, only memory that stayed
 * free since the last pass goes back; otherwise as pool_trim.
 */
uint64_t pool_trim_idle(struct pool *p);
/* Give the ranges back upstream on stream (no lock held). */
void pool_give_ranges(struct pool *p, const struct pool_range *r, size_t n,
		      xdm_stream_id stream);
/* Give every chunk back, at fini (the core has synchronized the streams). */
void pool_release_all(struct pool *p);
/* The arena at index i (pool_arena_index), made if need be; NULL with the error set. */
struct pool_arena *pool_arena_get(struct pool *p, unsigned int i);

/* ---- trim.c: the trimmer thread ------------------------------------------- */

enum xdm_status pool_trimmer_start(struct pool *p);
void pool_trimmer_stop(struct pool *p);
int pool_trimmer_set(struct pool *p, uint64_t ms);

/* ---- tcache.c: each thread's cache in front of the arenas -------------------- */

enum xdm_status pool_tc_init(struct pool *p);
void pool_tc_fini(struct pool *p);
/* A block of size for arena i from this thread's cache (refilled from the arena); 0: none. */
uint64_t pool_tc_get(struct pool *p, unsigned int i, uint64_t size);
/* Keep a freed block of arena i in this thread's cache; false: the arena takes it. */
bool pool_tc_put(struct pool *p, unsigned int i, uint64_t ptr, uint64_t size);
/* This thread's blocks of arena i back to the arena (before it grows). */
void pool_tc_flush_arena(struct pool *p, unsigned int i);
/* Every cache back: this thread's at once, the others' at their next call. */
void pool_tc_flush_all(struct pool *p);
/* Bytes the caches hold for arena i, or for all arenas when i < 0. */
uint64_t pool_tc_bytes(struct pool *p, int arena);

/* The cache the calling thread last used (module.h, xdm_thread_last). */
extern _Thread_local struct xdm_thread_last pool_tc_last;

/* The calling thread's cache of p through its key, or NULL (tcache.c). */
struct pool_tcache *pool_tc_find(struct pool *p);

static inline struct pool_tcache *pool_tc_mine(struct pool *p)
{
	struct pool_tcache *tc = xdm_thread_last_get(&pool_tc_last, p->serial);

	return tc ? tc : pool_tc_find(p);
}

/* Whether a block of size may be kept in a thread's cache. */
static inline bool pool_tc_takes(const struct pool *p, uint64_t size)
{
	return size <= p->params.tcache;
}

/* A thread's cache of arena i, or NULL; a plain load for its owner. */
static inline struct pool_tc_arena *pool_tc_arena_of(struct pool_tcache *tc, unsigned int i)
{
	return atomic_load_explicit(&tc->arena[i], memory_order_acquire);
}

/*
 * The hits, inline in the pool's two calls: a small size whose list is
 * ready.  Everything else (a first call, a trim since the last, a large
 * size, an empty or full list) takes pool_tc_get or pool_tc_put.
 */
static inline struct pool_tc_bin *pool_tc_hit_bin(struct pool *p, unsigned int i,
						  uint64_t size, struct pool_tc_arena **ta)
{
	struct pool_tcache *tc;

	if (size > p->params.small_max)
		return NULL;
	tc = pool_tc_mine(p);
	if (!tc || tc->epoch != atomic_load_explicit(&p->tc_epoch, memory_order_relaxed) ||
	    !(*ta = pool_tc_arena_of(tc, i)))
		return NULL;
	return &(*ta)->bins[POOL_TC_LARGE + pool_class(p, size)];
}

static inline uint64_t pool_tc_pop(struct pool *p, unsigned int i, uint64_t size)
{
	struct pool_tc_arena *ta;
	struct pool_tc_bin *bin = pool_tc_hit_bin(p, i, size, &ta);

	if (!bin || !bin->n)
		return pool_tc_get(p, i, size);
	pool_sub(&ta->bytes, size);
	return bin->ptr[--bin->n];
}

static inline bool pool_tc_push(struct pool *p, unsigned int i, uint64_t ptr, uint64_t size)
{
	struct pool_tc_arena *ta;
	struct pool_tc_bin *bin = pool_tc_hit_bin(p, i, size, &ta);

	if (!bin || bin->n == bin->cap ||
	    atomic_load_explicit(&ta->bytes, memory_order_relaxed) + size > p->params.tcache)
		return pool_tc_put(p, i, ptr, size);
	bin->ptr[bin->n++] = ptr;
	pool_add(&ta->bytes, size);
	return true;
}

/* ---- chunks.c: what the pool holds, for memory viewers (ABI 1.10) ----------- */

enum xdm_status pool_chunks(struct xdm_layer *self, xdm_chunk_fn fn, void *arg);

/* ---- attrs.c ---------------------------------------------------------- */

extern const struct xdm_attr pool_attrs[];

#endif /* XDM_POOL_H */
