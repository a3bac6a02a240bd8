/* SPDX-License-Identifier: MIT */
/*
 * copy.c - memset and memcpy of host memory as stream work, so that they
 * are ordered with everything else on the stream as on a GPU.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

struct host_copy_item {
	struct host_item base;
	void *dst;
	const void *src;	/* NULL: a memset of value */
	int value;
	size_t bytes;
};

static void host_copy_run(struct host_item *item)
{
	struct host_copy_item *c = host_container_of(item, struct host_copy_item, base);

	if (c->src)
		/* Overlap is undefined on CUDA; memmove keeps the host's
		 * answer defined rather than silently corrupt. */
		memmove(c->dst, c->src, c->bytes);
	else
		memset(c->dst, c->value, c->bytes);
}

static int host_copy_queue(struct host_stream *s, void *dst, const void *src, int value,
			   size_t bytes)
{
	struct host_copy_item *c;

	c = malloc(sizeof(*c));
	if (!c)
		return ENOMEM;
	c->base.run = host_copy_run;
	c->dst = dst;
	c->src = src;
	c->value = value;
	c->bytes = bytes;
	host_stream_push(s, &c->base);
	return 0;
}

int host_stream_memset(struct host_stream *s, void *dst, int value, size_t bytes)
{
	return host_copy_queue(s, dst, NULL, value, bytes);
}

int host_stream_memcpy(struct host_stream *s, void *dst, const void *src, size_t bytes)
{
	return host_copy_queue(s, dst, src, 0, bytes);
}
