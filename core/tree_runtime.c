/* SPDX-License-Identifier: MIT */
/*
 * tree_runtime.c - the files of a runtime's directory: its device, its
 * stack, and the runtime's own counters.  Counters are summed from the
 * threads' records without a lock (xdm_runtime_stats; counters.h says what
 * each one promises): a reader never waits on an allocation.
 */
#include "config.h"

#include <inttypes.h>

#include "core/tree.h"

static int show_ordinal(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%u\n", pos->rt->ordinal);
	return 0;
}

static int show_device(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_put_clean(b, pos->rt->device.name);
	tree_printf(b, "\n");
	return 0;
}

static int show_uuid(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%s\n", pos->rt->device.uuid);
	return 0;
}

static int show_platform(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%s\n", pos->rt->device.platform);
	return 0;
}

static int show_memory_total(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%" PRIu64 "\n", pos->rt->device.total_bytes);
	return 0;
}

static int show_stack(const struct tree_pos *pos, struct tree_buf *b)
{
	char spec[8192];

	if (xdm_runtime_stack_spec(pos->rt, spec, sizeof(spec)) != XDM_OK)
		return -EOVERFLOW;
	tree_printf(b, "%s\n", spec);
	return 0;
}

static int show_singleton(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%d\n", pos->rt->singleton ? 1 : 0);
	return 0;
}

/* One file per counter of struct xdm_stats. */
#define STAT_FILE(field)                                                       \
	static int show_##field(const struct tree_pos *pos, struct tree_buf *b) \
	{                                                                      \
		struct xdm_stats s;                                            \
									       \
		xdm_runtime_stats(pos->rt, &s);                                \
		tree_printf(b, "%" PRIu64 "\n", s.field);                      \
		return 0;                                                      \
	}

STAT_FILE(bytes_outstanding)
STAT_FILE(blocks_outstanding)
STAT_FILE(bytes_peak)
STAT_FILE(allocs)
STAT_FILE(frees)
STAT_FILE(failures)
STAT_FILE(waits_queued)
STAT_FILE(events_recorded)
STAT_FILE(bytes_allocated)
STAT_FILE(bytes_freed)
STAT_FILE(blocks_peak)

/* "<frees> <bytes>": frees made inside a capture, held for work outside it. */
static int show_capture_frees_held(const struct tree_pos *pos, struct tree_buf *b)
{
	const struct xdm_capture_frees *h = &pos->rt->capture_frees;

	tree_printf(b, "%" PRIu32 " %" PRIu64 "\n",
		    atomic_load_explicit(&h->count, memory_order_relaxed),
		    atomic_load_explicit(&h->bytes, memory_order_relaxed));
	return 0;
}

/*
 * The resets, as the logging module's flush: write 1 (a newline after it
 * is fine).  Anything else is EINVAL and resets nothing.
 */
static bool is_one(const char *value, size_t len)
{
	if (len > 0 && value[len - 1] == '\n')
		len--;
	return len == 1 && value[0] == '1';
}

static int store_reset_peak(const struct tree_pos *pos, const char *value, size_t len)
{
	if (!is_one(value, len))
		return -EINVAL;
	return xdm_runtime_reset_peak(pos->rt) == XDM_OK ? 0 : -EINVAL;
}

static int store_reset_totals(const struct tree_pos *pos, const char *value, size_t len)
{
	if (!is_one(value, len))
		return -EINVAL;
	return xdm_runtime_reset_totals(pos->rt) == XDM_OK ? 0 : -EINVAL;
}

/* What this runtime opened from other processes (xdm_ipc_open), or "none". */
static int show_imports(const struct tree_pos *pos, struct tree_buf *b)
{
	xdm_ipc_show_imports(pos->rt, b);
	return 0;
}

const struct tree_file xdm_tree_runtime_files[] = {
	{ "ordinal", show_ordinal, NULL },
	{ "device", show_device, NULL },
	{ "uuid", show_uuid, NULL },
	{ "platform", show_platform, NULL },
	{ "memory_total", show_memory_total, NULL },
	{ "stack", show_stack, NULL },
	{ "singleton", show_singleton, NULL },
	{ "bytes_outstanding", show_bytes_outstanding, NULL },
	{ "blocks_outstanding", show_blocks_outstanding, NULL },
	{ "bytes_peak", show_bytes_peak, NULL },
	{ "allocs", show_allocs, NULL },
	{ "frees", show_frees, NULL },
	{ "failures", show_failures, NULL },
	{ "waits_queued", show_waits_queued, NULL },
	{ "events_recorded", show_events_recorded, NULL },
	{ "bytes_allocated", show_bytes_allocated, NULL },
	{ "bytes_freed", show_bytes_freed, NULL },
	{ "blocks_peak", show_blocks_peak, NULL },
	{ "capture_frees_held", show_capture_frees_held, NULL },
	{ "reset_peak", NULL, store_reset_peak },
	{ "reset_totals", NULL, store_reset_totals },
	{ "imports", show_imports, NULL },
	{ "chunks", xdm_tree_show_chunks, NULL },
	{ NULL, NULL, NULL },
};
