/* SPDX-License-Identifier: MIT */
/* utf8.c - the UTF-8 sequence at a string's start (utf8.h). */
#include "config.h"

#include "utf8.h"

size_t utf8_char(const char *s, uint32_t *c)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t v;
	size_t n;

	if (p[0] < 0x80) {
		*c = p[0];
		return 1;
	}
	/* The lead byte says the length; C0, C1 and F5..FF lead nothing valid. */
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
		v = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		v = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		v = p[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)))
		return 0;
	if (v >= 0xd800 && v <= 0xdfff)
		return 0;
	*c = v;
	return n;
}
