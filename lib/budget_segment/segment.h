/* SPDX-License-Identifier: MIT */
/*
 * segment.h - the budget's shared memory segment: its layout, its lock,
 * the liveness rule of its processes, and how it is opened to be read.
 *
 * One segment per budget key (by default the device's UUID), named
 * "/xdm-budget-<key>".  Every process that stacks budget on that device maps
 * it, so the limit and the usage are the device's, not the process's.
 *
 * The hot counters (used, limit, peak, refusals) are C11 atomics and are the
 * only thing the allocation path touches, besides the process's own slot.
 * The robust mutex serializes attach, detach and reclaim only: it is never
 * taken on the allocation path unless an allocation is refused.
 *
 * Two programs use the segment: the budget adaptor (adaptors/budget), which
 * attaches to it and accounts in it, and xdmctl(1), which reads it and sets
 * the limit from outside.  This library is what they must agree on, so
 * both link it (lib/budget_segment/local.mk); the test suite includes this
 * header to watch a segment from outside.
 */
#ifndef XDM_BUDGET_SEGMENT_H
#define XDM_BUDGET_SEGMENT_H

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Atomics on shared memory must not fall back to a lock in the process. */
static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
static_assert(ATOMIC_INT_LOCK_FREE == 2, "int atomics must be lock-free");

/* Where the segments are unless dir= or $XDM_BUDGET_DIR says otherwise. */
#define BUDGET_DEFAULT_DIR "/dev/shm"
#define BUDGET_NAME_PREFIX "/xdm-budget-"
/* Longest key kept after sanitizing: the name stays far below NAME_MAX. */
#define BUDGET_KEY_MAX 96
#define BUDGET_NAME_MAX (sizeof(BUDGET_NAME_PREFIX) + BUDGET_KEY_MAX)

/* "xdmbudg1": written last by the creator, once everything else is set. */
#define BUDGET_MAGIC 0x78646d6275646731ull
/* 2: a slot counts the changes its process begins and ends (begun, done),
 * the limit has its check word.  3: the header has the device's memory,
 * so that a limit given in % can be set from outside (xdmctl(1)).  4: the
 * header names its device's UUID, so that one key given to two devices is
 * refused rather than made one budget of both.  5: a process is alive
 * while it holds a lock on its slot (an OFD lock, which the kernel
 * releases at its death in any pid namespace); slots name the process's
 * pid namespace, command and container; groups with limits of their own. */
#define BUDGET_LAYOUT_VERSION 5u
#define BUDGET_UUID_MAX 40
#define BUDGET_SLOTS 256u
#define BUDGET_GROUPS 64u
/* Names, with their NUL: a group's, a process's container's, its command's. */
#define BUDGET_GROUP_NAME_MAX 64
#define BUDGET_CONTAINER_MAX 128
#define BUDGET_COMM_MAX 16

/*
 * One attached process.  pid is claimed last and cleared last, under the
 * mutex, so a holder that dies mid-update leaves either a free slot or a
 * slot of a dead process, which reclaim clears.  used is changed by its own
 * process without the lock; only a reclaimer (of a dead process) or the
 * last detach of the process itself empties it.
 *
 * A change of used and of the shared usage are two atomics, and a process
 * killed between them leaves the two disagreeing.  So every such change is
 * bracketed: begun is counted before it, done after it.  A dead slot with
 * begun == done died between changes and gives back exactly its used; one
 * with begun != done died inside one, and the reclaimer settles it from a
 * snapshot of the live slots instead (reclaim.c).
 */
struct budget_slot {
	/* a slot per cache line: processes never write each other's lines */
	alignas(64) _Atomic int32_t pid;	/* as its own pid namespace sees it; 0: free */
	uint32_t attach;		/* budget layers of this process; under lock */
	uint64_t start_time;		/* /proc/self/stat field 22; under lock */
	_Atomic uint64_t used;		/* bytes this process holds */
	_Atomic uint64_t begun;		/* changes of used or the usage (and group) begun */
	_Atomic uint64_t done;		/* ... and finished */
	uint32_t group;			/* 1 + its index in groups[], 0: none; under lock */
	/* Who it is, for people (xdmctl ps); written under the lock at claim. */
	uint64_t pidns;			/* inode of its pid namespace */
	char comm[BUDGET_COMM_MAX];
	char container[BUDGET_CONTAINER_MAX];	/* its given name, or its cgroup */
};

/*
 * A group of processes (a pod, a job, a test worker) with a limit of its
 * own inside the device's: an allocation must fit both.  Its usage is the
 * sum of its members' slots at quiescence, kept exactly as the device's
 * usage is (a member's change of its slot, the device's usage and its
 * group's usage is one bracketed change).  The entry is claimed by the
 * first member under the lock and freed by the last one out (members).
 */
struct budget_group {
	alignas(64) _Atomic uint64_t used;
	_Atomic uint64_t limit;
	_Atomic uint64_t peak;
	_Atomic uint64_t refusals;
	_Atomic uint64_t limit_check;	/* ~limit, as the device's */
	uint32_t members;		/* slots in it; under lock; 0: the entry is free */
	char name[BUDGET_GROUP_NAME_MAX];	/* under lock; NUL-terminated */
};

struct budget_shm {
	_Atomic uint64_t magic;		/* BUDGET_MAGIC once ready */
	uint32_t version;		/* BUDGET_LAYOUT_VERSION */
	uint32_t nslots;		/* BUDGET_SLOTS */
	uint64_t size;			/* sizeof(struct budget_shm) */
	uint32_t unlinked;		/* under lock: the name is gone, go away */
	_Atomic uint32_t unsettled;	/* written under lock: dead slots left inside a change */
	pthread_mutex_t lock;		/* robust, process-shared */
	_Atomic uint64_t scans;		/* reclaim scans ever started */
	_Atomic uint64_t last_scan_ns;	/* CLOCK_MONOTONIC start of the latest */
	uint64_t device_total;		/* bytes of the device's memory, by the creator:
					 * the base of a limit given in % */
	char device_uuid[BUDGET_UUID_MAX];	/* by the creator; NUL-terminated */

	/* The allocation path's one shared cache line. */
	alignas(64) _Atomic uint64_t used;
	_Atomic uint64_t limit;
	_Atomic uint64_t peak;
	_Atomic uint64_t refusals;
	/*
	 * ~limit, written with it under the lock: a limit that garbage
	 * overwrote is told from one a user set (validate.c).  The
	 * allocation path never reads it.
	 */
	_Atomic uint64_t limit_check;

	alignas(64) struct budget_group groups[BUDGET_GROUPS];
	alignas(64) struct budget_slot slots[BUDGET_SLOTS];
};

/* ---- lock.c: the robust lock, taken with a bound ------------------------ */

/*
 * Take the robust lock, repairing it after a holder died; 0 or an errno:
 * ETIMEDOUT after BUDGET_LOCK_WAIT_S (a holder stopped, or a lock word
 * that garbage overwrote), EINVAL for a lock that is no lock.
 */
int budget_lock(struct budget_shm *s);
#define BUDGET_LOCK_WAIT_S 5
void budget_unlock(struct budget_shm *s);

/* Under the lock: the shared limit and its check word (above). */
static inline void budget_set_limit_locked(struct budget_shm *s, uint64_t limit)
{
	atomic_store_explicit(&s->limit, limit, memory_order_relaxed);
	atomic_store_explicit(&s->limit_check, ~limit, memory_order_relaxed);
}

/* Under the lock: a group's limit and its check word. */
static inline void budget_set_group_limit_locked(struct budget_group *g, uint64_t limit)
{
	atomic_store_explicit(&g->limit, limit, memory_order_relaxed);
	atomic_store_explicit(&g->limit_check, ~limit, memory_order_relaxed);
}

/* The group of a slot, or NULL (its index read under the lock, or by its owner). */
static inline struct budget_group *budget_group_of(struct budget_shm *s,
						   const struct budget_slot *slot)
{
	return slot->group && slot->group <= BUDGET_GROUPS ? &s->groups[slot->group - 1] : NULL;
}

uint64_t budget_now_ns(void);

/* ---- liveness.c: whether the process of a slot still runs --------------- */

/*
 * A process is alive while it holds a read lock on its slot's first byte
 * of the segment file: an open-file-description lock, which the kernel
 * drops when the last descriptor of that open file is closed, at the
 * process's death whatever its pid namespace.  (A child forked without
 * exec shares the descriptor, and keeps its parent's slot alive while it
 * runs: it may be charging it.)  Every budget layer of a process takes
 * the lock on its own descriptor; a read lock does not exclude another.
 */
int budget_slot_hold(int fd, unsigned int slot);	/* 0 or a negative errno */
void budget_slot_unhold(int fd, unsigned int slot);
/*
 * Whether the process of slot still runs: another open file than fd's
 * holds its lock, and, where the slot's process is of the asker's pid
 * namespace (pidns, the asker's own; 0: unknown), its pid still names it.
 * The caller's own slot answers false through the descriptor that holds
 * it: ask about the others only.  An error of the lock query counts as
 * alive (nothing is taken from a process that cannot be shown dead).
 */
bool budget_slot_alive(const struct budget_shm *s, int fd, unsigned int slot, uint64_t pidns);

/* Field 22 of /proc/<pid>/stat and the state letter; 0 or a negative errno. */
int budget_proc_identity(pid_t pid, uint64_t *start_time, char *state);
/*
 * What a slot records of the calling process: its start time and pid
 * namespace (with its pid, who it is), its command, and its container:
 * name if given, else its cgroup (/proc/self/cgroup).  0 or a negative
 * errno (the start time cannot be read).
 */
int budget_self_identity(const char *name, uint64_t *start_time, uint64_t *pidns,
			 char comm[BUDGET_COMM_MAX], char container[BUDGET_CONTAINER_MAX]);
/* The inode of /proc/<pid>/ns/pid (pid 0: this process's), or 0. */
uint64_t budget_pidns_of(pid_t pid);

/* ---- reader.c: a segment opened from outside ---------------------------- */

/*
 * The segment NAME of directory DIRFD (AT_FDCWD with a path works too),
 * mapped for reading, or for reading and writing, once it is shown to be
 * a finished segment of this layout.  *owner (if not NULL) gets the file's
 * owner as soon as it is known.  *fd (if not NULL) gets the open file,
 * for budget_slot_alive; else it is closed.  NULL with a phrase in why
 * ("is not ready ...", "cannot be opened: ...") that follows the
 * segment's name.
 */
struct budget_shm *budget_segment_map(int dirfd, const char *name, bool writable, uid_t *owner,
				      int *fd, char *why, size_t len);
void budget_segment_unmap(struct budget_shm *s);
/* Whether a mapped segment is finished and of this layout; else why not. */
bool budget_segment_layout_ok(const struct budget_shm *s, char *why, size_t len);

#endif /* XDM_BUDGET_SEGMENT_H */
