/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the work items a host stream runs, shared by stream.c, copy.c
 * and event.c.
 *
 * Every kind of work embeds struct host_item as its first member; the worker
 * calls run() and then frees the whole item with free(), so each kind only
 * says what running it means.
 */
#ifndef XDM_HOST_QUEUE_H
#define XDM_HOST_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "stream.h"

struct host_item {
	struct host_item *next;
	void (*run)(struct host_item *item);
};

#define host_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/*
 * Append an item to the stream's queue; the stream owns it from here on.
 * Cannot fail: callers allocate the item first, so that a failure leaves
 * nothing half-queued.  Returns the capture that took the item (0: none).
 */
uint64_t host_stream_push(struct host_stream *s, struct host_item *item);

#endif /* XDM_HOST_QUEUE_H */
