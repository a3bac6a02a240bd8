/* SPDX-License-Identifier: MIT */
/*
 * reader.c - a segment opened from outside: by a program that reads the
 * budgets of a machine (xdmctl ps, top, budget) or sets a limit, without
 * attaching to the budget as a process that allocates.
 *
 * The directory of segments is everyone's (/dev/shm by default), so a
 * name is trusted only once the file behind it is shown to be a segment:
 * a plain file, not a link, of this layout's size, written by a creator
 * that finished (the magic) with this layout's version.  A FIFO given a
 * segment's name must not hang the reader, so the file is examined before
 * it is opened and opened without blocking.
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

struct budget_shm *budget_segment_map(int dirfd, const char *name, bool writable, uid_t *owner,
				      int *fdp, char *why, size_t len)
{
	struct budget_shm *s = NULL;
	void *map;
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
			 errno == EACCES ? " (it is another user's budget)" : "");
		return NULL;
	}
	/* The name may have been given to another file since the fstatat. */
	if (fstat(fd, &st) != 0 || !file_ok(&st, why, len))
		goto out;
	map = mmap(NULL, sizeof(*s), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
		   fd, 0);
	if (map == MAP_FAILED) {
		snprintf(why, len, "cannot be mapped: %s", strerror(errno));
		goto out;
	}
	s = map;
	if (!budget_segment_layout_ok(s, why, len)) {
		munmap(s, sizeof(*s));
		s = NULL;
	}
out:
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
