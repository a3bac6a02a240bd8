/* SPDX-License-Identifier: MIT */
/*
 * segments.h - what xdmctl reads of the machine: the budget
 * segments and their processes (segments.c), and the trees that
 * processes mount (mounts.c).
 */
#ifndef XDM_TOOLS_XDMCTL_SEGMENTS_H
#define XDM_TOOLS_XDMCTL_SEGMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/budget_segment/segment.h"
#include "xdmctl.h"

/* How a process of a segment stands. */
enum xdmctl_proc_state {
	XDMCTL_PROC_LIVE,
	XDMCTL_PROC_STOPPED,	/* SIGSTOP or a debugger: its bytes stay counted */
	XDMCTL_PROC_DEAD,	/* gone, its bytes counted until a reclaim */
};

struct xdmctl_proc {
	pid_t pid;		/* as its own pid namespace sees it */
	uint64_t start_time;	/* /proc/<pid>/stat field 22, as the slot has it */
	uint64_t used;		/* bytes the slot says it holds */
	uint64_t pidns;		/* its pid namespace's inode */
	bool here;		/* in xdmctl's pid namespace: /proc/<pid> is it */
	/* Its pid in xdmctl's pid namespace (the one kill(1) takes here), 0
	 * where it is not known: dead, or in a namespace not below ours. */
	pid_t pid_here;
	enum xdmctl_proc_state state;
	uint32_t kind;		/* enum budget_slot_kind: xdm's budget, the preload shim */
	char comm[BUDGET_COMM_MAX];	/* its command, as it recorded it */
	char container[BUDGET_CONTAINER_MAX];	/* its container's name, or cgroup */
	char group[BUDGET_GROUP_NAME_MAX];	/* its group, or "" */
	const struct xdmctl_mount *mount;	/* the tree it serves, or NULL */
};

/* A group of a budget (xdm-budget(7), GROUPS). */
struct xdmctl_group {
	char name[BUDGET_GROUP_NAME_MAX];
	uint64_t limit, used, peak, refusals;
	uint32_t members;
};

/* How a process is charged, as a word: "xdm", "preload", "xdm+preload". */
const char *xdmctl_proc_via(const struct xdmctl_proc *p);

struct xdmctl_segment {
	char name[BUDGET_NAME_MAX];	/* "xdm-budget-<key>", no slash */
	char key[BUDGET_KEY_MAX + 1];	/* the device's UUID, or the configured key */
	char path[4096];		/* the file under the shm directory */
	uid_t owner;
	/* Empty when the segment was read; otherwise why not, as a phrase. */
	char unreadable[160];
	/* Not read for its owner: another user's, where anyone can make a
	 * file (reader.c).  budget --set may still reach it as root. */
	bool skipped;
	uint64_t limit, used, peak, refusals, device_total;
	char device_uuid[BUDGET_UUID_MAX];	/* the device whose budget it is */
	uint32_t unsettled;
	size_t nprocs;
	struct xdmctl_proc procs[BUDGET_SLOTS];
	size_t ngroups;
	struct xdmctl_group groups[BUDGET_GROUPS];
};

/*
 * What a run has said once and does not say again: the files of other
 * users it skipped (top and serve read the directory many times).
 */
#define XDMCTL_SAID_MAX 64
struct xdmctl_said {
	size_t nskipped;
	struct {
		char name[BUDGET_NAME_MAX];
		uid_t owner;
	} skipped[XDMCTL_SAID_MAX];
	bool more;		/* past the table: said once that more are skipped */
};

/*
 * Every "xdm-budget-*" file of ctx->shm_dir, sorted by key, each one's
 * processes by pid.  A segment that
 * cannot be read (another user's, or not a budget) is listed with the
 * reason in unreadable; one skipped for its owner is also said on
 * standard error, once per run (ctx->said).  0, or a sentence said and
 * XDMCTL_EXIT_FAIL.
 */
int xdmctl_segments_read(const struct xdmctl_ctx *ctx, const char *cmd,
			 struct xdmctl_segment **out, size_t *n);

/*
 * Each live process's pid_here, for those of other pid namespaces
 * (containers): found in /proc by its namespace and pid, and its state
 * read there too (nspid.c).  Those of xdmctl's own namespace have theirs
 * from xdmctl_segments_read already.
 */
void xdmctl_segments_find_pids(struct xdmctl_segment *segs, size_t n);

/*
 * The segment DEVICE names: a key, a unique prefix of one, or a segment
 * name; NULL when there is exactly one.  Returns it, or NULL with a
 * sentence said and *rc set (XDMCTL_EXIT_NONE or XDMCTL_EXIT_USAGE).
 */
struct xdmctl_segment *xdmctl_segment_find(struct xdmctl_segment *segs, size_t n,
					   const char *device, const char *cmd, int *rc);

const char *xdmctl_proc_state_name(enum xdmctl_proc_state state);

/* The group of seg named name, or NULL. */
const struct xdmctl_group *xdmctl_group_find(const struct xdmctl_segment *seg, const char *name);

/* show.c: a budget's summary line(s), and a budget as a JSON object. */
void xdmctl_segment_text(FILE *f, const struct xdmctl_segment *seg);
void xdmctl_segment_json(FILE *f, const struct xdmctl_segment *seg, bool with_procs);
/* A group as a JSON object's members, without the braces. */
void xdmctl_group_json(FILE *f, const struct xdmctl_group *g);

/* ---- budget_set.c: a limit changed under the segment's lock -------- */

/*
 * Sets the limit of seg (group NULL) or of its group named group to the
 * size text, as a write to a tree's budget/limit or budget/group_limit
 * does, and says what changed (JSON with ctx->json).  An exit code, the
 * reason said: a size that cannot be read changes nothing.
 */
int xdmctl_budget_set(const struct xdmctl_ctx *ctx, const struct xdmctl_segment *seg,
		      const char *group, const char *text);

/* ---- mounts.c ---------------------------------------------------- */

#define XDMCTL_RUNTIMES_MAX 32

/* One runtime directory of a tree, MOUNT/N/. */
struct xdmctl_runtime_view {
	char name[32];			/* "0", "0.1" */
	char uuid[48];
	uint64_t bytes, blocks, peak, allocs, frees, failures;
};

/* One tree of /proc/self/mountinfo with type fuse.xdm. */
struct xdmctl_mount {
	char path[4096];
	pid_t pid;		/* MOUNT/pid; 0 when it could not be read */
	/* 0, or why the tree could not be read: EACCES (another user's),
	 * ETIMEDOUT (its process does not answer: stopped, or dead), ... */
	int err;
	size_t nruntimes;
	struct xdmctl_runtime_view rt[XDMCTL_RUNTIMES_MAX];
};

/*
 * Every xdm tree mounted in this mount namespace, each read by a child
 * process that is killed if it has not answered within timeout_ms: the
 * server of a tree is a thread of the process it describes, and a stopped
 * process would hang a reader forever.  with_runtimes reads the runtime
 * directories too (for top); otherwise only pid.  Trees outside
 * ctx->trees_under, when it is set, are neither listed nor read.  0, or
 * -errno.
 */
int xdmctl_mounts_read(const struct xdmctl_ctx *ctx, bool with_runtimes, int timeout_ms,
		       struct xdmctl_mount **out, size_t *n);

/* The mount served by pid, or NULL. */
const struct xdmctl_mount *xdmctl_mount_of(const struct xdmctl_mount *mounts, size_t n,
					   pid_t pid);

/* Whether some budget's process serves this tree (after the link below). */
bool xdmctl_tree_has_budget(const struct xdmctl_mount *m, const struct xdmctl_segment *segs,
			    size_t nsegs);

/* Sets each process's mount in the segments. */
void xdmctl_segments_link_mounts(struct xdmctl_segment *segs, size_t nsegs,
				 const struct xdmctl_mount *mounts, size_t nmounts);

#endif /* XDM_TOOLS_XDMCTL_SEGMENTS_H */
