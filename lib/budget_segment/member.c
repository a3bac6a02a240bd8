/* SPDX-License-Identifier: MIT */
/*
 * member.c - a process's membership of the shared segment: create or find
 * it, attach the process to it, detach, and unlink it when the last
 * process leaves.  The budget adaptor and the preload shim both attach
 * through here; a process that has both shares one slot.
 *
 * The segment is a file, xdm-budget-<key>, in the directory that dir=
 * names (a directory that containers share, for one budget across them),
 * or by default the one the users of the machine share, else /dev/shm
 * (shared_dir.c).  It is this user's, mode 0600, and one of another user
 * is refused; in a directory a group shares it is the group's, mode 0660,
 * and one of another member is used.  Each attached process keeps it
 * open: the lock it holds on its slot through that descriptor is how
 * others know it is alive (liveness.c).
 *
 * Creation race: open(O_CREAT | O_EXCL) picks one creator.  It sizes
 * and fills the segment and writes the magic last; everyone else waits for
 * the magic and never reads a segment without it.  A segment that stays
 * without its magic for BUDGET_READY_WAIT_MS lost its creator during those
 * few instructions: it is unlinked (if the name still names it) and the
 * race is run again.
 *
 * Detach race: the last process out marks the segment unlinked under the
 * lock, then unlinks the name.  A process that opened the name just before
 * finds the mark once it holds the lock, and starts again with a new one.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"
#include "lib/names/names.h"

#define BUDGET_READY_WAIT_MS 2000
#define BUDGET_OPEN_TRIES 16

/* Distinguishes "start again" from a real failure. */
#define BUDGET_RETRY XDM_STATUS_COUNT

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The segment's mode: its user's, or its group's in a shared directory. */
static mode_t file_mode(const struct budget_member *m)
{
	return m->shared ? 0660 : 0600;
}

/* Open the segment file: no link followed, closed across exec. */
static int open_file(const struct budget_member *m, int flags)
{
	return open(m->path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, file_mode(m));
}

static enum xdm_status errno_status(int err, const struct budget_member *m, const char *what)
{
	char buf[128];
	const char *msg = strerror_r(err, buf, sizeof(buf));

	if (err == ENOMEM || err == ENOSPC)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "budget: %s %s: %s", what, m->name, msg);
	return xdm_error_set_driver(err, "budget: %s %s: %s", what, m->name, msg);
}

/* Why the lock could not be taken, as a sentence. */
static enum xdm_status lock_status(int err, const struct budget_member *m)
{
	if (err == ETIMEDOUT)
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: the lock of the shared segment %s was not released "
				     "in %d s: a process holding it is stopped",
				     m->name, BUDGET_LOCK_WAIT_S);
	if (err == EINVAL || err == ENOLCK)
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "budget: cannot lock the shared segment %s (fcntl "
				     "F_OFD_SETLK: %s): %s must be on a file system with open "
				     "file description locks (tmpfs, ext4, xfs)",
				     m->path, strerror(err), m->dir);
	return errno_status(err, m, "cannot take the lock of");
}

/* We won the O_EXCL race: fill the segment, magic last. */
static enum xdm_status create_segment(struct budget_member *m, int fd, struct budget_shm **out)
{
	struct budget_shm *s;
	enum xdm_status st;

	if (ftruncate(fd, sizeof(*s)) != 0) {
		st = errno_status(errno, m, "cannot size the shared segment");
		goto fail;
	}
	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		st = errno_status(errno, m, "cannot map the shared segment");
		goto fail;
	}
	/* ftruncate gave zeros: every slot is free, every counter 0. */
	s->version = BUDGET_LAYOUT_VERSION;
	s->nslots = BUDGET_SLOTS;
	s->size = sizeof(*s);
	s->device_total = m->device_total;
	snprintf(s->device_uuid, sizeof(s->device_uuid), "%s", m->uuid);
	budget_set_limit_locked(s, m->configured_limit);	/* nobody else can see it yet */
	atomic_store_explicit(&s->magic, BUDGET_MAGIC, memory_order_release);
	*out = s;
	return XDM_OK;

fail:
	unlink(m->path);
	return st;
}

/* The segment was never finished: unlink it if the name is still it. */
static void drop_abandoned(struct budget_member *m, int fd)
{
	struct stat mine, named;

	if (fstat(fd, &mine) == 0 && lstat(m->path, &named) == 0 &&
	    mine.st_ino == named.st_ino && mine.st_dev == named.st_dev)
		unlink(m->path);
}

/*
 * Never use a segment another user could write, or made to mislead us.
 * Outside a shared directory that is a name another user took first (in
 * /dev/shm anyone can): say whose it is, and how to get out of its way.
 */
static enum xdm_status foreign(const struct budget_member *m, uid_t owner)
{
	char user[64];

	names_user(owner, user, sizeof(user));
	return xdm_error_set(XDM_E_CONFIG,
			     "budget: %s belongs to user %s (uid %u), not to this process "
			     "(uid %u): another user took this budget's name first in %s. "
			     "Share the budget through %s (the directory of group '%s' that "
			     "systemd-tmpfiles makes), or give budget a key= of its own, or "
			     "set dir= or XDM_BUDGET_DIR to a directory of your own",
			     m->path, user, (unsigned)owner, (unsigned)geteuid(), m->dir,
			     BUDGET_SHARED_DIR, XDM_BUDGET_SHARED_GROUP);
}

/*
 * In a shared directory a segment is the directory's group's, open to the
 * group and to nobody else; its owner may be any member (only they and
 * root can make a name there).
 */
static bool shared_segment_ok(const struct budget_member *m, const struct stat *sb)
{
	bool group_rw = (sb->st_mode & (S_IRGRP | S_IWGRP)) == (S_IRGRP | S_IWGRP);

	return sb->st_gid == m->shared_gid && !(sb->st_mode & (S_ISUID | S_ISGID | S_ISVTX)) &&
	       !(sb->st_mode & S_IRWXO) && (sb->st_uid == geteuid() || group_rw);
}

static enum xdm_status not_the_groups(const struct budget_member *m, const struct stat *sb)
{
	char group[64];

	names_group(m->shared_gid, group, sizeof(group));
	return xdm_error_set(XDM_E_CONFIG,
			     "budget: %s is not a segment of group '%s', which shares %s: it "
			     "is uid %u's, of gid %u, mode %04o, and a segment there is the "
			     "group's, mode 0660. Remove it once no process uses it",
			     m->path, group, m->dir, (unsigned)sb->st_uid, (unsigned)sb->st_gid,
			     (unsigned)(sb->st_mode & 07777));
}

/* Whether a segment's owner and mode let this process use it, else why not. */
static enum xdm_status check_owner(const struct budget_member *m, const struct stat *sb)
{
	if (m->shared && !shared_segment_ok(m, sb))
		return not_the_groups(m, sb);
	if (!m->shared && sb->st_uid != geteuid())
		return foreign(m, sb->st_uid);
	if (!m->shared && (sb->st_mode & 077))
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: the shared segment %s is open to other users "
				     "(mode %03o); remove %s and start again",
				     m->name, (unsigned)(sb->st_mode & 0777), m->path);
	if (!S_ISREG(sb->st_mode))
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: %s is a special file, not a shared segment: remove it",
				     m->path);
	return XDM_OK;
}

/*
 * Just made in a shared directory: the group's (the set-group-ID bit made
 * it so; else it is given), and open to it whatever the creator's umask
 * took from the mode.  A member who finds it before this is done waits
 * (open_segment).
 */
static enum xdm_status share_with_group(struct budget_member *m, int fd)
{
	struct stat sb;

	if (fstat(fd, &sb) != 0)
		return errno_status(errno, m, "cannot stat the shared segment");
	if (sb.st_gid != m->shared_gid && fchown(fd, (uid_t)-1, m->shared_gid) != 0)
		return errno_status(errno, m, "cannot give the directory's group to the segment");
	if (fchmod(fd, file_mode(m)) != 0)
		return errno_status(errno, m, "cannot open to the directory's group the segment");
	return XDM_OK;
}

/*
 * The name exists and cannot be opened: say what is there and whose it is
 * (a name another user took first is the likely case), not just errno.
 */
static enum xdm_status unopenable(struct budget_member *m, int err)
{
	const char *path = m->path;
	struct stat sb;

	if (lstat(path, &sb) != 0)
		return errno_status(err, m, "cannot open the shared segment");
	if (m->shared && !shared_segment_ok(m, &sb))
		return not_the_groups(m, &sb);
	if (!m->shared && sb.st_uid != geteuid())
		return foreign(m, sb.st_uid);
	if (!S_ISREG(sb.st_mode))
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: %s is a %s, not a shared segment: remove it",
				     path, S_ISLNK(sb.st_mode) ? "symbolic link" :
				     S_ISDIR(sb.st_mode) ? "directory" : "special file");
	return errno_status(err, m, "cannot open the shared segment");
}

/*
 * No magic after the wait.  A creator that died before writing it had
 * written at most the header: a segment with anything in its slots, or a
 * header nobody finished, may be in use by processes that came before
 * garbage got in, and unlinking it would split their budget.  Only an
 * empty one is taken for abandoned.
 */
static enum xdm_status abandoned_or_corrupt(struct budget_member *m, int fd, const struct budget_shm *s)
{
	bool used = false;

	if (s) {
		for (unsigned int i = 0; i < BUDGET_SLOTS && !used; i++)
			used = atomic_load_explicit(&s->slots[i].pid, memory_order_relaxed) != 0;
		used = used || atomic_load_explicit(&s->used, memory_order_relaxed) ||
		       s->version != 0 || s->nslots != 0 || s->size != 0;
	}
	if (used)
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: the shared segment %s has no magic but holds data: "
				     "it is corrupt and not used. Remove %s once no "
				     "process uses it",
				     m->name, m->path);
	drop_abandoned(m, fd);
	return BUDGET_RETRY;
}

/* Someone else created it: check whose it is, wait for the magic, map it. */
static enum xdm_status join_segment(struct budget_member *m, int fd, struct budget_shm **out)
{
	struct budget_shm *s = NULL;
	enum xdm_status st;
	struct stat sb;
	int waited;

	/* Whose it is first: never map a segment another user could write
	 * (or, in a shared directory, anyone outside its group). */
	if (fstat(fd, &sb) != 0)
		return errno_status(errno, m, "cannot stat the shared segment");
	st = check_owner(m, &sb);
	if (st)
		return st;

	for (waited = 0;; waited++) {
		/* The creator sizes it in one call: another size is another
		 * layout, and no size yet means a map now would fault. */
		if (sb.st_size != 0 && (uint64_t)sb.st_size != sizeof(*s)) {
			st = xdm_error_set(XDM_E_CONFIG,
					   "budget: the shared segment %s is %jd bytes, not the "
					   "%zu of this xdm's layout: every process on one device "
					   "must run the same xdm",
					   m->name, (intmax_t)sb.st_size, sizeof(*s));
			goto fail;
		}
		if (!s && sb.st_size != 0) {
			s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (s == MAP_FAILED)
				return errno_status(errno, m, "cannot map the shared segment");
		}
		if (s) {
			uint64_t magic = atomic_load_explicit(&s->magic, memory_order_acquire);

			if (magic == BUDGET_MAGIC)
				break;
			/* The creator writes only the magic there, once. */
			if (magic != 0) {
				st = xdm_error_set(XDM_E_CONFIG,
						   "budget: %s is not an xdm budget segment (its "
						   "magic is %#" PRIx64 "): it is not used. Remove "
						   "%s once no process uses it",
						   m->name, magic, m->path);
				goto fail;
			}
		}
		if (waited >= BUDGET_READY_WAIT_MS) {
			st = abandoned_or_corrupt(m, fd, s);
			goto fail;
		}
		sleep_ms(1);
		if (!s && fstat(fd, &sb) != 0) {
			st = errno_status(errno, m, "cannot stat the shared segment");
			goto fail;
		}
	}
	if (s->version != BUDGET_LAYOUT_VERSION || s->nslots != BUDGET_SLOTS ||
	    s->size != sizeof(*s)) {
		st = xdm_error_set(XDM_E_CONFIG,
				     "budget: the shared segment %s has layout version %u with %u "
				     "slots (%" PRIu64 " bytes); this xdm uses version %u, %u slots "
				     "(%zu bytes): every process on one device must run the same "
				     "xdm",
				     m->name, s->version, s->nslots, s->size, BUDGET_LAYOUT_VERSION,
				     BUDGET_SLOTS, sizeof(*s));
		goto fail;
	}
	/* A budget is one device's: a key shared by two devices is a mistake. */
	if (strncmp(s->device_uuid, m->uuid, sizeof(s->device_uuid))) {
		st = xdm_error_set(XDM_E_CONFIG,
				     "budget: the shared segment %s is the budget of device %.*s, "
				     "and this runtime's device is %s: give each device its own "
				     "key (%%u in a key stands for the device's UUID), or leave "
				     "key unset", m->name, (int)strnlen(s->device_uuid,
									sizeof(s->device_uuid)),
				     s->device_uuid, m->uuid);
		goto fail;
	}
	*out = s;
	return XDM_OK;

fail:
	if (s)
		munmap(s, sizeof(*s));
	return st;
}

/*
 * Open an existing segment.  In a shared directory another member's
 * segment is closed to us (EACCES) until its creator has opened it to the
 * group, a moment after making it: wait for that as for the magic.
 */
static int open_existing(const struct budget_member *m)
{
	int fd;

	for (int waited = 0;; waited++) {
		fd = open_file(m, O_RDWR);
		if (fd >= 0 || errno != EACCES || !m->shared || waited >= BUDGET_READY_WAIT_MS)
			return fd;
		sleep_ms(1);
	}
}

/* The segment mapped in *out, its file open in *fd (kept: it holds our lock). */
static enum xdm_status open_segment(struct budget_member *m, struct budget_shm **out, int *fd)
{
	enum xdm_status st;

	*fd = open_file(m, O_RDWR | O_CREAT | O_EXCL);
	if (*fd >= 0) {
		st = m->shared ? share_with_group(m, *fd) : XDM_OK;
		if (st)
			unlink(m->path);
		else
			st = create_segment(m, *fd, out);
		goto out;
	}
	if (errno != EEXIST)
		return errno_status(errno, m, "cannot create the shared segment");
	*fd = open_existing(m);
	if (*fd < 0) {
		if (errno == ENOENT)	/* its last user unlinked it meanwhile */
			return BUDGET_RETRY;
		return unopenable(m, errno);
	}
	st = join_segment(m, *fd, out);
out:
	if (st) {
		close(*fd);
		*fd = -1;
	}
	return st;
}

/*
 * Under the lock: this process's slot, claimed if it has none yet, and
 * this layer's hold on its lock.  A process is its pid, its start time
 * and its pid namespace: pids repeat from one container to another.
 */
static enum xdm_status claim_slot(struct budget_member *m, struct budget_shm *s)
{
	struct budget_slot *free_slot = NULL;
	unsigned int free_index = 0;
	int err;

	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		struct budget_slot *slot = &s->slots[i];
		pid_t pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);

		if (pid == m->pid && slot->start_time == m->start_time &&
		    slot->pidns == m->pidns) {
			err = budget_slot_hold(m->fd, i);
			if (err)
				goto no_lock;
			slot->attach++;
			slot->kind |= m->kind;
			m->slot = slot;
			m->slot_index = i;
			return XDM_OK;
		}
		if (!pid && !free_slot) {
			free_slot = slot;
			free_index = i;
		}
	}
	if (!free_slot)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "budget: all %u process slots of %s are taken by live "
				     "processes",
				     BUDGET_SLOTS, m->name);
	/* The lock first, pid last: a claim cut short leaves a free slot. */
	err = budget_slot_hold(m->fd, free_index);
	if (err)
		goto no_lock;
	/* A slot settled after a death inside a change keeps begun != done:
	 * reset both. */
	free_slot->attach = 1;
	free_slot->start_time = m->start_time;
	free_slot->group = 0;
	free_slot->kind = m->kind;
	free_slot->pidns = m->pidns;
	memcpy(free_slot->comm, m->comm, sizeof(free_slot->comm));
	memcpy(free_slot->container, m->container, sizeof(free_slot->container));
	atomic_store_explicit(&free_slot->used, 0, memory_order_relaxed);
	atomic_store_explicit(&free_slot->begun, 0, memory_order_relaxed);
	atomic_store_explicit(&free_slot->done, 0, memory_order_relaxed);
	atomic_store_explicit(&free_slot->pid, m->pid, memory_order_release);
	m->slot = free_slot;
	m->slot_index = free_index;
	return XDM_OK;

no_lock:
	return xdm_error_set(XDM_E_NOT_SUPPORTED,
			     "budget: cannot lock this process's slot of %s (fcntl "
			     "F_OFD_SETLK: %s): the lock is how other processes know this "
			     "one is alive; %s must be on a file system with open file "
			     "description locks (tmpfs, ext4, xfs; not every network file "
			     "system)",
			     m->path, strerror(-err), m->dir);
}

/*
 * Under the lock: this process's group, joined by its first budget layer
 * (or the entry made by the group's first member, whose group_limit
 * stands).  Every layer of one process on one device names the same group:
 * the process has one slot, and a slot one group.
 */
static enum xdm_status join_group(struct budget_member *m, struct budget_shm *s)
{
	struct budget_slot *slot = m->slot;
	struct budget_group *g = budget_group_of(s, slot), *free_g = NULL;

	if (g || slot->group) {
		if (!g || strncmp(g->name, m->group_name, sizeof(g->name)))
			goto mismatch;
		m->group = g;
		return XDM_OK;
	}
	if (!m->group_name[0])
		return XDM_OK;
	if (slot->attach > 1)
		goto mismatch;	/* an earlier layer of this process joined none */
	for (unsigned int i = 0; i < BUDGET_GROUPS && !g; i++) {
		struct budget_group *e = &s->groups[i];

		if (e->members && !strncmp(e->name, m->group_name, sizeof(e->name)))
			g = e;
		else if (!e->members && !free_g)
			free_g = e;
	}
	if (!g) {
		if (!free_g)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY,
					     "budget: all %u groups of %s are taken; group '%s' "
					     "cannot be made",
					     BUDGET_GROUPS, m->name, m->group_name);
		g = free_g;
		memset(g->name, 0, sizeof(g->name));
		memcpy(g->name, m->group_name, strlen(m->group_name));
		atomic_store_explicit(&g->used, 0, memory_order_relaxed);
		atomic_store_explicit(&g->peak, 0, memory_order_relaxed);
		atomic_store_explicit(&g->refusals, 0, memory_order_relaxed);
		budget_set_group_limit_locked(g, m->group_limit);
	}
	g->members++;
	slot->group = (uint32_t)(g - s->groups) + 1;
	m->group = g;
	return XDM_OK;

mismatch:
	return xdm_error_set(XDM_E_CONFIG,
			     "budget: this process is in %s%.*s%s on %s, and this budget "
			     "layer names %s%s%s: every budget layer of a process on one "
			     "device names the same group",
			     g ? "group '" : "no group", g ? (int)strnlen(g->name, sizeof(g->name)) : 0,
			     g ? g->name : "", g ? "'" : "", m->name,
			     m->group_name[0] ? "group '" : "no group", m->group_name,
			     m->group_name[0] ? "'" : "");
}

/*
 * Under the lock, with dead slots reclaimed: nobody else is here.  Whatever
 * the segment still says belongs to processes that are gone (or to none, if
 * it is new): start from zero with this layer's own limit.
 */
static void take_over(struct budget_member *m, struct budget_shm *s, unsigned int dead)
{
	if (dead || atomic_load_explicit(&s->used, memory_order_relaxed) ||
	    atomic_load_explicit(&s->peak, memory_order_relaxed) ||
	    atomic_load_explicit(&s->refusals, memory_order_relaxed))
		m->reset_stale = true;
	atomic_store_explicit(&s->used, 0, memory_order_relaxed);
	atomic_store_explicit(&s->peak, 0, memory_order_relaxed);
	atomic_store_explicit(&s->refusals, 0, memory_order_relaxed);
	budget_set_limit_locked(s, m->configured_limit);
	/* No live process: no group has a member either. */
	for (unsigned int i = 0; i < BUDGET_GROUPS; i++) {
		struct budget_group *g = &s->groups[i];

		g->members = 0;
		memset(g->name, 0, sizeof(g->name));
		atomic_store_explicit(&g->used, 0, memory_order_relaxed);
		atomic_store_explicit(&g->peak, 0, memory_order_relaxed);
		atomic_store_explicit(&g->refusals, 0, memory_order_relaxed);
		budget_set_group_limit_locked(g, 0);
	}
}

/*
 * Under the lock: this layer lets go of its slot; the process's last
 * layer empties it, leaves its group and frees it.
 */
static void release_slot_locked(struct budget_member *m, struct budget_shm *s)
{
	struct budget_slot *slot = m->slot;

	budget_slot_unhold(m->fd, m->slot_index);
	if (slot->attach > 0 && --slot->attach == 0) {
		/*
		 * Blocks of a runtime destroyed while they were live are
		 * counted here until the process's last budget layer leaves:
		 * then nothing can free them any more.
		 */
		budget_slot_empty(s, slot, BUDGET_STEP_DETACH_BEGUN);
		budget_group_leave(s, slot);
		slot->start_time = 0;
		atomic_store_explicit(&slot->pid, 0, memory_order_release);
	}
}

static enum xdm_status attach_locked(struct budget_member *m, struct budget_shm *s)
{
	unsigned int live, dead;
	enum xdm_status st;

	if (s->unlinked == 1)
		return BUDGET_RETRY;
	st = budget_validate_locked(m, s);
	if (st)
		return st;
	budget_reclaim_locked(s, m->fd, NULL, &live, &dead);
	if (!live)
		take_over(m, s, dead);
	st = claim_slot(m, s);
	if (st)
		return st;
	st = join_group(m, s);
	if (st)
		release_slot_locked(m, s);
	return st;
}

enum xdm_status budget_member_attach(struct budget_member *m)
{
	enum xdm_status st = BUDGET_RETRY;
	struct budget_shm *s;
	int lock;

	for (int tries = 0; tries < BUDGET_OPEN_TRIES && st == BUDGET_RETRY; tries++) {
		st = open_segment(m, &s, &m->fd);
		if (st)
			continue;
		lock = budget_lock(s, m->fd);
		if (lock < 0) {
			munmap(s, sizeof(*s));
			close(m->fd);
			m->fd = -1;
			return lock_status(-lock, m);
		}
		st = attach_locked(m, s);
		budget_unlock(s, lock);
		if (st) {
			munmap(s, sizeof(*s));
			close(m->fd);
			m->fd = -1;
			continue;
		}
		m->shm = s;
	}
	if (st == BUDGET_RETRY)
		return xdm_error_set(XDM_E_DRIVER,
				     "budget: could not attach to %s after %d tries: its users "
				     "keep creating and removing it",
				     m->name, BUDGET_OPEN_TRIES);
	return st;
}

void budget_member_leave(struct budget_member *m)
{
	struct budget_shm *s = m->shm;
	unsigned int live;
	int lock = budget_lock(s, m->fd);

	/* A lock that cannot be taken (its holder stopped) leaves our slot
	 * to the reclaim of whoever comes next, as if we had died. */
	if (lock >= 0) {
		release_slot_locked(m, s);
		budget_reclaim_locked(s, m->fd, NULL, &live, NULL);
		if (!live) {
			/*
			 * A name this process may not remove (a sticky shared
			 * directory, a segment of another member) stays, and
			 * is not marked gone: the next process to attach finds
			 * nobody in it and takes it over, as a stale one.
			 */
			s->unlinked = 1;
			if (unlink(m->path) != 0 && (errno == EPERM || errno == EACCES))
				s->unlinked = 0;
		}
		budget_unlock(s, lock);
	}
}

void budget_member_detach(struct budget_member *m)
{
	budget_member_leave(m);
	munmap(m->shm, sizeof(*m->shm));
	close(m->fd);	/* drops this member's hold on the slot's lock */
	m->fd = -1;
	m->shm = NULL;
	m->slot = NULL;
	m->group = NULL;
}
