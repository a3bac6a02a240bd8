/* SPDX-License-Identifier: MIT */
/*
 * csv.c - one row of the allocation log, formatted by hand.
 *
 * snprintf would parse a format string nine times per row on the allocation
 * path; these helpers only write digits.  Quoting follows RFC 4180: a tag
 * holding a comma, a double quote, CR or LF is enclosed in double quotes and
 * its quotes are doubled; any other tag is written as it is.
 */
#include "config.h"

#include <string.h>

#include "adaptors/logging/logging.h"

static const char *const action_names[] = {
	[LOG_ALLOCATE] = "allocate",
	[LOG_ALLOCATE_FAILURE] = "allocate_failure",
	[LOG_FREE] = "free",
	[LOG_FREE_FAILURE] = "free_failure",
};

static const unsigned char action_lens[] = {
	[LOG_ALLOCATE] = 8,
	[LOG_ALLOCATE_FAILURE] = 16,
	[LOG_FREE] = 4,
	[LOG_FREE_FAILURE] = 12,
};

/* "00" "01" ... "99": two digits per division halves the work. */
static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static unsigned int decimal_digits(uint64_t v)
{
	unsigned int n = 1;

	while (v >= 10000) {
		v /= 10000;
		n += 4;
	}
	return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

size_t csv_u64(char *p, uint64_t v)
{
	unsigned int n = decimal_digits(v);
	char *q = p + n;

	while (v >= 100) {
		unsigned int d = (unsigned int)(v % 100) * 2;

		v /= 100;
		*--q = digit_pairs[d + 1];
		*--q = digit_pairs[d];
	}
	if (v >= 10) {
		*--q = digit_pairs[v * 2 + 1];
		*--q = digit_pairs[v * 2];
	} else {
		*--q = (char)('0' + v);
	}
	return n;
}

static size_t csv_hex(char *p, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	unsigned int n = v ? (unsigned int)(67 - __builtin_clzll(v)) / 4 : 1;
	char *q = p + 2 + n;

	p[0] = '0';
	p[1] = 'x';
	do {
		*--q = digits[v & 0xf];
		v >>= 4;
	} while (v);
	return n + 2;
}

size_t csv_tag_scan(const char *tag, bool *quote)
{
	const char *s = tag;
	bool q = false;

	for (; *s; s++)
		q |= *s == ',' || *s == '"' || *s == '\n' || *s == '\r';
	*quote = q;
	return (size_t)(s - tag);
}

size_t csv_tag_max(size_t tag_len, bool quote)
{
	return quote ? 2 * tag_len + 2 : tag_len;
}

static size_t csv_tag(char *p, const char *tag, size_t len, bool quote)
{
	size_t i, n = 0;

	if (!quote) {
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
	       size_t device_len, const struct log_event *ev, size_t tag_len, bool quote)
{
	char *q = p;

	memcpy(q, prefix, prefix_len);
	q += prefix_len;
	q += csv_u64(q, ev->time_ns);
	*q++ = ',';
	memcpy(q, action_names[ev->action], action_lens[ev->action]);
	q += action_lens[ev->action];
	*q++ = ',';
	q += csv_hex(q, ev->ptr);
	*q++ = ',';
	q += csv_u64(q, ev->bytes);
	*q++ = ',';
	q += csv_u64(q, ev->stream);
	*q++ = ',';
	memcpy(q, device, device_len);
	q += device_len;
	*q++ = ',';
	q += csv_tag(q, ev->tag, tag_len, quote);
	*q++ = ',';
	q += csv_u64(q, ev->query_id);
	*q++ = '\n';
	return (size_t)(q - p);
}
