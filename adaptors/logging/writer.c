/* SPDX-License-Identifier: MIT */
/*
 * writer.c - the writer threads: where the CSV text is made and written.
 *
 * Each ring is drained by one writer, chosen round-robin when its thread
 * logs its first row.  A writer sleeps until a thread kicks it (its ring
 * crossed half full, or is full), then makes a pass: it drains every ring
 * it serves (drain.c), waking each ring's thread if it waits for room.
 * Formatting on the writer, not on the allocating thread, is what makes a
 * row cheap; several writers exist because one thread formats and writes
 * only so many rows a second, which a dozen allocating threads pass
 * (writers=, by default a quarter of the online CPUs, 1 to 4).
 *
 * A kick is a mutex and a condition signal, made once per half ring.  A
 * thread whose ring is full (full=wait) drains it itself if no writer
 * holds it (ring.c); otherwise it waits on its ring's own room condition,
 * rechecking its ring's tail under its writer's mutex, which whoever
 * drained the ring (the writer, a flush) takes to signal right after that
 * ring, not after the whole pass: no wake-up is lost, none is spent on
 * another ring's thread, and a thread goes on as soon as its ring has room.
 *
 * Only the file and memory sinks have writers; the null sink records
 * nothing.  A forked child has none (threads do not survive fork): it
 * never kicks, waits or joins, and its locks are copies it leaves alone.
 */
#include "config.h"

#include <stdlib.h>

#include "adaptors/logging/logging.h"

static void *writer_main(void *arg)
{
	struct log_writer *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		if (!w->kicked) {
			if (w->stop)
				break;
			pthread_cond_wait(&w->work, &w->lock);
			continue;
		}
		w->kicked = false;
		pthread_mutex_unlock(&w->lock);
		log_drain_rings(w->lg, w, &w->text);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Caller holds w->lock. */
static void writer_kick_locked(struct log_writer *w)
{
	if (!w->kicked) {
		w->kicked = true;
		pthread_cond_signal(&w->work);
	}
}

void log_writer_kick(struct log_ring *r)
{
	struct log_writer *w = r->writer;

	if (!w || log_forked(r->lg))
		return;
	pthread_mutex_lock(&w->lock);
	writer_kick_locked(w);
	pthread_mutex_unlock(&w->lock);
}

void log_writer_wait_room(struct log_ring *r, uint64_t need)
{
	struct log_writer *w = r->writer;
	uint64_t size = r->mask + 1;

	pthread_mutex_lock(&w->lock);
	writer_kick_locked(w);
	r->waiting = true;
	while (r->head_own + need - atomic_load_explicit(&r->tail, memory_order_acquire) > size)
		pthread_cond_wait(&r->room, &w->lock);
	r->waiting = false;
	pthread_mutex_unlock(&w->lock);
	r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
}

void log_writer_ring_drained(struct log_ring *r)
{
	struct log_writer *w = r->writer;

	pthread_mutex_lock(&w->lock);
	if (r->waiting)
		pthread_cond_signal(&r->room);
	pthread_mutex_unlock(&w->lock);
}

static enum xdm_status writer_init(struct logging *lg, struct log_writer *w)
{
	enum xdm_status st;

	w->lg = lg;
	st = log_text_init(&w->text, lg);
	if (st)
		return st;
	if (pthread_mutex_init(&w->lock, NULL) != 0)
		goto err_text;
	if (pthread_cond_init(&w->work, NULL) != 0)
		goto err_lock;
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
		goto err_work;
	w->running = true;
	return XDM_OK;

err_work:
	pthread_cond_destroy(&w->work);
err_lock:
	pthread_mutex_destroy(&w->lock);
err_text:
	log_text_fini(&w->text);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot start its writer thread");
}

static void writer_fini(struct log_writer *w, bool forked)
{
	if (!forked) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->work);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
		pthread_cond_destroy(&w->work);
		pthread_mutex_destroy(&w->lock);
	}
	log_text_fini(&w->text);
	w->running = false;
}

enum xdm_status log_writers_start(struct logging *lg, unsigned int n)
{
	enum xdm_status st;
	unsigned int i;

	if (lg->sink.kind == LOG_SINK_NULL)
		return XDM_OK;
	lg->writers = calloc(n, sizeof(*lg->writers));
	if (!lg->writers)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for its writers");
	for (i = 0; i < n; i++) {
		st = writer_init(lg, &lg->writers[i]);
		if (st)
			goto err;
	}
	lg->nwriters = n;
	return XDM_OK;

err:
	while (i-- > 0)
		writer_fini(&lg->writers[i], false);
	free(lg->writers);
	lg->writers = NULL;
	return st;
}

void log_writers_stop(struct logging *lg)
{
	bool forked = log_forked(lg);

	for (unsigned int i = 0; i < lg->nwriters; i++)
		writer_fini(&lg->writers[i], forked);
	free(lg->writers);
	lg->writers = NULL;
	lg->nwriters = 0;
}
