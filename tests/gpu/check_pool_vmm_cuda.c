/* SPDX-License-Identifier: MIT */
/*
 * check_pool_vmm_cuda.c - the pool over cuda_vmm on a real GPU: granules
 * given back while a kernel still writes them are unmapped only after it,
 * a block on joined chunks is one range of device memory, and a process
 * that frees most of its memory gets it back to the device (the driver's
 * free memory) through the trimmer, with no call.
 *
 * Streams are held at a gate (a host function that waits until the test
 * opens it), so "the kernel has not run yet" is a fact, not a timing.
 *
 *   check_pool_vmm_cuda            run the suite
 *   check_pool_vmm_cuda --probe    exit 0 if the suite would run here, 77 if not
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>
#include <xdm/xdm.h>

#include "tests/lib/cudacheck.h"
#include "tests/lib/testutil.h"

#define MIB ((size_t)1024 * 1024)
#define SPIN (50 * CT_CYCLES_PER_MS)

enum { P = 0xa1, Q = 0x5c, R = 0x3e };
enum { POOL_LAYER = 0, VMM_LAYER = 1 };

static struct xdm_runtime *runtime(const char *pool_params)
{
	struct xdm_runtime *rt;
	char stack[256];

	snprintf(stack, sizeof(stack), "pool %s | cuda_vmm", pool_params);
	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, VMM_LAYER), "cuda_vmm");
	return rt;
}


#define POOL(rt, name) tu_attr_u64((rt), POOL_LAYER, (name))
#define VMM(rt, name) tu_attr_u64((rt), VMM_LAYER, (name))

static void expect_bytes(CUdeviceptr p, size_t n, uint8_t v, const char *what)
{
	size_t same = ct_count_bytes(p, n, v);

	ck_assert_msg(same == n, "%s: %zu of %zu bytes are not 0x%02x", what, n - same, n, v);
}

static void finish_runtime(struct xdm_runtime *rt)
{
	ct_sync_all(rt);
	TU_OK(xdm_layer_attr_store(rt, POOL_LAYER, "trim", "1"));
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 0);
	ck_assert_uint_eq(VMM(rt, "mapped"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

static void gate_done(struct tu_gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/*
 * A block of stream 0 is written by a kernel on stream 1 (declared), then
 * freed; release=free gives its granules back at once, on stream 0, which
 * waits for stream 1's use.  Stream 1 is held at a gate, so the kernel has
 * not even started when the pool hands the granules back: cuda_vmm must
 * keep them mapped (releasing) until it ends.  Unmapping earlier faults
 * the context (CUDA_ERROR_ILLEGAL_ADDRESS, seen on an H100), so a clean
 * synchronize and good bytes in a later block are the proof.
 */
START_TEST(granules_given_back_under_a_kernel_wait_for_it)
{
	struct xdm_runtime *rt = runtime("release=free trim_ms=0");
	struct xdm_block keep, a, b;
	struct xdm_block_id id;
	struct tu_gate gate;
	uint64_t releases;

	TU_OK(xdm_allocate(rt, MIB, 0, "keep", &keep));
	TU_OK(xdm_allocate(rt, 16 * MIB, 0, "a", &a));
	id = xdm_block_id_of(&a);
	tu_gate_init(&gate);
	tu_gate_hold(rt, 1, &gate);
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&a), 16 * MIB, P, SPIN));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	releases = VMM(rt, "releases");
	TU_OK(xdm_deallocate(rt, &a));
	/* Given back by the pool, still mapped under the held kernel. */
	ck_assert_uint_ge(POOL(rt, "given_back"), 14 * MIB);
	ck_assert_uint_ge(VMM(rt, "releasing"), 14 * MIB);
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_ge(VMM(rt, "releasing"), 14 * MIB);
	ck_assert_uint_eq(VMM(rt, "releases"), releases);
	/* A new block meanwhile never gets those addresses. */
	TU_OK(xdm_allocate(rt, 16 * MIB, 0, "b", &b));
	ck_assert_msg(b.ptr + b.bytes <= id.ptr || b.ptr >= id.ptr + 16 * MIB,
		      "b at 0x%" PRIx64 " overlaps a range still being released", b.ptr);
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b), 16 * MIB, Q));
	tu_gate_open(&gate);
	ct_sync_all(rt);
	CU_OK(ct_drv.cuCtxSynchronize());
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(VMM(rt, "releasing"), 0);
	ck_assert_uint_gt(VMM(rt, "releases"), releases);
	expect_bytes(ct_dev(&b), 16 * MIB, Q, "b");
	gate_done(&gate);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &keep));
	finish_runtime(rt);
}
END_TEST

/*
 * Growth in place: a block that spans the seam of two growths is one range
 * a kernel fills and reads back, and freed neighbours from separate growths
 * serve one larger block without new memory.
 */
START_TEST(joined_chunks_are_one_range_of_device_memory)
{
	struct xdm_runtime *rt = runtime("release=trim trim_ms=0");
	struct xdm_block a, b, c, d;
	uint64_t growths;

	TU_OK(xdm_allocate(rt, 3 * MIB, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 5 * MIB, 0, "b", &b));
	TU_OK(xdm_allocate(rt, 3 * MIB, 0, "c", &c));
	ck_assert_uint_eq(b.ptr, a.ptr + 3 * MIB);
	ck_assert_uint_eq(POOL(rt, "chunks"), 1);
	ck_assert_uint_ge(POOL(rt, "joins"), 1);
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&a), 11 * MIB, R));
	TU_OK(xdm_stream_synchronize(rt, 0));
	expect_bytes(ct_dev(&a), 11 * MIB, R, "a to c");
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	growths = POOL(rt, "growths");
	TU_OK(xdm_allocate(rt, 8 * MIB, 0, "d", &d));
	ck_assert_uint_eq(POOL(rt, "growths"), growths);
	ck_assert_uint_eq(d.ptr, a.ptr);
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&d), 8 * MIB, Q));
	TU_OK(xdm_stream_synchronize(rt, 0));
	expect_bytes(ct_dev(&d), 8 * MIB, Q, "d");
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	finish_runtime(rt);
}
END_TEST

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * 1 GiB in 64 MiB blocks, all but one freed, and no call after: the
 * trimmer (every 200 ms here) gives the granules back, and the driver's
 * free memory shows it.  How long it took is printed for the record, not
 * asserted; the wait is bounded only as a safety net.  The driver's side
 * is held to the bytes where its free memory is this process's alone
 * (ct_driver_free_is_ours); the pool's and the backend's always are.
 */
START_TEST(the_trimmer_gives_device_memory_back)
{
	struct xdm_runtime *rt = runtime("release=trim trim_ms=200");
	struct xdm_block b[16];
	size_t free0, free1, free2, total;
	double t0, waited = 0, given = -1;

	CU_OK(ct_drv.cuMemGetInfo(&free0, &total));
	for (int i = 0; i < 16; i++)
		TU_OK(xdm_allocate(rt, 64 * MIB, 0, "b", &b[i]));
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b[0]), 64 * MIB, P));
	TU_OK(xdm_stream_synchronize(rt, 0));
	CU_OK(ct_drv.cuMemGetInfo(&free1, &total));
	if (ct_driver_free_is_ours())
		ck_assert_uint_ge(free0 - free1, 1024 * MIB);
	for (int i = 1; i < 16; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	/*
	 * First the pool's side (it gave the granules back, and cuda_vmm
	 * unmapped them), then the driver's.  The other GPU test programs
	 * hold the GPU lock meanwhile, so no one else moves its free memory.
	 */
	t0 = now_ms();
	do {
		if (given < 0 && POOL(rt, "given_back") >= 15 * 64 * MIB)
			given = now_ms() - t0;
		if (given >= 0 && VMM(rt, "mapped") == 64 * MIB)
			break;
		tu_sleep_ms(5);
		waited = now_ms() - t0;
	} while (waited < TU_PATIENCE_MS);
	ck_assert_uint_eq(POOL(rt, "reserved"), 64 * MIB);
	ck_assert_uint_eq(VMM(rt, "mapped"), 64 * MIB);
	CU_OK(ct_drv.cuMemGetInfo(&free2, &total));
	ck_assert_msg(!ct_driver_free_is_ours() || free2 >= free1 + 15 * 64 * MIB,
		      "the driver's free memory rose by %zu MiB of the 960 MiB freed",
		      free2 > free1 ? (free2 - free1) / MIB : 0);
	printf("trimmer: the pool gave the granules back %.0f ms after the last free, and the "
	       "device had them %.0f ms after it (trim_ms=200)\n", given, now_ms() - t0);
	ck_assert_uint_eq(POOL(rt, "reserved"), 64 * MIB);
	expect_bytes(ct_dev(&b[0]), 64 * MIB, P, "the block kept");
	TU_OK(xdm_deallocate(rt, &b[0]));
	finish_runtime(rt);
}
END_TEST

static Suite *pool_vmm_cuda_suite(void)
{
	Suite *s = suite_create("pool_vmm_cuda");
	TCase *tc = tcase_create("pool over cuda_vmm");

	tcase_add_test(tc, granules_given_back_under_a_kernel_wait_for_it);
	tcase_add_test(tc, joined_chunks_are_one_range_of_device_memory);
	tcase_add_test(tc, the_trimmer_gives_device_memory_back);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "pool | cuda_vmm", pool_vmm_cuda_suite, 120);
}
