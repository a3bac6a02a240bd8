/* SPDX-License-Identifier: MIT */
/*
 * tree_read.h - one file of a tree read whole, or one directory listed, by
 * a child process, with a deadline and a bound on its size (tree_read.c).
 */
#ifndef XDM_TOOLS_XDMCTL_TREE_READ_H
#define XDM_TOOLS_XDMCTL_TREE_READ_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Reads path whole into *text (malloc'd, NUL-terminated, *len bytes, NUL
 * bytes of the file included): 0, or an errno: ETIMEDOUT when the child has
 * not read it all within timeout_ms, EFBIG when it holds more than max
 * bytes, ENOMEM, or what open(2) or read(2) said in the child.
 */
int xdmctl_tree_read(const char *path, size_t max, int timeout_ms, char **text, size_t *len);

/*
 * The names in directory path, the same way: one per line, "." and ".."
 * and names holding a newline left out.  Errors as xdmctl_tree_read's.
 */
int xdmctl_tree_list(const char *path, size_t max, int timeout_ms, char **text, size_t *len);

/*
 * Waits up to about 100 ms for a child that reads a tree to end, then
 * leaves it (one held in a FUSE wait by a stopped server cannot be ended).
 */
void xdmctl_child_reap(pid_t child);

#endif /* XDM_TOOLS_XDMCTL_TREE_READ_H */
