/* SPDX-License-Identifier: MIT */
/*
 * mountinfo.c - reading /proc/self/mountinfo (proc(5)): one line per
 * mount, "id parent major:minor root POINT options... - TYPE source ...",
 * with blanks, tabs, newlines and backslashes in POINT written as octal
 * escapes.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/mountinfo/mountinfo.h"

/* Undo the octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

int mountinfo_each(int (*fn)(const char *point, const char *type, void *arg), void *arg)
{
	char line[4096], point[PATH_MAX], type[64];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int rc = 0;

	if (!f)
		return -errno;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(dash + 3, "%63s", type) != 1)
			continue;
		unescape(point);
		rc = fn(point, type, arg);
	}
	fclose(f);
	return rc;
}
