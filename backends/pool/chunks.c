/* SPDX-License-Identifier: MIT */
/*
 * chunks.c - the pool's chunks method (ABI 1.10): every chunk of every
 * arena, with its segments as pieces, for memory viewers.
 *
 * An arena's lock is a spinlock that its stream's allocations take, so
 * under it the walk only copies, into arrays made before it was taken;
 * when the arena has more chunks or segments than they hold, the lock is
 * let go, the arrays are grown to what the count under the lock found,
 * and the arena is copied again.  fn is called after the lock is released.
 *
 * A segment in a thread's cache is SEG_USED in its arena, so it is shown
 * as used: the runtime, which knows the live blocks, tells it apart.  Each
 * arena is copied whole under its own lock, but a chunk that moves between
 * arenas while the walk goes from one to the next (a steal) may be seen in
 * both or in neither; the runtime drops the second sight.
 */
#include "config.h"

#include <stdlib.h>

#include "pool.h"

struct chunk_copy {
	struct xdm_chunk *c;
	size_t nc, capc;
	struct xdm_chunk_piece *p;
	size_t np, capp;
};

static uint32_t piece_state(enum pool_seg_state s)
{
	switch (s) {
	case SEG_FREE:
		return XDM_LAYER_PIECE_FREE;
	case SEG_CACHED:
		return XDM_LAYER_PIECE_CACHED;
	case SEG_USED:
		break;
	}
	return XDM_LAYER_PIECE_USED;
}

/*
 * Under a's lock: its chunks and their segments into cp, as far as they
 * fit; *need_c and *need_p get how many there are.  True when all fit.
 */
static bool copy_arena(const struct pool_arena *a, struct chunk_copy *cp, size_t *need_c,
		       size_t *need_p)
{
	size_t nc = 0, np = 0;

	for (const struct pool_chunk *c = a->chunks; c; c = c->next, nc++) {
		uint32_t k = 0;

		for (const struct pool_seg *s = c->first; s; s = s->next, np++, k++) {
			if (np < cp->capp)
				cp->p[np] = (struct xdm_chunk_piece){ s->ptr, s->size,
								      piece_state(s->state) };
		}
		if (nc < cp->capc)
			cp->c[nc] = (struct xdm_chunk){ .ptr = c->up.ptr, .bytes = c->size,
							.stream = a->stream, .npieces = k };
	}
	*need_c = nc;
	*need_p = np;
	return nc <= cp->capc && np <= cp->capp;
}

/* Arrays for at least nc chunks and np pieces, with room to spare; false: no memory. */
static bool grow(struct chunk_copy *cp, size_t nc, size_t np)
{
	if (nc > cp->capc) {
		size_t cap = nc + nc / 4 + 16;
		struct xdm_chunk *c = realloc(cp->c, cap * sizeof(*c));

		if (!c)
			return false;
		cp->c = c;
		cp->capc = cap;
	}
	if (np > cp->capp) {
		size_t cap = np + np / 4 + 64;
		struct xdm_chunk_piece *p = realloc(cp->p, cap * sizeof(*p));

		if (!p)
			return false;
		cp->p = p;
		cp->capp = cap;
	}
	return true;
}

/* Copy arena a whole, growing the arrays as its count says; false: no memory. */
static bool copy_whole(struct pool_arena *a, struct chunk_copy *cp)
{
	size_t nc, np;
	bool all;

	for (;;) {
		pthread_spin_lock(&a->lock);
		all = copy_arena(a, cp, &nc, &np);
		pthread_spin_unlock(&a->lock);
		if (all)
			break;
		if (!grow(cp, nc, np))
			return false;
	}
	cp->nc = nc;
	cp->np = np;
	return true;
}

/* The copied chunks of one arena to fn; true when fn said stop. */
static bool hand_over(struct chunk_copy *cp, xdm_chunk_fn fn, void *arg)
{
	size_t first = 0;

	for (size_t i = 0; i < cp->nc; i++) {
		cp->c[i].pieces = cp->p + first;
		first += cp->c[i].npieces;
		if (fn(&cp->c[i], arg))
			return true;
	}
	return false;
}

enum xdm_status pool_chunks(struct xdm_layer *self, xdm_chunk_fn fn, void *arg)
{
	struct pool *p = pool_of(self);
	struct chunk_copy cp = { 0 };
	enum xdm_status st = XDM_OK;

	for (unsigned int i = 0; i < POOL_ARENAS; i++) {
		struct pool_arena *a = pool_arena_at(p, i);

		if (!a)
			continue;
		if (!copy_whole(a, &cp)) {
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: no memory for a copy of the "
					   "chunks of stream %u", a->stream);
			break;
		}
		if (hand_over(&cp, fn, arg))
			break;
	}
	free(cp.c);
	free(cp.p);
	return st;
}
