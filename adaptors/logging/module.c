/* SPDX-License-Identifier: MIT */
/*
 * module.c - the "logging" adaptor: one CSV row per allocation and free.
 *
 *	stack = logging path=/var/log/xdm/%p-%d.csv | pool | cuda_async
 *
 * It changes nothing about the calls it sees: every status and block goes
 * back up untouched, and a log that cannot be written never fails an
 * allocation.  The block-use methods are left NULL (forwarded): they are
 * not logged.  See xdm-logging(7) for the format.
 */
#include "config.h"

#include <stdlib.h>
#include <time.h>

#include "adaptors/logging/logging.h"

/* Below this a buffer would be written every few rows. */
#define LOG_BUF_MIN 4096
#define LOG_BUF_MAX (64u << 20)

static struct logging *logging_of(const struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/*
 * CLOCK_REALTIME, so that rows line up with other logs and across
 * processes; clock_gettime is a vDSO call, not a syscall.
 */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static enum xdm_status logging_init(struct xdm_layer *self, const struct xdm_params *params)
{
	uint64_t buf_size = xdm_params_size(params, "buffer");
	struct logging *lg;
	enum xdm_status st;

	if (buf_size < LOG_BUF_MIN || buf_size > LOG_BUF_MAX)
		return xdm_error_set(XDM_E_CONFIG, "logging: buffer must be 4K to 64M, not %llu",
				     (unsigned long long)buf_size);
	lg = calloc(1, sizeof(*lg));
	if (!lg)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for its state");
	lg->buf_size = (size_t)buf_size;
	lg->device_len = csv_u64(lg->device, xdm_layer_ordinal(self));

	st = log_sink_open(&lg->sink, xdm_params_string(params, "sink"),
			   xdm_params_string(params, "path"), xdm_layer_ordinal(self),
			   xdm_params_size(params, "memory_limit"));
	if (st)
		goto err_free;
	st = log_bufs_init(lg);
	if (st)
		goto err_sink;
	/* Only a file outlives the process; memory and null need no exit flush. */
	if (lg->sink.kind == LOG_SINK_FILE) {
		st = log_exit_hook_add(lg);
		if (st)
			goto err_bufs;
	}
	xdm_layer_set_priv(self, lg);
	return XDM_OK;

err_bufs:
	log_bufs_fini(lg);
err_sink:
	log_sink_close(&lg->sink);
err_free:
	free(lg);
	return st;
}

static void logging_fini(struct xdm_layer *self)
{
	struct logging *lg = logging_of(self);

	if (!lg)
		return;
	xdm_layer_set_priv(self, NULL);
	log_exit_hook_drop(lg);
	log_bufs_fini(lg);
	log_sink_close(&lg->sink);
	free(lg);
}

static enum xdm_status logging_allocate(struct xdm_layer *self, size_t bytes,
					xdm_stream_id stream, const char *tag,
					struct xdm_block *out)
{
	struct logging *lg = logging_of(self);
	struct log_event ev;
	enum xdm_status st;

	st = xdm_up_allocate(xdm_layer_upstream(self), bytes, stream, tag, out);
	if (lg->sink.kind == LOG_SINK_NULL) {
		log_count(lg);
		return st;
	}
	/*
	 * Read after the upstream returns: an address is handed out again
	 * only after its free's row was stamped (before that free went
	 * down), so sorting by time puts a free before the reuse.
	 */
	ev.time_ns = now_ns();
	ev.action = st ? LOG_ALLOCATE_FAILURE : LOG_ALLOCATE;
	ev.ptr = st ? 0 : out->ptr;
	ev.bytes = st ? bytes : out->bytes;
	ev.stream = stream;
	ev.tag = tag ? tag : "";
	ev.query_id = xdm_query_id();
	log_row(lg, &ev);
	return st;
}

static enum xdm_status logging_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct logging *lg = logging_of(self);
	struct log_event ev;
	enum xdm_status st;

	if (lg->sink.kind == LOG_SINK_NULL) {
		st = xdm_up_deallocate(xdm_layer_upstream(self), block);
		log_count(lg);
		return st;
	}
	/* Stamped and copied before the block goes down: see allocate. */
	ev.time_ns = now_ns();
	ev.ptr = block->ptr;
	ev.bytes = block->bytes;
	ev.stream = block->stream;
	ev.tag = block->tag ? block->tag : "";
	ev.query_id = xdm_query_id();
	st = xdm_up_deallocate(xdm_layer_upstream(self), block);
	ev.action = st ? LOG_FREE_FAILURE : LOG_FREE;
	log_row(lg, &ev);
	return st;
}

/*
 * Rows handed to the writer thread are work still pending like a queued
 * free: reaping finishes them too, so that a caller who reaps (a bench
 * between runs, a test before it reads the file) finds the log written.
 */
static enum xdm_status logging_reap_pending(struct xdm_layer *self)
{
	log_flush_all(logging_of(self));
	return xdm_up_reap_pending(xdm_layer_upstream(self));
}

static const struct xdm_param_spec logging_params[] = {
	{
		.name = "sink",
		.type = XDM_PARAM_STRING,
		.default_value = "file",
		.help = "file, memory (readable through the contents attribute) or null "
			"(counts rows, formats nothing)",
	},
	{
		.name = "path",
		.type = XDM_PARAM_STRING,
		.default_value = "xdm-%p-%d.csv",
		.help = "file sink: %p is the pid, %d the device ordinal, %% a percent sign",
	},
	{
		.name = "buffer",
		.type = XDM_PARAM_SIZE,
		.default_value = "64K",
		.help = "bytes of each thread's row buffer, written with one write() when full",
	},
	{
		.name = "memory_limit",
		.type = XDM_PARAM_SIZE,
		.default_value = "64M",
		.help = "memory sink: most bytes of CSV kept; rows past it are dropped",
	},
	{ .name = NULL },
};

static const struct xdm_ops logging_ops = {
	XDM_OPS_HEADER("logging", XDM_KIND_ADAPTOR),
	.description = "a CSV row per allocation and free, buffered per thread",
	.params = logging_params,
	.attrs = logging_attrs,
	.init = logging_init,
	.fini = logging_fini,
	.allocate = logging_allocate,
	.deallocate = logging_deallocate,
	.reap_pending = logging_reap_pending,
	/* Everything else is forwarded to the upstream by the core. */
};

XDM_MODULE(&logging_ops)
