/* SPDX-License-Identifier: MIT */
/*
 * segments.c - the budget segments of the machine, read from
 * outside.
 *
 * A segment is copied whole into xdmctl's memory with pread(2) and read
 * there (reader.c): never mapped, so that a file truncated under xdmctl
 * is a segment skipped with a reason, never a SIGBUS.  It is read without
 * its lock, as the budget's own files are: the lock is held across
 * syscalls by a reclaim, and looking must never wait on it.  The copy is
 * not one instant either: the kernel copies the file while its processes
 * go on changing it, so each counter is as it was when its bytes were
 * copied, and a process that attaches or leaves meanwhile is seen or not.
 * The numbers are a sample, exact at quiescence.  A process is called
 * dead exactly when a reclaimer would call it dead (liveness.c, asked
 * through the descriptor of the file, which needs no mapping).
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
#include "lib/names/names.h"
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

/* A NUL-terminated copy of a fixed-size name of the segment. */
static void copy_name(char *dst, size_t len, const char *src, size_t srclen)
{
	snprintf(dst, len, "%.*s", (int)strnlen(src, srclen), src);
}

/*
 * One slot's process of the copy s into *p; false when the slot changed
 * hands while it was copied (a detach and an attach before its pid, read
 * again from the file, says the same), which would pair one process's pid
 * with another's start time.  Alive is what its lock says, as a reclaimer
 * reads it (fd: the segment file); stopped is read from /proc only for a
 * process of xdmctl's own pid namespace, the only one whose /proc entry is
 * its.
 */
static bool read_proc(struct budget_shm *s, int fd, unsigned int i, struct xdmctl_proc *p)
{
	const struct budget_slot *slot = &s->slots[i];
	int32_t pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);
	const struct budget_group *g;
	uint64_t start;
	char state = '?';

	if (pid <= 0)
		return false;
	p->pid = pid;
	p->start_time = slot->start_time;
	p->used = load(&slot->used);
	p->pidns = slot->pidns;
	p->kind = slot->kind;
	copy_name(p->comm, sizeof(p->comm), slot->comm, sizeof(slot->comm));
	copy_name(p->container, sizeof(p->container), slot->container, sizeof(slot->container));
	g = budget_group_of(s, slot);
	copy_name(p->group, sizeof(p->group), g ? g->name : "", g ? sizeof(g->name) : 0);
	if (budget_segment_slot_pid(fd, i) != pid)
		return false;
	p->here = p->pidns && p->pidns == budget_pidns_of(0);
	p->pid_here = 0;
	if (!budget_slot_alive(s, fd, i, budget_pidns_of(0))) {
		p->state = XDMCTL_PROC_DEAD;
		return true;
	}
	p->state = XDMCTL_PROC_LIVE;
	/*
	 * Here, the pid still names the slot's process (budget_slot_alive
	 * checked it); elsewhere, /proc/<pid> is another process.  The start
	 * time is read again for the state letter.
	 */
	if (!p->here || budget_proc_identity(pid, &start, &state) != 0 || start != p->start_time)
		return true;
	p->pid_here = pid;
	/* T: stopped by a signal; t: by a debugger. */
	if (state == 'T' || state == 't')
		p->state = XDMCTL_PROC_STOPPED;
	return true;
}

static int by_name(const void *a, const void *b)
{
	const struct xdmctl_group *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void read_groups(struct budget_shm *s, struct xdmctl_segment *seg)
{
	for (unsigned int i = 0; i < BUDGET_GROUPS; i++) {
		struct budget_group *g = &s->groups[i];
		struct xdmctl_group *out = &seg->groups[seg->ngroups];

		if (!g->members)
			continue;
		copy_name(out->name, sizeof(out->name), g->name, sizeof(g->name));
		out->members = g->members;
		out->limit = load(&g->limit);
		out->used = load(&g->used);
		out->peak = load(&g->peak);
		out->refusals = load(&g->refusals);
		seg->ngroups++;
	}
	qsort(seg->groups, seg->ngroups, sizeof(seg->groups[0]), by_name);
}

/*
 * Says once per run, on standard error, that another user's file is not
 * read: top and serve read the directory again and again.
 */
static void say_skipped(const struct xdmctl_ctx *ctx, const char *cmd,
			const struct xdmctl_segment *seg)
{
	struct xdmctl_said *said = ctx->said;
	char user[64];

	for (size_t i = 0; said && i < said->nskipped; i++)
		if (said->skipped[i].owner == seg->owner &&
		    strcmp(said->skipped[i].name, seg->name) == 0)
			return;
	if (said && said->nskipped == XDMCTL_SAID_MAX) {
		if (!said->more)
			xdmctl_fail(0, cmd, "more files of other users in %s are not read; they "
				    "are not named again", ctx->shm_dir);
		said->more = true;
		return;
	}
	if (said) {
		snprintf(said->skipped[said->nskipped].name, sizeof(said->skipped[0].name), "%s",
			 seg->name);
		said->skipped[said->nskipped++].owner = seg->owner;
	}
	names_user(seg->owner, user, sizeof(user));
	xdmctl_fail(0, cmd, "%s is owned by user %s (uid %u), neither you nor root, in a "
		    "directory anyone can write: it is not read, for anyone could have made it "
		    "(share a budget between users through a directory made for it: "
		    "xdm-budget(7))",
		    seg->path, user, (unsigned int)seg->owner);
}

/* What a segment holds, or why it cannot be read, into seg; copy is scratch. */
static void read_segment(const struct xdmctl_ctx *ctx, const char *cmd, int dirfd,
			 const char *name, struct budget_shm *copy, struct xdmctl_segment *seg)
{
	int fd = -1;
	enum budget_read got = budget_segment_read(dirfd, name, copy, &seg->owner, &fd,
						   seg->unreadable, sizeof(seg->unreadable));

	if (got == BUDGET_READ_SKIPPED) {
		seg->skipped = true;
		say_skipped(ctx, cmd, seg);
	}
	if (got != BUDGET_READ_OK)
		return;
	seg->limit = load(&copy->limit);
	seg->used = load(&copy->used);
	seg->peak = load(&copy->peak);
	seg->refusals = load(&copy->refusals);
	seg->device_total = copy->device_total;
	copy_name(seg->device_uuid, sizeof(seg->device_uuid), copy->device_uuid,
		  sizeof(copy->device_uuid));
	seg->unsettled = atomic_load_explicit(&copy->unsettled, memory_order_relaxed);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++)
		seg->nprocs += read_proc(copy, fd, i, &seg->procs[seg->nprocs]);
	read_groups(copy, seg);
	close(fd);
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
	struct budget_shm *copy;
	size_t count = 0, cap = 0;
	struct dirent *d;
	DIR *dir;

	copy = malloc(sizeof(*copy));
	if (!copy)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "out of memory listing %s", ctx->shm_dir);
	dir = opendir(ctx->shm_dir);
	if (!dir) {
		free(copy);
		return xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "cannot list %s: %s", ctx->shm_dir,
				   strerror(errno));
	}
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
		read_segment(ctx, cmd, dirfd(dir), d->d_name, copy, seg);
		qsort(seg->procs, seg->nprocs, sizeof(seg->procs[0]), by_pid);
	}
	closedir(dir);
	free(copy);
	if (count)
		qsort(segs, count, sizeof(*segs), by_key);
	*out = segs;
	*n = count;
	return 0;
nomem:
	closedir(dir);
	free(copy);
	free(segs);
	return xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "out of memory listing %s", ctx->shm_dir);
}

const struct xdmctl_group *xdmctl_group_find(const struct xdmctl_segment *seg, const char *name)
{
	for (size_t i = 0; i < seg->ngroups; i++)
		if (strcmp(seg->groups[i].name, name) == 0)
			return &seg->groups[i];
	return NULL;
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

const char *xdmctl_proc_via(const struct xdmctl_proc *p)
{
	switch (p->kind & (BUDGET_SLOT_LIBXDM | BUDGET_SLOT_PRELOAD)) {
	case BUDGET_SLOT_LIBXDM | BUDGET_SLOT_PRELOAD:
		return "xdm+preload";
	case BUDGET_SLOT_PRELOAD:
		return "preload";
	default:
		return "xdm";
	}
}
