/* SPDX-License-Identifier: MIT */
/*
 * checker.c - the guard's own thread, which reads freed blocks back once
 * they leave the quarantine, judges them and frees them upstream.
 *
 * Reading device memory back means a copy to the host and a wait for the
 * block's stream.  Done at every free, that wait was most of what a pair
 * through the guard cost (tens of microseconds on a GPU, a hand-off to the
 * stream's worker and back on the host platform), and it stalled the
 * caller behind all the work queued on its stream.  Here it costs no
 * caller anything: the thread takes the blocks that left the FIFO in
 * batches, queues one copy of each block's guarded range (its canaries
 * and its poisoned bytes, contiguous) on the block's stream, synchronizes
 * each stream of the batch once, and compares.  Each copy is ordered after
 * the poison and after every write queued before the free, and the block
 * goes back upstream only after its comparison, so its memory is never
 * reused before it was checked.
 *
 * What a check finds is counted at once (violations, last_violation) and
 * kept as the guard's report, which the next deallocate or reap_pending
 * through the guard returns: a finding reaches a caller later than the
 * free it concerns, still naming the block by generation and tag.
 *
 * A caller that must wait for a check (its free would pass the limits,
 * its block passes straight through, or it reaps) does not wait idle: it
 * takes a batch of the pending list and checks it itself, so that when
 * many threads free faster than one checker can read back, the checking
 * spreads over them.  Each block has a ticket, its place in the order it
 * left the FIFO; each chain being checked is a run of tickets, so that
 * "every block up to this ticket is freed" is known from the head of the
 * pending list and the oldest ticket of each taker (guard_released).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adaptors/guard/guard.h"

/* Blocks read back per round, and a round's host memory at most. */
#define GUARD_BATCH_BLOCKS 256
#define GUARD_BATCH_BYTES ((size_t)2 << 20)
/* Larger guarded ranges are read alone, through guard_scan's bounded
 * buffer, rather than into one host buffer of their size. */
#define GUARD_DIRECT_MAX ((size_t)64 << 10)

void guard_keep_report(struct guard *g)
{
	const struct xdm_error *e = xdm_last_error();

	pthread_mutex_lock(&g->lock);
	if (!g->report.code)
		g->report = *e;
	pthread_mutex_unlock(&g->lock);
}

bool guard_report_take_locked(struct guard *g, struct xdm_error *out)
{
	if (!g->report.code)
		return false;
	*out = g->report;
	g->report.code = XDM_OK;
	return true;
}

/*
 * Free a run of checked blocks upstream, then count them released at once:
 * one lock hold for the run, not one per block.  next is the taker's
 * oldest ticket after them.
 */
static void release_run(struct xdm_layer *self, struct guard_block **run, size_t n,
			struct guard_taker *t, uint64_t next)
{
	struct guard *g = guard_of(self);
	struct xdm_layer *up = xdm_layer_upstream(self);
	uint64_t bytes = 0;

	/*
	 * The check attribute pins blocks it found in the FIFO; these have
	 * left it, so none is pinned again once its count is 0.
	 */
	pthread_mutex_lock(&g->lock);
	for (size_t k = 0; k < n; k++)
		while (run[k]->refs)
			pthread_cond_wait(&g->unpinned, &g->lock);
	pthread_mutex_unlock(&g->lock);

	for (size_t k = 0; k < n; k++) {
		bytes += run[k]->up.bytes;
		if (xdm_up_deallocate(up, &run[k]->up))
			guard_keep_report(g);
		free(run[k]);
	}

	pthread_mutex_lock(&g->lock);
	g->out_count -= n;
	g->out_bytes -= bytes;
	t->oldest = next;
	pthread_cond_broadcast(&g->room);
	pthread_mutex_unlock(&g->lock);
}

static uint64_t ticket_of(const struct guard_block *b)
{
	return b ? b->ticket : UINT64_MAX;
}

struct guard_block *guard_take_batch(struct guard *g, struct guard_taker *t)
{
	struct guard_block *chain = g->pend_head, *last = chain;

	g->pend_count--;
	g->pend_bytes -= last->up.bytes;
	for (size_t n = 1; n < GUARD_BATCH_BLOCKS && last->q_next; n++) {
		last = last->q_next;
		g->pend_count--;
		g->pend_bytes -= last->up.bytes;
	}
	g->pend_head = last->q_next;
	if (!g->pend_head)
		g->pend_tail = NULL;
	last->q_next = NULL;

	t->oldest = chain->ticket;
	t->next = g->takers;
	g->takers = t;
	return chain;
}

bool guard_released(const struct guard *g, uint64_t ticket)
{
	/* The pending list and each taker's chain are in ticket order. */
	if (g->pend_head && g->pend_head->ticket <= ticket)
		return false;
	for (const struct guard_taker *t = g->takers; t; t = t->next)
		if (t->oldest <= ticket)
			return false;
	return true;
}

static size_t guarded(const struct guard *g, const struct guard_block *b)
{
	return g->front + b->bytes + g->canary;
}

/* Compare a guarded range read back into buf, and judge it. */
static void judge_buffer(struct xdm_layer *self, struct guard_block *b, const uint8_t *buf)
{
	struct guard_region r[GUARD_FREED_REGIONS];
	size_t off = 0;

	guard_freed_regions(guard_of(self), b, r);
	for (int k = 0; k < GUARD_FREED_REGIONS; k++) {
		guard_region_compare(&r[k], 0, buf + off, r[k].n);
		off += r[k].n;
	}
	if (guard_freed_judge(self, b, r))
		guard_keep_report(guard_of(self));
}

static void stream_mark(uint64_t *set, xdm_stream_id s)
{
	set[s / 64] |= (uint64_t)1 << (s % 64);
}

static bool stream_marked(const uint64_t *set, xdm_stream_id s)
{
	return set[s / 64] >> (s % 64) & 1;
}

/*
 * Round buffers are all GUARD_BATCH_BYTES and kept for the next round: a
 * fresh one each time was fresh pages to fault in and, freed, pages to
 * unmap from every thread.
 */
static uint8_t *get_buffer(struct guard *g)
{
	uint8_t *buf = NULL;

	pthread_mutex_lock(&g->lock);
	if (g->nspare)
		buf = g->spare[--g->nspare];
	pthread_mutex_unlock(&g->lock);
	return buf ? buf : malloc(GUARD_BATCH_BYTES);
}

static void put_buffer(struct guard *g, uint8_t *buf)
{
	pthread_mutex_lock(&g->lock);
	if (buf && g->nspare < GUARD_SPARE_BUFFERS) {
		g->spare[g->nspare++] = buf;
		buf = NULL;
	}
	pthread_mutex_unlock(&g->lock);
	free(buf);
}

void guard_free_buffers(struct guard *g)
{
	while (g->nspare)
		free(g->spare[--g->nspare]);
}

/*
 * One round: up to GUARD_BATCH_BLOCKS small blocks from the head of the
 * chain, read into one host buffer with one copy each, and one synchronize
 * per stream.  Returns the rest of the chain.
 */
static struct guard_block *check_round(struct xdm_layer *self, struct guard_block *chain,
				       struct guard_taker *t)
{
	struct guard *g = guard_of(self);
	struct guard_block *round[GUARD_BATCH_BLOCKS], *b;
	uint64_t queued[XDM_MAX_STREAMS / 64] = { 0 }, failed[XDM_MAX_STREAMS / 64] = { 0 };
	bool read[GUARD_BATCH_BLOCKS] = { false };
	size_t n = 0, total = 0, off = 0;
	bool any_failed = false;
	uint8_t *buf;

	for (b = chain; b && n < GUARD_BATCH_BLOCKS; b = b->q_next) {
		size_t whole = guarded(g, b);

		if (whole > GUARD_DIRECT_MAX || (n && total + whole > GUARD_BATCH_BYTES))
			break;
		round[n++] = b;
		total += whole;
	}
	chain = b;

	buf = get_buffer(g);
	if (!buf) {
		xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: no host memory (%zu bytes) to read "
			      "back freed blocks", GUARD_BATCH_BYTES);
		guard_keep_report(g);
	}
	for (size_t k = 0; buf && k < n; k++) {
		b = round[k];
		if (xdm_layer_memcpy(self, (uint64_t)(uintptr_t)(buf + off), b->up.ptr,
				     guarded(g, b), b->up.stream)) {
			guard_keep_report(g);
		} else {
			stream_mark(queued, b->up.stream);
			read[k] = true;
		}
		off += guarded(g, b);
	}

	for (xdm_stream_id s = 0; s < XDM_MAX_STREAMS; s++) {
		if (!stream_marked(queued, s) || !xdm_layer_stream_synchronize(self, s))
			continue;
		guard_keep_report(g);
		stream_mark(failed, s);
		any_failed = true;
	}

	off = 0;
	for (size_t k = 0; k < n; k++) {
		b = round[k];
		if (read[k] && !stream_marked(failed, b->up.stream))
			judge_buffer(self, b, buf + off);
		off += guarded(g, b);
	}
	/* Unchecked blocks are freed all the same, as deallocate promises. */
	release_run(self, round, n, t, ticket_of(chain));
	/*
	 * A copy on a stream that could not be waited for may still land in
	 * the buffer: leaking it is the lesser harm.
	 */
	if (!any_failed)
		put_buffer(g, buf);
	return chain;
}

void guard_check_chain(struct xdm_layer *self, struct guard_block *chain,
		       struct guard_taker *t)
{
	struct guard *g = guard_of(self);

	while (chain) {
		struct guard_block *b = chain;

		if (guarded(g, b) <= GUARD_DIRECT_MAX) {
			chain = check_round(self, chain, t);
			continue;
		}
		chain = b->q_next;
		if (guard_freed_check(self, b))
			guard_keep_report(g);
		release_run(self, &b, 1, t, ticket_of(chain));
	}

	pthread_mutex_lock(&g->lock);
	for (struct guard_taker **p = &g->takers; *p; p = &(*p)->next) {
		if (*p == t) {
			*p = t->next;
			break;
		}
	}
	pthread_mutex_unlock(&g->lock);
}

static bool checker_usable(const struct guard *g)
{
	/* A forked child has the parent's records but not its threads. */
	return g->has_checker && !g->stop && getpid() == g->pid;
}

static void *checker_main(void *arg)
{
	struct xdm_layer *self = arg;
	struct guard *g = guard_of(self);

	pthread_mutex_lock(&g->lock);
	for (;;) {
		struct guard_taker t;
		struct guard_block *chain;

		/* Batches: a caller that cannot wait checks what it needs. */
		while (!g->stop && g->pend_count < g->kick_count && g->pend_bytes < g->kick_bytes)
			pthread_cond_wait(&g->work, &g->lock);
		if (!g->pend_head)
			break;
		chain = guard_take_batch(g, &t);
		pthread_mutex_unlock(&g->lock);
		guard_check_chain(self, chain, &t);
		pthread_mutex_lock(&g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int guard_checker_start(struct xdm_layer *self)
{
	struct guard *g = guard_of(self);

	g->pid = getpid();
	if (pthread_create(&g->checker, NULL, checker_main, self) != 0)
		return -1;
	g->has_checker = true;
	return 0;
}

void guard_checker_stop(struct xdm_layer *self)
{
	struct guard *g = guard_of(self);
	bool join;

	pthread_mutex_lock(&g->lock);
	join = checker_usable(g);
	g->stop = true;
	pthread_cond_signal(&g->work);
	pthread_mutex_unlock(&g->lock);
	/* In a forked child the thread is the parent's: nothing to join. */
	if (join)
		pthread_join(g->checker, NULL);
}
