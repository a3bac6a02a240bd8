/* SPDX-License-Identifier: MIT */
/*
 * segments.c - the budget segments of the machine, read from
 * outside.
 *
 * A segment is mapped read-only and read without its lock, as the
 * budget's own files are: the lock is held across syscalls by a reclaim,
 * and looking must never wait on it.  So the numbers are a sample, each
 * one exact when it was read; a process that attaches or leaves meanwhile
 * is seen or not.  A process is called dead exactly when a reclaimer would
 * call it dead (liveness.c, compiled in from the adaptor).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"
#include "segments.h"

const char *xdmctl_proc_state_name(enum xdmctl_proc_state state)
{
	static const char *const names[] = { "live", "stopped", "dead" };

	return names[state];
}

static uint64_t load(const _Atomic uint64_t *v)
{
	return atomic_load_explicit((_Atomic uint64_t *)v, memory_order_relaxed);
}

static void read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(buf, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0) {
		snprintf(buf, len, "?");
		return;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/*
 * One slot's process into *p; false when the slot changed hands while it
 * was read (a detach and an attach between the two reads of pid), which
 * would pair one process's pid with another's start time.
 */
static bool read_proc(const struct budget_slot *slot, struct xdmctl_proc *p)
{
	_Atomic int32_t *pidp = (_Atomic int32_t *)&slot->pid;
	/* pid is claimed last: a pid seen with acquire has its start time. */
	int32_t pid = atomic_load_explicit(pidp, memory_order_acquire);
	uint64_t start;
	char state = '?';

	if (pid <= 0)
		return false;
	p->pid = pid;
	p->start_time = slot->start_time;
	p->used = load(&slot->used);
	if (atomic_load_explicit(pidp, memory_order_acquire) != pid)
		return false;
	if (!budget_slot_alive(pid, p->start_time)) {
		p->state = XDMCTL_PROC_DEAD;
		snprintf(p->comm, sizeof(p->comm), "?");
		return true;
	}
	read_comm(pid, p->comm, sizeof(p->comm));
	/* T: stopped by a signal; t: by a debugger. */
	p->state = budget_proc_identity(pid, &start, &state) == 0 && (state == 'T' || state == 't')
			   ? XDMCTL_PROC_STOPPED
			   : XDMCTL_PROC_LIVE;
	return true;
}

/*
 * What a segment holds, or why it cannot be read, into seg.  A segment
 * truncated under the mapping faults the reader, as it faults every
 * process of that budget (xdm-budget(7), THE SEGMENT).
 */
static void read_segment(int dirfd, const char *name, struct xdmctl_segment *seg)
{
	struct budget_shm *s = budget_segment_map(dirfd, name, false, &seg->owner,
						  seg->unreadable, sizeof(seg->unreadable));

	if (!s)
		return;
	seg->limit = load(&s->limit);
	seg->used = load(&s->used);
	seg->peak = load(&s->peak);
	seg->refusals = load(&s->refusals);
	seg->device_total = s->device_total;
	snprintf(seg->device_uuid, sizeof(seg->device_uuid), "%.*s",
		 (int)strnlen(s->device_uuid, sizeof(s->device_uuid)), s->device_uuid);
	seg->unsettled = atomic_load_explicit(&s->unsettled, memory_order_relaxed);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++)
		seg->nprocs += read_proc(&s->slots[i], &seg->procs[seg->nprocs]);
	budget_segment_unmap(s);
}

static int by_pid(const void *a, const void *b)
{
	const struct xdmctl_proc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static int by_key(const void *a, const void *b)
{
	const struct xdmctl_segment *x = a, *y = b;

	return strcmp(x->key, y->key);
}

int xdmctl_segments_read(const struct xdmctl_ctx *ctx, const char *cmd,
			 struct xdmctl_segment **out, size_t *n)
{
	const char *prefix = &BUDGET_NAME_PREFIX[1];	/* the name without its '/' */
	struct xdmctl_segment *segs = NULL;
	size_t count = 0, cap = 0;
	struct dirent *d;
	DIR *dir;

	dir = opendir(ctx->shm_dir);
	if (!dir)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "cannot list %s: %s", ctx->shm_dir,
				   strerror(errno));
	while ((d = readdir(dir))) {
		struct xdmctl_segment *seg;
		size_t keylen;

		if (strncmp(d->d_name, prefix, strlen(prefix)) != 0)
			continue;
		keylen = strlen(d->d_name) - strlen(prefix);
		if (keylen == 0 || keylen > BUDGET_KEY_MAX)
			continue;	/* no name the adaptor makes */
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct xdmctl_segment *bigger = realloc(segs, ncap * sizeof(*segs));

			if (!bigger)
				goto nomem;
			segs = bigger;
			cap = ncap;
		}
		seg = &segs[count++];
		memset(seg, 0, sizeof(*seg));
		/* Both fit (keylen was checked); the precision tells the compiler so. */
		snprintf(seg->name, sizeof(seg->name), "%.*s", (int)sizeof(seg->name) - 1,
			 d->d_name);
		snprintf(seg->key, sizeof(seg->key), "%.*s", (int)sizeof(seg->key) - 1,
			 d->d_name + strlen(prefix));
		snprintf(seg->path, sizeof(seg->path), "%s/%s", ctx->shm_dir, d->d_name);
		read_segment(dirfd(dir), d->d_name, seg);
		qsort(seg->procs, seg->nprocs, sizeof(seg->procs[0]), by_pid);
	}
	closedir(dir);
	if (count)
		qsort(segs, count, sizeof(*segs), by_key);
	*out = segs;
	*n = count;
	return 0;
nomem:
	closedir(dir);
	free(segs);
	return xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "out of memory listing %s", ctx->shm_dir);
}

struct xdmctl_segment *xdmctl_segment_find(struct xdmctl_segment *segs, size_t n,
					   const char *device, const char *cmd, int *rc)
{
	const char *prefix = &BUDGET_NAME_PREFIX[1];
	struct xdmctl_segment *found = NULL;
	size_t matches = 0;

	if (!device) {
		if (n == 1)
			return &segs[0];
		if (n == 0)
			*rc = xdmctl_fail(XDMCTL_EXIT_NONE, cmd, "no xdm budget on this machine");
		else
			*rc = xdmctl_fail(XDMCTL_EXIT_USAGE, cmd,
					  "%zu budgets on this machine: name one (xdmctl ps lists them)",
					  n);
		return NULL;
	}
	/* A segment name, with or without its slash, stands for its key. */
	if (device[0] == '/')
		device++;
	if (strncmp(device, prefix, strlen(prefix)) == 0 && device[strlen(prefix)])
		device += strlen(prefix);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(segs[i].key, device) == 0)
			return &segs[i];
		if (strncmp(segs[i].key, device, strlen(device)) == 0) {
			found = &segs[i];
			matches++;
		}
	}
	if (matches == 1 && device[0])
		return found;
	if (matches)
		*rc = xdmctl_fail(XDMCTL_EXIT_USAGE, cmd,
				  "'%s' is the start of %zu budgets' keys: give more of it", device,
				  matches);
	else
		*rc = xdmctl_fail(XDMCTL_EXIT_NONE, cmd, "no budget has the key '%s'", device);
	return NULL;
}
