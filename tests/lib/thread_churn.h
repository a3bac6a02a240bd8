/* SPDX-License-Identifier: MIT */
/*
 * thread_churn.h - several threads allocating and freeing on one runtime,
 * each also freeing blocks that another thread allocated, by a fixed plan:
 * the counts the runtime must show afterwards are known exactly, however
 * the threads are scheduled.  Barriers order the phases; nothing waits on
 * time.  Used by check_runtime (xdm_runtime_stats) and check_tree (the
 * runtime's files).
 */
#ifndef XDM_TESTS_THREAD_CHURN_H
#define XDM_TESTS_THREAD_CHURN_H

#include <pthread.h>
#include <stdatomic.h>

#include "tests/lib/testutil.h"

#define CHURN_THREADS 8
#define CHURN_BLOCKS 64		/* per thread; a multiple of 4 */

struct churn;

struct churn_thread {
	struct churn *c;
	int t;
	pthread_t th;
	/* Usable bytes of its allocations and of the blocks it freed, by the
	 * blocks the calls returned and consumed: read after the barrier. */
	uint64_t allocated, freed;
};

struct churn {
	struct xdm_runtime *rt;
	pthread_barrier_t allocated;	/* the threads: every first block exists */
	pthread_barrier_t done;		/* the threads and the test: all quiet */
	pthread_barrier_t leave;	/* the test lets the threads exit */
	struct churn_thread thread[CHURN_THREADS];
	struct xdm_block blocks[CHURN_THREADS][CHURN_BLOCKS];
	_Atomic int failed;		/* calls that did not return XDM_OK */
};

/* 256 B to 16 KiB, different for each thread, block and round. */
static inline size_t churn_size(int t, int i, int round)
{
	return 256u * (1u + (unsigned int)(t * 131 + i * 17 + round * 7) % 64u);
}

static inline void churn_call(struct churn *c, enum xdm_status st)
{
	if (st != XDM_OK)
		atomic_fetch_add(&c->failed, 1);
}

static inline void churn_alloc(struct churn_thread *me, int t, int i, int round)
{
	struct churn *c = me->c;
	enum xdm_status st = xdm_allocate(c->rt, churn_size(t, i, round), (xdm_stream_id)(t % 4),
					  "churn", &c->blocks[t][i]);

	churn_call(c, st);
	if (st == XDM_OK)
		me->allocated += c->blocks[t][i].bytes;
}

static inline void churn_free(struct churn_thread *me, struct xdm_block *b)
{
	enum xdm_status st = xdm_deallocate(me->c->rt, b);

	churn_call(me->c, st);
	if (st == XDM_OK)
		me->freed += b->bytes;
}

/*
 * Thread t allocates its blocks; then frees the even blocks of thread t+1
 * and frees and allocates again its own blocks 1, 5, 9, ...  So its odd
 * blocks are live at the end, every block of every thread once allocated.
 */
static inline void *churn_run(void *arg)
{
	struct churn_thread *me = arg;
	struct churn *c = me->c;
	int t = me->t, next = (t + 1) % CHURN_THREADS;

	for (int i = 0; i < CHURN_BLOCKS; i++)
		churn_alloc(me, t, i, 0);
	pthread_barrier_wait(&c->allocated);
	for (int i = 0; i < CHURN_BLOCKS; i += 2)
		churn_free(me, &c->blocks[next][i]);
	for (int i = 1; i < CHURN_BLOCKS; i += 4) {
		churn_free(me, &c->blocks[t][i]);
		churn_alloc(me, t, i, 1);
	}
	pthread_barrier_wait(&c->done);
	pthread_barrier_wait(&c->leave);
	return NULL;
}

/* Start the threads; returns once they are all done and still alive. */
static inline void churn_start(struct churn *c, struct xdm_runtime *rt)
{
	c->rt = rt;
	atomic_init(&c->failed, 0);
	ck_assert_int_eq(pthread_barrier_init(&c->allocated, NULL, CHURN_THREADS), 0);
	ck_assert_int_eq(pthread_barrier_init(&c->done, NULL, CHURN_THREADS + 1), 0);
	ck_assert_int_eq(pthread_barrier_init(&c->leave, NULL, CHURN_THREADS + 1), 0);
	for (int t = 0; t < CHURN_THREADS; t++) {
		c->thread[t] = (struct churn_thread){ .c = c, .t = t };
		ck_assert_int_eq(pthread_create(&c->thread[t].th, NULL, churn_run, &c->thread[t]),
				 0);
	}
	pthread_barrier_wait(&c->done);
	ck_assert_int_eq(atomic_load(&c->failed), 0);
}

/* Let the threads exit, and wait for them. */
static inline void churn_finish(struct churn *c)
{
	pthread_barrier_wait(&c->leave);
	for (int t = 0; t < CHURN_THREADS; t++)
		ck_assert_int_eq(pthread_join(c->thread[t].th, NULL), 0);
	pthread_barrier_destroy(&c->allocated);
	pthread_barrier_destroy(&c->done);
	pthread_barrier_destroy(&c->leave);
}

/* What the counters must say once every thread is done. */
static inline struct xdm_stats churn_expected(const struct churn *c)
{
	struct xdm_stats want = { 0 };

	want.allocs = CHURN_THREADS * (CHURN_BLOCKS + CHURN_BLOCKS / 4);
	want.frees = CHURN_THREADS * (CHURN_BLOCKS / 2 + CHURN_BLOCKS / 4);
	for (int t = 0; t < CHURN_THREADS; t++) {
		want.bytes_allocated += c->thread[t].allocated;
		want.bytes_freed += c->thread[t].freed;
		for (int i = 1; i < CHURN_BLOCKS; i += 2) {
			want.blocks_outstanding++;
			want.bytes_outstanding += c->blocks[t][i].bytes;
		}
	}
	return want;
}

/* The test frees the blocks the threads left live; want then counts them. */
static inline void churn_free_live(struct churn *c, struct xdm_stats *want)
{
	for (int t = 0; t < CHURN_THREADS; t++) {
		for (int i = 1; i < CHURN_BLOCKS; i += 2) {
			TU_OK(xdm_deallocate(c->rt, &c->blocks[t][i]));
			want->frees++;
			want->bytes_freed += c->blocks[t][i].bytes;
		}
	}
	want->blocks_outstanding = want->bytes_outstanding = 0;
}

#endif /* XDM_TESTS_THREAD_CHURN_H */
