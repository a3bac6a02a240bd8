/* SPDX-License-Identifier: MIT */
/*
 * users.h - throwaway local users and groups for the suites that run as
 * several real users (tests/process/check_tenants.c).
 *
 * Run as root.  Users are xdmtest-<role>-<pid of the suite>, groups
 * xdmtest-<role>-<pid>, made with useradd and groupadd (system accounts,
 * no home, no shell) and removed with userdel and groupdel: when the suite
 * ends, from a signal handler if it is interrupted, and at the start of a
 * later run if it was killed outright (its pid is gone).  Roles are three
 * letters; a suite uses its own, so that two suites never take each
 * other's users for leftovers.
 *
 * A process becomes a user for good with tu_become: its groups are the
 * user's (the groups file's, so a group made here counts), and it dies
 * with its parent.  Checks run as root would prove nothing: root passes
 * every permission check.
 */
#ifndef XDM_TESTS_USERS_H
#define XDM_TESTS_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TU_USER_PREFIX "xdmtest-"

struct tu_user {
	char name[32];
	uid_t uid;
	gid_t gid;		/* its own group */
};

struct tu_group {
	char name[32];
	gid_t gid;
};

/*
 * Ready to make users: root, with the shadow tools; every leftover of a
 * killed run of roles (a NULL-ended list) removed; removal at exit and on
 * signals set up.  false with why (the suite skips).
 */
bool tu_users_init(const char *const *roles, char *why, size_t len);

/* A group, or a user in its own group and in member_of (NULL: none). */
bool tu_group_make(struct tu_group *g, const char *role);
bool tu_user_make(struct tu_user *u, const char *role, const struct tu_group *member_of);

/* Every user and group made so far, removed (also run at exit). */
void tu_users_remove(void);

/* In a child of parent: become u for good (exits 120-122 if it cannot). */
void tu_become(const struct tu_user *u, pid_t parent);

#endif /* XDM_TESTS_USERS_H */
