/* SPDX-License-Identifier: MIT */
/*
 * stale.c - a mount left behind by a process that was killed.
 *
 * When a FUSE server dies without unmounting, its mount stays, and every
 * access to it fails with ENOTCONN.  Such a mount is detached before the new
 * one is made: by umount2(MNT_DETACH) as root, else by `fusermount3 -u -z`.
 * A mount point that answers and carries an xdm tree belongs to a live
 * process and is left alone (EBUSY).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fusefs/fusefs.h"

extern char **environ;

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
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

/* Is dir (a resolved path) the mount point of a fuse.xdm filesystem? */
static bool xdm_mounted_at(const char *dir)
{
	char line[4096], point[PATH_MAX], type[64];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root POINT options... - TYPE source ... */
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(dash + 3, "%63s", type) != 1)
			continue;
		unescape(point);
		found = strcmp(point, dir) == 0 && strcmp(type, "fuse." FUSEFS_NAME) == 0;
	}
	fclose(f);
	return found;
}

static int lazy_unmount(const char *dir, char *msg, size_t len)
{
	char *argv[] = { "fusermount3", "-u", "-z", "-q", (char *)dir, NULL };
	int status, err;
	pid_t pid;

	if (umount2(dir, MNT_DETACH) == 0)
		return 0;
	if (errno != EPERM) {
		err = -errno;
		snprintf(msg, len, "a stale mount is at %s and umount2 failed: %s", dir,
			 strerror(errno));
		return err;
	}
	/* Not root: the setuid helper that mounted it may take it away. */
	err = posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ);
	if (err) {
		snprintf(msg, len, "a stale mount is at %s and fusermount3 could not run: %s",
			 dir, strerror(err));
		return -err;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(msg, len, "a stale mount is at %s and fusermount3 -u -z failed", dir);
		return -EBUSY;
	}
	return 0;
}

int fusefs_clear_stale(const char *dir, char *msg, size_t len)
{
	char real[PATH_MAX];
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (realpath(dir, real) && xdm_mounted_at(real)) {
			snprintf(msg, len, "%s is the live xdm tree of another process", dir);
			return -EBUSY;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(msg, len, "%s is not a directory", dir);
			return -ENOTDIR;
		}
		return 0;
	}
	if (errno != ENOTCONN) {
		int err = -errno;

		snprintf(msg, len, "%s: %s", dir, strerror(errno));
		return err;
	}
	return lazy_unmount(dir, msg, len);
}
