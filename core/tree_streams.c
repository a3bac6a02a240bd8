/* SPDX-License-Identifier: MIT */
/*
 * tree_streams.c - streams/<id>/: one directory per stream of the pool.
 *
 * Every figure is a counter read atomically: nothing here scans the
 * registry, whose bucket lines a scan would pull away from the threads that
 * allocate (a reader walking the tree cost a churning workload 11% that
 * way).  The counters are kept on the tracking path, never on allocation.
 */
#include "config.h"

#include <inttypes.h>

#include "core/tree.h"

static int show_handle(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%p\n", xdm_stream_native(pos->rt, (xdm_stream_id)pos->id));
	return 0;
}

static int show_imported(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%d\n", pos->rt->streams.slots[pos->id].owned ? 0 : 1);
	return 0;
}

static int show_pending_frees(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%u\n", xdm_pending_free_count(pos->rt, (xdm_stream_id)pos->id));
	return 0;
}

/* Use events recorded on this stream that live blocks still hold. */
static int show_events_outstanding(const struct tree_pos *pos, struct tree_buf *b)
{
	int64_t n = atomic_load_explicit(&pos->rt->streams.slots[pos->id].events_held,
					 memory_order_relaxed);

	/* A release may be counted before the take it undoes. */
	tree_printf(b, "%" PRId64 "\n", n > 0 ? n : 0);
	return 0;
}

const struct tree_file xdm_tree_stream_files[] = {
	{ "handle", show_handle, NULL },
	{ "imported", show_imported, NULL },
	{ "pending_frees", show_pending_frees, NULL },
	{ "events_outstanding", show_events_outstanding, NULL },
	{ NULL, NULL, NULL },
};
