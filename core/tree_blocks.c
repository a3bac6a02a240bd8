/* SPDX-License-Identifier: MIT */
/*
 * tree_blocks.c - blocks/<generation>/: one directory per live block.
 *
 * Everything is copied out of the registry under one shard lock at a time
 * and formatted after it is released; no allocation happens under a shard
 * lock (a listing that outgrows its array is retried with a larger one).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/tree.h"

static void note_found(const struct xdm_reg_entry *e, void *arg)
{
	(void)e;
	(void)arg;
}

static int by_generation(const void *a, const void *b)
{
	const struct xdm_gen_ptr *x = a, *y = b;

	return x->generation < y->generation ? -1 : x->generation > y->generation;
}

/* The address the last listing saw for generation, or 0. */
static uint64_t indexed_ptr(struct xdm_runtime *rt, uint64_t generation)
{
	struct xdm_block_index *ix = &rt->tree_index;
	struct xdm_gen_ptr key = { .generation = generation }, *hit;
	uint64_t ptr = 0;

	pthread_mutex_lock(&ix->lock);
	hit = ix->n ? bsearch(&key, ix->v, ix->n, sizeof(*ix->v), by_generation) : NULL;
	if (hit)
		ptr = hit->ptr;
	pthread_mutex_unlock(&ix->lock);
	return ptr;
}

/* Call fn on the live entry of generation, by the index if it can. */
static bool with_generation(struct xdm_runtime *rt, uint64_t generation,
			    void (*fn)(const struct xdm_reg_entry *e, void *arg), void *arg)
{
	uint64_t ptr = indexed_ptr(rt, generation);

	if (ptr)
		return xdm_registry_with_block(&rt->registry, ptr, generation, fn, arg);
	return xdm_registry_with_generation(&rt->registry, generation, fn, arg);
}

bool xdm_tree_block_exists(struct xdm_runtime *rt, uint64_t generation)
{
	return generation && with_generation(rt, generation, note_found, NULL);
}

struct gen_list {
	struct xdm_gen_ptr *v;
	size_t n, cap;
	bool overflow;
};

static void collect_generation(const struct xdm_reg_entry *e, void *arg)
{
	struct gen_list *l = arg;

	if (l->n < l->cap) {
		l->v[l->n].generation = e->block.generation;
		l->v[l->n++].ptr = e->block.ptr;
	} else {
		l->overflow = true;
	}
}

/* The listing becomes the index; the old index is freed. */
static void keep_index(struct xdm_runtime *rt, struct gen_list *l)
{
	struct xdm_block_index *ix = &rt->tree_index;
	struct xdm_gen_ptr *old;

	qsort(l->v, l->n, sizeof(*l->v), by_generation);
	pthread_mutex_lock(&ix->lock);
	old = ix->v;
	ix->v = l->v;
	ix->n = l->n;
	pthread_mutex_unlock(&ix->lock);
	free(old);
	l->v = NULL;
}

int xdm_tree_list_blocks(struct xdm_runtime *rt, tree_list_fn fn, void *arg)
{
	const struct xdm_tree_node sub = { .dir = true, .mode = 0555 };
	struct gen_list l = { 0 };
	struct xdm_stats s;
	char name[24];
	int err = 0;

	xdm_runtime_stats(rt, &s);
	l.cap = s.blocks_outstanding + s.blocks_outstanding / 4 + 64;
	for (;;) {
		l.v = malloc(l.cap * sizeof(*l.v));
		if (!l.v)
			return -ENOMEM;
		l.n = 0;
		l.overflow = false;
		xdm_registry_for_each(&rt->registry, collect_generation, &l);
		if (!l.overflow)
			break;
		free(l.v);
		l.cap *= 2;
	}
	for (size_t i = 0; !err && i < l.n; i++) {
		snprintf(name, sizeof(name), "%" PRIu64, l.v[i].generation);
		err = fn(name, &sub, arg);
	}
	keep_index(rt, &l);
	return err;
}

/* A recorded use as a file shows it. */
struct use_view {
	xdm_stream_id stream;
	uint32_t device;	/* a peer use's device; UINT32_MAX: the block's own */
};

/*
 * What one block's files show, copied under its shard lock.  A block has a
 * read per stream of every runtime that used it (peer uses come from other
 * devices' streams), so the reads go to an array sized by the copy before.
 */
struct block_view {
	struct xdm_block block;
	size_t requested;	/* the bytes the block was asked for */
	char tag[128];
	bool has_write;
	struct use_view write;
	struct use_view *reads;	/* room for capreads */
	uint32_t nreads;	/* the block's: more than capreads asks for a larger array */
	uint32_t capreads;
};

static struct use_view use_view_of(const struct xdm_use_event *u)
{
	return (struct use_view){ u->stream, u->rt ? u->rt->ordinal : UINT32_MAX };
}

/* A stream of the block's own runtime as its id; another device's as DEVICE:STREAM. */
static void print_use(struct tree_buf *b, const struct use_view *u, bool first)
{
	if (u->device != UINT32_MAX)
		tree_printf(b, first ? "%u:%u" : " %u:%u", u->device, u->stream);
	else
		tree_printf(b, first ? "%u" : " %u", u->stream);
}

static void copy_block(const struct xdm_reg_entry *e, void *arg)
{
	struct block_view *v = arg;
	const char *tag = e->block.tag;
	size_t i = 0;

	v->block = e->block;
	v->requested = e->requested;
	/* The tag is the caller's string: copy it now, show it later. */
	for (; tag && tag[i] && i + 1 < sizeof(v->tag); i++)
		v->tag[i] = tag[i];
	v->tag[i] = '\0';
	v->block.tag = NULL;
	v->has_write = e->track.has_write;
	/* Without a write, last_write is whatever the entry held before: not read. */
	if (v->has_write)
		v->write = use_view_of(&e->track.last_write);
	v->nreads = e->track.nreads;
	for (uint32_t r = 0; r < e->track.nreads && r < v->capreads; r++)
		v->reads[r] = use_view_of(&e->track.reads[r]);
}

/*
 * The view of pos's block, or -ENOENT once it has been freed.  No memory is
 * taken under the shard lock: a copy that found more reads than it had room
 * for is made again with room for them.
 */
static int view(const struct tree_pos *pos, struct block_view *v)
{
	v->reads = NULL;
	v->capreads = 0;
	for (;;) {
		struct use_view *grown;
		uint32_t cap;

		if (!with_generation(pos->rt, pos->id, copy_block, v))
			return -ENOENT;
		if (v->nreads <= v->capreads)
			return 0;
		/* Some room to spare: reads may be added before the next copy. */
		cap = v->nreads + XDM_INLINE_READS;
		grown = realloc(v->reads, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		v->reads = grown;
		v->capreads = cap;
	}
}

static const char *state_name(enum xdm_block_state s)
{
	switch (s) {
	case XDM_BLOCK_LIVE:
		return "live";
	case XDM_BLOCK_RETIRED:
		return "retired";
	case XDM_BLOCK_QUARANTINED:
		return "quarantined";
	case XDM_BLOCK_FREED:
		return "freed";
	}
	return "unknown";
}

/*
 * Each file takes the view of its block, then prints one field of it.
 */
static int show_view(const struct tree_pos *pos, struct tree_buf *b,
		     void (*print)(const struct block_view *v, struct tree_buf *b))
{
	struct block_view *v = malloc(sizeof(*v));
	int err;

	if (!v)
		return -ENOMEM;
	err = view(pos, v);
	if (!err)
		print(v, b);
	free(v->reads);
	free(v);
	return err;
}

#define BLOCK_FILE(fname, ...)                                                  \
	static void print_##fname(const struct block_view *v, struct tree_buf *b) \
	{                                                                       \
		tree_printf(b, __VA_ARGS__);                                    \
	}                                                                       \
	static int show_##fname(const struct tree_pos *pos, struct tree_buf *b) \
	{                                                                       \
		return show_view(pos, b, print_##fname);                        \
	}

BLOCK_FILE(ptr, "0x%" PRIx64 "\n", v->block.ptr)
BLOCK_FILE(bytes, "%zu\n", v->block.bytes)
BLOCK_FILE(requested, "%zu\n", v->requested)
BLOCK_FILE(align, "%zu\n", v->block.align)
BLOCK_FILE(stream, "%u\n", v->block.stream)
BLOCK_FILE(state, "%s\n", state_name(v->block.state))

static void print_tag(const struct block_view *v, struct tree_buf *b)
{
	tree_put_clean(b, v->tag);
	tree_printf(b, "\n");
}

/* The stream of the last recorded write, or "none". */
static void print_last_write(const struct block_view *v, struct tree_buf *b)
{
	if (v->has_write) {
		print_use(b, &v->write, true);
		tree_printf(b, "\n");
	} else {
		tree_printf(b, "none\n");
	}
}

/* The streams of the reads recorded since the last write, or "none". */
static void print_reads(const struct block_view *v, struct tree_buf *b)
{
	for (uint32_t i = 0; i < v->nreads; i++)
		print_use(b, &v->reads[i], i == 0);
	tree_printf(b, v->nreads ? "\n" : "none\n");
}

static int show_tag(const struct tree_pos *pos, struct tree_buf *b)
{
	return show_view(pos, b, print_tag);
}

static int show_last_write(const struct tree_pos *pos, struct tree_buf *b)
{
	return show_view(pos, b, print_last_write);
}

static int show_reads(const struct tree_pos *pos, struct tree_buf *b)
{
	return show_view(pos, b, print_reads);
}

/* The processes that have the block open (xdm_ipc_open), or "none". */
static int show_importers(const struct tree_pos *pos, struct tree_buf *b)
{
	if (!xdm_tree_block_exists(pos->rt, pos->id))
		return -ENOENT;
	xdm_ipc_show_holders(pos->rt, pos->id, b);
	return 0;
}

const struct tree_file xdm_tree_block_files[] = {
	{ "ptr", show_ptr, NULL },
	{ "bytes", show_bytes, NULL },
	{ "requested", show_requested, NULL },
	{ "align", show_align, NULL },
	{ "stream", show_stream, NULL },
	{ "tag", show_tag, NULL },
	{ "state", show_state, NULL },
	{ "last_write", show_last_write, NULL },
	{ "reads", show_reads, NULL },
	{ "importers", show_importers, NULL },
	{ NULL, NULL, NULL },
};
