/* SPDX-License-Identifier: MIT */
/*
 * check_pool_tcache.c - the pool's per-thread caches on the host platform:
 * a pair they serve gives the same address back without touching the
 * arena; a block freed on one stream never reaches an allocation on
 * another; a stale id stays USE_AFTER_FREE when its address comes back
 * from a cache; the counters are exact at quiescence; the caches stay in
 * their bounds; a trim and a thread's exit send them back whole.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"

#define KIB ((uint64_t)1024)
#define MIB (1024 * KIB)

enum { POOL_LAYER = 0 };

#define POOL(rt, name) tu_attr_u64((rt), POOL_LAYER, (name))

static struct xdm_runtime *runtime(const char *stack)
{
	struct xdm_runtime *rt = NULL;

	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, POOL_LAYER), "pool");
	return rt;
}

/* At quiescence what the pool holds is used, free, or cached by a thread. */
static void assert_balanced(struct xdm_runtime *rt)
{
	ck_assert_uint_eq(POOL(rt, "in_use") + POOL(rt, "free_bytes"), POOL(rt, "reserved"));
	ck_assert_uint_eq(POOL(rt, "in_use"), xdm_bytes_outstanding(rt));
}

/* Everything freed, trimmed and reaped: the pool is empty. */
static void finish(struct xdm_runtime *rt)
{
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

/* A host step that writes the first bytes of a block. */
struct touch {
	unsigned char *mem;
	int value;
	atomic_int ran;
};

static void touch_run(void *arg)
{
	struct touch *t = arg;

	memset(t->mem, t->value, 64);
	atomic_store(&t->ran, 1);
}

START_TEST(a_pair_is_served_by_the_cache)
{
	struct xdm_runtime *rt = runtime("pool chunk=1M | host");
	uint64_t sizes[] = { 256, 4 * KIB, 64 * KIB, 1 * MIB };

	/*
	 * A first allocation of a class may fetch blocks ahead into the
	 * cache, so the counts are checked against what it held after it.
	 */
	for (unsigned int k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct xdm_block a, b, c;
		uint64_t ahead;

		TU_OK(xdm_allocate(rt, sizes[k], 0, "a", &a));
		ahead = POOL(rt, "thread_cached");
		TU_OK(xdm_deallocate(rt, &a));
		ck_assert_uint_eq(POOL(rt, "thread_cached"), ahead + sizes[k]);
		ck_assert_uint_eq(POOL(rt, "in_use"), 0);
		assert_balanced(rt);
		TU_OK(xdm_allocate(rt, sizes[k], 0, "b", &b));
		ck_assert_uint_eq(b.ptr, a.ptr);
		ck_assert_uint_eq(POOL(rt, "thread_cached"), ahead);
		ck_assert_uint_eq(POOL(rt, "in_use"), sizes[k]);
		assert_balanced(rt);
		/* Its list now empty, the same size again comes from the arena. */
		TU_OK(xdm_allocate(rt, sizes[k], 0, "c", &c));
		ck_assert_uint_ne(c.ptr, b.ptr);
		assert_balanced(rt);
		TU_OK(xdm_deallocate(rt, &c));
		TU_OK(xdm_deallocate(rt, &b));
	}
	finish(rt);
}
END_TEST

/* tcache=0 turns the caches off: a free goes straight to the arena. */
START_TEST(tcache_zero_keeps_nothing)
{
	struct xdm_runtime *rt = runtime("pool chunk=1M tcache=0 | host");
	struct xdm_block a;

	ck_assert_uint_eq(POOL(rt, "tcache"), 0);
	TU_OK(xdm_allocate(rt, 4 * KIB, 0, "a", &a));
	TU_OK(xdm_deallocate(rt, &a));
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	ck_assert_uint_eq(POOL(rt, "cached_bytes"), 4 * KIB);
	finish(rt);
}
END_TEST

/*
 * The stream-ordered contract through the cache: stream 1 is held at a
 * gate with a write to the block behind it; the block is freed (on stream
 * 1) into this thread's cache.  Allocations on stream 2 never get it while
 * the gate is closed; an allocation on stream 1 may, since it is ordered
 * after the write.
 */
START_TEST(a_block_freed_on_one_stream_never_reaches_another)
{
	struct xdm_runtime *rt = runtime("pool chunk=1M | host");
	struct xdm_block freed, on2[16], again;
	struct touch write = { .value = 0x5a };
	struct tu_gate gate;

	tu_gate_init(&gate);
	TU_OK(xdm_allocate(rt, 4 * KIB, 1, "freed", &freed));
	tu_gate_hold(rt, 1, &gate);
	write.mem = (unsigned char *)(uintptr_t)freed.ptr;
	TU_OK(xdm_stream_launch_host(rt, 1, touch_run, &write));
	TU_OK(xdm_deallocate(rt, &freed));
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 4 * KIB);
	for (int i = 0; i < 16; i++) {
		TU_OK(xdm_allocate(rt, 4 * KIB, 2, "on2", &on2[i]));
		ck_assert_msg(on2[i].ptr != freed.ptr, "stream 2 got the block stream 1 freed "
			      "while stream 1 was held before its last write to it");
	}
	for (int i = 0; i < 16; i++)
		TU_OK(xdm_deallocate(rt, &on2[i]));
	TU_OK(xdm_allocate(rt, 4 * KIB, 1, "again", &again));
	ck_assert_uint_eq(again.ptr, freed.ptr);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 1));
	ck_assert(atomic_load(&write.ran));
	TU_OK(xdm_deallocate(rt, &again));
	TU_OK(xdm_stream_synchronize(rt, 1));
	TU_OK(xdm_stream_synchronize(rt, 2));
	finish(rt);
}
END_TEST

/* The registry, not the cache, decides what is live. */
START_TEST(a_stale_id_stays_use_after_free)
{
	struct xdm_runtime *rt = runtime("pool chunk=1M | host");
	struct xdm_block a, stale, b, seen;

	TU_OK(xdm_allocate(rt, 512, 0, "a", &a));
	stale = a;
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_allocate(rt, 512, 0, "b", &b));
	ck_assert_uint_eq(b.ptr, stale.ptr);
	ck_assert_uint_ne(b.generation, stale.generation);
	ck_assert_int_eq(xdm_block_lookup(rt, xdm_block_id_of(&stale), &seen),
			 XDM_E_USE_AFTER_FREE);
	ck_assert_int_eq(xdm_deallocate(rt, &stale), XDM_E_USE_AFTER_FREE);
	/* The double free freed nothing: b is still live and still b. */
	TU_OK(xdm_block_lookup(rt, xdm_block_id_of(&b), &seen));
	ck_assert_str_eq(seen.tag, "b");
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	TU_OK(xdm_deallocate(rt, &b));
	finish(rt);
}
END_TEST

/* A class list holds at most 32 blocks and a thread at most tcache bytes per stream. */
START_TEST(the_caches_stay_in_their_bounds)
{
	struct xdm_runtime *rt = runtime("pool chunk=4M tcache=64K | host");
	struct xdm_block b[100];

	for (int i = 0; i < 100; i++)
		TU_OK(xdm_allocate(rt, 256, 0, "small", &b[i]));
	for (int i = 0; i < 100; i++) {
		TU_OK(xdm_deallocate(rt, &b[i]));
		ck_assert_uint_le(POOL(rt, "thread_cached"), 32 * 256);
	}
	assert_balanced(rt);
	for (int i = 0; i < 100; i++)
		TU_OK(xdm_allocate(rt, 8 * KIB, 0, "mid", &b[i]));
	for (int i = 0; i < 100; i++) {
		TU_OK(xdm_deallocate(rt, &b[i]));
		ck_assert_uint_le(POOL(rt, "thread_cached"), 64 * KIB);
	}
	assert_balanced(rt);
	/* Above tcache a block is never kept. */
	TU_OK(xdm_allocate(rt, 128 * KIB, 0, "large", &b[0]));
	TU_OK(xdm_deallocate(rt, &b[0]));
	ck_assert_uint_le(POOL(rt, "thread_cached"), 64 * KIB);
	assert_balanced(rt);
	finish(rt);
}
END_TEST

/* ---- other threads ----------------------------------------------------------- */

/*
 * A thread that allocates n blocks on stream 3 and frees them into its
 * cache, then, when hold is set, waits at each phase for the test: after
 * its frees, and after one more allocation (its first call since the
 * test's trim), which it frees when the test lets it go on.
 */
struct filler {
	struct xdm_runtime *rt;
	int n;
	bool hold;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int phase;		/* the thread's: 1 freed, 2 allocated again */
	int allowed;		/* the test's: the thread may pass phase < allowed */
};

static void filler_step(struct filler *f, int phase)
{
	pthread_mutex_lock(&f->lock);
	f->phase = phase;
	pthread_cond_broadcast(&f->cond);
	while (f->hold && f->allowed < phase)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static void filler_wait(struct filler *f, int phase)
{
	pthread_mutex_lock(&f->lock);
	while (f->phase < phase)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static void filler_allow(struct filler *f, int phase)
{
	pthread_mutex_lock(&f->lock);
	f->allowed = phase;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void *fill_run(void *arg)
{
	struct filler *f = arg;
	struct xdm_block b[64];

	for (int i = 0; i < f->n; i++)
		TU_OK(xdm_allocate(f->rt, 4 * KIB, 3, "fill", &b[i]));
	for (int i = 0; i < f->n; i++)
		TU_OK(xdm_deallocate(f->rt, &b[i]));
	filler_step(f, 1);
	if (f->hold) {
		TU_OK(xdm_allocate(f->rt, 4 * KIB, 3, "again", &b[0]));
		filler_step(f, 2);
		TU_OK(xdm_deallocate(f->rt, &b[0]));
	}
	return NULL;
}

static void filler_init(struct filler *f, struct xdm_runtime *rt, int n, bool hold)
{
	*f = (struct filler){ .rt = rt, .n = n, .hold = hold };
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
}

static void filler_destroy(struct filler *f)
{
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}

/* A thread that exits with a full cache hands it all back. */
START_TEST(a_thread_exiting_with_a_full_cache_hands_it_back)
{
	struct xdm_runtime *rt = runtime("pool chunk=1M | host");
	struct filler f;
	pthread_t t;

	filler_init(&f, rt, 32, false);
	ck_assert_int_eq(pthread_create(&t, NULL, fill_run, &f), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	ck_assert_uint_eq(POOL(rt, "in_use"), 0);
	ck_assert_uint_eq(POOL(rt, "free_bytes"), POOL(rt, "reserved"));
	filler_destroy(&f);
	finish(rt);
}
END_TEST

/*
 * A trim sends this thread's cache back at once and every other thread's
 * at its next call: until then an idle thread's cache is counted, exactly.
 * With tcache=4K a thread keeps one 4 KiB block and fetches none ahead.
 */
START_TEST(a_trim_reaches_every_thread_at_its_next_call)
{
	struct xdm_runtime *rt = runtime("pool chunk=1M tcache=4K | host");
	struct filler f;
	pthread_t t;

	filler_init(&f, rt, 1, true);
	ck_assert_int_eq(pthread_create(&t, NULL, fill_run, &f), 0);
	filler_wait(&f, 1);
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 4 * KIB);
	assert_balanced(rt);
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	/* Not this thread's: the block stays cached and the chunk stays. */
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 4 * KIB);
	ck_assert_uint_eq(POOL(rt, "reserved"), MIB);
	filler_allow(&f, 1);
	filler_wait(&f, 2);
	/* Its next call drained the cache, then took one block from the arena. */
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	ck_assert_uint_eq(POOL(rt, "in_use"), 4 * KIB);
	assert_balanced(rt);
	filler_allow(&f, 2);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	filler_destroy(&f);
	finish(rt);
}
END_TEST

/* Before growing, a thread's own cache goes back and is merged. */
START_TEST(a_thread_drains_its_cache_before_the_pool_grows)
{
	struct xdm_runtime *rt = runtime("pool chunk=256K | host");
	struct xdm_block b[32], big;

	for (int i = 0; i < 32; i++)
		TU_OK(xdm_allocate(rt, 8 * KIB, 0, "b", &b[i]));
	for (int i = 0; i < 32; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	ck_assert_uint_gt(POOL(rt, "thread_cached"), 0);
	TU_OK(xdm_allocate(rt, 256 * KIB, 0, "big", &big));
	ck_assert_uint_eq(POOL(rt, "growths"), 1);
	ck_assert_uint_eq(POOL(rt, "thread_cached"), 0);
	TU_OK(xdm_deallocate(rt, &big));
	finish(rt);
}
END_TEST

START_TEST(a_bad_tcache_is_a_config_error)
{
	tu_expect_config_error("host", "pool tcache=2G | host", "tcache");
	tu_expect_config_error("host", "pool tcache=lots | host", "tcache");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("pool_tcache");
	TCase *tc = tcase_create("tcache");

	tcase_add_test(tc, a_pair_is_served_by_the_cache);
	tcase_add_test(tc, tcache_zero_keeps_nothing);
	tcase_add_test(tc, a_block_freed_on_one_stream_never_reaches_another);
	tcase_add_test(tc, a_stale_id_stays_use_after_free);
	tcase_add_test(tc, the_caches_stay_in_their_bounds);
	tcase_add_test(tc, a_thread_exiting_with_a_full_cache_hands_it_back);
	tcase_add_test(tc, a_trim_reaches_every_thread_at_its_next_call);
	tcase_add_test(tc, a_thread_drains_its_cache_before_the_pool_grows);
	tcase_add_test(tc, a_bad_tcache_is_a_config_error);
	tcase_set_timeout(tc, 60);
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
