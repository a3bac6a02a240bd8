/* SPDX-License-Identifier: MIT */
/*
 * check_capture_host.c - the core's rules for CUDA graph capture
 * (doc/design.md, "CUDA graph capture"), on the host platform's simulated
 * captures: the platform's files are linked in and registered as the
 * platform "capture_host", so that the suite can begin and end a capture
 * on a runtime's stream (host_stream_capture_begin/end) and hear from the
 * platform when xdm did something a capture forbids (the end says
 * ECANCELED, and why).
 *
 *  a. the simulation itself: a synchronize of a captured stream is refused
 *     and breaks the capture (the suite can fail);
 *  b. a block used on another stream outside the capture, the use held
 *     behind a gate, then freed inside a capture of its own stream: the
 *     free returns at once (a host wait there would never end: the gate
 *     opens after), the capture survives, the block is held
 *     (capture_frees_held) and not handed out again, a reap keeps it while
 *     the use has not run and gives it back after;
 *  c. the same free with the use already done is held too (no query may
 *     be made during the capture), and the next free that crosses streams
 *     outside a capture lets it go;
 *  d. a block used on one stream of a capture and freed on another of it:
 *     the free's wait joins the capture, nothing is held, the capture
 *     survives;
 *  e. a runtime destroyed with a free still held waits for the use and
 *     gives the block to its stack (its log shows the free);
 *  f. while a capture is open, another thread of the program allocates
 *     (its small blocks look for the captured stream's idle chunk, which
 *     it may not take), uses across streams, frees and reaps in the same
 *     runtime (the reap may not synchronize the captured stream), blocks
 *     are allocated and freed in the capture (a block freed there comes
 *     back to it at its address), and the pool's trimmer starts: the
 *     capture survives;
 *  g. a prepare on a captured stream of a write after a read outside the
 *     capture: the host waits for the read (the stream cannot), and the
 *     capture survives;
 *  h. an allocation the pool refuses inside a capture (past its max, with
 *     idle memory of other streams it could have trimmed first) is
 *     OUT_OF_MEMORY, and the capture survives it and goes on allocating.
 */
#include "config.h"

#include <pthread.h>

#include <xdm/module.h>

#include "backends/host/host.h"
#include "backends/host/stream.h"
#include "tests/lib/testutil.h"

#define BYTES ((size_t)64 * 1024)

/* Capture ids: the suite names them, never twice in a test's process. */
static uint64_t next_capture = 1;

static struct xdm_runtime *runtime(const char *stack)
{
	struct xdm_runtime *rt;

	TU_OK(xdm_runtime_create(0, "capture_host", stack, &rt));
	ck_assert_uint_ge(xdm_stream_count(rt), 2);
	return rt;
}

static struct host_stream *native(struct xdm_runtime *rt, xdm_stream_id s)
{
	void *h = NULL;

	TU_OK(xdm_stream_handle(rt, s, &h));
	ck_assert_ptr_nonnull(h);
	return h;
}

static void begin(struct xdm_runtime *rt, xdm_stream_id s)
{
	ck_assert_int_eq(host_stream_capture_begin(native(rt, s), next_capture++), 0);
}

/* End the capture, which must have survived. */
static void end_intact(struct xdm_runtime *rt, xdm_stream_id s)
{
	char why[200] = "";
	int err = host_stream_capture_end(native(rt, s), why, sizeof(why));

	ck_assert_msg(err == 0, "the capture broke: %s", why);
}

/* A read of b on stream use, behind gate g (NULL: none), recorded. */
static void use_on(struct xdm_runtime *rt, struct xdm_block *b, xdm_stream_id use,
		   struct tu_gate *g)
{
	struct xdm_block_id id = xdm_block_id_of(b);

	TU_OK(xdm_prepare_block_use(rt, id, use, XDM_ACCESS_READ));
	if (g)
		tu_gate_hold(rt, use, g);
	TU_OK(xdm_finish_block_use(rt, id, use, XDM_ACCESS_READ));
}

/* ---- a: the simulation catches what it must ------------------------------ */

START_TEST(synchronize_breaks_a_capture)
{
	struct xdm_runtime *rt = runtime("pool | host");
	char why[200] = "";

	begin(rt, 0);
	ck_assert_int_eq(xdm_stream_synchronize(rt, 0), XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(host_stream_capture_end(native(rt, 0), why, sizeof(why)), ECANCELED);
	ck_assert_msg(strstr(why, "synchronized"), "why: %s", why);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- b, c: a free inside a capture after a use outside it ----------------- */

START_TEST(free_after_gated_outside_use_is_held)
{
	struct xdm_runtime *rt = runtime("pool | host");
	struct xdm_block b, again;
	struct tu_gate gate;

	TU_OK(xdm_allocate(rt, BYTES, 0, "held", &b));
	tu_gate_init(&gate);
	use_on(rt, &b, 1, &gate);

	begin(rt, 0);
	TU_OK(xdm_deallocate(rt, &b));
	tu_expect_capture_frees_held(rt, 1, b.bytes, "freed in the capture");
	TU_OK(xdm_allocate(rt, BYTES, 0, "in the capture", &again));
	ck_assert_msg(again.ptr != b.ptr, "a held block was handed out again");
	TU_OK(xdm_deallocate(rt, &again));
	end_intact(rt, 0);
	/* The pool still counts the held block in use: it has not had it back. */
	ck_assert_uint_eq(tu_attr_u64(rt, 0, "in_use"), b.bytes);

	/* The use has not run: a reap keeps the hold. */
	TU_OK(xdm_reap_pending(rt));
	tu_expect_capture_frees_held(rt, 1, b.bytes, "reaped behind the gate");
	ck_assert_uint_eq(tu_attr_u64(rt, 0, "in_use"), b.bytes);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 1));
	ck_assert(!tu_gate_timed_out(&gate));
	TU_OK(xdm_reap_pending(rt));
	tu_expect_capture_frees_held(rt, 0, 0, "reaped after the use ran");
	ck_assert_uint_eq(tu_attr_u64(rt, 0, "in_use"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	tu_gate_destroy(&gate);
}
END_TEST

START_TEST(free_after_finished_outside_use_goes_at_the_next_crossing_free)
{
	struct xdm_runtime *rt = runtime("pool | host");
	struct xdm_block b, other;

	TU_OK(xdm_allocate(rt, BYTES, 0, "held", &b));
	use_on(rt, &b, 1, NULL);
	TU_OK(xdm_stream_synchronize(rt, 1));

	begin(rt, 0);
	TU_OK(xdm_deallocate(rt, &b));
	tu_expect_capture_frees_held(rt, 1, b.bytes, "freed in the capture");
	/* Inside the capture nothing is let go (its stream is captured). */
	TU_OK(xdm_reap_pending(rt));
	tu_expect_capture_frees_held(rt, 1, b.bytes, "reaped in the capture");
	end_intact(rt, 0);
	/* The next free that crosses streams outside a capture lets it go. */
	TU_OK(xdm_allocate(rt, BYTES, 0, "crossing", &other));
	use_on(rt, &other, 1, NULL);
	TU_OK(xdm_deallocate(rt, &other));
	tu_expect_capture_frees_held(rt, 0, 0, "after a crossing free");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- d: a use and a free in one capture ---------------------------------- */

START_TEST(use_and_free_in_one_capture_hold_nothing)
{
	struct xdm_runtime *rt = runtime("pool | host");
	uint64_t id = next_capture++;
	struct xdm_block b;

	TU_OK(xdm_allocate(rt, BYTES, 0, "captured", &b));
	/* Streams 0 and 1 in one capture, as a capture that forked to 1. */
	ck_assert_int_eq(host_stream_capture_begin(native(rt, 0), id), 0);
	ck_assert_int_eq(host_stream_capture_begin(native(rt, 1), id), 0);
	use_on(rt, &b, 1, NULL);
	/* The free's wait on stream 1's use joins the capture. */
	TU_OK(xdm_deallocate(rt, &b));
	tu_expect_capture_frees_held(rt, 0, 0, "used and freed in the capture");
	end_intact(rt, 1);
	end_intact(rt, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- e: teardown --------------------------------------------------------- */

struct opener {
	struct tu_gate *gate;
	pthread_t thread;
};

static void *open_later(void *arg)
{
	struct opener *o = arg;

	tu_sleep_ms(50);
	tu_gate_open(o->gate);
	return NULL;
}

/* Whether the log at path holds a free of ptr: the hold reached the stack. */
static bool log_has_free(const char *path, uint64_t ptr)
{
	char line[512], want[64];
	bool found = false;
	FILE *f = fopen(path, "r");

	ck_assert_ptr_nonnull(f);
	snprintf(want, sizeof(want), ",free,0x%llx,", (unsigned long long)ptr);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

START_TEST(destroy_waits_for_a_held_free)
{
	char path[] = "/tmp/xdm-capture-host-XXXXXX", stack[128];
	struct xdm_runtime *rt;
	struct xdm_block b;
	struct tu_gate gate;
	struct opener o = { .gate = &gate };
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	/* The log sees a free when it goes down the stack, not when it is held. */
	snprintf(stack, sizeof(stack), "logging path=%s | pool | host", path);
	rt = runtime(stack);

	TU_OK(xdm_allocate(rt, BYTES, 0, "held", &b));
	tu_gate_init(&gate);
	use_on(rt, &b, 1, &gate);
	begin(rt, 0);
	TU_OK(xdm_deallocate(rt, &b));
	end_intact(rt, 0);
	tu_expect_capture_frees_held(rt, 1, b.bytes, "before the end");
	/* Whenever the gate opens, before or during the destroy, it returns. */
	ck_assert_int_eq(pthread_create(&o.thread, NULL, open_later, &o), 0);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert_int_eq(pthread_join(o.thread, NULL), 0);
	ck_assert(!tu_gate_timed_out(&gate));
	ck_assert_msg(log_has_free(path, b.ptr), "the held free never reached the stack");
	unlink(path);
	tu_gate_destroy(&gate);
}
END_TEST

/* ---- f: the rest of the program during a capture ------------------------- */

struct other_thread {
	struct xdm_runtime *rt;
	struct tu_first_failure fail;
};

static void *other_user(void *arg)
{
	struct other_thread *o = arg;
	struct xdm_block big, small[8];

	if (!tu_step_ok(&o->fail, xdm_allocate(o->rt, 256 * BYTES, 1, "other", &big), "allocate"))
		return NULL;
	for (int i = 0; i < 8; i++)
		if (!tu_step_ok(&o->fail, xdm_allocate(o->rt, 4096u << i, 1, "other", &small[i]),
			     "allocate small"))
			return NULL;
	if (!tu_step_ok(&o->fail, xdm_prepare_block_use(o->rt, xdm_block_id_of(&big), 2,
					      XDM_ACCESS_WRITE), "prepare") ||
	    !tu_step_ok(&o->fail, xdm_finish_block_use(o->rt, xdm_block_id_of(&big), 2,
					     XDM_ACCESS_WRITE), "finish") ||
	    !tu_step_ok(&o->fail, xdm_deallocate(o->rt, &big), "free after a use"))
		return NULL;
	for (int i = 0; i < 8; i++) {
		if (!tu_step_ok(&o->fail, xdm_record_block_use(o->rt, &small[i], 2), "record") ||
		    !tu_step_ok(&o->fail, xdm_deallocate(o->rt, &small[i]), "free small"))
			return NULL;
	}
	tu_step_ok(&o->fail, xdm_reap_pending(o->rt), "reap_pending");
	return NULL;
}

START_TEST(other_thread_and_trimmer_leave_the_capture_alone)
{
	/* No thread caches: a freed block leaves its chunk idle at once. */
	struct xdm_runtime *rt = runtime("pool trim_ms=0 tcache=0 | host");
	struct other_thread o = { .rt = rt };
	struct xdm_block before, a, b, c;
	pthread_t th;

	ck_assert_uint_ge(xdm_stream_count(rt), 3);
	/* An idle chunk of the stream to be captured, for a steal or a trim. */
	TU_OK(xdm_allocate(rt, BYTES, 0, "before", &before));
	TU_OK(xdm_deallocate(rt, &before));

	begin(rt, 0);
	/* Its small blocks look for the captured stream's idle chunk first. */
	ck_assert_int_eq(pthread_create(&th, NULL, other_user, &o), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(o.fail.st == XDM_OK, "the other thread's %s: %s (%s)", o.fail.step,
		      xdm_strerror(o.fail.st), o.fail.msg);
	TU_OK(xdm_allocate(rt, BYTES, 0, "a", &a));
	TU_OK(xdm_allocate(rt, BYTES, 0, "b", &b));
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_allocate(rt, BYTES, 0, "c", &c));
	ck_assert_msg(c.ptr == a.ptr, "the block freed in the capture was not reused (0x%llx, "
		      "then 0x%llx)", (unsigned long long)a.ptr, (unsigned long long)c.ptr);
	/* The trimmer starts with the capture open, and has time for passes. */
	TU_OK(xdm_layer_attr_store(rt, 0, "trim_ms", "1"));
	tu_sleep_ms(30);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	end_intact(rt, 0);
	TU_OK(xdm_reap_pending(rt));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- g: a prepare that must follow a use outside the capture -------------- */

START_TEST(prepare_after_outside_read_waits_on_the_host)
{
	struct xdm_runtime *rt = runtime("pool | host");
	struct xdm_block b;
	struct xdm_block_id id;

	TU_OK(xdm_allocate(rt, BYTES, 0, "read outside", &b));
	id = xdm_block_id_of(&b);
	use_on(rt, &b, 1, NULL);
	begin(rt, 0);
	TU_OK(xdm_prepare_block_use(rt, id, 0, XDM_ACCESS_WRITE));
	TU_OK(xdm_finish_block_use(rt, id, 0, XDM_ACCESS_WRITE));
	end_intact(rt, 0);
	TU_OK(xdm_deallocate(rt, &b));
	tu_expect_capture_frees_held(rt, 0, 0, "freed after the capture");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- h: a refusal inside a capture ---------------------------------------- */

START_TEST(refusal_leaves_the_capture_alone)
{
	struct xdm_runtime *rt = runtime("pool max=4M trim_ms=0 tcache=0 | host");
	struct xdm_block idle, big, small;
	enum xdm_status st;

	/* Memory of another stream, idle: a refusal might want it back first. */
	TU_OK(xdm_allocate(rt, 2 * 1024 * 1024, 1, "idle", &idle));
	use_on(rt, &idle, 2, NULL);
	TU_OK(xdm_deallocate(rt, &idle));

	begin(rt, 0);
	st = xdm_allocate(rt, 8 * 1024 * 1024, 0, "too big", &big);
	ck_assert_msg(st == XDM_E_OUT_OF_MEMORY, "8M past a 4M max: %s (%s)", xdm_strerror(st),
		      xdm_last_error_message());
	TU_OK(xdm_allocate(rt, BYTES, 0, "after", &small));
	TU_OK(xdm_deallocate(rt, &small));
	end_intact(rt, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *capture_host_suite(void)
{
	Suite *s = suite_create("capture_host");
	TCase *tc = tcase_create("capture");

	tcase_set_timeout(tc, TU_TIMEOUT_S);
	tcase_add_test(tc, synchronize_breaks_a_capture);
	tcase_add_test(tc, free_after_gated_outside_use_is_held);
	tcase_add_test(tc, free_after_finished_outside_use_goes_at_the_next_crossing_free);
	tcase_add_test(tc, use_and_free_in_one_capture_hold_nothing);
	tcase_add_test(tc, destroy_waits_for_a_held_free);
	tcase_add_test(tc, other_thread_and_trimmer_leave_the_capture_alone);
	tcase_add_test(tc, prepare_after_outside_read_waits_on_the_host);
	tcase_add_test(tc, refusal_leaves_the_capture_alone);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	struct xdm_ops platform = host_platform_ops;

	/* Registered before check forks: every test's process has it. */
	platform.name = "capture_host";
	if (xdm_module_register(&platform) != XDM_OK) {
		fprintf(stderr, "cannot register the platform: %s\n", xdm_last_error_message());
		return EXIT_FAILURE;
	}
	return tu_run_suite(capture_host_suite());
}
