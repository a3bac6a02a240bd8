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
 * The segment's lock (an OFD lock the kernel holds, lock.c) serializes
 * attach, detach, reclaim and limit stores only: it is never taken on the
 * allocation path unless an allocation is refused.
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
#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <xdm/module.h>

/* Atomics on shared memory must not fall back to a lock in the process. */
static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
static_assert(ATOMIC_INT_LOCK_FREE == 2, "int atomics must be lock-free");

/*
 * Where the segments are unless dir= or $XDM_BUDGET_DIR says otherwise:
 * the directory the users of the machine share (configure
 * --with-budget-dir, made at boot by systemd-tmpfiles) where it exists,
 * else BUDGET_DEFAULT_DIR (budget_default_dir, shared_dir.c).
 */
#define BUDGET_SHARED_DIR XDM_BUDGET_SHARED_DIR
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
 * pid namespace, command and container; groups with limits of their own.
 * 6: a slot says how its process is charged (enum budget_slot_kind).
 * 7: the lock is the kernel's (an OFD lock on the header's lock field),
 * no longer a pthread mutex in the file, which whoever else can write the
 * file (a shared directory's members) could have turned against a
 * process that held it (lock.c). */
#define BUDGET_LAYOUT_VERSION 7u
#define BUDGET_UUID_MAX 40
#define BUDGET_SLOTS 256u
#define BUDGET_GROUPS 64u
/* Names, with their NUL: a group's, a process's container's, its command's. */
#define BUDGET_GROUP_NAME_MAX 64
#define BUDGET_CONTAINER_MAX 128
#define BUDGET_COMM_MAX 16

/*
 * How a process is charged: by the budget layers of its xdm stacks, by the
 * preload shim (libxdm-preload.so) for the driver's allocation calls, or
 * both.  A process has one slot whatever charges it.
 */
enum budget_slot_kind {
	BUDGET_SLOT_LIBXDM = 1u << 0,
	BUDGET_SLOT_PRELOAD = 1u << 1,
};

/*
 * One attached process.  pid is claimed last and cleared last, under the
 * lock, so a holder that dies mid-update leaves either a free slot or a
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
	uint32_t kind;			/* enum budget_slot_kind; under lock, at claim */
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
	/*
	 * Never read or written: its first byte is the one the segment's
	 * lock covers (lock.c), which the kernel holds, not the file.
	 */
	uint64_t lock;
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

/* ---- lock.c: the segment's lock, taken with a bound --------------------- */

/*
 * Take the lock of segment s, whose file is open as fd: the descriptor
 * that holds it (>= 0), or a negative errno: -ETIMEDOUT after
 * BUDGET_LOCK_WAIT_S (its holder is stopped), or why the file could not
 * be opened anew or locked.  Every taking excludes every other, threads
 * of one process sharing fd included.  A holder's death lets go.
 */
int budget_lock(struct budget_shm *s, int fd);
#define BUDGET_LOCK_WAIT_S 5
/* Let go of the lock that budget_lock gave (lock, its descriptor). */
void budget_unlock(struct budget_shm *s, int lock);

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

/*
 * The group of a slot, or NULL (its index read under the lock, or by its
 * owner).  The index is read once: whoever else may write the file (the
 * owner's other processes, a group's members) must not change it between
 * the bound's check and its use.
 */
static inline struct budget_group *budget_group_of(struct budget_shm *s,
						   const struct budget_slot *slot)
{
	uint32_t g = *(const volatile uint32_t *)&slot->group;

	return g && g <= BUDGET_GROUPS ? &s->groups[g - 1] : NULL;
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
 * mapped for reading and writing (writable), once it is shown to be a
 * finished segment of this layout: for a writer, which must be the owner
 * of the file or share its trust (xdmctl budget --set runs as the owner).
 * A reader never maps (budget_segment_read says why).  *owner (if not
 * NULL) gets the file's owner as soon as it is known.  *fd (if not NULL)
 * gets the open file, for budget_slot_alive; else it is closed.  NULL
 * with a phrase in why ("is not ready ...", "cannot be opened: ...") that
 * follows the segment's name.
 */
struct budget_shm *budget_segment_map(int dirfd, const char *name, bool writable, uid_t *owner,
				      int *fd, char *why, size_t len);
void budget_segment_unmap(struct budget_shm *s);
/*
 * The same for a file the caller opened and checked itself (whose it is,
 * that it is the file it examined): NULL with why, and fd left open.
 */
struct budget_shm *budget_segment_map_fd(int fd, bool writable, char *why, size_t len);
/* Whether a segment (mapped, or a copy) is finished and of this layout; else why not. */
bool budget_segment_layout_ok(const struct budget_shm *s, char *why, size_t len);

/* What budget_segment_read made of a file. */
enum budget_read {
	BUDGET_READ_OK,
	/* Another user's, in a directory anyone can write: not opened. */
	BUDGET_READ_SKIPPED,
	/* Not a segment of this layout, unreadable, or cut short as it was read. */
	BUDGET_READ_FAILED,
};

/*
 * The segment NAME (a name, no '/') of directory DIRFD (or AT_FDCWD),
 * copied whole with pread(2) into *copy and checked there, never mapped:
 * a file truncated under the reader is a short read, not a SIGBUS.  A
 * file of neither the reader's user nor root in a directory anyone can
 * write (/dev/shm) is skipped unopened.  *owner (if not NULL) gets the
 * file's owner as soon as it is known; *fd (if not NULL) the open file
 * with OK, for budget_slot_alive on the copy.  Else a phrase in why that
 * follows the segment's name.
 */
enum budget_read budget_segment_read(int dirfd, const char *name, struct budget_shm *copy,
				     uid_t *owner, int *fd, char *why, size_t len);
/* The pid in slot's row of the open segment file now, 0 where it cannot be read. */
int32_t budget_segment_slot_pid(int fd, unsigned int slot);

/* ---- a process attached to a segment: member.c, member_config.c -------- */

/*
 * What a process needs to charge a budget: the mapped segment, its slot
 * and group, and the names and identity it attached with.  The budget
 * adaptor keeps one per layer, the preload shim one per device it has seen
 * allocate.  Both fill the configuration (budget_member_name, _dir,
 * _group, the limits, the identity), then attach; the accounting below is
 * the same code for both, so a byte is charged the same way whoever
 * charges it.
 */
struct budget_member {
	struct budget_shm *shm;		/* the mapped segment, once attached */
	struct budget_slot *slot;	/* this process's row of it */
	struct budget_group *group;	/* its group, or NULL */
	int fd;				/* the segment file: holds the slot's lock */
	unsigned int slot_index;
	uint32_t kind;			/* enum budget_slot_kind, or'ed into the slot */
	uint64_t configured_limit;	/* the limit a first process sets */
	uint64_t group_limit;		/* UINT64_MAX: the device's */
	uint64_t device_total;		/* the base of % in limits */
	bool reset_stale;		/* attach found a segment of dead owners */
	/* Who attached, for the slot. */
	pid_t pid;
	uint64_t start_time;
	uint64_t pidns;
	char comm[BUDGET_COMM_MAX];
	char container[BUDGET_CONTAINER_MAX];
	char group_name[BUDGET_GROUP_NAME_MAX];	/* "": in no group */
	char name[BUDGET_NAME_MAX];	/* "/xdm-budget-<key>" */
	char dir[PATH_MAX];		/* where the segment is */
	char path[PATH_MAX];		/* dir and name */
	char uuid[BUDGET_UUID_MAX];	/* the device */
	/*
	 * dir is shared by a group (budget_dir_is_shared): segments there
	 * are the group's, mode 0660, and another member's is accepted.
	 */
	bool shared;
	gid_t shared_gid;		/* dir's group, if shared */
};

/*
 * The configuration, each an XDM_E_CONFIG sentence on bad input (prefixed
 * by who, "budget" or "xdm-preload"):
 *  - the name from a key, where "%u" stands for the device's UUID and "%%"
 *    for '%', anything but [A-Za-z0-9_-] becoming '_' (m->uuid set first);
 *  - the directory: absolute, and nobody's but root's and this user's
 *    unless sticky (anyone else could swap the segment under us);
 *  - the group and its limit (text, NULL for none; a % is of
 *    m->device_total);
 *  - who this process is: pid, start time, pid namespace, command, and
 *    its container, named or else its cgroup.
 */
enum xdm_status budget_member_name(struct budget_member *m, const char *who, const char *key);
enum xdm_status budget_member_dir(struct budget_member *m, const char *who, const char *dir);
enum xdm_status budget_member_group(struct budget_member *m, const char *who, const char *name,
				    const char *limit);
enum xdm_status budget_member_identity(struct budget_member *m, const char *who,
				       const char *container);

/* Map (creating if need be) and attach: fills shm, slot, group. */
enum xdm_status budget_member_attach(struct budget_member *m);
/* Detach; the last process out unlinks the segment. */
void budget_member_detach(struct budget_member *m);
/*
 * Detach, but keep the segment mapped and its file open: for a process
 * that leaves while other threads may still be charging (the preload
 * shim at exit).  Their charges land in a slot nobody counts any more.
 */
void budget_member_leave(struct budget_member *m);

/*
 * A refusal's sentence, into buf: who refused (the device's limit or the
 * group's) with both figures as the refusal saw them, the request and
 * what remains; why (may be "") goes first.  Counts the refusal in the
 * device's refusals and the group's.
 */
void budget_member_refusal(struct budget_member *m, const char *who, uint64_t requested,
			   uint64_t remaining, const char *why, char *buf, size_t len);

/*
 * A refusal may be the dead's fault: reclaim dead processes, unless a scan
 * started within BUDGET_RESCAN_NS or one began since this refusal
 * (reclaim.c).  The caller then asks once more; that answer is final.
 */
void budget_member_reclaim_dead(struct budget_member *m);
/* A refusal rescans for dead processes only this long after the last scan. */
#define BUDGET_RESCAN_NS 1000000ull

/* ---- shared_dir.c: a budget directory that a group of users shares ----- */

/*
 * The directory of the segments when neither dir= nor $XDM_BUDGET_DIR
 * names one: BUDGET_SHARED_DIR where it exists, else BUDGET_DEFAULT_DIR.
 * Where it exists but this user may not use it, it is still the answer,
 * and the attach says why: a silent /dev/shm would split the device's
 * budget in two.
 */
const char *budget_default_dir(void);

/*
 * Whether a directory has the shape of one that a group shares for its
 * budgets: root's, set-group-ID, its group's to write in, and nobody
 * else's.  Only root and the group's members can make a name in it, and
 * a segment made in it is the group's whoever makes it.  The directory
 * made at install has that shape; any other of that shape works the same.
 */
bool budget_dir_is_shared(const struct stat *st);

/* Whether this process is in group gid: its effective or a supplementary one. */
bool budget_in_group(gid_t gid);

/* ---- faults.c: kill points, in the test build only ---------------------- */

/*
 * The steps at which a process may die in the middle of changing the
 * accounting.  The test build (tests/faults/budget.so, compiled with
 * XDM_BUDGET_FAULTS) stops itself with SIGSTOP at the step named by
 * $XDM_BUDGET_FAULT, so that a test can look at the segment in that state
 * and then kill the process there; the installed code has no trace of it.
 */
enum budget_step {
	BUDGET_STEP_NONE,
	BUDGET_STEP_RESERVE_BEGUN,	/* begun counted, nothing changed */
	BUDGET_STEP_RESERVE_SHARED,	/* the shared usage has the bytes */
	BUDGET_STEP_RESERVE_GROUP,	/* ... and the group's usage */
	BUDGET_STEP_RESERVE_SLOT,	/* ... and the slot has them */
	BUDGET_STEP_RELEASE_BEGUN,
	BUDGET_STEP_RELEASE_SLOT,	/* the slot gave them back */
	BUDGET_STEP_RELEASE_GROUP,	/* ... and the group's usage */
	BUDGET_STEP_RELEASE_SHARED,	/* ... and the shared usage */
	/* A slot emptied: begun, the slot, its group, the shared usage. */
	BUDGET_STEP_DETACH_BEGUN,	/* the last detach, under the lock */
	BUDGET_STEP_DETACH_SLOT,
	BUDGET_STEP_DETACH_GROUP,
	BUDGET_STEP_DETACH_SHARED,
	BUDGET_STEP_RECLAIM_BEGUN,	/* a reclaimer emptying a dead slot */
	BUDGET_STEP_RECLAIM_SLOT,
	BUDGET_STEP_RECLAIM_GROUP,
	BUDGET_STEP_RECLAIM_SHARED,
	BUDGET_STEP_SETTLE_SHARED,	/* a settlement subtracted, slots not freed */
	BUDGET_STEP_COUNT
};

#ifdef XDM_BUDGET_FAULTS
void budget_fault_at(enum budget_step step);
#define BUDGET_STEP(step) budget_fault_at(step)
#else
#define BUDGET_STEP(step) ((void)0)
#endif

/* ---- validate.c: a segment is trusted only once it looks like one ------ */

/*
 * Under the lock, at attach: the header's and the slots' invariants, the
 * limit's check word, and (at a quiet moment) a usage that covers every
 * live slot.  XDM_OK, or XDM_E_CONFIG with a sentence naming the segment
 * and what is wrong with it.
 */
enum xdm_status budget_validate_locked(const struct budget_member *m, struct budget_shm *s);

/* ---- reclaim.c: dead processes ----------------------------------------- */

/*
 * Under the segment's lock: empty every slot of a dead process into the
 * shared usage (and its group's).  fd is the caller's open segment file
 * and own its slot (alive, whatever its lock says through fd), or NULL.
 * Returns the bytes given back; *live counts the slots left, *dead those
 * cleared (either may be NULL).
 */
uint64_t budget_reclaim_locked(struct budget_shm *s, int fd, const struct budget_slot *own,
			       unsigned int *live, unsigned int *dead);
/* Which slots' processes run, by their locks (budget_reclaim_locked's rule). */
void budget_slots_alive(struct budget_shm *s, int fd, const struct budget_slot *own,
			bool alive[BUDGET_SLOTS]);
/*
 * Empty a slot into its group's usage and the shared usage, bracketed as
 * a change; first names the BEGUN step of the caller's four fault steps.
 * Returns the bytes given back.
 */
uint64_t budget_slot_empty(struct budget_shm *s, struct budget_slot *slot, enum budget_step first);
/* Under the lock: a slot leaves its group, which is freed with its last member. */
void budget_group_leave(struct budget_shm *s, struct budget_slot *slot);
/* How long a reclaim looks for a quiet moment before it leaves a dead slot
 * to the next scan: it holds the lock meanwhile. */
#define BUDGET_SETTLE_NS 2000000ull
/* The usages, and what the live slots hold of them, at one quiet moment. */
struct budget_quiet {
	uint64_t used, live;
	uint64_t group_used[BUDGET_GROUPS], group_live[BUDGET_GROUPS];
};
/* Whether no live slot is inside a change: then *q. */
bool budget_quiet_usage(struct budget_shm *s, const bool *alive, struct budget_quiet *q);
/* used -= min(n, used): for paths that may meet a leak, never the hot one. */
void budget_sub_clamped(_Atomic uint64_t *counter, uint64_t n);

/* ---- the accounting: a change of a slot and the usages ------------------ */

/*
 * Bracket a change of a slot's used and the shared usage (above): begun
 * before, done after.  The changes themselves are release operations, so
 * a reclaimer that reads one with acquire and then reads begun again sees
 * the begun that came before it (a seqlock's writer side, without a fence:
 * ThreadSanitizer cannot follow fences); done's release publishes the
 * change before the count.
 */
static inline void budget_slot_begin(struct budget_slot *slot)
{
	atomic_fetch_add_explicit(&slot->begun, 1, memory_order_relaxed);
}

static inline void budget_slot_end(struct budget_slot *slot)
{
	atomic_fetch_add_explicit(&slot->done, 1, memory_order_release);
}

/*
 * Add n to a usage unless that passes its limit: a compare-and-swap loop
 * that never lets it pass, so that no interleaving of any processes ever
 * has the device (or a group) over its budget.  false with what remains.
 */
static inline bool budget_usage_take(_Atomic uint64_t *usage, _Atomic uint64_t *limitp,
				     uint64_t n, uint64_t *remaining)
{
	uint64_t used = atomic_load_explicit(usage, memory_order_relaxed), limit;

	do {
		limit = atomic_load_explicit(limitp, memory_order_relaxed);
		if (used > limit || n > limit - used) {
			*remaining = used > limit ? 0 : limit - used;
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(usage, &used, used + n,
							memory_order_release,
							memory_order_relaxed));
	return true;
}

/* A peak raised to used (it shares used's cache line: cheap). */
static inline void budget_peak_raise(_Atomic uint64_t *peakp, _Atomic uint64_t *usage)
{
	uint64_t used = atomic_load_explicit(usage, memory_order_relaxed);
	uint64_t peak = atomic_load_explicit(peakp, memory_order_relaxed);

	while (used > peak &&
	       !atomic_compare_exchange_weak_explicit(peakp, &peak, used, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/*
 * Reserve n bytes: the device's usage, then the group's (undone if the
 * group has no room), then the process's own slot, which is what a
 * reclaimer gives back if this process dies.  A death between them is
 * settled by the reclaimer (the slot's begun and done disagree).
 */
static inline bool budget_reserve(struct budget_member *m, uint64_t n, uint64_t *remaining)
{
	struct budget_shm *s = m->shm;
	struct budget_group *g = m->group;
	uint64_t left;

	budget_slot_begin(m->slot);
	BUDGET_STEP(BUDGET_STEP_RESERVE_BEGUN);
	if (!budget_usage_take(&s->used, &s->limit, n, remaining)) {
		budget_slot_end(m->slot);
		return false;
	}
	BUDGET_STEP(BUDGET_STEP_RESERVE_SHARED);
	if (g && !budget_usage_take(&g->used, &g->limit, n, &left)) {
		atomic_fetch_sub_explicit(&s->used, n, memory_order_release);
		budget_slot_end(m->slot);
		*remaining = left;
		return false;
	}
	BUDGET_STEP(BUDGET_STEP_RESERVE_GROUP);
	atomic_fetch_add_explicit(&m->slot->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RESERVE_SLOT);
	budget_slot_end(m->slot);

	budget_peak_raise(&s->peak, &s->used);
	if (g)
		budget_peak_raise(&g->peak, &g->used);
	return true;
}

/* The mirror of budget_reserve: the slot first, then the group, then the device. */
static inline void budget_release(struct budget_member *m, uint64_t n)
{
	struct budget_shm *s = m->shm;

	budget_slot_begin(m->slot);
	BUDGET_STEP(BUDGET_STEP_RELEASE_BEGUN);
	atomic_fetch_sub_explicit(&m->slot->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RELEASE_SLOT);
	if (m->group)
		atomic_fetch_sub_explicit(&m->group->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RELEASE_GROUP);
	atomic_fetch_sub_explicit(&s->used, n, memory_order_release);
	BUDGET_STEP(BUDGET_STEP_RELEASE_SHARED);
	budget_slot_end(m->slot);
}

/* The room a usage has under its limit, as one sample. */
static inline uint64_t budget_room(_Atomic uint64_t *usage, _Atomic uint64_t *limitp)
{
	uint64_t used = atomic_load_explicit(usage, memory_order_relaxed);
	uint64_t limit = atomic_load_explicit(limitp, memory_order_relaxed);

	return used < limit ? limit - used : 0;
}

/* The room a member has: its device's, or its group's if that is less. */
static inline uint64_t budget_member_room(const struct budget_member *m)
{
	uint64_t room = budget_room(&m->shm->used, &m->shm->limit);
	uint64_t group_room;

	if (!m->group)
		return room;
	group_room = budget_room(&m->group->used, &m->group->limit);
	return group_room < room ? group_room : room;
}

/* ---- credit.c and credit_thread.c: per-thread credit ------------------- */

/*
 * A thread's credit on one account (a budget layer, or a device of the
 * preload shim), on a cache line of its own
 * (credit.c, credit_thread.c).  Only its thread writes bytes and size,
 * with relaxed loads and stores; others read them.  drain is set by a
 * thread about to be refused, and cleared by the owner when it gives its
 * credit back.  A line without a thread holds 0 bytes.
 */
struct budget_credit {
	alignas(64) _Atomic uint64_t bytes;	/* drawn from the usage, not handed out */
	_Atomic uint64_t size;			/* the credit's size now (credit.c) */
	_Atomic uint32_t drain;			/* another thread asks for it back */
};

struct budget_credit_book;

/*
 * What one charger keeps: its membership of the segment, and the credit
 * its threads draw ahead of their allocations (credit.c).  Nothing of it
 * lives in globals.
 */
struct budget_account {
	/* The largest request or block that credit serves: credit=SIZE, or
	 * BUDGET_CREDIT_AUTO_MAX with credit=auto; 0 (credit=0): none, every
	 * call goes to the segment. */
	uint64_t credit_max;
	bool credit_auto;		/* credit=auto: each thread's size adapts */
	pthread_key_t credit_key;	/* a thread's struct budget_credit, with credit */
	uint64_t serial;		/* unique per account: the key of budget_credit_last */
	bool credit_key_made;		/* credit_key exists until fini */
	/* pages of records, pushed and never popped until fini */
	_Atomic(struct budget_credit_book *) credit_books;
	struct budget_member m;		/* the segment, this process's slot, its group */
};

/* Keeps credit + request and twice the credit far from overflowing. */
#define BUDGET_CREDIT_MAX (1ull << 30)

/*
 * credit=auto (credit.c says why these): a thread's first draw takes
 * BUDGET_CREDIT_AUTO_MIN ahead, each later one twice the last, up to
 * BUDGET_CREDIT_AUTO_MAX, and never more than a 2^-BUDGET_CREDIT_AUTO_SHARE
 * share of the room the limit has left beside the request.
 */
#define BUDGET_CREDIT_AUTO_MIN (64ull << 10)
#define BUDGET_CREDIT_AUTO_MAX (16ull << 20)
#define BUDGET_CREDIT_AUTO_SHARE 4

bool budget_charge_slow(struct budget_account *b, uint64_t n, uint64_t *remaining);
void budget_uncharge_slow(struct budget_account *b, uint64_t n);

/* The record the calling thread last used (module.h, xdm_thread_last). */
extern _Thread_local struct xdm_thread_last budget_credit_last;

/* The calling thread's record through the key, or NULL (credit_thread.c). */
struct budget_credit *budget_credit_find(struct budget_account *b);

/* The calling thread's record, or NULL before its first call with credit. */
static inline struct budget_credit *budget_credit_mine(struct budget_account *b)
{
	struct budget_credit *c = xdm_thread_last_get(&budget_credit_last, b->serial);

	return c ? c : budget_credit_find(b);
}

/*
 * Reserve n for an allocation: from the calling thread's credit, or the
 * segment.  Inline, the case the credit covers: plain loads and a store on
 * the thread's own line, no atomic read-modify-write and no shared line
 * (credit.c says why that is enough, and does everything else).
 */
static inline bool budget_charge(struct budget_account *b, uint64_t n, uint64_t *remaining)
{
	struct budget_credit *c;
	uint64_t have;

	if (b->credit_max) {
		c = budget_credit_mine(b);
		if (c && n <= atomic_load_explicit(&c->size, memory_order_relaxed) &&
		    !atomic_load_explicit(&c->drain, memory_order_relaxed)) {
			have = atomic_load_explicit(&c->bytes, memory_order_relaxed);
			if (have >= n) {
				atomic_store_explicit(&c->bytes, have - n, memory_order_relaxed);
				return true;
			}
		}
	}
	return budget_charge_slow(b, n, remaining);
}

/*
 * Give n back from a block: to the calling thread's credit while it keeps
 * at most twice its size, or the segment.
 */
static inline void budget_uncharge(struct budget_account *b, uint64_t n)
{
	struct budget_credit *c;
	uint64_t have, size;

	if (b->credit_max) {
		c = budget_credit_mine(b);
		if (c) {
			size = atomic_load_explicit(&c->size, memory_order_relaxed);
			have = atomic_load_explicit(&c->bytes, memory_order_relaxed) + n;
			if (n <= size && have <= 2 * size &&
			    !atomic_load_explicit(&c->drain, memory_order_relaxed)) {
				atomic_store_explicit(&c->bytes, have, memory_order_relaxed);
				return;
			}
		}
	}
	budget_uncharge_slow(b, n);
}

/*
 * The credit parameter: auto (also NULL or ""), 0, or a size; an
 * XDM_E_CONFIG sentence prefixed by who otherwise.  Before
 * budget_credit_init; m.device_total is the base of a %.
 */
enum xdm_status budget_credit_use(struct budget_account *b, const char *who, const char *text);
/* With credit: the key and the first page of records. */
enum xdm_status budget_credit_init(struct budget_account *b);
/* Every thread's credit back to the segment, the records freed. */
void budget_credit_fini(struct budget_account *b);
/* The calling thread's first record; NULL without memory. */
struct budget_credit *budget_credit_claim(struct budget_account *b);
/* Bytes of credit held now, summed over the threads' records. */
uint64_t budget_credit_held(struct budget_account *b);
/* Ask every other thread that holds credit (mine is the caller's record,
 * or NULL) to give it back on its next call. */
void budget_credit_ask_back(struct budget_account *b, const struct budget_credit *mine);


#endif /* XDM_BUDGET_SEGMENT_H */
