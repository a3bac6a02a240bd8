/* SPDX-License-Identifier: MIT */
/*
 * mountinfo.h - the mounts of this mount namespace, from
 * /proc/self/mountinfo.  The FUSE front end (fusefs/stale.c) and xdmctl(1)
 * link this library: neither ever enters a mount to list it.
 */
#ifndef XDM_LIB_MOUNTINFO_H
#define XDM_LIB_MOUNTINFO_H

/*
 * Calls fn with every mount's point (unescaped: \040 is a space again) and
 * type, in the file's order: later mounts lie over earlier ones.  fn
 * returns 0 to go on, anything else to stop, which is returned.  -errno if
 * the file cannot be read.
 */
int mountinfo_each(int (*fn)(const char *point, const char *type, void *arg), void *arg);

#endif /* XDM_LIB_MOUNTINFO_H */
