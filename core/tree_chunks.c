/* SPDX-License-Identifier: MIT */
/*
 * tree_chunks.c - a runtime's chunks file: what its stack holds, a line per
 * chunk and a line per piece of it (xdm-fs(7)), drawn from
 * xdm_runtime_for_each_chunk, so that a reader (xdmctl snapshot) can show
 * fragmentation the way a memory viewer does.
 *
 *	chunk 0x7f0000000000 2097152 stream 0
 *	  active 0x7f0000000000 1024
 *	  inactive 0x7f0000000400 2096128
 *
 * Every copy is made under the registry's and the layers' short locks and
 * formatted after they are released, as blocks/ is.
 */
#include "config.h"

#include <inttypes.h>

#include "core/tree.h"

static int print_chunk(const struct xdm_chunk *c, void *arg)
{
	struct tree_buf *b = arg;

	tree_printf(b, "chunk 0x%" PRIx64 " %" PRIu64 " stream %u\n", c->ptr, c->bytes,
		    c->stream);
	for (uint32_t i = 0; i < c->npieces; i++)
		tree_printf(b, "  %s 0x%" PRIx64 " %" PRIu64 "\n",
			    c->pieces[i].state == XDM_PIECE_ACTIVE ? "active" : "inactive",
			    c->pieces[i].ptr, c->pieces[i].bytes);
	/* Out of memory already: the rest would not be shown either. */
	return b->err;
}

int xdm_tree_show_chunks(const struct tree_pos *pos, struct tree_buf *b)
{
	switch (xdm_runtime_for_each_chunk(pos->rt, print_chunk, b)) {
	case XDM_OK:
		return b->err;
	case XDM_E_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}
