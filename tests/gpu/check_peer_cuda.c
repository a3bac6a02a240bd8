/* SPDX-License-Identifier: MIT */
/*
 * check_peer_cuda.c - peers= on two GPUs: a block of device 0's runtime,
 * granted to device 1, is written by a kernel on a stream of device 1 and
 * read back on device 0.
 *
 * For each of cuda_async and cuda_vmm, alone and under pool, with
 * peers=all: the driver itself must report the grant for device 1 (the
 * pool's access, cuMemPoolGetAccess, for cuda_async; the mapping's,
 * cuMemGetAccess, for cuda_vmm) before anything of device 1 touches the
 * block, so a missing grant fails an assertion instead of faulting a
 * kernel (a fault would end the context and every test after it).  Then a
 * kernel of device 1 fills the block, its stream is synchronized, and the
 * bytes are copied back with device 0's context current.  Without peers=
 * the driver must report no access for device 1; the `peers` attribute
 * lists what was granted; an ordinal the machine lacks, or the device
 * itself, is a config error that names it.
 *
 * The kernels are loaded into device 1's primary context (ct_gpu_init(1)),
 * which is current on the test's thread except around the calls that need
 * device 0's.  Like the other GPU suites it runs in one process
 * (CK_NOFORK: CUDA state does not survive fork).  It skips (77) with one
 * sentence on stderr unless devices 0 and 1 exist and can access each
 * other.
 *
 * A grant at run time, with no peers= in the stack: a block of device 0
 * is first checked to be out of device 1's reach (as the driver reports
 * it), then device 1 is granted through the `peers` attribute or
 * xdm_runtime_grant_peer(), as PyTorch's enablePeerAccess does under xdm;
 * the driver must then report read and write, and device 1's kernel must
 * write the block.  For cuda_vmm, a mapping made before the grant and one
 * made after both.  A write naming the device itself changes nothing; a
 * bad one is refused and changes nothing.  The grant on the device's
 * default pool (stack `cuda_async`) outlives its runtime, so that test
 * runs last: test_no_grant_without_peers finds that pool untouched.
 *
 * And the order: a slow kernel of device 1 writes a block of device 0
 * between xdm_prepare_peer_use and xdm_finish_peer_use; the block is freed
 * and taken again on device 0 at once, and device 0 writes it.  The free
 * waits for device 1's kernel, so device 0's write is the one that stays.
 *
 *   check_peer_cuda            run the suite
 *   check_peer_cuda --probe    exit 0 if the suite would run here, 77 if not
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

#define MIB ((size_t)1 << 20)
#define BLOCK MIB

/* A byte pattern that is neither 0 nor what fresh memory tends to hold. */
enum { P = 0xa1 };

static CUcontext ctx0;			/* device 0's primary context, retained for good */
static char all_granted[256];		/* what peers=all on device 0 must show */
static char all_skipped[256];

/* ---- what the driver says ---------------------------------------------- */

static CUdevice device(int ordinal)
{
	CUdevice d = 0;

	CU_OK(ct_drv.cuDeviceGet(&d, ordinal));
	return d;
}

/*
 * The access the driver grants device `who` on b: its pool's, for a block
 * of cuda_async (the pool, found from the pointer, also under `pool`), or
 * the mapping's, for cuda_vmm.  Asked with device 0's context current.
 */
static unsigned long long access_for(const struct xdm_block *b, bool from_pool, int who)
{
	CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)device(who) };
	unsigned long long flags = ~0ULL;

	CU_OK(ct_drv.cuCtxSetCurrent(ctx0));
	if (from_pool) {
		CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_MAX;
		CUmemoryPool pool = NULL;

		CU_OK(ct_drv.cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
						   ct_dev(b)));
		ck_assert_msg(pool != NULL, "block 0x%" PRIx64 " is from no memory pool", b->ptr);
		CU_OK(ct_drv.cuMemPoolGetAccess(&f, pool, &loc));
		flags = (unsigned long long)f;
	} else {
		CU_OK(ct_drv.cuMemGetAccess(&flags, &loc, ct_dev(b)));
	}
	CU_OK(ct_ctx_current());
	return flags;
}

static void expect_attr(struct xdm_runtime *rt, uint32_t layer, const char *name,
			const char *want)
{
	char buf[256];

	TU_OK(xdm_layer_attr_show(rt, layer, name, buf, sizeof(buf)));
	ck_assert_msg(strcmp(buf, want) == 0, "layer %u's %s reads '%s', not '%s'", layer, name,
		      buf, want);
}

/* The backend's layer: under `pool` it is the second. */
static uint32_t backend_layer(const char *stack)
{
	return strncmp(stack, "pool", 4) == 0 ? 1 : 0;
}

/* ---- a write from device 1 --------------------------------------------- */

/* Zero b's first BLOCK bytes from device 0, and wait until that is done. */
static void zero_on_device_0(const struct xdm_block *b)
{
	uint8_t *zeros = calloc(1, BLOCK);

	ck_assert_ptr_nonnull(zeros);
	CU_OK(ct_drv.cuCtxSetCurrent(ctx0));
	CU_OK(ct_drv.cuMemcpyHtoD(ct_dev(b), zeros, BLOCK));
	/* A copy from pageable memory may return before its DMA is done. */
	CU_OK(ct_drv.cuCtxSynchronize());
	CU_OK(ct_ctx_current());
	free(zeros);
}

/* How many of b's first BLOCK bytes hold v, copied with device 0's context. */
static size_t count_on_device_0(const struct xdm_block *b, uint8_t v)
{
	size_t same;

	CU_OK(ct_drv.cuCtxSetCurrent(ctx0));
	same = ct_count_bytes(ct_dev(b), BLOCK, v);
	CU_OK(ct_ctx_current());
	return same;
}

/* Device 1's kernel fills b; device 0 must read back what it wrote. */
static void device_1_writes(struct xdm_runtime *rt1, const struct xdm_block *b, const char *what)
{
	size_t same;

	zero_on_device_0(b);
	CU_OK(ct_fill(ct_stream(rt1, 0), ct_dev(b), BLOCK, P));
	TU_OK(xdm_stream_synchronize(rt1, 0));
	same = count_on_device_0(b, P);
	ck_assert_msg(same == BLOCK, "%s: %zu of %zu bytes written by device 1 read back as "
		      "0x%02x on device 0", what, same, BLOCK, P);
	printf("%s: device 1 wrote a block of device 0, which read it back\n", what);
}

static void write_from_device_1(const char *stack, bool from_pool)
{
	uint32_t layer = backend_layer(stack);
	struct xdm_runtime *rt0, *rt1;
	struct xdm_block b;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(1, "cuda", "cuda_async", &rt1));
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt0));
	expect_attr(rt0, layer, "peers", all_granted);
	expect_attr(rt0, layer, "peers_skipped", all_skipped);

	TU_OK(xdm_allocate(rt0, BLOCK, 0, "peer", &b));
	/* The allocation is stream-ordered on device 0: let it be done. */
	ct_sync_all(rt0);
	/* The grant, as the driver sees it, before device 1 touches anything. */
	ck_assert_uint_eq(access_for(&b, from_pool, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_assert_uint_eq(access_for(&b, from_pool, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

	device_1_writes(rt1, &b, stack);

	TU_OK(xdm_deallocate(rt0, &b));
	ct_sync_all(rt0);
	TU_OK(xdm_reap_pending(rt0));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt0), 0);
	TU_OK(xdm_runtime_destroy(rt0));
	TU_OK(xdm_runtime_destroy(rt1));
}

START_TEST(test_async_peers_all)
{
	write_from_device_1("cuda_async peers=all", true);
}
END_TEST

START_TEST(test_pool_over_async_peers_all)
{
	write_from_device_1("pool | cuda_async peers=all", true);
}
END_TEST

START_TEST(test_vmm_peers_all)
{
	write_from_device_1("cuda_vmm reserve=1G peers=all", false);
}
END_TEST

START_TEST(test_pool_over_vmm_peers_all)
{
	write_from_device_1("pool | cuda_vmm reserve=1G peers=all", false);
}
END_TEST

/* ---- the grant only where asked ---------------------------------------- */

/* A block of stack on device 0: what device 1 may do with it, and `peers`. */
static void expect_grant(const char *stack, bool from_pool, unsigned long long want,
			 const char *peers)
{
	struct xdm_runtime *rt;
	unsigned long long got;
	struct xdm_block b;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt));
	expect_attr(rt, backend_layer(stack), "peers", peers);
	TU_OK(xdm_allocate(rt, BLOCK, 0, "grant", &b));
	ct_sync_all(rt);
	got = access_for(&b, from_pool, 1);
	ck_assert_msg(got == want, "%s: device 1 has access 0x%llx, not 0x%llx", stack, got,
		      want);
	ck_assert_uint_eq(access_for(&b, from_pool, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	TU_OK(xdm_deallocate(rt, &b));
	ct_sync_all(rt);
	TU_OK(xdm_reap_pending(rt));
	TU_OK(xdm_runtime_destroy(rt));
}

START_TEST(test_no_grant_without_peers)
{
	/* The default pool, untouched: as cudaMallocAsync users find it. */
	expect_grant("cuda_async", true, CU_MEM_ACCESS_FLAGS_PROT_NONE, "\n");
	expect_grant("cuda_async pool=own", true, CU_MEM_ACCESS_FLAGS_PROT_NONE, "\n");
	expect_grant("cuda_async peers=none", true, CU_MEM_ACCESS_FLAGS_PROT_NONE, "\n");
	expect_grant("cuda_vmm reserve=1G", false, CU_MEM_ACCESS_FLAGS_PROT_NONE, "\n");
	expect_grant("pool | cuda_vmm reserve=1G", false, CU_MEM_ACCESS_FLAGS_PROT_NONE, "\n");
}
END_TEST

START_TEST(test_grant_by_name)
{
	expect_grant("cuda_async peers=1", true, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "1\n");
	expect_grant("cuda_async pool=own peers=1", true, CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
		     "1\n");
	expect_grant("cuda_vmm reserve=1G peers=1", false, CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
		     "1\n");
}
END_TEST

START_TEST(test_refused_by_name)
{
	int n = 0;
	char stack[64], want[64];

	CU_OK(ct_drv.cuDeviceGetCount(&n));
	/* An ordinal this machine lacks: 7 on up to 7 GPUs, else the count. */
	if (n < 64) {
		int missing = n <= 7 ? 7 : n;

		snprintf(want, sizeof(want), "peers names device %d, which this process", missing);
		snprintf(stack, sizeof(stack), "cuda_async peers=%d", missing);
		tu_expect_config_error("cuda", stack, want);
		snprintf(stack, sizeof(stack), "cuda_vmm reserve=1G peers=1,%d", missing);
		tu_expect_config_error("cuda", stack, want);
	}
	tu_expect_config_error("cuda", "cuda_async peers=0",
			       "peers names device 0, which is the layer's own device");
	tu_expect_config_error("cuda", "cuda_async pool=default peers=1",
			       "needs a pool of the layer's own");
}
END_TEST

/*
 * A peer kernel's write is waited for before the block is used again: a
 * spin_fill of device 1 (about 100 ms, then P) on a block of device 0,
 * recorded as a peer use; the block freed and taken again on device 0's
 * stream (the pool's cache hands the same address straight back), and
 * device 0 sets it to Q.  Without the wait the late P would land over Q.
 */
START_TEST(test_the_free_waits_for_a_peer_kernel)
{
	enum { Q = 0x3c };
	struct xdm_runtime *rt0, *rt1;
	struct xdm_block b, again;
	size_t same;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(1, "cuda", "cuda_async", &rt1));
	TU_OK(xdm_runtime_create(0, "cuda", "pool | cuda_async peers=all", &rt0));
	TU_OK(xdm_allocate(rt0, BLOCK, 0, "peer", &b));
	ct_sync_all(rt0);
	ck_assert_uint_eq(access_for(&b, true, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	zero_on_device_0(&b);

	TU_OK(xdm_prepare_peer_use(rt0, xdm_block_id_of(&b), rt1, 0, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(ct_stream(rt1, 0), ct_dev(&b), BLOCK, P, 100 * CT_CYCLES_PER_MS));
	TU_OK(xdm_finish_peer_use(rt0, xdm_block_id_of(&b), rt1, 0, XDM_ACCESS_WRITE));
	TU_OK(xdm_deallocate(rt0, &b));
	TU_OK(xdm_allocate(rt0, BLOCK, 0, "again", &again));
	ck_assert_msg(again.ptr == b.ptr, "the pool gave 0x%" PRIx64 " for 0x%" PRIx64
		      ": the test needs the same memory back", again.ptr, b.ptr);
	CU_OK(ct_drv.cuCtxSetCurrent(ctx0));
	CU_OK(ct_drv.cuMemsetD8Async(ct_dev(&again), Q, BLOCK, ct_stream(rt0, 0)));
	CU_OK(ct_ctx_current());
	TU_OK(xdm_stream_synchronize(rt0, 0));
	TU_OK(xdm_stream_synchronize(rt1, 0));
	same = count_on_device_0(&again, Q);
	ck_assert_msg(same == BLOCK, "%zu of %zu bytes hold device 0's 0x%02x after the free: "
		      "device 1's late write was not waited for", same, BLOCK, Q);
	printf("pool | cuda_async peers=all: the free waited for device 1's kernel\n");

	TU_OK(xdm_deallocate(rt0, &again));
	ct_sync_all(rt0);
	TU_OK(xdm_runtime_destroy(rt0));
	TU_OK(xdm_runtime_destroy(rt1));
}
END_TEST

/* ---- the grant at run time --------------------------------------------- */

static void expect_access(const struct xdm_block *b, bool from_pool, int who,
			  unsigned long long want, const char *what)
{
	unsigned long long got = access_for(b, from_pool, who);

	ck_assert_msg(got == want, "%s: device %d has access 0x%llx to 0x%" PRIx64 ", not 0x%llx",
		      what, who, got, b->ptr, want);
}

/* Free b and wait until the runtime has it all back. */
static void give_back(struct xdm_runtime *rt, struct xdm_block *b)
{
	TU_OK(xdm_deallocate(rt, b));
	ct_sync_all(rt);
	TU_OK(xdm_reap_pending(rt));
}

/* Writes the driver refuses, or that name the device itself: nothing changes. */
static void writes_that_change_nothing(struct xdm_runtime *rt, uint32_t layer,
				       const char *peers)
{
	char value[16];
	int n = 0;

	CU_OK(ct_drv.cuDeviceGetCount(&n));
	TU_OK(xdm_layer_attr_store(rt, layer, "peers", "0"));
	TU_OK(xdm_runtime_grant_peer(rt, 0));
	expect_attr(rt, layer, "peers", peers);
	snprintf(value, sizeof(value), "1,%d", n);
	ck_assert_int_eq(xdm_layer_attr_store(rt, layer, "peers", value), XDM_E_INVALID);
	ck_assert_msg(strstr(xdm_last_error_message(), "which this process does not have"),
		      "%s", xdm_last_error_message());
	ck_assert_int_eq(xdm_runtime_grant_peer(rt, (uint32_t)n), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, layer, "peers", "none"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_store(rt, layer, "peers", "one"), XDM_E_INVALID);
	expect_attr(rt, layer, "peers", peers);
}

/*
 * stack (a cuda_async one, no peers=) on device 0: a block out of device
 * 1's reach until device 1 is granted, by a write of the attribute or by
 * xdm_runtime_grant_peer().
 */
static void grant_async(const char *stack, bool by_attr)
{
	uint32_t layer = backend_layer(stack);
	struct xdm_runtime *rt0, *rt1;
	struct xdm_block b, later;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(1, "cuda", "cuda_async", &rt1));
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt0));
	expect_attr(rt0, layer, "peers", "\n");
	TU_OK(xdm_allocate(rt0, BLOCK, 0, "before", &b));
	ct_sync_all(rt0);
	expect_access(&b, true, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE, stack);
	writes_that_change_nothing(rt0, layer, "\n");
	expect_access(&b, true, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE, stack);

	if (by_attr)
		TU_OK(xdm_layer_attr_store(rt0, layer, "peers", "1\n"));
	else
		TU_OK(xdm_runtime_grant_peer(rt0, 1));
	expect_attr(rt0, layer, "peers", "1\n");
	expect_access(&b, true, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	expect_access(&b, true, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	device_1_writes(rt1, &b, stack);
	/* The pool's grant covers what it hands out later too. */
	TU_OK(xdm_allocate(rt0, 4 * BLOCK, 0, "after", &later));
	ct_sync_all(rt0);
	expect_access(&later, true, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	device_1_writes(rt1, &later, stack);
	/* Granted again: nothing new, no error. */
	TU_OK(xdm_runtime_grant_peer(rt0, 1));
	writes_that_change_nothing(rt0, layer, "1\n");

	give_back(rt0, &later);
	give_back(rt0, &b);
	TU_OK(xdm_runtime_destroy(rt0));
	TU_OK(xdm_runtime_destroy(rt1));
}

START_TEST(test_grant_at_run_time_async_own_pool)
{
	grant_async("cuda_async pool=own", true);
	grant_async("pool | cuda_async pool=own", false);
}
END_TEST

/*
 * cuda_vmm: access is each mapping's.  A block mapped before the grant
 * must get it, one mapped after must be born with it; and one handed back
 * but not yet unmapped does not matter to the test.
 */
static void grant_vmm(const char *stack, bool by_attr)
{
	uint32_t layer = backend_layer(stack);
	struct xdm_runtime *rt0, *rt1;
	struct xdm_block before, after;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(1, "cuda", "cuda_async", &rt1));
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt0));
	expect_attr(rt0, layer, "peers", "\n");
	TU_OK(xdm_allocate(rt0, BLOCK, 0, "before", &before));
	ct_sync_all(rt0);
	expect_access(&before, false, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE, stack);
	writes_that_change_nothing(rt0, layer, "\n");
	expect_access(&before, false, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE, stack);

	if (by_attr)
		TU_OK(xdm_layer_attr_store(rt0, layer, "peers", "1"));
	else
		TU_OK(xdm_runtime_grant_peer(rt0, 1));
	expect_attr(rt0, layer, "peers", "1\n");
	expect_access(&before, false, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	expect_access(&before, false, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	device_1_writes(rt1, &before, stack);

	/* Past the first block's granules, and under pool past its chunk: a new mapping. */
	TU_OK(xdm_allocate(rt0, 256 * MIB, 0, "after", &after));
	ct_sync_all(rt0);
	ck_assert_uint_ne(after.ptr, before.ptr);
	expect_access(&after, false, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	expect_access(&after, false, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, stack);
	device_1_writes(rt1, &after, stack);
	writes_that_change_nothing(rt0, layer, "1\n");

	give_back(rt0, &after);
	give_back(rt0, &before);
	TU_OK(xdm_runtime_destroy(rt0));
	TU_OK(xdm_runtime_destroy(rt1));
}

START_TEST(test_grant_at_run_time_vmm)
{
	grant_vmm("cuda_vmm reserve=1G", true);
	grant_vmm("cuda_vmm reserve=1G", false);
	grant_vmm("pool | cuda_vmm reserve=1G", false);
}
END_TEST

/*
 * The stack PyTorch gets by default: cuda_async on the device's default
 * pool.  A grant there is the pool's for the rest of the process, as
 * PyTorch's own cudaMallocAsync allocator would make it: this test is the
 * suite's last.
 */
START_TEST(test_grant_at_run_time_async_default_pool)
{
	grant_async("cuda_async", false);
}
END_TEST

static Suite *peer_cuda_suite(void)
{
	Suite *s = suite_create("peer_cuda");
	TCase *tc = tcase_create("peers");

	tcase_add_test(tc, test_async_peers_all);
	tcase_add_test(tc, test_pool_over_async_peers_all);
	tcase_add_test(tc, test_vmm_peers_all);
	tcase_add_test(tc, test_pool_over_vmm_peers_all);
	tcase_add_test(tc, test_no_grant_without_peers);
	tcase_add_test(tc, test_grant_by_name);
	tcase_add_test(tc, test_refused_by_name);
	tcase_add_test(tc, test_the_free_waits_for_a_peer_kernel);
	tcase_add_test(tc, test_grant_at_run_time_async_own_pool);
	tcase_add_test(tc, test_grant_at_run_time_vmm);
	/* Last: its grant on the default pool outlives the runtime. */
	tcase_add_test(tc, test_grant_at_run_time_async_default_pool);
	suite_add_tcase(s, tc);
	return s;
}

/* ---- main --------------------------------------------------------------- */

static int skip(const char *why)
{
	fprintf(stderr, "SKIP: needs 2 GPUs with peer access; %s\n", why);
	return 77;
}

/* Whether device `from` can access the memory of device `to`; -1 on error. */
static int can_access(int from, int to)
{
	CUdevice a = 0, b = 0;
	int can = 0;

	if (ct_drv.cuDeviceGet(&a, from) != CUDA_SUCCESS ||
	    ct_drv.cuDeviceGet(&b, to) != CUDA_SUCCESS ||
	    ct_drv.cuDeviceCanAccessPeer(&can, a, b) != CUDA_SUCCESS)
		return -1;
	return can == 1;
}

/* What `peers` and `peers_skipped` must read for peers=all on device 0. */
static void expect_all(int n)
{
	size_t g = 0, k = 0;

	for (int i = 1; i < n && i < 64; i++) {
		if (can_access(i, 0) == 1)
			g += (size_t)snprintf(all_granted + g, sizeof(all_granted) - g, "%s%d",
					      g ? " " : "", i);
		else
			k += (size_t)snprintf(all_skipped + k, sizeof(all_skipped) - k, "%s%d",
					      k ? " " : "", i);
	}
	snprintf(all_granted + g, sizeof(all_granted) - g, "\n");
	snprintf(all_skipped + k, sizeof(all_skipped) - k, "\n");
}

int main(int argc, char **argv)
{
	char why[512], has[64];
	CUdevice dev0 = 0;
	SRunner *sr;
	int n = 0, failed;
	CUresult r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ct_driver_open(why, sizeof(why)))
		return skip("this machine has no CUDA driver");
	if (ct_drv.cuInit(0) != CUDA_SUCCESS || ct_drv.cuDeviceGetCount(&n) != CUDA_SUCCESS)
		n = 0;
	if (n < 2) {
		snprintf(has, sizeof(has), "this machine has %d", n);
		return skip(has);
	}
	if (can_access(1, 0) != 1 || can_access(0, 1) != 1)
		return skip("devices 0 and 1 of this machine cannot access each other");
	if (argc > 1 && strcmp(argv[1], "--probe") == 0)
		return 0;

	ct_take_gpu_lock();
	ct_start_watchdog(ct_under_sanitizer() ? 420 : 120);
	/* Device 1's context current, with the kernels; device 0's kept. */
	r = ct_gpu_init(1);
	if (r == CUDA_SUCCESS)
		r = ct_drv.cuDeviceGet(&dev0, 0);
	if (r == CUDA_SUCCESS)
		r = ct_drv.cuDevicePrimaryCtxRetain(&ctx0, dev0);
	if (r != CUDA_SUCCESS) {
		printf("ERROR: the tests' own driver setup failed: %s\n%s\n", ct_result_text(r),
		       ct_gpu.jit_log);
		return 99;
	}
	expect_all(n);
	sr = srunner_create(peer_cuda_suite());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
