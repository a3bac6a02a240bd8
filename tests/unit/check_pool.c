/* SPDX-License-Identifier: MIT */
/*
 * check_pool.c - the pool backend on the host platform: how it carves
 * chunks (splitting, coalescing, size classes), whose memory each stream
 * reuses, how an idle chunk moves to another stream behind an event wait,
 * how it grows, trims and stays under max, and the errors it reports.
 *
 * The host platform's streams are real worker queues, so the cross-stream
 * tests hold a stream busy with a host function that waits on a gate the
 * test opens later, and watch what the other stream may run meanwhile.
 * Every number is read where a person would read it: the pool's attributes
 * (layer 0), the host backend's below it (layer 1), and the runtime's stats.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <xdm/module.h>

#include "tests/lib/random_churn.h"
#include "tests/lib/testutil.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

enum { POOL_LAYER = 0, HOST_LAYER = 1 };

/* ---- helpers -------------------------------------------------------------- */

/*
 * These tests watch the arenas themselves, so their pools keep no thread
 * caches in front of them (tcache=0) unless the stack names tcache=:
 * check_pool_tcache tests the caches, and the churns below run with them.
 */
static struct xdm_runtime *pool_runtime(const char *stack)
{
	struct xdm_runtime *rt = NULL;
	char spec[256];

	ck_assert(!strncmp(stack, "pool", 4));
	snprintf(spec, sizeof(spec), "pool%s%s", strstr(stack, "tcache=") ? "" : " tcache=0",
		 stack + 4);
	TU_OK(xdm_runtime_create(0, "host", spec, &rt));
	ck_assert_uint_eq(xdm_runtime_layer_count(rt), 2);
	ck_assert_str_eq(xdm_runtime_layer_name(rt, POOL_LAYER), "pool");
	ck_assert_str_eq(xdm_runtime_layer_name(rt, HOST_LAYER), "host");
	return rt;
}

static void attr_text(struct xdm_runtime *rt, uint32_t layer, const char *name, char *buf,
		      size_t len)
{
	enum xdm_status st = xdm_layer_attr_show(rt, layer, name, buf, len);

	ck_assert_msg(st == XDM_OK, "show %u/%s: %s (%s)", layer, name, xdm_strerror(st),
		      xdm_last_error_message());
}

static uint64_t attr(struct xdm_runtime *rt, uint32_t layer, const char *name)
{
	char buf[64], *end;
	unsigned long long v;

	attr_text(rt, layer, name, buf, sizeof(buf));
	errno = 0;
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && errno == 0 && strcmp(end, "\n") == 0,
		      "%u/%s is not one number and a newline: '%s'", layer, name, buf);
	return v;
}

/* The pool's attributes, and the host backend's below it. */
#define POOL(rt, name) attr((rt), POOL_LAYER, (name))
#define HOST(rt, name) attr((rt), HOST_LAYER, (name))

static void store(struct xdm_runtime *rt, const char *name, const char *value)
{
	enum xdm_status st = xdm_layer_attr_store(rt, POOL_LAYER, name, value);

	ck_assert_msg(st == XDM_OK, "store %s=%s: %s (%s)", name, value, xdm_strerror(st),
		      xdm_last_error_message());
}

static uint64_t waits(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	return st.waits_queued;
}

static unsigned char *mem(const struct xdm_block *b)
{
	return (unsigned char *)(uintptr_t)b->ptr;
}

static void sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		TU_OK(xdm_stream_synchronize(rt, s));
}

/* Everything freed and reaped: the pool and the memory under it are empty. */
static void finish(struct xdm_runtime *rt)
{
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 0);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

static void gate_destroy(struct tu_gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/* A host step that writes (value >= 0) or reads the first byte of memory. */
struct touch {
	unsigned char *mem;
	int value;		/* written, or -1 to read */
	int seen;		/* what a read found */
	atomic_int ran;
};

static void touch_run(void *arg)
{
	struct touch *t = arg;

	if (t->value >= 0)
		memset(t->mem, t->value, 64);
	else
		t->seen = t->mem[0];
	atomic_store(&t->ran, 1);
}

/* Wait up to ms for t to run (a safety net, not a timing); true if it did. */
static bool ran_within(struct touch *t, int ms)
{
	for (int waited = 0; waited < ms; waited += 5) {
		if (atomic_load(&t->ran))
			return true;
		tu_sleep_ms(5);
	}
	return atomic_load(&t->ran) != 0;
}

/* ---- carving: split, coalesce, classes ------------------------------------- */

START_TEST(blocks_split_from_one_chunk_side_by_side)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");
	struct xdm_block b[3];

	for (int i = 0; i < 3; i++) {
		TU_OK(xdm_allocate(rt, 128 * KIB, 0, "split", &b[i]));
		ck_assert_uint_eq(b[i].bytes, 128 * KIB);
		ck_assert_uint_eq(b[i].ptr % XDM_DEFAULT_ALIGN, 0);
	}
	/* Each is carved from the front of what the last one left. */
	ck_assert_uint_eq(b[1].ptr - b[0].ptr, 128 * KIB);
	ck_assert_uint_eq(b[2].ptr - b[1].ptr, 128 * KIB);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_uint_eq(POOL(rt, "in_use"), 384 * KIB);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 640 * KIB);
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 1);
	ck_assert_uint_eq(POOL(rt, "largest_free"), 640 * KIB);
	/* The upstream gave one chunk of exactly chunk bytes, nothing more. */
	ck_assert_uint_eq(HOST(rt, "allocs"), 1);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), MIB);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 384 * KIB);
	memset(mem(&b[0]), 1, 3 * 128 * KIB);	/* one contiguous, real range */
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	finish(rt);
}
END_TEST

START_TEST(freed_neighbours_coalesce_into_the_whole_chunk)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");
	struct xdm_block b[3], whole;
	char frag[16];

	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 128 * KIB, 0, "coalesce", &b[i]));
	/* The middle alone: a hole between two used blocks. */
	TU_OK(xdm_deallocate(rt, &b[1]));
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 2);
	ck_assert_uint_eq(POOL(rt, "largest_free"), 640 * KIB);
	attr_text(rt, POOL_LAYER, "fragmentation", frag, sizeof(frag));
	ck_assert_str_eq(frag, "0.167\n");	/* 1 - 640K / 768K */
	/* Its left neighbour merges with it... */
	TU_OK(xdm_deallocate(rt, &b[0]));
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 2);
	ck_assert_uint_eq(POOL(rt, "largest_free"), 640 * KIB);
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 0);
	/* ...and the right one joins both free sides into the whole chunk. */
	TU_OK(xdm_deallocate(rt, &b[2]));
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 1);
	ck_assert_uint_eq(POOL(rt, "largest_free"), MIB);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), MIB);
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 1);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	attr_text(rt, POOL_LAYER, "fragmentation", frag, sizeof(frag));
	ck_assert_str_eq(frag, "0.000\n");
	/* A block of the whole chunk fits without growing. */
	TU_OK(xdm_allocate(rt, MIB, 0, "whole", &whole));
	ck_assert_uint_eq(whole.ptr, b[0].ptr);
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 0);
	ck_assert_uint_eq(POOL(rt, "largest_free"), 0);
	TU_OK(xdm_deallocate(rt, &whole));
	finish(rt);
}
END_TEST

START_TEST(freed_in_any_order_the_chunk_comes_back_whole)
{
	/* Eight blocks freed in a scrambled order: every merge case happens. */
	static const int order[8] = { 3, 6, 0, 7, 2, 5, 1, 4 };
	struct xdm_runtime *rt = pool_runtime("pool chunk=2M | host");
	struct xdm_block b[8], whole;

	for (int i = 0; i < 8; i++)
		TU_OK(xdm_allocate(rt, 256 * KIB, 0, "order", &b[i]));
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 0);
	for (int i = 0; i < 8; i++)
		TU_OK(xdm_deallocate(rt, &b[order[i]]));
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 1);
	ck_assert_uint_eq(POOL(rt, "largest_free"), 2 * MIB);
	TU_OK(xdm_allocate(rt, 2 * MIB, 0, "whole", &whole));
	ck_assert_uint_eq(whole.ptr, b[0].ptr);
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	TU_OK(xdm_deallocate(rt, &whole));
	finish(rt);
}
END_TEST

START_TEST(small_requests_round_to_their_class)
{
	static const struct { size_t ask, got; } cases[] = {
		{ 1, 256 }, { 256, 256 }, { 300, 512 }, { 4096, 4096 }, { 4097, 4608 },
		{ 5000, 5120 }, { 60000, 61440 }, { 65536, 65536 },
		/* Above small_max (64K): the grain only. */
		{ 65537, 65792 }, { 100000, 100096 },
	};
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");

	ck_assert_uint_eq(POOL(rt, "small_max"), 64 * KIB);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct xdm_block b;

		TU_OK(xdm_allocate(rt, cases[i].ask, 0, "class", &b));
		ck_assert_msg(b.bytes == cases[i].got, "%zu bytes asked: block of %zu, not %zu",
			      cases[i].ask, b.bytes, cases[i].got);
		ck_assert_uint_eq(POOL(rt, "in_use"), cases[i].got);
		TU_OK(xdm_deallocate(rt, &b));
	}
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	/* One block of each small class stays cached (1 and 256 share one). */
	ck_assert_uint_eq(POOL(rt, "cached_bytes"),
			  256 + 512 + 4096 + 4608 + 5120 + 61440 + 65536);
	finish(rt);
}
END_TEST

START_TEST(small_blocks_are_cached_and_reused_lifo)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");
	struct xdm_block a, b, c, d, e, big;

	TU_OK(xdm_allocate(rt, 300, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 300, 0, "b", &b));
	ck_assert_uint_eq(a.bytes, 512);
	ck_assert_uint_eq(b.ptr - a.ptr, 512);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	/* Cached, not merged: two free pieces beside the rest of the chunk. */
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 1024);
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 3);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), MIB);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 0);
	/* A larger class does not take them. */
	TU_OK(xdm_allocate(rt, 600, 0, "e", &e));
	ck_assert_uint_eq(e.bytes, 768);
	ck_assert_uint_ne(e.ptr, a.ptr);
	ck_assert_uint_ne(e.ptr, b.ptr);
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 1024);
	/* The last freed comes back first, for any size of the class. */
	TU_OK(xdm_allocate(rt, 400, 0, "c", &c));
	ck_assert_uint_eq(c.ptr, b.ptr);
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 512);
	TU_OK(xdm_allocate(rt, 257, 0, "d", &d));
	ck_assert_uint_eq(d.ptr, a.ptr);
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 0);
	/* A large block never goes to a cache. */
	TU_OK(xdm_allocate(rt, 128 * KIB, 0, "big", &big));
	TU_OK(xdm_deallocate(rt, &big));
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 0);
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	TU_OK(xdm_deallocate(rt, &e));
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 512 + 512 + 768);
	finish(rt);
}
END_TEST

/*
 * small_max accepts 256 to 1M, and every size of the scheme (every grain
 * to 4K, then eight steps per doubling) up to it is a class: 1M is one.
 * So with small_max=1M a 512K block is a class size and is cached.
 */
START_TEST(small_max_of_1M_is_honoured)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=4M small_max=1M | host");
	struct xdm_block b;

	TU_OK(xdm_allocate(rt, 512 * KIB, 0, "half", &b));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_msg(POOL(rt, "small_max") == MIB,
		      "small_max=1M was configured, the pool shows %" PRIu64,
		      POOL(rt, "small_max"));
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 512 * KIB);
	finish(rt);
}
END_TEST

/* ---- whose memory: per-stream arenas, and chunks moved behind events ------- */

START_TEST(streams_keep_their_partly_used_chunks)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");
	struct xdm_block a, b, c, again;
	char table[256];

	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "a", &a));
	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "b", &b));
	TU_OK(xdm_deallocate(rt, &a));
	/* Stream 1 holds a free piece of 256K, but its chunk is in use. */
	TU_OK(xdm_allocate(rt, 256 * KIB, 2, "c", &c));
	ck_assert_msg(c.ptr + c.bytes <= a.ptr || c.ptr >= a.ptr + MIB,
		      "stream 2 was given memory of stream 1's chunk");
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_eq(POOL(rt, "steals"), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), 2 * MIB);
	attr_text(rt, POOL_LAYER, "stream_free", table, sizeof(table));
	ck_assert_str_eq(table, "1 786432 1\n2 786432 1\n");
	/* Stream 1 gets its own hole back (best fit: exactly 256K). */
	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "again", &again));
	ck_assert_uint_eq(again.ptr, a.ptr);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	TU_OK(xdm_deallocate(rt, &again));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	attr_text(rt, POOL_LAYER, "stream_free", table, sizeof(table));
	ck_assert_str_eq(table, "1 1048576 1\n2 1048576 1\n");
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 2);
	finish(rt);
}
END_TEST

/*
 * The contract of a move: stream 1 is held at a gate, with a write to the
 * block queued behind it, and the block is freed there; stream 2 then asks
 * for the same size, and the pool hands it stream 1's idle chunk.  Stream 2
 * must not run what is queued after that allocation until stream 1 has
 * passed the gate and the write.  A third stream that grows a chunk of its
 * own shows that nothing else holds stream 2 back.
 */
START_TEST(idle_chunk_moves_to_another_stream_behind_an_event)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b1, b2, b3;
	struct tu_gate gate;
	struct touch write1 = { .value = 0x11 };
	struct touch read2 = { .value = -1, .seen = -1 };
	struct touch read3 = { .value = -1, .seen = -1 };
	uint64_t w0;

	tu_gate_init(&gate);
	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "b1", &b1));
	memset(mem(&b1), 0, 64);
	tu_gate_hold(rt, 1, &gate);
	write1.mem = mem(&b1);
	TU_OK(xdm_stream_launch_host(rt, 1, touch_run, &write1));
	TU_OK(xdm_deallocate(rt, &b1));
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 1);
	w0 = waits(rt);

	/* The control: a stream that grows its own chunk runs at once. */
	TU_OK(xdm_allocate(rt, 512 * KIB, 3, "b3", &b3));
	ck_assert_uint_eq(POOL(rt, "steals"), 0);
	ck_assert_uint_eq(waits(rt), w0);
	read3.mem = mem(&b3);
	TU_OK(xdm_stream_launch_host(rt, 3, touch_run, &read3));
	ck_assert_msg(ran_within(&read3, TU_PATIENCE_MS),
		      "stream 3 did not run within %d ms: the test cannot tell a wait from a "
		      "stall", TU_PATIENCE_MS);

	/* The move. */
	TU_OK(xdm_allocate(rt, 256 * KIB, 2, "b2", &b2));
	ck_assert_uint_eq(b2.ptr, b1.ptr);
	ck_assert_uint_eq(POOL(rt, "steals"), 1);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), 768 * KIB);
	read2.mem = mem(&b2);
	TU_OK(xdm_stream_launch_host(rt, 2, touch_run, &read2));
	tu_sleep_ms(100);
	ck_assert_msg(!atomic_load(&read2.ran),
		      "stream 2 ran work on a chunk moved from stream 1 while stream 1 was still "
		      "held before its last use of it");
	ck_assert(!atomic_load(&write1.ran));
	/* One event wait did it: stream 2 behind stream 1. */
	ck_assert_uint_eq(waits(rt) - w0, 1);

	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 2));
	ck_assert(atomic_load(&read2.ran));
	ck_assert(atomic_load(&write1.ran));
	/* Stream 2 saw stream 1's last write: it ran after it. */
	ck_assert_int_eq(read2.seen, 0x11);
	TU_OK(xdm_deallocate(rt, &b2));
	TU_OK(xdm_deallocate(rt, &b3));
	sync_all(rt);
	gate_destroy(&gate);
	finish(rt);
}
END_TEST

/*
 * The way back: a moved chunk is freed upstream on the stream it was
 * allocated on (1), which must first wait for its last owner (2), held at a
 * gate with a write to the block behind it.
 */
START_TEST(trimmed_moved_chunk_is_freed_after_its_last_owner)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b1, b2;
	struct tu_gate gate;
	struct touch write2 = { .value = 0x22 };
	uint64_t w0;

	tu_gate_init(&gate);
	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "b1", &b1));
	TU_OK(xdm_deallocate(rt, &b1));
	TU_OK(xdm_allocate(rt, 256 * KIB, 2, "b2", &b2));
	ck_assert_uint_eq(b2.ptr, b1.ptr);
	ck_assert_uint_eq(POOL(rt, "steals"), 1);
	tu_gate_hold(rt, 2, &gate);
	write2.mem = mem(&b2);
	TU_OK(xdm_stream_launch_host(rt, 2, touch_run, &write2));
	TU_OK(xdm_deallocate(rt, &b2));
	w0 = waits(rt);
	store(rt, "trim", "1");
	ck_assert_uint_eq(POOL(rt, "trimmed"), 1);
	ck_assert_uint_eq(POOL(rt, "chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	/* The free is queued on stream 1, behind stream 2's gate. */
	tu_sleep_ms(50);
	ck_assert_msg(HOST(rt, "bytes_outstanding") == 256 * KIB,
		      "the moved chunk went back upstream while its last owner was still held");
	ck_assert_uint_eq(HOST(rt, "pending_frees"), 1);
	ck_assert(!atomic_load(&write2.ran));
	ck_assert_uint_eq(waits(rt) - w0, 1);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 1));
	ck_assert(atomic_load(&write2.ran));
	ck_assert_uint_eq(HOST(rt, "pending_frees"), 0);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 0);
	sync_all(rt);
	gate_destroy(&gate);
	finish(rt);
}
END_TEST

START_TEST(chunk_moves_only_when_wholly_free)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block a, b, c, d;

	TU_OK(xdm_allocate(rt, 128 * KIB, 1, "a", &a));
	TU_OK(xdm_allocate(rt, 128 * KIB, 1, "b", &b));
	TU_OK(xdm_deallocate(rt, &a));
	/* Half of stream 1's chunk is free, but b still lives there. */
	TU_OK(xdm_allocate(rt, 128 * KIB, 2, "c", &c));
	ck_assert_uint_eq(POOL(rt, "steals"), 0);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_ne(c.ptr, a.ptr);
	/* Now it is wholly free, and stream 3 takes it rather than grow. */
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_allocate(rt, 128 * KIB, 3, "d", &d));
	ck_assert_uint_eq(d.ptr, a.ptr);
	ck_assert_uint_eq(POOL(rt, "steals"), 1);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	sync_all(rt);
	finish(rt);
}
END_TEST

START_TEST(a_steal_takes_the_smallest_idle_chunk_that_fits)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block big, small, x, y, z;

	TU_OK(xdm_allocate(rt, MIB, 1, "big", &big));		/* a chunk of 1M */
	TU_OK(xdm_allocate(rt, 200 * KIB, 1, "small", &small));	/* one of 256K */
	TU_OK(xdm_deallocate(rt, &big));
	TU_OK(xdm_deallocate(rt, &small));
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 2);
	TU_OK(xdm_allocate(rt, 100 * KIB, 2, "x", &x));
	ck_assert_uint_eq(x.ptr, small.ptr);
	TU_OK(xdm_allocate(rt, 100 * KIB, 3, "y", &y));
	ck_assert_uint_eq(y.ptr, big.ptr);
	ck_assert_uint_eq(POOL(rt, "steals"), 2);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	/* Nothing idle is left: stream 4 grows. */
	TU_OK(xdm_allocate(rt, 100 * KIB, 4, "z", &z));
	ck_assert_uint_eq(POOL(rt, "growths"), 3);
	ck_assert_uint_eq(POOL(rt, "steals"), 2);
	TU_OK(xdm_deallocate(rt, &x));
	TU_OK(xdm_deallocate(rt, &y));
	TU_OK(xdm_deallocate(rt, &z));
	sync_all(rt);
	finish(rt);
}
END_TEST

/* ---- growth ---------------------------------------------------------------- */

START_TEST(fixed_growth_adds_chunks_of_chunk_bytes)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b[3];

	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 128 * KIB, 0, "fixed", &b[i]));
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), 512 * KIB);
	ck_assert_uint_eq(POOL(rt, "in_use"), 384 * KIB);
	ck_assert_uint_eq(HOST(rt, "allocs"), 2);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 512 * KIB);
	ck_assert_uint_eq(POOL(rt, "chunk"), 256 * KIB);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	finish(rt);
}
END_TEST

START_TEST(double_growth_doubles_each_chunk)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K growth=double | host");
	static const size_t sizes[3] = { 256 * KIB, 512 * KIB, MIB };
	struct xdm_block b[3];
	size_t reserved = 0;

	for (int i = 0; i < 3; i++) {
		TU_OK(xdm_allocate(rt, sizes[i], 0, "double", &b[i]));
		reserved += sizes[i];
		ck_assert_uint_eq(POOL(rt, "growths"), (uint64_t)i + 1);
		ck_assert_uint_eq(POOL(rt, "reserved"), reserved);
	}
	ck_assert_uint_eq(POOL(rt, "reserved"), 256 * KIB + 512 * KIB + MIB);
	/* Each chunk was exactly its block: nothing free. */
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 0);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	finish(rt);
}
END_TEST

START_TEST(double_growth_stops_at_chunk_max)
{
	struct xdm_runtime *rt =
		pool_runtime("pool chunk=256K growth=double chunk_max=512K | host");
	struct xdm_block b[5];

	/* Chunks of 256K, 512K, 512K: the fourth 256K fits in the third. */
	for (int i = 0; i < 5; i++)
		TU_OK(xdm_allocate(rt, 256 * KIB, 0, "capped", &b[i]));
	ck_assert_uint_eq(POOL(rt, "growths"), 3);
	ck_assert_uint_eq(POOL(rt, "reserved"), 256 * KIB + 512 * KIB + 512 * KIB);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 0);
	for (int i = 0; i < 5; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	finish(rt);
}
END_TEST

START_TEST(initial_sizes_the_first_chunk_and_large_requests_get_their_own)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K initial=1M | host");
	struct xdm_block a, b, c, d;

	TU_OK(xdm_allocate(rt, 128 * KIB, 0, "a", &a));
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	/* The rest of the first chunk, exactly. */
	TU_OK(xdm_allocate(rt, 896 * KIB, 0, "b", &b));
	ck_assert_uint_eq(b.ptr, a.ptr + 128 * KIB);
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	/* Larger than chunk: a chunk of its own size. */
	TU_OK(xdm_allocate(rt, 300 * KIB, 0, "c", &c));
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB + 300 * KIB);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 0);
	/* And after it, chunk bytes again. */
	TU_OK(xdm_allocate(rt, 64 * KIB + 1, 0, "d", &d));
	ck_assert_uint_eq(POOL(rt, "growths"), 3);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB + 300 * KIB + 256 * KIB);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), MIB + 300 * KIB + 256 * KIB);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	finish(rt);
}
END_TEST

/* ---- trim ----------------------------------------------------------------- */

START_TEST(trim_gives_every_idle_chunk_back)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b[4], s;

	for (int i = 0; i < 4; i++)
		TU_OK(xdm_allocate(rt, 256 * KIB, (xdm_stream_id)(i % 2), "trim", &b[i]));
	TU_OK(xdm_allocate(rt, 700, 2, "small", &s));
	ck_assert_uint_eq(POOL(rt, "chunks"), 5);
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_deallocate(rt, &s));
	/* The small block is cached: its chunk is not idle until merged. */
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 4);
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 768);
	store(rt, "trim", "1");
	ck_assert_uint_eq(POOL(rt, "chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 5);
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 0);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 0);
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 0);
	/* The upstream frees on the chunks' streams: gone after a reap. */
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 0);
	ck_assert_uint_eq(HOST(rt, "frees"), 5);
	/* A trim with nothing idle does nothing. */
	store(rt, "trim", "1\n");
	ck_assert_uint_eq(POOL(rt, "trimmed"), 5);
	/* The pool grows again afterwards. */
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "again", &b[0]));
	ck_assert_uint_eq(POOL(rt, "reserved"), 256 * KIB);
	ck_assert_uint_eq(POOL(rt, "growths"), 6);
	TU_OK(xdm_deallocate(rt, &b[0]));
	finish(rt);
}
END_TEST

START_TEST(reap_pending_trims)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block a, b;

	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "b", &b));
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 512 * KIB);
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(POOL(rt, "chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 2);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 0);
	ck_assert_uint_eq(HOST(rt, "pending_frees"), 0);
	finish(rt);
}
END_TEST

/*
 * keep=true (a CUDA graph's private pool): neither a reap nor a refused
 * growth gives a chunk back, since a replay still writes where the capture
 * found its blocks; only a write to trim (or the pool's end) does.
 */
START_TEST(keep_holds_chunks_until_trim_is_written)
{
	struct xdm_runtime *rt = pool_runtime("pool keep=true max=512K chunk=256K | host");
	struct xdm_block a, b, big;

	ck_assert_uint_eq(POOL(rt, "keep"), 1);
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 256 * KIB, 1, "b", &b));
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(POOL(rt, "trimmed"), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 512 * KIB);
	/* Without keep this growth would trim both idle chunks to fit max. */
	ck_assert_int_eq(xdm_allocate(rt, 512 * KIB, 2, "big", &big), XDM_E_OUT_OF_MEMORY);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 512 * KIB);
	store(rt, "trim", "1");
	ck_assert_uint_eq(POOL(rt, "trimmed"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	TU_OK(xdm_allocate(rt, 512 * KIB, 2, "big", &big));
	TU_OK(xdm_deallocate(rt, &big));
	store(rt, "trim", "1");
	finish(rt);
}
END_TEST

/*
 * xdm_allocate_at: blocks freed go back at exactly their old addresses, as
 * torch's CUDA graph trees put a graph's pool back to a checkpoint; a place
 * that is taken, outside the chunks or of another stream is refused and
 * changes nothing.
 */
static bool overlaps(const struct xdm_block *a, const struct xdm_block *b)
{
	return a->ptr < b->ptr + b->bytes && b->ptr < a->ptr + a->bytes;
}

static void put_back_at(const char *stack)
{
	struct xdm_runtime *rt = pool_runtime(stack);
	static const size_t sizes[] = { 300, 64 * KIB, 256 * KIB };
	struct xdm_block old[3], now[3], other, spare;
	uint64_t reserved;

	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, sizes[i], 0, "old", &old[i]));
	reserved = POOL(rt, "reserved");
	/* A live block's place is taken. */
	ck_assert_int_eq(xdm_allocate_at(rt, old[1].ptr, sizes[1], 0, "at", &spare),
			 XDM_E_OUT_OF_MEMORY);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &old[i]));
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	/* Back in a different order than they were carved. */
	for (int i = 2; i >= 0; i--) {
		TU_OK(xdm_allocate_at(rt, old[i].ptr, sizes[i], 0, "at", &now[i]));
		ck_assert_uint_eq(now[i].ptr, old[i].ptr);
		ck_assert_uint_eq(now[i].bytes, old[i].bytes);
	}
	ck_assert_uint_eq(POOL(rt, "in_use"), old[0].bytes + old[1].bytes + old[2].bytes);
	ck_assert_uint_eq(POOL(rt, "reserved"), reserved);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), old[0].bytes + old[1].bytes + old[2].bytes);
	/* The pool carves around them. */
	TU_OK(xdm_allocate(rt, 64 * KIB, 0, "other", &other));
	for (int i = 0; i < 3; i++)
		ck_assert(!overlaps(&other, &now[i]));
	/* Misaligned, outside every chunk, straddling a live block, another stream. */
	ck_assert_int_eq(xdm_allocate_at(rt, other.ptr + other.bytes + 1, 256, 0, "at", &spare),
			 XDM_E_INVALID);
	ck_assert_int_eq(xdm_allocate_at(rt, old[2].ptr + 64 * MIB, 256, 0, "at", &spare),
			 XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(xdm_allocate_at(rt, other.ptr - 256, 512, 0, "at", &spare),
			 XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(xdm_allocate_at(rt, other.ptr + other.bytes, 256, 1, "at", &spare),
			 XDM_E_OUT_OF_MEMORY);
	ck_assert_uint_eq(POOL(rt, "in_use"),
			  old[0].bytes + old[1].bytes + old[2].bytes + other.bytes);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &now[i]));
	TU_OK(xdm_deallocate(rt, &other));
	/* Whole again: the chunk serves its full size in one piece. */
	TU_OK(xdm_allocate(rt, 1 * MIB, 0, "whole", &spare));
	ck_assert_uint_eq(POOL(rt, "reserved"), reserved);
	TU_OK(xdm_deallocate(rt, &spare));
	store(rt, "trim", "1");
	finish(rt);
}

START_TEST(allocate_at_puts_freed_blocks_back_where_they_were)
{
	put_back_at("pool keep=true chunk=1M | host");
}
END_TEST

/* A block this thread just freed into its cache is free again for it. */
START_TEST(allocate_at_finds_blocks_in_this_threads_cache)
{
	put_back_at("pool keep=true chunk=1M tcache=2M | host");
}
END_TEST

/*
 * Through the adaptors: the budget charges a block put back at its address
 * and the log records it; a guard, whose blocks sit inside redzones of its
 * own making, cannot, and says so.
 */
START_TEST(allocate_at_passes_budget_and_log_and_a_guard_refuses)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b, at;
	struct xdm_stats stats;
	char stack[256];

	snprintf(stack, sizeof(stack), "budget key=check-pool-at-%d limit=1M credit=0 | "
		 "logging sink=memory | pool keep=true tcache=0 chunk=1M | host", (int)getpid());
	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	TU_OK(xdm_allocate(rt, 512 * KIB, 0, "b", &b));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_allocate_at(rt, b.ptr, 512 * KIB, 0, "at", &at));
	ck_assert_uint_eq(at.ptr, b.ptr);
	ck_assert_uint_eq(attr(rt, 0, "used"), 512 * KIB);
	/* Past the budget's limit it is refused as any allocation is. */
	ck_assert_int_eq(xdm_allocate_at(rt, b.ptr + 512 * KIB, 768 * KIB, 0, "at", &b),
			 XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(attr(rt, 0, "used"), 512 * KIB);
	xdm_runtime_stats(rt, &stats);
	ck_assert_uint_eq(stats.blocks_outstanding, 1);
	ck_assert_uint_eq(stats.failures, 1);
	TU_OK(xdm_deallocate(rt, &at));
	ck_assert_uint_eq(attr(rt, 0, "used"), 0);
	TU_OK(xdm_runtime_destroy(rt));

	TU_OK(xdm_runtime_create(0, "host", "guard | pool tcache=0 | host", &rt));
	TU_OK(xdm_allocate(rt, 4 * KIB, 0, "b", &b));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(xdm_allocate_at(rt, b.ptr, 4 * KIB, 0, "at", &at), XDM_E_NOT_SUPPORTED);
	ck_assert_str_eq(xdm_last_error_message(), "guard: cannot allocate at a given address");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(chunk_with_a_live_block_is_never_trimmed)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");
	struct xdm_block live, gone, tiny;

	TU_OK(xdm_allocate(rt, 256, 0, "tiny", &tiny));		/* one grain of a 1M chunk */
	TU_OK(xdm_allocate(rt, 2 * MIB, 0, "gone", &gone));	/* a chunk of its own */
	TU_OK(xdm_allocate(rt, 512 * KIB, 1, "live", &live));	/* stream 1's chunk */
	TU_OK(xdm_deallocate(rt, &gone));
	store(rt, "trim", "1");
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(POOL(rt, "trimmed"), 1);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), 2 * MIB);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), 2 * MIB);
	/* The survivors' memory is still there to use. */
	memset(mem(&live), 0x5a, 512 * KIB);
	memset(mem(&tiny), 0x5b, 256);
	ck_assert_uint_eq(mem(&live)[512 * KIB - 1], 0x5a);
	TU_OK(xdm_deallocate(rt, &live));
	TU_OK(xdm_deallocate(rt, &tiny));
	finish(rt);
}
END_TEST

/* ---- max ------------------------------------------------------------------ */

START_TEST(max_bounds_the_pool_and_the_refusal_leaks_nothing)
{
	struct xdm_runtime *rt = pool_runtime("pool max=1M chunk=512K | host");
	struct xdm_block b[4], extra, after;
	struct xdm_stats before, now;
	struct xdm_error err;
	enum xdm_status st;

	ck_assert_uint_eq(POOL(rt, "max"), MIB);
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_allocate(rt, 256 * KIB, 0, "bounded", &b[i]));
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	xdm_runtime_stats(rt, &before);
	memset(&extra, 0, sizeof(extra));
	st = xdm_allocate(rt, 256 * KIB, 0, "one too many", &extra);
	err = *xdm_last_error();
	ck_assert_msg(st == XDM_E_OUT_OF_MEMORY, "got %s (%s)", xdm_strerror(st), err.message);
	ck_assert_int_eq(err.code, XDM_E_OUT_OF_MEMORY);
	ck_assert_msg(strstr(err.message, "max 1048576"), "the message does not name the max: %s",
		      err.message);
	xdm_runtime_stats(rt, &now);
	ck_assert_uint_eq(now.failures, before.failures + 1);
	ck_assert_uint_eq(now.allocs, before.allocs);
	ck_assert_uint_eq(now.blocks_outstanding, before.blocks_outstanding);
	ck_assert_uint_eq(POOL(rt, "in_use"), MIB);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), MIB);
	/* A small one is refused too, and so is one larger than max. */
	ck_assert_int_eq(xdm_allocate(rt, 300, 0, "small", &extra), XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(xdm_allocate(rt, 2 * MIB, 1, "huge", &extra), XDM_E_OUT_OF_MEMORY);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	/* A free makes room again, in place. */
	TU_OK(xdm_deallocate(rt, &b[2]));
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "after", &after));
	ck_assert_uint_eq(after.ptr, b[2].ptr);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	b[2] = after;
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	finish(rt);
}
END_TEST

START_TEST(max_gives_idle_chunks_of_other_streams_back_to_make_room)
{
	struct xdm_runtime *rt = pool_runtime("pool max=1M chunk=512K | host");
	struct xdm_block a, big;
	char table[128];

	TU_OK(xdm_allocate(rt, 512 * KIB, 1, "a", &a));
	TU_OK(xdm_deallocate(rt, &a));
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 1);
	/* 768K: stream 1's idle 512K cannot serve it, and 512K + 768K > max. */
	TU_OK(xdm_allocate(rt, 768 * KIB, 0, "big", &big));
	ck_assert_uint_eq(POOL(rt, "steals"), 0);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 1);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_eq(POOL(rt, "reserved"), 768 * KIB);
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 768 * KIB);
	attr_text(rt, POOL_LAYER, "stream_free", table, sizeof(table));
	ck_assert_str_eq(table, "0 0 1\n1 0 0\n");
	memset(mem(&big), 1, 768 * KIB);
	TU_OK(xdm_deallocate(rt, &big));
	finish(rt);
}
END_TEST

/*
 * max is writable at run time (torch's set_per_process_memory_fraction
 * writes it).  Raising it lets the pool grow again; lowering it below what
 * is reserved gives nothing back and only refuses growth, while frees and
 * the free room of the chunks it holds still serve requests; 0 lifts it.
 */
START_TEST(max_store_bounds_the_next_growth)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=512K | host");
	struct xdm_device_info dev;
	struct xdm_block a, b, c, d, e;
	uint64_t half;

	ck_assert_uint_eq(POOL(rt, "max"), 0);
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "b", &b));
	ck_assert_uint_eq(POOL(rt, "reserved"), 512 * KIB);

	/* As echo writes it; the next growth is within it. */
	store(rt, "max", "1M\n");
	ck_assert_uint_eq(POOL(rt, "max"), MIB);
	TU_OK(xdm_allocate(rt, 512 * KIB, 0, "c", &c));
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_int_eq(xdm_allocate(rt, 256 * KIB, 0, "over", &d), XDM_E_OUT_OF_MEMORY);
	ck_assert_msg(strstr(xdm_last_error_message(), "max 1048576"), "%s",
		      xdm_last_error_message());

	/* Below reserved: nothing is given back, growth is refused. */
	store(rt, "max", "768K");
	ck_assert_uint_eq(POOL(rt, "max"), 768 * KIB);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	TU_OK(xdm_deallocate(rt, &c));
	/* c's chunk is idle, yet reserved stays until a refill trims it. */
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	/* Room in a chunk held already serves a request without growth. */
	TU_OK(xdm_allocate(rt, 512 * KIB, 0, "c again", &c));
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_int_eq(xdm_allocate(rt, 256 * KIB, 0, "over", &d), XDM_E_OUT_OF_MEMORY);
	ck_assert_msg(strstr(xdm_last_error_message(), "max 786432"), "%s",
		      xdm_last_error_message());
	ck_assert_uint_eq(POOL(rt, "growths"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);

	/* 0 lifts the bound. */
	store(rt, "max", "0");
	ck_assert_uint_eq(POOL(rt, "max"), 0);
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "d", &d));
	TU_OK(xdm_allocate(rt, 2 * MIB, 0, "e", &e));
	ck_assert_uint_eq(POOL(rt, "growths"), 4);

	/* A share of the device, as in the config. */
	TU_OK(xdm_runtime_device(rt, &dev));
	TU_OK(xdm_parse_size("50%", dev.total_bytes, &half));
	ck_assert_uint_gt(half, 0);
	store(rt, "max", "50%");
	ck_assert_uint_eq(POOL(rt, "max"), half);

	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	TU_OK(xdm_deallocate(rt, &e));
	finish(rt);
}
END_TEST

/*
 * A free block that fits is always found.  Seventeen free pieces share the
 * bin of a 300K request: sixteen of 288K (too small), freed last, and one
 * of 319K, freed first, so that it sits seventeenth in the bin's list.
 * Used 256-byte blocks keep them from merging, and the rest of the chunk
 * is used too, so no larger bin holds anything.  With the pool at max, a
 * 300K request must be served from the 319K piece, not refused.
 */
START_TEST(a_fitting_free_block_is_found_past_the_first_sixteen_of_its_bin)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=8M max=8M | host");
	struct xdm_block fit, small[16], sep[17], tail, b;
	enum xdm_status st;

	TU_OK(xdm_allocate(rt, 319 * KIB, 0, "fit", &fit));
	TU_OK(xdm_allocate(rt, 256, 0, "sep", &sep[0]));
	for (int i = 0; i < 16; i++) {
		TU_OK(xdm_allocate(rt, 288 * KIB, 0, "small", &small[i]));
		TU_OK(xdm_allocate(rt, 256, 0, "sep", &sep[i + 1]));
	}
	TU_OK(xdm_allocate(rt, POOL(rt, "largest_free"), 0, "tail", &tail));
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	TU_OK(xdm_deallocate(rt, &fit));
	for (int i = 0; i < 16; i++)
		TU_OK(xdm_deallocate(rt, &small[i]));
	ck_assert_uint_eq(POOL(rt, "free_blocks"), 17);
	ck_assert_uint_eq(POOL(rt, "largest_free"), 319 * KIB);

	st = xdm_allocate(rt, 300 * KIB, 0, "needs the 319K piece", &b);
	ck_assert_msg(st == XDM_OK,
		      "300K refused (%s: %s) although a free piece of 319K sits in the arena "
		      "(largest_free %" PRIu64 ")", xdm_strerror(st), xdm_last_error_message(),
		      POOL(rt, "largest_free"));
	ck_assert_uint_eq(b.ptr, fit.ptr);
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &tail));
	for (int i = 0; i < 17; i++)
		TU_OK(xdm_deallocate(rt, &sep[i]));
	finish(rt);
}
END_TEST

/* ---- bad input, typed ------------------------------------------------------ */

START_TEST(bad_parameters_are_config_errors)
{
	static const struct { const char *stack, *needle; } cases[] = {
		{ "pool growth=sideways | host", "sideways" },
		{ "pool small_max=2M | host", "small_max" },
		{ "pool small_max=128 | host", "small_max" },
		{ "pool chunk=0 | host", "chunk" },
		{ "pool keep=true trim_ms=10 | host", "keep" },
		{ "pool keep=maybe | host", "keep" },
		{ "pool", "backend" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tu_expect_config_error("host", cases[i].stack, cases[i].needle);
}
END_TEST

START_TEST(absurd_request_is_invalid_before_any_growth)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b;

	ck_assert_int_eq(xdm_allocate(rt, (size_t)1 << 51, 0, "absurd", &b), XDM_E_INVALID);
	ck_assert_int_eq(xdm_allocate(rt, SIZE_MAX, 0, "absurd", &b), XDM_E_INVALID);
	ck_assert_uint_eq(POOL(rt, "growths"), 0);
	ck_assert_uint_eq(HOST(rt, "allocs"), 0);
	finish(rt);
}
END_TEST

/*
 * The tree directory of the runtime whose pool has this chunk parameter
 * (tests pick one no other runtime of the process has): a runtime is "0"
 * only while no other of ordinal 0 lives, which a failed earlier test
 * under CK_FORK=no may break.
 */
struct find_dir {
	const char *chunk;
	char name[64];
};

static int match_chunk(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct find_dir *f = arg;
	char path[128], *text = NULL;
	size_t len;
	int hit;

	if (!node->dir)
		return 0;
	snprintf(path, sizeof(path), "%s/pool/chunk", name);
	if (xdm_tree_show(path, &text, &len))
		return 0;
	hit = strcmp(text, f->chunk) == 0;
	free(text);
	if (hit)
		snprintf(f->name, sizeof(f->name), "%s", name);
	return hit;
}

static void tree_path(const char *chunk, const char *file, char *out, size_t len)
{
	struct find_dir f = { .chunk = chunk };

	ck_assert_int_eq(xdm_tree_list("", match_chunk, &f), 1);
	snprintf(out, len, "%s/pool/%s", f.name, file);
}

START_TEST(bad_attribute_writes_are_invalid_and_change_nothing)
{
	/* 256K + 256: a chunk size no other test uses, to find its directory. */
	struct xdm_runtime *rt = pool_runtime("pool chunk=262400 | host");
	struct xdm_block a, b;
	char buf[64], trim[128], peak[128];

	TU_OK(xdm_allocate(rt, 262400, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 262400, 0, "b", &b));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 2 * 262400);
	ck_assert_uint_eq(POOL(rt, "idle_chunks"), 1);

	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "reserved_peak", "5"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "reserved_peak", "00"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "reserved_peak", ""), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "reserved_peak", "0\n\n"), XDM_E_INVALID);
	ck_assert_msg(strstr(xdm_last_error_message(), "reserved_peak"), "%s",
		      xdm_last_error_message());
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 2 * 262400);

	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "trim", "0"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "trim", "2"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "trim", "yes"), XDM_E_INVALID);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 0);

	/* Read-only files refuse writes; the action refuses reads. */
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "reserved", "0"), XDM_E_NOT_SUPPORTED);
	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "trim", buf, sizeof(buf)), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "no_such", buf, sizeof(buf)), XDM_E_INVALID);

	/* The tree maps the same refusals to errno, under the "pool" group. */
	tree_path("262400\n", "trim", trim, sizeof(trim));
	tree_path("262400\n", "reserved_peak", peak, sizeof(peak));
	ck_assert_int_eq(xdm_tree_store(trim, "2\n", 2), -EINVAL);
	ck_assert_int_eq(xdm_tree_store(peak, "7", 1), -EINVAL);
	ck_assert_uint_eq(POOL(rt, "chunks"), 2);
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 2 * 262400);
	ck_assert_int_eq(xdm_tree_store(trim, "1\n", 2), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 1);

	TU_OK(xdm_deallocate(rt, &a));
	finish(rt);
}
END_TEST

START_TEST(max_store_refuses_bad_sizes_and_changes_nothing)
{
	static const char *const bad[] = { "", "\n", "abc", "-1", "1Q", "8G\n\n", "1 G",
					   "12345678901234567890123", "0x10",
					   /* longer than any size */
					   "111111111111111111111111111111111111111111111111111111"
					   "11111111111K" };
	struct xdm_runtime *rt = pool_runtime("pool chunk=524544 max=3M | host");
	char path[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(xdm_layer_attr_store(rt, 0, "max", bad[i]) == XDM_E_INVALID,
			      "max took '%s'", bad[i]);
		ck_assert_uint_eq(POOL(rt, "max"), 3 * MIB);
	}
	/*
	 * Through the tree: a NUL inside, and errno for a bad value.  524288 +
	 * 256 is a chunk size no other test uses, to find the directory.
	 */
	tree_path("524544\n", "max", path, sizeof(path));
	ck_assert_int_eq(xdm_tree_store(path, "1M\0", 3), -EINVAL);
	ck_assert_int_eq(xdm_tree_store(path, "lots", 4), -EINVAL);
	ck_assert_uint_eq(POOL(rt, "max"), 3 * MIB);
	ck_assert_int_eq(xdm_tree_store(path, "2M\n", 3), 0);
	ck_assert_uint_eq(POOL(rt, "max"), 2 * MIB);
	finish(rt);
}
END_TEST

START_TEST(double_free_is_use_after_free_and_the_pool_is_untouched)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M | host");
	struct xdm_block a, b, copy, stale;
	uint64_t in_use, free_blocks;

	TU_OK(xdm_allocate(rt, 128 * KIB, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 128 * KIB, 0, "b", &b));
	copy = a;
	TU_OK(xdm_deallocate(rt, &a));
	in_use = POOL(rt, "in_use");
	free_blocks = POOL(rt, "free_blocks");
	ck_assert_uint_eq(in_use, 128 * KIB);
	ck_assert_int_eq(xdm_deallocate(rt, &copy), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, a.generation);
	ck_assert_int_eq(copy.state, XDM_BLOCK_LIVE);	/* refused, not consumed */
	ck_assert_uint_eq(POOL(rt, "in_use"), in_use);
	ck_assert_uint_eq(POOL(rt, "free_blocks"), free_blocks);
	/* The address handed out again: the old handle is still refused, and
	 * the new block is not freed through it. */
	TU_OK(xdm_allocate(rt, 128 * KIB, 0, "again", &stale));
	ck_assert_uint_eq(stale.ptr, a.ptr);
	ck_assert_int_eq(xdm_deallocate(rt, &copy), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(POOL(rt, "in_use"), 256 * KIB);
	TU_OK(xdm_deallocate(rt, &stale));
	TU_OK(xdm_deallocate(rt, &b));
	finish(rt);
}
END_TEST

START_TEST(reserved_peak_restarts_from_reserved)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b[3];

	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 256 * KIB, 0, "peak", &b[i]));
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 768 * KIB);
	TU_OK(xdm_deallocate(rt, &b[1]));
	TU_OK(xdm_deallocate(rt, &b[2]));
	store(rt, "trim", "1");
	ck_assert_uint_eq(POOL(rt, "reserved"), 256 * KIB);
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 768 * KIB);
	store(rt, "reserved_peak", "0\n");
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 256 * KIB);
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "peak", &b[1]));
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), 512 * KIB);
	TU_OK(xdm_deallocate(rt, &b[0]));
	TU_OK(xdm_deallocate(rt, &b[1]));
	finish(rt);
}
END_TEST

START_TEST(destroy_with_live_blocks_returns_everything)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct xdm_block b[5];

	for (int i = 0; i < 5; i++)
		TU_OK(xdm_allocate(rt, 100 * KIB + (size_t)i * 1000, (xdm_stream_id)i, "left",
				   &b[i]));
	ck_assert_uint_eq(POOL(rt, "chunks"), 5);
	/* LeakSanitizer (the sanitizer build) sees anything left behind. */
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- threads ---------------------------------------------------------------- */

enum { CHURN_THREADS = 4, CHURN_PAIRS = 20000, CHURN_LIVE = 4 };

/* Sizes from one byte to 384K, small ones most often. */
static size_t churn_size(uint64_t r)
{
	return r % 4 ? 1 + (size_t)(r >> 8) % (16 * KIB) : 1 + (size_t)(r >> 8) % (384 * KIB);
}

/* A churning thread per stream, each marking its blocks. */
static void start_churn(struct xdm_runtime *rt, struct tu_churn *c, pthread_t *t)
{
	for (int i = 0; i < CHURN_THREADS; i++) {
		c[i] = (struct tu_churn){ .rt = rt, .stream = (xdm_stream_id)i,
					  .pairs = CHURN_PAIRS, .live = CHURN_LIVE,
					  .size = churn_size, .mark = true, .cross_stream = -1 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, tu_churn_run, &c[i]), 0);
	}
}

START_TEST(threads_churn_on_their_own_streams)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=1M tcache=256K | host");
	struct tu_churn c[CHURN_THREADS];
	pthread_t t[CHURN_THREADS];
	struct xdm_stats st;
	uint64_t growths, peak = 0;

	start_churn(rt, c, t);
	for (int i = 0; i < CHURN_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < CHURN_THREADS; i++) {
		ck_assert_msg(c[i].st == XDM_OK, "thread %d after %ld pairs: %s (%s)", i,
			      c[i].done, xdm_strerror(c[i].st), c[i].msg);
		ck_assert_int_eq(c[i].done, CHURN_PAIRS);
		if (c[i].peak > peak)
			peak = c[i].peak;
	}
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.allocs, (uint64_t)CHURN_THREADS * CHURN_PAIRS);
	ck_assert_uint_eq(st.frees, st.allocs);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	/* Every byte of every chunk is free again, and all of it is the upstream's. */
	ck_assert_uint_eq(POOL(rt, "free_bytes"), POOL(rt, "reserved"));
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), POOL(rt, "reserved"));
	/*
	 * How many chunks the threads needed depends on how they interleaved:
	 * a thread that runs while the others sleep, or after they are done,
	 * takes the idle chunks they left (a steal) rather than grow, so on a
	 * loaded machine two chunks can serve all four.  What every schedule
	 * keeps: nothing was given back (no trim, no max), so every chunk ever
	 * grown is still held, all of it came from the upstream, and reserved
	 * never went down; each move queued exactly one event wait; and at any
	 * moment the blocks a thread held lay in reserved chunks.
	 */
	growths = POOL(rt, "growths");
	ck_assert_uint_ge(growths, 1);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), growths);
	ck_assert_uint_eq(HOST(rt, "allocs"), growths);
	ck_assert_uint_eq(POOL(rt, "reserved_peak"), POOL(rt, "reserved"));
	ck_assert_uint_eq(st.waits_queued, POOL(rt, "steals"));
	ck_assert_msg(POOL(rt, "reserved") >= peak,
		      "reserved %" PRIu64 " is less than the %" PRIu64 " bytes one thread held "
		      "at once", POOL(rt, "reserved"), peak);
	printf("churn: %d threads x %d pairs: growths %" PRIu64 ", steals %" PRIu64
	       ", chunks %" PRIu64 ", reserved %" PRIu64 "\n", CHURN_THREADS, CHURN_PAIRS,
	       POOL(rt, "growths"), POOL(rt, "steals"), POOL(rt, "chunks"),
	       POOL(rt, "reserved"));
	store(rt, "trim", "1");
	ck_assert_uint_eq(POOL(rt, "chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), 0);
	ck_assert_uint_eq(POOL(rt, "trimmed"), growths);
	sync_all(rt);
	finish(rt);
}
END_TEST

/*
 * The same churn while another thread trims and reads every attribute that
 * looks into the arenas: a trim never takes a chunk with a live block (the
 * churn checks its marks), and the counters still add up at the end.
 */
struct meddler {
	struct xdm_runtime *rt;
	atomic_int stop;
	long trims;
	enum xdm_status st;
};

static void *meddle_run(void *arg)
{
	static const char *const files[] = {
		"largest_free", "fragmentation", "stream_free", "free_blocks", "idle_chunks",
	};
	struct meddler *m = arg;
	char buf[512];

	while (!atomic_load(&m->stop) && m->st == XDM_OK) {
		m->st = xdm_layer_attr_store(m->rt, POOL_LAYER, "trim", "1");
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && m->st == XDM_OK; i++)
			m->st = xdm_layer_attr_show(m->rt, POOL_LAYER, files[i], buf, sizeof(buf));
		m->trims++;
	}
	return NULL;
}

START_TEST(threads_churn_while_another_trims)
{
	struct xdm_runtime *rt = pool_runtime("pool chunk=512K tcache=256K | host");
	struct tu_churn c[CHURN_THREADS];
	pthread_t t[CHURN_THREADS], mt;
	struct meddler m = { .rt = rt };

	ck_assert_int_eq(pthread_create(&mt, NULL, meddle_run, &m), 0);
	start_churn(rt, c, t);
	for (int i = 0; i < CHURN_THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&m.stop, 1);
	pthread_join(mt, NULL);
	ck_assert_msg(m.st == XDM_OK, "the trimming thread: %s", xdm_strerror(m.st));
	ck_assert_int_gt(m.trims, 0);
	for (int i = 0; i < CHURN_THREADS; i++)
		ck_assert_msg(c[i].st == XDM_OK, "thread %d after %ld pairs: %s (%s)", i,
			      c[i].done, xdm_strerror(c[i].st), c[i].msg);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), POOL(rt, "reserved"));
	/* Every chunk taken was either given back or is still held. */
	ck_assert_uint_eq(POOL(rt, "growths"), POOL(rt, "trimmed") + POOL(rt, "chunks"));
	sync_all(rt);
	ck_assert_uint_eq(HOST(rt, "bytes_outstanding"), POOL(rt, "reserved"));
	finish(rt);
}
END_TEST

/*
 * max stored while threads grow the pool: every refusal is the pool's
 * OUT_OF_MEMORY, no other error appears, the chunks add up, and the last
 * value stored is the one growth obeys.
 */
struct bounded {
	struct xdm_runtime *rt;
	xdm_stream_id stream;
	enum xdm_status st;
	long refusals;
	char msg[sizeof(((struct xdm_error *)0)->message)];
};

static void *bounded_run(void *arg)
{
	struct bounded *w = arg;
	struct xdm_block live[4];
	bool used[4] = { false };

	for (int i = 0; i < 4000 && w->st == XDM_OK; i++) {
		int slot = i % 4;
		enum xdm_status st;

		if (used[slot]) {
			w->st = xdm_deallocate(w->rt, &live[slot]);
			used[slot] = false;
			continue;
		}
		st = xdm_allocate(w->rt, 192 * KIB, w->stream, "bounded", &live[slot]);
		if (st == XDM_E_OUT_OF_MEMORY) {
			w->refusals++;
		} else if (st) {
			w->st = st;
			snprintf(w->msg, sizeof(w->msg), "%s", xdm_last_error_message());
		} else {
			used[slot] = true;
		}
	}
	for (int slot = 0; slot < 4; slot++)
		if (used[slot] && xdm_deallocate(w->rt, &live[slot]) && w->st == XDM_OK)
			w->st = xdm_last_error()->code;
	return NULL;
}

START_TEST(max_stored_while_threads_grow)
{
	static const char *const values[] = { "1M", "0", "512K", "3M" };
	struct xdm_runtime *rt = pool_runtime("pool chunk=256K | host");
	struct bounded w[CHURN_THREADS];
	pthread_t t[CHURN_THREADS];
	struct xdm_block b[5];

	for (int i = 0; i < CHURN_THREADS; i++) {
		w[i] = (struct bounded){ .rt = rt, .stream = (xdm_stream_id)i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, bounded_run, &w[i]), 0);
	}
	for (int i = 0; i < 2000; i++)
		store(rt, "max", values[i % 4]);
	for (int i = 0; i < CHURN_THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(w[i].st == XDM_OK, "thread %d: %s (%s)", i, xdm_strerror(w[i].st),
			      w[i].msg);
	}
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "growths"), POOL(rt, "trimmed") + POOL(rt, "chunks"));
	/* The last store holds: 1M is four chunks of 256K and no more. */
	store(rt, "trim", "1");
	store(rt, "max", "1M");
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_allocate(rt, 256 * KIB, 0, "within", &b[i]));
	ck_assert_int_eq(xdm_allocate(rt, 256 * KIB, 0, "past", &b[4]), XDM_E_OUT_OF_MEMORY);
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	sync_all(rt);
	finish(rt);
}
END_TEST

/* ---- the suite -------------------------------------------------------------- */

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *carve = tcase_create("carving");
	TCase *streams = tcase_create("streams");
	TCase *growth = tcase_create("growth");
	TCase *errors = tcase_create("errors");
	TCase *threads = tcase_create("threads");

	tcase_add_test(carve, blocks_split_from_one_chunk_side_by_side);
	tcase_add_test(carve, freed_neighbours_coalesce_into_the_whole_chunk);
	tcase_add_test(carve, freed_in_any_order_the_chunk_comes_back_whole);
	tcase_add_test(carve, small_requests_round_to_their_class);
	tcase_add_test(carve, small_blocks_are_cached_and_reused_lifo);
	tcase_add_test(carve, small_max_of_1M_is_honoured);
	tcase_add_test(streams, streams_keep_their_partly_used_chunks);
	tcase_add_test(streams, idle_chunk_moves_to_another_stream_behind_an_event);
	tcase_add_test(streams, trimmed_moved_chunk_is_freed_after_its_last_owner);
	tcase_add_test(streams, chunk_moves_only_when_wholly_free);
	tcase_add_test(streams, a_steal_takes_the_smallest_idle_chunk_that_fits);
	tcase_add_test(growth, fixed_growth_adds_chunks_of_chunk_bytes);
	tcase_add_test(growth, double_growth_doubles_each_chunk);
	tcase_add_test(growth, double_growth_stops_at_chunk_max);
	tcase_add_test(growth, initial_sizes_the_first_chunk_and_large_requests_get_their_own);
	tcase_add_test(growth, trim_gives_every_idle_chunk_back);
	tcase_add_test(growth, reap_pending_trims);
	tcase_add_test(growth, chunk_with_a_live_block_is_never_trimmed);
	tcase_add_test(growth, keep_holds_chunks_until_trim_is_written);
	tcase_add_test(carve, allocate_at_puts_freed_blocks_back_where_they_were);
	tcase_add_test(carve, allocate_at_finds_blocks_in_this_threads_cache);
	tcase_add_test(errors, allocate_at_passes_budget_and_log_and_a_guard_refuses);
	tcase_add_test(growth, max_bounds_the_pool_and_the_refusal_leaks_nothing);
	tcase_add_test(growth, max_gives_idle_chunks_of_other_streams_back_to_make_room);
	tcase_add_test(growth, max_store_bounds_the_next_growth);
	tcase_add_test(errors, max_store_refuses_bad_sizes_and_changes_nothing);
	tcase_add_test(growth, a_fitting_free_block_is_found_past_the_first_sixteen_of_its_bin);
	tcase_add_test(growth, reserved_peak_restarts_from_reserved);
	tcase_add_test(errors, bad_parameters_are_config_errors);
	tcase_add_test(errors, absurd_request_is_invalid_before_any_growth);
	tcase_add_test(errors, bad_attribute_writes_are_invalid_and_change_nothing);
	tcase_add_test(errors, double_free_is_use_after_free_and_the_pool_is_untouched);
	tcase_add_test(errors, destroy_with_live_blocks_returns_everything);
	tcase_set_timeout(threads, TU_TIMEOUT_S);
	tcase_add_test(threads, threads_churn_on_their_own_streams);
	tcase_add_test(threads, threads_churn_while_another_trims);
	tcase_add_test(threads, max_stored_while_threads_grow);
	suite_add_tcase(s, carve);
	suite_add_tcase(s, streams);
	suite_add_tcase(s, growth);
	suite_add_tcase(s, errors);
	suite_add_tcase(s, threads);
	return s;
}

int main(void)
{
	return tu_run_suite(pool_suite());
}
