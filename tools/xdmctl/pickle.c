/* SPDX-License-Identifier: MIT */
/*
 * pickle.c - Python's pickle, protocol 2, for dicts, lists, strings,
 * integers and booleans (pickle.h).  The opcodes are those of Python's
 * Lib/pickletools.py; integers are little-endian.
 */
#include "config.h"

#include "pickle.h"
#include "utf8.h"

enum {
	OP_PROTO = 0x80,
	OP_STOP = '.',
	OP_MARK = '(',
	OP_EMPTY_DICT = '}',
	OP_SETITEMS = 'u',
	OP_EMPTY_LIST = ']',
	OP_APPENDS = 'e',
	OP_BINUNICODE = 'X',	/* a u32 length, then UTF-8 */
	OP_BININT1 = 'K',	/* unsigned 8 bits */
	OP_BININT2 = 'M',	/* unsigned 16 bits */
	OP_BININT = 'J',	/* signed 32 bits */
	OP_LONG1 = 0x8a,	/* a length byte, then two's complement */
	OP_NEWTRUE = 0x88,
	OP_NEWFALSE = 0x89,
	OP_BINPUT = 'q',
	OP_LONG_BINPUT = 'r',
	OP_BINGET = 'h',
	OP_LONG_BINGET = 'j',
};

#define LIST_BATCH 1000

static void put_le(FILE *f, uint64_t v, unsigned int bytes)
{
	for (unsigned int i = 0; i < bytes; i++)
		fputc((int)(v >> (8 * i) & 0xff), f);
}

void pickle_begin(FILE *f)
{
	fputc(OP_PROTO, f);
	fputc(2, f);
}

void pickle_end(FILE *f)
{
	fputc(OP_STOP, f);
}

void pickle_dict_begin(FILE *f)
{
	fputc(OP_EMPTY_DICT, f);
	fputc(OP_MARK, f);
}

void pickle_dict_end(FILE *f)
{
	fputc(OP_SETITEMS, f);
}

void pickle_list_begin(struct pickle_list *l, FILE *f)
{
	l->f = f;
	l->batch = 0;
	fputc(OP_EMPTY_LIST, f);
	fputc(OP_MARK, f);
}

void pickle_list_item(struct pickle_list *l)
{
	if (l->batch == LIST_BATCH) {
		fputc(OP_APPENDS, l->f);
		fputc(OP_MARK, l->f);
		l->batch = 0;
	}
	l->batch++;
}

void pickle_list_end(struct pickle_list *l)
{
	fputc(OP_APPENDS, l->f);
}

/* The bytes of s as written: U+FFFD, three bytes, for each that is not UTF-8. */
static size_t utf8_length(const char *s)
{
	size_t len = 0;
	uint32_t c;

	while (*s) {
		size_t n = utf8_char(s, &c);

		len += n ? n : sizeof(UTF8_REPLACEMENT) - 1;
		s += n ? n : 1;
	}
	return len;
}

void pickle_str(FILE *f, const char *s)
{
	size_t len = utf8_length(s);
	uint32_t c;

	fputc(OP_BINUNICODE, f);
	put_le(f, len, 4);
	while (*s) {
		size_t n = utf8_char(s, &c);

		if (n)
			fwrite(s, 1, n, f);
		else
			fputs(UTF8_REPLACEMENT, f);
		s += n ? n : 1;
	}
}

void pickle_uint(FILE *f, uint64_t v)
{
	unsigned int bytes = 1;

	if (v <= 0xff) {
		fputc(OP_BININT1, f);
		put_le(f, v, 1);
		return;
	}
	if (v <= 0xffff) {
		fputc(OP_BININT2, f);
		put_le(f, v, 2);
		return;
	}
	if (v <= 0x7fffffff) {
		fputc(OP_BININT, f);
		put_le(f, v, 4);
		return;
	}
	/* Two's complement: enough bytes that the top one's high bit, the sign, is clear. */
	while (bytes < 8 && v >> (8 * bytes - 1))
		bytes++;
	if (v >> 63)
		bytes = 9;
	fputc(OP_LONG1, f);
	fputc((int)bytes, f);
	put_le(f, v, bytes < 8 ? bytes : 8);
	if (bytes == 9)
		fputc(0, f);
}

void pickle_bool(FILE *f, bool v)
{
	fputc(v ? OP_NEWTRUE : OP_NEWFALSE, f);
}

void pickle_put(FILE *f, uint32_t id)
{
	if (id <= 0xff) {
		fputc(OP_BINPUT, f);
		put_le(f, id, 1);
	} else {
		fputc(OP_LONG_BINPUT, f);
		put_le(f, id, 4);
	}
}

void pickle_get(FILE *f, uint32_t id)
{
	if (id <= 0xff) {
		fputc(OP_BINGET, f);
		put_le(f, id, 1);
	} else {
		fputc(OP_LONG_BINGET, f);
		put_le(f, id, 4);
	}
}
