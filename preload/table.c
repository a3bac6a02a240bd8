/* SPDX-License-Identifier: MIT */
/*
 * table.c - the live allocations: what each pointer or handle was charged,
 * and to which device, so that its free gives back exactly that.
 *
 * An open-addressing hash table of fixed size, without a lock: a thread
 * claims an entry by compare-and-swap of its key to BUSY, writes what it
 * records, then publishes the key (release).  Removal claims the entry the
 * same way and leaves a tombstone, which a later insertion reuses.  So a
 * fork child never inherits a held lock, a signal handler that allocates
 * cannot deadlock on one, and threads that allocate on different devices
 * share nothing but the entries they touch.  A lookup probes no further
 * than the longest probe an insertion ever needed.
 *
 * The table is one anonymous mapping, reserved at the first allocation and
 * touched only where entries land.  An insertion that finds no free entry
 * within PRELOAD_TABLE_PROBES of its home fails, and the caller stops
 * counting that allocation (hooks.c): the table is then crowded far past
 * what any program we know of holds (2^20 entries).  Nothing counts the
 * live entries: that would be a shared read-modify-write on every call.
 */
#include "config.h"

#include <stddef.h>
#include <sys/mman.h>

#include "preload/preload.h"

#define PRELOAD_TABLE_BITS 20
#define PRELOAD_TABLE_SIZE (1u << PRELOAD_TABLE_BITS)
#define PRELOAD_TABLE_PROBES 256

/* Keys no pointer or handle takes. */
#define KEY_EMPTY 0ull
#define KEY_BUSY (~0ull)
#define KEY_TOMB (~0ull - 1)

/* The payload is atomic too: a reader may look at an entry being reused. */
struct entry {
	_Atomic uint64_t key;
	_Atomic uint64_t bytes;
	_Atomic uint32_t device;
	_Atomic uint32_t kind;
};

static uint32_t kind_of(struct entry *e)
{
	return atomic_load_explicit(&e->kind, memory_order_relaxed);
}

struct table {
	_Atomic(struct entry *) entries;
	_Atomic uint32_t max_probe;
};

static struct table table;

static struct entry *entries(bool make)
{
	struct entry *e = atomic_load_explicit(&table.entries, memory_order_acquire), *fresh;

	if (e || !make)
		return e;
	fresh = mmap(NULL, PRELOAD_TABLE_SIZE * sizeof(*fresh), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (fresh == MAP_FAILED)
		return NULL;
	if (atomic_compare_exchange_strong_explicit(&table.entries, &e, fresh,
						    memory_order_acq_rel, memory_order_acquire))
		return fresh;
	munmap(fresh, PRELOAD_TABLE_SIZE * sizeof(*fresh));
	return e;
}

/* Device addresses are aligned: mix the bits above the alignment. */
static uint32_t home(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - PRELOAD_TABLE_BITS));
}

static void probe_seen(uint32_t probe)
{
	uint32_t max = atomic_load_explicit(&table.max_probe, memory_order_relaxed);

	while (probe > max &&
	       !atomic_compare_exchange_weak_explicit(&table.max_probe, &max, probe,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

bool preload_track(uint64_t key, enum preload_kind kind, uint64_t bytes, unsigned int device)
{
	struct entry *t = entries(true);
	uint32_t h = home(key);

	if (!t || key == KEY_EMPTY || key >= KEY_TOMB)
		return false;
	for (uint32_t probe = 0; probe < PRELOAD_TABLE_PROBES; probe++) {
		struct entry *e = &t[(h + probe) & (PRELOAD_TABLE_SIZE - 1)];
		uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);

		if (k != KEY_EMPTY && k != KEY_TOMB)
			continue;
		if (!atomic_compare_exchange_strong_explicit(&e->key, &k, KEY_BUSY,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		atomic_store_explicit(&e->bytes, bytes, memory_order_relaxed);
		atomic_store_explicit(&e->device, device, memory_order_relaxed);
		atomic_store_explicit(&e->kind, kind, memory_order_relaxed);
		probe_seen(probe);
		atomic_store_explicit(&e->key, key, memory_order_release);
		return true;
	}
	return false;
}

bool preload_untrack(uint64_t key, enum preload_kind kind, uint64_t *bytes,
		     unsigned int *device)
{
	struct entry *t = entries(false);
	uint32_t h = home(key), max;

	if (!t || key == KEY_EMPTY || key >= KEY_TOMB)
		return false;
	max = atomic_load_explicit(&table.max_probe, memory_order_acquire);
	for (uint32_t probe = 0; probe <= max; probe++) {
		struct entry *e = &t[(h + probe) & (PRELOAD_TABLE_SIZE - 1)];
		uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);

		if (k == KEY_EMPTY)
			return false;
		if (k != key || kind_of(e) != (uint32_t)kind)
			continue;
		if (!atomic_compare_exchange_strong_explicit(&e->key, &k, KEY_BUSY,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		/* Removed and recorded again between the read and the claim. */
		if (kind_of(e) != (uint32_t)kind) {
			atomic_store_explicit(&e->key, key, memory_order_release);
			continue;
		}
		*bytes = atomic_load_explicit(&e->bytes, memory_order_relaxed);
		*device = atomic_load_explicit(&e->device, memory_order_relaxed);
		atomic_store_explicit(&e->key, KEY_TOMB, memory_order_release);
		return true;
	}
	return false;
}
