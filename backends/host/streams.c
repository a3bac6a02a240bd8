/* SPDX-License-Identifier: MIT */
/*
 * streams.c - which handles a host platform instance accepts from a
 * framework.
 *
 * A C caller hands the runtime streams by id; a framework hands it a
 * native handle, which on cuda is a CUstream the driver can check.  A host
 * stream is a pointer to our own struct, and a foreign pointer cannot be
 * checked by reading it, so the platform keeps the set of the streams it
 * made and accepts only those.  NULL is the platform's default stream, as
 * NULL is the legacy default stream on cuda: one more worker-thread queue,
 * made the first time a framework asks for it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "stream.h"
#include "streams.h"

void host_stream_set_init(struct host_stream_set *set)
{
	pthread_mutex_init(&set->lock, NULL);
	set->default_stream = NULL;
	set->v = NULL;
	set->n = set->cap = 0;
}

void host_stream_set_fini(struct host_stream_set *set)
{
	if (set->default_stream)
		host_stream_destroy(set->default_stream);
	free(set->v);
	pthread_mutex_destroy(&set->lock);
}

static int set_add_locked(struct host_stream_set *set, struct host_stream *s)
{
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 32;
		struct host_stream **v = realloc(set->v, cap * sizeof(*v));

		if (!v)
			return ENOMEM;
		set->v = v;
		set->cap = cap;
	}
	set->v[set->n++] = s;
	return 0;
}

int host_stream_set_add(struct host_stream_set *set, struct host_stream *s)
{
	int err;

	pthread_mutex_lock(&set->lock);
	err = set_add_locked(set, s);
	pthread_mutex_unlock(&set->lock);
	return err;
}

void host_stream_set_remove(struct host_stream_set *set, struct host_stream *s)
{
	pthread_mutex_lock(&set->lock);
	for (size_t i = 0; i < set->n; i++) {
		if (set->v[i] == s) {
			set->v[i] = set->v[--set->n];
			break;
		}
	}
	pthread_mutex_unlock(&set->lock);
}

static bool set_has_locked(const struct host_stream_set *set, const void *handle)
{
	for (size_t i = 0; i < set->n; i++)
		if (set->v[i] == handle)
			return true;
	return false;
}

enum xdm_status host_stream_set_resolve(struct host_stream_set *set, void *handle,
					void **canonical)
{
	enum xdm_status st = XDM_OK;
	int err;

	pthread_mutex_lock(&set->lock);
	if (handle) {
		if (set_has_locked(set, handle))
			*canonical = handle;
		else
			st = xdm_error_set(XDM_E_INVALID, "host platform: native stream %p is not "
					   "a stream of this platform", handle);
		goto unlock;
	}
	if (!set->default_stream) {
		err = host_stream_create(&set->default_stream);
		if (err) {
			set->default_stream = NULL;
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: cannot start the "
					   "default stream's worker thread (errno %d)", err);
			goto unlock;
		}
		err = set_add_locked(set, set->default_stream);
		if (err) {
			host_stream_destroy(set->default_stream);
			set->default_stream = NULL;
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: no memory to "
					   "remember the default stream");
			goto unlock;
		}
	}
	*canonical = set->default_stream;
unlock:
	pthread_mutex_unlock(&set->lock);
	return st;
}
