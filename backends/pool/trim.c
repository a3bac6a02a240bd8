/* SPDX-License-Identifier: MIT */
/*
 * trim.c - the trimmer: a thread that gives idle memory back every
 * trim_ms, so that a process which frees most of its memory returns it to
 * the device without any call from its user.
 *
 * It does what a write to the trim attribute does (caches merged back,
 * then whole free granules, or idle chunks, handed upstream, each after
 * the work queued on its stream), with one difference over a granular
 * upstream: it gives back no more of an arena than stayed free the whole
 * time since its last pass (the arena's low-water mark of free bytes), so
 * that memory a running program frees and takes again within a period is
 * not unmapped and mapped again under it.  Memory a program stops using
 * goes back at the first pass after one whole period unused.  Then it
 * asks the upstream to finish the releases whose streams have passed them.  It
 * takes grow_lock like any growth, and each arena's lock only for as long
 * as one batch of cuts, so the hot path waits at most that long.
 */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "pool.h"

static void deadline_after(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *trimmer(void *arg)
{
	struct pool *p = arg;
	struct timespec ts;

	pthread_mutex_lock(&p->trim_lock);
	while (!p->trimmer_stop) {
		deadline_after(&ts, atomic_load_explicit(&p->params.trim_ms,
							  memory_order_relaxed));
		while (!p->trimmer_stop &&
		       pthread_cond_timedwait(&p->trim_wake, &p->trim_lock, &ts) != ETIMEDOUT)
			;
		if (p->trimmer_stop)
			break;
		pthread_mutex_unlock(&p->trim_lock);
		if (!p->params.keep)
			pool_trim_idle(p);
		xdm_up_reap_pending(xdm_layer_upstream(p->self));
		pthread_mutex_lock(&p->trim_lock);
	}
	pthread_mutex_unlock(&p->trim_lock);
	return NULL;
}

static int trimmer_spawn(struct pool *p)
{
	p->trimmer_stop = false;
	if (pthread_create(&p->trimmer, NULL, trimmer, p))
		return -ENOMEM;
	p->trimmer_running = true;
	return 0;
}

/* After it returns no pass is running, and none starts until a spawn. */
static void trimmer_halt(struct pool *p)
{
	if (!p->trimmer_running)
		return;
	pthread_mutex_lock(&p->trim_lock);
	p->trimmer_stop = true;
	pthread_cond_signal(&p->trim_wake);
	pthread_mutex_unlock(&p->trim_lock);
	pthread_join(p->trimmer, NULL);
	p->trimmer_running = false;
}

enum xdm_status pool_trimmer_start(struct pool *p)
{
	pthread_condattr_t ca;
	int err;

	if (pthread_mutex_init(&p->trim_lock, NULL))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: cannot make the trimmer's lock");
	if (pthread_mutex_init(&p->trim_knob, NULL))
		goto err_lock;
	if (pthread_condattr_init(&ca))
		goto err_knob;
	/* The period is measured on the monotonic clock: a clock step does not stretch it. */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	err = pthread_cond_init(&p->trim_wake, &ca);
	pthread_condattr_destroy(&ca);
	if (err)
		goto err_knob;
	p->trimmer_running = false;
	if (atomic_load_explicit(&p->params.trim_ms, memory_order_relaxed) && trimmer_spawn(p))
		goto err_cond;
	return XDM_OK;

err_cond:
	pthread_cond_destroy(&p->trim_wake);
err_knob:
	pthread_mutex_destroy(&p->trim_knob);
err_lock:
	pthread_mutex_destroy(&p->trim_lock);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "pool: cannot start the trimmer thread");
}

/*
 * A new period from the trim_ms attribute.  The thread is stopped and, for
 * a period other than 0, started again, so that when a write of 0 returns
 * no pass is running: a reader who then synchronizes the streams sees the
 * pool and its upstream at rest.  On a failed start the trimmer stays off
 * and the period reads 0, so the attribute never claims a thread that is
 * not there.
 */
int pool_trimmer_set(struct pool *p, uint64_t ms)
{
	int err = 0;

	pthread_mutex_lock(&p->trim_knob);
	trimmer_halt(p);
	atomic_store_explicit(&p->params.trim_ms, ms, memory_order_relaxed);
	if (ms && trimmer_spawn(p)) {
		atomic_store_explicit(&p->params.trim_ms, 0, memory_order_relaxed);
		err = -ENOMEM;
	}
	pthread_mutex_unlock(&p->trim_knob);
	return err;
}

void pool_trimmer_stop(struct pool *p)
{
	trimmer_halt(p);
	pthread_cond_destroy(&p->trim_wake);
	pthread_mutex_destroy(&p->trim_knob);
	pthread_mutex_destroy(&p->trim_lock);
}
