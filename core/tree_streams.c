/* SPDX-License-Identifier: MIT */
/*
 * tree_streams.c - streams/<id>/: one directory per stream of the pool.
 *
 * The per-stream figures are computed when a file is opened, by one pass
 * over the registry under its short shard locks: the allocation path keeps
 * no per-stream counter for them.
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

struct stream_sums {
	xdm_stream_id stream;
	uint64_t blocks, bytes, events;
};

static void sum_entry(const struct xdm_reg_entry *e, void *arg)
{
	struct stream_sums *s = arg;

	if (e->block.stream == s->stream) {
		s->blocks++;
		s->bytes += e->block.bytes;
	}
	if (e->track.has_write && e->track.last_write.stream == s->stream)
		s->events++;
	for (uint32_t i = 0; i < e->track.nreads; i++)
		if (e->track.reads[i].stream == s->stream)
			s->events++;
}

static struct stream_sums sums_of(const struct tree_pos *pos)
{
	struct stream_sums s = { .stream = (xdm_stream_id)pos->id };

	xdm_registry_for_each(&pos->rt->registry, sum_entry, &s);
	return s;
}

/* Use events recorded on this stream that live blocks still hold. */
static int show_events_outstanding(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%" PRIu64 "\n", sums_of(pos).events);
	return 0;
}

static int show_blocks_outstanding(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%" PRIu64 "\n", sums_of(pos).blocks);
	return 0;
}

static int show_bytes_outstanding(const struct tree_pos *pos, struct tree_buf *b)
{
	tree_printf(b, "%" PRIu64 "\n", sums_of(pos).bytes);
	return 0;
}

const struct tree_file xdm_tree_stream_files[] = {
	{ "handle", show_handle },
	{ "imported", show_imported },
	{ "pending_frees", show_pending_frees },
	{ "events_outstanding", show_events_outstanding },
	{ "blocks_outstanding", show_blocks_outstanding },
	{ "bytes_outstanding", show_bytes_outstanding },
	{ NULL, NULL },
};
