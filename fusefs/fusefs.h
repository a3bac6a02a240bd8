/* SPDX-License-Identifier: MIT */
/*
 * fusefs.h - the FUSE front end's own pieces: the server (server.c), the
 * filesystem calls that map onto the xdm_tree_* API (ops.c) and the
 * stale-mount cleanup (stale.c).
 */
#ifndef XDM_FUSEFS_FUSEFS_H
#define XDM_FUSEFS_FUSEFS_H

#define FUSE_USE_VERSION 31

#include <fuse.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#define FUSEFS_HIDDEN __attribute__((visibility("hidden")))

/* The name the mount carries: "xdm" as source, "fuse.xdm" as type. */
#define FUSEFS_NAME "xdm"

/* The value a file had when it was opened. */
struct fusefs_snapshot {
	char *text;
	size_t len;
	struct fusefs_snapshot *prev, *next;
};

/* What the filesystem calls see (fuse_get_context()->private_data). */
struct fusefs_ctx {
	uid_t uid;
	gid_t gid;
	struct timespec started;	/* every node's times */
	/*
	 * Every open file's snapshot.  A release that is still queued when the
	 * server stops, or a file open at unmount, never reaches fs_release:
	 * the server frees what is left here.
	 */
	pthread_mutex_t open_lock;
	struct fusefs_snapshot *open;
};

/* Free the snapshots of files never released. */
FUSEFS_HIDDEN void fusefs_free_open(struct fusefs_ctx *c);

FUSEFS_HIDDEN extern const struct fuse_operations fusefs_ops;

/*
 * Make dir mountable: a mount whose server died (ENOTCONN) is detached; a
 * live xdm tree there is -EBUSY.  0 or a negative errno, with msg.
 */
FUSEFS_HIDDEN int fusefs_clear_stale(const char *dir, char *msg, size_t len);

#endif /* XDM_FUSEFS_FUSEFS_H */
