/* SPDX-License-Identifier: MIT */
/*
 * user_agent.h - a process of a throwaway user (users.h), told what to do
 * through a pipe: the suites that run as several users (check_users,
 * check_tenants) keep one such process alive across a test's steps, while
 * root watches from outside.
 *
 * The agent reads its commands on in and answers on out, a line each; its
 * own protocol is the suite's, but for the end: "quit" is answered "bye",
 * and the agent exits 0.
 */
#ifndef XDM_TESTS_USER_AGENT_H
#define XDM_TESTS_USER_AGENT_H

#include <stdio.h>
#include <sys/types.h>

#include "tests/lib/users.h"

struct tu_agent {
	pid_t pid;
	FILE *to, *from;	/* its commands, its answers */
	const struct tu_user *user;
};

/*
 * Starts body(in, out, arg) in a child that has become u for good
 * (tu_become); the child exits 0 when body returns.  The test fails where
 * the agent cannot be started.
 */
void tu_agent_start(struct tu_agent *ag, const struct tu_user *u,
		    void (*body)(FILE *in, FILE *out, const void *arg), const void *arg);

/* "quit", answered "bye", and the agent's exit 0, or the test fails. */
void tu_agent_stop(struct tu_agent *ag);

#endif /* XDM_TESTS_USER_AGENT_H */
