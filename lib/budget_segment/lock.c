/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the segment's robust lock, taken with a bound.
 *
 * xdmctl(1) links this library too: a limit it sets is set under the same
 * lock, with the same bound, as one written to budget/limit.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "lib/budget_segment/segment.h"

uint64_t budget_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int budget_lock(struct budget_shm *s)
{
	uint64_t start = budget_now_ns();
	long pause_us = 10;
	int err;

	/*
	 * Bounded: a holder that never lets go must not hang every caller.
	 * Polled with trylock rather than waited for with timedlock: the lock
	 * is never taken on the allocation path but by a refusal, and
	 * ThreadSanitizer follows trylock through a holder's death
	 * (EOWNERDEAD) where it loses track of a timedlock.
	 */
	while ((err = pthread_mutex_trylock(&s->lock)) == EBUSY) {
		struct timespec pause = { 0, pause_us * 1000 };

		if (budget_now_ns() - start >= BUDGET_LOCK_WAIT_S * 1000000000ull)
			return ETIMEDOUT;
		nanosleep(&pause, NULL);
		if (pause_us < 1000)
			pause_us *= 2;
	}

	/*
	 * The holder died inside.  Every change made under the lock is
	 * ordered so that any prefix of it leaves the slots valid (see
	 * budget_reclaim_locked and the attach), so the state is usable as
	 * it is once the mutex is marked consistent.
	 */
	if (err == EOWNERDEAD) {
		err = pthread_mutex_consistent(&s->lock);
		if (err)
			pthread_mutex_unlock(&s->lock);
	}
	return err;
}

void budget_unlock(struct budget_shm *s)
{
	pthread_mutex_unlock(&s->lock);
}
