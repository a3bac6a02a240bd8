/* SPDX-License-Identifier: MIT */
/*
 * snapshot_keys.c - the keys of PyTorch's snapshot dict, each written once
 * and named through the pickle's memo after that (snapshot.h).
 */
#include "config.h"

#include "pickle.h"
#include "snapshot.h"

static const char *const key_text[SNAP_K_COUNT] = {
	[SNAP_K_SEGMENTS] = "segments",
	[SNAP_K_DEVICE_TRACES] = "device_traces",
	[SNAP_K_ACTION] = "action",
	[SNAP_K_ADDR] = "addr",
	[SNAP_K_SIZE] = "size",
	[SNAP_K_STREAM] = "stream",
	[SNAP_K_TIME_US] = "time_us",
	[SNAP_K_FRAMES] = "frames",
	[SNAP_K_ALLOC] = "alloc",
	[SNAP_K_FREE_REQUESTED] = "free_requested",
	[SNAP_K_FREE_COMPLETED] = "free_completed",
	[SNAP_K_SEGMENT_ALLOC] = "segment_alloc",
	[SNAP_K_SEGMENT_FREE] = "segment_free",
	[SNAP_K_OOM] = "oom",
	[SNAP_K_DEVICE_FREE] = "device_free",
	[SNAP_K_FILENAME] = "filename",
	[SNAP_K_LINE] = "line",
	[SNAP_K_NAME] = "name",
	[SNAP_K_XDM] = "xdm",
	[SNAP_K_DEVICE] = "device",
	[SNAP_K_ADDRESS] = "address",
	[SNAP_K_TOTAL_SIZE] = "total_size",
	[SNAP_K_ALLOCATED_SIZE] = "allocated_size",
	[SNAP_K_ACTIVE_SIZE] = "active_size",
	[SNAP_K_REQUESTED_SIZE] = "requested_size",
	[SNAP_K_SEGMENT_TYPE] = "segment_type",
	[SNAP_K_LARGE] = "large",
	[SNAP_K_SMALL] = "small",
	[SNAP_K_IS_EXPANDABLE] = "is_expandable",
	[SNAP_K_BLOCKS] = "blocks",
	[SNAP_K_STATE] = "state",
	[SNAP_K_ACTIVE_ALLOCATED] = "active_allocated",
	[SNAP_K_INACTIVE] = "inactive",
};

void snap_put_memo(FILE *f, bool *memo, uint32_t id, const char *text)
{
	if (memo[id]) {
		pickle_get(f, id);
		return;
	}
	pickle_str(f, text);
	pickle_put(f, id);
	memo[id] = true;
}

void snap_put_key(FILE *f, bool *memo, enum snap_key k)
{
	snap_put_memo(f, memo, k, key_text[k]);
}
