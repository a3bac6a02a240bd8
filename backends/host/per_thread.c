/* SPDX-License-Identifier: MIT */
/*
 * per_thread.c - per-thread streams of the host platform (per_thread.h).
 *
 * A thread's stream lives in a thread-local pointer; a process-wide pthread
 * key, made once, gives it a destructor that runs when the thread exits.
 * The destructor must not wait for the stream's work (CUDA's teardown of a
 * per-thread stream does not, and a test holds that work at a gate while
 * the thread exits): host_stream_destroy() drains the stream and joins its
 * worker, so it runs on a detached thread of its own.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "per_thread.h"

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int key_err;
static _Thread_local struct host_stream *mine;

/* Every live default stream, which per-thread work follows. */
static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_stream **defaults;
static size_t ndefaults, capdefaults;

static void *destroy_later(void *arg)
{
	host_stream_destroy(arg);
	return NULL;
}

/* The thread exits: its stream goes once its queued work has run. */
static void thread_exit(void *arg)
{
	struct host_stream *s = arg;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err;

	mine = NULL;
	err = pthread_attr_init(&attr);
	if (err)
		goto inline_destroy;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* A library thread never runs the program's signal handlers. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, &attr, destroy_later, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (!err)
		return;
inline_destroy:
	/* No thread to spare: this exit waits for the work instead. */
	host_stream_destroy(s);
}

static void make_key(void)
{
	key_err = pthread_key_create(&key, thread_exit);
}

int host_per_thread_stream(struct host_stream **out)
{
	struct host_stream *s;
	int err;

	if (mine) {
		*out = mine;
		return 0;
	}
	pthread_once(&key_once, make_key);
	if (key_err)
		return key_err;
	err = host_stream_create(&s);
	if (err)
		return err;
	host_stream_set_per_thread(s);
	err = pthread_setspecific(key, s);
	if (err) {
		host_stream_destroy(s);
		return err;
	}
	mine = s;
	*out = s;
	return 0;
}

int host_per_thread_follow_defaults(struct host_stream *s)
{
	struct host_event *ev;
	int err = 0;

	pthread_mutex_lock(&defaults_lock);
	for (size_t i = 0; i < ndefaults && !err; i++) {
		err = host_event_create(&ev);
		if (err)
			break;
		err = host_event_record(ev, defaults[i]);
		if (!err)
			err = host_stream_wait_event(s, ev);
		/* The queued record and wait hold the event. */
		host_event_destroy(ev);
	}
	pthread_mutex_unlock(&defaults_lock);
	return err;
}

int host_default_stream_add(struct host_stream *s)
{
	int err = 0;

	pthread_mutex_lock(&defaults_lock);
	if (ndefaults == capdefaults) {
		size_t cap = capdefaults ? capdefaults * 2 : 8;
		struct host_stream **v = realloc(defaults, cap * sizeof(*v));

		if (!v) {
			err = ENOMEM;
			goto unlock;
		}
		defaults = v;
		capdefaults = cap;
	}
	defaults[ndefaults++] = s;
unlock:
	pthread_mutex_unlock(&defaults_lock);
	return err;
}

void host_default_stream_remove(struct host_stream *s)
{
	pthread_mutex_lock(&defaults_lock);
	for (size_t i = 0; i < ndefaults; i++) {
		if (defaults[i] == s) {
			defaults[i] = defaults[--ndefaults];
			break;
		}
	}
	pthread_mutex_unlock(&defaults_lock);
}
