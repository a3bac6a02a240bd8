/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the segment's lock, taken with a bound.
 *
 * The lock is the kernel's, not the file's: an open file description
 * lock (fcntl F_OFD_SETLK) for writing on the byte of the header's lock
 * field.  Nothing of it is in the segment, so no process that can write
 * the file (the owner's others, a group's members in a shared directory)
 * can break it, forge it, or make a taker follow what it wrote.  (A
 * process-shared robust pthread mutex in the file would let them: glibc
 * links the robust mutexes a thread holds through the mutexes' own
 * memory, and writes through those links when it lets one go.)  The
 * kernel drops the lock when its holder dies, in any pid namespace, as it
 * drops the slots' locks (liveness.c).
 *
 * An OFD lock belongs to an open file description, and every thread of a
 * process that shares one holds it at once; so each taking opens the
 * file anew, through /proc/self/fd, for a description of its own: two
 * threads, two budget layers of one process, a child forked without exec
 * and its parent all exclude each other.  The descriptor is the lock; it
 * is closed to let go.
 *
 * xdmctl(1) links this library too: a limit it sets is set under the same
 * lock, with the same bound, as one written to budget/limit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

/*
 * ThreadSanitizer does not see a lock the kernel holds: tell it, on the
 * lock field's address, what the lock orders between the threads of one
 * mapping.
 */
#if defined(__SANITIZE_THREAD__)
#define BUDGET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BUDGET_TSAN 1
#endif
#endif
#ifdef BUDGET_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define tsan_acquire(s) __tsan_acquire((void *)&(s)->lock)
#define tsan_release(s) __tsan_release((void *)&(s)->lock)
#else
#define tsan_acquire(s) ((void)(s))
#define tsan_release(s) ((void)(s))
#endif

uint64_t budget_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The byte the lock covers: the header's lock field, which no slot's is. */
static struct flock lock_byte(short type)
{
	struct flock l;

	memset(&l, 0, sizeof(l));
	l.l_type = type;
	l.l_whence = SEEK_SET;
	l.l_start = (off_t)offsetof(struct budget_shm, lock);
	l.l_len = 1;
	return l;
}

int budget_lock(struct budget_shm *s, int fd)
{
	struct flock l = lock_byte(F_WRLCK);
	uint64_t start = budget_now_ns();
	long pause_us = 10;
	char path[64];
	int lock, err;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	lock = open(path, O_RDWR | O_CLOEXEC);
	if (lock < 0)
		return -errno;
	/*
	 * Bounded: a holder that never lets go (stopped in a debugger, or
	 * another user's process holding it on purpose) must not hang every
	 * caller.  Polled rather than waited for (F_OFD_SETLKW has no
	 * deadline); the lock is never taken on the allocation path but by a
	 * refusal.
	 */
	while (fcntl(lock, F_OFD_SETLK, &l) != 0) {
		struct timespec pause = { 0, pause_us * 1000 };

		err = errno;
		if (err != EAGAIN && err != EACCES && err != EINTR)
			goto fail;
		if (budget_now_ns() - start >= BUDGET_LOCK_WAIT_S * 1000000000ull) {
			err = ETIMEDOUT;
			goto fail;
		}
		nanosleep(&pause, NULL);
		if (pause_us < 1000)
			pause_us *= 2;
	}
	tsan_acquire(s);
	return lock;

fail:
	close(lock);
	return -err;
}

void budget_unlock(struct budget_shm *s, int lock)
{
	tsan_release(s);
	/* Closing the description lets go of its lock. */
	close(lock);
}
