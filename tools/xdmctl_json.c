/* SPDX-License-Identifier: MIT */
/*
 * xdmctl_json.c - the one piece of JSON that needs care: strings.  Command
 * names and tags are whatever a process or a user chose, so every byte
 * outside printable ASCII is escaped and the document stays valid JSON
 * (and ASCII) whatever they hold.
 */
#include "config.h"

#include "xdmctl.h"

void xdmctl_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}
