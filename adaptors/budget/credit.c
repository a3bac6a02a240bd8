/* SPDX-License-Identifier: MIT */
/*
 * credit.c - per-thread credit: bytes a thread has drawn from the shared
 * limit ahead of its allocations.
 *
 * Without credit every allocation and every free is an atomic
 * read-modify-write on the one shared counter of the device, a cache line
 * that every thread of every process fights for.  With credit=SIZE a
 * thread draws SIZE more than it asked for and hands its later allocations
 * out of that draw; its frees go back to its credit, which keeps at most
 * twice SIZE and gives the rest back.  The credit is a record of the
 * thread's own (credit_thread.c) that no other thread writes, so a charge
 * or an uncharge that the credit serves is a plain load and a plain store:
 * no atomic read-modify-write, no shared cache line.  Requests and blocks
 * larger than SIZE go to the shared counter directly.
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
 * come while at most twice SIZE is held, unused, by each other thread of
 * this process that has charged or uncharged through this layer and not
 * called since it was asked, and by each thread of the other processes on
 * the device (which are not asked).  A thread that honours a request keeps
 * nothing and draws again on a later call only where the limit has room
 * for the request and a whole credit more.
 *
 * Only the owner writes its record: a call from a signal handler that
 * interrupted its own thread between the load and the store would lose an
 * update (the core's registry takes spinlocks on the same path: no call
 * into a runtime is signal-safe).
 */
#include "config.h"

#include "budget.h"

static uint64_t load(const _Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static void store(_Atomic uint64_t *v, uint64_t value)
{
	atomic_store_explicit(v, value, memory_order_relaxed);
}

/* The calling thread's record, claimed on its first call; NULL without memory. */
static struct budget_credit *thread_record(struct budget *b)
{
	struct budget_credit *c = pthread_getspecific(b->credit_key);

	return c ? c : budget_credit_claim(b);
}

static bool asked_back(const struct budget_credit *c)
{
	return __builtin_expect(atomic_load_explicit(&c->drain, memory_order_relaxed), 0);
}

/* The owner gives back all it holds, with extra bytes (a free's) if any. */
static void give_back(struct budget *b, struct budget_credit *c, uint64_t extra)
{
	uint64_t have = load(&c->bytes) + extra;

	atomic_store_explicit(&c->drain, 0, memory_order_relaxed);
	store(&c->bytes, 0);
	if (have)
		budget_release(b, have);
}

/*
 * The last try before a refusal: the caller's own credit goes back, every
 * other thread holding credit is asked for its own, and the request is
 * asked for once more, exactly.
 */
static bool charge_last_try(struct budget *b, uint64_t n, uint64_t *remaining)
{
	struct budget_credit *own;

	if (!b->credit_max)
		return false;
	own = pthread_getspecific(b->credit_key);
	if (own)
		give_back(b, own, 0);
	budget_credit_ask_back(b, own);
	return budget_reserve(b, n, remaining);
}

/* Asked for its credit back: keep none, and draw nothing ahead this time. */
static bool charge_asked_back(struct budget *b, struct budget_credit *c, uint64_t n,
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
	return budget_reserve(b, n, remaining) || charge_last_try(b, n, remaining);
}

/* Everything but a charge that the thread's credit covers (budget.h). */
bool budget_charge_slow(struct budget *b, uint64_t n, uint64_t *remaining)
{
	struct budget_credit *c;
	uint64_t have;

	if (!b->credit_max)
		goto exact;
	if (n > b->credit_max) {
		/* Past the credit, but a request to give it back is still heard. */
		c = pthread_getspecific(b->credit_key);
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
		store(&c->bytes, have - n);
		return true;
	}
	/* Draw this request and a credit's worth more, or at least the request. */
	if (budget_reserve(b, n + b->credit_max, remaining)) {
		store(&c->bytes, have + b->credit_max);
		return true;
	}
exact:
	return budget_reserve(b, n, remaining) || charge_last_try(b, n, remaining);
}

/* Everything but an uncharge that the thread's credit keeps whole (budget.h). */
void budget_uncharge_slow(struct budget *b, uint64_t n)
{
	struct budget_credit *c;
	uint64_t have;

	if (!b->credit_max) {
		budget_release(b, n);
		return;
	}
	if (n > b->credit_max) {
		c = pthread_getspecific(b->credit_key);
		if (c && asked_back(c))
			give_back(b, c, 0);
		budget_release(b, n);
		return;
	}
	c = thread_record(b);
	if (!c) {
		budget_release(b, n);
		return;
	}
	if (asked_back(c)) {
		give_back(b, c, n);
		return;
	}
	have = load(&c->bytes) + n;
	/* Keep at most twice the credit; the rest goes back to the limit. */
	if (have > 2 * b->credit_max) {
		store(&c->bytes, b->credit_max);
		budget_release(b, have - b->credit_max);
		return;
	}
	store(&c->bytes, have);
}
