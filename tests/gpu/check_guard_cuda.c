/* SPDX-License-Identifier: MIT */
/*
 * check_guard_cuda.c - the guard over cuda_async on a real GPU: kernels
 * write one byte past either end of a block, and the guard, reading its
 * canaries back with the platform's copies on the block's stream when the
 * block leaves the quarantine, must name the side and the generation: from
 * xdm_reap_pending, which empties the quarantine, or from the free that
 * pushes the block out (the free itself reads nothing back).
 *
 * Like check_cuda, the suite runs in one process (CK_NOFORK: CUDA state
 * does not survive fork) and probes for a GPU first: no driver, or a cuda
 * platform that answers NO_DEVICE, is a skip (77).
 *
 *   check_guard_cuda            run the suite
 *   check_guard_cuda --probe    exit 0 if the suite would run here, 77 if not
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <check.h>
#include <xdm/xdm.h>

#include "tests/lib/cudacheck.h"
#include "tests/lib/testutil.h"

#define STACK "guard | cuda_async"
#define BLOCK ((size_t)1 << 20)

enum { FILL = 0x3e, POISON = 0xdd };

static struct xdm_runtime *runtime(const char *stack)
{
	struct xdm_runtime *rt;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt));
	return rt;
}

static void expect_oob(enum xdm_status st, xdm_generation gen, enum xdm_bounds_side side,
		       const char *needle)
{
	const struct xdm_error *e = xdm_last_error();

	ck_assert_msg(st == XDM_E_OUT_OF_BOUNDS, "expected OUT_OF_BOUNDS, got %s (%s)",
		      xdm_strerror(st), xdm_last_error_message());
	ck_assert_uint_eq(e->generation, gen);
	ck_assert_int_eq(e->side, side);
	ck_assert_msg(strstr(e->message, needle), "'%s' not in '%s'", needle, e->message);
}

static void finish_runtime(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	TU_OK(xdm_runtime_destroy(rt));
}

START_TEST(kernel_write_past_the_end_is_out_of_bounds_after)
{
	struct xdm_runtime *rt = runtime(STACK);
	struct xdm_block b;
	xdm_generation gen;
	char needle[64];

	TU_OK(xdm_allocate(rt, BLOCK, 0, "past-end", &b));
	gen = b.generation;
	ck_assert_uint_eq(b.ptr % XDM_DEFAULT_ALIGN, 0);
	CU_OK(ct_fill(ct_stream(rt, 0), (CUdeviceptr)b.ptr, BLOCK, FILL));
	/* One byte at ptr + bytes: the first byte of the back canary. */
	CU_OK(ct_oob_write(ct_stream(rt, 0), (CUdeviceptr)b.ptr, BLOCK, 0));
	snprintf(needle, sizeof(needle), "offset +%zu", BLOCK);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_QUARANTINED);
	expect_oob(xdm_reap_pending(rt), gen, XDM_SIDE_AFTER, needle);
	finish_runtime(rt);
}
END_TEST

START_TEST(kernel_write_before_the_start_is_out_of_bounds_before)
{
	/* No quarantine: the block is checked before its own free returns. */
	struct xdm_runtime *rt = runtime("guard quarantine_count=0 | cuda_async");
	struct xdm_block b;
	xdm_generation gen;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "before-start", &b));
	gen = b.generation;
	/* The kernel adds an unsigned offset: aim it at ptr - 1 directly. */
	CU_OK(ct_oob_write(ct_stream(rt, 0), (CUdeviceptr)(b.ptr - 1), 0, 0));
	expect_oob(xdm_deallocate(rt, &b), gen, XDM_SIDE_BEFORE, "offset -1");
	finish_runtime(rt);
}
END_TEST

START_TEST(kernel_write_on_another_stream_is_caught_after_its_wait)
{
	struct xdm_runtime *rt = runtime(STACK);
	struct xdm_block b;
	struct xdm_block_id id;
	xdm_generation gen;

	/* The free makes stream 0 wait for the declared write on stream 1,
	 * and the poison and the check's copy are queued on stream 0 after
	 * that wait: the canaries are read after the kernel ran, not before. */
	TU_OK(xdm_allocate(rt, 4096, 0, "cross", &b));
	gen = b.generation;
	id = xdm_block_id_of(&b);
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(ct_stream(rt, 1), (CUdeviceptr)b.ptr, 4097, FILL,
			   20 * CT_CYCLES_PER_MS));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_deallocate(rt, &b));
	expect_oob(xdm_reap_pending(rt), gen, XDM_SIDE_AFTER, "offset +4096");
	finish_runtime(rt);
}
END_TEST

START_TEST(clean_kernel_fill_frees_ok_and_is_poisoned)
{
	struct xdm_runtime *rt = runtime(STACK);
	struct xdm_block b;
	uint8_t *host;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "clean", &b));
	CU_OK(ct_fill(ct_stream(rt, 0), (CUdeviceptr)b.ptr, BLOCK, FILL));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_QUARANTINED);

	/* Quarantined, so the memory is still allocated: it reads poison. */
	TU_OK(xdm_stream_synchronize(rt, 0));
	host = malloc(BLOCK);
	ck_assert_ptr_nonnull(host);
	CU_OK(ct_drv.cuMemcpyDtoH(host, (CUdeviceptr)b.ptr, BLOCK));
	for (size_t i = 0; i < BLOCK; i += 4099)
		ck_assert_uint_eq(host[i], POISON);
	free(host);
	finish_runtime(rt);
}
END_TEST

START_TEST(kernel_write_after_free_is_use_after_free_at_eviction)
{
	struct xdm_runtime *rt = runtime("guard quarantine_count=1 | cuda_async");
	struct xdm_block a, b;
	xdm_generation gen_a;
	CUdeviceptr pa;

	TU_OK(xdm_allocate(rt, 65536, 0, "victim", &a));
	gen_a = a.generation;
	pa = (CUdeviceptr)a.ptr;
	TU_OK(xdm_deallocate(rt, &a));
	CU_OK(ct_oob_write(ct_stream(rt, 0), pa, 100, 0x42));	/* dangling write */
	TU_OK(xdm_allocate(rt, 256, 0, "next", &b));
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, gen_a);
	finish_runtime(rt);
}
END_TEST

START_TEST(check_attribute_finds_a_live_overrun)
{
	struct xdm_runtime *rt = runtime(STACK);
	struct xdm_block b;
	xdm_generation gen;
	char buf[600];

	TU_OK(xdm_allocate(rt, 8192, 0, "live", &b));
	gen = b.generation;
	CU_OK(ct_oob_write(ct_stream(rt, 0), (CUdeviceptr)b.ptr, 8192 + 17, 0));
	TU_OK(xdm_layer_attr_store(rt, 0, "check", "1"));
	TU_OK(xdm_layer_attr_show(rt, 0, "check", buf, sizeof(buf)));
	ck_assert_msg(strstr(buf, "offset +8209"), "check said: %s", buf);
	TU_OK(xdm_deallocate(rt, &b));
	expect_oob(xdm_reap_pending(rt), gen, XDM_SIDE_AFTER, "offset +8209");
	finish_runtime(rt);
}
END_TEST

/*
 * Many pairs, the blocks read back in batches by the guard's checker
 * thread: the one a kernel overran is reported exactly once, by a later
 * free or at the latest by the reap, with its generation.
 */
START_TEST(overrun_among_many_pairs_is_reported_once)
{
	struct xdm_runtime *rt = runtime("guard quarantine_count=64 | cuda_async");
	xdm_generation gen = 0;
	int reports = 0;

	for (int i = 0; i < 1000; i++) {
		struct xdm_block b;
		enum xdm_status st;

		TU_OK(xdm_allocate(rt, 4096, 0, "many", &b));
		if (i == 500) {
			gen = b.generation;
			CU_OK(ct_oob_write(ct_stream(rt, 0), (CUdeviceptr)b.ptr, 4096 + 3, 0));
		}
		st = xdm_deallocate(rt, &b);
		if (st == XDM_OK)
			continue;
		expect_oob(st, gen, XDM_SIDE_AFTER, "offset +4099");
		reports++;
	}
	if (!reports) {
		expect_oob(xdm_reap_pending(rt), gen, XDM_SIDE_AFTER, "offset +4099");
		reports++;
	}
	TU_OK(xdm_reap_pending(rt));
	ck_assert_int_eq(reports, 1);
	finish_runtime(rt);
}
END_TEST

static Suite *guard_cuda_suite(void)
{
	Suite *s = suite_create("guard_cuda");
	TCase *tc = tcase_create("cuda_async");

	tcase_add_test(tc, kernel_write_past_the_end_is_out_of_bounds_after);
	tcase_add_test(tc, kernel_write_before_the_start_is_out_of_bounds_before);
	tcase_add_test(tc, kernel_write_on_another_stream_is_caught_after_its_wait);
	tcase_add_test(tc, clean_kernel_fill_frees_ok_and_is_poisoned);
	tcase_add_test(tc, kernel_write_after_free_is_use_after_free_at_eviction);
	tcase_add_test(tc, check_attribute_finds_a_live_overrun);
	tcase_add_test(tc, overrun_among_many_pairs_is_reported_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, STACK, guard_cuda_suite, 180);
}
