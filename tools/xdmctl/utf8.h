/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - what of a tag is UTF-8.  Tags are bytes from applications;
 * XML and Python strings take UTF-8 only, so the writers of both ask here
 * and replace what is not.
 */
#ifndef XDM_TOOLS_UTF8_H
#define XDM_TOOLS_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT "\xef\xbf\xbd"	/* U+FFFD */

/*
 * The length of the well-formed UTF-8 sequence at s (1 to 4; no overlong
 * form, no surrogate, nothing past U+10FFFF) with its code point in *c, or
 * 0 when s does not start one.  s is NUL-terminated: a NUL ends a
 * sequence cut short.
 */
size_t utf8_char(const char *s, uint32_t *c);

#endif /* XDM_TOOLS_UTF8_H */
