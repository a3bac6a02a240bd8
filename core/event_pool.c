/* SPDX-License-Identifier: MIT */
/*
 * event_pool.c - recycled platform events.  Creating an event can cost a
 * driver call; a warm pool keeps that off the prepare/finish path.
 *
 * An event may go back to the pool as soon as every wait on it is queued:
 * a queued wait is bound to the record that was current when it was queued,
 * on CUDA and on the host platform alike.
 */
#include "config.h"

#include <stdlib.h>

#include "core/internal.h"

enum xdm_status xdm_event_get(struct xdm_runtime *rt, void **event)
{
	struct xdm_event_pool *pool = &rt->events;

	pthread_mutex_lock(&pool->lock);
	if (pool->nfree) {
		*event = pool->free[--pool->nfree];
		pthread_mutex_unlock(&pool->lock);
		return XDM_OK;
	}
	pthread_mutex_unlock(&pool->lock);
	atomic_fetch_add_explicit(&pool->created, 1, memory_order_relaxed);
	return rt->platform.ops->event_create(&rt->platform, event);
}

void xdm_event_put(struct xdm_runtime *rt, void *event)
{
	struct xdm_event_pool *pool = &rt->events;

	pthread_mutex_lock(&pool->lock);
	if (pool->nfree == pool->cap) {
		size_t cap = pool->cap ? pool->cap * 2 : 64;
		void **grown = realloc(pool->free, cap * sizeof(*grown));

		if (!grown) {
			/* Cannot keep it: give it back to the platform instead. */
			pthread_mutex_unlock(&pool->lock);
			rt->platform.ops->event_destroy(&rt->platform, event);
			return;
		}
		pool->free = grown;
		pool->cap = cap;
	}
	pool->free[pool->nfree++] = event;
	pthread_mutex_unlock(&pool->lock);
}

void xdm_event_pool_fini(struct xdm_runtime *rt)
{
	struct xdm_event_pool *pool = &rt->events;

	for (size_t i = 0; i < pool->nfree; i++)
		rt->platform.ops->event_destroy(&rt->platform, pool->free[i]);
	free(pool->free);
	pool->free = NULL;
	pool->nfree = pool->cap = 0;
}
