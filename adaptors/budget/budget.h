/* SPDX-License-Identifier: MIT */
/*
 * budget.h - what the files of the budget adaptor share: the layer's state
 * and the accounting on the allocation path.
 */
#ifndef XDM_BUDGET_H
#define XDM_BUDGET_H

#include <limits.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <xdm/module.h>

#include "lib/budget_segment/segment.h"

/*
 * A thread's credit on one budget layer, on a cache line of its own
 * (credit.c, credit_thread.c).  Only its thread writes bytes and size,
 * with relaxed loads and stores; others read them.  drain is set by a
 * thread about to be refused, and cleared by the owner when it gives its
 * credit back.  A line without a thread holds 0 bytes.
 */
struct budget_credit {
	alignas(64) _Atomic uint64_t bytes;	/* drawn from the usage, not handed out */
	_Atomic uint64_t size;			/* the credit's size now (credit.c) */
	_Atomic uint32_t drain;			/* another thread asks for it back */
};

struct budget_credit_book;

/* The state of one budget layer; nothing of it lives in globals. */
struct budget {
	/* The largest request or block that credit serves: credit=SIZE, or
	 * BUDGET_CREDIT_AUTO_MAX with credit=auto; 0 (credit=0): none, every
	 * call goes to the segment. */
	uint64_t credit_max;
	bool credit_auto;		/* credit=auto: each thread's size adapts */
	pthread_key_t credit_key;	/* a thread's struct budget_credit, with credit */
	uint64_t serial;		/* xdm_layer_serial: the key of budget_credit_last */
	struct xdm_layer *upstream;	/* fixed at init: no call to ask per pair */
	bool credit_key_made;		/* credit_key exists until fini */
	/* pages of records, pushed and never popped until fini */
	_Atomic(struct budget_credit_book *) credit_books;
	struct budget_shm *shm;		/* the mapped segment */
	struct budget_slot *slot;	/* this process's row of it */
	struct budget_group *group;	/* its group, or NULL */
	int fd;				/* the segment file: holds the slot's lock */
	unsigned int slot_index;
	uint64_t configured_limit;	/* limit= of this layer */
	uint64_t group_limit;		/* group_limit= (UINT64_MAX: the device's) */
	uint64_t device_total;		/* the base of % in limit writes */
	bool reset_stale;		/* attach found a segment of dead owners */
	/* Who attached, for the slot (segment.h). */
	pid_t pid;
	uint64_t start_time;
	uint64_t pidns;
	char comm[BUDGET_COMM_MAX];
	char container[BUDGET_CONTAINER_MAX];
	char group_name[BUDGET_GROUP_NAME_MAX];	/* "": in no group */
	char name[BUDGET_NAME_MAX];	/* "/xdm-budget-<key>" */
	char dir[PATH_MAX];		/* where the segment is */
	char path[PATH_MAX];		/* dir and name */
	char uuid[40];			/* the device, for messages */
};

static inline struct budget *budget_of(const struct xdm_layer *self)
{
	return xdm_layer_priv_inline(self);
}

/* ---- faults.c: kill points, in the test build only ---------------------- */

/*
 * The steps at which a process may die in the middle of changing the
 * accounting.  The test build of this module (tests/faults/budget.so,
 * compiled with XDM_BUDGET_FAULTS) stops itself with SIGSTOP at the step
 * named by $XDM_BUDGET_FAULT, so that a test can look at the segment in
 * that state and then kill the process there; the installed module has no
 * trace of it.
 */
enum budget_step {
	BUDGET_STEP_NONE,
	BUDGET_STEP_RESERVE_BEGUN,	/* begun counted, nothing changed */
	BUDGET_STEP_RESERVE_SHARED,	/* the shared usage has the bytes */
	BUDGET_STEP_RESERVE_GROUP,	/* ... and the group's usage */
	BUDGET_STEP_RESERVE_SLOT,	/* ... and the slot has them */
	BUDGET_STEP_RELEASE_BEGUN,
	BUDGET_STEP_RELEASE_SLOT,	/* the slot gave them back */
	BUDGET_STEP_RELEASE_GROUP,	/* ... and the group's usage */
	BUDGET_STEP_RELEASE_SHARED,	/* ... and the shared usage */
	/* A slot emptied: begun, the slot, its group, the shared usage. */
	BUDGET_STEP_DETACH_BEGUN,	/* the last detach, under the lock */
	BUDGET_STEP_DETACH_SLOT,
	BUDGET_STEP_DETACH_GROUP,
	BUDGET_STEP_DETACH_SHARED,
	BUDGET_STEP_RECLAIM_BEGUN,	/* a reclaimer emptying a dead slot */
	BUDGET_STEP_RECLAIM_SLOT,
	BUDGET_STEP_RECLAIM_GROUP,
	BUDGET_STEP_RECLAIM_SHARED,
	BUDGET_STEP_SETTLE_SHARED,	/* a settlement subtracted, slots not freed */
	BUDGET_STEP_COUNT
};

#ifdef XDM_BUDGET_FAULTS
void budget_fault_at(enum budget_step step);
#define BUDGET_STEP(step) budget_fault_at(step)
#else
#define BUDGET_STEP(step) ((void)0)
#endif

/* ---- segment.c: the segment's life -------------------------------------- */

/* Map (creating if need be) and attach; fills b->shm, b->slot. */
enum xdm_status budget_attach(struct budget *b);
/* Detach; the last process out unlinks the segment. */
void budget_detach(struct budget *b);

/* ---- validate.c: a segment is trusted only once it looks like one ------ */

/*
 * Under the lock, at attach: the header's and the slots' invariants, the
 * limit's check word, and (at a quiet moment) a usage that covers every
 * live slot.  XDM_OK, or XDM_E_CONFIG with a sentence naming the segment
 * and what is wrong with it.
 */
enum xdm_status budget_validate_locked(const struct budget *b, struct budget_shm *s);

/* ---- reclaim.c: dead processes ----------------------------------------- */

/*
 * Under the segment's lock: empty every slot of a dead process into the
 * shared usage (and its group's).  fd is the caller's open segment file
 * and own its slot (alive, whatever its lock says through fd), or NULL.
 * Returns the bytes given back; *live counts the slots left, *dead those
 * cleared (either may be NULL).
 */
uint64_t budget_reclaim_locked(struct budget_shm *s, int fd, const struct budget_slot *own,
			       unsigned int *live, unsigned int *dead);
/* Which slots' processes run, by their locks (budget_reclaim_locked's rule). */
void budget_slots_alive(struct budget_shm *s, int fd, const struct budget_slot *own,
			bool alive[BUDGET_SLOTS]);
/*
 * Empty a slot into its group's usage and the shared usage, bracketed as
 * a change (segment.h); first names the BEGUN step of the caller's four
 * fault steps.  Returns the bytes given back.
 */
uint64_t budget_slot_empty(struct budget_shm *s, struct budget_slot *slot, enum budget_step first);
/* Under the lock: a slot leaves its group, which is freed with its last member. */
void budget_group_leave(struct budget_shm *s, struct budget_slot *slot);
/* How long a reclaim looks for a quiet moment before it leaves a dead slot
 * to the next scan: it holds the lock meanwhile. */
#define BUDGET_SETTLE_NS 2000000ull
/* The usages, and what the live slots hold of them, at one quiet moment. */
struct budget_quiet {
	uint64_t used, live;
	uint64_t group_used[BUDGET_GROUPS], group_live[BUDGET_GROUPS];
};
/* Whether no live slot is inside a change: then *q. */
bool budget_quiet_usage(struct budget_shm *s, const bool *alive, struct budget_quiet *q);
/* used -= min(n, used): for paths that may meet a leak, never the hot one. */
void budget_sub_clamped(_Atomic uint64_t *counter, uint64_t n);

/* A refusal rescans for dead processes only this long after the last scan. */
#define BUDGET_RESCAN_NS 1000000ull

/* ---- attrs.c ------------------------------------------------------------ */

extern const struct xdm_attr budget_attrs[];

/* ---- the allocation path ------------------------------------------------ */

/*
 * Bracket a change of a slot's used and the shared usage (segment.h): begun
 * before, done after.  The changes themselves are release operations, so
 * a reclaimer that reads one with acquire and then reads begun again sees
 * the begun that came before it (a seqlock's writer side, without a fence:
 * ThreadSanitizer cannot follow fences); done's release publishes the
 * change before the count.
 */
static inline void budget_slot_begin(struct budget_slot *slot)
{
	atomic_fetch_add_explicit(&slot->begun, 1, memory_order_relaxed);
}

static inline void budget_slot_end(struct budget_slot *slot)
{
	atomic_fetch_add_explicit(&slot->done, 1, memory_order_release);
}

/*
 * Add n to a usage unless that passes its limit: a compare-and-swap loop
 * that never lets it pass, so that no interleaving of any processes ever
 * has the device (or a group) over its budget.  false with what remains.
 */
static inline bool budget_usage_take(_Atomic uint64_t *usage, _Atomic uint64_t *limitp,
				     uint64_t n, uint64_t *remaining)
{
	uint64_t used = atomic_load_explicit(usage, memory_order_relaxed), limit;

	do {
		limit = atomic_load_explicit(limitp, memory_order_relaxed);
		if (used > limit || n > limit - used) {
			*remaining = used > limit ? 0 : limit - used;
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(usage, &used, used + n,
							memory_order_release,
							memory_order_relaxed));
	return true;
}

/* A peak raised to used (it shares used's cache line: cheap). */
static inline void budget_peak_raise(_Atomic uint64_t *peakp, _Atomic uint64_t *usage)
{
	uint64_t used = atomic_load_explicit(usage, memory_order_relaxed);
	uint64_t peak = atomic_load_explicit(peakp, memory_order_relaxed);

	while (used > peak &&
	       !atomic_compare_exchange_weak_explicit(peakp, &peak, used, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/*
 * Reserve n bytes: the device's usage, then the group's (undone if the
 * group has no room), then the process's own slot, which is what a
 * reclaimer gives back if this process dies.  A death between them is
 * settled by the reclaimer (the slot's begun and done disagree).
 */
static inline bool budget_reserve(struct budget *b, uint64_t n, uint64_t *remaining)
{
	struct budget_shm *s = b->shm;
	struct budget_group *g = b->group;
	uint64_t left;

	budget_slot_begin(b->slot);
	BUDGET_STEP(BUDGET_STEP_RESERVE_BEGUN);
	if (!budget_usage_take(&s->used, &s->limit, n, remaining)) {
		budget_slot_end(b->slot);
		return false;
	}
	BUDGET_STEP(BUDGET_STEP_RESERVE_SHARED);
	if (g && !budget_usage_take(&g->used, &g->limit, n, &left)) {
		atomic_fetch_sub_explicit(&s->used, n, memory_order_release);
		budget_slot_end(b->slot);
		*remaining = left;
		return false;
	}
	BUDGET_STEP(BUDGET_STEP_RESERVE_GROUP);
	atomic_fetch_add_explicit(&b->slot->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RESERVE_SLOT);
	budget_slot_end(b->slot);

	budget_peak_raise(&s->peak, &s->used);
	if (g)
		budget_peak_raise(&g->peak, &g->used);
	return true;
}

/* The mirror of budget_reserve: the slot first, then the group, then the device. */
static inline void budget_release(struct budget *b, uint64_t n)
{
	struct budget_shm *s = b->shm;

	budget_slot_begin(b->slot);
	BUDGET_STEP(BUDGET_STEP_RELEASE_BEGUN);
	atomic_fetch_sub_explicit(&b->slot->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RELEASE_SLOT);
	if (b->group)
		atomic_fetch_sub_explicit(&b->group->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RELEASE_GROUP);
	atomic_fetch_sub_explicit(&s->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RELEASE_SHARED);
	budget_slot_end(b->slot);
}

/* ---- credit.c and credit_thread.c: per-thread credit ------------------- */

/* Keeps credit + request and twice the credit far from overflowing. */
#define BUDGET_CREDIT_MAX (1ull << 30)

/*
 * credit=auto (credit.c says why these): a thread's first draw takes
 * BUDGET_CREDIT_AUTO_MIN ahead, each later one twice the last, up to
 * BUDGET_CREDIT_AUTO_MAX, and never more than a 2^-BUDGET_CREDIT_AUTO_SHARE
 * share of the room the limit has left beside the request.
 */
#define BUDGET_CREDIT_AUTO_MIN (64ull << 10)
#define BUDGET_CREDIT_AUTO_MAX (16ull << 20)
#define BUDGET_CREDIT_AUTO_SHARE 4

bool budget_charge_slow(struct budget *b, uint64_t n, uint64_t *remaining);
void budget_uncharge_slow(struct budget *b, uint64_t n);

/* The record the calling thread last used (module.h, xdm_thread_last). */
extern _Thread_local struct xdm_thread_last budget_credit_last;

/* The calling thread's record through the key, or NULL (credit_thread.c). */
struct budget_credit *budget_credit_find(struct budget *b);

/* The calling thread's record, or NULL before its first call with credit. */
static inline struct budget_credit *budget_credit_mine(struct budget *b)
{
	struct budget_credit *c = xdm_thread_last_get(&budget_credit_last, b->serial);

	return c ? c : budget_credit_find(b);
}

/*
 * Reserve n for an allocation: from the calling thread's credit, or the
 * segment.  Inline, the case the credit covers: plain loads and a store on
 * the thread's own line, no atomic read-modify-write and no shared line
 * (credit.c says why that is enough, and does everything else).
 */
static inline bool budget_charge(struct budget *b, uint64_t n, uint64_t *remaining)
{
	struct budget_credit *c;
	uint64_t have;

	if (b->credit_max) {
		c = budget_credit_mine(b);
		if (c && n <= atomic_load_explicit(&c->size, memory_order_relaxed) &&
		    !atomic_load_explicit(&c->drain, memory_order_relaxed)) {
			have = atomic_load_explicit(&c->bytes, memory_order_relaxed);
			if (have >= n) {
				atomic_store_explicit(&c->bytes, have - n, memory_order_relaxed);
				return true;
			}
		}
	}
	return budget_charge_slow(b, n, remaining);
}

/*
 * Give n back from a block: to the calling thread's credit while it keeps
 * at most twice its size, or the segment.
 */
static inline void budget_uncharge(struct budget *b, uint64_t n)
{
	struct budget_credit *c;
	uint64_t have, size;

	if (b->credit_max) {
		c = budget_credit_mine(b);
		if (c) {
			size = atomic_load_explicit(&c->size, memory_order_relaxed);
			have = atomic_load_explicit(&c->bytes, memory_order_relaxed) + n;
			if (n <= size && have <= 2 * size &&
			    !atomic_load_explicit(&c->drain, memory_order_relaxed)) {
				atomic_store_explicit(&c->bytes, have, memory_order_relaxed);
				return;
			}
		}
	}
	budget_uncharge_slow(b, n);
}

/* With credit: the key and the first page of records. */
enum xdm_status budget_credit_init(struct budget *b);
/* Every thread's credit back to the segment, the records freed. */
void budget_credit_fini(struct budget *b);
/* The calling thread's first record; NULL without memory. */
struct budget_credit *budget_credit_claim(struct budget *b);
/* Bytes of credit held now, summed over the threads' records. */
uint64_t budget_credit_held(struct budget *b);
/* Ask every other thread that holds credit (mine is the caller's record,
 * or NULL) to give it back on its next call. */
void budget_credit_ask_back(struct budget *b, const struct budget_credit *mine);

#endif /* XDM_BUDGET_H */
