/* SPDX-License-Identifier: MIT */
/* markup.h - text from a log into XML, and so into SVG and HTML. */
#ifndef XDM_TOOLS_MARKUP_H
#define XDM_TOOLS_MARKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * s escaped for an attribute value or element text: & < > " ' as
 * entities; tab, newline and carriage return as character references (an
 * attribute would otherwise fold them into spaces); what XML 1.0 cannot
 * hold (other control characters, bytes that are not UTF-8) as U+FFFD.
 * At most max characters, then an ellipsis; 0: no limit.  flat: for text
 * shown on one line, where SVG would drop a newline and glue the words on
 * either side: tab, newline and carriage return as spaces.
 */
void markup_text(FILE *f, const char *s, size_t max, bool flat);

#endif /* XDM_TOOLS_MARKUP_H */
