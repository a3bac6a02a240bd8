/* SPDX-License-Identifier: MIT */
/*
 * reader.c - a segment opened from outside: by a program that reads the
 * budgets of a machine (xdmctl ps, top, budget, metrics, serve) or sets a
 * limit, without attaching to the budget as a process that allocates.
 *
 * The directory of segments may be everyone's (/dev/shm), so a name is
 * trusted only once the file behind it is shown to be a segment: a plain
 * file, not a link, of this layout's size, written by a creator that
 * finished (the magic) with this layout's version.  A FIFO given a
 * segment's name must not hang the reader, so the file is examined before
 * it is opened and opened without blocking.
 *
 * A reader never maps the file it reads.  Whoever can write the file can
 * also truncate it, and a mapping of a truncated file faults (SIGBUS) at
 * the reader's next access; a tool that lists every budget of a machine
 * must not die of another user's ftruncate.  So the segment is copied,
 * whole, with pread(2) into the reader's own memory and checked there: a
 * file cut short while it is read is a short read, said as a reason.  The
 * descriptor stays open where the caller asks: liveness asks the kernel
 * about locks on it (F_OFD_GETLK), which needs no mapping.
 *
 * In a directory anyone can write (/dev/shm), anyone can make a file with
 * a segment's name and any numbers in it.  There a reader reads only its
 * own user's files and root's: a file of a third user is skipped, unread,
 * and the reader is told whose it is.  In a directory that only root or
 * the reader owns and nobody else may write in, every user who can make a
 * file there was let in by its owner: a budget directory that a group
 * shares (xdm-budget(7)), whose members' segments are read.
 *
 * Only a writer maps (budget_segment_map): xdmctl budget --set, under the
 * credentials of the segment's owner when it runs as root, so that the
 * owner's truncation or garbage faults the owner's own process.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

bool budget_segment_layout_ok(const struct budget_shm *s, char *why, size_t len)
{
	if (atomic_load_explicit(&s->magic, memory_order_acquire) != BUDGET_MAGIC) {
		snprintf(why, len, "is not ready (being created, or abandoned by its creator)");
		return false;
	}
	if (s->version != BUDGET_LAYOUT_VERSION || s->nslots != BUDGET_SLOTS ||
	    s->size != sizeof(*s)) {
		snprintf(why, len,
			 "has layout version %u with %u slots; this xdm reads version %u, %u slots",
			 s->version, s->nslots, BUDGET_LAYOUT_VERSION, BUDGET_SLOTS);
		return false;
	}
	return true;
}

/* A segment's file: a plain file of the layout's size, else why not. */
static bool file_ok(const struct stat *st, char *why, size_t len)
{
	if (S_ISREG(st->st_mode) && (size_t)st->st_size == sizeof(struct budget_shm))
		return true;
	snprintf(why, len, "is %s of %lld bytes, not a segment of this xdm's layout (%zu bytes)",
		 S_ISREG(st->st_mode) ? "a file" : "no plain file", (long long)st->st_size,
		 sizeof(struct budget_shm));
	return false;
}

struct budget_shm *budget_segment_map_fd(int fd, bool writable, char *why, size_t len)
{
	struct budget_shm *s;
	struct stat st;
	void *map;

	if (fstat(fd, &st) != 0) {
		snprintf(why, len, "cannot be examined: %s", strerror(errno));
		return NULL;
	}
	if (!file_ok(&st, why, len))
		return NULL;
	map = mmap(NULL, sizeof(*s), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
		   fd, 0);
	if (map == MAP_FAILED) {
		snprintf(why, len, "cannot be mapped: %s", strerror(errno));
		return NULL;
	}
	s = map;
	if (!budget_segment_layout_ok(s, why, len)) {
		munmap(s, sizeof(*s));
		return NULL;
	}
	return s;
}

struct budget_shm *budget_segment_map(int dirfd, const char *name, bool writable, uid_t *owner,
				      int *fdp, char *why, size_t len)
{
	struct budget_shm *s;
	struct stat st;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		snprintf(why, len, "cannot be examined: %s", strerror(errno));
		return NULL;
	}
	if (owner)
		*owner = st.st_uid;
	if (!file_ok(&st, why, len))
		return NULL;
	fd = openat(dirfd, name,
		    (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, len, "cannot be opened%s: %s%s", writable ? " for writing" : "",
			 strerror(errno),
			 errno != EACCES ? "" :
			 st.st_uid != geteuid() ? " (it is another user's budget)" :
			 " (its mode denies it to its own user)");
		return NULL;
	}
	/* The name may have been given to another file since the fstatat. */
	s = budget_segment_map_fd(fd, writable, why, len);
	if (s && fdp)
		*fdp = fd;
	else
		close(fd);
	return s;
}

void budget_segment_unmap(struct budget_shm *s)
{
	if (s)
		munmap(s, sizeof(*s));
}

/*
 * Whether a file of owner, in the directory dir, is read by a reader of
 * euid: its own and root's always; another user's only where nobody but
 * the directory's owner (root or the reader) decides who makes names.
 */
static bool owner_trusted(const struct stat *dir, uid_t owner, uid_t euid)
{
	if (owner == euid || owner == 0)
		return true;
	return !(dir->st_mode & S_IWOTH) && (dir->st_uid == 0 || dir->st_uid == euid);
}

/* All of the file into buf: the bytes read (fewer: it ended first), or -1. */
static ssize_t read_whole(int fd, void *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		ssize_t n = pread(fd, (char *)buf + got, size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

enum budget_read budget_segment_read(int dirfd, const char *name, struct budget_shm *copy,
				     uid_t *owner, int *fdp, char *why, size_t len)
{
	enum budget_read result = BUDGET_READ_FAILED;
	struct stat st, dir;
	ssize_t got;
	int fd;

	if (strchr(name, '/')) {
		snprintf(why, len, "is a path, not a name in its directory");
		return BUDGET_READ_FAILED;
	}
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		snprintf(why, len, "cannot be examined: %s", strerror(errno));
		return BUDGET_READ_FAILED;
	}
	if (owner)
		*owner = st.st_uid;
	if (fstatat(dirfd, ".", &dir, 0) != 0) {
		snprintf(why, len, "is in a directory that cannot be examined: %s",
			 strerror(errno));
		return BUDGET_READ_FAILED;
	}
	if (!owner_trusted(&dir, st.st_uid, geteuid())) {
		snprintf(why, len, "is uid %u's, in a directory anyone can write: not read",
			 (unsigned int)st.st_uid);
		return BUDGET_READ_SKIPPED;
	}
	if (!file_ok(&st, why, len))
		return BUDGET_READ_FAILED;
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, len, "cannot be opened: %s%s", strerror(errno),
			 errno == EACCES ? " (it is another user's budget)" : "");
		return BUDGET_READ_FAILED;
	}
	/* The name may have been given to another file since the fstatat. */
	if (fstat(fd, &st) != 0 || !file_ok(&st, why, len))
		goto out;
	if (!owner_trusted(&dir, st.st_uid, geteuid())) {
		snprintf(why, len, "is uid %u's, in a directory anyone can write: not read",
			 (unsigned int)st.st_uid);
		result = BUDGET_READ_SKIPPED;
		goto out;
	}
	got = read_whole(fd, copy, sizeof(*copy));
	if (got < 0) {
		snprintf(why, len, "cannot be read: %s", strerror(errno));
		goto out;
	}
	if ((size_t)got < sizeof(*copy)) {
		snprintf(why, len, "was cut short while it was read (%zd of %zu bytes): skipped",
			 got, sizeof(*copy));
		goto out;
	}
	if (budget_segment_layout_ok(copy, why, len))
		result = BUDGET_READ_OK;
out:
	if (result == BUDGET_READ_OK && fdp)
		*fdp = fd;
	else
		close(fd);
	return result;
}

int32_t budget_segment_slot_pid(int fd, unsigned int slot)
{
	off_t at = (off_t)(offsetof(struct budget_shm, slots) +
			   (size_t)slot * sizeof(struct budget_slot) +
			   offsetof(struct budget_slot, pid));
	int32_t pid;

	if (slot >= BUDGET_SLOTS || pread(fd, &pid, sizeof(pid), at) != (ssize_t)sizeof(pid))
		return 0;
	return pid;
}
