/* SPDX-License-Identifier: MIT */
/*
 * credit.c - per-thread credit: bytes a thread has drawn from the shared
 * limit ahead of its allocations, for a budget layer and for the preload
 * shim alike.
 *
 * Without credit every allocation and every free is an atomic
 * read-modify-write on the one shared counter of the device, a cache line
 * that every thread of every process fights for.  With credit a thread
 * draws more than it asked for and hands its later allocations out of that
 * draw; its frees go back to its credit, which keeps at most twice its
 * size and gives the rest back.  The credit is a record of the thread's
 * own (credit_thread.c) that no other thread writes, so a charge or an
 * uncharge that the credit serves is plain loads and a plain store: no
 * atomic read-modify-write, no shared cache line.  Requests and blocks
 * larger than credit_max go to the shared counter directly.
 *
 * The size of a thread's credit:
 *
 *  - credit=SIZE: fixed, every draw takes SIZE ahead.
 *
 *  - credit=auto (the default): it follows the thread's demand.  A thread
 *    starts with none.  Each draw (a request its credit did not cover)
 *    takes twice the last draw ahead, at first BUDGET_CREDIT_AUTO_MIN and
 *    at least the request, up to BUDGET_CREDIT_AUTO_MAX; so a thread that
 *    allocates N bytes more than it frees meets the segment about log2 N
 *    times on the way up, and then once per 16M.  A draw never takes more
 *    ahead than 1/16 of the room the limit (and the group's) has beside the
 *    request: near the limit the credit shrinks with the room, and
 *    however many threads draw one after another, their credit never
 *    fills what is left.  When a free would make the credit more than
 *    twice its size (demand fell), the size halves, not below the
 *    minimum, and the credit keeps that much.  A thread asked for its
 *    credit back, or refused, starts again from none.
 *
 *    Why these numbers: 64K is sixteen 4K blocks per draw, the smallest
 *    that takes a pair-per-call thread off the shared line at once; 16M
 *    is what makes a thread of 1M blocks draw once per sixteen, and it
 *    bounds what a thread holds unused to 32M, a sliver of a GPU; 1/16 of
 *    the room keeps sixteen threads' draws, the most that commonly run,
 *    under two thirds of it.
 *
 * The shared counter stays a hard limit: credit is counted in `used`, so
 * no interleaving ever passes the limit.  What credit costs is sharpness.
 * Before this process refuses, the refusing thread gives back its own
 * credit and asks again for exactly the request (threads that exited gave
 * theirs back on the way out), so a process with one thread alone on a
 * device is refused exactly when its blocks and the request pass the limit.
 * Another live thread's credit cannot be taken without an atomic on its
 * every call: the refusing thread sets that thread's drain flag instead,
 * and the owner, which reads the flag with a plain load on each charge and
 * uncharge, gives all its credit back on its next call.  So a refusal may
 * come while at most twice its credit's size is held, unused, by each
 * other thread of this process that has charged or uncharged through this
 * layer and not called since it was asked, and by each thread of the
 * other processes on the device (which are not asked).  A thread that
 * honours a request keeps nothing and draws ahead again on a later call
 * only where the limit has room for the request and its credit.
 *
 * Only the owner writes its record: a call from a signal handler that
 * interrupted its own thread between the load and the store would lose an
 * update (the core's registry takes spinlocks on the same path: no call
 * into a runtime is signal-safe).
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "lib/budget_segment/segment.h"

enum xdm_status budget_credit_use(struct budget_account *b, const char *who, const char *text)
{
	uint64_t size;

	if (!text || !*text || strcmp(text, "auto") == 0) {
		b->credit_auto = true;
		b->credit_max = BUDGET_CREDIT_AUTO_MAX;
		return XDM_OK;
	}
	if (xdm_parse_size(text, b->m.device_total, &size) != XDM_OK)
		return xdm_error_set(XDM_E_CONFIG, "%s: credit must be auto, 0 or a size "
				     "(like 64K or 1M), not '%s'", who, text);
	if (size > BUDGET_CREDIT_MAX)
		return xdm_error_set(XDM_E_CONFIG,
				     "%s: credit must be at most 1G, not %" PRIu64, who, size);
	b->credit_auto = false;
	b->credit_max = size;
	return XDM_OK;
}

static uint64_t load(const _Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static void store(_Atomic uint64_t *v, uint64_t value)
{
	atomic_store_explicit(v, value, memory_order_relaxed);
}

/* The calling thread's record, claimed on its first call; NULL without memory. */
static struct budget_credit *thread_record(struct budget_account *b)
{
	struct budget_credit *c = budget_credit_mine(b);

	return c ? c : budget_credit_claim(b);
}

static bool asked_back(const struct budget_credit *c)
{
	return __builtin_expect(atomic_load_explicit(&c->drain, memory_order_relaxed), 0);
}

/*
 * The size a record's credit has now.  credit=SIZE writes it on every slow
 * call: a forked child's record reads 0 (credit_thread.c) until its thread
 * next meets the segment.
 */
static uint64_t size_of(struct budget_account *b, struct budget_credit *c)
{
	if (b->credit_auto)
		return load(&c->size);
	if (load(&c->size) != b->credit_max)
		store(&c->size, b->credit_max);
	return b->credit_max;
}

/* The owner gives back all it holds, with extra bytes (a free's) if any. */
static void give_back(struct budget_account *b, struct budget_credit *c, uint64_t extra)
{
	uint64_t have = load(&c->bytes) + extra;

	atomic_store_explicit(&c->drain, 0, memory_order_relaxed);
	store(&c->bytes, 0);
	/* Auto credit starts again from none: its thread met the limit. */
	if (b->credit_auto)
		store(&c->size, 0);
	if (have)
		budget_release(&b->m, have);
}

/*
 * How much a draw for n takes ahead: credit=SIZE, SIZE; credit=auto, twice
 * the last draw (at least BUDGET_CREDIT_AUTO_MIN and n, at most
 * BUDGET_CREDIT_AUTO_MAX), cut to a share of the room beside n.  The room
 * is a sample: the draw itself is still checked against the limit.
 */
static uint64_t ahead_of(struct budget_account *b, struct budget_credit *c, uint64_t n)
{
	uint64_t size, want, left;

	if (!b->credit_auto)
		return size_of(b, c);
	size = load(&c->size);
	want = size ? 2 * size : BUDGET_CREDIT_AUTO_MIN;
	if (want < n)
		want = n;
	if (want > BUDGET_CREDIT_AUTO_MAX)
		want = BUDGET_CREDIT_AUTO_MAX;
	left = budget_member_room(&b->m);
	left = left > n ? (left - n) >> BUDGET_CREDIT_AUTO_SHARE : 0;
	return want < left ? want : left;
}

/*
 * The last try before a refusal: the caller's own credit goes back, every
 * other thread holding credit is asked for its own, and the request is
 * asked for once more, exactly.
 */
static bool charge_last_try(struct budget_account *b, uint64_t n, uint64_t *remaining)
{
	struct budget_credit *own;

	if (!b->credit_max)
		return false;
	own = budget_credit_mine(b);
	if (own)
		give_back(b, own, 0);
	budget_credit_ask_back(b, own);
	return budget_reserve(&b->m, n, remaining);
}

/* Asked for its credit back: keep none, and draw nothing ahead this time. */
static bool charge_asked_back(struct budget_account *b, struct budget_credit *c, uint64_t n,
			      uint64_t *remaining)
{
	uint64_t have = load(&c->bytes);

	if (have >= n) {
		/* n of it is the request's, the rest goes back. */
		store(&c->bytes, have - n);
		give_back(b, c, 0);
		return true;
	}
	give_back(b, c, 0);
	return budget_reserve(&b->m, n, remaining) || charge_last_try(b, n, remaining);
}

/* Everything but a charge that the thread's credit covers (budget.h). */
bool budget_charge_slow(struct budget_account *b, uint64_t n, uint64_t *remaining)
{
	struct budget_credit *c;
	uint64_t have, ahead;

	if (!b->credit_max)
		goto exact;
	if (n > b->credit_max) {
		/* Past the credit, but a request to give it back is still heard. */
		c = budget_credit_mine(b);
		if (c && asked_back(c))
			give_back(b, c, 0);
		goto exact;
	}
	c = thread_record(b);
	if (!c)
		goto exact;
	if (asked_back(c))
		return charge_asked_back(b, c, n, remaining);
	have = load(&c->bytes);
	if (have >= n) {
		/* Auto credit covers a request above its size, too. */
		store(&c->bytes, have - n);
		return true;
	}
	/*
	 * Draw what the request lacks and the credit ahead, or at least the
	 * request: the thread then holds exactly ahead.  What it had counts
	 * toward the draw rather than on top of it, so that a free of the
	 * request's size finds room within twice the size; drawn on top, a
	 * thread alternating blocks of n (a pair) would pass twice its size
	 * at each free, halve, and go to the segment at every call.
	 */
	ahead = ahead_of(b, c, n);
	if (ahead && budget_reserve(&b->m, n - have + ahead, remaining)) {
		store(&c->bytes, ahead);
		store(&c->size, ahead);
		return true;
	}
exact:
	return budget_reserve(&b->m, n, remaining) || charge_last_try(b, n, remaining);
}

/*
 * A free that would leave the credit more than twice its size: demand
 * fell.  credit=SIZE keeps SIZE; auto credit halves its size (not below
 * the minimum) and keeps at most that.  The rest goes back to the limit.
 */
static void uncharge_overflow(struct budget_account *b, struct budget_credit *c, uint64_t have)
{
	uint64_t size = size_of(b, c), keep;

	if (b->credit_auto) {
		size /= 2;
		if (size < BUDGET_CREDIT_AUTO_MIN)
			size = BUDGET_CREDIT_AUTO_MIN;
		store(&c->size, size);
	}
	keep = have < size ? have : size;
	store(&c->bytes, keep);
	if (have > keep)
		budget_release(&b->m, have - keep);
}

/* Everything but an uncharge that the thread's credit keeps whole (budget.h). */
void budget_uncharge_slow(struct budget_account *b, uint64_t n)
{
	struct budget_credit *c;
	uint64_t have;

	if (!b->credit_max) {
		budget_release(&b->m, n);
		return;
	}
	if (n > b->credit_max) {
		c = budget_credit_mine(b);
		if (c && asked_back(c))
			give_back(b, c, 0);
		budget_release(&b->m, n);
		return;
	}
	c = thread_record(b);
	if (!c) {
		budget_release(&b->m, n);
		return;
	}
	if (asked_back(c)) {
		give_back(b, c, n);
		return;
	}
	have = load(&c->bytes) + n;
	if (have > 2 * size_of(b, c)) {
		uncharge_overflow(b, c, have);
		return;
	}
	store(&c->bytes, have);
}
