/* SPDX-License-Identifier: MIT */
/*
 * stream.h - the host platform's streams and events, as plain C over its
 * own structs.
 *
 * A host stream is an ordered queue run by one worker thread: work queued on
 * it runs one item at a time, in the order it was queued, and concurrently
 * with every other stream.  A host event follows the CUDA event rules: a
 * record completes when its stream reaches it, and a wait holds its stream
 * until the record that was the event's latest at the time of the wait has
 * completed.
 *
 * Nothing here calls into libxdm, so that the tests can link these files
 * alone.  Functions return 0 or a positive errno value; platform.c turns
 * those into xdm statuses with a sentence.
 */
#ifndef XDM_HOST_STREAM_H
#define XDM_HOST_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct host_stream;
struct host_event;

/* Start a stream and its worker thread.  ENOMEM, or pthread_create's error. */
int host_stream_create(struct host_stream **out);
/* Run everything already queued, then stop and join the worker. */
void host_stream_destroy(struct host_stream *s);
/* Block until everything queued before the call has run.  EDEADLK when
 * called from the stream's own worker (a host function), which could only
 * wait for itself. */
int host_stream_synchronize(struct host_stream *s);

/* Queue fn(arg) to run on the worker in stream order.  ENOMEM. */
int host_stream_launch(struct host_stream *s, void (*fn)(void *arg), void *arg);
/* Queue a memset or a memcpy of host memory in stream order.  ENOMEM. */
int host_stream_memset(struct host_stream *s, void *dst, int value, size_t bytes);
int host_stream_memcpy(struct host_stream *s, void *dst, const void *src, size_t bytes);

/* An event that was never recorded counts as complete. */
int host_event_create(struct host_event **out);
/* Safe while records of or waits on the event are still queued: the last
 * of them releases it. */
void host_event_destroy(struct host_event *ev);
/* The event's latest record becomes this point of stream s.  ENOMEM. */
int host_event_record(struct host_event *ev, struct host_stream *s);
/* Stream s holds until the event's latest record as of this call has
 * completed; later records of the event do not concern it.  ENOMEM. */
int host_stream_wait_event(struct host_stream *s, struct host_event *ev);
/* Whether the event's latest record has completed. */
bool host_event_query(struct host_event *ev);
/* Block until the event's latest record as of the call has completed. */
void host_event_synchronize(struct host_event *ev);

/*
 * Simulated CUDA graph capture, so that the capture rules can be tested
 * without a GPU.  Between begin and end, work queued on the stream is kept
 * instead of run; end queues it, in order (as if the graph were launched
 * once at once).  A call that a capture forbids breaks it, and end then
 * says ECANCELED and why:
 *   - a synchronize of the captured stream (which itself fails, EBUSY);
 *   - a query or synchronize of an event whose latest record is in an
 *     open capture (host_event_capture_check: EBUSY);
 *   - a wait from a captured stream on an event not recorded in its
 *     capture, or from another stream on an event recorded in one (the
 *     wait fails, EBUSY, and is not queued).
 * id names the capture (not 0, and not reused while a use of an old one
 * may be remembered): the caller picks it.  begin: EINVAL for id 0, EBUSY
 * if a capture is open; end: EINVAL if none is.
 */
int host_stream_capture_begin(struct host_stream *s, uint64_t id);
int host_stream_capture_end(struct host_stream *s, char *why, size_t len);
/* The open capture's id, or 0. */
uint64_t host_stream_capture_id(struct host_stream *s);
/* Break capture id of s if it is still open. */
void host_stream_capture_break(struct host_stream *s, uint64_t id, const char *why);
/* 0, or EBUSY (and the capture broken) if a query or synchronize of the
 * event now would look into an open capture. */
int host_event_capture_check(struct host_event *ev);

#endif /* XDM_HOST_STREAM_H */
