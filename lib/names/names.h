/* SPDX-License-Identifier: MIT */
/*
 * names.h - a user or a group as a sentence names it.  The budget
 * segment's library (whose segment, which group's directory), the logging
 * module (whose file) and xdmctl (whose process) link this library.
 *
 * Names come from the name service, which may be slow or have no entry (a
 * container without the host's users, a user removed since): only
 * sentences ask for them, and the number stands in where there is no name.
 */
#ifndef XDM_LIB_NAMES_H
#define XDM_LIB_NAMES_H

#include <stddef.h>
#include <sys/types.h>

/* uid's name into buf, or its number where it has none. */
void names_user(uid_t uid, char *buf, size_t len);

/* gid's name into buf, or its number where it has none. */
void names_group(gid_t gid, char *buf, size_t len);

#endif /* XDM_LIB_NAMES_H */
