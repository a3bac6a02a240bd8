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
	struct budget_member m;		/* the segment, this process's slot, its group */
};

static inline struct budget *budget_of(const struct xdm_layer *self)
{
	return xdm_layer_priv_inline(self);
}

/* ---- attrs.c ------------------------------------------------------------ */

extern const struct xdm_attr budget_attrs[];

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
