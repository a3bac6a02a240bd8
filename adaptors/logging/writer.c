/* SPDX-License-Identifier: MIT */
/*
 * writer.c - the file sink's writer thread.
 *
 * A full thread buffer used to be written by the thread that filled it: a
 * write() of tens of kilobytes on the allocation path every few hundred
 * rows, which on the GPU machine cost more per row than the row itself.
 * Now the filling thread hands the full chunk over and goes on with an
 * empty one; this thread writes the chunks in the order they came, so each
 * thread's rows keep their order in the file.  Only a file sink has one:
 * memory and null sinks cost no system call.
 *
 * Memory stays bounded: past LOG_WRITER_QUEUE chunks in the queue, a
 * producer waits for the writer (the file is then the limit, and the log
 * loses no row).  The queue is short on purpose: it absorbs a burst, not a
 * sustained rate, which no queue could hide.  A drain waits until the queue is empty and the last
 * chunk written, which is what a flush promises.  A forked child has no
 * writer: it never waits on one (the sink drops a child's rows anyway).
 */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "logging.h"

#define LOG_WRITER_QUEUE 4

static void *writer_main(void *arg)
{
	struct logging *lg = arg;
	struct log_writer *w = &lg->writer;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct log_chunk *c = w->head;

		if (!c) {
			if (w->stop)
				break;
			pthread_cond_wait(&w->work, &w->lock);
			continue;
		}
		w->head = c->next;
		if (!w->head)
			w->tail = NULL;
		w->queued--;
		w->busy = true;
		pthread_cond_broadcast(&w->room);
		pthread_mutex_unlock(&w->lock);

		log_sink_write(&lg->sink, c->data, c->len, c->rows);

		pthread_mutex_lock(&w->lock);
		c->next = w->spare;
		w->spare = c;
		w->busy = false;
		w->written++;
		pthread_cond_broadcast(&w->room);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Whether this process's writer runs: false in a forked child. */
static bool writer_here(struct log_writer *w)
{
	return w->running && getpid() == w->pid;
}

bool log_writer_here(struct logging *lg)
{
	return writer_here(&lg->writer);
}

/*
 * The writer's lock may be used: always without a writer thread, and in the
 * process that has it; a forked child may have copied it held, and never
 * takes it.
 */
static bool lock_usable(struct log_writer *w)
{
	return w->inited && (!w->running || getpid() == w->pid);
}

enum xdm_status log_writer_start(struct logging *lg)
{
	struct log_writer *w = &lg->writer;

	if (pthread_mutex_init(&w->lock, NULL) != 0)
		goto err;
	if (pthread_cond_init(&w->work, NULL) != 0)
		goto err_lock;
	if (pthread_cond_init(&w->room, NULL) != 0)
		goto err_work;
	w->inited = true;
	if (lg->sink.kind != LOG_SINK_FILE)
		return XDM_OK;
	w->pid = getpid();
	if (pthread_create(&w->thread, NULL, writer_main, lg) != 0) {
		log_writer_stop(lg);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot start its writer thread");
	}
	w->running = true;
	return XDM_OK;

err_work:
	pthread_cond_destroy(&w->work);
err_lock:
	pthread_mutex_destroy(&w->lock);
err:
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot create the writer's locks");
}

struct log_chunk *log_chunk_get(struct logging *lg)
{
	struct log_writer *w = &lg->writer;
	struct log_chunk *c = NULL;

	if (lock_usable(w)) {
		pthread_mutex_lock(&w->lock);
		c = w->spare;
		if (c)
			w->spare = c->next;
		pthread_mutex_unlock(&w->lock);
	}
	return c ? c : malloc(sizeof(*c) + lg->buf_size);
}

void log_chunk_put(struct logging *lg, struct log_chunk *c)
{
	struct log_writer *w = &lg->writer;

	if (!c)
		return;
	if (!lock_usable(w)) {
		free(c);
		return;
	}
	pthread_mutex_lock(&w->lock);
	c->next = w->spare;
	w->spare = c;
	pthread_mutex_unlock(&w->lock);
}

bool log_writer_push(struct logging *lg, struct log_chunk *c)
{
	struct log_writer *w = &lg->writer;

	if (!writer_here(w))
		return false;
	c->next = NULL;
	pthread_mutex_lock(&w->lock);
	while (w->queued >= LOG_WRITER_QUEUE)
		pthread_cond_wait(&w->room, &w->lock);
	if (w->tail)
		w->tail->next = c;
	else
		w->head = c;
	w->tail = c;
	w->queued++;
	w->pushed++;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	return true;
}

/*
 * Waits for the chunks queued before the call, not for the queue to be
 * empty: under other threads' steady logging it never would be.
 */
void log_writer_drain(struct logging *lg)
{
	struct log_writer *w = &lg->writer;
	uint64_t target;

	if (!writer_here(w))
		return;
	pthread_mutex_lock(&w->lock);
	target = w->pushed;
	while (w->written < target)
		pthread_cond_wait(&w->room, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void log_writer_stop(struct logging *lg)
{
	struct log_writer *w = &lg->writer;
	struct log_chunk *c, *next;

	if (!w->inited)
		return;
	if (writer_here(w)) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->work);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	if (!lock_usable(w)) {
		/* A forked child: the parent's thread, locks and chunks are not its own. */
		w->inited = false;
		return;
	}
	w->running = false;
	for (c = w->spare; c; c = next) {
		next = c->next;
		free(c);
	}
	w->spare = NULL;
	pthread_cond_destroy(&w->room);
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->lock);
	w->inited = false;
}
