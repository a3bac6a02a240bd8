/* SPDX-License-Identifier: MIT */
/*
 * check_runtime.c - the runtime: singletons and their first-call race,
 * private runtimes, forwarding to the stack, the generation guard, the
 * live-block registry and its counters, streams, and clean failure.
 */
#include "config.h"

#include <stdatomic.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"
#include "tests/lib/thread_churn.h"

static struct xdm_runtime *host_runtime(const char *stack)
{
	struct xdm_runtime *rt = NULL;

	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	return rt;
}

START_TEST(allocate_fills_the_block)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b;

	TU_OK(xdm_allocate(rt, 1000, 1, "weights", &b));
	ck_assert_uint_ne(b.ptr, 0);
	ck_assert_uint_eq(b.ptr % XDM_DEFAULT_ALIGN, 0);
	ck_assert_uint_ge(b.bytes, 1000);
	ck_assert_uint_ge(b.align, XDM_DEFAULT_ALIGN);
	ck_assert_uint_eq(b.ordinal, 0);
	ck_assert_uint_eq(b.stream, 1);
	ck_assert_str_eq(b.tag, "weights");
	ck_assert_uint_gt(b.generation, 0);
	ck_assert_int_eq(b.state, XDM_BLOCK_LIVE);
	memset((void *)(uintptr_t)b.ptr, 0xab, 1000);	/* the memory is really there */
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_ne(b.state, XDM_BLOCK_LIVE);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(generations_are_unique)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b[32];

	for (int i = 0; i < 32; i++) {
		TU_OK(xdm_allocate(rt, 256, 0, NULL, &b[i]));
		ck_assert_uint_ne(b[i].generation, 0);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(b[i].generation, b[j].generation);
	}
	ck_assert_str_eq(b[0].tag, "untagged");
	for (int i = 0; i < 32; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(bad_arguments_are_invalid)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b;
	struct xdm_stats st;

	ck_assert_int_eq(xdm_allocate(rt, 0, 0, "t", &b), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "zero bytes"));
	ck_assert_int_eq(xdm_allocate(rt, 64, 999, "t", &b), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "stream 999"));
	ck_assert_int_eq(xdm_allocate(rt, 64, 0, "t", NULL), XDM_E_INVALID);
	ck_assert_int_eq(xdm_allocate(NULL, 64, 0, "t", &b), XDM_E_INVALID);
	ck_assert_int_eq(xdm_deallocate(rt, NULL), XDM_E_INVALID);
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.failures, 2);
	ck_assert_uint_eq(st.allocs, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(double_free_is_use_after_free)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b, copy;

	TU_OK(xdm_allocate(rt, 4096, 0, "t", &b));
	copy = b;
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(xdm_deallocate(rt, &copy), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, copy.generation);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(stale_id_after_reissue_is_use_after_free)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block old, b;
	struct xdm_block_id old_id;
	bool reissued = false;

	TU_OK(xdm_allocate(rt, 4096, 0, "t", &old));
	old_id = xdm_block_id_of(&old);
	TU_OK(xdm_deallocate(rt, &old));
	TU_OK(xdm_reap_pending(rt));
	/* Keep allocating the same size until the address comes back. */
	struct xdm_block keep[64];
	int nkeep = 0;

	for (int i = 0; i < 64 && !reissued; i++) {
		TU_OK(xdm_allocate(rt, 4096, 0, "t", &b));
		reissued = b.ptr == old_id.ptr;
		keep[nkeep++] = b;
	}
	ck_assert_int_eq(xdm_block_lookup(rt, old_id, &b), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, old_id.generation);
	if (reissued) {
		struct xdm_block_id now = xdm_block_id_of(&keep[nkeep - 1]);

		ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "reissued"));
		TU_OK(xdm_block_lookup(rt, now, &b));
		ck_assert_uint_eq(b.generation, now.generation);
		/* One address always lands in one shard: its generations grow. */
		ck_assert_uint_gt(now.generation, old_id.generation);
	}
	for (int i = 0; i < nkeep; i++)
		TU_OK(xdm_deallocate(rt, &keep[i]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A backend that always hands out the same address, and counts its frees. */
static _Atomic int fixed_frees;
static unsigned char fixed_area[4096] __attribute__((aligned(256)));

static enum xdm_status fixed_alloc(struct xdm_layer *self, size_t bytes, xdm_stream_id s,
				   const char *tag, struct xdm_block *out)
{
	out->ptr = (uint64_t)(uintptr_t)fixed_area;
	return XDM_OK;
}

static enum xdm_status fixed_free(struct xdm_layer *self, struct xdm_block *b)
{
	atomic_fetch_add(&fixed_frees, 1);
	return XDM_OK;
}

static const struct xdm_ops fixed_ops = {
	XDM_OPS_HEADER("fixed", XDM_KIND_BACKEND),
	.allocate = fixed_alloc,
	.deallocate = fixed_free,
};

START_TEST(reissued_address_is_named_in_the_error)
{
	struct xdm_runtime *rt;
	struct xdm_block a, b, c;
	char want[128];

	TU_OK(xdm_module_register(&fixed_ops));
	TU_OK(xdm_runtime_create(0, "host", "fixed", &rt));
	TU_OK(xdm_allocate(rt, 100, 0, "a", &a));
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_allocate(rt, 100, 0, "b", &b));
	ck_assert_uint_eq(b.ptr, a.ptr);
	ck_assert_uint_gt(b.generation, a.generation);
	snprintf(want, sizeof(want), "reissued as generation %llu",
		 (unsigned long long)b.generation);
	ck_assert_int_eq(xdm_block_lookup(rt, xdm_block_id_of(&a), &c), XDM_E_USE_AFTER_FREE);
	ck_assert_msg(strstr(xdm_last_error_message(), want), "%s", xdm_last_error_message());
	ck_assert_uint_eq(xdm_last_error()->generation, a.generation);
	ck_assert_int_eq(xdm_deallocate(rt, &a), XDM_E_USE_AFTER_FREE);
	ck_assert_msg(strstr(xdm_last_error_message(), want), "%s", xdm_last_error_message());
	/* The stale free did not touch the live block. */
	TU_OK(xdm_block_lookup(rt, xdm_block_id_of(&b), &c));
	ck_assert_int_eq(atomic_load(&fixed_frees), 1);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_E_USE_AFTER_FREE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "double free"));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* The same address handed out twice while live is the stack's bug: refused,
 * and the live block is not freed by the refusal. */
START_TEST(duplicate_live_address_is_refused_without_freeing)
{
	struct xdm_runtime *rt;
	struct xdm_block a, b;

	TU_OK(xdm_module_register(&fixed_ops));
	TU_OK(xdm_runtime_create(0, "host", "fixed", &rt));
	TU_OK(xdm_allocate(rt, 100, 0, "a", &a));
	ck_assert_int_eq(xdm_allocate(rt, 100, 0, "b", &b), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "already live"));
	ck_assert_int_eq(atomic_load(&fixed_frees), 0);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(destroy_frees_blocks_left_live)
{
	struct xdm_runtime *rt;
	struct xdm_block a, h[3];

	TU_OK(xdm_module_register(&fixed_ops));
	TU_OK(xdm_runtime_create(0, "host", "fixed", &rt));
	TU_OK(xdm_allocate(rt, 100, 0, "left", &a));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert_int_eq(atomic_load(&fixed_frees), 1);
	/* On the host backend the memory really goes back (ASan's leak check
	 * in the sanitizer build would name it otherwise). */
	rt = host_runtime("host");
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 1 << 20, (xdm_stream_id)i, "left", &h[i]));
	TU_OK(xdm_prepare_block_use(rt, xdm_block_id_of(&h[0]), 5, XDM_ACCESS_WRITE));
	TU_OK(xdm_finish_block_use(rt, xdm_block_id_of(&h[0]), 5, XDM_ACCESS_WRITE));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* An adaptor with one UINT parameter, shown back as an attribute. */
static enum xdm_status uint_init(struct xdm_layer *self, const struct xdm_params *p)
{
	xdm_layer_set_priv(self, (void *)(uintptr_t)xdm_params_uint(p, "n"));
	return XDM_OK;
}

static int uint_show(struct xdm_layer *self, char *buf, size_t len)
{
	return snprintf(buf, len, "%llu\n", (unsigned long long)(uintptr_t)xdm_layer_priv(self));
}

static const struct xdm_param_spec uint_params[] = {
	{ "n", XDM_PARAM_UINT, "0", "a number" },
	{ NULL },
};

static const struct xdm_attr uint_attrs[] = {
	{ "n", 0444, "the number", uint_show, NULL },
	{ NULL },
};

static const struct xdm_ops uint_ops = {
	XDM_OPS_HEADER("uintparam", XDM_KIND_ADAPTOR),
	.params = uint_params,
	.attrs = uint_attrs,
	.init = uint_init,
};

START_TEST(uint_parameters_are_decimal_or_hex)
{
	static const struct { const char *text, *shown; } good[] = {
		{ "010", "10\n" }, { "0x1f", "31\n" }, { "0XFF", "255\n" }, { "7", "7\n" },
	};
	static const char *const bad[] = { "-1", "+1", "0x", "12abc", "0x1g", "1.5", "" };
	struct xdm_runtime *rt;
	char spec[64], val[32];

	TU_OK(xdm_module_register(&uint_ops));
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(spec, sizeof(spec), "uintparam n=%s | host", good[i].text);
		TU_OK(xdm_runtime_create(0, "host", spec, &rt));
		TU_OK(xdm_layer_attr_show(rt, 0, "n", val, sizeof(val)));
		ck_assert_str_eq(val, good[i].shown);
		TU_OK(xdm_runtime_destroy(rt));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(spec, sizeof(spec), "uintparam n=\"%s\" | host", bad[i]);
		ck_assert_msg(xdm_runtime_create(0, "host", spec, &rt) == XDM_E_CONFIG,
			      "n=%s was accepted", bad[i]);
	}
}
END_TEST

START_TEST(stream_calls_refuse_null)
{
	struct xdm_runtime *rt = host_runtime("host");
	xdm_stream_id id;
	void *h;

	ck_assert_int_eq(xdm_stream_import(NULL, (void *)rt, &id), XDM_E_INVALID);
	ck_assert_int_eq(xdm_stream_import(rt, NULL, &id), XDM_E_INVALID);
	ck_assert_int_eq(xdm_stream_handle(rt, 0, NULL), XDM_E_INVALID);
	ck_assert_int_eq(xdm_stream_handle(NULL, 0, &h), XDM_E_INVALID);
	ck_assert_int_eq(xdm_stream_synchronize(NULL, 0), XDM_E_INVALID);
	ck_assert_uint_eq(xdm_stream_count(NULL), 0);
	ck_assert_int_eq(xdm_reap_pending(NULL), XDM_E_INVALID);
	ck_assert_uint_eq(xdm_bytes_outstanding(NULL), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(foreign_block_is_refused)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b;

	TU_OK(xdm_allocate(rt, 64, 0, "t", &b));
	b.ordinal = 3;
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_E_INVALID);
	b.ordinal = 0;
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(counters_follow_the_blocks)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block a, b;
	struct xdm_stats st;

	TU_OK(xdm_allocate(rt, 1000, 0, "t", &a));
	TU_OK(xdm_allocate(rt, 3000, 0, "t", &b));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.allocs, 2);
	ck_assert_uint_eq(st.blocks_outstanding, 2);
	ck_assert_uint_eq(st.bytes_outstanding, a.bytes + b.bytes);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), a.bytes + b.bytes);
	TU_OK(xdm_deallocate(rt, &a));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.frees, 1);
	ck_assert_uint_eq(st.bytes_outstanding, b.bytes);
	ck_assert_uint_eq(st.bytes_peak, 4000);
	ck_assert_uint_eq(st.bytes_allocated, a.bytes + b.bytes);
	ck_assert_uint_eq(st.bytes_freed, a.bytes);
	ck_assert_uint_eq(st.blocks_peak, 2);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_reap_pending(rt));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	ck_assert_uint_eq(st.bytes_outstanding, 0);
	ck_assert_uint_eq(st.bytes_allocated, a.bytes + b.bytes);
	ck_assert_uint_eq(st.bytes_freed, a.bytes + b.bytes);
	ck_assert_uint_eq(st.blocks_peak, 2);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- counters: per thread, exact at quiescence ------------------------- */

static void expect_counts(struct xdm_runtime *rt, const struct xdm_stats *want)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.allocs, want->allocs);
	ck_assert_uint_eq(st.frees, want->frees);
	ck_assert_uint_eq(st.blocks_outstanding, want->blocks_outstanding);
	ck_assert_uint_eq(st.bytes_outstanding, want->bytes_outstanding);
	ck_assert_uint_eq(st.bytes_allocated, want->bytes_allocated);
	ck_assert_uint_eq(st.bytes_freed, want->bytes_freed);
}

/*
 * With several threads blocks_peak is a sample: no fewer than the blocks
 * live now nor the most any one thread held (each thread's allocations
 * passed its own high and sampled a sum holding its blocks), and no more
 * than were ever allocated.  Every thread of churn held its 64 blocks.
 */
static void expect_blocks_peak_sampled(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_ge(st.blocks_peak, st.blocks_outstanding);
	ck_assert_uint_ge(st.blocks_peak, CHURN_BLOCKS);
	ck_assert_uint_le(st.blocks_peak, st.allocs);
	ck_assert_uint_ge(st.bytes_peak, st.bytes_outstanding);
}

/* A fixed xorshift: the same "random" sequence on every run. */
static uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define RANDOM_LIVE_MAX 256

/*
 * xdm-bench's pair then random, on one thread (issue 12): one large block
 * allocated and freed over and over, then many smaller ones whose total
 * goes higher although no one address ever holds as much as the large
 * block did.  The peak must be the true one, which the test counts itself.
 */
START_TEST(peak_is_exact_on_one_thread)
{
	struct xdm_runtime *rt = host_runtime("pool | host");
	struct xdm_block *live = calloc(RANDOM_LIVE_MAX, sizeof(*live));
	uint64_t seed = 0x9e3779b97f4a7c15ull, now = 0, peak = 0, allocated = 0;
	size_t nlive = 0, live_at_peak = 0, blocks_peak = 1;
	struct xdm_stats st;
	struct xdm_block b;

	ck_assert_ptr_nonnull(live);
	for (int i = 0; i < 100; i++) {
		TU_OK(xdm_allocate(rt, 16 << 20, 0, "pair", &b));
		allocated += b.bytes;
		if (b.bytes > peak)
			peak = b.bytes;
		TU_OK(xdm_deallocate(rt, &b));
	}
	for (int op = 0; op < 4000; op++) {
		uint64_t r = next_random(&seed);

		if (nlive < RANDOM_LIVE_MAX && (nlive == 0 || r % 8 < 5)) {
			/* 4 KiB to 1 MiB, log-uniform. */
			size_t bytes = (size_t)4096 << (r >> 8) % 8;

			bytes += (size_t)((r >> 16) % bytes);
			TU_OK(xdm_allocate(rt, bytes, 0, "random", &live[nlive]));
			allocated += live[nlive].bytes;
			now += live[nlive++].bytes;
			if (now > peak) {
				peak = now;
				live_at_peak = nlive;
			}
			if (nlive > blocks_peak)
				blocks_peak = nlive;
		} else {
			size_t victim = (size_t)((r >> 24) % nlive);

			now -= live[victim].bytes;
			TU_OK(xdm_deallocate(rt, &live[victim]));
			live[victim] = live[--nlive];
		}
	}
	/* The case the issue is about: a higher total, spread over many blocks. */
	ck_assert_uint_gt(peak, 16 << 20);
	ck_assert_uint_gt(live_at_peak, 16);
	/* Blocks too: the most live at once is not where the bytes peaked. */
	ck_assert_uint_gt(blocks_peak, live_at_peak);
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_outstanding, now);
	ck_assert_uint_eq(st.bytes_peak, peak);
	ck_assert_uint_eq(st.blocks_outstanding, nlive);
	ck_assert_uint_eq(st.blocks_peak, blocks_peak);
	ck_assert_uint_eq(st.bytes_allocated, allocated);
	ck_assert_uint_eq(st.bytes_freed, allocated - now);
	while (nlive)
		TU_OK(xdm_deallocate(rt, &live[--nlive]));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_outstanding, 0);
	ck_assert_uint_eq(st.bytes_peak, peak);
	ck_assert_uint_eq(st.blocks_peak, blocks_peak);
	ck_assert_uint_eq(st.bytes_freed, allocated);
	free(live);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(counts_are_exact_across_threads)
{
	struct xdm_runtime *rt = host_runtime("pool | host");
	struct churn *c = calloc(1, sizeof(*c));
	struct xdm_stats want;

	ck_assert_ptr_nonnull(c);
	churn_start(c, rt);
	want = churn_expected(c);
	/* Every thread alive and quiet: the sum of their records. */
	expect_counts(rt, &want);
	expect_blocks_peak_sampled(rt);
	churn_finish(c);
	/* Every thread gone: their counts were handed to the runtime. */
	expect_counts(rt, &want);
	churn_free_live(c, &want);
	ck_assert_uint_eq(want.frees, want.allocs);
	ck_assert_uint_eq(want.bytes_freed, want.bytes_allocated);
	expect_counts(rt, &want);
	free(c);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

struct leaver {
	struct xdm_runtime *rt;
	struct xdm_block *frees[2];	/* blocks of others it frees */
	size_t sizes[3];		/* blocks it allocates and leaves live */
	struct xdm_block kept[3];
	enum xdm_status st;
};

static void *leave_blocks_live(void *arg)
{
	struct leaver *l = arg;

	for (int i = 0; i < 3 && l->st == XDM_OK; i++)
		if (l->sizes[i])
			l->st = xdm_allocate(l->rt, l->sizes[i], 0, "leaver", &l->kept[i]);
	for (int i = 0; i < 2 && l->st == XDM_OK; i++)
		if (l->frees[i])
			l->st = xdm_deallocate(l->rt, l->frees[i]);
	return NULL;
}

static void run_leaver(struct leaver *l)
{
	pthread_t th;

	ck_assert_int_eq(pthread_create(&th, NULL, leave_blocks_live, l), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(l->st == XDM_OK, "%s", xdm_strerror(l->st));
}

/*
 * Threads that exit with blocks live (and with frees of blocks they did not
 * allocate) leave their counts behind: the sums, and the peak that a later
 * allocation on another thread samples, still hold them.  The threads run
 * one at a time, so every value is known.
 */
START_TEST(exited_threads_keep_their_counts)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block m, big;
	struct leaver a = { .rt = rt, .sizes = { 4 << 20, 2 << 20, 1 << 20 }, .frees = { &m } };
	struct leaver b = { .rt = rt, .sizes = { 512 << 10 } };
	struct xdm_stats want = { 0 }, st;
	uint64_t peak, allocated, freed;

	TU_OK(xdm_allocate(rt, 1 << 20, 0, "main", &m));
	run_leaver(&a);
	allocated = m.bytes + a.kept[0].bytes + a.kept[1].bytes + a.kept[2].bytes;
	freed = m.bytes;
	want = (struct xdm_stats){
		.allocs = 4, .frees = 1, .blocks_outstanding = 3,
		.bytes_outstanding = a.kept[0].bytes + a.kept[1].bytes + a.kept[2].bytes,
		.bytes_allocated = allocated, .bytes_freed = freed,
	};
	expect_counts(rt, &want);
	/* The peak was reached inside the thread, before it freed m. */
	peak = m.bytes + want.bytes_outstanding;
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_peak, peak);
	ck_assert_uint_eq(st.blocks_peak, 4);

	/* A second thread (it may be handed the first one's record) frees
	 * two of the first one's blocks and leaves one of its own. */
	b.frees[0] = &a.kept[0];
	b.frees[1] = &a.kept[1];
	run_leaver(&b);
	allocated += b.kept[0].bytes;
	freed += a.kept[0].bytes + a.kept[1].bytes;
	want = (struct xdm_stats){
		.allocs = 5, .frees = 3, .blocks_outstanding = 2,
		.bytes_outstanding = a.kept[2].bytes + b.kept[0].bytes,
		.bytes_allocated = allocated, .bytes_freed = freed,
	};
	expect_counts(rt, &want);

	/* This thread passes its own high: the sum it samples holds the
	 * exited threads' blocks, and makes a new peak. */
	TU_OK(xdm_allocate(rt, 8 << 20, 0, "main", &big));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_outstanding, want.bytes_outstanding + big.bytes);
	ck_assert_uint_gt(st.bytes_outstanding, peak);
	ck_assert_uint_eq(st.bytes_peak, st.bytes_outstanding);
	/* Three blocks now, four while the first thread held its own and m. */
	ck_assert_uint_eq(st.blocks_peak, 4);

	TU_OK(xdm_deallocate(rt, &big));
	TU_OK(xdm_deallocate(rt, &a.kept[2]));
	TU_OK(xdm_deallocate(rt, &b.kept[0]));
	allocated += big.bytes;
	want = (struct xdm_stats){
		.allocs = 6, .frees = 6, .bytes_allocated = allocated, .bytes_freed = allocated,
	};
	expect_counts(rt, &want);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A thread still alive when its runtime is destroyed loses nothing it needs
 * (the sanitizer build names a leak or a use after free otherwise). */
struct idle_user {
	struct xdm_runtime *rt;
	pthread_barrier_t used, destroyed;
	enum xdm_status st;
};

static void *use_then_idle(void *arg)
{
	struct idle_user *u = arg;
	struct xdm_block b;

	u->st = xdm_allocate(u->rt, 4096, 0, "idle", &b);
	if (u->st == XDM_OK)
		u->st = xdm_deallocate(u->rt, &b);
	pthread_barrier_wait(&u->used);
	pthread_barrier_wait(&u->destroyed);
	return NULL;
}

START_TEST(destroy_with_a_live_thread_that_used_it)
{
	struct idle_user u = { .rt = host_runtime("host") };
	struct xdm_stats st;
	pthread_t th;

	ck_assert_int_eq(pthread_barrier_init(&u.used, NULL, 2), 0);
	ck_assert_int_eq(pthread_barrier_init(&u.destroyed, NULL, 2), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, use_then_idle, &u), 0);
	pthread_barrier_wait(&u.used);
	TU_OK(u.st);
	xdm_runtime_stats(u.rt, &st);
	ck_assert_uint_eq(st.allocs, 1);
	ck_assert_uint_eq(st.frees, 1);
	TU_OK(xdm_runtime_destroy(u.rt));
	/* The thread exits after the runtime is gone: no destructor runs. */
	pthread_barrier_wait(&u.destroyed);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&u.used);
	pthread_barrier_destroy(&u.destroyed);
}
END_TEST

static void bump(void *arg)
{
	atomic_fetch_add((_Atomic int *)arg, 1);
}

/*
 * A reset starts the peak again from what is held now; the next peak is
 * the highest total after it, also one below the old peak.  A thread that
 * held more before the reset is sampled again after it: its own high
 * started again too.
 */
struct peak_thread {
	struct xdm_runtime *rt;
	pthread_barrier_t step;
};

/* 6000 bytes allocated and freed; then, after the reset, 1000. */
static void *allocate_twice(void *arg)
{
	struct peak_thread *p = arg;
	struct xdm_block b;

	if (xdm_allocate(p->rt, 6000, 1, "other", &b) == XDM_OK)
		xdm_deallocate(p->rt, &b);
	pthread_barrier_wait(&p->step);
	pthread_barrier_wait(&p->step);
	if (xdm_allocate(p->rt, 1000, 1, "other", &b) == XDM_OK)
		xdm_deallocate(p->rt, &b);
	return NULL;
}

START_TEST(reset_peak_starts_again)
{
	struct peak_thread p = { .rt = host_runtime("host") };
	struct xdm_block a, b, c;
	struct xdm_stats st;
	pthread_t t;

	ck_assert_int_eq(xdm_runtime_reset_peak(NULL), XDM_E_INVALID);
	ck_assert_int_eq(pthread_barrier_init(&p.step, NULL, 2), 0);
	TU_OK(xdm_allocate(p.rt, 8000, 0, "t", &a));
	ck_assert_int_eq(pthread_create(&t, NULL, allocate_twice, &p), 0);
	pthread_barrier_wait(&p.step);		/* the 6000 came and went */
	TU_OK(xdm_allocate(p.rt, 2000, 0, "t", &b));
	TU_OK(xdm_deallocate(p.rt, &a));
	xdm_runtime_stats(p.rt, &st);
	ck_assert_uint_eq(st.bytes_peak, 14000);
	ck_assert_uint_eq(st.blocks_peak, 2);
	TU_OK(xdm_runtime_reset_peak(p.rt));
	xdm_runtime_stats(p.rt, &st);
	ck_assert_uint_eq(st.bytes_peak, 2000);
	ck_assert_uint_eq(st.blocks_peak, 1);
	/* The totals are no peak: a peak reset leaves them. */
	ck_assert_uint_eq(st.allocs, 3);
	ck_assert_uint_eq(st.bytes_allocated, 16000);
	TU_OK(xdm_allocate(p.rt, 3000, 0, "t", &c));
	TU_OK(xdm_deallocate(p.rt, &c));
	xdm_runtime_stats(p.rt, &st);
	ck_assert_uint_eq(st.bytes_peak, 5000);
	ck_assert_uint_eq(st.blocks_peak, 2);
	/* Its 1000 stays below its old high of 6000: only a reset high
	 * samples the total of 3000 while the block lives. */
	TU_OK(xdm_runtime_reset_peak(p.rt));
	pthread_barrier_wait(&p.step);
	pthread_join(t, NULL);
	xdm_runtime_stats(p.rt, &st);
	ck_assert_uint_eq(st.bytes_peak, 3000);
	ck_assert_uint_eq(st.blocks_peak, 2);
	TU_OK(xdm_deallocate(p.rt, &b));
	pthread_barrier_destroy(&p.step);
	TU_OK(xdm_runtime_destroy(p.rt));
}
END_TEST

/* The totals xdm_runtime_reset_totals() restarts, and what it leaves. */
static void expect_totals(struct xdm_runtime *rt, uint64_t allocs, uint64_t frees,
			  uint64_t allocated, uint64_t freed, uint64_t failures)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.allocs, allocs);
	ck_assert_uint_eq(st.frees, frees);
	ck_assert_uint_eq(st.bytes_allocated, allocated);
	ck_assert_uint_eq(st.bytes_freed, freed);
	ck_assert_uint_eq(st.failures, failures);
}

static void expect_held(struct xdm_runtime *rt, uint64_t blocks, uint64_t bytes)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, blocks);
	ck_assert_uint_eq(st.bytes_outstanding, bytes);
}

/*
 * After a reset the totals count from 0 and go on counting; what is held,
 * and the peaks, are not totals and stay as they were.
 */
START_TEST(reset_totals_keeps_what_is_held)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block a, b, c, d, none;
	struct xdm_stats st;

	ck_assert_int_eq(xdm_runtime_reset_totals(NULL), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "xdm_runtime_reset_totals"));
	TU_OK(xdm_allocate(rt, 1000, 0, "t", &a));
	TU_OK(xdm_allocate(rt, 3000, 0, "t", &b));
	TU_OK(xdm_allocate(rt, 5000, 0, "t", &c));
	TU_OK(xdm_deallocate(rt, &a));
	ck_assert_int_eq(xdm_allocate(rt, 0, 0, "t", &none), XDM_E_INVALID);
	expect_totals(rt, 3, 1, a.bytes + b.bytes + c.bytes, a.bytes, 1);
	expect_held(rt, 2, b.bytes + c.bytes);

	TU_OK(xdm_runtime_reset_totals(rt));
	expect_totals(rt, 0, 0, 0, 0, 0);
	expect_held(rt, 2, b.bytes + c.bytes);
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_peak, a.bytes + b.bytes + c.bytes);
	ck_assert_uint_eq(st.blocks_peak, 3);

	/* Counting again: a free of a block from before counts too. */
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_allocate(rt, 700, 0, "t", &d));
	ck_assert_int_eq(xdm_allocate(rt, 0, 0, "t", &none), XDM_E_INVALID);
	expect_totals(rt, 1, 1, d.bytes, b.bytes, 1);
	expect_held(rt, 2, c.bytes + d.bytes);

	/* Twice in a row is once; a peak reset leaves the totals alone. */
	TU_OK(xdm_runtime_reset_totals(rt));
	TU_OK(xdm_runtime_reset_totals(rt));
	TU_OK(xdm_runtime_reset_peak(rt));
	expect_totals(rt, 0, 0, 0, 0, 0);
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	expect_totals(rt, 0, 2, 0, c.bytes + d.bytes, 0);
	expect_held(rt, 0, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * A reset among threads at quiescence: the threads' records are left as
 * they are, so their exits (folding the records into the retired totals)
 * and a thread that joins after the reset count from the same baseline.
 */
START_TEST(reset_totals_across_threads)
{
	struct xdm_runtime *rt = host_runtime("pool | host");
	struct churn *c = calloc(1, sizeof(*c));
	struct xdm_block kept;
	struct leaver late = { .rt = rt, .sizes = { 4096, 8192 }, .frees = { &kept } };
	struct xdm_stats want, zero;

	ck_assert_ptr_nonnull(c);
	TU_OK(xdm_allocate(rt, 2048, 0, "main", &kept));
	churn_start(c, rt);
	want = churn_expected(c);
	TU_OK(xdm_runtime_reset_totals(rt));
	zero = (struct xdm_stats){
		.blocks_outstanding = want.blocks_outstanding + 1,
		.bytes_outstanding = want.bytes_outstanding + kept.bytes,
	};
	expect_counts(rt, &zero);
	churn_finish(c);
	expect_counts(rt, &zero);

	/* A new thread allocates two blocks and frees the one from before. */
	run_leaver(&late);
	want = (struct xdm_stats){
		.allocs = 2, .frees = 1,
		.blocks_outstanding = zero.blocks_outstanding + 1,
		.bytes_outstanding = zero.bytes_outstanding - kept.bytes + late.kept[0].bytes +
				     late.kept[1].bytes,
		.bytes_allocated = late.kept[0].bytes + late.kept[1].bytes,
		.bytes_freed = kept.bytes,
	};
	expect_counts(rt, &want);

	/* Every block goes: the frees since the reset are all the blocks. */
	want.frees += 2;
	want.bytes_freed += late.kept[0].bytes + late.kept[1].bytes;
	TU_OK(xdm_deallocate(rt, &late.kept[0]));
	TU_OK(xdm_deallocate(rt, &late.kept[1]));
	churn_free_live(c, &want);
	expect_counts(rt, &want);
	ck_assert_uint_eq(want.bytes_freed, want.bytes_allocated + zero.bytes_outstanding);
	free(c);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(streams_import_and_launch)
{
	struct xdm_runtime *rt = host_runtime("host"), *other = host_runtime("host");
	void *h0, *foreign;
	xdm_stream_id id, again;
	_Atomic int ran = 0;
	uint32_t n = xdm_stream_count(rt);

	ck_assert_uint_eq(n, 16);
	TU_OK(xdm_stream_handle(rt, 0, &h0));
	TU_OK(xdm_stream_import(rt, h0, &id));
	ck_assert_uint_eq(id, 0);	/* already in the pool */
	TU_OK(xdm_stream_handle(other, 3, &foreign));
	TU_OK(xdm_stream_import(rt, foreign, &id));
	ck_assert_uint_eq(id, n);
	TU_OK(xdm_stream_import(rt, foreign, &again));
	ck_assert_uint_eq(again, id);
	ck_assert_uint_eq(xdm_stream_count(rt), n + 1);
	TU_OK(xdm_stream_launch_host(rt, id, bump, (void *)&ran));
	TU_OK(xdm_stream_synchronize(rt, id));
	ck_assert_int_eq(atomic_load(&ran), 1);
	ck_assert_int_eq(xdm_stream_handle(rt, n + 1, &h0), XDM_E_INVALID);
	ck_assert_int_eq(xdm_stream_launch_host(rt, 0, NULL, NULL), XDM_E_INVALID);
	/* The importing runtime goes first and must not destroy the stream. */
	TU_OK(xdm_runtime_destroy(rt));
	TU_OK(xdm_stream_launch_host(other, 3, bump, (void *)&ran));
	TU_OK(xdm_stream_synchronize(other, 3));
	ck_assert_int_eq(atomic_load(&ran), 2);
	TU_OK(xdm_runtime_destroy(other));
}
END_TEST

START_TEST(describes_device_and_stack)
{
	struct xdm_runtime *rt = host_runtime("host free=stream");
	struct xdm_device_info dev;
	char spec[256], val[64];

	TU_OK(xdm_runtime_device(rt, &dev));
	ck_assert_str_eq(dev.platform, "host");
	ck_assert_uint_gt(dev.total_bytes, 0);
	ck_assert_uint_eq(strlen(dev.uuid), 36);
	ck_assert_uint_eq(xdm_runtime_ordinal(rt), 0);
	ck_assert_uint_eq(xdm_runtime_layer_count(rt), 1);
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 0), "host");
	ck_assert_ptr_null(xdm_runtime_layer_name(rt, 1));
	TU_OK(xdm_runtime_stack_spec(rt, spec, sizeof(spec)));
	ck_assert_str_eq(spec, "host free=stream");
	ck_assert_int_eq(xdm_runtime_stack_spec(rt, spec, 4), XDM_E_INVALID);
	TU_OK(xdm_layer_attr_show(rt, 0, "allocs", val, sizeof(val)));
	ck_assert_str_eq(val, "0\n");
	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "nosuch", val, sizeof(val)), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_show(rt, 5, "allocs", val, sizeof(val)), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "allocs", "5"), XDM_E_NOT_SUPPORTED);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * A stack with no writable `peers` owns no memory that needs a grant:
 * xdm_runtime_grant_peer has nothing to do and says so with XDM_OK.  The
 * grant itself is the cuda backends' (tests/gpu/check_peer_cuda.c).
 */
START_TEST(grant_peer_without_a_grantor)
{
	struct xdm_runtime *rt = host_runtime("pool | host");

	TU_OK(xdm_runtime_grant_peer(rt, 1));
	TU_OK(xdm_runtime_grant_peer(rt, 0));
	TU_OK(xdm_runtime_grant_peer(rt, XDM_MAX_DEVICES - 1));
	ck_assert_int_eq(xdm_runtime_grant_peer(rt, XDM_MAX_DEVICES), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "past the largest ordinal"));
	ck_assert_int_eq(xdm_runtime_grant_peer(NULL, 1), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A store that succeeds leaves the thread's error as it found it. */
START_TEST(attr_store_keeps_the_last_error)
{
	struct xdm_runtime *rt = host_runtime("pool | host");
	char val[64];

	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "nosuch", val, sizeof(val)), XDM_E_INVALID);
	TU_OK(xdm_layer_attr_store(rt, 0, "max", "1G"));
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "no attribute 'nosuch'"));
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "max", "banana"), XDM_E_INVALID);
	/* The handler's own sentence, where it left one, says why. */
	ck_assert_str_eq(xdm_last_error_message(),
			 "attribute 'max': 'banana' rejected: Invalid argument (invalid size "
			 "'banana': expected digits, an optional fraction, then K, M, G, T or %)");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static void count_block(const struct xdm_block *b, void *arg)
{
	uint64_t *sum = arg;

	sum[0]++;
	sum[1] += b->bytes;
}

START_TEST(for_each_block_sees_the_live_set)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b[5];
	uint64_t sum[2] = { 0, 0 };

	for (int i = 0; i < 5; i++)
		TU_OK(xdm_allocate(rt, 1000 * (size_t)(i + 1), 0, "t", &b[i]));
	TU_OK(xdm_deallocate(rt, &b[2]));
	TU_OK(xdm_runtime_for_each_block(rt, count_block, sum));
	ck_assert_uint_eq(sum[0], 4);
	ck_assert_uint_eq(sum[1], 1000 + 2000 + 4000 + 5000);
	ck_assert_int_eq(xdm_runtime_for_each_block(rt, NULL, NULL), XDM_E_INVALID);
	for (int i = 0; i < 5; i++)
		if (i != 2)
			TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * A block keeps the bytes it was asked for beside its own, which its stack
 * may round up (a pool's size classes): what a framework's snapshot calls
 * the requested size.  A stale id is refused as any lookup's.
 */
START_TEST(requested_bytes_are_kept)
{
	static const size_t asked[] = { 1000, 4097, 65536 + 3 };
	struct xdm_runtime *rt = host_runtime("pool | host");
	struct xdm_block b[3];
	size_t got;

	for (int i = 0; i < 3; i++) {
		TU_OK(xdm_allocate(rt, asked[i], 0, "t", &b[i]));
		ck_assert_uint_ge(b[i].bytes, asked[i]);
		TU_OK(xdm_block_requested(rt, xdm_block_id_of(&b[i]), &got));
		ck_assert_uint_eq(got, asked[i]);
	}
	/* Rounded somewhere, or the test shows nothing the block does not. */
	ck_assert_uint_gt(b[0].bytes, asked[0]);
	TU_OK(xdm_deallocate(rt, &b[1]));
	ck_assert_int_eq(xdm_block_requested(rt, xdm_block_id_of(&b[1]), &got),
			 XDM_E_USE_AFTER_FREE);
	ck_assert_int_eq(xdm_block_requested(rt, xdm_block_id_of(&b[0]), NULL), XDM_E_INVALID);
	TU_OK(xdm_allocate_at(rt, b[1].ptr, 4096, 0, "t", &b[1]));
	TU_OK(xdm_block_requested(rt, xdm_block_id_of(&b[1]), &got));
	ck_assert_uint_eq(got, 4096);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static void *other_thread_query_id(void *arg)
{
	*(uint64_t *)arg = xdm_query_id();
	return NULL;
}

START_TEST(query_id_is_per_thread)
{
	pthread_t t;
	uint64_t seen = 99;

	ck_assert_uint_eq(xdm_query_id(), 0);
	xdm_set_query_id(42);
	ck_assert_uint_eq(xdm_query_id(), 42);
	pthread_create(&t, NULL, other_thread_query_id, &seen);
	pthread_join(t, NULL);
	ck_assert_uint_eq(seen, 0);
}
END_TEST

START_TEST(missing_device_is_no_device)
{
	struct xdm_runtime *rt;

	ck_assert_int_eq(xdm_runtime_create(1, "host", "host", &rt), XDM_E_NO_DEVICE);
	ck_assert_int_eq(xdm_runtime_create(XDM_MAX_DEVICES, "host", "host", &rt),
			 XDM_E_NO_DEVICE);
	ck_assert_int_eq(xdm_runtime_get(XDM_MAX_DEVICES, &rt), XDM_E_NO_DEVICE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "maximum"));
}
END_TEST

START_TEST(failed_build_leaves_nothing)
{
	struct xdm_runtime *rt;

	ck_assert_int_eq(xdm_runtime_create(0, "host", "host free=banana", &rt), XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "<stack>:1:1:"));
	ck_assert_int_eq(xdm_runtime_create(0, "host", "nosuch | host", &rt), XDM_E_CONFIG);
	ck_assert_int_eq(xdm_runtime_create(0, "nosuchplatform", "host", &rt), XDM_E_CONFIG);
	/* The same process still builds a good runtime afterwards. */
	rt = host_runtime("host");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- singletons ------------------------------------------------------ */

static _Atomic int counting_inits;

static enum xdm_status counting_init(struct xdm_layer *self, const struct xdm_params *p)
{
	atomic_fetch_add(&counting_inits, 1);
	tu_sleep_ms(20);	/* widen the window in which other callers arrive */
	return XDM_OK;
}

static const struct xdm_ops counting_ops = {
	XDM_OPS_HEADER("counting", XDM_KIND_ADAPTOR),
	.init = counting_init,
};

static void use_config(const char *text)
{
	char *path = tu_write_temp(text);

	setenv("XDM_CONFIG", path, 1);
	free(path);
}

struct racer {
	pthread_barrier_t *start;
	struct xdm_runtime *rt;
	enum xdm_status st;
};

static void *race_get(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->start);
	r->st = xdm_runtime_get(0, &r->rt);
	return NULL;
}

START_TEST(first_get_race_builds_once)
{
	enum { N = 16 };
	pthread_barrier_t start;
	pthread_t t[N];
	struct racer r[N];

	TU_OK(xdm_module_register(&counting_ops));
	use_config("platform = host\n[device 0]\nstack = counting | host\n");
	pthread_barrier_init(&start, NULL, N);
	for (int i = 0; i < N; i++) {
		r[i] = (struct racer){ .start = &start };
		pthread_create(&t[i], NULL, race_get, &r[i]);
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r[i].st, XDM_OK);
		ck_assert_ptr_eq(r[i].rt, r[0].rt);
	}
	ck_assert_int_eq(atomic_load(&counting_inits), 1);
	ck_assert_str_eq(xdm_runtime_layer_name(r[0].rt, 0), "counting");
	pthread_barrier_destroy(&start);
}
END_TEST

START_TEST(singleton_is_not_destroyed)
{
	struct xdm_runtime *a, *b;

	TU_OK(xdm_runtime_get(0, &a));
	TU_OK(xdm_runtime_get(0, &b));
	ck_assert_ptr_eq(a, b);
	ck_assert_int_eq(xdm_runtime_destroy(a), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "singleton"));
}
END_TEST

START_TEST(bad_config_then_fixed_config)
{
	struct xdm_runtime *rt;
	char *path = tu_write_temp("platform = host\n[device 0]\nstack = nosuch | host\n");
	char want[512];

	setenv("XDM_CONFIG", path, 1);
	ck_assert_int_eq(xdm_runtime_get(0, &rt), XDM_E_CONFIG);
	snprintf(want, sizeof(want), "%s:3:9: unknown module 'nosuch'", path);
	ck_assert_msg(strstr(xdm_last_error_message(), want), "got: %s",
		      xdm_last_error_message());
	/* Nothing was stored: the next call tries again with the fixed file. */
	use_config("platform = host\n");
	TU_OK(xdm_runtime_get(0, &rt));
	unlink(path);
	free(path);
}
END_TEST

START_TEST(embedded_default_falls_back_to_host)
{
	struct xdm_runtime *rt;
	struct xdm_device_info dev;

	unsetenv("XDM_CONFIG");
	if (access(XDM_SYSCONF_FILE, F_OK) == 0)
		return;	/* this machine has its own config; the default is not in play */
	TU_OK(xdm_runtime_get(0, &rt));
	TU_OK(xdm_runtime_device(rt, &dev));
	/* Without a GPU (or without the cuda module) the default lands on host,
	 * with the platform's own default stack. */
	ck_assert_msg(strcmp(dev.platform, "host") == 0 || strcmp(dev.platform, "cuda") == 0,
		      "platform %s", dev.platform);
	if (strcmp(dev.platform, "host") == 0) {
		char spec[64];

		TU_OK(xdm_runtime_stack_spec(rt, spec, sizeof(spec)));
		ck_assert_str_eq(spec, "pool | host");
	}
}
END_TEST

static Suite *runtime_suite(void)
{
	Suite *s = suite_create("runtime");
	TCase *tc = tcase_create("blocks");
	TCase *ts = tcase_create("singletons");
	TCase *tcn = tcase_create("counters");

	tcase_add_test(tc, allocate_fills_the_block);
	tcase_add_test(tc, generations_are_unique);
	tcase_add_test(tc, bad_arguments_are_invalid);
	tcase_add_test(tc, double_free_is_use_after_free);
	tcase_add_test(tc, stale_id_after_reissue_is_use_after_free);
	tcase_add_test(tc, reissued_address_is_named_in_the_error);
	tcase_add_test(tc, duplicate_live_address_is_refused_without_freeing);
	tcase_add_test(tc, destroy_frees_blocks_left_live);
	tcase_add_test(tc, stream_calls_refuse_null);
	tcase_add_test(tc, uint_parameters_are_decimal_or_hex);
	tcase_add_test(tc, foreign_block_is_refused);
	tcase_add_test(tc, counters_follow_the_blocks);
	tcase_add_test(tc, reset_peak_starts_again);
	tcase_add_test(tc, reset_totals_keeps_what_is_held);
	tcase_add_test(tc, streams_import_and_launch);
	tcase_add_test(tc, describes_device_and_stack);
	tcase_add_test(tc, grant_peer_without_a_grantor);
	tcase_add_test(tc, attr_store_keeps_the_last_error);
	tcase_add_test(tc, for_each_block_sees_the_live_set);
	tcase_add_test(tc, requested_bytes_are_kept);
	tcase_add_test(tc, query_id_is_per_thread);
	tcase_add_test(tc, missing_device_is_no_device);
	tcase_add_test(tc, failed_build_leaves_nothing);
	suite_add_tcase(s, tc);
	tcase_add_test(tcn, peak_is_exact_on_one_thread);
	tcase_add_test(tcn, counts_are_exact_across_threads);
	tcase_add_test(tcn, exited_threads_keep_their_counts);
	tcase_add_test(tcn, reset_totals_across_threads);
	tcase_add_test(tcn, destroy_with_a_live_thread_that_used_it);
	suite_add_tcase(s, tcn);
	tcase_add_test(ts, first_get_race_builds_once);
	tcase_add_test(ts, singleton_is_not_destroyed);
	tcase_add_test(ts, bad_config_then_fixed_config);
	tcase_add_test(ts, embedded_default_falls_back_to_host);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	return tu_run_suite(runtime_suite());
}
