/* SPDX-License-Identifier: MIT */
/*
 * check_native_cuda.c - the framework entry on a real GPU: the legacy
 * default stream served from a thread that has no CUDA context (PyTorch's
 * autograd threads), the per-thread default stream served (its frees held
 * until the host sees the freeing thread's kernels done, threads exiting
 * with such frees, a free inside a capture), and a free by pointer that
 * names a side stream waiting for that stream's kernel.  Kernels that spin
 * for tens of milliseconds before they write make a missing order show up
 * as wrong bytes; the controls show that the same sequences without the
 * order do go wrong.  Where threads must meet, a gate says when: no result
 * depends on how they are scheduled, and the churn's threads check only
 * what each of them reads.
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
#include <time.h>

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

/* ---- per-thread default streams -------------------------------------------- */

/*
 * CU_STREAM_PER_THREAD is served from the legacy stream; a free naming it
 * is held until the host sees the freeing thread's work done, and no
 * stream ever waits on that thread's event (the wait hung a thread's exit
 * on this machine's driver, commit c44f699).  Worker threads never assert
 * (CK_NOFORK: check's jump out of a test is the test thread's): they keep
 * what went wrong, and the test thread asserts after a bounded join, so
 * that a thread hung in its exit fails the test rather than hanging it.
 */
#define PT_JOIN_S 60

static void join_bounded(pthread_t t, const char *what)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += PT_JOIN_S;
	ck_assert_msg(pthread_timedjoin_np(t, NULL, &until) == 0,
		      "%s did not end within %d s: hung in its exit?", what, PT_JOIN_S);
}

/* How many of n bytes at p hold v, from a worker thread; SIZE_MAX on error. */
static size_t worker_count(CUdeviceptr p, size_t n, uint8_t v, CUresult *r)
{
	uint8_t *host = malloc(n);
	size_t same = 0;

	if (!host)
		return SIZE_MAX;
	*r = ct_drv.cuMemcpyDtoH(host, p, n);
	for (size_t i = 0; *r == CUDA_SUCCESS && i < n; i++)
		same += host[i] == v;
	free(host);
	return *r ? SIZE_MAX : same;
}

struct pt_step {
	struct xdm_runtime *rt;
	void *ptr;		/* out: the block */
	uint8_t value;
	uint64_t spin;		/* write value slowly, after this many cycles */
	void *free_on;		/* the handle the free names; (void *)-1: keep */
	struct tu_gate *linger;	/* if set, wait there after the free, then exit */
	enum xdm_status st;
	CUresult r;
	char message[512];
};

/* Allocate on the thread's per-thread stream, write there, free naming free_on, exit. */
static void *pt_writer(void *arg)
{
	struct pt_step *s = arg;

	s->r = ct_ctx_current();
	if (s->r)
		return NULL;
	s->st = xdm_native_allocate(s->rt, BLOCK, CU_STREAM_PER_THREAD, "ptds", &s->ptr);
	if (s->st)
		goto out;
	s->r = s->spin ? ct_spin_fill(CU_STREAM_PER_THREAD, (CUdeviceptr)s->ptr, BLOCK,
				      s->value, s->spin) :
			 ct_fill(CU_STREAM_PER_THREAD, (CUdeviceptr)s->ptr, BLOCK, s->value);
	if (s->r)
		goto out;
	if (s->free_on != (void *)-1)
		s->st = xdm_native_free(s->rt, s->ptr, s->free_on);
out:
	snprintf(s->message, sizeof(s->message), "%s", xdm_last_error_message());
	if (s->linger)
		tu_gate_run(s->linger);
	return NULL;
}

static void run_writer(struct pt_step *s)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, pt_writer, s), 0);
	join_bounded(t, "a per-thread writer");
	ck_assert_msg(s->r == CUDA_SUCCESS, "%s", ct_result_text(s->r));
	ck_assert_msg(s->st == XDM_OK, "%s", s->message);
}

START_TEST(per_thread_stream_is_served)
{
	static const char *const stacks[] = { "cuda_async", "pool | cuda_async",
					      "budget key=native-cuda limit=1G | cuda_async" };

	for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
		struct xdm_runtime *rt = runtime(stacks[i]);
		struct pt_step s = { .rt = rt, .value = P, .free_on = (void *)-1 };
		xdm_stream_id legacy, id;
		struct xdm_stats st;

		TU_OK(xdm_native_stream(rt, NULL, &legacy));
		TU_OK(xdm_native_stream(rt, CU_STREAM_PER_THREAD, &id));
		ck_assert_uint_eq(id, legacy);
		run_writer(&s);		/* from a thread with no context of its own */
		CU_OK(ct_drv.cuCtxSynchronize());
		ck_assert_uint_eq(ct_count_bytes((CUdeviceptr)s.ptr, BLOCK, P), BLOCK);
		TU_OK(xdm_native_free(rt, s.ptr, CU_STREAM_PER_THREAD));
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.allocs, 1);
		ck_assert_uint_eq(st.frees, 1);
		ck_assert_uint_eq(st.blocks_outstanding, 0);
		finish_runtime(rt);
	}
}
END_TEST

/*
 * Thread 1 writes P slowly on its per-thread stream, frees naming it and
 * exits; thread 2 allocates on its own per-thread stream and writes Q.
 * The held free keeps thread 1's block from thread 2 until thread 1's
 * write is done, so thread 2's bytes end as Q whichever block it got.
 * With free_on = NULL (the control) the free names the legacy stream,
 * which orders nothing thread 1 queued: the pool hands the block over at
 * once and the late P lands on top.
 */
static size_t ptds_handover(void *free_on, bool *same)
{
	struct xdm_runtime *rt = runtime("pool | cuda_async");
	struct tu_gate linger;
	struct pt_step one = { .rt = rt, .value = P, .spin = SPIN, .free_on = free_on,
			       .linger = &linger };
	struct pt_step two = { .rt = rt, .value = Q, .free_on = (void *)-1 };
	pthread_t t;
	size_t q;
	void *again;

	/*
	 * Thread 1 stays until thread 2 has written: whether the driver's
	 * teardown of its stream waits for the slow write is not this test's
	 * question (threads_exit_with_held_frees asks that).
	 */
	tu_gate_init(&linger);
	ck_assert_int_eq(pthread_create(&t, NULL, pt_writer, &one), 0);
	ck_assert_msg(tu_gate_wait_entered(&linger), "thread 1 never freed");
	run_writer(&two);
	tu_gate_open(&linger);
	join_bounded(t, "thread 1");
	tu_gate_destroy(&linger);
	ck_assert_msg(one.r == CUDA_SUCCESS, "%s", ct_result_text(one.r));
	ck_assert_msg(one.st == XDM_OK, "%s", one.message);
	*same = two.ptr == one.ptr;
	CU_OK(ct_drv.cuCtxSynchronize());
	q = ct_count_bytes((CUdeviceptr)two.ptr, BLOCK, Q);
	if (free_on == CU_STREAM_PER_THREAD && !*same) {
		/* Seen done at this allocation: thread 1's block is back. */
		TU_OK(xdm_native_allocate(rt, BLOCK, CU_STREAM_PER_THREAD, NULL, &again));
		ck_assert_ptr_eq(again, one.ptr);
		TU_OK(xdm_native_free(rt, again, CU_STREAM_PER_THREAD));
	}
	TU_OK(xdm_native_free(rt, two.ptr, CU_STREAM_PER_THREAD));
	finish_runtime(rt);
	return q;
}

START_TEST(per_thread_free_orders_the_next_user)
{
	bool same;

	ck_assert_uint_eq(ptds_handover(CU_STREAM_PER_THREAD, &same), BLOCK);
	ck_assert_msg(!same, "a block held for a 50 ms kernel was handed out before it ended");
}
END_TEST

START_TEST(control_per_thread_free_named_legacy_is_overwritten)
{
	bool same;

	ck_assert_uint_lt(ptds_handover(NULL, &same), BLOCK);
	ck_assert(same);
}
END_TEST

/*
 * Threads each allocate on their per-thread streams, write their own value,
 * check it, queue a slow write of garbage and free while it runs, many
 * times over: a block handed out before the garbage lands shows as wrong
 * bytes to its next user.  Each thread's last free is still held when it
 * exits.
 */
#define PT_THREADS 8
#define PT_ROUNDS 24
#define PT_BYTES (256 * 1024)

struct pt_churn {
	struct xdm_runtime *rt;
	uint8_t value;
	size_t wrong;
	enum xdm_status st;
	CUresult r;
	char message[512];
};

static void *pt_churn_run(void *arg)
{
	struct pt_churn *c = arg;

	c->r = ct_ctx_current();
	for (int i = 0; !c->r && !c->st && i < PT_ROUNDS; i++) {
		size_t bytes = PT_BYTES + (size_t)(i % 3) * 4096, same;
		void *p;

		c->st = xdm_native_allocate(c->rt, bytes, CU_STREAM_PER_THREAD, "churn", &p);
		if (c->st)
			break;
		c->r = ct_drv.cuMemsetD8Async((CUdeviceptr)p, c->value, bytes,
					      CU_STREAM_PER_THREAD);
		if (!c->r)
			c->r = ct_drv.cuStreamSynchronize(CU_STREAM_PER_THREAD);
		if (c->r)
			break;
		same = worker_count((CUdeviceptr)p, bytes, c->value, &c->r);
		if (c->r)
			break;
		c->wrong += bytes - same;
		c->r = ct_spin_fill(CU_STREAM_PER_THREAD, (CUdeviceptr)p, bytes, 0xee,
				    2 * CT_CYCLES_PER_MS);
		if (!c->r)
			c->st = xdm_native_free(c->rt, p, CU_STREAM_PER_THREAD);
	}
	snprintf(c->message, sizeof(c->message), "%s", xdm_last_error_message());
	return NULL;
}

START_TEST(threads_allocate_work_and_free_on_their_streams)
{
	static const char *const stacks[] = { "cuda_async", "pool | cuda_async" };

	for (size_t k = 0; k < sizeof(stacks) / sizeof(stacks[0]); k++) {
		struct xdm_runtime *rt = runtime(stacks[k]);
		struct pt_churn c[PT_THREADS];
		pthread_t t[PT_THREADS];
		struct xdm_stats st;

		for (int i = 0; i < PT_THREADS; i++) {
			c[i] = (struct pt_churn){ .rt = rt, .value = (uint8_t)(0x10 + i) };
			ck_assert_int_eq(pthread_create(&t[i], NULL, pt_churn_run, &c[i]), 0);
		}
		for (int i = 0; i < PT_THREADS; i++) {
			join_bounded(t[i], "a churning thread");
			ck_assert_msg(c[i].r == CUDA_SUCCESS, "%s: %s", stacks[k],
				      ct_result_text(c[i].r));
			ck_assert_msg(c[i].st == XDM_OK, "%s: %s", stacks[k], c[i].message);
			ck_assert_msg(c[i].wrong == 0, "%s: thread %d read %zu bytes another "
				      "thread's late write left", stacks[k], i, c[i].wrong);
		}
		CU_OK(ct_drv.cuCtxSynchronize());
		TU_OK(xdm_reap_pending(rt));
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.allocs, PT_THREADS * PT_ROUNDS);
		ck_assert_uint_eq(st.frees, PT_THREADS * PT_ROUNDS);
		ck_assert_uint_eq(st.blocks_outstanding, 0);
		ck_assert_uint_eq(st.bytes_outstanding, 0);
		finish_runtime(rt);
	}
}
END_TEST

/*
 * Threads free on their per-thread streams while a 100 ms kernel runs
 * there and exit at once: each must end (the hang of c44f699 was here),
 * and every block must come back to the stack once the kernels are done.
 */
START_TEST(threads_exit_with_held_frees)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	struct pt_step s[4];
	pthread_t t[4];
	struct xdm_stats st;
	void *p;

	for (int i = 0; i < 4; i++) {
		s[i] = (struct pt_step){ .rt = rt, .value = P, .spin = 2 * SPIN,
					 .free_on = CU_STREAM_PER_THREAD };
		ck_assert_int_eq(pthread_create(&t[i], NULL, pt_writer, &s[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		join_bounded(t[i], "a thread that exits with a held free");
		ck_assert_msg(s[i].r == CUDA_SUCCESS, "%s", ct_result_text(s[i].r));
		ck_assert_msg(s[i].st == XDM_OK, "%s", s[i].message);
	}
	/* Their events are asked after their streams are gone. */
	TU_OK(xdm_native_allocate(rt, BLOCK, CU_STREAM_PER_THREAD, NULL, &p));
	TU_OK(xdm_native_free(rt, p, CU_STREAM_PER_THREAD));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.frees, 5);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	finish_runtime(rt);		/* reap: every held block went back */
}
END_TEST

/*
 * A free on a per-thread stream that is being captured into a graph is
 * part of the capture: freed at once, no event recorded or queried there,
 * and the capture ends well.
 */
START_TEST(per_thread_free_during_capture)
{
	struct xdm_runtime *rt = runtime("pool trim_ms=0 | cuda_direct");
	CUgraphExec exec;
	CUgraph g;
	void *p;

	TU_OK(xdm_native_allocate(rt, BLOCK, CU_STREAM_PER_THREAD, NULL, &p));
	CU_OK(ct_drv.cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CU_OK(ct_drv.cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED));
	CU_OK(ct_fill(CU_STREAM_PER_THREAD, (CUdeviceptr)p, BLOCK, P));
	TU_OK(xdm_native_free(rt, p, CU_STREAM_PER_THREAD));
	CU_OK(ct_drv.cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
	CU_OK(ct_drv.cuGraphInstantiateWithFlags(&exec, g, 0));
	CU_OK(ct_drv.cuGraphLaunch(exec, CU_STREAM_PER_THREAD));
	CU_OK(ct_drv.cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CU_OK(ct_drv.cuGraphExecDestroy(exec));
	CU_OK(ct_drv.cuGraphDestroy(g));
	CU_OK(ct_drv.cuCtxSynchronize());
	TU_OK(xdm_reap_pending(rt));
	TU_OK(xdm_runtime_destroy(rt));
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
	tcase_add_test(tc, per_thread_stream_is_served);
	tcase_add_test(tc, per_thread_free_orders_the_next_user);
	tcase_add_test(tc, threads_allocate_work_and_free_on_their_streams);
	tcase_add_test(tc, threads_exit_with_held_frees);
	tcase_add_test(tc, per_thread_free_during_capture);
	tcase_add_test(tc, free_naming_a_side_stream_waits_for_it);
	if (!ct_under_sanitizer()) {
		tcase_add_test(tc, control_per_thread_free_named_legacy_is_overwritten);
		tcase_add_test(tc, control_free_naming_legacy_is_overwritten);
	}
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "cuda_async", native_cuda_suite, 120);
}
