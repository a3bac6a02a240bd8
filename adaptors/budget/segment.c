/* SPDX-License-Identifier: MIT */
/*
 * segment.c - the life of the shared segment: create or find it, attach a
 * process to it, detach, and unlink it when the last process leaves.
 *
 * Creation race: shm_open(O_CREAT | O_EXCL) picks one creator.  It sizes
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

#include "budget.h"

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

static enum xdm_status errno_status(int err, const struct budget *b, const char *what)
{
	char buf[128];
	const char *msg = strerror_r(err, buf, sizeof(buf));

	if (err == ENOMEM || err == ENOSPC)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "budget: %s %s: %s", what, b->name, msg);
	return xdm_error_set_driver(err, "budget: %s %s: %s", what, b->name, msg);
}

/* Why the lock could not be taken, as a sentence. */
static enum xdm_status lock_status(int err, const struct budget *b)
{
	if (err == ETIMEDOUT)
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: the lock of the shared segment %s was not released "
				     "in %d s: a process holding it is stopped, or the segment is "
				     "corrupt",
				     b->name, BUDGET_LOCK_WAIT_S);
	if (err == EINVAL || err == ENOTRECOVERABLE)
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: the lock of the shared segment %s is unusable (%s): "
				     "the segment is corrupt and not used. Remove /dev/shm%s once "
				     "no process uses it",
				     b->name, strerror(err), b->name);
	return errno_status(err, b, "cannot take the lock of");
}

static int init_lock(pthread_mutex_t *lock)
{
	pthread_mutexattr_t attr;
	int err;

	err = pthread_mutexattr_init(&attr);
	if (err)
		return err;
	err = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	if (!err)
		err = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	if (!err)
		err = pthread_mutex_init(lock, &attr);
	pthread_mutexattr_destroy(&attr);
	return err;
}

/* We won the O_EXCL race: fill the segment, magic last. */
static enum xdm_status create_segment(struct budget *b, int fd, struct budget_shm **out)
{
	struct budget_shm *s;
	enum xdm_status st;
	int err;

	if (ftruncate(fd, sizeof(*s)) != 0) {
		st = errno_status(errno, b, "cannot size the shared segment");
		goto fail;
	}
	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		st = errno_status(errno, b, "cannot map the shared segment");
		goto fail;
	}
	/* ftruncate gave zeros: every slot is free, every counter 0. */
	err = init_lock(&s->lock);
	if (err) {
		st = errno_status(err, b, "cannot create the lock of");
		munmap(s, sizeof(*s));
		goto fail;
	}
	s->version = BUDGET_LAYOUT_VERSION;
	s->nslots = BUDGET_SLOTS;
	s->size = sizeof(*s);
	s->device_total = b->device_total;
	snprintf(s->device_uuid, sizeof(s->device_uuid), "%s", b->uuid);
	budget_set_limit_locked(s, b->configured_limit);	/* nobody else can see it yet */
	atomic_store_explicit(&s->magic, BUDGET_MAGIC, memory_order_release);
	*out = s;
	return XDM_OK;

fail:
	shm_unlink(b->name);
	return st;
}

/* The segment was never finished: unlink it if the name is still it. */
static void drop_abandoned(struct budget *b, int fd)
{
	struct stat mine, named;
	int fd2 = shm_open(b->name, O_RDONLY | O_CLOEXEC, 0);

	if (fd2 < 0)
		return;
	if (fstat(fd, &mine) == 0 && fstat(fd2, &named) == 0 && mine.st_ino == named.st_ino &&
	    mine.st_dev == named.st_dev)
		shm_unlink(b->name);
	close(fd2);
}

/* Never use a segment another user could write, or made to mislead us. */
static enum xdm_status foreign(const struct budget *b, uid_t owner)
{
	return xdm_error_set(XDM_E_CONFIG,
			     "budget: the shared segment %s belongs to uid %u, not to this "
			     "process (uid %u); give budget a key= of its own",
			     b->name, (unsigned)owner, (unsigned)geteuid());
}

/*
 * The name exists and cannot be opened: say what is there and whose it is
 * (a name another user took first is the likely case), not just errno.
 */
static enum xdm_status unopenable(struct budget *b, int err)
{
	char path[sizeof("/dev/shm") + BUDGET_NAME_MAX];
	struct stat sb;

	snprintf(path, sizeof(path), "/dev/shm%s", b->name);
	if (lstat(path, &sb) != 0)
		return errno_status(err, b, "cannot open the shared segment");
	if (sb.st_uid != geteuid())
		return foreign(b, sb.st_uid);
	if (!S_ISREG(sb.st_mode))
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: %s is a %s, not a shared segment: remove it",
				     path, S_ISLNK(sb.st_mode) ? "symbolic link" :
				     S_ISDIR(sb.st_mode) ? "directory" : "special file");
	return errno_status(err, b, "cannot open the shared segment");
}

/*
 * No magic after the wait.  A creator that died before writing it had
 * written at most the header: a segment with anything in its slots, or a
 * header nobody finished, may be in use by processes that came before
 * garbage got in, and unlinking it would split their budget.  Only an
 * empty one is taken for abandoned.
 */
static enum xdm_status abandoned_or_corrupt(struct budget *b, int fd, const struct budget_shm *s)
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
				     "it is corrupt and not used. Remove /dev/shm%s once no "
				     "process uses it",
				     b->name, b->name);
	drop_abandoned(b, fd);
	return BUDGET_RETRY;
}

/* Someone else created it: check whose it is, wait for the magic, map it. */
static enum xdm_status join_segment(struct budget *b, int fd, struct budget_shm **out)
{
	struct budget_shm *s = NULL;
	enum xdm_status st;
	struct stat sb;
	int waited;

	/* Whose it is first: never map a segment another user could write. */
	if (fstat(fd, &sb) != 0)
		return errno_status(errno, b, "cannot stat the shared segment");
	if (sb.st_uid != geteuid())
		return foreign(b, sb.st_uid);
	if (sb.st_mode & 077)
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: the shared segment %s is open to other users "
				     "(mode %03o); remove /dev/shm%s and start again",
				     b->name, (unsigned)(sb.st_mode & 0777), b->name);

	for (waited = 0;; waited++) {
		/* The creator sizes it in one call: another size is another
		 * layout, and no size yet means a map now would fault. */
		if (sb.st_size != 0 && (uint64_t)sb.st_size != sizeof(*s)) {
			st = xdm_error_set(XDM_E_CONFIG,
					   "budget: the shared segment %s is %jd bytes, not the "
					   "%zu of this xdm's layout: every process on one device "
					   "must run the same xdm",
					   b->name, (intmax_t)sb.st_size, sizeof(*s));
			goto fail;
		}
		if (!s && sb.st_size != 0) {
			s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (s == MAP_FAILED)
				return errno_status(errno, b, "cannot map the shared segment");
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
						   "/dev/shm%s once no process uses it",
						   b->name, magic, b->name);
				goto fail;
			}
		}
		if (waited >= BUDGET_READY_WAIT_MS) {
			st = abandoned_or_corrupt(b, fd, s);
			goto fail;
		}
		sleep_ms(1);
		if (!s && fstat(fd, &sb) != 0) {
			st = errno_status(errno, b, "cannot stat the shared segment");
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
				     b->name, s->version, s->nslots, s->size, BUDGET_LAYOUT_VERSION,
				     BUDGET_SLOTS, sizeof(*s));
		goto fail;
	}
	/* A budget is one device's: a key shared by two devices is a mistake. */
	if (strncmp(s->device_uuid, b->uuid, sizeof(s->device_uuid))) {
		st = xdm_error_set(XDM_E_CONFIG,
				     "budget: the shared segment %s is the budget of device %.*s, "
				     "and this runtime's device is %s: give each device its own "
				     "key (%%u in a key stands for the device's UUID), or leave "
				     "key unset", b->name, (int)strnlen(s->device_uuid,
									sizeof(s->device_uuid)),
				     s->device_uuid, b->uuid);
		goto fail;
	}
	*out = s;
	return XDM_OK;

fail:
	if (s)
		munmap(s, sizeof(*s));
	return st;
}

static enum xdm_status open_segment(struct budget *b, struct budget_shm **out)
{
	enum xdm_status st;
	int fd;

	fd = shm_open(b->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		st = create_segment(b, fd, out);
		close(fd);
		return st;
	}
	if (errno != EEXIST)
		return errno_status(errno, b, "cannot create the shared segment");
	fd = shm_open(b->name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == ENOENT)	/* its last user unlinked it meanwhile */
			return BUDGET_RETRY;
		return unopenable(b, errno);
	}
	st = join_segment(b, fd, out);
	close(fd);
	return st;
}

/* Under the lock: this process's slot, claimed if it has none yet. */
static struct budget_slot *claim_slot(struct budget *b, struct budget_shm *s)
{
	struct budget_slot *free_slot = NULL;

	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		struct budget_slot *slot = &s->slots[i];
		pid_t pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);

		if (pid == b->pid && slot->start_time == b->start_time) {
			slot->attach++;
			return slot;
		}
		if (!pid && !free_slot)
			free_slot = slot;
	}
	if (!free_slot)
		return NULL;
	/* pid last: a claim cut short leaves a free slot.  A slot settled
	 * after a death inside a change keeps begun != done: reset both. */
	free_slot->attach = 1;
	free_slot->start_time = b->start_time;
	atomic_store_explicit(&free_slot->used, 0, memory_order_relaxed);
	atomic_store_explicit(&free_slot->begun, 0, memory_order_relaxed);
	atomic_store_explicit(&free_slot->done, 0, memory_order_relaxed);
	atomic_store_explicit(&free_slot->pid, b->pid, memory_order_release);
	return free_slot;
}

/*
 * Under the lock, with dead slots reclaimed: nobody else is here.  Whatever
 * the segment still says belongs to processes that are gone (or to none, if
 * it is new): start from zero with this layer's own limit.
 */
static void take_over(struct budget *b, struct budget_shm *s, unsigned int dead)
{
	if (dead || atomic_load_explicit(&s->used, memory_order_relaxed) ||
	    atomic_load_explicit(&s->peak, memory_order_relaxed) ||
	    atomic_load_explicit(&s->refusals, memory_order_relaxed))
		b->reset_stale = true;
	atomic_store_explicit(&s->used, 0, memory_order_relaxed);
	atomic_store_explicit(&s->peak, 0, memory_order_relaxed);
	atomic_store_explicit(&s->refusals, 0, memory_order_relaxed);
	budget_set_limit_locked(s, b->configured_limit);
}

static enum xdm_status attach_locked(struct budget *b, struct budget_shm *s)
{
	unsigned int live, dead;
	enum xdm_status st;

	if (s->unlinked == 1)
		return BUDGET_RETRY;
	st = budget_validate_locked(b, s);
	if (st)
		return st;
	budget_reclaim_locked(s, &live, &dead);
	if (!live)
		take_over(b, s, dead);
	b->slot = claim_slot(b, s);
	if (!b->slot)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "budget: all %u process slots of %s are taken by live "
				     "processes",
				     BUDGET_SLOTS, b->name);
	return XDM_OK;
}

enum xdm_status budget_attach(struct budget *b)
{
	enum xdm_status st = BUDGET_RETRY;
	struct budget_shm *s;
	int err;

	for (int tries = 0; tries < BUDGET_OPEN_TRIES && st == BUDGET_RETRY; tries++) {
		st = open_segment(b, &s);
		if (st)
			continue;
		err = budget_lock(s);
		if (err) {
			munmap(s, sizeof(*s));
			return lock_status(err, b);
		}
		st = attach_locked(b, s);
		budget_unlock(s);
		if (st) {
			munmap(s, sizeof(*s));
			continue;
		}
		b->shm = s;
	}
	if (st == BUDGET_RETRY)
		return xdm_error_set(XDM_E_DRIVER,
				     "budget: could not attach to %s after %d tries: its users "
				     "keep creating and removing it",
				     b->name, BUDGET_OPEN_TRIES);
	return st;
}

void budget_detach(struct budget *b)
{
	struct budget_shm *s = b->shm;
	struct budget_slot *slot = b->slot;
	unsigned int live;

	/* A lock that cannot be taken (ENOTRECOVERABLE) leaves our slot to
	 * the reclaim of whoever comes next, as if we had died. */
	if (budget_lock(s) == 0) {
		if (slot->attach > 0 && --slot->attach == 0) {
			/*
			 * Blocks of a runtime destroyed while they were live
			 * are counted here until the process's last budget
			 * layer leaves: then nothing can free them any more.
			 */
			budget_slot_empty(s, slot, BUDGET_STEP_DETACH_BEGUN);
			slot->start_time = 0;
			atomic_store_explicit(&slot->pid, 0, memory_order_release);
		}
		budget_reclaim_locked(s, &live, NULL);
		if (!live) {
			s->unlinked = 1;
			shm_unlink(b->name);
		}
		budget_unlock(s);
	}
	munmap(s, sizeof(*s));
	b->shm = NULL;
	b->slot = NULL;
}
