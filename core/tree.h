/* SPDX-License-Identifier: MIT */
/*
 * tree.h - the introspection tree's pieces, shared by tree*.c.  tree.c walks
 * paths and dispatches; each tree_<level>.c renders the files of one kind of
 * directory.  Rendering never holds a lock across a platform call: counters
 * are read atomically and blocks are copied out under short shard locks.
 */
#ifndef XDM_CORE_TREE_H
#define XDM_CORE_TREE_H

#include <errno.h>

#include "core/internal.h"

/* A growing text buffer; err is set (-ENOMEM) once an append fails. */
struct tree_buf {
	char *p;
	size_t len, cap;
	int err;
};

XDM_HIDDEN void tree_printf(struct tree_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Append text with anything outside printable ASCII replaced by '?'. */
XDM_HIDDEN void tree_put_clean(struct tree_buf *b, const char *text);

enum tree_level {
	AT_ROOT,
	AT_RUNTIME,
	AT_BLOCKS,
	AT_BLOCK,
	AT_STREAMS,
	AT_STREAM,
	AT_LAYERS,
	AT_LAYER,
};

/* A directory of the tree. */
struct tree_pos {
	enum tree_level level;
	struct xdm_runtime *rt;		/* every level under the root */
	struct xdm_layer *layer;	/* AT_LAYER */
	uint64_t id;			/* AT_BLOCK: generation; AT_STREAM: stream id */
};

/*
 * A file the core itself renders: read-only, or (show NULL, store set) an
 * action that a write starts, mode 0200 as a module's write-only attribute.
 * store gets a NUL-terminated copy of exactly what was written; it returns
 * 0 or a negative errno, and changes nothing when it refuses.
 */
struct tree_file {
	const char *name;
	int (*show)(const struct tree_pos *pos, struct tree_buf *b);
	int (*store)(const struct tree_pos *pos, const char *value, size_t len);
};

/* Tables end with a NULL name. */
XDM_HIDDEN extern const struct tree_file xdm_tree_root_files[];
XDM_HIDDEN extern const struct tree_file xdm_tree_runtime_files[];
XDM_HIDDEN extern const struct tree_file xdm_tree_block_files[];
XDM_HIDDEN extern const struct tree_file xdm_tree_stream_files[];

typedef int (*tree_list_fn)(const char *name, const struct xdm_tree_node *node, void *arg);

/* blocks/: is generation live; list the live generations. */
XDM_HIDDEN bool xdm_tree_block_exists(struct xdm_runtime *rt, uint64_t generation);
XDM_HIDDEN int xdm_tree_list_blocks(struct xdm_runtime *rt, tree_list_fn fn, void *arg);

/* chunks: what the stack holds, a line per chunk and per piece (tree_chunks.c). */
XDM_HIDDEN int xdm_tree_show_chunks(const struct tree_pos *pos, struct tree_buf *b);

#endif /* XDM_CORE_TREE_H */
