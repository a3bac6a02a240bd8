/* SPDX-License-Identifier: MIT */
/*
 * check_native_cuda.c - the framework entry on a real GPU: the legacy
 * default stream served from a thread that has no CUDA context (PyTorch's
 * autograd threads), the per-thread default stream refused, and a free by
 * pointer that names a side stream waiting for that stream's kernel.  Kernels that spin for tens of
 * milliseconds before they write make a missing order show up as wrong
 * bytes; the controls show that the same sequences without the order do
 * go wrong.  Threads run one after the other (joined): no result depends
 * on how they are scheduled.
 *
 * One process (CK_NOFORK: CUDA state does not survive fork); no GPU is a
 * skip (77).  XDM_TEST_SANITIZER leaves out the controls, which race on
 * purpose.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <xdm/xdm.h>

#include "tests/lib/cudacheck.h"
#include "tests/lib/testutil.h"

#define MIB ((size_t)1024 * 1024)
#define BLOCK MIB
#define SPIN (50 * CT_CYCLES_PER_MS)	/* about 50 ms on an H200 */

enum { P = 0xa1, Q = 0x5c };

static struct xdm_runtime *runtime(const char *stack)
{
	struct xdm_runtime *rt;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt));
	return rt;
}

static void finish_runtime(struct xdm_runtime *rt)
{
	CU_OK(ct_drv.cuCtxSynchronize());
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

/* ---- the legacy stream from a thread without a context --------------------- */

struct bare_call {
	struct xdm_runtime *rt;
	bool free;		/* else allocate */
	void *ptr;
	enum xdm_status st;
	char message[512];
};

static void *bare_thread(void *arg)
{
	struct bare_call *c = arg;

	/* A new thread has no current context, like torch's autograd workers. */
	if (c->free)
		c->st = xdm_native_free(c->rt, c->ptr, NULL);
	else
		c->st = xdm_native_allocate(c->rt, BLOCK, NULL, "bare", &c->ptr);
	snprintf(c->message, sizeof(c->message), "%s", xdm_last_error_message());
	return NULL;
}

static void bare(struct bare_call *c)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, bare_thread, c), 0);
	pthread_join(t, NULL);
	ck_assert_msg(c->st == XDM_OK, "%s", c->message);
}

START_TEST(legacy_stream_from_a_thread_without_context)
{
	static const char *const stacks[] = { "cuda_async", "pool | cuda_async",
					      "budget key=native-cuda limit=1G | cuda_async" };

	for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
		struct xdm_runtime *rt = runtime(stacks[i]);
		struct bare_call c = { .rt = rt };

		bare(&c);
		ck_assert_ptr_nonnull(c.ptr);
		/* The memory is good on the legacy stream, which it belongs to. */
		CU_OK(ct_fill(CU_STREAM_LEGACY, (CUdeviceptr)c.ptr, BLOCK, P));
		CU_OK(ct_drv.cuCtxSynchronize());
		ck_assert_uint_eq(ct_count_bytes((CUdeviceptr)c.ptr, BLOCK, P), BLOCK);
		c.free = true;
		bare(&c);
		finish_runtime(rt);
	}
}
END_TEST

/* ---- per-thread default streams are refused -------------------------------- */

START_TEST(per_thread_stream_is_refused)
{
	struct xdm_runtime *rt = runtime("pool | cuda_async");
	uint32_t count = xdm_stream_count(rt);
	xdm_stream_id legacy, id;
	void *p = &p;

	ck_assert_int_eq(xdm_native_stream(rt, CU_STREAM_PER_THREAD, &id), XDM_E_STREAM_MISUSE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "per-thread"));
	ck_assert_int_eq(xdm_native_allocate(rt, BLOCK, CU_STREAM_PER_THREAD, NULL, &p),
			 XDM_E_STREAM_MISUSE);
	ck_assert_ptr_null(p);
	ck_assert_uint_eq(xdm_stream_count(rt), count);
	/* NULL and CU_STREAM_LEGACY are one stream of the pool. */
	TU_OK(xdm_native_stream(rt, NULL, &legacy));
	TU_OK(xdm_native_stream(rt, CU_STREAM_LEGACY, &id));
	ck_assert_uint_eq(id, legacy);
	ck_assert_uint_eq(xdm_stream_count(rt), count + 1);
	finish_runtime(rt);
}
END_TEST

/* ---- a free that names a side stream ------------------------------------------ */

/*
 * A block of the legacy stream is written slowly on a caller's own stream
 * (imported on first sight), then freed by pointer naming that stream; the
 * next block at the same address, written on the legacy stream, must end
 * as Q.  The control frees naming the legacy stream instead.
 */
static size_t side_stream_free(bool name_side)
{
	struct xdm_runtime *rt = runtime("pool | cuda_async");
	struct tu_gate gate;
	CUstream side;
	xdm_stream_id id;
	void *a, *b;
	size_t q;

	CU_OK(ct_drv.cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
	TU_OK(xdm_native_stream(rt, side, &id));
	ck_assert_uint_ge(id, 16);			/* imported, not an owned stream */
	TU_OK(xdm_native_allocate(rt, BLOCK, NULL, "side", &a));
	CU_OK(ct_drv.cuStreamSynchronize(CU_STREAM_LEGACY));
	/* The control holds the slow write at a gate until Q has been
	 * written, so that it lands late however the host is scheduled. */
	tu_gate_init(&gate);
	if (!name_side)
		tu_gate_hold(rt, id, &gate);
	CU_OK(ct_spin_fill(side, (CUdeviceptr)a, BLOCK, P, SPIN));
	TU_OK(xdm_native_free(rt, a, name_side ? (void *)side : NULL));
	TU_OK(xdm_native_allocate(rt, BLOCK, NULL, "next", &b));
	ck_assert_ptr_eq(b, a);
	CU_OK(ct_fill(CU_STREAM_LEGACY, (CUdeviceptr)b, BLOCK, Q));
	if (!name_side) {
		CU_OK(ct_drv.cuStreamSynchronize(CU_STREAM_LEGACY));
		tu_gate_open(&gate);
	}
	CU_OK(ct_drv.cuCtxSynchronize());
	tu_gate_destroy(&gate);
	q = ct_count_bytes((CUdeviceptr)b, BLOCK, Q);
	TU_OK(xdm_native_free(rt, b, NULL));
	finish_runtime(rt);
	CU_OK(ct_drv.cuStreamDestroy(side));
	return q;
}

START_TEST(free_naming_a_side_stream_waits_for_it)
{
	ck_assert_uint_eq(side_stream_free(true), BLOCK);
}
END_TEST

START_TEST(control_free_naming_legacy_is_overwritten)
{
	ck_assert_uint_lt(side_stream_free(false), BLOCK);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------ */

static Suite *native_cuda_suite(void)
{
	Suite *s = suite_create("native_cuda");
	TCase *tc = tcase_create("native");

	tcase_add_test(tc, legacy_stream_from_a_thread_without_context);
	tcase_add_test(tc, per_thread_stream_is_refused);
	tcase_add_test(tc, free_naming_a_side_stream_waits_for_it);
	if (!ct_under_sanitizer()) {
		tcase_add_test(tc, control_free_naming_legacy_is_overwritten);
	}
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "cuda_async", native_cuda_suite, 120);
}
