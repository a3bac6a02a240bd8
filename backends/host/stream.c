/* SPDX-License-Identifier: MIT */
/*
 * stream.c - a host stream: a FIFO of work items and the one worker thread
 * that runs them.
 *
 * One worker per stream is what makes the host platform honest: work on a
 * stream really runs later and elsewhere than the call that queued it, and
 * two streams really run at the same time, so every stream-ordered rule of
 * the core can fail on a CPU the way it would on a GPU.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "queue.h"

struct host_stream {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* to the worker: queued, or stopping */
	pthread_cond_t done;		/* to synchronizers: an item finished */
	struct host_item *head, *tail;
	uint64_t queued;		/* items ever queued */
	uint64_t finished;		/* items ever run; FIFO, so a prefix */
	unsigned int sync_waiters;	/* threads blocked on done */
	bool stopping;
	pthread_t worker;
	/*
	 * A simulated graph capture: while capture is not 0, pushed work is
	 * kept on the capture list instead of running; the capture's end
	 * queues it (the graph launched once).  why: what a call did that
	 * the capture forbids, the first such; empty while it is intact.
	 */
	uint64_t capture;
	struct host_item *cap_head, *cap_tail;
	uint64_t cap_items;
	char why[160];
};

static void break_locked(struct host_stream *s, const char *why);

static void *host_stream_worker(void *arg)
{
	struct host_stream *s = arg;
	struct host_item *item;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->work, &s->lock);
		item = s->head;
		if (!item)
			break;		/* stopping, and the queue is drained */
		s->head = item->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->lock);

		item->run(item);
		free(item);

		pthread_mutex_lock(&s->lock);
		s->finished++;
		if (s->sync_waiters)
			pthread_cond_broadcast(&s->done);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/*
 * The worker is a library thread in someone else's process: it must never
 * be picked to run the program's signal handlers, so it starts with every
 * signal blocked (a new thread inherits the creator's mask).
 */
static int host_stream_start_worker(struct host_stream *s)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->worker, NULL, host_stream_worker, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return err;
	/* A name shows in top -H and gdb; failing to set it changes nothing. */
	pthread_setname_np(s->worker, "xdm-host-stream");
	return 0;
}

int host_stream_create(struct host_stream **out)
{
	struct host_stream *s;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return ENOMEM;
	err = pthread_mutex_init(&s->lock, NULL);
	if (err)
		goto err_free;
	err = pthread_cond_init(&s->work, NULL);
	if (err)
		goto err_lock;
	err = pthread_cond_init(&s->done, NULL);
	if (err)
		goto err_work;
	err = host_stream_start_worker(s);
	if (err)
		goto err_done;
	*out = s;
	return 0;

err_done:
	pthread_cond_destroy(&s->done);
err_work:
	pthread_cond_destroy(&s->work);
err_lock:
	pthread_mutex_destroy(&s->lock);
err_free:
	free(s);
	return err;
}

void host_stream_destroy(struct host_stream *s)
{
	if (!s)
		return;
	/* A capture left open ends here: its work runs like the rest. */
	host_stream_capture_end(s, NULL, 0);
	/* The worker leaves only once the queue is empty: queued work runs. */
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->worker, NULL);

	pthread_cond_destroy(&s->done);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int host_stream_synchronize(struct host_stream *s)
{
	uint64_t target;

	if (pthread_equal(pthread_self(), s->worker))
		return EDEADLK;
	pthread_mutex_lock(&s->lock);
	if (s->capture) {
		break_locked(s, "the stream was synchronized during its capture");
		pthread_mutex_unlock(&s->lock);
		return EBUSY;
	}
	/* Items are counted in queue order, so "everything queued before the
	 * call" is exactly the first `queued` items. */
	target = s->queued;
	s->sync_waiters++;
	while (s->finished < target)
		pthread_cond_wait(&s->done, &s->lock);
	s->sync_waiters--;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Append the items first..last to the list at *head, *tail. */
static void append(struct host_item **head, struct host_item **tail, struct host_item *first,
		   struct host_item *last)
{
	if (*tail)
		(*tail)->next = first;
	else
		*head = first;
	*tail = last;
}

/* Append items first..last, n of them, to the queue; s->lock held. */
static void queue_locked(struct host_stream *s, struct host_item *first, struct host_item *last,
			 uint64_t n)
{
	append(&s->head, &s->tail, first, last);
	s->queued += n;
	pthread_cond_signal(&s->work);
}

uint64_t host_stream_push(struct host_stream *s, struct host_item *item)
{
	uint64_t capture;

	item->next = NULL;
	pthread_mutex_lock(&s->lock);
	capture = s->capture;
	if (capture) {
		append(&s->cap_head, &s->cap_tail, item, item);
		s->cap_items++;
	} else {
		queue_locked(s, item, item, 1);
	}
	pthread_mutex_unlock(&s->lock);
	return capture;
}

/* ---- simulated graph capture --------------------------------------------- */

static void break_locked(struct host_stream *s, const char *why)
{
	if (!s->why[0])		/* the first reason is the one to tell */
		snprintf(s->why, sizeof(s->why), "%s", why);
}

int host_stream_capture_begin(struct host_stream *s, uint64_t id)
{
	int err = 0;

	if (!id)
		return EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->capture) {
		err = EBUSY;
	} else {
		s->capture = id;
		s->why[0] = '\0';
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

int host_stream_capture_end(struct host_stream *s, char *why, size_t len)
{
	int err = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->capture) {
		pthread_mutex_unlock(&s->lock);
		return EINVAL;
	}
	if (s->why[0]) {
		err = ECANCELED;
		if (why && len)
			snprintf(why, len, "%s", s->why);
	}
	if (s->cap_head)
		queue_locked(s, s->cap_head, s->cap_tail, s->cap_items);
	s->cap_head = s->cap_tail = NULL;
	s->cap_items = 0;
	s->capture = 0;
	pthread_mutex_unlock(&s->lock);
	return err;
}

uint64_t host_stream_capture_id(struct host_stream *s)
{
	uint64_t capture;

	pthread_mutex_lock(&s->lock);
	capture = s->capture;
	pthread_mutex_unlock(&s->lock);
	return capture;
}

void host_stream_capture_break(struct host_stream *s, uint64_t id, const char *why)
{
	pthread_mutex_lock(&s->lock);
	if (s->capture && s->capture == id)
		break_locked(s, why);
	pthread_mutex_unlock(&s->lock);
}

struct host_fn_item {
	struct host_item base;
	void (*fn)(void *arg);
	void *arg;
};

static void host_fn_run(struct host_item *item)
{
	struct host_fn_item *f = host_container_of(item, struct host_fn_item, base);

	f->fn(f->arg);
}

int host_stream_launch(struct host_stream *s, void (*fn)(void *arg), void *arg)
{
	struct host_fn_item *f;

	f = malloc(sizeof(*f));
	if (!f)
		return ENOMEM;
	f->base.run = host_fn_run;
	f->fn = fn;
	f->arg = arg;
	host_stream_push(s, &f->base);
	return 0;
}
