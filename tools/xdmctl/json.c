/* SPDX-License-Identifier: MIT */
/*
 * json.c - the one piece of JSON that needs care: strings.  Command
 * names, paths and keys are whatever a process or a user chose, so the
 * document stays valid JSON whatever they hold: UTF-8 passes as it is,
 * control characters, quotes and backslashes are escaped, and a byte that
 * is not UTF-8 becomes U+FFFD (JSON text is Unicode; a lone byte has no
 * honest spelling in it).
 */
#include "config.h"

#include "utf8.h"
#include "xdmctl.h"

void xdmctl_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	while (*s) {
		unsigned char c = (unsigned char)*s;
		uint32_t cp;
		size_t n;

		if (c == '"' || c == '\\') {
			fprintf(f, "\\%c", c);
			s++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			s++;
		} else if (c < 0x80) {
			fputc(c, f);
			s++;
		} else if ((n = utf8_char(s, &cp)) != 0) {
			fwrite(s, 1, n, f);
			s += n;
		} else {
			fputs("\\ufffd", f);
			s++;
		}
	}
	fputc('"', f);
}
