/* SPDX-License-Identifier: MIT */
/*
 * live.c - the guard's table of live blocks, keyed by the caller's address.
 *
 * deallocate must find the record of the block it is given, and the check
 * attribute must visit every live block: a chained hash table does both.
 * The caller holds the guard's lock.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "adaptors/guard/guard.h"

#define GUARD_TABLE_MIN 64

/* Blocks are at least 256-aligned: the low bits carry nothing. */
static size_t bucket_of(uint64_t ptr, size_t nbuckets)
{
	uint64_t h = (ptr >> 8) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (nbuckets - 1);
}

int guard_table_init(struct guard_table *t)
{
	t->buckets = calloc(GUARD_TABLE_MIN, sizeof(*t->buckets));
	if (!t->buckets)
		return ENOMEM;
	t->nbuckets = GUARD_TABLE_MIN;
	t->count = 0;
	return 0;
}

void guard_table_destroy(struct guard_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->nbuckets = 0;
	t->count = 0;
}

static void table_grow(struct guard_table *t)
{
	size_t n = t->nbuckets * 2;
	struct guard_block **nb;

	if (n < t->nbuckets)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct guard_block *b = t->buckets[i], *next;

		for (; b; b = next) {
			size_t k = bucket_of(b->ptr, n);

			next = b->hash_next;
			b->hash_next = nb[k];
			nb[k] = b;
		}
	}
	free(t->buckets);
	t->buckets = nb;
	t->nbuckets = n;
}

void guard_table_insert(struct guard_table *t, struct guard_block *b)
{
	size_t k;

	if (t->count >= t->nbuckets)
		table_grow(t);
	k = bucket_of(b->ptr, t->nbuckets);
	b->hash_next = t->buckets[k];
	t->buckets[k] = b;
	t->count++;
}

struct guard_block *guard_table_remove(struct guard_table *t, uint64_t ptr)
{
	struct guard_block **link = &t->buckets[bucket_of(ptr, t->nbuckets)];

	for (; *link; link = &(*link)->hash_next) {
		struct guard_block *b = *link;

		if (b->ptr == ptr) {
			*link = b->hash_next;
			b->hash_next = NULL;
			t->count--;
			return b;
		}
	}
	return NULL;
}
