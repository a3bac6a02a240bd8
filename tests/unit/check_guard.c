/* SPDX-License-Identifier: MIT */
/*
 * check_guard.c - the guard adaptor on the host platform, where a block's
 * address is a real host pointer: the tests plant out-of-bounds writes and
 * writes after free with plain stores, and the guard must find each one,
 * say which side and name the block's generation.
 *
 * The guard fills canaries and poison on the block's stream, so a test
 * synchronizes that stream before it touches the bytes itself; otherwise the
 * guard's queued memset could land after the planted write and erase it.
 *
 * The planted writes stay inside the upstream allocation (the canaries and
 * the quarantined blocks are part of it), so AddressSanitizer sees no bug
 * of the test's own.
 *
 * A free reads nothing back: the guard checks a block when it leaves the
 * quarantine, on its checker thread, and returns what it found from the
 * next deallocate or xdm_reap_pending.  The tests name that point
 * explicitly (a reap, or a limit that makes the block leave at once), and
 * never depend on when the checker thread runs.
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <xdm/xdm.h>

#include "tests/lib/testutil.h"

#define CANARY_BYTE 0xca	/* the defaults */
#define POISON_BYTE 0xdd

static struct xdm_runtime *make(const char *stack)
{
	struct xdm_runtime *rt;

	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 0), "guard");
	return rt;
}

static unsigned char *bytes_of(const struct xdm_block *b)
{
	return (unsigned char *)(uintptr_t)b->ptr;
}

static void alloc_synced(struct xdm_runtime *rt, size_t n, const char *tag, struct xdm_block *b)
{
	TU_OK(xdm_allocate(rt, n, 0, tag, b));
	TU_OK(xdm_stream_synchronize(rt, b->stream));
}

static void show(struct xdm_runtime *rt, const char *attr, char *buf, size_t len)
{
	TU_OK(xdm_layer_attr_show(rt, 0, attr, buf, len));
}

static uint64_t attr_u64(struct xdm_runtime *rt, const char *attr)
{
	char buf[64], *end;
	uint64_t v;

	show(rt, attr, buf, sizeof(buf));
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && *end == '\n', "%s: '%s' is no number", attr, buf);
	return v;
}

static void expect_error(enum xdm_status st, enum xdm_status code, xdm_generation gen,
			 enum xdm_bounds_side side, const char *needle)
{
	const struct xdm_error *e = xdm_last_error();

	ck_assert_msg(st == code, "expected %s, got %s (%s)", xdm_strerror(code),
		      xdm_strerror(st), xdm_last_error_message());
	ck_assert_int_eq(e->code, code);
	ck_assert_uint_eq(e->generation, gen);
	ck_assert_int_eq(e->side, side);
	ck_assert_msg(strstr(e->message, needle), "'%s' not in '%s'", needle, e->message);
}

static void finish(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	TU_OK(xdm_runtime_destroy(rt));
}

/* ---- canaries ------------------------------------------------------------ */

START_TEST(clean_block_frees_ok_and_is_quarantined)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block b;

	alloc_synced(rt, 1000, "clean", &b);
	memset(bytes_of(&b), 0x11, 1000);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_QUARANTINED);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 0);
	ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 0);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 1);
	finish(rt);
}
END_TEST

START_TEST(overrun_after_is_out_of_bounds_after)
{
	struct xdm_runtime *rt = make("guard | host");
	char buf[600];
	struct xdm_block b;
	xdm_generation gen;

	alloc_synced(rt, 1000, "over", &b);
	gen = b.generation;
	bytes_of(&b)[1000] = 0;		/* one byte past the end */
	/* The free reads nothing back: the block goes to the quarantine. */
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_QUARANTINED);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 1);
	/* The reap empties the quarantine, checked: the damage comes back
	 * from it, naming the block. */
	expect_error(xdm_reap_pending(rt), XDM_E_OUT_OF_BOUNDS, gen, XDM_SIDE_AFTER,
		     "after the end");
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "offset +1000"));
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "tag \"over\""));
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 0);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);
	show(rt, "last_violation", buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "after the end"));
	/* Told once: the next reap is clean. */
	TU_OK(xdm_reap_pending(rt));
	finish(rt);
}
END_TEST

START_TEST(underrun_before_is_out_of_bounds_before)
{
	/* With no quarantine the block leaves at once, checked, and its
	 * own free returns what the check found. */
	struct xdm_runtime *rt = make("guard quarantine_count=0 | host");
	struct xdm_block b;
	xdm_generation gen;

	alloc_synced(rt, 4096, "under", &b);
	gen = b.generation;
	bytes_of(&b)[-1] = 0;		/* one byte before the start */
	expect_error(xdm_deallocate(rt, &b), XDM_E_OUT_OF_BOUNDS, gen, XDM_SIDE_BEFORE,
		     "before the start");
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "offset -1"));
	ck_assert_int_eq(b.state, XDM_BLOCK_FREED);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 0);
	finish(rt);
}
END_TEST

START_TEST(far_damage_in_the_canary_is_found)
{
	struct xdm_runtime *rt = make("guard canary=64 quarantine_count=0 | host");
	struct xdm_block b;

	/* The last byte of the back canary, and the first of the front. */
	alloc_synced(rt, 300, "far", &b);
	bytes_of(&b)[300 + 63] ^= 0xff;
	expect_error(xdm_deallocate(rt, &b), XDM_E_OUT_OF_BOUNDS, b.generation, XDM_SIDE_AFTER,
		     "offset +363");
	alloc_synced(rt, 300, "far", &b);
	bytes_of(&b)[-256] ^= 0xff;	/* canary 64 rounds up to a 256-byte front */
	expect_error(xdm_deallocate(rt, &b), XDM_E_OUT_OF_BOUNDS, b.generation, XDM_SIDE_BEFORE,
		     "offset -256");
	finish(rt);
}
END_TEST

START_TEST(both_sides_damaged_names_both)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block b;
	xdm_generation gen;

	alloc_synced(rt, 512, "both", &b);
	gen = b.generation;
	memset(bytes_of(&b) + 512, 0, 3);
	bytes_of(&b)[-2] = 0;
	TU_OK(xdm_deallocate(rt, &b));
	expect_error(xdm_reap_pending(rt), XDM_E_OUT_OF_BOUNDS, gen, XDM_SIDE_AFTER,
		     "3 bytes after the end");
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "before its start"));
	finish(rt);
}
END_TEST

START_TEST(pointer_is_aligned_and_user_area_exact)
{
	static const size_t sizes[] = { 1, 7, 255, 256, 257, 1000, 4097, 65536 };
	struct xdm_runtime *rt = make("guard canary=100 canary_pattern=0x5a | host");

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		struct xdm_block b;
		unsigned char *p;

		alloc_synced(rt, n, "exact", &b);
		p = bytes_of(&b);
		ck_assert_uint_eq(b.ptr % XDM_DEFAULT_ALIGN, 0);
		ck_assert_uint_ge(b.align, XDM_DEFAULT_ALIGN);
		ck_assert_uint_eq(b.bytes, n);
		/* The back canary starts right at ptr + bytes, 100 bytes long;
		 * the front one fills the 256 bytes before ptr. */
		for (size_t k = 0; k < 100; k++)
			ck_assert_uint_eq(p[n + k], 0x5a);
		for (size_t k = 1; k <= 256; k++)
			ck_assert_uint_eq(p[-(ptrdiff_t)k], 0x5a);
		/* The whole user area may be written. */
		memset(p, 0x33, n);
		TU_OK(xdm_deallocate(rt, &b));
	}
	finish(rt);
}
END_TEST

START_TEST(no_canaries_with_canary_0)
{
	struct xdm_runtime *rt = make("guard canary=0 | host");
	struct xdm_block b;

	alloc_synced(rt, 333, "bare", &b);
	ck_assert_uint_eq(b.ptr % XDM_DEFAULT_ALIGN, 0);
	memset(bytes_of(&b), 1, 333);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_stream_synchronize(rt, 0));
	for (size_t k = 0; k < 333; k++)
		ck_assert_uint_eq(bytes_of(&b)[k], POISON_BYTE);
	finish(rt);
}
END_TEST

/* ---- poison and quarantine ------------------------------------------------ */

START_TEST(freed_memory_holds_the_poison)
{
	struct xdm_runtime *rt = make("guard poison=0x6b | host");
	struct xdm_block b;
	unsigned char *p;

	alloc_synced(rt, 2000, "poisoned", &b);
	p = bytes_of(&b);
	memset(p, 0x11, 2000);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_stream_synchronize(rt, 0));
	/* Still in the quarantine, so still the upstream's memory. */
	for (size_t k = 0; k < 2000; k++)
		ck_assert_uint_eq(p[k], 0x6b);
	/* The canaries keep their pattern, to be checked on the way out. */
	ck_assert_uint_eq(p[-1], CANARY_BYTE);
	ck_assert_uint_eq(p[2000], CANARY_BYTE);
	finish(rt);
}
END_TEST

START_TEST(write_after_free_is_use_after_free_at_eviction)
{
	struct xdm_runtime *rt = make("guard quarantine_count=1 | host");
	struct xdm_block a, b;
	xdm_generation gen_a;
	unsigned char *pa;

	alloc_synced(rt, 1024, "victim", &a);
	gen_a = a.generation;
	pa = bytes_of(&a);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_stream_synchronize(rt, 0));
	pa[10] = 0x42;			/* the dangling write */
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 1);

	/* Freeing b pushes a out of a quarantine of one: its check fails
	 * there, with a's generation, and both are consumed. */
	alloc_synced(rt, 64, "next", &b);
	expect_error(xdm_deallocate(rt, &b), XDM_E_USE_AFTER_FREE, gen_a, XDM_SIDE_NONE,
		     "written after the free");
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "offset +10"));
	ck_assert_int_eq(b.state, XDM_BLOCK_QUARANTINED);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 1);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);
	finish(rt);
}
END_TEST

START_TEST(double_free_and_stale_handle_are_use_after_free)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block b, copy, forged;
	struct xdm_block_id id;
	struct xdm_block out;

	alloc_synced(rt, 128, "twice", &b);
	copy = b;
	id = xdm_block_id_of(&b);

	/* A handle with a generation the registry never gave this address. */
	forged = b;
	forged.generation += 1 << 20;
	expect_error(xdm_deallocate(rt, &forged), XDM_E_USE_AFTER_FREE, forged.generation,
		     XDM_SIDE_NONE, "not live");
	ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 1);

	TU_OK(xdm_deallocate(rt, &b));
	expect_error(xdm_deallocate(rt, &copy), XDM_E_USE_AFTER_FREE, copy.generation,
		     XDM_SIDE_NONE, "not live");
	expect_error(xdm_block_lookup(rt, id, &out), XDM_E_USE_AFTER_FREE, id.generation,
		     XDM_SIDE_NONE, "not live");
	ck_assert_int_eq(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ),
			 XDM_E_USE_AFTER_FREE);
	/* The runtime refused them before the guard saw them. */
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 1);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 0);
	finish(rt);
}
END_TEST

START_TEST(quarantine_count_is_a_limit)
{
	struct xdm_runtime *rt = make("guard quarantine_count=3 quarantine_bytes=1G | host");
	struct xdm_block b[10];

	for (int i = 0; i < 10; i++)
		alloc_synced(rt, 100 + i, "q", &b[i]);
	ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 10);
	for (int i = 0; i < 10; i++) {
		TU_OK(xdm_deallocate(rt, &b[i]));
		ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), i + 1 < 3 ? i + 1 : 3);
		ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 9 - i);
	}
	finish(rt);
}
END_TEST

START_TEST(quarantine_bytes_is_a_limit)
{
	/* 512 bytes and two 256-byte canaries: 1K upstream each, 4 fit in 4K. */
	struct xdm_runtime *rt = make("guard quarantine_bytes=4K | host");
	struct xdm_block b, big;

	/*
	 * The FIFO keeps 7/8 of 4K, three blocks; a fourth may still wait for
	 * its check, whenever the checker thread runs, but never a fifth.
	 */
	for (int i = 0; i < 10; i++) {
		alloc_synced(rt, 512, "q", &b);
		TU_OK(xdm_deallocate(rt, &b));
		ck_assert_uint_le(attr_u64(rt, "quarantined_bytes"), 4096);
		ck_assert_uint_ge(attr_u64(rt, "quarantined_bytes"), i < 3 ? 1024 * (i + 1) : 3072);
	}

	/* A block larger than the whole quarantine goes straight through,
	 * and pushes out everything before it. */
	alloc_synced(rt, 8192, "big", &big);
	TU_OK(xdm_deallocate(rt, &big));
	ck_assert_int_ne(big.state, XDM_BLOCK_QUARANTINED);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 0);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_bytes"), 0);
	finish(rt);
}
END_TEST

START_TEST(teardown_empties_the_quarantine)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block b;

	for (int i = 0; i < 20; i++) {
		alloc_synced(rt, 4096, "t", &b);
		TU_OK(xdm_deallocate(rt, &b));
	}
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 20);
	ck_assert_uint_gt(xdm_bytes_outstanding(rt), 0);	/* held back, still counted */
	ck_assert_uint_ge(xdm_bytes_outstanding(rt), attr_u64(rt, "quarantined_bytes"));
	/* Under ASan, a block fini failed to give back would be a leak. */
	finish(rt);
}
END_TEST

START_TEST(teardown_reports_a_use_after_free_on_stderr)
{
	struct xdm_runtime *rt = make("guard | host");
	char *path = tu_write_temp("");
	char text[1024] = "";
	struct xdm_block b;
	int saved, fd;
	FILE *f;
	size_t n;

	alloc_synced(rt, 512, "late", &b);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_stream_synchronize(rt, 0));
	bytes_of(&b)[3] = 1;

	/* This test runs in its own process (fork mode): stderr may move. */
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	close(fd);
	TU_OK(xdm_runtime_destroy(rt));
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);

	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(path);
	free(path);
	ck_assert_msg(strstr(text, "written after the free") && strstr(text, "tag \"late\""),
		      "stderr said: %s", text);
}
END_TEST

START_TEST(works_over_a_synchronous_upstream)
{
	struct xdm_runtime *rt = make("guard quarantine_count=1 | host free=sync");
	struct xdm_block b[3];
	xdm_generation gen;

	for (int i = 0; i < 3; i++)
		alloc_synced(rt, 1000, "sync", &b[i]);
	gen = b[1].generation;
	bytes_of(&b[1])[1000] = 0;
	/* b[1] leaves a quarantine of one when b[2] is freed: that free
	 * waits for its check and returns it. */
	TU_OK(xdm_deallocate(rt, &b[0]));
	TU_OK(xdm_deallocate(rt, &b[1]));
	expect_error(xdm_deallocate(rt, &b[2]), XDM_E_OUT_OF_BOUNDS, gen, XDM_SIDE_AFTER,
		     "offset +1000");
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 1);
	finish(rt);
}
END_TEST

/* ---- checked later, in batches ------------------------------------------ */

/*
 * One damaged block among many that pass through the checker in batches:
 * exactly one call (a later free, or the reap at the latest) returns the
 * damage, naming that block, and the count says one.
 */
START_TEST(overrun_is_reported_after_the_batch_check)
{
	struct xdm_runtime *rt = make("guard quarantine_count=16 | host");
	struct xdm_block b;
	xdm_generation gen = 0;
	int reports = 0;

	for (int i = 0; i < 200; i++) {
		enum xdm_status st;

		alloc_synced(rt, 300, i == 37 ? "the-one" : "other", &b);
		if (i == 37) {
			gen = b.generation;
			bytes_of(&b)[300 + 5] = 0;
		}
		st = xdm_deallocate(rt, &b);
		if (st == XDM_OK)
			continue;
		expect_error(st, XDM_E_OUT_OF_BOUNDS, gen, XDM_SIDE_AFTER, "offset +305");
		ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "tag \"the-one\""));
		reports++;
	}
	if (!reports) {
		expect_error(xdm_reap_pending(rt), XDM_E_OUT_OF_BOUNDS, gen, XDM_SIDE_AFTER,
			     "offset +305");
		reports++;
	}
	TU_OK(xdm_reap_pending(rt));
	ck_assert_int_eq(reports, 1);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 0);
	finish(rt);
}
END_TEST

START_TEST(reap_empties_the_quarantine_and_reports_a_use_after_free)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block a, b;
	xdm_generation gen_a;
	unsigned char *pa;

	alloc_synced(rt, 2048, "late-write", &a);
	alloc_synced(rt, 512, "fine", &b);
	gen_a = a.generation;
	pa = bytes_of(&a);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_stream_synchronize(rt, 0));
	memset(pa + 100, 0, 4);		/* the dangling write */
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 2);

	expect_error(xdm_reap_pending(rt), XDM_E_USE_AFTER_FREE, gen_a, XDM_SIDE_NONE,
		     "written after the free");
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "4 bytes"));
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "from offset +100 to +103"));
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "tag \"late-write\""));
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 0);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_bytes"), 0);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	finish(rt);
}
END_TEST

/*
 * The runtime's bytes_outstanding counts the live blocks, as asked; the
 * stack's (xdm_bytes_outstanding) also what the guard holds on purpose,
 * which quarantined_bytes says, until a reap gives it back.  The upstream
 * frees at once (free=sync), and nothing leaves the quarantine here, so
 * the sums are exact whenever they are read.
 */
START_TEST(counters_tell_quarantined_bytes_from_live_ones)
{
	struct xdm_runtime *rt = make("guard | host free=sync");
	const uint64_t around = 256 + 256;	/* front and back canary */
	struct xdm_block live[3], dead[4];
	struct xdm_stats st;
	uint64_t live_bytes = 0, live_up = 0;

	for (int i = 0; i < 3; i++) {
		alloc_synced(rt, 1000 + 100 * i, "live", &live[i]);
		live_bytes += live[i].bytes;
		live_up += live[i].bytes + around;
	}
	for (int i = 0; i < 4; i++) {
		alloc_synced(rt, 4096, "dead", &dead[i]);
		TU_OK(xdm_deallocate(rt, &dead[i]));
	}

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_outstanding, live_bytes);
	ck_assert_uint_eq(st.blocks_outstanding, 3);
	ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 3);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_blocks"), 4);
	ck_assert_uint_eq(attr_u64(rt, "quarantined_bytes"), 4 * (4096 + around));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), live_up + 4 * (4096 + around));

	/* A reap gives the quarantine back; the live blocks stay. */
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(attr_u64(rt, "quarantined_bytes"), 0);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), live_up);
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.bytes_outstanding, live_bytes);

	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &live[i]));
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	finish(rt);
}
END_TEST

struct churn {
	struct xdm_runtime *rt;
	xdm_stream_id stream;
	atomic_int failures;
};

static void *churn_run(void *arg)
{
	struct churn *c = arg;
	struct xdm_block b;
	unsigned int seed = c->stream * 7919u + 1;

	for (int i = 0; i < 2000; i++) {
		size_t n = 1 + rand_r(&seed) % 5000;

		if (xdm_allocate(c->rt, n, c->stream, "churn", &b) != XDM_OK ||
		    xdm_deallocate(c->rt, &b) != XDM_OK)
			atomic_fetch_add(&c->failures, 1);
	}
	return NULL;
}

struct watcher {
	struct xdm_runtime *rt;
	atomic_bool stop;
	uint64_t max_bytes, max_blocks;
};

static void *watch_run(void *arg)
{
	struct watcher *w = arg;

	while (!atomic_load(&w->stop)) {
		uint64_t bytes = attr_u64(w->rt, "quarantined_bytes");
		uint64_t blocks = attr_u64(w->rt, "quarantined_blocks");

		if (bytes > w->max_bytes)
			w->max_bytes = bytes;
		if (blocks > w->max_blocks)
			w->max_blocks = blocks;
	}
	return NULL;
}

/*
 * The limits bound what the guard holds at every moment, blocks waiting
 * for their check included: read from another thread while four threads
 * free, the totals never pass them (each is read under the guard's lock,
 * so any schedule gives a state the guard was in).
 */
static void limits_hold_while_threads_free(const char *stack, uint64_t max_bytes,
					   uint64_t max_blocks)
{
	struct xdm_runtime *rt = make(stack);
	struct watcher w = { .rt = rt };
	struct churn c[4];
	pthread_t t[4], tw;

	atomic_init(&w.stop, false);
	ck_assert_int_eq(pthread_create(&tw, NULL, watch_run, &w), 0);
	for (int i = 0; i < 4; i++) {
		c[i].rt = rt;
		c[i].stream = (xdm_stream_id)i;
		atomic_init(&c[i].failures, 0);
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn_run, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_int_eq(atomic_load(&c[i].failures), 0);
	}
	atomic_store(&w.stop, true);
	ck_assert_int_eq(pthread_join(tw, NULL), 0);
	ck_assert_uint_le(w.max_bytes, max_bytes);
	ck_assert_uint_le(w.max_blocks, max_blocks);
	ck_assert_uint_le(attr_u64(rt, "quarantined_bytes"), max_bytes);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 0);
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(attr_u64(rt, "quarantined_bytes"), 0);
	finish(rt);
}

START_TEST(quarantine_bytes_hold_while_threads_free)
{
	/* Blocks of 1 to 5000 bytes, 5.5K at most upstream: 64K holds ~12+. */
	limits_hold_while_threads_free("guard quarantine_bytes=64K quarantine_count=100000 | host",
				       64 << 10, 100000);
}
END_TEST

START_TEST(quarantine_count_holds_while_threads_free)
{
	limits_hold_while_threads_free("guard quarantine_count=40 quarantine_bytes=1G | host",
				       1ULL << 30, 40);
}
END_TEST

/* ---- on demand ------------------------------------------------------------ */

START_TEST(check_finds_damage_in_live_and_quarantined_blocks)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block a, b, c, out;
	char buf[600], hex[32];
	xdm_generation gen_a;

	show(rt, "check", buf, sizeof(buf));
	ck_assert_str_eq(buf, "unchecked\n");
	alloc_synced(rt, 700, "a", &a);
	alloc_synced(rt, 300, "b", &b);
	TU_OK(xdm_layer_attr_store(rt, 0, "check", "1\n"));
	show(rt, "check", buf, sizeof(buf));
	ck_assert_str_eq(buf, "ok\n");

	/* An overrun in a live block is found without freeing it. */
	bytes_of(&a)[705] = 7;
	TU_OK(xdm_layer_attr_store(rt, 0, "check", "1"));
	show(rt, "check", buf, sizeof(buf));
	snprintf(hex, sizeof(hex), "0x%" PRIx64, a.ptr);
	ck_assert_msg(strstr(buf, "after the end") && strstr(buf, hex) &&
		      strstr(buf, "offset +705"), "check said: %s", buf);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);
	ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 2);
	TU_OK(xdm_block_lookup(rt, xdm_block_id_of(&a), &out));

	/* Checking again finds it again but counts it once; the reap after
	 * the free reports it to a caller, still once in the count. */
	TU_OK(xdm_layer_attr_store(rt, 0, "check", "1"));
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);
	gen_a = a.generation;
	TU_OK(xdm_deallocate(rt, &a));
	expect_error(xdm_reap_pending(rt), XDM_E_OUT_OF_BOUNDS, gen_a, XDM_SIDE_AFTER,
		     "offset +705");
	ck_assert_uint_eq(attr_u64(rt, "violations"), 1);

	/* A write into a quarantined block is found before its eviction. */
	alloc_synced(rt, 100, "c", &c);
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_stream_synchronize(rt, 0));
	TU_OK(xdm_layer_attr_store(rt, 0, "check", "1"));
	show(rt, "check", buf, sizeof(buf));
	ck_assert_str_eq(buf, "ok\n");
	bytes_of(&c)[99] = 0;
	TU_OK(xdm_layer_attr_store(rt, 0, "check", "1"));
	show(rt, "check", buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "written after the free"), "check said: %s", buf);
	ck_assert_uint_eq(attr_u64(rt, "violations"), 2);

	/* Only "1" runs a check. */
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "check", "2"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "check", ""), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "live_blocks", "1"), XDM_E_NOT_SUPPORTED);
	TU_OK(xdm_deallocate(rt, &b));
	finish(rt);
}
END_TEST

/* ---- configuration ------------------------------------------------------ */

static void expect_config_error(const char *stack, const char *needle)
{
	struct xdm_runtime *rt = NULL;
	enum xdm_status st = xdm_runtime_create(0, "host", stack, &rt);

	ck_assert_msg(st == XDM_E_CONFIG, "%s: expected CONFIG, got %s (%s)", stack,
		      xdm_strerror(st), xdm_last_error_message());
	ck_assert_msg(strstr(xdm_last_error_message(), needle), "%s: '%s' not in '%s'", stack,
		      needle, xdm_last_error_message());
}

START_TEST(bad_parameters_are_config_errors)
{
	/* The core's type check names the position: column 8 is the value. */
	expect_config_error("guard canary=banana | host", "canary");
	expect_config_error("guard canary=banana | host", ":1:");
	expect_config_error("guard quarantine_count=many | host", "quarantine_count");
	expect_config_error("guard canary_pattern=256 | host", "canary_pattern");
	expect_config_error("guard poison=1000 | host", "poison");
	expect_config_error("guard canary=2G | host", "canary");
	expect_config_error("guard colour=red | host", "colour");
}
END_TEST

/* ---- with the rest of the runtime ---------------------------------------- */

START_TEST(cross_stream_use_is_tracked_through_the_guard)
{
	struct xdm_runtime *rt = make("guard | host");
	struct xdm_block b;
	struct xdm_block_id id;

	ck_assert(xdm_supports_block_use_tracking(rt));
	alloc_synced(rt, 256, "x", &b);
	id = xdm_block_id_of(&b);
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_deallocate(rt, &b));
	finish(rt);
}
END_TEST

START_TEST(concurrent_frees_and_checks_stay_clean)
{
	struct xdm_runtime *rt = make("guard quarantine_count=64 | host");
	struct churn c[4];
	pthread_t t[4];
	char buf[600];

	for (int i = 0; i < 4; i++) {
		c[i].rt = rt;
		c[i].stream = (xdm_stream_id)i;
		atomic_init(&c[i].failures, 0);
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn_run, &c[i]), 0);
	}
	for (int i = 0; i < 50; i++) {
		TU_OK(xdm_layer_attr_store(rt, 0, "check", "1"));
		show(rt, "check", buf, sizeof(buf));
		ck_assert_msg(strcmp(buf, "ok\n") == 0, "check said: %s", buf);
	}
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_int_eq(atomic_load(&c[i].failures), 0);
	}
	ck_assert_uint_eq(attr_u64(rt, "violations"), 0);
	ck_assert_uint_eq(attr_u64(rt, "live_blocks"), 0);
	ck_assert_uint_le(attr_u64(rt, "quarantined_blocks"), 64);
	finish(rt);
}
END_TEST

static Suite *guard_suite(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("host");

	tcase_add_test(tc, clean_block_frees_ok_and_is_quarantined);
	tcase_add_test(tc, overrun_after_is_out_of_bounds_after);
	tcase_add_test(tc, underrun_before_is_out_of_bounds_before);
	tcase_add_test(tc, far_damage_in_the_canary_is_found);
	tcase_add_test(tc, both_sides_damaged_names_both);
	tcase_add_test(tc, pointer_is_aligned_and_user_area_exact);
	tcase_add_test(tc, no_canaries_with_canary_0);
	tcase_add_test(tc, freed_memory_holds_the_poison);
	tcase_add_test(tc, write_after_free_is_use_after_free_at_eviction);
	tcase_add_test(tc, double_free_and_stale_handle_are_use_after_free);
	tcase_add_test(tc, quarantine_count_is_a_limit);
	tcase_add_test(tc, quarantine_bytes_is_a_limit);
	tcase_add_test(tc, teardown_empties_the_quarantine);
	tcase_add_test(tc, teardown_reports_a_use_after_free_on_stderr);
	tcase_add_test(tc, works_over_a_synchronous_upstream);
	tcase_add_test(tc, overrun_is_reported_after_the_batch_check);
	tcase_add_test(tc, reap_empties_the_quarantine_and_reports_a_use_after_free);
	tcase_add_test(tc, counters_tell_quarantined_bytes_from_live_ones);
	tcase_add_test(tc, quarantine_bytes_hold_while_threads_free);
	tcase_add_test(tc, quarantine_count_holds_while_threads_free);
	tcase_add_test(tc, check_finds_damage_in_live_and_quarantined_blocks);
	tcase_add_test(tc, bad_parameters_are_config_errors);
	tcase_add_test(tc, cross_stream_use_is_tracked_through_the_guard);
	tcase_add_test(tc, concurrent_frees_and_checks_stay_clean);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(guard_suite());
}
