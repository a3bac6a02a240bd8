/* SPDX-License-Identifier: MIT */
/*
 * credit.c - per-stream credit: bytes a stream has drawn from the shared
 * limit ahead of its allocations.
 *
 * Without credit every allocation and every free is a compare-and-swap on
 * the one shared counter of the device, a cache line that every thread of
 * every process fights for: sixteen threads on sixteen streams then go no
 * faster than one.  With credit=SIZE a stream draws SIZE more than it asked
 * for, hands later allocations out of that draw with one atomic on a line
 * of its own, and keeps what its frees give back up to twice SIZE.
 *
 * The shared counter stays a hard limit: credit is counted in `used`, so no
 * interleaving ever passes the limit.  What credit costs is sharpness: a
 * process may be refused while another holds credit it is not using, at
 * most twice SIZE per stream in use.  Before this process refuses, it
 * returns all of its own credit and asks again exactly, so a process alone
 * on a device is refused when its blocks and the request pass the limit
 * (unless one of its own threads draws credit again in between).
 */
#include "config.h"

#include "budget.h"

static _Atomic uint64_t *credit_of(struct budget *b, xdm_stream_id stream)
{
	return &b->credit[stream].bytes;
}

/* Take n from the stream's credit; false when it holds less. */
static bool credit_take(struct budget *b, xdm_stream_id stream, uint64_t n)
{
	_Atomic uint64_t *c = credit_of(b, stream);
	uint64_t have = atomic_load_explicit(c, memory_order_relaxed);

	while (have >= n)
		if (atomic_compare_exchange_weak_explicit(c, &have, have - n,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return true;
	return false;
}

uint64_t budget_credit_drain(struct budget *b)
{
	uint64_t sum = 0;

	if (!b->credit_max)
		return 0;
	for (unsigned int i = 0; i < XDM_MAX_STREAMS; i++)
		sum += atomic_exchange_explicit(credit_of(b, i), 0, memory_order_relaxed);
	if (sum)
		budget_release(b, sum);
	return sum;
}

uint64_t budget_credit_held(struct budget *b)
{
	uint64_t sum = 0;

	if (!b->credit_max)
		return 0;
	for (unsigned int i = 0; i < XDM_MAX_STREAMS; i++)
		sum += atomic_load_explicit(credit_of(b, i), memory_order_relaxed);
	return sum;
}

bool budget_charge(struct budget *b, xdm_stream_id stream, uint64_t n, uint64_t *remaining)
{
	if (!b->credit_max || n > b->credit_max || stream >= XDM_MAX_STREAMS) {
		if (budget_reserve(b, n, remaining))
			return true;
		goto drain;
	}
	if (credit_take(b, stream, n))
		return true;
	/* Draw this request and a credit's worth more, or at least the request. */
	if (budget_reserve(b, n + b->credit_max, remaining)) {
		atomic_fetch_add_explicit(credit_of(b, stream), b->credit_max,
					  memory_order_relaxed);
		return true;
	}
	if (budget_reserve(b, n, remaining))
		return true;
drain:
	/* Before a refusal, this process's own credit goes back to everyone. */
	if (!budget_credit_drain(b))
		return false;
	return budget_reserve(b, n, remaining);
}

void budget_uncharge(struct budget *b, xdm_stream_id stream, uint64_t n)
{
	_Atomic uint64_t *c;
	uint64_t have;

	if (!b->credit_max || n > b->credit_max || stream >= XDM_MAX_STREAMS) {
		budget_release(b, n);
		return;
	}
	c = credit_of(b, stream);
	have = atomic_fetch_add_explicit(c, n, memory_order_relaxed) + n;
	/* Keep at most twice the credit; the rest goes back to the limit. */
	while (have > 2 * b->credit_max) {
		if (atomic_compare_exchange_weak_explicit(c, &have, b->credit_max,
							  memory_order_relaxed,
							  memory_order_relaxed)) {
			budget_release(b, have - b->credit_max);
			return;
		}
	}
}
