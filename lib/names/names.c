/* SPDX-License-Identifier: MIT */
/*
 * names.c - a user's or a group's name for a sentence (names.h).
 */
#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>

#include "lib/names/names.h"

static void name_or_number(const char *name, unsigned int id, char *buf, size_t len)
{
	if (name)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "%u", id);
}

void names_user(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *found = NULL;
	char text[1024];

	if (getpwuid_r(uid, &pw, text, sizeof(text), &found) != 0)
		found = NULL;
	name_or_number(found ? found->pw_name : NULL, (unsigned int)uid, buf, len);
}

/* A group's entry lists its members: a larger buffer than a user's. */
void names_group(gid_t gid, char *buf, size_t len)
{
	struct group gr, *found = NULL;
	char text[4096];

	if (getgrgid_r(gid, &gr, text, sizeof(text), &found) != 0)
		found = NULL;
	name_or_number(found ? found->gr_name : NULL, (unsigned int)gid, buf, len);
}
