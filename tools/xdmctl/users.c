/* SPDX-License-Identifier: MIT */
/*
 * users.c - a user as a sentence names it.
 *
 * Names come from the name service, which may be slow or have no entry
 * (a uid of a container, a user removed since): only sentences ask for
 * them, and the number stands in where there is no name.
 */
#include "config.h"

#include <pwd.h>
#include <stdio.h>

#include "xdmctl.h"

void xdmctl_user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *found = NULL;
	char text[1024];

	if (getpwuid_r(uid, &pw, text, sizeof(text), &found) == 0 && found)
		snprintf(buf, len, "%s", found->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned int)uid);
}
