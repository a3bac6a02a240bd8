/* SPDX-License-Identifier: MIT */
/*
 * check_native_cuda.c - the framework entry on a real GPU: the legacy
 * default stream served from a thread that has no CUDA context (PyTorch's
 * autograd threads), the per-thread default stream served through the
 * legacy stream (a free naming it orders the block's next user on another
 * thread, eight threads freeing on their own streams at once), and a
 * free by pointer that names a side stream waiting for that stream's
 * kernel.  Kernels that spin for tens of milliseconds, or wait at a gate,
 * before they write make a missing order show up as wrong bytes; the
 * controls show that the same sequences without the order do go wrong.
 * Where threads must meet, a gate or a join says when: no result depends
 * on how they are scheduled.  Worker threads never assert (CK_NOFORK:
 * check's jump out of a test is the test thread's); the test thread
 * asserts what they kept, after a bounded join, so that a thread hung in
 * its exit fails the test rather than hanging it.
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
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

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

/* ---- the per-thread default stream -------------------------------------------- */

#define PT_JOIN_S 30
#define PT_THREADS 8

/* A thread that did not end says where it is, from its own signal handler. */
static void say_where(int sig)
{
	void *frames[64];
	int n = backtrace(frames, 64);

	(void)sig;
	backtrace_symbols_fd(frames, n, STDOUT_FILENO);
}

static void join_bounded(pthread_t t, const char *what)
{
	struct timespec until;
	void *warm[1];

	backtrace(warm, 1);	/* loads the unwinder now, not in the handler */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += PT_JOIN_S;
	if (pthread_timedjoin_np(t, NULL, &until) == 0)
		return;
	printf("%s did not end within %d s; where it is:\n", what, PT_JOIN_S);
	signal(SIGUSR1, say_where);
	pthread_kill(t, SIGUSR1);
	sleep(2);
	ck_abort_msg("%s did not end within %d s: hung in its exit?", what, PT_JOIN_S);
}

/* One thread's turn on its per-thread stream. */
struct pt_turn {
	struct xdm_runtime *rt;
	uint8_t value;
	uint64_t spin;		/* cycles before the write; 0: write at once */
	struct tu_gate *gate;	/* if set, the write waits there on the stream */
	enum { PT_KEEP, PT_FREE, PT_RELEASE } end;	/* what becomes of the block */
	struct tu_gate *linger;	/* if set, the thread waits there before it exits */
	void *ptr;		/* out */
	enum xdm_status st;
	CUresult r;
	char message[512];
};

/* Allocate on the per-thread stream, write there, free (or not), return. */
static void *pt_thread(void *arg)
{
	struct pt_turn *t = arg;

	/* No ct_ctx_current(): a fresh thread without a context, as in Python. */
	t->st = xdm_native_allocate(t->rt, BLOCK, CU_STREAM_PER_THREAD, "ptds", &t->ptr);
	if (t->st)
		goto out;
	t->r = ct_ctx_current();
	if (!t->r && t->gate)
		t->r = ct_drv.cuLaunchHostFunc(CU_STREAM_PER_THREAD, tu_gate_run, t->gate);
	if (!t->r)
		t->r = t->spin ? ct_spin_fill(CU_STREAM_PER_THREAD, (CUdeviceptr)t->ptr, BLOCK,
					      t->value, t->spin) :
				 ct_fill(CU_STREAM_PER_THREAD, (CUdeviceptr)t->ptr, BLOCK,
					 t->value);
	if (t->r)
		goto out;
	if (t->end == PT_FREE)
		t->st = xdm_native_free(t->rt, t->ptr, CU_STREAM_PER_THREAD);
	else if (t->end == PT_RELEASE)
		t->st = xdm_native_release(t->rt, t->ptr);
out:
	snprintf(t->message, sizeof(t->message), "%s", xdm_last_error_message());
	if (t->linger)
		tu_gate_run(t->linger);
	/*
	 * The driver (580, H200) may hang a thread in its exit while the
	 * thread's per-thread stream still runs work, xdm or no xdm: a plain
	 * CUDA program does (doc/design.md).  So the stream is done first.
	 */
	if (ct_ctx_current() == CUDA_SUCCESS) {
		CUresult r = ct_drv.cuStreamSynchronize(CU_STREAM_PER_THREAD);

		if (!t->r)
			t->r = r;
	}
	return NULL;
}

static void pt_start(struct pt_turn *t, pthread_t *th)
{
	ck_assert_int_eq(pthread_create(th, NULL, pt_thread, t), 0);
}

static void pt_check(struct pt_turn *t)
{
	ck_assert_msg(t->r == CUDA_SUCCESS, "%s", ct_result_text(t->r));
	ck_assert_msg(t->st == XDM_OK, "%s", t->message);
}

static void pt_run(struct pt_turn *t)
{
	pthread_t th;

	pt_start(t, &th);
	join_bounded(th, "a per-thread stream's thread");
	pt_check(t);
}

START_TEST(per_thread_stream_is_served)
{
	static const char *const stacks[] = { "cuda_async", "pool | cuda_async", "pool | cuda_vmm",
					      "budget key=native-cuda limit=1G | cuda_async" };

	for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
		struct xdm_runtime *rt = runtime(stacks[i]);
		uint32_t count = xdm_stream_count(rt);
		struct pt_turn t = { .rt = rt, .value = P, .end = PT_KEEP };
		xdm_stream_id legacy, id;
		struct xdm_stats st;
		struct xdm_block b;

		printf("per_thread_stream_is_served: %s\n", stacks[i]);

		/* No id of its own: work ordered by the legacy id would miss it. */
		ck_assert_int_eq(xdm_native_stream(rt, CU_STREAM_PER_THREAD, &id),
				 XDM_E_STREAM_MISUSE);
		ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "no id of its own"));
		pt_run(&t);
		CU_OK(ct_drv.cuCtxSynchronize());
		ck_assert_uint_eq(ct_count_bytes((CUdeviceptr)t.ptr, BLOCK, P), BLOCK);
		/* Its blocks are the legacy stream's, the one stream it added. */
		TU_OK(xdm_native_stream(rt, NULL, &legacy));
		TU_OK(xdm_native_lookup(rt, t.ptr, &b));
		ck_assert_uint_eq(b.stream, legacy);
		ck_assert_uint_eq(xdm_stream_count(rt), count + 1);
		TU_OK(xdm_native_record_use(rt, t.ptr, CU_STREAM_PER_THREAD));
		TU_OK(xdm_native_free(rt, t.ptr, CU_STREAM_PER_THREAD));
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.allocs, 1);
		ck_assert_uint_eq(st.frees, 1);
		ck_assert_uint_eq(st.blocks_outstanding, 0);
		finish_runtime(rt);
	}
}
END_TEST

/*
 * Thread 1 writes P on its per-thread stream behind a gate and gives the
 * block back; thread 2 gets the same block from the pool and writes Q on
 * its own per-thread stream; then the gate opens.  A free naming the
 * per-thread stream marks thread 1's work on the legacy stream, which
 * thread 2's stream follows: P, then Q, whatever the host's timing.  The
 * control gives the block back with xdm_native_release() (the legacy
 * stream, no mark): Q runs at once and the late P lands on top.
 */
static size_t ptds_handover(bool free_on_ptds)
{
	struct xdm_runtime *rt = runtime("pool tcache=0 | cuda_async");
	struct tu_gate gate, linger1, linger2;
	struct pt_turn one = { .rt = rt, .value = P, .gate = &gate, .linger = &linger1,
			       .end = free_on_ptds ? PT_FREE : PT_RELEASE };
	struct pt_turn two = { .rt = rt, .value = Q, .linger = &linger2, .end = PT_KEEP };
	pthread_t th1, th2;
	size_t q;

	/*
	 * Both threads stay until the gate is open, then synchronize their
	 * streams and end: thread 2's write may wait behind thread 1's gate.
	 */
	printf("ptds_handover: %s\n", free_on_ptds ? "free naming it" : "control");
	tu_gate_init(&gate);
	tu_gate_init(&linger1);
	tu_gate_init(&linger2);
	pt_start(&one, &th1);
	ck_assert_msg(tu_gate_wait_entered(&linger1), "thread 1 never gave its block back");
	ck_assert_msg(tu_gate_wait_entered(&gate), "thread 1's stream never reached its gate");
	pt_start(&two, &th2);
	ck_assert_msg(tu_gate_wait_entered(&linger2), "thread 2 never wrote");
	tu_gate_open(&gate);
	tu_gate_open(&linger1);
	tu_gate_open(&linger2);
	join_bounded(th1, "thread 1");
	join_bounded(th2, "thread 2");
	pt_check(&one);
	pt_check(&two);
	CU_OK(ct_drv.cuCtxSynchronize());
	ck_assert(!tu_gate_timed_out(&gate) && !tu_gate_timed_out(&linger1) &&
		  !tu_gate_timed_out(&linger2));
	tu_gate_destroy(&gate);
	tu_gate_destroy(&linger1);
	tu_gate_destroy(&linger2);
	ck_assert_ptr_eq(two.ptr, one.ptr);
	q = ct_count_bytes((CUdeviceptr)two.ptr, BLOCK, Q);
	TU_OK(xdm_native_free(rt, two.ptr, CU_STREAM_PER_THREAD));
	finish_runtime(rt);
	return q;
}

START_TEST(per_thread_free_orders_the_next_user)
{
	ck_assert_uint_eq(ptds_handover(true), BLOCK);
}
END_TEST

START_TEST(control_release_without_mark_is_overwritten)
{
	ck_assert_uint_lt(ptds_handover(false), BLOCK);
}
END_TEST

/*
 * Threads that each allocate, write slowly and free naming their
 * per-thread stream, all at once, in every stack: every free is served,
 * every thread ends (after its stream is done), and every block comes back.
 */
START_TEST(threads_free_on_their_streams_at_once)
{
	static const char *const stacks[] = { "cuda_async", "pool | cuda_async", "pool | cuda_vmm" };

	for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
		struct xdm_runtime *rt = runtime(stacks[i]);
		struct pt_turn t[PT_THREADS];
		pthread_t th[PT_THREADS];

		printf("threads_free_on_their_streams_at_once: %s\n", stacks[i]);

		for (int k = 0; k < PT_THREADS; k++) {
			t[k] = (struct pt_turn){ .rt = rt, .value = P, .spin = SPIN,
						 .end = PT_FREE };
			pt_start(&t[k], &th[k]);
		}
		for (int k = 0; k < PT_THREADS; k++) {
			join_bounded(th[k], stacks[i]);
			pt_check(&t[k]);
		}
		finish_runtime(rt);
	}
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
	tcase_add_test(tc, threads_free_on_their_streams_at_once);
	tcase_add_test(tc, free_naming_a_side_stream_waits_for_it);
	if (!ct_under_sanitizer()) {
		tcase_add_test(tc, control_free_naming_legacy_is_overwritten);
		tcase_add_test(tc, control_release_without_mark_is_overwritten);
	}
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "cuda_async", native_cuda_suite, 120);
}
