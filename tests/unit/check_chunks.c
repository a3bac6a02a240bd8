/* SPDX-License-Identifier: MIT */
/*
 * check_chunks.c - xdm_runtime_for_each_chunk and the chunks method (ABI
 * 1.10) on the host platform: what a pool holds, chunk by chunk, with the
 * pieces that tile each chunk marked ACTIVE where a live block starts and
 * INACTIVE otherwise (its free and cached pieces, the blocks in a thread's
 * cache); the fallback of a stack that cannot tell (a chunk per live
 * block); adaptors over a pool (a guard's larger pieces, a budget); and
 * what the runtime does with a layer's answer that is out of order,
 * repeated, misses a block or does not tile (an in-process adaptor that
 * says what the test tells it).
 *
 * Every figure is checked against what a person would read elsewhere: the
 * blocks the test holds, and the pool's attributes (reserved, in_use,
 * chunks) at quiescence.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

/* ---- a copy of what xdm_runtime_for_each_chunk visits ----------------------- */

#define MAX_CHUNKS 1024
#define MAX_PIECES 16384

struct seen {
	size_t nc, np;
	struct xdm_chunk c[MAX_CHUNKS];
	size_t first[MAX_CHUNKS];		/* each chunk's first piece in p */
	struct xdm_chunk_piece p[MAX_PIECES];
	size_t stop_after;			/* fn says stop after this many; 0: never */
};

static int keep(const struct xdm_chunk *c, void *arg)
{
	struct seen *s = arg;

	ck_assert_uint_lt(s->nc, MAX_CHUNKS);
	ck_assert_uint_le(s->np + c->npieces, MAX_PIECES);
	s->c[s->nc] = *c;
	s->first[s->nc] = s->np;
	for (uint32_t i = 0; i < c->npieces; i++)
		s->p[s->np++] = c->pieces[i];
	s->c[s->nc].pieces = NULL;	/* the runtime's, gone after the call */
	s->nc++;
	return s->stop_after && s->nc == s->stop_after;
}

static struct seen *walk(struct xdm_runtime *rt)
{
	struct seen *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	TU_OK(xdm_runtime_for_each_chunk(rt, keep, s));
	return s;
}

static const struct xdm_chunk_piece *piece(const struct seen *s, size_t chunk, uint32_t i)
{
	return &s->p[s->first[chunk] + i];
}

/*
 * What holds for any stack: chunks in address order, none overlapping,
 * each tiled by its pieces with no gap and no overlap, every state one of
 * the two.
 */
static void check_shape(const struct seen *s)
{
	for (size_t k = 0; k < s->nc; k++) {
		const struct xdm_chunk *c = &s->c[k];
		uint64_t at = c->ptr;

		ck_assert_uint_gt(c->npieces, 0);
		ck_assert_uint_gt(c->bytes, 0);
		if (k)
			ck_assert_msg(s->c[k - 1].ptr + s->c[k - 1].bytes <= c->ptr,
				      "chunk %zu at 0x%" PRIx64 " overlaps or precedes the one before",
				      k, c->ptr);
		for (uint32_t i = 0; i < c->npieces; i++) {
			const struct xdm_chunk_piece *p = piece(s, k, i);

			ck_assert_msg(p->ptr == at, "chunk %zu piece %u at 0x%" PRIx64 ", not 0x%"
				      PRIx64 ": a gap or an overlap", k, i, p->ptr, at);
			ck_assert_uint_gt(p->bytes, 0);
			ck_assert_msg(p->state == XDM_PIECE_ACTIVE || p->state == XDM_PIECE_INACTIVE,
				      "chunk %zu piece %u has state %u", k, i, p->state);
			at += p->bytes;
		}
		ck_assert_msg(at == c->ptr + c->bytes, "chunk %zu: its pieces end at 0x%" PRIx64
			      ", it at 0x%" PRIx64, k, at, c->ptr + c->bytes);
	}
}

/* The chunk and piece that hold ptr, counting how many do; false when none. */
static size_t holders(const struct seen *s, uint64_t ptr, size_t *chunk, uint32_t *at)
{
	size_t n = 0;

	for (size_t k = 0; k < s->nc; k++) {
		for (uint32_t i = 0; i < s->c[k].npieces; i++) {
			const struct xdm_chunk_piece *p = piece(s, k, i);

			if (ptr >= p->ptr && ptr < p->ptr + p->bytes) {
				*chunk = k;
				*at = i;
				n++;
			}
		}
	}
	return n;
}

/*
 * The live blocks (live) each in exactly one ACTIVE piece, of a chunk of
 * its stream; every ACTIVE piece holds a live block's start; each freed
 * address (gone) in an INACTIVE piece.
 */
static void check_blocks(const struct seen *s, const struct xdm_block *live, size_t nlive,
			 const uint64_t *gone, size_t ngone)
{
	size_t chunk;
	uint32_t i;

	for (size_t b = 0; b < nlive; b++) {
		ck_assert_msg(holders(s, live[b].ptr, &chunk, &i) == 1,
			      "live block 0x%" PRIx64 " is not in exactly one piece", live[b].ptr);
		ck_assert_msg(piece(s, chunk, i)->state == XDM_PIECE_ACTIVE,
			      "live block 0x%" PRIx64 " is in an inactive piece", live[b].ptr);
		ck_assert_uint_le(live[b].ptr + live[b].bytes,
				  piece(s, chunk, i)->ptr + piece(s, chunk, i)->bytes);
		ck_assert_uint_eq(s->c[chunk].stream, live[b].stream);
	}
	for (size_t k = 0; k < s->nc; k++) {
		for (i = 0; i < s->c[k].npieces; i++) {
			const struct xdm_chunk_piece *p = piece(s, k, i);
			size_t starts = 0;

			for (size_t b = 0; b < nlive; b++)
				starts += live[b].ptr >= p->ptr && live[b].ptr < p->ptr + p->bytes;
			ck_assert_msg((p->state == XDM_PIECE_ACTIVE) == (starts > 0),
				      "piece 0x%" PRIx64 " of %" PRIu64 " bytes is %s with %zu live "
				      "blocks", p->ptr, p->bytes,
				      p->state == XDM_PIECE_ACTIVE ? "active" : "inactive", starts);
		}
	}
	for (size_t g = 0; g < ngone; g++) {
		ck_assert_msg(holders(s, gone[g], &chunk, &i) == 1,
			      "freed 0x%" PRIx64 " is not in exactly one piece", gone[g]);
		ck_assert_msg(piece(s, chunk, i)->state == XDM_PIECE_INACTIVE,
			      "freed 0x%" PRIx64 " is in an active piece", gone[g]);
	}
}

static uint64_t sum_chunks(const struct seen *s)
{
	uint64_t sum = 0;

	for (size_t k = 0; k < s->nc; k++)
		sum += s->c[k].bytes;
	return sum;
}

static uint64_t sum_pieces(const struct seen *s, uint32_t state)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < s->np; i++)
		sum += s->p[i].state == state ? s->p[i].bytes : 0;
	return sum;
}

static uint64_t attr(struct xdm_runtime *rt, uint32_t layer, const char *name)
{
	char buf[64], *end;
	unsigned long long v;

	TU_OK(xdm_layer_attr_show(rt, layer, name, buf, sizeof(buf)));
	errno = 0;
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && !errno && !strcmp(end, "\n"), "%u/%s: '%s'", layer, name, buf);
	return v;
}

/* ---- a pool ----------------------------------------------------------------- */

/* Sizes from a size class to a block larger than a chunk, on two streams. */
static const size_t sizes[] = { 300, 4 * KIB, 64 * KIB, 100 * KIB, 700 * KIB, 3 * MIB,
				512, 8 * KIB, 200 * KIB, 33 * KIB, 1 * MIB, 1000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/*
 * Allocates every size (odd ones on stream 1), frees every third, and
 * checks the chunks of stack (whose pool is layer pool_layer) against the
 * blocks kept and freed and the pool's own counters.
 */
static void pool_case(const char *stack, uint32_t pool_layer)
{
	struct xdm_block all[NSIZES], live[NSIZES];
	uint64_t gone[NSIZES];
	size_t nlive = 0, ngone = 0;
	struct xdm_runtime *rt = NULL;
	struct seen *s;

	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	for (size_t i = 0; i < NSIZES; i++)
		TU_OK(xdm_allocate(rt, sizes[i], (xdm_stream_id)(i % 2), "chunks", &all[i]));
	/* Freed after every allocation, so that no live block reuses their place. */
	for (size_t i = 0; i < NSIZES; i++) {
		if (i % 3 == 2) {
			gone[ngone++] = all[i].ptr;
			TU_OK(xdm_deallocate(rt, &all[i]));
		} else {
			live[nlive++] = all[i];
		}
	}
	s = walk(rt);
	check_shape(s);
	check_blocks(s, live, nlive, gone, ngone);
	ck_assert_uint_eq(s->nc, attr(rt, pool_layer, "chunks"));
	ck_assert_uint_eq(sum_chunks(s), attr(rt, pool_layer, "reserved"));
	/* in_use leaves out what threads cache, as the ACTIVE pieces do. */
	if (pool_layer == 0)
		ck_assert_uint_eq(sum_pieces(s, XDM_PIECE_ACTIVE), attr(rt, 0, "in_use"));
	ck_assert_uint_eq(sum_pieces(s, XDM_PIECE_INACTIVE),
			  sum_chunks(s) - sum_pieces(s, XDM_PIECE_ACTIVE));
	free(s);

	/* Everything freed: the chunks stay, every piece of them inactive. */
	for (size_t i = 0; i < nlive; i++)
		TU_OK(xdm_deallocate(rt, &live[i]));
	s = walk(rt);
	check_shape(s);
	ck_assert_uint_gt(s->nc, 0);
	ck_assert_uint_eq(sum_pieces(s, XDM_PIECE_ACTIVE), 0);
	ck_assert_uint_eq(sum_chunks(s), attr(rt, pool_layer, "reserved"));
	free(s);
	TU_OK(xdm_runtime_destroy(rt));
}

START_TEST(a_pool_shows_its_chunks_and_pieces)
{
	pool_case("pool chunk=1M tcache=0 | host", 0);
}
END_TEST

/*
 * Over a virtual-memory upstream (host_vmm, cuda_vmm's host twin): a chunk
 * is a run of granules, joined with its neighbours and cut where whole
 * granules went back, and small blocks have arenas of their own.
 */
START_TEST(over_granules_chunks_are_runs_of_them)
{
	pool_case("pool tcache=0 trim_ms=0 | host_vmm granule=64K reserve=1G", 0);
	pool_case("pool trim_ms=0 | host_vmm granule=64K reserve=1G", 0);
}
END_TEST

/*
 * With thread caches: the blocks freed into this thread's cache are used in
 * their arena's eyes, and no live block's: inactive.
 */
START_TEST(blocks_in_a_thread_cache_are_inactive)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b[8];
	uint64_t gone[4];
	struct seen *s;

	TU_OK(xdm_runtime_create(0, "host", "pool chunk=1M tcache=1M | host", &rt));
	for (int i = 0; i < 8; i++)
		TU_OK(xdm_allocate(rt, 4 * KIB, 0, "cached", &b[i]));
	for (int i = 0; i < 4; i++) {
		gone[i] = b[2 * i].ptr;
		TU_OK(xdm_deallocate(rt, &b[2 * i]));
		b[i] = b[2 * i + 1];
	}
	ck_assert_uint_eq(attr(rt, 0, "thread_cached"), 4 * 4 * KIB);
	s = walk(rt);
	check_shape(s);
	check_blocks(s, b, 4, gone, 4);
	/* Each cached block is a piece of its own between live ones: no merge. */
	ck_assert_uint_eq(sum_pieces(s, XDM_PIECE_ACTIVE), attr(rt, 0, "in_use"));
	ck_assert_uint_eq(sum_chunks(s), attr(rt, 0, "reserved"));
	free(s);
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));

	/* The default stack's pool, thread caches and all. */
	pool_case("pool chunk=1M | host", 0);
}
END_TEST

/* A guard's blocks lie inside the pool's pieces, after its canary. */
START_TEST(through_a_guard_a_piece_holds_its_block_and_canaries)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b;
	struct seen *s;
	size_t chunk;
	uint32_t i;

	pool_case("guard | pool chunk=1M tcache=0 | host", 1);

	TU_OK(xdm_runtime_create(0, "host", "guard | pool chunk=1M tcache=0 | host", &rt));
	TU_OK(xdm_allocate(rt, 4 * KIB, 0, "guarded", &b));
	s = walk(rt);
	check_shape(s);
	ck_assert_uint_eq(holders(s, b.ptr, &chunk, &i), 1);
	ck_assert_uint_eq(piece(s, chunk, i)->state, XDM_PIECE_ACTIVE);
	ck_assert_uint_lt(piece(s, chunk, i)->ptr, b.ptr);
	ck_assert_uint_gt(piece(s, chunk, i)->bytes, b.bytes);
	free(s);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(through_a_budget_the_pool_answers)
{
	char stack[256], path[512];
	const char *dir = getenv("XDM_BUDGET_DIR");

	snprintf(stack, sizeof(stack), "budget key=check-chunks-%d limit=64M credit=0 | "
		 "pool chunk=1M tcache=0 | host", (int)getpid());
	pool_case(stack, 1);
	snprintf(path, sizeof(path), "%s/xdm-budget-check-chunks-%d", dir && *dir ? dir : "/dev/shm",
		 (int)getpid());
	unlink(path);
}
END_TEST

/*
 * Threads allocating and freeing on two streams while the chunks are
 * walked, chunks growing and moving between the streams' arenas: every
 * walk still gives chunks in address order, disjoint, each tiled by its
 * pieces (the runtime keeps the first sight of a chunk seen twice).  At
 * quiescence, with everything freed, nothing is active and the chunks are
 * what the pool reserved.
 */
#define CHURNERS 4
#define CHURN_HELD 16

struct churner {
	struct xdm_runtime *rt;
	atomic_bool *stop;
	int t;
	int failed;
};

static void *churn(void *arg)
{
	struct churner *c = arg;
	struct xdm_block held[CHURN_HELD];
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(c->t + 1);
	int n = 0;

	while (!atomic_load(c->stop)) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		if (n == CHURN_HELD || (n && rng % 3 == 0)) {
			int i = (int)((rng >> 8) % (uint64_t)n);

			c->failed += xdm_deallocate(c->rt, &held[i]) != XDM_OK;
			held[i] = held[--n];
			continue;
		}
		if (xdm_allocate(c->rt, 256 + (size_t)(rng >> 16) % (200 * KIB),
				 (xdm_stream_id)((rng >> 4) % 2), "churn", &held[n]) == XDM_OK)
			n++;
		else
			c->failed++;
	}
	while (n)
		c->failed += xdm_deallocate(c->rt, &held[--n]) != XDM_OK;
	return NULL;
}

START_TEST(walks_while_threads_churn_keep_their_shape)
{
	struct churner c[CHURNERS];
	pthread_t th[CHURNERS];
	atomic_bool stop = false;
	struct xdm_runtime *rt = NULL;
	struct seen *s;

	TU_OK(xdm_runtime_create(0, "host", "pool chunk=256K tcache=64K | host", &rt));
	for (int i = 0; i < CHURNERS; i++) {
		c[i] = (struct churner){ rt, &stop, i, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn, &c[i]), 0);
	}
	for (int w = 0; w < 200; w++) {
		s = walk(rt);
		check_shape(s);
		free(s);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < CHURNERS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(c[i].failed, 0);
	}
	s = walk(rt);
	check_shape(s);
	ck_assert_uint_eq(sum_pieces(s, XDM_PIECE_ACTIVE), 0);
	ck_assert_uint_eq(sum_chunks(s), attr(rt, 0, "reserved"));
	ck_assert_uint_eq(s->nc, attr(rt, 0, "chunks"));
	free(s);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- a stack that cannot tell ------------------------------------------------ */

START_TEST(without_a_pool_each_live_block_is_a_chunk)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b[6];
	uint64_t gone[2];
	struct seen *s;

	TU_OK(xdm_runtime_create(0, "host", "host", &rt));
	for (int i = 0; i < 6; i++)
		TU_OK(xdm_allocate(rt, (size_t)(i + 1) * 1000, (xdm_stream_id)(i % 3), "alone",
				   &b[i]));
	gone[0] = b[1].ptr;
	gone[1] = b[4].ptr;
	TU_OK(xdm_deallocate(rt, &b[1]));
	TU_OK(xdm_deallocate(rt, &b[4]));
	b[1] = b[5];
	xdm_error_clear();
	s = walk(rt);
	/* NOT_SUPPORTED from the backend was the runtime's business, not the caller's. */
	ck_assert_int_eq(xdm_last_error()->code, XDM_OK);
	check_shape(s);
	ck_assert_uint_eq(s->nc, 4);
	for (size_t k = 0; k < s->nc; k++) {
		ck_assert_uint_eq(s->c[k].npieces, 1);
		ck_assert_uint_eq(piece(s, k, 0)->state, XDM_PIECE_ACTIVE);
	}
	for (int i = 0; i < 4; i++) {
		size_t chunk;
		uint32_t at;

		ck_assert_uint_eq(holders(s, b[i].ptr, &chunk, &at), 1);
		ck_assert_uint_eq(s->c[chunk].ptr, b[i].ptr);
		ck_assert_uint_eq(s->c[chunk].bytes, b[i].bytes);
		ck_assert_uint_eq(s->c[chunk].stream, b[i].stream);
	}
	for (int g = 0; g < 2; g++) {
		size_t chunk;
		uint32_t at;

		ck_assert_uint_eq(holders(s, gone[g], &chunk, &at), 0);
	}
	free(s);

	/* An adaptor over it forwards, and gets the same answer. */
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
	TU_OK(xdm_runtime_create(0, "host", "guard | host", &rt));
	TU_OK(xdm_allocate(rt, 1000, 2, "alone", &b[0]));
	s = walk(rt);
	ck_assert_uint_eq(s->nc, 1);
	ck_assert_uint_eq(s->c[0].ptr, b[0].ptr);
	ck_assert_uint_eq(s->c[0].stream, 2);
	free(s);
	TU_OK(xdm_deallocate(rt, &b[0]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- the caller's side -------------------------------------------------------- */

START_TEST(fn_stops_the_walk)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b[3];
	struct seen *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	TU_OK(xdm_runtime_create(0, "host", "pool chunk=256K tcache=0 | host", &rt));
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 200 * KIB, 0, "big", &b[i]));
	ck_assert_uint_eq(attr(rt, 0, "chunks"), 3);
	s->stop_after = 2;
	TU_OK(xdm_runtime_for_each_chunk(rt, keep, s));
	ck_assert_uint_eq(s->nc, 2);
	free(s);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(null_arguments_are_invalid)
{
	struct xdm_runtime *rt = NULL;
	struct seen s;

	ck_assert_int_eq(xdm_runtime_for_each_chunk(NULL, keep, &s), XDM_E_INVALID);
	ck_assert_str_eq(xdm_last_error_message(), "xdm_runtime_for_each_chunk: NULL argument");
	TU_OK(xdm_runtime_create(0, "host", "pool | host", &rt));
	ck_assert_int_eq(xdm_runtime_for_each_chunk(rt, NULL, &s), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- a layer's answer, as the runtime takes it ------------------------------- */

/*
 * An adaptor over host whose chunks method answers what the test put in
 * told: the runtime's side of the contract, without a pool's timing.
 */
static struct xdm_chunk told[4];
static struct xdm_chunk_piece told_pieces[4][4];
static size_t ntold;

static enum xdm_status teller_chunks(struct xdm_layer *self, xdm_chunk_fn fn, void *arg)
{
	(void)self;
	for (size_t i = 0; i < ntold; i++) {
		told[i].pieces = told_pieces[i];
		if (fn(&told[i], arg))
			break;
	}
	return XDM_OK;
}

static enum xdm_status teller_init(struct xdm_layer *self, const struct xdm_params *params)
{
	(void)self;
	(void)params;
	return XDM_OK;
}

static const struct xdm_ops teller_ops = {
	XDM_OPS_HEADER("chunk_teller", XDM_KIND_ADAPTOR),
	.description = "test adaptor: answers the chunks the test tells it",
	.init = teller_init,
	.chunks = teller_chunks,
};

static struct xdm_runtime *teller_runtime(void)
{
	static bool registered;
	struct xdm_runtime *rt = NULL;

	if (!registered) {
		TU_OK(xdm_module_register(&teller_ops));
		registered = true;
	}
	TU_OK(xdm_runtime_create(0, "host", "chunk_teller | host", &rt));
	return rt;
}

/* Chunk i of the answer: [ptr, ptr + bytes) in two equal pieces. */
static void tell(size_t i, uint64_t ptr, uint64_t bytes, xdm_stream_id stream)
{
	told[i] = (struct xdm_chunk){ ptr, bytes, stream, 2, NULL };
	told_pieces[i][0] = (struct xdm_chunk_piece){ ptr, bytes / 2, XDM_LAYER_PIECE_USED };
	told_pieces[i][1] = (struct xdm_chunk_piece){ ptr + bytes / 2, bytes / 2,
						      XDM_LAYER_PIECE_FREE };
	if (i + 1 > ntold)
		ntold = i + 1;
}

/*
 * Out of order and one chunk twice (a chunk seen before and after it
 * moved): shown by address, once.  A live block in no chunk of the answer
 * is a chunk of its own, in its place among them.  A piece the layer calls
 * used with no live block in it is inactive; one it calls free is active
 * when a live block starts in it (the block came after the layer looked).
 */
START_TEST(the_runtime_orders_and_dedupes_what_a_layer_says)
{
	struct xdm_runtime *rt = teller_runtime();
	struct xdm_block b;
	struct seen *s;
	uint64_t base;

	TU_OK(xdm_allocate(rt, 4 * KIB, 1, "real", &b));
	/* Made-up chunks on both sides of the block, one holding nothing real. */
	base = b.ptr & ~(uint64_t)0xfff;
	ntold = 0;
	tell(0, base + 64 * KIB, 8 * KIB, 0);
	tell(1, base - 64 * KIB, 16 * KIB, 3);
	tell(2, base + 64 * KIB, 8 * KIB, 0);
	s = walk(rt);
	check_shape(s);
	ck_assert_uint_eq(s->nc, 3);
	ck_assert_uint_eq(s->c[0].ptr, base - 64 * KIB);
	ck_assert_uint_eq(s->c[0].stream, 3);
	ck_assert_uint_eq(s->c[1].ptr, b.ptr);
	ck_assert_uint_eq(s->c[1].bytes, b.bytes);
	ck_assert_uint_eq(s->c[1].stream, 1);
	ck_assert_uint_eq(s->c[2].ptr, base + 64 * KIB);
	ck_assert_uint_eq(piece(s, 0, 0)->state, XDM_PIECE_INACTIVE);
	ck_assert_uint_eq(piece(s, 1, 0)->state, XDM_PIECE_ACTIVE);
	free(s);

	/* The block at the second half of a told chunk, which the layer calls free. */
	ntold = 0;
	tell(0, b.ptr - 8 * KIB, 16 * KIB, 1);
	s = walk(rt);
	check_shape(s);
	ck_assert_uint_eq(s->nc, 1);
	ck_assert_uint_eq(piece(s, 0, 0)->state, XDM_PIECE_INACTIVE);
	ck_assert_uint_eq(piece(s, 0, 1)->state, XDM_PIECE_ACTIVE);
	check_blocks(s, &b, 1, NULL, 0);
	free(s);

	TU_OK(xdm_deallocate(rt, &b));
	ntold = 0;
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* Pieces with a gap, or past the chunk's end: a module error, nothing visited. */
START_TEST(a_chunk_its_pieces_do_not_tile_is_refused)
{
	struct xdm_runtime *rt = teller_runtime();
	struct seen *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	ntold = 0;
	tell(0, 0x100000, 8 * KIB, 0);
	tell(1, 0x200000, 8 * KIB, 0);
	told_pieces[1][1].ptr += 256;
	ck_assert_int_eq(xdm_runtime_for_each_chunk(rt, keep, s), XDM_E_MODULE);
	ck_assert_uint_eq(s->nc, 0);
	ck_assert_msg(strstr(xdm_last_error_message(), "chunk_teller: its chunk at 0x200000 ") != NULL,
		      "%s", xdm_last_error_message());

	tell(1, 0x200000, 8 * KIB, 0);
	told_pieces[1][1].bytes += 256;
	ck_assert_int_eq(xdm_runtime_for_each_chunk(rt, keep, s), XDM_E_MODULE);

	tell(1, 0x200000, 8 * KIB, 0);
	told[1].npieces = 0;
	ck_assert_int_eq(xdm_runtime_for_each_chunk(rt, keep, s), XDM_E_MODULE);
	ck_assert_uint_eq(s->nc, 0);
	free(s);
	ntold = 0;
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("chunks");
	TCase *tc = tcase_create("chunks");

	tcase_add_test(tc, a_pool_shows_its_chunks_and_pieces);
	tcase_add_test(tc, over_granules_chunks_are_runs_of_them);
	tcase_add_test(tc, blocks_in_a_thread_cache_are_inactive);
	tcase_add_test(tc, through_a_guard_a_piece_holds_its_block_and_canaries);
	tcase_add_test(tc, through_a_budget_the_pool_answers);
	tcase_add_test(tc, walks_while_threads_churn_keep_their_shape);
	tcase_add_test(tc, without_a_pool_each_live_block_is_a_chunk);
	tcase_add_test(tc, fn_stops_the_walk);
	tcase_add_test(tc, null_arguments_are_invalid);
	tcase_add_test(tc, the_runtime_orders_and_dedupes_what_a_layer_says);
	tcase_add_test(tc, a_chunk_its_pieces_do_not_tile_is_refused);
	tcase_set_timeout(tc, TU_TIMEOUT_S);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
