/* SPDX-License-Identifier: MIT */
/*
 * random_churn.h - one thread's allocate/free churn on its own stream, by
 * a seeded xorshift: a few blocks are kept live in slots, and each pair
 * frees a slot's block before it allocates the next, so that frees and
 * allocations interleave.  Several threads run it at once on one runtime
 * (check_pool on the host platform, check_cuda on a GPU, the conformance
 * suite on every stack); the counts the runtime must show afterwards are
 * exact whatever the schedule, since every thread frees what it
 * allocated.
 *
 * Where the memory is the host's, each live block may carry a mark in its
 * first and last byte, checked at its free: a block handed out twice at
 * once would show another block's mark.
 */
#ifndef XDM_TESTS_RANDOM_CHURN_H
#define XDM_TESTS_RANDOM_CHURN_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <xdm/xdm.h>

#define TU_CHURN_LIVE_MAX 16

/* xorshift64: cheap, and the same sequence in every libc. */
static inline uint64_t tu_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct tu_churn {
	/* what to do */
	struct xdm_runtime *rt;
	xdm_stream_id stream;	/* the thread's own; it seeds the sequence too */
	long pairs;
	int live;		/* blocks kept live, 1 .. TU_CHURN_LIVE_MAX */
	size_t (*size)(uint64_t r);	/* a size from a random word */
	bool mark;		/* host memory: mark blocks and check the marks */
	/* A write declared on this stream every 64th pair (none: -1). */
	long cross_stream;
	/* what happened */
	enum xdm_status st;
	long done;		/* pairs completed */
	long cross_uses;	/* writes declared and finished */
	uint64_t held, peak;	/* bytes this thread holds, and the most it held */
	char msg[sizeof(((struct xdm_error *)0)->message)];
};

static inline unsigned char *tu_churn_mem(const struct xdm_block *b)
{
	return (unsigned char *)(uintptr_t)b->ptr;
}

/* A slot's block freed, its mark checked first; false with c->st set. */
static inline bool tu_churn_free(struct tu_churn *c, struct xdm_block *b, unsigned char mark)
{
	if (c->mark && b->bytes &&
	    (tu_churn_mem(b)[0] != mark || tu_churn_mem(b)[b->bytes - 1] != mark)) {
		c->st = XDM_E_INVALID;
		if (!c->msg[0])
			snprintf(c->msg, sizeof(c->msg),
				 "block 0x%" PRIx64 " of %zu bytes was overwritten while live",
				 b->ptr, b->bytes);
		return false;
	}
	c->held -= b->bytes;
	c->st = xdm_deallocate(c->rt, b);
	return c->st == XDM_OK;
}

/* A declared write of the block on the cross stream, if one is set. */
static inline void tu_churn_cross(struct tu_churn *c, const struct xdm_block *b)
{
	struct xdm_block_id id = xdm_block_id_of(b);
	xdm_stream_id other = (xdm_stream_id)c->cross_stream;

	c->st = xdm_prepare_block_use(c->rt, id, other, XDM_ACCESS_WRITE);
	if (c->st == XDM_OK)
		c->st = xdm_finish_block_use(c->rt, id, other, XDM_ACCESS_WRITE);
	c->cross_uses += c->st == XDM_OK;
}

/* The thread's body (a pthread start routine over a struct tu_churn). */
static inline void *tu_churn_run(void *arg)
{
	struct tu_churn *c = arg;
	struct xdm_block live[TU_CHURN_LIVE_MAX];
	unsigned char mark[TU_CHURN_LIVE_MAX] = { 0 };
	bool used[TU_CHURN_LIVE_MAX] = { false };
	uint64_t x = 0x9e3779b97f4a7c15ull * (c->stream + 1);

	for (long i = 0; i < c->pairs && c->st == XDM_OK; i++) {
		int slot = (int)(tu_xorshift(&x) % (uint64_t)c->live);
		size_t bytes = c->size(tu_xorshift(&x));

		if (used[slot] && !tu_churn_free(c, &live[slot], mark[slot]))
			break;
		used[slot] = false;
		c->st = xdm_allocate(c->rt, bytes, c->stream, "churn", &live[slot]);
		if (c->st)
			break;
		used[slot] = true;
		c->held += live[slot].bytes;
		if (c->held > c->peak)
			c->peak = c->held;
		if (c->mark && live[slot].bytes) {
			mark[slot] = (unsigned char)(i * 31 + c->stream);
			tu_churn_mem(&live[slot])[0] = mark[slot];
			tu_churn_mem(&live[slot])[live[slot].bytes - 1] = mark[slot];
		}
		if (c->cross_stream >= 0 && i % 64 == 0)
			tu_churn_cross(c, &live[slot]);
		c->done += c->st == XDM_OK;
	}
	for (int slot = 0; slot < c->live; slot++) {
		enum xdm_status first = c->st;

		if (!used[slot])
			continue;
		c->st = XDM_OK;
		tu_churn_free(c, &live[slot], mark[slot]);
		if (first != XDM_OK)
			c->st = first;	/* the first failure is the one to tell */
	}
	if (c->st && !c->msg[0])
		snprintf(c->msg, sizeof(c->msg), "%s", xdm_last_error_message());
	return NULL;
}

#endif /* XDM_TESTS_RANDOM_CHURN_H */
