/* SPDX-License-Identifier: MIT */
/*
 * file_open.c - the file sink's file: where it is, and opening it so that
 * no other user can send the rows elsewhere or read them.
 *
 * The rows name addresses, tags and query ids of the process, so the file
 * is its user's, mode 0600.  A path is a name in a directory that others
 * may write in (/tmp, a shared scratch directory): someone else may have
 * put there, first, a symbolic link to a file of ours (our rows would go
 * into it) or a file of their own (they would read our rows).  So the
 * last name is never followed (O_NOFOLLOW), and a file that is neither
 * this user's nor root's (/dev/null, /dev/stderr's terminal are root's or
 * ours) is refused before a byte goes into it.  A FIFO with nobody reading
 * it is refused rather than waited on.
 *
 * Without path=, the file is xdm-<pid>-<ordinal>.csv in the user's log
 * directory: $XDG_RUNTIME_DIR/xdm where the session has one of its own,
 * else /tmp/xdm-<uid>.  That directory is made 0700 and used only if it is
 * this user's and nobody else may write in it; a name another user took
 * first in /tmp is refused with a sentence, never followed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adaptors/logging/logging.h"
#include "lib/names/names.h"

/* Owner-only: rows name addresses, tags and query ids of the process. */
#define LOG_FILE_MODE 0600
#define LOG_DIR_MODE 0700
/* The name of the file in the log directory when path= is not given. */
#define LOG_DEFAULT_NAME "xdm-%p-%d.csv"

/* The path with %p (pid), %d (device ordinal) and %% expanded. */
static enum xdm_status expand_path(const char *pattern, uint32_t ordinal, char *buf, size_t len)
{
	size_t n = 0;
	const char *p;
	int w;

	for (p = pattern; *p; p++) {
		if (*p != '%') {
			if (n + 1 >= len)
				goto too_long;
			buf[n++] = *p;
			continue;
		}
		switch (*++p) {
		case '%':
			if (n + 1 >= len)
				goto too_long;
			buf[n++] = '%';
			break;
		case 'p':
			w = snprintf(buf + n, len - n, "%ld", (long)getpid());
			goto number;
		case 'd':
			w = snprintf(buf + n, len - n, "%u", ordinal);
number:
			if (w < 0 || (size_t)w >= len - n)
				goto too_long;
			n += (size_t)w;
			break;
		default:
			return xdm_error_set(XDM_E_CONFIG,
					     "logging: path '%s': unknown escape '%%%.1s' (use %%p, "
					     "%%d or %%%%)", pattern, p);
		}
	}
	if (n == 0)
		return xdm_error_set(XDM_E_CONFIG, "logging: path is empty");
	buf[n] = '\0';
	return XDM_OK;

too_long:
	return xdm_error_set(XDM_E_CONFIG, "logging: path '%s' is too long once expanded",
			     pattern);
}

/* Whether a directory is this user's alone to change. */
static bool private_dir(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == geteuid() && !(st->st_mode & 022);
}

/* $XDG_RUNTIME_DIR, where it is this user's own (not one kept across su). */
static const char *session_dir(void)
{
	const char *dir = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (!dir || dir[0] != '/' || stat(dir, &st) != 0 || !private_dir(&st))
		return NULL;
	return dir;
}

/*
 * The user's log directory, made if missing, and checked through the
 * descriptor it is used by: what was checked is what the file goes into.
 */
static enum xdm_status open_log_dir(char *dir, size_t len, int *dirfd)
{
	const char *session = session_dir();
	char owner[64];
	struct stat st;
	int n;

	if (session)
		n = snprintf(dir, len, "%s/xdm", session);
	else
		n = snprintf(dir, len, "/tmp/xdm-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return xdm_error_set(XDM_E_CONFIG, "logging: $XDG_RUNTIME_DIR is too long");
	if (mkdir(dir, LOG_DIR_MODE) != 0 && errno != EEXIST)
		return xdm_error_set(XDM_E_CONFIG, "logging: cannot make the log directory %s: "
				     "%s; give path= a file", dir, strerror(errno));
	*dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*dirfd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return xdm_error_set(XDM_E_CONFIG,
					     "logging: the log directory %s is not a directory "
					     "(%s): someone else may have put it there; remove "
					     "it, or give path= a file",
					     dir, errno == ELOOP ? "a symbolic link" : "a file");
		return xdm_error_set(XDM_E_CONFIG, "logging: cannot open the log directory %s: "
				     "%s; give path= a file", dir, strerror(errno));
	}
	if (fstat(*dirfd, &st) != 0) {
		close(*dirfd);
		*dirfd = -1;
		return xdm_error_set(XDM_E_CONFIG, "logging: cannot examine the log directory "
				     "%s: %s", dir, strerror(errno));
	}
	if (!private_dir(&st)) {
		names_user(st.st_uid, owner, sizeof(owner));
		close(*dirfd);
		*dirfd = -1;
		return xdm_error_set(XDM_E_CONFIG,
				     "logging: the log directory %s is user %s's (uid %u), mode "
				     "%03o, and not this user's alone (uid %u): someone else may "
				     "have made it first; remove it, or give path= a file",
				     dir, owner, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
				     (unsigned)geteuid());
	}
	return XDM_OK;
}

/* Why the file could not be opened, as a sentence. */
static enum xdm_status open_failed(const char *path, int err)
{
	if (err == ELOOP)
		return xdm_error_set(XDM_E_CONFIG,
				     "logging: %s is a symbolic link, and a log is never written "
				     "through one (whoever made it chose where the rows go); "
				     "remove it, or give path= another file", path);
	if (err == ENXIO)
		return xdm_error_set(XDM_E_CONFIG,
				     "logging: %s is a FIFO that nobody reads; start its reader "
				     "first, or give path= a file", path);
	return xdm_error_set(XDM_E_CONFIG, "logging: cannot open %s: %s", path, strerror(err));
}

/* The file just opened is this user's (or root's, who gave it); else why not. */
static enum xdm_status check_owner(const char *path, int fd)
{
	char owner[64];
	struct stat st;

	if (fstat(fd, &st) != 0)
		return xdm_error_set(XDM_E_CONFIG, "logging: cannot examine %s: %s", path,
				     strerror(errno));
	if (st.st_uid == geteuid() || st.st_uid == 0)
		return XDM_OK;
	names_user(st.st_uid, owner, sizeof(owner));
	return xdm_error_set(XDM_E_CONFIG,
			     "logging: %s belongs to user %s (uid %u), not to this process (uid "
			     "%u), and a log is written only into a file of its own user's (the "
			     "owner could read every row); remove it, or give path= another file",
			     path, owner, (unsigned)st.st_uid, (unsigned)geteuid());
}

enum xdm_status log_file_open(const char *pattern, uint32_t ordinal, char **path, int *fd)
{
	int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	char dir[PATH_MAX], name[PATH_MAX], full[PATH_MAX];
	enum xdm_status st;
	int dirfd = AT_FDCWD;

	*fd = -1;
	*path = NULL;
	st = expand_path(pattern ? pattern : LOG_DEFAULT_NAME, ordinal, name, sizeof(name));
	if (st)
		return st;
	if (pattern) {
		snprintf(full, sizeof(full), "%s", name);
	} else {
		st = open_log_dir(dir, sizeof(dir), &dirfd);
		if (st)
			return st;
		if ((size_t)snprintf(full, sizeof(full), "%s/%s", dir, name) >= sizeof(full)) {
			st = xdm_error_set(XDM_E_CONFIG, "logging: the log directory %s is too "
					   "long", dir);
			goto out;
		}
	}
	/* Non-blocking to open: a FIFO nobody reads must not hang the runtime. */
	*fd = openat(dirfd, name, flags, LOG_FILE_MODE);
	if (*fd < 0) {
		st = open_failed(full, errno);
		goto out;
	}
	st = check_owner(full, *fd);
	if (!st && fcntl(*fd, F_SETFL, O_APPEND) != 0)
		st = xdm_error_set(XDM_E_CONFIG, "logging: cannot make %s blocking: %s", full,
				   strerror(errno));
	if (!st) {
		*path = strdup(full);
		if (!*path)
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for the path");
	}
	if (st) {
		close(*fd);
		*fd = -1;
	}
out:
	if (dirfd >= 0)
		close(dirfd);
	return st;
}
