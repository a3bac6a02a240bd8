/* SPDX-License-Identifier: MIT */
/*
 * shared_dir.c - the budget directory that a group of users shares, so
 * that one GPU has one budget whichever user runs on it.
 *
 * In /dev/shm every user can make any name, so the first user to make a
 * GPU's segment holds its name, and another user's attach is refused (a
 * segment open to another user is never used).  A directory of root's
 * that only its group may write in (made at install, BUDGET_SHARED_DIR,
 * by systemd/tmpfiles.conf.in) closes that: nobody outside the group can
 * make a name there, and the members share its segments, which are the
 * group's (the set-group-ID bit) and open to the group (mode 0660).
 * The members are then one trust domain for the budgets there: each can
 * write every segment of the directory (xdm-budget(7), OTHER USERS).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

const char *budget_default_dir(void)
{
	struct stat st;

	/* Whatever is there is the answer, a directory or not: the attach
	 * says what is wrong with it rather than going elsewhere. */
	if (stat(BUDGET_SHARED_DIR, &st) == 0 || errno != ENOENT)
		return BUDGET_SHARED_DIR;
	return BUDGET_DEFAULT_DIR;
}

bool budget_dir_is_shared(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == 0 && (st->st_mode & S_ISGID) &&
	       (st->st_mode & S_IRWXG) == S_IRWXG && !(st->st_mode & S_IWOTH);
}

bool budget_in_group(gid_t gid)
{
	gid_t *groups;
	bool in = getegid() == gid;
	int n;

	if (in)
		return true;
	n = getgroups(0, NULL);
	if (n <= 0)
		return false;
	groups = calloc((size_t)n, sizeof(*groups));
	if (!groups)
		return false;	/* not shown to be in it: the attach says so */
	n = getgroups(n, groups);
	for (int i = 0; i < n && !in; i++)
		in = groups[i] == gid;
	free(groups);
	return in;
}
