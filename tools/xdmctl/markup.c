/* SPDX-License-Identifier: MIT */
/*
 * markup.c - text into XML (markup.h).  Tags come from applications and
 * may hold anything but a NUL byte; the chart must still parse, so what
 * XML cannot carry is replaced, visibly, rather than dropped.
 */
#include "config.h"

#include <stdint.h>

#include "markup.h"
#include "utf8.h"

/* Whether XML 1.0 may hold c: no control but tab, newline and return; not U+FFFE, U+FFFF. */
static bool xml_char(uint32_t c)
{
	return (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') && c != 0xfffe && c != 0xffff;
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
		uint32_t c = 0;
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
		n = utf8_char((const char *)p, &c);
		if (n == 0 || !xml_char(c)) {
			fputs(UTF8_REPLACEMENT, f);
			p += n ? n : 1;
			continue;
		}
		fwrite(p, 1, n, f);
		p += n;
	}
}
