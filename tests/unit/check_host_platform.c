/* SPDX-License-Identifier: MIT */
/*
 * check_host_platform.c - the host platform's streams and events, with real
 * threads, and the host module's ops tables as loaded from host.so.
 *
 * The "queue" cases link backends/host/{stream,event,copy}.c directly and
 * drive them without a runtime.  Ordering is proven with gates (a host
 * function that blocks until the test opens it) and a sequence log, never
 * with timing: sleeps only make wrong orders likely, and every wait that
 * could hang on a bug is bounded and reported as a failure.
 *
 * The "module" cases dlopen $XDM_TOP_BUILDDIR/backends/.libs/host.so and
 * check what the core will see of it; the "runtime" cases run the backend
 * (both free modes) and the platform's device description through
 * xdm_runtime_create(0, "host", ...).  Both need `make check`'s environment.
 */
#include "config.h"

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xdm/module.h>

#include "backends/host/stream.h"
#include "tests/lib/testutil.h"

/* Poll an event for completion, bounded. */
static bool event_completes(struct host_event *ev)
{
	int i;

	for (i = 0; i < TU_PATIENCE_MS; i++) {
		if (host_event_query(ev))
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

static struct host_stream *new_stream(void)
{
	struct host_stream *s = NULL;

	ck_assert_int_eq(host_stream_create(&s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static struct host_event *new_event(void)
{
	struct host_event *ev = NULL;

	ck_assert_int_eq(host_event_create(&ev), 0);
	ck_assert_ptr_nonnull(ev);
	return ev;
}

/* ---- one stream ------------------------------------------------------ */

START_TEST(test_fifo_order)
{
	struct host_stream *s = new_stream();
	struct tu_step steps[5];
	struct tu_log log;
	int i;

	tu_log_init(&log);
	/* Earlier steps sleep longer: only a FIFO keeps them in order. */
	for (i = 0; i < 5; i++) {
		steps[i] = (struct tu_step){ .log = &log, .id = i, .sleep_ms = (40 - 10 * i) };
		ck_assert_int_eq(host_stream_launch(s, tu_step_run, &steps[i]), 0);
	}
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	ck_assert_int_eq(tu_log_count(&log), 5);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(tu_log_at(&log, i), i);
	host_stream_destroy(s);
	tu_log_destroy(&log);
}
END_TEST

START_TEST(test_launch_is_asynchronous)
{
	struct host_stream *s = new_stream();
	struct tu_log log;
	struct tu_step st = { .log = &log, .id = 1, .sleep_ms = 0 };
	struct tu_gate g;

	tu_log_init(&log);
	tu_gate_init(&g);
	ck_assert_int_eq(host_stream_launch(s, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_stream_launch(s, tu_step_run, &st), 0);
	/* The launch returned while its stream is stuck in the gate. */
	ck_assert(tu_gate_wait_entered(&g));
	ck_assert_int_eq(tu_log_count(&log), 0);
	tu_gate_open(&g);
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	ck_assert_int_eq(tu_log_count(&log), 1);
	ck_assert(!tu_gate_timed_out(&g));
	host_stream_destroy(s);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

START_TEST(test_synchronize_drains)
{
	struct host_stream *s = new_stream();
	struct tu_step steps[20];
	struct tu_log log;
	int i;

	tu_log_init(&log);
	for (i = 0; i < 20; i++) {
		steps[i] = (struct tu_step){ .log = &log, .id = i, .sleep_ms = (i % 3) };
		ck_assert_int_eq(host_stream_launch(s, tu_step_run, &steps[i]), 0);
	}
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	ck_assert_int_eq(tu_log_count(&log), 20);
	/* An idle stream synchronizes at once. */
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	host_stream_destroy(s);
	tu_log_destroy(&log);
}
END_TEST

struct self_sync {
	struct host_stream *s;
	int result;
};

static void self_sync_fn(void *arg)
{
	struct self_sync *p = arg;

	p->result = host_stream_synchronize(p->s);
}

START_TEST(test_synchronize_from_own_worker_refused)
{
	struct host_stream *s = new_stream();
	struct self_sync p = { s, -1 };

	ck_assert_int_eq(host_stream_launch(s, self_sync_fn, &p), 0);
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	ck_assert_int_eq(p.result, EDEADLK);
	host_stream_destroy(s);
}
END_TEST

START_TEST(test_destroy_drains_then_joins)
{
	struct host_stream *s = new_stream();
	struct tu_step steps[4];
	struct tu_log log;
	int i;

	tu_log_init(&log);
	for (i = 0; i < 4; i++) {
		steps[i] = (struct tu_step){ .log = &log, .id = i, .sleep_ms = 20 };
		ck_assert_int_eq(host_stream_launch(s, tu_step_run, &steps[i]), 0);
	}
	/* No synchronize: destroy itself must run the queue out. */
	host_stream_destroy(s);
	ck_assert_int_eq(tu_log_count(&log), 4);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(tu_log_at(&log, i), i);
	tu_log_destroy(&log);
}
END_TEST

static void check_bytes_fn(void *arg)
{
	unsigned char *p = arg;

	/* Runs between the memset and the memcpy below. */
	p[1] = p[0] == 0xab ? 1 : 2;
}

START_TEST(test_memset_memcpy_in_order)
{
	enum { N = 1 << 16 };
	struct host_stream *s = new_stream();
	unsigned char *src = malloc(N), *dst = malloc(N);
	unsigned char seen[2] = { 0, 0 };
	struct tu_gate g;
	size_t i;

	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	memset(src, 0x11, N);
	memset(dst, 0x22, N);
	tu_gate_init(&g);

	ck_assert_int_eq(host_stream_launch(s, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_stream_memset(s, src, 0xab, N), 0);
	ck_assert_int_eq(host_stream_memcpy(s, seen, src, 1), 0);
	ck_assert_int_eq(host_stream_launch(s, check_bytes_fn, seen), 0);
	ck_assert_int_eq(host_stream_memcpy(s, dst, src, N), 0);
	ck_assert_int_eq(host_stream_memset(s, src, 0, N / 2), 0);

	/* Behind the gate, nothing has touched memory yet. */
	ck_assert(tu_gate_wait_entered(&g));
	ck_assert_uint_eq(src[0], 0x11);
	ck_assert_uint_eq(dst[N - 1], 0x22);
	tu_gate_open(&g);
	ck_assert_int_eq(host_stream_synchronize(s), 0);

	ck_assert_uint_eq(seen[0], 0xab);
	ck_assert_uint_eq(seen[1], 1);
	for (i = 0; i < N; i++)
		ck_assert_uint_eq(dst[i], 0xab);
	for (i = 0; i < N; i++)
		ck_assert_uint_eq(src[i], i < N / 2 ? 0 : 0xab);
	host_stream_destroy(s);
	tu_gate_destroy(&g);
	free(src);
	free(dst);
}
END_TEST

/* Several threads queue on one stream: each one's own order survives. */
struct submitter {
	struct host_stream *s;
	struct tu_log *log;
	struct tu_step steps[200];
	int base;
};

static void *submit_thread(void *arg)
{
	struct submitter *sub = arg;
	int i;

	for (i = 0; i < 200; i++) {
		sub->steps[i] = (struct tu_step){ .log = sub->log, .id = sub->base + i, .sleep_ms = 0 };
		if (host_stream_launch(sub->s, tu_step_run, &sub->steps[i]))
			return (void *)1;
	}
	return NULL;
}

START_TEST(test_concurrent_submitters_keep_their_order)
{
	struct host_stream *s = new_stream();
	struct submitter subs[4];
	struct tu_log *log = malloc(sizeof(*log));
	int last[4] = { -1, -1, -1, -1 };
	pthread_t t[4];
	void *ret;
	int i, id;

	ck_assert_ptr_nonnull(log);
	tu_log_init(log);
	for (i = 0; i < 4; i++) {
		subs[i].s = s;
		subs[i].log = log;
		subs[i].base = i * 1000;
		ck_assert_int_eq(pthread_create(&t[i], NULL, submit_thread, &subs[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(t[i], &ret), 0);
		ck_assert_ptr_null(ret);
	}
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	ck_assert_int_eq(tu_log_count(log), 800);
	for (i = 0; i < 800; i++) {
		id = tu_log_at(log, i);
		ck_assert_int_gt(id % 1000, last[id / 1000]);
		last[id / 1000] = id % 1000;
	}
	host_stream_destroy(s);
	tu_log_destroy(log);
	free(log);
}
END_TEST

/* ---- two streams ----------------------------------------------------- */

struct rendezvous {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool b_arrived;
	bool a_saw_b;
};

static void rendezvous_a(void *arg)
{
	struct rendezvous *r = arg;
	struct timespec until = tu_deadline_in(TU_PATIENCE_MS);

	pthread_mutex_lock(&r->lock);
	while (!r->b_arrived)
		if (pthread_cond_timedwait(&r->cond, &r->lock, &until) == ETIMEDOUT)
			break;
	r->a_saw_b = r->b_arrived;
	pthread_mutex_unlock(&r->lock);
}

static void rendezvous_b(void *arg)
{
	struct rendezvous *r = arg;

	pthread_mutex_lock(&r->lock);
	r->b_arrived = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

START_TEST(test_streams_run_concurrently)
{
	struct host_stream *a = new_stream(), *b = new_stream();
	struct rendezvous r = { .b_arrived = false, .a_saw_b = false };

	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	/* A blocks until B's function runs: only concurrent streams finish. */
	ck_assert_int_eq(host_stream_launch(a, rendezvous_a, &r), 0);
	ck_assert_int_eq(host_stream_launch(b, rendezvous_b, &r), 0);
	ck_assert_int_eq(host_stream_synchronize(a), 0);
	ck_assert_int_eq(host_stream_synchronize(b), 0);
	ck_assert(r.a_saw_b);
	host_stream_destroy(a);
	host_stream_destroy(b);
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.lock);
}
END_TEST

/* ---- events ---------------------------------------------------------- */

START_TEST(test_never_recorded_event_is_complete)
{
	struct host_stream *s = new_stream();
	struct host_event *ev = new_event();
	struct tu_log log;
	struct tu_step st = { .log = &log, .id = 7, .sleep_ms = 0 };

	tu_log_init(&log);
	ck_assert(host_event_query(ev));
	host_event_synchronize(ev);	/* returns at once */
	/* A wait on it holds nothing. */
	ck_assert_int_eq(host_stream_wait_event(s, ev), 0);
	ck_assert_int_eq(host_stream_launch(s, tu_step_run, &st), 0);
	ck_assert_int_eq(host_stream_synchronize(s), 0);
	ck_assert_int_eq(tu_log_count(&log), 1);
	host_event_destroy(ev);
	host_stream_destroy(s);
	tu_log_destroy(&log);
}
END_TEST

START_TEST(test_event_completes_when_stream_reaches_it)
{
	struct host_stream *s = new_stream();
	struct host_event *ev = new_event();
	struct tu_gate g;

	tu_gate_init(&g);
	ck_assert_int_eq(host_stream_launch(s, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_event_record(ev, s), 0);
	ck_assert(tu_gate_wait_entered(&g));
	ck_assert(!host_event_query(ev));
	tu_gate_open(&g);
	host_event_synchronize(ev);
	ck_assert(host_event_query(ev));
	ck_assert(!tu_gate_timed_out(&g));
	host_event_destroy(ev);
	host_stream_destroy(s);
	tu_gate_destroy(&g);
}
END_TEST

struct opener {
	struct tu_gate *g;
	struct tu_log *log;
};

static void open_later_fn(void *arg)
{
	struct opener *o = arg;

	tu_sleep_ms(30);
	tu_log_add(o->log, 1);
	tu_gate_open(o->g);
}

START_TEST(test_event_synchronize_blocks_until_complete)
{
	struct host_stream *a = new_stream(), *b = new_stream();
	struct host_event *ev = new_event();
	struct tu_log log;
	struct tu_gate g;
	struct opener o = { &g, &log };
	struct tu_step after = { .log = &log, .id = 2, .sleep_ms = 0 };

	tu_log_init(&log);
	tu_gate_init(&g);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_stream_launch(a, tu_step_run, &after), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);
	/* Stream B opens A's gate; the caller blocks until A's record. */
	ck_assert_int_eq(host_stream_launch(b, open_later_fn, &o), 0);
	host_event_synchronize(ev);
	ck_assert_int_eq(tu_log_count(&log), 2);
	ck_assert_int_eq(tu_log_at(&log, 0), 1);
	ck_assert_int_eq(tu_log_at(&log, 1), 2);
	ck_assert(!tu_gate_timed_out(&g));
	host_event_destroy(ev);
	host_stream_destroy(a);
	host_stream_destroy(b);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

START_TEST(test_wait_event_orders_streams)
{
	struct host_stream *a = new_stream(), *b = new_stream();
	struct host_event *ev = new_event(), *b_done = new_event();
	struct tu_step sa = { .log = NULL, .id = 1, .sleep_ms = 30 };
	struct tu_step sb = { .log = NULL, .id = 2, .sleep_ms = 0 };
	struct tu_log log;
	struct tu_gate g;

	tu_log_init(&log);
	sa.log = sb.log = &log;
	tu_gate_init(&g);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_stream_launch(a, tu_step_run, &sa), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);
	ck_assert_int_eq(host_stream_wait_event(b, ev), 0);
	ck_assert_int_eq(host_stream_launch(b, tu_step_run, &sb), 0);
	ck_assert_int_eq(host_event_record(b_done, b), 0);

	/* B is free to run, yet held by the wait while A is gated. */
	ck_assert(tu_gate_wait_entered(&g));
	tu_sleep_ms(20);
	ck_assert(!host_event_query(b_done));
	ck_assert_int_eq(tu_log_count(&log), 0);
	tu_gate_open(&g);
	ck_assert_int_eq(host_stream_synchronize(b), 0);
	ck_assert_int_eq(tu_log_count(&log), 2);
	ck_assert_int_eq(tu_log_at(&log, 0), 1);
	ck_assert_int_eq(tu_log_at(&log, 1), 2);
	ck_assert(!tu_gate_timed_out(&g));
	host_event_destroy(ev);
	host_event_destroy(b_done);
	host_stream_destroy(a);
	host_stream_destroy(b);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

/*
 * A wait is for the record that was latest when it was queued.  Here that
 * record completes early; the event is then re-recorded behind a gate that
 * stays shut.  B must pass its wait anyway.
 */
START_TEST(test_wait_captures_record_as_of_call)
{
	struct host_stream *a = new_stream(), *b = new_stream();
	struct host_event *ev = new_event(), *b_done = new_event();
	struct tu_log log;
	struct tu_step sa = { .log = NULL, .id = 1, .sleep_ms = 0 };
	struct tu_step sb = { .log = NULL, .id = 2, .sleep_ms = 0 };
	struct tu_gate hold_a, hold_b;

	tu_log_init(&log);
	sa.log = sb.log = &log;
	tu_gate_init(&hold_a);
	tu_gate_init(&hold_b);
	/* B is gated so that its wait surely runs after the re-record. */
	ck_assert_int_eq(host_stream_launch(b, tu_gate_run, &hold_b), 0);
	ck_assert_int_eq(host_stream_launch(a, tu_step_run, &sa), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);		/* record 1 */
	ck_assert_int_eq(host_stream_wait_event(b, ev), 0);	/* waits for 1 */
	ck_assert_int_eq(host_stream_launch(b, tu_step_run, &sb), 0);
	ck_assert_int_eq(host_event_record(b_done, b), 0);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &hold_a), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);		/* record 2 */

	ck_assert(tu_gate_wait_entered(&hold_a));
	ck_assert(!host_event_query(ev));	/* the event is now record 2 */
	tu_gate_open(&hold_b);
	ck_assert(event_completes(b_done));	/* record 1 was enough */
	ck_assert(!host_event_query(ev));
	tu_gate_open(&hold_a);
	host_event_synchronize(ev);
	ck_assert_int_eq(tu_log_at(&log, 0), 1);
	ck_assert_int_eq(tu_log_at(&log, 1), 2);
	ck_assert(!tu_gate_timed_out(&hold_a));
	ck_assert(!tu_gate_timed_out(&hold_b));
	host_event_destroy(ev);
	host_event_destroy(b_done);
	host_stream_destroy(a);
	host_stream_destroy(b);
	tu_gate_destroy(&hold_a);
	tu_gate_destroy(&hold_b);
	tu_log_destroy(&log);
}
END_TEST

/*
 * The same, with record 1 still pending when record 2 is queued: the
 * queued wait must release when record 1 completes, while the event (now
 * record 2) is still incomplete.
 */
START_TEST(test_wait_unaffected_by_rerecord_while_pending)
{
	struct host_stream *a = new_stream(), *b = new_stream();
	struct host_event *ev = new_event(), *b_done = new_event();
	struct tu_gate first, second;

	tu_gate_init(&first);
	tu_gate_init(&second);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &first), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);		/* record 1 */
	ck_assert_int_eq(host_stream_wait_event(b, ev), 0);	/* waits for 1 */
	ck_assert_int_eq(host_event_record(b_done, b), 0);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &second), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);		/* record 2 */

	ck_assert(tu_gate_wait_entered(&first));
	tu_sleep_ms(20);
	ck_assert(!host_event_query(b_done));	/* record 1 still pending */
	tu_gate_open(&first);
	ck_assert(tu_gate_wait_entered(&second));
	ck_assert(event_completes(b_done));
	ck_assert(!host_event_query(ev));
	tu_gate_open(&second);
	host_event_synchronize(ev);
	ck_assert(host_event_query(ev));
	ck_assert(!tu_gate_timed_out(&first));
	ck_assert(!tu_gate_timed_out(&second));
	host_event_destroy(ev);
	host_event_destroy(b_done);
	host_stream_destroy(a);
	host_stream_destroy(b);
	tu_gate_destroy(&first);
	tu_gate_destroy(&second);
}
END_TEST

/*
 * Records of one event on two streams complete out of order.  The event's
 * state is its latest record's; a wait queued before the re-record still
 * waits for the older one.
 */
START_TEST(test_records_on_two_streams)
{
	struct host_stream *a = new_stream(), *b = new_stream(), *c = new_stream();
	struct host_event *ev = new_event(), *c_done = new_event();
	struct tu_gate g;

	tu_gate_init(&g);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);		/* record 1, gated */
	ck_assert_int_eq(host_stream_wait_event(c, ev), 0);	/* waits for 1 */
	ck_assert_int_eq(host_event_record(c_done, c), 0);
	ck_assert_int_eq(host_event_record(ev, b), 0);		/* record 2, free */

	ck_assert_int_eq(host_stream_synchronize(b), 0);
	ck_assert(host_event_query(ev));	/* latest is record 2: done */
	host_event_synchronize(ev);
	ck_assert(!host_event_query(c_done));	/* still held by record 1 */
	tu_gate_open(&g);
	ck_assert(event_completes(c_done));
	ck_assert(!tu_gate_timed_out(&g));
	host_event_destroy(ev);
	host_event_destroy(c_done);
	host_stream_destroy(a);
	host_stream_destroy(b);
	host_stream_destroy(c);
	tu_gate_destroy(&g);
}
END_TEST

/* The core recycles events: one may be destroyed with a wait queued. */
START_TEST(test_event_destroyed_with_queued_wait)
{
	struct host_stream *a = new_stream(), *b = new_stream();
	struct host_event *ev = new_event();
	struct tu_log log;
	struct tu_step sa = { .log = NULL, .id = 1, .sleep_ms = 10 };
	struct tu_step sb = { .log = NULL, .id = 2, .sleep_ms = 0 };
	struct tu_gate g;

	tu_log_init(&log);
	sa.log = sb.log = &log;
	tu_gate_init(&g);
	ck_assert_int_eq(host_stream_launch(a, tu_gate_run, &g), 0);
	ck_assert_int_eq(host_stream_launch(a, tu_step_run, &sa), 0);
	ck_assert_int_eq(host_event_record(ev, a), 0);
	ck_assert_int_eq(host_stream_wait_event(b, ev), 0);
	ck_assert_int_eq(host_stream_launch(b, tu_step_run, &sb), 0);
	host_event_destroy(ev);		/* the queued mark and wait keep it */
	tu_gate_open(&g);
	ck_assert_int_eq(host_stream_synchronize(b), 0);
	ck_assert_int_eq(tu_log_count(&log), 2);
	ck_assert_int_eq(tu_log_at(&log, 0), 1);
	ck_assert_int_eq(tu_log_at(&log, 1), 2);
	host_stream_destroy(a);
	host_stream_destroy(b);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

/*
 * A chain of streams, each waiting on the previous one's event: the log
 * follows the chain although earlier links sleep longer.
 */
START_TEST(test_chain_of_streams)
{
	enum { N = 8 };
	struct host_stream *s[N];
	struct host_event *ev[N];
	struct tu_step steps[N];
	struct tu_log log;
	int i;

	tu_log_init(&log);
	for (i = 0; i < N; i++) {
		s[i] = new_stream();
		ev[i] = new_event();
	}
	for (i = 0; i < N; i++) {
		steps[i] = (struct tu_step){ .log = &log, .id = i, .sleep_ms = (2 * (N - i)) };
		if (i)
			ck_assert_int_eq(host_stream_wait_event(s[i], ev[i - 1]), 0);
		ck_assert_int_eq(host_stream_launch(s[i], tu_step_run, &steps[i]), 0);
		ck_assert_int_eq(host_event_record(ev[i], s[i]), 0);
	}
	host_event_synchronize(ev[N - 1]);
	ck_assert_int_eq(tu_log_count(&log), N);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(tu_log_at(&log, i), i);
	for (i = 0; i < N; i++) {
		host_stream_destroy(s[i]);
		host_event_destroy(ev[i]);
	}
	tu_log_destroy(&log);
}
END_TEST

/*
 * Two streams take turns through two events that are re-recorded every
 * round while waits on their previous records may still be queued.
 */
START_TEST(test_ping_pong_rerecorded_events)
{
	enum { ROUNDS = 500 };
	struct host_stream *a = new_stream(), *b = new_stream();
	struct host_event *ping = new_event(), *pong = new_event();
	struct tu_step *steps = calloc(2 * ROUNDS, sizeof(*steps));
	struct tu_log *log = malloc(sizeof(*log));
	int i;

	ck_assert_ptr_nonnull(steps);
	ck_assert_ptr_nonnull(log);
	tu_log_init(log);
	for (i = 0; i < ROUNDS; i++) {
		steps[2 * i] = (struct tu_step){ .log = log, .id = 2 * i, .sleep_ms = 0 };
		steps[2 * i + 1] = (struct tu_step){ .log = log, .id = 2 * i + 1, .sleep_ms = 0 };
		ck_assert_int_eq(host_stream_wait_event(a, pong), 0);
		ck_assert_int_eq(host_stream_launch(a, tu_step_run, &steps[2 * i]), 0);
		ck_assert_int_eq(host_event_record(ping, a), 0);
		ck_assert_int_eq(host_stream_wait_event(b, ping), 0);
		ck_assert_int_eq(host_stream_launch(b, tu_step_run, &steps[2 * i + 1]), 0);
		ck_assert_int_eq(host_event_record(pong, b), 0);
	}
	ck_assert_int_eq(host_stream_synchronize(b), 0);
	ck_assert_int_eq(host_stream_synchronize(a), 0);
	ck_assert_int_eq(tu_log_count(log), 2 * ROUNDS);
	for (i = 0; i < 2 * ROUNDS; i++)
		ck_assert_int_eq(tu_log_at(log, i), i);
	host_event_destroy(ping);
	host_event_destroy(pong);
	host_stream_destroy(a);
	host_stream_destroy(b);
	tu_log_destroy(log);
	free(log);
	free(steps);
}
END_TEST

/*
 * One thread records an event on a stream while another queues waits on
 * it on the same stream.  Each wait must land behind the record it
 * captured, or the stream would wait for a mark queued behind itself.
 */
struct racer_args {
	struct host_stream *s;
	struct host_event *ev;
	int errors;
};

static void *record_racer(void *arg)
{
	struct racer_args *r = arg;
	int i;

	for (i = 0; i < 3000; i++)
		r->errors += host_event_record(r->ev, r->s) != 0;
	return NULL;
}

static void *wait_racer(void *arg)
{
	struct racer_args *r = arg;
	int i;

	for (i = 0; i < 3000; i++)
		r->errors += host_stream_wait_event(r->s, r->ev) != 0;
	return NULL;
}

START_TEST(test_concurrent_record_and_wait_on_one_stream)
{
	struct host_stream *s = new_stream();
	struct host_event *ev = new_event(), *done = new_event();
	struct racer_args rec = { s, ev, 0 }, wait = { s, ev, 0 };
	pthread_t t1, t2;

	ck_assert_int_eq(pthread_create(&t1, NULL, record_racer, &rec), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, wait_racer, &wait), 0);
	ck_assert_int_eq(pthread_join(t1, NULL), 0);
	ck_assert_int_eq(pthread_join(t2, NULL), 0);
	ck_assert_int_eq(rec.errors + wait.errors, 0);
	ck_assert_int_eq(host_event_record(done, s), 0);
	ck_assert_msg(event_completes(done), "the stream is stuck in a wait");
	ck_assert(host_event_query(ev));
	host_event_destroy(ev);
	host_event_destroy(done);
	host_stream_destroy(s);
}
END_TEST

/* ---- the module, as the core loads it ------------------------------- */

static void *module;
static const struct xdm_ops *platform, *backend;

static void module_setup(void)
{
	const struct xdm_ops *const *tables;
	int count;

	tables = tu_module_open("backends", "host", &module, &count);
	/* The platform, host, and host_vmm (check_host_vmm tests that one). */
	ck_assert_int_eq(count, 3);
	platform = tu_module_table(tables, XDM_KIND_PLATFORM, "host");
	backend = tu_module_table(tables, XDM_KIND_BACKEND, "host");
}

static void module_teardown(void)
{
	tu_module_close(&module);
}

/* A module symbol through the module's own scope (libxdm is its dependency). */
static void *module_sym(const char *name)
{
	void *p = dlsym(module, name);

	ck_assert_msg(p != NULL, "no %s: %s", name, dlerror());
	return p;
}

START_TEST(test_module_tables)
{
	const struct xdm_param_spec *p;
	const struct xdm_attr *a;
	int n;

	ck_assert_str_eq(platform->name, "host");
	ck_assert_str_eq(backend->name, "host");
	ck_assert_uint_eq(platform->abi_major, XDM_ABI_MAJOR);
	ck_assert_uint_eq(backend->abi_major, XDM_ABI_MAJOR);
	ck_assert_uint_eq(platform->size, sizeof(struct xdm_ops));
	ck_assert_uint_ge(backend->size, XDM_OPS_MIN_SIZE);
	ck_assert_str_eq(platform->default_stack, "pool | host");

	/* Every platform method is there. */
	ck_assert_ptr_nonnull(platform->init);
	ck_assert_ptr_nonnull(platform->fini);
	ck_assert_ptr_nonnull(platform->device_info);
	ck_assert_ptr_nonnull(platform->stream_create);
	ck_assert_ptr_nonnull(platform->stream_destroy);
	ck_assert_ptr_nonnull(platform->stream_synchronize);
	ck_assert_ptr_nonnull(platform->event_create);
	ck_assert_ptr_nonnull(platform->event_destroy);
	ck_assert_ptr_nonnull(platform->event_record);
	ck_assert_ptr_nonnull(platform->stream_wait_event);
	ck_assert_ptr_nonnull(platform->event_query);
	ck_assert_ptr_nonnull(platform->event_synchronize);
	ck_assert_ptr_nonnull(platform->launch_host_func);
	ck_assert_ptr_nonnull(platform->memset_async);
	ck_assert_ptr_nonnull(platform->memcpy_async);
	/* It maps what another process's host backend shared (ipc=true). */
	ck_assert_ptr_nonnull(platform->ipc_import);
	ck_assert_ptr_nonnull(platform->ipc_unmap);

	/* The backend tracks through the core: all four methods set. */
	ck_assert_ptr_nonnull(backend->allocate);
	ck_assert_ptr_nonnull(backend->deallocate);
	ck_assert_ptr_nonnull(backend->bytes_outstanding);
	ck_assert_ptr_nonnull(backend->reap_pending);
	ck_assert_ptr_nonnull(backend->record_block_use);
	ck_assert_ptr_nonnull(backend->supports_block_use_tracking);
	ck_assert_ptr_nonnull(backend->prepare_block_use);
	ck_assert_ptr_nonnull(backend->finish_block_use);

	ck_assert_str_eq(platform->params[0].name, "devices");
	ck_assert_str_eq(platform->params[0].default_value, "1");
	ck_assert_str_eq(platform->params[1].name, "memory");
	ck_assert_str_eq(platform->params[2].name, "visible");
	ck_assert_ptr_null(platform->params[2].default_value);
	ck_assert_ptr_null(platform->params[3].name);
	for (p = backend->params, n = 0; p->name; p++, n++)
		if (!strcmp(p->name, "free"))
			ck_assert_str_eq(p->default_value, "stream");
		else if (!strcmp(p->name, "ipc"))
			ck_assert_str_eq(p->default_value, "false");
	ck_assert_int_eq(n, 2);
	ck_assert_ptr_nonnull(backend->ipc_export);
	for (a = backend->attrs, n = 0; a->name; a++, n++) {
		ck_assert_uint_eq(a->mode, 0444);
		ck_assert_ptr_nonnull(a->show);
		ck_assert_ptr_null(a->store);
	}
	ck_assert_int_eq(n, 4);
}
END_TEST

START_TEST(test_module_exports_only_entry)
{
	/* -fvisibility=hidden: the queue's functions stay inside host.so. */
	ck_assert_ptr_null(dlsym(module, "host_stream_create"));
	ck_assert_ptr_null(dlsym(module, "host_platform_ops"));
	ck_assert_ptr_null(dlsym(module, "host_backend_ops"));
	ck_assert_ptr_null(dlsym(module, "host_vmm_ops"));
	ck_assert_ptr_null(dlsym(module, "vrange_find"));
}
END_TEST

START_TEST(test_module_platform_rejects_null)
{
	const char *(*last_message)(void) = module_sym("xdm_last_error_message");
	void *s = NULL, *ev = NULL;
	bool done;

	ck_assert_int_eq(platform->stream_synchronize(NULL, NULL), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(last_message(), "stream_synchronize"));
	ck_assert_int_eq(platform->stream_create(NULL, NULL), XDM_E_INVALID);
	ck_assert_int_eq(platform->event_create(NULL, NULL), XDM_E_INVALID);
	ck_assert_int_eq(platform->event_query(NULL, NULL, &done), XDM_E_INVALID);
	ck_assert_int_eq(platform->event_synchronize(NULL, NULL), XDM_E_INVALID);

	ck_assert_int_eq(platform->stream_create(NULL, &s), XDM_OK);
	ck_assert_int_eq(platform->event_create(NULL, &ev), XDM_OK);
	ck_assert_int_eq(platform->event_record(NULL, NULL, s), XDM_E_INVALID);
	ck_assert_int_eq(platform->event_record(NULL, ev, NULL), XDM_E_INVALID);
	ck_assert_int_eq(platform->stream_wait_event(NULL, NULL, ev), XDM_E_INVALID);
	ck_assert_int_eq(platform->stream_wait_event(NULL, s, NULL), XDM_E_INVALID);
	ck_assert_int_eq(platform->launch_host_func(NULL, s, NULL, NULL), XDM_E_INVALID);
	ck_assert_int_eq(platform->launch_host_func(NULL, NULL, tu_gate_run, NULL), XDM_E_INVALID);
	ck_assert_int_eq(platform->memset_async(NULL, 0, 0, 16, s), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(last_message(), "address 0"));
	ck_assert_int_eq(platform->memcpy_async(NULL, 0, 0, 16, s), XDM_E_INVALID);
	ck_assert_int_eq(platform->memset_async(NULL, 0, 0, 0, s), XDM_OK);
	platform->event_destroy(NULL, ev);
	platform->stream_destroy(NULL, s);
	platform->stream_destroy(NULL, NULL);
	platform->event_destroy(NULL, NULL);
}
END_TEST

struct op_probe {
	void *s;
	enum xdm_status st;
};

/* The streams and events of this platform need no layer: self is unused. */
static void self_sync_op_fn(void *arg)
{
	struct op_probe *p = arg;

	p->st = platform->stream_synchronize(NULL, p->s);
}

START_TEST(test_module_platform_through_table)
{
	void *a = NULL, *b = NULL, *ev = NULL;
	unsigned char src[256], dst[256];
	struct op_probe probe = { NULL, XDM_OK };
	struct tu_log log;
	struct tu_step sa = { .log = NULL, .id = 1, .sleep_ms = 20 };
	struct tu_step sb = { .log = NULL, .id = 2, .sleep_ms = 0 };
	bool done = false;
	int i;

	tu_log_init(&log);
	sa.log = sb.log = &log;
	memset(src, 0x5a, sizeof(src));
	memset(dst, 0, sizeof(dst));
	ck_assert_int_eq(platform->stream_create(NULL, &a), XDM_OK);
	ck_assert_int_eq(platform->stream_create(NULL, &b), XDM_OK);
	ck_assert_int_eq(platform->event_create(NULL, &ev), XDM_OK);
	ck_assert_int_eq(platform->event_query(NULL, ev, &done), XDM_OK);
	ck_assert(done);

	ck_assert_int_eq(platform->launch_host_func(NULL, a, tu_step_run, &sa), XDM_OK);
	ck_assert_int_eq(platform->memcpy_async(NULL, (uintptr_t)dst, (uintptr_t)src, 128, a),
			 XDM_OK);
	ck_assert_int_eq(platform->memset_async(NULL, (uintptr_t)dst + 64, 0x33, 32, a), XDM_OK);
	ck_assert_int_eq(platform->event_record(NULL, ev, a), XDM_OK);
	ck_assert_int_eq(platform->stream_wait_event(NULL, b, ev), XDM_OK);
	ck_assert_int_eq(platform->launch_host_func(NULL, b, tu_step_run, &sb), XDM_OK);
	ck_assert_int_eq(platform->stream_synchronize(NULL, b), XDM_OK);
	ck_assert_int_eq(tu_log_at(&log, 0), 1);
	ck_assert_int_eq(tu_log_at(&log, 1), 2);
	ck_assert_int_eq(platform->event_synchronize(NULL, ev), XDM_OK);
	ck_assert_int_eq(platform->event_query(NULL, ev, &done), XDM_OK);
	ck_assert(done);
	for (i = 0; i < 256; i++)
		ck_assert_uint_eq(dst[i], i >= 128 ? 0 : (i >= 64 && i < 96) ? 0x33 : 0x5a);

	/* Synchronizing a stream from its own host function is misuse. */
	probe.s = a;
	ck_assert_int_eq(platform->launch_host_func(NULL, a, self_sync_op_fn, &probe), XDM_OK);
	ck_assert_int_eq(platform->stream_synchronize(NULL, a), XDM_OK);
	ck_assert_int_eq(probe.st, XDM_E_STREAM_MISUSE);

	platform->event_destroy(NULL, ev);
	platform->stream_destroy(NULL, a);
	platform->stream_destroy(NULL, b);
	tu_log_destroy(&log);
}
END_TEST

/* ---- the backend, through a runtime --------------------------------- */

static struct xdm_runtime *host_runtime(const char *stack)
{
	struct xdm_runtime *rt = NULL;
	enum xdm_status st = xdm_runtime_create(0, "host", stack, &rt);

	ck_assert_msg(st == XDM_OK, "xdm_runtime_create(host, %s): %s", stack,
		      xdm_last_error_message());
	return rt;
}

/* A layer attribute as a number; the value must end in a newline. */
static uint64_t attr(struct xdm_runtime *rt, const char *name)
{
	char buf[64], *end;
	uint64_t v;

	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)), XDM_OK);
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && !strcmp(end, "\n"), "%s shows '%s'", name, buf);
	return v;
}

/* Behind a gate, write into a block: proves the memory is still there. */
struct late_write {
	struct tu_gate *g;
	unsigned char *mem;
	size_t bytes;
	struct tu_log *log;
};

static void late_write_fn(void *arg)
{
	struct late_write *w = arg;

	tu_gate_run(w->g);
	memset(w->mem, 0x5c, w->bytes);
	tu_log_add(w->log, 1);
}

START_TEST(test_backend_allocates_aligned_host_memory)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b, huge;

	ck_assert_int_eq(xdm_allocate(rt, 1, 2, "one", &b), XDM_OK);
	ck_assert_uint_ne(b.ptr, 0);
	ck_assert_uint_eq(b.ptr % XDM_DEFAULT_ALIGN, 0);
	ck_assert_uint_eq(b.align, XDM_DEFAULT_ALIGN);
	ck_assert_uint_eq(b.bytes, 1);
	ck_assert_uint_eq(b.stream, 2);
	ck_assert_str_eq(b.tag, "one");
	ck_assert_int_eq(b.state, XDM_BLOCK_LIVE);
	/* The whole rounded size is usable (ASan would see an overrun). */
	memset((void *)(uintptr_t)b.ptr, 0, XDM_DEFAULT_ALIGN);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 1);
	ck_assert_uint_eq(attr(rt, "allocs"), 1);

	ck_assert_int_eq(xdm_allocate(rt, SIZE_MAX - 10, 0, "huge", &huge), XDM_E_OUT_OF_MEMORY);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "host backend"));
	ck_assert_uint_eq(attr(rt, "allocs"), 1);
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_OK);
	ck_assert_int_eq(xdm_reap_pending(rt), XDM_OK);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
}
END_TEST

START_TEST(test_backend_stream_free_waits_for_its_stream)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b;
	struct tu_log log;
	struct tu_gate g;
	struct late_write w;
	unsigned char *mem;

	tu_log_init(&log);
	tu_gate_init(&g);
	ck_assert(xdm_supports_block_use_tracking(rt));
	ck_assert_int_eq(xdm_allocate(rt, 4096, 1, "t", &b), XDM_OK);
	mem = (unsigned char *)(uintptr_t)b.ptr;
	w = (struct late_write){ &g, mem, 4096, &log };
	ck_assert_int_eq(xdm_stream_launch_host(rt, 1, late_write_fn, &w), XDM_OK);
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_OK);
	ck_assert_int_eq(b.state, XDM_BLOCK_RETIRED);

	/* The free sits behind the gated write: still counted, still memory. */
	ck_assert(tu_gate_wait_entered(&g));
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 4096);
	ck_assert_uint_eq(attr(rt, "bytes_outstanding"), 4096);
	ck_assert_uint_eq(attr(rt, "pending_frees"), 1);
	ck_assert_uint_eq(attr(rt, "frees"), 0);
	tu_gate_open(&g);
	ck_assert_int_eq(xdm_reap_pending(rt), XDM_OK);
	ck_assert_int_eq(tu_log_count(&log), 1);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_uint_eq(attr(rt, "pending_frees"), 0);
	ck_assert_uint_eq(attr(rt, "frees"), 1);
	ck_assert_uint_eq(attr(rt, "allocs"), 1);
	ck_assert(!tu_gate_timed_out(&g));
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

/* A cross-stream use delays the free: the core queues the wait on the
 * allocation stream, and the free queued there after it must follow. */
START_TEST(test_backend_stream_free_after_cross_stream_use)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b;
	struct xdm_block_id id;
	struct tu_log log;
	struct tu_gate g;
	struct late_write w;

	tu_log_init(&log);
	tu_gate_init(&g);
	ck_assert_int_eq(xdm_allocate(rt, 8192, 0, "t", &b), XDM_OK);
	id = xdm_block_id_of(&b);
	w = (struct late_write){ &g, (unsigned char *)(uintptr_t)b.ptr, 8192, &log };
	ck_assert_int_eq(xdm_prepare_block_use(rt, id, 3, XDM_ACCESS_WRITE), XDM_OK);
	ck_assert_int_eq(xdm_stream_launch_host(rt, 3, late_write_fn, &w), XDM_OK);
	ck_assert_int_eq(xdm_finish_block_use(rt, id, 3, XDM_ACCESS_WRITE), XDM_OK);
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_OK);

	/* Stream 0 is free to run but held by the wait on stream 3's use;
	 * the pause only gives a missing wait the chance to show. */
	ck_assert(tu_gate_wait_entered(&g));
	tu_sleep_ms(20);
	ck_assert_uint_eq(attr(rt, "pending_frees"), 1);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 8192);
	tu_gate_open(&g);
	ck_assert_int_eq(xdm_reap_pending(rt), XDM_OK);
	ck_assert_int_eq(tu_log_count(&log), 1);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_uint_eq(attr(rt, "frees"), 1);
	ck_assert(!tu_gate_timed_out(&g));
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

struct delayed_open {
	struct tu_gate *g;
	pthread_t thread;
};

static void *delayed_open_thread(void *arg)
{
	struct delayed_open *d = arg;

	tu_sleep_ms(30);
	tu_gate_open(d->g);
	return NULL;
}

START_TEST(test_backend_sync_free)
{
	struct xdm_runtime *rt = host_runtime("host free=sync");
	struct xdm_block b;
	struct xdm_block_id id;
	struct tu_log log;
	struct tu_gate g;
	struct late_write w;
	struct delayed_open d = { &g, 0 };

	tu_log_init(&log);
	tu_gate_init(&g);
	ck_assert(!xdm_supports_block_use_tracking(rt));
	ck_assert_int_eq(xdm_allocate(rt, 4096, 2, "t", &b), XDM_OK);
	id = xdm_block_id_of(&b);
	ck_assert_int_eq(xdm_prepare_block_use(rt, id, 1, XDM_ACCESS_READ), XDM_E_STREAM_MISUSE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "free=stream"));
	ck_assert_int_eq(xdm_finish_block_use(rt, id, 1, XDM_ACCESS_READ), XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_record_block_use(rt, &b, 1), XDM_E_STREAM_MISUSE);

	/* A gated write on another stream: the free waits for the streams to
	 * drain, as cuMemFree waits for the device, and then is done. */
	w = (struct late_write){ &g, (unsigned char *)(uintptr_t)b.ptr, 4096, &log };
	ck_assert_int_eq(xdm_stream_launch_host(rt, 1, late_write_fn, &w), XDM_OK);
	ck_assert(tu_gate_wait_entered(&g));
	ck_assert_int_eq(pthread_create(&d.thread, NULL, delayed_open_thread, &d), 0);
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_OK);
	ck_assert_int_eq(tu_log_count(&log), 1);
	ck_assert_int_eq(b.state, XDM_BLOCK_FREED);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_uint_eq(attr(rt, "pending_frees"), 0);
	ck_assert_uint_eq(attr(rt, "frees"), 1);
	ck_assert_int_eq(pthread_join(d.thread, NULL), 0);
	ck_assert(!tu_gate_timed_out(&g));
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
	tu_gate_destroy(&g);
	tu_log_destroy(&log);
}
END_TEST

START_TEST(test_backend_rejects_bad_free_mode)
{
	struct xdm_runtime *rt = NULL;

	ck_assert_int_eq(xdm_runtime_create(0, "host", "host free=later", &rt), XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(),
				     "free must be 'stream' or 'sync', not 'later'"));
	ck_assert_ptr_null(rt);
}
END_TEST

START_TEST(test_platform_describes_device)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_device_info dev;
	uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);

	ck_assert_int_eq(xdm_runtime_device(rt, &dev), XDM_OK);
	ck_assert_str_eq(dev.name, "host");
	ck_assert_str_eq(dev.platform, "host");
	ck_assert_str_eq(dev.uuid, "686f7374-0000-4000-8000-000000000000");
	ck_assert_uint_eq(dev.total_bytes, ram);
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);

	/* devices=1 by default: ordinal 1 has no host device. */
	rt = NULL;
	ck_assert_int_eq(xdm_runtime_create(1, "host", "host", &rt), XDM_E_NO_DEVICE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "devices=1"));
}
END_TEST

/* Threads allocate and free on their own streams at once. */
struct churn {
	struct xdm_runtime *rt;
	xdm_stream_id stream;
	int failures;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	struct xdm_block b[8];
	int round, i;

	for (round = 0; round < 200; round++) {
		for (i = 0; i < 8; i++)
			if (xdm_allocate(c->rt, 64 + 100 * (size_t)i, c->stream, "churn", &b[i]))
				c->failures++;
		for (i = 0; i < 8; i++)
			if (xdm_deallocate(c->rt, &b[i]))
				c->failures++;
	}
	return NULL;
}

START_TEST(test_backend_concurrent_churn)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct churn c[4];
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++) {
		c[i] = (struct churn){ rt, (xdm_stream_id)i, 0 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn_thread, &c[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_int_eq(c[i].failures, 0);
	}
	ck_assert_int_eq(xdm_reap_pending(rt), XDM_OK);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	ck_assert_uint_eq(attr(rt, "allocs"), 4 * 200 * 8);
	ck_assert_uint_eq(attr(rt, "frees"), 4 * 200 * 8);
	ck_assert_uint_eq(attr(rt, "pending_frees"), 0);
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
}
END_TEST

/* Destroying a runtime with frees still queued runs them first. */
START_TEST(test_backend_destroy_with_pending_frees)
{
	struct xdm_runtime *rt = host_runtime("host");
	struct xdm_block b[16];
	struct tu_step slow = { .log = NULL, .id = 1, .sleep_ms = 30 };
	struct tu_log log;
	int i;

	tu_log_init(&log);
	slow.log = &log;
	ck_assert_int_eq(xdm_stream_launch_host(rt, 0, tu_step_run, &slow), XDM_OK);
	for (i = 0; i < 16; i++)
		ck_assert_int_eq(xdm_allocate(rt, 1 << 16, 0, "t", &b[i]), XDM_OK);
	for (i = 0; i < 16; i++)
		ck_assert_int_eq(xdm_deallocate(rt, &b[i]), XDM_OK);
	/* LeakSanitizer, in a sanitizer build, checks that all 16 were freed. */
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
	ck_assert_int_eq(tu_log_count(&log), 1);
	tu_log_destroy(&log);
}
END_TEST

static Suite *host_platform_suite(void)
{
	Suite *s = suite_create("host_platform");
	TCase *tc;

	tc = tcase_create("stream");
	tcase_add_test(tc, test_fifo_order);
	tcase_add_test(tc, test_launch_is_asynchronous);
	tcase_add_test(tc, test_synchronize_drains);
	tcase_add_test(tc, test_synchronize_from_own_worker_refused);
	tcase_add_test(tc, test_destroy_drains_then_joins);
	tcase_add_test(tc, test_memset_memcpy_in_order);
	tcase_add_test(tc, test_concurrent_submitters_keep_their_order);
	tcase_add_test(tc, test_streams_run_concurrently);
	suite_add_tcase(s, tc);

	tc = tcase_create("event");
	tcase_add_test(tc, test_never_recorded_event_is_complete);
	tcase_add_test(tc, test_event_completes_when_stream_reaches_it);
	tcase_add_test(tc, test_event_synchronize_blocks_until_complete);
	tcase_add_test(tc, test_wait_event_orders_streams);
	tcase_add_test(tc, test_wait_captures_record_as_of_call);
	tcase_add_test(tc, test_wait_unaffected_by_rerecord_while_pending);
	tcase_add_test(tc, test_records_on_two_streams);
	tcase_add_test(tc, test_event_destroyed_with_queued_wait);
	tcase_add_test(tc, test_chain_of_streams);
	tcase_add_test(tc, test_ping_pong_rerecorded_events);
	tcase_add_test(tc, test_concurrent_record_and_wait_on_one_stream);
	suite_add_tcase(s, tc);

	/* Outside `make check` (no XDM_TOP_BUILDDIR) there is no built
	 * module to load, nor a module path; the queue cases still run. */
	if (getenv("XDM_TOP_BUILDDIR")) {
		tc = tcase_create("module");
		tcase_add_checked_fixture(tc, module_setup, module_teardown);
		tcase_add_test(tc, test_module_tables);
		tcase_add_test(tc, test_module_exports_only_entry);
		tcase_add_test(tc, test_module_platform_rejects_null);
		tcase_add_test(tc, test_module_platform_through_table);
		suite_add_tcase(s, tc);

		tc = tcase_create("runtime");
		tcase_add_test(tc, test_backend_allocates_aligned_host_memory);
		tcase_add_test(tc, test_backend_stream_free_waits_for_its_stream);
		tcase_add_test(tc, test_backend_stream_free_after_cross_stream_use);
		tcase_add_test(tc, test_backend_sync_free);
		tcase_add_test(tc, test_backend_rejects_bad_free_mode);
		tcase_add_test(tc, test_platform_describes_device);
		tcase_add_test(tc, test_backend_concurrent_churn);
		tcase_add_test(tc, test_backend_destroy_with_pending_frees);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(host_platform_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
