/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h - what the two sources of xdmctl snapshot share: the keys of
 * PyTorch's snapshot dict, written once each through the pickle's memo
 * (snapshot_keys.c), the segment types, and the snapshot of a live
 * process's chunks (snapshot_live.c) that snapshot.c hands its command line
 * to when no log is named.
 */
#ifndef XDM_TOOLS_XDMCTL_SNAPSHOT_H
#define XDM_TOOLS_XDMCTL_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "xdmctl.h"

/* The strings written more than once: memo ids; a log's tag's is SNAP_K_COUNT + its index. */
enum snap_key {
	SNAP_K_SEGMENTS, SNAP_K_DEVICE_TRACES, SNAP_K_ACTION, SNAP_K_ADDR, SNAP_K_SIZE,
	SNAP_K_STREAM, SNAP_K_TIME_US, SNAP_K_FRAMES, SNAP_K_ALLOC, SNAP_K_FREE_REQUESTED,
	SNAP_K_FREE_COMPLETED, SNAP_K_SEGMENT_ALLOC, SNAP_K_SEGMENT_FREE, SNAP_K_OOM,
	SNAP_K_DEVICE_FREE, SNAP_K_FILENAME, SNAP_K_LINE, SNAP_K_NAME, SNAP_K_XDM, SNAP_K_DEVICE,
	SNAP_K_ADDRESS, SNAP_K_TOTAL_SIZE, SNAP_K_ALLOCATED_SIZE, SNAP_K_ACTIVE_SIZE,
	SNAP_K_REQUESTED_SIZE, SNAP_K_SEGMENT_TYPE, SNAP_K_LARGE, SNAP_K_SMALL,
	SNAP_K_IS_EXPANDABLE, SNAP_K_BLOCKS, SNAP_K_STATE, SNAP_K_ACTIVE_ALLOCATED,
	SNAP_K_INACTIVE, SNAP_K_COUNT
};

/*
 * Writes a string of the memo: the first time whole, named id, and after
 * that by its name.  memo has a flag per id, false until written.
 */
void snap_put_memo(FILE *f, bool *memo, uint32_t id, const char *text);
void snap_put_key(FILE *f, bool *memo, enum snap_key k);

/*
 * PyTorch's caching allocator serves blocks up to 1 MiB from its small
 * pool, out of segments of 2 MiB: a log's block (a segment of its own)
 * is small up to the first, a live process's chunk up to the second.
 */
#define SNAP_SMALL_BLOCK (UINT64_C(1) << 20)
#define SNAP_SMALL_SEGMENT (UINT64_C(2) << 20)

/* Where a live snapshot reads its chunks: a process's tree, or one file. */
struct snap_live_source {
	long pid;		/* > 0: every runtime of the tree this process serves */
	const char *chunks;	/* else: this chunks file, as of device */
	unsigned long device;
	unsigned long timeout_ms;	/* how long a file may take to read */
};

/* xdmctl snapshot --pid or --chunks: an exit code, every failure said. */
int xdmctl_snapshot_live(const struct xdmctl_ctx *ctx, const struct snap_live_source *src,
			 const char *out);

#endif /* XDM_TOOLS_XDMCTL_SNAPSHOT_H */
