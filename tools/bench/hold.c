/* SPDX-License-Identifier: MIT */
/*
 * hold.c - --mount and --hold: the bench as a live program to look at.
 *
 * --mount only sets XDM_MOUNT, so the mount is made the way any program's is:
 * by the runtime when it is built.  The bench then insists that it worked,
 * since a person who asked for a mount wants to hear that it failed.
 * --hold waits with SIGINT and SIGTERM blocked and taken by sigtimedwait(),
 * so that Ctrl-C ends the hold and the bench still exits normally, which
 * unmounts the tree.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

int bench_mount_request(const struct bench_opts *o)
{
	if (o->mount && setenv("XDM_MOUNT", o->mount, 1)) {
		fprintf(stderr, "xdm-bench: cannot set XDM_MOUNT: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int bench_mount_check(const struct bench_opts *o)
{
	char dir[4096];

	if (!o->mount)
		return 0;
	if (!xdm_mount_point(dir, sizeof(dir))) {
		fprintf(stderr, "xdm-bench: --mount %s: the tree is not mounted (the reason is "
			"above)\n", o->mount);
		return BENCH_EXIT_FAIL;
	}
	fprintf(stderr, "xdm-bench: the tree is mounted at %s\n", dir);
	return 0;
}

void bench_hold(const struct bench_opts *o)
{
	struct timespec left = { .tv_sec = (time_t)o->hold_seconds }, start, now;
	sigset_t set, old;
	int sig;

	if (!o->hold_seconds)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	fprintf(stderr, "xdm-bench: holding the runtime for %llu s (SIGINT or SIGTERM ends "
		"it)\n", (unsigned long long)o->hold_seconds);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		sig = sigtimedwait(&set, NULL, &left);
		if (sig > 0 || errno != EINTR)
			break;
		/* Interrupted by something else: wait out what is left. */
		clock_gettime(CLOCK_MONOTONIC, &now);
		time_t spent = now.tv_sec - start.tv_sec;

		if (spent >= (time_t)o->hold_seconds)
			break;
		left.tv_sec = (time_t)o->hold_seconds - spent;
		left.tv_nsec = 0;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}
