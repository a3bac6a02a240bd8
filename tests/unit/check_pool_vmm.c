/* SPDX-License-Identifier: MIT */
/*
 * check_pool_vmm.c - the pool over a virtual-memory upstream, on the host
 * platform: host_vmm, the host twin of cuda_vmm, maps granules of 64 KiB
 * into one reserved range.  What is checked: chunks that are neighbours
 * in the range join, a request is served from freed neighbours instead of
 * new memory, whole free granules go back when the release= mode says,
 * the trimmer gives memory back with no call, data survives every join
 * and cut, and the counters agree with each other and with the backend
 * at quiescence.
 *
 * Every figure is read as a person would: the pool's attributes (layer
 * 0) and host_vmm's (layer 1).  host_vmm releases a range on the stream's
 * worker, so its `mapped` is compared only after the streams are
 * synchronized.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"

#define KIB ((size_t)1024)
#define GRANULE (64 * KIB)

enum { POOL_LAYER = 0, VMM_LAYER = 1 };

static struct xdm_runtime *vmm_runtime(const char *pool_params)
{
	struct xdm_runtime *rt = NULL;
	char stack[256];

	snprintf(stack, sizeof(stack), "pool %s | host_vmm granule=64K reserve=1G", pool_params);
	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, POOL_LAYER), "pool");
	ck_assert_str_eq(xdm_runtime_layer_name(rt, VMM_LAYER), "host_vmm");
	return rt;
}


#define POOL(rt, name) tu_attr_u64((rt), POOL_LAYER, (name))
#define VMM(rt, name) tu_attr_u64((rt), VMM_LAYER, (name))

static void sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		TU_OK(xdm_stream_synchronize(rt, s));
}

/*
 * The trimmer is an actor of its own: quiescence includes it.  A write of
 * 0 to trim_ms returns once no pass is running, so what is read after it
 * and a synchronize cannot move; the period is written back afterwards.
 */
static uint64_t pause_trimmer(struct xdm_runtime *rt)
{
	uint64_t ms = POOL(rt, "trim_ms");

	if (ms)
		TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim_ms", "0"));
	return ms;
}

static void resume_trimmer(struct xdm_runtime *rt, uint64_t ms)
{
	char text[32];

	if (!ms)
		return;
	snprintf(text, sizeof(text), "%" PRIu64, ms);
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim_ms", text));
	ck_assert_uint_eq(POOL(rt, "trim_ms"), ms);
}

/*
 * At quiescence: the pool's pieces add up to what it reserved, and what it
 * reserved is what the backend has mapped once its releases have run.
 */
static void expect_consistent(struct xdm_runtime *rt)
{
	uint64_t ms = pause_trimmer(rt);

	sync_all(rt);
	ck_assert_uint_eq(POOL(rt, "in_use") + POOL(rt, "free_bytes"), POOL(rt, "reserved"));
	ck_assert_uint_eq(VMM(rt, "releasing"), 0);
	ck_assert_uint_eq(VMM(rt, "mapped"), POOL(rt, "reserved"));
	resume_trimmer(rt, ms);
}

static void finish(struct xdm_runtime *rt)
{
	pause_trimmer(rt);
	/* A reap alone gives nothing back over a virtual-memory upstream. */
	ck_assert_uint_eq(POOL(rt, "reserved"), POOL(rt, "in_use") + POOL(rt, "free_bytes"));
	TU_OK(xdm_reap_pending(rt));
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	sync_all(rt);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(VMM(rt, "mapped"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

static void alloc(struct xdm_runtime *rt, size_t bytes, struct xdm_block *b)
{
	TU_OK(xdm_allocate(rt, bytes, 0, "t", b));
}

/* ---- joining ---------------------------------------------------------------- */

START_TEST(the_pool_sees_the_granule_and_defaults_to_it)
{
	struct xdm_runtime *rt = vmm_runtime("");

	ck_assert_uint_eq(POOL(rt, "granule"), GRANULE);
	ck_assert_uint_eq(POOL(rt, "chunk"), GRANULE);
	ck_assert_uint_eq(POOL(rt, "trim_ms"), 1000);
	ck_assert_uint_eq(POOL(rt, "given_back"), 0);
	ck_assert_uint_eq(POOL(rt, "split"), 64 * KIB);
	TU_OK(xdm_runtime_destroy(rt));

	/* Over plain host memory nothing changes: no granule, no trimmer. */
	TU_OK(xdm_runtime_create(0, "host", "pool | host", &rt));
	ck_assert_uint_eq(POOL(rt, "granule"), 0);
	ck_assert_uint_eq(POOL(rt, "chunk"), 32 * KIB * KIB);
	ck_assert_uint_eq(POOL(rt, "trim_ms"), 0);
	ck_assert_uint_eq(POOL(rt, "split"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(a_tail_grows_in_place_and_the_chunks_join)
{
	struct xdm_runtime *rt = vmm_runtime("release=trim trim_ms=0");
	struct xdm_block a, b;

	alloc(rt, 80 * KIB, &a);		/* beyond small_max: not a class */
	ck_assert_uint_eq(POOL(rt, "reserved"), 2 * GRANULE);
	/* 48 KiB free at the tail: the pool adds only the granule it lacks. */
	alloc(rt, 100 * KIB, &b);
	ck_assert_uint_eq(POOL(rt, "reserved"), 3 * GRANULE);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_ge(POOL(rt, "joins"), 1);
	ck_assert_uint_eq(b.ptr, a.ptr + 80 * KIB);
	/* One range: a write across the seam of the two growths. */
	memset((void *)(uintptr_t)a.ptr, 0x5a, 3 * GRANULE);
	expect_consistent(rt);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	finish(rt);
}
END_TEST

START_TEST(a_large_request_is_served_by_freed_neighbours)
{
	struct xdm_runtime *rt = vmm_runtime("release=trim trim_ms=0");
	struct xdm_block a, b, c, d;
	uint64_t growths;

	alloc(rt, 128 * KIB, &a);
	alloc(rt, 128 * KIB, &b);
	alloc(rt, 128 * KIB, &c);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_eq(b.ptr, a.ptr + 128 * KIB);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	growths = POOL(rt, "growths");
	alloc(rt, 256 * KIB, &d);
	ck_assert_uint_eq(POOL(rt, "growths"), growths);
	ck_assert_uint_eq(d.ptr, a.ptr);
	ck_assert_uint_eq(POOL(rt, "reserved"), 6 * GRANULE);
	expect_consistent(rt);
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	finish(rt);
}
END_TEST

/*
 * Small blocks live in chunks of their own: freeing the large block around
 * which they were allocated gives all of its granules back.
 */
START_TEST(small_blocks_do_not_pin_the_granules_of_large_ones)
{
	struct xdm_runtime *rt = vmm_runtime("trim_ms=0");
	struct xdm_block big1, small, big2;

	alloc(rt, 200 * KIB, &big1);
	alloc(rt, 4 * KIB, &small);
	alloc(rt, 200 * KIB, &big2);
	/* In a granule of its own, not one that either large block touches. */
	for (uint64_t g = big1.ptr / GRANULE; g <= (big1.ptr + big1.bytes - 1) / GRANULE; g++)
		ck_assert_uint_ne(small.ptr / GRANULE, g);
	for (uint64_t g = big2.ptr / GRANULE; g <= (big2.ptr + big2.bytes - 1) / GRANULE; g++)
		ck_assert_uint_ne(small.ptr / GRANULE, g);
	TU_OK(xdm_deallocate(rt, &big1));
	TU_OK(xdm_deallocate(rt, &big2));
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	/* Only the small block's granule is left. */
	ck_assert_uint_eq(POOL(rt, "reserved"), GRANULE);
	expect_consistent(rt);
	TU_OK(xdm_deallocate(rt, &small));
	finish(rt);
}
END_TEST

START_TEST(split_over_an_upstream_without_granules_is_a_config_error)
{
	tu_expect_config_error("host", "pool split=64K | host", "split");
}
END_TEST

/* ---- giving back -------------------------------------------------------------- */

START_TEST(growth_gives_the_idle_granules_back_first)
{
	struct xdm_runtime *rt = vmm_runtime("release=grow trim_ms=0");
	struct xdm_block x[4], big;

	for (int i = 0; i < 4; i++)
		alloc(rt, 256 * KIB, &x[i]);
	ck_assert_uint_eq(POOL(rt, "reserved"), 1024 * KIB);
	TU_OK(xdm_deallocate(rt, &x[1]));
	TU_OK(xdm_deallocate(rt, &x[2]));
	ck_assert_uint_eq(POOL(rt, "given_back"), 0);
	ck_assert_uint_eq(POOL(rt, "split"), 64 * KIB);
	/* 512 KiB free in the middle cannot hold 1 MiB: they go back, then it grows. */
	alloc(rt, 1024 * KIB, &big);
	ck_assert_uint_eq(POOL(rt, "given_back"), 512 * KIB);
	ck_assert_uint_eq(POOL(rt, "reserved"), 1536 * KIB);
	ck_assert_uint_eq(POOL(rt, "in_use"), 1536 * KIB);
	memset((void *)(uintptr_t)big.ptr, 1, big.bytes);
	memset((void *)(uintptr_t)x[0].ptr, 2, x[0].bytes);
	memset((void *)(uintptr_t)x[3].ptr, 3, x[3].bytes);
	expect_consistent(rt);
	TU_OK(xdm_deallocate(rt, &x[0]));
	TU_OK(xdm_deallocate(rt, &x[3]));
	TU_OK(xdm_deallocate(rt, &big));
	finish(rt);
}
END_TEST

START_TEST(release_free_gives_back_on_the_free)
{
	struct xdm_runtime *rt = vmm_runtime("release=free trim_ms=0");
	struct xdm_block keep, big;

	alloc(rt, 100 * KIB, &keep);
	alloc(rt, 1024 * KIB, &big);
	TU_OK(xdm_deallocate(rt, &big));
	/* What keep does not touch went back; its own granules stay. */
	ck_assert_uint_eq(POOL(rt, "reserved"), 2 * GRANULE);
	ck_assert_uint_gt(POOL(rt, "given_back"), 0);
	expect_consistent(rt);
	TU_OK(xdm_deallocate(rt, &keep));
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	finish(rt);
}
END_TEST

/* The granules a set of blocks touches, in bytes: what a trim must leave. */
static uint64_t granules_touched(const struct xdm_block *b, const bool *live, size_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0, count = 0;
	unsigned char *seen;

	for (size_t i = 0; i < n; i++) {
		if (!live[i])
			continue;
		lo = b[i].ptr < lo ? b[i].ptr : lo;
		hi = b[i].ptr + b[i].bytes > hi ? b[i].ptr + b[i].bytes : hi;
	}
	if (hi == 0)
		return 0;
	lo &= ~(uint64_t)(GRANULE - 1);
	seen = calloc((hi - lo) / GRANULE + 1, 1);
	ck_assert_ptr_nonnull(seen);
	for (size_t i = 0; i < n; i++) {
		if (!live[i])
			continue;
		for (uint64_t g = (b[i].ptr - lo) / GRANULE;
		     g <= (b[i].ptr + b[i].bytes - 1 - lo) / GRANULE; g++)
			if (!seen[g]++)
				count++;
	}
	free(seen);
	return count * GRANULE;
}

START_TEST(trim_leaves_exactly_the_granules_in_use)
{
	struct xdm_runtime *rt = vmm_runtime("release=trim trim_ms=0");
	struct xdm_block b[24];
	bool live[24];
	uint64_t before;

	for (int i = 0; i < 24; i++) {
		alloc(rt, (size_t)(70 + 37 * i) * KIB, &b[i]);
		live[i] = true;
	}
	for (int i = 0; i < 24; i += 2) {
		TU_OK(xdm_deallocate(rt, &b[i]));
		live[i] = false;
	}
	/* A reap is no trim over a virtual-memory upstream: nothing goes back. */
	before = POOL(rt, "reserved");
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(POOL(rt, "reserved"), before);
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	ck_assert_uint_eq(POOL(rt, "reserved"), granules_touched(b, live, 24));
	expect_consistent(rt);
	for (int i = 1; i < 24; i += 2)
		TU_OK(xdm_deallocate(rt, &b[i]));
	finish(rt);
}
END_TEST

START_TEST(the_trimmer_gives_memory_back_with_no_call)
{
	struct xdm_runtime *rt = vmm_runtime("release=trim trim_ms=20");
	struct xdm_block big;
	int waited = 0;

	alloc(rt, 4096 * KIB, &big);
	TU_OK(xdm_deallocate(rt, &big));
	ck_assert_uint_eq(POOL(rt, "reserved"), 4096 * KIB);
	/* A safety net, not a timing: the trimmer runs every 20 ms. */
	while (POOL(rt, "reserved") && waited < TU_PATIENCE_MS) {
		tu_sleep_ms(10);
		waited += 10;
	}
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(POOL(rt, "given_back"), 4096 * KIB);
	pause_trimmer(rt);
	sync_all(rt);
	ck_assert_uint_eq(VMM(rt, "mapped"), 0);
	finish(rt);
}
END_TEST

/*
 * trim_ms is a knob: 0 stops the trimmer, a period starts it, even on a
 * pool that had none; anything else is EINVAL and changes nothing.
 */
START_TEST(trim_ms_starts_and_stops_the_trimmer)
{
	static const char *const bad[] = { "", "soon", "-1", "10ms", " 5", "1.5",
					   "99999999999999999999999" };
	struct xdm_runtime *rt = vmm_runtime("release=trim trim_ms=0");
	struct xdm_block big;
	int waited = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(xdm_layer_attr_store(rt, POOL_LAYER, "trim_ms", bad[i]),
				 XDM_E_INVALID);
		ck_assert_uint_eq(POOL(rt, "trim_ms"), 0);
	}
	alloc(rt, 4096 * KIB, &big);
	TU_OK(xdm_deallocate(rt, &big));
	/* No trimmer: the free memory stays, however long one waits. */
	ck_assert_uint_eq(POOL(rt, "reserved"), 4096 * KIB);
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim_ms", "20\n"));
	ck_assert_uint_eq(POOL(rt, "trim_ms"), 20);
	/* A safety net, not a timing: the trimmer now runs every 20 ms. */
	while (POOL(rt, "reserved") && waited < TU_PATIENCE_MS) {
		tu_sleep_ms(10);
		waited += 10;
	}
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	/* Stopped: a write of 0 returns with no pass running. */
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim_ms", "0"));
	ck_assert_uint_eq(POOL(rt, "trim_ms"), 0);
	alloc(rt, 4096 * KIB, &big);
	TU_OK(xdm_deallocate(rt, &big));
	sync_all(rt);
	ck_assert_uint_eq(POOL(rt, "reserved"), 4096 * KIB);
	ck_assert_uint_eq(VMM(rt, "mapped"), 4096 * KIB);
	finish(rt);
}
END_TEST

/* ---- churn -------------------------------------------------------------------- */

#define CHURN_LIVE 160

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 256 B to 512 KiB, log-uniform. */
static size_t churn_size(uint64_t *s)
{
	unsigned int shift = 8 + (unsigned int)(next_rand(s) % 11);

	return ((size_t)1 << shift) + (size_t)(next_rand(s) % ((size_t)1 << shift));
}

static void fill(const struct xdm_block *b, size_t bytes, unsigned char v)
{
	unsigned char *m = (unsigned char *)(uintptr_t)b->ptr;

	/* Both ends and the middle: a block moved or cut under its owner shows. */
	m[0] = v;
	m[bytes / 2] = v;
	m[bytes - 1] = v;
}

static void expect_fill(const struct xdm_block *b, size_t bytes, unsigned char v)
{
	const unsigned char *m = (const unsigned char *)(uintptr_t)b->ptr;

	ck_assert_msg(m[0] == v && m[bytes / 2] == v && m[bytes - 1] == v,
		      "block at 0x%" PRIx64 " lost its contents", b->ptr);
}

static void churn(const char *params)
{
	struct xdm_runtime *rt = vmm_runtime(params);
	struct xdm_block b[CHURN_LIVE];
	size_t bytes[CHURN_LIVE];
	bool live[CHURN_LIVE] = { false };
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	for (int op = 0; op < 20000; op++) {
		unsigned int i = (unsigned int)(next_rand(&seed) % CHURN_LIVE);

		if (live[i]) {
			expect_fill(&b[i], bytes[i], (unsigned char)i);
			TU_OK(xdm_deallocate(rt, &b[i]));
			live[i] = false;
		} else {
			bytes[i] = churn_size(&seed);
			alloc(rt, bytes[i], &b[i]);
			fill(&b[i], bytes[i], (unsigned char)i);
			live[i] = true;
		}
		if (op % 2500 == 2499) {
			TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
			ck_assert_uint_eq(POOL(rt, "reserved"), granules_touched(b, live,
										 CHURN_LIVE));
			expect_consistent(rt);
		}
	}
	for (unsigned int i = 0; i < CHURN_LIVE; i++) {
		if (!live[i])
			continue;
		expect_fill(&b[i], bytes[i], (unsigned char)i);
		TU_OK(xdm_deallocate(rt, &b[i]));
	}
	expect_consistent(rt);
	finish(rt);
}

START_TEST(churn_release_grow_keeps_data_and_counters)
{
	churn("release=grow trim_ms=0");
}
END_TEST

START_TEST(churn_release_free_keeps_data_and_counters)
{
	churn("release=free trim_ms=0");
}
END_TEST

START_TEST(churn_beside_the_trimmer_keeps_data_and_counters)
{
	churn("release=trim trim_ms=1");
}
END_TEST

/*
 * An adaptor that keeps a record per block hides the granularity: the pool
 * then treats the upstream's blocks as whole allocations, rounded up as
 * the backend rounds them, and gives each back exactly as it came.
 */
START_TEST(behind_an_adaptor_that_hides_granules_chunks_go_back_whole)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b;

	TU_OK(xdm_runtime_create(0, "host", "pool chunk=100K | logging sink=null | "
				 "host_vmm granule=64K reserve=1G", &rt));
	ck_assert_uint_eq(POOL(rt, "granule"), 0);
	alloc(rt, 70 * KIB, &b);
	ck_assert_uint_eq(tu_attr_u64(rt, 2, "mapped"), 128 * KIB);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	sync_all(rt);
	ck_assert_uint_eq(POOL(rt, "trimmed"), 1);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(tu_attr_u64(rt, 2, "mapped"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- errors -------------------------------------------------------------------- */

START_TEST(a_bad_release_mode_is_a_config_error)
{
	tu_expect_config_error("host", "pool release=soon | host_vmm", "release");
}
END_TEST

static Suite *pool_vmm_suite(void)
{
	Suite *s = suite_create("pool over host_vmm");
	TCase *tc = tcase_create("vmm");

	tcase_set_timeout(tc, TU_TIMEOUT_S);
	tcase_add_test(tc, the_pool_sees_the_granule_and_defaults_to_it);
	tcase_add_test(tc, a_tail_grows_in_place_and_the_chunks_join);
	tcase_add_test(tc, a_large_request_is_served_by_freed_neighbours);
	tcase_add_test(tc, small_blocks_do_not_pin_the_granules_of_large_ones);
	tcase_add_test(tc, split_over_an_upstream_without_granules_is_a_config_error);
	tcase_add_test(tc, growth_gives_the_idle_granules_back_first);
	tcase_add_test(tc, release_free_gives_back_on_the_free);
	tcase_add_test(tc, trim_leaves_exactly_the_granules_in_use);
	tcase_add_test(tc, the_trimmer_gives_memory_back_with_no_call);
	tcase_add_test(tc, trim_ms_starts_and_stops_the_trimmer);
	tcase_add_test(tc, churn_release_grow_keeps_data_and_counters);
	tcase_add_test(tc, churn_release_free_keeps_data_and_counters);
	tcase_add_test(tc, churn_beside_the_trimmer_keeps_data_and_counters);
	tcase_add_test(tc, behind_an_adaptor_that_hides_granules_chunks_go_back_whole);
	tcase_add_test(tc, a_bad_release_mode_is_a_config_error);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(pool_vmm_suite());
}
