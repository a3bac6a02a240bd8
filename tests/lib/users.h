/* SPDX-License-Identifier: MIT */
/*
 * users.h - throwaway local users and groups for the suites that run as
 * several real users (check_users, check_tenants, check_ipc_users,
 * check_ipc_cuda).
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

/*
 * Every user and group made so far, removed, then whatever fn of
 * tu_users_at_end the suite set (also run at exit and on signals).
 */
void tu_users_remove(void);

/*
 * fn (the suite's own leftovers: files, directories) runs after the users
 * are removed, at exit and on the signals tu_users_init catches, in the
 * suite's process only.
 */
void tu_users_at_end(void (*fn)(void));

/* A program of the machine (PATH, then /usr/sbin and /sbin) into out. */
bool tu_find_tool(const char *name, char *out, size_t len);

/* In a child of parent: become u for good (exits 120-122 if it cannot). */
void tu_become(const struct tu_user *u, pid_t parent);

/*
 * Whether the suite can run here: fn, run in a child of parent (the
 * caller), returns 0 for yes, and anything else, with a sentence in msg,
 * for no.  NULL, or why not (fn's sentence, else failed).
 */
const char *tu_probe(int (*fn)(pid_t parent, const void *arg, char *msg, size_t len),
		     const void *arg, const char *failed, char *why, size_t len);

/*
 * Can u build a runtime from this build tree (its modules must be
 * readable by other users)?  NULL, or why not (the suite skips).
 */
const char *tu_runtime_probe(const struct tu_user *u, char *why, size_t len);

/*
 * A checked fixture: each test's process (check forks one per test) dies
 * with the suite's, so that a run killed or interrupted leaves no process
 * of the users behind (userdel refuses a user that still runs one); the
 * users' processes die with the test's in turn (tu_become).
 */
void tu_die_with_main(void);

#endif /* XDM_TESTS_USERS_H */
