/* SPDX-License-Identifier: MIT */
/*
 * module.c - the "logging" adaptor: one CSV row per allocation and free.
 *
 *	stack = logging path=/var/log/xdm/%p-%d.csv | pool | cuda_async
 *
 * It changes nothing about the calls it sees: every status and block goes
 * back up untouched, and a log that cannot be written never fails an
 * allocation.  The block-use methods are left NULL (forwarded): they are
 * not logged.  An allocation or free only stamps the time and puts a
 * binary record in its thread's ring (ring.c); writer threads make the
 * text (writer.c, drain.c).  See xdm-logging(7) for the format and the
 * design.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adaptors/logging/logging.h"
#include "adaptors/logging/row.h"

/* Below this a ring holds too few records to absorb a writer's wake-up. */
#define LOG_BUF_MIN 4096
#define LOG_BUF_MAX (64u << 20)
#define LOG_WRITERS_MAX 16

static struct logging *logging_of(const struct xdm_layer *self)
{
	return xdm_layer_priv_inline(self);
}

/* writers=0: a quarter of the online CPUs, 1 to 4. */
static unsigned int writers_auto(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpus < 8)
		return 1;
	return cpus >= 16 ? 4 : (unsigned int)(cpus / 4);
}

/*
 * The ring: buffer bytes rounded down to a power of two of 64-byte
 * records.  A tag may take a quarter of it (so a record never waits for a
 * ring that cannot hold it) and, quoted, must fit an empty text buffer.
 */
static void ring_geometry(struct logging *lg)
{
	size_t tag_max;

	lg->nslots = 1;
	while (lg->nslots * 2 * LOG_SLOT <= lg->buf_size)
		lg->nslots *= 2;
	tag_max = LOG_REC_TAG_INLINE + (size_t)(lg->nslots / 4 - 1) * LOG_SLOT;
	if (tag_max > (lg->buf_size - LOG_ROW_FIXED_MAX - 2) / 2)
		tag_max = (lg->buf_size - LOG_ROW_FIXED_MAX - 2) / 2;
	if (tag_max > UINT16_MAX)
		tag_max = UINT16_MAX;
	lg->tag_max = tag_max;
}

static enum xdm_status logging_init(struct xdm_layer *self, const struct xdm_params *params)
{
	uint64_t buf_size = xdm_params_size(params, "buffer");
	uint64_t writers = xdm_params_uint(params, "writers");
	const char *full = xdm_params_string(params, "full");
	struct logging *lg;
	enum xdm_status st;

	if (buf_size < LOG_BUF_MIN || buf_size > LOG_BUF_MAX)
		return xdm_error_set(XDM_E_CONFIG, "logging: buffer must be 4K to 64M, not %llu",
				     (unsigned long long)buf_size);
	if (strcmp(full, "wait") != 0 && strcmp(full, "drop") != 0)
		return xdm_error_set(XDM_E_CONFIG, "logging: full must be wait or drop, not '%s'",
				     full);
	if (writers > LOG_WRITERS_MAX)
		return xdm_error_set(XDM_E_CONFIG,
				     "logging: writers must be 0 (as many as the CPUs suit) to %d, "
				     "not %llu", LOG_WRITERS_MAX, (unsigned long long)writers);
	lg = calloc(1, sizeof(*lg));
	if (!lg)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for its state");
	lg->upstream = xdm_layer_upstream(self);
	lg->serial = xdm_layer_serial(self);
	lg->buf_size = (size_t)buf_size;
	lg->drop_when_full = strcmp(full, "drop") == 0;
	lg->pid = getpid();
	ring_geometry(lg);
	lg->device_len = csv_u64(lg->device, xdm_layer_ordinal(self));

	st = log_sink_open(&lg->sink, xdm_params_string(params, "sink"),
			   xdm_params_string(params, "path"), xdm_layer_ordinal(self),
			   xdm_params_size(params, "memory_limit"));
	if (st)
		goto err_free;
	st = log_rings_init(lg);
	if (st)
		goto err_sink;
	/* The null sink makes no text. */
	st = lg->sink.kind == LOG_SINK_NULL ? XDM_OK : log_text_init(&lg->flush_text, lg);
	if (st)
		goto err_rings;
	st = log_writers_start(lg, writers ? (unsigned int)writers : writers_auto());
	if (st)
		goto err_text;
	/* Only a file outlives the process; memory and null need no exit flush. */
	if (lg->sink.kind == LOG_SINK_FILE) {
		st = log_exit_hook_add(lg);
		if (st)
			goto err_writers;
	}
	xdm_layer_set_priv(self, lg);
	return XDM_OK;

err_writers:
	log_writers_stop(lg);
err_text:
	log_text_fini(&lg->flush_text);
err_rings:
	log_rings_fini(lg);
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
	/* The writers first: then fini is the rings' only consumer. */
	log_writers_stop(lg);
	log_rings_fini(lg);
	log_text_fini(&lg->flush_text);
	log_sink_close(&lg->sink);
	free(lg);
}

/* One row for an allocation the upstream served or refused (st). */
static inline __attribute__((always_inline)) enum xdm_status
log_allocation(struct logging *lg, enum xdm_status st, size_t bytes, xdm_stream_id stream,
	       const char *tag, const struct xdm_block *out)
{
	struct log_event ev;

	if (lg->sink.kind == LOG_SINK_NULL) {
		log_count(lg);
		return st;
	}
	/*
	 * Read after the upstream returns: an address is handed out again
	 * only after its free's row was stamped (before that free went
	 * down), so sorting by time puts a free before the reuse.
	 */
	ev.time_ns = log_now_ns();
	ev.action = st ? LOG_ALLOCATE_FAILURE : LOG_ALLOCATE;
	ev.ptr = st ? 0 : out->ptr;
	ev.bytes = st ? bytes : out->bytes;
	ev.stream = stream;
	ev.tag = tag ? tag : "";
	ev.query_id = xdm_query_id();
	log_row(lg, &ev);
	return st;
}

static enum xdm_status logging_allocate(struct xdm_layer *self, size_t bytes,
					xdm_stream_id stream, const char *tag,
					struct xdm_block *out)
{
	struct logging *lg = logging_of(self);
	enum xdm_status st;

	st = xdm_up_allocate_inline(lg->upstream, bytes, stream, tag, out);
	return log_allocation(lg, st, bytes, stream, tag, out);
}

/* A block at a given address is logged as any other allocation. */
static enum xdm_status logging_allocate_at(struct xdm_layer *self, uint64_t ptr, size_t bytes,
					   xdm_stream_id stream, const char *tag,
					   struct xdm_block *out)
{
	struct logging *lg = logging_of(self);
	enum xdm_status st;

	st = xdm_up_allocate_at(lg->upstream, ptr, bytes, stream, tag, out);
	return log_allocation(lg, st, bytes, stream, tag, out);
}

static enum xdm_status logging_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct logging *lg = logging_of(self);
	struct log_event ev;
	enum xdm_status st;

	if (lg->sink.kind == LOG_SINK_NULL) {
		st = xdm_up_deallocate_inline(lg->upstream, block);
		log_count(lg);
		return st;
	}
	/* Stamped and copied before the block goes down: see allocate. */
	ev.time_ns = log_now_ns();
	ev.ptr = block->ptr;
	ev.bytes = block->bytes;
	ev.stream = block->stream;
	ev.tag = block->tag ? block->tag : "";
	ev.query_id = xdm_query_id();
	st = xdm_up_deallocate_inline(lg->upstream, block);
	ev.action = st ? LOG_FREE_FAILURE : LOG_FREE;
	log_row(lg, &ev);
	return st;
}

/*
 * Records not yet written are work still pending like a queued free:
 * reaping finishes them too, so that a caller who reaps (a bench between
 * runs, a test before it reads the file) finds the log written.
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
		.default_value = NULL,
		.help = "file sink: %p is the pid, %d the device ordinal, %% a percent sign; "
			"never followed if a symbolic link, refused if another user's; "
			"default: xdm-%p-%d.csv in $XDG_RUNTIME_DIR/xdm, else in /tmp/xdm-<uid>",
	},
	{
		.name = "buffer",
		.type = XDM_PARAM_SIZE,
		.default_value = "256K",
		.help = "bytes of each thread's record ring (rounded down to a power of two of "
			"64-byte records) and of each writer's text buffer",
	},
	{
		.name = "full",
		.type = XDM_PARAM_STRING,
		.default_value = "wait",
		.help = "what a thread whose ring is full does: wait (for the writer; nothing is "
			"lost) or drop (the row, counted in dropped and said in the log)",
	},
	{
		.name = "writers",
		.type = XDM_PARAM_UINT,
		.default_value = "0",
		.help = "writer threads that format and write the rows; 0: a quarter of the "
			"online CPUs, 1 to 4",
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
	.description = "a CSV row per allocation and free, made by writer threads",
	.params = logging_params,
	.attrs = logging_attrs,
	.init = logging_init,
	.fini = logging_fini,
	.allocate = logging_allocate,
	.deallocate = logging_deallocate,
	.allocate_at = logging_allocate_at,
	.reap_pending = logging_reap_pending,
	/* Everything else is forwarded to the upstream by the core. */
};

XDM_MODULE(&logging_ops)
