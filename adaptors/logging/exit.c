/* SPDX-License-Identifier: MIT */
/*
 * exit.c - the flush at process exit.
 *
 * A singleton runtime is never destroyed, so its layers never see fini, and
 * exit() runs no pthread key destructor for the main thread or for threads
 * still running.  Without this hook the rows still in every thread's ring
 * would be lost at a normal exit.
 *
 * The hook is registered per layer with __cxa_atexit, the glibc/ELF call
 * that passes an argument, so no list of layers has to live in a global.
 * The argument is a small hook object rather than the layer: an exit
 * function cannot be unregistered, so fini only detaches the layer from its
 * hook, and the hook itself (a few dozen bytes, still reachable from libc's
 * exit list) outlives the layer.
 *
 * The hook is registered against this module's own __dso_handle, as atexit()
 * does, not against none (NULL).  glibc runs it at exit either way, since
 * the core never unloads a module it registered; were logging.so unloaded,
 * the hook would run at dlclose instead of calling into unmapped code at
 * exit.  And ThreadSanitizer's __cxa_atexit (GCC 12) calls a hook
 * registered with no DSO without its argument, which crashed every exit.
 */
#include "config.h"

#include <stdlib.h>

#include "adaptors/logging/logging.h"

/* glibc's, declared by no header: what atexit() is made of. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso_handle);
/* This shared object's handle, defined by the toolchain's crtbeginS.o. */
extern void *__dso_handle;

struct log_exit_hook {
	pthread_mutex_t lock;
	struct logging *lg;		/* NULL once the layer is gone */
};

static void log_exit_run(void *arg)
{
	struct log_exit_hook *h = arg;

	pthread_mutex_lock(&h->lock);
	if (h->lg)
		log_flush_all(h->lg);
	pthread_mutex_unlock(&h->lock);
}

enum xdm_status log_exit_hook_add(struct logging *lg)
{
	struct log_exit_hook *h = malloc(sizeof(*h));

	if (!h)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for its exit hook");
	if (pthread_mutex_init(&h->lock, NULL) != 0)
		goto err_free;
	h->lg = lg;
	if (__cxa_atexit(log_exit_run, h, __dso_handle) != 0)
		goto err_lock;
	lg->hook = h;
	return XDM_OK;

err_lock:
	pthread_mutex_destroy(&h->lock);
err_free:
	free(h);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot register its exit flush");
}

void log_exit_hook_drop(struct logging *lg)
{
	struct log_exit_hook *h = lg->hook;

	if (!h)
		return;
	/* Waits for an exit flush running on another thread, then detaches. */
	pthread_mutex_lock(&h->lock);
	h->lg = NULL;
	pthread_mutex_unlock(&h->lock);
	lg->hook = NULL;
}
