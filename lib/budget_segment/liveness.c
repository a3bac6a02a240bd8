/* SPDX-License-Identifier: MIT */
/*
 * liveness.c - whether the process of a slot still runs.
 *
 * A process is named by its pid and its start time (field 22 of
 * /proc/<pid>/stat, in clock ticks since boot).  The pair survives pid
 * reuse: a new process that gets a dead one's pid has a later start time.
 * A zombie is dead too: a process killed with -9 whose parent has not yet
 * waited for it has already given its memory back to the system.
 *
 * xdmctl(1) links this library too, so that it calls a process dead exactly
 * when a reclaimer would.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

int budget_proc_identity(pid_t pid, uint64_t *start_time, char *state)
{
	char path[64], buf[1024];
	unsigned long long start;
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';

	/* The command name (field 2) may hold blanks and parentheses: the
	 * fields are counted from the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EINVAL;
	p += 2;
	if (state)
		*state = *p;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	if (sscanf(p, "%llu", &start) != 1)
		return -EINVAL;
	*start_time = start;
	return 0;
}

bool budget_slot_alive(pid_t pid, uint64_t start_time)
{
	uint64_t now_start;
	char state = '?';

	/*
	 * ESRCH: gone.  EPERM: the pid is another user's process now.  Every
	 * holder has the segment owner's uid (join refuses anyone else) and
	 * so can be signalled by us; a pid we may not signal was reused,
	 * which the start time alone misses when it happens within the
	 * dead process's clock tick.
	 */
	if (kill(pid, 0) != 0 && (errno == ESRCH || errno == EPERM))
		return false;
	if (budget_proc_identity(pid, &now_start, &state) != 0)
		return false;
	if (state == 'Z' || state == 'X')
		return false;
	return now_start == start_time;
}
