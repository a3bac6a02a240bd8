/* SPDX-License-Identifier: MIT */
/*
 * chunks.h - a runtime's chunks file (xdm-fs(7)), read: a line per chunk
 * the stack holds and a line per piece of it,
 *
 *	chunk 0x7f0000000000 2097152 stream 0
 *	  active 0x7f0000000000 1024
 *	  inactive 0x7f0000000400 2096128
 *
 * parsed strictly (chunks_parse.c): the file comes from a process xdmctl
 * does not trust, so a line that is not exactly this, or pieces that do
 * not tile their chunk, are refused with the file and the line.
 */
#ifndef XDM_TOOLS_XDMCTL_CHUNKS_H
#define XDM_TOOLS_XDMCTL_CHUNKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xdmctl_piece {
	uint64_t ptr, bytes;
	bool active;
};

struct xdmctl_chunk {
	uint64_t ptr, bytes;
	uint32_t stream, device;
	uint32_t npieces;
	size_t first;		/* its first piece in the pieces array */
};

/* Chunks of every file parsed into it, with their pieces. */
struct xdmctl_chunks {
	struct xdmctl_chunk *c;
	size_t n, cap;
	struct xdmctl_piece *p;
	size_t np, capp;
};

/* What xdmctl_chunks_parse answers. */
enum {
	XDMCTL_CHUNKS_OK = 0,
	XDMCTL_CHUNKS_BAD = -1,		/* the file is not a chunks file */
	XDMCTL_CHUNKS_NOMEM = -2,
};

/*
 * Adds the chunks of text (len bytes, read from name) to m, as chunks of
 * device.  An enum above; a refusal is said on standard error as
 * "xdmctl: CMD: NAME:LINE: why.", and m keeps only what came before that
 * file.
 */
int xdmctl_chunks_parse(struct xdmctl_chunks *m, const char *cmd, const char *name,
			const char *text, size_t len, uint32_t device);
void xdmctl_chunks_free(struct xdmctl_chunks *m);

#endif /* XDM_TOOLS_XDMCTL_CHUNKS_H */
