/* SPDX-License-Identifier: MIT */
/*
 * check_pool_cuda.c - the pool on a real GPU, over cuda_async and over
 * cuda_direct: its blocks are device memory that kernels fill and read back
 * where the pool says they are; a tracked cross-stream write, then the free,
 * then the reuse of the address on the allocation stream leave the new
 * block clean; and a chunk moved to another stream while a kernel on its
 * old stream still writes it is not touched by the new stream before that
 * kernel ends.  Kernels that spin for tens of milliseconds before they
 * write make any missing wait show up as wrong bytes; the controls show
 * that the same sequences without the waits do go wrong.
 *
 * Like check_cuda, the suite runs in one process (CK_NOFORK: CUDA state
 * does not survive fork) and probes for a GPU first: no driver, or a cuda
 * platform that answers NO_DEVICE, is a skip (77).
 *
 *   check_pool_cuda            run the suite
 *   check_pool_cuda --probe    exit 0 if the suite would run here, 77 if not
 *
 * Environment:
 *   XDM_TEST_SANITIZER   leave out the controls, which race on purpose
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <xdm/xdm.h>

#include "tests/lib/cudacheck.h"
#include "tests/lib/testutil.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)
#define BLOCK MIB
#define SPIN (50 * CT_CYCLES_PER_MS)	/* about 50 ms on an H200 */

/* Byte patterns: distinct, and none is 0 or what fresh memory tends to hold. */
enum { P = 0xa1, Q = 0x5c, R = 0x3e, S = 0x77 };

static const char *const upstreams[] = { "cuda_async", "cuda_direct" };
#define N_UPSTREAMS (int)(sizeof(upstreams) / sizeof(upstreams[0]))

static struct xdm_runtime *runtime(const char *pool_params, const char *upstream)
{
	struct xdm_runtime *rt;
	char stack[256];

	snprintf(stack, sizeof(stack), "pool %s | %s", pool_params, upstream);
	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 0), "pool");
	return rt;
}

static uint64_t attr(struct xdm_runtime *rt, uint32_t layer, const char *name)
{
	char buf[64], *end;
	uint64_t v;

	TU_OK(xdm_layer_attr_show(rt, layer, name, buf, sizeof(buf)));
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && *end == '\n', "%u/%s: '%s'", layer, name, buf);
	return v;
}

#define POOL(rt, name) attr((rt), 0, (name))

static void expect_bytes(CUdeviceptr p, size_t n, uint8_t v, const char *what)
{
	size_t same = ct_count_bytes(p, n, v);

	ck_assert_msg(same == n, "%s: %zu of %zu bytes are not 0x%02x", what, n - same, n, v);
}

/* Everything freed: trimmed and reaped, nothing is left on the device. */
static void finish_runtime(struct xdm_runtime *rt)
{
	ct_sync_all(rt);
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_uint_eq(POOL(rt, "chunks"), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(attr(rt, 1, "bytes_outstanding"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

/* ---- blocks are device memory, where the pool says ------------------------ */

START_TEST(blocks_are_device_memory_side_by_side)
{
	static const size_t sizes[] = { 300, BLOCK, BLOCK + 4 * KIB, 64 * KIB, 5000 };
	static const uint8_t fills[] = { P, Q, R, S, 0x19 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };

	for (int u = 0; u < N_UPSTREAMS; u++) {
		struct xdm_runtime *rt = runtime("chunk=4M", upstreams[u]);
		struct xdm_block b[N], other;
		uint64_t end;

		for (int i = 0; i < N; i++) {
			TU_OK(xdm_allocate(rt, sizes[i], 0, "dev", &b[i]));
			ck_assert_uint_eq(b[i].ptr % XDM_DEFAULT_ALIGN, 0);
			/* Carved one after the other from one chunk. */
			if (i)
				ck_assert_uint_eq(b[i].ptr, b[i - 1].ptr + b[i - 1].bytes);
		}
		end = b[N - 1].ptr + b[N - 1].bytes;
		ck_assert_uint_eq(POOL(rt, "chunks"), 1);
		ck_assert_uint_eq(POOL(rt, "in_use"), end - b[0].ptr);
		/* Each block filled to its last byte, none past it. */
		for (int i = 0; i < N; i++)
			CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b[i]), b[i].bytes, fills[i]));
		TU_OK(xdm_allocate(rt, BLOCK, 1, "other stream", &other));
		ck_assert_msg(other.ptr + other.bytes <= b[0].ptr || other.ptr >= b[0].ptr + 4 * MIB,
			      "%s: stream 1 got memory of stream 0's chunk", upstreams[u]);
		CU_OK(ct_fill(ct_stream(rt, 1), ct_dev(&other), BLOCK, 0xe7));
		ct_sync_all(rt);
		for (int i = 0; i < N; i++)
			expect_bytes(ct_dev(&b[i]), b[i].bytes, fills[i], upstreams[u]);
		expect_bytes(ct_dev(&other), BLOCK, 0xe7, upstreams[u]);
		for (int i = 0; i < N; i++)
			TU_OK(xdm_deallocate(rt, &b[i]));
		TU_OK(xdm_deallocate(rt, &other));
		ck_assert_uint_eq(POOL(rt, "in_use"), 0);
		finish_runtime(rt);
	}
}
END_TEST

/* ---- a tracked free after a cross-stream write ----------------------------- */

/*
 * A is allocated on stream 0; stream 1 writes P into it after a spin; A is
 * freed on stream 0 and B of the same size allocated there, which the pool
 * answers with A's address; stream 0 fills B with Q at once.  Declared
 * (tracked), the free waits for the write and so does B's fill: B holds Q.
 * Undeclared, the late write lands in B.  Returns the bytes of B that are
 * not Q.
 */
static size_t free_after_write(struct xdm_runtime *rt, bool tracked, size_t *stale)
{
	struct xdm_block a, b;
	struct xdm_block_id id;
	struct tu_gate gate;
	size_t wrong;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "a", &a));
	id = xdm_block_id_of(&a);
	tu_gate_init(&gate);
	/* The control holds the write at a gate until B's fill has run, so
	 * that it lands in B however the host thread is scheduled. */
	if (tracked)
		TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	else
		tu_gate_hold(rt, 1, &gate);
	CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&a), BLOCK, P, SPIN));
	if (tracked)
		TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_allocate(rt, BLOCK, 0, "b", &b));
	/* The pool reuses at once, on the same stream: always the same address. */
	ck_assert_uint_eq(b.ptr, id.ptr);
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b), BLOCK, Q));
	if (!tracked) {
		TU_OK(xdm_stream_synchronize(rt, 0));
		tu_gate_open(&gate);
	}
	ct_sync_all(rt);
	tu_gate_destroy(&gate);
	*stale = ct_count_bytes(ct_dev(&b), BLOCK, P);
	wrong = BLOCK - ct_count_bytes(ct_dev(&b), BLOCK, Q);
	TU_OK(xdm_deallocate(rt, &b));
	return wrong;
}

START_TEST(tracked_free_after_a_cross_stream_write_reuses_cleanly)
{
	for (int u = 0; u < N_UPSTREAMS; u++) {
		struct xdm_runtime *rt = runtime("chunk=4M", upstreams[u]);

		/* The pool tracks even over cuda_direct: it reuses in stream order. */
		ck_assert(xdm_supports_block_use_tracking(rt));
		for (int i = 0; i < 3; i++) {
			uint64_t before = ct_waits(rt);
			size_t stale, wrong = free_after_write(rt, true, &stale);

			/* Stream 1 behind stream 0, then the free behind stream 1. */
			ck_assert_uint_eq(ct_waits(rt) - before, 2);
			ck_assert_msg(wrong == 0, "%s, attempt %d: the reused block has %zu bytes "
				      "that are not its own fill, %zu of them the freed block's late "
				      "write", upstreams[u], i + 1, wrong, stale);
		}
		ck_assert_uint_eq(POOL(rt, "growths"), 1);
		finish_runtime(rt);
	}
}
END_TEST

/* The control: untracked, the write lands in the reused block. */
START_TEST(control_untracked_free_lets_the_write_land)
{
	struct xdm_runtime *rt = runtime("chunk=4M", "cuda_async");
	int corrupted = 0;

	for (int i = 0; i < 3; i++) {
		size_t stale;

		free_after_write(rt, false, &stale);
		corrupted += stale > 0;
	}
	printf("control, untracked free after a cross-stream write: the reused block was "
	       "corrupted %d of 3 times\n", corrupted);
	ck_assert_msg(corrupted > 0, "the unordered late write never landed in the reused "
		      "block: the tracked test above is not sensitive");
	finish_runtime(rt);
}
END_TEST

/* ---- a chunk moved while a kernel on its old stream still writes it -------- */

/*
 * The chunk is exactly one block.  Stream 1 spins and then writes P into
 * the block; the block is freed on stream 1 at once (stream order covers
 * the kernel there), which leaves the chunk idle; stream 2 asks for the
 * same size, gets the chunk, and fills it with Q at once.  Stream 2's fill
 * must come after the kernel: Q everywhere.
 */
START_TEST(moved_chunk_waits_for_the_old_streams_kernel)
{
	for (int u = 0; u < N_UPSTREAMS; u++) {
		/* No thread cache: the freed block must reach its arena to idle the chunk. */
		struct xdm_runtime *rt = runtime("chunk=1M tcache=0", upstreams[u]);
		struct xdm_block a, b;
		uint64_t before;

		TU_OK(xdm_allocate(rt, BLOCK, 1, "a", &a));
		CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&a), BLOCK, P, SPIN));
		TU_OK(xdm_deallocate(rt, &a));
		ck_assert_uint_eq(POOL(rt, "idle_chunks"), 1);
		before = ct_waits(rt);
		TU_OK(xdm_allocate(rt, BLOCK, 2, "b", &b));
		ck_assert_uint_eq(b.ptr, a.ptr);
		ck_assert_uint_eq(POOL(rt, "steals"), 1);
		ck_assert_uint_eq(POOL(rt, "growths"), 1);
		CU_OK(ct_fill(ct_stream(rt, 2), ct_dev(&b), BLOCK, Q));
		TU_OK(xdm_stream_synchronize(rt, 2));
		TU_OK(xdm_stream_synchronize(rt, 1));
		expect_bytes(ct_dev(&b), BLOCK, Q, upstreams[u]);
		/* One event wait did it: stream 2 behind stream 1. */
		ck_assert_uint_eq(ct_waits(rt) - before, 1);
		/* And back: stream 1 takes it again behind stream 2's work. */
		CU_OK(ct_spin_fill(ct_stream(rt, 2), ct_dev(&b), BLOCK, R, SPIN));
		TU_OK(xdm_deallocate(rt, &b));
		TU_OK(xdm_allocate(rt, BLOCK, 1, "a again", &a));
		ck_assert_uint_eq(a.ptr, b.ptr);
		ck_assert_uint_eq(POOL(rt, "steals"), 2);
		CU_OK(ct_fill(ct_stream(rt, 1), ct_dev(&a), BLOCK, S));
		TU_OK(xdm_stream_synchronize(rt, 1));
		expect_bytes(ct_dev(&a), BLOCK, S, upstreams[u]);
		TU_OK(xdm_deallocate(rt, &a));
		finish_runtime(rt);
	}
}
END_TEST

/*
 * The control: the same fill queued on stream 2 without the pool's wait
 * (straight onto the address) is overwritten by the late kernel.
 */
START_TEST(control_unordered_fill_is_overwritten_by_the_late_kernel)
{
	struct xdm_runtime *rt = runtime("chunk=1M", "cuda_async");
	struct tu_gate gate;
	struct xdm_block a;

	TU_OK(xdm_allocate(rt, BLOCK, 1, "a", &a));
	/* The kernel waits at a gate until the fill has run: late for sure. */
	tu_gate_init(&gate);
	tu_gate_hold(rt, 1, &gate);
	CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&a), BLOCK, P, SPIN));
	CU_OK(ct_fill(ct_stream(rt, 2), ct_dev(&a), BLOCK, Q));
	TU_OK(xdm_stream_synchronize(rt, 2));
	tu_gate_open(&gate);
	ct_sync_all(rt);
	tu_gate_destroy(&gate);
	ck_assert_msg(ct_count_bytes(ct_dev(&a), BLOCK, P) > 0,
		      "the spinning kernel did not land after an unordered fill: the moved-chunk "
		      "test is not sensitive");
	TU_OK(xdm_deallocate(rt, &a));
	finish_runtime(rt);
}
END_TEST

/* ---- trim gives device memory back ------------------------------------------ */

START_TEST(trim_gives_device_memory_back)
{
	for (int u = 0; u < N_UPSTREAMS; u++) {
		struct xdm_runtime *rt = runtime("chunk=64M", upstreams[u]);
		struct xdm_block a, b;

		TU_OK(xdm_allocate(rt, 64 * MIB, 0, "a", &a));
		TU_OK(xdm_allocate(rt, 8 * MIB, 1, "b", &b));
		ck_assert_uint_eq(attr(rt, 1, "bytes_outstanding"), 128 * MIB);
		TU_OK(xdm_deallocate(rt, &a));
		TU_OK(xdm_layer_attr_store(rt, 0, "trim", "1"));
		TU_OK(xdm_reap_pending(rt));
		ck_assert_uint_eq(POOL(rt, "trimmed"), 1);
		ck_assert_uint_eq(POOL(rt, "reserved"), 64 * MIB);
		ck_assert_uint_eq(attr(rt, 1, "bytes_outstanding"), 64 * MIB);
		/* The survivor is still good memory. */
		CU_OK(ct_fill(ct_stream(rt, 1), ct_dev(&b), 8 * MIB, R));
		TU_OK(xdm_stream_synchronize(rt, 1));
		expect_bytes(ct_dev(&b), 8 * MIB, R, upstreams[u]);
		TU_OK(xdm_deallocate(rt, &b));
		finish_runtime(rt);
	}
}
END_TEST

/* ---- the suite ----------------------------------------------------------------- */

static Suite *pool_cuda_suite(void)
{
	Suite *s = suite_create("pool_cuda");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, blocks_are_device_memory_side_by_side);
	tcase_add_test(tc, tracked_free_after_a_cross_stream_write_reuses_cleanly);
	tcase_add_test(tc, moved_chunk_waits_for_the_old_streams_kernel);
	tcase_add_test(tc, trim_gives_device_memory_back);
	if (!ct_under_sanitizer()) {
		tcase_add_test(tc, control_untracked_free_lets_the_write_land);
		tcase_add_test(tc, control_unordered_fill_is_overwritten_by_the_late_kernel);
	}
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "pool | cuda_async", pool_cuda_suite, 120);
}
