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

/* What this runtime opened from other processes (xdm_ipc_open), or "none". */
static int show_imports(const struct tree_pos *pos, struct tree_buf *b)
{
	xdm_ipc_show_imports(pos->rt, b);
	return 0;
}

const struct tree_file xdm_tree_runtime_files[] = {
	{ "ordinal", show_ordinal },
	{ "device", show_device },
	{ "uuid", show_uuid },
	{ "platform", show_platform },
	{ "memory_total", show_memory_total },
	{ "stack", show_stack },
	{ "singleton", show_singleton },
	{ "bytes_outstanding", show_bytes_outstanding },
	{ "blocks_outstanding", show_blocks_outstanding },
	{ "bytes_peak", show_bytes_peak },
	{ "allocs", show_allocs },
	{ "frees", show_frees },
	{ "failures", show_failures },
	{ "waits_queued", show_waits_queued },
	{ "events_recorded", show_events_recorded },
	{ "imports", show_imports },
	{ NULL, NULL },
};
