/* SPDX-License-Identifier: MIT */
/*
 * markup.c - text into XML (markup.h).  Tags come from applications and
 * may hold anything but a NUL byte; the chart must still parse, so what
 * XML cannot carry is replaced, visibly, rather than dropped.
 */
#include "config.h"

#include <stdint.h>

#include "markup.h"

#define REPLACEMENT "\xef\xbf\xbd"	/* U+FFFD in UTF-8 */

/*
 * The length of the UTF-8 sequence at s if it is one XML may hold (no
 * surrogate, no overlong form, not U+FFFE or U+FFFF), else 0.
 */
static size_t utf8_len(const unsigned char *s)
{
	uint32_t c;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, c = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)	/* a NUL ends the string here too */
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;
	if ((c >= 0xd800 && c <= 0xdfff) || c == 0xfffe || c == 0xffff)
		return 0;
	return n;
}

/* What stands for c, where it cannot be written as it is. */
static const char *entity(unsigned char c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '"':
		return "&quot;";
	case '\'':
		return "&#39;";
	case '\t':
		return "&#9;";
	case '\n':
		return "&#10;";
	case '\r':
		return "&#13;";
	default:
		return NULL;
	}
}

void markup_text(FILE *f, const char *s, size_t max, bool flat)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t chars = 0; *p; chars++) {
		const char *e = entity(*p);
		size_t n;

		if (max && chars == max) {
			fputs("\xe2\x80\xa6", f);	/* U+2026, an ellipsis */
			return;
		}
		if (flat && (*p == '\t' || *p == '\n' || *p == '\r')) {
			fputc(' ', f);
			p++;
			continue;
		}
		if (e) {
			fputs(e, f);
			p++;
			continue;
		}
		n = *p < 0x20 ? 0 : utf8_len(p);
		if (n == 0) {
			fputs(REPLACEMENT, f);
			p++;
			continue;
		}
		fwrite(p, 1, n, f);
		p += n;
	}
}
