/* SPDX-License-Identifier: MIT */
/*
 * check_cuda.c - the stream-ordered contract on a real GPU: the counterpart
 * of check_tracking.c, with kernels on CUDA streams instead of host steps.
 * Kernels that spin for tens of milliseconds before they touch memory make
 * any missing wait show up as wrong bytes, and every outcome is read back
 * from the device.
 *
 * CUDA state does not survive fork(), so the whole suite runs in one
 * process (CK_NOFORK) and the probe for a GPU happens in that process too:
 * no driver, or a cuda platform that answers NO_DEVICE, is a skip (77).
 * Tests assert only from the main thread: a failed check longjmps, which
 * must never happen on a worker thread.  With no fork there is no per-test
 * timeout either, so a watchdog ends a suite that hangs on a wait; and a
 * lock file keeps two GPU suites (the plain run and the sanitizer gate's)
 * from sharing the GPU at once.
 *
 *   check_cuda            run the suite
 *   check_cuda --probe    exit 0 if the suite would run here, 77 if not
 *   check_cuda --ptx      print the kernels' PTX (to validate with ptxas)
 *
 * Environment:
 *   XDM_TEST_SCALE       scales the churn counts (default 1.0)
 *   XDM_TEST_SANITIZER   set by sanitizer_gate.sh: leave out the tests that
 *                        make the driver fail, or race, on purpose
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <xdm/xdm.h>

#include "tests/lib/cudacheck.h"
#include "tests/lib/random_churn.h"
#include "tests/lib/testutil.h"

#define MIB ((size_t)1 << 20)
#define BLOCK MIB				/* bytes of the blocks under test */
#define SPIN (50 * CT_CYCLES_PER_MS)		/* about 50 ms on an H200 */

/* Byte patterns: distinct, and none is 0 or what fresh memory tends to hold. */
enum { P = 0xa1, Q = 0x5c, R = 0x3e, A = 0x77, B = 0xc4 };

static double test_scale = 1.0;
static bool under_sanitizer;

static struct xdm_runtime *runtime(const char *backend)
{
	struct xdm_runtime *rt;

	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", backend, &rt));
	return rt;
}

/* Copy the first n bytes of b back; the caller frees. */
static uint8_t *read_back(const struct xdm_block *b, size_t n)
{
	uint8_t *host = malloc(n);

	ck_assert_ptr_nonnull(host);
	CU_OK(ct_drv.cuMemcpyDtoH(host, ct_dev(b), n));
	return host;
}

/* How many of the first n bytes of b hold v. */
static size_t count_bytes(const struct xdm_block *b, size_t n, uint8_t v)
{
	uint8_t *host = read_back(b, n);
	size_t same = 0;

	for (size_t i = 0; i < n; i++)
		same += host[i] == v;
	free(host);
	return same;
}

/* Every one of the first n bytes of b must hold v. */
static void expect_bytes(const struct xdm_block *b, size_t n, uint8_t v, const char *what)
{
	uint8_t *host = read_back(b, n);
	size_t bad = 0, first = 0;
	unsigned int seen = v;

	for (size_t i = 0; i < n; i++) {
		if (host[i] == v)
			continue;
		if (!bad++) {
			first = i;
			seen = host[i];
		}
	}
	free(host);
	ck_assert_msg(bad == 0, "%s: %zu of %zu bytes are not 0x%02x (byte %zu is 0x%02x)", what,
		      bad, n, v, first, seen);
}

static void finish_runtime(struct xdm_runtime *rt)
{
	ct_sync_all(rt);
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

/* ---- a free after a cross-stream write ---------------------------------- */

struct reuse {
	bool reused;		/* B was handed A's address */
	size_t stale;		/* bytes of B holding the old write P */
	size_t wrong;		/* bytes of B not holding its own fill Q */
};

/*
 * A is allocated on stream 0; stream 1 writes P into it after a spin; A is
 * freed on stream 0 and B of the same size allocated there, which the pool
 * normally answers with A's address; stream 0 fills B with Q at once.  With
 * the write declared (tracked), the free waits for it and so does B's fill:
 * B holds Q.  Without, the late write lands in B.
 *
 * Untracked (the control), stream 1 also stands at a gate until B's fill
 * has run, so the write lands in B whenever B has A's address, however
 * long the host thread is kept off its core between the launches: the spin
 * alone would leave that to timing.  Tracked, a gate could not open before
 * B's fill runs (the fill waits for the write); the spin makes a missing
 * wait likely to show, and a correct order never fails.
 */
static struct reuse free_after_write(struct xdm_runtime *rt, bool tracked)
{
	struct xdm_block a, b;
	struct xdm_block_id id;
	struct tu_gate gate;
	struct reuse r;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "a", &a));
	id = xdm_block_id_of(&a);
	tu_gate_init(&gate);
	if (tracked)
		TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	else
		tu_gate_hold(rt, 1, &gate);
	CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&a), BLOCK, P, SPIN));
	if (tracked)
		TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_allocate(rt, BLOCK, 0, "b", &b));
	r.reused = b.ptr == id.ptr;
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b), BLOCK, Q));
	if (!tracked) {
		TU_OK(xdm_stream_synchronize(rt, 0));
		tu_gate_open(&gate);
	}
	ct_sync_all(rt);
	tu_gate_destroy(&gate);
	r.stale = count_bytes(&b, BLOCK, P);
	r.wrong = BLOCK - count_bytes(&b, BLOCK, Q);
	TU_OK(xdm_deallocate(rt, &b));
	ct_sync_all(rt);
	TU_OK(xdm_reap_pending(rt));
	return r;
}

START_TEST(free_after_cross_stream_write_keeps_the_next_block_clean)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	int reused = 0;

	for (int i = 0; i < 3; i++) {
		uint64_t before = ct_waits(rt);
		struct reuse r = free_after_write(rt, true);

		/* Stream 1's write behind stream 0 (the allocation), then the
		 * free on stream 0 behind stream 1's write. */
		ck_assert_uint_eq(ct_waits(rt) - before, 2);
		ck_assert_msg(r.wrong == 0,
			      "attempt %d: the new block (%s address) has %zu bytes that are not its "
			      "own fill, %zu of them from the freed block's late write",
			      i + 1, r.reused ? "the same" : "another", r.wrong, r.stale);
		reused += r.reused;
	}
	printf("tracked free after a cross-stream write: address reused %d of 3 times, "
	       "the new block was clean every time\n", reused);
	finish_runtime(rt);
}
END_TEST

/*
 * The control: the same sequence without prepare/finish must corrupt B when
 * the address comes back, or the test above could not see a missing wait.
 * It races on purpose, so the sanitizer gate leaves it out.
 */
START_TEST(control_untracked_free_lets_the_write_land)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	int reused = 0, corrupted = 0;

	for (int i = 0; i < 3; i++) {
		struct reuse r = free_after_write(rt, false);

		reused += r.reused;
		corrupted += r.stale > 0;
	}
	printf("control, untracked free after a cross-stream write: address reused %d of 3 "
	       "times, new block corrupted %d of 3 times\n", reused, corrupted);
	ck_assert_msg(reused > 0,
		      "cuda_async never handed a freed address to the next allocation on its stream "
		      "(0 of 3): no test here can show a missing wait by corruption");
	ck_assert_msg(corrupted > 0,
		      "the address came back %d of 3 times, yet the unordered late write never "
		      "landed in the new block: the free-after-write test is not sensitive", reused);
	finish_runtime(rt);
}
END_TEST

/*
 * A use by another runtime's stream (xdm_prepare/finish_peer_use): the work
 * of a second runtime of this device, on a stream of its own, writes a
 * block of the first; the block is freed and its address taken again at
 * once, and the first runtime's stream fills it.  The free waits on the
 * other runtime's event, so the fill stays.  On one GPU this is the path
 * a second GPU's kernel takes (check_peer_cuda runs that on two): events
 * from the user's pool, recorded in its context, waited for by the owner.
 */
START_TEST(a_write_by_another_runtime_is_waited_for)
{
	struct xdm_runtime *rt = runtime("cuda_async"), *other = runtime("cuda_async");
	int reused = 0;

	for (int i = 0; i < 3; i++) {
		uint64_t before = ct_waits(rt), other_before = ct_waits(other);
		struct xdm_block a, b;
		struct xdm_block_id id;
		size_t wrong;

		TU_OK(xdm_allocate(rt, BLOCK, 0, "a", &a));
		id = xdm_block_id_of(&a);
		TU_OK(xdm_prepare_peer_use(rt, id, other, 1, XDM_ACCESS_WRITE));
		CU_OK(ct_spin_fill(ct_stream(other, 1), ct_dev(&a), BLOCK, P, SPIN));
		TU_OK(xdm_finish_peer_use(rt, id, other, 1, XDM_ACCESS_WRITE));
		/* Its event is in a's keeping: the other runtime may not go yet. */
		ck_assert_int_eq(xdm_runtime_destroy(other), XDM_E_INVALID);
		TU_OK(xdm_deallocate(rt, &a));
		TU_OK(xdm_allocate(rt, BLOCK, 0, "b", &b));
		reused += b.ptr == id.ptr;
		CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b), BLOCK, Q));
		ct_sync_all(rt);
		ct_sync_all(other);
		/* The other stream behind the allocation; the free behind the write. */
		ck_assert_uint_eq(ct_waits(other) - other_before, 1);
		ck_assert_uint_eq(ct_waits(rt) - before, 1);
		wrong = BLOCK - count_bytes(&b, BLOCK, Q);
		ck_assert_msg(wrong == 0, "attempt %d: %zu bytes of the new block (%s address) are "
			      "not its own fill", i + 1, wrong, b.ptr == id.ptr ? "the same" :
			      "another");
		TU_OK(xdm_deallocate(rt, &b));
	}
	printf("a write by another runtime's stream: address reused %d of 3 times, the new "
	       "block was clean every time\n", reused);
	finish_runtime(other);
	finish_runtime(rt);
}
END_TEST

/* ---- Read, Write and ReadWrite ------------------------------------------ */

START_TEST(read_waits_for_the_last_cross_stream_write)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	struct xdm_block blk, out;
	struct xdm_block_id id;
	uint64_t before;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "blk", &blk));
	TU_OK(xdm_allocate(rt, BLOCK, 2, "out", &out));
	id = xdm_block_id_of(&blk);
	/* Starting contents, settled outside the contract. */
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&blk), BLOCK, 0));
	CU_OK(ct_fill(ct_stream(rt, 2), ct_dev(&out), BLOCK, 0));
	ct_sync_all(rt);

	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&blk), BLOCK, P, SPIN));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	before = ct_waits(rt);
	TU_OK(xdm_prepare_block_use(rt, id, 2, XDM_ACCESS_READ));
	ck_assert_uint_eq(ct_waits(rt) - before, 1);
	CU_OK(ct_copy(ct_stream(rt, 2), ct_dev(&out), ct_dev(&blk), BLOCK));
	TU_OK(xdm_finish_block_use(rt, id, 2, XDM_ACCESS_READ));
	ct_sync_all(rt);
	expect_bytes(&out, BLOCK, P, "the reader's copy");
	expect_bytes(&blk, BLOCK, P, "the block");
	TU_OK(xdm_deallocate(rt, &out));
	TU_OK(xdm_deallocate(rt, &blk));
	finish_runtime(rt);
}
END_TEST

START_TEST(write_waits_for_every_outstanding_read)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	struct xdm_block blk, out1, out2;
	struct xdm_block_id id;
	uint64_t before;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "blk", &blk));
	TU_OK(xdm_allocate(rt, BLOCK, 1, "out1", &out1));
	TU_OK(xdm_allocate(rt, BLOCK, 2, "out2", &out2));
	id = xdm_block_id_of(&blk);
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&blk), BLOCK, A));
	ct_sync_all(rt);

	/* Two slow readers, the second shorter, then a writer on a third stream. */
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ));
	CU_OK(ct_spin_copy(ct_stream(rt, 1), ct_dev(&out1), ct_dev(&blk), BLOCK, SPIN));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_READ));
	TU_OK(xdm_prepare_block_use(rt, id, 2, XDM_ACCESS_READ));
	CU_OK(ct_spin_copy(ct_stream(rt, 2), ct_dev(&out2), ct_dev(&blk), BLOCK, SPIN / 2));
	TU_OK(xdm_finish_block_use(rt, id, 2, XDM_ACCESS_READ));
	before = ct_waits(rt);
	TU_OK(xdm_prepare_block_use(rt, id, 3, XDM_ACCESS_WRITE));
	/* Both readers, and stream 0's work (the block's first write). */
	ck_assert_uint_eq(ct_waits(rt) - before, 3);
	CU_OK(ct_fill(ct_stream(rt, 3), ct_dev(&blk), BLOCK, B));
	TU_OK(xdm_finish_block_use(rt, id, 3, XDM_ACCESS_WRITE));
	ct_sync_all(rt);
	/* Both readers saw the old bytes: the writer waited for them. */
	expect_bytes(&out1, BLOCK, A, "the slow reader's copy");
	expect_bytes(&out2, BLOCK, A, "the shorter reader's copy");
	expect_bytes(&blk, BLOCK, B, "the block after the write");
	TU_OK(xdm_deallocate(rt, &out1));
	TU_OK(xdm_deallocate(rt, &out2));
	TU_OK(xdm_deallocate(rt, &blk));
	finish_runtime(rt);
}
END_TEST

START_TEST(read_write_waits_like_a_write)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	struct xdm_block blk, out, rd;
	struct xdm_block_id id;
	uint64_t before;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "blk", &blk));
	TU_OK(xdm_allocate(rt, BLOCK, 2, "out", &out));
	TU_OK(xdm_allocate(rt, BLOCK, 1, "rd", &rd));
	id = xdm_block_id_of(&blk);
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&blk), BLOCK, 0));
	ct_sync_all(rt);

	/* A ReadWrite waits for the last cross-stream write... */
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(ct_stream(rt, 1), ct_dev(&blk), BLOCK, P, SPIN));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	before = ct_waits(rt);
	TU_OK(xdm_prepare_block_use(rt, id, 2, XDM_ACCESS_READ_WRITE));
	ck_assert_uint_eq(ct_waits(rt) - before, 1);
	CU_OK(ct_copy(ct_stream(rt, 2), ct_dev(&out), ct_dev(&blk), BLOCK));
	CU_OK(ct_fill(ct_stream(rt, 2), ct_dev(&blk), BLOCK, Q));
	TU_OK(xdm_finish_block_use(rt, id, 2, XDM_ACCESS_READ_WRITE));

	/* ...and, like a write, for the reads since: stream 1 reads Q slowly. */
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ));
	CU_OK(ct_spin_copy(ct_stream(rt, 1), ct_dev(&rd), ct_dev(&blk), BLOCK, SPIN));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_READ));
	before = ct_waits(rt);
	TU_OK(xdm_prepare_block_use(rt, id, 3, XDM_ACCESS_READ_WRITE));
	/* Stream 2's ReadWrite (the last write) and stream 1's read. */
	ck_assert_uint_eq(ct_waits(rt) - before, 2);
	CU_OK(ct_fill(ct_stream(rt, 3), ct_dev(&blk), BLOCK, R));
	TU_OK(xdm_finish_block_use(rt, id, 3, XDM_ACCESS_READ_WRITE));
	ct_sync_all(rt);
	expect_bytes(&out, BLOCK, P, "what the first ReadWrite read");
	expect_bytes(&rd, BLOCK, Q, "what the slow reader read");
	expect_bytes(&blk, BLOCK, R, "the block after the second ReadWrite");
	TU_OK(xdm_deallocate(rt, &out));
	TU_OK(xdm_deallocate(rt, &rd));
	TU_OK(xdm_deallocate(rt, &blk));
	finish_runtime(rt);
}
END_TEST

START_TEST(same_stream_uses_add_no_waits)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	struct xdm_block blk, out;
	struct xdm_block_id id;

	TU_OK(xdm_allocate(rt, BLOCK, 0, "blk", &blk));
	TU_OK(xdm_allocate(rt, BLOCK, 0, "out", &out));
	id = xdm_block_id_of(&blk);
	/* A write and a read on the allocation stream: stream order suffices. */
	TU_OK(xdm_prepare_block_use(rt, id, 0, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(ct_stream(rt, 0), ct_dev(&blk), BLOCK, P, SPIN / 5));
	TU_OK(xdm_finish_block_use(rt, id, 0, XDM_ACCESS_WRITE));
	TU_OK(xdm_prepare_block_use(rt, id, 0, XDM_ACCESS_READ));
	CU_OK(ct_copy(ct_stream(rt, 0), ct_dev(&out), ct_dev(&blk), BLOCK));
	TU_OK(xdm_finish_block_use(rt, id, 0, XDM_ACCESS_READ));
	ck_assert_uint_eq(ct_waits(rt), 0);
	/* A write on stream 1 must follow stream 0's write and its read. */
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	ck_assert_uint_eq(ct_waits(rt), 2);
	CU_OK(ct_fill(ct_stream(rt, 1), ct_dev(&blk), BLOCK, Q));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE));
	/* A read after a write on the same stream adds nothing. */
	TU_OK(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ));
	TU_OK(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_READ));
	ck_assert_uint_eq(ct_waits(rt), 2);
	ct_sync_all(rt);
	expect_bytes(&out, BLOCK, P, "the same-stream read");
	expect_bytes(&blk, BLOCK, Q, "the block after stream 1's write");
	TU_OK(xdm_deallocate(rt, &out));
	TU_OK(xdm_deallocate(rt, &blk));
	finish_runtime(rt);
}
END_TEST

/* ---- many threads ------------------------------------------------------- */

enum { CHURN_THREADS = 16, CHURN_LIVE = 8 };

/* 256 B to 64 KiB. */
static size_t churn_size(uint64_t r)
{
	return 256 + (size_t)(r % (64 * 1024 - 256 + 1));
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void churn(const char *backend, long per_thread, bool cross)
{
	struct xdm_runtime *rt = runtime(backend);
	struct tu_churn c[CHURN_THREADS];
	pthread_t t[CHURN_THREADS];
	struct xdm_stats st;
	struct timespec t0;
	long iterations = (long)((double)per_thread * test_scale);
	uint64_t cross_uses = 0;

	if (iterations < 1)
		iterations = 1;
	ck_assert_uint_ge(xdm_stream_count(rt), CHURN_THREADS);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/*
	 * The threads make no driver call of their own, on purpose: the
	 * runtime must set the context it needs.  A declared write goes to
	 * the next thread's stream.
	 */
	for (int i = 0; i < CHURN_THREADS; i++) {
		c[i] = (struct tu_churn){ .rt = rt, .stream = (xdm_stream_id)i,
					  .pairs = iterations, .live = CHURN_LIVE,
					  .size = churn_size,
					  .cross_stream = cross ? (i + 1) % CHURN_THREADS : -1 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, tu_churn_run, &c[i]), 0);
	}
	for (int i = 0; i < CHURN_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < CHURN_THREADS; i++) {
		ck_assert_msg(c[i].st == XDM_OK, "%s, thread %d: %s (%s)", backend, i,
			      xdm_strerror(c[i].st), c[i].msg);
		cross_uses += (uint64_t)c[i].cross_uses;
	}
	TU_OK(xdm_reap_pending(rt));
	xdm_runtime_stats(rt, &st);
	printf("%s: %d threads x %ld allocate/free pairs in %.2f s\n", backend, CHURN_THREADS,
	       iterations, seconds_since(&t0));
	ck_assert_uint_eq(st.allocs, (uint64_t)CHURN_THREADS * (uint64_t)iterations);
	ck_assert_uint_eq(st.frees, st.allocs);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	/* Each declared write made two waits: behind its block's stream (the
	 * first use elsewhere), and its block's free behind it. */
	ck_assert_uint_eq(st.waits_queued, 2 * cross_uses);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}

START_TEST(sixteen_threads_churn_on_cuda_async)
{
	churn("cuda_async", 100000, true);
}
END_TEST

/* cuMemFree synchronizes the device: a tenth of the count keeps it brief. */
START_TEST(sixteen_threads_churn_on_cuda_direct)
{
	churn("cuda_direct", 10000, false);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(stale_block_id_is_use_after_free)
{
	struct xdm_runtime *rt = runtime("cuda_async");
	struct xdm_block a, b, copy;
	struct xdm_block_id id;

	TU_OK(xdm_allocate(rt, 4096, 0, "a", &a));
	id = xdm_block_id_of(&a);
	TU_OK(xdm_deallocate(rt, &a));
	ct_sync_all(rt);
	TU_OK(xdm_reap_pending(rt));
	ck_assert_int_eq(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, id.generation);
	ck_assert_int_eq(xdm_block_lookup(rt, id, &copy), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, id.generation);
	ck_assert_int_eq(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_WRITE), XDM_E_USE_AFTER_FREE);

	/* The address handed out again: the old id is still stale. */
	TU_OK(xdm_allocate(rt, 4096, 0, "b", &b));
	ck_assert_uint_gt(b.generation, id.generation);
	ck_assert_int_eq(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, id.generation);
	printf("stale id, %s: %s\n",
	       b.ptr == id.ptr ? "its address reissued" : "the next block elsewhere",
	       xdm_last_error_message());
	ck_assert_int_eq(xdm_block_lookup(rt, id, &copy), XDM_E_USE_AFTER_FREE);
	TU_OK(xdm_block_lookup(rt, xdm_block_id_of(&b), &copy));
	ck_assert_uint_eq(copy.generation, b.generation);
	TU_OK(xdm_deallocate(rt, &b));
	finish_runtime(rt);
}
END_TEST

/*
 * Twice the card's memory: the driver refuses, the runtime reports the
 * driver's own words, and nothing is counted as allocated.
 */
static void out_of_memory(const char *backend)
{
	struct xdm_runtime *rt = runtime(backend);
	struct xdm_device_info info;
	struct xdm_stats before, after;
	struct xdm_error err;
	struct xdm_block b;
	size_t free0, free1, total;
	enum xdm_status st;

	TU_OK(xdm_runtime_device(rt, &info));
	ck_assert_uint_gt(info.total_bytes, 0);
	CU_OK(ct_drv.cuMemGetInfo(&free0, &total));
	xdm_runtime_stats(rt, &before);
	st = xdm_allocate(rt, (size_t)info.total_bytes * 2, 0, "too much", &b);
	err = *xdm_last_error();
	printf("%s, %" PRIu64 " bytes asked: %s\n", backend, info.total_bytes * 2, err.message);
	ck_assert_msg(st == XDM_E_DRIVER, "%s: %s (%s), not a driver error", backend,
		      xdm_strerror(st), err.message);
	ck_assert_int_eq(err.code, XDM_E_DRIVER);
	ck_assert_int_ne(err.driver_code, 0);
	ck_assert_msg(strstr(err.message, "CUDA_ERROR_OUT_OF_MEMORY") ||
		      strstr(err.message, "out of memory"),
		      "%s: the message does not carry the driver's words: %s", backend, err.message);
	xdm_runtime_stats(rt, &after);
	ck_assert_uint_eq(after.bytes_outstanding, before.bytes_outstanding);
	ck_assert_uint_eq(after.blocks_outstanding, before.blocks_outstanding);
	ck_assert_uint_eq(after.allocs, before.allocs);
	ck_assert_uint_eq(after.failures, before.failures + 1);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	/*
	 * The refusal must not leave the card's memory held: a pool that kept
	 * its reservation for the attempt would starve every other process.
	 * Other test programs may share the GPU under a parallel make check,
	 * but they hold megabytes, hence the 1 GiB of slack.
	 */
	CU_OK(ct_drv.cuMemGetInfo(&free1, &total));
	printf("%s: free device memory %zu bytes before the refusal, %zu after\n", backend,
	       free0, free1);
	ck_assert_msg(free1 + ((size_t)1 << 30) >= free0,
		      "%s: the refusal left %zu bytes of the device held (free %zu before, %zu "
		      "after)", backend, free0 - free1, free0, free1);

	/* The runtime is still usable. */
	TU_OK(xdm_allocate(rt, BLOCK, 0, "after", &b));
	CU_OK(ct_fill(ct_stream(rt, 0), ct_dev(&b), BLOCK, P));
	TU_OK(xdm_stream_synchronize(rt, 0));
	expect_bytes(&b, BLOCK, P, "a block after the refusal");
	TU_OK(xdm_deallocate(rt, &b));
	finish_runtime(rt);
}

START_TEST(driver_out_of_memory_on_cuda_async)
{
	out_of_memory("cuda_async");
}
END_TEST

START_TEST(driver_out_of_memory_on_cuda_direct)
{
	out_of_memory("cuda_direct");
}
END_TEST

/* ---- cuda_direct and imported streams ----------------------------------- */

START_TEST(cuda_direct_serves_kernels_and_refuses_tracking)
{
	struct xdm_runtime *rt = runtime("cuda_direct");
	struct xdm_block src, dst;
	struct xdm_block_id id;

	ck_assert(!xdm_supports_block_use_tracking(rt));
	TU_OK(xdm_allocate(rt, BLOCK, 3, "src", &src));
	TU_OK(xdm_allocate(rt, BLOCK, 3, "dst", &dst));
	ck_assert_uint_ge(src.bytes, BLOCK);
	CU_OK(ct_fill(ct_stream(rt, 3), ct_dev(&src), BLOCK, P));
	CU_OK(ct_copy(ct_stream(rt, 3), ct_dev(&dst), ct_dev(&src), BLOCK));
	TU_OK(xdm_stream_synchronize(rt, 3));
	expect_bytes(&dst, BLOCK, P, "a copy between cuda_direct blocks");

	/* No tracking: refused, never a silent success. */
	id = xdm_block_id_of(&src);
	ck_assert_int_eq(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ), XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_READ), XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_record_block_use(rt, &src, 1), XDM_E_STREAM_MISUSE);
	printf("cuda_direct refuses tracking: %s\n", xdm_last_error_message());
	TU_OK(xdm_deallocate(rt, &src));
	TU_OK(xdm_deallocate(rt, &dst));
	finish_runtime(rt);
}
END_TEST

START_TEST(imported_stream_allocates_and_orders)
{
	struct xdm_runtime *rt;
	struct xdm_block blk, out;
	struct xdm_block_id id;
	xdm_stream_id mine_id, again;
	CUstream mine;
	void *h = NULL;
	uint32_t owned;

	CU_OK(ct_ctx_current());
	CU_OK(ct_drv.cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING));
	rt = runtime("cuda_async");
	owned = xdm_stream_count(rt);
	TU_OK(xdm_stream_import(rt, mine, &mine_id));
	ck_assert_uint_ge(mine_id, owned);
	ck_assert_uint_eq(xdm_stream_count(rt), owned + 1);
	TU_OK(xdm_stream_import(rt, mine, &again));
	ck_assert_uint_eq(again, mine_id);
	TU_OK(xdm_stream_handle(rt, mine_id, &h));
	ck_assert_ptr_eq(h, mine);

	/* Allocated on the caller's stream, written there, read on stream 0. */
	TU_OK(xdm_allocate(rt, BLOCK, mine_id, "imported", &blk));
	TU_OK(xdm_allocate(rt, BLOCK, 0, "out", &out));
	id = xdm_block_id_of(&blk);
	/* Recycled memory may hold P already: start from zeros. */
	CU_OK(ct_fill(mine, ct_dev(&blk), BLOCK, 0));
	TU_OK(xdm_stream_synchronize(rt, mine_id));
	TU_OK(xdm_prepare_block_use(rt, id, mine_id, XDM_ACCESS_WRITE));
	CU_OK(ct_spin_fill(mine, ct_dev(&blk), BLOCK, P, SPIN / 2));
	TU_OK(xdm_finish_block_use(rt, id, mine_id, XDM_ACCESS_WRITE));
	TU_OK(xdm_prepare_block_use(rt, id, 0, XDM_ACCESS_READ));
	CU_OK(ct_copy(ct_stream(rt, 0), ct_dev(&out), ct_dev(&blk), BLOCK));
	TU_OK(xdm_finish_block_use(rt, id, 0, XDM_ACCESS_READ));
	ct_sync_all(rt);
	expect_bytes(&out, BLOCK, P, "stream 0's copy of the imported stream's write");
	TU_OK(xdm_deallocate(rt, &out));
	TU_OK(xdm_deallocate(rt, &blk));
	finish_runtime(rt);

	/* The runtime is gone; the caller's stream is not. */
	CU_OK(ct_drv.cuStreamSynchronize(mine));
	CU_OK(ct_drv.cuStreamDestroy(mine));
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

static Suite *cuda_suite(void)
{
	Suite *s = suite_create("cuda");
	TCase *contract = tcase_create("contract");
	TCase *threads = tcase_create("threads");
	TCase *errors = tcase_create("errors");
	TCase *streams = tcase_create("backends");

	tcase_add_test(contract, free_after_cross_stream_write_keeps_the_next_block_clean);
	if (!under_sanitizer)
		tcase_add_test(contract, control_untracked_free_lets_the_write_land);
	tcase_add_test(contract, read_waits_for_the_last_cross_stream_write);
	tcase_add_test(contract, a_write_by_another_runtime_is_waited_for);
	tcase_add_test(contract, write_waits_for_every_outstanding_read);
	tcase_add_test(contract, read_write_waits_like_a_write);
	tcase_add_test(contract, same_stream_uses_add_no_waits);
	tcase_add_test(threads, sixteen_threads_churn_on_cuda_async);
	tcase_add_test(threads, sixteen_threads_churn_on_cuda_direct);
	tcase_add_test(errors, stale_block_id_is_use_after_free);
	if (!under_sanitizer) {
		tcase_add_test(errors, driver_out_of_memory_on_cuda_async);
		tcase_add_test(errors, driver_out_of_memory_on_cuda_direct);
	}
	tcase_add_test(streams, cuda_direct_serves_kernels_and_refuses_tracking);
	tcase_add_test(streams, imported_stream_allocates_and_orders);
	suite_add_tcase(s, contract);
	suite_add_tcase(s, threads);
	suite_add_tcase(s, errors);
	suite_add_tcase(s, streams);
	return s;
}

static void read_environment(void)
{
	const char *scale = getenv("XDM_TEST_SCALE");
	const char *san = getenv("XDM_TEST_SANITIZER");

	if (scale && *scale) {
		char *end;
		double v = strtod(scale, &end);

		if (*end || !(v > 0)) {
			fprintf(stderr, "check_cuda: XDM_TEST_SCALE=%s is not a positive number\n",
				scale);
			exit(99);
		}
		test_scale = v;
	}
	under_sanitizer = san && *san && strcmp(san, "0") != 0;
}

int main(int argc, char **argv)
{
	struct xdm_device_info info;
	struct xdm_runtime *rt;
	SRunner *sr;
	CUresult r;
	int rc, failed;

	if (argc > 1 && strcmp(argv[1], "--ptx") == 0) {
		fputs(ct_kernels_ptx, stdout);
		return 0;
	}
	/* Line by line into the log, even if the process dies. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	read_environment();
	/* The lock before the probe's context (see ct_run_gpu_suite). */
	ct_take_gpu_lock();
	rc = ct_probe("cuda_async");
	if (rc || (argc > 1 && strcmp(argv[1], "--probe") == 0))
		return rc;

	/* Plain runs take well under a minute; memcheck is slower. */
	ct_start_watchdog(under_sanitizer ? 420 : 180);
	r = ct_gpu_init(0);
	if (r != CUDA_SUCCESS) {
		printf("ERROR: the tests' own driver setup failed: %s\n%s\n", ct_result_text(r),
		       ct_gpu.jit_log);
		return 99;
	}
	if (xdm_runtime_create(0, "cuda", "cuda_async", &rt) == XDM_OK) {
		if (xdm_runtime_device(rt, &info) == XDM_OK)
			printf("device 0: %s, %" PRIu64 " bytes, uuid %s; scale %g%s\n", info.name,
			       info.total_bytes, info.uuid, test_scale,
			       under_sanitizer ? "; under the sanitizer gate: the control and "
						 "out-of-memory tests are left out" : "");
		xdm_runtime_destroy(rt);
	}
	fflush(stdout);

	sr = srunner_create(cuda_suite());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
