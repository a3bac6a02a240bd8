/* SPDX-License-Identifier: MIT */
/*
 * csv.c - one row of the allocation log, formatted by hand.
 *
 * The writer threads format every row (drain.c), so this is their inner
 * loop: snprintf would parse a format string nine times per row; these
 * helpers only write digits.  Quoting follows RFC 4180: a tag holding a
 * comma, a double quote, CR or LF is enclosed in double quotes and its
 * quotes are doubled; any other tag is written as it is.  The tag arrives
 * with its length, copied out of a ring, and is not NUL-terminated.
 */
#include "config.h"

#include <string.h>

#include "adaptors/logging/logging.h"

/*
 * Padded to 16 bytes, like the thread prefix (24) and the device (12):
 * the row copies each with one fixed-size move, not a call to memcpy,
 * and the room LOG_ROW_FIXED_MAX asks for covers what the move writes past
 * the field (the next field overwrites it).
 */
static const char action_names[][16] = {
	[LOG_ALLOCATE] = "allocate",
	[LOG_ALLOCATE_FAILURE] = "allocate_failure",
	[LOG_FREE] = "free",
	[LOG_FREE_FAILURE] = "free_failure",
	[LOG_DROPPED] = "dropped",
};

static const unsigned char action_lens[] = {
	[LOG_ALLOCATE] = 8,
	[LOG_ALLOCATE_FAILURE] = 16,
	[LOG_FREE] = 4,
	[LOG_FREE_FAILURE] = 12,
	[LOG_DROPPED] = 7,
};

/* "00" "01" ... "99": two digits per division halves the work. */
static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Exactly two digits of v < 100. */
static inline void put2(char *p, uint32_t v)
{
	memcpy(p, digit_pairs + 2 * v, 2);
}

/* Exactly eight digits of v < 10^8, leading zeros kept: 32-bit arithmetic only. */
static inline void put8(char *p, uint32_t v)
{
	uint32_t hi = v / 10000, lo = v % 10000;

	put2(p, hi / 100);
	put2(p + 2, hi % 100);
	put2(p + 4, lo / 100);
	put2(p + 6, lo % 100);
}

/* v < 10^8, without leading zeros. */
static size_t put_small(char *p, uint32_t v)
{
	size_t n;
	char *q;

	if (v < 10) {
		*p = (char)('0' + v);
		return 1;
	}
	if (v < 100) {
		put2(p, v);
		return 2;
	}
	n = v < 1000 ? 3 : v < 10000 ? 4 : v < 100000 ? 5 : v < 1000000 ? 6 : v < 10000000 ? 7 : 8;
	q = p + n;
	while (v >= 100) {
		q -= 2;
		put2(q, v % 100);
		v /= 100;
	}
	if (v >= 10)
		put2(q - 2, v);
	else
		q[-1] = (char)('0' + v);
	return n;
}

/* "00" "01" ... "ff": a byte's two hexadecimal digits. */
static const char hex_pairs[513] =
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

#define E8 UINT64_C(100000000)

/* Split in pieces of eight digits, so that the digits come from 32-bit arithmetic. */
static inline size_t put_u64(char *p, uint64_t v)
{
	size_t n;

	if (v < 10) {
		/* Streams, query ids: mostly one digit. */
		*p = (char)('0' + v);
		return 1;
	}
	if (v < E8)
		return put_small(p, (uint32_t)v);
	if (v < E8 * E8) {
		n = put_small(p, (uint32_t)(v / E8));
		put8(p + n, (uint32_t)(v % E8));
		return n + 8;
	}
	n = put_small(p, (uint32_t)(v / (E8 * E8)));
	v %= E8 * E8;
	put8(p + n, (uint32_t)(v / E8));
	put8(p + n + 8, (uint32_t)(v % E8));
	return n + 16;
}

size_t csv_u64(char *p, uint64_t v)
{
	return put_u64(p, v);
}

/*
 * The time column: its digits above the last eight change ten times a
 * second, so a writer formats them once per tenth of a second and copies
 * them for every other row.
 */
static size_t csv_time(char *p, uint64_t v, struct csv_clock *c)
{
	uint64_t high = v / E8;

	if (!c || v < E8)
		return put_u64(p, v);
	if (high != c->high || !c->len) {
		c->len = put_u64(c->text, high);
		c->high = high;
	}
	memcpy(p, c->text, sizeof(c->text));
	put8(p + c->len, (uint32_t)(v % E8));
	return c->len + 8;
}

static size_t csv_hex(char *p, uint64_t v)
{
	unsigned int n = v ? (unsigned int)(67 - __builtin_clzll(v)) / 4 : 1;
	unsigned int left;
	char *q = p + 2 + n;

	p[0] = '0';
	p[1] = 'x';
	for (left = n; left >= 2; left -= 2) {
		q -= 2;
		memcpy(q, hex_pairs + 2 * (v & 0xff), 2);
		v >>= 8;
	}
	if (left)
		q[-1] = hex_pairs[2 * (v & 0xf) + 1];
	return n + 2;
}

bool csv_tag_quote(const char *tag, size_t len)
{
	bool q = false;

	for (size_t i = 0; i < len; i++)
		q |= tag[i] == ',' || tag[i] == '"' || tag[i] == '\n' || tag[i] == '\r';
	return q;
}

size_t csv_tag_max(size_t tag_len, bool quote)
{
	return quote ? 2 * tag_len + 2 : tag_len;
}

static size_t csv_tag(char *p, const char *tag, size_t len, bool quote)
{
	size_t i, n = 0;

	if (!quote) {
		if (len <= LOG_REC_TAG_INLINE)
			memcpy(p, tag, LOG_REC_TAG_INLINE);	/* see csv_row() */
		else
			memcpy(p, tag, len);
		return len;
	}
	p[n++] = '"';
	for (i = 0; i < len; i++) {
		if (tag[i] == '"')
			p[n++] = '"';
		p[n++] = tag[i];
	}
	p[n++] = '"';
	return n;
}

size_t csv_row(char *p, const char *prefix, size_t prefix_len, const char *device,
	       size_t device_len, const struct log_event *ev, size_t tag_len, bool quote,
	       struct csv_clock *clock)
{
	char *q = p;

	memcpy(q, prefix, LOG_PREFIX_SIZE);
	q += prefix_len;
	q += csv_time(q, ev->time_ns, clock);
	*q++ = ',';
	memcpy(q, action_names[ev->action], sizeof(action_names[0]));
	q += action_lens[ev->action];
	*q++ = ',';
	q += csv_hex(q, ev->ptr);
	*q++ = ',';
	q += put_u64(q, ev->bytes);
	*q++ = ',';
	q += put_u64(q, ev->stream);
	*q++ = ',';
	memcpy(q, device, LOG_DEVICE_SIZE);
	q += device_len;
	*q++ = ',';
	q += csv_tag(q, ev->tag, tag_len, quote);
	*q++ = ',';
	q += put_u64(q, ev->query_id);
	*q++ = '\n';
	return (size_t)(q - p);
}
