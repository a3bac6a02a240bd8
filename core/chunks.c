/* SPDX-License-Identifier: MIT */
/*
 * chunks.c - xdm_runtime_for_each_chunk: what the stack holds, each chunk
 * with its pieces marked ACTIVE where a live block of the runtime starts.
 *
 * A layer knows its chunks and which pieces it handed up, but not whether a
 * piece it handed up is still the user's (a pool's thread caches keep freed
 * blocks as used; a guard quarantines them); the registry knows the live
 * blocks and nothing of what lies around them.  So the live blocks are
 * copied out first (under each shard's short lock, by the registry's own
 * iteration), the layer's chunks are copied next, and the two are matched
 * here, with no lock held: a piece is ACTIVE when a live block starts in
 * it, which also covers an adaptor that hands up a block inside a larger
 * piece (a guard's canaries).
 *
 * Everything is copied before fn sees anything, so that the chunks can be
 * put in address order, and a chunk that a layer reported twice (it moved
 * from one stream's arena to another's between the layer's looks at them)
 * is shown once: the caller gets chunks that do not overlap, and each live
 * block in exactly one of them.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* A live block, as the registry had it. */
struct live {
	uint64_t ptr, bytes;
	xdm_stream_id stream;
	bool placed;		/* a piece of a chunk holds its start */
};

struct live_list {
	struct live *v;
	size_t n, cap;
	bool overflow;
};

/* A chunk a layer reported; its pieces are first .. first + npieces - 1 of the copy. */
struct held {
	uint64_t ptr, bytes;
	xdm_stream_id stream;
	uint32_t npieces;
	size_t first;
};

struct chunk_copy {
	const char *layer;		/* the top layer's name, for sentences */
	struct held *c;
	size_t nc, capc;
	struct xdm_chunk_piece *p;
	size_t np, capp;
	enum xdm_status err;		/* set with the thread's error when the copy stopped */
};

/* ---- the live blocks --------------------------------------------------- */

static void collect_live(const struct xdm_reg_entry *e, void *arg)
{
	struct live_list *l = arg;

	if (l->n < l->cap)
		l->v[l->n++] = (struct live){ e->block.ptr, e->block.bytes, e->block.stream, false };
	else
		l->overflow = true;
}

static int by_live_ptr(const void *a, const void *b)
{
	const struct live *x = a, *y = b;

	return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

/*
 * The live blocks, by address.  No memory is taken under a shard lock: a
 * copy that outgrew its array is made again with a larger one.
 */
static enum xdm_status copy_live(struct xdm_runtime *rt, struct live_list *l)
{
	struct xdm_stats s;

	xdm_runtime_stats(rt, &s);
	l->cap = s.blocks_outstanding + s.blocks_outstanding / 4 + 64;
	for (;;) {
		l->v = malloc(l->cap * sizeof(*l->v));
		if (!l->v)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_runtime_for_each_chunk: no "
					     "memory for a copy of %zu live blocks", l->cap);
		l->n = 0;
		l->overflow = false;
		xdm_registry_for_each(&rt->registry, collect_live, l);
		if (!l->overflow)
			break;
		free(l->v);
		l->v = NULL;
		l->cap *= 2;
	}
	qsort(l->v, l->n, sizeof(*l->v), by_live_ptr);
	return XDM_OK;
}

/* The first live block at or above ptr: its index, or l->n. */
static size_t live_from(const struct live_list *l, uint64_t ptr)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->v[mid].ptr < ptr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the layer's chunks ------------------------------------------------ */

/* Whether c's pieces lie in address order and cover it exactly. */
static bool tiles(const struct xdm_chunk *c)
{
	uint64_t at = c->ptr;

	if (!c->npieces || !c->pieces || c->bytes == 0 || c->ptr + c->bytes < c->ptr)
		return false;
	for (uint32_t i = 0; i < c->npieces; i++) {
		if (c->pieces[i].ptr != at || c->pieces[i].bytes == 0 ||
		    c->pieces[i].bytes > c->ptr + c->bytes - at)
			return false;
		at += c->pieces[i].bytes;
	}
	return at == c->ptr + c->bytes;
}

/* Room for one more chunk and n more pieces; false with the error set. */
static bool make_room(struct chunk_copy *cp, size_t n)
{
	if (cp->nc == cp->capc) {
		size_t cap = cp->capc ? cp->capc * 2 : 64;
		struct held *c = realloc(cp->c, cap * sizeof(*c));

		if (!c)
			goto oom;
		cp->c = c;
		cp->capc = cap;
	}
	if (n > cp->capp - cp->np) {
		size_t cap = cp->capp ? cp->capp : 256;
		struct xdm_chunk_piece *p;

		while (n > cap - cp->np)
			cap *= 2;
		p = realloc(cp->p, cap * sizeof(*p));
		if (!p)
			goto oom;
		cp->p = p;
		cp->capp = cap;
	}
	return true;

oom:
	cp->err = xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_runtime_for_each_chunk: no memory for "
				"a copy of %zu chunks", cp->nc + 1);
	return false;
}

/* The layer's fn: a copy of each chunk, which the layer may free after. */
static int copy_chunk(const struct xdm_chunk *c, void *arg)
{
	struct chunk_copy *cp = arg;

	if (!tiles(c)) {
		cp->err = xdm_error_set(XDM_E_MODULE, "%s: its chunk at 0x%" PRIx64 " of %" PRIu64
					" bytes is not tiled by its %u pieces", cp->layer, c->ptr,
					c->bytes, c->npieces);
		return 1;
	}
	if (!make_room(cp, c->npieces))
		return 1;
	cp->c[cp->nc++] = (struct held){ c->ptr, c->bytes, c->stream, c->npieces, cp->np };
	memcpy(cp->p + cp->np, c->pieces, c->npieces * sizeof(*c->pieces));
	cp->np += c->npieces;
	return 0;
}

/* By address; of two at one address, the larger first (it holds the other). */
static int by_held_ptr(const void *a, const void *b)
{
	const struct held *x = a, *y = b;

	if (x->ptr != y->ptr)
		return x->ptr < y->ptr ? -1 : 1;
	return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

/*
 * The stack's chunks, by address, none overlapping: of two that do (one
 * chunk seen before and after it moved, perhaps joined to a neighbour),
 * the first is kept.  A stack that cannot tell leaves the copy empty.
 */
static enum xdm_status copy_chunks(struct xdm_runtime *rt, struct chunk_copy *cp)
{
	struct xdm_error saved = *xdm_last_error();
	const struct xdm_layer *answers = &rt->layers[0];
	enum xdm_status st;
	size_t kept = 0;

	/* The layer xdm_up_chunks() will ask, named in a sentence about its chunks. */
	while (!answers->ops->chunks && answers->ops->kind == XDM_KIND_ADAPTOR &&
	       answers->upstream)
		answers = answers->upstream;
	cp->layer = answers->ops->name;
	st = xdm_up_chunks(&rt->layers[0], copy_chunk, cp);
	if (cp->err)
		return cp->err;
	if (st == XDM_E_NOT_SUPPORTED) {
		/* Not a failure: every live block becomes a chunk of its own. */
		xdm_error_restore(&saved);
		cp->nc = cp->np = 0;
		return XDM_OK;
	}
	if (st)
		return st;
	/* A stack that holds nothing made no array: qsort takes no NULL. */
	if (cp->nc)
		qsort(cp->c, cp->nc, sizeof(*cp->c), by_held_ptr);
	for (size_t i = 0; i < cp->nc; i++) {
		if (kept && cp->c[i].ptr < cp->c[kept - 1].ptr + cp->c[kept - 1].bytes)
			continue;
		cp->c[kept++] = cp->c[i];
	}
	cp->nc = kept;
	return XDM_OK;
}

/* ---- matching and visiting --------------------------------------------- */

/* Each piece of h ACTIVE where a live block starts in it, and those blocks placed. */
static void mark(const struct held *h, struct xdm_chunk_piece *p, struct live_list *l)
{
	for (uint32_t i = 0; i < h->npieces; i++) {
		uint64_t end = p[i].ptr + p[i].bytes;
		size_t k = live_from(l, p[i].ptr);

		p[i].state = k < l->n && l->v[k].ptr < end ? XDM_PIECE_ACTIVE : XDM_PIECE_INACTIVE;
		for (; k < l->n && l->v[k].ptr < end; k++)
			l->v[k].placed = true;
	}
}

/* A live block no chunk holds, as a chunk of its own. */
static int visit_alone(const struct live *b, int (*fn)(const struct xdm_chunk *c, void *arg),
		       void *arg)
{
	struct xdm_chunk_piece piece = { b->ptr, b->bytes, XDM_PIECE_ACTIVE };
	struct xdm_chunk c = { b->ptr, b->bytes, b->stream, 1, &piece };

	return fn(&c, arg);
}

/* The chunks and the blocks no chunk holds, merged by address, until fn says stop. */
static void visit(const struct chunk_copy *cp, const struct live_list *l,
		  int (*fn)(const struct xdm_chunk *c, void *arg), void *arg)
{
	size_t i = 0, k = 0;

	for (;;) {
		while (k < l->n && l->v[k].placed)
			k++;
		if (i < cp->nc && (k == l->n || cp->c[i].ptr <= l->v[k].ptr)) {
			const struct held *h = &cp->c[i++];
			struct xdm_chunk c = { h->ptr, h->bytes, h->stream, h->npieces,
					       cp->p + h->first };

			if (fn(&c, arg))
				return;
		} else if (k < l->n) {
			if (visit_alone(&l->v[k++], fn, arg))
				return;
		} else {
			return;
		}
	}
}

enum xdm_status xdm_runtime_for_each_chunk(struct xdm_runtime *rt,
					   int (*fn)(const struct xdm_chunk *c, void *arg),
					   void *arg)
{
	struct chunk_copy cp = { 0 };
	struct live_list l = { 0 };
	enum xdm_status st;

	if (!rt || !fn)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_for_each_chunk: NULL argument");
	st = copy_live(rt, &l);
	if (st)
		goto out;
	st = copy_chunks(rt, &cp);
	if (st)
		goto out;
	for (size_t i = 0; i < cp.nc; i++)
		mark(&cp.c[i], cp.p + cp.c[i].first, &l);
	visit(&cp, &l, fn, arg);
out:
	free(cp.c);
	free(cp.p);
	free(l.v);
	return st;
}
