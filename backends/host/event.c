/* SPDX-License-Identifier: MIT */
/*
 * event.c - host events with the CUDA rules.
 *
 * Each record of an event gets the next sequence number and queues a mark
 * on its stream; the record is pending until the stream's worker reaches the
 * mark.  The event's state is that of its latest record.  A wait captures
 * the latest sequence number when it is queued and holds its stream until
 * that one record is no longer pending, whatever happens to the event
 * afterwards.
 *
 * Records of one event may sit on several streams and complete out of
 * order, so "complete" cannot be a high-water mark: the event keeps the list
 * of its pending marks (usually zero or one long) and a sequence number is
 * complete when no pending mark carries it.  A never-recorded event has
 * latest 0, which no mark carries, so it is complete.
 *
 * The core recycles events and may destroy one while waits on it are still
 * queued, so every queued mark and wait holds a reference; the last one out
 * frees the event.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "queue.h"

struct host_mark_item;

struct host_event {
	pthread_mutex_t lock;
	pthread_cond_t completed;	/* a mark of this event was reached */
	uint64_t latest;		/* sequence of the latest record; 0: none */
	struct host_mark_item *pending;	/* marks queued, not yet reached */
	unsigned int refs;		/* the owner's, plus one per queued item */
};

/* Queued by a record: completes that record when the stream reaches it. */
struct host_mark_item {
	struct host_item base;
	struct host_event *ev;
	uint64_t seq;
	struct host_mark_item *next_pending;
	/* The capture that took it (0: none), and its stream, alive while the
	 * mark is pending. */
	uint64_t capture;
	struct host_stream *stream;
};

/* Queued by a wait: holds the stream until record seq is complete. */
struct host_wait_item {
	struct host_item base;
	struct host_event *ev;
	uint64_t seq;
};

/* The pending mark of record seq, or NULL; ev->lock held. */
static struct host_mark_item *pending_mark(const struct host_event *ev, uint64_t seq)
{
	struct host_mark_item *m;

	for (m = ev->pending; m; m = m->next_pending)
		if (m->seq == seq)
			return m;
	return NULL;
}

/* Called with ev->lock held. */
static bool host_event_pending(const struct host_event *ev, uint64_t seq)
{
	return pending_mark(ev, seq) != NULL;
}

/* Drop a reference and ev->lock; the last reference frees the event. */
static void host_event_unlock_put(struct host_event *ev)
{
	bool last = --ev->refs == 0;

	pthread_mutex_unlock(&ev->lock);
	if (!last)
		return;
	pthread_cond_destroy(&ev->completed);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

int host_event_create(struct host_event **out)
{
	struct host_event *ev;
	int err;

	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return ENOMEM;
	err = pthread_mutex_init(&ev->lock, NULL);
	if (err)
		goto err_free;
	err = pthread_cond_init(&ev->completed, NULL);
	if (err)
		goto err_lock;
	ev->refs = 1;
	*out = ev;
	return 0;

err_lock:
	pthread_mutex_destroy(&ev->lock);
err_free:
	free(ev);
	return err;
}

void host_event_destroy(struct host_event *ev)
{
	if (!ev)
		return;
	pthread_mutex_lock(&ev->lock);
	host_event_unlock_put(ev);
}

static void host_mark_run(struct host_item *item)
{
	struct host_mark_item *m = host_container_of(item, struct host_mark_item, base);
	struct host_event *ev = m->ev;
	struct host_mark_item **link;

	pthread_mutex_lock(&ev->lock);
	for (link = &ev->pending; *link != m; link = &(*link)->next_pending)
		;
	*link = m->next_pending;
	pthread_cond_broadcast(&ev->completed);
	host_event_unlock_put(ev);
}

int host_event_record(struct host_event *ev, struct host_stream *s)
{
	struct host_mark_item *m;

	m = malloc(sizeof(*m));
	if (!m)
		return ENOMEM;
	m->base.run = host_mark_run;
	m->ev = ev;

	pthread_mutex_lock(&ev->lock);
	m->seq = ++ev->latest;
	/* Newest first: queries and new waits look for the latest. */
	m->next_pending = ev->pending;
	ev->pending = m;
	ev->refs++;
	/*
	 * Queue the mark before any wait can capture its sequence number: a
	 * wait on this same stream, queued by another thread in between,
	 * would otherwise sit ahead of the mark it waits for, forever.
	 * (Lock order: event, then stream; nothing takes them the other way.)
	 */
	m->stream = s;
	m->capture = host_stream_push(s, &m->base);
	pthread_mutex_unlock(&ev->lock);
	return 0;
}

/* The open capture the latest record sits in, or 0; ev->lock held. */
static uint64_t open_capture(const struct host_event *ev, struct host_stream **stream)
{
	struct host_mark_item *m = pending_mark(ev, ev->latest);

	if (!m || !m->capture || host_stream_capture_id(m->stream) != m->capture)
		return 0;
	*stream = m->stream;
	return m->capture;
}

int host_event_capture_check(struct host_event *ev)
{
	struct host_stream *s = NULL;
	uint64_t capture;

	pthread_mutex_lock(&ev->lock);
	capture = open_capture(ev, &s);
	if (capture)
		host_stream_capture_break(s, capture, "an event recorded in the capture was "
					  "queried or synchronized");
	pthread_mutex_unlock(&ev->lock);
	return capture ? EBUSY : 0;
}

static void host_wait_run(struct host_item *item)
{
	struct host_wait_item *w = host_container_of(item, struct host_wait_item, base);
	struct host_event *ev = w->ev;

	pthread_mutex_lock(&ev->lock);
	while (host_event_pending(ev, w->seq))
		pthread_cond_wait(&ev->completed, &ev->lock);
	host_event_unlock_put(ev);
}

int host_stream_wait_event(struct host_stream *s, struct host_event *ev)
{
	struct host_wait_item *w;
	struct host_stream *other = NULL;
	uint64_t mine, theirs, taken;

	pthread_mutex_lock(&ev->lock);
	/* A wait may not cross a capture's edge, either way. */
	mine = host_stream_capture_id(s);
	theirs = open_capture(ev, &other);
	if (mine != theirs) {
		if (mine)
			host_stream_capture_break(s, mine, "the captured stream waited on an event "
						  "recorded outside its capture");
		else
			host_stream_capture_break(other, theirs, "a stream outside the capture "
						  "waited on an event recorded in it");
		pthread_mutex_unlock(&ev->lock);
		return EBUSY;
	}
	if (!host_event_pending(ev, ev->latest)) {
		/* Already complete, or never recorded: nothing to hold for. */
		pthread_mutex_unlock(&ev->lock);
		return 0;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		pthread_mutex_unlock(&ev->lock);
		return ENOMEM;
	}
	w->base.run = host_wait_run;
	w->ev = ev;
	w->seq = ev->latest;
	ev->refs++;
	/* A capture of s begun since the check took a wait from outside it. */
	taken = host_stream_push(s, &w->base);
	if (taken && taken != mine)
		host_stream_capture_break(s, taken, "the captured stream waited on an event "
					  "recorded outside its capture");
	pthread_mutex_unlock(&ev->lock);
	return 0;
}

bool host_event_query(struct host_event *ev)
{
	bool done;

	pthread_mutex_lock(&ev->lock);
	done = !host_event_pending(ev, ev->latest);
	pthread_mutex_unlock(&ev->lock);
	return done;
}

void host_event_synchronize(struct host_event *ev)
{
	uint64_t seq;

	pthread_mutex_lock(&ev->lock);
	seq = ev->latest;
	while (host_event_pending(ev, seq))
		pthread_cond_wait(&ev->completed, &ev->lock);
	pthread_mutex_unlock(&ev->lock);
}
