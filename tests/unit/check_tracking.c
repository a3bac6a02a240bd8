/* SPDX-License-Identifier: MIT */
/*
 * check_tracking.c - the stream-ordered contract on the host platform, with
 * real asynchronous work: every stream is a worker thread, and a step that
 * sleeps before it writes makes any missing wait show up as a wrong order.
 */
#include "config.h"

#include <xdm/module.h>

#include "tests/lib/testutil.h"

#define SLOW 60		/* ms: long enough that an unordered step would run first */

struct fixture {
	struct xdm_runtime *rt;
	struct tu_log log;
};

static void setup(struct fixture *f, const char *stack)
{
	TU_OK(xdm_runtime_create(0, "host", stack, &f->rt));
	tu_log_init(&f->log);
}

static void launch(struct fixture *f, xdm_stream_id s, struct tu_step *step)
{
	step->log = &f->log;
	TU_OK(xdm_stream_launch_host(f->rt, s, tu_step_run, step));
}

static void sync_all(struct fixture *f)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(f->rt); s++)
		TU_OK(xdm_stream_synchronize(f->rt, s));
}

static uint64_t waits(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	return st.waits_queued;
}

static unsigned char *mem(const struct xdm_block *b)
{
	return (unsigned char *)(uintptr_t)b->ptr;
}

/* A use on stream `use` that sleeps, then writes or reads, then logs. */
static void slow_use(struct fixture *f, struct xdm_block *b, xdm_stream_id use,
		     enum xdm_access access, struct tu_step *step)
{
	struct xdm_block_id id = xdm_block_id_of(b);

	TU_OK(xdm_prepare_block_use(f->rt, id, use, access));
	launch(f, use, step);
	TU_OK(xdm_finish_block_use(f->rt, id, use, access));
}

static void free_waits_for(enum xdm_access access)
{
	struct fixture f;
	struct xdm_block b;
	int seen = -1;
	struct tu_step use = { .id = 1, .sleep_ms = SLOW, .value = 7 };
	struct tu_step after = { .id = 2 };

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	use.mem = mem(&b);
	if (access == XDM_ACCESS_READ)
		use.seen = &seen;
	slow_use(&f, &b, 1, access, &use);
	TU_OK(xdm_deallocate(f.rt, &b));
	/* The use followed the owner's stream (1), the free followed the use (1). */
	ck_assert_uint_eq(waits(f.rt), 2);
	/* Stream 0 ran the free; anything after it follows the slow use. */
	launch(&f, 0, &after);
	sync_all(&f);
	ck_assert_int_eq(tu_log_pos(&f.log, 1), 0);
	ck_assert_int_eq(tu_log_pos(&f.log, 2), 1);
	TU_OK(xdm_reap_pending(f.rt));
	ck_assert_uint_eq(xdm_bytes_outstanding(f.rt), 0);
	TU_OK(xdm_runtime_destroy(f.rt));
}

START_TEST(free_waits_for_cross_stream_write)
{
	free_waits_for(XDM_ACCESS_WRITE);
}
END_TEST

START_TEST(free_waits_for_cross_stream_read)
{
	free_waits_for(XDM_ACCESS_READ);
}
END_TEST

START_TEST(free_is_pending_until_the_use_ends)
{
	struct fixture f;
	struct xdm_block b;
	struct tu_gate gate;
	struct tu_step use = { .id = 1, .value = 1 };

	setup(&f, "host");
	tu_gate_init(&gate);
	TU_OK(xdm_allocate(f.rt, 8192, 0, "t", &b));
	use.mem = mem(&b);
	/*
	 * Stream 1 stands at a gate, so the write behind it has not run when
	 * the free is asked for, however long this thread is kept off a core
	 * (a sleeping write would only make that likely).
	 */
	tu_gate_hold(f.rt, 1, &gate);
	slow_use(&f, &b, 1, XDM_ACCESS_WRITE, &use);
	TU_OK(xdm_deallocate(f.rt, &b));
	/* The write has not run, so the backend cannot have freed yet. */
	ck_assert_int_eq(tu_log_pos(&f.log, 1), -1);
	ck_assert_uint_eq(xdm_bytes_outstanding(f.rt), 8192);
	tu_gate_open(&gate);
	TU_OK(xdm_reap_pending(f.rt));
	ck_assert_int_eq(tu_log_pos(&f.log, 1), 0);
	ck_assert_uint_eq(xdm_bytes_outstanding(f.rt), 0);
	TU_OK(xdm_runtime_destroy(f.rt));
	tu_gate_destroy(&gate);
}
END_TEST

START_TEST(read_waits_for_last_cross_stream_write)
{
	struct fixture f;
	struct xdm_block b;
	int seen = -1;
	struct tu_step w = { .id = 1, .sleep_ms = SLOW, .value = 42 };
	struct tu_step r = { .id = 2 };

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	memset(mem(&b), 0, 64);
	w.mem = r.mem = mem(&b);
	r.seen = &seen;
	slow_use(&f, &b, 1, XDM_ACCESS_WRITE, &w);
	slow_use(&f, &b, 2, XDM_ACCESS_READ, &r);
	/* The write followed the owner's stream; the read followed the write. */
	ck_assert_uint_eq(waits(f.rt), 2);
	sync_all(&f);
	ck_assert_int_eq(seen, 42);
	ck_assert_int_lt(tu_log_pos(&f.log, 1), tu_log_pos(&f.log, 2));
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(write_waits_for_every_outstanding_read)
{
	struct fixture f;
	struct xdm_block b;
	int seen1 = -1, seen2 = -1;
	struct tu_step r1 = { .id = 1, .sleep_ms = SLOW };
	struct tu_step r2 = { .id = 2, .sleep_ms = SLOW / 2 };
	struct tu_step w = { .id = 3, .value = 9 };
	uint64_t before;

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	memset(mem(&b), 5, 64);
	r1.mem = r2.mem = w.mem = mem(&b);
	r1.seen = &seen1;
	r2.seen = &seen2;
	slow_use(&f, &b, 1, XDM_ACCESS_READ, &r1);
	slow_use(&f, &b, 2, XDM_ACCESS_READ, &r2);
	before = waits(f.rt);
	slow_use(&f, &b, 3, XDM_ACCESS_WRITE, &w);
	/* The owner's stream (the block's first write) and both readers. */
	ck_assert_uint_eq(waits(f.rt) - before, 3);
	sync_all(&f);
	/* Both readers saw the old bytes: the writer waited for them. */
	ck_assert_int_eq(seen1, 5);
	ck_assert_int_eq(seen2, 5);
	ck_assert_int_eq(tu_log_pos(&f.log, 3), 2);
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(read_write_waits_like_a_write)
{
	struct fixture f;
	struct xdm_block b;
	int seen = -1;
	struct tu_step r = { .id = 1, .sleep_ms = SLOW };
	struct tu_step rw = { .id = 2, .value = 3 };

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	memset(mem(&b), 8, 64);
	r.mem = rw.mem = mem(&b);
	r.seen = &seen;
	slow_use(&f, &b, 1, XDM_ACCESS_READ, &r);
	slow_use(&f, &b, 2, XDM_ACCESS_READ_WRITE, &rw);
	sync_all(&f);
	ck_assert_int_eq(seen, 8);
	ck_assert_int_lt(tu_log_pos(&f.log, 1), tu_log_pos(&f.log, 2));
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

/*
 * The owner writes on the allocation stream without telling the runtime (the
 * usual case: a kernel right after the allocation); the first use on another
 * stream must still see that write, and must follow the allocation itself.
 */
START_TEST(first_cross_stream_use_follows_the_owner)
{
	struct fixture f;
	struct xdm_block b;
	int seen = -1;
	struct tu_step owner = { .id = 1, .sleep_ms = SLOW, .value = 77 };
	struct tu_step r = { .id = 2 };

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	memset(mem(&b), 0, 64);
	owner.mem = r.mem = mem(&b);
	r.seen = &seen;
	launch(&f, 0, &owner);		/* no prepare/finish: the owner's own stream */
	slow_use(&f, &b, 3, XDM_ACCESS_READ, &r);
	ck_assert_uint_eq(waits(f.rt), 1);
	sync_all(&f);
	ck_assert_int_eq(seen, 77);
	ck_assert_int_lt(tu_log_pos(&f.log, 1), tu_log_pos(&f.log, 2));
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(same_stream_uses_add_no_waits)
{
	struct fixture f;
	struct xdm_block b;
	struct xdm_block_id id;
	struct xdm_stats st;

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	id = xdm_block_id_of(&b);
	/* Uses on the allocation stream itself. */
	TU_OK(xdm_prepare_block_use(f.rt, id, 0, XDM_ACCESS_WRITE));
	TU_OK(xdm_finish_block_use(f.rt, id, 0, XDM_ACCESS_WRITE));
	TU_OK(xdm_prepare_block_use(f.rt, id, 0, XDM_ACCESS_READ));
	TU_OK(xdm_finish_block_use(f.rt, id, 0, XDM_ACCESS_READ));
	ck_assert_uint_eq(waits(f.rt), 0);
	/* A write on stream 1 must follow stream 0's write and read. */
	TU_OK(xdm_prepare_block_use(f.rt, id, 1, XDM_ACCESS_WRITE));
	ck_assert_uint_eq(waits(f.rt), 2);
	TU_OK(xdm_finish_block_use(f.rt, id, 1, XDM_ACCESS_WRITE));
	/* A read after a write on the same stream: stream order suffices. */
	TU_OK(xdm_prepare_block_use(f.rt, id, 1, XDM_ACCESS_READ));
	TU_OK(xdm_finish_block_use(f.rt, id, 1, XDM_ACCESS_READ));
	ck_assert_uint_eq(waits(f.rt), 2);
	TU_OK(xdm_deallocate(f.rt, &b));
	/* The free on stream 0 waits for stream 1's write and its read. */
	xdm_runtime_stats(f.rt, &st);
	ck_assert_uint_eq(st.waits_queued, 4);
	ck_assert_uint_eq(st.events_recorded, 4);
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(untouched_block_frees_without_waits)
{
	struct fixture f;
	struct xdm_block b;

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 2, "t", &b));
	TU_OK(xdm_deallocate(f.rt, &b));
	ck_assert_uint_eq(waits(f.rt), 0);
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(record_block_use_orders_the_free)
{
	struct fixture f;
	struct xdm_block b;
	struct tu_step use = { .id = 1, .sleep_ms = SLOW, .value = 1 };
	struct tu_step after = { .id = 2 };

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	use.mem = mem(&b);
	launch(&f, 4, &use);
	TU_OK(xdm_record_block_use(f.rt, &b, 4));
	TU_OK(xdm_deallocate(f.rt, &b));
	launch(&f, 0, &after);
	sync_all(&f);
	ck_assert_int_lt(tu_log_pos(&f.log, 1), tu_log_pos(&f.log, 2));
	ck_assert_uint_eq(waits(f.rt), 1);
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(many_readers_then_a_writer)
{
	struct fixture f;
	struct xdm_block b;
	struct xdm_block_id id;
	struct tu_step r[8], w = { .id = 100, .value = 1 };
	int seen[8];
	uint64_t before;

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	id = xdm_block_id_of(&b);
	memset(mem(&b), 4, 64);
	/* Eight reader streams: more than the inline read slots. */
	for (int i = 0; i < 8; i++) {
		r[i] = (struct tu_step){ .id = i + 1, .sleep_ms = 5 * (8 - i), .mem = mem(&b),
					 .seen = &seen[i] };
		slow_use(&f, &b, (xdm_stream_id)(i + 1), XDM_ACCESS_READ, &r[i]);
	}
	/* A second read on stream 1 supersedes its first: still 8 to wait on. */
	TU_OK(xdm_prepare_block_use(f.rt, id, 1, XDM_ACCESS_READ));
	TU_OK(xdm_finish_block_use(f.rt, id, 1, XDM_ACCESS_READ));
	before = waits(f.rt);
	w.mem = mem(&b);
	slow_use(&f, &b, 12, XDM_ACCESS_WRITE, &w);
	/* Eight readers and the owner's stream, the block's first write. */
	ck_assert_uint_eq(waits(f.rt) - before, 9);
	sync_all(&f);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(seen[i], 4);
		ck_assert_int_lt(tu_log_pos(&f.log, i + 1), tu_log_pos(&f.log, 100));
	}
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(stale_or_bad_uses_are_refused)
{
	struct fixture f;
	struct xdm_block b;
	struct xdm_block_id id;

	setup(&f, "host");
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	id = xdm_block_id_of(&b);
	ck_assert_int_eq(xdm_prepare_block_use(f.rt, id, 999, XDM_ACCESS_READ),
			 XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_finish_block_use(f.rt, id, 1, (enum xdm_access)0), XDM_E_INVALID);
	TU_OK(xdm_deallocate(f.rt, &b));
	ck_assert_int_eq(xdm_prepare_block_use(f.rt, id, 1, XDM_ACCESS_READ),
			 XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, id.generation);
	ck_assert_int_eq(xdm_finish_block_use(f.rt, id, 1, XDM_ACCESS_WRITE),
			 XDM_E_USE_AFTER_FREE);
	ck_assert_int_eq(xdm_record_block_use(f.rt, &b, 1), XDM_E_USE_AFTER_FREE);
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

START_TEST(untracked_backend_is_stream_misuse)
{
	struct fixture f;
	struct xdm_block b;
	struct xdm_block_id id;

	setup(&f, "host free=sync");
	ck_assert(!xdm_supports_block_use_tracking(f.rt));
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	id = xdm_block_id_of(&b);
	ck_assert_int_eq(xdm_prepare_block_use(f.rt, id, 1, XDM_ACCESS_READ),
			 XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_finish_block_use(f.rt, id, 1, XDM_ACCESS_READ),
			 XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_record_block_use(f.rt, &b, 1), XDM_E_STREAM_MISUSE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "host"));
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

/* A backend that leaves every tracking method NULL. */
static enum xdm_status bare_alloc(struct xdm_layer *self, size_t bytes, xdm_stream_id s,
				  const char *tag, struct xdm_block *out)
{
	out->ptr = (uint64_t)(uintptr_t)aligned_alloc(XDM_DEFAULT_ALIGN, 4096);
	return out->ptr ? XDM_OK : XDM_E_OUT_OF_MEMORY;
}

static enum xdm_status bare_free(struct xdm_layer *self, struct xdm_block *b)
{
	free((void *)(uintptr_t)b->ptr);
	return XDM_OK;
}

static const struct xdm_ops bare_ops = {
	XDM_OPS_HEADER("bare", XDM_KIND_BACKEND),
	.allocate = bare_alloc,
	.deallocate = bare_free,
};

/* An adaptor with no methods at all: everything forwards. */
static const struct xdm_ops pass_ops = {
	XDM_OPS_HEADER("pass", XDM_KIND_ADAPTOR),
};

START_TEST(null_tracking_in_a_backend_is_stream_misuse)
{
	struct xdm_runtime *rt;
	struct xdm_block b;

	TU_OK(xdm_module_register(&bare_ops));
	TU_OK(xdm_module_register(&pass_ops));
	TU_OK(xdm_runtime_create(0, "host", "pass | bare", &rt));
	ck_assert(!xdm_supports_block_use_tracking(rt));
	TU_OK(xdm_allocate(rt, 100, 0, "t", &b));
	ck_assert_int_eq(xdm_prepare_block_use(rt, xdm_block_id_of(&b), 1, XDM_ACCESS_READ),
			 XDM_E_STREAM_MISUSE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "bare"));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);	/* NULL: backend reports 0 */
	TU_OK(xdm_reap_pending(rt));				/* NULL: nothing pending */
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(adaptor_forwards_tracking)
{
	struct fixture f;
	struct xdm_block b;
	int seen = -1;
	struct tu_step w = { .id = 1, .sleep_ms = SLOW, .value = 11 };
	struct tu_step r = { .id = 2 };

	TU_OK(xdm_module_register(&pass_ops));
	setup(&f, "pass | pass | host");
	ck_assert(xdm_supports_block_use_tracking(f.rt));
	TU_OK(xdm_allocate(f.rt, 4096, 0, "t", &b));
	w.mem = r.mem = mem(&b);
	r.seen = &seen;
	slow_use(&f, &b, 1, XDM_ACCESS_WRITE, &w);
	slow_use(&f, &b, 2, XDM_ACCESS_READ, &r);
	sync_all(&f);
	ck_assert_int_eq(seen, 11);
	TU_OK(xdm_deallocate(f.rt, &b));
	TU_OK(xdm_runtime_destroy(f.rt));
}
END_TEST

struct churn {
	struct xdm_runtime *rt;
	xdm_stream_id stream;
	enum xdm_status st;
};

/*
 * Every CHURN_DRAIN iterations a thread waits for its own stream.  Without
 * it, threads that outrun starved stream workers (a loaded machine) queue
 * thousands of records of the same few recycled events, and the host
 * platform's waits, which scan an event's pending records, made the test
 * take minutes instead of seconds: its time depended on the scheduling.
 * The backlog now stays bounded whatever the schedule; the threads still
 * race on the registry, the event pool and each other's streams.
 */
enum { CHURN_ITERATIONS = 2000, CHURN_DRAIN = 100 };

static void *churn_run(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < CHURN_ITERATIONS && c->st == XDM_OK; i++) {
		struct xdm_block b;
		xdm_stream_id other = (c->stream + 1) % 16;

		if (i % CHURN_DRAIN == CHURN_DRAIN - 1) {
			c->st = xdm_stream_synchronize(c->rt, c->stream);
			if (c->st)
				break;
		}

		c->st = xdm_allocate(c->rt, 256 + (size_t)(i % 7) * 512, c->stream, "churn", &b);
		if (c->st)
			break;
		c->st = xdm_prepare_block_use(c->rt, xdm_block_id_of(&b), other,
					      XDM_ACCESS_WRITE);
		if (c->st == XDM_OK)
			c->st = xdm_finish_block_use(c->rt, xdm_block_id_of(&b), other,
						     XDM_ACCESS_WRITE);
		if (c->st == XDM_OK)
			c->st = xdm_deallocate(c->rt, &b);
	}
	return NULL;
}

START_TEST(threads_churn_with_cross_stream_uses)
{
	enum { N = 8 };
	struct xdm_runtime *rt;
	struct churn c[N];
	pthread_t t[N];
	struct xdm_stats st;

	TU_OK(xdm_runtime_create(0, "host", "host", &rt));
	for (int i = 0; i < N; i++) {
		c[i] = (struct churn){ .rt = rt, .stream = (xdm_stream_id)i };
		pthread_create(&t[i], NULL, churn_run, &c[i]);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(c[i].st == XDM_OK, "thread %d: %s", i, xdm_strerror(c[i].st));
	}
	TU_OK(xdm_reap_pending(rt));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.allocs, N * CHURN_ITERATIONS);
	ck_assert_uint_eq(st.frees, N * CHURN_ITERATIONS);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	/* Each use followed the owner's stream, and each free followed the use. */
	ck_assert_uint_eq(st.waits_queued, 2 * N * CHURN_ITERATIONS);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *tracking_suite(void)
{
	Suite *s = suite_create("tracking");
	TCase *tc = tcase_create("contract");

	tcase_set_timeout(tc, TU_TIMEOUT_S);
	tcase_add_test(tc, free_waits_for_cross_stream_write);
	tcase_add_test(tc, free_waits_for_cross_stream_read);
	tcase_add_test(tc, free_is_pending_until_the_use_ends);
	tcase_add_test(tc, read_waits_for_last_cross_stream_write);
	tcase_add_test(tc, write_waits_for_every_outstanding_read);
	tcase_add_test(tc, read_write_waits_like_a_write);
	tcase_add_test(tc, first_cross_stream_use_follows_the_owner);
	tcase_add_test(tc, same_stream_uses_add_no_waits);
	tcase_add_test(tc, untouched_block_frees_without_waits);
	tcase_add_test(tc, record_block_use_orders_the_free);
	tcase_add_test(tc, many_readers_then_a_writer);
	tcase_add_test(tc, stale_or_bad_uses_are_refused);
	tcase_add_test(tc, untracked_backend_is_stream_misuse);
	tcase_add_test(tc, null_tracking_in_a_backend_is_stream_misuse);
	tcase_add_test(tc, adaptor_forwards_tracking);
	tcase_add_test(tc, threads_churn_with_cross_stream_uses);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(tracking_suite());
}
