/* SPDX-License-Identifier: MIT */
/*
 * reclaim.c - telling live processes from dead ones, and giving back what
 * the dead ones held.
 *
 * A process is named by its pid and its start time (field 22 of
 * /proc/<pid>/stat, in clock ticks since boot).  The pair survives pid
 * reuse: a new process that gets a dead one's pid has a later start time.
 * A zombie is dead too: a process killed with -9 whose parent has not yet
 * waited for it has already given its memory back to the system.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"

int budget_proc_identity(pid_t pid, uint64_t *start_time, char *state)
{
	char path[64], buf[1024];
	unsigned long long start;
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';

	/* The command name (field 2) may hold blanks and parentheses: the
	 * fields are counted from the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EINVAL;
	p += 2;
	if (state)
		*state = *p;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	if (sscanf(p, "%llu", &start) != 1)
		return -EINVAL;
	*start_time = start;
	return 0;
}

/* Whether the process that claimed a slot still runs. */
static bool slot_alive(pid_t pid, uint64_t start_time)
{
	uint64_t now_start;
	char state = '?';

	/* EPERM means it exists (someone else's); only ESRCH means gone. */
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	if (budget_proc_identity(pid, &now_start, &state) != 0)
		return false;
	if (state == 'Z' || state == 'X')
		return false;
	return now_start == start_time;
}

uint64_t budget_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void budget_sub_clamped(_Atomic uint64_t *counter, uint64_t n)
{
	uint64_t cur = atomic_load_explicit(counter, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(counter, &cur, cur > n ? cur - n : 0,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

uint64_t budget_reclaim_locked(struct budget_shm *s, unsigned int *live, unsigned int *dead)
{
	unsigned int nlive = 0, ndead = 0;
	uint64_t total = 0;

	atomic_fetch_add_explicit(&s->scans, 1, memory_order_relaxed);
	atomic_store_explicit(&s->last_scan_ns, budget_now_ns(), memory_order_relaxed);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		struct budget_slot *slot = &s->slots[i];
		pid_t pid = atomic_load_explicit(&slot->pid, memory_order_acquire);
		uint64_t n;

		if (!pid)
			continue;
		if (slot_alive(pid, slot->start_time)) {
			nlive++;
			continue;
		}
		/*
		 * Empty the slot before giving its bytes back and free it
		 * last: a reclaimer that dies half way leaks the bytes (they
		 * stay counted) but never gives them back twice.
		 */
		n = atomic_exchange_explicit(&slot->used, 0, memory_order_relaxed);
		budget_sub_clamped(&s->used, n);
		slot->attach = 0;
		slot->start_time = 0;
		atomic_store_explicit(&slot->pid, 0, memory_order_release);
		total += n;
		ndead++;
	}
	if (live)
		*live = nlive;
	if (dead)
		*dead = ndead;
	return total;
}

int budget_lock(struct budget_shm *s)
{
	int err = pthread_mutex_lock(&s->lock);

	/*
	 * The holder died inside.  Every change made under the lock is
	 * ordered so that any prefix of it leaves the slots valid (see
	 * budget_reclaim_locked and the attach), so the state is usable as
	 * it is once the mutex is marked consistent.
	 */
	if (err == EOWNERDEAD) {
		err = pthread_mutex_consistent(&s->lock);
		if (err)
			pthread_mutex_unlock(&s->lock);
	}
	return err;
}

void budget_unlock(struct budget_shm *s)
{
	pthread_mutex_unlock(&s->lock);
}
