/* SPDX-License-Identifier: MIT */
/*
 * streams.h - the streams a host platform instance made, and its default
 * stream: what a framework's native handle can mean on the host platform.
 */
#ifndef XDM_HOST_STREAMS_H
#define XDM_HOST_STREAMS_H

#include <pthread.h>
#include <stddef.h>

#include <xdm/module.h>

struct host_stream;

struct host_stream_set {
	pthread_mutex_t lock;
	struct host_stream *default_stream;	/* made at the first NULL handle */
	struct host_stream **v;			/* every live stream made here */
	size_t n, cap;
};

void host_stream_set_init(struct host_stream_set *set);
/* Destroys the default stream (the runtime's own streams are gone by now). */
void host_stream_set_fini(struct host_stream_set *set);
/* Remember a new stream, forget a destroyed one.  ENOMEM. */
int host_stream_set_add(struct host_stream_set *set, struct host_stream *s);
void host_stream_set_remove(struct host_stream_set *set, struct host_stream *s);
/* The platform op: NULL is the default stream, else one of the set. */
enum xdm_status host_stream_set_resolve(struct host_stream_set *set, void *handle,
					void **canonical);

#endif /* XDM_HOST_STREAMS_H */
