/* SPDX-License-Identifier: MIT */
/*
 * as_owner.h - work done inside another user's file by a child process
 * that has become that user, never by root itself (as_owner.c).
 */
#ifndef XDM_TOOLS_XDMCTL_AS_OWNER_H
#define XDM_TOOLS_XDMCTL_AS_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Whom a child becomes. */
struct xdmctl_identity {
	uid_t uid;
	gid_t gid;
};

/*
 * Whether a file (st) is one that users other than root can write, and if
 * so whom root becomes to work inside it: its owner, or for a file of
 * root's that a group or everyone can write, nobody (in that group).
 * false: only root can write it, and root may work in it itself.
 */
bool xdmctl_owner_identity(const struct stat *st, struct xdmctl_identity *who);

/* The work: dir is the directory's descriptor in the child; out is filled. */
typedef void (*xdmctl_as_owner_fn)(void *arg, int dir, void *out);

/*
 * Runs fn(arg, dir, out) in a child that holds who's credentials and
 * nothing else of this process's (as_owner.c), and copies the size bytes
 * of out it filled back here.  The child is killed if it has not answered
 * within timeout_ms.  0, or -1 with why the work was not done (the child
 * could not drop root, died, or was stopped) as a phrase in why.
 */
int xdmctl_as_owner(const struct xdmctl_identity *who, int dir, xdmctl_as_owner_fn fn, void *arg,
		    void *out, size_t size, int timeout_ms, char *why, size_t len);

#endif /* XDM_TOOLS_XDMCTL_AS_OWNER_H */
