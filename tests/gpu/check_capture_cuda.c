/* SPDX-License-Identifier: MIT */
/*
 * check_capture_cuda.c - xdm under CUDA graph capture, as PyTorch uses it
 * (doc/design.md, "CUDA graph capture"): a private runtime per memory pool,
 * its stack a pool over cuda_direct (or cuda_vmm), serving allocations and
 * frees on a stream captured in the global mode, the allocating thread in
 * relaxed mode around each xdm call.
 *
 *  a. blocks allocated during the capture are written by captured memset
 *     and copy nodes; the capture ends, the graph replays, and the output
 *     holds the pattern;
 *  b. a block freed during the capture and allocated again in it (the same
 *     address, on the same stream) is fine;
 *  c. two graphs of two private runtimes, replayed on two streams many
 *     times at once, each give their own pattern;
 *  d. while a capture is on, another thread (in the global mode, as any
 *     other thread of the process) allocates, frees across streams and
 *     reaps in a device runtime whose pool also holds memory of the
 *     capturing stream; the capture survives;
 *  e. an allocation a budget refuses inside the capture is OUT_OF_BUDGET,
 *     and the capture survives it;
 *  f. a block used on another stream outside the capture (the use stands
 *     behind a gate the host opens later) and freed inside a capture of its
 *     own stream: the free returns at once (a host wait there deadlocks a
 *     program whose use waits for the capturing thread), the capture
 *     survives, the block is held and not handed out again until the use
 *     has run, and a reap after that gives it back.
 *
 * The graphs hold no kernels: memsets and copies are the nodes, and the
 * host reads the output back.  One process, no fork (CUDA state does not
 * survive it); no GPU is a skip (77).
 *
 *   check_capture_cuda            run the suite
 *   check_capture_cuda --probe    exit 0 if the suite would run here, 77 if not
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
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
#define SCRATCH (256 * KIB)
#define REPLAYS 64

/* The stacks a private runtime may have: the pool must never reach cuda_async,
 * whose allocations on a captured stream become the graph's own memory nodes. */
static const char *const private_stacks[] = {
	"pool trim_ms=0 | cuda_direct",
	"pool trim_ms=0 | cuda_vmm",
};
#define N_PRIVATE (int)(sizeof(private_stacks) / sizeof(private_stacks[0]))

/* The device runtime's stacks: the config's usual one, and the platform's
 * default with its trimmer paused as the glue pauses it. */
static const char *const device_stacks[] = {
	"pool | cuda_async",
	"pool trim_ms=0 | cuda_vmm",
};
#define N_DEVICE (int)(sizeof(device_stacks) / sizeof(device_stacks[0]))

static struct xdm_runtime *runtime(const char *stack)
{
	struct xdm_runtime *rt;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &rt));
	return rt;
}

static CUstream new_stream(void)
{
	CUstream s;

	CU_OK(ct_drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	return s;
}

static void expect_capturing(CUstream s, const char *when)
{
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;

	CU_OK(ct_drv.cuStreamIsCapturing(s, &status));
	ck_assert_msg(status == CU_STREAM_CAPTURE_STATUS_ACTIVE,
		      "%s: the capture is %s", when,
		      status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated" : "not on");
}

/* ---- xdm calls inside a capture, in relaxed mode as the glue makes them ---- */

static enum xdm_status relaxed_allocate(struct xdm_runtime *rt, size_t bytes, CUstream s,
					void **ptr)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	enum xdm_status st;

	CU_OK(ct_drv.cuThreadExchangeStreamCaptureMode(&mode));
	st = xdm_native_allocate(rt, bytes, s, "captured", ptr);
	CU_OK(ct_drv.cuThreadExchangeStreamCaptureMode(&mode));
	return st;
}

static CUdeviceptr cap_alloc(struct xdm_runtime *rt, size_t bytes, CUstream s)
{
	void *p = NULL;

	TU_OK(relaxed_allocate(rt, bytes, s, &p));
	ck_assert_ptr_nonnull(p);
	expect_capturing(s, "after an allocation");
	return (CUdeviceptr)(uintptr_t)p;
}

static void cap_free(struct xdm_runtime *rt, CUdeviceptr p, CUstream s)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	enum xdm_status st;

	CU_OK(ct_drv.cuThreadExchangeStreamCaptureMode(&mode));
	st = xdm_native_free(rt, (void *)(uintptr_t)p, s);
	CU_OK(ct_drv.cuThreadExchangeStreamCaptureMode(&mode));
	TU_OK(st);
	expect_capturing(s, "after a free");
}

/* ---- one graph: a pattern through scratch blocks into an output ----------- */

struct graph {
	CUgraph g;
	CUgraphExec exec;
	CUdeviceptr out;	/* 2 * SCRATCH bytes, allocated in the capture, kept */
	uint32_t pattern;
};

/*
 * Captured on s: scratch a <- pattern; b <- a; a freed; c allocated (a's
 * address again: case b) <- pattern + 1; out <- b | c; b, c freed.
 */
static void capture_body(struct xdm_runtime *rt, CUstream s, struct graph *gr)
{
	CUdeviceptr a, b, c;

	a = cap_alloc(rt, SCRATCH, s);
	CU_OK(ct_drv.cuMemsetD32Async(a, gr->pattern, SCRATCH / 4, s));
	b = cap_alloc(rt, SCRATCH, s);
	CU_OK(ct_drv.cuMemcpyDtoDAsync(b, a, SCRATCH, s));
	cap_free(rt, a, s);
	c = cap_alloc(rt, SCRATCH, s);
	ck_assert_msg(c == a, "the block freed in the capture was not reused (0x%llx, then "
		      "0x%llx): case b is not exercised", (unsigned long long)a,
		      (unsigned long long)c);
	CU_OK(ct_drv.cuMemsetD32Async(c, gr->pattern + 1, SCRATCH / 4, s));
	gr->out = cap_alloc(rt, 2 * SCRATCH, s);
	CU_OK(ct_drv.cuMemcpyDtoDAsync(gr->out, b, SCRATCH, s));
	CU_OK(ct_drv.cuMemcpyDtoDAsync(gr->out + SCRATCH, c, SCRATCH, s));
	cap_free(rt, b, s);
	cap_free(rt, c, s);
}

static void begin(CUstream s)
{
	CU_OK(ct_drv.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
}

/* End the capture (it must have survived), instantiate, clear the output. */
static void finish(CUstream s, struct graph *gr)
{
	gr->g = NULL;
	expect_capturing(s, "before the end");
	CU_OK(ct_drv.cuStreamEndCapture(s, &gr->g));
	ck_assert_ptr_nonnull(gr->g);
	CU_OK(ct_drv.cuGraphInstantiateWithFlags(&gr->exec, gr->g, 0));
	/* The capture ran nothing: what the replays write is all there will be. */
	CU_OK(ct_drv.cuMemsetD8Async(gr->out, 0, 2 * SCRATCH, s));
	CU_OK(ct_drv.cuStreamSynchronize(s));
}

static void expect_words(CUdeviceptr p, size_t bytes, uint32_t v, const char *what)
{
	uint32_t *host = malloc(bytes);
	size_t bad = 0;

	ck_assert_ptr_nonnull(host);
	CU_OK(ct_drv.cuMemcpyDtoH(host, p, bytes));
	for (size_t i = 0; i < bytes / 4; i++)
		bad += host[i] != v;
	free(host);
	ck_assert_msg(!bad, "%s: %zu of %zu words are not 0x%08x", what, bad, bytes / 4, v);
}

static void expect_output(const struct graph *gr, const char *what)
{
	expect_words(gr->out, SCRATCH, gr->pattern, what);
	expect_words(gr->out + SCRATCH, SCRATCH, gr->pattern + 1, what);
}

static void drop(struct xdm_runtime *rt, CUstream s, struct graph *gr)
{
	CU_OK(ct_drv.cuGraphExecDestroy(gr->exec));
	CU_OK(ct_drv.cuGraphDestroy(gr->g));
	TU_OK(xdm_native_free(rt, (void *)(uintptr_t)gr->out, s));
}

/* ---- a, b: one private runtime, one graph -------------------------------- */

START_TEST(private_runtime_serves_a_global_capture)
{
	const char *stack = private_stacks[_i];
	struct xdm_runtime *rt = runtime(stack);
	struct graph gr = { .pattern = 0xc0de0001u };
	CUstream s = new_stream();

	begin(s);
	capture_body(rt, s, &gr);
	finish(s, &gr);
	for (int i = 0; i < 3; i++) {
		CU_OK(ct_drv.cuGraphLaunch(gr.exec, s));
		CU_OK(ct_drv.cuStreamSynchronize(s));
		expect_output(&gr, stack);
		CU_OK(ct_drv.cuMemsetD8Async(gr.out, 0, 2 * SCRATCH, s));
	}
	drop(rt, s, &gr);
	CU_OK(ct_drv.cuStreamSynchronize(s));
	TU_OK(xdm_runtime_destroy(rt));
	CU_OK(ct_drv.cuStreamDestroy(s));
}
END_TEST

/* ---- c: two private runtimes, two graphs replayed at once ----------------- */

START_TEST(two_private_graphs_replay_concurrently)
{
	const char *stack = private_stacks[_i];
	struct xdm_runtime *rt[2] = { runtime(stack), runtime(stack) };
	struct graph gr[2] = { { .pattern = 0x11110000u }, { .pattern = 0x22220000u } };
	CUstream s[2] = { new_stream(), new_stream() };

	for (int k = 0; k < 2; k++) {
		begin(s[k]);
		capture_body(rt[k], s[k], &gr[k]);
		finish(s[k], &gr[k]);
	}
	for (int i = 0; i < REPLAYS; i++)
		for (int k = 0; k < 2; k++)
			CU_OK(ct_drv.cuGraphLaunch(gr[k].exec, s[k]));
	for (int k = 0; k < 2; k++) {
		CU_OK(ct_drv.cuStreamSynchronize(s[k]));
		expect_output(&gr[k], k ? "second graph" : "first graph");
	}
	for (int k = 0; k < 2; k++) {
		drop(rt[k], s[k], &gr[k]);
		CU_OK(ct_drv.cuStreamSynchronize(s[k]));
		TU_OK(xdm_runtime_destroy(rt[k]));
		CU_OK(ct_drv.cuStreamDestroy(s[k]));
	}
}
END_TEST

/* ---- d: the device runtime from another thread during the capture -------- */

struct other_thread {
	struct xdm_runtime *rt;
	CUstream t1, t2;
	struct tu_first_failure fail;
};

/*
 * What any other thread of a framework does meanwhile, in relaxed mode as
 * the torch glue puts every xdm call while a capture may be under way (in
 * the global mode a call that may synchronize, such as the driver's pool
 * growth, ends another thread's capture whoever makes it): growth (large enough to look for another stream's idle
 * chunk first: the capturing stream's), a use on a second stream and the
 * free that waits for it, small blocks, and a reap.
 */
static void *device_user(void *arg)
{
	struct other_thread *o = arg;
	void *big = NULL, *small[8] = { NULL };
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

	if (ct_drv.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) {
		o->fail.st = XDM_E_DRIVER;
		snprintf(o->fail.step, sizeof(o->fail.step), "relaxed mode");
		return NULL;
	}
	if (!tu_step_ok(&o->fail, xdm_native_allocate(o->rt, 48 * MIB, o->t1, "other", &big), "allocate"))
		return NULL;
	for (int i = 0; i < 8; i++)
		if (!tu_step_ok(&o->fail, xdm_native_allocate(o->rt, 4 * KIB << i, o->t1, "other",
						    &small[i]), "allocate small"))
			return NULL;
	if (!tu_step_ok(&o->fail, xdm_native_record_use(o->rt, big, o->t2), "record_use") ||
	    !tu_step_ok(&o->fail, xdm_native_free(o->rt, big, o->t1), "free after a use"))
		return NULL;
	for (int i = 0; i < 8; i++)
		if (!tu_step_ok(&o->fail, xdm_native_free(o->rt, small[i], o->t2), "free small"))
			return NULL;
	tu_step_ok(&o->fail, xdm_reap_pending(o->rt), "reap_pending");
	return NULL;
}

START_TEST(device_runtime_on_another_thread_leaves_the_capture_alone)
{
	const char *dev_stack = device_stacks[_i];
	struct xdm_runtime *dev = runtime(dev_stack);
	struct xdm_runtime *rt = runtime(private_stacks[0]);
	struct other_thread o = { .rt = dev, .t1 = new_stream(), .t2 = new_stream() };
	struct graph gr = { .pattern = 0x0d0d0000u };
	CUstream s = new_stream();
	pthread_t th;
	void *p = NULL;

	/*
	 * Before the capture the device runtime holds memory of s: a chunk
	 * given back (over cuda_async a free queued on s, which a reap would
	 * synchronize s for) and an idle chunk in s's arena, which a steal and
	 * a trim would take.
	 */
	for (int i = 0; i < 2; i++) {
		TU_OK(xdm_native_allocate(dev, 64 * MIB, s, "before", &p));
		TU_OK(xdm_native_free(dev, p, s));
		if (!i)
			TU_OK(xdm_layer_attr_store(dev, 0, "trim", "1"));
	}

	begin(s);
	capture_body(rt, s, &gr);
	ck_assert_int_eq(pthread_create(&th, NULL, device_user, &o), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	expect_capturing(s, dev_stack);
	ck_assert_msg(o.fail.st == XDM_OK, "%s: the other thread's %s: %s (%s)", dev_stack,
		      o.fail.step, xdm_strerror(o.fail.st), o.fail.msg);
	/* The capture goes on after it. */
	CU_OK(ct_drv.cuMemsetD32Async(gr.out, gr.pattern, SCRATCH / 4, s));
	finish(s, &gr);
	CU_OK(ct_drv.cuGraphLaunch(gr.exec, s));
	CU_OK(ct_drv.cuStreamSynchronize(s));
	expect_output(&gr, dev_stack);

	drop(rt, s, &gr);
	CU_OK(ct_drv.cuStreamSynchronize(s));
	TU_OK(xdm_runtime_destroy(rt));
	/* The device runtime's frees of s, deferred during the capture, go now. */
	TU_OK(xdm_reap_pending(dev));
	TU_OK(xdm_runtime_destroy(dev));
	CU_OK(ct_drv.cuStreamDestroy(s));
	CU_OK(ct_drv.cuStreamDestroy(o.t1));
	CU_OK(ct_drv.cuStreamDestroy(o.t2));
}
END_TEST

/* ---- e: a budget refusal inside the capture ------------------------------ */

START_TEST(budget_refusal_leaves_the_capture_alone)
{
	struct xdm_runtime *rt = runtime("budget limit=4M | pool trim_ms=0 | cuda_direct");
	struct graph gr = { .pattern = 0xbeef0000u };
	CUstream s = new_stream();
	enum xdm_status st;
	void *p = NULL;

	begin(s);
	st = relaxed_allocate(rt, 64 * MIB, s, &p);
	ck_assert_msg(st == XDM_E_OUT_OF_BUDGET, "64M under a 4M budget: %s (%s)",
		      xdm_strerror(st), xdm_last_error_message());
	ck_assert_ptr_null(p);
	expect_capturing(s, "after the refusal");
	capture_body(rt, s, &gr);
	finish(s, &gr);
	CU_OK(ct_drv.cuGraphLaunch(gr.exec, s));
	CU_OK(ct_drv.cuStreamSynchronize(s));
	expect_output(&gr, "under the budget");
	drop(rt, s, &gr);
	CU_OK(ct_drv.cuStreamSynchronize(s));
	TU_OK(xdm_runtime_destroy(rt));
	CU_OK(ct_drv.cuStreamDestroy(s));
}
END_TEST

/* ---- f: a free inside a capture that must follow work outside it ---------- */

START_TEST(free_in_capture_after_outside_use_is_held)
{
	struct xdm_runtime *rt = runtime(private_stacks[_i]);
	CUstream s = new_stream(), side = new_stream();
	struct tu_gate gate;
	xdm_stream_id side_id;
	CUdeviceptr q;
	void *p = NULL;
	CUgraph g = NULL;

	TU_OK(xdm_native_allocate(rt, SCRATCH, s, "held", &p));
	CU_OK(ct_drv.cuStreamSynchronize(s));
	TU_OK(xdm_native_stream(rt, side, &side_id));
	tu_gate_init(&gate);
	tu_gate_hold(rt, side_id, &gate);
	TU_OK(xdm_native_record_use(rt, p, side));

	begin(s);
	cap_free(rt, (CUdeviceptr)(uintptr_t)p, s);
	tu_expect_capture_frees_held(rt, 1, SCRATCH, "freed in the capture");
	q = cap_alloc(rt, SCRATCH, s);
	ck_assert_msg(q != (CUdeviceptr)(uintptr_t)p, "a held block was handed out again");
	cap_free(rt, q, s);
	expect_capturing(s, "before the end");
	CU_OK(ct_drv.cuStreamEndCapture(s, &g));
	ck_assert_ptr_nonnull(g);
	CU_OK(ct_drv.cuGraphDestroy(g));

	/* The use has not run: a reap keeps the hold. */
	TU_OK(xdm_reap_pending(rt));
	tu_expect_capture_frees_held(rt, 1, SCRATCH, "reaped behind the gate");
	tu_gate_open(&gate);
	CU_OK(ct_drv.cuStreamSynchronize(side));
	ck_assert(!tu_gate_timed_out(&gate));
	TU_OK(xdm_reap_pending(rt));
	tu_expect_capture_frees_held(rt, 0, 0, "reaped after the use ran");

	TU_OK(xdm_runtime_destroy(rt));
	tu_gate_destroy(&gate);
	CU_OK(ct_drv.cuStreamDestroy(side));
	CU_OK(ct_drv.cuStreamDestroy(s));
}
END_TEST

static Suite *capture_cuda_suite(void)
{
	Suite *s = suite_create("capture_cuda");
	TCase *tc = tcase_create("capture");

	tcase_add_loop_test(tc, private_runtime_serves_a_global_capture, 0, N_PRIVATE);
	tcase_add_loop_test(tc, two_private_graphs_replay_concurrently, 0, N_PRIVATE);
	tcase_add_loop_test(tc, device_runtime_on_another_thread_leaves_the_capture_alone, 0,
			    N_DEVICE);
	tcase_add_test(tc, budget_refusal_leaves_the_capture_alone);
	tcase_add_loop_test(tc, free_in_capture_after_outside_use_is_held, 0, N_PRIVATE);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "pool trim_ms=0 | cuda_direct", capture_cuda_suite,
				120);
}
