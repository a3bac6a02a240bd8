/* SPDX-License-Identifier: MIT */
/*
 * attrs.c - the logging layer's attributes (layers/<n>-logging/...).
 *
 * Counters are atomics or sums over the thread rings' own counters (under
 * the list lock, which nothing holds across a syscall), read without the
 * sink's lock; only contents and flush drain the rings and so take the
 * locks the writers take.  dropped is the sink's losses plus the rings'
 * drops (full=drop): exact at quiescence, like rows and waits.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "adaptors/logging/logging.h"

static struct logging *logging_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

static int show_text(char *buf, size_t len, const char *text)
{
	int n = snprintf(buf, len, "%s\n", text);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int show_u64(char *buf, size_t len, uint64_t v)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", v);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static uint64_t load(atomic_uint_fast64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static int rows_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, log_rows(logging_of(self)));
}

static int bytes_written_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, load(&logging_of(self)->sink.bytes_written));
}

static int write_errors_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, load(&logging_of(self)->sink.write_errors));
}

static int dropped_show(struct xdm_layer *self, char *buf, size_t len)
{
	struct logging *lg = logging_of(self);

	return show_u64(buf, len, load(&lg->sink.dropped) + log_drops(lg));
}

static int waits_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, log_waits(logging_of(self)));
}

static int full_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_text(buf, len, logging_of(self)->drop_when_full ? "drop" : "wait");
}

static int writers_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, logging_of(self)->nwriters);
}

static int path_show(struct xdm_layer *self, char *buf, size_t len)
{
	const char *path = logging_of(self)->sink.path;

	return show_text(buf, len, path ? path : "");
}

static int sink_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_text(buf, len, log_sink_kind_name(&logging_of(self)->sink));
}

static int buffer_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, logging_of(self)->buf_size);
}

static int flush_store(struct xdm_layer *self, const char *buf, size_t len)
{
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len != 1 || buf[0] != '1')
		return -EINVAL;
	log_flush_all(logging_of(self));
	return 0;
}

/* Every row logged so far: the thread rings are drained first. */
static int contents_show(struct xdm_layer *self, char *buf, size_t len)
{
	struct logging *lg = logging_of(self);

	if (lg->sink.kind != LOG_SINK_MEMORY)
		return -EOPNOTSUPP;
	log_flush_all(lg);
	return log_sink_contents(&lg->sink, buf, len);
}

const struct xdm_attr logging_attrs[] = {
	{ "rows", 0444, "rows logged (null sink: counted), including rows still in a ring "
	  "and rows dropped",
	  rows_show, NULL },
	{ "bytes_written", 0444, "bytes handed to the file or memory, header included",
	  bytes_written_show, NULL },
	{ "write_errors", 0444, "failed writes to the file; the first is told on stderr",
	  write_errors_show, NULL },
	{ "dropped", 0444, "rows lost to a full ring (full=drop), write errors, memory_limit "
	  "or a forked child", dropped_show, NULL },
	{ "waits", 0444, "times a thread found its ring full and waited (full=wait), draining "
	  "it itself or sleeping", waits_show, NULL },
	{ "path", 0444, "the file sink's path, %p and %d expanded (empty otherwise)",
	  path_show, NULL },
	{ "sink", 0444, "file, memory or null", sink_show, NULL },
	{ "buffer", 0444, "the buffer parameter: bytes of each thread's ring and of each "
	  "writer's text", buffer_show, NULL },
	{ "full", 0444, "wait or drop: what a thread whose ring is full does", full_show, NULL },
	{ "writers", 0444, "writer threads formatting and writing the rows", writers_show,
	  NULL },
	{ "flush", 0200, "write 1: write every thread's pending rows to the sink now", NULL,
	  flush_store },
	{ "contents", 0444, "memory sink: the whole CSV, header first (drains the rings first)",
	  contents_show, NULL },
	{ NULL, 0, NULL, NULL, NULL },
};
