/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the runtime's live blocks, keyed by address.
 *
 * Sharded by a hash of the address so that threads allocating different
 * blocks rarely meet on a lock; each shard is a chained hash table that
 * doubles when it gets full.  Introspection reads it under the same short
 * shard locks; no shard lock is ever held across a blocking call.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define INITIAL_BUCKETS 64

static uint64_t hash_ptr(uint64_t ptr)
{
	/* Blocks are at least 256-aligned: the low bits carry nothing. */
	return (ptr >> 8) * 0x9e3779b97f4a7c15ull;
}

/* The shard takes the hash's top bits, the bucket bits below them. */
static size_t bucket_of_hash(const struct xdm_reg_shard *shard, uint64_t h)
{
	return (size_t)(h >> 20) & (shard->nbuckets - 1);
}

static size_t bucket_of(const struct xdm_reg_shard *shard, uint64_t ptr)
{
	return bucket_of_hash(shard, hash_ptr(ptr));
}

static struct xdm_reg_shard *shard_of_hash(struct xdm_registry *reg, uint64_t h)
{
	return &reg->shards[h >> (64 - XDM_REG_SHARD_BITS)];
}

void xdm_registry_init(struct xdm_registry *reg)
{
	for (int i = 0; i < XDM_REG_SHARDS; i++) {
		memset(&reg->shards[i], 0, sizeof(reg->shards[i]));
		xdm_spin_init(&reg->shards[i].lock);
	}
}

struct xdm_reg_shard *xdm_registry_shard(struct xdm_registry *reg, uint64_t ptr)
{
	return shard_of_hash(reg, hash_ptr(ptr));
}

/* Cold and out of line: the insert's fast path then saves no registers. */
static __attribute__((noinline, cold)) bool grow(struct xdm_reg_shard *shard)
{
	size_t n = shard->nbuckets ? shard->nbuckets * 2 : INITIAL_BUCKETS;
	struct xdm_reg_entry **buckets = calloc(n, sizeof(*buckets));
	size_t old = shard->nbuckets;

	if (!buckets)
		return false;
	shard->nbuckets = n;
	for (size_t i = 0; i < old; i++) {
		struct xdm_reg_entry *e = shard->buckets[i], *next;

		for (; e; e = next) {
			size_t b = bucket_of(shard, e->block.ptr);

			next = e->next;
			e->next = buckets[b];
			buckets[b] = e;
		}
	}
	free(shard->buckets);
	shard->buckets = buckets;
	return true;
}

struct xdm_reg_entry *xdm_registry_find_locked(struct xdm_reg_shard *shard, uint64_t ptr)
{
	struct xdm_reg_entry *e;

	if (!shard->nbuckets)
		return NULL;
	for (e = shard->buckets[bucket_of(shard, ptr)]; e; e = e->next)
		if (e->block.ptr == ptr)
			return e;
	return NULL;
}

static __attribute__((noinline, cold)) struct xdm_reg_entry *entry_alloc(void)
{
	return malloc(sizeof(struct xdm_reg_entry));
}

/* An entry a take left on the spare list, or a new one (rarely: at growth). */
static struct xdm_reg_entry *new_entry(struct xdm_reg_shard *shard)
{
	struct xdm_reg_entry *e = shard->spare;

	if (__builtin_expect(e != NULL, 1)) {
		shard->spare = e->next;
		return e;
	}
	return entry_alloc();
}

/* The empty use state, without clearing the inline array it does not read. */
static void use_track_init(struct xdm_use_track *t)
{
	t->has_write = false;
	t->nreads = 0;
	t->capreads = XDM_INLINE_READS;
	t->reads = t->inline_reads;
}

static __attribute__((noinline, cold)) enum xdm_status already_live(uint64_t ptr)
{
	return xdm_error_set(XDM_E_INVALID, "the stack returned address 0x%llx, which is already live",
			     (unsigned long long)ptr);
}

static __attribute__((noinline, cold)) enum xdm_status no_memory(void)
{
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of host memory for the block registry");
}

/* The address is hashed once: the shard, then the bucket, from one hash. */
enum xdm_status xdm_registry_insert(struct xdm_registry *reg, struct xdm_block *block,
				    size_t requested)
{
	uint64_t ptr = block->ptr, h = hash_ptr(ptr);
	struct xdm_reg_shard *shard = shard_of_hash(reg, h);
	struct xdm_reg_entry *e, **head;

	xdm_spin_lock(&shard->lock);
	/* The first insert grows an empty shard, so nbuckets > 0 after this. */
	if (shard->count >= shard->nbuckets * 2 && !grow(shard) && !shard->nbuckets)
		goto oom;
	head = &shard->buckets[bucket_of_hash(shard, h)];
	for (e = *head; e; e = e->next) {
		if (e->block.ptr == ptr) {
			xdm_spin_unlock(&shard->lock);
			return already_live(ptr);
		}
	}
	e = new_entry(shard);
	if (!e)
		goto oom;
	block->generation = (++shard->inserts << XDM_REG_SHARD_BITS) |
			    (uint64_t)(shard - reg->shards);
	e->block = *block;
	e->requested = requested;
	use_track_init(&e->track);
	e->next = *head;
	*head = e;
	shard->count++;
	xdm_spin_unlock(&shard->lock);
	return XDM_OK;

oom:
	xdm_spin_unlock(&shard->lock);
	return no_memory();
}

bool xdm_registry_take(struct xdm_registry *reg, uint64_t ptr, xdm_generation generation,
		       struct xdm_block *out, struct xdm_use_track *uses)
{
	uint64_t h = hash_ptr(ptr);
	struct xdm_reg_shard *shard = shard_of_hash(reg, h);
	struct xdm_reg_entry **pp, *e = NULL;

	use_track_init(uses);
	xdm_spin_lock(&shard->lock);
	if (!shard->nbuckets)
		goto unlock;
	for (pp = &shard->buckets[bucket_of_hash(shard, h)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->block.ptr != ptr)
			continue;
		if ((*pp)->block.generation != generation)
			break;
		e = *pp;
		*pp = e->next;
		shard->count--;
		*out = e->block;
		if (!xdm_use_track_empty(&e->track)) {
			*uses = e->track;
			if (e->track.reads == e->track.inline_reads)
				uses->reads = uses->inline_reads;
		}
		e->next = shard->spare;
		shard->spare = e;
		break;
	}
unlock:
	xdm_spin_unlock(&shard->lock);
	return e != NULL;
}

void xdm_use_track_free(struct xdm_use_track *t)
{
	if (t->reads != t->inline_reads)
		free(t->reads);
	t->reads = t->inline_reads;
	t->nreads = 0;
	t->capreads = XDM_INLINE_READS;
}

void xdm_use_track_move(struct xdm_use_track *dst, struct xdm_use_track *src)
{
	*dst = *src;
	if (src->reads == src->inline_reads)
		dst->reads = dst->inline_reads;
	src->has_write = false;
	src->reads = src->inline_reads;
	src->nreads = 0;
	src->capreads = XDM_INLINE_READS;
}

void xdm_registry_for_each(struct xdm_registry *reg,
			   void (*fn)(const struct xdm_reg_entry *e, void *arg), void *arg)
{
	for (int i = 0; i < XDM_REG_SHARDS; i++) {
		struct xdm_reg_shard *shard = &reg->shards[i];

		xdm_spin_lock(&shard->lock);
		for (size_t b = 0; b < shard->nbuckets; b++)
			for (struct xdm_reg_entry *e = shard->buckets[b]; e; e = e->next)
				fn(e, arg);
		xdm_spin_unlock(&shard->lock);
	}
}

void xdm_registry_drain(struct xdm_registry *reg,
			void (*fn)(struct xdm_reg_entry *e, void *arg), void *arg)
{
	for (int i = 0; i < XDM_REG_SHARDS; i++) {
		struct xdm_reg_shard *shard = &reg->shards[i];
		struct xdm_reg_entry *list = NULL, *e, *next;

		/* Unlink under the lock; call fn without it. */
		xdm_spin_lock(&shard->lock);
		for (size_t b = 0; b < shard->nbuckets; b++) {
			for (e = shard->buckets[b]; e; e = next) {
				next = e->next;
				e->next = list;
				list = e;
			}
			shard->buckets[b] = NULL;
		}
		shard->count = 0;
		xdm_spin_unlock(&shard->lock);
		for (e = list; e; e = next) {
			next = e->next;
			fn(e, arg);
			xdm_spin_lock(&shard->lock);
			e->next = shard->spare;
			shard->spare = e;
			xdm_spin_unlock(&shard->lock);
		}
	}
}

static void free_chain(struct xdm_reg_entry *e, bool tracked)
{
	struct xdm_reg_entry *next;

	for (; e; e = next) {
		next = e->next;
		if (tracked && e->track.reads != e->track.inline_reads)
			free(e->track.reads);
		free(e);
	}
}

/*
 * Entries still live at teardown belong to blocks the caller never freed;
 * their events go back to the pool so that the platform can destroy them.
 */
void xdm_registry_fini(struct xdm_runtime *rt)
{
	struct xdm_registry *reg = &rt->registry;

	for (int i = 0; i < XDM_REG_SHARDS; i++) {
		struct xdm_reg_shard *shard = &reg->shards[i];

		for (size_t b = 0; b < shard->nbuckets; b++) {
			for (struct xdm_reg_entry *e = shard->buckets[b]; e; e = e->next) {
				struct xdm_use_track *t = &e->track;

				if (t->has_write)
					xdm_use_put(rt, &t->last_write);
				for (uint32_t r = 0; r < t->nreads; r++)
					xdm_use_put(rt, &t->reads[r]);
			}
			free_chain(shard->buckets[b], true);
		}
		free_chain(shard->spare, false);
		free(shard->buckets);
		memset(shard, 0, sizeof(*shard));
	}
}

bool xdm_registry_with_generation(struct xdm_registry *reg, xdm_generation generation,
				  void (*fn)(const struct xdm_reg_entry *e, void *arg), void *arg)
{
	struct xdm_reg_shard *shard;
	bool found = false;

	/* The generation names its shard: only that one is searched. */
	shard = &reg->shards[generation & (XDM_REG_SHARDS - 1)];
	xdm_spin_lock(&shard->lock);
	for (size_t b = 0; b < shard->nbuckets && !found; b++) {
		for (struct xdm_reg_entry *e = shard->buckets[b]; e; e = e->next) {
			if (e->block.generation == generation) {
				fn(e, arg);
				found = true;
				break;
			}
		}
	}
	xdm_spin_unlock(&shard->lock);
	return found;
}

bool xdm_registry_with_block(struct xdm_registry *reg, uint64_t ptr, xdm_generation generation,
			     void (*fn)(const struct xdm_reg_entry *e, void *arg), void *arg)
{
	struct xdm_reg_shard *shard = xdm_registry_shard(reg, ptr);
	struct xdm_reg_entry *e;
	bool found;

	xdm_spin_lock(&shard->lock);
	e = xdm_registry_find_locked(shard, ptr);
	found = e && e->block.generation == generation;
	if (found)
		fn(e, arg);
	xdm_spin_unlock(&shard->lock);
	return found;
}
