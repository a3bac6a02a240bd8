/* SPDX-License-Identifier: MIT */
/*
 * user_agent.c - a process of a throwaway user, told what to do through a
 * pipe (user_agent.h).
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "tests/lib/user_agent.h"

void tu_agent_start(struct tu_agent *ag, const struct tu_user *u,
		    void (*body)(FILE *in, FILE *out, const void *arg), const void *arg)
{
	int down[2], up[2];
	pid_t parent = getpid();

	ck_assert_int_eq(pipe2(down, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(up, O_CLOEXEC), 0);
	/* Nothing buffered is written twice, by the parent and the child. */
	fflush(NULL);
	ag->user = u;
	ag->pid = fork();
	ck_assert_int_ge(ag->pid, 0);
	if (ag->pid == 0) {
		FILE *in, *out;

		close(down[1]);
		close(up[0]);
		tu_become(u, parent);
		in = fdopen(down[0], "r");
		out = fdopen(up[1], "w");
		if (!in || !out)
			_exit(123);
		body(in, out, arg);
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	ag->to = fdopen(down[1], "w");
	ag->from = fdopen(up[0], "r");
	ck_assert(ag->to && ag->from);
}

void tu_agent_stop(struct tu_agent *ag)
{
	char line[64];
	int status;

	fprintf(ag->to, "quit\n");
	fflush(ag->to);
	ck_assert_msg(fgets(line, sizeof(line), ag->from), "%s's agent said nothing to quit",
		      ag->user->name);
	ck_assert_str_eq(line, "bye\n");
	fclose(ag->to);
	fclose(ag->from);
	ck_assert_int_eq(waitpid(ag->pid, &status, 0), ag->pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s's agent ended with status 0x%x", ag->user->name, status);
}
