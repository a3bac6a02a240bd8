/* SPDX-License-Identifier: MIT */
/*
 * chunks_parse.c - a chunks file, read strictly (chunks.h).
 *
 * The text is another process's, so nothing in it is trusted: every line
 * must be exactly one of the two forms, numbers in range and written as
 * the tree writes them (lower-case hex after 0x, plain decimal), each
 * line ended by a newline, and the pieces of a chunk must tile it, one
 * after the other from its first byte to its last.  The first line that
 * is not so is named and the whole file is refused: a snapshot drawn from
 * half a file would show memory that is not there.  No byte of the file
 * is echoed: a sentence says what is wrong.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "xdmctl.h"

/* Longer lines are not the tree's: "  inactive 0x" and two 20-digit numbers fit. */
#define LINE_MAX_BYTES 128

struct parse {
	struct xdmctl_chunks *m;
	const char *cmd, *name;
	uint64_t line;
	uint32_t device;
	/* The chunk being tiled: its index in m, where its next piece must start, what is left. */
	bool open;
	size_t chunk;
	uint64_t chunk_line, next, left;
};

static int say(const struct parse *p, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int say(const struct parse *p, uint64_t line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "xdmctl: %s: %s:%" PRIu64 ": ", p->cmd, p->name, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(".\n", stderr);
	return XDMCTL_CHUNKS_BAD;
}

/* The literal word at *at, which it passes; false when it is not there. */
static bool take_word(const char **at, const char *end, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(end - *at) < n || memcmp(*at, word, n) != 0)
		return false;
	*at += n;
	return true;
}

/* The value of a lower-case hex digit, or -1. */
static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* "0x" and 1 to 16 lower-case hex digits, as the tree writes an address. */
static bool take_hex(const char **at, const char *end, uint64_t *v)
{
	const char *s;
	int digits = 0;

	if (!take_word(at, end, "0x"))
		return false;
	*v = 0;
	for (s = *at; s < end && hex_digit(*s) >= 0; s++) {
		if (++digits > 16)
			return false;
		*v = *v << 4 | (uint64_t)hex_digit(*s);
	}
	if (digits == 0)
		return false;
	*at = s;
	return true;
}

/* A plain decimal up to max: no sign, no blank, no overflow. */
static bool take_dec(const char **at, const char *end, uint64_t max, uint64_t *v)
{
	const char *s = *at;

	*v = 0;
	if (s == end || *s < '0' || *s > '9')
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (*v > (max - d) / 10)
			return false;
		*v = *v * 10 + d;
	}
	*at = s;
	return true;
}

/* The open chunk, if any, must be tiled to its end: 0, or said. */
static int close_chunk(struct parse *p)
{
	const struct xdmctl_chunk *c;

	if (!p->open)
		return XDMCTL_CHUNKS_OK;
	p->open = false;
	c = &p->m->c[p->chunk];
	if (c->npieces == 0)
		return say(p, p->chunk_line, "the chunk has no piece");
	if (p->left)
		return say(p, p->chunk_line, "its pieces cover %" PRIu64 " of the chunk's %" PRIu64
			   " bytes", c->bytes - p->left, c->bytes);
	return XDMCTL_CHUNKS_OK;
}

/* Room for one more chunk, and one more piece: 0, or NOMEM. */
static int room_for_chunk(struct xdmctl_chunks *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct xdmctl_chunk *c;

	if (m->n < m->cap)
		return XDMCTL_CHUNKS_OK;
	c = realloc(m->c, cap * sizeof(*c));
	if (!c)
		return XDMCTL_CHUNKS_NOMEM;
	m->c = c;
	m->cap = cap;
	return XDMCTL_CHUNKS_OK;
}

static int room_for_piece(struct xdmctl_chunks *m)
{
	size_t cap = m->capp ? m->capp * 2 : 256;
	struct xdmctl_piece *p;

	if (m->np < m->capp)
		return XDMCTL_CHUNKS_OK;
	p = realloc(m->p, cap * sizeof(*p));
	if (!p)
		return XDMCTL_CHUNKS_NOMEM;
	m->p = p;
	m->capp = cap;
	return XDMCTL_CHUNKS_OK;
}

/* "chunk 0xPTR BYTES stream S" */
static int chunk_line(struct parse *p, const char *at, const char *end)
{
	struct xdmctl_chunks *m = p->m;
	uint64_t ptr, bytes, stream;
	int rc = close_chunk(p);

	if (rc)
		return rc;
	if (!take_word(&at, end, "chunk ") || !take_hex(&at, end, &ptr) ||
	    !take_word(&at, end, " ") || !take_dec(&at, end, UINT64_MAX, &bytes) ||
	    !take_word(&at, end, " stream ") || !take_dec(&at, end, UINT32_MAX, &stream) ||
	    at != end)
		return say(p, p->line, "not a line 'chunk 0xADDRESS BYTES stream ID'");
	if (bytes == 0)
		return say(p, p->line, "a chunk of 0 bytes");
	if (ptr + bytes < ptr)
		return say(p, p->line, "the chunk runs past the end of the address space");
	if (room_for_chunk(m))
		return XDMCTL_CHUNKS_NOMEM;
	m->c[m->n] = (struct xdmctl_chunk){ ptr, bytes, (uint32_t)stream, p->device, 0, m->np };
	p->chunk = m->n++;
	p->open = true;
	p->chunk_line = p->line;
	p->next = ptr;
	p->left = bytes;
	return XDMCTL_CHUNKS_OK;
}

/* "  active 0xPTR BYTES" or "  inactive 0xPTR BYTES", inside the open chunk */
static int piece_line(struct parse *p, const char *at, const char *end)
{
	struct xdmctl_chunks *m = p->m;
	struct xdmctl_chunk *c;
	uint64_t ptr, bytes;
	bool active = take_word(&at, end, "  active ");

	if ((!active && !take_word(&at, end, "  inactive ")) || !take_hex(&at, end, &ptr) ||
	    !take_word(&at, end, " ") || !take_dec(&at, end, UINT64_MAX, &bytes) || at != end)
		return say(p, p->line, "not a line '  active|inactive 0xADDRESS BYTES'");
	if (!p->open)
		return say(p, p->line, "a piece with no chunk line before it");
	c = &m->c[p->chunk];
	if (bytes == 0)
		return say(p, p->line, "a piece of 0 bytes");
	if (ptr != p->next)
		return say(p, p->line, "the piece starts at 0x%" PRIx64 ", not at 0x%" PRIx64
			   " where the %s ends", ptr, p->next,
			   c->npieces ? "piece before it" : "chunk's start");
	if (bytes > p->left)
		return say(p, p->line, "the piece runs %" PRIu64 " bytes past the end of its chunk",
			   bytes - p->left);
	if (c->npieces == UINT32_MAX)
		return say(p, p->line, "the chunk has too many pieces");
	if (room_for_piece(m))
		return XDMCTL_CHUNKS_NOMEM;
	m->p[m->np++] = (struct xdmctl_piece){ ptr, bytes, active };
	c->npieces++;
	p->next += bytes;
	p->left -= bytes;
	return XDMCTL_CHUNKS_OK;
}

static int parse_lines(struct parse *p, const char *text, size_t len)
{
	const char *at = text, *end = text + len;
	int rc;

	while (at < end) {
		const char *nl = memchr(at, '\n', (size_t)(end - at));

		p->line++;
		if (!nl)
			return say(p, p->line, "the last line has no newline: the file is cut short");
		if (nl - at > LINE_MAX_BYTES)
			return say(p, p->line, "a line of more than %d bytes", LINE_MAX_BYTES);
		if (memchr(at, '\0', (size_t)(nl - at)))
			return say(p, p->line, "a NUL byte: not text");
		if (nl - at >= 6 && !memcmp(at, "chunk ", 6))
			rc = chunk_line(p, at, nl);
		else if (nl - at >= 2 && !memcmp(at, "  ", 2))
			rc = piece_line(p, at, nl);
		else
			rc = say(p, p->line, "neither a chunk line nor a piece line");
		if (rc)
			return rc;
		at = nl + 1;
	}
	return close_chunk(p);
}

int xdmctl_chunks_parse(struct xdmctl_chunks *m, const char *cmd, const char *name,
			const char *text, size_t len, uint32_t device)
{
	struct parse p = { .m = m, .cmd = cmd, .name = name, .device = device };
	size_t n = m->n, np = m->np;
	int rc = parse_lines(&p, text, len);

	if (rc == XDMCTL_CHUNKS_NOMEM)
		xdmctl_fail(rc, cmd, "%s: out of memory for its chunks", name);
	if (rc) {
		m->n = n;
		m->np = np;
	}
	return rc;
}

void xdmctl_chunks_free(struct xdmctl_chunks *m)
{
	free(m->c);
	free(m->p);
	m->c = NULL;
	m->p = NULL;
	m->n = m->cap = m->np = m->capp = 0;
}
