/* SPDX-License-Identifier: MIT */
/*
 * per_thread.h - the host platform's per-thread streams, the twin of CUDA's
 * per-thread default stream (XDM_STREAM_PER_THREAD, handle 0x2).
 *
 * Each thread that names the handle gets a stream of its own, made on its
 * first use and shared by every host platform instance of the process (a
 * thread has one per-thread default stream per CUDA context, and the host
 * devices stand for one context here).  As on CUDA:
 *  - work queued on it first waits for the work queued so far on every
 *    live default stream (NULL, CUDA's legacy stream): a per-thread stream
 *    is a blocking stream.  The other direction (the default stream
 *    waiting for per-thread streams) is not emulated: xdm never counts on
 *    it, and a test that did would pass here for the wrong reason;
 *  - when its thread exits, the stream is torn down without waiting: its
 *    queued work still runs, on a thread of its own, and events recorded
 *    there complete and can be queried afterwards;
 *  - an event whose latest record is on a per-thread stream refuses to be
 *    waited on by a stream (host_stream_wait_event: EPERM), which on the
 *    H200 (driver 580) made the thread hang in its exit: a CPU test of the
 *    core then fails where the GPU would hang.
 *
 * Plain C over stream.h, like it: 0 or a positive errno value.
 */
#ifndef XDM_HOST_PER_THREAD_H
#define XDM_HOST_PER_THREAD_H

#include "stream.h"

/* The calling thread's per-thread stream, made on first use.  ENOMEM, or
 * pthread_create's error. */
int host_per_thread_stream(struct host_stream **out);
/* Queue on s, the calling thread's per-thread stream, a wait for the work
 * queued so far on every live default stream.  ENOMEM. */
int host_per_thread_follow_defaults(struct host_stream *s);
/* A platform instance's default stream was made, or is about to go. */
int host_default_stream_add(struct host_stream *s);
void host_default_stream_remove(struct host_stream *s);

#endif /* XDM_HOST_PER_THREAD_H */
